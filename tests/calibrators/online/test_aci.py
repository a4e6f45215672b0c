"""Adaptive conformal inference (Gibbs & Candès 2021): the recursion by hand, split conformal at
the start, and the long-run bound of Proposition 4.1 on adversarial sequences."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import calibprob
from calibprob.calibrators.online.aci import AdaptiveConformalInterval, aci_threshold
from tests.support.streams import adversarial_stream


def _gauss(mu, sigma):
    return calibprob.normal(np.atleast_1d(np.asarray(mu, float)), np.atleast_1d(np.asarray(sigma, float)))


def _hand_threshold(scores, alpha, infinite):
    """The ceil(c (n + 1))-th smallest score, by NumPy's inverted-cdf quantile (not calibprob's ranks)."""
    n = scores.size
    if alpha >= 1:
        return 0.0
    q = (1 - alpha) * (n + 1) / n
    if q > 1:
        return np.inf if infinite == "allow" else float(np.max(scores))
    return float(np.quantile(scores, q, method="inverted_cdf"))


@pytest.mark.parametrize(("window", "infinite"), [(None, "clip"), (25, "allow"), (25, "clip")])
def test_the_recursion_equals_a_hand_loop(window, infinite):
    rng = np.random.default_rng(3)
    y_cal = rng.normal(size=30)
    aci = AdaptiveConformalInterval(confidence_level=[0.8, 0.9], gamma=0.03, window=window, infinite=infinite)
    aci.fit(_gauss(np.zeros(30), np.ones(30)), y_cal)
    scores = list(np.abs(y_cal))
    alpha = 1.0 - np.array([0.8, 0.9])  # alpha_1 = 1 - c, as floats
    for t in range(300):
        mu, y = 0.1 * t / 300, (1.0 + 2.0 * (t > 150)) * rng.normal()  # a drift, then the noise triples
        ds = aci.predict_interval(_gauss(mu, 1.0))
        pool = np.array(scores[-window:] if window else scores)
        thr = np.array([_hand_threshold(pool, a, infinite) for a in alpha])
        np.testing.assert_array_equal(ds["upper"].values[0], mu + thr)
        np.testing.assert_array_equal(ds["lower"].values[0], mu - thr)
        np.testing.assert_array_equal(ds["alpha_t"].values, alpha)
        aci.update(_gauss(mu, 1.0), [y])
        alpha = alpha + 0.03 * ((1.0 - np.array([0.8, 0.9])) - (abs(y - mu) > thr))
        if window:
            scores.append(abs(y - mu))
    np.testing.assert_allclose(aci.alpha_, alpha, rtol=0, atol=1e-12)


def test_before_any_outcome_it_is_split_conformal():
    """At alpha_1 = 1 - c the interval is split conformal's, bit for bit (an independent implementation)."""
    rng = np.random.default_rng(8)
    cal = _gauss(rng.normal(size=60), rng.uniform(0.5, 2.0, size=60))
    y = rng.normal(size=60) * 1.3
    new = _gauss(rng.normal(size=7), rng.uniform(0.5, 2.0, size=7))
    for score in ("absolute", "normalized"):
        aci = AdaptiveConformalInterval(confidence_level=[0.8, 0.9], score=score).fit(cal, y)
        split = calibprob.SplitConformalCalibrator(confidence_level=[0.8, 0.9], score=score).fit(cal, y)
        a, s = aci.predict_interval(new), split.predict_interval(new)
        np.testing.assert_array_equal(a["lower"].values, s["lower"].values)
        np.testing.assert_array_equal(a["upper"].values, s["upper"].values)


@pytest.mark.parametrize("kind", ["abrupt", "drift", "seasonal"])
@pytest.mark.parametrize("infinite", ["allow", "clip"])
def test_long_run_coverage_is_within_the_bound_on_adversarial_sequences(kind, infinite):
    """Proposition 4.1 (and the exact identity it rests on) on streams split conformal fails."""
    rng = np.random.default_rng(21)
    T, gamma = 2000, 0.01
    y = adversarial_stream(kind, T, rng)
    aci = AdaptiveConformalInterval(confidence_level=0.9, gamma=gamma, window=50, infinite=infinite)
    aci.fit(_gauss(np.zeros(50), np.ones(50)), rng.normal(size=50))
    aci.update(_gauss(np.zeros(T), np.ones(T)), y)
    err = aci.misses_[0] / T
    # the identity: mean err - alpha = (alpha_1 - alpha_{T+1}) / (gamma T), whatever the sequence
    assert abs((err - 0.1) - (0.1 - aci.alpha_[0]) / (gamma * T)) < 1e-12
    bound = aci.coverage_error_bound()[0]
    assert abs(err - 0.1) <= bound
    if infinite == "allow" or aci.n_clipped_[0] == 0:
        assert bound == pytest.approx((0.9 + gamma) / (gamma * T))  # the paper's constant: 0.0455 here
    static = np.mean(np.abs(y) > np.sort(np.abs(rng.normal(size=50)))[45])  # split conformal, never adapted
    assert kind == "seasonal" or static > 0.1 + 0.05  # the shift breaks it; ACI holds


