r"""Diagnostics over time: what :func:`calibprob.evaluate` adds for a prediction with a ``time`` coordinate.

A forecast stream's calibration is a statement about a *sequence*: the long-run miss rate of
adaptive conformal inference (Gibbs & Candès 2021, Proposition 4.1), of conformal PID control
(Angelopoulos, Candès & Tibshirani 2023, Proposition 1) and of online recalibration (Deshpande et
al. 2024, Theorem 2) is bounded for *any* sequence, but a method can meet that bound while missing
in long bursts, issuing infinite sets, or drifting in and out of calibration. The reporting
conventions of the conformal-PID paper (coverage over time, the longest run of misses, quantiles of
the set size, the count of infinite sets) make those visible; this module computes them.

Array layer (observations on axis 0, in time order):

- :func:`rolling_mean` — trailing means over full windows of ``window`` rows (NaN before the first);
- :func:`longest_run` — the longest run of ``True`` per column (the longest run of misses);
- :func:`calibprob.plots.binomial_band` — the central ``band`` of :math:`\mathrm{Bin}(w, c)/w`, the range
  a rolling coverage of a calibrated forecaster with independent hits stays in with that probability at each time;
- :func:`long_run_error` — :math:`\frac1t\sum_{s\le t}\mathrm{err}_s - \alpha` at every :math:`t`.

Dataset layer: :func:`time_diagnostics` (called by :func:`calibprob.evaluate` and
:func:`calibprob.metrics.evaluate_intervals` when the prediction carries a ``time`` coordinate along
``obs``, checked strictly increasing by ``calibprob.calibrators.online._time.check_stream_times``).

References
----------
Gibbs, I. and Candès, E. (2021). Adaptive conformal inference under distribution shift. NeurIPS 34.
Angelopoulos, A. N., Candès, E. J. and Tibshirani, R. J. (2023). Conformal PID control for time
series prediction. NeurIPS 36, §4 (the tables' coverage, longest error run and set-size quantiles).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.validation import check_int
from calibprob.calibrators.online._time import TIME_COORD, check_stream_times
from calibprob.plots import binomial_band

__all__ = [
    "DEFAULT_TIME_WINDOW",
    "TIME_VARIABLES",
    "WIDTH_QUANTILES",
    "long_run_error",
    "longest_run",
    "rolling_mean",
    "add_time_diagnostics",
    "check_time_window",
    "stream_times",
    "time_diagnostics",
]

#: Default rolling window (rows): a 90 % rolling coverage over 100 rows has a binomial standard error of 0.03.
DEFAULT_TIME_WINDOW = 100

#: The variables :func:`time_diagnostics` adds (and nothing else does).
TIME_VARIABLES = (
    "rolling_coverage",
    "rolling_coverage_band_lower",
    "rolling_coverage_band_upper",
    "long_run_coverage_error",
    "long_run_coverage_error_bound",
    "longest_miss_run",
    "width_quantiles",
    "n_infinite",
    "n_clipped",
    "rolling_crps",
    "rolling_nll",
)

#: Probabilities at which the interval widths' distribution over time is reported.
WIDTH_QUANTILES = np.array([0.05, 0.25, 0.5, 0.75, 0.95])

_REF_PID = "Angelopoulos, Candès & Tibshirani (2023), Conformal PID control for time series prediction, §4"
_REF_ACI = "Gibbs & Candès (2021), Adaptive conformal inference under distribution shift, Proposition 4.1"

_ATTRS = {
    "rolling_coverage": {
        "long_name": "rolling coverage of central intervals",
        "definition": "mean_{s in (t-w, t]} 1[lower_s <= y_s <= upper_s], full windows of w rows only (NaN before)",
        "paper": _REF_PID,
    },
    "rolling_coverage_band_lower": {
        "long_name": "lower end of the binomial band of the rolling coverage",
        "definition": "the (1-band)/2 quantile of Bin(w, c)/w: where a calibrated forecaster's rolling coverage "
        "stays with probability >= band at each time (independent hits)",
        "paper": "binomial sampling distribution of a window's coverage",
    },
    "rolling_coverage_band_upper": {
        "long_name": "upper end of the binomial band of the rolling coverage",
        "definition": "the (1+band)/2 quantile of Bin(w, c)/w",
        "paper": "binomial sampling distribution of a window's coverage",
    },
    "long_run_coverage_error": {
        "long_name": "long-run coverage error (miss rate so far minus its target)",
        "definition": "(1/t) sum_{s<=t} 1[y_s not in C_s] - (1 - c)",
        "paper": _REF_ACI,
    },
    "long_run_coverage_error_bound": {
        "long_name": "the producing method's bound on |long-run coverage error| at the last time",
        "definition": "read from the prediction: variable 'coverage_error_bound' over confidence_level, or a "
        "scalar attribute of that name; NaN where the method reports none",
        "paper": _REF_ACI + "; Deshpande, Marx & Kuleshov (2024), Theorem 2",
    },
    "longest_miss_run": {
        "long_name": "longest run of consecutive misses",
        "definition": "max length of a run of consecutive t with y_t outside the central interval",
        "paper": _REF_PID,
    },
    "width_quantiles": {
        "long_name": "quantiles over time of the central intervals' width",
        "definition": "np.quantile(upper_t - lower_t, q, method='inverted_cdf') (an observed width, "
        "so an infinite width stays infinite)",
        "paper": _REF_PID,
    },
    "n_infinite": {
        "long_name": "number of infinite intervals",
        "definition": "count_t 1[upper_t - lower_t = inf]",
        "paper": _REF_PID,
    },
    "n_clipped": {
        "long_name": "number of intervals the method clipped to keep them finite",
        "definition": "count_t clipped_t, read from the prediction's variable 'clipped' (obs[, confidence_level]); "
        "NaN where the method reports none",
        "paper": _REF_ACI,
    },
    "rolling_crps": {
        "long_name": "rolling continuous ranked probability score",
        "definition": "mean_{s in (t-w, t]} CRPS(F_s, y_s), full windows only",
        "paper": "Gneiting & Raftery (2007), Strictly proper scoring rules, prediction, and estimation",
    },
    "rolling_nll": {
        "long_name": "rolling negative log predictive density",
        "definition": "-mean_{s in (t-w, t]} log f_s(y_s), full windows only",
        "paper": "Gneiting & Raftery (2007), Strictly proper scoring rules, prediction, and estimation",
    },
}


def rolling_mean(x: ArrayLike, window: int) -> np.ndarray:
    r"""Trailing means over full windows: :math:`\bar x_t = \frac1w \sum_{s=t-w+1}^t x_s` (NaN for :math:`t < w`).

    Parameters
    ----------
    x : array_like, shape (T, ...)
        Values in time order (booleans count as 0/1).
    window : int
        :math:`w \ge 1`, at most :math:`T`.

    Returns
    -------
    ndarray, shape (T, ...)
        Each window's own mean (no running sums, so one infinite value spoils only its windows).

    Examples
    --------
    >>> rolling_mean([1.0, 2.0, 3.0, 4.0], 2).tolist()
    [nan, 1.5, 2.5, 3.5]
    """
    x = np.asarray(x, float)
    out = np.full(x.shape, np.nan)
    if window > x.shape[0]:
        return out
    windows = np.lib.stride_tricks.sliding_window_view(x, window, axis=0)
    out[window - 1 :] = windows.mean(axis=-1)
    return out


def longest_run(flags: ArrayLike) -> np.ndarray:
    """The longest run of consecutive ``True`` along axis 0, per column.

    Examples
    --------
    >>> longest_run([[True, False], [True, True], [False, True], [True, True]]).tolist()
    [2, 3]
    """
    f = np.asarray(flags, bool)
    cols = f.reshape(f.shape[0], -1)
    best = np.zeros(cols.shape[1], np.int64)
    run = np.zeros(cols.shape[1], np.int64)
    for row in cols:  # one pass, O(T x columns): the run restarts at every False
        run = np.where(row, run + 1, 0)
        best = np.maximum(best, run)
    return best.reshape(f.shape[1:])


def long_run_error(missed: ArrayLike, alpha: ArrayLike) -> np.ndarray:
    r"""The running miss rate minus its target, :math:`\frac1t\sum_{s\le t}\mathrm{err}_s - \alpha`, shape (T, L).

    Examples
    --------
    >>> long_run_error([[True], [False], [False], [False]], [0.25]).ravel().round(4).tolist()
    [0.75, 0.25, 0.0833, 0.0]
    """
    m = np.asarray(missed, float)
    t = np.arange(1, m.shape[0] + 1).reshape((-1,) + (1,) * (m.ndim - 1))
    return np.cumsum(m, axis=0) / t - np.asarray(alpha, float)


def stream_times(pred: xr.Dataset) -> np.ndarray | None:
    """The prediction's ``time`` coordinate along ``obs``, checked strictly increasing; ``None`` without one."""
    return check_stream_times(pred, None, "pred")


