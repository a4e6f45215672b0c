"""The calibrator kinds a comparison spec can name, and the base models.

Each kind is a function ``(ctx, **options) -> predictive Dataset on ctx.X_test``
registered with its allowed option names. The :class:`TaskContext` carries the
split data and the base model fitted once per task, shared by every method of
that task. Calibrator modules are imported lazily so a spec that does not use
them never pays for them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import xarray as xr

__all__ = ["TaskContext", "MethodKind", "METHOD_KINDS", "register", "make_base"]


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

    @property
    def calibration(self) -> tuple[np.ndarray, np.ndarray]:
        """The calibration data, falling back to the training data when there is none."""
        if self.X_cal is None:
            return self.X_train, self.y_train
        return self.X_cal, self.y_cal


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
    raise ValueError(f"unknown base kind {kind!r}")


@register("base", options=(), doc="The uncalibrated base model's Gaussian predictive distribution.")
def _base(ctx: TaskContext) -> xr.Dataset:
    """The uncalibrated base model (B in Capone et al. 2023)."""
    return ctx.base.predict(ctx.X_test, levels=ctx.levels)


# ---------------------------------------------------------------------------
# Recalibration baselines (Capone et al. 2023 §7: RK, RV, RM) and variance scaling
# ---------------------------------------------------------------------------


@register("isotonic", options=("extrapolate",),
          doc="Kuleshov et al. 2018 isotonic recalibration of the base's PIT values (RK).")
def _isotonic(ctx: TaskContext, **options) -> xr.Dataset:
    from calibprob.calibrators.recalibration import run_isotonic

    return run_isotonic(ctx, **options)


@register("vovk", options=("extrapolate", "random_state"),
          doc="Vovk's randomized conformal calibrator of the base's PIT values (RV).")
def _vovk(ctx: TaskContext, **options) -> xr.Dataset:
    from calibprob.calibrators.recalibration import run_vovk

    return run_vovk(ctx, **options)


@register("marx", options=("center", "extrapolate"),
          doc="Marx et al. 2022 constant offsets around the base's mean (RM).")
def _marx(ctx: TaskContext, **options) -> xr.Dataset:
    from calibprob.calibrators.recalibration import run_marx

    return run_marx(ctx, **options)


@register("variance-scaling", options=(),
          doc="One factor on the base's standard deviation, fitted by calibration-set NLL.")
def _variance_scaling(ctx: TaskContext) -> xr.Dataset:
    from calibprob.calibrators.recalibration import run_variance_scaling

    return run_variance_scaling(ctx)


# ---------------------------------------------------------------------------
# Conformal post-processors (Pion & Vazquez 2024 and the methods it builds on)
# ---------------------------------------------------------------------------


def _need_calibration_split(ctx: TaskContext, kind: str):
    if ctx.X_cal is None:
        raise ValueError(
            f"kind {kind!r} needs a calibration part: give the spec's split a 'calibrate' fraction "
            "(e.g. split = {train = 0.6, calibrate = 0.2, test = 0.2})."
        )
    return ctx.X_cal, ctx.y_cal


def _reachable(levels: np.ndarray, n: int, sides: int) -> np.ndarray:
    """Mask of the confidence levels that ``n`` scores resolve (finite conformal ends)."""
    from calibprob.conformal._common import upper_rank

    per_side = levels if sides == 1 else 1.0 - (1.0 - levels) / 2.0
    return np.array([upper_rank(float(c), n) <= n for c in per_side])


def _interval_predictions(make_model, X_fit, y_fit, X_test, confidence_levels, n: int, sides: int) -> xr.Dataset:
    """Intervals at :func:`calibprob.metrics.interval_levels`, unbounded where ``n`` is too small.

    A level whose conformal rank exceeds the number of scores has the whole
    real line as its conformal set; it is reported as such (coverage 1, width
    inf) rather than dropped, so the IAE grid stays the same for every method.
    """
    from calibprob.metrics import interval_levels

    levels = interval_levels(confidence_levels)
    ok = _reachable(levels, n, sides)
    if not ok.any():
        raise ValueError(f"{n} points resolve none of the confidence levels {levels.tolist()}.")
    model = make_model(levels[ok]).fit(X_fit, y_fit)
    iv = model.predict_interval(X_test, confidence_level=levels[ok])
    m = X_test.shape[0]
    lower = np.full((m, levels.size), -np.inf)
    upper = np.full((m, levels.size), np.inf)
    lower[:, ok] = iv["lower"].transpose("obs", "confidence_level").values
    upper[:, ok] = iv["upper"].transpose("obs", "confidence_level").values
    return xr.Dataset(
        {"lower": (("obs", "confidence_level"), lower), "upper": (("obs", "confidence_level"), upper)},
        coords={"confidence_level": levels},
        attrs=dict(iv.attrs),
    )


@register("split-conformal", options=("score", "beta", "eps"),
          doc="Split conformal around the fitted base on the calibration part; a conformal quantile function.")
def _split_conformal(ctx: TaskContext, *, score: str = "absolute", beta: float = 1.0, eps: float = 0.0):
    from calibprob.conformal import SplitConformalRegressor

    X_cal, y_cal = _need_calibration_split(ctx, "split-conformal")
    model = SplitConformalRegressor(estimator=ctx.base, score=score, beta=beta, eps=eps,
                                    confidence_level=0.5, prefit=True).calibrate(X_cal, y_cal)
    return model.predict(ctx.X_test, levels=ctx.levels)


@register("conformal-predictive", options=("normalize", "beta", "eps"),
          doc="Split conformal predictive system (Vovk et al. 2020): a full predictive CDF per test point.")
def _conformal_predictive(ctx: TaskContext, *, normalize: bool = True, beta: float = 1.0, eps: float = 0.0):
    from calibprob.conformal import ConformalPredictiveSystem

    X_cal, y_cal = _need_calibration_split(ctx, "conformal-predictive")
    model = ConformalPredictiveSystem(estimator=ctx.base, normalize=normalize, beta=beta, eps=eps,
                                      confidence_level=0.5, prefit=True).calibrate(X_cal, y_cal)
    return model.predict(ctx.X_test, levels=ctx.levels)


def _cross_conformal(ctx: TaskContext, *, method: str, cv, score: str, beta: float, eps: float):
    from calibprob.conformal import CrossConformalRegressor
    from calibprob.conformal.scores import get_score

    sides = 1 if get_score(score, beta=beta, eps=eps).symmetric else 2
    n = len(ctx.y_train)
    return _interval_predictions(
        lambda lv: CrossConformalRegressor(estimator=ctx.new_base(), method=method, cv=cv, score=score,
                                           beta=beta, eps=eps, confidence_level=lv, random_state=ctx.seed),
        ctx.X_train, ctx.y_train, ctx.X_test, ctx.confidence_levels, n, sides,
    )


@register("jackknife", options=("score", "beta", "eps"),
          doc="Jackknife (Pion eq. 6): leave-one-out residuals around the full-data fit; n refits.")
def _jackknife(ctx: TaskContext, *, score: str = "absolute", beta: float = 1.0, eps: float = 0.0):
    return _cross_conformal(ctx, method="base", cv="loo", score=score, beta=beta, eps=eps)


@register("jackknife-plus", options=("score", "beta", "eps"),
          doc="Jackknife+ (Barber et al. 2021): n refits of the base, coverage >= 2c - 1.")
def _jackknife_plus(ctx: TaskContext, *, score: str = "absolute", beta: float = 1.0, eps: float = 0.0):
    return _cross_conformal(ctx, method="plus", cv="loo", score=score, beta=beta, eps=eps)


@register("cv-plus", options=("folds", "score", "beta", "eps"),
          doc="CV+ (Barber et al. 2021): K refits of the base.")
def _cv_plus(ctx: TaskContext, *, folds: int = 10, score: str = "absolute", beta: float = 1.0, eps: float = 0.0):
    return _cross_conformal(ctx, method="plus", cv=int(folds), score=score, beta=beta, eps=eps)


def _gp_conformal(ctx: TaskContext, cls_name: str, sides: int, **options):
    from calibprob import conformal

    cls = getattr(conformal, cls_name)
    n = len(ctx.y_train)
    return _interval_predictions(
        lambda lv: cls(estimator=ctx.base, prefit=True, confidence_level=lv, **options),
        None, None, ctx.X_test, ctx.confidence_levels, n, sides,
    )


@register("jackknife-plus-gp", options=("beta", "eps", "refit_mean"),
          doc="J+GP (Pion eq. 11-12): jackknife+ with normalised scores from the GP's closed-form LOO.")
def _jackknife_plus_gp(ctx: TaskContext, *, beta: float = 1.0, eps: float = 0.0, refit_mean: bool = True):
    return _gp_conformal(ctx, "JackknifePlusGP", 1, score="normalized", beta=beta, eps=eps,
                         refit_mean=refit_mean)


@register("asym-jackknife-plus-gp", options=("beta", "eps", "refit_mean", "convention"),
          doc="asymJ+GP (Pion eq. 13-14): signed normalised LOO scores, one rank per tail.")
def _asym_jackknife_plus_gp(ctx: TaskContext, *, beta: float = 1.0, eps: float = 0.0, refit_mean: bool = True,
                            convention: str = "barber"):
    return _gp_conformal(ctx, "JackknifePlusGP", 2, score="signed", beta=beta, eps=eps,
                         refit_mean=refit_mean, convention=convention)


@register("full-conformal-gp", options=("beta", "eps", "refit_mean"),
          doc="Full-conformal GP (Papadopoulos 2023; Pion eq. 9-10): exact, no candidate grid.")
def _full_conformal_gp(ctx: TaskContext, *, beta: float = 1.0, eps: float = 0.0, refit_mean: bool = True):
    return _gp_conformal(ctx, "FullConformalGP", 1, beta=beta, eps=eps, refit_mean=refit_mean)


# ---------------------------------------------------------------------------
# Bayesian calibrators
# ---------------------------------------------------------------------------


def _register_gp_beta():
    # The option list lives with the model; importing it is cheap (no PyMC import at module level
    # would be cheaper still, but the spec validator needs the names).
    options = ("n_inducing", "rank", "inference", "draws", "n_iter", "learning_rate", "obj_n_mc",
               "batch_size", "learn_inducing", "tune", "chains", "target_accept", "n_grid", "compile_mode",
               "calibration_data")

    @register("gp-beta", options=options,
              doc="GP-Beta distribution calibration (Song et al. 2019), a PyMC model.")
    def _gp_beta(ctx: TaskContext, **opts) -> xr.Dataset:
        from calibprob.calibrators.gp_beta import run_gp_beta

        return run_gp_beta(ctx, **opts)


_register_gp_beta()


@register("sharp-gp", options=("variant", "n_levels", "include_noise", "fit_noise", "n_restarts", "prior_sd",
                                "fit_fraction", "n_train_subset", "maxiter"),
          doc="Sharp calibrated GP (Capone et al. 2023), calibration hyperparameters by MAP per level.")
def _sharp_gp(ctx: TaskContext, **opts) -> xr.Dataset:
    from calibprob.calibrators.sharp_gp import run_sharp_gp

    return run_sharp_gp(ctx, **opts)
