"""The calibrator kinds a comparison spec can name, and the base models.

Each kind is a function ``(ctx, **options) -> Dataset on ctx.X_test``
registered with its allowed option names. It runs its calibrator through the
one contract of its family (:mod:`calibprob._base`): a distribution
post-processor through :func:`post_process` (``fit(pred_cal, y_cal)``,
``predict(pred)``), a model-aware calibrator with ``estimator=`` the task's
base, ``fit(X, y)``, ``predict(X)``. The result is a predictive Dataset or,
for intervals-only methods, the interval family; :func:`calibprob.evaluate`
scores both. The :class:`TaskContext` carries the
split data and the base model fitted once per task, shared by every method of
that task. Calibrator modules are imported lazily so a spec that does not use
them never pays for them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import xarray as xr

__all__ = [
    "TaskContext",
    "MethodKind",
    "METHOD_KINDS",
    "register",
    "make_base",
    "base_predictive",
    "calibration_prediction",
    "post_process",
]


@dataclass
class TaskContext:
    """Everything a calibrator needs inside one (data set, repetition) task.

    ``X_cal``/``y_cal`` are ``None`` when the spec's split has no calibration
    part (protocols that calibrate in-sample, e.g. Song et al. 2019).
    """

    X_train: np.ndarray
    y_train: np.ndarray
    X_cal: np.ndarray | None
    y_cal: np.ndarray | None
    X_test: np.ndarray
    base: object  # fitted base following the base-regressor protocol
    base_spec: dict
    levels: np.ndarray | None
    seed: int
    confidence_levels: tuple = (0.5, 0.8, 0.9, 0.95, 0.99)

    def new_base(self):
        """A fresh, unfitted copy of the base model (for methods that refit it)."""
        return make_base(self.base_spec, seed=self.seed)

    def predict_base(self, X) -> xr.Dataset:
        """The fitted base's predictive distribution at ``X`` (see :func:`base_predictive`)."""
        return base_predictive(self.base, X, levels=self.levels)

    @property
    def calibration(self) -> tuple[np.ndarray, np.ndarray]:
        """The calibration data, falling back to the training data when there is none."""
        if self.X_cal is None:
            return self.X_train, self.y_train
        return self.X_cal, self.y_cal


def base_predictive(base, X, *, levels=None) -> xr.Dataset:
    """A fitted base model's predictive distribution at ``X``, as the contract's Dataset.

    A base's ``predict(X, levels=...)`` is used when it returns a Dataset (every
    calibprob base does; so can a user's own model, e.g. a PyMC model wrapped to
    return :func:`calibprob.from_draws` of its posterior predictive). A base that
    only follows the minimal Gaussian protocol ``predict_mean_std(X) -> (mu, sigma)``
    becomes :func:`calibprob.normal`.
    """
    from calibprob.predictive import normal

    predict = getattr(base, "predict", None)
    if predict is not None:
        out = predict(X, levels=levels) if levels is not None else predict(X)
        if isinstance(out, xr.Dataset):
            return out
    if hasattr(base, "predict_mean_std"):
        mu, sigma = base.predict_mean_std(X)
        return normal(mu, sigma, levels=levels)
    raise TypeError(
        f"the base model {type(base).__name__} must have predict(X) returning a predictive Dataset, "
        "or predict_mean_std(X) returning (mu, sigma)."
    )


@dataclass(frozen=True)
class MethodKind:
    """A registered calibrator kind: the function and the option names it accepts."""

    name: str
    func: Callable[..., xr.Dataset]
    options: frozenset
    doc: str = ""


METHOD_KINDS: dict[str, MethodKind] = {}


def register(name: str, options=(), doc: str = ""):
    """Decorator registering a calibrator kind under ``name`` with its allowed options."""

    def deco(func):
        METHOD_KINDS[name] = MethodKind(name, func, frozenset(options), doc or (func.__doc__ or "").strip())
        return func

    return deco


