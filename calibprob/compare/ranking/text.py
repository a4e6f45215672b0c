"""The ranking as rows and as text: :func:`score_rows`, :func:`interval_rows`, :func:`format_ranking`."""

from __future__ import annotations

import numpy as np
import xarray as xr

from calibprob.compare.ranking.rank import TIE_SE


def _fmt(x: float) -> str:
    if np.isnan(x):
        return "nan"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    a = abs(x)
    if a != 0 and (a < 1e-3 or a >= 1e4):
        return f"{x:.2e}"
    return f"{x:.4f}" if a < 1 else f"{x:.3f}"


def _fmt_dse(x: float) -> str:
    """The paired standard error, blank when undefined (one repetition: no spread to pair)."""
    return "" if np.isnan(x) else _fmt(x)


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for k, row in enumerate(rows):
        lines.append(
            "  ".join(t.rjust(w) if i in right else t.ljust(w) for i, (t, w) in enumerate(zip(row, widths))).rstrip()
        )
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def _flag_of(x: xr.Dataset) -> str:
    """The ``base_flag`` of one (dataset, pipeline) selection ('' without diagnostics)."""
    return str(x["base_flag"].item()) if "base_flag" in x else ""


#: Marker of a pipeline whose base did not converge, in the printed ranking and table.
NOT_CONVERGED = "! base not converged"


def flag_notes(flags: xr.DataArray | None) -> list[str]:
    """One line per distinct reason a base did not converge, naming the pipelines it affects.

    Parameters
    ----------
    flags : xarray.DataArray of str or None
        One data set's ``base_flag`` over its pipelines (``pipeline`` or ``calibrator``).

    Returns
    -------
    list of str
        Empty when nothing is flagged.
    """
    if flags is None:
        return []
    by_reason: dict[str, list[str]] = {}
    for p, f in zip(flags[flags.dims[0]].values, flags.values):
        if str(f):
            by_reason.setdefault(str(f), []).append(str(p))
    return [
        f"! base not converged for {', '.join(pipes)}: {reason}; its scores may not be the model's "
        "(rerun with more tune/draws or a higher target_accept)"
        for reason, pipes in by_reason.items()
    ]


def score_rows(rk: xr.Dataset, dataset: str) -> list[dict]:
    """The score ranking of one data set as rows (ranked first, by rank; then the unranked).

    Parameters
    ----------
    rk : xarray.Dataset
        From :func:`rank_results`.
    dataset : str

    Returns
    -------
    list of dict
        Keys ``rank``, ``pipeline``, ``mean``, ``se``, ``diff``, ``dse``,
        ``verdict`` (``"best"``, ``"tied"``, ``""``) or ``note`` for an
        unranked pipeline, ``flag`` (why its base did not converge, or ``""``).
    """
    b = rk.sel(dataset=dataset)
    rows = []
    for p in b["pipeline"].values:
        x = b.sel(pipeline=p)
        rank = int(x["score_rank"])
        note = ""
        if rank == 0:
            if int(x["score_n"]) == 0:
                scored = "coverage" in x and bool(x["coverage"].notnull().any())
                note = "intervals only: ranked by width below" if scored else "not scored (failed)"
            else:
                note = f"incomplete: scored on {int(x['score_n'])} repetition(s), not paired with the others"
        verdict = "best" if rank == 1 else "tied" if bool(x["score_tied"]) else ""
        rows.append(
            dict(
                rank=rank,
                pipeline=str(p),
                mean=float(x["score_mean"]),
                se=float(x["score_se"]),
                diff=float(x["score_diff"]),
                dse=float(x["score_dse"]),
                verdict=verdict,
                note=note,
                flag=_flag_of(x),
            )
        )
    return sorted(rows, key=lambda r: (r["rank"] == 0, r["rank"]))


