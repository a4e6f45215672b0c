"""Split conformal: definition, finite-sample coverage over seeded draws, bad input."""

import math

import numpy as np
import pytest
import xarray as xr

from calibprob._core.estimator import BaseEstimator, NotFittedError
from calibprob.calibrators.conformal import SplitConformalRegressor
from calibprob.calibrators.conformal._intervals import min_points, upper_rank
from calibprob.calibrators.conformal.split import conformal_thresholds


class HeteroOLS(BaseEstimator):
    """Least squares mean; sigma(x) = s0 * (0.2 + |x_0|) with s0 fitted (a test base)."""

    def __init__(self, *, sigma_shape: bool = True):
        self.sigma_shape = sigma_shape

    def fit(self, X, y):
        A = np.c_[np.ones(len(X)), X]
        self.coef_ = np.linalg.lstsq(A, y, rcond=None)[0]
        r = y - A @ self.coef_
        self.s0_ = np.sqrt(np.mean((r / self._shape(X)) ** 2))
        return self

    def _shape(self, X):
        return 0.2 + np.abs(X[:, 0]) if self.sigma_shape else np.ones(len(X))

    def predict_mean_std(self, X, *, include_noise=True):
        return np.c_[np.ones(len(X)), X] @ self.coef_, self.s0_ * self._shape(X)


def draw(rng, n):
    X = rng.uniform(0, 2, size=(n, 1))
    y = 1.0 + 2.0 * X[:, 0] + (0.2 + X[:, 0]) * rng.standard_t(4, size=n)
    return X, y


def coverage_over_draws(score, n_train, n_cal, n_test, level, reps, seed):
    rng = np.random.default_rng(seed)
    cov = np.empty(reps)
    for r in range(reps):
        X, y = draw(rng, n_train + n_cal + n_test)
        scp = SplitConformalRegressor(estimator=HeteroOLS(), score=score, confidence_level=level)
        scp.fit(X[:n_train], y[:n_train]).calibrate(X[n_train : n_train + n_cal], y[n_train : n_train + n_cal])
        iv = scp.predict_interval(X[n_train + n_cal :])
        yt = y[n_train + n_cal :]
        cov[r] = np.mean((yt >= iv["lower"].values) & (yt <= iv["upper"].values))
    return cov.mean(), cov.std(ddof=1) / np.sqrt(reps)


@pytest.mark.parametrize("score", ["absolute", "normalized", "signed"])
@pytest.mark.seeded(11)
def test_coverage_guarantee_fast(score, seed, record_property):
    """c <= P(cover) = ceil(c(n+1))/(n+1) <= c + 1/(n+1) (Lei et al. 2018, Thm 2.2).

    Swept at seeds 0..19 (2026-11-29): 2.09 SE from the exact coverage at worst (4)."""
    n_cal, c = 24, 0.9
    mean, se = coverage_over_draws(score, 30, n_cal, 40, c, reps=400, seed=seed)
    if score == "signed":
        a = (1 - c) / 2
        exact = (math.ceil((1 - a) * (n_cal + 1)) - math.floor(a * (n_cal + 1))) / (n_cal + 1)
    else:
        exact = upper_rank(c, n_cal) / (n_cal + 1)
    record_property("se_from_exact", float(abs(mean - exact) / se))
    assert mean >= c - 3 * se
    assert mean <= c + 1 / (n_cal + 1) + 3 * se
    assert abs(mean - exact) <= 4 * se, (mean, exact, se)


@pytest.mark.slow
@pytest.mark.parametrize("n_cal, c", [(19, 0.9), (24, 0.9), (50, 0.8), (99, 0.95)])
@pytest.mark.parametrize("score", ["absolute", "normalized"])
def test_coverage_guarantee_slow(score, n_cal, c):
    mean, se = coverage_over_draws(score, 30, n_cal, 50, c, reps=4000, seed=5)
    exact = upper_rank(c, n_cal) / (n_cal + 1)
    assert c - 3 * se <= mean <= c + 1 / (n_cal + 1) + 3 * se
    assert abs(mean - exact) <= 4 * se


