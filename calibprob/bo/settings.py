r"""The options of one calibrated-BO run, validated in one place.

:class:`BOSettings` holds every option of :func:`calibprob.bo.minimize` that
is not the problem itself (objective, bounds, optimum) or the base model: the
acquisition and its parameters, the calibration set and its recalibrator, the
loop's budget and the acquisition optimiser. It is frozen, so a run cannot
change its own settings half-way, and it validates and normalises its fields
when built (integers checked, floats made finite, the recalibrator levels
completed with :math:`\Phi(-\kappa)`, the level of the confidence bound).

References
----------
Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and
conformal prediction improves Bayesian optimization. AISTATS, Algorithms 3-4.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from calibprob._core.validation import check_choice, check_int, check_levels, check_probability
from calibprob.bo.acquisition import ACQUISITIONS
from calibprob.calibrators.online import COUPLINGS, check_eta
from calibprob.predictive import DEFAULT_LEVELS

__all__ = ["BOSettings", "CALIBRATIONS"]

#: Calibration-set constructions accepted by :func:`calibprob.bo.minimize`.
CALIBRATIONS = ("loo", "time-series", "online", "none")


@dataclass(frozen=True, eq=False)
class BOSettings:
    r"""Validated options of a calibrated-BO run (see :func:`calibprob.bo.minimize` for each).

    Building one checks every field and raises ``ValueError`` naming the
    option, the value and the fix; the fields then hold the normalised values
    (``levels`` an array that includes :math:`\Phi(-\kappa)` when not given).

    Parameters
    ----------
    n_init, n_steps, refit_every, n_starts : int
        Initial-design size (>= 1), BO steps (>= 0), hyperparameter refit
        period (>= 1), L-BFGS-B starts of the acquisition optimiser (>= 1).
    acquisition : {"ei", "pi", "lcb", "ucb", "sharp-ucb"}
    calibration : {"loo", "time-series", "online", "none"}
        ``"sharp-ucb"`` requires ``"none"`` (the sharp GP calibrates itself).
    coupling : {"isotonic", "independent"}
    eta : float
        OSD step size, > 0.
    kappa, xi : float
        Confidence-bound weight (finite) and EI/PI margin.
    sharp_level : float
        Level of the sharp-GP bound, in (0, 1).
    levels : array_like or None
        Recalibrator levels; ``None``: the default levels plus :math:`\Phi(-\kappa)`.
    init_design : str
        Initial design method (checked by :func:`calibprob.datasets.sample_design`).
    n_candidates : int or None
        Random screening points of the acquisition optimiser.

    Examples
    --------
    >>> from calibprob.bo.settings import BOSettings
    >>> s = BOSettings(acquisition="lcb", kappa=2.0)
    >>> round(float(s.p_kappa), 5), s.calibration
    (0.02275, 'loo')
    >>> try:
    ...     BOSettings(acquisition="sharp-ucb")
    ... except ValueError as err:
    ...     print("calibration='none'" in str(err))
    True
    """

    n_init: int = 5
    n_steps: int = 25
    acquisition: str = "ei"
    calibration: str = "loo"
    eta: float = 0.25
    coupling: str = "isotonic"
    levels: np.ndarray | None = None
    kappa: float = 2.0
    xi: float = 0.0
    refit_every: int = 1
    init_design: str = "uniform"
    n_candidates: int | None = None
    n_starts: int = 5
    sharp_level: float = 0.01

    def __post_init__(self) -> None:
        # the order of the checks is the order minimize() always used: the first
        # bad option named in the error stays the same
        norm = object.__setattr__
        norm(self, "n_init", check_int(self.n_init, "n_init", minimum=1))
        norm(self, "n_steps", check_int(self.n_steps, "n_steps", minimum=0))
        norm(self, "refit_every", check_int(self.refit_every, "refit_every", minimum=1))
        norm(self, "n_starts", check_int(self.n_starts, "n_starts", minimum=1))
        check_choice(self.acquisition, "acquisition", ACQUISITIONS)
        check_choice(self.calibration, "calibration", CALIBRATIONS)
        check_choice(self.coupling, "coupling", COUPLINGS)
        norm(self, "eta", check_eta(self.eta))
        kappa = float(self.kappa)
        if not np.isfinite(kappa):
            raise ValueError(f"kappa must be finite; got {kappa!r}.")
        norm(self, "kappa", kappa)
        norm(self, "xi", float(self.xi))
        norm(self, "sharp_level", check_probability(self.sharp_level, "sharp_level"))
        if self.acquisition == "sharp-ucb" and self.calibration != "none":
            raise ValueError(
                "acquisition='sharp-ucb' is calibrated by the sharp GP itself; pass calibration='none' "
                f"(got calibration={self.calibration!r})."
            )
        levels = self.levels
        if levels is None:
            levels = np.unique(np.concatenate([DEFAULT_LEVELS, [self.p_kappa]]))
        norm(self, "levels", check_levels(levels, "levels"))

    @property
    def p_kappa(self) -> float:
        r"""Level :math:`\Phi(-\kappa)` of the confidence bound."""
        return float(special.ndtr(-self.kappa))

    @property
    def recalibrator_levels(self) -> np.ndarray:
        """The validated recalibrator levels (never ``None`` once built)."""
        assert self.levels is not None  # set by __post_init__
        return self.levels
