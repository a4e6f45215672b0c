"""The quantile boosting base keeps its documented promise: ``predict_quantiles`` is non-crossing.

Before issue 36 its docstring said "each row sorted (non-crossing)" while it returned the per-level
models' raw predictions: on the input below rows crossed. The reference is the raw per-level
scikit-learn models, fitted independently here, sorted row by row.
"""

from __future__ import annotations

import numpy as np
import pytest

import calibprob


def test_predict_quantiles_sorts_every_row_and_says_how_many_it_changed():
    pytest.importorskip("sklearn")
    from sklearn.ensemble import HistGradientBoostingRegressor

    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(200, 2))
    y = np.sin(X[:, 0]) + rng.standard_normal(200)
    levels = [0.4, 0.45, 0.5, 0.55, 0.6]  # close levels, separately fitted: their quantiles cross
    kw = {"max_iter": 10, "min_samples_leaf": 5, "random_state": 0}
    gbm = calibprob.QuantileGradientBoosting(levels=levels, **kw).fit(X[:120], y[:120])
    raw = np.column_stack(
        [
            HistGradientBoostingRegressor(loss="quantile", quantile=p, **kw).fit(X[:120], y[:120]).predict(X[120:])
            for p in levels
        ]
    )
    crossed = int(np.any(np.diff(raw, axis=1) < 0, axis=1).sum())
    assert crossed > 0  # the input exercises the promise
    q = gbm.predict_quantiles(X[120:])
    assert np.all(np.diff(q, axis=1) >= 0)
    np.testing.assert_array_equal(q, np.sort(raw, axis=1))
    q2, n_changed = gbm.predict_quantiles(X[120:], return_n_rearranged=True)
    np.testing.assert_array_equal(q2, q)
    assert n_changed == crossed
    assert gbm.predict(X[120:]).attrs["n_rearranged"] == crossed
