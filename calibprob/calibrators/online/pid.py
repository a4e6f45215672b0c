r"""Conformal PID control (Angelopoulos, Candès & Tibshirani 2023) for one interval per level.

:class:`ConformalPIDInterval` issues :math:`\mu \pm q_t\,\text{scale}` around any predictive Dataset,
where :math:`q_t` is the PID threshold of ``calibprob.calibrators.online._pid`` run on the stream's
conformity scores (absolute or normalised residuals): quantile tracking with the proportional step, the
saturating integrator and a scorecaster. ``fit`` scores a calibration stream (its scores start the
history, and the split-conformal threshold starts :math:`q_1`); ``update(pred, y)`` takes outcomes in
time order.

Never infinite unless asked: the integrator :math:`K_I\tan(\cdot)` is :math:`+\infty` once its argument
saturates, which the paper issues as the whole line. By default the threshold is then the largest score
seen (the widest interval the data support) and ``n_clipped_`` counts it; ``allow_infinite=True`` keeps
the paper's infinite interval. The long-run bound (:meth:`ConformalPIDInterval.coverage_error_bound`)
holds either way: it rests only on the P part's identity.

References
----------
Angelopoulos, A. N., Candès, E. J. and Tibshirani, R. J. (2023). Conformal PID control for time
series prediction. NeurIPS 36.
"""

from __future__ import annotations

from typing import Self

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.estimator import BaseEstimator, check_is_fitted, check_predictive
from calibprob._core.validation import check_choice, check_targets
from calibprob.calibrators.conformal._intervals import resolve_levels
from calibprob.calibrators.conformal.scores import Score
from calibprob.calibrators.conformal.split_calibrator import predictive_mean_std
from calibprob.calibrators.grouping.mondrian import GroupsLike, fit_with_groups
from calibprob.calibrators.online._interval import OnlineInterval, symmetric_score
from calibprob.calibrators.online._pid import (
    DEFAULT_HISTORY,
    PROPORTIONAL,
    Scorecaster,
    check_pid_params,
    make_scorecaster,
    pid_bound,
    pid_new_state,
    pid_step,
)
from calibprob.calibrators.online._time import check_stream_times
from calibprob.calibrators.online.aci import aci_threshold

__all__ = ["ConformalPIDInterval", "history_length", "check_burnin_fits"]


def history_length(burnin: int, scorecaster: Scorecaster | None) -> int:
    """How many past scores the PID state keeps: the burn-in window and what the scorecaster reads."""
    return max(int(burnin), int(getattr(scorecaster, "window", DEFAULT_HISTORY)) if scorecaster is not None else 1)


def check_burnin_fits(burnin: int, n: int, what: str) -> None:
    """The burn-in must fit in the calibration stream: its scores set the proportional step."""
    if burnin > n:
        raise ValueError(
            f"burnin={burnin} is longer than the data: {what} holds {n} outcome(s), and the proportional step is read "
            f"from the score range of the last burnin scores. Pass burnin <= {n}, or calibrate on at least {burnin} "
            "outcomes."
        )


