r"""GP-Beta distribution calibration (Song, Diethe, Kull & Flach 2019) as a PyMC model.

A base regressor predicts a Gaussian :math:`N(\mu_i, \sigma_i^2)` for every
input. GP-Beta recalibrates the *whole* predictive distribution, point by
point: a latent multi-output Gaussian process over the base's outputs
:math:`(\mu, \sigma)` sets the three parameters :math:`(a, b, c)` of a Beta
calibration map applied to the base CDF,

.. math::

    \hat F_i(y) = c_\beta\bigl(\Phi(z_i)\bigr), \qquad
    c_\beta(q) = \operatorname{expit}\bigl(a_i \log q - b_i \log(1-q) + c_i\bigr),
    \qquad z_i = (y - \mu_i)/\sigma_i,

so that the calibrated density is the base density times the Beta link
:math:`r_\beta(q) = c_\beta'(q)` (Song et al. eq. 6–7):

.. math::

    \log \hat p_i(y) = \log\varphi(z_i) - \log\sigma_i
        + \log\operatorname{expit}(t) + \log\operatorname{expit}(-t)
        + \log\bigl(a_i(1-q) + b_i q\bigr) - \log q - \log(1-q),
    \qquad t = a_i\log q - b_i\log(1-q) + c_i .

Every term is evaluated in log space — :math:`\log q = \log\Phi(z)` and
:math:`\log(1-q) = \log\Phi(-z)` by the ``erfcx`` form of the normal log-CDF,
:math:`\log(a(1-q)+bq)` by ``logaddexp`` — so the likelihood stays finite for
:math:`\Phi(z)` within ``1e-300`` of 0 or 1 (20+ base standard deviations out).

The model (all free parameters are unconstrained Normals, so ADVI, MAP and NUTS
work on the same graph and posterior draws need no back-transform):

* inputs are standardised: :math:`\tilde\mu = (\mu - m)/s`, :math:`\tilde\sigma = \sigma/s`
  with :math:`m = \overline{\mu}` and :math:`s = \sqrt{\operatorname{var}(\mu) + \overline{\sigma^2}}`
  (the base's marginal predictive scale) — one scale for both, so that the
  kernel below keeps its meaning as an inner product of Gaussian embeddings;
* kernel (eq. 9, the RBF inner product of the embeddings of :math:`N(\tilde\mu_i, \tilde\sigma_i^2)`;
  the paper's :math:`\sigma` there is a variance):
  :math:`k_{ij} = \theta\,(\tilde\sigma_i^2 + \tilde\sigma_j^2 + \theta^2)^{-1/2}
  \exp\bigl(-(\tilde\mu_i-\tilde\mu_j)^2 / (2(\tilde\sigma_i^2+\tilde\sigma_j^2+\theta^2))\bigr)`,
  :math:`\log\theta \sim N(0, 0.75^2)`;
* coregionalisation (ICM, eq. 10): :math:`\operatorname{cov}(w_j(x), w_{j'}(x')) = R_{jj'} k(x, x')`
  with :math:`B = WW^\top + \operatorname{diag}(\kappa)`, :math:`W \in \mathbb R^{3\times r}`,
  :math:`W \sim N(0, 1)`, :math:`\log\kappa \sim N(0, 0.5^2)`, used in its correlation form
  :math:`R = D^{-1/2} B D^{-1/2}` — the per-output scale is carried by the
  paper's :math:`\gamma` below, and keeping it in both places would leave NUTS an
  unidentified ridge;
* sparse whitened inducing points (the SVGP parametrisation of the paper's
  §4.3 with a Gaussian :math:`q(u)`): :math:`m` inducing inputs :math:`Z` in
  :math:`(\tilde\mu, \tilde\sigma)` space (k-means of the data, optionally learned,
  :math:`Z \sim N(Z_0, 0.25^2)`), :math:`V \sim N(0, I_{m\times 3})`,
  :math:`u = L_K V L_R^\top` (so :math:`\operatorname{cov}(\operatorname{vec} u) = R\otimes K_{ZZ}`),
  and at the data :math:`f = K_{XZ} K_{ZZ}^{-1} u = K_{XZ} L_K^{-\top} V L_R^\top`
  (the projected-process / subset-of-regressors mean; the conditional
  variance :math:`k(x,x) - q(x,x)` is dropped, which is exact at the inducing
  points and reverts to the identity map far from the data);
* link (§4.2): :math:`\log a = f_a/\gamma_a + \delta_a`, :math:`\log b = f_b/\gamma_b + \delta_b`,
  :math:`c = f_c/\gamma_c + \delta_c` with :math:`\log\gamma \sim N(\log 2, 0.75^2)`,
  :math:`\delta \sim N(0, 1)`: the identity map (:math:`a = b = 1, c = 0`) is the prior centre.

Inference: ``"advi"`` (mean-field over every parameter, Adam, minibatches
through :func:`pymc.Minibatch` for large ``n``), ``"fullrank_advi"``,
``"svi"`` (the sparse variational GP of Hensman et al. [3]_ as the paper and
netcal fit it: a full-covariance Gaussian over the whitened inducing values,
the hyperparameters — kernel, coregionalisation, link scale and offset —
as point estimates maximising the same evidence lower bound plus their log
prior; minibatches for large ``n`` as for ADVI), ``"map"`` (L-BFGS on the log posterior) or ``"nuts"``
(nutpie when installed, PyMC's NUTS otherwise). The fitted
calibrator keeps an ArviZ ``DataTree`` (``posterior``, ``sample_stats``,
``log_likelihood``, ``observed_data``, ``constant_data``) in ``idata_``.

Prediction: the calibrated CDF is the posterior average of the Beta-mapped
base CDF, evaluated on a fine per-observation grid in :math:`z` and inverted
monotonically to quantiles (linear in :math:`\Phi^{-1}(\bar F)`); mean and
standard deviation are integrals of the same averaged CDF; densities are exact
posterior averages (:meth:`GPBetaCalibrator.logpdf`). The calibration map and
its credible band come from :meth:`GPBetaCalibrator.calibration_map`.

Compilation: every PyTensor graph depends only on ``(n_inducing, rank,
learn_inducing, minibatch size)``; data, standardisation and inducing
initialisation are shared variables (``pm.Data``), so one compiled ADVI step
function or log-posterior serves every data set of that configuration in a
process (module cache) and across processes (PyTensor's disk cache). The C
backend (``"CVM"``) is the default mode: it compiles this graph ~2x faster cold
than Numba and runs it as fast (see :data:`DEFAULT_COMPILE_MODE`). Fits and
predictions run with one BLAS thread (small triangular solves are ~20x slower
with two). Prediction is pure NumPy.

References
----------
.. [1] Song, H., Diethe, T., Kull, M., Flach, P. (2019). Distribution calibration
   for regression. ICML. (§4, eq. 6–12.)
.. [2] Kull, M., Silva Filho, T., Flach, P. (2017). Beta calibration: a
   well-founded and easily implemented improvement on logistic calibration for
   binary classifiers. AISTATS.
.. [3] Hensman, J., Matthews, A., Ghahramani, Z. (2015). Scalable variational
   Gaussian process classification. AISTATS.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import xarray as xr
from scipy import special

from calibprob._base import BaseEstimator, ConvergenceWarning, check_is_fitted, check_predictive
from calibprob._pytensor import GraphCache, limit_blas_threads
from calibprob._validation import (
    check_array,
    check_choice,
    check_confidence_levels,
    check_int,
    check_positive,
)
from calibprob.predictive import normal, validate

__all__ = [
    "GPBetaCalibrator",
    "GaussianEmbeddingRBF",  # noqa: F822 - built lazily by the module __getattr__ (PyMC import)
    "gaussian_embedding_kernel",
    "beta_link_logpdf",
    "beta_link_logpdf_z",
    "beta_link_cdf",
    "beta_link_cdf_z",
    "beta_link_ppf_z",
    "beta_calibration_map",
    "plot_calibration_map",
    "held_out_elpd",
    "INFERENCE_METHODS",
    "clear_graph_cache",
    "svi_fit",
    "SVIResult",
]

#: Inference methods accepted by :class:`GPBetaCalibrator` (``inference=``).
INFERENCE_METHODS = ("advi", "fullrank_advi", "svi", "map", "nuts")

OUTPUTS = ("a", "b", "c")
_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)
#: Jitter added to K_ZZ (standardised units; the kernel's diagonal is at most 1).
_JITTER = 1e-6
#: Prior (mean, sd) of every free parameter; see the module docstring.
PRIORS = {
    "log_theta": (0.0, 0.75),
    "W": (0.0, 1.0),
    "log_kappa": (0.0, 0.5),
    "log_gamma": (float(np.log(2.0)), 0.75),
    "delta": (0.0, 1.0),
    "V": (0.0, 1.0),
    "Z": (None, 0.25),  # mean = the k-means initialisation
}
#: Full-batch ADVI / SVI up to this many points when ``batch_size="auto"``; minibatches above.
AUTO_FULL_BATCH = 4096
AUTO_BATCH_SIZE = 256
# Elements per temporary (draws x rows x grid) block in prediction (~80 MB of float64).
_BLOCK = 10_000_000


# ===========================================================================
# NumPy layer
# ===========================================================================


def gaussian_embedding_kernel(X1, X2, theta) -> np.ndarray:
    r"""Gaussian-embedding RBF kernel of Song et al. (2019), eq. 9 (NumPy).

    .. math::

        k\bigl((\mu_1,s_1),(\mu_2,s_2)\bigr) = \frac{\theta}{\sqrt{s_1^2+s_2^2+\theta^2}}
        \exp\Bigl(-\frac{(\mu_1-\mu_2)^2}{2(s_1^2+s_2^2+\theta^2)}\Bigr)

    where :math:`s` is a standard deviation (eq. 9 writes the variance
    :math:`s^2` as :math:`\sigma`). It is the inner product of the kernel mean
    embeddings of :math:`N(\mu_1, s_1^2)` and :math:`N(\mu_2, s_2^2)` under an
    RBF kernel of width :math:`\theta`, scaled so that :math:`s = 0` gives the
    plain unit-variance RBF.

    Parameters
    ----------
    X1 : ndarray, shape (..., n1, 2)
        Rows ``(mu, s)``.
    X2 : ndarray, shape (..., n2, 2)
    theta : float or ndarray, shape (...)
        Width(s); a leading batch shape (e.g. posterior draws) broadcasts.

    Returns
    -------
    ndarray, shape (..., n1, n2)
    """
    X1 = np.asarray(X1, float)
    X2 = np.asarray(X2, float)
    th = np.asarray(theta, float)[..., None, None]
    d = X1[..., :, None, 1] ** 2 + X2[..., None, :, 1] ** 2 + th**2
    return th / np.sqrt(d) * np.exp(-((X1[..., :, None, 0] - X2[..., None, :, 0]) ** 2) / (2.0 * d))


def _beta_t(log_q, log_1mq, log_a, log_b, c):
    return np.exp(log_a) * log_q - np.exp(log_b) * log_1mq + c


def beta_link_logpdf_z(u, log_jac, log_a, log_b, c) -> np.ndarray:
    r"""Log density of a Beta-calibrated base law, from the base's probit PIT (stable).

    For any base law with CDF :math:`F` and density :math:`f`, write
    :math:`u = \Phi^{-1}(F(y))` and :math:`\log J = \log f(y) - \log\varphi(u)`
    (for a Gaussian base :math:`u = (y-\mu)/\sigma` and :math:`\log J = -\log\sigma`).
    The Beta-calibrated law :math:`c_\beta(F(y))` has log density (Song et al.
    2019, eq. 6–7)

    .. math::

        \log\hat p(y) = \log\varphi(u) + \log J + \log r_\beta(\Phi(u)),\qquad
        \log r_\beta(q) = \log\operatorname{expit}(t) + \log\operatorname{expit}(-t)
            + \log\bigl(a(1-q) + bq\bigr) - \log q - \log(1-q)

    with :math:`t = a\log q - b\log(1-q) + c`, all in log space
    (:math:`\log q = \log\Phi(u)`, :math:`\log(1-q) = \log\Phi(-u)`).

    Parameters
    ----------
    u, log_jac : array_like
        The base's probit PIT at the value and its log Jacobian (broadcast);
        ``pred.calib.zscore(y)`` and ``pred.calib.logpdf(y) - log phi(u)``.
    log_a, log_b, c : array_like
        Beta-map parameters (:math:`\log a`, :math:`\log b`, :math:`c`), broadcast.

    Returns
    -------
    ndarray
        The log density, shape of the broadcast.
    """
    u = np.asarray(u, float)
    lq = special.log_ndtr(u)
    l1q = special.log_ndtr(-u)
    t = _beta_t(lq, l1q, log_a, log_b, c)
    log_r = -np.logaddexp(0.0, -t) - np.logaddexp(0.0, t) + np.logaddexp(log_a + l1q, log_b + lq) - lq - l1q
    return -0.5 * u * u - _LOG_SQRT_2PI + log_jac + log_r


def beta_link_logpdf(y, mu, sigma, log_a, log_b, c) -> np.ndarray:
    r"""Log density of the Beta-calibrated Gaussian (Song et al. 2019, eq. 6–7), stable.

    :func:`beta_link_logpdf_z` with :math:`u = (y-\mu)/\sigma` and
    :math:`\log J = -\log\sigma`:

    .. math::

        \log\hat p(y) = \log\varphi(z) - \log\sigma + \log r_\beta(\Phi(z)).

    Parameters
    ----------
    y, mu, sigma : array_like
        Values, base means and base standard deviations (broadcast together).
    log_a, log_b, c : array_like
        Beta-map parameters (:math:`\log a`, :math:`\log b`, :math:`c`), broadcast.

    Returns
    -------
    ndarray
        The log density, shape of the broadcast.
    """
    return beta_link_logpdf_z((np.asarray(y, float) - mu) / sigma, -np.log(sigma), log_a, log_b, c)


def beta_link_cdf_z(u, log_a, log_b, c) -> np.ndarray:
    r"""CDF of a Beta-calibrated base law from the base's probit PIT: :math:`c_\beta(\Phi(u))` (broadcast)."""
    u = np.asarray(u, float)
    return special.expit(_beta_t(special.log_ndtr(u), special.log_ndtr(-u), log_a, log_b, c))