def check_time_window(window: int | None, n: int) -> int:
    """The rolling window: an integer in [1, n] (default ``min(DEFAULT_TIME_WINDOW, n)``)."""
    if window is None:
        return max(1, min(DEFAULT_TIME_WINDOW, n))
    w = check_int(window, "time_window", minimum=1)
    if w > n:
        raise ValueError(
            f"time_window={w} is larger than the history: the prediction holds {n} time point(s), so no full "
            f"window exists. Pass time_window <= {n}."
        )
    return w


def _reported(pred: xr.Dataset, name: str, levels: np.ndarray, per_obs: bool) -> np.ndarray | None:
    """A per-level quantity the producing method wrote into ``pred`` (a variable or a scalar attribute)."""
    if name in pred.data_vars:
        v = pred[name]
        if per_obs and "obs" in v.dims:
            v = v.sum("obs")
        if "confidence_level" in v.dims:
            have = np.round(np.asarray(v["confidence_level"].values, float), 12)
            vals = np.asarray(v.values, float)
            out = np.full(levels.size, np.nan)
            for j, c in enumerate(np.round(levels, 12)):
                hit = np.flatnonzero(np.isclose(have, c, rtol=0, atol=1e-9))
                if hit.size:
                    out[j] = vals[hit[0]]
            return out
        return np.full(levels.size, float(np.asarray(v.values, float).sum()))
    if not per_obs and name in pred.attrs:
        return np.broadcast_to(np.asarray(pred.attrs[name], float), levels.shape).astype(float)
    return None


