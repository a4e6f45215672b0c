"""Monitored: an alarm resets or refits an online calibrator through its public fit/update."""

from __future__ import annotations

import numpy as np
import pytest

import calibprob
from calibprob.calibrators.online import AdaptiveConformalInterval, OnlineQuantileRecalibrator
from calibprob.monitoring import Monitored, exchangeability_alarms


def _f(n, start=0):
    return calibprob.normal(np.zeros(n), np.ones(n)).assign_coords(time=("obs", np.arange(start, start + n)))


def _coverage_after(cal, y_cal, y, change):
    """Coverage of the 90 % interval on the rows after the change, issued before each outcome."""
    _ = cal.fit(_f(y_cal.size, -y_cal.size), y_cal)
    hits = []
    for t, v in enumerate(y):
        row = _f(1, t)
        iv = (
            cal.predict_interval(row, 0.9) if hasattr(cal, "predict_interval") else cal.predict(row).calib.interval(0.9)
        )
        hits.append(float(iv["lower"].values.ravel()[0]) <= v <= float(iv["upper"].values.ravel()[0]))
        cal.update(row, [v])
    return np.mean(hits[change:])


@pytest.mark.slow
def test_refit_on_alarm_restores_coverage_after_a_change():
    rng = np.random.default_rng(0)
    y_cal, y = rng.normal(size=50), np.r_[rng.normal(size=60), 4.0 * rng.normal(size=120)]
    # fixed calibration scores: plain ACI walks its level at rate gamma, far too slowly for this jump
    plain = _coverage_after(AdaptiveConformalInterval(gamma=0.005), y_cal, y, 60)
    mon = Monitored(AdaptiveConformalInterval(gamma=0.005), on_alarm="refit", refit_window=20)
    watched = _coverage_after(mon, y_cal, y, 60)
    assert [a for _, a in mon.actions_][0] == "refit" and 60 <= mon.actions_[0][0] < 90
    assert plain < 0.6 and watched > plain + 0.15, (plain, watched)
    path = mon.path_
    assert path.sizes["time"] == 180 and path["alarm"].values.sum() == len(mon.actions_)
    # the monitor's path equals exchangeability_alarms on the same stream up to the first alarm
    ref = exchangeability_alarms(_f(180), y, history=np.abs(2 * _f(50, -50).calib.pit(y_cal).values - 1), delta=0.01)
    k = int(np.flatnonzero(path["alarm"].values)[0])
    np.testing.assert_allclose(path["martingale"].values[: k + 1], ref["martingale"].values[: k + 1])


def test_reset_returns_the_recalibrator_to_its_fitted_state():
    rng = np.random.default_rng(1)
    y_cal = rng.normal(size=60)
    y = np.r_[rng.normal(size=100), 4.0 + rng.normal(size=200)]
    mon = Monitored(OnlineQuantileRecalibrator(levels=[0.05, 0.5, 0.95], eta=0.5), on_alarm="reset")
    mon.fit(_f(60, -60), y_cal)
    mon.update(_f(300), y)
    assert mon.actions_ and mon.actions_[0][1] == "reset" and mon.actions_[0][0] >= 100
    # after the last reset the state is a fresh fit on the calibration stream plus the rows since
    last = int(mon.actions_[-1][0])
    again = OnlineQuantileRecalibrator(levels=[0.05, 0.5, 0.95], eta=0.5).fit(_f(60, -60), y_cal)
    again.update(_f(300).isel(obs=slice(last + 1, None)), y[last + 1 :])
    np.testing.assert_array_equal(again.recalibration_, mon.recalibration_)
    assert again.n_updates_ == mon.n_updates_ < 60 + 300


def test_none_records_only():
    rng = np.random.default_rng(2)
    aci = AdaptiveConformalInterval(gamma=0.01)
    mon = Monitored(aci, on_alarm="none").fit(_f(50, -50), rng.normal(size=50))
    mon.update(_f(200), 5.0 * rng.normal(size=200))
    assert mon.actions_ and all(a == "none" for _, a in mon.actions_) and aci.n_updates_ == 200


