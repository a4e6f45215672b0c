"""Feedback-shift full conformal: closed-form updates against refitting per candidate, side by side.

On the fluorescence problem of ``repro_fluorescence_feedback.py`` (blue, n = 96 training
sequences, order-2 features p = 92, ridge penalty 10 with the intercept unpenalised, the design
pool of all 2^13 sequences, λ = 6, the grid 0, 0.02, ..., 2.2 of 111 candidate labels), for the
same designed test inputs, three ways to compute the set with weights recomputed per candidate:

* ``closed``  -- :func:`calibprob.calibrators.conformal.feedback.feedback_conformal_set`: one
  smoother matrix of the augmented data, every leave-one-out fit a rank-one downdate affine in
  the candidate label; split into ``smoother`` (the matrix and the affine coefficients on the
  data and the pool), ``normaliser`` (log Z for the (n + 1) x 111 leave-one-out models, one sum
  over the 8 192 pool sequences each) and ``rest`` (scores, weights, the set);
* ``loo-inv`` -- the authors' ridge-specialised path (``calibrate.ConformalRidgeFeedbackCovariateShift``),
  re-written here: n + 1 ridge inversions (one per left-out point), coefficients affine in the
  candidate label, then the same normalisers through a (n, p, 111) x (8 192, p) tensor product;
* ``refit``   -- :func:`~calibprob.calibrators.conformal.feedback.refit_conformal_set`: the
  model refitted for every (candidate, left-out point), (n + 1) x 111 = 10 767 fits, each
  predicting on the pool -- the authors' black-box path (``calibrate.ConformalFeedbackCovariateShift``).

All three must give the same set (checked). BLAS is single-threaded (``OPENBLAS_NUM_THREADS=1``
set before NumPy loads) so that the ratios are not thread contention on a shared machine.

Run::

    python benchmarks/bench_feedback_shift.py [--points 3] [--refit-points 1] [--data ../shared/data]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from calibprob.calibrators.conformal import feedback as fb  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import repro_fluorescence_feedback as repro  # noqa: E402

LAM = 6.0


def closed(X, y, x_t, pool, smoother, grid):
    """The closed form, timed by stage: (in_set, {stage: seconds})."""
    t0 = time.perf_counter()
    loo = fb.loo_affine(smoother, X, y, x_t, pool)
    t1 = time.perf_counter()
    c_pool, a_pool = loo.on_pool()
    log_z = fb._log_normaliser(c_pool, a_pool, LAM, grid)
    t2 = time.perf_counter()
    n = X.shape[0]
    c_own, a_own = loo.at_own_point()
    scores = np.empty((n + 1, grid.size))
    scores[:n] = np.abs(y[:, None] - (c_own[:n, None] + grid[None, :] * a_own[:n, None]))
    scores[n] = np.abs(grid - c_own[n])
    logw = LAM * (c_own[:, None] + grid[None, :] * a_own[:, None]) - log_z
    in_set = fb.set_from_scores(scores, logw, 0.9)
    t3 = time.perf_counter()
    return in_set, {"smoother": t1 - t0, "normaliser": t2 - t1, "rest": t3 - t2}


def loo_inversions(X, y, x_t, pool, gamma, grid):
    """n + 1 ridge inversions, one per left-out point (the authors' ridge path, re-written)."""
    t0 = time.perf_counter()
    S = np.vstack([X, x_t])
    n, p = X.shape
    reg = gamma * np.eye(p)
    reg[0, 0] = 0.0
    C = np.empty((n + 1, p))
    A = np.zeros((n + 1, p))
    for i in range(n + 1):
        keep = np.arange(n + 1) != i
        Si = S[keep]
        Ai = np.linalg.inv(Si.T @ Si + reg) @ Si.T  # p x n, the authors' (X^T X + Γ)^-1 X^T
        if i < n:
            C[i] = Ai[:, :-1] @ np.delete(y, i)
            A[i] = Ai[:, -1]
        else:
            C[i] = Ai @ y
    t1 = time.perf_counter()
    beta = C[:, :, None] + grid[None, None, :] * A[:, :, None]  # (n + 1, p, k)
    pred_pool = np.tensordot(beta, pool, axes=(1, 1))  # (n + 1, k, m)
    z = LAM * pred_pool
    top = z.max(axis=2, keepdims=True)
    log_z = top[..., 0] + np.log(np.exp(z - top).sum(axis=2))
    t2 = time.perf_counter()
    pred_own = np.einsum("ipk,ip->ik", beta, S)
    scores = np.empty((n + 1, grid.size))
    scores[:n] = np.abs(y[:, None] - pred_own[:n])
    scores[n] = np.abs(grid - pred_own[n])
    logw = LAM * pred_own - log_z
    in_set = fb.set_from_scores(scores, logw, 0.9)
    t3 = time.perf_counter()
    return in_set, {"smoother": t1 - t0, "normaliser": t2 - t1, "rest": t3 - t2}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(repro.DEFAULT_DATA))
    ap.add_argument("--points", type=int, default=3, help="designed test inputs for closed / loo-inv")
    ap.add_argument("--refit-points", type=int, default=1, help="of them, how many also by refits")
    args = ap.parse_args(argv)
    X_all, y_true, se = repro.load(Path(args.data), "blue")
    n, gamma, grid = 96, repro.PENALTY[96], repro.GRID
    smoother = fb.RidgeSmoother(penalty=gamma, unpenalized=(0,))
    print(
        f"n = {n}, p = {X_all.shape[1]}, pool {X_all.shape[0]}, grid {grid.size}, λ = {LAM:g}; "
        f"BLAS threads {os.environ['OPENBLAS_NUM_THREADS']}; load {os.getloadavg()[0]:.2f}"
    )
    rows = []
    for s in range(args.points):
        rng = np.random.default_rng(s)
        idx = rng.choice(X_all.shape[0], n, replace=True)
        X, y = X_all[idx], np.fmax(rng.normal(y_true[idx], se[idx]), 0.0)
        mu = smoother.fit_predict(X, y, X_all)
        p = np.exp(LAM * (mu - mu.max()))
        x_t = X_all[rng.choice(X_all.shape[0], p=p / p.sum())]
        set_c, t_c = closed(X, y, x_t, X_all, smoother, grid)
        set_l, t_l = loo_inversions(X, y, x_t, X_all, gamma, grid)
        assert np.array_equal(set_c, set_l), "closed form and LOO inversions disagree"
        t_r = np.nan
        if s < args.refit_points:
            t0 = time.perf_counter()
            ref = fb.refit_conformal_set(
                X, y, x_t, smoother=smoother, lam=LAM, grid=grid, pool=X_all, on_outside="ignore"
            )
            t_r = time.perf_counter() - t0
            assert np.array_equal(set_c, ref.in_set), "closed form and refits disagree"
        rows.append((s, t_c, t_l, t_r))
        tc, tl = sum(t_c.values()), sum(t_l.values())
        print(
            f"point {s}: closed {tc * 1e3:7.1f} ms (smoother {t_c['smoother'] * 1e3:.1f}, normaliser "
            f"{t_c['normaliser'] * 1e3:.1f}, rest {t_c['rest'] * 1e3:.1f}) | loo-inv {tl * 1e3:7.1f} ms "
            f"(inversions {t_l['smoother'] * 1e3:.1f}, normaliser {t_l['normaliser'] * 1e3:.1f}, rest "
            f"{t_l['rest'] * 1e3:.1f}) x{tl / tc:.1f} | refit "
            + ("—" if np.isnan(t_r) else f"{t_r:.1f} s x{t_r / tc:.0f}")
            + f" | set size {int(set_c.sum())}"
        )
    print(f"load {os.getloadavg()[0]:.2f}; the same set from all three paths on every point")


if __name__ == "__main__":
    main()
