"""Weighted split conformal under covariate shift on the airfoil data (Tibshirani et al. 2019), beside the paper.

The protocol of the authors' script (ryantibs/conformal ``tibshirani2019/sim.airfoil.R``), as
``../shared/notes/time-series-and-shift.md`` §2 summarises it:

* ``airfoil.csv`` (N = 1503), columns 1 (Frequency) and 5 (Suction) log-transformed;
* per repetition: a random half (n = 752) is the training half, the other 751 rows the pool;
  split conformal at 90 % around ordinary least squares (with intercept) splits the training half
  again, 376 rows to fit and 376 to calibrate (conformalInference's ``conformal.pred.split``);
* **no shift**: the test set is the whole pool;
* **shift**: the test set is drawn from the pool by rejection with the tilt
  :math:`w(x) = \\exp(-x_1 + x_5)`, rounds of ``runif(n0) <= w/max(w)`` until more than a
  quarter of the pool is drawn (rows may repeat; the script's ``wsample``);
* weights: **unweighted**; **oracle** :math:`w`; **logistic**: a logistic regression of
  test-vs-training-half membership on the 752 + |test| rows, in-sample probabilities, no clipping
  (``glm``; :class:`calibprob.weights.LikelihoodRatio` with ``cv=None, clip=None``);
  **random forest**: 500 trees, ``max_features = floor(sqrt(5)) = 2``, out-of-bag probabilities
  clipped to [0.01, 0.99] (``randomForest``; ``cv="oob"``). The ratio is fitted on the whole
  training half, as the script does; its values at the calibration rows and the test rows are
  given to :class:`~calibprob.SplitConformalRegressor` as arrays.

Per repetition: the coverage (mean over the test rows), the median interval length, the share
of infinite intervals and whether 0.9 was attainable by the ESS rule
(:func:`calibprob.weights.check_attainable`; the protocol runs with ``on_small="ignore"`` so
every repetition counts, as in the paper); the
table gives the mean coverage and the median over repetitions of the median length, beside the
authors' ``rda/airfoil_sim.rda`` (5 000 repetitions): .902/16.09, .822/16.08, .909/20.94,
.910/20.93, .910/19.84. The random numbers are NumPy's (seed ``seed + r`` for repetition r),
not R's, so the figures agree in distribution, not draw for draw.

Run::

    python benchmarks/repro_airfoil_shift.py [--data ../shared/data] [--reps 5000] [--rf-reps 500]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from calibprob.calibrators.conformal import SplitConformalRegressor
from calibprob.weights import DensityRatio, LikelihoodRatio

LEVEL = 0.9
METHODS = ("no shift", "unweighted", "oracle", "logistic", "random forest")
#: the authors' means over 5 000 repetitions (rda/airfoil_sim.rda): coverage, median length
PAPER = {
    "no shift": (0.902, 16.09),
    "unweighted": (0.822, 16.08),
    "oracle": (0.909, 20.94),
    "logistic": (0.910, 20.93),
    "random forest": (0.910, 19.84),
}


def load(data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """The five inputs (Frequency and Suction logged) and the sound level."""
    df = pd.read_csv(Path(data_dir) / "airfoil.csv")
    X = df[["Frequency", "Angle", "Chord", "Velocity", "Suction"]].to_numpy(float)
    X[:, 0], X[:, 4] = np.log(X[:, 0]), np.log(X[:, 4])
    return X, df["Sound"].to_numpy(float)


def tilt(X) -> np.ndarray:
    """The script's exponential tilt :math:`\\exp(-x_1 + x_5)` (log frequency, log suction)."""
    return np.exp(-X[:, 0] + X[:, 4])


def wsample(w, rng, frac: float = 0.25) -> np.ndarray:
    """The script's rejection sampler: rounds of ``u <= w / max(w)`` until more than ``frac * n`` rows."""
    n = w.size
    rows: list[np.ndarray] = []
    count = 0
    while count <= n * frac:
        hit = np.flatnonzero(rng.uniform(size=n) <= w / w.max())
        rows.append(hit)
        count += hit.size
    return np.concatenate(rows)


def ols(X_train, y_train, X_new):
    """Least squares with an intercept (conformalInference's ``lm.funs()``)."""
    A = np.c_[np.ones(len(X_train)), X_train]
    beta = np.linalg.lstsq(A, y_train, rcond=None)[0]
    return np.c_[np.ones(len(X_new)), X_new] @ beta


def _score(model, X, y, weights=None) -> tuple[float, float, float, float]:
    """Coverage, median length, the share of infinite intervals, the attainable level (1 without weights)."""
    iv = model.predict_interval(X, LEVEL, weights=weights)
    lo, up = iv["lower"].values, iv["upper"].values
    attainable = iv.attrs.get("weights_attainable_level", 1.0)
    return float(np.mean((lo <= y) & (y <= up))), float(np.median(up - lo)), float(np.mean(np.isinf(up))), attainable


