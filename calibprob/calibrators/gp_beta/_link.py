r"""Beta-link numerics of GP-Beta (NumPy): the kernel, the calibrated density / CDF / quantile, the latent map.

Everything here is plain NumPy / SciPy on arrays: the Gaussian-embedding kernel
(Song et al. 2019, eq. 9), the Beta-calibrated density and CDF of a base law
(eq. 6–7) evaluated in log space, the closed-form tail bounds used by the
prediction grid, and the latent link parameters :math:`(\log a, \log b, c)` of
posterior draws at new inputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

OUTPUTS = ("a", "b", "c")
_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)
#: Jitter added to K_ZZ (standardised units; the kernel's diagonal is at most 1).
_JITTER = 1e-6
#: Prior (mean, sd) of every free parameter; see the package docstring.
PRIORS = {
    "log_theta": (0.0, 0.75),
    "W": (0.0, 1.0),
    "log_kappa": (0.0, 0.5),
    "log_gamma": (float(np.log(2.0)), 0.75),
    "delta": (0.0, 1.0),
    "V": (0.0, 1.0),
    "Z": (None, 0.25),  # mean = the k-means initialisation
}


def gaussian_embedding_kernel(X1: Any, X2: Any, theta: Any) -> np.ndarray:
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


def _beta_t(log_q: Any, log_1mq: Any, log_a: Any, log_b: Any, c: Any) -> Any:
    return np.exp(log_a) * log_q - np.exp(log_b) * log_1mq + c


def beta_link_logpdf_z(u: Any, log_jac: Any, log_a: Any, log_b: Any, c: Any) -> np.ndarray:
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


def beta_link_logpdf(y: Any, mu: Any, sigma: Any, log_a: Any, log_b: Any, c: Any) -> np.ndarray:
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


def beta_link_cdf_z(u: Any, log_a: Any, log_b: Any, c: Any) -> np.ndarray:
    r"""CDF of a Beta-calibrated base law from the base's probit PIT: :math:`c_\beta(\Phi(u))` (broadcast)."""
    u = np.asarray(u, float)
    return special.expit(_beta_t(special.log_ndtr(u), special.log_ndtr(-u), log_a, log_b, c))


def beta_link_cdf(y: Any, mu: Any, sigma: Any, log_a: Any, log_b: Any, c: Any) -> np.ndarray:
    r"""CDF of the Beta-calibrated Gaussian, :math:`c_\beta(\Phi((y-\mu)/\sigma))` (broadcast)."""
    return beta_link_cdf_z((np.asarray(y, float) - mu) / sigma, log_a, log_b, c)


def beta_link_ppf_z(p: Any, log_a: Any, log_b: Any, c: Any, *, n_iter: int = 80) -> np.ndarray:
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


def beta_calibration_map(p: Any, log_a: Any, log_b: Any, c: Any) -> np.ndarray:
    r"""The Beta calibration map :math:`c_\beta(p) = \operatorname{expit}(a\log p - b\log(1-p) + c)`.

    The identity for :math:`a = b = 1, c = 0` (Kull et al. 2017; Song et al. 2019, eq. 2, 7).
    """
    p = np.asarray(p, float)
    return special.expit(_beta_t(np.log(p), np.log1p(-p), log_a, log_b, c))


def _tail_bounds(log_a: Any, log_b: Any, c: Any, p_tail: float) -> Any:
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


def _pointwise_loglik(post: Any, X: Any, u: Any, log_jac: Any, Z0: Any, rank: Any, chunk: int = 1024) -> np.ndarray:
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
