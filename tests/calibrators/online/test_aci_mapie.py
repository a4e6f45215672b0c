"""ACI equals MAPIE 1.6's ``TimeSeriesRegressor(method="aci").adapt_conformal_inference`` where the algorithms are the same.

The reference intervals were written by ``tests/data/make_mapie_aci_reference.py`` (MAPIE in the peers'
environment; nothing here imports it), on the *same* base predictions ``mu`` (a prefit estimator that returns
them), the symmetric absolute score, gamma = 0.005, 90 %. Where alpha_t stays in [1/(n+1), 1) the two
recursions are Gibbs & Candès's and the intervals are equal bit for bit; below 1/(n+1) the paper issues the
whole line, calibprob issues it (``infinite="allow"``) or the widest finite interval (the default), and
MAPIE 1.6 raises (its symmetric branch does not pass ``allow_infinite_bounds`` on; the script's docstring
names the line).
"""

from __future__ import annotations

import numpy as np
import pytest

import calibprob
from tests.support.paths import TEST_DATA


@pytest.fixture(scope="module")
def ref():
    return np.load(TEST_DATA / "mapie_aci_reference.npz")


def _aci(ref, kind: str, **kw):
    n, mu, y = int(ref["n_cal"]), ref[f"{kind}_mu"], ref[f"{kind}_y"]
    aci = calibprob.AdaptiveConformalInterval(confidence_level=float(ref["level"]), gamma=float(ref["gamma"]), **kw)
    aci.fit(calibprob.normal(mu[:n], np.ones(n)), y[:n])
    return aci, calibprob.normal(mu[n:], np.ones(mu.size - n)), y[n:]


def test_sliding_window_intervals_equal_mapies(ref):
    """The scores slide by one per outcome (MAPIE's ``update``; calibprob's ``window=n``): all 1000 intervals
    and levels equal; the row-by-row loop and ``predict_and_update`` give the same intervals and end state."""
    assert int(ref["window_failed_at"]) == -1
    aci, pred, y = _aci(ref, "window", window=int(ref["n_cal"]), infinite="allow")
    iv = aci.predict_and_update(pred, y)
    np.testing.assert_array_equal(iv["lower"].values, ref["window_lower"])
    np.testing.assert_array_equal(iv["upper"].values, ref["window_upper"])
    # MAPIE's target is round(1 - 0.9, 2) = 0.1, calibprob's 1 - 0.9: the levels agree to rounding
    np.testing.assert_allclose(iv["alpha_t"].values, ref["window_alpha"], rtol=0, atol=1e-15)
    loop, pred2, _ = _aci(ref, "window", window=int(ref["n_cal"]), infinite="allow")
    for t in range(60):  # the first 60 rows one at a time: the same as the one-pass path
        row = pred2.isel(obs=[t])
        one = loop.predict_interval(row)
        assert float(one["lower"][0]) == ref["window_lower"][t] and float(one["upper"][0]) == ref["window_upper"][t]
        loop.update(row, y[t : t + 1])
    again, _, _ = _aci(ref, "window", window=int(ref["n_cal"]), infinite="allow")
    again.predict_and_update(pred.isel(obs=slice(0, 60)), y[:60])
    np.testing.assert_array_equal(again.alpha_, loop.alpha_)
    np.testing.assert_array_equal(again.scores_, loop.scores_)
    assert again.misses_[0] == loop.misses_[0] and again.n_updates_ == loop.n_updates_ == 60


def test_where_mapie_stops_calibprob_issues_the_papers_interval(ref):
    """Fixed scores, the noise triples: equal intervals up to MAPIE's failure, which happens exactly at the first
    alpha_t < 1/(n+1); there calibprob issues the whole line (or, by default, the widest finite interval)."""
    n, stop = int(ref["n_cal"]), int(ref["fixed_failed_at"])
    assert stop > 0 and "too low to reach the requested level" in str(ref["fixed_error"])
    aci, pred, y = _aci(ref, "fixed", infinite="allow")
    iv = aci.predict_and_update(pred, y)
    np.testing.assert_array_equal(iv["lower"].values[:stop], ref["fixed_lower"][:stop])
    np.testing.assert_array_equal(iv["upper"].values[:stop], ref["fixed_upper"][:stop])
    alpha = iv["alpha_t"].values
    np.testing.assert_allclose(alpha[: stop + 1], ref["fixed_alpha"][: stop + 1], rtol=0, atol=1e-15)
    assert np.all(alpha[:stop] >= 1 / (n + 1)) and alpha[stop] < 1 / (n + 1)
    assert np.isinf(iv["upper"].values[stop]) and np.isinf(iv["lower"].values[stop])
    clipped, _, _ = _aci(ref, "fixed")
    finite = clipped.predict_and_update(pred, y)
    assert np.isfinite(finite["upper"].values).all() and bool(finite["clipped"].values[stop])
    # Gibbs & Candès's identity holds for calibprob's whole stream (no clipping of alpha_t)
    T = y.size
    assert abs(aci.misses_[0] / T - 0.1 + (aci.alpha_[0] - aci.alpha_start_[0]) / (0.005 * T)) < 1e-12


def test_predict_and_update_bad_input(ref):
    aci, pred, y = _aci(ref, "window")
    with pytest.raises(ValueError, match=r"mismatched lengths: y has 999 entries, the prediction has 1000"):
        aci.predict_and_update(pred, y[:-1])
    timed = pred.isel(obs=slice(0, 3)).assign_coords(time=("obs", [3.0, 2.0, 1.0]))
    with pytest.raises(ValueError, match=r"strictly increasing"):
        aci.predict_and_update(timed, y[:3])
    n, mu = int(ref["n_cal"]), ref["window_mu"]
    grouped = calibprob.AdaptiveConformalInterval(gamma=0.005).fit(
        calibprob.normal(mu[:n], np.ones(n)), ref["window_y"][:n], groups=np.arange(n) % 2
    )
    with pytest.raises(ValueError, match=r"predict_and_update runs one stream.*fitted with groups"):
        grouped.predict_and_update(pred, y)
