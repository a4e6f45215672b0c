r"""Sharp calibrated Gaussian processes (Capone, Hirche & Pleiss 2023).

The base GP (hyperparameters :math:`\theta^R`, fitted on the training data)
keeps its posterior mean :math:`\mu(\theta^R, x)`; its posterior standard
deviation is replaced, separately for every quantile level :math:`\delta`, by
:math:`\beta_\delta\,\sigma(\theta_\delta, x)`: the posterior standard
deviation of the *same* training data under new *calibration
hyperparameters* :math:`\theta_\delta`, times a scale :math:`\beta_\delta`.

Single level (paper §5.1)
-------------------------
With calibration residuals :math:`r_i = y_i - \mu(\theta^R, x_i)`,
:math:`i = 1..N`, and z-scores :math:`z_i(\theta) = r_i / \sigma(\theta, x_i)`,
:math:`\beta_\delta` is the empirical quantile of the z-scores with the
:math:`N + 1` convention, eq. (6),

.. math::

    \beta_\delta(\theta) = q_{\mathrm{lin}}(\delta, z(\theta)) =
    z_{(l)} + (\delta(N+1) - l)\,(z_{(l+1)} - z_{(l)}),\qquad
    l = \lfloor \delta (N+1) \rfloor,

(:math:`z_{(j)}` the :math:`j`-th smallest; :math:`\delta = j/(N+1)` maps to
:math:`z_{(j)}`, so a level :math:`\delta` needs
:math:`1/(N+1) \le \delta \le N/(N+1)`), and :math:`\theta_\delta` minimises the
sharpness objective (7),

.. math::

    \min_\theta\; \sum_{i=1}^{N} \bigl[\beta_\delta(\theta)\,\sigma(\theta, x_i)\bigr]^2 ,

the squared distance of the calibrated quantile from the mean. ``calibprob``
writes this as a PyMC model (:func:`build_model`): the free variable is the
log-hyperparameter vector, the objective is a ``pm.Potential``
(``-N · mean((βσ)²) / mean(r²)``, scaled by the residual variance so that the
weak ``Normal(log θ^R, prior_sd)`` prior on each free log-hyperparameter,
a second potential, means the same thing on every data scale), and the MAP is
found by L-BFGS-B on the compiled log-probability and its gradient (through
the sort of the empirical quantile). The training and calibration inputs, the
residuals, the level, the previous level's hyperparameters and the switches
are ``pm.Data``: one compiled function serves every level, restart, data set
and input dimension.

Hyperparameters are handled in "σ-increasing" log coordinates
:math:`\phi = (-\log\ell_1, \dots, -\log\ell_d, \log\sigma_f^2, \log\sigma_n^2)`:
the posterior variance grows with every entry (Assumption 4.1 of the paper:
shorter lengthscales, larger signal or noise variance ⇒ larger
:math:`\sigma`). By default the lengthscales and the signal variance are
free and the noise variance stays at the base's value (``fit_noise=True``
frees it too). Note that the objective is invariant to a common scaling of
signal and noise variance (β absorbs it): only their ratio matters.

All levels (paper §5.2, Algorithm 1, Remark 5.3)
-------------------------------------------------
For the quantiles :math:`\mu + \beta_\delta\sigma(\theta_\delta, \cdot)` not to
cross, :math:`\beta_\delta` must be non-decreasing in :math:`\delta` and
:math:`\phi_\delta` non-increasing while :math:`\beta < 0`, non-decreasing once
:math:`\beta > 0`. The sign of :math:`\beta` at a level is fixed by the data
(:math:`\sigma > 0`): with :math:`j_0` negative residuals, levels
:math:`\delta \le j_0/(N+1)` have :math:`\beta \le 0` and levels
:math:`\delta \ge (j_0+1)/(N+1)` have :math:`\beta > 0`. Levels are therefore
solved in two passes, each *from the tail toward the median*: the outermost
level of a pass freely (with restarts), every further one warm-started from
and constrained by its outer neighbour through the substitution of
Remark 5.3, :math:`\phi_{\text{next}} = \phi_{\text{prev}} - \exp(\Delta)`
(free variable :math:`\Delta`, entry-wise), which makes :math:`\phi` shrink
toward the median. Equation (7) does not enforce that :math:`|\beta|` shrinks
too; when a solution violates it, :math:`\phi` is moved back along the segment
to :math:`\phi_{\text{prev}}` (where the order statistic is guaranteed to be
smaller) until it holds, and the knot is flagged ``backtracked``. Levels
strictly between :math:`j_0/(N+1)` and :math:`(j_0+1)/(N+1)` (where β changes
sign) are not fitted; the interpolant covers them.

Interpolation: :math:`\hat\beta(\delta)` and :math:`\hat\phi(\delta)` are
piecewise linear in :math:`\Phi^{-1}(\delta)` through the knots plus one
artificial knot at the zero of :math:`\hat\beta`, where :math:`\hat\phi` takes
the entry-wise minimum of its neighbours (the minimum the paper asks for). The
paper interpolates linearly in :math:`\delta` but allows any monotone
interpolant (Remark 5.2, §5.2); linear in :math:`\Phi^{-1}(\delta)` is exact
for β when the z-scores are Gaussian, does not inflate the tails between
sparse knots, and is the interpolation rule of the predictive contract. By
default the knots are ``n_levels`` ranks :math:`j/(N+1)` spread evenly in
:math:`\Phi^{-1}` (:func:`knot_levels`). Beyond the outermost knots
:math:`\hat\phi` is held constant and :math:`\hat\beta` continues with the
slope of the outer segment (the Gaussian tail rule of
:mod:`calibprob.predictive`), so the quantile function is defined, finite and
non-crossing for every :math:`\delta \in (0, 1)`.

Guarantee (Theorem 5.4)
-----------------------
With knots at :math:`\delta_j = j/(N+1)`, the held-out probability
:math:`P(y \le \mu(x) + \hat\beta(\delta)\sigma(\hat\theta(\delta), x))` lies
in :math:`[\delta - 1/(N+1), \delta + 1/(N+1)]` for every :math:`\delta` —
*if* the score function did not depend on the calibration data. The paper's
variant chooses :math:`\theta_\delta` on the same calibration points that set
:math:`\beta_\delta`, which can over-fit a small calibration set.

Variants
--------
``variant="full"``
    The paper's method as above.
``variant="scaled"``
    The cheap alternative of the paper's §6: :math:`\theta_\delta` is the base's
    :math:`\theta^R` with every lengthscale divided by one factor
    :math:`s_\delta` (:math:`\phi = \phi^R + \log s_\delta` on the
    lengthscale entries), found by a bounded line search per level (NumPy, no
    compiled graph), with the same passes and monotonicity constraints.
``variant="cross-fitted"``
    Beyond the paper: the calibration set is split at random;
    :math:`\hat\theta(\cdot)` is fitted by the full method on a fraction
    ``fit_fraction`` of it, and :math:`\beta_\delta` is the :math:`q_{\mathrm{lin}}`
    of the z-scores of the *other* points only. The score function then does
    not depend on the points that set :math:`\beta`, and each knot
    :math:`\delta_j = j/(N_B+1)` has exact split-conformal coverage
    :math:`P(y \le Q(\delta_j)) = \delta_j` (continuous data). Should the
    recomputed β not be monotone, it is widened outward from the median
    (a running maximum above, minimum below: conservative), as is
    :math:`\phi` where its sign pattern breaks.

Large data (paper §6): ``n_train_subset`` fits :math:`\theta_\delta` with the
posterior conditioned on a random subset of the training data (O(n³) per
evaluation on the subset only), then recomputes :math:`\beta_\delta` with the
posterior on *all* training data (with the same monotone repair), which keeps
the calibration guarantee. With a
:class:`calibprob.gp.SparseGaussianProcessRegressor` base the same graph is
built on its VFE predictive variance (inducing inputs fixed).

References
----------
Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
processes. NeurIPS 36. §5 (eq. 5–7, Algorithm 1, Remark 5.3, Theorem 5.4),
§6 (scaled hyperparameters, subsets, sparse GPs), appendix eq. (18) (UCB).
Marx, C., Zhao, S., Neiswanger, W. and Ermon, S. (2022). Modular conformal
calibration. ICML (Theorem 1, the N + 1 convention).
Titsias, M. (2009). Variational learning of inducing variables in sparse
Gaussian processes. AISTATS.
"""

