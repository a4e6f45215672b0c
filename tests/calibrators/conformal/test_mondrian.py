"""Mondrian (group-conditional) calibration: calibprob.Mondrian and every post-processor's groups=.

Independent references: split conformal / CPS run separately on each group (bitwise), the
minimum group sizes by brute force over n in exact rational arithmetic, the group-conditional
coverage guarantee c <= P(Y in C | group) < c + 1/(n_k + 1) over seeded repetitions (3 SE).
"""

from __future__ import annotations

import functools
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

import calibprob
from calibprob.calibrators.conformal import (
    ConformalPredictiveSystem,
    Mondrian,
    SplitConformalCalibrator,
    SplitConformalRegressor,
    min_group_size,
    min_group_size_for_level,
)
from calibprob.calibrators.conformal._intervals import check_enough_points
from calibprob.predictive import CalibprobWarning

LEVELS = sorted({round(0.5 + 0.01 * i, 2) for i in range(50)} | {0.995, 0.999, 0.8, 0.9, 0.95, 0.975})


def _problem(n, rng, scales=(1.0, 3.0, 0.5)):
    g = rng.integers(0, len(scales), size=n)
    mu = rng.normal(size=n)
    sd = rng.uniform(0.5, 1.5, size=n)
    y = mu + np.asarray(scales)[g] * sd * rng.standard_t(5, size=n)
    return calibprob.normal(mu, sd), y, g


# ---------------------------------------------------------------------------
# minimum group sizes: exact, against brute force
# ---------------------------------------------------------------------------


def _brute_symmetric(c: Fraction) -> int:
    n = 1
    while math.floor((1 - c) * (n + 1)) < 1:
        n += 1
    return n


def _brute_two_sided(c: Fraction) -> int:
    a = (1 - c) / 2
    n = 1
    while math.floor(a * (n + 1)) < 1 or math.ceil((1 - a) * (n + 1)) > n:
        n += 1
    return n


@pytest.mark.parametrize("c", LEVELS)
def test_min_group_size_equals_brute_force(c):
    exact = Fraction(str(c))
    assert min_group_size(c) == _brute_symmetric(exact)
    assert min_group_size(c, sides=2) == _brute_two_sided(exact)
    # and it is the size at which the calibrators' own rank check starts to pass
    for sides, n_min in ((1, min_group_size(c)), (2, min_group_size(c, sides=2))):
        check_enough_points(c, n_min, sides=sides)
        if n_min > 1:
            with pytest.raises(ValueError, match="too few calibration points"):
                check_enough_points(c, n_min - 1, sides=sides)


def test_min_group_size_table_and_the_float_pitfall():
    assert [min_group_size(c) for c in (0.8, 0.9, 0.95, 0.99)] == [4, 9, 19, 99]
    assert [min_group_size(c, sides=2) for c in (0.8, 0.9, 0.95)] == [9, 19, 39]
    # crepes' int((1 - c) * (n + 1)) in floating point refuses the exact minimum at 0.8 and 0.9
    assert int((1 - 0.8) * (4 + 1)) == 0 and int((1 - 0.9) * (9 + 1)) == 0


def test_cps_ranks_are_exact_where_a_float_rule_falls_short():
    # 39 scores at c = 0.9: (alpha/2)(n+1) = 2 exactly, so the ends are the 2nd and 38th smallest
    # (crepes' predict_int computes (1 - 0.9)/2*100 = 4.999999999999999 and takes the 1st)
    rng = np.random.default_rng(8)
    y = rng.normal(size=39)
    cps = ConformalPredictiveSystem(score="signed-absolute").fit(calibprob.normal(np.zeros(39), np.ones(39)), y)
    iv = cps.predict_interval(calibprob.normal([0.0], [1.0]), 0.9)
    s = np.sort(y)
    assert float(iv["lower"][0]) == s[1] and float(iv["upper"][0]) == s[37]
    assert int((1 - 0.9) / 2 * 100 / 100 * 40) - 1 == 0  # the float rule's 0-based index: the 1st


