r"""Closed-form leave-one-out and conformal building blocks of the sparse (VFE) GP, in :math:`O(nm^2)`.

**The sparse posterior as kriging.** With fixed hyperparameters and inducing
inputs :math:`Z`, the VFE predictive distribution (Titsias 2009) at :math:`x` is
that of universal kriging of :math:`Y_x = f(x) + \varepsilon` from the
observations :math:`y`, under the covariances

.. math::

    \operatorname{cov}(y) = \Sigma = Q_{nn} + \sigma^2 I,\qquad
    \operatorname{cov}(y, Y_x) = Q_{nx},\qquad
    \operatorname{var}(Y_x) = \sigma_f^2 + \sigma^2 = \underbrace{Q_{xx} + \sigma^2}_{\text{as a training point}}
        + \underbrace{(\sigma_f^2 - Q_{xx})}_{\delta(x)},

:math:`Q_{ab} = K_{am}K_{mm}^{-1}K_{mb}`: the part :math:`\delta(x)` of the
prior variance that the inducing inputs do not explain is independent of
everything else. (The push-through identity
:math:`\Sigma^{-1}K_{nm}K_{mm}^{-1} = K_{nm}C^{-1}`, :math:`C = \sigma^2K_{mm} + K_{mn}K_{nm}`,
turns the kriging weights :math:`\Sigma^{-1}Q_{nx}` into the sparse predictor's
:math:`K_{nm}C^{-1}k_m(x)`.)

**Everything through the m x m system.** With
:math:`L_mL_m^\top = K_{mm}` (+ jitter), :math:`A = L_m^{-1}K_{mn}/\sigma`,
:math:`B = I + AA^\top = L_BL_B^\top`, :math:`T = L_B^{-1}A` (column :math:`t_i`),
:math:`c_a = Ty`, :math:`c_b = T1`, Woodbury gives
:math:`\Sigma^{-1} = \sigma^{-2}(I - T^\top T)`, so for every training point

.. math::

    h_i = t_i^\top t_i,\qquad
    (\Sigma^{-1})_{ii} = \frac{1 - h_i}{\sigma^2},\qquad
    (\Sigma^{-1}y)_i = \frac{y_i - t_i^\top c_a}{\sigma^2},\qquad
    s_i = (\Sigma^{-1}1)_i = \frac{1 - t_i^\top c_b}{\sigma^2},

with :math:`q_{11} = 1^\top\Sigma^{-1}1 = (n - c_b^\top c_b)/\sigma^2`,
:math:`q_{y1} = (1^\top y - c_a^\top c_b)/\sigma^2`, :math:`\hat m = q_{y1}/q_{11}`,
:math:`\delta_i = \sigma_f^2 - Q_{ii} = \sigma_f^2 - \sigma^2 a_i^\top a_i` —
:math:`O(m^2)` per point, one pass over the rows.

**Leave-one-out.** Dropping point :math:`i` is the rank-one downdate
:math:`C_{-i} = C - k_ik_i^\top` (Sherman–Morrison:
:math:`k_i^\top C_{-i}^{-1} = k_i^\top C^{-1}/(1 - h_i)`), which is Dubrule's
formula for :math:`\Sigma` (the sparse system restricted to the other points is
:math:`\Sigma_{-i,-i}` itself). With the constant mean re-estimated by GLS in the
fold, :math:`\Sigma^{-1}` becomes the kriging matrix
:math:`\mathcal Q^{-1} = \Sigma^{-1} - \Sigma^{-1}11^\top\Sigma^{-1}/q_{11}`:

.. math::

    \alpha_i = (\mathcal Q^{-1}y)_i = (\Sigma^{-1}y)_i - \hat m s_i,\qquad
    \mathcal Q^{-1}_{ii} = \frac{1 - h_i}{\sigma^2} - \frac{s_i^2}{q_{11}},

.. math::

    y_i - \mu_{-i}(x_i) = \frac{\alpha_i}{\mathcal Q^{-1}_{ii}},\qquad
    \sigma^2_{-i}(x_i) = \frac{1}{\mathcal Q^{-1}_{ii}} + \delta_i

(zero mean: drop the :math:`s_i` terms; :math:`\sigma^2_{-i}` includes the noise).
Equal to refitting the sparse posterior without point :math:`i` (same θ, same
:math:`Z`): ``tests/bases/gp/test_sparse.py`` checks it against refits to 1e-8.

**Test points** (J+GP, FCP-GP). With :math:`t_1 = L_m^{-1}k_m(x)`,
:math:`t_2 = L_B^{-1}t_1`, the kriging weights, mean and variance are

.. math::

    \lambda_0(x) = T^\top t_2/\sigma,\qquad
    \lambda(x) = \lambda_0 + s\,\frac{1 - c_b^\top t_2/\sigma}{q_{11}},\qquad
    \mu(x) = \hat m + t_2^\top(c_a - \hat m c_b)/\sigma,

.. math::

    v(x) = \sigma_f^2 - t_1^\top t_1 + t_2^\top t_2 + \sigma^2
        + \frac{(1 - c_b^\top t_2/\sigma)^2}{q_{11}},\qquad
    \delta(x) = \sigma_f^2 - t_1^\top t_1,

:math:`O(nm)` per test point for :math:`\lambda` (keeping :math:`T`, :math:`nm`
numbers). The rank-one J+GP downdate :math:`\mu_{-i}(x) = \mu(x) - \lambda_i e_i`,
:math:`\sigma^2_{-i}(x) = v(x) + \lambda_i^2/\mathcal Q^{-1}_{ii}` then holds as
for the exact GP. For the full-conformal GP the test point enters the
training set as a *training* point, with variance :math:`Q_{xx} + \sigma^2`: the
bordered update of :math:`\mathcal Q^{-1}` uses :math:`v(x) - \delta(x)`, and
the augmented leave-one-out variances are :math:`1/d_i + \delta_i` and
:math:`v(x)` (:func:`calibprob.calibrators.conformal.gp.full_conformal_gp_bounds` with
``extra``).

References
----------
Titsias, M. (2009). Variational learning of inducing variables in sparse
Gaussian processes. AISTATS.
Dubrule, O. (1983). Cross validation of kriging in a unique neighborhood.
Math. Geology 15, 687–699.
Quiñonero-Candela, J. and Rasmussen, C. E. (2005). A unifying view of sparse
approximate Gaussian process regression. JMLR 6 (the DTC/VFE predictive).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg

from calibprob.bases.gp._sparse_numerics import chunk_rows

if TYPE_CHECKING:  # sparse.py imports this module
    from calibprob.bases.gp.sparse import SparseGaussianProcessRegressor, _StateView

__all__ = ["SparseKrigingSystem", "sparse_kriging_system", "sparse_kriging_predict"]


@dataclass(frozen=True)
class SparseKrigingSystem:
    """The sparse GP's kriging system at fixed θ and inducing inputs (see the module docstring).

    Attributes
    ----------
    y : ndarray, shape (n,)
        Observations minus the known offset.
    qdiag, alpha, extra : ndarray, shape (n,)
        :math:`\\mathcal Q^{-1}_{ii}`, :math:`(\\mathcal Q^{-1}y)_i` and :math:`\\delta_i`.
    s : ndarray, shape (n,) or None
        :math:`\\Sigma^{-1}1` (GLS mean only).
    T : ndarray, shape (m, n) or None
        :math:`L_B^{-1}A` (kept for test-point weights).
    Lm, LB : ndarray, shape (m, m)
    ca, cb : ndarray, shape (m,)
    mhat, q11, variance, noise : float
    gls : bool
    """

    y: np.ndarray
    qdiag: np.ndarray
    alpha: np.ndarray
    extra: np.ndarray
    s: np.ndarray | None
    T: np.ndarray | None
    Lm: np.ndarray
    LB: np.ndarray
    ca: np.ndarray
    cb: np.ndarray | None
    mhat: float
    q11: float
    variance: float
    noise: float
    gls: bool

    @property
    def n(self) -> int:
        """Number of training points."""
        return self.y.size

    @property
    def loo_residual(self) -> np.ndarray:
        r""":math:`e_i = y_i - \mu_{-i}(x_i)`, shape (n,)."""
        return self.alpha / self.qdiag

    @property
    def loo_std(self) -> np.ndarray:
        r""":math:`\sigma_{-i}(x_i)` (noise included), shape (n,)."""
        return np.sqrt(1.0 / self.qdiag + self.extra)


def _solve(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    return scipy.linalg.solve_triangular(L, B, lower=True, check_finite=False)


def sparse_kriging_system(
    gp: SparseGaussianProcessRegressor | _StateView, *, offset: float, gls: bool, keep_T: bool = True
) -> SparseKrigingSystem:
    """The kriging system of a fitted :class:`~calibprob.bases.gp.SparseGaussianProcessRegressor` at ``theta_``.

    One pass over the training rows in blocks: :math:`O(nm^2)` time, memory one
    block plus :math:`T` (:math:`nm` numbers) when ``keep_T``.

    Parameters
    ----------
    gp : fitted SparseGaussianProcessRegressor
    offset : float
        Known mean subtracted from ``y`` (the fitted constant ``mean_`` or 0).
    gls : bool
        Re-estimate a constant mean by GLS (needs ``gp.mean == "constant"``).
    keep_T : bool, default True

    Returns
    -------
    SparseKrigingSystem
    """
    state, th = gp._state, gp._state["theta"]
    X, Z = gp.X_train_, gp.inducing_points_
    y = np.asarray(gp.y_train_, float) - offset
    var, noise = float(th["variance"]), float(th["noise"])
    sn = np.sqrt(noise)
    Lm, LB = state["Lm"], state["LB"]
    cb = state["cb"]
    # T (y - offset) = sigma c + (m - offset) c_b: the fitted state's c is T (y - m)/sigma
    ca = sn * state["c"] + (0.0 if cb is None else (state["m"] - offset) * cb)
    n, m = y.size, Z.shape[0]
    h, tca, tcb, qa = (np.empty(n) for _ in range(4))
    T = np.empty((m, n)) if keep_T else None
    step = chunk_rows(m)
    for start in range(0, n, step):
        sl = slice(start, start + step)
        A = _solve(Lm, gp._k(Z, X[sl], th)) / sn
        Tc = _solve(LB, A)
        qa[sl] = np.einsum("ij,ij->j", A, A)
        h[sl] = np.einsum("ij,ij->j", Tc, Tc)
        tca[sl] = ca @ Tc
        if cb is not None:
            tcb[sl] = cb @ Tc
        if T is not None:
            T[:, sl] = Tc
    sig_y = (y - tca) / noise
    qdiag = (1.0 - h) / noise
    s, mhat, q11 = None, 0.0, float("nan")
    if gls:
        s = (1.0 - tcb) / noise
        q11 = float((n - cb @ cb) / noise)
        mhat = float((y.sum() - ca @ cb) / noise / q11)
        sig_y = sig_y - mhat * s
        qdiag = qdiag - s * s / q11
    extra = np.maximum(var - noise * qa, 0.0)
    return SparseKrigingSystem(
        y, qdiag, sig_y, extra, s, T, Lm, LB, ca, cb if gls else None, mhat, q11, var, noise, gls
    )


def sparse_kriging_predict(
    system: SparseKrigingSystem, Kmx: np.ndarray, *, test_major: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    r"""Kriging weights, mean, observation variance and :math:`\delta(x)` at test points.

    The weights are one BLAS product :math:`\Lambda = T^\top t_2/\sigma`
    (:math:`2nmc` flops for ``c`` test points, the bulk of the work).

    Parameters
    ----------
    system : SparseKrigingSystem
        Built with ``keep_T=True``.
    Kmx : ndarray, shape (m, c)
        :math:`k(Z, x)` for ``c`` test points.
    test_major : bool, default False
        Return the weights as ``(c, n)`` (one contiguous row per test point,
        :math:`(t_2/\sigma)^\top T`), the layout in which the jackknife+ order
        statistics over the ``n`` training points run along contiguous memory.
        The same numbers up to the rounding of the product's summation order.

    Returns
    -------
    lam : ndarray, shape (n, c), or (c, n) with ``test_major``
    mu : ndarray, shape (c,)
        On the scale of ``system.y``.
    var : ndarray, shape (c,)
        :math:`v(x)`, noise included.
    extra : ndarray, shape (c,)
        :math:`\delta(x) = \sigma_f^2 - Q_{xx}`.
    """
    if system.T is None:
        raise ValueError("sparse_kriging_predict needs a system built with keep_T=True.")
    sn = np.sqrt(system.noise)
    t1 = _solve(system.Lm, Kmx)
    t2 = _solve(system.LB, t1)
    if test_major:
        lam = t2.T @ system.T
        lam /= sn
    else:
        lam = system.T.T @ t2 / sn
    q = np.einsum("ij,ij->j", t1, t1)
    extra = np.maximum(system.variance - q, 0.0)
    var = extra + np.einsum("ij,ij->j", t2, t2) + system.noise
    if system.gls and system.cb is not None and system.s is not None:
        u = 1.0 - (system.cb @ t2) / sn
        if test_major:
            lam += (u / system.q11)[:, None] * system.s
        else:
            lam += np.outer(system.s, u / system.q11)
        var = var + u * u / system.q11
        mu = system.mhat + t2.T @ (system.ca - system.mhat * system.cb) / sn
    else:
        mu = t2.T @ system.ca / sn
    return lam, mu, np.maximum(var, np.finfo(float).tiny), extra