def test_bad_input_names_the_parameter_and_the_fix():
    pred = _gauss(np.zeros(20), np.ones(20))
    y = np.zeros(20)
    with pytest.raises(ValueError, match=r"gamma must be a step size in \(0, 1\); got 0"):
        AdaptiveConformalInterval(gamma=0).fit(pred, y)
    with pytest.raises(ValueError, match=r"gamma must be a step size in \(0, 1\); got 1.5"):
        AdaptiveConformalInterval(gamma=1.5).fit(pred, y)
    with pytest.raises(ValueError, match=r"infinite must be one of 'clip', 'allow'; got 'drop'"):
        AdaptiveConformalInterval(infinite="drop").fit(pred, y)
    with pytest.raises(ValueError, match=r"window must be >= 1; got 0"):
        AdaptiveConformalInterval(window=0).fit(pred, y)
    with pytest.raises(ValueError, match=r"score='signed' is signed.*Use score='absolute'"):
        AdaptiveConformalInterval(score="signed").fit(pred, y)
    with pytest.raises(ValueError, match=r"confidence_level"):
        AdaptiveConformalInterval(confidence_level=1.2).fit(pred, y)
    with pytest.raises(ValueError, match=r"y_cal"):
        AdaptiveConformalInterval().fit(pred, np.r_[np.nan, y[1:]])
    with pytest.raises(calibprob.NotFittedError, match=r"fit"):
        AdaptiveConformalInterval().predict_interval(pred)
    aci = AdaptiveConformalInterval().fit(pred, y)
    with pytest.raises(ValueError, match=r"\by\b"):
        aci.update(_gauss([0.0, 1.0], [1.0, 1.0]), [0.0])


def test_levels_are_independent_and_a_pymc_predictive_goes_straight_in():
    """Each level runs its own recursion (asking 0.9 too changes nothing at 0.8); draws with PyMC's obs_id
    and a y DataArray along obs_id are read as any predictive."""
    rng = np.random.default_rng(4)
    n, T = 40, 120
    draws = rng.normal(size=(2, 100, n)) + np.linspace(-1, 1, n)
    pred_cal = calibprob.from_draws(xr.DataArray(draws, dims=("chain", "draw", "obs_id")))
    y_cal = xr.DataArray(np.linspace(-1, 1, n) + 1.5 * rng.normal(size=n), dims="obs_id")
    one = AdaptiveConformalInterval(confidence_level=0.8, gamma=0.05).fit(pred_cal, y_cal)
    two = AdaptiveConformalInterval(confidence_level=[0.8, 0.9], gamma=0.05).fit(pred_cal, y_cal)
    for t in range(T):
        f, y_t = _gauss(0.0, 1.0), [(1.0 + (t > 60)) * rng.normal()]
        a, b = one.predict_interval(f), two.predict_interval(f)  # a scalar constructor level: no dimension
        np.testing.assert_array_equal(a["upper"].values, b["upper"].sel(confidence_level=0.8).values)
        one.update(f, y_t)
        two.update(f, y_t)
    assert one.alpha_[0] == two.alpha_[0] and one.misses_[0] == two.misses_[0]


