"""Feedback covariate shift on the Poelwijk fluorescence landscape (Fannjiang et al. 2022), beside the paper.

The protocol of the authors' code (clarafy/conformal-for-design @ ec484b5,
``notebooks/fluorescence-experiments.ipynb``, ``calibrate.py``, ``assay.py``), as
``../shared/notes/time-series-and-shift.md`` §2 summarises it:

* the 2^13 sequences of ``poelwijk2019_fluorescence.csv``, encoded as order-2 Walsh--Hadamard
  features of the +-1 genotype (intercept, 13 sites, 78 pairs: p = 92; ``assay.walsh_hadamard_from_seqs``);
* per seed: n training sequences drawn uniformly with replacement, labels drawn as
  ``max(N(brightness, se^2), 0)`` with the per-sequence noise SD of ``poelwijk2019_noise_se.csv``
  (``PoelwijkData.get_measurements``); ridge with the intercept unpenalised, penalty 10 for n = 96
  (``get_invcov_dot_xt``); the designed sequence drawn from p~(x) ∝ exp(λ μ̂(x)) over all 2^13
  sequences (uniform when λ = 0) and its label drawn the same way;
* the set at α = 0.1 on the grid 0, 0.02, ..., 2.2 with leave-one-out scores, weights recomputed
  per candidate label (FCS, ``ConformalRidgeFeedbackCovariateShift``) or from the model fitted on
  the training data (SCS, ``ConformalRidgeStandardCovariateShift``); the training density is
  uniform and cancels;
* covered: a label in the set within half a grid step of the true label (``calibrate.is_covered``).

The training set for a seed is shared by the four λ (as in the authors' loop, which reseeds per
(λ, seed)); the random numbers are NumPy's ``default_rng(seed)`` for the sampling and
``default_rng([seed, 1])`` for the label noise (the authors' noise comes from the unseeded global
generator), so the figures agree in distribution, not draw for draw.

Published means over 2 000 seeds (blue, n = 96, the authors' ``fluorescence/blue_n96_*.npz``):
FCS .903/.912/.921/.924 and SCS .903/.949/.959/.968 at λ = 0, 2, 4, 6.

Run::

    python benchmarks/repro_fluorescence_feedback.py [--seeds 2000] [--first-seed 0] [--colour blue] [--n 96]
        [--out results.npz]
"""

from __future__ import annotations

import argparse
import os
import time
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from calibprob.calibrators.conformal.feedback import RidgeSmoother, feedback_conformal_set

ALPHA = 0.1
LAMBDAS = (0.0, 2.0, 4.0, 6.0)
GRID = np.arange(0, 2.21, 0.02)  # the authors' np.arange(0, 2.21, 0.02): 111 labels
PENALTY = {96: 10.0, 192: 1.0, 384: 1.0}
#: the authors' means over 2 000 seeds (fluorescence/{colour}_n{n}_lambda*_alpha0.1_gamma*.npz)
PAPER = {
    ("blue", 96): {"FCS": (0.903, 0.912, 0.921, 0.924), "SCS": (0.903, 0.949, 0.959, 0.968)},
    ("blue", 384): {"FCS": (0.897, 0.907, 0.909, 0.912), "SCS": (0.897, 0.907, 0.912, 0.920)},
}
DEFAULT_DATA = Path(
    os.environ.get("CALIBPROB_SHARED_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data")
)


def walsh_hadamard(signed: np.ndarray, order: int = 2) -> np.ndarray:
    """Products of the +-1 sites over every subset of size <= order, the empty one (intercept) first."""
    n, L = signed.shape
    cols = [np.ones(n)]
    for k in range(1, order + 1):
        for idx in combinations(range(L), k):
            cols.append(np.prod(signed[:, list(idx)], axis=1))
    return np.column_stack(cols)


