"""Calibrated BO: overhead of building the calibration set per BO step (issue 7).

For n = 25, 50, 100 observations of the six-hump camel function (2-D, inputs
in the unit box, outputs standardised, as inside :func:`calibprob.bo.minimize`)
and the GP fitted once by maximum likelihood, it times one CALIBRATE call of
Algorithm 4 in four ways, side by side in this process:

* ``loo-closed``  — closed-form leave-one-out (``gp.loo()``, one Cholesky) + the
  OSD recalibrator over the n PIT values: what the loop does;
* ``loo-refit``   — n GP refits with the hyperparameters fixed (condition on
  n - 1 points, predict the left-out one) + the same OSD;
* ``loo-ml``      — n refits *with* hyperparameter re-estimation (the paper's
  literal "train base model M on D_train" per fold); timed on ``--ml-folds``
  folds and extrapolated to n (marked ``~``);
* ``ts-closed`` / ``ts-refit`` — time-series splits: Cholesky innovations vs
  n - 1 prefix refits at fixed hyperparameters.

It also reports the rest of a BO step (hyperparameter fit + acquisition
maximisation) for scale, and checks that the closed forms equal the refits
(largest PIT difference). BLAS runs single-threaded (``--threads 1``, default)
so that ratios are not dominated by thread contention on a shared machine.

Run::

    .venv/bin/python benchmarks/bench_bo.py [--sizes 25 50 100] [--repeat 3] [--ml-folds 5]
"""

from __future__ import annotations

import os
import sys


def _threads_from_argv(argv) -> str:
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return "1"


for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = _threads_from_argv(sys.argv[1:])

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from scipy import special  # noqa: E402

from calibprob.bo.acquisition import StandardizedLaw, acquisition_loss, minimize_on_box  # noqa: E402
from calibprob.bo.loop import _time_series_pit, default_gp  # noqa: E402
from calibprob.calibrators.online import OnlineQuantileRecalibrator  # noqa: E402
from calibprob.datasets import get_function  # noqa: E402
from calibprob.predictive import DEFAULT_LEVELS  # noqa: E402


def _best_time(fn, repeat):
    best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _fixed(gp):
    theta = {k: v for k, v in gp.theta_.items() if k != "mean"}
    return type(gp)(**{**gp.get_params(), "theta": theta, "optimize": False})


def _osd(pit, levels):
    return OnlineQuantileRecalibrator(levels=levels, eta=0.25).reset().update_pit(np.clip(pit, 0, 1))


