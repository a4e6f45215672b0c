"""Scale benchmark (issue 21): CPS + CRPS at n_cal = n_test = 100 000 in bounded memory.

Each variant runs in a fresh process (``multiprocessing`` spawn), so its peak
resident set size (``ru_maxrss``) is its own. Printed side by side:

* **blocked** — calibprob as shipped: the conformal predictive system's
  quantiles, the exact CRPS and ``evaluate`` work in blocks of 4 096 test
  points;
* **one block** — the same code with the whole test set as one block
  (``chunk_size = n_test``), i.e. what the one-shot implementation allocated.

For reference it also prints what an ``n_test x n_cal`` CRPS matrix (the
approach the issue reports for crepes' CPS) would need: 80 GB at 100 000 x
100 000, never allocated here.

The other parts of the issue's benchmark (exact GP with subset
hyperparameters, sparse-GP growth, sparse J+GP, 2 workers vs serial) belong
to the GP-scaling work and are not in this file yet.

Run::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_scale.py [--n 100000]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import time


def _variant(n: int, chunk: int | None, queue) -> None:
    import numpy as np

    import calibprob
    from calibprob.conformal import ConformalPredictiveSystem
    from calibprob.metrics import crps, evaluate

    rng = np.random.default_rng(2026)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # a heteroscedastic, heavy-tailed truth around a Gaussian base (the CPS has work to do)
    mu = rng.normal(size=2 * n)
    sd = 0.5 + rng.gamma(2.0, 0.5, size=2 * n)
    y = mu + sd * rng.standard_t(4, size=2 * n)
    pred_cal = calibprob.normal(mu[:n], sd[:n])
    pred_test = calibprob.normal(mu[n:], sd[n:])
    t = {}
    t0 = time.perf_counter()
    cps = ConformalPredictiveSystem().fit(pred_cal, y[:n])
    t["fit"] = time.perf_counter() - t0
    del pred_cal
    t0 = time.perf_counter()
    if chunk is None:
        pred = cps.predict(pred_test)
    else:  # the whole test set as one block: the one-shot formula mu + s * r of the earlier code
        from calibprob.conformal._common import conformal_quantile_function, valid_levels
        from calibprob.predictive import from_quantiles

        _, m, s = cps._mu_scale(pred_test)
        lv = valid_levels(None, cps.n_calibration_, symmetric=False)
        pred = from_quantiles(
            conformal_quantile_function(m, s, cps.scores_, lv, symmetric=False, chunk_size=chunk),
            lv,
            method="conformal-predictive-system",
        )
    t["predict"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if chunk is None:
        c = float(crps(pred, y[n:]))
    else:
        from calibprob.metrics import crps_quantile

        c = float(np.mean(crps_quantile(y[n:], pred["quantile"].values, pred["level"].values, chunk_size=chunk)))
    t["crps"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    m = evaluate(pred, y[n:], chunk_size=chunk)
    t["evaluate"] = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put(
        {
            "times": t,
            "peak_mb": peak,
            "start_mb": base_rss,
            "crps": c,
            "nll": float(m["nll"]),
            "cov90": float(m["coverage"].sel(confidence_level=0.9)),
            "pred_mb": pred["quantile"].nbytes / 2**20,
        }
    )


def run(n: int, chunk: int | None) -> dict:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_variant, args=(n, chunk, q))
    p.start()
    out = q.get()
    p.join()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="n_cal = n_test (default 100 000)")
    args = ap.parse_args()
    n = args.n
    blocked = run(n, None)
    whole = run(n, n)
    print(f"CPS + CRPS at n_cal = n_test = {n:,} (99 quantile levels; each variant in a fresh process)")
    print(f"{'':28s}{'blocked':>12s}{'one block':>12s}{'ratio':>8s}")
    for key in ("fit", "predict", "crps", "evaluate"):
        a, b = blocked["times"][key], whole["times"][key]
        print(f"  time {key:<22s}{a:10.2f} s{b:10.2f} s{b / a:8.2f}")
    ta, tb = sum(blocked["times"].values()), sum(whole["times"].values())
    print(f"  time total                {ta:10.2f} s{tb:10.2f} s{tb / ta:8.2f}")
    a, b = blocked["peak_mb"], whole["peak_mb"]
    print(f"  peak RSS                  {a:10.0f} MB{b:9.0f} MB{b / a:8.2f}")
    print(
        f"  (the CPS prediction itself holds {blocked['pred_mb']:.0f} MB of quantiles; "
        f"interpreter + imports at start {blocked['start_mb']:.0f} MB)"
    )
    same = (blocked["crps"], blocked["nll"], blocked["cov90"]) == (whole["crps"], whole["nll"], whole["cov90"])
    print(
        f"  mean CRPS {blocked['crps']:.6f}, NLL {blocked['nll']:.6f}, 90% coverage {blocked['cov90']:.4f} "
        f"(blocked and one block identical: {same})"
    )
    print(f"  an n_test x n_cal CRPS matrix would need {n * n * 8 / 1e9:,.0f} GB (float64); never allocated here")
    print(f"  budget: peak <= 2 GB -> {'met' if a <= 2048 else 'NOT met'}")


if __name__ == "__main__":
    main()
