"""The ``calibprob`` command.

::

    calibprob datasets                          list the bundled data sets
    calibprob compare models/quickstart.toml    run a comparison spec, print the table
        [--out results/quickstart.nc] [--workers N | --scheduler ADDRESS] [--no-progress]
    calibprob report results/quickstart.nc      print the table and ranking again and write plots
        [--plots DIR] [--html report.html] [--rank-by nll|crps]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

# `compare` itself is light: its runner and report load on first use (calibprob.compare._LAZY), so
# `calibprob --help` and `calibprob datasets` do not import every method's code
from calibprob import compare
from calibprob.bo.cli import add_bo_parser
from calibprob.compare.ranking import RANK_SCORES, format_ranking, rank_results
from calibprob.compare.spec import SpecError, load_spec
from calibprob.compare.spec.model import _capped
from calibprob.datasets import list_datasets
from calibprob.runs import OutputError, check_output_path, check_scheduler_address, failure_table, tune_malloc

if TYPE_CHECKING:  # the CLI loads pandas and xarray only when a command needs them
    import pandas as pd
    import xarray as xr

__all__ = ["main"]


def _cmd_datasets(args: argparse.Namespace) -> int:
    table = list_datasets()
    print(table if isinstance(table, str) else _render(table))
    return 0


def _render(rows: pd.DataFrame | Iterable[Mapping[str, object]]) -> str:
    """Render a list of dicts (or a pandas-like table) as aligned text."""
    if hasattr(rows, "to_string"):
        return rows.to_string(index=False)
    rows = list(rows)
    if not rows:
        return "(none)"
    cols = list(rows[0])
    cells = [cols] + [[str(r[c]) for c in cols] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    lines = ["  ".join(t.ljust(w) for t, w in zip(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _ran_as(results: xr.Dataset) -> list[str]:
    """One line per method that ran as its scalable form (the results' ``ran_as``), naming it and why."""
    if "ran_as" not in results:
        return []
    lines: dict = {}
    da = results["ran_as"]
    for cal in da["calibrator"].values:
        for note in da.sel(calibrator=cal).values.ravel():
            if str(note):
                lines[f"{cal}: {note}"] = None
    return list(lines)


def _cmd_compare(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    if args.repetitions is not None:
        if args.repetitions < 1:
            raise SystemExit(
                f"calibprob compare: --repetitions must be a positive integer; got "
                f"{args.repetitions}. Give e.g. --repetitions 5, or omit it to use the spec's "
                f"{spec.repetitions}."
            )
        _capped("repetitions", args.repetitions, "--repetitions")
        # the first N repetitions of the spec (same splits); extending later reuses them
        spec = dataclasses.replace(spec, repetitions=args.repetitions)
    if args.rank_by is not None:  # display only: not in the fingerprint, finished tasks are reused
        spec = dataclasses.replace(spec, rank_by=args.rank_by)
    out = Path(args.out) if args.out else Path("results") / f"{Path(args.spec).stem}.nc"
    check_output_path(out)  # before any task runs
    if args.scheduler is not None:
        try:
            check_scheduler_address(args.scheduler)
        except ValueError as err:
            raise SpecError(f"--scheduler: {err}") from None
    where = (
        f"Dask cluster at {args.scheduler}"
        if args.scheduler
        else f"LocalCluster with {args.workers} workers"
        if args.workers
        else "serially"
    )
    n_tasks = len(spec.datasets) * spec.repetitions
    print(
        f"calibprob compare: {spec.name}: {len(spec.datasets)} data set(s) × {spec.repetitions} "
        f"repetition(s) = {n_tasks} tasks, {len(spec.methods)} calibrator(s), running {where}",
        file=sys.stderr,
    )
    for (dataset, base_name), line in compare.gp_choices(spec).items():  # kind = "gp": exact or sparse, and why
        print(
            f"  {dataset}{'' if base_name is None else f' / base {base_name}'}: kind 'gp' runs as the {line}",
            file=sys.stderr,
        )
    t0 = time.perf_counter()
    tree = compare.run_comparison(
        spec, out, workers=args.workers, scheduler=args.scheduler, progress=not args.no_progress
    )
    elapsed = time.perf_counter() - t0
    results = tree.to_dataset()
    failed = compare.failed_tasks(results)
    task_failed = results["task_error"].values.astype(str) != "" if "task_error" in results else None
    all_failed = task_failed is not None and bool(task_failed.all())
    if not all_failed:
        scored = results["error"].values.astype(str) == "" if "error" in results else None
        all_failed = scored is not None and not bool(scored.any())
    if not all_failed:
        print(compare.format_table(results, list(spec.metrics)))
        print(format_ranking(tree["ranking"].to_dataset(), spec.repetitions))
    for line in _ran_as(results):  # a method refused at its defaults ran as its scalable form: never silently
        print(line, file=sys.stderr)
    if failed:
        n_tasks_failed = int(task_failed.sum()) if task_failed is not None else 0
        print(
            f"\n{len(failed)} failure(s) ({n_tasks_failed} of {n_tasks} task(s) failed as a whole; "
            "a failed task is retried on the next run):",
            file=sys.stderr,
        )
        print(failure_table(failed), file=sys.stderr)
    print(f"wrote {out} in {elapsed:.1f} s", file=sys.stderr)
    if all_failed:
        print(
            "calibprob: error: every task failed, no scores to show; fix the cause above and run the "
            "same command again.",
            file=sys.stderr,
        )
        return 1
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    try:
        results = compare.load_results(args.results)
    except ValueError as err:
        print(f"calibprob: error: {err}", file=sys.stderr)
        return 2
    metrics = None
    spec_text = results.attrs.get("spec")
    if spec_text:
        try:
            metrics = tomllib.loads(spec_text).get("metrics")
        except tomllib.TOMLDecodeError:
            metrics = None
    print(compare.format_table(results, metrics or ["ece", "nll", "crps", "std", "rmse", "coverage", "width"]))
    rank_by = args.rank_by or _spec_key(results, "rank_by") or "nll"
    timing = [v for v in ("fit_time", "base_fit_time", "base_predict_time") if v in results]
    print(format_ranking(rank_results(results.drop_vars(timing), rank_by), results.sizes.get("repetition")))
    paths = []
    try:
        if args.html:
            paths.append(compare.write_html(Path(args.results), args.html, rank_by=rank_by, metrics=metrics))
        if args.plots or not args.html:  # --html alone writes only the one file
            outdir = (
                Path(args.plots)
                if args.plots
                else Path(args.results).with_suffix("").with_name(Path(args.results).stem + "_plots")
            )
            paths += compare.write_plots(results, outdir)
    except ValueError as err:
        print(f"calibprob: error: {err}", file=sys.stderr)
        return 2
    for p in paths:
        print(f"wrote {p}", file=sys.stderr)
    return 0


def _spec_key(results: xr.Dataset, key: str) -> str | None:
    """A top-level key of the spec stored in a results file (None if absent or unreadable)."""
    try:
        return tomllib.loads(results.attrs.get("spec", "")).get(key)
    except tomllib.TOMLDecodeError:
        return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="calibprob",
        description="Calibrated and sharp regression uncertainty: compare calibrators on data.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("datasets", help="list the bundled data sets")
    p.set_defaults(func=_cmd_datasets)

    p = sub.add_parser("compare", help="run a comparison spec (TOML) and print the table")
    p.add_argument("spec", help="path to a spec, e.g. models/quickstart.toml")
    p.add_argument("--out", help="results netCDF file (default results/<spec>.nc)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--workers", type=int, help="run on a Dask LocalCluster with N worker processes")
    group.add_argument("--scheduler", help="address of an existing Dask scheduler, e.g. tcp://127.0.0.1:8786")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument(
        "--repetitions",
        type=int,
        metavar="N",
        help="run the first N repetitions instead of the spec's number (same splits; "
        "a later run with more repetitions reuses the finished ones)",
    )
    p.add_argument(
        "--rank-by",
        choices=RANK_SCORES,
        help="proper score ranking the calibrators of each data set (default the spec's rank_by, else nll)",
    )
    p.set_defaults(func=_cmd_compare)

    p = sub.add_parser("report", help="print the table of a results file and write plots or an HTML report")
    p.add_argument("results", help="a results file written by `calibprob compare`")
    p.add_argument("--plots", help="folder for the PNG plots (default <results>_plots/, unless --html is given)")
    p.add_argument(
        "--html", metavar="FILE", help="write one self-contained HTML report (plots embedded, no external files)"
    )
    p.add_argument(
        "--rank-by", choices=RANK_SCORES, help="proper score of the ranking (default the spec's rank_by, else nll)"
    )
    p.set_defaults(func=_cmd_report)

    add_bo_parser(sub)
    return parser


def _one_line(err: BaseException) -> str:
    """An exception as one line with its fix (OSError, HDF5 and Dask connection errors)."""
    text = " ".join(str(err).split()) or type(err).__name__
    if isinstance(err, ConnectionError):
        return text
    if isinstance(err, OSError):
        name = getattr(err, "filename", None)
        reason = err.strerror or text
        if name is not None:
            return (
                f"{name}: {reason}. Check the path and that its folder is writable with free space, "
                "or choose another --out."
            )
        return f"{text}. Check the paths and free disk space."
    if type(err).__module__.startswith(("h5py", "h5netcdf")):
        return (
            f"HDF5 error: {text}. The file may be damaged or not netCDF, or the disk full; remove it "
            "or choose another --out."
        )
    return text


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``calibprob`` console script.

    Errors in the user's input or environment (a bad spec or option, an
    unwritable or unsafe output, a full disk, an unreachable Dask scheduler)
    end with one line ``calibprob: error: ...`` naming the fix and exit code 2,
    never with a traceback. ``compare`` and ``bo`` exit 1 when every task failed.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "workers", None) is not None and args.workers < 1:
        parser.error(f"--workers must be >= 1; got {args.workers}")
    try:
        return args.func(args)
    except (SpecError, OutputError) as err:
        print(f"calibprob: error: {err}", file=sys.stderr)
        return 2
    except (OSError, TimeoutError) as err:
        print(f"calibprob: error: {_one_line(err)}", file=sys.stderr)
        return 2
    except Exception as err:
        if type(err).__module__.startswith(("h5py", "h5netcdf")):
            print(f"calibprob: error: {_one_line(err)}", file=sys.stderr)
            return 2
        raise


def console_main() -> int:
    """The ``calibprob`` console script: :func:`main` in a process of its own, tuned for GP work.

    The process gets the workers' glibc malloc settings
    (:func:`calibprob.runs.tune_malloc`): it fits the first bases itself (while the
    workers start) or the whole comparison (serially), and with glibc's dynamic thresholds
    whether its GP matrices were reused or faulted in afresh varied from run to run.
    Only here, not in :func:`main`, so that calling ``main`` from Python (a notebook, the
    tests) leaves that process's allocator as it was.
    """
    tune_malloc()
    return main()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(console_main())