def test_bad_monitored_input_is_refused():
    with pytest.raises(TypeError, match=r"calibrator must be an online calibrator with fit\(pred, y\) and update"):
        Monitored(object())
    with pytest.raises(ValueError, match=r"on_alarm must be one of 'reset', 'refit', 'none'; got 'retrain'"):
        Monitored(AdaptiveConformalInterval(), on_alarm="retrain")
    with pytest.raises(ValueError, match=r"refit_window=10 is smaller than the calibrator's window=50"):
        Monitored(AdaptiveConformalInterval(window=50), on_alarm="refit", refit_window=10)
    with pytest.raises(ValueError, match=r"delta must be in \(0, 1\)"):
        Monitored(AdaptiveConformalInterval(), delta=2.0)
    with pytest.raises(ValueError, match=r"not fitted yet; call fit\(pred_cal, y_cal\) first"):
        Monitored(AdaptiveConformalInterval()).update(_f(2), [0.0, 1.0])
    mon = Monitored(AdaptiveConformalInterval()).fit(_f(20, -20), np.zeros(20))
    mon.update(_f(3), np.zeros(3))
    with pytest.raises(ValueError, match=r"not after the last time already seen"):
        mon.update(_f(3), np.zeros(3))


# ---------------------------------------------------------------------------
# Monitored's own contract (it is not registered, so check_calibrator does not run on it: see its Notes)
# ---------------------------------------------------------------------------


def _labelled(n, seed):
    """A heteroscedastic Gaussian forecast with non-default, unsorted obs labels."""
    rng = np.random.default_rng(seed)
    pred = calibprob.normal(rng.normal(size=n), 0.5 + rng.uniform(size=n))
    return pred.assign_coords(obs=rng.permutation(np.arange(100, 100 + n)))


@pytest.mark.parametrize("make", [OnlineQuantileRecalibrator, lambda: AdaptiveConformalInterval(gamma=0.05)])
def test_predict_keeps_row_order_and_obs_labels_and_is_the_calibrators(make):
    rng = np.random.default_rng(3)
    cal, stream, test = _labelled(40, 0), _labelled(30, 1), _labelled(12, 2)
    y_cal, y_stream = rng.normal(size=40), rng.normal(size=30)
    mon = Monitored(make(), on_alarm="none").fit(cal, y_cal)
    mon.update(stream, y_stream)
    alone = make().fit(cal, y_cal)  # the same calibrator, unwatched: on_alarm="none" must not change it
    alone.update(stream, y_stream)
    out, want = mon.predict(test), alone.predict(test)
    assert out.sizes["obs"] == test.sizes["obs"]
    np.testing.assert_array_equal(out["obs"].values, test["obs"].values)
    for name in want.data_vars:
        np.testing.assert_array_equal(out[name].values, want[name].values)
    perm = np.random.default_rng(4).permutation(test.sizes["obs"])
    shuffled = mon.predict(test.isel(obs=perm))  # permuting the rows permutes the answer, nothing else
    np.testing.assert_array_equal(shuffled["obs"].values, test["obs"].values[perm])
    for name in want.data_vars:
        np.testing.assert_array_equal(shuffled[name].values, out.isel(obs=perm)[name].values)


def test_monitored_predict_and_fit_refuse_bad_input_naming_it():
    pred, y = _labelled(20, 0), np.zeros(20)
    with pytest.raises(ValueError, match=r"not fitted yet; call fit\(pred_cal, y_cal\) first"):
        Monitored(OnlineQuantileRecalibrator()).predict(pred)
    with pytest.raises(TypeError, match=r"pred_cal must be the base model's predictive distribution"):
        Monitored(OnlineQuantileRecalibrator()).fit(np.zeros(20), y)
    with pytest.raises(ValueError, match=r"mismatched lengths: y_cal has 19 entries, the prediction has 20"):
        Monitored(OnlineQuantileRecalibrator()).fit(pred, np.zeros(19))
    mon = Monitored(OnlineQuantileRecalibrator()).fit(pred, y)
    with pytest.raises(TypeError, match=r"pred must be the base model's predictive distribution"):
        mon.predict(np.zeros(3))
    with pytest.raises(ValueError, match=r"mismatched lengths: y has 3 entries, the prediction has 20"):
        mon.update(pred, np.zeros(3))
