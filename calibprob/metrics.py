r"""Calibration, sharpness and scoring rules on the predictive-distribution contract.

Three layers, as everywhere in calibprob:

1. **Array layer** — pure NumPy functions on arrays, observations on axis 0,
   the observed values ``y`` first (``score(y, forecast)``):
   :func:`fraction_below`, :func:`calibration_curve_from_pit`,
   :func:`calibration_error`, :func:`interval_coverage`,
   :func:`mean_interval_width`, :func:`integrated_absolute_error`,
   :func:`crps_normal`, :func:`crps_quantile`, :func:`pinball_loss`,
   :func:`mean_squared_error`, :func:`ueb_violation_rate`, and the Bayesian
   optimisation metrics :func:`best_so_far`, :func:`simple_regret`,
   :func:`cumulative_regret`, :func:`normalized_auc`.
2. **xarray layer** — one function per metric taking a predictive
   ``xr.Dataset`` (see :mod:`calibprob.predictive`) and observed values,
   returning a named ``xr.DataArray`` with descriptive attributes:
   :func:`pit`, :func:`calibration_curve`, :func:`ece`, :func:`iae`,
   :func:`coverage`, :func:`width`, :func:`nll`, :func:`crps`,
   :func:`pinball`, :func:`mse`, :func:`rmse`, :func:`mean_std`,
   :func:`ueb_violation`, :func:`ueb_width`.
3. **Public entry point** — :func:`evaluate` returns every metric in one
   ``xr.Dataset``, the same for every method.

All metrics of a Gaussian-family prediction (``attrs["family"] == "normal"``)
are exact; for quantile-family predictions they are exact functionals of the
piecewise-Gaussian quantile function defined in :mod:`calibprob.predictive`
(CRPS and the moments included — no sampling, no quadrature).

The definitions follow the papers: quantile calibration and the ECE [1]_ [2]_,
the IAE [3]_, the CRPS and the other proper scoring rules [4]_, the pinball
loss [5]_, the Bayesian-optimisation metrics [6]_.

References
----------
.. [1] Kuleshov, V., Fenner, N., Ermon, S. (2018). Accurate uncertainties for
   deep learning using calibrated regression. ICML.
.. [2] Capone, A., Hirche, S., Pleiss, G. (2023). Sharp calibrated Gaussian
   processes. NeurIPS.
.. [3] Pion, A., Vazquez, E. (2024). Gaussian process interpolation with
   conformal prediction: methods and comparative analysis.
.. [4] Gneiting, T., Raftery, A. E. (2007). Strictly proper scoring rules,
   prediction, and estimation. JASA 102(477).
.. [5] Song, H., Diethe, T., Kull, M., Flach, P. (2019). Distribution
   calibration for regression. ICML.
.. [6] Deshpande, S., Marx, C., Kuleshov, V. (2024). Online calibrated and
   conformal prediction improves Bayesian optimization. AISTATS.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from scipy import special

from calibprob._validation import (
    check_choice,
    check_confidence_levels,
    check_finite,
    check_int,
    check_levels,
    check_targets,
)
from calibprob.predictive import _pieces, quantile_logpdf, quantile_moments, quantile_ppf, validate

__all__ = [
    # constants
    "DEFAULT_CONFIDENCE_LEVELS",
    "IAE_MISCOVERAGE",
    "PINBALL_LEVELS",
    # array layer
    "ece_levels",
    "iae_confidence_levels",
    "interval_levels",
    "fraction_below",
    "calibration_curve_from_pit",
    "calibration_error",
    "interval_coverage",
    "mean_interval_width",
    "integrated_absolute_error",
    "crps_normal",
    "crps_quantile",
    "pinball_loss",
    "mean_squared_error",
    "ueb_violation_rate",
    "best_so_far",
    "simple_regret",
    "cumulative_regret",
    "normalized_auc",
    # xarray layer
    "pit",
    "calibration_curve",
    "ece",
    "iae",
    "coverage",
    "width",
    "nll",
    "crps",
    "pinball",
    "mse",
    "rmse",
    "mean_std",
    "ueb_violation",
    "ueb_width",
    # public entry point
    "evaluate",
    "evaluate_intervals",
    "is_interval_family",
    "METRIC_NAMES",
]

#: Scalar or per-confidence-level metric variables returned by :func:`evaluate`
#: (the names a comparison spec's ``metrics`` may list).
METRIC_NAMES = (
    "ece",
    "iae",
    "nll",
    "crps",
    "pinball",
    "mse",
    "rmse",
    "std",
    "coverage",
    "width",
    "ueb_violation",
    "ueb_width",
)

#: Confidence levels of the central intervals reported by :func:`evaluate`.
DEFAULT_CONFIDENCE_LEVELS = (0.5, 0.8, 0.9, 0.95, 0.99)

#: Miscoverage levels :math:`\alpha` of the IAE (Pion & Vazquez 2024, their code):
#: ``linspace(0.02, 0.98, 20)``; the intervals have confidence level ``1 - alpha``.
IAE_MISCOVERAGE = np.linspace(0.02, 0.98, 20)

#: Quantile levels of the pinball loss (Song et al. 2019): 0.05, 0.10, ..., 0.95.
PINBALL_LEVELS = np.round(np.arange(1, 20) * 0.05, 10)

_SQRT2 = np.sqrt(2.0)
_INV_2SQRTPI = 1.0 / (2.0 * np.sqrt(np.pi))
_INV_SQRT_2PI = 1.0 / np.sqrt(2.0 * np.pi)
# rows per block in the chunked evaluations (memory O(_CHUNK x L), cache-friendly)
_CHUNK = 4096


# ===========================================================================
# Array layer
# ===========================================================================


def ece_levels(n_levels: int = 21) -> np.ndarray:
    r"""The ECE levels :math:`p_j = j/(m-1)`, :math:`j = 0, \dots, m-1` (``m = n_levels``).

    With the default ``m = 21``: 0, 0.05, ..., 1, as in Capone et al. 2023.

    Parameters
    ----------
    n_levels : int, default 21
        Number :math:`m \ge 2` of levels.

    Returns
    -------
    ndarray, shape (m,)

    References
    ----------
    Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
    processes. NeurIPS 36, eq. (8) and Table 1.

    Kuleshov, V., Fenner, N. and Ermon, S. (2018). Accurate uncertainties for deep
    learning using calibrated regression. ICML.

    Examples
    --------
    >>> from calibprob.metrics import ece_levels
    >>> ece_levels(5).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    m = check_int(n_levels, "n_ece_levels", minimum=2)
    return np.linspace(0.0, 1.0, m)