def beta_link_cdf(y, mu, sigma, log_a, log_b, c) -> np.ndarray:
    r"""CDF of the Beta-calibrated Gaussian, :math:`c_\beta(\Phi((y-\mu)/\sigma))` (broadcast)."""
    return beta_link_cdf_z((np.asarray(y, float) - mu) / sigma, log_a, log_b, c)


def beta_link_ppf_z(p, log_a, log_b, c, *, n_iter: int = 80) -> np.ndarray:
    r"""Inverse of :func:`beta_link_cdf_z`: the probit PIT :math:`u` with :math:`c_\beta(\Phi(u)) = p`.

    :math:`c_\beta\circ\Phi` is strictly increasing (``a, b > 0``), so bisection on
    :math:`u \in [-37, 37]` (where :math:`\Phi` is representable in log space)
    converges to :math:`74/2^{80}` whatever the map; used to draw from the
    calibrated law by inverse transform, :math:`y = F^{-1}(\Phi(u))`.

    Parameters
    ----------
    p : array_like
        Probabilities in (0, 1).
    log_a, log_b, c : array_like
        Beta-map parameters, broadcast against ``p``.
    n_iter : int
        Bisection steps.

    Returns
    -------
    ndarray, shape of the broadcast
    """
    target = special.logit(np.asarray(p, float))
    shape = np.broadcast_shapes(np.shape(target), np.shape(log_a), np.shape(log_b), np.shape(c))
    lo = np.full(shape, -37.0)
    hi = np.full(shape, 37.0)
    for _ in range(n_iter):
        mid = 0.5 * (lo + hi)
        below = _beta_t(special.log_ndtr(mid), special.log_ndtr(-mid), log_a, log_b, c) < target
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return 0.5 * (lo + hi)


def beta_calibration_map(p, log_a, log_b, c) -> np.ndarray:
    r"""The Beta calibration map :math:`c_\beta(p) = \operatorname{expit}(a\log p - b\log(1-p) + c)`.

    The identity for :math:`a = b = 1, c = 0` (Kull et al. 2017; Song et al. 2019, eq. 2, 7).
    """
    p = np.asarray(p, float)
    return special.expit(_beta_t(np.log(p), np.log1p(-p), log_a, log_b, c))


def _tail_bounds(log_a, log_b, c, p_tail: float):
    r"""z-values outside which a Beta-calibrated standard normal has at most ``p_tail`` mass per side.

    For :math:`q \le 1/2`, :math:`-b\log(1-q) \le b\log 2`, so
    :math:`c_\beta(q) \le \operatorname{expit}(a\log q + b\log 2 + c)`; solving the
    bound for :math:`p_{tail}` (capped at :math:`q = 1/2`) gives a lower end
    :math:`z_{lo}` with :math:`c_\beta(\Phi(z_{lo})) \le p_{tail}`, in closed form.
    The upper end is symmetric. Returns ``(z_lo, z_hi)``, clipped to ±37.
    """
    a, b = np.exp(log_a), np.exp(log_b)
    lt = special.logit(p_tail)
    log_q = np.minimum((lt - c - b * np.log(2.0)) / a, np.log(0.5))
    log_1mq = np.minimum((lt + c - a * np.log(2.0)) / b, np.log(0.5))
    z_lo = special.ndtri(np.exp(np.maximum(log_q, -700.0)))
    z_hi = -special.ndtri(np.exp(np.maximum(log_1mq, -700.0)))
    return np.clip(z_lo, -37.0, 37.0), np.clip(z_hi, -37.0, 37.0)


def _kmeans(X: np.ndarray, k: int, rng: np.random.Generator, n_iter: int = 50) -> np.ndarray:
    """k-means++ seeding and Lloyd iterations (small, dependency-free)."""
    n = X.shape[0]
    centers = np.empty((k, X.shape[1]))
    centers[0] = X[rng.integers(n)]
    d2 = np.sum((X - centers[0]) ** 2, axis=1)
    for j in range(1, k):
        total = d2.sum()
        idx = rng.choice(n, p=d2 / total) if total > 0 else rng.integers(n)
        centers[j] = X[idx]
        d2 = np.minimum(d2, np.sum((X - centers[j]) ** 2, axis=1))
    for _ in range(n_iter):
        dist = np.sum((X[:, None, :] - centers[None, :, :]) ** 2, axis=2)
        lab = np.argmin(dist, axis=1)
        new = centers.copy()
        for j in range(k):
            members = X[lab == j]
            if members.size:
                new[j] = members.mean(axis=0)
            else:  # an empty cluster takes the point farthest from its centre
                far = int(np.argmax(dist[np.arange(n), lab]))
                new[j] = X[far]
        if np.allclose(new, centers):
            break
        centers = new
    return centers[np.lexsort((centers[:, 1], centers[:, 0]))]


def _correlation(B: np.ndarray) -> np.ndarray:
    d = np.sqrt(np.diagonal(B, axis1=-2, axis2=-1))
    return B / d[..., :, None] / d[..., None, :]


def _latent_numpy(post: dict, X: np.ndarray, Z0: np.ndarray, rank: int, chunk: int = 1024) -> np.ndarray:
    r"""Link-scale parameters :math:`(\log a, \log b, c)` at standardised inputs, per draw.

    Parameters
    ----------
    post : dict
        Flattened posterior draws: ``log_theta (S,)``, ``W (S, 3, r)``, ``log_kappa (S, 3)``,
        ``log_gamma (S, 3)``, ``delta (S, 3)``, ``V (S, m, 3)``, optionally ``Z (S, m, 2)``.
    X : ndarray, shape (n, 2)
        Standardised ``(mu, sigma)``.
    Z0 : ndarray, shape (m, 2)
        Fixed inducing inputs (used when ``post`` has no ``Z``).

    Returns
    -------
    ndarray, shape (S, n, 3)
    """
    theta = np.exp(post["log_theta"])
    S = theta.shape[0]
    m = post["V"].shape[1]
    Z = post["Z"] if "Z" in post else np.broadcast_to(Z0, (S,) + Z0.shape)
    Kzz = gaussian_embedding_kernel(Z, Z, theta) + _JITTER * np.eye(m)
    Lk = np.linalg.cholesky(Kzz)
    if rank > 0:
        W = post["W"]
        B = W @ np.swapaxes(W, -1, -2) + np.einsum("sj,jk->sjk", np.exp(post["log_kappa"]), np.eye(3))
        Lr = np.linalg.cholesky(_correlation(B))
        VL = post["V"] @ np.swapaxes(Lr, -1, -2)
    else:
        VL = post["V"]
    U = np.linalg.solve(np.swapaxes(Lk, -1, -2), VL)  # (S, m, 3) = L_K^{-T} V L_R^T
    amp = np.exp(-post["log_gamma"])[:, None, :]
    delta = post["delta"][:, None, :]
    out = np.empty((S, X.shape[0], 3))
    for start in range(0, X.shape[0], chunk):
        Kxz = gaussian_embedding_kernel(X[start : start + chunk], Z, theta)  # (S, rows, m)
        out[:, start : start + chunk] = (Kxz @ U) * amp + delta
    return out


def _pointwise_loglik(post, X, u, log_jac, Z0, rank, chunk: int = 1024) -> np.ndarray:
    """log p(y_i | w_s) for every draw and point, shape (S, n), in blocks of ``chunk`` points.

    ``X`` are the standardised covariates, ``u``/``log_jac`` the base's probit PIT
    and log Jacobian at the observed values (:func:`beta_link_logpdf_z`).
    """
    S = post["log_theta"].shape[0]
    out = np.empty((S, u.size))
    for start in range(0, u.size, chunk):
        sl = slice(start, start + chunk)
        w = _latent_numpy(post, X[sl], Z0, rank)
        out[:, sl] = beta_link_logpdf_z(u[None, sl], log_jac[None, sl], w[..., 0], w[..., 1], w[..., 2])
    return out


# ===========================================================================
# PyTensor / PyMC layer
# ===========================================================================


def _pm():
    import pymc as pm

    return pm


def _log_ndtr_pt(z):
    """log Phi(z), stable in both tails (the erfcx form PyMC uses for the normal log-CDF)."""
    import pytensor.tensor as pt

    return pt.switch(
        pt.lt(z, -1.0),
        pt.log(pt.erfcx(-z / np.sqrt(2.0)) / 2.0) - pt.sqr(z) / 2.0,
        pt.log1p(-pt.erfc(z / np.sqrt(2.0)) / 2.0),
    )


