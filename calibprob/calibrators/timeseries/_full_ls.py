r"""Full conformal least squares in closed form, weighted (NexCP) or not: the NumPy layer.

Full conformal prediction (Vovk et al. 2005) refits the regression on the :math:`n` past
points plus the test point :math:`(x, y)` for every candidate label :math:`y`, and keeps
:math:`y` when the test residual is not too large among all residuals. For (weighted) least
squares the refit is linear in :math:`y`: with fit weights ("tags") :math:`t_1, \dots, t_{n+1}`,
:math:`A = \sum_{i \le n} t_i X_i X_i^\top + t_{n+1} x x^\top` and
:math:`\hat\beta_0 = A^{-1} \sum_{i\le n} t_i X_i Y_i`,

.. math::

    R_i(y) = a_i + b_i y,\quad a_i = Y_i - X_i^\top \hat\beta_0,\; b_i = -t_{n+1} X_i^\top A^{-1} x;
    \qquad R_{n+1}(y) = a_{n+1} + b_{n+1} y,\quad a_{n+1} = -x^\top \hat\beta_0,\;
    b_{n+1} = 1 - t_{n+1} x^\top A^{-1} x.

NexCP (Barber, Candès, Ramdas & Tibshirani 2023, §3-4) keeps :math:`y` when

.. math::

    \sum_{i=1}^n \tilde w_i\, \mathbb 1\{|R_{n+1}(y)| > |R_i(y)|\} \le 1 - \alpha,
    \qquad \tilde w_i = \frac{w_i}{\sum_{j=1}^n w_j + 1},

(:math:`w \equiv 1`: ordinary full conformal), and returns the whole line when
:math:`\sum_i \tilde w_i \le 1 - \alpha` (the test point's mass at :math:`+\infty` alone
exceeds :math:`\alpha`). Each :math:`E_i = \{y : |R_i(y)| \ge |R_{n+1}(y)|\}` is the set where
:math:`((b_i - b_{n+1}) y + a_i - a_{n+1})((b_i + b_{n+1}) y + a_i + a_{n+1}) \ge 0`: a closed
interval, its complement, a half-line, the line or empty, with the two roots as ends (the
"knots"). The kept set :math:`\{y : \sum_i \tilde w_i \mathbb 1_{E_i}(y) \ge \sum_i \tilde w_i -
(1-\alpha)\}` is closed and its extreme points are knots, so one sort and two cumulative sums
give its hull exactly, in :math:`O(n \log n)` instead of the :math:`O(n^2)` of evaluating every
residual at every knot.

A weighted fit (nexCP+WLS) is not symmetric in the data, so the paper swaps the test point's
fit weight with that of a random point :math:`K` drawn with probability :math:`\tilde w_K`
(:math:`K = n + 1`: no swap), which restores Theorem 3's guarantee.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from calibprob._core.ranks import exact_level

__all__ = ["ls_residual_lines", "full_conformal_hull", "swap_fit_weight"]


def ls_residual_lines(
    X: np.ndarray, y: np.ndarray, x: np.ndarray, fit_weights: ArrayLike | None = None
) -> tuple[np.ndarray, np.ndarray, float, float]:
    r"""``(a, b, a_test, b_test)``: every residual of the (weighted) least-squares refit as :math:`a + b\,y`.

    Parameters
    ----------
    X : ndarray, shape (n, p)
        The past inputs (add a column of ones for an intercept).
    y : ndarray, shape (n,)
    x : ndarray, shape (p,)
        The test input.
    fit_weights : ndarray, shape (n + 1,), optional
        The least-squares weights ("tags") of the past points and, last, of the test point.

    Returns
    -------
    a, b : ndarray, shape (n,)
    a_test, b_test : float
    """
    t = np.ones(X.shape[0] + 1) if fit_weights is None else np.asarray(fit_weights, float)
    Xt = X.T * t[:-1]
    A = Xt @ X + np.outer(x, x) * t[-1]
    sol = np.linalg.solve(A, np.column_stack([Xt @ y, x]))  # A^{-1} X'Ty and A^{-1} x in one factorisation
    beta0, ainv_x = sol[:, 0], sol[:, 1]
    a = y - X @ beta0
    b = -(X @ ainv_x) * t[-1]
    return a, b, float(-x @ beta0), float(1.0 - x @ ainv_x * t[-1])


def _sets(a: np.ndarray, b: np.ndarray, a1: float, b1: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each :math:`E_i` as up to two closed intervals: ``(lo, hi, owner)`` with ``owner`` the index ``i``."""
    s1, c1 = b - b1, a - a1  # (b_i - b1) y + (a_i - a1)
    s2, c2 = b + b1, a + a1  # (b_i + b1) y + (a_i + a1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r1, r2 = -c1 / s1, -c2 / s2
    lo_r, hi_r = np.fmin(r1, r2), np.fmax(r1, r2)
    both = (s1 != 0) & (s2 != 0)
    inside = both & (s1 * s2 < 0)  # a downward parabola: >= 0 between the roots
    outside = both & (s1 * s2 > 0) & (lo_r < hi_r)  # upward, two roots: outside them
    whole = (both & (s1 * s2 > 0) & (lo_r >= hi_r)) | ((s1 == 0) & (s2 == 0) & (c1 * c2 >= 0))
    whole |= ((s1 == 0) & (c1 == 0)) | ((s2 == 0) & (c2 == 0))
    half = ~both & ~whole & ((s1 != 0) | (s2 != 0))  # one factor constant and non-zero: a half-line
    const = np.where(s1 == 0, c1, c2)
    slope, root = np.where(s1 == 0, s2, s1), np.where(s1 == 0, r2, r1)
    up = half & (const * slope > 0)  # const * (slope y - slope root) >= 0 for y >= root
    down = half & (const * slope < 0)
    idx = np.arange(a.size)
    parts = [
        (lo_r[inside], hi_r[inside], idx[inside]),
        (np.full(outside.sum(), -np.inf), lo_r[outside], idx[outside]),
        (hi_r[outside], np.full(outside.sum(), np.inf), idx[outside]),
        (np.full(whole.sum(), -np.inf), np.full(whole.sum(), np.inf), idx[whole]),
        (root[up], np.full(up.sum(), np.inf), idx[up]),
        (np.full(down.sum(), -np.inf), root[down], idx[down]),
    ]
    return tuple(np.concatenate(p) for p in zip(*parts, strict=True))  # type: ignore[return-value]


