r"""A row's *reach*: the central levels its calibration states, :math:`-\infty`/:math:`+\infty` beyond.

A calibrator fitted on :math:`n` scores resolves a quantile at :math:`p` only for
:math:`1/(n+1) \le p \le n/(n+1)` (the :math:`n + 1` convention, ``calibprob._core.ranks``),
and a central interval only up to the confidence level :math:`R = 1 - s/(n+1)` (:math:`s = 2`
for a quantile function or a signed score, 1 for a symmetric score mirrored around the
centre). Mondrian calibration has one :math:`n_k` per group, so one quantile Dataset holds rows
with different reaches. The optional variable ``reach(obs)`` of a quantile (or normal) Dataset
carries :math:`R_i` per row:

* ``calib.ppf(p)`` is :math:`-\infty` for :math:`p < (1-R_i)/2` and :math:`+\infty` for
  :math:`p > (1+R_i)/2`; ``calib.interval(c)`` is :math:`(-\infty, \infty)` for :math:`c > R_i`
  — the ends the calibrator states (``Mondrian.predict_interval``), so every interval metric
  (coverage, width, IAE, ECE, pinball, the uniform error bound) counts them as infinite;
* the stored ``quantile`` values beyond the reach stay finite (the contract's quantile
  function needs numbers): the calibrator's own values where it defines every level, else
  the contract's Gaussian tail rule continuing the row's stated quantiles. ``cdf``,
  ``logpdf``, ``zscore``, the moments, ``sample`` and so the CRPS and NLL read that finite law
  (no finite-sample guarantee beyond the reach), never NaN.

A Dataset without ``reach`` states every level (the contract as before).
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

#: Name of the optional per-row reach variable of a quantile (or normal) Dataset.
REACH_VAR = "reach"


def read_reach(ds: xr.Dataset) -> np.ndarray | None:
    """The ``reach`` of every row as a float array, or None when ``ds`` has none."""
    if REACH_VAR not in ds.data_vars:
        return None
    return np.asarray(ds[REACH_VAR].values, float)


def reach_variable(reach: ArrayLike) -> xr.DataArray:
    """The ``reach(obs)`` DataArray, with its description."""
    return xr.DataArray(
        np.asarray(reach, float),
        dims=("obs",),
        attrs={
            "long_name": "reach: the largest central confidence level the row's calibration states",
            "description": (
                "calib.ppf(p) is -inf below (1 - reach)/2 and +inf above (1 + reach)/2, calib.interval(c) is "
                "(-inf, inf) for c > reach; the stored quantiles beyond it are finite placeholders (the group's own "
                "values or the Gaussian tail rule), read by cdf, logpdf, CRPS and NLL"
            ),
        },
    )


def beyond_reach(vals: np.ndarray, p: np.ndarray, reach: np.ndarray) -> np.ndarray:
    r"""``vals`` (rows,) or (rows, P) with :math:`\mp\infty` where ``p`` lies beyond each row's reach.

    The bounds are :math:`(1 - R_i)/2` and :math:`(1 + R_i)/2` computed as ``calib.interval``
    computes its probabilities :math:`(1 \mp c)/2`, so :math:`c \le R_i` keeps both ends
    (floating-point rounding is monotone).
    """
    p_arr = np.asarray(p, float)
    lo = ((1.0 - reach) / 2.0)[:, None]
    hi = ((1.0 + reach) / 2.0)[:, None]
    pp = np.atleast_1d(p_arr)[None, :]
    out = np.array(vals, dtype=float, copy=True).reshape(reach.size, -1)
    out[np.broadcast_to(pp < lo, out.shape)] = -np.inf
    out[np.broadcast_to(pp > hi, out.shape)] = np.inf
    return out[:, 0] if p_arr.ndim == 0 else out


def check_reach(ds: xr.Dataset) -> None:
    """``reach`` of a Dataset: dims ``(obs,)``, values in [0, 1]."""
    if REACH_VAR not in ds.data_vars:
        return
    da = ds[REACH_VAR]
    if da.dims != ("obs",):
        raise ValueError(
            f"'{REACH_VAR}' must have dims ('obs',); got {da.dims}. It holds one confidence level per row."
        )
    r = np.asarray(da.values, float)
    bad = ~((r >= 0.0) & (r <= 1.0))
    if bad.any():
        raise ValueError(
            f"'{REACH_VAR}' must lie in [0, 1] (the largest central confidence level a row states); got "
            f"{float(r[bad][0])!r} in {int(bad.sum())} row(s). Drop the variable to state every level."
        )
