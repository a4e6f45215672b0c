r"""The jackknife+ from one posterior: PSIS-LOO in place of the :math:`n` refits.

Barber et al.'s jackknife+ needs :math:`n` leave-one-out fits. A Bayesian model already
holds them approximately: point :math:`i`'s Pareto-smoothed LOO weights
:math:`\tilde w_{s,i}` (:func:`calibprob.predictive.loo.loo_weights`) turn the posterior
draws into draws of the posterior without point :math:`i` (Vehtari et al. 2017). With
:math:`\tilde y_{s,i}` the posterior-predictive draws at :math:`x_i` and
:math:`\tilde y_s(x)` those at a new point (the same posterior draw :math:`s`):

.. math::

    \hat\mu_{-i} = \sum_s \tilde w_{s,i}\, \tilde y_{s,i}, \qquad
    \hat\mu_{-i}(x) = \sum_s \tilde w_{s,i}\, \tilde y_s(x), \qquad
    \hat\sigma^2_{-i}(\cdot) = \frac{\sum_s \tilde w_{s,i} (\tilde y_s(\cdot) - \hat\mu_{-i}(\cdot))^2}
                                     {1 - \sum_s \tilde w_{s,i}^2}.

Scores (``score=``): ``"absolute"`` :math:`R_i = |y_i - \hat\mu_{-i}|` with
:math:`s_{-i}(x) = 1`, or ``"normalized"`` :math:`R_i = |y_i - \hat\mu_{-i}|/\hat\sigma_{-i}`
with :math:`s_{-i}(x) = \hat\sigma_{-i}(x)`, the spread of the *same* leave-one-out
posterior at the new point. With :math:`\alpha = 1 - c` the interval is Barber et al.'s
(eq. 6), by exact order statistics (:func:`calibprob.calibrators.conformal.jackknife.jackknife_plus_bounds`):

* lower end: the :math:`\lfloor \alpha(n+1) \rfloor`-th smallest of
  :math:`\hat\mu_{-i}(x) - R_i\, s_{-i}(x)`;
* upper end: the :math:`\lceil (1-\alpha)(n+1) \rceil`-th smallest of
  :math:`\hat\mu_{-i}(x) + R_i\, s_{-i}(x)`.

What is guaranteed
------------------
With exact leave-one-out posteriors the construction is the jackknife+ of a symmetric
algorithm (the Bayesian posterior mean, and for ``"normalized"`` the posterior sd, of
the data without point :math:`i`), so for exchangeable data the coverage is at least
:math:`1 - 2\alpha = 2c - 1` (Barber et al. 2021, Thm. 1), whether or not the model is
right. Here the leave-one-out posteriors are importance-sampled: the guarantee holds up
to the Monte Carlo and PSIS error, which is small where every :math:`\hat k_i` is below
:math:`\min(1 - 1/\log_{10} S, 0.7)` and unknown above it (the points are warned about
and their :math:`\hat k` stored in ``pareto_k_``).

Differences from R's ``conformalbayes::loo_conformal`` (McCartan): exact
:math:`\lfloor\alpha(n+1)\rfloor` / :math:`\lceil(1-\alpha)(n+1)\rceil` order statistics
instead of type-7 interpolated quantiles (which can fall below the rank the theorem
needs), and the normalised score's test-point scale is the leave-one-out posterior's
:math:`\hat\sigma_{-i}(x)` rather than the full posterior's :math:`s(x)` — the symmetric
construction the theorem is about.

Which family
------------
It needs the model, not only a predictive distribution: the draws at a new point must
come from the *same* posterior draws the weights refer to. It is therefore a
*model-aware* calibrator (``estimator=`` a fitted calibprob PyMC base, ``fit(X, y)``,
``predict(X)``). A user's own PyMC model enters through :meth:`LOOJackknifePlus.fit_tree`
(its idata) and :meth:`LOOJackknifePlus.predict_draws` (its posterior-predictive draws
at new points, ``pm.sample_posterior_predictive(idata, predictions=True)``).

References
----------
Barber, R. F., Candès, E. J., Ramdas, A. and Tibshirani, R. J. (2021). Predictive
inference with the jackknife+. Annals of Statistics 49(1), 486–507.

Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model evaluation using
leave-one-out cross-validation and WAIC. Statistics and Computing 27(5).

McCartan, C. (2022). conformalbayes: Jackknife(+) predictive intervals for Bayesian
models (R package 0.1.3).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.dims import MCMC_DIMS, SAMPLE_DIMS
from calibprob._core.estimator import BaseEstimator, check_is_fitted, check_not_predictive, clone
from calibprob._core.tables import adopt_columns, check_columns, record_columns
from calibprob._core.trees import check_tree
from calibprob._core.validation import check_array, check_choice, check_targets
from calibprob.calibrators.conformal._intervals import (
    IntervalPredictor,
    check_enough_points,
    default_chunk_size,
    interval_dataset,
    iter_chunks,
    level_form,
    resolve_levels,
)
from calibprob.calibrators.conformal.jackknife import jackknife_plus_bounds
from calibprob.calibrators.conformal.scores import get_score
from calibprob.predictive._draws import _draws_matrix, _pick_variable, _select_draws, _tree_groups
from calibprob.predictive.loo import _warn_high_k, loo_weights

__all__ = ["LOOJackknifePlus", "loo_scores"]

_SCORES = ("absolute", "normalized")


def _weighted_moments(
    W: np.ndarray, Y: np.ndarray, denom: np.ndarray, need_sd: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """``(n, m)`` weighted means (and sds) of the columns of ``Y`` (S, m) under each column of ``W`` (S, n)."""
    center = Y.mean(axis=0)
    Yc = Y - center  # centred first: the variance as E[Y^2] - E[Y]^2 would cancel catastrophically
    M = W.T @ Yc
    if not need_sd:
        return M + center, None
    V = (W.T @ (Yc * Yc) - M * M) / denom[:, None]
    return M + center, np.sqrt(np.maximum(V, 0.0))


def loo_scores(
    weights: np.ndarray, y: ArrayLike, draws_train: np.ndarray, *, score: str = "absolute"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""LOO means, standard deviations and jackknife+ scores of the training points.

    Parameters
    ----------
    weights : ndarray, shape (S, n)
        Normalised LOO weights :math:`\tilde w_{s,i}` (columns sum to one).
    y : ndarray, shape (n,)
    draws_train : ndarray, shape (S, n)
        Posterior-predictive draws :math:`\tilde y_{s,i}` at the training points.
    score : {"absolute", "normalized"}

    Returns
    -------
    mean, sd, scores : ndarray, shape (n,)
        :math:`\hat\mu_{-i}`, :math:`\hat\sigma_{-i}` and :math:`R_i` (module docstring).
    """
    check_choice(score, "score", _SCORES)
    denom = 1.0 - np.sum(weights * weights, axis=0)
    mean = np.einsum("sn,sn->n", weights, draws_train)
    var = np.einsum("sn,sn->n", weights, (draws_train - mean) ** 2) / denom
    sd = np.sqrt(var)
    if score == "normalized" and np.any(sd <= 0):
        raise ValueError(
            "score='normalized' needs a positive LOO predictive sd at every training point; "
            f"{int(np.sum(sd <= 0))} are 0 (one draw holds all the weight). Use score='absolute'."
        )
    # the score object's |y - mu| / s(sd), bit for bit the residual over the sd written out before
    R = get_score(score).score(y, mean, sd if score == "normalized" else None)
    return mean, sd, R


