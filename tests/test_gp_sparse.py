"""Sparse VFE GP against the exact GP with the same hyperparameters."""

import numpy as np
import pytest

from calibprob.gp import (
    GaussianProcessRegressor,
    SparseGaussianProcessRegressor,
    kmeans_inducing_points,
)

THETA = {"lengthscale": np.array([0.3, 0.4]), "variance": 1.0, "noise": 0.01}


def make_data(n, seed=7):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    y = np.sin(6 * X[:, 0]) + np.cos(4 * X[:, 1]) + 0.1 * rng.normal(size=n)
    return X, y


@pytest.fixture(scope="module")
def big():
    X, y = make_data(2000)
    Xt = np.random.default_rng(8).uniform(size=(500, 2))
    return X, y, Xt


@pytest.mark.parametrize("mean", ["zero", "constant"])
def test_vfe_close_to_exact_at_n2000_m300(big, mean):
    """Acceptance point: n = 2000, 300 k-means inducing points, same θ (ℓ = 0.3, 0.4).

    Measured: max |Δμ| / sd(y) = 2.4e-5, max relative Δσ = 1.2e-4 (observation
    scale), 1.5e-3 (latent σ); bound 0.021 nats below the exact log likelihood.
    """
    X, y, Xt = big
    exact = GaussianProcessRegressor(theta=THETA, optimize=False, mean=mean).fit(X, y)
    vfe = SparseGaussianProcessRegressor(n_inducing=300, theta=THETA, optimize=False, mean=mean, random_state=0).fit(
        X, y
    )
    assert vfe.inducing_points_.shape == (300, 2)
    m1, s1 = exact.predict_mean_std(Xt)
    m2, s2 = vfe.predict_mean_std(Xt)
    assert np.max(np.abs(m1 - m2)) / np.std(y) < 1e-4
    assert np.max(np.abs(s2 / s1 - 1)) < 1e-3
    l1 = exact.predict_mean_std(Xt, include_noise=False)[1]
    l2 = vfe.predict_mean_std(Xt, include_noise=False)[1]
    assert np.max(np.abs(l2 / l1 - 1)) < 1e-2
    gap = exact.log_marginal_likelihood() - vfe.log_marginal_likelihood()
    assert 0 <= gap < 0.1


@pytest.mark.parametrize("mean, objective", [("zero", "ml"), ("constant", "ml"), ("constant", "reml")])
def test_vfe_is_a_lower_bound_and_exact_when_Z_is_X(mean, objective):
    X, y = make_data(80, seed=3)
    rng = np.random.default_rng(0)
    Xt = rng.uniform(size=(30, 2))
    for kernel, p in [("se", 2), ("matern", 1)]:
        for th in (THETA, {"lengthscale": 0.15, "variance": 2.0, "noise": 0.1}):
            common = dict(kernel=kernel, p=p, mean=mean, objective=objective, theta=th, optimize=False)
            exact = GaussianProcessRegressor(**common).fit(X, y)
            few = SparseGaussianProcessRegressor(n_inducing=10, random_state=0, **common).fit(X, y)
            assert few.log_marginal_likelihood() < exact.log_marginal_likelihood()
            full = SparseGaussianProcessRegressor(inducing_points=X, jitter=1e-10, **common).fit(X, y)
            assert full.log_marginal_likelihood() == pytest.approx(exact.log_marginal_likelihood(), abs=1e-4)
            m1, s1 = exact.predict_mean_std(Xt)
            m2, s2 = full.predict_mean_std(Xt)
            np.testing.assert_allclose(m2, m1, atol=1e-5)
            np.testing.assert_allclose(s2, s1, rtol=1e-5)
            if mean == "constant":
                assert full.mean_ == pytest.approx(exact.mean_, abs=1e-5)


@pytest.fixture(scope="module")
def small_fits():
    X, y = make_data(400, seed=1)
    vfe = SparseGaussianProcessRegressor(n_inducing=40, random_state=0).fit(X, y)
    exact = GaussianProcessRegressor(random_state=0).fit(X, y)
    return X, y, vfe, exact


