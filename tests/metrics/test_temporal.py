"""Diagnostics over time (calibprob.metrics._temporal): brute force, binomial closed form, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

import calibprob
from calibprob.metrics import evaluate_intervals
from calibprob.metrics._temporal import TIME_VARIABLES, long_run_error, longest_run, rolling_mean
from calibprob.plots import binomial_band


def _stream(n=240, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n)
    y[n // 2 :] *= 2.5  # the noise jumps half-way: the base stops covering
    pred = calibprob.normal(np.zeros(n), np.ones(n)).assign_coords(time=("obs", np.arange(n) * 0.5))
    return pred, y


def test_rolling_mean_and_longest_run_equal_brute_force():
    rng = np.random.default_rng(1)
    x = rng.random((57, 3)) < 0.3
    w = 7
    roll = rolling_mean(x, w)
    for t in range(57):
        expect = np.full(3, np.nan) if t < w - 1 else x[t - w + 1 : t + 1].mean(axis=0)
        np.testing.assert_allclose(roll[t], expect)
    brute = []
    for j in range(3):
        best = run = 0
        for v in x[:, j]:
            run = run + 1 if v else 0
            best = max(best, run)
        brute.append(best)
    assert longest_run(x).tolist() == brute


def test_binomial_band_equals_the_enumerated_binomial():
    for c, w in ((0.9, 50), (0.5, 20), (0.99, 100)):
        pmf = np.array([math.comb(w, k) * c**k * (1 - c) ** (w - k) for k in range(w + 1)])
        cdf = np.cumsum(pmf)
        lo_k = min(k for k in range(w + 1) if cdf[k] >= 0.025 - 1e-12)
        hi_k = min(k for k in range(w + 1) if cdf[k] >= 0.975 - 1e-12)
        lo, hi = binomial_band([c], w)
        assert lo[0] == lo_k / w and hi[0] == hi_k / w
        assert pmf[lo_k : hi_k + 1].sum() >= 0.95
    m = calibprob.evaluate(*_stream(100), [0.9], time_window=50)
    assert float(m["rolling_coverage_band_lower"][0]) == binomial_band(0.9, 50)[0]


def test_evaluate_over_time_equals_the_intervals_by_hand():
    pred, y = _stream()
    m = calibprob.evaluate(pred, y, [0.8, 0.9], time_window=30)
    iv = pred.calib.interval([0.8, 0.9])
    lo, hi = (
        iv["lower"].transpose("obs", "confidence_level").values,
        iv["upper"].transpose("obs", "confidence_level").values,
    )
    covered = (lo <= y[:, None]) & (y[:, None] <= hi)
    np.testing.assert_allclose(m["rolling_coverage"].values, rolling_mean(covered, 30))
    np.testing.assert_allclose(m["long_run_coverage_error"].values[-1], 1 - covered.mean(0) - [0.2, 0.1], atol=1e-12)
    assert m["longest_miss_run"].values.tolist() == longest_run(~covered).tolist()
    np.testing.assert_allclose(m["width_quantiles"].sel(width_quantile=0.5).values, np.median(hi - lo, axis=0))
    assert m["time"].values.tolist() == pred["time"].values.tolist()
    assert m.attrs["time_window"] == 30 and m["rolling_crps"].attrs["time_window"] == 30
    # the jump shows: the last window covers far less than the first full one
    roll = m["rolling_coverage"].sel(confidence_level=0.9).values
    assert roll[29] > 0.8 > 0.6 > roll[-1]
    assert roll[-1] < float(m["rolling_coverage_band_lower"].sel(confidence_level=0.9))
    # rolling scores are the pointwise scores' window means
    ll = pred.calib.logpdf(y).values
    np.testing.assert_allclose(m["rolling_nll"].values[29:], -rolling_mean(ll, 30)[29:])
    assert np.isnan(m["long_run_coverage_error_bound"]).all() and np.isnan(m["n_clipped"]).all()


def test_a_prediction_without_time_is_scored_exactly_as_before():
    pred, y = _stream()
    plain = pred.drop_vars("time")
    m0 = calibprob.evaluate(plain, y)
    m1 = calibprob.evaluate(pred, y)
    assert not set(TIME_VARIABLES) & set(m0.data_vars) and "time" not in m0.dims
    stripped = m1.drop_vars([v for v in TIME_VARIABLES if v in m1]).drop_vars(["time", "width_quantile"])
    stripped.attrs.pop("time_window")
    assert stripped.identical(m0)


def test_reported_bound_and_clipped_intervals_are_read():
    pred, y = _stream(100)
    pred = pred.assign_attrs(coverage_error_bound=0.05)
    m = calibprob.evaluate(pred, y, [0.9], time_window=20)
    assert float(m["long_run_coverage_error_bound"][0]) == 0.05
    iv = pred.calib.interval([0.8, 0.9])
    iv["upper"][:10, 1] = np.inf
    iv["clipped"] = (("obs", "confidence_level"), np.zeros((100, 2), bool))
    iv["clipped"][:3, 0] = True
    iv = iv.assign(coverage_error_bound=("confidence_level", [0.1, 0.2]))
    mi = evaluate_intervals(iv, y, time_window=20)
    assert mi["n_infinite"].values.tolist() == [0, 10] and mi["n_clipped"].values.tolist() == [3.0, 0.0]
    assert mi["long_run_coverage_error_bound"].values.tolist() == [0.1, 0.2]
    assert np.isfinite(mi["width_quantiles"].sel(confidence_level=0.9, width_quantile=0.05))
    assert np.isinf(mi["width_quantiles"].sel(confidence_level=0.9, width_quantile=0.95))
    assert "rolling_crps" not in mi


def test_long_run_error_by_hand():
    np.testing.assert_allclose(long_run_error([[True], [False], [True], [False]], [0.5])[:, 0], [0.5, 0.0, 1 / 6, 0.0])


@pytest.mark.parametrize(
    ("times", "match"),
    [([0.0, 2.0, 1.0, 3.0], "rows 1 and 2 are out of order"), ([0.0, 1.0, 1.0, 3.0], "rows 1 and 2 are duplicated")],
)
def test_unordered_or_duplicated_times_are_refused(times, match):
    pred = calibprob.normal(np.zeros(4), np.ones(4)).assign_coords(time=("obs", times))
    with pytest.raises(ValueError, match=match):
        calibprob.evaluate(pred, np.zeros(4))
    with pytest.raises(ValueError, match=match):
        evaluate_intervals(pred.calib.interval([0.9]), np.zeros(4))


def test_bad_time_window_is_refused():
    pred, y = _stream(40)
    with pytest.raises(ValueError, match=r"time_window=41 is larger than the history.*Pass time_window <= 40"):
        calibprob.evaluate(pred, y, time_window=41)
    with pytest.raises(ValueError, match=r"time_window=10 was given but the prediction has no 'time' coordinate"):
        calibprob.evaluate(pred.drop_vars("time"), y, time_window=10)
    with pytest.raises(ValueError, match=r"time_window must be >= 1; got 0"):
        calibprob.evaluate(pred, y, time_window=0)
