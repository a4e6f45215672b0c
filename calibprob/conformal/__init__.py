"""Conformal calibrators: split, jackknife(+)/CV+, GP-specific (J+GP, asymJ+GP, FCP-GP), CPS.

Two families (:mod:`calibprob._base`):

* distribution post-processors — :class:`ConformalPredictiveSystem` and
  :class:`SplitConformalCalibrator`: ``fit(pred_cal, y_cal)``, ``predict(pred)``
  on the base's predictive Dataset (any member of the contract);
* model-aware calibrators — :class:`SplitConformalRegressor`,
  :class:`CrossConformalRegressor` (jackknife, jackknife+, CV+),
  :class:`JackknifePlusGP` (J+GP, asymJ+GP), :class:`FullConformalGP`:
  ``estimator=`` (``prefit=True``: already fitted), ``fit(X, y)`` (and
  ``calibrate(X_cal, y_cal)`` for split conformal), ``predict(X)``. The
  intervals-only methods' ``predict`` returns ``lower``/``upper`` over
  (obs, confidence_level) with ``attrs["family"] == "interval"``, which
  :func:`calibprob.evaluate` scores like any prediction.

Scores live in :mod:`calibprob.conformal.scores`; the NumPy layer (thresholds,
jackknife+ bounds, kriging system, closed-form LOO, FCP-GP sweep) is public in
the submodules.
"""

from calibprob.conformal._common import CallableRegressor
from calibprob.conformal.distribution import SplitConformalCalibrator
from calibprob.conformal.gp import FullConformalGP, JackknifePlusGP
from calibprob.conformal.jackknife import CrossConformalRegressor
from calibprob.conformal.predictive_system import ConformalPredictiveSystem
from calibprob.conformal.scores import (
    AbsoluteScore,
    NormalizedScore,
    Score,
    SignedAbsoluteScore,
    SignedNormalizedScore,
    get_score,
)
from calibprob.conformal.split import SplitConformalRegressor

__all__ = [
    "SplitConformalRegressor",
    "CrossConformalRegressor",
    "JackknifePlusGP",
    "FullConformalGP",
    "ConformalPredictiveSystem",
    "SplitConformalCalibrator",
    "CallableRegressor",
    "Score",
    "AbsoluteScore",
    "NormalizedScore",
    "SignedNormalizedScore",
    "SignedAbsoluteScore",
    "get_score",
]
