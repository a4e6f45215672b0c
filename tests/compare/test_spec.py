"""Spec validation: every mistake gets its own message naming the key and the fix."""

import warnings
from pathlib import Path

import pytest

from calibprob.compare import SpecError, load_spec, parse_spec
from tests.support.elec2 import DATA as ELEC2_DATA
from tests.support.elec2 import ELEC2_SPECS, elec2_extracts
from tests.support.paths import MODELS, REPO_ROOT

REPO = REPO_ROOT


def minimal(**overrides):
    spec = {
        "name": "t",
        "datasets": ["boston"],
        "split": {"train": 0.6, "calibrate": 0.2, "test": 0.2},
        "base": {"kind": "ols"},
        "methods": {"b": {"kind": "base"}},
    }
    spec.update(overrides)
    return spec


def test_every_shipped_spec_is_valid_and_uses_no_deprecated_name():
    specs = sorted((REPO / "models").glob("*.toml"))
    assert specs, "models/ holds no spec"
    missing = [MODELS / "data" / p for p in ("barber2023_elec2_nexcp.csv", "angelopoulos2023_elec2_nswdemand.csv")]
    if not all(p.exists() for p in missing) and (ELEC2_DATA / "elec2.csv").exists():
        elec2_extracts()  # ELEC2 is not shipped (licence not established): its specs read extracts built locally
    for path in specs:
        if path.stem in ELEC2_SPECS and not all(p.exists() for p in missing):
            with pytest.raises(SpecError, match=r"does not exist"):  # the user's message names the missing file
                load_spec(path)
            continue
        # a shipped spec is what users copy: a deprecated key there spreads the old name
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            spec = load_spec(path)
        assert spec.methods and spec.datasets


def test_minimal_spec_parses_and_round_trips():
    spec = parse_spec(minimal())
    assert spec.dataset_names == ["boston"]
    assert parse_spec(spec.to_dict()).fingerprint == spec.fingerprint


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"repetition": 3}, r"unknown key 'repetition' in the spec's top level\. Did you mean 'repetitions'\?"),
        ({"methods": {"b": {"kind": "isotonik"}}}, r"methods\.b\.kind = 'isotonik' is unknown.*Valid kinds: .*base"),
        ({"methods": {"b": {"kind": "base", "foo": 1}}}, r"unknown key 'foo' in methods\.b"),
        ({"split": {"train": 0.6, "calibrate": 0.3, "test": 0.2}}, r"split fractions must sum to 1; got .* = 1\.1"),
        ({"split": {"train": 0.6, "test": 0.4, "valid": 0.1}}, r"unknown key 'valid' in split"),
        ({"split": {"train": 1.2, "test": -0.2}}, r"split\.train must be a fraction in \(0, 1\)"),
        ({"datasets": ["bostn"]}, r"'bostn' is not a bundled data set\. Valid names: .*boston"),
        (
            {"datasets": [{"name": "x", "path": "nope.csv", "target": "y"}]},
            r"datasets\[0\]\.path: file .*nope\.csv.* does not exist",
        ),
        (
            {"base": {"kind": "svm"}},
            r"base\.kind must be one of gp, sparse-gp, ols, bayesian-ridge, pymc-linear, pymc-hsgp, python, "
            r"pymc-model, bambi, quantile-gbm; "
            r"got 'svm'",
        ),
        ({"repetitions": 0}, r"repetitions must be a positive integer; got 0"),
        ({"confidence_level": [90]}, r"confidence_level must be in \(0, 1\); got 90"),
        ({"metrics": ["ecee"]}, r"metrics: 'ecee' is not a metric\. Did you mean 'ece'\?"),
        ({"levels": [0.5, 0.1]}, r"levels must be strictly increasing"),
    ],
)
def test_bad_specs_are_rejected(overrides, match):
    with pytest.raises(SpecError, match=match):
        parse_spec(minimal(**overrides), root=REPO)


def test_missing_required_key():
    spec = minimal()
    del spec["methods"]
    with pytest.raises(SpecError, match="the spec needs a 'methods' key"):
        parse_spec(spec)