@pytest.mark.parametrize("scale", [1e-200, 1e-8, 1.0, 1e8, 1e200])
def test_intervals_move_with_the_data_from_1e_minus_200_to_1e200(scale):
    """Scale and shift equivariance: y -> a y + b moves every interval the same way; the levels' path is unchanged."""
    rng = np.random.default_rng(9)
    mu, y = rng.normal(size=60), rng.normal(size=60) * 1.4
    runs = []
    for a, b in ((1.0, 0.0), (scale, 3.0 * scale)):
        aci = AdaptiveConformalInterval(confidence_level=[0.5, 0.9], gamma=0.05, window=30)
        aci.fit(_gauss(a * mu[:30] + b, a * np.ones(30)), a * y[:30] + b)
        aci.update(_gauss(a * mu[30:50] + b, a * np.ones(20)), a * y[30:50] + b)
        ds = aci.predict_interval(_gauss(a * mu[50:] + b, a * np.ones(10)))
        assert ds.sizes["obs"] == 10 and np.isfinite(ds["lower"].values).all()
        runs.append((ds, aci.alpha_.copy()))
    (ref, alpha_ref), (got, alpha_got) = runs
    np.testing.assert_array_equal(alpha_got, alpha_ref)
    for end in ("lower", "upper"):
        np.testing.assert_allclose((got[end].values - 3.0 * scale) / scale, ref[end].values, rtol=1e-9, atol=1e-9)


def _stream_pair(aci, rng, T, *, mu=0.0, scale=2.0):
    """Feed T outcomes one by one; return the issued (lower, upper) per step, shape (T, L, 2)."""
    out = []
    for _ in range(T):
        f = _gauss(mu, 1.0)
        ds = aci.predict_interval(f)
        out.append(np.stack([ds["lower"].values[0], ds["upper"].values[0]], axis=-1))
        aci.update(f, [scale * rng.normal()])
    return np.asarray(out)


@pytest.mark.parametrize(("window", "infinite"), [(None, "allow"), (20, "clip")])
def test_save_load_mid_stream_continues_the_same_recursion(window, infinite, tmp_path):
    """The whole state is saved: levels alpha_t, the score window, the counters and the last time. A copy loaded
    mid-stream then continues bit for bit as the original, step by step."""
    rng = np.random.default_rng(12)
    aci = AdaptiveConformalInterval(confidence_level=[0.8, 0.9], gamma=0.05, window=window, infinite=infinite)
    aci.fit(_gauss(np.zeros(40), np.ones(40)), rng.normal(size=40))
    timed = _gauss(np.zeros(60), np.ones(60)).assign_coords(time=("obs", np.arange(60.0)))
    aci.update(timed, 2.5 * rng.normal(size=60))
    assert aci.misses_.sum() > 0 and aci.n_updates_ == 60 and not np.allclose(aci.alpha_, aci.alpha_start_)
    path = tmp_path / "aci.nc"
    aci.save(path)
    back = calibprob.load(path)
    assert type(back) is AdaptiveConformalInterval and back.get_params() == aci.get_params()
    for name in ("alpha_", "alpha_start_", "misses_", "n_clipped_", "scores_", "levels_", "last_time_"):
        np.testing.assert_array_equal(getattr(back, name), getattr(aci, name))
    assert back.n_updates_ == aci.n_updates_ and type(back.score_) is type(aci.score_)
    a = _stream_pair(aci, np.random.default_rng(5), 80)
    b = _stream_pair(back, np.random.default_rng(5), 80)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(back.alpha_, aci.alpha_)
    np.testing.assert_array_equal(back.coverage_error_bound(), aci.coverage_error_bound())
    with pytest.raises(ValueError, match=r"first time 0.0 is not after the last time already seen, 59.0"):
        back.update(timed.isel(obs=[0]), [0.0])  # the loaded copy remembers where the stream stopped


def test_groups_run_one_recursion_per_group():
    """fit/update/predict_interval with groups= equal one ACI per group fed that group's rows, bit for bit."""
    rng = np.random.default_rng(6)
    g_cal = np.repeat(["a", "b"], 30)
    y_cal = rng.normal(size=60) * np.where(g_cal == "a", 1.0, 3.0)
    cal = _gauss(np.zeros(60), np.ones(60))
    grouped = AdaptiveConformalInterval(confidence_level=[0.8], gamma=0.05).fit(cal, y_cal, groups=g_cal)
    alone = {k: AdaptiveConformalInterval(confidence_level=[0.8], gamma=0.05) for k in "ab"}
    for k, est in alone.items():
        est.fit(cal.isel(obs=np.flatnonzero(g_cal == k)), y_cal[g_cal == k])
    for _ in range(40):
        g = np.array(["a", "b"])
        f = _gauss([0.0, 0.0], [1.0, 1.0])
        iv = grouped.predict_interval(f, groups=g)
        for i, k in enumerate(g):
            own = alone[k].predict_interval(f.isel(obs=[i]))
            assert iv["upper"].values[i, 0] == own["upper"].values[0, 0]
        y = rng.normal(size=2) * np.array([1.0, 3.0]) * 1.5
        grouped.update(f, y, groups=g)
        for i, k in enumerate(g):
            alone[k].update(f.isel(obs=[i]), y[i : i + 1])
    for k, est in zip(grouped.mondrian_.groups_, grouped.mondrian_.calibrators_):
        np.testing.assert_array_equal(est.alpha_, alone[str(k)].alpha_)
    with pytest.raises(ValueError, match=r"fitted with groups.*fit\(pred_cal, y_cal, groups=\.\.\.\)"):
        grouped.calibrate(cal, y_cal)


