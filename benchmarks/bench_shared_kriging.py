"""What the comparison runner's shared kriging view saves (issue 37): a task with J+GP, asymJ+GP, FCP-GP and a LOO calibrator.

    PYTHONPATH=. OPENBLAS_NUM_THREADS=1 python benchmarks/bench_shared_kriging.py [--exact-n 3000] [--sparse-n 12000]

A synthetic regression (d = 6, a smooth function plus noise 0.1) and a fitted GP at fixed
hyperparameters (``optimize=False``: the fit is then one factorisation, which both sides share).
For each base the script runs the task's methods as ``calibprob.compare.run_task`` does, with the
shared stage (``share_base_predictions``) once **with** the shared kriging view and once without
(``shared_kriging_views`` returning nothing: every method computes its own view, ``loo()`` its own
factorisation or pass), on one thread, each side ``--repeats`` times interleaved after a warm-up run, and prints the minima:

* the shared stage's time and every method's time (J+GP, asymJ+GP, FCP-GP on 500 test points;
  variance scaling on the GP's closed-form LOO, no calibration part);
* the sum, and whether every interval and every calibrated prediction is identical to the bit.

The exact GP's ``loo()`` on its fit's Cholesky (no second factorisation) is in both sides of this
comparison (it is the code as shipped); ``--old-loo`` times the recomputed ``loo()`` too.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

import numpy as np

from calibprob.bases.gp import GaussianProcessRegressor, SparseGaussianProcessRegressor, loo_from_kernel
from calibprob.compare import methods as cm
from calibprob.compare.spec.model import MethodSpec

METHODS = [
    MethodSpec("J+GP", "jackknife-plus-gp", {}),
    MethodSpec("asymJ+GP", "asym-jackknife-plus-gp", {}),
    MethodSpec("FCP-GP", "full-conformal-gp", {}),
    MethodSpec("vs-loo", "variance-scaling", {"calibration_data": "loo"}),
]


def data(n: int, n_test: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n + n_test, 6))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + X[:, 2] ** 2 - 0.5 * X[:, 3] + 0.1 * rng.normal(size=n + n_test)
    return X[:n], y[:n], X[n:], y[n:]


def context(base, kind: str, X, y, X_test) -> cm.TaskContext:
    """A task without a calibration part (the methods calibrate on the training part's LOO)."""
    return cm.TaskContext(X, y, None, None, X_test, base, {"kind": kind}, None, 0, (0.5, 0.9))


def run(ctx: cm.TaskContext, shared: bool) -> tuple[dict, dict]:
    real = cm.shared_kriging_views
    if not shared:
        cm.shared_kriging_views = lambda ctx, methods, loo=False: {}
    try:
        t0 = time.perf_counter()
        ctx = cm.share_base_predictions(ctx, METHODS)
        times = {"shared stage": time.perf_counter() - t0}
    finally:
        cm.shared_kriging_views = real
    out = {}
    for m in METHODS:
        t0 = time.perf_counter()
        out[m.name] = cm.METHOD_KINDS[m.kind].func(ctx, **m.options)
        times[m.name] = time.perf_counter() - t0
    return times, out


def compare(label: str, ctx: cm.TaskContext, repeats: int) -> None:
    """Both sides ``repeats`` times, interleaved after a warm-up run of each (imports, first calls): the minima."""
    plain = dataclasses.replace(ctx, shared=None)
    run(plain, True), run(plain, False)
    best: dict[bool, dict] = {True: {}, False: {}}
    for _ in range(repeats):
        for side in (True, False):
            times, out = run(plain, side)
            best[side] = {k: min(v, best[side].get(k, np.inf)) for k, v in times.items()}
            if side:
                with_ = out
            else:
                same = all(with_[k].identical(out[k]) for k in with_)
    print(f"\n{label}: load {os.getloadavg()[0]:.2f}, best of {repeats}")
    print(f"  {'':14s} {'shared view':>12s} {'each its own':>13s}")
    for k in best[True]:
        print(f"  {k:14s} {best[True][k]:11.2f}s {best[False][k]:12.2f}s")
    total = {side: sum(best[side].values()) for side in best}
    print(f"  {'total':14s} {total[True]:11.2f}s {total[False]:12.2f}s   identical: {same}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--exact-n", type=int, default=3000)
    ap.add_argument("--sparse-n", type=int, default=12000)
    ap.add_argument("--n-inducing", type=int, default=300)
    ap.add_argument("--n-test", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--old-loo", action="store_true", help="also time loo() as it was (K built and factorised again)")
    args = ap.parse_args()
    theta = {"lengthscale": np.full(6, 0.8), "variance": 1.0, "noise": 0.01}

    X, y, Xt, _ = data(args.exact_n, args.n_test)
    t0 = time.perf_counter()
    gp = GaussianProcessRegressor(mean="constant", optimize=False, theta=theta).fit(X, y)
    print(f"exact GP, n = {args.exact_n}: fit (one factorisation) {time.perf_counter() - t0:.2f} s")
    if args.old_loo:
        t0 = time.perf_counter()
        K = gp._k(gp.X_train_, None, gp.theta_)
        K[np.diag_indices_from(K)] += gp.theta_["noise"]
        old = loo_from_kernel(K, gp._y_centred(), mean=gp.mean)[0] + gp._y_shift
        t_old = time.perf_counter() - t0
        t0 = time.perf_counter()
        new = gp.loo()[0]
        print(
            f"  loo(): recomputed {t_old:.2f} s, on the fit's factor {time.perf_counter() - t0:.2f} s, "
            f"identical: {np.array_equal(old, new)}"
        )
    compare(f"exact GP, n = {args.exact_n}, {args.n_test} test points", context(gp, "gp", X, y, Xt), args.repeats)

    X, y, Xt, _ = data(args.sparse_n, args.n_test)
    t0 = time.perf_counter()
    sgp = SparseGaussianProcessRegressor(
        n_inducing=args.n_inducing, mean="constant", optimize=False, theta=theta, random_state=0
    ).fit(X, y)
    print(f"\nsparse GP, n = {args.sparse_n}, m = {args.n_inducing}: fit {time.perf_counter() - t0:.2f} s")
    compare(
        f"sparse GP, n = {args.sparse_n}, m = {args.n_inducing}, {args.n_test} test points",
        context(sgp, "sparse-gp", X, y, Xt),
        args.repeats,
    )


if __name__ == "__main__":
    main()