@pytest.mark.parametrize("p", [0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99])
def test_min_group_size_for_level_equals_brute_force(p):
    e = Fraction(str(p))
    n = 1
    while not (1 <= e * (n + 1) <= n):
        n += 1
    assert min_group_size_for_level(p) == n
    c = abs(2 * e - 1)
    assert min_group_size_for_level(p, symmetric=True) == (1 if c == 0 else _brute_symmetric(c))


def test_min_group_size_bad_input():
    with pytest.raises(ValueError, match=r"confidence_level must be in \(0, 1\); got 1.0"):
        min_group_size(1.0)
    with pytest.raises(ValueError, match="sides must be 1"):
        min_group_size(0.9, sides=3)


# ---------------------------------------------------------------------------
# bitwise: Mondrian = the calibrator run separately on each group
# ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _split_problem(seed):
    """3 000 draws of ``_problem``, halved into calibration and test (the seed sweep of the grouped test varies it)."""
    rng = np.random.default_rng(seed)
    base, y, g = _problem(3000, rng)
    return {
        "cal": (base.isel(obs=slice(0, 1500)), y[:1500], g[:1500]),
        "test": (base.isel(obs=slice(1500, None)), y[1500:], g[1500:]),
    }


@pytest.fixture(scope="module")
def data():
    return _split_problem(30)


MAKERS = {
    "split-absolute": lambda: SplitConformalCalibrator(),
    "split-normalized": lambda: SplitConformalCalibrator(score="normalized", confidence_level=[0.8, 0.9]),
    "split-signed": lambda: SplitConformalCalibrator(score="signed"),
    "cps": lambda: ConformalPredictiveSystem(),
}


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_mondrian_equals_split_conformal_per_group_bitwise(name, data):
    (pc, yc, gc), (pt, _, gt) = data["cal"], data["test"]
    m = Mondrian(MAKERS[name]()).fit(pc, yc, groups=gc)
    via_class = MAKERS[name]().fit(pc, yc, groups=gc)
    assert via_class.predict_interval(pt, groups=gt).identical(m.predict_interval(pt, groups=gt))
    levels = list(m.confidence_levels_)
    iv, q = m.predict_interval(pt, levels, groups=gt), m.predict(pt, groups=gt)
    assert via_class.predict(pt, groups=gt).identical(q)
    for k in np.unique(gc):
        rc, rt = np.flatnonzero(gc == k), np.flatnonzero(gt == k)
        alone = MAKERS[name]().fit(pc.isel(obs=rc), yc[rc])
        ref = alone.predict_interval(pt.isel(obs=rt), confidence_level=levels)
        np.testing.assert_array_equal(iv["lower"].values[rt], ref["lower"].values)
        np.testing.assert_array_equal(iv["upper"].values[rt], ref["upper"].values)
        np.testing.assert_array_equal(q.calib.quantiles[rt], alone.predict(pt.isel(obs=rt)).calib.quantiles)
    np.testing.assert_array_equal(q["group"].values, gt)
    np.testing.assert_array_equal(q["obs"].values, pt["obs"].values)


def test_model_aware_split_conformal_per_group_bitwise():
    rng = np.random.default_rng(5)
    X = rng.uniform(-2, 2, size=(1600, 1))
    g = (X[:, 0] > 0.5).astype(int)
    y = np.sin(X[:, 0]) + np.where(g == 1, 0.3, 1.0) * rng.normal(size=1600)

    def ols(Xt, yt, Xn):
        A = np.c_[np.ones(len(Xt)), Xt]
        return np.c_[np.ones(len(Xn)), Xn] @ np.linalg.lstsq(A, yt, rcond=None)[0]

    tr, cal, te = slice(0, 400), np.arange(400, 1000), np.arange(1000, 1600)
    grouped = SplitConformalRegressor(estimator=ols).fit(X[tr], y[tr]).calibrate(X[cal], y[cal], groups=g[cal])
    iv = grouped.predict_interval(X[te], groups=g[te])
    for k in (0, 1):
        rc, rt = cal[g[cal] == k], te[g[te] == k]
        alone = SplitConformalRegressor(estimator=ols).fit(X[tr], y[tr]).calibrate(X[rc], y[rc])
        ref = alone.predict_interval(X[rt])
        np.testing.assert_array_equal(iv["lower"].values[rt - 1000], ref["lower"].values)
        np.testing.assert_array_equal(iv["upper"].values[rt - 1000], ref["upper"].values)
    with pytest.raises(ValueError, match="groups is required"):
        grouped.predict_interval(X[te])
    with pytest.raises(ValueError, match=r"groups= belongs to calibrate\(X_cal, y_cal, groups=...\)"):
        SplitConformalRegressor(estimator=ols).fit(X[tr], y[tr], groups=g[tr])


