r"""A scalable PyMC GP base: the Hilbert-space approximate GP (``pm.gp.HSGP``), predicting by draws.

:class:`PyMCHSGPRegression` approximates a stationary GP by :math:`M = \prod_j m_j`
Laplace eigenfunctions :math:`\phi_k` of the box :math:`[-L, L]^d` whose
coefficients have the kernel's spectral density as variance (Solin & Särkkä
2020; Riutort-Mayol et al. 2023):

.. math::

    f(x) \approx \sum_{k=1}^{M} \phi_k(x)\,\sqrt{S_\theta(\sqrt{\lambda_k})}\,\beta_k,
    \qquad \beta_k \sim \mathcal N(0, 1),

a linear model in :math:`\beta`, so one gradient costs :math:`O(nM)` instead of
the exact GP's :math:`O(n^3)`: tens of thousands of rows in low dimension are
practical. On the standardised target :math:`z = (y - \bar y)/s_y` and
standardised features :math:`\tilde x_j = (x_j - \bar x_j)/s_{x_j}`:

.. math::

    \alpha \sim \mathcal N(0, 1),\quad
    \ell_j \sim \operatorname{LogNormal}(0, 0.7),\quad
    \eta \sim \operatorname{HalfNormal}(1),\quad
    \sigma \sim \operatorname{HalfNormal}(1),

    z_i \sim \mathcal N\big(\alpha + f(\tilde x_i), \sigma^2\big),\qquad
    k(\tilde x, \tilde x') = \eta^2\,\kappa_\ell(\tilde x - \tilde x'),

with :math:`\kappa` the squared exponential or a Matérn kernel: priors in units
of the data (a lengthscale of about one feature standard deviation, 95 % in
[0.25, 4]; signal and noise of at most a few outcome standard deviations). The
box half-width is :math:`L = c\,S` with :math:`S` the half-range of the
standardised training inputs. For an accurate approximation Riutort-Mayol et al.
recommend :math:`m \ge 1.75\,c\,S/\ell` per dimension (squared exponential);
the defaults ``m = 30``, ``c = 1.5`` resolve lengthscales down to about
:math:`0.09\,S` — a tenth of the data's half-range.

``predict(X)`` draws :math:`y^\ast = \alpha + f(\tilde x) + \sigma\varepsilon` per
posterior draw in NumPy (the basis at ``X`` is evaluated once) and hands the
draws to :func:`calibprob.from_draws`.

References
----------
Solin, A. and Särkkä, S. (2020). Hilbert space methods for reduced-rank Gaussian
process regression. *Statistics and Computing* 30, 419–446.
Riutort-Mayol, G., Bürkner, P.-C., Andersen, M. R., Solin, A. and Vehtari, A.
(2023). Practical Hilbert space approximate Bayesian Gaussian processes for
probabilistic programming. *Statistics and Computing* 33, 17.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Self, cast

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.tables import record_feature_names
from calibprob._core.validation import check_array, check_choice, check_int, check_same_length
from calibprob.bases._pymc_sampling import sample_posterior
from calibprob.bases.pymc_linear import _PosteriorDrawsRegressor

__all__ = ["PyMCHSGPRegression"]

#: Largest number of basis functions prod(m) accepted (the basis matrix is n x prod(m)).
MAX_BASIS = 4000
#: LogNormal(0, LS_SIGMA) prior on the standardised lengthscales.
LS_SIGMA = 0.7
_KERNELS = {"se": "ExpQuad", "matern52": "Matern52", "matern32": "Matern32"}


def _se_sqrt_psd(L: ArrayLike, ms: Sequence[int], ell: Any, eta: Any) -> Any:
    r"""Square root of the SE spectral density at the basis frequencies, on the log scale.

    :math:`\sqrt{S(\omega)} = \eta\,(2\pi)^{d/4}\prod_j\ell_j^{1/2}\exp(-\tfrac14\sum_j\ell_j^2\omega_j^2)`,
    the square root of PyMC's ``ExpQuad.power_spectral_density`` written as one
    exponential: its high frequencies underflow to 0 and the gradient of
    ``sqrt(0)`` is infinite (ADVI and NUTS then fail with NaN).
    """
    import pytensor.tensor as pt
    from pymc.gp.hsgp_approx import calc_eigenvalues

    omega2 = np.asarray(calc_eigenvalues(np.asarray(L, float), list(ms)), float)  # (M, d) squared frequencies
    d = omega2.shape[1]
    log_s = pt.log(eta) + 0.25 * d * np.log(2.0 * np.pi) + 0.5 * pt.sum(pt.log(ell)) - 0.25 * pt.dot(omega2, ell**2)
    return pt.exp(log_s)


class PyMCHSGPRegression(_PosteriorDrawsRegressor):
    r"""Hilbert-space approximate GP regression in PyMC (``pm.gp.HSGP``), predicting by posterior draws.

    Parameters
    ----------
    m : int or sequence of int, default 30
        Basis functions per feature (an int: the same for every feature); the
        model has ``prod(m)`` of them, at most 4000 — the HSGP is for low
        dimension (1–3 features).
    c : float, default 1.5
        Box half-width as a multiple of the half-range of the standardised
        inputs (``>= 1.2`` recommended by PyMC).
    kernel : {"se", "matern52", "matern32"}, default "se"
    inference : {"nuts", "advi"}, default "nuts"
    draws, tune, chains : int, default 1000, 1000, 2
    target_accept : float, default 0.9
    n_iter : int, default 20000
        ADVI optimisation steps.
    random_state : int, optional

    Attributes
    ----------
    idata_ : xarray.DataTree
        The posterior (standardised scale) and, for NUTS, the sample stats.
    diagnostics_ : xarray.Dataset
        ``rhat`` (max), ``ess_bulk`` (min), ``divergences`` (count); NaN where
        undefined (ADVI, one chain).
    lengthscale_, amplitude_, noise_std_ : posterior means on the scale of X and y.
    n_features_in_ : int

    Warns
    -----
    calibprob.ConvergenceWarning
        When NUTS diverges after tuning or max r-hat exceeds 1.01.

    References
    ----------
    Solin & Särkkä (2020); Riutort-Mayol et al. (2023) (module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.bases.pymc_hsgp import PyMCHSGPRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, size=(200, 1)); y = np.sin(2 * X[:, 0]) + 0.2 * rng.normal(size=200)
    >>> m = PyMCHSGPRegression(inference="advi", n_iter=5000, draws=200, random_state=1).fit(X, y)  # doctest: +SKIP
    >>> m.predict(X[:3]).attrs["family"]  # doctest: +SKIP
    'quantile'
    """

    def __init__(
        self,
        *,
        m: int | Sequence[int] = 30,
        c: float = 1.5,
        kernel: Literal["se", "matern52", "matern32"] = "se",
        inference: Literal["nuts", "advi"] = "nuts",
        draws: int = 1000,
        tune: int = 1000,
        chains: int = 2,
        target_accept: float = 0.9,
        n_iter: int = 20_000,
        random_state: int | None = None,
    ) -> None:
        self.m = m
        self.c = c
        self.kernel = kernel
        self.inference = inference
        self.draws = draws
        self.tune = tune
        self.chains = chains
        self.target_accept = target_accept
        self.n_iter = n_iter
        self.random_state = random_state

    def _check_params(self, d: int) -> tuple[int, ...]:
        check_choice(self.kernel, "kernel", tuple(_KERNELS))
        check_choice(self.inference, "inference", ("nuts", "advi"))
        check_int(self.draws, "draws", minimum=10)
        check_int(self.tune, "tune", minimum=0)
        check_int(self.chains, "chains", minimum=1)
        check_int(self.n_iter, "n_iter", minimum=1)
        ta = self.target_accept
        if isinstance(ta, bool) or not isinstance(ta, (int, float)) or not 0 < ta < 1:
            raise ValueError(f"target_accept must be a number in (0, 1), e.g. 0.9; got {ta!r}.")
        c = self.c
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not (np.isfinite(c) and c > 1):
            raise ValueError(
                f"c must be a number > 1 (the box half-width over the data's half-range), e.g. 1.5; got {c!r}."
            )
        ms = (self.m,) * d if isinstance(self.m, (int, np.integer)) and not isinstance(self.m, bool) else self.m
        try:
            ms = tuple(check_int(v, "m", minimum=2) for v in cast(Sequence[int], ms))  # a bool m: the TypeError
        except TypeError:
            raise TypeError(f"m must be an int or a sequence of ints (one per feature); got {self.m!r}.") from None
        if len(ms) != d:
            raise ValueError(f"m has {len(ms)} entries but X has {d} features; pass one per feature or a single int.")
        if int(np.prod(ms)) > MAX_BASIS:
            raise ValueError(
                f"m = {list(ms)} gives {int(np.prod(ms))} basis functions (more than {MAX_BASIS}); the HSGP "
                "suits 1-3 features. Lower m, or use SparseGaussianProcessRegressor for more features."
            )
        return ms

    # ------------------------------------------------------------------ fit
    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Sample (or approximate) the posterior of the HSGP regression on ``(X, y)``.

        Parameters
        ----------
        X : array_like, shape (n, d)
        y : array_like, shape (n,)

        Returns
        -------
        self
        """
        record_feature_names(self, X)
        Xa = check_array(X, "X", ndim=2)
        y = check_array(y, "y", ndim=1)
        check_same_length(X=Xa, y=y)
        ms = self._check_params(Xa.shape[1])
        if len(y) < 3:
            raise ValueError(f"PyMCHSGPRegression needs at least 3 rows to fit; got {len(y)}.")
        if float(np.ptp(y)) == 0.0:
            raise ValueError(
                f"y is constant (every value {float(y[0])!r}); there is no regression to fit. Check the target column."
            )
        self.n_features_in_ = Xa.shape[1]
        self.x_mean_ = Xa.mean(axis=0)
        sd = Xa.std(axis=0)
        self.x_scale_ = np.where(sd > 0, sd, 1.0)
        self.y_mean_, self.y_scale_ = float(y.mean()), float(y.std())
        Xs = (Xa - self.x_mean_) / self.x_scale_
        z = (y - self.y_mean_) / self.y_scale_
        idata = self._sample(Xs, z, ms)
        self.idata_ = idata
        post = idata["posterior"].to_dataset()
        self._alpha = post["alpha"].values.reshape(-1)
        self._w = post["w"].values.reshape(self._alpha.size, -1)
        self._sigma = post["sigma"].values.reshape(-1)
        self.lengthscale_ = post["lengthscale"].values.reshape(self._alpha.size, -1).mean(axis=0) * self.x_scale_
        self.amplitude_ = float(post["amplitude"].values.mean() * self.y_scale_)
        self.noise_std_ = float(self._sigma.mean() * self.y_scale_)
        self.diagnostics_ = self._diagnostics(idata)
        self._warn_convergence()
        # the training data, for loo_tree (PSIS-LOO calibration without a holdout)
        self._X_fit, self._y_fit = Xa, y
        return self

    def _train_loc(self) -> np.ndarray:
        """``(n_draws, n)`` standardised latent mean at the training inputs (for loo_tree)."""
        return self._alpha[:, None] + self._w @ self.basis(self._X_fit).T

    def _sample(self, Xs: np.ndarray, z: np.ndarray, ms: Sequence[int]) -> xr.DataTree:
        import pymc as pm

        d = Xs.shape[1]
        seed = None if self.random_state is None else int(self.random_state)
        with pm.Model(coords={"feature": np.arange(d), "basis": np.arange(int(np.prod(ms)))}):
            alpha = pm.Normal("alpha", 0.0, 1.0)
            ell = pm.LogNormal("lengthscale", 0.0, LS_SIGMA, dims="feature")
            eta = pm.HalfNormal("amplitude", 1.0)
            sigma = pm.HalfNormal("sigma", 1.0)
            cov = eta**2 * getattr(pm.gp.cov, _KERNELS[self.kernel])(d, ls=ell)
            gp = pm.gp.HSGP(m=list(ms), c=float(self.c), cov_func=cov)
            phi, sqrt_psd = gp.prior_linearized(Xs)
            if self.kernel == "se":
                sqrt_psd = _se_sqrt_psd(gp.L.eval(), ms, ell, eta)
            beta = pm.Normal("beta", 0.0, 1.0, dims="basis")
            w = pm.Deterministic("w", beta * sqrt_psd, dims="basis")
            pm.Normal("z", alpha + phi @ w, sigma, observed=z)
            # the box, fixed by the training inputs: what prediction needs to rebuild the basis
            self._center = np.asarray(gp._X_center, float)
            self._L = np.asarray(gp.L.eval(), float)
            self._m = np.asarray(ms, int)
            return sample_posterior(
                inference=self.inference,
                draws=self.draws,
                tune=self.tune,
                chains=self.chains,
                seed=seed,
                target_accept=self.target_accept,
                n_iter=self.n_iter,
            )

    # ------------------------------------------------------------------ predict
    def basis(self, X: ArrayLike) -> np.ndarray:
        """The HSGP basis :math:`\\phi(x)` at ``X`` (the training box), shape ``(n, prod(m))``."""
        from pymc.gp.hsgp_approx import calc_eigenvalues, calc_eigenvectors

        Xa = self._check_predict_X(X)
        ms = [int(v) for v in self._m]
        Xc = (Xa - self.x_mean_) / self.x_scale_ - self._center
        eig = calc_eigenvalues(self._L, ms)
        return np.asarray(calc_eigenvectors(Xc, self._L, eig, ms).eval(), float)

    def sample_predictive(self, X: ArrayLike, *, random_state: int | np.random.Generator | None = None) -> np.ndarray:
        """Posterior-predictive draws at ``X`` on the scale of ``y``, shape ``(n_draws, n)``."""
        phi = self.basis(X)
        rng = np.random.default_rng(self.random_state if random_state is None else random_state)
        mu = self._alpha[:, None] + self._w @ phi.T
        eps = rng.standard_normal(mu.shape)
        return self.y_mean_ + self.y_scale_ * (mu + self._sigma[:, None] * eps)
