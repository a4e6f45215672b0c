"""EnbPI on the Atlanta solar data (Xu & Xie 2021), beside the authors' results file (issue 38).

The protocol of the reference code (hamrel-cxu/EnbPI @ 60cd5b7: ``tests_paper+supp.py`` §A.2, the
multivariate branch, and ``PI_class_EnbPI.py``), which wrote
``reference/Solar_Atl_many_train_new.csv``:

* ``solar_atl.csv``: target ``DHI``, the seven inputs DNI, Dew Point, Surface Albedo, Wind Speed,
  Relative Humidity, Temperature, Pressure (Year-Minute dropped), unscaled; the first 1654 hours
  train (the 5th of ``linspace(876, 2628, 10)``), the other 7106 are predicted, α = 0.1;
* base ``RidgeCV(alphas=linspace(0.0001, 10, 10))``;
* trial ``k`` (10 of them): ``numpy.random.seed(98765 + k)``, then
  - EnbPI: B = 30 resamples ``choice(n, n)``, mean leave-one-out aggregation, the centre the
    0.9 quantile of the leave-one-out predictions (``center="quantile"``), the width the 90th
    ``np.percentile`` (linear) of the last n absolute residuals, s = 1
    (:meth:`calibprob.EnbPI.predict_and_update`);
  - split conformal ("ICP"): ``choice(n, n // 2, replace=False)`` right after the seed trains the
    ridge, the other half calibrates (``calibprob.SplitConformalRegressor``, absolute score). The
    results file was written by a pass that ran ICP without EnbPI before it (its rows come after all
    the EnbPI rows), so the half is the first draw after ``seed(98765 + k)``, not the draw after
    EnbPI's 30 resamples: with that half and the authors' width (the 90th ``np.percentile``, linear,
    of the 827 absolute residuals) the ten coverages and widths equal the file's
    (``authors' rule`` below, checked to 1e-6); calibprob's conformal rank ``ceil(0.9 * 828) = 746``
    is a little wider (coverage 0.000-0.007 higher per trial).

Published means over the 10 trials (train 1654): EnbPI-Ridge 0.904 / 290.0, split conformal
(Ridge) 0.657 / 133.3; the tolerance of the issue: ±0.02 in coverage, ±10 % in width.

Run (about half a minute)::

    python benchmarks/repro_enbpi_solar.py [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

import calibprob

ALPHA, B, TRAIN, TRIALS, SEED = 0.1, 30, 1654, 10, 98765
FEATURES = ["DNI", "Dew Point", "Surface Albedo", "Wind Speed", "Relative Humidity", "Temperature", "Pressure"]
PUBLISHED = {"EnbPI-Ridge": (0.904, 290.0), "split CP (Ridge)": (0.657, 133.3)}


def load(data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """The seven inputs and DHI, in time order (8760 hours of 2018)."""
    df = pd.read_csv(Path(data_dir) / "solar_atl.csv")
    return df[FEATURES].to_numpy(float), df["DHI"].to_numpy(float)


#: The data as the repository ships them (``models/data``): a ``time`` column, the seven inputs and DHI.
BUNDLED = Path(__file__).resolve().parents[1] / "models" / "data" / "xu2021_solar_atl.csv"


def load_bundled(path: Path = BUNDLED) -> tuple[np.ndarray, np.ndarray]:
    """The same inputs and DHI from the repository's extract (``models/xu2021-enbpi-solar.toml`` reads it)."""
    df = pd.read_csv(path)
    return df[FEATURES].to_numpy(float), df["DHI"].to_numpy(float)


def reference(data_dir: Path) -> dict[str, tuple[float, float]]:
    """The authors' means over the 10 trials at train size 1654 (RidgeCV)."""
    ref = pd.read_csv(Path(data_dir) / "reference" / "Solar_Atl_many_train_new.csv")
    ref = ref[(ref["train_size"] == TRAIN) & (ref["muh_fun"] == "RidgeCV")]
    mean = ref.groupby("method")[["coverage", "width"]].mean()
    return {
        "EnbPI-Ridge": tuple(mean.loc["Ensemble"].to_numpy(float)),
        "split CP (Ridge)": tuple(mean.loc["ICP"].to_numpy(float)),
    }


def _ridge():
    from sklearn.linear_model import RidgeCV

    return RidgeCV(alphas=np.linspace(0.0001, 10, 10))


