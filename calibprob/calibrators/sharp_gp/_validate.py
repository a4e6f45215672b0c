r"""Input checks of :class:`~calibprob.calibrators.sharp_gp.SharpCalibratedGP` (each names the fix)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from calibprob._core.estimator import check_is_fitted
from calibprob._core.ranks import knot_levels, levels_in_range
from calibprob._core.validation import check_choice, check_int, check_levels
from calibprob.calibrators.sharp_gp._knots import required_calibration_points

if TYPE_CHECKING:
    from calibprob.calibrators.sharp_gp.estimator import _GP, SharpCalibratedGP

__all__ = [
    "VARIANTS",
    "INTERPOLATIONS",
    "LARGE_N",
    "LARGE_MAXLS",
    "check_base",
    "check_params",
    "check_knot_levels",
    "resolve_auto",
]

#: The variants of :class:`SharpCalibratedGP`.
VARIANTS = ("full", "scaled", "cross-fitted")
#: How :meth:`SharpCalibratedGP.quantile` fills the levels between the interpolation nodes.
INTERPOLATIONS = ("theta", "quantile")
#: Calibration rows above which the ``"auto"`` options switch to their large-N settings
#: (``interpolate="quantile"``, one L-BFGS-B start, warm-started knots, at most
#: ``LARGE_MAXLS`` line-search steps per L-BFGS-B iteration); at or below it
#: the fit and prediction are exactly the paper's Algorithm 1 as before.
LARGE_N = 1000
#: L-BFGS-B line-search steps above ``LARGE_N`` (scipy's default, 20, at or below it).
LARGE_MAXLS = 6


def check_base(model: SharpCalibratedGP) -> _GP:
    base = model.estimator
    if base is None:
        raise ValueError(
            "estimator must be a fitted calibprob GaussianProcessRegressor (or "
            "SparseGaussianProcessRegressor); got None. Pass estimator=gp after gp.fit(X_train, y_train)."
        )
    if isinstance(base, xr.Dataset):
        raise TypeError(
            "estimator is a predictive Dataset, but SharpCalibratedGP is model-aware: it needs the fitted "
            "GP itself (it re-evaluates sigma(theta, x) for new theta). Pass estimator=gp; to calibrate a "
            "predictive Dataset, use a distribution post-processor (IsotonicRecalibrator, "
            "GPBetaCalibrator, ConformalPredictiveSystem)."
        )
    if not all(hasattr(base, a) for a in ("predict_mean_std", "kernel_matrix", "kernel")):
        raise TypeError(
            "estimator must be a calibprob GaussianProcessRegressor or SparseGaussianProcessRegressor "
            f"(the sharp GP needs σ(θ, x) for new θ); got {type(base).__name__}."
        )
    check_is_fitted(base, "theta_", method="fit")
    return base


def check_params(model: SharpCalibratedGP) -> None:
    check_choice(model.variant, "variant", VARIANTS)
    check_choice(model.interpolate, "interpolate", ("auto", *INTERPOLATIONS))
    for name in ("include_noise", "fit_noise"):
        if not isinstance(getattr(model, name), (bool, np.bool_)):
            raise TypeError(f"{name} must be True or False; got {getattr(model, name)!r}.")
    check_int(model.n_levels, "n_levels", minimum=2)
    if model.n_restarts is not None:
        check_int(model.n_restarts, "n_restarts", minimum=1)
    if model.warm_start is not None and not isinstance(model.warm_start, (bool, np.bool_)):
        raise TypeError(
            f"warm_start must be True, False or None (automatic: on above {LARGE_N} calibration "
            f"rows); got {model.warm_start!r}."
        )
    check_int(model.maxiter, "maxiter", minimum=1)
    if model.maxls is not None:
        check_int(model.maxls, "maxls", minimum=1)
    if not (np.isfinite(model.prior_sd) and model.prior_sd > 0):
        raise ValueError(f"prior_sd must be > 0 (log-space standard deviation); got {model.prior_sd!r}.")
    if not 0 < model.fit_fraction < 1:
        raise ValueError(
            f"fit_fraction must be in (0, 1) (share of calibration points that fit θ); got {model.fit_fraction!r}."
        )
    if model.n_train_subset is not None:
        check_int(model.n_train_subset, "n_train_subset", minimum=2)
    if model.n_cal_subset is not None:
        check_int(model.n_cal_subset, "n_cal_subset", minimum=2)
    if model.blas_threads is not None:
        check_int(model.blas_threads, "blas_threads", minimum=1)


def resolve_auto(model: SharpCalibratedGP, n_cal: int) -> dict:
    """The size-dependent settings for ``n_cal`` calibration rows (``LARGE_N``)."""
    large = n_cal > LARGE_N
    interpolate = model.interpolate if model.interpolate != "auto" else ("quantile" if large else "theta")
    n_restarts = model.n_restarts if model.n_restarts is not None else (1 if large else 2)
    warm = model.warm_start if model.warm_start is not None else large
    # L-BFGS-B line-search steps: scipy's 20 for the paper's sizes; above LARGE_N, 6 — the
    # objective has kinks wherever the order statistic β changes point, where Wolfe line
    # searches spend ~10 evaluations per iteration (measured: half the evaluations, docs page)
    maxls = model.maxls if model.maxls is not None else (LARGE_MAXLS if large else 20)
    return {"interpolate": interpolate, "n_restarts": int(n_restarts), "warm_start": bool(warm), "maxls": int(maxls)}


def check_knot_levels(model: SharpCalibratedGP, n_beta: int) -> np.ndarray:
    if isinstance(model.levels, str):
        check_choice(model.levels, "levels", ("all",))
        return knot_levels(n_beta)
    if model.levels is None:
        return knot_levels(n_beta, model.n_levels)
    lv = check_levels(model.levels, "levels")
    if not levels_in_range(lv, n_beta).all():
        need = required_calibration_points(lv)
        extra = (
            f" (the cross-fitted variant sets β with {n_beta} of them; ask for fit_fraction "
            "smaller or more calibration data)"
            if model.variant == "cross-fitted"
            else ""
        )
        raise ValueError(
            f"too few calibration points for levels in [{lv.min():.4g}, {lv.max():.4g}]: a level "
            f"δ needs 1/(N+1) <= δ <= N/(N+1), so these levels need N >= {need} calibration "
            f"points; got N = {n_beta}{extra}. Hold out more calibration data or choose "
            "levels closer to 0.5."
        )
    return lv
