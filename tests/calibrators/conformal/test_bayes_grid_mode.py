"""Conformal Bayes's end-only evaluation (``grid_mode="ends"``) against the full grid.

The search itself (coarse scan, bisection, check, fallback) is checked on rank profiles written
down directly (brute force: the set of every profile is known); the estimator's sets are compared
with the full grid's on a diabetes-shaped linear-Gaussian problem, on a bimodal predictive (sets in
two pieces: the fallback) and with groups.
"""

from __future__ import annotations

import numpy as np
import pytest

from calibprob.calibrators.conformal.bayes import _ends
from calibprob.calibrators.conformal.bayes import _numerics as nm
from calibprob.calibrators.conformal.bayes.estimator import ConformalBayes

SET_VARS = ("lower", "upper", "n_pieces", "touches_edge", "grid_length", "min_ess", "pareto_k", "ess", "n_ranked")


def _search(profile, thr):
    """end_ranks on a known rank profile (b, G), thresholds (b, L); also the evaluated pairs' count."""
    calls = []

    def evaluate(pts, idx):
        calls.append(pts.size)
        return profile[pts, idx]

    rank, done, full = _ends.end_ranks(evaluate, profile.shape[0], profile.shape[1], thr)
    assert done.sum() == sum(calls)  # no pair evaluated twice
    assert np.array_equal(rank[done], profile[done])
    return rank, done, full


def test_unimodal_profiles_give_the_full_grids_sets_from_a_quarter_of_the_grid():
    rng = np.random.default_rng(0)
    b, G = 200, 100
    centre = rng.uniform(-30, 130, b)[:, None]  # some sets reach an edge, some leave the grid
    width = rng.uniform(3, 40, b)[:, None]
    profile = np.round(300 * np.exp(-(((np.arange(G) - centre) / width) ** 2))).astype(np.int64) + 1
    thr = np.tile(np.array([3, 30, 120]), (b, 1))
    rank, done, full = _search(profile, thr)
    for k in range(3):
        assert np.array_equal(rank > thr[:, k : k + 1], profile > thr[:, k : k + 1])
    # the only fallbacks: empty sets (the profile never passes the largest threshold)
    assert np.array_equal(full, ~(profile > 120).any(axis=1))
    assert 0 < full.sum() < b // 4
    assert done[~full].mean() < 0.3


def test_sets_in_two_pieces_fall_back_to_the_full_grid():
    G = 100
    x = np.arange(G)
    two = (np.exp(-(((x - 25) / 6.0) ** 2)) + np.exp(-(((x - 70) / 6.0) ** 2))) * 100
    one = np.exp(-(((x - 50) / 10.0) ** 2)) * 100
    # a dip that the coarse scan sees (at a coarse value inside the set)
    dip = one.copy()
    dip[48] = 0
    profile = np.round(np.stack([two, one, dip])).astype(np.int64) + 1
    thr = np.full((3, 1), 20)
    rank, done, full = _search(profile, thr)
    assert full.tolist() == [True, False, True]
    assert done[[0, 2]].all() and not done[1].all()
    assert np.array_equal(rank > 20, profile > 20)


def _linear_problem(seed, n=309, S=2000, m=20, G=100, d=10):
    """Diabetes-shaped linear-Gaussian posterior draws (the bench's generator, smaller S and m)."""
    rng = np.random.default_rng(seed)
    X, Xt = rng.normal(size=(n, d)) / np.sqrt(d), rng.normal(size=(m, d)) / np.sqrt(d)
    y = X @ rng.laplace(0, 1, d) + rng.normal(0, 0.7, n)
    y = (y - y.mean()) / y.std()
    beta = rng.normal(np.linalg.lstsq(X, y, rcond=None)[0], 0.08, size=(S, d))
    sigma = np.abs(rng.normal(0.72, 0.03, S))
    ll = -0.5 * ((y - beta @ X.T) / sigma[:, None]) ** 2 - np.log(sigma)[:, None]
    grid = np.linspace(y.min() - 2, y.max() + 2, G)
    mu = beta @ Xt.T
    logf = -0.5 * ((grid - mu[:, :, None]) / sigma[:, None, None]) ** 2 - np.log(sigma)[:, None, None]
    return ll, y, np.ascontiguousarray(logf), grid


def _both(ll, y, logf, grid, levels=(0.5, 0.8, 0.9, 0.95), **kw):
    out = {}
    for mode in ("full", "ends"):
        cb = ConformalBayes(confidence_level=list(levels), min_ess=0.0, grid_mode=mode, **kw)
        out[mode] = cb.fit(ll, y=y, groups=kw.pop("_g", None)).predict(logf, grid)
    return out["full"], out["ends"]


def _assert_same_sets(full, ends):
    for v in SET_VARS:
        assert np.array_equal(full[v].values, ends[v].values, equal_nan=True), v
    ev = ends["evaluated"].values
    assert np.array_equal(ends["p_value"].values[ev], full["p_value"].values[ev])
    assert np.isnan(ends["p_value"].values[~ev]).all()
    assert "evaluated" not in full and "n_full_grid" not in full.attrs


