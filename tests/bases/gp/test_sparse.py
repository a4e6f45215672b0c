"""Sparse VFE GP against the exact GP with the same hyperparameters."""

import numpy as np
import pytest

from calibprob.bases.gp import GaussianProcessRegressor, SparseGaussianProcessRegressor, kmeans_inducing_points

THETA = {"lengthscale": np.array([0.3, 0.4]), "variance": 1.0, "noise": 0.01}


@pytest.fixture(scope="module")
def big(sine_surface):
    X, y = sine_surface(2000, seed=7, noise=0.1)
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
def test_vfe_is_a_lower_bound_and_exact_when_Z_is_X(mean, objective, sine_surface):
    X, y = sine_surface(80, seed=3, noise=0.1)
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
def small_fits(sine_surface):
    X, y = sine_surface(400, seed=1, noise=0.1)
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


def test_kmeans_inducing_points_seeded(sine_surface):
    X, _ = sine_surface(500, seed=7, noise=0.1)
    a = kmeans_inducing_points(X, 30, random_state=3)
    b = kmeans_inducing_points(X, 30, random_state=3)
    np.testing.assert_array_equal(a, b)
    assert a.shape[1] == 2 and 25 <= a.shape[0] <= 30
    assert X.min(0).min() <= a.min() and a.max() <= X.max()
    np.testing.assert_array_equal(kmeans_inducing_points(X[:20], 30), X[:20])


def test_sparse_bad_input(sine_surface):
    X, y = sine_surface(50, seed=7, noise=0.1)
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


# -- chunked statistics (fit linear in n) and the closed-form LOO ----------------------------------


@pytest.mark.parametrize("kernel, p", [("se", 2), ("matern", 1)])
@pytest.mark.parametrize("mean, objective", [("zero", "ml"), ("constant", "ml"), ("constant", "reml")])
def test_chunked_bound_equals_pymc_graph_and_its_gradient(kernel, p, mean, objective, sine_surface):
    """The NumPy bound from chunked statistics = the PyMC model's compiled bound (value and
    gradient), whatever the block size; the gradient also matches central differences."""
    from calibprob.bases.gp import _pymc
    from calibprob.bases.gp._sparse_numerics import VFEObjectiveNumpy

    X, y = sine_surface(150, seed=4, noise=0.1)
    common = dict(kernel=kernel, p=p, mean=mean, objective=objective, theta=THETA, optimize=False)
    vfe = SparseGaussianProcessRegressor(n_inducing=12, random_state=0, **common).fit(X, y)
    Z = vfe.inducing_points_
    x = np.log([0.25, 0.5, 0.8, 0.05])
    with _pymc.CompiledObjective(_pymc.compiled(vfe._spec(2), "FAST_COMPILE"), {"X": X, "y": y, "Z": Z}) as graph:
        v_graph, g_graph = graph.value_and_grad(x)
    for chunk in (7, 64, 150):
        fun = VFEObjectiveNumpy(kernel, p, mean, objective, vfe.jitter, X, y, Z, chunk=chunk)
        v, g = fun.value_and_grad(x)
        assert v == pytest.approx(v_graph, rel=1e-12, abs=1e-9)
        assert fun.value(x) == pytest.approx(v, rel=1e-13)
        np.testing.assert_allclose(g, g_graph, rtol=1e-8, atol=1e-8)
    fd = np.array([(fun.value(x + h) - fun.value(x - h)) / 2e-6 for h in np.eye(4) * 1e-6])
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-5)


def test_numpy_and_pytensor_backends_fit_the_same_theta(sine_surface):
    X, y = sine_surface(300, seed=5, noise=0.1)
    a = SparseGaussianProcessRegressor(n_inducing=20, n_restarts=1, random_state=0).fit(X, y)
    b = SparseGaussianProcessRegressor(n_inducing=20, n_restarts=1, random_state=0, compile_mode="FAST_COMPILE")
    b.fit(X, y)
    assert a.fit_info_["backend"] == "numpy" and b.fit_info_["backend"] == "pytensor"
    np.testing.assert_allclose(a.theta_["lengthscale"], b.theta_["lengthscale"], rtol=1e-4)
    assert a.theta_["noise"] == pytest.approx(b.theta_["noise"], rel=1e-4)
    assert a.log_marginal_likelihood_value_ == pytest.approx(b.log_marginal_likelihood_value_, rel=1e-8)


def test_kmeans_on_a_seeded_subset(sine_surface):
    X, _ = sine_surface(3000, seed=6, noise=0.1)
    a = kmeans_inducing_points(X, 20, random_state=1, max_rows=500)
    np.testing.assert_array_equal(a, kmeans_inducing_points(X, 20, random_state=1, max_rows=500))
    assert 15 <= a.shape[0] <= 20
    np.testing.assert_array_equal(
        kmeans_inducing_points(X, 20, random_state=1, max_rows=5000), kmeans_inducing_points(X, 20, random_state=1)
    )
    with pytest.raises(ValueError, match="max_rows must be >= 20; got 5"):
        kmeans_inducing_points(X, 20, max_rows=5)


@pytest.mark.parametrize("mean, objective", [("zero", "ml"), ("constant", "ml"), ("constant", "reml")])
def test_sparse_loo_equals_refits(mean, objective, sine_surface):
    """Closed-form LOO = refitting the sparse posterior without each point (same θ, same Z), 1e-8."""
    X, y = sine_surface(30, seed=9, noise=0.1)
    y = y + 2.0
    common = dict(mean=mean, objective=objective, theta=THETA, optimize=False)
    vfe = SparseGaussianProcessRegressor(n_inducing=8, random_state=0, **common).fit(X, y)
    other = {"lengthscale": [0.2, 0.6], "variance": 1.5, "noise": 0.03}
    for theta in (None, other):
        th = THETA if theta is None else other
        mu, sd = vfe.loo(theta=theta)
        _, sd_latent = vfe.loo(theta=theta, include_noise=False)
        for i in range(len(y)):
            keep = np.arange(len(y)) != i
            refit = SparseGaussianProcessRegressor(inducing_points=vfe.inducing_points_, **{**common, "theta": th})
            refit.fit(X[keep], y[keep])
            m_i, s_i = refit.predict_mean_std(X[i : i + 1])
            assert mu[i] == pytest.approx(m_i[0], abs=1e-8)
            assert sd[i] == pytest.approx(s_i[0], abs=1e-8)
            assert sd_latent[i] == pytest.approx(
                refit.predict_mean_std(X[i : i + 1], include_noise=False)[1][0], abs=1e-8
            )


def test_sparse_loo_with_all_points_inducing_is_the_exact_loo(sine_surface):
    X, y = sine_surface(40, seed=10, noise=0.1)
    for mean in ("zero", "constant"):
        exact = GaussianProcessRegressor(mean=mean, theta=THETA, optimize=False).fit(X, y)
        full = SparseGaussianProcessRegressor(inducing_points=X, jitter=1e-10, mean=mean, theta=THETA, optimize=False)
        full.fit(X, y)
        for a, b in zip(exact.loo(), full.loo()):
            np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6)
