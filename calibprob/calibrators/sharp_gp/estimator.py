r"""The sharp calibrated GP estimator (Capone, Hirche & Pleiss 2023).

:class:`SharpCalibratedGP` validates its inputs, runs Algorithm 1 (:mod:`._solver`) on
the PyMC model of one level (:mod:`._graph`) or the one-factor line search, recomputes
β on the points that set it, repairs the knots (:mod:`._knots`) and evaluates the
calibrated quantile function; :func:`sharp_gp_ucb` is the calibrated bound of the
paper's eq. (18). The equations are in the package docstring.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Self, TypeAlias, cast

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.estimator import BaseEstimator, check_is_fitted, check_not_predictive
from calibprob._core.pytensor_setup import get_compile_mode, limit_blas_threads
from calibprob._core.tables import adopt_columns, check_columns, record_columns
from calibprob._core.validation import check_array, check_levels, check_same_length
from calibprob.calibrators.sharp_gp._diagnostics import calibration_dataset
from calibprob.calibrators.sharp_gp._graph import _compiled, _GraphKey, _placeholder
from calibprob.calibrators.sharp_gp._knots import (
    _phi_from_theta,
    _theta_from_phi,
    exact_monotone_knots,
    interpolate_knots,
    interpolate_quantiles,
    monotone_knots,
)
from calibprob.calibrators.sharp_gp._solver import (
    _fit_path,
    _FullSolver,
    _passes,
    _phi_from_passes,
    _ScaledSolver,
)
from calibprob.calibrators.sharp_gp._validate import (
    INTERPOLATIONS,
    VARIANTS,
    check_base,
    check_knot_levels,
    check_params,
    resolve_auto,
)
from calibprob.predictive import DEFAULT_LEVELS, from_quantiles

if TYPE_CHECKING:
    from calibprob.bases.gp import GaussianProcessRegressor, SparseGaussianProcessRegressor
    from calibprob.calibrators.sharp_gp._solver import _Knot

    #: the base the sharp GP re-evaluates σ(θ, x) with
    _GP: TypeAlias = GaussianProcessRegressor | SparseGaussianProcessRegressor

__all__ = ["SharpCalibratedGP", "sharp_gp_ucb", "VARIANTS", "INTERPOLATIONS"]


class SharpCalibratedGP(BaseEstimator):
    r"""Sharp calibrated GP of Capone, Hirche & Pleiss (2023) on a fitted calibprob GP.

    Quantiles :math:`Q(\delta, x) = \mu(\theta^R, x) + \hat\beta(\delta)\,
    \sigma(\hat\theta(\delta), x)`, with :math:`\hat\beta, \hat\theta` fitted
    on held-out calibration data by Algorithm 1 (see the module docstring
    for the equations, the passes and the interpolation).

    A *model-aware* calibrator (:class:`calibprob.ModelAwareCalibrator`): it
    needs the GP itself, not only its predictions, because it re-evaluates
    :math:`\sigma(\theta, x)` for new hyperparameters.

    Parameters
    ----------
    estimator : GaussianProcessRegressor or SparseGaussianProcessRegressor
        A *fitted* calibprob GP (its training data condition every
        :math:`\sigma(\theta, \cdot)`; its mean is kept) — always used as
        fitted, like ``prefit=True`` in :mod:`calibprob.calibrators.conformal`.
    variant : {"full", "scaled", "cross-fitted"}, default "full"
        The paper's method; the one-factor line search of its §6; or θ fitted
        on one part of the calibration data and β on the rest.
    levels : array_like or "all", optional
        Knot levels in (0, 1), strictly increasing. ``"all"``: every
        :math:`j/(N+1)` (Theorem 5.4). Default: ``n_levels`` knots
        :math:`j/(N+1)` spread evenly from :math:`j = 1` to :math:`N`.
    n_levels : int, default 21
        Number of knots when ``levels`` is None.
    include_noise : bool, default True
        Use the predictive standard deviation of a new observation (eq. 3b,
        with the noise variance); ``False`` the latent function's (the
        authors' code).
    fit_noise : bool, default False
        Also calibrate the noise variance (default: keep the base's).
    n_restarts : int or None, default None
        L-BFGS-B starts for the outermost level of each pass: the best
        one-factor line-search solution (the ``"scaled"`` variant's), the
        base's θ, and ``n_restarts - 2`` seeded perturbations (one unit in
        log space) of the first. ``None``: 2 for N <= 1000 calibration rows,
        1 (the line-search start) above — the base's θ start was never the
        better one in the large-N measurements of the docs page and costs a
        quarter of the fit there.
    prior_sd : float, default 3.0
        Standard deviation of the weak ``Normal(log θ^R, prior_sd)`` prior on
        each free log-hyperparameter.
    fit_fraction : float, default 0.5
        ``variant="cross-fitted"``: share of the calibration points used to
        fit θ (the rest sets β).
    n_train_subset : int, optional
        Fit θ with the posterior conditioned on this many randomly chosen
        training points (then β with all of them; paper §6). Default: all
        points for an exact base; 500 for a sparse base (exact GP on the
        subset) — pass a value >= its training size to fit with the VFE
        posterior on all training data instead.
    n_cal_subset : int or None, default 1000
        Fit θ_δ on at most this many calibration points (a seeded random
        subset; the fit levels are clipped into its range and θ̂ at the knots
        is interpolated as in the cross-fitted variant), then set β_δ with
        *all* of them, so the calibration-set coverage at the knots stays
        exact. Every objective evaluation costs O(n² · n_cal_subset), so this
        bounds the fit on large calibration sets (measured trade-off in the
        docs page); ``None`` fits on every point. No effect at N <= 1000.
    interpolate : {"theta", "quantile"}, default "theta"
        Quantiles between the interpolation nodes. ``"theta"`` (the paper's
        Algorithm 1): :math:`\mu + \hat\beta(\delta)\sigma(\hat\theta(\delta), x)`
        with :math:`\hat\theta(\delta)` interpolated — one posterior
        factorisation per distinct predicted level (99 by default).
        ``"quantile"``: σ only at the nodes (K + 1 factorisations) and the
        quantile linear in :math:`\Phi^{-1}(\delta)` between two nodes — equal at
        the nodes, also monotone in δ (Remark 5.2 allows any monotone
        interpolant), several times cheaper to predict for a large training set.
        ``"auto"`` (default): ``"theta"`` for N <= 1000 calibration rows (every
        paper-table number), ``"quantile"`` above (measured on 4 128 rows:
        test NLL +0.0005, 95 % width +2 %, prediction 5× faster).
    warm_start : bool or None, default None
        Start each constrained knot's L-BFGS-B from its outer neighbour's
        log-decrements (Remark 5.3's :math:`\Delta`, raised to at least -8 so a
        coordinate can still move) instead of :math:`\Delta = \log 0.02` in every
        coordinate: fewer evaluations per knot, a possibly different local
        optimum. ``None``: on above 1000 calibration rows, off at or below.
    maxiter : int, default 100
        L-BFGS-B iterations per start.
    maxls : int or None, default None
        L-BFGS-B line-search steps per iteration. ``None``: scipy's 20 for
        N <= 1000 calibration rows, 6 above — the objective has kinks wherever
        the order statistic β changes point, where a Wolfe line search spends
        up to ten evaluations per iteration (measured on 4 128 rows: half the
        evaluations, test NLL +0.004; docs page).
    blas_threads : int or None, default 1
        BLAS threads during ``fit`` (``threadpoolctl``). One thread is much
        faster for the moderate matrices here on a shared machine; ``None``
        leaves the setting alone.
    compile_mode : str, pytensor Mode or None
        Mode of the compiled objective; ``None`` uses
        :func:`calibprob.bases.gp.get_compile_mode` (``"FAST_COMPILE"`` by default:
        compiles in seconds; ``"NUMBA"`` runs ~2-3× faster per evaluation
        after a cold JIT of about a minute).
    random_state : int, numpy Generator or None
        Restarts, the cross-fitting split and the training subset.

    Attributes
    ----------
    knot_level_, knot_beta_ : ndarray, shape (K,)
        Fitted knots (after the monotone repair) and their β.
    knot_lengthscale_ : ndarray, shape (K, d)
    knot_variance_, knot_noise_ : ndarray, shape (K,)
    nodes_level_, nodes_beta_, nodes_log_theta_ : ndarray
        Interpolation nodes (the knots plus the artificial knot at β̂ = 0),
        ``nodes_log_theta_`` in σ-increasing coordinates
        :math:`(-\log\ell, \log\sigma_f^2, \log\sigma_n^2)`.
    diagnostics_ : xarray.Dataset
        The ``calibration`` group of :meth:`predict`.
    n_calibration_ : int
        Calibration points that set β (``N_B`` when cross-fitted).
    interpolate_, n_restarts_, warm_start_ : str, int, bool
        The settings used (``"auto"`` / ``None`` resolved by the number of
        calibration rows).
    fit_seconds_ : float

    Notes
    -----
    *Over-fitting.* With the paper's variant θ_δ and β_δ are chosen on the
    same points, and at the outer levels β_δ is an extreme order statistic:
    with many free hyperparameters (13 lengthscales on Boston) and ~100
    calibration points the optimiser shapes σ(θ, ·) around the few extreme
    residuals. Measured on four 0.6/0.2/0.2 Boston splits (101 calibration
    points, base GP by maximum likelihood): calibration-set coverage exact at
    every knot, but held-out 95% coverage 0.86 (width 1.08) against 0.94
    (width 1.23) for the one-factor ``"scaled"`` variant; ``prior_sd=0.03``
    restores 0.93 (width 1.24), i.e. the extra sharpness was the over-fit. The
    ``"cross-fitted"`` variant has exact coverage at its knots by
    construction.

    *Knots after β is recomputed.* With the cross-fitted split, ``n_cal_subset``
    or ``n_train_subset`` β is recomputed on other points than θ was fitted on
    and may not shrink toward the median. The repair moves the inner knot's φ
    toward its outer neighbour's and recomputes β exactly there
    (:func:`~calibprob.calibrators.sharp_gp.exact_monotone_knots`), so every knot
    :math:`j/(N+1)` keeps exactly :math:`j` of the :math:`N` points at or below it
    and Theorem 5.4's two-sided bound :math:`|P(y \le Q(\delta)) - \delta| \le 1/(N+1)`
    holds at the moved knots as at the others. Widening β there instead (the
    earlier repair) left a moved knot with only the conservative side of
    the bound (0.08 of the calibration points at the knot 0.10 on the toy of
    ``tests/calibrators/sharp_gp/test_sharp_gp.py``). On a 1-D toy with a gap in the training data (paper's
    Fig. 2; ``tests/calibrators/sharp_gp/test_sharp_gp.py``) the full variant is calibrated and its
    99% interval 40% narrower than RK's.

    *Cost.* With n training and N calibration points, one objective value
    costs one Cholesky factor of the n x n training covariance and one
    triangular solve with the N calibration columns (O(n³/3 + n² N)); the
    gradient (analytic pullback, no further factorisation) about twice that
    again. Line searches and backtracking evaluate values only. ``n_cal_subset``
    caps N in the fit, ``n_train_subset`` caps n; β and prediction use all
    points (one factorisation per knot, and per distinct predicted level —
    or per node with ``interpolate="quantile"``). Measured times and the
    choice of variant by size: the sharp-GP documentation page and
    ``benchmarks/bench_sharp_gp.py``.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.bases.gp import GaussianProcessRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, size=(150, 1)); y = np.sin(X[:, 0]) + 0.2 * rng.normal(size=150)
    >>> gp = GaussianProcessRegressor(random_state=0).fit(X[:50], y[:50])
    >>> sharp = SharpCalibratedGP(estimator=gp, n_levels=5).fit(X[50:], y[50:])
    >>> pred = sharp.predict(X[:3])               # the predictive Dataset
    >>> pred.sizes["level"]
    99
    >>> {"beta", "coverage", "objective"} <= set(sharp.diagnostics_.data_vars)  # per knot
    True

    References
    ----------
    Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
    processes. NeurIPS 36.
    """

    #: Removed in 0.2.0 (``base=``, now ``estimator=``): a 0.1.0 file holds it at its default, dropped at load.
    _REMOVED_PARAMS = {"base": None}

    def __init__(
        self,
        *,
        estimator: _GP | None = None,
        variant: str = "full",
        levels: ArrayLike | str | None = None,
        n_levels: int = 21,
        include_noise: bool = True,
        fit_noise: bool = False,
        n_restarts: int | None = None,
        prior_sd: float = 3.0,
        fit_fraction: float = 0.5,
        n_train_subset: int | None = None,
        n_cal_subset: int | None = 1000,
        interpolate: str = "auto",
        warm_start: bool | None = None,
        maxiter: int = 100,
        maxls: int | None = None,
        blas_threads: int | None = 1,
        compile_mode: Any = None,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.estimator = estimator
        self.variant = variant
        self.levels = levels
        self.n_levels = n_levels
        self.include_noise = include_noise
        self.fit_noise = fit_noise
        self.n_restarts = n_restarts
        self.prior_sd = prior_sd
        self.fit_fraction = fit_fraction
        self.n_train_subset = n_train_subset
        self.n_cal_subset = n_cal_subset
        self.interpolate = interpolate
        self.warm_start = warm_start
        self.maxiter = maxiter
        self.maxls = maxls
        self.blas_threads = blas_threads
        self.compile_mode = compile_mode
        self.random_state = random_state

    # -- validation (calibprob.calibrators.sharp_gp._validate) -----------------------
    def _check_base(self) -> _GP:
        return check_base(self)

    def _check_params(self) -> None:
        check_params(self)

    def _knot_levels(self, n_beta: int) -> np.ndarray:
        return check_knot_levels(self, n_beta)

    # -- fit -----------------------------------------------------------------------
    def fit(self, X_cal: ArrayLike, y_cal: ArrayLike) -> Self:
        """Fit β_δ and θ_δ on calibration data (Algorithm 1).

        Parameters
        ----------
        X_cal : array_like, shape (N, d)
            Calibration inputs, disjoint from the base's training data.
        y_cal : array_like, shape (N,)

        Returns
        -------
        self
        """
        self._check_params()
        base = self._check_base()
        check_not_predictive(X_cal, self, "X_cal")
        if not adopt_columns(self, base):  # the base's own columns, else X_cal's
            record_columns(self, X_cal)
        check_columns(self, X_cal, "X_cal")
        X = check_array(X_cal, "X_cal", ndim=2)
        y = check_array(y_cal, "y_cal", ndim=1)
        check_same_length(X_cal=X, y_cal=y)
        d = base.n_features_in_
        if X.shape[1] != d:
            raise ValueError(
                f"X_cal has {X.shape[1]} features but the base GP was fitted with {d}. Pass the "
                "same columns as in base.fit."
            )
        rng = np.random.default_rng(self.random_state)
        n = y.size
        if self.variant == "cross-fitted":
            n_fit = int(round(self.fit_fraction * n))
            if n_fit < 2 or n - n_fit < 2:
                raise ValueError(
                    f"the cross-fitted variant needs at least 2 calibration points in each part; "
                    f"got N = {n} with fit_fraction = {self.fit_fraction}."
                )
            perm = rng.permutation(n)
            idx_fit, idx_beta = np.sort(perm[:n_fit]), np.sort(perm[n_fit:])
        else:
            if n < 2:
                raise ValueError(f"fit needs at least 2 calibration points; got {n}.")
            idx_fit = idx_beta = np.arange(n)
        if self.n_cal_subset is not None and idx_fit.size > self.n_cal_subset:
            # θ_δ on a seeded subset, β_δ on every point (the calibration guarantee is β's)
            idx_fit = np.sort(rng.choice(idx_fit, size=int(self.n_cal_subset), replace=False))
        levels = self._knot_levels(idx_beta.size)
        auto = resolve_auto(self, n)
        self.interpolate_, self.n_restarts_, self.warm_start_ = (
            auto["interpolate"],
            auto["n_restarts"],
            auto["warm_start"],
        )
        self._maxls = auto["maxls"]

        t_start = time.perf_counter()
        with limit_blas_threads(self.blas_threads):
            self._fit(base, X, y, idx_fit, idx_beta, levels, rng)
        self.fit_seconds_ = time.perf_counter() - t_start
        self.diagnostics_.attrs["fit_seconds"] = float(self.fit_seconds_)
        return self

    def _fit(
        self,
        base: _GP,
        X: np.ndarray,
        y: np.ndarray,
        idx_fit: np.ndarray,
        idx_beta: np.ndarray,
        levels: np.ndarray,
        rng: np.random.Generator,
    ) -> None:
        d = base.n_features_in_
        mu, _ = base.predict_mean_std(X)
        r = y - mu
        theta_R = dict(base.theta_)
        phi_ref = _phi_from_theta(theta_R, d)
        tied = 0.0 if getattr(base, "noise", True) else float(base.nugget)
        free = np.r_[np.ones(d + 1), float(self.fit_noise and tied == 0.0)]
        sparse = hasattr(base, "inducing_points_")
        subset = self.n_train_subset if self.n_train_subset is not None else (500 if sparse else None)
        use_subset = subset is not None and subset < base.X_train_.shape[0]
        fit_levels = levels
        separate = not np.array_equal(idx_fit, idx_beta)
        if separate:
            # θ is fitted on another set of points (cross-fitted: the other part; a
            # calibration subset: part of them) at the same levels, clipped into its range
            nf = idx_fit.size
            fit_levels = np.unique(np.clip(levels, 1.0 / (nf + 1), nf / (nf + 1.0)))
        X_fit, r_fit = X[idx_fit], r[idx_fit]
        if self.variant == "scaled":
            solver = _ScaledSolver(lambda phi: self._sigma(base, phi, X_fit), r_fit, phi_ref, d)
            knots, skipped = _fit_path(solver, fit_levels, r_fit)
        else:
            X_tr = base.X_train_
            if use_subset:
                X_tr = X_tr[np.sort(rng.choice(X_tr.shape[0], size=subset, replace=False))]
            kind = "vfe" if sparse and not use_subset else "exact"
            data = self._graph_data(base, kind, X_tr, X_fit, r_fit, phi_ref, free, tied)
            knots, skipped = self._fit_full(base, kind, data, fit_levels, r_fit, rng)
        if not knots:
            raise ValueError(
                f"no level could be fitted: every requested level lies where β changes sign "
                f"({skipped}). Request levels further from the median."
            )
        info = {
            "separate": separate,
            "n_fit": int(idx_fit.size),
            "use_subset": bool(use_subset),
            "theta_R": theta_R,
            "tied": tied,
        }
        self._set_knots(base, X, r, idx_beta, levels, knots, skipped, phi_ref, info)

    def _sigma(self, base: _GP, phi: np.ndarray, X: np.ndarray) -> np.ndarray:
        """σ(θ(φ), X) with the base's posterior on all its training data."""
        theta = _theta_from_phi(phi, base.n_features_in_)
        return base.predict_mean_std(X, theta=theta, include_noise=self.include_noise)[1]

    def _graph_data(
        self,
        base: _GP,
        kind: str,
        X_tr: np.ndarray,
        X_fit: np.ndarray,
        r_fit: np.ndarray,
        phi_ref: np.ndarray,
        free: np.ndarray,
        tied: float,
    ) -> dict:
        """Values of the ``pm.Data`` containers of :func:`build_model`."""
        data = {
            "X_train": X_tr,
            "X_cal": X_fit,
            "residual": r_fit,
            "level": np.asarray(0.5),
            "phi_ref": phi_ref,
            "anchor": phi_ref,
            "free": free,
            "constrained": np.asarray(0.0),
            "include_noise": np.asarray(float(self.include_noise)),
            "noise_tied": np.asarray(tied),
            "constant_mean": np.asarray(float(getattr(base, "mean", "zero") == "constant")),
            "prior_sd": np.asarray(float(self.prior_sd)),
        }
        if kind == "vfe":  # only a sparse base gives the VFE graph
            sparse = cast("SparseGaussianProcessRegressor", base)
            data["Z"] = sparse.inducing_points_
            data["jitter"] = np.asarray(float(sparse.jitter))
        return data

    def _fit_full(
        self, base: _GP, kind: str, data: dict, levels: np.ndarray, r_fit: np.ndarray, rng: np.random.Generator
    ) -> tuple[list[_Knot], np.ndarray]:
        """Algorithm 1 with the compiled PyMC model, holding the graph's lock."""
        mode = get_compile_mode() if self.compile_mode is None else self.compile_mode
        key = _GraphKey(
            kind,
            base.kernel,
            int(base.p) if base.kernel == "matern" else 0,
            mode if isinstance(mode, (str, type(None))) else id(mode),
        )
        entry = _compiled(key)
        solver = _FullSolver(
            entry,
            data,
            data["phi_ref"],
            data["free"],
            n_restarts=self.n_restarts_,
            maxiter=int(self.maxiter),
            rng=rng,
            warm_start=self.warm_start_,
            maxls=self._maxls,
        )
        with entry.lock:
            entry.set_data(data)
            try:
                return _fit_path(solver, levels, r_fit)
            finally:
                entry.set_data(_placeholder(kind))  # drop references to the data

    def _set_knots(
        self,
        base: _GP,
        X: np.ndarray,
        r: np.ndarray,
        idx_beta: np.ndarray,
        levels: np.ndarray,
        knots: list[_Knot],
        skipped: np.ndarray,
        phi_ref: np.ndarray,
        info: dict,
    ) -> None:
        """β on the points that set it (σ on all training data), the repair and the fitted attributes."""
        d = base.n_features_in_
        if info["separate"]:
            r_b = r[idx_beta]
            # β's sign at a knot is fixed by the β-part's residual signs: take φ from
            # the θ-part's pass of that sign, so φ keeps the pattern of Algorithm 1
            passes, skipped = _passes(levels, r_b)
            kl = np.sort(np.concatenate([seq for _, seq in passes]))
            knot_phi = _phi_from_passes(knots, kl, passes, phi_ref)
        else:
            kl, knot_phi = np.array([k.level for k in knots]), np.array([k.phi for k in knots])
        X_b, r_b = X[idx_beta], r[idx_beta]
        # β exact on its points, made monotone by moving φ toward the outer knot's (Theorem 5.4 needs
        # both); the widening of monotone_knots is then left with rounding only
        knot_phi, beta, sig_b, moved = exact_monotone_knots(
            kl, knot_phi, r_b, lambda ph: self._sigma(base, ph, X_b)
        )  # sig_b: (K, N_B)
        nodes_lv, nodes_b, nodes_phi, repaired = monotone_knots(kl, beta, knot_phi)
        repaired = repaired + 4 * moved
        keep = np.isin(nodes_lv, kl)
        beta_final, phi_final = nodes_b[keep], nodes_phi[keep]
        # σ again only where the repair moved φ
        sig_final = np.array(
            [
                s if np.array_equal(ph, ph0) else self._sigma(base, ph, X_b)
                for ph, ph0, s in zip(phi_final, knot_phi, sig_b)
            ]
        )
        coverage = np.mean(r_b[None, :] <= beta_final[:, None] * sig_final, axis=1)

        self.nodes_level_, self.nodes_beta_, self.nodes_log_theta_ = nodes_lv, nodes_b, nodes_phi
        self.knot_level_, self.knot_beta_ = kl, beta_final
        th = [_theta_from_phi(ph, d) for ph in phi_final]
        self.knot_lengthscale_ = np.array([t["lengthscale"] for t in th])
        self.knot_variance_ = np.array([t["variance"] for t in th])
        # an interpolating base ties the noise to the variance (nugget · σ_f²)
        tied = info["tied"]
        self.knot_noise_ = tied * self.knot_variance_ if tied else np.array([t["noise"] for t in th])
        self.n_calibration_ = int(r_b.size)
        self.n_features_in_ = d
        self._mu_scale = float(np.sqrt(np.mean(r**2)))
        self.diagnostics_ = calibration_dataset(
            self,
            knots,
            kl,
            beta_final,
            coverage,
            repaired,
            skipped,
            r_b,
            sig_final,
            info["theta_R"],
            info["n_fit"],
            info["use_subset"],
        )

    # -- the quantile function ------------------------------------------------------
    def calibration_beta(self, levels: ArrayLike) -> np.ndarray:
        r""":math:`\hat\beta(\delta)` at ``levels`` (shape (L,))."""
        check_is_fitted(self, "nodes_level_", method="fit")
        lv = check_levels(levels, "levels", increasing=False)
        return interpolate_knots(self.nodes_level_, self.nodes_beta_, self.nodes_log_theta_, lv)[0]

    def calibration_theta(self, levels: ArrayLike) -> dict:
        r""":math:`\hat\theta(\delta)` at ``levels``: dict of ``lengthscale (L, d)``, ``variance (L,)``, ``noise (L,)``."""
        check_is_fitted(self, "nodes_level_", method="fit")
        lv = check_levels(levels, "levels", increasing=False)
        phi = interpolate_knots(self.nodes_level_, self.nodes_beta_, self.nodes_log_theta_, lv)[1]
        d = self.n_features_in_
        return {"lengthscale": np.exp(-phi[:, :d]), "variance": np.exp(phi[:, d]), "noise": np.exp(phi[:, d + 1])}

    def quantile(self, X: ArrayLike, levels: ArrayLike) -> np.ndarray:
        r"""Calibrated quantiles :math:`\mu(x) + \hat\beta(\delta)\sigma(\hat\theta(\delta), x)`.

        Parameters
        ----------
        X : array_like, shape (n, d)
        levels : float or array_like, shape (L,)
            Any levels in (0, 1) (beyond the outer knots: see the module docstring).

        Returns
        -------
        ndarray, shape (n, L) (or (n,) for a scalar level)
            Non-decreasing in the level for every row.
        """
        check_is_fitted(self, "nodes_level_", method="fit")
        base = self._check_base()
        scalar = np.ndim(levels) == 0
        lv = check_levels(levels, "levels")
        check_not_predictive(X, self)
        check_columns(self, X)
        X = check_array(X, "X", ndim=2)
        mu, _ = base.predict_mean_std(X)
        if self.interpolate_ == "quantile" and self.nodes_level_.size > 1:
            q = self._quantile_between_nodes(base, X, lv, mu)
        else:
            beta, phi = interpolate_knots(self.nodes_level_, self.nodes_beta_, self.nodes_log_theta_, lv)
            cache: dict = {}
            q = np.empty((X.shape[0], lv.size))
            for j in range(lv.size):
                key = phi[j].tobytes()
                if key not in cache:
                    cache[key] = self._sigma(base, phi[j], X)
                q[:, j] = mu + beta[j] * cache[key]
        self._last_crossing = 0
        if lv.size > 1:
            drop = np.diff(q, axis=1)
            tol = 1e-9 * max(self._mu_scale, 1e-300)
            self._last_crossing = int(np.sum(np.any(drop < -tol, axis=1)))
            # Assumption 4.1 makes q monotone; the running maximum removes rounding
            # (and would repair, and count, any violation of the assumption)
            q = np.maximum.accumulate(q, axis=1)
        return q[:, 0] if scalar else q

    def _quantile_between_nodes(self, base: _GP, X: np.ndarray, lv: np.ndarray, mu: np.ndarray) -> np.ndarray:
        """``interpolate="quantile"``: σ at the nodes only (:func:`._knots.interpolate_quantiles`)."""
        sig = np.stack([self._sigma(base, ph, X) for ph in self.nodes_log_theta_], axis=1)
        return interpolate_quantiles(self.nodes_level_, self.nodes_beta_, sig, mu, lv)

    def predict(self, X: ArrayLike, *, levels: ArrayLike | None = None) -> xr.Dataset:
        """The calibrated predictive distribution (the data contract of :mod:`calibprob.predictive`).

        The calibration diagnostics (β̂, θ̂ at the knots and the interpolation
        nodes, per-level objective, calibration coverage, convergence) are in
        ``diagnostics_``, set by :meth:`fit`.

        Parameters
        ----------
        X : array_like, shape (n, d)
        levels : array_like, optional
            Default :data:`calibprob.predictive.DEFAULT_LEVELS`.

        Returns
        -------
        xarray.Dataset
            ``quantile(obs, level)`` (``family="quantile"``), attrs ``method``,
            ``crossing_repaired`` (rows where Assumption 4.1 failed; 0 expected).
        """
        lv = DEFAULT_LEVELS if levels is None else check_levels(levels, "levels")
        if lv.size < 2:
            raise ValueError(f"levels must hold at least 2 levels; got {lv.size}.")
        q = self.quantile(X, lv)
        ds = from_quantiles(q, lv, method=f"sharp-gp/{self.variant}")
        ds.attrs["crossing_repaired"] = int(self._last_crossing)
        ds.attrs["n_calibration"] = int(self.n_calibration_)
        ds.attrs["outside_knots"] = int(np.sum((lv < self.nodes_level_[0]) | (lv > self.nodes_level_[-1])))
        return ds

    def predict_distribution(self, X: ArrayLike, *, levels: ArrayLike | None = None) -> xr.Dataset:
        """The same as :meth:`predict` (the name of earlier releases; kept as an alias)."""
        return self.predict(X, levels=levels)

    def ucb(self, X: ArrayLike, *, level: float = 0.99) -> np.ndarray:
        r"""Calibrated upper confidence bound :math:`\mu + \hat\beta(\delta)\sigma(\hat\theta(\delta), x)` (eq. 18).

        ``level`` is the quantile level (0.99 = the paper's :math:`\delta = 0.01`
        miscoverage); use e.g. 0.01 for a lower bound when minimising.
        """
        return self.quantile(X, float(level))


def sharp_gp_ucb(calibrator: SharpCalibratedGP, X: ArrayLike, *, level: float = 0.99) -> np.ndarray:
    r"""UCB acquisition with calibrated quantiles, appendix eq. (18) of Capone et al. (2023).

    .. math::

        \alpha(x) = \mu(\theta^R, x) + \hat\beta(\delta)\,\sigma(\hat\theta(\delta), x),

    the calibrated quantile at ``level`` (the paper maximises with the 0.99
    quantile; pass ``level=0.01`` for the lower bound used when minimising).

    Parameters
    ----------
    calibrator : SharpCalibratedGP
        Fitted (for speed, fit only the level(s) you need, e.g. ``levels=[0.01, 0.99]``).
    X : array_like, shape (n, d)
        Candidate points.
    level : float, default 0.99

    Returns
    -------
    ndarray, shape (n,)
    """
    return calibrator.ucb(X, level=level)
