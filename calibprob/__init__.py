"""calibprob: calibrated and sharp regression uncertainty for the PyMC / ArviZ world.

Every predictor and calibrator returns a predictive distribution in one data
contract (an ``xarray.Dataset`` with ``quantile(obs, level)``, evaluated through
the ``.calib`` accessor); :func:`calibprob.evaluate` scores any of them the same
way. Heavy submodules (PyMC models) are imported lazily.
"""

from __future__ import annotations

import importlib

from calibprob import registry as _registry
from calibprob._core import deprecation as _deprecation
from calibprob._core.estimator import ConvergenceWarning, DistributionCalibrator, ModelAwareCalibrator, NotFittedError
from calibprob._version import __version__
from calibprob.predictive import (
    DEFAULT_LEVELS,
    CalibprobWarning,
    from_cdf_grid,
    from_draws,
    from_quantiles,
    heldout_elpd,
    normal,
    to_datatree,
    validate,
)

# Old import paths (modules moved in the reorganisation by role) keep working for one release, with a warning.
_deprecation.install()

# name -> module that defines it; imported on first access (keeps `import calibprob` light).
# The estimator classes come from the registry (calibprob.registry, the one source).
_LAZY = {
    "evaluate": "calibprob.metrics",
    "load": "calibprob._core.persistence",
    "load_dataset": "calibprob.datasets",
    "list_datasets": "calibprob.datasets",
    "load_csv": "calibprob.datasets",
    "from_loo": "calibprob.predictive.loo",
    "back_transform": "calibprob.transforms",
    "transform_target": "calibprob.transforms",
    "TransformedTargetRegressor": "calibprob.bases.transformed",
    "conformal_bayes": "calibprob.calibrators.conformal.bayes.from_pymc",
    "bins": "calibprob.calibrators.grouping",
    "min_group_size": "calibprob.calibrators.grouping",
    "list_calibrators": "calibprob.registry",  # issue 40 (surface): the registry's calibrators, filterable
    "show_progress": "calibprob._core.progress",  # issue 37 item 5: progress lines inside long calls
    **_registry.exports("calibprob"),
}

__all__ = [
    "DEFAULT_LEVELS",
    "ConvergenceWarning",
    "DistributionCalibrator",
    "ModelAwareCalibrator",
    "NotFittedError",
    "CalibprobWarning",
    "normal",
    "from_quantiles",
    "from_draws",
    "from_cdf_grid",
    "to_datatree",
    "heldout_elpd",
    "validate",
    "__version__",
    *_LAZY,
]


#: Subpackages reachable as attributes after ``import calibprob`` (imported on first use, as SciPy does).
SUBPACKAGES = (
    "bases",
    "bo",
    "calibrators",
    "compare",
    "datasets",
    "metrics",
    "monitoring",
    "plots",
    "predictive",
    "registry",
    "transforms",
    "weights",
)
#: Subpackages that moved (``calibprob.gp`` is now ``calibprob.bases.gp``): still reachable as attributes for one
#: release, through the old-path finder (which warns); not listed by ``dir(calibprob)``.
_MOVED_SUBPACKAGES = ("gp", "conformal", "online")


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in SUBPACKAGES or name in _MOVED_SUBPACKAGES:
        return importlib.import_module(f"calibprob.{name}")
    raise AttributeError(f"module 'calibprob' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(SUBPACKAGES))
