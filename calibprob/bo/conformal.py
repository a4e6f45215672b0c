r"""Conformal queries under feedback covariate shift in the BO loop (Fannjiang et al. 2022; Stanton et al. 2023).

A BO query is chosen *because* the model rated it well, so the query and the data are not
exchangeable: feedback covariate shift. With ``calibration="conformal"`` (or
``"conformal-loo"``, on top of Deshpande et al.'s leave-one-out recalibration) the loop

1. draws the query from a **known design density** over a fresh pool :math:`\mathcal U` of
   ``n_candidates`` uniform points of the unit box: the softmax of the acquisition,

   .. math::

       \tilde p_D(u) = \frac{\exp(\lambda A_D(u))}{\sum_{v \in \mathcal U} \exp(\lambda A_D(v))},
       \qquad A_D(u) = -\bigl(\hat\mu_D(u) + g(\Phi(-\kappa))\, \hat\sigma_D(u)\bigr),

   the lower confidence bound of minimisation under the (recalibrated) standardised law
   :math:`g` (:math:`g = \Phi^{-1}` uncalibrated, so :math:`A = -(\hat\mu - \kappa\hat\sigma)`),
   :math:`\lambda` = ``design_lambda`` (large: close to the arg-max of the acquisition);
2. issues, before observing :math:`y`, the **feedback-shift full-conformal set** of the query
   (``calibprob.calibrators.conformal.feedback.conformal_set_from_loo``): the GP posterior
   mean with this step's hyperparameters is a linear smoother, so the leave-one-out means of the
   augmented data are affine in the candidate label and the leave-one-out standard deviations
   are rank-one downdates, :math:`\hat\sigma^2_{-i}(v) = \hat\sigma^2(v) + \nu L_{vi}^2 /
   (1 - H_{ii})`, independent of the label; the weight of point :math:`i` for candidate
   :math:`y` is :math:`\tilde p_{Z_{-i}^y}(X_i)`, recomputed per candidate, no refits.

The set's guarantee (Fannjiang et al., Theorem 1) is for one designed point after exchangeable
training data; in a BO run the earlier queries were themselves designed, so the logged query
coverage is what shows how close the loop comes (the issue's acceptance asks for it). With
``"conformal-loo"`` the recalibration map :math:`g` is held fixed in the weights (it is rebuilt
from all the data, not per left-out model): an approximation, stated. Here the acquisition's
own softmax is the design, so the ratio is known exactly and no classifier is needed (only the
lower confidence bound has label-free leave-one-out standard deviations; EI and PI would need
the incumbent per left-out model and are refused as designs). Stanton et al. (2023) integrate the
acquisition over the conformal set of every candidate and estimate the density ratio with a
classifier: ``acquisition="cei"``/``"cucb"`` (``calibprob.bo.stanton``) does so over these
sets, with this design's weights standing in for the ratio.

References
----------
Fannjiang, C., Bates, S., Angelopoulos, A. N., Listgarten, J. and Jordan, M. I. (2022).
Conformal prediction under feedback covariate shift for biomolecular design. PNAS 119(43).

Stanton, S., Maddox, W. and Wilson, A. G. (2023). Bayesian optimization with conformal
prediction sets. AISTATS.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from calibprob.calibrators.conformal.feedback import (
    AffineLOO,
    ConformalSet,
    KernelRidgeSmoother,
    conformal_set_from_loo,
    loo_affine,
)

__all__ = ["loo_std", "design_probabilities", "query_set", "label_grid", "GRID_SIZE"]

#: Candidate labels of the query's conformal set (standardised units).
GRID_SIZE = 121


def loo_std(gp: Any, U: np.ndarray, u_test: np.ndarray, pool: np.ndarray) -> np.ndarray:
    r"""Predictive standard deviations (noise included) of every leave-one-out GP of the augmented data.

    Row :math:`i` (``n`` for the query) at the augmented inputs then the pool:
    :math:`\hat\sigma^2_{-i}(v) = \hat\sigma^2_S(v) + \nu L_{vi}^2 / (1 - H_{ii})`, with
    :math:`S` the augmented inputs, :math:`L = K_{ES}(K_{SS} + \nu I)^{-1}` and :math:`H` its rows
    on :math:`S` (a rank-one downdate of the posterior covariance).

    Parameters
    ----------
    gp : GaussianProcessRegressor
        Fitted; its hyperparameters are held fixed.
    U : ndarray, shape (n, d)
    u_test : ndarray, shape (d,)
    pool : ndarray, shape (m, d)

    Returns
    -------
    ndarray, shape (n + 1, n + 1 + m)
    """
    theta = dict(gp.theta_)
    nu = float(theta["noise"])
    S = np.vstack([U, u_test[None, :]])
    E = np.vstack([S, pool])
    K_ES = gp.kernel_matrix(E, S, theta=theta)
    L = KernelRidgeSmoother.from_gp(gp).matrix(S, E)
    k_vv = np.diag(gp.kernel_matrix(E[:1], E[:1], theta=theta))[0]  # stationary: one prior variance
    var_s = k_vv + nu - np.einsum("vj,vj->v", L, K_ES)
    d = 1.0 - np.diag(L[: S.shape[0]])
    var = var_s[None, :] + nu * (L.T**2) / d[:, None]
    return np.sqrt(np.maximum(var, 0.0))


def design_probabilities(loss: np.ndarray, lam: float) -> np.ndarray:
    r"""The softmax design :math:`\tilde p(u) \propto \exp(-\lambda\, \text{loss}(u))` over the pool."""
    z = -lam * np.asarray(loss, float)
    p = np.exp(z - z.max())
    return p / p.sum()


def label_grid(ys: np.ndarray) -> np.ndarray:
    """:data:`GRID_SIZE` candidate labels spanning the data's range widened by 1.5 ranges each side."""
    lo, hi = float(np.min(ys)), float(np.max(ys))
    w = max(hi - lo, 1.0)
    return np.linspace(lo - 1.5 * w, hi + 1.5 * w, GRID_SIZE)


