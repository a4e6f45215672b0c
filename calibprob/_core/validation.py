"""Input validation shared by every public entry point.

Every check raises ``ValueError`` (or ``TypeError`` for wrong types) with a
message that names the parameter, the allowed range, the value received and
the fix, e.g. ``"confidence_level must be in (0, 1); got 1.5. Pass a
probability such as 0.9."``.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from calibprob._core.alignment import align_to_obs
from calibprob._core.dims import SAMPLE_DIMS
from calibprob._core.labels import read_labels

__all__ = [
    "check_array",
    "check_targets",
    "check_finite",
    "check_same_length",
    "check_positive",
    "check_probability",
    "check_levels",
    "check_confidence_levels",
    "check_choice",
    "check_int",
    "GROUP_COORD",
    "check_groups",
]


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_array(
    value: Any,
    name: str,
    *,
    ndim: int | tuple[int, ...] | None = None,
    finite: bool = True,
    dtype: Any = np.float64,
    min_length: int = 1,
) -> np.ndarray:
    """Convert ``value`` to an array and check its dimensions and values.

    Parameters
    ----------
    value : array_like
        The input.
    name : str
        The parameter name used in error messages.
    ndim : int or tuple of int, optional
        Allowed numbers of dimensions. A 1-D input is *not* silently reshaped.
    finite : bool, default True
        Reject NaN and infinite entries.
    dtype : numpy dtype, default float64
    min_length : int, default 1
        Minimum size of the first axis.

    Returns
    -------
    numpy.ndarray
    """
    try:
        arr = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"{name} must be a numeric array; got {type(value).__name__} {_short(value)}. "
            "Pass a NumPy array, list of numbers or xarray.DataArray."
        ) from err
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if arr.ndim not in allowed:
            shapes = " or ".join(f"{k}-D" for k in allowed)
            hint = ""
            if 2 in allowed and arr.ndim == 1:
                hint = " For a single feature pass X.reshape(-1, 1)."
            raise ValueError(f"{name} must be {shapes}; got an array of shape {arr.shape}.{hint}")
    if arr.ndim >= 1 and arr.shape[0] < min_length:
        raise ValueError(f"{name} needs at least {min_length} entries along its first axis; got {arr.shape[0]}.")
    if finite:
        check_finite(arr, name)
    return arr


def check_finite(arr: np.ndarray, name: str) -> np.ndarray:
    """Raise if ``arr`` holds NaN or infinite values, saying where."""
    bad = ~np.isfinite(arr)
    if bad.any():
        idx = np.argwhere(bad)[0]
        where = tuple(int(i) for i in idx) if arr.ndim > 1 else int(idx[0]) if arr.ndim else ()
        kind = "NaN" if np.isnan(arr[tuple(idx)]) else "inf"
        raise ValueError(
            f"{name} must be finite; got {int(bad.sum())} non-finite value(s), the first "
            f"({kind}) at index {where}. Drop or impute missing values before calling."
        )
    return arr


def check_same_length(**arrays: Any) -> int:
    """Check that all arrays share the length of their first axis; return it."""
    lengths = {name: np.shape(a)[0] for name, a in arrays.items() if a is not None}
    if len(set(lengths.values())) > 1:
        desc = ", ".join(f"{k} has {v}" for k, v in lengths.items())
        raise ValueError(f"mismatched lengths: {desc} rows. Pass arrays with one entry per observation.")
    return next(iter(lengths.values()))


#: Dimension names that index draws in PyMC / ArviZ output; a target carrying one is
#: almost certainly predictive draws passed where observed values were meant.
_SAMPLE_DIMS = SAMPLE_DIMS


def check_targets(
    y: Any, n: int, name: str = "y", *, obs: Any = None, ndim: int | tuple[int, ...] | None = 1
) -> np.ndarray:
    """Observed targets as a finite float array with ``n`` entries along axis 0.

    The one place where every ``y`` argument (``evaluate``, each metric, the
    ``.calib`` accessor, :func:`calibprob.to_datatree`) is checked, so they all
    accept the same things:

    * a NumPy array or sequence, one value per observation (axis 0);
    * a 1-D ``xarray.DataArray`` with **any** single dimension name, e.g. PyMC's
      ``idata.observed_data["y"]`` with dim ``obs_id`` (or ``y_dim_0``). It is
      aligned with the prediction **by position**: the prediction's row ``i``
      scores ``y[i]``. When the dim is literally ``obs`` (or ``y`` is a pandas
      Series with a non-default index) and the prediction's ``obs`` labels are
      given, ``y`` is aligned to them by label, and refused, naming the first
      mismatch, when its labels are others
      (``calibprob._core.alignment.align_to_obs``).

    Parameters
    ----------
    y : array_like or xarray.DataArray
        The targets.
    n : int
        Number of observations of the prediction.
    name : str, default "y"
        Parameter name used in error messages.
    obs : array_like, optional
        The prediction's ``obs`` labels (a labelled ``y`` is aligned to them).
    ndim : int or None, default 1
        Required number of dimensions of a NumPy ``y`` (``None``: any, at least 1).
        A DataArray must always be 1-D.

    Returns
    -------
    numpy.ndarray
        ``float64``, ``shape[0] == n``.

    Raises
    ------
    TypeError
        ``y`` is a Dataset / DataTree (a group instead of one variable).
    ValueError
        Non-finite values, a DataArray that is not 1-D (the message says if it
        looks like predictive draws), mismatched ``obs`` labels, or a length
        other than ``n`` (the message names both lengths).

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from calibprob._core.validation import check_targets
    >>> y = xr.DataArray([1.0, 2.0, 3.0], dims=("obs_id",), coords={"obs_id": [10, 11, 12]})
    >>> check_targets(y, 3).tolist()
    [1.0, 2.0, 3.0]
    >>> try:
    ...     check_targets(y, 4)
    ... except ValueError as err:
    ...     print(str(err)[:65])
    mismatched lengths: y has 3 entries, the prediction has 4 observa
    """
    if isinstance(y, (xr.Dataset, xr.DataTree)):
        names = list(y.data_vars) if isinstance(y, xr.Dataset) else list(y.dataset.data_vars)
        raise TypeError(
            f"{name} must be an array or a 1-D DataArray; got a {type(y).__name__} with variables "
            f"{names}. Pass one variable, e.g. idata.observed_data['y']."
        )
    # labelled y (a DataArray with an obs coordinate, a Series with an index) follows the prediction's rows
    y = align_to_obs(y, obs, name)
    if isinstance(y, xr.DataArray):
        if y.ndim != 1:
            draws = [d for d in y.dims if d in _SAMPLE_DIMS]
            hint = (
                f" Its dims {draws} index draws: pass the observed values (e.g. "
                "idata.observed_data['y']) and give draws to calibprob.from_draws."
                if draws
                else " Select or stack it to one value per observation."
            )
            raise ValueError(
                f"{name} as a DataArray must be 1-D, one value per observation (any dim name, "
                f"e.g. PyMC's 'obs_id'); got dims {y.dims}.{hint}"
            )
        y = y.values
    arr = check_array(y, name, min_length=0)
    allowed = () if ndim is None else (ndim,) if isinstance(ndim, int) else tuple(ndim)
    if allowed and arr.ndim not in (0, *allowed):
        raise ValueError(
            f"{name} must be {' or '.join(f'{k}-D' for k in allowed)}; got an array of shape {arr.shape}. "
            f"Expected shape ({n},), one "
            f"observed value per observation: pass one column (e.g. {name}[:, 0]), or one call per target."
        )
    if arr.ndim == 0 or arr.shape[0] != n:
        got = "a scalar" if arr.ndim == 0 else f"{arr.shape[0]} entries"
        raise ValueError(
            f"mismatched lengths: {name} has {got}, the prediction has {n} observations. "
            "Pass one observed value per observation, in the prediction's order (a DataArray "
            "is aligned by position, whatever its dim name)."
        )
    return arr


def check_positive(arr: Any, name: str, *, strict: bool = True) -> np.ndarray:
    """Raise unless every entry is > 0 (or >= 0 when ``strict=False``)."""
    arr = np.asarray(arr, dtype=float)
    check_finite(arr, name)
    bad = arr <= 0 if strict else arr < 0
    if bad.any():
        first = arr[bad].ravel()[0]
        rel = "> 0" if strict else ">= 0"
        raise ValueError(
            f"{name} must be {rel} everywhere; got {int(bad.sum())} value(s) violating it "
            f"(e.g. {float(first)!r}). A predictive standard deviation must be strictly positive: "
            "check the base model or add a small floor."
        )
    return arr


def check_probability(value: Any, name: str) -> float:
    """A scalar strictly inside (0, 1)."""
    try:
        p = float(value)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be a number in (0, 1); got {_short(value)}.") from err
    if not (0.0 < p < 1.0) or not np.isfinite(p):
        raise ValueError(
            f"{name} must be in (0, 1); got {p if np.isfinite(p) else value!r}. Pass a probability such as 0.9 "
            "(not a percentage, not alpha = 1 - level)."
        )
    return p


def check_levels(levels: Any, name: str = "levels", *, increasing: bool = True) -> np.ndarray:
    """Quantile levels: 1-D, finite, strictly inside (0, 1), strictly increasing."""
    arr = np.atleast_1d(np.asarray(levels, dtype=float))
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence; got shape {arr.shape}.")
    check_finite(arr, name)
    out = (arr <= 0) | (arr >= 1)
    if out.any():
        raise ValueError(
            f"{name} must lie strictly inside (0, 1); got {float(arr[out][0])!r}. "
            "Levels 0 and 1 are infinite for unbounded distributions; use e.g. 0.005 and 0.995."
        )
    if increasing and arr.size > 1 and np.any(np.diff(arr) <= 0):
        i = int(np.argmax(np.diff(arr) <= 0))
        raise ValueError(
            f"{name} must be strictly increasing; got {float(arr[i])!r} followed by {float(arr[i + 1])!r} "
            f"at position {i}. Sort them and drop duplicates (numpy.unique)."
        )
    return arr


def check_confidence_levels(values: Any, name: str = "confidence_level") -> np.ndarray:
    """One or several confidence levels in (0, 1), returned as a 1-D array."""
    arr = np.atleast_1d(np.asarray(values, dtype=float))
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a number or a 1-D sequence; got shape {arr.shape}.")
    for v in arr:
        check_probability(v, name)
    return arr


def check_choice(value: Any, name: str, choices: Iterable[str]) -> str:
    """A string among ``choices``; the message lists them."""
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(repr(c) for c in choices)}; got {value!r}.")
    return value


def check_int(value: Any, name: str, *, minimum: int | None = None) -> int:
    """An integer, optionally at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer; got {_short(value)}.")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}.")
    return int(value)


