r"""Sparse variational GP regression (Titsias' VFE / collapsed bound).

With :math:`m` inducing inputs :math:`Z` and
:math:`Q_{nn} = K_{nm}K_{mm}^{-1}K_{mn}`, the hyperparameters maximise the
collapsed evidence lower bound

.. math::

    \mathcal F(\theta) = \log \mathcal N\big(y \mid \hat m 1,\; Q_{nn} + \sigma_n^2 I\big)
        - \frac{1}{2\sigma_n^2} \operatorname{tr}(K_{nn} - Q_{nn})

(a lower bound on the exact log marginal likelihood, equal to it when
:math:`Z = X`), in :math:`O(nm^2)` per evaluation. It is the ``pm.Potential`` of a PyMC model
(:meth:`build_model`; the inducing inputs are ``pm.Data``), maximised by
L-BFGS-B from several seeded starts; by default the fit evaluates it and its
gradient from m x m statistics accumulated over blocks of rows
(``calibprob.bases.gp._sparse_numerics``), so the fit is linear in :math:`n` in
time and holds no :math:`n\times m` array beyond one block. The inducing
inputs are k-means centres of the (column-standardised) inputs — of a seeded
subset of ``max(10 000, 20 m)`` rows when there are more — and kept fixed
during the optimisation. From ``AUTO_SUBSET_MIN_N`` rows (``n_hyper_subset="auto"``)
the multi-start runs on a seeded subset of ``AUTO_SUBSET_SIZE`` rows (same inducing
inputs) and a quasi-Newton refinement from the subset's Hessian finishes on all rows
(``calibprob.bases.gp._pymc.refine``): a fixed number of subset evaluations plus a handful
on all rows, so the whole fit, not only each evaluation, grows linearly in :math:`n`.

Leave-one-out (:meth:`SparseGaussianProcessRegressor.loo`) is closed-form in
:math:`O(nm^2)`: see ``calibprob.bases.gp._sparse_loo``.

Prediction (NumPy): with :math:`A = L_m^{-1}K_{mn}/\sigma_n`,
:math:`B = I + AA^\top = L_B L_B^\top`, :math:`c = L_B^{-1} A (y - \hat m 1)/\sigma_n`,
:math:`t_1 = L_m^{-1} k_m(x)`, :math:`t_2 = L_B^{-1} t_1`:

.. math::

    \mu(x) = \hat m + t_2^\top c,\qquad
    \sigma^2(x) = \sigma_f^2 - t_1^\top t_1 + t_2^\top t_2
       + \frac{(1 - t_2^\top c_1 / \sigma_n)^2}{1^\top\Sigma^{-1}1}\;[+\sigma_n^2],

with :math:`c_1 = L_B^{-1} A 1` and the mean-estimation term only for
``mean="constant"`` (:math:`\hat m` is the GLS estimate under
:math:`\Sigma = Q_{nn} + \sigma_n^2 I`).

References
----------
Titsias, M. (2009). Variational learning of inducing variables in sparse
Gaussian processes. AISTATS, PMLR 5:567–574.
Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
processes (sparse GP with 300 inducing points for large data sets).
"""

from __future__ import annotations

import contextlib
import time
import warnings
from typing import Any, Literal, Self

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike
from scipy.cluster.vq import kmeans2

from calibprob._core.validation import check_array, check_int
from calibprob.bases.gp import _pymc, _sparse_numerics
from calibprob.bases.gp._shared import _GPBase
from calibprob.bases.gp._sparse_loo import SparseKrigingSystem, sparse_kriging_system

__all__ = ["SparseGaussianProcessRegressor", "kmeans_inducing_points"]

#: k-means for the inducing inputs runs on at most max(this, 20 m) rows (seeded subset).
_KMEANS_ROWS = 10_000
#: ``n_hyper_subset="auto"`` (measured with ``benchmarks/bench_scale.py --part sparse``, see
#: docs/benchmarks.md): from this many rows the multi-start runs on a seeded subset ...
AUTO_SUBSET_MIN_N = 10_000
#: ... of this many rows (the same inducing inputs), and its optimum is refined on all rows
#: (``calibprob.bases.gp._pymc.refine``). Below, every row: the subset stage would save little.
AUTO_SUBSET_SIZE = 5_000


