r"""What the exact and the sparse GP share: fitting by MAP over seeded restarts, prediction, the kernel matrix,
the PyMC model, the memory check and the target scaling (:class:`_GPBase`); the exact GP's model and the
equations are in :mod:`calibprob.bases.gp.exact`, the sparse GP's in :mod:`calibprob.bases.gp.sparse`."""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Iterator
from typing import Any, Literal, Self

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core import progress as _progress
from calibprob._core.estimator import BaseEstimator, ConvergenceWarning, check_is_fitted
from calibprob._core.memory import memory_budget
from calibprob._core.stable import stable_mean, stable_rms
from calibprob._core.tables import check_fitted_X, record_feature_names
from calibprob._core.validation import (
    check_array,
    check_choice,
    check_int,
    check_positive,
    check_same_length,
)
from calibprob.bases.gp import _objective, _pymc, kernels
from calibprob.predictive import normal

_THETA_KEYS = ("lengthscale", "variance", "noise", "mean_", "mean")
_CHUNK = 2048  # test rows per block in prediction (at most; see _predict_rows)
_BLOCK_ELEMENTS = 2**23  # prediction block: rows x n <= 8.4 M entries (64 MB per array)

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

    def _spec(self, d: int) -> _pymc.GPModelSpec:
        return _pymc.GPModelSpec(
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

    def _compile_mode(self) -> Any:
        return _pymc.get_compile_mode() if self.compile_mode is None else self.compile_mode

    # -- θ --------------------------------------------------------------------------
    def _complete_theta(self, theta: object, d: int, base: dict | None) -> dict:
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

    def _theta_for(self, theta: dict | None) -> dict:
        check_is_fitted(self, "theta_", method="fit")
        if theta is None:
            return self._state["theta"]
        return self._complete_theta(theta, self.n_features_in_, self.theta_)

    # -- fit ------------------------------------------------------------------------
    def _validate_Xy(self, X: ArrayLike | None, y: ArrayLike | None) -> tuple[np.ndarray, np.ndarray]:
        X = check_array(X, "X", ndim=2)
        y = check_array(y, "y", ndim=1)
        check_same_length(X=X, y=y)
        need = 3 if self.mean == "constant" else 2
        if X.shape[0] < need:
            raise ValueError(f"fit needs at least {need} observations; got {X.shape[0]}.")
        return X, y

    def _check_X(self, X: ArrayLike) -> np.ndarray:
        check_is_fitted(self, "theta_", method="fit")
        X = check_fitted_X(self, X)
        return X

    def _prepare(self, X: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> None:
        """Hook: extra training state needed before optimisation (inducing points)."""

    def _data(self) -> dict:
        """Training data of the optimisation: y centred and scaled (see :meth:`fit`)."""
        return {"X": self.X_train_, "y": (self.y_train_ - self._y_shift) / self._y_scale}

    def _y_centred(self) -> np.ndarray:
        return self.y_train_ - self._y_shift

    def _objective_for(self, spec: _pymc.GPModelSpec) -> contextlib.AbstractContextManager[_pymc.Objective]:
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

    @contextlib.contextmanager
    def _objective(self, spec: _pymc.GPModelSpec) -> Iterator[_Counted]:
        """:meth:`_objective_for`, each evaluation counted on a progress line (shown once a fit runs a few seconds)."""
        what = f"{type(self).__name__} fit ({len(self.y_train_)} rows)"
        with self._objective_for(spec) as fun, _progress.bar(desc=what, unit=" evaluations") as line:
            yield _Counted(fun, line)

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

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
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

        Warns (``calibprob._core.estimator.ConvergenceWarning``) when no L-BFGS-B start
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

    def _fit_theta(self, spec: _pymc.GPModelSpec, rng: np.random.Generator, info: dict) -> dict:
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

    def _fit_adam(
        self, spec: _pymc.GPModelSpec, x0: np.ndarray, bounds: _pymc.Bounds, given_s: dict | None, info: dict
    ) -> dict:
        """Capone et al.'s base protocol: GPyTorch's initial values softplus(0) = log 2
        for every hyperparameter (of the data as given), then a fixed number of Adam
        steps. On the log scale the scaling is a shift, so the steps are the same."""
        if given_s is None:
            raw = np.full(x0.shape, np.log(np.log(2.0)))
            start = _pymc.pack(spec, self._scale_theta(_pymc.unpack(spec, raw), -1.0))
        else:
            start = _pymc.pack(spec, given_s)
        n = len(self.y_train_)
        with _pymc._blas_limit(self._blas_rows(), info), self._objective(spec) as fun:
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

    def _fit_lbfgs(self, spec: _pymc.GPModelSpec, x_starts: list[np.ndarray], bounds: _pymc.Bounds, info: dict) -> dict:
        """Multi-start L-BFGS-B on all rows (value-only start scan first); sets ``fit_info_``."""
        with _pymc._blas_limit(self._blas_rows(), info), self._objective(spec) as fun:
            x_best, value, runs = _pymc.maximize(fun, spec.d, x_starts, bounds)
        self._record_runs(spec, x_best, value, runs, bounds, fun, x_starts)
        return self._complete_theta(self._scale_theta(_pymc.unpack(spec, x_best), 1.0), spec.d, None)

    def _record_runs(
        self,
        spec: _pymc.GPModelSpec,
        x_best: np.ndarray,
        value: float,
        runs: list[Any],
        bounds: _pymc.Bounds,
        fun: _pymc.Objective,
        x_starts: list[np.ndarray],
    ) -> None:
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

    def _warn_fit(self, runs: list[Any], suspicious: list[str]) -> None:
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
    def _state_for(self, theta: dict | None) -> dict:
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

    def predict_mean_std(
        self, X: ArrayLike, *, theta: dict | None = None, include_noise: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
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

    def predict(
        self, X: ArrayLike, *, levels: ArrayLike | None = None, theta: dict | None = None, include_noise: bool = True
    ) -> xr.Dataset:
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

    def kernel_matrix(self, X1: ArrayLike, X2: ArrayLike | None = None, *, theta: dict | None = None) -> np.ndarray:
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

    def _k(self, X1: np.ndarray, X2: np.ndarray | None, th: dict) -> np.ndarray:
        return kernels.kernel(self.kernel, X1, X2, th["lengthscale"], th["variance"], p=int(self.p), xp=np)

    def log_marginal_likelihood(self, theta: dict | None = None) -> float:
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
    def build_model(
        self, X: ArrayLike | None = None, y: ArrayLike | None = None, *, priors: Literal["weak", "flat"] = "weak"
    ) -> Any:
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
    otherwise ``calibprob._core.memory.memory_budget``: inside a Dask worker the room
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
    # inside a Dask worker: the room below its memory limit, not the machine's memory (its nanny restarts
    # it near that limit, whatever the machine has free)
    return memory_budget()


def check_memory(n: int, n_matrices: float, what: str, owner: object) -> None:
    """Refuse, before allocating, work that needs ``n_matrices`` float64 ``n x n`` arrays beyond :func:`available_memory`.

    Parameters
    ----------
    n : int
        Rows of the covariance matrix.
    n_matrices : float
        How many ``n x n`` arrays are alive at the peak (measured:
        :data:`calibprob._core.memory.PEAK_N_BY_N`).
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
            f"{type(owner).__name__}: {what} needs about {need / 1e9:.2f} GB ({n_matrices:g} float64 "
            f"{n} x {n} matrices) but {source} is {cap / 1e9:.2f} GB. Use the sparse GP "
            "(SparseGaussianProcessRegressor, spec kind 'sparse-gp'), fewer rows, fewer workers (--workers 1), "
            "or, if the memory "
            f"is there, raise the cap: {MEMORY_ENV}=<GB>. (n_hyper_subset only limits the rows of "
            "the hyperparameter fit; the factorisation always uses every row.)"
        )


def _check_zero_mean_offset(y: np.ndarray, owner: str) -> None:
    """Refuse targets far from zero for a zero-mean GP.

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
    """Refuse targets whose variances are beyond float64 (the fit would overflow or underflow), naming the fix."""
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


def _param_labels(spec: _pymc.GPModelSpec) -> list[str]:
    labels = [f"log_lengthscale[{j}]" for j in range(spec.d)] + ["log_variance"]
    return labels + (["log_noise"] if spec.noise else [])


class _Counted:
    """An objective whose evaluations advance a progress line; everything else is the objective's own."""

    def __init__(self, objective: _pymc.Objective, line: Any) -> None:
        self._objective, self._line = objective, line

    def value(self, x: np.ndarray) -> float:
        self._line.update(1)
        return self._objective.value(x)

    def value_and_grad(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        self._line.update(1)
        return self._objective.value_and_grad(x)

    def __getattr__(self, name: str) -> Any:  # n_value, n_grad, ... of the objective itself
        return getattr(self._objective, name)
