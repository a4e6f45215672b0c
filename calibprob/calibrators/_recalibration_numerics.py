r"""The NumPy layer of the recalibration baselines (``calibprob.calibrators.recalibration``): quantiles of
sorted scores with probit interpolation, the isotonic knots of Kuleshov et al. (2018), Vovk's ranks (Vovk et al.
2020) and the variance-scaling factor, each a plain function of arrays; and the probit PIT / inverse that the
estimators apply to a predictive Dataset."""

from __future__ import annotations

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike
from scipy import optimize

from calibprob._core.ranks import RANK_TOL as _RANK_TOL
from calibprob._core.ranks import knot_levels
from calibprob.predictive import quantile_pieces, quantile_ppf

# k = p (n + 1) computed in floating point: 0.07 * 100 = 7.000000000000001 must
# count as rank 7; levels are never meaningful to 1e-9.
# rows per block where temporaries are (rows x L)
_CHUNK = 4096
# grid points of the variance-scaling likelihood search for quantile-family bases
_SCALE_GRID = 241
# pieces of the exact variance-scaling likelihood whose optima are checked on the family's own density
_SCALE_CANDIDATES = 16


# ===========================================================================
# NumPy layer
# ===========================================================================


def probit_interpolated_quantiles(sorted_scores: ArrayLike, levels: ArrayLike) -> np.ndarray:
    r"""Empirical quantile function of calibration scores at ``levels``, interpolated in probit space.

    The piecewise-Gaussian quantile function of :mod:`calibprob.predictive`
    through the knots :math:`(k/(n+1),\ s_{(k)})`: linear in
    :math:`\Phi^{-1}(p)` between knots, Gaussian tails beyond them. (The
    conformal calibrators interpolate the same order statistics linearly in
    the rank instead: ``calibprob.calibrators.conformal._intervals.rank_interpolated_quantiles``.)

    Parameters
    ----------
    sorted_scores : ndarray, shape (n,)
        Non-decreasing scores, ``n >= 2``.
    levels : ndarray, shape (L,)

    Returns
    -------
    ndarray, shape (L,)

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.calibrators.recalibration import probit_interpolated_quantiles
    >>> probit_interpolated_quantiles(np.array([1.0, 2.0, 3.0]), [0.25, 0.5, 0.75]).tolist()   # the knots
    [1.0, 2.0, 3.0]
    """
    s = np.asarray(sorted_scores, float)
    return quantile_ppf(s, knot_levels(s.size), np.asarray(levels, float))


def weighted_knot_levels(weights: ArrayLike) -> np.ndarray:
    r"""Knot levels of weighted order statistics: :math:`C_j / (W + \bar w)`, the :math:`N + 1` rule weighted.

    :math:`C_j` the cumulative weight of the sorted points, :math:`W = C_N` and :math:`\bar w` the
    mean weight (the one new point of the :math:`N + 1` convention, at average weight); equal weights
    give :math:`j/(N+1)`. A weighted *fitting loss* only (importance weighting of the empirical
    distribution): no finite-sample guarantee comes with it.

    Parameters
    ----------
    weights : ndarray, shape (N,)
        Positive, in the sorted points' order.

    Returns
    -------
    ndarray, shape (N,)

    Examples
    --------
    >>> weighted_knot_levels(np.array([1.0, 1.0, 1.0])).tolist()
    [0.25, 0.5, 0.75]
    """
    w = np.asarray(weights, float)
    return np.cumsum(w) / (w.sum() + w.mean())


