"""Scale benchmark (issue 21): CPS + CRPS in bounded memory, the sparse GP, the exact GP at 12 000 rows, 2 workers.

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

Workers (``--part workers``, also run by ``--part all``): a one-repetition spec
(GP base on 800 rows of ``wine_quality_red``, eight methods incl. CV+ with 10
folds, GP-Beta and the sharp GP) as ``calibprob compare`` serial and ``--workers 2``, each a fresh
process: wall times, the speed-up (target >= 1.6x), whether the results are
identical, the load and the idle cores.

Sparse GP (``--part sparse``), each run in a fresh process too:

* **sparse-GP fit** at n = 10 000 / 20 000 / 40 000 (synthetic, d = 4,
  m = 300 k-means inducing inputs, one L-BFGS-B start), each n ``--repeats``
  times (default 3) interleaved across n: median and minimum wall time, bound
  evaluations on the hyperparameter subset and on all rows, the bound reached,
  and the growth exponent of the median fit time in n (slope of log time on
  log n; target <= 1.2) — with ``n_hyper_subset="auto"`` (as shipped) and,
  unless ``--sparse-auto-only``, with every evaluation on all rows
  (``n_hyper_subset=None``, the earlier behaviour);
* **sparse J+GP at 50 000 rows**: the sparse GP fitted on 50 000 rows, then
  J+GP (closed-form O(nm^2) leave-one-out, no n x n matrix) at 90 % on 2 000
  test points: time, peak RSS, coverage;
* **sparse J+GP prediction at the diamonds-scale shape** (32 364 training
  rows, 10 788 test points, d = 23, fixed θ): time and peak RSS.

Exact GP (``--part gp``): ``benchmarks/bench_gp_scale.py``'s exact GP with subset
hyperparameters at n = 12 000 diamonds rows against the sparse GP (fit, predict,
peak RSS, test NLL), each in a fresh process.

Run::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_scale.py [--n 100000]
        [--part cps|sparse|gp|workers|all] [--repeats 3] [--sparse-auto-only]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import time


def _variant(n: int, chunk: int | None, queue) -> None:
    import numpy as np

    import calibprob
    from calibprob.calibrators.conformal import ConformalPredictiveSystem
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
        from calibprob.calibrators.conformal._intervals import conformal_quantile_function, valid_levels
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


def _synthetic(n: int, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 4))
    f = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.5 * X[:, 2] ** 2 - 0.3 * X[:, 2] * X[:, 3]
    return X, f + 0.3 * rng.normal(size=n)


def _sparse_fit(n: int, m: int, subset, queue) -> None:
    from calibprob.bases.gp import SparseGaussianProcessRegressor

    X, y = _synthetic(n, 2026)
    t0 = time.perf_counter()
    gp = SparseGaussianProcessRegressor(n_inducing=m, n_restarts=1, random_state=0, n_hyper_subset=subset).fit(X, y)
    t = time.perf_counter() - t0
    ev = gp.fit_info_["n_evaluations"]
    rec = gp.fit_info_.get("hyper_subset")
    sub_ev = 0 if rec is None else sum(rec["fit_info"]["n_evaluations"].values()) + rec["hessian_evaluations"]
    queue.put(
        {
            "time": t,
            "evals": ev["value"] + ev["value_and_grad"],
            "sub_evals": sub_ev,
            "sub_size": 0 if rec is None else rec["size"],
            "sub_seconds": 0.0 if rec is None else rec["seconds"],
            "bound": float(gp.log_marginal_likelihood_value_),
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }
    )


def _sparse_eval(sizes, m: int, reps: int, queue) -> None:
    """Best-of-``reps`` time of one bound value + gradient at a fixed θ, sizes interleaved."""
    import numpy as np

    from calibprob.bases.gp import kmeans_inducing_points
    from calibprob.bases.gp._sparse_numerics import VFEObjectiveNumpy

    data = {n: _synthetic(n, 2026) for n in sizes}
    Z = kmeans_inducing_points(data[sizes[0]][0], m, random_state=0)
    x = np.log([1.0, 1.0, 1.0, 1.0, 1.0, 0.1])
    best = dict.fromkeys(sizes, np.inf)
    for _ in range(reps):
        for n in sizes:
            X, y = data[n]
            fun = VFEObjectiveNumpy("se", 2, "zero", "ml", 1e-6, X, y, Z)
            t0 = time.perf_counter()
            fun.value_and_grad(x)
            best[n] = min(best[n], time.perf_counter() - t0)
    queue.put(best)


def _sparse_jgp(n: int, n_test: int, m: int, queue) -> None:
    import numpy as np

    from calibprob.bases.gp import SparseGaussianProcessRegressor
    from calibprob.calibrators.conformal.gp import JackknifePlusGP

    X, y = _synthetic(n + n_test, 7)
    t0 = time.perf_counter()
    gp = SparseGaussianProcessRegressor(n_inducing=m, n_restarts=1, random_state=0).fit(X[:n], y[:n])
    t_base = time.perf_counter() - t0
    out: dict[str, object] = {"base": t_base}
    for score in ("normalized", "signed"):
        t0 = time.perf_counter()
        jgp = JackknifePlusGP(estimator=gp, prefit=True, score=score, confidence_level=0.9).fit()
        t_fit = time.perf_counter() - t0
        t0 = time.perf_counter()
        iv = jgp.predict_interval(X[n:])
        t_pred = time.perf_counter() - t0
        lo, hi = iv["lower"].values, iv["upper"].values
        cover = float(np.mean((y[n:] >= lo) & (y[n:] <= hi)))
        out[score] = {"fit": t_fit, "predict": t_pred, "coverage": cover, "width": float(np.mean(hi - lo))}
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put(out)


def _in_process(target, *args) -> dict:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=target, args=(*args, q))
    p.start()
    out = q.get()
    p.join()
    return out


def _sparse_fit_table(sizes, m: int, subset, repeats: int) -> dict:
    """Fit time at each n, ``repeats`` times interleaved across n, each run in a fresh process."""
    import numpy as np

    runs: dict[int, list] = {n: [] for n in sizes}
    for _ in range(repeats):
        for n in sizes:
            runs[n].append(_in_process(_sparse_fit, n, m, subset))
    label = "all rows (n_hyper_subset=None)" if subset is None else f"n_hyper_subset={subset!r}"
    print(f"  {label}:")
    print(
        f"  {'n':>8s}{'median':>9s}{'min':>9s}{'subset':>8s}{'ev sub':>8s}{'ev all':>8s}"
        f"{'subset s':>10s}{'bound':>16s}{'peak RSS':>10s}"
    )
    med = {}
    for n in sizes:
        r = runs[n]
        t = np.array([x["time"] for x in r])
        med[n] = float(np.median(t))
        ev_all = int(np.median([x["evals"] for x in r]))
        ev_sub = int(np.median([x["sub_evals"] for x in r]))
        bounds = {round(x["bound"], 4) for x in r}
        bound = f"{r[0]['bound']:.4f}" + ("" if len(bounds) == 1 else "*")
        print(
            f"  {n:8,d}{med[n]:8.1f}s{t.min():8.1f}s{r[0]['sub_size']:8d}{ev_sub:8d}{ev_all:8d}"
            f"{np.median([x['sub_seconds'] for x in r]):9.1f}s{bound:>16s}{max(x['peak_mb'] for x in r):7.0f} MB"
        )
    ln = np.log(sizes)
    slope = np.polyfit(ln, np.log([med[n] for n in sizes]), 1)[0]
    print(
        f"  growth exponent of the median fit time: {slope:.2f}; target <= 1.2 -> {'met' if slope <= 1.2 else 'NOT met'}"
    )
    return {"median": med, "slope": slope, "bounds": {n: runs[n][0]["bound"] for n in sizes}}


def _sparse_jgp_shape(n: int, n_test: int, d: int, m: int, queue) -> None:
    """Sparse J+GP prediction alone at a given shape (fixed theta, constant mean): time and peak RSS."""
    import numpy as np

    from calibprob.bases.gp import SparseGaussianProcessRegressor
    from calibprob.calibrators.conformal.gp import JackknifePlusGP

    rng = np.random.default_rng(11)
    X = rng.normal(size=(n + n_test, d))
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] ** 2 + 0.3 * rng.normal(size=n + n_test)
    theta = {"lengthscale": np.full(d, 2.0), "variance": 1.0, "noise": 0.1}
    gp = SparseGaussianProcessRegressor(n_inducing=m, theta=theta, optimize=False, mean="constant", random_state=0)
    gp.fit(X[:n], y[:n])
    out = {}
    for score in ("normalized", "signed"):
        jgp = JackknifePlusGP(estimator=gp, prefit=True, score=score, confidence_level=0.9).fit()
        t0 = time.perf_counter()
        iv = jgp.predict_interval(X[n:])
        out[score] = time.perf_counter() - t0
        lo, hi = iv["lower"].values.reshape(-1), iv["upper"].values.reshape(-1)
        out[score + "_coverage"] = float(np.mean((y[n:] >= lo) & (y[n:] <= hi)))
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put(out)


def sparse_main(m: int = 300, repeats: int = 3, all_rows: bool = True) -> None:
    """Sparse-GP fit growth and sparse J+GP at 50 000 rows (see the module docstring)."""
    import numpy as np

    sizes = (10_000, 20_000, 40_000)
    print(
        f"Sparse GP (VFE) fit, m = {m}, d = 4, one L-BFGS-B start; each n {repeats} times, interleaved, "
        "each in a fresh process (ev sub: bound evaluations on the subset incl. its Hessian; ev all: on all rows; "
        "subset s: the subset stage's seconds, median)"
    )
    auto = _sparse_fit_table(sizes, m, "auto", repeats)
    if all_rows:
        full = _sparse_fit_table(sizes, m, None, repeats)
        print(
            "  all rows / auto, median fit time: "
            + ", ".join(f"{full['median'][n] / auto['median'][n]:.2f}x" for n in sizes)
            + "; bound auto - all rows: "
            + ", ".join(f"{auto['bounds'][n] - full['bounds'][n]:+.1e}" for n in sizes)
        )
    ln = np.log(sizes)
    best = _in_process(_sparse_eval, sizes, m, 3)
    slope_one = np.polyfit(ln, np.log([best[n] for n in sizes]), 1)[0]
    print(
        "  one bound value + gradient at a fixed theta, best of 3 (interleaved): "
        + ", ".join(f"{best[n]:.2f} s" for n in sizes)
        + f"; growth exponent {slope_one:.2f}"
    )
    n, n_test = 50_000, 2_000
    r = _in_process(_sparse_jgp, n, n_test, m)
    print(f"Sparse J+GP at n = {n:,} training rows, {n_test:,} test points, 90 % (fresh process)")
    print(f"  sparse-GP base fit (n_hyper_subset='auto'): {r['base']:.1f} s")
    for score, name in (("normalized", "J+GP"), ("signed", "asymJ+GP")):
        s = r[score]
        print(
            f"  {name:<9s} fit {s['fit']:6.1f} s  predict {s['predict']:6.1f} s  coverage {s['coverage']:.4f}  "
            f"mean width {s['width']:.3f}"
        )
    print(f"  peak RSS {r['peak_mb']:.0f} MB (an n x n float64 matrix would be {n * n * 8 / 2**30:.1f} GiB)")
    n, n_test, d = 32_364, 10_788, 23
    r = _in_process(_sparse_jgp_shape, n, n_test, d, m)
    print(
        f"Sparse J+GP prediction at the diamonds-scale shape: n = {n:,}, {n_test:,} test points, d = {d} "
        f"(synthetic, fixed theta, m = {m})"
    )
    print(
        f"  J+GP {r['normalized']:.1f} s (coverage {r['normalized_coverage']:.4f}), asymJ+GP {r['signed']:.1f} s "
        f"(coverage {r['signed_coverage']:.4f}), peak RSS {r['peak_mb']:.0f} MB"
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="n_cal = n_test of the CPS part (default 100 000)")
    ap.add_argument("--part", choices=("cps", "sparse", "gp", "workers", "all"), default="all")
    ap.add_argument("--repeats", type=int, default=3, help="sparse-GP fits per n (default 3)")
    ap.add_argument("--sparse-auto-only", action="store_true", help="skip the all-rows sparse-GP fits")
    args = ap.parse_args(argv)
    if args.part in ("workers", "all"):
        workers_main()
    if args.part in ("sparse", "all"):
        sparse_main(repeats=args.repeats, all_rows=not args.sparse_auto_only)
    if args.part in ("gp", "all"):
        gp_main()
    if args.part in ("cps", "all"):
        cps_main(args.n)


def gp_main() -> None:
    """The exact GP with subset hyperparameters at n = 12 000 against the sparse GP (bench_gp_scale.py)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_gp_scale

    bench_gp_scale.main([])