def interval_rows(rk: xr.Dataset, dataset: str, level: float) -> list[dict]:
    """The width ranking of one data set at one confidence level as rows.

    Parameters
    ----------
    rk : xarray.Dataset
        From :func:`rank_results`.
    dataset : str
    level : float

    Returns
    -------
    list of dict
        Keys ``rank``, ``pipeline``, ``coverage``, ``coverage_se``,
        ``width``, ``diff``, ``dse``, ``verdict`` (``"best"``, ``"tied"``,
        ``"under-covers"``, ``""``), ``flag`` (why its base did not converge, or ``""``).
    """
    b = rk.sel(dataset=dataset, confidence_level=level)
    rows = []
    for p in b["pipeline"].values:
        x = b.sel(pipeline=p)
        if np.isnan(float(x["coverage"])):
            continue  # not scored at this level (failed)
        rank = int(x["width_rank"])
        verdict = (
            "under-covers"
            if bool(x["undercovers"])
            else _group_verdict(x)
            if _group_short(x)
            else "best"
            if rank == 1
            else "tied"
            if bool(x["width_tied"])
            else ""
            if rank
            else "incomplete"
        )
        rows.append(
            dict(
                rank=rank,
                pipeline=str(p),
                coverage=float(x["coverage"]),
                coverage_se=float(x["coverage_se"]),
                width=float(x["width"]),
                diff=float(x["width_diff"]),
                dse=float(x["width_dse"]),
                verdict=verdict,
                flag=_flag_of(x),
            )
        )
    return sorted(rows, key=lambda r: (r["rank"] == 0, r["rank"]))


def _group_short(x: xr.Dataset) -> bool:
    """Whether one (dataset, level, pipeline) selection's worst group under-covers (False without groups)."""
    return "group_undercovers" in x and bool(x["group_undercovers"])


def _group_verdict(x: xr.Dataset) -> str:
    """The verdict of a pipeline ruled out by its worst group: which group, its coverage and se."""
    return (
        f"worst group {x['worst_group'].item()!s} under-covers "
        f"({_fmt(float(x['worst_group_coverage']))} ± {_fmt(float(x['worst_group_se']))})"
    )


def format_ranking(rk: xr.Dataset, repetitions: int | None = None) -> str:
    """The ranking as text: per data set, the score ranking then the width ranking at each level.

    Parameters
    ----------
    rk : xarray.Dataset
        From :func:`rank_results`.
    repetitions : int, optional
        Shown in the heading.

    Returns
    -------
    str

    References
    ----------
    The rules: the module docstring and the comparison-spec reference, :doc:`/spec`.

    Examples
    --------
    >>> import xarray as xr
    >>> from calibprob.compare.ranking import format_ranking, rank_results
    >>> res = xr.Dataset(
    ...     {"nll": (("dataset", "repetition", "calibrator"), [[[1.0, 1.5], [2.0, 2.4], [3.0, 3.6]]])},
    ...     coords={"dataset": ["d"], "repetition": [0, 1, 2], "calibrator": ["a", "b"]})
    >>> print(format_ranking(rank_results(res)).splitlines()[0])
    == d: ranking by nll (lower is better), paired over repetitions
    """
    by = rk.attrs.get("rank_by", "nll")
    reps = f"{repetitions} " if repetitions else ""
    lines = []
    for d in rk["dataset"].values:
        lines.append(f"== {d}: ranking by {by} (lower is better), paired over {reps}repetitions")
        lines += _score_lines(rk, d, by)
        if "width_rank" in rk:
            lines += _interval_lines(rk, d)
        if "long_run_error_rank" in rk:
            lines += _long_run_lines(rk, d)
        flags = rk["base_flag"].sel(dataset=d) if "base_flag" in rk else None
        lines += ["   " + note for note in flag_notes(flags)]
        lines.append("")
    return "\n".join(lines)


def _verdict(r: dict) -> str:
    """The last column: the verdict, and the not-converged marker when the base is flagged."""
    return ", ".join(t for t in (r["verdict"], NOT_CONVERGED if r["flag"] else "") if t)