def isotonic_calibration_knots(
    pit_scores: ArrayLike, weights: ArrayLike | None = None
) -> tuple[np.ndarray, np.ndarray]:
    r"""Kuleshov et al.'s isotonic calibration map :math:`R` as knots.

    Kuleshov et al. (2018, Alg. 1) regress the observed frequency
    :math:`\hat P(u_t) = \#\{s : u_s \le u_t\}/(n+1)` on the PIT values
    :math:`u_t` with isotonic regression; the recalibrated CDF is
    :math:`R \circ F`. Here the PITs are on the probit scale
    :math:`w = \Phi^{-1}(u)` (a monotone reparametrisation: the fit is the
    same), tied values are pooled with their counts as weights, and the fit
    uses :func:`scipy.optimize.isotonic_regression`. (Because :math:`\hat P`
    is itself non-decreasing in :math:`u`, the isotonic fit interpolates the
    targets; it is kept so that the map is monotone by construction.)

    The returned knots define :math:`R^{-1}`: for a level :math:`p` the
    recalibrated quantile is :math:`F^{-1}(\Phi(w(p)))` with
    :math:`w(p)` = :func:`calibprob.predictive.quantile_ppf` through
    ``(levels, scores)``. Flat parts of :math:`R` (equal fitted values over
    several scores, where :math:`R^{-1}` is set-valued) are collapsed to one
    knot at the midpoint of the scores involved. When the smallest scores are
    tied, a knot ``(1/(n+1), w_min)`` is prepended so that the knots always
    span :math:`[1/(n+1), n/(n+1)]` and :math:`R^{-1}` is flat over the tied
    mass.

    Parameters
    ----------
    pit_scores : ndarray, shape (n,)
        Probit PIT values :math:`w_t` of the calibration points.
    weights : ndarray, shape (n,), optional
        Importance weights of the points (in ``pit_scores``' order; zeros dropped): the observed
        frequency becomes the weighted one, :math:`\sum_{s: u_s \le u_t} v_s / (V + \bar v)`
        (:func:`weighted_knot_levels`), and the isotonic fit weighs each tie by its weight. A
        fitting loss, no finite-sample guarantee.

    Returns
    -------
    levels : ndarray, shape (J,)
        Fitted values :math:`R(w_j)`, strictly increasing in (0, 1).
    scores : ndarray, shape (J,)
        The corresponding scores :math:`w_j`, non-decreasing.
    """
    if weights is not None:
        return _weighted_isotonic_knots(pit_scores, weights)
    w = np.sort(np.asarray(pit_scores, float))
    n = w.size
    x, first, counts = np.unique(w, return_index=True, return_counts=True)
    # P-hat(u_t) = #{s: u_s <= u_t} / (n + 1): the same for all members of a tie
    targets = (first + counts) / (n + 1.0)
    return _collapse_knots(x, targets, counts.astype(float), 1.0 / (n + 1.0))


