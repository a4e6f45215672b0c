r"""Default candidate grids of conformal Bayes's PyMC and bambi doors, one per test point.

A conformal Bayes set is evaluated on a grid of candidate values; its ends are then refined
between grid points on the exact p-value. The grid must therefore hold the set, with room to
spare, *at every test point*: a grid fixed by the training targets (Fong and Holmes's
:math:`[\min y - 2 s_y, \max y + 2 s_y]`) misses the set of a test input whose predictive lies
elsewhere, and a call with one such point would have to refuse the batch. The rules here place
each test point's grid from its own posterior predictive:

* **closed form** (Normal, Student-t likelihoods): analytically, from each draw's parameters
  (:func:`default_grid`);
* **any likelihood** (the ``logp`` path): from one posterior predictive draw per posterior
  draw at the test input, the draws' range widened by :data:`GRID_WIDEN` of itself on each side
  (:func:`grid_from_draws`).

Either way, a point whose set still reaches its grid's edge (a predictive with heavier tails
than the draws showed, a model far too narrow for the data) gets its grid widened and is
evaluated again (:func:`widen_where`), up to :data:`GRID_EXTEND_ROUNDS` times.

References
----------
Fong, E. and Holmes, C. (2021). Conformal Bayesian computation. NeurIPS 34, section 3.3.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

from calibprob.calibrators.conformal.bayes import _inputs

#: Tail mass each posterior draw's predictive may leave outside a test point's default grid.
GRID_TAIL = 1e-3
#: The default grid reaches where every draw's density at the test point is below this fraction of the
#: least training point's posterior predictive density: candidates beyond rank last, outside every set.
GRID_DENSITY_FLOOR = 0.1
#: Any-likelihood default: the range of the posterior predictive draws, widened by this fraction of
#: itself on each side (one draw per posterior draw leaves about 2/S of the mass beyond its range).
GRID_WIDEN = 0.5
#: How many times a test point's default grid is widened (tripled about its centre) when its set
#: reaches the grid's edge.
GRID_EXTEND_ROUNDS = 3
#: When every predictive draw at a point is positive (a positive likelihood: gamma, log-normal, ...),
#: its grid starts no lower than this fraction of the least draw, so that no candidate lies outside
#: the support (where every draw's density is zero and no p-value exists).
GRID_POSITIVE_FLOOR = 0.01

GRID_RULES = {
    "closed": (
        "per test point: every draw's central 1 - 1e-3 predictive interval, and out to where each draw's density "
        "falls below 0.1 x the least training point's predictive density"
    ),
    "draws": (
        "per test point: the range of one posterior predictive draw per posterior draw, widened by 0.5 x that "
        "range on each side"
    ),
    "training": "the training targets' range +- 2 sd (Fong and Holmes)",
}
EXTENDED = "; widened (x3 about its centre) at {n} test point(s) whose set reached the grid's edge"


def default_grid(
    grid: Any, y_train: Any, n_grid: int, m: int, *, family: Any = None, params: Any = None, log_likelihood: Any = None
) -> Any:
    r"""The candidate grid: the user's, or a default.

    With a closed-form likelihood the default is per test point :math:`j`, from its own
    posterior predictive, the union over draws :math:`s` of two intervals:

    * the draw's central :math:`1-\epsilon` interval (:math:`\epsilon` = :data:`GRID_TAIL`), so the
      predictive (a mixture of the draws) puts at least :math:`1-\epsilon` of its mass on the grid
      wherever the test input lies;
    * where the draw's density exceeds :math:`t = c \min_i \hat p(y_i)` (:math:`c` =
      :data:`GRID_DENSITY_FLOOR`, :math:`\hat p(y_i) = \frac1S\sum_s f_{\theta_s}(y_i)` the training points'
      predictive densities, from ``log_likelihood``): beyond it a candidate's predictive density is
      below every training point's, it ranks last and lies outside every set, so the set's ends
      fall inside the grid even when the model is too narrow for the data.

    Otherwise Fong and Holmes's :math:`[\min y - 2 s_y, \max y + 2 s_y]` (the doors pass a
    per-point grid from predictive draws instead, :func:`grid_from_draws`, when they can draw).
    """
    if grid is None and params is not None:
        lo, hi = _predictive_span(family, params, GRID_TAIL, _log_density_floor(log_likelihood))
        grid = lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, n_grid)[None, :]
    elif grid is None:
        if y_train is None:
            raise ValueError("grid: the tree has no observed_data to place a default grid; pass grid=.")
        sd = float(np.std(y_train)) or 1.0
        grid = np.linspace(y_train.min() - 2 * sd, y_train.max() + 2 * sd, n_grid)
    g = np.asarray(grid, float)
    return _inputs.check_grid(g, m, g.shape[-1])


def grid_from_draws(draws: np.ndarray, n_grid: int) -> np.ndarray:
    r"""Per test point, ``n_grid`` values over the predictive draws' range widened by :data:`GRID_WIDEN`.

    ``draws`` is (S, m): one draw :math:`\tilde y_{sj} \sim f_{\theta_s}(\cdot \mid x_j)` per posterior
    draw. With :math:`r_j = \max_s \tilde y_{sj} - \min_s \tilde y_{sj}` the grid is
    :math:`[\min_s \tilde y_{sj} - w r_j, \max_s \tilde y_{sj} + w r_j]`; a point whose draws are all
    equal gets a unit half-width (scaled by the value's magnitude) so that the grid has a spacing,
    and a point whose draws are all positive starts at no less than :data:`GRID_POSITIVE_FLOOR`
    of the least draw (inside a positive likelihood's support).
    """
    lo, hi = draws.min(axis=0), draws.max(axis=0)
    pad = GRID_WIDEN * (hi - lo)
    pad = np.where(pad > 0, pad, np.maximum(1.0, np.abs(hi)))
    floor = np.where(lo > 0, GRID_POSITIVE_FLOOR * lo, -np.inf)
    return _linspace(np.maximum(lo - pad, floor), hi + pad, n_grid)


def widen_where(g: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The grid with ``rows`` (boolean, per test point) tripled in span about their centres.

    A positive grid (every value > 0) stays above :data:`GRID_POSITIVE_FLOOR` of its least value.
    """
    lo, hi = g[:, 0], g[:, -1]
    centre, half = 0.5 * (lo + hi), 1.5 * (hi - lo)
    floor = np.where(lo > 0, GRID_POSITIVE_FLOOR * lo, -np.inf)
    wide = _linspace(np.maximum(centre - half, floor), centre + half, g.shape[1])
    return np.where(rows[:, None], wide, g)


def _linspace(lo: np.ndarray, hi: np.ndarray, n: int) -> np.ndarray:
    return lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, n)[None, :]


def reaches_edge(pred: Any) -> np.ndarray:
    """Per test point: does a set at any level reach the grid's edge (not a too-small group's whole line)?"""
    edge = pred["touches_edge"].values & (pred["grid_length"].values >= 0)
    return edge.any(axis=1)


def _log_density_floor(log_likelihood: Any) -> float | None:
    r""":math:`\log(c \min_i \frac1S \sum_s e^{\ell_{si}})`, or None without a log-likelihood."""
    if log_likelihood is None:
        return None
    ll = np.asarray(log_likelihood, float)
    log_p = special.logsumexp(ll, axis=0) - np.log(ll.shape[0])
    return float(np.log(GRID_DENSITY_FLOOR) + log_p.min())


def _predictive_span(family: str, params: Any, tail: float, log_floor: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Per test point, the union over draws of the central ``1 - tail`` interval and the density-floor region."""
    p = 1.0 - tail / 2
    if family == "NormalRV":
        mu, sigma = params
        z = special.ndtri(p)
        if log_floor is not None:  # N(z) / sigma >= t  <=>  z^2 <= -2 log(t sigma sqrt(2 pi))
            z = np.maximum(z, np.sqrt(np.maximum(0.0, -2.0 * (log_floor + np.log(sigma) + 0.5 * np.log(2 * np.pi)))))
    else:
        nu, mu, sigma = params
        z = special.stdtrit(nu, p)
        if log_floor is not None:  # t_nu(z) / sigma >= t  <=>  z^2 <= nu ((C / (t sigma))^(2 / (nu + 1)) - 1)
            log_c = special.gammaln((nu + 1) / 2) - special.gammaln(nu / 2) - 0.5 * np.log(nu * np.pi)
            expo = np.minimum(2.0 / (nu + 1) * (log_c - log_floor - np.log(sigma)), 700.0)
            z = np.maximum(z, np.sqrt(np.maximum(0.0, nu * np.expm1(expo))))
    return (mu - z * sigma).min(axis=0), (mu + z * sigma).max(axis=0)
