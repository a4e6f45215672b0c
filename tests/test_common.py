"""Every public calibrator through its family's contract (calibprob._core.estimator), and every base model through its own.

Two families, one shape each:

* distribution post-processors — ``fit(pred_cal, y_cal) -> self``,
  ``predict(pred) -> Dataset`` (the predictive contract), any predictive
  Dataset accepted (Gaussian, or a Student-t given as draws);
* model-aware calibrators — ``estimator=``, ``fit(X, y)`` (and
  ``calibrate(X_cal, y_cal)`` for split conformal), ``predict(X) -> Dataset``
  (a quantile function, or the interval family for intervals-only methods).

The family checks live in the package, public for third-party calibrators
(:func:`calibprob.testing.check_calibrator`, as scikit-learn's ``check_estimator``):
fit returns self and predict a Dataset of the right family, unfitted errors name
fit, each family refuses the other's input, y of the wrong length or with NaN is
refused, y as a DataArray with PyMC's ``obs_id`` dim is accepted, quantiles are
non-decreasing / intervals nested, the same seed gives the same prediction, and
``clone`` keeps the parameters. The independent reference of the coverage checks
is each method's guarantee: on a base whose standard deviation is halved (90 %
coverage below 0.8), every batch method covers at least 0.8 of 400 held-out points
at 90 %, and the online recalibrator's stream coverage is within its proven bound.
This file runs them over every registered calibrator, and checks calibprob's own
wording of the errors on top.

Which checks run, and how a calibrator is fitted, follow the registry's declared family and
output and the class's own signature (:func:`lifecycle`), never its name. Every base model
(role ``"base"``) goes through one contract: fit/predict shapes, a predictive Dataset that
validates, bad input refused naming the fix, the same prediction from the same seed, and a
save/load round trip (the PyMC bases, whose fits sample a posterior, with ``-m slow``).
"""

from __future__ import annotations

import inspect
import re
import warnings

import numpy as np
import pytest
import xarray as xr

import calibprob
from calibprob import registry
from calibprob._core.estimator import DistributionCalibrator, ModelAwareCalibrator, NotFittedError
from calibprob.metrics import is_interval_family
from calibprob.testing import MODEL_AWARE_CHECKS, POST_PROCESSOR_CHECKS, CheckFailed, check_calibrator, coverage_limit
from tests.support.bases import BASES, X_TE, X_TR, Y_TR, build_base, fitted_base, samples_posterior

# ---------------------------------------------------------------------------
# data: y = sin(2x) + noise whose sd grows with |x|
# ---------------------------------------------------------------------------


def _data(n, rng):
    X = rng.uniform(-2.0, 2.0, size=(n, 1))
    y = np.sin(2 * X[:, 0]) + (0.2 + 0.3 * np.abs(X[:, 0])) * rng.standard_normal(n)
    return X, y


# the default run's draw of the problem (the sweep draws seeds 0..19 in test_*_passes_check_calibrator)
PROBLEM_SEED = 2026


@pytest.fixture(scope="module")
def problem():
    return _problem(PROBLEM_SEED)


@pytest.fixture(scope="module")
def seeded_problem(seed, problem):
    """The problem drawn at the seed sweep's ``seed`` (the module's own ``problem`` at the default seed 2026)."""
    return problem if seed == PROBLEM_SEED else _problem(seed)


def _problem(seed):
    """60 training, 200 calibration, 400 test points; a GP fitted on the training part, its bases made over-confident."""
    rng = np.random.default_rng(seed)
    X_tr, y_tr = _data(60, rng)
    X_cal, y_cal = _data(200, rng)
    X_te, y_te = _data(400, rng)
    gp = calibprob.GaussianProcessRegressor(random_state=0).fit(X_tr, y_tr)
    # an over-confident Gaussian base (sd halved) and the same base as Student-t draws
    mu_c, sd_c = gp.predict_mean_std(X_cal)
    mu_t, sd_t = gp.predict_mean_std(X_te)
    t_rng = np.random.default_rng(7)
    draws_c = mu_c + 0.5 * sd_c * t_rng.standard_t(5, size=(3000, mu_c.size))
    draws_t = mu_t + 0.5 * sd_t * t_rng.standard_t(5, size=(3000, mu_t.size))
    return {
        "X_tr": X_tr,
        "y_tr": y_tr,
        "X_cal": X_cal,
        "y_cal": y_cal,
        "X_te": X_te,
        "y_te": y_te,
        "gp": gp,
        "normal": (calibprob.normal(mu_c, 0.5 * sd_c), calibprob.normal(mu_t, 0.5 * sd_t)),
        "draws": (calibprob.from_draws(draws_c), calibprob.from_draws(draws_t)),
    }


