r"""Linear base regressors with Gaussian predictive distributions.

Both follow the base-model protocol: ``fit(X, y) -> self``,
``predict_mean_std(X, *, include_noise=True) -> (mu, sigma)`` and
``predict(X, *, levels=None, include_noise=True)`` returning
``calibprob.normal(mu, sigma, levels)``.

* :class:`LinearRegression` — ordinary least squares with the classical
  prediction variance.
* :class:`BayesianRidge` — Bayesian linear regression with Gaussian prior
  precision :math:`\lambda` and noise precision :math:`\alpha` chosen by
  evidence maximisation (MacKay's fixed point).

References
----------
MacKay, D. J. C. (1992). Bayesian interpolation. Neural Computation 4(3), 415–447.
Tipping, M. E. (2001). Sparse Bayesian learning and the relevance vector
machine. JMLR 1, 211–244.
Seber, G. A. F. and Lee, A. J. (2003). *Linear Regression Analysis*, 2nd ed.,
Wiley, §5.3 (prediction intervals).
"""

from __future__ import annotations

from typing import Self

import numpy as np
import scipy.linalg
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.estimator import BaseEstimator, check_is_fitted
from calibprob._core.tables import check_fitted_X, record_feature_names
from calibprob._core.validation import check_array, check_int, check_same_length
from calibprob.predictive import normal

__all__ = ["LinearRegression", "BayesianRidge"]


def _check_not_constant(y: np.ndarray, cls: str) -> None:
    if y.size and float(np.max(y) - np.min(y)) == 0.0:
        raise ValueError(
            f"y is constant (every value {float(y[0])!r}): {cls} would estimate a noise variance of 0 and "
            "predict point masses. Check the target column, or add the spread you believe in yourself."
        )


def _check_finite_fit(cls: str, **values: ArrayLike) -> None:
    """Raise a clear error instead of returning a fit with overflowed (inf/NaN/0-variance) parameters."""
    bad = [k for k, v in values.items() if not np.all(np.isfinite(v))]
    if bad:
        raise ValueError(
            f"{cls}: the fitted {', '.join(bad)} overflow float64 at the scale of these data. Rescale X and y "
            "(divide by a constant, or standardize = true in a comparison spec) and fit again."
        )


