"""Conformal Bayes speed, side by side on one machine and one set of inputs (issue 29).

Shape of Fong & Holmes's diabetes run: n = 309 training points, S = 8000 posterior draws,
G = 100 grid values, m = 133 test points. The inputs are **synthetic**: posterior draws of a
d = 10 linear-Gaussian model written with NumPy (no MCMC), their training log-likelihood
(S, n) and the test log densities on the grid (S, m, G), built once and handed to every
implementation as the same float64 values, each in its own layout (calibprob: (S, m, G)
C-ordered; the authors: (G, S, m)), built before the timers start.

Columns:

(a) calibprob's :class:`calibprob.ConformalBayes` (both cores by default, with and without
    Pareto k; and on one core, ``n_jobs=1``) against the authors' JAX code
    (``compute_rank_IS`` of github.com/edfong/conformal_bayes) in a separate Python
    (``--jax-python``, a venv with ``jax[cpu]``) that imports their ``conformal_Bayes_functions.py``
    from ``--authors`` (or ``$CB_AUTHORS``: the repository's ``conformal_bayes`` folder; their code
    is not part of calibprob), in three configurations: per test point as their run scripts do,
    in float64 and in float32, and ``jax.vmap``-ed over the test points in float32; each on both
    cores and pinned to one (``taskset -c 0``). Cold = first pass in the process (JAX: including
    ``jit`` compilation; calibprob: only its first row is a process-cold pass, Numba's kernels
    load there), warm = the best of three more passes, wall and CPU. The float32 floor, one
    (m G x S) . (S x n) float32 product (the core's multiply-add count), is measured in the same
    run on one and two BLAS threads, and every row is given as a multiple of it (one-core rows
    of the one-thread floor).
(b) full conformal by refits: the authors' Lasso baseline (their ``conformal_full``:
    ``Lasso(alpha=0.004)`` refitted on the augmented data per grid value and test point, 13 300
    fits; needs scikit-learn in ``--jax-python``), measured in full; and the refit counterpart of
    conformal Bayes itself (a NUTS refit of the same sparse Bayesian model per grid value and test
    point), of which ``--nuts-refits`` refits at random pairs are measured and the 13 300
    extrapolated from their mean (said so in the output). For scale: the authors' own table
    times full conformal at 11.53 s and conformal Bayes at 0.70 s (16x) on diabetes.
(c) the PyMC door :func:`calibprob.conformal_bayes` at that shape on a ``pm.Data`` linear
    model (the same draws), closed-form and ``logp`` paths, full and end-only grid: first and second
    call (wall, CPU; peak traced memory of the first, ``tracemalloc``), the second as a multiple of
    the core's warm time in the same grid mode and as the door's extra seconds (door minus core),
    the best of calls 2-4 likewise, and a cProfile summary of a fifth call.

Run::

    .venv/bin/python benchmarks/bench_conformal_bayes.py \\
        --jax-python /work/venvs/cbjax/bin/python --authors /path/to/conformal_bayes/conformal_bayes
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

N, S, G, M, D = 309, 8000, 100, 133, 10
LOG_2PI_HALF = 0.5 * np.log(2 * np.pi)
RUNS = ("cold", "warm", "warm", "warm")


def _keep(out: dict, run: str, wall: float, cpu: float) -> None:
    """Record a pass; warm keeps the best of its passes."""
    out[f"time_{run}"] = min(wall, out.get(f"time_{run}", np.inf))
    out[f"cpu_{run}"] = min(cpu, out.get(f"cpu_{run}", np.inf))


# ---------------------------------------------------------------------------
# inputs (NumPy only: the JAX worker rebuilds the test densities from the saved parameters
# with the same elementwise float64 operations, so both sides see identical arrays)
# ---------------------------------------------------------------------------


def make_problem(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D)) / np.sqrt(D)
    X_test = rng.normal(size=(M, D)) / np.sqrt(D)
    beta_true = rng.laplace(0, 1, size=D)
    y = X @ beta_true + rng.normal(0, 0.7, size=N)
    y = (y - y.mean()) / y.std()
    beta = rng.normal(np.linalg.lstsq(X, y, rcond=None)[0], 0.08, size=(S, D))
    intercept = rng.normal(0, 0.04, size=S)
    sigma = np.abs(rng.normal(0.72, 0.03, size=S))
    mu_train = beta @ X.T + intercept[:, None]
    mu_test = beta @ X_test.T + intercept[:, None]
    log_sigma = np.log(sigma)
    ll = -0.5 * ((y[None, :] - mu_train) / sigma[:, None]) ** 2 - log_sigma[:, None] - LOG_2PI_HALF
    grid = np.linspace(y.min() - 2, y.max() + 2, G)
    return {
        "X": X, "X_test": X_test, "y": y, "beta": beta, "intercept": intercept, "sigma": sigma,
        "log_sigma": log_sigma, "mu_test": mu_test, "ll": ll, "grid": grid,
    }  # fmt: skip


def test_log_density(p, i: int) -> np.ndarray:
    """(G, S) log f_s(y_g | x_i), the authors' ``logwjk[:, :, i]`` layout."""
    z = (p["grid"][:, None] - p["mu_test"][None, :, i]) / p["sigma"][None, :]
    return -0.5 * z**2 - p["log_sigma"][None, :] - LOG_2PI_HALF


