r"""Calibrated Bayesian optimisation (Deshpande, Marx & Kuleshov 2024, Algorithms 3-4).

:func:`minimize` runs Algorithm 3: at every step the GP :math:`M_{t-1}` is
composed with a recalibrator :math:`R_{t-1}`, the acquisition is maximised
under the recalibrated predictive :math:`M_{t-1} \circ R_{t-1}`, the objective
is evaluated, the GP is updated and the recalibrator rebuilt. The calibration
set (Algorithm 4) is one of

* ``"loo"`` — leave-one-out forecasts of every observation, from the GP's
  closed form (Dubrule 1983; :meth:`calibprob.bases.gp.GaussianProcessRegressor.loo`):
  no refits, same hyperparameters, in acquisition order (the paper's
  "leave-one-out cross-validation with a temporal ordering");
* ``"time-series"`` — one-step-ahead forecasts, observation :math:`i`
  predicted from observations :math:`1..i-1` with the current hyperparameters:
  these are the innovations of the Cholesky factor :math:`L` of
  :math:`K + \sigma_n^2 I` (:math:`e = L^{-1}(y - m)`, :math:`u_i = \Phi(e_i)`),
  so all :math:`n - 1` splits cost one factorisation;
* ``"online"`` — the forecasts actually issued before each observation
  (Algorithm 3 with :math:`\mathcal C_t` of eq. 7): one OSD step per BO step;
* ``"none"`` — the uncalibrated GP.

For ``"loo"`` and ``"time-series"`` the recalibrator is rebuilt from the
identity at every step by OSD over the calibration set
(:class:`calibprob.calibrators.online.OnlineQuantileRecalibrator`), as Algorithm 4 returns
"the recalibrator R obtained via (11) on C".

Conventions
-----------
* Minimisation. Inputs are mapped to :math:`[0, 1]^d`, outputs standardised
  (mean 0, sd 1 over the modelled values) before the GP is fitted — the paper
  normalises outputs (App. A).
* Default base: ARD squared-exponential GP, zero mean, estimated noise (the
  paper's RBF GP on normalised outputs), hyperparameters by maximum
  likelihood, refitted every ``refit_every`` steps (in between the GP is
  conditioned on the new data with the previous hyperparameters, no
  optimisation).
* Non-finite objective values (NaN, ±inf — including ``-inf``, treated as a
  failure, not a minimum) are **recorded as returned** in ``y`` and flagged in
  ``finite``; for the model the point is kept with the worst (largest) finite
  value observed so far, so the acquisition moves away from it instead of
  proposing it again; it is left out of every calibration set and of the
  best-so-far curve. If none of the initial points is finite the loop stops
  with a ``ValueError`` (nothing to model). Exceptions raised by the objective
  propagate.

References
----------
Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and
conformal prediction improves Bayesian optimization. AISTATS.
Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
processes. NeurIPS, App. (eq. 18, the sharp-GP UCB).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike
from scipy import special

from calibprob._core.estimator import clone
from calibprob._core.pytensor_setup import limit_blas_threads
from calibprob._core.validation import check_array, check_int
from calibprob.bases.gp import GaussianProcessRegressor
from calibprob.bo.acquisition import minimize_on_box
from calibprob.bo.calibration import CalibrationStrategy, ModelData, strategy_for, time_series_pit
from calibprob.bo.record import StepRecorder
from calibprob.bo.settings import CALIBRATIONS, CONFORMAL_CALIBRATIONS, BOSettings
from calibprob.datasets.functions import TestFunction, get_function, sample_design

__all__ = ["minimize", "CALIBRATIONS", "check_bounds", "default_gp"]

# kept for callers of the old private name (tests/bo/test_loop.py)
_time_series_pit = time_series_pit


def check_bounds(bounds: ArrayLike, d: int | None = None) -> np.ndarray:
    """Box bounds of shape (d, 2) with ``lower < upper`` and finite entries in every dimension.

    Parameters
    ----------
    bounds : array_like, shape (d, 2) or (2,)
        ``[[lower, upper], ...]``; a single pair is one dimension.
    d : int, optional
        Expected dimension.

    Returns
    -------
    ndarray, shape (d, 2)

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, App. A (inputs scaled to the unit box).

    Examples
    --------
    >>> from calibprob.bo import check_bounds
    >>> check_bounds([[0.0, 1.0], [-5.0, 5.0]]).tolist()
    [[0.0, 1.0], [-5.0, 5.0]]
    >>> try:
    ...     check_bounds([[1.0, 0.0]])
    ... except ValueError:
    ...     print("lower must be < upper")
    lower must be < upper
    """
    arr = check_array(bounds, "bounds", ndim=(1, 2))
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.shape[1] != 2:
        raise ValueError(f"bounds must have shape (d, 2) — one (lower, upper) pair per dimension; got {arr.shape}.")
    if d is not None and arr.shape[0] != d:
        raise ValueError(f"bounds must have {d} rows (one per input dimension); got {arr.shape[0]}.")
    bad = arr[:, 0] >= arr[:, 1]
    if bad.any():
        j = int(np.argmax(bad))
        raise ValueError(
            f"bounds must have lower < upper in every dimension; got lower={arr[j, 0]!r} >= "
            f"upper={arr[j, 1]!r} in dimension {j}. Pass [[lower, upper], ...]."
        )
    return arr


def default_gp() -> GaussianProcessRegressor:
    """The base GP of the BO loop: ARD squared exponential, zero mean, estimated noise, 3 ML starts.

    Returns
    -------
    calibprob.GaussianProcessRegressor
        Unfitted.

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, App. A (an RBF GP on normalised outputs).

    Examples
    --------
    >>> from calibprob.bo import default_gp
    >>> gp = default_gp()
    >>> gp.kernel, gp.mean, gp.n_restarts
    ('se', 'zero', 3)
    """
    return GaussianProcessRegressor(kernel="se", mean="zero", noise=True, n_restarts=3)


def _resolve_objective(
    objective: Any, bounds: ArrayLike | None, optimum: float | None, dim: int | None
) -> tuple[Callable[[np.ndarray], Any], np.ndarray, float | None, str]:
    name = getattr(objective, "__name__", type(objective).__name__)
    if isinstance(objective, str):
        objective = get_function(objective, dim)
    if isinstance(objective, TestFunction):
        name = objective.name
        bounds = objective.bounds if bounds is None else bounds
        optimum = objective.minimum if optimum is None else optimum
    elif not callable(objective):
        raise TypeError(
            f"objective must be a callable (n, d) -> (n,), a TestFunction or a test-function name; "
            f"got {type(objective).__name__}."
        )
    if bounds is None:
        raise ValueError("bounds are required for a plain callable objective: pass bounds=[[lo, hi], ...].")
    return objective, check_bounds(bounds), (None if optimum is None else float(optimum)), name


def minimize(
    objective: Any,
    *,
    bounds: ArrayLike | None = None,
    n_init: int = 5,
    n_steps: int = 25,
    acquisition: str = "ei",
    calibration: str = "loo",
    eta: float = 0.25,
    coupling: str = "isotonic",
    levels: Any = None,
    kappa: float = 2.0,
    xi: float = 0.0,
    gp: Any = None,
    refit_every: int = 1,
    X_init: ArrayLike | None = None,
    init_design: str = "uniform",
    n_candidates: int | None = None,
    n_starts: int = 5,
    sharp_level: float = 0.01,
    interval_level: float | None = None,
    design_lambda: float = 10.0,
    optimum: float | None = None,
    dim: int | None = None,
    seed: Any = 0,
    blas_threads: int | None = 1,
) -> xr.DataTree:
    r"""Minimise a black-box function by (calibrated) Bayesian optimisation.

    Parameters
    ----------
    objective : callable, TestFunction or str
        ``f(X (n, d)) -> (n,)``; a :class:`~calibprob.datasets.TestFunction` or
        its name (:func:`calibprob.datasets.get_function`) also supplies
        ``bounds`` and the known ``optimum``.
    bounds : array_like, shape (d, 2), optional
        Box ``[[lower, upper], ...]`` with ``lower < upper``.
    n_init : int, default 5
        Initial design size (the paper uses 3-5 random points).
    n_steps : int, default 25
        BO steps after the initial design.
    acquisition : {"ei", "pi", "lcb", "ucb", "sharp-ucb"}, default "ei"
        ``"lcb"`` and ``"ucb"`` are the same confidence bound for
        minimisation (level :math:`\Phi(-\kappa)`); ``"sharp-ucb"`` is Capone
        et al.'s eq. (18) (needs :mod:`calibprob.calibrators.sharp_gp`; only
        with ``calibration="none"``).
    calibration : {"loo", "time-series", "online", "none", "conformal", "conformal-loo"}, default "loo"
        Calibration set of Algorithm 4 (see the module docstring); ``"conformal"`` and
        ``"conformal-loo"`` (the uncalibrated GP or ``"loo"``) draw each query from the softmax of
        the lower confidence bound and issue its feedback-shift conformal set
        (``calibprob.bo.conformal``; acquisition ``"lcb"``/``"ucb"`` only).
    eta : float, default 0.25
        OSD step size of the recalibrator (> 0).
    coupling : {"isotonic", "independent"}, default "isotonic"
        Level coupling of the recalibrator (:class:`~calibprob.calibrators.online.OnlineQuantileRecalibrator`).
    levels : array_like, optional
        Levels tracked by the recalibrator; default
        :data:`~calibprob.predictive.DEFAULT_LEVELS` plus :math:`\Phi(-\kappa)`.
    kappa : float, default 2.0
        Confidence-bound weight (GPyOpt's default exploration weight 2).
    xi : float, default 0.0
        Improvement margin of EI/PI (in standardised output units).
    gp : GaussianProcessRegressor, optional
        Template base model (cloned with its hyperparameters); default
        :func:`default_gp`.
    refit_every : int, default 1
        Re-estimate the GP hyperparameters every this many steps (1: always).
    X_init : array_like, shape (n_init, d), optional
        Initial design; default ``n_init`` seeded points (``init_design``).
    init_design : {"uniform", "lhs", "sobol"}
    n_candidates, n_starts : int
        Acquisition optimiser: random screening points and L-BFGS-B starts.
    sharp_level : float, default 0.01
        Level :math:`\delta` of the sharp-GP bound (Capone et al. use 0.01).
    interval_level : float, optional
        Log, for every query, the interval issued at this level before its outcome and whether
        the outcome fell in it (``steps``: ``interval_lower``, ``interval_upper``, ``covered``):
        the central interval of the decision's forecast, or the conformal set's hull for the
        conformal calibrations (which default to 0.9). ``None``: not logged.
    design_lambda : float, default 10.0
        Inverse temperature :math:`\lambda` of the conformal calibrations' softmax design
        :math:`\propto \exp(-\lambda\,\mathrm{LCB})` (standardised units).
    optimum : float, optional
        Known global minimum (for regret); taken from a TestFunction.
    dim : int, optional
        Dimension of a d-dimensional test function given by name.
    seed : int
        One seed for the initial design, the GP restarts and the acquisition
        optimiser; with the same seed, calibrated and uncalibrated runs start
        from the same design.
    blas_threads : int or None, default 1
        BLAS threads while the loop runs (``threadpoolctl``): the matrices are
        tiny, and multi-threaded BLAS on a busy machine was measured 7× slower
        (spin-waiting threads). ``None`` leaves the setting alone.

    Returns
    -------
    xarray.DataTree
        Root attrs: every setting. Groups:

        ``evaluations`` (dims ``evaluation``, ``feature``): ``x``, ``y`` (as
        returned), ``finite``, ``initial``, ``y_model`` (value the GP saw),
        ``best_so_far``, and ``simple_regret``/``cumulative_regret`` when the
        optimum is known.

        ``steps`` (dim ``step`` = 1..n_steps): ``evaluation``, the forecast made
        *before* observing ``y``: ``forecast_mean``, ``forecast_std`` (base GP,
        original units), ``pit`` (PIT of ``y`` under the forecast used for the
        decision — recalibrated when calibrated), ``pit_base`` (under the base
        GP), ``calibration_error`` and ``calibration_error_base`` (running ECE
        of those PITs over steps 1..t, mean over 21 levels), ``acquisition_value``,
        ``refit``, ``lengthscale(step, feature)``, ``variance``, ``noise``,
        ``time_model``, ``time_calibration``, ``time_acquisition`` (s); with
        ``"sharp-ucb"`` also ``sharp_fitted`` (its ``pit`` is NaN: the sharp GP
        fits only the bound's level, not a whole predictive distribution).

        ``recalibrator`` (dims ``step``, ``level``): ``theta``,
        ``recalibration`` (the map :math:`R_{t-1}` used at step t), ``hits``,
        ``n_calibration`` — absent for ``calibration="none"``.

    Raises
    ------
    ValueError
        Bounds with lower >= upper, eta <= 0, levels outside (0, 1), unknown
        acquisition/calibration, no finite initial value.

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, Algorithms 3–4.

    Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
    processes. NeurIPS 36, eq. (18) (``acquisition="sharp-ucb"``).

    Examples
    --------
    >>> from calibprob.bo import minimize
    >>> res = minimize("forrester", n_init=3, n_steps=2, acquisition="lcb", seed=0)  # doctest: +SKIP
    >>> float(res["evaluations"]["best_so_far"][-1])  # doctest: +SKIP
    """
    # the BLAS limit wraps the whole run; None leaves the process setting alone
    threads = None if blas_threads is None else check_int(blas_threads, "blas_threads", minimum=1)
    with limit_blas_threads(threads):
        problem = _Problem.resolve(objective, bounds, optimum, dim)
        settings = BOSettings(
            n_init=n_init,
            n_steps=n_steps,
            acquisition=acquisition,
            calibration=calibration,
            eta=eta,
            coupling=coupling,
            levels=levels,
            kappa=kappa,
            xi=xi,
            refit_every=refit_every,
            init_design=init_design,
            n_candidates=n_candidates,
            n_starts=n_starts,
            sharp_level=sharp_level,
            interval_level=interval_level,
            design_lambda=design_lambda,
        )
        return _Loop(problem, settings, default_gp() if gp is None else clone(gp), seed).run(X_init)


@dataclass(frozen=True, eq=False)
class _Problem:
    """The objective on its box: ``fn`` maps (n, d) to (n,), ``box`` is (d, 2)."""

    fn: Callable[[np.ndarray], Any]
    box: np.ndarray
    optimum: float | None
    name: str

    @classmethod
    def resolve(cls, objective: Any, bounds: ArrayLike | None, optimum: float | None, dim: int | None) -> _Problem:
        return cls(*_resolve_objective(objective, bounds, optimum, dim))

    @property
    def lo(self) -> np.ndarray:
        return self.box[:, 0]

    @property
    def span(self) -> np.ndarray:
        return self.box[:, 1] - self.box[:, 0]

    def evaluate(self, X: np.ndarray) -> np.ndarray:
        """Objective values of the rows of ``X``, one float each (NaN/inf kept as returned)."""
        vals = np.asarray(self.fn(X), dtype=np.float64).reshape(-1)
        if vals.shape[0] != X.shape[0]:
            raise ValueError(f"objective must return one value per row of X ({X.shape[0]}); got {vals.shape[0]}.")
        return vals

    def initial_design(self, X_init: ArrayLike | None, n_init: int, method: str, seed: Any) -> np.ndarray:
        """``X_init`` checked against the box, or ``n_init`` points of ``method`` drawn with ``seed``."""
        d = self.box.shape[0]
        if X_init is None:
            tf = TestFunction(
                name=self.name, dim=d, bounds=self.box, f=lambda X: X[:, 0], minimum=np.nan, minimizers=np.zeros((1, d))
            )
            X_init = sample_design(tf, n_init, seed=seed, method=method)
        X_init = check_array(X_init, "X_init", ndim=2)
        if X_init.shape[1] != d:
            raise ValueError(f"X_init must have {d} columns (one per dimension); got {X_init.shape[1]}.")
        if np.any(X_init < self.lo) or np.any(X_init > self.box[:, 1]):
            raise ValueError("X_init must lie inside bounds; clip or resample the initial design.")
        return X_init


def _fit_gp(
    template: Any, U: np.ndarray, ys: np.ndarray, theta: dict | None, seed: int, refit: bool
) -> GaussianProcessRegressor:
    params = template.get_params()
    if refit or theta is None:
        params.update(random_state=seed, optimize=True)
        # warm start from the previous optimum: it is the first of the restarts
        params["theta"] = None if theta is None else {k: v for k, v in theta.items() if k != "mean"}
    else:
        params.update(theta={k: v for k, v in theta.items() if k != "mean"}, optimize=False)
    gp = type(template)(**params)
    return gp.fit(U, ys)


class _Loop:
    """One run of Algorithm 3: fit, recalibrate, acquire, evaluate, record — ``n_steps`` times.

    One seed is split into three streams (initial design, GP restarts,
    acquisition optimiser) so that runs with the same seed and different
    calibrations start from the same design.
    """

    def __init__(self, problem: _Problem, settings: BOSettings, template: Any, seed: Any) -> None:
        self.problem, self.settings, self.template, self.seed = problem, settings, template, seed
        self.strategy: CalibrationStrategy = strategy_for(settings)
        self.recorder = StepRecorder()
        s_design, s_gp, s_acq = np.random.SeedSequence(seed).spawn(3)
        self.s_design = s_design
        self.rng_acq = np.random.default_rng(s_acq)
        self.gp_seeds = np.random.default_rng(s_gp).integers(0, 2**31 - 1, size=settings.n_steps + 1)
        self.theta: dict | None = None
        self.X: list[np.ndarray] = []
        self.y: list[float] = []

    def run(self, X_init: ArrayLike | None) -> xr.DataTree:
        st = self.settings
        X0 = self.problem.initial_design(X_init, st.n_init, st.init_design, self.s_design)
        self.X = list(X0)
        self.y = list(self.problem.evaluate(X0))
        if not np.any(np.isfinite(self.y)):
            raise ValueError(
                f"the objective returned no finite value on the {len(self.y)} initial points ({self.y}); "
                "nothing to model. Check the objective or pass a larger / different initial design."
            )
        n0 = len(self.y)
        for step in range(1, st.n_steps + 1):
            self.step(step)
        return self.recorder.to_datatree(self.X, self.y, n0, self.problem.optimum, self.attrs(n0))

    def step(self, step: int) -> None:
        """Steps 3-7 of Algorithm 3 for iteration ``step``; appends the evaluation and its record."""
        st, pb = self.settings, self.problem
        seed = int(self.gp_seeds[step - 1])
        data = ModelData.from_history(self.X, self.y, pb.lo, pb.span)
        t0 = time.perf_counter()
        refit = self.theta is None or (step - 1) % st.refit_every == 0
        model = _fit_gp(self.template, data.U, data.ys, self.theta, seed, refit)
        self.theta = theta = model.theta_
        t1 = time.perf_counter()
        cal = self.strategy.recalibrate(model, data)
        self.recorder.record_state(cal.state)
        t2 = time.perf_counter()
        fun = self.strategy.acquisition(model, data, cal.law, seed)
        design = getattr(self.strategy, "design", None)
        pool = None
        if design is not None:
            # a known design density (calibprob.bo.conformal): sampled, not maximised
            u_next, a_val, pool = design(model, data, cal.law, self.rng_acq)
        else:
            u_next, a_val = minimize_on_box(
                fun,
                pb.box.shape[0],
                self.rng_acq,
                n_candidates=st.n_candidates,
                n_starts=st.n_starts,
                extra_starts=data.incumbent[None, :],
            )
        issued = None
        if st.interval_level is not None:
            issued = self.strategy.interval(model, data, cal.law, u_next, pool)
        t3 = time.perf_counter()
        x_next = pb.lo + u_next * pb.span
        mu_n, sd_n = model.predict_mean_std(u_next[None, :])
        y_next = float(pb.evaluate(x_next[None, :])[0])
        u_used = u_base = np.nan
        if np.isfinite(y_next):
            zs = ((y_next - data.m) / data.s - mu_n[0]) / sd_n[0]
            u_base = float(special.ndtr(zs))
            u_used = self.strategy.pit(cal.law, zs)
            self.strategy.observe(u_base)
        self.X.append(x_next)
        self.y.append(y_next)
        s = data.s
        self.recorder.record(
            forecast_mean=data.m + s * mu_n[0],
            forecast_std=s * sd_n[0],
            pit=u_used,
            pit_base=u_base,
            acquisition_value=a_val,
            refit=refit,
            lengthscale=np.asarray(theta["lengthscale"]) * pb.span,
            variance=theta["variance"] * s * s,
            noise=theta["noise"] * s * s,
            time_model=t1 - t0,
            time_calibration=t2 - t1,
            time_acquisition=t3 - t2,
            n_calibration=cal.n_calibration,
            sharp_fitted=bool(getattr(fun, "fitted", False)),
        )
        if issued is not None:
            self._record_interval(issued, y_next, data)

    def _record_interval(self, issued: tuple, y_next: float, data: ModelData) -> None:
        """The interval issued before the outcome (original units) and whether the outcome fell in it."""
        lo, hi, covers = issued
        covered = np.nan
        if np.isfinite(y_next):
            covered = float(covers((y_next - data.m) / data.s))
        self.recorder.record_interval(
            interval_lower=data.m + data.s * lo, interval_upper=data.m + data.s * hi, covered=covered
        )

    def attrs(self, n0: int) -> dict:
        """Root attributes of the result: every setting, in the documented order."""
        st, pb = self.settings, self.problem
        return (
            dict(
                function=pb.name,
                acquisition=st.acquisition,
                calibration=st.calibration,
                eta=st.eta,
                coupling=st.coupling,
                kappa=st.kappa,
                xi=st.xi,
                n_init=n0,
                n_steps=st.n_steps,
                refit_every=st.refit_every,
                sharp_level=st.sharp_level,
                seed=str(self.seed),
                base_model=repr(self.template),
                bounds=pb.box.ravel().tolist(),
                optimum=np.nan if pb.optimum is None else pb.optimum,
            )
            | self._conformal_attrs()
        )

    def _conformal_attrs(self) -> dict:
        """The query-interval settings, only when used (runs without them keep their attributes)."""
        st = self.settings
        out: dict = {}
        if st.interval_level is not None:
            out["interval_level"] = st.interval_level
        if st.calibration in CONFORMAL_CALIBRATIONS:
            out["design_lambda"] = st.design_lambda
        return out
