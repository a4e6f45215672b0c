"""EnbPI: calibprob beside MAPIE 1.6's ``TimeSeriesRegressor(method="enbpi")`` on the same resamples (issue 38, P21).

Both fit B = 30 ridge regressions on the *same* bootstrap resamples — MAPIE's
``BlockBootstrap(n_blocks=n, random_state=seed)`` (blocks of length 1: the i.i.d. bootstrap of the
paper) draws ``RandomState(seed).randint(0, n, n)`` per model, which is what
``calibprob.EnbPI(random_state=RandomState(seed))`` draws with ``choice(n, n)`` — and then issue a
one-step-ahead 90 % interval for every point of a drifting stream, taking each outcome after its
interval (the residual window slides by one). The algorithms are the same when calibprob is given
MAPIE's conventions: ``center="mean"`` (MAPIE's ensemble prediction, the mean of the leave-one-out
predictions), the symmetric absolute score (``AbsoluteConformityScore(sym=True)``) and MAPIE's
``"higher"`` quantile (``quantile_method="higher"``); the script prints the largest interval
difference, which should be at rounding level. Where they differ by default and why: calibprob's
default quantile is the paper's ``np.percentile`` (``"linear"``); the paper's Algorithm 1 centres at
the (1 - α) quantile of the leave-one-out predictions (``center="quantile"``), MAPIE at their mean;
MAPIE's default score is the asymmetric one (``sym=False``: each tail at α/2 of the signed residuals),
calibprob's ``optimize_beta=True`` searches β instead of fixing α/2.

Timing: MAPIE's online API is ``predict`` then ``update`` per row; calibprob's
``predict_and_update`` does the same in one pass (the ensemble predicts the whole stream at once and
the window quantile is re-read after each admitted block). Each side runs in its own process with one
BLAS thread, the best of ``--repeat`` runs.

ACI (P22): calibprob's ``AdaptiveConformalInterval`` beside MAPIE 1.6's ``TimeSeriesRegressor(method="aci",
cv="prefit")`` on the *same* base predictions (MAPIE's estimator returns its single input column, which is the
prediction), the symmetric absolute score, γ = 0.005, 90 %, the scores sliding by one per outcome (MAPIE's
``update``; calibprob's ``window=n``). MAPIE's loop per row is ``predict``, then ``adapt_conformal_inference``
(which predicts again at the same level and moves it), then ``update``; calibprob's is
``predict_and_update`` (one pass) and, for the record, the row-by-row ``predict_interval`` / ``update``.
The two recursions are the same while α_t stays in [1/(n+1), 1): the noise here grows slowly, α_t stays
inside, and the intervals are equal bit for bit. Below 1/(n+1) MAPIE 1.6 raises (its symmetric branch does
not pass ``allow_infinite_bounds`` on) and clips α_t to [0, 1]; see ``tests/data/make_mapie_aci_reference.py``.

MAPIE lives in a separate environment (``/work/venvs/peers/bin/python`` here)::

    python benchmarks/bench_timeseries_mapie.py --mapie /work/venvs/peers/bin/python [--n 1000] [--m 2000] \
        [--which all|enbpi|aci]
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

LEVEL, B, SEED = 0.9, 30, 7


def make_data(n: int, m: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A linear series whose noise grows over time (n training points, then m stream points)."""
    rng = np.random.default_rng(seed)
    T = n + m
    X = rng.normal(size=(T, 5))
    return X, X @ [1.0, -1.0, 0.5, 0.0, 2.0] + (1.0 + 2.0 * np.arange(T) / T) * rng.normal(size=T)


def mapie_side(npz: str, out: str, repeat: int) -> None:
    """Runs under the MAPIE interpreter: fit, then predict / update row by row."""
    from mapie import __version__ as mapie_version
    from mapie.conformity_scores import AbsoluteConformityScore
    from mapie.regression import TimeSeriesRegressor
    from mapie.subsample import BlockBootstrap
    from sklearn.linear_model import Ridge

    # MAPIE 1.6 warns at every update that its confidence_level / optimize_beta arguments do nothing there
    warnings.filterwarnings("ignore", message=r"\s*This function behavior has been changed", category=UserWarning)
    d = np.load(npz)
    X, y, n = d["X"], d["y"], int(d["n"])
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        cv = BlockBootstrap(n_resamplings=B, n_blocks=n, overlapping=False, random_state=SEED)
        model = TimeSeriesRegressor(
            Ridge(), method="enbpi", cv=cv, agg_function="mean", conformity_score=AbsoluteConformityScore(sym=True)
        ).fit(X[:n], y[:n])
        lower, upper = np.empty(len(y) - n), np.empty(len(y) - n)
        for k, t in enumerate(range(n, len(y))):
            _, pis = model.predict(X[t : t + 1], ensemble=True, confidence_level=LEVEL, allow_infinite_bounds=True)
            lower[k], upper[k] = pis[0, 0, 0], pis[0, 1, 0]
            model.update(X[t : t + 1], y[t : t + 1], ensemble=True)
        best = min(best, time.perf_counter() - t0)
    np.savez(out, lower=lower, upper=upper)
    print("RESULT " + json.dumps({"seconds": best, "mapie": mapie_version}))


