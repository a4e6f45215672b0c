"""Worst-slab coverage: in-sample bias, the split estimate, and the cost of the two scans.

    python benchmarks/bench_conditional_diagnostics.py

Coverage independent of x (1000 points, 3 features, marginal 0.915, seed 0): the in-sample worst
slab over 1000 directions is far below the marginal coverage, the split estimate is not. Times
are CPU seconds (time.process_time) of one run; the full O(n^2) scan is covmetrics' (every window),
reproduced here to show the O(n m) scan gives the same minimum.
"""

from __future__ import annotations

import time

import numpy as np

from calibprob.metrics import _conditional as cond
from calibprob.metrics import hsic, worst_slab_coverage


def _full_scan(z: np.ndarray, c: np.ndarray, delta: float) -> float:
    """Every window of at least ceil(delta n) sorted points (covmetrics' wsc_all_numpy)."""
    n = z.size
    cs = np.concatenate([[0.0], np.cumsum(c[np.argsort(z, kind="stable")], dtype=float)])
    m = cond._min_slab_points(delta, n)
    ai, bi = np.arange(n - m + 1)[:, None], np.arange(n)[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        cov = (cs[1:][None, :] - cs[: n - m + 1][:, None]) / (bi - ai + 1)
    return float(np.where(bi >= ai + m - 1, cov, 1.0).min())


def main() -> None:
    rng = np.random.default_rng(0)
    n = 1000
    X = rng.normal(size=(n, 3))
    c = (rng.random(n) < 0.9)[:, None]
    print(f"marginal coverage {c.mean():.3f}")
    for ff in (None, 0.25):
        t = time.process_time()
        v = worst_slab_coverage(X, c, find_fraction=ff, n_directions=1000)[0]
        print(f"worst_slab_coverage find_fraction={ff}: {v:.3f}  ({time.process_time() - t:.2f} s CPU)")
    Xs = cond._standardise(X)
    V = cond._directions(1000, 3, np.random.default_rng(0))
    t = time.process_time()
    full = min(_full_scan(Xs @ v, c[:, 0], 0.1) for v in V)
    print(f"full O(n^2) scan, in-sample: {full:.3f}  ({time.process_time() - t:.2f} s CPU)")
    w = rng.random((2000, 1))
    t = time.process_time()
    hsic((rng.random(2000) < 0.9)[:, None], w)
    print(f"hsic n=2000: {time.process_time() - t:.2f} s CPU")


if __name__ == "__main__":
    main()
