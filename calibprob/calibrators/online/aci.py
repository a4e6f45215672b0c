r"""Adaptive conformal inference (ACI; Gibbs & Candès 2021) around any predictive Dataset.

Split conformal's interval at confidence :math:`c = 1 - \alpha` is the calibration scores'
:math:`\lceil c (n+1) \rceil`-th smallest, inverted around the base's prediction. ACI keeps that
rule but moves the level it is read at, one outcome at a time:

.. math::

    \mathrm{err}_t = \mathbb 1\{y_t \notin C_t(\alpha_t)\}, \qquad
    \alpha_{t+1} = \alpha_t + \gamma\,(\alpha - \mathrm{err}_t),

so a miss widens the next interval and a hit narrows it. Summing the update gives, for *any*
sequence of outcomes, :math:`\frac1T \sum_t \mathrm{err}_t - \alpha = (\alpha_1 - \alpha_{T+1})/(\gamma T)`,
and because a level :math:`\alpha_t < 0` issues the whole line (no miss possible) and
:math:`\alpha_t > 1` the empty set, :math:`\alpha_t \in [-\gamma, 1 + \gamma]` and

.. math::

    \Bigl| \frac1T \sum_{t=1}^T \mathrm{err}_t - \alpha \Bigr|
    \le \frac{\max(\alpha_1, 1 - \alpha_1) + \gamma}{\gamma T}
    \qquad \text{(Gibbs and Candès 2021, Proposition 4.1)}.

calibprob never prints ``inf`` by default: with ``infinite="clip"`` a level the scores cannot
reach issues the largest score instead (the widest finite interval the data support), counts it
(``n_clipped_``), and the bound above is then replaced by the exact identity's
:math:`|\alpha_1 - \alpha_{T+1}|/(\gamma T)` (``coverage_error_bound()`` says which holds);
``infinite="allow"`` keeps the paper's infinite sets and its bound.

Gibbs, I. and Candès, E. (2021), *Adaptive conformal inference under distribution shift*,
NeurIPS 34, §2 (the update) and Proposition 4.1 (the bound); Zaffran, M., Féron, O., Goude, Y.,
Josse, J. and Dieuleveut, A. (2022), *Adaptive conformal predictions for time series*, ICML (the
refit-per-step protocol of :meth:`AdaptiveConformalInterval.calibrate`).
"""

from __future__ import annotations

import warnings
from typing import Self

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.estimator import BaseEstimator, check_is_fitted, check_predictive
from calibprob._core.ranks import upper_rank
from calibprob._core.validation import check_choice, check_int, check_targets
from calibprob.calibrators.conformal._intervals import interval_dataset, resolve_levels
from calibprob.calibrators.conformal.scores import Score, invert
from calibprob.calibrators.conformal.split_calibrator import predictive_mean_std
from calibprob.calibrators.grouping.mondrian import GroupsLike, fit_with_groups
from calibprob.calibrators.online._interval import OnlineInterval, symmetric_score
from calibprob.calibrators.online._time import check_stream_times
from calibprob.predictive import CalibprobWarning

__all__ = ["AdaptiveConformalInterval", "aci_threshold", "warn_vacuous", "INFINITE"]

#: What a level the calibration scores cannot reach issues: the largest score, or the paper's +inf.
INFINITE = ("clip", "allow")


def aci_threshold(sorted_scores: np.ndarray, alpha_t: float, *, infinite: str = "clip") -> tuple[float, bool]:
    r"""The symmetric score threshold at miscoverage :math:`\alpha_t`, and whether it was clipped.

    :math:`R_{(k)}` with :math:`k = \lceil (1-\alpha_t)(n+1) \rceil` (exact arithmetic,
    ``calibprob._core.ranks.upper_rank``); :math:`\alpha_t \ge 1` gives 0 (the empty set's
    stand-in: a zero-width interval), :math:`k > n` (including :math:`\alpha_t \le 0`) gives
    :math:`+\infty`, or with ``infinite="clip"`` the largest score :math:`R_{(n)}`.

    Parameters
    ----------
    sorted_scores : ndarray, shape (n,)
        Calibration scores in increasing order.
    alpha_t : float
        The current miscoverage level (any real number: ACI's levels leave [0, 1]).
    infinite : {"clip", "allow"}, default "clip"

    Returns
    -------
    threshold : float
    clipped : bool
        Whether ``infinite="clip"`` replaced :math:`+\infty` by the largest score.

    Examples
    --------
    >>> import numpy as np
    >>> R = np.arange(1.0, 10.0)                     # 9 scores
    >>> aci_threshold(R, 0.1), aci_threshold(R, 0.05), aci_threshold(R, 0.05, infinite="allow")
    ((9.0, False), (9.0, True), (inf, False))
    """
    n = sorted_scores.size
    if alpha_t >= 1.0:
        return 0.0, False
    # 1 - alpha_t rounds to 1.0 for 0 < alpha_t < 2**-54 (a DtACI mixture can land there): the whole line too
    k = n + 1 if 1.0 - alpha_t >= 1.0 else upper_rank(1.0 - alpha_t, n)
    if k <= n:
        return float(sorted_scores[max(k, 1) - 1]), False
    if infinite == "allow":
        return np.inf, False
    return float(sorted_scores[-1]), True