from __future__ import annotations

import threading
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import xarray as xr
from scipy import optimize, special

from calibprob._base import BaseEstimator, check_is_fitted, check_not_predictive
from calibprob._pytensor import GraphCache, limit_blas_threads
from calibprob._ranks import RANK_TOL as _RANK_TOL
from calibprob._ranks import knot_levels, levels_in_range, min_calibration_points
from calibprob._validation import (
    check_array,
    check_choice,
    check_int,
    check_levels,
    check_same_length,
)
from calibprob.predictive import DEFAULT_LEVELS, from_quantiles

__all__ = [
    # NumPy layer
    "q_lin",
    "knot_levels",
    "required_calibration_points",
    "monotone_knots",
    "interpolate_knots",
    # PyMC model
    "build_model",
    # estimator and helpers
    "SharpCalibratedGP",
    "sharp_gp_ucb",
    "VARIANTS",
]

#: The variants of :class:`SharpCalibratedGP`.
VARIANTS = ("full", "scaled", "cross-fitted")

# δ(N+1) computed in floating point: 0.07 * 100 must count as rank 7
# L-BFGS-B receives this when the covariance is not positive definite (NaN)
_PENALTY = 1e25
# box of the free log-hyperparameters around the base's (factor e^7 ≈ 1100)
_BOX = 7.0
# box of the log-decrement Δ of Remark 5.3 (exp(-15) ≈ 3e-7: "no change")
_DELTA_BOX = (-15.0, 3.0)
# L-BFGS-B relative reduction tolerance: the objective is a sum over N points and
# has plateaus (flat σ at long lengthscales); 1e-7 stops there without changing
# the solution measurably (tested on the toy of tests/test_sharp_gp.py)
_FTOL = 1e-7
# backtracking fractions toward the outer neighbour when |β| would grow inward
_BACKTRACK = (0.5, 0.25, 0.125, 0.0)


# ===========================================================================
# NumPy layer
# ===========================================================================


def q_lin(levels, scores) -> np.ndarray:
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


#: Smallest calibration set covering every level (:func:`calibprob._ranks.min_calibration_points`).
required_calibration_points = min_calibration_points


def monotone_knots(levels, beta, phi):
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


def interpolate_knots(nodes_level, nodes_beta, nodes_phi, levels):
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


# ===========================================================================
# σ-increasing log coordinates
# ===========================================================================


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


# ===========================================================================
# The PyMC model of one level (compiled once per configuration)
# ===========================================================================


@dataclass(frozen=True)
class _GraphKey:
    kind: str  # "exact" or "vfe"
    kernel: str
    p: int
    mode: object


def _placeholder(kind: str) -> dict:
    data = {
        "X_train": np.zeros((3, 1)) + np.arange(3)[:, None],
        "X_cal": np.zeros((2, 1)) + np.arange(2)[:, None] + 0.5,
        "residual": np.array([-1.0, 1.0]),
        "level": np.asarray(0.5),
        "phi_ref": np.zeros(3),
        "anchor": np.zeros(3),
        "free": np.array([1.0, 1.0, 0.0]),
        "constrained": np.asarray(0.0),
        "include_noise": np.asarray(1.0),
        "noise_tied": np.asarray(0.0),
        "constant_mean": np.asarray(0.0),
        "prior_sd": np.asarray(3.0),
    }
    if kind == "vfe":
        data["Z"] = np.zeros((2, 1)) + np.arange(2)[:, None]
        data["jitter"] = np.asarray(1e-6)
    return data


def _dg_dr2(kernel: str, p: int, r2: np.ndarray, g: np.ndarray) -> np.ndarray:
    r"""Derivative of the unit-variance kernel profile :math:`g(r^2)` with respect to :math:`r^2`.

    The GP fit's own (:func:`calibprob.gp._objective.kernel_profile_derivative`), shared so
    that the sharp GP's analytic pullback and the marginal-likelihood gradient are one code.
    """
    from calibprob.gp._objective import kernel_profile_derivative

    return kernel_profile_derivative(kernel, p, r2, g)


def _weighted_sqdiff(M: np.ndarray, X: np.ndarray, Z: np.ndarray) -> np.ndarray:
    r""":math:`\sum_{ij} M_{ij} (X_{ik} - Z_{jk})^2` for every feature k, in O(n m d).

    Shared with the GP fit (:func:`calibprob.gp._objective.weighted_sqdiff`).
    """
    from calibprob.gp._objective import weighted_sqdiff

    return weighted_sqdiff(M, X, Z)


class _PosteriorVariance:
    """Namespace for the exact-GP posterior-variance Op pair (built lazily: PyTensor import)."""

    ops: dict = {}

    @classmethod
    def get(cls, kernel: str, p: int):
        key = (kernel, p)
        if key not in cls.ops:
            cls.ops[key] = _make_posterior_variance_op(kernel, p)
        return cls.ops[key]


