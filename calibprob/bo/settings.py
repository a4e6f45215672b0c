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

__all__ = ["BOSettings", "CALIBRATIONS", "CONFORMAL_CALIBRATIONS"]

#: Calibration-set constructions accepted by :func:`calibprob.bo.minimize`.
CALIBRATIONS = ("loo", "time-series", "online", "none", "conformal", "conformal-loo")

#: Calibrations whose queries are drawn from a known design density and get a feedback-shift conformal set.
CONFORMAL_CALIBRATIONS = ("conformal", "conformal-loo")


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
    acquisition : {"ei", "pi", "lcb", "ucb", "sharp-ucb", "cei", "cucb"}
    calibration : {"loo", "time-series", "online", "none", "conformal", "conformal-loo"}
        ``"sharp-ucb"`` requires ``"none"`` (the sharp GP calibrates itself); the conformal
        ones require ``"lcb"``/``"ucb"`` (``calibprob.bo.conformal``), and ``"cei"``/``"cucb"``
        (``calibprob.bo.stanton``) require ``"conformal"``.
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
        Random screening points of the acquisition optimiser (the design pool of the conformal
        calibrations).
    interval_level : float or None
        Level of the interval issued for each query before its outcome (logged with whether it
        covered); ``None``: none logged (the conformal calibrations default to 0.9).
    design_lambda : float
        Inverse temperature of the conformal calibrations' softmax design, finite and >= 0.

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
    interval_level: float | None = None
    design_lambda: float = 10.0

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
        self._check_conformal()
        levels = self.levels
        if levels is None:
            levels = np.unique(np.concatenate([DEFAULT_LEVELS, [self.p_kappa]]))
        norm(self, "levels", check_levels(levels, "levels"))

    def _check_conformal(self) -> None:
        """The query-interval options; the conformal designs need the confidence-bound acquisition."""
        norm = object.__setattr__
        conformal = self.calibration in CONFORMAL_CALIBRATIONS
        if self.acquisition in ("cei", "cucb") and self.calibration != "conformal":
            raise ValueError(
                f"acquisition={self.acquisition!r} (Stanton et al.'s conformal acquisition) integrates over the "
                f"feedback-shift conformal set of calibration='conformal'; got calibration={self.calibration!r}. "
                "Pass calibration='conformal'."
            )
        if conformal and self.acquisition not in ("lcb", "ucb", "cei", "cucb"):
            raise ValueError(
                f"calibration={self.calibration!r} draws each query from the softmax of the lower confidence "
                f"bound (its leave-one-out spread does not depend on the label); acquisition={self.acquisition!r} "
                "is not supported there. Pass acquisition='lcb' or 'ucb' (or the conformal acquisitions 'cei', 'cucb')."
            )
        level = self.interval_level
        if level is None and conformal:
            level = 0.9
        if level is not None:
            level = check_probability(level, "interval_level")
        norm(self, "interval_level", level)
        lam = self.design_lambda
        if (
            isinstance(lam, bool)
            or not isinstance(lam, (int, float, np.integer, np.floating))
            or not np.isfinite(lam)
            or lam < 0
        ):
            raise ValueError(
                f"design_lambda (the inverse temperature of the softmax design) must be a finite number >= 0; "
                f"got {lam!r}. Pass e.g. 10."
            )
        norm(self, "design_lambda", float(lam))

    @property
    def p_kappa(self) -> float:
        r"""Level :math:`\Phi(-\kappa)` of the confidence bound."""
        return float(special.ndtr(-self.kappa))

    @property
    def recalibrator_levels(self) -> np.ndarray:
        """The validated recalibrator levels (never ``None`` once built)."""
        assert self.levels is not None  # set by __post_init__
        return self.levels