def kmeans_inducing_points(
    X: ArrayLike,
    n_inducing: int,
    *,
    random_state: int | np.random.Generator | None = None,
    max_rows: int | None = None,
) -> np.ndarray:
    """Seeded k-means (k-means++ start) centres of column-standardised ``X``.

    Parameters
    ----------
    X : array_like, shape (n, d)
    n_inducing : int
        Number of centres; all rows of ``X`` are returned if ``n <= n_inducing``.
    random_state : int, numpy Generator or None
    max_rows : int, optional
        Run k-means on a seeded random subset of this many rows when ``X`` has
        more (the cost of k-means is then independent of ``n``).

    Returns
    -------
    ndarray, shape (m, d)
        Distinct centres in the original units (``m <= n_inducing``; empty
        clusters are dropped).

    References
    ----------
    Titsias, M. (2009). Variational learning of inducing variables in sparse
    Gaussian processes. AISTATS (inducing inputs).

    Arthur, D. and Vassilvitskii, S. (2007). k-means++: the advantages of careful
    seeding. SODA.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.bases.gp import kmeans_inducing_points
    >>> X = np.random.default_rng(0).normal(size=(100, 2))
    >>> kmeans_inducing_points(X, 5, random_state=0).shape
    (5, 2)
    """
    X = check_array(X, "X", ndim=2)
    n_inducing = check_int(n_inducing, "n_inducing", minimum=1)
    if X.shape[0] <= n_inducing:
        return X.copy()
    scale = X.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)
    rng = np.random.default_rng(random_state)
    if max_rows is not None and X.shape[0] > check_int(max_rows, "max_rows", minimum=n_inducing):
        X = X[np.sort(rng.choice(X.shape[0], int(max_rows), replace=False))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "One of the clusters is empty"
        centres, _ = kmeans2(X / scale, n_inducing, iter=20, minit="++", seed=rng)
    centres = np.unique(centres, axis=0)
    return centres * scale


class SparseGaussianProcessRegressor(_GPBase):
    r"""Sparse GP regression with the VFE bound (Titsias 2009).

    Parameters
    ----------
    n_inducing : int, default 300
        Number of inducing inputs (k-means centres); all training inputs are
        used when ``n <= n_inducing``.
    kernel, p, mean, objective, theta, optimize, n_restarts, optimizer, adam_steps, learning_rate, random_state
        As in :class:`calibprob.bases.gp.GaussianProcessRegressor`.
    compile_mode : str, pytensor Mode or None
        ``None`` (default): the fit evaluates the bound and its gradient from m x m
        statistics accumulated over blocks of rows (NumPy; time linear in n,
        memory :math:`O(m^2)` plus one block; ``calibprob.bases.gp._sparse_numerics``).
        A PyTensor mode (e.g. ``"FAST_COMPILE"``): the fit uses the PyMC model's
        compiled ``vfe_bound`` in that mode instead (it holds :math:`n\times m`
        arrays and their gradients). Both maximise the same function (equal to
        rounding); ``fit_info_["backend"]`` says which ran.
    noise : bool, default True
        Must be ``True``: the VFE bound needs a noise variance (use the exact
        GP for interpolation).
    nugget : float, default 1e-8
        Lower bound of the noise variance relative to the data scale.
    jitter : float, default 1e-6
        Added to the diagonal of :math:`K_{mm}`, relative to the kernel variance.
    inducing_points : array_like, shape (m, d), optional
        Fixed inducing inputs instead of k-means.
    n_hyper_subset : int, "auto" or None, default "auto"
        Run the multi-start hyperparameter fit (L-BFGS-B) on a seeded random subset
        of this many rows, with the same inducing inputs, then refine its optimum on
        all rows: quasi-Newton started from the subset bound's Hessian times
        :math:`n/n_{sub}` (``calibprob.bases.gp._pymc.refine``), a handful of
        full-data evaluations instead of a multi-start's dozens. The refinement
        stops by L-BFGS-B's own rules, so it lands on the full-data optimum of the
        basin the subset picked. ``None`` (or a size ``>= n``): every evaluation on
        all rows. ``"auto"``: a subset of ``AUTO_SUBSET_SIZE`` (5000) rows from
        ``AUTO_SUBSET_MIN_N`` (10 000) rows on, every row below. Only with
        ``optimize=True`` and ``optimizer="lbfgs"``.

    Attributes
    ----------
    inducing_points_ : ndarray, shape (m, d)
    theta_, mean_, log_marginal_likelihood_value_ (the VFE bound), X_train_, y_train_, n_features_in_
        As in :class:`calibprob.bases.gp.GaussianProcessRegressor`.
    fit_info_ : dict
        As in :class:`calibprob.bases.gp.GaussianProcessRegressor`. With a subset,
        ``hyper_subset`` holds its ``size``, row ``indices``, hyperparameters
        (``theta``), the subset fit's own ``fit_info`` (its ``n_evaluations``),
        ``hessian_evaluations`` (gradients on the subset for the starting curvature)
        and ``seconds``; the other entries (``n_evaluations``, ``objective_values``,
        ...) describe the refinement on all rows.

    References
    ----------
    Titsias, M. (2009). Variational learning of inducing variables in sparse
    Gaussian processes. AISTATS.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.bases.gp import SparseGaussianProcessRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, size=(400, 1)); y = np.sin(2 * X[:, 0]) + 0.2 * rng.normal(size=400)
    >>> sgp = SparseGaussianProcessRegressor(n_inducing=20, random_state=0).fit(X, y)
    >>> sgp.inducing_points_.shape
    (20, 1)
    >>> mu, sigma = sgp.predict_mean_std(np.array([[0.5]]))
    >>> bool(abs(mu[0] - np.sin(1.0)) < 0.2)
    True
    """

    _kind = "vfe"

    def __init__(
        self,
        *,
        n_inducing: int = 300,
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
        jitter: float = 1e-6,
        inducing_points: ArrayLike | None = None,
        random_state: int | np.random.Generator | None = None,
        compile_mode: Any = None,
        n_hyper_subset: int | Literal["auto"] | None = "auto",
    ) -> None:
        self.n_inducing = n_inducing
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
        self.jitter = jitter
        self.inducing_points = inducing_points
        self.random_state = random_state
        self.compile_mode = compile_mode
        self.n_hyper_subset = n_hyper_subset

    def _check_params(self) -> None:
        super()._check_params()
        check_int(self.n_inducing, "n_inducing", minimum=1)
        if not self.noise:
            raise ValueError(
                "SparseGaussianProcessRegressor needs noise=True (the VFE bound divides by "
                "the noise variance); got noise=False. Use GaussianProcessRegressor("
                "noise=False) to interpolate."
            )
        if not (np.isfinite(self.jitter) and 0 < self.jitter < 1):
            raise ValueError(f"jitter must be in (0, 1) (relative to the kernel variance); got {self.jitter!r}.")
        m = self.n_hyper_subset
        integer = isinstance(m, (int, np.integer)) and not isinstance(m, (bool, np.bool_))
        if not (m is None or (isinstance(m, str) and m == "auto") or (integer and bool(m >= 3))):
            raise ValueError(
                f"n_hyper_subset must be 'auto', None or an integer >= 3 (rows of the hyperparameter "
                f"fit before the refinement on all rows); got {m!r}. Use None to fit on every row."
            )

    def _subset_size(self, n: int) -> int | None:
        """Rows of the multi-start hyperparameter fit (``None``: all rows, no refinement stage)."""
        m = self.n_hyper_subset
        if not self.optimize or self.optimizer != "lbfgs" or m is None:
            return None
        if isinstance(m, str):  # "auto"
            if n < AUTO_SUBSET_MIN_N:
                return None
            m = AUTO_SUBSET_SIZE
        return int(m) if int(m) < n else None

    def _fit_theta(self, spec: _pymc.GPModelSpec, rng: np.random.Generator, info: dict) -> dict:
        size = self._subset_size(len(self.y_train_))
        if size is None:
            return super()._fit_theta(spec, rng, info)
        return self._fit_on_subset(spec, rng, info, size)

    def _fit_on_subset(self, spec: _pymc.GPModelSpec, rng: np.random.Generator, info: dict, size: int) -> dict:
        r"""Multi-start on a seeded subset of ``size`` rows (same inducing inputs), refined on all rows.

        The subset fit is this estimator's own fit on ``X[idx], y[idx]`` with
        ``inducing_points=inducing_points_`` and ``n_hyper_subset=None``; its optimum
        starts ``calibprob.bases.gp._pymc.refine`` on all rows, with the subset bound's
        Hessian (central differences of its gradient, :math:`2(d+2)` evaluations on the
        subset) times :math:`n/n_{sub}` as the initial curvature — the data terms of the
        bound, :math:`\log\mathcal N` and the trace term, grow linearly in :math:`n`.
        """
        X, y, Z = self.X_train_, self.y_train_, self.inducing_points_
        n = len(y)
        idx = np.sort(rng.choice(n, size=size, replace=False))
        params = {**self.get_params(), "n_hyper_subset": None, "inducing_points": Z}
        if isinstance(self.random_state, np.random.Generator):
            params["random_state"] = rng
        clock = time.perf_counter()
        sub = type(self)(**params).fit(X[idx], y[idx])
        theta_sub = {k: v for k, v in sub.theta_.items() if k != "mean_"}
        record: dict[str, Any] = {"size": size, "indices": idx, "theta": theta_sub, "fit_info": sub.fit_info_}
        data = self._data()
        _, bounds, _ = _pymc.heuristics(spec, X, data["y"], float(self.nugget))
        lo, hi = np.array([b[0] for b in bounds]), np.array([b[1] for b in bounds])
        x_start = np.clip(_pymc.pack(spec, self._scale_theta(theta_sub, -1.0)), lo, hi)
        sub_objective = _sparse_numerics.VFEObjectiveNumpy(
            spec.kernel, spec.p, spec.mean, spec.objective, self.jitter, X[idx], data["y"][idx], Z
        )
        hessian = _pymc.fd_hessian(sub_objective, x_start) * (n / size)
        record["hessian_evaluations"] = sub_objective.n_grad
        record["seconds"] = time.perf_counter() - clock
        with _pymc._blas_limit(self._blas_rows(), info), self._objective(spec) as fun:
            x_best, value, runs = _pymc.refine(fun, x_start, bounds, hessian)
        self._record_runs(spec, x_best, value, runs, bounds, fun, [x_start])
        self.fit_info_["hyper_subset"] = record
        return self._complete_theta(self._scale_theta(_pymc.unpack(spec, x_best), 1.0), spec.d, None)

    def _prepare(self, X: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> None:
        if self.inducing_points is not None:
            Z = check_array(self.inducing_points, "inducing_points", ndim=2)
            if Z.shape[1] != X.shape[1]:
                raise ValueError(
                    f"inducing_points has {Z.shape[1]} columns but X has {X.shape[1]}. "
                    "Pass inducing inputs in the same feature space as X."
                )
        else:
            m = int(self.n_inducing)
            Z = kmeans_inducing_points(X, m, random_state=rng, max_rows=max(_KMEANS_ROWS, 20 * m))
        self.inducing_points_ = Z

    def _data(self) -> dict:
        return {"X": self.X_train_, "y": (self.y_train_ - self._y_shift) / self._y_scale, "Z": self.inducing_points_}

    def _objective_for(self, spec: _pymc.GPModelSpec) -> contextlib.AbstractContextManager[_pymc.Objective]:
        """The bound to maximise: chunked NumPy statistics (linear in n) or the compiled PyMC graph."""
        if self._backend() == "pytensor":
            return super()._objective_for(spec)
        data = self._data()
        return contextlib.nullcontext(
            _sparse_numerics.VFEObjectiveNumpy(
                spec.kernel, spec.p, spec.mean, spec.objective, self.jitter, data["X"], data["y"], data["Z"]
            )
        )

    def _blas_rows(self) -> int:
        """The m x m inducing-point systems, not n: the n-dependent work is (block x m) products.

        Sizing the thread policy on n made an idle machine pick two BLAS threads for a
        12 000-row fit, which then ran 2x slower (91 s wall, 163 s CPU, against 43 s on one).
        """
        return len(self.inducing_points_)

    def _backend(self) -> str:
        return "numpy" if self.compile_mode is None else "pytensor"

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Fit the hyperparameters (maximise the VFE bound) and factorise; see :meth:`GaussianProcessRegressor.fit`.

        With the NumPy backend (default) every bound evaluation accumulates the
        m x m statistics over blocks of rows (``calibprob.bases.gp._sparse_numerics``):
        time :math:`O(nm^2)` per evaluation, memory :math:`O(m^2)` plus one block.

        Parameters
        ----------
        X : array_like, shape (n, d)
        y : array_like, shape (n,)

        Returns
        -------
        self
        """
        super().fit(X, y)
        if self.optimize and self._backend() == "numpy":
            self.fit_info_["backend"] = "numpy"
            self.fit_info_.pop("compile_mode", None)
        return self

    def _factorize(self, theta: dict) -> dict:
        X, y, Z = self.X_train_, self._y_centred(), self.inducing_points_
        ls, var, noise = theta["lengthscale"], theta["variance"], theta["noise"]
        stats = _sparse_numerics.accumulate(self.kernel, int(self.p), X, y, Z, ls, var, self.jitter)
        state = _sparse_numerics.predictive_state(
            stats, var, noise, self._y_shift, mean=self.mean, objective=self.objective
        )
        state["theta"] = theta
        return state

    def _predict_block(self, state: dict, Xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        th = state["theta"]
        Kms = self._k(self.inducing_points_, Xs, th)
        t1 = scipy.linalg.solve_triangular(state["Lm"], Kms, lower=True, check_finite=False)
        t2 = scipy.linalg.solve_triangular(state["LB"], t1, lower=True, check_finite=False)
        mu = state["m"] + t2.T @ state["c"]
        var = th["variance"] - np.einsum("ij,ij->j", t1, t1) + np.einsum("ij,ij->j", t2, t2)
        if self.mean == "constant":
            h = 1.0 - (t2.T @ state["cb"]) / np.sqrt(th["noise"])
            var = var + h * h / state["q11"]
        return mu, var

    def loo(self, *, include_noise: bool = True, theta: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
        r"""Closed-form leave-one-out predictions of the sparse posterior, :math:`O(nm^2)`.

        The prediction of :math:`y_i` by the sparse GP refitted without point
        :math:`i` at the same hyperparameters and inducing inputs (a constant mean
        re-estimated by GLS in every fold): with :math:`T = L_B^{-1}L_m^{-1}K_{mn}/\sigma`
        (column :math:`t_i`), :math:`h_i = t_i^\top t_i`, :math:`s = \Sigma^{-1}1`,

        .. math::

            y_i - \mu_{-i} = \frac{(\Sigma^{-1}y)_i - \hat m s_i}{(1 - h_i)/\sigma^2 - s_i^2/q_{11}},
            \qquad
            \sigma^2_{-i} = \frac{1}{(1 - h_i)/\sigma^2 - s_i^2/q_{11}} + \sigma_f^2 - Q_{ii}

        (Sherman–Morrison on the m x m system :math:`C - k_ik_i^\top`; derivation in
        ``calibprob.bases.gp._sparse_loo``). Blocks of rows: no :math:`n\times m` array.

        Parameters
        ----------
        include_noise : bool, default True
            ``False``: standard deviation of the latent function.
        theta : dict, optional
            Hyperparameters (not re-estimated per fold); default ``theta_``.

        Returns
        -------
        mu_loo : ndarray, shape (n,)
        sigma_loo : ndarray, shape (n,)
        """
        state = self._state_for(theta)
        view = _StateView(self, state)
        offset = float(state["m"]) if self.mean == "constant" else 0.0
        system = sparse_kriging_system(view, offset=offset, gls=self.mean == "constant", keep_T=False)
        return self.loo_from_system(system, include_noise=include_noise)

    def loo_from_system(
        self, system: SparseKrigingSystem, *, include_noise: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        r""":meth:`loo` from a kriging system of this GP computed elsewhere (its :math:`O(nm^2)` pass done once).

        The J+GP view of a fitted sparse GP (``calibprob.calibrators.conformal.gp``) holds the
        same system as :meth:`loo` at ``theta_`` when its mean handling is the same (a constant mean
        re-estimated by GLS, ``refit_mean=True``; or a zero mean): the comparison runner computes it
        once for both. The same arithmetic as :meth:`loo`, so the same bits.

        Parameters
        ----------
        system : SparseKrigingSystem
            From ``calibprob.bases.gp._sparse_loo.sparse_kriging_system`` of this GP, with
            ``gls = (mean == "constant")`` and the offset ``mean_`` (0 for a zero mean).
        include_noise : bool, default True

        Returns
        -------
        mu_loo, sigma_loo : ndarray, shape (n,)
        """
        if system.n != len(self.y_train_) or system.gls != (self.mean == "constant"):
            raise ValueError(
                f"system must be this GP's kriging system with gls={self.mean == 'constant'} on its "
                f"{len(self.y_train_)} training rows; got gls={system.gls} on {system.n} rows. Build it with "
                "sparse_kriging_system(gp, offset=gp.mean_, gls=gp.mean == 'constant'), or call loo()."
            )
        mu = self.y_train_ - system.loo_residual
        var = 1.0 / system.qdiag + system.extra
        if not include_noise:
            var = var - system.noise
        return mu, np.sqrt(np.maximum(var, np.finfo(float).tiny))


class _StateView:
    """A fitted sparse GP seen at another θ (its factorisation ``state``)."""

    def __init__(self, gp: SparseGaussianProcessRegressor, state: dict) -> None:
        self.X_train_, self.y_train_, self.inducing_points_ = gp.X_train_, gp.y_train_, gp.inducing_points_
        self._state = state
        self._k = gp._k
