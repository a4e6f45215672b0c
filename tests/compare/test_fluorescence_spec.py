"""The fluorescence spec (``models/fannjiang2022-fluorescence.toml``): a data set's ``feedback`` table.

Checked against the script that does the same computation (``benchmarks/repro_fluorescence_feedback.py``):
on a small pool (6 binary sites, 64 rows) and on the shipped data, the spec's training rows, designed test
row, labels and conformal sets equal the script's for the same seed, bit for bit. The slow test runs the
spec's first :data:`REPS` repetitions at the four lambda against Fannjiang et al.'s (2022) published means
(2 000 seeds), within 3 binomial standard errors; and the paired over-coverage of the standard-shift
version, pooled over lambda = 2, 4, 6, within 3 standard errors of the published 0.040 and above 0.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from calibprob.calibrators.conformal import feedback as cfeedback
from calibprob.compare import feedback as compare_feedback
from calibprob.compare import run_task, tasks
from calibprob.compare.feedback import draw_designed, grid_set_scores, label_grid, run_feedback_conformal
from calibprob.compare.spec import SpecError, load_spec, parse_spec
from calibprob.compare.spec.feedback import walsh_hadamard
from calibprob.registry import METHODS
from tests.support.paths import REPO_ROOT, load_benchmark

SPEC = REPO_ROOT / "models" / "fannjiang2022-fluorescence.toml"
#: Repetitions of the slow test (the spec's first ones): 80 s in all at a load of 1.6 (0.2 s a task), about 20 min at 13.
REPS = 100
#: The published means over 2 000 seeds (blue, n = 96) at lambda = 0, 2, 4, 6.
PAPER = {"feedback": (0.903, 0.912, 0.921, 0.924), "standard": (0.903, 0.949, 0.959, 0.968)}
LAMBDAS = (0.0, 1.0, 3.0)


@pytest.fixture(scope="module")
def repro():
    return load_benchmark("repro_fluorescence_feedback")


def _pool_csv(path, sites=6, seed=0):
    """A small landscape: every 0/1 genotype of ``sites`` sites, a brightness in [0.2, 1.8] and a noise SD."""
    rng = np.random.default_rng(seed)
    bits = np.array(list(itertools.product([0, 1], repeat=sites)))
    signed = 2.0 * bits - 1.0
    y = 1.0 + 0.3 * signed[:, 0] - 0.2 * signed[:, 1] * signed[:, 2] + 0.1 * rng.normal(size=len(bits))
    frame = pd.DataFrame(bits, columns=[f"s{k + 1}" for k in range(sites)])
    frame["sd"] = rng.uniform(0.02, 0.1, len(bits))
    frame["y"] = y
    frame.to_csv(path, index=False)
    return frame


def _spec(path, **feedback):
    table = {"lambda": list(LAMBDAS), "n_train": 12, "label_sd": "sd", "label_floor": 0.0,
             "model": {"kind": "ridge", "penalty": 1.0, "walsh_hadamard": 2}} | feedback  # fmt: skip
    return {
        "name": "small",
        "datasets": [{"name": "pool", "path": str(path), "target": "y", "feedback": table}],
        "split": {"train": 0.5, "test": 0.5},
        "standardize": False,
        "repetitions": 3,
        "seed": 7,
        "confidence_level": [0.9],
        "base": {"kind": "bayesian-ridge", "fit_intercept": False},
        "methods": {
            "feedback": {"kind": "feedback-conformal", "shift": "feedback", "grid": [0.0, 2.2, 0.02]},
            "standard": {"kind": "feedback-conformal", "shift": "standard", "grid": [0.0, 2.2, 0.02]},
        },
    }


def _recording(monkeypatch, module, calls):
    """Wrap ``module.feedback_conformal_set`` so each call's arguments and set are recorded."""
    original = cfeedback.feedback_conformal_set

    def wrapped(X, y, x_test, **kw):
        cs = original(X, y, x_test, **kw)
        calls.append((np.array(X), np.array(y), np.array(x_test), kw["lam"], kw["shift"], cs.in_set.copy()))
        return cs

    monkeypatch.setattr(module, "feedback_conformal_set", wrapped)


def _same_calls(ours, theirs):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        for x, y in zip(a[:3], b[:3]):
            assert x.shape == y.shape and np.array_equal(x, y)  # bit for bit
        assert a[3:5] == b[3:5]
        assert np.array_equal(a[5], b[5])


