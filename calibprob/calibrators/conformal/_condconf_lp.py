r"""The exact test threshold of conditional conformal (Gibbs, Cherian & Candès 2023), by LP.

With calibration scores :math:`S_1, \dots, S_n`, features :math:`\Phi_i = \Phi(x_i) \in
\mathbb R^d`, :math:`\tau = 1 - \alpha` and a test point with features :math:`\varphi =
\Phi(x_{n+1})`, the augmented quantile regression at an imputed score :math:`S` has the dual

.. math::

    V(S) = \max_{\eta}\ \sum_{i=1}^{n} \eta_i S_i + \eta_{n+1} S
    \quad\text{s.t.}\quad \sum_{i=1}^{n} \eta_i \Phi_i + \eta_{n+1}\varphi = 0,\quad
    \tau - 1 \le \eta_i \le \tau .

Write :math:`h(e) = \max\{\textstyle\sum_i \eta_i S_i : \sum_i \eta_i \Phi_i = -e\varphi,\
\eta_i \in [\tau-1, \tau]\}`, the calibration-only LP whose right-hand side is tilted by
:math:`e = \eta_{n+1}`. Then :math:`V(S) = \max_e h(e) + eS` is convex in :math:`S` with
slope :math:`\eta_{n+1}(S)`, non-decreasing, and the test point is in the set iff
:math:`\eta_{n+1}(S) < \theta` (:math:`\theta = \tau` deterministic,
:math:`\theta = U \sim \mathrm{Unif}(\tau-1, \tau)` randomised). So the set is
:math:`\{S \le S^*\}` with :math:`S^* = -h'(\theta^-)`. By LP duality
:math:`h(e) = \min_\beta \sum_i \ell_\tau(S_i - \Phi_i^\top\beta) - e\,\varphi^\top\beta`
(:math:`\ell_\tau` the pinball loss), and :math:`-h'(\theta^-)` is the smallest
:math:`\varphi^\top\beta` over the minimisers :math:`\beta` of the tilted problem at
:math:`e = \theta`:

.. math::

    S^* = \min\{\varphi^\top\beta :\ \beta \in \arg\min_\beta \textstyle\sum_i
          \ell_\tau(S_i - \Phi_i^\top\beta) - \theta\,\varphi^\top\beta\}.

For the intercept alone this is :math:`S_{(\lceil \tau(n+1) \rceil)}`, split conformal.

Computation (exact, no grid, no bisection):

1. the calibration-only LP (:math:`e = 0`) is solved once per level with SciPy's HiGHS
   (``scipy.optimize.linprog(method="highs")``, tolerances 1e-10); its :math:`d` interpolated
   points form the starting basis (:class:`_Start`);
2. **fast path** (:func:`fast_threshold`): for each *distinct* ``(phi, theta)`` (group
   indicators take few distinct values, so 1 000 test points in six overlapping groups need at
   most 64 paths), the tilt :math:`e` is followed from 0 to :math:`\theta` by dual-simplex
   pivots: the basic duals move linearly in :math:`e`; when one reaches a bound it leaves, and
   the ratio test on the residuals of the other points picks the point that enters (a
   :math:`d \times d` solve and :math:`O(nd)` work per pivot). A breakpoint at
   :math:`\theta` itself is not crossed (the left derivative). The result is accepted only if
   the KKT conditions of the tilted LP hold on *every* point;
3. otherwise (:func:`tilted_threshold`) the tilted LP is solved by HiGHS on a working set of
   the points nearest the calibration-only plane, the others held at the bound their residual
   sign gives, the KKT conditions checked on all points and violators added until none is left;
   the minimiser set is a single point when the interpolated points (dual strictly inside the
   box) have rank :math:`d`, and :math:`\beta` then solves them exactly; if not (degenerate,
   e.g. :math:`\tau(n_g+1)` an integer in a group) a second LP in :math:`\beta` minimises
   :math:`\varphi^\top\beta` over the minimisers, described by complementary slackness with
   the optimal :math:`\eta`, and is polished on its active constraints.

:math:`\varphi = 0` and an infeasible tilted LP (a test point in a group with too few
calibration points to reach :math:`\theta`) give :math:`S^* = +\infty`.

References
----------
Gibbs, I., Cherian, J. J. and Candès, E. J. (2023). Conformal prediction with
conditional guarantees. arXiv:2305.12616, §3-4 (the augmented quantile regression,
its dual, and the monotonicity of :math:`\eta_{n+1}(S)`).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from scipy.linalg import qr
from scipy.optimize import linprog

from calibprob._core.stable import pow2_scale
from calibprob._core.tables import column_rank

__all__ = ["tilted_threshold", "fast_threshold", "thresholds"]

#: Dual values within this of a bound are at the bound (HiGHS returns bounds exactly).
ETA_TOL = 1e-9


#: HiGHS tolerances at their tightest: its defaults (1e-7) would let a vertex whose reduced cost
#: is below 1e-7 pass as optimal, moving the threshold by as much.
_HIGHS_OPTIONS = {"dual_feasibility_tolerance": 1e-10, "primal_feasibility_tolerance": 1e-10}


def _highs(
    c: np.ndarray,
    A_eq: np.ndarray | None,
    b_eq: np.ndarray | None,
    bounds: tuple[float | None, float | None],
    A_ub: np.ndarray | None = None,
    b_ub: np.ndarray | None = None,
) -> Any:
    return linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=bounds, method="highs", options=_HIGHS_OPTIONS)


def _tol(S: np.ndarray) -> float:
    return 1e-10 * (1.0 + float(np.max(np.abs(S))))


def _screened_lp(
    S: np.ndarray, Phi: np.ndarray, b: np.ndarray, tau: float, r0: np.ndarray, order: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """The tilted dual LP on a working set, grown until the KKT conditions hold on every point.

    ``order`` sorts the points by :math:`|r_0|`. Returns ``(eta, beta)`` of the full LP, or
    ``None`` when it is infeasible.
    """
    n = S.size
    W = np.zeros(n, dtype=bool)
    W[order[: min(k, n)]] = True
    fixed = np.where(r0 >= 0, tau, tau - 1.0)
    tol = _tol(S)
    while True:
        rhs = b - Phi[~W].T @ fixed[~W]
        res = _highs(-S[W], Phi[W].T, rhs, (tau - 1.0, tau))
        if res.status == 2:  # infeasible on the working set: widen it (all points: truly infeasible)
            if W.all():
                return None
            W[order[: min(2 * int(W.sum()), n)]] = True
            continue
        if res.status != 0:  # pragma: no cover - HiGHS numerical failure
            raise RuntimeError(f"HiGHS failed on the conditional-conformal LP: {res.message}")
        beta = -res.eqlin.marginals
        r = S - Phi @ beta
        bad = ~W & (((fixed == tau) & (r < -tol)) | ((fixed != tau) & (r > tol)))
        if not bad.any():
            eta = fixed.copy()
            eta[W] = res.x
            return eta, beta
        W |= bad


def _exact_on(Phi_A: np.ndarray, S_A: np.ndarray, phi: np.ndarray) -> float | None:
    r"""``phi @ beta`` for ``Phi_A beta = S_A`` when that determines it (``phi`` in the row space), else None."""
    if Phi_A.shape[0] == 0:
        return None
    beta, *_ = np.linalg.lstsq(Phi_A, S_A, rcond=None)
    # phi must lie in the row space of Phi_A for phi @ beta to be the same for every solution
    coef, *_ = np.linalg.lstsq(Phi_A.T, phi, rcond=None)
    if np.linalg.norm(Phi_A.T @ coef - phi) > 1e-9 * (1.0 + np.linalg.norm(phi)):
        return None
    return float(phi @ beta)


def _min_over_minimisers(S: np.ndarray, Phi: np.ndarray, phi: np.ndarray, eta: np.ndarray, tau: float) -> float:
    r"""Smallest :math:`\varphi^\top\beta` over the dual solutions complementary to ``eta`` (step 3)."""
    inner = (eta > tau - 1.0 + ETA_TOL) & (eta < tau - ETA_TOL)
    upper = ~inner & (eta >= tau - ETA_TOL)
    lower = ~inner & ~upper
    A_ub = np.vstack([Phi[upper], -Phi[lower]])
    b_ub = np.concatenate([S[upper], -S[lower]])
    res = _highs(
        phi,
        Phi[inner] if inner.any() else None,
        S[inner] if inner.any() else None,
        (None, None),
        A_ub=A_ub,
        b_ub=b_ub,
    )
    if res.status != 0:  # pragma: no cover - the set is non-empty (it holds the LP's beta)
        raise RuntimeError(f"HiGHS failed on the threshold LP: {res.message}")
    beta = res.x
    slack = b_ub - A_ub @ beta
    active = np.vstack([Phi[inner], A_ub[slack <= 1e-7 * (1.0 + np.abs(b_ub))]])
    rhs = np.concatenate([S[inner], b_ub[slack <= 1e-7 * (1.0 + np.abs(b_ub))]])
    exact = _exact_on(active, rhs, phi)  # polish the vertex: HiGHS is exact to its tolerances only
    return float(phi @ beta) if exact is None else exact


def tilted_threshold(
    S: np.ndarray,
    Phi: np.ndarray,
    phi: np.ndarray,
    tau: float,
    theta: float,
    r0: np.ndarray,
    order: np.ndarray | None = None,
    k: int | None = None,
) -> float:
    r"""The cutoff :math:`S^* = -h'(\theta^-)` of one test feature vector (module docstring).

    Parameters
    ----------
    S : ndarray, shape (n,)
    Phi : ndarray, shape (n, d)
    phi : ndarray, shape (d,)
    tau : float
        :math:`1 - \alpha`.
    theta : float
        :math:`\tau` (deterministic) or a draw of :math:`\mathrm{Unif}(\tau - 1, \tau)`.
    r0 : ndarray, shape (n,)
        Residuals of the calibration-only solution (``_Start.r0``; they order the working set).
    order : ndarray of int, shape (n,), optional
        ``argsort(|r0|)``, computed once by :func:`thresholds`.
    k : int, optional
        Initial working-set size (default ``max(64, 20 d)``).

    Returns
    -------
    float
        :math:`+\infty` when ``phi`` is zero or the tilted LP is infeasible.
    """
    if not np.any(phi):
        return np.inf
    k = max(64, 20 * Phi.shape[1]) if k is None else k
    order = np.argsort(np.abs(r0), kind="stable") if order is None else order
    sol = _screened_lp(S, Phi, -theta * phi, tau, r0, order, k)
    if sol is None:
        return np.inf
    eta, _ = sol
    inner = (eta > tau - 1.0 + ETA_TOL) & (eta < tau - ETA_TOL)
    d = Phi.shape[1]
    # the rank on unit-norm columns: features in different units are not "dependent"
    if inner.sum() >= d and column_rank(Phi[inner]) == d:
        exact = _exact_on(Phi[inner], S[inner], phi)
        if exact is not None:
            return exact
    return _min_over_minimisers(S, Phi, phi, eta, tau)


class _Start:
    """The calibration-only solution as a starting basis for the parametric pivots (step 2, fast path)."""

    def __init__(self, S: np.ndarray, Phi: np.ndarray, tau: float) -> None:
        res = _highs(-S, Phi.T, np.zeros(Phi.shape[1]), (tau - 1.0, tau))
        if res.status != 0:  # pragma: no cover - e = 0 is always feasible (eta = 0)
            raise RuntimeError(f"HiGHS failed on the calibration-only LP: {res.message}")
        self.tau = tau
        self.eta = np.asarray(res.x, float)
        self.r0 = S - Phi @ (-res.eqlin.marginals)
        self.order = np.argsort(np.abs(self.r0), kind="stable")
        self.basis = self._basis(Phi, _tol(S))

    def _basis(self, Phi: np.ndarray, tol: float) -> np.ndarray | None:
        """``d`` interpolated points with independent features, or None (then every cutoff uses the LP)."""
        d = Phi.shape[1]
        cand = np.flatnonzero(np.abs(self.r0) <= 1e3 * tol)
        if cand.size < d:
            return None
        _, R, piv = qr(Phi[cand].T, pivoting=True, mode="economic")
        if abs(R[d - 1, d - 1]) <= 1e-10 * abs(R[0, 0]):
            return None
        return cand[np.sort(piv[:d])]


def _leave(
    eta_B: np.ndarray, g: np.ndarray, tau: float, room: float
) -> tuple[float, int, float] | tuple[float, None, None]:
    """Step to the first basic dual that reaches a bound, its index and that bound (None if beyond ``room``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        steps = np.where(g > 0, (eta_B - (tau - 1.0)) / g, np.where(g < 0, (eta_B - tau) / g, np.inf))
    steps = np.maximum(steps, 0.0)
    j = int(np.argmin(steps))
    # a breakpoint at theta itself (to rounding: tau (n_g + 1) an integer in a group) is not crossed:
    # the cutoff is the left derivative -h'(theta^-), the vertex optimal just below theta
    if steps[j] >= room - 1e-10:
        return room, None, None
    return float(steps[j]), j, (tau - 1.0 if g[j] > 0 else tau)


def _enter(
    r: np.ndarray, a: np.ndarray, at_upper: np.ndarray, nonbasic: np.ndarray
) -> tuple[int, float] | tuple[None, None]:
    """Dual ratio test: the non-basic point whose residual first changes sign along the edge (None: unbounded)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.where(at_upper & (a > 0), r / a, np.where(~at_upper & (a < 0), r / a, np.inf))
    lam[~nonbasic] = np.inf
    i = int(np.argmin(lam))
    return (None, None) if not np.isfinite(lam[i]) else (i, max(float(lam[i]), 0.0))


def _pivot_path(
    S: np.ndarray, Phi: np.ndarray, phi: np.ndarray, theta: float, start: _Start, max_pivots: int = 500
) -> tuple[np.ndarray, np.ndarray | None] | None:
    r"""Follow the tilt :math:`e` from 0 to :math:`\theta` by dual-simplex pivots; ``(beta, eta)`` or None."""
    # fast_threshold calls this only when the start has a basis
    tau, B = start.tau, cast(np.ndarray, start.basis).copy()
    n = S.size
    eta = np.where(start.r0 >= 0, tau, tau - 1.0)
    nonbasic = np.ones(n, dtype=bool)
    nonbasic[B] = False
    eta[B] = np.linalg.solve(Phi[B].T, -Phi[nonbasic].T @ eta[nonbasic])
    beta = np.linalg.solve(Phi[B], S[B])
    t = 0.0
    for _ in range(max_pivots):
        g = np.linalg.solve(Phi[B].T, phi)
        step, j, bound = _leave(eta[B], g, tau, theta - t)
        eta[B] -= step * g
        t += step
        if j is None:
            return beta, eta
        leaving = B[j]
        eta[leaving] = bound
        delta = np.linalg.solve(Phi[B], -np.eye(B.size)[j] * (1.0 if bound == tau else -1.0))
        r = S - Phi @ beta
        nonbasic[leaving] = True
        i, lam = _enter(r, Phi @ delta, eta >= tau - ETA_TOL, nonbasic & (np.arange(n) != leaving))
        if i is None:
            return np.full_like(beta, np.nan), None  # the tilted LP is infeasible beyond t < theta
        beta = beta + lam * delta
        B[j] = i
        nonbasic[i] = False
        beta = np.linalg.solve(Phi[B], S[B])  # re-anchor on the interpolation equations: no drift
    return None


def _kkt_holds(
    S: np.ndarray, Phi: np.ndarray, phi: np.ndarray, theta: float, tau: float, beta: np.ndarray, eta: np.ndarray
) -> bool:
    """Optimality of ``(eta, beta)`` for the tilted LP, checked on every point."""
    tol = _tol(S)
    if np.any(eta < tau - 1.0 - 1e-12) or np.any(eta > tau + 1e-12):
        return False
    if np.linalg.norm(Phi.T @ eta + theta * phi) > 1e-8 * (1.0 + np.abs(Phi).sum(axis=0).max()):
        return False
    r = S - Phi @ beta
    inner = (eta > tau - 1.0 + ETA_TOL) & (eta < tau - ETA_TOL)
    return not (
        np.any(np.abs(r[inner]) > 1e3 * tol)
        or np.any(r[eta >= tau - ETA_TOL] < -1e3 * tol)
        or np.any(r[eta <= tau - 1.0 + ETA_TOL] > 1e3 * tol)
    )


def fast_threshold(S: np.ndarray, Phi: np.ndarray, phi: np.ndarray, tau: float, theta: float, start: _Start) -> float:
    r"""The cutoff by pivots from the calibration-only basis, verified; the LP route when it cannot be."""
    if not np.any(phi):
        return np.inf
    if start.basis is not None:
        path = _pivot_path(S, Phi, phi, theta, start)
        if path is not None:
            beta, eta = path
            if eta is None:
                return np.inf
            if _kkt_holds(S, Phi, phi, theta, tau, beta, eta):
                return float(phi @ beta)
    return tilted_threshold(S, Phi, phi, tau, theta, start.r0, start.order)


def thresholds(S: np.ndarray, Phi: np.ndarray, phi_test: np.ndarray, tau: float, theta: np.ndarray) -> np.ndarray:
    r"""Cutoffs :math:`S^*` of every test point, one LP per distinct ``(phi, theta)``.

    Parameters
    ----------
    S : ndarray, shape (n,)
    Phi : ndarray, shape (n, d)
    phi_test : ndarray, shape (m, d)
    tau : float
    theta : ndarray, shape (m,)
        The dual threshold of each test point.

    Returns
    -------
    ndarray, shape (m,)
    """
    # The cutoff is positively homogeneous in the scores (the LP's objective is linear in S), and
    # HiGHS's tolerances are absolute: solve in units of a power of two near max|S| (an exact
    # rescaling) so that scores of size 1e200 or 1e-200 solve like scores of size one.
    unit = float(pow2_scale(S))
    S = S / unit
    start = _Start(S, Phi, tau)
    keys = np.column_stack([phi_test, theta])
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    out = np.array([fast_threshold(S, Phi, u[:-1], tau, u[-1], start) for u in uniq])
    return out[inverse.reshape(-1)] * unit