def test_csv_target_must_exist(tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("a,b,y\n" + "".join(f"{i},{i % 3},{i * i}\n" for i in range(12)))
    spec = minimal(datasets=[{"name": "mine", "path": "d.csv", "target": "z"}])
    with pytest.raises(
        SpecError,
        match=r"datasets\[0\] \(d\.csv\): target must be a column of d\.csv; got 'z'\. "
        r"Columns: 'a', 'b', 'y'",
    ):
        parse_spec(spec, root=tmp_path)
    ok = parse_spec(minimal(datasets=[{"name": "mine", "path": "d.csv", "target": "y"}]), root=tmp_path)
    assert Path(ok.datasets[0].path).is_absolute()


def test_missing_spec_file():
    with pytest.raises(SpecError, match=r"spec file 'models/nope\.toml' does not exist"):
        load_spec("models/nope.toml")


def test_invalid_toml(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("name = \n")
    with pytest.raises(SpecError, match="invalid TOML"):
        load_spec(p)


def test_base_options_table_matches_the_constructors():
    import inspect

    from calibprob import registry
    from calibprob.compare.methods import make_base
    from calibprob.compare.spec import BASE_OPTIONS

    for kind, names in BASE_OPTIONS.items():
        params = set(inspect.signature(type(make_base({"kind": kind}))).parameters) - {"random_state"}
        # the runner's own options (kind = "gp"'s choice) never reach the class
        assert set(names) - set(registry.BASES[kind].runner_options) == params, kind


def test_unknown_base_option_is_rejected_with_the_valid_ones():
    from calibprob.compare import parse_spec
    from calibprob.compare.spec import SpecError

    spec = {
        "name": "x",
        "datasets": ["diabetes"],
        "split": {"train": 0.5, "test": 0.5},
        "base": {"kind": "gp", "kernel": "matern", "nu": 2.5},
        "methods": {"b": {"kind": "base"}},
    }
    with pytest.raises(SpecError, match="unknown key 'nu' in \\[base\\].*Valid keys: .*kernel"):
        parse_spec(spec)


def test_synthetic_dataset_may_carry_its_own_split_in_counts():
    from calibprob.compare import parse_spec
    from calibprob.compare.spec import SpecError
    from calibprob.compare.tasks import _prepare

    base = {
        "name": "x",
        "split": {"train": 0.5, "test": 0.5},
        "base": {"kind": "ols"},
        "methods": {"b": {"kind": "base"}},
    }
    spec = parse_spec(
        base
        | {"datasets": [{"name": "b", "function": "branin", "n": 60, "split": {"train": 20, "test": 40}}, "diabetes"]}
    )
    _, arrays = _prepare(spec, "b", 0)
    assert (len(arrays["train"][1]), len(arrays["test"][1])) == (20, 40)
    _, arrays = _prepare(spec, "diabetes", 0)  # the spec's own split
    assert abs(len(arrays["train"][1]) - len(arrays["test"][1])) <= 1
    # the spec travels to workers as a dict: the per-dataset split survives the round trip
    assert parse_spec(spec.to_dict()).datasets[0].split == spec.datasets[0].split
    with pytest.raises(SpecError, match=r"datasets\[0\].split: counts .* sum to the data set's n = 60"):
        parse_spec(
            base | {"datasets": [{"name": "b", "function": "branin", "n": 60, "split": {"train": 20, "test": 30}}]}
        )


def test_a_csv_specs_fingerprint_follows_the_files_content_not_its_folder(tmp_path):
    """A project moved or cloned elsewhere keeps its finished tasks (same content, same fingerprint); a data file
    edited in place does not (its content hash is part of the fingerprint)."""
    text = "x1,x2,y\n" + "".join(f"{i},{(i * 7) % 5},{i % 3 + 0.5 * i}\n" for i in range(40))
    specs = {}
    for folder in ("here", "there"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "d.csv").write_text(text)
        specs[folder] = parse_spec(
            {
                "name": "moved",
                "datasets": [{"name": "d", "path": str(tmp_path / folder / "d.csv"), "target": "y"}],
                "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
                "methods": {"b": {"kind": "base"}},
                "base": {"kind": "ols"},
            }
        )
    assert specs["here"].datasets[0].path != specs["there"].datasets[0].path
    assert specs["here"].fingerprint == specs["there"].fingerprint
    (tmp_path / "there" / "d.csv").write_text(text.replace("\n1,", "\n2,", 1))  # one cell edited
    edited = parse_spec(
        specs["there"].to_dict()
        | {"datasets": [{"name": "d", "path": str(tmp_path / "there" / "d.csv"), "target": "y"}]}
    )
    assert edited.fingerprint != specs["here"].fingerprint
