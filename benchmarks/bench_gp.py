"""Exact-GP fit: calibprob against scikit-learn, side by side, and against the BLAS floor.

Usage::

    python benchmarks/bench_gp.py                      # n = 500, 1000, 2000, 3000
    python benchmarks/bench_gp.py --n 500 1000 --sklearn-max-n 2000
    python benchmarks/bench_gp.py --no-subset          # calibprob's multi-start on every row

Same data, model, starts and box for both (TARGETS.md, P10): a smooth function
of d = 4 uniform inputs plus noise (y centred, so the zero-mean model suits it);
ARD squared-exponential kernel with an estimated noise variance, zero mean,
maximum likelihood, three starts. calibprob runs its own fit
(``GaussianProcessRegressor(n_restarts=3, random_state=0)``). Below 1000 rows
that is a start scan over the signal variance without gradients, then L-BFGS-B
from each start, on every row; from 1000 rows (``n_hyper_subset="auto"``) the
same multi-start runs on a seeded 500-row subset, and its optimum, with the
subset objective's Hessian (central differences) times n/m as the initial
curvature, is refined on every row by BFGS under L-BFGS-B's stopping rules.
scikit-learn's ``GaussianProcessRegressor`` with the kernel
``C * RBF(ARD) + WhiteKernel`` gets calibprob's three starting points (those of
the subset fit when there is one, mapped to scikit-learn's parameter order and
y scale), the full data's box, and runs the same L-BFGS-B from each through a
custom ``optimizer``. ``--starts raw`` (default) hands it calibprob's starting
points; ``--starts scanned`` the points calibprob's L-BFGS-B starts from after
the scan. Either way the optima must agree (``rel dLML``).

Columns: calibprob's first fit at that n (``cp cold``), scikit-learn's fit, and
calibprob's second fit (``cp warm``), in that order, so both see the same
machine load; the ratio of the median calibprob time to scikit-learn's;
scikit-learn's objective evaluations; the log marginal likelihood of each and
their relative difference; calibprob's evaluations (value only / value and
gradient, ``+ k@m`` the Hessian's on the subset, ``j@n`` the refinement's on all
rows) and ``floor x``: calibprob's time divided by the sum over its evaluations
of one Cholesky + one triangular solve at that evaluation's size (best of 5), and
``grad x``: the same with LAPACK's inverse from the factor (``dpotri``) added for
every evaluation with a gradient, the least an exact gradient needs (see :func:`_floor`).
One BLAS thread (``OPENBLAS_NUM_THREADS=1`` is set before NumPy loads unless
already set); the machine load (``os.getloadavg``) is printed before and after
each row. The first line gives the cold-start cost of a new process (import,
first tiny fit): the exact GP compiles nothing.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")


def _data(n: int, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 4))
    y = np.sin(3 * X[:, 0]) + np.cos(2 * X[:, 1] * X[:, 2]) + 0.5 * X[:, 3] + 0.1 * rng.normal(size=n)
    return X, y - y.mean()


def _floor(n: int, gradient: bool = False) -> float:
    r"""Best-of-5 time of one Cholesky + one triangular solve of an n x n SE covariance.

    With ``gradient``, plus LAPACK's inverse from the factor (``dpotri``): the least any
    exact gradient of the log marginal likelihood needs, since every trace term
    :math:`\operatorname{tr}(K^{-1}\partial K/\partial\theta)` contracts with all of
    :math:`K^{-1}`'s entries (Cholesky :math:`n^3/3` flops, inverse from it :math:`2n^3/3`).
    """
    import numpy as np
    import scipy.linalg

    X, y = _data(n)
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    K = np.exp(-d2 / 0.5) + 0.01 * np.eye(n)
    best = np.inf
    for _ in range(5):
        t = time.perf_counter()
        L = scipy.linalg.lapack.dpotrf(K, lower=1)[0]
        scipy.linalg.lapack.dtrtrs(L, y, lower=1)
        if gradient:
            scipy.linalg.lapack.dpotri(L, lower=1)
        best = min(best, time.perf_counter() - t)
    return best


def _grad_floor(n: int) -> float:
    return _floor(n, gradient=True)


def _calibprob(X, y, subset="auto"):
    from calibprob.bases.gp import GaussianProcessRegressor

    t = time.perf_counter()
    gp = GaussianProcessRegressor(n_restarts=3, random_state=0, n_hyper_subset=subset).fit(X, y)
    return gp, time.perf_counter() - t


def _evaluations(gp, floors, grad_floors):
    """Objective evaluations of a fit and their floors at their sizes.

    Returns the evaluation counts as text, the sum over evaluations of (Cholesky +
    solve), and the same sum with the inverse from the factor added for every
    evaluation with a gradient (the exact-gradient floor, :func:`_floor`). With a
    subset (``fit_info_["hyper_subset"]``) the subset fit's evaluations (start scan,
    L-BFGS-B, the Hessian's central differences of the gradient) are on ``m`` rows and
    the refinement's on all rows.
    """
    info = gp.fit_info_
    n = gp.X_train_.shape[0]
    ev = info["n_evaluations"]
    sub = info.get("hyper_subset")
    if sub is None:
        count = ev["value"] + ev["value_and_grad"]
        grad = ev["value"] * floors(n) + ev["value_and_grad"] * grad_floors(n)
        return f"{ev['value']}/{ev['value_and_grad']}", count * floors(n), grad
    m = sub["size"]
    sev = sub["fit_info"]["n_evaluations"]
    n_hess = sub.get("hessian_evaluations", 0)
    n_sub = sev["value"] + sev["value_and_grad"] + n_hess
    n_full = ev["value"] + ev["value_and_grad"]
    text = f"{sev['value']}/{sev['value_and_grad']}+{n_hess}@{m} {n_full}@n"
    grad = (
        sev["value"] * floors(m)
        + (sev["value_and_grad"] + n_hess) * grad_floors(m)
        + ev["value"] * floors(n)
        + ev["value_and_grad"] * grad_floors(n)
    )
    return text, n_sub * floors(m) + n_full * floors(n), grad


def _sklearn(X, y, gp, which="starts"):
    """scikit-learn from calibprob's starts (``which``) and box, in its parameter order."""
    import numpy as np
    from scipy.optimize import fmin_l_bfgs_b
    from sklearn.gaussian_process import GaussianProcessRegressor as SkGP
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    info = gp.fit_info_
    d = X.shape[1]
    shift = 2.0 * np.log(info["y_scale"])  # calibprob's box / starts are for y / y_scale
    # with a subset, calibprob's starts are the subset fit's (on its own y scale)
    src = info["hyper_subset"]["fit_info"] if "hyper_subset" in info else info
    start_shift = 2.0 * np.log(src["y_scale"])
    # calibprob: [log l (d), log var, log noise]; sklearn: [log C, log l (d), log noise]
    perm = [d] + list(range(d)) + [d + 1]
    lo = np.log([b[0] for b in info["bounds"].values()])
    hi = np.log([b[1] for b in info["bounds"].values()])
    lo[d:] += shift
    hi[d:] += shift
    starts = [np.asarray(x0, float).copy() for x0 in src[which]]
    for x0 in starts:
        x0[d:] += start_shift
    box = np.column_stack([lo, hi])[perm]
    queue = [x0[perm] for x0 in starts]

    calls = [0]

    def optimizer(obj_func, initial_theta, bounds=None):
        x0 = queue.pop(0)

        def counted(theta):
            calls[0] += 1
            return obj_func(theta)

        x, f, _ = fmin_l_bfgs_b(counted, x0, bounds=box, maxiter=300)
        return x, f

    kernel = ConstantKernel(1.0, tuple(np.exp(box[0]))) * RBF(
        np.ones(d), [tuple(b) for b in np.exp(box[1 : d + 1])]
    ) + WhiteKernel(1.0, tuple(np.exp(box[d + 1])))
    sk = SkGP(kernel, optimizer=optimizer, n_restarts_optimizer=len(starts) - 1, normalize_y=False, random_state=0)
    t = time.perf_counter()
    sk.fit(X, y)
    sk.n_evaluations_ = calls[0]
    return sk, time.perf_counter() - t


