r"""Calibrated Bayesian optimisation (Deshpande, Marx & Kuleshov 2024, Algorithms 3-4).

:func:`minimize` runs Algorithm 3: at every step the GP :math:`M_{t-1}` is
composed with a recalibrator :math:`R_{t-1}`, the acquisition is maximised
under the recalibrated predictive :math:`M_{t-1} \circ R_{t-1}`, the objective
is evaluated, the GP is updated and the recalibrator rebuilt. The calibration
set (Algorithm 4) is one of

* ``"loo"`` — leave-one-out forecasts of every observation, from the GP's
  closed form (Dubrule 1983; :meth:`calibprob.gp.GaussianProcessRegressor.loo`):
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
(:class:`calibprob.online.OnlineQuantileRecalibrator`), as Algorithm 4 returns
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

import numpy as np
import scipy.linalg
import xarray as xr
from scipy import special

from calibprob._base import clone
from calibprob._validation import check_array, check_choice, check_int, check_levels, check_probability
from calibprob.bo.acquisition import ACQUISITIONS, StandardizedLaw, acquisition_loss, minimize_on_box
from calibprob.metrics import (
    best_so_far,
    calibration_curve_from_pit,
    calibration_error,
    cumulative_regret,
    ece_levels,
    simple_regret,
)
from calibprob.online import COUPLINGS, OnlineQuantileRecalibrator, check_eta
from calibprob.predictive import DEFAULT_LEVELS

__all__ = ["minimize", "CALIBRATIONS", "check_bounds", "default_gp"]

#: Calibration-set constructions accepted by :func:`minimize`.
CALIBRATIONS = ("loo", "time-series", "online", "none")


def check_bounds(bounds, d: int | None = None) -> np.ndarray:
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


def default_gp():
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
    from calibprob.gp import GaussianProcessRegressor

    return GaussianProcessRegressor(kernel="se", mean="zero", noise=True, n_restarts=3)


def _resolve_objective(objective, bounds, optimum, dim):
    from calibprob.datasets.functions import TestFunction, get_function

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


def _fit_gp(template, U, ys, theta, seed, refit: bool):
    params = template.get_params()
    if refit or theta is None:
        params.update(random_state=seed, optimize=True)
        # warm start from the previous optimum: it is the first of the restarts
        params["theta"] = None if theta is None else {k: v for k, v in theta.items() if k != "mean"}
    else:
        params.update(theta={k: v for k, v in theta.items() if k != "mean"}, optimize=False)
    gp = type(template)(**params)
    return gp.fit(U, ys)


def _time_series_pit(gp, U, ys):
    th = gp.theta_
    K = gp.kernel_matrix(U)
    K[np.diag_indices_from(K)] += th["noise"]
    L = scipy.linalg.cholesky(K, lower=True)
    e = scipy.linalg.solve_triangular(L, ys - gp.mean_, lower=True)
    return special.ndtr(e)


def minimize(
    objective,
    *,
    bounds=None,
    n_init: int = 5,
    n_steps: int = 25,
    acquisition: str = "ei",
    calibration: str = "loo",
    eta: float = 0.25,
    coupling: str = "isotonic",
    levels=None,
    kappa: float = 2.0,
    xi: float = 0.0,
    gp=None,
    refit_every: int = 1,
    X_init=None,
    init_design: str = "uniform",
    n_candidates: int | None = None,
    n_starts: int = 5,
    sharp_level: float = 0.01,
    optimum: float | None = None,
    dim: int | None = None,
    seed=0,
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
    calibration : {"loo", "time-series", "online", "none"}, default "loo"
        Calibration set of Algorithm 4 (see the module docstring).
    eta : float, default 0.25
        OSD step size of the recalibrator (> 0).
    coupling : {"isotonic", "independent"}, default "isotonic"
        Level coupling of the recalibrator (:class:`~calibprob.online.OnlineQuantileRecalibrator`).
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
    if blas_threads is not None:
        from calibprob._pytensor import limit_blas_threads

        with limit_blas_threads(check_int(blas_threads, "blas_threads", minimum=1)):
            return minimize(
                objective,
                bounds=bounds,
                n_init=n_init,
                n_steps=n_steps,
                acquisition=acquisition,
                calibration=calibration,
                eta=eta,
                coupling=coupling,
                levels=levels,
                kappa=kappa,
                xi=xi,
                gp=gp,
                refit_every=refit_every,
                X_init=X_init,
                init_design=init_design,
                n_candidates=n_candidates,
                n_starts=n_starts,
                sharp_level=sharp_level,
                optimum=optimum,
                dim=dim,
                seed=seed,
                blas_threads=None,
            )
    fn, box, optimum, name = _resolve_objective(objective, bounds, optimum, dim)
    d = box.shape[0]
    n_init = check_int(n_init, "n_init", minimum=1)
    n_steps = check_int(n_steps, "n_steps", minimum=0)
    refit_every = check_int(refit_every, "refit_every", minimum=1)
    n_starts = check_int(n_starts, "n_starts", minimum=1)
    check_choice(acquisition, "acquisition", ACQUISITIONS)
    check_choice(calibration, "calibration", CALIBRATIONS)
    check_choice(coupling, "coupling", COUPLINGS)
    eta = check_eta(eta)
    kappa = float(kappa)
    if not np.isfinite(kappa):
        raise ValueError(f"kappa must be finite; got {kappa!r}.")
    xi = float(xi)
    sharp_level = check_probability(sharp_level, "sharp_level")
    if acquisition == "sharp-ucb" and calibration != "none":
        raise ValueError(
            "acquisition='sharp-ucb' is calibrated by the sharp GP itself; pass calibration='none' "
            f"(got calibration={calibration!r})."
        )
    p_kappa = float(special.ndtr(-kappa))
    if levels is None:
        levels = np.unique(np.concatenate([DEFAULT_LEVELS, [p_kappa]]))
    levels = check_levels(levels, "levels")
    template = default_gp() if gp is None else clone(gp)

    ss = np.random.SeedSequence(seed)
    s_design, s_gp, s_acq = ss.spawn(3)
    rng_acq = np.random.default_rng(s_acq)
    gp_seeds = np.random.default_rng(s_gp).integers(0, 2**31 - 1, size=n_steps + 1)
    lo, hi = box[:, 0], box[:, 1]
    span = hi - lo

    if X_init is None:
        from calibprob.datasets.functions import TestFunction, sample_design

        tf = TestFunction(
            name=name, dim=d, bounds=box, f=lambda X: X[:, 0], minimum=np.nan, minimizers=np.zeros((1, d))
        )
        X_init = sample_design(tf, n_init, seed=s_design, method=init_design)
    X_init = check_array(X_init, "X_init", ndim=2)
    if X_init.shape[1] != d:
        raise ValueError(f"X_init must have {d} columns (one per dimension); got {X_init.shape[1]}.")
    if np.any(X_init < lo) or np.any(X_init > hi):
        raise ValueError("X_init must lie inside bounds; clip or resample the initial design.")

    def evaluate(X):
        vals = np.asarray(fn(X), dtype=float).reshape(-1)
        if vals.shape[0] != X.shape[0]:
            raise ValueError(f"objective must return one value per row of X ({X.shape[0]}); got {vals.shape[0]}.")
        return vals

    X = [x for x in X_init]
    y = list(evaluate(X_init))
    n0 = len(y)
    if not np.any(np.isfinite(y)):
        raise ValueError(
            f"the objective returned no finite value on the {n0} initial points ({y}); "
            "nothing to model. Check the objective or pass a larger / different initial design."
        )

    rec_persistent = (
        OnlineQuantileRecalibrator(levels=levels, eta=eta, coupling=coupling).reset()
        if calibration == "online"
        else None
    )
    identity_law = StandardizedLaw(levels)
    theta = None
    recs = {
        k: []
        for k in (
            "forecast_mean",
            "forecast_std",
            "pit",
            "pit_base",
            "acquisition_value",
            "refit",
            "lengthscale",
            "variance",
            "noise",
            "time_model",
            "time_calibration",
            "time_acquisition",
            "n_calibration",
            "sharp_fitted",
        )
    }
    rec_states = []
    for step in range(1, n_steps + 1):
        Xa = np.asarray(X)
        ya = np.asarray(y, float)
        finite = np.isfinite(ya)
        worst = np.max(ya[finite])
        y_model = np.where(finite, ya, worst)
        m, s = float(np.mean(y_model)), float(np.std(y_model))
        s = s if s > 0 else 1.0
        ys = (y_model - m) / s
        U = (Xa - lo) / span

        t0 = time.perf_counter()
        refit = theta is None or (step - 1) % refit_every == 0
        model = _fit_gp(template, U, ys, theta, int(gp_seeds[step - 1]), refit)
        theta = model.theta_
        t1 = time.perf_counter()

        law, rec, n_cal = identity_law, None, 0
        if calibration in ("loo", "time-series"):
            if calibration == "loo":
                mu_c, sd_c = model.loo(include_noise=True)
                u_cal = special.ndtr((ys - mu_c) / sd_c)[finite]
            else:
                u_cal = _time_series_pit(model, U, ys)[1:][finite[1:]]
            rec = OnlineQuantileRecalibrator(levels=levels, eta=eta, coupling=coupling).reset()
            rec.update_pit(np.clip(u_cal, 0.0, 1.0))
            n_cal = int(u_cal.size)
        elif calibration == "online":
            rec = rec_persistent
            n_cal = rec.n_updates_
        if rec is not None:
            law = StandardizedLaw(levels, rec.standardized_quantiles())
            rec_states.append(rec.to_dataset())
        t2 = time.perf_counter()

        best = float(np.min(ys[finite]))
        if acquisition == "sharp-ucb":
            fun = _sharp_acquisition(model, U, ys, sharp_level, int(gp_seeds[step - 1]))
        else:

            def fun(Uc, _model=model, _law=law, _best=best):
                mu, sd = _model.predict_mean_std(Uc)
                return acquisition_loss(acquisition, mu, sd, law=_law, best=_best, kappa=kappa, xi=xi)

        incumbent = U[finite][np.argmin(ys[finite])]
        u_next, a_val = minimize_on_box(
            fun, d, rng_acq, n_candidates=n_candidates, n_starts=n_starts, extra_starts=incumbent[None, :]
        )
        t3 = time.perf_counter()
        x_next = lo + u_next * span
        mu_n, sd_n = model.predict_mean_std(u_next[None, :])
        y_next = float(evaluate(x_next[None, :])[0])
        if np.isfinite(y_next):
            zs = ((y_next - m) / s - mu_n[0]) / sd_n[0]
            u_base = float(special.ndtr(zs))
            # the sharp GP fits only the bound's level, not a full predictive: no PIT for it
            u_used = float(law.cdf(zs)) if acquisition != "sharp-ucb" else np.nan
            if rec_persistent is not None:
                rec_persistent.update_pit([u_base])
        else:
            u_base = u_used = np.nan
        X.append(x_next)
        y.append(y_next)
        for key, val in (
            ("forecast_mean", m + s * mu_n[0]),
            ("forecast_std", s * sd_n[0]),
            ("pit", u_used),
            ("pit_base", u_base),
            ("acquisition_value", a_val),
            ("refit", refit),
            ("lengthscale", np.asarray(theta["lengthscale"]) * span),
            ("variance", theta["variance"] * s * s),
            ("noise", theta["noise"] * s * s),
            ("time_model", t1 - t0),
            ("time_calibration", t2 - t1),
            ("time_acquisition", t3 - t2),
            ("n_calibration", n_cal),
            ("sharp_fitted", bool(getattr(fun, "fitted", False))),
        ):
            recs[key].append(val)

    return _results(
        np.asarray(X),
        np.asarray(y, float),
        n0,
        recs,
        rec_states,
        levels,
        optimum,
        settings=dict(
            function=name,
            acquisition=acquisition,
            calibration=calibration,
            eta=eta,
            coupling=coupling,
            kappa=kappa,
            xi=xi,
            n_init=n0,
            n_steps=n_steps,
            refit_every=refit_every,
            sharp_level=sharp_level,
            seed=str(seed),
            base_model=repr(template),
            bounds=box.ravel().tolist(),
            optimum=np.nan if optimum is None else optimum,
        ),
    )


def _sharp_acquisition(model, U, ys, level, seed):
    """Capone et al. eq. (18) for minimisation: :math:`\\mu(\\theta_R, x) + \\beta_\\delta\\sigma(\\theta_\\delta, x)`."""
    from calibprob.bo.sharp import sharp_lower_bound

    return sharp_lower_bound(model, U, ys, level=level, seed=seed)


def _running_ece(pit):
    lv = ece_levels()
    out = np.full(pit.size, np.nan)
    for t in range(pit.size):
        u = pit[: t + 1]
        u = u[np.isfinite(u)]
        if u.size:
            out[t] = calibration_error(calibration_curve_from_pit(u, lv), lv)
    return out


def _results(X, y, n0, recs, rec_states, levels, optimum, settings) -> xr.DataTree:
    n, d = X.shape
    finite = np.isfinite(y)
    y_for_best = np.where(finite, y, np.inf)
    bsf = best_so_far(y_for_best)
    bsf = np.where(np.isfinite(bsf), bsf, np.nan)
    worst_so_far = np.array(
        [np.max(y[: i + 1][finite[: i + 1]]) if finite[: i + 1].any() else np.nan for i in range(n)]
    )
    y_model = np.where(finite, y, worst_so_far)
    evals = xr.Dataset(
        {
            "x": (("evaluation", "feature"), X, {"long_name": "evaluated input"}),
            "y": ("evaluation", y, {"long_name": "objective value as returned (NaN/inf kept)"}),
            "finite": ("evaluation", finite),
            "initial": ("evaluation", np.arange(n) < n0),
            "y_model": (
                "evaluation",
                y_model,
                {"long_name": "value modelled (non-finite replaced by the worst finite value so far)"},
            ),
            "best_so_far": ("evaluation", bsf, {"long_name": "smallest finite value so far"}),
        },
        coords={"evaluation": np.arange(n), "feature": [f"x{j + 1}" for j in range(d)]},
    )
    if optimum is not None and np.isfinite(optimum):
        evals["simple_regret"] = ("evaluation", simple_regret(np.where(finite, y, np.inf), optimum))
        evals["simple_regret"] = evals["simple_regret"].where(np.isfinite(evals["simple_regret"]))
        evals["cumulative_regret"] = (
            "evaluation",
            cumulative_regret(y_model, optimum),
            {"long_name": "cumulative regret of the modelled values"},
        )
    T = len(recs["pit"])
    pit = np.asarray(recs["pit"], float)
    pit_base = np.asarray(recs["pit_base"], float)
    steps = xr.Dataset(
        {
            "evaluation": ("step", n0 + np.arange(T)),
            "forecast_mean": ("step", np.asarray(recs["forecast_mean"], float)),
            "forecast_std": ("step", np.asarray(recs["forecast_std"], float)),
            "pit": ("step", pit, {"long_name": "PIT of y under the forecast used for the decision"}),
            "pit_base": ("step", pit_base, {"long_name": "PIT of y under the base GP forecast"}),
            "calibration_error": (
                "step",
                _running_ece(pit),
                {"long_name": "running ECE (mean over 21 levels) of pit, steps 1..t"},
            ),
            "calibration_error_base": ("step", _running_ece(pit_base)),
            "acquisition_value": ("step", np.asarray(recs["acquisition_value"], float)),
            "refit": ("step", np.asarray(recs["refit"], bool)),
            "lengthscale": (("step", "feature"), np.asarray(recs["lengthscale"], float).reshape(T, d)),
            "variance": ("step", np.asarray(recs["variance"], float)),
            "noise": ("step", np.asarray(recs["noise"], float)),
            "time_model": ("step", np.asarray(recs["time_model"], float)),
            "time_calibration": ("step", np.asarray(recs["time_calibration"], float)),
            "time_acquisition": ("step", np.asarray(recs["time_acquisition"], float)),
        },
        coords={"step": np.arange(1, T + 1), "feature": evals["feature"].values},
    )
    if settings["acquisition"] == "sharp-ucb":
        steps["sharp_fitted"] = (
            "step",
            np.asarray(recs["sharp_fitted"], bool),
            {"long_name": "sharp GP calibrated at this step (else vanilla mu - 2 sigma)"},
        )
    tree = {
        "/": xr.Dataset(
            attrs={
                **settings,
                "title": "calibprob Bayesian optimisation run",
                "reference": "Deshpande, Marx & Kuleshov (2024), AISTATS",
            }
        ),
        "evaluations": evals,
        "steps": steps,
    }
    if rec_states:
        n_upd = [int(r.attrs["n_updates"]) for r in rec_states]
        rs = xr.concat(rec_states, dim="step", combine_attrs="drop_conflicts")
        rs["n_updates"] = ("step", np.asarray(n_upd, int), {"long_name": "outcomes the recalibrator has seen"})
        rs = rs.assign_coords(step=np.arange(1, T + 1))
        rs["n_calibration"] = ("step", np.asarray(recs["n_calibration"], int))
        tree["recalibrator"] = rs
    return xr.DataTree.from_dict(tree)
