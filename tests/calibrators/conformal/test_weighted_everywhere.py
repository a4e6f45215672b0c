"""Weights with one spelling in the CPS, CQR and Mondrian (issue 39, item 2).

Independent checks: equal weights (any constant) give each method's unweighted output bit for
bit; unequal weights equal a brute-force weighted CDF / quantile computed here by plain loops
(Tibshirani et al. 2019: the scores' weighted empirical law with the test point's mass at
+inf); Mondrian with weights is the weighted calibrator run by hand on each group; under a
tilt the true ratio covers at the nominal level (seeded, slow); bad weights are refused
naming the fix, for every method.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import calibprob
from calibprob import ConformalizedQuantileRegression
from calibprob.calibrators.conformal import ConformalPredictiveSystem, SplitConformalCalibrator
from calibprob.calibrators.conformal.cqr import read_quantiles
from calibprob.weights import GivenWeights, LikelihoodRatio
from tests.support.weighted import brute_threshold, tilted_coverage, tilted_draw
from tests.support.weighted import gaussian_pred as _pred
from tests.support.weighted import heteroscedastic_data as _data

LEVELS = [0.5, 0.8, 0.9]


def _split(seed=0, n=400, n_cal=200):
    X, y = _data(seed, n)
    pred = _pred(X)
    return X, y, pred.isel(obs=slice(0, n_cal)), pred.isel(obs=slice(n_cal, None)), n_cal


def _ends(iv):
    return iv["lower"].values, iv["upper"].values


def brute_cdf(scores, w, a, t, tau):
    """Q(a, tau) = (sum_{R_i < a} w_i + tau (sum_{R_i = a} w_i + t)) / (W + t), by a plain loop."""
    below = sum(wi for si, wi in zip(scores, w) if si < a)
    tie = sum(wi for si, wi in zip(scores, w) if si == a)
    return (below + tau * (tie + t)) / (sum(w) + t)


# ---------------------------------------------------------------------------
# equal weights: the unweighted method, bit for bit
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("c", [1.0, 0.37, 7e5])
def test_cps_equal_weights_are_unweighted_bitwise(c):
    X, y, cal, test, n = _split(1)
    m = test.sizes["obs"]
    plain = ConformalPredictiveSystem().fit(cal, y[:n])
    weighted = ConformalPredictiveSystem().fit(cal, y[:n], weights=np.full(n, c))
    w_test = np.full(m, c)
    assert np.array_equal(plain.predict(test).calib.quantiles, weighted.predict(test, weights=w_test).calib.quantiles)
    a, b = plain.predict_interval(test, LEVELS), weighted.predict_interval(test, LEVELS, weights=w_test)
    assert all(np.array_equal(u, v) for u, v in zip(_ends(a), _ends(b)))
    tau = np.random.default_rng(3).uniform(size=m)
    assert np.array_equal(
        plain.predict_cdf(test, y[n:], tau=tau), weighted.predict_cdf(test, y[n:], tau=tau, weights=w_test)
    )


@pytest.mark.parametrize("score", ["absolute", "normalized", "signed"])
def test_split_quantile_function_equal_weights_bitwise_and_knots(score):
    """Equal weights: the unweighted function bit for bit; unequal: score R_(k) at |2p-1| = C_k/(W+t)."""
    X, y, cal, test, n = _split(12)
    plain = SplitConformalCalibrator(score=score).fit(cal, y[:n]).predict(test)
    same = SplitConformalCalibrator(score=score).fit(cal, y[:n], weights=np.full(n, 3.0))
    assert np.array_equal(plain.calib.quantiles, same.predict(test, weights=np.full(200, 3.0)).calib.quantiles)
    if score == "signed":
        return  # the signed score's knots are the CPS's (tested above)
    w = np.random.default_rng(12).exponential(size=n)
    model = SplitConformalCalibrator(score=score).fit(cal, y[:n], weights=w)
    R, ws, t = model.scores_, model.calibration_weights_, 0.6
    cum = np.cumsum(ws)
    k = np.arange(30, 170, 23)
    levels = np.sort(np.r_[(1 - cum[k] / (cum[-1] + t)) / 2, (1 + cum[k] / (cum[-1] + t)) / 2])
    q = model.predict(test.isel(obs=[0]), levels=levels, weights=[t]).calib.quantiles[0]
    mu, s = X[n, 0], (1 + 0.5 * abs(X[n, 1])) if score == "normalized" else 1.0
    np.testing.assert_allclose(q, mu + s * np.r_[-R[k][::-1], R[k]], rtol=1e-10, atol=1e-12)
    # and its interval at c = C_k/(W+t) is the weighted conformal interval (brute force)
    c = float(cum[k[2]] / (cum[-1] + t))
    thr = brute_threshold(list(R), list(ws), t, c)
    assert thr == R[k[2]]


@pytest.mark.parametrize("score", ["symmetric", "asymmetric", "cqr-r", "cqr-m"])
@pytest.mark.parametrize("c", [1.0, 0.37])
def test_cqr_equal_weights_are_unweighted_bitwise(score, c):
    X, y, cal, test, n = _split(2)
    plain = ConformalizedQuantileRegression(score=score, confidence_level=LEVELS).fit(cal, y[:n])
    weighted = ConformalizedQuantileRegression(score=score, confidence_level=LEVELS).fit(
        cal, y[:n], weights=np.full(n, c)
    )
    a, b = plain.predict(test), weighted.predict(test, weights=np.full(test.sizes["obs"], c))
    assert all(np.array_equal(u, v) for u, v in zip(_ends(a), _ends(b)))
    assert b.attrs["weights_ess"] == pytest.approx(n) and "weights_ess" not in a.attrs


@pytest.mark.parametrize("cls", [SplitConformalCalibrator, ConformalPredictiveSystem, ConformalizedQuantileRegression])
def test_mondrian_equal_weights_are_unweighted_bitwise(cls):
    X, y, cal, test, n = _split(3, 600, 300)
    g = (X[:, 1] > 0).astype(int)
    plain = cls().fit(cal, y[:n], groups=g[:n])
    weighted = cls().fit(cal, y[:n], groups=g[:n], weights=np.full(n, 2.5))
    w_test = np.full(test.sizes["obs"], 2.5)
    a = plain.predict_interval(test, groups=g[n:])
    b = weighted.predict_interval(test, groups=g[n:], weights=w_test)
    assert all(np.array_equal(u, v) for u, v in zip(_ends(a), _ends(b)))
    if cls is ConformalPredictiveSystem:
        qa = plain.predict(test, groups=g[n:]).calib.quantiles
        assert np.array_equal(qa, weighted.predict(test, groups=g[n:], weights=w_test).calib.quantiles)


# ---------------------------------------------------------------------------
# unequal weights: a brute-force weighted CDF / quantile
# ---------------------------------------------------------------------------


def test_weighted_cps_cdf_equals_brute_force():
    X, y, cal, test, n = _split(4, 260, 200)
    rng = np.random.default_rng(4)
    w, t = rng.exponential(size=n), rng.exponential(size=test.sizes["obs"]) + 0.05
    cps = ConformalPredictiveSystem().fit(cal, y[:n], weights=w)
    tau = rng.uniform(size=t.size)
    got = cps.predict_cdf(test, y[n:], tau=tau, weights=t)
    mu_c, sd_c = X[:n, 0], 1 + 0.5 * np.abs(X[:n, 1])
    mu_t, sd_t = X[n:, 0], 1 + 0.5 * np.abs(X[n:, 1])
    scores = list((y[:n] - mu_c) / sd_c)
    a = (y[n:] - mu_t) / sd_t
    want = [brute_cdf(scores, list(w), a[j], t[j], tau[j]) for j in range(t.size)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # at a calibration score the CDF counts that score's own weight as a tie
    at = cps.predict_cdf(test.isel(obs=[0]), [mu_t[0] + sd_t[0] * scores[5]], tau=1.0, weights=t[:1])
    np.testing.assert_allclose(at, [brute_cdf(scores, list(w), scores[5], t[0], 1.0)], rtol=1e-12)


def test_weighted_cps_quantiles_pass_through_the_middle_of_every_weighted_jump():
    """At level F(R_(i)) = (C_{i-1} + (w_(i) + t)/2)/(W + t) the quantile is mu + s R_(i); linear between."""
    X, y, cal, test, n = _split(5, 230, 200)
    rng = np.random.default_rng(5)
    w = rng.exponential(size=n)
    cps = ConformalPredictiveSystem().fit(cal, y[:n], weights=w)
    R, ws = cps.scores_, cps.calibration_weights_
    t = 0.8
    cum = np.cumsum(ws)
    knots = (cum - ws + (ws + t) / 2) / (cum[-1] + t)
    pick = np.arange(20, 180, 17)
    levels = knots[pick]
    one = test.isel(obs=[0])
    q = cps.predict(one, levels=levels, weights=[t]).calib.quantiles[0]
    mu, s = X[n, 0], 1 + 0.5 * abs(X[n, 1])
    np.testing.assert_allclose(q, mu + s * R[pick], rtol=1e-10, atol=1e-12)
    mid = (knots[pick] + knots[pick + 1]) / 2  # half way in level is half way in score
    q_mid = cps.predict(one, levels=mid, weights=[t]).calib.quantiles[0]
    np.testing.assert_allclose(q_mid, mu + s * (R[pick] + R[pick + 1]) / 2, rtol=1e-10, atol=1e-12)
    # between two scores the exact CDF is flat at C_i / (W + t) (tau = 0), the continuous one passes there
    gap = cps.predict_cdf(
        one.isel(obs=[0] * pick.size), mu + s * (R[pick] + R[pick + 1]) / 2, tau=0.0, weights=np.full(pick.size, t)
    )
    np.testing.assert_allclose(gap, cum[pick] / (cum[-1] + t), rtol=1e-12)


@pytest.mark.parametrize("score", ["symmetric", "asymmetric", "cqr-r"])
def test_weighted_cqr_equals_brute_force(score):
    X, y, cal, test, n = _split(6, 230, 200)
    rng = np.random.default_rng(6)
    w, t = rng.exponential(size=n), rng.exponential(size=test.sizes["obs"]) + 0.05
    cqr = ConformalizedQuantileRegression(score=score, confidence_level=LEVELS).fit(cal, y[:n], weights=w)
    iv = cqr.predict(test, weights=t)
    q_cal = read_quantiles(cal, np.array(LEVELS), median=False)
    q_te = read_quantiles(test, np.array(LEVELS), median=False)
    for j, c in enumerate(LEVELS):
        lo_c, hi_c, lo_t, hi_t = q_cal["lo"][:, j], q_cal["hi"][:, j], q_te["lo"][:, j], q_te["hi"][:, j]
        for r in range(0, t.size, 3):
            if score == "asymmetric":
                qq = 1 - (1 - c) / 2
                e_lo = brute_threshold(list(lo_c - y[:n]), list(w), t[r], qq)
                e_hi = brute_threshold(list(y[:n] - hi_c), list(w), t[r], qq)
                want = (lo_t[r] - e_lo, hi_t[r] + e_hi)
            else:
                scale_c = hi_c - lo_c if score == "cqr-r" else 1.0
                scale_t = hi_t[r] - lo_t[r] if score == "cqr-r" else 1.0
                E = np.maximum(lo_c - y[:n], y[:n] - hi_c) / scale_c
                e = brute_threshold(list(E), list(w), t[r], c)
                want = (lo_t[r] - e * scale_t, hi_t[r] + e * scale_t)
            got = (iv["lower"].values[r, j], iv["upper"].values[r, j])
            np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("cls", [SplitConformalCalibrator, ConformalPredictiveSystem, ConformalizedQuantileRegression])
def test_mondrian_weights_act_within_groups(cls):
    """Each group's intervals are the weighted calibrator fitted on that group's rows and weights alone."""
    X, y, cal, test, n = _split(7, 600, 300)
    g = (X[:, 1] > 0.3).astype(int)
    rng = np.random.default_rng(7)
    w, t = rng.exponential(size=n), rng.exponential(size=300) + 0.1
    grouped = cls().fit(cal, y[:n], groups=g[:n], weights=w).predict_interval(test, 0.9, groups=g[n:], weights=t)
    for k in (0, 1):
        rc, rt = np.flatnonzero(g[:n] == k), np.flatnonzero(g[n:] == k)
        own = cls().fit(cal.isel(obs=rc), y[:n][rc], weights=w[rc])
        iv = own.predict_interval(test.isel(obs=rt), 0.9, weights=t[rt])
        np.testing.assert_array_equal(grouped["lower"].values[rt], np.ravel(iv["lower"].values))
        np.testing.assert_array_equal(grouped["upper"].values[rt], np.ravel(iv["upper"].values))


# ---------------------------------------------------------------------------
# bad input, for every method that takes weights
# ---------------------------------------------------------------------------

METHODS = {
    "cps": lambda: ConformalPredictiveSystem(),
    "cqr": lambda: ConformalizedQuantileRegression(),
    "mondrian-cps": lambda: calibprob.Mondrian(ConformalPredictiveSystem()),
    "mondrian-cqr": lambda: calibprob.Mondrian(ConformalizedQuantileRegression()),
}


def _fit(name, model, cal, y, weights, groups=None):
    if name.startswith("mondrian"):
        return model.fit(cal, y, groups=np.zeros(y.size, int) if groups is None else groups, weights=weights)
    return model.fit(cal, y, weights=weights)


def _interval(name, model, test, level, weights):
    kw = {"groups": np.zeros(test.sizes["obs"], int)} if name.startswith("mondrian") else {}
    return model.predict_interval(test, level, weights=weights, **kw)


@pytest.mark.parametrize("name", list(METHODS))
def test_bad_weights_are_refused_naming_the_fix(name):
    X, y, cal, test, n = _split(8, 300, 100)
    with pytest.raises(ValueError, match=r"weights must be finite; got nan at index 3"):
        _fit(name, METHODS[name](), cal, y[:n], np.r_[np.ones(3), np.nan, np.ones(n - 4)])
    with pytest.raises(ValueError, match=r"weights must be non-negative; got -1.0 at index 0.*exp\(log_weights\)"):
        _fit(name, METHODS[name](), cal, y[:n], np.r_[-1.0, np.ones(n - 1)])
    with pytest.raises(ValueError, match=r"weights are all zero \(100 points\).*omit weights="):
        _fit(name, METHODS[name](), cal, y[:n], np.zeros(n))
    model = _fit(name, METHODS[name](), cal, y[:n], np.ones(n))
    with pytest.raises(ValueError, match=r"weighted by an array, so the test points need their weights too"):
        _interval(name, model, test, 0.9, None)
    with pytest.raises(ValueError, match=r"weights must be positive for test points; got 0 at index 0"):
        _interval(name, model, test, 0.9, np.r_[0.0, np.ones(199)])
    # a level the weights cannot attain: one heavy test point (ESS below 1/(1 - 0.9))
    with pytest.raises(ValueError, match=r"too small for confidence level 0.9: the attainable level is 0\.\d+"):
        _interval(name, model, test, 0.9, np.r_[50.0, np.ones(199)])


@pytest.mark.parametrize("name", list(METHODS))
def test_a_separating_ratio_model_is_refused_or_warned(name):
    """Calibration inputs near 0, test inputs near 8: the classifier separates them, ESS about 1."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(400, 1))
    X[200:] += 8.0
    y = X[:, 0] + rng.normal(size=400)
    pred = calibprob.normal(X[:, 0], np.ones(400))
    cal, test = pred.isel(obs=slice(0, 200)), pred.isel(obs=slice(200, None))
    ratio = LikelihoodRatio().fit(X[:200], X[200:])
    model = _fit(name, METHODS[name](), cal, y[:200], ratio)
    with pytest.raises(ValueError, match=r"effective sample size is 1\.\d+ at the worst test point.*attainable level"):
        _interval(name, model, test, 0.9, None)
    warned = _fit(name, METHODS[name](), cal, y[:200], LikelihoodRatio(on_small="warn").fit(X[:200], X[200:]))
    with pytest.warns(calibprob.CalibprobWarning, match=r"attainable level"):
        iv = _interval(name, warned, test, 0.9, None)
    assert np.isinf(iv["upper"].values).all()


