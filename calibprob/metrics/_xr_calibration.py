"""xarray layer, calibration and intervals: PIT, calibration curve, ECE, coverage, width, IAE, UEB."""

from __future__ import annotations

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.validation import check_confidence_levels
from calibprob.metrics._attrs import _ATTRS
from calibprob.metrics._calibration import (
    calibration_error,
    fraction_below,
    integrated_absolute_error,
    interval_coverage,
    mean_interval_width,
    ueb_violation_rate,
)
from calibprob.metrics._levels import DEFAULT_CONFIDENCE_LEVELS, ece_levels, iae_confidence_levels
from calibprob.metrics._reading import (
    _central_bounds,
    _check_pred,
    _check_unit_grid,
    _check_y,
    _ppf,
    _scalar,
    _ueb_bounds,
)


def pit(pred: xr.Dataset, y: ArrayLike) -> xr.DataArray:
    r"""Probability integral transform values :math:`u_i = F_i(y_i)`, dims ``(obs,)``.

    Uniform on (0, 1) for calibrated predictions (Kuleshov et al. 2018).

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
        ``pit``, dims ``(obs,)``.

    References
    ----------
    Kuleshov, V., Fenner, N. and Ermon, S. (2018). Accurate uncertainties for deep
    learning using calibrated regression. ICML.

    Gneiting, T., Balabdaoui, F. and Raftery, A. E. (2007). Probabilistic forecasts,
    calibration and sharpness. JRSS B 69(2).

    Examples
    --------
    >>> import calibprob
    >>> from calibprob.metrics import pit
    >>> pit(calibprob.normal([0.0, 0.0], [1.0, 1.0]), [0.0, 1.96]).values.round(3).tolist()
    [0.5, 0.975]
    """
    yv = _check_y(_check_pred(pred), y)
    out = pred.calib.pit(yv)
    out.attrs.update(long_name="probability integral transform", definition="u_i = F_i(y_i)")
    return out


def calibration_curve(
    pred: xr.Dataset, y: ArrayLike, levels: ArrayLike | None = None, *, dim: str = "ece_level"
) -> xr.DataArray:
    r"""Observed fraction of values at or below the predicted quantile of each level.

    .. math::

        \hat p_j = \frac1n \sum_i \mathbb 1\{y_i \le Q_i(p_j)\},\qquad
        Q_i(0) = -\infty,\; Q_i(1) = +\infty .

    The reliability diagram plots :math:`\hat p_j` against :math:`p_j`. It is
    computed from the quantiles (the definition) rather than from PIT values:
    the two agree for the continuous, strictly increasing laws of the
    contract, but an extreme outlier's PIT can round to exactly 0 or 1.

    Parameters
    ----------
    pred : xarray.Dataset
        Predictive distribution (``obs``, ``level``).
    y : array_like, shape (n,)
    levels : array_like, shape (m,), optional
        Increasing levels in [0, 1]; default :func:`ece_levels` ``(21)``.
    dim : str, default "ece_level"
        Name of the level dimension of the result.

    Returns
    -------
    xarray.DataArray
        ``observed_fraction``, dims ``(dim,)``.

    References
    ----------
    Kuleshov, V., Fenner, N. and Ermon, S. (2018). Accurate uncertainties for deep
    learning using calibrated regression. ICML (the reliability diagram).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.metrics import calibration_curve
    >>> y = np.random.default_rng(0).normal(size=2000)
    >>> curve = calibration_curve(calibprob.normal(np.zeros(2000), np.ones(2000)), y, levels=[0.1, 0.5, 0.9])
    >>> bool(np.allclose(curve, [0.1, 0.5, 0.9], atol=0.03))
    True
    """
    yv = _check_y(_check_pred(pred), y)
    p = ece_levels() if levels is None else _check_unit_grid(levels, "levels")
    inner = (p > 0) & (p < 1)
    q = np.empty((yv.size, p.size))
    q[:, p <= 0] = -np.inf
    q[:, p >= 1] = np.inf
    if inner.any():
        q[:, inner] = _ppf(pred, p[inner])
    frac = fraction_below(yv, q)
    return xr.DataArray(
        frac,
        dims=(dim,),
        coords={dim: p},
        name="observed_fraction",
        attrs=dict(_ATTRS["observed_fraction"]),
    )


