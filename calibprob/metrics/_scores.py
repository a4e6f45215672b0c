"""Array layer, proper scoring rules: closed-form CRPS (normal and piecewise-Gaussian), pinball, interval score, MSE."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from calibprob.metrics._levels import _CHUNK
from calibprob.predictive import quantile_pieces

_SQRT2 = np.sqrt(2.0)
_INV_2SQRTPI = 1.0 / (2.0 * np.sqrt(np.pi))
_INV_SQRT_2PI = 1.0 / np.sqrt(2.0 * np.pi)


def crps_normal(y: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> np.ndarray:
    r"""Closed-form CRPS of Gaussian predictions (Gneiting & Raftery 2007, eq. 21).

    .. math::

        \mathrm{CRPS}(N(\mu,\sigma^2), y) = \sigma\Bigl[z\,(2\Phi(z) - 1)
        + 2\varphi(z) - \tfrac{1}{\sqrt\pi}\Bigr],\qquad z = \frac{y-\mu}{\sigma}.

    Parameters
    ----------
    y, loc, scale : ndarray, shape (n,)

    Returns
    -------
    ndarray, shape (n,)

    References
    ----------
    Gneiting, T. and Raftery, A. E. (2007). Strictly proper scoring rules,
    prediction, and estimation. JASA 102(477), eq. (21).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import crps_normal
    >>> crps_normal(np.array([0.0]), np.array([0.0]), np.array([1.0])).round(4).tolist()
    [0.2337]
    """
    y = np.asarray(y, float)
    loc = np.asarray(loc, float)
    scale = np.asarray(scale, float)
    z = (y - loc) / scale
    pdf = np.exp(-0.5 * z * z) * _INV_SQRT_2PI
    return scale * (z * (2.0 * special.ndtr(z) - 1.0) + 2.0 * pdf - 1.0 / np.sqrt(np.pi))


def _piece_integrals(levels: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per-piece integrals that depend on the levels only (pieces j = 0..L, tails included).

    Returns ``lo, hi`` (piece bounds in u-space) and, over each whole piece,
    ``i0 = int phi``, ``i1 = int u phi``, ``j0 = int Phi phi``, ``j1 = int u Phi phi``.
    """
    z = special.ndtri(np.asarray(levels, float))
    lo = np.concatenate([[-np.inf], z])
    hi = np.concatenate([z, [np.inf]])
    Phi_lo, Phi_hi = special.ndtr(lo), special.ndtr(hi)
    phi_lo = np.exp(-0.5 * lo * lo) * _INV_SQRT_2PI
    phi_hi = np.exp(-0.5 * hi * hi) * _INV_SQRT_2PI
    i0 = Phi_hi - Phi_lo
    i1 = phi_lo - phi_hi
    # int Phi phi = Phi^2 / 2 ;  int u Phi phi = -phi Phi + Phi(sqrt2 u) / (2 sqrt pi)
    j0 = 0.5 * (Phi_hi - Phi_lo) * (Phi_hi + Phi_lo)
    j1 = (phi_lo * Phi_lo - phi_hi * Phi_hi) + _INV_2SQRTPI * (special.ndtr(_SQRT2 * hi) - special.ndtr(_SQRT2 * lo))
    return lo, hi, Phi_hi, phi_hi, i0, i1, j0, j1


