r"""An online calibrator whose exchangeability alarm acts: :class:`Monitored`.

An online calibrator's long-run guarantee holds on any sequence, but after an abrupt change it
spends :math:`O(1/\gamma)` steps catching up (ACI's level walks at rate :math:`\gamma`), and its score
window still holds the old regime's scores. :class:`Monitored` watches the stream with a conformal
test martingale (:class:`~calibprob.monitoring.ExchangeabilityMonitor`) on the base forecasts'
PITs and, when the alarm fires, acts through the calibrator's public API only:

- ``on_alarm="reset"``: ``calibrator.fit(pred_cal, y_cal)`` again, back to the state :meth:`Monitored.fit` left;
- ``on_alarm="refit"``: ``calibrator.fit`` on the last ``refit_window`` forecasts and outcomes (the
  data since the change, when the alarm is timely), so the scores and levels start from the new regime;
- ``on_alarm="none"``: record the alarm only.

Any calibrator with ``fit(pred, y)`` and ``update(pred, y)`` fits (``OnlineQuantileRecalibrator``,
``AdaptiveConformalInterval``, and the other online rules); the calibrator's own guarantee restarts
at each action, so its long-run bound applies to each stretch between actions.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol, Unpack

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.estimator import check_predictive
from calibprob._core.validation import check_choice, check_int, check_targets
from calibprob.monitoring.alarms import ExchangeabilityMonitor, MonitorOptions, pit_scores

__all__ = ["Monitored", "ACTIONS", "OnlineCalibrator"]


class OnlineCalibrator(Protocol):
    """What :class:`Monitored` wraps: a calibrator fitted on a calibration set and updated outcome by outcome."""

    def fit(self, pred: xr.Dataset, y: np.ndarray) -> object: ...

    def update(self, pred: xr.Dataset, y: np.ndarray) -> object: ...

    def predict(self, pred: xr.Dataset, **kwargs: object) -> xr.Dataset: ...


#: What an alarm does to the calibrator.
ACTIONS = ("reset", "refit", "none")


class Monitored:
    r"""An online calibrator watched by a conformal test martingale; an alarm resets or refits it.

    Parameters
    ----------
    calibrator : estimator
        An online calibrator with ``fit(pred, y)`` and ``update(pred, y)`` (and ``predict``).
    on_alarm : {"reset", "refit", "none"}, default "reset"
        The action (module docstring).
    refit_window : int, default 50
        ``on_alarm="refit"``: how many of the latest rows the calibrator is refitted on (at least
        the calibrator's own ``window``; an alarm before that many rows were seen resets instead,
        recorded as ``"reset"``).
    **monitor
        :class:`~calibprob.monitoring.ExchangeabilityMonitor`'s options (``martingale``,
        ``statistic``, ``delta``, ...); ``reset`` is always true here (an acted-on alarm starts a new test).

    Attributes
    ----------
    calibrator_ : estimator
        The calibrator (the same object, fitted and updated in place).
    path_ : xarray.Dataset
        The monitor's path over the stream's ``time`` (``pvalue``, ``martingale``, ``statistic``,
        ``alarm``), for all :meth:`update` calls so far.
    actions_ : list of tuple
        ``(time, action)`` per alarm.

    Notes
    -----
    Not in the registry, so ``calibprob.testing.check_calibrator`` does not run on it, by design:
    it is a wrapper with no calibrator of its own to build by default (which online rule it watches
    is the user's choice, as with :class:`~calibprob.Mondrian`, registered as a helper for the same
    reason), its ``predict`` *is* the wrapped calibrator's (which the registry's checks already
    cover), and what it adds is state over a stream (the monitor's capital, the recent rows, the
    actions), not a fitted map that a default-built clone, a save and a load could reproduce. Its
    own contract is tested directly (``tests/monitoring/test_monitored.py``): ``predict`` keeps the
    rows of ``pred`` in their order with their ``obs`` labels and equals the wrapped calibrator's,
    and bad input is refused naming the argument and the fix.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.calibrators.online import AdaptiveConformalInterval
    >>> from calibprob.monitoring import Monitored
    >>> rng = np.random.default_rng(0)
    >>> f = lambda n: calibprob.normal(np.zeros(n), np.ones(n))
    >>> mon = Monitored(AdaptiveConformalInterval(gamma=0.01, window=30), on_alarm="refit", refit_window=30)
    >>> _ = mon.fit(f(100), rng.normal(size=100))
    >>> _ = mon.update(f(400), np.r_[rng.normal(size=200), 4.0 * rng.normal(size=200)])
    >>> [a for _, a in mon.actions_][:1], 200 <= mon.actions_[0][0] < 240
    (['refit'], True)
    """

    def __init__(
        self,
        calibrator: OnlineCalibrator,
        *,
        on_alarm: str = "reset",
        refit_window: int = 50,
        **monitor: Unpack[MonitorOptions],
    ) -> None:
        for method in ("fit", "update"):
            if not callable(getattr(calibrator, method, None)):
                raise TypeError(
                    f"calibrator must be an online calibrator with fit(pred, y) and update(pred, y); "
                    f"{type(calibrator).__name__} has no {method}(). Pass e.g. OnlineQuantileRecalibrator() or "
                    "AdaptiveConformalInterval()."
                )
        self.calibrator = calibrator
        self.on_alarm = check_choice(on_alarm, "on_alarm", ACTIONS)
        self.refit_window = check_int(refit_window, "refit_window", minimum=1)
        window = getattr(calibrator, "window", None)
        if self.on_alarm == "refit" and window is not None and self.refit_window < int(window):
            raise ValueError(
                f"refit_window={refit_window} is smaller than the calibrator's window={window}: a refit on "
                f"{refit_window} rows could not fill its score window. Pass refit_window >= {window}."
            )
        monitor.pop("reset", None)
        self.monitor = monitor
        ExchangeabilityMonitor(**monitor)  # bad options fail here, not at the first update

    def fit(self, pred_cal: xr.Dataset, y_cal: ArrayLike) -> Monitored:
        """Fit the calibrator; start the monitor with the calibration PITs' scores as reference; returns ``self``."""
        pred_cal = check_predictive(pred_cal, self.calibrator, "pred_cal")
        y = check_targets(y_cal, pred_cal.sizes["obs"], "y_cal", ndim=1)
        self.calibrator.fit(pred_cal, y)
        self.calibrator_ = self.calibrator
        self._cal = (pred_cal, y)
        options: MonitorOptions = {**self.monitor, "reset": True}
        self.monitor_ = ExchangeabilityMonitor(**options)
        self.monitor_.restart(pit_scores(pred_cal.calib.pit(y).values))
        self._recent: deque = deque(maxlen=self.refit_window)
        self.actions_: list[tuple] = []
        self._paths: list[xr.Dataset] = []
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "monitor_"):
            raise ValueError("this Monitored calibrator is not fitted yet; call fit(pred_cal, y_cal) first.")

    def update(self, forecast: xr.Dataset, y: ArrayLike) -> Monitored:
        """Take outcomes in time order, one row at a time: test, update the calibrator, act on an alarm."""
        self._check_fitted()
        forecast = check_predictive(forecast, self.calibrator, "forecast")
        y = check_targets(y, forecast.sizes["obs"], "y", ndim=1)
        has_time = "time" in forecast.coords and forecast.coords["time"].dims == ("obs",)
        scores = pit_scores(forecast.calib.pit(y).values)
        rows = []
        for i in range(y.size):
            row = forecast.isel(obs=[i])
            self.calibrator.update(row, y[i : i + 1])  # the calibrator checks the time order itself
            self._recent.append((row, y[i]))
            p, S, stat, alarm = self.monitor_.step(float(scores[i]))
            t = forecast["time"].values[i] if has_time else self.monitor_.n_seen_ - 1
            rows.append((t, scores[i], p, S, stat, alarm))
            if alarm:
                self._act(t)
        if rows:
            cols = [np.asarray(c) for c in zip(*rows)]  # time, score, p, S, statistic, alarm
            self._paths.append(self.monitor_._dataset(cols[1], np.column_stack(cols[2:]).astype(float), cols[0]))
        return self

    def _act(self, t: float | np.generic) -> None:
        self.actions_.append((t.item() if hasattr(t, "item") else t, self.on_alarm))
        if self.on_alarm == "reset":
            self.calibrator.fit(*self._cal)
        elif self.on_alarm == "refit":
            take = list(self._recent)
            window = getattr(self.calibrator, "window", None)
            if window is not None and len(take) < int(window):  # too few rows yet: back to the calibration state
                self.actions_[-1] = (self.actions_[-1][0], "reset")
                self.calibrator.fit(*self._cal)
            else:
                pred = xr.concat([r for r, _ in take], dim="obs")
                self.calibrator.fit(pred, np.array([v for _, v in take]))

    @property
    def path_(self) -> xr.Dataset:
        """The monitor's path over every update so far, over ``time``."""
        self._check_fitted()
        if not self._paths:
            return self.monitor_._dataset(np.empty(0), np.empty((0, 4)), np.empty(0))
        return xr.concat(self._paths, dim="time", combine_attrs="override")

    def predict(self, pred: xr.Dataset, **kwargs: object) -> xr.Dataset:
        """The calibrator's ``predict`` of ``pred`` (rows in ``pred``'s order, its ``obs`` labels kept)."""
        self._check_fitted()
        return self.calibrator.predict(check_predictive(pred, self.calibrator, "pred"), **kwargs)

    def __getattr__(self, name: str) -> object:
        # recalibrate, predict_interval, coverage_error_bound, ...: the calibrator's own API
        if name.startswith("_") or name in ("calibrator",):
            raise AttributeError(name)
        return getattr(self.__dict__["calibrator"], name)