@pytest.mark.parametrize("fused", [False, True])
def test_diabetes_shaped_sets_equal_the_full_grids(monkeypatch, fused):
    monkeypatch.setattr(nm, "FUSED_MIN", 0 if fused else 10**18)
    full, ends = _both(*_linear_problem(1, S=1500, m=12))
    _assert_same_sets(full, ends)
    assert ends.attrs["n_full_grid"] == 0 and ends.attrs["grid_mode"] == "ends"
    assert ends.attrs["n_evaluated"] < 0.4 * ends["p_value"].size


@pytest.mark.slow
def test_diabetes_shape_in_full_sets_equal_the_full_grids():
    """The bench's shape: n = 309, S = 8000, G = 100, m = 133 (both cores)."""
    full, ends = _both(*_linear_problem(2, S=8000, m=133))
    _assert_same_sets(full, ends)
    assert ends.attrs["n_full_grid"] == 0


def test_bimodal_predictive_sets_equal_the_full_grids_with_the_two_piece_ones_counted():
    """Mixture likelihood 0.5 N(theta - a, 0.5) + 0.5 N(theta + a, 0.5): sets in two pieces for large a."""
    rng = np.random.default_rng(3)
    S, n, G = 1500, 120, 120
    theta = rng.normal(0, 0.05, S)
    a = np.r_[np.full(6, 3.0), np.full(6, 0.4)]  # separation per test point (first six: bimodal)

    def logmix(y, th, sep):
        z1, z2 = (y - th + sep) / 0.5, (y - th - sep) / 0.5
        return np.logaddexp(-0.5 * z1**2, -0.5 * z2**2) - np.log(2 * 0.5)

    y = rng.normal(0, 0.5, n) + rng.choice([-3.0, 3.0], n)
    ll = logmix(y[None, :], theta[:, None], 3.0)
    grid = np.linspace(-6, 6, G)
    logf = np.ascontiguousarray(logmix(grid[None, None, :], theta[:, None, None], a[None, :, None]))
    full, ends = _both(ll, y, logf, grid, levels=(0.6, 0.8))
    _assert_same_sets(full, ends)
    two = (full["n_pieces"].values > 1).any(axis=1)
    assert two[:6].all() and not two[6:].any()
    assert ends.attrs["n_full_grid"] == two.sum()
    assert ends["evaluated"].values[two].all()


def test_grouped_sets_equal_the_full_grids():
    ll, y, logf, grid = _linear_problem(4, S=1000, m=12)
    g_train = np.arange(ll.shape[1]) % 3
    res = {}
    for mode in ("full", "ends"):
        cb = ConformalBayes(confidence_level=[0.8, 0.9], min_ess=0.0, grid_mode=mode)
        res[mode] = cb.fit(ll, y=y, groups=g_train).predict(logf, grid, groups=np.arange(12) % 3)
    _assert_same_sets(res["full"], res["ends"])


def test_a_bad_grid_mode_is_refused():
    ll, y, logf, grid = _linear_problem(5, S=100, m=2)
    with pytest.raises(ValueError, match=r"grid_mode must be 'full' .* or 'ends' .*got 'end'"):
        ConformalBayes(grid_mode="end").fit(ll, y=y)


def test_chunked_element_wise_pass_equals_the_full_modes_bit_for_bit(monkeypatch):
    """row_stats over chunks of draws (a ragged last one) and row_weights' recomputed columns against the NumPy
    path's arithmetic on the whole block (NumPy's max, subtraction and exp, sum(axis=0), einsum): equal bit for bit."""
    rng = np.random.default_rng(7)
    S, b, G = 303, 3, 50
    logf = -np.abs(rng.normal(0, 20, size=(S, b, G)))
    logf[::5, 1, ::3] -= rng.exponential(700, size=logf[::5, 1, ::3].shape)  # some exp underflow to 0
    monkeypatch.setattr(nm, "FUSED_MIN", 0)
    monkeypatch.setattr(nm, "CHUNK_BYTES", 8 * b * G * 7)  # chunks of 7 draws, the last of 2 (303 = 43 x 7 + 2)
    st = _ends.row_stats(logf, None, nm.Scratch())
    assert st.e is None  # the chunked path keeps no block-sized array
    R = b * G
    lf = logf.reshape(S, R)
    mx = lf.max(axis=0)
    x = np.exp(lf - mx)
    total, sq = x.sum(axis=0), np.einsum("sr,sr->r", x, x)
    assert np.array_equal(st.mx, mx) and np.array_equal(st.total, total)
    assert np.array_equal(st.ess, total * total / sq)
    cols = np.array([0, 7, 8, 64, 149, 3])
    assert np.array_equal(_ends.row_weights(st, cols), x[:, cols])
    monkeypatch.setattr(nm, "CHUNK_BYTES", 8 * b * G * S)  # one chunk: the same numbers
    st1 = _ends.row_stats(logf, None, nm.Scratch())
    assert np.array_equal(st1.total, st.total) and np.array_equal(st1.log_new, st.log_new)
