"""What goes into GP-Beta: the base's predictive Dataset, its GP covariates, the observations' PIT terms."""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from calibprob._core.estimator import check_predictive
from calibprob._core.validation import check_targets
from calibprob.calibrators.gp_beta._link import _LOG_SQRT_2PI
from calibprob.predictive import validate


def prediction(method: str, pred: Any, rest: tuple) -> tuple[xr.Dataset, tuple]:
    """The base's predictive Dataset (validated), and the remaining positional arguments.

    The 0.1 form ``(mu, sigma, ...)`` (two arrays) was removed in 0.2.0: an array is refused by
    ``check_predictive``, whose message names the fix (``calibprob.normal(mu, sigma)``).
    """
    if isinstance(pred, xr.Dataset):
        return validate(pred), rest
    return check_predictive(pred, "GPBetaCalibrator", "pred_cal" if method == "fit" else "pred"), rest


def covariates(pred: xr.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """The latent GP's inputs: the base's predictive mean and standard deviation."""
    mu = np.asarray(pred.calib.mean().values, float)
    sigma = np.asarray(pred.calib.std().values, float)
    if not np.all(np.isfinite(mu)) or not np.all(sigma > 0):
        raise ValueError(
            "GP-Beta needs a finite predictive mean and a positive predictive std for every observation "
            f"(its GP inputs); got min std {np.min(sigma):.3g}. Drop observations whose predictive "
            "distribution is a point mass."
        )
    return mu, sigma


def observed_terms(pred: xr.Dataset, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Probit PIT :math:`u = \Phi^{-1}(F(y))` and log Jacobian :math:`\log f(y) - \log\varphi(u)`.

    ``y`` has shape (n,) or (n, k); exact for the normal family
    (:math:`u = (y-\mu)/\sigma`, :math:`\log J = -\log\sigma`).
    """
    cols = y if y.ndim == 2 else y[:, None]
    if pred.calib.is_normal:
        loc, scale = pred["loc"].values[:, None], pred["scale"].values[:, None]
        u = (cols - loc) / scale
        jac = np.broadcast_to(-np.log(scale), u.shape)
    else:
        family = pred.calib.family
        u = np.stack([family.zscore(cols[:, j]) for j in range(cols.shape[1])], axis=1)
        logf = np.stack([family.logpdf(cols[:, j]) for j in range(cols.shape[1])], axis=1)
        jac = logf + 0.5 * u * u + _LOG_SQRT_2PI
    return (u, jac) if y.ndim == 2 else (u[:, 0], jac[:, 0])


def targets(y: Any, n: int, name: str, ndim: Any = 1, obs: Any = None) -> np.ndarray:
    """Observed values through the library's one validator, ``calibprob._core.validation.check_targets``.

    ``ndim=(1, 2)`` also takes a 2-D DataArray (several values per observation, e.g. a density grid).
    """
    if isinstance(y, xr.DataArray) and y.ndim == 2 and not isinstance(ndim, int):
        y = y.values
    return check_targets(y, n, name, obs=obs, ndim=ndim)
