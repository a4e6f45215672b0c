"""Issue 16's reproducers, one test (or table row) each: silently-wrong results now come out right
or stop with a clear error; crashes become clear errors; resume never serves stale parts.

(The GP centring / no-start-converged / signal-variance-bound reproducers S1, S2 live with the GP tests.)
"""

import json
import os
import stat
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import calibprob
from calibprob.cli import main
from calibprob.compare import SpecError, load_results, parse_spec, run_comparison, write_plots
from calibprob.compare.assembly import results_path_parts
from calibprob.runs import OutputError, check_output_path, content_checksum, safe_name

BIN = Path(sys.executable).parent


def spec_dict(**over):
    spec = {
        "name": "r",
        "datasets": [{"name": "branin", "function": "branin", "n": 40, "noise": 0.3}],
        "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
        "repetitions": 2,
        "seed": 3,
        "base": {"kind": "ols"},
        "methods": {"b": {"kind": "base"}, "iso": {"kind": "isotonic", "extrapolate": True}},
        "confidence_levels": [0.5, 0.9],
    }
    spec.update(over)
    return spec


def write_csv(path: Path, n: int = 30, seed: int = 0, *, text: bool = False) -> Path:
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    frame = pd.DataFrame({"x1": x1, "x2": x2, "y": 1.0 + 2.0 * x1 - x2 + 0.3 * rng.normal(size=n)})
    if text:
        frame["soil"] = np.array(["clay", "loam", "sand"])[np.arange(n) % 3]
    frame.to_csv(path, index=False)
    return path


def csv_spec(tmp_path, **entry):
    return spec_dict(datasets=[{"name": "mine", "path": "d.csv", "target": "y", **entry}])


def metrics_of(path):
    tree = xr.open_datatree(path, engine="h5netcdf")
    ds = tree.to_dataset().load()
    tree.close()
    return ds


# ----------------------------------------------------------------------------------- S7 / S8 and typing
@pytest.mark.parametrize(
    "over, match",
    [
        # S7, S8: strings where booleans belong
        (
            {"methods": {"i": {"kind": "isotonic", "extrapolate": "false"}}},
            r"methods\.i\.extrapolate must be true or false .*got 'false'\. Write extrapolate = false without quotes",
        ),
        ({"base": {"kind": "ols", "fit_intercept": "no"}}, r"base\.fit_intercept must be true or false .*got 'no'"),
        (
            {"base": {"kind": "gp", "n_restarts": "two"}},
            r"base\.n_restarts must be an integer in \[1, 1000\]; got 'two'",
        ),
        ({"base": {"kind": "gp", "kernel": "nope"}}, r"base\.kernel must be one of 'se', 'matern'; got 'nope'"),
        (
            {"methods": {"m": {"kind": "marx", "center": "middle"}}},
            r"methods\.m\.center must be one of 'mean', 'median'",
        ),
        ({"methods": {"m": {"kind": 3}}}, r"methods\.m\.kind = 3 is unknown\. Valid kinds"),
        (
            {"base": {"kind": 3}},
            r"base\.kind must be one of gp, sparse-gp, ols, bayesian-ridge, pymc-linear, pymc-hsgp, python, quantile-gbm; "
            r"got 3",
        ),
        ({"confidence_levels": ["x"]}, r"confidence_levels must be in \(0, 1\); got 'x'"),
        ({"confidence_levels": 0.9}, r"confidence_levels must be a non-empty list"),
        ({"metrics": "ece"}, r"metrics must be a non-empty list of metric names.*got 'ece'"),
        ({"levels": [0.5]}, r"levels must hold at least two quantile levels"),
        ({"levels": ["a", "b"]}, r"levels must be a list of numbers"),
        ({"standardize": "true"}, r"standardize must be true or false"),
        ({"seed": -1}, r"seed must be an integer in \[0, "),
        ({"name": 5}, r"name must be a string; got 5"),
        # crash 1 and 2: sizes refused before anything is allocated, with the way to raise the cap
        (
            {"datasets": [{"name": "b", "function": "branin", "n": 100_000_000}]},
            r"datasets\[0\]\.n = 100000000 exceeds the cap of 1000000 .*CALIBPROB_MAX_N=100000000",
        ),
        ({"repetitions": 100_000_000}, r"repetitions = 100000000 exceeds the cap of 10000 .*CALIBPROB_MAX_REPETITIONS"),
        (
            {"datasets": [{"name": "b", "function": "ackley", "n": 40, "dim": "two"}]},
            r"datasets\[0\]\.dim must be an integer >= 1; got 'two'",
        ),
        ({"datasets": [{"name": "b", "function": "branin", "n": 40, "dim": 3}]}, r"datasets\[0\]\.dim: "),
        (
            {"datasets": [{"name": "b", "function": "branin", "n": 40, "design": "grid"}]},
            r"datasets\[0\]\.design must be one of 'uniform', 'lhs', 'sobol'",
        ),
        (
            {"datasets": [{"name": "b", "function": "branin", "n": 5}]},
            r"datasets\[0\] has 5 rows, too few for the split",
        ),
        ({"datasets": [{"name": "b", "function": "branin", "n": 40, "path": "x.csv"}]}, r"both 'path'"),
        (
            {"datasets": [{"name": "b", "function": "branin", "n": 40, "features": ["a"]}]},
            r"datasets\[0\]\.features applies only to CSV entries",
        ),
        # names that collide once made file-name safe
        (
            {
                "datasets": [
                    {"name": "a/b", "function": "branin", "n": 40},
                    {"name": "a_b", "function": "branin", "n": 40},
                ]
            },
            r"dataset names 'a/b' and 'a_b' are the same once made file-name safe \('a_b'",
        ),
        (
            {"datasets": [{"name": "", "function": "branin", "n": 40}]},
            r"datasets\[0\]\.name must be a non-empty string",
        ),
        (
            {"base": {"kind": "gp"}, "datasets": [{"name": "b", "function": "branin", "n": 900_000}]},
            r"training rows for an exact GP base .* exceed the cap of 20000.*sparse-gp",
        ),
    ],
)
def test_bad_values_are_refused_at_load_naming_the_key(over, match):
    with pytest.raises(SpecError, match=match):
        parse_spec(spec_dict(**over))