def beta_link_logp(value, log_jac, log_a, log_b, c):
    r"""Elementwise log density of eq. 6–7 as a PyTensor graph (the ``pm.CustomDist`` logp).

    ``value`` is the base's probit PIT :math:`u` of the observation and
    ``log_jac`` its log Jacobian; same formula as :func:`beta_link_logpdf_z`.
    """
    import pytensor.tensor as pt

    lq = _log_ndtr_pt(value)
    l1q = _log_ndtr_pt(-value)
    t = pt.exp(log_a) * lq - pt.exp(log_b) * l1q + c
    log_r = -pt.softplus(-t) - pt.softplus(t) + pt.logaddexp(log_a + l1q, log_b + lq) - lq - l1q
    return -0.5 * value * value - _LOG_SQRT_2PI + log_jac + log_r


def _gaussian_embedding_rbf_class():
    pm = _pm()
    import pytensor.tensor as pt

    class _GaussianEmbeddingRBF(pm.gp.cov.Covariance):
        r"""Gaussian-embedding RBF kernel (Song et al. 2019, eq. 9) as a ``pm.gp.cov.Covariance``.

        Inputs are rows ``(mu, s)`` with ``s`` a standard deviation; see
        :func:`gaussian_embedding_kernel` for the formula.

        Parameters
        ----------
        theta : scalar tensor
            RBF width of the embedding kernel.
        active_dims : list of int, optional
            Two columns holding ``(mu, s)``; default ``[0, 1]``.
        """

        def __init__(self, theta, active_dims=None):
            super().__init__(2, active_dims)
            self.theta = pt.as_tensor_variable(theta)

        def full(self, X, Xs=None):
            X, Xs = self._slice(X, Xs)
            if Xs is None:
                Xs = X
            d = pt.square(X[:, 1])[:, None] + pt.square(Xs[:, 1])[None, :] + pt.square(self.theta)
            r2 = pt.square(X[:, 0][:, None] - Xs[:, 0][None, :])
            return self.theta / pt.sqrt(d) * pt.exp(-r2 / (2.0 * d))

        def diag(self, X):
            X, _ = self._slice(X, None)
            return self.theta / pt.sqrt(2.0 * pt.square(X[:, 1]) + pt.square(self.theta))

    _GaussianEmbeddingRBF.__name__ = "GaussianEmbeddingRBF"
    _GaussianEmbeddingRBF.__qualname__ = "GaussianEmbeddingRBF"
    return _GaussianEmbeddingRBF


_KERNEL_CLASS = None


def __getattr__(name):
    # The Covariance subclass needs PyMC; build it on first access so that
    # importing this module stays light.
    global _KERNEL_CLASS
    if name == "GaussianEmbeddingRBF":
        if _KERNEL_CLASS is None:
            _KERNEL_CLASS = _gaussian_embedding_rbf_class()
        return _KERNEL_CLASS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _build_model(n_inducing: int, rank: int, learn_inducing: bool, batch_size: int | None):
    """The GP-Beta PyMC model on placeholder data (replaced by ``pm.set_data`` before use)."""
    pm = _pm()
    import pytensor.tensor as pt
    from pytensor.tensor.linalg import cholesky, solve_triangular

    kernel_cls = __getattr__("GaussianEmbeddingRBF")
    m = n_inducing
    n0 = max(2 * m, 8)
    coords = {
        "output": list(OUTPUTS),
        "inducing": np.arange(m),
        "input": ["mu", "sigma"],
    }
    if rank > 0:
        coords["rank"] = np.arange(rank)
    if batch_size is None:
        coords["obs"] = np.arange(n0)
    obs_dims = "obs" if batch_size is None else None
    with pm.Model(coords=coords) as model:
        # covariates of the latent GP: the base's predictive mean and standard deviation
        mu_d = pm.Data("base_mu", np.zeros(n0), dims=obs_dims)
        sigma_d = pm.Data("base_sigma", np.ones(n0), dims=obs_dims)
        # the observations enter through the base's probit PIT u = Phi^-1(F(y)) and the log
        # Jacobian log f(y) - log phi(u): any base law (Gaussian, quantiles, draws) is exact
        u_d = pm.Data("base_zscore", np.zeros(n0), dims=obs_dims)
        jac_d = pm.Data("base_log_jacobian", np.zeros(n0), dims=obs_dims)
        loc_d = pm.Data("loc", 0.0)
        scale_d = pm.Data("scale", 1.0)
        z0_d = pm.Data("inducing_init", np.zeros((m, 2)), dims=("inducing", "input"))

        if batch_size is None:
            mu_b, sigma_b, u_b, jac_b = mu_d, sigma_d, u_d, jac_d
            total = None
        else:
            mu_b, sigma_b, u_b, jac_b = pm.Minibatch(mu_d, sigma_d, u_d, jac_d, batch_size=batch_size)
            total = [mu_d.shape[0]]

        log_theta = pm.Normal("log_theta", *PRIORS["log_theta"])
        if rank > 0:
            W = pm.Normal("W", *PRIORS["W"], dims=("output", "rank"))
            log_kappa = pm.Normal("log_kappa", *PRIORS["log_kappa"], dims="output")
        log_gamma = pm.Normal("log_gamma", *PRIORS["log_gamma"], dims="output")
        delta = pm.Normal("delta", *PRIORS["delta"], dims="output")
        V = pm.Normal("V", *PRIORS["V"], dims=("inducing", "output"))
        if learn_inducing:
            Z = pm.Normal("Z", z0_d, PRIORS["Z"][1], dims=("inducing", "input"))
        else:
            Z = z0_d

        cov = kernel_cls(pt.exp(log_theta))
        Lk = cholesky(cov(Z) + _JITTER * pt.eye(m))
        if rank > 0:
            # ICM coregionalisation B = W W^T + diag(kappa), used as a correlation matrix
            B = pm.gp.cov.Coregion(1, W=W, kappa=pt.exp(log_kappa)).B
            d = pt.sqrt(pt.diag(B))
            VL = V @ cholesky(B / d[:, None] / d[None, :]).T
        else:
            VL = V
        # whitened inducing values: u = L_K V L_R^T; f(X) = K_XZ K_ZZ^{-1} u = K_XZ (L_K^{-T} V L_R^T)
        U = solve_triangular(Lk.T, VL, lower=False)
        X = pt.stack([(mu_b - loc_d) / scale_d, sigma_b / scale_d], axis=1)
        F = cov(X, Z) @ U
        w = F * pt.exp(-log_gamma)[None, :] + delta[None, :]
        pm.CustomDist(
            "y",
            jac_b,
            w[:, 0],
            w[:, 1],
            w[:, 2],
            logp=beta_link_logp,
            signature="(),(),(),()->()",
            observed=u_b,
            total_size=total,
            dims=obs_dims,
        )
    return model


@dataclass
class _Graph:
    """One model configuration with its compiled functions (reused across fits)."""

    n_inducing: int
    rank: int
    learn_inducing: bool
    batch_size: int | None
    model: object = None
    advi: dict = field(default_factory=dict)
    logp_dlogp: dict = field(default_factory=dict)

    def __post_init__(self):
        self.model = _build_model(self.n_inducing, self.rank, self.learn_inducing, self.batch_size)
        self.names = [v.name for v in self.model.free_RVs]
        ip = self.model.initial_point()
        self.shapes = {k: np.shape(v) for k, v in ip.items()}

    def set_data(self, mu, sigma, u, log_jac, loc, scale, Z0):
        pm = _pm()
        coords = {"obs": np.arange(mu.size)} if self.batch_size is None else None
        pm.set_data(
            {
                "base_mu": mu,
                "base_sigma": sigma,
                "base_zscore": u,
                "base_log_jacobian": log_jac,
                "loc": float(loc),
                "scale": float(scale),
                "inducing_init": Z0,
            },
            model=self.model,
            coords=coords,
        )

    # -- flat vectors <-> named parameters (value vars are the RVs: no transforms)
    def ravel(self, point: dict) -> np.ndarray:
        return np.concatenate([np.ravel(point[k]) for k in self.names])

    def unravel(self, flat: np.ndarray) -> dict:
        """Split ``(..., D)`` flat vectors into named arrays ``(..., *shape)``."""
        out, i = {}, 0
        for k in self.names:
            size = int(np.prod(self.shapes[k], dtype=int))
            out[k] = flat[..., i : i + size].reshape(flat.shape[:-1] + self.shapes[k])
            i += size
        return out

    def start_point(self, Z0: np.ndarray, rng: np.random.Generator) -> dict:
        """The identity-map start: every parameter at its prior centre (W slightly jittered)."""
        point = {}
        for k in self.names:
            mean = PRIORS[k][0]
            point[k] = np.full(self.shapes[k], 0.0 if mean is None else mean)
        if "W" in point:
            # W = 0 is a saddle of the sign-symmetric W W^T: start just off it
            point["W"] = 0.1 * rng.standard_normal(self.shapes["W"])
        if "Z" in point:
            point["Z"] = np.array(Z0, float)
        return point

    def advi_step(self, method: str, obj_n_mc: int, mode):
        """Compiled ADVI step (cached per method, MC sample count and compile mode)."""
        key = (method, obj_n_mc, str(mode))
        if key not in self.advi:
            pm = _pm()
            import pytensor

            cls = {"advi": pm.ADVI, "fullrank_advi": pm.FullRankADVI}[method]
            inference = cls(model=self.model, random_seed=0)
            lr = pytensor.shared(np.float64(0.01), name="gpbeta_learning_rate")
            with _quiet_compile():
                step = inference.objective.step_function(
                    score=True,
                    obj_n_mc=obj_n_mc,
                    obj_optimizer=pm.adam(learning_rate=lr),
                    compile_kwargs={"mode": mode},
                )
            data = {v.name for v in self.model.data_vars}
            shared = [v for v in step.get_shared() if v.name not in data]
            rngs = [v for v in shared if isinstance(v.get_value(borrow=True), np.random.Generator)]
            state = [(v, np.copy(v.get_value())) for v in shared if v not in rngs]
            self.advi[key] = (inference, step, lr, rngs, state)
        return self.advi[key]

    def reseed_minibatch(self, seed: int) -> None:
        """Seed the shared RNGs of :func:`pymc.Minibatch` (they pick each evaluation's batch)."""
        from pymc.pytensorf import find_rng_nodes, reseed_rngs

        reseed_rngs(find_rng_nodes([self.model.logp()]), seed)

    def compiled_logp_dlogp(self, mode):
        if str(mode) not in self.logp_dlogp:
            with _quiet_compile():
                fn = self.model.logp_dlogp_function(ravel_inputs=True, mode=mode)
            fn.set_extra_values({})
            self.logp_dlogp[str(mode)] = fn
        return self.logp_dlogp[str(mode)]