def make_base(base_spec: dict, *, seed: int | None = None):
    """Build an unfitted base model from a spec's ``[base]`` table."""
    options = {k: v for k, v in base_spec.items() if k != "kind"}
    kind = base_spec["kind"]
    if kind == "gp":
        from calibprob.gp import GaussianProcessRegressor

        options.setdefault("random_state", seed)
        return GaussianProcessRegressor(**options)
    if kind == "sparse-gp":
        from calibprob.gp import SparseGaussianProcessRegressor

        options.setdefault("random_state", seed)
        return SparseGaussianProcessRegressor(**options)
    if kind == "ols":
        from calibprob.linear import LinearRegression

        return LinearRegression(**options)
    if kind == "bayesian-ridge":
        from calibprob.linear import BayesianRidge

        return BayesianRidge(**options)
    if kind == "pymc-glm":
        from calibprob.pymc_glm import PyMCLinearRegression

        options.setdefault("random_state", seed)
        return PyMCLinearRegression(**options)
    raise ValueError(f"unknown base kind {kind!r}")


@register("base", options=(), doc="The uncalibrated base model's Gaussian predictive distribution.")
def _base(ctx: TaskContext) -> xr.Dataset:
    """The uncalibrated base model (B in Capone et al. 2023)."""
    return ctx.predict_base(ctx.X_test)


# ---------------------------------------------------------------------------
# The two calibrator families, run the one way each (calibprob._base)
# ---------------------------------------------------------------------------


def calibration_prediction(ctx: TaskContext, calibration_data: str = "in-sample") -> tuple[xr.Dataset, np.ndarray]:
    """The base's predictive Dataset on the calibration data, and the targets.

    With a calibration split, its part as is. Without one (protocols that
    calibrate on the training part, e.g. Song et al. 2019), ``"in-sample"``
    uses the base's predictions at its own training points; ``"loo"`` its
    closed-form leave-one-out predictions (``ctx.base.loo()``, GP bases) — in-sample
    GP predictions are overfitted (residuals shrunk, σ too small relative to
    them); ``"auto"`` LOO when the base offers it, else in-sample.
    """
    from calibprob._validation import check_choice
    from calibprob.predictive import normal

    check_choice(calibration_data, "calibration_data", ("auto", "in-sample", "loo"))
    X_cal, y_cal = ctx.calibration
    in_sample = ctx.X_cal is None
    has_loo = callable(getattr(ctx.base, "loo", None))
    if calibration_data == "loo" and not (in_sample and has_loo):
        raise ValueError(
            "calibration_data='loo' needs a base with a loo() method (e.g. kind 'gp') and a spec without a "
            "calibration split; use 'auto' or 'in-sample'."
        )
    if in_sample and has_loo and calibration_data in ("auto", "loo"):
        return normal(*ctx.base.loo(), levels=ctx.levels), y_cal
    return ctx.predict_base(X_cal), y_cal


def post_process(ctx: TaskContext, calibrator, *, calibration_data: str = "in-sample") -> xr.Dataset:
    """Run a distribution post-processor: ``fit(pred_cal, y_cal)``, then ``predict(pred_test)``."""
    pred_cal, y_cal = calibration_prediction(ctx, calibration_data)
    calibrator.fit(pred_cal, y_cal)
    pred_test = ctx.predict_base(ctx.X_test)
    if ctx.levels is None:
        return calibrator.predict(pred_test)
    return calibrator.predict(pred_test, levels=ctx.levels)


def interval_levels_reachable(ctx: TaskContext, n: int, sides: int) -> tuple[np.ndarray, np.ndarray]:
    """The spec's interval levels, and those that ``n`` conformal scores resolve (the others come back unbounded)."""
    from calibprob.conformal._common import reachable_levels
    from calibprob.metrics import interval_levels

    levels = interval_levels(ctx.confidence_levels)
    ok = reachable_levels(levels, n, sides=sides)
    if not ok.any():
        raise ValueError(f"{n} points resolve none of the confidence levels {levels.tolist()}.")
    return levels, levels[ok]


# ---------------------------------------------------------------------------
# Recalibration baselines (Capone et al. 2023 §7: RK, RV, RM) and variance scaling
# ---------------------------------------------------------------------------


@register(
    "isotonic",
    options=("extrapolate",),
    doc="Kuleshov et al. 2018 isotonic recalibration of the base's PIT values (RK).",
)
def _isotonic(ctx: TaskContext, *, extrapolate: bool = False) -> xr.Dataset:
    from calibprob.calibrators import IsotonicRecalibrator

    return post_process(ctx, IsotonicRecalibrator(extrapolate=extrapolate))


