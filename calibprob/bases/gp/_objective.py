r"""Gaussian-process objectives written once for NumPy and PyTensor.

The exact marginal likelihood, its restricted (REML) version for an unknown
constant mean and Titsias' collapsed variational bound all reduce to three
quadratic forms with the covariance :math:`\Sigma` of the observations,

.. math::

    q_{yy} = y^\top \Sigma^{-1} y,\quad q_{y1} = y^\top \Sigma^{-1} 1,\quad
    q_{11} = 1^\top \Sigma^{-1} 1,

plus :math:`\log|\Sigma|`. :func:`assemble` turns them into the objective:

* ``mean="zero"``: :math:`-\tfrac12 [q_{yy} + \log|\Sigma| + n\log 2\pi]`.
* ``mean="constant"``, ``objective="ml"``: the likelihood profiled over the
  constant :math:`m` (its maximiser is the GLS estimate
  :math:`\hat m = q_{y1}/q_{11}`): :math:`-\tfrac12 [q_{yy} - q_{y1}^2/q_{11}
  + \log|\Sigma| + n\log 2\pi]`.
* ``mean="constant"``, ``objective="reml"``: the restricted likelihood
  :math:`-\tfrac12 [z^\top Q^{-1} z + \log|\Sigma| + \log|P^\top\Sigma^{-1}P|
  + (n-1)\log 2\pi]` with :math:`P = 1`, :math:`z^\top Q^{-1} z = q_{yy} -
  q_{y1}^2/q_{11}` and :math:`\log|P^\top\Sigma^{-1}P| = \log q_{11}`. It is
  also the marginal likelihood with the constant integrated out under a flat
  prior (up to a constant), which is what a NUTS run on the PyMC model samples.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, cast

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike

from calibprob.bases.gp import kernels

LOG_2PI = float(np.log(2.0 * np.pi))

MEANS = ("zero", "constant")
OBJECTIVES = ("ml", "reml")


def cholesky(A: kernels.Tensor, xp: ModuleType) -> kernels.Tensor:
    """Lower Cholesky factor (NumPy raises on failure; PyTensor returns NaN)."""
    if xp is np:
        return scipy.linalg.cholesky(A, lower=True)
    from pytensor.tensor.linalg import cholesky as pt_cholesky

    return pt_cholesky(A, lower=True)


def solve_lower(L: kernels.Tensor, b: kernels.Tensor, xp: ModuleType) -> kernels.Tensor:
    r""":math:`L^{-1} b` for lower-triangular ``L``."""
    if xp is np:
        return scipy.linalg.solve_triangular(L, b, lower=True)
    from pytensor.tensor.linalg import solve_triangular

    return solve_triangular(L, b, lower=True)


def assemble(
    qyy: kernels.Tensor,
    qy1: kernels.Tensor,
    q11: kernels.Tensor,
    logdet: kernels.Tensor,
    n: kernels.Tensor,
    *,
    mean: str,
    objective: str,
    xp: ModuleType,
) -> kernels.Tensor:
    """Objective (log marginal / restricted likelihood) from the quadratic forms.

    Parameters
    ----------
    qyy, qy1, q11 : scalar
        Quadratic forms defined in the module docstring (``qy1``, ``q11`` are
        ignored for ``mean="zero"``).
    logdet : scalar
        :math:`\\log|\\Sigma|`.
    n : int or scalar
        Number of observations.
    mean : {"zero", "constant"}
    objective : {"ml", "reml"}
    xp : module

    Returns
    -------
    scalar
    """
    if mean == "zero":
        return -0.5 * (qyy + logdet + n * LOG_2PI)
    quad = qyy - qy1 * qy1 / q11
    if objective == "reml":
        return -0.5 * (quad + logdet + xp.log(q11) + (n - 1) * LOG_2PI)
    return -0.5 * (quad + logdet + n * LOG_2PI)


def exact_objective(
    K: kernels.Tensor, y: kernels.Tensor, *, mean: str, objective: str, xp: ModuleType
) -> kernels.Tensor:
    r"""Log marginal (``"ml"``) or restricted (``"reml"``) likelihood of ``y ~ N(m 1, K)``.

    With ``xp=numpy`` it is computed directly; with ``xp=pytensor.tensor`` it is
    the :class:`GaussianObjective` Op, whose gradient is the closed form
    :math:`\partial/\partial K = \tfrac12(\alpha\alpha^\top - W)` (below) instead of
    reverse-mode differentiation through the Cholesky factorisation — about a
    quarter of the :math:`O(n^3)` work.

    Parameters
    ----------
    K : array, shape (n, n)
        Covariance of the observations (kernel plus noise / nugget).
    y : array, shape (n,)
    mean : {"zero", "constant"}
    objective : {"ml", "reml"}
    xp : module

    Returns
    -------
    scalar
    """
    if xp is not np:
        return GaussianObjective(mean, objective)(K, y)[0]
    L = cholesky(K, xp)
    a = solve_lower(L, y, xp)
    logdet = 2.0 * xp.sum(xp.log(xp.diag(L)))
    n = y.shape[0]
    if mean == "zero":
        return assemble(a @ a, None, None, logdet, n, mean=mean, objective=objective, xp=xp)
    b = solve_lower(L, xp.ones_like(y), xp)
    return assemble(a @ a, a @ b, b @ b, logdet, n, mean=mean, objective=objective, xp=xp)


def vfe_objective(
    Kmm: kernels.Tensor,
    Kmn: kernels.Tensor,
    variance: kernels.Tensor,
    noise: kernels.Tensor,
    y: kernels.Tensor,
    *,
    mean: str,
    objective: str,
    xp: ModuleType,
) -> kernels.Tensor:
    r"""Titsias' collapsed variational lower bound (VFE).

    .. math::

        \mathcal F = \log \mathcal N(y \mid m 1, Q_{nn} + \sigma_n^2 I)
        - \frac{1}{2\sigma_n^2}\operatorname{tr}(K_{nn} - Q_{nn}),
        \qquad Q_{nn} = K_{nm} K_{mm}^{-1} K_{mn},

    evaluated in :math:`O(nm^2)` through :math:`A = L_m^{-1} K_{mn} / \sigma_n`,
    :math:`B = I + A A^\top = L_B L_B^\top`:
    :math:`\Sigma^{-1} = \sigma_n^{-2}(I - A^\top B^{-1} A)`,
    :math:`\log|\Sigma| = n \log\sigma_n^2 + \log|B|`,
    :math:`\operatorname{tr}(K_{nn} - Q_{nn})/\sigma_n^2 = n\sigma_f^2/\sigma_n^2
    - \operatorname{tr}(A A^\top)`. The Gaussian term is handled by
    :func:`assemble` (so a constant mean is profiled / restricted as in the
    exact case).

    Parameters
    ----------
    Kmm : array, shape (m, m)
        Inducing covariance including its jitter.
    Kmn : array, shape (m, n)
    variance : scalar
        Kernel variance :math:`\sigma_f^2` (``k(x, x)`` of a stationary kernel).
    noise : scalar
        Noise variance :math:`\sigma_n^2`.
    y : array, shape (n,)
    mean, objective, xp
        As in :func:`exact_objective`.

    Returns
    -------
    scalar

    References
    ----------
    Titsias, M. (2009). Variational learning of inducing variables in sparse
    Gaussian processes. AISTATS.
    """
    n = y.shape[0]
    m = Kmm.shape[0]
    Lm = cholesky(Kmm, xp)
    A = solve_lower(Lm, Kmn, xp) / xp.sqrt(noise)
    AAT = A @ A.T
    LB = cholesky(xp.eye(m) + AAT, xp)
    ca = solve_lower(LB, A @ y, xp)
    qyy = (y @ y - ca @ ca) / noise
    logdet = n * xp.log(noise) + 2.0 * xp.sum(xp.log(xp.diag(LB)))
    trace = n * variance / noise - xp.sum(xp.diag(AAT))
    if mean == "zero":
        gauss = assemble(qyy, None, None, logdet, n, mean=mean, objective=objective, xp=xp)
    else:
        ones = xp.ones_like(y)
        cb = solve_lower(LB, A @ ones, xp)
        qy1 = (y @ ones - ca @ cb) / noise
        q11 = (n - cb @ cb) / noise
        gauss = assemble(qyy, qy1, q11, logdet, n, mean=mean, objective=objective, xp=xp)
    return gauss - 0.5 * trace


def _gaussian_objective_and_grad(
    K: np.ndarray, y: np.ndarray, mean: str, objective: str
) -> tuple[float, np.ndarray, np.ndarray]:
    r"""Value of :func:`exact_objective` and its gradients with respect to ``K`` and ``y``.

    With :math:`\alpha = K^{-1}(y - \hat m 1)` (:math:`\hat m = 0` for a zero
    mean; for a constant mean this is :math:`Q^{-1}y`) and :math:`W = K^{-1}`
    (ML, the constant being profiled out — envelope theorem) or
    :math:`W = Q^{-1}` (REML):

    .. math::

        \frac{\partial \ell}{\partial K} = \tfrac12(\alpha\alpha^\top - W),\qquad
        \frac{\partial \ell}{\partial y} = -\alpha.

    The matrix gradient is the symmetric one: contracted with a symmetric
    perturbation :math:`dK` it gives :math:`d\ell = \operatorname{tr}(G\, dK)`,
    which is all the kernel graph produces. Returns NaNs when ``K`` is not
    positive definite.
    """
    n = y.shape[0]
    try:
        L = scipy.linalg.cholesky(K, lower=True)
    except (np.linalg.LinAlgError, ValueError):
        return np.nan, np.full((n, n), np.nan), np.full(n, np.nan)
    a = scipy.linalg.solve_triangular(L, y, lower=True, check_finite=False)
    logdet = 2.0 * np.sum(np.log(np.diag(L)))
    Kinv, info = scipy.linalg.lapack.dpotri(L, lower=1)
    if info != 0:
        return np.nan, np.full((n, n), np.nan), np.full(n, np.nan)
    Kinv = np.tril(Kinv) + np.tril(Kinv, -1).T
    if mean == "zero":
        value = assemble(a @ a, None, None, logdet, n, mean=mean, objective=objective, xp=np)
        alpha = Kinv @ y
        W = Kinv
    else:
        b = scipy.linalg.solve_triangular(L, np.ones(n), lower=True, check_finite=False)
        s = b @ b
        value = assemble(a @ a, a @ b, s, logdet, n, mean=mean, objective=objective, xp=np)
        Kinv_1 = Kinv.sum(axis=1)
        alpha = Kinv @ y - Kinv_1 * (a @ b) / s
        W = Kinv - np.outer(Kinv_1, Kinv_1) / s if objective == "reml" else Kinv
    gK = 0.5 * (np.outer(alpha, alpha) - W)
    return float(value), gK, -alpha


class GaussianObjective:
    """Factory of the PyTensor Op (defined lazily so NumPy users never import PyTensor)."""

    _ops: dict = {}

    def __new__(cls, mean: str, objective: str) -> Any:  # a PyTensor Op
        key = (mean, objective)
        if key not in cls._ops:
            cls._ops[key] = _make_op(mean, objective)
        return cls._ops[key]


def _make_op(mean: str, objective: str) -> Any:
    import pytensor.tensor as pt
    from pytensor.gradient import DisconnectedType, grad_not_implemented
    from pytensor.graph.basic import Apply
    from pytensor.graph.op import Op

    class _GaussianObjectiveOp(Op):
        """``(K, y) -> (objective, dK, dy)``: value and closed-form gradients, one Cholesky."""

        __props__ = ("mean", "objective")

        def __init__(self, mean: str, objective: str) -> None:
            self.mean = mean
            self.objective = objective

        def make_node(self, K: Any, y: Any) -> Any:  # type: ignore[override]  # Op's is (*inputs)
            K = pt.as_tensor_variable(K)
            y = pt.as_tensor_variable(y)
            return Apply(self, [K, y], [pt.dscalar(), pt.dmatrix(), pt.dvector()])

        def perform(self, node: Any, inputs: Any, outputs: Any) -> None:
            K, y = inputs
            value, gK, gy = _gaussian_objective_and_grad(
                np.asarray(K, float), np.asarray(y, float), self.mean, self.objective
            )
            outputs[0][0] = np.asarray(value, dtype=float)
            outputs[1][0] = gK
            outputs[2][0] = gy

        def pullback(self, inputs: Any, outputs: Any, cotangents: Any) -> list[Any]:
            g_value, g_K, g_y = cotangents
            for g in (g_K, g_y):
                if not isinstance(g.type, DisconnectedType):
                    # second derivatives (e.g. compile_d2logp) are not provided
                    return [grad_not_implemented(self, i, inputs[i]) for i in range(2)]
            return [g_value * outputs[1], g_value * outputs[2]]

        def infer_shape(self, node: Any, shapes: Any) -> list[Any]:
            return [(), shapes[0], shapes[1]]

    return _GaussianObjectiveOp(mean, objective)


# ---------------------------------------------------------------------------
# NumPy/SciPy value and gradient in the log-hyperparameters (the fitting path)
# ---------------------------------------------------------------------------


def kernel_profile_derivative(kernel: str, p: int, r2: np.ndarray, g: np.ndarray) -> np.ndarray:
    r"""Derivative :math:`g'(r^2)` of the unit-variance kernel profile :math:`g(r^2)`.

    SE: :math:`g = e^{-r^2/2}`, :math:`g' = -g/2`. Half-integer Matérn with
    :math:`g = e^{-u}\sum_j a_j u^j`, :math:`u = c r`, :math:`c = \sqrt{2p+1}`:
    :math:`g' = \tfrac{c^2}{2} e^{-u} \sum_{j \ge 1} ((j+1)a_{j+1} - a_j)\,u^{j-1}`
    for :math:`p \ge 1` (finite at :math:`r = 0` because :math:`a_1 = a_0 = 1`), and
    :math:`-c\,e^{-u}/(2r)` for :math:`p = 0`, zero where :math:`r^2` is below the
    kernels' floor (the floored square root is constant there, as in the PyTensor
    graph).

    Parameters
    ----------
    kernel : {"se", "matern"}
    p : int
    r2 : ndarray
        Scaled squared distances.
    g : ndarray
        :math:`g(r^2)` (the kernel divided by its variance), same shape.

    Returns
    -------
    ndarray
    """
    if kernel == "se":
        return -0.5 * g
    c = np.sqrt(2.0 * p + 1.0)
    r = np.sqrt(np.maximum(r2, kernels._R2_FLOOR))
    u = c * r
    if p == 0:
        out = -c * np.exp(-u) / (2.0 * r)
    else:
        a = np.r_[kernels.matern_coefficients(p), 0.0]
        coef = [(j + 1) * a[j + 1] - a[j] for j in range(1, p + 1)]  # multiplies u^(j-1)
        poly = np.full_like(u, coef[-1])
        for cj in coef[-2::-1]:
            poly = poly * u + cj
        out = 0.5 * c * c * np.exp(-u) * poly
    return np.where(r2 < kernels._R2_FLOOR, 0.0, out)


def weighted_sqdiff(M: np.ndarray, X: np.ndarray, Z: np.ndarray) -> np.ndarray:
    r""":math:`\sum_{ij} M_{ij} (X_{ik} - Z_{jk})^2` for every feature :math:`k`, in :math:`O(nmd)`.

    Expanded as :math:`\sum_i X_{ik}^2 (M1)_i + \sum_j Z_{jk}^2 (M^\top 1)_j
    - 2\sum_i X_{ik}(MZ)_{ik}` (one matrix product instead of :math:`d`
    passes over an :math:`n\times m` array); the inputs are centred first
    because differences are translation invariant and centring limits the
    cancellation.

    Parameters
    ----------
    M : ndarray, shape (n, m)
    X : ndarray, shape (n, d)
    Z : ndarray, shape (m, d)

    Returns
    -------
    ndarray, shape (d,)
    """
    c = X.mean(axis=0)
    Xc, Zc = X - c, Z - c
    return (Xc**2).T @ M.sum(axis=1) + (Zc**2).T @ M.sum(axis=0) - 2.0 * np.sum(Xc * (M @ Zc), axis=0)


class ExactObjectiveNumpy:
    r"""Exact ML/REML objective and its gradient in :math:`x = (\log\ell, \log\sigma_f^2, [\log\sigma_n^2])`.

    The same function as the PyMC model's potential (:func:`exact_objective` with
    the kernels of :mod:`calibprob.bases.gp.kernels`), evaluated in NumPy/SciPy with one
    Cholesky factorisation per call:

    * **value** (:meth:`value`): :math:`K = LL^\top`, one triangular solve with the
      right-hand sides :math:`[y, 1]`, then :func:`assemble` — the floor of one
      Cholesky plus one solve.
    * **gradient** (:meth:`value_and_grad`): with :math:`G = \partial\ell/\partial K =
      \tfrac12(\alpha\alpha^\top - W)` (see :func:`_gaussian_objective_and_grad`),
      :math:`\alpha = L^{-\top}(a_y - \hat m\, a_1)` by one more triangular solve, and
      the lower triangle of :math:`K^{-1}` from the factor (LAPACK ``potri``, never
      symmetrised: every contraction with a symmetric matrix is written on the
      lower triangle),

      .. math::

          \frac{\partial\ell}{\partial\log\sigma_f^2} = \langle G, K_f\rangle,\quad
          \frac{\partial\ell}{\partial\log\sigma_n^2} = \sigma_n^2\operatorname{tr}G,\quad
          \frac{\partial\ell}{\partial\log\ell_k} = -\frac{2}{\ell_k^2}
          \sum_{ij} G_{ij}\,\sigma_f^2 g'(r^2_{ij})\,(x_{ik} - x_{jk})^2,

      the last one in :math:`O(n^2 d)` through :func:`weighted_sqdiff`. With a
      fixed relative nugget (``noise=False``) the nugget term
      :math:`\texttt{nugget}\,\sigma_f^2\operatorname{tr}G` joins the variance
      derivative.

    Failed factorisations return ``nan`` (value) and ``nan`` gradients, as the
    PyTensor Op does. Input is validated once by the estimator, so every LAPACK
    call skips its finiteness check.

    Parameters
    ----------
    kernel : {"se", "matern"}
    p : int
    mean : {"zero", "constant"}
    objective : {"ml", "reml"}
    noise : bool
    nugget : float
        Relative nugget used when ``noise=False``.
    X : ndarray, shape (n, d)
    y : ndarray, shape (n,)
    """

    def __init__(
        self,
        kernel: str,
        p: int,
        mean: str,
        objective: str,
        noise: bool,
        nugget: float,
        X: ArrayLike,
        y: ArrayLike,
    ) -> None:
        self.kernel, self.p = kernel, int(p)
        self.mean, self.objective = mean, objective
        self.noise, self.nugget = bool(noise), float(nugget)
        self.X = np.ascontiguousarray(X, dtype=float)
        self.y = np.ascontiguousarray(y, dtype=float)
        self.n, self.d = self.X.shape
        rhs = [self.y] if mean == "zero" else [self.y, np.ones(self.n)]
        self._rhs = np.asfortranarray(np.column_stack(rhs))
        self._Xc = self.X - self.X.mean(axis=0)
        self._Xc2 = self._Xc**2
        self._ones = np.ones(self.n)
        self._Xc1 = np.column_stack([self._Xc, self._ones])
        self.n_value = 0
        self.n_grad = 0

    # -- pieces -----------------------------------------------------------------------
    def _split(self, x: np.ndarray) -> tuple[np.ndarray, float, float]:
        d = self.d
        ls = np.exp(x[:d])
        var = float(np.exp(x[d]))
        noise = float(np.exp(x[d + 1])) if self.noise else self.nugget * var
        return ls, var, noise

    def _kernel(self, ls: np.ndarray, var: float) -> tuple[np.ndarray | None, np.ndarray]:
        """Scaled squared distances and the unit-variance kernel profile :math:`g(r^2)`."""
        A = self._Xc / ls
        a2 = np.einsum("ij,ij->i", A, A)
        if self.kernel == "se":
            # -r2/2 = a_i.a_j - |a_i|^2/2 - |a_j|^2/2, built in place (the SE gradient needs g only)
            h = A @ A.T
            h -= 0.5 * a2[:, None]
            h -= 0.5 * a2[None, :]
            h.flat[:: self.n + 1] = 0.0  # exact zero self-distance, as in kernels.scaled_sqdist
            np.minimum(h, 0.0, out=h)
            return None, np.exp(h, out=h)
        r2 = A @ A.T
        r2 *= -2.0
        r2 += a2[:, None]
        r2 += a2[None, :]
        r2.flat[:: self.n + 1] = 0.0
        np.maximum(r2, 0.0, out=r2)
        coef = kernels.matern_coefficients(self.p)
        u = np.sqrt(np.maximum(r2, kernels._R2_FLOOR))
        u *= np.sqrt(2.0 * self.p + 1.0)
        poly = np.full_like(u, coef[self.p])
        for j in range(self.p - 1, -1, -1):
            poly *= u
            poly += coef[j]
        np.negative(u, out=u)
        np.exp(u, out=u)
        g = poly * u
        return r2, g

    def _factor(self, g: np.ndarray, var: float, noise: float) -> np.ndarray | None:
        """Cholesky factor of ``var g + noise I`` (``None`` when not positive definite).

        The factor is Fortran-ordered (LAPACK works on ``K.T``, the same matrix), so
        no call below copies it.
        """
        K = g * var
        K.flat[:: self.n + 1] += noise
        L, info = scipy.linalg.lapack.dpotrf(K.T, lower=1, clean=1, overwrite_a=1)
        if info != 0:
            return None
        return L

    def _quadratic(self, L: np.ndarray) -> tuple[float, np.ndarray] | None:
        A, info = scipy.linalg.lapack.dtrtrs(L, self._rhs, lower=1)
        if info != 0:
            return None
        logdet = 2.0 * float(np.sum(np.log(np.diagonal(L))))
        a = A[:, 0]
        if self.mean == "zero":
            value = assemble(a @ a, None, None, logdet, self.n, mean=self.mean, objective=self.objective, xp=np)
        else:
            b = A[:, 1]
            value = assemble(a @ a, a @ b, b @ b, logdet, self.n, mean=self.mean, objective=self.objective, xp=np)
        return float(value), A

    # -- public -----------------------------------------------------------------------
    def value(self, x: ArrayLike) -> float:
        """Objective at ``x`` (``nan`` when the covariance is not positive definite)."""
        self.n_value += 1
        x = np.asarray(x, dtype=float)
        ls, var, noise = self._split(x)
        _, g = self._kernel(ls, var)
        L = self._factor(g, var, noise)
        if L is None:
            return np.nan
        out = self._quadratic(L)
        return np.nan if out is None else out[0]

    def value_and_grad(self, x: ArrayLike) -> tuple[float, np.ndarray]:
        """Objective and its gradient at ``x`` (NaNs when not positive definite)."""
        self.n_grad += 1
        x = np.asarray(x, dtype=float)
        fail = (np.nan, np.full(x.shape, np.nan))
        ls, var, noise = self._split(x)
        r2, g = self._kernel(ls, var)
        L = self._factor(g, var, noise)
        if L is None:
            return fail
        out = self._quadratic(L)
        if out is None:
            return fail
        value, A = out
        d = self.d
        a = A[:, 0]
        if self.mean == "zero":
            rhs = a
        else:
            b = A[:, 1]
            s = float(b @ b)
            rhs = np.column_stack([a - (a @ b) / s * b, b])
        # alpha = K^-1 (y - m 1) and c = K^-1 1 by back substitution with L^T
        sol, info = scipy.linalg.lapack.dtrtrs(L, rhs, lower=1, trans=1)
        if info != 0:
            return fail
        alpha = sol if self.mean == "zero" else sol[:, 0]
        # lower triangle of K^-1 (upper stays zero: L was cleaned)
        Wl, info = scipy.linalg.lapack.dpotri(L, lower=1, overwrite_c=1)
        if info != 0:
            return fail
        Wu = Wl.T  # C-contiguous view: the upper triangle of K^-1 (lower is zero)
        diagW = np.diagonal(Wu).copy()
        reml = self.mean == "constant" and self.objective == "reml"
        if reml:
            c = sol[:, 1]
            diagW -= c * c / s
        # <G, S> for a symmetric S with one triangle of K^-1 only:
        # <K^-1, S> = 2 <triu(K^-1), S> - <diag K^-1, diag S>
        diag_g = np.diagonal(g)
        H = g if self.kernel == "se" else kernel_profile_derivative(self.kernel, self.p, cast(np.ndarray, r2), g)
        F = Wu * H
        colsum_F = self._ones @ F
        # SE: F = triu(K^-1) o g already holds the sum that <K^-1, g> needs
        tri_W_g = float(colsum_F.sum()) if self.kernel == "se" else float(np.vdot(Wu, g))
        sum_W_g = 2.0 * tri_W_g - float(np.diagonal(Wu) @ diag_g)
        if reml:
            sum_W_g -= float(c @ (g @ c)) / s
        sum_aa_g = float(alpha @ (g @ alpha))
        G_Kf = 0.5 * var * (sum_aa_g - sum_W_g)
        trG = 0.5 * (float(alpha @ alpha) - float(diagW.sum()))
        grad = np.empty_like(x)
        grad[d] = G_Kf + (0.0 if self.noise else noise * trG)
        if self.noise:
            grad[d + 1] = noise * trG
        # lengthscales: sum_ij G_ij H_ij D^k_ij with H = var g'(r2), D^k the squared
        # k-th differences (zero on the diagonal), i.e. weighted_sqdiff with the weights
        # M = H o G, G = 1/2 (a a^T [+ c c^T / s]) - W. The rank-one parts need no n x n
        # array: for M = H o (u u^T), row sums are u o (H u) and M X = u o (H (u o X)).
        # The K^-1 part uses the upper triangle only: over ordered pairs, triu(K^-1)
        # counts each off-diagonal pair once where the symmetric K^-1 counts it twice,
        # which is the factor 1/2 of G (the diagonal, where D = 0, drops out).
        Xc, Xc2 = self._Xc, self._Xc2
        vecs = [(alpha, 0.5)] + ([(c, 0.5 / s)] if reml else [])
        sq = np.zeros(d)
        for u, w in vecs:
            Hu = H @ u
            HuX = H @ (u[:, None] * Xc)
            sq += w * (2.0 * Xc2.T @ (u * Hu) - 2.0 * np.sum(Xc * (u[:, None] * HuX), axis=0))
        FX1 = F @ self._Xc1  # [F Xc, row sums] in one pass
        sq -= Xc2.T @ FX1[:, d] + Xc2.T @ colsum_F - 2.0 * np.sum(Xc * FX1[:, :d], axis=0)
        if self.kernel == "se":
            sq *= -0.5  # H was g; g' = -g / 2
        grad[:d] = -2.0 * var * sq / ls**2
        return value, grad