# ---------------------------------------------------------------------------
# every calibrator class of calibprob.registry (the one source), built with the cheapest
# honest settings: a class without an entry below is built with its defaults (a model-aware
# one with estimator= the fitted GP), so a newly registered calibrator is checked at once.
# SETTINGS only builds instances (as scikit-learn's per-estimator check parameters do); which
# checks run, and how each is fitted, follows the registry's family and output (see lifecycle)
# ---------------------------------------------------------------------------


def _pymc_glm(p):
    """A small NUTS fit on the training part, fitted once per module (the LOO jackknife+ needs a posterior)."""
    if "pymc" not in p:
        p["pymc"] = calibprob.PyMCLinearRegression(draws=300, tune=300, random_state=0).fit(p["X_tr"], p["y_tr"])
    return p["pymc"]


SETTINGS = {
    "IsotonicRecalibrator": lambda p: {"extrapolate": True},
    "VovkRecalibrator": lambda p: {"extrapolate": True, "random_state": 0},
    "MarxRecalibrator": lambda p: {"extrapolate": True},
    "GPBetaCalibrator": lambda p: {"inference": "map", "n_inducing": 8, "random_state": 0},
    "SplitConformalCalibrator": lambda p: {"score": "normalized"},
    "SharpCalibratedGP": lambda p: {"estimator": p["gp"], "variant": "scaled", "n_levels": 5, "random_state": 0},
    "SplitConformalRegressor": lambda p: {"estimator": p["gp"], "score": "normalized", "prefit": True},
    # the Mondrian checks calibrate groups of 3 and 12 points: the burn-in must fit in each
    "ConformalPIDInterval": lambda p: {"burnin": 3},
    "CrossConformalRegressor": lambda p: {"estimator": calibprob.LinearRegression(), "cv": 5, "random_state": 0},
    "JackknifePlusGP": lambda p: {"estimator": p["gp"], "prefit": True},
    "FullConformalGP": lambda p: {"estimator": p["gp"], "prefit": True},
    "LOOJackknifePlus": lambda p: {"estimator": _pymc_glm(p), "random_state": 0},
}


def _factory(name):
    entry = registry.CLASSES[name]

    def make(p):
        kwargs = SETTINGS.get(name, lambda p: {})(p)
        if entry.family == "model-aware":
            kwargs.setdefault("estimator", p["gp"])
        return entry.load()(**kwargs)

    return make


def _calibrators(family):
    return {
        name: _factory(name) for name, e in registry.CLASSES.items() if e.role == "calibrator" and e.family == family
    }


POST_PROCESSORS = _calibrators("distribution")
MODEL_AWARE = _calibrators("model-aware")
#: fitted on a posterior's log-likelihood (conformal Bayes): contract tested in its own test file
POSTERIOR = _calibrators("posterior")
#: calibprob's own classes: calibprob.load restores only these (never code named in a file)
SAVABLE = set(registry.builtin_classes())


def lifecycle(name) -> str:
    """How a model-aware calibrator is fitted, read from its declared family and output and its own signature
    (the tags of scikit-learn's estimator checks), never from its name:

    * ``"calibrate"`` -- it has ``calibrate(X_cal, y_cal)``: the fitted base is given (``prefit``), and the
      calibration part calibrates it (split conformal);
    * ``"prefit"`` -- ``fit()`` takes no data (its ``X`` is optional): it reads the fitted GP it was given;
    * ``"training"`` -- an intervals-only model-aware method fitted on ``X, y`` (jackknife, CV+, LOO
      jackknife+): its guarantee is over the training points it leaves out, so it gets the training part;
    * ``"calibration"`` -- otherwise: ``fit(X_cal, y_cal)`` on the calibration part.
    """
    entry = registry.CLASSES[name]
    cls = entry.load()
    data = [p for p in list(inspect.signature(cls.fit).parameters.values())[1:] if p.kind is p.POSITIONAL_OR_KEYWORD]
    if callable(getattr(cls, "calibrate", None)):
        return "calibrate"
    if data and data[0].default is not inspect.Parameter.empty:
        return "prefit"
    if entry.output == "intervals":
        return "training"
    return "calibration"


