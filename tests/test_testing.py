"""``calibprob.testing.check_calibrator``: a correct third-party calibrator passes, and each check catches its flaw.

Two toy calibrators written as a third party would (public API only, registered through the registry):
``ToyScaling`` (a distribution post-processor: the Gaussian base's sd times the conformal quantile of the
standardised residuals, Vovk et al. 2005's split conformal on the score :math:`|y - \\mu|/\\sigma`) and ``ToySplit``
(model-aware: split conformal intervals around a fitted model). Each passes every check; each ``Broken*`` subclass
breaks one property, and the full run fails at exactly that check (``match=`` on its name): every earlier check
still passes, so the check that fails is the one that catches the flaw, not an earlier accident.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import calibprob
from calibprob import registry
from calibprob.predictive import from_intervals
from calibprob.testing import (
    COVERAGE_SDS,
    MODEL_AWARE_CHECKS,
    POST_PROCESSOR_CHECKS,
    CheckFailed,
    check_calibrator,
    coverage_limit,
    make_problem,
)


def _conformal_quantile(scores: np.ndarray, c: float) -> float:
    """The ceil(c (n + 1))-th smallest score (the split conformal threshold)."""
    k = int(np.ceil(c * (scores.size + 1)))
    return float(np.sort(scores)[min(k, scores.size) - 1])


def _targets(y, n: int) -> np.ndarray:
    y = np.asarray(y, float)
    if y.shape != (n,):
        raise ValueError(f"y must hold {n} values, one per observation; got shape {y.shape}.")
    if not np.isfinite(y).all():
        raise ValueError("y must be finite; drop the NaN rows.")
    return y


class ToyScaling:
    """A distribution post-processor: ``normal(mu, s * sd)`` with ``s`` the conformal quantile of |z| / z_{0.95}."""

    def __init__(self, *, level: float = 0.9):
        self.level = level

    def get_params(self) -> dict:
        return {"level": self.level}

    def set_params(self, **params):
        for k, v in params.items():
            setattr(self, k, v)
        return self

    def _read(self, pred) -> tuple[np.ndarray, np.ndarray]:
        if not isinstance(pred, xr.Dataset):
            raise TypeError(f"pred must be the base's predictive xarray.Dataset; got {type(pred).__name__}.")
        return pred.calib.mean().values, pred.calib.std().values

    def _y(self, y_cal, n: int) -> np.ndarray:
        return _targets(y_cal, n)

    def fit(self, pred_cal, y_cal):
        mu, sd = self._read(pred_cal)
        y = self._y(y_cal, mu.size)
        self.scale_ = _conformal_quantile(np.abs(y - mu) / sd, self.level) / 1.6448536269514722
        return self

    def _scale(self) -> float:
        if not hasattr(self, "scale_"):
            raise calibprob.NotFittedError(f"This {type(self).__name__} is not fitted yet; call fit first.")
        return self.scale_

    def predict(self, pred):
        mu, sd = self._read(pred)
        return calibprob.normal(mu, self._scale() * sd)


class ToySplit:
    """Model-aware: ``estimator`` fitted beforehand; ``fit(X_cal, y_cal)`` takes the residual quantiles."""

    def __init__(self, *, estimator=None, confidence_level=0.9):
        self.estimator = estimator
        self.confidence_level = confidence_level

    def get_params(self) -> dict:
        return {"estimator": self.estimator, "confidence_level": self.confidence_level}

    def set_params(self, **params):
        for k, v in params.items():
            setattr(self, k, v)
        return self

    def _mu(self, X) -> np.ndarray:
        if isinstance(X, xr.Dataset):
            raise TypeError("X must be the model's inputs (an array), not a predictive Dataset; pass X.")
        return self.estimator.predict(np.asarray(X, float)).calib.mean().values

    def fit(self, X, y):
        mu = self._mu(X)
        self.residuals_ = np.sort(np.abs(_targets(y, mu.size) - mu))
        return self

    def _widths(self, levels: np.ndarray) -> np.ndarray:
        return np.array([_conformal_quantile(self.residuals_, c) for c in levels])

    def predict(self, X, confidence_level=None):
        if not hasattr(self, "residuals_"):
            raise calibprob.NotFittedError(f"This {type(self).__name__} is not fitted yet; call fit first.")
        levels = np.atleast_1d(np.asarray(self.confidence_level if confidence_level is None else confidence_level))
        mu = self._mu(X)[:, None]
        q = self._widths(levels)[None, :]
        return from_intervals(mu - q, mu + q, levels)


# --- one flaw each ----------------------------------------------------------------------------------------------


class BrokenParams(ToyScaling):
    def __init__(self, *, level: float = 0.9, floor: float = 0.0):
        super().__init__(level=level)  # floor is neither stored nor in get_params: clone would lose it


class BrokenUnfitted(ToyScaling):
    def _scale(self) -> float:
        return getattr(self, "scale_", 1.0)  # an unfitted predict silently uses 1


class BrokenFitReturn(ToyScaling):
    def fit(self, pred_cal, y_cal):
        super().fit(pred_cal, y_cal)
        return None


class BrokenCoverage(ToyScaling):
    def _scale(self) -> float:
        return super()._scale() * 0.4  # over-confident


class BrokenFamily(ToyScaling):
    def _read(self, pred):
        if isinstance(pred, np.ndarray):  # takes model inputs for a prediction: X as the mean, unit sd
            return pred[:, 0], np.ones(pred.shape[0])
        return super()._read(pred)


class BrokenTargets(ToyScaling):
    def _y(self, y_cal, n):
        y = np.asarray(y_cal, float)[:n]
        return np.resize(np.nan_to_num(y), n)  # no check: a short or NaN y is silently used


class BrokenObservedData(ToyScaling):
    def _y(self, y_cal, n):
        if isinstance(y_cal, xr.DataArray):  # reads PyMC's observed data in reverse
            return _targets(y_cal.values[::-1], n)
        return super()._y(y_cal, n)


class BrokenDeterminism(ToyScaling):
    def fit(self, pred_cal, y_cal):
        super().fit(pred_cal, y_cal)
        self.scale_ *= 1.0 + 1e-3 * np.random.default_rng().random()  # unseeded
        return self


class BrokenNesting(ToySplit):
    def _widths(self, levels):
        q90 = _conformal_quantile(self.residuals_, 0.9)
        return np.where(levels >= 0.85, np.array([_conformal_quantile(self.residuals_, c) for c in levels]), 2 * q90)


class BrokenWeights(ToyScaling):
    """Declares weight support, but its weighted fit moves with the weights' scale and takes NaN silently."""

    _weights_support = "loss"

    def fit(self, pred_cal, y_cal, weights=None):
        super().fit(pred_cal, y_cal)
        if weights is not None:
            self.scale_ *= float(np.nanmean(weights)) ** 0.01
        return self


