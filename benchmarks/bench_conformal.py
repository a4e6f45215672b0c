"""Conformal post-processors: speed and memory ratios (TARGETS.md P1, P3, P9).

Prints, measured side by side in this process:

* P1 — J+GP by the closed-form leave-one-out vs jackknife+ with n explicit GP
  refits at fixed hyperparameters (Cholesky of every K_{-i}), n = 500:
  wall-time ratio (target >= 100x) and the largest difference between the two
  sets of intervals (target <= 1e-6).
* P3 — full-conformal GP (FCP-GP): time per test point for
  n = 250, 500, 1000, 2000 and the fitted log-log exponent (target <= 2.2;
  the one-off O(n^3) factorisation is reported separately), plus the total
  time for n = 1000 with 1000 test points.
* P9 — peak memory (tracemalloc: every NumPy allocation, and the process's
  max RSS) of split conformal with 2000 calibration points and 100 000 test
  points: intervals at three levels and the 99-level quantile function
  (target <= 2 GB), plus J+GP with 2000 training points for comparison.

The GP is the NumPy kriging layer of :mod:`calibprob.calibrators.conformal.gp` with a
Matérn-5/2 kernel from :mod:`calibprob.bases.gp.kernels` at fixed hyperparameters
(the conformal methods never re-estimate them), so the numbers measure the
conformal algorithms, not a hyperparameter optimiser.

BLAS runs single-threaded (``--threads 1``, the default) for both sides of
every ratio: on a shared 2-core machine a multi-threaded OpenBLAS spins
against other processes and a 500 x 500 Cholesky then varies from 5 ms to
400 ms, which makes ratios meaningless.

Run::

    .venv/bin/python benchmarks/bench_conformal.py [--quick] [--repeat 3] [--threads 1]
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


# must happen before NumPy loads OpenBLAS
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = _threads_from_argv(sys.argv[1:])

import argparse  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402
from scipy import linalg  # noqa: E402

from calibprob.bases.gp.kernels import matern  # noqa: E402
from calibprob.calibrators.conformal import SplitConformalRegressor  # noqa: E402
from calibprob.calibrators.conformal._intervals import lower_rank, upper_rank  # noqa: E402
from calibprob.calibrators.conformal.gp import (  # noqa: E402
    full_conformal_gp_bounds,
    jackknife_plus_gp_bounds,
    kriging_predict,
    kriging_system,
)

LS = np.array([0.25, 0.35])
VAR = 1.0
NOISE = 0.01


def kern(A, B=None):
    return matern(A, B, LS, VAR, 2)


def data(n, m, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    Xt = rng.uniform(size=(m, 2))

    def f(Z):
        return np.sin(5 * Z[:, 0]) + np.cos(3 * Z[:, 1]) + Z[:, 0] * Z[:, 1]

    return X, f(X) + 0.1 * rng.normal(size=n), Xt, f(Xt) + 0.1 * rng.normal(size=m)


def best(fn, repeat):
    t_best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        t_best = min(t_best, time.perf_counter() - t0)
    return t_best, out


def jgp_closed_form(X, y, Xt, c):
    n, m = len(y), len(Xt)
    S = kriging_system(kern(X) + NOISE * np.eye(n), y, np.ones((n, 1)))
    lam, mu, v = kriging_predict(S, kern(X, Xt), np.full(m, VAR + NOISE), np.ones((m, 1)))
    return jackknife_plus_gp_bounds(S, lam, mu, v, np.array([c]), score="normalized")


def jgp_refits(X, y, Xt, c):
    """Jackknife+ with the J+GP score, refitting the GP (constant mean by GLS) n times."""
    n, m = len(y), len(Xt)
    K = kern(X) + NOISE * np.eye(n)
    Kc = kern(X, Xt)
    xi_lo = np.empty((n, m))
    xi_hi = np.empty((n, m))
    for i in range(n):
        keep = np.arange(n) != i
        cf = linalg.cho_factor(K[np.ix_(keep, keep)], lower=True)
        rhs = np.column_stack([K[keep, i], Kc[keep]])  # x_i, then the test points
        sol = linalg.cho_solve(cf, rhs)
        one = np.ones(n - 1)
        k1 = linalg.cho_solve(cf, one)
        w = 1.0 / (one @ k1)
        b = w * (k1 @ y[keep])
        mu = b + sol.T @ (y[keep] - b)
        u = 1.0 - one @ sol
        var = VAR + NOISE - np.einsum("ij,ij->j", rhs, sol) + w * u * u
        sd = np.sqrt(var)
        R = abs(y[i] - mu[0]) / sd[0]
        xi_lo[i] = mu[1:] - R * sd[1:]
        xi_hi[i] = mu[1:] + R * sd[1:]
    lo = np.sort(xi_lo, axis=0)[lower_rank(1 - c, n) - 1]
    hi = np.sort(xi_hi, axis=0)[upper_rank(c, n) - 1]
    return lo[:, None], hi[:, None]


def bench_p1(n, m, repeat):
    X, y, Xt, _ = data(n, m)
    t_cf, (lo_cf, hi_cf) = best(lambda: jgp_closed_form(X, y, Xt, 0.9), repeat)
    t_rf, (lo_rf, hi_rf) = best(lambda: jgp_refits(X, y, Xt, 0.9), 1)
    diff = max(np.abs(lo_cf - lo_rf).max(), np.abs(hi_cf - hi_rf).max())
    print(f"P1  J+GP n={n}, {m} test points, confidence 0.9")
    print(f"    closed-form LOO (incl. kernel matrices, factorisation): {t_cf:9.4f} s")
    print(f"    {n} explicit refits (Cholesky per fold):                {t_rf:9.4f} s")
    print(f"    speed-up {t_rf / t_cf:8.1f}x   (target >= 100x)")
    print(f"    max |interval difference| {diff:.2e}   (target <= 1e-6)")


def bench_p1_classes(n, m, repeat):
    """The same comparison through the public classes and calibprob's GaussianProcessRegressor."""
    from calibprob.bases.gp import GaussianProcessRegressor
    from calibprob.calibrators.conformal import CrossConformalRegressor, JackknifePlusGP

    X, y, Xt, _ = data(n, m)
    theta = {"lengthscale": LS, "variance": VAR, "noise": NOISE}

    def gp():
        return GaussianProcessRegressor(kernel="matern", p=2, mean="constant", theta=theta, optimize=False)

    t_cf, a = best(lambda: JackknifePlusGP(estimator=gp(), confidence_level=0.9).fit(X, y).predict_interval(Xt), repeat)
    t_rf, b = best(
        lambda: (
            CrossConformalRegressor(estimator=gp(), score="normalized", confidence_level=0.9)
            .fit(X, y)
            .predict_interval(Xt)
        ),
        1,
    )
    diff = max(float(np.abs(a["lower"] - b["lower"]).max()), float(np.abs(a["upper"] - b["upper"]).max()))
    print(
        f"P1  classes: JackknifePlusGP vs CrossConformalRegressor(GaussianProcessRegressor, fixed theta), "
        f"n={n}, {m} test points"
    )
    print(
        f"    JackknifePlusGP {t_cf:.4f} s, {n} GP refits {t_rf:.3f} s: speed-up {t_rf / t_cf:.1f}x, "
        f"max |interval difference| {diff:.2e}"
    )


