r"""Acquisition functions under a recalibrated Gaussian predictive (Deshpande et al. 2024, App. C).

The base model is a GP, :math:`Y \mid x \sim N(\mu(x), \sigma^2(x))`. Composing
it with a recalibration map :math:`R` gives the quantile function

.. math::

    \tilde Q_x(p) = \mu(x) + \sigma(x)\, g(p),\qquad g(p) = \Phi^{-1}(R(p)),

a location-scale family whose standardised law :math:`\tilde Z` has the
quantile function :math:`g`. calibprob stores :math:`g` at the recalibrator's
levels :math:`p_j` and interpolates it linearly in :math:`w = \Phi^{-1}(p)`
with linear tails — exactly the piecewise-Gaussian rule of the
predictive-distribution contract (:mod:`calibprob.predictive`), so
:math:`\tilde Z = a_k + b_k W` on :math:`W \in [l_k, h_k)`, :math:`W \sim N(0, 1)`.
The identity map (:math:`g = \Phi^{-1}`) gives back the Gaussian closed forms.

All acquisitions are for **minimisation** and returned as a *loss* to minimise:

* ``"lcb"`` (``"ucb"`` is an alias — the paper's "upper confidence bound" of
  :math:`-f`): :math:`\tilde Q_x(p_\kappa)`, :math:`p_\kappa = \Phi(-\kappa)`.
  Uncalibrated this is GPyOpt's :math:`\mu - \kappa\sigma`; recalibrated
  :math:`\mu + \sigma\,\Phi^{-1}(R(p_\kappa))`: "recalibration ensures that
  :math:`Q_x(\alpha)` is truly the :math:`\alpha`-th quantile" (App. C).
* ``"ei"``: :math:`-\mathrm{EI}(x)`, :math:`\mathrm{EI} = E[(c - Y)^+]`,
  :math:`c = y^\star - \xi`, exact under the piecewise law:

  .. math::

      E[(c - Y)^+] = \sigma \sum_k \Bigl[(c' - a_k)\bigl(\Phi(h'_k) - \Phi(l_k)\bigr)
          - b_k\bigl(\varphi(l_k) - \varphi(h'_k)\bigr)\Bigr],

  :math:`c' = (c - \mu)/\sigma`, :math:`h'_k = \min(h_k, \max(l_k, (c' - a_k)/b_k))`.
* ``"pi"``: :math:`-P(Y < c) = -\tilde F_x(c)`.

References
----------
Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and
conformal prediction improves Bayesian optimization. AISTATS, §5 and App. C.
Jones, D. R., Schonlau, M. and Welch, W. J. (1998). Efficient global
optimization of expensive black-box functions (EI).
Srinivas, N. et al. (2010). Gaussian process optimization in the bandit
setting (GP-UCB).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, special

from calibprob.predictive import quantile_cdf, quantile_pieces, quantile_ppf

__all__ = [
    "ACQUISITIONS",
    "StandardizedLaw",
    "acquisition_loss",
    "expected_improvement",
    "probability_of_improvement",
    "lower_confidence_bound",
    "minimize_on_box",
]

#: Acquisition names accepted by the BO loop (:func:`acquisition_loss` takes the first four;
#: ``"sharp-ucb"`` is ``calibprob.bo.sharp``, ``"cei"``/``"cucb"`` ``calibprob.bo.stanton``).
ACQUISITIONS = ("lcb", "ucb", "ei", "pi", "sharp-ucb", "cei", "cucb")

_INV_SQRT_2PI = 1.0 / np.sqrt(2.0 * np.pi)


class StandardizedLaw:
    r"""The standardised recalibrated law :math:`\tilde Z` with quantile function :math:`g`.

    Parameters
    ----------
    levels : array_like, shape (L,)
        Increasing levels in (0, 1), ``L >= 2``.
    z : array_like, shape (L,), optional
        :math:`g(p_j) = \Phi^{-1}(R(p_j))`, non-decreasing; default the
        identity :math:`\Phi^{-1}(p_j)` (the uncalibrated Gaussian).

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, §5 (acquisitions under the recalibrated forecast) and App. C.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> from calibprob.bo import StandardizedLaw
    >>> levels = np.linspace(0.01, 0.99, 99)
    >>> identity = StandardizedLaw(levels)
    >>> identity.is_identity, round(float(identity.cdf(0.0)), 6)
    (True, 0.5)
    >>> wider = StandardizedLaw(levels, 2.0 * stats.norm.ppf(levels))   # recalibrated: twice as wide
    >>> round(float(wider.ppf(0.975)), 3)
    3.92
    """

    def __init__(self, levels: ArrayLike, z: ArrayLike | None = None) -> None:
        self.levels = np.asarray(levels, float)
        self.z = special.ndtri(self.levels) if z is None else np.asarray(z, float)
        if self.z.shape != self.levels.shape or self.levels.size < 2:
            raise ValueError(
                f"z must have one value per level (L >= 2); got levels {self.levels.shape}, z {self.z.shape}."
            )
        a, b, lo, hi = quantile_pieces(self.z[None, :], self.levels)
        self._a, self._b, self._lo, self._hi = a[0], b[0], lo, hi

    @property
    def is_identity(self) -> bool:
        """True when :math:`g = \\Phi^{-1}` (no recalibration)."""
        return bool(np.allclose(self.z, special.ndtri(self.levels), rtol=0, atol=1e-12))

    def ppf(self, p: ArrayLike) -> np.ndarray:
        """Quantile function :math:`g(p)`."""
        return quantile_ppf(self.z, self.levels, np.asarray(p, float))

    def cdf(self, c: ArrayLike) -> np.ndarray:
        r""":math:`P(\tilde Z \le c)`, vectorised over ``c``."""
        c = np.asarray(c, float)
        return quantile_cdf(np.broadcast_to(self.z, c.shape + self.z.shape), self.levels, c)

    def lower_partial_expectation(self, c: ArrayLike) -> np.ndarray:
        r""":math:`E[(c - \tilde Z)^+]`, exact, vectorised over ``c``."""
        c = np.asarray(c, float)[..., None]
        a, b, lo, hi = self._a, self._b, self._lo, self._hi
        w_star = (c - a) / b
        h = np.minimum(hi, np.maximum(lo, w_star))
        phi_lo = np.where(np.isfinite(lo), np.exp(-0.5 * np.where(np.isfinite(lo), lo, 0.0) ** 2), 0.0)
        phi_h = np.where(np.isfinite(h), np.exp(-0.5 * np.where(np.isfinite(h), h, 0.0) ** 2), 0.0)
        term = (c - a) * (special.ndtr(h) - special.ndtr(lo)) - b * (phi_lo - phi_h) * _INV_SQRT_2PI
        return np.maximum(term.sum(axis=-1), 0.0)


def lower_confidence_bound(mu: ArrayLike, sigma: ArrayLike, law: StandardizedLaw, kappa: float) -> np.ndarray:
    r""":math:`\tilde Q_x(\Phi(-\kappa)) = \mu + \sigma\, g(\Phi(-\kappa))` (to minimise).

    Parameters
    ----------
    mu, sigma : ndarray, shape (n,)
        Base predictive mean and standard deviation.
    law : StandardizedLaw
        The recalibrated standardised law.
    kappa : float
        Exploration weight: the bound is the level-:math:`\Phi(-\kappa)` quantile.

    Returns
    -------
    ndarray, shape (n,)

    References
    ----------
    Srinivas, N., Krause, A., Kakade, S. and Seeger, M. (2010). Gaussian process
    optimization in the bandit setting: no regret and experimental design. ICML.

    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, §5 (quantile bounds :math:`Q_x(\alpha)`).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.bo import StandardizedLaw, lower_confidence_bound
    >>> law = StandardizedLaw(np.linspace(0.01, 0.99, 99))   # the identity: an uncalibrated Gaussian
    >>> lower_confidence_bound(np.array([0.0]), np.array([1.0]), law, kappa=2.0).round(4).tolist()
    [-2.0]
    """
    g = float(law.ppf(special.ndtr(-kappa)))
    return np.asarray(mu, float) + np.asarray(sigma, float) * g


def expected_improvement(
    mu: ArrayLike, sigma: ArrayLike, best: float, law: StandardizedLaw, xi: float = 0.0
) -> np.ndarray:
    r""":math:`E[(y^\star - \xi - Y)^+]` under :math:`Y = \mu + \sigma\tilde Z` (to maximise).

    Parameters
    ----------
    mu, sigma : ndarray, shape (n,)
        Base predictive mean and standard deviation.
    best : float
        Incumbent :math:`y^\star`.
    law : StandardizedLaw
        The recalibrated standardised law.
    xi : float, default 0.0
        Improvement margin.

    Returns
    -------
    ndarray, shape (n,)

    References
    ----------
    Jones, D. R., Schonlau, M. and Welch, W. J. (1998). Efficient global
    optimization of expensive black-box functions. J. Global Optimization 13.

    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, App. C.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.bo import StandardizedLaw, expected_improvement
    >>> law = StandardizedLaw(np.linspace(0.01, 0.99, 99))   # the identity: an uncalibrated Gaussian
    >>> expected_improvement(np.array([0.0]), np.array([1.0]), 0.0, law).round(4).tolist()   # phi(0)
    [0.3989]
    """
    mu, sigma = np.asarray(mu, float), np.asarray(sigma, float)
    return sigma * law.lower_partial_expectation((best - xi - mu) / sigma)


def probability_of_improvement(
    mu: ArrayLike, sigma: ArrayLike, best: float, law: StandardizedLaw, xi: float = 0.0
) -> np.ndarray:
    r""":math:`P(Y < y^\star - \xi)` under :math:`Y = \mu + \sigma\tilde Z` (to maximise).

    Parameters
    ----------
    mu, sigma : ndarray, shape (n,)
        Base predictive mean and standard deviation.
    best : float
        Incumbent :math:`y^\star`.
    law : StandardizedLaw
        The recalibrated standardised law.
    xi : float, default 0.0
        Improvement margin.

    Returns
    -------
    ndarray, shape (n,)

    References
    ----------
    Kushner, H. J. (1964). A new method of locating the maximum point of an
    arbitrary multipeak curve in the presence of noise. J. Basic Engineering 86.

    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, §5.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.bo import StandardizedLaw, probability_of_improvement
    >>> law = StandardizedLaw(np.linspace(0.01, 0.99, 99))   # the identity: an uncalibrated Gaussian
    >>> probability_of_improvement(np.array([0.0, 1.0]), np.array([1.0, 1.0]), 0.0, law).round(4).tolist()
    [0.5, 0.1587]
    """
    mu, sigma = np.asarray(mu, float), np.asarray(sigma, float)
    return law.cdf((best - xi - mu) / sigma)


def acquisition_loss(
    name: str,
    mu: ArrayLike,
    sigma: ArrayLike,
    *,
    law: StandardizedLaw,
    best: float,
    kappa: float = 2.0,
    xi: float = 0.0,
) -> np.ndarray:
    """The acquisition as a loss to *minimise* over x (``lcb``/``ucb``: the bound; ``ei``/``pi``: minus).

    Parameters
    ----------
    name : {"lcb", "ucb", "ei", "pi"}
    mu, sigma : ndarray, shape (n,)
        Base predictive mean and standard deviation at the candidates.
    law : StandardizedLaw
        The recalibrated standardised law (identity when uncalibrated).
    best : float
        Incumbent :math:`y^\\star` (smallest observation, same scale as ``mu``).
    kappa : float
        Exploration weight of the confidence bound, level :math:`\\Phi(-\\kappa)`.
    xi : float
        Improvement margin of EI and PI.

    Returns
    -------
    ndarray, shape (n,)

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, App. C.

    Jones, D. R., Schonlau, M. and Welch, W. J. (1998). Efficient global
    optimization of expensive black-box functions. J. Global Optimization 13.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.bo import StandardizedLaw, acquisition_loss
    >>> law = StandardizedLaw(np.linspace(0.01, 0.99, 99))   # the identity: an uncalibrated Gaussian
    >>> acquisition_loss("ei", np.array([0.0]), np.array([1.0]), law=law, best=0.0).round(4).tolist()
    [-0.3989]
    >>> acquisition_loss("lcb", np.array([0.0]), np.array([1.0]), law=law, best=0.0, kappa=2.0).round(4).tolist()
    [-2.0]
    """
    if name in ("lcb", "ucb"):
        return lower_confidence_bound(mu, sigma, law, kappa)
    if name == "ei":
        return -expected_improvement(mu, sigma, best, law, xi)
    if name == "pi":
        return -probability_of_improvement(mu, sigma, best, law, xi)
    raise ValueError(f"acquisition must be one of 'lcb', 'ucb', 'ei', 'pi'; got {name!r}.")


def minimize_on_box(
    fun: Callable[[np.ndarray], Any],
    d: int,
    rng: np.random.Generator,
    *,
    n_candidates: int | None = None,
    n_starts: int = 5,
    extra_starts: ArrayLike | None = None,
    maxiter: int = 200,
) -> tuple[np.ndarray, float]:
    r"""Minimise a vectorised function on :math:`[0, 1]^d` by multi-start L-BFGS-B.

    ``n_candidates`` seeded uniform points are screened (default
    ``min(2000, 500 d)``); L-BFGS-B (finite-difference gradients) starts from
    the ``n_starts`` best of them plus ``extra_starts`` (e.g. the incumbent).

    Parameters
    ----------
    fun : callable
        ``(m, d) -> (m,)``.
    d : int
    rng : numpy.random.Generator
    n_candidates, n_starts : int
    extra_starts : array_like, shape (k, d), optional
    maxiter : int

    Returns
    -------
    x : ndarray, shape (d,)
    value : float

    References
    ----------
    Byrd, R. H., Lu, P., Nocedal, J. and Zhu, C. (1995). A limited memory algorithm
    for bound constrained optimization. SIAM J. Sci. Comput. 16(5).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.bo import minimize_on_box
    >>> x, value = minimize_on_box(lambda X: np.sum((X - 0.3) ** 2, axis=1), 2, np.random.default_rng(0))
    >>> np.round(x, 4).tolist(), round(value, 8)
    ([0.3, 0.3], 0.0)
    """
    n_candidates = int(n_candidates or min(2000, 500 * d))
    U = rng.random((n_candidates, d))
    vals = np.asarray(fun(U), float)
    vals = np.where(np.isfinite(vals), vals, np.inf)
    order = np.argsort(vals, kind="stable")[:n_starts]
    starts = [U[i] for i in order]
    if extra_starts is not None:
        starts += [np.clip(np.asarray(s, float), 0.0, 1.0) for s in np.atleast_2d(extra_starts)]
    best_x, best_v = U[order[0]].copy(), float(vals[order[0]])

    def scalar(x: np.ndarray) -> float:
        v = float(fun(x[None, :])[0])
        return v if np.isfinite(v) else 1e300

    for x0 in starts:
        res = optimize.minimize(scalar, x0, method="L-BFGS-B", bounds=[(0.0, 1.0)] * d, options={"maxiter": maxiter})
        if res.fun < best_v:
            best_x, best_v = np.clip(res.x, 0.0, 1.0), float(res.fun)
    return best_x, best_v
