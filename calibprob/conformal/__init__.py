"""Conformal post-processors: split, jackknife(+)/CV+, GP-specific (J+GP, asymJ+GP, FCP-GP), CPS.

Every class follows the scikit-learn contract of :mod:`calibprob._base` and
returns xarray results: ``predict_interval`` gives ``lower``/``upper`` over
(obs, confidence_level); ``predict`` (where a quantile function exists) gives
the predictive-distribution contract of :mod:`calibprob.predictive`.

Scores live in :mod:`calibprob.conformal.scores`; the NumPy layer (thresholds,
jackknife+ bounds, kriging system, closed-form LOO, FCP-GP sweep) is public in
the submodules.
"""

from calibprob.conformal._common import CallableRegressor
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
    "CallableRegressor",
    "Score",
    "AbsoluteScore",
    "NormalizedScore",
    "SignedNormalizedScore",
    "SignedAbsoluteScore",
    "get_score",
]
