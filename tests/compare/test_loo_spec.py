"""The comparison runner's "calibrate on the training data's LOO predictive" (calibration_data = "loo")."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest

from calibprob.compare import SpecError, parse_spec, run
from tests.support.paths import MODELS

SPEC = MODELS / "loo-calibration.toml"


def _spec(**changes) -> dict:
    doc = tomllib.loads(SPEC.read_text())
    doc.update(changes)
    return doc


def test_loo_spec_runs_no_holdout_beside_holdout(tmp_path):
    """models/loo-calibration.toml with one repetition and 300 draws: every method runs, and the
    LOO-calibrated ones, scored on the same test part as the holdout ones, cover the 80 % intervals of its
    89 test points within 3 binomial standard errors of 0.8 (0.13)."""
    doc = _spec(repetitions=1)
    doc["base"] |= {"draws": 300, "tune": 300}
    res = run(doc, out=tmp_path / "loo.nc").to_dataset()
    cov = res["coverage"].sel(confidence_level=0.8)
    for method in (
        "isotonic",
        "isotonic-loo",
        "conformal-predictive",
        "conformal-predictive-loo",
        "loo-jackknife-plus",
    ):
        c = cov.sel(calibrator=method).values
        assert np.all(np.isfinite(c)), method
        assert np.all(np.abs(c - 0.8) < 0.13), (method, c)
    # "no holdout" calibrated on other data than the holdout method: the two predictions differ
    crps = res["crps"]
    assert float(crps.sel(calibrator="isotonic").mean()) != float(crps.sel(calibrator="isotonic-loo").mean())
    print({m: np.round(cov.sel(calibrator=m).values.ravel(), 3).tolist() for m in cov["calibrator"].values})


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"calibration_data": "holdout"}, r"calibration_data.*'in-sample', 'loo'.*'holdout'"),
        ({"calibration_data": True}, r"calibration_data"),
    ],
)
def test_calibration_data_values_refused(change, match):
    doc = _spec()
    doc["methods"]["isotonic-loo"] |= change
    with pytest.raises(SpecError, match=match):
        parse_spec(doc)


def test_loo_calibration_needs_a_base_with_a_loo_predictive():
    doc = _spec()
    doc["base"] = {"kind": "ols"}
    doc["methods"] = {"iso": {"kind": "isotonic", "calibration_data": "loo"}}
    with pytest.raises(
        SpecError, match=r"methods\.iso\.calibration_data = 'loo' needs a base .*\[base\] of kind 'ols'"
    ):
        parse_spec(doc)
    doc["methods"] = {"j": {"kind": "loo-jackknife-plus"}}
    with pytest.raises(SpecError, match=r"methods\.j \(kind 'loo-jackknife-plus'\) needs a base of kind 'pymc-linear'"):
        parse_spec(doc)
