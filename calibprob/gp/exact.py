r"""Exact Gaussian-process regression: hyperparameters by MAP of a PyMC model.

**Model.**

.. math::

    y_i = m + f(x_i) + \varepsilon_i,\qquad f \sim \mathcal{GP}(0, k_\theta),\qquad
    \varepsilon_i \sim \mathcal N(0, \sigma_n^2),

with ``k`` an ARD squared-exponential or half-integer Matérn kernel
(:mod:`calibprob.gp.kernels`), :math:`m = 0` (``mean="zero"``) or an unknown
constant (``mean="constant"``), and either an estimated noise variance
(``noise=True``) or interpolation with a fixed nugget
:math:`\sigma_n^2 = \texttt{nugget}\cdot\sigma_f^2` (``noise=False``).

**Fitting.** :math:`\theta = (\log\ell_{1..d}, \log\sigma_f^2, \log\sigma_n^2)` maximises the
log marginal likelihood (``objective="ml"``; with a constant mean, profiled
over :math:`m`) or the restricted likelihood (``objective="reml"``,
constant mean only) — see :mod:`calibprob.gp._objective`. The objective is a
``pm.Potential`` in a PyMC model with flat priors, compiled once per
configuration (:mod:`calibprob.gp._pymc`), and maximised by L-BFGS-B from
``n_restarts`` seeded starts in a data-scaled box. The constant mean is then
its GLS estimate :math:`\hat m = 1^\top K^{-1} y / 1^\top K^{-1} 1`.

**At scale** (``n_hyper_subset``, default ``"auto"``): from 1000 rows the
multi-start runs on a seeded 500-row subset and its optimum is refined on all
rows (quasi-Newton from the subset's Hessian, :func:`calibprob.gp._pymc.refine`:
the same optimum in a fraction of the evaluations); above 4000 rows the
hyperparameters of a 2000-row subset are used as they are and all rows enter
one factorisation. Every step that allocates an ``n x n`` matrix first checks
the available memory (:func:`check_memory`).

**Prediction** (NumPy/SciPy, for the fitted or any other θ):

.. math::

    \mu(x) = \hat m + k_x^\top K^{-1}(y - \hat m 1),\qquad
    \sigma^2(x) = k(x, x) - k_x^\top K^{-1} k_x
       + \frac{(1 - 1^\top K^{-1} k_x)^2}{1^\top K^{-1} 1}
       \;[+\,\sigma_n^2],

the third term (``mean="constant"`` only) being the variance due to
estimating the constant (universal kriging); the noise term is added when
``include_noise=True``.

References
----------
Rasmussen, C. E. and Williams, C. K. I. (2006). *Gaussian Processes for
Machine Learning*, MIT Press, ch. 2 and 5.
Stein, M. L. (1999). *Interpolation of Spatial Data*, Springer (REML, kriging).
Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
prediction (constant mean, Matérn ν = p + 1/2, REML).
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from typing import Any

import numpy as np
import scipy.linalg

from calibprob._base import BaseEstimator, ConvergenceWarning, check_is_fitted
from calibprob._stable import stable_mean, stable_rms
from calibprob._validation import (
    check_array,
    check_choice,
    check_fitted_X,
    check_int,
    check_positive,
    check_same_length,
    record_feature_names,
)
from calibprob.gp import _objective, _pymc, kernels
from calibprob.gp.loo import loo_from_kernel
from calibprob.predictive import normal
from calibprob.runs.faults import memory_budget

__all__ = ["GaussianProcessRegressor"]

_THETA_KEYS = ("lengthscale", "variance", "noise", "mean_", "mean")
_CHUNK = 2048  # test rows per block in prediction (at most; see _predict_rows)
_BLOCK_ELEMENTS = 2**23  # prediction block: rows x n <= 8.4 M entries (64 MB per array)

#: ``n_hyper_subset="auto"``, measured with ``benchmarks/bench_gp.py`` (P10 in docs/benchmarks.md):
#: from this many rows the hyperparameters start on a subset (below, every row: the
#: subset stage would cost more than it saves).
AUTO_SUBSET_MIN_N = 1000
#: ... of this many rows, and are then refined on all rows (:func:`calibprob.gp._pymc.refine`)
AUTO_SUBSET_SIZE = 500
#: ... up to this many rows; above, each full-data evaluation costs seconds (n = 4000: ~1.5 s),
#: so the hyperparameters of a subset of ``AUTO_LARGE_SUBSET_SIZE`` rows are used as they are
#: and all rows enter only the final factorisation (issue 21).
AUTO_REFINE_MAX_N = 4000
AUTO_LARGE_SUBSET_SIZE = 2000
#: Environment variable: memory cap in GB for the exact GP's n x n matrices (default: the
#: memory the operating system reports as available).
MEMORY_ENV = "CALIBPROB_GP_MEMORY_GB"


class _GPBase(BaseEstimator):
    """Shared validation, θ handling, MAP fitting and the base-model protocol."""

    _kind = "exact"
    # parameters (set by the subclasses' __init__) and fitted state, declared for type checking
    kernel: str
    p: int
    mean: str
    noise: bool
    nugget: float
    objective: str
    theta: dict | None
    optimize: bool
    n_restarts: int
    optimizer: str
    adam_steps: int
    learning_rate: float
    random_state: Any
    compile_mode: Any
    fit_info_: dict[str, Any]
    inducing_points_: np.ndarray
    _state: dict[str, Any]
    _last_state: tuple[bytes, dict[str, Any]] | None

    #: the last factorisation at a θ (a cache, refilled on first use after loading)
    _transient_attrs: tuple[str, ...] = ("_last_state",)

    def _rebuild_after_load(self) -> None:
        """Start a loaded GP with an empty factorisation cache (it is not saved)."""
        self._last_state = None

    def _factorize(self, theta: dict) -> dict:
        """Factorisation of the training covariance at θ (the prediction state); per subclass."""
        raise NotImplementedError(f"{type(self).__name__} must define _factorize")

    def _predict_block(self, state: dict, Xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Latent mean and variance of a block of test rows; per subclass."""
        raise NotImplementedError(f"{type(self).__name__} must define _predict_block")

    # -- parameters ---------------------------------------------------------------
    def _check_params(self) -> None:
        check_choice(self.kernel, "kernel", kernels.KERNELS)
        kernels._check_p(self.p)
        check_choice(self.mean, "mean", _objective.MEANS)
        check_choice(self.objective, "objective", _objective.OBJECTIVES)
        if self.objective == "reml" and self.mean != "constant":
            raise ValueError(
                "objective='reml' needs mean='constant' (REML restricts the likelihood to "
                "contrasts free of the unknown mean); got mean='zero'. Use objective='ml' "
                "or mean='constant'."
            )
        if not isinstance(self.noise, (bool, np.bool_)):
            raise TypeError(f"noise must be True or False; got {self.noise!r}.")
        if not (np.isfinite(self.nugget) and 0 < self.nugget < 1):
            raise ValueError(
                f"nugget must be in (0, 1) (relative to the kernel variance); got "
                f"{self.nugget!r}. The default 1e-8 suits interpolation."
            )
        check_int(self.n_restarts, "n_restarts", minimum=1)
        check_choice(self.optimizer, "optimizer", ("lbfgs", "adam"))
        check_int(self.adam_steps, "adam_steps", minimum=1)
        check_positive(self.learning_rate, "learning_rate")
        if not isinstance(self.optimize, (bool, np.bool_)):
            raise TypeError(f"optimize must be True or False; got {self.optimize!r}.")
        if not self.optimize and self.theta is None:
            raise ValueError(
                "optimize=False needs fixed hyperparameters: pass theta={'lengthscale': ..., "
                "'variance': ..., 'noise': ...} or set optimize=True."
            )

    def _spec(self, d: int) -> _pymc.Spec:
        return _pymc.Spec(
            kind=self._kind,
            kernel=self.kernel,
            p=int(self.p) if self.kernel == "matern" else 0,
            mean=self.mean,
            noise=bool(self.noise),
            objective=self.objective,
            d=int(d),
            nugget=float(self.nugget) if not self.noise else 0.0,
            jitter=float(getattr(self, "jitter", 0.0)) if self._kind == "vfe" else 0.0,
        )

    def _compile_mode(self):
        return _pymc.get_compile_mode() if self.compile_mode is None else self.compile_mode

    # -- θ --------------------------------------------------------------------------
    def _complete_theta(self, theta, d: int, base: dict | None) -> dict:
        """Validate a (partial) θ dict, filling missing entries from ``base``."""
        if not isinstance(theta, dict):
            raise TypeError(
                f"theta must be a dict with keys 'lengthscale', 'variance' and 'noise'; got {type(theta).__name__}."
            )
        unknown = set(theta) - set(_THETA_KEYS)
        if unknown:
            raise ValueError(f"theta has unknown key(s) {sorted(unknown)}; allowed: {list(_THETA_KEYS)}.")
        out: dict[str, Any] = {}
        for key in ("lengthscale", "variance", "noise"):
            if key == "noise" and not self.noise:
                continue
            if key in theta:
                value = theta[key]
            elif base is not None and key in base:
                value = base[key]
            else:
                raise ValueError(
                    f"theta is missing {key!r} and there is no fitted value to fill it in; "
                    f"pass theta={{'lengthscale': ..., 'variance': ..., 'noise': ...}}."
                )
            arr = np.asarray(value, dtype=float)
            if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
                raise ValueError(f"theta[{key!r}] must be finite and > 0; got {value!r}.")
            if key == "lengthscale":
                if arr.ndim > 1 or (arr.ndim == 1 and arr.size not in (1, d)):
                    raise ValueError(
                        f"theta['lengthscale'] must be a scalar or have one entry per feature "
                        f"({d}); got shape {arr.shape}."
                    )
                out[key] = np.broadcast_to(arr.ravel() if arr.ndim else arr, (d,)).astype(float)
            else:
                if arr.ndim:
                    raise ValueError(f"theta[{key!r}] must be a scalar; got shape {arr.shape}.")
                out[key] = float(arr)
        if not self.noise:
            out["noise"] = self.nugget * out["variance"]
        return out

    def _theta_for(self, theta) -> dict:
        check_is_fitted(self, "theta_", method="fit")
        if theta is None:
            return self._state["theta"]
        return self._complete_theta(theta, self.n_features_in_, self.theta_)

    # -- fit ------------------------------------------------------------------------
    def _validate_Xy(self, X, y):
        X = check_array(X, "X", ndim=2)
        y = check_array(y, "y", ndim=1)
        check_same_length(X=X, y=y)
        need = 3 if self.mean == "constant" else 2
        if X.shape[0] < need:
            raise ValueError(f"fit needs at least {need} observations; got {X.shape[0]}.")
        return X, y

    def _check_X(self, X):
        check_is_fitted(self, "theta_", method="fit")
        X = check_fitted_X(self, X)
        return X

    def _prepare(self, X, y, rng) -> None:
        """Hook: extra training state needed before optimisation (inducing points)."""

    def _data(self) -> dict:
        """Training data of the optimisation: y centred and scaled (see :meth:`fit`)."""
        return {"X": self.X_train_, "y": (self.y_train_ - self._y_shift) / self._y_scale}

    def _y_centred(self) -> np.ndarray:
        return self.y_train_ - self._y_shift

    def _objective_for(self, spec: _pymc.Spec):
        """The objective to maximise on the scaled data (value / value_and_grad)."""
        data = self._data()
        if spec.kind == "exact":
            return contextlib.nullcontext(
                _objective.ExactObjectiveNumpy(
                    spec.kernel,
                    spec.p,
                    spec.mean,
                    spec.objective,
                    spec.noise,
                    float(self.nugget),
                    data["X"],
                    data["y"],
                )
            )
        return _pymc.CompiledObjective(_pymc.compiled(spec, self._compile_mode()), data)

    def _objective_offset(self) -> float:
        r"""Objective of y minus objective of the scaled targets (log-Jacobian of the scaling).

        :math:`-n\log s` for ML (and the VFE bound), :math:`-(n-1)\log s` for REML
        (one contrast fewer).
        """
        n = self.y_train_.shape[0] - (1 if self.objective == "reml" else 0)
        return -n * float(np.log(self._y_scale))

    def _scale_theta(self, theta: dict, power: float) -> dict:
        """θ with the variances multiplied by ``scale ** (2 * power)`` (lengthscales kept)."""
        f = self._y_scale ** (2.0 * power)
        out = dict(theta)
        out["variance"] = float(theta["variance"]) * f
        if "noise" in theta:
            out["noise"] = float(theta["noise"]) * f
        return out

    def fit(self, X, y):
        r"""Fit the hyperparameters (MAP / maximum likelihood) and factorise.

        The optimisation runs on scaled targets :math:`\tilde y = (y - c)/s`
        (the box bounds and starts are relative to that scale) and every result
        is mapped back (variances times :math:`s^2`, the mean plus :math:`c`); the
        factorisation kept for prediction is that of :math:`y - c`. With
        ``mean="constant"``, :math:`c = \bar y` and :math:`s = \mathrm{sd}(y)`: the
        restricted and profiled likelihoods are exactly invariant to the offset
        and the scale, so this changes nothing but the rounding — which at an
        offset of :math:`10^9` is the difference between a fit and none. With
        ``mean="zero"`` the zero mean is the declared model, so :math:`c = 0`
        and :math:`s` is the root mean square (scale invariance only); a
        ``UserWarning`` says so when the mean of ``y`` (10 or more points) is more
        than ten standard deviations from zero.

        Warns (:class:`calibprob._base.ConvergenceWarning`) when no L-BFGS-B start
        converged, and when the optimum lies on the box of the log-hyperparameters
        (``fit_info_["at_bounds"]`` names them): the optimum is then the box's, not
        the likelihood's. Two cases are common and benign, so they are reported in
        ``at_bounds`` without a warning: a lengthscale at its upper bound (an input
        the ARD kernel switches off) and the noise at its floor (noise-free data).

        Parameters
        ----------
        X : array_like, shape (n, d)
            Inputs; a single feature must be passed as ``X.reshape(-1, 1)``.
        y : array_like, shape (n,)
            Observations.

        Returns
        -------
        self
        """
        self._check_params()
        X_in = X
        X, y = self._validate_Xy(X, y)
        rng = np.random.default_rng(self.random_state)
        record_feature_names(self, X_in)  # a DataFrame's columns are checked again at predict
        self.X_train_, self.y_train_ = X, y
        self.n_features_in_ = X.shape[1]
        for attr in ("theta_", "_state"):
            self.__dict__.pop(attr, None)
        self._y_shift, self._y_scale = _y_transform(y, self.mean)
        _check_variance_representable(self._y_scale, type(self).__name__)
        if self.mean == "zero":
            _check_zero_mean_offset(y, type(self).__name__)
        self._prepare(X, y, rng)
        spec = self._spec(X.shape[1])
        info: dict = {}
        theta = self._fit_theta(spec, rng, info)
        if self.optimize:
            self.fit_info_["backend"] = "numpy" if spec.kind == "exact" else "pytensor"
            if spec.kind != "exact":
                self.fit_info_["compile_mode"] = str(self._compile_mode())
        self.fit_info_["y_shift"] = self._y_shift
        self.fit_info_["y_scale"] = self._y_scale
        self.fit_info_.update(info)
        clock = time.perf_counter()
        self._finish_fit(theta)
        self.fit_info_["factorize_seconds"] = time.perf_counter() - clock
        return self

    def _fit_theta(self, spec: _pymc.Spec, rng, info: dict) -> dict:
        """θ of the fit (Adam, L-BFGS-B or the given one); sets ``fit_info_``."""
        data = self._data()
        x0, bounds, _ = _pymc.heuristics(spec, self.X_train_, data["y"], float(self.nugget))
        given = None if self.theta is None else self._complete_theta(self.theta, spec.d, None)
        given_s = None if given is None else self._scale_theta(given, -1.0)
        if self.optimize and self.optimizer == "adam":
            return self._fit_adam(spec, x0, bounds, given_s, info)
        if self.optimize:
            first = x0 if given_s is None else _pymc.pack(spec, given_s)
            x_starts = _pymc.starts(first, bounds, int(self.n_restarts), rng, spec)
            return self._fit_lbfgs(spec, x_starts, bounds, info)
        self.fit_info_ = {"objective_values": [], "converged": [], "n_iter": []}
        assert given is not None  # _check_params: optimize=False needs theta
        return given

    def _fit_adam(self, spec: _pymc.Spec, x0, bounds, given_s, info: dict) -> dict:
        """Capone et al.'s base protocol: GPyTorch's initial values softplus(0) = log 2
        for every hyperparameter (of the data as given), then a fixed number of Adam
        steps. On the log scale the scaling is a shift, so the steps are the same."""
        if given_s is None:
            raw = np.full(x0.shape, np.log(np.log(2.0)))
            start = _pymc.pack(spec, self._scale_theta(_pymc.unpack(spec, raw), -1.0))
        else:
            start = _pymc.pack(spec, given_s)
        n = len(self.y_train_)
        with _pymc._blas_limit(self._blas_rows(), info), self._objective_for(spec) as fun:
            x_best, value = _pymc.adam(
                fun, start, bounds, steps=int(self.adam_steps), learning_rate=float(self.learning_rate), n=n
            )
        value = value + self._objective_offset()
        self.fit_info_ = {
            "objective_values": [value],
            "converged": [False],
            "n_iter": [int(self.adam_steps)],
            "best_objective": value,
            "at_bounds": [],
            "optimizer": "adam",
        }
        return self._complete_theta(self._scale_theta(_pymc.unpack(spec, x_best), 1.0), spec.d, None)

    def _blas_rows(self) -> int:
        """Order of the largest matrix a fit factorises: what the BLAS thread policy is sized on."""
        return len(self.y_train_)

    def _fit_lbfgs(self, spec: _pymc.Spec, x_starts, bounds, info: dict) -> dict:
        """Multi-start L-BFGS-B on all rows (value-only start scan first); sets ``fit_info_``."""
        with _pymc._blas_limit(self._blas_rows(), info), self._objective_for(spec) as fun:
            x_best, value, runs = _pymc.maximize(fun, spec.d, x_starts, bounds)
        self._record_runs(spec, x_best, value, runs, bounds, fun, x_starts)
        return self._complete_theta(self._scale_theta(_pymc.unpack(spec, x_best), 1.0), spec.d, None)

    def _record_runs(self, spec: _pymc.Spec, x_best, value, runs, bounds, fun, x_starts) -> None:
        """``fit_info_`` of an L-BFGS-B fit, and its warnings (no convergence, optimum on the box)."""
        lo = np.array([b[0] for b in bounds])
        hi = np.array([b[1] for b in bounds])
        labels = _param_labels(spec)
        at_low = [bool(np.isclose(xi, a)) for xi, a in zip(x_best, lo)]
        at_high = [bool(np.isclose(xi, b)) for xi, b in zip(x_best, hi)]
        at_bounds = [name for name, a, b in zip(labels, at_low, at_high) if a or b]
        # Benign and common, so reported but not warned about: a lengthscale at its
        # upper bound (an irrelevant input, ARD switching it off) and the noise at its
        # floor (noise-free data, interpolation).
        suspicious = [
            name
            for name, a, b in zip(labels, at_low, at_high)
            if (a or b) and not (name.startswith("log_lengthscale") and b) and not (name == "log_noise" and a)
        ]
        self.fit_info_ = {
            "objective_values": [float(-r.fun) + self._objective_offset() for r in runs],
            "converged": [bool(r.success) for r in runs],
            "n_iter": [int(r.nit) for r in runs],
            "n_evaluations": {"value": fun.n_value, "value_and_grad": fun.n_grad},
            "starts": [np.asarray(x, float) for x in x_starts],
            "lbfgs_starts": [r.x0 for r in runs],
            "best_objective": value + self._objective_offset(),
            "at_bounds": at_bounds,
            "bounds": {name: (float(np.exp(a)), float(np.exp(b))) for name, a, b in zip(labels, lo, hi)},
        }
        self._warn_fit(runs, suspicious)

    def _warn_fit(self, runs, suspicious) -> None:
        if not any(bool(r.success) for r in runs):
            warnings.warn(
                f"{type(self).__name__}: no L-BFGS-B start converged ("
                f"{', '.join(str(r.message) for r in runs)}); the hyperparameters are the "
                "best point reached. Increase n_restarts, check the data for duplicates or "
                "extreme values, or pass theta.",
                ConvergenceWarning,
                stacklevel=6,
            )
        if suspicious:
            warnings.warn(
                f"{type(self).__name__}: the {self.objective.upper()} optimum is on the box "
                f"bound of {', '.join(suspicious)} (box in fit_info_['bounds'], on the scale of "
                "the standardised targets); the likelihood would move further. Often "
                "harmless (e.g. a very smooth function wanting a larger signal variance), "
                "but the hyperparameters are the box's choice: consider a different kernel "
                "or mean, or pass theta.",
                ConvergenceWarning,
                stacklevel=6,
            )

    def _finish_fit(self, theta: dict) -> None:
        """Factorise at the fitted θ and set the fitted attributes."""
        try:
            with _pymc._blas_limit(self._blas_rows()):
                self._state = self._factorize(theta)
        except np.linalg.LinAlgError as err:
            raise ValueError(
                f"the covariance matrix is not positive definite at theta={theta}. Increase "
                "the noise (or nugget), check for duplicated inputs, or standardise X."
            ) from err
        self.theta_ = dict(theta)
        self.mean_ = self._state["m"]
        if self.mean == "constant":
            self.theta_["mean_"] = self._state["m"]
        self.log_marginal_likelihood_value_ = self._state["objective"]
        self._last_state = None

    # -- prediction (protocol) ---------------------------------------------------------
    def _state_for(self, theta) -> dict:
        """Factorisation for θ (the stored one, or recomputed — last one cached)."""
        check_is_fitted(self, "theta_", method="fit")
        if theta is None:
            return self._state
        th = self._theta_for(theta)
        key = _pymc.pack(self._spec(self.n_features_in_), th).tobytes()
        if self._last_state is not None and self._last_state[0] == key:
            return self._last_state[1]
        state = self._factorize(th)
        self._last_state = (key, state)
        return state

    def _predict_rows(self) -> int:
        """Test rows per prediction block (memory O(rows x n_train), whatever n_test)."""
        return _CHUNK

    def predict_mean_std(self, X, *, theta=None, include_noise: bool = True):
        """Predictive mean and standard deviation (base-model protocol).

        Parameters
        ----------
        X : array_like, shape (n_test, d)
        theta : dict, optional
            Hyperparameters to predict with (``lengthscale``, ``variance``,
            ``noise``; missing keys are taken from ``theta_``; a ``mean_`` (or
            ``mean``) key is ignored because the constant is re-estimated by GLS
            for this θ).
            Default: the fitted ``theta_`` (stored factorisation reused).
        include_noise : bool, default True
            Add the noise variance (the predictive distribution of a new
            observation); ``False`` gives the latent function's posterior.

        Returns
        -------
        mu : ndarray, shape (n_test,)
        sigma : ndarray, shape (n_test,)
        """
        X = self._check_X(X)
        state = self._state_for(theta)
        mu = np.empty(X.shape[0])
        var = np.empty(X.shape[0])
        rows = self._predict_rows()
        for start in range(0, X.shape[0], rows):
            sl = slice(start, start + rows)
            mu[sl], var[sl] = self._predict_block(state, X[sl])
        if include_noise:
            var = var + state["theta"]["noise"]
        return mu, np.sqrt(np.maximum(var, np.finfo(float).tiny))

    def predict(self, X, *, levels=None, theta=None, include_noise: bool = True):
        """Gaussian predictive distribution in the calibprob data contract.

        Parameters
        ----------
        X : array_like, shape (n_test, d)
        levels : array_like, optional
            Quantile levels; default :data:`calibprob.predictive.DEFAULT_LEVELS`.
        theta : dict, optional
            As in :meth:`predict_mean_std`.
        include_noise : bool, default True

        Returns
        -------
        xarray.Dataset
            ``calibprob.normal(mu, sigma, levels)``.
        """
        mu, sigma = self.predict_mean_std(X, theta=theta, include_noise=include_noise)
        return normal(mu, sigma, levels, method=type(self).__name__)

    def kernel_matrix(self, X1, X2=None, *, theta=None):
        """Kernel matrix ``k_θ(X1, X2)`` (no noise term).

        Parameters
        ----------
        X1 : array_like, shape (n1, d)
        X2 : array_like, shape (n2, d), optional
            Default ``X1`` (symmetric, exact zero self-distance).
        theta : dict, optional
            Default ``theta_``.

        Returns
        -------
        ndarray, shape (n1, n2)
        """
        th = self._theta_for(theta)
        X1 = self._check_X(X1)
        X2 = None if X2 is None else self._check_X(X2)
        return self._k(X1, X2, th)

    def _k(self, X1, X2, th):
        return kernels.kernel(self.kernel, X1, X2, th["lengthscale"], th["variance"], p=int(self.p), xp=np)

    def log_marginal_likelihood(self, theta=None) -> float:
        """The fitted objective (ML, REML or VFE bound) at θ.

        Parameters
        ----------
        theta : dict, optional
            Default ``theta_``.

        Returns
        -------
        float
            ``-inf`` when the covariance is not positive definite at θ.
        """
        try:
            return float(self._state_for(theta)["objective"])
        except np.linalg.LinAlgError:
            return -np.inf

    # -- PyMC model ---------------------------------------------------------------------
    def build_model(self, X=None, y=None, *, priors: str = "weak"):
        """The PyMC model of the hyperparameters, e.g. for ``pm.sample`` (full NUTS).

        Parameters
        ----------
        X, y : array_like, optional
            Data; default the training data of :meth:`fit`.
        priors : {"weak", "flat"}, default "weak"
            ``"flat"`` reproduces the MAP objective exactly (improper for
            sampling); ``"weak"`` puts ``Normal(centre, 2)`` on each
            log-parameter, centred at the data-based starting values.

        Returns
        -------
        pymc.Model
            Free variables ``log_lengthscale`` (dims ``feature``),
            ``log_variance``, ``log_noise`` (if ``noise=True``); deterministics
            ``lengthscale``, ``variance``, ``noise``; the objective as a Potential.
            With a constant mean the (REML-type) potential integrates the constant
            out under a flat prior when ``objective="reml"``.
        """
        check_choice(priors, "priors", ("weak", "flat"))
        self._check_params()
        if X is None and y is None:
            check_is_fitted(self, "theta_", method="fit")
            X, y = self.X_train_, self._y_centred()
        else:
            X, y = self._validate_Xy(X, y)
            if self._kind == "vfe":
                check_is_fitted(self, "theta_", method="fit")
            y = y - _y_transform(y, self.mean)[0]  # offset-free, as in fit (REML/ML invariant)
        spec = self._spec(X.shape[1])
        x0, _, _ = _pymc.heuristics(spec, X, y, float(self.nugget))
        data = {"X": X, "y": y}
        if self._kind == "vfe":
            data["Z"] = self.inducing_points_
        return _pymc.build_model(spec, data, priors=priors, centre=x0)


