r"""Aggregated adaptive conformal inference (AgACI; Zaffran et al. 2022) around any predictive Dataset.

ACI's step :math:`\gamma` trades adaptation against stability, and no single value suits every stream.
AgACI runs :math:`K` ACI experts over a grid of :math:`\gamma` (each the recursion of
:class:`~calibprob.AdaptiveConformalInterval` on the same scores) and aggregates their interval ends
online, *separately for the lower and the upper end*, by Bernstein online aggregation (BOA; Wintenberger
2017) on the pinball loss at :math:`\alpha/2` (lower) and :math:`1 - \alpha/2` (upper), with the gradient
trick, as the authors' code does (``opera::mixture(model="BOA", loss.type=list(name="pinball", tau=...),
loss.gradient=TRUE)``, one call per end, in ``AgACI/Script/acp_gamma.R`` of
mzaffran/AdaptiveConformalPredictionsTimeSeries). Infinite expert ends are thresholded before
aggregation: calibprob replaces :math:`\pm\infty` by the end at the largest score (the widest finite
interval the data support). The experts themselves keep the paper's sets (an infinite set never misses).

BOA (``opera``'s ``BOA.R``), per end, with experts' ends :math:`x_t^k`, weights :math:`p_t^k`, the
aggregate :math:`\hat x_t = \sum_k p_t^k x_t^k` and the linearised pinball loss
:math:`g_t = \mathbb 1\{y_t < \hat x_t\} - \tau`:

.. math::

    r_t^k = g_t(\hat x_t - x_t^k), \qquad E_{t+1}^k = E_t^k + 2.2\,(r_t^k)^2, \qquad
    \tilde R_{t+1}^k = \tilde R_t^k + r_t^k - \frac{(r_t^k)^2}{\sqrt{E_{t+1}^k}},

    p_{t+1}^k \propto \exp\Bigl(-\tfrac12 \log E_{t+1}^k + \tilde R_{t+1}^k / \sqrt{E_{t+1}^k}\Bigr)

(uniform prior; experts with :math:`E^k = 0` keep their prior weight). AgACI carries regret guarantees
only; it has no long-run coverage bound, so none is reported (``miss_rate()`` is measured).

References
----------
Zaffran, M., Féron, O., Goude, Y., Josse, J. and Dieuleveut, A. (2022). Adaptive conformal
predictions for time series. ICML, §4 (AgACI).
Wintenberger, O. (2017). Optimal learning with Bernstein online aggregation. Machine Learning 106.
Gibbs, I. and Candès, E. (2021). Adaptive conformal inference under distribution shift. NeurIPS 34.
"""

from __future__ import annotations

from typing import Self

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.estimator import BaseEstimator
from calibprob._core.validation import check_array, check_int
from calibprob.calibrators.conformal._intervals import resolve_levels
from calibprob.calibrators.conformal.scores import Score
from calibprob.calibrators.grouping.mondrian import GroupsLike, fit_with_groups
from calibprob.calibrators.online._interval import OnlineInterval, symmetric_score
from calibprob.calibrators.online.aci import aci_threshold

__all__ = ["AgACIInterval", "AGACI_GAMMAS", "boa_weights", "boa_update"]

#: The default grid of ACI step sizes (the grid of the authors' result files, 0.0005 to 0.09).
AGACI_GAMMAS = (0.0005, 0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.009) + tuple(
    round(0.01 * i, 2) for i in range(1, 10)
)


def boa_weights(eta_inv2: np.ndarray, r_reg: np.ndarray) -> np.ndarray:
    """BOA's weights from its state (uniform prior), per row; experts with ``eta_inv2 == 0`` keep the prior.

    Examples
    --------
    >>> import numpy as np
    >>> boa_weights(np.zeros((1, 3)), np.zeros((1, 3))).tolist()
    [[0.3333333333333333, 0.3333333333333333, 0.3333333333333333]]
    """
    E = np.atleast_2d(eta_inv2)
    R = np.atleast_2d(r_reg)
    w = np.ones_like(E)
    for i in range(E.shape[0]):
        nz = E[i] > 0
        if nz.any():
            aux = -np.log(E[i, nz]) / 2.0 + R[i, nz] / np.sqrt(E[i, nz])
            e = np.exp(aux - aux.max())
            w[i, nz] = nz.sum() * e / e.sum()
    return w / w.sum(axis=1, keepdims=True)


