r"""Conformal Bayes (Fong & Holmes 2021): full-conformal prediction sets from one posterior.

* :mod:`~calibprob.calibrators.conformal.bayes.estimator` -- :class:`ConformalBayes`, fitted on a posterior's
  pointwise log-likelihood (add-one-in importance weights, conformal p-values on a grid, refined ends);
* :mod:`~calibprob.calibrators.conformal.bayes.from_pymc` -- :func:`conformal_bayes`, the PyMC (and bambi)
  door: the log-likelihood on the grid from a PyMC model and its posterior (PyMC imported on use);
* ``_numerics`` (importance weights, scores, ranks), ``_grid`` (the grid rules), ``_inputs`` (checks and
  alignment of the DataTree), ``_bambi`` (a bambi model's names).

Fong, E. & Holmes, C. (2021). Conformal Bayesian computation. NeurIPS 34.
"""

from __future__ import annotations

from calibprob.calibrators.conformal.bayes.estimator import REFINE_STEPS as REFINE_STEPS  # importable, not in __all__
from calibprob.calibrators.conformal.bayes.estimator import ConformalBayes
from calibprob.calibrators.conformal.bayes.from_pymc import conformal_bayes

__all__ = ["ConformalBayes", "conformal_bayes"]  # REFINE_STEPS stays importable, a documented constant of the estimator
