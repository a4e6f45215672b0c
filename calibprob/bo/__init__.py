"""Calibrated Bayesian optimisation (Deshpande, Marx & Kuleshov 2024).

- :func:`minimize` — Algorithm 3 with Algorithm 4's calibration set (closed-form
  LOO, time-series splits, or the issued forecasts), acquisitions LCB/UCB, EI,
  PI under the recalibrated predictive, and Capone et al.'s sharp-GP bound;
  returns an ``xr.DataTree`` (evaluations, per-step forecasts and calibration
  error, recalibrator state).
- ``calibration="conformal"`` / ``"conformal-loo"`` of :func:`minimize`: queries drawn from
  the softmax of the confidence bound (a known design density) and issued with their
  feedback-shift full-conformal set (Fannjiang et al. 2022), closed form, no refits
  (``calibprob.bo.conformal``); ``interval_level=`` logs every query's interval and whether
  it covered, and :func:`bo_table` reports the query coverage.
- :func:`run_experiment`, :func:`bo_table`, :func:`format_bo_table` — many
  seeds in parallel through Dask, and the paper's Table 1.
- Plots: :func:`plot_best_so_far`, :func:`plot_calibration_error`,
  :func:`plot_snapshot_1d` (the paper's Fig. 6).
- Acquisition layer: :class:`StandardizedLaw`, :func:`expected_improvement`,
  :func:`probability_of_improvement`, :func:`lower_confidence_bound`,
  :func:`minimize_on_box`.

Test functions live in ``calibprob.datasets.functions``
(:func:`calibprob.datasets.get_function`).
"""

from calibprob.bo.acquisition import (
    ACQUISITIONS,
    StandardizedLaw,
    acquisition_loss,
    expected_improvement,
    lower_confidence_bound,
    minimize_on_box,
    probability_of_improvement,
)
from calibprob.bo.experiment import METHODS, bo_table, format_bo_table, run_experiment, win_fraction
from calibprob.bo.loop import CALIBRATIONS, check_bounds, default_gp, minimize
from calibprob.bo.plots import plot_best_so_far, plot_calibration_error, plot_snapshot_1d, snapshot

__all__ = [
    "minimize",
    "CALIBRATIONS",
    "ACQUISITIONS",
    "METHODS",
    "check_bounds",
    "default_gp",
    "run_experiment",
    "bo_table",
    "format_bo_table",
    "win_fraction",
    "plot_best_so_far",
    "plot_calibration_error",
    "plot_snapshot_1d",
    "snapshot",
    "StandardizedLaw",
    "acquisition_loss",
    "expected_improvement",
    "probability_of_improvement",
    "lower_confidence_bound",
    "minimize_on_box",
]