# ---------------------------------------------------------------------------
# (a) + (b, Lasso) in the JAX environment
# ---------------------------------------------------------------------------


def jax_worker(problem_file: str, authors: str, out_file: str, lasso: bool) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jax.ops

    if not hasattr(jax.ops, "index_update"):  # removed from JAX; imported (unused) by their module
        jax.ops.index_update = lambda x, idx, y: x.at[idx].set(y)
    sys.path.insert(0, authors)
    import conformal_Bayes_functions as cbf

    p = dict(np.load(problem_file))
    logwjk = np.stack([test_log_density(p, i) for i in range(M)], axis=2)  # (G, S, m), as theirs
    result = {"jax": jax.__version__, "devices": str(jax.devices())}
    vmapped = jax.jit(jax.vmap(cbf.compute_rank_IS, in_axes=(None, 2)))
    for name, dtype, vmap in (("loop64", jnp.float64, False), ("loop32", jnp.float32, False),
                              ("vmap32", jnp.float32, True)):  # fmt: skip
        ll, lw = jnp.asarray(p["ll"], dtype), jnp.asarray(logwjk, dtype)
        res = result[name] = {}
        for run in RUNS:  # warm: the best of three passes (the machine is shared)
            t0, c0 = time.perf_counter(), time.process_time()
            if vmap:
                ranks = np.asarray(vmapped(ll, lw))
            else:
                ranks = np.stack([np.asarray(cbf.compute_rank_IS(ll, lw[:, :, i])) for i in range(M)])
            _keep(res, run, time.perf_counter() - t0, time.process_time() - c0)
        np.save(out_file + f".{name}.npy", ranks)
        del ll, lw
    if lasso:
        result.update(_lasso_full(p))
    Path(out_file).write_text(json.dumps(result))


def _lasso_full(p) -> dict:
    """Their ``conformal_full``: Lasso(alpha=0.004) refitted on the augmented data per grid value."""
    from sklearn.linear_model import Lasso

    X, y, grid = p["X"], p["y"], p["grid"]
    t0 = time.perf_counter()
    for i in range(M):
        x_aug = np.concatenate((X, p["X_test"][i : i + 1]), axis=0)
        for y_new in grid:
            ls = Lasso(alpha=0.004, random_state=100).fit(x_aug, np.append(y, y_new))
            resid = np.abs(ls.predict(x_aug) - np.append(y, y_new))
            _ = np.sum(resid >= resid[-1]) / (N + 1)
    return {"lasso_full_time": time.perf_counter() - t0, "lasso_refits": M * G}


# ---------------------------------------------------------------------------
# calibprob
# ---------------------------------------------------------------------------


def run_calibprob(p, pareto_k: bool, n_jobs=None, grid_mode="full") -> tuple[dict, np.ndarray]:
    """Cold and warm passes of the core; returns the timings and the last prediction's p-values
    (``grid_mode="ends"``: NaN where not evaluated; ``out["pred"]`` holds the whole prediction)."""
    import calibprob

    # (S, m, G) C-ordered, built outside the timer, as the JAX worker builds its (G, S, m) layout
    logf = np.ascontiguousarray(np.stack([test_log_density(p, i).T for i in range(M)], axis=1))
    cb = calibprob.ConformalBayes(
        confidence_level=0.8, pareto_k=pareto_k, min_ess=0.0, n_jobs=n_jobs, grid_mode=grid_mode
    )
    out = {}
    for run in RUNS:
        t0, c0 = time.perf_counter(), time.process_time()
        pred = cb.fit(p["ll"], y=p["y"]).predict(logf, p["grid"])
        _keep(out, run, time.perf_counter() - t0, time.process_time() - c0)
    out["pred"] = pred
    return out, pred["p_value"].values


