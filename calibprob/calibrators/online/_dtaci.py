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
any sequence; on *every* window :math:`[r, s]` the fixed-share analysis gives the adaptive
regret bound of :func:`fixed_share_regret_bound` against the best single expert; and the paper's
long-run coverage bound (Theorem 3.2; :func:`dtaci_coverage_bound`) holds for the *randomised*
DtACI, whose level is drawn from the experts with probabilities :math:`p_t^i`. Its miss rate in
expectation given the path, :math:`\frac1T\sum_t\sum_i p_t^i\,\mathrm{err}_t^i`, is a function of the
experts and weights only (neither depends on the draw), so the recalibrator counts it
(``expected_misses_``) beside the misses of the weighted mean it issues, for which the paper
states no long-run bound.

References
----------
Gibbs, I. and Candès, E. (2022). Conformal inference for online prediction with arbitrary
distribution shifts. arXiv:2208.08401 (JMLR 25, 2024), Algorithm 1 and §3.
Herbster, M. and Warmuth, M. K. (1998). Tracking the best expert. Machine Learning 32 (fixed share).
"""

from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import ArrayLike

from calibprob.calibrators.online.aci import aci_threshold
from calibprob.predictive import CalibprobWarning

__all__ = [
    "DTACI_GAMMAS",
    "dtaci_eta",
    "pinball",
    "conformal_beta",
    "pit_threshold",
    "dtaci_step",
    "fixed_share_regret_bound",
    "dtaci_coverage_bound",
    "warn_vacuous_dtaci",
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


def dtaci_coverage_bound(gammas: ArrayLike, eta: ArrayLike, sigma: ArrayLike, T: int) -> float:
    r"""Gibbs & Candès's (2024) Theorem 3.2: the long-run coverage bound of the randomised DtACI.

    For the randomised DtACI (Algorithm 1 with the issued level :math:`\alpha_t = \alpha_t^i` drawn with
    probability :math:`p_t^i`), with expert step sizes :math:`\gamma_{\min} = \gamma_1 < \dots < \gamma_k =
    \gamma_{\max}` and learning rates / fixed shares :math:`\eta_t, \sigma_t` that may vary in time, on any
    sequence of outcomes,

    .. math::

        \Bigl|\frac1T\sum_{t=1}^T \mathbb E[\mathrm{err}_t] - \alpha\Bigr| \le
        \frac{1 + 2\gamma_{\max}}{\gamma_{\min} T}
        + \frac{(1 + 2\gamma_{\max})^2}{\gamma_{\min}}\,\frac1T\sum_{t=1}^T \eta_t e^{\eta_t (1 + 2\gamma_{\max})}
        + \frac{2(1 + \gamma_{\max})}{\gamma_{\min}}\,\frac1T\sum_{t=1}^T \sigma_t,

    the expectation over the draws of the issued expert, :math:`\mathbb E[\mathrm{err}_t \mid \text{past}] =
    \sum_i p_t^i \mathrm{err}_t^i`. Where it comes from (and what the tests check step by step): with
    :math:`A_t = \sum_i p_t^i \alpha_t^i/\gamma_i`, each expert's ACI step gives
    :math:`\sum_i p_t^i \alpha_{t+1}^i/\gamma_i = A_t + \alpha - \sum_i p_t^i \mathrm{err}_t^i`, so

    .. math::

        \frac1T\sum_t\sum_i p_t^i\,\mathrm{err}_t^i - \alpha = \frac{A_1 - A_{T+1} + \sum_t D_t}{T},
        \qquad D_t = \sum_i (p_{t+1}^i - p_t^i)\,\frac{\alpha_{t+1}^i}{\gamma_i};

    :math:`\alpha_t^i \in [-\gamma_i, 1 + \gamma_i]` bounds the first term, and the weights' move
    :math:`\lVert p_{t+1} - p_t\rVert_1` (exponential weights on losses at most :math:`1 + 2\gamma_{\max}`, then
    the fixed share) bounds :math:`D_t` by the other two.

    With the constant :math:`\eta` and :math:`\sigma = 1/(2I)` the paper recommends (and the recalibrator
    uses), the last two terms do not shrink with :math:`T`: the bound tends to a constant, and for the
    paper's defaults (:math:`\gamma_{\min} = 0.001`, :math:`I = 100`, :math:`\eta = 9.82` at :math:`\alpha = 0.1`)
    it is astronomically larger than 1, i.e. vacuous. It says something only when :math:`\eta` and
    :math:`\sigma` are small against :math:`\gamma_{\min}` (a long ``regret_window`` and coarse ``gammas``),
    or, as the theorem intends, with :math:`\eta_t, \sigma_t \to 0`.

    Parameters
    ----------
    gammas : array_like, shape (k,)
        The experts' step sizes.
    eta, sigma : float or array_like, shape (T,)
        The learning rate and the fixed share, constant or one per step.
    T : int
        The number of outcomes, :math:`\ge 1`.

    Returns
    -------
    float

    References
    ----------
    Gibbs, I. and Candès, E. (2024). Conformal inference for online prediction with arbitrary distribution
    shifts. Journal of Machine Learning Research 25(162); arXiv:2208.08401, Theorem 3.2 (the randomised
    algorithm; the authors' experiments and code issue the weighted mean). The statement as restated by
    Susmann, H., Chambaz, A. and Josse, J. (2024), AdaptiveConformal: an R package for adaptive conformal
    inference, Computo, §3.3 ("Theoretical guarantees" of DtACI).

    Examples
    --------
    >>> round(dtaci_coverage_bound([0.05, 0.1, 0.2], 1e-3, 0.0, 1000), 4)   # 1.4/50 + 39.2 * 1e-3 * e^(1.4e-3)
    0.0673
    """
    g = np.asarray(gammas, float)
    gmin, gmax = float(g.min()), float(g.max())
    T = int(T)
    span = 1.0 + 2.0 * gmax
    eta_t = np.broadcast_to(np.asarray(eta, float), (T,))
    sigma_t = np.broadcast_to(np.asarray(sigma, float), (T,))
    drift = span**2 / gmin * float(np.mean(eta_t * np.exp(eta_t * span)))
    share = 2.0 * (1.0 + gmax) / gmin * float(np.mean(sigma_t))
    return span / (gmin * T) + drift + share


def warn_vacuous_dtaci(bound: np.ndarray, alpha: np.ndarray, T: int) -> None:
    r"""Warn when Theorem 3.2's bound is :math:`\ge \max(\alpha, 1 - \alpha)` at some pair: it then says nothing."""
    trivial = np.maximum(alpha, 1.0 - alpha)
    vacuous = np.asarray(bound) >= trivial
    if not vacuous.any():
        return
    j = int(np.flatnonzero(vacuous)[0])
    warnings.warn(
        f"the long-run coverage bound is vacuous: {bound[j]:.3g} >= {trivial[j]:.3g} at alpha={alpha[j]:.3g} after "
        f"T={T} outcome(s). Gibbs & Candès's Theorem 3.2 for DtACI does not shrink with T at a fixed learning rate "
        "eta and fixed share sigma = 1/(2 regret_window): its eta and sigma terms are small only when eta and sigma "
        "are small against the smallest of gammas. Pass a longer regret_window and coarser gammas (e.g. "
        "regret_window=10**9, gammas=[0.05, 0.1, 0.2]), or judge coverage by miss_rate().",
        CalibprobWarning,
        stacklevel=4,  # the caller of OnlineQuantileRecalibrator.coverage_error_bound
    )