def test_the_spec_equals_the_script_on_a_small_pool(tmp_path, monkeypatch, repro):
    frame = _pool_csv(tmp_path / "pool.csv")
    spec = parse_spec(_spec(tmp_path / "pool.csv"))
    assert spec.dataset_names == ["pool-lambda0", "pool-lambda1", "pool-lambda3"]
    bits = frame[[f"s{k + 1}" for k in range(6)]].to_numpy(float)
    X_all = repro.walsh_hadamard(2.0 * bits - 1.0, 2)
    monkeypatch.setattr(repro, "PENALTY", {12: 1.0})
    monkeypatch.setattr(repro, "GRID", np.arange(0, 2.21, 0.02))
    for rep in range(2):
        seed = tasks._task_seed(spec, "pool-lambda0", rep)
        assert all(tasks._task_seed(spec, d, rep) == seed for d in spec.dataset_names)  # one seed for every lambda
        theirs, ours = [], []
        _recording(monkeypatch, repro, theirs)
        covered = repro.one_seed(seed, X_all, frame["y"].to_numpy(), frame["sd"].to_numpy(), 12, LAMBDAS)
        _recording(monkeypatch, compare_feedback, ours)
        runs = [run_task(spec.to_dict(), d, rep) for d in spec.dataset_names]
        # the script runs feedback then standard per lambda; the spec's tasks do the same in the methods' order
        _same_calls(ours, theirs)
        for j, out in enumerate(runs):
            for k, method in enumerate(("feedback", "standard")):
                assert float(out["coverage"].sel(calibrator=method).item()) == float(covered[k, j])


def test_the_spec_equals_the_script_on_the_shipped_data(monkeypatch, repro):
    """One repetition of the shipped spec at lambda = 2: the script's rows, labels and sets from the same seed."""
    spec = load_spec(SPEC)
    frame = pd.read_csv(REPO_ROOT / "models" / "data" / "fannjiang2022_fluorescence.csv")
    X_all = repro.walsh_hadamard(2.0 * frame[[f"s{k + 1}" for k in range(13)]].to_numpy(float) - 1.0, 2)
    seed = tasks._task_seed(spec, "fluorescence-blue-lambda2", 0)
    theirs, ours = [], []
    _recording(monkeypatch, repro, theirs)
    repro.one_seed(seed, X_all, frame["brightness_blue"].to_numpy(), frame["blue_se"].to_numpy(), 96, (0.0, 2.0))
    _recording(monkeypatch, compare_feedback, ours)
    run_task(spec.to_dict(), "fluorescence-blue-lambda2", 0)
    _same_calls(ours, theirs[-2:])


def test_the_runs_of_a_repetition_share_the_training_rows_and_design_in_turn(tmp_path):
    frame = _pool_csv(tmp_path / "pool.csv")
    spec = parse_spec(_spec(tmp_path / "pool.csv"))
    parts = [tasks._prepare(spec, d, 1)[1] for d in spec.dataset_names]
    for p in parts[1:]:
        assert np.array_equal(p["train"][0], parts[0]["train"][0]) and np.array_equal(
            p["train"][1], parts[0]["train"][1]
        )
    assert [p["feedback"]["lam"] for p in parts] == list(LAMBDAS)
    assert all("calibrate" not in p and p["test"][0].shape == (1, 22) for p in parts)
    # the noisy labels are clipped at the floor, each near its row's brightness (sd <= 0.1)
    idx, y, t, y_t = draw_designed(
        walsh_hadamard(frame[[f"s{k + 1}" for k in range(6)]].to_numpy(), 2), frame["y"].to_numpy(),
        frame["sd"].to_numpy(), n_train=200, lambdas=(0.0,), upto=0,
        smoother=cfeedback.RidgeSmoother(penalty=1.0, unpenalized=(0,)), seed=3, label_floor=1.0,
    )  # fmt: skip
    assert y.min() == 1.0 and np.all(np.abs(np.fmax(frame["y"].to_numpy()[idx], 1.0) - y) < 0.6)


