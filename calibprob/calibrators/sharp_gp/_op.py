r"""The exact-GP posterior variance as a PyTensor Op with an analytic pullback.

:class:`PosteriorVariance` maps :math:`(X, X_*, \ell, \sigma_f^2, \sigma_n^2, c)` to the
latent posterior variance at :math:`X_*`. Forward (NumPy/SciPy):
:math:`K = k(X, X) + \sigma_n^2 I = LL^\top`, :math:`W = L^{-1}K_*`, :math:`a = L^{-1}1`,
:math:`s = a^\top a = 1^\top K^{-1} 1`, :math:`h = 1 - a^\top W = 1 - 1^\top K^{-1}K_*`,

.. math::

    v_i = \sigma_f^2 - \lVert W_i\rVert^2 + c\, h_i^2 / s

(``c`` = 1 adds the variance of the GLS constant mean): one Cholesky factor and
*one* triangular solve with the :math:`N` calibration columns. The pullback
(:class:`PosteriorVarianceGrad`) is analytic: with :math:`P = K^{-1}K_* = L^{-\top}W`,
:math:`b = K^{-1}1`, cotangent :math:`\bar v` and :math:`w = 2\bar v h / s`,

.. math::

    \bar K_* = -2 P\,\mathrm{diag}(\bar v) - c\, b w^\top,\qquad
    \bar K = P\,\mathrm{diag}(\bar v) P^\top
           + c\,\bigl(b (P w)^\top + \textstyle\sum_i \bar v_i h_i^2 / s^2\; b b^\top\bigr),

then chained through the kernel's dependence on :math:`\ell`, :math:`\sigma_f^2` and
:math:`\sigma_n^2` (``calibprob.bases.gp._objective.kernel_profile_derivative``, the GP
fit's own). No factorisation in the pullback (against three for PyTensor's generic
``solve`` gradient), and a graph of a handful of nodes, which is what matters in
``FAST_COMPILE`` mode. A value-only compiled function (no gradient requested) pays
only the forward: one Cholesky and one triangular solve.

This module imports PyTensor at import time; :mod:`._graph` imports it lazily.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import sqrt
from typing import Any, cast

import numpy as np
import pytensor.tensor as pt
import scipy.linalg
from pytensor.gradient import disconnected_type
from pytensor.graph import Apply, Op
from scipy.linalg.blas import dsyrk

from calibprob.bases.gp import kernels
from calibprob.bases.gp._objective import kernel_profile_derivative, weighted_sqdiff

__all__ = ["PosteriorVariance", "PosteriorVarianceGrad", "posterior_variance_op"]


def kernel_from_r2(kernel: str, p: int, r2: np.ndarray, var: float) -> np.ndarray:
    """Kernel values from scaled squared distances.

    The same operations, in the same order, as ``kernels.squared_exponential`` /
    ``kernels.matern`` (bitwise equal), from distances computed once instead of
    twice per matrix (the distances also feed the lengthscale gradient).
    """
    if kernel == "se":
        return var * np.exp(-0.5 * r2)
    coef = kernels.matern_coefficients(p)
    u = sqrt(2.0 * p + 1.0) * np.sqrt(np.maximum(r2, kernels._R2_FLOOR))
    poly = coef[p] * np.ones_like(u) if p == 0 else coef[p] * u + coef[p - 1]
    for j in range(p - 2, -1, -1):
        poly = poly * u + coef[j]
    return var * poly * np.exp(-u)


def kernel_matrices(
    kernel: str, p: int, X: np.ndarray, Xc: np.ndarray, ls: np.ndarray, var: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Scaled squared distances and kernel matrices ``(r2, r2s, K(X, X), K(X, Xc))``."""
    r2 = kernels.scaled_sqdist(X, None, ls, xp=np)
    r2s = kernels.scaled_sqdist(X, Xc, ls, xp=np)
    return r2, r2s, kernel_from_r2(kernel, p, r2, var), kernel_from_r2(kernel, p, r2s, var)