def _row(n, args, floors, grad_floors):
    """One n: calibprob (first fit at this n), scikit-learn, calibprob again (warm), interleaved."""
    import numpy as np

    X, y = _data(n)
    load0 = os.getloadavg()[0]
    subset = None if args.no_subset else "auto"
    gp, t_cold = _calibprob(X, y, subset)
    sk, t_sk = (
        _sklearn(X, y, gp, "starts" if args.starts == "raw" else "lbfgs_starts")
        if n <= args.sklearn_max_n
        else (None, None)
    )
    gp2, t_warm = _calibprob(X, y, subset)
    assert gp2.log_marginal_likelihood_value_ == gp.log_marginal_likelihood_value_
    t_cp = float(np.median([t_cold, t_warm]))
    evals, floor_total, grad_total = _evaluations(gp, floors, grad_floors)
    lml_cp = gp.log_marginal_likelihood_value_
    if sk is not None:
        lml_sk = float(sk.log_marginal_likelihood_value_)
        sk_txt = f"{t_sk:7.1f}s {t_cp / t_sk:6.3f} {sk.n_evaluations_:>4}"
        rel = f"{abs(lml_cp - lml_sk) / abs(lml_sk):9.1e}"
        lml_sk_txt = f"{lml_sk:14.6f}"
    else:
        sk_txt, rel, lml_sk_txt = f"{'-':>8} {'-':>6} {'-':>4}", f"{'-':>9}", f"{'-':>14}"
    print(
        f"{n:>5} | {t_cold:6.2f}s {t_warm:6.2f}s {sk_txt} | {lml_cp:14.6f} {lml_sk_txt} {rel} | "
        f"{evals:>24} {floors(n) * 1e3:8.1f}ms {t_cp / floor_total:7.2f} {grad_floors(n) * 1e3:8.1f}ms "
        f"{t_cp / grad_total:7.2f} | {load0:.2f}->{os.getloadavg()[0]:.2f}",
        flush=True,
    )
    return gp


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[500, 1000, 2000, 3000])
    parser.add_argument(
        "--starts",
        choices=["raw", "scanned"],
        default="raw",
        help="scikit-learn starts from calibprob's starting points ('raw', the default: "
        "both optimisers get the same initial points and calibprob's value-only "
        "start scan is part of its time) or from the points calibprob's "
        "L-BFGS-B starts from after that scan ('scanned': the identical "
        "L-BFGS-B problem, so the ratio is the cost per evaluation)",
    )
    parser.add_argument(
        "--sklearn-max-n", type=int, default=3000, help="skip scikit-learn above this n (it takes minutes at n = 3000)"
    )
    parser.add_argument(
        "--no-subset",
        action="store_true",
        help="calibprob fits on every row (n_hyper_subset=None: the multi-start on all rows, as before the subset stage)",
    )
    args = parser.parse_args(argv)

    import functools

    t0 = time.perf_counter()
    import numpy as np

    from calibprob.bases.gp import GaussianProcessRegressor

    t_import = time.perf_counter() - t0
    X, y = _data(50)
    t0 = time.perf_counter()
    GaussianProcessRegressor(random_state=0).fit(X, y)  # compiles nothing; warms imports and BLAS
    print(
        f"cold start: import calibprob.bases.gp {t_import:.2f} s, first (50-row) fit {time.perf_counter() - t0:.2f} s"
    )

    floors = functools.lru_cache(maxsize=None)(_floor)
    grad_floors = functools.lru_cache(maxsize=None)(_grad_floor)
    header = (
        f"{'n':>5} | {'cp cold':>7} {'cp warm':>7} {'sklearn':>8} {'ratio':>6} {'sk ev':>4} | {'LML calibprob':>14} "
        f"{'LML sklearn':>14} {'rel dLML':>9} | {'evals (v/vg+hess@m full@n)':>24} {'chol+solve':>10} "
        f"{'floor x':>7} {'+potri':>10} {'grad x':>7} | load"
    )
    print(header)
    print("-" * len(header))
    gp = None
    for n in args.n:
        gp = _row(n, args, floors, grad_floors)
    assert gp is not None
    print(
        f"\nOPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}, cores={os.cpu_count()}; "
        f"calibprob BLAS policy: {gp.fit_info_.get('blas_threads')} ({gp.fit_info_.get('blas_reason')}); "
        f"calibprob n_hyper_subset={'None' if args.no_subset else 'auto'}; "
        f"scikit-learn from calibprob's {args.starts} starts (the subset fit's, with a subset); "
        "ratio = median(cp cold, cp warm) / sklearn; 'floor x' = that time / sum over evaluations of "
        f"(Cholesky + solve at the evaluation's size); 'grad x' = that time / the same sum with LAPACK's inverse "
        "from the factor (dpotri) added for every evaluation with a gradient (the exact-gradient floor); "
        f"numpy {np.__version__}"
    )


if __name__ == "__main__":
    main()