def _score_lines(rk: xr.Dataset, d: str, by: str) -> list[str]:
    """The score ranking of data set ``d`` as text lines."""
    if not int(rk["score_n"].sel(dataset=d).max()):
        return [f"   no pipeline has {by} scores (intervals-only methods, or every task failed)"]
    rows = [["rank", "pipeline", f"{by} ± se", "Δ to best", "dse", ""]]
    for r in score_rows(rk, d):
        if r["rank"] == 0:
            rows.append(["-", r["pipeline"], "", "", "", r["note"]])
            continue
        se = "" if np.isnan(r["se"]) else f" ± {_fmt(r['se'])}"
        best = r["verdict"] == "best"
        rows.append(
            [
                str(r["rank"]),
                r["pipeline"],
                _fmt(r["mean"]) + se,
                "—" if best else _fmt(r["diff"]),
                "—" if best else _fmt_dse(r["dse"]),
                _verdict(r),
            ]
        )
    return _table(rows, right={0, 3, 4}) + [
        f"   (tied: Δ ≤ {TIE_SE:g} dse, the paired standard error of Δ over repetitions)"
    ]


def _interval_lines(rk: xr.Dataset, d: str) -> list[str]:
    """The width ranking of data set ``d`` at every confidence level as text lines."""
    lines = [
        f"-- intervals at each level: narrowest first among those whose coverage is not short "
        f"of nominal by > {TIE_SE:g} se"
    ]
    rows = [["level", "rank", "pipeline", "coverage ± se", "width", "Δ to best", "dse", ""]]
    for c in rk["confidence_level"].values:
        for k, r in enumerate(interval_rows(rk, d, c)):
            best = r["verdict"] == "best"
            ranked = r["rank"] > 0
            rows.append(
                [
                    f"{c:g}" if k == 0 else "",
                    str(r["rank"]) if ranked else "-",
                    r["pipeline"],
                    f"{_fmt(r['coverage'])} ± {_fmt(r['coverage_se'])}",
                    _fmt(r["width"]),
                    "—" if best or not ranked else _fmt(r["diff"]),
                    "—" if best or not ranked else _fmt_dse(r["dse"]),
                    _verdict(r),
                ]
            )
    lines += _table(rows, right={0, 1, 4, 5, 6})
    if "group_undercovers" in rk and bool(rk["group_undercovers"].sel(dataset=d).any()):
        lines.append(
            f"   (worst group under-covers: the lowest group coverage, pooled over repetitions, is short of "
            f"nominal by > {TIE_SE:g} se; never named best for width)"
        )
    return lines


def _long_run_lines(rk: xr.Dataset, d: str) -> list[str]:
    """A time split's ranking by long-run coverage error |coverage - c| at every level, as text lines."""
    lines = ["-- long-run coverage error |coverage - nominal| along the horizon (time split): smallest first"]
    rows = [["level", "rank", "pipeline", "|error|", "Δ to best", "dse"]]
    for c in rk["confidence_level"].values:
        x = rk.sel(dataset=d, confidence_level=c)
        order = np.argsort(np.where(x["long_run_error_rank"].values > 0, x["long_run_error_rank"].values, 10**9))
        for k, i in enumerate(order):
            rank = int(x["long_run_error_rank"].values[i])
            best = rank == 1
            rows.append(
                [
                    f"{c:g}" if k == 0 else "",
                    str(rank) if rank > 0 else "-",
                    str(x["pipeline"].values[i]),
                    _fmt(float(x["long_run_error_mean"].values[i])),
                    "—" if best or rank == 0 else _fmt(float(x["long_run_error_diff"].values[i])),
                    "—" if best or rank == 0 else _fmt_dse(float(x["long_run_error_dse"].values[i])),
                ]
            )
    return lines + _table(rows, right={0, 1, 3, 4, 5})
