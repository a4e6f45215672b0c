"""Fit time of the sharp calibrated GP (Capone et al. 2023) on Boston (TARGETS.md, P5).

Measures, in one process, on a 0.6/0.2/0.2 standardised split of Boston
(304 training, 101 calibration points, 13 features):

* the base GP's own fit (marginal likelihood, for scale);
* **cold** fit of all levels: the first fit in the process, including building
  and compiling the PyMC model's logp/dlogp (with ``--mode NUMBA`` the JIT
  also depends on the on-disk cache in ``~/.pytensor``; run twice to see both);
* **warm** fits of ``--levels`` and ``--more-levels`` knots (the graph is
  reused: the data, level and constraints are ``pm.Data``), and the time per
  extra level, ``(T_more - T_levels) / (K_more - K_levels)`` (target <= 1 s);
* the cheap ``scaled`` and the ``cross-fitted`` variants (warm);
* with ``--sparse``: a 5000-point synthetic set (3000 train / 1000 calibrate /
  1000 test, 8-D Hartmann-type function) on a sparse (VFE) base, θ_δ fitted
  with the exact posterior of a 500-point training subset (paper §6) and β on
  all training data.

* with ``--scaling N ...``: the cost of the two consumers of the exact GP's
  factorisation at larger n (synthetic 4-D data, 200 calibration / test
  points; the GP's hyperparameters by marginal likelihood on 800 of the n
  rows, then one factorisation on all n): the sharp GP's time **per level**
  (``full`` variant, a warm fit of
  9 knots divided by its knots, after a 5-knot warm-up fit; every
  evaluation is one Cholesky of the n x n training covariance plus solves for
  the calibration points), and the full-conformal GP's time **per test
  point** (``FullConformalGP.predict_interval`` on 200 points after ``fit``,
  which reuses the GP's own Cholesky factor).

* with ``--large N_CAL``: issue 21's large calibration set. A GP base on 2000
  synthetic 8-D rows (hyperparameters by marginal likelihood on 800 of them,
  then one factorisation on all 2000), ``N_CAL`` calibration and 1000 test
  rows; for each of ``full`` on every calibration row
  (``n_cal_subset=None``, the reference), ``full`` (the defaults:
  ``n_cal_subset=1000`` and, above 1000 rows, ``interpolate="quantile"``, one
  start, warm-started knots, ``maxls=6``), ``full-paper`` (the N <= 1000
  settings: ``interpolate="theta"``, two starts, no warm start, ``maxls=20``),
  ``full`` with ``interpolate="quantile"``,
  ``scaled`` (both interpolations) and ``cross-fitted``: fit and predict time (wall and CPU; 99 levels), objective
  evaluations, test NLL, 95 % coverage and width, and the ratios to the
  all-rows ``full`` fit. ``--large-variants`` picks a subset of those rows.

Run::

    .venv/bin/python benchmarks/bench_sharp_gp.py [--levels 21] [--more-levels 41]
        [--mode FAST_COMPILE|NUMBA] [--sparse] [--scaling 1000 2000] [--large 4128] [--no-boston]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from calibprob.bases.gp import GaussianProcessRegressor, SparseGaussianProcessRegressor
from calibprob.calibrators import sharp_gp
from calibprob.calibrators.sharp_gp import SharpCalibratedGP
from calibprob.datasets import load_dataset, train_calibrate_test_split

_CPU: dict[str, float] = {}


def _timed(fn):
    """Wall time (returned) and CPU time (kept in _CPU["last"]; the box is shared)."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    _CPU["last"] = time.process_time() - c0
    return out, time.perf_counter() - t0


def _boston(seed: int):
    parts = train_calibrate_test_split(load_dataset("boston"), seed=seed)
    arrays = {k: (v["X"].values, v["y"].values) for k, v in parts.items()}
    Xtr, ytr = arrays["train"]
    mx, sx = Xtr.mean(0), Xtr.std(0)
    my, sy = ytr.mean(), ytr.std()
    return {k: ((X - mx) / sx, (y - my) / sy) for k, (X, y) in arrays.items()}