def one_trial(X, y, k: int) -> dict[str, tuple[float, float]]:
    """(coverage, mean width) of EnbPI, split conformal and split conformal by the authors' rule in trial ``k``."""
    rs = np.random.RandomState(SEED + k)
    Xtr, ytr, Xte, yte = X[:TRAIN], y[:TRAIN], X[TRAIN:], y[TRAIN:]
    enbpi = calibprob.EnbPI(_ridge(), n_bootstraps=B, center="quantile", random_state=rs).fit(Xtr, ytr)
    iv = enbpi.predict_and_update(Xte, yte, confidence_level=1 - ALPHA)
    # the authors' ICP pass: seed(98765 + k), then the half (models/xu2021-enbpi-solar.toml: shuffle = 98765)
    proper = np.random.RandomState(SEED + k).choice(TRAIN, TRAIN // 2, replace=False)
    cal = np.setdiff1d(np.arange(TRAIN), proper)
    split = calibprob.SplitConformalRegressor(estimator=_ridge()).fit(Xtr[proper], ytr[proper])
    sv = split.calibrate(Xtr[cal], ytr[cal]).predict_interval(Xte, confidence_level=1 - ALPHA)
    out = {}
    for name, ds in (("EnbPI-Ridge", iv), ("split CP (Ridge)", sv)):
        lo, hi = ds["lower"].to_numpy(), ds["upper"].to_numpy()
        out[name] = (float(np.mean((lo <= yte) & (yte <= hi))), float(np.mean(hi - lo)))
    # their width: the 90th linear percentile of the calibration half's absolute residuals, not the conformal rank
    fit = _ridge().fit(Xtr[proper], ytr[proper])
    half = np.percentile(np.abs(ytr[cal] - fit.predict(Xtr[cal])), 100 * (1 - ALPHA))
    out["split CP, authors' rule"] = (float(np.mean(np.abs(yte - fit.predict(Xte)) <= half)), float(2 * half))
    return out


def run(X, y, trials: int = TRIALS) -> tuple[dict[str, tuple[float, float]], list[dict]]:
    """Means over ``trials`` trials, and the trials' own rows."""
    rows = [one_trial(X, y, k) for k in range(trials)]
    return {name: tuple(np.mean([r[name] for r in rows], axis=0)) for name in rows[0]}, rows


def authors_trials(data_dir: Path) -> np.ndarray:
    """The results file's ICP (RidgeCV, train 1654) coverage and width per trial, in trial order: (10, 2)."""
    ref = pd.read_csv(Path(data_dir) / "reference" / "Solar_Atl_many_train_new.csv")
    ref = ref[(ref["train_size"] == TRAIN) & (ref["muh_fun"] == "RidgeCV") & (ref["method"] == "ICP")]
    return ref.sort_values("itrial")[["coverage", "width"]].to_numpy(float)


def main() -> None:
    default = Path(os.environ.get("CALIBPROB_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default, help="folder holding solar_atl.csv and reference/")
    args = parser.parse_args()
    X, y = load(args.data) if (args.data / "solar_atl.csv").exists() else load_bundled()
    t0 = time.perf_counter()
    ours, trials = run(X, y)
    seconds = time.perf_counter() - t0
    has_ref = (args.data / "reference" / "Solar_Atl_many_train_new.csv").exists()
    ref = reference(args.data) if has_ref else PUBLISHED  # without the authors' file: the published means
    ref = {**ref, "split CP, authors' rule": ref["split CP (Ridge)"]}
    print(f"Atlanta solar, train {TRAIN}, {len(y) - TRAIN} predicted, {TRIALS} trials, B = {B}; {seconds:.1f} s")
    print(f"{'method':<24} {'coverage':>9} {'width':>8}   authors' file")
    for name, (cov, width) in ours.items():
        print(f"{name:<24} {cov:9.4f} {width:8.2f}   {ref[name][0]:.4f} / {ref[name][1]:.2f}")
    if has_ref:  # the authors' halves and rule give their ten trials themselves
        mine = np.array([r["split CP, authors' rule"] for r in trials])
        gap = np.abs(mine - authors_trials(args.data)).max(axis=0)
        print(
            f"split CP, authors' rule vs the file, per trial: max |coverage diff| {gap[0]:.2g}, max |width diff| {gap[1]:.2g}"
        )


if __name__ == "__main__":
    main()
