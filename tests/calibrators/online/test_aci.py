"""Adaptive conformal inference (Gibbs & Candès 2021): the recursion by hand, split conformal at
the start, and the long-run bound of Proposition 4.1 on adversarial sequences."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import calibprob
from calibprob.calibrators.online.aci import AdaptiveConformalInterval


def _gauss(mu, sigma):
    return calibprob.normal(np.atleast_1d(np.asarray(mu, float)), np.atleast_1d(np.asarray(sigma, float)))


def _hand_threshold(scores, alpha, infinite):
    """The ceil(c (n + 1))-th smallest score, by NumPy's inverted-cdf quantile (not calibprob's ranks)."""
    n = scores.size
    if alpha >= 1:
        return 0.0
    q = (1 - alpha) * (n + 1) / n
    if q > 1:
        return np.inf if infinite == "allow" else float(np.max(scores))
    return float(np.quantile(scores, q, method="inverted_cdf"))


@pytest.mark.parametrize(("window", "infinite"), [(None, "clip"), (40, "allow"), (40, "clip")])
def test_the_recursion_equals_a_hand_loop(window, infinite):
    rng = np.random.default_rng(3)
    y_cal = rng.normal(size=30)
    aci = AdaptiveConformalInterval(confidence_level=[0.8, 0.9], gamma=0.03, window=window, infinite=infinite)
    aci.fit(_gauss(np.zeros(30), np.ones(30)), y_cal)
    scores = list(np.abs(y_cal))
    alpha = 1.0 - np.array([0.8, 0.9])  # alpha_1 = 1 - c, as floats
    for t in range(300):
        mu, y = 0.1 * t / 300, (1.0 + 2.0 * (t > 150)) * rng.normal()  # a drift, then the noise triples
        ds = aci.predict_interval(_gauss(mu, 1.0))
        pool = np.array(scores[-window:] if window else scores)
        thr = np.array([_hand_threshold(pool, a, infinite) for a in alpha])
        np.testing.assert_array_equal(ds["upper"].values[0], mu + thr)
        np.testing.assert_array_equal(ds["lower"].values[0], mu - thr)
        np.testing.assert_array_equal(ds["alpha_t"].values, alpha)
        aci.update(_gauss(mu, 1.0), [y])
        alpha = alpha + 0.03 * ((1.0 - np.array([0.8, 0.9])) - (abs(y - mu) > thr))
        if window:
            scores.append(abs(y - mu))
    np.testing.assert_allclose(aci.alpha_, alpha, rtol=0, atol=1e-12)


def test_before_any_outcome_it_is_split_conformal():
    """At alpha_1 = 1 - c the interval is split conformal's, bit for bit (an independent implementation)."""
    rng = np.random.default_rng(8)
    cal = _gauss(rng.normal(size=60), rng.uniform(0.5, 2.0, size=60))
    y = rng.normal(size=60) * 1.3
    new = _gauss(rng.normal(size=7), rng.uniform(0.5, 2.0, size=7))
    for score in ("absolute", "normalized"):
        aci = AdaptiveConformalInterval(confidence_level=[0.8, 0.9], score=score).fit(cal, y)
        split = calibprob.SplitConformalCalibrator(confidence_level=[0.8, 0.9], score=score).fit(cal, y)
        a, s = aci.predict_interval(new), split.predict_interval(new)
        np.testing.assert_array_equal(a["lower"].values, s["lower"].values)
        np.testing.assert_array_equal(a["upper"].values, s["upper"].values)


