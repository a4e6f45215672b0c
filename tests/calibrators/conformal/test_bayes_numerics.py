"""Conformal Bayes numerics against their references: arviz-stats' Pareto k-hat and the float64 product.

* :func:`pareto_khat` (one ``np.partition`` and one broadcast GPD profile for all columns) must
  reproduce ``arviz_stats``' ``psislw`` k-hat, column by column, to 1e-12.
* The float32-screened comparison ``(w^T E)_{r,i} <= thr_r`` must give the float64 decision on
  every entry, including thresholds placed within 1e-9 .. 1e-3 (relative) of the product, where
  the float32 product alone cannot decide, and products that underflow float32.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

from calibprob.calibrators.conformal.bayes import _numerics as nm


def _weight_columns(rng, S: int) -> np.ndarray:
    """Log weights of light, heavy (Pareto, k up to ~2) and bounded tails, (S, 40)."""
    cols = []
    for j in range(40):
        kind = j % 4
        if kind == 0:
            cols.append(rng.normal(0, 0.3 + j / 20, S))
        elif kind == 1:
            cols.append(np.log(rng.pareto(0.5 + j / 30, S) + 1e-3))
        elif kind == 2:
            cols.append(rng.standard_t(3, S) * 2)
        else:
            cols.append(-rng.exponential(1, S) * 5)
    return np.stack(cols, axis=1)


@pytest.mark.parametrize("S", [8000, 1000, 200])
def test_pareto_khat_equals_arviz_stats_psislw_to_1e_12(S):
    arviz_stats = pytest.importorskip("arviz_stats")
    assert arviz_stats is not None
    logw = _weight_columns(np.random.default_rng(S), S)
    ours = nm.pareto_khat(logw)
    da = xr.DataArray(logw[None], dims=("chain", "draw", "obs"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, ref = (-da).azstats.psislw(dim=["chain", "draw"])  # psislw negates: pass -log w
    ref = np.asarray(ref.values, float)
    assert np.isfinite(ours).all() and ours.max() > 1.0 and ours.min() < 0.0  # both regimes exercised
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12)


def test_pareto_khat_is_nan_on_flat_weights_and_needs_25_draws():
    logw = np.zeros((400, 2))
    logw[:, 1] = np.random.default_rng(0).normal(size=400)
    k = nm.pareto_khat(logw)
    assert np.isnan(k[0]) and np.isfinite(k[1])
    with pytest.raises(ValueError, match="at least 25 draws"):
        nm.pareto_khat(np.zeros((20, 1)))


def test_float32_screen_gives_the_float64_decision_on_every_entry():
    rng = np.random.default_rng(7)
    S, R, n = 3000, 60, 40
    e = np.exp(rng.normal(0, 2, size=(S, R)))
    w = e / e.sum(axis=0)
    E = np.exp(rng.normal(-3, 3, size=(S, n)) - 3)
    E[:, :3] *= 1e-40  # products below float32's normal range: decided in float64
    E = np.minimum(E, 1.0)
    p64 = w.T @ E
    # thresholds at a training point's own product times (1 + eps): near-ties the screen must hand back.
    # (eps = 0, a tie to the last bit, is decided by the summation order, in float64 as in JAX)
    j = rng.integers(0, n, size=R)
    eps = rng.choice([-1e-3, -1e-6, -1e-9, -1e-12, 1e-12, 1e-9, 1e-6, 1e-3], size=R)
    thr = p64[np.arange(R), j] * (1 + eps)
    below, small = nm._screened_compare(w, E, E.astype(np.float32), thr)
    ref = p64 <= thr[:, None]
    assert np.array_equal(below, ref)
    assert not small.any()  # nothing below 1e-280 here
    assert 0 < ref.mean() < 1
