r"""Stationary ARD kernels written once for NumPy and PyTensor.

Every function takes the array namespace as ``xp`` (``numpy`` or
``pytensor.tensor``), so the same code builds the covariance matrix that the
NumPy predictor factorises and the symbolic one whose marginal likelihood a
PyMC model differentiates. Only operations that exist with identical meaning
in both namespaces are used (``exp``, ``sqrt``, ``maximum``, ``sum``, ``@``,
broadcasting).

Notes
-----
**Squared exponential (ARD).**

.. math::

    k(x, x') = \sigma^2 \exp\!\left(-\tfrac12 r^2\right), \qquad
    r^2 = \sum_{j=1}^d \frac{(x_j - x'_j)^2}{\ell_j^2}.

**Matérn** with half-integer smoothness :math:`\nu = p + \tfrac12`, any integer
:math:`p \ge 0` (Rasmussen & Williams 2006, eq. 4.16; Stein 1999 §2.7):

.. math::

    k(r) = \sigma^2 \exp\!\left(-\sqrt{2\nu}\, r\right)
           \frac{p!}{(2p)!} \sum_{i=0}^{p} \frac{(p+i)!}{i!\,(p-i)!}
           \left(2\sqrt{2\nu}\, r\right)^{p-i},

with the same ARD-scaled distance :math:`r`. ``p = 0, 1, 2`` give the
exponential, Matérn-3/2 and Matérn-5/2 kernels (PyMC's ``Matern12``,
``Matern32``, ``Matern52`` with ``ls = ℓ``; PyMC's ``Exponential`` uses
:math:`\exp(-r/2)`, i.e. ``ls = ℓ/2``). The polynomial is evaluated by Horner's
rule in :math:`u = \sqrt{2\nu}\,r`.

**Safe square root.** :math:`\sqrt{r^2}` has an infinite derivative at :math:`r^2 = 0`. The scaled
squared distance is floored at ``1e-36`` before the square root, and the
diagonal of a symmetric ``K(X, X)`` is set to exactly zero distance, so the
gradient with respect to the lengthscales is finite (zero) at coincident
points while values change by less than ``1e-18``.

References
----------
Rasmussen, C. E. and Williams, C. K. I. (2006). *Gaussian Processes for
Machine Learning*, MIT Press, §4.2.
Stein, M. L. (1999). *Interpolation of Spatial Data*, Springer, §2.7.
Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
prediction (Matérn with :math:`\nu = p + 1/2`, eq. 15).
"""

from __future__ import annotations

from math import factorial, sqrt
from types import ModuleType
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "KERNELS",
    "scaled_sqdist",
    "squared_exponential",
    "matern",
    "matern_coefficients",
    "kernel",
    "kernel_diag",
]

KERNELS = ("se", "matern")

# Floor for r^2 before the square root: keeps d sqrt / d r^2 finite at r = 0.
_R2_FLOOR = 1e-36

#: A NumPy array or a PyTensor variable: the kernels take either, by their ``xp``.
Tensor: TypeAlias = Any


def scaled_sqdist(X1: Tensor, X2: Tensor | None, lengthscale: Tensor, *, xp: ModuleType = np) -> Tensor:
    r"""Squared ARD distance :math:`r^2_{ij} = \sum_k (X1_{ik} - X2_{jk})^2 / \ell_k^2`.

    Parameters
    ----------
    X1 : array, shape (n1, d)
    X2 : array, shape (n2, d) or None
        ``None`` means ``X2 = X1``; the diagonal is then exactly zero.
    lengthscale : array, shape (d,) or scalar
    xp : module
        ``numpy`` or ``pytensor.tensor``.

    Returns
    -------
    array, shape (n1, n2)
        Non-negative (negative round-off is clipped to zero).
    """
    if xp is np:
        return _scaled_sqdist_np(X1, X2, lengthscale)
    A = X1 / lengthscale
    a2 = xp.sum(A * A, axis=1)
    if X2 is None:
        d2 = a2[:, None] + a2[None, :] - 2.0 * (A @ A.T)
        n = X1.shape[0]
        # exact zero self-distance (the expanded form leaves ~1e-16 round-off)
        d2 = d2 * (1.0 - xp.eye(n))
    else:
        B = X2 / lengthscale
        b2 = xp.sum(B * B, axis=1)
        d2 = a2[:, None] + b2[None, :] - 2.0 * (A @ B.T)
    return xp.maximum(d2, 0.0)


