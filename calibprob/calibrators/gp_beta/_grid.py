r"""Prediction from posterior draws: the averaged calibrated CDF on a per-observation grid, its quantiles and moments."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

from calibprob._core.stable import pow2_scale
from calibprob.calibrators.gp_beta._link import _tail_bounds

# Elements per temporary (draws x rows x grid) block in prediction (~80 MB of float64).
_BLOCK = 10_000_000


def cdf_on_grid(w: np.ndarray, n_grid: int, p_tail: float = 1e-7) -> Any:
    """Posterior-averaged calibrated CDF on a per-observation z grid: (zgrid (n, G), F (n, G)).

    The grid spans, per observation, the union over draws of the closed-form
    tail bounds of :func:`_tail_bounds`, so at most ``p_tail`` of the
    averaged mass lies beyond either end.
    """
    S, n, _ = w.shape
    G = n_grid
    lo, hi = _tail_bounds(w[..., 0], w[..., 1], w[..., 2], p_tail)
    lo, hi = lo.min(axis=0), hi.max(axis=0)
    narrow = hi - lo < 1e-3
    lo, hi = np.where(narrow, lo - 0.5, lo), np.where(narrow, hi + 0.5, hi)
    zg = lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, G)[None, :]
    F = np.empty((n, G))
    rows = max(1, _BLOCK // (S * G))
    for start in range(0, n, rows):
        sl = slice(start, start + rows)
        lq, l1q = special.log_ndtr(zg[sl]), special.log_ndtr(-zg[sl])
        # t = a log q - b log(1-q) + c, in place (the (S, rows, G) block dominates prediction)
        t = np.multiply(np.exp(w[:, sl, 0, None]), lq[None])
        t -= np.exp(w[:, sl, 1, None]) * l1q[None]
        t += w[:, sl, 2, None]
        special.expit(t, out=t)
        F[sl] = t.mean(axis=0)
    return zg, np.maximum.accumulate(F, axis=1)


def invert(zg: Any, F: Any, levels: Any) -> Any:
    """Quantiles in z by interpolating z against Phi^{-1}(F) (exact for Gaussian pieces)."""
    u = special.ndtri(np.clip(F, 1e-300, 1.0 - 1e-16))
    # strictly increasing abscissae for np.interp (flat numerical tails)
    u = u + 1e-12 * np.arange(u.shape[1])[None, :]
    ul = special.ndtri(levels)
    return np.stack([np.interp(ul, u[i], zg[i]) for i in range(u.shape[0])])


def moments_from_grid(zg: Any, F: Any) -> Any:
    """Mean and standard deviation of the law with CDF ``F`` on the grid ``zg`` (response scale)."""
    # in units of a power of two near max|zg| per row (exact): no overflow of the second moment
    # at scale 1e200, no underflow at 1e-200 (calibprob.predictive._numerics)
    unit = pow2_scale(zg, axis=1, keepdims=True)
    mean, std = _unit_moments_from_grid(np.asarray(zg, float) / unit, F)
    return mean * unit[:, 0], std * unit[:, 0]


def _unit_moments_from_grid(zg: Any, F: Any) -> Any:
    # mass between grid points sits at the midpoint; the tails (< 1e-6) at the ends
    # zg: the grid on the response scale, mapped monotonically from the probit grid
    mass = np.diff(F, axis=1)
    mid = 0.5 * (zg[:, 1:] + zg[:, :-1])
    m0, m1 = F[:, :1], 1.0 - F[:, -1:]
    total = mass.sum(axis=1, keepdims=True) + m0 + m1
    mean = (np.sum(mass * mid, axis=1, keepdims=True) + m0 * zg[:, :1] + m1 * zg[:, -1:]) / total
    h2 = np.diff(zg, axis=1) ** 2 / 12.0  # within-bin spread (uniform mass per bin)
    second = (
        np.sum(mass * ((mid - mean) ** 2 + h2), axis=1, keepdims=True)
        + m0 * (zg[:, :1] - mean) ** 2
        + m1 * (zg[:, -1:] - mean) ** 2
    ) / total
    return mean[:, 0], np.sqrt(second[:, 0])