@pytest.mark.parametrize(
    "make",
    [
        lambda: calibprob.IsotonicRecalibrator(),
        lambda: calibprob.VovkRecalibrator(random_state=0),
        lambda: calibprob.MarxRecalibrator(),
        lambda: calibprob.VarianceScalingRecalibrator(),
        lambda: calibprob.OnlineQuantileRecalibrator(),
    ],
    ids=["isotonic", "vovk", "marx", "variance-scaling", "online"],
)
@pytest.mark.seeded(30)
def test_every_post_processor_takes_groups(make, seed, record_property):
    """Grouped = each group alone, bitwise; each group's 90 % coverage within 4 sds (the draw's seed from the seed
    sweep, 30 in the default run)."""
    data = _split_problem(seed)
    (pc, yc, gc), (pt, yt, gt) = data["cal"], data["test"]
    worst = 0.0
    pc, pt = pc.assign_coords(group=("obs", gc)), pt.assign_coords(group=("obs", gt))
    cal = make().fit(pc, yc, groups="group")
    pred = cal.predict(pt, levels=[0.05, 0.5, 0.95])  # groups from pred's coordinate
    for k in np.unique(gc):
        rc, rt = np.flatnonzero(gc == k), np.flatnonzero(gt == k)
        alone = make().fit(pc.isel(obs=rc), yc[rc]).predict(pt.isel(obs=rt), levels=[0.05, 0.5, 0.95])
        np.testing.assert_array_equal(pred.calib.quantiles[rt], alone.calib.quantiles)
        if not isinstance(cal, calibprob.OnlineQuantileRecalibrator):
            hit = (yt[rt] >= alone.calib.quantiles[:, 0]) & (yt[rt] <= alone.calib.quantiles[:, 2])
            # the coverage's sd given the data: the test points' binomial sd and the calibration set's own (the
            # group's fitted map moves with its ~500 calibration points as much as its ~500 test points vary); the
            # test points' sd alone (4 sd) broke at 4 of 100 (seed, post-processor) pairs of the seed sweep
            se = np.sqrt(0.09 * (1 / rt.size + 1 / rc.size))
            worst = max(worst, abs(hit.mean() - 0.9) / se)
    record_property("coverage_error_se", worst)
    assert worst < 4  # seeds 0..19, all five post-processors: worst 3.2 sds
    np.testing.assert_array_equal(pred["group"].values, gt)
    # the ungrouped path keeps a group coordinate it is given
    plain = make().fit(pc, yc).predict(pt, levels=[0.05, 0.5, 0.95])
    np.testing.assert_array_equal(plain["group"].values, gt)


def test_without_groups_nothing_changes(data):
    (pc, yc, _), (pt, _, _) = data["cal"], data["test"]
    a = SplitConformalCalibrator().fit(pc, yc)
    assert a.mondrian_ is None
    assert a.predict(pt).identical(SplitConformalCalibrator().fit(pc, yc).predict(pt))
    assert "group" not in a.predict(pt).coords


# ---------------------------------------------------------------------------
# guarantee: every group that meets the minimum size covers (3 SE), over repetitions
# ---------------------------------------------------------------------------


