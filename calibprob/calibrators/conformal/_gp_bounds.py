r"""The NumPy layer of the GP conformal methods: the J+GP / asymJ+GP bounds (Pion & Vazquez 2024, eq. 11-14) and
the exact full-conformal GP bounds (Papadopoulos 2023; Pion eq. 9-10) on the kriging system of
``calibprob.bases.gp.loo``; the estimators are in ``calibprob.calibrators.conformal.gp``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

# the kriging algebra (one closed-form leave-one-out, shared with the GP base) lives with the GPs
from calibprob.bases.gp.loo import KrigingSystem, loo_at_points
from calibprob.calibrators.conformal._intervals import (
    check_enough_points,
    lower_rank,
    order_statistic,
    upper_rank,
)
from calibprob.calibrators.conformal.jackknife import jackknife_plus_bounds, jackknife_plus_ranks
from calibprob.calibrators.conformal.scores import Score, get_score, invert

if TYPE_CHECKING:
    from calibprob.bases.gp._sparse_loo import SparseKrigingSystem


def jackknife_plus_gp_bounds(
    system: KrigingSystem,
    lam: np.ndarray,
    mu: np.ndarray,
    var: np.ndarray,
    confidence_levels: ArrayLike,
    *,
    score: str | Score = "normalized",
    beta: float = 1.0,
    eps: float = 0.0,
    convention: str = "barber",
) -> tuple[np.ndarray, np.ndarray]:
    r"""J+GP (Pion eq. 11–12), asymJ+GP (eq. 13–14) or plain J+ from the closed-form LOO.

    Parameters
    ----------
    system : KrigingSystem
    lam, mu, var : outputs of :func:`kriging_predict` for the test points
    confidence_levels : ndarray, shape (C,)
    score : {"normalized", "signed", "absolute", "signed-absolute"} or Score
        ``"normalized"``: J+GP, :math:`R_i = |e_i|/\max(\epsilon, \sigma_{-i}(x_i)^\beta)`,
        :math:`\xi^\pm_i(x) = \mu_{-i}(x) \pm R_i \max(\epsilon, \sigma_{-i}(x)^\beta)`.
        ``"signed"``: asymJ+GP with :math:`R_i = e_i/\max(\epsilon, \sigma_{-i}(x_i)^\beta)`.
        ``"absolute"``: the jackknife+ of Barber et al. with GP refits.
    beta, eps : float
    convention : {"barber", "pion2024"}
        Signed scores only: the upper end is the
        :math:`\lceil (1-\alpha/2)(n+1) \rceil`-th smallest :math:`\xi_i`
        (``"barber"``, the rank with the :math:`2c-1` guarantee) or the
        :math:`\lfloor (1-\alpha/2)(n+1) \rfloor`-th as printed in Pion eq. (14).

    Returns
    -------
    lower, upper : ndarray, shape (m, C)
    """
    sc = get_score(score, beta=beta, eps=eps)
    mu_loo, sd_loo = loo_at_points(system, lam, mu, var)
    R = sc.score(system.loo_residual, 0.0, system.loo_std if sc.needs_sigma else None)
    scale = sc.scale(sd_loo) if sc.needs_sigma else 1.0
    if convention == "barber" or sc.symmetric:
        return jackknife_plus_bounds(mu_loo, scale, R, confidence_levels, symmetric=sc.symmetric)
    if convention != "pion2024":
        raise ValueError(f"convention must be 'barber' or 'pion2024'; got {convention!r}.")
    n = system.n
    levels = np.asarray(confidence_levels, float)
    for c in levels:
        check_enough_points(c, n, what="training points", sides=2)
    a = (1.0 - levels) / 2.0
    ranks = [lower_rank(ai, n) for ai in a] + [max(lower_rank(1.0 - ai, n), 1) for ai in a]
    both = order_statistic(invert(mu_loo, scale, R[:, None]), ranks, axis=0)
    return both[: levels.size].T, both[levels.size :].T


def _jackknife_plus_gp_bounds_test_major(
    system: KrigingSystem | SparseKrigingSystem,
    lam_t: np.ndarray,
    mu: np.ndarray,
    var: np.ndarray,
    levels: ArrayLike,
    *,
    score: Score,
    convention: str,
) -> tuple[np.ndarray, np.ndarray]:
    r""":func:`jackknife_plus_gp_bounds` from test-point-major weights ``lam_t`` (c, n), in place.

    The same arithmetic, element for element, as :func:`loo_at_points` and
    :func:`calibprob.calibrators.conformal.jackknife.jackknife_plus_bounds`
    (:math:`\xi^\pm_i(x) = \mu(x) - \lambda_i(x)e_i \pm R_i\,s(\sigma_{-i}(x))`), but
    in three ``(c, n)`` buffers reused in place (``lam_t`` is overwritten) and with the
    order statistics selected along contiguous rows (``ndarray.partition`` in place,
    no copy): the selection, :math:`O(n)` per test point, is the dominant cost, and
    along a row it runs about four times faster than down a column. The ends are exact
    selections, so they equal the column-major path's whenever the weights do.
    """
    n = system.n
    levels = np.asarray(levels, float)
    sym = score.symmetric
    if convention == "pion2024" and not sym:
        a = (1.0 - levels) / 2.0
        for c in levels:
            check_enough_points(c, n, what="training points", sides=2)
        ranks_lo = [lower_rank(ai, n) for ai in a]
        ranks_hi = [max(lower_rank(1.0 - ai, n), 1) for ai in a]
    else:
        ranks_lo, ranks_hi = jackknife_plus_ranks(levels, n, symmetric=sym)
    R = score.score(system.loo_residual, 0.0, system.loo_std if score.needs_sigma else None)
    xi = np.multiply(lam_t, system.loo_residual)
    np.subtract(mu[:, None], xi, out=xi)  # mu_{-i}(x), as in loo_at_points
    if score.needs_sigma:
        width = np.multiply(lam_t, lam_t, out=lam_t)
        np.divide(width, system.qdiag, out=width)
        np.add(var[:, None], width, out=width)
        np.sqrt(width, out=width)  # sigma_{-i}(x)
        if not (getattr(score, "beta", None) == 1.0 and getattr(score, "eps", None) == 0.0):
            width = score.scale(width)  # max(eps, sigma**beta); the identity for beta = 1, eps = 0
        np.multiply(width, R, out=width)
    else:
        width = np.broadcast_to(R, xi.shape)
    if sym:
        upper = np.add(xi, width)
        lower = np.subtract(xi, width, out=xi)
        return _select_rows(lower, ranks_lo), _select_rows(upper, ranks_hi)
    np.add(xi, width, out=xi)
    both = _select_rows(xi, ranks_lo + ranks_hi)
    return both[:, : len(ranks_lo)], both[:, len(ranks_lo) :]


def _select_rows(values: np.ndarray, ranks: ArrayLike) -> np.ndarray:
    """The ``ranks``-th smallest (1-based) of every row, shape ``(rows, len(ranks))``; partitions in place."""
    idx = np.asarray(ranks, dtype=int) - 1
    values.partition(np.unique(idx), axis=1)
    return values[:, idx]


def full_conformal_gp_bounds(
    system: KrigingSystem | SparseKrigingSystem,
    lam: ArrayLike,
    mu: ArrayLike,
    var: ArrayLike,
    confidence_levels: ArrayLike,
    *,
    beta: float = 1.0,
    eps: float = 0.0,
    extra_x: ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Exact full-conformal GP intervals (Papadopoulos 2023; Pion eq. 9–10).

    See the module docstring for the derivation: scores affine in the
    candidate :math:`z`, the bordered update of :math:`Q^{-1}`, and the
    breakpoint sweep.

    Parameters
    ----------
    system : KrigingSystem
    lam, mu, var : outputs of :func:`kriging_predict` (``var`` including
        the noise/nugget of the candidate observation)
    confidence_levels : ndarray, shape (C,)
    beta, eps : float
        Score :math:`|e|/\max(\epsilon, \sigma^\beta)`.
    extra_x : ndarray, shape (m,), optional
        Sparse GP (``calibprob.bases.gp._sparse_loo.SparseKrigingSystem``, whose
        ``extra`` holds :math:`\delta_i`): the prior variance
        :math:`\delta(x) = \sigma_f^2 - Q_{xx}` the inducing inputs leave
        unexplained at each test point. The candidate enters the training set with
        variance :math:`v(x) - \delta(x)` (the bordered update uses it), and the
        augmented leave-one-out variances are :math:`1/d_i + \delta_i` and
        :math:`v(x)`; see ``calibprob.bases.gp._sparse_loo``.

    Returns
    -------
    lower, upper : ndarray, shape (m, C)
        Hull of the conformal set; ``-inf``/``inf`` when the set is unbounded.
    """
    levels = np.asarray(confidence_levels, float)
    n = system.n
    for c in levels:
        check_enough_points(c, n, what="training points")
    ks = np.array([upper_rank(c, n) for c in levels])
    # work test-point-major, (m, n), so that the sorts run along contiguous rows
    lam = np.ascontiguousarray(np.asarray(lam, float).T)
    m = lam.shape[0]
    mu = np.asarray(mu, float)[:, None]
    v = np.asarray(var, float)[:, None]
    # the candidate as a training point: its variance in the kriging system (sparse: minus delta(x))
    vb = v if extra_x is None else np.maximum(v - np.asarray(extra_x, float)[:, None], np.finfo(float).tiny)
    d = system.qdiag[None, :] + lam * lam / vb  # diag of the augmented Q^{-1}
    if extra_x is None:
        scale_i = np.maximum(eps, d ** (-beta / 2.0))  # max(eps, sigma_{n+1,-i}(x_i)^beta)
    else:
        delta = getattr(system, "extra")  # a SparseKrigingSystem's delta_i
        scale_i = np.maximum(eps, (1.0 / d + delta[None, :]) ** (beta / 2.0))
    # e_i(z) = a_i + b_i z, divided by the normaliser: R_i(z) = |A_i + B_i z|
    A = (system.alpha[None, :] + lam * (mu / vb)) / (d * scale_i)
    B = -lam / (vb * d * scale_i)
    del d, scale_i
    scale_x = np.maximum(eps, v ** (beta / 2.0))
    A0 = -mu / scale_x  # R_{n+1}(z) = |z - mu| / scale_x
    B0 = 1.0 / scale_x
    # R_i < R_{n+1}  <=>  L1 * L2 < 0 with the affine factors L1 = c1 + s1 z, L2 = c2 + s2 z
    c1, s1 = A - A0, B - B0
    c2, s2 = A + A0, B + B0
    del A, B

    def sign_at_minus_inf(c: np.ndarray, s: np.ndarray) -> np.ndarray:
        return np.where(s != 0, -np.sign(s), np.sign(c))

    member0 = sign_at_minus_inf(c1, s1) * sign_at_minus_inf(c2, s2) < 0
    with np.errstate(divide="ignore", invalid="ignore"):
        r1 = np.where(s1 != 0, -c1 / s1, np.inf)
        r2 = np.where(s2 != 0, -c2 / s2, np.inf)
    del c1, c2, s1, s2
    r_lo, r_hi = np.minimum(r1, r2), np.maximum(r1, r2)
    del r1, r2
    # each root flips membership; an absent root (inf) flips nothing
    d_lo = np.where(np.isfinite(r_lo), np.where(member0, -1, 1), 0).astype(np.int32)
    d_hi = np.where(np.isfinite(r_hi), -d_lo, 0).astype(np.int32)
    pos = np.concatenate([r_lo, r_hi], axis=1)  # (m, 2n)
    delta = np.concatenate([d_lo, d_hi], axis=1)
    del r_lo, r_hi, d_lo, d_hi
    # ties only create zero-length segments (ignored below), so an unstable sort is fine
    order = np.argsort(pos, axis=1)
    pos = np.take_along_axis(pos, order, axis=1)
    delta = np.take_along_axis(delta, order, axis=1)
    del order
    base = member0.sum(axis=1, dtype=np.int32)[:, None]
    counts = np.concatenate([base, base + np.cumsum(delta, axis=1, dtype=np.int32)], axis=1)  # (m, 2n+1)
    edges = np.concatenate([np.full((m, 1), -np.inf), pos, np.full((m, 1), np.inf)], axis=1)
    with np.errstate(invalid="ignore"):
        positive = edges[:, 1:] > edges[:, :-1]  # zero-length segments carry no mass
    n_seg = counts.shape[1]
    rows = np.arange(m)
    lower = np.empty((m, levels.size))
    upper = np.empty((m, levels.size))
    for j, k in enumerate(ks):
        ok = (counts <= k - 1) & positive
        any_ok = ok.any(axis=1)
        first = np.argmax(ok, axis=1)
        last = n_seg - 1 - np.argmax(ok[:, ::-1], axis=1)
        lower[:, j] = np.where(any_ok, edges[rows, first], mu[:, 0])
        upper[:, j] = np.where(any_ok, edges[rows, last + 1], mu[:, 0])
    return lower, upper