def cps_main(n: int) -> None:
    """CPS + CRPS at n_cal = n_test = ``n``: blocked against one block, each in a fresh process."""
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


# ---------------------------------------------------------------------------
# --part workers: one repetition, 2 workers vs serial (issue 21 item 5)
# ---------------------------------------------------------------------------

#: One repetition of a GP-based comparison as issue 21 runs it: a GP base (on 800 rows of
#: the red-wine set), the cheap calibrators, J+GP, GP-Beta, the sharp GP (``scaled``, the
#: variant the docs recommend beyond a few hundred calibration points) and CV+ with 10
#: refits of the GP, the slowest method, which method granularity splits into one task per
#: refit. Large enough (about 90 s serial) that the fixed costs of 2 workers (the cluster
#: start, each worker's imports and PyTensor graph rewriting: about 3-5 s) do not decide it;
#: on the 1 030-row ``concrete`` set (20 s serial) they would.
SPEC_WORKERS = """
name = "scale-workers"
datasets = ["wine_quality_red"]
repetitions = 1
seed = 21
standardize = true
confidence_level = [0.5, 0.9]

[split]
train = 0.5
calibrate = 0.15
test = 0.35

[base]
kind = "gp"
kernel = "se"

[methods.base]
kind = "base"

[methods.isotonic]
kind = "isotonic"
extrapolate = true

[methods.conformal-predictive]
kind = "conformal-predictive"

[methods.split-conformal]
kind = "split-conformal"
score = "normalized"

[methods."J+GP"]
kind = "jackknife-plus-gp"

[methods.gp-beta]
kind = "gp-beta"
n_inducing = 16
n_iter = 2000

[methods.sharp-gp]
kind = "sharp-gp"
variant = "scaled"

[methods."CV+"]
kind = "cv-plus"
folds = 10
score = "normalized"
"""


