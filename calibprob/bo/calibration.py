r"""How the BO loop recalibrates its surrogate: one strategy per calibration set.

At step :math:`t` the loop has a GP :math:`M_{t-1}` fitted to the data so far
(:class:`ModelData`). A strategy turns it into the law the acquisition is
computed under and says how the forecast of the next outcome is scored:

=================  ===========================================================
``"none"``         the base GP, uncalibrated (identity law).
``"loo"``          recalibrator rebuilt every step by OSD over the closed-form
                   leave-one-out PITs (Deshpande et al. 2024, Algorithm 4).
``"time-series"``  the same over the one-step-ahead PITs, the innovations of
                   the Cholesky factor of :math:`K + \sigma_n^2 I`.
``"online"``       one recalibrator kept across steps, updated with the PIT of
                   each forecast actually issued (Algorithm 3, eq. 7).
``"sharp-gp"``     Capone et al.'s sharp calibrated GP bound (eq. 18) as the
                   acquisition itself (``acquisition="sharp-ucb"``).
``"conformal"``    the uncalibrated GP; the query drawn from the softmax of
                   the lower confidence bound, its interval the feedback-shift
                   conformal set (``calibprob.bo.conformal``).
``"conformal-loo"`` the same design under the ``"loo"`` recalibration.
``"conformal-acquisition"`` (``acquisition="cei"``/``"cucb"``) Stanton et al.'s
                   acquisition integrated over each candidate's conformal set
                   (``calibprob.bo.stanton``), with the ``"conformal"`` query set.
=================  ===========================================================

Every strategy has the same small interface (:class:`CalibrationStrategy`):
``recalibrate(model, data)`` returns a :class:`Recalibration` (law, size of the
calibration set, recalibrator state to record), ``acquisition(...)`` the loss
to minimise over the unit box, ``pit(law, z)`` the PIT recorded for the
decision, ``observe(u)`` hears the base-GP PIT of each new finite outcome.
:func:`strategy_for` picks the entry of :data:`CALIBRATION_STRATEGIES`.

References
----------
Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and
conformal prediction improves Bayesian optimization. AISTATS, Algorithms 3-4.
Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
processes. NeurIPS 36, appendix eq. (18).
Dubrule, O. (1983). Cross validation of kriging in a unique neighborhood.
Mathematical Geology 15, 687-699 (closed-form LOO).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
import xarray as xr
from numpy.typing import ArrayLike
from scipy import special

from calibprob.bo.acquisition import StandardizedLaw, acquisition_loss
from calibprob.bo.conformal import design_probabilities, query_set
from calibprob.bo.settings import BOSettings
from calibprob.bo.sharp import sharp_lower_bound
from calibprob.bo.stanton import CONFORMAL_ACQUISITIONS, N_SCREEN, conformal_acquisition
from calibprob.calibrators.online import OnlineQuantileRecalibrator

__all__ = [
    "ModelData",
    "Recalibration",
    "CalibrationStrategy",
    "CALIBRATION_STRATEGIES",
    "strategy_for",
]


@dataclass(frozen=True, eq=False)
class ModelData:
    """The data the GP sees at one step, in model units.

    Attributes
    ----------
    U : ndarray, shape (n, d)
        Inputs mapped to the unit box.
    ys : ndarray, shape (n,)
        Standardised modelled outputs ``(y_model - m) / s``.
    finite : ndarray of bool, shape (n,)
        Which objective values were finite.
    m, s : float
        Output standardisation (mean, sd; ``s = 1`` for constant outputs).
    """

    U: np.ndarray
    ys: np.ndarray
    finite: np.ndarray
    m: float
    s: float

    @classmethod
    def from_history(cls, X: ArrayLike, y: ArrayLike, lo: np.ndarray, span: np.ndarray) -> ModelData:
        """Map the evaluations to the model: non-finite values become the worst finite one so far.

        A failed evaluation kept at the worst finite value makes the acquisition
        move away from it instead of proposing it again (module docstring of
        :mod:`calibprob.bo.loop`).
        """
        Xa = np.asarray(X)
        ya = np.asarray(y, float)
        finite = np.isfinite(ya)
        y_model = np.where(finite, ya, np.max(ya[finite]))
        m, s = float(np.mean(y_model)), float(np.std(y_model))
        s = s if s > 0 else 1.0
        return cls(U=(Xa - lo) / span, ys=(y_model - m) / s, finite=finite, m=m, s=s)

    @property
    def best(self) -> float:
        """Smallest finite standardised value (the incumbent's)."""
        return float(np.min(self.ys[self.finite]))

    @property
    def incumbent(self) -> np.ndarray:
        """Unit-box input of the incumbent, shape (d,)."""
        return self.U[self.finite][np.argmin(self.ys[self.finite])]


@dataclass(frozen=True, eq=False)
class Recalibration:
    """What a strategy gives the acquisition at one step.

    Attributes
    ----------
    law : StandardizedLaw
        Standardised law of the recalibrated predictive (identity: uncalibrated).
    n_calibration : int
        Size of the calibration set the recalibrator was built from.
    state : xarray.Dataset or None
        The recalibrator's state to record (``None``: nothing to record).
    """

    law: StandardizedLaw
    n_calibration: int = 0
    state: xr.Dataset | None = None


def _recalibrated(rec: OnlineQuantileRecalibrator, levels: np.ndarray, n_calibration: int) -> Recalibration:
    law = StandardizedLaw(levels, rec.standardized_quantiles())
    return Recalibration(law, n_calibration, rec.to_dataset())


class CalibrationStrategy:
    """Common interface; this base class is the uncalibrated GP (``"none"``).

    Parameters
    ----------
    settings : BOSettings
        The run's settings (levels, eta, coupling, acquisition, kappa, xi).
    """

    name = "none"

    def __init__(self, settings: BOSettings) -> None:
        self.settings = settings
        self.levels = settings.recalibrator_levels
        self._identity = StandardizedLaw(self.levels)

    def recalibrate(self, model: Any, data: ModelData) -> Recalibration:
        """The law for this step's acquisition; the identity here."""
        return Recalibration(self._identity)

    def acquisition(self, model: Any, data: ModelData, law: StandardizedLaw, seed: int) -> Callable:
        """Loss ``(m, d) -> (m,)`` over the unit box: the acquisition under ``law``."""
        st = self.settings
        best = data.best

        def loss(Uc: np.ndarray) -> np.ndarray:
            mu, sd = model.predict_mean_std(Uc)
            return acquisition_loss(st.acquisition, mu, sd, law=law, best=best, kappa=st.kappa, xi=st.xi)

        return loss

    def pit(self, law: StandardizedLaw, z: float) -> float:
        """PIT of a standardised outcome ``z`` under the forecast used for the decision."""
        return float(law.cdf(z))

    def observe(self, u_base: float) -> None:
        """Hear the base-GP PIT of a new finite outcome (only the online strategy learns from it)."""

    def interval(
        self, model: Any, data: ModelData, law: StandardizedLaw, u: np.ndarray, pool: np.ndarray | None
    ) -> tuple:
        """The central interval at ``interval_level`` of the forecast used for the decision (standardised units).

        Returns ``(lower, upper, covers)``: ``covers(z)`` says whether a standardised outcome is in it.
        """
        c = self.settings.interval_level
        assert c is not None  # the loop asks for an interval only when a level is set
        mu, sd = model.predict_mean_std(u[None, :])
        lo = float(mu[0] + sd[0] * law.ppf((1.0 - c) / 2.0))
        hi = float(mu[0] + sd[0] * law.ppf((1.0 + c) / 2.0))
        return lo, hi, lambda z: bool(lo <= z <= hi)


class _RebuiltCalibration(CalibrationStrategy):
    """A recalibrator rebuilt from the identity every step by OSD over a calibration set (Algorithm 4)."""

    def calibration_pit(self, model: Any, data: ModelData) -> np.ndarray:
        """PITs of the calibration set (finite outcomes only)."""
        raise NotImplementedError

    def recalibrate(self, model: Any, data: ModelData) -> Recalibration:
        u_cal = self.calibration_pit(model, data)
        st = self.settings
        rec = OnlineQuantileRecalibrator(levels=self.levels, eta=st.eta, coupling=st.coupling).reset()
        rec.update_pit(np.clip(u_cal, 0.0, 1.0))
        return _recalibrated(rec, self.levels, int(u_cal.size))


class LooCalibration(_RebuiltCalibration):
    """Closed-form leave-one-out forecasts of every observation, same hyperparameters, no refit."""

    name = "loo"

    def calibration_pit(self, model: Any, data: ModelData) -> np.ndarray:
        mu_c, sd_c = model.loo(include_noise=True)
        return special.ndtr((data.ys - mu_c) / sd_c)[data.finite]


def time_series_pit(model: Any, U: np.ndarray, ys: np.ndarray) -> np.ndarray:
    r"""One-step-ahead PITs :math:`u_i = \Phi(e_i)`, :math:`e = L^{-1}(y - m)`, all splits from one Cholesky.

    Observation :math:`i` predicted from observations :math:`1..i-1` with the
    current hyperparameters has standardised innovation :math:`e_i`, where
    :math:`L L^\top = K + \sigma_n^2 I` (the prediction-error decomposition).
    """
    th = model.theta_
    K = model.kernel_matrix(U)
    K[np.diag_indices_from(K)] += th["noise"]
    L = scipy.linalg.cholesky(K, lower=True)
    e = scipy.linalg.solve_triangular(L, ys - model.mean_, lower=True)
    return special.ndtr(e)


class TimeSeriesCalibration(_RebuiltCalibration):
    """One-step-ahead forecasts in acquisition order (the first observation has none)."""

    name = "time-series"

    def calibration_pit(self, model: Any, data: ModelData) -> np.ndarray:
        return time_series_pit(model, data.U, data.ys)[1:][data.finite[1:]]


class OnlineCalibration(CalibrationStrategy):
    """One recalibrator across the run, one OSD step per issued forecast (Algorithm 3, eq. 7)."""

    name = "online"

    def __init__(self, settings: BOSettings) -> None:
        super().__init__(settings)
        self.recalibrator = OnlineQuantileRecalibrator(
            levels=self.levels, eta=settings.eta, coupling=settings.coupling
        ).reset()

    def recalibrate(self, model: Any, data: ModelData) -> Recalibration:
        return _recalibrated(self.recalibrator, self.levels, self.recalibrator.n_updates_)

    def observe(self, u_base: float) -> None:
        self.recalibrator.update_pit([u_base])


class SharpGPCalibration(CalibrationStrategy):
    """Capone et al.'s sharp-GP bound is the acquisition; the GP itself is not recalibrated.

    The sharp GP fits only the bound's level, not a whole predictive
    distribution, so the recorded decision PIT is NaN.
    """

    name = "sharp-gp"

    def acquisition(self, model: Any, data: ModelData, law: StandardizedLaw, seed: int) -> Callable:
        return sharp_lower_bound(model, data.U, data.ys, level=self.settings.sharp_level, seed=seed)

    def pit(self, law: StandardizedLaw, z: float) -> float:
        return np.nan


class _FeedbackDesign:
    """Mixin: the query drawn from the softmax design, its interval the feedback-shift conformal set."""

    settings: BOSettings

    def design(
        self, model: Any, data: ModelData, law: StandardizedLaw, rng: np.random.Generator
    ) -> tuple[np.ndarray, float, np.ndarray]:
        """Draw the query from :math:`\\propto \\exp(-\\lambda\\,\\mathrm{LCB})` over a fresh pool; ``(u, loss, pool)``."""
        st = self.settings
        d = data.U.shape[1]
        pool = rng.random((int(st.n_candidates or min(2000, 500 * d)), d))
        mu, sd = model.predict_mean_std(pool)
        loss = acquisition_loss("lcb", mu, sd, law=law, best=data.best, kappa=st.kappa)
        j = int(rng.choice(pool.shape[0], p=design_probabilities(loss, st.design_lambda)))
        return pool[j], float(loss[j]), pool

    def interval(
        self, model: Any, data: ModelData, law: StandardizedLaw, u: np.ndarray, pool: np.ndarray | None
    ) -> tuple:
        """Hull of the query's feedback-shift conformal set and its membership rule (standardised units)."""
        st = self.settings
        assert st.interval_level is not None  # set for the conformal calibrations (BOSettings)
        assert pool is not None  # the design's pool: the loop passes it for a design strategy
        # the model the design used: every point, failed ones at the worst finite value
        cs, contains = query_set(
            model,
            data.U,
            data.ys,
            u,
            pool,
            lam=st.design_lambda,
            q=float(law.ppf(st.p_kappa)),
            confidence_level=st.interval_level,
        )
        lo, hi = cs.interval
        return lo, hi, contains


class ConformalCalibration(_FeedbackDesign, CalibrationStrategy):
    """The uncalibrated GP with the softmax design and the feedback-shift conformal query set."""

    name = "conformal"


class ConformalAcquisitionCalibration(_FeedbackDesign, CalibrationStrategy):
    """Stanton et al.'s conformal acquisition (``"cei"``/``"cucb"``) maximised over the screened pool.

    The :data:`~calibprob.bo.stanton.N_SCREEN` best points of a fresh pool by the plain
    acquisition (EI for ``"cei"``, the confidence bound for ``"cucb"``) get their conformal
    acquisition (:func:`calibprob.bo.stanton.conformal_acquisition`); the query is the best of
    them (Stanton et al. maximise the acquisition). The query's interval is the feedback-shift
    conformal set, as for ``"conformal"``, its weights those of the softmax-of-LCB design.
    """

    name = "conformal-acquisition"

    def design(
        self, model: Any, data: ModelData, law: StandardizedLaw, rng: np.random.Generator
    ) -> tuple[np.ndarray, float, np.ndarray]:
        """The screened pool's best candidate by the conformal acquisition; ``(u, -value, pool)``."""
        st = self.settings
        assert st.interval_level is not None  # set for calibration="conformal" (BOSettings)
        d = data.U.shape[1]
        pool = rng.random((int(st.n_candidates or min(2000, 500 * d)), d))
        mu, sd = model.predict_mean_std(pool)
        base = "ei" if st.acquisition == "cei" else "lcb"
        screen = acquisition_loss(base, mu, sd, law=law, best=data.best, kappa=st.kappa)
        order = np.argsort(screen, kind="stable")[:N_SCREEN]
        values = [
            conformal_acquisition(
                st.acquisition,
                model,
                data.U,
                data.ys,
                pool[j],
                pool,
                lam=st.design_lambda,
                q=float(law.ppf(st.p_kappa)),
                confidence_level=st.interval_level,
                best=data.best,
                kappa=st.kappa,
            )
            for j in order
        ]
        k = int(np.argmax(values))
        return pool[order[k]], -float(values[k]), pool


class ConformalLooCalibration(_FeedbackDesign, LooCalibration):
    """Deshpande et al.'s LOO recalibration with the softmax design and the conformal query set."""

    name = "conformal-loo"


#: The loop's calibration strategies by name; ``"sharp-gp"`` serves ``acquisition="sharp-ucb"``.
CALIBRATION_STRATEGIES: dict[str, type[CalibrationStrategy]] = {
    cls.name: cls
    for cls in (
        CalibrationStrategy,
        LooCalibration,
        TimeSeriesCalibration,
        OnlineCalibration,
        SharpGPCalibration,
        ConformalCalibration,
        ConformalLooCalibration,
        ConformalAcquisitionCalibration,
    )
}


def strategy_for(settings: BOSettings) -> CalibrationStrategy:
    """A fresh strategy for a run: the sharp GP for ``"sharp-ucb"``, Stanton's for ``"cei"``/``"cucb"``, else the ``calibration`` entry."""
    key = settings.calibration
    if settings.acquisition == "sharp-ucb":
        key = "sharp-gp"
    elif settings.acquisition in CONFORMAL_ACQUISITIONS:
        key = "conformal-acquisition"
    return CALIBRATION_STRATEGIES[key](settings)