def iae_confidence_levels() -> np.ndarray:
    r"""The IAE's central-interval confidence levels :math:`1-\alpha_k`, sorted increasingly.

    :math:`\alpha_k` = ``linspace(0.02, 0.98, 20)`` (:data:`IAE_MISCOVERAGE`);
    the grid is symmetric about 1/2, so the 20 levels are 0.02, ..., 0.98 again
    (rounded to 12 digits so that they are exactly the same floats).

    Returns
    -------
    ndarray, shape (20,)

    References
    ----------
    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, §2 (J_IAE) and their public code.

    Examples
    --------
    >>> from calibprob.metrics import iae_confidence_levels
    >>> c = iae_confidence_levels()
    >>> c.size, float(c[0]), float(c[-1])
    (20, 0.02, 0.98)
    """
    return np.sort(np.round(1.0 - IAE_MISCOVERAGE, 12))


def fraction_below(y, q) -> np.ndarray:
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


def calibration_curve_from_pit(pit_values, levels) -> np.ndarray:
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


def calibration_error(fraction, levels) -> float:
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


def interval_coverage(y, lower, upper) -> np.ndarray:
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


def mean_interval_width(lower, upper) -> np.ndarray:
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


def integrated_absolute_error(coverage_values, confidence_levels) -> float:
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


def crps_normal(y, loc, scale) -> np.ndarray:
    r"""Closed-form CRPS of Gaussian predictions (Gneiting & Raftery 2007, eq. 21).

    .. math::

        \mathrm{CRPS}(N(\mu,\sigma^2), y) = \sigma\Bigl[z\,(2\Phi(z) - 1)
        + 2\varphi(z) - \tfrac{1}{\sqrt\pi}\Bigr],\qquad z = \frac{y-\mu}{\sigma}.

    Parameters
    ----------
    y, loc, scale : ndarray, shape (n,)

    Returns
    -------
    ndarray, shape (n,)

    References
    ----------
    Gneiting, T. and Raftery, A. E. (2007). Strictly proper scoring rules,
    prediction, and estimation. JASA 102(477), eq. (21).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import crps_normal
    >>> crps_normal(np.array([0.0]), np.array([0.0]), np.array([1.0])).round(4).tolist()
    [0.2337]
    """
    y = np.asarray(y, float)
    loc = np.asarray(loc, float)
    scale = np.asarray(scale, float)
    z = (y - loc) / scale
    pdf = np.exp(-0.5 * z * z) * _INV_SQRT_2PI
    return scale * (z * (2.0 * special.ndtr(z) - 1.0) + 2.0 * pdf - 1.0 / np.sqrt(np.pi))


def _piece_integrals(levels: np.ndarray):
    """Per-piece integrals that depend on the levels only (pieces j = 0..L, tails included).

    Returns ``lo, hi`` (piece bounds in u-space) and, over each whole piece,
    ``i0 = int phi``, ``i1 = int u phi``, ``j0 = int Phi phi``, ``j1 = int u Phi phi``.
    """
    z = special.ndtri(np.asarray(levels, float))
    lo = np.concatenate([[-np.inf], z])
    hi = np.concatenate([z, [np.inf]])
    Phi_lo, Phi_hi = special.ndtr(lo), special.ndtr(hi)
    phi_lo = np.exp(-0.5 * lo * lo) * _INV_SQRT_2PI
    phi_hi = np.exp(-0.5 * hi * hi) * _INV_SQRT_2PI
    i0 = Phi_hi - Phi_lo
    i1 = phi_lo - phi_hi
    # int Phi phi = Phi^2 / 2 ;  int u Phi phi = -phi Phi + Phi(sqrt2 u) / (2 sqrt pi)
    j0 = 0.5 * (Phi_hi - Phi_lo) * (Phi_hi + Phi_lo)
    j1 = (phi_lo * Phi_lo - phi_hi * Phi_hi) + _INV_2SQRTPI * (special.ndtr(_SQRT2 * hi) - special.ndtr(_SQRT2 * lo))
    return lo, hi, Phi_hi, phi_hi, i0, i1, j0, j1


def crps_quantile(y, q, levels, *, chunk_size: int = _CHUNK) -> np.ndarray:
    r"""Exact CRPS of piecewise-Gaussian predictions (the calibprob quantile contract).

    The CRPS is twice the pinball loss integrated over all levels,

    .. math::

        \mathrm{CRPS}(F, y) = \int (F(x) - \mathbb 1\{y \le x\})^2\,\mathrm dx
        = 2\int_0^1 \rho_\tau\bigl(y - Q(\tau)\bigr)\,\mathrm d\tau,
        \qquad \rho_\tau(r) = r\,(\tau - \mathbb 1\{r < 0\}).

    Substituting :math:`\tau = \Phi(u)`, the quantile function of
    :mod:`calibprob.predictive` is linear on each of its :math:`L+1` pieces
    (tails included), :math:`Q = a_j + b_j u` for :math:`u\in[l_j, h_j)`.
    Centre the law at :math:`y` (:math:`a_j \leftarrow a_j - y`; the CRPS is
    translation invariant) and let :math:`u^* = -a_k/b_k` be the score where
    :math:`Q(\Phi(u^*)) = y`, in piece :math:`k`. Then

    .. math::

        \mathrm{CRPS} = 2\sum_{j=0}^{L} \int_{l_j}^{h_j}
            \bigl(\mathbb 1\{u > u^*\} - \Phi(u)\bigr)(a_j + b_j u)\,\varphi(u)\,\mathrm du ,

    in closed form from :math:`\int\varphi = \Phi`, :math:`\int u\varphi = -\varphi`,
    :math:`\int\Phi\varphi = \Phi^2/2` and
    :math:`\int u\,\Phi\varphi = -\varphi\Phi + \Phi(\sqrt2\,u)/(2\sqrt\pi)`.
    Only the piece holding :math:`u^*` needs a per-observation special
    function; the others use per-level integrals, so the cost is
    :math:`O(nL)` arithmetic. For a Gaussian stored as quantiles this equals
    :func:`crps_normal` to rounding (tested to 1e-12 relative).

    Parameters
    ----------
    y : ndarray, shape (n,)
    q : ndarray, shape (n, L)
        Non-decreasing quantiles at ``levels``.
    levels : ndarray, shape (L,)
    chunk_size : int, default 4096
        Rows processed at once; memory is O(chunk_size × L).

    Returns
    -------
    ndarray, shape (n,)

    References
    ----------
    Gneiting, T., Raftery, A. E. (2007). Strictly proper scoring rules,
    prediction, and estimation. JASA 102(477), eq. (21) and Section 4.2.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.metrics import crps_normal, crps_quantile
    >>> pred = calibprob.normal([0.0, 1.0], [1.0, 2.0])
    >>> y = np.array([0.3, -1.0])
    >>> exact = crps_normal(y, np.array([0.0, 1.0]), np.array([1.0, 2.0]))
    >>> bool(np.allclose(crps_quantile(y, pred["quantile"].values, pred["level"].values), exact))
    True
    """
    y = np.asarray(y, float)
    q = np.asarray(q, float)
    levels = np.asarray(levels, float)
    _, _, Phi_hi, phi_hi, i0, i1, j0, j1 = _piece_integrals(levels)
    pieces = np.arange(levels.size + 1)
    out = np.empty(y.shape[0])
    for start in range(0, y.shape[0], chunk_size):
        sl = slice(start, start + chunk_size)
        qc = q[sl] - y[sl, None]  # centred at y: y -> 0, better rounding
        a, b, _, _ = _pieces(qc, levels)
        # piece holding 0, located exactly as quantile_cdf does (count of q <= y)
        k = np.count_nonzero(qc <= 0.0, axis=-1)
        rows = np.arange(qc.shape[0])
        a_k, b_k = a[rows, k], b[rows, k]
        ustar = -a_k / b_k
        # int_{u*}^{inf} Q phi: whole pieces above k, plus the part of piece k above u*
        whole = np.where(pieces[None, :] > k[:, None], a * i0 + b * i1, 0.0).sum(axis=-1)
        phi_star = np.exp(-0.5 * ustar * ustar) * _INV_SQRT_2PI
        part = a_k * (Phi_hi[k] - special.ndtr(ustar)) + b_k * (phi_star - phi_hi[k])
        # int Phi Q phi over the whole line; a row-wise sum, not a BLAS a @ j0, whose rounding
        # may depend on how many rows are in the block (the result must not depend on chunk_size)
        base = (a * j0 + b * j1).sum(axis=-1)
        out[sl] = 2.0 * (whole + part - base)
    # rounding can leave a -1e-17 for a near-degenerate law; the CRPS is >= 0
    return np.maximum(out, 0.0)