def _make_posterior_variance_op(kernel: str, p: int):
    r"""PyTensor Op :math:`(X, X_*, \ell, \sigma_f^2, \sigma_n^2, c) \mapsto \sigma^2_{\text{latent}}(X_*)`.

    Forward (NumPy/SciPy): :math:`K = k(X, X) + \sigma_n^2 I`, :math:`P = K^{-1}K_*`,
    :math:`b = K^{-1}1`, :math:`s = 1^\top b`, :math:`h = 1 - 1^\top P`,

    .. math::

        v_i = \sigma_f^2 - K_{*i}^\top P_i + c\, h_i^2 / s

    (``c`` = 1 adds the variance of the GLS constant mean). The pullback is
    analytic: with cotangent :math:`\bar v`, :math:`w = 2\bar v h / s`,

    .. math::

        \bar K_* = -2 P\,\mathrm{diag}(\bar v) - c\, b w^\top,\qquad
        \bar K = P\,\mathrm{diag}(\bar v) P^\top
               + c\,\bigl(b (P w)^\top + \textstyle\sum_i \bar v_i h_i^2 / s^2\; b b^\top\bigr),

    then chained through the kernel's dependence on :math:`\ell`, :math:`\sigma_f^2`
    and :math:`\sigma_n^2` (:func:`_dg_dr2`). One Cholesky factor per
    evaluation (forward) and none in the pullback, against three for PyTensor's
    generic ``solve`` gradient, and a graph of a handful of nodes, which is
    what matters in ``FAST_COMPILE`` mode.
    """
    from math import sqrt

    import pytensor.tensor as pt
    import scipy.linalg
    from pytensor.gradient import disconnected_type
    from pytensor.graph import Apply, Op

    from calibprob.gp import kernels

    def _from_r2(r2, var):
        # the same operations, in the same order, as kernels.squared_exponential / matern
        # (bitwise equal), from distances computed once instead of twice per matrix
        if kernel == "se":
            return var * np.exp(-0.5 * r2)
        coef = kernels.matern_coefficients(p)
        u = sqrt(2.0 * p + 1.0) * np.sqrt(np.maximum(r2, kernels._R2_FLOOR))
        poly = coef[p] * np.ones_like(u) if p == 0 else coef[p] * u + coef[p - 1]
        for j in range(p - 2, -1, -1):
            poly = poly * u + coef[j]
        return var * poly * np.exp(-u)

    def _matrices(X, Xc, ls, var):
        r2 = kernels.scaled_sqdist(X, None, ls, xp=np)
        r2s = kernels.scaled_sqdist(X, Xc, ls, xp=np)
        return r2, r2s, _from_r2(r2, var), _from_r2(r2s, var)

    class PosteriorVarianceGrad(Op):
        __props__ = ("kernel", "p")

        def __init__(self):
            self.kernel, self.p = kernel, p

        def make_node(self, X, Xc, ls, var, noise, cmean, A, gbar):
            ins = [pt.as_tensor_variable(v) for v in (X, Xc, ls, var, noise, cmean, A, gbar)]
            return Apply(self, ins, [ins[2].type(), pt.dscalar(), pt.dscalar()])

        def perform(self, node, inputs, outputs):
            X, Xc, ls, var, noise, cm, A, gb = inputs
            var, noise, cm = float(var), float(noise), float(cm)
            n, N = X.shape[0], Xc.shape[0]
            r2, r2s, Kk, Ks = _matrices(X, Xc, ls, var)
            P, b = A[:, :N], A[:, N]
            GKs = -2.0 * P * gb[None, :]
            GK = (P * gb[None, :]) @ P.T
            if cm:
                s = float(b.sum())
                h = 1.0 - P.sum(axis=0)
                w = 2.0 * gb * h / s
                GKs -= np.outer(b, w)
                GK += np.outer(b, P @ w) + (np.sum(gb * h * h) / s**2) * np.outer(b, b)
            g_noise = float(np.trace(GK))
            g_var = float(gb.sum() + (np.sum(GK * Kk) + np.sum(GKs * Ks)) / var)
            # d k / d ell_k = var g'(r2) * (-2 (x_k - x'_k)^2 / ell_k^3)
            MK = GK * (var * _dg_dr2(kernel, p, r2, Kk / var))
            MK[np.diag_indices(n)] = 0.0  # zero self-distance: no dependence on ell
            MKs = GKs * (var * _dg_dr2(kernel, p, r2s, Ks / var))
            sq = _weighted_sqdiff(MK, X, X) + _weighted_sqdiff(MKs, X, Xc)
            outputs[0][0] = (-2.0 * sq / np.asarray(ls, float) ** 3).astype(float)
            outputs[1][0] = np.asarray(g_var)
            outputs[2][0] = np.asarray(g_noise)

    grad_op = PosteriorVarianceGrad()

    class PosteriorVariance(Op):
        __props__ = ("kernel", "p")

        def __init__(self):
            self.kernel, self.p = kernel, p

        def make_node(self, X, Xc, ls, var, noise, cmean):
            ins = [pt.as_tensor_variable(v) for v in (X, Xc, ls, var, noise, cmean)]
            return Apply(self, ins, [pt.dvector(), pt.dmatrix()])

        def perform(self, node, inputs, outputs):
            X, Xc, ls, var, noise, cm = inputs
            var, noise = float(var), float(noise)
            n, N = X.shape[0], Xc.shape[0]
            _, _, Kk, Ks = _matrices(X, Xc, ls, var)
            Kk[np.diag_indices(n)] += noise
            rhs = np.concatenate([Ks, np.ones((n, 1))], axis=1)
            try:
                fac = scipy.linalg.cho_factor(Kk, lower=True, check_finite=False)
                A = scipy.linalg.cho_solve(fac, rhs, check_finite=False)
            except (np.linalg.LinAlgError, ValueError):
                outputs[0][0] = np.full(N, np.nan)
                outputs[1][0] = np.full((n, N + 1), np.nan)
                return
            P = A[:, :N]
            v = var - np.einsum("ij,ij->j", Ks, P)
            if float(cm):
                h = 1.0 - P.sum(axis=0)
                v = v + h * h / A[:, N].sum()
            outputs[0][0] = v
            outputs[1][0] = A

        def connection_pattern(self, node):
            return [[False, False], [False, False], [True, False], [True, False], [True, False], [False, False]]

        def pullback(self, inputs, outputs, cotangents):
            X, Xc, ls, var, noise, cmean = inputs
            g_ls, g_var, g_noise = grad_op(X, Xc, ls, var, noise, cmean, outputs[1], cotangents[0])
            d = disconnected_type
            return [d(), d(), g_ls, g_var, g_noise, d()]

    return PosteriorVariance()


def build_model(kind: str = "exact", kernel: str = "se", p: int = 2, data: dict | None = None):
    r"""The PyMC model of the single-level problem (6)–(7).

    Parameters
    ----------
    kind : {"exact", "vfe"}
        Posterior variance of an exact GP or of the VFE sparse GP (inducing
        inputs ``Z``, relative jitter on :math:`K_{mm}`).
    kernel : {"se", "matern"}
    p : int
        Matérn smoothness (ignored for ``"se"``).
    data : dict, optional
        Initial values of the ``pm.Data`` containers (see below); placeholders
        by default. Shapes are symbolic, so the compiled functions accept any
        data size and input dimension.

    Returns
    -------
    pymc.Model
        ``pm.Data``: ``X_train (n, d)``, ``X_cal (N, d)``, ``residual (N,)``,
        ``level`` δ, ``phi_ref (d+2,)`` (prior centre, values of fixed
        entries), ``anchor (d+2,)`` (previous level's φ), ``free (d+2,)``
        (1 = optimised), ``constrained`` (1: Remark 5.3's
        :math:`\phi = \text{anchor} - e^{u}`; 0: :math:`\phi = u`),
        ``include_noise``, ``noise_tied`` (relative nugget when the base
        interpolates, else 0), ``constant_mean`` (add the GLS-mean variance
        term), ``prior_sd``; for VFE also ``Z (m, d)`` and ``jitter``.
        Free variable ``u`` (``pm.Flat``, shape ``(d+2,)``), deterministics
        ``log_theta`` (φ), ``sigma_cal`` (σ(θ, x_cal)), ``beta``
        (:math:`q_{\mathrm{lin}}`) and ``sharpness`` (mean of (βσ)²); potentials
        ``sharpness_objective`` and ``prior``.
    """
    import pymc as pm
    import pytensor.tensor as pt

    from calibprob.gp import kernels

    check_choice(kind, "kind", ("exact", "vfe"))
    data = _placeholder(kind) if data is None else data
    solve = pt.linalg.solve
    with pm.Model() as model:
        Xtr = pm.Data("X_train", data["X_train"])
        Xc = pm.Data("X_cal", data["X_cal"])
        r = pm.Data("residual", data["residual"])
        level = pm.Data("level", data["level"])
        phi_ref = pm.Data("phi_ref", data["phi_ref"])
        anchor = pm.Data("anchor", data["anchor"])
        free = pm.Data("free", data["free"])
        constrained = pm.Data("constrained", data["constrained"])
        inc_noise = pm.Data("include_noise", data["include_noise"])
        tied = pm.Data("noise_tied", data["noise_tied"])
        cmean = pm.Data("constant_mean", data["constant_mean"])
        prior_sd = pm.Data("prior_sd", data["prior_sd"])
        if kind == "vfe":
            Z = pm.Data("Z", data["Z"])
            jitter = pm.Data("jitter", data["jitter"])

        u = pm.Flat("u", shape=(phi_ref.shape[0],))
        phi_opt = pt.switch(constrained > 0.5, anchor - pt.exp(u), u)
        phi = pm.Deterministic("log_theta", free * phi_opt + (1.0 - free) * phi_ref)
        d = Xtr.shape[1]
        ls = pt.exp(-phi[:d])
        var = pt.exp(phi[d])
        noise = pt.switch(tied > 0, tied * var, pt.exp(phi[d + 1]))

        def k(A, B):
            return kernels.kernel(kernel, A, B, ls, var, p=p, xp=pt)

        N = Xc.shape[0]
        if kind == "exact":
            # latent posterior variance (incl. the GLS-mean term) with an analytic
            # pullback: see _make_posterior_variance_op
            op = _PosteriorVariance.get(kernel, p)
            total, _ = op(Xtr, Xc, ls, var, noise, cmean)
        else:
            m = Z.shape[0]
            Kmm = k(Z, None) + jitter * var * pt.eye(m)
            Kmn = k(Z, Xtr)
            Kms = k(Z, Xc)
            # VFE: σ² = k** − k_*ᵀ K_mm⁻¹ k_* + k_*ᵀ (K_mm + K_mn K_nm / σ_n²)⁻¹ k_*
            S = Kmm + pt.dot(Kmn, Kmn.T) / noise
            one = pt.sum(Kmn, axis=1, keepdims=True) / noise
            A1 = solve(Kmm, Kms, assume_a="pos")
            A2 = solve(S, pt.concatenate([Kms, one], axis=1), assume_a="pos")
            post = var - pt.sum(Kms * A1, axis=0) + pt.sum(Kms * A2[:, :N], axis=0)
            a1 = A2[:, N]  # S⁻¹ K_mn 1 / σ_n²
            h = 1.0 - pt.sum(Kms * a1[:, None], axis=0)
            s11 = (Xtr.shape[0] - pt.sum(one[:, 0] * a1) * noise) / noise
            total = post + cmean * h * h / s11
        total = total + inc_noise * noise
        sigma = pm.Deterministic("sigma_cal", pt.sqrt(pt.maximum(total, 1e-12 * var)))

        zs = pt.sort(r / sigma)
        t = level * (N + 1)
        low = pt.clip(pt.floor(t + _RANK_TOL), 1, N - 1).astype("int64")
        beta = pm.Deterministic("beta", zs[low - 1] + (t - low) * (zs[low] - zs[low - 1]))
        sharp = pm.Deterministic("sharpness", pt.mean((beta * sigma) ** 2))
        pm.Potential("sharpness_objective", -N * sharp / pt.mean(r**2))
        pm.Potential("prior", pt.sum(free * -0.5 * ((phi - phi_ref) / prior_sd) ** 2))
    return model


