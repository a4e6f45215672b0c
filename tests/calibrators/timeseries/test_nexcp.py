"""NexCP (Barber et al. 2023): rho = 1 is split conformal bit for bit, the weighted quantile and the
closed-form full-conformal hull against brute force, explicit refits, Theorem 2 on exchangeable data,
and the bad inputs."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import calibprob
from calibprob.calibrators.timeseries import NexCP, full_conformal_ls, nexcp_least_squares
from calibprob.calibrators.timeseries._full_ls import full_conformal_hull, ls_residual_lines, swap_fit_weight


def _stream(n, seed=0, drift=0.0):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    y = (1.0 + drift * t / n) * rng.normal(size=n)
    return calibprob.normal(np.zeros(n), np.ones(n)), y


def _brute_threshold(scores, weights, c):
    """The least score s with sum_{R_i <= s} w_i >= c (sum_j w_j + 1) by a loop; inf if none (the mass at +inf)."""
    total = weights.sum() + 1.0
    for s in np.sort(np.unique(scores)):
        if weights[scores <= s].sum() >= c * total:
            return s
    return np.inf


@pytest.mark.parametrize("score", ["absolute", "normalized", "signed"])
def test_rho_one_is_split_conformal_bit_for_bit(score):
    pred, y = _stream(150, seed=1, drift=2.0)
    pred = calibprob.normal(np.linspace(-1, 1, 150), np.linspace(0.5, 2.0, 150))
    cal, test = pred.isel(obs=slice(100)), pred.isel(obs=slice(100, None))
    levels = [0.5, 0.8, 0.9]
    a = NexCP(rho=1.0, score=score, confidence_level=levels).fit(cal, y[:100]).predict_interval(test)
    b = calibprob.SplitConformalCalibrator(score=score).fit(cal, y[:100]).predict_interval(test, levels)
    assert np.array_equal(a["lower"].values, b["lower"].values)
    assert np.array_equal(a["upper"].values, b["upper"].values)


@pytest.mark.parametrize("rho", [0.5, 0.9, 0.99])
def test_the_weighted_threshold_equals_a_brute_force_loop(rho):
    rng = np.random.default_rng(2)
    for n in (5, 40, 200):
        y = rng.standard_t(3, size=n)
        nex = NexCP(rho=rho, confidence_level=[0.5, 0.8, 0.9]).fit(_stream(n)[0], y)
        w = rho ** np.arange(n, 0, -1, dtype=float)
        _, hi = nex.thresholds()
        want = [_brute_threshold(np.abs(y), w, c) for c in (0.5, 0.8, 0.9)]
        assert hi.tolist() == want


def test_update_appends_the_newest_scores_and_moves_the_weights():
    pred, y = _stream(60, seed=3)
    one = NexCP(rho=0.9).fit(pred.isel(obs=slice(40)), y[:40]).update(pred.isel(obs=slice(40, None)), y[40:])
    two = NexCP(rho=0.9).fit(pred, y)
    assert np.array_equal(one.scores_, two.scores_) and one.n_calibration_ == 60
    assert one.calibration_weights()[-1] == 0.9 and one.calibration_weights()[0] == 0.9**60


def _brute_hull(a, b, a1, b1, w, c):
    """The NexCP full-conformal set's hull by evaluating every residual at every knot (O(n^2)), in exact
    rational arithmetic for the weights, the owner's tie exact."""
    n = a.size
    W = sum(Fraction(float(v)) for v in w) + 1
    wn = [Fraction(float(v)) / W for v in w]
    level = Fraction(c).limit_denominator(10**9)
    if sum(wn) <= level:
        return -np.inf, np.inf
    knots, owners = [], []
    for i in range(n):
        for s, k in ((b[i] - b1, a[i] - a1), (b[i] + b1, a[i] + a1)):
            if s != 0:
                knots.append(-k / s)
                owners.append(i)
    kept = []
    for yk, i in zip(knots, owners, strict=True):
        strict = sum(wn[j] for j in range(n) if j != i and abs(a1 + b1 * yk) > abs(a[j] + b[j] * yk))
        if strict <= level:
            kept.append(yk)
    return min(kept), max(kept)


