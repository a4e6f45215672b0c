"""Exchangeability monitoring: conformal test martingales whose alarms can act.

- :class:`ExchangeabilityMonitor` and :func:`exchangeability_alarms` — smoothed conformal
  p-values of any stream of scores (a forecast stream's PITs by default), a betting martingale
  (Simple Jumper, Sleeper/Stayer, plug-in), CUSUM or Shiryaev–Roberts on it, alarms over ``time``
  with Ville's false-alarm guarantee.
- :class:`Monitored` — an online calibrator watched by a monitor: an alarm resets or refits it
  through its public ``fit`` / ``update``.
- NumPy layer (``calibprob.monitoring._martingales``): :func:`conformal_pvalues`,
  :func:`epsilon_bets`, :func:`step_bets`, :func:`simple_jumper`, :func:`sleeper_stayer`,
  :func:`plugin_martingale`, :func:`cusum`, :func:`shiryaev_roberts`.
"""

from calibprob.monitoring._martingales import (
    conformal_pvalues,
    cusum,
    epsilon_bets,
    plugin_martingale,
    shiryaev_roberts,
    simple_jumper,
    sleeper_stayer,
    step_bets,
)
from calibprob.monitoring.alarms import ExchangeabilityMonitor, exchangeability_alarms, pit_scores
from calibprob.monitoring.monitored import Monitored

__all__ = [
    "ExchangeabilityMonitor",
    "exchangeability_alarms",
    "Monitored",
    "pit_scores",
    "conformal_pvalues",
    "epsilon_bets",
    "step_bets",
    "simple_jumper",
    "sleeper_stayer",
    "plugin_martingale",
    "cusum",
    "shiryaev_roberts",
]
