"""Base models: the regressions whose predictive distributions the calibrators take in.

* ``calibprob.bases.linear`` -- ordinary least squares (Student-t predictive) and Bayesian ridge;
* ``calibprob.bases.pymc_linear`` -- PyMC linear regression (Normal or Laplace priors; posterior-predictive
  draws), kind ``pymc-linear``; ``calibprob.bases.pymc_hsgp`` -- PyMC's Hilbert-space approximate GP; both
  sampled through the one helper ``calibprob.bases._pymc_sampling``;
* :mod:`calibprob.bases.gp` -- exact and sparse (VFE) Gaussian processes, kernels, and the one closed-form
  leave-one-out (``calibprob.bases.gp.loo``, also used by the conformal GP methods);
* ``calibprob.bases.quantile_gbm`` -- quantile gradient boosting (scikit-learn);
* ``calibprob.bases.transformed`` -- any base fitted on a log / log1p transformed target;
* :mod:`calibprob.bases.user` -- your own model as a comparison base (``kind = "python"``).

The classes are exported lazily by ``calibprob`` (:mod:`calibprob.registry`, the one source); the submodules are
imported on first access, so ``import calibprob.bases`` builds no PyMC model.
"""

from __future__ import annotations

import importlib
from types import ModuleType

SUBMODULES = ("gp", "linear", "pymc_hsgp", "pymc_linear", "pymc_model", "quantile_gbm", "transformed", "user")


def __getattr__(name: str) -> ModuleType:
    if name in SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'calibprob.bases' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(SUBMODULES))
