"""Weights in the non-conformal post-processors' fitting loss (issue 39, item 2): isotonic (RK), Marx (RM), Vovk (RV).

Independent check: integer weights of mean 1 are the unweighted fit on the data with each point
repeated as often as its weight (the importance-weighted empirical distribution is the empirical
distribution of the repeated data), at every level the repeated data's ranks state. Equal weights
give the unweighted fit bit for bit (``calibprob.testing.check_weights`` in tests/test_common.py);
the weighted fit says it has no finite-sample guarantee; bad weights are refused.
"""

from __future__ import annotations

import numpy as np
import pytest

import calibprob
from calibprob.calibrators.recalibration import NO_GUARANTEE


def _data(seed=0, n=60):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    y = x + (0.5 + x**2 / 2) * rng.normal(size=n)
    return x, y


LOSS_WEIGHTED = [
    calibprob.IsotonicRecalibrator,
    calibprob.MarxRecalibrator,
    lambda **kw: calibprob.VovkRecalibrator(random_state=5, **kw),
]


@pytest.mark.parametrize("cls", LOSS_WEIGHTED, ids=["isotonic", "marx", "vovk"])
def test_integer_weights_are_repeated_points(cls):
    x, y = _data(1)
    w = np.tile([0.0, 1.0, 2.0], 20)  # mean exactly 1
    np.random.default_rng(2).shuffle(w)
    weighted = cls(extrapolate=True).fit(calibprob.normal(x, np.ones(60)), y, weights=w)
    rep = np.repeat(np.arange(60), w.astype(int))
    repeated = cls(extrapolate=True).fit(calibprob.normal(x[rep], np.ones(rep.size)), y[rep])
    # the weighted knots C_j / (W + 1) are the repeated data's j/(N+1) at the last copy of each point
    # (Vovk's ranks: the least j with C_j >= p (W + 1) - tau, the repeated data's ceil(p (N+1) - tau), any p)
    knots = getattr(weighted, "residual_levels_", None)
    knots = getattr(weighted, "knot_levels_", None) if knots is None else knots
    levels = np.linspace(0.06, 0.94, 23) if knots is None else np.unique(np.round(knots, 12))
    levels = levels[(levels > 0.05) & (levels < 0.95)][::4]
    test = calibprob.normal(np.array([0.0, 1.0]), np.ones(2), levels=levels)
    np.testing.assert_allclose(
        weighted.predict(test).calib.quantiles, repeated.predict(test).calib.quantiles, rtol=1e-9, atol=1e-9
    )
    assert weighted.weights_guarantee_ == NO_GUARANTEE and repeated.weights_guarantee_ is None


@pytest.mark.parametrize("cls", LOSS_WEIGHTED, ids=["isotonic", "marx", "vovk"])
def test_bad_weights_are_refused_and_prediction_takes_none(cls):
    x, y = _data(3)
    pred = calibprob.normal(x, np.ones(60))
    with pytest.raises(ValueError, match=r"weights must be finite; got nan at index 0"):
        cls().fit(pred, y, weights=np.r_[np.nan, np.ones(59)])
    with pytest.raises(ValueError, match=r"weights are all zero \(60 points\)"):
        cls().fit(pred, y, weights=np.zeros(60))
    grouped = cls().fit(pred, y, weights=np.exp(x), groups=(x > 0).astype(int))
    with pytest.raises(ValueError, match=r"uses weights in its fitting loss only: pass weights= to fit"):
        grouped.mondrian_.predict(pred, groups=(x > 0).astype(int), weights=np.ones(60))


@pytest.mark.parametrize("family", ["normal", "quantile"])
def test_variance_scaling_integer_weights_are_repeated_points(family):
    """The weighted log-likelihood's maximiser is the repeated data's MLE (closed form for a Gaussian base)."""
    x, y = _data(4)
    w = np.tile([0.0, 1.0, 2.0], 20)
    np.random.default_rng(5).shuffle(w)
    rep = np.repeat(np.arange(60), w.astype(int))

    def base(idx):
        pred = calibprob.normal(x[idx], np.full(idx.size, 0.8))
        if family == "quantile":  # a quantile-family base: the scale is searched on the exact likelihood
            pred = calibprob.from_quantiles(pred.calib.quantiles, pred["level"].values)
        return pred

    weighted = calibprob.VarianceScalingRecalibrator().fit(base(np.arange(60)), y, weights=w)
    repeated = calibprob.VarianceScalingRecalibrator().fit(base(rep), y[rep])
    np.testing.assert_allclose(weighted.scale_factor_, repeated.scale_factor_, rtol=1e-9)
    if family == "normal":  # s^2 = sum v z^2 / sum v
        z = (y - x) / 0.8
        assert weighted.scale_factor_ == pytest.approx(np.sqrt(np.sum(w * z * z) / np.sum(w)), rel=1e-12)
    unweighted = calibprob.VarianceScalingRecalibrator().fit(base(np.arange(60)), y)
    assert abs(weighted.scale_factor_ - unweighted.scale_factor_) > 1e-3  # the weights matter here
    assert weighted.weights_guarantee_ == NO_GUARANTEE and unweighted.weights_guarantee_ is None


def test_variance_scaling_refuses_bad_weights():
    x, y = _data(6)
    pred = calibprob.normal(x, np.ones(60))
    with pytest.raises(ValueError, match=r"weights must be non-negative; got -1.0 at index 0"):
        calibprob.VarianceScalingRecalibrator().fit(pred, y, weights=np.r_[-1.0, np.ones(59)])
    with pytest.raises(ValueError, match=r"weights are all zero \(60 points\)"):
        calibprob.VarianceScalingRecalibrator().fit(pred, y, weights=np.zeros(60))
