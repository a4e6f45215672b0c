r"""EnbPI: ensemble batch prediction intervals for time series (Xu & Xie 2021).

EnbPI needs neither exchangeability nor a held-out calibration set. It fits :math:`B` copies of
the base on bootstrap resamples :math:`S_1, \dots, S_B` of the training series and scores every
training point by its *leave-one-out aggregated* residual, from the models that did not see it:

.. math::

    \hat f_{-i}(x) = \varphi\bigl(\{\hat f^b(x) : i \notin S_b\}\bigr),\qquad
    \hat\varepsilon_i = y_i - \hat f_{-i}(x_i),

:math:`\varphi` the mean (the paper's default) or the median. At a new point the centre is
:math:`\hat f(x) = \mathrm{mean}_i \hat f_{-i}(x)` (``center="mean"``) or, as in the paper's
Algorithm 1, the :math:`(1-\alpha)` empirical quantile of :math:`\{\hat f_{-i}(x)\}_i`
(``center="quantile"``), and the interval is

.. math::

    \hat C(x) = \bigl[\hat f(x) - w,\; \hat f(x) + w\bigr],\qquad
    w = Q_{1-\alpha}\bigl(|\hat\varepsilon|\ \text{over the last } W \text{ residuals}\bigr),

or, with ``optimize_beta=True`` (the signed residuals of the journal version; MAPIE's
``optimize_beta``), :math:`[\hat f(x) + Q_\beta(\hat\varepsilon), \hat f(x) + Q_{1-\alpha+\beta}(\hat\varepsilon)]`
with :math:`\beta \in [0, \alpha]` minimising the width. As outcomes arrive, their residuals join
the window (every ``step`` = :math:`s` of them at once) and the oldest leave; the :math:`B`
models are refitted only when :meth:`EnbPI.fit` is called again. The guarantee is asymptotic
only (stationary strongly mixing errors and a consistent :math:`\hat f`, Theorem 1).

References
----------
Xu, C. and Xie, Y. (2021). Conformal prediction interval for dynamic time-series. ICML,
PMLR 139, 11559–11569 (Algorithm 1; the reference code hamrel-cxu/EnbPI, ``PI_class_EnbPI.py``).
"""

from __future__ import annotations

import warnings
from typing import Any, Protocol, Self

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.estimator import BaseEstimator, check_is_fitted, check_not_predictive
from calibprob._core.estimator import clone as calibprob_clone
from calibprob._core.tables import check_columns, record_columns
from calibprob._core.validation import check_choice, check_int, check_targets
from calibprob.calibrators.conformal._intervals import (
    _predict_once,
    as_regressor,
    check_Xy,
    interval_dataset,
    iter_chunks,
    resolve_levels,
)
from calibprob.calibrators.online._time import TIME_COORD, check_stream_times

__all__ = ["EnbPI", "loo_aggregate", "check_window"]

_AGGREGATIONS = ("mean", "median")
_CENTERS = ("mean", "quantile")
#: numpy.quantile's methods that the residual quantile may use (the paper: "linear", np.percentile's)
_QUANTILE_METHODS = ("linear", "higher", "lower", "nearest", "midpoint", "inverted_cdf")
_BETAS = 101  # points of the beta grid on [0, alpha]


