r"""A PyMC linear regression as a base model, whose predictive is its posterior-predictive draws.

:class:`PyMCLinearRegression` is the comparison runner's ``kind = "pymc-linear"``
base. The model, on the standardised target :math:`z = (y - \bar y)/s_y` and
centred (optionally scaled) features :math:`\tilde x_j = (x_j - \bar x_j)/c_j`
(:math:`c_j = s_{x_j}` with ``standardize=True``, else 1):

.. math::

    \alpha \sim \mathcal N(0, 2.5^2),\qquad
    \beta_j \sim \mathcal N\!\big(0, (2.5\,c_j / s_{x_j})^2\big),\qquad
    \sigma \sim \operatorname{Exponential}(1),

    z_i \mid \alpha, \beta, \sigma \sim \mathcal N(\alpha + \tilde x_i^\top\beta, \sigma^2)
    \quad\text{or}\quad t_\nu(\alpha + \tilde x_i^\top\beta, \sigma),
    \qquad \nu \sim \operatorname{Gamma}(2, 0.1)\ \text{(when learnt)}.

These are the weakly informative defaults of rstanarm (Gabry & Goodrich; a
coefficient's prior scale is 2.5 standard deviations of the outcome per
standard deviation of its feature, whatever ``standardize`` is — the option
changes the sampler's geometry, not the prior), with the Gamma(2, 0.1) prior on
the degrees of freedom of Juárez & Steel (2010). The posterior is sampled by NUTS
(default) or approximated by mean-field ADVI.

``predict(X)`` draws the posterior predictive at ``X`` — one new
:math:`y^\ast = \alpha + \tilde x^\top\beta + \sigma\varepsilon` per posterior
draw, :math:`\varepsilon` standard normal or :math:`t_\nu` — in NumPy (the
likelihood is linear, so no graph is compiled for prediction), maps it back to
the scale of ``y`` and hands the draws to :func:`calibprob.from_draws`: the
calibrators see the draws' empirical quantiles, never a Gaussian collapse.

References
----------
Gelman, A., Jakulin, A., Pittau, M. G. and Su, Y.-S. (2008). A weakly
informative default prior distribution for logistic and other regression
models. *Annals of Applied Statistics* 2(4), 1360–1383.
Juárez, M. A. and Steel, M. F. J. (2010). Model-based clustering of non-Gaussian
panel data based on skew-t distributions. *JBES* 28(1), 52–66.
Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. and Bürkner, P.-C. (2021).
Rank-normalization, folding, and localization: an improved R-hat. *Bayesian
Analysis* 16(2), 667–718.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal, Self

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike
from scipy import stats

from calibprob._core.estimator import BaseEstimator, ConvergenceWarning, check_is_fitted
from calibprob._core.tables import check_fitted_X, record_feature_names
from calibprob._core.validation import (
    check_array,
    check_choice,
    check_int,
    check_same_length,
)
from calibprob.bases._pymc_sampling import convergence_problems, convergence_summary, sample_posterior
from calibprob.predictive import from_draws

__all__ = ["PyMCLinearRegression"]

#: Prior scale of the intercept and of each coefficient, in outcome sd per feature sd (rstanarm).
PRIOR_SCALE = 2.5


class _PosteriorDrawsRegressor(BaseEstimator):
    """What every PyMC base of calibprob shares: input checks at prediction, convergence
    diagnostics of the fit (stored in ``diagnostics_``, flagged by the comparison runner), and
    the predictive Dataset built from posterior-predictive draws by :func:`calibprob.from_draws`.

    A subclass sets ``inference``, ``idata_``, ``n_features_in_`` in ``fit`` and implements
    ``sample_predictive(X) -> (n_draws, n)``.
    """

    inference: str
    n_features_in_: int
    # set by a subclass's fit; read by loo_tree
    idata_: xr.DataTree
    y_mean_: float
    y_scale_: float
    _sigma: np.ndarray
    _X_fit: np.ndarray
    _y_fit: np.ndarray
    diagnostics_: xr.Dataset

    def sample_predictive(  # pragma: no cover - abstract
        self, X: ArrayLike, *, random_state: int | np.random.Generator | None = None
    ) -> np.ndarray:
        raise NotImplementedError

    def _check_predict_X(self, X: ArrayLike) -> np.ndarray:
        """``X`` as a 2-D float array with the fitted model's columns (names checked for DataFrames)."""
        check_is_fitted(self, "idata_", method="fit")
        Xa = check_fitted_X(self, X)
        return Xa

    def _diagnostics(self, idata: xr.DataTree) -> xr.Dataset:
        """Max r-hat, min bulk ESS over every parameter, and the count of divergent transitions."""
        nan = float("nan")
        rhat = ess = nan
        div = nan
        if self.inference == "nuts":
            rhat, ess, div = convergence_summary(idata)
        attrs = {"inference": self.inference}
        return xr.Dataset(
            {
                "rhat": (
                    (),
                    rhat,
                    {
                        "long_name": "max rank-normalised split r-hat over the parameters "
                        "(Vehtari et al. 2021); above 1.01: not converged",
                        **attrs,
                    },
                ),
                "ess_bulk": ((), ess, {"long_name": "min bulk effective sample size over the parameters", **attrs}),
                "divergences": ((), div, {"long_name": "NUTS divergent transitions after tuning", **attrs}),
            }
        )

    def _warn_convergence(self) -> None:
        d = self.diagnostics_
        problems = convergence_problems(float(d["divergences"]), float(d["rhat"]))
        if problems:
            warnings.warn(
                f"{type(self).__name__} NUTS did not converge cleanly: "
                + "; ".join(problems)
                + ". Raise tune/draws or target_accept.",
                ConvergenceWarning,
                stacklevel=3,
            )

    def predict(self, X: ArrayLike, levels: ArrayLike | None = None) -> xr.Dataset:
        """The posterior predictive at ``X`` as :func:`calibprob.from_draws` (family ``"quantile"``).

        Parameters
        ----------
        X : array_like, shape (n, d)
        levels : array_like, optional
            Quantile levels; default :data:`calibprob.predictive.DEFAULT_LEVELS`.

        Returns
        -------
        xarray.Dataset
            Empirical quantiles of the draws, with their exact ``mean`` and ``std``.
        """
        draws = self.sample_predictive(X)
        return from_draws(draws, levels, method=type(self).__name__)

    def predict_mean_std(self, X: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation of the posterior-predictive draws (for ``predict_mean_std`` callers)."""
        draws = self.sample_predictive(X)
        return draws.mean(axis=0), draws.std(axis=0, ddof=1)

    def loo_tree(self, *, random_state: int | np.random.Generator | None = None) -> xr.DataTree:
        r"""The fit as a PyMC-shaped tree for leave-one-out calibration (:func:`calibprob.from_loo`).

        Groups ``posterior`` (the fit's), ``log_likelihood`` (pointwise
        :math:`\log p(y_i \mid \theta_s)` on the scale of ``y``), ``posterior_predictive``
        (:meth:`sample_predictive` at the training inputs) and ``observed_data``, each
        ``y(chain, draw, obs)`` in the draws' order of :meth:`sample_predictive`.

        Parameters
        ----------
        random_state : int, optional
            Seed of the predictive draws; default the model's ``random_state``.

        Returns
        -------
        xarray.DataTree
        """
        check_is_fitted(self, "idata_", method="fit")
        y = self._y_fit
        ll = self._train_log_likelihood()
        post = self.idata_["posterior"].to_dataset()
        shape = (post.sizes["chain"], post.sizes["draw"], y.size)
        dims = ("chain", "draw", "obs")
        pp = self.sample_predictive(self._X_fit, random_state=random_state).reshape(shape)
        return xr.DataTree.from_dict(
            {
                "posterior": post,
                "log_likelihood": xr.Dataset({"y": (dims, ll.reshape(shape))}),
                "posterior_predictive": xr.Dataset({"y": (dims, pp)}),
                "observed_data": xr.Dataset({"y": (("obs",), y)}),
            }
        )

    def _train_log_likelihood(self) -> np.ndarray:
        r"""``(n_draws, n)`` :math:`\log p(y_i \mid \theta_s)` on the scale of ``y``: the one formula
        behind both :meth:`loo_tree` and the ``log_likelihood`` group of ``log_likelihood=True``."""
        loc = self.y_mean_ + self.y_scale_ * self._train_loc()
        scale = self.y_scale_ * self._sigma[:, None]
        nu = getattr(self, "_nu", None)
        y = self._y_fit
        return stats.norm.logpdf(y, loc, scale) if nu is None else stats.t.logpdf(y, nu[:, None], loc, scale)

    def _train_loc(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


class PyMCLinearRegression(_PosteriorDrawsRegressor):
    r"""Bayesian linear regression in PyMC, predicting by posterior-predictive draws.

    Parameters
    ----------
    likelihood : {"normal", "student-t"}, default "normal"
        Observation noise; Student-t for heavy-tailed residuals.
    standardize : bool, default True
        Fit on standardised features (centred always). The prior on each
        effect is the same either way; standardising helps NUTS.
    inference : {"nuts", "advi"}, default "nuts"
        NUTS (PyMC's sampler), or mean-field ADVI (``n_iter`` steps, then
        ``draws * chains`` draws of the approximation).
    draws, tune, chains : int, default 1000, 1000, 2
        NUTS draws and tuning steps per chain, and chains (run one after
        another). r-hat needs at least 2 chains; with 1 it is NaN.
    target_accept : float, default 0.9
    n_iter : int, default 20000
        ADVI optimisation steps.
    nu : float or "learn", default "learn"
        Student-t degrees of freedom: fixed, or learnt with a Gamma(2, 0.1) prior.
    prior : {"normal", "laplace"}, default "normal"
        Coefficient prior. ``"laplace"`` is Fong and Holmes's (2021) sparse regression:
        :math:`\beta_j \sim \operatorname{Laplace}(0, b\,c_j/s_{x_j})`,
        :math:`b \sim \operatorname{Gamma}(1, 1)`, intercept :math:`\alpha` flat (improper;
        the posterior is proper once :math:`n > d`), on the standardised target.
    noise_prior : {"exponential", "halfnormal"}, default "exponential"
        Prior of :math:`\sigma` on the standardised target: Exponential with mean
        ``noise_prior_scale``, or HalfNormal with scale ``noise_prior_scale``.
    noise_prior_scale : float, default 1.0
        That prior's scale. Fong and Holmes's "misspecified" model is ``noise_prior="halfnormal",
        noise_prior_scale=0.02`` (a prior far too tight for the residuals).
    log_likelihood : bool, default False
        Store the pointwise log-likelihood of the training points, on the scale of ``y``, as the
        ``log_likelihood`` group of ``idata_`` (draws × n doubles), for conformal Bayes and LOO.
    random_state : int, optional

    Attributes
    ----------
    idata_ : xarray.DataTree
        The posterior (standardised scale) and, for NUTS, the sample stats.
    diagnostics_ : xarray.Dataset
        ``rhat`` (max over parameters), ``ess_bulk`` (min) and ``divergences``
        (count); NaN where the inference does not define them (ADVI, 1 chain).
    coef_, intercept_ : posterior means of the coefficients and intercept on the scale of X and y.
    n_features_in_ : int

    Warns
    -----
    calibprob.ConvergenceWarning
        When NUTS diverges after tuning or max r-hat exceeds 1.01.

    References
    ----------
    Gelman et al. (2008) for the weakly informative priors; Vehtari et al. (2021) for r-hat
    and bulk ESS (full entries in the module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.bases.pymc_linear import PyMCLinearRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 2)); y = 1.0 + X @ [2.0, -1.0] + 0.5 * rng.normal(size=60)
    >>> m = PyMCLinearRegression(draws=200, tune=200, random_state=1).fit(X, y)  # doctest: +SKIP
    >>> m.predict(X[:3]).attrs["family"]  # doctest: +SKIP
    'quantile'
    """

    def __init__(
        self,
        *,
        likelihood: Literal["normal", "student-t"] = "normal",
        standardize: bool = True,
        inference: Literal["nuts", "advi"] = "nuts",
        draws: int = 1000,
        tune: int = 1000,
        chains: int = 2,
        target_accept: float = 0.9,
        n_iter: int = 20_000,
        nu: float | Literal["learn"] = "learn",
        prior: Literal["normal", "laplace"] = "normal",
        noise_prior: Literal["exponential", "halfnormal"] = "exponential",
        noise_prior_scale: float = 1.0,
        log_likelihood: bool = False,
        random_state: int | None = None,
    ) -> None:
        self.likelihood = likelihood
        self.standardize = standardize
        self.inference = inference
        self.draws = draws
        self.tune = tune
        self.chains = chains
        self.target_accept = target_accept
        self.n_iter = n_iter
        self.nu = nu
        self.prior = prior
        self.noise_prior = noise_prior
        self.noise_prior_scale = noise_prior_scale
        self.log_likelihood = log_likelihood
        self.random_state = random_state

    def _check_params(self) -> None:
        check_choice(self.likelihood, "likelihood", ("normal", "student-t"))
        check_choice(self.inference, "inference", ("nuts", "advi"))
        check_choice(self.prior, "prior", ("normal", "laplace"))
        check_choice(self.noise_prior, "noise_prior", ("exponential", "halfnormal"))
        for name in ("standardize", "log_likelihood"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False; got {getattr(self, name)!r}.")
        sc = self.noise_prior_scale
        if isinstance(sc, bool) or not isinstance(sc, (int, float)) or not (np.isfinite(sc) and sc > 0):
            raise ValueError(
                f"noise_prior_scale must be a positive finite number (the sd of the noise prior on the "
                f"standardised target, e.g. 1.0); got {sc!r}."
            )
        check_int(self.draws, "draws", minimum=10)
        check_int(self.tune, "tune", minimum=0)
        check_int(self.chains, "chains", minimum=1)
        check_int(self.n_iter, "n_iter", minimum=1)
        ta = self.target_accept
        if isinstance(ta, bool) or not isinstance(ta, (int, float)) or not 0 < ta < 1:
            raise ValueError(f"target_accept must be a number in (0, 1), e.g. 0.9; got {ta!r}.")
        nu = self.nu
        if not (
            nu == "learn" or (not isinstance(nu, bool) and isinstance(nu, (int, float)) and np.isfinite(nu) and nu > 0)
        ):
            raise ValueError(f"nu must be a positive number of degrees of freedom or 'learn'; got {nu!r}.")

    # ------------------------------------------------------------------ fit
    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Sample (or approximate) the posterior of the regression on ``(X, y)``.

        Parameters
        ----------
        X : array_like, shape (n, d)
        y : array_like, shape (n,)

        Returns
        -------
        self
        """
        import pymc as pm

        self._check_params()
        record_feature_names(self, X)
        Xa = check_array(X, "X", ndim=2)
        y = check_array(y, "y", ndim=1)
        check_same_length(X=Xa, y=y)
        if len(y) < 3:
            raise ValueError(f"PyMCLinearRegression needs at least 3 rows to fit; got {len(y)}.")
        if float(np.ptp(y)) == 0.0:
            raise ValueError(
                f"y is constant (every value {float(y[0])!r}); there is no regression to fit. Check the target column."
            )
        self.n_features_in_ = Xa.shape[1]
        self.x_mean_ = Xa.mean(axis=0)
        sd = Xa.std(axis=0)
        sd = np.where(sd > 0, sd, 1.0)  # a constant column: its coefficient keeps a unit-scale prior
        self.x_scale_ = sd if self.standardize else np.ones_like(sd)
        self.y_mean_, self.y_scale_ = float(y.mean()), float(y.std())
        Xs = (Xa - self.x_mean_) / self.x_scale_
        z = (y - self.y_mean_) / self.y_scale_
        beta_sd = PRIOR_SCALE * self.x_scale_ / sd  # 2.5 outcome sd per feature sd, on either scale
        seed = None if self.random_state is None else int(self.random_state)

        with pm.Model(coords={"feature": np.arange(Xs.shape[1])}):
            alpha, beta, sigma = self._priors(pm, beta_sd)
            mu = alpha + pm.math.dot(Xs, beta)
            if self.likelihood == "normal":
                pm.Normal("z", mu, sigma, observed=z)
            else:
                nu = pm.Gamma("nu", 2.0, 0.1) if self.nu == "learn" else float(self.nu)
                pm.StudentT("z", nu=nu, mu=mu, sigma=sigma, observed=z)
            idata = sample_posterior(
                inference=self.inference,
                draws=self.draws,
                tune=self.tune,
                chains=self.chains,
                seed=seed,
                target_accept=self.target_accept,
                n_iter=self.n_iter,
            )
        self.idata_ = idata
        post = idata["posterior"].to_dataset()
        self.y_train_ = y
        self._alpha = post["alpha"].values.reshape(-1)
        self._beta = post["beta"].values.reshape(-1, Xs.shape[1])
        self._sigma = post["sigma"].values.reshape(-1)
        self._nu = (
            post["nu"].values.reshape(-1)
            if "nu" in post
            else np.full(self._alpha.shape, float(self.nu))
            if self.likelihood == "student-t"
            else None
        )
        self.coef_ = self._beta.mean(axis=0) / self.x_scale_ * self.y_scale_
        self.intercept_ = float(
            self.y_mean_
            + self.y_scale_ * (self._alpha.mean() - self.x_mean_ @ (self._beta.mean(axis=0) / self.x_scale_))
        )
        # the training data, for loo_tree (PSIS-LOO calibration without a holdout) and log_likelihood
        self._X_fit, self._y_fit = Xa, y
        if self.log_likelihood:
            self._store_log_likelihood()
        self.diagnostics_ = self._diagnostics(idata)
        self._warn_convergence()
        return self

    def _priors(self, pm: Any, beta_sd: np.ndarray) -> tuple[Any, Any, Any]:
        """Intercept, coefficients and noise sd; ``beta_sd`` is the Normal prior's sd per
        coefficient (2.5 outcome sd per feature sd, whatever ``standardize`` is)."""
        if self.prior == "normal":
            alpha = pm.Normal("alpha", 0.0, PRIOR_SCALE)
            beta = pm.Normal("beta", 0.0, beta_sd, dims="feature")
        else:
            alpha = pm.Flat("alpha")  # Fong & Holmes (2021): improper flat intercept
            b = pm.Gamma("b", alpha=1.0, beta=1.0)
            # b is in outcome sd per feature sd, as the Normal prior's 2.5
            beta = pm.Laplace("beta", mu=0.0, b=b * (beta_sd / PRIOR_SCALE), dims="feature")
        sc = float(self.noise_prior_scale)
        if self.noise_prior == "exponential":
            sigma = pm.Exponential("sigma", 1.0 / sc)  # scale 1 -> Exponential(1), the default
        else:
            sigma = pm.HalfNormal("sigma", sigma=sc)
        return alpha, beta, sigma

    def _store_log_likelihood(self) -> None:
        r"""The ``log_likelihood`` group: :math:`\log f_{\theta_s}(y_i \mid x_i)` on y's scale."""
        ll = self._train_log_likelihood()
        chains = self.idata_["posterior"].sizes.get("chain", 1)
        da = xr.DataArray(ll.reshape(chains, -1, ll.shape[1]), dims=("chain", "draw", "obs"), name="y")
        self.idata_["log_likelihood"] = xr.DataTree(xr.Dataset({"y": da}))

    # ------------------------------------------------------------------ predict
    def log_density(self, X: ArrayLike, values: ArrayLike) -> np.ndarray:
        r"""Per-draw log density of candidate ``values`` at ``X``, on the scale of ``y``.

        :math:`\log f_{\theta_s}(v \mid x) = \log p_z((v - \bar y)/s_y \mid \mu_s(x), \sigma_s) - \log s_y`
        with :math:`p_z` the Normal or Student-t likelihood: the closed form conformal Bayes needs
        (Fong and Holmes 2021, eq. 9), with no graph compiled.

        Parameters
        ----------
        X : array_like, shape (m, d)
        values : array_like, shape (G,) or (m, G)
            Candidate targets: one grid for every row, or one per row.

        Returns
        -------
        ndarray, shape (n_draws, m, G)
        """
        Xa = self._check_predict_X(X)
        v = check_array(values, "values", ndim=(1, 2))
        v = np.broadcast_to(v, (Xa.shape[0], v.shape[-1])) if v.ndim == 1 else v
        if v.shape[0] != Xa.shape[0]:
            raise ValueError(
                f"values has {v.shape[0]} rows but X has {Xa.shape[0]}; pass one row of values per row of X."
            )
        mu = self._alpha[:, None] + self._beta @ ((Xa - self.x_mean_) / self.x_scale_).T
        z = (v[None] - self.y_mean_) / self.y_scale_
        s = self._sigma[:, None, None]
        if self._nu is None:
            lp = stats.norm.logpdf(z, mu[:, :, None], s)
        else:
            lp = stats.t.logpdf(z, self._nu[:, None, None], mu[:, :, None], s)
        return lp - np.log(self.y_scale_)

    def _train_loc(self) -> np.ndarray:
        """``(n_draws, n)`` standardised location of the likelihood at the training inputs (for loo_tree)."""
        Xs = (self._X_fit - self.x_mean_) / self.x_scale_
        return self._alpha[:, None] + self._beta @ Xs.T

    def sample_predictive(self, X: ArrayLike, *, random_state: int | np.random.Generator | None = None) -> np.ndarray:
        """Posterior-predictive draws at ``X`` on the scale of ``y``, shape ``(n_draws, n)``."""
        Xa = self._check_predict_X(X)
        rng = np.random.default_rng(self.random_state if random_state is None else random_state)
        Xs = (Xa - self.x_mean_) / self.x_scale_
        mu = self._alpha[:, None] + self._beta @ Xs.T
        if self._nu is None:
            eps = rng.standard_normal(mu.shape)
        else:
            eps = rng.standard_t(self._nu[:, None], size=mu.shape)
        return self.y_mean_ + self.y_scale_ * (mu + self._sigma[:, None] * eps)
