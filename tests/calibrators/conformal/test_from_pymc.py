"""The PyMC door to conformal Bayes: ``calibprob.conformal_bayes(model, idata, X_new)``.

Posterior draws are written by hand (no NUTS: the door only reads draws), so the
expected log densities are known exactly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import calibprob
from calibprob.calibrators.conformal.bayes.from_pymc import _closed_form_logpdf, _Door

pm = pytest.importorskip("pymc")
az = pytest.importorskip("arviz")

N, D, CHAINS, DRAWS = 60, 2, 2, 400


def _model(X, y, likelihood="normal"):
    with pm.Model() as model:
        xd = pm.Data("X", X)
        yd = pm.Data("y", y)
        b = pm.Normal("b", 0, 5, shape=D)
        s = pm.HalfNormal("s", 1)
        if likelihood == "normal":
            pm.Normal("lik", xd @ b, s, observed=yd, shape=xd.shape[0])
        elif likelihood == "student":
            pm.StudentT("lik", nu=4.0, mu=xd @ b, sigma=s, observed=yd, shape=xd.shape[0])
        else:
            pm.Laplace("lik", xd @ b, s, observed=yd, shape=xd.shape[0])
    return model


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(42)
    X = rng.normal(size=(N, D))
    y = X @ np.array([1.0, -1.0]) + rng.normal(size=N)
    post = {
        "b": rng.normal([1.0, -1.0], 0.1, size=(CHAINS, DRAWS, D)),
        "s": np.abs(rng.normal(1.0, 0.05, size=(CHAINS, DRAWS))),
    }
    X_new = rng.normal(size=(5, D))
    return {"X": X, "y": y, "post": post, "X_new": X_new}


def _idata(problem, model):
    idata = az.from_dict({"posterior": problem["post"], "observed_data": {"lik": problem["y"]}})
    pm.compute_log_likelihood(idata, model=model, progressbar=False)
    return idata


def test_the_door_equals_the_core_fed_by_hand(problem):
    model = _model(problem["X"], problem["y"])
    idata = _idata(problem, model)
    grid = np.linspace(-8, 8, 81)
    pred = calibprob.conformal_bayes(model, idata, problem["X_new"], grid=grid, confidence_level=[0.8, 0.9])
    b = problem["post"]["b"].reshape(-1, D)
    s = problem["post"]["s"].reshape(-1)
    mu = b @ problem["X_new"].T  # (S, m)
    logf = stats.norm.logpdf(grid[None, None, :], mu[:, :, None], s[:, None, None])
    ll = stats.norm.logpdf(problem["y"][None, :], (b @ problem["X"].T), s[:, None])
    by_hand = (
        calibprob.ConformalBayes(confidence_level=[0.8, 0.9])
        .fit(ll, y=problem["y"])
        .predict(
            logf, grid, log_density=lambda rows, y: stats.norm.logpdf(y[None], mu[:, rows, None], s[:, None, None])
        )
    )
    np.testing.assert_array_equal(pred["p_value"].values, by_hand["p_value"].values)
    # the ends are refined on the exact p-value by the door's own density: the same bisection by hand
    np.testing.assert_allclose(pred["lower"].values, by_hand["lower"].values, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pred["upper"].values, by_hand["upper"].values, rtol=0, atol=1e-12)
    assert pred.attrs["log_density"] == "closed-form" and pred.attrs["interval_ends"].startswith("refined")
    # the user's model keeps its data
    assert model["X"].get_value().shape == (N, D)


@pytest.mark.parametrize("likelihood", ["normal", "student"])
def test_the_logp_path_equals_the_closed_form_to_1e_10(problem, likelihood):
    model = _model(problem["X"], problem["y"], likelihood)
    idata = _idata(problem, model)
    g = np.broadcast_to(np.linspace(-6, 6, 31), (5, 31))
    new = {"X": problem["X_new"]}
    family, params = _Door(model, idata, None, None).closed_form_params(new, 5)
    fast = _closed_form_logpdf(family, [p[:, :, None] for p in params], g[None])
    slow = np.concatenate([blk for _, blk in _Door(model, idata, None, None).logp_blocks(new, g)], axis=1)
    assert fast.shape == (CHAINS * DRAWS, 5, 31)
    # Normal: to 1e-10. Student-t: PyTensor's gammaln/log1p terms differ from SciPy's by ~6e-10
    # (relative ~7e-10, measured), far below anything that moves a rank
    np.testing.assert_allclose(slow, fast, rtol=0, atol=1e-10 if likelihood == "normal" else 2e-9)
    p_fast = calibprob.conformal_bayes(model, idata, new, grid=g[0], method="closed-form")
    p_slow = calibprob.conformal_bayes(model, idata, new, grid=g[0], method="logp")
    np.testing.assert_array_equal(p_fast["p_value"].values, p_slow["p_value"].values)
    np.testing.assert_array_equal(p_fast["lower"].values, p_slow["lower"].values)


def test_any_likelihood_pymc_can_score_goes_through_logp(problem):
    model = _model(problem["X"], problem["y"], "laplace")
    idata = _idata(problem, model)
    grid = np.linspace(-8, 8, 41)
    pred = calibprob.conformal_bayes(model, idata, problem["X_new"], grid=grid)
    assert pred.attrs["log_density"] == "logp"
    b = problem["post"]["b"].reshape(-1, D)
    s = problem["post"]["s"].reshape(-1)
    logf = stats.laplace.logpdf(grid[None, None, :], (b @ problem["X_new"].T)[:, :, None], s[:, None, None])
    by_hand = calibprob.ConformalBayes().fit(idata).predict(logf, grid)
    np.testing.assert_array_equal(pred["p_value"].values, by_hand["p_value"].values)
    with pytest.raises(ValueError, match=r"method='closed-form' covers Normal and Student-t.*Use method='logp'"):
        calibprob.conformal_bayes(model, idata, problem["X_new"], grid=grid, method="closed-form")


def test_a_tree_without_log_likelihood_names_the_fix(problem):
    model = _model(problem["X"], problem["y"])
    idata = az.from_dict({"posterior": problem["post"], "observed_data": {"lik": problem["y"]}})
    with pytest.raises(ValueError, match=r"pm\.compute_log_likelihood\(idata\)"):
        calibprob.conformal_bayes(model, idata, problem["X_new"])


def test_bad_new_data_is_refused(problem):
    model = _model(problem["X"], problem["y"])
    idata = _idata(problem, model)
    with pytest.raises(
        ValueError, match=r"X_new names \['Z'\], which are not pm.Data inputs of the model; use the names \['X'\]"
    ):
        calibprob.conformal_bayes(model, idata, {"Z": problem["X_new"]})
    with pytest.raises(ValueError, match=r"method must be one of 'auto', 'closed-form', 'logp'; got 'mc'"):
        calibprob.conformal_bayes(model, idata, problem["X_new"], method="mc")


def test_the_door_passes_groups_through(problem):
    model = _model(problem["X"], problem["y"])
    idata = _idata(problem, model)
    grid = np.linspace(-8, 8, 81)
    labels = np.repeat(["u", "v", "w"], N // 3)
    pred = calibprob.conformal_bayes(
        model, idata, problem["X_new"], grid=grid, groups=labels, groups_new=["u", "v", "w", "u", "v"]
    )
    by_hand = calibprob.ConformalBayes().fit(idata, groups=labels)
    b = problem["post"]["b"].reshape(-1, D)
    s = problem["post"]["s"].reshape(-1)
    logf = stats.norm.logpdf(grid[None, None, :], (b @ problem["X_new"].T)[:, :, None], s[:, None, None])
    expected = by_hand.predict(logf, grid, groups=["u", "v", "w", "u", "v"])
    np.testing.assert_array_equal(pred["p_value"].values, expected["p_value"].values)
    assert pred["n_ranked"].values.tolist() == [N // 3] * 5


def test_return_calibrator_gives_the_fitted_conformal_bayes_that_saves_and_predicts_alike(problem, tmp_path):
    model = _model(problem["X"], problem["y"])
    idata = _idata(problem, model)
    grid = np.linspace(-8, 8, 81)
    pred, cb = calibprob.conformal_bayes(model, idata, problem["X_new"], grid=grid, return_calibrator=True)
    assert isinstance(cb, calibprob.ConformalBayes) and cb.n_train_ == N
    b, s = problem["post"]["b"].reshape(-1, D), problem["post"]["s"].reshape(-1)
    logf = stats.norm.logpdf(grid[None, None, :], (b @ problem["X_new"].T)[:, :, None], s[:, None, None])
    path = tmp_path / "cb.nc"
    cb.save(path)
    again = calibprob.load(path).predict(logf, grid)
    np.testing.assert_array_equal(again["p_value"].values, pred["p_value"].values)


@pytest.mark.parametrize("likelihood", ["normal", "student"])
def test_a_default_call_far_outside_the_training_range_returns_sets_per_point_and_level(problem, likelihood):
    """The default grid is each test point's own: a point 40 sd away from the data gets a set, not a refusal."""
    model = _model(problem["X"], problem["y"], likelihood)
    idata = _idata(problem, model)
    far = np.vstack([problem["X_new"][:2], [[40.0, -40.0], [-25.0, 60.0]]])  # predictive means ~ +80, -85
    with pytest.warns(calibprob.CalibprobWarning):  # few draws at such x: the diagnostics say so, per level
        pred = calibprob.conformal_bayes(model, idata, far, confidence_level=[0.8, 0.9])
    assert np.isfinite(pred["lower"].values).all() and np.isfinite(pred["upper"].values).all()
    mu = (problem["post"]["b"].reshape(-1, D) @ far.T).mean(axis=0)
    inside = (pred["lower"].values < mu[:, None]) & (mu[:, None] < pred["upper"].values)
    assert inside.all()
    assert pred["min_ess"].dims == ("obs", "confidence_level") and pred["pareto_k"].dims == ("obs", "confidence_level")
    assert pred.attrs["grid_rule"].startswith("per test point")
    # every draw leaves at most GRID_TAIL of its mass off the point's grid
    g = pred["grid"].values
    s = problem["post"]["s"].reshape(-1)
    b = problem["post"]["b"].reshape(-1, D)
    dist = stats.norm if likelihood == "normal" else stats.t(4.0)
    z_lo, z_hi = ((g[None, :, [0, -1]] - (b @ far.T)[:, :, None]) / s[:, None, None]).transpose(2, 0, 1)
    mass = dist.cdf(z_hi) - dist.cdf(z_lo)
    assert mass.min() >= 1 - 1.0001e-3


