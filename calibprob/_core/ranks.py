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

Every "least number of scores for a level" (conformal ranks, a two-sided
signed score, a quantile-function level, Mondrian's minimum group sizes) is
:func:`least_n`, in exact rational arithmetic on the fraction the level stands for
(:func:`exact_level`), so ``0.9`` is :math:`9/10` and no rounding can move
a minimum by one.

The ranks are exact: ``0.7 * 10`` gives rank 7, not 8 (:func:`exact_level`
reads a level as the fraction it stands for); :data:`RANK_TOL` remains for callers that compare
continuous ranks in floating point.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np
from scipy import special

from calibprob._core.validation import check_int, check_levels

__all__ = [
    "RANK_TOL",
    "exact_level",
    "least_n",
    "weighted_upper_rank",
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
    r""":math:`\lceil c\,(n+1) \rceil`, the 1-based rank of the upper conformal quantile, in exact arithmetic.

    Examples
    --------
    >>> upper_rank(0.7, 9)   # 0.7 * 10 is 7.000000000000001 in floating point
    7
    """
    c = _exact(float(confidence_level))
    return -(-c.numerator * (n + 1) // c.denominator)


def lower_rank(miscoverage: float, n: int) -> int:
    r""":math:`\lfloor \alpha\,(n+1) \rfloor`, the 1-based rank of the lower conformal quantile, in exact arithmetic.

    Examples
    --------
    >>> lower_rank(0.1, 19)
    2
    """
    a = _exact(float(miscoverage))
    return a.numerator * (n + 1) // a.denominator


@functools.lru_cache(maxsize=4096)
def _exact(c: float) -> Fraction:
    """:func:`exact_level` of a float, cached (the ranks are asked per level, per group, per test point)."""
    return exact_level(c)


def exact_level(value: Any, name: str = "level") -> Fraction:
    r"""A level in (0, 1) as the exact fraction it stands for (``0.9`` -> 9/10, ``1/11`` -> 1/11).

    The float's simplest rational reading: the closest fraction with a denominator up to
    :math:`10^9` (:meth:`fractions.Fraction.limit_denominator`). A decimal level of up to
    nine digits is read as that decimal, a knot :math:`j/(N+1)` as that ratio, and a level
    computed in floating point (``1 - 0.1/2``, ``0.9500000000000001``) as the value it
    stands for: the binary float's own error (:math:`\sim 10^{-16}`) is far below the
    :math:`10^{-18}`-to-:math:`10^{-9}` gaps between such fractions, so no rounding can move a
    rank by one.

    Examples
    --------
    >>> exact_level(0.9), exact_level(0.9500000000000001), exact_level(1 / 11)
    (Fraction(9, 10), Fraction(19, 20), Fraction(1, 11))
    """
    c = float(value)
    if not 0.0 < c < 1.0 or not math.isfinite(c):
        raise ValueError(f"{name} must be in (0, 1); got {value!r}.")
    return Fraction(c).limit_denominator(10**9)


#: The rank conditions :func:`least_n` knows, as the exact upper levels q whose rank
#: :math:`\lceil q(n+1) \rceil \le n` must exist.
_RULES = {
    "upper": lambda c: (c,),  # a symmetric score's conformal quantile at c
    "two-sided": lambda c: (1 - (1 - c) / 2,),  # a signed score's two tails, alpha/2 each
    "quantile": lambda p: (p, 1 - p),  # a quantile function at level p: 1 <= p(n+1) <= n
    "mirrored": lambda p: (abs(2 * p - 1),),  # a symmetric score mirrored around the centre
}


def least_n(level: Any, *, rule: str = "upper") -> int:
    r"""The least number of scores :math:`n` at which the finite-sample rank at ``level`` exists.

    The one home of this count. Every rule asks that an upper rank
    :math:`\lceil q(n+1) \rceil` stay within the :math:`n` scores for one or two exact
    levels :math:`q`, i.e. :math:`n \ge q/(1-q)`:

    .. math::

        n_{\min} = \max_q \Bigl\lceil \frac{1}{1-q} \Bigr\rceil - 1 ,

    with :math:`q` by rule (level :math:`c` or :math:`p`, :math:`\alpha = 1 - c`):

    * ``"upper"``: :math:`q = c` (a symmetric score's conformal quantile; Vovk et al. 2005;
      Lei et al. 2018): :math:`\lceil 1/\alpha \rceil - 1`;
    * ``"two-sided"``: :math:`q = 1 - \alpha/2` (a signed score's two ends, or CPS):
      :math:`\lceil 2/\alpha \rceil - 1`;
    * ``"quantile"``: :math:`q \in \{p, 1-p\}` (a quantile function on the :math:`n+1`
      convention reaches :math:`p` iff :math:`1 \le p(n+1) \le n`):
      :math:`\lceil \max(1/p, 1/(1-p)) \rceil - 1`;
    * ``"mirrored"``: :math:`q = |2p - 1|` (a symmetric score mirrored around the centre);
      0 at :math:`p = 1/2`.

    Exact rational arithmetic on :func:`exact_level`, never a floating-point tolerance.

    Parameters
    ----------
    level : float
        :math:`c` or :math:`p` in (0, 1).
    rule : {"upper", "two-sided", "quantile", "mirrored"}

    Returns
    -------
    int
        :math:`n_{\min} \ge 0` (callers that need a floor, such as 1 point or 2 knots,
        apply it).

    Examples
    --------
    >>> [least_n(c) for c in (0.8, 0.9, 0.95, 0.99)]
    [4, 9, 19, 99]
    >>> [least_n(c, rule="two-sided") for c in (0.8, 0.9, 0.95)]
    [9, 19, 39]
    >>> least_n(0.05, rule="quantile"), least_n(0.95, rule="mirrored"), least_n(0.5, rule="mirrored")
    (19, 9, 0)
    """
    if rule not in _RULES:
        raise ValueError(f"rule must be one of {sorted(_RULES)}; got {rule!r}.")
    qs = _RULES[rule](exact_level(level))
    return max(0 if q == 0 else math.ceil(1 / (1 - q)) - 1 for q in qs)


def weighted_upper_rank(weights: Any, level: Any, test_weight: float = 1.0) -> int:
    r"""The 1-based rank of the weighted conformal quantile at ``level``; ``n + 1`` for :math:`+\infty`.

    The level-:math:`q` quantile of :math:`\sum_i p_i \delta_{R_{(i)}} + p_{n+1} \delta_{+\infty}`,
    :math:`p_i = w_i / (\sum_j w_j + w_{n+1})` (Tibshirani, Barber, Candès & Ramdas 2019,
    weighted conformal prediction): the least :math:`k` with
    :math:`\sum_{i \le k} w_i \ge q \,(\sum_j w_j + w_{n+1})`, the weights in the scores'
    increasing order; :math:`n + 1` when only the mass at :math:`+\infty` reaches :math:`q`.

    The weights are divided by the smallest one and :math:`q = a/b` is :func:`exact_level`, the
    condition tested as :math:`b \sum_{i \le k} w_i \ge a\, W`: with equal weights every sum
    is an exact integer and the rank is :func:`upper_rank`'s :math:`\lceil q(n+1) \rceil`, bit
    for bit (tested). The lower end of a signed score is this rule on the reversed weights at
    :math:`1 - \alpha/2` (the mass at :math:`-\infty`): :math:`n + 1 - k`.

    Parameters
    ----------
    weights : array_like, shape (n,)
        Non-negative calibration weights, in the order of the sorted scores.
    level : float
        :math:`q` in (0, 1).
    test_weight : float, default 1.0
        :math:`w_{n+1}`, the test point's weight (its mass sits at :math:`+\infty`).

    Returns
    -------
    int
        In ``1 .. n + 1``.

    Examples
    --------
    >>> weighted_upper_rank([1.0] * 9, 0.9), upper_rank(0.9, 9)
    (9, 9)
    >>> weighted_upper_rank([1.0, 1.0, 4.0], 0.5)   # the heavy third score carries the median
    3
    >>> weighted_upper_rank([1.0] * 8, 0.9)         # too few points: +inf
    9
    """
    w = np.asarray(weights, float)
    if w.ndim != 1 or not np.all(np.isfinite(w)) or np.any(w < 0) or not (np.isfinite(test_weight) and test_weight > 0):
        raise ValueError(
            "weights must be a 1-D array of finite non-negative numbers and test_weight a finite positive number; "
            f"got weights of shape {w.shape} and test_weight={test_weight!r}. Pass one weight per calibration score."
        )
    q = exact_level(level)
    positive = w[w > 0]
    ref = min(float(positive.min()), float(test_weight)) if positive.size else float(test_weight)
    cum = np.cumsum(w / ref)
    total = (cum[-1] if cum.size else 0.0) + float(test_weight) / ref
    hit = np.flatnonzero(q.denominator * cum >= q.numerator * total)
    return int(hit[0]) + 1 if hit.size else int(w.size) + 1


def min_conformal_points(confidence_level: float) -> int:
    r"""Smallest :math:`n` with :math:`\lceil c (n+1) \rceil \le n`, i.e. :math:`n \ge c/(1-c)`: :func:`least_n`.

    Fewer scores make the conformal set the whole real line.

    Examples
    --------
    >>> min_conformal_points(0.9)
    9
    """
    return max(least_n(confidence_level), 1)


def levels_in_range(levels: Any, n: int) -> np.ndarray:
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
    return np.array([n >= least_n(float(p), rule="quantile") for p in np.ravel(levels)], dtype=bool)


def min_calibration_points(levels: Any) -> int:
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
    return max(least_n(float(p.min()), rule="quantile"), least_n(float(p.max()), rule="quantile"), 2)


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
