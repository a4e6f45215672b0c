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

The classes are exported lazily by ``calibprob`` and ``calibprob.calibrators``
(:mod:`calibprob.registry`); this package imports nothing at import time.
"""