def _coverage_by_group(make, sizes, reps, c, seed):
    rng = np.random.default_rng(seed)
    hits = np.zeros((reps, len(sizes)))
    m_test = 40
    for r in range(reps):
        g_cal = np.repeat(np.arange(len(sizes)), sizes)
        g_te = np.repeat(np.arange(len(sizes)), m_test)
        g = np.concatenate([g_cal, g_te])
        scale = np.array([1.0, 4.0, 0.3, 2.0])[g]
        mu = rng.normal(size=g.size)
        y = mu + scale * rng.standard_t(4, size=g.size)
        base = calibprob.normal(mu, np.ones(g.size))
        n = g_cal.size
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CalibprobWarning)
            m = Mondrian(make()).fit(base.isel(obs=slice(0, n)), y[:n], groups=g_cal)
        iv = m.predict_interval(base.isel(obs=slice(n, None)), confidence_level=c, groups=g_te)
        inside = (y[n:] >= iv["lower"].values) & (y[n:] <= iv["upper"].values)
        hits[r] = [inside[g_te == k].mean() for k in range(len(sizes))]
    return hits


@pytest.mark.parametrize(
    "make, sides", [(SplitConformalCalibrator, 1), (ConformalPredictiveSystem, 2)], ids=["split", "cps"]
)
@pytest.mark.seeded(11)
def test_mondrian_covers_in_every_group_meeting_the_minimum(make, sides, seed, record_property):
    c, sizes, reps = 0.9, (5, 19, 40, 150), 150
    hits = _coverage_by_group(make, sizes, reps, c, seed=seed + sides)
    need = min_group_size(c, sides=sides)
    for k, n_k in enumerate(sizes):
        mean, se = hits[:, k].mean(), hits[:, k].std(ddof=1) / np.sqrt(reps)
        if n_k < need:
            assert mean == 1.0  # (-inf, inf): the explicit infinite interval
            continue
        record_property(f"se_below_c_n{n_k}", float((c - mean) / se))
        record_property(f"se_above_bound_n{n_k}", float((mean - c - sides / (n_k + 1)) / se))
        # c <= coverage < c + 1/(n_k + 1) (split; the CPS' two tails: < c + 2/(n_k + 1))
        assert mean >= c - 3 * se, (k, n_k, mean, se)
        assert mean <= c + sides / (n_k + 1) + 3 * se, (k, n_k, mean, se)


@pytest.mark.slow
@pytest.mark.parametrize("make, sides", [(SplitConformalCalibrator, 1), (ConformalPredictiveSystem, 2)])
def test_mondrian_covers_in_every_group_many_repetitions(make, sides):
    c, sizes, reps = 0.8, (9, 10, 25, 60), 2000
    hits = _coverage_by_group(make, sizes, reps, c, seed=99 + sides)
    need = min_group_size(c, sides=sides)
    for k, n_k in enumerate(sizes):
        mean, se = hits[:, k].mean(), hits[:, k].std(ddof=1) / np.sqrt(reps)
        if n_k < need:
            assert mean == 1.0
        else:
            assert c - 3 * se <= mean <= c + sides / (n_k + 1) + 3 * se, (k, n_k, mean, se)


# ---------------------------------------------------------------------------
# small and unseen groups, the fallback, bad input
# ---------------------------------------------------------------------------


def test_small_group_warns_and_gets_infinite_bounds(data):
    (pc, yc, gc), (pt, _, gt) = data["cal"], data["test"]
    gc, gt = gc.copy(), gt.copy()
    gc[:5], gt[:3] = 7, 7
    with pytest.warns(CalibprobWarning, match=r"group 7 has 5 calibration point\(s\).*0.9 needs 9.*\(-inf, inf\)"):
        m = Mondrian(SplitConformalCalibrator()).fit(pc, yc, groups=gc)
    iv = m.predict_interval(pt, groups=gt)
    assert np.all(iv["lower"].values[:3] == -np.inf) and np.all(iv["upper"].values[:3] == np.inf)
    assert np.isfinite(iv["lower"].values[3:]).all()
    # at a level the group resolves (c = 0.8 needs 4 points) the bounds are finite
    iv2 = m.predict_interval(pt, confidence_level=[0.8, 0.9], groups=gt)
    assert np.isfinite(iv2["lower"].values[:3, 0]).all() and np.isinf(iv2["lower"].values[:3, 1]).all()
    # the quantile function: every group on the big groups' grid; group 7's own calibrator (fitted at
    # the top level 5 points resolve, 1 - 1/6) at the levels it resolves, |2p - 1| <= 5/6, its reach
    q = m.predict(pt, groups=gt)
    lv = q["level"].values
    assert lv.min() < 1 / 12 and lv.max() > 11 / 12  # the big groups keep their own outer quantiles
    assert q["reach"].values[0] == float(1 - Fraction(1, 6))
    alone = SplitConformalCalibrator(confidence_level=float(1 - Fraction(1, 6))).fit(pc.isel(obs=slice(0, 5)), yc[:5])
    stated = np.abs(2 * lv - 1) <= 5 / 6
    np.testing.assert_array_equal(
        q.calib.quantiles[:3, stated], alone.predict(pt.isel(obs=slice(0, 3)), levels=lv[stated]).calib.quantiles
    )
    # beyond its reach the group states nothing: (-inf, inf) from the quantile path too, as the warning says
    assert np.isinf(q.calib.interval(0.9)["lower"].values[:3]).all()
    assert np.isfinite(q.calib.interval(0.9)["lower"].values[3:]).all()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tiny = Mondrian(ConformalPredictiveSystem()).fit(pc, yc, groups=np.where(np.arange(gc.size) == 0, 8, gc))
    assert any("group 8 has 1 calibration point" in str(w.message) for w in caught)
    with pytest.raises(ValueError, match=r"group 8 has 1 calibration point\(s\), too few to fit.*fallback='pooled'"):
        tiny.predict(pt, groups=np.where(np.arange(gt.size) == 0, 8, gt))


