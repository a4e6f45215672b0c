r"""NumPy layer of DtACI on the PIT scale (``OnlineQuantileRecalibrator(rule="dtaci")``).

Dynamically-tuned ACI (Gibbs & Candès 2022, Algorithm 1) runs :math:`k` ACI *experts* with
step sizes :math:`\gamma_1 < \dots < \gamma_k` on the same scores and issues their weighted
mean level. Per central pair of levels (target miscoverage :math:`\alpha = 2p`, see
``calibprob.calibrators.online._aci_pit``), with :math:`s_t = |2u_t - 1|` and
:math:`\beta_t = \sup\{\beta : s_t \le r(\beta)\}` (the largest level whose set still covers the
outcome; :func:`conformal_beta`):

.. math::

    \bar\alpha_t = \sum_i p_t^i \alpha_t^i, \qquad
    \ell_t^i = \ell(\beta_t, \alpha_t^i) = \alpha(\beta_t - \alpha_t^i) - \min(0, \beta_t - \alpha_t^i),

    \alpha_{t+1}^i = \alpha_t^i + \gamma_i(\alpha - \mathrm{err}_t^i), \qquad
    \bar w_t^i = p_t^i e^{-\eta \ell_t^i}, \qquad
    p_{t+1}^i = (1 - \sigma) \frac{\bar w_t^i}{\sum_j \bar w_t^j} + \frac{\sigma}{k},

the pinball loss :math:`\ell`, exponential weights and a fixed share :math:`\sigma` toward the
uniform weights, as the authors' code ``dtaci`` does (isgibbs/DtACI: the issued level is the
weighted mean, :math:`\mathrm{err}_t^i = \mathbb 1\{\alpha_t^i > \beta_t\}`). The defaults are the
paper's: :math:`\gamma_i = 0.001 \cdot 2^i`, :math:`i = 0, \dots, 7`; a window
:math:`I = 100`; :math:`\sigma = 1/(2I)`; and

.. math::

    \eta = \sqrt{\frac{3}{I}}\,\sqrt{\frac{\log(kI) + 2}{((1-\alpha)^2\alpha^3 + \alpha^2(1-\alpha)^3)/3}}

(:func:`dtaci_eta`; salesforce/online_conformal's ``FACI`` uses the same).

Guarantees checked in the tests: every expert is plain ACI, so its own identity
:math:`\frac1T\sum_t \mathrm{err}_t^i - \alpha = (\alpha_1 - \alpha_{T+1}^i)/(\gamma_i T)` holds on
any sequence; and on *every* window :math:`[r, s]` the fixed-share analysis gives the adaptive
regret bound of :func:`fixed_share_regret_bound` against the best single expert.

References
----------
Gibbs, I. and Candès, E. (2022). Conformal inference for online prediction with arbitrary
distribution shifts. arXiv:2208.08401 (JMLR 25, 2024), Algorithm 1 and §3.
Herbster, M. and Warmuth, M. K. (1998). Tracking the best expert. Machine Learning 32 (fixed share).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from calibprob.calibrators.online.aci import aci_threshold

__all__ = [
    "DTACI_GAMMAS",
    "dtaci_eta",
    "pinball",
    "conformal_beta",
    "pit_threshold",
    "dtaci_step",
    "fixed_share_regret_bound",
]

#: The paper's expert step sizes: 0.001 * 2**i, i = 0..7.
DTACI_GAMMAS = 0.001 * 2.0 ** np.arange(8)


def dtaci_eta(alpha: float | np.ndarray, k: int, window: int) -> np.ndarray:
    r"""The paper's learning rate of the expert weights at miscoverage ``alpha``.

    Parameters
    ----------
    alpha : float or ndarray
        Target miscoverage :math:`\alpha \in (0, 1)`.
    k : int
        Number of experts.
    window : int
        The interval length :math:`I` the regret is tuned for.

    Returns
    -------
    ndarray
        :math:`\eta`, shape of ``alpha``.

    Examples
    --------
    >>> round(float(dtaci_eta(0.1, 8, 100)), 3)
    9.823
    """
    a = np.asarray(alpha, float)
    denom = ((1 - a) ** 2 * a**3 + a**2 * (1 - a) ** 3) / 3.0
    return np.sqrt(3.0 / window) * np.sqrt((np.log(k * window) + 2.0) / denom)


def pinball(beta: ArrayLike, theta: ArrayLike, alpha: float) -> np.ndarray:
    r"""The pinball loss :math:`\ell(\beta, \theta) = \alpha(\beta - \theta) - \min(0, \beta - \theta)` (non-negative).

    Examples
    --------
    >>> pinball(0.3, [0.1, 0.5], 0.1).round(3).tolist()
    [0.02, 0.18]
    """
    d = np.asarray(beta, float) - np.asarray(theta, float)
    return alpha * d - np.minimum(0.0, d)


def conformal_beta(sorted_scores: np.ndarray, s: float) -> float:
    r""":math:`\beta_t`: the supremum of the levels :math:`\alpha` whose conformal set covers score ``s``.

    With :math:`n` scores and :math:`m = \#\{S_j < s\}`, the set at :math:`\alpha`
    (threshold :math:`S_{(\lceil (1-\alpha)(n+1) \rceil)}`, the whole line past :math:`n`) covers
    :math:`s` iff :math:`\lceil (1-\alpha)(n+1) \rceil > m`, i.e. :math:`\alpha < 1 - m/(n+1)`.

    Examples
    --------
    >>> import numpy as np
    >>> round(conformal_beta(np.arange(1.0, 10.0), 9.5), 12), conformal_beta(np.arange(1.0, 10.0), 0.5)
    (0.1, 1.0)
    """
    n = np.size(sorted_scores)
    m = int(np.searchsorted(sorted_scores, s, side="left"))
    return 1.0 - m / (n + 1)


def pit_threshold(sorted_scores: np.ndarray, alpha: float) -> float:
    """The PIT-scale threshold at level ``alpha``: the conformal order statistic, 1 for the whole line."""
    return min(aci_threshold(sorted_scores, float(alpha), infinite="allow")[0], 1.0)


def dtaci_step(
    expert_alpha: np.ndarray,
    probs: np.ndarray,
    sorted_scores: np.ndarray,
    s: float,
    alpha: float,
    gammas: np.ndarray,
    eta: float,
    sigma: float,
) -> tuple[np.ndarray, np.ndarray, bool, np.ndarray, np.ndarray]:
    r"""One DtACI step for one central pair.

    Parameters
    ----------
    expert_alpha, probs : ndarray, shape (k,)
        The experts' levels :math:`\alpha_t^i` and weights :math:`p_t^i` (summing to 1).
    sorted_scores : ndarray, shape (n,)
        The scores the thresholds are read from, increasing.
    s : float
        The outcome's score :math:`s_t`.
    alpha : float
        Target miscoverage.
    gammas : ndarray, shape (k,)
    eta, sigma : float

    Returns
    -------
    expert_alpha_next, probs_next : ndarray, shape (k,)
    err : bool
        The issued (weighted-mean) level's miss.
    expert_err : ndarray of bool, shape (k,)
    losses : ndarray, shape (k,)
        :math:`\ell_t^i`.

    Examples
    --------
    >>> import numpy as np
    >>> S = np.linspace(0.05, 0.95, 19)
    >>> a, p, err, e, loss = dtaci_step(np.full(2, 0.1), np.full(2, 0.5), S, 0.99, 0.1, np.array([0.01, 0.1]), 5.0, 0.01)
    >>> bool(err), a.round(3).tolist()                 # a miss: both experts widen
    (True, [0.091, 0.01])
    """
    expert_alpha = np.asarray(expert_alpha, float)
    mean = float(probs @ expert_alpha)
    err = s > pit_threshold(sorted_scores, mean)
    expert_err = np.array([s > pit_threshold(sorted_scores, a) for a in expert_alpha])
    losses = pinball(conformal_beta(sorted_scores, s), expert_alpha, alpha)
    nxt = expert_alpha + gammas * (alpha - expert_err)
    wbar = probs * np.exp(-eta * losses)
    probs_next = (1.0 - sigma) * wbar / wbar.sum() + sigma / probs.size
    return nxt, probs_next / probs_next.sum(), bool(err), expert_err, losses


def fixed_share_regret_bound(
    k: int, length: ArrayLike, eta: float, sigma: float, second_moment: ArrayLike
) -> np.ndarray:
    r"""Fixed share's adaptive regret bound on a window of ``length`` steps, against any single expert.

    For exponential weights with fixed share (:func:`dtaci_step`) and non-negative losses, on every
    window :math:`[r, s]` and every expert :math:`i`,

    .. math::

        \sum_{t=r}^{s} \sum_j p_t^j \ell_t^j - \sum_{t=r}^{s} \ell_t^i \le
        \frac{\log(k/\sigma) + (s - r + 1)\log\frac{1}{1-\sigma}}{\eta}
        + \frac{\eta}{2}\sum_{t=r}^{s}\sum_j p_t^j (\ell_t^j)^2 :

    :math:`p_t^i \ge \sigma/k` at every step, :math:`e^{-x} \le 1 - x + x^2/2` for :math:`x \ge 0`, and
    :math:`p_{t+1}^i \ge (1-\sigma) p_t^i e^{-\eta\ell_t^i}/\sum_j p_t^j e^{-\eta\ell_t^j}` (Herbster &
    Warmuth 1998). The issued mean level's loss is at most :math:`\sum_j p_t^j \ell_t^j` (the pinball loss
    is convex), so the bound also holds for it.

    Parameters
    ----------
    k : int
    length : int or ndarray
        :math:`s - r + 1`.
    eta, sigma : float
    second_moment : float or ndarray
        :math:`\sum_{t=r}^{s}\sum_j p_t^j (\ell_t^j)^2` over the window.

    Returns
    -------
    ndarray

    Examples
    --------
    >>> round(float(fixed_share_regret_bound(8, 100, 9.82, 0.005, 0.2)), 3)
    1.784
    """
    length = np.asarray(length, float)
    return (np.log(k / sigma) + length * np.log(1.0 / (1.0 - sigma))) / eta + 0.5 * eta * np.asarray(second_moment)
