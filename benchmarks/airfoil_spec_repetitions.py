"""The airfoil spec's tasks over many repetitions, beside Tibshirani et al. (2019), without writing a results file.

``calibprob compare models/tibshirani2019-airfoil.toml`` runs every method on both data sets and
the 50-shuffle shift diagnostic per task; to check the shifted twin's coverage and median length at
more repetitions than that allows on a shared machine, this runs only ``airfoil-shifted``, only
the chosen methods, with a one-shuffle diagnostic (not reported), for repetitions ``start`` to
``stop - 1`` (the same splits as the full run's). Output: one line per method, mean coverage ± se
and the median over repetitions of each repetition's median length, beside the paper's.

Run::

    python benchmarks/airfoil_spec_repetitions.py --start 0 --stop 220 --methods unweighted oracle logistic
    python benchmarks/airfoil_spec_repetitions.py --start 0 --stop 100 --methods random-forest
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from calibprob.compare import run_task, tasks
from calibprob.compare.spec import load_spec

PAPER = {
    "unweighted": (0.822, 16.08),
    "oracle": (0.909, 20.94),
    "logistic": (0.910, 20.93),
    "random-forest": (0.910, 19.84),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="models/tibshirani2019-airfoil.toml")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--stop", type=int, default=100)
    parser.add_argument("--methods", nargs="+", default=list(PAPER), choices=list(PAPER))
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    tasks.SHIFT_PERMUTATIONS = 1  # the diagnostic is not reported here
    spec = load_spec(args.spec).to_dict()
    spec["methods"] = {k: v for k, v in spec["methods"].items() if k in args.methods}
    spec["repetitions"] = max(spec["repetitions"], args.stop)
    rows: dict[str, list[tuple[float, float]]] = {m: [] for m in args.methods}
    t0 = time.perf_counter()
    for r in range(args.start, args.stop):
        out = run_task(spec, "airfoil-shifted", r)
        for m in args.methods:
            s = out.sel(calibrator=m, confidence_level=0.9).squeeze()
            rows[m].append((float(s["coverage"]), float(s["median_width"])))
    print(f"{args.stop - args.start} repetitions in {time.perf_counter() - t0:.0f} s")
    for m, values in rows.items():
        cov, med = np.array(values).T
        se = cov.std(ddof=1) / np.sqrt(cov.size)
        print(f"{m:14s} coverage {cov.mean():.4f} ± {se:.4f}  median length {np.median(med):.2f}   paper {PAPER[m]}")


if __name__ == "__main__":
    main()
