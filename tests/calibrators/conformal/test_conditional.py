"""Conditional conformal (Gibbs, Cherian & Candès 2023): calibprob.ConditionalConformal.

References checked against:

* split conformal: the intercept alone gives the ceil(c (n+1))-th smallest score, and disjoint
  group indicators give split conformal run in each group (1e-10);
* a brute-force solve of the augmented quantile regression for each test point: bisection on
  the imputed score S of the dual weight eta_{n+1}(S) of the full (n+1)-point LP (HiGHS at its
  tightest tolerances), 1e-8;
* the LP route of the threshold (no pivots) on random problems, 1e-8;
* MAPIE 1.6's ConditionalSplitConformalRegressor, through reference values stored by
  ``benchmarks/bench_conditional.py --write-reference`` (1e-8);
* the guarantee: coverage >= 1 - alpha in every group of an overlapping family, over many
  seeded repetitions (3 SE; slow), and exact coverage of the randomised set.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.optimize import linprog

import calibprob
from calibprob.calibrators.conformal import _condconf_lp as lp
from calibprob.calibrators.conformal.conditional import conditional_thresholds
from tests.support.paths import TEST_DATA

REFERENCE = TEST_DATA / "mapie_conditional_reference.npz"
TIGHT = {"dual_feasibility_tolerance": 1e-10, "primal_feasibility_tolerance": 1e-10}


def _rank(c, n):
    return math.ceil(Fraction(str(c)) * (n + 1))


def _eta_last(s, Phi, S, phi, tau):
    """eta_{n+1}(s) of the augmented dual LP with every point, the test point imputed at s."""
    A = np.vstack([Phi, phi])
    res = linprog(
        -np.r_[S, s], A_eq=A.T, b_eq=np.zeros(A.shape[1]), bounds=(tau - 1, tau), method="highs", options=TIGHT
    )
    return res.x[-1]


def _brute(Phi, S, phi, tau, theta=None):
    """sup{s : eta_{n+1}(s) < theta} by bisection (eta_{n+1} is non-decreasing in s)."""
    theta = tau if theta is None else theta
    lo, hi = -1.0, 4.0 * float(np.max(S)) + 10.0
    for _ in range(54):
        mid = 0.5 * (lo + hi)
        if _eta_last(mid, Phi, S, phi, tau) < theta - 1e-9:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _overlapping(n, rng, m=3):
    G = (rng.uniform(size=(n, m)) < np.linspace(0.25, 0.5, m)).astype(float)
    S = np.abs(rng.standard_normal(n)) * (0.5 + G @ np.linspace(0.5, 1.5, m))
    return G, S


def test_intercept_only_is_split_conformal():
    rng = np.random.default_rng(0)
    S = rng.exponential(size=57)
    for c in (0.5, 0.8, 0.9, 0.95):
        cut = conditional_thresholds(S, np.ones((57, 1)), np.ones((3, 1)), c)
        assert np.all(cut == np.sort(S)[_rank(c, 57) - 1])


@pytest.mark.parametrize("c", [0.8, 0.9])
def test_disjoint_groups_equal_split_conformal_per_group(c):
    """Including the degenerate case c (n_g + 1) integer (n_g = 99 at c = 0.9 and 0.8)."""
    rng = np.random.default_rng(1)
    sizes = [99, 40, 73, 124]
    g = np.repeat(np.arange(4), sizes)
    rng.shuffle(g)
    mu, y = rng.normal(size=g.size), rng.normal(size=g.size) * (1 + g)
    cc = calibprob.ConditionalConformal(confidence_level=c).fit(calibprob.normal(mu, np.ones(g.size)), y, groups=g)
    assert cc.columns_ == ["group 0", "group 1", "group 2", "group 3"]  # the labels span the constant
    test = calibprob.normal(np.zeros(4), np.ones(4))
    iv = cc.predict(test, groups=np.arange(4)).sel(confidence_level=c)
    S = np.abs(y - mu)
    split = [np.sort(S[g == k])[_rank(c, sizes[k]) - 1] for k in range(4)]
    np.testing.assert_allclose(iv["upper"].values, split, rtol=0, atol=1e-10)
    np.testing.assert_allclose(iv["lower"].values, -np.array(split), rtol=0, atol=1e-10)


def test_thresholds_equal_a_brute_force_solve_of_the_augmented_regression():
    rng = np.random.default_rng(2)
    n = 80
    G, S = _overlapping(n, rng)
    Phi = np.c_[np.ones(n), G, rng.normal(size=n)]  # overlapping groups and a continuous feature
    test = np.c_[np.ones(4), (rng.uniform(size=(4, 3)) < 0.4), rng.normal(size=4)]
    for c in (0.8, 0.9):
        ours = conditional_thresholds(S, Phi, test, c)
        brute = np.array([_brute(Phi, S, p, c) for p in test])
        np.testing.assert_allclose(ours, brute, rtol=0, atol=1e-8)
    theta = np.random.default_rng(3).uniform(-0.1, 0.9, 4)  # the randomised rule's thresholds
    ours = conditional_thresholds(S, Phi, test, 0.9, theta=theta)
    brute = np.array([_brute(Phi, S, p, 0.9, t) for p, t in zip(test, theta)])
    np.testing.assert_allclose(ours, brute, rtol=0, atol=1e-8)


def test_the_pivot_path_equals_the_lp_route():
    """The fast path (pivots from the calibration-only basis) against the screened-LP route, 1e-8."""
    rng = np.random.default_rng(4)
    for trial in range(4):
        n = 300
        G, S = _overlapping(n, rng, m=4)
        Phi = np.c_[np.ones(n), G]
        start = lp._Start(S, Phi, 0.9)
        for phi in np.c_[np.ones(16), (rng.uniform(size=(16, 4)) < 0.5)]:
            theta = rng.uniform(-0.1, 0.9) if trial % 2 else 0.9
            fast = lp.fast_threshold(S, Phi, phi, 0.9, theta, start)
            slow = lp.tilted_threshold(S, Phi, phi, 0.9, theta, start.r0)
            assert fast == pytest.approx(slow, abs=1e-8)


def test_the_lp_route_handles_a_degenerate_vertex():
    """tau (n_g + 1) an integer: every dual at a bound, the minimiser set an interval; its smallest end is split conformal."""
    rng = np.random.default_rng(13)
    sizes = [99, 40, 73, 124]
    g = np.repeat(np.arange(4), sizes)
    S = rng.exponential(size=g.size) * (1 + g)
    Phi = np.eye(4)[g]
    start = lp._Start(S, Phi, 0.9)
    for k in range(4):
        expected = np.sort(S[g == k])[_rank(0.9, sizes[k]) - 1]
        assert lp.tilted_threshold(S, Phi, np.eye(4)[k], 0.9, 0.9, start.r0) == pytest.approx(expected, abs=1e-10)


def test_equals_mapie_on_stored_reference_values():
    """MAPIE 1.6 ConditionalSplitConformalRegressor, feature map [1, groups], deterministic, exact (1e-8)."""
    ref = np.load(REFERENCE)
    mu, y, G, n = ref["cc_mu"], ref["cc_y"], ref["cc_groups"], int(ref["cc_n_cal"])
    pred = calibprob.normal(mu, np.ones(mu.size))
    cc = calibprob.ConditionalConformal().fit(pred.isel(obs=slice(n)), y[:n], groups=G[:n])
    assert cc.columns_[0] == "intercept"
    iv = cc.predict(pred.isel(obs=slice(n, None)), groups=G[n:]).sel(confidence_level=0.9)
    np.testing.assert_allclose(iv["lower"].values, ref["cc_mapie"][:, 0], rtol=0, atol=1e-8)
    np.testing.assert_allclose(iv["upper"].values, ref["cc_mapie"][:, 1], rtol=0, atol=1e-8)


def _group_coverage(reps, n, m, rng, randomize):
    cover, count = np.zeros(4), np.zeros(4)
    per_rep = []
    for r in range(reps):
        G, S = _overlapping(n + m, rng)
        mu = np.zeros(n + m)
        y = S * rng.choice([-1.0, 1.0], n + m)  # |y - mu| = S
        pred = calibprob.normal(mu, np.ones(n + m))
        cc = calibprob.ConditionalConformal(randomize=randomize, random_state=r)
        iv = cc.fit(pred.isel(obs=slice(n)), y[:n], groups=G[:n]).predict(pred.isel(obs=slice(n, None)), groups=G[n:])
        hit = (y[n:] >= iv["lower"].values[:, 0]) & (y[n:] <= iv["upper"].values[:, 0])
        masks = [np.ones(m, bool)] + [G[n:, j] == 1 for j in range(3)]
        per_rep.append([hit[k].mean() if k.any() else np.nan for k in masks])
        cover += [hit[k].sum() for k in masks]
        count += [k.sum() for k in masks]
    per_rep = np.array(per_rep)
    se = np.nanstd(per_rep, axis=0, ddof=1) / np.sqrt(np.sum(~np.isnan(per_rep), axis=0))
    return cover / count, se


@pytest.mark.seeded(5)
def test_randomised_set_covers_every_overlapping_group(seed, record_property):
    """Default run: the randomised set has coverage 1 - alpha in every group (Gibbs et al. Thm 3), 3 SE; the draws'
    seed from the seed sweep, 5 in the default run."""
    cov, se = _group_coverage(reps=40, n=120, m=60, rng=np.random.default_rng(seed), randomize=True)
    record_property("coverage_error_se", float(np.max(np.abs(cov - 0.9) / se)))
    assert np.all(np.abs(cov - 0.9) <= 3 * se), (cov, se)


@pytest.mark.slow
def test_deterministic_set_covers_every_overlapping_group_over_many_repetitions():
    """Coverage >= 1 - alpha in the whole population and in each of three overlapping groups, 3 SE."""
    cov, se = _group_coverage(reps=400, n=200, m=200, rng=np.random.default_rng(6), randomize=False)
    assert np.all(cov >= 0.9 - 3 * se), (cov, se)


def test_features_array_callable_and_groups_combine():
    rng = np.random.default_rng(7)
    n = 200
    X = rng.uniform(size=(n, 2))
    y = rng.normal(size=n) * (1 + X[:, 0])
    pred = calibprob.normal(np.zeros(n), np.ones(n))
    a = calibprob.ConditionalConformal(feature_map=lambda X: X[:, :1]).fit(pred, y, X=X)
    b = calibprob.ConditionalConformal().fit(pred, y, features=X[:, :1])
    assert a.columns_ == ["intercept", "map 0"] and b.columns_ == ["intercept", "feature 0"]
    ia = a.predict(pred.isel(obs=slice(5)), X=X[:5])
    ib = b.predict(pred.isel(obs=slice(5)), features=X[:5, :1])
    np.testing.assert_array_equal(ia["upper"].values, ib["upper"].values)


def test_groups_by_coordinate_name():
    rng = np.random.default_rng(14)
    g = rng.integers(0, 3, 300)
    y = rng.normal(size=300) * (1 + g)
    pred = calibprob.normal(np.zeros(300), np.ones(300)).assign_coords(cut=("obs", np.array(["a", "b", "c"])[g]))
    a = calibprob.ConditionalConformal().fit(pred, y, groups="cut").predict(pred, groups="cut")
    b = calibprob.ConditionalConformal().fit(pred, y, groups=g).predict(pred, groups=g)
    np.testing.assert_array_equal(a["upper"].values, b["upper"].values)
    with pytest.raises(ValueError, match=r"groups='origin' names no coordinate"):
        calibprob.ConditionalConformal().fit(pred, y, groups="origin")


def test_normalized_score_scales_by_sigma():
    rng = np.random.default_rng(8)
    n = 100
    sd = rng.uniform(0.5, 2, n)
    y = rng.normal(size=n) * sd
    pred = calibprob.normal(np.zeros(n), sd)
    cc = calibprob.ConditionalConformal(score="normalized").fit(pred, y)
    iv = cc.predict(pred).sel(confidence_level=0.9)
    k = np.sort(np.abs(y) / sd)[_rank(0.9, n) - 1]
    np.testing.assert_allclose(iv["upper"].values, k * sd, rtol=1e-12)


def test_randomised_is_reproducible_under_a_seed():
    rng = np.random.default_rng(9)
    G, S = _overlapping(200, rng)
    pred = calibprob.normal(np.zeros(200), np.ones(200))
    make = lambda s: calibprob.ConditionalConformal(randomize=True, random_state=s).fit(pred, S, groups=G)  # noqa: E731
    a = make(1).predict(pred, groups=G)["upper"].values
    assert np.array_equal(a, make(1).predict(pred, groups=G)["upper"].values)
    assert not np.array_equal(a, make(2).predict(pred, groups=G)["upper"].values)


# ---------------------------------------------------------------------------
# bad input and the explicit infinite interval
# ---------------------------------------------------------------------------


def test_zero_features_give_an_infinite_interval_with_a_warning():
    rng = np.random.default_rng(10)
    G, S = _overlapping(200, rng)
    G = np.c_[G, 1 - G.max(axis=1)]  # the groups now cover every calibration point: no intercept
    pred = calibprob.normal(np.zeros(200), np.ones(200))
    cc = calibprob.ConditionalConformal(intercept=False).fit(pred, S, groups=G)
    test = np.zeros((2, 4))
    test[0, 0] = 1
    with pytest.warns(
        calibprob.CalibprobWarning, match=r"1 test points get an infinite interval: 1 have features Phi\(x\) = 0"
    ):
        iv = cc.predict(pred.isel(obs=slice(2)), groups=test)
    assert np.isfinite(iv["upper"].values[0, 0]) and np.isinf(iv["upper"].values[1, 0])
    assert iv.attrs["n_unbounded"] == 1


def test_rank_deficient_features_are_refused_naming_columns_or_reduced():
    rng = np.random.default_rng(11)
    n = 100
    F = rng.normal(size=(n, 2))
    F = np.c_[F, F[:, 0] + F[:, 1]]
    pred = calibprob.normal(np.zeros(n), np.ones(n))
    y = rng.normal(size=n)
    with pytest.raises(
        ValueError, match=r"rank-deficient features: the columns \['feature 2'\] .*rank_deficient='reduce'"
    ):
        calibprob.ConditionalConformal().fit(pred, y, features=F)
    with pytest.warns(calibprob.CalibprobWarning, match=r"dropped dependent feature columns \['feature 2'\]"):
        cc = calibprob.ConditionalConformal(rank_deficient="reduce").fit(pred, y, features=F)
    assert cc.features_.shape[1] == 3
    assert np.isfinite(cc.predict(pred, features=F)["upper"].values).all()


def test_wrong_lengths_nan_and_unseen_groups_are_refused():
    rng = np.random.default_rng(12)
    n = 60
    pred = calibprob.normal(np.zeros(n), np.ones(n))
    y = rng.normal(size=n)
    g = rng.integers(0, 2, n)
    with pytest.raises(ValueError, match=r"groups has 59 rows but the predictive Dataset has 60 observations"):
        calibprob.ConditionalConformal().fit(pred, y, groups=g[:-1])
    with pytest.raises(ValueError, match=r"features has 50 rows but the predictive Dataset has 60"):
        calibprob.ConditionalConformal().fit(pred, y, features=np.ones((50, 1)))
    with pytest.raises(ValueError, match=r"features .*(NaN|finite)"):
        calibprob.ConditionalConformal().fit(pred, y, features=np.r_[np.ones(59), np.nan][:, None])
    with pytest.raises(ValueError, match=r"groups has 1 missing label\(s\).*row index 59"):
        calibprob.ConditionalConformal().fit(pred, y, groups=np.r_[g[:-1], np.nan].astype(float))
    cc = calibprob.ConditionalConformal().fit(pred, y, groups=g)
    with pytest.raises(ValueError, match=r"groups has labels \[7\] that calibration never saw"):
        cc.predict(pred.isel(obs=slice(2)), groups=[0, 7])
    with pytest.raises(ValueError, match=r"the test features have 3 columns but calibration had 2"):
        cc.predict(pred.isel(obs=slice(2)), groups=[0, 1], features=np.ones((2, 1)))
    with pytest.raises(ValueError, match=r"feature_map and X go together"):
        calibprob.ConditionalConformal().fit(pred, y, X=np.ones((n, 1)))


def test_groups_with_the_normalized_score_equal_a_hand_computation():
    """Conditional conformal x the normalised score, disjoint groups: mu +- R_(k_g) sd per group.

    With the group indicators as the function class (they span the constant), Gibbs et al.'s
    deterministic threshold in group g is the ceil(c (n_g + 1))-th smallest of the group's
    normalised scores |y - mu|/sd; ``predict_interval`` gives the same as ``predict``.
    """
    rng = np.random.default_rng(40)
    sizes = [30, 55, 41]
    g = np.repeat(np.arange(3), sizes)
    sd = rng.uniform(0.5, 2.0, g.size)
    mu = rng.normal(size=g.size)
    y = mu + sd * rng.normal(size=g.size) * (1 + g)
    cc = calibprob.ConditionalConformal(score="normalized").fit(calibprob.normal(mu, sd), y, groups=g)
    test = calibprob.normal(np.array([0.0, 1.0, -1.0]), np.array([1.0, 2.0, 0.5]))
    iv = cc.predict_interval(test, 0.9, groups=np.arange(3))
    R = np.abs(y - mu) / sd
    k = np.array([np.sort(R[g == j])[_rank(0.9, sizes[j]) - 1] for j in range(3)])
    np.testing.assert_allclose(
        iv["upper"].values, np.array([0.0, 1.0, -1.0]) + k * np.array([1.0, 2.0, 0.5]), atol=1e-10
    )
    np.testing.assert_allclose(
        iv["lower"].values, np.array([0.0, 1.0, -1.0]) - k * np.array([1.0, 2.0, 0.5]), atol=1e-10
    )
    assert cc.predict(test, groups=np.arange(3)).sel(confidence_level=0.9).identical(iv)
