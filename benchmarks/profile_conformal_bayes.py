"""Where conformal Bayes spends its time at the diabetes shape (issue 37): the core and the PyMC door.

The inputs are those of ``bench_conformal_bayes.py`` (n = 309, 8 000 draws, 100 grid values,
133 test points). Printed:

* the core's warm call on one thread, phase by phase (thread CPU time of each pass of
  :func:`calibprob.calibrators.conformal.bayes._numerics.aoi_block`'s fused path, summed over
  the blocks), beside the float32 floor (the same multiply-add count as one product);
* a cProfile summary (top functions by own time) of the core's warm call;
* the PyMC door's first and second call in four configurations (full and end-only grid, closed
  form and ``logp``) beside the core's warm call in the same grid mode (both on both cores), the
  door's own parts of the second call (the set ends' refinement, the log densities), and a cProfile
  summary of a third call. A sampling profile of the threads: ``py-spy record --nonblocking -f raw``
  on the process (the report of issue 37 gives one).

Run::

    PYTHONPATH=. .venv/bin/python benchmarks/profile_conformal_bayes.py [--no-door | --door-only] [--top 12]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(__file__))
import bench_conformal_bayes as bench  # noqa: E402


def phases(p, logf) -> dict[str, float]:
    """Thread CPU seconds of each pass of the fused path, one thread, summed over the full mode's blocks."""
    from calibprob.calibrators.conformal.bayes import _numerics as nm

    E, c = nm.shifted_likelihood(p["ll"])
    E32 = E.astype(np.float32)
    S, m, G = logf.shape
    per = 2 * max(1, (32 * 2**20 // (8 * S)) // G)  # the full mode's blocks of a C-ordered input
    k, scratch, out = nm._kernels(), nm.Scratch(), {}

    def tick(name, t0):
        t = time.thread_time()
        out[name] = out.get(name, 0.0) + t - t0
        return t

    with threadpool_limits(1, user_api="blas"):
        for start in range(0, m, per):
            lf = logf[:, start : start + per, :].reshape(S, -1)
            R = lf.shape[1]
            lf = nm._c_rows(lf)
            t = time.thread_time()
            e32 = scratch.e32(S, R)
            mx, total, sq = np.empty(R), np.zeros(R), np.zeros(R)
            k.maxima(lf, mx)
            t = tick("maxima (compiled)", t)
            step = max(1, nm.CHUNK_BYTES // (8 * R))
            buf = scratch.chunk(step * R)
            for s0 in range(0, S, step):
                x = buf[: min(step, S - s0) * R].reshape(-1, R)
                k.shift(lf, s0, mx, x)
                np.exp(x, out=x)
                k.accumulate_cast(x, total, sq, e32, s0)
            t = tick("chunks: shift, exp, sums, float32 copy", t)
            thr = np.exp(np.log(sq) - np.log(total) + mx - c)
            nm.product32(e32, E32)
            t = tick("float32 product (chunks of 512 draws)", t)
            nm._screened_unnormalised(lambda r, lf=lf, mx=mx: nm.row_weights(lf, mx, r), total, E, E32, e32, thr)
            tick("screen again with float64 rechecks", t)
    return out


def floor(threads: int, best_of: int = 3) -> float:
    """Seconds of one (m G x S) . (S x n) float32 product (the core's multiply-add count), best of 3."""
    rng = np.random.default_rng(0)
    A = rng.random((bench.M * bench.G, bench.S), dtype=np.float32)
    B = rng.random((bench.S, bench.N), dtype=np.float32)
    times = []
    with threadpool_limits(threads, user_api="blas"):
        for _ in range(best_of):
            t0 = time.perf_counter()
            A @ B
            times.append(time.perf_counter() - t0)
    return min(times)


def profiled(fn, top: int) -> tuple[float, str]:
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    fn()
    prof.disable()
    wall = time.perf_counter() - t0
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(top)
    lines = [ln for ln in s.getvalue().splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls"))
    return wall, "\n".join(lines[start:])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-door", action="store_true")
    ap.add_argument("--door-only", action="store_true", help="skip the core's phases and profiles")
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args(argv)
    import calibprob

    print("load average (1, 5, 15 min) at start: " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))
    p = bench.make_problem()
    if args.door_only:
        door(p, args.top)
        print("load average (1, 5, 15 min) at end: " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))
        return
    logf = np.ascontiguousarray(np.stack([bench.test_log_density(p, i).T for i in range(bench.M)], axis=1))
    cb = calibprob.ConformalBayes(confidence_level=0.8, min_ess=0.0, n_jobs=1).fit(p["ll"], y=p["y"])
    cb.predict(logf, p["grid"])  # compile and warm
    ph = phases(p, logf)
    f1 = floor(1)
    print(f"core, one thread, fused path by pass (thread CPU, s): total {sum(ph.values()):.3f}; float32 floor {f1:.3f}")
    for name, v in ph.items():
        print(f"  {name:45s} {v:7.3f}")
    for jobs in (1, None):
        cb.set_params(n_jobs=jobs)
        wall, table = profiled(lambda: cb.predict(logf, p["grid"]), args.top)
        print(f"\ncore warm predict, n_jobs={jobs}: {wall:.3f} s wall under cProfile; top by own time:\n{table}")
    if not args.no_door:
        door(p, args.top)
    print("load average (1, 5, 15 min) at end: " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))


def door(p, top: int) -> None:
    """The door's second call in four configurations (full / ends grid, closed form / ``logp``) against the
    core's warm call in the same grid mode, both on both cores: wall and CPU, and the door's own parts —
    the set ends' refinement (wall, process CPU) and the log densities (thread CPU, summed over threads)."""
    import threading

    import arviz as az
    import pymc as pm

    import calibprob
    from calibprob.calibrators.conformal.bayes import estimator, from_pymc

    with pm.Model() as model:
        xd = pm.Data("X", p["X"])
        yd = pm.Data("y", p["y"])
        b = pm.Normal("b", 0, 1, shape=bench.D)
        b0 = pm.Normal("b0", 0, 1)
        s = pm.HalfNormal("s", 1)
        pm.Normal("obs", xd @ b + b0, s, observed=yd, shape=xd.shape[0])
    S = bench.S
    post = {
        "b": p["beta"].reshape(4, S // 4, bench.D),
        "b0": p["intercept"].reshape(4, -1),
        "s": p["sigma"].reshape(4, -1),
    }
    idata = az.from_dict({"posterior": post, "observed_data": {"obs": p["y"]}})
    pm.compute_log_likelihood(idata, model=model, progressbar=False)
    logf = np.ascontiguousarray(np.stack([bench.test_log_density(p, i).T for i in range(bench.M)], axis=1))
    parts: dict[str, float] = {}
    lock = threading.Lock()

    def add(key, t0, c0, clock):
        with lock:
            parts[key + " wall"] = parts.get(key + " wall", 0.0) + time.perf_counter() - t0
            parts[key + " CPU"] = parts.get(key + " CPU", 0.0) + clock() - c0

    def timed(owner, name, key, clock, generator=False):
        original = getattr(owner, name)

        def wrapper(*a, **k):
            t0, c0 = time.perf_counter(), clock()
            try:
                return original(*a, **k)
            finally:
                add(key, t0, c0, clock)

        def gen_wrapper(*a, **k):  # a generator's work runs as it is consumed: time each step
            it = original(*a, **k)
            while True:
                t0, c0 = time.perf_counter(), clock()
                try:
                    item = next(it)
                except StopIteration:
                    return
                finally:
                    add(key, t0, c0, clock)
                yield item

        setattr(owner, name, gen_wrapper if generator else wrapper)

    timed(estimator._EndRefiner, "__call__", "refinement", time.process_time)
    timed(from_pymc._ClosedForm, "__call__", "closed-form density", time.thread_time)
    timed(from_pymc._Door, "logp_blocks", "logp density", time.thread_time, generator=True)
    for mode in ("full", "ends"):
        cb = calibprob.ConformalBayes(confidence_level=0.8, min_ess=0.0, grid_mode=mode).fit(p["ll"], y=p["y"])
        cb.predict(logf, p["grid"])
        core = min((_clocked(lambda cb=cb: cb.predict(logf, p["grid"])) for _ in range(3)), key=lambda t: t[0])
        for method in ("closed-form", "logp"):

            def call(method=method, mode=mode):
                return calibprob.conformal_bayes(
                    model, idata, p["X_test"], grid=p["grid"], method=method, min_ess=0.0, confidence_level=0.8,
                    grid_mode=mode,
                )  # fmt: skip

            first = _clocked(call)
            parts.clear()
            second = _clocked(call)
            own = dict(parts)
            wall, table = profiled(call, top)
            print(
                f"\nPyMC door, grid_mode={mode!r}, {method}: first call {first[0]:.3f} s wall / {first[1]:.3f} s CPU, "
                f"second {second[0]:.3f} s / {second[1]:.3f} s; the core's warm call {core[0]:.3f} s / {core[1]:.3f} s: "
                f"ratio {second[0] / core[0]:.2f}x, extra {second[0] - core[0]:.3f} s wall / {second[1] - core[1]:.3f} s "
                "CPU. The door's own parts in the second call: "
                + ", ".join(f"{k} {v:.3f} s" for k, v in own.items() if "density wall" not in k)
            )
            print(f"third call under cProfile, {wall:.3f} s wall; top by own time:\n{table}")


def _clocked(fn) -> tuple[float, float]:
    """(wall, process CPU) seconds of one call."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


if __name__ == "__main__":
    main()