#: Kinds whose refits run as separate tasks at method granularity (one per fold).
_REFITTING_KINDS = ("cv-plus", "jackknife-plus", "jackknife")


def _cpu_ticks() -> tuple[int, int] | None:
    """(idle, total) jiffies of the whole machine from /proc/stat (None off Linux)."""
    try:
        with open("/proc/stat") as fh:
            v = [int(x) for x in fh.readline().split()[1:]]
    except OSError:
        return None
    return v[3] + v[4], sum(v)


def _idle_cores(before, after) -> float:
    """Cores the machine left idle between two :func:`_cpu_ticks` readings."""
    import os

    if before is None or after is None or after[1] == before[1]:
        return float("nan")
    return (after[0] - before[0]) / (after[1] - before[1]) * (os.cpu_count() or 1)


def _compare_cli(args: list, env: dict) -> float:
    """Wall seconds of one ``calibprob compare`` run in a fresh process, as a user runs it."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    cli = Path(sys.executable).parent / "calibprob"
    t0 = time.perf_counter()
    subprocess.run(
        [str(cli), "compare", *args, "--no-progress"],
        check=True,
        cwd=Path(__file__).resolve().parents[1],
        env=dict(os.environ, **env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - t0


def workers_main(spec_text: str = SPEC_WORKERS, label: str = "one repetition") -> float:
    """``calibprob compare SPEC`` serial vs ``--workers 2`` (fresh processes): wall times, speed-up, identity.

    One untimed serial run first fills the PyTensor compile cache, so neither timed
    run compiles from scratch. With ``--workers 2`` and one (data set, repetition)
    the runner splits the repetition into one base-fit stage, one task per method and
    one per CV+ refit (which start beside the base fit). Also prints the serial run's
    per-method times and the bound no schedule beats (the base fit, then the slowest
    method that is not split; and half the serial work). Returns the speed-up.
    """
    import os
    import tempfile
    from pathlib import Path

    import xarray as xr

    env = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        spec = tmp / "spec.toml"
        spec.write_text(spec_text)
        _compare_cli([str(spec), "--out", str(tmp / "warmup.nc")], env)
        load0 = os.getloadavg()[0]
        ticks = _cpu_ticks()
        t_serial = _compare_cli([str(spec), "--out", str(tmp / "serial.nc")], env)
        idle = _idle_cores(ticks, _cpu_ticks())
        t_dask = _compare_cli([str(spec), "--out", str(tmp / "dask.nc"), "--workers", "2"], env)
        load1 = os.getloadavg()[0]
        a = xr.open_datatree(tmp / "serial.nc", engine="h5netcdf")
        b = xr.open_datatree(tmp / "dask.nc", engine="h5netcdf")
        same = a.to_dataset().load().identical(b.to_dataset().load())
        timing = a["timing"].to_dataset().load()
    fits = timing["fit_time"].values.ravel()
    base = float(timing["base_fit_time"].max())
    names = timing["calibrator"].values.tolist()
    print(f"{label}: serial per-method s: " + ", ".join(f"{c} {t:.1f}" for c, t in zip(names, fits, strict=True)))
    import tomllib

    methods = tomllib.loads(spec_text)["methods"]
    whole = [t for c, t in zip(names, fits, strict=True) if methods[c]["kind"] not in _REFITTING_KINDS]
    # no schedule beats the base fit followed by the slowest method that is not split into refits
    # (the refits need no fitted base and run beside it), nor two cores doing the serial work
    work = base + fits.sum()
    bound = work / max(base + max(whole), work / 2)
    print(f"  base fit {base:.1f} s; serial method time total {fits.sum():.1f} s; bound on the speed-up {bound:.2f} x")
    print(f"  {'serial':34s}{t_serial:8.1f} s wall")
    print(f"  {'--workers 2 (method granularity)':34s}{t_dask:8.1f} s wall  (includes the cluster start)")
    speed = t_serial / t_dask
    print(
        f"  speed-up 2 workers / serial       {speed:8.2f} x   (target >= 1.6: {'met' if speed >= 1.6 else 'NOT met'})"
        f"   results identical: {same}"
    )
    print(f"  load average (1 min) before/after: {load0:.1f} / {load1:.1f} on {os.cpu_count()} cores")
    # Linux schedules by session (sched_autogroup): while another session keeps cores busy, this
    # one gets its share of the machine however many processes it runs, so 2 workers cannot beat 1
    print(
        f"  idle cores during the serial run: {idle:.2f} (a second worker has a core of its own only if "
        "this is >= 1; with other sessions busy, sched_autogroup gives this session one share)"
    )
    return speed


if __name__ == "__main__":
    main()