def squared_exponential(
    X1: Tensor, X2: Tensor | None, lengthscale: Tensor, variance: Tensor, *, xp: ModuleType = np
) -> Tensor:
    r"""ARD squared-exponential covariance :math:`\sigma^2 \exp(-r^2/2)`.

    Parameters
    ----------
    X1 : array, shape (n1, d)
    X2 : array, shape (n2, d) or None
    lengthscale : array, shape (d,)
    variance : scalar
        :math:`\sigma^2`.
    xp : module
        ``numpy`` or ``pytensor.tensor``.

    Returns
    -------
    array, shape (n1, n2)

    References
    ----------
    Rasmussen, C. E. and Williams, C. K. I. (2006). Gaussian Processes for
    Machine Learning. MIT Press, eq. (4.9) (ARD form §5.1).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.bases.gp import squared_exponential
    >>> X = np.array([[0.0], [1.0]])
    >>> squared_exponential(X, None, np.array([1.0]), 1.0).round(4).tolist()   # exp(-1/2)
    [[1.0, 0.6065], [0.6065, 1.0]]
    """
    if xp is np:
        out = _scaled_sqdist_np(X1, X2, lengthscale)
        out *= -0.5
        np.exp(out, out=out)
        out *= variance
        return out
    return variance * xp.exp(-0.5 * scaled_sqdist(X1, X2, lengthscale, xp=xp))


def matern_coefficients(p: int) -> np.ndarray:
    r"""Coefficients :math:`a_j` of :math:`\sum_j a_j u^j` in the half-integer Matérn.

    With :math:`u = \sqrt{2\nu}\, r` the bracket of the closed form is
    :math:`\frac{p!}{(2p)!}\sum_{i=0}^p \frac{(p+i)!}{i!(p-i)!}(2u)^{p-i}
    = \sum_{j=0}^{p} a_j u^j`, so :math:`a_j = 2^j\, p!\,(2p-j)! / ((2p)!\, (p-j)!\, j!)`
    (:math:`j = p - i`); :math:`a_0 = 1` always, so :math:`k(0) = \sigma^2`.

    Parameters
    ----------
    p : int
        :math:`\nu = p + 1/2`, ``p >= 0``.

    Returns
    -------
    numpy.ndarray, shape (p + 1,)
        ``a[j]`` multiplies ``u**j``.

    References
    ----------
    Rasmussen, C. E. and Williams, C. K. I. (2006). Gaussian Processes for
    Machine Learning. MIT Press, eq. (4.16).

    Examples
    --------
    >>> from calibprob.bases.gp import matern_coefficients
    >>> matern_coefficients(2).round(6).tolist()   # Matérn-5/2: 1 + u + u^2/3
    [1.0, 1.0, 0.333333]
    """
    p = _check_p(p)
    return np.array(
        [
            2.0**j * factorial(p) * factorial(2 * p - j) / (factorial(2 * p) * factorial(p - j) * factorial(j))
            for j in range(p + 1)
        ]
    )


def matern(
    X1: Tensor, X2: Tensor | None, lengthscale: Tensor, variance: Tensor, p: int = 2, *, xp: ModuleType = np
) -> Tensor:
    r"""ARD Matérn covariance with :math:`\nu = p + 1/2` for any integer ``p >= 0``.

    Parameters
    ----------
    X1 : array, shape (n1, d)
    X2 : array, shape (n2, d) or None
    lengthscale : array, shape (d,)
    variance : scalar
    p : int, default 2
        Smoothness: ``p = 1`` is Matérn-3/2, ``p = 2`` Matérn-5/2.
    xp : module
        ``numpy`` or ``pytensor.tensor``.

    Returns
    -------
    array, shape (n1, n2)
        :math:`\sigma^2 e^{-u} \sum_j a_j u^j` with :math:`u = \sqrt{2p + 1}\, r`.

    References
    ----------
    Rasmussen, C. E. and Williams, C. K. I. (2006). Gaussian Processes for
    Machine Learning. MIT Press, eq. (4.16).

    Stein, M. L. (1999). Interpolation of Spatial Data: Some Theory for Kriging.
    Springer, §2.7.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.bases.gp import matern
    >>> X = np.array([[0.0], [1.0]])
    >>> matern(X, None, np.array([1.0]), 1.0, p=0).round(4).tolist()   # p = 0: exponential, exp(-1)
    [[1.0, 0.3679], [0.3679, 1.0]]
    """
    coef = matern_coefficients(p)
    if xp is np:
        return _matern_np(X1, X2, lengthscale, variance, p, coef)
    d2 = scaled_sqdist(X1, X2, lengthscale, xp=xp)
    r = xp.sqrt(xp.maximum(d2, _R2_FLOOR))
    u = sqrt(2.0 * p + 1.0) * r
    # Horner: ((a_p u + a_{p-1}) u + ...) u + a_0
    poly = coef[p] * xp.ones_like(u) if p == 0 else coef[p] * u + coef[p - 1]
    for j in range(p - 2, -1, -1):
        poly = poly * u + coef[j]
    return variance * poly * xp.exp(-u)


