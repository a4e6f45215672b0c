"""Weighted split conformal (Tibshirani et al. 2019) in SplitConformalRegressor / SplitConformalCalibrator (issue 39).

Independent checks: equal weights give the unweighted intervals bit for bit; any weights give the
quantile of the weighted empirical distribution with the test mass at +inf, computed here by a
plain loop; the true likelihood ratio covers at the nominal level under a tilt (seeded, slow).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import calibprob
from calibprob.calibrators.conformal import SplitConformalCalibrator, SplitConformalRegressor
from calibprob.weights import DecayingWeights, DensityRatio, GivenWeights, LikelihoodRatio
from tests.support.weighted import brute_threshold as brute_force_threshold
from tests.support.weighted import gaussian_pred, tilted_coverage, tilted_draw
from tests.support.weighted import heteroscedastic_data as _data

LEVELS = [0.5, 0.8, 0.9, 0.95]


def ols(Xt, yt, Xn):
    A = np.c_[np.ones(len(Xt)), Xt]
    return np.c_[np.ones(len(Xn)), Xn] @ np.linalg.lstsq(A, yt, rcond=None)[0]


def _pred(X, y=None):
    """A base's Gaussian predictive with a spread of its own (for the normalised and signed scores)."""
    return gaussian_pred(X)


# ---------------------------------------------------------------------------
# equal weights: bit for bit
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("score", ["absolute", "normalized", "signed"])
@pytest.mark.parametrize("c", [1.0, 0.37, 1e-3, 7e5])
def test_equal_weights_are_the_unweighted_calibrator_bitwise(score, c):
    X, y = _data(1)
    pred = _pred(X)
    cal, test = pred.isel(obs=slice(0, 200)), pred.isel(obs=slice(200, None))
    plain = SplitConformalCalibrator(score=score).fit(cal, y[:200]).predict_interval(test, LEVELS)
    weighted = SplitConformalCalibrator(score=score).fit(cal, y[:200], weights=np.full(200, c))
    out = weighted.predict_interval(test, LEVELS, weights=np.full(200, c))
    assert np.array_equal(out["lower"].values, plain["lower"].values)
    assert np.array_equal(out["upper"].values, plain["upper"].values)
    decay = SplitConformalCalibrator(score=score).fit(cal, y[:200], weights=DecayingWeights(1.0))
    assert np.array_equal(decay.predict_interval(test, LEVELS)["upper"].values, plain["upper"].values)


def test_equal_weights_are_the_unweighted_regressor_bitwise():
    X, y = _data(2, 600)
    plain = SplitConformalRegressor(estimator=ols).fit(X[:200], y[:200]).calibrate(X[200:400], y[200:400])
    weighted = SplitConformalRegressor(estimator=ols).fit(X[:200], y[:200])
    weighted.calibrate(X[200:400], y[200:400], weights=np.ones(200))
    a = plain.predict_interval(X[400:], LEVELS)
    b = weighted.predict_interval(X[400:], LEVELS, weights=np.ones(200))
    assert np.array_equal(a["lower"].values, b["lower"].values) and np.array_equal(a["upper"].values, b["upper"].values)
    assert b.attrs["weights_ess"] == 200.0 and "weights_ess" not in a.attrs


def test_a_level_beyond_equal_weights_is_refused_like_the_unweighted_rule():
    """n = 9 resolves 0.9 and not 0.95, weighted or not."""
    X, y = _data(3, 30)
    pred = _pred(X)
    cal = SplitConformalCalibrator().fit(pred.isel(obs=slice(0, 9)), y[:9], weights=np.ones(9))
    cal.predict_interval(pred.isel(obs=slice(9, None)), 0.9, weights=np.ones(21))
    with pytest.raises(ValueError, match=r"too small for confidence level 0.95: the attainable level is 0.9 "):
        cal.predict_interval(pred.isel(obs=slice(9, None)), 0.95, weights=np.ones(21))


# ---------------------------------------------------------------------------
# any weights: the brute-force weighted quantile
# ---------------------------------------------------------------------------


