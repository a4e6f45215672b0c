r"""Stochastic variational inference for GP-Beta in NumPy: the sparse variational GP and PyMC's ADVI.

:func:`svi_fit` is the sparse variational GP of Hensman et al. (2015) as Song
et al. (2019) and netcal fit it: a full-covariance Gaussian over part of the
parameters, point estimates for the rest. :func:`advi_fit` is PyMC's ADVI
(mean-field or full-rank Gaussian over every parameter, PyMC's
parametrisation, random stream and Adam) on any NumPy ``x -> (log p, gradient)``,
so that a full-batch ADVI fit needs no compiled PyTensor step function; it
reproduces ``pm.ADVI`` / ``pm.FullRankADVI`` step for step (tested).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from calibprob._core.optim import Adam
from calibprob._core.validation import check_array, check_int

__all__ = ["SVIResult", "svi_fit", "advi_fit", "ADVIResult"]


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
    logp_dlogp: Any,
    x0: Any,
    variational: Any,
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
    x0, variational, n_iter, n_mc = _check_svi_args(
        logp_dlogp, x0, variational, n_iter, n_mc, learning_rate, init_scale, rng
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


def _check_svi_args(
    logp_dlogp: Any, x0: Any, variational: Any, n_iter: Any, n_mc: Any, learning_rate: Any, init_scale: Any, rng: Any
) -> Any:
    """Validate :func:`svi_fit`'s arguments; return ``(x0, variational, n_iter, n_mc)``."""
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
    return x0, variational, n_iter, n_mc


@dataclass
class ADVIResult:
    """PyMC's variational parameters after ADVI: ``mu`` and ``rho`` (mean-field) or ``L_tril`` (full rank)."""

    mu: np.ndarray  # (D,)
    scale: np.ndarray  # (D,) rho (mean-field) or (D (D + 1) / 2,) L_tril (full rank), PyMC's raw parameters
    full_rank: bool
    loss: np.ndarray  # PyMC's loss per step: E_q[log q - log p] at the pre-step parameters

    def chol(self) -> np.ndarray:
        """Lower Cholesky factor of q's covariance (diagonal for mean-field); PyMC's softplus diagonal."""
        d = self.mu.size
        if not self.full_rank:
            return np.diag(np.logaddexp(0.0, self.scale))
        L = np.zeros((d, d))
        L[np.tril_indices(d)] = self.scale
        L[np.diag_indices(d)] = np.logaddexp(0.0, np.diag(L))
        return L


class _PyMCAdam:
    r"""PyMC's ``pm.adam`` update (its own :math:`\epsilon` placement): :math:`x \leftarrow x - a_t m_t/(\sqrt{v_t}+\epsilon)`.

    :math:`a_t = \eta\sqrt{1-\beta_2^t}/(1-\beta_1^t)`, one step counter shared by every parameter.
    """

    def __init__(
        self, shapes: Any, learning_rate: float, beta1: Any = 0.9, beta2: Any = 0.999, epsilon: Any = 1e-8
    ) -> None:
        self.lr, self.beta1, self.beta2, self.eps = float(learning_rate), beta1, beta2, epsilon
        self.m = [np.zeros(s) for s in shapes]
        self.v = [np.zeros(s) for s in shapes]
        self.t = 0.0

    def step(self, params: list, grads: list) -> list:
        self.t += 1.0
        a_t = self.lr * np.sqrt(1.0 - self.beta2**self.t) / (1.0 - self.beta1**self.t)
        out = []
        for i, (p, g) in enumerate(zip(params, grads)):
            self.m[i] = self.beta1 * self.m[i] + (1.0 - self.beta1) * g
            self.v[i] = self.beta2 * self.v[i] + (1.0 - self.beta2) * g**2
            out.append(p - a_t * self.m[i] / (np.sqrt(self.v[i]) + self.eps))
        return out


def _meanfield_loss_grads(logp_dlogp: Any, mu: Any, rho: Any, eps: Any) -> Any:
    """PyMC mean-field KL loss and its gradients in ``mu`` and ``rho`` at the draws ``eps`` (n_mc, D)."""
    std = np.logaddexp(0.0, rho)  # rho2sigma = softplus
    g_sum, lp_sum = np.zeros_like(mu), 0.0
    g_eps = np.zeros_like(mu)
    for e in eps:
        lp, g = logp_dlogp(std * e + mu)
        lp_sum += float(lp)
        g = np.asarray(g, float)
        g_sum += g
        g_eps += g * e
    n = eps.shape[0]
    logq = np.sum(-0.5 * eps**2 - 0.5 * np.log(2.0 * np.pi) - np.log(std), axis=1).mean()
    loss = logq - lp_sum / n
    g_rho = (-g_eps / n - 1.0 / std) * special.expit(rho)
    return loss, [-g_sum / n, g_rho]