def _fit_data(name, p):
    """The (X, y) a model-aware calibrator's lifecycle fits on."""
    return (p["X_tr"], p["y_tr"]) if lifecycle(name) == "training" else (p["X_cal"], p["y_cal"])


def _fit_model_aware(name, model, p, X=None, y=None):
    """The family's lifecycle (see :func:`lifecycle`), on the given data or the problem's part."""
    X_default, y_default = _fit_data(name, p)
    X = X_default if X is None else X
    y = y_default if y is None else y
    step = lifecycle(name)
    if step == "calibrate":
        return model.calibrate(X, y)
    if step == "prefit":
        return model.fit()
    return model.fit(X, y)


def _is_online(name) -> bool:
    """An online recalibrator (``update`` on each new observation): its guarantee is on the stream it has seen."""
    return callable(getattr(registry.CLASSES[name].load(), "update", None))


def test_the_registry_covers_every_public_calibrator():
    """Every public calibrator is registered (and so checked below); every registered one is exported."""
    from calibprob import calibrators
    from calibprob.calibrators import conformal, online

    public = set()
    for mod in (calibrators, conformal, online):
        for name in mod.__all__:
            obj = getattr(mod, name)
            entry = registry.CLASSES.get(name)
            if isinstance(obj, type) and hasattr(obj, "fit") and (entry is None or entry.role != "helper"):
                public.add(name)  # a helper (a user's function as a base) is no calibrator
    builtin = {n for n in set(POST_PROCESSORS) | set(MODEL_AWARE) | set(POSTERIOR) if n in SAVABLE}
    assert public == builtin
    # the registered family is the class's lifecycle: a model-aware fit takes inputs X, a
    # post-processor's the base's prediction (pred_cal, or the online recalibrator's forecast)
    for name in public:
        params = list(inspect.signature(registry.CLASSES[name].load().fit).parameters)
        family = registry.CLASSES[name].family
        assert (params[1] in ("X", "X_cal")) == (family == "model-aware"), (name, params)


# ---------------------------------------------------------------------------
# distribution post-processors
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fitted_post(problem):
    out = {}
    for name, make in POST_PROCESSORS.items():
        for kind in ("normal", "draws"):
            pred_cal, _ = problem[kind]
            cal = make(problem)
            assert cal.fit(pred_cal, problem["y_cal"]) is cal
            out[name, kind] = cal
    return out


def _record_coverage(record_property, measured, n_cal, n_test):
    """The sweep's statistics: the least coverage the checks measured and its margin over the limit, in sds."""
    got = min(measured.values())
    sd = np.sqrt(0.09 * (1 / n_cal + 1 / n_test))
    record_property("coverage", got)
    record_property("coverage_sds_below_0.9", (0.9 - got) / sd)


#: (class, sweep seed) where a calibrator without a finite-sample guarantee falls below check_coverage's limit: an
#: open question of the method, asserted to fail so that a fix shows (the other checks still run there).
#: GP-Beta at seed 1: 0.780 on the 400 test points (4.6 sds below 0.9; the default ADVI fit 0.803), where it
#: covers 0.895 of its own 200 calibration points and split conformal 0.878 of the same test points: its
#: calibration map, fitted on the base's predictions, does not carry its coverage to new points on this draw.
COVERAGE_SHORTFALLS = {("GPBetaCalibrator", 1)}


