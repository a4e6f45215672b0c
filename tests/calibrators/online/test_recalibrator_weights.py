"""Importance-weighted OSD in OnlineQuantileRecalibrator (issue 39, item 3).

Checked against: the unweighted recalibrator (weights 1: bit for bit), a hand-written weighted
OSD loop, the proven weighted bound on an adversarial stream, integer weights as repeated outcomes
(independent coupling), and the shift it is for: under a covariate shift of the stream, the
weighted recalibration calibrates the target law's coverage (seeded).
"""

from __future__ import annotations

import numpy as np
import pytest

import calibprob
from calibprob.calibrators.online import OnlineQuantileRecalibrator
from calibprob.calibrators.online._osd import coverage_bound, weighted_coverage_bound
from calibprob.weights import GivenWeights

LEVELS = [0.1, 0.5, 0.9]


def _stream(seed, n=300):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    y = x + (0.5 + np.abs(x)) * rng.normal(size=n)
    return x, y, calibprob.normal(x, np.ones(n), levels=LEVELS)


def test_unit_weights_are_the_unweighted_stream_bit_for_bit():
    x, y, f = _stream(0)
    a = OnlineQuantileRecalibrator(levels=LEVELS, eta=0.3).update(f, y)
    b = OnlineQuantileRecalibrator(levels=LEVELS, eta=0.3).update(f, y, weights=np.ones(y.size))
    np.testing.assert_array_equal(a.theta_, b.theta_)
    np.testing.assert_array_equal(a.hits_, b.hits_)
    np.testing.assert_array_equal(b.weighted_coverage(), b.coverage())
    assert a.weight_sum_ is None and b.weight_sum_ == y.size


@pytest.mark.parametrize("coupling", ["isotonic", "independent"])
def test_weighted_steps_equal_a_hand_written_loop(coupling):
    from calibprob.calibrators.online._osd import publish

    x, y, f = _stream(1, 120)
    v = np.exp(0.7 * x) / np.mean(np.exp(0.7 * x))
    rec = OnlineQuantileRecalibrator(levels=LEVELS, eta=0.2, coupling=coupling).update(f, y, weights=v)
    u = f.calib.pit(y).values
    p = np.array(LEVELS)
    theta, wh = p.copy(), np.zeros(3)
    for t in range(y.size):
        issued = publish(theta, coupling)
        o = u[t] <= (issued if coupling == "isotonic" else theta)
        wh += v[t] * o
        theta = theta + 0.2 * v[t] * (p - o)
    np.testing.assert_allclose(rec.theta_, theta, rtol=0, atol=1e-12)
    np.testing.assert_allclose(rec.weighted_coverage(), wh / v.sum(), rtol=1e-12)


def test_the_weighted_bound_holds_on_an_adversarial_stream():
    """Outcomes that always land just outside the issued quantile, weights in [0, 3]: the bound holds."""
    rng = np.random.default_rng(2)
    for coupling in ("isotonic", "independent"):
        rec = OnlineQuantileRecalibrator(levels=LEVELS, eta=0.4, coupling=coupling)
        for t in range(400):
            r = rec.recalibration_map()
            u = float(np.clip(r[t % 3] + (0.01 if t % 2 else -0.01), 0.0, 1.0))
            rec.update_pit([u], weights=[3.0 * rng.random()])
        err = np.abs(rec.weighted_coverage() - LEVELS)
        assert np.all(err <= rec.weighted_coverage_bound() + 1e-12), (err, rec.weighted_coverage_bound())
    # the bound with unit weights is the unweighted one
    np.testing.assert_allclose(weighted_coverage_bound(LEVELS, 0.4, 50.0, 1.0), coverage_bound(LEVELS, 0.4, 50))


