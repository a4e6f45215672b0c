"""Grouping: Mondrian (group-conditional) calibration and the taxonomies that make the groups.

One layer across the calibrator packages: every distribution post-processor (split conformal, CPS, CQR,
conditional conformal, the recalibrators, GP-Beta, the online recalibrators) takes ``groups=`` and calibrates
within each group through :class:`~calibprob.Mondrian` (Vovk, Gammerman & Shafer
2005, §4.5); :func:`~calibprob.bins` makes a taxonomy from a feature, the predicted
scale or the predicted value. The minimum group sizes are ``calibprob._core.ranks.least_n``.

Before 0.2.0 these modules lived in ``calibprob.calibrators.conformal`` (``mondrian``, ``bins``); the old
paths still import, with a ``FutureWarning`` (``calibprob._core.deprecation.MOVED``).
"""

from __future__ import annotations

from calibprob.calibrators.grouping.bins import Bins, bins
from calibprob.calibrators.grouping.mondrian import Mondrian, min_group_size, min_group_size_for_level

__all__ = ["Bins", "Mondrian", "bins", "min_group_size", "min_group_size_for_level"]