@dataclass
class SVIResult:
    """A Gaussian variational family over some coordinates, point estimates for the rest."""

    mean: np.ndarray  # (D,): point estimates, and the variational mean where ``variational``
    chol: np.ndarray  # (d, d): lower Cholesky factor of the variational covariance
    variational: np.ndarray  # (D,) bool
    loss: np.ndarray  # negative ELBO estimate per step

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` flat draws: variational coordinates from q, the others at their point estimate."""
        n = check_int(n, "n (number of draws)", minimum=1)
        out = np.tile(self.mean, (n, 1))
        eps = rng.standard_normal((n, self.chol.shape[0]))
        out[:, self.variational] += eps @ self.chol.T
        return out


def svi_fit(
    logp_dlogp,
    x0,
    variational,
    *,
    n_iter: int,
    learning_rate: float,
    n_mc: int,
    rng: np.random.Generator,
    init_scale: float = 0.1,
) -> SVIResult:
    r"""Maximise an evidence lower bound with a full-rank Gaussian over part of the parameters.

    With :math:`x = (h, v)`, point estimates :math:`h` and :math:`q(v) = N(m, LL^\top)`,
    the bound :math:`\mathcal{L}(h, m, L) = E_{q}[\log p(h, v, y)] + \sum_i \log L_{ii} + \text{const}`
    (the log joint includes the priors, so with a standard-normal prior on :math:`v` this is
    :math:`E_q \log p(y \mid h, v) - \mathrm{KL}(q \,\|\, p(v)) + \log p(h)`) is maximised by
    Adam on reparametrised Monte Carlo gradients, :math:`v = m + L\varepsilon`:
    :math:`\nabla_m = \overline{g_v}`, :math:`\nabla_L = \operatorname{tril}(\overline{g_v
    \varepsilon^\top}) + \operatorname{diag}(1/L_{ii})`, :math:`\nabla_h = \overline{g_h}`, with
    :math:`L_{ii} = e^{\rho_i}`. The result is the average of the iterates over the last
    quarter of the steps (Polyak–Ruppert averaging: the constant-step final iterate carries
    the Monte Carlo noise of its last gradients). For GP-Beta, :math:`v` are the whitened inducing values: this is
    the sparse variational GP of Hensman et al. (2015) that Song et al. (2019) fit.

    Parameters
    ----------
    logp_dlogp : callable
        ``x -> (log p, gradient)`` of the log joint density at a flat vector; it may
        be an unbiased stochastic estimate (GP-Beta's minibatch graph draws a fresh
        batch at every call and scales its log-likelihood by ``n / batch_size``).
    x0 : ndarray, shape (D,)
        Start: point estimates and the variational mean.
    variational : ndarray of bool, shape (D,)
        Which coordinates get the Gaussian family.
    n_iter, learning_rate, n_mc : int, float, int
        Adam steps, step size, Monte Carlo draws per gradient.
    rng : numpy.random.Generator
    init_scale : float, default 0.1
        Initial standard deviation of q (diagonal).

    Returns
    -------
    SVIResult

    Examples
    --------
    A Gaussian target :math:`v \sim N(1, 0.5^2)` with a point parameter :math:`h` at 2:
    the full-rank family contains it, so q recovers it.

    >>> import numpy as np
    >>> from calibprob.calibrators.gp_beta import svi_fit
    >>> def logp_dlogp(x):
    ...     h, v = x
    ...     return -0.5 * (h - 2) ** 2 - 0.5 * ((v - 1) / 0.5) ** 2, np.array([2 - h, (1 - v) / 0.25])
    >>> fit = svi_fit(logp_dlogp, np.zeros(2), np.array([False, True]), n_iter=3000,
    ...               learning_rate=0.01, n_mc=8, rng=np.random.default_rng(0))
    >>> np.round(fit.mean, 1), np.round(fit.chol, 1)
    (array([2., 1.]), array([[0.5]]))
    """
    from calibprob._optim import Adam

    if not callable(logp_dlogp):
        raise TypeError(f"logp_dlogp must be a callable x -> (log p, gradient); got {type(logp_dlogp).__name__}.")
    x0 = check_array(x0, "x0", ndim=1)
    variational = np.asarray(variational)
    if variational.dtype != bool or variational.shape != x0.shape:
        raise ValueError(
            f"variational must be a boolean mask with the shape of x0 {x0.shape}; got dtype "
            f"{variational.dtype} and shape {variational.shape}. Pass e.g. np.array([False, True])."
        )
    if not variational.any():
        raise ValueError(
            "variational selects no coordinate; mark at least one True (the MAP of "
            "the rest is an optimiser's job, e.g. scipy.optimize.minimize)."
        )
    n_iter = check_int(n_iter, "n_iter", minimum=1)
    n_mc = check_int(n_mc, "n_mc", minimum=1)
    for name, value in (("learning_rate", learning_rate), ("init_scale", init_scale)):
        if not (isinstance(value, (int, float)) and np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive finite number; got {value!r}. Pass e.g. 0.01.")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"rng must be a numpy.random.Generator; got {type(rng).__name__}. Pass np.random.default_rng(seed)."
        )
    h_idx, v_idx = np.flatnonzero(~variational), np.flatnonzero(variational)
    d = v_idx.size
    h, m = x0[h_idx].copy(), x0[v_idx].copy()
    strict = np.tril(np.ones((d, d)), -1)
    params = [h, m, np.zeros((d, d)), np.full(d, np.log(init_scale))]
    optimisers = [Adam(p.shape, learning_rate) for p in params]
    loss = np.empty(n_iter)
    x = np.empty(x0.size)
    tail = max(n_iter // 4, 1)
    avg_h, avg_m, avg_L = np.zeros_like(h), np.zeros(d), np.zeros((d, d))
    for t in range(1, n_iter + 1):
        h, m, off, rho = params
        L = off * strict + np.diag(np.exp(rho))
        eps = rng.standard_normal((n_mc, d))
        g_h, g_v, g_L, total = np.zeros_like(h), np.zeros(d), np.zeros((d, d)), 0.0
        x[h_idx] = h
        for e in eps:
            x[v_idx] = m + L @ e
            lp, grad = logp_dlogp(x)
            grad = np.asarray(grad, float)
            total += float(lp)
            g_h += grad[h_idx]
            g_v += grad[v_idx]
            g_L += np.outer(grad[v_idx], e)
        g_h, g_v, g_L = g_h / n_mc, g_v / n_mc, g_L / n_mc
        loss[t - 1] = -(total / n_mc + rho.sum())
        grads = (g_h, g_v, g_L * strict, np.diag(g_L) * np.exp(rho) + 1.0)
        params = [p + opt.step(g) for p, opt, g in zip(params, optimisers, grads)]  # ascent
        if t > n_iter - tail:
            avg_h += params[0] / tail
            avg_m += params[1] / tail
            avg_L += (params[2] * strict + np.diag(np.exp(params[3]))) / tail
    mean = x0.copy()
    mean[h_idx], mean[v_idx] = avg_h, avg_m
    return SVIResult(mean=mean, chol=avg_L, variational=variational, loss=loss)


_GRAPHS = GraphCache("calibprob.calibrators.gp_beta")


def _graph(n_inducing: int, rank: int, learn_inducing: bool, batch_size: int | None) -> _Graph:
    key = (n_inducing, rank, bool(learn_inducing), batch_size)
    return _GRAPHS.get(key, lambda: _Graph(*key))


def clear_graph_cache() -> None:
    """Forget every cached GP-Beta model and compiled function (frees memory)."""
    _GRAPHS.clear()


#: PyTensor mode of the compiled ADVI step / log posterior when ``compile_mode=None``.
#: Measured for the 16-inducing-point ADVI step (this 2-core box): the C backend
#: ("CVM") compiles in ~47 s cold / ~2.3 s warm and runs a step in 0.17 ms (n = 32);
#: Numba (PyTensor's default) takes ~112 s cold / ~4.5 s warm and 0.24 ms per step.
DEFAULT_COMPILE_MODE = "CVM"


@contextlib.contextmanager
def _quiet_compile():
    # The C backend warns once per compile that it found no BLAS to link; it then
    # uses NumPy's C-API dot, which is what these small matrices need anyway.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*could not link to a BLAS.*")
        warnings.filterwarnings("ignore", message=".*NumPy C-API based implementation for BLAS.*")
        yield


def _blas_single_thread():
    # Small triangular solves are ~20x slower with 2 OpenBLAS threads than with 1
    # (thread start-up dominates); every fit and prediction runs single-threaded.
    return limit_blas_threads(1)


#: Posterior variables whose r-hat is meaningful (the coregionalisation factor W is sign-symmetric).
_IDENTIFIABLE = ("theta", "gamma", "delta", "R", "V")


def held_out_elpd(log_lik):
    r"""Held-out expected log predictive density as an ArviZ ``ELPDData`` (for ``arviz.compare``).

    With pointwise log-likelihoods :math:`\ell_{si} = \log p(y_i\mid\vartheta_s)` of
    *held-out* points under posterior draws :math:`s`,
    :math:`\mathrm{elpd}_i = \log\frac1S\sum_s e^{\ell_{si}}` — the exact held-out
    predictive density, with no importance sampling. (PSIS-LOO on points that were
    never in the fit would estimate something else, and fails on a base model whose
    log-likelihood does not vary over draws.) Returned as the one-fold case of
    :class:`arviz_stats.utils.ELPDDataLOOKFold`, so models scored on the same
    held-out points compare with ``arviz.compare({...})``.

    Parameters
    ----------
    log_lik : array_like, shape (n,), (S, n) or (chain, draw, n)
        A plug-in model (e.g. the uncalibrated Gaussian base) passes shape (n,).

    Returns
    -------
    arviz_stats.utils.ELPDDataLOOKFold
        ``elpd`` (sum), ``se``, ``p`` (:math:`\sum_i \mathrm{elpd}_i - \overline{\ell_{\cdot i}}`),
        ``elpd_i`` (DataArray over ``obs``).
    """
    from calibprob.predictive import _heldout_elpd_data

    ll = np.asarray(log_lik, float)
    n = ll.shape[-1]
    ll = ll.reshape(-1, n)
    check_array(ll, "log_lik", ndim=2)
    return _heldout_elpd_data(ll)


# ===========================================================================
# The estimator
# ===========================================================================


class GPBetaCalibrator(BaseEstimator):
    r"""GP-Beta distribution calibration of a Gaussian base model (Song et al. 2019).

    Parameters
    ----------
    n_inducing : int, default 16
        Number :math:`m` of inducing points in :math:`(\mu, \sigma)` space (the
        paper uses 8–64). Initialised by k-means of the standardised inputs.
    rank : int, default 1
        Rank :math:`r` of :math:`W` in the coregionalisation :math:`B = WW^\top +
        \operatorname{diag}(\kappa)`, 0 to 3 (0: independent outputs).
    inference : {"advi", "fullrank_advi", "svi", "map", "nuts"}, default "advi"
        How the posterior is approximated (see the module docstring). ``"svi"``
        is the paper's and netcal's sparse variational GP (variational inducing
        values, point hyperparameters; :func:`svi_fit`).
    draws : int, default 200
        Posterior draws kept: from the variational approximation (ADVI, SVI), or
        per chain (NUTS). Ignored by MAP (one draw). Prediction costs scale with it.
    n_iter : int, default 4000
        ADVI / SVI iterations (Adam steps).
    learning_rate : float or None, default None
        Adam learning rate of ADVI / SVI. ``None``: 0.01 (the paper's Fig. 1
        setting) for ``"advi"`` and ``"svi"``, 0.003 for ``"fullrank_advi"``,
        whose step at 0.01 is too noisy (measured on the n = 1000 Fig. 1 set,
        4000 steps, four seeds: final negative ELBO 2824–2833 at 0.01 against
        2798–2799 at 0.003).
    obj_n_mc : int, default 4
        Monte Carlo draws per ADVI / SVI gradient.
    batch_size : int, "auto" or None, default "auto"
        ADVI / SVI minibatch size (:func:`pymc.Minibatch`, stochastic variational
        inference on subsets: each gradient sees a fresh random batch, its
        log-likelihood scaled by ``n / batch_size``). ``"auto"``: full batch up
        to 4096 points, 256 above; ``None``: always full batch. MAP and NUTS use
        every point.
    learn_inducing : bool, default False
        Give the inducing inputs a prior :math:`N(Z_0, 0.25^2)` and infer them
        (with SVI: a point estimate, as in the sparse variational GP).
    tune, chains, target_accept : NUTS settings
        Warm-up iterations per chain, number of chains (run one after another),
        target acceptance rate.
    compile_mode : str, PyTensor Mode or None
        Mode of the compiled ADVI step, log posterior and NUTS functions; ``None``
        uses :data:`DEFAULT_COMPILE_MODE` (``"CVM"``, the C backend).
    n_grid : int, default 256
        Grid points per observation for the calibrated CDF (in :math:`z`,
        spanning all but 1e-7 of the mass).
    random_state : int, numpy Generator or None
        Seed for k-means, ADVI/NUTS and posterior draws.

    Attributes
    ----------
    idata_ : xarray.DataTree
        ``posterior`` (free parameters plus ``theta``, ``gamma``, ``kappa``,
        correlation ``R``), ``sample_stats``, ``log_likelihood`` (``y``, pointwise),
        ``observed_data``, ``constant_data`` (base ``mu``, ``sigma``, the
        standardisation and the inducing initialisation), and for ADVI the
        ``variational`` group (loss per iteration).
    loc_, scale_ : float
        Standardisation of the inputs.
    inducing_init_ : ndarray, shape (n_inducing, 2)
        k-means inducing inputs in standardised ``(mu, sigma)``.
    fit_time_ : float
        Seconds spent in :meth:`fit` (including any compilation).

    Examples
    --------
    A base that predicts :math:`N(\mu, 1)` everywhere while the true spread is
    0.5 for :math:`\mu < 0` and 2 above: GP-Beta learns the calibration map as
    a function of :math:`(\mu, \sigma)` and narrows or widens accordingly (the
    fit compiles a PyTensor graph once per configuration, about 20 s).

    >>> import numpy as np
    >>> from calibprob.calibrators import GPBetaCalibrator
    >>> rng = np.random.default_rng(0)
    >>> mu = rng.uniform(-2, 2, 200)
    >>> y = mu + np.where(mu > 0, 2.0, 0.5) * rng.normal(size=200)
    >>> cal = GPBetaCalibrator(n_inducing=4, inference="map", random_state=0)
    >>> cal = cal.fit(mu, np.ones(200), y)  # doctest: +SKIP
    >>> pred = cal.predict(np.array([-1.0, 1.0]), np.ones(2), levels=[0.05, 0.95])  # doctest: +SKIP
    >>> width = (pred["quantile"].sel(level=0.95) - pred["quantile"].sel(level=0.05)).values  # doctest: +SKIP
    >>> bool(width[0] < 3.29 < width[1])  # doctest: +SKIP
    True

    References
    ----------
    Song, H., Diethe, T., Kull, M., Flach, P. (2019). Distribution calibration
    for regression. ICML, §4.
    """

    def __init__(
        self,
        *,
        n_inducing: int = 16,
        rank: int = 1,
        inference: str = "advi",
        draws: int = 200,
        n_iter: int = 4000,
        learning_rate: float | None = None,
        obj_n_mc: int = 1,
        batch_size="auto",
        learn_inducing: bool = False,
        tune: int = 1000,
        chains: int = 2,
        target_accept: float = 0.9,
        n_grid: int = 256,
        compile_mode=None,
        random_state=None,
    ):
        self.n_inducing = n_inducing
        self.rank = rank
        self.inference = inference
        self.draws = draws
        self.n_iter = n_iter
        self.learning_rate = learning_rate
        self.obj_n_mc = obj_n_mc
        self.batch_size = batch_size
        self.learn_inducing = learn_inducing
        self.tune = tune
        self.chains = chains
        self.target_accept = target_accept
        self.n_grid = n_grid
        self.compile_mode = compile_mode
        self.random_state = random_state

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> None:
        check_int(self.n_inducing, "n_inducing", minimum=1)
        check_int(self.rank, "rank", minimum=0)
        if self.rank > 3:
            raise ValueError(f"rank must be in 0..3 (three latent outputs a, b, c); got {self.rank}.")
        check_choice(self.inference, "inference", INFERENCE_METHODS)
        check_int(self.draws, "draws", minimum=1)
        check_int(self.n_iter, "n_iter", minimum=1)
        check_int(self.obj_n_mc, "obj_n_mc", minimum=1)
        check_int(self.tune, "tune", minimum=0)
        check_int(self.chains, "chains", minimum=1)
        check_int(self.n_grid, "n_grid", minimum=16)
        if self.learning_rate is not None and not (
            isinstance(self.learning_rate, (int, float)) and self.learning_rate > 0
        ):
            raise ValueError(
                f"learning_rate must be a positive number or None (the method's default); got {self.learning_rate!r}."
            )
        if not 0 < self.target_accept < 1:
            raise ValueError(f"target_accept must be in (0, 1); got {self.target_accept!r}.")
        if self.batch_size not in ("auto", None):
            check_int(self.batch_size, "batch_size", minimum=1)

    def _prediction(self, method: str, pred, rest: tuple) -> tuple[xr.Dataset, tuple]:
        """The base's predictive Dataset, and the remaining positional arguments.

        Accepts the deprecated ``(mu, sigma, ...)`` form for one release: two 1-D
        arrays of equal length become ``calibprob.normal(mu, sigma)``.
        """
        if isinstance(pred, xr.Dataset):
            return validate(pred), rest
        legacy = (
            rest
            and rest[0] is not None
            and not isinstance(rest[0], xr.Dataset)
            and np.ndim(pred) == 1
            and np.shape(rest[0]) == np.shape(pred)
        )
        if legacy:
            warnings.warn(
                f"GPBetaCalibrator.{method}(mu, sigma, ...) is deprecated and will be removed in the next "
                f"release: pass the base's predictive Dataset instead, e.g. "
                f"{method}(calibprob.normal(mu, sigma), ...).",
                FutureWarning,
                stacklevel=3,
            )
            mu = check_array(pred, "mu", ndim=1)
            sigma = check_array(rest[0], "sigma", ndim=1)
            check_positive(sigma, "sigma")
            return normal(mu, sigma), rest[1:]
        return check_predictive(pred, "GPBetaCalibrator", "pred_cal" if method == "fit" else "pred"), rest

    @staticmethod
    def _covariates(pred: xr.Dataset) -> tuple[np.ndarray, np.ndarray]:
        """The latent GP's inputs: the base's predictive mean and standard deviation."""
        mu = np.asarray(pred.calib.mean().values, float)
        sigma = np.asarray(pred.calib.std().values, float)
        if not np.all(np.isfinite(mu)) or not np.all(sigma > 0):
            raise ValueError(
                "GP-Beta needs a finite predictive mean and a positive predictive std for every observation "
                f"(its GP inputs); got min std {np.min(sigma):.3g}. Drop observations whose predictive "
                "distribution is a point mass."
            )
        return mu, sigma

    @staticmethod
    def _observed_terms(pred: xr.Dataset, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""Probit PIT :math:`u = \Phi^{-1}(F(y))` and log Jacobian :math:`\log f(y) - \log\varphi(u)`.

        ``y`` has shape (n,) or (n, k); exact for the normal family
        (:math:`u = (y-\mu)/\sigma`, :math:`\log J = -\log\sigma`).
        """
        cols = y if y.ndim == 2 else y[:, None]
        if pred.calib.is_normal:
            loc, scale = pred["loc"].values[:, None], pred["scale"].values[:, None]
            u = (cols - loc) / scale
            jac = np.broadcast_to(-np.log(scale), u.shape)
        else:
            from calibprob.predictive import quantile_logpdf, quantile_zscore

            q, lv = pred.calib.quantiles, pred.calib.levels
            u = np.stack([quantile_zscore(q, lv, cols[:, j]) for j in range(cols.shape[1])], axis=1)
            logf = np.stack([quantile_logpdf(q, lv, cols[:, j]) for j in range(cols.shape[1])], axis=1)
            jac = logf + 0.5 * u * u + _LOG_SQRT_2PI
        return (u, jac) if y.ndim == 2 else (u[:, 0], jac[:, 0])

    @staticmethod
    def _targets(y, n: int, name: str, ndim=1) -> np.ndarray:
        y = check_array(y.values if isinstance(y, xr.DataArray) else y, name, ndim=ndim)
        if y.shape[0] != n:
            raise ValueError(
                f"mismatched lengths: {name} has {y.shape[0]} entries, the prediction has {n} observations. "
                "Pass one target per observation of the prediction, in the same order."
            )
        return y

    def _learning_rate(self) -> float:
        if self.learning_rate is not None:
            return float(self.learning_rate)
        return 0.003 if self.inference == "fullrank_advi" else 0.01

    def _mode(self):
        return DEFAULT_COMPILE_MODE if self.compile_mode is None else self.compile_mode

    def _batch(self, n: int) -> int | None:
        if self.inference not in ("advi", "fullrank_advi", "svi") or self.batch_size is None:
            return None
        if self.batch_size == "auto":
            return None if n <= AUTO_FULL_BATCH else AUTO_BATCH_SIZE
        return None if self.batch_size >= n else int(self.batch_size)

    # --------------------------------------------------------------------- fit
    def fit(self, pred_cal, y_cal, *_legacy) -> GPBetaCalibrator:
        r"""Fit the calibrator on the base's prediction for calibration data.

        Parameters
        ----------
        pred_cal : xarray.Dataset
            The base model's predictive distribution at the calibration inputs
            (the contract of :mod:`calibprob.predictive`): Gaussian
            (:func:`calibprob.normal`), quantiles, or posterior-predictive draws
            (:func:`calibprob.from_draws`) — used as it is, never collapsed to a
            Gaussian. Its mean and standard deviation are the latent GP's inputs;
            its CDF and density at ``y_cal`` enter the Beta-link likelihood.
        y_cal : array_like or xarray.DataArray, shape (n,)
            Observed targets, one per observation of ``pred_cal`` (any single dim name).

        Returns
        -------
        self
        """
        t_start = time.perf_counter()
        self._check_params()
        pred_cal, rest = self._prediction("fit", pred_cal, (y_cal, *_legacy))
        if len(rest) != 1:
            raise TypeError("GPBetaCalibrator.fit takes (pred_cal, y_cal).")
        n = pred_cal.sizes["obs"]
        y = self._targets(rest[0], n, "y_cal")
        mu, sigma = self._covariates(pred_cal)
        u, log_jac = self._observed_terms(pred_cal, y)
        m = self.n_inducing
        distinct = np.unique(np.c_[mu, sigma], axis=0).shape[0]
        if n < m or distinct < m:
            raise ValueError(
                f"too few points for n_inducing={m}: got {n} calibration points with {distinct} distinct "
                f"(mean, std) pairs; GP-Beta needs at least n_inducing distinct pairs. Pass "
                f"n_inducing <= {distinct} or more calibration data."
            )
        rng = np.random.default_rng(self.random_state)
        loc = float(np.mean(mu))
        scale = float(np.sqrt(np.var(mu) + np.mean(sigma**2)))
        Xs = np.c_[(mu - loc) / scale, sigma / scale]
        Z0 = _kmeans(Xs, m, rng)
        self.loc_, self.scale_, self.inducing_init_ = loc, scale, Z0

        batch = self._batch(n)
        g = _graph(m, self.rank, self.learn_inducing, batch)
        g.set_data(mu, sigma, u, log_jac, loc, scale, Z0)
        seed = int(rng.integers(2**31 - 1))
        extra_groups = {}
        with _blas_single_thread():
            if self.inference in ("advi", "fullrank_advi", "svi"):
                if self.inference == "svi":
                    draws, loss = self._fit_svi(g, Z0, seed)
                    what = "with the inducing values variational and the hyperparameters point estimates"
                else:
                    draws, loss = self._fit_advi(g, Z0, seed)
                    what = "as PyMC reports it (divided by its minibatch normalising constant when minibatched)"
                post = {k: v[None] for k, v in draws.items()}
                extra_groups["variational"] = xr.Dataset(
                    {"loss": ("iteration", loss)},
                    coords={"iteration": np.arange(loss.size)},
                    attrs={"description": f"negative ELBO estimate per Adam step, {what}"},
                )
                sample_stats = None
            elif self.inference == "map":
                point, info = self._fit_map(g, Z0, seed)
                post = {k: np.asarray(v)[None, None] for k, v in point.items()}
                sample_stats = None
                extra_groups["map"] = xr.Dataset(attrs=info)
            else:
                idata = self._fit_nuts(g, seed)
                post = {k: idata["posterior"][k].values for k in g.names}
                extra_groups["_posterior_attrs"] = dict(idata["posterior"].attrs)
                sample_stats = idata["sample_stats"].to_dataset()
                sample_stats.attrs.update(self._convergence(idata))
                # the CustomDist's own pointwise log-likelihood (pm.compute_log_likelihood)
                extra_groups["log_likelihood"] = idata["log_likelihood"].to_dataset()
        self.n_features_in_ = 2
        self.rank_ = self.rank
        self.idata_ = self._make_tree(post, mu, sigma, u, log_jac, y, sample_stats, extra_groups, batch)
        self.fit_time_ = time.perf_counter() - t_start
        self.idata_.attrs["fit_time"] = self.fit_time_
        return self

    def _fit_advi(self, g: _Graph, Z0, seed):
        pm = _pm()
        inference, step, lr, rngs, state = g.advi_step(self.inference, self.obj_n_mc, self._mode())
        for var, value in state:  # fresh optimiser state and variational parameters
            var.set_value(np.copy(value))
        rng = np.random.default_rng(seed)
        start = g.ravel(g.start_point(Z0, rng))
        group = inference.approx.groups[0]
        group.params_dict["mu"].set_value(start.copy())
        if self.inference == "fullrank_advi":
            # PyMC stores L's diagonal through a softplus and starts it at softplus(1) = 1.31;
            # draws that wide give Beta maps with exp(+-5) slopes and a loss of ~1e9:
            # start at sd 0.1 instead (mean-field starts at softplus(0) = 0.69).
            d = start.size
            group.params_dict["L_tril"].set_value(np.log(np.expm1(0.1)) * np.eye(d)[np.tril_indices(d)])
        pm.pytensorf.reseed_rngs(rngs, seed)
        lr.set_value(np.float64(self._learning_rate()))
        loss = np.empty(self.n_iter)
        for i in range(self.n_iter):
            loss[i] = step()
        if not np.all(np.isfinite(loss[-50:])):
            raise FloatingPointError(
                "GP-Beta ADVI diverged (non-finite loss). Lower learning_rate or use inference='map'."
            )
        mu_q = group.params_dict["mu"].get_value()
        eps = rng.standard_normal((self.draws, mu_q.size))
        if self.inference == "advi":
            std = np.logaddexp(0.0, group.params_dict["rho"].get_value())  # softplus, as PyMC
            flat = mu_q + eps * std
        else:
            d = mu_q.size
            L = np.zeros((d, d))
            L[np.tril_indices(d)] = group.params_dict["L_tril"].get_value()
            L[np.diag_indices(d)] = np.logaddexp(0.0, np.diag(L))  # PyMC: softplus on the diagonal
            flat = mu_q + eps @ L.T
        self.advi_mean_ = g.unravel(mu_q)
        return g.unravel(flat), loss

    def _fit_svi(self, g: _Graph, Z0, seed):
        fn = g.compiled_logp_dlogp(self._mode())
        rng = np.random.default_rng(seed)
        if g.batch_size is not None:
            # pm.Minibatch draws each call's batch from shared RNGs in the compiled graph:
            # seed them so that a minibatched fit is as reproducible as a full-batch one
            g.reseed_minibatch(int(rng.integers(2**31 - 1)))
        x0 = g.ravel(g.start_point(Z0, rng))
        variational = g.ravel({k: np.full(g.shapes[k], k == "V", float) for k in g.names}).astype(bool)
        fit = svi_fit(
            fn, x0, variational, n_iter=self.n_iter, learning_rate=self._learning_rate(), n_mc=self.obj_n_mc, rng=rng
        )
        if not np.all(np.isfinite(fit.loss[-50:])):
            raise FloatingPointError(
                "GP-Beta SVI diverged (non-finite loss). Lower learning_rate or use inference='map'."
            )
        flat = fit.sample(self.draws, rng)
        self.svi_mean_ = g.unravel(fit.mean)
        return g.unravel(flat), fit.loss

    def _fit_map(self, g: _Graph, Z0, seed):
        from scipy.optimize import minimize

        fn = g.compiled_logp_dlogp(self._mode())
        x0 = g.ravel(g.start_point(Z0, np.random.default_rng(seed)))

        def objective(x):
            lp, grad = fn(x)
            if not np.isfinite(lp):
                return 1e300, np.zeros_like(x)
            return -float(lp), -np.asarray(grad, float)

        res = minimize(objective, x0, jac=True, method="L-BFGS-B", options={"maxiter": 5000})
        info = {
            "success": int(res.success),
            "message": str(res.message),
            "n_iter": int(res.nit),
            "log_posterior": float(-res.fun),
        }
        return g.unravel(res.x), info

    def _fit_nuts(self, g: _Graph, seed):
        pm = _pm()
        import importlib.util

        sampler = "nutpie" if importlib.util.find_spec("nutpie") is not None else "pymc"
        compile_kwargs = {"mode": self._mode()} if sampler == "pymc" else None
        with _quiet_compile(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*chains.*")
            idata = pm.sample(
                draws=self.draws,
                tune=self.tune,
                chains=self.chains,
                cores=1,
                random_seed=seed,
                target_accept=self.target_accept,
                nuts_sampler=sampler,
                progressbar=False,
                compute_convergence_checks=False,
                model=g.model,
                compile_kwargs=compile_kwargs,
            )
            pm.compute_log_likelihood(
                idata,
                model=g.model,
                progressbar=False,
                extend_inferencedata=True,
                compile_kwargs={"mode": self._mode()},
            )
        self.nuts_sampler_ = sampler
        return idata

    @staticmethod
    def _convergence(idata) -> dict:
        """PyMC's convergence checks on a NUTS fit: warn on divergences and r-hat > 1.01; return them."""
        import arviz as az

        post = idata["posterior"].to_dataset()
        # r-hat on the identifiable quantities only: W (and with it the whitened inducing values)
        # is sign-symmetric, so its chains may sit in mirror modes of one posterior
        identifiable = [v for v in _IDENTIFIABLE if v in post.data_vars]
        post = post[identifiable] if identifiable else post
        n_div = int(idata["sample_stats"]["diverging"].values.sum())
        rhat = az.rhat(post) if post.sizes.get("chain", 1) > 1 else None
        max_rhat = float(max(float(rhat[v].max()) for v in rhat.data_vars)) if rhat is not None else float("nan")
        ess = az.ess(post, method="bulk")
        min_ess = float(min(float(ess[v].min()) for v in ess.data_vars))
        problems = []
        if n_div:
            problems.append(f"{n_div} divergent transition(s) after tuning")
        if np.isfinite(max_rhat) and max_rhat > 1.01:
            problems.append(f"max r-hat {max_rhat:.3f} > 1.01")
        if problems:
            warnings.warn(
                "GP-Beta NUTS did not converge cleanly: " + "; ".join(problems) + ". The posterior may be "
                "biased: raise tune/draws or target_accept (now in idata_.sample_stats.attrs), or use "
                "inference='svi'/'map'. Check az.summary(cal.idata_).",
                ConvergenceWarning,
                stacklevel=4,
            )
        return {"n_divergences": n_div, "max_rhat": max_rhat, "min_ess_bulk": min_ess, "converged": int(not problems)}

    # ------------------------------------------------------------ DataTree
    def _post_flat(self) -> dict:
        post = self.idata_["posterior"]
        names = ["log_theta", "log_gamma", "delta", "V"] + (["W", "log_kappa"] if self.rank_ > 0 else [])
        if "Z" in post:
            names.append("Z")
        out = {}
        for k in names:
            da = post[k]
            out[k] = da.values.reshape((-1,) + da.shape[2:])
        return out

    def _make_tree(self, post, mu, sigma, u, log_jac, y, sample_stats, extra_groups, batch) -> xr.DataTree:
        S = {k: v.shape[:2] for k, v in post.items()}
        chain, draw = next(iter(S.values()))
        dims = {
            "log_theta": (),
            "W": ("output", "rank"),
            "log_kappa": ("output",),
            "log_gamma": ("output",),
            "delta": ("output",),
            "V": ("inducing", "output"),
            "Z": ("inducing", "input"),
        }
        coords = {
            "chain": np.arange(chain),
            "draw": np.arange(draw),
            "output": list(OUTPUTS),
            "inducing": np.arange(self.n_inducing),
            "input": ["mu", "sigma"],
            "output2": list(OUTPUTS),
            "obs": np.arange(mu.size),
        }
        if self.rank > 0:
            coords["rank"] = np.arange(self.rank)
        data = {k: (("chain", "draw") + dims[k], np.asarray(v, float)) for k, v in post.items()}
        # derived, identifiable quantities (what to read in az.summary)
        data["theta"] = (("chain", "draw"), np.exp(post["log_theta"]))
        data["gamma"] = (("chain", "draw", "output"), np.exp(post["log_gamma"]))
        if self.rank > 0:
            data["kappa"] = (("chain", "draw", "output"), np.exp(post["log_kappa"]))
            W = post["W"]
            B = W @ np.swapaxes(W, -1, -2) + np.exp(post["log_kappa"])[..., None] * np.eye(3)
            data["R"] = (("chain", "draw", "output", "output2"), _correlation(B))
        posterior = xr.Dataset(data, coords={k: v for k, v in coords.items() if k != "obs"})
        posterior.attrs.update(extra_groups.pop("_posterior_attrs", {}))
        posterior.attrs.update({"inference": self.inference, "n_inducing": self.n_inducing, "rank": self.rank})

        flat = {k: v.reshape((-1,) + v.shape[2:]) for k, v in post.items()}
        ll = _pointwise_loglik(flat, self._standardise(mu, sigma), u, log_jac, self.inducing_init_, self.rank)
        ll = ll.reshape(chain, draw, mu.size)
        log_lik = xr.Dataset(
            {"y": (("chain", "draw", "obs"), ll)},
            coords={"chain": coords["chain"], "draw": coords["draw"], "obs": coords["obs"]},
        )
        if sample_stats is None:
            sample_stats = xr.Dataset(
                {"log_likelihood": (("chain", "draw"), ll.sum(axis=-1))},
                coords={"chain": coords["chain"], "draw": coords["draw"]},
                attrs={"inference": self.inference},
            )
        observed = xr.Dataset({"y": ("obs", y)}, coords={"obs": coords["obs"]})
        constant = xr.Dataset(
            {
                "base_mu": ("obs", mu),
                "base_sigma": ("obs", sigma),
                "base_zscore": ("obs", u),
                "base_log_jacobian": ("obs", log_jac),
                "loc": self.loc_,
                "scale": self.scale_,
                "inducing_init": (("inducing", "input"), self.inducing_init_),
            },
            coords={"obs": coords["obs"], "inducing": coords["inducing"], "input": coords["input"]},
        )
        groups = {
            "posterior": posterior,
            "sample_stats": sample_stats,
            "log_likelihood": log_lik,
            "observed_data": observed,
            "constant_data": constant,
        }
        groups.update(extra_groups)  # NUTS: PyMC's log_likelihood replaces the NumPy one
        tree = xr.DataTree.from_dict(groups)
        tree.attrs.update(
            {
                "method": "gp-beta",
                "inference": self.inference,
                "n_inducing": self.n_inducing,
                "rank": self.rank,
                "learn_inducing": int(bool(self.learn_inducing)),
                "batch_size": 0 if batch is None else int(batch),
                "paper": "Song, Diethe, Kull & Flach (2019)",
            }
        )
        return tree

    # -------------------------------------------------------------- predict
    def _standardise(self, mu, sigma) -> np.ndarray:
        return np.c_[(mu - self.loc_) / self.scale_, sigma / self.scale_]

    def _latent(self, mu, sigma) -> np.ndarray:
        with _blas_single_thread():
            return _latent_numpy(self._post_flat(), self._standardise(mu, sigma), self.inducing_init_, self.rank_)

    def _check_new(self, method: str, pred, rest: tuple, *, y_ndim=None):
        """Fitted check, the prediction (new or deprecated form), its covariates and optional targets."""
        check_is_fitted(self, "idata_", method="fit")
        pred, rest = self._prediction(method, pred, rest)
        mu, sigma = self._covariates(pred)
        y = None
        if y_ndim is not None:
            if not rest or rest[0] is None:
                raise TypeError(f"GPBetaCalibrator.{method} needs the observed values y.")
            y = self._targets(rest[0], pred.sizes["obs"], "y", ndim=y_ndim)
            rest = rest[1:]
        return pred, mu, sigma, y, rest

    def _cdf_on_grid(self, w: np.ndarray, p_tail: float = 1e-7):
        """Posterior-averaged calibrated CDF on a per-observation z grid: (zgrid (n, G), F (n, G)).

        The grid spans, per observation, the union over draws of the closed-form
        tail bounds of :func:`_tail_bounds`, so at most ``p_tail`` of the
        averaged mass lies beyond either end.
        """
        S, n, _ = w.shape
        G = self.n_grid
        lo, hi = _tail_bounds(w[..., 0], w[..., 1], w[..., 2], p_tail)
        lo, hi = lo.min(axis=0), hi.max(axis=0)
        narrow = hi - lo < 1e-3
        lo, hi = np.where(narrow, lo - 0.5, lo), np.where(narrow, hi + 0.5, hi)
        zg = lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, G)[None, :]
        F = np.empty((n, G))
        rows = max(1, _BLOCK // (S * G))
        for start in range(0, n, rows):
            sl = slice(start, start + rows)
            lq, l1q = special.log_ndtr(zg[sl]), special.log_ndtr(-zg[sl])
            # t = a log q - b log(1-q) + c, in place (the (S, rows, G) block dominates prediction)
            t = np.multiply(np.exp(w[:, sl, 0, None]), lq[None])
            t -= np.exp(w[:, sl, 1, None]) * l1q[None]
            t += w[:, sl, 2, None]
            special.expit(t, out=t)
            F[sl] = t.mean(axis=0)
        return zg, np.maximum.accumulate(F, axis=1)

    @staticmethod
    def _invert(zg, F, levels):
        """Quantiles in z by interpolating z against Phi^{-1}(F) (exact for Gaussian pieces)."""
        u = special.ndtri(np.clip(F, 1e-300, 1.0 - 1e-16))
        # strictly increasing abscissae for np.interp (flat numerical tails)
        u = u + 1e-12 * np.arange(u.shape[1])[None, :]
        ul = special.ndtri(levels)
        return np.stack([np.interp(ul, u[i], zg[i]) for i in range(u.shape[0])])

    @staticmethod
    def _moments_from_grid(zg, F):
        # mass between grid points sits at the midpoint; the tails (< 1e-6) at the ends
        # zg: the grid on the response scale, mapped monotonically from the probit grid
        mass = np.diff(F, axis=1)
        mid = 0.5 * (zg[:, 1:] + zg[:, :-1])
        m0, m1 = F[:, :1], 1.0 - F[:, -1:]
        total = mass.sum(axis=1, keepdims=True) + m0 + m1
        mean = (np.sum(mass * mid, axis=1, keepdims=True) + m0 * zg[:, :1] + m1 * zg[:, -1:]) / total
        h2 = np.diff(zg, axis=1) ** 2 / 12.0  # within-bin spread (uniform mass per bin)
        second = (
            np.sum(mass * ((mid - mean) ** 2 + h2), axis=1, keepdims=True)
            + m0 * (zg[:, :1] - mean) ** 2
            + m1 * (zg[:, -1:] - mean) ** 2
        ) / total
        return mean[:, 0], np.sqrt(second[:, 0])

    def predict(self, pred, *_legacy, levels=None) -> xr.Dataset:
        r"""The calibrated predictive distribution for a new base prediction.

        Parameters
        ----------
        pred : xarray.Dataset
            The base model's predictive distribution at new inputs (any member
            of the contract, as in :meth:`fit`).
        levels : array_like, optional
            Quantile levels; default the levels of ``pred``.

        Returns
        -------
        xarray.Dataset
            The predictive-distribution contract: ``quantile(obs, level)`` by
            monotone inversion of the posterior-averaged calibrated CDF
            :math:`\bar F_i(y) = \frac1S\sum_s c_{\beta,s}(F_i(y))`
            on a grid of ``n_grid`` points per observation in the base's probit
            PIT :math:`u = \Phi^{-1}(F_i(y))` (interpolated linearly in
            :math:`\Phi^{-1}(\bar F)`, exact between grid points when the calibrated
            law is locally Gaussian) and mapped back through the base's quantile
            function, :math:`y = F_i^{-1}(\Phi(u))`; plus its ``mean`` and
            ``std``; ``attrs["method"] == "gp-beta"``.
        """
        from calibprob.predictive import _levels_or_default, from_quantiles

        pred, mu, sigma, _, rest = self._check_new("predict", pred, _legacy)
        if rest:
            raise TypeError("GPBetaCalibrator.predict takes one prediction; pass levels= by keyword.")
        lv = pred.calib.levels if levels is None else _levels_or_default(levels)
        w = self._latent(mu, sigma)
        zg, F = self._cdf_on_grid(w)
        q = pred.calib.ppf_zscore(self._invert(zg, F, lv))
        mean, std = self._moments_from_grid(pred.calib.ppf_zscore(zg), F)
        ds = from_quantiles(q, lv, obs=pred["obs"].values, method="gp-beta", mean=mean, std=std)
        ds.attrs.update(
            {
                "inference": self.inference,
                "n_inducing": self.n_inducing,
                "n_posterior_draws": int(w.shape[0]),
                "base_method": str(pred.attrs.get("method", "")),
            }
        )
        return ds

    def cdf(self, pred, y, *_legacy) -> np.ndarray:
        r"""Posterior-averaged calibrated CDF :math:`\bar F_i(y_i)`, shape (n,) or (n, k) like ``y``."""
        pred, mu, sigma, y, _ = self._check_new("cdf", pred, (y, *_legacy), y_ndim=(1, 2))
        w = self._latent(mu, sigma)
        u, _ = self._observed_terms(pred, y)
        uu = u if y.ndim == 2 else u[:, None]
        F = beta_link_cdf_z(uu[None], w[..., 0, None], w[..., 1, None], w[..., 2, None]).mean(axis=0)
        return F if y.ndim == 2 else F[:, 0]

    def log_likelihood(self, pred, y, *_legacy) -> np.ndarray:
        r"""Pointwise log density per posterior draw, :math:`\log p(y_i \mid w_s)`, shape (chain, draw, n)."""
        pred, mu, sigma, y, _ = self._check_new("log_likelihood", pred, (y, *_legacy), y_ndim=1)
        u, log_jac = self._observed_terms(pred, y)
        with _blas_single_thread():
            ll = _pointwise_loglik(
                self._post_flat(), self._standardise(mu, sigma), u, log_jac, self.inducing_init_, self.rank_
            )
        post = self.idata_["posterior"]
        return ll.reshape(post.sizes["chain"], post.sizes["draw"], mu.size)

    def logpdf(self, pred, y, *_legacy) -> np.ndarray:
        r"""Log posterior-predictive density :math:`\log\frac1S\sum_s \hat p_s(y_i)`, exact (no grid).

        ``y`` has shape (n,) or (n, k) (k values per observation, e.g. a density grid).
        """
        pred, mu, sigma, y, _ = self._check_new("logpdf", pred, (y, *_legacy), y_ndim=(1, 2))
        w = self._latent(mu, sigma)
        u, log_jac = self._observed_terms(pred, y)
        uu, jj = (u, log_jac) if y.ndim == 2 else (u[:, None], log_jac[:, None])
        ll = beta_link_logpdf_z(uu[None], jj[None], w[..., 0, None], w[..., 1, None], w[..., 2, None])
        out = special.logsumexp(ll, axis=0) - np.log(w.shape[0])
        return out if y.ndim == 2 else out[:, 0]

    def held_out_tree(self, pred, y, *_legacy) -> xr.DataTree:
        """A DataTree (``posterior``, ``log_likelihood``, ``observed_data``) for held-out data.

        Its ``log_likelihood`` is :meth:`log_likelihood` on ``(pred, y)``, so
        ``arviz.loo`` / ``arviz.compare`` score the calibrator on those points.
        """
        pred, rest = self._prediction("held_out_tree", pred, (y, *_legacy))
        ll = self.log_likelihood(pred, rest[0])
        c, d, n = ll.shape
        coords = {"chain": np.arange(c), "draw": np.arange(d), "obs": np.arange(n)}
        y_values = self._targets(rest[0], n, "y")
        return xr.DataTree.from_dict(
            {
                "posterior": self.idata_["posterior"].to_dataset(),
                "log_likelihood": xr.Dataset({"y": (("chain", "draw", "obs"), ll)}, coords=coords),
                "observed_data": xr.Dataset({"y": ("obs", y_values)}, coords={"obs": coords["obs"]}),
            }
        )

    def held_out_elpd(self, pred, y, *_legacy):
        """Exact held-out ELPD on ``(pred, y)`` as ``ELPDData`` (see :func:`held_out_elpd`).

        ``arviz.compare({"gp-beta": cal.held_out_elpd(pred, y), "base":
        held_out_elpd(pred.calib.logpdf(y).values)})`` ranks GP-Beta against
        the uncalibrated base on the same held-out points.
        """
        pred, rest = self._prediction("held_out_elpd", pred, (y, *_legacy))
        return held_out_elpd(self.log_likelihood(pred, rest[0]))

    def sample_posterior_predictive(self, pred, y=None, *, random_state=None, var_name: str = "y") -> xr.DataTree:
        r"""Posterior-predictive draws of the calibrated law, as an ArviZ DataTree.

        For every posterior draw :math:`s` and observation :math:`i` one value is
        drawn by inverse transform: :math:`p \sim U(0, 1)`,
        :math:`u = (c_{\beta,s}\circ\Phi)^{-1}(p)` (:func:`beta_link_ppf_z`) and
        :math:`y = F_i^{-1}(\Phi(u))` through the base's quantile function — a
        draw from :math:`c_{\beta,s}(F_i(\cdot))`, so the draws carry the posterior
        uncertainty of the calibration map.

        Parameters
        ----------
        pred : xarray.Dataset
            The base's predictive distribution at the points to simulate.
        y : array_like or xarray.DataArray, optional
            Observed values: adds ``observed_data`` and the pointwise
            ``log_likelihood`` (:meth:`log_likelihood`), so that ``az.plot_ppc_dist``,
            ``az.plot_ppc_pit`` and held-out ``az.compare`` work as on a PyMC model.
            A DataArray's dim name and coordinate (e.g. PyMC's ``obs_id``) are kept.
        random_state : int, numpy Generator or None
        var_name : str, default "y"

        Returns
        -------
        xarray.DataTree
            ``posterior`` (this calibrator's), ``posterior_predictive`` with
            ``var_name(chain, draw, <obs dim>)``, and with ``y``: ``observed_data``,
            ``log_likelihood``.
        """
        check_is_fitted(self, "idata_", method="fit")
        pred, _ = self._prediction("sample_posterior_predictive", pred, ())
        mu, sigma = self._covariates(pred)
        n = mu.size
        obs_dim = str(pred.attrs.get("obs_dim", "obs"))
        obs_values = pred["obs"].values
        if isinstance(y, xr.DataArray) and y.ndim == 1:
            obs_dim = str(y.dims[0])
            if obs_dim in y.coords and y.sizes[obs_dim] == n:
                obs_values = y[obs_dim].values
        rng = np.random.default_rng(random_state)
        post = self.idata_["posterior"]
        C, D = post.sizes["chain"], post.sizes["draw"]
        draws = np.empty((C * D, n))
        X = self._standardise(mu, sigma)
        rows = max(1, 2_000_000 // (C * D))
        with _blas_single_thread():
            flat = self._post_flat()
            for start in range(0, n, rows):
                sl = slice(start, start + rows)
                w = _latent_numpy(flat, X[sl], self.inducing_init_, self.rank_)  # (S, rows, 3)
                u = beta_link_ppf_z(rng.uniform(size=w.shape[:2]), w[..., 0], w[..., 1], w[..., 2])
                draws[:, sl] = pred.isel(obs=sl).calib.ppf_zscore(u.T).T
        coords = {"chain": post["chain"].values, "draw": post["draw"].values, obs_dim: obs_values}
        dims = ("chain", "draw", obs_dim)
        groups = {
            "posterior": post.to_dataset(),
            "posterior_predictive": xr.Dataset({var_name: (dims, draws.reshape(C, D, n))}, coords=coords),
        }
        if y is not None:
            yv = self._targets(y, n, "y")
            ll = self.log_likelihood(pred, yv)
            groups["log_likelihood"] = xr.Dataset({var_name: (dims, ll)}, coords=coords)
            groups["observed_data"] = xr.Dataset({var_name: ((obs_dim,), yv)}, coords={obs_dim: obs_values})
        tree = xr.DataTree.from_dict(groups)
        tree.attrs.update({"method": "gp-beta", "inference": self.inference})
        return tree

    def beta_parameters(self, pred, *_legacy) -> xr.Dataset:
        r"""Posterior draws of the Beta-map parameters :math:`a, b, c` at given base predictions.

        Returns
        -------
        xarray.Dataset
            ``a``, ``b``, ``c`` with dims (chain, draw, obs) — the latent panels of
            the paper's Fig. 2 — and the covariates ``base_mu``, ``base_sigma``.
        """
        pred, mu, sigma, _, _ = self._check_new("beta_parameters", pred, _legacy)
        w = self._latent(mu, sigma)
        post = self.idata_["posterior"]
        shape = (post.sizes["chain"], post.sizes["draw"], mu.size)
        dims = ("chain", "draw", "obs")
        return xr.Dataset(
            {
                "a": (dims, np.exp(w[..., 0]).reshape(shape)),
                "b": (dims, np.exp(w[..., 1]).reshape(shape)),
                "c": (dims, w[..., 2].reshape(shape)),
                "base_mu": ("obs", mu),
                "base_sigma": ("obs", sigma),
            },
            coords={"chain": post["chain"].values, "draw": post["draw"].values, "obs": np.arange(mu.size)},
        )

    def calibration_map(self, pred, *args, confidence_level: float = 0.9) -> xr.Dataset:
        r"""The calibration map :math:`p \mapsto c_\beta(p)` at given base predictions, with a credible band.

        Parameters
        ----------
        pred : xarray.Dataset
            Base predictions at which to evaluate the map (only their mean and
            std, the GP's inputs, matter: ``calibprob.normal(mu, sigma)`` for
            arbitrary points).
        p : array_like, shape (P,), optional
            Base CDF values in (0, 1) (second positional argument); default 199
            points from 0.005 to 0.995.
        confidence_level : float, default 0.9
            Probability of the equal-tailed credible band.

        Returns
        -------
        xarray.Dataset
            ``map(chain, draw, obs, p)`` (every posterior draw), ``mean(obs, p)``
            (the posterior-average map, which is what the calibrated CDF uses),
            ``lower``/``upper(obs, p)`` (the band), ``base_mu``/``base_sigma``.
        """
        c_level = float(check_confidence_levels(confidence_level, "confidence_level")[0])
        pred, mu, sigma, _, rest = self._check_new("calibration_map", pred, args)
        p = rest[0] if rest else None
        if p is None:
            p = np.linspace(0.005, 0.995, 199)
        p = check_array(p, "p", ndim=1)
        if np.any((p <= 0) | (p >= 1)):
            raise ValueError("p must lie strictly inside (0, 1) (base CDF values); got values outside.")
        w = self._latent(mu, sigma)
        maps = beta_calibration_map(p[None, None, :], w[..., 0, None], w[..., 1, None], w[..., 2, None])
        post = self.idata_["posterior"]
        C, D = post.sizes["chain"], post.sizes["draw"]
        lo, hi = np.quantile(maps, [(1 - c_level) / 2, (1 + c_level) / 2], axis=0)
        coords = {"chain": np.arange(C), "draw": np.arange(D), "obs": np.arange(mu.size), "p": p}
        ds = xr.Dataset(
            {
                "map": (("chain", "draw", "obs", "p"), maps.reshape(C, D, mu.size, p.size)),
                "mean": (("obs", "p"), maps.mean(axis=0)),
                "lower": (("obs", "p"), lo),
                "upper": (("obs", "p"), hi),
                "base_mu": ("obs", mu),
                "base_sigma": ("obs", sigma),
            },
            coords=coords,
        )
        ds.attrs.update(
            {"confidence_level": c_level, "description": "Beta calibration map c(p) = expit(a log p - b log(1-p) + c)"}
        )
        return ds


# ===========================================================================
# Plot (the paper's Fig. 2)
# ===========================================================================


def plot_calibration_map(
    calibrator: GPBetaCalibrator, pred, *_legacy, at=None, isotonic=None, confidence_level: float = 0.68, axes=None
):
    r"""The paper's Fig. 2: latent a, b, c along the base mean, and calibration maps at chosen means.

    Parameters
    ----------
    calibrator : GPBetaCalibrator
        A fitted calibrator.
    pred : xarray.Dataset
        Base predictions along whose means the three left panels are drawn
        (sorted by mean); e.g. the calibration data's, or
        ``calibprob.normal(grid, sigma)`` for a grid of means at a constant std.
    at : sequence of int, optional
        Indices into ``mu`` where the right panel draws the map (default: the
        10th, 50th and 90th percentile of ``mu``).
    isotonic : callable, optional
        ``p -> map(p)`` of a global recalibrator (e.g.
        ``IsotonicRecalibrator().calibration_map``), drawn for comparison.
    confidence_level : float, default 0.68
        Width of the shaded credible bands (0.68 ≈ the paper's ±1 sd).
    axes : array of 4 matplotlib Axes, optional

    Returns
    -------
    numpy.ndarray of matplotlib Axes, shape (4,)
    """
    import matplotlib.pyplot as plt

    from calibprob.predictive import normal

    pred, _ = calibrator._prediction("plot_calibration_map", pred, _legacy)
    mu, sigma = calibrator._covariates(pred)
    order = np.argsort(mu)
    mu, sigma = mu[order], sigma[order]
    pred = normal(mu, sigma)  # only the GP's inputs matter for the maps
    if axes is None:
        _, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    axes = np.asarray(axes).ravel()
    params = calibrator.beta_parameters(pred)
    lo_q, hi_q = (1 - confidence_level) / 2, (1 + confidence_level) / 2
    Z = calibrator.inducing_init_
    for ax, name in zip(axes[:3], ("a", "b", "c")):
        da = params[name].stack(sample=("chain", "draw"))
        ax.plot(mu, da.median("sample"), color="C0", lw=1.5)
        ax.fill_between(mu, da.quantile(lo_q, "sample"), da.quantile(hi_q, "sample"), color="C0", alpha=0.25)
        ref = 0.0 if name == "c" else 1.0
        ax.axhline(ref, color="0.5", ls="--", lw=0.8)
        ax.plot(
            Z[:, 0] * calibrator.scale_ + calibrator.loc_,
            np.full(Z.shape[0], ref),
            "o",
            color="C3",
            ms=4,
            label="inducing (init)",
        )
        ax.set_xlabel(r"base mean $\mu$")
        ax.set_title(f"latent {name}")
    idx = at if at is not None else [int(np.argmin(np.abs(mu - np.quantile(mu, q)))) for q in (0.1, 0.5, 0.9)]
    cmap = calibrator.calibration_map(pred.isel(obs=idx), confidence_level=confidence_level)
    ax = axes[3]
    p = cmap["p"].values
    for j in range(len(idx)):
        ax.plot(p, cmap["mean"][j], color=f"C{j}", label=rf"GP-Beta at $\mu$={mu[idx][j]:.3g}")
        ax.fill_between(p, cmap["lower"][j], cmap["upper"][j], color=f"C{j}", alpha=0.2)
    if isotonic is not None:
        ax.plot(p, isotonic(p), color="k", ls=":", label="isotonic (global)")
    ax.plot([0, 1], [0, 1], color="0.6", ls="--", lw=0.8)
    ax.set_xlabel("base CDF $q$")
    ax.set_ylabel("calibrated CDF")
    ax.set_title("calibration maps")
    ax.legend(fontsize=7)
    return axes


# ===========================================================================
# Comparison-spec runner (kind "gp-beta")
# ===========================================================================

#: Hyperparameters the ``gp-beta`` kind of a comparison spec passes to :class:`GPBetaCalibrator`
#: (the kind also accepts ``calibration_data``, see :func:`calibprob.compare.methods.calibration_prediction`).
RUN_OPTIONS = (
    "n_inducing",
    "rank",
    "inference",
    "draws",
    "n_iter",
    "learning_rate",
    "obj_n_mc",
    "batch_size",
    "learn_inducing",
    "tune",
    "chains",
    "target_accept",
    "n_grid",
    "compile_mode",
)
