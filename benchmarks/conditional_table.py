"""Per-group 90 % coverage and width: marginal vs Mondrian vs CQR vs conditional conformal.

Two bundled data sets with a natural group: Auto MPG by the car's origin (392 cars) and a seeded
subsample of diamonds by cut. Over ``--splits`` seeded train / calibrate / test splits (40 / 30 /
30 %), the base is calibrated by

* the marginal calibrators: split conformal (normalised score), the conformal predictive system
  (CPS) and isotonic recalibration, each fitted on all calibration points;
* their Mondrian versions (``groups=``): one calibrator per group;
* CQR (two-sided score) on a quantile-GBM base (its own, uncalibrated, row too), marginal and
  Mondrian;
* ``ConditionalConformal`` with the group indicators as the function class (Gibbs, Cherian &
  Candès 2023; with disjoint groups it coincides with Mondrian split conformal).

Every number comes from :func:`calibprob.evaluate` with ``groups=`` (its ``group_coverage``,
``group_count``, ``group_width``, ``coverage`` and ``width`` at 0.9). Per-group coverage is pooled
over the splits (covered test points / test points of the group), "worst" is the smallest pooled
group coverage and "worst/split" the mean over splits of ``worst_group_coverage``; "∞" counts
the test points (over all splits) given an infinite 0.9 interval, which ``evaluate`` counts as
covering. Widths are
means over splits of the per-split mean width (an infinite interval, the honest answer of a
Mondrian group too small for the level, would show as inf).

Run::

    python benchmarks/conditional_table.py            # both data sets, 10 splits each

Interval-only methods are predicted at :func:`calibprob.metrics.interval_levels` ``([0.9])``, the
levels :func:`calibprob.evaluate` needs for the IAE; a Mondrian group too small for the outer
levels (0.98) gets infinite bounds there with a warning, which does not touch the 0.9 figures and
is silenced here.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import calibprob
from calibprob.datasets import load_dataset, train_calibrate_test_split
from calibprob.metrics import interval_levels

LEVEL = 0.9
LEVELS = list(interval_levels([LEVEL]))
ORIGIN = {1: "USA", 2: "Europe", 3: "Japan"}


def load(name: str, subsample: int, seed: int):
    """The data set with its group labels as an ``obs`` coordinate ``group`` (strings)."""
    if name == "auto_mpg":
        ds = load_dataset("auto_mpg", groups="origin")
        return ds.assign_coords(group=("obs", [ORIGIN[int(v)] for v in ds["group"].values]))
    ds = load_dataset("diamonds", groups="cut")
    rows = np.sort(np.random.default_rng(seed).choice(ds.sizes["obs"], size=subsample, replace=False))
    return ds.isel(obs=rows)


def _parts(ds, seed: int):
    parts = train_calibrate_test_split(ds, (0.4, 0.3, 0.3), seed=seed)
    X = {k: v["X"].values for k, v in parts.items()}
    mean, sd = X["train"].mean(0), X["train"].std(0)
    sd = np.where(sd > 0, sd, 1.0)  # a one-hot column constant on the training part
    Z = {k: (v - mean) / sd for k, v in X.items()}
    y = {k: v["y"].values for k, v in parts.items()}
    g = {k: v["group"].values for k, v in parts.items()}
    return Z, y, g


def predictions(Z, y, g, seed: int) -> dict:
    """Every method's test prediction on one split (a predictive Dataset or the interval family)."""
    ols = calibprob.LinearRegression().fit(Z["train"], y["train"])
    P = {k: ols.predict(Z[k]) for k in ("calibrate", "test")}
    gbm = calibprob.QuantileGradientBoosting(random_state=seed, min_samples_leaf=10).fit(Z["train"], y["train"])
    Q = {k: gbm.predict(Z[k]) for k in ("calibrate", "test")}
    yc, gc, gt = y["calibrate"], g["calibrate"], g["test"]
    out = {"OLS (base)": P["test"]}
    for name, make in (
        ("split conformal", lambda: calibprob.SplitConformalCalibrator(score="normalized")),
        ("CPS", calibprob.ConformalPredictiveSystem),
        ("isotonic", lambda: calibprob.IsotonicRecalibrator(extrapolate=True)),
    ):
        for tag, gcal, gtest in (("", None, None), (" Mondrian", gc, gt)):
            cal = make().fit(P["calibrate"], yc, groups=gcal)
            if name == "split conformal":
                out[name + tag] = cal.predict_interval(P["test"], LEVELS, groups=gtest)
            else:
                out[name + tag] = cal.predict(P["test"], groups=gtest)
    out["quantile GBM (base)"] = Q["test"]

    def cqr():
        return calibprob.ConformalizedQuantileRegression(confidence_level=LEVELS, missing_levels="interpolate")

    out["CQR"] = cqr().fit(Q["calibrate"], yc).predict(Q["test"])
    mondrian = calibprob.Mondrian(cqr()).fit(Q["calibrate"], yc, groups=gc)
    out["CQR Mondrian"] = mondrian.predict_interval(Q["test"], LEVELS, groups=gt)
    cc = calibprob.ConditionalConformal(score="normalized", confidence_level=LEVELS).fit(P["calibrate"], yc, groups=gc)
    out["conditional conformal"] = cc.predict(P["test"], groups=gt)
    return out


