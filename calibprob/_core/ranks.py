r"""Finite-sample ranks: the one home of the :math:`N + 1` convention.

Every calibrator that turns :math:`N` calibration scores into quantiles uses
the same convention: the :math:`j`-th smallest score sits at level
:math:`j/(N+1)`. Three questions follow from it, answered here once:

* **conformal ranks** — the upper conformal quantile at level :math:`c` is the
  :math:`\lceil c(N+1) \rceil`-th smallest score and the lower one the
  :math:`\lfloor \alpha(N+1) \rfloor`-th (Vovk et al. 2005; Barber et al.
  2021, eq. 3); it exists iff :math:`N \ge c/(1-c)`
  (:func:`upper_rank`, :func:`lower_rank`, :func:`min_conformal_points`);
* **quantile-function range** — a calibrated quantile function interpolating
  the knots :math:`(j/(N+1), s_{(j)})` is defined on
  :math:`[1/(N+1),\ N/(N+1)]` (Capone et al. 2023, eq. 6; Kuleshov et al.
  2018; Marx et al. 2022), so a level set needs
  :func:`min_calibration_points` scores (:func:`levels_in_range`);
* **knots** — the levels :math:`j/(N+1)` themselves, all of them or a subset
  spread evenly in :math:`\Phi^{-1}` (:func:`knot_levels`).

The floating-point guard :data:`RANK_TOL` makes ``0.7 * 10`` give rank 7, not
8: levels are never meaningful to 1e-9.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from calibprob._core.validation import check_int, check_levels

__all__ = [
    "RANK_TOL",
    "upper_rank",
    "lower_rank",
    "min_conformal_points",
    "levels_in_range",
    "min_calibration_points",
    "knot_levels",
]

#: Tolerance of the rank arithmetic: ``ceil``/``floor`` of ``c * (n + 1)`` in floating point.
RANK_TOL = 1e-9


def upper_rank(confidence_level: float, n: int) -> int:
    r""":math:`\lceil c\,(n+1) \rceil`, the 1-based rank of the upper conformal quantile.

    Examples
    --------
    >>> upper_rank(0.7, 9)   # 0.7 * 10 is 7.000000000000001 in floating point
    7
    """
    return int(math.ceil(confidence_level * (n + 1) - RANK_TOL))


def lower_rank(miscoverage: float, n: int) -> int:
    r""":math:`\lfloor \alpha\,(n+1) \rfloor`, the 1-based rank of the lower conformal quantile.

    Examples
    --------
    >>> lower_rank(0.1, 19)
    2
    """
    return int(math.floor(miscoverage * (n + 1) + RANK_TOL))


def min_conformal_points(confidence_level: float) -> int:
    r"""Smallest :math:`n` with :math:`\lceil c (n+1) \rceil \le n`, i.e. :math:`n \ge c/(1-c)`.

    Fewer scores make the conformal set the whole real line.

    Examples
    --------
    >>> min_conformal_points(0.9)
    9
    """
    n = max(int(math.floor(confidence_level / (1.0 - confidence_level))) - 1, 1)
    while upper_rank(confidence_level, n) > n:
        n += 1
    return n


def levels_in_range(levels, n: int) -> np.ndarray:
    r"""Which levels lie in the calibration range :math:`[1/(n+1),\ n/(n+1)]`.

    Parameters
    ----------
    levels : ndarray, shape (L,)
    n : int
        Number of calibration points.

    Returns
    -------
    ndarray of bool, shape (L,)

    Examples
    --------
    >>> levels_in_range([0.05, 0.1, 0.95], 9)
    array([False,  True, False])
    """
    h = np.asarray(levels, float) * (n + 1)
    return (h >= 1.0 - RANK_TOL) & (h <= n + RANK_TOL)


def min_calibration_points(levels) -> int:
    r"""Smallest number of calibration points whose range covers every level.

    .. math::

        n_{\min} = \Bigl\lceil \max\Bigl(\frac{1}{p_{\min}},\ \frac{1}{1 - p_{\max}}\Bigr) - 1 \Bigr\rceil

    so that :math:`1/(n+1) \le p_{\min}` and :math:`p_{\max} \le n/(n+1)`
    (at least 2: two knots define a score quantile function).

    Parameters
    ----------
    levels : array_like, shape (L,)
        Levels in (0, 1).

    Returns
    -------
    int

    Examples
    --------
    >>> min_calibration_points([0.01, 0.5, 0.99])
    99
    >>> min_calibration_points([0.05, 0.95])
    19
    """
    p = check_levels(levels, "levels", increasing=False)
    ends = np.array([p.min(), p.max()])
    n = max(int(math.ceil(max(1.0 / ends[0], 1.0 / (1.0 - ends[1])) - 1.0 - 1e-6)), 2)
    while not levels_in_range(ends, n).all():  # guard the float rounding, upwards ...
        n += 1
    while n > 2 and levels_in_range(ends, n - 1).all():  # ... and downwards
        n -= 1
    return n


def knot_levels(n: int, n_levels: int | None = None) -> np.ndarray:
    r"""Knots :math:`j/(N+1)`: all :math:`N` of them, or about ``n_levels`` spread evenly in :math:`\Phi^{-1}`.

    Parameters
    ----------
    n : int
        Number of calibration points, at least 2.
    n_levels : int, optional
        Number of knots; the ranks are :math:`j_k = \operatorname{round}((N+1)\,\Phi(z_k))`
        for :math:`z_k` evenly spaced from :math:`\Phi^{-1}(1/(N+1))` to
        :math:`\Phi^{-1}(N/(N+1))` (duplicates dropped), so the extreme ranks 1
        and :math:`N` are always included and the tails, where a quantile
        function bends most, get as many knots as the centre. ``None`` gives
        every rank (Capone et al. 2023, Theorem 5.4's setting).

    Returns
    -------
    ndarray, shape (K,)
        Strictly increasing levels :math:`j_k/(N+1)`.

    Examples
    --------
    >>> knot_levels(9, 3) * 10
    array([1., 5., 9.])
    >>> knot_levels(4)
    array([0.2, 0.4, 0.6, 0.8])
    """
    n = check_int(n, "n", minimum=2)
    if n_levels is None:
        ranks = np.arange(1, n + 1)
    else:
        n_levels = check_int(n_levels, "n_levels", minimum=2)
        z = np.linspace(special.ndtri(1.0 / (n + 1)), special.ndtri(n / (n + 1.0)), n_levels)
        ranks = np.unique(np.clip(np.round((n + 1) * special.ndtr(z)), 1, n).astype(int))
    return ranks / (n + 1.0)
