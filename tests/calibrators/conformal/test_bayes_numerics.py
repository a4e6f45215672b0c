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
from scipy.special import logsumexp

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


@pytest.mark.parametrize("screen_draws", [512, 7, 10**9])  # chunks of 512 (the default), of 7, one product
def test_float32_screen_gives_the_float64_decision_on_every_entry(monkeypatch, screen_draws):
    monkeypatch.setattr(nm, "SCREEN_DRAWS", screen_draws)
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


def _aoi_problem(rng, S=400, n=30, R=90):
    """A training log-likelihood (S, n) and test log densities (S, 9, 10) with -inf entries."""
    mu = rng.normal(0, 1, S)
    y = rng.normal(0, 1.3, n)
    ll = -0.5 * (y[None, :] - mu[:, None]) ** 2
    grid = np.linspace(-4, 4, R)
    logf = (-0.5 * (grid[None, :] - mu[:, None]) ** 2 * rng.uniform(0.5, 2.0, (S, 1))).reshape(S, 9, 10)
    logf[rng.random(logf.shape) < 0.01] = -np.inf  # zero densities at some draws (a bounded support)
    return ll, logf


def test_chunked_float32_product_is_within_its_rounding_bound(monkeypatch):
    """product32 in chunks of K draws against the exact (float64 of float32 inputs) product: within
    gamma_{h+3} p + S 2^-146 with h = K - 1 + ceil(S/K) - 1 additions, the bound the screen uses."""
    rng = np.random.default_rng(21)
    S, R, n = 2000, 40, 30
    a = np.exp(rng.normal(-1, 2, size=(S, R))).clip(max=1).astype(np.float32)
    b = np.exp(rng.normal(-2, 3, size=(S, n))).clip(max=1).astype(np.float32)
    exact = a.astype(float).T @ b.astype(float)  # exact to float64's rounding, far inside the bound
    for K in (64, 333, 2000, 10**6):
        monkeypatch.setattr(nm, "SCREEN_DRAWS", K)
        prod, h = nm.product32(a, b)
        assert h == (S - 1 if S <= K else K - 1 + -(-S // K) - 1)
        gamma = 1.01 * (h + 3) * 2.0**-24
        assert (np.abs(prod - exact) <= gamma * exact + S * 2.0**-146).all()
    # the bound's point: a chunked product's additions are far fewer than S's
    monkeypatch.setattr(nm, "SCREEN_DRAWS", 512)
    assert nm.product32(np.ones((8000, 2), np.float32), np.ones((8000, 2), np.float32))[1] == 511 + 15


@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("screen_draws", [512, 37])  # S = 400: one product, or 11 chunks (a ragged last one)
def test_fused_block_gives_the_numpy_paths_ranks_ess_and_norm_bit_for_bit(monkeypatch, grouped, screen_draws):
    monkeypatch.setattr(nm, "SCREEN_DRAWS", screen_draws)
    rng = np.random.default_rng(11)
    ll, logf = _aoi_problem(rng)
    E, c = nm.shifted_likelihood(ll)
    E32 = E.astype(np.float32)
    members = rng.random((90, ll.shape[1])) < 0.6 if grouped else None
    monkeypatch.setattr(nm, "FUSED_MIN", 10**18)
    ref = nm.aoi_block(logf, ll, E, c, members, E32)
    monkeypatch.setattr(nm, "FUSED_MIN", 0)
    got = nm.aoi_block(logf, ll, E, c, members, E32, scratch=nm.Scratch())
    for a, b in zip(got, ref, strict=True):
        assert np.array_equal(a, b)
    # and both equal the brute-force ranks of the definition in float64 log space
    logw = nm.log_weights(logf.reshape(ll.shape[0], -1))
    log_sigma = logsumexp(logw[:, :, None] + ll[:, None, :], axis=0)
    log_new = logsumexp(logw + logf.reshape(ll.shape[0], -1), axis=0)  # LSE_s(log w_s + lambda_s)
    below = log_sigma <= log_new[:, None]
    if members is not None:
        below &= members
    assert np.array_equal(got[0], below.sum(axis=1) + 1)


def test_fused_block_hands_invalid_blocks_to_the_check(monkeypatch):
    rng = np.random.default_rng(12)
    ll, logf = _aoi_problem(rng)
    E, c = nm.shifted_likelihood(ll)
    monkeypatch.setattr(nm, "FUSED_MIN", 0)
    calls = []
    nm.aoi_block(logf, ll, E, c, None, E.astype(np.float32), check=lambda: calls.append(1))
    assert calls == []  # -inf at some draws is valid
    for s, bad in ((0, np.nan), (7, np.nan), (3, np.inf)):
        broken = logf.copy()
        broken[s, 2, 4] = bad
        with pytest.raises(RuntimeError, match="checked"):
            nm.aoi_block(broken, ll, E, c, None, E.astype(np.float32), check=_raise_checked)
    dead = logf.copy()
    dead[:, 5, 1] = -np.inf
    with pytest.raises(RuntimeError, match="checked"):
        nm.aoi_block(dead, ll, E, c, None, E.astype(np.float32), check=_raise_checked)


def _raise_checked():
    raise RuntimeError("checked")


def test_fused_block_reads_a_block_cut_from_a_larger_input_in_place(monkeypatch):
    # a block of test points of an (S, m, G) input is a strided view: the compiled loops read its rows
    # through a C-ordered view of the parent's row spacing (never past the block's columns)
    rng = np.random.default_rng(13)
    ll, logf = _aoi_problem(rng)
    E, c = nm.shifted_likelihood(ll)
    E32 = E.astype(np.float32)
    monkeypatch.setattr(nm, "FUSED_MIN", 0)
    for sl in (slice(0, 3), slice(3, 7), slice(6, 9)):
        view = logf[:, sl, :]
        assert not view.flags.c_contiguous
        got = nm.aoi_block(view, ll, E, c, None, E32)
        ref = nm.aoi_block(np.ascontiguousarray(view), ll, E, c, None, E32)
        for a, b in zip(got, ref, strict=True):
            assert np.array_equal(a, b)
    assert nm._c_rows(logf.reshape(400, -1)[:, 10:40]).shape == (400, 90)  # the parent's row spacing
    assert nm._c_rows(logf.reshape(400, -1)[:, ::2]).flags.c_contiguous  # not unit-strided: a copy