def loo_aggregate(predictions: ArrayLike, in_bag: ArrayLike, aggregation: str = "mean") -> np.ndarray:
    r"""Leave-one-out aggregates: per point :math:`i`, :math:`\varphi` of the models that did not see it.

    Parameters
    ----------
    predictions : ndarray, shape (B, m)
        Each bootstrap model's predictions at ``m`` points.
    in_bag : ndarray of bool, shape (B, n)
        ``in_bag[b, i]``: training point :math:`i` is in resample :math:`S_b`.
    aggregation : {"mean", "median"}

    Returns
    -------
    ndarray, shape (n, m)
        Row :math:`i`: :math:`\hat f_{-i}` at the ``m`` points; NaN where every model saw :math:`i`.

    Examples
    --------
    >>> P = np.array([[1.0, 10.0], [3.0, 30.0]])       # 2 models, 2 points
    >>> in_bag = np.array([[True, False], [False, True]])
    >>> loo_aggregate(P, in_bag)                        # point 0: model 1 only; point 1: model 0 only
    array([[ 3., 30.],
           [ 1., 10.]])
    """
    P = np.asarray(predictions, float)
    out = ~np.asarray(in_bag, bool)  # (B, n)
    if aggregation == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            return (out.T.astype(float) @ P) / out.sum(axis=0)[:, None]
    masked = np.where(out.T[:, :, None], P[None, :, :], np.nan)  # (n, B, m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: a point every model saw
        return np.nanmedian(masked, axis=1)


def check_window(window: int | None, history: int) -> int:
    """The residual window: an integer in ``1 .. history`` (the residuals available at fit)."""
    window = check_int(window, "window", minimum=1)
    if window > history:
        raise ValueError(
            f"window={window} is larger than the history: the fit left {history} leave-one-out residual(s), so "
            f"the first intervals would be read from fewer residuals than the window promises. Pass "
            f"window <= {history}, or fit on a longer series."
        )
    return window


class Regressor(Protocol):
    """What EnbPI fits per resample: ``fit(X, y)`` returning the fitted model, and ``predict(X)``
    (``calibprob.calibrators.conformal._intervals.as_regressor`` wraps a ``fit_predict`` callable so)."""

    def fit(self, X: np.ndarray, y: np.ndarray) -> Regressor: ...

    def predict(self, X: np.ndarray) -> ArrayLike: ...


def _clone(estimator: Regressor) -> Regressor:
    """A fresh copy: scikit-learn's clone for its estimators (pipelines included), calibprob's otherwise."""
    if hasattr(estimator, "__sklearn_clone__"):
        from sklearn.base import clone

        return clone(estimator)
    # calibprob's clone deep-copies a model without get_params; its TypeVar is bound to BaseEstimator only
    return calibprob_clone(estimator)  # type: ignore[type-var]