def test_pooled_fallback_is_labelled(data):
    (pc, yc, gc), (pt, _, gt) = data["cal"], data["test"]
    gc, gt = gc.copy(), gt.copy()
    gc[:5], gt[:3], gt[3] = 7, 7, 99
    with pytest.warns(CalibprobWarning, match="pooled fallback"):
        m = Mondrian(SplitConformalCalibrator(), fallback="pooled").fit(pc, yc, groups=gc)
    pooled = SplitConformalCalibrator().fit(pc, yc)
    iv = m.predict_interval(pt, groups=gt)
    flag = iv["mondrian_pooled"].values
    assert flag[:4].all() and not flag[4:].any()
    ref = pooled.predict_interval(pt.isel(obs=slice(0, 4)))
    np.testing.assert_array_equal(iv["upper"].values[:4], ref["upper"].values)
    # the quantile path: the unseen group wholly pooled; group 7 (5 points: |2p - 1| <= 5/6) pooled at the levels
    # it misses only, each pooled quantile kept outside the group's own outermost one (no crossing)
    q = m.predict(pt, groups=gt)
    lv, flag, got = q["level"].values, q["mondrian_pooled"].values, q.calib.quantiles
    missed = np.abs(2 * lv - 1) > 5 / 6
    assert (flag[:3] == missed).all() and flag[3].all() and not flag[4:].any()
    ref = pooled.predict(pt.isel(obs=slice(0, 4)), levels=lv).calib.quantiles
    np.testing.assert_array_equal(got[3], ref[3])
    own = np.flatnonzero(~missed)
    low, high = missed & (np.arange(lv.size) < own[0]), missed & (np.arange(lv.size) > own[-1])
    np.testing.assert_array_equal(got[:3][:, low], np.minimum(ref[:3][:, low], got[:3, [own[0]]]))
    np.testing.assert_array_equal(got[:3][:, high], np.maximum(ref[:3][:, high], got[:3, [own[-1]]]))
    assert "reach" not in q or (q["reach"].values[:4] > 0.99).all()  # the pooled 1500 points reach 0.99