def test_oracle_weights_equal_a_brute_force_weighted_quantile():
    X, y = _data(4, 500)
    ratio = DensityRatio(lambda Z: np.exp(0.8 * Z[:, 0] - 0.3 * Z[:, 1]))
    model = SplitConformalRegressor(estimator=ols).fit(X[:200], y[:200])
    model.calibrate(X[200:300], y[200:300], weights=ratio)
    iv = model.predict_interval(X[300:], LEVELS)
    mu = ols(X[:200], y[:200], X[300:])
    scores = list(np.abs(y[200:300] - ols(X[:200], y[:200], X[200:300])))
    w_cal = list(ratio.ratio(X[200:300]))
    for j, t in enumerate(ratio.ratio(X[300:])):
        for k, c in enumerate(LEVELS):
            r = brute_force_threshold(scores, w_cal, t, c)
            assert iv["upper"].values[j, k] == pytest.approx(mu[j] + r, rel=1e-12)
            assert iv["lower"].values[j, k] == pytest.approx(mu[j] - r, rel=1e-12)
    assert np.isinf(iv["upper"].values).any() and np.isfinite(iv["upper"].values).any()  # heavy test points: +inf


def test_signed_score_tails_equal_brute_force():
    """Signed score: the upper end is the 1 - alpha/2 weighted quantile with mass at +inf; the lower end the
    mirror (the same rule on the negated scores, mass at -inf)."""
    X, y = _data(5, 300)
    pred = _pred(X)
    rng = np.random.default_rng(5)
    w, t = rng.exponential(size=150), rng.exponential(size=150)
    cal = SplitConformalCalibrator(score="signed").fit(pred.isel(obs=slice(0, 150)), y[:150], weights=w)
    iv = cal.predict_interval(pred.isel(obs=slice(150, None)), 0.8, weights=t)
    mu, sd = pred.calib.mean().values, pred.calib.std().values
    R = list((y[:150] - mu[:150]) / sd[:150])
    for j in range(150):
        hi = brute_force_threshold(R, list(w), t[j], 0.9)
        lo = -brute_force_threshold([-r for r in R], list(w), t[j], 0.9)
        assert iv["upper"].values[j] == pytest.approx(mu[150 + j] + hi * sd[150 + j], rel=1e-12)
        assert iv["lower"].values[j] == pytest.approx(mu[150 + j] + lo * sd[150 + j], rel=1e-12)


def test_labelled_weights_follow_the_obs_labels():
    X, y = _data(6, 200)
    pred = _pred(X).assign_coords(obs=[f"r{i}" for i in range(200)])
    cal, test = pred.isel(obs=slice(0, 100)), pred.isel(obs=slice(100, None))
    w = np.random.default_rng(6).exponential(size=100)
    t = np.random.default_rng(7).exponential(size=100)
    ref = SplitConformalCalibrator().fit(cal, y[:100], weights=w).predict_interval(test, 0.8, weights=t)
    shuffle = np.random.default_rng(8).permutation(100)
    ws = pd.Series(w[shuffle], index=cal["obs"].values[shuffle])
    ts = pd.Series(t[shuffle], index=test["obs"].values[shuffle])
    out = SplitConformalCalibrator().fit(cal, y[:100], weights=ws).predict_interval(test, 0.8, weights=ts)
    assert np.array_equal(out["upper"].values, ref["upper"].values)


def test_likelihood_ratio_object_on_both_sides():
    """A LikelihoodRatio fitted on (X_cal, X_test) gives its cross-fitted values on exactly those rows."""
    X, y = _data(9, 700)
    X[500:, 0] += 0.7  # the test inputs shifted
    lr = LikelihoodRatio().fit(X[200:500], X[500:])
    model = SplitConformalRegressor(estimator=ols).fit(X[:200], y[:200]).calibrate(X[200:500], y[200:500], weights=lr)
    a = model.predict_interval(X[500:], 0.9)
    arrays = SplitConformalRegressor(estimator=ols).fit(X[:200], y[:200])
    arrays.calibrate(X[200:500], y[200:500], weights=lr.calibration_weights_)
    b = arrays.predict_interval(X[500:], 0.9, weights=lr.test_weights_)
    assert np.array_equal(a["upper"].values, b["upper"].values)
    assert model.weight_diagnostics_.ess < 300 and model.weight_diagnostics_.coverage_gap_bound is None


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------


