"""xarray layer, scores and sharpness: NLL, CRPS, pinball, MSE/RMSE, mean predictive std."""

from __future__ import annotations

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.validation import check_levels
from calibprob.metrics._attrs import _ATTRS
from calibprob.metrics._levels import _CHUNK, PINBALL_LEVELS
from calibprob.metrics._reading import _check_pred, _check_y, _crps_rows, _logpdf, _moments, _point, _ppf, _scalar
from calibprob.metrics._scores import crps_normal, mean_squared_error, pinball_loss


def nll(pred: xr.Dataset, y: ArrayLike) -> xr.DataArray:
    r"""Mean negative log predictive density :math:`-\frac1n\sum_i \log f_i(y_i)`.

    Exact for the normal family; for quantile predictions the density is the
    derivative of the CDF of the piecewise-Gaussian quantile function (as the
    papers compute NLL for quantile-only methods).

    Parameters
    ----------
    pred : xarray.Dataset
        Predictive distribution (dims ``obs``, ``level``; the contract of
        :mod:`calibprob.predictive`).
    y : array_like, shape (n_obs,)
        Observed values, one per observation of ``pred``.

    Returns
    -------
    xarray.DataArray
        0-d, ``nll``.

    References
    ----------
    Capone et al. (2023), Table 1 (NLL); Song et al. (2019), Table 1 (NLL).

    Examples
    --------
    >>> import calibprob
    >>> from calibprob.metrics import nll
    >>> round(float(nll(calibprob.normal([0.0], [1.0]), [0.0])), 4)   # log(2 pi) / 2
    0.9189
    """
    yv = _check_y(_check_pred(pred), y)
    return _scalar(-np.mean(_logpdf(pred, yv)), "nll", dict(_ATTRS["nll"]))


def crps(pred: xr.Dataset, y: ArrayLike) -> xr.DataArray:
    r"""Mean continuous ranked probability score, exact (:func:`crps_normal`, :func:`crps_quantile`).

    .. math::

        \mathrm{CRPS} = \frac1n\sum_i 2\int_0^1 \rho_\tau\bigl(y_i - Q_i(\tau)\bigr)\,\mathrm d\tau

    Parameters
    ----------
    pred : xarray.Dataset
        Predictive distribution (dims ``obs``, ``level``; the contract of
        :mod:`calibprob.predictive`).
    y : array_like, shape (n_obs,)
        Observed values, one per observation of ``pred``.

    Returns
    -------
    xarray.DataArray
        0-d, ``crps``.

    References
    ----------
    Gneiting, T., Raftery, A. E. (2007), JASA 102(477), Section 4.2.

    Examples
    --------
    >>> import calibprob
    >>> from calibprob.metrics import crps
    >>> round(float(crps(calibprob.normal([0.0], [1.0]), [0.0])), 4)
    0.2337
    """
    yv = _check_y(_check_pred(pred), y)
    if pred.calib.is_normal:
        vals = crps_normal(yv, pred["loc"].values, pred["scale"].values)
    else:
        vals = _crps_rows(pred.calib.family, yv, slice(None), _CHUNK)
    return _scalar(np.mean(vals), "crps", dict(_ATTRS["crps"]))


def pinball(pred: xr.Dataset, y: ArrayLike, levels: ArrayLike | None = None) -> xr.DataArray:
    r"""Pinball loss averaged over observations and levels (Song et al. 2019).

    .. math::

        \mathrm{PBL} = \frac{1}{nT}\sum_{i=1}^n\sum_{t=1}^T \rho_{\tau_t}\bigl(y_i, Q_i(\tau_t)\bigr),
        \qquad \tau = 0.05, 0.10, \dots, 0.95 .

    Parameters
    ----------
    pred : xarray.Dataset
        Predictive distribution (dims ``obs``, ``level``; the contract of
        :mod:`calibprob.predictive`).
    y : array_like, shape (n_obs,)
        Observed values, one per observation of ``pred``.
    levels : array_like, optional
        The :math:`\tau_t`, strictly inside (0, 1); default :data:`PINBALL_LEVELS`.

    Returns
    -------
    xarray.DataArray
        0-d, ``pinball``.

    References
    ----------
    Song, H., Diethe, T., Kull, M., Flach, P. (2019), Section 5 (PBL) and Table 1.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.metrics import pinball
    >>> y = np.random.default_rng(0).normal(size=2000)
    >>> sharp = float(pinball(calibprob.normal(np.zeros(2000), np.ones(2000)), y))
    >>> too_wide = float(pinball(calibprob.normal(np.zeros(2000), np.full(2000, 3.0)), y))
    >>> sharp < too_wide
    True
    """
    yv = _check_y(_check_pred(pred), y)
    tau = PINBALL_LEVELS if levels is None else check_levels(levels, "pinball_levels")
    loss = pinball_loss(yv, _ppf(pred, tau, stated=False), tau)  # a score of the law, as the CRPS
    return _scalar(np.mean(loss), "pinball", _ATTRS["pinball"] | {"pinball_levels": tau})


