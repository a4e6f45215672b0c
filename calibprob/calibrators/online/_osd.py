r"""NumPy layer of online quantile recalibration (Deshpande, Marx & Kuleshov 2024, §4).

A forecast :math:`Q_t` (a quantile function) is recalibrated by a map
:math:`R_t : [0, 1] \to \mathbb R` and issued as :math:`Q_t \circ R_t`. Only the
probability integral transform :math:`u_t = Q_t^{-1}(y_t) = F_t(y_t)` of each
outcome matters: the event "``y_t`` at or below the recalibrated level-``p``
quantile" is :math:`o_t(p) = \mathbb 1\{u_t \le R_t(p)\}` (with the paper's
convention :math:`Q(q) = -\infty` for :math:`q < 0` and :math:`+\infty` for
:math:`q > 1`).

Per level :math:`p`, online subgradient descent (OSD) on the quantile pinball
loss (eq. 8) is, written as FTRL on its linearisation (eq. 9),

.. math::

    \theta_{t+1}(p) = \theta_t(p) - \eta\,g_t(p),\qquad
    g_t(p) = o_t(p) - p \in \partial_q \ell_{tp}(y_t, q)\big|_{q = \theta_t(p)},

i.e. :math:`\theta_{t}(p) = \theta_1(p) - \eta \sum_{s<t} (o_s(p) - p)`.
Two deliberate choices, both documented in :class:`~calibprob.calibrators.online.OnlineQuantileRecalibrator`:

* **Start at the identity**, :math:`\theta_1(p) = p` (regulariser
  :math:`\psi(q) = (q - p)^2/2\eta`), not at :math:`0` as the paper's
  :math:`q_t = \eta\sum_{s<t} g_s` literally reads (that would issue
  :math:`Q_t(0) = -\infty` for every level at :math:`t = 1`). The paper's sign
  of the sum is also flipped relative to its own Lemma 4
  (:math:`q^* = -\eta\sum (o_t - p)`); descent is what makes Lemma 3 hold.
  Theorem 2 is unchanged: :math:`|\bar o_T - p| = |\theta_{T+1} - \theta_1|/(\eta T)`.
* **Coupling of the levels.** The paper's Lemma 4 ("the per-level estimates
  never cross") overlooks that :math:`o_t(p)` is evaluated at each level's own
  iterate: with :math:`p_1 = 0.5`, :math:`p_2 = 0.51`, :math:`\eta = 1` and
  :math:`u_1 = 0.505` the iterates go from :math:`(0.5, 0.51)` to
  :math:`(1.0, 0.02)` (see :func:`lemma4_counterexample`). Two remedies are
  implemented:

  ``coupling="independent"`` — eq. (9) literally, one OSD per level; Theorem 2
  holds *exactly* for the iterates :math:`\theta_t(p)`; the issued map is
  their monotone rearrangement (sorting). When iterates cross often (large
  :math:`\eta` or a fine level grid) the rearranged levels lose the guarantee
  and can be badly miscalibrated.

  ``coupling="isotonic"`` (default) — *lazy isotonic projection*: the issued
  map is the isotonic (L2, pool-adjacent-violators) regression of the latent
  iterates, :math:`R_t = \mathrm{iso}(\theta_t)`, and the subgradient is
  taken at the issued value, :math:`o_t(p) = \mathbb 1\{u_t \le R_t(p)\}`.
  :math:`R_t` is monotone by construction and the guarantee survives
  (proof in :func:`coverage_bound`): for level :math:`p_j` (0-based
  :math:`j` of :math:`L`)

  .. math::

      \Bigl|\frac1T\sum_{t=1}^T o_t(p_j) - p_j\Bigr| \le
      \frac{\max\{p_j + \eta(1-p_j) + \eta j/2,\;
      1 - p_j + \eta p_j + \eta (L-1-j)/2\}}{\eta T},

  which is Theorem 2's :math:`(1+\eta)/(\eta T)` for a single level and at
  most :math:`(1 + \eta(L+1)/2)/(\eta T)` in general. Measured on random and
  adversarial streams the isotonic version stays close to Theorem 2's
  constant itself (``tests/calibrators/online/test_recalibrator.py``).

References
----------
Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and
conformal prediction improves Bayesian optimization. AISTATS, §4 and App. G.
Gibbs, I. and Candès, E. (2021). Adaptive conformal inference under
distribution shift. NeurIPS (the argument behind Lemma 3 / Theorem 2).
Chernozhukov, V., Fernández-Val, I. and Galichon, A. (2010). Quantile and
probability curves without crossing. Econometrica 78(3) (rearrangement).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import isotonic_regression

__all__ = [
    "COUPLINGS",
    "publish",
    "osd_step",
    "osd_path",
    "coverage_bound",
    "weighted_coverage_bound",
    "theorem2_bound",
    "interpolate_map",
    "lemma4_counterexample",
]

#: Level couplings accepted by :func:`publish` and
#: :class:`~calibprob.calibrators.online.OnlineQuantileRecalibrator`.
COUPLINGS = ("isotonic", "independent")


def publish(theta: ArrayLike, coupling: str = "isotonic") -> np.ndarray:
    r"""The issued (monotone) recalibration map from the latent iterates.

    Parameters
    ----------
    theta : ndarray, shape (L,)
        Latent OSD iterates, one per level (levels increasing).
    coupling : {"isotonic", "independent"}
        ``"isotonic"``: pool-adjacent-violators projection (L2 isotonic
        regression); ``"independent"``: sorting (monotone rearrangement).

    Returns
    -------
    ndarray, shape (L,)
        Non-decreasing :math:`R_t(p_j)`; may leave [0, 1] (the paper's
        :math:`Q(q<0) = -\infty`, :math:`Q(q>1) = +\infty`).

    References
    ----------
    Barlow, R. E., Bartholomew, D. J., Bremner, J. M. and Brunk, H. D. (1972).
    Statistical Inference under Order Restrictions. Wiley (pool adjacent violators).

    Chernozhukov, V., Fernández-Val, I. and Galichon, A. (2010). Quantile and
    probability curves without crossing. Econometrica 78(3).

    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, eq. (11).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.calibrators.online import publish
    >>> theta = np.array([0.2, 0.1, 0.9])               # crossed iterates
    >>> publish(theta).round(6).tolist()                 # isotonic: pool the violators
    [0.15, 0.15, 0.9]
    >>> publish(theta, "independent").tolist()           # sorted
    [0.1, 0.2, 0.9]
    """
    theta = np.asarray(theta, float)
    if theta.size <= 1 or np.all(np.diff(theta) >= 0):
        return theta.copy()
    if coupling == "independent":
        return np.sort(theta)
    return np.asarray(isotonic_regression(theta).x, float)


def osd_step(
    theta: np.ndarray,
    levels: ArrayLike,
    pit: float,
    eta: float,
    coupling: str = "isotonic",
    weight: float | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""One OSD step on every level.

    .. math::

        \theta_{t+1}(p) = \theta_t(p) + \eta\,\bigl(p - o_t(p)\bigr)

    with :math:`o_t(p) = \mathbb 1\{u_t \le R_t(p)\}` (``"isotonic"``) or
    :math:`\mathbb 1\{u_t \le \theta_t(p)\}` (``"independent"``, eq. 9). With an importance
    ``weight`` :math:`v_t \ge 0` the step is :math:`\eta v_t (p - o_t(p))`: online subgradient
    descent on the weighted pinball loss :math:`v_t \ell_{tp}` (``weighted_coverage_bound``).

    Parameters
    ----------
    theta : ndarray, shape (L,)
    levels : ndarray, shape (L,)
    pit : float
        :math:`u_t \in [0, 1]`, the outcome's PIT under the *base* forecast.
    eta : float
        Step size :math:`\eta > 0`.
    coupling : {"isotonic", "independent"}
    weight : float, optional
        :math:`v_t`; None is the unweighted step (the same arithmetic as ever).

    Returns
    -------
    theta_next : ndarray, shape (L,)
    issued : ndarray, shape (L,)
        The map :math:`R_t` issued before ``pit`` was seen.
    hit : ndarray of bool, shape (L,)
        The indicators :math:`o_t(p)` used in the update.

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, eq. (8)–(9).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.calibrators.online import osd_step
    >>> levels = np.array([0.1, 0.5, 0.9])
    >>> theta, issued, hit = osd_step(levels.copy(), levels, pit=0.3, eta=0.5)
    >>> hit.tolist()                 # the outcome is below the 0.5 and 0.9 quantiles
    [False, True, True]
    >>> theta.round(3).tolist()      # theta + eta (p - o)
    [0.15, 0.25, 0.85]
    """
    theta = np.asarray(theta, float)
    issued = publish(theta, coupling)
    anchor = issued if coupling == "isotonic" else theta
    hit = pit <= anchor
    step = eta if weight is None else eta * weight
    return theta + step * (np.asarray(levels, float) - hit), issued, hit


