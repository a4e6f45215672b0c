r"""Intervals of the conformal calibrators: ranks, base regressors, chunked prediction, interval Datasets.

What every conformal method needs to turn scores into intervals (formerly ``_common.py``):

* finite-sample ranks of conformal quantiles (the :math:`N + 1` convention)
  and the error that says how many calibration points a level needs;
* the base-regressor adapter (estimators following the base protocol, plain
  callables, estimators with only a ``predict``);
* chunked prediction, so that nothing of size ``n_cal x n_test x levels`` is
  ever allocated;
* the interval Dataset returned by every ``predict_interval``.

Rank conventions
----------------
With :math:`n` exchangeable calibration scores and a miscoverage
:math:`\alpha = 1 - c`, the upper conformal quantile is the
:math:`\lceil (1-\alpha)(n+1) \rceil`-th smallest score and the lower one the
:math:`\lfloor \alpha (n+1) \rfloor`-th smallest (Vovk et al. 2005; Barber et
al. 2021, eq. 3). Both exist iff
:math:`n \ge 1/\alpha - 1 = c/(1-c)`; otherwise the conformal set is the whole
real line and calibprob raises instead of returning infinite ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Self

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.estimator import BaseEstimator, check_is_fitted, check_not_predictive
from calibprob._core.ranks import least_n, lower_rank, upper_rank
from calibprob._core.ranks import min_conformal_points as min_points
from calibprob._core.tables import check_columns
from calibprob._core.validation import check_array, check_confidence_levels, check_int, check_levels, check_prediction
from calibprob.predictive import DEFAULT_LEVELS, from_intervals

__all__ = [
    "upper_rank",
    "lower_rank",
    "min_points",
    "check_enough_points",
    "order_statistic",
    "CallableRegressor",
    "as_regressor",
    "predict_mean_std_chunked",
    "iter_chunks",
    "default_chunk_size",
    "interval_dataset",
    "IntervalPredictor",
]


#: Test points per block where a conformal post-processor builds (points x levels) arrays.
QUANTILE_CHUNK_ROWS = 4096

#: Elements (float64) allowed for one temporary (n_cal or n_train) x chunk array: 32 MB.
CHUNK_ELEMENTS = 1 << 22


def check_enough_points(confidence_level: float, n: int, *, what: str = "calibration points", sides: int = 1) -> None:
    """Raise ``ValueError`` unless ``n`` points give a finite conformal quantile.

    Parameters
    ----------
    confidence_level : float
        The per-side level whose rank must exist: ``c`` for a symmetric score,
        ``1 - (1 - c)/2`` for the two ends of a signed score (``sides=2``).
    n : int
        Number of scores.
    what : str
        Names the scores in the message ("calibration points", "training points").
    sides : int
        1 or 2; only used to word the message.
    """
    need = max(least_n(confidence_level, rule="upper" if sides == 1 else "two-sided"), 1)
    if n < need:
        rule = "n >= c/(1-c) = 1/(1-c) - 1" if sides == 1 else "n >= 2/(1-c) - 1 (each tail gets (1-c)/2)"
        raise ValueError(
            f"too few {what} for confidence_level={confidence_level:g}: the conformal quantile "
            f"needs at least {need} {what} ({rule}); got n={n}. Lower confidence_level or use "
            f"more {what}."
        )


def order_statistic(values: np.ndarray, ranks: ArrayLike, axis: int = 0) -> np.ndarray:
    """The ``ranks``-th smallest entries (1-based) along ``axis``, by partial sorting.

    Parameters
    ----------
    values : ndarray
    ranks : int or sequence of int
        1-based ranks, each in ``[1, values.shape[axis]]``.
    axis : int

    Returns
    -------
    ndarray
        ``values`` with ``axis`` replaced by one entry per rank (kept even for
        a single rank).
    """
    ranks = np.atleast_1d(np.asarray(ranks, dtype=int))
    idx = np.unique(ranks - 1)
    part = np.partition(values, idx, axis=axis)
    return np.take(part, ranks - 1, axis=axis)


# ---------------------------------------------------------------------------
# Base regressors
# ---------------------------------------------------------------------------


class CallableRegressor(BaseEstimator):
    """Wrap a plain function as a refittable base regressor.

    Parameters
    ----------
    fit_predict : callable
        ``fit_predict(X_train, y_train, X_new)`` returning either ``mu`` of
        shape ``(n_new,)`` or a tuple ``(mu, sigma)``. It is called afresh for
        every prediction, with the training data stored by :meth:`fit`, so a
        jackknife "refit" costs nothing until predictions are requested.

    References
    ----------
    Barber, R. F., Candès, E. J., Ramdas, A. and Tibshirani, R. J. (2021).
    Predictive inference with the jackknife+. Annals of Statistics 49(1) (the jackknife+ refits this wraps).

    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, §2.

    Examples
    --------
    >>> import numpy as np
    >>> def ols(Xt, yt, Xn):
    ...     A = np.c_[np.ones(len(Xt)), Xt]
    ...     coef = np.linalg.lstsq(A, yt, rcond=None)[0]
    ...     return np.c_[np.ones(len(Xn)), Xn] @ coef
    >>> reg = CallableRegressor(fit_predict=ols).fit(np.arange(5.0)[:, None], np.arange(5.0))
    >>> reg.predict_mean_std(np.array([[7.0]]))[0]
    array([7.])
    """

    def __init__(self, *, fit_predict: Callable) -> None:
        self.fit_predict = fit_predict

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Store the training data; returns ``self``."""
        if not callable(self.fit_predict):
            raise TypeError(f"fit_predict must be callable; got {type(self.fit_predict).__name__}.")
        self.X_train_ = X
        self.y_train_ = np.asarray(y, dtype=float)
        return self

    def predict_mean_std(self, X: ArrayLike, *, include_noise: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
        """``(mu, sigma)``; ``sigma`` is ``None`` when the function returns only ``mu``."""
        check_is_fitted(self, "X_train_", method="fit")
        out = self.fit_predict(self.X_train_, self.y_train_, X)
        if isinstance(out, tuple):
            mu, sigma = out
            return np.asarray(mu, dtype=float), np.asarray(sigma, dtype=float)
        return np.asarray(out, dtype=float), None


def as_regressor(estimator: Any, name: str = "estimator") -> Any:
    """Return ``estimator`` if it can be fitted, else wrap a callable in :class:`CallableRegressor`."""
    if estimator is None:
        raise ValueError(
            f"{name} is required: pass a base regressor with fit/predict_mean_std "
            "(e.g. calibprob.GaussianProcessRegressor()) or a callable fit_predict(X_train, y_train, X_new)."
        )
    if hasattr(estimator, "fit"):
        if not (hasattr(estimator, "predict_mean_std") or hasattr(estimator, "predict")):
            raise TypeError(
                f"{name} {type(estimator).__name__} has fit but neither predict_mean_std nor predict. "
                "Give it predict(X) returning the mean, or predict_mean_std(X) returning (mean, std)."
            )
        return estimator
    if callable(estimator):
        return CallableRegressor(fit_predict=estimator)
    raise TypeError(
        f"{name} must be a base regressor (fit + predict_mean_std) or a callable "
        f"fit_predict(X_train, y_train, X_new); got {type(estimator).__name__}."
    )


def _predict_once(estimator: Any, X: Any, need_sigma: bool) -> tuple[np.ndarray, np.ndarray | None]:
    if hasattr(estimator, "predict_mean_std"):
        mu, sigma = estimator.predict_mean_std(X)
    else:
        # scikit-learn-like base: predict returns the mean only
        mu, sigma = estimator.predict(X), None
        if hasattr(mu, "calib"):  # a predictive Dataset: take its mean/std
            ds = mu
            mu, sigma = ds.calib.mean().values, ds.calib.std().values
    source = f"{type(estimator).__name__}'s prediction"
    mu = check_prediction(mu, len(X), "mu", source=source)
    if need_sigma:
        if sigma is None:
            raise ValueError(
                f"a normalised score needs the base's predictive standard deviation, but "
                f"{type(estimator).__name__} gives only a mean (no sigma). Use score='absolute', "
                "or a base whose predict_mean_std returns (mu, sigma)."
            )
        sigma = check_prediction(sigma, len(X), "sigma", source=source)
    return mu, (sigma if need_sigma else None)


def default_chunk_size(n_rows_per_point: int, chunk_size: int | None = None) -> int:
    """Test points per chunk so that an ``n_rows_per_point x chunk`` float array stays ~32 MB."""
    if chunk_size is not None:
        return check_int(chunk_size, "chunk_size", minimum=1)
    return int(max(64, CHUNK_ELEMENTS // max(int(n_rows_per_point), 1)))


def iter_chunks(n: int, chunk: int) -> Iterator[slice]:
    """Consecutive slices of at most ``chunk`` rows covering ``range(n)``."""
    for start in range(0, n, chunk):
        yield slice(start, min(start + chunk, n))


def predict_mean_std_chunked(
    estimator: Any, X: Any, *, need_sigma: bool, chunk_size: int | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Call the base's ``predict_mean_std`` on row chunks of ``X``.

    A GP predicting 100 000 points at once builds an ``n_train x 100 000``
    cross-covariance; chunking bounds that temporary whatever the base is.

    Returns
    -------
    mu : ndarray, shape (n,)
    sigma : ndarray, shape (n,) or None
    """
    n = len(X)
    n_train = getattr(estimator, "n_train_", None) or 1000
    chunk = default_chunk_size(n_train, chunk_size)
    if n <= chunk:
        return _predict_once(estimator, X, need_sigma)
    mu = np.empty(n)
    sigma = np.empty(n) if need_sigma else None
    for sl in iter_chunks(n, chunk):
        m, s = _predict_once(estimator, X[sl], need_sigma)
        mu[sl] = m
        if sigma is not None:
            sigma[sl] = s
    return mu, sigma


def chunked_intervals(
    confidence_level: ArrayLike,
    X: ArrayLike,
    bounds: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    *,
    chunk: int | None,
    method: str,
    attrs: dict | None = None,
) -> xr.Dataset:
    """The interval family of a model-aware interval method, its ends computed in test-point chunks.

    The one interval-prediction loop of the jackknife / CV+ and the GP conformal methods: resolve
    the levels, check ``X``, call ``bounds(X_chunk, levels) -> (lower, upper)`` (each
    ``(rows, levels)``) on consecutive row chunks and assemble :func:`interval_dataset`.

    Parameters
    ----------
    confidence_level : float or sequence
        The level(s) asked for (the caller resolves its default).
    X : array_like, shape (m, d)
    bounds : callable
        Interval ends of a block of test points at the levels.
    chunk : int or None
        Test points per call; ``None``: all of them in one call.
    method, attrs
        Passed to :func:`interval_dataset`.
    """
    levels, scalar = resolve_levels(confidence_level)
    X = check_array(X, "X", ndim=2)
    m = X.shape[0]
    lower = np.empty((m, levels.size))
    upper = np.empty((m, levels.size))
    for sl in iter_chunks(m, m if chunk is None else chunk) if m else ():
        lower[sl], upper[sl] = bounds(X[sl], levels)
    return interval_dataset(lower, upper, levels, scalar, method=method, attrs=attrs)


def check_Xy(
    X: ArrayLike, y: ArrayLike, *, X_name: str = "X", y_name: str = "y", min_length: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """Validate a design matrix (2-D) and a target vector (1-D, finite) of equal length."""
    X = check_array(X, X_name, ndim=2, min_length=min_length)
    y = check_array(y, y_name, ndim=1, min_length=min_length)
    if X.shape[0] != y.shape[0]:
        raise ValueError(
            f"mismatched lengths: {X_name} has {X.shape[0]} rows, {y_name} has {y.shape[0]} entries. "
            "Pass one target per row."
        )
    return X, y


def resolve_levels(confidence_level: ArrayLike) -> tuple[np.ndarray, bool]:
    """``(levels ndarray, scalar?)`` from one level or a sequence, validated in (0, 1)."""
    scalar = np.ndim(confidence_level) == 0
    return check_confidence_levels(confidence_level, "confidence_level"), scalar


def interval_dataset(
    lower: np.ndarray, upper: np.ndarray, levels: np.ndarray, scalar: bool, *, method: str, attrs: dict | None = None
) -> xr.Dataset:
    """The interval result: ``lower``/``upper`` over (obs, confidence_level).

    Follows the ``calib.interval`` convention: a scalar ``confidence_level``
    drops that dimension (kept as a scalar coordinate).
    """
    ds = from_intervals(lower, upper, levels, method=method, attrs=attrs, check=False)
    return ds.isel(confidence_level=0) if scalar else ds


def level_form(ds: xr.Dataset, confidence_level: ArrayLike | None, default: ArrayLike) -> xr.Dataset:
    """The interval family's one rule for the ``confidence_level`` dimension of ``predict_interval``.

    ``ds`` holds the dimension. A scalar level asked for drops it (kept as a scalar coordinate: the
    ``calib.interval`` and xarray ``.sel`` convention); no level asked (``None``) means the calibrator's own
    ``default`` in the form it was given, so a scalar constructor level drops it too; a sequence keeps it.
    ``predict`` always keeps it; :func:`calibprob.evaluate` reads either form (a scalar coordinate is one level).
    Grouped or not, every interval method follows this rule (``calibprob.testing.check_level_dims``).
    """
    asked = default if confidence_level is None else confidence_level
    return ds.isel(confidence_level=0) if np.ndim(asked) == 0 else ds


def reachable_levels(levels: ArrayLike, n: int, *, sides: int) -> np.ndarray:
    """Mask of the confidence levels that ``n`` scores resolve (finite conformal ends)."""
    rule = "upper" if sides == 1 else "two-sided"
    return np.array([n >= least_n(float(c), rule=rule) for c in np.asarray(levels, float)], dtype=bool)


def interval_prediction(
    model: Any, X: ArrayLike, confidence_level: ArrayLike | None, *, n: int, sides: int
) -> xr.Dataset:
    """``predict`` of an intervals-only model-aware calibrator: the interval family of the contract.

    ``lower``/``upper`` over (obs, confidence_level) at every level asked for
    (default: the model's ``confidence_level``), ``attrs["family"] ==
    "interval"``. A level whose conformal rank exceeds the ``n`` scores has the
    whole real line as its conformal set; it is returned as such (``-inf``,
    ``inf``: coverage 1, width inf) rather than dropped, so that every method
    is scored on the same grid of levels.
    """
    levels, _ = resolve_levels(model.confidence_level if confidence_level is None else confidence_level)
    ok = reachable_levels(levels, n, sides=sides)
    if not ok.any():
        raise ValueError(
            f"{n} scores resolve none of the confidence levels {levels.tolist()}; lower the levels or use more data."
        )
    iv = model.predict_interval(X, confidence_level=levels[ok])
    m = iv.sizes["obs"]
    lower = np.full((m, levels.size), -np.inf)
    upper = np.full((m, levels.size), np.inf)
    lower[:, ok] = iv["lower"].transpose("obs", "confidence_level").values
    upper[:, ok] = iv["upper"].transpose("obs", "confidence_level").values
    out = interval_dataset(
        lower,
        upper,
        levels,
        False,
        method=iv.attrs.get("method", ""),
        attrs={k: v for k, v in iv.attrs.items() if k not in ("method", "family")},
    )
    out.attrs["unbounded_levels"] = int((~ok).sum())
    return out


class IntervalPredictor:
    """The ``predict`` / ``predict_interval`` pair of a model-aware interval method, written once.

    Jackknife(+) / CV(+), J+GP / FCP-GP and the LOO jackknife+ give intervals only; their
    ``predict`` is the contract's interval family at every level asked for (unresolvable levels
    unbounded, :func:`interval_prediction`) and their ``predict_interval`` the exact ends, in
    test-point chunks (:func:`chunked_intervals`). A subclass provides what differs:

    * ``_fitted``: the attribute :meth:`fit` sets (the not-fitted check names ``fit``);
    * ``_interval_sides()``: 1 for a symmetric score, 2 for a signed one (the ranks' minimum);
    * ``_check_predict()``: refuses a prediction this fit cannot make (default: none);
    * for :meth:`predict_interval`: ``_chunk_bounds(X_chunk, levels) -> (lower, upper)``,
      ``_interval_chunk()`` (test points per chunk, or ``None``), ``_method_name()`` and
      ``_interval_attrs()``; a method whose intervals come another way overrides it.
    """

    _fitted = "scores_"
    # set by the subclass's __init__ and fit
    confidence_level: ArrayLike
    n_train_: int

    def _interval_sides(self) -> int:
        return 1

    def _check_predict(self) -> None:
        """Refuse a prediction this fit cannot make (default: none)."""

    def _interval_chunk(self) -> int | None:
        """Test points per call of ``_chunk_bounds`` (default: all at once)."""
        return None

    def _interval_attrs(self) -> dict:
        return {"n_train": self.n_train_}

    def _method_name(self) -> str:
        raise NotImplementedError(
            f"{type(self).__name__} must name its method (_method_name) to use IntervalPredictor."
        )

    def _chunk_bounds(self, X: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError(
            f"{type(self).__name__} must give its interval ends (_chunk_bounds) or override predict_interval."
        )

    def predict(self, X: ArrayLike, *, confidence_level: ArrayLike | None = None) -> xr.Dataset:
        """Intervals at the levels asked for, as the contract's interval family.

        Parameters
        ----------
        X : array_like, shape (m, d)
        confidence_level : float or sequence, optional
            Default: the constructor's ``confidence_level``. Levels the ``n``
            training points cannot resolve come back unbounded.

        Returns
        -------
        xarray.Dataset
            ``lower``, ``upper`` over (obs, confidence_level),
            ``attrs["family"] == "interval"``; :func:`calibprob.evaluate` scores it.
        """
        check_is_fitted(self, self._fitted, method="fit")
        check_not_predictive(X, self)
        check_columns(self, X)
        self._check_predict()
        return interval_prediction(self, X, confidence_level, n=self.n_train_, sides=self._interval_sides())

    def predict_interval(self, X: ArrayLike, confidence_level: ArrayLike | None = None) -> xr.Dataset:
        """Intervals at one or several confidence levels, computed in test-point chunks.

        Parameters
        ----------
        X : array_like, shape (m, d)
        confidence_level : float or sequence, optional

        Returns
        -------
        xarray.Dataset
            ``lower``, ``upper`` over (obs, confidence_level); a scalar level drops that dimension.
        """
        check_is_fitted(self, self._fitted, method="fit")
        check_not_predictive(X, self)
        check_columns(self, X)
        return chunked_intervals(
            self.confidence_level if confidence_level is None else confidence_level,
            X,
            self._chunk_bounds,
            chunk=self._interval_chunk(),
            method=self._method_name(),
            attrs=self._interval_attrs(),
        )


# ---------------------------------------------------------------------------
# Conformal quantile functions (rank interpolation)
# ---------------------------------------------------------------------------


def _needed_for_level(p: float, symmetric: bool) -> int:
    """Smallest n whose rank interpolation reaches level ``p``."""
    return least_n(p, rule="mirrored" if symmetric else "quantile")


def valid_levels(levels: ArrayLike | None, n: int, *, symmetric: bool) -> np.ndarray:
    r"""Quantile levels that ``n`` scores can resolve by rank interpolation.

    A signed score reaches levels :math:`p \in [1/(n+1), n/(n+1)]`; a
    symmetric score, mirrored around :math:`\mu`, reaches
    :math:`|2p - 1| \le n/(n+1)`.

    Parameters
    ----------
    levels : array_like or None
        ``None``: :data:`calibprob.predictive.DEFAULT_LEVELS` restricted to the
        reachable range (the contract's Gaussian tail rule covers the rest).
    n : int
        Number of calibration scores.
    symmetric : bool

    Returns
    -------
    ndarray, shape (L,)

    Raises
    ------
    ValueError
        An explicit level out of reach (the message says how many points it
        needs), or fewer than 2 default levels reachable.
    """
    if levels is None:
        ok = np.array([_needed_for_level(p, symmetric) <= n for p in DEFAULT_LEVELS])
        if ok.sum() < 2:
            need = sorted(_needed_for_level(p, symmetric) for p in DEFAULT_LEVELS)[1]
            raise ValueError(
                f"too few calibration points for a quantile function: {n} scores resolve fewer than "
                f"2 of the default levels; at least {need} calibration points are needed."
            )
        return DEFAULT_LEVELS[ok]
    levels = check_levels(levels)
    for p in levels:
        need = _needed_for_level(float(p), symmetric)
        if need > n:
            raise ValueError(
                f"too few calibration points for level {p:g}: rank interpolation of the scores "
                f"needs at least {need} calibration points; got n={n}. Drop the extreme levels "
                "(levels=None keeps the reachable ones) or add calibration data."
            )
    return levels


def rank_interpolated_quantiles(sorted_scores: ArrayLike, levels: ArrayLike, *, symmetric: bool) -> np.ndarray:
    r"""Score at the continuous rank of each level (linear between order statistics).

    Signed: :math:`r(p) = R_{(t)}` at :math:`t = p(n+1) \in [1, n]`.
    Symmetric: :math:`r(p) = \operatorname{sign}(2p-1)\, R_{(t)}` at
    :math:`t = |2p-1|(n+1) \in [0, n]`, with :math:`R_{(0)} = 0`.

    Returns
    -------
    ndarray, shape (L,)
    """
    R = np.asarray(sorted_scores, float)
    n = R.size
    levels = np.asarray(levels, float)
    if symmetric:
        t = np.abs(2.0 * levels - 1.0) * (n + 1)
        r = np.interp(t, np.arange(n + 1), np.concatenate([[0.0], R]))
        return np.sign(2.0 * levels - 1.0) * r
    return np.interp(levels * (n + 1), np.arange(1, n + 1), R)


def conformal_quantile_function(
    mu: ArrayLike,
    scale: ArrayLike,
    sorted_scores: ArrayLike,
    levels: ArrayLike,
    *,
    symmetric: bool,
    chunk_size: int | None = None,
) -> np.ndarray:
    r"""Quantiles :math:`\mu(x) + s(x)\, r(p)` of the conformal predictive distribution.

    Parameters
    ----------
    mu, scale : ndarray, shape (m,)
    sorted_scores : ndarray, shape (n,)
    levels : ndarray, shape (L,)
    symmetric : bool
    chunk_size : int, optional
        Test points per block. The result is written block by block into one
        ``(m, L)`` array, so the only temporary is ``chunk_size x L`` (default
        :data:`QUANTILE_CHUNK_ROWS` rows, 3 MB at 99 levels) instead of a
        second ``(m, L)`` array; every entry is the same elementwise
        expression, so the result does not depend on the chunk size (tested
        bit for bit).

    Returns
    -------
    ndarray, shape (m, L)
        Non-decreasing along the level axis (``scale > 0``).
    """
    r = rank_interpolated_quantiles(sorted_scores, levels, symmetric=symmetric)
    mu = np.asarray(mu, float).reshape(-1)
    scale = np.broadcast_to(np.asarray(scale, float), mu.shape)
    chunk = QUANTILE_CHUNK_ROWS if chunk_size is None else check_int(chunk_size, "chunk_size", minimum=1)
    out = np.empty((mu.size, r.size))
    for sl in iter_chunks(mu.size, chunk):
        np.multiply(scale[sl, None], r[None, :], out=out[sl])
        out[sl] += mu[sl, None]
    return out
