"""Conformal calibrators of the reorganised house (issue 27): CQR and conditional conformal.

* :mod:`calibprob.calibrators.conformal.cqr` — conformalized quantile regression
  (Romano, Patterson & Candès 2019) and its variants CQR-r / CQR-m (Sesia & Candès
  2020), a distribution post-processor on any quantile predictive;
* :mod:`calibprob.calibrators.conformal.conditional` — conditional conformal over a
  finite function class (Gibbs, Cherian & Candès 2023).

The classes are exported lazily by ``calibprob`` and ``calibprob.calibrators``
(:mod:`calibprob.registry`); this package imports nothing at import time.
"""