def test_oom_case_is_refused_before_allocating():
    t0 = time.perf_counter()
    with pytest.raises(SpecError, match="exceeds the cap"):
        parse_spec(spec_dict(datasets=[{"name": "b", "function": "branin", "n": 100_000_000}]))
    assert time.perf_counter() - t0 < 2.0


def test_caps_are_raised_by_their_environment_variable(monkeypatch):
    monkeypatch.setenv("CALIBPROB_MAX_REPETITIONS", "20000")
    assert parse_spec(spec_dict(repetitions=15000)).repetitions == 15000


# ----------------------------------------------------------------------------------- CSV checks at load
@pytest.mark.parametrize(
    "content, entry, match",
    [
        (b"x,y\n1,2\n2,3\n3,5\n", {}, r"datasets\[0\] has 3 rows, too few for the split .*Use at least 8 rows"),
        (b"x,y\n" + b"".join(b"%d,abc\n" % i for i in range(12)), {}, r"non-numeric: 'y'"),
        (
            b"x,y\n" + b"".join(b"%d,%s\n" % (i, b"" if i == 3 else b"1.5") for i in range(12)),
            {},
            r"missing values \('y': 1\)\. Pass dropna=True \(in a spec: dropna = true\)",
        ),
        (b"x,y\n" + b"".join(b"%d,7\n" % i for i in range(12)), {}, r"target column 'y' of d\.csv is constant"),
        (bytes(range(256)) * 4, {}, r"d\.csv is not a text CSV file"),
        (b"x,y\n" + b"".join(b"%d,\xe9\xff%d\n" % (i, i) for i in range(12)), {}, r"d\.csv is not UTF-8 text"),
        (b"", {}, r"d\.csv is empty"),
        (
            b"x,soil,y\n" + b"".join(b"%d,%s,%d\n" % (i, [b"a", b"b"][i % 2], i) for i in range(12)),
            {},
            r"non-numeric: 'soil' \(e\.g\. 'a'\)\. One-hot encode them with one_hot=True \(in a spec: one_hot = true\)",
        ),
        (
            b"x,y\n" + b"".join(b"%d,%d\n" % (i, i * i) for i in range(12)),
            {"features": ["z"]},
            r"features must be columns of d\.csv; not found: 'z'",
        ),
        (
            b"x,y\n" + b"".join(b"%d,%d\n" % (i, i * i) for i in range(12)),
            {"features": ["x"], "exclude": ["x"]},
            r"both 'features' .* and 'exclude'",
        ),
        (
            b"x,y\n" + b"".join(b"%d,%d\n" % (i, i * i) for i in range(12)),
            {"one_hot": "yes"},
            r"datasets\[0\]\.one_hot must be true or false .* or a list",
        ),
        (
            b"x,y\n" + b"".join(b"%d,%d\n" % (i, i * i) for i in range(12)),
            {"sha256": "0" * 64},
            r"datasets\[0\]\.sha256 = '0+' does not match the content hash of d\.csv",
        ),
        (
            b"x,y\n" + b"".join(b"%d,%d\n" % (i, i * i) for i in range(12)),
            {"subsample": 0},
            r"datasets\[0\]\.subsample must be an integer >= 1; got 0",
        ),
    ],
)
def test_csv_problems_are_caught_at_load(tmp_path, content, entry, match):
    (tmp_path / "d.csv").write_bytes(content)
    with pytest.raises(SpecError, match=match):
        parse_spec(csv_spec(tmp_path, **entry), root=tmp_path)