def _fullrank_loss_grads(logp_dlogp: Any, mu: Any, L_tril: Any, eps: Any) -> Any:
    """PyMC full-rank KL loss and its gradients in ``mu`` and ``L_tril`` (softplus diagonal)."""
    d = mu.size
    tril, diag = np.tril_indices(d), np.diag_indices(d)
    L = np.zeros((d, d))
    L[tril] = L_tril
    raw_diag = np.diag(L).copy()
    L[diag] = np.logaddexp(0.0, raw_diag)
    g_sum, g_outer, lp_sum = np.zeros(d), np.zeros((d, d)), 0.0
    for e in eps:
        lp, g = logp_dlogp(e @ L.T + mu)
        lp_sum += float(lp)
        g = np.asarray(g, float)
        g_sum += g
        g_outer += np.outer(g, e)
    n = eps.shape[0]
    logq = np.sum(-0.5 * eps**2 - 0.5 * np.log(2.0 * np.pi) - np.log(np.diag(L)), axis=1).mean()
    g_L = -g_outer / n
    g_L[diag] = (g_L[diag] - 1.0 / np.diag(L)) * special.expit(raw_diag)
    return logq - lp_sum / n, [-g_sum / n, g_L[tril]]


def advi_fit(
    logp_dlogp: Any,
    x0: Any,
    *,
    full_rank: bool,
    n_iter: int,
    learning_rate: float,
    n_mc: int,
    seed: int,
    init_sd: Any = None,
) -> ADVIResult:
    r"""PyMC's ADVI (``pm.ADVI`` / ``pm.FullRankADVI`` with ``pm.adam``) on a NumPy log density.

    Minimises PyMC's objective :math:`E_q[\log q(z) - \log p(z, y)]` with reparametrised
    draws :math:`z = \mu + \operatorname{softplus}(\rho)\odot\varepsilon` (mean-field) or
    :math:`z = \mu + L\varepsilon` with a softplus diagonal (full rank), the draws
    :math:`\varepsilon` taken as PyMC takes them (one PCG64 stream spawned from ``seed``
    as :func:`pymc.pytensorf.reseed_rngs` does, ``normal(size=(n_mc, D))`` per step), and
    PyMC's Adam step. On the same log density this is ``step_function(score=True)``
    of PyMC's approximation called ``n_iter`` times, without building a graph.

    Parameters
    ----------
    logp_dlogp : callable
        ``x -> (log p, gradient)`` of the log joint density at a flat vector.
    x0 : ndarray, shape (D,)
        Start of the variational mean.
    full_rank : bool
    n_iter, learning_rate, n_mc : int, float, int
        Adam steps, step size, Monte Carlo draws per gradient.
    seed : int
        Seed of the draws.
    init_sd : float, optional
        Full rank only: initial standard deviation of q (PyMC's own start is 1.31).
        Mean-field starts as PyMC does, at :math:`\operatorname{softplus}(0)`.

    Returns
    -------
    ADVIResult
    """
    x0 = check_array(x0, "x0", ndim=1)
    n_iter = check_int(n_iter, "n_iter", minimum=1)
    n_mc = check_int(n_mc, "n_mc", minimum=1)
    d = x0.size
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed).spawn(1)[0]))
    if full_rank:
        diag0 = 1.0 if init_sd is None else np.log(np.expm1(init_sd))
        scale = (diag0 * np.eye(d))[np.tril_indices(d)]
        loss_grads: Callable[..., Any] = _fullrank_loss_grads
    else:
        scale = np.zeros(d)
        loss_grads = _meanfield_loss_grads
    params = [x0.copy(), scale]
    adam = _PyMCAdam([p.shape for p in params], learning_rate)
    loss = np.empty(n_iter)
    for i in range(n_iter):
        eps = rng.normal(0.0, 1.0, size=(n_mc, d))
        loss[i], grads = loss_grads(logp_dlogp, params[0], params[1], eps)
        params = adam.step(params, grads)
    return ADVIResult(mu=params[0], scale=params[1], full_rank=full_rank, loss=loss)
