r"""Sparse variational GP regression (Titsias' VFE / collapsed bound).

With :math:`m` inducing inputs :math:`Z` and
:math:`Q_{nn} = K_{nm}K_{mm}^{-1}K_{mn}`, the hyperparameters maximise the
collapsed evidence lower bound

.. math::

    \mathcal F(\theta) = \log \mathcal N\big(y \mid \hat m 1,\; Q_{nn} + \sigma_n^2 I\big)
        - \frac{1}{2\sigma_n^2} \operatorname{tr}(K_{nn} - Q_{nn})

(a lower bound on the exact log marginal likelihood, equal to it when
:math:`Z = X`), in :math:`O(nm^2)` per evaluation. As for the exact GP it is a
``pm.Potential`` in a PyMC model compiled once (the inducing inputs are
``pm.Data``) and maximised by L-BFGS-B from several seeded starts. The
inducing inputs are k-means centres of the (column-standardised) inputs,
seeded, and kept fixed during the optimisation.

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

import warnings

import numpy as np
import scipy.linalg
from scipy.cluster.vq import kmeans2

from calibprob._validation import check_array, check_int
from calibprob.gp import _objective
from calibprob.gp.exact import _GPBase

__all__ = ["SparseGaussianProcessRegressor", "kmeans_inducing_points"]


def kmeans_inducing_points(X, n_inducing: int, *, random_state=None) -> np.ndarray:
    """Seeded k-means (k-means++ start) centres of column-standardised ``X``.

    Parameters
    ----------
    X : array_like, shape (n, d)
    n_inducing : int
        Number of centres; all rows of ``X`` are returned if ``n <= n_inducing``.
    random_state : int, numpy Generator or None

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
    >>> from calibprob.gp import kmeans_inducing_points
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
    kernel, p, mean, objective, theta, optimize, n_restarts, optimizer, adam_steps, learning_rate, random_state, compile_mode
        As in :class:`calibprob.gp.GaussianProcessRegressor`.
    noise : bool, default True
        Must be ``True``: the VFE bound needs a noise variance (use the exact
        GP for interpolation).
    nugget : float, default 1e-8
        Lower bound of the noise variance relative to the data scale.
    jitter : float, default 1e-6
        Added to the diagonal of :math:`K_{mm}`, relative to the kernel variance.
    inducing_points : array_like, shape (m, d), optional
        Fixed inducing inputs instead of k-means.

    Attributes
    ----------
    inducing_points_ : ndarray, shape (m, d)
    theta_, mean_, log_marginal_likelihood_value_ (the VFE bound), fit_info_,
    X_train_, y_train_, n_features_in_
        As in :class:`calibprob.gp.GaussianProcessRegressor`.

    References
    ----------
    Titsias, M. (2009). Variational learning of inducing variables in sparse
    Gaussian processes. AISTATS.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.gp import SparseGaussianProcessRegressor
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
        inducing_points=None,
        random_state=None,
        compile_mode=None,
    ):
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

    def _prepare(self, X, y, rng) -> None:
        if self.inducing_points is not None:
            Z = check_array(self.inducing_points, "inducing_points", ndim=2)
            if Z.shape[1] != X.shape[1]:
                raise ValueError(
                    f"inducing_points has {Z.shape[1]} columns but X has {X.shape[1]}. "
                    "Pass inducing inputs in the same feature space as X."
                )
        else:
            Z = kmeans_inducing_points(X, int(self.n_inducing), random_state=rng)
        self.inducing_points_ = Z

    def _data(self) -> dict:
        return {"X": self.X_train_, "y": (self.y_train_ - self._y_shift) / self._y_scale, "Z": self.inducing_points_}

    def _factorize(self, theta: dict) -> dict:
        X, y, Z = self.X_train_, self._y_centred(), self.inducing_points_
        n, m = y.shape[0], Z.shape[0]
        var, noise = theta["variance"], theta["noise"]
        sn = np.sqrt(noise)
        Kmm = self._k(Z, None, theta)
        Kmm[np.diag_indices(m)] += self.jitter * var
        Lm = scipy.linalg.cholesky(Kmm, lower=True, check_finite=False)
        Kmn = self._k(Z, X, theta)
        A = scipy.linalg.solve_triangular(Lm, Kmn, lower=True, check_finite=False) / sn
        AAT = A @ A.T
        B = AAT.copy()
        B[np.diag_indices(m)] += 1.0
        LB = scipy.linalg.cholesky(B, lower=True, check_finite=False)
        solve = lambda v: scipy.linalg.solve_triangular(LB, v, lower=True, check_finite=False)  # noqa: E731
        ca = solve(A @ y)
        qyy = (y @ y - ca @ ca) / noise
        logdet = n * np.log(noise) + 2.0 * np.sum(np.log(np.diag(LB)))
        trace = n * var / noise - np.trace(AAT)
        if self.mean == "constant":
            cb = solve(A.sum(axis=1))
            qy1 = (y.sum() - ca @ cb) / noise
            q11 = (n - cb @ cb) / noise
            mhat = float(qy1 / q11)
        else:
            cb, qy1, q11, mhat = None, None, None, 0.0
        obj = (
            _objective.assemble(qyy, qy1, q11, logdet, n, mean=self.mean, objective=self.objective, xp=np) - 0.5 * trace
        )
        c = (ca - mhat * cb) / sn if cb is not None else ca / sn
        return {
            "theta": theta,
            "Lm": Lm,
            "LB": LB,
            "c": c,
            "cb": cb,
            "q11": q11,
            "m": self._y_shift + mhat,
            "objective": float(obj),
        }

    def _predict_block(self, state, Xs):
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
