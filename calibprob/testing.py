r"""Check a calibrator against calibprob's contract: :func:`check_calibrator`, for your own calibrator too.

The checks that every calibrator of calibprob passes (``tests/test_common.py`` runs them over the registry),
public so that a third party registering its own calibrator (:func:`calibprob.registry.register_class`) can run
them on it, as scikit-learn's ``sklearn.utils.estimator_checks.check_estimator`` does for estimators. No
test framework is needed: a failing check raises :class:`CheckFailed` (an ``AssertionError``) whose message
starts with the check's name and the class.

Which checks run follows the calibrator's family (registered, or read from its ``fit`` signature): a
*distribution post-processor* (``fit(pred_cal, y_cal)``, ``predict(pred)``) or a *model-aware* calibrator
(``estimator=``, ``fit(X, y)`` / ``calibrate(X_cal, y_cal)``, ``predict(X)``); a *posterior* one (conformal
Bayes, fitted on a log-likelihood) is refused, its contract is its own.

The reference of the coverage checks is the method's guarantee, not a stored number: on a problem whose
base is over-confident (its standard deviation halved, so its 90 % intervals cover about 59 %), a calibrated
90 % interval covers at least :func:`coverage_limit` of the held-out points: the nominal 0.9 less
:data:`COVERAGE_SDS` = 4 standard deviations of a coverage measured on :math:`n_\mathrm{test}` points after
calibrating on :math:`n_\mathrm{cal}`, :math:`\sqrt{0.9 \cdot 0.1\,(1/n_\mathrm{test} + 1/n_\mathrm{cal})}`
(0.796 for the 200 calibration and 400 test points of :func:`make_problem`; 0.734 for a method calibrated
on its 60 training points). For a split method the coverage is at least 0.9 in expectation (Vovk et al.
2005, Thm. 2.2) and what a draw measures spreads by the sd above; the uncalibrated bases cover 0.53-0.72,
below every limit. An online recalibrator (``update``) is checked on the stream it has seen instead,
against its own ``coverage_bound()`` (Deshpande et al. 2024, Thm. 2), when it offers one.

Examples
--------
>>> import calibprob
>>> from calibprob.testing import check_calibrator
>>> check_calibrator(calibprob.SplitConformalCalibrator(score="normalized"))[:3]
['check_get_params', 'check_unfitted', 'check_fit_predict']
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
import xarray as xr

from calibprob import registry
from calibprob._core.estimator import clone
from calibprob.bases.linear import LinearRegression
from calibprob.metrics import evaluate, is_interval_family
from calibprob.predictive import from_draws, normal, validate
from calibprob.weights import weight_support

__all__ = [
    "CheckFailed",
    "check_calibrator",
    "coverage_limit",
    "make_problem",
    "COVERAGE_SDS",
    "POST_PROCESSOR_CHECKS",
    "MODEL_AWARE_CHECKS",
]

#: Standard deviations below the nominal level that ``check_coverage`` allows (:func:`coverage_limit`).
#: One-sided, a calibrated method falls below 4 sds with probability about 3.2e-5 (normal tail). calibprob's
#: own registry checks about 21 classes on 2 bases each, so the default run makes about 42 coverage checks and
#: the 20-seed sweep of the test problem (``make test-seeds``) about 840: 0.03 false failures expected in the
#: whole sweep, where 3 sds (tail 1.3e-3) would expect about one. A user checking one class makes 1 or 2.
COVERAGE_SDS = 4.0


def coverage_limit(n_cal: int, n_test: int, level: float = 0.9, sds: float = COVERAGE_SDS) -> float:
    r"""The least coverage :func:`check_calibrator` accepts of a calibrated ``level`` interval.

    .. math::

        c_\min = p - k \sqrt{p (1 - p) \Bigl(\frac{1}{n_\mathrm{test}} + \frac{1}{n_\mathrm{cal}}\Bigr)}

    with :math:`p` = ``level`` and :math:`k` = ``sds``. The coverage measured on :math:`n_\mathrm{test}`
    held-out points spreads about the interval's conditional coverage by the binomial
    :math:`p(1-p)/n_\mathrm{test}`; the conditional coverage of a split conformal interval itself spreads
    about :math:`p` over calibration sets by about :math:`p(1-p)/n_\mathrm{cal}` (it is
    :math:`\mathrm{Beta}(k, n_\mathrm{cal} + 1 - k)` with :math:`k = \lceil p(n_\mathrm{cal} + 1)\rceil`,
    Vovk 2012, Prop. 2a; Angelopoulos & Bates 2023, §3.2). The two are independent, so their variances add.

    Parameters
    ----------
    n_cal : int
        Calibration points (for a method calibrated on its training points, e.g. jackknife+, those).
    n_test : int
        Held-out points the coverage is measured on.
    level : float, default 0.9
        The nominal coverage.
    sds : float, default :data:`COVERAGE_SDS`

    Returns
    -------
    float

    References
    ----------
    Vovk, V. (2012). Conditional validity of inductive conformal predictors. ACML, PMLR 25, 475-490.
    Angelopoulos, A. N. and Bates, S. (2023). Conformal prediction: a gentle introduction. Found. Trends
    Mach. Learn. 16(4), 494-591.

    Examples
    --------
    >>> from calibprob.testing import coverage_limit
    >>> round(coverage_limit(200, 400), 3), round(coverage_limit(60, 400), 3)
    (0.796, 0.734)
    """
    for name, n in (("n_cal", n_cal), ("n_test", n_test)):
        if not (isinstance(n, (int, np.integer)) and n >= 1):
            raise ValueError(
                f"coverage_limit: {name} must be a positive integer; got {n!r}. Pass the number of points."
            )
    if not 0.0 < level < 1.0:
        raise ValueError(f"coverage_limit: level must be in (0, 1); got {level!r}. Pass e.g. 0.9.")
    if not sds >= 0:
        raise ValueError(f"coverage_limit: sds must be >= 0; got {sds!r}. Pass e.g. {COVERAGE_SDS}.")
    return float(level - sds * np.sqrt(level * (1.0 - level) * (1.0 / n_test + 1.0 / n_cal)))


class CheckFailed(AssertionError):
    """A check of :func:`check_calibrator` failed; the message names the check, the class and what went wrong."""


def make_problem(seed: int = 2026) -> dict[str, Any]:
    r"""The seeded regression problem the checks run on.

    :math:`x \sim U(-2, 2)`, :math:`y = \sin 2x + (0.2 + 0.3|x|)\,\varepsilon`,
    :math:`\varepsilon \sim N(0, 1)`: 60 training, 200 calibration and 400 test points. The
    post-processors' base is the truth made over-confident, :math:`N(\sin 2x, (0.1 + 0.15|x|)^2)`
    (``"normal"``), and the same as 1000 Student-t (5 degrees of freedom) draws (``"draws"``).

    Parameters
    ----------
    seed : int, default 2026

    Returns
    -------
    dict
        ``X_tr, y_tr, X_cal, y_cal, X_te, y_te`` (arrays) and ``"normal"``, ``"draws"``: each a pair
        (prediction on the calibration part, prediction on the test part). A caller may pass its own
        dict with these keys to :func:`check_calibrator` (e.g. a base fitted on ``X_tr``).
    """
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    for part, n in (("tr", 60), ("cal", 200), ("te", 400)):
        X = rng.uniform(-2.0, 2.0, size=(n, 1))
        out[f"X_{part}"] = X
        out[f"y_{part}"] = np.sin(2 * X[:, 0]) + (0.2 + 0.3 * np.abs(X[:, 0])) * rng.standard_normal(n)
    pairs: dict[str, list] = {"normal": [], "draws": []}
    for part in ("cal", "te"):
        x = out[f"X_{part}"][:, 0]
        mu, sd = np.sin(2 * x), 0.5 * (0.2 + 0.3 * np.abs(x))
        pairs["normal"].append(normal(mu, sd))
        pairs["draws"].append(from_draws(mu + sd * rng.standard_t(5, size=(1000, x.size))))
    out.update({k: tuple(v) for k, v in pairs.items()})
    return out


# ---------------------------------------------------------------------------------------------------------------
# the calibrator under check: its family, its lifecycle, its fits (cached: a check reuses the fit of another)
# ---------------------------------------------------------------------------------------------------------------


class _Subject:
    """The calibrator given to :func:`check_calibrator`, its family and the problem it is checked on."""

    def __init__(self, template: Any, problem: dict[str, Any]) -> None:
        self.template, self.problem = template, problem
        self.cls = type(template)
        self.name = self.cls.__name__
        self.family = _family(self.cls)
        self._fits: dict[str, Any] = {}
        #: What the checks measured (``coverage_normal``, ``coverage_draws``), given back by check_calibrator.
        self.measured: dict[str, float] = {}

    def fresh(self) -> Any:
        """An unfitted copy with the same parameters."""
        return clone(self.template)

    def fail(self, check: str, what: str) -> CheckFailed:
        return CheckFailed(f"{check} failed for {self.name}: {what}")

    def online(self) -> bool:
        return callable(getattr(self.cls, "update", None))

    def lifecycle(self) -> str:
        """How a model-aware calibrator is fitted: ``calibrate``, ``prefit``, ``training`` or ``calibration``."""
        if callable(getattr(self.cls, "calibrate", None)):
            return "calibrate"
        params = [
            p
            for p in list(inspect.signature(self.cls.fit).parameters.values())[1:]
            if p.kind is p.POSITIONAL_OR_KEYWORD
        ]
        if params and params[0].default is not inspect.Parameter.empty:
            return "prefit"
        entry = registry.CLASSES.get(self.name)
        return "training" if entry is not None and entry.output == "intervals" else "calibration"

    def calibration_size(self) -> int:
        """The points the calibrator is calibrated on: the calibration part, or the training part for a method
        calibrated on its own training points (jackknife+, CV+) or a prefit one (its estimator was fitted there)."""
        if self.family == "model-aware" and self.lifecycle() == "prefit":
            return int(np.size(self.problem["y_tr"]))
        return int(np.size(self.fit_data()[1] if self.family == "model-aware" else self.problem["y_cal"]))

    def fit_data(self) -> tuple[np.ndarray, np.ndarray]:
        p = self.problem
        return (p["X_tr"], p["y_tr"]) if self.lifecycle() == "training" else (p["X_cal"], p["y_cal"])

    def fit_model_aware(self, model: Any, X: Any = None, y: Any = None) -> Any:
        X_default, y_default = self.fit_data()
        X = X_default if X is None else X
        y = y_default if y is None else y
        step = self.lifecycle()
        if step == "calibrate":
            return model.calibrate(X, y)
        if step == "prefit":
            return model.fit()
        return model.fit(X, y)

    def fitted(self, kind: str = "normal") -> Any:
        """A fitted copy (on the ``kind`` base for a post-processor), fitted once per call of check_calibrator."""
        if kind not in self._fits:
            model = self.fresh()
            if self.family == "model-aware":
                returned = self.fit_model_aware(model)
            else:
                returned = model.fit(self.problem[kind][0], self.problem["y_cal"])
            if returned is not model:
                raise self.fail("check_fit_predict", f"fit returned {type(returned).__name__}, not self")
            self._fits[kind] = model
        return self._fits[kind]

    def predict_test(self, model: Any, kind: str = "normal") -> xr.Dataset:
        if self.family == "model-aware":
            return model.predict(self.problem["X_te"])
        return model.predict(self.problem[kind][1])


def _family(cls: type) -> str:
    """The registered family of ``cls``, or the one its ``fit`` signature says (``X`` first: model-aware)."""
    for entry in registry.CLASSES.values():
        if entry.name == cls.__name__ and entry.module == cls.__module__ and entry.role == "calibrator":
            return str(entry.family)
    fit = getattr(cls, "fit", None)
    params = list(inspect.signature(fit).parameters)[1:2] if callable(fit) else []
    return "model-aware" if params and params[0] in ("X", "X_cal") else "distribution"


def _values(pred: xr.Dataset) -> np.ndarray:
    """What a calibrator predicted, as one array: its quantiles, or its interval ends."""
    if is_interval_family(pred):
        return np.stack([pred["lower"].values, pred["upper"].values])
    return np.asarray(pred.calib.quantiles)


def _raises(call: Callable[[], Any], kinds: tuple[type[BaseException], ...]) -> BaseException | None:
    """The exception ``call`` raised if it is one of ``kinds``; None if it raised nothing."""
    try:
        call()
    except kinds as err:
        return err
    return None


# ---------------------------------------------------------------------------------------------------------------
# the checks: each takes the subject and raises CheckFailed naming itself
# ---------------------------------------------------------------------------------------------------------------


def check_get_params(s: _Subject) -> None:
    """``__init__`` stores each keyword under its own name; ``get_params`` returns them; ``clone`` keeps them."""
    if not callable(getattr(s.template, "get_params", None)):
        raise s.fail(
            "check_get_params", "no get_params(); subclass calibprob's BaseEstimator (calibprob._core.estimator)"
        )
    params = s.template.get_params()
    names = [
        p.name
        for p in list(inspect.signature(s.cls.__init__).parameters.values())[1:]
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if sorted(params) != sorted(names):
        raise s.fail("check_get_params", f"get_params() keys {sorted(params)} differ from __init__'s {sorted(names)}")
    for name in names:
        if getattr(s.template, name, object()) is not params[name]:
            raise s.fail("check_get_params", f"__init__ does not store {name!r} unchanged under self.{name}")
    again = s.fresh().get_params()
    if again.keys() != params.keys():
        raise s.fail("check_get_params", "clone() changed the parameter names")


def check_unfitted(s: _Subject) -> None:
    """``predict`` before ``fit`` raises an error saying it is not fitted (an online recalibrator starts fitted)."""
    if s.online():
        return
    X = s.problem["X_te"] if s.family == "model-aware" else s.problem["normal"][1]
    err = _raises(lambda: s.fresh().predict(X), (Exception,))
    if err is None or "fit" not in str(err).lower():
        raise s.fail("check_unfitted", f"predict before fit must raise an error naming fit; got {err!r}")


def check_fit_predict(s: _Subject) -> None:
    """``fit`` returns self; ``predict`` a Dataset of the contract (valid quantiles, or nested intervals), rows kept."""
    kinds = ("normal", "draws") if s.family == "distribution" else ("normal",)
    for kind in kinds:
        pred = s.predict_test(s.fitted(kind), kind)
        if not isinstance(pred, xr.Dataset):
            raise s.fail("check_fit_predict", f"predict returned {type(pred).__name__}, not an xarray.Dataset")
        if pred.sizes.get("obs") != s.problem["y_te"].size:
            raise s.fail("check_fit_predict", f"predict gave {pred.sizes.get('obs')} rows for {s.problem['y_te'].size}")
        if s.family == "distribution" and "obs" in pred.coords:
            if not np.array_equal(pred["obs"].values, s.problem[kind][1]["obs"].values):
                raise s.fail("check_fit_predict", "predict changed the obs labels of the base's prediction")
        if is_interval_family(pred):
            iv = pred.sel(confidence_level=pred["confidence_level"] >= 0.5)
            if not np.all(iv["lower"].values <= iv["upper"].values):
                raise s.fail("check_fit_predict", "an interval at a level >= 0.5 has lower > upper")
            continue
        try:
            validate(pred)
        except (TypeError, ValueError) as err:
            raise s.fail("check_fit_predict", f"the prediction breaks the data contract: {err}") from None
        if not np.all(np.diff(pred.calib.quantiles, axis=1) >= -1e-12):
            raise s.fail("check_fit_predict", "the predicted quantiles decrease along level")


def check_coverage(s: _Subject) -> None:
    """The guarantee: 90 % intervals cover >= coverage_limit() of the test points (module docstring)."""
    limit = coverage_limit(s.calibration_size(), int(np.size(s.problem["y_te"])))
    for kind in ("normal", "draws") if s.family == "distribution" else ("normal",):
        model = s.fitted(kind)
        if s.online():
            bound = getattr(model, "coverage_bound", None)
            if callable(bound) and not np.all(np.abs(model.coverage() - model.levels_) <= bound() + 1e-12):
                raise s.fail("check_coverage", "the stream coverage leaves the recalibrator's own coverage_bound()")
            continue
        pred = s.predict_test(model, kind)
        if is_interval_family(pred) and s.family == "model-aware":
            pred = model.predict(s.problem["X_te"], confidence_level=[0.9])
        got = evaluate(pred, s.problem["y_te"], confidence_level=[0.9])["coverage"].sel(confidence_level=0.9)
        s.measured[f"coverage_{kind}"] = float(got)
        if float(got) < limit:
            raise s.fail(
                "check_coverage",
                f"90 % intervals cover {float(got):.3f} of the test points on the {kind} base (>= {limit:.3f} "
                f"expected: 0.9 less {COVERAGE_SDS:g} sds of {s.calibration_size()} calibration and "
                f"{np.size(s.problem['y_te'])} test points)",
            )


def check_refuses_the_other_family(s: _Subject) -> None:
    """A post-processor refuses model inputs at ``fit``; a model-aware calibrator refuses a Dataset at ``predict``."""
    if s.family == "distribution":
        call = lambda: s.fresh().fit(s.problem["X_cal"], s.problem["y_cal"])  # noqa: E731
        what = "fit(X, y) with an input array X instead of the base's predictive Dataset"
    else:
        call = lambda: s.fitted().predict(s.problem["normal"][1])  # noqa: E731
        what = "predict(pred) with a predictive Dataset instead of inputs X"
    if _raises(call, (TypeError,)) is None:
        raise s.fail("check_refuses_the_other_family", f"{what} must raise a TypeError naming the fix")


def check_refuses_bad_targets(s: _Subject) -> None:
    """``y`` of the wrong length, or with a NaN, is refused with a ValueError before any work."""
    if s.family == "model-aware" and s.lifecycle() == "prefit":
        return  # fit() takes no data
    y = s.fit_data()[1] if s.family == "model-aware" else s.problem["y_cal"]
    for bad, what in ((y[:-3], "y three entries short"), (np.r_[y[:-1], np.nan], "y with a NaN")):
        if s.family == "model-aware":
            call = lambda bad=bad: s.fit_model_aware(s.fresh(), y=bad)  # noqa: E731
        else:
            call = lambda bad=bad: s.fresh().fit(s.problem["normal"][0], bad)  # noqa: E731
        if _raises(call, (ValueError,)) is None:
            raise s.fail("check_refuses_bad_targets", f"fit with {what} must raise a ValueError")


def check_pymc_observed_data(s: _Subject) -> None:
    """``y`` as PyMC's ``observed_data`` DataArray (dim ``obs_id``) fits exactly as the NumPy array."""
    if s.family != "distribution":
        return
    y = s.problem["y_cal"]
    y_da = xr.DataArray(y, dims=("obs_id",), coords={"obs_id": np.arange(1000, 1000 + y.size)}, name="y")
    pred_cal, pred_te = s.problem["normal"]
    a = s.fresh().fit(pred_cal, y).predict(pred_te)
    b = s.fresh().fit(pred_cal, y_da).predict(pred_te)
    if not np.array_equal(_values(a), _values(b)):
        raise s.fail("check_pymc_observed_data", "y as an obs_id DataArray predicts differently from the array")


