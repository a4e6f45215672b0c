r"""Conformal prediction specialised to Gaussian processes: J+GP, asymJ+GP, FCP-GP.

Everything here rests on one object, the *kriging system* of a GP with
covariance matrix :math:`K` (noise or nugget on the diagonal, :math:`n \times n`),
observations :math:`y` and, for an unknown mean :math:`m(x) = p(x)^\top b`
(constant mean: :math:`p \equiv 1`), the basis matrix :math:`P` (:math:`n\times q`).
With :math:`W = (P^\top K^{-1} P)^{-1}`,

.. math::

    Q^{-1} = K^{-1} - K^{-1} P W P^\top K^{-1}
    \qquad (Q^{-1} = K^{-1} \text{ for a known zero mean}),

the universal-kriging weights at :math:`x` (covariances :math:`k_x = k(X, x)`,
:math:`\kappa_x = k(x, x) + \tau^2` with the noise :math:`\tau^2`) are
:math:`\lambda(x) = Q^{-1} k_x + K^{-1} P W p(x)`, the mean
:math:`\mu(x) = \lambda(x)^\top y` and the variance

.. math::

    v(x) = \kappa_x - k_x^\top K^{-1} k_x + u^\top W u, \qquad u = p(x) - P^\top K^{-1} k_x ,

all computed from one Cholesky factor :math:`K = LL^\top` (O(n³) once, O(n²)
per test point). Leave-one-out at the design points is Dubrule's closed form:
:math:`y_i - \mu_{-i}(x_i) = (Q^{-1}y)_i / (Q^{-1})_{ii}` and
:math:`\sigma^2_{-i}(x_i) = 1/(Q^{-1})_{ii}`.

Leave-one-out at a test point (J+GP, no refits)
-----------------------------------------------
Conditioning on :math:`y_{-i}` first and then on :math:`y_i` gives
:math:`\mu(x) = \mu_{-i}(x) + \frac{\operatorname{cov}_{-i}(Y_x, Y_i)}{\operatorname{var}_{-i}(Y_i)}
(y_i - \mu_{-i}(x_i))`, and the coefficient of :math:`y_i` in the full
predictor is exactly that ratio, i.e. the kriging weight :math:`\lambda_i(x)`.
Hence the rank-one downdate

.. math::

    \mu_{-i}(x) = \mu(x) - \lambda_i(x)\, e_i, \qquad
    \sigma^2_{-i}(x) = v(x) + \frac{\lambda_i(x)^2}{(Q^{-1})_{ii}}, \qquad
    e_i = \frac{(Q^{-1}y)_i}{(Q^{-1})_{ii}},

valid for a known mean and, as the flat-prior limit, for the unknown mean
re-estimated in every fold (universal kriging). One kriging solve per test
point gives all :math:`n` leave-one-out predictions: O(n²) per test point
instead of :math:`n` refits at O(n³) each. ``tests/calibrators/conformal/test_gp.py``
checks it against explicit refits to 1e-8.

Full conformal (FCP-GP, no candidate loop)
------------------------------------------
Add the test point with a candidate value :math:`z`. The augmented system is
the bordered one: with :math:`\lambda = \lambda(x)`, :math:`v = v(x)`,

.. math::

    \tilde Q^{-1} = \begin{pmatrix} Q^{-1} + \lambda\lambda^\top / v & -\lambda / v \\
                                   -\lambda^\top / v & 1/v \end{pmatrix}

(the Schur-complement update of the bordered kriging matrix), so the
augmented LOO residuals are affine in :math:`z`:

.. math::

    e_i(z) = \frac{(Q^{-1}y)_i + \lambda_i (\mu(x) - z)/v}{d_i}, \quad
    d_i = (Q^{-1})_{ii} + \lambda_i^2 / v, \qquad e_{n+1}(z) = z - \mu(x),

with :math:`\sigma_{n+1,-i}(x_i) = d_i^{-1/2}` and
:math:`\sigma_{n+1,-(n+1)}(x) = v^{1/2}` independent of :math:`z`. The
scores of Pion eq. (9) are :math:`R_i(z) = |A_i + B_i z|`. The candidate
:math:`z` is in the conformal set iff fewer than
:math:`k = \lceil c(n+1) \rceil` of :math:`R_1(z), \dots, R_n(z)` are
strictly below :math:`R_{n+1}(z)` (Pion eq. 3–4; eq. 10's expectation only
breaks ties, which have probability zero). Since
:math:`R_i^2 - R_{n+1}^2 = \bigl((A_i - A_{n+1}) + (B_i - B_{n+1})z\bigr)
\bigl((A_i + A_{n+1}) + (B_i + B_{n+1})z\bigr)`, each indicator changes
only at the (at most two) roots of those linear factors; sorting the
:math:`2n` breakpoints and sweeping a running count gives the exact set in
O(n log n) per test point after the O(n²) kriging solve. The set is a
finite union of intervals; calibprob returns its hull (the smallest interval
containing it), which has the same coverage guarantee.

Relation between FCP-GP and J+GP (β = 1, ε = 0)
------------------------------------------------
Condition on the :math:`n-1` points other than :math:`i`: the pair
:math:`(Y_i, Z)` is bivariate normal, with standardised residuals
:math:`a_i = e_i/\sigma_{-i}(x_i)` (the J+GP score, signed) and
:math:`b_i(z) = (z - \mu_{-i}(x))/\sigma_{-i}(x)` and correlation
:math:`\rho`. The augmented standardised LOO residuals are
:math:`(a_i - \rho b_i)/\sqrt{1-\rho^2}` and
:math:`(b_i - \rho a_i)/\sqrt{1-\rho^2}`, so

.. math::

    R_i(z) \ge R_{n+1}(z) \iff |a_i| \ge |b_i(z)|
    \iff z \in [\xi^-_i(x), \xi^+_i(x)] .

The full-conformal set is therefore
:math:`\{z : \#\{i : z \notin [\xi^-_i, \xi^+_i]\} \le k-1\}`, which is
contained in the J+GP interval (that one only bounds the violations on each
side separately) and equals it unless some :math:`\xi^-_i` lies above the
J+GP upper end (or some :math:`\xi^+_i` below the lower end). In
``tests/calibrators/conformal/test_gp.py`` the two coincide to 1e-9 on every one of
thousands of random test points; with :math:`\beta \ne 1` or
:math:`\epsilon > 0` they differ.

References
----------
Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
prediction: methods and comparative analysis. LOD 2024. Eq. (9)–(14).
Jaber, E. et al. (2024). Conformal approach to Gaussian process surrogate
evaluation with coverage guarantees. hal-04389163 (J+GP).
Papadopoulos, H. (2023). Guaranteed coverage prediction intervals with
Gaussian process regression (FCP-GP).
Nouretdinov, I., Melluish, T. and Vovk, V. (2001). Ridge regression confidence
machine. ICML (the breakpoint sweep).
Dubrule, O. (1983). Cross validation of kriging in a unique neighborhood.
Math. Geology 15(6) (closed-form LOO).
Barber, R. F. et al. (2021). Predictive inference with the jackknife+. AoS 49(1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self

import numpy as np
from numpy.typing import ArrayLike

from calibprob._core.estimator import BaseEstimator, check_is_fitted, check_not_predictive, clone
from calibprob._core.tables import adopt_columns, check_columns, record_columns
from calibprob._core.validation import check_choice

# the kriging algebra (one closed-form leave-one-out, shared with the GP base) lives with the GPs
from calibprob.bases.gp._sparse_loo import SparseKrigingSystem, sparse_kriging_predict, sparse_kriging_system
from calibprob.bases.gp.loo import KrigingSystem, _system_from_factor, kriging_predict, kriging_system, loo_at_points
from calibprob.calibrators.conformal._gp_bounds import (
    _jackknife_plus_gp_bounds_test_major,
    full_conformal_gp_bounds,
    jackknife_plus_gp_bounds,
)
from calibprob.calibrators.conformal._intervals import (
    IntervalPredictor,
    as_regressor,
    check_enough_points,
    check_Xy,
    default_chunk_size,
    resolve_levels,
)
from calibprob.calibrators.conformal.scores import Score, get_score

__all__ = [
    "KrigingSystem",
    "kriging_system",
    "kriging_predict",
    "loo_at_points",
    "jackknife_plus_gp_bounds",
    "full_conformal_gp_bounds",
]


# ---------------------------------------------------------------------------
# Estimator layer (wraps calibprob.bases.gp.GaussianProcessRegressor)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _GPView:
    """The arrays of a fitted GP that the conformal methods need (fixed hyperparameters)."""

    X: np.ndarray
    system: KrigingSystem
    kernel: Callable[..., np.ndarray]  # (X1, X2) -> latent covariance
    noise: float
    offset: float  # known mean added back to every prediction
    gls_mean: bool
    prior_var: float  # k(x, x) of the (stationary) kernel

    def predict(self, Xt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(lam, mu, var)`` at test points (outputs of :func:`kriging_predict`)."""
        Kc = self.kernel(self.X, Xt)
        # stationary kernels: k(x, x) = variance; the candidate observation carries the noise
        kd = np.full(Xt.shape[0], self.prior_var + self.noise)
        P_test = np.ones((Xt.shape[0], 1)) if self.gls_mean else None
        # mu is on the centred scale (y - offset); callers add offset to the ends
        return kriging_predict(self.system, Kc, kd, P_test)

    def predict_with_extra(self, Xt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """``(lam, mu, var, None)``: an exact GP has no unexplained prior variance."""
        return (*self.predict(Xt), None)


@dataclass(frozen=True)
class _SparseGPView:
    """A fitted sparse (VFE) GP as a kriging system: :math:`O(nm^2)` once, :math:`O(nm)` per test point.

    Never forms an n x n matrix; holds :math:`T` (:math:`nm` numbers). See
    ``calibprob.bases.gp._sparse_loo``.
    """

    Z: np.ndarray
    system: SparseKrigingSystem
    kernel: Callable[[np.ndarray, np.ndarray], np.ndarray]  # (Z, X) -> k(Z, X)
    offset: float

    def predict_with_extra(self, Xt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        r"""``(lam, mu, var, extra)`` at test points; ``extra`` is :math:`\delta(x)`."""
        return sparse_kriging_predict(self.system, self.kernel(self.Z, Xt))

    def predict(self, Xt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(lam, mu, var)`` at test points (``var`` the sparse predictive variance)."""
        return self.predict_with_extra(Xt)[:3]

    def predict_test_major(self, Xt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(lam, mu, var)`` with ``lam`` of shape ``(c, n)``: one contiguous row per test point."""
        return sparse_kriging_predict(self.system, self.kernel(self.Z, Xt), test_major=True)[:3]


@dataclass(frozen=True)
class _Kernel:
    """``k_θ(A, B)`` of a fitted GP at fixed θ, as an object (not a closure) so that a view pickles.

    ``exact``: the exact GP's :meth:`kernel_matrix` (``B`` defaults to ``A``); else the sparse GP's
    ``_k`` on the inducing inputs. The same calls, so the same numbers, as the closures they replace.
    """

    gp: Any
    theta: dict
    exact: bool

    def __call__(self, A: np.ndarray, B: np.ndarray | None = None) -> np.ndarray:
        if not self.exact:
            return self.gp._k(A, B, self.theta)
        return np.asarray(self.gp.kernel_matrix(A, A if B is None else B, theta=self.theta), float)


def _sparse_gp_view(gp: Any, refit_mean: bool) -> _SparseGPView:
    theta = dict(gp.theta_)
    constant = getattr(gp, "mean", "zero") == "constant"
    offset = float(theta.get("mean_", 0.0)) if constant else 0.0
    system = sparse_kriging_system(gp, offset=offset, gls=constant and refit_mean)
    return _SparseGPView(np.asarray(gp.inducing_points_, float), system, _Kernel(gp, theta, False), offset)


def _gp_view(gp: Any, refit_mean: bool) -> _GPView:
    """Extract training data, covariance and mean handling from a fitted GP."""
    check_is_fitted(gp, "theta_", method="fit")
    if hasattr(gp, "inducing_points_"):
        return _sparse_gp_view(gp, refit_mean)  # type: ignore[return-value]
    # noise is a variance (the nugget times the variance for interpolation); kernel_matrix has no noise
    theta = dict(gp.theta_)
    X = np.asarray(gp.X_train_, float)
    y = np.asarray(gp.y_train_, float)
    noise = float(theta.get("noise", 0.0))
    kern = _Kernel(gp, theta, True)
    constant = getattr(gp, "mean", "zero") == "constant"
    gls = constant and refit_mean
    # Subtract the fitted constant whether or not it is re-estimated: the GLS re-estimate
    # (and every LOO / conformal quantity) is invariant to a known offset, and working on
    # y - mean_ keeps y + 1e9 from cancelling catastrophically in the quadratic forms.
    offset = float(theta.get("mean_", 0.0)) if constant else 0.0
    P = np.ones((y.size, 1)) if gls else None
    state = getattr(gp, "_state", None)
    factor = state.get("factor") if isinstance(state, dict) else None
    if factor is not None and factor[1] and np.array_equal(X, np.asarray(gp.X_train_, float)):
        # the GP's own factorisation of the same K (kernel + noise at theta_): no second Cholesky
        system = _system_from_factor(factor[0], y - offset, P)
    else:
        K = kern(X) + noise * np.eye(X.shape[0])
        system = kriging_system(K, y - offset, P)
    return _GPView(X, system, kern, noise, offset, gls, float(theta["variance"]))


class _GPConformalBase(IntervalPredictor):
    """Shared fit/predict plumbing of :class:`JackknifePlusGP` and :class:`FullConformalGP`."""

    _fitted = "view_"
    _min_sides = 1
    refit_mean: bool  # a parameter of both subclasses
    chunk_size: int | None  # a parameter of both subclasses
    estimator: Any  # a parameter of both subclasses
    prefit: bool  # a parameter of both subclasses
    # each subclass's interval ends from the kriging weights: (lam, mu, var, levels, extra) -> (lower, upper)
    _bounds: Callable[..., tuple[np.ndarray, np.ndarray]]
    _rows_per_point: int  # the subclass's temporaries per test point and training point
    #: the kriging view is derived from the fitted GP: not saved, rebuilt after loading
    _transient_attrs: tuple[str, ...] = ("view_",)

    def _rebuild_after_load(self) -> None:
        """Rebuild the kriging view from the loaded GP (:func:`_gp_view`), as ``fit`` built it."""
        if getattr(self, "estimator_", None) is not None:
            self.view_ = _gp_view(self.estimator_, self.refit_mean)

    def fit(self, X: ArrayLike | None = None, y: ArrayLike | None = None) -> Self:
        """Fit a clone of the GP (or take the prefitted one) and factorise it; returns ``self``.

        Parameters
        ----------
        X : array_like, shape (n, d), optional with ``prefit=True``
        y : array_like, shape (n,), optional with ``prefit=True``
        """
        levels, _ = resolve_levels(self.confidence_level)
        self._check_options()
        if self.prefit:
            gp = self.estimator
            if gp is None:
                raise ValueError("prefit=True needs a fitted GP as estimator; got None.")
            adopt_columns(self, gp)  # the GP's own columns: predict's DataFrames are checked against them
            if X is not None:
                check_columns(self, X)
        else:
            if X is None or y is None:
                raise ValueError("fit(X, y) needs training data unless prefit=True.")
            check_not_predictive(X, self)
            record_columns(self, X)
            X, y = check_Xy(X, y, min_length=2)
            gp = clone(as_regressor(self.estimator)).fit(X, y)
        if not hasattr(gp, "kernel_matrix"):
            raise TypeError(
                f"{type(self).__name__} needs a calibprob GaussianProcessRegressor (with theta_ and "
                f"kernel_matrix); {type(gp).__name__} has no 'kernel_matrix'. For other bases use "
                "CrossConformalRegressor (jackknife+ with refits)."
            )
        # a view computed once for several methods on this GP (fit_with_view), else computed here
        view = getattr(self, "_given_view", None) if self.prefit else None
        if view is None:
            view = _gp_view(gp, self.refit_mean)
        for c in levels:
            check_enough_points(c, view.system.n, what="training points", sides=self._min_sides)
        self.estimator_ = gp
        self.view_ = view
        self.n_train_ = view.system.n
        return self

    def kriging_view(self) -> _GPView | _SparseGPView:
        """The kriging view :meth:`fit` computes of the prefit GP (``prefit=True``), for :meth:`fit_with_view`.

        The :math:`O(n^3)` (exact GP: :math:`L^{-1}`, :math:`\\operatorname{diag} Q^{-1}`, :math:`Q^{-1}y`)
        or :math:`O(nm^2)` (sparse GP: :math:`T = L_B^{-1}L_m^{-1}K_{mn}/\\sigma` and the leave-one-out
        terms) part of the fit; it depends on the GP and :meth:`kriging_view_key` only, so J+GP,
        asymJ+GP and the full-conformal GP on one GP can share it.
        """
        if not self.prefit or self.estimator is None:
            raise ValueError(
                f"kriging_view needs prefit=True and a fitted GP as estimator; got prefit={self.prefit!r}, "
                f"estimator={type(self.estimator).__name__}. Pass prefit=True with the fitted GP."
            )
        return _gp_view(self.estimator, self.refit_mean)

    def kriging_view_key(self) -> tuple[str, bool]:
        """What :meth:`kriging_view` depends on besides the GP: whether the constant mean is re-estimated (GLS).

        Two models on the same fitted GP with equal keys compute the same view, bit for bit (a
        zero-mean GP's view is the same for either ``refit_mean``): the comparison runner computes it
        once per task for all of them (``calibprob.compare.methods.share_base_predictions``).
        """
        return ("kriging", bool(getattr(self.estimator, "mean", "zero") == "constant" and self.refit_mean))

    def fit_with_view(self, view: _GPView | _SparseGPView) -> Self:
        """:meth:`fit` (``prefit=True``) on a view computed once elsewhere by :meth:`kriging_view`: the same numbers.

        ``view`` must come from a model with the same GP and an equal :meth:`kriging_view_key` (the
        comparison runner's shared stage guarantees it). It is read, never written.
        """
        if not self.prefit:
            raise ValueError("fit_with_view needs prefit=True (the view is of the prefitted GP); got prefit=False.")
        self._given_view = view
        try:
            return self.fit()
        finally:
            del self._given_view

    def _check_options(self) -> None:
        pass

    def _chunk_bounds(self, Xs: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Interval ends of one chunk of test points, shape ``(c, C)`` each."""
        lam, mu, var, extra = self.view_.predict_with_extra(Xs)
        return self._bounds(lam, mu, var, levels, extra)

    # the predict / predict_interval pair: IntervalPredictor's
    def _interval_sides(self) -> int:
        return self._min_sides

    def _interval_chunk(self) -> int:
        return default_chunk_size(self._rows_per_point * self.n_train_, self.chunk_size)


class JackknifePlusGP(_GPConformalBase, BaseEstimator):
    r"""J+GP and asymJ+GP: jackknife+ for a GP from the closed-form LOO (no refits).

    Pion & Vazquez (2024) eq. (11)–(12) (``score="normalized"``, J+GP of
    Jaber et al. 2024) and eq. (13)–(14) (``score="signed"``, asymJ+GP);
    ``score="absolute"`` is Barber et al.'s jackknife+ with the GP refitted
    at fixed hyperparameters. Each test point's :math:`\mu_{-i}(x)`,
    :math:`\sigma_{-i}(x)` come from the rank-one downdate in
    ``calibprob.calibrators.conformal.gp``; hyperparameters are not re-estimated per
    fold (as in Pion's experiments).

    Rank conventions (:math:`\alpha = 1 - c`): symmetric scores take the
    :math:`\lfloor \alpha(n+1) \rfloor`-th smallest :math:`\xi^-_i(x)` and the
    :math:`\lceil (1-\alpha)(n+1) \rceil`-th smallest :math:`\xi^+_i(x)`;
    signed scores the :math:`\lfloor (\alpha/2)(n+1) \rfloor`-th and
    :math:`\lceil (1-\alpha/2)(n+1) \rceil`-th smallest :math:`\xi_i(x)`
    (``convention="pion2024"``: floor for the upper end, as printed in eq. 14).

    Parameters
    ----------
    estimator : calibprob.GaussianProcessRegressor
    score : {"normalized", "signed", "absolute", "signed-absolute"}, default "normalized"
    beta, eps : float
        :math:`\max(\epsilon, \sigma^\beta)` normaliser (Pion eq. 9).
    confidence_level : float or sequence, default 0.9
    prefit : bool, default False
        Use the already-fitted GP (``fit()`` without data).
    refit_mean : bool, default True
        With a constant-mean GP, re-estimate the mean in every fold
        (universal kriging, :math:`Q^{-1}`, as in Pion/GPmp); ``False`` keeps
        the fitted constant fixed.
    convention : {"barber", "pion2024"}, default "barber"
    chunk_size : int, optional

    Attributes
    ----------
    estimator_ : the fitted GP
    loo_residuals_ : ndarray, shape (n,)
        :math:`y_i - \mu_{-i}(x_i)`.
    loo_std_ : ndarray, shape (n,)
        :math:`\sigma_{-i}(x_i)` (with noise).
    scores_ : ndarray, shape (n,)

    References
    ----------
    Pion & Vazquez (2024); Jaber et al. (2024); Barber et al. (2021).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, size=(140, 1)); y = np.sin(2 * X[:, 0]) + 0.2 * rng.normal(size=140)
    >>> gp = calibprob.GaussianProcessRegressor(random_state=0).fit(X[:40], y[:40])
    >>> jgp = calibprob.JackknifePlusGP(estimator=gp, prefit=True, confidence_level=[0.5, 0.9]).fit()
    >>> iv = jgp.predict_interval(X[40:])                 # lower/upper over (obs, confidence_level)
    >>> dict(iv.sizes)
    {'obs': 100, 'confidence_level': 2}
    >>> asym = calibprob.JackknifePlusGP(estimator=gp, prefit=True, score="signed", confidence_level=0.8).fit()
    >>> bool((asym.predict_interval(X[40:])["upper"] > asym.predict_interval(X[40:])["lower"]).all())
    True
    """

    _rows_per_point = 8

    def __init__(
        self,
        *,
        estimator: Any = None,
        score: str | Score = "normalized",
        beta: float = 1.0,
        eps: float = 0.0,
        confidence_level: ArrayLike = 0.9,
        prefit: bool = False,
        refit_mean: bool = True,
        convention: str = "barber",
        chunk_size: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.score = score
        self.beta = beta
        self.eps = eps
        self.confidence_level = confidence_level
        self.prefit = prefit
        self.refit_mean = refit_mean
        self.convention = convention
        self.chunk_size = chunk_size

    def _check_options(self) -> None:
        check_choice(self.convention, "convention", ("barber", "pion2024"))
        sc = get_score(self.score, beta=self.beta, eps=self.eps)
        self._min_sides = 1 if sc.symmetric else 2

    def fit(self, X: ArrayLike | None = None, y: ArrayLike | None = None) -> Self:
        super().fit(X, y)
        sc = get_score(self.score, beta=self.beta, eps=self.eps)
        s = self.view_.system
        self.loo_residuals_ = s.loo_residual
        self.loo_std_ = s.loo_std
        self.scores_ = sc.score(s.loo_residual, 0.0, s.loo_std if sc.needs_sigma else None)
        return self

    fit.__doc__ = _GPConformalBase.fit.__doc__

    def _chunk_bounds(self, Xs: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not isinstance(self.view_, _SparseGPView):
            return super()._chunk_bounds(Xs, levels)
        # sparse base: weights test-point-major, order statistics along contiguous rows
        lam_t, mu, var = self.view_.predict_test_major(Xs)
        lo, hi = _jackknife_plus_gp_bounds_test_major(
            self.view_.system,
            lam_t,
            mu,
            var,
            levels,
            score=get_score(self.score, beta=self.beta, eps=self.eps),
            convention=self.convention,
        )
        return lo + self.view_.offset, hi + self.view_.offset

    def _bounds(
        self,
        lam: np.ndarray,
        mu: np.ndarray,
        var: np.ndarray,
        levels: np.ndarray,
        extra: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        # extra (sparse base) is already part of var, the test point's predictive variance
        lo, hi = jackknife_plus_gp_bounds(
            self.view_.system,
            lam,
            mu,
            var,
            levels,
            score=self.score,
            beta=self.beta,
            eps=self.eps,
            convention=self.convention,
        )
        return lo + self.view_.offset, hi + self.view_.offset

    def _method_name(self) -> str:
        sc = get_score(self.score, beta=self.beta, eps=self.eps)
        return {"normalized": "J+GP", "signed": "asymJ+GP"}.get(sc.name, f"jackknife+-gp-{sc.name}")


class FullConformalGP(_GPConformalBase, BaseEstimator):
    r"""Full-conformal GP (FCP-GP; Papadopoulos 2023, Pion & Vazquez 2024 eq. 9–10).

    Exact conformal intervals with the normalised LOO scores of the
    augmented data set, computed without a candidate grid: O(n³) once,
    O(n²) per test point (bordered update of :math:`Q^{-1}`) plus an
    O(n log n) breakpoint sweep; see ``calibprob.calibrators.conformal.gp``. Works for
    interpolation (nugget) and noisy regression alike: the candidate
    observation carries the GP's noise variance.

    Parameters
    ----------
    estimator : calibprob.GaussianProcessRegressor
    beta, eps : float
        Score :math:`|e_i|/\max(\epsilon, \sigma_{n+1,-i}(x_i)^\beta)`.
    confidence_level : float or sequence, default 0.9
    prefit : bool, default False
    refit_mean : bool, default True
        Constant-mean GP: re-estimate the mean with each candidate (universal kriging).
    chunk_size : int, optional

    Notes
    -----
    The conformal set is a finite union of intervals; ``predict_interval``
    returns its hull. Coverage :math:`\ge c` for exchangeable data (Lei et al.
    2018, Thm. 2.1), ``-inf``/``inf`` ends when the set is unbounded.

    References
    ----------
    Papadopoulos (2023); Pion & Vazquez (2024); Nouretdinov et al. (2001).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, size=(140, 1)); y = np.sin(2 * X[:, 0]) + 0.2 * rng.normal(size=140)
    >>> gp = calibprob.GaussianProcessRegressor(random_state=0).fit(X[:40], y[:40])
    >>> fcp = calibprob.FullConformalGP(estimator=gp, prefit=True, confidence_level=0.8).fit()
    >>> jgp = calibprob.JackknifePlusGP(estimator=gp, prefit=True, confidence_level=0.8).fit()
    >>> a, b = fcp.predict_interval(X[40:]), jgp.predict_interval(X[40:])
    >>> bool(np.allclose(a["lower"], b["lower"]) and np.allclose(a["upper"], b["upper"]))   # beta = 1: equal
    True
    """

    _rows_per_point = 40

    def __init__(
        self,
        *,
        estimator: Any = None,
        beta: float = 1.0,
        eps: float = 0.0,
        confidence_level: ArrayLike = 0.9,
        prefit: bool = False,
        refit_mean: bool = True,
        chunk_size: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.beta = beta
        self.eps = eps
        self.confidence_level = confidence_level
        self.prefit = prefit
        self.refit_mean = refit_mean
        self.chunk_size = chunk_size

    def _check_options(self) -> None:
        get_score("normalized", beta=self.beta, eps=self.eps)

    def _bounds(
        self,
        lam: np.ndarray,
        mu: np.ndarray,
        var: np.ndarray,
        levels: np.ndarray,
        extra: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        off = self.view_.offset
        lo, hi = full_conformal_gp_bounds(
            self.view_.system, lam, mu, var, levels, beta=self.beta, eps=self.eps, extra_x=extra
        )
        return lo + off, hi + off

    def _method_name(self) -> str:
        return "FCP-GP"
