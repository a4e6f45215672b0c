"""``OnlineQuantileRecalibrator(rule=...)``: Deshpande et al.'s OSD unchanged, and ACI on the PIT scale (Gibbs &
Candès 2021) moving every central pair of levels at once.

Independent checks: at one central level the PIT-scale rule is ``AdaptiveConformalInterval`` (a separate
implementation on the data scale) on the same stream; Proposition 4.1 per pair on adversarial streams."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

import calibprob
from calibprob.calibrators.online import AdaptiveConformalInterval, OnlineQuantileRecalibrator, osd_path
from tests.support.streams import KINDS, adversarial_stream


def _gauss(mu, sigma):
    return calibprob.normal(np.atleast_1d(np.asarray(mu, float)), np.atleast_1d(np.asarray(sigma, float)))


def test_rule_osd_is_the_default_and_its_path_is_unchanged():
    """The default is rule='osd', and its iterates, issued maps and hits are osd_path's, bit for bit."""
    assert OnlineQuantileRecalibrator().rule == "osd"
    rng = np.random.default_rng(0)
    levels = np.array([0.1, 0.3, 0.5, 0.7, 0.9])
    u = rng.beta(0.5, 0.5, size=400)
    for coupling in ("isotonic", "independent"):
        rec = OnlineQuantileRecalibrator(levels=levels, eta=0.3, coupling=coupling, rule="osd").update_pit(u)
        theta, issued, hit = osd_path(u, levels, 0.3, coupling=coupling)
        np.testing.assert_array_equal(rec.theta_, theta[-1])
        np.testing.assert_array_equal(rec.recalibration_, issued[-1])
        np.testing.assert_array_equal(rec.hits_, hit.sum(axis=0))
    f = rec.recalibrate(_gauss([0.0], [1.0]))
    assert "recalibration_rule" not in f.attrs and "rule" not in rec.to_dataset().attrs


