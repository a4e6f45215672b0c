"""The executor's output handling: unsafe outputs refused before any task runs, file names kept inside their
folder, and resume that never serves a stale part (edited inputs, failed tasks, swapped, edited or truncated
parts, concurrent runs on one output)."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from calibprob.cli import main
from calibprob.compare import load_results, parse_spec, run_comparison, write_plots
from calibprob.compare.runner import results_path_parts
from calibprob.runs import OutputError, check_output_path, content_checksum, safe_name
from tests.support.specs import csv_spec, metrics_of, spec_dict, spec_file, write_csv

BIN = Path(sys.executable).parent


def test_dev_null_is_refused_without_being_touched():
    before = os.stat("/dev/null")
    with pytest.raises(OutputError, match=r"'/dev/null' is a character device, not a regular file; refusing"):
        check_output_path("/dev/null")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino
    assert not Path("/dev/null.parts").exists()


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda p: p.mkdir(), r"is a directory, not a regular file"),
        (lambda p: p.write_text("my notes"), r"exists and is not a netCDF file; refusing to overwrite it"),
        (lambda p: (p.parent / "file").write_text("x"), r"its folder .* is not a directory"),
    ],
)
def test_unsafe_out_is_refused_before_any_task_runs(tmp_path, make, match, monkeypatch):
    out = tmp_path / "out.nc"
    make(out)
    if "folder" in match:
        out = tmp_path / "file" / "out.nc"
    import calibprob.compare.runner as runner

    monkeypatch.setattr(runner, "run_task", lambda *a: pytest.fail("a task ran"))
    with pytest.raises(OutputError, match=match):
        run_comparison(parse_spec(spec_dict()), out, progress=False)
    assert main(["compare", str(spec_file(tmp_path)), "--out", str(out), "--no-progress"]) == 2


@pytest.mark.parametrize("name, stem", [("../../x", "______x"), ("/tmp/abs", "_tmp_abs"), ("a b", "a_b")])
def test_plot_names_stay_inside_their_folder(tmp_path, name, stem):
    """Data-set names like "../../x" or absolute paths write plots and parts inside their folders."""
    tree = run_comparison(
        parse_spec(spec_dict(datasets=[{"name": name, "function": "branin", "n": 40}])),
        tmp_path / "r.nc",
        progress=False,
    )
    plots = tmp_path / "deep" / "plots"
    written = write_plots(load_results(tmp_path / "r.nc"), plots)
    assert written and all(p.resolve().parent == plots.resolve() for p in written)
    assert {p.name for p in written} == {
        f"{stem}_reliability.png",
        f"{stem}_coverage.png",
        f"{stem}_sharpness_calibration.png",
    }
    assert sorted(p.name for p in (tmp_path / "r.nc.parts").iterdir() if p.suffix == ".nc") == [
        f"{stem}__rep0000.nc",
        f"{stem}__rep0001.nc",
    ]
    assert tree is not None
    assert safe_name(name) == stem


def _parts(out):
    return sorted(results_path_parts(out).glob("*.nc"))


def test_editing_a_csv_recomputes_its_tasks(tmp_path):
    write_csv(tmp_path / "d.csv", n=40, seed=0)
    out = tmp_path / "r.nc"
    first = run_comparison(parse_spec(csv_spec(tmp_path), root=tmp_path), out, progress=False).to_dataset()
    write_csv(tmp_path / "d.csv", n=40, seed=1)  # same path, other content
    spec = parse_spec(csv_spec(tmp_path), root=tmp_path)
    second = run_comparison(spec, out, progress=False).to_dataset()
    clean = run_comparison(spec, tmp_path / "clean.nc", progress=False).to_dataset()
    assert not np.allclose(first["nll"].values, second["nll"].values)
    xr.testing.assert_identical(second, clean)


def test_a_failed_task_is_retried_once_the_cause_is_fixed(tmp_path, monkeypatch):
    import calibprob.compare.tasks as tasks

    out = tmp_path / "r.nc"
    spec = parse_spec(spec_dict())
    real = tasks._prepare
    monkeypatch.setattr(tasks, "_prepare", lambda *a: (_ for _ in ()).throw(MemoryError("out of memory")))
    failed = run_comparison(spec, out, progress=False).to_dataset()
    assert all("MemoryError: out of memory" in str(e) for e in failed["task_error"].values.ravel())
    monkeypatch.setattr(tasks, "_prepare", real)  # the cause is fixed
    fixed = run_comparison(spec, out, progress=False).to_dataset()
    assert (fixed["task_error"].values == "").all() and np.isfinite(fixed["nll"].values).all()
    xr.testing.assert_identical(fixed, run_comparison(spec, tmp_path / "clean.nc", progress=False).to_dataset())


def test_a_failed_calibrator_makes_its_task_retried(tmp_path, monkeypatch):
    from calibprob.compare import methods

    out = tmp_path / "r.nc"
    spec = parse_spec(spec_dict())
    real = methods.METHOD_KINDS["isotonic"]
    monkeypatch.setitem(
        methods.METHOD_KINDS, "isotonic", methods.MethodKind("isotonic", lambda ctx, **o: 1 / 0, real.options)
    )
    bad = run_comparison(spec, out, progress=False).to_dataset()
    assert "ZeroDivisionError" in str(bad["error"].sel(calibrator="iso").values.ravel()[0])
    monkeypatch.setitem(methods.METHOD_KINDS, "isotonic", real)
    good = run_comparison(spec, out, progress=False).to_dataset()
    assert (good["error"].values == "").all()


def test_swapped_edited_or_truncated_parts_are_recomputed(tmp_path):
    out = tmp_path / "r.nc"
    spec = parse_spec(spec_dict(repetitions=3))
    reference = run_comparison(spec, out, progress=False).to_dataset()
    p0, p1, p2 = _parts(out)
    # repetition 0's part copied over repetition 1's name
    p1.write_bytes(p0.read_bytes())
    # one number of repetition 2's part edited, its attributes (and stale checksum) kept
    ds = xr.load_dataset(p2, engine="h5netcdf")
    ds["nll"][0, 0, 0] = ds["nll"][0, 0, 0] + 1.0
    assert content_checksum(ds) != ds.attrs["task_checksum"]
    ds.to_netcdf(p2, engine="h5netcdf")
    untouched = p0.stat().st_mtime_ns
    again = run_comparison(spec, out, progress=False).to_dataset()
    xr.testing.assert_identical(again, reference)
    assert p0.stat().st_mtime_ns == untouched  # the intact part was reused
    # a truncated part is recomputed too
    p2.write_bytes(p2.read_bytes()[:100])
    xr.testing.assert_identical(run_comparison(spec, out, progress=False).to_dataset(), reference)


def test_checksum_survives_the_netcdf_round_trip(tmp_path):
    from calibprob.compare import run_task

    ds = run_task(parse_spec(spec_dict()).to_dict(), "branin", 0)
    ds.to_netcdf(tmp_path / "p.nc", engine="h5netcdf")
    assert content_checksum(xr.load_dataset(tmp_path / "p.nc", engine="h5netcdf")) == content_checksum(ds)


@pytest.mark.timeout(600)
def test_two_concurrent_runs_on_one_out_give_the_single_run_result(tmp_path):
    spec_path = spec_file(
        tmp_path,
        repetitions=6,
        datasets=[{"name": "branin", "function": "branin", "n": 400, "noise": 0.3}],
        methods={"b": {"kind": "base"}, "cp": {"kind": "jackknife-plus"}},
    )
    out = tmp_path / "shared.nc"
    cmd = [str(BIN / "calibprob"), "compare", str(spec_path), "--out", str(out), "--no-progress"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=500) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert any("waiting for it to finish" in e for _, e in outs)  # the second one waited
    single = tmp_path / "single"
    single.mkdir()
    subprocess.run(
        [str(BIN / "calibprob"), "compare", str(spec_path), "--out", str(single / "s.nc"), "--no-progress"],
        check=True,
        capture_output=True,
    )
    xr.testing.assert_identical(metrics_of(out), metrics_of(single / "s.nc"))
    assert not list(tmp_path.glob("**/*.tmp*"))


def test_busy_output_can_refuse_instead_of_waiting(tmp_path):
    from calibprob.runs import RunOutput

    with RunOutput(tmp_path / "o.nc"):
        with pytest.raises(OutputError, match=r"is being written by another calibprob run \(pid \d+\)"):
            with RunOutput(tmp_path / "o.nc", wait=False):
                pass


def test_bo_resume_uses_the_shared_executor_and_checks_parts(tmp_path):
    from calibprob.bo import run_experiment

    kw = dict(acquisitions=["ei"], methods=["uncalibrated"], seeds=2, n_init=3, n_steps=1, progress=False)
    out = tmp_path / "bo.nc"
    first = run_experiment(["forrester"], out=out, **kw)
    parts = sorted(results_path_parts(out).glob("*.nc"))
    parts[1].write_bytes(parts[0].read_bytes())  # seed 0's run copied over seed 1's
    again = run_experiment(["forrester"], out=out, **kw)
    xr.testing.assert_identical(first.drop_vars("run_time"), again.drop_vars("run_time"))  # run_time: a clock
