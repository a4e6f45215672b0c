r"""Conformal test martingales, NumPy layer: p-values, betting functions, martingales, change statistics.

Under exchangeability the smoothed online conformal p-values of any stream of scores are
independent and uniform on (0, 1) (Vovk, Gammerman & Shafer 2022, *Algorithmic Learning in a
Random World*, 2nd ed., Prop. 11.1). A *betting martingale* multiplies its capital by
:math:`f_t(p_t)` for betting functions :math:`f_t \ge 0` with :math:`\int_0^1 f_t = 1` chosen from
the past only, so :math:`S_t = \prod_{s \le t} f_s(p_s)` is a non-negative martingale with
:math:`S_0 = 1`, and Ville's inequality gives the false-alarm guarantee

.. math::

    P\Bigl(\sup_{t} S_t \ge 1/\delta\Bigr) \le \delta .

Large :math:`S_t` is evidence against exchangeability. The martingales here are those of crepes
(Boström 2024, ``crepes.martingales``) and MAPIE (``OnlineMartingaleTest``), and give the same
numbers on the same p-values (``tests/monitoring``, against stored references):

- Simple Jumper (ALRW Alg. 8.1, generalised): one account per betting function (default
  :math:`f_\varepsilon(p) = 1 + \varepsilon(p - \tfrac12)`, :math:`\varepsilon \in \{-1, -\tfrac12, 0,
  \tfrac12, 1\}`), a fraction :math:`J` of the total capital redistributed evenly after every step;
- Sleeper/Stayer (ALRW Alg. 9.4): a fraction :math:`R` of the idle capital wakes at every step and
  then bets for ever (default: crepes' step betting functions on a 10-point grid);
- the plug-in martingale (Fedorova et al. 2012): :math:`f_t` a reflected Gaussian kernel density
  of the past p-values, shrunk to uniform as MAPIE does while fewer than ``burn_in`` are seen.

Change detection on a martingale (Vovk, Petej, Nouretdinov, Ahlberg, Carlsson & Gammerman 2021,
*Retrain or not retrain: conformal test martingales for change-point detection*, COPA): with
:math:`S_t/S_s` the capital of a martingale started at :math:`s`, the CUSUM statistic
:math:`\gamma_t = \max_{s<t} S_t/S_s` (recursion :math:`\gamma_t = \max(\gamma_{t-1}, 1) f_t(p_t)`)
and the Shiryaev–Roberts statistic :math:`\sigma_t = \sum_{s<t} S_t/S_s`
(:math:`\sigma_t = (\sigma_{t-1} + 1) f_t(p_t)`). Under exchangeability the Shiryaev–Roberts
procedure that alarms at :math:`\sigma_t \ge c` has mean time to a false alarm at least :math:`c`
(:math:`\sigma_t - t` is a martingale; optional stopping), and CUSUM's, which never exceeds it, too.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "JUMPER_EPSILONS",
    "conformal_pvalues",
    "epsilon_bets",
    "step_bets",
    "simple_jumper",
    "sleeper_stayer",
    "plugin_martingale",
    "kde_density",
    "cusum",
    "shiryaev_roberts",
]

#: crepes' default ε grid of the Simple Jumper's betting functions 1 + ε(p - 1/2).
JUMPER_EPSILONS = (-1.0, -0.5, 0.0, 0.5, 1.0)


def conformal_pvalues(scores: ArrayLike, thetas: ArrayLike, *, history: ArrayLike = ()) -> np.ndarray:
    r"""Smoothed online conformal p-values of a stream of nonconformity scores.

    .. math::

        p_t = \frac{\#\{s < t : \alpha_s > \alpha_t\} + \theta_t\,(\#\{s < t : \alpha_s = \alpha_t\} + 1)}{n_0 + t}

    (ALRW 2nd ed. §2.5, "semi-online" in crepes' ``semi_online_p_values``), the ranks counted
    among the ``history`` scores (:math:`n_0` of them, taken as earlier in the stream) and the
    stream's own earlier ones. Large scores are strange: small p-values.

    Parameters
    ----------
    scores : array_like, shape (T,)
        Nonconformity scores :math:`\alpha_t` in time order.
    thetas : array_like, shape (T,)
        Independent uniforms on [0, 1] that break ties (seed them for reproducible p-values).
    history : array_like, optional
        Earlier scores that only serve as reference (a calibration stream).

    Returns
    -------
    ndarray, shape (T,)

    References
    ----------
    Vovk, V., Gammerman, A. and Shafer, G. (2022). Algorithmic Learning in a Random World, 2nd ed., §2.5.

    Examples
    --------
    >>> conformal_pvalues([3.0, 1.0, 2.0], [0.5, 0.5, 0.5]).tolist()
    [0.5, 0.75, 0.5]
    """
    a = np.asarray(scores, float).ravel()
    th = np.asarray(thetas, float).ravel()
    seen = sorted(float(v) for v in np.asarray(history, float).ravel())
    out = np.empty(a.size)
    for t, (v, u) in enumerate(zip(a.tolist(), th.tolist())):
        lo, hi = bisect_left(seen, v), bisect_right(seen, v)  # O(log n) ranks in the sorted past
        out[t] = (len(seen) - hi + u * (hi - lo + 1)) / (len(seen) + 1)
        insort(seen, v)
    return out


def epsilon_bets(p: ArrayLike, epsilons: ArrayLike = JUMPER_EPSILONS) -> np.ndarray:
    r"""Rewards :math:`1 + \varepsilon(p - \tfrac12)` of the ε betting functions.

    Each integrates to 1 on [0, 1] and is positive for :math:`|\varepsilon| < 2` (ALRW 2nd ed. §8.2).

    Parameters
    ----------
    p : array_like
        p-values in [0, 1].
    epsilons : sequence of float, default (-1, -0.5, 0, 0.5, 1)
        The :math:`\varepsilon` of each betting function (crepes' default grid).

    Returns
    -------
    ndarray, shape ``p.shape + (K,)``

    Examples
    --------
    >>> epsilon_bets([0.0, 1.0], (-1.0, 1.0)).tolist()
    [[1.5, 0.5], [0.5, 1.5]]
    """
    e = np.asarray(epsilons, float)
    return 1.0 + e * (np.asarray(p, float)[..., None] - 0.5)


def step_bets(p: ArrayLike, grid: int = 10) -> np.ndarray:
    r"""crepes' step betting functions: :math:`f_{a,b}(p) = b/a` for :math:`p \le a`, :math:`(1-b)/(1-a)` above.

    :math:`a, b` over the grid :math:`\{1/G, \dots, (G-1)/G\}` (:math:`(G-1)^2` functions, ordered
    with :math:`a` outer and :math:`b` inner as crepes' ``StepBettingFunction``); each integrates to 1.

    Parameters
    ----------
    p : array_like
        p-values in [0, 1].
    grid : int, default 10
        :math:`G \ge 2`.

    Returns
    -------
    ndarray, shape ``p.shape + ((G - 1)^2,)``

    Examples
    --------
    >>> step_bets([0.25, 0.75], 2).tolist()
    [[1.0], [1.0]]
    >>> step_bets([0.1], 3).round(3).tolist()   # a = 1/3, 2/3 (outer); b = 1/3, 2/3 (inner)
    [[1.0, 2.0, 0.5, 1.0]]
    """
    g = np.arange(1, grid) / grid
    a = np.repeat(g, g.size)
    b = np.tile(g, g.size)
    p = np.asarray(p, float)[..., None]
    return np.where(p <= a, b / a, (1.0 - b) / (1.0 - a))


def simple_jumper(rewards: ArrayLike, jump: float = 0.01) -> np.ndarray:
    r"""The Simple Jumper's capital :math:`S_t` from the accounts' rewards, shape ``rewards.shape[:-1]``.

    Accounts start at :math:`1/K`; at step :math:`t` each is multiplied by its reward, :math:`S_t` is
    their sum, and then :math:`C \leftarrow (1 - J) C + J S_t / K`.

    Parameters
    ----------
    rewards : array_like, shape (T, ..., K)
        :math:`f_k(p_t)` (time first; any batch dims between, e.g. repetitions).
    jump : float
        The jump rate :math:`J \in (0, 1)`.

    Returns
    -------
    ndarray, shape ``rewards.shape[:-1]``
        :math:`S_1, \dots, S_T` (and the batch dims).

    References
    ----------
    Vovk, V., Gammerman, A. and Shafer, G. (2022). Algorithmic Learning in a Random World, 2nd ed.,
    Alg. 8.1 (Simple Jumper); crepes' ``SimpleJumper`` generalises it to any betting functions.

    Examples
    --------
    >>> simple_jumper(epsilon_bets([0.0, 0.0], (-1.0, 1.0)), jump=0.5).tolist()
    [1.0, 1.125]
    >>> bool(simple_jumper(epsilon_bets([0.01] * 50))[-1] > 100)   # p-values stuck near 0: the capital grows
    True
    """
    r = np.asarray(rewards, float)
    K = r.shape[-1]
    C = np.full(r.shape[1:], 1.0 / K)
    S = np.empty(r.shape[:-1])
    for t in range(r.shape[0]):
        C *= r[t]
        S[t] = C.sum(axis=-1)
        C = (1.0 - jump) * C + (jump / K) * S[t][..., None]
    return S


def sleeper_stayer(rewards: ArrayLike, rate: float = 0.001) -> np.ndarray:
    r"""Sleeper/Stayer's capital (ALRW Alg. 9.4 as crepes' ``SleeperStayer``), shape ``rewards.shape[:-1]``.

    Idle capital :math:`1 - R` and accounts :math:`R/K`; at step :math:`t` the accounts are multiplied
    by their rewards, :math:`S_t` = idle + accounts, then :math:`R` times the idle capital wakes,
    spread evenly, and the idle capital shrinks by :math:`1 - R`.

    Parameters
    ----------
    rewards : array_like, shape (T, ..., K)
        :math:`f_k(p_t)` (time first).
    rate : float, default 0.001
        The investment rate :math:`R \in (0, 1)`.

    Returns
    -------
    ndarray, shape ``rewards.shape[:-1]``

    References
    ----------
    Vovk, V., Gammerman, A. and Shafer, G. (2022). Algorithmic Learning in a Random World, 2nd ed.,
    Alg. 9.4 (Sleeper/Stayer).

    Examples
    --------
    >>> sleeper_stayer(step_bets([0.5, 0.5], 2), rate=0.1).round(6).tolist()
    [1.0, 1.0]
    """
    r = np.asarray(rewards, float)
    K = r.shape[-1]
    C = np.full(r.shape[1:], rate / K)
    idle = 1.0 - rate
    S = np.empty(r.shape[:-1])
    for t in range(r.shape[0]):
        C *= r[t]
        S[t] = idle + C.sum(axis=-1)
        C += rate * idle / K
        idle *= 1.0 - rate
    return S


def kde_density(past: np.ndarray, x: np.ndarray, grid_size: int = 200) -> np.ndarray:
    r"""The reflected Gaussian kernel density of ``past`` p-values at ``x``, normalised on [0, 1].

    The sample :math:`\{-p_i, p_i, 2 - p_i\}` with Silverman's bandwidth (SciPy's ``gaussian_kde``:
    factor :math:`(3N/4)^{-1/5}` times the sample standard deviation, :math:`N = 3n`), divided by its
    trapezoidal integral over ``grid_size`` points of [0, 1], as MAPIE's ``OnlineMartingaleTest``.
    1 where the density is undefined (no past, zero spread).
    """
    data = np.concatenate([-past, past, 2.0 - past])
    n = data.size
    if n < 2:
        return np.ones_like(x, dtype=float)
    var = float(np.var(data, ddof=1))
    h2 = var * (n * 0.75) ** (-0.4)
    if not (np.isfinite(h2) and h2 > 0):
        return np.ones_like(x, dtype=float)
    grid = np.linspace(0.0, 1.0, grid_size)
    pts = np.concatenate([grid, np.atleast_1d(x)])
    dens = np.exp(-0.5 * (pts[:, None] - data[None, :]) ** 2 / h2).sum(axis=1) / (n * np.sqrt(2 * np.pi * h2))
    g = dens[:grid_size]
    norm = float(np.sum((g[1:] + g[:-1]) * np.diff(grid)) / 2.0)
    if not (np.isfinite(norm) and norm > 0):
        return np.ones_like(x, dtype=float)
    return dens[grid_size:] / norm


def plugin_martingale(p: ArrayLike, burn_in: int = 100) -> np.ndarray:
    r"""The plug-in martingale :math:`S_t = \prod_{s \le t} \hat\rho_s(p_s)` (Fedorova et al. 2012, Alg. 1).

    :math:`\hat\rho_t` is ``kde_density`` of :math:`p_1, \dots, p_{t-1}` shrunk towards the
    uniform density, :math:`(1 - \lambda_t)\hat\rho_t + \lambda_t` with
    :math:`\lambda_t = \min(1, \text{burn\_in}/(t-1))` (MAPIE's regularisation: the first
    ``burn_in + 1`` factors are exactly 1). :math:`O(T^2)` in all.

    Parameters
    ----------
    p : array_like, shape (T,)
        p-values in time order.
    burn_in : int, default 100
        MAPIE's shrinkage horizon.

    Returns
    -------
    ndarray, shape (T,)

    References
    ----------
    Fedorova, V., Gammerman, A., Nouretdinov, I. and Vovk, V. (2012). Plug-in martingales for
    testing exchangeability on-line. ICML, Algorithm 1.

    Examples
    --------
    >>> p = np.random.default_rng(0).random(30)
    >>> plugin_martingale(p, burn_in=29)[:29].tolist() == [1.0] * 29   # shrunk to uniform: no bet yet
    True
    """
    p = np.asarray(p, float).ravel()
    S = np.empty(p.size)
    s = 1.0
    for t in range(p.size):
        if t > burn_in:  # lambda_t < 1: the KDE has weight
            lam = burn_in / t
            d = float(kde_density(p[:t], p[t : t + 1])[0])
            if np.isfinite(d):
                s *= (1.0 - lam) * d + lam
        S[t] = s
    return S


def _factors(S: ArrayLike) -> np.ndarray:
    """The martingale's per-step multipliers :math:`f_t = S_t / S_{t-1}` (:math:`S_0 = 1`), along axis 0."""
    S = np.asarray(S, float)
    prev = np.concatenate([np.ones((1,) + S.shape[1:]), S[:-1]], axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return S / prev


def _change_statistic(S: ArrayLike, start: float, step: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    r"""A change statistic's recursion :math:`x_t = \mathrm{step}(x_{t-1}, S_t/S_{t-1})` from :math:`x_0 = ` ``start``.

    CUSUM and Shiryaev–Roberts differ only in ``step`` and ``start`` (Vovk et al. 2021, §2): both
    restart a martingale at every :math:`s < t` and combine the capitals :math:`S_t/S_s` (max, sum).
    """
    f = _factors(S)
    out = np.empty_like(f)
    x = np.full(f.shape[1:], start)
    for t in range(f.shape[0]):
        x = step(x, f[t])
        out[t] = x
    return out


def cusum(S: ArrayLike) -> np.ndarray:
    r"""CUSUM on a martingale path: :math:`\gamma_t = \max(\gamma_{t-1}, 1)\, S_t/S_{t-1}` = :math:`\max_{s<t} S_t/S_s`.

    Parameters
    ----------
    S : array_like, shape (T, ...)
        A martingale path :math:`S_1, \dots, S_T` (:math:`S_0 = 1`).

    Returns
    -------
    ndarray, shape of ``S``

    References
    ----------
    Vovk, V., Petej, I., Nouretdinov, I., Ahlberg, E., Carlsson, L. and Gammerman, A. (2021). Retrain
    or not retrain: conformal test martingales for change-point detection. COPA, PMLR 152.

    Examples
    --------
    >>> cusum([2.0, 1.0, 0.5, 2.0]).tolist()
    [2.0, 1.0, 0.5, 4.0]
    """
    return _change_statistic(S, 1.0, lambda g, f: np.maximum(g, 1.0) * f)


def shiryaev_roberts(S: ArrayLike) -> np.ndarray:
    r"""Shiryaev–Roberts on a martingale path: :math:`\sigma_t = (\sigma_{t-1} + 1)\, S_t/S_{t-1}` = :math:`\sum_{s<t} S_t/S_s`.

    Under exchangeability :math:`\sigma_t - t` is a martingale, so the procedure that alarms at
    :math:`\sigma_t \ge c` waits at least :math:`c` steps for a false alarm on average (optional stopping).

    Parameters
    ----------
    S : array_like, shape (T, ...)
        One martingale path per column, :math:`S_1, \dots, S_T`, each started at :math:`S_0 = 1`.

    Returns
    -------
    ndarray, shape of ``S``
        :math:`\sigma_1, \dots, \sigma_T` per column (:math:`\sigma_0 = 0`).

    References
    ----------
    Shiryaev, A. N. (1963). On optimum methods in quickest detection problems. Theory of Probability
    and Its Applications 8(1). Roberts, S. W. (1966). A comparison of some control chart procedures.
    Technometrics 8(3). Vovk et al. (2021), *Retrain or not retrain*, COPA, PMLR 152 (on conformal
    test martingales, as :func:`cusum`).

    Examples
    --------
    >>> shiryaev_roberts([2.0, 1.0]).tolist()
    [2.0, 1.5]
    """
    return _change_statistic(S, 0.0, lambda s, f: (s + 1.0) * f)