@pytest.mark.parametrize("window", [None, 60])
def test_aci_at_one_central_level_is_the_one_level_aci(window):
    """levels (p, 1 - p) with rule='aci' give AdaptiveConformalInterval's path on the same stream.

    With a Gaussian base the PIT score |2 Phi(z) - 1| is increasing in the normalised score |z|, so both pick
    the same order statistic and see the same misses: the alpha_t paths and the miss counts are equal bit for
    bit. The intervals agree to 1e-12 (not bitwise): the PIT rule reads mu + sigma Phi^-1((1 + r)/2) with
    r = 2 Phi(|z|_(k)) - 1, a Phi / Phi^-1 round trip. Where ACI issues the paper's infinite interval, the PIT
    rule's set is the whole [0, 1], issued at the level floor and counted."""
    rng = np.random.default_rng(17)
    levels, c, gamma, floor = [0.125, 0.875], 0.75, 0.05, 1e-6  # dyadic: alpha = 1 - c = 2p exactly
    n_cal, T = 100, 240
    mu_cal, sd_cal = rng.normal(size=n_cal), rng.uniform(0.5, 2.0, n_cal)
    y_cal = mu_cal + sd_cal * rng.normal(size=n_cal)
    aci = AdaptiveConformalInterval(
        confidence_level=c, gamma=gamma, score="normalized", window=window, infinite="allow"
    )
    rec = OnlineQuantileRecalibrator(levels=levels, rule="aci", gamma=gamma, window=window, level_floor=floor)
    aci.fit(_gauss(mu_cal, sd_cal), y_cal)
    rec.fit(_gauss(mu_cal, sd_cal), y_cal)
    z_floor = special.ndtri(1 - floor)
    infinite = floored = 0
    for t in range(T):
        mu, sd = rng.normal(), rng.uniform(0.5, 2.0)
        y = mu + sd * rng.normal() * (1.0 if t < T // 3 else 1.8 if t < 2 * T // 3 else 0.6)
        f = _gauss(mu, sd)
        iv = aci.predict_interval(f, [c])  # a list keeps the confidence_level dimension
        q = rec.recalibrate(f, levels=levels).calib.quantiles[0]
        lo, hi = float(iv["lower"].values[0, 0]), float(iv["upper"].values[0, 0])
        if (hi - mu) / sd < z_floor:
            np.testing.assert_allclose(q, [lo, hi], rtol=1e-12, atol=1e-12)
        else:  # beyond the floor (the whole PIT interval where ACI is infinite): read at the floor
            infinite += not np.isfinite(hi)
            floored += 1
            np.testing.assert_array_equal(q, f.calib.family.ppf(np.array([floor, 1 - floor]))[0])
        aci.update(f, [y])
        rec.update(f, [y])
        np.testing.assert_array_equal(rec.alpha_, aci.alpha_)
        np.testing.assert_array_equal(rec.misses_, aci.misses_)
    assert infinite > 0  # both branches were exercised
    assert rec.n_floored_.tolist() == [floored, floored]
    np.testing.assert_array_equal(rec.coverage_error_bound(), aci.coverage_error_bound())


LEVELS = np.array([0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95])


@pytest.mark.parametrize("kind", KINDS)
def test_prop41_holds_for_every_pair_on_adversarial_streams(kind):
    """Gibbs & Candès's long-run bound per central pair, with the exact identity it rests on; the issued quantile
    function stays finite and non-decreasing all along."""
    rng = np.random.default_rng(21)
    T, gamma = 2000, 0.01
    y = adversarial_stream(kind, T, rng)
    rec = OnlineQuantileRecalibrator(levels=LEVELS, rule="aci", gamma=gamma, window=50)
    rec.fit(_gauss(np.zeros(50), np.ones(50)), rng.normal(size=50))
    base = _gauss(np.zeros(T), np.ones(T))
    for block in range(0, T, 250):  # batches of outcomes, with a forecast issued between them
        q = rec.recalibrate(base.isel(obs=[0]), levels=LEVELS).calib.quantiles
        assert np.all(np.isfinite(q)) and np.all(np.diff(q, axis=1) >= 0)
        rec.update(base.isel(obs=slice(block, block + 250)), y[block : block + 250])
    err, alpha = rec.miss_rate(), 2 * LEVELS[:3]
    np.testing.assert_allclose(err - alpha, (alpha - rec.alpha_) / (gamma * T), rtol=0, atol=1e-12)
    bound = rec.coverage_error_bound()
    np.testing.assert_allclose(bound, (np.maximum(alpha, 1 - alpha) + gamma) / (gamma * T))
    assert np.all(np.abs(err - alpha) <= bound)
    static = np.mean(np.abs(y) > np.quantile(np.abs(rng.normal(size=50)), 0.9))  # fixed 90 % interval
    assert kind == "seasonal" or static > 0.1 + 0.05  # what ACI repairs


@pytest.mark.parametrize("rule", ["aci", "dtaci"])
def test_aci_rule_state_saves_and_continues(rule, tmp_path):
    """save/load and to_dataset/from_dataset keep the whole recursion: a loaded copy continues bit for bit."""
    rng = np.random.default_rng(3)
    rec = OnlineQuantileRecalibrator(levels=LEVELS, rule=rule, gamma=0.02, window=40, gammas=[0.01, 0.05, 0.2])
    rec.fit(_gauss(np.zeros(40), np.ones(40)), rng.normal(size=40))
    rec.update(_gauss(np.zeros(100), np.ones(100)), 2 * rng.normal(size=100))
    rec.save(tmp_path / "rec.nc")
    copies = [calibprob.load(tmp_path / "rec.nc"), OnlineQuantileRecalibrator.from_dataset(rec.to_dataset())]
    more = 2 * np.random.default_rng(4).normal(size=80)
    f = _gauss(np.zeros(80), np.ones(80))
    rec.update(f, more)
    for back in copies:
        assert back.get_params().keys() == rec.get_params().keys() and back.rule == rule and back.window == 40
        back.update(f, more)
        extra = ("expert_alpha_", "expert_weights_", "expert_misses_", "expected_misses_") if rule == "dtaci" else ()
        for name in ("alpha_", "misses_", "n_floored_", "scores_", "hits_", "recalibration_", *extra):
            np.testing.assert_array_equal(getattr(back, name), getattr(rec, name))
        np.testing.assert_array_equal(back.recalibrate(f).calib.quantiles, rec.recalibrate(f).calib.quantiles)


def test_bad_input_names_the_parameter_and_the_fix():
    f, y = _gauss(np.zeros(30), np.ones(30)), np.zeros(30)
    with pytest.raises(ValueError, match=r"rule must be one of 'osd', 'aci', 'dtaci', 'pid'; got 'agaci2'"):
        OnlineQuantileRecalibrator(rule="agaci2").fit(f, y)
    for bad in (0.0, -0.1, 1.0):
        with pytest.raises(ValueError, match=rf"gamma must be a step size in \(0, 1\); got {bad}"):
            OnlineQuantileRecalibrator(rule="aci", gamma=bad).fit(f, y)
    with pytest.raises(ValueError, match=r"levels must come in pairs \(p, 1 - p\); \[0.2, 0.7\] have no mirror"):
        OnlineQuantileRecalibrator(levels=[0.1, 0.2, 0.7, 0.9], rule="aci").fit(f, y)
    with pytest.raises(ValueError, match=r"window=50 is larger than the history: .* 30 outcome\(s\).*window <= 30"):
        OnlineQuantileRecalibrator(levels=LEVELS, rule="aci", window=50).fit(f, y)
    rec = OnlineQuantileRecalibrator(levels=LEVELS, rule="aci", gamma=0.001).fit(f, y)
    with pytest.raises(
        ValueError, match=r"coverage_bound\(\) is the guarantee of rule='osd'.*Use coverage_error_bound"
    ):
        rec.coverage_bound()
    with pytest.raises(ValueError, match=r"coverage_error_bound\(\) is the guarantee of rule='aci'.*coverage_bound"):
        OnlineQuantileRecalibrator().coverage_error_bound()
    timed = f.isel(obs=[0, 1, 2]).assign_coords(time=("obs", [3.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match=r"forecast's time coordinate must be strictly increasing.*out of order"):
        rec.update(timed, [0.0, 0.0, 0.0])
    rec.update(timed.isel(obs=[1, 2]), [0.0, 0.0])
    with pytest.raises(ValueError, match=r"forecast's first time 1.0 is not after the last time already seen, 2.0"):
        rec.update(timed.isel(obs=[1]), [0.0])
    with pytest.warns(calibprob.CalibprobWarning, match=r"bound is vacuous.*after T=2 outcome\(s\) with gamma=0.001"):
        rec.coverage_error_bound()