def _summary(name, model, seconds, X_test, y_test):
    d = model.diagnostics_
    q = model.quantile(X_test, [0.025, 0.975])
    cov = np.mean((y_test >= q[:, 0]) & (y_test <= q[:, 1]))
    width = np.mean(q[:, 1] - q[:, 0])
    constrained = d["seconds"].values[d["n_eval"].values > 0]
    print(
        f"{name:34s} {seconds:7.2f} s wall {_CPU['last']:7.2f} s cpu  knots={d.sizes['knot']:3d}  evals={int(d['n_eval'].sum()):5d}  "
        f"median s/knot={np.median(constrained):.3f}  converged={int(d['converged'].sum())}/{d.sizes['knot']}  "
        f"95% width={width:.3f} cov={cov:.3f}"
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, default=21, help="knots in the reference fit")
    parser.add_argument("--more-levels", type=int, default=41, help="knots in the larger fit")
    parser.add_argument("--mode", default=None, help="PyTensor compile mode (default: calibprob.bases.gp's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sparse", action="store_true", help="also time the sparse 5000-point case")
    parser.add_argument(
        "--scaling",
        type=int,
        nargs="*",
        default=[],
        help="training sizes for the per-level / per-test-point costs, e.g. 1000 2000",
    )
    parser.add_argument("--no-boston", action="store_true", help="skip the Boston section")
    parser.add_argument("--large", type=int, default=0, help="calibration rows of the large-N section (e.g. 4128)")
    parser.add_argument(
        "--large-variants",
        nargs="*",
        default=list(_LARGE_ROWS),
        choices=list(_LARGE_ROWS),
        help="rows of the large-N section",
    )
    parser.add_argument(
        "--large-base", choices=("exact", "sparse"), default="exact", help="base of the large-N section"
    )
    args = parser.parse_args(argv)

    from threadpoolctl import threadpool_limits

    if args.scaling:
        _scaling(args)
    if args.large:
        _large(args)
    if args.no_boston:
        return

    data = _boston(args.seed)
    (Xtr, ytr), (Xc, yc), (Xt, yt) = data["train"], data["calibrate"], data["test"]
    print(f"boston: train {Xtr.shape}, calibrate {Xc.shape}, test {Xt.shape}; mode={args.mode or 'default'}")
    with threadpool_limits(limits=1, user_api="blas"):
        gp, t = _timed(lambda: GaussianProcessRegressor(random_state=args.seed).fit(Xtr, ytr))
    print(f"{'base GP fit (ML, 3 starts)':34s} {t:7.2f} s wall {_CPU['last']:7.2f} s cpu")

    def make(levels, variant="full"):
        return SharpCalibratedGP(
            estimator=gp, variant=variant, n_levels=levels, compile_mode=args.mode, random_state=args.seed
        )

    sharp_gp.clear_cache()
    m, t_cold = _timed(lambda: make(args.levels).fit(Xc, yc))
    _summary(f"full, {args.levels} levels, COLD", m, t_cold, Xt, yt)
    m, t_warm = _timed(lambda: make(args.levels).fit(Xc, yc))
    c_warm = _CPU["last"]
    _summary(f"full, {args.levels} levels, warm", m, t_warm, Xt, yt)
    k1 = m.diagnostics_.sizes["knot"]
    m2, t_more = _timed(lambda: make(args.more_levels).fit(Xc, yc))
    _summary(f"full, {args.more_levels} levels, warm", m2, t_more, Xt, yt)
    k2 = m2.diagnostics_.sizes["knot"]
    per = (t_more - t_warm) / max(k2 - k1, 1)
    per_cpu = (_CPU["last"] - c_warm) / max(k2 - k1, 1)
    print(
        f"{'time per extra level (warm)':34s} {per:7.3f} s wall {per_cpu:7.3f} s cpu   "
        f"(target <= 1 s; {k2 - k1} extra knots)"
    )
    for variant in ("scaled", "cross-fitted"):
        mv, tv = _timed(lambda: make(args.levels, variant).fit(Xc, yc))
        _summary(f"{variant}, {args.levels} levels, warm", mv, tv, Xt, yt)
    mu, sd = gp.predict_mean_std(Xt)
    cov = np.mean(np.abs(yt - mu) <= 1.959964 * sd)
    print(f"{'base GP 95% interval':34s}          width={np.mean(2 * 1.959964 * sd):.3f} cov={cov:.3f}")

    if args.sparse:
        _sparse_section(args)