class BrokenLevelDims(ToyScaling):
    """An interval method whose scalar level keeps the ``confidence_level`` dimension (the rule drops it)."""

    def predict_interval(self, pred, confidence_level=0.9):
        levels = np.atleast_1d(np.asarray(confidence_level, float))  # a scalar becomes a length-1 dimension
        mu, sd = self._read(pred)
        half = self._scale() * sd[:, None] * _normal_ppf((1.0 + levels) / 2.0)[None, :]
        return from_intervals(mu[:, None] - half, mu[:, None] + half, levels)


class BrokenGroups(ToyScaling):
    """Takes ``groups=`` but pools them: one scale for every group instead of one per group."""

    def fit(self, pred_cal, y_cal, groups=None):
        return super().fit(pred_cal, y_cal)

    def predict(self, pred, groups=None):
        return super().predict(pred)


def _normal_ppf(p: np.ndarray) -> np.ndarray:
    from scipy.stats import norm

    return norm.ppf(p)


POST_FLAWS = {
    "check_get_params": BrokenParams,
    "check_unfitted": BrokenUnfitted,
    "check_fit_predict": BrokenFitReturn,
    "check_coverage": BrokenCoverage,
    "check_refuses_the_other_family": BrokenFamily,
    "check_refuses_bad_targets": BrokenTargets,
    "check_pymc_observed_data": BrokenObservedData,
    "check_deterministic": BrokenDeterminism,
    "check_level_dims": BrokenLevelDims,
    "check_groups": BrokenGroups,
    "check_weights": BrokenWeights,
}


