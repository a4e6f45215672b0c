"""Weighted conformal Bayes under covariate shift (Fong & Holmes 2021 + Tibshirani et al. 2019).

Checked against: the unweighted estimator (equal weights, bit for bit), a brute-force weighted
p-value computed by hand from the add-one-in scores (log-sum-exp over the draws), and the weighted
guarantee under a known tilt (slow).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import logsumexp

import calibprob
from calibprob import CalibprobWarning
from calibprob.calibrators.conformal.bayes._numerics import FUSED_MIN
from calibprob.calibrators.conformal.bayes.estimator import ConformalBayes
from calibprob.weights import GivenWeights


def _normal_logpdf(x, mu, sd=1.0):
    return -0.5 * ((x - mu) / sd) ** 2 - np.log(sd) - 0.5 * np.log(2 * np.pi)


def _regression(rng, n=40, m=3, S=1500, G=161):
    """Exact posterior draws of a conjugate Normal linear model y = b x + e (noise sd 1, prior N(0, 10^2))."""
    x = rng.normal(size=n)
    y = 1.5 * x + rng.normal(size=n)
    prec = 1 / 100 + np.sum(x * x)
    b = rng.normal(np.sum(x * y) / prec, 1 / np.sqrt(prec), size=S)
    ll = _normal_logpdf(y[None, :], b[:, None] * x[None, :])
    x_new = rng.normal(size=m)
    grid = np.linspace(-7, 7, G)
    logf = _normal_logpdf(grid[None, None, :], (b[:, None] * x_new[None, :])[:, :, None])
    return x, y, ll, x_new, grid, logf


def _brute_p_values(ll, logf, w, t, member=None):
    """pi_w(y) on the grid by hand: AOI weights, scores by log-sum-exp, weighted count plus the test weight."""
    S, m, G = logf.shape
    p = np.empty((m, G))
    for j in range(m):
        keep = np.ones(ll.shape[1], bool) if member is None else member[j]
        for k in range(G):
            lw = logf[:, j, k] - logsumexp(logf[:, j, k])
            score = logsumexp(lw[:, None] + ll, axis=0)  # log sigma_i, i = 1..n
            new = logsumexp(lw + logf[:, j, k])  # log sigma_{n+1}
            below = (score <= new) & keep
            p[j, k] = (np.sum(w[below]) + t[j]) / (np.sum(w[keep]) + t[j])
    return p


def _data_vars_equal(a, b):
    return set(a.data_vars) == set(b.data_vars) and all(a[v].equals(b[v]) for v in a.data_vars)


# None: one block of S m G >= 2**20 entries (the fused path, _numerics.FUSED_MIN); 50: small blocks (the NumPy path)
@pytest.mark.parametrize("chunk_size", [None, 50])
def test_equal_weights_are_the_unweighted_sets_bit_for_bit(chunk_size):
    rng = np.random.default_rng(0)
    x, y, ll, x_new, grid, logf = _regression(rng, S=1500, G=241)
    assert logf.size >= FUSED_MIN
    cb = ConformalBayes(confidence_level=[0.8, 0.9], chunk_size=chunk_size)
    plain = cb.fit(ll, y=y).predict(logf, grid)
    weighted = cb.fit(ll, y=y, weights=np.full(x.size, 0.37)).predict(logf, grid, weights=np.full(3, 0.37))
    assert _data_vars_equal(plain, weighted)
    assert weighted.attrs["weights_ess"] == pytest.approx(x.size)
    groups = np.repeat(["a", "b"], x.size // 2)
    plain = cb.fit(ll, y=y, groups=groups).predict(logf, grid, groups=["a", "b", "a"])
    weighted = cb.fit(ll, y=y, groups=groups, weights=np.full(x.size, 2.0)).predict(
        logf, grid, groups=["a", "b", "a"], weights=np.full(3, 2.0)
    )
    assert _data_vars_equal(plain, weighted)


@pytest.mark.parametrize("chunk_size", [None, 50])
def test_oracle_weights_equal_a_brute_force_weighted_rank(chunk_size):
    rng = np.random.default_rng(1)
    x, y, ll, x_new, grid, logf = _regression(rng, m=4, S=1200, G=221)
    assert logf.size >= FUSED_MIN
    ratio = lambda v: np.exp(0.8 * v)  # noqa: E731 - the tilt's density ratio
    w, t = ratio(x), ratio(x_new)
    levels = [0.7, 0.9]
    pred = ConformalBayes(confidence_level=levels, chunk_size=chunk_size).fit(ll, y=y, weights=w)
    pred = pred.predict(logf, grid, weights=t)
    brute = _brute_p_values(ll, logf, w, t)
    np.testing.assert_allclose(pred["p_value"].values, brute, rtol=1e-12, atol=0)
    for k, c in enumerate(levels):
        kept = brute > 1 - c
        lo = np.array([grid[np.flatnonzero(r)[0] - 1] for r in kept])
        hi = np.array([grid[np.flatnonzero(r)[-1] + 1] for r in kept])
        np.testing.assert_array_equal(pred["lower"].values[:, k], lo)
        np.testing.assert_array_equal(pred["upper"].values[:, k], hi)
    # the weights move the sets: a different answer from the unweighted one
    plain = ConformalBayes(confidence_level=levels, chunk_size=chunk_size).fit(ll, y=y).predict(logf, grid)
    assert not np.array_equal(plain["p_value"].values, pred["p_value"].values)


def test_grouped_weights_rank_within_the_group_as_brute_force():
    rng = np.random.default_rng(2)
    x, y, ll, x_new, grid, logf = _regression(rng, n=40, S=800, G=81)
    groups = np.where(x > 0, "hi", "lo")
    w = rng.uniform(0.2, 3.0, size=x.size)
    t = np.array([0.5, 1.0, 2.0])
    test_groups = ["hi", "lo", "hi"]
    pred = ConformalBayes(confidence_level=0.8, chunk_size=40).fit(ll, y=y, groups=groups, weights=w)
    pred = pred.predict(logf, grid, groups=test_groups, weights=t)
    member = groups[None, :] == np.array(test_groups)[:, None]
    np.testing.assert_allclose(pred["p_value"].values, _brute_p_values(ll, logf, w, t, member), rtol=1e-12)


def test_refined_ends_use_the_weighted_p_value():
    rng = np.random.default_rng(3)
    x = rng.normal(size=40)
    y = 1.5 * x + rng.normal(size=40)
    x_new, grid = rng.normal(size=3), np.linspace(-7, 7, 81)
    prec = 1 / 100 + np.sum(x * x)
    b = rng.normal(np.sum(x * y) / prec, 1 / np.sqrt(prec), size=800)
    ll = _normal_logpdf(y[None, :], b[:, None] * x[None, :])
    logf = _normal_logpdf(grid[None, None, :], (b[:, None] * x_new[None, :])[:, :, None])
    w, t = np.exp(x), np.exp(x_new)

    def log_density(rows, yc):
        return _normal_logpdf(yc[None], (b[:, None] * x_new[None, rows])[:, :, None])

    pred = ConformalBayes(confidence_level=0.8).fit(ll, y=y, weights=w)
    pred = pred.predict(logf, grid, weights=t, log_density=log_density)
    step = (grid[1] - grid[0]) * 2.0**-10
    for j in range(3):  # each refined end is outside the set by the brute-force p-value, one bracket inside is in
        for end, inward in ((pred["upper"].values[j, 0], -step), (pred["lower"].values[j, 0], step)):
            p_out, p_in = _brute_p_values(
                ll, log_density(slice(j, j + 1), np.array([[end, end + inward]])), w, t[j : j + 1]
            )[0]
            assert p_out <= 0.2 + 1e-12 and p_in > 0.2 - 1e-12


def test_weights_object_and_door_spelling():
    rng = np.random.default_rng(4)
    x, y, ll, x_new, grid, logf = _regression(rng, S=600, G=81)
    w, t = np.exp(x), np.exp(x_new)
    by_array = ConformalBayes(confidence_level=0.8).fit(ll, y=y, weights=w).predict(logf, grid, weights=t)
    by_object = ConformalBayes(confidence_level=0.8).fit(ll, y=y, weights=GivenWeights(w, test=t))
    by_object = by_object.predict_interval(logf, grid)  # the object's test weights by default
    np.testing.assert_array_equal(by_array["lower"].values[:, 0], by_object["lower"].values)
    np.testing.assert_array_equal(by_array["upper"].values[:, 0], by_object["upper"].values)


def test_bad_weights_are_refused_naming_the_fix():
    rng = np.random.default_rng(5)
    x, y, ll, x_new, grid, logf = _regression(rng, S=400, G=61)
    n = x.size
    with pytest.raises(ValueError, match="weights must be finite"):
        ConformalBayes().fit(ll, weights=np.r_[np.nan, np.ones(n - 1)])
    with pytest.raises(ValueError, match="weights must be non-negative"):
        ConformalBayes().fit(ll, weights=np.r_[-1.0, np.ones(n - 1)])
    with pytest.raises(ValueError, match="weights are all zero"):
        ConformalBayes().fit(ll, weights=np.zeros(n))
    with pytest.raises(ValueError, match="weights has 3 entries for 40 points"):
        ConformalBayes().fit(ll, weights=np.ones(3))
    with pytest.raises(ValueError, match="needs a weighted fit"):
        ConformalBayes().fit(ll, y=y).predict(logf, grid, weights=np.ones(3))
    with pytest.raises(ValueError, match="the test points need their weights too"):
        ConformalBayes().fit(ll, y=y, weights=np.ones(n)).predict(logf, grid)
    with pytest.raises(ValueError, match="must be positive for test points"):
        ConformalBayes().fit(ll, y=y, weights=np.ones(n)).predict(logf, grid, weights=[1.0, 0.0, 1.0])


def test_a_level_the_weights_cannot_attain_is_refused_or_warned_by_choice():
    rng = np.random.default_rng(6)
    x, y, ll, x_new, grid, logf = _regression(rng, S=400, G=61)
    w = np.ones(x.size)
    t = np.array([1.0, 1.0, 30.0])  # the third test point outweighs 30 of the 40 training points
    with pytest.raises(ValueError, match=r"too small for confidence level 0.9: the attainable level is"):
        ConformalBayes(confidence_level=0.9).fit(ll, y=y, weights=w).predict(logf, grid, weights=t)
    cb = ConformalBayes(confidence_level=0.9).fit(ll, y=y, weights=GivenWeights(w, on_small="warn"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pred = cb.predict(logf, grid, weights=t)
    text = " ".join(str(c.message) for c in caught if issubclass(c.category, CalibprobWarning))
    assert "attainable level" in text and "own weight t/(W + t) exceeds" in text
    assert np.isinf(pred["lower"].values[2, 0]) and np.isinf(pred["upper"].values[2, 0])
    assert np.isfinite(pred["lower"].values[0, 0])


def test_a_weighted_fit_saves_and_loads():
    import tempfile
    from pathlib import Path

    rng = np.random.default_rng(8)
    x, y, ll, x_new, grid, logf = _regression(rng, S=400, G=61)
    cb = ConformalBayes(confidence_level=0.8).fit(ll, y=y, weights=np.exp(x))
    path = Path(tempfile.mkdtemp()) / "cb.nc"
    cb.save(path)
    again = calibprob.load(path)
    np.testing.assert_array_equal(
        again.predict(logf, grid, weights=np.exp(x_new))["p_value"].values,
        cb.predict(logf, grid, weights=np.exp(x_new))["p_value"].values,
    )
    # a weights object is not written (it may hold a fitted classifier): after load, pass the test weights
    obj = ConformalBayes(confidence_level=0.8).fit(ll, y=y, weights=GivenWeights(np.exp(x), test=np.exp(x_new)))
    obj.save(path)
    again = calibprob.load(path)
    np.testing.assert_array_equal(
        again.predict(logf, grid, weights=np.exp(x_new))["p_value"].values, obj.predict(logf, grid)["p_value"].values
    )
    with pytest.raises(ValueError, match="the test points need their weights too"):
        again.predict(logf, grid)


@pytest.mark.slow
def test_weighted_conformal_bayes_covers_under_a_known_tilt_where_the_unweighted_does_not():
    """Heteroscedastic truth (noise sd 0.3 + |x|), a homoscedastic model, test inputs tilted to large x.

    Training x ~ N(0, 1); test x ~ N(1.5, 1), the ratio exp(1.5 x - 1.125). Unweighted conformal Bayes
    covers the training law's mix of small and large noise, so under the tilt it under-covers; weighted by
    the true ratio it covers >= the level within 3 standard errors (Tibshirani et al. 2019, Corollary 1).
    """
    rng = np.random.default_rng(2026)
    reps, n, S, level = 600, 60, 400, 0.8
    grid = np.linspace(-12, 12, 241)
    hit_w = np.zeros(reps, bool)
    hit_u = np.zeros(reps, bool)
    for r in range(reps):
        x = rng.normal(size=n)
        y = 1.0 * x + (0.3 + np.abs(x)) * rng.normal(size=n)
        x_new = rng.normal(1.5, 1.0, size=1)
        y_new = 1.0 * x_new + (0.3 + np.abs(x_new)) * rng.normal(size=1)
        prec = 1 / 100 + np.sum(x * x) / 1.5**2  # the model: noise sd 1.5 everywhere
        b = rng.normal(np.sum(x * y) / 1.5**2 / prec, 1 / np.sqrt(prec), size=S)
        ll = _normal_logpdf(y[None, :], b[:, None] * x[None, :], 1.5)
        logf = _normal_logpdf(grid[None, None, :], (b * x_new[0])[:, None, None], 1.5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CalibprobWarning)
            cb = ConformalBayes(confidence_level=level, pareto_k=False, min_grid_mass=0.0)
            weighted = cb.fit(ll, weights=GivenWeights(np.exp(1.5 * x), on_small="ignore"))
            pw = weighted.predict(logf, grid, weights=np.exp(1.5 * x_new))
            pu = ConformalBayes(confidence_level=level, pareto_k=False, min_grid_mass=0.0).fit(ll).predict(logf, grid)
        hit_w[r] = pw["lower"].values[0, 0] <= y_new[0] <= pw["upper"].values[0, 0]
        hit_u[r] = pu["lower"].values[0, 0] <= y_new[0] <= pu["upper"].values[0, 0]
    se = np.sqrt(level * (1 - level) / reps)
    assert hit_w.mean() >= level - 3 * se, (hit_w.mean(), hit_u.mean())
    assert hit_u.mean() < level - 3 * se, (hit_w.mean(), hit_u.mean())


@pytest.mark.slow  # PyMC compiles the model's log-likelihood: 25 s at load 10
def test_the_pymc_door_passes_weights_through():
    """conformal_bayes(..., weights=, weights_new=) equals ConformalBayes fed by hand with the same weights."""
    pm = pytest.importorskip("pymc")
    az = pytest.importorskip("arviz")
    from scipy import stats

    rng = np.random.default_rng(9)
    n, S = 40, 300
    x = rng.normal(size=n)
    y = 1.5 * x + rng.normal(size=n)
    with pm.Model() as model:
        xd, yd = pm.Data("x", x), pm.Data("y", y)
        b, s = pm.Normal("b", 0, 5), pm.HalfNormal("s", 2)
        pm.Normal("lik", b * xd, s, observed=yd, shape=xd.shape[0])
    post = {"b": rng.normal(1.5, 0.1, size=(1, S)), "s": np.abs(rng.normal(1.0, 0.05, size=(1, S)))}
    idata = az.from_dict({"posterior": post, "observed_data": {"lik": y}})
    pm.compute_log_likelihood(idata, model=model, progressbar=False)
    x_new, grid = np.array([-1.0, 0.5, 2.0]), np.linspace(-9, 9, 91)
    w, t = np.exp(x), np.exp(x_new)
    pred = calibprob.conformal_bayes(model, idata, {"x": x_new}, grid=grid, weights=w, weights_new=t)
    bb, ss = post["b"].reshape(-1), post["s"].reshape(-1)
    logf = stats.norm.logpdf(grid[None, None, :], (bb[:, None] * x_new[None, :])[:, :, None], ss[:, None, None])
    by_hand = ConformalBayes().fit(idata, weights=w).predict(logf, grid, weights=t)
    np.testing.assert_array_equal(pred["p_value"].values, by_hand["p_value"].values)
    assert pred.attrs["weights_ess"] == by_hand.attrs["weights_ess"]


def test_end_only_mode_ranks_weighted_points_on_the_full_grid():
    """grid_mode="ends" searches integer ranks; weighted ranks are ranked on the whole grid, so equal full mode's."""
    rng = np.random.default_rng(3)
    x, y, ll, x_new, grid, logf = _regression(rng, S=1500, G=241)
    w, t = np.exp(0.5 * x), np.exp(0.5 * x_new)
    full = ConformalBayes(confidence_level=[0.8, 0.9]).fit(ll, y=y, weights=w).predict(logf, grid, weights=t)
    ends = ConformalBayes(confidence_level=[0.8, 0.9], grid_mode="ends").fit(ll, y=y, weights=w)
    out = ends.predict(logf, grid, weights=t)
    assert np.array_equal(out["p_value"].values, full["p_value"].values)
    assert bool(out["evaluated"].all())
    for v in ("lower", "upper"):
        assert np.array_equal(out[v].values, full[v].values)
