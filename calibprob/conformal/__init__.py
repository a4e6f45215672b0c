"""Conformal calibrators: split, jackknife(+)/CV+, GP-specific (J+GP, asymJ+GP, FCP-GP), CPS.

Two families (:mod:`calibprob._core.estimator`):

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
the submodules. The classes this package exports are those registered for it in
:mod:`calibprob.registry` (the one source); the submodules are light (NumPy, SciPy),
so they are imported at once.
"""

import importlib as _importlib

from calibprob import registry as _registry
from calibprob.conformal import _common, distribution, gp, jackknife, predictive_system, scores, split  # noqa: F401
from calibprob.conformal.scores import get_score

_CLASSES = _registry.exports("calibprob.conformal")
globals().update({name: getattr(_importlib.import_module(mod), name) for name, mod in _CLASSES.items()})

__all__ = [*_CLASSES, "get_score"]
