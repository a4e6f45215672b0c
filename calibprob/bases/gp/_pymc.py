r"""PyMC models of the GP hyperparameters, compiled once, and their MAP fit.

The hyperparameters are free variables in log space — ``log_lengthscale``
(dims ``feature``), ``log_variance`` and, when noise is estimated,
``log_noise`` — and the (restricted) log marginal likelihood or the VFE bound
enters as a ``pm.Potential``. The training data are ``pm.Data`` containers, so
a single compiled ``logp``/``dlogp`` function serves every data size and
every restart: it is compiled once per configuration (kernel, p, mean, noise,
objective, input dimension, nugget/jitter, compile mode) and cached for the
life of the process.

**Priors.** ``priors="flat"`` (used by ``fit``): ``pm.Flat`` on every log-parameter, so the
MAP *is* the maximum (restricted) likelihood estimate; the optimiser's box
bounds keep it proper. ``priors="weak"`` (default of ``build_model``, meant for
``pm.sample``): independent ``Normal(centre, 2)`` on each log-parameter, the
centre being the data-based initial value of the fit (a factor e² ≈ 7.4 per
standard deviation), which makes the posterior proper without moving it
noticeably when the data are informative.

**Compile mode.** The exact GP's fit does not compile anything: it maximises
the same objective with a NumPy/SciPy value and gradient
(``calibprob.bases.gp._objective.ExactObjectiveNumpy``, equal to this model's
compiled ``logp``/``dlogp`` to 1e-9, see ``tests/bases/gp/test_objective.py``), and
keeps this model for ``build_model`` (sampling, MAP cross-checks). The sparse
(VFE) GP's fit compiles its model here, by default in ``"FAST_COMPILE"`` (the
Python VM calling NumPy/SciPy ops: no C compilation, ~2–4 s for the first fit).
Measured at n = 1000 for the exact objective before it moved to NumPy, the
backends were equally fast warm (``FAST_COMPILE`` 11.3 s, ``CVM`` 11.4 s,
``NUMBA`` 11.9 s) while ``CVM`` and Numba compile for tens of seconds cold, so
there is no reason to change the default. Change the mode for the process with
:func:`set_compile_mode`, the environment variable ``CALIBPROB_COMPILE_MODE``,
or per estimator with ``compile_mode=``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Self, TypeAlias

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize

from calibprob._core.optim import Adam
from calibprob._core.pytensor_setup import (
    GraphCache,
    blas_limit,
    get_blas_threads,
    get_compile_mode,
    mode_key,
    set_blas_threads,
    set_compile_mode,
)
from calibprob.bases.gp import _objective, kernels

__all__ = [
    "get_compile_mode",
    "set_compile_mode",
    "get_blas_threads",
    "set_blas_threads",
    "clear_cache",
]

#: Box bounds in log space, one ``(low, high)`` per entry of the packed vector.
Bounds: TypeAlias = list[tuple[float, float]]


class Objective(Protocol):
    """What the optimisers read of an objective: its value, and its value with the gradient (log-space θ),
    and the fits' record of both: how many times each was evaluated."""

    n_value: int
    n_grad: int

    def value(self, x: np.ndarray) -> float: ...

    def value_and_grad(self, x: np.ndarray) -> tuple[float, np.ndarray]: ...


_CACHE = GraphCache("calibprob.bases.gp")
#: The BLAS limiter of the GP fits (one policy for every module, ``calibprob._core.pytensor_setup``).
_blas_limit = blas_limit

# returned to L-BFGS-B when the Cholesky fails (NaN logp): a large finite value
# makes the line search backtrack instead of aborting
_PENALTY = 1e25


def clear_cache() -> None:
    """Forget every compiled objective (they are rebuilt on next use).

    References
    ----------
    PyTensor compilation modes: https://pytensor.readthedocs.io (``FAST_COMPILE``,
    ``CVM``, ``NUMBA``).

    Examples
    --------
    >>> from calibprob.bases.gp import clear_cache
    >>> clear_cache()   # the next fit recompiles its objective
    """
    _CACHE.clear()