def pinball_loss(y, q, tau) -> np.ndarray:
    r"""Pinball (quantile) loss of each quantile prediction.

    .. math::

        \rho_\tau(y, g) = \begin{cases}(1-\tau)(g - y) & y < g\\
                                       \tau\,(y - g) & \text{otherwise}\end{cases}

    (Song et al. 2019, Section 5.)

    Parameters
    ----------
    y : ndarray, shape (n,)
    q : ndarray, shape (n, T)
        Predicted quantiles :math:`g_i(\tau_t)`.
    tau : ndarray, shape (T,)

    Returns
    -------
    ndarray, shape (n, T)

    References
    ----------
    Song, H., Diethe, T., Kull, M. and Flach, P. (2019). Distribution calibration
    for regression. ICML, §5.

    Koenker, R. and Bassett, G. (1978). Regression quantiles. Econometrica 46(1).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import pinball_loss
    >>> pinball_loss(np.array([1.0]), np.array([[0.0, 2.0]]), np.array([0.1, 0.9])).round(6).tolist()
    [[0.1, 0.1]]
    """
    r = np.asarray(y, float)[:, None] - np.asarray(q, float)
    tau = np.asarray(tau, float)
    return np.maximum(tau * r, (tau - 1.0) * r)


def mean_squared_error(y, point) -> float:
    r"""Mean squared error of point predictions, :math:`\frac1n\sum_i (y_i - \hat y_i)^2`.

    Parameters
    ----------
    y : ndarray, shape (n,)
        Observed values.
    point : ndarray, shape (n,)
        Point predictions :math:`\hat y_i`.

    Returns
    -------
    float

    References
    ----------
    Song, H., Diethe, T., Kull, M. and Flach, P. (2019). Distribution calibration
    for regression. ICML, Table 1 (MSE).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import mean_squared_error
    >>> mean_squared_error(np.array([0.0, 2.0]), np.array([1.0, 1.0]))
    1.0
    """
    d = np.asarray(y, float) - np.asarray(point, float)
    return float(np.mean(d * d))


def ueb_violation_rate(y, lower, upper) -> float:
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


# -- Bayesian optimisation --------------------------------------------------


def best_so_far(values, *, axis: int = -1, minimize: bool = True) -> np.ndarray:
    r"""Best objective value found up to each step: :math:`b_t = \min_{s \le t} f(x_s)`.

    Parameters
    ----------
    values : ndarray, shape (..., T)
        Objective values in the order they were evaluated (along ``axis``).
    minimize : bool, default True
        Use the running maximum for maximisation problems.

    Returns
    -------
    ndarray, same shape

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, Table 1 and Fig. 3 (optimisation curves).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import best_so_far
    >>> best_so_far(np.array([3.0, 1.0, 2.0, 0.5])).tolist()
    [3.0, 1.0, 1.0, 0.5]
    """
    values = np.asarray(values, float)
    op = np.minimum if minimize else np.maximum
    return op.accumulate(values, axis=axis)


def simple_regret(values, optimum: float, *, axis: int = -1, minimize: bool = True) -> np.ndarray:
    r"""Simple regret after each step: :math:`r_t = \min_{s\le t} f(x_s) - f^*` (minimisation).

    For maximisation :math:`r_t = f^* - \max_{s\le t} f(x_s)`. The last entry is
    the simple regret of the run.

    Parameters
    ----------
    values : ndarray, shape (..., T)
        Objective values in evaluation order (along ``axis``).
    optimum : float
        The global optimum :math:`f^*`.
    axis : int, default -1
    minimize : bool, default True

    Returns
    -------
    ndarray, same shape as ``values``

    References
    ----------
    Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
    processes. NeurIPS 36, §BO experiments (simple regret).

    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import simple_regret
    >>> simple_regret(np.array([3.0, 1.0, 2.0]), optimum=0.5).tolist()
    [2.5, 0.5, 0.5]
    """
    b = best_so_far(values, axis=axis, minimize=minimize)
    return b - optimum if minimize else optimum - b


def cumulative_regret(values, optimum: float, *, axis: int = -1, minimize: bool = True) -> np.ndarray:
    r"""Cumulative regret :math:`R_t = \sum_{s \le t} (f(x_s) - f^*)` (minimisation).

    For maximisation the instantaneous regret is :math:`f^* - f(x_s)`.

    Parameters
    ----------
    values : ndarray, shape (..., T)
        Objective values in evaluation order (along ``axis``).
    optimum : float
        The global optimum :math:`f^*`.
    axis : int, default -1
    minimize : bool, default True

    Returns
    -------
    ndarray, same shape as ``values``

    References
    ----------
    Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
    processes. NeurIPS 36, §BO experiments (cumulative regret).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import cumulative_regret
    >>> cumulative_regret(np.array([3.0, 1.0, 2.0]), optimum=0.5).tolist()
    [2.5, 3.0, 4.5]
    """
    values = np.asarray(values, float)
    inst = values - optimum if minimize else optimum - values
    return np.cumsum(inst, axis=axis)