@dataclass
class _Compiled:
    """The model and one compiled function ``u -> (logp, dlogp, β, sharpness, σ_cal, φ)``."""

    key: _GraphKey
    model: object
    fn: object
    lock: threading.Lock = field(default_factory=threading.Lock)

    def set_data(self, values: dict) -> None:
        import pymc as pm

        pm.set_data(values, model=self.model)

    def __call__(self, u: np.ndarray):
        lp, g, beta, sharp, sigma, phi = self.fn(np.asarray(u, float))
        return float(lp), np.asarray(g, float), float(beta), float(sharp), np.asarray(sigma), np.asarray(phi)


_CACHE = GraphCache("calibprob.calibrators.sharp_gp")


def _compiled(key: _GraphKey) -> _Compiled:
    def build() -> _Compiled:
        import pytensor
        import pytensor.tensor as pt

        model = build_model(key.kind, key.kernel, key.p)
        u_value = model.rvs_to_values[model["u"]]
        logp = model.logp()
        grad = pt.grad(logp, u_value)
        outs = model.replace_rvs_by_values([model["beta"], model["sharpness"], model["sigma_cal"], model["log_theta"]])
        return _Compiled(key, model, pytensor.function([u_value], [logp, grad, *outs], mode=key.mode))

    return _CACHE.get(key, build)


def clear_cache() -> None:
    """Forget the compiled single-level objectives (rebuilt on next use)."""
    _CACHE.clear()


# ===========================================================================
# Fitting one path of knots (Algorithm 1)
# ===========================================================================


@dataclass
class _Knot:
    level: float
    beta: float
    phi: np.ndarray
    sharpness: float
    side: str
    converged: bool = True
    n_iter: int = 0
    n_eval: int = 0
    backtracked: bool = False
    seconds: float = 0.0
    message: str = ""


def _passes(levels: np.ndarray, residual: np.ndarray):
    """Split levels by the sign β must have; each pass ordered from its tail inward."""
    n = residual.size
    j0 = int(np.sum(residual < 0))
    t = levels * (n + 1)
    lower = levels[t <= j0 + _RANK_TOL]
    upper = levels[t >= j0 + 1 - _RANK_TOL]
    skipped = levels[(t > j0 + _RANK_TOL) & (t < j0 + 1 - _RANK_TOL)]
    return [("upper", upper[::-1]), ("lower", lower)], skipped


def _inward_ok(side: str, beta_new: float, beta_prev: float) -> bool:
    tol = 1e-10 * max(1.0, abs(beta_prev))
    return beta_new <= beta_prev + tol if side == "upper" else beta_new >= beta_prev - tol


class _FullSolver:
    """MAP of the PyMC model per level, passes from the tails inward (Algorithm 1)."""

    def __init__(self, entry: _Compiled, data: dict, phi_ref, free, *, n_restarts, maxiter, rng):
        self.entry = entry
        self.data = data
        self.phi_ref = phi_ref
        self.free = free
        self.n_restarts = n_restarts
        self.maxiter = maxiter
        self.rng = rng
        self.ftol = _FTOL

    def _minimize(self, u0, bounds):
        entry = self.entry
        n_eval = [0]

        def negative(u):
            n_eval[0] += 1
            lp, g = entry(u)[:2]
            if not (np.isfinite(lp) and np.all(np.isfinite(g))):
                return _PENALTY, np.zeros_like(u)
            return -lp, -g

        res = optimize.minimize(
            negative,
            u0,
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={"maxiter": self.maxiter, "ftol": self.ftol},
        )
        res.n_eval = n_eval[0]
        return res

    def evaluate(self, level: float, phi: np.ndarray):
        """β, sharpness and σ_cal at a given φ (unconstrained mode)."""
        self.entry.set_data({"level": np.asarray(level), "constrained": np.asarray(0.0)})
        _, _, beta, sharp, sigma, _ = self.entry(np.where(self.free > 0, phi, self.phi_ref))
        return beta, sharp, sigma

    def solve(self, level: float, side: str, prev: _Knot | None) -> _Knot:
        t0 = time.perf_counter()
        free = self.free > 0
        p = self.phi_ref.size
        if prev is None:
            # the objective has plateaus (σ flat in x at long lengthscales) and the
            # monotone passes inherit this first solution: start L-BFGS-B from the
            # best one-factor line-search solution too, and from perturbations of it
            line = _ScaledSolver(
                lambda phi: self.evaluate(level, phi)[2],
                self.data["residual"],
                self.phi_ref,
                p - 2,
            ).solve(level, side, None)
            starts = [line.phi] + ([self.phi_ref.copy()] if self.n_restarts > 1 else [])
            for _ in range(self.n_restarts - 2):
                starts.append(line.phi + free * self.rng.normal(0.0, 1.0, p))
            bounds = [
                (float(c - _BOX), float(c + _BOX)) if f else (float(c), float(c)) for c, f in zip(self.phi_ref, free)
            ]
            self.entry.set_data({"level": np.asarray(level), "constrained": np.asarray(0.0)})
        else:
            starts = [np.where(free, np.log(0.02), 0.0)]
            bounds = [_DELTA_BOX if f else (0.0, 0.0) for f in free]
            self.entry.set_data({"level": np.asarray(level), "constrained": np.asarray(1.0), "anchor": prev.phi})
        runs = [self._minimize(np.clip(s, [b[0] for b in bounds], [b[1] for b in bounds]), bounds) for s in starts]
        ok = [r for r in runs if r.fun < _PENALTY]
        if not ok:
            raise RuntimeError(
                f"the sharp-GP objective at level {level:.4g} was not finite from any start (the "
                "training covariance was never positive definite). Standardise X and y."
            )
        best = min(ok, key=lambda r: r.fun)
        _, _, beta, sharp, _, phi = self.entry(best.x)
        knot = _Knot(
            level=float(level),
            beta=beta,
            phi=phi.copy(),
            sharpness=sharp,
            side=side,
            converged=bool(best.success),
            n_iter=int(sum(r.nit for r in runs)),
            n_eval=int(sum(r.n_eval for r in runs)),
            message=str(best.message),
        )
        if prev is not None and not _inward_ok(side, beta, prev.beta):
            for frac in _BACKTRACK:
                phi_t = prev.phi + frac * (knot.phi - prev.phi)
                b_t, s_t, _ = self.evaluate(level, phi_t)
                if _inward_ok(side, b_t, prev.beta):
                    knot.phi, knot.beta, knot.sharpness = phi_t, b_t, s_t
                    knot.backtracked = True
                    break
        knot.seconds = time.perf_counter() - t0
        return knot


