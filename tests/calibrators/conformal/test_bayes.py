"""Conformal Bayes (Fong and Holmes 2021): the NumPy core against closed forms, brute force and its guarantee.

The reference model is the conjugate Normal location model with known noise,
y_i ~ N(theta, s^2), theta ~ N(m0, t0^2): its posterior, its add-one-in posterior and every
posterior predictive density are closed form, so the full-conformal p-values are exact and
posterior draws are exact (no MCMC).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import xarray as xr
from scipy import stats

import calibprob
from calibprob import CalibprobWarning
from calibprob.calibrators.conformal.bayes.estimator import ConformalBayes

S_NOISE, M0, T0 = 1.0, 0.0, 10.0


def posterior(y, s=S_NOISE, m0=M0, t0=T0):
    """Mean and sd of theta | y in the conjugate Normal model."""
    prec = 1.0 / t0**2 + len(y) / s**2
    return (m0 / t0**2 + np.sum(y) / s**2) / prec, 1.0 / math.sqrt(prec)


def normal_logpdf(x, mu, sd=S_NOISE):
    return -0.5 * ((x - mu) / sd) ** 2 - np.log(sd) - 0.5 * np.log(2 * np.pi)


def conjugate_inputs(y, grid, n_draws, rng):
    """Exact posterior draws -> training log-likelihood (S, n) and test log density (S, 1, G)."""
    m, sd = posterior(y)
    theta = rng.normal(m, sd, size=n_draws)
    ll = normal_logpdf(y[None, :], theta[:, None])
    logf = normal_logpdf(np.asarray(grid)[None, None, :], theta[:, None, None])
    return ll, logf


def exact_ranks(y, grid):
    """Closed-form full-conformal ranks of Fong & Holmes's score, the candidate counted.

    With y added, theta | y_1..n, y ~ N(m', t'^2); every predictive density is N(., m', s^2 + t'^2),
    so sigma_i <= sigma_{n+1} iff |y_i - m'| >= |y - m'|. Also returns the score gaps
    |log sigma_i - log sigma_{n+1}| (to know which comparisons Monte Carlo error may flip).
    """
    out, gaps = [], []
    for yc in grid:
        m1, t1 = posterior(np.append(y, yc))
        sd = math.sqrt(S_NOISE**2 + t1**2)
        ls = normal_logpdf(y, m1, sd)
        lsn = normal_logpdf(yc, m1, sd)
        out.append(1 + int(np.sum(ls <= lsn)))
        gaps.append(np.abs(ls - lsn))
    return np.array(out), np.array(gaps)


# ---------------------------------------------------------------------------
# independent checks
# ---------------------------------------------------------------------------


@pytest.mark.seeded(11)
def test_p_values_match_the_closed_form_full_conformal_within_monte_carlo_error(seed, record_property):
    """Exact posterior draws: every rank equals the closed form except where scores nearly tie.

    Tolerance: a comparison sigma_i <= sigma_{n+1} can flip only if the exact log scores differ by
    less than the Monte Carlo error of their importance-sampling estimates. With S = 20 000 exact
    draws the AOI weights' ESS is >= 2 000 on this grid, so that error is below ~0.02 in log
    space; we allow 0.05 (2.5x) and require |rank - exact rank| <= #{i : gap_i < 0.05} at every
    grid point, and exact equality on at least 90 % of the grid. The draws' seed from the seed sweep, 11 in the
    default run.
    """
    rng = np.random.default_rng(seed)
    y = rng.normal(0.5, 2.0, size=25)  # misspecified on purpose: noise sd 2, model says 1
    grid = np.linspace(y.min() - 3, y.max() + 3, 161)
    ll, logf = conjugate_inputs(y, grid, 20_000, rng)
    pred = ConformalBayes(confidence_level=0.8).fit(ll, y=y).predict(logf, grid)
    rank = np.rint(pred["p_value"].values[0] * (len(y) + 1)).astype(int)
    exact, gaps = exact_ranks(y, grid)
    # the seed sweep (seeds 0..19) saw the AOI weights' ESS down to 716 (> 2000 broke at 5 of 20 draws): the Monte
    # Carlo error in log space grows to ~0.02 sqrt(2000 / 716) = 0.033, still below the 0.05 allowed, and the rank
    # checks below held at all 20 draws (agreement 0.988 at worst, no rank off by more than its near ties)
    assert pred["ess"].values.min() > 500
    near = (gaps < 0.05).sum(axis=1)
    kept_exact = exact > math.floor(0.2 * 26 + 1e-9)
    kept = rank > math.floor(0.2 * 26 + 1e-9)
    record_property("ess_min", pred["ess"].values.min())
    record_property("rank_excess_over_near", int(np.max(np.abs(rank - exact) - near)))
    record_property("rank_agreement", np.mean(rank == exact))
    record_property("kept_agreement", np.mean(kept == kept_exact))
    assert np.all(np.abs(rank - exact) <= near)
    assert np.mean(rank == exact) >= 0.9
    # and the set: rank > floor(alpha (n + 1)) in integers, on the exact ranks
    assert np.mean(kept == kept_exact) >= 0.97


def _direct_scores(ll, lf):
    """sigma_i and sigma_{n+1} by a double loop over draws and points, with math.fsum."""
    S, n = ll.shape
    lse = max(lf) + math.log(math.fsum(math.exp(v - max(lf)) for v in lf))
    w = [math.exp(v - lse) for v in lf]
    sig = [math.fsum(w[s] * math.exp(ll[s, i]) for s in range(S)) for i in range(n)]
    sig_new = math.fsum(w[s] * math.exp(lf[s]) for s in range(S))
    return sig, sig_new


@pytest.mark.parametrize("case", ["plain", "far", "underflow"])
def test_ranks_equal_a_direct_double_loop_exactly(case):
    """``far``: one training point 1000 nats below the others (the per-column shift);
    ``underflow``: its likelihood is high only at a draw the AOI weights give e^-800, so its
    score underflows in the matrix product and is recomputed in log space."""
    rng = np.random.default_rng(3)
    S, n, m, G = 7, 6, 3, 5
    ll = rng.normal(-1.0, 1.0, size=(S, n))
    lf = rng.normal(-1.0, 1.0, size=(S, m, G))
    if case == "far":
        ll[:, 2] -= 1000.0
    if case == "underflow":
        ll[1:, 2] -= 1000.0
        lf[0] -= 800.0
    grid = np.linspace(-1, 1, G)
    groups_tr = np.array(["a", "b", "a", "b", "a", "a"])
    groups_te = np.array(["a", "b", "a"])
    cb = ConformalBayes(confidence_level=[0.5, 0.7], min_grid_mass=0.0, pareto_k=False).fit(ll, groups=groups_tr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibprobWarning)  # tiny S: the ESS warning is expected
        marginal = cb.predict(lf, grid)
        grouped = cb.predict(lf, grid, groups=groups_te)
    for j in range(m):
        for g in range(G):
            sig, sig_new = _direct_scores(ll, lf[:, j, g])
            r_all = 1 + sum(s <= sig_new for s in sig)
            r_grp = 1 + sum(s <= sig_new for s, k in zip(sig, groups_tr, strict=True) if k == groups_te[j])
            n_j = int((groups_tr == groups_te[j]).sum())
            assert marginal["p_value"].values[j, g] == r_all / (n + 1)
            assert grouped["p_value"].values[j, g] == r_grp / (n_j + 1)
    # the set is {rank > floor(alpha (n + 1))}: at c = 0.5, n = 6 -> rank > 3
    kept = np.rint(marginal["p_value"].values * 7).astype(int) > 3
    lo = marginal["lower"].sel(confidence_level=0.5).values
    for j in range(m):
        if kept[j].any() and not kept[j, 0]:
            assert lo[j] == grid[np.flatnonzero(kept[j])[0] - 1]  # no refiner: the outer grid neighbour


def _coverage_rep(rng, n, alpha, n_draws):
    y_all = rng.standard_t(3, size=n + 1) * 2.0 + 1.0  # heavy tails, sd != 1: the model is wrong
    y, y_new = y_all[:n], y_all[n]
    m, sd = posterior(y)
    theta = rng.normal(m, sd, size=n_draws)
    ll = normal_logpdf(y[None, :], theta[:, None])
    grid = np.array([y_new, y_new + 0.01])  # the p-value at y_new itself: "exact" coverage
    logf = normal_logpdf(grid[None, None, :], theta[:, None, None])
    cb = ConformalBayes(confidence_level=1 - alpha, min_grid_mass=0.0, pareto_k=False, min_ess=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibprobWarning)  # the 2-point grid touches its own edge
        p = cb.fit(ll).predict(logf, grid)["p_value"].values[0, 0]
    z = stats.norm.ppf(1 - alpha / 2)
    bayes = abs(y_new - m) <= z * math.sqrt(S_NOISE**2 + sd**2)
    return p > alpha, bayes


@pytest.mark.seeded(2021)
def test_coverage_of_a_misspecified_model_over_250_repetitions(seed, record_property):
    """Conformal Bayes covers 1 - alpha (to 3 SE) where the misspecified model's Bayes interval does not (the
    repetitions' seed from the seed sweep, 2021 in the default run)."""
    rng = np.random.default_rng(seed)
    reps, n, alpha = 250, 30, 0.2
    hits = np.array([_coverage_rep(rng, n, alpha, 1000) for _ in range(reps)])
    cov, bayes = hits.mean(axis=0)
    se = math.sqrt(alpha * (1 - alpha) / reps)
    record_property("coverage", cov)
    record_property("bayes_coverage", bayes)
    assert 1 - alpha - 3 * se <= cov <= 1 - alpha + 1 / (n + 1) + 3 * se
    assert bayes < 1 - alpha - 3 * se  # the model is wrong: its own interval under-covers


