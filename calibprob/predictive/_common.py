"""What every part of the contract shares: the default levels, the repair warning, the Dataset builder and row blocks."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.validation import check_finite, check_levels

#: The default quantile levels: 0.01, 0.02, ..., 0.99.
DEFAULT_LEVELS = np.round(np.linspace(0.01, 0.99, 99), 10)

_CHUNK = 4096  # rows per block where temporaries are (rows x L)


class CalibprobWarning(UserWarning):
    """A warning raised when calibprob repairs its input (e.g. crossing quantiles).

    Examples
    --------
    >>> import warnings, numpy as np, calibprob
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     pred = calibprob.from_quantiles(np.array([[1.0, 0.0, 2.0]]), [0.2, 0.5, 0.8])
    >>> caught[0].category is calibprob.CalibprobWarning
    True
    >>> pred["quantile"].values.tolist()   # repaired by sorting
    [[0.0, 1.0, 2.0]]
    """


def _obs_coord(n: int, obs: ArrayLike | None) -> np.ndarray:
    if obs is None:
        return np.arange(n)
    obs = np.asarray(obs)
    if obs.shape != (n,):
        raise ValueError(f"obs must have one label per observation ({n}); got shape {obs.shape}.")
    return obs


def _levels_or_default(levels: ArrayLike | None) -> np.ndarray:
    levels = DEFAULT_LEVELS if levels is None else check_levels(levels)
    if levels.size < 2:
        raise ValueError(
            f"levels must hold at least 2 levels to define a quantile function; got {levels.size}. "
            "Use e.g. calibprob.predictive.DEFAULT_LEVELS."
        )
    return levels


def _dataset(
    quantile: np.ndarray,
    levels: ArrayLike,
    obs: ArrayLike | None,
    method: str,
    family: str,
    extra: dict[str, Any] | None = None,
) -> xr.Dataset:
    data: dict[str, tuple] = {"quantile": (("obs", "level"), quantile)}
    for name, values in (extra or {}).items():
        if values is not None:
            data[name] = ("obs", np.asarray(values, float))
    ds = xr.Dataset(data, coords={"obs": obs, "level": levels})
    ds.attrs.update({"method": method, "family": family, "tail": "normal"})
    ds["level"].attrs["description"] = "quantile level (probability) in (0, 1)"
    return ds


def _row_blocks(n: int, chunk: int = _CHUNK) -> Iterator[slice]:
    """Consecutive row slices of at most ``chunk`` rows (checks on (n, L) arrays in O(chunk x L) memory)."""
    for start in range(0, n, chunk):
        yield slice(start, min(start + chunk, n))


def _check_finite_rows(q: np.ndarray, name: str) -> None:
    """:func:`check_finite` in row blocks; on failure the full check builds the usual message."""
    for sl in _row_blocks(q.shape[0]):
        if not np.isfinite(q[sl]).all():
            check_finite(q, name)  # error path only: the whole-array message (first bad index, count)


def _repair_crossing(q: np.ndarray, name: str = "quantiles") -> np.ndarray:
    # the crossing check runs in row blocks: np.diff of all rows at once would be a
    # second (n, L) array, as large as the quantiles themselves
    crossed = np.zeros(q.shape[0], dtype=bool)
    for sl in _row_blocks(q.shape[0]):
        crossed[sl] = np.any(np.diff(q[sl], axis=-1) < 0, axis=-1)
    if crossed.any():
        warnings.warn(
            f"{name} crossed (decreased with the level) in {int(crossed.sum())} of "
            f"{crossed.size} observations; repaired by sorting each row (monotone "
            "rearrangement, Chernozhukov et al. 2010, which never increases the pinball loss).",
            CalibprobWarning,
            stacklevel=3,
        )
        q = np.sort(q, axis=-1)
    return q


def check_interval_ends(lower: np.ndarray, upper: np.ndarray) -> None:
    """Interval ends of the interval family: no NaN (infinite ends are allowed), ``lower <= upper``."""
    for name, arr in (("lower", lower), ("upper", upper)):
        if np.isnan(arr).any():
            raise ValueError(
                f"'{name}' holds {int(np.isnan(arr).sum())} NaN values; an interval end must be a number "
                "(-inf / inf for an unbounded side). Check the method that produced the intervals."
            )
    crossed = lower > upper
    if crossed.any():
        i, j = (int(k) for k in np.argwhere(crossed)[0])
        raise ValueError(
            f"'lower' exceeds 'upper' in {int(crossed.sum())} intervals (first: obs {i}, column {j}: "
            f"{lower[i, j]:.6g} > {upper[i, j]:.6g}); an interval must have lower <= upper."
        )
