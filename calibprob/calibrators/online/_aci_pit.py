r"""NumPy layer of adaptive conformal inference on the PIT scale (``OnlineQuantileRecalibrator(rule="aci")``).

The online recalibrator issues :math:`Q_t \circ R_t`, a base quantile function read at
recalibrated probabilities. Only the outcome's PIT :math:`u_t = F_t(y_t)` under the base
matters, so ACI (Gibbs & Candès 2021) can run on the PIT scale with the central score

.. math::

    s_t = |2 u_t - 1| \in [0, 1],

whose set :math:`\{u : |2u - 1| \le r\}` is the central PIT interval
:math:`[(1 - r)/2, (1 + r)/2]`. The tracked levels come in symmetric pairs
:math:`(p, 1 - p)`, :math:`p < 1/2`; each pair is one central interval at confidence
:math:`c = 1 - 2p` with its own ACI recursion,

.. math::

    r_t = s_{(k)},\ k = \lceil (1 - \alpha_t)(n + 1) \rceil, \qquad
    \mathrm{err}_t = \mathbb 1\{s_t > r_t\}, \qquad
    \alpha_{t+1} = \alpha_t + \gamma\,(2p - \mathrm{err}_t),

and sets :math:`R_t(p) = (1 - r_t)/2`, :math:`R_t(1 - p) = (1 + r_t)/2` — every pair moves
at once, so the whole quantile function moves. A level :math:`p = 1/2` is the centre of
every central interval and stays :math:`R_t(1/2) = 1/2`.

On the PIT scale the paper's infinite set is finite: :math:`k > n` (including
:math:`\alpha_t \le 0`) gives :math:`r_t = 1`, the whole :math:`[0, 1]`, which covers every
outcome, exactly as the whole real line does; :math:`\alpha_t \ge 1` gives :math:`r_t = 0`
(the empty set's zero-width stand-in, as in
:func:`calibprob.calibrators.online.aci_threshold`). The recursion is therefore the paper's,
and its Proposition 4.1 holds per pair for any sequence:
:math:`|\frac1T\sum_t \mathrm{err}_t - 2p| \le (\max(\alpha_1, 1 - \alpha_1) + \gamma)/(\gamma T)`.
The issued forecast :math:`Q_t(R_t(p))` is read at :math:`R_t(p)` clipped to
``[level_floor, 1 - level_floor]`` (finite quantiles), and the recalibrator counts how often
the floor bound.

Reduction to one level: for a location-scale base :math:`Q_t(q) = \mu_t + \sigma_t\Phi^{-1}(q)`,
:math:`s = |2\Phi(z) - 1|` is increasing in :math:`|z| = |y - \mu|/\sigma`, so the same
order statistic is picked, the same misses occur, the :math:`\alpha_t` paths are identical,
and :math:`Q_t((1 \pm r_t)/2) = \mu_t \pm \sigma_t |z|_{(k)}` is
:class:`~calibprob.calibrators.online.AdaptiveConformalInterval`'s interval with the
normalised score (up to the :math:`\Phi`, :math:`\Phi^{-1}` round trip).

References
----------
Gibbs, I. and Candès, E. (2021). Adaptive conformal inference under distribution shift.
NeurIPS 34, §2 and Proposition 4.1.
Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal prediction
improves Bayesian optimization. AISTATS, §4 (the recalibrated forecast :math:`Q_t \circ R_t`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from calibprob.calibrators.online.aci import aci_threshold

__all__ = ["central_pairs", "pit_scores", "aci_pit_map"]

#: How far p_lo + p_hi may be from 1 for two levels to form a central pair (0.01 and 0.99 as floats).
PAIR_TOL = 1e-9


def central_pairs(levels: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Indices ``(lower, upper, middle)`` of the symmetric pairs ``(p, 1 - p)`` of increasing ``levels``.

    Parameters
    ----------
    levels : ndarray, shape (L,)
        Strictly increasing levels in (0, 1).

    Returns
    -------
    lower, upper : ndarray of int, shape (P,)
        ``levels[lower[j]] + levels[upper[j]] == 1`` (to 1e-9), innermost pair last.
    middle : ndarray of int, shape (0,) or (1,)
        The index of the level 1/2, if tracked.

    Raises
    ------
    ValueError
        A level without its mirror image: ACI on the PIT scale tracks central intervals.

    Examples
    --------
    >>> import numpy as np
    >>> [a.tolist() for a in central_pairs(np.array([0.05, 0.25, 0.5, 0.75, 0.95]))]
    [[0, 1], [4, 3], [2]]
    """
    p = np.asarray(levels, float)
    L = p.size
    j = np.arange(L // 2)
    mirror = np.abs(p[j] + p[L - 1 - j] - 1.0) <= PAIR_TOL
    middle = np.array([L // 2]) if L % 2 else np.array([], dtype=int)
    if not mirror.all() or (middle.size and abs(p[middle[0]] - 0.5) > PAIR_TOL):
        unpaired = [float(v) for v in p if not np.any(np.abs(p + v - 1.0) <= PAIR_TOL)]
        raise ValueError(
            f"rule='aci' tracks central intervals, so levels must come in pairs (p, 1 - p); {unpaired} have no "
            "mirror level. Pass levels symmetric about 0.5 (e.g. [0.05, 0.25, 0.5, 0.75, 0.95], or the default "
            "0.01, ..., 0.99)."
        )
    return j, L - 1 - j, middle


def pit_scores(pit: ArrayLike) -> np.ndarray:
    r"""The central conformity score on the PIT scale, :math:`s = |2u - 1|`.

    Parameters
    ----------
    pit : array_like
        PIT values :math:`u \in [0, 1]`.

    Returns
    -------
    ndarray
        :math:`s \in [0, 1]`, same shape.

    Examples
    --------
    >>> pit_scores([0.5, 0.05, 0.975]).round(6).tolist()
    [0.0, 0.9, 0.95]
    """
    return np.abs(2.0 * np.asarray(pit, float) - 1.0)


def aci_pit_map(levels: ArrayLike, sorted_scores: np.ndarray, alpha: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    r"""The map :math:`R_t` at the tracked levels from the pairs' levels :math:`\alpha_t`, and each pair's :math:`r_t`.

    Parameters
    ----------
    levels : ndarray, shape (L,)
        Tracked levels, symmetric about 1/2 (:func:`central_pairs`).
    sorted_scores : ndarray, shape (n,)
        The PIT scores :math:`|2u - 1|` the thresholds are read from, increasing.
    alpha : ndarray, shape (P,)
        :math:`\alpha_t` per pair (``central_pairs`` order).

    Returns
    -------
    R : ndarray, shape (L,)
        :math:`(1 \mp r_t)/2` at the pair's lower and upper level, 1/2 at the middle; in [0, 1],
        not necessarily monotone across pairs.
    r : ndarray, shape (P,)
        The thresholds :math:`r_t \in [0, 1]` (1 where the paper's set is the whole line).

    Examples
    --------
    >>> import numpy as np
    >>> s = np.sort(np.linspace(0.05, 0.95, 19))           # 19 scores: 0.9 reads the 18th smallest
    >>> R, r = aci_pit_map(np.array([0.05, 0.5, 0.95]), s, np.array([0.1]))
    >>> R.round(3).tolist(), r.round(3).tolist()
    ([0.05, 0.5, 0.95], [0.9])
    """
    lower, upper, middle = central_pairs(levels)
    r = np.array([aci_threshold(sorted_scores, float(a), infinite="allow")[0] for a in np.asarray(alpha, float)])
    r = np.minimum(r, 1.0)  # the paper's (-inf, inf) is the whole PIT interval [0, 1]
    R = np.empty(np.size(levels))
    R[lower], R[upper] = (1.0 - r) / 2.0, (1.0 + r) / 2.0
    R[middle] = 0.5
    return R, r