def _scaled_sqdist_np(X1: ArrayLike, X2: ArrayLike | None, lengthscale: ArrayLike) -> np.ndarray:
    """:func:`scaled_sqdist` for NumPy with two ``(n1, n2)`` arrays at most.

    Bitwise equal to the expression of the generic path, ``(a2_i + b2_j) - 2 (A B^T)_ij``
    (the same roundings in the same order), but built in place: a large exact GP's
    memory peak is these few ``n x n`` arrays (a 12 000-row covariance is 1.15 GB).
    """
    A = np.asarray(X1, dtype=float) / lengthscale
    a2 = np.sum(A * A, axis=1)
    if X2 is None:
        B, b2 = A, a2
    else:
        B = np.asarray(X2, dtype=float) / lengthscale
        b2 = np.sum(B * B, axis=1)
    out = np.add(a2[:, None], b2[None, :])
    G = A @ B.T
    G *= 2.0
    out -= G
    del G
    if X2 is None:
        out.flat[:: out.shape[0] + 1] = 0.0  # exact zero self-distance
    np.maximum(out, 0.0, out=out)
    return out


def _matern_np(
    X1: ArrayLike, X2: ArrayLike | None, lengthscale: ArrayLike, variance: float, p: int, coef: np.ndarray
) -> np.ndarray:
    """:func:`matern` for NumPy, in place (bitwise equal to the generic expression)."""
    u = _scaled_sqdist_np(X1, X2, lengthscale)
    np.maximum(u, _R2_FLOOR, out=u)
    np.sqrt(u, out=u)
    u *= sqrt(2.0 * p + 1.0)
    if p == 0:
        poly = None
    else:
        poly = coef[p] * u
        poly += coef[p - 1]
        for j in range(p - 2, -1, -1):
            poly *= u
            poly += coef[j]
        poly *= variance  # (variance * poly) * exp(-u), as in the generic expression
    np.negative(u, out=u)
    np.exp(u, out=u)
    if poly is None:
        u *= variance * coef[0]  # the generic path's variance * (a_0 * ones)
        return u
    poly *= u
    return poly


def kernel(
    name: str,
    X1: Tensor,
    X2: Tensor | None,
    lengthscale: Tensor,
    variance: Tensor,
    *,
    p: int = 2,
    xp: ModuleType = np,
) -> Tensor:
    """Dispatch to :func:`squared_exponential` (``"se"``) or :func:`matern` (``"matern"``).

    Parameters
    ----------
    name : {"se", "matern"}
    X1, X2, lengthscale, variance, xp
        As in :func:`squared_exponential`.
    p : int, default 2
        Matérn smoothness (ignored for ``"se"``).

    Returns
    -------
    array, shape (n1, n2)

    References
    ----------
    Rasmussen, C. E. and Williams, C. K. I. (2006). Gaussian Processes for
    Machine Learning. MIT Press, §4.2.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.bases.gp import kernel
    >>> X = np.array([[0.0], [1.0]])
    >>> kernel("matern", X, None, np.array([1.0]), 2.0, p=1).round(4).tolist()   # 2 (1 + sqrt 3) exp(-sqrt 3)
    [[2.0, 0.9667], [0.9667, 2.0]]
    """
    if name == "se":
        return squared_exponential(X1, X2, lengthscale, variance, xp=xp)
    if name == "matern":
        return matern(X1, X2, lengthscale, variance, p, xp=xp)
    raise ValueError(f"kernel must be one of {', '.join(map(repr, KERNELS))}; got {name!r}.")


def kernel_diag(X: Tensor, variance: Tensor, *, xp: ModuleType = np) -> Tensor:
    """Diagonal of ``K(X, X)``: every stationary kernel here has ``k(0) = variance``.

    Parameters
    ----------
    X : array, shape (n, d)
    variance : scalar

    Returns
    -------
    array, shape (n,)
    """
    return variance * xp.ones_like(X[:, 0])


def _check_p(p: object) -> int:
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)):
        raise TypeError(f"p must be a non-negative integer (Matérn smoothness nu = p + 1/2); got {p!r}.")
    if p < 0:
        raise ValueError(f"p must be >= 0 (Matérn smoothness nu = p + 1/2, p = 0 is the exponential kernel); got {p}.")
    return int(p)
