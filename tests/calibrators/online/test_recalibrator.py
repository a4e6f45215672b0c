"""Online quantile recalibration (calibprob.calibrators.online): Theorem 2, monotonicity, state, bad input.

References: Deshpande, Marx & Kuleshov (2024), §4 and Appendix G.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import special

import calibprob
from calibprob.calibrators.online import (
    OnlineQuantileRecalibrator,
    coverage_bound,
    interpolate_map,
    lemma4_counterexample,
    osd_path,
    osd_step,
    publish,
    theorem2_bound,
)

# -- strategies ---------------------------------------------------------------------------
levels_strategy = st.lists(st.floats(0.001, 0.999), min_size=1, max_size=20, unique=True).map(
    lambda v: np.array(sorted(v))
)
eta_strategy = st.floats(0.01, 20.0)
# one move per step: (kind, level index, u). kind 0: u as drawn (random stream);
# 1: just above the anchor of a level (defeats it: not covered); 2: just below;
# 3: exactly at it; 4: u in {0, 1} (extreme outcome)
move_strategy = st.tuples(st.integers(0, 4), st.integers(0, 1000), st.floats(0.0, 1.0))
moves_strategy = st.lists(move_strategy, min_size=1, max_size=120)

HYP = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def _adversarial_stream(levels, eta, moves, coupling):
    """Drive OSD with outcomes chosen from the current state; return the hits (T, L)."""
    theta = levels.copy()
    hits = []
    for kind, j, frac in moves:
        issued = publish(theta, coupling)
        anchor = issued if coupling == "isotonic" else theta
        a = anchor[j % levels.size]
        if kind == 0:
            u = frac
        elif kind == 1:
            u = np.nextafter(a, np.inf)
        elif kind == 2:
            u = np.nextafter(a, -np.inf)
        elif kind == 3:
            u = a
        else:
            u = float(frac > 0.5)
        u = float(min(1.0, max(0.0, u)))
        theta, _, hit = osd_step(theta, levels, u, eta, coupling)
        hits.append(hit)
    return np.asarray(hits, float)


def _max_ratio(hits, levels, bound_fn):
    T = np.arange(1, hits.shape[0] + 1)
    dev = np.abs(np.cumsum(hits, axis=0) / T[:, None] - levels[None, :])
    return float(np.max(dev / bound_fn(T)))


# -- Theorem 2 ----------------------------------------------------------------------------
@HYP
@given(levels_strategy, eta_strategy, moves_strategy)
def test_theorem2_independent_levels_adversarial(levels, eta, moves):
    """Eq. (9) per level: |mean coverage - p| <= (1 + eta)/(eta T) for EVERY prefix T and level."""
    hits = _adversarial_stream(levels, eta, moves, "independent")
    ratio = _max_ratio(hits, levels, lambda T: theorem2_bound(eta, T)[:, None])
    assert ratio <= 1.0 + 1e-9


@HYP
@given(st.floats(0.001, 0.999), eta_strategy, moves_strategy)
def test_theorem2_single_level_isotonic_is_exact(p, eta, moves):
    """With one level the isotonic coupling is plain OSD: Theorem 2's constant itself."""
    levels = np.array([p])
    hits = _adversarial_stream(levels, eta, moves, "isotonic")
    assert _max_ratio(hits, levels, lambda T: theorem2_bound(eta, T)[:, None]) <= 1.0 + 1e-9


@HYP
@given(levels_strategy, eta_strategy, moves_strategy)
def test_isotonic_coupling_bound_and_monotone(levels, eta, moves):
    """Lazy isotonic projection: issued map monotone at every step, proven per-level bound holds."""
    theta = levels.copy()
    hits = []
    for kind, j, frac in moves:
        issued = publish(theta, "isotonic")
        assert np.all(np.diff(issued) >= -1e-12), "issued recalibration map must be monotone in p"
        a = issued[j % levels.size]
        u = frac if kind == 0 else np.nextafter(a, np.inf) if kind == 1 else a if kind == 3 else float(frac > 0.5)
        u = float(min(1.0, max(0.0, u)))
        theta, issued_used, hit = osd_step(theta, levels, u, eta, "isotonic")
        # the indicator is taken at the issued (monotone) value: what the forecast promised
        np.testing.assert_array_equal(hit, u <= issued_used)
        hits.append(hit)
    hits = np.asarray(hits, float)
    ratio = _max_ratio(hits, levels, lambda T: coverage_bound(levels, eta, T, coupling="isotonic"))
    assert ratio <= 1.0 + 1e-9


def test_random_stream_theorem2_all_prefixes():
    """Uniform and strongly non-uniform i.i.d. PIT streams (seeded), T = 1..3000."""
    rng = np.random.default_rng(0)
    levels = np.linspace(0.05, 0.95, 19)
    for u in (rng.random(3000), rng.beta(0.3, 0.3, 3000), rng.beta(5, 1, 3000)):
        for eta in (0.05, 1.0, 10.0):
            _, _, hit = osd_path(u, levels, eta, coupling="independent")
            assert _max_ratio(hit.astype(float), levels, lambda T: theorem2_bound(eta, T)[:, None]) <= 1 + 1e-9
            _, issued, hit = osd_path(u, levels, eta, coupling="isotonic")
            assert np.all(np.diff(issued, axis=1) >= -1e-12)
            bound = lambda T: coverage_bound(levels, eta, T, coupling="isotonic")  # noqa: E731
            assert _max_ratio(hit.astype(float), levels, bound) <= 1 + 1e-9


