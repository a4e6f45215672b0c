r"""Time order of an online stream: the optional ``time`` coordinate along ``obs``.

An online calibrator's guarantee is about a *sequence*: ACI's
:math:`\frac1T\sum_t \mathrm{err}_t` (Gibbs & Candès 2021, Prop. 4.1) and OSD's
:math:`\frac1T\sum_t o_t(p)` (Deshpande et al. 2024, Thm. 2) hold for the outcomes in the
order they were fed. When a forecast carries a coordinate ``time`` along ``obs`` (numbers or
``datetime64``), :func:`check_stream_times` makes sure that order is time order: strictly
increasing within the batch, and strictly after the last time the calibrator has seen. A
stream without a ``time`` coordinate is taken in ``obs`` order, as before.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

__all__ = ["TIME_COORD", "check_stream_times"]

#: The coordinate along ``obs`` that carries the time of each forecast.
TIME_COORD = "time"


def _show(value: np.ndarray | np.generic) -> str:
    return str(value.item() if hasattr(value, "item") and not np.issubdtype(value.dtype, np.datetime64) else value)


def check_stream_times(pred: xr.Dataset, last: np.ndarray | None, name: str = "pred") -> np.ndarray | None:
    r"""The times of ``pred``'s rows, checked to be in stream order; ``None`` without a ``time`` coordinate.

    Parameters
    ----------
    pred : xarray.Dataset
        A batch of forecasts, rows in the order their outcomes arrived.
    last : ndarray of shape (1,) or None
        The last time already seen (``None``: nothing seen yet, or a stream without times).
    name : str
        The argument's name, for the message.

    Returns
    -------
    ndarray or None
        The batch's times (``None`` when ``pred`` has no ``time`` coordinate along ``obs``).

    Raises
    ------
    ValueError
        Times that are not strictly increasing (duplicated or out of order), or a batch that
        starts at or before the last time already seen: the outcomes were given out of order.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> f = calibprob.normal(np.zeros(3), np.ones(3)).assign_coords(time=("obs", [1.0, 2.0, 3.0]))
    >>> check_stream_times(f, None).tolist()
    [1.0, 2.0, 3.0]
    >>> try:
    ...     check_stream_times(f, np.array([2.5]))
    ... except ValueError as err:
    ...     print(str(err)[:60])
    pred's first time 1.0 is not after the last time already see
    """
    if TIME_COORD not in pred.coords or pred.coords[TIME_COORD].dims != ("obs",):
        return None
    t = np.asarray(pred.coords[TIME_COORD].values)
    if t.size > 1:
        bad = np.flatnonzero(~(t[1:] > t[:-1]))
        if bad.size:
            i = int(bad[0])
            what = "duplicated" if t[i + 1] == t[i] else "out of order"
            raise ValueError(
                f"{name}'s time coordinate must be strictly increasing (a stream in time order); rows {i} and "
                f"{i + 1} are {what} ({_show(t[i])}, {_show(t[i + 1])}). Sort the forecasts and outcomes by time "
                "(pred.sortby('time') and y in the same order), and drop duplicated times."
            )
    if last is None or not t.size:
        return t
    last = np.asarray(last)
    if (last.dtype.kind == "M") != (t.dtype.kind == "M"):
        raise ValueError(
            f"{name}'s time coordinate is {t.dtype} but the stream so far was timed by {last.dtype}; give every "
            "batch the same kind of time (all datetime64, or all numbers)."
        )
    if not t[0] > last[0]:
        raise ValueError(
            f"{name}'s first time {_show(t[0])} is not after the last time already seen, "
            f"{_show(last[0])}: outcomes must be given in time order. Pass the later outcomes only, or fit again "
            "to start a new stream."
        )
    return t