def available_memory() -> tuple[float, str]:
    """Bytes the exact GP may allocate, and where that figure comes from.

    The cap in GB from the environment variable ``CALIBPROB_GP_MEMORY_GB`` when set;
    otherwise :func:`calibprob.runs.faults.memory_budget`: inside a Dask worker the room
    left below its memory limit (where its nanny restarts it), else the memory the
    operating system reports as available.

    Returns
    -------
    bytes : float
    source : str
    """
    cap = os.environ.get(MEMORY_ENV)
    if cap:
        try:
            value = float(cap)
        except ValueError:
            raise ValueError(f"{MEMORY_ENV} must be a number of GB; got {cap!r}.") from None
        return value * 1e9, f"the cap {MEMORY_ENV}={cap}"
    # inside a Dask worker: the room below its memory limit, not the machine's memory (issue 28)
    return memory_budget()


def check_memory(n: int, n_matrices: int, what: str, owner) -> None:
    """Refuse, before allocating, work that needs ``n_matrices`` float64 ``n x n`` arrays beyond :func:`available_memory`.

    Parameters
    ----------
    n : int
        Rows of the covariance matrix.
    n_matrices : int
        How many ``n x n`` arrays are alive at the peak.
    what : str
        The step, for the message.
    owner : object
        The estimator (its class name is in the message).

    Raises
    ------
    MemoryError
        Naming the sparse GP and the cap to raise.
    """
    need = float(n_matrices) * 8.0 * float(n) ** 2
    cap, source = available_memory()
    if need > cap:
        raise MemoryError(
            f"{type(owner).__name__}: {what} needs about {need / 1e9:.2f} GB ({n_matrices} float64 "
            f"{n} x {n} matrices) but {source} is {cap / 1e9:.2f} GB. Use the sparse GP "
            "(SparseGaussianProcessRegressor, spec kind 'sparse-gp'), fewer rows, fewer workers (--workers 1), "
            "or, if the memory "
            f"is there, raise the cap: {MEMORY_ENV}=<GB>. (n_hyper_subset only limits the rows of "
            "the hyperparameter fit; the factorisation always uses every row.)"
        )


