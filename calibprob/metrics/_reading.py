"""Reading a predictive Dataset for the metrics: checks, quantiles, densities, moments and CRPS by row block.

Shared by the xarray layer and :func:`~calibprob.metrics.evaluate`; every function works on the
rows ``sl`` of one block so that memory stays O(chunk x L).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob import transforms
from calibprob._core.validation import check_choice, check_finite, check_targets
from calibprob.metrics._levels import _CHUNK
from calibprob.metrics._scores import crps_quantile
from calibprob.predictive._families import Family, QuantileFamily, TransformedFamily
from calibprob.predictive._reach import beyond_reach


def _check_pred(pred: object) -> xr.Dataset:
    if not isinstance(pred, xr.Dataset):
        raise TypeError(
            f"pred must be a predictive xarray.Dataset; got {type(pred).__name__}. "
            "Build one with calibprob.normal / from_quantiles / from_draws / from_cdf_grid."
        )
    return pred


def _check_y(pred: xr.Dataset, y: ArrayLike, name: str = "y") -> np.ndarray:
    """Observed values as a finite 1-D float array with one entry per obs of ``pred``.

    NumPy, or a 1-D DataArray with any dim name aligned by position
    (``calibprob._core.validation.check_targets``, shared with the ``.calib`` accessor).
    """
    return check_targets(y, pred.sizes["obs"], name, obs=pred["obs"].values)


def _ppf_rows(fam: Family, p: np.ndarray, sl: slice, *, stated: bool = True) -> np.ndarray:
    """Quantiles of the rows ``sl`` at probabilities ``p`` (1-D), an (rows, P) ndarray.

    ``stated``: infinite beyond a row's reach (``calibprob.predictive._reach``; the interval and
    calibration metrics); else the finite law's (the scores: pinball, as the CRPS reads it).
    """
    return fam.ppf(p, sl) if stated else fam.law_ppf(p, sl)


def _ppf(pred: xr.Dataset, p: ArrayLike, *, stated: bool = True) -> np.ndarray:
    """Quantiles at probabilities ``p`` (1-D, inside (0, 1)) as an (n, P) ndarray (``stated``: see :func:`_ppf_rows`)."""
    p = np.asarray(p, float)
    fam = pred.calib.family
    n = pred.sizes["obs"]
    out = np.empty((n, p.size))
    # row chunks keep the temporaries (slopes, gathers) small and in cache
    for start in range(0, n, _CHUNK):
        out[start : start + _CHUNK] = _ppf_rows(fam, p, slice(start, start + _CHUNK), stated=stated)
    return out


def _logpdf(pred: xr.Dataset, y: np.ndarray) -> np.ndarray:
    """Log predictive density at ``y`` (n,), in row chunks."""
    fam = pred.calib.family
    out = np.empty(y.size)
    for start in range(0, y.size, _CHUNK):
        sl = slice(start, start + _CHUNK)
        out[sl] = fam.logpdf(y[sl], sl)
    return out


def _moments_rows(pred: xr.Dataset, fam: Family, sl: slice) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std of the rows ``sl``: stored when present, else exact from the family."""
    if "mean" in pred and "std" in pred:
        return np.asarray(pred["mean"].values[sl], float), np.asarray(pred["std"].values[sl], float)
    mean, std = fam.moments(sl)
    if "mean" in pred:
        mean = np.asarray(pred["mean"].values[sl], float)
    if "std" in pred:
        std = np.asarray(pred["std"].values[sl], float)
    return mean, std


def _moments(pred: xr.Dataset, chunk_size: int = _CHUNK) -> tuple[np.ndarray, np.ndarray]:
    """Predictive mean and std: stored when present, else exact from the family.

    Both come from one pass of the family's moments (for a quantile Dataset
    :func:`~calibprob.predictive.quantile_moments`), in row chunks (cache-friendly,
    O(chunk_size x L) memory), instead of two full-size passes through
    ``pred.calib.mean()`` and ``pred.calib.std()``.
    """
    if "mean" in pred and "std" in pred:
        return np.asarray(pred["mean"].values, float), np.asarray(pred["std"].values, float)
    fam = pred.calib.family
    n = pred.sizes["obs"]
    mean, std = np.empty(n), np.empty(n)
    for start in range(0, n, chunk_size):
        sl = slice(start, start + chunk_size)
        mean[sl], std[sl] = _moments_rows(pred, fam, sl)
    return mean, std


def _point(pred: xr.Dataset, point: str) -> np.ndarray:
    check_choice(point, "point", ("mean", "median"))
    if point == "mean":
        return _moments(pred)[0]
    return _ppf(pred, [0.5])[:, 0]


def _crps_rows(fam: QuantileFamily, y: np.ndarray, sl: slice, chunk: int) -> np.ndarray:
    """Exact CRPS of the rows ``sl`` (quantile family; a back-transformed law by its own closed form)."""
    (q,) = fam.arrays(sl)
    if not isinstance(fam, TransformedFamily):
        return crps_quantile(y, q, fam.levels, chunk_size=chunk)
    t = fam.transform
    out = np.empty(y.size)
    for start in range(0, y.size, chunk):  # g(q) is a block-sized temporary
        b = slice(start, start + chunk)
        out[b] = transforms.crps(y[b], transforms.forward(t, q[b]), fam.levels, t, chunk_size=chunk)
    return out


def _ueb_bounds(pred: xr.Dataset) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """The widest interval the prediction states, ``[Q(p_min), Q(p_max)]``, and its levels as attrs."""
    q, lv = pred.calib.quantiles, pred.calib.levels
    reach = pred.calib.family.reach
    if reach is not None:  # a row whose calibration does not reach an extreme level states it as infinite
        q = beyond_reach(q[:, [0, -1]], lv[[0, -1]], reach)
    return q[:, 0], q[:, -1], {"lower_level": lv[0], "upper_level": lv[-1]}


def _central_bounds(pred: xr.Dataset, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ends ``Q((1 - c)/2)``, ``Q((1 + c)/2)`` of the central intervals at confidence levels ``c``, (n, C) each."""
    q = _ppf(pred, np.concatenate([(1 - c) / 2, (1 + c) / 2]))
    return q[:, : c.size], q[:, c.size :]


def _scalar(value: float, name: str, attrs: dict) -> xr.DataArray:
    return xr.DataArray(float(value), name=name, attrs=attrs)


def _check_unit_grid(levels: ArrayLike, name: str) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(levels, dtype=float))
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence; got shape {arr.shape}.")
    check_finite(arr, name)
    bad = (arr < 0) | (arr > 1)
    if bad.any():
        raise ValueError(f"{name} must lie in [0, 1]; got {float(arr[bad][0])!r}. Pass probabilities.")
    if arr.size > 1 and np.any(np.diff(arr) <= 0):
        raise ValueError(f"{name} must be strictly increasing; sort them and drop duplicates.")
    return arr