def test_the_logp_paths_default_grid_is_each_points_own(problem):
    """Any likelihood: a point 40 sd away gets a grid from its own predictive draws, holding its mass."""
    model = _model(problem["X"], problem["y"], "laplace")
    idata = _idata(problem, model)
    far = np.vstack([problem["X_new"][:2], [[40.0, -40.0], [-25.0, 60.0]]])
    with pytest.warns(calibprob.CalibprobWarning, match="effective sample size"):
        pred = calibprob.conformal_bayes(model, idata, far, confidence_level=[0.8, 0.9])
    assert pred.attrs["log_density"] == "logp" and pred.attrs["grid_rule"].startswith("per test point: the range")
    assert np.isfinite(pred["lower"].values).all() and np.isfinite(pred["upper"].values).all()
    b, s = problem["post"]["b"].reshape(-1, D), problem["post"]["s"].reshape(-1)
    mu = b @ far.T
    assert ((pred["lower"].values < mu.mean(0)[:, None]) & (mu.mean(0)[:, None] < pred["upper"].values)).all()
    assert pred["min_ess"].dims == ("obs", "confidence_level") and not pred["touches_edge"].values.any()
    g = pred["grid"].values  # the Laplace mixture's mass on each point's grid, by scipy
    mass = (stats.laplace.cdf(g[None, :, -1], mu, s[:, None]) - stats.laplace.cdf(g[None, :, 0], mu, s[:, None])).mean(
        0
    )
    assert mass.min() > 0.999
    with pytest.raises(
        TypeError, match=r"random_seed \(a seed for the default grid's draws, e.g. 0\) must be an integer"
    ):
        calibprob.conformal_bayes(model, idata, far, random_seed=0.5)
    with pytest.raises(ValueError, match=r"random_seed .* must be >= 0; got -1"):
        calibprob.conformal_bayes(model, idata, far, random_seed=-1)
    again = calibprob.conformal_bayes(model, idata, far, confidence_level=[0.8, 0.9], random_seed=0)
    np.testing.assert_array_equal(again["lower"].values, pred["lower"].values)  # seeded: reproducible