#: Name of the ``obs`` coordinate that carries each observation's group label in a
#: predictive Dataset (a data column, a PyMC coordinate or a binning of
#: :func:`calibprob.bins`). ``groups="group"`` refers to it.
GROUP_COORD = "group"


def _groups_from_name(name_value: str, pred: Any, name: str) -> Any:
    if pred is None or not hasattr(pred, "coords"):
        raise TypeError(
            f"{name}={name_value!r} names a coordinate, but no predictive Dataset was given to read it from. "
            "Pass the group labels as an array with one entry per observation."
        )
    if name_value not in pred.coords:
        have = sorted(str(c) for c in pred.coords if c not in ("obs", "level", "confidence_level"))
        raise ValueError(
            f"{name}={name_value!r} is not a coordinate of the prediction (coordinates: {have or 'none'}). "
            f"Attach the labels with pred.assign_coords({name_value}=('obs', labels)) or pass them as an array."
        )
    coord = pred.coords[name_value]
    if coord.dims != ("obs",):
        raise ValueError(
            f"{name}={name_value!r} must be a coordinate along 'obs'; it has dims {coord.dims}. "
            "Pass one label per observation."
        )
    return coord.values


def check_groups(groups: Any, n: int, *, pred: Any = None, name: str = "groups") -> np.ndarray | None:
    """One group label per observation, as a 1-D array (or ``None`` when no groups are given).

    The one place where every ``groups=`` argument (Mondrian calibrators, conformal Bayes,
    :func:`calibprob.evaluate`) is read, so they all accept the same things:

    * ``None``: no groups;
    * a ``str``: the name of a coordinate along ``obs`` of ``pred`` (by convention
      :data:`GROUP_COORD`, ``"group"``);
    * a 1-D ``xarray.DataArray``: along ``obs`` with an ``obs`` coordinate, aligned to
      ``pred``'s rows by that coordinate (refused if the labels do not match); along any other
      dimension (e.g. PyMC's ``obs_id``), taken by position;
    * a pandas Series: with a non-default index, aligned to ``pred``'s rows by it (as pandas
      aligns); otherwise by position;
    * any 1-D array-like of labels (integers, strings, categories, booleans or floats).

    Missing labels (NaN, None, pandas ``NA``, ``NaT``) are refused with their rows, and labels of
    different types that print the same (``1`` and ``"1"``) are refused rather than merged
    (``calibprob._core.labels``).

    Parameters
    ----------
    groups : None, str, xarray.DataArray or array_like
        The group labels.
    n : int
        The number of observations the labels must match.
    pred : xarray.Dataset, optional
        The prediction whose coordinate a ``str`` names.
    name : str, default "groups"
        The parameter name used in error messages.

    Returns
    -------
    numpy.ndarray or None
        The labels, shape ``(n,)``, in their own dtype.

    Raises
    ------
    ValueError
        Wrong length or dimensions, or a missing label (NaN / None).
    TypeError
        A name given without a Dataset to read it from.
    """
    if groups is None:
        return None
    if isinstance(groups, str):
        values = np.asarray(_groups_from_name(groups, pred, name))
    elif isinstance(groups, xr.DataArray):
        if groups.ndim != 1:
            raise ValueError(
                f"{name} must be 1-D (one label per observation); got a DataArray with dims {groups.dims}."
            )
        values = align_to_obs(groups, pred, name).values
    else:
        if isinstance(groups, pd.DataFrame):
            raise ValueError(
                f"{name} must be 1-D (one label per observation); got a DataFrame with columns "
                f"{list(groups.columns)}. Pass one column, e.g. df[{str(groups.columns[0])!r}]."
            )
        values = align_to_obs(groups, pred, name)
        shape = np.shape(values)
        if len(shape) == 2 and 1 in shape:
            raise ValueError(
                f"{name} must be 1-D (one label per observation); got shape {shape}. "
                "Pass groups.ravel() if it is a single column."
            )
        if len(shape) != 1:
            raise ValueError(f"{name} must be 1-D (one label per observation); got shape {shape}.")
    if len(values) != n:
        raise ValueError(
            f"{name} has {len(values)} labels but there are {n} observations. Pass one label per observation."
        )
    return read_labels(values, name)