@register(
    "vovk",
    options=("extrapolate", "random_state"),
    doc="Vovk's randomized conformal calibrator of the base's PIT values (RV).",
)
def _vovk(ctx: TaskContext, *, extrapolate: bool = False, random_state=None) -> xr.Dataset:
    from calibprob.calibrators import VovkRecalibrator

    rs = ctx.seed if random_state is None else random_state  # seeded by the task
    return post_process(ctx, VovkRecalibrator(extrapolate=extrapolate, random_state=rs))


@register(
    "marx", options=("center", "extrapolate"), doc="Marx et al. 2022 constant offsets around the base's mean (RM)."
)
def _marx(ctx: TaskContext, *, center: str = "mean", extrapolate: bool = False) -> xr.Dataset:
    from calibprob.calibrators import MarxRecalibrator

    return post_process(ctx, MarxRecalibrator(center=center, extrapolate=extrapolate))


@register(
    "variance-scaling", options=(), doc="One factor on the base's standard deviation, fitted by calibration-set NLL."
)
def _variance_scaling(ctx: TaskContext) -> xr.Dataset:
    from calibprob.calibrators import VarianceScalingRecalibrator

    return post_process(ctx, VarianceScalingRecalibrator())


# ---------------------------------------------------------------------------
# Conformal calibrators (Pion & Vazquez 2024 and the methods it builds on)
# ---------------------------------------------------------------------------


def _need_calibration_split(ctx: TaskContext, kind: str):
    if ctx.X_cal is None:
        raise ValueError(
            f"kind {kind!r} needs a calibration part: give the spec's split a 'calibrate' fraction "
            "(e.g. split = {train = 0.6, calibrate = 0.2, test = 0.2})."
        )
    return ctx.X_cal, ctx.y_cal


@register(
    "split-conformal",
    options=("score", "beta", "eps"),
    doc="Split conformal around the base's predictive mean on the calibration part; a conformal quantile function.",
)
def _split_conformal(ctx: TaskContext, *, score: str = "absolute", beta: float = 1.0, eps: float = 0.0):
    from calibprob.conformal import SplitConformalCalibrator

    _need_calibration_split(ctx, "split-conformal")
    return post_process(ctx, SplitConformalCalibrator(score=score, beta=beta, eps=eps, confidence_level=0.5))


@register(
    "conformal-predictive",
    options=("normalize", "beta", "eps"),
    doc="Split conformal predictive system (Vovk et al. 2020): a full predictive CDF per test point.",
)
def _conformal_predictive(ctx: TaskContext, *, normalize: bool = True, beta: float = 1.0, eps: float = 0.0):
    from calibprob.conformal import ConformalPredictiveSystem

    _need_calibration_split(ctx, "conformal-predictive")
    return post_process(ctx, ConformalPredictiveSystem(normalize=normalize, beta=beta, eps=eps, confidence_level=0.5))


def _cross_conformal(ctx: TaskContext, *, method: str, cv, score: str, beta: float, eps: float):
    from calibprob.conformal import CrossConformalRegressor
    from calibprob.conformal.scores import get_score

    sides = 1 if get_score(score, beta=beta, eps=eps).symmetric else 2
    levels, ok = interval_levels_reachable(ctx, len(ctx.y_train), sides)
    model = CrossConformalRegressor(
        estimator=ctx.new_base(),
        method=method,
        cv=cv,
        score=score,
        beta=beta,
        eps=eps,
        confidence_level=ok,
        random_state=ctx.seed,
    )
    return model.fit(ctx.X_train, ctx.y_train).predict(ctx.X_test, confidence_level=levels)


@register(
    "jackknife",
    options=("score", "beta", "eps"),
    doc="Jackknife (Pion eq. 6): leave-one-out residuals around the full-data fit; n refits.",
)
def _jackknife(ctx: TaskContext, *, score: str = "absolute", beta: float = 1.0, eps: float = 0.0):
    return _cross_conformal(ctx, method="base", cv="loo", score=score, beta=beta, eps=eps)


@register(
    "jackknife-plus",
    options=("score", "beta", "eps"),
    doc="Jackknife+ (Barber et al. 2021): n refits of the base, coverage >= 2c - 1.",
)
def _jackknife_plus(ctx: TaskContext, *, score: str = "absolute", beta: float = 1.0, eps: float = 0.0):
    return _cross_conformal(ctx, method="plus", cv="loo", score=score, beta=beta, eps=eps)


