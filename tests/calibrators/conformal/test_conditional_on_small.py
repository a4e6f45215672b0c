"""Conditional conformal's weights follow the ESS rule of every weighted calibrator (issue 39, item 5).

A level the weights cannot support is refused naming the attainable level (``on_small="raise"``, the
default, also for plain arrays), or warned about with ``on_small="warn"``, then the LP's own (infinite)
threshold is returned; the diagnostics are those of ``calibprob.weights.diagnose``, computed here by hand.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import calibprob
from calibprob import ConditionalConformal
from calibprob.weights import GivenWeights, LikelihoodRatio


def _data(seed=11, shift=8.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(400, 1))
    X[200:] += shift
    y = X[:, 0] + rng.normal(size=400)
    pred = calibprob.normal(X[:, 0], np.ones(400))
    return X, y, pred.isel(obs=slice(0, 200)), pred.isel(obs=slice(200, None))


def test_a_separating_ratio_is_refused_or_warned_by_choice():
    X, y, cal, test = _data()
    model = ConditionalConformal().fit(cal, y[:200], weights=LikelihoodRatio().fit(X[:200], X[200:]))
    with pytest.raises(ValueError, match=r"effective sample size is 1\.\d+ at the worst test point.*attainable level"):
        model.predict(test, confidence_level=0.9)
    warned = ConditionalConformal().fit(cal, y[:200], weights=LikelihoodRatio(on_small="warn").fit(X[:200], X[200:]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        iv = warned.predict(test, confidence_level=0.9)
    text = " ".join(str(c.message) for c in caught if issubclass(c.category, calibprob.CalibprobWarning))
    assert "attainable level" in text and "a test weight too large for the calibration weights" in text
    assert np.isinf(iv["upper"].values).any()


def test_plain_arrays_refuse_and_given_weights_carry_the_choice():
    X, y, cal, test = _data(12, shift=0.0)
    w, t = np.ones(200), np.r_[60.0, np.ones(199)]  # one test point outweighs 60 calibration points
    # the worst test point's ESS, (W + t)^2 / (sum w^2 + t^2), by hand: 260^2 / (200 + 3600) = 17.8
    ess = 260.0**2 / (200.0 + 3600.0)
    model = ConditionalConformal().fit(cal, y[:200], weights=np.exp(0.01 * X[:200, 0]))
    with pytest.raises(ValueError, match=r"too small for confidence level 0.95: the attainable level is 0\.9\d+"):
        ConditionalConformal().fit(cal, y[:200], weights=w).predict(test, confidence_level=0.95, weights=t)
    ok = ConditionalConformal().fit(cal, y[:200], weights=w).predict(test, confidence_level=0.9, weights=t)
    assert ok.attrs["weights_attainable_level"] == pytest.approx(1 - 1 / ess, rel=1e-12)
    assert ok.attrs["weights_ess"] == pytest.approx(200.0)
    quiet = ConditionalConformal().fit(cal, y[:200], weights=GivenWeights(w, on_small="ignore"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", calibprob.CalibprobWarning)
        quiet.predict(test, confidence_level=0.95, weights=t)  # "ignore": neither refused nor warned
    assert not hasattr(model, "weight_diagnostics_")  # set at prediction
    model.predict(test, confidence_level=0.9, weights=np.exp(0.01 * X[200:, 0]))
    assert model.weight_diagnostics_.n_calibration == 200
