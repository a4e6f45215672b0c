r"""Split (inductive) conformal prediction for any base regressor.

Fit the base on a training set, score a disjoint calibration set, and invert
the finite-sample quantile of the calibration scores at every test point.

With :math:`n` calibration scores :math:`R_1, \dots, R_n`, a symmetric score
and confidence level :math:`c`, the interval at :math:`x` is

.. math::

    \hat C_c(x) = \{y : R(x, y) \le R_{(\lceil c(n+1) \rceil)}\}
              = \bigl[\mu(x) - R_{(k)} s(x),\ \mu(x) + R_{(k)} s(x)\bigr],
    \qquad k = \lceil c\,(n+1) \rceil,

(:math:`R_{(k)}` the :math:`k`-th smallest score, :math:`s(x)` the score's
normaliser). For a signed score the two ends use the two tails separately,

.. math::

    \bigl[\mu(x) + R_{(\lfloor \alpha(n+1)/2 \rfloor)} s(x),\
          \mu(x) + R_{(\lceil (1-\alpha/2)(n+1) \rceil)} s(x)\bigr],
    \qquad \alpha = 1 - c .

For exchangeable calibration and test data, with continuous scores,

.. math::

    c \;\le\; P\bigl(Y \in \hat C_c(X)\bigr) = \frac{\lceil c(n+1) \rceil}{n+1}
      \;<\; c + \frac{1}{n+1}

(Lei et al. 2018, Thm. 2.2), which ``tests/calibrators/conformal/test_split.py`` checks
over many seeded draws.

References
----------
Vovk, V., Gammerman, A. and Shafer, G. (2005). *Algorithmic Learning in a
Random World*, Springer.
Lei, J. et al. (2018). Distribution-free predictive inference for regression.
JASA 113(523), 1094–1111.
Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
prediction, §2.3 and eq. (9).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.estimator import BaseEstimator, check_is_fitted, check_not_predictive, clone
from calibprob._core.tables import adopt_columns, check_columns, record_columns
from calibprob._core.validation import check_array
from calibprob.calibrators.conformal._intervals import (
    as_regressor,
    check_Xy,
    interval_dataset,
    predict_mean_std_chunked,
    resolve_levels,
)
from calibprob.calibrators.conformal.scores import Score, get_score
from calibprob.calibrators.conformal.split_calibrator import (
    SplitConformalCalibrator,
    conformal_thresholds,
    refuse_weighted_quantiles,
    split_intervals,
    split_quantiles,
    split_scores,
    split_test_weights,
    weighted_prediction,
    weighted_split_scores,
)
from calibprob.calibrators.grouping.mondrian import Mondrian, predict_with_groups
from calibprob.predictive import from_quantiles, normal
from calibprob.weights import GivenWeights, Weights, resolve

__all__ = ["SplitConformalRegressor", "conformal_thresholds"]


class SplitConformalRegressor(BaseEstimator):
    r"""Split conformal intervals (and a conformal quantile function) around any base.

    Parameters
    ----------
    estimator : base regressor or callable
        Follows the base protocol (``fit``, ``predict_mean_std``), or is a
        callable ``fit_predict(X_train, y_train, X_new) -> mu | (mu, sigma)``.
    score : {"absolute", "normalized", "signed"} or Score, default "absolute"
        :math:`|y-\mu|`, :math:`|y-\mu|/\max(\epsilon,\sigma^\beta)` (Pion
        eq. 9) or :math:`(y-\mu)/\max(\epsilon,\sigma^\beta)` (eq. 13).
    beta, eps : float
        Parameters of the normalised scores.
    confidence_level : float or sequence of float, default 0.9
        Default level(s) of :meth:`predict_interval`; checked at
        :meth:`calibrate` against the number of calibration points.
    prefit : bool, default False
        ``True``: ``estimator`` is already fitted; skip :meth:`fit` and call
        :meth:`calibrate` directly.
    chunk_size : int, optional
        Test points per call to the base's ``predict_mean_std`` (default:
        about 32 MB of the base's ``n_train x chunk`` temporaries).

    Attributes
    ----------
    estimator_ : the fitted base
    scores_ : ndarray, shape (n_cal,)
        Sorted calibration scores.
    n_calibration_ : int

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(size=(300, 1)); y = 2 * X[:, 0] + rng.normal(size=300)
    >>> def ols(Xt, yt, Xn):
    ...     A = np.c_[np.ones(len(Xt)), Xt]
    ...     return np.c_[np.ones(len(Xn)), Xn] @ np.linalg.lstsq(A, yt, rcond=None)[0]
    >>> scp = SplitConformalRegressor(estimator=ols).fit(X[:100], y[:100]).calibrate(X[100:], y[100:])
    >>> iv = scp.predict_interval(X[:3], confidence_level=0.9)
    >>> sorted(iv.data_vars)
    ['lower', 'upper']

    References
    ----------
    Lei et al. (2018); Pion & Vazquez (2024) §2.3, eq. (9), (13).
    """

    # None between fit (unprefit) and calibrate
    scores_: np.ndarray | None
    calibration_weights_: np.ndarray | None = None
    weights_ = None
    # a calibprob.weights object (may hold a fitted classifier) is not written by save(); pass weights= after load
    _transient_attrs: tuple[str, ...] = ("weights_",)

    def __init__(
        self,
        *,
        estimator: Any = None,
        score: str | Score = "absolute",
        beta: float = 1.0,
        eps: float = 0.0,
        confidence_level: ArrayLike = 0.9,
        prefit: bool = False,
        chunk_size: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.score = score
        self.beta = beta
        self.eps = eps
        self.confidence_level = confidence_level
        self.prefit = prefit
        self.chunk_size = chunk_size

    # -- lifecycle ----------------------------------------------------------
    def _score(self) -> Score:
        return get_score(self.score, beta=self.beta, eps=self.eps)

    def fit(self, X: ArrayLike, y: ArrayLike, *, groups: ArrayLike | None = None) -> SplitConformalRegressor:
        """Fit a clone of the base on the training data; returns ``self``.

        Parameters
        ----------
        X : array_like, shape (n_train, d)
        y : array_like, shape (n_train,)
        groups : None
            Not used here: the model is trained on every group; Mondrian groups belong to
            :meth:`calibrate` (a value is refused with that fix).
        """
        if groups is not None:
            raise ValueError(
                "groups= belongs to calibrate(X_cal, y_cal, groups=...): fit trains the one pooled model on the "
                "proper training set, and the calibration scores are kept apart per group."
            )
        if self.prefit:
            raise ValueError(
                "prefit=True: the estimator is already fitted, so fit() must not be called. "
                "Call calibrate(X_cal, y_cal) directly, or pass prefit=False."
            )
        resolve_levels(self.confidence_level)
        self._score()
        check_not_predictive(X, self)
        record_columns(self, X)
        X, y = check_Xy(X, y)
        self.estimator_ = clone(as_regressor(self.estimator)).fit(X, y)
        self.scores_ = None
        return self

    def _as_predictive(self, X: np.ndarray, score: Score) -> xr.Dataset:
        """The base's (mu, sigma) at ``X`` as a Gaussian Dataset: what a grouped calibration scores.

        :class:`~calibprob.calibrators.conformal.SplitConformalCalibrator` reads back exactly these
        ``mu`` and ``sigma`` (the Gaussian family stores them as ``loc``/``scale``), so the
        grouped path's intervals are those of this class run on each group.
        """
        mu, sigma = predict_mean_std_chunked(
            self.estimator_, X, need_sigma=score.needs_sigma, chunk_size=self.chunk_size
        )
        return normal(mu, np.ones_like(mu) if sigma is None else sigma)

    def calibrate(
        self,
        X_cal: ArrayLike,
        y_cal: ArrayLike,
        *,
        groups: ArrayLike | None = None,
        weights: ArrayLike | Weights | None = None,
    ) -> SplitConformalRegressor:
        r"""Score the calibration set; returns ``self``.

        Parameters
        ----------
        X_cal : array_like, shape (n_cal, d)
        y_cal : array_like, shape (n_cal,)
        groups : array_like or xarray.DataArray, optional
            One group label per calibration point: Mondrian split conformal, the scores of
            each group kept apart (:class:`calibprob.Mondrian`, stored as ``mondrian_``;
            :meth:`fit` trains the one pooled model and takes no groups).
        weights : array_like, pandas.Series or calibprob.weights.Weights, optional
            One weight per calibration point, or a :mod:`calibprob.weights` object evaluated at
            ``X_cal`` (a :class:`~calibprob.weights.LikelihoodRatio` fitted on ``X_cal`` keeps its
            cross-fitted ratio there; a :class:`~calibprob.weights.DensityRatio` is evaluated):
            weighted split conformal under covariate shift (Tibshirani et al. 2019), the test
            points' weights given to :meth:`predict_interval`. A Series with an index is aligned
            to ``X_cal``'s index. With ``groups``, the weights act *within* each group (as
            :class:`calibprob.Mondrian` does): a group's threshold is the weighted quantile of its
            own scores and weights, the test point's mass at :math:`+\infty`.

        Raises
        ------
        ValueError
            Too few calibration points for ``confidence_level`` (the message
            says how many), a normalised score with a base without σ, σ <= 0.
        """
        levels, _ = resolve_levels(self.confidence_level)
        score = self._score()
        if self.prefit:
            self.estimator_ = as_regressor(self.estimator)
        else:
            check_is_fitted(self, "estimator_", method="fit")
        check_not_predictive(X_cal, self, "X_cal")
        # a prefit model is first seen here: its own columns, else X_cal's; otherwise fit's
        if self.prefit and not adopt_columns(self, self.estimator_):
            record_columns(self, X_cal)
        check_columns(self, X_cal, "X_cal")
        rows = getattr(X_cal, "index", None)
        X_cal, y_cal = check_Xy(X_cal, y_cal, X_name="X_cal", y_name="y_cal")
        self.mondrian_ = None
        w = None if weights is None else resolve(weights, y_cal.size, X=X_cal, obs=rows, side="calibration")
        self.calibration_weights_, self.weights_ = None, weights if isinstance(weights, Weights) else None
        if groups is not None:
            inner = SplitConformalCalibrator(score=score, confidence_level=self.confidence_level)
            # weights within groups (Mondrian's rule): the numbers at X_cal, carrying the object's on_small choice
            within = GivenWeights(cast(np.ndarray, w), on_small=weights.on_small) if isinstance(weights, Weights) else w
            self.mondrian_ = Mondrian(inner).fit(
                self._as_predictive(X_cal, score), y_cal, groups=groups, weights=within
            )
            self.scores_, self.n_calibration_, self.score_ = np.zeros(0), int(y_cal.size), score
            return self
        mu, sigma = predict_mean_std_chunked(
            self.estimator_, X_cal, need_sigma=score.needs_sigma, chunk_size=self.chunk_size
        )
        if w is None:
            R = split_scores(score, y_cal, mu, sigma, levels)
        else:
            R, self.calibration_weights_ = weighted_split_scores(score, y_cal, mu, sigma, levels, w)
        self.scores_ = R
        self.n_calibration_ = R.size
        self.score_ = score
        return self

    # -- prediction ---------------------------------------------------------
    def _mu_scale(self, X: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        check_is_fitted(self, "scores_", method="calibrate")
        check_not_predictive(X, self)
        check_columns(self, X)
        X = check_array(X, "X", ndim=2)
        mu, sigma = predict_mean_std_chunked(
            self.estimator_, X, need_sigma=self.score_.needs_sigma, chunk_size=self.chunk_size
        )
        scale = np.broadcast_to(np.asarray(self.score_.scale(sigma), float), mu.shape)
        return mu, scale

    def _grouped(self, X: ArrayLike, groups: ArrayLike | None) -> tuple[Mondrian, xr.Dataset] | None:
        """``(Mondrian, predictive Dataset at X)`` after a grouped :meth:`calibrate`, else None."""
        check_is_fitted(self, "scores_", method="calibrate")
        mondrian = predict_with_groups(self, groups)
        if mondrian is None:
            return None
        check_not_predictive(X, self)
        check_columns(self, X)
        return mondrian, self._as_predictive(check_array(X, "X", ndim=2), self.score_)

    def predict_interval(
        self,
        X: ArrayLike,
        confidence_level: ArrayLike | None = None,
        *,
        groups: ArrayLike | None = None,
        weights: ArrayLike | Weights | None = None,
    ) -> xr.Dataset:
        r"""Conformal intervals at one or several confidence levels.

        Parameters
        ----------
        X : array_like, shape (n, d)
        confidence_level : float or sequence, optional
            Defaults to the constructor's ``confidence_level``.
        groups : array_like or xarray.DataArray, optional
            One label per row after a grouped :meth:`calibrate`; a group below the minimum
            size gets :math:`(-\infty, \infty)`.
        weights : array_like, pandas.Series or calibprob.weights.Weights, optional
            After a weighted :meth:`calibrate`: one positive weight per row of ``X``, or a
            :mod:`calibprob.weights` object evaluated at ``X`` (default: the object given to
            :meth:`calibrate`). Row :math:`j` gets the weighted conformal quantile with the mass
            :math:`t_j/(\sum_i w_i + t_j)` at :math:`+\infty` (Tibshirani et al. 2019;
            :meth:`SplitConformalCalibrator.predict_interval`); the weights' diagnostics are kept
            as ``weight_diagnostics_``, and a level they cannot support is refused, naming the
            attainable one.

        Returns
        -------
        xarray.Dataset
            ``lower``, ``upper`` with dims (obs, confidence_level); a scalar
            level drops the ``confidence_level`` dimension.
        """
        grouped = self._grouped(X, groups)
        if grouped is not None:
            mondrian, pred = grouped
            source = weights if weights is not None else self.weights_
            if source is not None:  # a weights object is evaluated at X here (the Mondrian sees no inputs)
                source = resolve(source, pred.sizes["obs"], X=X, obs=getattr(X, "index", None), side="test")
            out = mondrian.predict_interval(pred, confidence_level, groups=groups, weights=source)
            return out.assign_coords(obs=np.arange(pred.sizes["obs"]))
        levels, scalar = resolve_levels(self.confidence_level if confidence_level is None else confidence_level)
        rows = getattr(X, "index", None)
        mu, scale = self._mu_scale(X)
        attrs = {"n_calibration": self.n_calibration_}
        test = split_test_weights(self, weights, mu.size, X=X, obs=rows)
        if test is None:  # _mu_scale checked the calibration: scores_ is the array
            lower, upper = split_intervals(self.score_, cast(np.ndarray, self.scores_), mu, scale, levels)
        else:
            lower, upper = weighted_prediction(self, levels, mu, scale, test, attrs)
        return interval_dataset(lower, upper, levels, scalar, method=f"split-conformal-{self.score_.name}", attrs=attrs)

    def predict(self, X: ArrayLike, *, levels: ArrayLike | None = None, groups: ArrayLike | None = None) -> xr.Dataset:
        r"""The conformal quantile function as a predictive Dataset.

        The quantile at level :math:`p` is the calibration score at the
        continuous rank :math:`p(n+1)` (signed score) or
        :math:`|2p-1|(n+1)` (symmetric score, mirrored around :math:`\mu`),
        linearly interpolated between order statistics, mapped through the
        score's inverse; see
        ``calibprob.calibrators.conformal.predictive_system.conformal_quantile_function``.
        Its central interval at :math:`c` equals :meth:`predict_interval`
        whenever :math:`c(n+1)` is an integer and lies between the adjacent
        ranks otherwise.

        Parameters
        ----------
        X : array_like, shape (n, d)
        levels : array_like, optional
            Default: :data:`calibprob.predictive.DEFAULT_LEVELS` restricted to
            the levels the calibration set can resolve.
        groups : array_like or xarray.DataArray, optional
            One label per row after a grouped :meth:`calibrate`.

        Returns
        -------
        xarray.Dataset
            The predictive-distribution contract (``family="quantile"``).
        """
        grouped = self._grouped(X, groups)
        if grouped is not None:
            mondrian, pred = grouped
            refuse_weighted_quantiles(self, weights=True if mondrian.weighted_ else None)
            return mondrian.predict(pred, levels=levels, groups=groups)
        refuse_weighted_quantiles(self)
        mu, scale = self._mu_scale(X)
        # _mu_scale checked the calibration: scores_ is the array
        q, levels = split_quantiles(self.score_, cast(np.ndarray, self.scores_), mu, scale, levels)
        ds = from_quantiles(q, levels, method=f"split-conformal-{self.score_.name}")
        ds.attrs["n_calibration"] = self.n_calibration_
        return ds
