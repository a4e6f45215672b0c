r"""Full conformal prediction under feedback covariate shift (Fannjiang et al. 2022), without refits.

When the test input is *designed* from the fitted model -- a protein engineer samples
sequences with a density tilted towards high predicted fitness -- the test input's law depends
on the training data: feedback covariate shift. Fannjiang, Bates, Angelopoulos, Listgarten &
Jordan (2022) show that weighted full conformal prediction restores exact coverage when the
weight of each point is recomputed for every candidate label. With the design density

.. math::

    \tilde p_{D}(x) = \frac{\exp(\lambda\, \hat\mu_{D}(x))}{Z_{D}},\qquad
    Z_D = \sum_{u \in \mathcal X} \exp(\lambda\, \hat\mu_D(u)),

(:math:`\hat\mu_D` the model fitted on the data :math:`D`, :math:`\mathcal X` a finite design
pool, :math:`\lambda` the inverse temperature), the candidate label :math:`y` of the test input
:math:`X_{n+1}` is in the set when

.. math::

    S_{n+1}(y) \le \operatorname{Quantile}_{1-\alpha}\Bigl(\sum_{i=1}^{n} p_i^y\, \delta_{S_i(y)}
    + p_{n+1}^y\, \delta_{+\infty}\Bigr),\qquad
    p_i^y = \frac{w_i(y)}{\sum_{j=1}^{n+1} w_j(y)},\quad
    w_i(y) = \frac{\tilde p_{Z_{-i}^y}(X_i)}{p_X(X_i)}

(their eq. 3 and Theorem 1), where :math:`Z_{-i}^y` is the augmented data
:math:`(X_1,Y_1),\dots,(X_n,Y_n),(X_{n+1},y)` without point :math:`i`, and the score is the
leave-one-out residual :math:`S_i(y) = |Y_i - \hat\mu_{Z_{-i}^y}(X_i)|` (the authors' choice;
:math:`S_{n+1}(y) = |y - \hat\mu_{Z_{1:n}}(X_{n+1})|`). The *standard* covariate-shift version
(Tibshirani et al. 2019) uses one weight per point from the model fitted on the training data
alone, :math:`w_i = \tilde p_{Z_{1:n}}(X_i)/p_X(X_i)`; it over-covers under feedback shift.

**No refits.** For a penalised least-squares smoother (ridge, kernel ridge, the posterior mean of
an exact GP with fixed hyperparameters) the fit on the augmented data is linear in the labels,
:math:`\hat\mu(v) = \sum_j L_{vj} y_j`, and leaving point :math:`i` out is a rank-one downdate
(Sherman--Morrison):

.. math::

    \hat\mu_{-i}(v) = \hat\mu(v) - L_{vi}\, \frac{y_i - \hat\mu(x_i)}{1 - H_{ii}},

with :math:`H` the hat matrix (:math:`L` on the data rows). Every fitted value is therefore
*affine* in the candidate label, :math:`\hat\mu_{Z_{-i}^y}(v) = c_{iv} + y\, a_{iv}`, and one
smoother matrix gives all :math:`(n+1) \times |\mathcal Y|` leave-one-out fits at the data and on
the pool; only the normalising constants :math:`Z_{-i}^y` (one sum over the pool per :math:`(i,
y)`) remain. :func:`feedback_conformal_set` computes the set this way;
:func:`refit_conformal_set` refits the model :math:`(n+1)\,|\mathcal Y|` times, as the authors'
black-box code (clarafy/conformal-for-design ``calibrate.ConformalFeedbackCovariateShift``) does,
and serves as the reference the closed form is tested against (equal to 1e-8).

With :math:`\lambda = 0` the weights are equal and the set is ordinary (unweighted) full
conformal with leave-one-out scores.

References
----------
Fannjiang, C., Bates, S., Angelopoulos, A. N., Listgarten, J. and Jordan, M. I. (2022).
Conformal prediction under feedback covariate shift for biomolecular design. PNAS 119(43),
e2204569119.

Tibshirani, R. J., Barber, R. F., Candès, E. J. and Ramdas, A. (2019). Conformal prediction
under covariate shift. NeurIPS 32.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike

from calibprob._core.validation import check_array, check_choice, check_probability
from calibprob.predictive import CalibprobWarning

#: A training-input density: a callable X -> (len(X),) densities, or the densities themselves.
Density = Callable[[np.ndarray], np.ndarray] | ArrayLike

__all__ = [
    "RidgeSmoother",
    "KernelRidgeSmoother",
    "AffineLOO",
    "ConformalSet",
    "SHIFTS",
    "loo_affine",
    "feedback_conformal_set",
    "refit_conformal_set",
    "check_lam",
    "check_grid",
    "set_from_scores",
    "conformal_set_from_loo",
]

#: The weightings :func:`feedback_conformal_set` knows.
SHIFTS = ("feedback", "standard", "none")


# ---------------------------------------------------------------------------
# smoothers: the fitted values as a linear map of the labels
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class RidgeSmoother:
    r"""Ridge regression :math:`\hat\beta = (X^\top X + \Gamma)^{-1} X^\top y` as a linear smoother.

    Parameters
    ----------
    penalty : float
        :math:`\gamma \ge 0`; :math:`\Gamma = \gamma I` except on ``unpenalized`` columns.
    unpenalized : tuple of int
        Columns not penalised (the authors' Walsh--Hadamard features carry the intercept in
        column 0 and leave it unpenalised: ``(0,)``).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.calibrators.conformal.feedback import RidgeSmoother
    >>> X = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]])
    >>> L = RidgeSmoother(penalty=0.0).matrix(X, X)     # least squares: the hat matrix
    >>> np.allclose(L @ np.array([1.0, 3.0, 5.0]), [1.0, 3.0, 5.0])
    True
    """

    penalty: float = 1.0
    unpenalized: tuple[int, ...] = ()

    def matrix(self, X_fit: np.ndarray, X_eval: np.ndarray) -> np.ndarray:
        """Smoother matrix ``L`` (len(X_eval), len(X_fit)): fitted values at X_eval = ``L @ y``."""
        p = X_fit.shape[1]
        reg = np.full(p, float(self.penalty))
        reg[list(self.unpenalized)] = 0.0
        G = X_fit.T @ X_fit + np.diag(reg)
        # M X_fit^T by one Cholesky solve (G is symmetric positive definite)
        B = _spd_solve(G, X_fit.T)
        return X_eval @ B

    def fit_predict(self, X_fit: np.ndarray, y_fit: np.ndarray, X_eval: np.ndarray) -> np.ndarray:
        """One refit: predictions at ``X_eval`` of the ridge fitted on ``(X_fit, y_fit)``."""
        p = X_fit.shape[1]
        reg = np.full(p, float(self.penalty))
        reg[list(self.unpenalized)] = 0.0
        beta = _spd_solve(X_fit.T @ X_fit + np.diag(reg), X_fit.T @ y_fit)
        return X_eval @ beta


@dataclass(frozen=True)
class KernelRidgeSmoother:
    r"""Kernel ridge :math:`\hat\mu(v) = m + k(v, S)(K_{SS} + \nu I)^{-1}(y - m)`: an exact GP's mean.

    With ``kernel`` the GP's covariance, ``penalty`` its noise variance :math:`\nu` and ``mean``
    its (fixed) constant mean, :math:`\hat\mu` is the GP posterior mean with the hyperparameters
    held fixed (:meth:`from_gp`).

    Parameters
    ----------
    kernel : callable
        ``kernel(A, B) -> (len(A), len(B))`` covariance matrix.
    penalty : float
        :math:`\nu > 0`.
    mean : float
        Constant prior mean :math:`m` (fixed, not re-estimated per fit).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.calibrators.conformal.feedback import KernelRidgeSmoother
    >>> rbf = lambda A, B: np.exp(-0.5 * ((A[:, None, 0] - B[None, :, 0]) ** 2))
    >>> sm = KernelRidgeSmoother(kernel=rbf, penalty=0.1)
    >>> X = np.array([[0.0], [1.0], [2.0]])
    >>> sm.matrix(X, X).shape
    (3, 3)
    """

    kernel: Callable
    penalty: float = 1e-2
    mean: float = 0.0

    @classmethod
    def from_gp(cls, gp: Any) -> KernelRidgeSmoother:
        """The posterior mean of a fitted :class:`~calibprob.GaussianProcessRegressor` (hyperparameters fixed)."""
        theta = dict(gp.theta_)
        return cls(
            kernel=lambda A, B: gp.kernel_matrix(A, B, theta=theta),
            penalty=float(theta["noise"]),
            mean=float(getattr(gp, "mean_", 0.0)),
        )

    def matrix(self, X_fit: np.ndarray, X_eval: np.ndarray) -> np.ndarray:
        """Smoother matrix ``L`` (len(X_eval), len(X_fit)) of the centred labels."""
        K = self.kernel(X_fit, X_fit) + float(self.penalty) * np.eye(len(X_fit))
        return _spd_solve(K, self.kernel(X_fit, X_eval)).T

    def fit_predict(self, X_fit: np.ndarray, y_fit: np.ndarray, X_eval: np.ndarray) -> np.ndarray:
        """One refit: the posterior mean at ``X_eval`` given ``(X_fit, y_fit)``."""
        K = self.kernel(X_fit, X_fit) + float(self.penalty) * np.eye(len(X_fit))
        alpha = _spd_solve(K, y_fit - self.mean)
        return self.mean + self.kernel(X_eval, X_fit) @ alpha


def _spd_solve(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return scipy.linalg.cho_solve(scipy.linalg.cho_factor(A, lower=True), B)


# ---------------------------------------------------------------------------
# the leave-one-out fits of the augmented data, affine in the candidate label
# ---------------------------------------------------------------------------
#: A linear smoother with closed-form leave-one-out updates (ridge, kernel ridge, the exact GP mean).
Smoother = RidgeSmoother | KernelRidgeSmoother


@dataclass(frozen=True)
class AffineLOO:
    r"""Leave-one-out fitted values of the augmented data, affine in the test label :math:`y`.

    :math:`\hat\mu_{Z_{-i}^y}(v) = c_{iv} + y\,a_{iv}` for :math:`i = 1..n+1` (row ``n`` is the
    test point: its row of ``a`` is zero) and the evaluation points :math:`v` (the ``n + 1``
    augmented inputs first, then the pool).

    Attributes
    ----------
    c, a : ndarray, shape (n + 1, n + 1 + m)
    n : int
        Training size.
    """

    c: np.ndarray
    a: np.ndarray
    n: int

    def at_own_point(self) -> tuple[np.ndarray, np.ndarray]:
        """``(c_ii, a_ii)``, shape (n + 1,): the fit without point i, at point i."""
        idx = np.arange(self.n + 1)
        return self.c[idx, idx], self.a[idx, idx]

    def on_pool(self) -> tuple[np.ndarray, np.ndarray]:
        """``(c, a)`` restricted to the pool, shape (n + 1, m)."""
        return self.c[:, self.n + 1 :], self.a[:, self.n + 1 :]


def loo_affine(
    smoother: Smoother, X: np.ndarray, y: np.ndarray, x_test: np.ndarray, pool: np.ndarray | None = None
) -> AffineLOO:
    r"""All leave-one-out fits of the augmented data from one smoother matrix (rank-one downdates).

    Parameters
    ----------
    smoother : RidgeSmoother or KernelRidgeSmoother
        Anything with ``matrix(X_fit, X_eval)`` returning the linear smoother (and a ``mean``
        attribute when labels are centred).
    X : ndarray, shape (n, p)
    y : ndarray, shape (n,)
    x_test : ndarray, shape (p,)
    pool : ndarray, shape (m, p), optional
        Further evaluation points (the design pool).

    Returns
    -------
    AffineLOO

    Notes
    -----
    With :math:`S` the augmented inputs, :math:`L` the smoother from :math:`S` to
    :math:`E = S \cup \text{pool}`, :math:`H = L_{S\cdot}`, the centred labels
    :math:`y^0 = (y - m, -m)` (the test label enters as :math:`y^0_{n+1} + y`) and :math:`F_0 = L y^0`:
    :math:`c_{iv} = m + F_0(v) - L_{vi}\,(y^0_i - F_0(x_i))/(1 - H_{ii})` and
    :math:`a_{iv} = L_{v,n+1} - L_{vi}\,(\delta_{i,n+1} - H_{i,n+1})/(1 - H_{ii})`.
    """
    S = np.vstack([X, x_test[None, :]])
    E = S if pool is None else np.vstack([S, pool])
    n = X.shape[0]
    m = float(getattr(smoother, "mean", 0.0))
    L = smoother.matrix(S, E)  # (|E|, n + 1)
    H = L[: n + 1]
    # centred labels; the test label enters as y0_t + y with y0_t = -m
    y0 = np.append(y - m, -m)
    F0 = L @ y0
    d = 1.0 - np.diag(H)
    r0 = (y0 - F0[: n + 1]) / d
    e_t = np.zeros(n + 1)
    e_t[n] = 1.0
    rt = (e_t - H[:, n]) / d
    c = m + F0[None, :] - L.T * r0[:, None]
    a = L[:, n][None, :] - L.T * rt[:, None]
    return AffineLOO(c=c, a=a, n=n)


# ---------------------------------------------------------------------------
# the conformal set
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ConformalSet:
    """A full-conformal set on a grid of candidate labels.

    Attributes
    ----------
    grid : ndarray, shape (k,)
        Candidate labels.
    in_set : ndarray of bool, shape (k,)
    scores : ndarray, shape (n + 1, k)
        Leave-one-out scores :math:`S_i(y)` (row ``n``: the test score).
    weights : ndarray, shape (n + 1, k)
        Normalised weights :math:`p_i^y` (each column sums to 1).
    shift : str
    """

    grid: np.ndarray
    in_set: np.ndarray
    scores: np.ndarray
    weights: np.ndarray
    shift: str

    @property
    def values(self) -> np.ndarray:
        """The candidate labels in the set."""
        return self.grid[self.in_set]

    @property
    def interval(self) -> tuple[float, float]:
        """Smallest and largest label of the set (NaN, NaN when empty)."""
        v = self.values
        return (float(v.min()), float(v.max())) if v.size else (np.nan, np.nan)

    def covers(self, y_true: float) -> bool:
        """Whether a label in the set lies within half a grid step of ``y_true`` (the authors' rule)."""
        step = float(np.min(np.diff(self.grid))) if self.grid.size > 1 else np.inf
        return bool(np.any(np.abs(self.values - float(y_true)) < step / 2))


def check_lam(lam: float) -> float:
    """The inverse temperature: a finite real number."""
    try:
        value = float(lam)
    except (TypeError, ValueError):
        raise ValueError(f"lam (the design's inverse temperature) must be a finite number; got {lam!r}.") from None
    if not np.isfinite(value):
        raise ValueError(
            f"lam (the design's inverse temperature) must be finite; got {value!r}. "
            "Pass a real number such as 0, 2, 4 or 6."
        )
    return value


def check_grid(grid: ArrayLike, y: np.ndarray, *, on_outside: str = "warn") -> np.ndarray:
    """A strictly increasing finite grid of candidate labels; warns or refuses when it misses the data."""
    g = check_array(grid, "grid", ndim=1)
    if g.size < 2 or np.any(np.diff(g) <= 0):
        raise ValueError(
            f"grid must hold at least two strictly increasing candidate labels; got {g.size} values. "
            "Pass e.g. np.arange(0, 2.21, 0.02)."
        )
    check_choice(on_outside, "on_outside", ("warn", "raise", "ignore"))
    lo, hi = float(np.min(y)), float(np.max(y))
    if lo < g[0] or hi > g[-1]:
        msg = (
            f"grid [{g[0]:g}, {g[-1]:g}] does not cover the training labels' range [{lo:g}, {hi:g}]: "
            "labels outside the grid can never be covered. Widen the grid."
        )
        if on_outside == "raise":
            raise ValueError(msg)
        if on_outside == "warn":
            warnings.warn(msg, CalibprobWarning, stacklevel=3)
    return g


def _check_inputs(
    X: ArrayLike, y: ArrayLike, x_test: ArrayLike, pool: ArrayLike | None, train_density: Density | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    X = check_array(X, "X", ndim=2)
    y = check_array(y, "y", ndim=1)
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"y must have one label per row of X ({X.shape[0]}); got {y.shape[0]}.")
    x_test = check_array(x_test, "x_test", ndim=(1, 2)).reshape(-1)
    if x_test.shape[0] != X.shape[1]:
        raise ValueError(f"x_test must have {X.shape[1]} features (as X); got {x_test.shape[0]}.")
    if pool is not None:
        pool = check_array(pool, "pool", ndim=2)
        if pool.shape[1] != X.shape[1]:
            raise ValueError(
                f"pool (the design density's support) must have {X.shape[1]} columns, as X; got shape {pool.shape}."
            )
    S = np.vstack([X, x_test[None, :]])
    if train_density is None:
        ptrain = np.ones(S.shape[0])
    else:
        ptrain = np.asarray(train_density(S) if callable(train_density) else train_density, float)
        if ptrain.shape != (S.shape[0],) or not np.all(np.isfinite(ptrain)) or np.any(ptrain <= 0):
            raise ValueError(
                f"train_density must give one positive finite density per training row and the test row "
                f"(shape ({S.shape[0]},)); got shape {ptrain.shape}. Pass a callable X -> (len(X),) densities."
            )
    return X, y, x_test, pool, ptrain


def _log_normaliser(c_pool: np.ndarray, a_pool: np.ndarray, lam: float, grid: np.ndarray) -> np.ndarray:
    r""":math:`\log Z_i(y) = \log \sum_u \exp(\lambda (c_{iu} + y a_{iu}))`, shape (n + 1, k).

    One point :math:`i` at a time in a reused (k, m) buffer (a fresh array per chunk spent most
    of its time in page faults); each column is shifted by its own maximum before the
    exponential, so no term overflows and the largest is exactly 1.
    """
    out = np.empty((c_pool.shape[0], grid.size))
    buf = np.empty((grid.size, c_pool.shape[1]))
    for i in range(c_pool.shape[0]):
        np.multiply.outer(grid, lam * a_pool[i], out=buf)
        buf += lam * c_pool[i]
        top = buf.max(axis=1)
        buf -= top[:, None]
        np.exp(buf, out=buf)
        out[i] = top + np.log(buf.sum(axis=1))
    return out


def _weights(loo: AffineLOO, lam: float, grid: np.ndarray, shift: str, ptrain: np.ndarray) -> np.ndarray:
    """Unnormalised log-weights, shape (n + 1, k)."""
    n = loo.n
    n1 = n + 1
    if shift == "none" or lam == 0.0:
        return np.broadcast_to(-np.log(ptrain)[:, None], (n1, grid.size)).copy()
    c_pool, a_pool = loo.on_pool()
    if shift == "standard":
        # one model, fitted without the test point (row n of the LOO fits: constant in y)
        mu = loo.c[n, :n1]
        log_z = _log_normaliser(c_pool[n : n + 1], a_pool[n : n + 1], lam, grid[:1])[0, 0]
        logw = lam * mu - log_z - np.log(ptrain)
        return np.broadcast_to(logw[:, None], (n1, grid.size)).copy()
    c_own, a_own = loo.at_own_point()
    log_z = _log_normaliser(c_pool, a_pool, lam, grid)
    return lam * (c_own[:, None] + grid[None, :] * a_own[:, None]) - log_z - np.log(ptrain)[:, None]


def set_from_scores(scores: np.ndarray, logw: np.ndarray, confidence_level: float) -> np.ndarray:
    r"""Membership per candidate: :math:`\sum_{i \le n} p_i 1\{S_i < S_{n+1}\} < c` (mass at :math:`+\infty` for the test).

    Equivalent to :math:`S_{n+1} \le` the weighted level-:math:`c` quantile of
    :math:`\sum_i p_i \delta_{S_i} + p_{n+1}\delta_{+\infty}` (the mass strictly below
    :math:`S_{n+1}` is what decides).
    """
    below = (scores[:-1] < scores[-1][None, :]) * _normalised(logw)[:-1]
    return below.sum(axis=0) < confidence_level


def _normalised(logw: np.ndarray) -> np.ndarray:
    r"""The weights :math:`p_i = w_i / \sum_j w_j` per candidate (column) from log-weights, shifted by the
    column maximum first so no exponential overflows (eq. 6's normalisation, feedback and standard shift alike)."""
    w = np.exp(logw - logw.max(axis=0, keepdims=True))
    return w / w.sum(axis=0, keepdims=True)


def _logsumexp(z: np.ndarray) -> float:
    r""":math:`\log \sum_u e^{z_u}`, shifted by the maximum (the design density's normaliser :math:`\log Z`)."""
    return z.max() + np.log(np.exp(z - z.max()).sum())


def _conformal_set(
    grid: np.ndarray, scores: np.ndarray, logw: np.ndarray, confidence_level: float, shift: str
) -> ConformalSet:
    """The set, its scores and its normalised weights from the augmented scores and log-weights."""
    in_set = set_from_scores(scores, logw, confidence_level)
    return ConformalSet(grid=grid, in_set=in_set, scores=scores, weights=_normalised(logw), shift=shift)


def feedback_conformal_set(
    X: ArrayLike,
    y: ArrayLike,
    x_test: ArrayLike,
    *,
    smoother: Smoother,
    lam: float,
    grid: ArrayLike,
    pool: ArrayLike | None = None,
    confidence_level: float = 0.9,
    shift: str = "feedback",
    train_density: Density | None = None,
    on_outside: str = "warn",
) -> ConformalSet:
    r"""Weighted full-conformal set of one designed input, by closed-form leave-one-out updates.

    Parameters
    ----------
    X : array_like, shape (n, p)
        Training inputs (features).
    y : array_like, shape (n,)
        Training labels.
    x_test : array_like, shape (p,)
        The designed test input.
    smoother : RidgeSmoother or KernelRidgeSmoother
        The model (its fits are linear in the labels).
    lam : float
        Inverse temperature :math:`\lambda` of the design density :math:`\propto \exp(\lambda\hat\mu(x))`.
    grid : array_like, shape (k,)
        Candidate labels, strictly increasing.
    pool : array_like, shape (m, p)
        The design density's support (required unless ``lam == 0`` or ``shift="none"``).
    confidence_level : float
        :math:`1 - \alpha`.
    shift : {"feedback", "standard", "none"}
        Weights recomputed per candidate label (Fannjiang et al.), from the model fitted without
        the test point (standard covariate shift), or none (exchangeable full conformal).
    train_density : callable or array_like, optional
        :math:`p_X` at the ``n + 1`` augmented inputs (default: constant, e.g. uniform on the pool).
    on_outside : {"warn", "raise", "ignore"}
        What to do when the grid does not cover the training labels' range.

    Returns
    -------
    ConformalSet

    References
    ----------
    Fannjiang, C., Bates, S., Angelopoulos, A. N., Listgarten, J. and Jordan, M. I. (2022).
    Conformal prediction under feedback covariate shift for biomolecular design. PNAS 119(43),
    eq. 3, 6 and Theorem 1.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.calibrators.conformal.feedback import RidgeSmoother, feedback_conformal_set
    >>> rng = np.random.default_rng(0)
    >>> pool = rng.normal(size=(200, 3))
    >>> beta = np.array([1.0, -0.5, 0.2])
    >>> X = pool[:40]; y = X @ beta + 0.1 * rng.normal(size=40)
    >>> cs = feedback_conformal_set(X, y, pool[150], smoother=RidgeSmoother(penalty=1.0), lam=2.0,
    ...                             grid=np.linspace(-5, 5, 201), pool=pool)
    >>> lo, hi = cs.interval
    >>> bool(lo < pool[150] @ beta < hi)
    True
    """
    lam = check_lam(lam)
    shift = check_choice(shift, "shift", SHIFTS)
    confidence_level = check_probability(confidence_level, "confidence_level")
    X, y, x_test, pool, ptrain = _check_inputs(X, y, x_test, pool, train_density)
    grid = check_grid(grid, y, on_outside=on_outside)
    if pool is None and shift != "none" and lam != 0.0:
        raise ValueError(
            f"pool is required for shift={shift!r} with lam={lam:g}: the design density "
            "exp(lam * mu(x)) / Z is normalised over it. Pass the design pool (m, p)."
        )
    loo = loo_affine(smoother, X, y, x_test, pool)
    return conformal_set_from_loo(loo, y, grid, lam=lam, shift=shift, ptrain=ptrain, confidence_level=confidence_level)


def conformal_set_from_loo(
    loo: AffineLOO,
    y: np.ndarray,
    grid: np.ndarray,
    *,
    lam: float,
    shift: str = "feedback",
    ptrain: np.ndarray | None = None,
    confidence_level: float = 0.9,
    design: AffineLOO | None = None,
) -> ConformalSet:
    r"""The set from leave-one-out fits already computed (the NumPy layer of :func:`feedback_conformal_set`).

    Parameters
    ----------
    loo : AffineLOO
        The model's leave-one-out fits (scores).
    y : ndarray, shape (n,)
    grid : ndarray, shape (k,)
    lam : float
    shift : {"feedback", "standard", "none"}
    ptrain : ndarray, shape (n + 1,), optional
        Training density at the augmented inputs (default constant).
    confidence_level : float
    design : AffineLOO, optional
        The design density's exponent per left-out model, :math:`\log \tilde p_{-i,y}(v) =
        \lambda (c_{iv} + y a_{iv}) - \log Z_{-i}(y)`; default ``loo`` itself (the density
        :math:`\propto \exp(\lambda\hat\mu)`). The BO loop passes the lower confidence bound
        :math:`-(\hat\mu_{-i,y} - \kappa \hat\sigma_{-i})`, whose standard deviation does not
        depend on the label (:mod:`calibprob.bo.conformal`).

    Returns
    -------
    ConformalSet
    """
    n = loo.n
    y = np.asarray(y, float)
    grid = np.asarray(grid, float)
    ptrain = np.ones(n + 1) if ptrain is None else np.asarray(ptrain, float)
    c_own, a_own = loo.at_own_point()
    scores = np.empty((n + 1, grid.size))
    scores[:n] = np.abs(y[:, None] - (c_own[:n, None] + grid[None, :] * a_own[:n, None]))
    scores[n] = np.abs(grid - c_own[n])
    logw = _weights(loo if design is None else design, lam, grid, shift, ptrain)
    return _conformal_set(grid, scores, logw, confidence_level, shift)


def refit_conformal_set(
    X: ArrayLike,
    y: ArrayLike,
    x_test: ArrayLike,
    *,
    smoother: Smoother,
    lam: float,
    grid: ArrayLike,
    pool: ArrayLike | None = None,
    confidence_level: float = 0.9,
    shift: str = "feedback",
    train_density: Density | None = None,
    on_outside: str = "warn",
) -> ConformalSet:
    r"""The same set as :func:`feedback_conformal_set` by refitting the model :math:`(n+1)|\mathcal Y|` times.

    For every candidate label and every point :math:`i` of the augmented data the model is
    refitted on the other :math:`n` points and evaluated at :math:`X_i` and on the pool -- the
    authors' black-box path (``calibrate.ConformalFeedbackCovariateShift``). It is the
    reference of the closed form (tests) and the baseline of the speed benchmark
    (``benchmarks/bench_feedback_shift.py``). Same parameters and result as
    :func:`feedback_conformal_set`.

    References
    ----------
    Fannjiang, C., Bates, S., Angelopoulos, A. N., Listgarten, J. and Jordan, M. I. (2022).
    Conformal prediction under feedback covariate shift for biomolecular design. PNAS 119(43).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.calibrators.conformal.feedback import RidgeSmoother, refit_conformal_set
    >>> rng = np.random.default_rng(0)
    >>> pool = rng.normal(size=(50, 2)); X = pool[:10]; y = X.sum(axis=1)
    >>> cs = refit_conformal_set(X, y, pool[40], smoother=RidgeSmoother(), lam=1.0,
    ...                          grid=np.linspace(-6, 6, 25), pool=pool)
    >>> cs.in_set.shape
    (25,)
    """
    lam = check_lam(lam)
    shift = check_choice(shift, "shift", SHIFTS)
    confidence_level = check_probability(confidence_level, "confidence_level")
    X, y, x_test, pool, ptrain = _check_inputs(X, y, x_test, pool, train_density)
    grid = check_grid(grid, y, on_outside=on_outside)
    n = X.shape[0]
    S = np.vstack([X, x_test[None, :]])
    use_pool = pool is not None and shift != "none" and lam != 0.0
    scores = np.empty((n + 1, grid.size))
    logw = np.empty((n + 1, grid.size))
    # the model fitted on the training data alone: the test score and the standard weights
    E = np.vstack([S, pool]) if use_pool and pool is not None else S
    mu_train = smoother.fit_predict(X, y, E)
    for k, yk in enumerate(grid):
        y_aug = np.append(y, yk)
        for i in range(n + 1):
            keep = np.arange(n + 1) != i
            if i == n:
                pred = mu_train
            else:
                pred = smoother.fit_predict(S[keep], y_aug[keep], E)
            scores[i, k] = abs(y_aug[i] - pred[i])
            if shift == "feedback" and use_pool:
                logw[i, k] = lam * pred[i] - _logsumexp(lam * pred[n + 1 :]) - np.log(ptrain[i])
    if shift == "standard" and use_pool:
        log_z = _logsumexp(lam * mu_train[n + 1 :])
        logw[:] = (lam * mu_train[: n + 1] - log_z - np.log(ptrain))[:, None]
    elif not use_pool:
        logw[:] = -np.log(ptrain)[:, None]
    return _conformal_set(grid, scores, logw, confidence_level, shift)
