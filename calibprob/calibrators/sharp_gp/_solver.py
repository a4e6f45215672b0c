r"""Algorithm 1 of Capone et al. (2023): knots fitted in two passes from the tails inward.

:class:`_FullSolver` finds the MAP of the PyMC model of one level (:mod:`._graph`) by
L-BFGS-B, the outermost level of a pass freely (with restarts), every further one
constrained by its outer neighbour through Remark 5.3's substitution
:math:`\phi_{\text{next}} = \phi_{\text{prev}} - \exp(\Delta)`. :class:`_ScaledSolver`
is the one-factor line search of the paper's §6 (NumPy, no compiled graph).
:func:`_fit_path` runs either over the levels.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import optimize

from calibprob._core.ranks import RANK_TOL as _RANK_TOL
from calibprob.calibrators.sharp_gp._knots import q_lin

if TYPE_CHECKING:
    from calibprob.calibrators.sharp_gp._graph import _Compiled

# L-BFGS-B receives this when the covariance is not positive definite (NaN)
_PENALTY = 1e25
# box of the free log-hyperparameters around the base's (factor e^7 ≈ 1100)
_BOX = 7.0
# box of the log-decrement Δ of Remark 5.3 (exp(-15) ≈ 3e-7: "no change")
_DELTA_BOX = (-15.0, 3.0)
# L-BFGS-B relative reduction tolerance: the objective is a sum over N points and
# has plateaus (flat σ at long lengthscales); 1e-7 stops there without changing
# the solution measurably (tested on the toy of tests/calibrators/sharp_gp/test_sharp_gp.py)
_FTOL = 1e-7
# backtracking fractions toward the outer neighbour when |β| would grow inward
_BACKTRACK = (0.5, 0.25, 0.125, 0.0)
# first log-decrement of a constrained knot (φ one fiftieth below its outer neighbour's)
_DELTA_START = float(np.log(0.02))
# warm start: the outer neighbour's log-decrements, raised to at least this value so
# that a coordinate it left unchanged (Δ near the lower bound, where the gradient in Δ
# is ~e^Δ ≈ 0) can still move
_WARM_FLOOR = -8.0


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
    # the optimiser's coordinates at the solution (Remark 5.3's log-decrements for a
    # constrained knot; None for a pass's first knot), the next knot's warm start
    u: np.ndarray | None = None


def _passes(levels: np.ndarray, residual: np.ndarray) -> tuple[list[tuple[str, np.ndarray]], np.ndarray]:
    """Split levels by the sign β must have; each pass ordered from its tail inward."""
    n = residual.size
    j0 = int(np.sum(residual < 0))
    t = levels * (n + 1)
    lower = levels[t <= j0 + _RANK_TOL]
    upper = levels[t >= j0 + 1 - _RANK_TOL]
    skipped = levels[(t > j0 + _RANK_TOL) & (t < j0 + 1 - _RANK_TOL)]
    return [("upper", upper[::-1]), ("lower", lower)], skipped


def _backtrack(
    knot: _Knot, prev: _Knot | None, evaluate: Callable[[float, np.ndarray], tuple[float, float, np.ndarray]]
) -> None:
    """Move φ back toward the outer neighbour's until |β| no longer grows inward.

    Eq. (7) does not keep :math:`|\beta|` shrinking toward the median; at the outer
    neighbour's φ the order statistic is guaranteed not to grow, so the last
    fraction (0) always succeeds. ``evaluate(level, φ) -> (β, sharpness, σ)``.
    """
    if prev is None or _inward_ok(knot.side, knot.beta, prev.beta):
        return
    for frac in _BACKTRACK:
        phi_t = prev.phi + frac * (knot.phi - prev.phi)
        b_t, s_t, _ = evaluate(knot.level, phi_t)
        if _inward_ok(knot.side, b_t, prev.beta):
            knot.phi, knot.beta, knot.sharpness = phi_t, b_t, s_t
            knot.backtracked = True
            knot.u = None  # the optimiser's solution is no longer the knot's φ
            return


def _inward_ok(side: str, beta_new: float, beta_prev: float) -> bool:
    tol = 1e-10 * max(1.0, abs(beta_prev))
    return beta_new <= beta_prev + tol if side == "upper" else beta_new >= beta_prev - tol


class _FullSolver:
    """MAP of the PyMC model per level, passes from the tails inward (Algorithm 1)."""

    def __init__(
        self,
        entry: _Compiled,
        data: dict,
        phi_ref: np.ndarray,
        free: np.ndarray,
        *,
        n_restarts: int,
        maxiter: int,
        rng: np.random.Generator,
        warm_start: bool = False,
        maxls: int = 20,
    ) -> None:
        self.entry = entry
        self.warm_start = warm_start
        self.data = data
        self.phi_ref = phi_ref
        self.free = free
        self.n_restarts = n_restarts
        self.maxiter = maxiter
        self.rng = rng
        self.ftol = _FTOL
        self.maxls = maxls  # L-BFGS-B line-search steps (scipy's default 20)

    def _minimize(self, u0: np.ndarray, bounds: list[tuple[float, float]]) -> Any:
        entry = self.entry
        n_eval = [0]

        def negative(u: np.ndarray) -> tuple[float, np.ndarray]:
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
            options={"maxiter": self.maxiter, "ftol": self.ftol, "maxls": self.maxls},
        )
        res.n_eval = n_eval[0]
        return res

    def evaluate(self, level: float, phi: np.ndarray) -> tuple[float, float, np.ndarray]:
        """β, sharpness and σ_cal at a given φ (unconstrained mode)."""
        self.entry.set_data({"level": np.asarray(level), "constrained": np.asarray(0.0)})
        _, beta, sharp, sigma, _ = self.entry.values(np.where(self.free > 0, phi, self.phi_ref))
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
            starts = [np.where(free, _DELTA_START, 0.0)]
            if self.warm_start and prev.u is not None:
                # consecutive knots move φ in similar directions by similar steps (Remark
                # 5.3): start from the outer neighbour's decrements (fewer evaluations)
                starts = [np.where(free, np.maximum(prev.u, _WARM_FLOOR), 0.0)]
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
            u=None if prev is None else np.asarray(best.x, float).copy(),
        )
        _backtrack(knot, prev, self.evaluate)
        knot.seconds = time.perf_counter() - t0
        return knot


class _ScaledSolver:
    """Line search over one lengthscale factor per level (NumPy, no gradient)."""

    def __init__(
        self,
        sigma_fn: Callable[[np.ndarray], np.ndarray],
        residual: np.ndarray,
        phi_ref: np.ndarray,
        d: int,
        *,
        grid: int = 17,
        bound: float = 4.0,
    ) -> None:
        self.sigma_fn = sigma_fn  # phi -> σ on the fit set
        self.r = residual
        self.phi_ref = phi_ref
        self.e = np.r_[np.ones(d), 0.0, 0.0]
        self.grid = grid
        self.bound = bound
        self.n_eval = 0

    def _phi(self, c: float) -> np.ndarray:
        return self.phi_ref + c * self.e

    def evaluate(self, level: float, phi: np.ndarray) -> tuple[float, float, np.ndarray]:
        sigma = self.sigma_fn(phi)
        beta = float(q_lin(level, self.r / sigma))
        return beta, float(np.mean((beta * sigma) ** 2)), sigma

    def _objective(self, level: float, c: float) -> float:
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
        _backtrack(knot, prev, self.evaluate)
        knot.seconds = time.perf_counter() - t0
        return knot


def _phi_from_passes(
    knots: Sequence[_Knot], levels: np.ndarray, passes: list[tuple[str, np.ndarray]], phi_ref: np.ndarray
) -> np.ndarray:
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


def _fit_path(
    solver: _FullSolver | _ScaledSolver, levels: np.ndarray, residual: np.ndarray
) -> tuple[list[_Knot], np.ndarray]:
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
