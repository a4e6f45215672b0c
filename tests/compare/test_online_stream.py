"""``stream_predictions``: ACI's one-pass ``predict_and_update`` issues what the row loop issues, bit for bit."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import xarray as xr

import calibprob
from calibprob.calibrators.online import AdaptiveConformalInterval
from calibprob.compare.online import stream_predictions


def _row_loop(calibrator, pred, y):
    """The protocol by hand: each row's interval issued at the current level, then its outcome taken."""
    rows = []
    for i in range(y.size):
        row = pred.isel(obs=[i])
        rows.append(calibrator.predict(row))
        calibrator.update(row, y[i : i + 1])
    return xr.concat(rows, dim="obs", data_vars="all", combine_attrs="override")


@pytest.mark.parametrize(
    "options",
    [
        {"gamma": 0.05},
        {"gamma": 0.05, "window": 40},
        {"gamma": 0.2, "infinite": "allow"},  # large steps: levels leave (0, 1), infinite sets issued
        {"gamma": 0.05, "score": "normalized"},
    ],
)
def test_aci_streams_in_one_pass_with_the_row_loop_s_intervals_and_state(options):
    rng = np.random.default_rng(38)
    cal = calibprob.normal(rng.normal(size=60), np.full(60, 1.0))
    aci = AdaptiveConformalInterval(confidence_level=[0.8, 0.9], **options).fit(cal, rng.normal(size=60))
    by_hand = copy.deepcopy(aci)
    n = 150  # the noise triples half way: misses, then the levels move
    pred = calibprob.normal(rng.normal(size=n), np.linspace(0.5, 2.0, n))
    y = pred["mean"].values + np.where(np.arange(n) < 75, 1.0, 3.0) * rng.normal(size=n)
    got, want = stream_predictions(aci, pred, y), _row_loop(by_hand, pred, y)
    xr.testing.assert_identical(got, want)
    assert np.isinf(got["upper"].values).any() == (options.get("infinite") == "allow")
    for attr in ("alpha_", "misses_", "n_clipped_", "n_updates_"):
        np.testing.assert_array_equal(getattr(aci, attr), getattr(by_hand, attr))
    np.testing.assert_array_equal(aci.scores_, by_hand.scores_)


def test_the_one_pass_is_taken_for_aci_and_the_row_loop_for_the_others(monkeypatch):
    rng = np.random.default_rng(1)
    cal, pred = calibprob.normal(np.zeros(40), np.ones(40)), calibprob.normal(np.zeros(10), np.ones(10))
    aci = AdaptiveConformalInterval(confidence_level=0.9, gamma=0.05).fit(cal, rng.normal(size=40))

    def row_by_row(*args, **kwargs):
        raise AssertionError("the row loop ran")

    monkeypatch.setattr(AdaptiveConformalInterval, "predict", row_by_row)
    assert stream_predictions(aci, pred, rng.normal(size=10)).sizes["obs"] == 10 and aci.n_updates_ == 10
    pid = calibprob.ConformalPIDInterval(confidence_level=0.9, burnin=20).fit(cal, rng.normal(size=40))
    assert not hasattr(pid, "predict_and_update")
    assert stream_predictions(pid, pred, rng.normal(size=10)).sizes["obs"] == 10