def full_conformal_hull(
    a: ArrayLike, b: ArrayLike, a1: float, b1: float, weights: ArrayLike, confidence_level: float
) -> tuple[float, float]:
    r"""The hull ``(lower, upper)`` of the NexCP full-conformal set from the residual lines.

    Parameters
    ----------
    a, b : ndarray, shape (n,)
        Past residuals :math:`a_i + b_i y` (:func:`ls_residual_lines`).
    a1, b1 : float
        The test residual :math:`a_{n+1} + b_{n+1} y`.
    weights : ndarray, shape (n,)
        Unnormalised conformal weights of the past points; the test point's is 1.
    confidence_level : float
        :math:`1 - \alpha`.

    Returns
    -------
    lower, upper : float
        Possibly infinite (the mass at infinity, or a set unbounded on one side).

    Examples
    --------
    >>> import numpy as np
    >>> a = np.array([-2.0, -1.0, 1.0, 2.0]); b = np.zeros(4)
    >>> full_conformal_hull(a, b, 0.0, 1.0, np.ones(4), 0.6)   # |y| <= the 3rd of 4 scores
    (-2.0, 2.0)
    """
    w = np.asarray(weights, float)
    # the spine's exact arithmetic (``calibprob._core.ranks.weighted_upper_rank``): weights in units of the
    # smallest, the level as the fraction num/den it stands for, so equal weights compare integers exactly
    q = exact_level(confidence_level, "confidence_level")
    positive = w[w > 0]
    ref = min(float(positive.min()), 1.0) if positive.size else 1.0
    wr = w / ref
    total, mass = float(wr.sum()), float(wr.sum()) + 1.0 / ref

    def keeps(strict: float) -> bool:  # strict mass / all mass <= c, compared as den * strict <= num * all
        return q.denominator * strict <= q.numerator * mass

    if keeps(total):  # the test point's mass at infinity alone exceeds alpha: the whole line
        return -np.inf, np.inf
    lo, hi, owner = _sets(np.asarray(a, float), np.asarray(b, float), float(a1), float(b1))
    wk = wr[owner]
    cand = np.unique(np.concatenate([lo[np.isfinite(lo)], hi[np.isfinite(hi)]]))
    lo_order, hi_order = np.argsort(lo, kind="stable"), np.argsort(hi, kind="stable")
    cum_lo = np.concatenate([[0.0], np.cumsum(wk[lo_order])])
    cum_hi = np.concatenate([[0.0], np.cumsum(wk[hi_order])])
    started = cum_lo[np.searchsorted(lo[lo_order], cand, side="right")]
    ended = cum_hi[np.searchsorted(hi[hi_order], cand, side="left")]
    kept = cand[keeps(total - (started - ended))]  # strict: the mass of the scores strictly below the test's
    below = keeps(total - float(wk[np.isneginf(lo)].sum()))  # the set reaches -inf
    above = keeps(total - float(wk[np.isposinf(hi)].sum()))
    lower = -np.inf if below or not kept.size else float(kept.min())
    upper = np.inf if above or not kept.size else float(kept.max())
    return lower, upper


def swap_fit_weight(
    fit_weights: ArrayLike, conformal_weights: ArrayLike, rng: np.random.Generator | np.random.RandomState
) -> tuple[np.ndarray, int]:
    r"""The fit weights with the test point's swapped for a random point's (nexCP+WLS's symmetrisation).

    :math:`K` is drawn with probability :math:`\tilde w_K` among the :math:`n + 1` points (the
    test point's conformal weight is 1) by ``rng.multinomial(1, p)``, as the paper's code draws
    it, so a ``numpy.random.RandomState`` seeded as theirs gives their draws.

    Returns
    -------
    swapped : ndarray, shape (n + 1,)
    k : int
        The drawn index (``n``: the test point itself, nothing swapped).
    """
    t = np.array(fit_weights, float)
    p = np.r_[np.asarray(conformal_weights, float), 1.0]
    p = p / p.sum()
    k = int(np.flatnonzero(rng.multinomial(1, p))[0])
    t[[k, -1]] = t[[-1, k]]
    return t, k