class AdaptiveConformalInterval(OnlineInterval, BaseEstimator):
    r"""ACI: split-conformal intervals whose level adapts online to the misses (Gibbs & Candès 2021).

    ``fit`` scores a calibration set; ``predict_interval`` issues the interval at the current
    levels :math:`\alpha_t` (one per confidence level, each its own recursion);
    ``update(pred, y)`` takes outcomes in time order, one row after another, and moves each
    :math:`\alpha_t` by :math:`\gamma(\alpha - \mathrm{err}_t)`. With ``window`` the scores are a
    sliding window of the most recent ones (each outcome's score joins it); otherwise they are
    the calibration set's until :meth:`calibrate` replaces them (a base refitted at every step,
    Zaffran et al. 2022's protocol).

    Parameters
    ----------
    confidence_level : float or sequence of float, default 0.9
        Target coverage :math:`1 - \alpha` per level.
    gamma : float, default 0.005
        Step size :math:`\gamma > 0` (Gibbs and Candès's value; Zaffran et al. use 0.01-0.05 on
        daily prices). Larger adapts faster; the long-run bound shrinks as :math:`1/(\gamma T)`.
    score : {"absolute", "normalized"} or Score, default "absolute"
        A symmetric conformity score of ``calibprob.calibrators.conformal.scores``.
    beta, eps : float
        The normalised score's exponent and floor (Pion & Vazquez eq. 9).
    window : int, optional
        Keep the ``window`` most recent scores (the fit's, then each outcome's).
    infinite : {"clip", "allow"}, default "clip"
        A level the scores cannot reach: the largest score (finite, counted in ``n_clipped_``)
        or :math:`(-\infty, \infty)` as in the paper.

    Attributes
    ----------
    alpha_ : ndarray, shape (L,)
        Current miscoverage levels :math:`\alpha_t`.
    alpha_start_ : ndarray, shape (L,)
        :math:`\alpha_1 = 1 - c`.
    misses_ : ndarray, shape (L,)
        :math:`\sum_t \mathrm{err}_t`.
    n_clipped_ : ndarray, shape (L,)
        Outcomes whose interval was clipped to the largest score.
    n_updates_ : int
    scores_ : ndarray
        The scores the next interval is read from, in time order.

    References
    ----------
    Gibbs, I. and Candès, E. (2021). Adaptive conformal inference under distribution shift. NeurIPS 34.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.calibrators.online.aci import AdaptiveConformalInterval
    >>> rng = np.random.default_rng(0)
    >>> aci = AdaptiveConformalInterval(confidence_level=0.8, gamma=0.05)
    >>> _ = aci.fit(calibprob.normal(np.zeros(50), np.ones(50)), rng.normal(size=50))
    >>> for t in range(400):                      # the noise doubles after calibration
    ...     _ = aci.update(calibprob.normal([0.0], [1.0]), [2.0 * rng.normal()])
    >>> bool(abs(aci.misses_[0] / aci.n_updates_ - 0.2) <= aci.coverage_error_bound()[0])
    True
    """

    def __init__(
        self,
        *,
        confidence_level: ArrayLike = 0.9,
        gamma: float = 0.005,
        score: str | Score = "absolute",
        beta: float = 1.0,
        eps: float = 0.0,
        window: int | None = None,
        infinite: str = "clip",
    ) -> None:
        self.confidence_level = confidence_level
        self.gamma = gamma
        self.score = score
        self.beta = beta
        self.eps = eps
        self.window = window
        self.infinite = infinite

    _fitted = "alpha_"
    _interval_method = "aci"

    def _check_params(self) -> tuple[np.ndarray, Score]:
        levels, _ = resolve_levels(self.confidence_level)
        if not (np.isfinite(self.gamma) and 0.0 < float(self.gamma) < 1.0):
            raise ValueError(
                f"gamma must be a step size in (0, 1); got {self.gamma!r}. Gibbs and Candès use 0.005; "
                "larger adapts faster."
            )
        check_choice(self.infinite, "infinite", INFINITE)
        if self.window is not None:
            check_int(self.window, "window", minimum=1)
        return levels, symmetric_score(self.score, self.beta, self.eps, "ACI here adapts")

    # -- state ----------------------------------------------------------------
    def fit(self, pred_cal: xr.Dataset, y_cal: ArrayLike, *, groups: GroupsLike = None) -> Self:
        """Score the calibration set and start every level at :math:`\\alpha_1 = 1 - c`; returns ``self``.

        With ``groups=`` (one label per calibration point, or an ``obs`` coordinate name) each
        group runs its own recursion on its own scores (:class:`calibprob.Mondrian`); pass the
        same ``groups=`` to :meth:`update` and :meth:`predict_interval`.
        """
        levels, score = self._check_params()
        if fit_with_groups(self, pred_cal, y_cal, groups):
            return self
        self.levels_, self.score_ = levels, score
        self.alpha_start_ = 1.0 - levels
        self.alpha_ = self.alpha_start_.copy()
        self.misses_ = np.zeros(levels.size, np.int64)
        self.n_clipped_ = np.zeros(levels.size, np.int64)
        self.n_updates_ = 0
        self.last_time_ = None
        return self.calibrate(pred_cal, y_cal)

    def calibrate(self, pred_cal: xr.Dataset, y_cal: ArrayLike) -> Self:
        """Replace the scores by a new calibration set's, keeping the levels :math:`\\alpha_t`; returns ``self``.

        For a base refitted at every step (Zaffran et al. 2022): refit, ``calibrate`` on its
        calibration part, ``predict_interval``, then ``update`` with the outcome.
        """
        self._calibration_scores(pred_cal, y_cal)
        return self

    #: the sorted scores are a view of ``scores_``: not saved, rebuilt on load
    _transient_attrs: tuple[str, ...] = ("_sorted",)

    def _thresholds(self) -> tuple[np.ndarray, np.ndarray]:
        out = [aci_threshold(self._sorted, float(a), infinite=self.infinite) for a in self.alpha_]
        return np.array([t for t, _ in out]), np.array([c for _, c in out])

    # -- the online loop ------------------------------------------------------
    def _interval_parts(
        self, mu: np.ndarray, sigma: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], dict[str, float]]:
        """The ends at the current levels :math:`\\alpha_t` (``alpha_t`` and ``clipped`` per level say what was issued)."""
        thr, clipped = self._thresholds()
        scale = np.broadcast_to(np.asarray(self.score_.scale(sigma), float), mu.shape)
        lower, upper = self.score_.bounds(mu, scale, -thr, thr)
        return lower, upper, {"alpha_t": self.alpha_.copy(), "clipped": clipped}, {"gamma": float(self.gamma)}

    def _take(self, mu: np.ndarray, sigma: np.ndarray, y: np.ndarray) -> None:
        """Count each outcome's misses and move each level by :math:`\\gamma(\\alpha - \\mathrm{err}_t)`."""
        self._advance(np.asarray(self.score_.score(y, mu, sigma), float).reshape(-1))

    def _advance(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The recursion over the scores ``s`` in order; the thresholds, clipped flags and levels each step issued."""
        window = self._score_window()
        thr_path = np.empty((s.size, self.levels_.size))
        clip_path = np.empty((s.size, self.levels_.size), bool)
        alpha_path = np.empty((s.size, self.levels_.size))
        for t, st in enumerate(s):
            thr, clipped = self._thresholds()
            thr_path[t], clip_path[t], alpha_path[t] = thr, clipped, self.alpha_
            err = st > thr
            self.misses_ += err
            self.n_clipped_ += clipped
            self.alpha_ = self.alpha_ + float(self.gamma) * ((1.0 - self.levels_) - err)
            self.n_updates_ += 1
            self._push_score(window, st)  # with a window, the new score joins the lookback
        return thr_path, clip_path, alpha_path

    def predict_and_update(self, pred: xr.Dataset, y: ArrayLike) -> xr.Dataset:
        r"""One-step-ahead intervals for a stream: row ``t``'s interval at :math:`\alpha_t`, then its outcome.

        Equivalent to ``predict_interval(pred.isel(obs=[t]))`` then ``update(pred.isel(obs=[t]), y[t:t+1])``
        for each row in turn (the paper's online protocol), computed in one pass: the same intervals, the same
        state afterwards.

        Parameters
        ----------
        pred : xarray.Dataset
            The base's predictive distributions of the stream, in time order.
        y : array_like, shape (m,)
            Their outcomes.

        Returns
        -------
        xarray.Dataset
            ``lower``, ``upper`` as :meth:`predict_interval` returns them, with ``alpha_t`` and ``clipped`` per
            row and level (what each row was issued at); a ``time`` coordinate of ``pred`` is kept.

        Raises
        ------
        ValueError
            Rows not in time order, or not after the last outcome taken; a grouped fit (use the loop).
        """
        if getattr(self, "mondrian_", None) is not None:
            raise ValueError(
                "predict_and_update runs one stream, but this AdaptiveConformalInterval was fitted with groups. "
                "Call predict_interval(..., groups=) then update(..., groups=) row by row instead."
            )
        check_is_fitted(self, "alpha_", method="fit")
        pred = check_predictive(pred, self, "pred")
        y = check_targets(y, pred.sizes["obs"], "y")
        times = check_stream_times(pred, self.last_time_)
        mu, sigma = predictive_mean_std(pred)
        thr, clipped, alpha = self._advance(np.asarray(self.score_.score(y, mu, sigma), float).reshape(-1))
        centre = np.asarray(mu, float)[:, None]
        scale = np.broadcast_to(np.asarray(self.score_.scale(sigma), float), mu.shape)[:, None]
        lower, upper = invert(centre, scale, -thr), invert(centre, scale, thr)
        ds = interval_dataset(lower, upper, self.levels_, False, method="aci", attrs={"gamma": float(self.gamma)})
        ds = ds.assign_coords(obs=pred["obs"].values)
        if times is not None:
            ds = ds.assign_coords(time=("obs", times))
            self.last_time_ = times[-1:].copy() if times.size else self.last_time_
        ds["alpha_t"] = (("obs", "confidence_level"), alpha)
        ds["clipped"] = (("obs", "confidence_level"), clipped)
        return ds.isel(confidence_level=0) if np.ndim(self.confidence_level) == 0 else ds

    # -- guarantees -----------------------------------------------------------
    def coverage_error_bound(self) -> np.ndarray:
        r"""A bound on :math:`|\frac1T\sum_t \mathrm{err}_t - \alpha|` per level, for the outcomes seen.

        :math:`(\max(\alpha_1, 1-\alpha_1) + \gamma)/(\gamma T)` (Proposition 4.1) where no interval
        was clipped; otherwise the exact identity's :math:`|\alpha_1 - \alpha_{T+1}|/(\gamma T)`
        (clipping can let :math:`\alpha_t` fall below :math:`-\gamma`, so the a-priori bound need not hold).

        Warns
        -----
        CalibprobWarning
            When the bound is vacuous: at least :math:`\max(\alpha, 1-\alpha)`, which any miss rate
            meets (:math:`\gamma` too small for the :math:`T` outcomes seen).
        """
        check_is_fitted(self, "alpha_", method="fit")
        T = max(self.n_updates_, 1)
        g = float(self.gamma)
        a1 = self.alpha_start_
        paper = (np.maximum(a1, 1.0 - a1) + g) / (g * T)
        exact = np.abs(a1 - self.alpha_) / (g * T)
        bound = np.where(self.n_clipped_ > 0, exact, paper)
        warn_vacuous(bound, a1, g, T)
        return bound


def warn_vacuous(bound: np.ndarray, alpha: np.ndarray, gamma: float, T: int) -> None:
    r"""Warn when a long-run bound says nothing: :math:`\ge \max(\alpha, 1-\alpha)` at some level.

    Proposition 4.1's bound falls below that only once
    :math:`T > (\max(\alpha_1, 1-\alpha_1) + \gamma)/(\gamma \max(\alpha, 1-\alpha))`; the message
    gives the :math:`\gamma` that would make it informative at the current :math:`T`.
    """
    trivial = np.maximum(alpha, 1.0 - alpha)
    vacuous = bound >= trivial
    if not vacuous.any():
        return
    j = int(np.flatnonzero(vacuous)[0])
    need = float(np.maximum(alpha[j], 1.0 - alpha[j]) / (trivial[j] * T - 1.0)) if trivial[j] * T > 1.0 else np.inf
    fix = f"pass gamma > {need:.3g} for T={T}" if np.isfinite(need) else "take more outcomes"
    warnings.warn(
        f"the long-run coverage bound is vacuous: {bound[j]:.3g} >= {trivial[j]:.3g} at alpha={alpha[j]:.3g} after "
        f"T={T} outcome(s) with gamma={gamma:g}, so it constrains nothing. The step size is too small for so short a "
        f"stream: {fix}, or judge coverage after more outcomes.",
        CalibprobWarning,
        stacklevel=3,
    )
