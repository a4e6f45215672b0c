r"""The GP-Beta log posterior and its gradient in NumPy / SciPy (no PyTensor graph).

The PyMC model of :mod:`._graph` is the declared model (NUTS, minibatch ADVI /
SVI, ``pm.compute_log_likelihood``); this module evaluates the *same* log
density — priors included, constants included — and its exact gradient by
hand-written reverse mode, so that full-batch MAP, ADVI and SVI fits start
without building or compiling a graph (the graph cost ~7 s per
process of a warm ``calibprob compare``). ``tests/calibrators/gp_beta/test_gp_beta.py`` keeps both
equal to 1e-9 in value and gradient.

With :math:`\theta = e^{\log\theta}`, :math:`L_K = \operatorname{chol}(K_{ZZ} + \epsilon I)`,
:math:`L_R = \operatorname{chol}(R)`, :math:`U = L_K^{-\top} V L_R^\top`,
:math:`F = K_{XZ} U` and :math:`w = F\,\operatorname{diag}(e^{-\log\gamma}) + \delta`,
the data term is :math:`\sum_i \log\hat p(u_i \mid w_i)` (:func:`._link.beta_link_logpdf_z`).
Its gradient flows back through the Beta link (closed form), the two matrix
products, the triangular solve, the Cholesky factors (Murray 2016) and the
kernel (closed form). The cost per evaluation is :math:`O(nm + m^3)`.

References
----------
Murray, I. (2016). Differentiation of the Cholesky decomposition. arXiv:1602.07527.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from scipy import special
from scipy.linalg.lapack import dpotrf as _dpotrf
from scipy.linalg.lapack import dtrtrs as _dtrtrs

from calibprob.calibrators.gp_beta._link import _JITTER, _LOG_SQRT_2PI, PRIORS

__all__ = ["Layout", "LogPosterior"]


@dataclass(frozen=True)
class Layout:
    """Names, shapes and flat order of the free parameters of one model configuration.

    The order is the PyMC model's ``free_RVs`` order (value variables are the
    random variables themselves: every free parameter is an unconstrained
    Normal), so a flat vector means the same thing to the NumPy objective, to
    PyMC's ``logp_dlogp_function`` and to its ADVI approximation.
    """

    n_inducing: int
    rank: int
    learn_inducing: bool

    @cached_property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        m, r = self.n_inducing, self.rank
        shapes: dict[str, tuple[int, ...]] = {"log_theta": ()}
        if r > 0:
            shapes["W"] = (3, r)
            shapes["log_kappa"] = (3,)
        shapes.update({"log_gamma": (3,), "delta": (3,), "V": (m, 3)})
        if self.learn_inducing:
            shapes["Z"] = (m, 2)
        return shapes

    @property
    def names(self) -> list[str]:
        return list(self.shapes)

    @cached_property
    def size(self) -> int:
        return int(sum(np.prod(s, dtype=int) for s in self.shapes.values()))

    def ravel(self, point: dict) -> np.ndarray:
        """Concatenate named arrays into one flat vector (layout order)."""
        return np.concatenate([np.ravel(point[k]) for k in self.names])

    @cached_property
    def _slices(self) -> list[tuple[str, slice, tuple[int, ...]]]:
        out, i = [], 0
        for k, shape in self.shapes.items():
            size = int(np.prod(shape, dtype=int))
            out.append((k, slice(i, i + size), shape))
            i += size
        return out

    def unravel(self, flat: np.ndarray) -> dict:
        """Split ``(..., D)`` flat vectors into named arrays ``(..., *shape)`` (views of ``flat``)."""
        lead = flat.shape[:-1]
        return {k: flat[..., sl].reshape(lead + shape) for k, sl, shape in self._slices}

    def start_point(self, Z0: np.ndarray, rng: np.random.Generator) -> dict:
        """The identity-map start: every parameter at its prior centre (W slightly jittered)."""
        point = {}
        for k, shape in self.shapes.items():
            mean = PRIORS[k][0]
            point[k] = np.full(shape, 0.0 if mean is None else mean)
        if "W" in point:
            # W = 0 is a saddle of the sign-symmetric W W^T: start just off it
            point["W"] = 0.1 * rng.standard_normal(self.shapes["W"])
        if "Z" in point:
            point["Z"] = np.array(Z0, float)
        return point


def _phi(A: np.ndarray) -> np.ndarray:
    """Lower triangle with the diagonal halved (Murray 2016, eq. 10)."""
    out = np.tril(A)
    out.flat[:: out.shape[0] + 1] *= 0.5
    return out


def _solve_lower(L: np.ndarray, B: np.ndarray, trans: int = 0) -> np.ndarray:
    """``L^{-1} B`` (``trans=0``) or ``L^{-T} B`` (``trans=1``) for lower-triangular ``L`` (LAPACK, no checks).

    SciPy's ``solve_triangular`` validates and copies on every call; at GP-Beta's
    sizes (m = 16) that wrapper costs more than the solve.
    """
    x, info = _dtrtrs(L, B, lower=1, trans=trans)
    if info != 0:  # a zero on the diagonal: the factor is singular
        raise np.linalg.LinAlgError(f"singular triangular factor (LAPACK dtrtrs info={info})")
    return x


def _cholesky(A: np.ndarray) -> np.ndarray:
    """Lower Cholesky factor (LAPACK ``dpotrf`` without NumPy's per-call overhead)."""
    L, info = _dpotrf(A, lower=1, clean=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"matrix is not positive definite (LAPACK dpotrf info={info})")
    return L


def cholesky_backward(L: np.ndarray, L_bar: np.ndarray) -> np.ndarray:
    r"""Symmetric gradient :math:`\bar\Sigma` of :math:`\Sigma = LL^\top` from the gradient of its factor.

    :math:`P = L^{-\top}\Phi(L^\top\bar L)L^{-1}` and :math:`\bar\Sigma = (P + P^\top)/2`
    (Murray 2016), ``L_bar`` lower triangular.
    """
    P = _solve_lower(L, _phi(L.T @ L_bar), trans=1)
    P = _solve_lower(L, P.T, trans=1).T
    return 0.5 * (P + P.T)


def _kernel(X1: np.ndarray, X2: np.ndarray, theta: float) -> Any:
    """Eq. 9 with its intermediates: ``(K, d, r)`` (:func:`._link.gaussian_embedding_kernel`'s formula)."""
    d = X1[:, None, 1] ** 2 + X2[None, :, 1] ** 2 + theta**2
    r = X1[:, None, 0] - X2[None, :, 0]
    return theta / np.sqrt(d) * np.exp(-(r * r) / (2.0 * d)), d, r


def kernel_backward(X1: Any, X2: Any, theta: float, K: np.ndarray, G: np.ndarray, d: Any = None, r: Any = None) -> Any:
    r"""Gradients of :math:`\sum_{ij} G_{ij} k(x_i, x'_j)` (eq. 9) in :math:`\log\theta`, ``X1`` and ``X2``.

    With :math:`d = s_1^2 + s_2^2 + \theta^2` and :math:`r = \mu_1 - \mu_2`,
    :math:`\log k = \log\theta - \tfrac12\log d - r^2/(2d)`, so
    :math:`\partial_{\log\theta}\log k = 1 - \theta^2/d + r^2\theta^2/d^2`,
    :math:`\partial_{\mu_1}\log k = -r/d` and :math:`\partial_{s_1}\log k = s_1(r^2/d^2 - 1/d)`.
    ``K`` is the kernel matrix itself (without jitter); ``d`` and ``r`` are reused when given.
    """
    if d is None or r is None:
        _, d, r = _kernel(X1, X2, theta)
    GK = G * K
    inv_d = 1.0 / d
    r_d = GK * r * inv_d
    rr = (r * inv_d) ** 2
    s_term = GK * (rr - inv_d)
    g_log_theta = float(np.sum(GK * (1.0 - theta**2 * (inv_d - rr))))
    g1 = np.stack([-r_d.sum(axis=1), X1[:, 1] * s_term.sum(axis=1)], axis=1)
    g2 = np.stack([r_d.sum(axis=0), X2[:, 1] * s_term.sum(axis=0)], axis=1)
    return g_log_theta, g1, g2


def _beta_link_terms(
    w: np.ndarray, lq: np.ndarray, l1q: np.ndarray, weights: np.ndarray | None = None
) -> tuple[float, np.ndarray]:
    r"""Data log density (parameter-dependent part) and its gradient in :math:`w = (\log a, \log b, c)`.

    With :math:`t = a\log q - b\log(1-q) + c`, :math:`A = \log a + \log(1-q)`, :math:`B = \log b + \log q`:
    the summand is :math:`\log\sigma(t) + \log\sigma(-t) + \operatorname{logaddexp}(A, B)`, whose
    derivatives are :math:`(1-2\sigma(t))\,\partial t + \sigma(A-B)\,\partial A + \sigma(B-A)\,\partial B`.
    With ``weights`` :math:`v_i`, each summand and its gradient row are multiplied by :math:`v_i`
    (the importance-weighted log-likelihood).
    """
    la, lb, c = w[:, 0], w[:, 1], w[:, 2]
    a, b = np.exp(la), np.exp(lb)
    t = a * lq - b * l1q + c
    A, B = la + l1q, lb + lq
    terms = -np.logaddexp(0.0, -t) - np.logaddexp(0.0, t) + np.logaddexp(A, B)
    value = float(np.sum(terms if weights is None else weights * terms))
    dt = 1.0 - 2.0 * special.expit(t)
    sA = special.expit(A - B)
    grad = np.stack([dt * a * lq + sA, -dt * b * l1q + (1.0 - sA), dt], axis=1)
    return value, grad if weights is None else grad * weights[:, None]


def _log_sd(sd: float) -> float:
    """``log(sd)`` as PyMC's graph computes it for a Python-float prior scale.

    PyTensor stores a Python float exactly representable in float32 (0.25, 0.5,
    0.75, 1.0, ...) as a float32 constant, so ``pt.log(sigma)`` in
    ``pm.Normal.logp`` is a float32 logarithm (off by up to ~2e-8 per prior term).
    Matching it keeps this log density equal to ``model.logp()`` to 1e-9; it is a
    constant, so no gradient, optimum or draw depends on it.
    """
    return float(np.log(np.float32(sd))) if float(np.float32(sd)) == sd else float(np.log(sd))


def _prior_vectors(layout: Layout, Z0: np.ndarray) -> Any:
    """Flat prior means and standard deviations, and the sum of the Normal log-density constants."""
    means, sds, const = [], [], 0.0
    for k, shape in layout.shapes.items():
        mean, sd = PRIORS[k]
        size = int(np.prod(shape, dtype=int))
        means.append(np.ravel(Z0) if k == "Z" else np.full(size, mean))
        sds.append(np.full(size, sd))
        const -= size * (_log_sd(sd) + _LOG_SQRT_2PI)
    return np.concatenate(means), np.concatenate(sds), const


class LogPosterior:
    r"""``x -> (log p(x, y), gradient)`` of the GP-Beta model on full data, in NumPy.

    The same density as ``model.logp()`` of ``_graph.build_model`` (all
    terms, constants included) at a flat parameter vector in ``Layout`` order.

    Parameters
    ----------
    layout : Layout
    X : ndarray, shape (n, 2)
        Standardised covariates :math:`(\tilde\mu, \tilde\sigma)`.
    u, log_jac : ndarray, shape (n,)
        The base's probit PIT at the observations and its log Jacobian.
    Z0 : ndarray, shape (m, 2)
        Inducing inputs (fixed, or the prior mean of learned ones).
    weights : ndarray, shape (n,), optional
        Importance weights :math:`v_i` of the data terms: the log density becomes
        :math:`\log p(x) + \sum_i v_i \log \hat p(u_i \mid w_i)` (no PyMC counterpart: the weighted
        fit runs on this objective only). None: every :math:`v_i = 1`, the model's density.
    """

    def __init__(
        self, layout: Layout, X: np.ndarray, u: np.ndarray, log_jac: np.ndarray, Z0: np.ndarray, weights: Any = None
    ) -> None:
        self.layout = layout
        self.X = np.asarray(X, float)
        self.Z0 = np.asarray(Z0, float)
        self.weights = None if weights is None else np.asarray(weights, float)
        u = np.asarray(u, float)
        self.lq, self.l1q = special.log_ndtr(u), special.log_ndtr(-u)
        self.prior_mean, self.prior_sd, prior_const = _prior_vectors(layout, self.Z0)
        # the parameter-free part of every log density: log phi(u) + log J - log q - log(1-q), and the priors'
        free = -0.5 * u * u - _LOG_SQRT_2PI + np.asarray(log_jac, float) - self.lq - self.l1q
        self.const = prior_const + float(np.sum(free if self.weights is None else self.weights * free))
        self.n_calls = 0

    def __call__(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        self.n_calls += 1
        lay = self.layout
        x = np.asarray(x, float)
        p = lay.unravel(x)
        z = (x - self.prior_mean) / self.prior_sd
        grad_flat = -z / self.prior_sd  # the Normal priors' gradient; the rest is added through views
        grad = lay.unravel(grad_flat)
        theta = float(np.exp(p["log_theta"]))
        Z = p["Z"] if lay.learn_inducing else self.Z0
        Kzz, d_zz, r_zz = _kernel(Z, Z, theta)
        Lk = _cholesky(Kzz + _JITTER * np.eye(Z.shape[0]))
        coreg = None if lay.rank == 0 else _Coregion(p)
        VL = p["V"] if coreg is None else p["V"] @ coreg.Lr.T
        U = _solve_lower(Lk, VL, trans=1)
        Kxz, d_xz, r_xz = _kernel(self.X, Z, theta)
        F = Kxz @ U
        inv_gamma = np.exp(-p["log_gamma"])
        data, g_w = _beta_link_terms(F * inv_gamma + p["delta"], self.lq, self.l1q, self.weights)
        # reverse mode: w -> (delta, log_gamma, F) -> (K_XZ, U) -> (L_K, V L_R^T) -> kernel, V, W, kappa
        grad["delta"] += g_w.sum(axis=0)
        grad["log_gamma"] -= np.sum(g_w * F * inv_gamma, axis=0)
        g_F = g_w * inv_gamma
        g_VL = _solve_lower(Lk, Kxz.T @ g_F)
        g_Kzz = cholesky_backward(Lk, -np.tril(U @ g_VL.T))
        gt1, _, gz1 = kernel_backward(self.X, Z, theta, Kxz, g_F @ U.T, d_xz, r_xz)
        gt2, gz2a, gz2b = kernel_backward(Z, Z, theta, Kzz, g_Kzz, d_zz, r_zz)
        grad["log_theta"] += gt1 + gt2
        if lay.learn_inducing:
            grad["Z"] += gz1 + gz2a + gz2b
        if coreg is None:
            grad["V"] += g_VL
        else:
            coreg.backward(p, g_VL, grad)
        return self.const - 0.5 * float(z @ z) + data, grad_flat


class _Coregion:
    """``L_R = chol(R)``, ``R`` the correlation form of ``B = W W^T + diag(kappa)``, and its backward pass."""

    def __init__(self, p: dict) -> None:
        W = p["W"]
        self.kappa = np.exp(p["log_kappa"])
        self.B = W @ W.T + np.diag(self.kappa)
        self.d = np.sqrt(np.diag(self.B))
        self.R = self.B / self.d[:, None] / self.d[None, :]
        self.Lr = _cholesky(self.R)

    def backward(self, p: dict, g_VL: np.ndarray, grad: dict) -> None:
        r"""Add the gradients of ``V``, ``W`` and ``log_kappa`` through :math:`VL_R^\top` (in place).

        :math:`R_{ij} = B_{ij}/(d_id_j)`, :math:`d_i = \sqrt{B_{ii}}`: besides
        :math:`\bar B_{ij} = \bar R_{ij}/(d_id_j)`, the diagonal collects
        :math:`-\bigl(\sum_j \bar R_{ij}R_{ij} + \sum_j \bar R_{ji}R_{ji}\bigr)/(2B_{ii})`.
        """
        d = self.d
        grad["V"] += g_VL @ self.Lr
        g_R = cholesky_backward(self.Lr, np.tril(g_VL.T @ p["V"]))
        g_B = g_R / d[:, None] / d[None, :]
        GR = g_R * self.R
        g_B[np.diag_indices(3)] -= (GR.sum(axis=1) + GR.sum(axis=0)) / (2.0 * np.diag(self.B))
        grad["W"] += (g_B + g_B.T) @ p["W"]
        grad["log_kappa"] += np.diag(g_B) * self.kappa