@pytest.fixture(scope="module")
def problem():
    return make_problem()


@pytest.fixture(scope="module")
def model_problem(problem):
    return problem | {"estimator": calibprob.LinearRegression().fit(problem["X_tr"], problem["y_tr"])}


def test_every_check_has_a_flaw_it_catches():
    """The list below covers every check of both families (nesting is the model-aware toy's)."""
    names = {c.__name__ for c in (*POST_PROCESSOR_CHECKS, *MODEL_AWARE_CHECKS)}
    assert names == set(POST_FLAWS) | {"check_intervals_nest"}


def test_a_correct_post_processor_passes_every_check(problem):
    assert check_calibrator(ToyScaling(), problem=problem) == [c.__name__ for c in POST_PROCESSOR_CHECKS]
    checks = check_calibrator(ToyScaling, problem=problem)  # a class: built with defaults
    assert checks[checks.index("check_intervals_nest") :] == [
        "check_intervals_nest",
        "check_level_dims",
        "check_groups",
        "check_weights",
    ]


def test_a_correct_model_aware_calibrator_passes_every_check(model_problem):
    toy = ToySplit(estimator=model_problem["estimator"])
    assert check_calibrator(toy, problem=model_problem) == [c.__name__ for c in MODEL_AWARE_CHECKS]


@pytest.mark.parametrize("check", sorted(POST_FLAWS))
def test_each_check_catches_its_flaw(check, problem):
    broken = POST_FLAWS[check]
    with pytest.raises(CheckFailed, match=rf"^{check} failed for {broken.__name__}: "):
        check_calibrator(broken(), problem=problem)
    # and only that check: run without it, every other check passes
    others = [c.__name__ for c in POST_PROCESSOR_CHECKS if c.__name__ != check]
    # (not for a fit that returns None: every later check fits; nor for unseeded fits: the observed-data check
    # compares two fits as well)
    if check not in ("check_fit_predict", "check_deterministic"):
        assert check_calibrator(broken(), problem=problem, checks=others) == others


def test_the_nesting_check_catches_intervals_that_shrink_with_the_level(model_problem):
    broken = BrokenNesting(estimator=model_problem["estimator"])
    with pytest.raises(CheckFailed, match=r"^check_intervals_nest failed for BrokenNesting: "):
        check_calibrator(broken, problem=model_problem)


def test_a_registered_third_party_calibrator_is_checked_by_its_family(problem):
    """Registered through the registry, the toy is listed and checked like calibprob's own."""
    registry.register_class(f"{__name__}:ToyScaling", role="calibrator", family="distribution", output="distribution")
    try:
        assert "ToyScaling" in [name for name, *_ in calibprob.list_calibrators()]
        assert check_calibrator(ToyScaling(), problem=problem)[-1] == "check_weights"
    finally:
        registry.CLASSES.pop("ToyScaling")


def test_bad_arguments_are_refused():
    with pytest.raises(TypeError, match=r"calibrator must be a calibrator class or instance with fit\(\); got 3"):
        check_calibrator(3)
    with pytest.raises(ValueError, match=r"checks holds \['check_nothing'\].*use some of"):
        check_calibrator(ToyScaling(), checks=["check_nothing"])
    with pytest.raises(TypeError, match=r"ConformalBayes is of family 'posterior'"):
        check_calibrator(calibprob.ConformalBayes())