def test_recalibrator_class_adversarial_forecasts():
    """End to end on forecasts: y chosen to fall just above the issued recalibrated quantile."""
    rng = np.random.default_rng(1)
    p = 0.9
    eta = 0.5
    rec = OnlineQuantileRecalibrator(levels=[p], eta=eta)
    covered = []
    for t in range(400):
        base = calibprob.normal([rng.normal()], [np.exp(rng.normal())], levels=[0.1, 0.5, 0.9])
        r = float(rec.recalibration_map([p])[0])
        # defeat the promised quantile whenever it is finite; else an arbitrary outcome
        u_target = min(max(r, 1e-9), 1 - 1e-9)
        y = float(base["loc"][0] + base["scale"][0] * special.ndtri(u_target)) + 1e-9
        before = rec.hits_.copy()
        rec.update(base, [y])
        covered.append(float((rec.hits_ - before)[0]))
        T = t + 1
        assert abs(np.mean(covered) - p) <= (1 + eta) / (eta * T) + 1e-12
    assert rec.n_updates_ == 400
    assert abs(rec.coverage()[0] - p) <= rec.theorem2_bound() + 1e-12


# -- monotonicity -------------------------------------------------------------------------
def test_lemma4_counterexample_independent_iterates_cross():
    """The paper's Lemma 4 overlooks that o_t(p) depends on p: per-level iterates can cross."""
    before, after = lemma4_counterexample()
    assert np.all(np.diff(before) > 0)
    np.testing.assert_allclose(after, [1.0, 0.02])
    assert after[1] < after[0]
    # what is issued is monotone for both couplings
    for coupling in ("independent", "isotonic"):
        assert np.all(np.diff(publish(after, coupling)) >= 0)


