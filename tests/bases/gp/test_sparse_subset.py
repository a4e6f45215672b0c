"""Sparse GP at scale: hyperparameters on a seeded subset of rows, refined on all rows.

The refinement must land on the optimum the multi-start on all rows finds (same
bound value to rounding), with the same inducing inputs, and ``n_hyper_subset=None``
must be the all-rows fit exactly.
"""

import numpy as np
import pytest

from calibprob.bases.gp import SparseGaussianProcessRegressor, sparse
from calibprob.bases.gp._sparse_numerics import VFEObjectiveNumpy


def make_data(n, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 3))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.5 * X[:, 2] ** 2 + 0.3 * rng.normal(size=n)
    return X, y


@pytest.fixture(scope="module")
def data():
    return make_data(3000)


@pytest.mark.parametrize("mean", ["zero", "constant"])
def test_refined_subset_optimum_is_the_full_multistart_optimum(data, mean):
    X, y = data
    kw = dict(n_inducing=30, mean=mean, random_state=0)
    full = SparseGaussianProcessRegressor(n_hyper_subset=None, **kw).fit(X, y)
    sub = SparseGaussianProcessRegressor(n_hyper_subset=800, **kw).fit(X, y)
    np.testing.assert_array_equal(sub.inducing_points_, full.inducing_points_)
    # the bound (about -800 here) agrees to 1e-9 relative: the same optimum, not a nearby point
    assert sub.log_marginal_likelihood_value_ == pytest.approx(full.log_marginal_likelihood_value_, rel=1e-9, abs=1e-6)
    for key in ("lengthscale", "variance", "noise"):
        np.testing.assert_allclose(sub.theta_[key], full.theta_[key], rtol=1e-3)
    # and the bound there is a stationary point of the all-rows bound: no start of the
    # full multi-start found anything higher
    assert sub.log_marginal_likelihood_value_ >= max(full.fit_info_["objective_values"]) - 1e-6
    rec = sub.fit_info_["hyper_subset"]
    assert rec["size"] == 800 and rec["indices"].shape == (800,)
    assert np.all(np.diff(rec["indices"]) > 0)
    assert rec["hessian_evaluations"] == 2 * (X.shape[1] + 2)
    # the refinement on all rows takes a fraction of the multi-start's full-data evaluations
    n_full = sum(full.fit_info_["n_evaluations"].values())
    n_sub = sum(sub.fit_info_["n_evaluations"].values())
    assert n_sub <= n_full / 4
    assert "hyper_subset" not in full.fit_info_


def test_subset_fit_is_the_estimators_own_fit_on_those_rows(data):
    X, y = data
    sub = SparseGaussianProcessRegressor(n_inducing=30, random_state=0, n_hyper_subset=600).fit(X, y)
    rec = sub.fit_info_["hyper_subset"]
    idx = rec["indices"]
    manual = SparseGaussianProcessRegressor(
        n_inducing=30, random_state=0, n_hyper_subset=None, inducing_points=sub.inducing_points_
    ).fit(X[idx], y[idx])
    for key in ("lengthscale", "variance", "noise"):
        np.testing.assert_array_equal(rec["theta"][key], manual.theta_[key])
    # the refinement started where the subset stopped (on the standardised scale of all rows)
    start = sub.fit_info_["starts"][0]
    s2 = sub.fit_info_["y_scale"] ** 2
    np.testing.assert_allclose(np.exp(start[:3]), manual.theta_["lengthscale"], rtol=1e-12)
    np.testing.assert_allclose(np.exp(start[3]) * s2, manual.theta_["variance"], rtol=1e-12)


def test_refinement_ends_at_a_stationary_point_of_the_all_rows_bound(data):
    X, y = data
    gp = SparseGaussianProcessRegressor(n_inducing=30, random_state=1, n_hyper_subset=500).fit(X, y)
    s = gp.fit_info_["y_scale"]
    fun = VFEObjectiveNumpy("se", 2, "zero", "ml", gp.jitter, X, y / s, gp.inducing_points_)
    x = np.log(np.r_[gp.theta_["lengthscale"], gp.theta_["variance"] / s**2, gp.theta_["noise"] / s**2])
    _, grad = fun.value_and_grad(x)
    # L-BFGS-B's stopping rule on the log-hyperparameters (the bound itself is about -800)
    assert np.max(np.abs(grad)) < 1e-2


def test_auto_uses_a_subset_from_the_measured_size_on(data, monkeypatch):
    X, y = data
    small = SparseGaussianProcessRegressor(n_inducing=20, random_state=0, n_restarts=1).fit(X[:1000], y[:1000])
    assert "hyper_subset" not in small.fit_info_  # below AUTO_SUBSET_MIN_N: every row
    none = SparseGaussianProcessRegressor(n_inducing=20, random_state=0, n_restarts=1, n_hyper_subset=None)
    none.fit(X[:1000], y[:1000])
    np.testing.assert_array_equal(none.theta_["lengthscale"], small.theta_["lengthscale"])
    monkeypatch.setattr(sparse, "AUTO_SUBSET_MIN_N", 2000)
    monkeypatch.setattr(sparse, "AUTO_SUBSET_SIZE", 700)
    auto = SparseGaussianProcessRegressor(n_inducing=20, random_state=0, n_restarts=1).fit(X, y)
    assert auto.fit_info_["hyper_subset"]["size"] == 700
    # a subset as large as the data is every row
    everything = SparseGaussianProcessRegressor(n_inducing=20, random_state=0, n_restarts=1, n_hyper_subset=5000)
    assert "hyper_subset" not in everything.fit(X, y).fit_info_


def test_no_subset_without_an_lbfgs_fit(data):
    X, y = data
    theta = {"lengthscale": np.ones(3), "variance": 1.0, "noise": 0.1}
    fixed = SparseGaussianProcessRegressor(n_inducing=20, theta=theta, optimize=False, n_hyper_subset=500)
    assert "hyper_subset" not in fixed.fit(X, y).fit_info_
    adam = SparseGaussianProcessRegressor(n_inducing=20, optimizer="adam", adam_steps=3, n_hyper_subset=500)
    assert "hyper_subset" not in adam.fit(X, y).fit_info_


@pytest.mark.parametrize("bad", ["all", 2, 2.5, True, -1])
def test_n_hyper_subset_bad_input(bad):
    X, y = make_data(50)
    with pytest.raises(ValueError, match=r"n_hyper_subset must be 'auto', None or an integer >= 3.*got .*Use None"):
        SparseGaussianProcessRegressor(n_hyper_subset=bad).fit(X, y)