def _stream(kind, T, rng):
    t = np.arange(T)
    if kind == "abrupt":
        return np.where(t < T // 3, 1.0, 4.0) * rng.normal(size=T)
    if kind == "drift":
        return rng.normal(size=T) + 3.0 * t / T
    return (1.0 + 0.8 * np.sin(2 * np.pi * t / 200)) * rng.normal(size=T)  # seasonal noise


@pytest.mark.parametrize("kind", ["abrupt", "drift", "seasonal"])
@pytest.mark.parametrize("infinite", ["allow", "clip"])
def test_long_run_coverage_is_within_the_bound_on_adversarial_sequences(kind, infinite):
    """Proposition 4.1 (and the exact identity it rests on) on streams split conformal fails."""
    rng = np.random.default_rng(21)
    T, gamma = 2000, 0.01
    y = _stream(kind, T, rng)
    aci = AdaptiveConformalInterval(confidence_level=0.9, gamma=gamma, window=100, infinite=infinite)
    aci.fit(_gauss(np.zeros(50), np.ones(50)), rng.normal(size=50))
    aci.update(_gauss(np.zeros(T), np.ones(T)), y)
    err = aci.misses_[0] / T
    # the identity: mean err - alpha = (alpha_1 - alpha_{T+1}) / (gamma T), whatever the sequence
    assert abs((err - 0.1) - (0.1 - aci.alpha_[0]) / (gamma * T)) < 1e-12
    bound = aci.coverage_error_bound()[0]
    assert abs(err - 0.1) <= bound
    if infinite == "allow" or aci.n_clipped_[0] == 0:
        assert bound == pytest.approx((0.9 + gamma) / (gamma * T))  # the paper's constant: 0.0455 here
    static = np.mean(np.abs(y) > np.sort(np.abs(rng.normal(size=50)))[45])  # split conformal, never adapted
    assert kind == "seasonal" or static > 0.1 + 0.05  # the shift breaks it; ACI holds


def test_bad_input_names_the_parameter_and_the_fix():
    pred = _gauss(np.zeros(20), np.ones(20))
    y = np.zeros(20)
    with pytest.raises(ValueError, match=r"gamma must be a step size in \(0, 1\); got 0"):
        AdaptiveConformalInterval(gamma=0).fit(pred, y)
    with pytest.raises(ValueError, match=r"gamma must be a step size in \(0, 1\); got 1.5"):
        AdaptiveConformalInterval(gamma=1.5).fit(pred, y)
    with pytest.raises(ValueError, match=r"infinite must be one of 'clip', 'allow'; got 'drop'"):
        AdaptiveConformalInterval(infinite="drop").fit(pred, y)
    with pytest.raises(ValueError, match=r"window must be >= 1; got 0"):
        AdaptiveConformalInterval(window=0).fit(pred, y)
    with pytest.raises(ValueError, match=r"score='signed' is signed.*Use score='absolute'"):
        AdaptiveConformalInterval(score="signed").fit(pred, y)
    with pytest.raises(ValueError, match=r"confidence_level"):
        AdaptiveConformalInterval(confidence_level=1.2).fit(pred, y)
    with pytest.raises(ValueError, match=r"y_cal"):
        AdaptiveConformalInterval().fit(pred, np.r_[np.nan, y[1:]])
    with pytest.raises(calibprob.NotFittedError, match=r"fit"):
        AdaptiveConformalInterval().predict_interval(pred)
    aci = AdaptiveConformalInterval().fit(pred, y)
    with pytest.raises(ValueError, match=r"\by\b"):
        aci.update(_gauss([0.0, 1.0], [1.0, 1.0]), [0.0])


def test_levels_are_independent_and_a_pymc_predictive_goes_straight_in():
    """Each level runs its own recursion (asking 0.9 too changes nothing at 0.8); draws with PyMC's obs_id
    and a y DataArray along obs_id are read as any predictive."""
    rng = np.random.default_rng(4)
    n, T = 40, 120
    draws = rng.normal(size=(2, 100, n)) + np.linspace(-1, 1, n)
    pred_cal = calibprob.from_draws(xr.DataArray(draws, dims=("chain", "draw", "obs_id")))
    y_cal = xr.DataArray(np.linspace(-1, 1, n) + 1.5 * rng.normal(size=n), dims="obs_id")
    one = AdaptiveConformalInterval(confidence_level=0.8, gamma=0.05).fit(pred_cal, y_cal)
    two = AdaptiveConformalInterval(confidence_level=[0.8, 0.9], gamma=0.05).fit(pred_cal, y_cal)
    for t in range(T):
        f, y_t = _gauss(0.0, 1.0), [(1.0 + (t > 60)) * rng.normal()]
        a, b = one.predict_interval(f), two.predict_interval(f)
        np.testing.assert_array_equal(a["upper"].sel(confidence_level=0.8), b["upper"].sel(confidence_level=0.8))
        one.update(f, y_t)
        two.update(f, y_t)
    assert one.alpha_[0] == two.alpha_[0] and one.misses_[0] == two.misses_[0]


@pytest.mark.parametrize("scale", [1e-200, 1e-8, 1.0, 1e8, 1e200])
def test_intervals_move_with_the_data_from_1e_minus_200_to_1e200(scale):
    """Scale and shift equivariance: y -> a y + b moves every interval the same way; the levels' path is unchanged."""
    rng = np.random.default_rng(9)
    mu, y = rng.normal(size=60), rng.normal(size=60) * 1.4
    runs = []
    for a, b in ((1.0, 0.0), (scale, 3.0 * scale)):
        aci = AdaptiveConformalInterval(confidence_level=[0.5, 0.9], gamma=0.05, window=30)
        aci.fit(_gauss(a * mu[:30] + b, a * np.ones(30)), a * y[:30] + b)
        aci.update(_gauss(a * mu[30:50] + b, a * np.ones(20)), a * y[30:50] + b)
        ds = aci.predict_interval(_gauss(a * mu[50:] + b, a * np.ones(10)))
        assert ds.sizes["obs"] == 10 and np.isfinite(ds["lower"].values).all()
        runs.append((ds, aci.alpha_.copy()))
    (ref, alpha_ref), (got, alpha_got) = runs
    np.testing.assert_array_equal(alpha_got, alpha_ref)
    for end in ("lower", "upper"):
        np.testing.assert_allclose((got[end].values - 3.0 * scale) / scale, ref[end].values, rtol=1e-9, atol=1e-9)