def _check_zero_mean_offset(y: np.ndarray, owner: str) -> None:
    """Refuse targets far from zero for a zero-mean GP (issue 16, S2).

    Refused, not warned: the fit would be silently miscalibrated (90 % coverage 0.033
    at y + 1e9), and centring would change the declared model. A few points' spread
    says little, so fewer than 10 are let through.
    """
    offset = abs(float(stable_mean(y)))
    spread = float(stable_rms(y - np.mean(y)))  # np.std underflows to 0 at scale 1e-200
    if len(y) >= 10 and offset > 10.0 * spread:
        raise ValueError(
            f"{owner}(mean='zero'): the targets' mean ({np.mean(y):.6g}) is "
            f"{offset / max(spread, np.finfo(float).tiny):.3g} standard deviations from "
            "zero; a zero-mean GP must explain that offset with its kernel variance, "
            "which is ill-conditioned and miscalibrated. Use mean='constant' (offset "
            "invariant) or centre y (standardize = true in a compare spec)."
        )


#: the targets' scale s for which the kernel and noise variances (s^2 times the scaled
#: optimum, itself inside boxes of about 1e-12 ... 1e12) are representable in float64
_Y_SCALE_RANGE = (1e-140, 1e140)


def _check_variance_representable(scale: float, owner: str) -> None:
    """Refuse targets whose variances are beyond float64, naming the fix (issue 28)."""
    lo, hi = _Y_SCALE_RANGE
    if not lo <= scale <= hi:
        raise ValueError(
            f"{owner}: y has scale {scale:.3g} (its standard deviation), outside [{lo:g}, {hi:g}]: the "
            "kernel and noise variances, in y's units squared, would overflow or underflow float64. "
            f"Divide y by a constant (e.g. y / {scale:.0e}; standardize = true in a compare spec), fit, "
            "and multiply the predictions back."
        )


