"""Online quantile recalibration (Deshpande, Marx & Kuleshov 2024, §4).

- :class:`OnlineQuantileRecalibrator` — ``recalibrate(forecast)`` /
  ``update(forecast, y)`` on any stream of forecasts in the predictive contract,
  state saved with ``to_dataset()`` and restored with ``from_dataset()``; ``rule="osd"``
  (Deshpande et al.'s update, the default) or ``rule="aci"`` (ACI on the PIT scale, every
  central pair of levels at once; see ``calibprob.calibrators.online._aci_pit``).
- :class:`AdaptiveConformalInterval` — adaptive conformal inference (Gibbs & Candès 2021):
  split-conformal intervals whose level moves with the misses, ``update(pred, y)`` per outcome,
  saved and loaded with its whole recursion (levels, score window, counters).
- :class:`ConformalPIDInterval` — conformal PID control (Angelopoulos, Candès & Tibshirani 2023):
  quantile tracking, a saturating integrator and a scorecaster (:class:`ARScorecaster`,
  :class:`BaseScorecaster`); also ``OnlineQuantileRecalibrator(rule="pid")`` on every level at once.
- :class:`AgACIInterval` — AgACI (Zaffran et al. 2022): ACI experts over a grid of step sizes,
  their ends aggregated by BOA on the pinball loss, separately for the lower and upper end.
- NumPy layer: :func:`osd_step`, :func:`osd_path`, :func:`publish`,
  :func:`coverage_bound`, :func:`theorem2_bound`, :func:`interpolate_map`,
  :func:`lemma4_counterexample`.
"""

from calibprob.calibrators.online._osd import (
    COUPLINGS,
    coverage_bound,
    interpolate_map,
    lemma4_counterexample,
    osd_path,
    osd_step,
    publish,
    theorem2_bound,
)
from calibprob.calibrators.online._pid import ARScorecaster, BaseScorecaster
from calibprob.calibrators.online.aci import AdaptiveConformalInterval, aci_threshold
from calibprob.calibrators.online.agaci import AgACIInterval
from calibprob.calibrators.online.pid import ConformalPIDInterval
from calibprob.calibrators.online.recalibrator import RULES, OnlineQuantileRecalibrator, check_eta

__all__ = [
    "OnlineQuantileRecalibrator",
    "AdaptiveConformalInterval",
    "ConformalPIDInterval",
    "AgACIInterval",
    "ARScorecaster",
    "BaseScorecaster",
    "aci_threshold",
    "check_eta",
    "COUPLINGS",
    "RULES",
    "osd_step",
    "osd_path",
    "publish",
    "coverage_bound",
    "theorem2_bound",
    "interpolate_map",
    "lemma4_counterexample",
]
