"""The comparison runner: 2 local Dask workers vs serial, and the quickstart's cold/warm wall time.

Prints, measured side by side on this machine (absolute times drift on shared
machines; the ratios are the result):

* a 40-task spec (4 data sets x 10 repetitions, GP base, J+GP, isotonic and
  split-conformal calibrators) run serially and on a ``LocalCluster`` with 2
  worker processes: wall times, the speed-up (target >= 1.6x) and whether the
  two results files hold identical metrics;
* a one-repetition spec (GP base on 800 red-wine rows; CV+ with 10 folds, the sharp GP
  ``scaled``, GP-Beta and five cheap calibrators) run serially and with ``--workers 2``,
  which then schedules one base-fit stage, one task per method and one per CV+ refit
  (``granularity="auto"``): wall times, the speed-up (target >= 1.6x) and whether the
  results are identical (the same function as ``bench_scale.py --part workers``);
* ``calibprob compare models/quickstart.toml`` as a user runs it (a fresh
  process each time): cold, with an empty PyTensor compile cache, and warm,
  with the cache the cold run filled (targets <= 90 s cold, <= 20 s warm).

Run::

    .venv/bin/python benchmarks/bench_compare.py [--skip-workers] [--skip-quickstart]

Needs two idle cores for a meaningful speed-up.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import xarray as xr

REPO = Path(__file__).resolve().parents[1]
CLI = Path(sys.executable).parent / "calibprob"

SPEC_40 = """
name = "bench-40"
datasets = ["boston", "diabetes", "concrete", "auto_mpg"]
repetitions = 10
seed = 1
standardize = true
confidence_level = [0.9]

[split]
train = 0.6
calibrate = 0.2
test = 0.2

[base]
kind = "gp"
kernel = "se"

[methods.base]
kind = "base"

[methods."J+GP"]
kind = "jackknife-plus-gp"

[methods.isotonic]
kind = "isotonic"
extrapolate = true

[methods.split]
kind = "split-conformal"
score = "normalized"
"""


def run_cli(args, env=None) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [str(CLI), *args], check=True, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return time.perf_counter() - t0


def bench_workers(tmp: Path) -> None:
    spec = tmp / "bench40.toml"
    spec.write_text(SPEC_40)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    # one untimed warm-up so that neither timed run pays the PyTensor compile
    run_cli(["compare", str(spec), "--out", str(tmp / "warmup.nc"), "--no-progress"], env)
    t_serial = run_cli(["compare", str(spec), "--out", str(tmp / "serial.nc"), "--no-progress"], env)
    t_dask = run_cli(["compare", str(spec), "--out", str(tmp / "dask.nc"), "--workers", "2", "--no-progress"], env)
    a = xr.open_datatree(tmp / "serial.nc", engine="h5netcdf").to_dataset().load()
    b = xr.open_datatree(tmp / "dask.nc", engine="h5netcdf").to_dataset().load()
    same = a.identical(b)
    print(f"40-task spec, serial                 {t_serial:8.1f} s wall")
    print(f"40-task spec, LocalCluster 2 workers {t_dask:8.1f} s wall  (includes cluster start-up)")
    print(
        f"speed-up 2 workers / serial          {t_serial / t_dask:8.2f} x   (target >= 1.6)   results identical: {same}"
    )


def bench_one_repetition() -> None:
    """The one-repetition figure: the same spec and measurement as ``bench_scale.py --part workers``."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_scale import SPEC_WORKERS, workers_main

    workers_main(SPEC_WORKERS, label="one-repetition spec")


def bench_quickstart(tmp: Path) -> None:
    cache = tmp / "pytensor-cache"
    env = dict(os.environ, PYTENSOR_FLAGS=f"compiledir={cache}")
    out = tmp / "qs.nc"
    times = []
    for label in ("cold (empty PyTensor cache)", "warm (cache filled)"):
        for p in (out, out.with_name(out.name + ".parts")):
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        t = run_cli(["compare", "models/quickstart.toml", "--out", str(out), "--no-progress"], env)
        times.append(t)
        print(f"quickstart {label:28s} {t:8.1f} s wall")
    print(
        f"quickstart targets: cold <= 90 s ({'met' if times[0] <= 90 else 'MISSED'}), "
        f"warm <= 20 s ({'met' if times[1] <= 20 else 'MISSED'})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-workers", action="store_true")
    parser.add_argument("--skip-quickstart", action="store_true")
    parser.add_argument("--skip-one-rep", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if not args.skip_quickstart:
            bench_quickstart(tmp)
        if not args.skip_one_rep:
            bench_one_repetition()
        if not args.skip_workers:
            bench_workers(tmp)


if __name__ == "__main__":
    main()
