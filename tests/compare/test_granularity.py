"""Method granularity: one base-fit stage and one task per method give the task-granularity results exactly."""

import pytest
import xarray as xr

from calibprob.compare import combine_parts, parse_spec, run_comparison
from calibprob.compare.assembly import results_path_parts
from calibprob.compare.runner import _granularity
from calibprob.runs import execute

TIMING = ("fit_time", "base_fit_time")


def spec_of(**over):
    spec = {
        "name": "gran",
        "datasets": ["diabetes", {"name": "branin", "function": "branin", "n": 120, "noise": 0.5}],
        "split": {"train": 0.6, "calibrate": 0.2, "test": 0.2},
        "repetitions": 2,
        "seed": 11,
        "base": {"kind": "bayesian-ridge"},
        "methods": {
            "b": {"kind": "base"},
            "iso": {"kind": "isotonic", "extrapolate": True},
            "vs": {"kind": "variance-scaling"},
            "cps": {"kind": "conformal-predictive"},
            "cv+": {"kind": "cv-plus", "folds": 3},
        },
        "confidence_level": [0.5, 0.9],
    }
    spec.update(over)
    return parse_spec({k: v for k, v in spec.items() if v is not None})


def scores(path):
    """The results file's scores and sizes (timing lives in its own group)."""
    return xr.open_datatree(path, engine="h5netcdf").to_dataset().load()


def test_method_granularity_equals_task_granularity_serial(tmp_path):
    spec = spec_of()
    run_comparison(spec, tmp_path / "task.nc", progress=False, granularity="task")
    run_comparison(spec, tmp_path / "method.nc", progress=False, granularity="method")
    a, b = scores(tmp_path / "task.nc"), scores(tmp_path / "method.nc")
    assert not set(TIMING) & set(a.data_vars)
    xr.testing.assert_identical(a, b)
    # one part per (data set, repetition, method): 2 x 2 x 5, assembled again by combine_parts
    assert len(list(results_path_parts(tmp_path / "method.nc").glob("*.nc"))) == 20
    xr.testing.assert_identical(combine_parts(spec, results_path_parts(tmp_path / "method.nc")).to_dataset(), a)


def test_method_granularity_on_two_workers_equals_serial(tmp_path):
    spec = spec_of(repetitions=1, datasets=["diabetes"])
    run_comparison(spec, tmp_path / "serial.nc", progress=False)
    # one task and two workers: "auto" splits it by method
    assert _granularity("auto", spec, 2) == "method"
    run_comparison(spec, tmp_path / "dask.nc", progress=False, workers=2)
    xr.testing.assert_identical(scores(tmp_path / "serial.nc"), scores(tmp_path / "dask.nc"))
    assert len(list(results_path_parts(tmp_path / "dask.nc").glob("*__m*.nc"))) == 5


def test_several_bases_and_a_failing_base_agree(tmp_path):
    spec = spec_of(
        repetitions=1,
        base=None,
        bases={"ridge": {"kind": "bayesian-ridge"}, "bad": {"kind": "gp", "optimize": False}},
        methods={"b": {"kind": "base"}, "iso": {"kind": "isotonic", "extrapolate": True, "bases": ["ridge"]}},
    )
    run_comparison(spec, tmp_path / "task.nc", progress=False, granularity="task")
    run_comparison(spec, tmp_path / "method.nc", progress=False, granularity="method")
    a, b = scores(tmp_path / "task.nc"), scores(tmp_path / "method.nc")
    xr.testing.assert_identical(a, b)
    assert "optimize=False needs fixed hyperparameters" in str(b["error"].sel(base="bad", calibrator="b").values[0, 0])
    assert str(b["error"].sel(base="bad", calibrator="iso").values[0, 0]) == ""  # iso does not run on "bad"


def test_killed_run_resumes_per_method(tmp_path):
    spec = spec_of(repetitions=1, datasets=["diabetes"])
    out = tmp_path / "r.nc"
    run_comparison(spec, out, progress=False, granularity="method")
    first = scores(out)
    parts = sorted(results_path_parts(out).glob("*.nc"))
    lost = next(p for p in parts if p.name.endswith("_iso.nc"))
    lost.unlink()  # as if the run had been killed before this method finished
    kept = {p: p.stat().st_mtime_ns for p in parts if p != lost}
    run_comparison(spec, out, progress=False, granularity="method")
    assert lost.is_file()
    assert all(p.stat().st_mtime_ns == t for p, t in kept.items())  # the other methods were reused
    xr.testing.assert_identical(first, scores(out))


def test_whole_task_parts_are_reused_at_method_granularity(tmp_path):
    spec = spec_of(repetitions=1)
    out = tmp_path / "r.nc"
    run_comparison(spec, out, progress=False, granularity="task")
    before = {p: p.stat().st_mtime_ns for p in results_path_parts(out).glob("*.nc")}
    first = scores(out)
    run_comparison(spec, out, progress=False, granularity="method")
    assert {p: p.stat().st_mtime_ns for p in results_path_parts(out).glob("*.nc")} == before  # nothing rerun
    xr.testing.assert_identical(first, scores(out))


def test_granularity_is_checked_and_auto_is_serial_by_default(tmp_path):
    spec = spec_of()
    with pytest.raises(ValueError, match="granularity must be 'auto', 'task' or 'method'; got 'methods'"):
        run_comparison(spec, tmp_path / "r.nc", progress=False, granularity="methods")
    assert _granularity("auto", spec, None) == "task"  # serial: one task per (data set, repetition)
    assert _granularity("auto", spec, 4) == "task"  # 4 tasks already fill 4 workers
    assert _granularity("auto", spec, 5) == "method"


def _stage(config, prefix):
    config["calls"].append(prefix)
    if prefix == "bad":
        raise RuntimeError("stage broke")
    return {"value": len(prefix)}


def _task(config, state, prefix, item):
    return xr.Dataset({"v": ((), float(state["value"] * 10 + item))})


def test_executor_stage_runs_once_per_prefix_and_its_failure_fails_its_keys():
    config = {"calls": []}
    keys = [("ab", 1), ("ab", 2), ("bad", 1), ("xyz", 3)]
    out = execute(
        _task,
        config,
        keys,
        fingerprint="f",
        on_error=lambda key, msg: xr.Dataset({"why": ((), msg)}),
        coords=lambda key: {},
        progress=False,
        prepare=_stage,
    )
    assert config["calls"] == ["ab", "bad", "xyz"]  # once per prefix, in order
    assert [float(out[k]["v"]) for k in (("ab", 1), ("ab", 2), ("xyz", 3))] == [21.0, 22.0, 33.0]
    assert "RuntimeError: stage broke" in str(out[("bad", 1)]["why"].values)
    assert out[("bad", 1)].attrs["task_failed"] == 1