def forward(
    kernel: str, p: int, X: np.ndarray, Xc: np.ndarray, ls: np.ndarray, var: float, noise: float, cm: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Latent posterior variance at ``Xc`` and the factors the pullback needs.

    Returns
    -------
    v : ndarray, shape (N,)
    L : ndarray, shape (n, n)
        Lower Cholesky factor of ``K(X, X) + noise I`` (NaN if not positive definite).
    W : ndarray, shape (n, N + 1)
        ``L^{-1} [K(X, Xc), 1]``.
    R : ndarray, shape (n, n + N)
        The scaled squared distances ``[r2(X, X), r2(X, Xc)]`` (kept for the pullback,
        which would otherwise recompute them: O(n² d), a fifth of a gradient evaluation).
    """
    n, N = X.shape[0], Xc.shape[0]
    r2, r2s, Kk, Ks = kernel_matrices(kernel, p, X, Xc, ls, var)
    R = np.concatenate([r2, r2s], axis=1)
    Kk[np.diag_indices(n)] += noise
    rhs = np.concatenate([Ks, np.ones((n, 1))], axis=1)
    try:
        L = scipy.linalg.cholesky(Kk, lower=True, check_finite=False)
    except (np.linalg.LinAlgError, ValueError):
        return np.full(N, np.nan), np.full((n, n), np.nan), np.full((n, N + 1), np.nan), R
    W = scipy.linalg.solve_triangular(L, rhs, lower=True, check_finite=False)
    v = var - np.einsum("ij,ij->j", W[:, :N], W[:, :N])
    if cm:
        a = W[:, N]
        h = 1.0 - a @ W[:, :N]
        v = v + h * h / (a @ a)
    return v, L, W, R


def _symmetric_product(P: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``P diag(g) Pᵀ`` with two symmetric rank-k updates (half the flops of a GEMM)."""
    out = np.zeros((P.shape[0], P.shape[0]))
    for sign in (1.0, -1.0):
        keep = sign * g > 0
        if keep.any():
            A = np.asfortranarray(P[:, keep] * np.sqrt(sign * g[keep])[None, :])
            out += sign * dsyrk(1.0, A, lower=1)
    # dsyrk fills the lower triangle: mirror it
    return np.tril(out) + np.tril(out, -1).T


def pullback(
    kernel: str,
    p: int,
    X: np.ndarray,
    Xc: np.ndarray,
    ls: np.ndarray,
    var: float,
    cm: float,
    L: np.ndarray,
    W: np.ndarray,
    R: np.ndarray,
    gb: np.ndarray,
) -> tuple[np.ndarray, float, float]:
    """Gradient of ``sum(gb * v)`` with respect to ``(ls, var, noise)`` (module docstring)."""
    n, N = X.shape[0], Xc.shape[0]
    r2, r2s = R[:, :n], R[:, n:]
    Kk, Ks = kernel_from_r2(kernel, p, r2, var), kernel_from_r2(kernel, p, r2s, var)
    A = scipy.linalg.solve_triangular(L, W, lower=True, trans="T", check_finite=False)
    P, b = A[:, :N], A[:, N]
    GKs = -2.0 * P * gb[None, :]
    GK = _symmetric_product(P, gb)
    if cm:
        s = float(b.sum())
        h = 1.0 - P.sum(axis=0)
        w = 2.0 * gb * h / s
        GKs -= np.outer(b, w)
        GK += np.outer(b, P @ w) + (np.sum(gb * h * h) / s**2) * np.outer(b, b)
    g_noise = float(np.trace(GK))
    g_var = float(gb.sum() + (np.sum(GK * Kk) + np.sum(GKs * Ks)) / var)
    # d k / d ell_k = var g'(r2) * (-2 (x_k - x'_k)^2 / ell_k^3)
    MK = GK * (var * kernel_profile_derivative(kernel, p, r2, Kk / var))
    MK[np.diag_indices(n)] = 0.0  # zero self-distance: no dependence on ell
    MKs = GKs * (var * kernel_profile_derivative(kernel, p, r2s, Ks / var))
    sq = weighted_sqdiff(MK, X, X) + weighted_sqdiff(MKs, X, Xc)
    return (-2.0 * sq / np.asarray(ls, float) ** 3).astype(float), g_var, g_noise


class PosteriorVarianceGrad(Op):
    """Pullback of :class:`PosteriorVariance`: ``(.., L, W, R, v̄) -> (ℓ̄, σ̄_f², σ̄_n²)``."""

    __props__ = ("kernel", "p")

    def __init__(self, kernel: str, p: int) -> None:
        self.kernel, self.p = kernel, p

    # PyTensor's Op declares make_node(*inputs); its own Ops name their inputs as here
    def make_node(  # type: ignore[override]
        self, X: Any, Xc: Any, ls: Any, var: Any, noise: Any, cmean: Any, L: Any, W: Any, R: Any, gbar: Any
    ) -> Apply:
        ins = [pt.as_tensor_variable(v) for v in (X, Xc, ls, var, noise, cmean, L, W, R, gbar)]
        return Apply(self, ins, [ins[2].type(), pt.dscalar(), pt.dscalar()])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[list[Any]]) -> None:
        X, Xc, ls, var, _, cm, L, W, R, gb = inputs
        g_ls, g_var, g_noise = pullback(self.kernel, self.p, X, Xc, ls, float(var), float(cm), L, W, R, gb)
        outputs[0][0] = g_ls
        outputs[1][0] = np.asarray(g_var)
        outputs[2][0] = np.asarray(g_noise)