class LOOJackknifePlus(IntervalPredictor, BaseEstimator):
    r"""Jackknife+ intervals from one posterior, by PSIS-LOO weights (no refits).

    See ``calibprob.calibrators.conformal.loo_jackknife`` for the equations, the
    guarantee (coverage :math:`\ge 2c - 1` up to the importance-sampling error) and why
    this is a model-aware calibrator.

    Parameters
    ----------
    estimator : calibprob PyMC base, optional
        A base with ``loo_tree()`` and ``sample_predictive(X)`` on the same posterior draws
        (:class:`calibprob.PyMCLinearRegression`). Not needed with :meth:`fit_tree`.
    prefit : bool, default True
        The estimator is already fitted on the ``(X, y)`` given to :meth:`fit` (which then
        only checks that ``y`` is its training target); ``False`` fits a clone on them.
    score : {"absolute", "normalized"}, default "absolute"
    confidence_level : float or sequence of float, default 0.9
    random_state : int, optional
        Seed of the estimator's predictive draws (training and new points).
    chunk_size : int, optional
        Test points per block; default keeps the ``n x chunk`` temporaries near 32 MB.

    Attributes
    ----------
    weights_ : ndarray, shape (S, n)
        The training points' normalised PSIS-LOO weights.
    scores_ : ndarray, shape (n,)
        :math:`R_i`.
    loo_mean_, loo_std_ : ndarray, shape (n,)
        :math:`\hat\mu_{-i}`, :math:`\hat\sigma_{-i}`.
    pareto_k_ : ndarray, shape (n,)
    good_k_ : float
        :math:`\min(1 - 1/\log_{10} S, 0.7)`; points above it are warned about at fit.
    n_train_ : int

    References
    ----------
    Barber, R. F., Candès, E. J., Ramdas, A. and Tibshirani, R. J. (2021). Predictive
    inference with the jackknife+. Annals of Statistics 49(1).

    Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model evaluation
    using leave-one-out cross-validation and WAIC. Statistics and Computing 27(5).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 2)); y = X @ [1.0, -1.0] + rng.normal(size=80)
    >>> base = calibprob.PyMCLinearRegression(draws=300, tune=300, random_state=0).fit(X, y)  # doctest: +SKIP
    >>> jp = calibprob.LOOJackknifePlus(estimator=base, confidence_level=0.9).fit(X, y)  # doctest: +SKIP
    >>> jp.predict(X[:5])["upper"].shape  # doctest: +SKIP
    (5,)
    """

    def __init__(
        self,
        *,
        estimator: Any = None,
        prefit: bool = True,
        score: str = "absolute",
        confidence_level: ArrayLike = 0.9,
        random_state: int | np.random.Generator | None = None,
        chunk_size: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.prefit = prefit
        self.score = score
        self.confidence_level = confidence_level
        self.random_state = random_state
        self.chunk_size = chunk_size

    def _check_params(self) -> None:
        check_choice(self.score, "score", _SCORES)
        if not isinstance(self.prefit, bool):
            raise TypeError(f"prefit must be True or False; got {self.prefit!r}.")
        resolve_levels(self.confidence_level)

    def fit(self, X: ArrayLike, y: ArrayLike) -> LOOJackknifePlus:
        """Compute the LOO scores of the estimator's training points; returns ``self``.

        Parameters
        ----------
        X : array_like, shape (n, d)
            The training inputs (those the prefit estimator was fitted on).
        y : array_like, shape (n,)
        """
        self._check_params()
        check_not_predictive(X, self)
        if not (self.prefit and adopt_columns(self, self.estimator)):  # a prefit base's own columns
            record_columns(self, X)
        check_columns(self, X)
        est = self.estimator
        if est is None or not callable(getattr(est, "loo_tree", None)):
            raise TypeError(
                f"estimator must be a calibprob PyMC base with loo_tree() and sample_predictive(X) "
                f"(e.g. calibprob.PyMCLinearRegression); got {type(est).__name__}. For your own PyMC "
                "model use fit_tree(idata) and predict_draws(draws_new)."
            )
        Xa = check_array(X, "X", ndim=2)
        y = check_targets(y, Xa.shape[0])
        if not self.prefit:
            est = clone(est).fit(Xa, y)
        tree = est.loo_tree(random_state=self.random_state)
        y_fit = np.asarray(tree["observed_data"]["y"].values, float)
        if y_fit.shape != y.shape or not np.array_equal(y_fit, y):
            raise ValueError(
                f"prefit=True: y must be the estimator's training target ({y_fit.size} values); got "
                f"{y.size} values that differ. Pass the data it was fitted on, or prefit=False to fit it on these."
            )
        self._fit_from_tree(tree, y, var_name="y")
        self.estimator_ = est
        return self

    def fit_tree(
        self, idata: xr.DataTree, y: ArrayLike | None = None, *, var_name: str | None = None
    ) -> LOOJackknifePlus:
        """Fit from a PyMC model's idata (``log_likelihood`` and ``posterior_predictive`` at the training points).

        Parameters
        ----------
        idata : xarray.DataTree
        y : array_like, shape (n,), optional
            Default: the tree's ``observed_data[var_name]``.
        var_name : str, optional
            The observed variable; needed only when there are several.

        Returns
        -------
        self
        """
        self._check_params()
        groups = _tree_groups(idata)
        if y is None:
            if groups is None or "observed_data" not in groups:
                raise ValueError("the tree has no 'observed_data' group; pass y= (the training targets).")
            y = _pick_variable(groups["observed_data"], var_name, "group 'observed_data'").values.reshape(-1)
        self._fit_from_tree(idata, np.asarray(y), var_name=var_name)
        self.estimator_ = None
        return self

    def _fit_from_tree(self, tree: xr.DataTree, y: ArrayLike | None, *, var_name: str | None) -> None:
        lw = loo_weights(tree, var_name=var_name)
        groups = check_tree(tree, ("posterior", "log_likelihood", "posterior_predictive"), var_name=lw.var_name)
        if "posterior_predictive" not in groups:
            raise ValueError(
                "the tree has no 'posterior_predictive' group; draw it with "
                "pm.sample_posterior_predictive(idata, extend_inferencedata=True)."
            )
        draws = _pick_variable(groups["posterior_predictive"], lw.var_name, "group 'posterior_predictive'")
        if dict(draws.sizes) != dict(lw.log_weights.sizes):
            raise ValueError(
                f"posterior_predictive has sizes {dict(draws.sizes)} but log_likelihood {dict(lw.log_weights.sizes)}; "
                "the LOO weights need the same draws and training observations."
            )
        W = lw.matrix()
        Y, _, _ = _draws_matrix(draws, MCMC_DIMS, lw.obs_dim)
        y = check_targets(y, W.shape[1])
        for c in resolve_levels(self.confidence_level)[0]:
            check_enough_points(c, y.size, what="training points")
        self.loo_mean_, self.loo_std_, self.scores_ = loo_scores(W, y, Y, score=self.score)
        self.weights_ = W
        self.pareto_k_ = np.asarray(lw.pareto_k.values, float)
        self.good_k_ = lw.good_k
        self.n_train_ = int(y.size)
        self.sample_sizes_ = (int(draws.sizes["chain"]), int(draws.sizes["draw"]))
        _warn_high_k(lw)

    # predict: IntervalPredictor's (the interval family; levels n cannot resolve: unbounded)
    def _check_predict(self) -> None:
        if self.estimator_ is None:
            raise ValueError(
                "this LOOJackknifePlus was fitted from a tree (fit_tree): it has no model to draw at X. "
                "Pass the posterior-predictive draws at the new points to predict_draws(draws_new)."
            )

    def predict_interval(self, X: ArrayLike, confidence_level: ArrayLike | None = None) -> xr.Dataset:
        """Intervals at ``X`` at levels that the ``n`` scores resolve (see :meth:`predict`)."""
        check_is_fitted(self, "scores_", method="fit")
        check_columns(self, X)
        draws = self.estimator_.sample_predictive(X, random_state=self.random_state)
        return self.predict_draws(draws, confidence_level=confidence_level)

    def predict_draws(
        self,
        draws_new: xr.DataTree | xr.Dataset | xr.DataArray | ArrayLike,
        *,
        confidence_level: ArrayLike | None = None,
        var_name: str | None = None,
    ) -> xr.Dataset:
        r"""Intervals from posterior-predictive draws at new points, from the posterior the weights refer to.

        Parameters
        ----------
        draws_new : xarray.DataTree, xarray.Dataset, xarray.DataArray or ndarray
            As :func:`calibprob.from_draws` reads them (e.g. the tree of
            ``pm.sample_posterior_predictive(idata, predictions=True)``); dims (chain, draw, obs)
            or an ``(S, m)`` array, the draws in the fit's order.
        confidence_level : float or sequence, optional
        var_name : str, optional

        Returns
        -------
        xarray.Dataset
            ``lower``, ``upper`` over (obs, confidence_level); as :meth:`predict_interval`, a scalar level (or,
            none asked, a scalar constructor level) drops the dimension, kept as a scalar coordinate that
            :func:`calibprob.evaluate` reads (``calibprob.calibrators.conformal._intervals.level_form``).
        """
        check_is_fitted(self, "scores_", method="fit")
        levels, _ = resolve_levels(self.confidence_level if confidence_level is None else confidence_level)
        Y, obs = self._new_draws(draws_new, var_name)
        W, n = self.weights_, self.n_train_
        for c in levels:
            check_enough_points(c, n, what="training points")
        normalized = self.score == "normalized"
        denom = 1.0 - np.sum(W * W, axis=0)
        m = Y.shape[1]
        lower, upper = np.empty((m, levels.size)), np.empty((m, levels.size))
        for sl in iter_chunks(m, default_chunk_size(4 * n, self.chunk_size)):
            mu, sd = _weighted_moments(W, Y[:, sl], denom, normalized)
            lower[sl], upper[sl] = jackknife_plus_bounds(mu, 1.0 if sd is None else sd, self.scores_, levels)
        out = interval_dataset(lower, upper, levels, False, method=f"loo-jackknife+-{self.score}", attrs={"n_train": n})
        out = out.assign_coords(obs=obs) if obs is not None else out
        return level_form(out, confidence_level, self.confidence_level)

    def _new_draws(
        self, draws_new: xr.DataTree | xr.Dataset | xr.DataArray | ArrayLike, var_name: str | None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        S = self.weights_.shape[0]
        sel = _select_draws(draws_new, var_name, None)
        if isinstance(sel, xr.DataArray):
            sizes = tuple(int(sel.sizes.get(d, 1)) for d in MCMC_DIMS)
            if all(d in sel.dims for d in MCMC_DIMS) and sizes != tuple(self.sample_sizes_):
                raise ValueError(
                    f"draws_new has (chain, draw) = {sizes} but the LOO weights were computed on "
                    f"{tuple(self.sample_sizes_)}: pass draws from the same posterior, in the same order."
                )
            Y, obs, _ = _draws_matrix(sel, SAMPLE_DIMS, None)
        else:
            Y, obs = check_array(sel, "draws_new", ndim=2), None
        if Y.shape[0] != S:
            raise ValueError(
                f"draws_new has {Y.shape[0]} draws but the LOO weights have {S}: pass the posterior-predictive "
                "draws of the same posterior draws, in the same order."
            )
        return Y, obs
