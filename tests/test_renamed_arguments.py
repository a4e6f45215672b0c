"""Keyword arguments renamed in 0.2.0 (one name per idea, issue 40) keep working for one release.

Each old keyword of :data:`RENAMES` warns a ``FutureWarning`` naming the old name, the new one and 0.3.0, and
gives the bitwise-identical result of the new keyword; giving both is refused naming both. The reference of
"identical" is the call with the new name (the same arithmetic, so ``assert_array_equal``, not a tolerance).
The one helper (``calibprob._core.deprecation.renamed_keywords``) is tested on its own at the end; the spec's old
option names and the 0.1.0 saved files (which hold ``normalize``) load too.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

import calibprob
from calibprob import ConformalBayes, ConformalizedQuantileRegression, ConformalPredictiveSystem
from calibprob._core.deprecation import current_keywords, renamed_keywords
from calibprob.compare import SpecError, parse_spec
from tests.support.paths import TEST_DATA

#: (call, old keyword, new keyword) of every rename
RENAMES = [
    ("ConformalPredictiveSystem", "normalize", "score"),
    ("ConformalizedQuantileRegression", "variant", "score"),
    ("ConformalBayes", "block_rows", "chunk_size"),
    ("ConformalBayes", "unseen_group", "fallback"),
    ("ConformalBayes.fit", "train_groups", "groups"),
    ("calibprob.evaluate", "confidence_levels", "confidence_level"),
    ("calibprob.metrics.evaluate_intervals", "confidence_levels", "confidence_level"),
    ("calibprob.metrics.interval_levels", "confidence_levels", "confidence_level"),
    ("calibprob.calibrators.conformal.cqr.cqr_scores", "variant", "score"),
    ("calibprob.calibrators.conformal.cqr.cqr_corrections", "variant", "score"),
    ("calibprob.calibrators.conformal.cqr.cqr_intervals", "variant", "score"),
    ("calibprob.conformal_bayes", "train_groups", "groups"),  # its new rows' labels: groups_new= (test_from_pymc)
    ("spec top level", "confidence_levels", "confidence_level"),
]


def _warned(call: str, old: str, new: str) -> str:
    """The pattern of the one warning: the old call, the new name, the release that removes the old one."""
    return rf"{call.replace('.', r'\.')}\({old}=\.\.\.\) is deprecated: the argument is now called '{new}'.*removed in calibprob 0\.3\.0"


def _no_future_warning():
    """A context in which any FutureWarning fails the test (the new names warn not)."""
    ctx = warnings.catch_warnings()
    ctx.__enter__()
    warnings.simplefilter("error", FutureWarning)
    return ctx


@pytest.fixture(scope="module")
def normal_base():
    rng = np.random.default_rng(40)
    mu = rng.normal(size=300)
    y = mu + rng.gamma(2.0, 1.0, size=300) - 2.0  # skewed errors: the signed scores differ from each other
    base = calibprob.normal(mu, np.full(300, 0.8))
    return base.isel(obs=slice(200)), y[:200], base.isel(obs=slice(200, None)), y[200:]


@pytest.fixture(scope="module")
def posterior():
    """Conformal Bayes on a conjugate normal mean (Fong & Holmes 2021, §4.1's toy): 30 points in groups a, b."""
    rng = np.random.default_rng(41)
    y = rng.normal(size=30)
    mu = rng.normal(y.mean(), 1 / np.sqrt(30), size=800)
    ll = -0.5 * (y[None, :] - mu[:, None]) ** 2 - 0.5 * np.log(2 * np.pi)
    grid = np.linspace(-5, 5, 101)
    logf = np.broadcast_to(
        -0.5 * (grid[None, None, :] - mu[:, None, None]) ** 2 - 0.5 * np.log(2 * np.pi), (800, 3, 101)
    )
    return ll, np.repeat(["a", "b"], 15), np.ascontiguousarray(logf), grid


def test_the_list_of_renames_is_the_naming_tests_table():
    """Every old keyword here is a synonym the naming test bans, so none can come back into a signature."""
    from tests.test_naming import SYNONYMS

    banned = {word for _chosen, *others in SYNONYMS.values() for word in others}
    chosen = {words[0] for words in SYNONYMS.values()}
    assert all(old in banned and new in chosen for _call, old, new in RENAMES)


@pytest.mark.parametrize(("old", "new"), [(True, "signed"), (False, "signed-absolute")])
def test_cps_normalize_is_score(normal_base, old, new):
    pred_cal, y_cal, pred_te, _ = normal_base
    with pytest.warns(
        FutureWarning, match=_warned("ConformalPredictiveSystem", "normalize", "score") + f".*score='{new}'"
    ):
        legacy = ConformalPredictiveSystem(normalize=old)
    ctx = _no_future_warning()
    current = ConformalPredictiveSystem(score=new)
    assert legacy.get_params() == current.get_params()
    a = legacy.fit(pred_cal, y_cal).predict(pred_te)
    b = current.fit(pred_cal, y_cal).predict(pred_te)
    ctx.__exit__(None, None, None)
    xr.testing.assert_identical(a, b)
    if not old:  # the two scores differ on skewed errors: the old flag picks one, it is not ignored
        other = ConformalPredictiveSystem(score="signed").fit(pred_cal, y_cal).predict(pred_te)
        assert not np.array_equal(a.calib.quantiles, other.calib.quantiles)


def test_cps_refuses_both_names_and_a_bad_old_value():
    with pytest.raises(
        TypeError, match=r"ConformalPredictiveSystem\(\) got both normalize= and score=.*pass score= only"
    ):
        ConformalPredictiveSystem(normalize=True, score="signed")
    with pytest.raises(TypeError, match=r"normalize must be True or False; got 'yes'.*score='signed'"):
        ConformalPredictiveSystem(normalize="yes")
    with pytest.raises(ValueError, match=r"score must be one of 'signed', 'signed-absolute'; got 'absolute'"):
        ConformalPredictiveSystem(score="absolute").fit(calibprob.normal(np.zeros(20), np.ones(20)), np.zeros(20))


@pytest.mark.parametrize("score", ["symmetric", "asymmetric", "cqr-r"])
def test_cqr_variant_is_score(normal_base, score):
    pred_cal, y_cal, pred_te, _ = normal_base
    with pytest.warns(FutureWarning, match=_warned("ConformalizedQuantileRegression", "variant", "score")):
        legacy = ConformalizedQuantileRegression(variant=score, missing_levels="interpolate")
    ctx = _no_future_warning()
    current = ConformalizedQuantileRegression(score=score, missing_levels="interpolate")
    a, b = (m.fit(pred_cal, y_cal).predict(pred_te) for m in (legacy, current))
    ctx.__exit__(None, None, None)
    xr.testing.assert_identical(a, b)
    with pytest.raises(TypeError, match=r"ConformalizedQuantileRegression\(\) got both variant= and score="):
        ConformalizedQuantileRegression(variant=score, score=score)


def test_conformal_bayes_block_rows_is_chunk_size(posterior):
    ll, _, logf, grid = posterior
    with pytest.warns(FutureWarning, match=_warned("ConformalBayes", "block_rows", "chunk_size")):
        legacy = ConformalBayes(block_rows=2 * grid.size, pareto_k=False)
    current = ConformalBayes(chunk_size=2 * grid.size, pareto_k=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", calibprob.CalibprobWarning)
        xr.testing.assert_identical(legacy.fit(ll).predict(logf, grid), current.fit(ll).predict(logf, grid))
    with pytest.raises(TypeError, match=r"ConformalBayes\(\) got both block_rows= and chunk_size="):
        ConformalBayes(block_rows=10, chunk_size=10)


@pytest.mark.parametrize(("old", "new"), [("raise", None), ("marginal", "pooled")])
def test_conformal_bayes_unseen_group_is_fallback(posterior, old, new):
    """``unseen_group="marginal"`` is ``fallback="pooled"`` (Mondrian's word for it), ``"raise"`` is None."""
    ll, labels, logf, grid = posterior
    with pytest.warns(
        FutureWarning, match=_warned("ConformalBayes", "unseen_group", "fallback") + f".*fallback={new!r}"
    ):
        legacy = ConformalBayes(unseen_group=old, pareto_k=False)
    current = ConformalBayes(fallback=new, pareto_k=False)
    assert legacy.get_params() == current.get_params()
    test_groups = ["a", "b", "c"]  # "c" never seen in training
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", calibprob.CalibprobWarning)
        legacy.fit(ll, groups=labels)
        current.fit(ll, groups=labels)
        if new is None:
            for model in (legacy, current):
                with pytest.raises(ValueError, match=r"never seen in training \(c\).*fallback='pooled'"):
                    model.predict(logf, grid, groups=test_groups)
        else:
            a, b = (m.predict(logf, grid, groups=test_groups) for m in (legacy, current))
            xr.testing.assert_identical(a, b)
            assert a["marginal_fallback"].values.tolist() == [False, False, True]
    with pytest.raises(ValueError, match=r"unseen_group must be one of 'raise', 'marginal'; got 'drop'"):
        ConformalBayes(unseen_group="drop")
    with pytest.raises(TypeError, match=r"ConformalBayes\(\) got both unseen_group= and fallback="):
        ConformalBayes(unseen_group=old, fallback=new)


def test_conformal_bayes_fit_train_groups_is_groups(posterior):
    ll, labels, logf, grid = posterior
    with pytest.warns(FutureWarning, match=_warned("ConformalBayes.fit", "train_groups", "groups")):
        legacy = ConformalBayes(pareto_k=False).fit(ll, train_groups=labels)
    current = ConformalBayes(pareto_k=False).fit(ll, groups=labels)
    np.testing.assert_array_equal(legacy.train_groups_, current.train_groups_)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", calibprob.CalibprobWarning)
        a, b = (m.predict(logf, grid, groups=["a", "b", "a"]) for m in (legacy, current))
    xr.testing.assert_identical(a, b)
    with pytest.raises(TypeError, match=r"ConformalBayes\.fit\(\) got both train_groups= and groups="):
        ConformalBayes().fit(ll, train_groups=labels, groups=labels)


@pytest.mark.parametrize("interval_family", [False, True])
def test_evaluate_confidence_levels_is_confidence_level(normal_base, interval_family):
    _, _, pred_te, y_te = normal_base
    pred = pred_te.calib.interval([0.5, 0.9]) if interval_family else pred_te
    pred.attrs["family"] = "interval" if interval_family else pred.attrs.get("family")
    with pytest.warns(FutureWarning, match=_warned("calibprob.evaluate", "confidence_levels", "confidence_level")):
        legacy = calibprob.evaluate(pred, y_te, confidence_levels=[0.5, 0.9])
    ctx = _no_future_warning()
    by_keyword = calibprob.evaluate(pred, y_te, confidence_level=[0.5, 0.9])
    by_position = calibprob.evaluate(pred, y_te, [0.5, 0.9])
    ctx.__exit__(None, None, None)
    xr.testing.assert_identical(legacy, by_keyword)
    xr.testing.assert_identical(legacy, by_position)
    with pytest.raises(TypeError, match=r"calibprob\.evaluate\(\) got both confidence_levels= and confidence_level="):
        calibprob.evaluate(pred, y_te, [0.9], confidence_levels=[0.9])
    with pytest.raises(ValueError, match=r"confidence_level must be in \(0, 1\); got 1\.5"):
        calibprob.evaluate(pred_te, y_te, confidence_level=[0.9, 1.5])


def test_the_interval_helpers_take_confidence_level(normal_base):
    from calibprob.metrics import evaluate_intervals, interval_levels

    _, _, pred_te, y_te = normal_base
    with pytest.warns(
        FutureWarning, match=_warned("calibprob.metrics.interval_levels", "confidence_levels", "confidence_level")
    ):
        levels = interval_levels(confidence_levels=[0.9])
    np.testing.assert_array_equal(levels, interval_levels(confidence_level=[0.9]))
    iv = pred_te.calib.interval(levels)
    with pytest.warns(
        FutureWarning, match=_warned("calibprob.metrics.evaluate_intervals", "confidence_levels", "confidence_level")
    ):
        legacy = evaluate_intervals(iv, y_te, confidence_levels=[0.9])
    xr.testing.assert_identical(legacy, evaluate_intervals(iv, y_te, confidence_level=[0.9]))


# ---------------------------------------------------------------------------
# spec files and saved files
# ---------------------------------------------------------------------------


def _spec(methods: dict) -> dict:
    return {
        "name": "renamed-options",
        "datasets": ["boston"],
        "split": {"train": 0.6, "calibrate": 0.2, "test": 0.2},
        "base": {"kind": "ols"},
        "methods": methods,
    }


@pytest.mark.parametrize(
    ("kind", "old", "value", "new", "new_value"),
    [
        ("cqr", "variant", "cqr-r", "score", "cqr-r"),
        ("conformal-predictive", "normalize", False, "score", "signed-absolute"),
        ("conformal-predictive", "normalize", True, "score", "signed"),
    ],
)
def test_a_spec_with_an_old_option_parses_as_the_new_one(kind, old, value, new, new_value):
    warned = rf"methods\.m\.{old} is deprecated: the argument is now called '{new}'.*removed in calibprob 0\.3\.0"
    with pytest.warns(FutureWarning, match=warned):
        spec = parse_spec(_spec({"m": {"kind": kind, old: value}}))
    ctx = _no_future_warning()
    same = parse_spec(_spec({"m": {"kind": kind, new: new_value}}))
    ctx.__exit__(None, None, None)
    assert spec.methods == same.methods and spec.methods[0].options == {new: new_value}


def test_a_spec_with_both_names_or_a_bad_old_value_is_refused():
    with pytest.raises(SpecError, match=r"methods\.m: both 'variant' and 'score' given.*keep only score = 'cqr-r'"):
        parse_spec(_spec({"m": {"kind": "cqr", "variant": "cqr-r", "score": "cqr-r"}}))
    with pytest.warns(FutureWarning), pytest.raises(SpecError, match=r"methods\.m\.score must be one of"):
        parse_spec(_spec({"m": {"kind": "cqr", "variant": "cqr-x"}}))
    with pytest.raises(SpecError, match=r"methods\.m\.normalize must be one of True, False; got 'yes'"):
        parse_spec(_spec({"m": {"kind": "conformal-predictive", "normalize": "yes"}}))


def test_a_0_1_0_saved_predictive_system_loads_with_its_normalize_as_score():
    """The 0.1.0 file holds ``normalize``; it loads silently (the user did not write the old name) as ``score``."""
    path = TEST_DATA / "saved-0.1.0" / "ConformalPredictiveSystem.nc"
    ctx = _no_future_warning()
    model = calibprob.load(path)
    ctx.__exit__(None, None, None)
    assert model.get_params()["score"] in ("signed", "signed-absolute") and "normalize" not in model.get_params()
    model.get_params()  # and it round-trips under the new name
    assert current_keywords(ConformalPredictiveSystem.__init__, {"normalize": True, "beta": 1.0}) == {
        "beta": 1.0,
        "score": "signed",
    }
    # the other renamed constructors read their old saved names the same way (converted values included)
    assert current_keywords(ConformalBayes.__init__, {"unseen_group": "marginal", "block_rows": 8}) == {
        "fallback": "pooled",
        "chunk_size": 8,
    }
    assert current_keywords(ConformalizedQuantileRegression.__init__, {"variant": "cqr-m"}) == {"score": "cqr-m"}


# ---------------------------------------------------------------------------
# the one helper
# ---------------------------------------------------------------------------


def test_the_helper_keeps_the_signature_and_refuses_a_wrong_declaration():
    import inspect

    @renamed_keywords({"rows": "chunk_size"}, where="toy")
    def toy(a, *, chunk_size=None):
        return a, chunk_size

    assert list(inspect.signature(toy).parameters) == ["a", "chunk_size"]
    with pytest.warns(FutureWarning, match=r"toy\(rows=\.\.\.\) is deprecated.*Write toy\(chunk_size=\.\.\.\)"):
        assert toy(1, rows=5) == (1, 5)
    with pytest.raises(TypeError, match=r"renamed_keywords on .*must have the new name 'size' and not the old one"):
        renamed_keywords({"rows": "size"})(toy.__wrapped__)


def test_the_spec_key_confidence_levels_is_confidence_level():
    """The spec's 0.1 top-level key reads as ``confidence_level`` with a warning, and gives the same spec and the
    same fingerprint (so every finished task of a results file is reused); both keys at once are refused."""
    from tests.support.specs import spec_dict

    new = parse_spec(spec_dict(confidence_level=[0.5, 0.8]))
    old_dict = spec_dict()
    del old_dict["confidence_level"]
    old_dict["confidence_levels"] = [0.5, 0.8]
    with pytest.warns(FutureWarning, match=r"spec key confidence_levels is deprecated.*'confidence_level'.*0\.3\.0"):
        old = parse_spec(old_dict)
    assert old.confidence_levels == new.confidence_levels == (0.5, 0.8)
    assert old.fingerprint == new.fingerprint
    assert "confidence_level" in new.to_dict() and "confidence_levels" not in new.to_dict()
    with pytest.raises(SpecError, match=r"both confidence_level and confidence_levels.*keep confidence_level only"):
        parse_spec({**old_dict, "confidence_level": [0.5]})


def test_the_cqr_numpy_layer_takes_score_for_variant():
    """``cqr_scores`` / ``cqr_corrections`` / ``cqr_intervals``: ``variant=`` warns and gives the bitwise result of
    ``score=``; both at once are refused."""
    from calibprob.calibrators.conformal import cqr

    rng = np.random.default_rng(7)
    q_lo, q_hi, y = rng.normal(size=30) - 1.0, rng.normal(size=30) + 1.0, rng.normal(size=30)
    q_lo, q_hi = np.minimum(q_lo, q_hi), np.maximum(q_lo, q_hi)
    ctx = _no_future_warning()
    s = cqr.cqr_scores(y, q_lo, q_hi, score="cqr-r")
    corr = cqr.cqr_corrections(s, 0.8, score="cqr-r")
    ends = cqr.cqr_intervals(q_lo, q_hi, corr, score="cqr-r")
    ctx.__exit__(None, None, None)
    for name, call, new in (
        ("cqr_scores", lambda **k: cqr.cqr_scores(y, q_lo, q_hi, **k), s),
        ("cqr_corrections", lambda **k: cqr.cqr_corrections(s, 0.8, **k), corr),
        ("cqr_intervals", lambda **k: cqr.cqr_intervals(q_lo, q_hi, corr, **k), ends),
    ):
        where = f"calibprob.calibrators.conformal.cqr.{name}"
        with pytest.warns(FutureWarning, match=_warned(where, "variant", "score")):
            old = call(variant="cqr-r")
        np.testing.assert_array_equal(np.asarray(old), np.asarray(new))
        with pytest.raises(TypeError, match=r"got both variant= and score="):
            call(variant="cqr-r", score="cqr-r")
