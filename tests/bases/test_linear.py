"""Linear bases: OLS against lstsq + textbook variance; BayesianRidge against brute-force evidence."""

import numpy as np
import pytest
import xarray as xr
from scipy import optimize, stats

from calibprob._core.estimator import NotFittedError, clone
from calibprob.bases.linear import BayesianRidge, LinearRegression


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(60, 4)) @ np.diag([1.0, 2.0, 0.5, 3.0]) + 1.5
    w = np.array([0.8, -0.3, 0.0, 0.2])
    y = 2.0 + X @ w + 0.7 * rng.normal(size=60)
    Xt = rng.normal(size=(25, 4)) * 2 + 1.5
    return X, y, Xt


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_ols_equals_lstsq_and_textbook_variance(data, fit_intercept):
    X, y, Xt = data
    ols = LinearRegression(fit_intercept=fit_intercept).fit(X, y)
    A = np.column_stack([np.ones(len(y)), X]) if fit_intercept else X
    At = np.column_stack([np.ones(len(Xt)), Xt]) if fit_intercept else Xt
    beta, rss, *_ = np.linalg.lstsq(A, y, rcond=None)
    s2 = rss[0] / (len(y) - A.shape[1])
    np.testing.assert_allclose(ols.coef_, beta[1:] if fit_intercept else beta, rtol=1e-10)
    assert ols.noise_variance_ == pytest.approx(s2, rel=1e-10)
    lev = np.einsum("ij,jk,ik->i", At, np.linalg.inv(A.T @ A), At)
    mu, sd = ols.predict_mean_std(Xt)
    np.testing.assert_allclose(mu, At @ beta, rtol=1e-10)
    np.testing.assert_allclose(sd, np.sqrt(s2 * (1 + lev)), rtol=1e-10)
    _, sd_mean = ols.predict_mean_std(Xt, include_noise=False)
    np.testing.assert_allclose(sd_mean, np.sqrt(s2 * lev), rtol=1e-10)


def test_ols_predict_contract(data):
    X, y, Xt = data
    ols = LinearRegression().fit(X, y)
    pred = ols.predict(Xt, levels=[0.05, 0.5, 0.95])
    assert isinstance(pred, xr.Dataset) and pred.attrs["family"] == "normal"
    mu, sd = ols.predict_mean_std(Xt)
    np.testing.assert_allclose(pred["quantile"].sel(level=0.95), mu + sd * stats.norm.ppf(0.95))
    assert clone(ols).get_params() == {"fit_intercept": True}


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_bayesian_ridge_maximises_the_evidence(data, fit_intercept):
    X, y, _ = data
    br = BayesianRidge(fit_intercept=fit_intercept).fit(X, y)

    def neg(log_p):
        return -br.log_evidence(np.exp(log_p[0]), np.exp(log_p[1]))

    best = optimize.minimize(
        neg, x0=[0.0, 0.0], method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 4000}
    )
    assert np.log(br.alpha_) == pytest.approx(best.x[0], abs=1e-4)
    assert np.log(br.lambda_) == pytest.approx(best.x[1], abs=1e-4)
    assert br.log_evidence_ >= -best.fun - 1e-9


def test_bayesian_ridge_evidence_formula_equals_marginal_density(data):
    """Without intercept: L(α, λ) = log N(y | 0, XXᵀ/λ + I/α)."""
    X, y, _ = data
    br = BayesianRidge(fit_intercept=False).fit(X, y)
    a, lam = 1.7, 0.3
    cov = X @ X.T / lam + np.eye(len(y)) / a
    ref = stats.multivariate_normal(np.zeros(len(y)), cov).logpdf(y)
    assert br.log_evidence(a, lam) == pytest.approx(ref, rel=1e-10)


def test_bayesian_ridge_predictive_equals_augmented_posterior(data):
    """Flat intercept prior = limit of a N(0, τ²) prior on an intercept column, τ → ∞."""
    X, y, Xt = data
    br = BayesianRidge().fit(X, y)
    a, lam = br.alpha_, br.lambda_
    A = np.column_stack([np.ones(len(y)), X])
    At = np.column_stack([np.ones(len(Xt)), Xt])
    prior_prec = np.diag([1e-12, lam, lam, lam, lam])
    S = np.linalg.inv(prior_prec + a * A.T @ A)
    m = a * S @ A.T @ y
    mu, sd = br.predict_mean_std(Xt)
    np.testing.assert_allclose(mu, At @ m, rtol=1e-7)
    np.testing.assert_allclose(sd, np.sqrt(1 / a + np.einsum("ij,jk,ik->i", At, S, At)), rtol=1e-7)
    _, sd_latent = br.predict_mean_std(Xt, include_noise=False)
    np.testing.assert_allclose(sd_latent**2, sd**2 - 1 / a, rtol=1e-9)


def test_bayesian_ridge_handles_more_features_than_rows():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(15, 40))
    y = X[:, 0] + 0.1 * rng.normal(size=15)
    br = BayesianRidge().fit(X, y)
    mu, sd = br.predict_mean_std(X[:3])
    assert np.all(np.isfinite(mu)) and np.all(sd > 0)


def test_linear_bad_input(data):
    X, y, _ = data
    for est in (LinearRegression(), BayesianRidge()):
        Xn = X.copy()
        Xn[2, 0] = np.nan
        with pytest.raises(ValueError, match=r"X must be finite.*NaN\) at index \(2, 0\)"):
            est.fit(Xn, y)
        with pytest.raises(ValueError, match="mismatched lengths: X has 60, y has 59"):
            est.fit(X, y[:-1])
        with pytest.raises(ValueError, match=r"X must be 2-D.*reshape\(-1, 1\)"):
            est.fit(X[:, 0], y)
        with pytest.raises(NotFittedError, match=r"Call fit\(\.\.\.\)"):
            type(est)().predict_mean_std(X)
        with pytest.raises(ValueError, match="X has 3 features but the model was fitted with 4"):
            type(est)().fit(X, y).predict_mean_std(X[:, :3])
    with pytest.raises(ValueError, match="n = 5, coefficients = 5 .* at least 6 rows"):
        LinearRegression().fit(X[:5], y[:5])
    with pytest.raises(ValueError, match="X is rank deficient"):
        LinearRegression().fit(np.column_stack([X, X[:, 0]]), y)