@register("cv-plus", options=("folds", "score", "beta", "eps"), doc="CV+ (Barber et al. 2021): K refits of the base.")
def _cv_plus(ctx: TaskContext, *, folds: int = 10, score: str = "absolute", beta: float = 1.0, eps: float = 0.0):
    return _cross_conformal(ctx, method="plus", cv=int(folds), score=score, beta=beta, eps=eps)


def _gp_conformal(ctx: TaskContext, cls_name: str, sides: int, **options):
    from calibprob import conformal

    levels, ok = interval_levels_reachable(ctx, len(ctx.y_train), sides)
    model = getattr(conformal, cls_name)(estimator=ctx.base, prefit=True, confidence_level=ok, **options)
    return model.fit().predict(ctx.X_test, confidence_level=levels)


@register(
    "jackknife-plus-gp",
    options=("beta", "eps", "refit_mean"),
    doc="J+GP (Pion eq. 11-12): jackknife+ with normalised scores from the GP's closed-form LOO.",
)
def _jackknife_plus_gp(ctx: TaskContext, *, beta: float = 1.0, eps: float = 0.0, refit_mean: bool = True):
    return _gp_conformal(ctx, "JackknifePlusGP", 1, score="normalized", beta=beta, eps=eps, refit_mean=refit_mean)


@register(
    "asym-jackknife-plus-gp",
    options=("beta", "eps", "refit_mean", "convention"),
    doc="asymJ+GP (Pion eq. 13-14): signed normalised LOO scores, one rank per tail.",
)
def _asym_jackknife_plus_gp(
    ctx: TaskContext, *, beta: float = 1.0, eps: float = 0.0, refit_mean: bool = True, convention: str = "barber"
):
    return _gp_conformal(
        ctx, "JackknifePlusGP", 2, score="signed", beta=beta, eps=eps, refit_mean=refit_mean, convention=convention
    )


@register(
    "full-conformal-gp",
    options=("beta", "eps", "refit_mean"),
    doc="Full-conformal GP (Papadopoulos 2023; Pion eq. 9-10): exact, no candidate grid.",
)
def _full_conformal_gp(ctx: TaskContext, *, beta: float = 1.0, eps: float = 0.0, refit_mean: bool = True):
    return _gp_conformal(ctx, "FullConformalGP", 1, beta=beta, eps=eps, refit_mean=refit_mean)


# ---------------------------------------------------------------------------
# Bayesian calibrators
# ---------------------------------------------------------------------------


def _register_gp_beta():
    # The option list lives with the model; importing it is cheap (no PyMC import at module level
    # would be cheaper still, but the spec validator needs the names).
    from calibprob.calibrators.gp_beta import RUN_OPTIONS

    options = (*RUN_OPTIONS, "calibration_data")

    @register("gp-beta", options=options, doc="GP-Beta distribution calibration (Song et al. 2019), a PyMC model.")
    def _gp_beta(ctx: TaskContext, *, calibration_data: str = "auto", **opts) -> xr.Dataset:
        """GP-Beta on the base's predictive Dataset; ``calibration_data`` as in :func:`calibration_prediction`."""
        from calibprob.calibrators import GPBetaCalibrator

        opts.setdefault("random_state", ctx.seed)
        return post_process(ctx, GPBetaCalibrator(**opts), calibration_data=calibration_data)


_register_gp_beta()


@register(
    "sharp-gp",
    options=(
        "variant",
        "n_levels",
        "include_noise",
        "fit_noise",
        "n_restarts",
        "prior_sd",
        "fit_fraction",
        "n_train_subset",
        "maxiter",
    ),
    doc="Sharp calibrated GP (Capone et al. 2023), calibration hyperparameters by MAP per level.",
)
def _sharp_gp(ctx: TaskContext, **opts) -> xr.Dataset:
    """The sharp GP around the task's fitted GP base, fitted on the calibration data (model-aware)."""
    from calibprob.calibrators import SharpCalibratedGP

    X_cal, y_cal = ctx.calibration
    model = SharpCalibratedGP(estimator=ctx.base, random_state=ctx.seed, **opts).fit(X_cal, y_cal)
    return model.predict(ctx.X_test, levels=ctx.levels)
