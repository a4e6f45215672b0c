"""Reference values of MAPIE's conditional-coverage metrics, for tests/metrics/test_conditional_mapie.py.

Run in a separate environment with MAPIE (not a calibprob dependency):

    python3.12 -m venv /work/venvs/mapie-diag
    /work/venvs/mapie-diag/bin/pip install "mapie[conditional]>=1.5"
    /work/venvs/mapie-diag/bin/python tests/data/make_mapie_conditional_refs.py

It writes tests/data/mapie_conditional_refs.npz: the seeded inputs (y, intervals at two
confidence levels, integer groups, raw X), and MAPIE's ``regression_ssc`` (3 and 5 bins),
``hsic`` (kernel sizes (1, 1) and (0.5, 2)), ``coverage_gap`` (unweighted and weighted, per
level) and ``worst_slab_coverage`` (in-sample, on X standardised exactly as calibprob does,
delta 0.1, 50 directions, random_state 42), with the directions covmetrics draws for that
seed (np.random.seed(42); normalised np.random.randn(M, d)).
"""

from __future__ import annotations

from pathlib import Path

import covmetrics
import mapie
import numpy as np
from mapie.metrics.conditional import coverage_gap, worst_slab_coverage
from mapie.metrics.regression import hsic, regression_ssc

OUT = Path(__file__).with_name("mapie_conditional_refs.npz")


def main() -> None:
    rng = np.random.default_rng(20261126)
    n, d = 400, 3
    levels = np.array([0.8, 0.9])
    X = rng.normal(size=(n, d)) * [1.0, 10.0, 0.1] + [0.0, 5.0, -2.0]
    groups = rng.integers(0, 4, n)
    sigma = 0.5 + np.abs(X[:, 0]) + 0.3 * groups
    y = rng.normal(size=n) * sigma
    # interval half-widths from a misspecified scale (ignores the groups): group-dependent coverage
    z = np.array([1.2816, 1.6449])
    half = (0.6 + 0.9 * np.abs(X[:, 0]) + 0.1 * rng.random(n))[:, None] * z[None, :]
    lower, upper = -half, half
    y_intervals = np.stack([lower, upper], axis=1)  # MAPIE's (n, 2, n_levels)
    refs = {
        "ssc_3": regression_ssc(y, y_intervals, num_bins=3),
        "ssc_5": regression_ssc(y, y_intervals, num_bins=5),
        "hsic_1_1": hsic(y, y_intervals, kernel_sizes=(1, 1)),
        "hsic_05_2": hsic(y, y_intervals, kernel_sizes=(0.5, 2)),
    }
    for k, c in enumerate(levels):
        one = y_intervals[:, :, k : k + 1]
        refs[f"covgap_{k}"] = np.array(coverage_gap(y, groups, float(c), y_intervals=one))
        refs[f"covgap_w_{k}"] = np.array(coverage_gap(y, groups, float(c), y_intervals=one, weighted=True))
        sd = X.std(axis=0)
        Xs = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)  # calibprob's standardisation
        refs[f"wsc_{k}"] = np.array(
            worst_slab_coverage(Xs, y, y_intervals=one, delta=0.1, n_directions=50, random_state=42)
        )
    np.random.seed(42)
    V = np.random.randn(50, d)
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    np.savez(
        OUT,
        y=y,
        lower=lower,
        upper=upper,
        groups=groups,
        X=X,
        levels=levels,
        directions=V,
        mapie_version=np.array(mapie.__version__),
        covmetrics_version=np.array(getattr(covmetrics, "__version__", "0.1.2")),
        **refs,
    )
    print(f"wrote {OUT} (MAPIE {mapie.__version__})")
    for k, v in refs.items():
        print(k, np.round(v, 6).tolist())


if __name__ == "__main__":
    main()
