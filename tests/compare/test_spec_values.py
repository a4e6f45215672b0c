"""Spec values and CSV data sets are checked when a spec is loaded: each bad value is refused naming its key,
the value received and the fix, before anything is allocated or run; every registered option has a declared type."""

import time

import numpy as np
import pandas as pd
import pytest

import calibprob
from calibprob.compare import SpecError, parse_spec, run_comparison
from tests.support.specs import csv_spec, spec_dict, write_csv


@pytest.mark.parametrize(
    "over, match",
    [
        # strings where booleans belong
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
            r"base\.kind must be one of gp, sparse-gp, ols, bayesian-ridge, pymc-linear, pymc-hsgp, python, "
            r"pymc-model, bambi, quantile-gbm; "
            r"got 3",
        ),
        ({"confidence_level": ["x"]}, r"confidence_level must be in \(0, 1\); got 'x'"),
        ({"confidence_level": 0.9}, r"confidence_level must be a non-empty list"),
        ({"metrics": "ece"}, r"metrics must be a non-empty list of metric names.*got 'ece'"),
        ({"levels": [0.5]}, r"levels must hold at least two quantile levels"),
        ({"levels": ["a", "b"]}, r"levels must be a list of numbers"),
        ({"standardize": "true"}, r"standardize must be true or false"),
        ({"seed": -1}, r"seed must be an integer in \[0, "),
        ({"name": 5}, r"name must be a string; got 5"),
        # sizes refused before anything is allocated, with the way to raise the cap
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
            {"base": {"kind": "gp", "exact": True}, "datasets": [{"name": "b", "function": "branin", "n": 900_000}]},
            r"training rows for an exact GP base .* exceed the cap of 20000.*sparse-gp",
        ),
    ],
)
def test_bad_values_are_refused_at_load_naming_the_key(over, match):
    with pytest.raises(SpecError, match=match):
        parse_spec(spec_dict(**over))


def test_an_oversized_data_set_is_refused_before_allocating():
    t0 = time.perf_counter()
    with pytest.raises(SpecError, match="exceeds the cap"):
        parse_spec(spec_dict(datasets=[{"name": "b", "function": "branin", "n": 100_000_000}]))
    assert time.perf_counter() - t0 < 2.0


def test_caps_are_raised_by_their_environment_variable(monkeypatch):
    monkeypatch.setenv("CALIBPROB_MAX_REPETITIONS", "20000")
    assert parse_spec(spec_dict(repetitions=15000)).repetitions == 15000


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
    """One-hot encoding drops one level of each text column, so an OLS base on it is not rank deficient."""
    write_csv(tmp_path / "d.csv", n=60, text=True)
    data = calibprob.datasets.load_csv(tmp_path / "d.csv", "y", one_hot=True)
    assert data["feature"].values.tolist() == ["x1", "x2", "soil=loam", "soil=sand"]
    np.testing.assert_array_equal(data["X"].values[:3, 2:], [[0, 0], [1, 0], [0, 1]])  # clay dropped
    spec = parse_spec(csv_spec(tmp_path, one_hot=True), root=tmp_path)
    tree = run_comparison(spec, tmp_path / "r.nc", progress=False)
    assert (tree.to_dataset()["task_error"].values == "").all()
    assert np.isfinite(tree.to_dataset()["nll"].values).all()


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
    from calibprob.runs.faults import GP_SPARSE_INDUCING

    # kind = "gp"'s choice options are the runner's (calibprob.runs.faults.choose_gp), not the class's
    runner_defaults = {"exact": False, "n_inducing": GP_SPARSE_INDUCING}
    for kind, types in BASE_OPTION_TYPES.items():
        params = inspect.signature(type(make_base({"kind": kind}))).parameters
        for name, t in types.items():
            default = params[name].default if name in params else runner_defaults[name]
            if default is not None:
                t.check(default, f"base.{name}")
