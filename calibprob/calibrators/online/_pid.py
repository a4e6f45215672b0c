r"""NumPy layer of conformal PID control (Angelopoulos, Candès & Tibshirani 2023).

Conformal PID tracks the :math:`1 - \alpha` quantile of a stream of conformity scores
:math:`s_t` directly, without a calibration quantile. With :math:`\mathrm{err}_t = \mathbb 1\{s_t > q_t\}`
(:math:`q_t` the threshold issued before :math:`s_t` is seen), the issued threshold is the sum of
three terms,

.. math::

    q_{t+1} = \underbrace{\hat q_{t+1}}_{P} + \underbrace{r_t\Bigl(\sum_{i \le t} (\mathrm{err}_i - \alpha)\Bigr)}_{I}
      + \underbrace{g_{t+1}}_{\text{scorecaster}}, \qquad
    \hat q_{t+1} = \hat q_t + \eta_t(\mathrm{err}_t - \alpha),

* **P, quantile tracking**: online gradient descent on the pinball loss with the proportional step
  :math:`\eta_t = \mathrm{lr} \cdot (\max - \min)` of ``burnin`` scores: ``proportional_lr="burnin"``
  fixes it from the first ``burnin`` scores (the calibration stream's last ones), ``"rolling"`` reads it
  from the last ``burnin`` scores at every step (the authors' ``proportional_lr=True``), ``"none"`` uses
  ``lr`` itself;
* **I, the saturating integrator** :math:`r_t(x) = K_I \tan\bigl(x \log(t) / (C_{\mathrm{sat}}\, t)\bigr)`
  (:math:`\pm\infty` once the argument leaves :math:`(-\pi/2, \pi/2)`; :func:`saturation_log`), with
  :math:`t` the number of outcomes seen;
* **the scorecaster** :math:`g_{t+1}`: any forecast of the next score from the past ones
  (:class:`ARScorecaster`, the default ``"ar"``; :class:`BaseScorecaster` for any calibprob base; or
  an object with ``forecast(history) -> float``), switched on once more than ``burnin`` scores have
  been seen (0 before, as in the authors' code).

``authors_indexing=True`` reproduces the authors' code exactly (``core/methods.py``,
``quantile_integrator_log_scorecaster`` with ``ahead=1``, aangelopoulos/conformal-time-series @ a1e9765):
there the integrator and the scorecaster issued at :math:`t + 1` see the errors and scores only up to
:math:`t - 1`; the default follows the paper's equation and uses everything up to :math:`t`.

Guarantee. Whatever the integrator and the scorecaster do, :math:`\hat q` moves only by
:math:`\eta_t(\mathrm{err}_t - \alpha)`, so by summation by parts over the steps with :math:`\eta_t > 0`

.. math::

    \Bigl|\sum_{t=1}^T (\mathrm{err}_t - \alpha)\Bigr| \le \frac{|\hat q_{T+1}|}{\eta_T} + \frac{|\hat q_1|}{\eta_1}
      + \max_t |\hat q_t| \sum_{t \ge 2} \Bigl|\frac1{\eta_t} - \frac1{\eta_{t-1}}\Bigr|
      + n_0 \max(\alpha, 1 - \alpha)

(:math:`n_0` steps with :math:`\eta_t = 0`): :func:`pid_bound`. With a fixed step :math:`\eta`,
:math:`\hat q_1 = 0` and :math:`|s_t - g_t - r_t| \le B`, :math:`\hat q` never leaves
:math:`[-B - \eta, B + \eta]` and this is the paper's Proposition 1,
:math:`|\frac1T\sum_t \mathrm{err}_t - \alpha| \le (B + \eta)/(\eta T)`, for any scorecaster.

References
----------
Angelopoulos, A. N., Candès, E. J. and Tibshirani, R. J. (2023). Conformal PID control for time
series prediction. NeurIPS 36, §2 (quantile tracking, Proposition 1), §3 (integrator, scorecaster).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "SCORECASTERS",
    "PROPORTIONAL",
    "saturation_log",
    "ARScorecaster",
    "BaseScorecaster",
    "make_scorecaster",
    "pid_new_state",
    "pid_step",
    "pid_bound",
    "pid_path",
    "check_pid_params",
]


class Scorecaster(Protocol):
    """What a scorecaster is: a forecast of the next conformity score from the past ones (oldest first)."""

    def forecast(self, history: np.ndarray) -> float: ...


#: Built-in scorecasters by name (``None``: no scorecaster, the P + I controller).
SCORECASTERS = ("ar",)
#: How the P step scales with the scores: frozen after the burn-in, the authors' rolling window, or ``lr``.
PROPORTIONAL = ("burnin", "rolling", "none")
#: How many past scores are kept when a scorecaster does not say how many it reads.
DEFAULT_HISTORY = 10_000


def saturation_log(x: ArrayLike, t: int, csat: float, ki: float) -> np.ndarray:
    r"""The integrator :math:`K_I \tan\bigl(x \log(t + 1) / (C_{\mathrm{sat}} (t + 1))\bigr)`, :math:`\pm\infty` past :math:`\pm\pi/2`.

    ``t`` counts the outcomes before the last one (the authors' ``t_pred``), so at the first step
    :math:`\log 1 = 0` and the integrator is 0; :math:`K_I = 0` switches it off.

    Examples
    --------
    >>> saturation_log([0.0, 2.0, 1e6], 9, 5.0, 10.0).round(4).tolist()
    [0.0, 0.9236, inf]
    """
    x = np.asarray(x, float)
    if ki == 0:
        return np.zeros_like(x)
    z = x * np.log(t + 1.0) / (csat * (t + 1.0))
    out = ki * np.tan(np.clip(z, -np.pi / 2, np.pi / 2))
    return np.where(z >= np.pi / 2, np.inf, np.where(z <= -np.pi / 2, -np.inf, out))


class ARScorecaster:
    r"""Autoregressive scorecaster: least squares AR(``order``) with intercept on the last ``window`` scores.

    The paper's Theta model needs statsmodels; an AR on recent scores is the other simple forecaster
    the authors use (their ``p_order_for_ar_scorecaster``). With fewer than ``order + 2`` scores it
    forecasts their mean (0 with none).

    Parameters
    ----------
    order : int, default 3
        The AR order :math:`p`.
    window : int, default 200
        How many of the latest scores the least squares fit reads.

    Examples
    --------
    >>> import numpy as np
    >>> s = 1.0 + 0.5 ** np.arange(40)          # s_t - 1 halves each step: AR(1) exactly
    >>> round(ARScorecaster(order=1).forecast(s), 9) == round(1.0 + 0.5 ** 40, 9)
    True
    """

    def __init__(self, order: int = 3, window: int = 200) -> None:
        self.order = int(order)
        self.window = int(window)

    def forecast(self, history: ArrayLike) -> float:
        h = np.asarray(history, float)[-self.window :]
        p = self.order
        if h.size < p + 2:
            return float(h.mean()) if h.size else 0.0
        rows = h.size - p
        X = np.ones((rows, p + 1))
        for j in range(p):
            X[:, j + 1] = h[p - 1 - j : p - 1 - j + rows]  # lag j + 1
        beta, *_ = np.linalg.lstsq(X, h[p:], rcond=None)
        return float(beta[0] + beta[1:] @ h[::-1][:p])


class BaseScorecaster:
    r"""Any calibprob base as a scorecaster: fit on lagged scores, forecast by its predictive mean.

    The base (anything with ``fit(X, y)`` and ``predict(X)`` returning a predictive Dataset, e.g.
    ``calibprob.LinearRegression``) is refitted every ``refit_every`` forecasts on the last
    ``window`` scores, with the ``lags`` previous scores as inputs.

    Parameters
    ----------
    base : estimator
        A calibprob base (or any model with ``fit(X, y)`` and ``predict(X)`` returning a predictive Dataset).
    lags : int, default 3
        How many previous scores are the inputs.
    window : int, default 200
        How many of the latest scores the fit reads.
    refit_every : int, default 25
        Refit the base after this many forecasts (the first forecast fits it).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> s = 1.0 + 0.5 ** np.arange(40)          # s_t - 1 halves each step: linear in the last score
    >>> f = BaseScorecaster(calibprob.LinearRegression(), lags=1).forecast(s)
    >>> bool(abs(f - (1.0 + 0.5**40)) < 1e-6)
    True
    """

    # Any: a calibprob base (PyMC ones included) whose predict gives a Dataset read through the .calib accessor
    def __init__(self, base: Any, *, lags: int = 3, window: int = 200, refit_every: int = 25) -> None:
        self.base = base
        self.lags = int(lags)
        self.window = int(window)
        self.refit_every = int(refit_every)
        self._calls = 0

    def _design(self, h: np.ndarray) -> np.ndarray:
        rows = h.size - self.lags
        return np.column_stack([h[self.lags - 1 - j : self.lags - 1 - j + rows] for j in range(self.lags)])

    def forecast(self, history: ArrayLike) -> float:
        h = np.asarray(history, float)[-self.window :]
        if h.size < self.lags + 3:
            return float(h.mean()) if h.size else 0.0
        if self._calls % self.refit_every == 0:
            self.base.fit(self._design(h), h[self.lags :])
        self._calls += 1
        x = h[::-1][: self.lags][None, :]
        return float(np.asarray(self.base.predict(x).calib.mean().values, float).reshape(-1)[0])


def make_scorecaster(spec: str | Scorecaster | None) -> Scorecaster | None:
    """``None``, ``"ar"`` (an :class:`ARScorecaster`) or an object with ``forecast(history)``."""
    if spec is None:
        return None
    if isinstance(spec, str):
        if spec == "ar":
            return ARScorecaster()
        raise ValueError(
            f"scorecaster must be one of {SCORECASTERS}, None or an object with forecast(history) -> float; got "
            f"{spec!r}. Pass scorecaster='ar' (an AR(3) on the last 200 scores) or None (P + I control only)."
        )
    if not callable(getattr(spec, "forecast", None)):
        raise TypeError(
            f"scorecaster must have a method forecast(history) -> float; got {type(spec).__name__}. Wrap a calibprob "
            "base in calibprob.calibrators.online.BaseScorecaster(base)."
        )
    return spec


def check_pid_params(lr: float, csat: float, ki: float, burnin: int) -> tuple[float, float, float, int]:
    """Validated ``(lr, csat, ki, burnin)``: ``lr > 0``, ``csat > 0``, ``ki >= 0``, ``burnin >= 1``."""
    vals = {}
    for name, v, lo, fix in (
        ("lr", lr, "> 0", "the authors' grid is 1, 0.5, 0.1, 0.05"),
        ("csat", csat, "> 0", "the authors use 5 (elec2), 1 (AMZN), 2 (COVID)"),
        ("ki", ki, ">= 0", "the authors use 10 (elec2), 200 (AMZN); 0 switches the integrator off"),
    ):
        try:
            x = float(v)
        except (TypeError, ValueError) as err:
            raise TypeError(f"{name} must be a number {lo}; got {v!r}. {fix}.") from err
        if not np.isfinite(x) or (x < 0 if lo == ">= 0" else x <= 0):
            raise ValueError(f"{name} must be a finite number {lo} (conformal PID); got {v!r}. Pass e.g.: {fix}.")
        vals[name] = x
    if isinstance(burnin, bool) or not isinstance(burnin, (int, np.integer)) or burnin < 1:
        raise ValueError(
            f"burnin must be an integer >= 1 (the scores the proportional step's range is read from); got {burnin!r}. "
            "The authors use 300 on elec2."
        )
    return vals["lr"], vals["csat"], vals["ki"], int(burnin)


def pid_new_state(
    q_start: ArrayLike, history: ArrayLike = (), *, n_keep: int = DEFAULT_HISTORY
) -> dict[str, np.ndarray]:
    """A fresh PID state: one track per entry of ``q_start`` (the first thresholds), the given score history."""
    q = np.array(q_start, float).reshape(-1)
    k = q.size
    h = np.asarray(history, float)[-n_keep:]
    return {
        "q_hat": q.copy(),
        "q_hat_start": q.copy(),
        "q_hat_absmax": np.abs(q),
        "integ": np.zeros(k),
        "g": np.zeros(1),
        "q": q.copy(),
        "err_sum": np.zeros(k),
        "t": np.zeros(1, np.int64),
        "inv_eta_first": np.full(1, np.nan),
        "inv_eta_last": np.full(1, np.nan),
        "inv_eta_tv": np.zeros(1),
        "n_zero_eta": np.zeros(1, np.int64),
        "eta_burnin": np.full(1, np.nan),
        "history": h.copy(),
    }


def _step_size(state: dict, lr: float, burnin: int, proportional_lr: str) -> float:
    """:math:`\\eta_t`: ``lr`` times the score range of the last ``burnin`` scores (rolling, or frozen once seen)."""
    hist = state["history"]
    if proportional_lr == "none" or not hist.size:
        return lr
    if proportional_lr == "rolling":  # the authors' code: the range moves with the window
        window = hist[-burnin:]
        return lr * float(window.max() - window.min())
    frozen = state["eta_burnin"]
    if np.isnan(frozen[0]) and hist.size >= burnin:  # the first full burn-in fixes the step for good
        window = hist[-burnin:]
        frozen[0] = lr * float(window.max() - window.min())
    return lr if np.isnan(frozen[0]) else float(frozen[0])


def pid_step(
    state: dict[str, np.ndarray],
    s: float,
    alpha: np.ndarray,
    issued: np.ndarray,
    *,
    lr: float,
    csat: float,
    ki: float,
    burnin: int,
    proportional_lr: str,
    scorecaster: Scorecaster | None,
    n_keep: int = DEFAULT_HISTORY,
    authors_indexing: bool = False,
) -> np.ndarray:
    r"""One PID step on every track after the score ``s``; returns the tracks' misses.

    ``issued`` is the threshold each track issued for this outcome (``state["q"]``, clipped by the
    caller where it keeps intervals finite); the miss is :math:`s > \text{issued}`. The state is
    updated in place and ``state["q"]`` becomes the next raw threshold :math:`q_{t+1}`.
    """
    hist = state["history"]
    t0 = int(state["t"][0])  # outcomes before this one
    eta = _step_size(state, lr, burnin, proportional_lr)
    err = (s > issued).astype(float)
    err_before = state["err_sum"].copy()
    state["err_sum"] += err
    state["q_hat"] = state["q_hat"] + eta * (err - alpha)
    state["q_hat_absmax"] = np.maximum(state["q_hat_absmax"], np.abs(state["q_hat"]))
    if eta > 0:
        inv = 1.0 / eta
        if np.isnan(state["inv_eta_first"][0]):
            state["inv_eta_first"][0] = inv
        else:
            state["inv_eta_tv"][0] += abs(inv - state["inv_eta_last"][0])
        state["inv_eta_last"][0] = inv
    else:
        state["n_zero_eta"][0] += 1
    arg = err_before - t0 * alpha if authors_indexing else state["err_sum"] - (t0 + 1) * alpha
    state["integ"] = saturation_log(arg, t0, csat, ki)
    new_hist = np.append(hist, s)[-n_keep:]
    if scorecaster is not None and t0 > burnin:
        state["g"][0] = float(scorecaster.forecast(hist if authors_indexing else new_hist))
    state["history"] = new_hist
    state["t"][0] = t0 + 1
    state["q"] = state["q_hat"] + state["integ"] + state["g"][0]
    return err


def pid_bound(state: dict, alpha: np.ndarray) -> np.ndarray:
    r"""The bound above on :math:`|\frac1T\sum_t \mathrm{err}_t - \alpha|` per track after :math:`T` outcomes.

    With a fixed step and :math:`\hat q_1 = 0` it is :math:`|\hat q_{T+1}|/(\eta T) \le (B + \eta)/(\eta T)`.
    """
    T = max(int(state["t"][0]), 1)
    first, last = state["inv_eta_first"][0], state["inv_eta_last"][0]
    if np.isnan(first):
        part = np.zeros_like(alpha)
    else:
        part = (
            np.abs(state["q_hat"]) * last
            + np.abs(state["q_hat_start"]) * first
            + state["q_hat_absmax"] * state["inv_eta_tv"][0]
        )
    return (part + state["n_zero_eta"][0] * np.maximum(alpha, 1.0 - alpha)) / T


def pid_path(
    scores: ArrayLike,
    alpha: float,
    *,
    lr: float = 0.1,
    csat: float = 5.0,
    ki: float = 10.0,
    burnin: int = 100,
    proportional_lr: str = "burnin",
    scorecaster: Scorecaster | None = None,
    q_start: float = 0.0,
    authors_indexing: bool = False,
) -> dict[str, np.ndarray]:
    r"""The PID thresholds along a whole stream of scores (one track, nothing clipped).

    Returns ``{"q": q_t issued before s_t, "err": err_t, "bound": pid_bound after T}``; with
    ``authors_indexing=True``, ``proportional_lr="rolling"`` and ``q_start=0`` it is the authors' ``quantile_integrator_log_scorecaster``
    (``ahead=1``).

    Examples
    --------
    >>> import numpy as np
    >>> s = np.abs(np.random.default_rng(0).normal(size=500))
    >>> out = pid_path(s, 0.1, lr=0.05, ki=0.0, proportional_lr="none")
    >>> bool(abs(out["err"].mean() - 0.1) <= out["bound"][0])
    True
    """
    s = np.asarray(scores, float).reshape(-1)
    sc = make_scorecaster(scorecaster)
    state = pid_new_state([q_start])
    a = np.array([alpha], float)
    qs, errs = np.empty(s.size), np.empty(s.size)
    for t, st in enumerate(s):
        qs[t] = state["q"][0]
        errs[t] = pid_step(
            state,
            float(st),
            a,
            state["q"],
            lr=lr,
            csat=csat,
            ki=ki,
            burnin=burnin,
            proportional_lr=proportional_lr,
            scorecaster=sc,
            authors_indexing=authors_indexing,
        )[0]
    return {"q": qs, "err": errs, "bound": pid_bound(state, a)}