def _calibrated(X, y, fit_rows, cal_rows, weights=None):
    model = SplitConformalRegressor(estimator=ols, confidence_level=LEVEL).fit(X[fit_rows], y[fit_rows])
    return model.calibrate(X[cal_rows], y[cal_rows], weights=weights)


def forest():
    """R ``randomForest``'s defaults for a classification: 500 trees, mtry = floor(sqrt(p)), nodes of 1."""
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(n_estimators=500, max_features="sqrt", n_jobs=1)


def repetition(X, y, seed: int, *, rf: bool = True, on_small: str = "ignore") -> dict[str, tuple]:
    """One repetition: ``{method: (coverage, median length, share infinite, attainable level)}``.

    ``on_small="ignore"``: the paper's protocol keeps every repetition, including those where a
    heavy test point's own mass makes its interval infinite (counted in the third number).
    """
    rng = np.random.default_rng(seed)
    N = len(y)
    n = int(round(N / 2))  # 752, as R's round(751.5)
    perm = rng.permutation(N)
    train, pool = perm[:n], perm[n:]
    split = rng.permutation(n)
    fit_rows, cal_rows = train[split[: n // 2]], train[split[n // 2 :]]
    test = pool[wsample(tilt(X[pool]), rng)]
    out = {}
    plain = _calibrated(X, y, fit_rows, cal_rows)
    out["no shift"] = _score(plain, X[pool], y[pool])
    out["unweighted"] = _score(plain, X[test], y[test])
    oracle = _calibrated(X, y, fit_rows, cal_rows, DensityRatio(tilt, on_small=on_small))
    out["oracle"] = _score(oracle, X[test], y[test])  # the ratio evaluated at the test inputs
    # the ratio is fitted on the whole training half against the test rows; the calibration rows keep theirs
    cal_in_train = split[n // 2 :]  # the calibration rows' positions within the training half
    kinds = {"logistic": LikelihoodRatio(cv=None, clip=None, on_small=on_small)}
    if rf:
        kinds["random forest"] = LikelihoodRatio(forest(), cv="oob", random_state=seed, on_small=on_small)
    for name, ratio in kinds.items():
        ratio.fit(X[train], X[test])
        model = _calibrated(X, y, fit_rows, cal_rows, ratio.calibration_weights_[cal_in_train])
        out[name] = _score(model, X[test], y[test], ratio)  # its own test rows: the cross-fitted ratio
    return out


def run(
    X, y, reps: int, *, rf_reps: int | None = None, seed: int = 0, on_small: str = "ignore", checkpoint=None
) -> pd.DataFrame:
    """``reps`` repetitions (the random forest in the first ``rf_reps``): one row per (repetition, method).

    ``checkpoint``: a CSV path rewritten every 100 repetitions (a long run stopped early keeps its rows).
    """
    rf_reps = reps if rf_reps is None else rf_reps
    rows = []
    for r in range(reps):
        res = repetition(X, y, seed + r, rf=r < rf_reps, on_small=on_small)
        rows += [
            {"rep": r, "method": m, "coverage": c, "length": ln, "infinite": inf, "attainable": att}
            for m, (c, ln, inf, att) in res.items()
        ]
        if checkpoint is not None and (r + 1) % 100 == 0:
            pd.DataFrame(rows).to_csv(checkpoint, index=False)
    return pd.DataFrame(rows)


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per method: repetitions, mean coverage (and its standard error), median and mean of the median lengths."""
    g = frame.groupby("method", sort=False)
    out = pd.DataFrame(
        {
            "reps": g.size(),
            "coverage": g["coverage"].mean(),
            "coverage_se": g["coverage"].std() / np.sqrt(g.size()),
            "length_median": g["length"].median(),
            "length_mean": g["length"].mean(),
            "infinite": g["infinite"].mean(),
            "unattainable": g["attainable"].apply(lambda a: float(np.mean(a < LEVEL))),
        }
    ).reindex([m for m in METHODS if m in g.groups])
    out["paper_coverage"] = [PAPER[m][0] for m in out.index]
    out["paper_length"] = [PAPER[m][1] for m in out.index]
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(
        os.environ.get("CALIBPROB_SHARED_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data")
    )
    parser.add_argument("--data", type=Path, default=default)
    parser.add_argument("--reps", type=int, default=5000)
    parser.add_argument("--rf-reps", type=int, default=None, help="repetitions with the random forest (default all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="CSV of every repetition")
    args = parser.parse_args(argv)
    X, y = load(args.data)
    t0 = time.perf_counter()
    frame = run(X, y, args.reps, rf_reps=args.rf_reps, seed=args.seed, checkpoint=args.out)
    elapsed = time.perf_counter() - t0
    if args.out is not None:
        frame.to_csv(args.out, index=False)
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.precision", 4):
        print(summary(frame))
    rf = args.reps if args.rf_reps is None else min(args.rf_reps, args.reps)
    print(f"{args.reps} repetitions ({rf} with the forest) in {elapsed:.0f} s; load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
