"""The command line's errors: one clear line (no traceback) and a non-zero exit for bad options, unwritable or
foreign files and unreachable schedulers; failed tasks are listed after the table."""

import re
import time

import pytest
import xarray as xr

from calibprob.cli import main
from tests.support.specs import spec_file


def test_full_disk_is_one_clear_line(tmp_path, monkeypatch, capsys):
    import errno

    def full(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(xr.Dataset, "to_netcdf", full)
    monkeypatch.setattr(xr.DataTree, "to_netcdf", full)
    code = main(["compare", str(spec_file(tmp_path)), "--out", str(tmp_path / "o.nc"), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2
    assert err.startswith("calibprob: error: could not write") and "No space left on device. Free some space" in err


def test_report_on_a_foreign_or_non_netcdf_file_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "notes.nc").write_text("hello")
    assert main(["report", str(tmp_path / "notes.nc")]) == 2
    assert "is not a netCDF file" in capsys.readouterr().err
    xr.Dataset({"v": ("x", [1.0])}).to_netcdf(tmp_path / "foreign.nc", engine="h5netcdf")
    assert main(["report", str(tmp_path / "foreign.nc")]) == 2
    assert "is a netCDF file but not calibprob comparison results" in capsys.readouterr().err


def test_compare_prints_the_failures_and_exits_nonzero_when_every_task_fails(tmp_path, capsys):
    spec = spec_file(tmp_path, base={"kind": "gp", "optimize": False})  # passes load, fails at fit
    code = main(["compare", str(spec), "--out", str(tmp_path / "o.nc"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1
    assert "branin/rep 0  ValueError: optimize=False needs fixed hyperparameters" in err
    assert "every task failed" in err


def test_compare_with_some_failures_prints_the_table_and_the_failures(tmp_path, capsys, monkeypatch):
    from calibprob.compare import methods

    real = methods.METHOD_KINDS["isotonic"]
    monkeypatch.setitem(
        methods.METHOD_KINDS, "isotonic", methods.MethodKind("isotonic", lambda ctx, **o: 1 / 0, real.options)
    )
    code = main(["compare", str(spec_file(tmp_path)), "--out", str(tmp_path / "o.nc"), "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 0 and "nll" in out
    assert "branin/rep 1/iso  ZeroDivisionError: division by zero" in err


@pytest.mark.parametrize(
    "args, match",
    [
        (["--seeds", "0"], r"--seeds must be a positive number of seeds; got 0"),
        (["--n-steps", "-3"], r"n_steps \(--n-steps\) must be >= 0; got -3"),
        (["--eta", "nan"], r"eta"),
        (["--n-init", "1", "--acquisitions", "ei"], r"n_init \(initial design size, --n-init\) must be >= 2; got 1"),
        (["--refit-every", "0"], r"refit_every \(--refit-every\) must be >= 1; got 0"),
        (["--kappa", "inf"], r"kappa \(--kappa\) must be a finite number"),
        (["--scheduler", "not an address"], r"scheduler must be an address such as tcp://HOST:PORT"),
    ],
)
def test_bo_bad_options_are_one_clear_line(args, match, capsys):
    code = main(["bo", "--functions", "forrester", "--seeds", "1", "--n-steps", "1", "--no-progress", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err

    assert re.search(match, err), err


def test_bo_out_is_checked_before_running(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("keep me")
    assert main(["bo", "--seeds", "1", "--n-steps", "1", "--out", str(tmp_path / "notes.txt"), "--no-progress"]) == 2
    assert "not a netCDF file" in capsys.readouterr().err and (tmp_path / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:1", "nonsense://x", "127.0.0.1"])
def test_scheduler_errors_come_within_ten_seconds(tmp_path, address, capsys):
    t0 = time.perf_counter()
    code = main(
        ["compare", str(spec_file(tmp_path)), "--out", str(tmp_path / "o.nc"), "--no-progress", "--scheduler", address]
    )
    elapsed = time.perf_counter() - t0
    err = capsys.readouterr().err
    assert code == 2 and elapsed < 10.0, (elapsed, err)
    assert err.strip().splitlines()[-1].startswith("calibprob: error:")
    assert ("could not reach the Dask scheduler" in err) or ("must be an address" in err)
