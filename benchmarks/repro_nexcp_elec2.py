"""NexCP on ELEC2 (Barber, Candès, Ramdas & Tibshirani 2023, §5.2), beside the published numbers (issue 38).

The protocol of the authors' code (seed 98765), as run in qc-zhao/McGill_BIOS_694_Project_NexCP
``src/electricity_script_weights_0.99.ipynb`` (the note ``time-series-and-shift.md`` §1):

* ``elec2.csv`` rows from index 17760 on, the half-hours strictly between those of rows 17 and 24
  of that stretch (9:00-12:00), ``transfer`` from ``nswprice``, ``nswdemand``, ``vicprice``,
  ``vicdemand`` (no intercept): N = 3444;
* at every time t >= 100 (``burn_in``), a 90 % interval from the t earlier points by full
  conformal least squares: CP+LS (equal weights), nexCP+LS (weights 0.99**(t+1-i)), nexCP+WLS
  (the same decay as least-squares weights, the test point's weight swapped with a random
  point's); and the same three on the rows randomly permuted (the exchangeable control);
* one ``numpy.random.RandomState(98765)`` gives the permutation and then, at every t, one
  multinomial draw per method in the authors' order (CP+LS, permuted, nexCP+LS, permuted,
  nexCP+WLS, permuted): the draws only matter for WLS, but each method consumes one, so the
  WLS swaps are the authors' own.

The authors' code reuses one tag array for the two WLS calls of a step, so the permuted call
starts from the tags the first call swapped; ``--authors-tags`` does the same (default: fresh
tags, the method as the paper states it). Their code evaluates the conformal condition only at
the knots in floating point, where the test residual ties the owner's; calibprob decides the
tie exactly (``calibprob.calibrators.timeseries._full_ls``), so an end can move by one knot.

Run (about a minute; the data stay outside the package)::

    python benchmarks/repro_nexcp_elec2.py --data ../shared/data [--authors-tags]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from calibprob.calibrators.timeseries._full_ls import full_conformal_hull, ls_residual_lines, swap_fit_weight

ALPHA, RHO, BURN_IN, SEED = 0.1, 0.99, 100, 98765
COVARIATES = ["nswprice", "nswdemand", "vicprice", "vicdemand"]
#: Barber et al. (2023) as run by the authors' code (the note's table): (coverage, width)
PUBLISHED = {
    "CP+LS": (0.852, 0.565),
    "nexCP+LS": (0.890, 0.606),
    "nexCP+WLS": (0.894, 0.527),
    "CP+LS permuted": (0.899, 0.639),
    "nexCP+LS permuted": (0.907, 0.652),
    "nexCP+WLS permuted": (0.907, 0.663),
}


def load(data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """The paper's subset of ELEC2: 3444 rows of the four price/demand inputs and ``transfer``."""
    df = pd.read_csv(Path(data_dir) / "elec2.csv").iloc[17760:].reset_index(drop=True)
    period = df["period"].to_numpy()
    keep = (period > period[17]) & (period < period[24])
    return df.loc[keep, COVARIATES].to_numpy(float), df.loc[keep, "transfer"].to_numpy(float)


#: The paper's 3444 rows as the repository ships them (``models/data``; made by ``load`` from elec2.csv).
BUNDLED = Path(__file__).resolve().parents[1] / "models" / "data" / "barber2023_elec2_nexcp.csv"


def load_bundled(path: Path = BUNDLED) -> tuple[np.ndarray, np.ndarray]:
    """The same 3444 rows from the repository's extract (``models/barber2023-nexcp-elec2.toml`` reads it)."""
    df = pd.read_csv(path)
    return df[COVARIATES].to_numpy(float), df["transfer"].to_numpy(float)


def _one(X, Y, t, weights, tags) -> tuple[float, float]:
    a, b, a1, b1 = ls_residual_lines(X[:t], Y[:t], X[t], tags)
    return full_conformal_hull(a, b, a1, b1, weights, 1.0 - ALPHA)


def run(X: np.ndarray, Y: np.ndarray, *, authors_tags: bool = False) -> dict[str, np.ndarray]:
    """The six interval paths (name -> (T - burn_in, 2)) and the permuted targets under ``"_Y_perm"``."""
    rs = np.random.RandomState(SEED)
    N = len(Y)
    perm = rs.choice(N, N, replace=False)
    data = {"": (X, Y), " permuted": (X[perm], Y[perm])}
    out = {f"{m}{s}": np.empty((N - BURN_IN, 2)) for m in ("CP+LS", "nexCP+LS", "nexCP+WLS") for s in data}
    for k, t in enumerate(range(BURN_IN, N)):
        w = RHO ** np.arange(t, 0, -1, dtype=float)
        for method, weights in (("CP+LS", np.ones(t)), ("nexCP+LS", w)):
            for s, (Xs, Ys) in data.items():
                rs.multinomial(1, np.r_[weights, 1.0] / (weights.sum() + 1.0))  # the authors' unused draw
                out[method + s][k] = _one(Xs, Ys, t, weights, None)
        tags = RHO ** np.arange(t, -1, -1, dtype=float)
        for s, (Xs, Ys) in data.items():
            swapped, _ = swap_fit_weight(tags, w, rs)
            if authors_tags:
                tags = swapped  # the authors' in-place swap carries over to the permuted call
            out["nexCP+WLS" + s][k] = _one(Xs, Ys, t, w, swapped)
    out["_Y_perm"] = Y[perm]
    return out


def summary(paths: dict[str, np.ndarray], Y: np.ndarray) -> dict[str, tuple[float, float]]:
    """(mean coverage, mean width) of each method over the predicted points."""
    rows = {}
    for name, iv in paths.items():
        if name.startswith("_"):
            continue
        target = (paths["_Y_perm"] if name.endswith("permuted") else Y)[BURN_IN:]
        cover = (iv[:, 0] <= target) & (target <= iv[:, 1])
        rows[name] = (float(cover.mean()), float(np.mean(iv[:, 1] - iv[:, 0])))
    return rows


def main() -> None:
    default = Path(os.environ.get("CALIBPROB_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, default=default, help="folder holding elec2.csv (else the bundled extract)"
    )
    parser.add_argument("--authors-tags", action="store_true", help="reuse the swapped tags as the authors' code does")
    args = parser.parse_args()
    X, Y = load(args.data) if (args.data / "elec2.csv").exists() else load_bundled()
    t0 = time.perf_counter()
    rows = summary(run(X, Y, authors_tags=args.authors_tags), Y)
    seconds = time.perf_counter() - t0
    print(f"ELEC2, N = {len(Y)}, burn-in {BURN_IN}, rho = {RHO}, seed {SEED}; {seconds:.1f} s for six methods")
    print(f"{'method':<20} {'coverage':>9} {'width':>7}   published")
    for name, (cov, width) in rows.items():
        pc, pw = PUBLISHED[name]
        print(f"{name:<20} {cov:9.3f} {width:7.3f}   {pc:.3f} / {pw:.3f}")


if __name__ == "__main__":
    main()