def test_cps_quantile_function_refuses_levels_the_weights_cannot_resolve():
    X, y, cal, test, n = _split(9, 300, 100)
    cps = ConformalPredictiveSystem().fit(cal, y[:n], weights=np.ones(n))
    heavy = np.r_[80.0, np.ones(199)]
    with pytest.raises(ValueError, match=r"levels \[0\.99\] lie outside what the weighted calibration scores resolve"):
        cps.predict(test, levels=[0.5, 0.99], weights=heavy)
    with pytest.raises(ValueError, match=r"fewer than 2 default levels: the weights are too concentrated"):
        cps.predict(test, weights=np.r_[1e4, np.ones(199)])
    out = cps.predict(test, weights=heavy)  # the default levels inside the common range
    # one point's mass 80/180 at +inf: every row resolves [40.5/180, 139.5/180] (the heavy row's knots)
    assert out.calib.levels.min() >= 40.5 / 180 and out.calib.levels.max() <= 139.5 / 180
    assert out.sizes["level"] == 55 and out.attrs["weights_ess"] == pytest.approx(n)


def test_weights_misuse_in_mondrian_is_refused():
    X, y, cal, test, n = _split(10, 300, 100)
    g = np.r_[[0] * 50, [1] * 50]
    with pytest.raises(ValueError, match=r"weights= with fallback='pooled' is not supported"):
        calibprob.Mondrian(ConformalPredictiveSystem(), fallback="pooled").fit(cal, y[:n], groups=g, weights=np.ones(n))
    with pytest.raises(TypeError, match=r"does not take weights"):
        calibprob.Mondrian(calibprob.OnlineQuantileRecalibrator()).fit(cal, y[:n], groups=g, weights=np.ones(n))
    cps = ConformalPredictiveSystem().fit(cal, y[:n], groups=g, weights=GivenWeights(np.ones(n), test=np.ones(200)))
    out = cps.predict_interval(test, 0.8, groups=np.zeros(200, int))  # the object's own test weights
    assert np.isfinite(out["upper"].values).all()


