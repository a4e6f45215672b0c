"""Cost of the ``calib`` accessor and of ``calibprob.evaluate`` (TARGETS.md, P6).

A quantile-family prediction with 100 000 observations x 99 levels (the
default levels; a skewed, non-Gaussian law so that no closed form is used).
Prints the best of ``--repeat`` wall times per operation; the target for
cdf, logpdf and interval is <= 1 s each.

Run::

    .venv/bin/python benchmarks/bench_accessor.py [--n 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

import calibprob
from calibprob.predictive import DEFAULT_LEVELS


def _best_time(fn, repeat: int) -> float:
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="number of observations")
    parser.add_argument("--repeat", type=int, default=3, help="timings per operation (best is kept)")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    n = args.n
    loc = rng.normal(size=n)
    scale = np.exp(rng.normal(scale=0.3, size=n))
    # skew-normal quantiles: a genuinely non-Gaussian quantile-family Dataset
    q = loc[:, None] + scale[:, None] * stats.skewnorm(4.0).ppf(DEFAULT_LEVELS)[None, :]
    pred = calibprob.from_quantiles(q, DEFAULT_LEVELS, method="bench")
    y = loc + scale * rng.standard_normal(n)

    ops = {
        "cdf": lambda: pred.calib.cdf(y),
        "logpdf": lambda: pred.calib.logpdf(y),
        "interval (5 levels)": lambda: pred.calib.interval([0.5, 0.8, 0.9, 0.95, 0.99]),
        "ppf (99 probs)": lambda: pred.calib.ppf(DEFAULT_LEVELS),
        "std (exact moments)": lambda: pred.calib.std(),
        "evaluate": lambda: calibprob.evaluate(pred, y),
    }
    print(f"quantile-family Dataset: {n} obs x {DEFAULT_LEVELS.size} levels, best of {args.repeat}")
    for name, fn in ops.items():
        t = _best_time(fn, args.repeat)
        flag = "" if t <= 1.0 else "  (> 1 s target)"
        print(f"  {name:<22s} {t:8.3f} s{flag}")


if __name__ == "__main__":
    main()