def test_a_high_lambda_designs_the_rows_the_model_rates_highest(tmp_path):
    """At lambda = 50 the design density is nearly a point mass on the argmax of the fitted model."""
    frame = _pool_csv(tmp_path / "pool.csv")
    F = walsh_hadamard(frame[[f"s{k + 1}" for k in range(6)]].to_numpy(), 2)
    smoother = cfeedback.RidgeSmoother(penalty=1.0, unpenalized=(0,))
    for seed in range(5):
        idx, y, t, _ = draw_designed(F, frame["y"].to_numpy(), frame["sd"].to_numpy(), n_train=30,
                                     lambdas=(50.0,), upto=0, smoother=smoother, seed=seed)  # fmt: skip
        mu = smoother.fit_predict(F[idx], y, F)
        assert mu[t] >= np.sort(mu)[-3]


def test_the_grid_is_the_authors_and_sets_are_scored_as_sets():
    assert np.array_equal(label_grid([0.0, 2.2, 0.02]), np.arange(0, 2.21, 0.02))
    import xarray as xr

    labels = np.array([0.0, 0.1, 0.2, 0.3, 0.4])
    in_set = np.array([[[True, True, False, False, True]], [[False, False, False, False, False]]])
    sets = xr.Dataset({"in_set": (("obs", "confidence_level", "label"), in_set)},
                      coords={"confidence_level": [0.9], "label": labels}, attrs={"step": 0.1})  # fmt: skip
    out = xr.Dataset({"coverage": ("confidence_level", [np.nan]), "width": ("confidence_level", [np.nan])},
                     coords={"confidence_level": [0.9]})  # fmt: skip
    # y = 0.26: nearest label 0.3 is not in the set (the hull [0, 0.4] would cover it); y = 0.1: an empty set
    got = grid_set_scores(out, sets, np.array([0.26, 0.1]), [0.9])
    assert float(got["coverage"][0]) == 0.0
    got = grid_set_scores(out, sets, np.array([0.43, 0.1]), [0.9])  # within half a step of 0.4
    assert float(got["coverage"][0]) == 0.5
    assert float(got["width"][0]) == pytest.approx((3 * 0.1 + 0) / 2)
    assert float(got["median_width"][0]) == pytest.approx(0.15)


def test_the_kind_refuses_a_task_without_a_design(tmp_path):
    from calibprob.compare.methods import TaskContext

    ctx = TaskContext(np.zeros((3, 2)), np.zeros(3), None, None, np.zeros((1, 2)), None, {}, None, 0)
    with pytest.raises(ValueError, match="needs a data set with a feedback table"):
        run_feedback_conformal(ctx, METHODS["feedback-conformal"], grid=[0.0, 1.0, 0.1])


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"temperature": 2}, r"unknown key\(s\) \['temperature'\].*use only"),
        ({"lambda": []}, r"lambda must be a finite number or a non-empty list"),
        ({"lambda": [0, float("nan")]}, r"lambda must be a finite number"),
        ({"lambda": [0, "2"]}, r"lambda must be a finite number"),
        ({"lambda": [0, 2, 2.0]}, r"lambda lists a value twice"),
        ({"n_train": 1}, r"n_train must be an integer from 2"),
        ({"n_train": 9.5}, r"n_train must be an integer from 2"),
        ({"n_train": True}, r"n_train must be an integer from 2"),
        ({"label_sd": "noise"}, r"label_sd = 'noise' is not a column of the data"),
        ({"label_sd": "y"}, r"label_sd = 'y' is the target"),
        ({"label_floor": "zero"}, r"label_floor must be a finite number"),
        ({"model": {"kind": "gp"}}, r'model must be a table with kind = "ridge"'),
        ({"model": {"kind": "ridge", "penalty": 0.0}}, r"model.penalty must be a finite number > 0"),
        ({"model": {"kind": "ridge", "alpha": 1.0}}, r"model has unknown key\(s\) \['alpha'\]"),
        (
            {"model": {"kind": "ridge", "walsh_hadamard": 7}},
            r"walsh_hadamard must be an integer order from 1 to .* \(6\)",
        ),
    ],
)
def test_bad_feedback_tables_are_refused_naming_the_fix(tmp_path, change, match):
    _pool_csv(tmp_path / "pool.csv")
    with pytest.raises(SpecError, match=match):
        parse_spec(_spec(tmp_path / "pool.csv", **change))


