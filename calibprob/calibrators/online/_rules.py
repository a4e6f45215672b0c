r"""The PIT-scale update rules of :class:`~calibprob.calibrators.online.OnlineQuantileRecalibrator` other than OSD.

Every rule here moves the recalibration map :math:`R_t` through the central pairs of levels
:math:`(p, 1 - p)` (``calibprob.calibrators.online._aci_pit``): each pair issues the central PIT
interval :math:`[(1 - r_t)/2, (1 + r_t)/2]` and misses when the score :math:`s_t = |2u_t - 1|` exceeds
:math:`r_t`. The rules differ in how :math:`r_t` moves:

* ``"aci"``: :math:`r_t` is the conformal order statistic of the score window at ACI's level
  :math:`\alpha_t` (Gibbs & Candès 2021);
* ``"dtaci"``: at the weighted mean level of ACI experts over step sizes (Gibbs & Candès 2022);
* ``"pid"``: :math:`r_t` is conformal PID's threshold (Angelopoulos, Candès & Tibshirani 2023;
  ``calibprob.calibrators.online._pid``), read on :math:`[0, 1]`: above 1 it is the whole PIT interval
  (the paper's infinite set, finite here), below 0 the empty one. Scores live in :math:`[0, 1]`, so
  :math:`B = 1` in Proposition 1.

The functions take the recalibrator and read or set its state; ``rule="osd"`` never reaches them, so
its arithmetic is untouched.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.validation import check_array, check_choice, check_int
from calibprob.calibrators.online._aci_pit import aci_pit_map, central_pairs
from calibprob.calibrators.online._dtaci import (
    DTACI_GAMMAS,
    dtaci_coverage_bound,
    dtaci_eta,
    dtaci_step,
    warn_vacuous_dtaci,
)
from calibprob.calibrators.online._osd import publish
from calibprob.calibrators.online._pid import (
    PROPORTIONAL,
    check_pid_params,
    make_scorecaster,
    pid_new_state,
    pid_step,
)
from calibprob.calibrators.online.aci import aci_threshold
from calibprob.calibrators.online.pid import check_burnin_fits, history_length

if TYPE_CHECKING:  # the recalibrator imports these rules: its name for the annotations only
    from calibprob.calibrators.online.recalibrator import OnlineQuantileRecalibrator

__all__ = [
    "RULES",
    "check_rule",
    "expert_gammas",
    "reset_rule",
    "set_scores",
    "update_rule",
    "rule_to_dataset",
    "dtaci_pair_bounds",
]

#: Update rules of the recalibrator: Deshpande et al.'s OSD, ACI, DtACI and conformal PID on the PIT scale.
RULES = ("osd", "aci", "dtaci", "pid")


def expert_gammas(gammas: ArrayLike | None) -> np.ndarray:
    """DtACI's expert step sizes: increasing, in (0, 1)."""
    if gammas is None:
        return DTACI_GAMMAS.copy()
    g = check_array(np.atleast_1d(gammas), "gammas", ndim=1)
    if g.size < 1 or np.any(g <= 0) or np.any(g >= 1) or np.any(np.diff(g) <= 0):
        raise ValueError(
            f"gammas must be increasing step sizes in (0, 1); got {gammas!r}. Pass e.g. the paper's "
            "[0.001, 0.002, 0.004, ..., 0.128] (the default)."
        )
    return g


def check_rule(est: OnlineQuantileRecalibrator, levels: np.ndarray) -> None:
    """Check the rule and every rule parameter of ``est`` (each is checked whatever the rule)."""
    check_choice(est.rule, "rule", RULES)
    try:
        gamma = float(est.gamma)
    except (TypeError, ValueError) as err:
        raise TypeError(f"gamma must be a number in (0, 1) (ACI's step size); got {est.gamma!r}.") from err
    if not (np.isfinite(gamma) and 0.0 < gamma < 1.0):
        raise ValueError(
            f"gamma must be a step size in (0, 1); got {est.gamma!r}. Gibbs and Candès use 0.005; larger adapts faster."
        )
    if est.window is not None:
        check_int(est.window, "window", minimum=1)
    check_int(est.regret_window, "regret_window", minimum=1)
    expert_gammas(est.gammas)
    check_pid_params(est.lr, est.csat, est.ki, est.burnin)
    check_choice(est.proportional_lr, "proportional_lr", PROPORTIONAL)
    make_scorecaster(est.scorecaster)
    if est.rule != "osd":
        central_pairs(np.asarray(levels, float))


