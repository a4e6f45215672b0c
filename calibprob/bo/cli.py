"""The ``calibprob bo`` subcommand (wired into :mod:`calibprob.cli` with :func:`add_bo_parser`).

::

    calibprob bo --functions forrester ackley six_hump_camel --acquisitions ucb ei \\
        --methods calibrated uncalibrated sharp --seeds 20 --n-init 3 --n-steps 25 \\
        [--eta 0.25] [--refit-every 1] [--workers N | --scheduler ADDRESS] \\
        [--out results/bo.nc] [--plots DIR] [--no-progress]

Prints the Table 1 of Deshpande et al. (2024): minimum found ± s.e., the
fraction of seeds where the calibrated method beats each other method, and
the normalised area under the best-so-far curve.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from calibprob.bo.experiment import METHODS, bo_table, format_bo_table, run_experiment
from calibprob.bo.plots import plot_best_so_far, plot_calibration_error
from calibprob.runs import check_output_path, check_scheduler_address, failure_table, inside, safe_name

__all__ = ["add_bo_parser", "cmd_bo"]


def add_bo_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``bo`` subcommand to an ``argparse`` subparsers object; returns the parser."""
    p = subparsers.add_parser(
        "bo",
        help="calibrated vs uncalibrated Bayesian optimisation on test functions (Table 1)",
        description="Run (calibrated) Bayesian optimisation on named test functions over many "
        "seeds and print the comparison table of Deshpande et al. (2024).",
    )
    p.add_argument(
        "--functions",
        nargs="+",
        default=["forrester"],
        help="test functions (calibprob.datasets.available_functions()), default forrester",
    )
    p.add_argument(
        "--acquisitions",
        nargs="+",
        default=["ucb", "ei"],
        choices=["ucb", "lcb", "ei", "pi"],
        help="acquisition functions (default ucb ei)",
    )
    p.add_argument(
        "--methods",
        nargs="+",
        default=["calibrated", "uncalibrated"],
        choices=list(METHODS),
        help="methods to compare; 'calibrated' (LOO, Algorithm 4) is the reference; 'stanton' runs the "
        "conformal acquisitions of Stanton et al. (cucb for ucb/lcb, cei for ei)",
    )
    p.add_argument("--seeds", type=int, default=20, help="number of seeds (0..N-1), default 20")
    p.add_argument(
        "--n-init", type=int, nargs="+", default=[3], help="initial design size: one value, or one per function"
    )
    p.add_argument("--n-steps", type=int, default=25, help="BO steps after the initial design")
    p.add_argument("--eta", type=float, default=0.25, help="OSD step size of the recalibrator (> 0)")
    p.add_argument("--kappa", type=float, default=2.0, help="confidence-bound weight (level Phi(-kappa))")
    p.add_argument("--refit-every", type=int, default=1, help="refit GP hyperparameters every k steps")
    p.add_argument(
        "--interval-level",
        type=float,
        help="log each query's interval at this level and whether it covered (the conformal methods: 0.9)",
    )
    p.add_argument(
        "--design-lambda",
        type=float,
        default=10.0,
        help="inverse temperature of the conformal methods' softmax design (>= 0)",
    )
    p.add_argument("--out", help="results netCDF (finished runs kept in <out>.parts/ for resuming)")
    p.add_argument("--plots", help="folder for best-so-far / calibration-error PNGs")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--workers", type=int, help="run on a Dask LocalCluster with N worker processes")
    group.add_argument("--scheduler", help="address of an existing Dask scheduler, e.g. tcp://127.0.0.1:8786")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=cmd_bo)
    return p


def cmd_bo(args: argparse.Namespace) -> int:
    """Handler of ``calibprob bo``: run the grid, print the table (and failures), optionally write plots."""
    try:
        config = _check_args(args)
        print(
            f"calibprob bo: {len(args.functions)} function(s) × {len(args.acquisitions)} acquisition(s) × "
            f"{len(args.methods)} method(s) × {args.seeds} seeds, running {_where(args)}",
            file=sys.stderr,
        )
        t0 = time.perf_counter()
        ds = run_experiment(
            args.functions,
            args.acquisitions,
            args.methods,
            args.seeds,
            out=args.out,
            workers=args.workers,
            scheduler=args.scheduler,
            progress=not args.no_progress,
            **config,
        )
    except (ValueError, TypeError) as err:
        print(f"calibprob: error: {err}", file=sys.stderr)
        return 2
    if not _print_outcome(ds):
        return 1
    if args.plots:
        for path in _write_plots(ds, Path(args.plots)):
            print(f"wrote {path}", file=sys.stderr)
    msg = f"done in {time.perf_counter() - t0:.1f} s"
    print(msg + (f"; wrote {args.out}" if args.out else ""), file=sys.stderr)
    return 0


