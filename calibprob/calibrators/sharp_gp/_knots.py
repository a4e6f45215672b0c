r"""Knot numerics of the sharp calibrated GP (NumPy only).

The empirical quantile :math:`q_{\mathrm{lin}}` of eq. (6), the monotone repair of
fitted knots, the interpolants :math:`\hat\beta(\delta)`, :math:`\hat\phi(\delta)`
(piecewise linear in :math:`\Phi^{-1}(\delta)`) and the map between the GP's
hyperparameters and the σ-increasing log coordinates
:math:`\phi = (-\log\ell, \log\sigma_f^2, \log\sigma_n^2)`. See the package
docstring (:mod:`calibprob.calibrators.sharp_gp`) for the equations.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from calibprob._core.ranks import RANK_TOL as _RANK_TOL
from calibprob._core.ranks import knot_levels, min_calibration_points

__all__ = [
    "q_lin",
    "knot_levels",
    "required_calibration_points",
    "exact_monotone_knots",
    "monotone_knots",
    "interpolate_knots",
    "interpolate_quantiles",
]


def q_lin(levels: ArrayLike, scores: ArrayLike) -> np.ndarray | float:
    r"""Empirical quantile with the :math:`N + 1` convention, eq. (6) of the paper.

    .. math::

        q_{\mathrm{lin}}(\delta, a) = a_{(l)} + (\delta(N+1) - l)(a_{(l+1)} - a_{(l)}),
        \qquad l = \lfloor\delta(N+1)\rfloor \text{ clipped to } [1, N-1],

    so that :math:`q_{\mathrm{lin}}(j/(N+1), a) = a_{(j)}` (the :math:`j`-th
    smallest entry). Equal to ``numpy.quantile(a, levels, method="weibull")``
    on :math:`[1/(N+1), N/(N+1)]`; outside that range it extrapolates linearly
    (callers reject such levels).

    Parameters
    ----------
    levels : array_like, shape (L,) or scalar
    scores : array_like, shape (N,) or (..., N)
        Scores along the last axis, ``N >= 2`` (need not be sorted).

    Returns
    -------
    ndarray, shape (..., L) (or (...) for scalar ``levels``; a float for 1-D scores)

    Examples
    --------
    >>> q_lin(0.5, [3.0, 1.0, 2.0])
    2.0
    """
    a = np.sort(np.asarray(scores, float), axis=-1)
    n = a.shape[-1]
    if n < 2:
        raise ValueError(f"q_lin needs at least 2 scores; got {n}.")
    lv = np.asarray(levels, float)
    t = np.atleast_1d(lv) * (n + 1)
    low = np.clip(np.floor(t + _RANK_TOL), 1, n - 1).astype(int)
    frac = t - low
    out = a[..., low - 1] + frac * (a[..., low] - a[..., low - 1])
    if lv.ndim == 0:
        out = out[..., 0]
        return float(out) if out.ndim == 0 else out
    return out


#: Smallest calibration set covering every level (``calibprob._core.ranks.min_calibration_points``).
required_calibration_points = min_calibration_points


#: fractions of the way from the outer neighbour's φ back to a knot's own φ, tried in turn (the solver's
#: backtracking rule, ``_solver._BACKTRACK``); the last, 0, is the outer neighbour's φ itself
_BACKTRACK = (0.5, 0.25, 0.125, 0.0)


def exact_monotone_knots(
    levels: ArrayLike,
    phi: ArrayLike,
    residual: ArrayLike,
    sigma: Callable[[np.ndarray], np.ndarray],
    sig: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    r"""β recomputed exactly on the points that set it, made monotone by moving φ, not β.

    When θ is fitted on other points than those that set β (a training or calibration
    subset, the cross-fitted split), :math:`\beta_j = q_{\mathrm{lin}}(\delta_j, r/\sigma(\phi_j))`
    need not shrink toward the median. Theorem 5.4 (through Lemma 8.1, Marx et al. 2022,
    Theorem 1) needs both: monotone :math:`\hat\beta, \hat\phi` *and* a quantile at
    each knot :math:`\delta_j = j/(N+1)` that is the :math:`j`-th order statistic of the
    scores, i.e. exactly :math:`j` of the :math:`N` calibration points at or below it.
    Widening β (:func:`monotone_knots`) keeps the first and gives up the second at the
    knots it moves. This repair keeps both, with Algorithm 1's own rule (the solver's
    backtracking, Remark 5.3): each pass runs from its tail inward, and a knot whose
    :math:`|\beta|` exceeds its outer neighbour's gets
    :math:`\phi_t = \phi_{\text{out}} + t(\phi_j - \phi_{\text{out}})` for the first
    :math:`t \in (1/2, 1/4, 1/8, 0)` that restores the order, with β recomputed
    exactly at :math:`\phi_t`. At :math:`t = 0` both knots share
    :math:`\sigma(\phi_{\text{out}}, \cdot)`, so their β are two order statistics of
    the same z-scores and the order holds; :math:`\phi_t` lies between the two
    neighbours' φ, so φ stays monotone.

    Parameters
    ----------
    levels : array_like, shape (K,)
        Strictly increasing knot levels.
    phi : array_like, shape (K, P)
        σ-increasing log-hyperparameters per knot, monotone on each side.
    residual : array_like, shape (N,)
        Residuals of the points that set β.
    sigma : callable
        ``sigma(phi) -> ndarray (N,)``, σ(θ(φ), x) at those points.
    sig : ndarray, shape (K, N), optional
        σ at ``phi`` if already computed.

    Returns
    -------
    phi : ndarray, shape (K, P)
    beta : ndarray, shape (K,)
        :math:`q_{\mathrm{lin}}(\delta_j, r/\sigma(\phi_j))` at the returned φ.
    sig : ndarray, shape (K, N)
    moved : ndarray of bool, shape (K,)
        Knots whose φ was moved.
    """
    d = np.asarray(levels, float)
    f = np.atleast_2d(np.asarray(phi, float)).copy()
    r = np.asarray(residual, float)
    _check_knot_inputs(d, f, r)
    s = np.array([sigma(ph) for ph in f]) if sig is None else np.array(sig, float)
    if s.shape != (d.size, r.size) or not (np.isfinite(s).all() and (s > 0).all()):
        raise ValueError(
            f"sig must be sigma at each knot's phi, shape (K, N) = ({d.size}, {r.size}) with every value finite and "
            f"> 0; got shape {s.shape}. Pass sig=None to have it computed from sigma(phi)."
        )
    b = np.array([q_lin(lv, r / si) for lv, si in zip(d, s)])
    moved = np.zeros(d.size, dtype=bool)
    upper = np.flatnonzero(b >= 0)[::-1]  # from the upper tail inward
    lower = np.flatnonzero(b < 0)  # from the lower tail inward
    for order, sign in ((upper, 1.0), (lower, -1.0)):
        for out, j in zip(order[:-1], order[1:]):
            # the solver's tolerance (``_solver._inward_ok``): rounding is left to monotone_knots
            tol = 1e-10 * max(1.0, abs(b[out]))
            if sign * b[j] <= sign * b[out] + tol:
                continue
            for t in _BACKTRACK:
                f_t = f[out] + t * (f[j] - f[out])
                s_t = sigma(f_t)
                b_t = float(q_lin(d[j], r / s_t))
                if sign * b_t <= sign * b[out] + tol or t == 0.0:
                    f[j], s[j], b[j], moved[j] = f_t, s_t, b_t, True
                    break
    return f, b, s, moved


def _check_knot_inputs(levels: np.ndarray, phi: np.ndarray, residual: np.ndarray) -> None:
    """Knot levels strictly increasing in (0, 1), one row of phi per knot, finite residuals, or a ValueError."""
    if (
        levels.ndim != 1
        or levels.size == 0
        or not (np.all((levels > 0) & (levels < 1)) and np.all(np.diff(levels) > 0))
    ):
        raise ValueError(
            f"levels must be strictly increasing knot levels inside (0, 1); got {levels!r}. Pass e.g. "
            "calibprob._core.ranks.knot_levels(K, N)."
        )
    if phi.shape[0] != levels.size or not np.isfinite(phi).all():
        raise ValueError(
            f"phi must hold one finite row of log-hyperparameters per knot, shape ({levels.size}, P); got shape "
            f"{phi.shape}{' with NaN or inf' if phi.shape[0] == levels.size else ''}. Pass the knots' fitted phi."
        )
    if residual.ndim != 1 or residual.size == 0 or not np.isfinite(residual).all():
        raise ValueError(
            f"residual must be a 1-D array of finite residuals of the points that set beta; got shape "
            f"{residual.shape}. Drop or impute the rows with NaN or inf."
        )


def monotone_knots(
    levels: ArrayLike, beta: ArrayLike, phi: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    r"""Make knots admissible for a non-crossing quantile function (conservatively).

    Enforces, in this order,

    1. :math:`\beta` non-decreasing: from the first knot with :math:`\beta \ge 0`
       a running maximum upward, below it a running minimum downward (the
       outer quantiles move *away* from the mean: intervals only widen);
    2. :math:`\phi` non-increasing in :math:`\delta` where :math:`\beta < 0` and
       non-decreasing where :math:`\beta > 0`: running maxima from the sign
       change outward (again only widening);
    3. an artificial knot at the zero of :math:`\hat\beta` (piecewise linear in
       :math:`\Phi^{-1}(\delta)`, see :func:`interpolate_knots`),
       where :math:`\hat\phi` is the entry-wise minimum of its two neighbours
       (a knot with :math:`\beta = 0` gets that minimum itself).

    Parameters
    ----------
    levels : array_like, shape (K,)
        Strictly increasing knot levels.
    beta : array_like, shape (K,)
    phi : array_like, shape (K, P)
        σ-increasing log-hyperparameters per knot.

    Returns
    -------
    levels, beta, phi : ndarray, shapes (K',), (K',), (K', P)
        The interpolation nodes (``K' = K`` or ``K + 1``).
    n_repaired : ndarray of int, shape (K,)
        Per input knot: 1 if β was changed, 2 if φ was, 3 if both.
    """
    d = np.asarray(levels, float).copy()
    b = np.asarray(beta, float).copy()
    f = np.atleast_2d(np.asarray(phi, float)).copy()
    k = d.size
    repaired = np.zeros(k, dtype=int)
    pos = np.flatnonzero(b >= 0)
    c = int(pos[0]) if pos.size else k  # first knot of the non-negative side
    b_old = b.copy()
    if c < k:
        b[c:] = np.maximum.accumulate(b[c:])
    if c > 0:
        b[:c] = np.minimum.accumulate(b[:c][::-1])[::-1]
    repaired += (b != b_old).astype(int)
    f_old = f.copy()
    # φ: running maximum from the sign change outward (only widens)
    neg = np.flatnonzero(b < 0)
    posi = np.flatnonzero(b > 0)
    if neg.size:
        f[neg] = np.maximum.accumulate(f[neg][::-1], axis=0)[::-1]
    if posi.size:
        f[posi] = np.maximum.accumulate(f[posi], axis=0)
    repaired += 2 * np.any(f != f_old, axis=1).astype(int)
    # the minimum of φ where β̂ = 0
    zero = np.flatnonzero(b == 0)
    if zero.size:
        for i in zero:
            nb = [j for j in (i - 1, i + 1) if 0 <= j < k]
            f[i] = np.min(f[[i, *nb]], axis=0)
    elif neg.size and posi.size:
        a, c2 = int(neg[-1]), int(posi[0])
        za, zc = special.ndtri(d[a]), special.ndtri(d[c2])
        dz = float(special.ndtr(za + (0.0 - b[a]) * (zc - za) / (b[c2] - b[a])))
        if d[a] < dz < d[c2]:
            d = np.insert(d, c2, dz)
            b = np.insert(b, c2, 0.0)
            f = np.insert(f, c2, np.minimum(f[a], f[c2]), axis=0)
    return d, b, f, repaired


def interpolate_knots(
    nodes_level: np.ndarray, nodes_beta: ArrayLike, nodes_phi: ArrayLike, levels: ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    r"""Evaluate :math:`\hat\beta(\delta)` and :math:`\hat\phi(\delta)` from interpolation nodes.

    Both are piecewise linear in :math:`\Phi^{-1}(\delta)` between the nodes
    (monotone, as the paper requires of any interpolant, and exact for β when
    the z-scores are Gaussian; it is also the interpolation rule of the
    predictive contract). Beyond the outer nodes :math:`\hat\phi` is constant
    and :math:`\hat\beta` continues with the slope of the outer segment (the
    contract's Gaussian tail rule).

    Parameters
    ----------
    nodes_level : ndarray, shape (K,)
    nodes_beta : ndarray, shape (K,)
    nodes_phi : ndarray, shape (K, P)
    levels : array_like, shape (L,)

    Returns
    -------
    beta : ndarray, shape (L,)
    phi : ndarray, shape (L, P)
    """
    x = special.ndtri(np.asarray(nodes_level, float))
    yb = np.asarray(nodes_beta, float)
    yf = np.atleast_2d(np.asarray(nodes_phi, float))
    lv = np.atleast_1d(np.asarray(levels, float))
    if x.size == 1:
        if not np.allclose(lv, nodes_level[0], rtol=0, atol=1e-12):
            raise ValueError(
                f"a sharp GP fitted at the single level {float(nodes_level[0]):.6g} defines the "
                f"quantile only there; got levels {lv}. Fit at least two levels for a quantile "
                "function."
            )
        return np.full(lv.size, yb[0]), np.repeat(yf, lv.size, axis=0)
    z = special.ndtri(lv)
    beta = np.interp(z, x, yb)
    phi = np.stack([np.interp(z, x, yf[:, j]) for j in range(yf.shape[1])], axis=1)
    lo, hi = z < x[0], z > x[-1]
    if lo.any():
        beta[lo] = yb[0] + (yb[1] - yb[0]) / (x[1] - x[0]) * (z[lo] - x[0])
    if hi.any():
        beta[hi] = yb[-1] + (yb[-1] - yb[-2]) / (x[-1] - x[-2]) * (z[hi] - x[-1])
    return beta, phi


def interpolate_quantiles(
    nodes_level: np.ndarray, nodes_beta: ArrayLike, nodes_sigma: np.ndarray, mu: np.ndarray, levels: ArrayLike
) -> np.ndarray:
    r"""Quantiles from the node quantiles, linear in :math:`\Phi^{-1}(\delta)` between nodes.

    With node quantiles :math:`Q_k(x) = \mu(x) + \beta_k\,\sigma(\phi_k, x)`, a level
    between nodes :math:`k-1` and :math:`k` gets
    :math:`(1-t)Q_{k-1}(x) + tQ_k(x)`, :math:`t` its position in
    :math:`\Phi^{-1}`; beyond the outer nodes :math:`\mu + \hat\beta(\delta)\sigma(\phi_{\text{outer}}, x)`
    (the tail rule of :func:`interpolate_knots`). Monotone in δ when the node quantiles
    are ordered at every x (monotone knots and Assumption 4.1); equal to the
    θ-interpolated quantile at the nodes (``interpolate="quantile"`` of the estimator).

    Parameters
    ----------
    nodes_level, nodes_beta : ndarray, shape (K,), K >= 2
    nodes_sigma : ndarray, shape (n, K)
        σ(φ_k, x) at the n inputs.
    mu : ndarray, shape (n,)
    levels : ndarray, shape (L,)

    Returns
    -------
    ndarray, shape (n, L)
    """
    x = special.ndtri(np.asarray(nodes_level, float))
    z = special.ndtri(np.asarray(levels, float))
    q_nodes = mu[:, None] + np.asarray(nodes_beta, float)[None, :] * nodes_sigma
    i = np.clip(np.searchsorted(x, z, side="right"), 1, x.size - 1)
    t = np.clip((z - x[i - 1]) / (x[i] - x[i - 1]), 0.0, 1.0)
    q = (1.0 - t) * q_nodes[:, i - 1] + t * q_nodes[:, i]
    beta = interpolate_knots(nodes_level, nodes_beta, np.zeros((x.size, 1)), levels)[0]
    lo, hi = z < x[0], z > x[-1]
    q[:, lo] = mu[:, None] + beta[lo][None, :] * nodes_sigma[:, :1]
    q[:, hi] = mu[:, None] + beta[hi][None, :] * nodes_sigma[:, -1:]
    return q


# σ-increasing log coordinates ------------------------------------------------------


def _phi_from_theta(theta: dict, d: int) -> np.ndarray:
    ls = np.broadcast_to(np.asarray(theta["lengthscale"], float), (d,))
    return np.concatenate([-np.log(ls), [np.log(theta["variance"]), np.log(theta["noise"])]])


def _theta_from_phi(phi: np.ndarray, d: int) -> dict:
    phi = np.asarray(phi, float)
    return {
        "lengthscale": np.exp(-phi[:d]),
        "variance": float(np.exp(phi[d])),
        "noise": float(np.exp(phi[d + 1])),
    }
