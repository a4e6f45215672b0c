"""Conformal test martingales: equal to crepes' and MAPIE's (stored references), Ville's bound, delays, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import calibprob
from calibprob.monitoring import (
    ExchangeabilityMonitor,
    conformal_pvalues,
    cusum,
    epsilon_bets,
    exchangeability_alarms,
    plugin_martingale,
    shiryaev_roberts,
    simple_jumper,
    sleeper_stayer,
    step_bets,
)

REF = np.load(Path(__file__).parents[1] / "data" / "martingale_reference.npz")


def test_pvalues_equal_crepes_semi_online_pvalues():
    np.testing.assert_allclose(conformal_pvalues(REF["scores"], REF["thetas"]), REF["pvalues"], rtol=0, atol=1e-15)


def test_pvalues_equal_the_definition_by_brute_force():
    rng = np.random.default_rng(3)
    s = rng.integers(0, 5, 80).astype(float)  # ties on purpose
    th = rng.random(80)
    hist = rng.integers(0, 5, 7).astype(float)
    full = np.r_[hist, s]
    brute = [
        (np.sum(full[: 7 + t] > s[t]) + th[t] * (np.sum(full[: 7 + t] == s[t]) + 1)) / (7 + t + 1) for t in range(80)
    ]
    np.testing.assert_allclose(conformal_pvalues(s, th, history=hist), brute, rtol=1e-14)


def test_martingales_equal_crepes_and_mapie():
    p = REF["pvalues"]
    np.testing.assert_allclose(simple_jumper(epsilon_bets(p)), REF["crepes_jumper"], rtol=1e-10)
    np.testing.assert_allclose(sleeper_stayer(step_bets(p)), REF["crepes_sleeper_stayer"], rtol=1e-10)
    np.testing.assert_allclose(
        simple_jumper(epsilon_bets(p, (-1, 0, 1)), jump=0.05), REF["crepes_jumper_j05_e3"], rtol=1e-10
    )
    np.testing.assert_allclose(simple_jumper(epsilon_bets(p, (-1, 0, 1))), REF["mapie_jumper"], rtol=1e-10)
    # the plug-in is O(T^2): its first 350 steps (250 past the burn-in) keep the default suite fast
    np.testing.assert_allclose(plugin_martingale(p[:350], burn_in=100), REF["mapie_plugin"][:350], rtol=1e-8)


@pytest.mark.parametrize("kind", ["jumper", "sleeper-stayer", "plugin"])
def test_the_streaming_monitor_follows_the_batch_martingale(kind):
    p = REF["pvalues"][:200]
    batch = {
        "jumper": simple_jumper(epsilon_bets(p)),
        "sleeper-stayer": sleeper_stayer(step_bets(p)),
        "plugin": plugin_martingale(p, burn_in=100),
    }[kind]
    mon = ExchangeabilityMonitor(martingale=kind, delta=1e-12, reset=False)
    stored = iter(p)
    mon._pvalue = lambda score: next(stored)  # feed the stored p-values instead of ranking scores
    path = [mon.step(0.0) for _ in p]
    np.testing.assert_allclose([r[1] for r in path], batch, rtol=1e-10)


def test_cusum_and_shiryaev_roberts_equal_their_definitions():
    rng = np.random.default_rng(0)
    S = simple_jumper(epsilon_bets(rng.random(60) ** 2))
    S0 = np.r_[1.0, S]
    np.testing.assert_allclose(cusum(S), [S0[t + 1] / S0[: t + 1].min() for t in range(60)], rtol=1e-12)
    np.testing.assert_allclose(shiryaev_roberts(S), [np.sum(S0[t + 1] / S0[: t + 1]) for t in range(60)], rtol=1e-12)


@pytest.mark.seeded(11)
def test_false_alarm_rate_on_exchangeable_streams_is_within_ville(seed, record_property):
    """500 seeded exchangeable streams of 500: P(sup S >= 1/delta) <= delta (Ville), for Jumper and Sleeper/Stayer
    (the streams' seed from the seed sweep, 11 in the default run)."""
    rng = np.random.default_rng(seed)
    reps, T, delta = 500, 500, 0.05
    scores = rng.normal(size=(reps, T))
    thetas = rng.random((reps, T))
    p = np.stack([conformal_pvalues(scores[r], thetas[r]) for r in range(reps)], axis=1)  # (T, reps)
    jumper = simple_jumper(epsilon_bets(p)).max(axis=0)
    sleeper = sleeper_stayer(step_bets(p, 5)).max(axis=0)
    pooled = np.sort(p.ravel())
    record_property("jumper_false_alarms", np.mean(jumper >= 1 / delta))
    record_property("sleeper_false_alarms", np.mean(sleeper >= 1 / delta))
    record_property("ks_distance", np.max(np.abs(pooled - np.arange(1, pooled.size + 1) / pooled.size)))
    # Ville bounds the probability; the share of 500 streams adds its binomial sd, sqrt(delta (1 - delta) / 500) =
    # 0.0097: the sweep (seeds 0..19) saw the Jumper's share reach delta itself (0.05), so 3 sds are allowed
    allowed = delta + 3 * np.sqrt(delta * (1 - delta) / reps)
    assert np.mean(jumper >= 1 / delta) <= allowed
    assert np.mean(sleeper >= 1 / delta) <= allowed
    # and the p-values are uniform (the null the bound is about): KS distance of the pooled values
    assert np.max(np.abs(pooled - np.arange(1, pooled.size + 1) / pooled.size)) < 0.01


@pytest.mark.seeded(0)
def test_detection_delay_after_an_abrupt_change(seed, record_property):
    """A level shift of 2 sd at t = 300: mean delay of the first alarm over 20 seeded streams (reported). The seed
    sweep's ``seed`` picks the block of 20 streams, seeds 20 seed .. 20 seed + 19 (0..19 in the default run)."""
    delays, early = [], 0
    for r in range(20 * seed, 20 * seed + 20):
        rng = np.random.default_rng(r)
        y = np.r_[rng.normal(size=300), 2.0 + rng.normal(size=200)]
        out = exchangeability_alarms(calibprob.normal(np.zeros(500), np.ones(500)), y, delta=0.01, seed=r)
        hits = out["time"].values[out["alarm"].values]
        delays.append(hits[hits >= 300][0] - 300 if (hits >= 300).any() else 200)
        early += bool((hits < 300).any())
    delays = np.array(delays)
    print(f"detection delay (jumper, delta 0.01, shift 2 sd): mean {delays.mean():.1f}, median {np.median(delays)}")
    record_property("median_delay", np.median(delays))
    record_property("max_delay", delays.max())
    record_property("early_alarms", early)
    assert np.median(delays) < 40 and (delays < 200).all()
    assert early <= 1  # Ville: each stream alarms before the change with probability <= 0.01


@pytest.mark.seeded(5)
def test_alarms_over_time_and_reset(seed, record_property):
    """A variance change at t = 200: each statistic's first alarm after it comes within 100 steps (the stream's seed
    from the seed sweep, 5 in the default run)."""
    rng = np.random.default_rng(seed)
    y = np.r_[rng.normal(size=200), 3.0 * rng.normal(size=300)]
    t = np.datetime64("2019-01-01") + np.arange(500).astype("timedelta64[D]")
    pred = calibprob.normal(np.zeros(500), np.ones(500)).assign_coords(time=("obs", t))
    for statistic in ("martingale", "cusum", "shiryaev-roberts"):
        # CUSUM / Shiryaev-Roberts promise a mean time to false alarm >= threshold: a larger one here
        c = 100.0 if statistic == "martingale" else 1000.0
        out = exchangeability_alarms(pred, y, statistic=statistic, threshold=c)
        assert out["time"].dtype.kind == "M" and out.attrs["threshold"] == c
        alarms = np.flatnonzero(out["alarm"].values)
        first = alarms[alarms >= 200][0]
        record_property(f"first_alarm_{statistic}", first)
        record_property(f"alarms_before_change_{statistic}", int((alarms < 200).sum()))
        # the first alarm after the change within 100 steps (the sweep's worst, seeds 0..19: CUSUM at 285; the old
        # window [200, 280) broke at seeds 3 and 19)
        assert first < 300, statistic
        # before the change: the martingale alarms with probability <= 1/100 (Ville); CUSUM / Shiryaev-Roberts only
        # promise a mean time to false alarm >= 1000, so one of them may alarm in 200 steps (Shiryaev-Roberts did, at
        # t = 181, seed 19)
        if statistic == "martingale":
            assert alarms[0] >= 200
        # after a reset the statistic starts again below the threshold
        assert out["statistic"].values[first + 1] < c
    no_reset = exchangeability_alarms(pred, y, delta=0.01, reset=False)
    record_property("alarm_share_no_reset", no_reset["alarm"].values[first:].mean())
    assert no_reset["alarm"].values[first:].mean() > 0.5


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"delta": 0.0}, ValueError, r"delta must be in \(0, 1\); got 0.0"),
        ({"martingale": "kelly"}, ValueError, r"martingale must be one of 'jumper'"),
        ({"statistic": "page"}, ValueError, r"statistic must be one of 'martingale', 'cusum'"),
        ({"threshold": 0.5}, ValueError, r"threshold must be a finite number > 1.*got 0.5"),
        ({"epsilons": [-3, 1]}, ValueError, r"epsilons must be a non-empty sequence of numbers in \(-2, 2\)"),
        ({"jump": 1.5}, ValueError, r"jump must be in \(0, 1\); got 1.5"),
        ({"grid": 1}, ValueError, r"grid must be >= 2; got 1"),
    ],
)
def test_bad_monitor_options_are_refused(kwargs, err, match):
    with pytest.raises(err, match=match):
        ExchangeabilityMonitor(**kwargs)


def test_bad_streams_are_refused():
    with pytest.raises(ValueError, match=r"rows 1 and 2 are out of order"):
        exchangeability_alarms(scores=[1.0, 2.0, 3.0], times=[0, 2, 1])
    with pytest.raises(TypeError, match=r"needs a stream: pred and y"):
        exchangeability_alarms()
    with pytest.raises(ValueError, match=r"scores must be finite"):
        exchangeability_alarms(scores=[1.0, np.nan])
    pred = calibprob.normal(np.zeros(3), np.ones(3)).assign_coords(time=("obs", [0, 1, 1]))
    with pytest.raises(ValueError, match=r"rows 1 and 2 are duplicated"):
        exchangeability_alarms(pred, np.zeros(3))