def _y_transform(y: np.ndarray, mean: str) -> tuple[float, float]:
    """Internal offset and scale of the targets (see :meth:`_GPBase.fit`).

    ``mean="constant"``: the sample mean and standard deviation (the restricted and
    profiled likelihoods are invariant to both). ``mean="zero"``: no offset (the
    zero mean is part of the declared model) and the root mean square (the
    likelihood is invariant to a common scale of y and the variances).
    """
    if mean == "constant":
        shift = float(stable_mean(y))
        scale = float(stable_rms(y - shift))  # = np.std(y), without under/overflow at 1e-200/1e200
    else:
        shift = 0.0
        scale = float(stable_rms(y))
    if not (np.isfinite(scale) and scale > 0):
        scale = 1.0
    return shift, scale


def _param_labels(spec):
    labels = [f"log_lengthscale[{j}]" for j in range(spec.d)] + ["log_variance"]
    return labels + (["log_noise"] if spec.noise else [])


class GaussianProcessRegressor(_GPBase):
    r"""Exact GP regression with ML/REML hyperparameters (MAP of a PyMC model).

    Parameters
    ----------
    kernel : {"se", "matern"}, default "se"
        ARD squared exponential or ARD Matérn with :math:`\nu = p + 1/2`.
    p : int, default 2
        Matérn smoothness (``p >= 0``; ignored for ``"se"``).
    mean : {"zero", "constant"}, default "zero"
        ``"constant"``: unknown constant mean, GLS-estimated (profiled in ML,
        integrated out in REML) and accounted for in the predictive variance.
    noise : bool, default True
        Estimate a noise variance; ``False`` interpolates with a fixed nugget.
    nugget : float, default 1e-8
        Nugget relative to the kernel variance (``noise=False``), also the
        lower bound of the noise variance relative to the data scale.
    objective : {"ml", "reml"}, default "ml"
        Maximum likelihood or restricted ML (REML needs ``mean="constant"``).
    theta : dict, optional
        ``{"lengthscale": (d,) or scalar, "variance": float, "noise": float}``:
        fixed hyperparameters with ``optimize=False``, else the first start.
    optimize : bool, default True
    n_restarts : int, default 3
        Total number of L-BFGS-B starts (the data-based one plus seeded random ones).
    optimizer : {"lbfgs", "adam"}, default "lbfgs"
        ``"lbfgs"``: L-BFGS-B to convergence from ``n_restarts`` starts.
        ``"adam"``: ``adam_steps`` Adam steps from GPyTorch's initial values
        (every hyperparameter :math:`\log 2`) — the loose base of Capone et
        al.'s code (lr 0.1, 20 steps), only to reproduce their protocol.
    adam_steps : int, default 20
    learning_rate : float, default 0.1
        Adam's step size (log-space hyperparameters).
    random_state : int, numpy Generator or None
    compile_mode : str, pytensor Mode or None
        PyTensor mode of the PyMC model's compiled objective, used by the
        sparse GP's fit; the exact GP fits with the equal NumPy/SciPy value and
        gradient (:class:`calibprob.gp._objective.ExactObjectiveNumpy`) and
        keeps the PyMC model for :meth:`build_model`. ``None`` uses
        :func:`calibprob.gp.get_compile_mode` (default ``"FAST_COMPILE"``).
    n_hyper_subset : int, "auto" or None, default "auto"
        Fit the hyperparameters on a seeded random subset of this many rows (the
        L-BFGS-B optimiser only; the final factorisation and every prediction use all
        rows). The subset fit is this estimator's own fit on those rows, so it equals
        a manual fit on ``X[idx], y[idx]`` (``fit_info_["hyper_subset"]["indices"]``).
        ``None``: every row. ``"auto"``: every row below
        :data:`AUTO_SUBSET_MIN_N` (1000) rows; up to :data:`AUTO_REFINE_MAX_N` (4000)
        a subset of 500 rows whose optimum is then refined on all rows (the same
        optimum as a fit on all rows, in a fraction of the time: the subset's
        multi-start picks the basin and its Hessian starts a quasi-Newton
        refinement); above, a subset of 2000 rows without refinement (an exact GP at
        12 000 rows in about a minute instead of hours).
    refine_hyper : bool or "auto", default "auto"
        Refine the subset's hyperparameters on all rows (``"auto"``: up to 4000 rows).

    Notes
    -----
    **Memory.** Before any ``n x n`` array is allocated (fit, factorisation for
    another θ, :meth:`loo`) the estimator checks that the matrices fit in the
    available memory (or the cap ``CALIBPROB_GP_MEMORY_GB``) and raises a
    ``MemoryError`` naming the sparse alternative otherwise; a fit with subset
    hyperparameters needs two ``n x n`` arrays (2.3 GB at 12 000 rows), one on all
    rows four. Prediction runs in blocks of at most 2**23 test-by-training entries.

    Attributes
    ----------
    theta_ : dict
        ``lengthscale`` (d,), ``variance``, ``noise`` (a variance; the nugget
        times the variance when ``noise=False``), and ``mean_`` (the GLS
        constant) when ``mean="constant"``. Passing it back as ``theta=`` is allowed
        (``mean_`` is then ignored and re-estimated).
    mean_ : float
        GLS estimate of the constant mean (0 for ``mean="zero"``).
    log_marginal_likelihood_value_ : float
        The objective (ML or REML) at ``theta_``.
    fit_info_ : dict
        Objective value, convergence flag and iterations of every start,
        objective evaluations (``n_evaluations``: value-only in the start scan,
        value and gradient in L-BFGS-B), the parameters that ended at a bound
        (``at_bounds``) and the box (``bounds``, for the standardised targets),
        the starting points (``starts``) and the points L-BFGS-B started from
        after the start scan (``lbfgs_starts``; both in log space, standardised
        targets),
        the centring and scaling of y (``y_shift``, ``y_scale``), the BLAS
        threads used and why (``blas_threads``, ``blas_reason``) and the
        objective's backend (``"numpy"``: NumPy/SciPy value and gradient, equal
        to the PyMC model's, see :meth:`build_model`). With a subset
        (``n_hyper_subset``), ``hyper_subset`` holds its size, row indices,
        hyperparameters, whether they were refined and the subset fit's own
        ``fit_info``; the other entries describe the refinement on all rows (one
        run), or, without refinement, the subset fit.
    X_train_, y_train_ : ndarray
    n_features_in_ : int

    References
    ----------
    Rasmussen, C. E. and Williams, C. K. I. (2006). Gaussian Processes for
    Machine Learning. MIT Press, ch. 2 and 5.

    Stein, M. L. (1999). Interpolation of Spatial Data: Some Theory for Kriging.
    Springer (REML, kriging).

    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis (constant mean, Matérn, REML).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.gp import GaussianProcessRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(size=(40, 1)); y = np.sin(6 * X[:, 0]) + 0.1 * rng.normal(size=40)
    >>> gp = GaussianProcessRegressor(kernel="matern", p=2, random_state=0).fit(X, y)
    >>> mu, sigma = gp.predict_mean_std(X[:3])
    """

    _kind = "exact"

    def __init__(
        self,
        *,
        kernel: str = "se",
        p: int = 2,
        mean: str = "zero",
        noise: bool = True,
        nugget: float = 1e-8,
        objective: str = "ml",
        theta: dict | None = None,
        optimize: bool = True,
        n_restarts: int = 3,
        optimizer: str = "lbfgs",
        adam_steps: int = 20,
        learning_rate: float = 0.1,
        random_state=None,
        compile_mode=None,
        n_hyper_subset="auto",
        refine_hyper="auto",
    ):
        self.kernel = kernel
        self.p = p
        self.mean = mean
        self.noise = noise
        self.nugget = nugget
        self.objective = objective
        self.theta = theta
        self.optimize = optimize
        self.n_restarts = n_restarts
        self.optimizer = optimizer
        self.adam_steps = adam_steps
        self.learning_rate = learning_rate
        self.random_state = random_state
        self.compile_mode = compile_mode
        self.n_hyper_subset = n_hyper_subset
        self.refine_hyper = refine_hyper

    # -- scale: hyperparameters on a subset, memory checks -----------------------------
    def _check_params(self) -> None:
        super()._check_params()
        m = self.n_hyper_subset
        if not (m is None or (isinstance(m, str) and m == "auto")):
            check_int(m, "n_hyper_subset", minimum=3)
        if not (isinstance(self.refine_hyper, (bool, np.bool_)) or self.refine_hyper == "auto"):
            raise ValueError(
                f"refine_hyper must be True, False or 'auto'; got {self.refine_hyper!r}. 'auto' refines "
                f"the subset's hyperparameters on all rows up to {AUTO_REFINE_MAX_N} rows."
            )

    def _subset_plan(self, n: int) -> tuple[int | None, bool]:
        """Rows of the hyperparameter fit (``None``: all) and whether to refine on all rows."""
        m = self.n_hyper_subset
        if not self.optimize or self.optimizer != "lbfgs" or m is None:
            return None, False
        if isinstance(m, str):  # "auto"
            if n < AUTO_SUBSET_MIN_N:
                return None, False
            m = AUTO_SUBSET_SIZE if n <= AUTO_REFINE_MAX_N else AUTO_LARGE_SUBSET_SIZE
        m = int(m)
        if m >= n:
            return None, False
        refine = n <= AUTO_REFINE_MAX_N if self.refine_hyper == "auto" else bool(self.refine_hyper)
        return m, refine

    def _fit_theta(self, spec: _pymc.Spec, rng, info: dict) -> dict:
        n = len(self.y_train_)
        m, refine = self._subset_plan(n)
        if self.optimize and (m is None or refine):
            check_memory(n, 5 if self.kernel == "matern" else 4, "the hyperparameter fit on all rows", self)
        else:
            check_memory(n, 2, "the factorisation of the covariance", self)
        if m is None:
            return super()._fit_theta(spec, rng, info)
        return self._fit_on_subset(spec, rng, info, m, refine)

    def _predict_rows(self) -> int:
        # blocks of at most _BLOCK_ELEMENTS entries: 64 MB per (rows x n) array at any n
        return max(1, min(_CHUNK, _BLOCK_ELEMENTS // self.X_train_.shape[0]))

    def _fit_on_subset(self, spec: _pymc.Spec, rng, info: dict, m: int, refine: bool) -> dict:
        r"""Hyperparameters of a seeded subset of ``m`` rows, optionally refined on all rows.

        The subset fit is this estimator's own fit on ``X[idx], y[idx]`` (the same
        parameters, ``n_hyper_subset="auto"``), so it equals a manual fit on those rows.
        With ``refine``, its optimum starts :func:`calibprob.gp._pymc.refine` on all
        rows, with the subset objective's Hessian (central differences, :math:`2(d+2)`
        evaluations on ``m`` rows) times :math:`n/m` as the initial curvature.
        """
        X, y = self.X_train_, self.y_train_
        n = len(y)
        idx = np.sort(rng.choice(n, size=m, replace=False))
        params = {**self.get_params(), "n_hyper_subset": "auto", "refine_hyper": "auto"}
        if isinstance(self.random_state, np.random.Generator):
            params["random_state"] = rng
        clock = time.perf_counter()
        sub = type(self)(**params).fit(X[idx], y[idx])
        theta_sub = {k: v for k, v in sub.theta_.items() if k != "mean_"}
        record: dict[str, Any] = {
            "seconds": time.perf_counter() - clock,
            "size": m,
            "indices": idx,
            "refined": bool(refine),
            "theta": theta_sub,
            "fit_info": sub.fit_info_,
        }
        if not refine:
            self.fit_info_ = {k: v for k, v in sub.fit_info_.items() if k not in ("y_shift", "y_scale")}
            self.fit_info_["hyper_subset"] = record
            return self._complete_theta(theta_sub, spec.d, None)
        data = self._data()
        _, bounds, _ = _pymc.heuristics(spec, X, data["y"], float(self.nugget))
        x_start = _pymc.pack(spec, self._scale_theta(theta_sub, -1.0))
        lo = np.array([b[0] for b in bounds])
        hi = np.array([b[1] for b in bounds])
        x_start = np.clip(x_start, lo, hi)
        sub_objective = _objective.ExactObjectiveNumpy(
            spec.kernel, spec.p, spec.mean, spec.objective, spec.noise, float(self.nugget), X[idx], data["y"][idx]
        )
        hessian = _pymc.fd_hessian(sub_objective, x_start) * (n / m)
        record["hessian_evaluations"] = sub_objective.n_grad
        with _pymc._blas_limit(self._blas_rows(), info), self._objective_for(spec) as fun:
            x_best, value, runs = _pymc.refine(fun, x_start, bounds, hessian)
        self._record_runs(spec, x_best, value, runs, bounds, fun, [x_start])
        self.fit_info_["hyper_subset"] = record
        return self._complete_theta(self._scale_theta(_pymc.unpack(spec, x_best), 1.0), spec.d, None)

    def _factorize(self, theta: dict) -> dict:
        # centred targets (see fit): the constant mean is estimated on y - shift, and the
        # zero mean is the centred data's
        X, y = self.X_train_, self._y_centred()
        n = y.shape[0]
        check_memory(n, 2, "the factorisation of the covariance", self)
        K = self._k(X, None, theta)
        K[np.diag_indices(n)] += theta["noise"]
        factor = scipy.linalg.cho_factor(K, lower=True, overwrite_a=True, check_finite=False)
        L = factor[0]
        a = scipy.linalg.solve_triangular(L, y, lower=True, check_finite=False)
        logdet = 2.0 * np.sum(np.log(np.diag(L)))
        if self.mean == "constant":
            b = scipy.linalg.solve_triangular(L, np.ones(n), lower=True, check_finite=False)
            s = float(b @ b)
            m = float(a @ b) / s
            obj = _objective.assemble(a @ a, a @ b, s, logdet, n, mean=self.mean, objective=self.objective, xp=np)
        else:
            b, s, m = None, None, 0.0
            obj = _objective.assemble(a @ a, None, None, logdet, n, mean=self.mean, objective=self.objective, xp=np)
        alpha = scipy.linalg.cho_solve(factor, y - m, check_finite=False)
        return {
            "theta": theta,
            "factor": factor,
            "alpha": alpha,
            "m": self._y_shift + m,
            "b": b,
            "s": s,
            "objective": float(obj),
        }

    def _predict_block(self, state, Xs):
        th = state["theta"]
        Ks = self._k(Xs, self.X_train_, th)
        # row by row (einsum, not GEMV, whose tail rows round differently): the same bits in any block
        mu = state["m"] + np.einsum("ij,j->i", Ks, state["alpha"])
        V = scipy.linalg.solve_triangular(state["factor"][0], Ks.T, lower=True, check_finite=False)
        var = th["variance"] - np.einsum("ij,ij->j", V, V)
        if self.mean == "constant":
            u = 1.0 - np.einsum("i,ij->j", state["b"], V)
            var = var + u * u / state["s"]
        return mu, var

    def loo(self, *, include_noise: bool = True, theta=None):
        """Closed-form leave-one-out predictions on the training data.

        Parameters
        ----------
        include_noise : bool, default True
            ``False``: standard deviation of the latent function (the noise /
            nugget variance subtracted).
        theta : dict, optional
            Hyperparameters (not re-estimated per fold); default ``theta_``.

        Returns
        -------
        mu_loo : ndarray, shape (n,)
        sigma_loo : ndarray, shape (n,)

        See Also
        --------
        calibprob.gp.loo_from_kernel : the formula (Dubrule 1983; Q⁻¹ for a
            constant mean re-estimated in each fold).
        """
        th = self._theta_for(theta)
        check_memory(self.X_train_.shape[0], 3, "the leave-one-out predictions", self)
        K = self._k(self.X_train_, None, th)
        K[np.diag_indices_from(K)] += th["noise"]
        mu, sd = loo_from_kernel(K, self._y_centred(), mean=self.mean)
        mu = mu + self._y_shift
        if not include_noise:
            sd = np.sqrt(np.maximum(sd**2 - th["noise"], np.finfo(float).tiny))
        return mu, sd