def ece(pred: xr.Dataset, y: ArrayLike, *, n_ece_levels: int = 21) -> xr.DataArray:
    r"""Expected calibration error over ``n_ece_levels`` evenly spaced levels.

    .. math::

        \mathrm{ECE} = \frac1m \sum_{j=0}^{m-1}\Bigl(\frac1n\sum_{i=1}^n
            \mathbb 1\{y_i \le Q_i(p_j)\} - p_j\Bigr)^2,\qquad p_j = \frac{j}{m-1},

    with :math:`m = 21` by default (p = 0, 0.05, ..., 1). The levels 0 and 1
    contribute 0 (their quantiles are infinite under the normal tail rule).
    Capone et al. 2023, eq. (8), write a sum over the levels; their Table 1
    magnitudes and their code use the mean, as here (sum = m × mean).

    Parameters
    ----------
    pred : xarray.Dataset
        Predictive distribution (dims ``obs``, ``level``; the contract of
        :mod:`calibprob.predictive`).
    y : array_like, shape (n_obs,)
        Observed values, one per observation of ``pred``.
    n_ece_levels : int, default 21
        Number :math:`m` of levels.

    Returns
    -------
    xarray.DataArray
        0-d, ``ece``.

    References
    ----------
    Capone, Hirche & Pleiss (2023), eq. (8)-(9) and Table 1; Kuleshov et al. (2018).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.metrics import ece
    >>> y = np.random.default_rng(0).normal(size=2000)
    >>> calibrated = float(ece(calibprob.normal(np.zeros(2000), np.ones(2000)), y))
    >>> overconfident = float(ece(calibprob.normal(np.zeros(2000), np.full(2000, 0.5)), y))
    >>> calibrated < 0.001 < overconfident
    True
    """
    p = ece_levels(n_ece_levels)
    curve = calibration_curve(pred, y, p)
    return _scalar(calibration_error(curve.values, p), "ece", _ATTRS["ece"] | {"n_ece_levels": p.size})


def coverage(
    pred: xr.Dataset,
    y: ArrayLike,
    confidence_level: ArrayLike = DEFAULT_CONFIDENCE_LEVELS,
    *,
    dim: str = "confidence_level",
) -> xr.DataArray:
    r"""Empirical coverage of the central intervals at each confidence level.

    .. math::

        \delta_c = \frac1n\sum_i \mathbb 1\Bigl\{Q_i\bigl(\tfrac{1-c}{2}\bigr) \le y_i
            \le Q_i\bigl(\tfrac{1+c}{2}\bigr)\Bigr\}

    Parameters
    ----------
    pred : xarray.Dataset
        Predictive distribution (dims ``obs``, ``level``; the contract of
        :mod:`calibprob.predictive`).
    y : array_like, shape (n_obs,)
        Observed values, one per observation of ``pred``.
    confidence_level : float or sequence of float, default :data:`DEFAULT_CONFIDENCE_LEVELS`
        Levels :math:`c` in (0, 1).
    dim : str, default "confidence_level"
        Name of the level dimension of the result.

    Returns
    -------
    xarray.DataArray
        ``coverage``, dims ``(dim,)``.

    References
    ----------
    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, §4 (coverage at 90 %).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.metrics import coverage
    >>> y = np.random.default_rng(0).normal(size=2000)
    >>> cov = coverage(calibprob.normal(np.zeros(2000), np.ones(2000)), y, [0.5, 0.9])
    >>> bool(np.allclose(cov, [0.5, 0.9], atol=0.03))
    True
    """
    yv = _check_y(_check_pred(pred), y)
    c = check_confidence_levels(confidence_level, "confidence_level")
    cov = interval_coverage(yv, *_central_bounds(pred, c))
    return xr.DataArray(cov, dims=(dim,), coords={dim: c}, name="coverage", attrs=dict(_ATTRS["coverage"]))


def width(
    pred: xr.Dataset, confidence_level: ArrayLike = DEFAULT_CONFIDENCE_LEVELS, *, dim: str = "confidence_level"
) -> xr.DataArray:
    r"""Mean width of the central intervals: :math:`\frac1n\sum_i Q_i(\frac{1+c}2) - Q_i(\frac{1-c}2)`.

    Capone et al. 2023 report it at c = 0.95 ("95% CI"), Pion & Vazquez 2024
    at c = 0.9 ("90%W").

    Parameters
    ----------
    pred : xarray.Dataset
        Predictive distribution (dims ``obs``, ``level``; the contract of
        :mod:`calibprob.predictive`).
    confidence_level : float or sequence of float, default :data:`DEFAULT_CONFIDENCE_LEVELS`
        Levels :math:`c` in (0, 1).
    dim : str, default "confidence_level"
        Name of the level dimension of the result.

    Returns
    -------
    xarray.DataArray
        ``width``, dims ``(dim,)``.

    References
    ----------
    Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
    processes. NeurIPS 36, Table 1 (95% CI).

    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, Table 1 (90%W).

    Examples
    --------
    >>> import calibprob
    >>> from calibprob.metrics import width
    >>> width(calibprob.normal([0.0], [1.0]), [0.95]).values.round(3).tolist()   # 2 x 1.96
    [3.92]
    """
    _check_pred(pred)
    c = check_confidence_levels(confidence_level, "confidence_level")
    w = mean_interval_width(*_central_bounds(pred, c))
    return xr.DataArray(w, dims=(dim,), coords={dim: c}, name="width", attrs=dict(_ATTRS["width"]))


