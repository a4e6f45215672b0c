"""Comparison tables (mean ± standard error, best marked) and report plots."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from calibprob.compare.ranking import _fmt, _fmt_dse

__all__ = ["summary", "format_table", "write_plots", "load_results", "LOWER_IS_BETTER"]

#: Metrics where smaller is better. Coverage is judged by its distance to the nominal level.
LOWER_IS_BETTER = {"ece", "iae", "nll", "crps", "pinball", "mse", "rmse", "std", "width", "ueb_violation", "ueb_width"}


def load_results(path: str | Path) -> xr.Dataset:
    """Load the metrics Dataset (root group) of a results file.

    Parameters
    ----------
    path : str or Path
        A results file written by :func:`run_comparison`.

    Returns
    -------
    xarray.Dataset

    References
    ----------
    The comparison-spec reference: :doc:`/spec`.

    Examples
    --------
    >>> from calibprob.compare import parse_spec
    >>> spec = parse_spec({
    ...     "name": "demo",
    ...     "datasets": [{"name": "branin", "function": "branin", "n": 80, "noise": 0.1}],
    ...     "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
    ...     "repetitions": 2,
    ...     "base": {"kind": "ols"},
    ...     "methods": {"vanilla": {"kind": "base"}, "scaled": {"kind": "variance-scaling"}},
    ... })
    >>> import tempfile, pathlib
    >>> from calibprob.compare import run_comparison, load_results
    >>> tmp = tempfile.TemporaryDirectory()
    >>> out = pathlib.Path(tmp.name) / "demo.nc"
    >>> tree = run_comparison(spec, out, progress=False)
    >>> sorted(load_results(out).sizes.items())[:3]
    [('calibrator', 2), ('confidence_level', 4), ('dataset', 1)]
    >>> tmp.cleanup()
    """
    from calibprob.runs import is_netcdf as _is_netcdf

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"results file {str(path)!r} does not exist. Produce one with `calibprob compare SPEC.toml --out FILE`."
        )
    hint = "Give a results file written by `calibprob compare SPEC.toml --out FILE`."
    if not _is_netcdf(path):
        raise ValueError(f"{str(path)!r} is not a netCDF file. {hint}")
    try:
        tree = xr.open_datatree(path, engine="h5netcdf")
    except Exception as err:  # damaged HDF5, classic netCDF-3, ...
        raise ValueError(
            f"{str(path)!r} could not be read as a netCDF-4 file ({type(err).__name__}: {err}). {hint}"
        ) from None
    try:
        ds = tree.to_dataset().load()
        if "timing" in tree.children:
            for name, var in tree["timing"].to_dataset().load().data_vars.items():
                ds[name] = var
    finally:
        tree.close()
    missing = [d for d in ("dataset", "calibrator", "repetition") if d not in ds.dims]
    if missing or "spec_fingerprint" not in ds.attrs:
        raise ValueError(
            f"{str(path)!r} is a netCDF file but not calibprob comparison results (no "
            f"{'dimension ' + ', '.join(map(repr, missing)) if missing else 'spec_fingerprint attribute'}). {hint}"
        )
    return ds


def _flat(results: xr.Dataset) -> xr.Dataset:
    """Results with a ``base`` dimension as one ``calibrator`` dimension labelled ``base/calibrator``.

    The table and the PNG plots show pipelines side by side; a one-base results file is returned as is.
    """
    if "base" not in results.dims:
        return results
    from calibprob.compare.ranking import stack_pipelines

    st = stack_pipelines(results)
    st = st.drop_vars([k for k in st.coords if str(k).startswith("pipeline_")]).rename(pipeline="calibrator")
    return st.transpose("dataset", "repetition", "calibrator", ...)


def _rows(results: xr.Dataset, metrics) -> list[tuple[str, str, float | None]]:
    """(row label, variable, confidence level or None) for every metric row."""
    rows: list[tuple[str, str, float | None]] = []
    for m in metrics:
        if m not in results:
            continue
        if "confidence_level" in results[m].dims:
            for c in results["confidence_level"].values:
                rows.append((f"{m}@{c:g}", m, float(c)))
        else:
            rows.append((m, m, None))
    return rows


def summary(results: xr.Dataset, metrics=None) -> xr.Dataset:
    """Mean and standard error over repetitions of every metric row.

    Parameters
    ----------
    results : xarray.Dataset
        The metrics of a results file (:func:`load_results`).
    metrics : sequence of str, optional
        Rows; default every metric.

    Returns
    -------
    xarray.Dataset
        ``mean(dataset, row, calibrator)``, ``se(...)``, ``n(...)`` and
        ``best(dataset, row, calibrator)`` (bool): the lowest mean (the highest
        for a higher-is-better metric), for ``coverage`` the closest to
        nominal, and for ``width`` the narrowest among the intervals that do
        not under-cover (coverage short of nominal by more than 2 standard
        errors, :func:`calibprob.compare.ranking.undercovers`). The ranking
        with paired uncertainty is :func:`calibprob.compare.ranking.rank_results`.
        When the file holds a base's convergence diagnostics (``rhat``,
        ``divergences`` of ``pymc-glm``), also ``base_flag(dataset, calibrator)``:
        why that column's base did not converge, or ``""``
        (:func:`calibprob.compare.ranking.convergence_flags`).

    References
    ----------
    The comparison-spec reference: :doc:`/spec`.

    Examples
    --------
    >>> from calibprob.compare import parse_spec
    >>> spec = parse_spec({
    ...     "name": "demo",
    ...     "datasets": [{"name": "branin", "function": "branin", "n": 80, "noise": 0.1}],
    ...     "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
    ...     "repetitions": 2,
    ...     "base": {"kind": "ols"},
    ...     "methods": {"vanilla": {"kind": "base"}, "scaled": {"kind": "variance-scaling"}},
    ... })
    >>> import tempfile, pathlib
    >>> from calibprob.compare import run_comparison, load_results
    >>> tmp = tempfile.TemporaryDirectory()
    >>> out = pathlib.Path(tmp.name) / "demo.nc"
    >>> tree = run_comparison(spec, out, progress=False)
    >>> from calibprob.compare import summary
    >>> table = summary(load_results(out))
    >>> sorted(table.data_vars)
    ['best', 'mean', 'n', 'se']
    >>> tmp.cleanup()
    """
    from calibprob.compare.ranking import convergence_flags

    results = _flat(results)
    metrics = (
        metrics
        or results.attrs.get("metrics")
        or [v for v in results.data_vars if results[v].dtype.kind == "f" and "calibrator" in results[v].dims]
    )
    stats = [_row_stats(results, var, c) for _, var, c in _rows(results, metrics)]
    labels = [label for (label, _, _), st in zip(_rows(results, metrics), stats) if st is not None]
    kept = [st for st in stats if st is not None]

    def cat(xs):
        return xr.concat(xs, dim=xr.DataArray(labels, dims="row"), coords="minimal", compat="override")

    out = xr.Dataset({k: cat([st[k] for st in kept]) for k in ("mean", "se", "n", "best")})
    flags = convergence_flags(results)
    if flags is not None:
        out["base_flag"] = flags.rename(pipeline="calibrator")
    return out


def _row_stats(results: xr.Dataset, var: str, c: float | None) -> dict[str, xr.DataArray] | None:
    """Mean, se, count over repetitions and the best mark of one table row (None for a curve)."""
    da = results[var]
    if c is not None:
        da = da.sel(confidence_level=c)
    if [d for d in da.dims if d not in ("dataset", "calibrator", "repetition")]:
        return None  # curves are not table rows
    n = da.count("repetition")
    mean = da.mean("repetition", skipna=True)
    with np.errstate(invalid="ignore"):  # an infinite score (an infinite std) has no finite se: nan, quietly
        se = da.std("repetition", ddof=1, skipna=True) / np.sqrt(n.where(n > 0))
    key: xr.DataArray
    if var == "coverage" and c is not None:
        key = abs(mean - c)
    elif var in LOWER_IS_BETTER:
        key = mean
    else:
        key = -mean
    if var == "width" and c is not None and "coverage" in results:
        # never the narrowest interval that under-covers: coverage short of nominal by more
        # than 2 standard errors (calibprob.compare.ranking.undercovers) rules a width out
        from calibprob.compare.ranking import undercovers

        n_test = results["n_test"] if "n_test" in results else xr.full_like(da, np.nan)
        key = key.where(~undercovers(results["coverage"].sel(confidence_level=c), n_test, c))
    return {"mean": mean, "se": se, "n": n, "best": key == key.min("calibrator", skipna=True)}


def format_table(results: xr.Dataset, metrics=None) -> str:
    """The comparison table as text: one block per data set, mean ± s.e., best marked ``*``.

    A column whose base did not converge (r-hat > 1.01 or divergent
    transitions in any repetition) has ``!`` after its name and a note under
    the block's heading saying why.

    Parameters
    ----------
    results : xarray.Dataset
        The metrics of a results file (:func:`load_results`).
    metrics : sequence of str, optional
        Rows; default the spec's ``metrics``.

    Returns
    -------
    str

    References
    ----------
    The comparison-spec reference: :doc:`/spec`.

    Examples
    --------
    >>> from calibprob.compare import parse_spec
    >>> spec = parse_spec({
    ...     "name": "demo",
    ...     "datasets": [{"name": "branin", "function": "branin", "n": 80, "noise": 0.1}],
    ...     "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
    ...     "repetitions": 2,
    ...     "base": {"kind": "ols"},
    ...     "methods": {"vanilla": {"kind": "base"}, "scaled": {"kind": "variance-scaling"}},
    ... })
    >>> import tempfile, pathlib
    >>> from calibprob.compare import run_comparison, load_results
    >>> tmp = tempfile.TemporaryDirectory()
    >>> out = pathlib.Path(tmp.name) / "demo.nc"
    >>> tree = run_comparison(spec, out, progress=False)
    >>> from calibprob.compare import format_table
    >>> print(format_table(load_results(out), ["ece", "nll"]).splitlines()[0])
    == branin  (mean ± s.e. over 2 repetitions; * = best; a width only among intervals that do not under-cover)
    >>> tmp.cleanup()
    """
    results = _flat(results)
    s = summary(results, metrics)
    lines = []
    reps = results.sizes.get("repetition", 1)
    for d in s["dataset"].values:
        lines += _table_block(s.sel(dataset=d), d, reps)
    return "\n".join(lines + _failed_lines(results))


def _table_block(block: xr.Dataset, d, reps: int) -> list[str]:
    """One data set of the table: heading, convergence notes, a row per metric, a blank line."""
    from calibprob.compare.ranking import flag_notes

    flags = block["base_flag"] if "base_flag" in block else None
    cal = [str(c) for c in block["calibrator"].values]
    head = [c + (" !" if flags is not None and str(flags.sel(calibrator=c).item()) else "") for c in cal]
    cells = [[""] + head]
    for r in block["row"].values:
        row = [str(r)]
        for c in cal:
            cell = block.sel(row=r, calibrator=c)
            m, e = float(cell["mean"]), float(cell["se"])
            txt = _fmt(m) + ("" if not np.isfinite(e) else f" ± {_fmt(e)}")
            row.append(("*" if bool(cell["best"]) else " ") + txt)
        cells.append(row)
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = [
        f"== {d}  (mean ± s.e. over {reps} repetitions; * = best; a width only among intervals that do not under-cover)"
    ]
    lines += flag_notes(flags)
    for k, row in enumerate(cells):
        lines.append("  ".join(txt.ljust(w) if i == 0 else txt.rjust(w) for i, (txt, w) in enumerate(zip(row, widths))))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("")
    return lines


def _failed_lines(results: xr.Dataset) -> list[str]:
    """The (dataset, repetition, calibrator) runs that raised, first line of each message (at most 20)."""
    if "error" not in results or results["error"].values.ndim != 3:
        return []
    errs = results["error"].values
    failed = [
        (str(d), int(r), str(c), str(errs[i, j, k]).splitlines()[0])
        for i, d in enumerate(results["dataset"].values)
        for j, r in enumerate(results["repetition"].values)
        for k, c in enumerate(results["calibrator"].values)
        if str(errs[i, j, k])
    ]
    if not failed:
        return []
    return [f"{len(failed)} failed (dataset, repetition, calibrator) runs:"] + [
        f"  {d} rep {r} {c}: {msg}" for d, r, c, msg in failed[:20]
    ]


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
    >>> from calibprob.compare import parse_spec
    >>> spec = parse_spec({
    ...     "name": "demo",
    ...     "datasets": [{"name": "branin", "function": "branin", "n": 80, "noise": 0.1}],
    ...     "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
    ...     "repetitions": 2,
    ...     "base": {"kind": "ols"},
    ...     "methods": {"vanilla": {"kind": "base"}, "scaled": {"kind": "variance-scaling"}},
    ... })
    >>> import tempfile, pathlib
    >>> from calibprob.compare import run_comparison, load_results
    >>> tmp = tempfile.TemporaryDirectory()
    >>> out = pathlib.Path(tmp.name) / "demo.nc"
    >>> tree = run_comparison(spec, out, progress=False)
    >>> from calibprob.compare import write_plots
    >>> [p.name for p in write_plots(load_results(out), tmp.name)]
    ['branin_reliability.png', 'branin_coverage.png', 'branin_sharpness_calibration.png']
    >>> tmp.cleanup()
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from calibprob.runs import inside, safe_name

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


def _plot_group_coverage(r: xr.Dataset, cals: list[str], d):
    """Coverage of each group against its binomial band (:mod:`calibprob.compare.group_plots`)."""
    from calibprob.compare.group_plots import group_coverage_figure

    return group_coverage_figure(r["group_coverage"], r["group_count"], "calibrator", f"Coverage by group — {d}")


def _check_plot_stems(datasets) -> None:
    """Data-set names become file names: sanitised ("../x" -> "___x") and kept inside the folder;
    two names equal once sanitised would overwrite each other's plots."""
    from calibprob.runs import safe_name

    stems: dict[str, str] = {}
    for d in datasets:
        stem = safe_name(d)
        if stem in stems:
            raise ValueError(
                f"data-set names {stems[stem]!r} and {str(d)!r} give the same plot file name {stem!r}; "
                "rename one in the spec."
            )
        stems[stem] = str(d)


