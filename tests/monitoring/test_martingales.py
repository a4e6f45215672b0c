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


def test_false_alarm_rate_on_exchangeable_streams_is_within_ville():
    """500 seeded exchangeable streams of 500: P(sup S >= 1/delta) <= delta (Ville), for Jumper and Sleeper/Stayer."""
    rng = np.random.default_rng(11)
    reps, T, delta = 500, 500, 0.05
    scores = rng.normal(size=(reps, T))
    thetas = rng.random((reps, T))
    p = np.stack([conformal_pvalues(scores[r], thetas[r]) for r in range(reps)], axis=1)  # (T, reps)
    jumper = simple_jumper(epsilon_bets(p)).max(axis=0)
    sleeper = sleeper_stayer(step_bets(p, 5)).max(axis=0)
    assert np.mean(jumper >= 1 / delta) <= delta
    assert np.mean(sleeper >= 1 / delta) <= delta
    # and the p-values are uniform (the null the bound is about): KS distance of the pooled values
    pooled = np.sort(p.ravel())
    assert np.max(np.abs(pooled - np.arange(1, pooled.size + 1) / pooled.size)) < 0.01


def test_detection_delay_after_an_abrupt_change():
    """A level shift of 2 sd at t = 300: mean delay of the first alarm over 20 seeded streams (reported)."""
    delays, early = [], 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        y = np.r_[rng.normal(size=300), 2.0 + rng.normal(size=200)]
        out = exchangeability_alarms(calibprob.normal(np.zeros(500), np.ones(500)), y, delta=0.01, seed=seed)
        hits = out["time"].values[out["alarm"].values]
        delays.append(hits[hits >= 300][0] - 300 if (hits >= 300).any() else 200)
        early += bool((hits < 300).any())
    delays = np.array(delays)
    print(f"detection delay (jumper, delta 0.01, shift 2 sd): mean {delays.mean():.1f}, median {np.median(delays)}")
    assert np.median(delays) < 40 and (delays < 200).all()
    assert early <= 1  # Ville: each stream alarms before the change with probability <= 0.01


def test_alarms_over_time_and_reset():
    rng = np.random.default_rng(5)
    y = np.r_[rng.normal(size=200), 3.0 * rng.normal(size=300)]
    t = np.datetime64("2019-01-01") + np.arange(500).astype("timedelta64[D]")
    pred = calibprob.normal(np.zeros(500), np.ones(500)).assign_coords(time=("obs", t))
    for statistic in ("martingale", "cusum", "shiryaev-roberts"):
        # CUSUM / Shiryaev-Roberts promise a mean time to false alarm >= threshold: a larger one here
        c = 100.0 if statistic == "martingale" else 1000.0
        out = exchangeability_alarms(pred, y, statistic=statistic, threshold=c)
        assert out["time"].dtype.kind == "M" and out.attrs["threshold"] == c
        first = np.flatnonzero(out["alarm"].values)[0]
        assert 200 <= first < 280, statistic
        # after a reset the statistic starts again below the threshold
        assert out["statistic"].values[first + 1] < c
    no_reset = exchangeability_alarms(pred, y, delta=0.01, reset=False)
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
