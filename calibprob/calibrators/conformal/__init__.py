"""Conformal calibrators, organised by role (issue 27): new conformal-type code lives here.

* :mod:`calibprob.calibrators.conformal.bayes` — conformal Bayes (Fong and Holmes 2021):
  full-conformal sets from one posterior by add-one-in importance sampling, and its grouped
  (partially exchangeable) version.
* :mod:`calibprob.calibrators.conformal.from_pymc` — :func:`calibprob.conformal_bayes`, the same
  from a PyMC model whose inputs are ``pm.Data`` (PyMC imported on use).
* :mod:`calibprob.calibrators.conformal.cqr` — conformalized quantile regression
  (Romano, Patterson & Candès 2019) and its variants CQR-r / CQR-m (Sesia & Candès
  2020), a distribution post-processor on any quantile predictive;
* :mod:`calibprob.calibrators.conformal.conditional` — conditional conformal over a
  finite function class (Gibbs, Cherian & Candès 2023).
* :mod:`calibprob.calibrators.conformal.mondrian` — :class:`Mondrian`, a wrapper that
  calibrates any distribution post-processor separately within each group (Vovk et al.
  2005, Mondrian conformal prediction), and the exact minimum group sizes;
* :mod:`calibprob.calibrators.conformal.bins` — :func:`bins`, Mondrian taxonomies
  (a categorical, quantile bins of a feature, of the predicted σ or of the predicted value).

The estimator classes are exported lazily by ``calibprob`` and ``calibprob.calibrators``
(:mod:`calibprob.registry`); the Mondrian pieces are imported here (NumPy/xarray only).
"""

from __future__ import annotations

from calibprob.calibrators.conformal.bins import Bins, bins
from calibprob.calibrators.conformal.mondrian import Mondrian, min_group_size, min_group_size_for_level

__all__ = ["Mondrian", "Bins", "bins", "min_group_size", "min_group_size_for_level"]