def test_utf8_bom_is_not_part_of_the_first_column_name(tmp_path):
    body = "a,y\n" + "".join(f"{i},{i * i % 7}\n" for i in range(12))
    (tmp_path / "d.csv").write_bytes(b"\xef\xbb\xbf" + body.encode())
    spec = parse_spec(
        spec_dict(datasets=[{"name": "m", "path": "d.csv", "target": "y", "features": ["a"]}]), root=tmp_path
    )
    data = calibprob.datasets.load_csv(spec.datasets[0].path, "y")
    assert data["feature"].values.tolist() == ["a"]


def test_dropna_features_exclude_and_subsample_are_spec_keys(tmp_path):
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(
        {"a": rng.normal(size=50), "b": rng.normal(size=50), "junk": ["t"] * 50, "y": rng.normal(size=50)}
    )
    frame.loc[4, "a"] = np.nan
    frame.to_csv(tmp_path / "d.csv", index=False)
    from calibprob.compare.tasks import _prepare

    spec = parse_spec(csv_spec(tmp_path, exclude=["junk"], dropna=True, subsample=30), root=tmp_path)
    _, arrays = _prepare(spec, "mine", 0)
    assert sum(len(v[1]) for v in arrays.values()) == 30
    same = parse_spec(csv_spec(tmp_path, features=["a", "b"], dropna=True, subsample=30), root=tmp_path)
    _, again = _prepare(same, "mine", 0)
    np.testing.assert_array_equal(arrays["test"][0], again["test"][0])  # the same seeded rows
    assert parse_spec(spec.to_dict(), root=tmp_path) == spec


def test_one_hot_text_column_with_ols_base_is_full_rank(tmp_path):
    """Before: a one-hot CSV with an OLS base failed with "X is rank deficient"; now one level is dropped."""
    write_csv(tmp_path / "d.csv", n=60, text=True)
    data = calibprob.datasets.load_csv(tmp_path / "d.csv", "y", one_hot=True)
    assert data["feature"].values.tolist() == ["x1", "x2", "soil=loam", "soil=sand"]
    np.testing.assert_array_equal(data["X"].values[:3, 2:], [[0, 0], [1, 0], [0, 1]])  # clay dropped
    spec = parse_spec(csv_spec(tmp_path, one_hot=True), root=tmp_path)
    tree = run_comparison(spec, tmp_path / "r.nc", progress=False)
    assert (tree.to_dataset()["task_error"].values == "").all()
    assert np.isfinite(tree.to_dataset()["nll"].values).all()


# ----------------------------------------------------------------------------------- S9 and safe outputs
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
    assert main(["compare", str(_spec_file(tmp_path)), "--out", str(out), "--no-progress"]) == 2


