"""GP fit time, cold and warm, and the Cholesky share of it (a script, not a test).

Usage::

    python benchmarks/bench_gp.py                       # n = 300, 1000, 3000, FAST_COMPILE
    python benchmarks/bench_gp.py --n 300 1000 --modes FAST_COMPILE NUMBA CVM

Every measurement runs in a fresh subprocess. "cold" uses an empty PyTensor
cache directory (``PYTENSOR_FLAGS=base_compiledir=<new temp dir>``); "warm" is
a second fresh process on the same, now populated, directory; "repeat" is a
second fit inside the warm process (compiled function already in memory).
The data are a smooth function of d = 4 uniform inputs plus noise; the model is
the default ``GaussianProcessRegressor`` (ARD SE, zero mean, noise, ML,
3 L-BFGS-B starts) and, for comparison, ``SparseGaussianProcessRegressor``
with 300 inducing points. The Cholesky share is the time spent in
``scipy.linalg.cholesky`` plus ``lapack.dpotri`` (inverse from the factor)
during the warm fit, divided by the fit time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def _worker(n: int, mode: str, kind: str, repeat: bool) -> dict:
    t0 = time.perf_counter()
    import numpy as np
    import scipy.linalg

    import calibprob.gp._objective as obj
    from calibprob.gp import GaussianProcessRegressor, SparseGaussianProcessRegressor

    t_import = time.perf_counter() - t0
    spent = {"chol": 0.0, "potri": 0.0, "n_chol": 0}
    chol, potri = scipy.linalg.cholesky, scipy.linalg.lapack.dpotri

    def timed_chol(*a, **k):
        t = time.perf_counter()
        try:
            return chol(*a, **k)
        finally:
            spent["chol"] += time.perf_counter() - t
            spent["n_chol"] += 1

    def timed_potri(*a, **k):
        t = time.perf_counter()
        try:
            return potri(*a, **k)
        finally:
            spent["potri"] += time.perf_counter() - t

    scipy.linalg.cholesky = timed_chol
    obj.scipy.linalg.lapack.dpotri = timed_potri

    rng = np.random.default_rng(0)
    X = rng.uniform(size=(n, 4))
    y = np.sin(3 * X[:, 0]) + np.cos(2 * X[:, 1] * X[:, 2]) + 0.5 * X[:, 3] + 0.1 * rng.normal(size=n)
    mode_arg = None if mode == "default" else mode

    def make():
        if kind == "vfe":
            return SparseGaussianProcessRegressor(n_inducing=300, random_state=0, compile_mode=mode_arg)
        return GaussianProcessRegressor(random_state=0, compile_mode=mode_arg)

    t = time.perf_counter()
    gp = make().fit(X, y)
    t_fit = time.perf_counter() - t
    out = {
        "import": t_import,
        "fit": t_fit,
        "chol": spent["chol"],
        "potri": spent["potri"],
        "n_chol": spent["n_chol"],
        "n_iter": sum(gp.fit_info_["n_iter"]),
    }
    if repeat:
        t = time.perf_counter()
        make().fit(X, y)
        out["repeat"] = time.perf_counter() - t
    return out


def _run(n, mode, kind, cache, repeat):
    env = dict(os.environ, PYTENSOR_FLAGS=f"base_compiledir={cache}")
    cmd = [sys.executable, __file__, "--worker", str(n), mode, kind, str(int(repeat))]
    t = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-3000:])
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out["wall"] = wall
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[300, 1000, 3000])
    parser.add_argument("--modes", nargs="+", default=["FAST_COMPILE"],
                        help="PyTensor modes: FAST_COMPILE, NUMBA, CVM, default")
    parser.add_argument("--no-sparse", action="store_true", help="skip the VFE rows")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        n, mode, kind, repeat = args.worker
        print(json.dumps(_worker(int(n), mode, kind, bool(int(repeat)))))
        return

    kinds = ["exact"] + ([] if args.no_sparse else ["vfe"])
    header = (f"{'model':<6} {'mode':<13} {'n':>5} | {'cold wall':>9} {'cold fit':>9} | "
              f"{'warm wall':>9} {'warm fit':>9} {'repeat':>8} | {'iters':>5} {'chol share':>10}")
    print(header)
    print("-" * len(header))
    for kind in kinds:
        for mode in args.modes:
            for n in args.n:
                with tempfile.TemporaryDirectory(prefix="pytensor-bench-") as cache:
                    cold = _run(n, mode, kind, cache, repeat=False)
                    warm = _run(n, mode, kind, cache, repeat=n <= 1000)
                share = (warm["chol"] + warm["potri"]) / warm["fit"]
                share_txt = f"{share:9.0%}" if kind == "exact" else f"{'n/a':>9}"
                rep = f"{warm['repeat']:7.1f}s" if "repeat" in warm else f"{'-':>8}"
                print(f"{kind:<6} {mode:<13} {n:>5} | {cold['wall']:8.1f}s {cold['fit']:8.1f}s | "
                      f"{warm['wall']:8.1f}s {warm['fit']:8.1f}s {rep} | {warm['n_iter']:>5} "
                      f"{share_txt}", flush=True)

    print(f"\nOPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, "
          f"cores={os.cpu_count()}; 'chol share' = (cholesky + dpotri) / warm fit time "
          "(exact GP; the VFE bound's O(nm^2) Cholesky runs inside PyTensor)")


if __name__ == "__main__":
    main()
