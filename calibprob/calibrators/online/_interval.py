r"""The glue the one-level online interval classes share, written once.

:class:`~calibprob.AdaptiveConformalInterval` (Gibbs & Candès 2021),
:class:`~calibprob.ConformalPIDInterval` (Angelopoulos, Candès & Tibshirani 2023) and
:class:`~calibprob.AgACIInterval` (Zaffran et al. 2022) differ only in how they choose the score
threshold issued before each outcome and how an outcome moves it. What is the same is written here:
the ``groups=`` routing through :class:`~calibprob.Mondrian` (one stream per group), the level
subset of ``predict_interval`` (each fitted level is its own recursion, so an unfitted level cannot
be read), the interval Dataset and its ``confidence_level`` form (``level_form``), ``predict`` as
every fitted level, and ``update``'s checks (rows in time order, ``calibprob.calibrators.online._time``)
before the class's own loop over the outcomes. For a symmetric score :math:`R = |y - \mu| / s`
the interval at threshold :math:`q` is :math:`[\mu - s q, \mu + s q]` (``Score.bounds``).

The conformal package writes the model-aware classes' pair once the same way
(``calibprob.calibrators.conformal._intervals.IntervalPredictor``).
"""

from __future__ import annotations

from collections import deque
from typing import Self

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.estimator import check_is_fitted, check_predictive
from calibprob._core.validation import check_targets
from calibprob.calibrators.conformal._intervals import interval_dataset, level_form, resolve_levels
from calibprob.calibrators.conformal.scores import Score, get_score
from calibprob.calibrators.conformal.split_calibrator import predictive_mean_std
from calibprob.calibrators.grouping.mondrian import GroupsLike, keep_group_coord, predict_with_groups
from calibprob.calibrators.online._time import check_stream_times

__all__ = ["OnlineInterval", "symmetric_score"]


def symmetric_score(score: str | Score, beta: float, eps: float, what: str) -> Score:
    """The conformity score ``score`` names, refused when signed; ``what`` says who adapts one threshold per level.

    Examples
    --------
    >>> symmetric_score("absolute", 1.0, 0.0, "ACI adapts").name
    'absolute'
    """
    out = get_score(score, beta=beta, eps=eps)
    if not out.symmetric:
        raise ValueError(
            f"score={out.name!r} is signed; {what} one symmetric threshold per level. Use "
            "score='absolute' or 'normalized'."
        )
    return out


