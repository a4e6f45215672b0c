"""Array layer, calibration and intervals: observed fractions, ECE, coverage, width, IAE, UEB."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def fraction_below(y: ArrayLike, q: ArrayLike) -> np.ndarray:
    r"""Observed fraction of values at or below each predicted quantile.

    .. math::

        \hat p_j = \frac{1}{n}\sum_{i=1}^n \mathbb 1\{y_i \le Q_i(p_j)\}

    Parameters
    ----------
    y : ndarray, shape (n,)
        Observed values.
    q : ndarray, shape (n, m)
        Predicted quantiles :math:`Q_i(p_j)`; ``-inf`` / ``+inf`` columns (the
        quantiles at levels 0 and 1 under an unbounded law) give fractions 0
        and 1 exactly.

    Returns
    -------
    ndarray, shape (m,)

    References
    ----------
    Kuleshov, V., Fenner, N. and Ermon, S. (2018). Accurate uncertainties for deep
    learning using calibrated regression. ICML (the calibration curve of the
    reliability diagram).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import fraction_below
    >>> y = np.array([0.0, 1.0, 2.0, 3.0])
    >>> q = np.tile([0.5, 2.5], (4, 1))   # the same two quantiles for every observation
    >>> fraction_below(y, q).tolist()
    [0.25, 0.75]
    """
    y = np.asarray(y, float)
    q = np.asarray(q, float)
    return np.mean(y[:, None] <= q, axis=0)


def calibration_curve_from_pit(pit_values: ArrayLike, levels: ArrayLike) -> np.ndarray:
    r"""Observed fraction of PIT values at or below each level.

    .. math::

        \hat p_j = \frac1n\sum_i \mathbb 1\{u_i \le p_j\}

    For a continuous, strictly increasing predictive CDF :math:`F_i`,
    :math:`u_i = F_i(y_i) \le p \iff y_i \le Q_i(p)`, so this equals
    :func:`fraction_below`. Useful where only PIT values are kept (online
    recalibration, calibration error per Bayesian-optimisation step).

    Parameters
    ----------
    pit_values : ndarray, shape (n,)
    levels : ndarray, shape (m,)

    Returns
    -------
    ndarray, shape (m,)

    References
    ----------
    Kuleshov, V., Fenner, N. and Ermon, S. (2018). Accurate uncertainties for deep
    learning using calibrated regression. ICML.

    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS (calibration error per step).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import calibration_curve_from_pit
    >>> calibration_curve_from_pit(np.array([0.1, 0.4, 0.6, 0.9]), np.array([0.25, 0.5, 0.75])).tolist()
    [0.25, 0.5, 0.75]
    """
    u = np.asarray(pit_values, float)
    p = np.asarray(levels, float)
    return np.mean(u[:, None] <= p[None, :], axis=0)


def calibration_error(fraction: ArrayLike, levels: ArrayLike) -> float:
    r"""Expected calibration error: the *mean* squared gap of a calibration curve.

    .. math::

        \mathrm{ECE} = \frac{1}{m}\sum_{j=1}^{m} (\hat p_j - p_j)^2

    Capone et al. 2023 eq. (8) (after Kuleshov et al. 2018) writes a *sum*
    over the levels; the magnitudes of their Table 1 (and their public code)
    are those of the *mean*, which is what calibprob reports (sum = m × mean).

    Parameters
    ----------
    fraction : ndarray, shape (m,)
        Observed fractions :math:`\hat p_j` (:func:`fraction_below`).
    levels : ndarray, shape (m,)
        Nominal levels :math:`p_j`.

    Returns
    -------
    float

    References
    ----------
    Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
    processes. NeurIPS 36, eq. (8).

    Kuleshov, V., Fenner, N. and Ermon, S. (2018). Accurate uncertainties for deep
    learning using calibrated regression. ICML.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import calibration_error
    >>> round(calibration_error(np.array([0.1, 0.5, 0.8]), np.array([0.0, 0.5, 1.0])), 6)
    0.016667
    """
    d = np.asarray(fraction, float) - np.asarray(levels, float)
    return float(np.mean(d * d))


def interval_coverage(y: ArrayLike, lower: ArrayLike, upper: ArrayLike) -> np.ndarray:
    r"""Empirical coverage of intervals: :math:`\frac1n\sum_i \mathbb 1\{l_{ik} \le y_i \le u_{ik}\}`.

    Parameters
    ----------
    y : ndarray, shape (n,)
    lower, upper : ndarray, shape (n,) or (n, k)

    Returns
    -------
    ndarray, shape () or (k,)

    References
    ----------
    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, §4 (empirical coverage).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import interval_coverage
    >>> y = np.array([0.0, 1.0, 2.0, 3.0])
    >>> float(interval_coverage(y, np.full(4, 0.5), np.full(4, 2.5)))
    0.5
    """
    y = np.asarray(y, float)
    lower = np.asarray(lower, float)
    upper = np.asarray(upper, float)
    yy = y.reshape(y.shape + (1,) * (lower.ndim - 1))
    return np.mean((lower <= yy) & (yy <= upper), axis=0)


def mean_interval_width(lower: ArrayLike, upper: ArrayLike) -> np.ndarray:
    r"""Mean interval length :math:`\frac1n\sum_i (u_{ik} - l_{ik})`; shape () or (k,).

    Parameters
    ----------
    lower, upper : ndarray, shape (n,) or (n, k)
        Interval ends, ``upper >= lower``; ``k`` confidence levels in columns.

    Returns
    -------
    ndarray, shape () or (k,)

    References
    ----------
    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, Table 1 (90%W).

    Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
    processes. NeurIPS 36, Table 1 (95% CI).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import mean_interval_width
    >>> float(mean_interval_width(np.array([0.0, 1.0]), np.array([1.0, 4.0])))
    2.0
    """
    return np.mean(np.asarray(upper, float) - np.asarray(lower, float), axis=0)


def integrated_absolute_error(coverage_values: ArrayLike, confidence_levels: ArrayLike) -> float:
    r"""Integrated absolute error (IAE, miscalibration area) of a coverage curve.

    Pion & Vazquez 2024 (after Marrel & Iooss 2024) define

    .. math::

        J_{\mathrm{IAE}} = \int_0^1 |\delta_c - c|\,\mathrm dc ,

    :math:`\delta_c` the empirical coverage of the central intervals of
    confidence level :math:`c`, and compute it (their public code) as the mean
    over :math:`\alpha_k` = ``linspace(0.02, 0.98, 20)`` of
    :math:`|\delta_{1-\alpha_k} - (1-\alpha_k)|`.

    Parameters
    ----------
    coverage_values : ndarray, shape (k,)
        :math:`\delta_{c_k}` (:func:`interval_coverage`).
    confidence_levels : ndarray, shape (k,)

    Returns
    -------
    float

    References
    ----------
    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, §2 (J_IAE).

    Marrel, A. and Iooss, B. (2024). Probabilistic surrogate modeling by Gaussian
    process: a review on recent insights in estimation and validation. Reliability
    Engineering & System Safety 247.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import integrated_absolute_error
    >>> round(integrated_absolute_error(np.array([0.45, 0.9]), np.array([0.5, 0.9])), 6)
    0.025
    """
    d = np.asarray(coverage_values, float) - np.asarray(confidence_levels, float)
    return float(np.mean(np.abs(d)))


def ueb_violation_rate(y: ArrayLike, lower: ArrayLike, upper: ArrayLike) -> float:
    r"""Rate of uniform-error-bound violation: :math:`\frac1n\sum_i \mathbb 1\{y_i\notin[l_i,u_i]\}`.

    (Capone et al. 2023, appendix Table 2, with :math:`[l_i, u_i]` the "100%"
    interval; see :func:`ueb_violation`.)

    Parameters
    ----------
    y : ndarray, shape (n,)
        Observed values.
    lower, upper : ndarray, shape (n,)
        The "100%" interval of each prediction.

    Returns
    -------
    float

    References
    ----------
    Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
    processes. NeurIPS 36, appendix Table 2 (RUEBV).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import ueb_violation_rate
    >>> ueb_violation_rate(np.array([0.0, 5.0]), np.full(2, -1.0), np.full(2, 1.0))
    0.5
    """
    y = np.asarray(y, float)
    return float(np.mean((y < np.asarray(lower, float)) | (y > np.asarray(upper, float))))