def bench_p3(ns, m, repeat):
    print(f"P3  FCP-GP time per test point ({m} test points per n; factorisation separate)")
    per_point = []
    for n in ns:
        X, y, Xt, _ = data(n, m, seed=1)
        t_setup, S = best(lambda: kriging_system(kern(X) + NOISE * np.eye(n), y, np.ones((n, 1))), 1)

        def run():
            lam, mu, v = kriging_predict(S, kern(X, Xt), np.full(m, VAR + NOISE), np.ones((m, 1)))
            return full_conformal_gp_bounds(S, lam, mu, v, np.array([0.9]))

        t, _ = best(run, repeat)
        per_point.append(t / m)
        print(f"    n={n:5d}: {1e3 * t / m:8.3f} ms/point   (O(n^3) setup once: {t_setup:.3f} s)")
    slope = np.polyfit(np.log(ns), np.log(per_point), 1)[0]
    print(f"    fitted exponent d log(time/point) / d log n = {slope:.2f}   (target <= 2.2)")


def bench_p3_total(n, m):
    X, y, Xt, yt = data(n, m, seed=2)
    t0 = time.perf_counter()
    S = kriging_system(kern(X) + NOISE * np.eye(n), y, np.ones((n, 1)))
    lam, mu, v = kriging_predict(S, kern(X, Xt), np.full(m, VAR + NOISE), np.ones((m, 1)))
    lo, hi = full_conformal_gp_bounds(S, lam, mu, v, np.array([0.9]))
    t = time.perf_counter() - t0
    cov = np.mean((yt >= lo[:, 0]) & (yt <= hi[:, 0]))
    print(
        f"P3  FCP-GP n={n}, {m} test points, total (factorisation + all points): {t:.2f} s"
        f"   (coverage at 0.9: {cov:.3f})"
    )