def test_missing_keys_and_bad_company_are_refused(tmp_path):
    frame = _pool_csv(tmp_path / "pool.csv")
    path = tmp_path / "pool.csv"
    data = _spec(path)
    del data["datasets"][0]["feedback"]["n_train"]
    with pytest.raises(SpecError, match=r"feedback needs n_train; e.g. feedback = \{ lambda"):
        parse_spec(data)
    for key, value in [("split", {"train": 0.5, "test": 0.5}), ("subsample", 20), ("dropna", True)]:
        data = _spec(path)
        data["datasets"][0][key] = value
        with pytest.raises(SpecError, match=rf"feedback cannot go with {key}: .* Drop {key}"):
            parse_spec(data)
    data = _spec(path)
    data["datasets"][0]["features"] = ["s1", "s2", "sd"]
    with pytest.raises(SpecError, match=r"features lists 'sd', the feedback table's label_sd .* Remove it"):
        parse_spec(data)
    data = _spec(path)
    data["datasets"] = [{"name": "f", "function": "forrester", "n": 20, "feedback": {"lambda": 1}}]
    with pytest.raises(SpecError, match=r"feedback draws rows from a CSV file's pool .* CSV entries"):
        parse_spec(data)
    data = _spec(path, model={"kind": "ridge", "walsh_hadamard": 2})
    frame.assign(s1=frame["s1"] * 2).to_csv(path, index=False)
    with pytest.raises(SpecError, match=r"walsh_hadamard codes binary inputs as \+-1.*drop walsh_hadamard"):
        parse_spec(data)


def test_the_spec_level_checks_name_the_fix(tmp_path):
    _pool_csv(tmp_path / "pool.csv")
    path = tmp_path / "pool.csv"
    with pytest.raises(SpecError, match=r"standardize = true would change both. Set standardize = false"):
        parse_spec(_spec(path) | {"standardize": True})
    data = _spec(path)
    data["methods"]["feedback"]["grid"] = [1.0, 0.0, 0.1]
    with pytest.raises(SpecError, match=r"grid must be \[start, stop, step\].*E.g. grid = \[0.0, 2.2, 0.02\]"):
        parse_spec(data)
    del data["methods"]["feedback"]["grid"]
    with pytest.raises(SpecError, match=r"grid must be \[start, stop, step\]"):
        parse_spec(data)
    data = _spec(path) | {"datasets": [{"name": "f", "function": "forrester", "n": 20}]}
    with pytest.raises(SpecError, match=r"needs a data set with a feedback table .* add feedback = "):
        parse_spec(data)


def test_the_shipped_spec_round_trips():
    spec = load_spec(SPEC)
    assert spec.dataset_names == [f"fluorescence-blue-lambda{v}" for v in (0, 2, 4, 6)]
    again = parse_spec(spec.to_dict())
    assert again.datasets == spec.datasets and again.fingerprint == spec.fingerprint
    assert len(spec.to_dict()["datasets"]) == 1  # the declared entry, not its four runs


@pytest.mark.slow
def test_the_fluorescence_spec_reproduces_the_paper_within_its_standard_error():
    spec = load_spec(SPEC)
    cov = np.zeros((REPS, 2, 4))
    for r in range(REPS):
        for j, d in enumerate(spec.dataset_names):
            out = run_task(spec.to_dict(), d, r)
            assert not any(str(e) for e in out["error"].values.ravel()), (d, r)
            for k, m in enumerate(("feedback", "standard")):
                cov[r, k, j] = float(out["coverage"].sel(calibrator=m).item())
    for k, m in enumerate(("feedback", "standard")):
        for j, p in enumerate(PAPER[m]):
            se = np.sqrt(p * (1 - p) / REPS)
            assert abs(cov[:, k, j].mean() - p) <= 3 * se, (m, j, cov[:, k, j].mean(), p)
    # standard-shift conformal over-covers where feedback-shift conformal does not: the paired difference,
    # pooled over lambda = 2, 4, 6 (published 0.040), above 0 and within 3 standard errors of the paper's
    diff = (cov[:, 1, 1:] - cov[:, 0, 1:]).ravel()
    published = np.mean(np.subtract(PAPER["standard"][1:], PAPER["feedback"][1:]))
    assert diff.mean() > 0
    assert abs(diff.mean() - published) <= 3 * diff.std(ddof=1) / np.sqrt(diff.size), diff.mean()