class _LinearBase(BaseEstimator):
    def _validate_Xy(self, X: ArrayLike | None, y: ArrayLike | None) -> tuple[np.ndarray, np.ndarray]:
        Xa = check_array(X, "X", ndim=2)
        y = check_array(y, "y", ndim=1)
        check_same_length(X=Xa, y=y)
        return Xa, y

    def _check_X(self, X: ArrayLike) -> np.ndarray:
        check_is_fitted(self, "coef_", method="fit")
        X = check_fitted_X(self, X)
        return X

    def predict_mean_std(self, X: ArrayLike, *, include_noise: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and standard deviation, shape (n_test,) each (defined by every subclass)."""
        raise NotImplementedError

    def predict(self, X: ArrayLike, *, levels: ArrayLike | None = None, include_noise: bool = True) -> xr.Dataset:
        """Gaussian predictive distribution in the calibprob data contract.

        Parameters
        ----------
        X : array_like, shape (n_test, d)
        levels : array_like, optional
            Quantile levels; default :data:`calibprob.predictive.DEFAULT_LEVELS`.
        include_noise : bool, default True

        Returns
        -------
        xarray.Dataset
            ``calibprob.normal(mu, sigma, levels)``.
        """
        mu, sigma = self.predict_mean_std(X, include_noise=include_noise)
        return normal(mu, sigma, levels, method=type(self).__name__)


class LinearRegression(_LinearBase):
    r"""Ordinary least squares with the classical Gaussian prediction variance.

    With design :math:`A` (a column of ones first when ``fit_intercept``),
    :math:`p` columns, :math:`\hat\beta = (A^\top A)^{-1}A^\top y` (via QR) and
    :math:`\hat\sigma^2 = \lVert y - A\hat\beta\rVert^2 / (n - p)`:

    .. math::

        \mu(x) = a^\top\hat\beta,\qquad
        \sigma^2(x) = \hat\sigma^2\,\big(1 + a^\top (A^\top A)^{-1} a\big),

    without the 1 when ``include_noise=False`` (uncertainty of the fitted mean
    only). The exact predictive is Student-t with :math:`n - p` degrees of
    freedom; it is replaced by the Normal with this scale (the t → normal
    approximation, accurate for :math:`n - p \gtrsim 30`).

    Parameters
    ----------
    fit_intercept : bool, default True

    Attributes
    ----------
    coef_ : ndarray, shape (d,)
    intercept_ : float
    noise_variance_ : float
        :math:`\hat\sigma^2` (inf or 0 where it is beyond float64, at data scales near 1e±160).
    noise_scale_ : float
        :math:`\hat\sigma`, representable wherever the data are; the predictive standard
        deviation is computed from it where :math:`\hat\sigma^2` over- or underflows.
    dof_ : int
        :math:`n - p`.
    n_features_in_ : int

    References
    ----------
    Seber, G. A. F. and Lee, A. J. (2003). *Linear Regression Analysis*, §5.3.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 2)); y = 1.0 + X @ [2.0, -1.0] + 0.5 * rng.normal(size=100)
    >>> ols = calibprob.LinearRegression().fit(X, y)
    >>> bool(np.allclose(ols.coef_, [2.0, -1.0], atol=0.2) and abs(ols.intercept_ - 1.0) < 0.2)
    True
    >>> pred = ols.predict(X[:3])            # Gaussian predictive Dataset
    >>> pred.attrs["family"]
    'normal'
    """

    def __init__(self, *, fit_intercept: bool = True):
        self.fit_intercept = fit_intercept

    def _design(self, X: np.ndarray) -> np.ndarray:
        return np.column_stack([np.ones(X.shape[0]), X]) if self.fit_intercept else X

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Least-squares fit.

        Parameters
        ----------
        X : array_like, shape (n, d)
        y : array_like, shape (n,)

        Returns
        -------
        self
        """
        X_in = X
        X, y = self._validate_Xy(X, y)
        A = self._design(X)
        n, p = A.shape
        if n <= p:
            raise ValueError(
                f"LinearRegression needs more observations than coefficients to estimate the "
                f"noise variance: n = {n}, coefficients = {p} (features + intercept). Use at "
                f"least {p + 1} rows, or BayesianRidge."
            )
        _check_not_constant(y, "LinearRegression")
        # Equilibrate: QR of A with unit-max columns and y / max|y|, so the rank test and the
        # arithmetic do not depend on the data's units (1e300-scale columns are not "deficient").
        col = np.max(np.abs(A), axis=0)
        col[col == 0] = 1.0
        y_scale = float(np.max(np.abs(y)))
        Q, R = np.linalg.qr(A / col)
        diag = np.abs(np.diag(R))
        if diag.min() <= 1e-10 * diag.max():
            raise ValueError(
                "X is rank deficient (collinear or constant columns, or a constant column "
                "together with fit_intercept=True). Drop redundant columns or use BayesianRidge."
            )
        ys = y / y_scale
        beta_s = scipy.linalg.solve_triangular(R, Q.T @ ys)
        resid = ys - (A / col) @ beta_s
        self.dof_ = n - p
        beta = beta_s * y_scale / col
        with np.errstate(over="ignore", under="ignore"):
            noise_variance = float(np.float64(resid @ resid / self.dof_) * np.float64(y_scale) ** 2)
        # the noise sd in the data's units: representable wherever the data are, although its
        # square (noise_variance_) overflows at scale 1e200 and underflows at 1e-200
        self.noise_scale_ = float(np.sqrt(resid @ resid / self.dof_) * y_scale)
        _check_finite_fit("LinearRegression", coefficients=beta, noise_scale=self.noise_scale_)
        self.noise_variance_ = noise_variance
        self._R, self._col = R, col
        self.intercept_ = float(beta[0]) if self.fit_intercept else 0.0
        self.coef_ = beta[1:] if self.fit_intercept else beta
        self.n_features_in_ = X.shape[1]
        record_feature_names(self, X_in)
        return self

    def predict_mean_std(self, X: ArrayLike, *, include_noise: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and standard deviation.

        Parameters
        ----------
        X : array_like, shape (n_test, d)
        include_noise : bool, default True
            Include the noise variance (prediction of a new observation).

        Returns
        -------
        mu : ndarray, shape (n_test,)
        sigma : ndarray, shape (n_test,)
        """
        X = self._check_X(X)
        A = self._design(X)
        mu = self.intercept_ + X @ self.coef_
        # a^T (A^T A)^{-1} a = ||R^{-T} (a / col)||^2 with R from the equilibrated design A / col
        V = scipy.linalg.solve_triangular(self._R, (A / self._col).T, trans="T")
        lev = np.sum(V * V, axis=0)
        factor = lev + 1.0 if include_noise else lev
        with np.errstate(over="ignore", under="ignore"):
            var = self.noise_variance_ * factor
        sd = np.sqrt(np.maximum(var, np.finfo(float).tiny))
        # where the variance over- or underflowed, the scale-free form s * sqrt(factor) is exact
        extreme = ~np.isfinite(var) | (var < 1e-280)
        scale = getattr(self, "noise_scale_", None)  # absent from a model saved before it existed
        if extreme.any() and scale is not None:
            sd = np.where(extreme, np.maximum(scale * np.sqrt(factor), np.finfo(float).tiny), sd)
        return mu, sd


class BayesianRidge(_LinearBase):
    r"""Bayesian linear regression with evidence-maximised precisions.

    Model: :math:`y = b + Xw + \varepsilon`, :math:`\varepsilon \sim
    \mathcal N(0, \alpha^{-1} I)`, :math:`w \sim \mathcal N(0, \lambda^{-1} I)`,
    a flat prior on the intercept :math:`b` (``fit_intercept=True``; it is
    integrated out by centring X and y). With :math:`X_c` the centred inputs,
    :math:`A = \lambda I + \alpha X_c^\top X_c`, :math:`\Sigma = A^{-1}`,
    :math:`m = \alpha\Sigma X_c^\top y_c` and :math:`n' = n - 1` (``n`` without
    intercept), :math:`(\alpha, \lambda)` maximise the log evidence

    .. math::

        \mathcal L = \tfrac d2\log\lambda + \tfrac{n'}2\log\alpha
          - \tfrac\alpha2\lVert y_c - X_c m\rVert^2 - \tfrac\lambda2\lVert m\rVert^2
          - \tfrac12\log|A| - \tfrac{n'}2\log 2\pi,

    found by MacKay's fixed point :math:`\gamma = \sum_i \alpha e_i/(\lambda +
    \alpha e_i)`, :math:`\lambda \leftarrow \gamma/\lVert m\rVert^2`,
    :math:`\alpha \leftarrow (n' - \gamma)/\lVert y_c - X_c m\rVert^2`
    (:math:`e_i` the eigenvalues of :math:`X_c^\top X_c`). Predictive:

    .. math::

        \mu(x) = \bar y + (x - \bar x)^\top m,\qquad
        \sigma^2(x) = \alpha^{-1} + \tfrac{1}{n\alpha} + (x - \bar x)^\top\Sigma(x - \bar x),

    the middle term being the intercept's posterior variance (scikit-learn's
    ``BayesianRidge`` omits it, uses :math:`n` for :math:`n'` and adds
    Gamma(1e-6, 1e-6) hyperpriors; here the evidence is maximised as is).
    ``include_noise=False`` drops :math:`\alpha^{-1}`.

    Parameters
    ----------
    fit_intercept : bool, default True
    max_iter : int, default 300
    tol : float, default 1e-10
        Stop when both precisions change by less than ``tol`` relatively.
    alpha_init, lambda_init : float, optional
        Starting values (default :math:`1/\operatorname{var}(y)` and 1).

    Attributes
    ----------
    coef_ : ndarray, shape (d,)
        Posterior mean :math:`m`.
    intercept_ : float
    alpha_, lambda_ : float
        Noise and weight precisions.
    sigma_ : ndarray, shape (d, d)
        Posterior covariance :math:`\Sigma` of the weights.
    log_evidence_ : float
    n_iter_ : int
    n_features_in_ : int

    References
    ----------
    MacKay, D. J. C. (1992). Bayesian interpolation. Neural Computation 4(3).
    Tipping, M. E. (2001). Sparse Bayesian learning and the relevance vector machine. JMLR 1.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 2)); y = 1.0 + X @ [2.0, -1.0] + 0.5 * rng.normal(size=100)
    >>> br = calibprob.BayesianRidge().fit(X, y)
    >>> mu, sigma = br.predict_mean_std(X[:3])
    >>> bool(np.all((0.4 < sigma) & (sigma < 0.7)))   # close to the noise sd 0.5
    True
    """

    def __init__(
        self,
        *,
        fit_intercept: bool = True,
        max_iter: int = 300,
        tol: float = 1e-10,
        alpha_init: float | None = None,
        lambda_init: float | None = None,
    ):
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.alpha_init = alpha_init
        self.lambda_init = lambda_init

    def _centred(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        if self.fit_intercept:
            x_off, y_off = X.mean(axis=0), float(y.mean())
        else:
            x_off, y_off = np.zeros(X.shape[1]), 0.0
        return X - x_off, y - y_off, x_off, y_off

    def log_evidence(self, alpha: float, lam: float, X: ArrayLike | None = None, y: ArrayLike | None = None) -> float:
        """The log evidence :math:`\\mathcal L(\\alpha, \\lambda)` (on the training data by default).

        Parameters
        ----------
        alpha, lam : float
            Noise and weight precisions (> 0).
        X, y : array_like, optional

        Returns
        -------
        float
        """
        if X is None:
            check_is_fitted(self, "coef_", method="fit")
            X, y = self._X, self._y
        else:
            X, y = self._validate_Xy(X, y)
        Xc, yc, _, _ = self._centred(X, y)
        e, V = np.linalg.eigh(Xc.T @ Xc)
        e = np.maximum(e, 0.0)
        return _log_evidence(alpha, lam, Xc, yc, e, V, self._n_eff(len(y)))

    def _n_eff(self, n: int) -> int:
        return n - 1 if self.fit_intercept else n

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Evidence maximisation of (α, λ) and the weight posterior.

        Parameters
        ----------
        X : array_like, shape (n, d)
        y : array_like, shape (n,)

        Returns
        -------
        self
        """
        check_int(self.max_iter, "max_iter", minimum=1)
        X_in = X
        X, y = self._validate_Xy(X, y)
        n, d = X.shape
        n_eff = self._n_eff(n)
        if n_eff < 2:
            raise ValueError(f"BayesianRidge needs at least {3 if self.fit_intercept else 2} observations; got {n}.")
        _check_not_constant(y, "BayesianRidge")
        Xc, yc, x_off, y_off = self._centred(X, y)
        # Work in units where max|X_c| = 1 and sd(y_c) = 1. The evidence maximisation is
        # equivariant under these scalings (alpha_s = alpha sy^2, lambda_s = lambda sy^2 / sx^2,
        # m_s = m sx / sy), so the fit is the same up to rounding, but 1e300-scale data no
        # longer overflow X^T X or the residual sum of squares.
        sx = np.float64(np.max(np.abs(Xc))) if Xc.size else np.float64(1.0)
        sx = sx if sx > 0 else np.float64(1.0)
        sy = np.float64(np.max(np.abs(yc)))  # numpy scalars: overflow gives inf, not OverflowError
        sy = sy if sy > 0 else np.float64(1.0)
        Xs, ys = Xc / sx, yc / sy
        e, V = np.linalg.eigh(Xs.T @ Xs)
        e = np.maximum(e, 0.0)
        Vty = V.T @ (Xs.T @ ys)
        var_ys = float(np.var(ys)) if np.var(ys) > 0 else 1.0
        # starting values mapped to the scaled units (alpha_init, lambda_init are in the data's units)
        with np.errstate(over="ignore", under="ignore"):
            alpha: float = 1.0 / var_ys if self.alpha_init is None else float(self.alpha_init) * sy**2
            lam: float = (1.0 if self.lambda_init is None else float(self.lambda_init)) * (sy / sx) ** 2
        alpha, lam = (float(np.clip(v, 1e-300, 1e300)) for v in (alpha, lam))
        for it in range(1, int(self.max_iter) + 1):
            m = V @ (alpha * Vty / (lam + alpha * e))
            rss = float(np.sum((ys - Xs @ m) ** 2))
            gamma = float(np.sum(alpha * e / (lam + alpha * e)))
            lam_new = gamma / max(float(m @ m), np.finfo(float).tiny)
            alpha_new = (n_eff - gamma) / max(rss, np.finfo(float).tiny)
            done = abs(lam_new - lam) <= self.tol * lam and abs(alpha_new - alpha) <= self.tol * alpha
            alpha, lam = alpha_new, lam_new
            if done:
                break
        self.n_iter_ = it
        with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
            coef = (V @ (alpha * Vty / (lam + alpha * e))) * (sy / sx)
            alpha_, lambda_ = alpha / sy**2, lam * (sx / sy) ** 2
            sigma = ((V / (lam + alpha * e)) @ V.T) * (sy / sx) ** 2
        _check_finite_fit(
            "BayesianRidge",
            coefficients=coef,
            noise_variance=1.0 / alpha_ if alpha_ > 0 else np.inf,
            weight_precision=lambda_,
            weight_covariance=sigma,
        )
        self.alpha_, self.lambda_ = float(alpha_), float(lambda_)
        self.coef_ = coef
        self.sigma_ = sigma
        self.intercept_ = float(y_off - x_off @ self.coef_)
        self._x_offset, self._n = x_off, n
        self._X, self._y = X, y
        self.log_evidence_ = _log_evidence(alpha, lam, Xs, ys, e, V, n_eff) - n_eff * np.log(sy)
        self.n_features_in_ = d
        record_feature_names(self, X_in)
        return self

    def predict_mean_std(self, X: ArrayLike, *, include_noise: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and standard deviation.

        Parameters
        ----------
        X : array_like, shape (n_test, d)
        include_noise : bool, default True
            Include the noise variance :math:`1/\\alpha`.

        Returns
        -------
        mu : ndarray, shape (n_test,)
        sigma : ndarray, shape (n_test,)
        """
        X = self._check_X(X)
        mu = self.intercept_ + X @ self.coef_
        Xc = X - self._x_offset
        var = np.einsum("ij,jk,ik->i", Xc, self.sigma_, Xc)
        if self.fit_intercept:
            var = var + 1.0 / (self._n * self.alpha_)
        if include_noise:
            var = var + 1.0 / self.alpha_
        return mu, np.sqrt(np.maximum(var, np.finfo(float).tiny))


def _log_evidence(
    alpha: float, lam: float, Xc: np.ndarray, yc: np.ndarray, e: np.ndarray, V: np.ndarray, n_eff: int
) -> float:
    d = Xc.shape[1]
    m = V @ (alpha * (V.T @ (Xc.T @ yc)) / (lam + alpha * e))
    rss = float(np.sum((yc - Xc @ m) ** 2))
    return float(
        0.5 * d * np.log(lam)
        + 0.5 * n_eff * np.log(alpha)
        - 0.5 * alpha * rss
        - 0.5 * lam * (m @ m)
        - 0.5 * np.sum(np.log(lam + alpha * e))
        - 0.5 * n_eff * np.log(2 * np.pi)
    )