@pytest.mark.seeded(7)
def test_grouped_coverage_holds_in_every_group_with_group_specific_noise(seed, record_property):
    """Grouped CB ranks within the group: per-group coverage ~ 1 - alpha where Bayes is off in both directions.

    Model: y ~ N(theta_k, 1) with independent N(0, 10^2) group means (exact posterior draws), but
    the data's noise sd is 0.3, 1 and 3 in the three groups (Fong & Holmes 2021, §5.3's misspec). The
    repetitions' seed from the seed sweep, 7 in the default run.
    """
    rng = np.random.default_rng(seed)
    sds, n_k, reps, alpha = np.array([0.3, 1.0, 3.0]), 12, 200, 0.2
    labels = np.repeat([0, 1, 2], n_k)
    hits, bayes = np.zeros((reps, 3), bool), np.zeros((reps, 3), bool)
    for r in range(reps):
        y = rng.normal(0, sds[labels])
        y_new = rng.normal(0, sds)
        draws = np.stack([rng.normal(*posterior(y[labels == k]), size=800) for k in range(3)], axis=1)
        ll = normal_logpdf(y[None, :], draws[:, labels])
        grid = np.stack([y_new, y_new + 0.01], axis=1)  # exact p-value at each y_new
        logf = normal_logpdf(grid[None], draws[:, :, None])
        cb = ConformalBayes(confidence_level=1 - alpha, min_grid_mass=0.0, pareto_k=False, min_ess=0.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CalibprobWarning)
            p = cb.fit(ll, groups=labels).predict(logf, grid, groups=[0, 1, 2])["p_value"].values[:, 0]
        hits[r] = p > alpha
        m, sd = np.array([posterior(y[labels == k]) for k in range(3)]).T
        bayes[r] = np.abs(y_new - m) <= stats.norm.ppf(1 - alpha / 2) * np.sqrt(1 + sd**2)
    se = math.sqrt(alpha * (1 - alpha) / reps)
    cov = hits.mean(axis=0)
    b = bayes.mean(axis=0)
    record_property("coverage_min", cov.min())
    record_property("coverage_max", cov.max())
    record_property("bayes_coverage_sd_0_3", b[0])
    record_property("bayes_coverage_sd_3", b[2])
    assert np.all(cov >= 1 - alpha - 3 * se) and np.all(cov <= 1 - alpha + 1 / (n_k + 1) + 3 * se)
    assert b[0] > 1 - alpha + 3 * se and b[2] < 1 - alpha - 3 * se


