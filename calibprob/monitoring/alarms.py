r"""Exchangeability alarms on a stream: a conformal test martingale, its change statistic, time-indexed xarray.

:class:`ExchangeabilityMonitor` takes nonconformity scores one at a time (or a forecast stream's
PITs, scored :math:`|2u - 1|`), turns each into a smoothed conformal p-value, bets on it with a
martingale of ``calibprob.monitoring._martingales`` and raises an alarm when the chosen statistic
reaches its threshold:

- ``statistic="martingale"``: :math:`S_t \ge 1/\delta`; by Ville's inequality the probability of
  *ever* alarming on an exchangeable stream is at most :math:`\delta` (until the first alarm);
- ``"cusum"`` / ``"shiryaev-roberts"``: :math:`\gamma_t` or :math:`\sigma_t \ge c` (default
  :math:`c = 1/\delta`); the mean time to a false alarm is at least :math:`c` (Vovk et al. 2021), which
  suits a monitor that keeps watching after it has reset.

With ``reset=True`` (the default) an alarm restarts the test: the martingale at 1, the statistic at
its start and the p-values' reference set empty (what came before the change is no longer the
reference of what comes after). :func:`exchangeability_alarms` runs a monitor over a whole stream and
returns the path as an ``xr.Dataset`` over ``time``.

References
----------
Vovk, V., Gammerman, A. and Shafer, G. (2022). Algorithmic Learning in a Random World, 2nd ed.,
Springer, ch. 8-9 (conformal test martingales, Simple Jumper, Sleeper/Stayer).
Fedorova, V., Gammerman, A., Nouretdinov, I. and Vovk, V. (2012). Plug-in martingales for testing
exchangeability on-line. ICML.
Vovk, V., Petej, I., Nouretdinov, I., Ahlberg, E., Carlsson, L. and Gammerman, A. (2021). Retrain or
not retrain: conformal test martingales for change-point detection. COPA, PMLR 152.
Ville, J. (1939). Étude critique de la notion de collectif. Gauthier-Villars.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Sequence
from typing import TypedDict, Unpack

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.validation import check_choice, check_int
from calibprob.calibrators.online._time import TIME_COORD, check_stream_times
from calibprob.monitoring._martingales import JUMPER_EPSILONS, epsilon_bets, kde_density, step_bets

__all__ = [
    "MonitorOptions",
    "ExchangeabilityMonitor",
    "exchangeability_alarms",
    "pit_scores",
    "MARTINGALES",
    "STATISTICS",
]

#: The betting martingales: Simple Jumper, Sleeper/Stayer, the plug-in (reflected KDE) martingale.
MARTINGALES = ("jumper", "sleeper-stayer", "plugin")
#: What raises the alarm: the martingale itself (Ville), CUSUM or Shiryaev-Roberts on it.
STATISTICS = ("martingale", "cusum", "shiryaev-roberts")


class MonitorOptions(TypedDict, total=False):
    """The options of :class:`ExchangeabilityMonitor`, as ``**options`` of :func:`exchangeability_alarms` and
    :class:`~calibprob.monitoring.Monitored` pass them on (each means what the class's docstring says)."""

    martingale: str
    statistic: str
    delta: float
    threshold: float | None
    reset: bool
    jump: float
    epsilons: Sequence[float]
    rate: float
    grid: int
    burn_in: int
    seed: int


def pit_scores(pit: ArrayLike) -> np.ndarray:
    r"""Nonconformity scores of PIT values: :math:`|2u - 1|`, large when the outcome sits in a tail.

    Parameters
    ----------
    pit : array_like
        PIT values :math:`u_t = F_t(y_t)` in [0, 1].

    Returns
    -------
    ndarray, shape (T,)

    Examples
    --------
    >>> pit_scores([0.5, 0.05, 0.975]).round(3).tolist()
    [0.0, 0.9, 0.95]
    """
    u = np.asarray(pit, float).ravel()
    if u.size and (not np.all(np.isfinite(u)) or u.min() < 0 or u.max() > 1):
        raise ValueError(
            f"pit values must lie in [0, 1]; got range [{np.nanmin(u):.3g}, {np.nanmax(u):.3g}]. Pass F_t(y_t), "
            "the forecast's CDF at the outcome (pred.calib.pit(y))."
        )
    return np.abs(2.0 * u - 1.0)


def _check_unit_open(value: float, name: str, fix: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be a number in (0, 1); got {value!r}. {fix}") from err
    if not (np.isfinite(v) and 0.0 < v < 1.0):
        raise ValueError(f"{name} must be in (0, 1); got {value!r}. {fix}")
    return v


class ExchangeabilityMonitor:
    r"""A conformal test martingale on a stream of scores, with an alarm and an optional reset.

    Parameters
    ----------
    martingale : {"jumper", "sleeper-stayer", "plugin"}, default "jumper"
        Simple Jumper over the ε betting functions (crepes' and MAPIE's default family), Sleeper/Stayer
        over crepes' step betting functions, or the plug-in martingale (reflected KDE, MAPIE).
    statistic : {"martingale", "cusum", "shiryaev-roberts"}, default "martingale"
        What is compared with the threshold (module docstring).
    delta : float, default 0.01
        The false-alarm level: threshold :math:`1/\delta` (Ville: :math:`P(\sup_t S_t \ge 1/\delta) \le \delta`).
    threshold : float, optional
        Overrides :math:`1/\delta` (must be > 1).
    reset : bool, default True
        Restart the test after an alarm (else the statistic keeps running; alarms are the crossings).
    jump : float, default 0.01
        Simple Jumper's jump rate :math:`J` (crepes' and MAPIE's 0.01).
    epsilons : sequence of float, default (-1, -0.5, 0, 0.5, 1)
        Simple Jumper's betting functions :math:`1 + \varepsilon(p - 1/2)`, each :math:`|\varepsilon| < 2`
        (crepes' grid; MAPIE's is (-1, 0, 1)).
    rate : float, default 0.001
        Sleeper/Stayer's investment rate :math:`R` (crepes' default).
    grid : int, default 10
        Sleeper/Stayer's step-function grid :math:`G` (crepes' default).
    burn_in : int, default 100
        The plug-in martingale's shrinkage to uniform (MAPIE's default).
    seed : int, default 0
        Seed of the uniforms that break ties in the p-values.

    Attributes
    ----------
    n_seen_ : int
        Scores taken.
    alarms_ : list of int
        Stream positions (0-based) at which the alarm fired.

    References
    ----------
    Vovk, V., Gammerman, A. and Shafer, G. (2022). Algorithmic Learning in a Random World, 2nd ed.,
    ch. 8-9. Fedorova, V., Gammerman, A., Nouretdinov, I. and Vovk, V. (2012). Plug-in martingales
    for testing exchangeability on-line. ICML. Ville, J. (1939). Étude critique de la notion de collectif.

    Examples
    --------
    >>> import numpy as np
    >>> mon = ExchangeabilityMonitor(delta=0.01)
    >>> rng = np.random.default_rng(0)
    >>> path = mon.update(np.r_[rng.normal(size=200), 5 + rng.normal(size=50)])
    >>> mon.alarms_[0] >= 200, path.attrs["threshold"]
    (True, 100.0)
    """

    def __init__(
        self,
        *,
        martingale: str = "jumper",
        statistic: str = "martingale",
        delta: float = 0.01,
        threshold: float | None = None,
        reset: bool = True,
        jump: float = 0.01,
        epsilons: ArrayLike = JUMPER_EPSILONS,
        rate: float = 0.001,
        grid: int = 10,
        burn_in: int = 100,
        seed: int = 0,
    ):
        self.martingale = check_choice(martingale, "martingale", MARTINGALES)
        self.statistic = check_choice(statistic, "statistic", STATISTICS)
        self.delta = _check_unit_open(delta, "delta", "It is the false-alarm probability: pass e.g. 0.01.")
        if threshold is None:
            self.threshold = 1.0 / self.delta
        else:
            self.threshold = float(threshold)
            if not (np.isfinite(self.threshold) and self.threshold > 1.0):
                raise ValueError(
                    f"threshold must be a finite number > 1 (a martingale starts at 1); got {threshold!r}. Pass "
                    "threshold=None to use 1/delta."
                )
        self.reset = bool(reset)
        self.jump = _check_unit_open(jump, "jump", "Simple Jumper's jump rate: crepes and MAPIE use 0.01.")
        eps = np.atleast_1d(np.asarray(epsilons, float))
        if eps.ndim != 1 or not eps.size or not np.all(np.abs(eps) < 2):
            raise ValueError(
                f"epsilons must be a non-empty sequence of numbers in (-2, 2) (bets 1 + eps (p - 1/2) must stay "
                f"positive); got {epsilons!r}. Pass e.g. (-1, -0.5, 0, 0.5, 1)."
            )
        self.epsilons = eps
        self.rate = _check_unit_open(rate, "rate", "Sleeper/Stayer's investment rate: crepes uses 0.001.")
        self.grid = check_int(grid, "grid", minimum=2)
        self.burn_in = check_int(burn_in, "burn_in", minimum=0)
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self.n_seen_ = 0
        self.alarms_: list[int] = []
        self.restart()

    def restart(self, history: ArrayLike = ()) -> ExchangeabilityMonitor:
        """Start the test again (martingale 1, statistic at its start) with ``history`` as the p-values' reference.

        Parameters
        ----------
        history : array_like, optional
            Reference scores (not bet on).

        Returns
        -------
        ExchangeabilityMonitor
            ``self``.

        Examples
        --------
        >>> ExchangeabilityMonitor().restart([0.1, 0.2]).n_seen_
        0
        """
        self._seen = sorted(float(v) for v in np.asarray(history, float).ravel())
        self._pvals: list[float] = []
        self._S = 1.0
        self._stat = 1.0 if self.statistic == "cusum" else 0.0
        self._idle = 1.0 - self.rate
        if self.martingale == "jumper":
            self._C = np.full(self.epsilons.size, 1.0 / self.epsilons.size)
        elif self.martingale == "sleeper-stayer":
            k = (self.grid - 1) ** 2
            self._C = np.full(k, self.rate / k)
        return self

    def _pvalue(self, score: float) -> float:
        seen = self._seen
        lo, hi = bisect_left(seen, score), bisect_right(seen, score)
        p = (len(seen) - hi + float(self._rng.random()) * (hi - lo + 1)) / (len(seen) + 1)
        insort(seen, score)
        return p

    def _bet(self, p: float) -> float:
        """Move the martingale by the bet on ``p``; returns the factor :math:`S_t / S_{t-1}`."""
        before = self._S
        if self.martingale == "jumper":
            self._C = self._C * epsilon_bets(p, self.epsilons)
            self._S = float(self._C.sum())
            self._C = (1.0 - self.jump) * self._C + (self.jump / self._C.size) * self._S
        elif self.martingale == "sleeper-stayer":
            self._C = self._C * step_bets(p, self.grid)
            self._S = self._idle + float(self._C.sum())
            self._C = self._C + self.rate * self._idle / self._C.size
            self._idle *= 1.0 - self.rate
        else:
            t = len(self._pvals)
            if t > self.burn_in:
                lam = self.burn_in / t
                d = float(kde_density(np.asarray(self._pvals), np.array([p]))[0])
                self._S *= (1.0 - lam) * d + lam
            self._pvals.append(p)
        return self._S / before

    def step(self, score: float) -> tuple[float, float, float, bool]:
        """Take one score: ``(p-value, martingale, statistic, alarm)`` (values before any reset).

        Parameters
        ----------
        score : float
            The next nonconformity score.

        Returns
        -------
        tuple
            ``(p, S_t, statistic, alarm)``.

        Examples
        --------
        >>> ExchangeabilityMonitor(seed=1).step(0.3)[1:]
        (1.0, 1.0, False)
        """
        p = self._pvalue(float(score))
        f = self._bet(p)
        if self.statistic == "cusum":
            self._stat = max(self._stat, 1.0) * f
        elif self.statistic == "shiryaev-roberts":
            self._stat = (self._stat + 1.0) * f
        else:
            self._stat = self._S
        stat, S = self._stat, self._S
        alarm = bool(stat >= self.threshold)
        if alarm:
            self.alarms_.append(self.n_seen_)
        self.n_seen_ += 1
        if alarm and self.reset:
            self.restart()
        return p, S, stat, alarm

    def update(self, scores: ArrayLike, times: ArrayLike | None = None) -> xr.Dataset:
        """Take a batch of scores in time order; the path over ``time`` (see :func:`exchangeability_alarms`).

        Parameters
        ----------
        scores : array_like, shape (T,)
            Finite nonconformity scores.
        times : array_like, shape (T,), optional
            Labels of the steps (default: their positions in the stream).

        Returns
        -------
        xarray.Dataset
            ``score``, ``pvalue``, ``martingale``, ``statistic``, ``alarm`` over ``time``.

        Examples
        --------
        >>> ExchangeabilityMonitor().update([0.1, 0.5, 0.2]).sizes["time"]
        3
        """
        s = np.asarray(scores, float).ravel()
        if not np.all(np.isfinite(s)):
            raise ValueError("scores must be finite; got NaN or inf. Drop or repair those outcomes first.")
        rows = np.array([self.step(v) for v in s.tolist()], float).reshape(-1, 4)
        t = np.arange(self.n_seen_ - s.size, self.n_seen_) if times is None else np.asarray(times)
        return self._dataset(s, rows, t)

    def _dataset(self, s: np.ndarray, rows: np.ndarray, t: np.ndarray) -> xr.Dataset:
        name = {"martingale": "the martingale", "cusum": "CUSUM", "shiryaev-roberts": "Shiryaev-Roberts"}
        ds = xr.Dataset(
            {
                "score": ("time", s, {"long_name": "nonconformity score"}),
                "pvalue": ("time", rows[:, 0], {"long_name": "smoothed conformal p-value"}),
                "martingale": ("time", rows[:, 1], {"long_name": f"{self.martingale} martingale S_t"}),
                "statistic": ("time", rows[:, 2], {"long_name": f"alarm statistic: {name[self.statistic]}"}),
                "alarm": ("time", rows[:, 3].astype(bool), {"long_name": "statistic >= threshold"}),
            },
            coords={"time": ("time", t)},
        )
        ds.attrs.update(
            martingale=self.martingale,
            statistic=self.statistic,
            threshold=float(self.threshold),
            delta=float(self.delta),
            reset=int(self.reset),
            guarantee=(
                f"Ville: P(sup_t S_t >= {self.threshold:g}) <= {1 / self.threshold:g} on an exchangeable stream"
                if self.statistic == "martingale"
                else f"mean time to a false alarm >= {self.threshold:g} on an exchangeable stream"
            ),
        )
        return ds


def exchangeability_alarms(
    pred: xr.Dataset | None = None,
    y: ArrayLike | None = None,
    *,
    scores: ArrayLike | None = None,
    history: ArrayLike | None = None,
    times: ArrayLike | None = None,
    **options: Unpack[MonitorOptions],
) -> xr.Dataset:
    r"""Conformal test martingale and alarms over a stream of forecasts and outcomes (or of any scores).

    Parameters
    ----------
    pred : xarray.Dataset, optional
        Forecasts in the predictive contract, rows in time order (a ``time`` coordinate along
        ``obs`` is checked strictly increasing and labels the result). Scored by
        :math:`|2F_t(y_t) - 1|` (:func:`pit_scores`).
    y : array_like, optional
        The outcomes of ``pred``.
    scores : array_like, optional
        Any stream of nonconformity scores instead of ``pred`` and ``y``.
    history : array_like, optional
        Reference scores from before the stream (a calibration stream's): they rank the first
        p-values but are not bet on.
    times : array_like, optional
        Labels of the stream's steps with ``scores`` (default 0, 1, ...).
    **options
        :class:`ExchangeabilityMonitor`'s parameters (``martingale``, ``statistic``, ``delta``, ...).

    Returns
    -------
    xarray.Dataset
        Over ``time``: ``score``, ``pvalue``, ``martingale`` (:math:`S_t`), ``statistic``, ``alarm``;
        attributes ``threshold``, ``delta``, ``guarantee`` and the options.

    References
    ----------
    Vovk, V., Gammerman, A. and Shafer, G. (2022). Algorithmic Learning in a Random World, 2nd ed., ch. 8.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.monitoring import exchangeability_alarms
    >>> rng = np.random.default_rng(0)
    >>> y = np.r_[rng.normal(size=300), 3.0 + rng.normal(size=100)]   # the level jumps at t = 300
    >>> out = exchangeability_alarms(calibprob.normal(np.zeros(400), np.ones(400)), y, delta=0.01)
    >>> first = int(out["time"][out["alarm"]][0]); 300 <= first < 340
    True
    """
    if scores is None:
        if pred is None or y is None:
            raise TypeError(
                "exchangeability_alarms needs a stream: pred and y (forecasts and their outcomes), or scores=."
            )
        t = check_stream_times(pred, None, "pred")
        u = np.asarray(pred.calib.pit(y).values, float).ravel()
        s = pit_scores(u)
        times = np.arange(s.size) if t is None else t
    else:
        if pred is not None or y is not None:
            raise TypeError("pass either pred and y, or scores=, not both.")
        s = np.asarray(scores, float).ravel()
        if times is not None:
            times = np.asarray(times)
            if times.shape != s.shape:
                raise ValueError(f"times must have one entry per score ({s.size}); got shape {times.shape}.")
            fake = xr.Dataset(coords={TIME_COORD: ("obs", times)})
            check_stream_times(fake, None, "times")
    mon = ExchangeabilityMonitor(**options)
    if history is not None:
        mon.restart(np.asarray(history, float))
    return mon.update(s, times)
