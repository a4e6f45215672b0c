"""The GP-Beta estimator: hyperparameters, fit, prediction and posterior queries (Song et al. 2019)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import xarray as xr
from scipy import special

from calibprob._core.estimator import BaseEstimator, check_is_fitted
from calibprob._core.pytensor_setup import limit_blas_threads
from calibprob._core.stable import pow2_scale, stable_mean
from calibprob._core.validation import check_array, check_choice, check_confidence_levels, check_int
from calibprob.calibrators.gp_beta._graph import DEFAULT_COMPILE_MODE
from calibprob.calibrators.gp_beta._grid import cdf_on_grid, invert, moments_from_grid
from calibprob.calibrators.gp_beta._inference import Problem, convergence, fit_advi, fit_map, fit_nuts, fit_svi
from calibprob.calibrators.gp_beta._inputs import covariates, observed_terms, prediction, targets
from calibprob.calibrators.gp_beta._kmeans import _kmeans
from calibprob.calibrators.gp_beta._link import (
    _latent_numpy,
    _pointwise_loglik,
    beta_link_cdf_z,
    beta_link_logpdf_z,
)
from calibprob.calibrators.gp_beta._objective import Layout
from calibprob.calibrators.gp_beta._queries import calibration_map_dataset, posterior_predictive_tree
from calibprob.calibrators.gp_beta._tree import held_out_elpd, make_tree, post_flat
from calibprob.calibrators.grouping.mondrian import fit_with_groups, keep_group_coord, predict_with_groups
from calibprob.calibrators.recalibration import NO_GUARANTEE
from calibprob.predictive import from_quantiles
from calibprob.predictive._common import _levels_or_default
from calibprob.weights import resolve

__all__ = ["GPBetaCalibrator", "INFERENCE_METHODS", "AUTO_FULL_BATCH", "AUTO_BATCH_SIZE"]

#: Inference methods accepted by :class:`GPBetaCalibrator` (``inference=``).
INFERENCE_METHODS = ("advi", "fullrank_advi", "svi", "map", "nuts")
#: Full-batch ADVI / SVI up to this many points when ``batch_size="auto"``; minibatches above.
AUTO_FULL_BATCH = 4096
AUTO_BATCH_SIZE = 256


def _blas_single_thread() -> Any:
    # Small triangular solves are ~20x slower with 2 OpenBLAS threads than with 1
    # (thread start-up dominates); every fit and prediction runs single-threaded.
    return limit_blas_threads(1)


class GPBetaCalibrator(BaseEstimator):
    r"""GP-Beta distribution calibration of a Gaussian base model (Song et al. 2019).

    Parameters
    ----------
    n_inducing : int, default 16
        Number :math:`m` of inducing points in :math:`(\mu, \sigma)` space (the
        paper uses 8–64). Initialised by k-means of the standardised inputs.
    rank : int, default 1
        Rank :math:`r` of :math:`W` in the coregionalisation :math:`B = WW^\top +
        \operatorname{diag}(\kappa)`, 0 to 3 (0: independent outputs).
    inference : {"advi", "fullrank_advi", "svi", "map", "nuts"}, default "advi"
        How the posterior is approximated (see the module docstring). ``"svi"``
        is the paper's and netcal's sparse variational GP (variational inducing
        values, point hyperparameters; :func:`svi_fit`).
    draws : int, default 200
        Posterior draws kept: from the variational approximation (ADVI, SVI), or
        per chain (NUTS). Ignored by MAP (one draw). Prediction costs scale with it.
    n_iter : int, default 4000
        ADVI / SVI iterations (Adam steps).
    learning_rate : float or None, default None
        Adam learning rate of ADVI / SVI. ``None``: 0.01 (the paper's Fig. 1
        setting) for ``"advi"`` and ``"svi"``, 0.003 for ``"fullrank_advi"``,
        whose step at 0.01 is too noisy (measured on the n = 1000 Fig. 1 set,
        4000 steps, four seeds: final negative ELBO 2824–2833 at 0.01 against
        2798–2799 at 0.003).
    obj_n_mc : int, default 1
        Monte Carlo draws per ADVI / SVI gradient (PyMC's ``obj_n_mc``; one
        draw per step over ``n_iter`` steps, as every shipped spec and test uses).
    batch_size : int, "auto" or None, default "auto"
        ADVI / SVI minibatch size (:func:`pymc.Minibatch`, stochastic variational
        inference on subsets: each gradient sees a fresh random batch, its
        log-likelihood scaled by ``n / batch_size``). ``"auto"``: full batch up
        to 4096 points, 256 above; ``None``: always full batch. MAP and NUTS use
        every point.
    learn_inducing : bool, default False
        Give the inducing inputs a prior :math:`N(Z_0, 0.25^2)` and infer them
        (with SVI: a point estimate, as in the sparse variational GP).
    tune, chains, target_accept : NUTS settings
        Warm-up iterations per chain, number of chains (run one after another),
        target acceptance rate.
    compile_mode : str, PyTensor Mode or None
        Mode of the compiled PyMC functions (NUTS, minibatch ADVI / SVI); ``None``
        uses ``DEFAULT_COMPILE_MODE`` (``"CVM"``, the C backend). Full-batch
        MAP, ADVI and SVI compile nothing (NumPy objective) and ignore it.
    n_grid : int, default 256
        Grid points per observation for the calibrated CDF (in :math:`z`,
        spanning all but 1e-7 of the mass).
    random_state : int, numpy Generator or None
        Seed for k-means, ADVI/NUTS and posterior draws.

    Attributes
    ----------
    idata_ : xarray.DataTree
        ``posterior`` (free parameters plus ``theta``, ``gamma``, ``kappa``,
        correlation ``R``), ``sample_stats``, ``log_likelihood`` (``y``, pointwise),
        ``observed_data``, ``constant_data`` (base ``mu``, ``sigma``, the
        standardisation and the inducing initialisation), and for ADVI the
        ``variational`` group (loss per iteration).
    loc_, scale_ : float
        Standardisation of the inputs.
    inducing_init_ : ndarray, shape (n_inducing, 2)
        k-means inducing inputs in standardised ``(mu, sigma)``.
    fit_time_ : float
        Seconds spent in :meth:`fit` (including any compilation).
    weights_guarantee_ : str or None
        After a weighted :meth:`fit`: that no finite-sample guarantee follows
        (``calibprob.calibrators.recalibration.NO_GUARANTEE``); None unweighted.

    Weights (``fit(..., weights=)``, e.g. a likelihood ratio :math:`v_i` under covariate shift)
    weight the data terms of the log posterior, :math:`\log p(\text{params}) + \sum_i v_i
    \log\hat p_i(y_i)` with :math:`v` rescaled to mean 1 (so the prior keeps its weight against
    :math:`n` points; Shimodaira 2000's weighted likelihood): a weighted *fitting loss* with **no
    finite-sample guarantee**. The inducing inputs and the standardisation stay those of the
    unweighted points (they place the GP, they are not fitted). The weighted objective is the
    NumPy one: ``inference="map"``, ``"advi"``, ``"fullrank_advi"`` or ``"svi"`` on the full batch;
    NUTS and minibatches (a PyMC graph) refuse weights. Equal weights are the unweighted fit exactly.

    Examples
    --------
    A base that predicts :math:`N(\mu, 1)` everywhere while the true spread is
    0.5 for :math:`\mu < 0` and 2 above: GP-Beta learns the calibration map as
    a function of :math:`(\mu, \sigma)` and narrows or widens accordingly.

    >>> import numpy as np
    >>> import calibprob
    >>> from calibprob.calibrators import GPBetaCalibrator
    >>> rng = np.random.default_rng(0)
    >>> mu = rng.uniform(-2, 2, 200)
    >>> y = mu + np.where(mu > 0, 2.0, 0.5) * rng.normal(size=200)
    >>> cal = GPBetaCalibrator(n_inducing=4, inference="map", random_state=0)
    >>> cal = cal.fit(calibprob.normal(mu, np.ones(200)), y)
    >>> pred = cal.predict(calibprob.normal(np.array([-1.0, 1.0]), np.ones(2)), levels=[0.05, 0.95])
    >>> width = (pred["quantile"].sel(level=0.95) - pred["quantile"].sel(level=0.05)).values
    >>> bool(width[0] < 3.29 < width[1])
    True

    References
    ----------
    Song, H., Diethe, T., Kull, M., Flach, P. (2019). Distribution calibration
    for regression. ICML, §4.
    """

    def __init__(
        self,
        *,
        n_inducing: int = 16,
        rank: int = 1,
        inference: str = "advi",
        draws: int = 200,
        n_iter: int = 4000,
        learning_rate: float | None = None,
        obj_n_mc: int = 1,
        batch_size: Any = "auto",
        learn_inducing: bool = False,
        tune: int = 1000,
        chains: int = 2,
        target_accept: float = 0.9,
        n_grid: int = 256,
        compile_mode: Any = None,
        random_state: Any = None,
    ) -> None:
        self.n_inducing = n_inducing
        self.rank = rank
        self.inference = inference
        self.draws = draws
        self.n_iter = n_iter
        self.learning_rate = learning_rate
        self.obj_n_mc = obj_n_mc
        self.batch_size = batch_size
        self.learn_inducing = learn_inducing
        self.tune = tune
        self.chains = chains
        self.target_accept = target_accept
        self.n_grid = n_grid
        self.compile_mode = compile_mode
        self.random_state = random_state

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> None:
        check_int(self.n_inducing, "n_inducing", minimum=1)
        check_int(self.rank, "rank", minimum=0)
        if self.rank > 3:
            raise ValueError(f"rank must be in 0..3 (three latent outputs a, b, c); got {self.rank}.")
        check_choice(self.inference, "inference", INFERENCE_METHODS)
        check_int(self.draws, "draws", minimum=1)
        check_int(self.n_iter, "n_iter", minimum=1)
        check_int(self.obj_n_mc, "obj_n_mc", minimum=1)
        check_int(self.tune, "tune", minimum=0)
        check_int(self.chains, "chains", minimum=1)
        check_int(self.n_grid, "n_grid", minimum=16)
        if self.learning_rate is not None and not (
            isinstance(self.learning_rate, (int, float)) and self.learning_rate > 0
        ):
            raise ValueError(
                f"learning_rate must be a positive number or None (the method's default); got {self.learning_rate!r}."
            )
        if not 0 < self.target_accept < 1:
            raise ValueError(f"target_accept must be in (0, 1); got {self.target_accept!r}.")
        if self.batch_size not in ("auto", None):
            check_int(self.batch_size, "batch_size", minimum=1)

    # input conversion lives in ._inputs; the old private names stay on the class
    _prediction = staticmethod(prediction)
    _covariates = staticmethod(covariates)
    _observed_terms = staticmethod(observed_terms)
    _targets = staticmethod(targets)

    def _learning_rate(self) -> float:
        if self.learning_rate is not None:
            return float(self.learning_rate)
        return 0.003 if self.inference == "fullrank_advi" else 0.01

    def _mode(self) -> Any:
        return DEFAULT_COMPILE_MODE if self.compile_mode is None else self.compile_mode

    def _batch(self, n: int) -> int | None:
        if self.inference not in ("advi", "fullrank_advi", "svi") or self.batch_size is None:
            return None
        if self.batch_size == "auto":
            return None if n <= AUTO_FULL_BATCH else AUTO_BATCH_SIZE
        return None if self.batch_size >= n else int(self.batch_size)

    # --------------------------------------------------------------------- fit
    _weights_support = "loss"  # calibprob.weights.weight_support: no finite-sample guarantee
    weights_guarantee_: str | None = None

    def fit(self, pred_cal: Any, y_cal: Any, *, groups: Any = None, weights: Any = None) -> GPBetaCalibrator:
        r"""Fit the calibrator on the base's prediction for calibration data.

        Parameters
        ----------
        pred_cal : xarray.Dataset
            The base model's predictive distribution at the calibration inputs
            (the contract of :mod:`calibprob.predictive`): Gaussian
            (:func:`calibprob.normal`), quantiles, or posterior-predictive draws
            (:func:`calibprob.from_draws`) — used as it is, never collapsed to a
            Gaussian. Its mean and standard deviation are the latent GP's inputs;
            its CDF and density at ``y_cal`` enter the Beta-link likelihood.
        y_cal : array_like or xarray.DataArray, shape (n,)
            Observed targets, one per observation of ``pred_cal`` (any single dim name).
        groups : array_like, xarray.DataArray or str, optional
            One label per observation (or an ``obs`` coordinate name): one GP-Beta per group
            (:class:`calibprob.Mondrian`). Per group, not the group as a covariate: each group
            gets its own Beta map from its own points, which is what "calibrated within the
            group" means; a shared model would borrow the other groups' miscalibration.
        weights : array_like or calibprob.weights.Weights, optional
            One importance weight per calibration point (class docstring: a weighted likelihood,
            no finite-sample guarantee). With ``groups``, the weights act within each group.

        Returns
        -------
        self
        """
        if fit_with_groups(self, pred_cal, y_cal, groups, weights):
            return self
        t_start = time.perf_counter()
        self._check_params()
        pred_cal, _ = self._prediction("fit", pred_cal, ())
        y = self._targets(y_cal, pred_cal.sizes["obs"], "y_cal", obs=pred_cal["obs"].values)
        v = self._loss_weights(weights, pred_cal, y.size)
        rng = np.random.default_rng(self.random_state)
        prob = self._problem(pred_cal, y, rng)
        prob.weights = v
        seed = int(rng.integers(2**31 - 1))
        with _blas_single_thread():
            post, sample_stats, extra_groups = self._infer(prob, seed)
        self.n_features_in_ = 2
        self.rank_ = self.rank
        self.idata_ = make_tree(self, post, prob, y, sample_stats, extra_groups)
        self.fit_time_ = time.perf_counter() - t_start
        self.idata_.attrs["fit_time"] = self.fit_time_
        return self

    def _loss_weights(self, weights: Any, pred_cal: xr.Dataset, n: int) -> np.ndarray | None:
        """The data terms' weights rescaled to mean 1 (None unweighted or all equal: the same fit exactly).

        Sets ``weights_guarantee_``; refuses the inference paths that run on the PyMC graph.
        """
        self.weights_guarantee_ = None
        if weights is None:
            return None
        w = resolve(weights, n, obs=pred_cal, side="calibration")
        self.weights_guarantee_ = NO_GUARANTEE
        if np.all(w == w[0]):
            return None
        if self.inference == "nuts" or self._batch(n) is not None:
            what = "inference='nuts'" if self.inference == "nuts" else f"minibatches (batch_size={self.batch_size!r})"
            raise ValueError(
                f"weights= with {what}: the weighted GP-Beta likelihood is evaluated by the full-batch NumPy "
                "objective only. Pass inference='map', 'advi', 'fullrank_advi' or 'svi' with batch_size=None."
            )
        return w * (w.size / np.sum(w))

    def _problem(self, pred_cal: xr.Dataset, y: np.ndarray, rng: np.random.Generator) -> Problem:
        """Standardise the covariates, place the inducing inputs (k-means) and collect the fit's data."""
        n = pred_cal.sizes["obs"]
        mu, sigma = self._covariates(pred_cal)
        u, log_jac = self._observed_terms(pred_cal, y)
        m = self.n_inducing
        distinct = np.unique(np.c_[mu, sigma], axis=0).shape[0]
        if n < m or distinct < m:
            raise ValueError(
                f"too few points for n_inducing={m}: got {n} calibration points with {distinct} distinct "
                f"(mean, std) pairs; GP-Beta needs at least n_inducing distinct pairs. Pass "
                f"n_inducing <= {distinct} or more calibration data."
            )
        loc = float(stable_mean(mu))
        # sqrt(var(mu) + mean(sigma^2)) in units of a power of two (exact): no overflow at 1e200
        unit = float(pow2_scale(np.r_[mu - loc, sigma]))
        scale = float(np.sqrt(np.var(mu / unit) + np.mean((sigma / unit) ** 2))) * unit
        Z0 = _kmeans(np.c_[(mu - loc) / scale, sigma / scale], m, rng)
        self.loc_, self.scale_, self.inducing_init_ = loc, scale, Z0
        layout = Layout(m, self.rank, bool(self.learn_inducing))
        return Problem(layout, self._batch(n), mu, sigma, u, log_jac, loc, scale, Z0)

    def _infer(self, prob: Problem, seed: int) -> Any:
        """Run the chosen inference: posterior draws (chain, draw, ...), sample_stats, extra groups."""
        extra_groups: dict = {}
        sample_stats = None
        if self.inference in ("advi", "fullrank_advi", "svi"):
            if self.inference == "svi":
                draws, loss = fit_svi(self, prob, seed)
                what = "with the inducing values variational and the hyperparameters point estimates"
            else:
                draws, loss = fit_advi(self, prob, seed)
                what = "as PyMC reports it (divided by its minibatch normalising constant when minibatched)"
            post = {k: v[None] for k, v in draws.items()}
            extra_groups["variational"] = xr.Dataset(
                {"loss": ("iteration", loss)},
                coords={"iteration": np.arange(loss.size)},
                attrs={"description": f"negative ELBO estimate per Adam step, {what}"},
            )
        elif self.inference == "map":
            point, info = fit_map(self, prob, seed)
            post = {k: np.asarray(v)[None, None] for k, v in point.items()}
            extra_groups["map"] = xr.Dataset(attrs=info)
        else:
            g = prob.graph()
            idata = fit_nuts(self, g, seed)
            post = {k: idata["posterior"][k].values for k in g.names}
            extra_groups["_posterior_attrs"] = dict(idata["posterior"].attrs)
            sample_stats = idata["sample_stats"].to_dataset()
            sample_stats.attrs.update(convergence(idata))
            # the CustomDist's own pointwise log-likelihood (pm.compute_log_likelihood)
            extra_groups["log_likelihood"] = idata["log_likelihood"].to_dataset()
        return post, sample_stats, extra_groups

    _convergence = staticmethod(convergence)  # NUTS diagnostics (kept under its old name)

    def _post_flat(self) -> dict:
        return post_flat(self.idata_["posterior"], self.rank_)

    def _standardise(self, mu: Any, sigma: Any) -> np.ndarray:
        return np.c_[(mu - self.loc_) / self.scale_, sigma / self.scale_]

    def _latent(self, mu: Any, sigma: Any) -> np.ndarray:
        with _blas_single_thread():
            return _latent_numpy(self._post_flat(), self._standardise(mu, sigma), self.inducing_init_, self.rank_)

    def _check_new(self, method: str, pred: Any, rest: tuple, *, y_ndim: Any = None) -> Any:
        """Fitted check, the prediction (new or deprecated form), its covariates and optional targets."""
        check_is_fitted(self, "idata_", method="fit")
        pred, rest = self._prediction(method, pred, rest)
        mu, sigma = self._covariates(pred)
        y = None
        if y_ndim is not None:
            if not rest or rest[0] is None:
                raise TypeError(f"GPBetaCalibrator.{method} needs the observed values y.")
            y = self._targets(rest[0], pred.sizes["obs"], "y", ndim=y_ndim, obs=pred["obs"].values)
            rest = rest[1:]
        return pred, mu, sigma, y, rest

    def predict(self, pred: Any, *, levels: Any = None, groups: Any = None) -> xr.Dataset:
        r"""The calibrated predictive distribution for a new base prediction.

        Parameters
        ----------
        pred : xarray.Dataset
            The base model's predictive distribution at new inputs (any member
            of the contract, as in :meth:`fit`).
        levels : array_like, optional
            Quantile levels; default the levels of ``pred``.
        groups : array_like, xarray.DataArray or str, optional
            Per-row labels after a grouped :meth:`fit` (default: ``pred``'s ``group`` coordinate).

        Returns
        -------
        xarray.Dataset
            The predictive-distribution contract: ``quantile(obs, level)`` by
            monotone inversion of the posterior-averaged calibrated CDF
            :math:`\bar F_i(y) = \frac1S\sum_s c_{\beta,s}(F_i(y))`
            on a grid of ``n_grid`` points per observation in the base's probit
            PIT :math:`u = \Phi^{-1}(F_i(y))` (interpolated linearly in
            :math:`\Phi^{-1}(\bar F)`, exact between grid points when the calibrated
            law is locally Gaussian) and mapped back through the base's quantile
            function, :math:`y = F_i^{-1}(\Phi(u))`; plus its ``mean`` and
            ``std``; ``attrs["method"] == "gp-beta"``.
        """
        mondrian = predict_with_groups(self, groups)
        if mondrian is not None:
            return mondrian.predict(pred, levels=levels, groups=groups)
        pred, mu, sigma, _, _ = self._check_new("predict", pred, ())
        lv = pred.calib.levels if levels is None else _levels_or_default(levels)
        w = self._latent(mu, sigma)
        zg, F = cdf_on_grid(w, self.n_grid)
        q = pred.calib.ppf_zscore(invert(zg, F, lv))
        mean, std = moments_from_grid(pred.calib.ppf_zscore(zg), F)
        ds = from_quantiles(q, lv, obs=pred["obs"].values, method="gp-beta", mean=mean, std=std)
        ds.attrs.update(
            {
                "inference": self.inference,
                "n_inducing": self.n_inducing,
                "n_posterior_draws": int(w.shape[0]),
                "base_method": str(pred.attrs.get("method", "")),
            }
        )
        return keep_group_coord(ds, pred)

    def cdf(self, pred: Any, y: Any) -> np.ndarray:
        r"""Posterior-averaged calibrated CDF :math:`\bar F_i(y_i)`, shape (n,) or (n, k) like ``y``."""
        pred, mu, sigma, y, _ = self._check_new("cdf", pred, (y,), y_ndim=(1, 2))
        w = self._latent(mu, sigma)
        u, _ = self._observed_terms(pred, y)
        uu = u if y.ndim == 2 else u[:, None]
        F = beta_link_cdf_z(uu[None], w[..., 0, None], w[..., 1, None], w[..., 2, None]).mean(axis=0)
        return F if y.ndim == 2 else F[:, 0]

    def log_likelihood(self, pred: Any, y: Any) -> np.ndarray:
        r"""Pointwise log density per posterior draw, :math:`\log p(y_i \mid w_s)`, shape (chain, draw, n)."""
        pred, mu, sigma, y, _ = self._check_new("log_likelihood", pred, (y,), y_ndim=1)
        u, log_jac = self._observed_terms(pred, y)
        with _blas_single_thread():
            ll = _pointwise_loglik(
                self._post_flat(), self._standardise(mu, sigma), u, log_jac, self.inducing_init_, self.rank_
            )
        post = self.idata_["posterior"]
        return ll.reshape(post.sizes["chain"], post.sizes["draw"], mu.size)

    def logpdf(self, pred: Any, y: Any) -> np.ndarray:
        r"""Log posterior-predictive density :math:`\log\frac1S\sum_s \hat p_s(y_i)`, exact (no grid).

        ``y`` has shape (n,) or (n, k) (k values per observation, e.g. a density grid).
        """
        pred, mu, sigma, y, _ = self._check_new("logpdf", pred, (y,), y_ndim=(1, 2))
        w = self._latent(mu, sigma)
        u, log_jac = self._observed_terms(pred, y)
        uu, jj = (u, log_jac) if y.ndim == 2 else (u[:, None], log_jac[:, None])
        ll = beta_link_logpdf_z(uu[None], jj[None], w[..., 0, None], w[..., 1, None], w[..., 2, None])
        out = special.logsumexp(ll, axis=0) - np.log(w.shape[0])
        return out if y.ndim == 2 else out[:, 0]

    def held_out_tree(self, pred: Any, y: Any) -> xr.DataTree:
        """A DataTree (``posterior``, ``log_likelihood``, ``observed_data``) for held-out data.

        Its ``log_likelihood`` is :meth:`log_likelihood` on ``(pred, y)``, so
        ``arviz.loo`` / ``arviz.compare`` score the calibrator on those points.
        """
        pred, rest = self._prediction("held_out_tree", pred, (y,))
        ll = self.log_likelihood(pred, rest[0])
        c, d, n = ll.shape
        coords = {"chain": np.arange(c), "draw": np.arange(d), "obs": np.arange(n)}
        y_values = self._targets(rest[0], n, "y", obs=pred["obs"].values)
        return xr.DataTree.from_dict(
            {
                "posterior": self.idata_["posterior"].to_dataset(),
                "log_likelihood": xr.Dataset({"y": (("chain", "draw", "obs"), ll)}, coords=coords),
                "observed_data": xr.Dataset({"y": ("obs", y_values)}, coords={"obs": coords["obs"]}),
            }
        )

    def held_out_elpd(self, pred: Any, y: Any) -> Any:
        """Exact held-out ELPD on ``(pred, y)`` as ``ELPDData`` (see :func:`held_out_elpd`).

        ``arviz.compare({"gp-beta": cal.held_out_elpd(pred, y), "base":
        held_out_elpd(pred.calib.logpdf(y).values)})`` ranks GP-Beta against
        the uncalibrated base on the same held-out points.
        """
        pred, rest = self._prediction("held_out_elpd", pred, (y,))
        return held_out_elpd(self.log_likelihood(pred, rest[0]))

    def sample_posterior_predictive(
        self, pred: Any, y: Any = None, *, random_state: Any = None, var_name: str = "y"
    ) -> xr.DataTree:
        r"""Posterior-predictive draws of the calibrated law, as an ArviZ DataTree.

        For every posterior draw :math:`s` and observation :math:`i` one value is
        drawn by inverse transform: :math:`p \sim U(0, 1)`,
        :math:`u = (c_{\beta,s}\circ\Phi)^{-1}(p)` (:func:`~calibprob.calibrators.gp_beta.beta_link_ppf_z`) and
        :math:`y = F_i^{-1}(\Phi(u))` through the base's quantile function — a
        draw from :math:`c_{\beta,s}(F_i(\cdot))`, so the draws carry the posterior
        uncertainty of the calibration map.

        Parameters
        ----------
        pred : xarray.Dataset
            The base's predictive distribution at the points to simulate.
        y : array_like or xarray.DataArray, optional
            Observed values: adds ``observed_data`` and the pointwise
            ``log_likelihood`` (:meth:`log_likelihood`), so that ``az.plot_ppc_dist``,
            ``az.plot_ppc_pit`` and held-out ``az.compare`` work as on a PyMC model.
            A DataArray's dim name and coordinate (e.g. PyMC's ``obs_id``) are kept.
        random_state : int, numpy Generator or None
        var_name : str, default "y"

        Returns
        -------
        xarray.DataTree
            ``posterior`` (this calibrator's), ``posterior_predictive`` with
            ``var_name(chain, draw, <obs dim>)``, and with ``y``: ``observed_data``,
            ``log_likelihood``.
        """
        check_is_fitted(self, "idata_", method="fit")
        pred, _ = self._prediction("sample_posterior_predictive", pred, ())
        mu, sigma = self._covariates(pred)
        with _blas_single_thread():
            tree = posterior_predictive_tree(self, pred, self._standardise(mu, sigma), y, random_state, var_name)
        tree.attrs.update({"method": "gp-beta", "inference": self.inference})
        return tree

    def beta_parameters(self, pred: Any) -> xr.Dataset:
        r"""Posterior draws of the Beta-map parameters :math:`a, b, c` at given base predictions.

        Returns
        -------
        xarray.Dataset
            ``a``, ``b``, ``c`` with dims (chain, draw, obs) — the latent panels of
            the paper's Fig. 2 — and the covariates ``base_mu``, ``base_sigma``.
        """
        pred, mu, sigma, _, _ = self._check_new("beta_parameters", pred, ())
        w = self._latent(mu, sigma)
        post = self.idata_["posterior"]
        shape = (post.sizes["chain"], post.sizes["draw"], mu.size)
        dims = ("chain", "draw", "obs")
        return xr.Dataset(
            {
                "a": (dims, np.exp(w[..., 0]).reshape(shape)),
                "b": (dims, np.exp(w[..., 1]).reshape(shape)),
                "c": (dims, w[..., 2].reshape(shape)),
                "base_mu": ("obs", mu),
                "base_sigma": ("obs", sigma),
            },
            coords={"chain": post["chain"].values, "draw": post["draw"].values, "obs": np.arange(mu.size)},
        )

    def calibration_map(self, pred: Any, *args: Any, confidence_level: float = 0.9) -> xr.Dataset:
        r"""The calibration map :math:`p \mapsto c_\beta(p)` at given base predictions, with a credible band.

        Parameters
        ----------
        pred : xarray.Dataset
            Base predictions at which to evaluate the map (only their mean and
            std, the GP's inputs, matter: ``calibprob.normal(mu, sigma)`` for
            arbitrary points).
        p : array_like, shape (P,), optional
            Base CDF values in (0, 1) (second positional argument); default 199
            points from 0.005 to 0.995.
        confidence_level : float, default 0.9
            Probability of the equal-tailed credible band.

        Returns
        -------
        xarray.Dataset
            ``map(chain, draw, obs, p)`` (every posterior draw), ``mean(obs, p)``
            (the posterior-average map, which is what the calibrated CDF uses),
            ``lower``/``upper(obs, p)`` (the band), ``base_mu``/``base_sigma``.
        """
        c_level = float(check_confidence_levels(confidence_level, "confidence_level")[0])
        pred, mu, sigma, _, rest = self._check_new("calibration_map", pred, args)
        p = rest[0] if rest else None
        if p is None:
            p = np.linspace(0.005, 0.995, 199)
        p = check_array(p, "p", ndim=1)
        if np.any((p <= 0) | (p >= 1)):
            raise ValueError("p must lie strictly inside (0, 1) (base CDF values); got values outside.")
        return calibration_map_dataset(self._latent(mu, sigma), p, c_level, self.idata_["posterior"], mu, sigma)
