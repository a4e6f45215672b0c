"""CV+ / jackknife+ refits as separate tasks: the same numbers as one fit, serially and on Dask workers."""

import pickle

import numpy as np
import pytest
import xarray as xr

import calibprob
from calibprob.calibrators.conformal import CrossConformalRegressor
from calibprob.compare import parse_spec, run_comparison
from calibprob.compare.assembly import results_path_parts
from calibprob.compare.runner import _method_cost
from calibprob.compare.tasks import (
    MAX_REFIT_TASKS,
    fit_bases,
    method_refit_tasks,
    run_method_refits,
    run_method_task,
    run_task,
)
from calibprob.runs import execute


def data(n=48, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    return X, X[:, 0] - 2.0 * X[:, 1] + (0.2 + X[:, 0]) * rng.normal(size=n)


@pytest.mark.parametrize(
    ("cv", "method", "score", "refits"),
    [(5, "plus", "absolute", 5), ("loo", "plus", "normalized", 36), (4, "base", "signed", 5)],
)
def test_refits_computed_apart_equal_one_fit(cv, method, score, refits):
    X, y = data()
    kw = dict(estimator=calibprob.BayesianRidge(), cv=cv, method=method, score=score, random_state=7)
    kw["confidence_level"] = [0.5, 0.8]
    whole = CrossConformalRegressor(**kw).fit(X[:36], y[:36])
    parts = CrossConformalRegressor(**kw)
    assert parts.n_refits(36) == refits  # K folds (n for the jackknife), + the all-data model of "base"
    # each refit as another process would hand it back: pickled
    got = [pickle.loads(pickle.dumps(parts.fit_refit(X[:36], y[:36], k))) for k in reversed(range(refits))]
    parts.fit_from_refits(X[:36], y[:36], got[::-1])
    np.testing.assert_array_equal(parts.scores_, whole.scores_)
    np.testing.assert_array_equal(parts.fold_of_, whole.fold_of_)
    xr.testing.assert_identical(parts.predict_interval(X[36:]), whole.predict_interval(X[36:]))


def test_refit_entry_points_reject_bad_input():
    X, y = data()
    model = CrossConformalRegressor(estimator=calibprob.BayesianRidge(), cv=4, random_state=1)
    with pytest.raises(ValueError, match="k must be < n_refits"):
        model.fit_refit(X, y, 4)
    with pytest.raises(ValueError, match="k \\(refit index\\) must be >= 0"):
        model.fit_refit(X, y, -1)
    with pytest.raises(ValueError, match="fit_refit needs an int random_state when cv is a number of folds"):
        CrossConformalRegressor(estimator=calibprob.BayesianRidge(), cv=4).fit_refit(X, y, 0)
    with pytest.raises(ValueError, match="refits must be the 4 results of fit_refit"):
        model.fit_from_refits(X, y, [model.fit_refit(X, y, 0)] * 3)
    other = CrossConformalRegressor(estimator=calibprob.BayesianRidge(), cv=4, random_state=2)
    with pytest.raises(ValueError, match="that do not match"):  # another seed: other folds
        model.fit_from_refits(X, y, [other.fit_refit(X, y, k) for k in range(4)])
    with pytest.raises(ValueError, match="refits must be the 4 results of fit_refit"):  # not refits at all
        model.fit_from_refits(X, y, [None] * 4)


def spec_of(**over):
    spec = {
        "name": "refits",
        "datasets": ["diabetes"],
        "split": {"train": 0.3, "calibrate": 0.2, "test": 0.5},
        "repetitions": 1,
        "seed": 5,
        "base": {"kind": "bayesian-ridge"},
        "methods": {
            "b": {"kind": "base"},
            "cv+": {"kind": "cv-plus", "folds": 4, "score": "normalized"},
            "j+": {"kind": "jackknife-plus"},
            "jack": {"kind": "jackknife"},
        },
        "confidence_level": [0.5, 0.9],
    }
    spec.update(over)
    return parse_spec(spec)


def scores(path):
    return xr.open_datatree(path, engine="h5netcdf").to_dataset().load()


def test_refit_tasks_of_each_method():
    spec = spec_of()
    fitted = fit_bases(spec.to_dict(), "diabetes", 0)
    n_train = len(fitted["arrays"]["train"][1])
    tasks = {m: method_refit_tasks(spec.to_dict(), "diabetes", 0, m) for m in spec.method_names}
    assert tasks["b"] == []  # nothing to split
    assert tasks["cv+"] == [(None, i, 4) for i in range(4)]  # one task per fold
    assert n_train > MAX_REFIT_TASKS and len(tasks["j+"]) == MAX_REFIT_TASKS  # n refits, grouped
    # jackknife: n leave-one-out refits and the all-data model, grouped likewise
    sizes = [len(run_method_refits(spec.to_dict(), "diabetes", 0, "jack", *t)[1]) for t in tasks["jack"]]
    assert sum(sizes) == n_train + 1


def test_method_assembled_from_refit_tasks_equals_the_serial_task():
    spec = spec_of()
    sd = spec.to_dict()
    fitted = fit_bases(sd, "diabetes", 0)
    whole = run_task(sd, "diabetes", 0)
    for m in ("cv+", "j+", "jack"):
        # the refits need the task's split only, not its fitted base (they run while it is fitted)
        refits = [run_method_refits(sd, "diabetes", 0, m, *t) for t in method_refit_tasks(sd, "diabetes", 0, m)]
        part = run_method_task(sd, fitted, "diabetes", 0, m, refits=refits)
        assert part["error"].item() == ""
        metrics = [v for v in part.data_vars if "calibrator" in part[v].dims and v != "fit_time"]
        # exactly equal values (the attributes differ: a slice is merged from one method only)
        xr.testing.assert_equal(part[metrics], whole[metrics].sel(calibrator=[m]))
        assert part["fit_time"].item() >= sum(r[2] for r in refits)  # the refits' time counts


def test_a_failed_refit_fails_its_method_as_a_serial_failure_would():
    spec = spec_of()
    sd = spec.to_dict()
    fitted = fit_bases(sd, "diabetes", 0)
    part = run_method_task(sd, fitted, "diabetes", 0, "cv+", refits=[(None, RuntimeError("refit 2 broke"), 0.1)])
    assert str(part["error"].item()).startswith("RuntimeError: refit 2 broke")
    assert part.attrs["task_failed"] == 1


def test_refit_tasks_on_two_workers_equal_serial_and_resume_per_method(tmp_path):
    spec = spec_of(methods={**spec_of().to_dict()["methods"], "iso": {"kind": "isotonic", "extrapolate": True}})
    run_comparison(spec, tmp_path / "serial.nc", progress=False, granularity="task")
    out = tmp_path / "dask.nc"
    run_comparison(spec, out, progress=False, workers=2)  # one repetition, 2 workers: method granularity
    serial = scores(tmp_path / "serial.nc")
    xr.testing.assert_identical(serial, scores(out))
    parts = sorted(results_path_parts(out).glob("*__m*.nc"))
    assert len(parts) == 5
    lost = next(p for p in parts if p.name.endswith("_cv_.nc"))
    lost.unlink()  # killed before CV+ finished: only CV+ (and its refit tasks) run again
    kept = {p: p.stat().st_mtime_ns for p in parts if p != lost}
    run_comparison(spec, out, progress=False, workers=2)
    assert lost.is_file() and all(p.stat().st_mtime_ns == t for p, t in kept.items())
    xr.testing.assert_identical(serial, scores(out))


def test_costliest_methods_start_first():
    spec = spec_of(
        methods={
            "b": {"kind": "base"},
            "cv+": {"kind": "cv-plus", "folds": 4},
            "sharp": {"kind": "sharp-gp"},
            "sharp-scaled": {"kind": "sharp-gp", "variant": "scaled"},
            "beta": {"kind": "gp-beta"},
        },
        base={"kind": "gp"},
    )
    cost = _method_cost(spec)
    order = sorted(spec.method_names, key=lambda m: cost(("diabetes", 0, m)), reverse=True)
    assert order == ["sharp", "sharp-scaled", "cv+", "beta", "b"]


#: What every executor test here passes besides its task: a fingerprint, failures as a ``why``, no coords.
_EXECUTE = dict(fingerprint="f", on_error=lambda key, msg: xr.Dataset({"why": ((), msg)}), coords=lambda key: {})


def _stage(config, prefix):
    if prefix == "bad":
        raise RuntimeError("stage broke")
    return {"value": len(prefix)}


def _task(config, state, prefix, item, refits=None):
    return xr.Dataset({"v": ((), float(state["value"] * 10 + item + sum(refits or ())))})


def _pieces(config, prefix, item):
    if prefix == "bad":  # listing the pieces fails too (e.g. unreadable data): the stage says why
        raise OSError("no data")
    return [(i,) for i in range(item)]


def _piece(config, prefix, item, i):
    return 100.0 * (i + 1)


def test_executor_pieces_and_early_stages_on_a_local_cluster():
    keys = [("ab", 0), ("ab", 2), ("bad", 1), ("xyz", 3)]
    run = _EXECUTE
    serial = execute(_task, {}, keys, progress=False, prepare=_stage, split=(_pieces, _piece), **run)
    dask = execute(
        _task,
        {},
        keys,
        progress=False,
        prepare=_stage,
        split=(_pieces, _piece),
        priority=lambda k: k[1],
        workers=1,
        **run,
    )
    # serially a task computes its pieces itself (none here); on Dask they arrive as `refits`
    assert [float(serial[k]["v"]) for k in (("ab", 0), ("ab", 2), ("xyz", 3))] == [20.0, 22.0, 33.0]
    assert [float(dask[k]["v"]) for k in (("ab", 0), ("ab", 2), ("xyz", 3))] == [20.0, 322.0, 633.0]
    for out in (serial, dask):
        assert "RuntimeError: stage broke" in str(out[("bad", 1)]["why"].values)
        assert out[("bad", 1)].attrs["task_failed"] == 1


def _sleep_stage(config, prefix):
    return dict(config)


def _sleep_task(config, state, prefix, item, refits=None):
    import time

    from dask.distributed import get_worker

    worker = get_worker()
    # CLOCK_MONOTONIC is system-wide on Linux: start and end compare across worker processes
    start = time.monotonic()
    time.sleep(state[item])
    # tasks this worker holds besides the running one: queued behind it, while the other may idle
    queued = sum(ts.state in ("ready", "waiting", "constrained") for ts in worker.state.tasks.values())
    return xr.Dataset(
        {"refits": ("piece", list(refits or [-1.0]))},
        attrs={"worker": worker.address, "queued": queued, "start": start, "end": time.monotonic()},
    )


def _sleep_pieces(config, prefix, item):
    return [(i,) for i in range(3)] if item == "split" else []


def _sleep_piece(config, prefix, item, i):
    import time

    time.sleep(0.6 - 0.3 * i)  # the last piece finishes first
    return float(i)


def test_executor_gives_work_to_the_free_worker_not_a_busy_ones_queue():
    """List scheduling: a task is handed out when a worker thread is free for it.

    One long task and six short ones after a shared stage, on two single-threaded workers:
    every short task runs on the worker the long one leaves free, and no worker holds a task
    it is not running. Submitted all at once, Dask queued tasks on busy workers (it places a
    task when it is submitted, before any duration is known, and keeps a second one ready on
    a one-thread worker): one worker idled at the end while the other worked through its queue.
    """
    durations = {"long": 4.0, **{f"s{i}": 0.3 for i in range(6)}}
    keys = [("p", item) for item in durations]
    out = execute(
        _sleep_task,
        durations,
        keys,
        progress=False,
        **_EXECUTE,
        prepare=_sleep_stage,
        priority=lambda key: int(durations[key[1]] * 1000),
        workers=2,
    )
    long = out[("p", "long")].attrs
    short = [out[("p", f"s{i}")].attrs for i in range(6)]
    # Under heavy load the second worker process can come up after the long task has ended
    # (seen at load 10+): then the short tasks that start after it may rightly run on either
    # worker. Every short task that starts while the long one runs must be on the other worker;
    # when the other worker is up within a second of the long task's start, that is all six.
    other_first_start = min((a["start"] for a in short if a["worker"] != long["worker"]), default=float("inf"))
    during_long = [a for a in short if a["start"] < long["end"]]
    assert [a["worker"] != long["worker"] for a in during_long] == [True] * len(during_long)
    if other_first_start < long["start"] + 1.0:
        assert [a["worker"] != long["worker"] for a in short] == [True] * 6
    assert [int(out[k].attrs["queued"]) for k in keys] == [0] * len(keys)


def test_executor_hands_a_task_its_pieces_in_their_order_whatever_order_they_finish_in():
    durations = {"split": 0.0, "whole": 0.0}
    out = execute(
        _sleep_task,
        durations,
        [("p", "split"), ("p", "whole")],
        progress=False,
        **_EXECUTE,
        prepare=_sleep_stage,
        split=(_sleep_pieces, _sleep_piece),
        workers=2,
    )
    assert out[("p", "split")]["refits"].values.tolist() == [0.0, 1.0, 2.0]
    assert out[("p", "whole")]["refits"].values.tolist() == [-1.0]


def _stage_waiting_for_a_piece(config, prefix):
    import time
    from pathlib import Path

    flag = Path(config["flag"])
    deadline = time.monotonic() + 60.0
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return {"saw_piece": flag.exists()}


def _flag_piece(config, prefix, item, i):
    from pathlib import Path

    Path(config["flag"]).write_text("a piece ran")
    return float(i)


def _flag_pieces(config, prefix, item):
    return [(0,), (1,)]


def _saw_task(config, state, prefix, item, refits=None):
    return xr.Dataset({"saw_piece": ((), state["saw_piece"]), "refits": ("piece", list(refits))})


def test_pieces_run_on_the_workers_while_this_process_computes_the_first_stage(tmp_path):
    """CV+ refits need the split, not the fitted base: they start as soon as the workers are up.

    The first stage (run in this process while the cluster starts) waits for a piece to
    have run; it would wait in vain (60 s) if the pieces were only handed out after it.
    """
    config = {"flag": str(tmp_path / "flag")}
    out = execute(
        _saw_task,
        config,
        [("p", 0)],
        progress=False,
        **_EXECUTE,
        prepare=_stage_waiting_for_a_piece,
        split=(_flag_pieces, _flag_piece),
        workers=2,
    )
    assert bool(out[("p", 0)]["saw_piece"]) is True
    assert out[("p", 0)]["refits"].values.tolist() == [0.0, 1.0]


def test_refits_its_base_names_the_refitting_kinds_and_refuses_an_unknown_one():
    from calibprob.compare.methods import refits_its_base

    assert [refits_its_base(k) for k in ("cv-plus", "jackknife-plus", "jackknife")] == [True] * 3
    assert [refits_its_base(k) for k in ("isotonic", "jackknife-plus-gp", "sharp-gp")] == [False] * 3
    with pytest.raises(ValueError, match=r"unknown method kind 'cv-pluss'; registered: .*cv-plus"):
        refits_its_base("cv-pluss")