def test_misuse_is_refused_naming_the_fix():
    X, y = _data(10, 300)
    pred = _pred(X)
    with pytest.raises(ValueError, match=r"GivenWeights holds no test weights"):
        SplitConformalCalibrator().fit(
            pred.isel(obs=slice(0, 100)), y[:100], weights=GivenWeights(np.ones(100))
        ).predict_interval(pred.isel(obs=slice(100, None)))
    cal, test = pred.isel(obs=slice(0, 100)), pred.isel(obs=slice(100, None))
    plain = SplitConformalCalibrator().fit(cal, y[:100])
    with pytest.raises(
        ValueError,
        match=r"weights= at prediction needs a weighted fit: this SplitConformal\w+ was calibrated without weights",
    ):
        plain.predict_interval(test, weights=np.ones(200))
    arr = SplitConformalCalibrator().fit(cal, y[:100], weights=np.ones(100))
    with pytest.raises(ValueError, match=r"weighted by an array, so the test points need their weights too"):
        arr.predict_interval(test)
    with pytest.raises(ValueError, match=r"weighted by an array, so the test points need their weights too"):
        arr.predict(test)  # the weighted quantile function needs the test rows' weights too
    # weights within groups (the post-processor's Mondrian): weights at prediction need a weighted fit
    grouped = SplitConformalCalibrator().fit(cal, y[:100], groups=np.r_[[0] * 50, [1] * 50])
    with pytest.raises(ValueError, match=r"weights= at prediction needs a weighted fit"):
        grouped.predict_interval(test, groups=np.zeros(200, int), weights=np.ones(200))
    with pytest.raises(ValueError, match=r"weights must be finite; got nan at index 3"):
        SplitConformalCalibrator().fit(cal, y[:100], weights=np.r_[np.ones(3), np.nan, np.ones(96)])
    with pytest.raises(ValueError, match=r"weights must be non-negative; got -1.0 at index 0"):
        SplitConformalCalibrator().fit(cal, y[:100], weights=np.r_[-1.0, np.ones(99)])
    with pytest.raises(ValueError, match=r"weights are all zero \(100 points\)"):
        SplitConformalCalibrator().fit(cal, y[:100], weights=np.zeros(100))
    with pytest.raises(ValueError, match=r"weights must be positive for test points; got 0 at index 0"):
        arr.predict_interval(test, weights=np.r_[0.0, np.ones(199)])
    with pytest.raises(ValueError, match=r"DensityRatio needs the calibration inputs"):
        SplitConformalCalibrator().fit(cal, y[:100], weights=DensityRatio(lambda Z: Z[:, 0]))


