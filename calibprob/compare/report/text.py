"""The comparison table as text: mean ± standard error over repetitions, the best marked."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import xarray as xr

from calibprob.compare.ranking import convergence_flags, flag_notes, undercovers
from calibprob.compare.ranking.text import _fmt
from calibprob.compare.report.results import _flat

#: Metrics where smaller is better. Coverage is judged by its distance to the nominal level.
LOWER_IS_BETTER = {
    "ece",
    "iae",
    "nll",
    "crps",
    "pinball",
    "mse",
    "rmse",
    "std",
    "width",
    "median_width",
    "ueb_violation",
    "ueb_width",
}


def _rows(results: xr.Dataset, metrics: Iterable[str]) -> list[tuple[str, str, float | None]]:
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


def summary(results: xr.Dataset, metrics: Sequence[str] | None = None) -> xr.Dataset:
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
        ``divergences`` of ``pymc-linear``), also ``base_flag(dataset, calibrator)``:
        why that column's base did not converge, or ``""``
        (:func:`calibprob.compare.ranking.convergence_flags`).

    References
    ----------
    The comparison-spec reference: :doc:`/spec`.

    Examples
    --------
    :doc:`/examples/comparison` runs one small comparison, once, and shows what
    ``summary`` returns.

    """
    results = _flat(results)
    metrics = (
        metrics
        or results.attrs.get("metrics")
        or [v for v in results.data_vars if results[v].dtype.kind == "f" and "calibrator" in results[v].dims]
    )
    stats = [_row_stats(results, var, c) for _, var, c in _rows(results, metrics)]
    labels = [label for (label, _, _), st in zip(_rows(results, metrics), stats) if st is not None]
    kept = [st for st in stats if st is not None]

    def cat(xs: list[xr.DataArray]) -> xr.DataArray:
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
    if var in ("width", "median_width") and c is not None and "coverage" in results:
        # never the narrowest interval that under-covers: coverage short of nominal by more
        # than 2 standard errors (calibprob.compare.ranking.undercovers) rules a width out
        n_test = results["n_test"] if "n_test" in results else xr.full_like(da, np.nan)
        key = key.where(~undercovers(results["coverage"].sel(confidence_level=c), n_test, c))
    return {"mean": mean, "se": se, "n": n, "best": key == key.min("calibrator", skipna=True)}


def format_table(results: xr.Dataset, metrics: Sequence[str] | None = None) -> str:
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
    :doc:`/examples/comparison` runs one small comparison, once, and shows what
    ``format_table`` returns.

    """
    results = _flat(results)
    s = summary(results, metrics)
    lines = []
    reps = results.sizes.get("repetition", 1)
    for d in s["dataset"].values:
        lines += _table_block(s.sel(dataset=d), d, reps)
    return "\n".join(lines + _failed_lines(results))


def _table_block(block: xr.Dataset, d: str, reps: int) -> list[str]:
    """One data set of the table: heading, convergence notes, a row per metric, a blank line."""
    flags = block["base_flag"] if "base_flag" in block else None
    cal = [str(c) for c in block["calibrator"].values]
    head = [c + (" !" if flags is not None and str(flags.sel(calibrator=c).item()) else "") for c in cal]
    cells = [[""] + head]
    for r in block["row"].values:
        row = [str(r)]
        for c in cal:
            cell = block.sel(row=r, calibrator=c)
            m, e = float(cell["mean"]), float(cell["se"])
            # no value (an interval-only method's NLL/CRPS, a failed task): a dash, as in the ranking
            txt = "—" if np.isnan(m) else _fmt(m) + ("" if not np.isfinite(e) else f" ± {_fmt(e)}")
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