def run(n, repeat, ml_folds, rng):
    fn = get_function("six_hump_camel")
    lo, hi = fn.bounds[:, 0], fn.bounds[:, 1]
    U = rng.random((n, 2))
    y = fn(lo + U * (hi - lo))
    ys = (y - y.mean()) / y.std()
    levels = np.unique(np.concatenate([DEFAULT_LEVELS, [special.ndtr(-2.0)]]))
    t_fit, gp = _best_time(lambda: default_gp().set_params(random_state=0).fit(U, ys), 1)

    def loo_closed():
        mu, sd = gp.loo()
        pit = special.ndtr((ys - mu) / sd)
        return pit, _osd(pit, levels)

    def loo_refit():
        pit = np.empty(n)
        for i in range(n):
            keep = np.arange(n) != i
            mu, sd = _fixed(gp).fit(U[keep], ys[keep]).predict_mean_std(U[i : i + 1])
            pit[i] = special.ndtr((ys[i] - mu[0]) / sd[0])
        return pit, _osd(pit, levels)

    def loo_ml(k):
        for i in range(k):
            keep = np.arange(n) != i
            m = default_gp().set_params(random_state=i).fit(U[keep], ys[keep])
            m.predict_mean_std(U[i : i + 1])

    def ts_closed():
        pit = _time_series_pit(gp, U, ys)[1:]
        return pit, _osd(pit, levels)

    def ts_refit():
        pit = np.empty(n - 1)
        for i in range(1, n):
            mu, sd = (
                _fixed(gp).fit(U[:i], ys[:i]).predict_mean_std(U[i : i + 1])
                if i >= 2
                else (np.array([0.0]), np.sqrt(np.array([gp.theta_["variance"] + gp.theta_["noise"]])))
            )
            pit[i - 1] = special.ndtr((ys[i] - mu[0]) / sd[0])
        return pit, _osd(pit, levels)

    t_lc, (p_lc, _) = _best_time(loo_closed, repeat)
    t_lr, (p_lr, _) = _best_time(loo_refit, repeat)
    t_tc, (p_tc, _) = _best_time(ts_closed, repeat)
    t_tr, (p_tr, _) = _best_time(ts_refit, repeat)
    k = min(ml_folds, n)
    t_ml_k, _ = _best_time(lambda: loo_ml(k), 1)
    t_ml = t_ml_k * n / k
    t_osd, _ = _best_time(lambda: _osd(p_lc, levels), repeat)

    law = StandardizedLaw(levels)

    def acquire():
        def f(Uc):
            mu, sd = gp.predict_mean_std(Uc)
            return acquisition_loss("ei", mu, sd, law=law, best=float(ys.min()))

        return minimize_on_box(f, 2, np.random.default_rng(0))

    t_acq, _ = _best_time(acquire, 1)
    return {
        "n": n,
        "loo-closed": t_lc,
        "loo-refit": t_lr,
        "loo-ml": t_ml,
        "ts-closed": t_tc,
        "ts-refit": t_tr,
        "osd": t_osd,
        "gp-fit": t_fit,
        "acquisition": t_acq,
        "loo-diff": float(np.max(np.abs(p_lc - p_lr))),
        "ts-diff": float(np.max(np.abs(p_tc[1:] - p_tr[1:]))),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[25, 50, 100])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ml-folds", type=int, default=5)
    ap.add_argument("--threads", default="1", help="BLAS threads (set before NumPy loads)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    default_gp().set_params(random_state=0).fit(rng.random((5, 2)), rng.normal(size=5))  # warm the compile
    print(f"BLAS threads: {os.environ['OPENBLAS_NUM_THREADS']}; best of {args.repeat}; times in ms")
    head = (
        f"{'n':>4} {'loo-closed':>11} {'loo-refit':>10} {'ratio':>7} {'~loo-ml':>9} {'ratio':>8} "
        f"{'ts-closed':>10} {'ts-refit':>9} {'ratio':>7} {'osd':>6} {'gp-fit':>8} {'acq':>7} "
        f"{'overhead':>9} {'|dPIT| loo':>11} {'ts':>8}"
    )
    print(head)
    print("-" * len(head))
    for n in args.sizes:
        r = run(n, args.repeat, args.ml_folds, rng)
        step = r["gp-fit"] + r["acquisition"]
        ms = {k: 1e3 * v for k, v in r.items() if isinstance(v, float)}
        print(
            f"{n:>4} {ms['loo-closed']:>11.2f} {ms['loo-refit']:>10.1f} {r['loo-refit'] / r['loo-closed']:>6.0f}x "
            f"{ms['loo-ml']:>9.0f} {r['loo-ml'] / r['loo-closed']:>7.0f}x "
            f"{ms['ts-closed']:>10.2f} {ms['ts-refit']:>9.1f} {r['ts-refit'] / r['ts-closed']:>6.0f}x "
            f"{ms['osd']:>6.2f} {ms['gp-fit']:>8.0f} {ms['acquisition']:>7.0f} "
            f"{100 * r['loo-closed'] / step:>8.2f}% {r['loo-diff']:>11.1e} {r['ts-diff']:>8.1e}"
        )
    print(
        "overhead = loo-closed / (gp-fit + acquisition), the rest of a BO step; "
        "~loo-ml extrapolated from --ml-folds refits with hyperparameter re-estimation."
    )


if __name__ == "__main__":
    main()
