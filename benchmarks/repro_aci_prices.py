"""ACI on French spot prices, hour 0 of 2019 (Zaffran et al. 2022), beside the authors' bounds (issue 38).

The protocol of Zaffran et al.'s ``ACP`` runs as MAPIE's reproduction example spells it out
(``examples/regression/4-tutorials/plot_ts-tutorial``'s ``zaffran2022`` script, MAPIE @ 60031ac):

* the hour-0 rows of ``zaffran2022_prices.csv.gz`` (features: hour, day of week, the 24 prices
  of the day before and of the week before, the consumption forecast); the training window is
  every hour-0 row before 2019-01-01 (``train_size`` rows) and slides by one day per test day;
* each of the 365 test days: a random forest (1 000 trees, ``max_features=6``,
  ``min_samples_leaf=1``, ``random_state=1``) is fitted on the window's first half, its absolute
  residuals on the second half are the calibration scores
  (:meth:`calibprob.calibrators.online.aci.AdaptiveConformalInterval.calibrate`), the day's interval
  is issued at the current level, and the level moves with the outcome (γ = 0.04, α = 0.1);
* AgACI (Zaffran et al.'s aggregation, :class:`calibprob.AgACIInterval`, the authors' grid of γ) on the same
  forests and protocol, reported beside ACI;
* the authors' bounds: ``reference/zaffran2022_aci_reference.csv`` (MAPIE's copy of their
  ``ACP_0.04_RF.pkl``): coverage 0.896, mean width 12.84 €/MWh.

The same protocol as a comparison spec: ``models/zaffran2022-aci-prices.toml`` (``[split] slide = true``,
``refit_every = 1``, the forest ``calibprob.examples.aci_prices:forest``), which calibrates on 545
residuals a day (the window's last day included) where this script, as the example it follows, takes 544.

Run (about 10 minutes on one core; the forecasts are cached)::

    python benchmarks/repro_aci_prices.py [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

ALPHA, GAMMA = 0.1, 0.04
FEATURES = (
    ["hour"] + [f"dow_{i}" for i in range(7)] + [f"lag_24_{i}" for i in range(24)] + [f"lag_168_{i}" for i in range(24)]
) + ["conso"]
CACHE = Path(os.environ.get("CALIBPROB_CACHE", "/work/cache")) / "aci_prices_rf.npz"


def load(data_dir: Path) -> tuple[np.ndarray, np.ndarray, int]:
    """Hour-0 features and prices, and the number of rows before 2019 (the training window's size)."""
    df = pd.read_csv(data_dir / "zaffran2022_prices.csv.gz")
    df = df[df["hour"] == 0].reset_index(drop=True)
    dates = pd.to_datetime(df["Date"], utc=True)
    train_size = int((dates < pd.Timestamp("2019-01-01", tz="UTC")).sum())
    return df[FEATURES].to_numpy(float), df["Spot"].to_numpy(float), train_size


def forecasts(X, y, train_size: int) -> dict[str, np.ndarray]:
    """Per test day: the forest's calibration predictions (second half of the window) and test prediction."""
    from sklearn.ensemble import RandomForestRegressor

    if CACHE.exists():
        with np.load(CACHE) as d:
            return {k: d[k] for k in d.files}
    half = train_size // 2
    days = len(y) - train_size
    cal_pred, test_pred = np.empty((days, half)), np.empty(days)
    t0 = time.perf_counter()
    for step in range(days):
        Xw, yw = X[step : step + train_size], y[step : step + train_size]
        rf = RandomForestRegressor(n_estimators=1000, min_samples_leaf=1, max_features=6, random_state=1)
        rf.fit(Xw[:half], yw[:half])
        cal_pred[step] = rf.predict(Xw[half : 2 * half])
        test_pred[step] = rf.predict(X[train_size + step : train_size + step + 1])[0]
        if step % 30 == 0:
            print(f"day {step}/{days}: {time.perf_counter() - t0:.0f} s", flush=True)
    out = {"cal_pred": cal_pred, "test_pred": test_pred}
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    np.savez(CACHE, **out)
    return out


def run_aci(y, train_size: int, f: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, object]:
    """calibprob's ACI over the 365 test days: (lower, upper) per day and the fitted object."""
    import calibprob
    from calibprob.calibrators.online.aci import AdaptiveConformalInterval

    half = train_size // 2
    point = lambda mu: calibprob.normal(np.atleast_1d(mu), np.ones(np.size(mu)))  # noqa: E731 (the mean is what counts)
    aci = AdaptiveConformalInterval(confidence_level=1 - ALPHA, gamma=GAMMA, infinite="allow")
    days = f["test_pred"].size
    lower, upper = np.empty(days), np.empty(days)
    for step in range(days):
        y_cal = y[step + half : step + 2 * half]
        if step == 0:
            aci.fit(point(f["cal_pred"][0]), y_cal)
        else:
            aci.calibrate(point(f["cal_pred"][step]), y_cal)
        ds = aci.predict_interval(point(f["test_pred"][step]), [1 - ALPHA])  # a list: the dimension kept
        lower[step], upper[step] = float(ds["lower"].values[0, 0]), float(ds["upper"].values[0, 0])
        aci.update(point(f["test_pred"][step]), [y[train_size + step]])
    return lower, upper, aci


def run_agaci(y, train_size: int, f: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, object]:
    """calibprob's AgACI (Zaffran et al. 2022) on the same forests and protocol: the authors' grid of gamma."""
    import calibprob

    half = train_size // 2
    point = lambda mu: calibprob.normal(np.atleast_1d(mu), np.ones(np.size(mu)))  # noqa: E731 (the mean is what counts)
    ag = calibprob.AgACIInterval(confidence_level=1 - ALPHA)
    days = f["test_pred"].size
    lower, upper = np.empty(days), np.empty(days)
    for step in range(days):
        y_cal = y[step + half : step + 2 * half]
        if step == 0:
            ag.fit(point(f["cal_pred"][0]), y_cal)
        else:
            ag.calibrate(point(f["cal_pred"][step]), y_cal)
        ds = ag.predict_interval(point(f["test_pred"][step]))
        lower[step], upper[step] = float(ds["lower"].values[0, 0]), float(ds["upper"].values[0, 0])
        ag.update(point(f["test_pred"][step]), [y[train_size + step]])
    return lower, upper, ag


def summary(y_test, lower, upper) -> dict[str, float]:
    finite = np.isfinite(upper - lower)
    return {
        "coverage": float(np.mean((y_test >= lower) & (y_test <= upper))),
        "mean_width": float(np.mean((upper - lower)[finite])),
        "median_width": float(np.median(upper - lower)),
        "infinite": int((~finite).sum()),
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = ap.parse_args(argv)
    X, y, train_size = load(args.data)
    f = forecasts(X, y, train_size)
    lower, upper, aci = run_aci(y, train_size, f)
    y_test = y[train_size:]
    ref = pd.read_csv(args.data / "reference" / "zaffran2022_aci_reference.csv")
    ours, theirs = summary(y_test, lower, upper), summary(y_test, ref["Y_inf"].to_numpy(), ref["Y_sup"].to_numpy())
    print(f"train_size {train_size}, test days {y_test.size}")
    print("calibprob ACI:", ", ".join(f"{k} {v:.4g}" for k, v in ours.items()))
    print("authors' ACI: ", ", ".join(f"{k} {v:.4g}" for k, v in theirs.items()))
    ag_lower, ag_upper, ag = run_agaci(y, train_size, f)
    agaci = summary(y_test, ag_lower, ag_upper)
    print(
        "calibprob AgACI:", ", ".join(f"{k} {v:.4g}" for k, v in agaci.items()), f"thresholded {ag.n_thresholded_[0]}"
    )
    both = np.isfinite(upper) & np.isfinite(ref["Y_sup"].to_numpy())
    print(
        f"bounds vs the authors' (finite days): median |lower diff| "
        f"{np.median(np.abs(lower - ref['Y_inf'].to_numpy())[both]):.3g}, median |upper diff| "
        f"{np.median(np.abs(upper - ref['Y_sup'].to_numpy())[both]):.3g} EUR/MWh; "
        f"long-run bound {aci.coverage_error_bound()[0]:.3f}"
    )


if __name__ == "__main__":
    main()