def check_deterministic(s: _Subject) -> None:
    """A clone fitted on the same data predicts the same, bit for bit (seeded randomness only)."""
    model = s.fitted("normal")
    again = s.fresh()
    if s.family == "model-aware":
        s.fit_model_aware(again)
    else:
        again.fit(s.problem["normal"][0], s.problem["y_cal"])
    if not np.array_equal(_values(s.predict_test(again)), _values(s.predict_test(model)), equal_nan=True):
        raise s.fail("check_deterministic", "two fits with the same parameters and data predict differently")


def check_intervals_nest(s: _Subject) -> None:
    """The intervals at 0.5, 0.8 and 0.9 nest: a higher level never gives a shorter interval."""
    model = s.fitted("normal")
    pred = s.predict_test(model)
    if is_interval_family(pred):
        if s.family != "model-aware":
            return  # a post-processor's intervals come at its constructor's levels
        iv = model.predict(s.problem["X_te"], confidence_level=[0.5, 0.8, 0.9])
    else:
        iv = pred.calib.interval([0.5, 0.8, 0.9])
    lo = iv["lower"].transpose("obs", "confidence_level").values
    hi = iv["upper"].transpose("obs", "confidence_level").values
    if not (np.all(np.diff(lo, axis=1) <= 1e-9) and np.all(np.diff(hi, axis=1) >= -1e-9)):
        raise s.fail(
            "check_intervals_nest", "a higher confidence level gave an interval that does not contain a lower one's"
        )


