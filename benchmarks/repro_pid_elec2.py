"""Conformal PID beside ACI on ELEC2 demand (Angelopoulos, Candès & Tibshirani 2023's elec2 series; issue 38).

The conformal-PID authors' elec2 configuration (aangelopoulos/conformal-time-series
``tests/configs/elec2.yaml`` and ``tests/datasets.py``): ``nswdemand``, the first 2000 half-hours of
``elec2.csv``, α = 0.1, a burn-in of 300, the PID grid lr ∈ {1, 0.5, 0.1, 0.05} with Csat = 5, KI = 10 and
a scorecaster, ACI's grid γ ∈ {0.1, 0.05, 0.01, 0.005}. Here:

* the base: an AR(3) with intercept refitted by least squares on every past value (the authors'
  ``elec2-ar3`` forecaster is an AR(3) as well), a forecast for every half-hour from t = 50 on;
* the scores: absolute residuals (one symmetric interval per step; the authors also run signed
  residuals at α/2 per side), the first 300 forecasts calibrate, the other 1650 are the test stream;
* calibprob's :class:`~calibprob.ConformalPIDInterval` (scorecaster ``"ar"`` in place of the authors'
  Theta model, which needs statsmodels; ``proportional_lr="burnin"``) beside
  :class:`~calibprob.AdaptiveConformalInterval` with the paper's infinite sets (``infinite="allow"``)
  and a 300-score window.

Reported per method: coverage, mean and median width over the finite intervals, the number of
infinite (ACI) or clipped (PID) intervals, the longest run of misses, and the long-run bound.

Run (about a minute)::

    python benchmarks/repro_pid_elec2.py [--data ../shared/data]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

ALPHA, BURNIN, N_ROWS, START = 0.1, 300, 2000, 50
PID_LRS, ACI_GAMMAS = (1.0, 0.5, 0.1, 0.05), (0.1, 0.05, 0.01, 0.005)
CSAT, KI = 5.0, 10.0


def load(data_dir: Path) -> np.ndarray:
    """``nswdemand`` of the first 2000 half-hours (the authors' ``df[:2000]``)."""
    import pandas as pd

    return pd.read_csv(data_dir / "elec2.csv", usecols=["nswdemand"])["nswdemand"].to_numpy(float)[:N_ROWS]


#: The series as the repository ships it (``models/data``): each half-hour from the 4th with its three lags.
BUNDLED = Path(__file__).resolve().parents[1] / "models" / "data" / "angelopoulos2023_elec2_nswdemand.csv"


def load_bundled(path: Path = BUNDLED) -> np.ndarray:
    """The same 2000 values from the repository's extract (the first row's lags give the first three)."""
    import pandas as pd

    df = pd.read_csv(path)
    first = df.iloc[0]
    return np.r_[first["lag3"], first["lag2"], first["lag1"], df["nswdemand"].to_numpy(float)]


def ar3_forecasts(y: np.ndarray, order: int = 3) -> np.ndarray:
    """One-step AR(order) forecasts with intercept, refitted by least squares on y[:t], for t = START .. end."""
    out = np.empty(y.size - START)
    for t in range(START, y.size):
        h = y[:t]
        X = np.column_stack([np.ones(t - order)] + [h[order - 1 - j : t - 1 - j] for j in range(order)])
        beta, *_ = np.linalg.lstsq(X, h[order:], rcond=None)
        out[t - START] = beta[0] + beta[1:] @ h[::-1][:order]
    return out


def run(y: np.ndarray, mu: np.ndarray, make) -> dict:
    """Calibrate ``make()`` on the first BURNIN forecasts, then issue and update along the rest."""
    import calibprob

    point = lambda m: calibprob.normal(np.atleast_1d(m), np.ones(np.size(m)))  # noqa: E731 (the mean is what counts)
    yy = y[START:]
    est = make().fit(point(mu[:BURNIN]), yy[:BURNIN])
    n = yy.size - BURNIN
    lower, upper = np.empty(n), np.empty(n)
    for i in range(n):
        f = point(mu[BURNIN + i])
        ds = est.predict_interval(f)
        lower[i], upper[i] = float(ds["lower"].values.reshape(-1)[0]), float(ds["upper"].values.reshape(-1)[0])
        est.update(f, [yy[BURNIN + i]])
    return summary(yy[BURNIN:], lower, upper, est)


def summary(y, lower, upper, est) -> dict:
    miss = (y < lower) | (y > upper)
    runs, cur = 0, 0
    for m in miss:
        cur = cur + 1 if m else 0
        runs = max(runs, cur)
    width = upper - lower
    finite = np.isfinite(width)
    return {
        "coverage": float(1 - miss.mean()),
        "mean_width": float(width[finite].mean()),
        "median_width": float(np.median(width)),
        "infinite": int((~finite).sum()),
        "clipped": int(getattr(est, "n_clipped_", np.zeros(1))[0]),
        "longest_miss_run": int(runs),
        "bound": float(est.coverage_error_bound()[0]),
    }


def compare(data_dir: Path) -> dict[str, dict]:
    """Every method of the grid on the same forecasts: {name: summary}."""
    import warnings

    import calibprob

    y = load(data_dir) if (data_dir / "elec2.csv").exists() else load_bundled()
    mu = ar3_forecasts(y)
    out = {}
    for lr in PID_LRS:
        out[f"PID lr={lr:g}"] = run(
            y,
            mu,
            lambda lr=lr: calibprob.ConformalPIDInterval(
                confidence_level=1 - ALPHA, lr=lr, csat=CSAT, ki=KI, burnin=BURNIN, scorecaster="ar"
            ),
        )
    for g in ACI_GAMMAS:
        with warnings.catch_warnings():  # gamma = 0.005 makes Proposition 4.1 vacuous over 1650 steps: reported
            warnings.simplefilter("ignore", calibprob.CalibprobWarning)
            out[f"ACI gamma={g:g}"] = run(
                y,
                mu,
                lambda g=g: calibprob.AdaptiveConformalInterval(
                    confidence_level=1 - ALPHA, gamma=g, window=BURNIN, infinite="allow"
                ),
            )
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = ap.parse_args(argv)
    res = compare(args.data)
    print(f"elec2 nswdemand, first {N_ROWS} half-hours, AR(3) base, calibrate {BURNIN}, test {N_ROWS - START - BURNIN}")
    print(f"{'method':<16} {'cov':>6} {'mean w':>8} {'median w':>9} {'inf':>4} {'clip':>4} {'run':>4} {'bound':>7}")
    for name, r in res.items():
        print(
            f"{name:<16} {r['coverage']:6.3f} {r['mean_width']:8.4f} {r['median_width']:9.4f} {r['infinite']:4d} "
            f"{r['clipped']:4d} {r['longest_miss_run']:4d} {r['bound']:7.3f}"
        )


if __name__ == "__main__":
    main()