# ---------------------------------------------------------------------------
# output, diagnostics, persistence
# ---------------------------------------------------------------------------


def _conjugate_tree(seed):
    """40 draws of N(0, 1) in two schools, 2 x 1000 exact posterior draws of their mean, and two test points' grid."""
    rng = np.random.default_rng(seed)
    y = rng.normal(size=40)
    grid = np.linspace(y.min() - 3, y.max() + 3, 121)
    m, sd = posterior(y)
    theta = rng.normal(m, sd, size=(2, 1000))
    tree = xr.DataTree.from_dict(
        {
            "log_likelihood": xr.Dataset({"y": (("chain", "draw", "obs"), normal_logpdf(y, theta[..., None]))}),
            "observed_data": xr.Dataset(
                {"y": ("obs", y)}, coords={"obs": np.arange(40), "school": ("obs", np.repeat(["a", "b"], 20))}
            ),
        }
    )
    mu_new = np.array([0.0, 0.5])
    logf = xr.DataArray(
        normal_logpdf(grid[None, None, None, :], theta[..., None, None] + 0 * mu_new[:, None]),
        dims=("chain", "draw", "obs", "grid"),
    )
    return {"tree": tree, "y": y, "grid": grid, "logf": logf, "theta": theta}


@pytest.fixture(scope="module")
def fitted():
    return _conjugate_tree(5)


