r"""Online quantile recalibration of any stream of forecasts (Deshpande et al. 2024, §4).

:class:`OnlineQuantileRecalibrator` wraps the NumPy layer of
``calibprob.calibrators.online._osd`` for forecasts in the predictive-distribution
contract (:mod:`calibprob.predictive`): ``recalibrate(forecast)`` issues
:math:`Q_t \circ R_t` as a new predictive Dataset, ``update(forecast, y)``
takes the outcomes (in ``obs`` order) and moves :math:`R_t` by one OSD step per
outcome. The state (latent iterates, issued map, coverage counts) saves to a
netCDF-able ``xr.Dataset`` and loads back exactly.

``rule=`` chooses how :math:`R_t` moves, with the same loop: ``"osd"`` (the default, the
update above), ``"aci"`` (adaptive conformal inference on the PIT scale, every central pair of
levels at once; ``calibprob.calibrators.online._aci_pit``) and ``"dtaci"`` (ACI experts over
step sizes, mixed by exponential weights; ``calibprob.calibrators.online._dtaci``) and ``"pid"``
(conformal PID control on every central pair; ``calibprob.calibrators.online._pid``); the three
live in ``calibprob.calibrators.online._rules``. A
``time`` coordinate along ``obs`` is checked to be in stream order
(``calibprob.calibrators.online._time``).

References
----------
Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and
conformal prediction improves Bayesian optimization. AISTATS, eq. (8)-(11),
Theorems 2-3, Appendix G.
Gibbs, I. and Candès, E. (2021). Adaptive conformal inference under distribution shift. NeurIPS 34.
Gibbs, I. and Candès, E. (2022). Conformal inference for online prediction with arbitrary
distribution shifts. arXiv:2208.08401 (JMLR 25, 2024).
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike
from scipy import special

from calibprob._core.estimator import BaseEstimator, check_predictive
from calibprob._core.validation import check_array, check_choice, check_levels, check_probability, check_targets
from calibprob.calibrators.grouping.mondrian import GroupsLike, fit_with_groups, keep_group_coord, predict_with_groups
from calibprob.calibrators.online._aci_pit import pit_scores
from calibprob.calibrators.online._osd import (
    COUPLINGS,
    coverage_bound,
    interpolate_map,
    osd_step,
    publish,
    theorem2_bound,
    weighted_coverage_bound,
)
from calibprob.calibrators.online._pid import Scorecaster, make_scorecaster, pid_bound
from calibprob.calibrators.online._rules import (
    RULES,
    calibrate_rule,
    check_rule,
    dtaci_pair_bounds,
    reset_rule,
    rule_params_from_dataset,
    rule_state_from_dataset,
    rule_to_dataset,
    update_rule,
)
from calibprob.calibrators.online._time import check_stream_times
from calibprob.calibrators.online.aci import warn_vacuous
from calibprob.predictive import DEFAULT_LEVELS, from_quantiles
from calibprob.weights import Weights, resolve

__all__ = ["OnlineQuantileRecalibrator", "check_eta", "RULES"]


def check_eta(eta: float, name: str = "eta") -> float:
    r"""The OSD step size: a finite number > 0.

    Parameters
    ----------
    eta : float
        Candidate step size.
    name : str, default "eta"
        Name used in the error message.

    Returns
    -------
    float
        ``eta`` as a float.

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, Theorem 2 (:math:`\eta > 0`).

    Examples
    --------
    >>> from calibprob.calibrators.online import check_eta
    >>> check_eta(0.25)
    0.25
    >>> try:
    ...     check_eta(0.0)
    ... except ValueError:
    ...     print("eta must be > 0")
    eta must be > 0
    """
    try:
        value = float(eta)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be a number > 0 (the online step size); got {eta!r}.") from err
    if not np.isfinite(value) or value <= 0:
        raise ValueError(
            f"{name} must be > 0 (the online gradient step size); got {eta!r}. "
            "Pass e.g. eta=0.25; larger steps adapt faster and tighten Theorem 2's bound "
            "(1 + eta)/(eta T), smaller ones fluctuate less."
        )
    return value


class OnlineQuantileRecalibrator(BaseEstimator):
    r"""Online quantile recalibrator: per-level online subgradient descent on the pinball loss.

    For every level :math:`p` of ``levels`` the recalibrated quantile issued at
    time :math:`t` is :math:`Q_t(R_t(p))`; after the outcome :math:`y_t`,

    .. math::

        \theta_{t+1}(p) = \theta_t(p) + \eta\,\bigl(p - o_t(p)\bigr), \qquad
        o_t(p) = \mathbb 1\{y_t \le Q_t(R_t(p))\} = \mathbb 1\{u_t \le R_t(p)\},

    where :math:`u_t = F_t(y_t)` is the outcome's PIT under the *base*
    forecast, :math:`\theta_1(p) = p` (the identity) and :math:`R_t` is the
    monotone map issued from the latent iterates :math:`\theta_t` (see
    ``coupling``). This is FTRL on the linearised quantile pinball loss,
    eq. (9)/(11) of the paper.

    Guarantee (any sequence, adversarial included): with
    ``coupling="independent"`` Theorem 2 holds exactly for each level's
    iterates, :math:`|\frac1T\sum_t o_t(p) - p| \le (1+\eta)/(\eta T)`; with
    ``coupling="isotonic"`` the same holds for the *issued* monotone map with
    the level-dependent constant of :func:`calibprob.calibrators.online.coverage_bound`
    (equal to Theorem 2's for a single level).

    Parameters
    ----------
    levels : array_like, shape (L,), optional
        Levels :math:`p` at which :math:`R_t` is tracked, strictly increasing
        in (0, 1); default :data:`calibprob.predictive.DEFAULT_LEVELS`.
        :math:`R_t` between them is linear (:func:`calibprob.calibrators.online.interpolate_map`).
    eta : float, default 0.25
        OSD step size :math:`\eta > 0`. Default rationale: after 25 outcomes
        (a typical Bayesian-optimisation budget) Theorem 2's bound
        :math:`(1+\eta)/(\eta T)` is 0.2, while one outcome moves a level by at
        most 0.25.
    coupling : {"isotonic", "independent"}, default "isotonic"
        How the levels are made monotone (the paper's Lemma 4 does not hold
        for eq. (9) as printed; see ``calibprob.calibrators.online._osd``).
        ``"isotonic"``: issue the isotonic regression of the iterates and take
        subgradients at the issued values (monotone *and* calibrated).
        ``"independent"``: eq. (9) per level, issue the sorted iterates
        (Theorem 2 exact for the iterates, not for the sorted map).
    level_floor : float, default 1e-3
        Issued probabilities are clipped to ``[level_floor, 1 - level_floor]``
        when a forecast is recalibrated: the paper's :math:`Q(q) = \mp\infty`
        for :math:`q` outside [0, 1] becomes the finite quantile at the floor
        (a Gaussian base at 1e-3 gives :math:`\mu \mp 3.09\sigma`). The state
        and the guarantee use the unclipped map.
    rule : {"osd", "aci", "dtaci", "pid"}, default "osd"
        How :math:`R_t` moves. ``"osd"``: the update above (Deshpande et al.'s, unchanged).
        ``"aci"``: adaptive conformal inference (Gibbs & Candès 2021) on the PIT scale, one
        recursion per central pair of levels :math:`(p, 1 - p)` with the score
        :math:`|2u - 1|` (``calibprob.calibrators.online._aci_pit``): ``fit`` scores the
        calibration stream's PITs, each outcome moves every pair's :math:`\alpha_t` by
        :math:`\gamma(2p - \mathrm{err}_t)`, and Proposition 4.1's long-run bound holds per pair
        (:meth:`coverage_error_bound`). Levels must be symmetric about 1/2.
    gamma : float, default 0.005
        ACI's step size :math:`\gamma \in (0, 1)` (``rule="aci"``; Gibbs and Candès's value).
        ``"dtaci"``: Gibbs & Candès's (2022) DtACI on the same pairs: ACI experts over the step
        sizes ``gammas``, their levels mixed by exponential weights on the pinball loss with a
        fixed share (``calibprob.calibrators.online._dtaci``).
    window : int, optional
        ``rule="aci"``/``"dtaci"``: keep the ``window`` most recent PIT scores (the calibration
        stream's, then each outcome's); default: the calibration scores, fixed.
    gammas : sequence of float, optional
        ``rule="dtaci"``: the experts' step sizes, increasing in (0, 1); default the paper's
        :math:`0.001 \cdot 2^i`, :math:`i = 0, \dots, 7`.
    regret_window : int, default 100
        ``rule="dtaci"``: the interval length :math:`I` the weights are tuned for (the paper's 100):
        fixed share :math:`\sigma = 1/(2I)` and the paper's learning rate :math:`\eta(\alpha, k, I)`.
    lr, proportional_lr, csat, ki, burnin, scorecaster
        ``rule="pid"``: conformal PID control (Angelopoulos, Candès & Tibshirani 2023) on every central
        pair, the PIT score :math:`|2u - 1|` tracked by quantile tracking with gain ``lr`` (proportional
        to the score range of ``burnin`` scores), the integrator :math:`K_I\tan(\cdot/C_{\mathrm{sat}})`
        and a scorecaster (``None``, ``"ar"`` or an object with ``forecast(history)``); as
        :class:`~calibprob.ConformalPIDInterval` (``_rules``, ``_pid``). ``fit`` needs
        at least ``burnin`` outcomes.

    Attributes
    ----------
    theta_ : ndarray, shape (L,)
        Latent iterates :math:`\theta_t`.
    recalibration_ : ndarray, shape (L,)
        Issued map :math:`R_t(p_j)` (monotone, unclipped).
    hits_ : ndarray, shape (L,)
        :math:`\sum_{s<t} o_s(p_j)`: outcomes at or below the issued quantile.
    n_updates_ : int
        Number of outcomes seen, :math:`t - 1`.
    alpha_, alpha_start_ : ndarray, shape (P,)
        ``rule="aci"``/``"dtaci"``: :math:`\alpha_t` and :math:`\alpha_1 = 2p` per central pair, outermost first.
    confidence_levels_ : ndarray, shape (P,)
        ``rule="aci"``/``"dtaci"``: the pairs' target coverage :math:`1 - 2p`.
    misses_ : ndarray of int, shape (P,)
        ``rule="aci"``/``"dtaci"``: :math:`\sum_t \mathrm{err}_t` per pair.
    n_floored_ : ndarray of int, shape (L,)
        ``rule="aci"``/``"dtaci"``/``"pid"``: outcomes whose issued level :math:`R_t(p)` was outside
        ``[level_floor, 1 - level_floor]`` (the forecast read at the floor instead).
    scores_ : ndarray
        ``rule="aci"``/``"dtaci"``: the PIT scores the next thresholds are read from, in time order.
    expert_alpha_, expert_weights_ : ndarray, shape (P, k)
        ``rule="dtaci"``: the experts' levels :math:`\alpha_t^i` and weights :math:`p_t^i` per pair
        (``alpha_`` is their weighted mean, the level issued).
    expert_misses_ : ndarray of int, shape (P, k)
        ``rule="dtaci"``: each expert's own misses (each expert is plain ACI).
    expected_misses_ : ndarray, shape (P,)
        ``rule="dtaci"``: :math:`\sum_t\sum_i p_t^i\,\mathrm{err}_t^i`, the randomised DtACI's misses in
        expectation (what Theorem 3.2 bounds; :meth:`expected_miss_rate`).
    pid_state_ : dict of ndarray
        ``rule="pid"``: the pairs' PID controllers (P part, integrator, scorecast, step record, score history).

    weight_sum_, weight_max_ : float or None
        After an update with ``weights=``: :math:`\sum_t v_t` and :math:`\max_t v_t` (an unweighted
        outcome counts :math:`v_t = 1` once the stream is weighted); None for an unweighted stream.
    weighted_hits_ : ndarray, shape (L,) or None
        :math:`\sum_t v_t\, o_t(p_j)` (:meth:`weighted_coverage` divides it by ``weight_sum_``).

    Notes
    -----
    An unupdated recalibrator is the identity :math:`R_1(p) = p` (the start of
    the recursion), so ``recalibrate`` works before any ``update``.

    **Weights** (``update(..., weights=)``, ``rule="osd"``): importance-weighted OSD, each
    outcome's step multiplied by its weight :math:`v_t \ge 0`, i.e. online subgradient descent on
    the weighted pinball loss :math:`v_t\,\ell_{tp}`. Under a covariate shift of the stream
    towards a target law :math:`\tilde P` with :math:`v_t = d\tilde P_X/dP_X(x_t)` (mean 1 under
    the stream's law, so :math:`v_t = 1` is the unweighted step), the guarantee becomes
    *importance-weighted* long-run calibration, for any sequence and bounded weights:
    :math:`|\sum_t v_t(o_t(p) - p)| / \sum_t v_t \le` :meth:`weighted_coverage_bound` (Theorem 2's
    argument with :math:`\eta v_{\max}` the largest step and :math:`\eta\sum_t v_t` the
    telescoped total; ``calibprob.calibrators.online._osd.weighted_coverage_bound``). It is not a
    finite-sample guarantee under :math:`\tilde P`: it says the weighted frequency, which estimates
    the coverage under :math:`\tilde P`, tracks the level. The weights are step multipliers, not
    invariant to a common factor (a factor :math:`c` is the step size :math:`c\eta`): scale a
    ratio to mean 1 on the stream. The ACI, DtACI and PID rules refuse weights (their thresholds
    are read from a window of unweighted scores; a weighted window is not built).

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and
    conformal prediction improves Bayesian optimization. AISTATS.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.calibrators.online import OnlineQuantileRecalibrator
    >>> rng = np.random.default_rng(0)
    >>> rec = OnlineQuantileRecalibrator(levels=[0.1, 0.5, 0.9], eta=0.5)
    >>> for t in range(200):   # a base forecast that is twice too narrow
    ...     f = calibprob.normal([0.0], [1.0], levels=[0.1, 0.5, 0.9])
    ...     _ = rec.update(f, [2.0 * rng.standard_normal()])
    >>> bool(np.all(np.abs(rec.hits_ / rec.n_updates_ - [0.1, 0.5, 0.9]) < 0.05))
    True
    """

    def __init__(
        self,
        *,
        levels: ArrayLike | None = None,
        eta: float = 0.25,
        coupling: str = "isotonic",
        level_floor: float = 1e-3,
        rule: str = "osd",
        gamma: float = 0.005,
        window: int | None = None,
        gammas: ArrayLike | None = None,
        regret_window: int = 100,
        lr: float = 0.1,
        proportional_lr: str = "burnin",
        csat: float = 5.0,
        ki: float = 10.0,
        burnin: int = 50,
        scorecaster: str | Scorecaster | None = None,
    ) -> None:
        self.levels = levels
        self.eta = eta
        self.coupling = coupling
        self.level_floor = level_floor
        self.rule = rule
        self.gamma = gamma
        self.window = window
        self.gammas = gammas
        self.regret_window = regret_window
        self.lr = lr
        self.proportional_lr = proportional_lr
        self.csat = csat
        self.ki = ki
        self.burnin = burnin
        self.scorecaster = scorecaster

    # the state the non-OSD rules set (``calibprob.calibrators.online._rules``), declared for the type checker
    alpha_: np.ndarray
    # the weighted stream's sums (None: unweighted), see the class Notes
    weight_sum_: float | None = None
    weight_max_: float | None = None
    weighted_hits_: np.ndarray | None = None
    alpha_start_: np.ndarray
    misses_: np.ndarray
    scores_: np.ndarray
    pid_state_: dict
    expected_misses_: np.ndarray

    #: the sorted ACI scores are a view of ``scores_``, the scorecaster an object: rebuilt on load
    _transient_attrs: tuple[str, ...] = ("_sorted", "_scorecaster")
    # the state the non-OSD rules keep (calibprob.calibrators.online._rules sets them at fit)
    confidence_levels_: np.ndarray
    n_floored_: np.ndarray
    expert_alpha_: np.ndarray
    expert_weights_: np.ndarray
    expert_misses_: np.ndarray

    def _rebuild_after_load(self) -> None:
        if getattr(self, "scores_", None) is not None:
            self._sorted = np.sort(self.scores_)
        if self.rule == "pid":
            self._scorecaster = make_scorecaster(self.scorecaster)

    # -- lifecycle ----------------------------------------------------------
    def _check_params(self) -> tuple[np.ndarray, float, float]:
        levels = DEFAULT_LEVELS if self.levels is None else check_levels(self.levels, "levels")
        eta = check_eta(self.eta)
        check_choice(self.coupling, "coupling", COUPLINGS)
        floor = check_probability(self.level_floor, "level_floor")
        if floor >= 0.5:
            raise ValueError(f"level_floor must be in (0, 0.5); got {floor!r}. Pass e.g. 1e-3.")
        check_rule(self, levels)
        return np.asarray(levels, float), eta, floor

    def reset(self) -> OnlineQuantileRecalibrator:
        """Start again from the identity map :math:`R_1(p) = p`; returns ``self``."""
        levels, _, _ = self._check_params()
        self.levels_ = levels
        self.theta_ = levels.copy()
        self.recalibration_ = levels.copy()
        self.hits_ = np.zeros(levels.size)
        self.n_updates_ = 0
        self.weight_sum_ = self.weight_max_ = self.weighted_hits_ = None
        self.__dict__.pop("last_time_", None)
        if self.rule != "osd":
            reset_rule(self, levels)
        return self

    def _ensure_state(self) -> None:
        if getattr(self, "theta_", None) is None:
            self.reset()

    def _mondrian_sides(self) -> int:
        """0: no finite-sample minimum group size (Theorem 2 holds on any stream, however short)."""
        return 0

    def fit(self, forecast: xr.Dataset, y: ArrayLike, *, groups: GroupsLike = None) -> OnlineQuantileRecalibrator:
        """Reset to the identity, then :meth:`update` on the whole stream; returns ``self``.

        With ``groups=`` (one label per observation, or an ``obs`` coordinate name) each group
        runs its own stream (:class:`calibprob.Mondrian`), in ``obs`` order within the group.
        """
        if fit_with_groups(self, forecast, y, groups):
            return self
        if self.rule != "osd":
            return self.reset()._calibrate_aci(forecast, y)
        return self.reset().update(forecast, y)

    def _calibrate_aci(self, forecast: xr.Dataset, y: ArrayLike) -> OnlineQuantileRecalibrator:
        """``rule="aci"``: the calibration stream's PIT scores :math:`|2u - 1|` start the score window."""
        forecast = check_predictive(forecast, self, "forecast")
        y = check_targets(y, forecast.sizes["obs"], "y", obs=forecast["obs"].values, ndim=1)
        if self.window is not None and int(self.window) > y.size:
            raise ValueError(
                f"window={self.window!r} is larger than the history: the calibration stream holds {y.size} "
                f"outcome(s), so the first thresholds would be read from fewer scores than the window promises. "
                f"Pass window <= {y.size}, or fit on at least {self.window} outcomes."
            )
        times = check_stream_times(forecast, None, "forecast")
        calibrate_rule(self, pit_scores(np.asarray(forecast.calib.pit(y).values, float).reshape(-1)))
        if times is not None and times.size:
            self.last_time_ = times[-1:].copy()
        return self

    def update(
        self, forecast: xr.Dataset, y: ArrayLike, *, weights: ArrayLike | Weights | None = None
    ) -> OnlineQuantileRecalibrator:
        r"""Take outcomes ``y`` of the *base* forecasts, one OSD step each, in ``obs`` order.

        Parameters
        ----------
        forecast : xarray.Dataset
            Base (not recalibrated) predictive distributions, ``n`` observations.
        y : array_like, shape (n,)
            Outcomes; must be finite.
        weights : array_like or calibprob.weights.GivenWeights, optional
            One importance weight :math:`v_t \ge 0` per outcome (class Notes: importance-weighted
            OSD, ``rule="osd"`` only); a labelled array is aligned to ``forecast``'s ``obs``.

        Returns
        -------
        self
        """
        forecast = check_predictive(forecast, self, "forecast")
        # one outcome per forecast, 1-D: a (n, 2) y would otherwise be read as 2n stream steps
        y = check_targets(y, forecast.sizes["obs"], "y", obs=forecast["obs"].values, ndim=1)
        times = check_stream_times(forecast, getattr(self, "last_time_", None), "forecast")
        u = np.asarray(forecast.calib.pit(y).values, float).reshape(-1)
        v = None if weights is None else resolve(weights, u.size, obs=forecast, side="calibration")
        self.update_pit(u, weights=v)
        if times is not None and times.size:
            self.last_time_ = times[-1:].copy()
        return self

    def update_pit(self, pit: ArrayLike, *, weights: ArrayLike | Weights | None = None) -> OnlineQuantileRecalibrator:
        r"""Take outcomes given by their PIT values :math:`u_t = F_t(y_t)` under the base forecasts.

        Parameters
        ----------
        pit : array_like, shape (T,)
            Values in [0, 1], in stream order.
        weights : array_like, shape (T,), optional
            Importance weights :math:`v_t \ge 0` (:meth:`update`).

        Returns
        -------
        self
        """
        _, eta, _ = self._check_params()
        self._ensure_state()
        u = check_array(np.atleast_1d(pit), "pit", ndim=1, min_length=0)
        if u.size and (u.min() < 0 or u.max() > 1):
            raise ValueError(
                f"pit values must lie in [0, 1]; got range [{u.min():.3g}, {u.max():.3g}]. "
                "Pass F_t(y_t), the base forecast's CDF at the outcome."
            )
        v = self._step_weights(weights, u.size)
        if self.rule != "osd":
            update_rule(self, u, self._check_params()[2])
            return self
        theta = self.theta_
        for t, ut in enumerate(u):
            theta, _, hit = osd_step(theta, self.levels_, float(ut), eta, self.coupling, None if v is None else v[t])
            self.hits_ = self.hits_ + hit
            if v is not None and self.weighted_hits_ is not None:
                self.weighted_hits_ = self.weighted_hits_ + v[t] * hit
        if v is not None and v.size:
            self.weight_sum_ = float((self.weight_sum_ or 0.0) + np.sum(v))
            self.weight_max_ = float(max(self.weight_max_ or 0.0, np.max(v)))
        self.theta_ = theta
        self.recalibration_ = publish(theta, self.coupling)
        self.n_updates_ += int(u.size)
        return self

    def _step_weights(self, weights: ArrayLike | Weights | None, n: int) -> np.ndarray | None:
        """The outcomes' step weights (None: the unweighted stream); starts the weighted state on first use."""
        if weights is None and self.weight_sum_ is None:
            return None
        if weights is not None and self.rule != "osd":
            raise ValueError(
                f"weights= is importance-weighted OSD (rule='osd'); this recalibrator runs rule={self.rule!r}, whose "
                "thresholds come from a window of unweighted scores. Use rule='osd', or drop weights=."
            )
        v = np.ones(n) if weights is None else resolve(weights, n, side="calibration")
        if self.weight_sum_ is None:  # every earlier outcome counted with v = 1
            self.weight_sum_, self.weight_max_ = float(self.n_updates_), 1.0 if self.n_updates_ else 0.0
            self.weighted_hits_ = self.hits_.astype(float).copy()
        return v

    def _weighted_state(self) -> tuple[float, float, np.ndarray]:
        """``(weight_sum_, weight_max_, weighted_hits_)``; refuses an unweighted stream, naming the fix."""
        self._ensure_state()
        if self.weight_sum_ is None or self.weight_max_ is None or self.weighted_hits_ is None:
            raise ValueError(
                "weighted_coverage() needs weighted updates: pass weights= to update(); else use coverage()."
            )
        return self.weight_sum_, self.weight_max_, self.weighted_hits_

    def weighted_coverage(self) -> np.ndarray:
        r""":math:`\sum_t v_t o_t(p_j) / \sum_t v_t`, shape (L,), after weighted updates (class Notes)."""
        total, _, hits = self._weighted_state()
        return hits / total if total > 0 else np.full(self.levels_.size, np.nan)

    def weighted_coverage_bound(self) -> np.ndarray:
        """The proven bound on ``|weighted_coverage() - levels|`` (``_osd.weighted_coverage_bound``), shape (L,)."""
        _, eta, _ = self._check_params()
        total, vmax, _ = self._weighted_state()
        if total <= 0:
            return np.full(self.levels_.size, np.inf)
        return weighted_coverage_bound(self.levels_, eta, total, vmax, coupling=self.coupling)

    # -- the map -------------------------------------------------------------
    def recalibration_map(self, p: ArrayLike | None = None, *, clip: bool = False) -> np.ndarray:
        r"""The issued map :math:`R_t(p)` at probabilities ``p`` (default: the tracked levels).

        Parameters
        ----------
        p : array_like, optional
            Probabilities in [0, 1]; linear interpolation between tracked levels.
        clip : bool, default False
            Clip to ``[level_floor, 1 - level_floor]`` (what :meth:`recalibrate` uses).

        Returns
        -------
        ndarray, shape of ``p`` (or (L,))
        """
        _, _, floor = self._check_params()
        self._ensure_state()
        if p is None:
            out = self.recalibration_.copy()
        else:
            p = np.asarray(p, float)
            if np.any(~np.isfinite(p)) or np.any((p < 0) | (p > 1)):
                raise ValueError(f"p must lie in [0, 1]; got {p!r}.")
            out = interpolate_map(self.levels_, self.recalibration_, p)
        return np.clip(out, floor, 1 - floor) if clip else out

    def standardized_quantiles(self, levels: ArrayLike | None = None) -> np.ndarray:
        r"""Recalibrated standard-normal quantiles :math:`\Phi^{-1}(R_t(p))` (clipped), shape (L,).

        For a Gaussian base :math:`N(\mu, \sigma^2)` the recalibrated quantile
        function is :math:`\mu + \sigma\,\Phi^{-1}(R_t(p))`: a location-scale
        family, which is what the Bayesian-optimisation acquisitions use.
        """
        p = self.levels_ if levels is None else check_levels(levels)
        self._ensure_state()
        return special.ndtri(self.recalibration_map(p, clip=True))

    def coverage(self) -> np.ndarray:
        """Average coverage :math:`\\frac1T\\sum_t o_t(p_j)` so far, shape (L,) (NaN before any update)."""
        self._ensure_state()
        n = self.n_updates_
        return self.hits_ / n if n else np.full(self.levels_.size, np.nan)

    def _require_rule(self, rules: tuple[str, ...], method: str, instead: str) -> None:
        if self.rule not in rules:
            names = " or ".join(repr(r) for r in rules)
            raise ValueError(
                f"{method}() is the guarantee of rule={names}; this recalibrator runs rule={self.rule!r}. "
                f"Use {instead}() instead."
            )

    def coverage_bound(self) -> np.ndarray:
        """The proven bound on ``|coverage() - levels|`` after ``n_updates_`` outcomes, shape (L,) (``rule="osd"``)."""
        _, eta, _ = self._check_params()
        self._require_rule(("osd",), "coverage_bound", "coverage_error_bound (rule='aci') or miss_rate")
        self._ensure_state()
        return coverage_bound(self.levels_, eta, max(self.n_updates_, 1), coupling=self.coupling)

    def theorem2_bound(self) -> float:
        r"""Theorem 2's :math:`(1+\eta)/(\eta T)` at :math:`T` = ``n_updates_`` (``rule="osd"``)."""
        _, eta, _ = self._check_params()
        self._require_rule(("osd",), "theorem2_bound", "coverage_error_bound (rule='aci') or miss_rate")
        self._ensure_state()
        return float(theorem2_bound(eta, max(self.n_updates_, 1)))

    def miss_rate(self) -> np.ndarray:
        r"""``rule="aci"``/``"dtaci"``: :math:`\frac1T\sum_t \mathrm{err}_t` per central pair, shape (P,) (NaN before any update)."""
        self._check_params()
        self._require_rule(("aci", "dtaci", "pid"), "miss_rate", "coverage")
        self._ensure_state()
        n = self.n_updates_
        return self.misses_ / n if n else np.full(self.misses_.size, np.nan)

    def expected_miss_rate(self) -> np.ndarray:
        r"""``rule="dtaci"``: the randomised DtACI's miss rate in expectation, per central pair, shape (P,).

        :math:`\frac1T\sum_t \sum_i p_t^i\,\mathrm{err}_t^i`: the miss rate, in expectation over the draws, of
        the DtACI that issues expert :math:`i`'s level with probability :math:`p_t^i` (the algorithm Gibbs &
        Candès's Theorem 3.2 bounds; :meth:`coverage_error_bound`). The experts and weights do not depend on
        the draw, so it is read off the same run that issues the weighted mean (:meth:`miss_rate` counts
        that one's misses). NaN before any update.
        """
        self._check_params()
        self._require_rule(("dtaci",), "expected_miss_rate", "miss_rate")
        self._ensure_state()
        n = self.n_updates_
        return self.expected_misses_ / n if n else np.full(self.alpha_start_.size, np.nan)

    def coverage_error_bound(self) -> np.ndarray:
        r"""The long-run bound on :math:`|\text{miss rate} - 2p|` per central pair, shape (P,) (not ``rule="osd"``).

        ``rule="pid"``: conformal PID's (``calibprob.calibrators.online._pid.pid_bound``; scores in [0, 1],
        so with a fixed step it is at most :math:`(1 + \eta)/(\eta T)` plus the start's term).
        ``rule="dtaci"``: Gibbs & Candès's (2024) Theorem 3.2
        (``calibprob.calibrators.online._dtaci.dtaci_coverage_bound``) at the pair's learning rate
        :math:`\eta` and fixed share :math:`\sigma = 1/(2I)`: a bound on :meth:`expected_miss_rate` (the
        randomised algorithm's), not on :meth:`miss_rate` (the weighted mean issued, for which the paper
        proves none). At a fixed :math:`\eta, \sigma` it does not shrink with :math:`T`; with the paper's
        defaults it is vacuous (warned).
        ``rule="aci"``:

        :math:`(\max(\alpha_1, 1 - \alpha_1) + \gamma)/(\gamma T)` with :math:`\alpha_1 = 2p`
        (Gibbs & Candès 2021): on the PIT scale the paper's infinite set is the finite
        :math:`[0, 1]`, so nothing is clipped and the paper's bound holds for any sequence.

        Warns
        -----
        CalibprobWarning
            When the bound is vacuous (:math:`\gamma` too small for the :math:`T` outcomes seen; for
            DtACI, :math:`\eta` or :math:`\sigma` too large against the smallest step size).
        """
        self._check_params()
        self._require_rule(("aci", "dtaci", "pid"), "coverage_error_bound", "coverage_bound (rule='osd') or miss_rate")
        self._ensure_state()
        if self.rule == "pid":  # Proposition 1 through the P part's identity (calibprob.calibrators.online._pid)
            return pid_bound(self.pid_state_, self.alpha_start_)
        if self.rule == "dtaci":
            return dtaci_pair_bounds(self)
        T = max(self.n_updates_, 1)
        g = float(self.gamma)
        a1 = self.alpha_start_
        bound = (np.maximum(a1, 1.0 - a1) + g) / (g * T)
        warn_vacuous(bound, a1, g, T)
        return bound

    def predict(self, pred: xr.Dataset, *, levels: ArrayLike | None = None, groups: GroupsLike = None) -> xr.Dataset:
        """The recalibrated predictive distribution (the contract's name for :meth:`recalibrate`).

        ``fit(pred_cal, y_cal)`` then ``predict(pred)`` as every distribution
        post-processor; ``update`` continues the stream. ``groups=``: each row by its own
        group's stream (after a grouped :meth:`fit`).
        """
        mondrian = predict_with_groups(self, groups)
        if mondrian is not None:
            return mondrian.predict(pred, levels=levels, groups=groups)
        return keep_group_coord(self.recalibrate(pred, levels=levels), pred)

    def recalibrate(self, forecast: xr.Dataset, levels: ArrayLike | None = None) -> xr.Dataset:
        r"""Issue :math:`Q_t \circ R_t`: the recalibrated predictive distribution.

        Parameters
        ----------
        forecast : xarray.Dataset
            Base predictive distributions (any family of the contract).
        levels : array_like, optional
            Levels of the output; default the forecast's own levels.

        Returns
        -------
        xarray.Dataset
            ``quantile(obs, level) = Q_i(R_t(p))`` with ``R_t`` clipped to
            ``[level_floor, 1 - level_floor]``; ``attrs["family"] == "quantile"``,
            ``attrs["method"]`` the base method + ``"+online-recalibration"``.
        """
        forecast = check_predictive(forecast, self, "forecast")
        self._ensure_state()
        out_levels = forecast.calib.levels if levels is None else check_levels(levels)
        p = self.recalibration_map(out_levels, clip=True)
        q = forecast.calib.family.ppf(p)  # Q_i(R_t(p)) for any family of the contract
        # ties from clipping are allowed; floating noise must not create crossings
        q = np.maximum.accumulate(q, axis=1)
        method = f"{forecast.attrs.get('method', 'forecast')}+online-recalibration"
        out = from_quantiles(q, out_levels, obs=forecast["obs"].values, method=method)
        out.attrs.update(
            {
                "recalibration_eta": float(self.eta),
                "recalibration_coupling": self.coupling,
                "recalibration_n_updates": int(self.n_updates_),
            }
        )
        if self.rule != "osd":
            out.attrs.update({"recalibration_rule": self.rule, "recalibration_gamma": float(self.gamma)})
        return out

    # -- persistence -----------------------------------------------------------
    def to_dataset(self) -> xr.Dataset:
        """The full state as an ``xr.Dataset`` over ``level`` (saves to netCDF)."""
        self._check_params()
        self._ensure_state()
        ds = xr.Dataset(
            {
                "theta": ("level", self.theta_, {"long_name": "latent OSD iterates theta_t(p)"}),
                "recalibration": (
                    "level",
                    self.recalibration_,
                    {"long_name": "issued recalibration map R_t(p) (unclipped)"},
                ),
                "hits": ("level", self.hits_, {"long_name": "outcomes at or below the issued quantile"}),
            },
            coords={"level": self.levels_},
        )
        ds.attrs.update(
            {
                "estimator": type(self).__name__,
                "eta": float(self.eta),
                "coupling": str(self.coupling),
                "level_floor": float(self.level_floor),
                "n_updates": int(self.n_updates_),
                "reference": "Deshpande, Marx & Kuleshov (2024), Online calibrated and conformal "
                "prediction improves Bayesian optimization, AISTATS",
            }
        )
        if self.weight_sum_ is not None:  # a weighted stream: its sums too
            total, vmax, hits = self._weighted_state()
            ds["weighted_hits"] = ("level", hits, {"long_name": "sum_t v_t o_t(p)"})
            ds.attrs.update(weight_sum=total, weight_max=vmax)
        return rule_to_dataset(self, ds)  # rule="osd" writes exactly what it always wrote

    @classmethod
    def from_dataset(cls, ds: xr.Dataset) -> OnlineQuantileRecalibrator:
        """Rebuild a recalibrator (hyperparameters and state) from :meth:`to_dataset`'s output."""
        missing = [v for v in ("theta", "recalibration", "hits") if v not in ds]
        if missing or "level" not in ds.coords:
            raise ValueError(
                f"not an OnlineQuantileRecalibrator state: missing {missing or ['level']}. "
                "Pass the Dataset written by to_dataset()."
            )
        levels = np.asarray(ds["level"].values, float)
        est = cls(
            levels=levels,
            eta=float(ds.attrs["eta"]),
            coupling=str(ds.attrs["coupling"]),
            level_floor=float(ds.attrs.get("level_floor", 1e-3)),
            **rule_params_from_dataset(ds),
        )
        est._check_params()
        rule_state_from_dataset(est, ds)
        est.levels_ = levels
        est.theta_ = np.asarray(ds["theta"].values, float).copy()
        est.recalibration_ = np.asarray(ds["recalibration"].values, float).copy()
        est.hits_ = np.asarray(ds["hits"].values, float).copy()
        # a per-step stack (the BO loop's ``recalibrator`` group) carries n_updates as a variable
        est.n_updates_ = int(ds["n_updates"].values) if "n_updates" in ds else int(ds.attrs.get("n_updates", 0))
        est.weight_sum_ = est.weight_max_ = est.weighted_hits_ = None
        if "weighted_hits" in ds:
            est.weighted_hits_ = np.asarray(ds["weighted_hits"].values, float).copy()
            est.weight_sum_, est.weight_max_ = float(ds.attrs["weight_sum"]), float(ds.attrs["weight_max"])
        return est