def load(data_dir: Path, colour: str):
    """Features (2^13, 92), brightness and noise SD of one colour."""
    df = pd.read_csv(data_dir / "poelwijk2019_fluorescence.csv", dtype={"binary_genotype": str})
    se = pd.read_csv(data_dir / "poelwijk2019_noise_se.csv")
    bits = df["binary_genotype"].str.strip("'")
    signed = np.array([[2 * int(b) - 1 for b in s] for s in bits], float)
    return walsh_hadamard(signed, 2), df[f"brightness_{colour}"].to_numpy(float), se[f"{colour}_se_n"].to_numpy(float)


def one_seed(seed: int, X_all, y_true, se, n: int, lambdas=LAMBDAS):
    """Coverage (FCS, SCS) per λ for one seed: arrays of shape (len(lambdas),)."""
    rng = np.random.default_rng(seed)
    noise = np.random.default_rng([seed, 1])
    smoother = RidgeSmoother(penalty=PENALTY[n], unpenalized=(0,))
    idx = rng.choice(X_all.shape[0], n, replace=True)
    X, y = X_all[idx], np.fmax(noise.normal(y_true[idx], se[idx]), 0.0)
    mu_all = smoother.fit_predict(X, y, X_all)
    out = np.zeros((2, len(lambdas)), bool)
    for j, lam in enumerate(lambdas):
        z = lam * mu_all
        p = np.exp(z - z.max())
        t = rng.choice(X_all.shape[0], p=p / p.sum()) if lam else rng.choice(X_all.shape[0])
        y_t = max(noise.normal(y_true[t], se[t]), 0.0)
        for k, shift in enumerate(("feedback", "standard")):
            cs = feedback_conformal_set(
                X,
                y,
                X_all[t],
                smoother=smoother,
                lam=lam,
                grid=GRID,
                pool=X_all,
                confidence_level=1 - ALPHA,
                shift=shift,
                on_outside="ignore",
            )
            out[k, j] = cs.covers(y_t)
    return out


def run(seeds, data_dir=DEFAULT_DATA, colour="blue", n=96, progress=True):
    """Coverage indicators, shape (len(seeds), 2 [FCS, SCS], len(LAMBDAS))."""
    X_all, y_true, se = load(Path(data_dir), colour)
    res = np.zeros((len(seeds), 2, len(LAMBDAS)), bool)
    t0 = time.perf_counter()
    for r, s in enumerate(seeds):
        res[r] = one_seed(int(s), X_all, y_true, se, n)
        if progress and (r + 1) % 50 == 0:
            print(f"  {r + 1}/{len(seeds)} seeds, {time.perf_counter() - t0:.0f} s", flush=True)
    return res


def table(res, colour="blue", n=96) -> str:
    """Mean coverage ± standard error per method and λ, beside the paper."""
    paper = PAPER.get((colour, n), {})
    lines = [
        f"{colour}, n = {n}, {res.shape[0]} seeds; coverage (± s.e.) at λ = " + ", ".join(f"{v:g}" for v in LAMBDAS)
    ]
    for k, name in enumerate(("FCS", "SCS")):
        m = res[:, k].mean(axis=0)
        se = np.sqrt(m * (1 - m) / res.shape[0])
        cells = "  ".join(f"{a:.3f} ({b:.3f})" for a, b in zip(m, se))
        ref = "  paper " + " ".join(f"{v:.3f}" for v in paper[name]) if name in paper else ""
        lines.append(f"{name}: {cells}{ref}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--seeds", type=int, default=2000)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--colour", default="blue", choices=["blue", "red"])
    ap.add_argument("--n", type=int, default=96, choices=sorted(PENALTY))
    ap.add_argument("--out", help="write the per-seed coverage indicators (npz)")
    args = ap.parse_args(argv)
    seeds = np.arange(args.first_seed, args.first_seed + args.seeds)
    t0 = time.perf_counter()
    res = run(seeds, args.data, args.colour, args.n)
    print(table(res, args.colour, args.n))
    print(f"{time.perf_counter() - t0:.0f} s; load {os.getloadavg()[0]:.2f}")
    if args.out:
        np.savez(args.out, seeds=seeds, coverage=res, lambdas=np.array(LAMBDAS), methods=np.array(["FCS", "SCS"]))


if __name__ == "__main__":
    main()