def normalized_auc(curve, *, lower: float | None = None, upper: float | None = None, axis: int = -1) -> np.ndarray:
    r"""Normalised area under optimisation curves (Deshpande et al. 2024, Table 1 and §A.1).

    The paper: "we compute the area under its optimization curve (i.e., its
    optimum as a function of the number of optimization steps) and normalize
    it relative to the area of the rectangle formed by upper and lower bounds
    along the x, y axes (hence max a is one). Smaller values ... are better."
    calibprob implements this as the trapezoid-rule area between the curve
    :math:`b_1, \dots, b_T` and the lower bound, over steps 1..T, divided by
    the rectangle :math:`(T - 1)(\text{upper} - \text{lower})`:

    .. math::

        a = \frac{\sum_{t=1}^{T-1} \tfrac12\bigl[(b_t - \ell) + (b_{t+1} - \ell)\bigr]}
                 {(T-1)\,(u - \ell)} \in [0, 1].

    The y-axis bounds :math:`\ell, u` default to the minimum and maximum over
    *all* curves passed (the axes of one figure, shared by the methods being
    compared), so curves of different methods are comparable and a curve
    stuck at the top scores 1. This reading reproduces the paper's
    Forrester rows (a method whose curve stays at its start scores ≈ 1, one
    that reaches the global minimum early ≈ 0.24). Pass ``lower``/``upper``
    (e.g. the known optimum and the worst initial value) to compare runs
    across figures.

    Parameters
    ----------
    curve : ndarray, shape (..., T)
        Best-so-far curves (:func:`best_so_far`, possibly averaged over
        repetitions), steps along ``axis``; ``T >= 2``.
    lower, upper : float, optional
        The y-axis bounds of the rectangle.

    Returns
    -------
    ndarray, shape ``curve.shape`` without ``axis`` (a float for one curve)

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, Table 1 and §A.1.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import normalized_auc
    >>> float(normalized_auc(np.array([1.0, 0.0, 0.0]), lower=0.0, upper=1.0))
    0.25
    """
    b = np.moveaxis(np.asarray(curve, float), axis, -1)
    check_finite(b, "curve")
    T = b.shape[-1]
    if T < 2:
        raise ValueError(f"curve needs at least 2 steps along axis {axis} to have an area; got {T}.")
    lo = float(np.min(b)) if lower is None else float(lower)
    hi = float(np.max(b)) if upper is None else float(upper)
    if not hi > lo:
        raise ValueError(
            f"normalized_auc needs upper > lower; got lower={lo!r}, upper={hi!r} "
            "(a flat curve has no scale: pass lower= and upper= explicitly)."
        )
    d = b - lo
    area = 0.5 * (d[..., :-1] + d[..., 1:]).sum(axis=-1)
    out = area / ((T - 1) * (hi - lo))
    return float(out) if out.ndim == 0 else out


# ===========================================================================
# xarray layer
# ===========================================================================

_PAPER_CAPONE = "Capone, Hirche & Pleiss (2023), Sharp calibrated Gaussian processes"
_PAPER_PION = "Pion & Vazquez (2024), Gaussian process interpolation with conformal prediction"
_PAPER_SONG = "Song, Diethe, Kull & Flach (2019), Distribution calibration for regression"
_PAPER_GNEITING = "Gneiting & Raftery (2007), Strictly proper scoring rules, prediction, and estimation"


def _check_pred(pred) -> xr.Dataset:
    if not isinstance(pred, xr.Dataset):
        raise TypeError(
            f"pred must be a predictive xarray.Dataset; got {type(pred).__name__}. "
            "Build one with calibprob.normal / from_quantiles / from_draws / from_cdf_grid."
        )
    return pred


def _check_y(pred: xr.Dataset, y, name: str = "y") -> np.ndarray:
    """Observed values as a finite 1-D float array with one entry per obs of ``pred``.

    NumPy, or a 1-D DataArray with any dim name aligned by position
    (:func:`calibprob._validation.check_targets`, shared with the ``.calib`` accessor).
    """
    return check_targets(y, pred.sizes["obs"], name, obs=pred["obs"].values)


def _transform(pred: xr.Dataset):
    """``(name, transforms module)`` of a back-transformed Dataset, or ``(None, None)``."""
    from calibprob import transforms

    t = transforms.dataset_transform(pred)
    return (t, transforms) if t is not None else (None, None)


def _ppf_rows(pred: xr.Dataset, q: np.ndarray, lv: np.ndarray, p: np.ndarray, sl: slice) -> np.ndarray:
    """Quantiles of the rows ``sl`` at probabilities ``p`` (a back-transformed law maps through g^-1)."""
    t, tr = _transform(pred)
    if t is None:
        return quantile_ppf(q[sl], lv, p)
    return tr.inverse(t, quantile_ppf(tr.forward(t, q[sl]), lv, p))


def _ppf(pred: xr.Dataset, p) -> np.ndarray:
    """Quantiles at probabilities ``p`` (1-D, inside (0, 1)) as an (n, P) ndarray."""
    p = np.asarray(p, float)
    if pred.calib.is_normal:
        return pred["loc"].values[:, None] + pred["scale"].values[:, None] * special.ndtri(p)[None, :]
    q, lv = pred.calib.quantiles, pred.calib.levels
    out = np.empty((q.shape[0], p.size))
    # row chunks keep the temporaries (slopes, gathers) small and in cache
    for start in range(0, q.shape[0], _CHUNK):
        out[start : start + _CHUNK] = _ppf_rows(pred, q, lv, p, slice(start, start + _CHUNK))
    return out


def _logpdf(pred: xr.Dataset, y: np.ndarray) -> np.ndarray:
    """Log predictive density at ``y`` (n,): exact for the normal family, else chunked."""
    if pred.calib.is_normal:
        loc, scale = pred["loc"].values, pred["scale"].values
        z = (y - loc) / scale
        return -0.5 * z * z - 0.5 * np.log(2.0 * np.pi) - np.log(scale)
    out = np.empty(y.size)
    for start in range(0, y.size, _CHUNK):
        sl = slice(start, start + _CHUNK)
        out[sl] = _logpdf_rows(pred, sl, y[sl])
    return out


def _logpdf_rows(pred: xr.Dataset, sl: slice, y: np.ndarray) -> np.ndarray:
    """Log predictive density of the rows ``sl`` at their ``y`` (one block of :func:`evaluate`)."""
    if pred.calib.is_normal:
        loc, scale = pred["loc"].values[sl], pred["scale"].values[sl]
        z = (y - loc) / scale
        return -0.5 * z * z - 0.5 * np.log(2.0 * np.pi) - np.log(scale)
    t, tr = _transform(pred)
    if t is not None:  # log f_Z(g(y)) + log g'(y): the Jacobian of the transform
        return tr.logpdf(tr.forward(t, pred.calib.quantiles[sl]), pred.calib.levels, y, t)
    return quantile_logpdf(pred.calib.quantiles[sl], pred.calib.levels, y)


