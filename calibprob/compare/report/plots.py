"""The report's PNG plots: reliability diagrams, coverage curves, sharpness against calibration, coverage by group."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from calibprob.compare.report.results import _flat
from calibprob.plots import coverage_by_group, draw_coverage, draw_reliability
from calibprob.runs import inside, safe_name

if TYPE_CHECKING:  # matplotlib is imported where a figure is drawn
    from matplotlib.figure import Figure


def write_plots(results: xr.Dataset, outdir: str | Path) -> list[Path]:
    """Reliability diagrams, coverage curves and a sharpness-vs-calibration scatter as PNG files.

    The curves are the per-repetition ones stored in the results file
    (``observed_fraction`` over the ECE levels, ``iae_coverage`` over the IAE
    levels), averaged over repetitions with ±2 s.e. bands.

    Parameters
    ----------
    results : xarray.Dataset
        The metrics of a results file (:func:`load_results`).
    outdir : str or Path
        Folder for the PNG files (created if missing).

    Returns
    -------
    list of Path
        One file per data set and plot kind.

    References
    ----------
    The comparison-spec reference: :doc:`/spec`.

    Kuleshov, V., Fenner, N. and Ermon, S. (2018). Accurate uncertainties for deep
    learning using calibrated regression. ICML (reliability diagram).

    Examples
    --------
    :doc:`/examples/comparison` runs one small comparison, once, and shows what
    ``write_plots`` returns.

    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outdir = Path(outdir)
    if outdir.exists() and not outdir.is_dir():
        raise ValueError(f"outdir {str(outdir)!r} exists and is not a folder; give a folder for the PNG files.")
    _check_plot_stems(results["dataset"].values)
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    results = _flat(results)
    cals = [str(c) for c in results["calibrator"].values]
    for d in results["dataset"].values:
        r = results.sel(dataset=d)
        figures = (
            ("reliability", "observed_fraction" in r, _plot_reliability),
            ("coverage", "iae_coverage" in r, _plot_coverage),
            ("sharpness_calibration", "ece" in r and "std" in r, _plot_sharpness),
            ("coverage_by_group", "group_coverage" in r and "group_count" in r, _plot_group_coverage),
        )
        for kind, stored, plot in figures:
            if not stored:
                continue
            fig = plot(r, cals, d)
            path = inside(outdir, f"{safe_name(d)}_{kind}.png")
            fig.savefig(path, dpi=110, bbox_inches="tight")
            plt.close(fig)
            written.append(path)
    return written


def _plot_group_coverage(r: xr.Dataset, cals: list[str], d: str) -> Figure:
    """Coverage of each group against its binomial band, every level (:func:`calibprob.plots.coverage_by_group`)."""
    return coverage_by_group(r, title=f"Coverage by group — {d}")


def _check_plot_stems(datasets: Iterable[str]) -> None:
    """Data-set names become file names: sanitised ("../x" -> "___x") and kept inside the folder;
    two names equal once sanitised would overwrite each other's plots."""
    stems: dict[str, str] = {}
    for d in datasets:
        stem = safe_name(d)
        if stem in stems:
            raise ValueError(
                f"data-set names {stems[stem]!r} and {str(d)!r} give the same plot file name {stem!r}; "
                "rename one in the spec."
            )
        stems[stem] = str(d)


def _curve_dim(da: xr.DataArray) -> Hashable:
    """The level dimension of a stored curve (the one that is not dataset/calibrator/repetition)."""
    return next(x for x in da.dims if x not in ("dataset", "calibrator", "repetition"))


def _plot_reliability(r: xr.Dataset, cals: list[str], d: str) -> Figure:
    """Reliability diagram of one data set: mean observed fraction over repetitions, ±2 se bands."""
    import matplotlib.pyplot as plt

    nrep = r.sizes.get("repetition", 1)
    of = r["observed_fraction"]
    curves, bands = {}, {}
    for c in cals:
        x = of.sel(calibrator=c)
        m = x.mean("repetition").values
        curves[c] = m
        if nrep > 1:
            se = (x.std("repetition", ddof=1) / np.sqrt(nrep)).values
            bands[c] = (m - 2 * se, m + 2 * se)
    fig, ax = plt.subplots(figsize=(5, 5))
    draw_reliability(ax, of[_curve_dim(of)].values, curves, bands, title=f"Reliability diagram — {d}")
    return fig


def _plot_coverage(r: xr.Dataset, cals: list[str], d: str) -> Figure:
    """Coverage of central intervals against nominal, mean over repetitions."""
    import matplotlib.pyplot as plt

    cov = r["iae_coverage"]
    fig, ax = plt.subplots(figsize=(5, 5))
    draw_coverage(
        ax,
        cov[_curve_dim(cov)].values,
        {c: cov.sel(calibrator=c).mean("repetition").values for c in cals},
        title=f"Coverage of central intervals — {d}",
    )
    return fig


def _plot_sharpness(r: xr.Dataset, cals: list[str], d: str) -> Figure:
    """Mean predictive STD against ECE, one point per repetition and the mean as a diamond."""
    import matplotlib.pyplot as plt

    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    for i, c in enumerate(cals):
        x, y = r["ece"].sel(calibrator=c), r["std"].sel(calibrator=c)
        if bool(np.isnan(x).all()):
            continue  # interval-only method: no ECE / STD (the colour slot is kept)
        col = colors[i % len(colors)]
        ax.scatter(x, y, s=12, alpha=0.35, color=col)
        ax.scatter(x.mean(), y.mean(), s=90, marker="D", edgecolor="k", color=col, label=c)
    ax.set(
        xlabel="ECE (lower = better calibrated)",
        ylabel="mean predictive STD (lower = sharper)",
        title=f"Sharpness vs calibration — {d}",
    )
    ax.legend(fontsize=8)
    return fig