def test_integer_weights_with_independent_coupling_are_a_step_multiple():
    """Weight k at a level whose iterate stays on one side is k repeated unweighted outcomes (independent)."""
    rec_w = OnlineQuantileRecalibrator(levels=[0.5], eta=0.1, coupling="independent")
    rec_r = OnlineQuantileRecalibrator(levels=[0.5], eta=0.1, coupling="independent")
    # PITs far from the iterate (0 or 1): o_t is the same for the k copies, so k steps of eta = one of k eta
    pits, w = [0.0, 1.0, 1.0, 0.0, 1.0], [2.0, 1.0, 3.0, 1.0, 2.0]
    rec_w.update_pit(pits, weights=w)
    rec_r.update_pit(np.repeat(pits, np.asarray(w, int)))
    np.testing.assert_allclose(rec_w.theta_, rec_r.theta_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(rec_w.weighted_coverage(), rec_r.coverage(), rtol=1e-12)


def test_weights_refused_off_osd_and_when_bad_and_the_state_saves():
    x, y, f = _stream(3, 60)
    with pytest.raises(ValueError, match=r"weights= is importance-weighted OSD \(rule='osd'\)"):
        OnlineQuantileRecalibrator(levels=[0.1, 0.9], rule="aci").fit(f, y).update(f, y, weights=np.ones(60))
    rec = OnlineQuantileRecalibrator(levels=LEVELS)
    with pytest.raises(ValueError, match=r"weights must be non-negative; got -1.0 at index 0"):
        rec.update(f, y, weights=np.r_[-1.0, np.ones(59)])
    with pytest.raises(ValueError, match=r"weights must be finite"):
        rec.update(f, y, weights=np.r_[np.nan, np.ones(59)])
    with pytest.raises(ValueError, match=r"weighted_coverage\(\) needs weighted updates"):
        rec.weighted_coverage()
    rec.update(f, y[:], weights=GivenWeights(np.exp(0.3 * x)))
    rec.update(f, y)  # unweighted outcomes count v = 1 once the stream is weighted
    assert rec.weight_sum_ == pytest.approx(np.exp(0.3 * x).sum() + 60)
    back = OnlineQuantileRecalibrator.from_dataset(rec.to_dataset())
    np.testing.assert_array_equal(back.weighted_hits_, rec.weighted_hits_)
    assert (back.weight_sum_, back.weight_max_) == (rec.weight_sum_, rec.weight_max_)
    plain = OnlineQuantileRecalibrator(levels=LEVELS).update(f, y)
    assert "weighted_hits" not in plain.to_dataset()  # an unweighted stream writes what it always wrote


def test_weighted_recalibration_calibrates_the_shifted_law():
    """Stream x ~ N(0, 1), target x ~ N(1, 1) (ratio exp(x - 1/2)); noise sd 0.5 + |x| under a N(x, 1) forecast.

    At every step the issued 0.9 quantile is scored on a fresh draw from the *target* law: over the
    stream the weighted recalibrator's maps cover that law at about 0.9 (the weighted frequency it
    tracks estimates it); the unweighted one, calibrated on the stream's law, covers less.
    """
    from scipy.special import ndtr

    rng = np.random.default_rng(4)
    n = 4000
    x, xt = rng.normal(size=n), rng.normal(1.0, 1.0, size=n)
    u = ndtr((0.5 + np.abs(x)) * rng.normal(size=n))  # the stream's PITs under N(x, 1)
    ut = ndtr((0.5 + np.abs(xt)) * rng.normal(size=n))  # the target's
    v = np.exp(x - 0.5)
    hit = {}
    for name, w in (("weighted", v), ("plain", None)):
        rec = OnlineQuantileRecalibrator(levels=[0.5, 0.9], eta=0.02)
        out = np.empty(n, bool)
        for t in range(n):
            out[t] = ut[t] <= rec.recalibration_map()[1]
            rec.update_pit(u[t : t + 1], weights=None if w is None else w[t : t + 1])
        hit[name] = out[n // 4 :].mean()  # after a burn-in from the identity map
    assert abs(hit["weighted"] - 0.9) < 0.02 and hit["plain"] < 0.9 - 0.02, hit