def _moments_rows(pred: xr.Dataset, q: np.ndarray, lv: np.ndarray, sl: slice):
    """Mean and std of the rows ``sl``: stored when present, else exact from the quantile function."""
    if "mean" in pred and "std" in pred:
        return np.asarray(pred["mean"].values[sl], float), np.asarray(pred["std"].values[sl], float)
    t, tr = _transform(pred)
    mean, std = quantile_moments(q[sl], lv) if t is None else tr.moments(tr.forward(t, q[sl]), lv, t)
    if "mean" in pred:
        mean = np.asarray(pred["mean"].values[sl], float)
    if "std" in pred:
        std = np.asarray(pred["std"].values[sl], float)
    return mean, std


def _scalar(value: float, name: str, attrs: dict) -> xr.DataArray:
    return xr.DataArray(float(value), name=name, attrs=attrs)


def _check_unit_grid(levels, name: str) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(levels, dtype=float))
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence; got shape {arr.shape}.")
    check_finite(arr, name)
    bad = (arr < 0) | (arr > 1)
    if bad.any():
        raise ValueError(f"{name} must lie in [0, 1]; got {float(arr[bad][0])!r}. Pass probabilities.")
    if arr.size > 1 and np.any(np.diff(arr) <= 0):
        raise ValueError(f"{name} must be strictly increasing; sort them and drop duplicates.")
    return arr


def pit(pred: xr.Dataset, y) -> xr.DataArray:
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


def calibration_curve(pred: xr.Dataset, y, levels=None, *, dim: str = "ece_level") -> xr.DataArray:
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


def ece(pred: xr.Dataset, y, *, n_ece_levels: int = 21) -> xr.DataArray:
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
    pred: xr.Dataset, y, confidence_level=DEFAULT_CONFIDENCE_LEVELS, *, dim: str = "confidence_level"
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
    q = _ppf(pred, np.concatenate([(1 - c) / 2, (1 + c) / 2]))
    cov = interval_coverage(yv, q[:, : c.size], q[:, c.size :])
    return xr.DataArray(cov, dims=(dim,), coords={dim: c}, name="coverage", attrs=dict(_ATTRS["coverage"]))