def _curve_dim(da: xr.DataArray):
    """The level dimension of a stored curve (the one that is not dataset/calibrator/repetition)."""
    return next(x for x in da.dims if x not in ("dataset", "calibrator", "repetition"))


def _plot_reliability(r: xr.Dataset, cals: list[str], d):
    """Reliability diagram of one data set: mean observed fraction over repetitions, ±2 se bands."""
    import matplotlib.pyplot as plt

    from calibprob.plots import draw_reliability

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


def _plot_coverage(r: xr.Dataset, cals: list[str], d):
    """Coverage of central intervals against nominal, mean over repetitions."""
    import matplotlib.pyplot as plt

    from calibprob.plots import draw_coverage

    cov = r["iae_coverage"]
    fig, ax = plt.subplots(figsize=(5, 5))
    draw_coverage(
        ax,
        cov[_curve_dim(cov)].values,
        {c: cov.sel(calibrator=c).mean("repetition").values for c in cals},
        title=f"Coverage of central intervals — {d}",
    )
    return fig


def _plot_sharpness(r: xr.Dataset, cals: list[str], d):
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


# ----------------------------------------------------------------------------- the HTML report
#: Root variables of a results file shown in the report's diagnostics section when present
#: (besides every variable of a ``diagnostics`` group); none is written by today's bases.
DIAGNOSTIC_NAMES = ("rhat", "r_hat", "ess_bulk", "ess_tail", "divergences", "diverging", "n_divergent")
#: Section headings of the HTML report, in order (the diagnostics one only when the file has any).
HTML_SECTIONS = (
    "Ranking",
    "Scores",
    "Reliability diagrams",
    "PIT histograms",
    "Coverage and width",
    "Fit times",
    "Diagnostics",
)

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1d232a;
 background:#fff;margin:0}
