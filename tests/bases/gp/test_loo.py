"""Closed-form leave-one-out (Dubrule 1983) against n brute-force refits with fixed θ."""

import numpy as np
import pytest

from calibprob.bases.gp import GaussianProcessRegressor, loo_from_kernel
from calibprob.bases.gp.kernels import kernel

THETA = {"lengthscale": np.array([0.3, 0.45]), "variance": 1.4, "noise": 0.03}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    X = rng.uniform(size=(45, 2))
    y = 3.0 + np.sin(4 * X[:, 0]) * np.cos(3 * X[:, 1]) + 0.1 * rng.normal(size=45)
    return X, y


def brute_force_loo(X, y, **params):
    """Refit on n - 1 points (fixed θ; the constant re-estimated by GLS) and predict the left-out one."""
    n = len(y)
    mu, sd = np.empty(n), np.empty(n)
    for i in range(n):
        keep = np.arange(n) != i
        gp = GaussianProcessRegressor(optimize=False, **params).fit(X[keep], y[keep])
        m, s = gp.predict_mean_std(X[i : i + 1], include_noise=True)
        mu[i], sd[i] = m[0], s[0]
    return mu, sd


@pytest.mark.parametrize("mean", ["zero", "constant"])
@pytest.mark.parametrize("noise", [True, False])
def test_estimator_loo_equals_brute_force_refits(data, mean, noise):
    X, y = data
    theta = THETA if noise else {k: v for k, v in THETA.items() if k != "noise"}
    params = dict(kernel="matern", p=2, mean=mean, noise=noise, theta=theta)
    if not noise:
        params["nugget"] = 1e-6  # interpolation: keep K well conditioned for 1e-8 agreement
    gp = GaussianProcessRegressor(optimize=False, **params).fit(X, y)
    mu, sd = gp.loo()
    ref_mu, ref_sd = brute_force_loo(X, y, **params)
    scale = np.std(y)
    # measured max error ~1e-13 (noise) / ~1e-10 (interpolation)
    np.testing.assert_allclose(mu, ref_mu, rtol=0, atol=1e-8 * scale)
    np.testing.assert_allclose(sd, ref_sd, rtol=1e-8)


def test_latent_loo_subtracts_noise(data):
    X, y = data
    gp = GaussianProcessRegressor(optimize=False, theta=THETA, mean="constant").fit(X, y)
    _, sd = gp.loo(include_noise=True)
    mu_lat, sd_lat = gp.loo(include_noise=False)
    np.testing.assert_allclose(sd_lat**2, sd**2 - THETA["noise"], rtol=1e-12)
    np.testing.assert_allclose(mu_lat, gp.loo()[0])


def test_loo_for_another_theta(data):
    X, y = data
    gp = GaussianProcessRegressor(optimize=False, theta=THETA).fit(X, y)
    other = {"lengthscale": 0.2, "variance": 0.5, "noise": 0.1}
    ref = GaussianProcessRegressor(optimize=False, theta=other).fit(X, y).loo()
    np.testing.assert_allclose(gp.loo(theta=other), ref)


@pytest.mark.parametrize("mean", ["zero", "constant"])
def test_loo_from_kernel_equals_direct_conditioning(data, mean):
    """Pure NumPy form against conditioning a multivariate normal (constant: augmented system)."""
    X, y = data
    K = kernel("se", X, None, THETA["lengthscale"], THETA["variance"]) + 0.03 * np.eye(len(y))
    mu, sd = loo_from_kernel(K, y, mean=mean)
    n = len(y)
    for i in range(n):
        o = np.arange(n) != i
        Koo, koi = K[np.ix_(o, o)], K[o, i]
        if mean == "zero":
            w = np.linalg.solve(Koo, koi)
            ref_mu, ref_var = w @ y[o], K[i, i] - w @ koi
        else:
            A = np.block([[Koo, np.ones((n - 1, 1))], [np.ones((1, n - 1)), np.zeros((1, 1))]])
            sol = np.linalg.solve(A, np.append(koi, 1.0))
            ref_mu, ref_var = sol[:-1] @ y[o], K[i, i] - sol[:-1] @ koi - sol[-1]
        assert mu[i] == pytest.approx(ref_mu, abs=1e-10)
        assert sd[i] == pytest.approx(np.sqrt(ref_var), rel=1e-9)


def test_loo_from_kernel_docstring_case():
    mu, sd = loo_from_kernel([[2.0, 0.5], [0.5, 2.0]], [1.0, -1.0])
    np.testing.assert_allclose(mu, [-0.25, 0.25])
    np.testing.assert_allclose(sd**2, 2.0 - 0.125)


def test_loo_from_kernel_bad_input():
    K = np.eye(3)
    with pytest.raises(ValueError, match="K must be square; got shape \\(3, 2\\)"):
        loo_from_kernel(K[:, :2], np.zeros(3))
    with pytest.raises(ValueError, match="mismatched lengths: K has 3, y has 2"):
        loo_from_kernel(K, np.zeros(2))
    with pytest.raises(ValueError, match="mean must be one of 'zero', 'constant'; got 'linear'"):
        loo_from_kernel(K, np.zeros(3), mean="linear")
    with pytest.raises(ValueError, match="K is not positive definite"):
        loo_from_kernel(-K, np.zeros(3))
    with pytest.raises(ValueError, match="y must be finite"):
        loo_from_kernel(K, [0.0, np.nan, 1.0])
    with pytest.raises(ValueError, match="at least 3 observations with mean='constant'; got 2"):
        loo_from_kernel(np.eye(2), np.zeros(2), mean="constant")