def float32_floor(threads: int, best_of: int = 3) -> float:
    """Seconds of one (m G x S) . (S x n) float32 product: the core's multiply-add count, best of 3."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    A = rng.random((M * G, S), dtype=np.float32)
    B = rng.random((S, N), dtype=np.float32)
    best = np.inf
    with threadpool_limits(threads, user_api="blas"):
        for _ in range(best_of):
            t0 = time.perf_counter()
            A @ B
            best = min(best, time.perf_counter() - t0)
    return best


def _nuts_refit_times(p, refits: int, seed: int = 0) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Seconds of ``refits`` NUTS refits of the authors' sparse model on n + 1 points, one per
    (test point, grid value) pair drawn at random (seeded) from the 133 x 100 that full conformal
    by refits needs. The model is compiled once (``pm.Data``, data swapped per refit, a warm-up
    fit not counted): the cheapest honest refit loop, so the extrapolation flatters the baseline.
    Each refit: 4 chains x 2000 draws after 1000 tuning steps, as the authors sampled."""
    import pymc as pm

    rng = np.random.default_rng(seed)
    pairs = [(int(i), int(g)) for i, g in zip(rng.integers(0, M, refits), rng.integers(0, G, refits), strict=True)]
    with pm.Model() as model:
        xd = pm.Data("X", np.vstack([p["X"], p["X_test"][:1]]))
        yd = pm.Data("y", np.append(p["y"], p["grid"][0]))
        b = pm.Gamma("b", 1.0, 1.0)
        beta = pm.Laplace("beta", 0.0, b, shape=D)
        b0 = pm.Flat("b0")
        s = pm.HalfNormal("s", 1.0)
        pm.Normal("obs", xd @ beta + b0, s, observed=yd, shape=xd.shape[0])

    def refit(i: int, g: int, k: int) -> float:
        with model:
            pm.set_data({"X": np.vstack([p["X"], p["X_test"][i : i + 1]]), "y": np.append(p["y"], p["grid"][g])})
            t0 = time.perf_counter()
            pm.sample(2000, tune=1000, chains=4, cores=1, random_seed=k, progressbar=False,
                      compute_convergence_checks=False)  # fmt: skip
            return time.perf_counter() - t0

    refit(0, 0, 999)  # warm-up: compilation, not counted
    return np.array([refit(i, g, k) for k, (i, g) in enumerate(pairs)]), pairs