@pytest.mark.seeded(PROBLEM_SEED, scope="module")
@pytest.mark.parametrize("name", sorted(POST_PROCESSORS))
def test_post_processor_passes_check_calibrator(name, seed, seeded_problem, record_property):
    """The public checks (calibprob.testing.check_calibrator) on every registered post-processor, on this problem.

    The sweep's ``seed`` draws the problem (2026 in the default run): check_coverage's limit is 4 sds of the
    200 calibration and 400 test points below 0.9 (calibprob.testing.coverage_limit).
    """
    problem = seeded_problem
    n_cal, n_test = problem["y_cal"].size, problem["y_te"].size
    base = calibprob.evaluate(problem["normal"][1], problem["y_te"], confidence_level=[0.9])
    record_property("base_coverage", float(base["coverage"].sel(confidence_level=0.9)))
    # the base needs calibrating: coverage means it (the Student-t draws base covers up to 0.80, so only the normal)
    assert float(base["coverage"].sel(confidence_level=0.9)) < coverage_limit(n_cal, n_test)
    cal = POST_PROCESSORS[name](problem)
    assert isinstance(cal, DistributionCalibrator)
    checks = [c.__name__ for c in POST_PROCESSOR_CHECKS]
    measured = {}
    try:
        if (name, seed) in COVERAGE_SHORTFALLS:
            with pytest.raises(CheckFailed, match=rf"^check_coverage failed for {name}: "):
                check_calibrator(cal, problem=problem, checks=["check_coverage"], measured=measured)
            checks.remove("check_coverage")
        assert check_calibrator(cal, problem=problem, checks=checks, measured=measured) == checks
    finally:
        if measured:
            _record_coverage(record_property, measured, n_cal, n_test)


def _values(pred):
    """What a post-processor predicted, as one array: its quantiles, or its interval ends."""
    if is_interval_family(pred):
        return np.stack([pred["lower"].values, pred["upper"].values])
    return pred.calib.quantiles


def _starts_at_identity(name) -> bool:
    """An online recalibrator with ``reset()``: no unfitted state, it starts from the identity map."""
    return _is_online(name) and callable(getattr(registry.CLASSES[name].load(), "reset", None))


#: Combinations beyond each class's defaults that the public checks run on too (issue 40): conditional conformal
#: with the normalised score, CQR with a two-rank variant (its Mondrian form: check_groups, on every class), and
#: CQR inside CV+ (the CQR score on each refit's quantile pair, a model-aware calibrator).
COMBINATIONS = {
    "conditional x normalized": lambda: calibprob.ConditionalConformal(score="normalized"),
    "cqr x asymmetric": lambda: calibprob.ConformalizedQuantileRegression(score="asymmetric"),
    "cqr x cv+": lambda: calibprob.CrossConformalRegressor(
        estimator=calibprob.LinearRegression(), score="cqr", cv=5, random_state=0
    ),
}


@pytest.mark.parametrize("combo", sorted(COMBINATIONS))
def test_combinations_pass_check_calibrator(combo, problem):
    """The registry's common checks (calibprob.testing.check_calibrator) on the combinations of COMBINATIONS."""
    calibrator = COMBINATIONS[combo]()
    checks = MODEL_AWARE_CHECKS if isinstance(calibrator, ModelAwareCalibrator) else POST_PROCESSOR_CHECKS
    assert check_calibrator(calibrator, problem=problem) == [c.__name__ for c in checks]


@pytest.mark.parametrize("name", sorted(POST_PROCESSORS))
def test_post_processor_messages_follow_the_house_rules(name, problem):
    """Beyond the public checks, calibprob's own wording: the error names the method, the argument and the fix."""
    pred_cal, pred_te = problem["normal"]
    y = problem["y_cal"]
    make = POST_PROCESSORS[name]
    if not _starts_at_identity(name):  # the online recalibrator starts from R_1(p) = p; ACI needs its scores first
        with pytest.raises(NotFittedError, match=r"not fitted yet"):
            make(problem).predict(pred_te)
    with pytest.raises(TypeError, match=r"distribution post-processor: .* must be the base model's predictive"):
        make(problem).fit(problem["X_cal"], y)
    with pytest.raises(ValueError, match=r"mismatched lengths|length|entries"):
        make(problem).fit(pred_cal, y[:-3])
    with pytest.raises(ValueError, match="finite"):
        make(problem).fit(pred_cal, np.r_[y[:-1], np.nan])


# ---------------------------------------------------------------------------
# model-aware calibrators
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fitted_aware(problem):
    out = {}
    for name, make in MODEL_AWARE.items():
        model = make(problem)
        assert _fit_model_aware(name, model, problem) is model
        out[name] = model
    return out


