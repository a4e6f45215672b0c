r"""Exact Gaussian-process regression: hyperparameters by MAP of a PyMC model.

**Model.**

.. math::

    y_i = m + f(x_i) + \varepsilon_i,\qquad f \sim \mathcal{GP}(0, k_\theta),\qquad
    \varepsilon_i \sim \mathcal N(0, \sigma_n^2),

with ``k`` an ARD squared-exponential or half-integer Matérn kernel
(:mod:`calibprob.bases.gp.kernels`), :math:`m = 0` (``mean="zero"``) or an unknown
constant (``mean="constant"``), and either an estimated noise variance
(``noise=True``) or interpolation with a fixed nugget
:math:`\sigma_n^2 = \texttt{nugget}\cdot\sigma_f^2` (``noise=False``).

**Fitting.** :math:`\theta = (\log\ell_{1..d}, \log\sigma_f^2, \log\sigma_n^2)` maximises the
log marginal likelihood (``objective="ml"``; with a constant mean, profiled
over :math:`m`) or the restricted likelihood (``objective="reml"``,
constant mean only) — see ``calibprob.bases.gp._objective``. The objective is a
``pm.Potential`` in a PyMC model with flat priors, compiled once per
configuration (``calibprob.bases.gp._pymc``), and maximised by L-BFGS-B from
``n_restarts`` seeded starts in a data-scaled box. The constant mean is then
its GLS estimate :math:`\hat m = 1^\top K^{-1} y / 1^\top K^{-1} 1`.

**At scale** (``n_hyper_subset``, default ``"auto"``): from 1000 rows the
multi-start runs on a seeded 500-row subset and its optimum is refined on all
rows (quasi-Newton from the subset's Hessian, ``calibprob.bases.gp._pymc.refine``:
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

import time
from typing import Any, Literal

import numpy as np
import scipy.linalg

from calibprob._core.memory import PEAK_N_BY_N
from calibprob._core.validation import check_int
from calibprob.bases.gp import _objective, _pymc
from calibprob.bases.gp._shared import _BLOCK_ELEMENTS, _CHUNK, _GPBase, check_memory
from calibprob.bases.gp._shared import MEMORY_ENV as MEMORY_ENV  # re-exported: the memory cap is documented here
from calibprob.bases.gp._shared import available_memory as available_memory
from calibprob.bases.gp.loo import loo_from_factor, loo_from_kernel

__all__ = ["GaussianProcessRegressor"]


#: ``n_hyper_subset="auto"``, measured with ``benchmarks/bench_gp.py`` (P10 in docs/benchmarks.md):
#: from this many rows the hyperparameters start on a subset (below, every row: the
#: subset stage would cost more than it saves).
AUTO_SUBSET_MIN_N = 1000
#: ... of this many rows, and are then refined on all rows (``calibprob.bases.gp._pymc.refine``)
AUTO_SUBSET_SIZE = 500
#: ... up to this many rows; above, each full-data evaluation costs seconds (n = 4000: ~1.5 s),
#: so the hyperparameters of a subset of ``AUTO_LARGE_SUBSET_SIZE`` rows are used as they are
#: and all rows enter only the final factorisation.
AUTO_REFINE_MAX_N = 4000
AUTO_LARGE_SUBSET_SIZE = 2000


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
        gradient (``calibprob.bases.gp._objective.ExactObjectiveNumpy``) and
        keeps the PyMC model for :meth:`build_model`. ``None`` uses
        :func:`calibprob.bases.gp.get_compile_mode` (default ``"FAST_COMPILE"``).
    n_hyper_subset : int, "auto" or None, default "auto"
        Fit the hyperparameters on a seeded random subset of this many rows (the
        L-BFGS-B optimiser only; the final factorisation and every prediction use all
        rows). The subset fit is this estimator's own fit on those rows, so it equals
        a manual fit on ``X[idx], y[idx]`` (``fit_info_["hyper_subset"]["indices"]``).
        ``None``: every row. ``"auto"``: every row below
        ``AUTO_SUBSET_MIN_N`` (1000) rows; up to ``AUTO_REFINE_MAX_N`` (4000)
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
    >>> from calibprob.bases.gp import GaussianProcessRegressor
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
        random_state: int | np.random.Generator | None = None,
        compile_mode: Any = None,
        n_hyper_subset: int | Literal["auto"] | None = "auto",
        refine_hyper: bool | Literal["auto"] = "auto",
    ) -> None:
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

    def _fit_theta(self, spec: _pymc.GPModelSpec, rng: np.random.Generator, info: dict) -> dict:
        n = len(self.y_train_)
        m, refine = self._subset_plan(n)
        if self.optimize and (m is None or refine):
            check_memory(n, PEAK_N_BY_N["fit"], "the hyperparameter fit on all rows", self)
        else:
            check_memory(n, PEAK_N_BY_N["factorise"], "the factorisation of the covariance", self)
        if m is None:
            return super()._fit_theta(spec, rng, info)
        return self._fit_on_subset(spec, rng, info, m, refine)

    def _predict_rows(self) -> int:
        # blocks of at most _BLOCK_ELEMENTS entries: 64 MB per (rows x n) array at any n
        return max(1, min(_CHUNK, _BLOCK_ELEMENTS // self.X_train_.shape[0]))

    def _fit_on_subset(
        self, spec: _pymc.GPModelSpec, rng: np.random.Generator, info: dict, m: int, refine: bool
    ) -> dict:
        r"""Hyperparameters of a seeded subset of ``m`` rows, optionally refined on all rows.

        The subset fit is this estimator's own fit on ``X[idx], y[idx]`` (the same
        parameters, ``n_hyper_subset="auto"``), so it equals a manual fit on those rows.
        With ``refine``, its optimum starts ``calibprob.bases.gp._pymc.refine`` on all
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
        check_memory(n, PEAK_N_BY_N["factorise"], "the factorisation of the covariance", self)
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

    def _predict_block(self, state: dict, Xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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

    def loo(self, *, include_noise: bool = True, theta: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
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
        calibprob.bases.gp.loo_from_kernel : the formula (Dubrule 1983; Q⁻¹ for a
            constant mean re-estimated in each fold).
        """
        th = self._theta_for(theta)
        check_memory(self.X_train_.shape[0], PEAK_N_BY_N["loo"], "the leave-one-out predictions", self)
        factor = self._state.get("factor") if theta is None else None
        if isinstance(factor, tuple) and factor[1]:
            # the fit's Cholesky of the same K (kernel + noise at theta_), not a second n x n factorisation:
            # the same LAPACK call on the same matrix, so the same factor (tests/bases/gp/test_loo_shared.py)
            mu, sd = loo_from_factor(factor[0], self._y_centred(), mean=self.mean)
        else:
            K = self._k(self.X_train_, None, th)
            K[np.diag_indices_from(K)] += th["noise"]
            mu, sd = loo_from_kernel(K, self._y_centred(), mean=self.mean)
        mu = mu + self._y_shift
        if not include_noise:
            sd = np.sqrt(np.maximum(sd**2 - th["noise"], np.finfo(float).tiny))
        return mu, sd
