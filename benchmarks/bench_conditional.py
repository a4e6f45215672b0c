"""CQR and conditional conformal against MAPIE, side by side, one run, same inputs.

* conditional conformal (:class:`calibprob.ConditionalConformal`) vs MAPIE 1.6's
  ``ConditionalSplitConformalRegressor`` (exact path, deterministic) at n_cal = 2 000,
  n_test = 1 000, six overlapping group features plus an intercept: time of each
  (conformalize + predict) and the largest difference of the intervals;
* CQR (:class:`calibprob.ConformalizedQuantileRegression`) vs MAPIE's
  ``ConformalizedQuantileRegressor(prefit=True)``: ``score="symmetric"`` against
  ``symmetric_correction=True`` and ``score="asymmetric"`` against the default
  ``symmetric_correction=False``; largest difference of the intervals.

MAPIE needs its own environment (it pulls cvxpy and torch)::

    python3.12 -m venv /work/venvs/mapie
    /work/venvs/mapie/bin/pip install "mapie[conditional]>=1.6" xarray pandas scipy h5netcdf h5py matplotlib tqdm threadpoolctl
    PYTHONPATH=. /work/venvs/mapie/bin/python benchmarks/bench_conditional.py

Without MAPIE the script prints calibprob's column and says why the other is missing.
``--write-reference`` (with MAPIE) writes ``tests/data/mapie_conditional_reference.npz``:
small seeded inputs and MAPIE's intervals on them, which ``tests/calibrators/conformal/test_cqr.py`` and
``tests/calibrators/conformal/test_conditional.py`` check calibprob against without MAPIE installed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import calibprob

REFERENCE = Path(__file__).resolve().parents[1] / "tests" / "data" / "mapie_conditional_reference.npz"


def groups_problem(n_cal: int, n_test: int, n_groups: int = 6, seed: int = 0):
    """Overlapping groups (thresholds of uniform features), noise growing with the groups one is in."""
    rng = np.random.default_rng(seed)
    n = n_cal + n_test
    U = rng.uniform(size=(n, n_groups))
    G = (U < np.linspace(0.2, 0.45, n_groups)).astype(float)
    mu = rng.normal(size=n)
    y = mu + (0.5 + G @ np.linspace(0.2, 1.2, n_groups)) * rng.standard_normal(n)
    return mu, y, G


def quantile_problem(n_cal: int, n_test: int, c: float = 0.9, seed: int = 1):
    """A misspecified quantile base: Gaussian quantiles with a wrong, skewed scale."""
    from scipy import stats

    rng = np.random.default_rng(seed)
    n = n_cal + n_test
    x = rng.uniform(-2, 2, n)
    y = np.sin(x) + (0.3 + 0.4 * np.abs(x)) * rng.standard_gamma(2.0, n)
    z = stats.norm.ppf([(1 - c) / 2, 0.5, (1 + c) / 2])
    q = np.sin(x)[:, None] + 0.5 + (0.2 + 0.2 * np.abs(x))[:, None] * z[None, :]
    return q, y


def ours_conditional(mu, y, G, n_cal, c=0.9):
    pred = calibprob.normal(mu, np.ones(mu.size))
    cc = calibprob.ConditionalConformal(confidence_level=c)
    cc.fit(pred.isel(obs=slice(n_cal)), y[:n_cal], groups=G[:n_cal])
    iv = cc.predict(pred.isel(obs=slice(n_cal, None)), groups=G[n_cal:]).sel(confidence_level=c)
    return np.column_stack([iv["lower"].values, iv["upper"].values])


def ours_cqr(q, y, n_cal, variant, c=0.9):
    pred = calibprob.from_quantiles(q, [(1 - c) / 2, 0.5, (1 + c) / 2])
    cqr = calibprob.ConformalizedQuantileRegression(score=variant, confidence_level=c)
    cqr.fit(pred.isel(obs=slice(n_cal)), y[:n_cal])
    iv = cqr.predict(pred.isel(obs=slice(n_cal, None))).sel(confidence_level=c)
    return np.column_stack([iv["lower"].values, iv["upper"].values])


def _mapie():
    try:
        import mapie  # noqa: F401
        from sklearn.base import BaseEstimator, RegressorMixin
    except ImportError as err:
        return None, f"MAPIE is not importable here ({err}); see the module docstring for its environment."

    class Fixed(RegressorMixin, BaseEstimator):
        """A prefit 'model' returning stored predictions, looked up by the row index in column 0 of X."""

        def __init__(self, table=None):
            self.table = table

        def fit(self, X, y=None):
            self.table_ = np.asarray(self.table, float)
            self.fitted_ = True
            return self

        def predict(self, X):
            return self.table_[np.asarray(X)[:, 0].astype(int)]

    return Fixed, ""


def mapie_conditional(mu, y, G, n_cal, c=0.9):
    from mapie.conditional_conformal_prediction import ConditionalSplitConformalRegressor

    Fixed, _ = _mapie()
    X = np.column_stack([np.arange(mu.size), G])
    model = ConditionalSplitConformalRegressor(
        feature_map=lambda X: np.column_stack([np.ones(len(X)), np.asarray(X)[:, 1:]]),
        estimator=Fixed(mu).fit(X),
        confidence_level=c,
        prefit=True,
    )
    model.conformalize(X[:n_cal], y[:n_cal])
    _, iv = model.predict_interval(X[n_cal:])
    return iv[:, :, 0]


def mapie_cqr(q, y, n_cal, symmetric, c=0.9):
    from mapie.regression import ConformalizedQuantileRegressor

    Fixed, _ = _mapie()
    X = np.arange(y.size)[:, None]
    est = [Fixed(q[:, 0]).fit(X), Fixed(q[:, 2]).fit(X), Fixed(q[:, 1]).fit(X)]
    model = ConformalizedQuantileRegressor(est, confidence_level=c, prefit=True)
    model.conformalize(X[:n_cal], y[:n_cal])
    _, iv = model.predict_interval(X[n_cal:], symmetric_correction=symmetric)
    return iv[:, :, 0]


def _timed(func, *args, **kwargs):
    t = time.perf_counter()
    out = func(*args, **kwargs)
    return out, time.perf_counter() - t


def write_reference() -> None:
    """Small seeded inputs and MAPIE's intervals on them, for the default tests."""
    mu, y, G = groups_problem(300, 40, n_groups=3, seed=5)
    q, yq = quantile_problem(200, 50, seed=6)
    np.savez_compressed(
        REFERENCE,
        cc_mu=mu,
        cc_y=y,
        cc_groups=G,
        cc_n_cal=300,
        cc_mapie=mapie_conditional(mu, y, G, 300),
        cqr_q=q,
        cqr_y=yq,
        cqr_n_cal=200,
        cqr_mapie_symmetric=mapie_cqr(q, yq, 200, True),
        cqr_mapie_asymmetric=mapie_cqr(q, yq, 200, False),
    )
    print(f"wrote {REFERENCE}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-cal", type=int, default=2000)
    parser.add_argument("--n-test", type=int, default=1000)
    parser.add_argument("--write-reference", action="store_true")
    args = parser.parse_args(argv)
    Fixed, why = _mapie()
    if args.write_reference:
        if Fixed is None:
            print(why)
            return 1
        write_reference()
    mu, y, G = groups_problem(args.n_cal, args.n_test)
    ours, t_ours = _timed(ours_conditional, mu, y, G, args.n_cal)
    print(f"conditional conformal, n_cal={args.n_cal}, n_test={args.n_test}, 6 overlapping groups + intercept, c=0.9")
    print(f"  calibprob  {t_ours:8.2f} s   (infinite intervals: {int(np.isinf(ours).any(axis=1).sum())})")
    if Fixed is None:
        print(f"  MAPIE      skipped: {why}")
    else:
        theirs, t_theirs = _timed(mapie_conditional, mu, y, G, args.n_cal)
        print(f"  MAPIE 1.6  {t_theirs:8.2f} s   speed-up {t_theirs / t_ours:.1f}x")
        print(f"  max |calibprob - MAPIE| = {np.max(np.abs(ours - theirs)):.3e}")
    q, yq = quantile_problem(args.n_cal, args.n_test)
    print(f"CQR, n_cal={args.n_cal}, n_test={args.n_test}, c=0.9")
    for variant, symmetric in (("symmetric", True), ("asymmetric", False)):
        ours_q, t_q = _timed(ours_cqr, q, yq, args.n_cal, variant)
        line = f"  variant={variant!r:13} calibprob {t_q:6.3f} s"
        if Fixed is not None:
            theirs_q, t_m = _timed(mapie_cqr, q, yq, args.n_cal, symmetric)
            line += f" | MAPIE symmetric_correction={symmetric!s:5} {t_m:6.3f} s | max diff {np.max(np.abs(ours_q - theirs_q)):.3e}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