def check_prediction(value: Any, n: int, name: str, *, source: str = "the base's predict") -> np.ndarray:
    """One finite value per input row from a user's (or a base's) prediction, else a clear refusal.

    A prediction is trusted nowhere else: a scalar would broadcast to one interval for all
    rows, two columns would be read as twice as many rows, and a list of arrays would fail
    deep inside NumPy. An ``(n, 1)`` column is accepted as ``(n,)``.

    Parameters
    ----------
    value : array_like
        What the estimator returned.
    n : int
        Number of input rows it was asked about.
    name : str
        What the value is (``"mu"``, ``"sigma"``), used in the message.
    source : str
        Who produced it, used in the message.

    Returns
    -------
    numpy.ndarray
        ``float64``, shape ``(n,)``, finite.

    Examples
    --------
    >>> from calibprob._core.validation import check_prediction
    >>> check_prediction([[1.0], [2.0]], 2, "mu").tolist()
    [1.0, 2.0]
    >>> try:
    ...     check_prediction(3.0, 5, "mu")
    ... except ValueError as err:
    ...     print(str(err)[:58])
    mu from the base's predict must have shape (5,), one value
    """
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"{name} from {source} must be a numeric array of shape ({n},); got {type(value).__name__} "
            f"{_short(value)}. Make predict return one number per input row (a NumPy array)."
        ) from err
    if arr.ndim == 2 and arr.shape == (n, 1):
        arr = arr[:, 0]
    if arr.shape != (n,):
        raise ValueError(
            f"{name} from {source} must have shape ({n},), one value per input row; got shape "
            f"{arr.shape}. Make predict(X) return a 1-D array with len(X) entries (for a model "
            "with several outputs, select the one to calibrate)."
        )
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(
            f"{name} from {source} must be finite; got {int(bad.sum())} non-finite value(s) of {n}, "
            f"the first at row {int(np.argmax(bad))}. Fix the model, or drop the rows it cannot predict."
        )
    return arr


