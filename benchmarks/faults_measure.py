"""Measured peak memory and time of the exact GP's n x n steps (issue 28: honest estimates).

Each step runs in a fresh process on the synthetic set of ``make_faults_data.py`` with ``n`` training rows
(and ``n / 3`` calibration and test rows, the 0.6 / 0.2 / 0.2 split of the faults specs, standardised). A
thread samples the resident size (``/proc/self/statm``) every 2 ms; the figure is its peak during the step
minus its value just before, so the fitted base the step starts from is not counted (the worker's budget,
:func:`calibprob._core.memory.memory_budget`, already subtracts what the process holds). Printed per step:
the peak, the peak over one float64 ``n x n`` array (the coefficient of :data:`calibprob.runs.faults.N_BY_N`),
the seconds, this process's Cholesky rate (:func:`calibprob.runs.faults.factorisation_rate`) and the
seconds in ``n^3/3``-flop factorisations at that rate (the count of :data:`calibprob.runs.faults.COST`).

Run (single process, one thread)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/faults_measure.py --n 1000 2000 3000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

STEPS = (
    "fit",
    "factorise",
    "loo",
    "cv-plus-refit",
    "cv-plus",
    "jackknife-plus-gp",
    "full-conformal-gp",
    "sharp-gp",
    "sharp-gp-3",
)


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _Peak:
    """Peak resident size while the ``with`` block runs, sampled every 2 ms in a thread."""

    def __enter__(self):
        self.start = _rss()
        self.peak = self.start
        self._stop = False
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self):
        while not self._stop:
            self.peak = max(self.peak, _rss())
            time.sleep(0.002)

    def __exit__(self, *exc):
        self._stop = True
        self._thread.join()
        self.peak = max(self.peak, _rss())


def _context(n: int, seed: int = 0):
    sys.path.insert(0, str(Path(__file__).parent))
    from make_faults_data import make

    from calibprob.compare.methods import TaskContext

    data = make(int(round(n * 5 / 3)), seed=seed)
    X, y = data[:, :-1], data[:, -1]
    n_cal = (len(y) - n) // 2
    mu, sd = X[:n].mean(0), X[:n].std(0)
    X = (X - mu) / sd
    y = (y - y[:n].mean()) / y[:n].std()
    parts = {"train": slice(0, n), "cal": slice(n, n + n_cal), "test": slice(n + n_cal, None)}
    return TaskContext(
        X[parts["train"]],
        y[parts["train"]],
        X[parts["cal"]],
        y[parts["cal"]],
        X[parts["test"]],
        None,
        {"kind": "gp"},
        None,
        seed,
    )


def _one(step: str, n: int) -> dict:
    """Run ``step`` at ``n`` training rows in this process; the measurement as a dict."""
    import dataclasses

    from calibprob.compare.methods import METHOD_KINDS, run_refits
    from calibprob.runs.faults import factorisation_rate

    ctx = _context(n)
    gp = ctx.new_base()
    if step == "factorise":  # the > 4000-row path: the subset's θ as it is, one factorisation on all rows
        gp.set_params(n_hyper_subset=200, refine_hyper=False)
    if step not in ("fit", "factorise"):
        gp.fit(ctx.X_train, ctx.y_train)
        ctx = dataclasses.replace(ctx, base=gp)
    rate = factorisation_rate()
    t0 = time.perf_counter()
    with _Peak() as peak:
        if step in ("fit", "factorise"):
            gp.fit(ctx.X_train, ctx.y_train)
        elif step == "loo":
            gp.loo()
        elif step == "cv-plus-refit":
            run_refits(ctx, "cv-plus", {"folds": 10}, [0])
        elif step == "sharp-gp-3":  # three knots: the per-knot time and the memory at larger n
            METHOD_KINDS["sharp-gp"].func(ctx, n_levels=3)
        else:
            METHOD_KINDS[step].func(ctx, **({"folds": 10} if step == "cv-plus" else {}))
    seconds = time.perf_counter() - t0
    delta = peak.peak - peak.start
    return {
        "step": step,
        "n": n,
        "peak_gib": delta / 2**30,
        "n_by_n": delta / (8.0 * n * n),
        "seconds": seconds,
        "rate_gflops": rate / 1e9,
        "factorisations": seconds * rate / (n**3 / 3.0),
        "rss_before_gib": peak.start / 2**30,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[1000, 2000, 3000])
    parser.add_argument("--steps", nargs="+", default=list(STEPS), choices=STEPS)
    parser.add_argument("--one", nargs=2, metavar=("STEP", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(_one(args.one[0], int(args.one[1]))))
        return
    for n in args.n:
        for step in args.steps:
            out = subprocess.run(
                [sys.executable, __file__, "--one", step, str(n)], capture_output=True, text=True, check=False
            )
            line = (
                out.stdout.strip().splitlines()[-1] if out.stdout.strip() else json.dumps({"error": out.stderr[-800:]})
            )
            print(line, flush=True)


if __name__ == "__main__":
    main()