class EnbPI(BaseEstimator):
    r"""EnbPI around any base: bootstrap ensemble, leave-one-out residuals, a sliding residual window.

    Parameters
    ----------
    estimator : object
        The base: a calibprob base, a scikit-learn-style regressor (``fit``, ``predict``), or a
        callable ``fit_predict(X_train, y_train, X_new)``. Copied for every resample; never
        fitted in place.
    confidence_level : float or sequence of float, default 0.9
    n_bootstraps : int, default 30
        :math:`B` (the paper's value; MAPIE's ``BlockBootstrap(n_resamplings=30)``).
    aggregation : {"mean", "median"}, default "mean"
        :math:`\varphi`, the leave-one-out aggregation.
    center : {"mean", "quantile"}, default "mean"
        The interval's centre: the mean of the :math:`\hat f_{-i}(x)` (MAPIE's), or their
        :math:`(1-\alpha)` quantile as in the paper's Algorithm 1 (which shifts the interval
        upwards; MAPIE #495). With ``"quantile"`` the residuals of new outcomes are measured
        from the centre at the first ``confidence_level``.
    window : int, optional
        :math:`W`, the residuals the width is read from; default: as many as the training
        points with a leave-one-out residual (the paper's).
    step : int, default 1
        :math:`s`: new residuals join the window :math:`s` at a time.
    optimize_beta : bool, default False
        Signed residuals and the width-minimising :math:`\beta \in [0, \alpha]` (101-point grid)
        instead of the symmetric :math:`|\hat\varepsilon|` quantile.
    quantile_method : str, default "linear"
        ``numpy.quantile``'s ``method`` for the residual quantiles (the paper's
        ``np.percentile``: ``"linear"``; ``"higher"`` is MAPIE's).
    random_state : int, numpy.random.Generator or numpy.random.RandomState, default 0
        The resamples: ``choice(n, n)`` once per model, so a ``RandomState`` seeded as the
        paper's code gives its resamples.

    Attributes
    ----------
    models_ : list
        The :math:`B` fitted copies.
    in_bag_ : ndarray of bool, shape (B, n)
    residuals_ : ndarray
        Every residual so far, in time order (signed; the leave-one-out ones first).
    n_pending_ : int
        Residuals of new outcomes not yet in the window (fewer than ``step``).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import Ridge
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = X @ [1.0, -1.0] + rng.normal(size=300)
    >>> enbpi = EnbPI(Ridge(), n_bootstraps=20).fit(X[:200], y[:200])
    >>> iv = enbpi.predict_and_update(X[200:], y[200:])    # one step ahead, the window sliding
    >>> cover = float(((y[200:] >= iv["lower"]) & (y[200:] <= iv["upper"])).mean())
    >>> bool(0.8 < cover < 0.98)
    True
    """

    def __init__(
        self,
        estimator: object | None = None,
        *,
        confidence_level: ArrayLike = 0.9,
        n_bootstraps: int = 30,
        aggregation: str = "mean",
        center: str = "mean",
        window: int | None = None,
        step: int = 1,
        optimize_beta: bool = False,
        quantile_method: str = "linear",
        random_state: int | np.random.Generator | np.random.RandomState = 0,
    ) -> None:
        self.estimator = estimator
        self.confidence_level = confidence_level
        self.n_bootstraps = n_bootstraps
        self.aggregation = aggregation
        self.center = center
        self.window = window
        self.step = step
        self.optimize_beta = optimize_beta
        self.quantile_method = quantile_method
        self.random_state = random_state

    def _check_params(self) -> tuple[np.ndarray, Regressor]:
        levels, _ = resolve_levels(self.confidence_level)
        check_int(self.n_bootstraps, "n_bootstraps", minimum=2)
        check_choice(self.aggregation, "aggregation", _AGGREGATIONS)
        check_choice(self.center, "center", _CENTERS)
        check_choice(self.quantile_method, "quantile_method", _QUANTILE_METHODS)
        check_int(self.step, "step", minimum=1)
        return levels, as_regressor(self.estimator)

    def _rng(self) -> np.random.Generator | np.random.RandomState:
        if isinstance(self.random_state, (np.random.Generator, np.random.RandomState)):
            return self.random_state
        return np.random.default_rng(check_int(self.random_state, "random_state", minimum=0))

    # -- fitting --------------------------------------------------------------
    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Fit the :math:`B` bootstrap models and score the training series by its LOO residuals; returns ``self``.

        Raises
        ------
        ValueError
            A bad option, targets of the wrong length or not finite, ``window`` larger than the
            residuals the fit leaves.
        TypeError
            ``X`` is a predictive Dataset (EnbPI is model-aware: it needs the inputs).
        """
        check_not_predictive(X, self)
        levels, base = self._check_params()
        record_columns(self, X)  # a DataFrame's names: a later table with its columns reordered is refused
        X, y = check_Xy(X, y)
        y = check_targets(y, X.shape[0], "y")
        n, B = X.shape[0], int(self.n_bootstraps)
        rng = self._rng()
        in_bag = np.zeros((B, n), dtype=bool)
        models, P = [], np.empty((B, n))
        for b in range(B):
            idx = rng.choice(n, n)
            in_bag[b, idx] = True
            model = _clone(base).fit(X[idx], y[idx])
            models.append(model)
            P[b] = _predict_once(model, X, False)[0]
        loo = loo_aggregate(P, in_bag, self.aggregation)[np.arange(n), np.arange(n)]
        seen = np.isfinite(loo)  # a point in every resample has no leave-one-out prediction: dropped
        self.levels_, self.models_, self.in_bag_ = levels, models, in_bag[:, seen]
        self.oob_rows_ = np.flatnonzero(seen)
        self.residuals_ = (y - loo)[seen]
        self.n_loo_ = int(seen.sum())
        self.window_ = self.n_loo_ if self.window is None else check_window(self.window, self.n_loo_)
        self.n_pending_ = 0
        self.n_updates_ = 0
        self.last_time_: np.ndarray | None = None
        return self

    # -- the centre and the width -----------------------------------------------
    def _loo_predictions(self, X: ArrayLike) -> np.ndarray:
        """:math:`\\hat f_{-i}(x)` for every kept training point ``i`` (rows) at every row of ``X`` (columns)."""
        F = np.stack([_predict_once(m, X, False)[0] for m in self.models_])  # (B, m)
        return loo_aggregate(F, self.in_bag_, self.aggregation)

    def _centers(self, X: ArrayLike, levels: np.ndarray) -> np.ndarray:
        """The centres, shape (m, L), in chunks of rows (the (n, m) LOO matrix stays ~32 MB)."""
        X = np.asarray(X, float)
        out = np.empty((X.shape[0], levels.size))
        chunk = max(1, 4_000_000 // max(self.n_loo_, 1))
        for sl in iter_chunks(X.shape[0], chunk):
            loo = self._loo_predictions(X[sl])  # (n, rows)
            if self.center == "mean":
                out[sl] = loo.mean(axis=0)[:, None]
                continue
            ordered = np.sort(loo, axis=0)
            for j, c in enumerate(levels):  # the paper's sorted(...)[int((1 - alpha) n)]
                out[sl, j] = ordered[min(int(float(c) * self.n_loo_), self.n_loo_ - 1)]
        return out

    def _window(self) -> np.ndarray:
        admitted = self.residuals_[: self.residuals_.size - self.n_pending_]
        return admitted[-self.window_ :]

    def _offsets(self, residuals: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per level, the offsets ``(lo, hi)`` from the centre read from the window's residuals."""
        method: Any = self.quantile_method  # one of _QUANTILE_METHODS (checked at fit); numpy types it as a Literal
        if not self.optimize_beta:
            w = np.quantile(np.abs(residuals), levels, method=method)
            return -w, w
        lo, hi = np.empty(levels.size), np.empty(levels.size)
        for j, c in enumerate(levels):
            alpha = 1.0 - float(c)
            betas = np.linspace(0.0, alpha, _BETAS)
            q_lo = np.quantile(residuals, betas, method=method)
            q_hi = np.quantile(residuals, np.clip(c + betas, 0.0, 1.0), method=method)
            k = int(np.argmin(q_hi - q_lo))
            lo[j], hi[j] = q_lo[k], q_hi[k]
        return lo, hi

    def _dataset(self, lower: np.ndarray, upper: np.ndarray, levels: np.ndarray, scalar: bool) -> xr.Dataset:
        attrs = {"n_bootstraps": int(self.n_bootstraps), "window": int(self.window_), "step": int(self.step)}
        return interval_dataset(lower, upper, levels, scalar, method="enbpi", attrs=attrs)

    # -- prediction and the online loop ---------------------------------------
    def predict_interval(self, X: ArrayLike, confidence_level: ArrayLike | None = None) -> xr.Dataset:
        """Intervals for every row of ``X`` from the current residual window (no outcome taken).

        Returns
        -------
        xarray.Dataset
            ``lower``, ``upper`` over (obs, confidence_level); a scalar level drops the dimension.
        """
        check_is_fitted(self, "models_", method="fit")
        check_not_predictive(X, self)
        levels, scalar = resolve_levels(self.confidence_level if confidence_level is None else confidence_level)
        check_columns(self, X)
        X = check_Xy(X, np.zeros(np.shape(X)[0]))[0]
        centers = self._centers(X, levels)
        lo, hi = self._offsets(self._window(), levels)
        return self._dataset(centers + lo, centers + hi, levels, scalar)

    def predict(self, X: ArrayLike, confidence_level: ArrayLike | None = None) -> xr.Dataset:
        """The intervals at ``confidence_level`` (default: the constructor's), the dimension kept."""
        levels = self.confidence_level if confidence_level is None else confidence_level
        return self.predict_interval(X, np.atleast_1d(levels).tolist())

    def _new_residuals(self, X: ArrayLike, y: ArrayLike) -> np.ndarray:
        ref = self._centers(X, self.levels_[:1])[:, 0]  # "quantile": the first level's centre
        return y - ref

    def update(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Take outcomes in time order: their residuals join the window ``step`` at a time; returns ``self``.

        The models are not refitted (call :meth:`fit` again for that).
        """
        check_is_fitted(self, "models_", method="fit")
        check_not_predictive(X, self)
        check_columns(self, X)
        X, y = check_Xy(X, y)
        self._admit(self._new_residuals(X, y))
        return self

    def _admit(self, r: np.ndarray) -> None:
        self.residuals_ = np.concatenate([self.residuals_, r])
        pending = self.n_pending_ + r.size
        self.n_pending_ = pending % int(self.step)
        self.n_updates_ += int(r.size)

    def predict_and_update(
        self, X: ArrayLike, y: ArrayLike, confidence_level: ArrayLike | None = None, *, times: ArrayLike | None = None
    ) -> xr.Dataset:
        """One-step-ahead intervals for a stream: row ``t``'s interval before its outcome, then the update.

        Equivalent to ``predict_interval(X[t:t+1])`` then ``update(X[t:t+1], y[t:t+1])`` for each
        row in turn (the paper's online protocol), computed in one pass.

        Parameters
        ----------
        X : array_like, shape (m, d)
            The stream's inputs, in time order.
        y : array_like, shape (m,)
            Their outcomes.
        confidence_level : float or sequence of float, optional
        times : array_like, shape (m,), optional
            The rows' times (numbers or ``datetime64``), strictly increasing and after the last
            time already taken: the result carries them as a ``time`` coordinate along ``obs``.

        Returns
        -------
        xarray.Dataset
            As :meth:`predict_interval`.

        Raises
        ------
        ValueError
            Times not strictly increasing, or not after the last time seen (outcomes out of order).
        """
        check_is_fitted(self, "models_", method="fit")
        check_not_predictive(X, self)
        levels, scalar = resolve_levels(self.confidence_level if confidence_level is None else confidence_level)
        check_columns(self, X)
        X, y = check_Xy(X, y)
        stamps = self._check_times(times, y.size)
        centers = self._centers(X, np.unique(np.r_[levels, self.levels_[:1]]))
        grid = np.unique(np.r_[levels, self.levels_[:1]])
        ref = centers[:, int(np.flatnonzero(np.isclose(grid, self.levels_[0]))[0])]
        pick = [int(np.flatnonzero(np.isclose(grid, c))[0]) for c in levels]
        r = y - ref
        lower, upper = np.empty((y.size, levels.size)), np.empty((y.size, levels.size))
        offsets = None
        for t in range(y.size):
            if offsets is None:  # the window changed: read its quantiles again
                offsets = self._offsets(self._window(), levels)
            lower[t], upper[t] = centers[t, pick] + offsets[0], centers[t, pick] + offsets[1]
            before = self.n_pending_
            self._admit(r[t : t + 1])
            if self.n_pending_ <= before:  # a block of step residuals was admitted
                offsets = None
        ds = self._dataset(lower, upper, levels, scalar)
        if stamps is not None:
            self.last_time_ = stamps[-1:].copy() if stamps.size else self.last_time_
            ds = ds.assign_coords({TIME_COORD: ("obs", stamps)})
        return ds

    def _check_times(self, times: ArrayLike | None, m: int) -> np.ndarray | None:
        """The stream's times, strictly increasing and after the last seen (None without times)."""
        if times is None:
            return None
        stamps = np.asarray(times)
        if stamps.shape != (m,):
            raise ValueError(f"times has shape {stamps.shape} for {m} rows; pass one time per row of X.")
        probe = xr.Dataset(coords={"obs": np.arange(m), TIME_COORD: ("obs", stamps)})
        return check_stream_times(probe, getattr(self, "last_time_", None), "times")
