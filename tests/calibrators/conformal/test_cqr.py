"""Conformalized quantile regression (calibprob.calibrators.conformal.cqr).

References checked against:

* the formulas of Romano et al. (2019) and Sesia & Candès (2020) written out by hand
  (sorted scores, the rank ceil(c (n+1)) in exact rational arithmetic);
* the finite-sample guarantee: over many seeded calibration sets, coverage equals
  ceil(c (n+1))/(n+1) for continuous scores (so it is >= c and < c + 1/(n+1)), and
  2 ceil((1 - a/2)(n+1))/(n+1) - 1 for the asymmetric variant, within 3 standard errors;
* MAPIE 1.6's ``ConformalizedQuantileRegressor`` (prefit), through reference values stored by
  ``benchmarks/bench_conditional.py --write-reference``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import xarray as xr

import calibprob
from calibprob.calibrators.conformal.cqr import cqr_corrections, cqr_intervals, cqr_scores
from tests.support.paths import TEST_DATA

REFERENCE = TEST_DATA / "mapie_conditional_reference.npz"


def _rank(c: float, n: int) -> int:
    return math.ceil(Fraction(str(c)) * (n + 1))


def _hand(q_lo, q_hi, q_med, y, q_lo_t, q_hi_t, q_med_t, c, variant):
    """The published formulas, written independently of the module."""
    n = y.size
    if variant == "asymmetric":
        k = math.ceil((1 - Fraction(str(1 - c)) / 2) * (n + 1))
        lo = np.sort(q_lo - y)[k - 1]
        hi = np.sort(y - q_hi)[k - 1]
        return q_lo_t - lo, q_hi_t + hi
    k = _rank(c, n)
    if variant == "symmetric":
        E = np.array([max(a - b, b - d) for a, b, d in zip(q_lo, y, q_hi)])
        Q = np.sort(E)[k - 1]
        return q_lo_t - Q, q_hi_t + Q
    if variant == "cqr-r":
        E = np.array([max(a - b, b - d) / (d - a) for a, b, d in zip(q_lo, y, q_hi)])
        Q = np.sort(E)[k - 1]
        return q_lo_t - Q * (q_hi_t - q_lo_t), q_hi_t + Q * (q_hi_t - q_lo_t)
    E = np.array([max((a - b) / (m - a), (b - d) / (d - m)) for a, b, d, m in zip(q_lo, y, q_hi, q_med)])
    Q = np.sort(E)[k - 1]
    return q_lo_t - Q * (q_med_t - q_lo_t), q_hi_t + Q * (q_hi_t - q_med_t)


def _quantile_base(n, rng, c=0.9):
    """Quantiles of a skewed, misspecified base at (1-c)/2, 0.5, (1+c)/2, and targets."""
    x = rng.uniform(-2, 2, n)
    y = np.sin(x) + (0.3 + 0.4 * np.abs(x)) * rng.standard_gamma(2.0, n)
    half = 0.3 + 0.1 * np.abs(x)
    q = np.column_stack([np.sin(x) + 0.3 - half, np.sin(x) + 0.6, np.sin(x) + 0.9 + half])
    return q, y


@pytest.mark.parametrize("variant", ["symmetric", "asymmetric", "cqr-r", "cqr-m"])
@pytest.mark.parametrize("c", [0.8, 0.9])
def test_cqr_equals_the_formulas_by_hand(variant, c):
    rng = np.random.default_rng(11)
    q, y = _quantile_base(60, rng)
    n = 41
    levels = [(1 - c) / 2, 0.5, (1 + c) / 2]
    pred = calibprob.from_quantiles(q, levels)
    model = calibprob.ConformalizedQuantileRegression(score=variant, confidence_level=c)
    iv = model.fit(pred.isel(obs=slice(n)), y[:n]).predict(pred.isel(obs=slice(n, None))).sel(confidence_level=c)
    lo, hi = _hand(*(q[:n].T[[0, 2, 1]]), y[:n], *(q[n:].T[[0, 2, 1]]), c, variant)
    np.testing.assert_allclose(iv["lower"].values, lo, rtol=0, atol=1e-12)
    np.testing.assert_allclose(iv["upper"].values, hi, rtol=0, atol=1e-12)
    assert iv.attrs["family"] == "interval" and iv.attrs["method"] == f"cqr-{variant}"


def test_a_normal_base_is_read_exactly_at_every_level():
    """A Gaussian base has every level: q_lo, q_hi are loc -/+ z scale, to rounding."""
    from scipy import stats

    rng = np.random.default_rng(3)
    mu, y = rng.normal(size=200), rng.normal(size=200) * 2
    pred = calibprob.normal(mu, np.ones(200))
    model = calibprob.ConformalizedQuantileRegression(confidence_level=[0.5, 0.95]).fit(pred, y)
    z = stats.norm.ppf(0.975)
    E = np.maximum(mu - z - y, y - mu - z)
    assert model.corrections_[1, 0] == pytest.approx(np.sort(E)[_rank(0.95, 200) - 1], abs=1e-12)


@pytest.mark.parametrize(
    ("variant", "expected"),
    [
        ("symmetric", Fraction(_rank(0.9, 50), 51)),
        ("cqr-r", Fraction(_rank(0.9, 50), 51)),
        ("cqr-m", Fraction(_rank(0.9, 50), 51)),
        ("asymmetric", 2 * Fraction(math.ceil(Fraction(95, 100) * 51), 51) - 1),
    ],
)
@pytest.mark.seeded(2024)
def test_cqr_coverage_is_exact_over_many_calibration_sets(variant, expected, seed, record_property):
    """Romano et al. Thm 1: coverage = k/(n+1) in [c, c + 1/(n+1)) (asymmetric: 2k'/(n+1) - 1), 3 SE; the draws'
    seed from the seed sweep, 2024 in the default run."""
    rng = np.random.default_rng(seed)
    n, m, reps, c = 50, 40, 1500, 0.9
    cover = np.empty(reps)
    for r in range(reps):
        q, y = _quantile_base(n + m, rng)
        s = cqr_scores(y[:n], q[:n, 0], q[:n, 2], score=variant, q_med=q[:n, 1])
        lo, hi = cqr_intervals(q[n:, 0], q[n:, 2], cqr_corrections(s, c, score=variant), score=variant, q_med=q[n:, 1])
        cover[r] = np.mean((y[n:] >= lo) & (y[n:] <= hi))
    mean, se = cover.mean(), cover.std(ddof=1) / np.sqrt(reps)
    record_property("coverage_error_se", abs(mean - float(expected)) / se)
    assert abs(mean - float(expected)) <= 3 * se, (mean, float(expected), se)
    assert mean >= c - 3 * se
    if variant != "asymmetric":
        assert mean <= c + 1 / (n + 1) + 3 * se
    else:
        assert mean <= c + 2 / (n + 1) + 3 * se


def test_cqr_equals_mapie_on_stored_reference_values():
    """MAPIE's symmetric_correction=True is score='symmetric', False (its default) is 'asymmetric' (1e-10)."""
    ref = np.load(REFERENCE)
    q, y, n = ref["cqr_q"], ref["cqr_y"], int(ref["cqr_n_cal"])
    pred = calibprob.from_quantiles(q, [0.05, 0.5, 0.95])
    for variant, key in (("symmetric", "cqr_mapie_symmetric"), ("asymmetric", "cqr_mapie_asymmetric")):
        model = calibprob.ConformalizedQuantileRegression(score=variant).fit(pred.isel(obs=slice(n)), y[:n])
        iv = model.predict(pred.isel(obs=slice(n, None))).sel(confidence_level=0.9)
        np.testing.assert_allclose(iv["lower"].values, ref[key][:, 0], rtol=0, atol=1e-10)
        np.testing.assert_allclose(iv["upper"].values, ref[key][:, 1], rtol=0, atol=1e-10)


def test_predict_interval_selects_fitted_levels_and_keeps_obs():
    rng = np.random.default_rng(5)
    q, y = _quantile_base(300, rng)
    pred = calibprob.from_quantiles(q, [0.05, 0.5, 0.95])
    pred = pred.assign_coords(obs=np.arange(1000, 1300))
    model = calibprob.ConformalizedQuantileRegression(score="cqr-m").fit(pred.isel(obs=slice(150)), y[:150])
    iv = model.predict_interval(pred.isel(obs=slice(150, None)), confidence_level=0.9)
    assert "confidence_level" not in iv.dims and iv["obs"].values[0] == 1150
    with pytest.raises(ValueError, match=r"confidence_level \[0.8\] was not calibrated"):
        model.predict_interval(pred, confidence_level=0.8)


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------


def test_missing_quantile_levels_are_refused_or_interpolated_on_request():
    rng = np.random.default_rng(0)
    q, y = _quantile_base(200, rng)
    pred = calibprob.from_quantiles(q, [0.05, 0.5, 0.95])
    with pytest.raises(ValueError, match=r"missing quantile levels: .*\[0.025, 0.975\].*missing_levels='interpolate'"):
        calibprob.ConformalizedQuantileRegression(confidence_level=0.95).fit(pred, y)
    ok = calibprob.ConformalizedQuantileRegression(confidence_level=0.95, missing_levels="interpolate").fit(pred, y)
    assert np.isfinite(ok.corrections_).all()
    no_median = calibprob.from_quantiles(q[:, [0, 2]], [0.05, 0.95])
    with pytest.raises(ValueError, match=r"missing quantile levels: .*\[0.5\]"):
        calibprob.ConformalizedQuantileRegression(score="cqr-m").fit(no_median, y)


def test_crossing_quantiles_are_refused_with_the_fix():
    q = np.array([[0.0, 1.0, 2.0], [1.0, 0.5, 2.0]])
    bad = xr.Dataset(
        {"quantile": (("obs", "level"), q)},
        coords={"obs": [0, 1], "level": [0.05, 0.5, 0.95]},
        attrs={"family": "quantile", "method": "hand"},
    )
    with pytest.raises(ValueError, match=r"crossing quantiles in pred_cal: .*calibprob.from_quantiles"):
        calibprob.ConformalizedQuantileRegression().fit(bad, [0.0, 1.0])
    with pytest.raises(ValueError, match=r"crossing quantiles: q_lo > q_hi in 1 of 2 rows"):
        cqr_scores([0.0, 0.0], [0.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"crossing quantiles: q_med > q_hi"):
        cqr_scores([0.0], [0.0], [1.0], score="cqr-m", q_med=[2.0])


def test_other_bad_input():
    rng = np.random.default_rng(1)
    q, y = _quantile_base(30, rng)
    pred = calibprob.from_quantiles(q, [0.05, 0.5, 0.95])
    with pytest.raises(ValueError, match=r"score must be one of"):
        calibprob.ConformalizedQuantileRegression(score="cqr").fit(pred, y)
    with pytest.raises(ValueError, match=r"too few calibration points for confidence_level=0.9: .* at least 19"):
        calibprob.ConformalizedQuantileRegression(score="asymmetric").fit(pred.isel(obs=slice(15)), y[:15])
    flat = calibprob.from_quantiles(np.zeros((30, 3)) + np.array([0.0, 0.0, 1.0]), [0.05, 0.5, 0.95])
    with pytest.raises(ValueError, match=r"divides by q_med - q_lo, which is 0.0 <= 0 .* Pass eps > 0"):
        calibprob.ConformalizedQuantileRegression(score="cqr-m").fit(flat, y)
    assert calibprob.ConformalizedQuantileRegression(score="cqr-m", eps=1e-6).fit(flat, y).corrections_.size == 2
    with pytest.raises(ValueError, match=r"y_cal .*NaN|finite"):
        calibprob.ConformalizedQuantileRegression().fit(pred, np.r_[y[:-1], np.nan])
    with pytest.raises(calibprob.NotFittedError, match=r"Call fit"):
        calibprob.ConformalizedQuantileRegression().predict(pred)


# ---------------------------------------------------------------------------
# the comparison runner and the quantile-GBM base
# ---------------------------------------------------------------------------


def _spec(base, methods):
    return {
        "name": "cqr-kinds",
        "datasets": [{"name": "branin", "function": "branin", "n": 160, "noise": 0.3}],
        "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
        "repetitions": 1,
        "seed": 3,
        "base": base,
        "methods": methods,
        "confidence_levels": [0.5, 0.9],
    }


def test_cqr_and_conditional_conformal_kinds_run_in_the_comparison_runner():
    from calibprob.compare import run

    methods = {
        "cqr": {"kind": "cqr"},
        "cqr-m": {"kind": "cqr", "score": "cqr-m"},
        "cc": {"kind": "conditional-conformal"},
    }
    tree = run(_spec({"kind": "ols"}, methods))
    assert list(tree["calibrator"].values) == ["cqr", "cqr-m", "cc"]
    assert np.all(tree["error"].values == "")
    cov = tree["coverage"].sel(confidence_level=0.9).values
    assert np.all((cov >= 0.6) & (cov <= 1.0)), cov  # 40 test points: a wide band, but finite intervals
    assert np.all(np.isfinite(tree["width"].values))


def test_quantile_gbm_base_fits_one_model_per_level_and_sorts():
    pytest.importorskip("sklearn")
    from sklearn.ensemble import HistGradientBoostingRegressor

    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(400, 2))
    y = np.sin(X[:, 0]) + (0.2 + 0.3 * np.abs(X[:, 1])) * rng.standard_normal(400)
    gbm = calibprob.QuantileGradientBoosting(levels=[0.05, 0.5, 0.95], max_iter=30, random_state=0).fit(
        X[:300], y[:300]
    )
    pred = gbm.predict(X[300:])
    direct = [
        HistGradientBoostingRegressor(loss="quantile", quantile=p, max_iter=30, random_state=0).fit(X[:300], y[:300])
        for p in (0.05, 0.5, 0.95)
    ]
    raw = np.column_stack([m.predict(X[300:]) for m in direct])
    np.testing.assert_allclose(pred["quantile"].values, np.sort(raw, axis=1), rtol=0, atol=1e-12)
    assert pred.attrs["n_rearranged"] == int(np.any(np.diff(raw, axis=1) < 0, axis=1).sum())
    cqr = calibprob.ConformalizedQuantileRegression().fit(gbm.predict(X[200:300]), y[200:300])
    assert np.isfinite(cqr.corrections_).all()
    with pytest.raises(ValueError, match=r"X has 1 features but the model was fitted with 2"):
        gbm.predict(X[:3, :1])


def test_quantile_gbm_kind_and_cqr_in_the_runner():
    pytest.importorskip("sklearn")
    from calibprob.compare import run

    base = {"kind": "quantile-gbm", "max_iter": 20}
    tree = run(_spec(base, {"cqr": {"kind": "cqr"}, "cqr-r": {"kind": "cqr", "score": "cqr-r"}}))
    assert np.all(tree["error"].values == "") and np.all(np.isfinite(tree["width"].values))