class OnlineInterval:
    """``predict`` / ``predict_interval`` / ``update`` / ``groups=`` of a one-level online interval class.

    A subclass (also a :class:`~calibprob._core.estimator.BaseEstimator`) provides:

    * ``_fitted``: the attribute :meth:`fit` sets (the not-fitted check names ``fit``);
    * ``_interval_method``: the ``method`` attribute of its interval Dataset;
    * ``_interval_parts(mu, sigma)``: the interval ends over (obs, every fitted level), the per-level
      variables the Dataset carries beside them (in their order) and its extra attributes;
    * ``_take(mu, sigma, y)``: the loop over the outcomes, in time order, after :meth:`update`'s checks.

    ``fit`` sets ``levels_`` (the fitted confidence levels), ``score_`` and ``last_time_``.
    """

    _fitted = "levels_"
    _interval_method = "online-interval"
    # set by the subclass's __init__ and fit
    confidence_level: ArrayLike
    levels_: np.ndarray
    score_: Score
    misses_: np.ndarray
    n_updates_: int
    last_time_: np.ndarray | None
    window: int | None
    scores_: np.ndarray
    _sorted: np.ndarray

    def _mondrian_sides(self) -> int:
        """1: before any outcome the interval is split conformal's with a symmetric score (one rank)."""
        return 1

    def _interval_parts(
        self, mu: np.ndarray, sigma: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], dict[str, float]]:
        raise NotImplementedError(
            f"{type(self).__name__} must give its interval ends (_interval_parts) to use OnlineInterval."
        )

    def _take(self, mu: np.ndarray, sigma: np.ndarray, y: np.ndarray) -> None:
        raise NotImplementedError(f"{type(self).__name__} must step on the outcomes (_take) to use OnlineInterval.")

    def _level_mask(self, confidence_level: ArrayLike | None) -> np.ndarray:
        """Which of the fitted levels ``confidence_level`` asks for (each level is its own recursion)."""
        if confidence_level is None:
            return np.ones(self.levels_.size, dtype=bool)
        asked, _ = resolve_levels(confidence_level)
        hit = np.isclose(asked[:, None], self.levels_[None, :], rtol=0.0, atol=1e-12)
        missing = asked[~hit.any(axis=1)]
        if missing.size:
            raise ValueError(
                f"confidence_level={missing.tolist()} was not fitted: each level runs its own recursion from fit on, "
                f"and this {type(self).__name__} tracks {self.levels_.tolist()}. Pass some of those, or refit with "
                "confidence_level= including the new level."
            )
        return hit.any(axis=0)

    def predict_interval(
        self, pred: xr.Dataset, confidence_level: ArrayLike | None = None, *, groups: GroupsLike = None
    ) -> xr.Dataset:
        r"""Intervals at the current thresholds for every row of ``pred``.

        Parameters
        ----------
        pred : xarray.Dataset
            The base's predictive distribution (any family of the contract).
        confidence_level : float or sequence of float, optional
            A subset of the fitted levels (default: all of them, in the form the constructor's
            ``confidence_level`` was given); a scalar drops the ``confidence_level`` dimension, a
            sequence keeps it.
        groups : array_like, xarray.DataArray or str, optional
            After a grouped ``fit``: one label per row.

        Returns
        -------
        xarray.Dataset
            ``lower``, ``upper`` over (obs, confidence_level) (the *target* levels label the
            dimension) and the class's per-level record of what was issued.
        """
        mondrian = predict_with_groups(self, groups)
        if mondrian is not None:
            return mondrian.predict_interval(pred, confidence_level, groups=groups)
        check_is_fitted(self, self._fitted, method="fit")
        keep = self._level_mask(confidence_level)
        pred = check_predictive(pred, self, "pred")
        mu, sigma = predictive_mean_std(pred)
        lower, upper, per_level, attrs = self._interval_parts(np.asarray(mu, float), sigma)
        ds = interval_dataset(
            lower[:, keep], upper[:, keep], self.levels_[keep], False, method=self._interval_method, attrs=attrs
        )
        ds = ds.assign_coords(obs=pred["obs"].values)
        for name, values in per_level.items():
            ds[name] = ("confidence_level", values[keep])
        return keep_group_coord(level_form(ds, confidence_level, self.confidence_level), pred)

    def predict(self, pred: xr.Dataset, *, groups: GroupsLike = None) -> xr.Dataset:
        """The intervals at every fitted level, ``confidence_level`` kept as a dimension (the contract's name
        for :meth:`predict_interval`)."""
        mondrian = predict_with_groups(self, groups)
        if mondrian is not None:
            return mondrian.predict_interval(pred, mondrian.confidence_levels_.tolist(), groups=groups)
        check_is_fitted(self, self._fitted, method="fit")
        return self.predict_interval(pred, self.levels_.tolist())

    def update(self, pred: xr.Dataset, y: ArrayLike, *, groups: GroupsLike = None) -> Self:
        """Take outcomes in time order (row by row) and step on each; returns ``self``.

        With a ``time`` coordinate along ``obs`` the rows must be strictly increasing in time and
        later than every outcome already taken (``calibprob.calibrators.online._time.check_stream_times``);
        with a grouped ``fit``, pass ``groups=`` (each group's stream steps on its own rows).
        """
        mondrian = predict_with_groups(self, groups)
        if mondrian is not None:
            mondrian.update(pred, y, groups=groups)
            return self
        check_is_fitted(self, self._fitted, method="fit")
        pred = check_predictive(pred, self, "pred")
        y = check_targets(y, pred.sizes["obs"], "y")
        times = check_stream_times(pred, self.last_time_)
        mu, sigma = predictive_mean_std(pred)
        self._take(mu, sigma, y)
        if times is not None and times.size:
            self.last_time_ = times[-1:].copy()
        return self

    def miss_rate(self) -> np.ndarray:
        r""":math:`\frac1T\sum_t \mathrm{err}_t` per level, for the outcomes seen (NaN before any outcome)."""
        check_is_fitted(self, self._fitted, method="fit")
        n = self.n_updates_
        return self.misses_ / n if n else np.full(self.levels_.size, np.nan)

    # -- a score history (ACI, AgACI) ----------------------------------------------------
    def _calibration_scores(self, pred_cal: xr.Dataset, y_cal: ArrayLike) -> None:
        """Replace the scores by ``pred_cal``'s (the last ``window`` of them), sorted for the thresholds."""
        if getattr(self, "mondrian_", None) is not None:
            raise ValueError(
                f"calibrate replaces one stream's scores, but this {type(self).__name__} was fitted with groups "
                "(one stream per group). Refit with fit(pred_cal, y_cal, groups=...) to rescore the groups."
            )
        check_is_fitted(self, self._fitted, method="fit")
        pred = check_predictive(pred_cal, self, "pred_cal")
        y = check_targets(y_cal, pred.sizes["obs"], "y_cal")
        if self.window is not None and int(self.window) > y.size:
            raise ValueError(
                f"window={self.window!r} is larger than the history: pred_cal holds {y.size} calibration point(s), "
                f"so the first intervals would be read from fewer scores than the window promises. Pass "
                f"window <= {y.size}, or calibrate on at least {self.window} points."
            )
        mu, sigma = predictive_mean_std(pred)
        scores = np.asarray(self.score_.score(y, mu, sigma), float).reshape(-1)
        self.scores_ = scores if self.window is None else scores[-int(self.window) :]
        self._sorted = np.sort(self.scores_)

    def _score_window(self) -> deque:
        """The scores as a queue that keeps the ``window`` most recent (all of them without a window)."""
        return deque(self.scores_, maxlen=None if self.window is None else int(self.window))

    def _push_score(self, window: deque, score: float) -> None:
        """With a window: the outcome's score joins it and the oldest leaves (without one the scores stay)."""
        if self.window is not None:
            window.append(score)
            self.scores_ = np.asarray(window, float)
            self._sorted = np.sort(self.scores_)

    def _rebuild_after_load(self) -> None:
        # the sorted scores are a view of scores_: not saved (_transient_attrs), rebuilt on load
        if getattr(self, "scores_", None) is not None:
            self._sorted = np.sort(self.scores_)