def test_a_default_grid_too_narrow_for_the_set_is_widened_until_the_set_fits(problem):
    """A model far too sure of itself: its set is wider than its predictive draws; the grid grows to hold it."""
    rng = np.random.default_rng(7)
    y_noisy = problem["X"] @ np.array([1.0, -1.0]) + 4.0 * rng.normal(size=N)
    model = _model(problem["X"], y_noisy, "laplace")
    post = {"b": problem["post"]["b"], "s": np.full((CHAINS, DRAWS), 0.3)}  # the noise is ~4, the model says 0.3
    idata = az.from_dict({"posterior": post, "observed_data": {"lik": y_noisy}})
    pm.compute_log_likelihood(idata, model=model, progressbar=False)
    new = problem["X_new"][:3]
    pred = calibprob.conformal_bayes(model, idata, new, confidence_level=0.8, n_grid=200)
    assert "widened" in pred.attrs["grid_rule"] and not pred["touches_edge"].values.any()
    # the same sets on one wide, fine grid given by hand (ends agree to the refinement's tolerance)
    wide = np.linspace(-40.0, 40.0, 2001)
    ref = calibprob.conformal_bayes(model, idata, new, confidence_level=0.8, grid=wide)
    assert not ref["touches_edge"].values.any()
    tol = 2 * (wide[1] - wide[0]) + 2 * float(np.diff(pred["grid"].values, axis=1).max())
    np.testing.assert_allclose(pred["lower"].values, ref["lower"].values, atol=tol)
    np.testing.assert_allclose(pred["upper"].values, ref["upper"].values, atol=tol)