class _ScaledSolver:
    """Line search over one lengthscale factor per level (NumPy, no gradient)."""

    def __init__(self, sigma_fn, residual, phi_ref, d, *, grid: int = 17, bound: float = 4.0):
        self.sigma_fn = sigma_fn  # phi -> σ on the fit set
        self.r = residual
        self.phi_ref = phi_ref
        self.e = np.r_[np.ones(d), 0.0, 0.0]
        self.grid = grid
        self.bound = bound
        self.n_eval = 0

    def _phi(self, c):
        return self.phi_ref + c * self.e

    def evaluate(self, level, phi):
        sigma = self.sigma_fn(phi)
        beta = float(q_lin(level, self.r / sigma))
        return beta, float(np.mean((beta * sigma) ** 2)), sigma

    def _objective(self, level, c):
        self.n_eval += 1
        return self.evaluate(level, self._phi(c))[1]

    def solve(self, level: float, side: str, prev: _Knot | None) -> _Knot:
        t0 = time.perf_counter()
        self.n_eval = 0
        lo = -self.bound
        hi = self.bound if prev is None else float(prev.phi[0] - self.phi_ref[0])
        if hi - lo < 1e-9:
            c = hi
        else:
            cs = np.linspace(lo, hi, self.grid)
            vals = np.array([self._objective(level, c) for c in cs])
            i = int(np.argmin(vals))
            a, b = cs[max(i - 1, 0)], cs[min(i + 1, cs.size - 1)]
            res = optimize.minimize_scalar(
                lambda c: self._objective(level, c),
                bounds=(a, b),
                method="bounded",
                options={"xatol": 1e-4},
            )
            c = float(res.x) if res.fun <= vals[i] else float(cs[i])
        phi = self._phi(c)
        beta, sharp, _ = self.evaluate(level, phi)
        knot = _Knot(
            level=float(level),
            beta=beta,
            phi=phi,
            sharpness=sharp,
            side=side,
            n_eval=self.n_eval,
            n_iter=self.n_eval,
            message="line search",
        )
        if prev is not None and not _inward_ok(side, beta, prev.beta):
            for frac in _BACKTRACK:
                phi_t = prev.phi + frac * (knot.phi - prev.phi)
                b_t, s_t, _ = self.evaluate(level, phi_t)
                if _inward_ok(side, b_t, prev.beta):
                    knot.phi, knot.beta, knot.sharpness = phi_t, b_t, s_t
                    knot.backtracked = True
                    break
        knot.seconds = time.perf_counter() - t0
        return knot


def _phi_from_passes(knots, levels, passes, phi_ref) -> np.ndarray:
    """φ at ``levels`` from the fitted knots of the pass with the same sign.

    Linear in δ between a pass's knots, constant beyond them (which keeps φ
    monotone within each pass); the base's φ if that pass has no knot.
    """
    out = np.empty((levels.size, phi_ref.size))
    for side, seq in passes:
        own = sorted((k for k in knots if k.side == side), key=lambda k: k.level)
        if not own:
            other = sorted(knots, key=lambda k: k.level)
            own = [other[0] if side == "lower" else other[-1]] if other else []
        idx = np.flatnonzero(np.isin(levels, seq))
        if not own:
            out[idx] = phi_ref
            continue
        x = np.array([k.level for k in own])
        f = np.array([k.phi for k in own])
        for j in range(phi_ref.size):
            out[idx, j] = np.interp(levels[idx], x, f[:, j])
    return out


def _fit_path(solver, levels: np.ndarray, residual: np.ndarray):
    """Algorithm 1: both passes from the tails inward; knots sorted by level."""
    passes, skipped = _passes(levels, residual)
    knots = []
    for side, seq in passes:
        prev = None
        for level in seq:
            prev = solver.solve(float(level), side, prev)
            knots.append(prev)
    knots.sort(key=lambda k: k.level)
    return knots, skipped


# ===========================================================================
# The estimator
# ===========================================================================