def _dims_form(iv: xr.Dataset, scalar: bool) -> str | None:
    """What is wrong with the ``confidence_level`` dimension of ``iv`` for a scalar / sequence request, or None."""
    held = "confidence_level" in iv["lower"].dims
    if scalar and held:
        return "kept the confidence_level dimension"
    if not scalar and not held:
        return "dropped the confidence_level dimension"
    if "confidence_level" not in iv.coords:
        return "lost the confidence_level coordinate"
    return None


def _grouped_fit(s: _Subject) -> tuple[Any, dict[str, Any]] | None:
    """A copy fitted with two groups, and the keywords its predictions take; None when ``fit`` takes no groups."""
    if s.family != "distribution" or "groups" not in inspect.signature(s.cls.fit).parameters:
        return None
    n_cal, n_te = s.problem["y_cal"].size, s.problem["y_te"].size
    model = s.fresh().fit(s.problem["normal"][0], s.problem["y_cal"], groups=np.arange(n_cal) % 2)
    return model, {"groups": np.arange(n_te) % 2}


def check_level_dims(s: _Subject) -> None:
    """The interval family's one rule for the ``confidence_level`` dimension, grouped or not.

    ``predict_interval(x, c)`` with a scalar ``c`` drops the dimension and keeps ``c`` as a scalar coordinate
    (``calib.interval``'s and xarray's ``.sel`` convention), with a sequence keeps it, with no level follows the
    form of the constructor's ``confidence_level``; ``predict(x, confidence_level=c)`` always keeps it. Each of
    them is scored by :func:`~calibprob.metrics.evaluate` alike.
    """
    if not callable(getattr(s.cls, "predict_interval", None)):
        return
    default = s.template.get_params().get("confidence_level")
    c = float(np.atleast_1d(0.9 if default is None else default)[0])
    x = s.problem["X_te"] if s.family == "model-aware" else s.problem["normal"][1]
    fits: list[tuple[Any, dict[str, Any], str]] = [(s.fitted("normal"), {}, "")]
    grouped = _grouped_fit(s)
    if grouped is not None:
        fits.append((*grouped, " (grouped)"))
    for model, kw, how in fits:
        one, seq = model.predict_interval(x, c, **kw), model.predict_interval(x, [c], **kw)
        for iv, scalar, call in ((one, True, f"predict_interval(x, {c:g})"), (seq, False, f"[{c:g}]")):
            wrong = _dims_form(iv, scalar)
            if wrong:
                raise s.fail("check_level_dims", f"{call}{how} {wrong}")
        if default is not None and _dims_form(model.predict_interval(x, **kw), np.ndim(default) == 0):
            raise s.fail("check_level_dims", f"predict_interval(x){how} is not in the form of confidence_level")
        if "confidence_level" in inspect.signature(model.predict).parameters:
            if _dims_form(model.predict(x, confidence_level=c, **kw), False):
                raise s.fail("check_level_dims", f"predict(x, confidence_level={c:g}){how} dropped the dimension")
        cov = [float(evaluate(iv, s.problem["y_te"])["coverage"].squeeze()) for iv in (one, seq)]
        if cov[0] != cov[1]:
            raise s.fail("check_level_dims", f"evaluate scores predict_interval(x, {c:g}){how} unlike [{c:g}]")