def test_the_closed_form_hull_equals_brute_force():
    rng = np.random.default_rng(4)
    for trial in range(40):
        n, p = int(rng.integers(6, 40)), int(rng.integers(1, 4))
        X = rng.normal(size=(n, p))
        y = X @ rng.normal(size=p) + rng.standard_t(3, size=n)
        x = rng.normal(size=p)
        rho = float(rng.choice([1.0, 0.9, 0.99]))
        tags = rho ** np.arange(n, -1, -1, dtype=float) if trial % 2 else None
        a, b, a1, b1 = ls_residual_lines(X, y, x, tags)
        w = rho ** np.arange(n, 0, -1, dtype=float)
        c = float(rng.choice([0.5, 0.8]))
        got, want = full_conformal_hull(a, b, a1, b1, w, c), _brute_hull(a, b, a1, b1, w, c)
        assert np.allclose(got, want, rtol=1e-12, atol=1e-12), (trial, got, want)


def test_the_residual_lines_equal_explicit_weighted_refits():
    rng = np.random.default_rng(5)
    X, y, x = rng.normal(size=(30, 3)), rng.normal(size=30), rng.normal(size=3)
    tags = 0.9 ** np.arange(30, -1, -1, dtype=float)
    a, b, a1, b1 = ls_residual_lines(X, y, x, tags)
    for cand in (-2.0, 0.3, 5.0):
        Z, v = np.vstack([X, x]), np.r_[y, cand]
        beta = np.linalg.lstsq(Z * np.sqrt(tags)[:, None], v * np.sqrt(tags), rcond=None)[0]
        r = v - Z @ beta
        assert np.allclose(r[:-1], a + b * cand, atol=1e-12) and np.isclose(r[-1], a1 + b1 * cand, atol=1e-12)


@pytest.mark.seeded(6)
def test_the_tag_swap_follows_the_conformal_weights(seed, record_property):
    """K is drawn with probability w_K / (sum w + 1): over many draws, the frequencies match (the draws' seed from
    the seed sweep, 6 in the default run)."""
    w = np.array([1.0, 2.0, 3.0])
    rng = np.random.default_rng(seed)
    tags = np.array([10.0, 20.0, 30.0, 1.0])
    ks = []
    for _ in range(4000):
        swapped, k = swap_fit_weight(tags, w, rng)
        assert swapped[-1] == tags[k] and swapped[k] == 1.0
        ks.append(k)
    freq = np.bincount(ks, minlength=4) / 4000
    record_property("frequency_gap", float(np.max(np.abs(freq - [1 / 7, 2 / 7, 3 / 7, 1 / 7]))))
    assert np.allclose(freq, [1 / 7, 2 / 7, 3 / 7, 1 / 7], atol=0.03)


@pytest.mark.seeded(7)
def test_split_nexcp_covers_on_exchangeable_data_theorem_2(seed, record_property):
    """Exchangeable data: the gap bound is 0 and the coverage is at least 0.9 (500 seeded repetitions; their seed
    from the seed sweep, 7 in the default run)."""
    rng = np.random.default_rng(seed)
    hits = 0
    base = calibprob.normal(np.zeros(40), np.ones(40))
    for _ in range(500):
        y = rng.standard_t(4, size=41)
        nex = NexCP(rho=0.95).fit(base, y[:40])
        hits += int(abs(y[40]) <= nex.thresholds()[1][0])  # the interval 0 +- threshold
    record_property("coverage", hits / 500)
    assert nex.coverage_gap_bound(tv=0.0) == 0.0
    assert hits / 500 >= 0.9 - 3 * np.sqrt(0.09 / 500)


def test_the_gap_bound_is_theorem_2s_sum():
    nex = NexCP(rho=0.5).fit(*_stream(2))
    assert nex.coverage_gap_bound(tv=1.0) == pytest.approx(0.75 / 1.75)
    assert nex.coverage_gap_bound() is None


