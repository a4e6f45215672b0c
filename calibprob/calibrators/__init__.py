"""Calibrators: post-processors that map a base model's predictive distribution to a calibrated one.

Submodules (imported lazily, on first access of one of their names, so that
``import calibprob.calibrators`` stays light and no PyMC model is built):

* ``calibprob.calibrators.recalibration`` — the recalibration baselines:
  isotonic (Kuleshov et al. 2018, RK), Vovk's randomized calibrator (Vovk et
  al. 2020, RV), constant offsets around the mean (Marx et al. 2022, RM) and
  variance scaling.
* :mod:`calibprob.calibrators.gp_beta` — GP-Beta distribution calibration (Song et
  al. 2019) as a PyMC model, on any predictive Dataset of the base (Gaussian,
  quantiles or draws: the Beta link needs only the base's F(y) and f(y)).
* :mod:`calibprob.calibrators.sharp_gp` — the sharp calibrated GP (Capone et al.
  2023), a *model-aware* calibrator around a fitted calibprob GP.

The distribution post-processors follow ``calibprob._core.estimator.DistributionCalibrator``:
``fit(pred_cal, y_cal)`` on the base's prediction for calibration data and
``predict(pred)`` returning the predictive-distribution contract of
:mod:`calibprob.predictive`; the sharp GP follows
``calibprob._core.estimator.ModelAwareCalibrator`` (``estimator=``, ``fit(X, y)``,
``predict(X)``).
"""

from __future__ import annotations

import importlib

from calibprob import registry as _registry

# name -> submodule defining it, from the registry (calibprob.registry, the one source)
_LAZY = _registry.exports("calibprob.calibrators")

__all__ = sorted(_LAZY)
#: the subpackages and modules reachable as attributes (imported on first use, like the classes)
_SUBMODULES = frozenset({"conformal", "grouping", "online", "timeseries", "gp_beta", "sharp_gp", "recalibration"})


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'calibprob.calibrators' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