def test_the_door_checks_x_new_width_and_the_trees_draws_first(problem):
    # issue 36: a narrower X_new reached the model's matrix product; a truncated posterior was paired
    # with the log-likelihood of the whole one
    model = _model(problem["X"], problem["y"])
    idata = _idata(problem, model)
    with pytest.raises(
        ValueError,
        match=r"X_new\['X'\] has rows of shape \(1,\) but the model's container 'X' holds rows of shape \(2,\)",
    ):
        calibprob.conformal_bayes(model, idata, problem["X_new"][:, :1])
    short = idata.copy()
    short["posterior"] = idata["posterior"].isel(draw=slice(0, DRAWS // 2))
    with pytest.raises(ValueError, match=r"do not hold the same draws .*posterior \(chain=\d+, draw=\d+\)"):
        calibprob.conformal_bayes(model, idata=short, X_new=problem["X_new"])


def test_labelled_groups_follow_x_new_rows_and_the_training_observations(problem):
    """issue 36: groups_new as a Series follow X_new's row index; groups (training) as a Series follow obs labels.

    The 0.1 call (``train_groups=`` the training labels, ``groups=`` X_new's) warns and gives the same sets."""
    model = _model(problem["X"], problem["y"])
    idata = _idata(problem, model)
    grid = np.linspace(-8, 8, 81)
    labels = np.repeat(["u", "v", "w"], N // 3)
    test = ["u", "v", "w", "u", "v"]
    expected = calibprob.conformal_bayes(model, idata, problem["X_new"], grid=grid, groups=labels, groups_new=test)
    with pytest.warns(
        FutureWarning, match=r"conformal_bayes\(train_groups=\.\.\., groups=\.\.\.\) is deprecated.*groups_new"
    ):
        old = calibprob.conformal_bayes(model, idata, problem["X_new"], grid=grid, train_groups=labels, groups=test)
    np.testing.assert_array_equal(old["p_value"].values, expected["p_value"].values)
    with pytest.raises(TypeError, match=r"train_groups= \(0\.1\) and groups_new= \(0\.2\.0\) together"):
        calibprob.conformal_bayes(model, idata, problem["X_new"], grid=grid, train_groups=labels, groups_new=test)
    rows = ["r0", "r1", "r2", "r3", "r4"]
    x_new = pd.DataFrame(problem["X_new"], index=rows)
    obs_ids = idata["log_likelihood"]["lik"].indexes[idata["log_likelihood"]["lik"].dims[-1]]
    perm = np.random.default_rng(0).permutation(N)
    pred = calibprob.conformal_bayes(
        model,
        idata,
        x_new,
        grid=grid,
        groups=pd.Series(labels, index=obs_ids).iloc[perm],
        groups_new=pd.Series(test, index=rows).iloc[[4, 2, 0, 3, 1]],
    )
    np.testing.assert_array_equal(pred["p_value"].values, expected["p_value"].values)
    assert pred["group"].values.tolist() == test
    with pytest.raises(ValueError, match=r"groups_new's index does not match X_new's row labels: 'zz'"):
        calibprob.conformal_bayes(
            model, idata, x_new, grid=grid, groups=labels, groups_new=pd.Series(test, index=[*rows[:4], "zz"])
        )


@pytest.mark.parametrize("method", ["closed-form", "logp"])
def test_a_second_call_on_the_same_model_reuses_the_clone_and_compiled_functions(problem, method, monkeypatch):
    model = _model(problem["X"], problem["y"])
    idata = _idata(problem, model)
    grid = np.linspace(-8, 8, 41)
    first = calibprob.conformal_bayes(model, idata, problem["X_new"], grid=grid, method=method)
    builds = []
    real = _Door._build
    monkeypatch.setattr(_Door, "_build", lambda self, *a: builds.append(a) or real(self, *a))
    second = calibprob.conformal_bayes(model, idata, problem["X_new"][::-1], grid=grid, method=method)
    assert builds == []  # nothing compiled on the second call
    np.testing.assert_array_equal(second["p_value"].values, first["p_value"].values[::-1])
    np.testing.assert_array_equal(second["upper"].values, first["upper"].values[::-1])
    # another model (or the same model grown by a variable) is compiled afresh
    other = _model(problem["X"], problem["y"])
    calibprob.conformal_bayes(other, _idata(problem, other), problem["X_new"], grid=grid, method=method)
    assert len(builds) == 1


def test_the_compiled_normal_density_is_numpys_bit_for_bit():
    from calibprob.calibrators.conformal.bayes.from_pymc import _normal_logpdf

    rng = np.random.default_rng(3)
    mu, sigma = rng.normal(size=(50, 4)), rng.uniform(0.1, 3.0, size=(50, 4))
    y = rng.normal(0, 3, size=(4, 17))
    ref = _closed_form_logpdf("NormalRV", [mu[:, :, None], sigma[:, :, None]], y[None])
    assert np.array_equal(_normal_logpdf(mu, sigma, y), ref)
    np.testing.assert_allclose(ref, stats.norm.logpdf(y[None], mu[:, :, None], sigma[:, :, None]), rtol=1e-13)


@pytest.mark.parametrize("method", ["closed-form", "logp"])
def test_end_only_mode_through_the_door_gives_the_full_grids_sets(problem, method, monkeypatch):
    """``grid_mode="ends"`` passed to the door: the same refined sets and diagnostics as the full grid, on the
    fused path (the large-block arithmetic) and with each point's default grid."""
    from calibprob.calibrators.conformal.bayes import _numerics as nm

    monkeypatch.setattr(nm, "FUSED_MIN", 0)
    model = _model(problem["X"], problem["y"], "laplace" if method == "logp" else "normal")
    idata = _idata(problem, model)
    x_new = np.r_[problem["X_new"], problem["X_new"][:3] * 2.5]
    out = {}
    for mode in ("full", "ends"):
        out[mode] = calibprob.conformal_bayes(
            model, idata, x_new, method=method, confidence_level=[0.5, 0.8, 0.9], min_ess=0.0, grid_mode=mode
        )
    full, ends = out["full"], out["ends"]
    for v in ("lower", "upper", "n_pieces", "touches_edge", "grid_length", "min_ess", "pareto_k", "ess", "grid"):
        np.testing.assert_array_equal(ends[v].values, full[v].values, err_msg=v)
    ev = ends["evaluated"].values
    assert ends.attrs["grid_mode"] == "ends" and ends.attrs["n_full_grid"] == 0 and ev.mean() < 0.45
    np.testing.assert_array_equal(ends["p_value"].values[ev], full["p_value"].values[ev])
    assert np.isfinite(ends["lower"].values).all() and ends.attrs["interval_ends"] == full.attrs["interval_ends"]
