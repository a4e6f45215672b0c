"""Fuzzed spec documents (random, and valid ones with keys edited or removed): parsing raises only SpecError,
and an accepted spec round-trips through to_dict."""

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calibprob.compare import SpecError, parse_spec
from tests.support.specs import spec_dict, write_csv

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
        "confidence_level": st.one_of(st.lists(_scalars, max_size=3), _values),
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
    ("confidence_level",),
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