def add_time_diagnostics(
    out: xr.Dataset,
    pred: xr.Dataset,
    times: np.ndarray | None,
    window: int | None,
    covered: np.ndarray | None,
    widths: np.ndarray | None,
    levels: np.ndarray,
    **scores: Any,
) -> xr.Dataset:
    """``out`` with :func:`time_diagnostics` added when ``times`` is not ``None``; else ``out`` itself.

    ``window`` without times is refused: a rolling window needs a time order to roll along.
    """
    if times is None:
        if window is not None:
            raise ValueError(
                f"time_window={window!r} was given but the prediction has no '{TIME_COORD}' coordinate along obs, "
                f"so there is no time order to roll along. Attach one with pred.assign_coords({TIME_COORD}=('obs', t)) "
                "or drop time_window."
            )
        return out
    assert covered is not None and widths is not None  # a scored prediction with times has both
    diag = time_diagnostics(pred, times, covered, widths, levels, window=window, **scores)
    res = out.assign(diag.data_vars).assign_coords(diag.coords)
    res.attrs["time_window"] = int(diag["rolling_coverage"].attrs["time_window"])
    return res


def time_diagnostics(
    pred: xr.Dataset,
    times: np.ndarray,
    covered: np.ndarray,
    widths: np.ndarray,
    levels: np.ndarray,
    *,
    window: int | None = None,
    crps: np.ndarray | None = None,
    logpdf: np.ndarray | None = None,
    band: float = 0.95,
) -> xr.Dataset:
    """The diagnostics over time as a Dataset over ``time``, ``confidence_level`` and ``width_quantile``.

    Parameters
    ----------
    pred : xarray.Dataset
        The prediction (read for a reported ``coverage_error_bound`` and per-row ``clipped``).
    times : ndarray, shape (T,)
        Its checked times (:func:`stream_times`).
    covered : ndarray of bool, shape (T, L)
        Whether each outcome lies in its central interval at each confidence level.
    widths : ndarray, shape (T, L)
        The intervals' widths.
    levels : ndarray, shape (L,)
        The confidence levels :math:`c`.
    window : int, optional
        The rolling window :math:`w` in rows (default ``min(100, T)``).
    crps, logpdf : ndarray, shape (T,), optional
        Per-row scores (a quantile function's; absent for intervals-only methods).
    band : float, default 0.95
        Probability of the binomial band around the nominal level.

    Returns
    -------
    xarray.Dataset
        ``rolling_coverage(time, confidence_level)``, ``rolling_coverage_band_lower`` and
        ``_upper(confidence_level)``, ``long_run_coverage_error(time, confidence_level)``,
        ``long_run_coverage_error_bound``, ``longest_miss_run``, ``n_infinite``, ``n_clipped``
        (``confidence_level``), ``width_quantiles(confidence_level, width_quantile)``, and with
        scores ``rolling_crps(time)``, ``rolling_nll(time)``. Attribute ``time_window`` on each
        rolling variable.
    """
    n = covered.shape[0]
    w = check_time_window(window, n)
    missed = ~covered
    lo, hi = binomial_band(levels, w, band)  # exact binomial quantiles, as the coverage-by-group figure
    bound = _reported(pred, "coverage_error_bound", levels, per_obs=False)
    clipped = _reported(pred, "clipped", levels, per_obs=True)
    roll = {"time_window": w}
    with np.errstate(invalid="ignore"):
        wq = np.quantile(widths, WIDTH_QUANTILES, axis=0, method="inverted_cdf").T
    data = {
        "rolling_coverage": (("time", "confidence_level"), rolling_mean(covered, w), _ATTRS["rolling_coverage"] | roll),
        "rolling_coverage_band_lower": (
            "confidence_level",
            lo,
            _ATTRS["rolling_coverage_band_lower"] | roll | {"band": band},
        ),
        "rolling_coverage_band_upper": (
            "confidence_level",
            hi,
            _ATTRS["rolling_coverage_band_upper"] | roll | {"band": band},
        ),
        "long_run_coverage_error": (
            ("time", "confidence_level"),
            long_run_error(missed, 1.0 - levels),
            dict(_ATTRS["long_run_coverage_error"]),
        ),
        "long_run_coverage_error_bound": (
            "confidence_level",
            np.full(levels.size, np.nan) if bound is None else bound,
            dict(_ATTRS["long_run_coverage_error_bound"]),
        ),
        "longest_miss_run": ("confidence_level", longest_run(missed), dict(_ATTRS["longest_miss_run"])),
        "width_quantiles": (("confidence_level", "width_quantile"), wq, dict(_ATTRS["width_quantiles"])),
        "n_infinite": ("confidence_level", np.count_nonzero(~np.isfinite(widths), axis=0), dict(_ATTRS["n_infinite"])),
        "n_clipped": (
            "confidence_level",
            np.full(levels.size, np.nan) if clipped is None else clipped,
            dict(_ATTRS["n_clipped"]),
        ),
    }
    if crps is not None:
        data["rolling_crps"] = ("time", rolling_mean(crps, w), _ATTRS["rolling_crps"] | roll)
    if logpdf is not None:
        with np.errstate(invalid="ignore"):
            data["rolling_nll"] = ("time", -rolling_mean(logpdf, w), _ATTRS["rolling_nll"] | roll)
    coords = {
        "time": ("time", times, {"description": f"the prediction's '{TIME_COORD}' coordinate along obs"}),
        "width_quantile": ("width_quantile", WIDTH_QUANTILES, {"description": "probability of the width quantile"}),
    }
    return xr.Dataset(data, coords=coords)
