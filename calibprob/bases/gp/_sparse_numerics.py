r"""Sparse-GP (VFE) numerics in time linear in :math:`n` and memory bounded by a chunk.

**Statistics.** With inducing inputs :math:`Z` (:math:`m` of them),
:math:`K_{mm} + \text{jitter}\,\sigma_f^2 I = L_m L_m^\top` and the whitened
cross-covariance :math:`\tilde A = L_m^{-1} K_{mn}` (:math:`m\times n`), every
quantity of the collapsed bound and of the predictive distribution is a function of

.. math::

    P = \tilde A\tilde A^\top = \sum_c \tilde A_c \tilde A_c^\top,\qquad
    \tilde a_y = \tilde A y,\qquad \tilde a_1 = \tilde A 1,\qquad
    y^\top y,\quad 1^\top y,\quad n,

accumulated over blocks :math:`c` of rows (:func:`accumulate`): no array with
more than ``chunk_rows(m)`` × :math:`m` entries is held, and the cost is
:math:`O(nm^2 + nmd)`.

**Bound.** With :math:`\sigma^2` the noise, :math:`B = I + P/\sigma^2 = L_B L_B^\top`,
:math:`c_a = L_B^{-1}\tilde a_y/\sigma`, :math:`c_b = L_B^{-1}\tilde a_1/\sigma`
(Woodbury: :math:`\Sigma^{-1} = \sigma^{-2}(I - A^\top B^{-1} A)` for
:math:`\Sigma = Q_{nn} + \sigma^2 I`, :math:`A = \tilde A/\sigma`):

.. math::

    q_{yy} = \frac{y^\top y - c_a^\top c_a}{\sigma^2},\quad
    q_{y1} = \frac{1^\top y - c_a^\top c_b}{\sigma^2},\quad
    q_{11} = \frac{n - c_b^\top c_b}{\sigma^2},\quad
    \log|\Sigma| = n\log\sigma^2 + \log|B|,\quad
    \frac{\operatorname{tr}(K_{nn} - Q_{nn})}{\sigma^2} = \frac{n\sigma_f^2 - \operatorname{tr}P}{\sigma^2},

assembled as in ``calibprob.bases.gp._objective.vfe_objective`` (the same
function, evaluated from the statistics).

**Gradient** (:class:`VFEObjectiveNumpy`). Write the bound through
:math:`C = \sigma^2 K_{mm} + \Psi`, :math:`\Psi = K_{mn}K_{nm}`,
:math:`b_u = K_{mn}u`: :math:`q_{uv} = (u^\top v - b_u^\top C^{-1}b_v)/\sigma^2`,
:math:`\log|\Sigma| = (n-m)\log\sigma^2 + \log|C| - \log|K_{mm}|`. In whitened
coordinates (:math:`X = L_m^{-\top}\hat X L_m^{-1}`), with
:math:`\hat m` the GLS constant (0 for a zero mean),
:math:`\rho = B^{-1}(\tilde a_y - \hat m\tilde a_1)/\sigma^2`,
:math:`\omega = B^{-1}\tilde a_1/\sigma^2` and :math:`r = [\text{REML}]`:

.. math::

    \hat G_\Psi = \frac{I - B^{-1} - \rho\rho^\top - r\,\omega\omega^\top/q_{11}}{2\sigma^2},\qquad
    \hat G_{mm} = \sigma^2\hat G_\Psi - \frac{P}{2\sigma^2},\qquad
    \hat g_y = \frac{\rho}{\sigma^2},\qquad
    \hat g_1 = \frac{-\hat m\rho + r\,\omega/q_{11}}{\sigma^2},

are :math:`\partial\mathcal F/\partial\Psi`, :math:`\partial\mathcal F/\partial K_{mm}`,
:math:`\partial\mathcal F/\partial b_y`, :math:`\partial\mathcal F/\partial b_1`;
hence :math:`\partial\mathcal F/\partial K_{mn} = 2G_\Psi K_{mn} + g_y y^\top + g_1 1^\top`,
contracted chunk by chunk with :math:`\partial K_{mn}/\partial\log\ell_k`
(a second pass over the rows), and

.. math::

    \frac{\partial\mathcal F}{\partial\log\sigma_f^2} = \operatorname{tr}\hat G_{mm}
        + 2\langle\hat G_\Psi, P\rangle + \hat g_y^\top\tilde a_y + \hat g_1^\top\tilde a_1
        - \frac{n\sigma_f^2}{2\sigma^2},

.. math::

    \frac{\partial\mathcal F}{\partial\log\sigma^2} = \frac12\Big[
        -\lVert\rho\rVert^2 - r\frac{\lVert\omega\rVert^2}{q_{11}} - \operatorname{tr}B^{-1}
        + q_{yy} - \hat m q_{y1} + r - (n - m) + \frac{n\sigma_f^2 - \operatorname{tr}P}{\sigma^2}\Big].

``tests/bases/gp/test_sparse.py`` checks value and gradient against the PyMC model's
compiled bound and finite differences.

References
----------
Titsias, M. (2009). Variational learning of inducing variables in sparse
Gaussian processes. AISTATS, PMLR 5:567–574.
Bauer, M., van der Wilk, M. and Rasmussen, C. E. (2016). Understanding
probabilistic sparse Gaussian process approximations. NeurIPS (the bound's
gradients through the m x m statistics).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike

from calibprob.bases.gp import kernels
from calibprob.bases.gp._objective import assemble, kernel_profile_derivative, weighted_sqdiff

#: Entries of one n_chunk x m block (4 MB of float64): bounds the working memory.
CHUNK_ENTRIES = 1 << 19


def chunk_rows(m: int, chunk_entries: int = CHUNK_ENTRIES) -> int:
    """Rows per block so that a block of ``m`` columns holds about ``chunk_entries`` numbers."""
    return max(64, int(chunk_entries) // max(int(m), 1))


def _lower(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    return scipy.linalg.solve_triangular(L, B, lower=True, check_finite=False)


def _upper_t(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """:math:`L^{-\\top} B` for lower-triangular ``L``."""
    return scipy.linalg.solve_triangular(L, B, lower=True, trans="T", check_finite=False)


def inducing_factor(kernel: str, p: int, Z: np.ndarray, ls: np.ndarray, var: float, jitter: float) -> np.ndarray:
    """Lower Cholesky factor of :math:`K_{mm} + \\text{jitter}\\,\\sigma_f^2 I`."""
    Kmm = kernels.kernel(kernel, Z, None, ls, var, p=int(p), xp=np)
    Kmm[np.diag_indices(Z.shape[0])] += jitter * var
    return scipy.linalg.cholesky(Kmm, lower=True, check_finite=False)


@dataclass
class Stats:
    """The m x m statistics of one θ (see the module docstring)."""

    Lm: np.ndarray
    P: np.ndarray
    ay: np.ndarray
    a1: np.ndarray
    yy: float
    sy: float
    n: int


def accumulate(
    kernel: str,
    p: int,
    X: np.ndarray,
    y: np.ndarray,
    Z: np.ndarray,
    ls: np.ndarray,
    var: float,
    jitter: float,
    chunk: int | None = None,
) -> Stats:
    r"""Accumulate :math:`P = \tilde A\tilde A^\top`, :math:`\tilde A y`, :math:`\tilde A 1` over row blocks.

    Parameters
    ----------
    kernel, p : kernel name and Matérn order
    X : ndarray, shape (n, d)
    y : ndarray, shape (n,)
    Z : ndarray, shape (m, d)
    ls : ndarray, shape (d,)
    var, jitter : float
    chunk : int, optional
        Rows per block (default :func:`chunk_rows`).

    Returns
    -------
    Stats
    """
    m = Z.shape[0]
    Lm = inducing_factor(kernel, p, Z, ls, var, jitter)
    P = np.zeros((m, m))
    ay = np.zeros(m)
    a1 = np.zeros(m)
    step = chunk or chunk_rows(m)
    for start in range(0, X.shape[0], step):
        sl = slice(start, start + step)
        At = _lower(Lm, kernels.kernel(kernel, Z, X[sl], ls, var, p=int(p), xp=np))
        P += At @ At.T
        ay += At @ y[sl]
        a1 += At.sum(axis=1)
    return Stats(Lm, P, ay, a1, float(y @ y), float(y.sum()), int(X.shape[0]))


def bound(stats: Stats, var: float, noise: float, *, mean: str, objective: str) -> dict:
    """Collapsed bound and the pieces prediction and gradients reuse (see module docstring)."""
    n, m = stats.n, stats.P.shape[0]
    sn = np.sqrt(noise)
    B = stats.P / noise
    B[np.diag_indices(m)] += 1.0
    LB = scipy.linalg.cholesky(B, lower=True, check_finite=False)
    ca = _lower(LB, stats.ay / sn)
    qyy = (stats.yy - ca @ ca) / noise
    logdet = n * np.log(noise) + 2.0 * np.sum(np.log(np.diag(LB)))
    trace = (n * var - np.trace(stats.P)) / noise
    out = {"LB": LB, "ca": ca, "cb": None, "qyy": qyy, "qy1": None, "q11": None, "mhat": 0.0, "trace": trace}
    if mean == "constant":
        cb = _lower(LB, stats.a1 / sn)
        qy1 = (stats.sy - ca @ cb) / noise
        q11 = (n - cb @ cb) / noise
        out.update(cb=cb, qy1=qy1, q11=q11, mhat=float(qy1 / q11))
    gauss = assemble(qyy, out["qy1"], out["q11"], logdet, n, mean=mean, objective=objective, xp=np)
    out["objective"] = float(gauss - 0.5 * trace)
    return out


def _whitened_gradients(
    stats: Stats, var: float, noise: float, b: dict, reml: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float, float]:
    """:math:`\\hat G_\\Psi, \\hat G_{mm}, \\hat g_y, \\hat g_1` and the two scalar derivatives."""
    n, m = stats.n, stats.P.shape[0]
    sn = np.sqrt(noise)
    LB, mhat = b["LB"], b["mhat"]
    resid = b["ca"] if b["cb"] is None else b["ca"] - mhat * b["cb"]
    rho = _upper_t(LB, resid) / sn
    Binv = scipy.linalg.cho_solve((LB, True), np.eye(m), check_finite=False)
    G = np.eye(m) - Binv - np.outer(rho, rho)
    g1 = np.zeros(m) if b["cb"] is None else -mhat * rho / noise
    extra_noise = 0.0
    if reml:
        omega = _upper_t(LB, b["cb"]) / sn
        G -= np.outer(omega, omega) / b["q11"]
        g1 = g1 + omega / (b["q11"] * noise)
        extra_noise = 1.0 - omega @ omega / b["q11"]
    G /= 2.0 * noise
    Gmm = noise * G - stats.P / (2.0 * noise)
    gy = rho / noise
    d_var = np.trace(Gmm) + 2.0 * np.vdot(G, stats.P) + gy @ stats.ay + g1 @ stats.a1 - n * var / (2.0 * noise)
    quad = b["qyy"] - (mhat * b["qy1"] if b["cb"] is not None else 0.0)
    d_noise = 0.5 * (-(rho @ rho) - np.trace(Binv) + quad + extra_noise - (n - m) + b["trace"])
    return G, Gmm, gy, g1, float(d_var), float(d_noise)


class VFEObjectiveNumpy:
    r"""The VFE bound and its gradient in :math:`x = (\log\ell, \log\sigma_f^2, \log\sigma^2)`, chunked.

    The same function as the PyMC model's ``vfe_bound`` potential, evaluated from
    the m x m statistics: ``value`` makes one pass over the rows, ``value_and_grad``
    two (the second contracts :math:`\partial\mathcal F/\partial K_{mn}` with the
    kernel's lengthscale derivative block by block). Memory: :math:`O(m^2)` plus one
    block. Failed factorisations give ``nan``.

    Parameters
    ----------
    kernel : {"se", "matern"}
    p : int
    mean : {"zero", "constant"}
    objective : {"ml", "reml"}
    jitter : float
    X : ndarray, shape (n, d)
    y : ndarray, shape (n,)
    Z : ndarray, shape (m, d)
    chunk : int, optional
        Rows per block.
    """

    def __init__(
        self,
        kernel: str,
        p: int,
        mean: str,
        objective: str,
        jitter: float,
        X: ArrayLike,
        y: ArrayLike,
        Z: ArrayLike,
        chunk: int | None = None,
    ) -> None:
        self.kernel, self.p = kernel, int(p)
        self.mean, self.objective = mean, objective
        self.jitter = float(jitter)
        self.X = np.ascontiguousarray(X, dtype=float)
        self.y = np.ascontiguousarray(y, dtype=float)
        self.Z = np.ascontiguousarray(Z, dtype=float)
        self.d = self.X.shape[1]
        self.chunk = chunk or chunk_rows(self.Z.shape[0])
        self.n_value = 0
        self.n_grad = 0

    def _split(self, x: ArrayLike) -> tuple[np.ndarray, float, float]:
        x = np.asarray(x, dtype=float)
        d = self.d
        return np.exp(x[:d]), float(np.exp(x[d])), float(np.exp(x[d + 1]))

    def _evaluate(self, x: ArrayLike) -> tuple[np.ndarray, float, float, Stats, dict]:
        ls, var, noise = self._split(x)
        stats = accumulate(self.kernel, self.p, self.X, self.y, self.Z, ls, var, self.jitter, self.chunk)
        return ls, var, noise, stats, bound(stats, var, noise, mean=self.mean, objective=self.objective)

    def value(self, x: ArrayLike) -> float:
        """The bound at ``x`` (``nan`` when a factorisation fails)."""
        self.n_value += 1
        try:
            return self._evaluate(x)[4]["objective"]
        except (np.linalg.LinAlgError, ValueError):
            return np.nan

    def _dK(self, X1: np.ndarray, X2: np.ndarray | None, ls: np.ndarray, var: float) -> tuple[np.ndarray, np.ndarray]:
        """:math:`\\sigma_f^2 g'(r^2)` on a block (the kernel's derivative in :math:`r^2`)."""
        r2 = kernels.scaled_sqdist(X1, X2, ls, xp=np)
        g = kernels.kernel(self.kernel, X1, X2, ls, 1.0, p=self.p, xp=np)
        return var * kernel_profile_derivative(self.kernel, self.p, r2, g), g

    def value_and_grad(self, x: ArrayLike) -> tuple[float, np.ndarray]:
        """The bound and its gradient at ``x`` (NaNs when a factorisation fails)."""
        self.n_grad += 1
        x = np.asarray(x, dtype=float)
        try:
            ls, var, noise, stats, b = self._evaluate(x)
        except (np.linalg.LinAlgError, ValueError):
            return np.nan, np.full(x.shape, np.nan)
        reml = self.mean == "constant" and self.objective == "reml"
        G, Gmm, gy, g1, d_var, d_noise = _whitened_gradients(stats, var, noise, b, reml)
        Lm = stats.Lm
        # back to the K coordinates: G_Psi = Lm^-T G Lm^-1, g_y = Lm^-T gy, ...
        G_psi = _upper_t(Lm, _upper_t(Lm, G).T)
        G_mm = _upper_t(Lm, _upper_t(Lm, Gmm).T)
        gy_k, g1_k = _upper_t(Lm, gy), _upper_t(Lm, g1)
        H, _ = self._dK(self.Z, self.Z, ls, var)
        sq = weighted_sqdiff(G_mm * H, self.Z, self.Z)
        for start in range(0, self.X.shape[0], self.chunk):
            sl = slice(start, start + self.chunk)
            Xc = self.X[sl]
            H, g = self._dK(self.Z, Xc, ls, var)
            M = 2.0 * (G_psi @ (var * g)) + np.outer(gy_k, self.y[sl]) + g1_k[:, None]
            sq += weighted_sqdiff(M * H, self.Z, Xc)
        grad = np.empty_like(x)
        grad[: self.d] = -2.0 * sq / ls**2
        grad[self.d] = d_var
        grad[self.d + 1] = d_noise
        return b["objective"], grad


def predictive_state(stats: Stats, var: float, noise: float, shift: float, *, mean: str, objective: str) -> dict:
    r"""What prediction needs: :math:`L_m, L_B`, :math:`c = (c_a - \hat m c_b)/\sigma` and the mean terms."""
    b = bound(stats, var, noise, mean=mean, objective=objective)
    sn = np.sqrt(noise)
    cb = b["cb"]
    c = b["ca"] / sn if cb is None else (b["ca"] - b["mhat"] * cb) / sn
    return {
        "Lm": stats.Lm,
        "LB": b["LB"],
        "c": c,
        "cb": cb,
        "q11": b["q11"],
        "m": shift + b["mhat"],
        "objective": b["objective"],
    }
