"""Faults cost only what they touch: a killed worker, lost shared data, memory budgets.

The cluster tests kill a real worker process (``os.kill(..., SIGKILL)`` from inside its task) on a
small ``LocalCluster`` and check what the run keeps: every other task's result, the killed task's row
naming the cause and the fix, and a rerun of the same command that computes only what is missing.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import psutil
import pytest
import xarray as xr

import calibprob
from calibprob import registry
from calibprob._core import memory
from calibprob.compare import load_results, parse_spec, run_comparison
from calibprob.compare import methods as compare_methods
from calibprob.compare import runner as compare_runner
from calibprob.compare.spec import SpecError, load_spec
from calibprob.compare.spec.model import DEFAULT_MAX_METHOD_MINUTES
from calibprob.compare.tasks import _prepare
from calibprob.runs import RunOutput, execute, faults, scheduling
from calibprob.runs.cluster import WORKER_CONFIG
from tests.support.elec2 import DATA as ELEC2_DATA
from tests.support.elec2 import ELEC2_SPECS, elec2_extracts

GIB = 2.0**30


# ----------------------------------------------------------------------------- messages and budgets


def test_killed_message_names_memory_cause_limit_and_fix():
    err = SimpleNamespace(last_worker=SimpleNamespace(address="tcp://w:1", memory_limit=int(11.8 * GIB)))
    events = [(1.0, {"worker": "tcp://other:2", "rss": 1e9}), (2.0, {"worker": "tcp://w:1", "rss": 11.3 * GIB})]
    msg = faults.killed_message(err, events)
    assert msg.startswith("worker killed: out of memory at 95 % of its 11.8 GiB limit")
    assert "restarted it at 11.3 GiB" in msg
    assert "Fix: use the sparse GP base (kind = 'sparse-gp'" in msg and "--workers 1" in msg
    assert "n_hyper_subset" in msg and "rerunning the same command runs only what is missing" in msg


def test_killed_message_without_a_memory_event_names_a_signal_or_the_oom_killer():
    err = SimpleNamespace(last_worker=SimpleNamespace(address="tcp://w:1", memory_limit=2 * GIB))
    msg = faults.killed_message(err, [(1.0, {"worker": "tcp://someone-else:9", "rss": 1e9})])
    assert "died while running this task -- a signal, or the operating system's out-of-memory killer" in msg
    assert "memory limit 2.0 GiB" in msg and "Fix: use the sparse GP base" in msg


def test_cancellations_and_killed_workers_are_recognised():
    import asyncio
    import concurrent.futures

    from distributed.client import FutureCancelledError
    from distributed.scheduler import KilledWorker

    assert faults.is_cancelled(FutureCancelledError("k", reason="already forgotten"))
    assert faults.is_cancelled(asyncio.CancelledError()) and faults.is_cancelled(concurrent.futures.CancelledError())
    assert not faults.is_cancelled(RuntimeError("x"))
    killed = KilledWorker("k", SimpleNamespace(address="tcp://w:1", memory_limit=0), 0)
    assert faults.is_killed_worker(killed) and not faults.is_killed_worker(RuntimeError("KilledWorker"))


def test_check_n_by_n_refuses_with_the_budget_and_the_fix(monkeypatch):
    monkeypatch.setattr(faults, "memory_budget", lambda: (1e9, "the room left in this Dask worker: test"))
    faults.check_n_by_n(5000, 4, "fits")  # 0.8 GB
    with pytest.raises(MemoryError, match=r"big step needs about 2\.0 GB \(10 float64 5000 x 5000 arrays\) but "):
        faults.check_n_by_n(5000, 10, "big step")
    with pytest.raises(MemoryError, match=r"the room left in this Dask worker: test is 1\.0 GB; refused .* Fix: x\."):
        faults.check_n_by_n(5000, 10, "big step", fix="x")


def test_check_method_memory_counts_the_sharp_gp_full_variant_on_an_exact_gp_only(monkeypatch):
    monkeypatch.setattr(faults, "memory_budget", lambda: (1e9, "budget"))
    n = 4000  # 12 arrays of 128 MB and 0.25 GiB = 1.8 GB > 1 GB
    with pytest.raises(MemoryError, match=r"sharp-gp \(variant 'full'\) on an exact GP of 4000 training rows"):
        faults.check_method_memory("sharp-gp", {}, "gp", n)
    with pytest.raises(MemoryError, match=r"Fix: variant = 'scaled' .*sparse-gp.*--workers 1"):
        faults.check_method_memory("sharp-gp", {"variant": "cross-fitted"}, "gp", n)
    faults.check_method_memory("sharp-gp", {"variant": "scaled"}, "gp", n)
    faults.check_method_memory("sharp-gp", {}, "sparse-gp", n)  # the sparse GP's own path: no n x n work
    faults.check_method_memory("isotonic", {}, "gp", 10**6)
    faults.check_method_memory("sharp-gp", {}, "gp", 2000)  # 0.65 GB: fits
    with pytest.raises(MemoryError, match="full-conformal-gp on an exact GP of 8000 training rows"):
        faults.check_method_memory("full-conformal-gp", {}, "gp", 8000)


def test_the_exact_gp_checks_its_n_by_n_work_against_the_workers_limit(monkeypatch):
    """In a worker of 0.2 GiB (as Dask reports it), a 5 000-row exact GP (two 0.2 GB arrays) is refused before allocating."""
    worker = SimpleNamespace(
        memory_manager=SimpleNamespace(memory_limit=psutil.Process().memory_info().rss + 0.2 * GIB)
    )
    monkeypatch.setattr(memory, "_dask_worker", lambda: worker)
    monkeypatch.delenv("CALIBPROB_GP_MEMORY_GB", raising=False)
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(5000, 2))
    gp = calibprob.GaussianProcessRegressor(optimize=False, theta={"lengthscale": 0.5, "variance": 1.0, "noise": 0.01})
    with pytest.raises(MemoryError, match=r"the room left in this Dask worker.*fewer workers \(--workers 1\)"):
        gp.fit(X, X[:, 0] + 0.1 * rng.normal(size=5000))


SPEC = {
    "name": "faults",
    "datasets": [{"name": "branin", "function": "branin", "n": 120, "noise": 0.2}],
    "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
    "repetitions": 1,
    "seed": 3,
    "base": {"kind": "gp", "n_restarts": 1},
    "methods": {
        "b": {"kind": "base"},
        "iso": {"kind": "isotonic", "extrapolate": True},
        "sharp": {"kind": "sharp-gp", "n_levels": 5},
    },
}

#: The sharp GP refused where its default's work is too large (``strict``), not switched to ``scaled``
STRICT = {**SPEC, "methods": {**SPEC["methods"], "sharp": {"kind": "sharp-gp", "n_levels": 5, "strict": True}}}


def test_a_method_that_would_not_fit_is_refused_and_the_others_are_scored(monkeypatch, tmp_path):
    """The runner checks a sharp GP's n x n work before running it (serially: against the machine's budget)."""
    real = faults.memory_budget
    # room for the base GP's own checks (a few 60 x 60 arrays) but not for the sharp GP's 9
    monkeypatch.setattr(faults, "memory_budget", lambda: (8.0 * 60**2 * 5, "the test's budget"))
    tree = run_comparison(parse_spec(STRICT), tmp_path / "r.nc", progress=False)
    monkeypatch.setattr(faults, "memory_budget", real)
    err = tree["error"].sel(dataset="branin", repetition=0)
    assert err.sel(calibrator="b").item() == "" and err.sel(calibrator="iso").item() == ""
    sharp = err.sel(calibrator="sharp").item()
    assert sharp.startswith("MemoryError: sharp-gp (variant 'full') on an exact GP of 60 training rows needs")
    assert "Fix: variant = 'scaled'" in sharp and "--workers 1" in sharp
    assert np.isfinite(tree["crps"].sel(calibrator=["b", "iso"])).all()


def test_a_method_beyond_the_machines_memory_is_not_told_to_use_one_worker(monkeypatch):
    """CV+ on 12 000 rows keeps ten 10 800-row GPs (25 GB): one worker would not hold them on a 24 GB machine."""
    monkeypatch.setattr(faults, "memory_budget", lambda: (11e9, "the room left in this Dask worker: test"))
    monkeypatch.setattr(faults, "machine_total", lambda: 24 * GIB)
    with pytest.raises(MemoryError, match=r"needs about 25\.0 GB .* Fix: use the sparse GP base") as err:
        faults.check_method_memory("cv-plus", {}, "gp", 12000, refits=(10, 10800))
    assert "--workers 1" not in str(err.value)
    rows = int(re.search(r"at most about (\d+) on this machine's 24\.0 GiB", str(err.value)).group(1))
    # independent check: ten refits of 0.9 n rows held (2 arrays each) and one fit (6.5) fit in 95 % of 24 GiB
    need = faults.method_work("cv-plus", {}, {"kind": "gp"}, rows, (10, int(0.9 * rows))).peak_bytes
    assert need == pytest.approx(0.95 * 24 * GIB, rel=0.05)
    monkeypatch.setattr(faults, "machine_total", lambda: 64 * GIB)  # a bigger machine: one worker would do
    with pytest.raises(MemoryError, match=r"--workers 1"):
        faults.check_method_memory("cv-plus", {}, "gp", 12000, refits=(10, 10800))


def test_check_method_time_refuses_with_the_estimate_its_make_up_the_rate_and_the_fix(monkeypatch):
    monkeypatch.setattr(faults, "factorisation_rate", lambda: 1e9)
    knots = faults.COST["sharp-gp-knot"] * 21
    minutes = knots * 3000.0**3 / 3.0 / 1e9 / 60.0  # independent of the code: count x n^3/3 flops at 1 GFLOP/s
    assert faults.check_method_time("sharp-gp", {}, {"kind": "gp"}, 3000, 1e9) == pytest.approx(minutes)
    with pytest.raises(
        TimeoutError,
        match=(
            rf"sharp-gp \(variant 'full'\) on an exact GP of 3000 training rows would take about {minutes:.0f} min "
            rf"\({knots:.0f} of 3000 x 3000 \(21 knots' L-BFGS-B evaluations\) Cholesky factorisations at the 1\.0 "
            r"GFLOP/s measured in this process\), beyond max_method_minutes = 1; refused before starting\. "
            r"Fix: variant = 'scaled' .*n_train_subset = 2000.*kind = 'sparse-gp'.*raise max_method_minutes.*n_hyper_subset"
        ),
    ):
        faults.check_method_time("sharp-gp", {}, {"kind": "gp"}, 3000, 1.0)
    assert faults.check_method_time("sharp-gp", {"variant": "scaled"}, {"kind": "gp"}, 10**5, 1e-9) == 0.0
    assert faults.check_method_time("sharp-gp", {}, {"kind": "sparse-gp"}, 10**5, 1e-9) == 0.0
    # CV+ on 12 000 rows: 10 refits on 10 800 rows, each with a 2 000-row subset fit (itself on 500 rows)
    with pytest.raises(TimeoutError, match=r"cv-plus on an exact GP of 12000 training rows would take .*10 refits"):
        faults.check_method_time("cv-plus", {}, {"kind": "gp"}, 12000, 1.0, refits=(10, 10800))


def test_a_method_beyond_max_method_minutes_is_refused_in_its_row_and_the_others_are_scored(tmp_path):
    spec = parse_spec({**STRICT, "max_method_minutes": 1e-12})
    tree = run_comparison(spec, tmp_path / "r.nc", progress=False)
    err = tree["error"].sel(dataset="branin", repetition=0)
    assert err.sel(calibrator="b").item() == "" and err.sel(calibrator="iso").item() == ""
    sharp = err.sel(calibrator="sharp").item()
    assert sharp.startswith("TimeoutError: sharp-gp (variant 'full') on an exact GP of 60 training rows would take")
    assert "GFLOP/s measured in this process), beyond max_method_minutes = 1e-12" in sharp
    assert "Fix: variant = 'scaled'" in sharp and "raise max_method_minutes" in sharp
    assert np.isfinite(tree["crps"].sel(calibrator=["b", "iso"])).all()


@pytest.mark.parametrize(
    ("value", "got"), [(0, "0"), (-5, "-5"), ("30", "'30'"), (True, "True"), (float("inf"), "inf")]
)
def test_max_method_minutes_is_validated(value, got):
    with pytest.raises(
        SpecError,
        match=rf"max_method_minutes must be a finite number > 0; got {got}\..*set it larger.*e\.g\. max_method_minutes = 120",
    ):
        parse_spec({**SPEC, "max_method_minutes": value})
    with pytest.raises(SpecError, match="max_method_minute.*max_method_minutes"):
        parse_spec({**SPEC, "max_method_minute": 10})


def test_max_method_minutes_round_trips_and_leaves_the_fingerprint_alone():
    plain, capped = parse_spec(SPEC), parse_spec({**SPEC, "max_method_minutes": 5})
    assert capped.max_method_minutes == 5.0 and parse_spec(capped.to_dict()) == capped
    assert "max_method_minutes" not in plain.to_dict()  # a spec without the key: its dict as before
    assert plain.fingerprint == capped.fingerprint  # it decides what is refused, not what is scored


def test_a_serial_rerun_reuses_the_method_parts_of_a_run_split_by_method(tmp_path, monkeypatch):
    """Granularity "auto" with one worker after a run split by method: every method part is reused, none recomputed."""
    spec = parse_spec(
        {
            **SPEC,
            "base": {"kind": "ols"},
            "methods": {"b": {"kind": "base"}, "iso": {"kind": "isotonic", "extrapolate": True}},
        }
    )
    first = run_comparison(spec, tmp_path / "r.nc", progress=False, granularity="method")
    parts = sorted((tmp_path / "r.nc.parts").glob("*__m*.nc"))
    stamps = [p.stat().st_mtime_ns for p in parts]
    assert len(parts) == 2

    def refuse(*args, **kwargs):
        raise AssertionError("a finished method was computed again")

    monkeypatch.setattr(compare_runner, "run_task", refuse)
    monkeypatch.setattr(compare_runner, "fit_bases", refuse)
    again = run_comparison(spec, tmp_path / "r.nc", progress=False)  # serial, granularity "auto"
    assert (first["error"] == "").all() and np.isfinite(first["crps"]).all()
    xr.testing.assert_identical(first["crps"], again["crps"])
    assert [p.stat().st_mtime_ns for p in parts] == stamps


class _PeakRSS:
    """Peak resident size above its value at entry while the block runs (sampled every 2 ms)."""

    def __enter__(self):
        self.start = self.peak = psutil.Process().memory_info().rss
        self._stop = False
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self):
        proc = psutil.Process()
        while not self._stop:
            self.peak = max(self.peak, proc.memory_info().rss)
            time.sleep(0.002)

    def __exit__(self, *exc):
        self._stop = True
        self._thread.join()

    @property
    def delta(self) -> int:
        return self.peak - self.start


def _gp_context(n: int):
    rng = np.random.default_rng(5)
    X = rng.uniform(size=(n + 200, 3))
    y = np.sin(4 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=n + 200)
    theta = {"lengthscale": [0.5, 0.7, 0.9], "variance": 1.0, "noise": 0.01}
    gp = calibprob.GaussianProcessRegressor(optimize=False, theta=theta).fit(X[:n], y[:n])
    return compare_methods.TaskContext(
        X[:n], y[:n], X[n : n + 100], y[n : n + 100], X[n + 100 :], gp, {"kind": "gp", "optimize": False}, None, 0
    )


def test_the_memory_estimates_cover_the_measured_peaks():
    """Measured resident peaks (not the model's constants) of the exact GP's n x n steps at n = 2500.

    The n x n part of each estimate alone (without its fixed overhead) covers the measured peak.
    """
    n = 2500
    ctx = _gp_context(n)
    compare_methods.METHOD_KINDS["jackknife-plus-gp"].func(ctx)  # compile and import once, outside the peaks
    with _PeakRSS() as loo:
        ctx.base.loo()
    with _PeakRSS() as jgp:
        compare_methods.METHOD_KINDS["jackknife-plus-gp"].func(ctx)
    with _PeakRSS() as fit:
        calibprob.GaussianProcessRegressor(optimize=False, theta=ctx.base.theta_).fit(ctx.X_train, ctx.y_train)
    one = 8.0 * n**2
    assert memory.PEAK_N_BY_N["loo"] * one >= loo.delta > one  # more than one n x n array was measured
    work = faults.method_work("jackknife-plus-gp", {}, ctx.base_spec, n)
    assert work.peak_bytes - memory.PEAK_OVERHEAD >= jgp.delta > one
    assert memory.PEAK_N_BY_N["factorise"] * one >= fit.delta > one


def _best_of(k: int, func) -> float:
    times = []
    for _ in range(k):
        t0 = time.perf_counter()
        func()
        times.append(time.perf_counter() - t0)
    return min(times)


@pytest.mark.slow  # a stopwatch against an estimate: the ratio follows the machine's load (5.3x at load 8 beside xdist)
def test_the_time_estimate_is_within_a_factor_3_of_a_measured_run():
    """J+GP on a fitted 3000-row exact GP, and the GP's factorisation: the estimate against the stopwatch."""
    n = 3000
    ctx = _gp_context(n)
    estimate = faults.check_method_time("jackknife-plus-gp", {}, ctx.base_spec, n, 1e9) * 60.0
    measured = _best_of(2, lambda: compare_methods.METHOD_KINDS["jackknife-plus-gp"].func(ctx))
    assert 1 / 3 < estimate / measured < 3, (estimate, measured)
    fit_estimate = faults.Work(tuple(faults.gp_fit_factorisations(n, {"optimize": False}))).flops
    gp = calibprob.GaussianProcessRegressor(optimize=False, theta=ctx.base.theta_)
    measured = _best_of(2, lambda: gp.fit(ctx.X_train, ctx.y_train))
    ratio = fit_estimate / faults.factorisation_rate() / measured
    assert 1 / 3 < ratio < 3, (fit_estimate / faults.factorisation_rate(), measured)


def test_no_bundled_spec_is_refused_at_the_default_budget():
    """Every models/*.toml: each method on each task's exact-GP base is within the default time at 3 GFLOP/s.

    (The slowest factorisation rate measured on this 2-core machine under a load average of 8: 3.2 GFLOP/s.)
    """
    checked = 0
    for path in sorted(Path(__file__).parents[2].glob("models/*.toml")):
        if path.stem in ELEC2_SPECS and not (ELEC2_DATA / "elec2.csv").exists():
            continue  # ELEC2 is not shipped (licence not established); its specs are online least squares, no GP
        if path.stem in ELEC2_SPECS:
            elec2_extracts()
        spec = load_spec(path)
        for d in spec.datasets:
            n = len(_prepare(spec, d.name, 0)[1]["train"][1])
            for _, table in spec.base_tables():
                table = faults.choose_gp(table, n)[0]  # kind = "gp": the exact GP only up to its size
                for m in spec.methods:
                    refits = (10, n - n // 10) if m.kind in ("cv-plus", "jackknife-plus") else None
                    work = faults.method_work(m.kind, m.options, table, n, refits)
                    assert work.flops / 3e9 / 60.0 < DEFAULT_MAX_METHOD_MINUTES, (path.name, d.name, m.name)
                    assert work.peak_bytes < 2e9, (path.name, d.name, m.name)
                    checked += bool(work.flops)
    assert checked > 20  # the GP specs' sharp GP, J+GP, full-conformal GP and CV+ rows were checked


# ----------------------------------------------------------------------------- killed workers


def _stage(config, prefix):
    return {"offset": 10.0, "blob": np.arange(1000.0)}


def _task(config, state, prefix, item, refits=None):
    if item.startswith("kill") and not os.path.exists(os.path.join(config["dir"], item)):
        open(os.path.join(config["dir"], item), "w").close()
        time.sleep(0.5)  # both killers running at once: every copy of the scattered stage dies with them
        os.kill(os.getpid(), signal.SIGKILL)
    with open(os.path.join(config["dir"], "calls"), "a") as fh:
        fh.write(item + "\n")
    return xr.Dataset({"v": ((), state["offset"] + len(item))}, attrs={"worker_pid": os.getpid()})


def _on_error(key, msg):
    return xr.Dataset({"v": ((), np.nan), "why": ((), msg)})


def _run(tmp_path, keys):
    with RunOutput(tmp_path / "out.nc") as output:
        return execute(
            _task,
            {"dir": str(tmp_path)},
            keys,
            fingerprint="f1",
            on_error=_on_error,
            coords=lambda key: {},
            output=output,
            prepare=_stage,
            priority=lambda key: 10 if key[1].startswith("kill") else 1,
            workers=2,
            progress=False,
        )


@pytest.mark.slow
def test_killed_workers_cost_only_their_tasks_and_the_lost_stage_is_scattered_again(tmp_path, monkeypatch):
    """Two tasks SIGKILL both workers at once: the stage scattered to them is lost with them.

    The two killed tasks fail with cause and fix; the other two, which need the lost stage, run on the
    restarted workers with the stage scattered again (before the fix the run ended with
    ``FutureCancelledError: ... already forgotten``). The rerun of the same call computes only the killed
    tasks, and the finished ones come from their parts.
    """
    assert WORKER_CONFIG["distributed.scheduler.allowed-failures"] == 0
    rescattered = []
    again = scheduling._Staging._scatter_again
    monkeypatch.setattr(scheduling._Staging, "_scatter_again", lambda *a: rescattered.append(1) or again(*a))
    keys = [("d", "kill-a"), ("d", "kill-b"), ("d", "x"), ("d", "yy")]
    first = _run(tmp_path, keys)
    assert rescattered  # the stage was lost with both workers, and scattered again
    for key in keys[:2]:
        why = str(first[key]["why"].values)
        assert first[key].attrs["task_failed"] == 1
        assert why.startswith("worker killed: its process") and "Fix: use the sparse GP base" in why
    assert [float(first[k]["v"]) for k in keys[2:]] == [11.0, 12.0]
    calls = (tmp_path / "calls").read_text().split()
    assert sorted(calls) == ["x", "yy"]
    second = _run(tmp_path, keys)  # the same command again: only the killed tasks run (markers: no kill now)
    assert [float(second[k]["v"]) for k in keys] == [16.0, 16.0, 11.0, 12.0]
    assert sorted((tmp_path / "calls").read_text().split()) == ["kill-a", "kill-b", "x", "yy"]


@pytest.fixture
def kill_kind(monkeypatch):
    from tests.support import faults_kill

    faults_kill.register()
    # the workers preload the module too, so that their registries know the kind
    monkeypatch.setattr(compare_runner, "_modules", lambda spec: ["tests.support.faults_kill"])
    yield faults_kill.KIND
    registry.METHODS.pop(faults_kill.KIND, None)


@pytest.mark.slow
def test_compare_keeps_finished_methods_when_a_worker_is_killed_and_the_rerun_completes_the_rest(kill_kind, tmp_path):
    """``calibprob compare --workers 2``: a method's worker is killed; the others are scored and kept."""
    spec = parse_spec(
        {
            "name": "killed",
            "datasets": [{"name": "branin", "function": "branin", "n": 120, "noise": 0.2}],
            "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
            "repetitions": 1,
            "seed": 3,
            "base": {"kind": "ols"},
            "methods": {
                "b": {"kind": "base"},
                "iso": {"kind": "isotonic", "extrapolate": True},
                "killer": {"kind": kill_kind, "marker": str(tmp_path / "killed")},
            },
        }
    )
    out = tmp_path / "r.nc"
    run_comparison(spec, out, workers=2, progress=False)
    res = load_results(out)
    err = res["error"].sel(dataset="branin", repetition=0)
    assert err.sel(calibrator="b").item() == "" and err.sel(calibrator="iso").item() == ""
    assert err.sel(calibrator="killer").item().startswith("worker killed: its process")
    assert "Fix: use the sparse GP base" in err.sel(calibrator="killer").item()
    assert np.isfinite(res["crps"].sel(calibrator=["b", "iso"])).all()
    assert np.isnan(res["crps"].sel(calibrator="killer")).all()
    parts = sorted((tmp_path / "r.nc.parts").iterdir())
    stamps = {p.name: p.stat().st_mtime_ns for p in parts}
    run_comparison(spec, out, workers=2, progress=False)  # the same command: only the killed method runs
    again = load_results(out)
    assert (again["error"] == "").all()
    for name, stamp in stamps.items():
        changed = (tmp_path / "r.nc.parts" / name).stat().st_mtime_ns != stamp
        assert changed == ("killer" in name), name
    xr.testing.assert_equal(again["crps"].sel(calibrator=["b", "iso"]), res["crps"].sel(calibrator=["b", "iso"]))
