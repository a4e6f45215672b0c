"""Constructors of the contract: a Gaussian, quantiles at given levels, CDF values on a grid.

Draws (:func:`~calibprob.predictive.from_draws`) and PSIS-LOO (:func:`~calibprob.predictive.from_loo`)
have their own modules.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike
from scipy import special

from calibprob._core.validation import check_array, check_confidence_levels, check_positive
from calibprob.predictive._common import (
    CalibprobWarning,
    _check_finite_rows,
    _dataset,
    _levels_or_default,
    _obs_coord,
    _repair_crossing,
    check_interval_ends,
)


def normal(
    loc: ArrayLike,
    scale: ArrayLike,
    levels: ArrayLike | None = None,
    *,
    obs: ArrayLike | None = None,
    method: str = "normal",
) -> xr.Dataset:
    r"""A Gaussian predictive distribution per observation (exact evaluation).

    Parameters
    ----------
    loc : array_like, shape (n,)
        Predictive means :math:`\mu_i`.
    scale : array_like, shape (n,)
        Predictive standard deviations :math:`\sigma_i > 0`.
    levels : array_like, shape (L,), optional
        Quantile levels stored in ``quantile``; default :data:`DEFAULT_LEVELS`.
    obs : array_like, shape (n,), optional
        Labels for the ``obs`` coordinate; default ``0..n-1``.
    method : str, default "normal"
        Recorded in ``attrs["method"]``.

    Returns
    -------
    xarray.Dataset
        ``quantile(obs, level) = loc + scale * Phi^{-1}(level)``, plus ``loc``,
        ``scale``, ``mean``, ``std``; ``attrs["family"] == "normal"``.

    References
    ----------
    The predictive-distribution contract and its interpolation rule (linear in
    :math:`\Phi^{-1}(p)`, Gaussian tails): :doc:`/concepts`.

    Examples
    --------
    >>> import calibprob
    >>> pred = calibprob.normal([0.0, 1.0], [1.0, 2.0])
    >>> float(pred.calib.cdf([0.0, 1.0])[0])
    0.5
    """
    loc = check_array(loc, "loc", ndim=1)
    scale = check_array(scale, "scale", ndim=1)
    if loc.shape != scale.shape:
        raise ValueError(
            f"mismatched lengths: loc has {loc.shape[0]}, scale has {scale.shape[0]} entries. "
            "Pass one loc and one scale per observation."
        )
    check_positive(scale, "scale")
    levels = _levels_or_default(levels)
    q = loc[:, None] + scale[:, None] * special.ndtri(levels)[None, :]
    extra = {"loc": loc, "scale": scale, "mean": loc, "std": scale}
    return _dataset(q, levels, _obs_coord(loc.size, obs), method, "normal", extra)


def from_quantiles(
    quantiles: ArrayLike,
    levels: ArrayLike,
    *,
    obs: ArrayLike | None = None,
    method: str = "quantiles",
    mean: ArrayLike | None = None,
    std: ArrayLike | None = None,
) -> xr.Dataset:
    r"""A predictive distribution from quantiles at given levels.

    Parameters
    ----------
    quantiles : array_like, shape (n, L)
        Predictive quantiles; crossing rows are repaired by sorting (with a
        :class:`CalibprobWarning`), never silently returned.
    levels : array_like, shape (L,)
        Strictly increasing levels in (0, 1), ``L >= 2``.
    obs : array_like, shape (n,), optional
    method : str
    mean, std : array_like, shape (n,), optional
        Stored as ``mean``/``std`` if the producer knows them exactly;
        otherwise the accessor computes them from the quantile function.

    Returns
    -------
    xarray.Dataset
        ``attrs["family"] == "quantile"``.

    References
    ----------
    The predictive-distribution contract and its interpolation rule (linear in
    :math:`\Phi^{-1}(p)`, Gaussian tails): :doc:`/concepts`.

    Chernozhukov, V., Fernández-Val, I. and Galichon, A. (2010). Quantile and
    probability curves without crossing. Econometrica 78(3).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> pred = calibprob.from_quantiles(np.array([[-1.0, 0.0, 1.0]]), [0.2, 0.5, 0.8])
    >>> float(pred.calib.ppf(0.5)[0])
    0.0
    """
    levels = _levels_or_default(levels)
    q = check_array(quantiles, "quantiles", ndim=2, finite=False)
    _check_finite_rows(q, "quantiles")
    if q.shape[1] != levels.size:
        raise ValueError(f"quantiles must have one column per level: shape (n, {levels.size}); got {q.shape}.")
    q = _repair_crossing(q)
    n = q.shape[0]
    for name, v in (("mean", mean), ("std", std)):
        if v is not None and np.shape(v) != (n,):
            raise ValueError(f"{name} must have shape ({n},); got {np.shape(v)}.")
    if std is not None:
        check_positive(std, "std", strict=False)
    return _dataset(q, levels, _obs_coord(n, obs), method, "quantile", {"mean": mean, "std": std})


def from_cdf_grid(
    grid: ArrayLike,
    cdf: ArrayLike,
    levels: ArrayLike | None = None,
    *,
    obs: ArrayLike | None = None,
    method: str = "cdf-grid",
) -> xr.Dataset:
    r"""A predictive distribution from CDF values on a grid, by monotone inversion.

    Parameters
    ----------
    grid : array_like, shape (G,) or (n, G)
        Increasing evaluation points (shared by all observations or per row).
    cdf : array_like, shape (n, G)
        CDF values in [0, 1], non-decreasing along the grid. Decreases are
        repaired by a running maximum; any beyond rounding noise (1e-9) emit a
        :class:`CalibprobWarning`, as crossing quantiles do in :func:`from_quantiles`.
    levels : array_like, optional
        Default :data:`DEFAULT_LEVELS`.

    Returns
    -------
    xarray.Dataset
        Quantiles by linear interpolation of the inverse CDF. Levels outside the
        CDF range covered by the grid are clipped to the grid's ends: make the
        grid cover the mass (e.g. mean ± 8 sd, as Song et al. 2019 do).

    References
    ----------
    Song, H., Diethe, T., Kull, M. and Flach, P. (2019). Distribution calibration
    for regression. ICML, §5 (a grid covering mean ± 8 sd).

    The predictive-distribution contract and its interpolation rule (linear in
    :math:`\Phi^{-1}(p)`, Gaussian tails): :doc:`/concepts`.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from scipy import stats
    >>> grid = np.linspace(-8.0, 8.0, 4001)
    >>> pred = calibprob.from_cdf_grid(grid, stats.norm.cdf(grid)[None, :], levels=[0.1, 0.5, 0.9])
    >>> bool(np.allclose(pred["quantile"].values, stats.norm.ppf([0.1, 0.5, 0.9]), atol=1e-3))
    True
    """
    levels = _levels_or_default(levels)
    F = check_array(cdf, "cdf", ndim=2)
    n, G = F.shape
    g = check_array(grid, "grid", ndim=(1, 2))
    g = np.broadcast_to(g, (n, G)) if g.ndim == 1 and g.size == G else g
    if g.shape != (n, G):
        raise ValueError(f"grid must have shape ({G},) or ({n}, {G}); got {np.shape(grid)}.")
    if np.any(np.diff(g, axis=1) <= 0):
        raise ValueError("grid must be strictly increasing along its last axis; sort it first.")
    if F.min() < -1e-9 or F.max() > 1 + 1e-9:
        raise ValueError(f"cdf values must lie in [0, 1]; got range [{F.min():.3g}, {F.max():.3g}].")
    F = np.clip(F, 0.0, 1.0)
    F_mono = np.maximum.accumulate(F, axis=1)
    drop = np.max(F_mono - F, axis=1)
    repaired = drop > 1e-9  # beyond rounding noise: the input was not a CDF there
    if repaired.any():
        warnings.warn(
            f"cdf decreased along the grid in {int(repaired.sum())} of {n} observations (largest drop "
            f"{float(drop.max()):.3g}); repaired by a running maximum, which can move quantiles far "
            "(a spike raises every later value). Check the CDF that was passed.",
            CalibprobWarning,
            stacklevel=2,
        )
    F = F_mono
    # Vectorised inversion: offset each row by 2*row so one searchsorted serves all rows.
    offset = 2.0 * np.arange(n)[:, None]
    flat = (F + offset).ravel()
    targets = (levels[None, :] + offset).ravel()
    pos = np.searchsorted(flat, targets, side="left").reshape(n, levels.size)
    pos -= (np.arange(n) * G)[:, None]
    hi = np.clip(pos, 1, G - 1)
    lo = hi - 1
    rows = np.arange(n)[:, None]
    F_lo, F_hi = F[rows, lo], F[rows, hi]
    g_lo, g_hi = g[rows, lo], g[rows, hi]
    w = np.where(F_hi > F_lo, (levels[None, :] - F_lo) / np.where(F_hi > F_lo, F_hi - F_lo, 1.0), 0.5)
    q = g_lo + np.clip(w, 0.0, 1.0) * (g_hi - g_lo)
    q = np.maximum.accumulate(q, axis=1)
    return _dataset(q, levels, _obs_coord(n, obs), method, "quantile")


def from_intervals(
    lower: ArrayLike,
    upper: ArrayLike,
    confidence_level: ArrayLike | None,
    *,
    obs: ArrayLike | None = None,
    method: str = "intervals",
    attrs: dict[str, Any] | None = None,
    check: bool = True,
) -> xr.Dataset:
    r"""The interval family: central prediction intervals at given confidence levels, nothing more.

    Intervals-only methods (jackknife+, CV+, J+GP, full-conformal GP) state, for each
    confidence level :math:`c`, an interval :math:`[\ell_i(c), u_i(c)]` meant to hold
    :math:`y_i` with probability at least :math:`c`; read as a distribution, its ends are
    :math:`Q_i((1-c)/2)` and :math:`Q_i((1+c)/2)`, and nothing else is stated. The accessor
    answers ``ppf`` / ``interval`` at those probabilities only and refuses the CDF, density,
    moments and draws (``calibprob.predictive._families``); :func:`calibprob.evaluate` scores
    it by coverage, width and IAE.

    Parameters
    ----------
    lower, upper : array_like, shape (n, C)
        Interval ends, ``lower <= upper``; ``-inf`` / ``inf`` are allowed (a conformal set that
        is the whole line when too few scores resolve the level), NaN is not.
    confidence_level : array_like, shape (C,)
        The confidence levels, each in (0, 1).
    obs : array_like, shape (n,), optional
        Labels for the ``obs`` coordinate; default ``0..n-1``.
    method : str, default "intervals"
        Recorded in ``attrs["method"]``.
    attrs : dict, optional
        More attributes (e.g. the calibration-set size).
    check : bool, default True
        Check the ends (no NaN, ``lower <= upper``; :func:`validate` runs the same check). The
        conformal methods pass ``False``: their ends come from ordered thresholds, and building
        their result must not cost an extra pass or change what they returned before.

    Returns
    -------
    xarray.Dataset
        ``lower(obs, confidence_level)``, ``upper(obs, confidence_level)``,
        ``attrs["family"] == "interval"``.

    References
    ----------
    Pion, A. and Vazquez, E. (2024), §4: intervals-only methods are compared on coverage,
    width and IAE.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.predictive import from_intervals
    >>> iv = from_intervals([[-1.0, -2.0]], [[1.0, 2.0]], [0.5, 0.9])
    >>> float(iv.calib.interval(0.9)["upper"][0])
    2.0
    """
    c = check_confidence_levels(confidence_level, "confidence_level")
    lo = check_array(lower, "lower", ndim=2, finite=False)
    hi = check_array(upper, "upper", ndim=2, finite=False)
    if lo.shape != hi.shape or lo.shape[1] != c.size:
        raise ValueError(
            f"lower and upper must both have shape (n, {c.size}) (one column per confidence level); "
            f"got {lo.shape} and {hi.shape}. Pass one column per entry of confidence_level."
        )
    ds = xr.Dataset(
        {"lower": (("obs", "confidence_level"), lo), "upper": (("obs", "confidence_level"), hi)},
        coords={"obs": _obs_coord(lo.shape[0], obs), "confidence_level": c},
    )
    ds.attrs["method"] = method
    ds.attrs["family"] = "interval"
    ds.attrs.update(attrs or {})
    if check:
        check_interval_ends(lo, hi)
    return ds
