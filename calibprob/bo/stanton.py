r"""Conformal acquisitions: the acquisition integrated over the conformal set (Stanton et al. 2023).

Stanton, Maddox and Wilson (2023) replace, in the acquisition's expectation over the unknown
label :math:`y` of a candidate :math:`u`, the GP's predictive :math:`p(y \mid u, D)` by a
mixture that puts mass :math:`1 - \alpha` uniformly on the candidate's full-conformal set
:math:`C_\alpha(u)` and mass :math:`\alpha` on the predictive itself:

.. math::

    A_{\mathrm{conf}}(u) = \alpha\, \frac{\int o(y)\, v(u, y)\, p(y \mid u, D)\, dy}{\int o(y)\, p(y \mid u, D)\, dy}
        + (1 - \alpha)\, \frac{\int_{C_\alpha(u)} o(y)\, v(u, y)\, dy}{\int_{C_\alpha(u)} o(y)\, dy},

where :math:`v(u, y)` is the utility of the GP *conditioned on* :math:`(u, y)` (same
hyperparameters, the conformal "retraining") evaluated at :math:`u`, and :math:`o(y)` an
optional "optimistic" mask (the reference code's ``_conformal_integration``; its
``qConformalUpperConfidenceBound`` keeps only labels better than the posterior mean, its
``qConformalExpectedImprovement`` all labels). The second term is zero when
:math:`C_\alpha(u) \cap \{o = 1\}` is empty, as in the reference code (such a candidate keeps only the
:math:`\alpha` part). For minimisation in standardised units, with :math:`\mu, s` the GP's
predictive mean and standard deviation at :math:`u` (noise :math:`\nu` included),
:math:`s_f^2 = s^2 - \nu` and :math:`r = s_f^2 / s^2`, the conditioned latent posterior at
:math:`u` is :math:`N(\mu + r (y - \mu),\; s_f^2 \nu / s^2)` and

* ``"cei"`` (conformal expected improvement): :math:`v(u, y) = \mathrm{EI}(\mu + r(y - \mu),
  s_f\sqrt{\nu}/s;\ y^\star)`, no mask. The :math:`\alpha` term is, by the tower property, the
  plain :math:`\mathrm{EI}(\mu, s_f; y^\star)`.
* ``"cucb"`` (conformal confidence bound, the paper's cUCB for minimisation):
  :math:`v(u, y) = -(\mu + r(y - \mu) - \kappa\, s_f \sqrt{\nu}/s)` (the reference code's
  sample form :math:`\bar f + \beta' |f - \bar f|` averages to :math:`\bar f + \sqrt\beta\, \mathrm{sd}`),
  optimistic mask :math:`o(y) = 1\{y \le \mu\}`; the :math:`\alpha` term is
  :math:`-(\mu - r s \sqrt{2/\pi} - \kappa s_f\sqrt{\nu}/s)`.

The conformal set is calibprob's feedback-covariate-shift full-conformal set
(:func:`calibprob.bo.conformal.query_set`: absolute-residual scores, the weights of Fannjiang et
al. recomputed for every candidate label, closed-form leave-one-out GP updates) for the design
:math:`\propto \exp(-\lambda\,\mathrm{LCB})` over the step's pool -- the known design density of
``calibration="conformal"``. Stanton et al. estimate the ratio with a classifier instead (a
query maximising :math:`A_{\mathrm{conf}}` has no closed-form density); here the softmax of
the confidence bound stands in for the query density, an approximation the logged query
coverage measures. :math:`\alpha = 1 -` ``interval_level`` (Stanton et al. use
:math:`\max(1/\sqrt n, 0.05)`). The set is evaluated on :func:`acquisition_grid`: the loop's
label grid plus 33 labels over :math:`\mu \pm 4 s` (a nearly noise-free GP's set is narrower
than the coarse grid's step), each label weighted by its cell width, so the second term is the
midpoint rule for :math:`\int_{C_\alpha}`.

References
----------
Stanton, S., Maddox, W. and Wilson, A. G. (2023). Bayesian optimization with conformal
prediction sets. AISTATS (conformal acquisitions, §4; code ``samuelstanton/conformal-bayesopt``,
``conformalbo/acquisitions.py``).

Fannjiang, C., Bates, S., Angelopoulos, A. N., Listgarten, J. and Jordan, M. I. (2022).
Conformal prediction under feedback covariate shift for biomolecular design. PNAS 119(43).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

from calibprob._core.validation import check_choice, check_probability
from calibprob.bo.conformal import label_grid, query_set

__all__ = [
    "CONFORMAL_ACQUISITIONS",
    "N_SCREEN",
    "acquisition_grid",
    "cell_widths",
    "conditioned_utility",
    "conformal_acquisition",
]

#: The conformal acquisitions (Stanton et al. 2023): expected improvement and confidence bound.
CONFORMAL_ACQUISITIONS = ("cei", "cucb")

#: Candidates of the pool (the best by the plain acquisition) whose conformal acquisition is computed per step.
N_SCREEN = 16

_SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))


def _ei(m: np.ndarray, sd: np.ndarray, best: float) -> np.ndarray:
    r""":math:`E[(y^\star - F)^+]`, :math:`F \sim N(m, \mathrm{sd}^2)` (the limit :math:`(y^\star - m)^+` at sd 0)."""
    m = np.asarray(m, float)
    sd = np.broadcast_to(np.asarray(sd, float), m.shape)
    pos = sd > 0
    z = np.where(pos, (best - m) / np.where(pos, sd, 1.0), 0.0)
    ei = sd * (z * special.ndtr(z) + np.exp(-0.5 * z * z) / np.sqrt(2.0 * np.pi))
    return np.where(pos, ei, np.maximum(best - m, 0.0))


def conditioned_utility(
    name: str, mu: float, sd: float, noise: float, labels: np.ndarray, *, best: float, kappa: float
) -> np.ndarray:
    r"""Utility :math:`v(u, y)` of the GP conditioned on :math:`(u, y)`, at :math:`u`, per label.

    Parameters
    ----------
    name : {"cei", "cucb"}
    mu, sd : float
        Predictive mean and standard deviation at :math:`u` (noise included).
    noise : float
        Noise variance :math:`\nu`.
    labels : ndarray, shape (k,)
    best : float
        Incumbent :math:`y^\star` (for ``"cei"``).
    kappa : float
        Confidence-bound weight (for ``"cucb"``).

    Returns
    -------
    ndarray, shape (k,)
        To maximise (``"cucb"``: minus the conditioned lower confidence bound).
    """
    var_f = max(sd * sd - noise, 0.0)
    r = var_f / (sd * sd) if sd > 0 else 0.0
    m1 = mu + r * (np.asarray(labels, float) - mu)
    sd1 = float(np.sqrt(var_f * noise) / sd) if sd > 0 else 0.0
    if name == "cei":
        return _ei(m1, np.full_like(m1, sd1), best)
    return -(m1 - kappa * sd1)


def _posterior_term(name: str, mu: float, sd: float, noise: float, *, best: float, kappa: float) -> float:
    """The :math:`\\alpha` term in closed form (module docstring)."""
    var_f = max(sd * sd - noise, 0.0)
    sd1 = float(np.sqrt(var_f * noise) / sd) if sd > 0 else 0.0
    if name == "cei":
        return float(_ei(np.array([mu]), np.array([np.sqrt(var_f)]), best)[0])
    r = var_f / (sd * sd) if sd > 0 else 0.0
    return -(mu - r * sd * _SQRT_2_OVER_PI - kappa * sd1)


def acquisition_grid(ys: np.ndarray, mu: float, sd: float) -> np.ndarray:
    r"""The loop's label grid (:func:`calibprob.bo.conformal.label_grid`) plus 33 labels over :math:`\mu \pm 4 s`, sorted, unique."""
    return np.unique(np.concatenate([label_grid(ys), mu + sd * np.linspace(-4.0, 4.0, 33)]))


