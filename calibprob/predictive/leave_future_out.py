r"""One-step-ahead predictive distributions of a time-series model without refits (PSIS-LFO).

Leave-future-out cross-validation (LFO-CV) predicts each :math:`y_t` from its past only,
:math:`p(y_t \mid y_{<t})`, for :math:`t = L+1, \dots, T`; exactly, that is :math:`T - L`
refits. Bürkner, Gabry & Vehtari (2020) approximate it with Pareto-smoothed importance
sampling (PSIS, Vehtari et al. 2024) from a posterior fitted on :math:`y_{1:i^\star}`:

.. math::

    r_t^{(s)} \propto \frac{p(\theta^{(s)} \mid y_{<t})}{p(\theta^{(s)} \mid y_{1:i^\star})}
    \propto \prod_{j \in J(t, i^\star)} p(y_j \mid y_{<j}, \theta^{(s)})^{\pm 1},
    \qquad
    \tilde w_t^{(s)} = \frac{\operatorname{PSIS}(r_t)_s}{\sum_u \operatorname{PSIS}(r_t)_u},

* ``direction="forward"`` (the paper's algorithm): start from a fit on :math:`y_{1:L}`
  (:math:`i^\star = L`) and move forward; the ratios *add* the points seen since the fit,
  :math:`J = \{i^\star+1, \dots, t-1\}` with exponent :math:`+1`;
* ``direction="backward"``: start from the fit on all of :math:`y_{1:T}` (:math:`i^\star = T`)
  and move backward; the ratios *remove* the future, :math:`J = \{t, \dots, i^\star\}` with
  exponent :math:`-1` (heavier-tailed ratios, hence more refits).

Whenever the Pareto shape :math:`\hat k_t` of the ratios exceeds ``k_threshold`` (0.7 in the
paper), the model is refitted on :math:`y_{<t}`, :math:`i^\star` becomes :math:`t - 1`, and
the importance sampling restarts from that posterior (whose prediction of :math:`y_t` is then
exact: equal weights). The one-step predictive is the weighted posterior predictive

.. math::

    \hat F_t(y) = \sum_s \tilde w_t^{(s)}\, 1[\tilde y_t^{(s)} \le y], \qquad
    u_t = \hat F_t(y_t), \qquad
    \widehat{\mathrm{elpd}}_t = \log \sum_s \tilde w_t^{(s)}\, p(y_t \mid y_{<t}, \theta^{(s)}),

with :math:`\tilde y_t^{(s)} \sim p(y_t \mid y_{<t}, \theta^{(s)})` (the posterior predictive
of the model on the whole series, which conditions each step on the observed past). The PITs
:math:`u_t` are what :class:`calibprob.OnlineQuantileRecalibrator` and the exchangeability
alarms read.

References
----------
Bürkner, P.-C., Gabry, J. and Vehtari, A. (2020). Approximate leave-future-out
cross-validation for Bayesian time series models. Journal of Statistical Computation and
Simulation 90(14), 2499-2523.

Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto smoothed
importance sampling. Journal of Machine Learning Research 25(72).
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike
from scipy.special import logsumexp

from calibprob.predictive._common import _levels_or_default
from calibprob.predictive._draws import from_draws

__all__ = ["lfo", "psis_lfo_weights", "LFOWeights"]

_DIRECTIONS = ("forward", "backward")

#: The time coordinate along ``obs`` that the online calibrators read
#: (``calibprob.calibrators.online._time.TIME_COORD``; not imported: the predictive layer sits below them).
TIME_COORD = "time"


@dataclass
class LFOWeights:
    r"""The PSIS-LFO importance weights of one series, as :func:`psis_lfo_weights` returns them.

    Attributes
    ----------
    log_weights : ndarray, shape (S, T - L)
        Normalised log-weights :math:`\log \tilde w_t^{(s)}` of the draws of the fit in use
        at each predicted position (``logsumexp`` over the draws is 0).
    pareto_k : ndarray, shape (T - L,)
        :math:`\hat k_t` of the ratios before any refit at :math:`t` (``nan`` where no
        ratio was needed: the prediction right after a fit).
    fit_end : ndarray of int, shape (T - L,)
        :math:`i^\star` of the fit whose draws predict position :math:`t` (the fit is on
        ``y[:fit_end]``; 0-based positions).
    refits : list of int
        The positions :math:`t` (0-based) at which the model was refitted on ``y[:t]``,
        in the order they happened; the initial fit is not counted.
    """

    log_weights: np.ndarray
    pareto_k: np.ndarray
    fit_end: np.ndarray
    refits: list = field(default_factory=list)


def _psislw(log_ratios: np.ndarray) -> tuple[np.ndarray, float]:
    """ArviZ's PSIS on one vector of log-ratios (r_eff = 1, as the paper's ``psis(logratios)``)."""
    from arviz_stats.base import array_stats

    with warnings.catch_warnings():
        # arviz warns on high k itself; LFO acts on it by refitting
        warnings.simplefilter("ignore")
        # arviz-stats' psislw takes a log-likelihood and smooths the ratios exp(-ary) (the LOO
        # convention 1/p); LFO's log-ratios go in negated so that it smooths exp(log_ratios)
        lw, k = array_stats.psislw(-np.asarray(log_ratios, float), r_eff=1.0)
    return np.asarray(lw, float), float(k)


def _check_threshold(k_threshold: Any) -> float:
    if isinstance(k_threshold, bool) or not isinstance(k_threshold, numbers.Real) or not float(k_threshold) > 0:
        raise ValueError(
            f"k_threshold must be a number > 0 (the Pareto k above which the model is refitted; "
            f"0.7 in Bürkner et al. 2020); got {k_threshold!r}."
        )
    return float(k_threshold)


def _check_plan(n_times: int, min_history: Any, k_threshold: Any, direction: Any) -> tuple[int, float]:
    if isinstance(min_history, bool) or not isinstance(min_history, numbers.Integral) or int(min_history) < 1:
        raise ValueError(
            f"min_history must be an integer >= 1 (the number of first points never predicted); got {min_history!r}."
        )
    if int(min_history) >= n_times:
        raise ValueError(
            f"min_history={min_history} leaves nothing to predict in a series of {n_times} points; "
            f"pass min_history < {n_times} (e.g. {max(1, n_times // 2)})."
        )
    if direction not in _DIRECTIONS:
        raise ValueError(f"direction must be one of {_DIRECTIONS}; got {direction!r}.")
    return int(min_history), _check_threshold(k_threshold)


def _log_ratios(loglik: np.ndarray, t: int, fit_end: int) -> np.ndarray | None:
    """Log importance ratios of the draws of the fit on ``y[:fit_end]`` for the target ``y[:t]``."""
    if t == fit_end:
        return None
    if t > fit_end:  # forward: add y[fit_end:t]
        return loglik[:, fit_end:t].sum(axis=1)
    return -loglik[:, t:fit_end].sum(axis=1)  # backward: remove y[t:fit_end]


def psis_lfo_weights(
    loglik_of_fit: Callable[[int], np.ndarray],
    n_times: int,
    *,
    min_history: int,
    k_threshold: float = 0.7,
    direction: str = "forward",
) -> LFOWeights:
    r"""The bookkeeping of PSIS-LFO: importance weights, :math:`\hat k` and refits along a series.

    Parameters
    ----------
    loglik_of_fit : callable
        ``loglik_of_fit(i)`` returns the pointwise log-likelihood
        :math:`\log p(y_j \mid y_{<j}, \theta^{(s)})`, an ``(S, n_times)`` array (column
        :math:`j` for position :math:`j`; columns the model does not score, such as an AR
        model's initial lags, may hold anything finite and are never read), at the draws of
        a posterior fitted on ``y[:i]``. It is called once for the initial fit and once per
        refit.
    n_times : int
        :math:`T`, the length of the series.
    min_history : int
        :math:`L`: positions ``L, ..., T-1`` (0-based) are predicted, each from its past.
    k_threshold : float, default 0.7
        Refit where :math:`\hat k_t` exceeds it.
    direction : {"forward", "backward"}, default "forward"
        Start from a fit on ``y[:L]`` and add points (the paper's algorithm), or start from
        the fit on the whole series and remove the future.

    Returns
    -------
    LFOWeights

    Examples
    --------
    >>> import numpy as np
    >>> ll = np.random.default_rng(0).normal(-1.0, 0.3, size=(400, 6))
    >>> w = psis_lfo_weights(lambda i: ll, 6, min_history=3)
    >>> w.log_weights.shape, w.fit_end.tolist(), w.refits
    ((400, 3), [3, 3, 3], [])
    """
    L, thr = _check_plan(n_times, min_history, k_threshold, direction)
    positions = range(L, n_times) if direction == "forward" else range(n_times - 1, L - 1, -1)
    fit_end = L if direction == "forward" else n_times
    loglik = np.asarray(loglik_of_fit(fit_end), float)
    n_draws = loglik.shape[0]
    out = LFOWeights(np.empty((n_draws, n_times - L)), np.full(n_times - L, np.nan), np.empty(n_times - L, int), [])
    for t in positions:
        lr = _log_ratios(loglik, t, fit_end)
        if lr is not None:
            lw, k = _psislw(lr)
            out.pareto_k[t - L] = k
            if k > thr:  # restart the importance sampling from a fit on y[:t]
                fit_end = t
                loglik = np.asarray(loglik_of_fit(fit_end), float)
                out.refits.append(t)
                lr = None
        if lr is None:  # the prediction right after a fit is exact: equal weights
            lw = np.full(n_draws, -np.log(n_draws))
        out.log_weights[:, t - L] = lw
        out.fit_end[t - L] = fit_end
    return out


def _check_series(y: ArrayLike, times: ArrayLike | None) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(y, float)
    if y.ndim != 1 or not np.isfinite(y).all():
        raise ValueError(f"y must be a 1-D array of finite numbers (one series); got shape {y.shape}.")
    times = np.arange(y.size) if times is None else np.asarray(times)
    if times.shape != y.shape:
        raise ValueError(f"times must have one entry per point of y ({y.size}); got shape {times.shape}.")
    steps = np.diff(times)
    if times.size > 1 and not (steps > np.zeros_like(steps)).all():
        bad = int(np.flatnonzero(~(steps > np.zeros_like(steps)))[0])
        raise ValueError(
            f"times must be strictly increasing (unordered or duplicated times at positions {bad} and "
            f"{bad + 1}: {times[bad]!r}, {times[bad + 1]!r}); sort the series by time first."
        )
    return y, times


class _Evaluator:
    """Fits the model on a history and scores the draws on the whole series' model."""

    def __init__(
        self,
        model_factory: Callable,
        y: np.ndarray,
        *,
        draws: int,
        tune: int,
        chains: int,
        random_seed: Any,
        sample_kwargs: dict | None,
    ) -> None:
        self.factory, self.y = model_factory, y
        self.kw = {"draws": draws, "tune": tune, "chains": chains, **(sample_kwargs or {})}
        self.rng = np.random.default_rng(random_seed)
        self.full = model_factory(y)
        observed = list(self.full.observed_RVs)
        if len(observed) != 1:
            raise ValueError(
                f"model_factory(y) must build a model with exactly one observed variable (the series); "
                f"it has {[v.name for v in observed]}."
            )
        self.obs = observed[0]
        self.pp: dict[int, np.ndarray] = {}  # fit_end -> (S, T) predictive draws of each fit
        self.ll: dict[int, np.ndarray] = {}  # fit_end -> (S, T) pointwise log-likelihood

    def __call__(self, fit_end: int) -> np.ndarray:
        import pymc as pm

        with self.factory(self.y[:fit_end]) as model:
            seed = int(self.rng.integers(2**31))
            idata = pm.sample(random_seed=seed, progressbar=False, compute_convergence_checks=False, **self.kw)
        free = [v.name for v in model.free_RVs]
        post = xr.DataTree.from_dict({"posterior": idata.posterior.to_dataset()[free]})
        with self.full:
            ll = pm.compute_log_likelihood(
                post, var_names=[self.obs.name], extend_inferencedata=False, progressbar=False
            )
            pp = pm.sample_posterior_predictive(
                post, var_names=[self.obs.name], random_seed=seed + 1, progressbar=False
            )
        self.ll[fit_end] = _as_matrix(ll[self.obs.name], self.y.size)
        self.pp[fit_end] = _as_matrix(pp["posterior_predictive"][self.obs.name], self.y.size)
        return self.ll[fit_end]


def _as_matrix(da: xr.DataArray, n_times: int) -> np.ndarray:
    """(chain, draw, obs) -> (S, n_times): the scored points are the last ones of the series."""
    m = da.values.reshape(da.sizes["chain"] * da.sizes["draw"], -1)
    if m.shape[1] > n_times:
        raise ValueError(
            f"the observed variable {da.name!r} has {m.shape[1]} entries for a series of {n_times}; "
            "model_factory(y) must score at most one entry per point of y (the last ones)."
        )
    out = np.zeros((m.shape[0], n_times))
    out[:, n_times - m.shape[1] :] = m
    return out


def _assemble(ev: _Evaluator, w: LFOWeights, y: np.ndarray, times: np.ndarray, L: int, levels: Any) -> xr.Dataset:
    """The contract's Dataset over the predicted times, with the PITs, k-hat, refits and elpd."""
    cols = np.arange(L, y.size)
    draws = np.stack([ev.pp[int(e)][:, t] for e, t in zip(w.fit_end, cols, strict=True)], axis=1)
    loglik = np.stack([ev.ll[int(e)][:, t] for e, t in zip(w.fit_end, cols, strict=True)], axis=1)
    weights = np.exp(w.log_weights)
    weights /= weights.sum(axis=0, keepdims=True)  # exact sums for from_draws' check
    pred = from_draws(draws, levels, method="lfo", weights=weights)
    pred = pred.assign_coords({"obs": np.asarray(times[L:]), TIME_COORD: ("obs", np.asarray(times[L:]))})
    pred["pit"] = ("obs", (weights * (draws <= y[L:])).sum(axis=0))
    pred["pit"].attrs["long_name"] = "PSIS-LFO predictive CDF at the outcome, u_t = F_t(y_t)"
    # self-normalised IS standard error sqrt(sum_s w_s^2 (h_s - u)^2) (Vehtari et al. 2024, eq. 6 with
    # independent draws: MCMC autocorrelation is not counted, so it is a lower bound for NUTS draws)
    hits = (draws <= y[L:]).astype(float)
    pred["pit_mcse"] = ("obs", np.sqrt((weights**2 * (hits - pred["pit"].values) ** 2).sum(axis=0)))
    pred["pit_mcse"].attrs["long_name"] = "Monte Carlo standard error of pit (importance sampling, iid draws)"
    pred["pareto_k"] = ("obs", w.pareto_k)
    pred["pareto_k"].attrs["long_name"] = "Pareto k of the LFO ratios before any refit (nan: right after a fit)"
    pred["refit"] = ("obs", np.isin(cols, w.refits))
    pred["fit_end"] = ("obs", w.fit_end)
    pred["fit_end"].attrs["long_name"] = "the draws come from a fit on y[:fit_end] (0-based positions)"
    pred["elpd"] = ("obs", logsumexp(w.log_weights + loglik, axis=0))
    pred["elpd"].attrs["long_name"] = "log one-step predictive density at the outcome"
    pred.attrs["refit_times"] = np.asarray(times)[np.asarray(w.refits, int)].tolist()
    pred.attrs["n_refits"] = len(w.refits)
    return pred


def lfo(
    model_factory: Callable,
    y: ArrayLike,
    times: ArrayLike | None = None,
    *,
    min_history: int,
    k_threshold: float = 0.7,
    direction: str = "forward",
    draws: int = 500,
    tune: int = 500,
    chains: int = 2,
    levels: ArrayLike | None = None,
    random_seed: Any = None,
    sample_kwargs: dict | None = None,
) -> xr.Dataset:
    r"""Approximate leave-future-out one-step predictive distributions of a PyMC time-series model.

    Implements Bürkner, Gabry & Vehtari (2020), PSIS-LFO: each :math:`y_t`,
    :math:`t = L+1, \dots, T`, is predicted from :math:`y_{<t}` by Pareto-smoothed importance
    sampling from one posterior, refitting on :math:`y_{<t}` only where the Pareto shape
    :math:`\hat k_t` exceeds ``k_threshold`` (module docstring for the equations). The result
    is the predictive contract over the predicted times (``time`` coordinate along ``obs``),
    so it feeds :class:`calibprob.OnlineQuantileRecalibrator` (``fit`` on the first rows,
    ``update`` along the rest) and, through ``pit``, the exchangeability alarms.

    Parameters
    ----------
    model_factory : callable
        ``model_factory(y_history) -> pm.Model``: the model of a history (a 1-D array), with
        one observed variable whose entries are :math:`\log p(y_j \mid y_{<j}, \theta)` for the
        *last* points of the history (an AR(:math:`p`) model conditions on its first :math:`p`
        points), and whose free variables do not grow with the history (AR, ARMA with a
        conditional likelihood, regression on lags). Example:
        ``calibprob.examples.ar1.ar1_model``.
    y : array_like, shape (T,)
        The series.
    times : array_like, shape (T,), optional
        Strictly increasing times (numbers or ``datetime64``); default ``0, ..., T-1``.
    min_history : int
        :math:`L`: the first :math:`L` points are never predicted; :math:`1 \le L < T`.
    k_threshold : float, default 0.7
        Refit where :math:`\hat k_t` exceeds it (the paper's :math:`\tau = 0.7`); > 0.
    direction : {"forward", "backward"}, default "forward"
        ``"forward"``: fit on :math:`y_{1:L}` and add points (the paper's algorithm);
        ``"backward"``: fit once on :math:`y_{1:T}` and remove the future.
    draws, tune, chains : int
        ``pm.sample`` settings of every fit.
    levels : array_like, optional
        Quantile levels of the Dataset; default :data:`calibprob.predictive.DEFAULT_LEVELS`.
    random_seed : int, optional
        Seeds every fit and posterior-predictive draw.
    sample_kwargs : dict, optional
        More ``pm.sample`` keywords (``nuts_sampler=``, ``target_accept=``, ...).

    Returns
    -------
    xarray.Dataset
        ``quantile(obs, level)``, ``mean``, ``std`` (weighted draws, :func:`calibprob.from_draws`),
        plus ``pit``, ``pit_mcse``, ``pareto_k``, ``refit`` (bool), ``fit_end`` and ``elpd`` over ``obs``
        (= the predicted times, also as coordinate ``time``); ``attrs["refit_times"]``,
        ``attrs["n_refits"]``, ``attrs["k_threshold"]``, ``attrs["direction"]``,
        ``attrs["method"] == "lfo"``.

    Raises
    ------
    ValueError
        ``min_history >= T`` or < 1, unordered or duplicated ``times``, ``k_threshold <= 0``,
        an unknown ``direction``, a model with other than one observed variable or one that
        does not score every predicted point.

    References
    ----------
    Bürkner, P.-C., Gabry, J. and Vehtari, A. (2020). Approximate leave-future-out
    cross-validation for Bayesian time series models. Journal of Statistical Computation and
    Simulation 90(14), 2499-2523.

    Examples
    --------
    >>> import numpy as np, calibprob  # doctest: +SKIP
    >>> from calibprob.examples.ar1 import ar1_model, simulate_ar1  # doctest: +SKIP
    >>> y = simulate_ar1(40, random_seed=1)  # doctest: +SKIP
    >>> pred = calibprob.predictive.lfo(ar1_model, y, min_history=25, draws=300, tune=300,
    ...                                 random_seed=2)  # doctest: +SKIP
    >>> pred["pit"].sizes["obs"]  # doctest: +SKIP
    15
    """
    y, times = _check_series(y, times)
    L, thr = _check_plan(y.size, min_history, k_threshold, direction)
    levels = _levels_or_default(levels)
    ev = _Evaluator(
        model_factory, y, draws=draws, tune=tune, chains=chains, random_seed=random_seed, sample_kwargs=sample_kwargs
    )
    n_scored = int(np.size(ev.full.rvs_to_values[ev.obs].eval()))
    if not y.size - L <= n_scored <= y.size:
        raise ValueError(
            f"model_factory(y) scores {n_scored} points of the {y.size}; it must score every predicted one "
            f"(the last {y.size - L}) and at most all {y.size}. Lower min_history or score more points."
        )
    w = psis_lfo_weights(ev, y.size, min_history=L, k_threshold=thr, direction=direction)
    pred = _assemble(ev, w, y, times, L, levels)
    pred.attrs.update(k_threshold=thr, direction=direction, min_history=L)
    return pred
