r"""Closed-form leave-one-out (LOO) predictions of a Gaussian process.

With fixed hyperparameters, the LOO prediction of observation :math:`i` from
the other :math:`n-1` needs no refit (Dubrule 1983). For a zero-mean GP with
observation covariance :math:`K` (kernel plus noise or nugget):

.. math::

    y_i - \mu_{-i} = \frac{(K^{-1} y)_i}{(K^{-1})_{ii}},\qquad
    \sigma^2_{-i} = \frac{1}{(K^{-1})_{ii}}.

With an unknown constant mean re-estimated by generalised least squares in
every fold (universal kriging), :math:`K^{-1}` is replaced by

.. math::

    Q^{-1} = K^{-1} - K^{-1}P\,(P^\top K^{-1} P)^{-1} P^\top K^{-1},\qquad P = 1,

and :math:`\sigma^2_{-i}` then includes the variance of the mean estimate.
:math:`\sigma^2_{-i}` is the predictive variance of the *observation*
:math:`y_i` (noise included); subtract the noise variance for the latent
function.

References
----------
Dubrule, O. (1983). Cross validation of kriging in a unique neighborhood.
Journal of the International Association for Mathematical Geology 15, 687–699.
Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
prediction: methods and comparative analysis (J+GP scores, §3).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import linalg

from calibprob._core.validation import check_array, check_choice, check_same_length

__all__ = [
    "loo_from_kernel",
    "loo_from_factor",
    "KrigingSystem",
    "kriging_system",
    "kriging_predict",
    "loo_at_points",
]


def loo_from_kernel(K: ArrayLike, y: ArrayLike, mean: str = "zero") -> tuple[np.ndarray, np.ndarray]:
    r"""Leave-one-out means and standard deviations from the covariance matrix.

    Parameters
    ----------
    K : array_like, shape (n, n)
        Covariance of the observations, symmetric positive definite (kernel
        matrix plus noise variance or nugget on the diagonal).
    y : array_like, shape (n,)
        Observations.
    mean : {"zero", "constant"}, default "zero"
        ``"constant"``: an unknown constant mean, re-estimated by GLS in every
        fold (the :math:`Q^{-1}` form).

    Returns
    -------
    mu_loo : ndarray, shape (n,)
        :math:`\mu_{-i}`, the prediction of :math:`y_i` from the others.
    sigma_loo : ndarray, shape (n,)
        :math:`\sigma_{-i}`, its predictive standard deviation (noise included).

    References
    ----------
    Dubrule, O. (1983). Cross validation of kriging in a unique neighborhood.
    Mathematical Geology 15, 687–699.

    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, §3 (J+GP scores).

    Examples
    --------
    >>> import numpy as np
    >>> K = np.array([[2.0, 0.5], [0.5, 2.0]])
    >>> mu, sd = loo_from_kernel(K, [1.0, -1.0])
    >>> np.allclose(mu, [-0.25, 0.25]), np.allclose(sd**2, 2.0 - 0.25 / 2.0)
    (True, True)
    """
    K = check_array(K, "K", ndim=2)
    y = check_array(y, "y", ndim=1)
    check_choice(mean, "mean", ("zero", "constant"))
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be square; got shape {K.shape}. Pass the n x n covariance.")
    check_same_length(K=K, y=y)
    n = y.shape[0]
    if n < (2 if mean == "zero" else 3):
        raise ValueError(
            f"leave-one-out needs at least {2 if mean == 'zero' else 3} observations with mean={mean!r}; got {n}."
        )
    P = np.ones((n, 1)) if mean == "constant" else None
    system = kriging_system(K, y, P)
    return y - system.loo_residual, system.loo_std


def loo_from_factor(L: ArrayLike, y: ArrayLike, mean: str = "zero") -> tuple[np.ndarray, np.ndarray]:
    r""":func:`loo_from_kernel` from a lower Cholesky factor :math:`L L^\top = K` computed elsewhere.

    A fitted GP hands over the factor of its fit (one factorisation per θ): :math:`L^{-1}`,
    :math:`\operatorname{diag} Q^{-1}` and :math:`Q^{-1}y` follow as in :func:`loo_from_kernel`,
    whose Cholesky of the same ``K`` gives the same factor (the same LAPACK ``potrf``), hence the
    same numbers.

    Parameters
    ----------
    L : array_like, shape (n, n)
        Lower Cholesky factor of the observations' covariance; its upper triangle is not read.
    y : array_like, shape (n,)
    mean : {"zero", "constant"}, default "zero"

    Returns
    -------
    mu_loo, sigma_loo : ndarray, shape (n,)

    References
    ----------
    Dubrule, O. (1983). Cross validation of kriging in a unique neighborhood.
    Mathematical Geology 15, 687–699.
    """
    L = check_array(L, "L", ndim=2)
    y = check_array(y, "y", ndim=1)
    check_choice(mean, "mean", ("zero", "constant"))
    if L.shape != (y.size, y.size):
        raise ValueError(f"L must have shape ({y.size}, {y.size}) to match y; got {L.shape}. Pass the n x n factor.")
    n = y.size
    if n < (2 if mean == "zero" else 3):
        raise ValueError(
            f"leave-one-out needs at least {2 if mean == 'zero' else 3} observations with mean={mean!r}; got {n}."
        )
    system = _system_from_factor(L, y, np.ones((n, 1)) if mean == "constant" else None)
    return y - system.loo_residual, system.loo_std


@dataclass(frozen=True)
class KrigingSystem:
    """Precomputed factors of a GP for O(n²)-per-point conformal prediction.

    Attributes
    ----------
    L : ndarray, shape (n, n)
        Lower Cholesky factor of ``K`` (noise included).
    y : ndarray, shape (n,)
    Pt : ndarray, shape (n, q) or None
        ``L^{-1} P`` (None for a known zero mean).
    W : ndarray, shape (q, q) or None
        ``(P^T K^{-1} P)^{-1}``.
    qdiag : ndarray, shape (n,)
        ``diag(Q^{-1})``.
    alpha : ndarray, shape (n,)
        ``Q^{-1} y``.
    """

    L: np.ndarray
    y: np.ndarray
    Pt: np.ndarray | None
    W: np.ndarray | None
    qdiag: np.ndarray
    alpha: np.ndarray

    @property
    def n(self) -> int:
        """Number of training points."""
        return self.y.size

    @property
    def loo_residual(self) -> np.ndarray:
        r""":math:`e_i = y_i - \mu_{-i}(x_i) = (Q^{-1}y)_i/(Q^{-1})_{ii}`, shape (n,)."""
        return self.alpha / self.qdiag

    @property
    def loo_std(self) -> np.ndarray:
        r""":math:`\sigma_{-i}(x_i) = (Q^{-1})_{ii}^{-1/2}` (observation scale), shape (n,)."""
        return 1.0 / np.sqrt(self.qdiag)


def kriging_system(K: ArrayLike, y: ArrayLike, P: ArrayLike | None = None) -> KrigingSystem:
    r"""Factorise a GP once: Cholesky of ``K``, ``diag(Q^{-1})`` and ``Q^{-1} y``.

    Parameters
    ----------
    K : array_like, shape (n, n)
        Covariance of the observations (kernel plus noise/nugget on the diagonal).
    y : array_like, shape (n,)
    P : array_like, shape (n, q), optional
        Basis of an unknown mean re-estimated by generalised least squares
        (``np.ones((n, 1))`` for the constant mean); ``None`` for a known zero
        mean (subtract a known constant from ``y`` first).

    Returns
    -------
    KrigingSystem

    Raises
    ------
    ValueError
        ``K`` not positive definite (add a nugget) or ``P`` rank deficient.
    """
    K = np.asarray(K, float)
    y = np.asarray(y, float)
    n = y.size
    if K.shape != (n, n):
        raise ValueError(f"K must have shape ({n}, {n}) to match y; got {K.shape}.")
    try:
        L = linalg.cholesky(K, lower=True, check_finite=True)
    except linalg.LinAlgError as err:
        raise ValueError(
            "K is not positive definite (Cholesky failed). For interpolation add a small nugget "
            "(e.g. 1e-8 x variance) to the diagonal."
        ) from err
    return _system_from_factor(L, y, P)


def _system_from_factor(L: np.ndarray, y: np.ndarray, P: ArrayLike | None = None) -> KrigingSystem:
    """:func:`kriging_system` from a lower Cholesky factor of ``K`` (its upper triangle ignored).

    Lets a fitted GP hand over the factor it already computed (one Cholesky per θ).
    :math:`L^{-1}` comes from LAPACK ``trtri`` (half the work of solving against the
    identity: measured 0.30 s against 0.63 s at n = 2000).
    """
    n = y.size
    Linv, info = linalg.lapack.dtrtri(L, lower=1)
    if info != 0:
        raise ValueError("K is not positive definite (singular Cholesky factor); add a nugget.")
    Linv = np.tril(Linv)  # trtri leaves the (unreferenced) upper triangle as it was
    L = np.tril(L)
    kinv_diag = np.einsum("ij,ij->j", Linv, Linv)
    kinv_y = Linv.T @ (Linv @ y)
    if P is None:
        return KrigingSystem(L, y, None, None, kinv_diag, kinv_y)
    P = np.asarray(P, float).reshape(n, -1)
    Pt = Linv @ P
    try:
        W = linalg.inv(Pt.T @ Pt)
    except linalg.LinAlgError as err:
        raise ValueError(
            "the mean basis P is rank deficient: P^T K^{-1} P is singular. Drop collinear columns of P."
        ) from err
    KiP = Linv.T @ Pt  # K^{-1} P
    qdiag = kinv_diag - np.einsum("ij,jk,ik->i", KiP, W, KiP)
    alpha = kinv_y - KiP @ (W @ (KiP.T @ y))
    return KrigingSystem(L, y, Pt, W, qdiag, alpha)


def kriging_predict(
    system: KrigingSystem, K_cross: ArrayLike, k_diag: ArrayLike, P_test: ArrayLike | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Kriging weights, mean and variance at test points (O(n²) per point).

    Parameters
    ----------
    system : KrigingSystem
    K_cross : array_like, shape (n, m)
        :math:`k(x_i, x_j^*)`.
    k_diag : array_like, shape (m,)
        Prior variance of the *observation* at each test point,
        :math:`k(x, x) + \tau^2` (use :math:`k(x,x)` alone for the latent value).
    P_test : array_like, shape (m, q), optional
        Mean basis at the test points (``np.ones((m, 1))`` for a constant
        mean); required iff the system has one.

    Returns
    -------
    lam : ndarray, shape (n, m)
        Kriging weights :math:`\lambda(x_j)`.
    mu : ndarray, shape (m,)
    var : ndarray, shape (m,)
        :math:`v(x_j)`, floored at the smallest positive float.
    """
    L = system.L
    Kx = np.asarray(K_cross, float)
    V = linalg.solve_triangular(L, Kx, lower=True, check_finite=False)
    var = np.asarray(k_diag, float) - np.einsum("ij,ij->j", V, V)
    if system.Pt is not None:
        if P_test is None:
            raise ValueError(
                "P_test is required: the kriging system has an unknown mean basis P. Pass P_test, the basis at the test points."
            )
        Pm = np.asarray(P_test, float).reshape(Kx.shape[1], -1)
        u = Pm.T - system.Pt.T @ V  # (q, m)
        Wu = system.W @ u
        var = var + np.einsum("ij,ij->j", u, Wu)
        V = V + system.Pt @ Wu
    lam = linalg.solve_triangular(L.T, V, lower=False, check_finite=False)
    mu = lam.T @ system.y
    return lam, mu, np.maximum(var, np.finfo(float).tiny)


def loo_at_points(
    system: KrigingSystem, lam: np.ndarray, mu: np.ndarray, var: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    r"""Leave-one-out means and standard deviations at test points, no refits.

    .. math::

        \mu_{-i}(x) = \mu(x) - \lambda_i(x) e_i, \qquad
        \sigma^2_{-i}(x) = v(x) + \lambda_i(x)^2 / (Q^{-1})_{ii}.

    Parameters
    ----------
    system : KrigingSystem
    lam, mu, var : outputs of :func:`kriging_predict`

    Returns
    -------
    mu_loo, sd_loo : ndarray, shape (n, m)
    """
    e = system.loo_residual
    mu_loo = mu[None, :] - lam * e[:, None]
    sd_loo = np.sqrt(var[None, :] + lam * lam / system.qdiag[:, None])
    return mu_loo, sd_loo