main{max-width:1180px;margin:0 auto;padding:12px 24px 48px}
h1{font-size:1.55em;margin:.6em 0 .2em}h2{font-size:1.3em;margin:1.6em 0 .4em;padding-top:.4em;
 border-top:2px solid #d8dee4}h3{font-size:1.05em;margin:1.1em 0 .3em}
nav{font-size:.92em;margin:.3em 0 1em}nav a{margin-right:1em;color:#0b5cad;text-decoration:none}
p.note{color:#57606a;font-size:.9em;margin:.2em 0 .6em;max-width:60em}
.tbl{overflow-x:auto;margin:.3em 0 .8em}
table{border-collapse:collapse;font-size:.88em;font-variant-numeric:tabular-nums}
th,td{padding:3px 9px;border-bottom:1px solid #e3e7eb;text-align:right;white-space:nowrap}
th{background:#f3f5f7;font-weight:600}td.l,th.l{text-align:left}
tr.best td{font-weight:700;background:#eef7ee}tr.tied td{background:#f6fbf6}
tr.under td{color:#a40e26;background:#fff3f3}tr.off td{color:#6e7781}
tr.flag td{background:#fff8e1}tr.flag td:last-child{color:#8a4b00;font-weight:700}
p.flag{color:#8a4b00;background:#fff8e1;padding:4px 8px;max-width:60em}
img{max-width:100%;height:auto;display:block;margin:.3em 0 .8em}
pre{background:#f6f8fa;padding:10px;overflow-x:auto;font-size:.85em}
"""


def _esc(x) -> str:
    import html

    return html.escape(str(x), quote=True)


def _png(fig) -> str:
    """A matplotlib figure as an ``<img>`` holding its PNG inline (base64), then closed."""
    import base64
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight")
    plt.close(fig)
    alt = fig.axes[0].get_title() if fig.axes else "figure"
    return f'<img alt="{_esc(alt)}" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode("ascii")}">'


def _html_table(header, rows, classes=None, left=(0,)) -> str:
    head = "".join(
        f'<th class="l">{_esc(h)}</th>' if i in left else f"<th>{_esc(h)}</th>" for i, h in enumerate(header)
    )
    body = []
    for k, row in enumerate(rows):
        cls = f' class="{classes[k]}"' if classes and classes[k] else ""
        cells = "".join(
            f'<td class="l">{_esc(c)}</td>' if i in left else f"<td>{_esc(c)}</td>" for i, c in enumerate(row)
        )
        body.append(f"<tr{cls}>{cells}</tr>")
    return f'<div class="tbl"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _colors(labels) -> dict:
    import matplotlib.pyplot as plt

    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return {p: cycle[i % len(cycle)] for i, p in enumerate(labels)}


def _pooled_n(st_d, pipe) -> float:
    """Test points pooled over the repetitions where ``pipe`` has a coverage or a curve."""
    if "n_test" not in st_d:
        return float("nan")
    var = "observed_fraction" if "observed_fraction" in st_d else "coverage"
    scored = st_d[var].sel(pipeline=pipe)
    scored = scored.notnull().any([d for d in scored.dims if d != "repetition"])
    return float(st_d["n_test"].where(scored).sum())


def _ranking_html(rk, d) -> str:
    """The score ranking and the interval ranking of data set ``d``, with any convergence flag first."""
    from calibprob.compare.ranking import flag_notes

    by = rk.attrs.get("rank_by", "nll")
    parts = [f"<h3>{_esc(d)}: ranking by {_esc(by.upper())}</h3>"]
    # a base that did not converge (r-hat > 1.01, divergences) makes its pipelines' scores suspect
    flags = rk["base_flag"].sel(dataset=d) if "base_flag" in rk else None
    parts += [f'<p class="flag">{_esc(note)}</p>' for note in flag_notes(flags)]
    parts.append(_score_ranking_html(rk, d, by))
    if "width_rank" in rk:
        parts.append(_interval_ranking_html(rk, d))
    return "\n".join(parts)


def _row_class(r: dict) -> str:
    """CSS class of a ranking row: under-coverage first, then a not-converged base, then best/tied."""
    if r["verdict"] == "under-covers":
        return "under"
    if r["flag"]:
        return "flag"
    return {"best": "best", "tied": "tied"}.get(r["verdict"], "")


def _score_ranking_html(rk, d, by: str) -> str:
    from calibprob.compare.ranking import TIE_SE, score_rows
    from calibprob.compare.ranking import _verdict as verdict

    if not int(rk["score_n"].sel(dataset=d).max()):
        return f'<p class="note">No pipeline has {_esc(by)} scores (intervals-only methods, or every task failed).</p>'
    rows, classes = [], []
    for r in score_rows(rk, d):
        if r["rank"] == 0:
            rows.append(["–", r["pipeline"], "", "", "", r["note"]])
            classes.append("off")
            continue
        best = r["verdict"] == "best"
        se = "" if np.isnan(r["se"]) else f" ± {_fmt(r['se'])}"
        rows.append(
            [
                str(r["rank"]),
                r["pipeline"],
                _fmt(r["mean"]) + se,
                "—" if best else _fmt(r["diff"]),
                "—" if best else _fmt_dse(r["dse"]),
                verdict(r),
            ]
        )
        classes.append(_row_class(r))
    table = _html_table(["rank", "pipeline", f"{by} ± se", "Δ to best", "dse", ""], rows, classes, left=(1, 5))
    return table + (
        "\n"
        f'<p class="note">Lower is better. Δ is the mean over repetitions of the per-repetition '
        f"difference to the best (the splits are shared, so differences are paired); dse is its "
        f"standard error, sd(differences)/√R. <b>tied</b>: Δ ≤ {TIE_SE:g} dse.</p>"
    )


def _interval_ranking_html(rk, d) -> str:
    from calibprob.compare.ranking import TIE_SE, interval_rows
    from calibprob.compare.ranking import _verdict as verdict

    rows, classes = [], []
    for c in rk["confidence_level"].values:
        for k, r in enumerate(interval_rows(rk, d, c)):
            ranked = r["rank"] > 0
            best = r["verdict"] == "best"
            rows.append(
                [
                    f"{c:g}" if k == 0 else "",
                    str(r["rank"]) if ranked else "–",
                    r["pipeline"],
                    f"{_fmt(r['coverage'])} ± {_fmt(r['coverage_se'])}",
                    _fmt(r["width"]),
                    "—" if best or not ranked else _fmt(r["diff"]),
                    "—" if best or not ranked else _fmt_dse(r["dse"]),
                    verdict(r),
                ]
            )
            classes.append(_row_class(r))
    header = ["level", "rank", "pipeline", "coverage ± se", "width", "Δ to best", "dse", ""]
    return "\n".join(
        [
            f"<h3>{_esc(d)}: central intervals, narrowest first</h3>",
            _html_table(header, rows, classes, left=(2, 7)),
            f'<p class="note">An interval whose mean coverage falls short of the nominal level by '
            f"more than {TIE_SE:g} standard errors <b>under-covers</b> and is never ranked by width; "
            "se = max(binomial √(α(1−α)/N) over the N test points pooled over repetitions, "
            "across-repetition sd/√R).</p>",
        ]
    )


def _scores_html(results, metrics) -> str:
    from calibprob.compare.ranking import stack_pipelines

    st = stack_pipelines(results)
    st = st.drop_vars([k for k in st.coords if str(k).startswith("pipeline_")]).rename(pipeline="calibrator")
    s = summary(st, metrics)
    out = []
    for d in s["dataset"].values:
        b = s.sel(dataset=d)
        pipes = [str(p) for p in b["calibrator"].values]
        rows = []
        for r in b["row"].values:
            row = [str(r)]
            for p in pipes:
                cell = b.sel(row=r, calibrator=p)
                m, e = float(cell["mean"]), float(cell["se"])
                txt = _fmt(m) + ("" if not np.isfinite(e) else f" ± {_fmt(e)}")
                row.append(("★ " if bool(cell["best"]) else "") + txt)
            rows.append(row)
        out.append(f"<h3>{_esc(d)}</h3>" + _html_table(["metric", *pipes], rows))
    out.append(
        '<p class="note">Mean ± standard error over repetitions; ★ = best (lowest; coverage: closest '
        "to nominal; width: narrowest among the intervals that do not under-cover).</p>"
    )
    return "\n".join(out)


def _reliability_fig(st_d, pipes, colors, d):
    import matplotlib.pyplot as plt

    from calibprob.plots import draw_reliability

    of = st_d["observed_fraction"]
    lv_dim = next(x for x in of.dims if x not in ("pipeline", "repetition"))
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


def _pit_fig(st_d, pipes, colors, d):
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


def _coverage_width_fig(rk, d, colors):
    import matplotlib.pyplot as plt

    b = rk.sel(dataset=d)
    levels = b["confidence_level"].values
    ncol = min(4, levels.size)
    nrow = -(-levels.size // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.3 * ncol, 3.2 * nrow + 0.6), squeeze=False)
    handles = {}
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


def _fit_times_html(st, d, colors) -> str:
    import matplotlib.pyplot as plt

    parts = []
    rows, labels, means, errs = [], [], [], []
    b = st.sel(dataset=d)
    if "base_fit_time" in b:
        bt = b["base_fit_time"]
        for idx in np.ndindex(*[bt.sizes[k] for k in bt.dims if k != "repetition"]):
            sel = dict(zip([k for k in bt.dims if k != "repetition"], idx))
            x = bt.isel(sel).values.astype(float)
            x = x[np.isfinite(x)]
            if x.size:
                name = "base model" + (
                    "" if not sel else f" ({', '.join(str(bt[k].values[i]) for k, i in sel.items())})"
                )
                rows.append(
                    [
                        name,
                        _fmt(x.mean()),
                        _fmt(x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else "",
                        _fmt(x.min()),
                        _fmt(x.max()),
                        str(x.size),
                    ]
                )
    if "fit_time" in b:
        for p in b["pipeline"].values:
            x = b["fit_time"].sel(pipeline=p).values.astype(float)
            x = x[np.isfinite(x)]
            if not x.size:
                continue
            se = x.std(ddof=1) / np.sqrt(x.size) if x.size > 1 else np.nan
            rows.append(
                [str(p), _fmt(x.mean()), "" if np.isnan(se) else _fmt(se), _fmt(x.min()), _fmt(x.max()), str(x.size)]
            )
            labels.append(str(p))
            means.append(x.mean())
            errs.append(0 if np.isnan(se) else 2 * se)
    if not rows:
        return f'<h3>{_esc(d)}</h3><p class="note">No fit times in this file.</p>'
    parts.append(f"<h3>{_esc(d)}</h3>")
    parts.append(_html_table(["", "mean (s)", "se (s)", "min (s)", "max (s)", "repetitions"], rows))
    if labels:
        fig, ax = plt.subplots(figsize=(7.5, 0.38 * len(labels) + 1.1))
        yy = np.arange(len(labels))[::-1]
        ax.barh(yy, means, xerr=errs, color=[colors[p] for p in labels], alpha=0.8, capsize=2)
        ax.set_yticks(yy, labels, fontsize=8)
        pos = [m for m in means if m > 0]
        if pos and max(pos) / min(pos) > 100:
            ax.set_xscale("log")
        ax.set_xlabel("calibrator fit + predict time per task (s, mean ± 2 se)")
        ax.set_title(f"Fit times — {d}", fontsize=10)
        parts.append(_png(fig))
    return "\n".join(parts)


def _not_converged(name: str, vals: list[float]) -> bool:
    """r-hat above :data:`~calibprob.compare.ranking.RHAT_MAX` (Vehtari et al. 2021) or any divergence."""
    from calibprob.compare.ranking import RHAT_MAX

    if all(np.isnan(vals)):
        return False
    key = name.replace("_", "")
    if "rhat" in key:
        return bool(np.nanmax(vals) > RHAT_MAX)
    return ("diverg" in key or key == "ndivergent") and bool(np.nanmax(vals) > 0)


def _diagnostics_html(diag: xr.Dataset) -> str:
    parts = []
    for name, da in diag.data_vars.items():
        if da.dtype.kind not in "fiub":
            continue
        keep = [k for k in da.dims if k != "repetition"]
        da = da.astype(float)
        red = (
            {"min": da.min("repetition"), "mean": da.mean("repetition"), "max": da.max("repetition")}
            if "repetition" in da.dims
            else {"value": da}
        )
        rows, classes = [], []
        for idx in np.ndindex(*[da.sizes[k] for k in keep]):
            sel = dict(zip(keep, idx))
            vals = [float(v.isel(sel)) for v in red.values()]
            if all(np.isnan(vals)):
                continue
            rows.append(
                [str(da[k].values[i]) if k in da.coords else str(i) for k, i in sel.items()] + [_fmt(v) for v in vals]
            )
            classes.append("under" if _not_converged(str(name), vals) else "")
        if rows:
            parts.append(f"<h3>{_esc(name)}</h3>")
            if da.attrs.get("long_name"):
                parts.append(f'<p class="note">{_esc(da.attrs["long_name"])}</p>')
            parts.append(_html_table([*keep, *red], rows, classes, left=tuple(range(len(keep)))))
    return "\n".join(parts)


def write_html(
    results, out: str | Path, *, rank_by: str | None = None, diagnostics: xr.Dataset | None = None, metrics=None
) -> Path:
    r"""Write one self-contained HTML report of a comparison.

    Every plot is a PNG embedded in the page (base64 ``data:`` URIs); there are
    no scripts, style sheets or fonts to fetch, so the file opens offline and
    can be mailed as is. Sections (:data:`HTML_SECTIONS`): the ranking
    (:func:`calibprob.compare.ranking.rank_results`), the scores table,
    reliability diagrams, PIT histograms with their uniform bands, coverage vs
    width at each confidence level, fit times, and — only when the file holds
    any — convergence diagnostics (a ``diagnostics`` group, or root variables
    named in :data:`DIAGNOSTIC_NAMES`) and, after coverage vs width, the
    coverage by group with binomial bands (:data:`GROUP_SECTION`; results of
    a data set with groups, :mod:`calibprob.compare.group_plots`).

    The PIT histograms are derived from the stored reliability curves:
    ``observed_fraction`` at level :math:`p_j` is the fraction of test points
    whose PIT value :math:`F_i(y_i)` is at most :math:`p_j`, so its increments
    are the histogram's bin masses. Under calibration the pooled count in a bin
    of width :math:`w` is Binomial(:math:`N, w`) over the :math:`N` test points
    of all repetitions; the band is :math:`1 \pm 2\sqrt{w(1-w)/N}/w` in density.

    Parameters
    ----------
    results : str, Path or xarray.Dataset
        A results file written by ``calibprob compare``, or its root Dataset
        (:func:`load_results`).
    out : str or Path
        The HTML file to write (its folder must exist).
    rank_by : {"nll", "crps"}, optional
        Score of the ranking; default the spec's ``rank_by`` (stored in the
        file), else ``"nll"``.
    diagnostics : xarray.Dataset, optional
        Diagnostics to show; default the file's ``diagnostics`` group if any.
    metrics : sequence of str, optional
        Rows of the scores table; default the spec's ``metrics``.

    Returns
    -------
    Path
        ``out``.

    Raises
    ------
    ValueError
        If ``rank_by`` is not a proper score, ``out``'s folder does not exist,
        or ``results`` is not a comparison's results.

    References
    ----------
    Gneiting, T., Balabdaoui, F. and Raftery, A. E. (2007). Probabilistic forecasts,
    calibration and sharpness. JRSS B 69(2), 243-268 (PIT histograms).

    Kuleshov, V., Fenner, N. and Ermon, S. (2018). Accurate uncertainties for deep
    learning using calibrated regression. ICML (reliability diagrams).

    Examples
    --------
    >>> from calibprob.compare import parse_spec
    >>> spec = parse_spec({
    ...     "name": "demo",
    ...     "datasets": [{"name": "branin", "function": "branin", "n": 80, "noise": 0.1}],
    ...     "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
    ...     "repetitions": 2,
    ...     "base": {"kind": "ols"},
    ...     "methods": {"vanilla": {"kind": "base"}, "scaled": {"kind": "variance-scaling"}},
    ... })
    >>> import tempfile, pathlib
    >>> from calibprob.compare import run_comparison, write_html
    >>> tmp = tempfile.TemporaryDirectory()
    >>> out = pathlib.Path(tmp.name) / "demo.nc"
    >>> tree = run_comparison(spec, out, progress=False)
    >>> page = write_html(out, pathlib.Path(tmp.name) / "report.html")
    >>> "<h2 id=\"ranking\">Ranking</h2>" in page.read_text()
    True
    >>> tmp.cleanup()
    """
    import matplotlib

    matplotlib.use("Agg")

    from calibprob.compare.ranking import _check_by, rank_results, stack_pipelines

    out = _check_html_out(out)
    results, diagnostics = _html_inputs(results, diagnostics)
    spec = _stored_spec(results)
    by = _check_by(rank_by if rank_by is not None else spec.get("rank_by", "nll"))
    metrics = metrics or spec.get("metrics") or ["ece", "nll", "crps", "std", "rmse", "coverage", "width"]
    metric_vars = results.drop_vars([v for v in ("fit_time", "base_fit_time") if v in results])
    rk = rank_results(metric_vars, by)
    st = stack_pipelines(results)
    pipes = [str(p) for p in st["pipeline"].values]
    colors = _colors(pipes)
    name = results.attrs.get("spec_name", "comparison")
    datasets = [str(d) for d in results["dataset"].values]
    diag_html = "" if diagnostics is None else _diagnostics_html(diagnostics)
    sections = [s for s in HTML_SECTIONS if s != "Diagnostics" or diag_html.strip()]
    group_html = _group_coverage_html(st, datasets, colors)
    if group_html:  # only for results with per-group diagnostics (a data set with groups)
        sections.insert(sections.index("Coverage and width") + 1, GROUP_SECTION)
    ids = {s: s.lower().replace(" ", "-") for s in sections}

    body = [
        f"<h1>calibprob comparison: {_esc(name)}</h1>",
        f'<p class="note">{len(datasets)} data set(s): {_esc(", ".join(datasets))}; '
        f"{results.sizes.get('repetition', 1)} repetition(s); "
        f"{len(pipes)} pipeline(s); calibprob {_esc(results.attrs.get('calibprob_version', '?'))}. "
        + (_esc(spec.get("description", "")) if spec.get("description") else "")
        + "</p>",
        "<nav>" + "".join(f'<a href="#{ids[s]}">{_esc(s)}</a>' for s in sections) + "</nav>",
    ]
    texts = {
        "Ranking": "\n".join(_ranking_html(rk, d) for d in datasets),
        "Scores": _scores_html(metric_vars, metrics),
        **_curve_sections(st, rk, datasets, pipes, colors),
        GROUP_SECTION: group_html,
        "Fit times": '<p class="note">Wall-clock seconds per task: the base model\'s fit, and each '
        "calibrator's fit and prediction on the test part.</p>"
        + "\n".join(_fit_times_html(st, d, colors) for d in datasets),
        "Diagnostics": '<p class="note">Convergence diagnostics stored in the results file, '
        "over repetitions; rows with r̂ &gt; 1.01 or divergent transitions are marked.</p>" + diag_html,
    }
    for title in sections:
        body.append(f'<section><h2 id="{ids[title]}">{_esc(title)}</h2>\n{texts[title]}</section>')
    if results.attrs.get("spec"):
        body.append(f"<details><summary>The spec</summary><pre>{_esc(results.attrs['spec'])}</pre></details>")
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>calibprob: {_esc(name)}</title><style>{_CSS}</style></head>\n"
        "<body><main>\n" + "\n".join(body) + "\n</main></body></html>\n"
    )
    out.write_text(page, encoding="utf-8")
    return out


#: The HTML section shown after "Coverage and width" when the results carry per-group diagnostics.
GROUP_SECTION = "Coverage by group"


def _group_coverage_html(st: xr.Dataset, datasets, colors) -> str:
    """The coverage-by-group figures, one per data set with group diagnostics ('' when none has them)."""
    if "group_coverage" not in st or "group_count" not in st:
        return ""
    from calibprob.compare.group_plots import group_coverage_figure

    figs = []
    for d in datasets:
        b = st.sel(dataset=d)
        if bool(b["group_coverage"].notnull().any()):
            figs.append(_png(group_coverage_figure(b["group_coverage"], b["group_count"], "pipeline", f"{d}", colors)))
    if not figs:
        return ""
    return (
        '<p class="note">Coverage within each group, pooled over repetitions, one marker per pipeline; '
        "grey: where a group of that many test points falls 95% of the time under exactly nominal coverage "
        "(binomial); a marker below its band is a group the method fails. The ranking never names as best "
        "for width a pipeline whose worst group is short of nominal by more than 2 se.</p>" + "\n".join(figs)
    )


def _check_html_out(out: str | Path) -> Path:
    """The report's path: its folder must exist and it must not be a folder itself."""
    out = Path(out)
    if not out.parent.is_dir():
        raise ValueError(
            f"out {str(out)!r}: its folder {str(out.parent)!r} does not exist; create it or give "
            "another path for the HTML file."
        )
    if out.is_dir():
        raise ValueError(f"out {str(out)!r} is a folder; give a file name such as report.html.")
    return out


def _html_inputs(results, diagnostics: xr.Dataset | None) -> tuple[xr.Dataset, xr.Dataset | None]:
    """The results root Dataset and the diagnostics to show (a file's ``diagnostics`` group, root
    variables named in :data:`DIAGNOSTIC_NAMES`, or both)."""
    if isinstance(results, (str, Path)):
        path = Path(results)
        ds = load_results(path)
        if diagnostics is None:
            tree = xr.open_datatree(path, engine="h5netcdf")
            try:
                if "diagnostics" in tree.children:
                    diagnostics = tree["diagnostics"].to_dataset().load()
            finally:
                tree.close()
        results = ds
    if not isinstance(results, xr.Dataset) or "dataset" not in results.dims:
        raise ValueError(
            "results must be a results file or its root Dataset (calibprob.compare.load_results); "
            f"got {type(results).__name__}."
        )
    present = [n for n in DIAGNOSTIC_NAMES if n in results]
    if present:
        diagnostics = results[present] if diagnostics is None else xr.merge([diagnostics, results[present]])
    return results, diagnostics


def _stored_spec(results: xr.Dataset) -> dict:
    """The spec stored in a results file as a dict (empty when absent or unreadable)."""
    if not results.attrs.get("spec"):
        return {}
    import tomllib

    try:
        return tomllib.loads(results.attrs["spec"])
    except tomllib.TOMLDecodeError:
        return {}


def _curve_sections(st: xr.Dataset, rk: xr.Dataset, datasets, pipes, colors) -> dict[str, str]:
    """The reliability, PIT and coverage-width sections, one figure per data set each."""
    rel, pit, cw = [], [], []
    for d in datasets:
        st_d = st.sel(dataset=d)
        curve_pipes = (
            [p for p in pipes if bool(st_d["observed_fraction"].sel(pipeline=p).notnull().any())]
            if "observed_fraction" in st_d
            else []
        )
        if curve_pipes:
            rel.append(_png(_reliability_fig(st_d, curve_pipes, colors, d)))
            pit.append(_png(_pit_fig(st_d, curve_pipes, colors, d)))
        else:
            msg = f'<p class="note">{_esc(d)}: no pipeline with a predictive distribution was scored.</p>'
            rel.append(msg)
            pit.append(msg)
        if "coverage" in rk:
            cw.append(_png(_coverage_width_fig(rk, d, colors)))
    return {
        "Reliability diagrams": '<p class="note">Observed fraction of test points at or below the predicted '
        "p-quantile, against p; the diagonal is perfect calibration; bands: ±2 se over repetitions.</p>"
        + "\n".join(rel),
        "PIT histograms": '<p class="note">Histogram of PIT values F(y) on the test points, pooled over '
        "repetitions (from the stored reliability curves); flat at 1 when calibrated; grey band: ±2 binomial "
        "se of a uniform histogram with the same number of test points.</p>" + "\n".join(pit),
        "Coverage and width": (
            '<p class="note">Per confidence level: empirical coverage against mean '
            "interval width (±2 se); dashed: the nominal level.</p>" + "\n".join(cw)
        )
        if cw
        else '<p class="note">No interval was scored.</p>',
    }
