"""The comparison runner: serial, LocalCluster and an external scheduler agree; a killed run resumes."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from calibprob.compare import load_results, parse_spec, run_comparison, task_keys
from calibprob.compare.runner import results_path_parts
from tests.support.memory import faults_per_allocation as _faults_per_allocation
from tests.support.paths import REPO_ROOT

REPO = REPO_ROOT
BIN = Path(sys.executable).parent


def small_spec(**over):
    spec = {
        "name": "small",
        "datasets": ["diabetes", {"name": "branin", "function": "branin", "n": 120, "noise": 0.5}],
        "split": {"train": 0.6, "calibrate": 0.2, "test": 0.2},
        "repetitions": 3,
        "seed": 7,
        "base": {"kind": "bayesian-ridge"},
        "methods": {"b": {"kind": "base"}, "b2": {"kind": "base"}},
        "confidence_level": [0.5, 0.9],
    }
    spec.update(over)
    return parse_spec(spec)


def _metrics(path):
    return xr.open_datatree(path, engine="h5netcdf").to_dataset().load()


def test_serial_run_has_the_documented_layout(tmp_path):
    spec = small_spec()
    tree = run_comparison(spec, tmp_path / "r.nc", progress=False)
    ds = tree.to_dataset()
    assert {"dataset", "calibrator", "repetition", "confidence_level"} <= set(ds.dims)
    assert list(ds["calibrator"].values) == ["b", "b2"]
    for name in ("ece", "iae", "nll", "crps", "pinball", "mse", "rmse", "std", "coverage", "width"):
        assert name in ds, name
    assert ds["coverage"].dims == ("dataset", "repetition", "calibrator", "confidence_level") or set(
        ds["coverage"].dims
    ) == {"dataset", "repetition", "calibrator", "confidence_level"}
    # the same base twice gives the same scores
    xr.testing.assert_equal(ds["nll"].sel(calibrator="b", drop=True), ds["nll"].sel(calibrator="b2", drop=True))
    assert np.all(tree["timing"]["base_fit_time"].values >= 0)
    # loads back unchanged
    back = xr.open_datatree(tmp_path / "r.nc", engine="h5netcdf")
    xr.testing.assert_identical(back.to_dataset().load(), ds)
    assert back.to_dataset().attrs["spec_fingerprint"] == spec.fingerprint


def test_failing_calibrator_is_recorded_not_fatal(tmp_path):
    spec = small_spec(
        repetitions=1, datasets=["diabetes"], base={"kind": "bayesian-ridge"}, methods={"ok": {"kind": "base"}}
    )
    # a base that cannot be fitted makes the task fail; the run still finishes and says why
    # (optimize = false without theta passes the spec's type checks but fails at fit)
    bad = small_spec(repetitions=1, datasets=["diabetes"], base={"kind": "gp", "optimize": False})
    run_comparison(bad, tmp_path / "bad.nc", progress=False)
    res = load_results(tmp_path / "bad.nc")
    assert "optimize=False needs fixed hyperparameters" in str(res["task_error"].values.ravel()[0])
    run_comparison(spec, tmp_path / "ok.nc", progress=False)
    assert str(load_results(tmp_path / "ok.nc")["error"].values.ravel()[0]) == ""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(600)
def test_serial_localcluster_and_external_scheduler_agree(tmp_path):
    spec = small_spec()
    serial = run_comparison(spec, tmp_path / "serial.nc", progress=False).to_dataset()
    local = run_comparison(spec, tmp_path / "local.nc", workers=2, progress=False).to_dataset()
    xr.testing.assert_identical(serial, local)

    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [
        subprocess.Popen(
            [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        time.sleep(2)
        for _ in range(2):
            procs.append(
                subprocess.Popen(
                    [str(BIN / "dask"), "worker", address, "--nthreads", "1", "--no-dashboard"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    cwd=tmp_path,
                )
            )
        from dask.distributed import Client

        with Client(address, timeout=60) as c:
            c.wait_for_workers(2, timeout=60)
        external = run_comparison(spec, tmp_path / "ext.nc", scheduler=address, progress=False).to_dataset()
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            p.wait(timeout=30)
    xr.testing.assert_identical(serial, external)
    xr.testing.assert_identical(_metrics(tmp_path / "serial.nc"), _metrics(tmp_path / "ext.nc"))


@pytest.mark.timeout(600)
def test_killed_run_resumes_without_recomputing(tmp_path):
    spec_text = (REPO / "tests" / "data" / "resume.toml").read_text()
    spec_path = tmp_path / "resume.toml"
    spec_path.write_text(spec_text)
    out = tmp_path / "res.nc"
    cmd = [str(BIN / "calibprob"), "compare", str(spec_path), "--out", str(out), "--no-progress"]
    parts = results_path_parts(out)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline and not (parts.is_dir() and len(list(parts.glob("*.nc"))) >= 2):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # a real kill, mid-run
    proc.wait()
    finished = {p.name: p.stat().st_mtime_ns for p in parts.glob("*.nc")}
    n_tasks = len(task_keys(parse_spec(__import__("tomllib").loads(spec_text))))
    assert 2 <= len(finished) < n_tasks, "the kill should land part-way through the run"
    assert not out.exists()

    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = {p.name: p.stat().st_mtime_ns for p in parts.glob("*.nc")}
    assert len(after) == n_tasks
    for name, mtime in finished.items():
        assert after[name] == mtime, f"{name} was recomputed"

    clean = tmp_path / "clean"
    clean.mkdir()
    shutil.copy(spec_path, clean / "resume.toml")
    subprocess.run(
        [
            str(BIN / "calibprob"),
            "compare",
            str(clean / "resume.toml"),
            "--out",
            str(clean / "res.nc"),
            "--no-progress",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    xr.testing.assert_identical(_metrics(out), _metrics(clean / "res.nc"))


def test_repetitions_override_runs_the_first_splits_and_extends_without_recomputing(tmp_path):
    spec_path = tmp_path / "resume.toml"
    spec_path.write_text((REPO / "tests" / "data" / "resume.toml").read_text())
    spec = parse_spec(__import__("tomllib").loads(spec_path.read_text()))
    assert spec.repetitions >= 2
    out = tmp_path / "res.nc"
    cmd = [str(BIN / "calibprob"), "compare", str(spec_path), "--out", str(out), "--no-progress"]
    subprocess.run(cmd + ["--repetitions", "1"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    short = _metrics(out)
    assert short.sizes["repetition"] == 1 and short.attrs["repetitions"] == 1
    parts = results_path_parts(out)
    first = {p.name: p.stat().st_mtime_ns for p in parts.glob("*.nc")}
    assert len(first) == len(spec.datasets)

    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    full = _metrics(out)
    assert full.sizes["repetition"] == spec.repetitions
    for name, mtime in first.items():  # the finished repetition was reused, not recomputed
        assert (parts / name).stat().st_mtime_ns == mtime
    # the first repetition of the full run is the short run's (same split seeds)
    xr.testing.assert_equal(full["nll"].isel(repetition=[0]), short["nll"])

    bad = subprocess.run(cmd + ["--repetitions", "0"], capture_output=True, text=True)
    assert bad.returncode != 0 and "--repetitions must be a positive integer; got 0" in bad.stderr


def test_local_cluster_workers_reuse_freed_memory_instead_of_faulting_it_in_again():
    """Dask's default MALLOC_TRIM_THRESHOLD_=65536 mmaps every array above 128 KiB afresh; ours are reused.

    The task runs in a worker thread; a 4 MB array is 1 013 pages, each faulted in (zero-filled by
    the kernel) when the memory is mmap-ed afresh, as Dask's setting and the worker thread's own
    malloc arena did (1.3 s of system time per CV+ refit in the one-repetition benchmark).
    """
    from dask.distributed import Client

    from calibprob.compare.runner import local_cluster
    from calibprob.runs import WORKER_MALLOC

    with local_cluster(1) as cluster, Client(cluster) as client:
        env = client.run(lambda: {k: os.environ.get(k) for k in WORKER_MALLOC})
        profiling = client.run(lambda: __import__("dask").config.get("distributed.worker.profile.enabled"))
        faults = client.submit(_faults_per_allocation, pure=False).result()
    assert list(env.values()) == [WORKER_MALLOC]
    assert list(profiling.values()) == [False]  # no thread sampling the task's stack every 10 ms
    assert faults < 50, f"{faults:.0f} page faults per 4 MB allocation in a worker thread"


@pytest.mark.parametrize(
    "n, err, match",
    [
        (0, ValueError, r"n_workers .* must be >= 1; got 0"),
        (1.5, TypeError, r"n_workers .* must be an integer; got 1.5"),
    ],
)
def test_local_cluster_rejects_bad_worker_counts(n, err, match):
    from calibprob.compare.runner import local_cluster

    with pytest.raises(err, match=match):
        local_cluster(n)


def test_tune_malloc_makes_this_process_reuse_freed_gp_matrices():
    """The command-line process gets the workers' malloc settings, whatever state malloc was in."""
    probe = (
        "import ctypes, sys; sys.path.insert(0, {root!r}); from tests.support import memory as t; "
        "from calibprob.runs import tune_malloc; "
        # Dask's nanny setting (a 128 KiB mmap threshold): every 4 MB array is mmap-ed afresh
        "ctypes.CDLL(None).mallopt(-3, 128 * 1024); "
        "print(t.faults_per_allocation()); print(tune_malloc()); print(t.faults_per_allocation())"
    ).format(root=str(REPO))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    before, applied, after = out.stdout.split()
    assert applied == "True"
    assert float(before) > 500 and float(after) < 50  # a 4 MB array is 1 013 pages