def query_set(
    gp: Any,
    U: np.ndarray,
    ys: np.ndarray,
    u_test: np.ndarray,
    pool: np.ndarray,
    *,
    lam: float,
    q: float,
    confidence_level: float,
    grid: np.ndarray | None = None,
) -> tuple[ConformalSet, Callable[[float], bool]]:
    r"""The feedback-shift conformal set of the query ``u_test`` (standardised labels) and its exact membership.

    Parameters
    ----------
    gp : GaussianProcessRegressor
        Fitted on ``(U, ys)``.
    U : ndarray, shape (n, d)
    ys : ndarray, shape (n,)
    u_test : ndarray, shape (d,)
    pool : ndarray, shape (m, d)
        The design's support (this step's candidates).
    lam : float
        ``design_lambda``.
    q : float
        :math:`g(\Phi(-\kappa))`, the standardised quantile of the confidence bound.
    confidence_level : float
    grid : ndarray, optional
        Candidate labels of the set, strictly increasing; default :func:`label_grid` of ``ys``
        (the conformal acquisitions of ``calibprob.bo.stanton`` pass a finer one).

    Returns
    -------
    cs : ConformalSet
        On ``grid``.
    contains : callable
        ``contains(z) -> bool``: whether the label ``z`` itself is in the set (the same rule at
        ``z``, not at the nearest grid label: a nearly noise-free GP gives sets narrower than
        the grid step, which the grid alone would miss).
    """
    loo = loo_affine(KernelRidgeSmoother.from_gp(gp), U, ys, u_test, pool)
    sd = loo_std(gp, U, u_test, pool)
    # the design's exponent per left-out model: -(mu + q sd) = -c - y a - q sd
    design = AffineLOO(c=-loo.c - q * sd, a=-loo.a, n=loo.n)

    def at(labels: np.ndarray) -> ConformalSet:
        return conformal_set_from_loo(
            loo, ys, labels, lam=lam, shift="feedback", confidence_level=confidence_level, design=design
        )

    cs = at(label_grid(ys) if grid is None else np.asarray(grid, float))
    return cs, lambda z: bool(at(np.array([float(z)])).in_set[0])