ACI_GAMMA, ACI_N = 0.005, 200


def make_aci_data(m: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Given predictions ``mu`` and outcomes whose noise grows (ACI_N calibration points, then m stream points)."""
    rng = np.random.default_rng(seed)
    T = ACI_N + m
    mu = rng.normal(size=T)
    return mu, mu + (1.0 + np.arange(T) / T) * rng.normal(size=T)


def mapie_aci_side(npz: str, out: str, repeat: int) -> None:
    """Runs under the MAPIE interpreter: prefit on the given predictions, then predict / adapt / update per row."""
    from mapie import __version__ as mapie_version
    from mapie.conformity_scores import AbsoluteConformityScore
    from mapie.regression import TimeSeriesRegressor
    from sklearn.base import BaseEstimator, RegressorMixin

    class GivenPredictions(RegressorMixin, BaseEstimator):
        def fit(self, X=None, y=None):
            self.fitted_, self.n_features_in_ = True, 1
            return self

        def predict(self, X):
            return np.asarray(X, float)[:, 0]

    warnings.filterwarnings("ignore", message=r"\s*This function behavior has been changed", category=UserWarning)
    d = np.load(npz)
    mu, y, n = d["mu"], d["y"], ACI_N
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        model = TimeSeriesRegressor(
            GivenPredictions().fit(), method="aci", cv="prefit", conformity_score=AbsoluteConformityScore(sym=True)
        ).fit(mu[:n, None], y[:n])
        lower, upper = np.empty(len(y) - n), np.empty(len(y) - n)
        for k, t in enumerate(range(n, len(y))):
            x, yt = mu[t : t + 1, None], y[t : t + 1]
            _, pis = model.predict(x, confidence_level=LEVEL, allow_infinite_bounds=True)
            lower[k], upper[k] = pis[0, 0, 0], pis[0, 1, 0]
            model.adapt_conformal_inference(x, yt, gamma=ACI_GAMMA)
            model.update(x, yt)
        best = min(best, time.perf_counter() - t0)
    np.savez(out, lower=lower, upper=upper)
    print("RESULT " + json.dumps({"seconds": best, "mapie": mapie_version}))


def calibprob_aci_side(mu, y, repeat: int) -> tuple[float, float, np.ndarray, np.ndarray]:
    """calibprob's ACI on the same predictions: predict_and_update (best of ``repeat``), and the row-by-row loop once."""
    import calibprob

    n, m = ACI_N, len(y) - ACI_N

    def fitted():
        aci = calibprob.AdaptiveConformalInterval(confidence_level=LEVEL, gamma=ACI_GAMMA, window=n, infinite="allow")
        return aci.fit(calibprob.normal(mu[:n], np.ones(n)), y[:n])

    best, iv = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        iv = fitted().predict_and_update(calibprob.normal(mu[n:], np.ones(m)), y[n:])
        best = min(best, time.perf_counter() - t0)
    t0 = time.perf_counter()
    aci, pred = fitted(), calibprob.normal(mu[n:], np.ones(m))
    for t in range(m):
        row = pred.isel(obs=[t])
        aci.predict_interval(row)
        aci.update(row, y[n + t : n + t + 1])
    loop = time.perf_counter() - t0
    return best, loop, iv["lower"].to_numpy(), iv["upper"].to_numpy()


def run_aci(mapie: str, m: int, repeat: int) -> None:
    mu, y = make_aci_data(m)
    with tempfile.TemporaryDirectory() as tmp:
        npz, out = Path(tmp) / "aci.npz", Path(tmp) / "mapie_aci.npz"
        np.savez(npz, mu=mu, y=y)
        proc = subprocess.run(
            [mapie, __file__, "--mapie-aci-side", str(npz), str(out), str(repeat)],
            capture_output=True,
            text=True,
            env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
        )
        if proc.returncode != 0:
            sys.exit(f"MAPIE ACI side failed:\n{proc.stderr}")
        info = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])
        mp = np.load(out)
        lo_m, hi_m = mp["lower"], mp["upper"]
    t_c, t_loop, lo_c, hi_c = calibprob_aci_side(mu, y, repeat)
    yt = y[ACI_N:]
    diff = float(max(np.abs(lo_c - lo_m).max(), np.abs(hi_c - hi_m).max()))
    print(f"P22 ACI, given predictions, gamma={ACI_GAMMA}, window {ACI_N}, {m} one-step-ahead intervals at {LEVEL}")
    print(
        f"    MAPIE {info['mapie']} TimeSeriesRegressor(aci), predict + adapt + update per row: {info['seconds']:8.3f} s"
    )
    print(f"    calibprob AdaptiveConformalInterval.predict_and_update (best of {repeat}):      {t_c:8.3f} s")
    print(f"    calibprob predict_interval + update per row (once):                        {t_loop:8.3f} s")
    print(f"    speed-up {info['seconds'] / t_c:6.1f}x (one pass); {info['seconds'] / t_loop:6.2f}x (row by row)")
    print(
        f"    coverage: calibprob {np.mean((yt >= lo_c) & (yt <= hi_c)):.3f}, MAPIE "
        f"{np.mean((yt >= lo_m) & (yt <= hi_m)):.3f}; max |interval difference| {diff:.2e}"
    )