def test_bad_groups(data):
    (pc, yc, gc), (pt, _, gt) = data["cal"], data["test"]
    with pytest.raises(ValueError, match="groups has 10 labels but there are 1500 observations"):
        Mondrian(SplitConformalCalibrator()).fit(pc, yc, groups=gc[:10])
    bad = gc.astype(float)
    bad[3] = np.nan
    with pytest.raises(
        ValueError, match=r"groups has 1 missing label\(s\) \(NaN, None, pandas NA, NaT\) at row index 3"
    ):
        SplitConformalCalibrator().fit(pc, yc, groups=bad)
    m = ConformalPredictiveSystem().fit(pc, yc, groups=gc)
    unseen = gt.copy()
    unseen[0] = 42
    with pytest.raises(ValueError, match=r"1 group\(s\) that calibration never saw: 42.*fallback='pooled'"):
        m.predict(pt, groups=unseen)
    with pytest.raises(ValueError, match="groups is required"):
        Mondrian(SplitConformalCalibrator()).fit(pc, yc)
    with pytest.raises(ValueError, match="fitted without groups"):
        SplitConformalCalibrator().fit(pc, yc).predict(pt, groups=gt)
    with pytest.raises(ValueError, match="fallback must be None or 'pooled'; got 'merge'"):
        Mondrian(SplitConformalCalibrator(), fallback="merge").fit(pc, yc, groups=gc)
    with pytest.raises(TypeError, match="calibrator must be a calibprob distribution post-processor"):
        Mondrian(lambda x: x).fit(pc, yc, groups=gc)
    with pytest.raises(TypeError, match="holds an estimator="):
        Mondrian(SplitConformalRegressor(estimator=lambda a, b, c: c[:, 0])).fit(pc, yc, groups=gc)


def test_save_load_round_trip(tmp_path, data):
    (pc, yc, gc), (pt, _, gt) = data["cal"], data["test"]
    labels = np.array(["low", "high", "mid"])
    for est in (
        Mondrian(ConformalPredictiveSystem(), fallback="pooled").fit(pc, yc, groups=labels[gc]),
        calibprob.IsotonicRecalibrator().fit(pc, yc, groups=labels[gc]),
    ):
        path = est.save(tmp_path / f"{type(est).__name__}.nc")
        back = calibprob.load(path)
        assert back.predict(pt, groups=labels[gt]).identical(est.predict(pt, groups=labels[gt]))


# ---------------------------------------------------------------------------
# bins
# ---------------------------------------------------------------------------


def test_bins_quantile_thresholds_and_labels():
    rng = np.random.default_rng(3)
    x_fit, x_new = rng.normal(size=999), rng.normal(size=5000)
    b = calibprob.bins(x_fit, n_bins=4)
    np.testing.assert_array_equal(b.thresholds_[1:-1], np.quantile(x_fit, [0.25, 0.5, 0.75], method="inverted_cdf"))
    labels = b.apply(x_new)
    brute = np.array([sum(t <= v for t in b.thresholds_[1:-1]) for v in x_new])
    np.testing.assert_array_equal(labels, brute)
    # on the data it was fitted on, equal-frequency: 999 points in 4 bins of 249 or 250
    assert set(np.bincount(b.apply(x_fit)).tolist()) <= {249, 250, 251}
    X = np.c_[rng.normal(size=200), rng.uniform(size=200)]
    np.testing.assert_array_equal(
        calibprob.bins(X, column=1, n_bins=3).apply(X), calibprob.bins(X[:, 1], n_bins=3).apply(X[:, 1])
    )


def test_bins_by_sigma_mean_and_category():
    rng = np.random.default_rng(4)
    mu, sd = rng.normal(size=400), rng.uniform(0.5, 2, size=400)
    pred = calibprob.normal(mu, sd)
    np.testing.assert_array_equal(
        calibprob.bins(pred, by="sigma", n_bins=5).apply(pred), calibprob.bins(sd, n_bins=5).apply(sd)
    )
    np.testing.assert_array_equal(
        calibprob.bins(pred, by="mean", n_bins=5).apply(pred), calibprob.bins(mu, n_bins=5).apply(mu)
    )
    cat = calibprob.bins(np.array(["US", "EU", "JP", "US"]), by="category")
    assert cat.apply(["JP", "US"]).tolist() == ["JP", "US"]
    with pytest.raises(ValueError, match=r"category\(ies\) not seen at fit: \['KR'\]"):
        cat.apply(["KR"])


def test_bins_never_fewer_without_saying_so():
    x = np.repeat([0.0, 1.0, 2.0], [500, 300, 200])
    with pytest.warns(CalibprobWarning, match=r"n_bins=10\): tied values leave only 3 distinct bins"):
        b = calibprob.bins(x, n_bins=10)
    assert b.n_bins_ == 3 and np.unique(b.apply(x)).size == 3