def test_a_separating_classifier_is_refused_or_warned():
    """Calibration inputs near 0, test inputs near 8: ESS about 1, the level 0.9 unattainable."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(500, 1))
    X[400:] += 8.0
    y = X[:, 0] + rng.normal(size=500)
    model = SplitConformalRegressor(estimator=ols).fit(X[:200], y[:200])
    model.calibrate(X[200:400], y[200:400], weights=LikelihoodRatio().fit(X[200:400], X[400:]))
    with pytest.raises(ValueError, match=r"effective sample size is 1\.\d+ at the worst test point.*attainable level"):
        model.predict_interval(X[400:], 0.9)
    model.calibrate(X[200:400], y[200:400], weights=LikelihoodRatio(on_small="warn").fit(X[200:400], X[400:]))
    with pytest.warns(calibprob.CalibprobWarning, match=r"attainable level"):
        iv = model.predict_interval(X[400:], 0.9)
    assert np.isinf(iv["upper"].values).all()


# ---------------------------------------------------------------------------
# the guarantee under a tilt (Tibshirani et al. 2019, Corollary 1)
# ---------------------------------------------------------------------------


def _tilted_coverage(reps: int, n: int = 100, m: int = 10, level: float = 0.9, seed: int = 2019):
    """Coverage of weighted (true ratio) and unweighted split conformal when the test inputs are tilted.

    Calibration X ~ N(0, 1), test X ~ N(1, 1): w(x) = exp(x - 1/2); y = x + (0.5 + x^2/2) eps, so the
    residual spread grows where the test inputs go. Returns per-repetition mean coverages. A test
    point far in the tail may get an infinite interval (its own mass exceeds 1 - level): part of
    the method, so ``on_small="ignore"``.
    """
    rng = np.random.default_rng(seed)
    weighted, plain = np.empty(reps), np.empty(reps)
    for r in range(reps):
        draw = tilted_draw(rng, n, m)
        weighted[r] = tilted_coverage(SplitConformalCalibrator, draw, level)
        plain[r] = tilted_coverage(SplitConformalCalibrator, draw, level, weighted=False)
    return weighted, plain


@pytest.mark.slow
@pytest.mark.seeded(2019)
def test_true_ratio_covers_at_the_nominal_level_under_a_tilt(seed, record_property):
    """2 000 seeded repetitions: weighted >= 0.9 - 3 se; unweighted clearly below (the shift matters). Their seed
    from the seed sweep, 2019 in the slow run."""
    weighted, plain = _tilted_coverage(2000, seed=seed)
    se = weighted.std(ddof=1) / np.sqrt(weighted.size)
    record_property("weighted_below_nominal_se", (0.9 - weighted.mean()) / se)
    record_property("plain_below_nominal_se", (0.9 - plain.mean()) / se)
    assert weighted.mean() >= 0.9 - 3 * se, (weighted.mean(), se)
    assert plain.mean() < 0.9 - 10 * se, plain.mean()


def test_a_weighted_calibrator_saves_and_loads(tmp_path):
    """The calibration weights are saved (the weights object is not: pass the test weights after load)."""
    X, y = _data(12, 300)
    pred = _pred(X)
    cal, test = pred.isel(obs=slice(0, 200)), pred.isel(obs=slice(200, None))
    model = SplitConformalCalibrator().fit(cal, y[:200], weights=DecayingWeights(0.98))
    model.save(tmp_path / "m.nc")
    back = calibprob.load(tmp_path / "m.nc")
    a, b = model.predict_interval(test, 0.8), back.predict_interval(test, 0.8, weights=np.ones(100))
    assert np.array_equal(a["upper"].values, b["upper"].values)
    assert np.array_equal(back.calibration_weights_, model.calibration_weights_)


def test_groups_with_weights_are_weighted_within_each_group_as_brute_force():
    """SplitConformalRegressor(groups=, weights=): each group's weighted quantile of its own scores (Mondrian's rule)."""
    X, y = _data(12, 700)
    ratio = DensityRatio(lambda Z: np.exp(0.6 * Z[:, 0]))
    g = np.where(X[:, 1] > 0, "pos", "neg")
    model = SplitConformalRegressor(estimator=ols).fit(X[:200], y[:200])
    model.calibrate(X[200:500], y[200:500], groups=g[200:500], weights=ratio)
    iv = model.predict_interval(X[500:], LEVELS, groups=g[500:])
    mu = ols(X[:200], y[:200], X[500:])
    scores = np.abs(y[200:500] - ols(X[:200], y[:200], X[200:500]))
    w_cal, t_test = ratio.ratio(X[200:500]), ratio.ratio(X[500:])
    for j in range(0, 200, 7):
        own = g[200:500] == g[500 + j]
        for k, c in enumerate(LEVELS):
            r = brute_force_threshold(list(scores[own]), list(w_cal[own]), t_test[j], c)
            assert iv["upper"].values[j, k] == pytest.approx(mu[j] + r, rel=1e-12)
            assert iv["lower"].values[j, k] == pytest.approx(mu[j] - r, rel=1e-12)
    # the same numbers as arrays on both sides; equal weights are the grouped unweighted intervals bit for bit
    by_array = SplitConformalRegressor(estimator=ols).fit(X[:200], y[:200])
    by_array.calibrate(X[200:500], y[200:500], groups=g[200:500], weights=w_cal)
    again = by_array.predict_interval(X[500:], LEVELS, groups=g[500:], weights=t_test)
    np.testing.assert_array_equal(again["upper"].values, iv["upper"].values)
    plain = SplitConformalRegressor(estimator=ols).fit(X[:200], y[:200])
    plain.calibrate(X[200:500], y[200:500], groups=g[200:500])
    equal = SplitConformalRegressor(estimator=ols).fit(X[:200], y[:200])
    equal.calibrate(X[200:500], y[200:500], groups=g[200:500], weights=np.full(300, 0.37))
    a = plain.predict_interval(X[500:], LEVELS, groups=g[500:])
    b = equal.predict_interval(X[500:], LEVELS, groups=g[500:], weights=np.full(200, 0.37))
    np.testing.assert_array_equal(a["lower"].values, b["lower"].values)
    np.testing.assert_array_equal(a["upper"].values, b["upper"].values)
    with pytest.raises(ValueError, match=r"weighted by an array, so the test points need their weights too"):
        by_array.predict_interval(X[500:], LEVELS, groups=g[500:])
    with pytest.raises(ValueError, match=r"weights= at prediction needs a weighted fit"):
        plain.predict_interval(X[500:], LEVELS, groups=g[500:], weights=t_test)
    with pytest.raises(ValueError, match=r"predict\(\) after a weighted calibration would ignore the weights"):
        model.predict(X[500:], groups=g[500:])