class PosteriorVariance(Op):
    """``(X, X_*, ℓ, σ_f², σ_n², c) -> (v, L, W, R)``: latent posterior variance, its factors, the distances."""

    __props__ = ("kernel", "p")

    def __init__(self, kernel: str, p: int) -> None:
        self.kernel, self.p = kernel, p
        self.grad_op = PosteriorVarianceGrad(kernel, p)

    def make_node(  # type: ignore[override]  # named inputs, as above
        self, X: Any, Xc: Any, ls: Any, var: Any, noise: Any, cmean: Any
    ) -> Apply:
        ins = [pt.as_tensor_variable(v) for v in (X, Xc, ls, var, noise, cmean)]
        return Apply(self, ins, [pt.dvector(), pt.dmatrix(), pt.dmatrix(), pt.dmatrix()])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[list[Any]]) -> None:
        X, Xc, ls, var, noise, cm = inputs
        v, L, W, R = forward(self.kernel, self.p, X, Xc, ls, float(var), float(noise), float(cm))
        outputs[0][0] = v
        outputs[1][0] = L
        outputs[2][0] = W
        outputs[3][0] = R

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        f = [False] * 4
        t = [True, False, False, False]
        return [f, f, t, t, t, f]

    def pullback(self, inputs: Sequence[Any], outputs: Sequence[Any], cotangents: Sequence[Any]) -> list[Any]:
        X, Xc, ls, var, noise, cmean = inputs
        # the grad Op has three outputs: calling it gives their list
        g_ls, g_var, g_noise = cast(
            list, self.grad_op(X, Xc, ls, var, noise, cmean, outputs[1], outputs[2], outputs[3], cotangents[0])
        )
        d = disconnected_type
        return [d(), d(), g_ls, g_var, g_noise, d()]


_OPS: dict = {}


def posterior_variance_op(kernel: str, p: int) -> PosteriorVariance:
    """The Op for one kernel (one instance per ``(kernel, p)``, so graphs merge)."""
    key = (kernel, p)
    if key not in _OPS:
        _OPS[key] = PosteriorVariance(kernel, p)
    return _OPS[key]