def test_bins_bad_input():
    with pytest.raises(ValueError, match="by must be one of"):
        calibprob.bins([1.0, 2.0], by="size")
    with pytest.raises(TypeError, match=r"bins\(by='sigma'\) reads the base's predictive Dataset"):
        calibprob.bins(np.ones(10), by="sigma")
    with pytest.raises(ValueError, match="has 2 columns; pass column="):
        calibprob.bins(np.ones((10, 2)))
    with pytest.raises(ValueError, match="non-finite values"):
        calibprob.bins(np.array([1.0, np.nan, 2.0]), n_bins=2)


def test_online_streams_per_group_continue_with_update(data):
    (pc, yc, gc), (pt, yt, gt) = data["cal"], data["test"]
    grouped = calibprob.OnlineQuantileRecalibrator().fit(pc, yc, groups=gc)
    grouped.mondrian_.update(pt, yt, groups=gt)
    out = grouped.predict(pt.isel(obs=slice(0, 50)), groups=gt[:50])
    for k in np.unique(gc):
        rc, rt = np.flatnonzero(gc == k), np.flatnonzero(gt == k)
        alone = calibprob.OnlineQuantileRecalibrator().fit(pc.isel(obs=rc), yc[rc]).update(pt.isel(obs=rt), yt[rt])
        rows = np.flatnonzero(gt[:50] == k)
        ref = alone.predict(pt.isel(obs=rows))
        np.testing.assert_array_equal(out.calib.quantiles[rows], ref.calib.quantiles)


def test_bins_save_and_load(tmp_path):
    rng = np.random.default_rng(6)
    b = calibprob.bins(rng.normal(size=300), n_bins=5)
    back = calibprob.load(b.save(tmp_path / "bins.nc"))
    x = rng.normal(size=100)
    np.testing.assert_array_equal(back.apply(x), b.apply(x))


