r"""Online methods as comparison kinds: fit on the burn-in, then predict and update along the horizon.

A ``[split] kind = "time"`` spec splits each data set into consecutive stretches (train, burn-in,
horizon). An *online* method kind is registered with the adapter :func:`run_online`::

    register_method("my-online", "mypackage.online:MyOnline", family="distribution",
                    output="distribution", options={...},
                    adapter="calibprob.compare.online:run_online", needs_calibration_split=True)

and any class with ``fit(pred, y)``, ``predict(pred)`` and ``update(pred, y)`` runs the same way:
``fit`` on the base's predictive distribution over the burn-in, then, for each row of the horizon
in time order, ``predict`` (the forecast issued before the outcome) and ``update`` with the outcome
(:func:`stream_predictions`). The issued forecasts are scored as any method's, so the coverage
of a time split is the long-run coverage of the stream, and
``calibprob.compare.ranking`` ranks the online methods by its error :math:`|\text{coverage} - c|`
and by width (Gibbs & Candès 2021, Proposition 4.1, bound this error for ACI).

Two more kinds refit on the past instead of reading the base's forecasts: ``full-conformal-ls``
(:func:`run_full_conformal_ls`: CP+LS, nexCP+LS and nexCP+WLS of Barber et al. 2023, least squares
refitted on every earlier row at each step) and ``enbpi`` (:func:`run_enbpi`: Xu & Xie 2021's
bootstrap ensemble of the base, fitted on the rows before the horizon). A time split's
``refit_every = k`` gives every method an expanding-window base instead
(:func:`expanding_base_predictions`), and with ``slide = true`` a window that slides, whose every
refit also renews the online methods' calibration set (:func:`sliding_base_predictions`).

References
----------
Gibbs, I. and Candès, E. (2021). Adaptive conformal inference under distribution shift. NeurIPS 34.

Barber, R. F., Candès, E. J., Ramdas, A. and Tibshirani, R. J. (2023). Conformal prediction beyond
exchangeability. Ann. Statist. 51(2), 816–845.

Xu, C. and Xie, Y. (2021). Conformal prediction interval for dynamic time-series. ICML, PMLR 139.

Zaffran, M., Féron, O., Goude, Y., Josse, J. and Dieuleveut, A. (2022). Adaptive conformal predictions
for time series. ICML, PMLR 162.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob.calibrators.timeseries import nexcp_least_squares
from calibprob.compare.methods import TaskContext, _constructor_kwargs, base_predictive, calibration_prediction
from calibprob.registry._tables import MethodEntry

__all__ = [
    "ONLINE_ADAPTER",
    "run_online",
    "stream_predictions",
    "expanding_base_predictions",
    "sliding_base_predictions",
    "run_full_conformal_ls",
    "run_enbpi",
]

#: The adapter an online method kind registers (``adapter=ONLINE_ADAPTER``).
ONLINE_ADAPTER = "calibprob.compare.online:run_online"


def stream_predictions(
    calibrator: Any, pred: xr.Dataset, y: ArrayLike, *, levels: ArrayLike | None = None
) -> xr.Dataset:
    """Each row's forecast issued before its outcome, then the outcome taken; the rows concatenated.

    A calibrator with ``predict_and_update(pred, y)`` (:class:`~calibprob.calibrators.online.AdaptiveConformalInterval`)
    runs the stream in that one call, which issues the same forecasts as the row loop.

    Parameters
    ----------
    calibrator : estimator
        Fitted, with ``predict(pred)`` and ``update(pred, y)``.
    pred : xarray.Dataset
        The base's predictive distribution over the stream, rows in time order.
    y : array_like, shape (n,)
        The outcomes, in the same order.
    levels : array_like, optional
        Output levels, passed to ``predict`` when it takes ``levels``.

    Returns
    -------
    xarray.Dataset
        The issued forecasts over ``obs`` (a quantile function, or intervals).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.calibrators.online import AdaptiveConformalInterval
    >>> aci = AdaptiveConformalInterval(confidence_level=0.8, gamma=0.05)
    >>> _ = aci.fit(calibprob.normal(np.zeros(30), np.ones(30)), np.random.default_rng(0).normal(size=30))
    >>> out = stream_predictions(aci, calibprob.normal(np.zeros(5), np.ones(5)), np.zeros(5))
    >>> out.sizes["obs"], aci.n_updates_
    (5, 5)
    """
    y = np.asarray(y, float).ravel()
    takes_levels = levels is not None and "levels" in inspect.signature(calibrator.predict).parameters
    one_pass = getattr(calibrator, "predict_and_update", None)
    if not takes_levels and callable(one_pass) and list(inspect.signature(one_pass).parameters)[:2] == ["pred", "y"]:
        # the same loop inside the calibrator, without a Dataset in and out per row (ACI: the same intervals, bit
        # for bit, and the same state afterwards; tests/compare/test_online_stream.py)
        return one_pass(pred, y)
    rows = []
    for i in range(y.size):
        row = pred.isel(obs=[i])
        rows.append(calibrator.predict(row, levels=levels) if takes_levels else calibrator.predict(row))
        calibrator.update(row, y[i : i + 1])
    return xr.concat(rows, dim="obs", data_vars="all", combine_attrs="override")


def run_online(ctx: TaskContext, entry: MethodEntry, **options: Any) -> xr.Dataset:
    """Run an online method kind on a time split: fit on the burn-in, stream the horizon.

    Parameters
    ----------
    ctx : TaskContext
        The task; ``ctx.y_stream`` holds the horizon's outcomes (a time split).
    entry : MethodEntry
        The kind's registry entry.
    **options
        The spec's options of the kind.

    Returns
    -------
    xarray.Dataset
        The forecasts issued along the horizon.

    Raises
    ------
    ValueError
        Without a time split (the outcomes of a random split are not a stream).

    Examples
    --------
    >>> from calibprob.compare import parse_spec, run_task
    >>> spec = parse_spec({"name": "t", "split": {"kind": "time", "train": 0.5, "burn_in": 0.2, "horizon": 0.3},
    ...                    "datasets": [{"name": "forrester", "function": "forrester", "n": 60, "noise": 0.1}],
    ...                    "base": {"kind": "ols"}, "methods": {"aci": {"kind": "aci", "gamma": 0.05}}})
    >>> int(run_task(spec.to_dict(), "forrester", 0)["n_test"].item())
    18
    """
    if ctx.y_stream is None:
        raise ValueError(
            f"kind {entry.kind!r} is an online method: it predicts and updates along a stream, so it needs a "
            'time-ordered split. Use [split] kind = "time" with train, burn_in and horizon fractions.'
        )
    cls = entry.load()
    kwargs = _constructor_kwargs(ctx, entry, options)
    if "confidence_level" in inspect.signature(cls).parameters and "confidence_level" not in kwargs:
        kwargs["confidence_level"] = list(ctx.confidence_levels)  # intervals at the levels the spec scores
    calibrator = cls(**kwargs)
    pred_cal, y_cal = calibration_prediction(ctx)
    calibrator.fit(pred_cal, y_cal)
    recalibration = (ctx.shared or {}).get("recalibration")
    if recalibration is not None:  # a sliding window: each block's own calibration set
        return _stream_sliding(calibrator, ctx, entry.kind, recalibration)
    return stream_predictions(calibrator, ctx.predict_base(ctx.X_test), ctx.y_stream, levels=ctx.levels)


def _need_stream(ctx: TaskContext, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """An online kind runs on a time split only (its horizon is the stream): the rows before it, in time order."""
    past = ctx.past()
    if ctx.y_stream is None or past is None:
        raise ValueError(
            f"kind {kind!r} is an online method: it predicts and updates along a stream, so it needs a "
            'time-ordered split. Use [split] kind = "time" with train, burn_in and horizon.'
        )
    return past


def expanding_base_predictions(ctx: TaskContext, every: int) -> TaskContext:
    r"""``ctx`` whose burn-in and horizon forecasts come from the base refitted on every earlier row.

    A time split's ``refit_every = k``: before each block of :math:`k` rows of the burn-in and of
    the horizon, a fresh copy of the base (:meth:`TaskContext.new_base`, the task's seed) is fitted
    on all the rows before the block (train, burn-in, and the horizon's outcomes so far) and
    predicts the block: the forecaster an online method wraps is then refitted as the series
    grows (the conformal-PID experiments' AR forecaster, refitted at each step, is ``k = 1`` on lag
    features). The forecasts replace the shared ones, so every method of the task reads them.

    Parameters
    ----------
    ctx : TaskContext
        A time split's task with its base fitted on the train stretch.
    every : int
        :math:`k \ge 1`.

    Returns
    -------
    TaskContext

    Raises
    ------
    ValueError
        Without a time split, or for a base that sees the data as DataFrames (``pymc-model``, ``bambi``).
    """
    X_train, X_cal, X_test = _numeric_parts(ctx, every)
    X_all = np.concatenate([X_train, X_cal, X_test])
    y_all = np.concatenate([ctx.y_train, ctx.y_cal, ctx.y_stream])  # type: ignore[list-item]  # a time split's
    shared = dict(ctx.shared or {})
    start = X_train.shape[0]
    for part, X_part in (("calibrate", X_cal), ("test", X_test)):
        blocks = []
        for lo in range(0, X_part.shape[0], every):
            hi = min(lo + every, X_part.shape[0])
            base = ctx.new_base()
            base.fit(X_all[: start + lo], y_all[: start + lo])
            blocks.append(base_predictive(base, X_part[lo:hi], levels=ctx.levels))
        pred = xr.concat(blocks, dim="obs", data_vars="all", combine_attrs="override")
        shared[part] = pred.assign_coords(obs=np.arange(X_part.shape[0]))
        start += X_part.shape[0]
    return dataclasses.replace(ctx, shared=shared)


def _numeric_parts(ctx: TaskContext, every: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A time split's train, burn-in and horizon inputs as arrays, for refits along the stream."""
    _need_stream(ctx, "refit_every")
    X_train, X_cal, X_test = ctx.X_train, ctx.X_cal, ctx.X_test
    if not (isinstance(X_train, np.ndarray) and isinstance(X_cal, np.ndarray) and isinstance(X_test, np.ndarray)):
        raise ValueError(
            f"refit_every = {every} refits the base on numeric rows; base kind {ctx.base_spec.get('kind')!r} sees "
            "the data as DataFrames. Drop refit_every, or use a base of the numeric kinds."
        )
    return X_train, X_cal, X_test


def sliding_base_predictions(ctx: TaskContext, every: int) -> TaskContext:
    r"""``ctx`` whose horizon forecasts and calibration sets come from a window that slides with the stream.

    A time split's ``slide = true`` with ``refit_every = k`` (Zaffran et al. 2022's online split conformal):
    the train and burn-in stretches move forward with the stream. Before the block of :math:`k` horizon
    rows starting at step :math:`s`, a fresh copy of the base (:meth:`TaskContext.new_base`, the task's
    seed) is fitted on the :math:`n_\text{train}` rows :math:`[s, s + n_\text{train})` of the series
    (train, burn-in and horizon in time order) and predicts the next :math:`n_\text{burn}` rows, the
    block's calibration set, and the block. With :math:`s = 0` these are the split's own train and
    burn-in stretches. The block forecasts replace the shared ones (every method reads them); the
    calibration sets are kept for the online methods, which renew their calibration with each
    (:func:`run_online`: ``calibrate(pred, y)`` before the block).

    Parameters
    ----------
    ctx : TaskContext
        A time split's task with its base fitted on the train stretch.
    every : int
        :math:`k \ge 1`.

    Returns
    -------
    TaskContext
        ``shared["test"]`` the block forecasts, ``shared["recalibration"]`` a list of
        ``(start, stop, pred_cal, y_cal)``, one per block.

    Raises
    ------
    ValueError
        Without a time split, or for a base that sees the data as DataFrames.
    """
    X_train, X_cal, X_test = _numeric_parts(ctx, every)
    X_all = np.concatenate([X_train, X_cal, X_test])
    y_all = np.concatenate([ctx.y_train, ctx.y_cal, ctx.y_stream])  # type: ignore[list-item]  # a time split's
    n_train, n_cal = X_train.shape[0], X_cal.shape[0]
    blocks, recalibration = [], []
    for lo in range(0, X_test.shape[0], every):
        hi = min(lo + every, X_test.shape[0])
        base = ctx.new_base()
        base.fit(X_all[lo : lo + n_train], y_all[lo : lo + n_train])
        cal = slice(lo + n_train, lo + n_train + n_cal)  # the n_cal rows just before the block
        pred_cal = base_predictive(base, X_all[cal], levels=ctx.levels)
        recalibration.append((lo, hi, pred_cal.assign_coords(obs=np.arange(n_cal)), y_all[cal].copy()))
        blocks.append(base_predictive(base, X_test[lo:hi], levels=ctx.levels))
    pred = xr.concat(blocks, dim="obs", data_vars="all", combine_attrs="override")
    shared = {**(ctx.shared or {}), "test": pred.assign_coords(obs=np.arange(X_test.shape[0]))}
    shared["recalibration"] = recalibration
    return dataclasses.replace(ctx, shared=shared)


def _stream_sliding(calibrator: Any, ctx: TaskContext, kind: str, recalibration: list) -> xr.Dataset:
    """Each block's calibration renewed (``calibrate``), then its rows streamed (a ``slide = true`` split)."""
    if not callable(getattr(calibrator, "calibrate", None)):
        raise ValueError(
            f"kind {kind!r} has no calibrate(pred, y) method, which a sliding time split (slide = true) calls to "
            "renew each block's calibration set. Drop slide, or run a kind that recalibrates (aci, agaci)."
        )
    pred, y = ctx.predict_base(ctx.X_test), np.asarray(ctx.y_stream, float)
    rows = []
    for lo, hi, pred_cal, y_cal in recalibration:
        calibrator.calibrate(pred_cal.copy(deep=True), y_cal)
        rows.append(stream_predictions(calibrator, pred.isel(obs=slice(lo, hi)), y[lo:hi], levels=ctx.levels))
    return xr.concat(rows, dim="obs", data_vars="all", combine_attrs="override")


def run_full_conformal_ls(
    ctx: TaskContext,
    entry: MethodEntry,
    *,
    rho: float | None = None,
    weighted_fit: bool = False,
    fit_intercept: bool = False,
    random_state: int | None = None,
) -> xr.Dataset:
    """Full-conformal least squares along the horizon, refitted on every earlier row at each step.

    The paper's online protocol (:func:`calibprob.calibrators.timeseries.nexcp_least_squares`): at
    horizon step :math:`t` the interval of the least-squares refit on all rows before it (train,
    burn-in and the horizon's outcomes so far) plus the test point, read in closed form. No ``rho``:
    CP+LS; ``rho``: nexCP+LS (weights :math:`\rho^{n+1-i}`); with ``weighted_fit = true``: nexCP+WLS
    (the same decay as least-squares weights, the test point's weight swapped with a random point's,
    drawn with ``random_state``, the task's seed by default). The base is not used. On the inputs as
    the spec gives them: set ``standardize = false`` for the paper's unscaled fit.

    Returns
    -------
    xarray.Dataset
        ``lower``, ``upper`` over (obs, confidence_level) at the spec's levels.
    """
    X_past, y_past = _need_stream(ctx, entry.kind)
    X = np.concatenate([X_past, ctx.X_test])
    if fit_intercept:
        X = np.column_stack([np.ones(X.shape[0]), X])
    y = np.concatenate([y_past, ctx.y_stream])
    ds = nexcp_least_squares(
        X,
        y,
        burn_in=y_past.size,
        rho=rho,
        weighted_fit=weighted_fit,
        confidence_level=list(ctx.confidence_levels),
        random_state=np.random.default_rng(ctx.seed if random_state is None else random_state),
    )
    return ds.drop_vars("time").assign_coords(obs=np.arange(ctx.y_stream.size))  # type: ignore[union-attr]


def run_enbpi(ctx: TaskContext, entry: MethodEntry, **options: Any) -> xr.Dataset:
    """EnbPI around the task's base: its bootstrap copies fitted on the rows before the horizon, then streamed.

    :class:`calibprob.EnbPI` with ``estimator`` a fresh copy of the task's base, fitted on the train
    and burn-in rows in time order (:meth:`TaskContext.past`), then :meth:`~calibprob.EnbPI.predict_and_update`
    along the horizon: each interval issued before its outcome, whose residual then joins the
    sliding window. Intervals at the spec's levels.
    """
    past = _need_stream(ctx, entry.kind)
    kwargs = _constructor_kwargs(ctx, entry, options)
    kwargs.setdefault("confidence_level", list(ctx.confidence_levels))
    model = entry.load()(estimator=ctx.new_base(), **kwargs)
    model.fit(*past)
    return model.predict_and_update(ctx.X_test, ctx.y_stream)
