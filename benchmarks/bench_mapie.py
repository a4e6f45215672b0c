"""J+GP (closed-form leave-one-out) vs MAPIE's jackknife+ with scikit-learn's GP (TARGETS.md P2).

The anchor is MAPIE 1.6 ``CrossConformalRegressor(method="plus", cv=LeaveOneOut())``
around scikit-learn's ``GaussianProcessRegressor`` with a *fixed* kernel
(``optimizer=None``): n GP refits, each an O(n³) Cholesky. calibprob's
:class:`~calibprob.calibrators.conformal.JackknifePlusGP` with ``score="absolute"`` computes the
same jackknife+ (absolute residual score, GP at fixed hyperparameters, zero mean)
from one factorisation by the rank-one downdate — no refits. Both run on identical
arrays with one BLAS thread; the script prints both wall times, the ratio
(target >= 50x), the empirical coverage of both on the test points, and the largest
interval difference (MAPIE's quantile convention — ``np.quantile`` with
``method="higher"``/``"lower"`` on n scores — agrees with Barber et al.'s ranks
used by calibprob up to ties).

MAPIE and scikit-learn live in a separate Python 3.11 environment, never in
calibprob's dependencies. Build it once::

    python3.11 -m venv /tmp/mapie-venv
    /tmp/mapie-venv/bin/pip install "mapie==1.6.*" scikit-learn numpy

and run::

    .venv/bin/python benchmarks/bench_mapie.py --mapie /tmp/mapie-venv/bin/python [--n 500] [--m 1000]

(the script calls itself under the MAPIE interpreter with ``--mapie-side``).
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
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

LENGTHSCALE = 0.3
VARIANCE = 1.0
NOISE = 0.01
LEVEL = 0.9


def make_data(n, m, seed=0):
    rng = np.random.default_rng(seed)

    def f(Z):
        return np.sin(5 * Z[:, 0]) + np.cos(3 * Z[:, 1]) + Z[:, 0] * Z[:, 1]

    X, Xt = rng.uniform(size=(n, 2)), rng.uniform(size=(m, 2))
    return X, f(X) + 0.1 * rng.normal(size=n), Xt, f(Xt) + 0.1 * rng.normal(size=m)


def mapie_side(npz, out):
    """Runs under the MAPIE interpreter: jackknife+ with n scikit-learn GP refits."""
    from mapie import __version__ as mapie_version
    from mapie.regression import CrossConformalRegressor
    from sklearn import __version__ as sklearn_version
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern
    from sklearn.model_selection import LeaveOneOut

    d = np.load(npz)
    kernel = ConstantKernel(VARIANCE, constant_value_bounds="fixed") * Matern(
        LENGTHSCALE, length_scale_bounds="fixed", nu=2.5
    )
    gp = GaussianProcessRegressor(kernel=kernel, alpha=NOISE, optimizer=None, normalize_y=False)
    t0 = time.perf_counter()
    reg = CrossConformalRegressor(gp, confidence_level=LEVEL, method="plus", cv=LeaveOneOut())
    reg.fit_conformalize(d["X"], d["y"])
    _, iv = reg.predict_interval(d["Xt"])
    elapsed = time.perf_counter() - t0
    np.savez(out, lower=iv[:, 0, 0], upper=iv[:, 1, 0])
    print("RESULT " + json.dumps({"seconds": elapsed, "mapie": mapie_version, "sklearn": sklearn_version}))


def calibprob_side(X, y, Xt, repeat):
    from calibprob.bases.gp import GaussianProcessRegressor
    from calibprob.calibrators.conformal import JackknifePlusGP

    theta = {"lengthscale": LENGTHSCALE, "variance": VARIANCE, "noise": NOISE}
    best, iv = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        gp = GaussianProcessRegressor(kernel="matern", p=2, mean="zero", theta=theta, optimize=False)
        iv = JackknifePlusGP(estimator=gp, score="absolute", confidence_level=LEVEL).fit(X, y).predict_interval(Xt)
        best = min(best, time.perf_counter() - t0)
    return best, np.asarray(iv["lower"]).ravel(), np.asarray(iv["upper"]).ravel()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mapie", help="python of the MAPIE environment")
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--mapie-side", nargs=2, metavar=("NPZ", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mapie_side:
        mapie_side(*args.mapie_side)
        return
    if not args.mapie:
        # `make bench` runs every script without arguments: skip, saying how to run it
        print(
            "P2  skipped: MAPIE lives in a separate environment; run with --mapie /path/to/python "
            "(this script's docstring shows how to build it)"
        )
        return
    X, y, Xt, yt = make_data(args.n, args.m)
    with tempfile.TemporaryDirectory() as tmp:
        npz, out = Path(tmp) / "data.npz", Path(tmp) / "mapie.npz"
        np.savez(npz, X=X, y=y, Xt=Xt)
        proc = subprocess.run(
            [args.mapie, __file__, "--mapie-side", str(npz), str(out)],
            capture_output=True,
            text=True,
            env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
        )
        if proc.returncode != 0:
            sys.exit(f"MAPIE side failed:\n{proc.stderr}")
        info = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])
        mp = np.load(out)
        lo_m, hi_m = mp["lower"], mp["upper"]
    t_c, lo_c, hi_c = calibprob_side(X, y, Xt, args.repeat)
    cov_c = float(np.mean((yt >= lo_c) & (yt <= hi_c)))
    cov_m = float(np.mean((yt >= lo_m) & (yt <= hi_m)))
    diff = float(max(np.abs(lo_c - lo_m).max(), np.abs(hi_c - hi_m).max()))
    print(f"P2  jackknife+ with a fixed-kernel GP, n={args.n}, {args.m} test points, confidence {LEVEL}")
    print(
        f"    MAPIE {info['mapie']} CrossConformalRegressor(LeaveOneOut) + scikit-learn {info['sklearn']} GP: "
        f"{info['seconds']:9.3f} s"
    )
    print(f"    calibprob JackknifePlusGP(score='absolute'), closed-form LOO (best of {args.repeat}): {t_c:9.4f} s")
    print(f"    speed-up {info['seconds'] / t_c:8.1f}x   (target >= 50x)")
    print(
        f"    test coverage: calibprob {cov_c:.3f}, MAPIE {cov_m:.3f}; mean width calibprob "
        f"{np.mean(hi_c - lo_c):.4f}, MAPIE {np.mean(hi_m - lo_m):.4f}; max |interval difference| {diff:.2e}"
    )


if __name__ == "__main__":
    main()
