"""Comparison tables (mean ± standard error, best marked) and report plots."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

__all__ = ["summary", "format_table", "write_plots", "load_results", "LOWER_IS_BETTER"]

#: Metrics where smaller is better. Coverage is judged by its distance to the nominal level.
LOWER_IS_BETTER = {"ece", "iae", "nll", "crps", "pinball", "mse", "rmse", "std", "width",
                   "ueb_violation", "ueb_width"}


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
    from calibprob._executor import _is_netcdf

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
        raise ValueError(f"{str(path)!r} could not be read as a netCDF-4 file ({type(err).__name__}: {err}). "
                         f"{hint}") from None
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


def _rows(results: xr.Dataset, metrics) -> list[tuple[str, str, float | None]]:
    """(row label, variable, confidence level or None) for every metric row."""
    rows = []
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
    metrics = metrics or results.attrs.get("metrics") or [
        v for v in results.data_vars if results[v].dtype.kind == "f" and "calibrator" in results[v].dims
    ]
    rows = _rows(results, metrics)
    means, ses, ns, bests = [], [], [], []
    for _, var, c in rows:
        da = results[var]
        if c is not None:
            da = da.sel(confidence_level=c)
        extra = [d for d in da.dims if d not in ("dataset", "calibrator", "repetition")]
        if extra:  # curves are not table rows
            continue
        n = da.count("repetition")
        mean = da.mean("repetition", skipna=True)
        se = da.std("repetition", ddof=1, skipna=True) / np.sqrt(n.where(n > 0))
        if var == "coverage":
            key = np.abs(mean - c)
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
        best = key == key.min("calibrator", skipna=True)
        means.append(mean)
        ses.append(se)
        ns.append(n)
        bests.append(best)
    labels = [r[0] for r in rows if not [d for d in results[r[1]].dims
                                          if d not in ("dataset", "calibrator", "repetition", "confidence_level")]]
    cat = lambda xs: xr.concat(xs, dim=xr.DataArray(labels, dims="row"), coords="minimal",  # noqa: E731
                               compat="override")
    return xr.Dataset({"mean": cat(means), "se": cat(ses), "n": cat(ns), "best": cat(bests)})


def _fmt(x: float) -> str:
    if not np.isfinite(x):
        return "nan"
    a = abs(x)
    if a != 0 and (a < 1e-3 or a >= 1e4):
        return f"{x:.2e}"
    return f"{x:.4f}" if a < 1 else f"{x:.3f}"


def format_table(results: xr.Dataset, metrics=None) -> str:
    """The comparison table as text: one block per data set, mean ± s.e., best marked ``*``.

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
    s = summary(results, metrics)
    cal = [str(c) for c in s["calibrator"].values]
    lines = []
    reps = results.sizes.get("repetition", 1)
    for d in s["dataset"].values:
        block = s.sel(dataset=d)
        cells = [[""] + cal]
        for r in block["row"].values:
            row = [str(r)]
            for c in cal:
                cell = block.sel(row=r, calibrator=c)
                m, e = float(cell["mean"]), float(cell["se"])
                txt = _fmt(m) + ("" if not np.isfinite(e) else f" ± {_fmt(e)}")
                row.append(("*" if bool(cell["best"]) else " ") + txt)
            cells.append(row)
        widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
        lines.append(f"== {d}  (mean ± s.e. over {reps} repetitions; * = best; "
                     "a width only among intervals that do not under-cover)")
        for k, row in enumerate(cells):
            lines.append("  ".join(txt.ljust(w) if i == 0 else txt.rjust(w) for i, (txt, w) in enumerate(zip(row, widths))))
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
        lines.append("")
    if "error" in results:
        errs = results["error"].values
        failed = [(str(d), int(r), str(c), str(errs[i, j, k]).splitlines()[0])
                  for i, d in enumerate(results["dataset"].values)
                  for j, r in enumerate(results["repetition"].values)
                  for k, c in enumerate(results["calibrator"].values)
                  if str(errs[i, j, k])] if errs.ndim == 3 else []
        if failed:
            lines.append(f"{len(failed)} failed (dataset, repetition, calibrator) runs:")
            for d, r, c, msg in failed[:20]:
                lines.append(f"  {d} rep {r} {c}: {msg}")
    return "\n".join(lines)


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

    from calibprob.plots import draw_coverage, draw_reliability

    from calibprob._executor import inside, safe_name

    outdir = Path(outdir)
    if outdir.exists() and not outdir.is_dir():
        raise ValueError(f"outdir {str(outdir)!r} exists and is not a folder; give a folder for the PNG files.")
    # Data-set names become file names: sanitised ("../x" -> "___x") and kept inside outdir;
    # two names equal once sanitised would overwrite each other's plots.
    stems: dict = {}
    for d in results["dataset"].values:
        stem = safe_name(d)
        if stem in stems:
            raise ValueError(
                f"data-set names {stems[stem]!r} and {str(d)!r} give the same plot file name {stem!r}; "
                "rename one in the spec."
            )
        stems[stem] = str(d)
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    cals = [str(c) for c in results["calibrator"].values]

    def curve_dim(da):
        return next(x for x in da.dims if x not in ("dataset", "calibrator", "repetition"))

    def save(fig, name):
        path = inside(outdir, name)
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(path)

    for d in results["dataset"].values:
        r = results.sel(dataset=d)
        nrep = r.sizes.get("repetition", 1)
        if "observed_fraction" in r:
            of = r["observed_fraction"]
            lv = of[curve_dim(of)].values
            curves, bands = {}, {}
            for c in cals:
                x = of.sel(calibrator=c)
                m = x.mean("repetition").values
                curves[c] = m
                if nrep > 1:
                    se = (x.std("repetition", ddof=1) / np.sqrt(nrep)).values
                    bands[c] = (m - 2 * se, m + 2 * se)
            fig, ax = plt.subplots(figsize=(5, 5))
            draw_reliability(ax, lv, curves, bands, title=f"Reliability diagram — {d}")
            save(fig, f"{safe_name(d)}_reliability.png")
        if "iae_coverage" in r:
            cov = r["iae_coverage"]
            nominal = cov[curve_dim(cov)].values
            fig, ax = plt.subplots(figsize=(5, 5))
            draw_coverage(ax, nominal, {c: cov.sel(calibrator=c).mean("repetition").values for c in cals},
                          title=f"Coverage of central intervals — {d}")
            save(fig, f"{safe_name(d)}_coverage.png")
        if "ece" in r and "std" in r:
            colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
            fig, ax = plt.subplots(figsize=(5.5, 4.5))
            for i, c in enumerate(cals):
                x, y = r["ece"].sel(calibrator=c), r["std"].sel(calibrator=c)
                if bool(np.isnan(x).all()):
                    continue  # interval-only method: no ECE / STD (the colour slot is kept)
                col = colors[i % len(colors)]
                ax.scatter(x, y, s=12, alpha=0.35, color=col)
                ax.scatter(x.mean(), y.mean(), s=90, marker="D", edgecolor="k", color=col, label=c)
            ax.set(xlabel="ECE (lower = better calibrated)", ylabel="mean predictive STD (lower = sharper)",
                   title=f"Sharpness vs calibration — {d}")
            ax.legend(fontsize=8)
            save(fig, f"{safe_name(d)}_sharpness_calibration.png")
    return written