def _sparse_section(args) -> None:
    """The 5000-point sparse (VFE) case: θ_δ on a 500-point exact subset, β on all training data."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(args.seed)
    X = rng.uniform(0, 1, size=(5000, 8))
    y = (
        np.sin(2 * np.pi * X[:, 0]) * X[:, 1]
        + np.exp(-((X[:, 2:5] - 0.5) ** 2).sum(1) * 4)
        + (0.05 + 0.2 * X[:, 5]) * rng.normal(size=5000)
    )
    X = (X - 0.5) / 0.29
    y = (y - y[:3000].mean()) / y[:3000].std()
    Xtr, ytr, Xc, yc, Xt, yt = X[:3000], y[:3000], X[3000:4000], y[3000:4000], X[4000:], y[4000:]
    with threadpool_limits(limits=1, user_api="blas"):
        sgp, t = _timed(
            lambda: SparseGaussianProcessRegressor(n_inducing=300, n_restarts=1, random_state=args.seed).fit(Xtr, ytr)
        )
    print("\nsparse: train 3000, calibrate 1000, 8-D; VFE base with 300 inducing points")
    print(f"{'sparse base GP fit (VFE, 1 start)':34s} {t:7.2f} s wall {_CPU['last']:7.2f} s cpu")
    ms, ts = _timed(
        lambda: SharpCalibratedGP(
            estimator=sgp, n_levels=args.levels, compile_mode=args.mode, random_state=args.seed
        ).fit(Xc, yc)
    )
    _summary(f"full on sparse, subset 500, {args.levels} lv", ms, ts, Xt, yt)
    ms, ts = _timed(
        lambda: SharpCalibratedGP(estimator=sgp, variant="scaled", n_levels=args.levels, random_state=args.seed).fit(
            Xc, yc
        )
    )
    _summary(f"scaled on sparse, {args.levels} levels", ms, ts, Xt, yt)


def _synthetic(n: int, seed: int, d: int = 8):
    """The 8-D heteroscedastic function of the ``--sparse`` section, standardised on the first rows."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, size=(n, d))
    y = (
        np.sin(2 * np.pi * X[:, 0]) * X[:, 1]
        + np.exp(-((X[:, 2:5] - 0.5) ** 2).sum(1) * 4)
        + (0.05 + 0.3 * X[:, 5]) * rng.normal(size=n)
    )
    return (X - 0.5) / 0.29, (y - y.mean()) / y.std()


#: rows of the --large section: label -> SharpCalibratedGP options
_LARGE_ROWS: dict[str, dict] = {
    "full-all-rows": {"variant": "full", "n_cal_subset": None},
    "full": {"variant": "full"},
    # the defaults before the large-N settings (and the settings at N <= 1000)
    "full-paper": {"variant": "full", "interpolate": "theta", "n_restarts": 2, "warm_start": False, "maxls": 20},
    "full-quantile": {"variant": "full", "interpolate": "quantile"},
    "scaled": {"variant": "scaled"},
    "scaled-quantile": {"variant": "scaled", "interpolate": "quantile"},
    "cross-fitted": {"variant": "cross-fitted"},
    "full-fast": {"variant": "full", "interpolate": "quantile", "n_cal_subset": 300, "maxiter": 30},
}


def _base_on(Xtr, ytr, n_hyper: int = 800):
    """Hyperparameters by marginal likelihood on ``n_hyper`` rows, then one factorisation on all."""
    g0 = GaussianProcessRegressor(n_restarts=1, random_state=0).fit(Xtr[:n_hyper], ytr[:n_hyper])
    theta = {k: v for k, v in g0.theta_.items() if k in ("lengthscale", "variance", "noise")}
    return GaussianProcessRegressor(theta=theta, optimize=False).fit(Xtr, ytr)