def iae(pred: xr.Dataset, y: ArrayLike) -> xr.DataArray:
    r"""Integrated absolute error (miscalibration area) of Pion & Vazquez 2024.

    .. math::

        \mathrm{IAE} = \frac{1}{20}\sum_{k=1}^{20} \bigl|\delta_{1-\alpha_k} - (1-\alpha_k)\bigr|,
        \qquad \alpha = \mathrm{linspace}(0.02, 0.98, 20),

    the Riemann sum of :math:`\int_0^1 |\delta_c - c|\,\mathrm dc`, with
    :math:`\delta_c` the coverage of the central intervals
    (:func:`coverage`). The coverage curve itself is ``iae_coverage`` in
    :func:`evaluate`.

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
        0-d, ``iae``.

    References
    ----------
    Pion, A., Vazquez, E. (2024), Section 2 (J_IAE) and Table 1; Marrel, A.,
    Iooss, B. (2024).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.metrics import iae
    >>> y = np.random.default_rng(0).normal(size=2000)
    >>> calibrated = float(iae(calibprob.normal(np.zeros(2000), np.ones(2000)), y))
    >>> overconfident = float(iae(calibprob.normal(np.zeros(2000), np.full(2000, 0.5)), y))
    >>> calibrated < 0.03 < overconfident
    True
    """
    c = iae_confidence_levels()
    cov = coverage(pred, y, c, dim="iae_level")
    return _scalar(integrated_absolute_error(cov.values, c), "iae", dict(_ATTRS["iae"]))


def ueb_violation(pred: xr.Dataset, y: ArrayLike) -> xr.DataArray:
    r"""Rate of uniform-error-bound violation (Capone et al. 2023, appendix Table 2).

    Capone et al. compare "100 percent credible intervals" (uniform error
    bounds). A quantile function that is only known up to its extreme stored
    levels :math:`p_{\min}, p_{\max}` has no finite 100% interval under an
    unbounded tail, so calibprob takes the widest interval the prediction
    states, :math:`[Q_i(p_{\min}), Q_i(p_{\max})]` (with the default levels
    [Q(0.01), Q(0.99)]; Capone's own levels run to 0.005 and 0.995), and

    .. math::

        \mathrm{RUEBV} = \frac1n\sum_i \mathbb 1\bigl\{y_i \notin [Q_i(p_{\min}), Q_i(p_{\max})]\bigr\}.

    The value therefore depends on the stored levels (recorded in the attrs).

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
        0-d, ``ueb_violation``.

    References
    ----------
    Capone, A., Hirche, S., Pleiss, G. (2023), appendix "Comparison with
    Capone et al. (2022)", Table 2 (RUEBV, length of 100% CI).

    Examples
    --------
    >>> import calibprob
    >>> from calibprob.metrics import ueb_violation
    >>> pred = calibprob.normal([0.0, 0.0], [1.0, 1.0])   # widest stated interval: [Q(0.01), Q(0.99)]
    >>> float(ueb_violation(pred, [0.0, 5.0]))
    0.5
    """
    yv = _check_y(_check_pred(pred), y)
    lo, hi, level_attrs = _ueb_bounds(pred)
    return _scalar(
        ueb_violation_rate(yv, lo, hi),
        "ueb_violation",
        _ATTRS["ueb_violation"] | level_attrs,
    )


def ueb_width(pred: xr.Dataset) -> xr.DataArray:
    r"""Mean length of the "100%" interval :math:`\frac1n\sum_i Q_i(p_{\max}) - Q_i(p_{\min})`.

    See :func:`ueb_violation` for the interval (Capone et al. 2023, Table 2,
    "Length of 100% CI").

    Parameters
    ----------
    pred : xarray.Dataset
        Predictive distribution (dims ``obs``, ``level``; the contract of
        :mod:`calibprob.predictive`).

    Returns
    -------
    xarray.DataArray
        0-d, ``ueb_width``.

    References
    ----------
    Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
    processes. NeurIPS 36, appendix Table 2 (length of 100% CI).

    Examples
    --------
    >>> import calibprob
    >>> from calibprob.metrics import ueb_width
    >>> round(float(ueb_width(calibprob.normal([0.0], [1.0]))), 3)   # Q(0.99) - Q(0.01)
    4.653
    """
    lo, hi, level_attrs = _ueb_bounds(_check_pred(pred))
    return _scalar(np.mean(hi - lo), "ueb_width", _ATTRS["ueb_width"] | level_attrs)