def width(
    pred: xr.Dataset, confidence_level=DEFAULT_CONFIDENCE_LEVELS, *, dim: str = "confidence_level"
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
    q = _ppf(pred, np.concatenate([(1 - c) / 2, (1 + c) / 2]))
    w = mean_interval_width(q[:, : c.size], q[:, c.size :])
    return xr.DataArray(w, dims=(dim,), coords={dim: c}, name="width", attrs=dict(_ATTRS["width"]))


def iae(pred: xr.Dataset, y) -> xr.DataArray:
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


def nll(pred: xr.Dataset, y) -> xr.DataArray:
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


def crps(pred: xr.Dataset, y) -> xr.DataArray:
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
        vals = _crps_rows(pred, yv, pred.calib.quantiles, pred.calib.levels, slice(None), _CHUNK)
    return _scalar(np.mean(vals), "crps", dict(_ATTRS["crps"]))


def _crps_rows(pred, y, q, lv, sl, chunk):
    """Exact CRPS of the rows ``sl`` (quantile family; a back-transformed law by its own closed form)."""
    t, tr = _transform(pred)
    if t is None:
        return crps_quantile(y, q[sl], lv, chunk_size=chunk)
    out = np.empty(y.size)
    for start in range(0, y.size, chunk):  # g(q) is a block-sized temporary
        b = slice(start, start + chunk)
        out[b] = tr.crps(y[b], tr.forward(t, q[sl][b]), lv, t, chunk_size=chunk)
    return out


def pinball(pred: xr.Dataset, y, levels=None) -> xr.DataArray:
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
    loss = pinball_loss(yv, _ppf(pred, tau), tau)
    return _scalar(np.mean(loss), "pinball", _ATTRS["pinball"] | {"pinball_levels": tau})


def _moments(pred: xr.Dataset, chunk_size: int = _CHUNK) -> tuple[np.ndarray, np.ndarray]:
    """Predictive mean and std: stored when present, else exact from the quantile function.

    Both come from one pass of :func:`~calibprob.predictive.quantile_moments`,
    in row chunks (cache-friendly, O(chunk_size x L) memory), instead of two
    full-size passes through ``pred.calib.mean()`` and ``pred.calib.std()``.
    """
    if "mean" in pred and "std" in pred:
        return np.asarray(pred["mean"].values, float), np.asarray(pred["std"].values, float)
    q, lv = pred.calib.quantiles, pred.calib.levels
    mean, std = np.empty(q.shape[0]), np.empty(q.shape[0])
    for start in range(0, q.shape[0], chunk_size):
        sl = slice(start, start + chunk_size)
        mean[sl], std[sl] = _moments_rows(pred, q, lv, sl)
    return mean, std


def _point(pred: xr.Dataset, point: str) -> np.ndarray:
    check_choice(point, "point", ("mean", "median"))
    if point == "mean":
        return _moments(pred)[0]
    return _ppf(pred, [0.5])[:, 0]


def mse(pred: xr.Dataset, y, *, point: str = "mean") -> xr.DataArray:
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


def rmse(pred: xr.Dataset, y, *, point: str = "mean") -> xr.DataArray:
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


def _ueb_bounds(pred: xr.Dataset):
    q = pred.calib.quantiles
    return q[:, 0], q[:, -1]


def ueb_violation(pred: xr.Dataset, y) -> xr.DataArray:
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
    lo, hi = _ueb_bounds(pred)
    lv = pred.calib.levels
    return _scalar(
        ueb_violation_rate(yv, lo, hi),
        "ueb_violation",
        _ATTRS["ueb_violation"] | {"lower_level": lv[0], "upper_level": lv[-1]},
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
    lo, hi = _ueb_bounds(_check_pred(pred))
    lv = pred.calib.levels
    return _scalar(np.mean(hi - lo), "ueb_width", _ATTRS["ueb_width"] | {"lower_level": lv[0], "upper_level": lv[-1]})


# ===========================================================================
# Public entry point
# ===========================================================================

_ATTRS = {
    "ece": {
        "long_name": "expected calibration error",
        "definition": "mean_j (mean_i 1[y_i <= Q_i(p_j)] - p_j)^2, p_j = j/(m-1), j = 0..m-1 "
        "(the mean over levels; Capone eq. 8 writes a sum, Table 1 uses the mean)",
        "paper": _PAPER_CAPONE + ", eq. (8)-(9), Table 1; Kuleshov et al. (2018)",
    },
    "iae": {
        "long_name": "integrated absolute error (miscalibration area)",
        "definition": "mean_k |coverage(1 - a_k) - (1 - a_k)|, a = linspace(0.02, 0.98, 20), central intervals",
        "paper": _PAPER_PION + ", Table 1; Marrel & Iooss (2024)",
    },
    "nll": {
        "long_name": "negative log predictive density",
        "definition": "-mean_i log f_i(y_i)",
        "paper": _PAPER_CAPONE + ", Table 1; " + _PAPER_SONG + ", Table 1",
    },
    "crps": {
        "long_name": "continuous ranked probability score",
        "definition": "mean_i int (F_i(x) - 1[y_i <= x])^2 dx = mean_i 2 int_0^1 rho_tau(y_i - Q_i(tau)) dtau (exact)",
        "paper": _PAPER_GNEITING,
    },
    "pinball": {
        "long_name": "mean pinball loss",
        "definition": "mean_{i,t} rho_tau_t(y_i - Q_i(tau_t)), tau = 0.05, 0.10, ..., 0.95",
        "paper": _PAPER_SONG + ", Table 1 (PBL)",
    },
    "mse": {
        "long_name": "mean squared error of the point prediction",
        "definition": "mean_i (y_i - yhat_i)^2",
        "paper": _PAPER_SONG + ", Table 1",
    },
    "rmse": {
        "long_name": "root mean squared error of the point prediction",
        "definition": "sqrt(mean_i (y_i - yhat_i)^2)",
        "paper": _PAPER_PION + ", Fig. 1",
    },
    "std": {
        "long_name": "mean predictive standard deviation",
        "definition": "mean_i sd_i (sharpness)",
        "paper": _PAPER_CAPONE + ", Table 1 (STD)",
    },
    "coverage": {
        "long_name": "empirical coverage of central intervals",
        "definition": "mean_i 1[Q_i((1-c)/2) <= y_i <= Q_i((1+c)/2)]",
        "paper": _PAPER_PION + ", eq. (1) and delta_{n,alpha}",
    },
    "width": {
        "long_name": "mean width of central intervals",
        "definition": "mean_i (Q_i((1+c)/2) - Q_i((1-c)/2))",
        "paper": _PAPER_CAPONE + ", Table 1 (95% CI); " + _PAPER_PION + ", Table 1 (90%W)",
    },
    "ueb_violation": {
        "long_name": "rate of uniform error bound violation",
        "definition": "mean_i 1[y_i outside [Q_i(p_min), Q_i(p_max)]], p_min/p_max the extreme stored levels",
        "paper": _PAPER_CAPONE + ", appendix Table 2 (RUEBV)",
    },
    "ueb_width": {
        "long_name": "mean length of the 100% interval",
        "definition": "mean_i (Q_i(p_max) - Q_i(p_min)), p_min/p_max the extreme stored levels",
        "paper": _PAPER_CAPONE + ", appendix Table 2 (Length of 100% CI)",
    },
    "observed_fraction": {
        "long_name": "observed fraction below the predicted quantile (calibration curve)",
        "definition": "mean_i 1[y_i <= Q_i(p)], Q_i(0) = -inf, Q_i(1) = +inf",
        "paper": _PAPER_CAPONE + ", eq. (9); Kuleshov et al. (2018)",
    },
    "iae_coverage": {
        "long_name": "empirical coverage of the IAE's central intervals",
        "definition": "mean_i 1[Q_i((1-c)/2) <= y_i <= Q_i((1+c)/2)], c = iae_level = 1 - alpha",
        "paper": _PAPER_PION,
    },
}


def evaluate(
    pred: xr.Dataset,
    y,
    confidence_levels=DEFAULT_CONFIDENCE_LEVELS,
    *,
    n_ece_levels: int = 21,
    point: str = "mean",
    pinball_levels=None,
    chunk_size: int | None = None,
) -> xr.Dataset:
    r"""Every calibration, sharpness and scoring metric of a prediction, in one Dataset.

    Parameters
    ----------
    pred : xarray.Dataset
        A predictive distribution following the contract of
        :mod:`calibprob.predictive` (dims ``obs``, ``level``), or the interval
        family (``lower``/``upper`` over ``obs``, ``confidence_level``, from an
        intervals-only calibrator's ``predict``), which gets the interval
        metrics of :func:`evaluate_intervals`.
    y : array_like or xarray.DataArray, shape (n_obs,)
        Observed values, finite, one per observation of ``pred``.
    confidence_levels : sequence of float, default (0.5, 0.8, 0.9, 0.95, 0.99)
        Confidence levels in (0, 1) of the central intervals whose
        ``coverage`` and ``width`` are reported.
    n_ece_levels : int, default 21
        Number m of evenly spaced ECE levels :math:`p_j = j/(m-1)`.
    point : {"mean", "median"}, default "mean"
        Point prediction scored by ``mse`` / ``rmse``.
    pinball_levels : array_like, optional
        Levels of the pinball loss; default 0.05, 0.10, ..., 0.95.
    chunk_size : int, optional
        Observations per block (default 4096). Memory beyond ``pred`` itself
        is O(chunk_size x L) plus a few numbers per observation, whatever the
        number of observations; the result does not depend on it.

    Returns
    -------
    xarray.Dataset
        Scalars (no dims): ``ece``, ``iae``, ``nll``, ``crps``, ``pinball``,
        ``mse``, ``rmse``, ``std`` (mean predictive standard deviation),
        ``ueb_violation``, ``ueb_width``; over ``confidence_level``:
        ``coverage``, ``width``; curves: ``observed_fraction(ece_level)``
        (reliability diagram, :func:`calibration_curve`) and
        ``iae_coverage(iae_level)`` (:func:`iae`). Every variable carries
        ``long_name``, ``definition`` and ``paper`` attributes. Lower is better
        for all scalars except that ``coverage`` should match its level.

    Raises
    ------
    ValueError
        If ``y`` is not finite or its length differs from the prediction's,
        if a confidence level is outside (0, 1), or if ``pred`` breaks the
        contract (:func:`calibprob.validate`).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=1000)
    >>> m = calibprob.evaluate(calibprob.normal(np.zeros(1000), np.ones(1000)), y)
    >>> float(m["coverage"].sel(confidence_level=0.9)) > 0.85
    True

    References
    ----------
    See the module docstring: Capone et al. 2023 (ECE, STD, NLL, 95% CI,
    Table 2), Pion & Vazquez 2024 (IAE, coverage, width), Song et al. 2019
    (NLL, MSE, pinball), Gneiting & Raftery 2007 (CRPS).
    """
    if is_interval_family(pred):
        # intervals-only methods (jackknife+, CV+, J+GP, FCP-GP): their predict(X) gives intervals,
        # not a quantile function, so only the interval metrics exist
        return evaluate_intervals(pred, y, confidence_levels)
    validate(_check_pred(pred))
    yv = _check_y(pred, y)
    c = check_confidence_levels(confidence_levels, "confidence_levels")
    p = ece_levels(n_ece_levels)
    check_choice(point, "point", ("mean", "median"))
    tau = PINBALL_LEVELS if pinball_levels is None else check_levels(pinball_levels, "pinball_levels")
    c_iae = iae_confidence_levels()
    n = yv.size

    chunk = _CHUNK if chunk_size is None else check_int(chunk_size, "chunk_size", minimum=1)

    # One quantile evaluation for every probability any metric needs (the
    # xarray-layer functions would each re-derive the segment slopes).
    inner = (p > 0) & (p < 1)
    blocks = {
        "ece": p[inner],
        "iae_lo": (1 - c_iae) / 2,
        "iae_hi": (1 + c_iae) / 2,
        "cov_lo": (1 - c) / 2,
        "cov_hi": (1 + c) / 2,
        "tau": tau,
        "median": np.array([0.5]) if point == "median" else np.empty(0),
    }
    probs = np.concatenate(list(blocks.values()))
    normal_family = pred.calib.is_normal
    if normal_family:
        loc, scale = pred["loc"].values, pred["scale"].values
    else:
        q_all, lv_all = pred.calib.quantiles, pred.calib.levels

    # Observations are processed in blocks of `chunk` rows: every (rows x levels)
    # temporary is O(chunk x L), and what outlives a block is O(n) per-observation
    # values (CRPS, log density, point, sd, pinball row mean, interval widths) or
    # integer counts (ECE, IAE, coverage). Each per-observation value is a row-wise
    # computation and the counts are exact, so the result does not depend on the
    # chunk size (tested bit for bit with chunk sizes that do not divide n).
    below = np.zeros(p.size, dtype=np.int64)
    iae_hits = np.zeros(c_iae.size, dtype=np.int64)
    cov_hits = np.zeros(c.size, dtype=np.int64)
    widths = np.empty((n, c.size))
    pin_rows = np.empty(n)
    point_pred = np.empty(n)
    sd = np.empty(n)
    crps_values = np.empty(n)
    logpdf = np.empty(n)
    for start in range(0, n, chunk):
        sl = slice(start, min(start + chunk, n))
        yc = yv[sl]
        if normal_family:
            Q = loc[sl, None] + scale[sl, None] * special.ndtri(probs)[None, :]
        else:
            Q = _ppf_rows(pred, q_all, lv_all, probs, sl)
        cols, k = {}, 0
        for name, pr in blocks.items():
            cols[name] = Q[:, k : k + pr.size]
            k += pr.size
        # y <= Q(0) = -inf never, y <= Q(1) = +inf always
        below[p >= 1] += yc.size
        below[inner] += np.count_nonzero(yc[:, None] <= cols["ece"], axis=0)
        iae_hits += np.count_nonzero((cols["iae_lo"] <= yc[:, None]) & (yc[:, None] <= cols["iae_hi"]), axis=0)
        cov_hits += np.count_nonzero((cols["cov_lo"] <= yc[:, None]) & (yc[:, None] <= cols["cov_hi"]), axis=0)
        widths[sl] = cols["cov_hi"] - cols["cov_lo"]
        pin_rows[sl] = np.mean(pinball_loss(yc, cols["tau"], tau), axis=1)
        if normal_family:
            mean_c, sd[sl] = loc[sl], scale[sl]
            crps_values[sl] = crps_normal(yc, loc[sl], scale[sl])
        else:
            mean_c, sd[sl] = _moments_rows(pred, q_all, lv_all, sl)
            crps_values[sl] = _crps_rows(pred, yc, q_all, lv_all, sl, chunk)
        point_pred[sl] = mean_c if point == "mean" else cols["median"][:, 0]
        logpdf[sl] = _logpdf_rows(pred, sl, yc)
        del Q, cols

    frac = below / n
    iae_cov = iae_hits / n
    mse_value = mean_squared_error(yv, point_pred)
    ueb_lo, ueb_hi = _ueb_bounds(pred)
    lv = pred.calib.levels
    ueb_attrs = {"lower_level": lv[0], "upper_level": lv[-1]}

    data = {
        "ece": _scalar(calibration_error(frac, p), "ece", _ATTRS["ece"] | {"n_ece_levels": p.size}),
        "iae": _scalar(integrated_absolute_error(iae_cov, c_iae), "iae", dict(_ATTRS["iae"])),
        "nll": _scalar(-np.mean(logpdf), "nll", dict(_ATTRS["nll"])),
        "crps": _scalar(np.mean(crps_values), "crps", dict(_ATTRS["crps"])),
        "pinball": _scalar(np.mean(pin_rows), "pinball", _ATTRS["pinball"] | {"pinball_levels": tau}),
        "mse": _scalar(mse_value, "mse", _ATTRS["mse"] | {"point": point}),
        "rmse": _scalar(np.sqrt(mse_value), "rmse", _ATTRS["rmse"] | {"point": point}),
        "std": _scalar(np.mean(sd), "std", dict(_ATTRS["std"])),
        "coverage": xr.DataArray(cov_hits / n, dims=("confidence_level",), attrs=dict(_ATTRS["coverage"])),
        "width": xr.DataArray(np.mean(widths, axis=0), dims=("confidence_level",), attrs=dict(_ATTRS["width"])),
        "ueb_violation": _scalar(
            ueb_violation_rate(yv, ueb_lo, ueb_hi), "ueb_violation", _ATTRS["ueb_violation"] | ueb_attrs
        ),
        "ueb_width": _scalar(np.mean(ueb_hi - ueb_lo), "ueb_width", _ATTRS["ueb_width"] | ueb_attrs),
        "observed_fraction": xr.DataArray(frac, dims=("ece_level",), attrs=dict(_ATTRS["observed_fraction"])),
        "iae_coverage": xr.DataArray(iae_cov, dims=("iae_level",), attrs=dict(_ATTRS["iae_coverage"])),
    }
    out = xr.Dataset(
        data,
        coords={
            "confidence_level": ("confidence_level", c, {"description": "confidence level of the central interval"}),
            "ece_level": ("ece_level", p, {"description": "quantile level p_j = j/(m-1)"}),
            "iae_level": ("iae_level", c_iae, {"description": "confidence level 1 - alpha of the central interval"}),
        },
    )
    out.attrs.update(
        method=str(pred.attrs.get("method", "unknown")),
        family=str(pred.attrs.get("family", "quantile")),
        n_obs=int(n),
        point=point,
        description="calibprob.evaluate: calibration, sharpness and scoring metrics of one prediction",
    )
    return out


def interval_levels(confidence_levels=DEFAULT_CONFIDENCE_LEVELS) -> np.ndarray:
    """The confidence levels an interval-only method must provide for :func:`evaluate_intervals`.

    The union of ``confidence_levels`` and the IAE grid :func:`iae_confidence_levels`.

    Parameters
    ----------
    confidence_levels : sequence of float, default :data:`DEFAULT_CONFIDENCE_LEVELS`
        Levels in (0, 1) whose ``coverage`` and ``width`` are reported.

    Returns
    -------
    ndarray, sorted

    References
    ----------
    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, §2 and Table 1.

    Examples
    --------
    >>> from calibprob.metrics import interval_levels
    >>> levels = interval_levels([0.9])
    >>> levels.size, bool(0.9 in levels)
    (21, True)
    """
    c = check_confidence_levels(confidence_levels, "confidence_levels")
    return np.unique(np.round(np.concatenate([c, iae_confidence_levels()]), 12))


def is_interval_family(pred) -> bool:
    """Whether ``pred`` is the contract's interval family (``lower``/``upper``, no quantile function).

    Model-aware intervals-only calibrators mark their output with
    ``attrs["family"] == "interval"``; a Dataset with ``lower`` and ``upper``
    but neither ``quantile`` nor ``loc`` is read the same way.
    :func:`evaluate` gives such a Dataset the interval metrics of
    :func:`evaluate_intervals`.

    Parameters
    ----------
    pred : object
        Anything; only an ``xarray.Dataset`` can be the interval family.

    Returns
    -------
    bool

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.metrics import is_interval_family
    >>> pred = calibprob.normal(np.zeros(3), np.ones(3))
    >>> is_interval_family(pred), is_interval_family(pred.calib.interval([0.5, 0.9]))
    (False, True)

    References
    ----------
    Pion, A. and Vazquez, E. (2024), §4: intervals-only methods are compared on
    coverage, width and IAE.
    """
    if not isinstance(pred, xr.Dataset):
        return False
    if pred.attrs.get("family") == "interval":
        return True
    names = set(pred.data_vars)
    return {"lower", "upper"} <= names and not ({"quantile", "loc"} & names)


def evaluate_intervals(intervals: xr.Dataset, y, confidence_levels=DEFAULT_CONFIDENCE_LEVELS) -> xr.Dataset:
    r"""The interval metrics of a method that gives intervals but no quantile function.

    Jackknife+, CV+, J+GP, asymJ+GP and the full-conformal GP define central
    intervals at each confidence level, not a predictive distribution, so only
    ``coverage``, ``width`` and the IAE (Pion & Vazquez 2024) are defined for
    them; :func:`evaluate` gives the rest for methods with a quantile function.

    Parameters
    ----------
    intervals : xarray.Dataset
        ``lower`` and ``upper`` over (``obs``, ``confidence_level``), at least at
        :func:`interval_levels` ``(confidence_levels)``. An unbounded interval
        (``-inf``/``inf``, the honest conformal answer when too few points
        resolve a level) counts as covering with infinite width.
    y : array_like, shape (n_obs,)
    confidence_levels : sequence of float
        Levels of the reported ``coverage`` and ``width``.

    Returns
    -------
    xarray.Dataset
        ``iae`` (scalar), ``coverage`` and ``width`` over ``confidence_level``,
        ``iae_coverage`` over ``iae_level`` — the same names, dims and
        attributes as in :func:`evaluate`.

    Raises
    ------
    ValueError
        Missing ``lower``/``upper``, a level not provided, non-finite ``y`` or a
        length mismatch.

    Examples
    --------
    >>> import numpy as np, xarray as xr, calibprob
    >>> from calibprob.metrics import evaluate_intervals, interval_levels
    >>> c = interval_levels([0.9]); z = calibprob.normal(np.zeros(500), np.ones(500)).calib.interval(c)
    >>> y = np.random.default_rng(0).normal(size=500)
    >>> m = evaluate_intervals(z, y, [0.9])
    >>> 0.85 < float(m["coverage"].sel(confidence_level=0.9)) < 0.95
    True

    References
    ----------
    Pion, A., Vazquez, E. (2024), Table 1 (IAE, coverage, width).
    """
    if not isinstance(intervals, xr.Dataset) or not {"lower", "upper"} <= set(intervals.data_vars):
        raise ValueError(
            "intervals must be an xarray.Dataset with 'lower' and 'upper' variables over "
            "(obs, confidence_level), e.g. from predict_interval(X, confidence_level=[...])."
        )
    lo_all = intervals["lower"].transpose("obs", "confidence_level")
    hi_all = intervals["upper"].transpose("obs", "confidence_level")
    yv = check_targets(y, lo_all.sizes["obs"], "y", obs=intervals["obs"].values if "obs" in intervals.coords else None)
    c = check_confidence_levels(confidence_levels, "confidence_levels")
    c_iae = iae_confidence_levels()
    have = np.round(np.asarray(intervals["confidence_level"].values, float), 12)

    def at(levels):
        idx = []
        for lv in np.round(levels, 12):
            hit = np.flatnonzero(np.isclose(have, lv, rtol=0, atol=1e-9))
            if hit.size == 0:
                raise ValueError(
                    f"intervals lack confidence_level={lv:g}; predict them at "
                    "calibprob.metrics.interval_levels(confidence_levels)."
                )
            idx.append(hit[0])
        return lo_all.values[:, idx], hi_all.values[:, idx]

    lo, hi = at(c)
    lo_i, hi_i = at(c_iae)
    iae_cov = interval_coverage(yv, lo_i, hi_i)
    with np.errstate(invalid="ignore"):
        widths = mean_interval_width(lo, hi)
    out = xr.Dataset(
        {
            "iae": _scalar(integrated_absolute_error(iae_cov, c_iae), "iae", dict(_ATTRS["iae"])),
            "coverage": xr.DataArray(
                interval_coverage(yv, lo, hi), dims=("confidence_level",), attrs=dict(_ATTRS["coverage"])
            ),
            "width": xr.DataArray(widths, dims=("confidence_level",), attrs=dict(_ATTRS["width"])),
            "iae_coverage": xr.DataArray(iae_cov, dims=("iae_level",), attrs=dict(_ATTRS["iae_coverage"])),
        },
        coords={
            "confidence_level": ("confidence_level", c, {"description": "confidence level of the central interval"}),
            "iae_level": ("iae_level", c_iae, {"description": "confidence level 1 - alpha of the central interval"}),
        },
    )
    out.attrs.update(
        method=str(intervals.attrs.get("method", "unknown")),
        family="intervals",
        n_obs=int(yv.size),
        description="calibprob.evaluate_intervals: interval metrics of an interval-only method",
    )
    return out
