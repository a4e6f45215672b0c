"""Exact GP at scale: hyperparameters on a subset, one factorisation on every row, against the sparse GP.

Usage::

    python benchmarks/bench_gp_scale.py                  # diamonds, n = 12 000 train rows
    python benchmarks/bench_gp_scale.py --n 4000 --test 2000

Data: the bundled ``calibprob.datasets.load_dataset("diamonds")`` (53 940 rows, 23
columns after one-hot encoding of the grades), target log(price); a seeded
split into ``--n`` training and ``--test`` test rows; X standardised with the
training columns' mean and sd. Each model is fitted in its own child process
(``multiprocessing`` with ``spawn``), so the peak resident memory reported
(``resource.getrusage(RUSAGE_SELF).ru_maxrss`` of that child) is that fit's and
predict's alone:

* ``exact GP, subset θ``: ``GaussianProcessRegressor(mean="constant",
  random_state=0)`` with the automatic ``n_hyper_subset`` (above 4000 rows: the
  hyperparameters of a 2000-row subset, which is itself fitted on 500 rows and
  refined on its 2000; then one Cholesky factorisation of all rows);
* ``sparse GP (m = 300)``: ``SparseGaussianProcessRegressor(n_inducing=300,
  mean="constant", random_state=0)`` (k-means inducing points, VFE bound).

Columns: fit and predict wall time (and, in the note, their CPU time: on a shared
machine the wall time grows with the load, the CPU time hardly), peak RSS, test NLL (mean negative log
predictive density of the Gaussian predictive, on the log-price scale), the
load before and after. One BLAS thread (``OPENBLAS_NUM_THREADS=1`` unless set).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")


def _data(n: int, n_test: int, seed: int = 0):
    import numpy as np

    from calibprob.datasets import load_dataset

    ds = load_dataset("diamonds")
    X = np.asarray(ds["X"].values, float)
    y = np.log(np.asarray(ds["y"].values, float))
    idx = np.random.default_rng(seed).permutation(len(y))
    tr, te = idx[:n], idx[n : n + n_test]
    mu, sd = X[tr].mean(axis=0), X[tr].std(axis=0)
    sd[sd == 0] = 1.0
    return (X[tr] - mu) / sd, y[tr], (X[te] - mu) / sd, y[te]


def _run(kind: str, n: int, n_test: int, queue) -> None:
    import resource

    import numpy as np

    from calibprob.bases.gp import GaussianProcessRegressor, SparseGaussianProcessRegressor

    X, y, Xt, yt = _data(n, n_test)
    if kind == "exact":
        model = GaussianProcessRegressor(mean="constant", random_state=0)
    else:
        model = SparseGaussianProcessRegressor(n_inducing=300, mean="constant", random_state=0)
    cpu = time.process_time()
    t = time.perf_counter()
    model.fit(X, y)
    t_fit = time.perf_counter() - t
    cpu_fit = time.process_time() - cpu
    cpu = time.process_time()
    t = time.perf_counter()
    mu, sd = model.predict_mean_std(Xt)
    t_pred = time.perf_counter() - t
    cpu_pred = time.process_time() - cpu
    nll = float(np.mean(0.5 * np.log(2 * np.pi * sd**2) + 0.5 * ((yt - mu) / sd) ** 2))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB -> GB
    sub = model.fit_info_.get("hyper_subset")
    note = f"CPU fit {cpu_fit:.1f} s, predict {cpu_pred:.1f} s"
    if sub:  # the exact GP records whether it refined and its factorisation; the sparse GP always refines
        note += f"; subset {sub['size']} rows (refined={sub.get('refined', True)}) {sub['seconds']:.1f} s"
        if "factorize_seconds" in model.fit_info_:
            note += f", factorisation {model.fit_info_['factorize_seconds']:.1f} s"
    queue.put((t_fit, t_pred, rss, nll, note))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=12000, help="training rows")
    parser.add_argument("--test", type=int, default=4000, help="test rows")
    parser.add_argument("--models", nargs="+", default=["exact", "sparse"], choices=["exact", "sparse"])
    args = parser.parse_args(argv)
    ctx = mp.get_context("spawn")
    print(f"diamonds log(price): n = {args.n} train, {args.test} test rows, 23 features; cores {os.cpu_count()}")
    header = f"{'model':<22} | {'fit':>8} {'predict':>8} {'peak RSS':>9} {'test NLL':>9} | load      | note"
    print(header)
    print("-" * len(header))
    names = {"exact": "exact GP, subset θ", "sparse": "sparse GP (m = 300)"}
    for kind in args.models:
        load0 = os.getloadavg()[0]
        queue = ctx.Queue()
        proc = ctx.Process(target=_run, args=(kind, args.n, args.test, queue))
        proc.start()
        t_fit, t_pred, rss, nll, note = queue.get()
        proc.join()
        print(
            f"{names[kind]:<22} | {t_fit:7.1f}s {t_pred:7.1f}s {rss:7.2f}GB {nll:9.4f} | "
            f"{load0:.2f}->{os.getloadavg()[0]:.2f} | {note}",
            flush=True,
        )
    print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")


if __name__ == "__main__":
    main()
