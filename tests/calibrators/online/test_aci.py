"""Adaptive conformal inference (Gibbs & Candès 2021): the recursion by hand, split conformal at
the start, and the long-run bound of Proposition 4.1 on adversarial sequences."""

from __future__ import annotations

import numpy as np
import pytest

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
