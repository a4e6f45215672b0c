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

References
----------
Gibbs, I. and Candès, E. (2021). Adaptive conformal inference under distribution shift. NeurIPS 34.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob.compare.methods import TaskContext, _constructor_kwargs, calibration_prediction
from calibprob.registry._tables import MethodEntry

__all__ = ["ONLINE_ADAPTER", "run_online", "stream_predictions"]

#: The adapter an online method kind registers (``adapter=ONLINE_ADAPTER``).
ONLINE_ADAPTER = "calibprob.compare.online:run_online"


def stream_predictions(
    calibrator: Any, pred: xr.Dataset, y: ArrayLike, *, levels: ArrayLike | None = None
) -> xr.Dataset:
    """Each row's forecast issued before its outcome, then the outcome taken; the rows concatenated.

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
    return stream_predictions(calibrator, ctx.predict_base(ctx.X_test), ctx.y_stream, levels=ctx.levels)