@pytest.mark.seeded(8)
def test_full_conformal_ls_with_rho_one_is_cp_ls_and_covers(seed, record_property):
    """rho = 1 is CP-LS; its 90 % coverage of 200 online points (the draw's seed from the seed sweep, 8 in the
    default run)."""
    rng = np.random.default_rng(seed)
    X = np.c_[np.ones(300), rng.normal(size=300)]
    y = X @ [1.0, 2.0] + rng.normal(size=300)
    ds = nexcp_least_squares(X, y, burn_in=100, rho=None)
    again = nexcp_least_squares(X, y, burn_in=100, rho=1.0)
    assert np.array_equal(ds["lower"].values, again["lower"].values)
    assert ds.sizes["obs"] == 200 and ds["time"].values[0] == 100
    cover = float(calibprob.evaluate(ds, y[100:], confidence_level=[0.9])["coverage"].squeeze())
    record_property("coverage", cover)
    assert 0.84 <= cover <= 0.97
    lo, hi = full_conformal_ls(X[:100], y[:100], X[100])
    assert (lo, hi) == (ds["lower"].values[0, 0], ds["upper"].values[0, 0])


def test_bad_input_is_refused_naming_the_fix():
    pred, y = _stream(20)
    for rho in (0.0, -0.5, 1.5, np.nan):
        with pytest.raises(ValueError, match=r"rho must be a decay in \(0, 1\]"):
            NexCP(rho=rho).fit(pred, y)
    with pytest.raises(ValueError, match=r"rho must be a decay in \(0, 1\]"):
        full_conformal_ls(np.ones((5, 1)), np.ones(5), np.ones(1), rho=1.2)
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match=r"burn_in=20 is not shorter than the data \(20 points\)"):
        nexcp_least_squares(X, y, burn_in=20)
    with pytest.raises(ValueError, match=r"times's time coordinate must be strictly increasing.*out of order"):
        nexcp_least_squares(X, y, burn_in=5, times=np.r_[np.arange(10), np.arange(10)])
    unordered = pred.assign_coords(time=("obs", np.r_[np.arange(10), np.arange(10)]))
    with pytest.raises(ValueError, match=r"pred_cal's time coordinate must be strictly increasing"):
        NexCP().fit(unordered, y)
    timed = pred.assign_coords(time=("obs", np.arange(20.0)))
    nex = NexCP().fit(timed, y)
    with pytest.raises(ValueError, match=r"first time 3.0 is not after the last time already seen, 19.0"):
        nex.update(timed.isel(obs=slice(3, 5)), y[3:5])
    with pytest.raises(ValueError, match="weighted_fit=True needs rho"):
        full_conformal_ls(X[:10], y[:10], X[10], rho=None, weighted_fit=True)
    with pytest.raises(ValueError, match="x has 3 entries but X has 2 columns"):
        full_conformal_ls(X[:10], y[:10], np.ones(3))
    with pytest.raises(calibprob.NotFittedError, match="fit"):
        NexCP().predict_interval(pred)


def test_groups_run_one_stream_per_group():
    pred, y = _stream(120, seed=9, drift=1.0)
    g = np.tile(["a", "b"], 60)
    grouped = NexCP(rho=0.9).fit(pred.isel(obs=slice(100)), y[:100], groups=g[:100])
    grouped.update(pred.isel(obs=slice(100, 110)), y[100:110], groups=g[100:110])
    iv = grouped.predict_interval(pred.isel(obs=slice(110, None)), groups=g[110:])
    for k in "ab":
        cal, new = np.flatnonzero(g[:100] == k), np.flatnonzero(g[100:110] == k) + 100
        test = np.flatnonzero(g[110:] == k) + 110
        alone = NexCP(rho=0.9).fit(pred.isel(obs=cal), y[cal]).update(pred.isel(obs=new), y[new])
        want = alone.predict_interval(pred.isel(obs=test))
        assert np.array_equal(iv["upper"].values[test - 110], want["upper"].values)


def test_the_time_coordinate_is_kept():
    pred, y = _stream(30)
    timed = pred.assign_coords(time=("obs", np.arange(100.0, 130.0)))
    iv = NexCP().fit(timed.isel(obs=slice(20)), y[:20]).predict_interval(timed.isel(obs=slice(20, None)))
    assert iv["time"].values.tolist() == list(np.arange(120.0, 130.0))