class ConformalPIDInterval(OnlineInterval, BaseEstimator):
    r"""Conformal PID control: intervals whose score threshold is steered by a P, an I and a scorecaster term.

    For each confidence level :math:`c = 1 - \alpha` the threshold issued before outcome :math:`t + 1` is
    :math:`q_{t+1} = \hat q_{t+1} + K_I\tan\bigl(\sum_{i\le t}(\mathrm{err}_i - \alpha)\log t/(C_{\mathrm{sat}} t)\bigr) + g_{t+1}`,
    :math:`\hat q_{t+1} = \hat q_t + \eta_t(\mathrm{err}_t - \alpha)`, :math:`g` the scorecaster's forecast
    of the next score (``calibprob.calibrators.online._pid``). The interval is the score's inverse at
    :math:`q_t` around the base's prediction (:math:`\mu \pm q_t` for the absolute score).

    Parameters
    ----------
    confidence_level : float or sequence of float, default 0.9
        Target coverage :math:`1 - \alpha` per level, each its own controller.
    lr : float, default 0.1
        The P gain (the paper's :math:`\eta`, :math:`K_P`); the authors' grid is 1, 0.5, 0.1, 0.05.
    proportional_lr : {"burnin", "rolling", "none"}, default "burnin"
        :math:`\eta_t = \mathrm{lr}\cdot(\max - \min)` of ``burnin`` scores: fixed from the calibration
        stream's last ``burnin`` (the long-run bound is then the paper's :math:`(B+\eta)/(\eta T)`), the
        last ``burnin`` at every step (the authors' code; the bound grows with the step's variation), or
        ``lr`` itself.
    csat, ki : float, default 5.0, 10.0
        The integrator's :math:`C_{\mathrm{sat}} > 0` and :math:`K_I \ge 0` (0 switches it off); the
        authors' elec2 values.
    burnin : int, default 50
        Scores the proportional step is read from; the scorecaster starts after ``burnin`` scores.
        Must not exceed the calibration stream.
    scorecaster : {"ar"}, None or object, default "ar"
        ``"ar"``: :class:`~calibprob.calibrators.online.ARScorecaster` (AR(3) on the last 200 scores);
        ``None``: P + I only; any object with ``forecast(history) -> float``, e.g.
        :class:`~calibprob.calibrators.online.BaseScorecaster` around a calibprob base.
    score : {"absolute", "normalized"} or Score, default "absolute"
    beta, eps : float
        The normalised score's exponent and floor.
    allow_infinite : bool, default False
        Issue the paper's infinite interval when the integrator saturates (default: the largest score
        seen, counted in ``n_clipped_``).

    Attributes
    ----------
    levels_ : ndarray, shape (L,)
    misses_ : ndarray of int, shape (L,)
    n_clipped_ : ndarray of int, shape (L,)
        Outcomes whose infinite threshold was replaced by the largest score.
    n_updates_ : int
    pid_state_ : dict of ndarray
        The controllers' state (P part, integrator, scorecast, step-size record, score history).

    References
    ----------
    Angelopoulos, A. N., Candès, E. J. and Tibshirani, R. J. (2023). Conformal PID control for time
    series prediction. NeurIPS 36.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> pid = calibprob.ConformalPIDInterval(confidence_level=0.8, burnin=50)
    >>> _ = pid.fit(calibprob.normal(np.zeros(50), np.ones(50)), rng.normal(size=50))
    >>> _ = pid.update(calibprob.normal(np.zeros(600), np.ones(600)), 3.0 * rng.normal(size=600))
    >>> bool(abs(pid.miss_rate()[0] - 0.2) <= pid.coverage_error_bound()[0])
    True
    """

    def __init__(
        self,
        *,
        confidence_level: ArrayLike = 0.9,
        lr: float = 0.1,
        proportional_lr: str = "burnin",
        csat: float = 5.0,
        ki: float = 10.0,
        burnin: int = 50,
        scorecaster: str | Scorecaster | None = "ar",
        score: str | Score = "absolute",
        beta: float = 1.0,
        eps: float = 0.0,
        allow_infinite: bool = False,
    ) -> None:
        self.confidence_level = confidence_level
        self.lr = lr
        self.proportional_lr = proportional_lr
        self.csat = csat
        self.ki = ki
        self.burnin = burnin
        self.scorecaster = scorecaster
        self.score = score
        self.beta = beta
        self.eps = eps
        self.allow_infinite = allow_infinite

    _fitted = "pid_state_"
    _interval_method = "conformal-pid"
    #: the scorecaster object is rebuilt from the parameter on load
    _transient_attrs: tuple[str, ...] = ("_scorecaster",)

    def _rebuild_after_load(self) -> None:
        self._scorecaster = make_scorecaster(self.scorecaster)

    def _check_params(self) -> tuple[np.ndarray, Score]:
        levels, _ = resolve_levels(self.confidence_level)
        check_pid_params(self.lr, self.csat, self.ki, self.burnin)
        check_choice(self.proportional_lr, "proportional_lr", PROPORTIONAL)
        if not isinstance(self.allow_infinite, (bool, np.bool_)):
            raise TypeError(f"allow_infinite must be True or False; got {self.allow_infinite!r}.")
        make_scorecaster(self.scorecaster)
        return levels, symmetric_score(self.score, self.beta, self.eps, "this PID controller steers")

    def _pid_kwargs(self) -> dict:
        lr, csat, ki, burnin = check_pid_params(self.lr, self.csat, self.ki, self.burnin)
        return {
            "lr": lr,
            "csat": csat,
            "ki": ki,
            "burnin": burnin,
            "proportional_lr": self.proportional_lr,
            "scorecaster": self._scorecaster,
            "n_keep": history_length(burnin, self._scorecaster),
        }

    def fit(self, pred_cal: xr.Dataset, y_cal: ArrayLike, *, groups: GroupsLike = None) -> Self:
        """Score the calibration stream; its split-conformal threshold starts each controller; returns ``self``."""
        levels, score = self._check_params()
        if fit_with_groups(self, pred_cal, y_cal, groups):
            return self
        pred = check_predictive(pred_cal, self, "pred_cal")
        y = check_targets(y_cal, pred.sizes["obs"], "y_cal")
        check_burnin_fits(int(self.burnin), y.size, "pred_cal")
        times = check_stream_times(pred, None, "pred_cal")
        mu, sigma = predictive_mean_std(pred)
        scores = np.asarray(score.score(y, mu, sigma), float).reshape(-1)
        self.levels_, self.score_ = levels, score
        self.alpha_target_ = 1.0 - levels
        self._scorecaster = make_scorecaster(self.scorecaster)
        srt = np.sort(scores)
        start = [aci_threshold(srt, float(a))[0] for a in self.alpha_target_]
        self.pid_state_ = pid_new_state(start, scores, n_keep=self._pid_kwargs()["n_keep"])
        self.misses_ = np.zeros(levels.size, np.int64)
        self.n_clipped_ = np.zeros(levels.size, np.int64)
        self.n_updates_ = 0
        self.last_time_ = times[-1:].copy() if times is not None and times.size else None
        return self

    def _issued(self) -> tuple[np.ndarray, np.ndarray]:
        """The thresholds issued now, and which were infinite and replaced by the largest score."""
        q = np.maximum(self.pid_state_["q"], 0.0)  # a negative threshold is the empty (zero-width) interval
        inf = ~np.isfinite(q)
        if self.allow_infinite or not inf.any():
            return q, np.zeros(q.size, bool)
        hist = self.pid_state_["history"]
        return np.where(inf, float(hist.max()) if hist.size else 0.0, q), inf

    def _interval_parts(
        self, mu: np.ndarray, sigma: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], dict[str, float]]:
        """The ends at the current thresholds (``threshold`` and ``clipped`` per level say what was issued)."""
        thr, clipped = self._issued()
        scale = np.broadcast_to(np.asarray(self.score_.scale(sigma), float), mu.shape)
        lower, upper = self.score_.bounds(mu, scale, -thr, thr)
        return lower, upper, {"threshold": thr, "clipped": clipped}, {"lr": float(self.lr)}

    def _take(self, mu: np.ndarray, sigma: np.ndarray, y: np.ndarray) -> None:
        """Per outcome: count the miss and step every controller (``calibprob.calibrators.online._pid.pid_step``)."""
        s = np.asarray(self.score_.score(y, mu, sigma), float).reshape(-1)
        kwargs = self._pid_kwargs()
        for st in s:
            thr, clipped = self._issued()
            self.n_clipped_ += clipped
            err = pid_step(self.pid_state_, float(st), self.alpha_target_, thr, **kwargs)
            self.misses_ += err.astype(np.int64)
            self.n_updates_ += 1

    def coverage_error_bound(self) -> np.ndarray:
        r"""The bound on :math:`|\frac1T\sum_t \mathrm{err}_t - \alpha|` per level after the outcomes seen.

        From the P part's identity by summation by parts (``calibprob.calibrators.online._pid.pid_bound``):
        :math:`|\hat q_{T+1}|/(\eta T) + |\hat q_1|/(\eta T)` with a fixed step, which under the paper's
        conditions (:math:`\hat q_1 = 0`, :math:`|s_t - g_t - r_t| \le B`) is at most Proposition 1's
        :math:`(B + \eta)/(\eta T)`; plus the step's variation with ``proportional_lr="rolling"``.
        """
        check_is_fitted(self, "pid_state_", method="fit")
        return pid_bound(self.pid_state_, self.alpha_target_)