def crps_quantile(y: ArrayLike, q: ArrayLike, levels: ArrayLike, *, chunk_size: int = _CHUNK) -> np.ndarray:
    r"""Exact CRPS of piecewise-Gaussian predictions (the calibprob quantile contract).

    The CRPS is twice the pinball loss integrated over all levels,

    .. math::

        \mathrm{CRPS}(F, y) = \int (F(x) - \mathbb 1\{y \le x\})^2\,\mathrm dx
        = 2\int_0^1 \rho_\tau\bigl(y - Q(\tau)\bigr)\,\mathrm d\tau,
        \qquad \rho_\tau(r) = r\,(\tau - \mathbb 1\{r < 0\}).

    Substituting :math:`\tau = \Phi(u)`, the quantile function of
    :mod:`calibprob.predictive` is linear on each of its :math:`L+1` pieces
    (tails included), :math:`Q = a_j + b_j u` for :math:`u\in[l_j, h_j)`.
    Centre the law at :math:`y` (:math:`a_j \leftarrow a_j - y`; the CRPS is
    translation invariant) and let :math:`u^* = -a_k/b_k` be the score where
    :math:`Q(\Phi(u^*)) = y`, in piece :math:`k`. Then

    .. math::

        \mathrm{CRPS} = 2\sum_{j=0}^{L} \int_{l_j}^{h_j}
            \bigl(\mathbb 1\{u > u^*\} - \Phi(u)\bigr)(a_j + b_j u)\,\varphi(u)\,\mathrm du ,

    in closed form from :math:`\int\varphi = \Phi`, :math:`\int u\varphi = -\varphi`,
    :math:`\int\Phi\varphi = \Phi^2/2` and
    :math:`\int u\,\Phi\varphi = -\varphi\Phi + \Phi(\sqrt2\,u)/(2\sqrt\pi)`.
    Only the piece holding :math:`u^*` needs a per-observation special
    function; the others use per-level integrals, so the cost is
    :math:`O(nL)` arithmetic. For a Gaussian stored as quantiles this equals
    :func:`crps_normal` to rounding (tested to 1e-12 relative).

    Parameters
    ----------
    y : ndarray, shape (n,)
    q : ndarray, shape (n, L)
        Non-decreasing quantiles at ``levels``.
    levels : ndarray, shape (L,)
    chunk_size : int, default 4096
        Rows processed at once; memory is O(chunk_size × L).

    Returns
    -------
    ndarray, shape (n,)

    References
    ----------
    Gneiting, T., Raftery, A. E. (2007). Strictly proper scoring rules,
    prediction, and estimation. JASA 102(477), eq. (21) and Section 4.2.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.metrics import crps_normal, crps_quantile
    >>> pred = calibprob.normal([0.0, 1.0], [1.0, 2.0])
    >>> y = np.array([0.3, -1.0])
    >>> exact = crps_normal(y, np.array([0.0, 1.0]), np.array([1.0, 2.0]))
    >>> bool(np.allclose(crps_quantile(y, pred["quantile"].values, pred["level"].values), exact))
    True
    """
    y = np.asarray(y, float)
    q = np.asarray(q, float)
    levels = np.asarray(levels, float)
    _, _, Phi_hi, phi_hi, i0, i1, j0, j1 = _piece_integrals(levels)
    pieces = np.arange(levels.size + 1)
    out = np.empty(y.shape[0])
    for start in range(0, y.shape[0], chunk_size):
        sl = slice(start, start + chunk_size)
        qc = q[sl] - y[sl, None]  # centred at y: y -> 0, better rounding
        a, b, _, _ = quantile_pieces(qc, levels)
        # piece holding 0, located exactly as quantile_cdf does (count of q <= y)
        k = np.count_nonzero(qc <= 0.0, axis=-1)
        rows = np.arange(qc.shape[0])
        a_k, b_k = a[rows, k], b[rows, k]
        ustar = -a_k / b_k
        # int_{u*}^{inf} Q phi: whole pieces above k, plus the part of piece k above u*
        whole = np.where(pieces[None, :] > k[:, None], a * i0 + b * i1, 0.0).sum(axis=-1)
        phi_star = np.exp(-0.5 * ustar * ustar) * _INV_SQRT_2PI
        part = a_k * (Phi_hi[k] - special.ndtr(ustar)) + b_k * (phi_star - phi_hi[k])
        # int Phi Q phi over the whole line; a row-wise sum, not a BLAS a @ j0, whose rounding
        # may depend on how many rows are in the block (the result must not depend on chunk_size)
        base = (a * j0 + b * j1).sum(axis=-1)
        out[sl] = 2.0 * (whole + part - base)
    # rounding can leave a -1e-17 for a near-degenerate law; the CRPS is >= 0
    return np.maximum(out, 0.0)