def reset_rule(est: OnlineQuantileRecalibrator, levels: np.ndarray) -> None:
    """The rule's state at the identity map :math:`R_1(p) = p` (no scores yet)."""
    lower, _, _ = central_pairs(levels)
    est.alpha_start_ = 2.0 * levels[lower]  # alpha = 1 - c with c = 1 - 2p, exact in binary
    est.alpha_ = est.alpha_start_.copy()
    est.confidence_levels_ = 1.0 - est.alpha_start_
    est.misses_ = np.zeros(lower.size, np.int64)
    est.n_floored_ = np.zeros(levels.size, np.int64)
    if est.rule == "dtaci":  # k experts per pair, all starting at the target, equal weights
        k = expert_gammas(est.gammas).size
        est.expert_alpha_ = np.repeat(est.alpha_start_[:, None], k, axis=1)
        est.expert_weights_ = np.full((lower.size, k), 1.0 / k)
        est.expert_misses_ = np.zeros((lower.size, k), np.int64)
        # sum_t sum_i p_t^i err_t^i: the randomised DtACI's misses in expectation (Theorem 3.2's quantity)
        est.expected_misses_ = np.zeros(lower.size)
    if est.rule == "pid":  # the identity: every pair's threshold at its own confidence 1 - 2p
        est._scorecaster = make_scorecaster(est.scorecaster)
        est.pid_state_ = pid_new_state(est.confidence_levels_, n_keep=_n_keep(est))
    set_scores(est, np.empty(0))


def _n_keep(est: OnlineQuantileRecalibrator) -> int:
    return history_length(int(est.burnin), getattr(est, "_scorecaster", None))


def _pid_r(est: OnlineQuantileRecalibrator) -> np.ndarray:
    """PID's thresholds on the PIT scale: the raw ones read on [0, 1]."""
    return np.clip(est.pid_state_["q"], 0.0, 1.0)


def _map(est: OnlineQuantileRecalibrator) -> tuple[np.ndarray, np.ndarray]:
    """The map :math:`R_t` at the tracked levels and each pair's threshold :math:`r_t`."""
    if est.rule != "pid":
        return aci_pit_map(est.levels_, est._sorted, est.alpha_)
    lower, upper, middle = central_pairs(est.levels_)
    r = _pid_r(est)
    R = np.empty(est.levels_.size)
    R[lower], R[upper] = (1.0 - r) / 2.0, (1.0 + r) / 2.0
    R[middle] = 0.5
    return R, r


def set_scores(est: OnlineQuantileRecalibrator, scores: ArrayLike) -> None:
    """The score window, and the map it gives at the current state."""
    est.scores_ = np.asarray(scores, float)
    est._sorted = np.sort(est.scores_)
    R, _ = _map(est)
    est.theta_ = R
    est.recalibration_ = publish(R, est.coupling)


def calibrate_rule(est: OnlineQuantileRecalibrator, scores: np.ndarray) -> None:
    """The calibration stream's PIT scores start the window (ACI, DtACI) or PID's history and thresholds."""
    if est.rule == "pid":
        check_burnin_fits(int(est.burnin), scores.size, "the calibration stream")
        srt = np.sort(scores)
        start = [min(aci_threshold(srt, float(a), infinite="allow")[0], 1.0) for a in est.alpha_start_]
        est.pid_state_ = pid_new_state(start, scores, n_keep=_n_keep(est))
    set_scores(est, scores if est.window is None else scores[-int(est.window) :])