# ---------------------------------------------------------------------------
# the guarantee under a tilt (Tibshirani et al. 2019, Corollary 1), seeded
# ---------------------------------------------------------------------------


def _tilted(make, reps: int, n: int = 100, m: int = 10, level: float = 0.9, seed: int = 2019):
    """Per-repetition coverage of ``make()`` fitted with the true ratio exp(x - 1/2) (cal N(0,1), test N(1,1))."""
    rng = np.random.default_rng(seed)
    cov = np.empty(reps)
    for r in range(reps):
        cov[r] = tilted_coverage(make, tilted_draw(rng, n, m), level)
    return cov


@pytest.mark.slow
@pytest.mark.parametrize("make", [ConformalPredictiveSystem, ConformalizedQuantileRegression], ids=["cps", "cqr"])
def test_true_ratio_covers_at_the_nominal_level_under_a_tilt(make):
    """1 500 seeded repetitions: weighted coverage >= 0.9 - 3 standard errors."""
    cov = _tilted(make, 1500)
    se = cov.std(ddof=1) / np.sqrt(cov.size)
    assert cov.mean() >= 0.9 - 3 * se, (cov.mean(), se)


# ---------------------------------------------------------------------------
# conditional conformal: the tilt as a column of the function class (Gibbs, Cherian & Candès 2023)
# ---------------------------------------------------------------------------


