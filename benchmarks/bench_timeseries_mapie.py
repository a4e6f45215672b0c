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

MAPIE lives in a separate environment (``/work/venvs/peers/bin/python`` here)::

    python benchmarks/bench_timeseries_mapie.py --mapie /work/venvs/peers/bin/python [--n 1000] [--m 2000]
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
    ap.add_argument("--mapie-side", nargs=3, metavar=("NPZ", "OUT", "REPEAT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mapie_side:
        mapie_side(args.mapie_side[0], args.mapie_side[1], int(args.mapie_side[2]))
        return
    if not args.mapie:
        print("P21 skipped: MAPIE lives in a separate environment; run with --mapie /path/to/python")
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
