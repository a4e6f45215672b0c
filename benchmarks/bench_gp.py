"""Exact-GP fit: calibprob against scikit-learn, side by side, and against the BLAS floor.

Usage::

    python benchmarks/bench_gp.py                      # n = 500, 1000, 2000, 3000
    python benchmarks/bench_gp.py --n 500 1000 --sklearn-max-n 2000

Same data, model, starts and box for both (TARGETS.md, P10): a smooth function
of d = 4 uniform inputs plus noise (y centred, so the zero-mean model suits it);
ARD squared-exponential kernel with an estimated noise variance, zero mean,
maximum likelihood, three starts. calibprob runs its own fit
(``GaussianProcessRegressor(n_restarts=3, random_state=0)``: a start scan over
the signal variance without gradients, then L-BFGS-B from each start);
scikit-learn's ``GaussianProcessRegressor`` with the kernel
``C * RBF(ARD) + WhiteKernel`` gets the same three starting points (calibprob's,
mapped to scikit-learn's parameter order) and the same box through a custom
``optimizer`` running the same L-BFGS-B. ``--starts raw`` (default) hands it
calibprob's starting points (the scan is part of calibprob's method and time);
``--starts scanned`` hands it the points calibprob's L-BFGS-B starts from after
the scan, so both solve the identical problem and the ratio is the cost per
evaluation. Either way the optima must agree (``rel dLML``).

Columns: fit wall time of each, their ratio, the log marginal likelihood of
each and their relative difference, calibprob's objective evaluations (value
only / value and gradient), and ``floor x``: calibprob's fit time divided by
(number of evaluations x the time of one Cholesky plus one triangular solve at
that n, best of 5). Fits run one after the other in this process with one BLAS
thread (``OPENBLAS_NUM_THREADS=1`` is set before NumPy loads unless already set);
the machine load (``os.getloadavg``) is printed before and after each row.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")


def _data(n: int, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 4))
    y = np.sin(3 * X[:, 0]) + np.cos(2 * X[:, 1] * X[:, 2]) + 0.5 * X[:, 3] + 0.1 * rng.normal(size=n)
    return X, y - y.mean()


def _floor(n: int) -> float:
    """Best-of-5 time of one Cholesky + one triangular solve of an n x n SE covariance."""
    import numpy as np
    import scipy.linalg

    X, y = _data(n)
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    K = np.exp(-d2 / 0.5) + 0.01 * np.eye(n)
    best = np.inf
    for _ in range(5):
        t = time.perf_counter()
        L = scipy.linalg.lapack.dpotrf(K, lower=1)[0]
        scipy.linalg.lapack.dtrtrs(L, y, lower=1)
        best = min(best, time.perf_counter() - t)
    return best


def _calibprob(X, y):
    from calibprob.gp import GaussianProcessRegressor

    t = time.perf_counter()
    gp = GaussianProcessRegressor(n_restarts=3, random_state=0).fit(X, y)
    return gp, time.perf_counter() - t


def _sklearn(X, y, gp, which="starts"):
    """scikit-learn from calibprob's starts (``which``) and box, in its parameter order."""
    import numpy as np
    from scipy.optimize import fmin_l_bfgs_b
    from sklearn.gaussian_process import GaussianProcessRegressor as SkGP
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    info = gp.fit_info_
    d = X.shape[1]
    shift = 2.0 * np.log(info["y_scale"])  # calibprob's box / starts are for y / y_scale
    # calibprob: [log l (d), log var, log noise]; sklearn: [log C, log l (d), log noise]
    perm = [d] + list(range(d)) + [d + 1]
    lo = np.log([b[0] for b in info["bounds"].values()])
    hi = np.log([b[1] for b in info["bounds"].values()])
    lo[d:] += shift
    hi[d:] += shift
    starts = [np.asarray(x0, float).copy() for x0 in info[which]]
    for x0 in starts:
        x0[d:] += shift
    box = np.column_stack([lo, hi])[perm]
    queue = [x0[perm] for x0 in starts]

    def optimizer(obj_func, initial_theta, bounds=None):
        x0 = queue.pop(0)
        x, f, _ = fmin_l_bfgs_b(obj_func, x0, bounds=box, maxiter=300)
        return x, f

    kernel = ConstantKernel(1.0, tuple(np.exp(box[0]))) * RBF(
        np.ones(d), [tuple(b) for b in np.exp(box[1 : d + 1])]
    ) + WhiteKernel(1.0, tuple(np.exp(box[d + 1])))
    sk = SkGP(kernel, optimizer=optimizer, n_restarts_optimizer=len(starts) - 1, normalize_y=False, random_state=0)
    t = time.perf_counter()
    sk.fit(X, y)
    return sk, time.perf_counter() - t


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[500, 1000, 2000, 3000])
    parser.add_argument(
        "--starts",
        choices=["raw", "scanned"],
        default="raw",
        help="scikit-learn starts from calibprob's starting points ('raw', the default: "
        "both optimisers get the same initial points and calibprob's value-only "
        "start scan is part of its time) or from the points calibprob's "
        "L-BFGS-B starts from after that scan ('scanned': the identical "
        "L-BFGS-B problem, so the ratio is the cost per evaluation)",
    )
    parser.add_argument(
        "--sklearn-max-n", type=int, default=3000, help="skip scikit-learn above this n (it takes minutes at n = 3000)"
    )
    args = parser.parse_args(argv)

    import numpy as np

    from calibprob.gp import GaussianProcessRegressor

    # compile nothing, warm the imports and BLAS: a tiny fit first
    X, y = _data(50)
    GaussianProcessRegressor(random_state=0).fit(X, y)

    header = (
        f"{'n':>5} | {'calibprob':>9} {'sklearn':>9} {'ratio':>6} | {'LML calibprob':>14} "
        f"{'LML sklearn':>14} {'rel dLML':>9} | {'evals v/vg':>10} {'chol+solve':>10} "
        f"{'floor x':>7} | load"
    )
    print(header)
    print("-" * len(header))
    for n in args.n:
        load0 = os.getloadavg()[0]
        X, y = _data(n)
        gp, t_cp = _calibprob(X, y)
        ev = gp.fit_info_["n_evaluations"]
        n_eval = ev["value"] + ev["value_and_grad"]
        floor = _floor(n)
        lml_cp = gp.log_marginal_likelihood_value_
        if n <= args.sklearn_max_n:
            sk, t_sk = _sklearn(X, y, gp, "starts" if args.starts == "raw" else "lbfgs_starts")
            lml_sk = float(sk.log_marginal_likelihood_value_)
            ratio = f"{t_cp / t_sk:6.3f}"
            sk_txt = f"{t_sk:8.1f}s"
            lml_sk_txt = f"{lml_sk:14.6f}"
            rel = f"{abs(lml_cp - lml_sk) / abs(lml_sk):9.1e}"
        else:
            ratio, sk_txt, lml_sk_txt, rel = f"{'-':>6}", f"{'-':>9}", f"{'-':>14}", f"{'-':>9}"
        print(
            f"{n:>5} | {t_cp:8.1f}s {sk_txt} {ratio} | {lml_cp:14.6f} {lml_sk_txt} {rel} | "
            f"{ev['value']:>4}/{ev['value_and_grad']:<5} {floor * 1e3:8.1f}ms "
            f"{t_cp / (n_eval * floor):7.2f} | {load0:.2f}->{os.getloadavg()[0]:.2f}",
            flush=True,
        )
    print(
        f"\nOPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}, cores={os.cpu_count()}; "
        f"calibprob BLAS policy: {gp.fit_info_.get('blas_threads')} ({gp.fit_info_.get('blas_reason')}); "
        f"scikit-learn from calibprob's {args.starts} starts; "
        "'floor x' = calibprob fit / (evaluations x (Cholesky + solve)); numpy "
        f"{np.__version__}"
    )


if __name__ == "__main__":
    main()