class SharpCalibratedGP(BaseEstimator):
    r"""Sharp calibrated GP of Capone, Hirche & Pleiss (2023) on a fitted calibprob GP.

    Quantiles :math:`Q(\delta, x) = \mu(\theta^R, x) + \hat\beta(\delta)\,
    \sigma(\hat\theta(\delta), x)`, with :math:`\hat\beta, \hat\theta` fitted
    on held-out calibration data by Algorithm 1 (see the module docstring
    for the equations, the passes and the interpolation).

    A *model-aware* calibrator (:class:`calibprob.ModelAwareCalibrator`): it
    needs the GP itself, not only its predictions, because it re-evaluates
    :math:`\sigma(\theta, x)` for new hyperparameters.

    Parameters
    ----------
    estimator : GaussianProcessRegressor or SparseGaussianProcessRegressor
        A *fitted* calibprob GP (its training data condition every
        :math:`\sigma(\theta, \cdot)`; its mean is kept) — always used as
        fitted, like ``prefit=True`` in :mod:`calibprob.conformal`.
    base : deprecated
        The former name of ``estimator``; warns ``FutureWarning``.
    variant : {"full", "scaled", "cross-fitted"}, default "full"
        The paper's method; the one-factor line search of its §6; or θ fitted
        on one part of the calibration data and β on the rest.
    levels : array_like or "all", optional
        Knot levels in (0, 1), strictly increasing. ``"all"``: every
        :math:`j/(N+1)` (Theorem 5.4). Default: ``n_levels`` knots
        :math:`j/(N+1)` spread evenly from :math:`j = 1` to :math:`N`.
    n_levels : int, default 21
        Number of knots when ``levels`` is None.
    include_noise : bool, default True
        Use the predictive standard deviation of a new observation (eq. 3b,
        with the noise variance); ``False`` the latent function's (the
        authors' code).
    fit_noise : bool, default False
        Also calibrate the noise variance (default: keep the base's).
    n_restarts : int, default 2
        L-BFGS-B starts for the outermost level of each pass: the best
        one-factor line-search solution (the ``"scaled"`` variant's), the
        base's θ, and ``n_restarts - 2`` seeded perturbations (one unit in
        log space) of the first.
    prior_sd : float, default 3.0
        Standard deviation of the weak ``Normal(log θ^R, prior_sd)`` prior on
        each free log-hyperparameter.
    fit_fraction : float, default 0.5
        ``variant="cross-fitted"``: share of the calibration points used to
        fit θ (the rest sets β).
    n_train_subset : int, optional
        Fit θ with the posterior conditioned on this many randomly chosen
        training points (then β with all of them; paper §6). Default: all
        points for an exact base; 500 for a sparse base (exact GP on the
        subset) — pass a value >= its training size to fit with the VFE
        posterior on all training data instead.
    maxiter : int, default 100
        L-BFGS-B iterations per start.
    blas_threads : int or None, default 1
        BLAS threads during ``fit`` (``threadpoolctl``). One thread is much
        faster for the moderate matrices here on a shared machine; ``None``
        leaves the setting alone.
    compile_mode : str, pytensor Mode or None
        Mode of the compiled objective; ``None`` uses
        :func:`calibprob.gp.get_compile_mode` (``"FAST_COMPILE"`` by default:
        compiles in seconds; ``"NUMBA"`` runs ~2-3× faster per evaluation
        after a cold JIT of about a minute).
    random_state : int, numpy Generator or None
        Restarts, the cross-fitting split and the training subset.

    Attributes
    ----------
    knot_level_, knot_beta_ : ndarray, shape (K,)
        Fitted knots (after the monotone repair) and their β.
    knot_lengthscale_ : ndarray, shape (K, d)
    knot_variance_, knot_noise_ : ndarray, shape (K,)
    nodes_level_, nodes_beta_, nodes_log_theta_ : ndarray
        Interpolation nodes (the knots plus the artificial knot at β̂ = 0),
        ``nodes_log_theta_`` in σ-increasing coordinates
        :math:`(-\log\ell, \log\sigma_f^2, \log\sigma_n^2)`.
    diagnostics_ : xarray.Dataset
        The ``calibration`` group of :meth:`predict`.
    n_calibration_ : int
        Calibration points that set β (``N_B`` when cross-fitted).
    fit_seconds_ : float

    Notes
    -----
    *Over-fitting.* With the paper's variant θ_δ and β_δ are chosen on the
    same points, and at the outer levels β_δ is an extreme order statistic:
    with many free hyperparameters (13 lengthscales on Boston) and ~100
    calibration points the optimiser shapes σ(θ, ·) around the few extreme
    residuals. Measured on four 0.6/0.2/0.2 Boston splits (101 calibration
    points, base GP by maximum likelihood): calibration-set coverage exact at
    every knot, but held-out 95% coverage 0.86 (width 1.08) against 0.94
    (width 1.23) for the one-factor ``"scaled"`` variant; ``prior_sd=0.03``
    restores 0.93 (width 1.24), i.e. the extra sharpness was the over-fit. The
    ``"cross-fitted"`` variant has exact coverage at its knots by
    construction. On a 1-D toy with a gap in the training data (paper's
    Fig. 2; ``tests/test_sharp_gp.py``) the full variant is calibrated and its
    99% interval 40% narrower than RK's.

    *Cost.* One objective-and-gradient evaluation costs one Cholesky factor of
    the training covariance (analytic pullback, no factor in the gradient);
    about 5 ms for 304 training and 101 calibration points in 13 dimensions
    (``FAST_COMPILE``). A fit of 21 levels on Boston takes ~7 s, each further
    level ~0.2 s (``benchmarks/bench_sharp_gp.py``).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.gp import GaussianProcessRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, size=(150, 1)); y = np.sin(X[:, 0]) + 0.2 * rng.normal(size=150)
    >>> gp = GaussianProcessRegressor(random_state=0).fit(X[:50], y[:50])
    >>> sharp = SharpCalibratedGP(estimator=gp, n_levels=5).fit(X[50:], y[50:])
    >>> pred = sharp.predict(X[:3])               # the predictive Dataset
    >>> pred.sizes["level"]
    99
    >>> {"beta", "coverage", "objective"} <= set(sharp.diagnostics_.data_vars)  # per knot
    True

    References
    ----------
    Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
    processes. NeurIPS 36.
    """

    def __init__(
        self,
        *,
        estimator=None,
        variant: str = "full",
        levels=None,
        n_levels: int = 21,
        include_noise: bool = True,
        fit_noise: bool = False,
        n_restarts: int = 2,
        prior_sd: float = 3.0,
        fit_fraction: float = 0.5,
        n_train_subset: int | None = None,
        maxiter: int = 100,
        blas_threads: int | None = 1,
        compile_mode=None,
        random_state=None,
        base=None,
    ):
        self.estimator = estimator
        self.base = base
        self.variant = variant
        self.levels = levels
        self.n_levels = n_levels
        self.include_noise = include_noise
        self.fit_noise = fit_noise
        self.n_restarts = n_restarts
        self.prior_sd = prior_sd
        self.fit_fraction = fit_fraction
        self.n_train_subset = n_train_subset
        self.maxiter = maxiter
        self.blas_threads = blas_threads
        self.compile_mode = compile_mode
        self.random_state = random_state

    # -- validation --------------------------------------------------------------
    def _check_base(self):
        import xarray as _xr

        base = self.estimator
        if self.base is not None:
            warnings.warn(
                "SharpCalibratedGP(base=...) is deprecated and will be removed in the next release; "
                "write SharpCalibratedGP(estimator=...), the name every model-aware calibrator uses.",
                FutureWarning,
                stacklevel=3,
            )
            if base is None:
                base = self.base
        if base is None:
            raise ValueError(
                "estimator must be a fitted calibprob GaussianProcessRegressor (or "
                "SparseGaussianProcessRegressor); got None. Pass estimator=gp after gp.fit(X_train, y_train)."
            )
        if isinstance(base, _xr.Dataset):
            raise TypeError(
                "estimator is a predictive Dataset, but SharpCalibratedGP is model-aware: it needs the fitted "
                "GP itself (it re-evaluates sigma(theta, x) for new theta). Pass estimator=gp; to calibrate a "
                "predictive Dataset, use a distribution post-processor (IsotonicRecalibrator, "
                "GPBetaCalibrator, ConformalPredictiveSystem)."
            )
        if not all(hasattr(base, a) for a in ("predict_mean_std", "kernel_matrix", "kernel")):
            raise TypeError(
                "estimator must be a calibprob GaussianProcessRegressor or SparseGaussianProcessRegressor "
                f"(the sharp GP needs σ(θ, x) for new θ); got {type(base).__name__}."
            )
        check_is_fitted(base, "theta_", method="fit")
        return base

    def _check_params(self):
        check_choice(self.variant, "variant", VARIANTS)
        for name in ("include_noise", "fit_noise"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False; got {getattr(self, name)!r}.")
        check_int(self.n_levels, "n_levels", minimum=2)
        check_int(self.n_restarts, "n_restarts", minimum=1)
        check_int(self.maxiter, "maxiter", minimum=1)
        if not (np.isfinite(self.prior_sd) and self.prior_sd > 0):
            raise ValueError(f"prior_sd must be > 0 (log-space standard deviation); got {self.prior_sd!r}.")
        if not 0 < self.fit_fraction < 1:
            raise ValueError(
                f"fit_fraction must be in (0, 1) (share of calibration points that fit θ); got {self.fit_fraction!r}."
            )
        if self.n_train_subset is not None:
            check_int(self.n_train_subset, "n_train_subset", minimum=2)
        if self.blas_threads is not None:
            check_int(self.blas_threads, "blas_threads", minimum=1)

    def _knot_levels(self, n_beta: int) -> np.ndarray:
        if isinstance(self.levels, str):
            check_choice(self.levels, "levels", ("all",))
            return knot_levels(n_beta)
        if self.levels is None:
            return knot_levels(n_beta, self.n_levels)
        lv = check_levels(self.levels, "levels")
        if not levels_in_range(lv, n_beta).all():
            need = required_calibration_points(lv)
            extra = (
                f" (the cross-fitted variant sets β with {n_beta} of them; ask for fit_fraction "
                "smaller or more calibration data)"
                if self.variant == "cross-fitted"
                else ""
            )
            raise ValueError(
                f"too few calibration points for levels in [{lv.min():.4g}, {lv.max():.4g}]: a level "
                f"δ needs 1/(N+1) <= δ <= N/(N+1), so these levels need N >= {need} calibration "
                f"points; got N = {n_beta}{extra}. Hold out more calibration data or choose "
                "levels closer to 0.5."
            )
        return lv

    # -- fit -----------------------------------------------------------------------
    def fit(self, X_cal, y_cal):
        """Fit β_δ and θ_δ on calibration data (Algorithm 1).

        Parameters
        ----------
        X_cal : array_like, shape (N, d)
            Calibration inputs, disjoint from the base's training data.
        y_cal : array_like, shape (N,)

        Returns
        -------
        self
        """
        self._check_params()
        base = self._check_base()
        check_not_predictive(X_cal, self, "X_cal")
        X = check_array(X_cal, "X_cal", ndim=2)
        y = check_array(y_cal, "y_cal", ndim=1)
        check_same_length(X_cal=X, y_cal=y)
        d = base.n_features_in_
        if X.shape[1] != d:
            raise ValueError(
                f"X_cal has {X.shape[1]} features but the base GP was fitted with {d}. Pass the "
                "same columns as in base.fit."
            )
        rng = np.random.default_rng(self.random_state)
        n = y.size
        if self.variant == "cross-fitted":
            n_fit = int(round(self.fit_fraction * n))
            if n_fit < 2 or n - n_fit < 2:
                raise ValueError(
                    f"the cross-fitted variant needs at least 2 calibration points in each part; "
                    f"got N = {n} with fit_fraction = {self.fit_fraction}."
                )
            perm = rng.permutation(n)
            idx_fit, idx_beta = np.sort(perm[:n_fit]), np.sort(perm[n_fit:])
        else:
            if n < 2:
                raise ValueError(f"fit needs at least 2 calibration points; got {n}.")
            idx_fit = idx_beta = np.arange(n)
        levels = self._knot_levels(idx_beta.size)

        t_start = time.perf_counter()
        with limit_blas_threads(self.blas_threads):
            self._fit(base, X, y, idx_fit, idx_beta, levels, rng)
        self.fit_seconds_ = time.perf_counter() - t_start
        self.diagnostics_.attrs["fit_seconds"] = float(self.fit_seconds_)
        return self

    def _fit(self, base, X, y, idx_fit, idx_beta, levels, rng):
        d = base.n_features_in_
        mu, _ = base.predict_mean_std(X)
        r = y - mu
        theta_R = dict(base.theta_)
        phi_ref = _phi_from_theta(theta_R, d)
        tied = 0.0 if getattr(base, "noise", True) else float(base.nugget)
        free = np.r_[np.ones(d + 1), float(self.fit_noise and tied == 0.0)]
        sparse = hasattr(base, "inducing_points_")

        def sigma_all(phi, Xs):
            return base.predict_mean_std(Xs, theta=_theta_from_phi(phi, d), include_noise=self.include_noise)[1]

        X_fit, r_fit = X[idx_fit], r[idx_fit]
        subset = self.n_train_subset if self.n_train_subset is not None else (500 if sparse else None)
        n_train = base.X_train_.shape[0]
        use_subset = subset is not None and subset < n_train
        fit_levels = levels
        if self.variant == "cross-fitted":
            # θ is fitted on the other part at the same levels, clipped into its range
            nf = idx_fit.size
            fit_levels = np.unique(np.clip(levels, 1.0 / (nf + 1), nf / (nf + 1.0)))

        if self.variant == "scaled":
            solver = _ScaledSolver(lambda phi: sigma_all(phi, X_fit), r_fit, phi_ref, d)
        else:
            X_tr = base.X_train_
            kind = "exact"
            if use_subset:
                X_tr = X_tr[np.sort(rng.choice(n_train, size=subset, replace=False))]
            elif sparse:
                kind = "vfe"
            mode = self.compile_mode
            if mode is None:
                from calibprob.gp import get_compile_mode

                mode = get_compile_mode()
            key = _GraphKey(
                kind,
                base.kernel,
                int(base.p) if base.kernel == "matern" else 0,
                mode if isinstance(mode, (str, type(None))) else id(mode),
            )
            entry = _compiled(key)
            data = {
                "X_train": X_tr,
                "X_cal": X_fit,
                "residual": r_fit,
                "level": np.asarray(0.5),
                "phi_ref": phi_ref,
                "anchor": phi_ref,
                "free": free,
                "constrained": np.asarray(0.0),
                "include_noise": np.asarray(float(self.include_noise)),
                "noise_tied": np.asarray(tied),
                "constant_mean": np.asarray(float(getattr(base, "mean", "zero") == "constant")),
                "prior_sd": np.asarray(float(self.prior_sd)),
            }
            if kind == "vfe":
                data["Z"] = base.inducing_points_
                data["jitter"] = np.asarray(float(base.jitter))
            solver = _FullSolver(
                entry, data, phi_ref, free, n_restarts=int(self.n_restarts), maxiter=int(self.maxiter), rng=rng
            )
            entry.lock.acquire()
            entry.set_data(data)
        try:
            knots, skipped = _fit_path(solver, fit_levels, r_fit)
        finally:
            if self.variant != "scaled":
                entry.set_data(_placeholder(entry.key.kind))  # drop references to the data
                entry.lock.release()
        if not knots:
            raise ValueError(
                f"no level could be fitted: every requested level lies where β changes sign "
                f"({skipped}). Request levels further from the median."
            )

        # β on the points that set it, with σ conditioned on all training data
        fit_nodes = np.array([k.level for k in knots])
        fit_phi = np.array([k.phi for k in knots])
        if self.variant == "cross-fitted":
            X_b, r_b = X[idx_beta], r[idx_beta]
            # β's sign at a knot is fixed by the β-part's residual signs: take φ from
            # the θ-part's pass of that sign, so φ keeps the pattern of Algorithm 1
            passes, skipped = _passes(levels, r_b)
            kl = np.sort(np.concatenate([seq for _, seq in passes]))
            knot_phi = _phi_from_passes(knots, kl, passes, phi_ref)
        else:
            kl, knot_phi = fit_nodes, fit_phi
            X_b, r_b = X, r
        sig_b = np.array([sigma_all(ph, X_b) for ph in knot_phi])  # (K, N_B)
        beta = np.array([q_lin(lv, r_b / s) for lv, s in zip(kl, sig_b)])
        nodes_lv, nodes_b, nodes_phi, repaired = monotone_knots(kl, beta, knot_phi)
        keep = np.isin(nodes_lv, kl)
        beta_final, phi_final = nodes_b[keep], nodes_phi[keep]
        sig_final = np.array([sigma_all(ph, X_b) for ph in phi_final])
        coverage = np.mean(r_b[None, :] <= beta_final[:, None] * sig_final, axis=1)

        self.nodes_level_, self.nodes_beta_, self.nodes_log_theta_ = nodes_lv, nodes_b, nodes_phi
        self.knot_level_, self.knot_beta_ = kl, beta_final
        th = [_theta_from_phi(ph, d) for ph in phi_final]
        self.knot_lengthscale_ = np.array([t["lengthscale"] for t in th])
        self.knot_variance_ = np.array([t["variance"] for t in th])
        # an interpolating base ties the noise to the variance (nugget · σ_f²)
        self.knot_noise_ = tied * self.knot_variance_ if tied else np.array([t["noise"] for t in th])
        self.n_calibration_ = int(r_b.size)
        self.n_features_in_ = d
        self._mu_scale = float(np.sqrt(np.mean(r**2)))
        self.diagnostics_ = self._diagnostics(
            knots,
            kl,
            beta_final,
            phi_final,
            coverage,
            repaired,
            skipped,
            r_b,
            sig_final,
            theta_R,
            idx_fit.size,
            use_subset,
        )

    def _diagnostics(
        self, knots, kl, beta, phi, coverage, repaired, skipped, r_b, sig, theta_R, n_fit, use_subset
    ) -> xr.Dataset:
        d = self.n_features_in_
        cross = self.variant == "cross-fitted"
        fitted = np.array([k.level for k in knots])
        # cross-fitted: θ was fitted at levels clipped to the other part's range;
        # report the fit of the nearest fitted level
        nearest = [knots[int(np.argmin(np.abs(fitted - lv)))] for lv in kl]

        def col(attr, _fill=None):
            return np.array([getattr(k, attr) for k in nearest])

        sharp = np.mean((beta[:, None] * sig) ** 2, axis=1)
        nodes_th = np.exp(-self.nodes_log_theta_[:, :d])
        ds = xr.Dataset(
            {
                "beta": ("knot", beta, {"long_name": "calibration scale β_δ (q_lin of z-scores, eq. 6)"}),
                "lengthscale": (
                    ("knot", "feature"),
                    self.knot_lengthscale_,
                    {"long_name": "calibration lengthscales of θ_δ"},
                ),
                "variance": ("knot", self.knot_variance_, {"long_name": "calibration signal variance"}),
                "noise": ("knot", self.knot_noise_, {"long_name": "noise variance used in σ(θ_δ, x)"}),
                "objective": (
                    "knot",
                    sharp,
                    {"long_name": "sharpness: mean over calibration points of (β_δ σ(θ_δ, x))², eq. (7)/N"},
                ),
                "fit_objective": (
                    "knot",
                    col("sharpness", np.nan),
                    {"long_name": "sharpness on the points that fitted θ (cross-fitted: the other part)"},
                ),
                "coverage": (
                    "knot",
                    coverage,
                    {"long_name": "fraction of calibration residuals <= β_δ σ(θ_δ, x) (target ≈ δ(N+1)/N)"},
                ),
                "converged": (
                    "knot",
                    col("converged", True).astype(bool),
                    {"long_name": "L-BFGS-B (or line search) reported success"},
                ),
                "message": ("knot", col("message", "").astype(str)),
                "n_iter": ("knot", col("n_iter", 0).astype(int)),
                "n_eval": (
                    "knot",
                    col("n_eval", 0).astype(int),
                    {"long_name": "objective+gradient evaluations, all starts"},
                ),
                "backtracked": (
                    "knot",
                    col("backtracked", False).astype(bool),
                    {"long_name": "φ moved back toward the outer level to keep |β| shrinking inward"},
                ),
                "repaired": (
                    "knot",
                    repaired.astype(int),
                    {"long_name": "monotone repair after recomputing β: 1 β widened, 2 φ raised, 3 both"},
                ),
                "side": ("knot", col("side", "").astype(str)),
                "seconds": ("knot", col("seconds", 0.0).astype(float)),
                "node_beta": ("node", self.nodes_beta_),
                "node_lengthscale": (("node", "feature"), nodes_th),
                "node_log_theta": (
                    ("node", "param"),
                    self.nodes_log_theta_,
                    {"long_name": "interpolation nodes in σ-increasing coordinates (-log ℓ, log σ_f², log σ_n²)"},
                ),
                "base_lengthscale": ("feature", np.broadcast_to(theta_R["lengthscale"], (d,)).astype(float)),
            },
            coords={
                "knot": np.arange(kl.size),
                "level": ("knot", kl),
                "node": np.arange(self.nodes_level_.size),
                "node_level": ("node", self.nodes_level_),
                "feature": np.arange(d),
                "param": [f"neg_log_lengthscale[{j}]" for j in range(d)] + ["log_variance", "log_noise"],
            },
        )
        ds.attrs.update(
            {
                "method": f"sharp-gp/{self.variant}",
                "variant": self.variant,
                "n_calibration": int(r_b.size),
                "n_fit": int(n_fit),
                "cross_fitted": int(cross),
                "include_noise": int(self.include_noise),
                "fit_noise": int(self.fit_noise),
                "train_subset": int(use_subset),
                "base_variance": float(theta_R["variance"]),
                "base_noise": float(theta_R["noise"]),
                "skipped_levels": ", ".join(f"{v:.6g}" for v in skipped),
                "paper": "Capone, Hirche & Pleiss (2023), Sharp calibrated Gaussian processes, NeurIPS",
            }
        )
        return ds

    # -- the quantile function ------------------------------------------------------
    def calibration_beta(self, levels) -> np.ndarray:
        r""":math:`\hat\beta(\delta)` at ``levels`` (shape (L,))."""
        check_is_fitted(self, "nodes_level_", method="fit")
        lv = check_levels(levels, "levels", increasing=False)
        return interpolate_knots(self.nodes_level_, self.nodes_beta_, self.nodes_log_theta_, lv)[0]

    def calibration_theta(self, levels) -> dict:
        r""":math:`\hat\theta(\delta)` at ``levels``: dict of ``lengthscale (L, d)``, ``variance (L,)``, ``noise (L,)``."""
        check_is_fitted(self, "nodes_level_", method="fit")
        lv = check_levels(levels, "levels", increasing=False)
        phi = interpolate_knots(self.nodes_level_, self.nodes_beta_, self.nodes_log_theta_, lv)[1]
        d = self.n_features_in_
        return {"lengthscale": np.exp(-phi[:, :d]), "variance": np.exp(phi[:, d]), "noise": np.exp(phi[:, d + 1])}

    def quantile(self, X, levels) -> np.ndarray:
        r"""Calibrated quantiles :math:`\mu(x) + \hat\beta(\delta)\sigma(\hat\theta(\delta), x)`.

        Parameters
        ----------
        X : array_like, shape (n, d)
        levels : float or array_like, shape (L,)
            Any levels in (0, 1) (beyond the outer knots: see the module docstring).

        Returns
        -------
        ndarray, shape (n, L) (or (n,) for a scalar level)
            Non-decreasing in the level for every row.
        """
        check_is_fitted(self, "nodes_level_", method="fit")
        base = self._check_base()
        scalar = np.ndim(levels) == 0
        lv = check_levels(levels, "levels")
        check_not_predictive(X, self)
        X = check_array(X, "X", ndim=2)
        beta, phi = interpolate_knots(self.nodes_level_, self.nodes_beta_, self.nodes_log_theta_, lv)
        mu, _ = base.predict_mean_std(X)
        d = self.n_features_in_
        q = np.empty((X.shape[0], lv.size))
        cache: dict = {}
        for j in range(lv.size):
            key = phi[j].tobytes()
            if key not in cache:
                cache[key] = base.predict_mean_std(
                    X, theta=_theta_from_phi(phi[j], d), include_noise=self.include_noise
                )[1]
            q[:, j] = mu + beta[j] * cache[key]
        self._last_crossing = 0
        if lv.size > 1:
            drop = np.diff(q, axis=1)
            tol = 1e-9 * max(self._mu_scale, 1e-300)
            self._last_crossing = int(np.sum(np.any(drop < -tol, axis=1)))
            # Assumption 4.1 makes q monotone; the running maximum removes rounding
            # (and would repair, and count, any violation of the assumption)
            q = np.maximum.accumulate(q, axis=1)
        return q[:, 0] if scalar else q

    def predict(self, X, *, levels=None) -> xr.Dataset:
        """The calibrated predictive distribution (the data contract of :mod:`calibprob.predictive`).

        The calibration diagnostics (β̂, θ̂ at the knots and the interpolation
        nodes, per-level objective, calibration coverage, convergence) are in
        :attr:`diagnostics_`, set by :meth:`fit`.

        Parameters
        ----------
        X : array_like, shape (n, d)
        levels : array_like, optional
            Default :data:`calibprob.predictive.DEFAULT_LEVELS`.

        Returns
        -------
        xarray.Dataset
            ``quantile(obs, level)`` (``family="quantile"``), attrs ``method``,
            ``crossing_repaired`` (rows where Assumption 4.1 failed; 0 expected).
        """
        lv = DEFAULT_LEVELS if levels is None else check_levels(levels, "levels")
        if lv.size < 2:
            raise ValueError(f"levels must hold at least 2 levels; got {lv.size}.")
        q = self.quantile(X, lv)
        ds = from_quantiles(q, lv, method=f"sharp-gp/{self.variant}")
        ds.attrs["crossing_repaired"] = int(self._last_crossing)
        ds.attrs["n_calibration"] = int(self.n_calibration_)
        ds.attrs["outside_knots"] = int(np.sum((lv < self.nodes_level_[0]) | (lv > self.nodes_level_[-1])))
        return ds

    def predict_distribution(self, X, *, levels=None) -> xr.Dataset:
        """The same as :meth:`predict` (the name of earlier releases; kept as an alias)."""
        return self.predict(X, levels=levels)

    def ucb(self, X, *, level: float = 0.99) -> np.ndarray:
        r"""Calibrated upper confidence bound :math:`\mu + \hat\beta(\delta)\sigma(\hat\theta(\delta), x)` (eq. 18).

        ``level`` is the quantile level (0.99 = the paper's :math:`\delta = 0.01`
        miscoverage); use e.g. 0.01 for a lower bound when minimising.
        """
        return self.quantile(X, float(level))


def sharp_gp_ucb(calibrator: SharpCalibratedGP, X, *, level: float = 0.99) -> np.ndarray:
    r"""UCB acquisition with calibrated quantiles, appendix eq. (18) of Capone et al. (2023).

    .. math::

        \alpha(x) = \mu(\theta^R, x) + \hat\beta(\delta)\,\sigma(\hat\theta(\delta), x),

    the calibrated quantile at ``level`` (the paper maximises with the 0.99
    quantile; pass ``level=0.01`` for the lower bound used when minimising).

    Parameters
    ----------
    calibrator : SharpCalibratedGP
        Fitted (for speed, fit only the level(s) you need, e.g. ``levels=[0.01, 0.99]``).
    X : array_like, shape (n, d)
        Candidate points.
    level : float, default 0.99

    Returns
    -------
    ndarray, shape (n,)
    """
    return calibrator.ucb(X, level=level)
