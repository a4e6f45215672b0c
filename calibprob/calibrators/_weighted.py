r"""Weighted conformal numerics shared by the CPS, CQR and Mondrian (Tibshirani et al. 2019).

Every weighted rule here is the unweighted one with the empirical law of the :math:`n`
calibration scores replaced by

.. math::

    \hat F_x = \sum_{i=1}^n p_i(x)\, \delta_{R_i} + p_{n+1}(x)\, \delta_{+\infty},\qquad
    p_i(x) = \frac{w_i}{W + t(x)},\quad p_{n+1}(x) = \frac{t(x)}{W + t(x)},\quad W = \sum_i w_i,

:math:`w_i` the calibration weights and :math:`t(x)` the test point's weight (its likelihood
ratio :math:`d\tilde P_X/dP_X(x)` under covariate shift). With the true ratio, the score of a
test point is weighted-exchangeable with the calibration scores, and every threshold or
CDF below inherits the unweighted guarantee (Tibshirani, Barber, Candès & Ramdas 2019,
Lemma 3 and Corollary 1).

* thresholds (CQR's corrections): the level-:math:`c` quantile of :math:`\hat F_x`,
  ``calibprob._core.ranks.weighted_upper_rank`` (exact integer rank with equal weights, so
  equal weights give the unweighted corrections bit for bit);
* the conformal predictive system's CDF (Vovk et al. 2020, weighted as above): at a test
  score :math:`a`,

  .. math::

      Q(a, \tau) = \frac{\sum_{R_i < a} w_i + \tau\,\bigl(\sum_{R_i = a} w_i + t\bigr)}{W + t},

  which is :math:`\mathrm{U}(0, 1)` for the true ratio and :math:`\tau \sim \mathrm{U}(0, 1)`
  (the weighted analogue of Vovk et al.'s Theorem 1: the test score's weighted rank is
  uniform under weighted exchangeability);
* its continuous quantile function: the curve through the middle of every jump,
  :math:`F(R_{(i)}) = (C_{i-1} + (w_{(i)} + t)/2)/(W + t)`, :math:`C_k = \sum_{l \le k} w_{(l)}`
  (for equal weights :math:`i/(n+1)`, the unweighted system's knots), linear in between.

References
----------
Tibshirani, R. J., Barber, R. F., Candès, E. J. and Ramdas, A. (2019). Conformal prediction
under covariate shift. NeurIPS 32.
Vovk, V., Petej, I., Nouretdinov, I., Manokhin, V. and Gammerman, A. (2020). Computationally
efficient versions of conformal predictive distributions. Neurocomputing 397, 292–308.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from calibprob._core.ranks import weighted_upper_rank
from calibprob.predictive import DEFAULT_LEVELS

__all__ = [
    "weighted_thresholds",
    "weighted_cps_cdf",
    "weighted_cps_knots",
    "weighted_cps_levels",
    "weighted_cps_quantiles",
    "equal_weights",
    "WeightedBlock",
]


def _scaled(calibration_weights: ArrayLike, test_weights: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Both sides divided by their smallest positive weight (scale-free; equal weights become exactly 1)."""
    w = np.asarray(calibration_weights, float)
    t = np.atleast_1d(np.asarray(test_weights, float))
    ref = float(np.min(np.concatenate([w[w > 0], t[t > 0]])))
    return w / ref, t / ref


def equal_weights(calibration_weights: ArrayLike, test_weights: ArrayLike) -> bool:
    """True when every calibration and test weight is the same number (the unweighted method exactly)."""
    w = np.asarray(calibration_weights, float)
    t = np.atleast_1d(np.asarray(test_weights, float))
    return bool(np.all(w == w[0]) and np.all(t == w[0]))


