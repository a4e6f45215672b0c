"""The one-level online interval classes after their ``predict`` / ``predict_interval`` glue was written once
(``calibrators/online/_interval.py``, issue 40): every output equals the one stored before the refactor."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import calibprob
from calibprob._core.estimator import NotFittedError
from calibprob.calibrators.online import AdaptiveConformalInterval, AgACIInterval, ConformalPIDInterval
from tests.support.online_outputs import online_interval_outputs

REFERENCE = Path(__file__).parents[2] / "data" / "online_interval_reference.npz"


@pytest.fixture(scope="module")
def outputs() -> dict[str, np.ndarray]:
    return online_interval_outputs()


def test_outputs_equal_the_pre_refactor_ones_bit_for_bit(outputs):
    # stored from commit bfe024b by tests/data/make_online_interval_reference.py
    with np.load(REFERENCE) as ref:
        assert sorted(ref.files) == sorted(outputs)
        for key in ref.files:
            np.testing.assert_array_equal(outputs[key], ref[key], err_msg=key, strict=True)


CLASSES = [
    lambda **kw: AdaptiveConformalInterval(gamma=0.05, **kw),
    lambda **kw: ConformalPIDInterval(burnin=10, **kw),
    lambda **kw: AgACIInterval(gammas=[0.01, 0.05], **kw),
]
IDS = ["aci", "pid", "agaci"]


def _data(n=30, seed=0):
    rng = np.random.default_rng(seed)
    return calibprob.normal(np.zeros(n), np.ones(n)), rng.normal(size=n)


@pytest.mark.parametrize("make", CLASSES, ids=IDS)
def test_the_shared_glue_refuses_bad_input_naming_the_fix(make):
    pred, y = _data()
    with pytest.raises(NotFittedError, match=r"not fitted yet. Call fit"):
        make().predict_interval(pred)
    with pytest.raises(NotFittedError, match=r"not fitted yet. Call fit"):
        make().predict(pred)
    with pytest.raises(NotFittedError, match=r"not fitted yet. Call fit"):
        make().update(pred, y)
    with pytest.raises(ValueError, match=r"score='signed' is signed; .* one symmetric threshold per level"):
        make(score="signed").fit(pred, y)
    est = make(confidence_level=[0.8, 0.9]).fit(pred, y)
    name = type(est).__name__
    with pytest.raises(
        ValueError, match=rf"confidence_level=\[0.5\] was not fitted: .* this {name} tracks \[0.8, 0.9\]"
    ):
        est.predict_interval(pred, [0.5, 0.9])
    with pytest.raises(ValueError, match=rf"groups= was given to predict, but this {name} was fitted without groups"):
        est.predict_interval(pred, groups=np.zeros(30, int))
    with pytest.raises(ValueError, match=r"mismatched lengths: y has 3 entries"):
        est.update(pred, y[:3])


@pytest.mark.parametrize("make", [CLASSES[0], CLASSES[2]], ids=["aci", "agaci"])
def test_calibrate_after_a_grouped_fit_is_refused_and_rescoring_keeps_the_levels(make):
    pred, y = _data(40)
    grouped = make().fit(pred, y, groups=np.r_[[0] * 20, [1] * 20])
    with pytest.raises(
        ValueError, match=r"calibrate replaces one stream's scores, but this \w+ was fitted with groups"
    ):
        grouped.calibrate(pred, y)
    est = make().fit(pred, y)
    est.update(pred.isel(obs=slice(0, 10)), 3.0 * y[:10])
    state = est.predict_interval(pred.isel(obs=slice(0, 1)))
    est.calibrate(pred, y)  # the same scores again: the same interval, the levels kept
    again = est.predict_interval(pred.isel(obs=slice(0, 1)))
    np.testing.assert_array_equal(again["upper"].values, state["upper"].values)


@pytest.mark.parametrize("make", CLASSES, ids=IDS)
def test_miss_rate_is_the_misses_over_the_outcomes(make):
    pred, y = _data(40)
    est = make().fit(pred, y)
    assert np.isnan(est.miss_rate()).all()  # no outcome yet
    est.update(pred.isel(obs=slice(0, 25)), 2.0 * y[:25])  # the noise doubles: some misses
    assert est.n_updates_ == 25 and 0 < est.misses_[0] < 25
    np.testing.assert_array_equal(est.miss_rate(), est.misses_ / 25)
