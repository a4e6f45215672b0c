r"""The transformed family's numerics: the law of :math:`g^{-1}(Z)` for a target transform :math:`g`.

The functions behind :mod:`calibprob.transforms` that the predictive contract itself needs
(the ``.calib`` accessor reads a back-transformed Dataset through them): the transforms and
their domains, CDF, density, z-score, moments and exact CRPS of the back-transformed
piecewise-Gaussian law. They sit below both :mod:`calibprob.predictive` and
:mod:`calibprob.transforms` (which re-exports the public ones), so neither imports the other
in a circle.
"""

from __future__ import annotations

import functools

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike
from scipy import special

from calibprob._core.validation import check_array
from calibprob.predictive._numerics import quantile_cdf, quantile_logpdf, quantile_pieces, quantile_zscore

#: The target transforms :math:`g` understood by specs and the API.
TARGET_TRANSFORMS = ("log", "log1p")

_DOMAIN = {
    "log": (0.0, "y > 0", "use 'log1p' for y >= 0, or shift the target"),
    "log1p": (-1.0, "y > -1", "shift the target so that it exceeds -1"),
}
_CHUNK = 4096
_SQRT2 = np.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)
_GL_PANELS = 12


@functools.cache
def _gauss_legendre() -> tuple[np.ndarray, np.ndarray]:
    """The 16-point Gauss-Legendre nodes and weights, computed on first use: ``numpy.polynomial``
    is not imported by ``import calibprob``, which reads this module through the contract."""
    return np.polynomial.legendre.leggauss(16)


def check_transform(transform: str, name: str = "target_transform") -> str:
    """Return ``transform`` if it is one of :data:`TARGET_TRANSFORMS`, else raise naming the choices."""
    if not isinstance(transform, str) or transform not in TARGET_TRANSFORMS:
        raise ValueError(
            f"{name} must be one of {', '.join(repr(t) for t in TARGET_TRANSFORMS)}; got {transform!r}. "
            "'log' models log(y) (y > 0), 'log1p' models log(1 + y) (y > -1)."
        )
    return transform


def forward(transform: str, y: ArrayLike) -> np.ndarray:
    """:math:`g(y)` without checks (internal; values outside the domain give -inf or nan)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(y) if transform == "log" else np.log1p(y)


def inverse(transform: str, z: ArrayLike) -> np.ndarray:
    r""":math:`g^{-1}(z)`: ``exp`` or ``expm1``."""
    return np.exp(z) if transform == "log" else np.expm1(z)


def log_jacobian(transform: str, y: ArrayLike) -> np.ndarray:
    r""":math:`\log g'(y)`: :math:`-\log y` or :math:`-\log(1+y)`."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.log(y) if transform == "log" else -np.log1p(y)


def domain_bound(transform: str) -> float:
    """The lower end of the domain of ``g``: values must exceed it (0 for ``log``, -1 for ``log1p``).

    Parameters
    ----------
    transform : {"log", "log1p"}

    Returns
    -------
    float

    Examples
    --------
    >>> from calibprob.transforms import domain_bound
    >>> domain_bound("log"), domain_bound("log1p")
    (0.0, -1.0)
    """
    return float(_DOMAIN[check_transform(transform, "transform")][0])


def _in_domain(transform: str, y: np.ndarray) -> np.ndarray:
    return np.asarray(y) > _DOMAIN[transform][0]


def transform_target(y: ArrayLike | xr.DataArray, transform: str, *, name: str = "y") -> np.ndarray:
    r"""Observed values on the transformed scale, :math:`g(y)`.

    Parameters
    ----------
    y : array_like
        Finite observed values.
    transform : {"log", "log1p"}
    name : str
        Names ``y`` in error messages.

    Returns
    -------
    ndarray
        ``log(y)`` or ``log1p(y)``.

    Raises
    ------
    ValueError
        An unknown transform, a non-finite value, or a value outside the
        domain (``y <= 0`` for ``"log"``, ``y <= -1`` for ``"log1p"``); the
        message gives the count and the first offending value.

    References
    ----------
    The target transforms of :mod:`calibprob.transforms`; Baran & Lerch (2015)
    for the log-scale model.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.transforms import transform_target
    >>> transform_target([1.0, np.e], "log").tolist()
    [0.0, 1.0]
    """
    transform = check_transform(transform)
    y = check_array(y.values if isinstance(y, xr.DataArray) else y, name, ndim=None)
    bad = ~_in_domain(transform, y)
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        bound, rule, fix = _DOMAIN[transform]
        raise ValueError(
            f"target_transform={transform!r} needs {rule}; {name} has {int(bad.sum())} value(s) <= {bound:g} "
            f"(the first, {name}[{i}] = {float(y.ravel()[i])!r}). Drop those rows, {fix}."
        )
    return forward(transform, y)


