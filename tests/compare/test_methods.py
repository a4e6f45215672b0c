"""Every calibrator kind runs inside the comparison runner and scores what the class itself scores."""

import numpy as np
import pytest

from calibprob.compare import parse_spec
from calibprob.compare.methods import METHOD_KINDS, make_base
from calibprob.compare.spec import SpecError
from calibprob.compare.tasks import _prepare, run_task
from calibprob.metrics import evaluate_intervals, interval_levels

ALL_KINDS = {
    "base",
    "isotonic",
    "vovk",
    "marx",
    "variance-scaling",
    "split-conformal",
    "jackknife",
    "jackknife-plus",
    "cv-plus",
    "jackknife-plus-gp",
    "asym-jackknife-plus-gp",
    "full-conformal-gp",
    "conformal-predictive",
    "sharp-gp",
    "gp-beta",
}
INTERVAL_KINDS = {
    "jackknife",
    "jackknife-plus",
    "cv-plus",
    "jackknife-plus-gp",
    "asym-jackknife-plus-gp",
    "full-conformal-gp",
}


def gp_spec(methods, n=90):
    return parse_spec(
        {
            "name": "kinds",
            "datasets": [{"name": "branin", "function": "branin", "n": n, "noise": 0.3}],
            "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
            "repetitions": 1,
            "seed": 3,
            "base": {"kind": "gp", "kernel": "matern", "p": 2},
            "methods": methods,
            "confidence_level": [0.5, 0.9],
        }
    )


def test_every_kind_listed_here_is_registered():
    assert ALL_KINDS <= set(METHOD_KINDS)


def test_gp_beta_options_match_the_model():
    from calibprob.calibrators.gp_beta import RUN_OPTIONS

    assert METHOD_KINDS["gp-beta"].options == frozenset(RUN_OPTIONS) | {"calibration_data"}


def test_unknown_option_of_a_kind_is_rejected():
    with pytest.raises(SpecError, match="jackknife-plus-gp"):
        gp_spec({"j": {"kind": "jackknife-plus-gp", "alpha": 0.1}})


def test_cheap_kinds_run_and_interval_kinds_report_interval_metrics():
    methods = {
        k: {"kind": k}
        for k in (
            "base",
            "variance-scaling",
            "split-conformal",
            "conformal-predictive",
            "jackknife-plus-gp",
            "asym-jackknife-plus-gp",
            "full-conformal-gp",
        )
    }
    methods["isotonic"] = {"kind": "isotonic", "extrapolate": True}
    methods["vovk"] = {"kind": "vovk", "extrapolate": True}
    methods["marx"] = {"kind": "marx", "extrapolate": True}
    methods["cv-plus"] = {"kind": "cv-plus", "folds": 3}
    spec = gp_spec(methods)
    out = run_task(spec.to_dict(), "branin", 0)
    errors = {c: str(e) for c, e in zip(out["calibrator"].values, out["error"].values.ravel()) if e}
    assert not errors, errors
    for name in spec.method_names:
        cov = out["coverage"].sel(calibrator=name).values
        assert np.all((cov >= 0) & (cov <= 1)), name
        assert np.isfinite(out["iae"].sel(calibrator=name).item()), name
        nll = out["nll"].sel(calibrator=name).item()
        if METHOD_KINDS[methods[name]["kind"]].name in INTERVAL_KINDS:
            assert np.isnan(nll), name  # no density for interval-only methods
        else:
            assert np.isfinite(nll), name


def test_jplus_gp_kind_scores_equal_the_class_on_the_same_split():
    from calibprob.calibrators.conformal import JackknifePlusGP

    spec = gp_spec({"j": {"kind": "jackknife-plus-gp"}})
    out = run_task(spec.to_dict(), "branin", 0)
    # the same split and base fitted by hand
    seed, arrays = _prepare(spec, "branin", 0)
    (Xtr, ytr), (Xte, yte) = arrays["train"], arrays["test"]
    base = make_base(spec.base, seed=seed).fit(Xtr, ytr)
    levels = interval_levels(spec.confidence_levels)
    n = len(ytr)
    ok = np.array([np.ceil(c * (n + 1) - 1e-9) <= n for c in levels])
    jp = JackknifePlusGP(estimator=base, prefit=True, confidence_level=levels[ok]).fit()
    iv = jp.predict_interval(Xte, confidence_level=levels[ok])
    lo = np.full((len(yte), levels.size), -np.inf)
    hi = np.full((len(yte), levels.size), np.inf)
    lo[:, ok], hi[:, ok] = iv["lower"].values, iv["upper"].values
    import xarray as xr

    ref = evaluate_intervals(
        xr.Dataset(
            {"lower": (("obs", "confidence_level"), lo), "upper": (("obs", "confidence_level"), hi)},
            coords={"confidence_level": levels},
        ),
        yte,
        spec.confidence_levels,
    )
    np.testing.assert_allclose(out["width"].sel(calibrator="j").values.ravel(), ref["width"].values, rtol=1e-10)
    np.testing.assert_allclose(out["iae"].sel(calibrator="j").item(), float(ref["iae"]), rtol=1e-12)


def test_split_conformal_without_calibration_part_names_the_fix():
    spec = parse_spec(
        {
            "name": "nocal",
            "datasets": ["diabetes"],
            "split": {"train": 0.75, "test": 0.25},
            "base": {"kind": "ols"},
            "methods": {"s": {"kind": "split-conformal"}},
        }
    )
    out = run_task(spec.to_dict(), "diabetes", 0)
    assert "calibrate" in str(out["error"].values.ravel()[0])


def test_interval_metrics_count_unbounded_intervals_as_covering():
    import xarray as xr

    levels = interval_levels([0.9])
    y = np.zeros(4)
    lo = np.full((4, levels.size), -1.0)
    hi = np.full((4, levels.size), 1.0)
    lo[:, -1], hi[:, -1] = -np.inf, np.inf
    ds = xr.Dataset(
        {"lower": (("obs", "confidence_level"), lo), "upper": (("obs", "confidence_level"), hi)},
        coords={"confidence_level": levels},
    )
    m = evaluate_intervals(ds, y, [0.9, float(levels[-1])])
    assert m["coverage"].values.tolist() == [1.0, 1.0]
    assert m["width"].values[0] == 2.0 and np.isinf(m["width"].values[1])
    # IAE by hand: coverage 1 everywhere
    assert float(m["iae"]) == pytest.approx(np.mean(1 - np.sort(np.round(1 - np.linspace(0.02, 0.98, 20), 12))))


def test_evaluate_intervals_rejects_missing_levels():
    import xarray as xr

    ds = xr.Dataset(
        {
            "lower": (("obs", "confidence_level"), np.zeros((2, 1))),
            "upper": (("obs", "confidence_level"), np.ones((2, 1))),
        },
        coords={"confidence_level": [0.9]},
    )
    with pytest.raises(ValueError, match=r"lack confidence_level=0.5; they hold 0.9"):
        evaluate_intervals(ds, np.zeros(2), [0.5])
    # the IAE's 21 levels are not demanded: it is NaN and says why
    m = evaluate_intervals(ds, np.zeros(2), [0.9])
    assert np.isnan(float(m["iae"])) and "not_available" in m["iae"].attrs
    with pytest.raises(ValueError, match="lower"):
        evaluate_intervals(ds.drop_vars("lower"), np.zeros(2), [0.9])
