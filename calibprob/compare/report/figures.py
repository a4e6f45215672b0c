"""The HTML report's figures, each an inline PNG: reliability diagrams, PIT histograms, coverage against width."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import xarray as xr

from calibprob.plots import draw_reliability

if TYPE_CHECKING:  # matplotlib is imported where a figure is drawn
    from matplotlib.figure import Figure


def _esc(x: object) -> str:
    return html.escape(str(x), quote=True)


def _png(fig: Figure) -> str:
    """A matplotlib figure as an ``<img>`` holding its PNG inline (base64), then closed."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight")
    plt.close(fig)
    # the first panel's title, else the figure's (a figure of sub-figures titles those, not its axes)
    alt = (fig.axes[0].get_title() if fig.axes else "") or fig.get_suptitle() or "figure"
    return f'<img alt="{_esc(alt)}" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode("ascii")}">'


def _colors(labels: Iterable[str]) -> dict:
    import matplotlib.pyplot as plt

    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return {p: cycle[i % len(cycle)] for i, p in enumerate(labels)}


def _pooled_n(st_d: xr.Dataset, pipe: str) -> float:
    """Test points pooled over the repetitions where ``pipe`` has a coverage or a curve."""
    if "n_test" not in st_d:
        return float("nan")
    var = "observed_fraction" if "observed_fraction" in st_d else "coverage"
    scored = st_d[var].sel(pipeline=pipe)
    scored = scored.notnull().any([d for d in scored.dims if d != "repetition"])
    return float(st_d["n_test"].where(scored).sum())


def _reliability_fig(st_d: xr.Dataset, pipes: Sequence[str], colors: dict, d: str) -> Figure:
    import matplotlib.pyplot as plt

    of = st_d["observed_fraction"]
    lv_dim = cast(str, next(x for x in of.dims if x not in ("pipeline", "repetition")))  # dims are names
    lv = of[lv_dim].values
    curves, bands = {}, {}
    for p in pipes:
        x = of.sel(pipeline=p)
        n = int(x.notnull().all(lv_dim).sum())
        m = x.mean("repetition").values
        curves[p] = m
        if n > 1:
            se = (x.std("repetition", ddof=1) / np.sqrt(n)).values
            bands[p] = (m - 2 * se, m + 2 * se)
    fig, ax = plt.subplots(figsize=(6.2, 5.6))
    draw_reliability(ax, lv, curves, bands, title=f"Reliability diagram — {d}")
    for line in ax.get_lines()[1:]:  # keep each pipeline's colour across figures
        if line.get_label() in colors:
            line.set_color(colors[line.get_label()])
    for coll, p in zip(ax.collections, [p for p in pipes if p in bands and not np.all(np.isnan(curves[p]))]):
        coll.set_color(colors[p])
    ax.legend(fontsize=8)
    return fig


def _pit_fig(st_d: xr.Dataset, pipes: Sequence[str], colors: dict, d: str) -> Figure:
    """PIT histograms from the stored reliability curves (no prediction needed).

    ``observed_fraction`` at level :math:`p_j` is the fraction of test points
    with PIT value :math:`F_i(y_i) \\le p_j`, so its increments are the PIT
    histogram's bin masses (averaged over repetitions). Under a calibrated
    forecast the pooled count in a bin of width :math:`w` is
    Binomial(:math:`N`, :math:`w`): the band is the density
    :math:`1 \\pm 2\\sqrt{w(1-w)/N}/w` (pointwise, about 95 %).
    """
    import matplotlib.pyplot as plt

    of = st_d["observed_fraction"]
    lv_dim = next(x for x in of.dims if x not in ("pipeline", "repetition"))
    edges = np.asarray(of[lv_dim].values, float)
    w = np.diff(edges)
    ncol = min(4, len(pipes))
    nrow = -(-len(pipes) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(2.9 * ncol, 2.3 * nrow), squeeze=False, sharex=True, sharey=True)
    top = 1.0
    for ax, p in zip(axes.flat, pipes):
        masses = of.sel(pipeline=p).diff(lv_dim).mean("repetition").values
        dens = masses / w
        N = _pooled_n(st_d, p)
        ax.bar(edges[:-1], dens, width=w, align="edge", color=colors[p], alpha=0.75, edgecolor="white", lw=0.5)
        ax.axhline(1.0, color="0.25", ls="--", lw=1)
        if np.isfinite(N) and N > 0:
            half = 2 * np.sqrt(w * (1 - w) / N) / w
            ax.fill_between(
                edges,
                np.r_[1 - half, 1 - half[-1]],
                np.r_[1 + half, 1 + half[-1]],
                step="post",
                color="0.5",
                alpha=0.25,
                lw=0,
                label="uniform ±2 se",
            )
            top = max(top, float(np.max(1 + half)))
        top = max(top, float(np.nanmax(dens)) if np.isfinite(dens).any() else 1.0)
        ax.set_title(p, fontsize=9)
        ax.set_xlim(0, 1)
    for ax in axes.flat[len(pipes) :]:
        ax.axis("off")
    axes[0, 0].set_ylim(0, 1.08 * top)
    for ax in axes[:, 0]:
        ax.set_ylabel("density")
    for ax in axes[-1, :]:
        ax.set_xlabel("PIT value")
    fig.suptitle(f"PIT histograms — {d}", fontsize=11)
    fig.tight_layout()
    return fig


def _coverage_width_fig(rk: xr.Dataset, d: str, colors: dict) -> Figure:
    import matplotlib.pyplot as plt

    b = rk.sel(dataset=d)
    levels = b["confidence_level"].values
    ncol = min(4, levels.size)
    nrow = -(-levels.size // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.3 * ncol, 3.2 * nrow + 0.6), squeeze=False)
    handles: dict[str, Any] = {}  # pipeline -> its errorbar container
    for ax, c in zip(axes.flat, levels):
        x = b.sel(confidence_level=c)
        infinite = []
        for p in x["pipeline"].values:
            y = x.sel(pipeline=p)
            cov, wid = float(y["coverage"]), float(y["width"])
            if np.isnan(cov):
                continue
            if not np.isfinite(wid):
                infinite.append(str(p))
                continue
            under = bool(y["undercovers"])
            best = int(y["width_rank"]) == 1
            h = ax.errorbar(
                wid,
                cov,
                xerr=2 * float(y["width_se"]) if np.isfinite(float(y["width_se"])) else None,
                yerr=2 * float(y["coverage_se"]),
                fmt="*" if best else "o",
                ms=12 if best else 6,
                color=colors[str(p)],
                mfc="white" if under else colors[str(p)],
                capsize=2,
                lw=1,
            )
            handles.setdefault(str(p), h)
        ax.axhline(c, color="0.3", ls="--", lw=1)
        ax.set_title(f"level {c:g}" + (f" (infinite width: {', '.join(infinite)})" if infinite else ""), fontsize=9)
        ax.set_xlabel("mean width")
        ax.set_ylabel("coverage")
    for ax in axes.flat[levels.size :]:
        ax.axis("off")
    fig.suptitle(f"Coverage vs width — {d} (hollow: under-covers; ★: narrowest adequate; bars ±2 se)", fontsize=10)
    if handles:
        fig.legend(
            list(handles.values()),
            list(handles),
            loc="lower center",
            ncol=min(5, len(handles)),
            fontsize=8,
            frameon=False,
        )
    fig.tight_layout(rect=(0, 0.06 if handles else 0, 1, 1))
    return fig
