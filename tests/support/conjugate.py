"""A conjugate Bayesian linear regression with known noise: exact posterior draws as a PyMC-shaped tree.

Model: :math:`y = X\\beta + \\varepsilon`, :math:`\\varepsilon \\sim N(0, s^2)` with ``s`` known,
:math:`\\beta \\sim N(0, \\tau^2 I)`. The posterior and every leave-one-out posterior are Gaussian
in closed form, so the LOO predictive of point i is exactly
:math:`N(x_i^\\top m_{-i},\\ x_i^\\top A_{-i}^{-1} x_i + s^2)` with
:math:`A_{-i} = A - x_i x_i^\\top / s^2`, :math:`m_{-i} = A_{-i}^{-1}(X^\\top y - x_i y_i)/s^2`.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from scipy import stats


def posterior(X, y, s, tau):
    """Posterior mean and covariance of beta."""
    A = X.T @ X / s**2 + np.eye(X.shape[1]) / tau**2
    cov = np.linalg.inv(A)
    return cov @ (X.T @ y) / s**2, cov


def loo_predictive(X, y, s, tau):
    """Closed-form leave-one-out predictive means and standard deviations, shape (n,)."""
    A = X.T @ X / s**2 + np.eye(X.shape[1]) / tau**2
    b = X.T @ y / s**2
    mean = np.empty(len(y))
    sd = np.empty(len(y))
    for i, (x, yi) in enumerate(zip(X, y, strict=True)):
        cov = np.linalg.inv(A - np.outer(x, x) / s**2)
        mean[i] = x @ cov @ (b - x * yi / s**2)
        sd[i] = np.sqrt(x @ cov @ x + s**2)
    return mean, sd


def tree(rng, X, y, s, tau, *, chains=1, draws=2000, X_new=None):
    """``(idata, draws_new)``: a DataTree with posterior, log_likelihood, posterior_predictive, observed_data
    from exact posterior draws, and the predictive draws at ``X_new`` as a (chain, draw, obs) DataArray."""
    m, cov = posterior(X, y, s, tau)
    beta = rng.multivariate_normal(m, cov, size=chains * draws)
    mu = beta @ X.T
    dims = ("chain", "draw", "obs")
    shape = (chains, draws, len(y))
    ll = stats.norm.logpdf(y, mu, s).reshape(shape)
    pp = (mu + s * rng.standard_normal(mu.shape)).reshape(shape)
    idata = xr.DataTree.from_dict(
        {
            "posterior": xr.Dataset({"beta": (("chain", "draw", "coef"), beta.reshape(chains, draws, -1))}),
            "log_likelihood": xr.Dataset({"y": (dims, ll)}),
            "posterior_predictive": xr.Dataset({"y": (dims, pp)}),
            "observed_data": xr.Dataset({"y": (("obs",), y)}),
        }
    )
    new = None
    if X_new is not None:
        mu_new = beta @ X_new.T
        vals = (mu_new + s * rng.standard_normal(mu_new.shape)).reshape(chains, draws, len(X_new))
        new = xr.DataArray(vals, dims=dims, name="y")
    return idata, new