def osd_path(
    pit: ArrayLike, levels: ArrayLike, eta: float, *, coupling: str = "isotonic", theta0: ArrayLike | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Run OSD over a stream of PIT values.

    Parameters
    ----------
    pit : array_like, shape (T,)
        :math:`u_1, \dots, u_T \in [0, 1]` in stream order.
    levels : array_like, shape (L,)
        Increasing levels in (0, 1).
    eta : float
    coupling : {"isotonic", "independent"}
    theta0 : array_like, shape (L,), optional
        Starting iterates; default the identity :math:`\theta_1(p) = p`.

    Returns
    -------
    theta : ndarray, shape (T + 1, L)
        Latent iterates :math:`\theta_1, \dots, \theta_{T+1}`.
    issued : ndarray, shape (T + 1, L)
        Issued monotone maps :math:`R_1, \dots, R_{T+1}` (row ``t`` was used
        for outcome ``t``; the last row is the map for the next forecast).
    hit : ndarray of bool, shape (T, L)
        The indicators :math:`o_t(p)` that drove the updates.

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, eq. (9)–(11) and Theorem 2.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.calibrators.online import osd_path
    >>> pit = np.random.default_rng(0).uniform(size=200)   # a calibrated stream
    >>> theta, issued, hit = osd_path(pit, np.array([0.1, 0.5, 0.9]), eta=0.5)
    >>> theta.shape, issued.shape, hit.shape
    ((201, 3), (201, 3), (200, 3))
    >>> bool(np.all(np.abs(hit.mean(axis=0) - [0.1, 0.5, 0.9]) <= (1 + 0.5) / (0.5 * 200)))
    True
    """
    u = np.asarray(pit, float).ravel()
    levels = np.asarray(levels, float)
    L = levels.size
    th = levels.copy() if theta0 is None else np.asarray(theta0, float).copy()
    theta = np.empty((u.size + 1, L))
    issued = np.empty((u.size + 1, L))
    hit = np.empty((u.size, L), dtype=bool)
    for t, ut in enumerate(u):
        theta[t] = th
        th, issued[t], hit[t] = osd_step(th, levels, ut, eta, coupling)
    theta[-1] = th
    issued[-1] = publish(th, coupling)
    return theta, issued, hit


def coverage_bound(levels: ArrayLike, eta: float, T: ArrayLike, *, coupling: str = "isotonic") -> np.ndarray:
    r"""Proven bound on :math:`|\frac1T\sum_t o_t(p_j) - p_j|`, per level.

    ``"independent"`` (Theorem 2, sharpened by starting at :math:`\theta_1 = p`):
    Lemma 3 gives :math:`\theta_t \in [-\eta(1-p),\ 1 + \eta p]`, hence

    .. math::

        \Bigl|\bar o_T - p\Bigr| = \frac{|\theta_{T+1} - p|}{\eta T}
        \le \frac{\max\{p + \eta(1-p),\ 1 - p + \eta p\}}{\eta T}
        \le \frac{1 + \eta}{\eta T}.

    ``"isotonic"``: three facts give the level-dependent bound of the module
    docstring. (i) Adjacent violators are pooled: at a block boundary
    :math:`\theta_j \le R_j < R_{j+1} \le \theta_{j+1}`. (ii) Hence adjacent
    latent gaps :math:`\theta_{j+1} - \theta_j` never go below :math:`-\eta`:
    inside a block both levels get the same :math:`o`, so the gap grows by
    :math:`\eta(p_{j+1} - p_j)`; across a boundary it starts positive and
    changes by at least :math:`-\eta`. (iii) By the min-max formula of
    isotonic regression, :math:`R_j \le \max_{a \le j} \mathrm{avg}\,
    \theta_{a..j} \le \theta_j + \eta j/2` and :math:`R_j \ge \theta_j -
    \eta(L-1-j)/2`; so :math:`\theta_j < -\eta j/2` forces :math:`o = 0` and
    :math:`\theta_j > 1 + \eta(L-1-j)/2` forces :math:`o = 1`, and Lemma 3's
    induction bounds :math:`\theta_{T+1,j}`.

    Parameters
    ----------
    levels : array_like, shape (L,)
    eta : float
    T : int or array_like
        Number of outcomes seen (broadcast against the levels as ``(..., 1)``).
    coupling : {"isotonic", "independent"}

    Returns
    -------
    ndarray, shape ``np.shape(T) + (L,)``

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, Theorem 2 and Lemma 3.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.calibrators.online import coverage_bound, theorem2_bound
    >>> coverage_bound([0.1, 0.5, 0.9], eta=0.5, T=100).round(3).tolist()
    [0.029, 0.02, 0.029]
    >>> float(theorem2_bound(0.5, 100))                  # the single-level constant
    0.03
    """
    p = np.asarray(levels, float)
    L = p.size
    j = np.arange(L)
    below: np.ndarray
    above: np.ndarray
    if coupling == "independent":
        below, above = np.zeros(L), np.zeros(L)
    else:
        below, above = eta * j / 2.0, eta * (L - 1 - j) / 2.0
    num = np.maximum(p + eta * (1 - p) + below, 1 - p + eta * p + above)
    T = np.asarray(T, float)[..., None]
    return num / (eta * T)


def weighted_coverage_bound(
    levels: ArrayLike, eta: float, weight_sum: float, weight_max: float, *, coupling: str = "isotonic"
) -> np.ndarray:
    r"""Proven bound on the importance-weighted coverage error :math:`|\sum_t v_t (o_t(p_j) - p_j)| / \sum_t v_t`.

    Importance-weighted OSD (:func:`osd_step` with ``weight``) moves each iterate by at most
    :math:`\eta v_{\max}` per outcome, so :func:`coverage_bound`'s argument (Lemma 3's
    induction, and the isotonic coupling's facts (i)-(iii)) holds with :math:`\eta v_{\max}` in
    place of :math:`\eta` in the iterates' range, while the telescoping sum
    :math:`\theta_{T+1} - \theta_1 = \eta \sum_t v_t (p - o_t)` puts :math:`\eta \sum_t v_t` in
    the denominator:

    .. math::

        \frac{|\sum_t v_t (o_t(p) - p)|}{\sum_t v_t} \le
        \frac{\max\{p + \eta v_{\max}(1-p),\ 1 - p + \eta v_{\max} p\}}{\eta \sum_t v_t}
        \quad(\text{``independent''}),

    plus :math:`\eta v_{\max} j/2` and :math:`\eta v_{\max}(L-1-j)/2` for ``"isotonic"``. For any
    sequence of outcomes and bounded weights; all :math:`v_t = 1` is :func:`coverage_bound`.
    With :math:`v_t = d\tilde P_X/dP_X(x_t)` (a covariate shift of the stream towards
    :math:`\tilde P`) the weighted average estimates the coverage under :math:`\tilde P`.

    Parameters
    ----------
    levels : array_like, shape (L,)
    eta : float
    weight_sum, weight_max : float
        :math:`\sum_t v_t > 0` and :math:`\max_t v_t` over the outcomes seen.
    coupling : {"isotonic", "independent"}

    Returns
    -------
    ndarray, shape (L,)

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.calibrators.online._osd import coverage_bound, weighted_coverage_bound
    >>> bool(np.allclose(weighted_coverage_bound([0.1, 0.9], 0.5, 100.0, 1.0), coverage_bound([0.1, 0.9], 0.5, 100)))
    True
    """
    vmax = float(weight_max)
    return coverage_bound(levels, eta * vmax, float(weight_sum) / vmax, coupling=coupling)


def theorem2_bound(eta: float, T: ArrayLike) -> np.ndarray:
    r"""Theorem 2's bound :math:`(1 + \eta)/(\eta T)` (Deshpande et al. 2024, eq. 10).

    Parameters
    ----------
    eta : float
        Step size :math:`\eta > 0`.
    T : int or array_like
        Number of outcomes seen.

    Returns
    -------
    ndarray
        :math:`(1 + \eta)/(\eta T)`, shape of ``T``.

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, Theorem 2, eq. (10).

    Examples
    --------
    >>> from calibprob.calibrators.online import theorem2_bound
    >>> float(theorem2_bound(0.25, 500))
    0.01
    """
    return (1.0 + eta) / (eta * np.asarray(T, float))


def interpolate_map(levels: ArrayLike, issued: ArrayLike, p: ArrayLike) -> np.ndarray:
    r"""The recalibration map at arbitrary probabilities, monotone.

    Linear interpolation of :math:`(p_j, R(p_j))` extended by the knots
    :math:`(0, \min(0, R(p_1)))` and :math:`(1, \max(1, R(p_L)))`, so that the
    map stays monotone and equals the identity's end points when the map is
    inside [0, 1] (the paper: "approximate :math:`R_t` via a linear
    interpolation at a number of quantiles").

    Parameters
    ----------
    levels, issued : ndarray, shape (L,)
    p : array_like
        Probabilities in [0, 1].

    Returns
    -------
    ndarray, shape of ``p``

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, §4.2 (after eq. 11).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.calibrators.online import interpolate_map
    >>> interpolate_map(np.array([0.1, 0.5, 0.9]), np.array([0.2, 0.5, 0.8]), [0.0, 0.3, 1.0]).round(6).tolist()
    [0.0, 0.35, 1.0]
    """
    levels = np.asarray(levels, float)
    issued = np.asarray(issued, float)
    xs = np.concatenate([[0.0], levels, [1.0]])
    ys = np.concatenate([[min(0.0, issued[0])], issued, [max(1.0, issued[-1])]])
    return np.interp(np.asarray(p, float), xs, ys)


def lemma4_counterexample() -> tuple[np.ndarray, np.ndarray]:
    r"""Two per-level OSD iterates that cross after one step (eq. 9 as printed).

    Levels ``(0.5, 0.51)``, :math:`\eta = 1`, start at the identity, one
    outcome with PIT 0.505: the lower level is not covered (:math:`o = 0`,
    step :math:`+0.5`), the upper one is (:math:`o = 1`, step :math:`-0.49`).

    Returns
    -------
    before, after : ndarray, shape (2,)
        ``(0.5, 0.51)`` and ``(1.0, 0.02)``: the order is reversed.

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, Lemma 4 and eq. (9).

    Examples
    --------
    >>> from calibprob.calibrators.online import lemma4_counterexample
    >>> before, after = lemma4_counterexample()
    >>> bool(before[0] < before[1]), bool(after[0] > after[1])
    (True, True)
    """
    levels = np.array([0.5, 0.51])
    after, _, _ = osd_step(levels, levels, 0.505, 1.0, coupling="independent")
    return levels, after
