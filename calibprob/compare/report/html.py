"""One self-contained HTML report of a comparison (:func:`write_html`): its sections, tables and figures."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import xarray as xr

from calibprob.compare.ranking import RHAT_MAX, TIE_SE, flag_notes, interval_rows, score_rows, stack_pipelines
from calibprob.compare.ranking.rank import _check_by, rank_results
from calibprob.compare.ranking.text import _fmt, _fmt_dse
from calibprob.compare.ranking.text import _verdict as verdict
from calibprob.compare.report.figures import (
    _colors,
    _coverage_width_fig,
    _esc,
    _pit_fig,
    _png,
    _reliability_fig,
)
from calibprob.compare.report.results import load_results
from calibprob.compare.report.shift import SHIFT_SECTION, shift_html
from calibprob.compare.report.text import summary
from calibprob.compare.report.time_plots import TIME_SECTION, time_coverage_html
from calibprob.plots import BAND_MASS, coverage_by_group

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


def _html_table(
    header: Sequence[object],
    rows: Sequence[Sequence[object]],
    classes: Sequence[str] | None = None,
    left: tuple[int, ...] = (0,),
) -> str:
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


def _ranking_html(rk: xr.Dataset, d: str) -> str:
    """The score ranking and the interval ranking of data set ``d``, with any convergence flag first."""
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


def _score_ranking_html(rk: xr.Dataset, d: str, by: str) -> str:
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


def _interval_ranking_html(rk: xr.Dataset, d: str) -> str:
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


def _scores_html(results: xr.Dataset, metrics: Sequence[str] | None) -> str:
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


def _fit_times_html(st: xr.Dataset, d: str, colors: dict) -> str:
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
    results: str | Path | xr.Dataset,
    out: str | Path,
    *,
    rank_by: str | None = None,
    diagnostics: xr.Dataset | None = None,
    metrics: Sequence[str] | None = None,
) -> Path:
    r"""Write one self-contained HTML report of a comparison.

    Every plot is a PNG embedded in the page (base64 ``data:`` URIs); there are
    no scripts, style sheets or fonts to fetch, so the file opens offline and
    can be mailed as is. Sections (``HTML_SECTIONS``): the ranking
    (:func:`calibprob.compare.ranking.rank_results`), the scores table,
    reliability diagrams, PIT histograms with their uniform bands, coverage vs
    width at each confidence level, fit times, and — only when the file holds
    any — convergence diagnostics (a ``diagnostics`` group, or root variables
    named in ``DIAGNOSTIC_NAMES``) and, after coverage vs width, the
    coverage by group with binomial bands (``GROUP_SECTION``; results of
    a data set with groups, :func:`calibprob.plots.coverage_by_group`, one
    figure per data set and level), and the covariate-shift diagnostic with the
    weights' effective sample sizes (``SHIFT_SECTION``; results of a data set declared
    with ``shift`` or of a method with ``weights``, ``calibprob.compare.report.shift``).

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
    :doc:`/examples/comparison` runs one small comparison, once, and shows what
    ``write_html`` returns.

    """
    import matplotlib

    matplotlib.use("Agg")

    out = _check_html_out(out)
    results, diagnostics = _html_inputs(results, diagnostics)
    spec = _stored_spec(results)
    by = _check_by(rank_by if rank_by is not None else spec.get("rank_by", "nll"))
    metrics = metrics or spec.get("metrics") or ["ece", "nll", "crps", "std", "rmse", "coverage", "width"]
    metric_vars = results.drop_vars([v for v in ("fit_time", "base_fit_time", "base_predict_time") if v in results])
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
    time_html = time_coverage_html(st, datasets, colors)
    if time_html:  # only for results of a time split (rolling coverage along the horizon)
        sections.insert(sections.index("Coverage and width") + 1, TIME_SECTION)
    shifted = shift_html(results)
    if shifted:  # only for results of a shifted data set or a weighted method
        sections.insert(sections.index("Coverage and width") + 1, SHIFT_SECTION)
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
        TIME_SECTION: time_html,
        SHIFT_SECTION: shifted,
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
#: Up to this many groups the report's group plots keep the labels' natural order at every level;
#: beyond it they sort by coverage, worst first.
GROUPS_IN_LABEL_ORDER = 12


def _group_coverage_html(st: xr.Dataset, datasets: Sequence[str], colors: dict) -> str:
    """The coverage-by-group figures, one per data set with group diagnostics and level ('' when none has them)."""
    if "group_coverage" not in st or "group_count" not in st:
        return ""

    parts = []
    for d in datasets:
        b = st.sel(dataset=d)
        if not bool(b["group_coverage"].notnull().any()):
            continue
        parts.append(f"<h3>{_esc(d)}</h3>")
        # a few groups read best in the same order at every level; many, worst first
        seen = b["group_coverage"].notnull().any([k for k in b["group_coverage"].dims if k != "group"])
        sort = "label" if int(seen.sum()) <= GROUPS_IN_LABEL_ORDER else "coverage"
        for c in b["confidence_level"].values:
            if bool(b["group_coverage"].sel(confidence_level=c).notnull().any()):
                fig = coverage_by_group(b, level=float(c), sort=sort, colors=colors, title=f"{d}: coverage by group")
                parts.append(_png(fig))
    if not parts:
        return ""
    return (
        '<p class="note">Coverage within each group, pooled over repetitions, one marker per pipeline; groups '
        f"in natural order of their labels when there are at most {GROUPS_IN_LABEL_ORDER}, else sorted by their "
        "lowest coverage over the pipelines, worst at the top. Grey: where a group of that many test points falls "
        f"{BAND_MASS:.0%} of the time under exactly nominal coverage (exact binomial); a marker left of its band is "
        "a group the method fails (its label is red). A hollow triangle is a group whose interval was infinite for "
        "some or all of its points (too small for the level): covered, but trivially. The ranking never names as "
        "best for width a pipeline whose worst group is short of nominal by more than 2 se.</p>" + "\n".join(parts)
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


def _html_inputs(
    results: str | Path | xr.Dataset, diagnostics: xr.Dataset | None
) -> tuple[xr.Dataset, xr.Dataset | None]:
    """The results root Dataset and the diagnostics to show (a file's ``diagnostics`` group, root
    variables named in ``DIAGNOSTIC_NAMES``, or both)."""
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

    try:
        return tomllib.loads(results.attrs["spec"])
    except tomllib.TOMLDecodeError:
        return {}


def _curve_sections(
    st: xr.Dataset, rk: xr.Dataset, datasets: Sequence[str], pipes: Sequence[str], colors: dict
) -> dict[str, str]:
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