def boa_update(
    eta_inv2: np.ndarray, r_reg: np.ndarray, experts: np.ndarray, y: float, tau: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One BOA step with the gradient trick on the pinball loss at ``tau``; returns (eta_inv2, r_reg, aggregate).

    ``experts`` has shape (L, K): one row per interval level, each with its own state rows.
    """
    p = boa_weights(eta_inv2, r_reg)
    pred = np.sum(p * experts, axis=1)
    g = (y < pred).astype(float) - np.asarray(tau, float)
    r = g[:, None] * (pred[:, None] - experts)
    E = eta_inv2 + 2.2 * r**2
    nz = E > 0
    reg = np.where(nz, r - r**2 / np.sqrt(np.where(nz, E, 1.0)), 0.0)
    return E, r_reg + reg, pred


class AgACIInterval(OnlineInterval, BaseEstimator):
    r"""AgACI: ACI experts over a grid of step sizes, their ends aggregated by BOA, per end (Zaffran et al. 2022).

    Parameters
    ----------
    confidence_level : float or sequence of float, default 0.9
        Target coverage :math:`1 - \alpha` per level (each its own experts and aggregations).
    gammas : sequence of float, optional
        The experts' ACI step sizes, increasing in (0, 1); default ``calibprob.calibrators.online.agaci.AGACI_GAMMAS`` (0.0005 ... 0.09).
    score : {"absolute", "normalized"} or Score, default "absolute"
    beta, eps : float
        The normalised score's exponent and floor.
    window : int, optional
        Keep the ``window`` most recent scores (the fit's, then each outcome's); otherwise the
        calibration scores until :meth:`calibrate` replaces them.

    Attributes
    ----------
    expert_alpha_ : ndarray, shape (L, K)
        The experts' ACI levels :math:`\alpha_t^k`.
    lower_state_, upper_state_ : dict of ndarray
        BOA's state per end (``eta_inv2``, ``r_reg``, shape (L, K)).
    misses_, n_thresholded_ : ndarray of int, shape (L,)
        Misses of the aggregated interval; outcomes where some expert's end was infinite and thresholded.
    n_updates_ : int

    References
    ----------
    Zaffran, M., Féron, O., Goude, Y., Josse, J. and Dieuleveut, A. (2022). Adaptive conformal
    predictions for time series. ICML.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> ag = calibprob.AgACIInterval(confidence_level=0.8, window=50)
    >>> _ = ag.fit(calibprob.normal(np.zeros(50), np.ones(50)), rng.normal(size=50))
    >>> _ = ag.update(calibprob.normal(np.zeros(400), np.ones(400)), 2.0 * rng.normal(size=400))
    >>> bool(abs(ag.miss_rate()[0] - 0.2) < 0.05)
    True
    """

    def __init__(
        self,
        *,
        confidence_level: ArrayLike = 0.9,
        gammas: ArrayLike | None = None,
        score: str | Score = "absolute",
        beta: float = 1.0,
        eps: float = 0.0,
        window: int | None = None,
    ) -> None:
        self.confidence_level = confidence_level
        self.gammas = gammas
        self.score = score
        self.beta = beta
        self.eps = eps
        self.window = window

    _fitted = "expert_alpha_"
    _interval_method = "agaci"
    #: the sorted scores are a view of ``scores_``: not saved, rebuilt on load
    _transient_attrs: tuple[str, ...] = ("_sorted",)

    def _gammas(self) -> np.ndarray:
        if self.gammas is None:
            return np.asarray(AGACI_GAMMAS, float)
        g = check_array(np.atleast_1d(self.gammas), "gammas", ndim=1)
        if g.size < 1 or np.any(g <= 0) or np.any(g >= 1) or np.any(np.diff(g) <= 0):
            raise ValueError(
                f"gammas must be increasing step sizes in (0, 1) (AgACI's experts); got {self.gammas!r}. Pass e.g. "
                "[0.001, 0.01, 0.05], or None for the authors' grid 0.0005 ... 0.09."
            )
        return g

    def _check_params(self) -> tuple[np.ndarray, Score]:
        levels, _ = resolve_levels(self.confidence_level)
        self._gammas()
        if self.window is not None:
            check_int(self.window, "window", minimum=1)
        return levels, symmetric_score(self.score, self.beta, self.eps, "AgACI's experts adapt")

    def fit(self, pred_cal: xr.Dataset, y_cal: ArrayLike, *, groups: GroupsLike = None) -> Self:
        """Score the calibration set, start every expert at the target level, BOA at uniform weights; returns ``self``.

        With ``groups=`` each group runs its own experts and aggregations (:class:`calibprob.Mondrian`).
        """
        levels, score = self._check_params()
        if fit_with_groups(self, pred_cal, y_cal, groups):
            return self
        self.levels_, self.score_ = levels, score
        K = self._gammas().size
        self.expert_alpha_ = np.repeat((1.0 - levels)[:, None], K, axis=1)
        self.lower_state_ = {"eta_inv2": np.zeros((levels.size, K)), "r_reg": np.zeros((levels.size, K))}
        self.upper_state_ = {"eta_inv2": np.zeros((levels.size, K)), "r_reg": np.zeros((levels.size, K))}
        self.misses_ = np.zeros(levels.size, np.int64)
        self.n_thresholded_ = np.zeros(levels.size, np.int64)
        self.n_updates_ = 0
        self.last_time_ = None
        return self.calibrate(pred_cal, y_cal)

    def calibrate(self, pred_cal: xr.Dataset, y_cal: ArrayLike) -> Self:
        """Replace the scores by a new calibration set's, keeping the experts and weights; returns ``self``."""
        self._calibration_scores(pred_cal, y_cal)
        return self

    def _expert_thresholds(self) -> tuple[np.ndarray, np.ndarray]:
        """The experts' thresholds (L, K) with the paper's infinities, and thresholded at the largest score."""
        raw = np.array(
            [[aci_threshold(self._sorted, float(a), infinite="allow")[0] for a in row] for row in self.expert_alpha_]
        )
        return raw, np.minimum(raw, float(self._sorted[-1]))

    def _ends(
        self, mu: np.ndarray, scale: np.ndarray, thresholds: tuple[np.ndarray, np.ndarray] | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per row: the aggregated (lower, upper) over (obs, L), and whether some expert was thresholded."""
        raw, thr = self._expert_thresholds() if thresholds is None else thresholds
        p_lo = boa_weights(self.lower_state_["eta_inv2"], self.lower_state_["r_reg"])
        p_hi = boa_weights(self.upper_state_["eta_inv2"], self.upper_state_["r_reg"])
        lo = mu[:, None] - scale[:, None] * np.sum(p_lo * thr, axis=1)[None, :]
        hi = mu[:, None] + scale[:, None] * np.sum(p_hi * thr, axis=1)[None, :]
        return lo, hi, np.isinf(raw).any(axis=1)

    def _interval_parts(
        self, mu: np.ndarray, sigma: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], dict[str, float]]:
        """The aggregated ends (``thresholded`` per level: some expert's end was infinite and thresholded)."""
        scale = np.broadcast_to(np.asarray(self.score_.scale(sigma), float), mu.shape)
        lo, hi, thresholded = self._ends(mu, scale)
        return lo, hi, {"thresholded": thresholded}, {}

    def _take(self, mu: np.ndarray, sigma: np.ndarray, y: np.ndarray) -> None:
        """Per outcome: the aggregated interval's miss, both BOA steps, and every expert's ACI step."""
        scale = np.broadcast_to(np.asarray(self.score_.scale(sigma), float), np.shape(mu))
        s = np.asarray(self.score_.score(y, mu, sigma), float).reshape(-1)
        gammas = self._gammas()
        alpha = 1.0 - self.levels_
        window = self._score_window()
        for m, c, yt, st in zip(np.ravel(mu), np.ravel(scale), y, s, strict=True):
            raw, thr = self._expert_thresholds()
            lo, hi, thresholded = self._ends(np.array([m]), np.array([c]), (raw, thr))
            self.misses_ += (yt < lo[0]) | (yt > hi[0])
            self.n_thresholded_ += thresholded
            ends = np.full_like(thr, m)
            E, R, _ = boa_update(
                self.lower_state_["eta_inv2"], self.lower_state_["r_reg"], ends - c * thr, yt, alpha / 2
            )
            self.lower_state_ = {"eta_inv2": E, "r_reg": R}
            E, R, _ = boa_update(
                self.upper_state_["eta_inv2"], self.upper_state_["r_reg"], ends + c * thr, yt, 1 - alpha / 2
            )
            self.upper_state_ = {"eta_inv2": E, "r_reg": R}
            err = st > raw  # each expert's own (paper) set
            self.expert_alpha_ = self.expert_alpha_ + gammas[None, :] * (alpha[:, None] - err)
            self.n_updates_ += 1
            self._push_score(window, st)