def test_interval_is_the_conformal_set():
    """y is inside iff fewer than k = ceil(c(n+1)) calibration scores are below R(x, y)."""
    rng = np.random.default_rng(3)
    X, y = draw(rng, 120)
    scp = SplitConformalRegressor(estimator=HeteroOLS(), score="normalized", confidence_level=[0.5, 0.9])
    scp.fit(X[:40], y[:40]).calibrate(X[40:100], y[40:100])
    iv = scp.predict_interval(X[100:])
    mu, sigma = scp.estimator_.predict_mean_std(X[100:])
    R_cal = (
        np.abs(y[40:100] - scp.estimator_.predict_mean_std(X[40:100])[0])
        / scp.estimator_.predict_mean_std(X[40:100])[1]
    )
    cand = mu[:, None] + sigma[:, None] * np.linspace(-6, 6, 2001)[None, :]
    R_new = np.abs(cand - mu[:, None]) / sigma[:, None]
    for j, c in enumerate([0.5, 0.9]):
        k = math.ceil(c * 61 - 1e-9)
        inside = (R_cal[None, None, :] < R_new[:, :, None]).sum(-1) <= k - 1
        lo = iv["lower"].values[:, j][:, None]
        hi = iv["upper"].values[:, j][:, None]
        by_interval = (cand >= lo - 1e-12) & (cand <= hi + 1e-12)
        assert np.array_equal(inside, by_interval)


def test_result_schema_and_levels():
    rng = np.random.default_rng(0)
    X, y = draw(rng, 200)
    scp = SplitConformalRegressor(estimator=HeteroOLS(), confidence_level=0.8).fit(X[:100], y[:100])
    scp.calibrate(X[100:180], y[100:180])
    one = scp.predict_interval(X[180:])
    assert one["lower"].dims == ("obs",) and float(one["confidence_level"]) == 0.8
    many = scp.predict_interval(X[180:], confidence_level=[0.5, 0.8, 0.9])
    assert many["lower"].dims == ("obs", "confidence_level")
    assert np.all(np.diff(many["upper"].values, axis=1) >= 0)
    xr.testing.assert_allclose(many.sel(confidence_level=0.8, drop=True), one.drop_vars("confidence_level"))
    assert many.attrs["n_calibration"] == 80


def test_prefit_equals_fit_then_calibrate():
    rng = np.random.default_rng(1)
    X, y = draw(rng, 150)
    a = SplitConformalRegressor(estimator=HeteroOLS(), score="normalized").fit(X[:50], y[:50]).calibrate(X[50:], y[50:])
    base = HeteroOLS().fit(X[:50], y[:50])
    b = SplitConformalRegressor(estimator=base, score="normalized", prefit=True).calibrate(X[50:], y[50:])
    xr.testing.assert_identical(a.predict_interval(X[:5]), b.predict_interval(X[:5]))


def test_callable_base_and_chunking_agree():
    rng = np.random.default_rng(2)
    X, y = draw(rng, 300)

    def fp(Xt, yt, Xn):
        est = HeteroOLS().fit(Xt, yt)
        return est.predict_mean_std(Xn)

    a = (
        SplitConformalRegressor(estimator=fp, score="normalized")
        .fit(X[:100], y[:100])
        .calibrate(X[100:200], y[100:200])
    )
    b = SplitConformalRegressor(estimator=HeteroOLS(), score="normalized", chunk_size=7)
    b.fit(X[:100], y[:100]).calibrate(X[100:200], y[100:200])
    xr.testing.assert_allclose(a.predict_interval(X[200:]), b.predict_interval(X[200:]))