def _unbounded(pred) -> int:
    """Test points whose 0.9 interval is infinite (a Mondrian group too small for the level)."""
    if "upper" not in pred:
        return 0  # a predictive distribution's quantiles are finite by the contract
    upper = pred["upper"].sel(confidence_level=LEVEL, method="nearest")
    return int(np.isinf(upper.values).sum())


def run(name: str, splits: int, subsample: int) -> tuple[dict, list]:
    """Pooled hits and counts per group, and per-split marginal figures, for every method."""
    ds = load(name, subsample, seed=0)
    groups = sorted(set(ds["group"].values.tolist()))
    acc: dict = {}
    for s in range(splits):
        Z, y, g = _parts(ds, seed=s)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", calibprob.CalibprobWarning)
            preds = predictions(Z, y, g, seed=s)
            for method, pred in preds.items():
                m = calibprob.evaluate(pred, y["test"], [LEVEL], groups=g["test"]).sel(confidence_level=LEVEL)
                a = acc.setdefault(method, {"hits": 0.0, "n": 0.0, "gwidth": 0.0, "cov": [], "width": [], "worst": []})
                cov = m["group_coverage"].reindex(group=groups)
                cnt = m["group_count"].reindex(group=groups).fillna(0)
                a["hits"] = a["hits"] + (cov.fillna(0) * cnt).values
                a["n"] = a["n"] + cnt.values
                a["gwidth"] = a["gwidth"] + m["group_width"].reindex(group=groups).values / splits
                a["cov"].append(float(m["coverage"]))
                a["width"].append(float(m["width"]))
                a["worst"].append(float(m["worst_group_coverage"]))
                a["inf"] = a.get("inf", 0) + _unbounded(pred)
    return acc, groups


def table(name: str, acc: dict, groups: list, splits: int) -> str:
    """The markdown table of one data set."""
    n_test = acc["OLS (base)"]["n"]
    head = " | ".join(f"{k} (n={int(c)})" for k, c in zip(groups, n_test, strict=True))
    lines = [
        f"**{name}**, {splits} splits; per-group coverage pooled over splits (test points per group summed)",
        "",
        f"| method | coverage | worst group | worst/split | {head} | ∞ | width | "
        + " | ".join(f"width {k}" for k in groups)
        + " |",
        "|" + " --- |" * (6 + 2 * len(groups)),
    ]
    for method, a in acc.items():
        pooled = a["hits"] / a["n"]
        worst = int(np.argmin(pooled))
        row = [
            method,
            f"{np.mean(a['cov']):.3f}",
            f"{pooled[worst]:.3f} ({groups[worst]})",
            f"{np.mean(a['worst']):.3f}",
            *(f"{v:.3f}" for v in pooled),
            str(a["inf"]),
            f"{np.mean(a['width']):.4g}",
            *(f"{v:.4g}" for v in a["gwidth"]),
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=10, help="seeded train/calibrate/test splits per data set")
    ap.add_argument("--subsample", type=int, default=3000, help="diamonds rows (seeded subsample)")
    args = ap.parse_args(argv)
    for name, label in (("auto_mpg", "Auto MPG by origin"), ("diamonds", f"diamonds ({args.subsample} rows) by cut")):
        t0, c0 = time.perf_counter(), time.process_time()
        acc, groups = run(name, args.splits, args.subsample)
        print(table(label, acc, groups, args.splits))
        print(f"\n({time.perf_counter() - t0:.1f} s wall, {time.process_time() - c0:.1f} s CPU)\n")


if __name__ == "__main__":
    main()