@pytest.mark.seeded(5)
def test_importance_weights_are_healthy_inside_the_sets_of_a_conjugate_posterior(seed, record_property):
    """Adding one candidate to 40 N(theta, 1) points moves the exact posterior (sd 1/sqrt(41)) a little: the
    log-weights' variance is about (y - m)^2 / 41 < 0.6 inside the 90 % sets, so the ESS of 2 000 draws stays near
    2000 exp(-0.6) ~ 1100 and the Pareto k well below 0.7; the limits (ESS > 100, k < 0.7) are the diagnostics'
    own warning thresholds, not a margin on a draw (the 20-seed sweep: ESS 1 644 and k 0.134 at worst)."""
    data = _conjugate_tree(seed)
    cb = ConformalBayes(confidence_level=[0.5, 0.9]).fit(data["tree"], groups="school")
    pred = cb.predict(data["logf"], data["grid"], groups=["a", "b"])
    record_property("min_ess", float(pred["min_ess"].values.min()))
    record_property("max_pareto_k", float(pred["pareto_k"].values.max()))
    assert pred["min_ess"].values.min() > 100 and (pred["pareto_k"].values < 0.7).all()


def test_tree_input_output_and_save_load_round_trip(fitted, tmp_path):
    cb = ConformalBayes(confidence_level=[0.5, 0.9]).fit(fitted["tree"], groups="school")
    assert cb.sample_shape_ == [2, 1000] and list(cb.train_groups_[:2]) == ["a", "a"]
    pred = cb.predict(fitted["logf"], fitted["grid"], groups=["a", "b"])
    assert pred.attrs["family"] == "interval" and calibprob.metrics.is_interval_family(pred)
    assert (pred["n_pieces"].values == 1).all() and not pred["touches_edge"].values.any()
    assert (pred["upper"] > pred["lower"]).all()
    assert (pred["lower"].sel(confidence_level=0.9) < pred["lower"].sel(confidence_level=0.5)).all()
    assert list(pred["n_ranked"].values) == [20, 20]
    # the hull ends are grid points, and grid_length counts the kept points
    step = fitted["grid"][1] - fitted["grid"][0]
    kept = pred["p_value"].values > 0.1
    np.testing.assert_allclose(pred["grid_length"].sel(confidence_level=0.9).values, kept.sum(axis=1) * step)
    # calibprob.evaluate scores it as any interval-only method (at the IAE levels too)
    levels = calibprob.metrics.interval_levels([0.5, 0.9])
    full = cb.predict(fitted["logf"], fitted["grid"], groups=["a", "b"], confidence_level=levels)
    score = calibprob.evaluate(full, np.zeros(2), confidence_level=[0.5, 0.9])
    assert score["coverage"].sel(confidence_level=0.9).item() == 1.0
    # a DataArray's named grid dimension may come in any position
    swapped = cb.predict(fitted["logf"].transpose("grid", "chain", "obs", "draw"), fitted["grid"], groups=["a", "b"])
    xr.testing.assert_identical(swapped, pred)
    path = cb.save(tmp_path / "cb.nc")
    back = calibprob.load(path)
    assert back.get_params() == cb.get_params()
    xr.testing.assert_identical(back.predict(fitted["logf"], fitted["grid"], groups=["a", "b"]), pred)