def update_rule(est: OnlineQuantileRecalibrator, u: np.ndarray, floor: float) -> None:
    """One step of the rule per PIT value, on every central pair."""
    window = deque(est.scores_, maxlen=None if est.window is None else int(est.window))
    for ut in u:
        R, r = _map(est)
        issued = publish(R, est.coupling)
        s_t = abs(2.0 * float(ut) - 1.0)
        err = s_t > r  # the pair's own interval missed the outcome
        est.hits_ = est.hits_ + (ut <= issued)
        est.n_floored_ += (issued < floor) | (issued > 1.0 - floor)
        if est.rule == "pid":
            lr, csat, ki, burnin = check_pid_params(est.lr, est.csat, est.ki, est.burnin)
            err = pid_step(
                est.pid_state_,
                s_t,
                est.alpha_start_,
                r,
                lr=lr,
                csat=csat,
                ki=ki,
                burnin=burnin,
                proportional_lr=est.proportional_lr,
                scorecaster=est._scorecaster,
                n_keep=_n_keep(est),
            ).astype(bool)
        elif est.rule == "dtaci":
            _dtaci_step(est, s_t)
        else:
            est.alpha_ = est.alpha_ + float(est.gamma) * (est.alpha_start_ - err)
        est.misses_ += err
        if est.window is not None:  # the new score joins the lookback window
            window.append(s_t)
            est.scores_ = np.asarray(window, float)
            est._sorted = np.sort(est.scores_)
    est.n_updates_ += int(u.size)
    R, _ = _map(est)
    est.theta_ = R
    est.recalibration_ = publish(R, est.coupling)


def _dtaci_step(est: OnlineQuantileRecalibrator, s_t: float) -> None:
    """Every pair's experts and weights after the score ``s_t``; ``alpha_`` becomes their weighted mean."""
    gammas = expert_gammas(est.gammas)
    horizon = int(est.regret_window)  # the paper's I
    sigma = 1.0 / (2.0 * horizon)
    for j, a in enumerate(est.alpha_start_):
        nxt, w, _, expert_err, _ = dtaci_step(
            est.expert_alpha_[j],
            est.expert_weights_[j],
            est._sorted,
            s_t,
            float(a),
            gammas,
            float(dtaci_eta(a, gammas.size, horizon)),
            sigma,
        )
        # the weights p_t the experts' errors are read with are those before the step (Theorem 3.2)
        est.expected_misses_[j] += float(est.expert_weights_[j] @ expert_err)
        est.expert_alpha_[j], est.expert_weights_[j] = nxt, w
        est.expert_misses_[j] += expert_err
    est.alpha_ = np.sum(est.expert_weights_ * est.expert_alpha_, axis=1)


def dtaci_pair_bounds(est: OnlineQuantileRecalibrator) -> np.ndarray:
    """Theorem 3.2's bound per pair at the pair's eta and sigma = 1/(2I), after ``n_updates_`` outcomes (warned if vacuous)."""
    gammas = expert_gammas(est.gammas)
    horizon = int(est.regret_window)
    T = max(est.n_updates_, 1)
    etas = [float(dtaci_eta(a, gammas.size, horizon)) for a in est.alpha_start_]
    bound = np.array([dtaci_coverage_bound(gammas, eta, 1.0 / (2.0 * horizon), T) for eta in etas])
    warn_vacuous_dtaci(bound, est.alpha_start_, T)
    return bound