@pytest.mark.parametrize("name", sorted(MODEL_AWARE))
def test_evaluate_scores_an_interval_only_prediction_at_its_own_levels(name, problem, fitted_aware):
    """No level demanded: an interval-only output is scored where it was predicted, the IAE said unavailable."""
    model = fitted_aware[name]
    if not is_interval_family(model.predict(problem["X_te"])):
        pytest.skip(f"{name} returns a quantile function")
    pred = model.predict(problem["X_te"], confidence_level=[0.8, 0.9])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not one warning about levels nobody asked for
        m = calibprob.evaluate(pred, problem["y_te"])
    assert m["coverage"]["confidence_level"].values.tolist() == [0.8, 0.9]
    lo, hi = (pred[k].transpose("obs", "confidence_level").values for k in ("lower", "upper"))
    y = np.asarray(problem["y_te"])[:, None]
    np.testing.assert_array_equal(m["coverage"].values, ((y >= lo) & (y <= hi)).mean(axis=0))
    assert np.isnan(float(m["iae"])) and "interval_levels()" in m["iae"].attrs["not_available"]
    with pytest.raises(ValueError, match=r"intervals lack confidence_level=0.5; they hold 0.8, 0.9\. Ask for those"):
        calibprob.evaluate(pred, problem["y_te"], confidence_level=[0.5])


@pytest.mark.seeded(PROBLEM_SEED, scope="module")
@pytest.mark.parametrize("name", sorted(MODEL_AWARE))
def test_model_aware_passes_check_calibrator(name, seeded_problem, record_property):
    """The public checks on every registered model-aware calibrator; the current names raise no deprecation.

    The sweep's ``seed`` draws the problem (2026 in the default run); a method calibrated on the GP's 60 training
    points (jackknife+, full conformal) is held to 4 sds of those and the 400 test points.
    """
    problem = seeded_problem
    measured = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        model = MODEL_AWARE[name](problem)
        try:
            ran = check_calibrator(model, problem=problem, measured=measured)
        finally:
            if measured:
                n_cal = problem["y_tr"].size if lifecycle(name) in ("training", "prefit") else problem["y_cal"].size
                _record_coverage(record_property, measured, n_cal, problem["y_te"].size)
    assert isinstance(model, ModelAwareCalibrator) and ran == [c.__name__ for c in MODEL_AWARE_CHECKS]


@pytest.mark.parametrize("name", sorted(MODEL_AWARE))
def test_model_aware_messages_follow_the_house_rules(name, problem, fitted_aware):
    """calibprob's own wording: not fitted, the family refused naming the fix, bad targets named."""
    with pytest.raises(NotFittedError, match=r"not fitted yet"):
        MODEL_AWARE[name](problem).predict(problem["X_te"])
    with pytest.raises(TypeError, match="model-aware calibrator: X must be the model's inputs"):
        fitted_aware[name].predict(problem["normal"][1])
    if lifecycle(name) == "prefit":
        return  # fit() takes no data
    X, y = _fit_data(name, problem)
    with pytest.raises(TypeError, match="model-aware calibrator"):
        _fit_model_aware(name, MODEL_AWARE[name](problem), problem, X=problem["normal"][0], y=y)
    with pytest.raises(ValueError, match=r"mismatched lengths|length"):
        _fit_model_aware(name, MODEL_AWARE[name](problem), problem, X=X, y=y[:-3])
    with pytest.raises(ValueError, match="finite"):
        _fit_model_aware(name, MODEL_AWARE[name](problem), problem, X=X, y=np.r_[y[:-1], np.nan])