def _spec_file(folder: Path, **over) -> Path:
    import tomllib  # noqa: F401  (the spec is written as TOML)

    spec = spec_dict(**over)
    lines = [
        f'name = "{spec["name"]}"',
        f"repetitions = {spec['repetitions']}",
        f"seed = {spec['seed']}",
        f"confidence_levels = {json.dumps(spec['confidence_levels'])}",
        "datasets = ["
        + ", ".join("{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in d.items()) + "}" for d in spec["datasets"])
        + "]",
        "[split]",
        *(f"{k} = {v}" for k, v in spec["split"].items()),
        "[base]",
        *(f"{k} = {json.dumps(v)}" for k, v in spec["base"].items()),
    ]
    for name, m in spec["methods"].items():
        lines += [f"[methods.{name}]", *(f"{k} = {json.dumps(v)}" for k, v in m.items())]
    path = folder / "spec.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_full_disk_is_one_clear_line(tmp_path, monkeypatch, capsys):
    import errno

    def full(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(xr.Dataset, "to_netcdf", full)
    monkeypatch.setattr(xr.DataTree, "to_netcdf", full)
    code = main(["compare", str(_spec_file(tmp_path)), "--out", str(tmp_path / "o.nc"), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2
    assert err.startswith("calibprob: error: could not write") and "No space left on device. Free some space" in err


@pytest.mark.parametrize("name, stem", [("../../x", "______x"), ("/tmp/abs", "_tmp_abs"), ("a b", "a_b")])
def test_plot_names_stay_inside_their_folder(tmp_path, name, stem):
    """S10: data-set names like "../../x" or absolute paths no longer write outside --plots."""
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


def test_report_on_a_foreign_or_non_netcdf_file_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "notes.nc").write_text("hello")
    assert main(["report", str(tmp_path / "notes.nc")]) == 2
    assert "is not a netCDF file" in capsys.readouterr().err
    xr.Dataset({"v": ("x", [1.0])}).to_netcdf(tmp_path / "foreign.nc", engine="h5netcdf")
    assert main(["report", str(tmp_path / "foreign.nc")]) == 2
    assert "is a netCDF file but not calibprob comparison results" in capsys.readouterr().err


# ----------------------------------------------------------------------------------- resume
def _parts(out):
    return sorted(results_path_parts(out).glob("*.nc"))


def _mtimes(out):
    return {p.name: p.stat().st_mtime_ns for p in _parts(out)}


def test_s3_editing_the_csv_recomputes(tmp_path):
    write_csv(tmp_path / "d.csv", n=40, seed=0)
    out = tmp_path / "r.nc"
    first = run_comparison(parse_spec(csv_spec(tmp_path), root=tmp_path), out, progress=False).to_dataset()
    write_csv(tmp_path / "d.csv", n=40, seed=1)  # same path, other content
    spec = parse_spec(csv_spec(tmp_path), root=tmp_path)
    second = run_comparison(spec, out, progress=False).to_dataset()
    clean = run_comparison(spec, tmp_path / "clean.nc", progress=False).to_dataset()
    assert not np.allclose(first["nll"].values, second["nll"].values)
    xr.testing.assert_identical(second, clean)


def test_s4_a_failed_task_is_retried_once_the_cause_is_fixed(tmp_path, monkeypatch):
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


def test_s5_s6_swapped_or_edited_parts_are_recomputed(tmp_path):
    out = tmp_path / "r.nc"
    spec = parse_spec(spec_dict(repetitions=3))
    reference = run_comparison(spec, out, progress=False).to_dataset()
    p0, p1, p2 = _parts(out)
    # S5: repetition 0's part copied over repetition 1's name
    p1.write_bytes(p0.read_bytes())
    # S6: one number of repetition 2's part edited, its attributes (and stale checksum) kept
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
    spec_path = _spec_file(
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


# ----------------------------------------------------------------------------------- failures reported
def test_compare_prints_the_failures_and_exits_nonzero_when_every_task_fails(tmp_path, capsys):
    spec = _spec_file(tmp_path, base={"kind": "gp", "optimize": False})  # passes load, fails at fit
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
    code = main(["compare", str(_spec_file(tmp_path)), "--out", str(tmp_path / "o.nc"), "--no-progress"])
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
    import re

    assert re.search(match, err), err


def test_bo_out_is_checked_before_running(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("keep me")
    assert main(["bo", "--seeds", "1", "--n-steps", "1", "--out", str(tmp_path / "notes.txt"), "--no-progress"]) == 2
    assert "not a netCDF file" in capsys.readouterr().err and (tmp_path / "notes.txt").read_text() == "keep me"


def test_bo_resume_uses_the_shared_executor_and_checks_parts(tmp_path):
    from calibprob.bo import run_experiment

    kw = dict(acquisitions=["ei"], methods=["uncalibrated"], seeds=2, n_init=3, n_steps=1, progress=False)
    out = tmp_path / "bo.nc"
    first = run_experiment(["forrester"], out=out, **kw)
    parts = sorted(results_path_parts(out).glob("*.nc"))
    parts[1].write_bytes(parts[0].read_bytes())  # seed 0's run copied over seed 1's
    again = run_experiment(["forrester"], out=out, **kw)
    xr.testing.assert_identical(first.drop_vars("run_time"), again.drop_vars("run_time"))  # run_time: a clock


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:1", "nonsense://x", "127.0.0.1"])
def test_scheduler_errors_come_within_ten_seconds(tmp_path, address, capsys):
    t0 = time.perf_counter()
    code = main(
        ["compare", str(_spec_file(tmp_path)), "--out", str(tmp_path / "o.nc"), "--no-progress", "--scheduler", address]
    )
    elapsed = time.perf_counter() - t0
    err = capsys.readouterr().err
    assert code == 2 and elapsed < 10.0, (elapsed, err)
    assert err.strip().splitlines()[-1].startswith("calibprob: error:")
    assert ("could not reach the Dask scheduler" in err) or ("must be an address" in err)


# ----------------------------------------------------------------------------------- S11 - S13, linear numerics
@pytest.mark.parametrize(
    "cls",
    [
        calibprob.LinearRegression,
        calibprob.BayesianRidge,
        calibprob.GaussianProcessRegressor,
        calibprob.SparseGaussianProcessRegressor,
    ],
)
def test_s11_reordered_or_missing_dataframe_columns_are_refused(cls):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=40), "b": 10 * rng.normal(size=40)})
    y = X["a"] - 0.1 * X["b"] + 0.1 * rng.normal(size=40)
    model = cls().fit(X, y)
    assert model.feature_names_in_.tolist() == ["a", "b"]
    mu, _ = model.predict_mean_std(X)
    np.testing.assert_allclose(model.predict_mean_std(X.to_numpy())[0], mu)  # plain arrays: fit's order
    with pytest.raises(
        ValueError,
        match=r"X has the fitted columns in another order \(\['b', 'a'\]\).*"
        r"X\[model\.feature_names_in_\]",
    ):
        model.predict_mean_std(X[["b", "a"]])
    with pytest.raises(ValueError, match=r"X has other columns than in fit \(missing 'b'; not seen in fit 'c'\)"):
        model.predict_mean_std(X.rename(columns={"b": "c"}))
    refit = cls().fit(X.to_numpy(), y)
    assert not hasattr(refit, "feature_names_in_")


def test_s12_validate_checks_normal_loc_scale_against_quantiles():
    pred = calibprob.normal([0.0, 1.0], [1.0, 2.0], levels=[0.1, 0.5, 0.9])
    calibprob.validate(pred)
    bad = pred.copy(deep=True)
    bad["quantile"][1] = bad["quantile"][1] + 5.0
    with pytest.raises(
        ValueError,
        match=r"family='normal' Dataset's 'quantile' disagrees with its loc/scale in 1 "
        r"of 2 observations \(first: obs 1, level 0\.1",
    ):
        calibprob.validate(bad)
    with pytest.raises(ValueError, match="disagrees with its loc/scale"):
        calibprob.evaluate(bad, [0.0, 1.0])


def test_s13_from_cdf_grid_warns_when_it_repairs():
    grid = np.linspace(-4, 4, 801)
    from scipy import stats

    cdf = stats.norm.cdf(grid)[None, :].copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clean = calibprob.from_cdf_grid(grid, cdf, levels=[0.25, 0.5, 0.75])
    spiked = cdf.copy()
    spiked[0, 20] = 0.9  # a spike far in the left tail
    with pytest.warns(
        calibprob.CalibprobWarning,
        match=r"cdf decreased along the grid in 1 of 1 observations "
        r"\(largest drop 0\.9",
    ):
        repaired = calibprob.from_cdf_grid(grid, spiked, levels=[0.25, 0.5, 0.75])
    assert abs(float(clean["quantile"][0, 1])) < 0.01
    assert float(repaired["quantile"][0, 1]) < -3.0  # the median moved: exactly why the warning is needed


@pytest.mark.parametrize("cls", [calibprob.LinearRegression, calibprob.BayesianRidge])
def test_constant_y_is_a_clear_error_not_nan(cls):
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match=r"y is constant \(every value 3\.0\)"):
        cls().fit(X, np.full(20, 3.0))


