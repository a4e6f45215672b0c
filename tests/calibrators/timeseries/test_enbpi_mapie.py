"""EnbPI equals MAPIE 1.6's ``TimeSeriesRegressor(method="enbpi")`` where the algorithms are the same.

The reference intervals were written by ``tests/data/make_mapie_enbpi_reference.py`` (MAPIE in the peers'
environment; nothing here imports it): i.i.d. bootstrap (blocks of length 1) drawn as
``RandomState(7).choice(200, 200)``, mean aggregation, the mean centre, the symmetric absolute score read
at MAPIE's ``"higher"`` quantile, the window sliding one residual per outcome."""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import Ridge

import calibprob
from tests.support.paths import TEST_DATA


def test_enbpi_one_step_ahead_intervals_equal_mapies():
    ref = np.load(TEST_DATA / "mapie_enbpi_reference.npz")
    X, y, n = ref["X"], ref["y"], int(ref["n_train"])
    enbpi = calibprob.EnbPI(Ridge(), random_state=np.random.RandomState(7), quantile_method="higher")
    iv = enbpi.fit(X[:n], y[:n]).predict_and_update(X[n:], y[n:], confidence_level=0.9)
    assert np.allclose(iv["lower"].values, ref["lower"], rtol=0, atol=1e-12)
    assert np.allclose(iv["upper"].values, ref["upper"], rtol=0, atol=1e-12)
    # the paper's linear percentile reads a different order statistic: not MAPIE's intervals
    other = calibprob.EnbPI(Ridge(), random_state=np.random.RandomState(7)).fit(X[:n], y[:n])
    assert not np.allclose(other.predict_and_update(X[n:], y[n:], 0.9)["upper"].values, ref["upper"], atol=1e-6)