def check_tau(tau: Any, n: int, name: str = "tau") -> np.ndarray:
    """A tie-breaking variable: one value in [0, 1], or ``n`` of them (one per test point).

    Outside [0, 1] a smoothed conformal CDF leaves [0, 1] (``tau = 1.2`` gave 1.0095), so it is
    refused, not clipped.

    Examples
    --------
    >>> from calibprob._core.validation import check_tau
    >>> check_tau(0.5, 3).tolist()
    0.5
    """
    arr = check_array(tau, name, ndim=(0, 1), min_length=0)
    if arr.ndim == 1 and arr.shape != (n,):
        raise ValueError(
            f"{name} must be one number or one per test point, shape ({n},); got shape {arr.shape}. "
            f"Pass a scalar in [0, 1] or rng.uniform(size={n})."
        )
    if arr.size and (arr.min() < 0 or arr.max() > 1):
        raise ValueError(
            f"{name} must lie in [0, 1] (a tie-breaking probability); got range [{arr.min():.6g}, "
            f"{arr.max():.6g}]. Pass 0.5, or U(0, 1) draws for exactly uniform values."
        )
    return arr


def describe_unreadable_path(path: Any, what: str = "file") -> str | None:
    """Why ``path`` is not a readable regular file, in words that say what to do; ``None`` if it is one.

    Four cases that ``os.path.isfile`` lumps together as "does not exist": a directory, a
    symbolic link whose target is missing, a loop of symbolic links, and a path that is
    truly absent.

    Examples
    --------
    >>> import tempfile
    >>> from calibprob._core.validation import describe_unreadable_path
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     print(describe_unreadable_path(tmp)[-61:])
    a directory, not a file. Give the path of the file inside it.
    """
    text = os.fspath(path)
    if os.path.isfile(text):
        return None
    if os.path.isdir(text):
        return f"{text!r} is a directory, not a {what}. Give the path of the {what} inside it."
    if os.path.islink(text):
        try:
            os.stat(text)
        except OSError as err:
            if err.errno == errno.ELOOP:
                return (
                    f"{text!r} is a symbolic link that loops (it resolves back to itself). "
                    f"Point the link at the {what} (ln -sf TARGET {text}) or give the {what}'s real path."
                )
        return (
            f"{text!r} is a broken symbolic link: its target {os.readlink(text)!r} does not exist. "
            f"Restore the target or point the link at the {what} (ln -sf TARGET {text})."
        )
    if os.path.exists(text):
        return f"{text!r} is not a regular {what} (a device, socket or pipe). Give a {what} on disk."
    return f"{text!r} does not exist (absolute: {os.path.abspath(text)!r}). Check the path."
