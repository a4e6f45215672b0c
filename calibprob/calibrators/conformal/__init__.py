"""Conformal calibrators, organised by role (issue 27): new conformal-type code lives here.

* :mod:`calibprob.calibrators.conformal.bayes` — conformal Bayes (Fong and Holmes 2021):
  full-conformal sets from one posterior by add-one-in importance sampling, and its grouped
  (partially exchangeable) version.
* :mod:`calibprob.calibrators.conformal.from_pymc` — :func:`calibprob.conformal_bayes`, the same
  from a PyMC model whose inputs are ``pm.Data`` (PyMC imported on use).
"""