@dataclass(frozen=True)
class GPModelSpec:
    """Everything that changes the symbolic graph (the cache key)."""

    kind: str  # "exact" or "vfe"
    kernel: str
    p: int
    mean: str
    noise: bool
    objective: str
    d: int
    nugget: float  # exact, noise=False: nugget * variance on the diagonal
    jitter: float  # vfe: jitter * variance on the diagonal of K_mm

    @property
    def names(self) -> tuple[str, ...]:
        base = ("log_lengthscale", "log_variance")
        return (*base, "log_noise") if self.noise else base

    @property
    def size(self) -> int:
        return self.d + 1 + int(self.noise)


def unpack(spec: GPModelSpec, x: np.ndarray) -> dict:
    """Log-space vector ``[log ℓ (d), log σ², (log σ_n²)]`` → positive θ dict."""
    x = np.asarray(x, dtype=float)
    theta = {"lengthscale": np.exp(x[: spec.d]), "variance": float(np.exp(x[spec.d]))}
    if spec.noise:
        theta["noise"] = float(np.exp(x[spec.d + 1]))
    return theta


def pack(spec: GPModelSpec, theta: dict) -> np.ndarray:
    """Inverse of :func:`unpack`."""
    parts: list[np.ndarray] = [
        np.log(np.broadcast_to(np.asarray(theta["lengthscale"], float), (spec.d,))),
        np.log(np.atleast_1d(np.asarray(theta["variance"], float))),
    ]
    if spec.noise:
        parts.append(np.log(np.atleast_1d(np.asarray(theta["noise"], float))))
    return np.concatenate(parts).astype(float)


def build_model(spec: GPModelSpec, data: dict, *, priors: str = "flat", centre: ArrayLike | None = None) -> Any:
    """The PyMC model of the hyperparameters (see module docstring).

    Parameters
    ----------
    spec : GPModelSpec
    data : dict
        ``{"X": (n, d), "y": (n,)}`` plus ``"Z": (m, d)`` for VFE.
    priors : {"flat", "weak"}
    centre : ndarray, shape (spec.size,), optional
        Prior centres (log space) for ``priors="weak"``.

    Returns
    -------
    pymc.Model
    """
    import pymc as pm
    import pytensor.tensor as pt

    with pm.Model(coords={"feature": np.arange(spec.d)}) as model:
        X = pm.Data("X", data["X"])
        y = pm.Data("y", data["y"])
        Z = pm.Data("Z", data["Z"]) if spec.kind == "vfe" else None
        if priors == "flat":
            log_ls = pm.Flat("log_lengthscale", dims="feature")
            log_var = pm.Flat("log_variance")
            log_noise = pm.Flat("log_noise") if spec.noise else None
        else:
            c = np.zeros(spec.size) if centre is None else np.asarray(centre, float)
            log_ls = pm.Normal("log_lengthscale", c[: spec.d], 2.0, dims="feature")
            log_var = pm.Normal("log_variance", c[spec.d], 2.0)
            log_noise = pm.Normal("log_noise", c[spec.d + 1], 2.0) if spec.noise else None
        ls = pm.Deterministic("lengthscale", pt.exp(log_ls), dims="feature")
        var = pm.Deterministic("variance", pt.exp(log_var))
        if spec.noise:
            noise = pm.Deterministic("noise", pt.exp(log_noise))
        else:
            noise = spec.nugget * var
        if spec.kind == "exact":
            K = kernels.kernel(spec.kernel, X, None, ls, var, p=spec.p, xp=pt)
            K = K + noise * pt.eye(X.shape[0])
            obj = _objective.exact_objective(K, y, mean=spec.mean, objective=spec.objective, xp=pt)
            name = "log_marginal_likelihood" if spec.objective == "ml" else "log_restricted_likelihood"
        else:
            assert Z is not None  # spec.kind == "vfe"
            Kmm = kernels.kernel(spec.kernel, Z, None, ls, var, p=spec.p, xp=pt)
            Kmm = Kmm + spec.jitter * var * pt.eye(Z.shape[0])
            Kmn = kernels.kernel(spec.kernel, Z, X, ls, var, p=spec.p, xp=pt)
            obj = _objective.vfe_objective(Kmm, Kmn, var, noise, y, mean=spec.mean, objective=spec.objective, xp=pt)
            name = "vfe_bound"
        pm.Potential(name, obj)
    return model