def test_low_ess_warns_and_a_too_small_group_gets_infinite_bounds(fitted):
    rng = np.random.default_rng(0)
    y = fitted["y"][:10]
    theta = rng.normal(*posterior(y), size=300)
    ll = normal_logpdf(y[None, :], theta[:, None])
    grid = np.linspace(-6, 6, 241)
    logf = normal_logpdf(grid[None, None, :], theta[:, None, None])
    cb = ConformalBayes(confidence_level=[0.5, 0.95], min_ess=250.0).fit(ll, groups=np.repeat(["big", "tiny"], [8, 2]))
    # c = 0.5 needs floor(0.5 (n_j + 1)) >= 1: n_j = 2 is enough; c = 0.95 needs n_j >= 19
    with pytest.warns(CalibprobWarning, match=r"confidence_level=0.95: group\(s\) tiny have fewer than 19 training"):
        pred = cb.predict(logf, grid, groups=["tiny"])
    assert np.isfinite(pred["lower"].sel(confidence_level=0.5).values).all()
    assert pred["lower"].sel(confidence_level=0.95).values.tolist() == [-np.inf]
    assert pred["upper"].sel(confidence_level=0.95).values.tolist() == [np.inf]
    # diagnostics are per level: the ESS warning names the level whose set boundary is short of min_ess
    ess = cb.predict(logf, grid, groups=["big"], confidence_level=0.5)["min_ess"].item()
    cb.set_params(min_ess=ess + 1.0)
    with pytest.warns(CalibprobWarning, match=r"effective sample size .*at level\(s\) 0.5 \(1 point\)"):
        cb.predict(logf, grid, groups=["big"])


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------


def test_tree_without_log_likelihood_names_the_fix(fitted):
    tree = xr.DataTree.from_dict({"observed_data": fitted["tree"]["observed_data"].to_dataset()})
    with pytest.raises(ValueError, match=r"no .*'log_likelihood' group.*pm\.compute_log_likelihood\(idata\)"):
        ConformalBayes().fit(tree)


def test_draws_differing_between_training_and_test_are_refused(fitted):
    cb = ConformalBayes().fit(fitted["tree"])
    with pytest.raises(ValueError, match=r"test_log_density has 999 draws but the training log-likelihood has 2000"):
        cb.predict(fitted["logf"].stack(s=("chain", "draw")).transpose("s", ...).values[:999], fitted["grid"])
    bad = fitted["logf"].isel(chain=[0, 1, 0])
    with pytest.raises(ValueError, match=r"same posterior draws, in the same order"):
        cb.predict(bad, fitted["grid"])


def test_nan_log_densities_are_refused(fitted):
    ll = fitted["tree"]["log_likelihood"]["y"].values.reshape(2000, -1).copy()
    ll[5, 3] = np.nan
    with pytest.raises(ValueError, match=r"log_likelihood must be finite log densities.*index \(5, 3\)"):
        ConformalBayes().fit(ll)
    logf = fitted["logf"].values.reshape(2000, 2, -1).copy()
    logf[0, 1, 7] = np.nan
    with pytest.raises(ValueError, match=r"test_log_density must be finite log densities"):
        ConformalBayes().fit(fitted["tree"]).predict(logf, fitted["grid"])
    logf[0, 1, 7] = -1.0
    logf[:, 0, 4] = -np.inf  # zero density at every draw: no add-one-in weights at that candidate
    with pytest.raises(ValueError, match=r"-inf at every draw for test point 0, grid value .*likelihood's support"):
        ConformalBayes().fit(fitted["tree"]).predict(logf, fitted["grid"])


def test_unseen_group_raises_unless_the_marginal_fallback_is_asked_for(fitted):
    cb = ConformalBayes().fit(fitted["tree"], groups="school")
    with pytest.raises(ValueError, match=r"never seen in training \(zz\).*fallback='pooled'"):
        cb.predict(fitted["logf"], fitted["grid"], groups=["a", "zz"])
    cb.set_params(fallback="pooled")
    pred = cb.predict(fitted["logf"], fitted["grid"], groups=["a", "zz"])
    assert pred["marginal_fallback"].values.tolist() == [False, True]
    assert pred["n_ranked"].values.tolist() == [20, 40]