def check_groups(s: _Subject) -> None:
    """``fit(..., groups=g)`` calibrates each group alone (Mondrian; Vovk, Gammerman & Shafer 2005, §4.5).

    The reference is the definition: on two groups (every other calibration and test point), each group's
    rows of the grouped prediction equal, to 1e-10, the prediction of the same calibrator fitted on that
    group's calibration points only. Run on a post-processor whose ``fit`` takes ``groups`` as Mondrian
    labels (conditional conformal's ``groups`` are the features of its quantile regression instead).
    """
    params = inspect.signature(s.cls.fit).parameters
    if s.family != "distribution" or "groups" not in params or "features" in params or s.online():
        return
    (pred_cal, pred_te), y = s.problem["normal"], s.problem["y_cal"]
    g_cal, g_te = np.arange(y.size) % 2, np.arange(pred_te.sizes["obs"]) % 2
    # quantile functions on one grid both ways (a default grid may depend on the number of scores)
    kw = {"levels": [0.1, 0.25, 0.5, 0.75, 0.9]} if "levels" in inspect.signature(s.cls.predict).parameters else {}
    got = _values(s.fresh().fit(pred_cal, y, groups=g_cal).predict(pred_te, groups=g_te, **kw))
    for k in (0, 1):
        alone = s.fresh().fit(pred_cal.isel(obs=g_cal == k), y[g_cal == k])
        want = _values(alone.predict(pred_te.isel(obs=g_te == k), **kw))
        rows = got[..., g_te == k, :]  # (obs, level) or (end, obs, confidence_level)
        if rows.shape != want.shape or not np.allclose(rows, want, rtol=0.0, atol=1e-10, equal_nan=True):
            raise s.fail("check_groups", f"group {k}'s rows differ from the calibrator fitted on group {k} alone")