# --- check_coverage's limit ---------------------------------------------------------------------------------------


class Uncalibrated(ToyScaling):
    def _scale(self) -> float:
        super()._scale()
        return 1.0  # the base as it is


def test_coverage_limit_is_four_sds_of_the_calibration_and_test_points():
    """Closed form, and the sd it rests on against exact split conformal over 20 000 calibration / test draws.

    With exchangeable continuous scores the split threshold at 0.9 is the k-th of n_cal uniforms,
    k = ceil(0.9 (n_cal + 1)) (its conditional coverage is Beta(k, n_cal + 1 - k)), and the test coverage is
    Binomial(n_test, that) / n_test: its sd must be sqrt(0.09 (1/n_test + 1/n_cal)) to within a few percent.
    """
    assert COVERAGE_SDS == 4.0
    assert coverage_limit(200, 400) == pytest.approx(0.9 - 4 * np.sqrt(0.09 * (1 / 400 + 1 / 200)), abs=1e-15)
    assert coverage_limit(60, 400) == pytest.approx(0.73386, abs=1e-5)
    assert coverage_limit(200, 400, level=0.8, sds=0) == 0.8
    rng = np.random.default_rng(0)
    for n_cal, n_test in ((200, 400), (60, 400)):
        k = int(np.ceil(0.9 * (n_cal + 1)))
        cover = rng.beta(k, n_cal + 1 - k, size=20_000)  # the k-th order statistic of n_cal uniforms
        got = rng.binomial(n_test, cover) / n_test
        sd = (0.9 - coverage_limit(n_cal, n_test)) / 4
        assert abs(got.std() / sd - 1) < 0.06, (n_cal, got.std(), sd)
        assert abs(got.mean() - k / (n_cal + 1)) < 4 * got.std() / np.sqrt(got.size)


def test_an_uncalibrated_base_fails_check_coverage(problem):
    """The base itself (sd halved) fails the check (the limit stays a real check)."""
    measured = {}
    with pytest.raises(
        CheckFailed,
        match=r"^check_coverage failed for Uncalibrated: 90 % intervals cover 0\.\d+ .*\(>= 0\.796 expected",
    ):
        check_calibrator(Uncalibrated(), problem=problem, measured=measured)
    assert measured["coverage_normal"] < coverage_limit(200, 400)


@pytest.mark.slow
def test_the_bases_of_make_problem_fail_the_limit_at_every_seed(record_property):
    """The over-confident bases cover below the limit at every seed 0..19 of make_problem, both of them."""
    worst = 0.0
    for seed in range(20):
        p = make_problem(seed)
        for kind in ("normal", "draws"):
            got = calibprob.evaluate(p[kind][1], p["y_te"], confidence_level=[0.9])["coverage"]
            worst = max(worst, float(got.sel(confidence_level=0.9)))
    record_property("base_coverage", worst)
    assert worst < coverage_limit(200, 400), worst


def test_measured_holds_the_coverages_of_a_passing_calibrator(problem):
    measured = {}
    check_calibrator(ToyScaling(), problem=problem, checks=["check_coverage"], measured=measured)
    assert set(measured) == {"coverage_normal", "coverage_draws"}
    assert all(coverage_limit(200, 400) <= v <= 1 for v in measured.values())


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_cal": 0, "n_test": 400}, r"n_cal must be a positive integer; got 0\. Pass the number of points"),
        ({"n_cal": 200, "n_test": 2.5}, r"n_test must be a positive integer; got 2\.5"),
        ({"n_cal": 200, "n_test": 400, "level": 1.0}, r"level must be in \(0, 1\); got 1\.0\. Pass e\.g\. 0\.9"),
        ({"n_cal": 200, "n_test": 400, "sds": -1.0}, r"sds must be >= 0; got -1\.0"),
    ],
)
def test_coverage_limit_refuses_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        coverage_limit(**kwargs)