def test_conditional_conformal_weights_are_a_column_of_the_class():
    """Equal weights: bit for bit unweighted; unequal: the LP with w appended to Phi at both ends."""
    from calibprob import ConditionalConformal

    X, y, cal, test, n = _split(13)
    m = test.sizes["obs"]
    plain = ConditionalConformal().fit(cal, y[:n]).predict(test)
    same = ConditionalConformal().fit(cal, y[:n], weights=np.full(n, 0.37)).predict(test, weights=np.full(m, 0.37))
    assert all(np.array_equal(u, v) for u, v in zip(_ends(plain), _ends(same)))
    w, t = np.exp(X[:n, 0] / 2), np.exp(X[n:, 0] / 2)
    weighted = ConditionalConformal().fit(cal, y[:n], weights=w)
    assert weighted.columns_ == ["intercept", "weights"]
    by_hand = ConditionalConformal().fit(cal, y[:n], features=w[:, None]).predict(test, features=t[:, None])
    got = weighted.predict(test, weights=t)
    assert all(np.array_equal(u, v) for u, v in zip(_ends(by_hand), _ends(got)))
    with pytest.raises(ValueError, match=r"weights= at prediction needs a weighted fit"):
        ConditionalConformal().fit(cal, y[:n]).predict(test, weights=t)
    with pytest.raises(ValueError, match=r"weighted by an array, so the test points need their weights too"):
        weighted.predict(test)
    with pytest.raises(ValueError, match=r"weights must be finite; got nan"):
        ConditionalConformal().fit(cal, y[:n], weights=np.r_[np.nan, w[1:]])