@dataclass
class Compiled:
    """A cached model with its compiled ``(logp, dlogp)`` function."""

    spec: GPModelSpec
    model: Any
    fn: Callable[..., Any]
    lock: threading.Lock = field(default_factory=threading.Lock)

    def value_and_grad(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        d = self.spec.d
        args = [x[:d], np.asarray(x[d])]
        if self.spec.noise:
            args.append(np.asarray(x[d + 1]))
        lp, grad = self.fn(*args)
        return float(lp), np.asarray(grad, dtype=float)


def _placeholder(spec: GPModelSpec) -> dict:
    data = {"X": np.zeros((2, spec.d)), "y": np.zeros(2)}
    if spec.kind == "vfe":
        data["Z"] = np.zeros((1, spec.d))
    return data


def compiled(spec: GPModelSpec, mode: Any) -> Compiled:
    """The compiled objective for ``spec`` (built and compiled on first use)."""

    def build() -> Compiled:
        import pytensor
        import pytensor.tensor as pt

        model = build_model(spec, _placeholder(spec), priors="flat")
        value_vars = model.value_vars
        logp = model.logp()
        grads: Any = pytensor.grad(logp, value_vars)  # a list: one gradient per value variable
        grad = pt.concatenate([pt.atleast_1d(g).ravel() for g in grads])
        return Compiled(spec, model, pytensor.function(value_vars, [logp, grad], mode=mode))

    return _CACHE.get((spec, mode_key(mode)), build)


class CompiledObjective:
    """The compiled PyMC objective of one data set, with the interface of the NumPy one.

    ``value`` and ``value_and_grad`` in log-space θ; used for the VFE bound (and
    for cross-checking the exact objective). Use as a context manager: it holds
    the entry's lock and sets (then clears) the ``pm.Data`` containers.
    """

    def __init__(self, entry: Compiled, data: dict):
        self.entry, self.data = entry, data
        self.n_value = 0
        self.n_grad = 0

    def __enter__(self) -> Self:
        import pymc as pm

        self.entry.lock.acquire()
        pm.set_data(self.data, model=self.entry.model)
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        import pymc as pm

        try:
            # drop the reference to the training data held by the shared variables
            pm.set_data(_placeholder(self.entry.spec), model=self.entry.model)
        finally:
            self.entry.lock.release()
        return False

    def value(self, x: ArrayLike) -> float:
        self.n_value += 1
        return self.entry.value_and_grad(np.asarray(x, float))[0]

    def value_and_grad(self, x: ArrayLike) -> tuple[float, np.ndarray]:
        self.n_grad += 1
        return self.entry.value_and_grad(np.asarray(x, float))


def adam(
    objective: Objective, x0: ArrayLike, bounds: Bounds, *, steps: int, learning_rate: float, n: int
) -> tuple[np.ndarray, float]:
    """A fixed number of Adam steps on the objective (log-space θ, clipped to the box).

    The base-model protocol of Capone et al.'s code (GPyTorch, Adam, lr 0.1, 20
    steps): a loose fit, kept only to reproduce their tables; use L-BFGS-B
    (:func:`maximize`) for a fit to convergence.

    Parameters
    ----------
    objective : object
        ``value_and_grad(x) -> (float, ndarray)``.
    x0, bounds
        Start and box (log space).
    steps, learning_rate
    n : int
        Number of observations (GPyTorch minimises the *mean* negative ML).

    Returns
    -------
    x : ndarray
    value : float
        The objective at ``x``.
    """
    lo = np.array([b[0] for b in bounds])
    hi = np.array([b[1] for b in bounds])
    x = np.clip(np.asarray(x0, dtype=float), lo, hi)
    opt = Adam(x.shape, learning_rate)
    for t in range(1, int(steps) + 1):
        lp, grad = objective.value_and_grad(x)
        if not (np.isfinite(lp) and np.all(np.isfinite(grad))):
            raise RuntimeError(
                f"Adam step {t}: the objective is not finite at theta={np.exp(x)}; "
                "use optimizer='lbfgs' or standardise the data."
            )
        g = -np.asarray(grad) / n
        x = np.clip(x - opt.step(g), lo, hi)
    value = objective.value(x)
    return x, float(value)


def _negative(objective: Objective) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
    """``x -> (-value, -gradient)`` for L-BFGS-B; a failed factorisation gives a large finite value."""

    def negative(x: np.ndarray) -> tuple[float, np.ndarray]:
        lp, grad = objective.value_and_grad(x)
        if not (np.isfinite(lp) and np.all(np.isfinite(grad))):
            return _PENALTY, np.zeros_like(x)
        return -lp, -grad

    return negative


def _improve_start(objective: Objective, x0: ArrayLike, d: int, bounds: Bounds) -> np.ndarray:
    """The start-point scan of :func:`maximize` (values only, no gradient).

    A start whose covariance is numerically singular (long lengthscales of a smooth
    kernel on few points) gives a NaN objective, and L-BFGS-B then stops there or
    wanders into the degenerate short-lengthscale mode: the lengthscales are halved
    (within the box) until the objective is finite. Then the signal variance: smooth
    kernels with a constant mean want variances far above var(y), and from var(y)
    the gradient first shrinks the lengthscales into the degenerate "white noise"
    mode (seen on Branin with Matérn nu = 9.5, n = 40); a scan over decades of the
    variance at the start's lengthscales picks the basin. One Cholesky + one solve
    per point.
    """
    lo = np.array([b[0] for b in bounds])
    x = np.array(x0, dtype=float)
    for _ in range(30):
        lp = objective.value(x)
        if np.isfinite(lp):
            break
        if np.all(x[:d] <= lo[:d]):
            return np.array(x0, dtype=float)
        x[:d] = np.maximum(x[:d] - np.log(2.0), lo[:d])
    best, best_lp = x, lp
    for shift in np.log(10.0) * np.arange(-2.0, 5.0):
        cand = x.copy()
        cand[d] = np.clip(x[d] + shift, bounds[d][0], bounds[d][1])
        if shift == 0.0 and np.array_equal(cand, x):
            continue  # already evaluated
        lp_c = objective.value(cand)
        if np.isfinite(lp_c) and lp_c > best_lp:
            best, best_lp = cand, lp_c
    return best


def _best_run(runs: list[Any]) -> tuple[np.ndarray, float, list[Any]]:
    ok = [r for r in runs if np.isfinite(r.fun) and r.fun < _PENALTY]
    if not ok:
        raise RuntimeError(
            "GP hyperparameter optimisation failed from every start (the covariance "
            "matrix was never positive definite). Standardise X and y, use noise=True, "
            "or pass theta with optimize=False."
        )
    best = min(ok, key=lambda r: r.fun)
    return np.asarray(best.x, float), float(-best.fun), runs


def maximize(
    objective: Objective,
    d: int,
    starts: Sequence[np.ndarray],
    bounds: Bounds,
    *,
    maxiter: int = 300,
    scan: bool = True,
) -> tuple[np.ndarray, float, list[Any]]:
    """Maximise an objective from several starts with L-BFGS-B.

    Parameters
    ----------
    objective : object
        ``value(x) -> float`` (used by the start-point scan, no gradient) and
        ``value_and_grad(x) -> (float, ndarray)`` (used by L-BFGS-B); NaN where
        the covariance is not positive definite.
        ``calibprob.bases.gp._objective.ExactObjectiveNumpy`` or
        :class:`CompiledObjective`.
    d : int
        Number of lengthscales (the first ``d`` entries of ``x``).
    starts : list of ndarray, shape (size,)
    bounds : list of (low, high)
        Box in log space.
    maxiter : int
    scan : bool, default True
        Run the value-only start-point scan (:func:`_improve_start`) first.

    Returns
    -------
    best_x : ndarray
    best_value : float
        The objective (log-likelihood scale, larger is better).
    runs : list of scipy.optimize.OptimizeResult
    """
    negative = _negative(objective)
    runs = []
    for x0 in starts:
        x0 = _improve_start(objective, x0, d, bounds) if scan else np.asarray(x0, float)
        res = optimize.minimize(
            negative,
            x0,
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={"maxiter": maxiter},
        )
        res.x0 = np.asarray(x0, float)  # the point L-BFGS-B started from (after the scan)
        runs.append(res)
    return _best_run(runs)


#: L-BFGS-B's default relative-decrease tolerance (``factr = 1e7`` times machine epsilon),
#: used as the stopping rule of :func:`refine` so that both stop at the same precision.
_FTOL = 1e7 * np.finfo(float).eps
_GTOL = 1e-5  # L-BFGS-B's default projected-gradient tolerance


def fd_hessian(objective: Objective, x: ArrayLike, *, step: float = 1e-4) -> np.ndarray:
    """Hessian of the objective at ``x`` by central differences of its gradient (``2 size`` evaluations).

    Parameters
    ----------
    objective : object
        ``value_and_grad(x)``.
    x : ndarray
    step : float
        Step in log space.

    Returns
    -------
    ndarray, shape (size, size)
        Symmetrised; NaN when a gradient is not finite.
    """
    x = np.asarray(x, float)
    H = np.empty((x.size, x.size))
    for j in range(x.size):
        e = np.zeros(x.size)
        e[j] = step
        H[:, j] = (objective.value_and_grad(x + e)[1] - objective.value_and_grad(x - e)[1]) / (2.0 * step)
    return 0.5 * (H + H.T)


def _inverse_positive(H: np.ndarray) -> np.ndarray | None:
    """Inverse of the minimisation Hessian ``-H`` with its eigenvalues kept positive (``None`` if unusable)."""
    if not np.all(np.isfinite(H)):
        return None
    lam, V = np.linalg.eigh(-H)
    top = float(np.max(np.abs(lam)))
    if not top > 0:
        return None
    lam = np.maximum(np.abs(lam), 1e-6 * top)
    return (V / lam) @ V.T


def _quasi_newton(
    negative: Callable[[np.ndarray], tuple[float, np.ndarray]],
    x: np.ndarray,
    F: float,
    g: np.ndarray,
    B: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    max_steps: int,
) -> tuple[np.ndarray, float, np.ndarray, int, int, bool]:
    """BFGS steps from ``x`` with the inverse Hessian ``B``; stops as L-BFGS-B does, or hands over.

    Returns ``(x, F, g, n_eval, n_iter, converged)``; ``converged`` is False when a
    step would leave the box, the line search fails or ``max_steps`` is reached (the
    caller then finishes with L-BFGS-B from ``x``).
    """
    n_eval = n_iter = 0
    for _ in range(max_steps):
        if np.max(np.abs(g)) <= _GTOL:
            return x, F, g, n_eval, n_iter, True
        step = -B @ g
        if np.any(x + step < lo) or np.any(x + step > hi):
            return x, F, g, n_eval, n_iter, False  # a bound may be active: L-BFGS-B's job
        t, slope = 1.0, float(g @ step)
        for _ in range(8):  # backtracking (Armijo)
            xn = x + t * step
            Fn, gn = negative(xn)
            n_eval += 1
            if Fn < _PENALTY and Fn <= F + 1e-4 * t * slope:
                break
            t *= 0.5
        else:
            return x, F, g, n_eval, n_iter, False
        n_iter += 1
        s, yv = xn - x, gn - g
        sy = float(s @ yv)
        if sy > 1e-12:
            r = 1.0 / sy
            M = np.eye(x.size) - r * np.outer(s, yv)
            B = M @ B @ M.T + r * np.outer(s, s)
        decrease = (F - Fn) / max(abs(F), abs(Fn), 1.0)
        x, F, g = xn, Fn, gn
        if decrease <= _FTOL:
            return x, F, g, n_eval, n_iter, True
    return x, F, g, n_eval, n_iter, False


def refine(
    objective: Objective,
    x0: ArrayLike,
    bounds: Bounds,
    hessian: np.ndarray,
    *,
    max_steps: int = 50,
    maxiter: int = 300,
) -> tuple[np.ndarray, float, list[Any]]:
    r"""Maximise from a warm start whose Hessian is (approximately) known: BFGS, then L-BFGS-B if needed.

    The second stage of a subset fit (:class:`calibprob.bases.gp.GaussianProcessRegressor`,
    ``n_hyper_subset``): ``x0`` is the optimum on a subset of :math:`m` rows and
    ``hessian`` that subset objective's Hessian times :math:`n/m` (the data terms of
    a log-likelihood grow linearly in :math:`n`). Started with that curvature, BFGS
    (:func:`_quasi_newton`, full steps accepted by an Armijo test) takes about half the
    evaluations L-BFGS-B needs from the same point, whose first steps only learn the
    curvature. It stops by L-BFGS-B's own rules (relative decrease below
    ``factr * eps``, or every gradient entry below 1e-5), so the optimum is the one
    L-BFGS-B would report; if a step would leave the box, a line search fails or the
    Hessian is unusable, L-BFGS-B finishes from the current point.

    Parameters
    ----------
    objective : object
        ``value_and_grad(x)`` as in :func:`maximize`.
    x0 : ndarray
        Start (inside the box).
    bounds : list of (low, high)
    hessian : ndarray, shape (size, size)
        Estimate of the objective's Hessian (maximisation: negative definite).
    max_steps, maxiter : int

    Returns
    -------
    best_x, best_value, runs
        As in :func:`maximize` (one run; ``nfev`` counts both stages, ``method`` says
        which finished).
    """
    negative = _negative(objective)
    lo = np.array([b[0] for b in bounds])
    hi = np.array([b[1] for b in bounds])
    x = np.clip(np.asarray(x0, float), lo, hi)
    F, g = negative(x)
    B = _inverse_positive(hessian)
    n_eval, n_iter, done = 1, 0, False
    if F < _PENALTY and B is not None:
        x, F, g, k, n_iter, done = _quasi_newton(negative, x, F, g, B, lo, hi, max_steps)
        n_eval += k
    if done:
        res = optimize.OptimizeResult(x=x, fun=F, jac=g, success=True, nit=n_iter, nfev=n_eval)
        res.message = "BFGS from the subset Hessian: converged (L-BFGS-B's tolerances)"
    else:
        res = optimize.minimize(negative, x, jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": maxiter})
        res.nfev += n_eval
        res.nit += n_iter
    res.x0 = np.asarray(x0, float)
    return _best_run([res])


def heuristics(spec: GPModelSpec, X: np.ndarray, y: np.ndarray, nugget: float) -> tuple[np.ndarray, Bounds, float]:
    """Data-based initial point, box bounds (log space) and scales.

    Lengthscale ℓ_j: start at std(X_j)·√d, box [1e-3, 1e3]·std(X_j).
    Variance: start at s_y = mean(y²) (zero mean) or var(y) (constant mean),
    box [1e-4, 1e4]·s_y. Noise: start at 0.1·s_y, box [max(nugget, 1e-10), 10]·s_y.
    """
    sx = X.std(axis=0)
    sx = np.where(sx > 0, sx, 1.0)
    sy = float(np.mean(y**2)) if spec.mean == "zero" else float(np.var(y))
    if not sy > 0:
        sy = 1.0
    x0 = [np.log(sx * np.sqrt(spec.d)), [np.log(sy)]]
    bounds = [(float(np.log(1e-3 * s)), float(np.log(1e3 * s))) for s in sx]
    bounds.append((float(np.log(1e-4 * sy)), float(np.log(1e4 * sy))))
    if spec.noise:
        x0.append([np.log(0.1 * sy)])
        bounds.append((float(np.log(max(nugget, 1e-10) * sy)), float(np.log(10.0 * sy))))
    return np.concatenate(x0), bounds, sy


def starts(x0: np.ndarray, bounds: Bounds, n: int, rng: np.random.Generator, spec: GPModelSpec) -> list[np.ndarray]:
    """``x0`` plus ``n - 1`` seeded random starts around it (clipped to the box).

    Lengthscales and variance are perturbed log-uniformly by up to a factor 10
    and 4; the noise start is log-uniform in [1e-4, 0.5] times the data scale.
    """
    out = [np.clip(x0, [b[0] for b in bounds], [b[1] for b in bounds])]
    lo = np.array([b[0] for b in bounds])
    hi = np.array([b[1] for b in bounds])
    for _ in range(max(n, 1) - 1):
        x = x0.copy()
        x[: spec.d] += rng.uniform(-np.log(10.0), np.log(10.0), size=spec.d)
        x[spec.d] += rng.uniform(-np.log(4.0), np.log(4.0))
        if spec.noise:
            x[spec.d + 1] = x0[spec.d] + rng.uniform(np.log(1e-4), np.log(0.5))
        out.append(np.clip(x, lo, hi))
    return out