# ---------------------------------------------------------------------------
# NumPy layer: the law of g^{-1}(Z) for a piecewise-Gaussian Z (rows x levels)
# ---------------------------------------------------------------------------


def _dPhi(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """:math:`\\Phi(hi) - \\Phi(lo)` without cancellation when both are in the upper tail."""
    return np.where(lo > 0, special.ndtr(-lo) - special.ndtr(-hi), special.ndtr(hi) - special.ndtr(lo))


def _log_dPhi(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    r""":math:`\log(\Phi(hi) - \Phi(lo))`, accurate in both tails (``log_ndtr``), ``-inf`` for an empty piece."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        left = special.log_ndtr(hi) + np.log1p(-np.exp(special.log_ndtr(lo) - special.log_ndtr(hi)))
        right = special.log_ndtr(-lo) + np.log1p(-np.exp(special.log_ndtr(-hi) - special.log_ndtr(-lo)))
        mid = np.log(special.ndtr(hi) - special.ndtr(lo))
    out = np.where(hi <= 0, left, np.where(lo > 0, right, mid))
    return np.where(hi > lo, out, -np.inf)


def _weighted(log_w: np.ndarray, log_mass: np.ndarray) -> np.ndarray:
    r""":math:`e^{\log w + \log m}` summed over pieces: a huge weight times a tiny mass never overflows first."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.sum(np.exp(log_w + log_mass), axis=-1)


def cdf(zq: np.ndarray, levels: np.ndarray, y: ArrayLike, transform: str) -> np.ndarray:
    """:math:`F_Y(y) = F_Z(g(y))`, 0 below the domain."""
    y = np.asarray(y, float)
    inside = _in_domain(transform, y)
    out = quantile_cdf(zq, levels, np.where(inside, forward(transform, np.where(inside, y, 1.0)), 0.0))
    return np.where(inside, out, 0.0)


def logpdf(zq: np.ndarray, levels: np.ndarray, y: ArrayLike, transform: str) -> np.ndarray:
    r""":math:`\log f_Z(g(y)) + \log g'(y)`, :math:`-\infty` outside the domain."""
    y = np.asarray(y, float)
    inside = _in_domain(transform, y)
    ys = np.where(inside, y, 1.0)
    out = quantile_logpdf(zq, levels, forward(transform, ys)) + log_jacobian(transform, ys)
    return np.where(inside, out, -np.inf)


def zscore(zq: np.ndarray, levels: np.ndarray, y: ArrayLike, transform: str) -> np.ndarray:
    r""":math:`\Phi^{-1}(F_Y(y))`, :math:`-\infty` outside the domain."""
    y = np.asarray(y, float)
    inside = _in_domain(transform, y)
    out = quantile_zscore(zq, levels, forward(transform, np.where(inside, y, 1.0)))
    return np.where(inside, out, -np.inf)


def moments(zq: np.ndarray, levels: np.ndarray, transform: str) -> tuple[np.ndarray, np.ndarray]:
    r"""Exact mean and standard deviation of :math:`Y = g^{-1}(Z)`.

    On piece :math:`j`, :math:`e^{Z} = e^{a_j + b_j U}` for
    :math:`U \in [l_j, h_j)`, and
    :math:`E[e^{kZ}; \text{piece}] = e^{k a_j + k^2 b_j^2/2}\,
    [\Phi(h_j - k b_j) - \Phi(l_j - k b_j)]` (:math:`k = 1, 2`). Each row is
    shifted by its median :math:`c` first (:math:`e^Z = e^c e^{Z - c}`), so
    nothing overflows before the result does.
    """
    zq = np.asarray(zq, float)
    mean = np.empty(zq.shape[0])
    std = np.empty(zq.shape[0])
    for i in range(0, zq.shape[0], _CHUNK):
        sl = slice(i, i + _CHUNK)
        c = np.median(zq[sl], axis=1)
        a, b, lo, hi = quantile_pieces(zq[sl] - c[:, None], levels)
        # in log space: a steep Gaussian tail (large b) has a huge e^{b^2/2} and a tiny mass
        m1 = _weighted(a + 0.5 * b * b, _log_dPhi(lo - b, hi - b))
        m2 = _weighted(2.0 * a + 2.0 * b * b, _log_dPhi(lo - 2.0 * b, hi - 2.0 * b))
        with np.errstate(over="ignore", invalid="ignore"):
            scale = np.exp(c)
            mean[sl] = scale * m1
            var = np.where(np.isfinite(m2), np.maximum(m2 - m1 * m1, 0.0), np.inf)
            std[sl] = scale * np.sqrt(var)  # inf when E[Y^2] overflows: a law too wide to represent
    if transform == "log1p":
        mean -= 1.0
    return mean, std


def _bvn_h_pos(h: np.ndarray, k: np.ndarray, rho: np.ndarray) -> np.ndarray:
    r"""Bivariate standard normal CDF :math:`\Phi_2(h, k; \rho)` for :math:`h > 0` and finite ``k``.

    Owen (1956): :math:`\Phi_2 = \tfrac12[\Phi(h) + \Phi(k)] - T(h, a_h) - T(k, a_k) - \beta`,
    :math:`a_h = (k - \rho h)/(h r)`, :math:`a_k = (h - \rho k)/(k r)`,
    :math:`r = \sqrt{1-\rho^2}`, :math:`\beta = \tfrac12` iff :math:`k < 0` (as :math:`h > 0`);
    at :math:`k = 0`, :math:`T(0, +\infty) = 1/4`.
    """
    r = np.sqrt(1.0 - rho * rho)
    k_safe = np.where(k == 0.0, 1.0, k)
    t_k = np.where(k == 0.0, 0.25, special.owens_t(k_safe, (h - rho * k_safe) / (k_safe * r)))
    beta = np.where(k < 0.0, 0.5, 0.0)
    return 0.5 * (special.ndtr(h) + special.ndtr(k)) - special.owens_t(h, (k - rho * h) / (h * r)) - t_k - beta


def crps_exp_pieces(y: np.ndarray, zq: np.ndarray, levels: np.ndarray, *, chunk_size: int = _CHUNK) -> np.ndarray:
    r"""Exact CRPS of :math:`Y = e^{Z}`, :math:`Z` piecewise Gaussian (the contract's law of ``zq``).

    With :math:`\tau^* = F_Y(y)` and the quantile-integral form of the CRPS,

    .. math::

        \mathrm{CRPS}(F_Y, y) = 2\int_0^1 \rho_\tau\bigl(y - Q_Y(\tau)\bigr)\,\mathrm d\tau
        = y\,(2\tau^* - 1) - 2\int_0^1 \tau\,Q_Y(\tau)\,\mathrm d\tau
          + 2\int_{\tau^*}^1 Q_Y(\tau)\,\mathrm d\tau .

    Substituting :math:`\tau = \Phi(u)`, :math:`Q_Y = e^{a_j + b_j u}` on piece
    :math:`j`; :math:`\int e^{a+bu}\varphi(u)\,\mathrm du = e^{a+b^2/2}\Phi(u-b)`
    and :math:`\int_{-\infty}^{x} \Phi(u)\,e^{a+bu}\varphi(u)\,\mathrm du =
    e^{a+b^2/2}\,\Phi_2\bigl(b/\sqrt2,\ x-b;\ -1/\sqrt2\bigr)` (the probability
    that :math:`V \le W` and :math:`W \le x` for independent
    :math:`V \sim N(0,1)`, :math:`W \sim N(b,1)`), evaluated with Owen's T.
    For one Gaussian piece this is the lognormal CRPS of Baran & Lerch (2015).
    Rows are scaled by :math:`e^{-c}` (their median) first; the CRPS is
    scale-equivariant.

    Parameters
    ----------
    y : ndarray, shape (n,)
        Observed values (any real; :math:`y \le 0` lies below the support).
    zq : ndarray, shape (n, L)
        Non-decreasing quantiles of :math:`Z = \log Y` at ``levels``.
    levels : ndarray, shape (L,)
    chunk_size : int
        Rows per block; memory O(chunk_size x L).

    Returns
    -------
    ndarray, shape (n,)

    References
    ----------
    Gneiting & Raftery (2007), eq. (21) and §4.2; Baran & Lerch (2015) (one piece);
    Owen (1956) (the bivariate normal CDF).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import special
    >>> from calibprob.transforms import crps_exp_pieces
    >>> levels = np.array([0.1, 0.5, 0.9]); mu, s, y = 0.3, 0.5, 2.0
    >>> zq = mu + s * special.ndtri(levels)[None, :]            # log Y ~ N(0.3, 0.5^2)
    >>> z = (np.log(y) - mu) / s                                # Baran & Lerch (2015), lognormal
    >>> exact = y * (2 * special.ndtr(z) - 1) - 2 * np.exp(mu + s**2 / 2) * (
    ...     special.ndtr(z - s) + special.ndtr(s / np.sqrt(2)) - 1)
    >>> bool(np.isclose(crps_exp_pieces(np.array([y]), zq, levels)[0], exact, rtol=1e-12))
    True
    """
    y = np.asarray(y, float)
    zq = np.asarray(zq, float)
    out = np.empty(y.shape[0])
    rho = -1.0 / _SQRT2
    for i in range(0, y.shape[0], chunk_size):
        sl = slice(i, i + chunk_size)
        c = np.median(zq[sl], axis=1)
        ys = y[sl] * np.exp(-c)
        a, b, lo, hi = quantile_pieces(zq[sl] - c[:, None], levels)
        log_w = a + 0.5 * b * b  # log e^{a + b^2/2} per piece
        # int tau Q dtau = sum_j w_j [I_b(h_j) - I_b(l_j)],  I_b(-inf) = 0, I_b(+inf) = Phi(b / sqrt 2)
        hb = b / _SQRT2
        fin_lo, fin_hi = np.isfinite(lo), np.isfinite(hi)
        I_hi = np.where(fin_hi, _bvn_h_pos(hb, np.where(fin_hi, hi, 0.0) - b, rho), special.ndtr(hb))
        I_lo = np.where(fin_lo, _bvn_h_pos(hb, np.where(fin_lo, lo, 0.0) - b, rho), 0.0)
        J = I_hi - I_lo
        with np.errstate(over="ignore", invalid="ignore"):
            contrib = np.where(J > 0, np.exp(log_w + np.log(np.where(J > 0, J, 1.0))), 0.0)
        # A piece far left of b (b - h > 4) has a tiny I_hi - I_lo times a huge w: the
        # difference of two Owen's-T sums would lose digits (absolute error ~1e-17 w). There
        # the integrand Phi(u) e^{a + b u} phi(u) is evaluated without w by a composite
        # 16-point Gauss-Legendre rule on [max(l, h - 12), h] (12 panels; below h - 12,
        # Phi(u) phi(u) < e^{-100} relative to the piece, as u < h - 12 < -8 there).
        steep = fin_hi & (b - hi > 4.0)
        if steep.any():
            r_, j_ = np.nonzero(steep)
            _GL_X, _GL_W = _gauss_legendre()
            top = hi[j_]
            bottom = np.maximum(lo[j_], top - 12.0)
            width = (top - bottom) / _GL_PANELS
            half = 0.5 * width
            mids = bottom[:, None] + width[:, None] * (np.arange(_GL_PANELS) + 0.5)[None, :]
            u = (mids[:, :, None] + half[:, None, None] * _GL_X[None, None, :]).reshape(len(j_), -1)
            aa, bb = a[r_, j_][:, None], b[r_, j_][:, None]
            f = special.ndtr(u) * np.exp(aa + bb * u - 0.5 * u * u - _LOG_SQRT_2PI)
            contrib[r_, j_] = half * (f @ np.tile(_GL_W, _GL_PANELS))
        m2 = np.sum(contrib, axis=-1)
        # tau* and u* = Phi^{-1}(tau*): the probit PIT of log y (-inf below the support)
        inside = ys > 0
        ustar = np.where(
            inside, quantile_zscore(zq[sl] - c[:, None], levels, np.log(np.where(inside, ys, 1.0))), -np.inf
        )
        tstar = special.ndtr(ustar)
        # int_{tau*}^1 Q dtau: the part of each piece above u*
        start = np.maximum(lo, ustar[:, None])
        tail = _weighted(log_w, _log_dPhi(start - b, hi - b))
        with np.errstate(over="ignore", invalid="ignore"):
            val = np.exp(c) * (ys * (2.0 * tstar - 1.0) - 2.0 * m2 + 2.0 * tail)
        # a law whose mean overflows (a log-scale tail slope beyond ~37) has an infinite CRPS here
        out[sl] = np.where(np.isfinite(m2) & np.isfinite(tail), val, np.inf)
    return np.maximum(out, 0.0)


def crps(y: np.ndarray, zq: np.ndarray, levels: np.ndarray, transform: str, *, chunk_size: int = _CHUNK) -> np.ndarray:
    """Exact CRPS of :math:`g^{-1}(Z)`; ``log1p`` is the ``log`` case shifted by 1 (CRPS is shift invariant)."""
    y = np.asarray(y, float)
    return crps_exp_pieces(y + 1.0 if transform == "log1p" else y, zq, levels, chunk_size=chunk_size)


# ---------------------------------------------------------------------------
# xarray layer
# ---------------------------------------------------------------------------


def dataset_transform(ds: xr.Dataset) -> str | None:
    """The ``target_transform`` a predictive Dataset declares (None for a plain one)."""
    t = ds.attrs.get("target_transform")
    return None if t in (None, "", "none") else str(t)
