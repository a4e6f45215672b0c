"""Conformal calibrators: split, jackknife(+)/CV+, GP-specific, CPS, CQR, Mondrian, conditional, conformal Bayes.

Three families (``calibprob._core.estimator``; the registry's ``family``):

* distribution post-processors -- ``fit(pred_cal, y_cal)``, ``predict(pred)`` on the base's predictive Dataset:
  :class:`~calibprob.calibrators.conformal.split_calibrator.SplitConformalCalibrator`,
  :class:`~calibprob.calibrators.conformal.predictive_system.ConformalPredictiveSystem` (Vovk et al. 2020),
  :class:`~calibprob.calibrators.conformal.cqr.ConformalizedQuantileRegression` (Romano, Patterson & Candès 2019;
  CQR-r / CQR-m, Sesia & Candès 2020), :class:`~calibprob.calibrators.conformal.conditional.ConditionalConformal`
  (Gibbs, Cherian & Candès 2023), and :class:`Mondrian`, which calibrates any of them within each group (Vovk et
  al. 2005) over the taxonomies of :func:`~calibprob.bins`;
* model-aware calibrators -- ``estimator=`` (``prefit=True``: already fitted), ``fit(X, y)``, ``predict(X)``:
  :class:`~calibprob.calibrators.conformal.split.SplitConformalRegressor`,
  :class:`~calibprob.calibrators.conformal.jackknife.CrossConformalRegressor` (jackknife, jackknife+, CV+),
  :class:`~calibprob.calibrators.conformal.gp.JackknifePlusGP` (J+GP, asymJ+GP),
  :class:`~calibprob.calibrators.conformal.gp.FullConformalGP`,
  :class:`~calibprob.calibrators.conformal.loo_jackknife.LOOJackknifePlus` (jackknife+ from one posterior);
* posterior calibrators -- :class:`~calibprob.calibrators.conformal.bayes.ConformalBayes` (Fong & Holmes 2021)
  and :func:`calibprob.conformal_bayes` (``calibprob.calibrators.conformal.bayes.from_pymc``, PyMC on use).

The intervals-only methods' ``predict`` returns ``lower``/``upper`` over (obs, confidence_level) with
``attrs["family"] == "interval"``, which :func:`calibprob.evaluate` scores like any prediction. Scores live in
``calibprob.calibrators.conformal.scores``; the NumPy layer (thresholds, jackknife+ bounds, the GP bounds, the
FCP-GP sweep) is public in the submodules, and one helper predicts intervals in row chunks
(``chunked_intervals``).

The classes this package exports are those registered for it in :mod:`calibprob.registry` (the one source),
imported on first access; so are the submodules.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

from calibprob import registry as _registry
from calibprob.calibrators.grouping.bins import Bins, bins
from calibprob.calibrators.grouping.mondrian import Mondrian, min_group_size, min_group_size_for_level

# name -> submodule defining it, from the registry; get_score with the scores
_LAZY = {**_registry.exports("calibprob.calibrators.conformal"), "get_score": "calibprob.calibrators.conformal.scores"}

__all__ = ["Mondrian", "Bins", "bins", "min_group_size", "min_group_size_for_level", *sorted(_LAZY)]


class _Package(types.ModuleType):
    """This package, keeping its function ``bins`` when its submodule ``bins`` is imported again by an old path.

    ``import calibprob.conformal.bins`` (the 0.1 path, aliased by ``calibprob._core.deprecation``) makes the
    import system set the submodule as the parent package's attribute ``bins`` -- over the function of that name
    imported above, so ``calibprob.calibrators.conformal.bins(...)`` would then fail, depending on import order.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and callable(self.__dict__.get(name)):
            return  # a function already holds the name: the submodule stays reachable through sys.modules
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")  # a submodule: calibprob.calibrators.conformal.split
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