def test_predict_quantile_function():
    """Central intervals of predict() equal predict_interval where c(n+1) is an integer."""
    rng = np.random.default_rng(4)
    X, y = draw(rng, 300)
    n_cal = 99
    scp = SplitConformalRegressor(estimator=HeteroOLS(), score="normalized").fit(X[:100], y[:100])
    scp.calibrate(X[100 : 100 + n_cal], y[100 : 100 + n_cal])
    pred = scp.predict(X[200:])
    assert pred.attrs["family"] == "quantile"
    assert np.all(np.diff(pred["quantile"].values, axis=1) >= 0)
    for c in (0.5, 0.8, 0.9):  # c * 100 integer
        iv = scp.predict_interval(X[200:], confidence_level=c)
        np.testing.assert_allclose(pred["quantile"].sel(level=round((1 + c) / 2, 10)), iv["upper"], atol=1e-12)
        np.testing.assert_allclose(pred["quantile"].sel(level=round((1 - c) / 2, 10)), iv["lower"], atol=1e-12)
    # and the metrics work on it
    assert np.all(np.isfinite(pred.calib.logpdf(y[200:]).values))


def test_predict_default_levels_with_few_points():
    rng = np.random.default_rng(5)
    X, y = draw(rng, 60)
    scp = SplitConformalRegressor(estimator=HeteroOLS()).fit(X[:30], y[:30]).calibrate(X[30:50], y[30:50])
    pred = scp.predict(X[50:])
    lv = pred["level"].values
    assert lv.min() >= 0.5 - 20 / 21 / 2 - 1e-12 and lv.max() <= 0.5 + 20 / 21 / 2 + 1e-12
    with pytest.raises(ValueError, match=r"level 0.01: .*needs at least 49 calibration points; got n=20"):
        scp.predict(X[50:], levels=[0.01, 0.5])


def test_thresholds_ranks():
    R = np.arange(1.0, 20.0)  # n = 19
    lo, hi = conformal_thresholds(R, np.array([0.9, 0.5]))
    np.testing.assert_array_equal(hi, [18.0, 10.0])  # ceil(0.9*20)=18, ceil(0.5*20)=10
    lo, hi = conformal_thresholds(R - 10, np.array([0.8]), symmetric=False)
    assert (lo[0], hi[0]) == (-8.0, 8.0)  # ranks floor(0.1*20)=2 and ceil(0.9*20)=18
    assert min_points(0.9) == 9 and min_points(0.95) == 19 and min_points(0.5) == 1


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------


@pytest.fixture
def data():
    rng = np.random.default_rng(9)
    return draw(rng, 100)


@pytest.mark.parametrize("level", [1.5, 0.0, 1.0, -0.1, [0.5, 1.2]])
def test_bad_confidence_level(data, level):
    X, y = data
    with pytest.raises(ValueError, match=r"confidence_level must be in \(0, 1\)"):
        SplitConformalRegressor(estimator=HeteroOLS(), confidence_level=level).fit(X, y)
    scp = SplitConformalRegressor(estimator=HeteroOLS()).fit(X[:50], y[:50]).calibrate(X[50:], y[50:])
    with pytest.raises(ValueError, match=r"confidence_level must be in \(0, 1\)"):
        scp.predict_interval(X, confidence_level=level)


def test_too_few_calibration_points(data):
    X, y = data
    scp = SplitConformalRegressor(estimator=HeteroOLS(), confidence_level=0.95).fit(X[:50], y[:50])
    with pytest.raises(ValueError, match=r"needs at least 19 calibration points .*got n=10"):
        scp.calibrate(X[50:60], y[50:60])
    scp = SplitConformalRegressor(estimator=HeteroOLS(), confidence_level=0.5).fit(X[:50], y[:50])
    scp.calibrate(X[50:60], y[50:60])
    with pytest.raises(ValueError, match=r"confidence_level=0.99: .*at least 99 calibration points"):
        scp.predict_interval(X, confidence_level=0.99)
    signed = SplitConformalRegressor(estimator=HeteroOLS(), score="signed", confidence_level=0.9)
    with pytest.raises(ValueError, match=r"at least 19 calibration points \(n >= 2/\(1-c\) - 1"):
        signed.fit(X[:50], y[:50]).calibrate(X[50:60], y[50:60])


def test_normalized_score_needs_sigma(data):
    X, y = data

    def mean_only(Xt, yt, Xn):
        return np.full(len(Xn), yt.mean())

    scp = SplitConformalRegressor(estimator=mean_only, score="normalized").fit(X[:50], y[:50])
    with pytest.raises(ValueError, match=r"gives only a mean \(no sigma\)"):
        scp.calibrate(X[50:], y[50:])
    # the absolute score is fine with it
    SplitConformalRegressor(estimator=mean_only).fit(X[:50], y[:50]).calibrate(X[50:], y[50:])


