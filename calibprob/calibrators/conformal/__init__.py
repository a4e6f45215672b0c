"""Conformal calibrators organised by role (issue 27): group-conditional (Mondrian) calibration.

* :mod:`calibprob.calibrators.conformal.mondrian` — :class:`Mondrian`, a wrapper that
  calibrates any distribution post-processor separately within each group (Vovk et al.
  2005, Mondrian conformal prediction), and the exact minimum group sizes;
* :mod:`calibprob.calibrators.conformal.bins` — :func:`bins`, Mondrian taxonomies
  (a categorical, quantile bins of a feature, of the predicted σ or of the predicted value).
"""

from __future__ import annotations

from calibprob.calibrators.conformal.bins import Bins, bins
from calibprob.calibrators.conformal.mondrian import Mondrian, min_group_size, min_group_size_for_level

__all__ = ["Mondrian", "Bins", "bins", "min_group_size", "min_group_size_for_level"]