def calibprob_side(X, y, n: int, repeat: int) -> tuple[float, np.ndarray, np.ndarray]:
    from sklearn.linear_model import Ridge

    import calibprob

    best, iv = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        enbpi = calibprob.EnbPI(
            Ridge(), n_bootstraps=B, random_state=np.random.RandomState(SEED), quantile_method="higher"
        ).fit(X[:n], y[:n])
        iv = enbpi.predict_and_update(X[n:], y[n:], confidence_level=LEVEL)
        best = min(best, time.perf_counter() - t0)
    return best, iv["lower"].to_numpy(), iv["upper"].to_numpy()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mapie", help="python of the MAPIE environment")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--m", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--which", choices=("all", "enbpi", "aci"), default="all")
    ap.add_argument("--mapie-side", nargs=3, metavar=("NPZ", "OUT", "REPEAT"), help=argparse.SUPPRESS)
    ap.add_argument("--mapie-aci-side", nargs=3, metavar=("NPZ", "OUT", "REPEAT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mapie_side:
        mapie_side(args.mapie_side[0], args.mapie_side[1], int(args.mapie_side[2]))
        return
    if args.mapie_aci_side:
        mapie_aci_side(args.mapie_aci_side[0], args.mapie_aci_side[1], int(args.mapie_aci_side[2]))
        return
    if not args.mapie:
        print("P21/P22 skipped: MAPIE lives in a separate environment; run with --mapie /path/to/python")
        return
    if args.which in ("all", "aci"):
        run_aci(args.mapie, args.m, args.repeat)
    if args.which == "aci":
        return
    X, y = make_data(args.n, args.m)
    with tempfile.TemporaryDirectory() as tmp:
        npz, out = Path(tmp) / "data.npz", Path(tmp) / "mapie.npz"
        np.savez(npz, X=X, y=y, n=args.n)
        proc = subprocess.run(
            [args.mapie, __file__, "--mapie-side", str(npz), str(out), str(args.repeat)],
            capture_output=True,
            text=True,
            env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
        )
        if proc.returncode != 0:
            sys.exit(f"MAPIE side failed:\n{proc.stderr}")
        info = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])
        mp = np.load(out)
        lo_m, hi_m = mp["lower"], mp["upper"]
    t_c, lo_c, hi_c = calibprob_side(X, y, args.n, args.repeat)
    yt = y[args.n :]
    diff = float(max(np.abs(lo_c - lo_m).max(), np.abs(hi_c - hi_m).max()))
    print(f"P21 EnbPI, ridge, B={B}, n={args.n} training points, {args.m} one-step-ahead intervals at {LEVEL}")
    print(f"    MAPIE {info['mapie']} TimeSeriesRegressor(enbpi), predict + update per row: {info['seconds']:8.3f} s")
    print(f"    calibprob EnbPI.fit + predict_and_update (best of {args.repeat}):            {t_c:8.3f} s")
    print(f"    speed-up {info['seconds'] / t_c:6.1f}x")
    print(
        f"    coverage: calibprob {np.mean((yt >= lo_c) & (yt <= hi_c)):.3f}, MAPIE "
        f"{np.mean((yt >= lo_m) & (yt <= hi_m)):.3f}; max |interval difference| {diff:.2e}"
    )


if __name__ == "__main__":
    main()
