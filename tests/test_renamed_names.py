"""Public names renamed in the reorganisation by role keep working for one release, with a FutureWarning.

Module paths are checked by ``test_moved_paths.py``; here: the base kind renamed ``pymc-linear`` (one
name across module ``calibprob.bases.pymc_linear``, class ``PyMCLinearRegression`` and kind) and the name
``calibprob.transforms.TransformedTargetRegressor`` (the base model moved to ``calibprob.bases.transformed``).
"""

from __future__ import annotations

import warnings

import pytest

import calibprob
from calibprob import registry
from calibprob.bases.pymc_linear import PyMCLinearRegression
from calibprob.bases.transformed import TransformedTargetRegressor
from calibprob.compare import SpecError, parse_spec
from calibprob.compare.methods import make_base

OLD_KIND = "pymc-glm"  # keep-old-name


def _spec(base: dict) -> dict:
    return {
        "name": "renamed",
        "datasets": ["boston"],
        "split": {"train": 0.6, "calibrate": 0.2, "test": 0.2},
        "base": base,
        "methods": {"b": {"kind": "base"}},
    }


def test_the_pymc_linear_model_has_one_name():
    entry = registry.BASES["pymc-linear"]
    assert entry.load() is PyMCLinearRegression
    assert registry.CLASSES["PyMCLinearRegression"].module == "calibprob.bases.pymc_linear"
    assert OLD_KIND not in registry.BASES
    assert "pymc-linear" in registry.LOO_BASES and OLD_KIND not in registry.LOO_BASES


def test_the_old_kind_parses_as_the_new_one_with_a_future_warning():
    warned = r"base\.kind: kind 'pymc-glm' was renamed 'pymc-linear'.*removed in 0\.3\.0"  # keep-old-name
    with pytest.warns(FutureWarning, match=warned):
        spec = parse_spec(_spec({"kind": OLD_KIND, "draws": 50, "tune": 50}))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # the new name warns not
        same = parse_spec(_spec({"kind": "pymc-linear", "draws": 50, "tune": 50}))
    assert spec.base == same.base == {"kind": "pymc-linear", "draws": 50, "tune": 50}


def test_the_old_kind_builds_the_same_base_and_keeps_the_option_checks():
    with pytest.warns(FutureWarning, match="pymc-linear"):
        model = make_base({"kind": OLD_KIND, "draws": 50}, seed=3)
    assert type(model) is PyMCLinearRegression and model.draws == 50 and model.random_state == 3
    with pytest.warns(FutureWarning), pytest.raises(SpecError, match=r"base\.draws"):
        parse_spec(_spec({"kind": OLD_KIND, "draws": 1}))


def test_other_kinds_pass_through_unchanged():
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        assert registry.base_kind("gp") == "gp"
        assert registry.base_kind(None) is None
        assert registry.base_kind("no-such-kind") == "no-such-kind"


def test_transformed_target_regressor_moved_with_a_warning():
    import calibprob.transforms as transforms

    with pytest.warns(FutureWarning, match=r"`calibprob\.transforms\.TransformedTargetRegressor` moved to "):
        old = transforms.TransformedTargetRegressor
    assert old is TransformedTargetRegressor is calibprob.TransformedTargetRegressor
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        transforms.nothing_here  # noqa: B018