def cell_widths(grid: np.ndarray) -> np.ndarray:
    """Midpoint-rule weights of a strictly increasing grid: half the distance between each label's neighbours."""
    g = np.asarray(grid, float)
    if g.size < 2:
        return np.ones_like(g)
    edges = np.concatenate([[g[0]], (g[1:] + g[:-1]) / 2.0, [g[-1]]])
    return np.diff(edges)


def conformal_acquisition(
    name: str,
    gp: Any,
    U: np.ndarray,
    ys: np.ndarray,
    u: np.ndarray,
    pool: np.ndarray,
    *,
    lam: float,
    q: float,
    confidence_level: float,
    best: float,
    kappa: float,
    grid: np.ndarray | None = None,
) -> float:
    r""":math:`A_{\mathrm{conf}}(u)` of the module docstring, to maximise (standardised units).

    Parameters
    ----------
    name : {"cei", "cucb"}
    gp : GaussianProcessRegressor
        Fitted on ``(U, ys)``; its hyperparameters are held fixed.
    U : ndarray, shape (n, d)
    ys : ndarray, shape (n,)
    u : ndarray, shape (d,)
        The candidate.
    pool : ndarray, shape (m, d)
        The design's support (the weights' normaliser).
    lam, q : float
        ``design_lambda`` and :math:`g(\Phi(-\kappa))` of the weights' design (as
        :func:`calibprob.bo.conformal.query_set`).
    confidence_level : float
        :math:`1 - \alpha`.
    best, kappa : float
        Incumbent and confidence-bound weight of the utility.
    grid : ndarray, optional
        Candidate labels, strictly increasing; default :func:`acquisition_grid`.

    Returns
    -------
    float

    References
    ----------
    Stanton, S., Maddox, W. and Wilson, A. G. (2023). Bayesian optimization with conformal
    prediction sets. AISTATS, §4.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.bases.gp import GaussianProcessRegressor
    >>> from calibprob.bo.stanton import conformal_acquisition
    >>> rng = np.random.default_rng(0)
    >>> U = rng.random((8, 1)); ys = np.sin(6 * U[:, 0])
    >>> theta = {"lengthscale": np.array([0.25]), "variance": 1.0, "noise": 0.01}
    >>> gp = GaussianProcessRegressor(kernel="se", mean="zero", noise=True, theta=theta, optimize=False).fit(U, ys)
    >>> a = conformal_acquisition("cei", gp, U, ys, np.array([0.8]), rng.random((50, 1)),
    ...                           lam=2.0, q=-2.0, confidence_level=0.9, best=float(ys.min()), kappa=2.0)
    >>> bool(a >= 0)
    True
    """
    check_choice(name, "name (the conformal acquisition)", CONFORMAL_ACQUISITIONS)
    confidence_level = check_probability(confidence_level, "confidence_level")
    alpha = 1.0 - confidence_level
    mu_a, sd_a = gp.predict_mean_std(u[None, :])
    mu, sd = float(mu_a[0]), float(sd_a[0])
    noise = float(dict(gp.theta_)["noise"])
    labels = acquisition_grid(ys, mu, sd) if grid is None else np.asarray(grid, float)
    if labels.ndim != 1 or labels.size < 2 or not np.all(np.isfinite(labels)) or np.any(np.diff(labels) <= 0):
        raise ValueError(
            f"grid must hold at least two finite, strictly increasing candidate labels; got shape {labels.shape}. "
            "Pass e.g. np.linspace(-3, 3, 61) (standardised units), or None for the default grid."
        )
    cs, _ = query_set(gp, U, ys, u, pool, lam=lam, q=q, confidence_level=confidence_level, grid=labels)
    values = conditioned_utility(name, mu, sd, noise, labels, best=best, kappa=kappa)
    optimistic = labels <= mu if name == "cucb" else np.ones(labels.size, bool)
    w = cell_widths(labels) * (cs.in_set & optimistic)
    inside = float(np.sum(w * values) / np.sum(w)) if np.sum(w) > 0 else 0.0
    return alpha * _posterior_term(name, mu, sd, noise, best=best, kappa=kappa) + (1.0 - alpha) * inside