def test_a_grid_that_misses_the_data_is_refused(fitted):
    cb = ConformalBayes().fit(fitted["tree"])
    narrow = np.linspace(-1, 1, fitted["grid"].size)
    with pytest.raises(ValueError, match=r"training targets span .* Widen the grid"):
        cb.predict(fitted["logf"], narrow)
    # no targets known (array input): the predictive-mass check still refuses a grid beside the bulk
    ll = fitted["tree"]["log_likelihood"]["y"].values.reshape(2000, -1)
    theta = fitted["theta"].reshape(-1)
    off = np.linspace(2.0, 8.0, 50)
    logf = normal_logpdf(off[None, None, :], theta[:, None, None])
    with pytest.raises(ValueError, match=r"puts only 0\.0\d+ of its mass .*Widen the grid"):
        ConformalBayes().fit(ll).predict(logf, off)


def test_other_bad_inputs_name_the_parameter(fitted):
    ll = fitted["tree"]["log_likelihood"]["y"].values.reshape(2000, -1)
    with pytest.raises(ValueError, match=r"fallback must be None or 'pooled'; got 'drop'"):
        ConformalBayes(fallback="drop").fit(ll)
    with pytest.raises(ValueError, match=r"groups= needs the training points' groups"):
        ConformalBayes().fit(ll).predict(fitted["logf"], fitted["grid"], groups=["a", "b"])
    with pytest.raises(ValueError, match=r"grid must be strictly increasing"):
        ConformalBayes().fit(ll).predict(fitted["logf"], fitted["grid"][::-1])
    with pytest.raises(ValueError, match=r"groups='county' \(the training points' labels\) names no coordinate"):
        ConformalBayes().fit(fitted["tree"], groups="county")
    with pytest.raises(calibprob.NotFittedError, match=r"Call fit"):
        ConformalBayes().predict(fitted["logf"], fitted["grid"])


def test_threads_over_blocks_give_bitwise_the_one_thread_sets(fitted):
    """n_jobs=2 runs blocks of test points in threads: every output bit equals the serial run's."""
    rng = np.random.default_rng(11)
    theta = fitted["theta"].reshape(-1)
    mu_new = rng.normal(size=9)  # 9 test points, blocks of one or two (chunk_size below): several blocks per thread
    grid = fitted["grid"]
    logf = normal_logpdf(grid[None, None, :], theta[:, None, None] + mu_new[None, :, None] * 0.1)
    ll = fitted["tree"]["log_likelihood"]["y"].values.reshape(theta.size, -1)
    runs = [
        ConformalBayes(confidence_level=[0.5, 0.9], chunk_size=2 * grid.size, n_jobs=n).fit(ll).predict(logf, grid)
        for n in (1, 2)
    ]
    xr.testing.assert_identical(runs[0], runs[1])
    with pytest.raises(ValueError, match=r"n_jobs must be >= 1; got 0"):
        ConformalBayes(n_jobs=0).fit(ll)


def test_predict_interval_is_predict_with_the_level_by_position(fitted):
    """The interval family's ``predict_interval`` (every interval method has it) returns ``predict``'s Dataset,
    but for the family's one rule on the dimension: ``predict`` keeps it for a scalar level, ``predict_interval``
    drops it (a scalar coordinate), and with no level follows the constructor's form."""
    cb = ConformalBayes(confidence_level=[0.5, 0.9]).fit(fitted["tree"], groups="school")
    direct = cb.predict(fitted["logf"], fitted["grid"], groups=["a", "b"], confidence_level=0.8)
    assert direct["lower"].dims == ("obs", "confidence_level") and direct.sizes["confidence_level"] == 1
    xr.testing.assert_identical(cb.predict_interval(fitted["logf"], fitted["grid"], [0.8], groups=["a", "b"]), direct)
    one = cb.predict_interval(fitted["logf"], fitted["grid"], 0.8, groups=["a", "b"])
    xr.testing.assert_identical(one, direct.isel(confidence_level=0))
    assert float(one["confidence_level"]) == 0.8
    assert cb.predict_interval(fitted["logf"], fitted["grid"], groups=["a", "b"]).sizes["confidence_level"] == 2
    single = ConformalBayes(confidence_level=0.8).fit(fitted["tree"])
    assert "confidence_level" not in single.predict_interval(fitted["logf"], fitted["grid"])["lower"].dims