def weighted_thresholds(
    scores: ArrayLike, calibration_weights: ArrayLike, test_weights: ArrayLike, level: float
) -> np.ndarray:
    r"""Per test point, the level-``level`` quantile of :math:`\hat F_x` (module docstring); +inf where unreached.

    Parameters
    ----------
    scores : ndarray, shape (n,)
        Calibration scores, any order.
    calibration_weights : ndarray, shape (n,)
        In the order of ``scores``.
    test_weights : ndarray, shape (m,)
    level : float

    Returns
    -------
    ndarray, shape (m,)
        With equal weights, the :math:`\lceil c(n+1) \rceil`-th smallest score (bit for bit).

    Examples
    --------
    >>> weighted_thresholds([3.0, 1.0, 2.0], [1.0, 1.0, 1.0], [1.0, 100.0], 0.5).tolist()
    [2.0, inf]
    """
    s = np.asarray(scores, float)
    order = np.argsort(s, kind="stable")
    R, w = s[order], np.asarray(calibration_weights, float)[order]
    t = np.atleast_1d(np.asarray(test_weights, float))
    distinct, which = np.unique(t, return_inverse=True)
    out = np.empty(distinct.size)
    for k, tk in enumerate(distinct):
        rank = weighted_upper_rank(w, level, float(tk))
        out[k] = np.inf if rank > R.size else R[rank - 1]
    return out[which]


def weighted_cps_cdf(
    sorted_scores: ArrayLike,
    calibration_weights: ArrayLike,
    test_scores: ArrayLike,
    test_weights: ArrayLike,
    tau: ArrayLike = 0.5,
) -> np.ndarray:
    r"""The weighted split-CPS value :math:`Q(a_j, \tau)` (module docstring) at the test scores.

    Parameters
    ----------
    sorted_scores : ndarray, shape (n,)
        Calibration scores, increasing.
    calibration_weights : ndarray, shape (n,)
        In the scores' order.
    test_scores, test_weights : ndarray, shape (m,)
    tau : float or ndarray, shape (m,)

    Returns
    -------
    ndarray, shape (m,)
        Equal weights give ``cps_cdf`` bit for bit (the sums are exact integers).

    Examples
    --------
    >>> weighted_cps_cdf([0.0, 1.0], [1.0, 3.0], [0.5], [1.0], tau=0.5).tolist()   # (1 + 0.5 * 1) / 5
    [0.3]
    """
    R = np.asarray(sorted_scores, float)
    w, t = _scaled(calibration_weights, test_weights)
    a = np.asarray(test_scores, float)
    cum = np.concatenate([[0.0], np.cumsum(w)])
    below = np.searchsorted(R, a, side="left")
    upto = np.searchsorted(R, a, side="right")
    ties = cum[upto] - cum[below]
    return (cum[below] + np.asarray(tau, float) * (ties + t)) / (cum[-1] + t)


def weighted_cps_knots(
    sorted_scores: ArrayLike, calibration_weights: ArrayLike, test_weight: float
) -> tuple[np.ndarray, np.ndarray, float]:
    r"""``(positions, scores, total)``: the knots :math:`F(R_{(i)}) \cdot (W + t)` of the continuous CPS.

    Zero-weight scores carry no mass and are dropped (their knots would coincide). The
    positions are :math:`C_{i-1} + (w_{(i)} + t)/2`, computed as :math:`(C_i - w_i/2) + t/2`
    so that equal weights give the integers :math:`1, \dots, n` exactly.
    """
    R = np.asarray(sorted_scores, float)
    w = np.asarray(calibration_weights, float)
    keep = w > 0
    R, w = R[keep], w[keep]
    pos = (np.cumsum(w) - w / 2.0) + test_weight / 2.0
    return pos, R, float(np.sum(w) + test_weight)


def _symmetric_knots(
    sorted_scores: ArrayLike, calibration_weights: ArrayLike, test_weight: float
) -> tuple[np.ndarray, np.ndarray, float]:
    r"""Knots of a symmetric score's weighted quantile function, mirrored around the centre.

    The unweighted function puts score :math:`R_{(i)}` at :math:`|2p - 1| = i/(n+1)` (and 0 at the
    centre); weighted, at :math:`|2p - 1| = C_i / (W + t)`, :math:`C_i` the cumulative weight, so
    that the central interval at :math:`c = C_k/(W+t)` is the weighted conformal one, and equal
    weights give the integers :math:`0, 1, \dots, n` exactly.
    """
    R = np.asarray(sorted_scores, float)
    w = np.asarray(calibration_weights, float)
    keep = w > 0
    pos = np.concatenate([[0.0], np.cumsum(w[keep])])
    return pos, np.concatenate([[0.0], R[keep]]), float(pos[-1] + test_weight)