def peak(fn):
    tracemalloc.start()
    tracemalloc.reset_peak()
    out = fn()
    _, pk = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return pk, out


def bench_p9(n_train, n_cal, m):
    X, y, Xt, yt = data(n_train + n_cal, m, seed=3)
    Xtr, ytr, Xc, yc = X[:n_train], y[:n_train], X[n_train:], y[n_train:]

    from calibprob.bases.gp import GaussianProcessRegressor

    theta = {"lengthscale": LS, "variance": VAR, "noise": NOISE}
    base = GaussianProcessRegressor(kernel="matern", p=2, mean="constant", theta=theta, optimize=False)

    def split():
        scp = SplitConformalRegressor(estimator=base, score="normalized", confidence_level=[0.5, 0.8, 0.9])
        scp.fit(Xtr, ytr).calibrate(Xc, yc)
        iv = scp.predict_interval(Xt)
        pred = scp.predict(Xt)
        return iv, pred

    t0 = time.perf_counter()
    pk, (iv, pred) = peak(split)
    t = time.perf_counter() - t0
    lo90, hi90 = iv["lower"].values[:, 2], iv["upper"].values[:, 2]
    cov = np.mean((yt >= lo90) & (yt <= hi90))
    print(
        f"P9  split conformal (normalised; GaussianProcessRegressor base on {n_train} points, fixed theta), "
        f"{n_cal} calibration x {m} test points"
    )
    print(
        f"    intervals at 3 levels + quantile function at {pred.sizes['level']} levels: {t:.1f} s, "
        f"coverage at 0.9: {cov:.3f}"
    )
    print(
        f"    peak traced memory {pk / 2**30:.3f} GB   (target <= 2 GB; the quantile output alone is "
        f"{pred['quantile'].nbytes / 2**30:.3f} GB)"
    )
    print(f"    process max RSS so far {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.3f} GB")


def bench_p9_jgp(n, m):
    X, y, Xt, _ = data(n, m, seed=4)

    def run():
        S = kriging_system(kern(X) + NOISE * np.eye(n), y, np.ones((n, 1)))
        chunk = 1024
        lo = np.empty((m, 1))
        hi = np.empty((m, 1))
        for s in range(0, m, chunk):
            sl = slice(s, min(s + chunk, m))
            k = sl.stop - sl.start
            lam, mu, v = kriging_predict(S, kern(X, Xt[sl]), np.full(k, VAR + NOISE), np.ones((k, 1)))
            lo[sl], hi[sl] = jackknife_plus_gp_bounds(S, lam, mu, v, np.array([0.9]))
        return lo, hi

    t0 = time.perf_counter()
    pk, _ = peak(run)
    print(
        f"P9  J+GP n={n} training x {m} test points (chunks of 1024): {time.perf_counter() - t0:.1f} s, "
        f"peak traced memory {pk / 2**30:.3f} GB"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timings per measurement (best kept)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    parser.add_argument("--threads", default="1", help="BLAS threads (set before NumPy loads)")
    args = parser.parse_args(argv)
    print(
        f"numpy {np.__version__}, BLAS threads {os.environ['OPENBLAS_NUM_THREADS']}; "
        f"times are best of {args.repeat} unless stated"
    )
    # warm-up: xarray imports its optional duck-array backends on first use (~2 s)
    SplitConformalRegressor(estimator=lambda a, b, c: np.zeros(len(c))).fit(np.zeros((2, 1)), np.zeros(2)).calibrate(
        np.zeros((9, 1)), np.arange(9.0)
    ).predict_interval(np.zeros((1, 1)))
    if args.quick:
        bench_p1(100, 100, args.repeat)
        bench_p3([100, 200, 400], 100, args.repeat)
        bench_p3_total(200, 200)
        bench_p9(200, 500, 10_000)
        return
    # P9 first: the process's max RSS is then the split run's (the n-refit baseline of P1 stores
    # 500 GP factorisations, ~1 GB, which would otherwise dominate it)
    bench_p9(500, 2000, 100_000)
    bench_p9_jgp(2000, 10_000)
    bench_p1(500, 200, args.repeat)
    bench_p1_classes(500, 200, args.repeat)
    bench_p3([250, 500, 1000, 2000], 256, args.repeat)
    bench_p3_total(1000, 1000)


if __name__ == "__main__":
    main()