def pinball_loss(y: ArrayLike, q: ArrayLike, tau: ArrayLike) -> np.ndarray:
    r"""Pinball (quantile) loss of each quantile prediction.

    .. math::

        \rho_\tau(y, g) = \begin{cases}(1-\tau)(g - y) & y < g\\
                                       \tau\,(y - g) & \text{otherwise}\end{cases}

    (Song et al. 2019, Section 5.)

    Parameters
    ----------
    y : ndarray, shape (n,)
    q : ndarray, shape (n, T)
        Predicted quantiles :math:`g_i(\tau_t)`.
    tau : ndarray, shape (T,)

    Returns
    -------
    ndarray, shape (n, T)

    References
    ----------
    Song, H., Diethe, T., Kull, M. and Flach, P. (2019). Distribution calibration
    for regression. ICML, §5.

    Koenker, R. and Bassett, G. (1978). Regression quantiles. Econometrica 46(1).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import pinball_loss
    >>> pinball_loss(np.array([1.0]), np.array([[0.0, 2.0]]), np.array([0.1, 0.9])).round(6).tolist()
    [[0.1, 0.1]]
    """
    r = np.asarray(y, float)[:, None] - np.asarray(q, float)
    tau = np.asarray(tau, float)
    return np.maximum(tau * r, (tau - 1.0) * r)


def interval_score(y: ArrayLike, lower: ArrayLike, upper: ArrayLike, confidence_levels: ArrayLike) -> np.ndarray:
    r"""Interval score of each central interval (Gneiting & Raftery 2007, eq. 43; Winkler 1972).

    .. math::

        S_\alpha(l, u; y) = (u - l) + \frac{2}{\alpha}(l - y)\,\mathbb 1\{y < l\}
                          + \frac{2}{\alpha}(y - u)\,\mathbb 1\{y > u\},\qquad \alpha = 1 - c.

    Negatively oriented and proper for the pair of quantiles :math:`(Q(\alpha/2), Q(1-\alpha/2))`: the
    width, plus a penalty for a miss that grows with the miss and with the level. Winkler (1972) proposed
    it; Gneiting & Raftery (2007, §6.2) named it the interval score, and it is also called the Winkler
    score -- one formula under two names. An unbounded interval scores :math:`+\infty` (its width).

    Parameters
    ----------
    y : ndarray, shape (n,)
    lower, upper : ndarray, shape (n, C)
        Interval ends at the ``C`` confidence levels (columns).
    confidence_levels : ndarray, shape (C,)
        :math:`c_k` in (0, 1).

    Returns
    -------
    ndarray, shape (n, C)

    References
    ----------
    Gneiting, T. and Raftery, A. E. (2007). Strictly proper scoring rules, prediction, and
    estimation. JASA 102(477), §6.2, eq. (43).

    Winkler, R. L. (1972). A decision-theoretic approach to interval estimation. JASA 67(337).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import interval_score
    >>> interval_score(np.array([0.0, 3.0]), np.array([[-1.0], [-1.0]]), np.array([[1.0], [1.0]]), [0.8])
    array([[ 2.],
           [22.]])
    """
    yv = np.asarray(y, float)[:, None]
    lo, hi = np.asarray(lower, float), np.asarray(upper, float)
    penalty = 2.0 / (1.0 - np.asarray(confidence_levels, float))
    # np.where, not indicator * distance: an infinite end times a zero indicator would be NaN
    below = np.where(yv < lo, lo - yv, 0.0)
    above = np.where(yv > hi, yv - hi, 0.0)
    return (hi - lo) + penalty * (below + above)


def mean_squared_error(y: ArrayLike, point: ArrayLike) -> float:
    r"""Mean squared error of point predictions, :math:`\frac1n\sum_i (y_i - \hat y_i)^2`.

    Parameters
    ----------
    y : ndarray, shape (n,)
        Observed values.
    point : ndarray, shape (n,)
        Point predictions :math:`\hat y_i`.

    Returns
    -------
    float

    References
    ----------
    Song, H., Diethe, T., Kull, M. and Flach, P. (2019). Distribution calibration
    for regression. ICML, Table 1 (MSE).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import mean_squared_error
    >>> mean_squared_error(np.array([0.0, 2.0]), np.array([1.0, 1.0]))
    1.0
    """
    d = np.asarray(y, float) - np.asarray(point, float)
    return float(np.mean(d * d))