@pytest.mark.slow
def test_gp_beta_per_group_equals_gp_beta_on_each_group(data):
    (pc, yc, gc), (pt, _, gt) = data["cal"], data["test"]
    rows_c, rows_t = np.flatnonzero(gc < 2)[:300], np.flatnonzero(gt < 2)[:100]
    pc, yc, gc, pt, gt = pc.isel(obs=rows_c), yc[rows_c], gc[rows_c], pt.isel(obs=rows_t), gt[rows_t]

    def make():
        return calibprob.GPBetaCalibrator(inference="map", n_inducing=8, random_state=0)

    pred = make().fit(pc, yc, groups=gc).predict(pt, groups=gt, levels=[0.05, 0.5, 0.95])
    for k in (0, 1):
        rc, rt = np.flatnonzero(gc == k), np.flatnonzero(gt == k)
        alone = make().fit(pc.isel(obs=rc), yc[rc]).predict(pt.isel(obs=rt), levels=[0.05, 0.5, 0.95])
        np.testing.assert_allclose(pred.calib.quantiles[rt], alone.calib.quantiles, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------
# each level on its own (issue 35): the fallback, one warning with the table, isotonic
# ---------------------------------------------------------------------------


def test_pooled_fallback_at_the_missed_level_only(data):
    (pc, yc, gc), (pt, _, gt) = data["cal"], data["test"]
    gc, gt = gc.copy(), gt.copy()
    gc[:12], gt[:5] = 7, 7  # 12 points: split conformal resolves 0.9 (needs 9), not 0.95 (needs 19)
    with pytest.warns(
        CalibprobWarning, match=r"group 7 has 12 calibration point\(s\), 0.95 needs 19, reaches levels up to 0\.9231\."
    ):
        m = Mondrian(SplitConformalCalibrator(confidence_level=[0.9, 0.95]), fallback="pooled").fit(pc, yc, groups=gc)
    iv = m.predict_interval(pt, groups=gt)
    alone = (
        SplitConformalCalibrator()
        .fit(pc.isel(obs=slice(0, 12)), yc[:12])
        .predict_interval(pt.isel(obs=slice(0, 5)), 0.9)
    )
    pooled = SplitConformalCalibrator().fit(pc, yc).predict_interval(pt.isel(obs=slice(0, 5)), 0.95)
    for end in ("lower", "upper"):
        np.testing.assert_array_equal(iv[end].sel(confidence_level=0.9).values[:5], alone[end].values)
        np.testing.assert_array_equal(iv[end].sel(confidence_level=0.95).values[:5], pooled[end].values)
    flag = iv["mondrian_pooled"]
    assert not flag.sel(confidence_level=0.9).values.any()
    assert flag.sel(confidence_level=0.95).values[:5].all() and not flag.sel(confidence_level=0.95).values[5:].any()
    assert iv.attrs["small_groups"] == "group 7 has 12 calibration point(s), 0.95 needs 19, reaches levels up to 0.9231"


def test_one_warning_per_call_with_the_table(data):
    (pc, yc, gc), (pt, _, gt) = data["cal"], data["test"]
    gc = gc.copy()
    gc[:30] = np.repeat(np.arange(10, 20), 3)  # ten groups of 3 points: below 0.8's 4
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = Mondrian(SplitConformalCalibrator(confidence_level=[0.8, 0.9])).fit(pc, yc, groups=gc)
    assert len(caught) == 1
    msg = str(caught[0].message)
    assert msg.startswith("10 group(s) below the minimum group size of a confidence level: ")
    assert all(f"group {k} has 3 calibration point(s), 0.8 needs 4, 0.9 needs 9" in msg for k in range(10, 20))
    assert "At each listed level only" in msg and "(-inf, inf)" in msg
    assert m.small_groups_[0] == (10, 3, [(0.8, 4), (0.9, 9)])
    assert len(m.small_groups_) == 10
    # predict_interval carries the table of the groups it was given, at the levels it was asked
    gt = gt.copy()
    gt[:2] = 12
    iv = m.predict_interval(pt, 0.9, groups=gt)
    assert iv.attrs["small_groups"] == "group 12 has 3 calibration point(s), 0.9 needs 9, reaches levels up to 0.75"
    assert "small_groups" not in m.predict_interval(pt, 0.9, groups=np.where(gt == 12, 0, gt)).attrs


@pytest.mark.parametrize("extrapolate", [False, True])
def test_isotonic_small_group_output_agrees_with_the_warning(extrapolate):
    rng = np.random.default_rng(35)
    n = 300
    g = np.r_[[9, 9], rng.integers(0, 2, size=n - 2)]  # a county with 2 calibration points
    mu = rng.normal(size=n)
    y = mu + rng.normal(size=n)
    base = calibprob.normal(mu, np.ones(n))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = Mondrian(calibprob.IsotonicRecalibrator(extrapolate=extrapolate), confidence_level=0.8).fit(
            base, y, groups=g
        )
    (w,) = caught
    iv = m.predict_interval(base.isel(obs=slice(0, 4)), 0.8, groups=g[:4])
    if extrapolate:
        # the method defines every level (Gaussian tails beyond its 2 scores): the interval is
        # the group's own quantiles at 0.1 and 0.9, and the warning says so
        assert "extrapolated quantiles (extrapolate=True" in str(w.message) and "(-inf, inf)" not in str(w.message)
        own = m.calibrators_[2].predict(base.isel(obs=slice(0, 2)), levels=[0.1, 0.9]).calib.quantiles
        np.testing.assert_array_equal(iv["lower"].values[:2], own[:, 0])
        np.testing.assert_array_equal(iv["upper"].values[:2], own[:, 1])
    else:
        # the quantiles at 0.1 and 0.9 are undefined from 2 scores: infinite, as the warning says
        assert "given (-inf, inf)" in str(w.message)
        assert np.all(np.isinf(iv["lower"].values[:2])) and np.all(np.isinf(iv["upper"].values[:2]))
        # and so does the quantile path: 2 scores reach 1 - 2/3 (the quantiles at 1/3 and 2/3)
        q = m.predict(base.isel(obs=slice(0, 4)), levels=[0.1, 0.9], groups=g[:4])
        assert q["reach"].values[0] == q["reach"].values[1] == float(1 - Fraction(2, 3))
        for end in ("lower", "upper"):
            np.testing.assert_array_equal(q.calib.interval(0.8)[end].values, iv[end].values)
    assert np.isfinite(iv["lower"].values[2:]).all()