@pytest.mark.parametrize(
    "cls, x_scale, y_scale",
    [
        (calibprob.LinearRegression, 1e300, 1.0),
        (calibprob.LinearRegression, 1e-300, 1.0),
        (calibprob.LinearRegression, 1.0, 1e100),
        (calibprob.LinearRegression, 1e-150, 1e-150),
        # BayesianRidge's weight precision scales as x_scale^2 / y_scale^2: representable up to ~1e150
        (calibprob.BayesianRidge, 1e100, 1.0),
        (calibprob.BayesianRidge, 1e-100, 1.0),
        (calibprob.BayesianRidge, 1.0, 1e100),
        (calibprob.BayesianRidge, 1e-150, 1e-150),
    ],
)
def test_extreme_scales_fit_like_unit_scale(cls, x_scale, y_scale):
    """1e300-scale X is no longer called rank deficient: predictions equal the unit-scale fit's, rescaled."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3))
    y = X @ [1.0, -2.0, 0.5] + 0.3 + 0.2 * rng.normal(size=50)
    unit = cls().fit(X, y)
    big = cls().fit(X * x_scale, y * y_scale)
    assert np.all(np.isfinite(big.coef_))
    mu1, s1 = unit.predict_mean_std(X[:5])
    mu2, s2 = big.predict_mean_std(X[:5] * x_scale)
    np.testing.assert_allclose(mu2 / y_scale, mu1, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(s2 / y_scale, s1, rtol=1e-6)


@pytest.mark.parametrize(
    "cls, x_scale, y_scale",
    [
        (calibprob.BayesianRidge, 1.0, 1e300),
        (calibprob.BayesianRidge, 1e300, 1.0),
        (calibprob.BayesianRidge, 1e-300, 1.0),
    ],
)
def test_scales_beyond_float64_are_a_clear_error(cls, x_scale, y_scale):
    """Where a fitted parameter (a variance, a precision) is not representable: a clear error, never NaN."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    with pytest.raises(ValueError, match=r"overflow float64 at the scale of these data\. Rescale X and y"):
        cls().fit(X * x_scale, y_scale * (X[:, 0] + rng.normal(size=30)))