@pytest.mark.slow
def test_conditional_conformal_covers_under_its_tilt():
    """Gibbs et al. Thm 2 with f = w in the class: coverage >= 0.9 - 3 se when the test inputs follow w dP."""
    from calibprob import ConditionalConformal

    rng = np.random.default_rng(2023)
    cov = np.empty(600)
    for r in range(cov.size):
        xc, xt = rng.normal(size=100), rng.normal(1.0, 1.0, size=5)
        yc = xc + (0.5 + xc**2 / 2) * rng.normal(size=100)
        yt = xt + (0.5 + xt**2 / 2) * rng.normal(size=5)
        model = ConditionalConformal(randomize=True, random_state=r).fit(
            calibprob.normal(xc, np.ones(100)), yc, weights=np.exp(xc - 0.5)
        )
        with warnings.catch_warnings():  # a far test point may get an infinite interval (warned): it counts
            warnings.simplefilter("ignore", calibprob.CalibprobWarning)
            iv = model.predict_interval(calibprob.normal(xt, np.ones(5)), 0.9, weights=np.exp(xt - 0.5))
        cov[r] = np.mean((iv["lower"].values <= yt) & (yt <= iv["upper"].values))
    se = cov.std(ddof=1) / np.sqrt(cov.size)
    assert cov.mean() >= 0.9 - 3 * se, (cov.mean(), se)