def rule_to_dataset(est: OnlineQuantileRecalibrator, ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with the rule's state (nothing for ``rule="osd"``: it writes what it always wrote)."""
    if est.rule == "osd":
        return ds
    ds["alpha"] = ("pair", est.alpha_, {"long_name": "ACI levels alpha_t per central pair"})
    ds["misses"] = ("pair", est.misses_, {"long_name": "misses of the pair's central interval"})
    ds["n_floored"] = ("level", est.n_floored_, {"long_name": "outcomes whose issued level hit the floor"})
    ds["scores"] = ("score", est.scores_, {"long_name": "PIT scores |2u - 1|, in time order"})
    ds.attrs.update({"rule": est.rule, "gamma": float(est.gamma), "regret_window": int(est.regret_window)})
    if est.window is not None:
        ds.attrs["window"] = int(est.window)
    if est.rule == "dtaci":
        ds["expert_alpha"] = (("pair", "expert"), est.expert_alpha_, {"long_name": "DtACI experts' levels"})
        ds["expert_weights"] = (("pair", "expert"), est.expert_weights_, {"long_name": "DtACI experts' weights"})
        ds["expert_misses"] = (("pair", "expert"), est.expert_misses_, {"long_name": "DtACI experts' misses"})
        ds["expected_misses"] = (
            "pair",
            est.expected_misses_,
            {"long_name": "randomised DtACI's misses in expectation, sum_t sum_i p_t^i err_t^i"},
        )
        ds = ds.assign_coords(expert_gamma=("expert", expert_gammas(est.gammas)))
    if est.rule == "pid":
        if not isinstance(est.scorecaster, (str, type(None))):
            raise ValueError(
                f"to_dataset() writes numbers only, and scorecaster={type(est.scorecaster).__name__} is an object. "
                "Use est.save(path) (calibprob.load asks for the object back), or scorecaster='ar' or None."
            )
        for key, val in est.pid_state_.items():
            ds[f"pid_{key}"] = (f"pid_{key}_dim", np.asarray(val))
        ds.attrs.update(
            {
                "lr": float(est.lr),
                "csat": float(est.csat),
                "ki": float(est.ki),
                "burnin": int(est.burnin),
                "proportional_lr": str(est.proportional_lr),
                "scorecaster": "none" if est.scorecaster is None else str(est.scorecaster),
            }
        )
    return ds


def rule_params_from_dataset(ds: xr.Dataset) -> dict:
    """The constructor arguments :func:`rule_to_dataset` wrote (defaults where it wrote none)."""
    out = {
        "rule": str(ds.attrs.get("rule", "osd")),
        "gamma": float(ds.attrs.get("gamma", 0.005)),
        "window": int(ds.attrs["window"]) if "window" in ds.attrs else None,
        "gammas": np.asarray(ds["expert_gamma"].values, float) if "expert_gamma" in ds.coords else None,
        "regret_window": int(ds.attrs.get("regret_window", 100)),
    }
    if out["rule"] == "pid":
        sc = str(ds.attrs["scorecaster"])
        out.update(
            lr=float(ds.attrs["lr"]),
            csat=float(ds.attrs["csat"]),
            ki=float(ds.attrs["ki"]),
            burnin=int(ds.attrs["burnin"]),
            proportional_lr=str(ds.attrs["proportional_lr"]),
            scorecaster=None if sc == "none" else sc,
        )
    return out


def rule_state_from_dataset(est: OnlineQuantileRecalibrator, ds: xr.Dataset) -> None:
    """Restore the rule's state written by :func:`rule_to_dataset`."""
    if est.rule == "osd":
        return
    est.reset()
    est.alpha_ = np.asarray(ds["alpha"].values, float).copy()
    est.misses_ = np.asarray(ds["misses"].values, np.int64).copy()
    est.n_floored_ = np.asarray(ds["n_floored"].values, np.int64).copy()
    est.scores_ = np.asarray(ds["scores"].values, float).copy()
    est._sorted = np.sort(est.scores_)
    if est.rule == "dtaci":
        est.expert_alpha_ = np.asarray(ds["expert_alpha"].values, float).copy()
        est.expert_weights_ = np.asarray(ds["expert_weights"].values, float).copy()
        est.expert_misses_ = np.asarray(ds["expert_misses"].values, np.int64).copy()
        # a state saved before the count existed: unknown, not zero
        saved = ds["expected_misses"].values if "expected_misses" in ds else np.full(est.alpha_.size, np.nan)
        est.expected_misses_ = np.asarray(saved, float).copy()
    if est.rule == "pid":
        est.pid_state_ = {k: np.asarray(ds[f"pid_{k}"].values).copy() for k in est.pid_state_}