def test_nonpositive_sigma(data):
    X, y = data

    def bad_sigma(Xt, yt, Xn):
        s = np.ones(len(Xn))
        s[0] = 0.0
        return np.zeros(len(Xn)), s

    scp = SplitConformalRegressor(estimator=bad_sigma, score="normalized").fit(X[:50], y[:50])
    with pytest.raises(ValueError, match=r"sigma must be > 0 .*1 value"):
        scp.calibrate(X[50:], y[50:])


def test_lifecycle_errors(data):
    X, y = data
    with pytest.raises(NotFittedError, match=r"Call calibrate"):
        SplitConformalRegressor(estimator=HeteroOLS()).fit(X, y).predict_interval(X)
    with pytest.raises(NotFittedError, match=r"Call fit"):
        SplitConformalRegressor(estimator=HeteroOLS()).calibrate(X, y)
    with pytest.raises(ValueError, match=r"prefit=True: .*must not be called"):
        SplitConformalRegressor(estimator=HeteroOLS(), prefit=True).fit(X, y)
    with pytest.raises(ValueError, match=r"estimator is required"):
        SplitConformalRegressor().fit(X, y)
    with pytest.raises(ValueError, match=r"mismatched lengths: X_cal has 50 rows, y_cal has 49"):
        SplitConformalRegressor(estimator=HeteroOLS()).fit(X[:50], y[:50]).calibrate(X[50:], y[51:])
    with pytest.raises(ValueError, match=r"y must be finite"):
        SplitConformalRegressor(estimator=HeteroOLS()).fit(X[:50], np.r_[y[:49], np.nan])


# ---------------------------------------------------------------------------
# the split threshold rule with per-point weights (weighted conformal, mass at +inf)
# ---------------------------------------------------------------------------

LEVELS_W = [0.5, 0.7, 0.8, 0.9, 0.95]


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("n", [39, 100, 257])
@pytest.mark.parametrize("w", [1.0, 0.3, 7.1])
def test_equal_weights_give_the_unweighted_thresholds_bitwise(symmetric, n, w):
    from calibprob.calibrators.conformal.split import conformal_thresholds

    R = np.sort(np.random.default_rng(n).normal(size=n))
    R = np.abs(R) if symmetric else R
    R.sort()
    plain = conformal_thresholds(R, LEVELS_W, symmetric=symmetric)
    weighted = conformal_thresholds(R, LEVELS_W, symmetric=symmetric, weights=np.full(n, w), test_weight=w)
    for a, b in zip(plain, weighted):
        np.testing.assert_array_equal(a, b)


def test_weighted_thresholds_equal_a_brute_force_weighted_quantile():
    """Random weights: hi is the least score whose weight share (test mass at +inf) reaches c, by Fractions."""
    from fractions import Fraction

    from calibprob.calibrators.conformal.split import conformal_thresholds

    rng = np.random.default_rng(41)
    n = 60
    R = np.sort(np.abs(rng.normal(size=n)))
    w = rng.integers(1, 9, size=n).astype(float)
    w_test = 5.0
    _, hi = conformal_thresholds(R, LEVELS_W, weights=w, test_weight=w_test)
    total = Fraction(int(w.sum() + w_test))
    for c, h in zip(LEVELS_W, hi):
        cum = np.cumsum(w)
        k = next(i for i in range(n) if Fraction(int(cum[i])) / total >= Fraction(str(c)))
        assert h == R[k]
    # the mass at +inf: a heavy test point leaves the 0.95 level unreachable
    _, hi = conformal_thresholds(R, [0.95], weights=w, test_weight=float(w.sum()))
    assert hi[0] == np.inf
    with pytest.raises(ValueError, match="weights has shape"):
        conformal_thresholds(R, [0.9], weights=w[:3])
    with pytest.raises(ValueError, match="weights must be a 1-D array of finite non-negative numbers"):
        conformal_thresholds(R, [0.9], weights=-w)