def _weighted_output(s: _Subject, model: Any, support: str, weights: Any) -> np.ndarray:
    """What a (weighted) fit predicts: its intervals at its own levels where offered, else the quantiles."""
    pred_te = s.problem["normal"][1]
    kw = {"weights": weights} if support == "conformal" and weights is not None else {}
    if hasattr(model, "predict_interval"):
        return _values(model.predict_interval(pred_te, **kw))
    return _values(model.predict(pred_te, **kw))


def _fit_weighted(s: _Subject, pred_cal: xr.Dataset, y: np.ndarray, weights: np.ndarray) -> Any:
    return s.fresh().fit(pred_cal, y, weights=weights)


def check_weights(s: _Subject) -> None:
    """A calibrator that declares weight support: equal weights are the unweighted method, bad weights refused.

    Runs only where the class declares ``_weights_support`` (:func:`calibprob.weights.weight_support`):
    ``fit(pred_cal, y_cal, weights=)`` with every weight 0.37 (and, for a conformal one, the test points'
    weights 0.37 at prediction) predicts what the unweighted fit predicts, bit for bit (a weighted rule is
    invariant to a common factor); weights with a NaN, a negative or all zero raise a ValueError naming
    ``weights``.
    """
    support = weight_support(s.template)
    if support is None or s.family != "distribution":
        return
    pred_cal, y = s.problem["normal"][0], s.problem["y_cal"]
    n, m = y.size, s.problem["normal"][1].sizes["obs"]
    plain = _weighted_output(s, s.fitted("normal"), support, None)
    model = s.fresh().fit(pred_cal, y, weights=np.full(n, 0.37))
    if not np.array_equal(plain, _weighted_output(s, model, support, np.full(m, 0.37)), equal_nan=True):
        raise s.fail(
            "check_weights", "equal weights (0.37 everywhere) do not give the unweighted prediction bit for bit"
        )
    for bad, what in (
        (np.r_[np.nan, np.ones(n - 1)], "a NaN"),
        (np.r_[-1.0, np.ones(n - 1)], "a negative weight"),
        (np.zeros(n), "all-zero weights"),
    ):
        err = _raises(partial(_fit_weighted, s, pred_cal, y, bad), (ValueError,))
        if err is None or "weights" not in str(err):
            raise s.fail("check_weights", f"fit with {what} must raise a ValueError naming weights; got {err!r}")