def _weighted_isotonic_knots(pit_scores: ArrayLike, weights: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """:func:`isotonic_calibration_knots` with importance weights (ties pooled with their weight sums)."""
    s = np.asarray(pit_scores, float)
    v = np.asarray(weights, float)
    total, mean = v.sum() + v.mean(), v.mean()  # the N + 1 rule over every point, zero weights included
    keep = v > 0
    s, v = s[keep], v[keep]
    order = np.argsort(s, kind="stable")
    s, v = s[order], v[order]
    x, inverse = np.unique(s, return_inverse=True)
    tie = np.bincount(inverse, weights=v)
    return _collapse_knots(x, np.cumsum(tie) / total, tie, mean / total)


def _collapse_knots(
    x: np.ndarray, targets: np.ndarray, tie_weights: np.ndarray, lowest: float
) -> tuple[np.ndarray, np.ndarray]:
    """The isotonic fit of ``targets`` on the unique scores ``x``, flats collapsed, the lowest knot prepended."""
    R = optimize.isotonic_regression(targets, weights=tie_weights, increasing=True).x
    # collapse flat parts of R (set-valued inverse) to their midpoint
    levels, start = np.unique(R, return_index=True)
    stop = np.r_[start[1:], R.size] - 1
    scores = 0.5 * (x[start] + x[stop])
    if levels[0] > lowest + _RANK_TOL:
        levels = np.r_[lowest, levels]
        scores = np.r_[x[0], scores]
    return levels, scores


def vovk_ranks(levels: ArrayLike, n: int, tau: ArrayLike) -> np.ndarray:
    r"""Ranks of the order statistics picked by Vovk's randomized calibrator.

    The split conformal calibrator's CDF at a test point whose score is
    :math:`a` is :math:`C(a, \tau) = (\#\{i: s_i < a\} + \tau\,(\#\{i: s_i = a\} + 1))/(n+1)`;
    its generalised inverse at level :math:`p` is the order statistic
    :math:`s_{(k)}` with

    .. math::

        k = \lceil p\,(n+1) - \tau \rceil
          \;(= \lfloor p\,(n+1) - \tau \rfloor + 1 \text{ for almost every } \tau),

    i.e. :math:`s_{(\lfloor h \rfloor + 1)}` with probability
    :math:`h - \lfloor h \rfloor` and :math:`s_{(\lfloor h \rfloor)}`
    otherwise (:math:`h = p(n+1)`, :math:`\tau \sim U(0,1)`): a randomised
    interpolation between adjacent order statistics whose expected rank is
    exactly :math:`h`. Rank 0 means :math:`-\infty`, rank :math:`n+1`
    :math:`+\infty`.

    Parameters
    ----------
    levels : ndarray, shape (L,)
    n : int
    tau : ndarray, shape (m,)
        One tie-breaking variable in [0, 1) per test point (shared by all
        levels, so the quantile function of a test point never crosses).

    Returns
    -------
    ndarray of int, shape (m, L)
        Ranks in ``0 .. n + 1``.
    """
    h = np.asarray(levels, float)[None, :] * (n + 1)
    t = np.asarray(tau, float)[:, None]
    # ceil, not floor + 1: at tau = 0 and an exact rank h the generalised inverse is s_(h);
    # the tolerance keeps 0.07 * 100 = 7.000000000000001 at rank 7
    k = np.ceil(h - t - _RANK_TOL).astype(int)
    return np.clip(k, 0, n + 1)


def variance_scale_factor(z: ArrayLike, weights: ArrayLike | None = None) -> float:
    r"""Maximum-likelihood σ multiplier of Gaussian predictions.

    With z-scores :math:`z_i = (y_i - \mu_i)/\sigma_i` the Gaussian
    log-likelihood of :math:`N(\mu_i, s^2\sigma_i^2)` is maximised by

    .. math::

        s^2 = \frac1n \sum_{i=1}^n z_i^2,
        \qquad\text{weighted: } s^2 = \frac{\sum_i v_i z_i^2}{\sum_i v_i}

    (the maximiser of the importance-weighted log-likelihood :math:`\sum_i v_i \log
    \phi(z_i/s)/s`).

    Parameters
    ----------
    z : ndarray, shape (n,)
    weights : ndarray, shape (n,), optional
        Non-negative importance weights :math:`v_i` (not all zero); None: the unweighted mean.

    Returns
    -------
    float
        :math:`s`.

    Examples
    --------
    >>> round(variance_scale_factor([1.0, 3.0]) ** 2, 12), round(variance_scale_factor([1.0, 3.0], [3.0, 1.0]) ** 2, 12)
    (5.0, 3.0)
    """
    z = np.asarray(z, float)
    if weights is None:
        return float(np.sqrt(np.mean(z * z)))
    v = np.asarray(weights, float)
    return float(np.sqrt(np.sum(v * z * z) / np.sum(v)))


def quantile_scale_candidates(
    q: np.ndarray, levels: ArrayLike, m: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    r"""Near-maximisers :math:`s` of the scaled quantile family's likelihood, from its exact pieces.

    The contract's quantile function is linear in the score :math:`u = \Phi^{-1}(p)` on each of
    its :math:`L + 1` pieces, :math:`Q_i(\Phi(u)) = a_{ij} + b_{ij} u` (:func:`quantile_pieces`),
    so the log density at :math:`x` in piece :math:`j` is :math:`-u^2/2 - \log\sqrt{2\pi} - \log
    b_{ij}` with :math:`u = (x - a_{ij})/b_{ij}`. Variance scaling about the mean :math:`m_i`
    evaluates it at :math:`x = m_i + t\,(y_i - m_i)`, :math:`t = 1/s`, where :math:`u` is linear
    in :math:`t`: :math:`u = \alpha_{ij} + \beta_{ij} t`, :math:`\alpha_{ij} = (m_i - a_{ij})/b_{ij}`,
    :math:`\beta_{ij} = (y_i - m_i)/b_{ij}`. Between two consecutive *breakpoints*
    :math:`t = (q_{ik} - m_i)/(y_i - m_i) > 0` (one point crossing one stored quantile) every point
    stays in its piece, and the negative (importance-weighted) log-likelihood is

    .. math::

        \mathrm{NLL}(t) = \tfrac12 A + B\,t + \tfrac12 C\,t^2 + D - W\log t
        + W \log\sqrt{2\pi},

    with :math:`A = \sum_i v_i\alpha_{ij}^2`, :math:`B = \sum_i v_i\alpha_{ij}\beta_{ij}`,
    :math:`C = \sum_i v_i\beta_{ij}^2`, :math:`D = \sum_i v_i\log b_{ij}` over the pieces the
    points are in and :math:`W = \sum_i v_i` (the Jacobian :math:`-\log s = \log t` of every
    point). That is convex in :math:`t`, minimised at the positive root of
    :math:`C t^2 + B t - W = 0`, clipped to the interval. The density jumps at a breakpoint, so the
    likelihood is a saw of up to :math:`n L` convex teeth: a grid in :math:`s` finds the wrong
    tooth (issue 40: 0.009-0.18 below the best). Walking the breakpoints in order, the sums change
    by one point's piece at a time (a cumulative sum), so every tooth's minimum is found in
    :math:`O(nL \log nL)`.

    Parameters
    ----------
    q : ndarray, shape (n, L)
        The base's stored quantiles.
    levels : array_like, shape (L,)
    m : ndarray, shape (n,)
        The centres the family is scaled about (the base's means).
    y : ndarray, shape (n,)
    weights : ndarray, shape (n,), optional
        Non-negative importance weights :math:`v_i`; a zero weight drops the point.

    Returns
    -------
    ndarray
        Up to ``_SCALE_CANDIDATES`` values of :math:`s`: the optima of the teeth with the least
        NLL, each moved inside its tooth by at most a relative 1e-10 (the supremum of a tooth may
        sit at a jump, where rounding decides which side a point falls). The caller evaluates its
        own likelihood at them and keeps the best: the sums carry rounding of order 1e-16 per
        breakpoint crossed.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> levels = np.array([0.1, 0.5, 0.9]); m = np.zeros(3); y = np.array([-2.0, 1.0, 2.0])
    >>> q = np.outer(np.ones(3), stats.norm.ppf(levels))     # N(0, 1): one line, s^2 = mean y^2
    >>> s = quantile_scale_candidates(q, levels, m, y)
    >>> bool(np.isclose(s[0], np.sqrt(3.0)))
    True
    """
    v = np.ones(y.size) if weights is None else np.asarray(weights, float)
    d = y - m
    W = float(np.sum(v[v > 0]))
    keep = (v > 0) & (d != 0)
    q, m, d, v = q[keep], m[keep], d[keep], v[keep]
    a, b, _, _ = quantile_pieces(q, levels)  # (n, L + 1): piece j lies between q[j-1] and q[j]
    alpha = (m[:, None] - a) / b
    beta = d[:, None] / b
    terms = np.stack(
        [v[:, None] * alpha * alpha, v[:, None] * alpha * beta, v[:, None] * beta * beta, v[:, None] * np.log(b)]
    )  # (4, n, L + 1)
    up = d > 0
    # the piece at t -> 0+: x just above m (going up) or just below (going down), as _locate counts
    start = np.where(up, np.count_nonzero(q <= m[:, None], axis=1), np.count_nonzero(q < m[:, None], axis=1))
    rows = np.arange(m.size)
    sums0 = terms[:, rows, start].sum(axis=1)
    # breakpoints: knot k crossed going up (piece k -> k + 1) or going down (piece k + 1 -> k)
    crossed = np.where(up[:, None], q > m[:, None], q < m[:, None])
    i, k = np.nonzero(crossed)
    times = (q[i, k] - m[i]) / d[i]
    sign = np.where(up[i], 1.0, -1.0)
    delta = sign * (terms[:, i, k + 1] - terms[:, i, k])  # (4, events)
    order = np.argsort(times, kind="stable")
    times = times[order]
    sums = np.concatenate([sums0[:, None], sums0[:, None] + np.cumsum(delta[:, order], axis=1)], axis=1)
    lo = np.concatenate([[0.0], times])
    hi = np.concatenate([times, [np.inf]])
    return _best_teeth(sums, lo, hi, W)


def _best_teeth(sums: np.ndarray, lo: np.ndarray, hi: np.ndarray, W: float) -> np.ndarray:
    """The ``_SCALE_CANDIDATES`` best teeth's optima as :math:`s` (:func:`quantile_scale_candidates`)."""
    A, B, C, D = sums
    with np.errstate(divide="ignore", invalid="ignore"):
        root = np.sqrt(B * B + 4.0 * C * W)
        # the positive root of C t^2 + B t - W, in the form that does not cancel
        t = np.where(B >= 0, 2.0 * W / (B + root), (root - B) / (2.0 * C))
        t = np.clip(t, lo, hi)
        nll = 0.5 * A + B * t + 0.5 * C * t * t + D - W * np.log(t)
    nll = np.where((hi > lo) & (C > 0) & np.isfinite(nll), nll, np.inf)
    best = np.argsort(nll, kind="stable")[:_SCALE_CANDIDATES]
    best = best[np.isfinite(nll[best])]
    t, lo, hi = t[best], lo[best], hi[best]
    # off the jumps: a tooth's supremum at its end may be a limit its own points do not attain
    gap = np.minimum(0.25 * (hi - lo), 1e-10 * np.where(np.isfinite(hi), hi, lo))
    return 1.0 / np.clip(t, lo + gap, hi - gap)


# ---------------------------------------------------------------------------
# base prediction on the probit scale
# ---------------------------------------------------------------------------


def _probit_pit(pred: xr.Dataset, y: np.ndarray) -> np.ndarray:
    r""":math:`\Phi^{-1}(F_i(y_i))` without ever rounding :math:`F` to 0 or 1."""
    return pred.calib.zscore(y).values


def _ppf_probit(pred: xr.Dataset, w: np.ndarray) -> np.ndarray:
    r"""Base quantiles :math:`F_i^{-1}(\Phi(w_{ij}))`, ``w`` of shape (n, L) or (L,).

    Evaluated directly on the probit scale (the contract's quantile function
    is linear in :math:`\Phi^{-1}(p)` between stored levels), so scores far
    in the tails do not saturate.
    """
    return pred.calib.ppf_zscore(w)


def _center(pred: xr.Dataset, center: str) -> np.ndarray:
    if center == "mean":
        return np.asarray(pred.calib.mean().values, float)
    return np.asarray(pred.calib.median().values, float)


# ===========================================================================
# Estimators
# ===========================================================================
