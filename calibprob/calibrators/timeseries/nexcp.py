r"""NexCP: conformal prediction beyond exchangeability with fixed decaying weights (Barber et al. 2023).

When the data drift, the calibration points closest in time to the test point are the most
alike. NexCP weights the calibration scores :math:`R_1, \dots, R_n` (oldest first) by the
*fixed* weights :math:`w_i = \rho^{\,n+1-i}` and reads the interval from the weighted quantile
with the test point's mass at :math:`+\infty`:

.. math::

    \hat q = Q_{1-\alpha}\Bigl(\sum_{i=1}^n \tilde w_i\, \delta_{R_i} + \tilde w_{n+1}\,
    \delta_{+\infty}\Bigr),\qquad
    \tilde w_i = \frac{w_i}{\sum_{j=1}^n w_j + 1},\; \tilde w_{n+1} = \frac{1}{\sum_j w_j + 1}.

For any distribution of the data (Theorem 2 for split conformal, Theorem 3 for full
conformal with a symmetric fit or with the random tag swap),

.. math::

    P\{Y_{n+1} \in \hat C(X_{n+1})\} \ge 1 - \alpha - \sum_{i=1}^n \tilde w_i\,
    d_{TV}\bigl(R(Z), R(Z^i)\bigr),

:math:`Z^i` the data with points :math:`i` and :math:`n+1` swapped: no loss under
exchangeability, and a small one when the recent past resembles the present. :math:`\rho = 1`
gives ordinary split conformal (bit for bit: the spine's weighted rank with equal weights is
the unweighted rank). The split rule is the spine's
``calibprob.calibrators.conformal.split_calibrator.conformal_thresholds`` with
:class:`~calibprob.weights.DecayingWeights`; the full-conformal least-squares form (the paper's
ELEC2 experiment) is :func:`full_conformal_ls` and :func:`nexcp_least_squares`, in closed form
(``calibprob.calibrators.timeseries._full_ls``).

References
----------
Barber, R. F., Candès, E. J., Ramdas, A. and Tibshirani, R. J. (2023). Conformal prediction
beyond exchangeability. Ann. Statist. 51(2), 816–845 (§3: the method; Theorems 2-3; §5.2: ELEC2).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.estimator import BaseEstimator, check_is_fitted, check_predictive
from calibprob._core.validation import check_array, check_int, check_targets
from calibprob.calibrators.conformal._intervals import interval_dataset, resolve_levels
from calibprob.calibrators.conformal.scores import Score, get_score
from calibprob.calibrators.conformal.split_calibrator import conformal_thresholds, predictive_mean_std
from calibprob.calibrators.grouping.mondrian import GroupsLike, fit_with_groups, keep_group_coord, predict_with_groups
from calibprob.calibrators.online._time import TIME_COORD, check_stream_times
from calibprob.calibrators.timeseries._full_ls import full_conformal_hull, ls_residual_lines, swap_fit_weight
from calibprob.predictive import from_intervals
from calibprob.weights import DecayingWeights, diagnose

__all__ = ["NexCP", "full_conformal_ls", "nexcp_least_squares", "check_rho", "check_burn_in"]


def check_rho(rho: float) -> float:
    """The decay :math:`\\rho \\in (0, 1]`, or a ValueError naming it and the fix."""
    try:
        r = float(rho)
    except (TypeError, ValueError):
        r = np.nan
    if not (np.isfinite(r) and 0.0 < r <= 1.0):
        raise ValueError(
            f"rho must be a decay in (0, 1]; got {rho!r}. NexCP uses 0.99 (weights rho**(n+1-i), oldest "
            "smallest); rho=1 gives ordinary (unweighted) conformal prediction."
        )
    return r


def check_burn_in(burn_in: int, n: int) -> int:
    """A burn-in of at least 1 point and fewer than the ``n`` points of the stream."""
    burn_in = check_int(burn_in, "burn_in", minimum=1)
    if burn_in >= n:
        raise ValueError(
            f"burn_in={burn_in} is not shorter than the data ({n} points): no point would get an interval. Pass "
            f"burn_in < {n} (the paper's ELEC2 run uses 100), or give a longer series."
        )
    return burn_in


class NexCP(BaseEstimator):
    r"""Weighted split conformal with NexCP's decaying weights, on a stream of forecasts.

    ``fit(pred_cal, y_cal)`` scores a calibration stretch (rows in time order, the last the
    most recent); ``predict_interval(pred)`` issues every row of ``pred`` the interval at the
    level-:math:`c` quantile of the calibration scores weighted :math:`\rho^{\,n+1-i}` with the
    test point's mass at :math:`+\infty`; ``update(pred, y)`` appends outcomes as the newest
    calibration points (the weights move with them), so that
    ``predict_interval`` / ``update`` is the paper's online protocol.

    Parameters
    ----------
    confidence_level : float or sequence of float, default 0.9
    rho : float in (0, 1], default 0.99
        The decay (the paper's value). ``rho=1``: split conformal.
    score : {"absolute", "normalized", "signed", "signed-absolute"} or Score, default "absolute"
        The conformity score of ``calibprob.calibrators.conformal.scores`` (a signed score
        reads each tail from its own weighted rank, the mass at :math:`\mp\infty`).
    beta, eps : float
        The normalised scores' exponent and floor.

    Attributes
    ----------
    scores_ : ndarray, shape (n,)
        The scores in time order (oldest first).
    n_calibration_ : int
    last_time_ : ndarray or None
        The last time seen (a ``time`` coordinate along ``obs``).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> scale = np.r_[np.ones(300), 3.0 * np.ones(100)]          # the noise triples at t = 300
    >>> y = scale * rng.normal(size=400)
    >>> base = calibprob.normal(np.zeros(400), np.ones(400))
    >>> nex = calibprob.NexCP(rho=0.95).fit(base.isel(obs=slice(350)), y[:350])
    >>> iv = nex.predict_interval(base.isel(obs=slice(350, None)))
    >>> split = calibprob.SplitConformalCalibrator().fit(base.isel(obs=slice(350)), y[:350])
    >>> bool(iv["upper"][0] > split.predict_interval(base.isel(obs=slice(350, None)))["upper"][0])
    True
    """

    def __init__(
        self,
        *,
        confidence_level: ArrayLike = 0.9,
        rho: float = 0.99,
        score: str | Score = "absolute",
        beta: float = 1.0,
        eps: float = 0.0,
    ) -> None:
        self.confidence_level = confidence_level
        self.rho = rho
        self.score = score
        self.beta = beta
        self.eps = eps

    def _check_params(self) -> tuple[np.ndarray, Score]:
        levels, _ = resolve_levels(self.confidence_level)
        check_rho(self.rho)
        return levels, get_score(self.score, beta=self.beta, eps=self.eps)

    def _mondrian_sides(self) -> int:
        """1 for a symmetric score, 2 for a signed one: the minimum group size of the unweighted rule (rho = 1)."""
        return 1 if get_score(self.score, beta=self.beta, eps=self.eps).symmetric else 2

    def fit(self, pred_cal: xr.Dataset, y_cal: ArrayLike, *, groups: GroupsLike = None) -> Self:
        """Score the calibration stretch (rows in time order); returns ``self``.

        With ``groups=`` (one label per point, or an ``obs`` coordinate name) each group is its
        own stream with its own decaying weights (:class:`calibprob.Mondrian`); pass the same
        ``groups=`` to :meth:`update` and :meth:`predict_interval`.

        Raises
        ------
        ValueError
            ``rho`` outside (0, 1], targets of the wrong length or not finite, a ``time``
            coordinate that is not strictly increasing.
        TypeError
            ``pred_cal`` is not a predictive Dataset.
        """
        self.levels_, self.score_ = self._check_params()
        if fit_with_groups(self, pred_cal, y_cal, groups):
            return self
        pred = check_predictive(pred_cal, self, "pred_cal")
        y = check_targets(y_cal, pred.sizes["obs"], "y_cal", obs=pred["obs"].values)
        times = check_stream_times(pred, None, "pred_cal")
        mu, sigma = predictive_mean_std(pred)
        self.scores_ = np.asarray(self.score_.score(y, mu, sigma), float).reshape(-1)
        self.n_calibration_ = int(self.scores_.size)
        self.last_time_ = None if times is None or not times.size else times[-1:].copy()
        return self

    def calibration_weights(self) -> np.ndarray:
        r"""The weights :math:`\rho^{\,n+1-i}` of the current scores, oldest first."""
        check_is_fitted(self, "scores_", method="fit")
        return DecayingWeights(check_rho(self.rho)).calibration(n=self.scores_.size)

    def thresholds(self, confidence_level: ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Score thresholds ``(lo, hi)`` per level: the spine's weighted rule with the decaying weights."""
        levels, _ = resolve_levels(self.levels_ if confidence_level is None else confidence_level)
        w = self.calibration_weights()
        order = np.argsort(self.scores_, kind="stable")
        return conformal_thresholds(
            self.scores_[order], levels, symmetric=self.score_.symmetric, weights=w[order], test_weight=1.0
        )

    def predict_interval(
        self, pred: xr.Dataset, confidence_level: ArrayLike | None = None, *, groups: GroupsLike = None
    ) -> xr.Dataset:
        r"""NexCP intervals for every row of ``pred`` (each row the :math:`(n+1)`-th point).

        Returns
        -------
        xarray.Dataset
            ``lower``, ``upper`` over (obs, confidence_level) (a scalar level drops the
            dimension); infinite where the finite scores' weight cannot reach the level. The
            attrs hold ``rho``, the weights' effective sample size ``weights_ess`` and the
            attainable level ``weights_attainable_level``.
        """
        mondrian = predict_with_groups(self, groups)
        if mondrian is not None:
            return mondrian.predict_interval(pred, confidence_level, groups=groups)
        check_is_fitted(self, "scores_", method="fit")
        levels, scalar = resolve_levels(self.confidence_level if confidence_level is None else confidence_level)
        pred = check_predictive(pred, self, "pred")
        mu, sigma = predictive_mean_std(pred)
        lo, hi = self.thresholds(levels)
        scale = np.broadcast_to(np.asarray(self.score_.scale(sigma), float), mu.shape)
        lower, upper = self.score_.bounds(mu, scale, lo, hi)
        diag = diagnose(self.calibration_weights(), np.ones(1))
        attrs = {"rho": float(self.rho), "weights_ess": diag.ess, "weights_attainable_level": diag.attainable_level}
        ds = interval_dataset(lower, upper, levels, scalar, method="nexcp", attrs=attrs)
        ds = ds.assign_coords(obs=pred["obs"].values)
        if TIME_COORD in pred.coords and pred.coords[TIME_COORD].dims == ("obs",):  # time-indexed in, time-indexed out
            ds = ds.assign_coords({TIME_COORD: ("obs", pred.coords[TIME_COORD].values)})
        return keep_group_coord(ds, pred)

    def predict(self, pred: xr.Dataset, *, groups: GroupsLike = None) -> xr.Dataset:
        """The intervals at the constructor's levels, ``confidence_level`` kept as a dimension."""
        mondrian = predict_with_groups(self, groups)
        if mondrian is not None:
            return mondrian.predict_interval(pred, mondrian.confidence_levels_.tolist(), groups=groups)
        check_is_fitted(self, "scores_", method="fit")
        return self.predict_interval(pred, self.levels_.tolist())

    def update(self, pred: xr.Dataset, y: ArrayLike, *, groups: GroupsLike = None) -> Self:
        """Append outcomes (rows in time order) as the newest calibration points; returns ``self``.

        With a ``time`` coordinate the rows must be strictly increasing and later than every
        outcome already taken.
        """
        mondrian = predict_with_groups(self, groups)
        if mondrian is not None:
            mondrian.update(pred, y, groups=groups)
            return self
        check_is_fitted(self, "scores_", method="fit")
        pred = check_predictive(pred, self, "pred")
        y = check_targets(y, pred.sizes["obs"], "y", obs=pred["obs"].values)
        times = check_stream_times(pred, self.last_time_)
        mu, sigma = predictive_mean_std(pred)
        new = np.asarray(self.score_.score(y, mu, sigma), float).reshape(-1)
        self.scores_ = np.concatenate([self.scores_, new])
        self.n_calibration_ = int(self.scores_.size)
        if times is not None and times.size:
            self.last_time_ = times[-1:].copy()
        return self

    def coverage_gap_bound(self, *, tv: ArrayLike | None = None, drift: float | None = None) -> float | None:
        r"""Theorem 2's bound :math:`\sum_i \tilde w_i \delta_i` on the coverage shortfall.

        Parameters
        ----------
        tv : float or array_like, shape (n,), optional
            Bounds :math:`\delta_i \ge d_{TV}(R(Z), R(Z^i))` (0: exchangeable data, no loss).
        drift : float, optional
            Independent points whose law moves by at most ``drift`` in total variation per step
            (:meth:`calibprob.weights.DecayingWeights.coverage_gap_bound`).

        Returns
        -------
        float or None
            None without ``tv`` or ``drift``.
        """
        return DecayingWeights(check_rho(self.rho)).coverage_gap_bound(self.calibration_weights(), tv=tv, drift=drift)


def _rng(
    random_state: int | np.random.Generator | np.random.RandomState,
) -> np.random.Generator | np.random.RandomState:
    """A Generator from a seed, or the given Generator / RandomState (the paper's draws need a RandomState)."""
    if isinstance(random_state, (np.random.Generator, np.random.RandomState)):
        return random_state
    return np.random.default_rng(check_int(random_state, "random_state", minimum=0))


def full_conformal_ls(
    X: ArrayLike,
    y: ArrayLike,
    x: ArrayLike,
    *,
    confidence_level: float = 0.9,
    rho: float | None = None,
    weighted_fit: bool = False,
    random_state: int | np.random.Generator | np.random.RandomState = 0,
) -> tuple[float, float]:
    r"""One full-conformal least-squares interval at ``x`` from the past ``(X, y)``: CP+LS or NexCP.

    Parameters
    ----------
    X : array_like, shape (n, p)
        Past inputs, oldest first (add a column of ones for an intercept).
    y : array_like, shape (n,)
    x : array_like, shape (p,)
    confidence_level : float, default 0.9
    rho : float in (0, 1], optional
        The conformal weights :math:`\rho^{\,n+1-i}` (nexCP+LS); None: equal weights (CP+LS).
    weighted_fit : bool, default False
        Fit weighted least squares with the same decay (nexCP+WLS; needs ``rho``), the test
        point's fit weight swapped with that of a point drawn by its conformal weight.
    random_state : int, numpy.random.Generator or numpy.random.RandomState, default 0
        The draw of the swap (used only with ``weighted_fit``).

    Returns
    -------
    lower, upper : float
        The hull of the conformal set, exact (``calibprob.calibrators.timeseries._full_ls``).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = np.c_[np.ones(200), rng.normal(size=200)]; y = X @ [1.0, 2.0] + rng.normal(size=200)
    >>> lo, hi = full_conformal_ls(X, y, np.array([1.0, 0.0]))
    >>> bool(lo < 1.0 < hi), round(hi - lo, 1)
    (True, 3.1)
    """
    X = check_array(X, "X", ndim=2)
    y = check_targets(y, X.shape[0], "y")
    x = check_array(x, "x", ndim=1)
    if x.size != X.shape[1]:
        raise ValueError(f"x has {x.size} entries but X has {X.shape[1]} columns; pass one test input row.")
    level = float(resolve_levels(confidence_level)[0][0])
    n = X.shape[0]
    w = np.ones(n) if rho is None else DecayingWeights(check_rho(rho)).calibration(n=n)
    tags = None
    if weighted_fit:
        if rho is None:
            raise ValueError("weighted_fit=True needs rho (the decay of the fit weights); pass e.g. rho=0.99.")
        tags, _ = swap_fit_weight(check_rho(rho) ** np.arange(n, -1, -1, dtype=float), w, _rng(random_state))
    a, b, a1, b1 = ls_residual_lines(X, y, x, tags)
    return full_conformal_hull(a, b, a1, b1, w, level)


def nexcp_least_squares(
    X: ArrayLike,
    y: ArrayLike,
    *,
    burn_in: int = 100,
    rho: float | None = 0.99,
    weighted_fit: bool = False,
    confidence_level: float | Sequence[float] = 0.9,
    random_state: int | np.random.Generator | np.random.RandomState = 0,
    times: ArrayLike | None = None,
) -> xr.Dataset:
    r"""The paper's online protocol: at each time :math:`t \ge` ``burn_in``, the interval from all earlier points.

    Parameters
    ----------
    X : array_like, shape (T, p)
        Inputs in time order.
    y : array_like, shape (T,)
    burn_in : int, default 100
        Points before the first interval (the paper's ``train_lag``).
    rho, weighted_fit, random_state
        As :func:`full_conformal_ls` (``rho=None``: CP+LS). One generator serves every step.
    confidence_level : float or sequence of float, default 0.9
        One level, or several read from the same refit at each step (the WLS swap drawn once per
        step and shared by the levels).
    times : array_like, shape (T,), optional
        Time stamps, strictly increasing; default ``0 .. T-1``.

    Returns
    -------
    xarray.Dataset
        The interval family over the ``T - burn_in`` predicted points, with a ``time``
        coordinate along ``obs`` (``calibprob.evaluate`` reads coverage and width from it).

    Raises
    ------
    ValueError
        ``burn_in`` not shorter than the data, ``rho`` outside (0, 1], unordered ``times``.
    """
    X = check_array(X, "X", ndim=2)
    y = check_targets(y, X.shape[0], "y")
    T = X.shape[0]
    start = check_burn_in(burn_in, T)
    stamps = np.arange(T) if times is None else np.asarray(times)
    if stamps.shape != (T,):
        raise ValueError(f"times has shape {stamps.shape} for {T} points; pass one time per row.")
    probe = xr.Dataset(coords={"obs": np.arange(T), TIME_COORD: ("obs", stamps)})
    check_stream_times(probe, None, "times")
    levels, _ = resolve_levels(confidence_level)
    if weighted_fit and rho is None:
        raise ValueError("weighted_fit=True needs rho (the decay of the fit weights); pass e.g. rho=0.99.")
    decay = None if rho is None else check_rho(rho)
    rng = _rng(random_state)
    lo, hi = np.empty((T - start, levels.size)), np.empty((T - start, levels.size))
    for k, t in enumerate(range(start, T)):
        # one refit per step, every level read from the same residual lines (one swap draw per step for WLS)
        w = np.ones(t) if decay is None else DecayingWeights(decay).calibration(n=t)
        tags = None
        if weighted_fit:
            tags, _ = swap_fit_weight(decay ** np.arange(t, -1, -1, dtype=float), w, rng)  # type: ignore[operator]
        a, b, a1, b1 = ls_residual_lines(X[:t], y[:t], X[t], tags)
        for j, c in enumerate(levels):
            lo[k, j], hi[k, j] = full_conformal_hull(a, b, a1, b1, w, float(c))
    name = "cp-ls" if rho is None else ("nexcp-wls" if weighted_fit else "nexcp-ls")
    ds = from_intervals(lo, hi, [float(c) for c in levels], method=name, check=False)
    return ds.assign_coords(obs=np.arange(start, T), time=("obs", stamps[start:]))