#: The checks of a distribution post-processor, in the order they run.
POST_PROCESSOR_CHECKS: tuple[Callable[[_Subject], None], ...] = (
    check_get_params,
    check_unfitted,
    check_fit_predict,
    check_coverage,
    check_refuses_the_other_family,
    check_refuses_bad_targets,
    check_deterministic,
    check_pymc_observed_data,
    check_intervals_nest,
    check_level_dims,
    check_groups,
    check_weights,
)
#: The checks of a model-aware calibrator, in the order they run: the same, but for PyMC's observed data
#: (a model-aware calibrator takes inputs X, not a posterior predictive).
MODEL_AWARE_CHECKS: tuple[Callable[[_Subject], None], ...] = tuple(
    check for check in POST_PROCESSOR_CHECKS if check is not check_pymc_observed_data
)


def check_calibrator(
    calibrator: Any,
    *,
    problem: dict[str, Any] | None = None,
    checks: Sequence[str] | None = None,
    measured: dict[str, float] | None = None,
) -> list[str]:
    """Run calibprob's contract checks on a calibrator; raise :class:`CheckFailed` at the first that fails.

    Parameters
    ----------
    calibrator : class or instance
        The calibrator. A class is built with its defaults; a model-aware class whose constructor takes
        ``estimator`` is given ``calibprob.LinearRegression()`` fitted on the problem's training part, with
        ``prefit=True`` where the constructor offers it (pass an instance for other settings, e.g. a fitted
        GP). An instance is cloned for every fit, so it is never changed.
    problem : dict, optional
        The data (see :func:`make_problem`, the default).
    checks : sequence of str, optional
        Run only these checks (names of :data:`POST_PROCESSOR_CHECKS` / :data:`MODEL_AWARE_CHECKS`).
    measured : dict, optional
        Filled with what the checks measured, also when one fails: ``coverage_normal`` (and
        ``coverage_draws`` for a post-processor), the 90 % coverages ``check_coverage`` compared with
        :func:`coverage_limit`, so a margin can be read, not only a pass.

    Returns
    -------
    list of str
        The names of the checks that ran and passed.

    Raises
    ------
    CheckFailed
        A check failed: the message starts with its name and the class.
    TypeError
        ``calibrator`` is a posterior calibrator (fitted on a log-likelihood), or not a calibrator.
    """
    problem = make_problem() if problem is None else problem
    template = _instance(calibrator, problem)
    subject = _Subject(template, problem)
    if measured is not None:
        subject.measured = measured
    if subject.family not in ("distribution", "model-aware"):
        raise TypeError(
            f"check_calibrator checks distribution post-processors and model-aware calibrators; {subject.name} is "
            f"of family {subject.family!r} (fitted on a log-likelihood): use its own tests instead."
        )
    family_checks = POST_PROCESSOR_CHECKS if subject.family == "distribution" else MODEL_AWARE_CHECKS
    wanted = {c.__name__ for c in family_checks} if checks is None else set(checks)
    unknown = wanted - {c.__name__ for c in family_checks}
    if unknown:
        raise ValueError(
            f"checks holds {sorted(unknown)}, not checks of a {subject.family} calibrator; use some of "
            f"{[c.__name__ for c in family_checks]}."
        )
    ran = []
    for check in family_checks:
        if check.__name__ in wanted:
            try:
                check(subject)
            except CheckFailed:
                raise
            except Exception as err:  # an error the check did not ask for is that check's failure too
                raise subject.fail(check.__name__, f"{type(err).__name__}: {err}") from err
            ran.append(check.__name__)
    return ran


def _instance(calibrator: Any, problem: dict[str, Any]) -> Any:
    """The calibrator to check: an instance as given, or a class built with its defaults (see check_calibrator)."""
    if not isinstance(calibrator, type):
        if not callable(getattr(calibrator, "fit", None)):
            raise TypeError(f"calibrator must be a calibrator class or instance with fit(); got {calibrator!r}.")
        return calibrator
    if not callable(getattr(calibrator, "fit", None)):
        raise TypeError(f"calibrator must be a calibrator class with fit(); got {calibrator.__name__}.")
    params = inspect.signature(calibrator).parameters
    if _family(calibrator) == "model-aware" and "estimator" in params:
        # fitted on the training part; prefit=True where offered, so split conformal calibrates it as given
        kwargs = {"prefit": True} if "prefit" in params else {}
        return calibrator(estimator=LinearRegression().fit(problem["X_tr"], problem["y_tr"]), **kwargs)
    return calibrator()