# ---------------------------------------------------------------------------
# save / load (netCDF, no pickle; the new-process round trip is in test_io.py)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(set(POST_PROCESSORS) & SAVABLE))
def test_post_processor_save_load_round_trip(name, problem, fitted_post, tmp_path):
    cal = fitted_post[name, "draws"]
    path = tmp_path / f"{name}.nc"
    cal.save(path)
    assert path.read_bytes()[:8] == b"\x89HDF\r\n\x1a\n"
    back = calibprob.load(path)
    assert type(back) is type(cal) and back.get_params().keys() == cal.get_params().keys()
    pred_te = problem["draws"][1]
    np.testing.assert_allclose(_values(back.predict(pred_te)), _values(cal.predict(pred_te)), rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", sorted(set(MODEL_AWARE) & SAVABLE))
def test_model_aware_save_load_round_trip(name, problem, fitted_aware, tmp_path):
    model = fitted_aware[name]
    path = tmp_path / f"{name}.nc"
    model.save(path)
    assert path.read_bytes()[:8] == b"\x89HDF\r\n\x1a\n"
    back = calibprob.load(path)
    a, b = back.predict(problem["X_te"]), model.predict(problem["X_te"])
    xr.testing.assert_allclose(a, b, rtol=0, atol=1e-10)


# ---------------------------------------------------------------------------
# base models: every class of role "base" in the registry, built by constructor parameter
# (tests.support.bases.BASE_FAST). The PyMC bases (a posterior to sample) run with -m slow.
# ---------------------------------------------------------------------------


def _base_params(names):
    return [pytest.param(n, marks=[pytest.mark.slow] if samples_posterior(n) else []) for n in names]


@pytest.mark.parametrize("name", _base_params(BASES))
def test_base_fit_predict_contract(name):
    """fit returns self; predict gives one row per input row as a predictive Dataset that validates."""
    model = build_base(name)
    assert model.fit(X_TR, Y_TR) is model
    pred = model.predict(X_TE)
    assert isinstance(pred, xr.Dataset) and pred.sizes["obs"] == len(X_TE)
    calibprob.validate(pred)
    assert pred.attrs["family"] in ("normal", "quantile")
    q = pred.calib.quantiles
    assert np.all(np.isfinite(q)) and np.all(np.diff(q, axis=1) >= 0)
    iv = pred.calib.interval([0.5, 0.9])
    assert np.all(iv["lower"].values <= iv["upper"].values)


@pytest.mark.parametrize("name", BASES)
def test_base_refuses_bad_input_and_predicting_unfitted(name):
    """No fit needed: the checks run before any work, and name the argument and the fix."""
    with pytest.raises(NotFittedError, match=rf"This {name} instance is not fitted yet\. Call fit"):
        build_base(name).predict(X_TE)
    with pytest.raises(ValueError, match=r"y must be finite; got 1 non-finite value.*Drop or impute"):
        build_base(name).fit(X_TR, np.r_[Y_TR[:-1], np.nan])
    with pytest.raises(ValueError, match=r"X must be 2-D; got an array of shape \(30,\)\. .*reshape\(-1, 1\)"):
        build_base(name).fit(X_TR[:, 0], Y_TR)


@pytest.mark.parametrize("name", _base_params(BASES))
def test_base_is_deterministic_given_its_seed(name):
    """Two fits with the same settings (and seed, where the base has one) predict the same, bit for bit."""
    xr.testing.assert_identical(build_base(name).fit(X_TR, Y_TR).predict(X_TE), fitted_base(name).predict(X_TE))


@pytest.mark.parametrize("name", _base_params(BASES))
def test_base_save_load_round_trip(name, tmp_path):
    """A saved base loads and predicts the same; state a file cannot hold without pickle (a third-party model)
    is named by the load error with the keyword to pass it again, and passing it restores the base."""
    model = fitted_base(name)
    path = tmp_path / f"{name}.nc"
    model.save(path)
    try:
        back = calibprob.load(path)
    except ValueError as err:
        found = re.search(r"pass the object\(s\) again: calibprob\.load\(path, (.*)\)\.$", str(err))
        assert found, str(err)
        keys = [k.split("=")[0].strip() for k in found.group(1).split(",")]
        back = calibprob.load(path, **{k: getattr(model, k) for k in keys})
    assert type(back) is type(model) and back.get_params().keys() == model.get_params().keys()
    xr.testing.assert_allclose(back.predict(X_TE), model.predict(X_TE), rtol=0, atol=1e-10)


# ---------------------------------------------------------------------------
# groups: every post-processor per group, each level on its own (issue 35)
# ---------------------------------------------------------------------------


def _grouped(n, sizes=(3, 12)):
    """Labels: a tiny group, a small one (resolves 0.8, not 0.98), the rest split in two large groups."""
    small = np.concatenate([np.full(s, f"small{s}") for s in sizes])
    rest = np.where(np.arange(n - small.size) % 2 == 0, "a", "b")
    return np.concatenate([small, rest])


@pytest.mark.parametrize("fallback", [None, "pooled"])
@pytest.mark.parametrize("name", sorted(POST_PROCESSORS))
def test_mondrian_levels_are_independent(name, fallback, problem):
    """Adding a level to the request leaves every other level's intervals bitwise unchanged.

    Asked at fit (the Mondrian's ``confidence_level``) and at predict; a group too small for
    0.98 falls back (pooled or infinite) at 0.98 only, and ``fit`` warns once, with the table.
    """
    pred_cal, pred_te = problem["normal"]
    g_cal = _grouped(pred_cal.sizes["obs"])
    g_te = np.resize(np.array(["small3", "small12", "a", "b"]), pred_te.sizes["obs"])
    out = {}
    for request in ([0.8], [0.8, 0.98]):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m = calibprob.Mondrian(POST_PROCESSORS[name](problem), fallback=fallback, confidence_level=request)
            m.fit(pred_cal, problem["y_cal"], groups=g_cal)
        small = [w for w in caught if "below the minimum group size" in str(w.message)]
        assert len(small) == (1 if m.small_groups_ else 0)  # one warning per call, not one per group
        for label, _, missed in m.small_groups_:
            assert f"group {label!r} has" in str(small[0].message)
            assert all(f"{c:g} needs {k}" in str(small[0].message) for c, k in missed)
        out[tuple(request)] = m, m.predict_interval(pred_te, request, groups=g_te)
    m1, iv1 = out[(0.8,)]
    m2, iv2 = out[(0.8, 0.98)]
    for end in ("lower", "upper"):
        np.testing.assert_array_equal(
            iv1[end].sel(confidence_level=0.8).values, iv2[end].sel(confidence_level=0.8).values
        )
        np.testing.assert_array_equal(
            m2.predict_interval(pred_te, 0.8, groups=g_te)[end].values, iv2[end].sel(confidence_level=0.8).values
        )
    # the 12-point group: its own calibrator at every level its size resolves, the fallback only at the others
    rows = g_te == "small12"
    need = dict(zip(m2.confidence_levels_.tolist(), m2.min_sizes_.tolist()))
    for c in (0.8, 0.98):
        own = 12 >= need[c] or (m2._extrapolates() and fallback is None)
        if fallback == "pooled":
            assert bool(iv2["mondrian_pooled"].sel(confidence_level=c).values[rows].any()) is not own
        elif not own:
            assert np.all(np.isinf(iv2["lower"].sel(confidence_level=c).values[rows]))


def _takes_groups(name) -> bool:
    """``fit(..., groups=)`` meaning Mondrian (per group); conditional conformal's ``groups`` are its LP's features."""
    params = inspect.signature(registry.CLASSES[name].load().fit).parameters
    return "groups" in params and "features" not in params


@pytest.mark.parametrize("name", sorted(n for n in POST_PROCESSORS if _takes_groups(n)))
def test_groups_is_the_mondrian_wrapper(name, problem):
    """``cls(...).fit(..., groups=g)`` is ``Mondrian(cls(...))``, bit for bit: one way to say it, one code path."""
    pred_cal, pred_te = problem["normal"]
    g_cal = _grouped(pred_cal.sizes["obs"], sizes=(12,))
    g_te = np.resize(np.array(["small12", "a", "b"]), pred_te.sizes["obs"])
    make = POST_PROCESSORS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", calibprob.CalibprobWarning)
        direct = make(problem).fit(pred_cal, problem["y_cal"], groups=g_cal)
        wrapped = calibprob.Mondrian(make(problem)).fit(pred_cal, problem["y_cal"], groups=g_cal)
        np.testing.assert_array_equal(
            _values(direct.predict(pred_te, groups=g_te)), _values(wrapped.predict(pred_te, groups=g_te))
        )
    if hasattr(direct, "predict_interval"):
        a = direct.predict_interval(pred_te, groups=g_te)
        assert a.identical(wrapped.predict_interval(pred_te, groups=g_te))
