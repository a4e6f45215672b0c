"""The HTML report's "Coverage over time" section: rolling coverage along a time split's horizon.

Results of a ``[split] kind = "time"`` spec hold ``rolling_coverage(time, confidence_level)`` per
pipeline (:func:`calibprob.evaluate` on the horizon in time order); one figure per data set and
level draws each pipeline's rolling coverage, averaged over repetitions, against the nominal level
with the central 95 % of :math:`\\mathrm{Bin}(w, c)/w` shaded (:func:`calibprob.plots.binomial_band`).
The x-axis is the rows' own time where the data carry one (a data set's ``time`` column, stored as
``time_stamp``: dates on the axis), else the step along the horizon.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from calibprob.compare.report.figures import _esc, _png

if TYPE_CHECKING:  # matplotlib is imported where a figure is drawn
    from matplotlib.figure import Figure

__all__ = ["TIME_SECTION", "time_coverage_html"]

#: The HTML section shown after "Coverage and width" when the results come from a time split.
TIME_SECTION = "Coverage over time"


def _horizon_axis(x: xr.Dataset) -> tuple[np.ndarray, bool]:
    """The x values: the rows' own times when the data carry them (a spec's ``time`` column), else the steps.

    ``time_stamp(time)`` holds each horizon step's time (the same in every repetition of a time split;
    the first repetition's is read), dates or numbers; missing anywhere, the step index is used.
    """
    steps = x["time"].values
    if "time_stamp" not in x:
        return steps, False
    stamps = x["time_stamp"]
    for dim in [d for d in stamps.dims if d != "time"]:
        stamps = stamps.isel({dim: 0})
    values = np.asarray(stamps.values)
    if values.shape != steps.shape or bool(
        np.any(np.isnat(values) if values.dtype.kind == "M" else ~np.isfinite(values))
    ):
        return steps, False
    return values, True


def _figure(b: xr.Dataset, d: str, c: float, colors: dict) -> Figure:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6))
    x = b.sel(confidence_level=c)
    roll = x["rolling_coverage"].mean("repetition", skipna=True) if "repetition" in x.dims else x["rolling_coverage"]
    t, dated = _horizon_axis(x)
    for p in x["pipeline"].values:
        y = roll.sel(pipeline=p).values
        if np.isfinite(y).any():
            ax.plot(t, y, lw=1.1, color=colors.get(str(p)), label=str(p))
    lo = np.nanmin(x["rolling_coverage_band_lower"].values)
    hi = np.nanmax(x["rolling_coverage_band_upper"].values)
    ax.axhspan(lo, hi, color="0.85", lw=0, zorder=0)
    ax.axhline(float(c), color="k", ls="--", lw=0.8)
    # the window: stored on the variable, else (attributes dropped on assembly) the first full window's end
    by_time = roll.transpose("time", ...).values
    finite = np.flatnonzero(np.isfinite(by_time).any(axis=tuple(range(1, by_time.ndim))))
    w = int(x["rolling_coverage"].attrs.get("time_window", finite[0] + 1 if finite.size else 0))
    ax.set_xlabel("time" if dated else "step along the horizon")
    if dated and np.issubdtype(np.asarray(t).dtype, np.datetime64):
        fig.autofmt_xdate()
    ax.set_ylabel(f"rolling coverage ({w} steps)")
    ax.set_title(f"{d}: rolling coverage at {float(c):g}")
    ax.legend(fontsize="small", ncol=2)
    return fig


def time_coverage_html(st: xr.Dataset, datasets: Sequence[str], colors: dict) -> str:
    """The section's HTML ('' when the results hold no rolling coverage)."""
    if "rolling_coverage" not in st or "time" not in st.dims:
        return ""
    parts = []
    for d in datasets:
        b = st.sel(dataset=d)
        if not bool(b["rolling_coverage"].notnull().any()):
            continue
        parts.append(f"<h3>{_esc(d)}</h3>")
        parts += [_png(_figure(b, d, float(c), colors)) for c in b["confidence_level"].values]
    if not parts:
        return ""
    return (
        '<p class="note">Coverage over the last w steps of the horizon (a time split), each pipeline averaged '
        "over repetitions; dashed: nominal; grey: where the rolling coverage of a calibrated forecaster with "
        "independent hits stays 95 % of the time at each step (exact binomial). A line long outside the band "
        "is miscalibration over time, whatever the coverage over the whole horizon.</p>" + "\n".join(parts)
    )
