"""A method's ``groups = true/false`` (Mondrian or marginal, side by side) and its ``fallback``.

References: the marginal method scores exactly as the same method on the data set without groups
(same split, same base); the Mondrian method with no ``groups`` key is today's behaviour (every
post-processor per group); on radon, a split leaves counties out of the calibration part, which
fails the Mondrian method without a fallback and not with ``fallback = "pooled"``.
"""

from __future__ import annotations

import numpy as np
import pytest

import calibprob
from calibprob.compare import parse_spec
from calibprob.compare.spec import SpecError


def _spec(methods, dataset=None, **extra):
    return {
        "name": "mg",
        "datasets": [dataset or {"name": "auto_mpg", "groups": "origin"}],
        "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
        "base": {"kind": "ols"},
        "confidence_level": [0.8],
        "methods": methods,
        **extra,
    }


@pytest.mark.parametrize(
    ("method", "match"),
    [
        ({"kind": "jackknife-plus", "groups": True}, r"methods.m.groups = true: kind 'jackknife-plus' has no Mondrian"),
        ({"kind": "isotonic", "fallback": "pooled"}, r"methods.m.fallback applies with groups = true only"),
        ({"kind": "isotonic", "groups": False, "fallback": "none"}, r"fallback applies with groups = true only"),
        ({"kind": "isotonic", "groups": True, "fallback": "pool"}, r"methods.m.fallback must be one of"),
        ({"kind": "isotonic", "groups": "yes"}, r"methods.m.groups"),
    ],
)
def test_bad_method_groups_keys_are_refused(method, match):
    with pytest.raises(SpecError, match=match):
        parse_spec(_spec({"m": method}))


def test_groups_true_needs_a_group_column():
    with pytest.raises(SpecError, match=r"methods.m.groups = true needs a group column.*'diabetes' has none"):
        parse_spec(_spec({"m": {"kind": "isotonic", "groups": True}}, dataset="diabetes"))


def test_keys_round_trip_and_old_specs_are_unchanged():
    spec = parse_spec(_spec({"a": {"kind": "isotonic", "groups": True}, "b": {"kind": "isotonic", "groups": False}}))
    assert [(m.groups, m.fallback) for m in spec.methods] == [(True, "pooled"), (False, None)]
    assert parse_spec(spec.to_dict()) == spec
    old = parse_spec(_spec({"a": {"kind": "isotonic"}}))
    assert old.to_dict()["methods"] == {"a": {"kind": "isotonic"}}  # no new key: the same fingerprint as before


def test_marginal_and_mondrian_side_by_side():
    methods = {
        "marginal": {"kind": "conformal-predictive", "groups": False},
        "mondrian": {"kind": "conformal-predictive", "groups": True, "fallback": "none"},
        "legacy": {"kind": "conformal-predictive"},
    }
    got = calibprob.compare.run(parse_spec(_spec(methods))).to_dataset()
    assert not any(got["error"].values.ravel())
    plain = calibprob.compare.run(parse_spec(_spec({"marginal": methods["marginal"]}, dataset="auto_mpg"))).to_dataset()
    crps = got["crps"].sel(calibrator="marginal").values
    np.testing.assert_array_equal(crps, plain["crps"].sel(calibrator="marginal").values)
    np.testing.assert_array_equal(
        got["crps"].sel(calibrator="mondrian").values, got["crps"].sel(calibrator="legacy").values
    )
    assert not np.array_equal(crps, got["crps"].sel(calibrator="mondrian").values)


def test_pooled_fallback_survives_a_county_left_out_of_calibration():
    methods = {
        "none": {"kind": "isotonic", "groups": True, "fallback": "none"},
        "pooled": {"kind": "isotonic", "groups": True, "fallback": "pooled", "extrapolate": True},
    }
    # county one-hot with counties absent from training: rank deficient for OLS, fine for Bayesian ridge
    spec = _spec(methods, dataset={"name": "radon", "groups": "county"}, base={"kind": "bayesian-ridge"})
    got = calibprob.compare.run(parse_spec(spec)).to_dataset()
    errors = dict(zip(got["calibrator"].values, got["error"].values.ravel(), strict=True))
    assert errors["pooled"] == ""
    assert "fallback" in errors["none"]  # Mondrian's own message names the fix
    assert np.isfinite(got["crps"].sel(calibrator="pooled").values).all()