def test_vfe_fit_maximises_the_bound_and_is_near_exact_fit(small_fits):
    """n = 400, m = 40. Measured: ℓ = (0.4025, 0.5671), σ_n² = 0.01053 (VFE) against
    (0.4030, 0.5678), 0.01052 (exact ML); asserted within 2 %."""
    X, y, vfe, exact = small_fits
    assert all(vfe.fit_info_["converged"])
    # the optimiser's θ beats the exact GP's θ on the VFE bound ...
    assert vfe.log_marginal_likelihood() >= vfe.log_marginal_likelihood(exact.theta_) - 1e-6
    # ... and the bound stays below the exact likelihood at that θ
    assert vfe.log_marginal_likelihood() <= exact.log_marginal_likelihood(vfe.theta_)
    np.testing.assert_allclose(vfe.theta_["lengthscale"], exact.theta_["lengthscale"], rtol=0.02)
    np.testing.assert_allclose(vfe.theta_["noise"], exact.theta_["noise"], rtol=0.02)


def test_pymc_vfe_model_equals_numpy_bound(small_fits):
    _, _, vfe, _ = small_fits
    th = {"lengthscale": np.array([0.25, 0.5]), "variance": 0.8, "noise": 0.05}
    point = {
        "log_lengthscale": np.log(th["lengthscale"]),
        "log_variance": np.log(th["variance"]),
        "log_noise": np.log(th["noise"]),
    }
    lp = vfe.build_model(priors="flat").compile_logp(mode="FAST_COMPILE")(point)
    assert lp == pytest.approx(vfe.log_marginal_likelihood(th), rel=1e-9)


def test_kmeans_inducing_points_seeded():
    X, _ = make_data(500)
    a = kmeans_inducing_points(X, 30, random_state=3)
    b = kmeans_inducing_points(X, 30, random_state=3)
    np.testing.assert_array_equal(a, b)
    assert a.shape[1] == 2 and 25 <= a.shape[0] <= 30
    assert X.min(0).min() <= a.min() and a.max() <= X.max()
    np.testing.assert_array_equal(kmeans_inducing_points(X[:20], 30), X[:20])


def test_sparse_bad_input():
    X, y = make_data(50)
    with pytest.raises(ValueError, match="needs noise=True"):
        SparseGaussianProcessRegressor(noise=False).fit(X, y)
    with pytest.raises(ValueError, match="n_inducing must be >= 1; got 0"):
        SparseGaussianProcessRegressor(n_inducing=0).fit(X, y)
    with pytest.raises(ValueError, match="inducing_points has 3 columns but X has 2"):
        SparseGaussianProcessRegressor(inducing_points=np.zeros((5, 3)), theta=THETA, optimize=False).fit(X, y)
    with pytest.raises(ValueError, match=r"X must be 2-D.*reshape\(-1, 1\)"):
        SparseGaussianProcessRegressor().fit(X[:, 0], y)
    with pytest.raises(ValueError, match="jitter must be in \\(0, 1\\)"):
        SparseGaussianProcessRegressor(jitter=0.0).fit(X, y)


@pytest.mark.slow
def test_vfe_fit_at_n2000_matches_exact_fit(big):
    """Full fit, n = 2000, m = 300 (~15 s for VFE, ~2 min exact): θ within 5 %."""
    X, y, Xt = big
    vfe = SparseGaussianProcessRegressor(n_inducing=300, random_state=0).fit(X, y)
    exact = GaussianProcessRegressor(random_state=0).fit(X, y)
    np.testing.assert_allclose(vfe.theta_["lengthscale"], exact.theta_["lengthscale"], rtol=0.05)
    np.testing.assert_allclose(vfe.theta_["noise"], exact.theta_["noise"], rtol=0.05)
    m1, _ = exact.predict_mean_std(Xt)
    m2, _ = vfe.predict_mean_std(Xt)
    assert np.max(np.abs(m1 - m2)) / np.std(y) < 1e-3