def _large(args) -> None:
    """Issue 21 item 4: the variants at a large calibration set (time, NLL, coverage)."""
    import os

    from threadpoolctl import threadpool_limits

    import calibprob

    n_tr, n_test = (2000, 1000) if args.large_base == "exact" else (12384, 1000)
    X, y = _synthetic(n_tr + args.large + n_test, args.seed)
    Xtr, ytr = X[:n_tr], y[:n_tr]
    Xc, yc = X[n_tr : n_tr + args.large], y[n_tr : n_tr + args.large]
    Xt, yt = X[n_tr + args.large :], y[n_tr + args.large :]
    with threadpool_limits(limits=1, user_api="blas"):
        gp = _base_on(Xtr, ytr)
        if args.large_base == "sparse":
            # issue 21's setting: a VFE base with 300 inducing points on 12 384 rows (θ of the
            # exact fit on 800 rows, inducing inputs a seeded subset); θ_δ with the exact
            # posterior of a 500-row training subset (the sparse default), β and σ by VFE
            gp = SparseGaussianProcessRegressor(
                n_inducing=300, theta=dict(gp.theta_), optimize=False, random_state=0
            ).fit(Xtr, ytr)
        SharpCalibratedGP(estimator=gp, n_levels=3, random_state=0).fit(Xc[:50], yc[:50])  # compile, untimed
    print(
        f"\nlarge calibration set: train {n_tr} (8-D, {args.large_base} GP), calibrate {args.large}, "
        f"test {n_test}, 99 levels"
    )
    print(
        f"{'variant':14s} {'fit wall':>8s} {'fit cpu':>8s} {'pred wall':>9s} {'pred cpu':>8s} {'evals':>6s} "
        f"{'NLL':>7s} {'cov95':>6s} {'width95':>7s} | {'time/all-rows':>13s} {'dNLL':>7s} | load"
    )
    ref = None
    for label in args.large_variants:
        load0 = os.getloadavg()[0]
        model = SharpCalibratedGP(estimator=gp, random_state=args.seed, **_LARGE_ROWS[label])
        _, t_fit = _timed(lambda m=model: m.fit(Xc, yc))
        c_fit = _CPU["last"]
        pred, t_pred = _timed(lambda m=model: m.predict(Xt))
        c_pred = _CPU["last"]
        nll = float(calibprob.evaluate(pred, yt)["nll"])
        q = model.quantile(Xt, [0.025, 0.975])
        cov, width = np.mean((yt >= q[:, 0]) & (yt <= q[:, 1])), np.mean(q[:, 1] - q[:, 0])
        if label == "full-all-rows":
            ref = (c_fit + c_pred, nll)
        ratio = f"{(c_fit + c_pred) / ref[0]:13.3f} {nll - ref[1]:+7.4f}" if ref else f"{'':13s} {'':7s}"
        print(
            f"{label:14s} {t_fit:7.1f}s {c_fit:7.1f}s {t_pred:8.1f}s {c_pred:7.1f}s "
            f"{int(model.diagnostics_['n_eval'].sum()):6d} {nll:7.4f} {cov:6.3f} {width:7.3f} | {ratio} | "
            f"{load0:.2f}->{os.getloadavg()[0]:.2f}",
            flush=True,
        )


def _scaling(args) -> None:
    """Sharp GP per level and full-conformal GP per test point at training size n."""
    from threadpoolctl import threadpool_limits

    from calibprob.calibrators.conformal.gp import FullConformalGP

    print(
        f"{'n':>5} {'GP fit':>8} | {'sharp, 9 knots':>14} {'s/level':>8} {'cpu/level':>9} "
        f"{'evals/level':>11} {'cpu/eval':>8} | {'FCP fit':>8} {'FCP 200 pts':>11} {'ms/point':>8} | load"
    )
    for n in args.scaling:
        rng = np.random.default_rng(args.seed)
        X = rng.uniform(size=(n + 400, 4))
        y = (
            np.sin(3 * X[:, 0])
            + np.cos(2 * X[:, 1] * X[:, 2])
            + 0.5 * X[:, 3]
            + (0.05 + 0.1 * X[:, 3]) * rng.normal(size=n + 400)
        )
        y = y - y[:n].mean()
        Xtr, ytr, Xc, yc, Xt = X[:n], y[:n], X[n : n + 200], y[n : n + 200], X[n + 200 :]
        load0 = __import__("os").getloadavg()[0]
        with threadpool_limits(limits=1, user_api="blas"):
            # hyperparameters by marginal likelihood on 800 rows, one factorisation on all n
            gp, t_gp = _timed(lambda: _base_on(Xtr, ytr))
            # warm-up (compilation), not timed
            SharpCalibratedGP(estimator=gp, n_levels=3, compile_mode=args.mode, random_state=0).fit(Xc[:50], yc[:50])
            m9, t9 = _timed(
                lambda: SharpCalibratedGP(estimator=gp, n_levels=9, compile_mode=args.mode, random_state=0).fit(Xc, yc)
            )
            c9 = _CPU["last"]
            k9 = m9.diagnostics_.sizes["knot"]
            e9 = int(m9.diagnostics_["n_eval"].sum())
            per_level, evals_level, per_eval = t9 / k9, e9 / k9, c9 / max(e9, 1)
            fcp, t_fit = _timed(lambda: FullConformalGP(estimator=gp, prefit=True, confidence_level=0.9).fit())
            _, t_pred = _timed(lambda: fcp.predict_interval(Xt))
        print(
            f"{n:>5} {t_gp:7.1f}s | {t9:13.1f}s {per_level:8.2f} {c9 / k9:9.2f} {evals_level:11.1f} "
            f"{per_eval:8.3f} | {t_fit:7.2f}s {t_pred:10.2f}s {1e3 * t_pred / len(Xt):8.1f} | "
            f"{load0:.2f}->{__import__('os').getloadavg()[0]:.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