def _check_args(args: argparse.Namespace) -> dict[str, Any]:
    """Validate the command line before any task runs; the keyword options of :func:`run_experiment`."""
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be >= 1; got {args.workers}")
    if args.seeds < 1:
        raise ValueError(f"--seeds must be a positive number of seeds; got {args.seeds}. Give e.g. --seeds 5.")
    n_init = list(args.n_init)
    if len(n_init) not in (1, len(args.functions)):
        raise ValueError(f"--n-init takes one value or one per function ({len(args.functions)}); got {len(n_init)}.")
    if args.scheduler is not None:
        check_scheduler_address(args.scheduler)
    if args.out:
        check_output_path(args.out)  # before any task runs
    if not np.isfinite(args.design_lambda) or args.design_lambda < 0:
        raise ValueError(
            f"design_lambda (--design-lambda) must be a finite number >= 0; got {args.design_lambda!r}. Pass e.g. 10."
        )
    config: dict[str, Any] = {
        "n_init": int(n_init[0]),
        "n_steps": int(args.n_steps),
        "eta": float(args.eta),
        "kappa": float(args.kappa),
        "refit_every": int(args.refit_every),
    }
    if args.interval_level is not None:
        config["interval_level"] = float(args.interval_level)
    if any(m.startswith("conformal") or m == "stanton" for m in args.methods):
        config["design_lambda"] = float(args.design_lambda)
    if len(n_init) > 1:
        config["n_init_per_function"] = dict(zip(args.functions, map(int, n_init)))
    return config


def _where(args: argparse.Namespace) -> str:
    """Where the runs execute, for the banner."""
    if args.scheduler:
        return f"Dask cluster at {args.scheduler}"
    return f"LocalCluster with {args.workers} workers" if args.workers else "serially"


def _failed_runs(ds: xr.Dataset) -> tuple[list[tuple[str, str]], int]:
    """``(label, message)`` of every failed run, and the number of runs that ran at all."""
    if "error" not in ds:
        return [], 0
    errors = ds["error"].transpose("function", "acquisition", "method", "seed")
    failed = []
    for idx in np.ndindex(errors.shape):
        msg = str(errors.values[idx])
        if msg not in ("", "nan"):
            f, a, m, s = (errors[d].values[i] for d, i in zip(errors.dims, idx))
            failed.append((f"{f}/{a}/{m}/seed {int(s)}", msg))
    return failed, int(np.sum(ds["error"].values.astype(str) != "nan"))


def _print_outcome(ds: xr.Dataset) -> bool:
    """Print the table (stdout) and the failures (stderr); False when every run failed."""
    failed, ran = _failed_runs(ds)
    all_failed = "best_so_far" not in ds or not np.isfinite(ds["best_so_far"].values).any()
    if not all_failed:
        print(format_bo_table(bo_table(ds)))
    if failed:
        print(
            f"\n{len(failed)} of {ran} run(s) failed (failed runs are retried on the next run with --out):",
            file=sys.stderr,
        )
        print(failure_table(failed), file=sys.stderr)
    if all_failed:
        print(
            "calibprob: error: every run failed, no table to show; fix the cause above and run again.", file=sys.stderr
        )
    return not all_failed


def _write_plots(ds: xr.Dataset, outdir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in ds["function"].values:
        for a in ds["acquisition"].values:
            fig, axes = plt.subplots(1, 2, figsize=(11, 4))
            plot_best_so_far(ds, function=f, acquisition=a, ax=axes[0])
            plot_calibration_error(ds, function=f, acquisition=a, ax=axes[1])
            fig.tight_layout()
            path = inside(outdir, f"bo_{safe_name(f)}_{safe_name(a)}.png")
            fig.savefig(path, dpi=110)
            plt.close(fig)
            paths.append(path)
    return paths