def test_a_subset_of_levels_and_a_scalar_level():
    rng = np.random.default_rng(2)
    aci = AdaptiveConformalInterval(confidence_level=[0.5, 0.8, 0.9], gamma=0.05)
    aci.fit(_gauss(np.zeros(50), np.ones(50)), rng.normal(size=50))
    aci.update(_gauss(np.zeros(30), np.ones(30)), 2 * rng.normal(size=30))
    f = _gauss(np.zeros(3), np.ones(3))
    full = aci.predict_interval(f)
    sub = aci.predict_interval(f, [0.9, 0.5])
    np.testing.assert_array_equal(sub["upper"].sel(confidence_level=0.9), full["upper"].sel(confidence_level=0.9))
    one = aci.predict_interval(f, 0.8)
    assert "confidence_level" not in one.dims and one["upper"].shape == (3,)
    xr.testing.assert_identical(aci.predict(f), full)
    with pytest.raises(ValueError, match=r"confidence_level=\[0.95\] was not fitted.*refit with confidence_level="):
        aci.predict_interval(f, [0.8, 0.95])


def test_stream_order_window_and_vacuous_bound_are_checked():
    """Bad input of the online loop: unordered or duplicated times, outcomes given out of order, a window
    larger than the history, and a step size that leaves the long-run bound vacuous (warned)."""
    rng = np.random.default_rng(1)
    cal, y_cal = _gauss(np.zeros(30), np.ones(30)), rng.normal(size=30)
    aci = AdaptiveConformalInterval(gamma=0.05).fit(cal, y_cal)

    def timed(times):
        return _gauss(np.zeros(len(times)), np.ones(len(times))).assign_coords(time=("obs", np.asarray(times)))

    with pytest.raises(ValueError, match=r"time coordinate must be strictly increasing.*rows 1 and 2 are out of order"):
        aci.update(timed([1.0, 3.0, 2.0]), [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"rows 0 and 1 are duplicated.*drop duplicated times"):
        aci.update(timed([1.0, 1.0]), [0.0, 0.0])
    assert aci.n_updates_ == 0  # a refused batch moves nothing
    days = np.array(["2019-01-01", "2019-01-02"], dtype="datetime64[ns]")
    aci.update(timed(days), [0.0, 0.0])
    with pytest.raises(ValueError, match=r"first time 2019-01-02.* is not after the last time already seen"):
        aci.update(timed(days[1:]), [0.0])
    with pytest.raises(ValueError, match=r"time coordinate is float64 but the stream so far was timed by datetime64"):
        aci.update(timed([5.0]), [0.0])
    with pytest.raises(ValueError, match=r"window=40 is larger than the history: pred_cal holds 30.*window <= 30"):
        AdaptiveConformalInterval(window=40).fit(cal, y_cal)
    small = AdaptiveConformalInterval(gamma=0.001).fit(cal, y_cal)
    small.update(_gauss(np.zeros(100), np.ones(100)), rng.normal(size=100))
    with pytest.warns(
        calibprob.CalibprobWarning, match=r"bound is vacuous: 9.01 >= 0.9 .*pass gamma > 0.0101 for T=100"
    ):
        small.coverage_error_bound()


def test_a_level_too_small_for_its_complement_is_the_whole_line():
    """0 < alpha_t < 2**-54: 1 - alpha_t rounds to 1.0, which is no confidence level; the threshold is the paper's
    infinite one (k = n + 1), as at alpha_t <= 0 (a weighted mean of levels can land there)."""
    R = np.arange(1.0, 10.0)
    assert aci_threshold(R, 1e-17, infinite="allow") == (np.inf, False)
    assert aci_threshold(R, 1e-17) == (9.0, True)
    assert aci_threshold(R, 2.0**-52, infinite="allow") == (np.inf, False)  # 1 - alpha < 1: the rank is n + 1