def mse(pred: xr.Dataset, y: ArrayLike, *, point: str = "mean") -> xr.DataArray:
    r"""Mean squared error of the point prediction: :math:`\frac1n\sum_i (y_i - \hat y_i)^2`.

    Parameters
    ----------
    pred : xarray.Dataset
        Predictive distribution (dims ``obs``, ``level``; the contract of
        :mod:`calibprob.predictive`).
    y : array_like, shape (n_obs,)
        Observed values, one per observation of ``pred``.
    point : {"mean", "median"}
        :math:`\hat y_i`: the predictive mean (default, as Song et al. 2019)
        or the median :math:`Q_i(1/2)`.

    Returns
    -------
    xarray.DataArray
        0-d, ``mse``.

    References
    ----------
    Song, H., Diethe, T., Kull, M. and Flach, P. (2019). Distribution calibration
    for regression. ICML, Table 1 (MSE).

    Examples
    --------
    >>> import calibprob
    >>> from calibprob.metrics import mse
    >>> float(mse(calibprob.normal([0.0, 1.0], [1.0, 1.0]), [1.0, 1.0]))
    0.5
    """
    yv = _check_y(_check_pred(pred), y)
    return _scalar(mean_squared_error(yv, _point(pred, point)), "mse", _ATTRS["mse"] | {"point": point})


def rmse(pred: xr.Dataset, y: ArrayLike, *, point: str = "mean") -> xr.DataArray:
    r"""Root mean squared error :math:`\sqrt{\mathrm{MSE}}` (see :func:`mse`).

    Parameters
    ----------
    pred : xarray.Dataset
        Predictive distribution (dims ``obs``, ``level``; the contract of
        :mod:`calibprob.predictive`).
    y : array_like, shape (n_obs,)
        Observed values, one per observation of ``pred``.
    point : {"mean", "median"}, default "mean"
        The point prediction, as in :func:`mse`.

    Returns
    -------
    xarray.DataArray
        0-d, ``rmse``.

    References
    ----------
    Song, H., Diethe, T., Kull, M. and Flach, P. (2019). Distribution calibration
    for regression. ICML, Table 1.

    Examples
    --------
    >>> import calibprob
    >>> from calibprob.metrics import rmse
    >>> float(rmse(calibprob.normal([0.0, 0.0], [1.0, 1.0]), [3.0, -3.0]))
    3.0
    """
    m = mse(pred, y, point=point)
    return _scalar(np.sqrt(m.item()), "rmse", _ATTRS["rmse"] | {"point": point})


def mean_std(pred: xr.Dataset) -> xr.DataArray:
    r"""Mean predictive standard deviation :math:`\frac1n\sum_i \sigma_i` (Capone's "STD").

    Uses the stored ``std`` when present, else the exact standard deviation of
    the piecewise-Gaussian law.

    Parameters
    ----------
    pred : xarray.Dataset
        Predictive distribution (dims ``obs``, ``level``; the contract of
        :mod:`calibprob.predictive`).

    Returns
    -------
    xarray.DataArray
        0-d, ``std``.

    References
    ----------
    Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
    processes. NeurIPS 36, Table 1 (STD).

    Examples
    --------
    >>> import calibprob
    >>> from calibprob.metrics import mean_std
    >>> float(mean_std(calibprob.normal([0.0, 0.0], [1.0, 3.0])))
    2.0
    """
    _, s = _moments(_check_pred(pred))
    return _scalar(np.mean(s), "std", dict(_ATTRS["std"]))