@pytest.mark.parametrize("y_scale", [1e300, 1e-300])
def test_linear_regression_predicts_at_scales_whose_variance_is_beyond_float64(y_scale):
    """Issue 28: the noise sd is representable where its square is not (1e600, 1e-600): the fit
    is no longer refused at 1e300, and at 1e-300 sigma is no longer the floor sqrt(tiny) = 1.5e-154."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    y = X[:, 0] + rng.normal(size=30)
    ref = calibprob.LinearRegression().fit(X, y).predict_mean_std(X[:5])[1]
    sd = calibprob.LinearRegression().fit(X, y_scale * y).predict_mean_std(X[:5])[1]
    np.testing.assert_allclose(sd / y_scale, ref, rtol=1e-10)


# ----------------------------------------------------------------------------------- the spec fuzz test
FUZZ_EXAMPLES = 400
_FUZZ_DIR = Path(__import__("tempfile").mkdtemp(prefix="calibprob-fuzz-"))
write_csv(_FUZZ_DIR / "good.csv", n=30)
write_csv(_FUZZ_DIR / "text.csv", n=30, text=True)
(_FUZZ_DIR / "binary.csv").write_bytes(bytes(range(256)))
(_FUZZ_DIR / "bom.csv").write_bytes(b"\xef\xbb\xbfa,y\n" + b"".join(b"%d,%d\n" % (i, i % 5) for i in range(20)))

_scalars = st.one_of(
    st.booleans(),
    st.integers(-10, 10),
    st.sampled_from([0, 1, 4, 40, 10**8, 2**70]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 0.25, 0.5, 0.9, 1.0]),
    st.text(max_size=8),
    st.none(),
    st.sampled_from(
        [
            "true",
            "false",
            "ece",
            "gp",
            "ols",
            "base",
            "isotonic",
            "se",
            "auto",
            "branin",
            "boston",
            "good.csv",
            "text.csv",
            "binary.csv",
            "bom.csv",
            "nope.csv",
            "y",
            "a",
            "x1",
            "soil",
            "../../x",
            "a/b",
            "a_b",
        ]
    ),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)


def _table(keys, extra=_values):
    return st.dictionaries(st.sampled_from(sorted(keys)), extra, max_size=len(keys))


def _dataset_entries():
    from calibprob.compare.spec import DATASET_KEYS

    typed = {
        "name": st.sampled_from(["b", "../../x", "a/b", "a_b", "", 3]),
        "path": st.sampled_from(["good.csv", "text.csv", "binary.csv", "bom.csv", "nope.csv", 5]),
        "target": st.sampled_from(["y", "a", "soil", "zz", 1]),
        "function": st.sampled_from(["branin", "ackley", "nope", 2]),
        "n": st.sampled_from([3, 40, 100, 10**8, "40", 4.5, True]),
        "features": st.sampled_from([["x1"], ["soil"], [], "x1", [1]]),
        "exclude": st.sampled_from([["x2"], ["y"], ["q"]]),
        "one_hot": st.sampled_from([True, False, ["soil"], ["x1"], "yes"]),
        "subsample": st.sampled_from([5, 20, 0, -1, "10"]),
    }
    entry = st.fixed_dictionaries({}, optional={k: typed.get(k, _values) for k in DATASET_KEYS})
    return st.one_of(st.sampled_from(["boston", "bostn", "diabetes"]), entry, _values)


def _methods():
    from calibprob.compare.spec import METHOD_OPTION_TYPES

    kinds = sorted(METHOD_OPTION_TYPES)

    def entry(kind):
        return st.fixed_dictionaries({"kind": st.just(kind)}, optional={k: _values for k in METHOD_OPTION_TYPES[kind]})

    return st.dictionaries(
        st.text(min_size=0, max_size=5), st.one_of(st.sampled_from(kinds).flatmap(entry), _values), max_size=3
    )


def _base():
    from calibprob.compare.spec import BASE_OPTION_TYPES

    def entry(kind):
        return st.fixed_dictionaries({"kind": st.just(kind)}, optional={k: _values for k in BASE_OPTION_TYPES[kind]})

    return st.one_of(st.sampled_from(sorted(BASE_OPTION_TYPES)).flatmap(entry), _values)


def _documents():
    from calibprob.compare.spec import TOP_KEYS

    fields = {
        "name": st.one_of(st.just("fuzz"), _values),
        "datasets": st.one_of(st.lists(_dataset_entries(), max_size=3), _values),
        "split": st.one_of(
            st.just({"train": 0.6, "calibrate": 0.2, "test": 0.2}), _table({"train", "calibrate", "test", "x"})
        ),
        "base": _base(),
        "methods": _methods(),
        "repetitions": _scalars,
        "seed": _scalars,
        "standardize": _scalars,
        "metrics": st.one_of(st.lists(st.sampled_from(["ece", "nll", "e", 1]), max_size=3), _values),
        "confidence_levels": st.one_of(st.lists(_scalars, max_size=3), _values),
        "levels": st.one_of(st.lists(_scalars, max_size=3), _values),
        "description": _values,
    }
    required = ("name", "datasets", "split", "base", "methods")
    optional = {k: v for k, v in fields.items() if k not in required}
    doc = st.fixed_dictionaries({k: fields[k] for k in required}, optional=optional)
    junk = st.dictionaries(st.text(max_size=6).filter(lambda k: k not in TOP_KEYS), _values, max_size=2)
    random_docs = st.builds(
        lambda d, j, drop: {k: v for k, v in {**d, **j}.items() if k != drop},
        doc,
        junk,
        st.sampled_from([None, *required]),
    )
    # valid documents with a few keys set to values of the grammar (valid or not) or removed
    edits = st.lists(
        st.tuples(st.sampled_from(_EDIT_PATHS), st.one_of(_scalars, _values, st.just(_DELETE))), max_size=2
    )
    return st.one_of(random_docs, _values, st.builds(_edited, st.sampled_from(_VALID_DOCS), edits))


_DELETE = object()
_VALID_DOCS = [
    spec_dict(),
    spec_dict(
        datasets=["diabetes", {"name": "m", "path": "good.csv", "target": "y", "subsample": 20}],
        base={"kind": "bayesian-ridge", "max_iter": 50},
        methods={"s": {"kind": "split-conformal", "score": "normalized"}, "v": {"kind": "vovk"}},
    ),
    spec_dict(
        datasets=[
            {"name": "t", "path": "text.csv", "target": "y", "one_hot": ["soil"]},
            {"name": "bom", "path": "bom.csv", "target": "y"},
        ],
        base={"kind": "gp", "kernel": "matern", "p": 2},
        levels=[0.1, 0.5, 0.9],
        methods={"g": {"kind": "sharp-gp", "variant": "scaled"}, "j": {"kind": "jackknife-plus-gp"}},
    ),
]
_EDIT_PATHS = [
    ("repetitions",),
    ("seed",),
    ("standardize",),
    ("metrics",),
    ("confidence_levels",),
    ("levels",),
    ("split", "train"),
    ("split", "calibrate"),
    ("base", "kind"),
    ("base", "fit_intercept"),
    ("base", "kernel"),
    ("base", "n_restarts"),
    ("base", "theta"),
    ("methods", "b", "kind"),
    ("methods", "iso", "extrapolate"),
    ("methods", "s", "beta"),
    ("datasets", 0, "n"),
    ("datasets", 0, "name"),
    ("datasets", 0, "dim"),
    ("datasets", 0, "noise"),
    ("datasets", 1, "path"),
    ("datasets", 1, "target"),
    ("datasets", 1, "features"),
    ("datasets", 1, "exclude"),
    ("datasets", 1, "subsample"),
    ("datasets", 0, "split"),
    ("name",),
    ("datasets",),
    ("methods",),
]


def _edited(doc, edits):
    import copy

    doc = copy.deepcopy(doc)
    for path, value in edits:
        node = doc
        try:
            for k in path[:-1]:
                node = node[k]
            if value is _DELETE:
                node.pop(path[-1], None) if isinstance(node, dict) else None
            elif isinstance(node, dict) or (isinstance(node, list) and path[-1] < len(node)):
                node[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    return doc


_FUZZ_SEEN = {"ok": 0, "spec_error": 0}


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(doc=_documents())
def test_fuzzed_spec_documents_raise_only_spec_error(doc):
    try:
        spec = parse_spec(doc, root=_FUZZ_DIR)
    except SpecError as err:
        assert str(err)
        _FUZZ_SEEN["spec_error"] += 1
        return
    _FUZZ_SEEN["ok"] += 1
    assert parse_spec(spec.to_dict(), root=_FUZZ_DIR) == spec  # an accepted spec round-trips


def test_fuzz_reached_both_outcomes():
    """The fuzz test above is not vacuous: it produced valid specs and rejected ones."""
    if not _FUZZ_SEEN["ok"] and not _FUZZ_SEEN["spec_error"]:
        test_fuzzed_spec_documents_raise_only_spec_error()
    assert _FUZZ_SEEN["spec_error"] > 0
    assert _FUZZ_SEEN["ok"] > 0, _FUZZ_SEEN


def test_every_registered_option_has_a_declared_type():
    import inspect

    from calibprob.compare.methods import METHOD_KINDS
    from calibprob.compare.spec import METHOD_OPTION_TYPES

    for kind, mk in METHOD_KINDS.items():
        assert set(mk.options) == set(METHOD_OPTION_TYPES.get(kind, {})), kind
    from calibprob.bases.gp import _objective, kernels
    from calibprob.calibrators.conformal.scores import SCORES
    from calibprob.calibrators.gp_beta import INFERENCE_METHODS
    from calibprob.calibrators.sharp_gp import VARIANTS

    assert set(METHOD_OPTION_TYPES["gp-beta"]["inference"].values) == set(INFERENCE_METHODS)
    assert set(METHOD_OPTION_TYPES["sharp-gp"]["variant"].values) == set(VARIANTS)
    assert set(METHOD_OPTION_TYPES["split-conformal"]["score"].values) == set(SCORES)
    from calibprob.compare.spec import BASE_OPTION_TYPES

    assert set(BASE_OPTION_TYPES["gp"]["kernel"].values) == set(kernels.KERNELS)
    assert set(BASE_OPTION_TYPES["gp"]["mean"].values) == set(_objective.MEANS)
    assert set(BASE_OPTION_TYPES["gp"]["objective"].values) == set(_objective.OBJECTIVES)
    assert inspect.signature(calibprob.LinearRegression).parameters.keys() == BASE_OPTION_TYPES["ols"].keys()


def test_defaults_of_every_option_pass_their_declared_type():
    """The declared types accept each option's own default (where TOML can express it)."""
    import inspect

    from calibprob.compare.methods import make_base
    from calibprob.compare.spec import BASE_OPTION_TYPES

    for kind, types in BASE_OPTION_TYPES.items():
        params = inspect.signature(type(make_base({"kind": kind}))).parameters
        for name, t in types.items():
            default = params[name].default
            if default is not None:
                t.check(default, f"base.{name}")