def test_isotonic_projection_matches_brute_force():
    """publish(isotonic) is the L2 projection onto non-decreasing vectors (checked by a QP-free brute force)."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        theta = rng.normal(size=6)
        iso = publish(theta, "isotonic")
        assert np.all(np.diff(iso) >= -1e-12)
        # optimality: no monotone perturbation reduces the distance (KKT check via random monotone vectors)
        for _ in range(200):
            cand = np.sort(iso + 0.3 * rng.normal(size=6))
            assert np.sum((cand - theta) ** 2) >= np.sum((iso - theta) ** 2) - 1e-12


def test_recalibrated_forecast_monotone_and_identity_start():
    levels = calibprob.predictive.DEFAULT_LEVELS
    base = calibprob.normal(np.array([0.0, 2.0]), np.array([1.0, 3.0]))
    rec = OnlineQuantileRecalibrator()
    out = rec.recalibrate(base)
    # before any update R_1(p) = p: the recalibrated forecast is the base forecast
    np.testing.assert_allclose(out["quantile"].values, base["quantile"].values, atol=1e-12)
    rng = np.random.default_rng(2)
    rec.update(calibprob.normal(np.zeros(50), np.ones(50)), 3.0 * rng.standard_normal(50))
    out = rec.recalibrate(base)
    calibprob.validate(out)
    assert np.all(np.diff(out["quantile"].values, axis=1) >= 0)
    assert out.attrs["family"] == "quantile"
    assert out["level"].size == levels.size


@pytest.mark.seeded(4)
def test_overconfident_base_is_widened_to_the_true_quantiles(seed, record_property):
    """Base N(0, 1), truth N(0, 2^2): R(p) hovers around Phi(2 Phi^-1(p)) (closed form), coverage -> p.

    With a constant step the iterates fluctuate (spread ~ sqrt(eta)); their time average over the
    second half of the stream is compared with the closed form. The stream's seed from the seed sweep, 4 in the
    default run.
    """
    rng = np.random.default_rng(seed)
    levels = np.array([0.05, 0.25, 0.5, 0.75, 0.95])
    n, eta = 20000, 0.02
    y = 2.0 * rng.standard_normal(n)
    base = calibprob.normal(np.zeros(n), np.ones(n), levels=levels)
    rec = OnlineQuantileRecalibrator(levels=levels, eta=eta).update(base, y)
    _, issued, _ = osd_path(special.ndtr(y), levels, eta, coupling="isotonic")
    np.testing.assert_allclose(issued[-1], rec.recalibration_)  # class == NumPy layer
    target = special.ndtr(2.0 * special.ndtri(levels))
    record_property("issued_gap", float(np.max(np.abs(issued[n // 2 :].mean(axis=0) - target))))
    record_property("coverage_gap", float(np.max(np.abs(rec.coverage() - levels))))
    # the iterates' spread ~ sqrt(eta) = 0.14 and their memory ~ 1 / eta = 50 steps: ~200 independent blocks in the
    # 10 000 averaged, a sd of ~0.01. The old atol 0.02 broke at seed 10 (0.0238, the sweep's worst over seeds 0..19);
    # now 3 sds. The identity is 0.16 off.
    np.testing.assert_allclose(issued[n // 2 :].mean(axis=0), target, atol=0.03)
    np.testing.assert_allclose(rec.coverage(), levels, atol=0.01)
    # the issued 90% interval at the averaged map is about twice as wide as the base's
    z = special.ndtri(np.clip(issued[n // 2 :].mean(axis=0), 1e-3, 1 - 1e-3))
    assert 1.8 < (z[-1] - z[0]) / (2 * 1.6449) < 2.2


def test_quantile_family_forecast_and_interpolation():
    rng = np.random.default_rng(5)
    draws = rng.standard_t(4, size=(400, 30))
    f = calibprob.from_draws(draws)
    rec = OnlineQuantileRecalibrator(levels=[0.1, 0.5, 0.9], eta=0.3).update(f, rng.standard_t(4, 30))
    out = rec.recalibrate(f)
    calibprob.validate(out)
    p = np.linspace(0, 1, 101)
    R = rec.recalibration_map(p)
    assert np.all(np.diff(R) >= 0)
    np.testing.assert_allclose(rec.recalibration_map([0.1, 0.5, 0.9]), rec.recalibration_)
    np.testing.assert_allclose(interpolate_map([0.2, 0.8], [0.3, 0.7], [0.0, 0.5, 1.0]), [0.0, 0.5, 1.0])


# -- state ---------------------------------------------------------------------------------
def test_state_round_trip_netcdf_and_continuation(tmp_path):
    rng = np.random.default_rng(6)
    rec = OnlineQuantileRecalibrator(levels=[0.1, 0.3, 0.5, 0.7, 0.9], eta=0.7, coupling="isotonic")
    rec.update_pit(rng.beta(0.5, 0.5, 37))
    path = tmp_path / "rec.nc"
    rec.to_dataset().to_netcdf(path, engine="h5netcdf")
    back = OnlineQuantileRecalibrator.from_dataset(xr.load_dataset(path, engine="h5netcdf"))
    assert back.get_params() == {**rec.get_params(), "levels": back.levels}
    np.testing.assert_array_equal(back.theta_, rec.theta_)
    np.testing.assert_array_equal(back.hits_, rec.hits_)
    assert back.n_updates_ == rec.n_updates_ == 37
    more = rng.random(25)
    rec.update_pit(more)
    back.update_pit(more)
    np.testing.assert_array_equal(back.recalibration_, rec.recalibration_)
    # fit() restarts from the identity
    fresh = OnlineQuantileRecalibrator(levels=[0.5]).fit(calibprob.normal([0.0], [1.0]), [5.0])
    assert fresh.n_updates_ == 1 and fresh.recalibration_[0] == pytest.approx(0.5 + 0.25 * 0.5)


def test_from_dataset_rejects_other_datasets():
    with pytest.raises(ValueError, match="not an OnlineQuantileRecalibrator state"):
        OnlineQuantileRecalibrator.from_dataset(xr.Dataset({"a": ("x", [1.0])}))


# -- bad input -----------------------------------------------------------------------------
@pytest.mark.parametrize("eta", [0.0, -1.0, np.nan, np.inf])
def test_eta_must_be_positive(eta):
    with pytest.raises(ValueError, match="eta must be > 0"):
        OnlineQuantileRecalibrator(eta=eta).reset()


@pytest.mark.parametrize("levels", [[0.0, 0.5], [0.5, 1.0], [-0.1], [0.2, 1.5]])
def test_levels_outside_unit_interval(levels):
    with pytest.raises(ValueError, match="levels must lie strictly inside \\(0, 1\\)"):
        OnlineQuantileRecalibrator(levels=levels).reset()


def test_other_bad_input():
    with pytest.raises(ValueError, match="levels must be strictly increasing"):
        OnlineQuantileRecalibrator(levels=[0.5, 0.2]).reset()
    with pytest.raises(ValueError, match="coupling must be one of"):
        OnlineQuantileRecalibrator(coupling="sorted").reset()
    with pytest.raises(ValueError, match="level_floor must be in"):
        OnlineQuantileRecalibrator(level_floor=0.7).reset()
    rec = OnlineQuantileRecalibrator()
    with pytest.raises(ValueError, match="pit values must lie in \\[0, 1\\]"):
        rec.update_pit([0.5, 1.2])
    with pytest.raises(ValueError, match="pit must be finite"):
        rec.update_pit([np.nan])
    with pytest.raises(ValueError, match="y must be finite"):
        rec.update(calibprob.normal([0.0], [1.0]), [np.inf])
    with pytest.raises(ValueError, match="mismatched lengths"):
        rec.update(calibprob.normal([0.0, 1.0], [1.0, 1.0]), [0.0])
    with pytest.raises(ValueError, match="p must lie in \\[0, 1\\]"):
        rec.recalibration_map([1.5])
