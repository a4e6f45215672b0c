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

import numpy as np
import scipy.linalg

LOG_2PI = float(np.log(2.0 * np.pi))

MEANS = ("zero", "constant")
OBJECTIVES = ("ml", "reml")


def cholesky(A, xp):
    """Lower Cholesky factor (NumPy raises on failure; PyTensor returns NaN)."""
    if xp is np:
        return scipy.linalg.cholesky(A, lower=True)
    from pytensor.tensor.linalg import cholesky as pt_cholesky

    return pt_cholesky(A, lower=True)


def solve_lower(L, b, xp):
    r""":math:`L^{-1} b` for lower-triangular ``L``."""
    if xp is np:
        return scipy.linalg.solve_triangular(L, b, lower=True)
    from pytensor.tensor.linalg import solve_triangular

    return solve_triangular(L, b, lower=True)


def assemble(qyy, qy1, q11, logdet, n, *, mean, objective, xp):
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


def exact_objective(K, y, *, mean, objective, xp):
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


def vfe_objective(Kmm, Kmn, variance, noise, y, *, mean, objective, xp):
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


def _gaussian_objective_and_grad(K, y, mean, objective):
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

    def __new__(cls, mean: str, objective: str):
        key = (mean, objective)
        if key not in cls._ops:
            cls._ops[key] = _make_op(mean, objective)
        return cls._ops[key]


def _make_op(mean: str, objective: str):
    import pytensor.tensor as pt
    from pytensor.gradient import DisconnectedType, grad_not_implemented
    from pytensor.graph.basic import Apply
    from pytensor.graph.op import Op

    class _GaussianObjectiveOp(Op):
        """``(K, y) -> (objective, dK, dy)``: value and closed-form gradients, one Cholesky."""

        __props__ = ("mean", "objective")

        def __init__(self, mean, objective):
            self.mean = mean
            self.objective = objective

        def make_node(self, K, y):
            K = pt.as_tensor_variable(K)
            y = pt.as_tensor_variable(y)
            return Apply(self, [K, y], [pt.dscalar(), pt.dmatrix(), pt.dvector()])

        def perform(self, node, inputs, outputs):
            K, y = inputs
            value, gK, gy = _gaussian_objective_and_grad(
                np.asarray(K, float), np.asarray(y, float), self.mean, self.objective
            )
            outputs[0][0] = np.asarray(value, dtype=float)
            outputs[1][0] = gK
            outputs[2][0] = gy

        def pullback(self, inputs, outputs, cotangents):
            g_value, g_K, g_y = cotangents
            for g in (g_K, g_y):
                if not isinstance(g.type, DisconnectedType):
                    # second derivatives (e.g. compile_d2logp) are not provided
                    return [grad_not_implemented(self, i, inputs[i]) for i in range(2)]
            return [g_value * outputs[1], g_value * outputs[2]]

        def infer_shape(self, node, shapes):
            return [(), shapes[0], shapes[1]]

    return _GaussianObjectiveOp(mean, objective)
