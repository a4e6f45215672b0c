"""calibprob.weights: the weight kinds, their diagnostics, the attainable-level rule and bad input (issue 39)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import calibprob
from calibprob._core.ranks import least_n
from calibprob.weights import (
    DecayingWeights,
    DensityRatio,
    LikelihoodRatio,
    check_attainable,
    check_weights,
    diagnose,
    effective_sample_size,
)


def test_exported_as_a_subpackage():
    assert calibprob.weights.LikelihoodRatio is LikelihoodRatio


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ([1.0, np.nan, 2.0], r"weights must be finite; got nan at index 1"),
        ([1.0, -0.5, 2.0], r"weights must be non-negative; got -0.5 at index 1.*exp\(log_weights\)"),
        ([0.0, 0.0, 0.0], r"weights are all zero \(3 points\).*omit weights="),
        ([1.0, 2.0], r"weights has 2 entries for 3 points"),
        ([1.0, np.inf, 2.0], r"weights must be finite; got inf"),
    ],
)
def test_bad_weights_are_refused_naming_the_fix(values, match):
    with pytest.raises(ValueError, match=match):
        check_weights(values, 3)


def test_a_zero_test_weight_is_refused():
    with pytest.raises(ValueError, match=r"must be positive for test points; got 0 at index 1.*clip="):
        check_weights([1.0, 0.0], 2, positive=True)


def test_labelled_weights_are_aligned_by_obs_label():
    pred = calibprob.normal(np.zeros(3), np.ones(3)).assign_coords(obs=["a", "b", "c"])
    w = pd.Series([3.0, 1.0, 2.0], index=["c", "a", "b"])
    assert check_weights(w, 3, obs=pred).tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match=r"weights's index does not match the prediction's obs labels"):
        check_weights(pd.Series([1.0, 2.0, 3.0], index=["a", "b", "z"]), 3, obs=pred)


def test_effective_sample_size_closed_forms():
    assert effective_sample_size(np.ones(7)) == 7.0
    assert effective_sample_size([1.0, 0.0, 0.0, 0.0]) == 1.0
    # two groups: k weights a, k weights b -> (k a + k b)^2 / (k a^2 + k b^2)
    assert effective_sample_size([1.0] * 5 + [3.0] * 5) == pytest.approx(400 / 50)
    assert effective_sample_size([1e300, 1e300]) == 2.0  # no overflow


@pytest.mark.parametrize("n", [1, 4, 9, 19, 50])
def test_equal_weights_diagnostics_are_the_unweighted_counts(n):
    d = diagnose(np.full(n, 2.5), np.full(3, 2.5))
    assert d.ess == n and np.all(d.ess_test == n + 1)
    assert d.attainable_level == pytest.approx(n / (n + 1))
    assert d.max_weight == pytest.approx(1 / (n + 1))


def test_the_attainable_rule_with_equal_weights_is_the_unweighted_rule_exactly():
    """ESS >= 1/(1-c) at equal weights (ESS = n+1) iff n >= least_n(c), for every n and level, in exact arithmetic."""
    for c in (0.5, 0.8, 0.9, 0.95, 0.99, 2 / 3, 0.7):
        for n in range(1, 120):
            d = diagnose(np.ones(n), np.ones(1))
            ok = n >= least_n(c)
            if ok:
                check_attainable(d, [c])
            else:
                with pytest.raises(ValueError, match=r"too small for confidence level"):
                    check_attainable(d, [c])


def test_an_unattainable_level_names_the_attainable_one_or_warns():
    d = diagnose(np.ones(8), [1.0])  # ESS 9: up to 8/9
    with pytest.raises(ValueError, match=r"attainable level is 0\.8889 \(1 - 1/ESS\)"):
        check_attainable(d, [0.8, 0.9])
    with pytest.warns(calibprob.CalibprobWarning, match=r"attainable level is 0\.8889"):
        check_attainable(d, [0.9], on_small="warn")
    check_attainable(d, [0.9], on_small="ignore")
    with pytest.raises(ValueError, match=r"on_small must be one of"):
        check_attainable(d, [0.9], on_small="quiet")


def test_a_heavy_test_point_lowers_the_attainable_level():
    """ESS of the n + 1 masses: (W + t)^2 / (sum w^2 + t^2), computed by hand."""
    w, t = np.ones(20), np.array([1.0, 20.0])
    d = diagnose(w, t)
    assert d.ess_test.tolist() == pytest.approx([21.0, 40.0**2 / (20 + 400)])
    assert d.attainable_level == pytest.approx(1 - (20 + 400) / 40.0**2)
    assert d.max_weight == pytest.approx(0.5)


# ---------------------------------------------------------------------------
# the kinds
# ---------------------------------------------------------------------------


def test_decaying_weights_and_their_coverage_gap_bound():
    dw = DecayingWeights(0.9)
    w = dw.calibration(n=4)
    assert w.tolist() == pytest.approx([0.9**4, 0.9**3, 0.9**2, 0.9])
    assert dw.test(m=3).tolist() == [1.0, 1.0, 1.0]
    assert dw.coverage_gap_bound(w) is None
    assert dw.coverage_gap_bound(w, tv=0.0) == 0.0  # exchangeable: exact coverage
    assert dw.coverage_gap_bound(w, tv=1.0) == pytest.approx(w.sum() / (w.sum() + 1))
    lag = np.array([4, 3, 2, 1])
    assert dw.coverage_gap_bound(w, drift=0.01) == pytest.approx(np.sum(w * 0.02 * lag) / (w.sum() + 1))
    assert DecayingWeights(1.0).calibration(n=3).tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match=r"rho must be in \(0, 1\]; got 1.5"):
        DecayingWeights(1.5)
    with pytest.raises(ValueError, match=r"tv must lie in \[0, 1\]"):
        dw.coverage_gap_bound(w, tv=2.0)


def test_density_ratio_is_evaluated_and_needs_inputs():
    tilt = DensityRatio(lambda X: np.exp(X[:, 0]))
    X = np.array([[0.0], [np.log(3.0)]])
    assert tilt.calibration(X, n=2) == pytest.approx([1.0, 3.0])
    assert tilt.coverage_gap_bound(np.ones(2)) == 0.0
    with pytest.raises(ValueError, match=r"DensityRatio needs the calibration inputs.*weights=ratio\(X_cal\)"):
        tilt.calibration(n=2)
    with pytest.raises(TypeError, match=r"ratio must be a callable X -> weights; got ndarray"):
        DensityRatio(np.ones(3))
    bad = DensityRatio(lambda X: -np.ones(len(X)))
    with pytest.raises(ValueError, match=r"ratio\(X\) \(calibration\) must be non-negative"):
        bad.calibration(X, n=2)


@pytest.mark.seeded(1)
def test_likelihood_ratio_recovers_a_gaussian_shift(seed, record_property):
    """N(0,1) vs N(d,1): log w(x) = d x - d^2/2; the cross-fitted logistic slope is close to d (the draw's seed from
    the seed sweep, 1 in the default run)."""
    rng = np.random.default_rng(seed)
    d = 0.8
    X0, X1 = rng.normal(size=(1500, 1)), rng.normal(d, 1.0, size=(1500, 1))
    lr = LikelihoodRatio().fit(X0, X1)
    logw = np.log(lr.calibration(X0, n=1500))
    slope, intercept = np.polyfit(X0[:, 0], logw, 1)
    new = np.array([[0.0], [1.0]])
    new_logw = np.log(lr.test(new, m=2))
    record_property("slope_error", abs(slope - d))
    record_property("intercept_error", abs(intercept + d**2 / 2))
    record_property("new_row_error", float(np.max(np.abs(new_logw - [-(d**2) / 2, d - d**2 / 2]))))
    assert abs(slope - d) < 0.12 and abs(intercept + d**2 / 2) < 0.12
    # its own rows keep their cross-fitted values; new rows get the refitted classifier
    assert np.array_equal(lr.test(X1, m=1500), lr.test_weights_)
    assert new_logw == pytest.approx([-(d**2) / 2, d - d**2 / 2], abs=0.12)


def test_likelihood_ratio_oob_forest_and_clipping():
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(2)
    X0, X1 = rng.normal(size=(200, 2)), rng.normal(1.0, 1.0, size=(100, 2))
    lr = LikelihoodRatio(RandomForestClassifier(n_estimators=30), cv="oob").fit(X0, X1)
    w = np.r_[lr.calibration_weights_, lr.test_weights_] / (200 / 100)  # the odds p/(1-p)
    assert w.min() >= 0.01 / 0.99 - 1e-12 and w.max() <= 0.99 / 0.01 + 1e-9
    with pytest.raises(ValueError, match=r"cv='oob' needs a bagged classifier"):
        LikelihoodRatio(cv="oob").fit(X0, X1)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"classifier": object()}, TypeError, r"classifier must have fit and predict_proba"),
        ({"cv": 1}, ValueError, r"cv must be an int >= 2, None \(in-sample\) or 'oob'; got 1"),
        ({"clip": (0.5, 0.2)}, ValueError, r"clip must be \(lo, hi\) with 0 < lo < hi < 1"),
        ({"on_small": "loud"}, ValueError, r"on_small must be one of"),
    ],
)
def test_likelihood_ratio_bad_options(kwargs, exc, match):
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(exc, match=match):
        LikelihoodRatio(**kwargs).fit(X, X + 1)


def test_likelihood_ratio_misuse():
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match=r"LikelihoodRatio is not fitted: call fit"):
        LikelihoodRatio().calibration(n=20)
    lr = LikelihoodRatio().fit(X, X + 0.1)
    with pytest.raises(ValueError, match=r"fitted on 20 calibration rows but 5 calibration points"):
        lr.calibration(n=5)
    with pytest.raises(ValueError, match=r"X_test has 1 columns but X_calibration has 2"):
        LikelihoodRatio().fit(X, X[:, :1])


def test_a_perfectly_separating_classifier_gives_ess_about_one_and_is_refused():
    """Calibration inputs in [0, 1], test inputs in [5, 6]: every p clipped, ESS with the test mass about 1."""
    rng = np.random.default_rng(3)
    X0, X1 = rng.uniform(0, 1, size=(200, 1)), rng.uniform(5, 6, size=(50, 1))
    lr = LikelihoodRatio(cv=None).fit(X0, X1)
    d = lr.diagnose(lr.calibration(n=200), lr.test(m=50))
    assert d.ess_test.min() < 1.1 and d.attainable_level < 0.1
    with pytest.raises(ValueError, match=r"effective sample size is 1\.\d+ at the worst test point.*attainable level"):
        check_attainable(d, [0.9], lr.on_small)
