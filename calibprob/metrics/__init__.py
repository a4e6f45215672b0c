r"""Calibration, sharpness and scoring rules on the predictive-distribution contract.

Three layers, as everywhere in calibprob:

1. **Array layer** — pure NumPy functions on arrays, observations on axis 0,
   the observed values ``y`` first (``score(y, forecast)``):
   :func:`fraction_below`, :func:`calibration_curve_from_pit`,
   :func:`calibration_error`, :func:`interval_coverage`,
   :func:`mean_interval_width`, :func:`integrated_absolute_error`,
   :func:`crps_normal`, :func:`crps_quantile`, :func:`pinball_loss`, :func:`interval_score`,
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

The package keeps those layers in separate modules (all names are imported from
``calibprob.metrics``): ``_levels`` (constants and level grids), ``_calibration``,
``_scores``, ``_optimisation`` and ``_conditional`` (array layer), ``_reading`` (reading a
predictive Dataset by row blocks) and ``_attrs`` (variable attributes),
``_xr_calibration`` and ``_xr_scores`` (xarray layer), ``_evaluate`` (entry points).

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

from calibprob.metrics._calibration import (
    calibration_curve_from_pit,
    calibration_error,
    fraction_below,
    integrated_absolute_error,
    interval_coverage,
    mean_interval_width,
    ueb_violation_rate,
)
from calibprob.metrics._conditional import (
    coverage_by_group,
    coverage_gap,
    coverage_indicators,
    hsic,
    size_stratified_coverage,
    worst_group,
    worst_slab_coverage,
)
from calibprob.metrics._evaluate import evaluate, evaluate_intervals
from calibprob.metrics._levels import (
    DEFAULT_CONFIDENCE_LEVELS,
    IAE_MISCOVERAGE,
    METRIC_NAMES,
    PINBALL_LEVELS,
    ece_levels,
    iae_confidence_levels,
    interval_levels,
)
from calibprob.metrics._optimisation import best_so_far, cumulative_regret, normalized_auc, simple_regret
from calibprob.metrics._scores import crps_normal, crps_quantile, interval_score, mean_squared_error, pinball_loss
from calibprob.metrics._shift import covariate_shift
from calibprob.metrics._xr_calibration import (
    calibration_curve,
    coverage,
    ece,
    iae,
    pit,
    ueb_violation,
    ueb_width,
    width,
)
from calibprob.metrics._xr_scores import crps, mean_std, mse, nll, pinball, rmse
from calibprob.predictive import is_interval_family

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
    "interval_score",
    "mean_squared_error",
    "ueb_violation_rate",
    "best_so_far",
    "simple_regret",
    "cumulative_regret",
    "normalized_auc",
    # conditional-coverage diagnostics (array layer)
    "coverage_indicators",
    "coverage_by_group",
    "worst_group",
    "coverage_gap",
    "size_stratified_coverage",
    "worst_slab_coverage",
    "hsic",
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
    "covariate_shift",
    "is_interval_family",
    "METRIC_NAMES",
]