def weighted_cps_levels(
    sorted_scores: ArrayLike,
    calibration_weights: ArrayLike,
    test_weights: ArrayLike,
    levels: ArrayLike | None = None,
    *,
    symmetric: bool = False,
) -> np.ndarray:
    """The quantile levels every test point's weighted CPS resolves (inside its first and last knot).

    Parameters
    ----------
    sorted_scores, calibration_weights : ndarray, shape (n,)
    test_weights : ndarray, shape (m,)
    levels : array_like, optional
        ``None``: :data:`calibprob.predictive.DEFAULT_LEVELS` restricted to the common range.

    Raises
    ------
    ValueError
        An explicit level outside the common range, or fewer than 2 default levels inside it;
        the message names the range the weights resolve.
    """
    w, t = _scaled(calibration_weights, test_weights)
    lo, hi = 0.0, 1.0
    for tk in np.unique(t):
        if symmetric:  # |2p - 1| <= C_n / (W + t)
            pos, _, total = _symmetric_knots(sorted_scores, w, float(tk))
            reach = pos[-1] / total
            lo, hi = max(lo, (1.0 - reach) / 2.0), min(hi, (1.0 + reach) / 2.0)
            continue
        pos, _, total = weighted_cps_knots(sorted_scores, w, float(tk))
        lo, hi = max(lo, pos[0] / total), min(hi, pos[-1] / total)
    wanted = DEFAULT_LEVELS if levels is None else np.atleast_1d(np.asarray(levels, float))
    inside = (wanted >= lo) & (wanted <= hi)
    fix = (
        "Lower the extreme levels, add calibration points near the test inputs, or smooth the ratio "
        "(a simpler classifier, clip=)."
    )
    if levels is not None and not inside.all():
        bad = wanted[~inside]
        raise ValueError(
            f"levels {bad.tolist()} lie outside what the weighted calibration scores resolve at every test point: "
            f"[{lo:.4g}, {hi:.4g}] (the weights' mass at +inf, t/(W+t), and the end scores' own mass). {fix}"
        )
    if inside.sum() < 2:
        raise ValueError(
            f"the weighted calibration scores resolve only the levels [{lo:.4g}, {hi:.4g}] at every test point, "
            f"fewer than 2 default levels: the weights are too concentrated for a quantile function. {fix}"
        )
    return wanted[inside]


def weighted_cps_quantiles(
    sorted_scores: ArrayLike,
    calibration_weights: ArrayLike,
    test_weights: ArrayLike,
    levels: ArrayLike,
    *,
    symmetric: bool = False,
) -> np.ndarray:
    """Per test point, the continuous weighted CPS's scores at ``levels`` (module docstring), shape (m, L).

    Linear in the knot positions, as the unweighted system is in the continuous rank; a symmetric
    score mirrored around the centre (:func:`_symmetric_knots`), as the unweighted
    ``rank_interpolated_quantiles``.
    """
    w, t = _scaled(calibration_weights, test_weights)
    levels = np.asarray(levels, float)
    distinct, which = np.unique(t, return_inverse=True)
    r = np.empty((distinct.size, levels.size))
    for k, tk in enumerate(distinct):
        if symmetric:
            pos, R, total = _symmetric_knots(sorted_scores, w, float(tk))
            r[k] = np.sign(2.0 * levels - 1.0) * np.interp(np.abs(2.0 * levels - 1.0) * total, pos, R)
            continue
        pos, R, total = weighted_cps_knots(sorted_scores, w, float(tk))
        r[k] = np.interp(levels * total, pos, R)
    return r[which]


class WeightedBlock:
    """One Mondrian group's fitted calibrator with its rows' test weights: ``predict*`` pass ``weights=``.

    A thin proxy (every other attribute is the calibrator's own), so the Mondrian's dispatch
    needs no second path for weights; a level the group's weights cannot attain is refused
    naming the group.
    """

    def __init__(self, est: Any, weights: ArrayLike, label: str) -> None:
        self._est, self._weights, self._label = est, weights, label

    def __getattr__(self, name: str) -> Any:
        return getattr(self._est, name)

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return getattr(self._est, method)(*args, weights=self._weights, **kwargs)
        except ValueError as err:
            raise ValueError(f"group {self._label}: {err}") from err

    def predict(self, pred: Any, **kwargs: Any) -> Any:
        return self._call("predict", pred, **kwargs)

    def predict_interval(self, pred: Any, confidence_level: ArrayLike | None = None, **kwargs: Any) -> Any:
        return self._call("predict_interval", pred, confidence_level, **kwargs)