def run_door(p, top: int = 8, grid_mode: str = "full") -> dict:
    """The door's first to fourth call per path (wall, CPU; peak traced memory of the first), then a profiled fifth;
    ``grid_mode`` passed to the core (``"ends"``: end-only evaluation through the door)."""
    import cProfile
    import io
    import pstats
    import tracemalloc

    import arviz as az
    import pymc as pm

    import calibprob

    with pm.Model() as model:
        xd = pm.Data("X", p["X"])
        yd = pm.Data("y", p["y"])
        b = pm.Normal("b", 0, 1, shape=D)
        b0 = pm.Normal("b0", 0, 1)
        s = pm.HalfNormal("s", 1)
        pm.Normal("obs", xd @ b + b0, s, observed=yd, shape=xd.shape[0])
    post = {"b": p["beta"].reshape(4, S // 4, D), "b0": p["intercept"].reshape(4, -1), "s": p["sigma"].reshape(4, -1)}
    idata = az.from_dict({"posterior": post, "observed_data": {"obs": p["y"]}})
    pm.compute_log_likelihood(idata, model=model, progressbar=False)
    out = {}

    def call(method):
        return calibprob.conformal_bayes(
            model,
            idata,
            p["X_test"],
            grid=p["grid"],
            method=method,
            min_ess=0.0,
            confidence_level=0.8,
            grid_mode=grid_mode,
        )

    for method in ("closed-form", "logp"):
        r = out[method] = {}
        for run in ("first", "second", "third", "fourth"):
            tracemalloc.start() if run == "first" else None
            t0, c0 = time.perf_counter(), time.process_time()
            pred = call(method)
            r[run], r[f"cpu_{run}"] = time.perf_counter() - t0, time.process_time() - c0
            if run == "first":
                r["peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
                tracemalloc.stop()
        # warm: the best of the second to fourth calls (as the core's warm is the best of three passes)
        r["warm"] = min(r["second"], r["third"], r["fourth"])
        r["cpu_warm"] = min(r["cpu_second"], r["cpu_third"], r["cpu_fourth"])
        r["p_value"] = pred["p_value"].values
        r["ends"] = np.c_[pred["lower"].values, pred["upper"].values]
        prof = cProfile.Profile()
        prof.runcall(call, method)
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(top)
        lines = [ln for ln in text.getvalue().splitlines() if ln.strip()]
        r["profile"] = "\n".join(lines[next(i for i, ln in enumerate(lines) if "ncalls" in ln) :])
    return out


# ---------------------------------------------------------------------------


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jax-python", default=os.environ.get("CB_JAX_PYTHON"), help="python of a venv with jax[cpu]")
    ap.add_argument("--authors", default=os.environ.get("CB_AUTHORS"), help="folder of conformal_Bayes_functions.py")
    ap.add_argument("--nuts-refits", type=int, default=3, help="NUTS refits to measure for (b); 0 skips")
    ap.add_argument("--no-door", action="store_true", help="skip (c)")
    ap.add_argument("--no-lasso", action="store_true", help="skip the Lasso refits of (b)")
    ap.add_argument("--jax-worker", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--lasso", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.jax_worker:
        return jax_worker(*args.jax_worker, lasso=args.lasso)

    p = make_problem()
    print("load average (1, 5, 15 min) at start: " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))
    print(f"shape: n={N}, draws={S}, grid={G}, test points={M} (synthetic inputs, see the docstring)")
    print(f"threads: OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, "
          f"XLA_FLAGS={os.environ.get('XLA_FLAGS', 'unset')}")  # fmt: skip
    rows = {}  # label -> timing dict (time_/cpu_ cold/warm), printed side by side
    cp, pv = run_calibprob(p, pareto_k=True)
    rows["calibprob, both cores (default n_jobs), with Pareto k"] = cp
    cp_nok, pv2 = run_calibprob(p, pareto_k=False)
    rows["calibprob, both cores, ESS only"] = cp_nok
    cp1, pv3 = run_calibprob(p, pareto_k=True, n_jobs=1)
    rows["calibprob, one core (n_jobs=1), with Pareto k"] = cp1
    assert np.array_equal(pv, pv2) and np.array_equal(pv, pv3)
    # end-only evaluation (grid_mode="ends"): the same sets from the ranks at the set ends
    for n_jobs, where in ((None, "both cores"), (1, "one core (n_jobs=1)")):
        ce, pve = run_calibprob(p, pareto_k=True, n_jobs=n_jobs, grid_mode="ends")
        rows[f"calibprob grid_mode='ends', {where}, with Pareto k"] = ce
        full, ends = cp["pred"], ce["pred"]
        same = all(np.array_equal(full[v].values, ends[v].values, equal_nan=True)
                   for v in ("lower", "upper", "n_pieces", "grid_length", "min_ess", "pareto_k"))  # fmt: skip
        ev = ~np.isnan(pve)
        print(f"grid_mode='ends', {where}: {int(ev.sum())} of {M * G} grid values ranked "
              f"({ev.sum() / (M * G):.1%}), {ends.attrs['n_full_grid']} test points on the full grid; sets "
              f"{'IDENTICAL to' if same else 'DIFFER from'} the full grid's; p-values at the ranked values "
              f"{'identical' if np.array_equal(pve[ev], pv[ev]) else 'DIFFER'}")  # fmt: skip
    jx = {}
    for pin in (None, "0"):
        got = _run_jax(args, p, pin)
        for name, label in (("loop64", "float64, per test point"), ("loop32", "float32, per test point"),
                            ("vmap32", "float32, vmapped over test points")):  # fmt: skip
            if got is not None:
                where = "both cores" if pin is None else "one core (taskset -c 0)"
                rows[f"authors' JAX {got['jax']}, {label}, {where}"] = got[name]
                ranks = np.load(got["file"] + f".{name}.npy")
                jx[f"{label}, {where}"] = np.abs(pv - ranks / (N + 1)).max(), int((ranks / (N + 1) != pv).sum())
        if got is not None and "lasso_full_time" in got and pin is None:
            print(f"(b) full conformal by Lasso refits ({got['lasso_refits']} refits): {got['lasso_full_time']:.2f} s "
                  f"= {got['lasso_full_time'] / cp['time_warm']:.1f}x calibprob (warm, with Pareto k)")  # fmt: skip
    floors = {1: float32_floor(1), 2: float32_floor(2)}
    print(f"float32 floor (one ({M * G} x {S}) . ({S} x {N}) product, best of 3): "
          f"{floors[1]:.3f} s on one thread, {floors[2]:.3f} s on two")  # fmt: skip
    print(f"{'':72s} {'cold wall':>9s} {'cold CPU':>9s} {'warm wall':>9s} {'warm CPU':>9s}  warm/floor")
    for label, r in rows.items():
        fl = floors[1] if "one core" in label else floors[2]
        print(f"{label:72s} {r['time_cold']:9.3f} {r['cpu_cold']:9.3f} {r['time_warm']:9.3f} {r['cpu_warm']:9.3f}"
              f"  {r['time_warm'] / fl:5.2f}x")  # fmt: skip
    print("(calibprob's cold pass is the process's first only for its first row: Numba's kernels load there)")
    for label, (diff, n_diff) in jx.items():
        print(f"  JAX {label}: max |p-value - calibprob's| = {diff:.3g} ({n_diff} of {M * G} differ)")
    if args.nuts_refits > 0:
        per, pairs = _nuts_refit_times(p, args.nuts_refits)
        total = per.mean() * M * G
        print(f"(b) full conformal by NUTS refits of the same Bayesian model: {args.nuts_refits} refits MEASURED at "
              f"random (test point, grid value) pairs {pairs}: {', '.join(f'{t:.1f}' for t in per)} s "
              f"(mean {per.mean():.2f} s, 4 x 2000 draws, compiled once); x {M * G} refits = {total:.0f} s "
              f"(EXTRAPOLATED from the measured mean) = {total / cp['time_warm']:.3g}x calibprob (warm, with Pareto k)")  # fmt: skip
    if not args.no_door:
        refined = {}
        for mode, core in (("full", cp), ("ends", rows["calibprob grid_mode='ends', both cores, with Pareto k"])):
            for method, r in run_door(p, grid_mode=mode).items():
                ev = ~np.isnan(r["p_value"])
                same = np.array_equal(r["p_value"][ev], pv[ev])
                refined[mode, method] = r["ends"]
                sets = "" if mode == "full" else (
                    f"; refined ends {'IDENTICAL to' if np.array_equal(r['ends'], refined['full', method]) else 'DIFFER from'}"
                    " the full-grid door's")  # fmt: skip
                print(f"(c) PyMC door, grid_mode={mode!r}, {method}: first call {r['first']:.3f} s wall / "
                      f"{r['cpu_first']:.3f} s CPU (peak traced memory {r['peak_mb']:.0f} MB), second call "
                      f"{r['second']:.3f} s wall / {r['cpu_second']:.3f} s CPU = {r['second'] / core['time_warm']:.2f}x "
                      f"the core's warm wall in the same mode (both cores; the door's extra "
                      f"{r['second'] - core['time_warm']:+.3f} s wall, {r['cpu_second'] - core['cpu_warm']:+.3f} s CPU); "
                      f"warm (best of calls 2-4) {r['warm']:.3f} s / {r['cpu_warm']:.3f} s CPU = "
                      f"{r['warm'] / core['time_warm']:.2f}x (extra {r['warm'] - core['time_warm']:+.3f} s); p-values "
                      f"{'identical to' if same else 'DIFFER from'} the core's{sets}. Profile of a fifth call:")  # fmt: skip
                print("    " + r["profile"].replace("\n", "\n    "))
    print("load average (1, 5, 15 min) at end: " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))


def _run_jax(args, p, pin: str | None = None) -> dict | None:
    """The JAX worker in ``--jax-python``; ``pin``: a CPU list for ``taskset`` (one core)."""
    if not args.jax_python or not args.authors:
        print("(a) authors' JAX column skipped: pass --jax-python and --authors (or set CB_JAX_PYTHON, CB_AUTHORS)")
        return None
    tmp = tempfile.mkdtemp(prefix="cbjax")
    problem_file, out_file = os.path.join(tmp, "problem.npz"), os.path.join(tmp, "result.json")
    np.savez(problem_file, **p)
    cmd = [args.jax_python, __file__, "--jax-worker", problem_file, args.authors, out_file]
    cmd = (["taskset", "-c", pin] if pin is not None else []) + cmd
    cmd += [] if args.no_lasso or pin is not None else ["--lasso"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        print("(a) authors' JAX column failed:\n" + done.stderr[-3000:])
        return None
    return {**json.loads(Path(out_file).read_text()), "file": out_file}


if __name__ == "__main__":
    main()
