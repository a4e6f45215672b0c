r"""Split conformal on a predictive distribution: the post-processor form.

The base model is represented only by its predictive Dataset (any member of
the contract: Gaussian, quantiles, PyMC posterior-predictive draws), so split
conformal needs no estimator and no inputs ``X``. The score of a calibration
point uses the Dataset's own mean :math:`\mu_i` and standard deviation
:math:`\sigma_i` (``pred.calib.mean()``, ``pred.calib.std()``):

.. math::

    R_i = |y_i - \mu_i| \;\text{(absolute)},\qquad
    R_i = \frac{|y_i - \mu_i|}{\max(\epsilon, \sigma_i^\beta)} \;\text{(normalized, Pion eq. 9)},\qquad
    R_i = \frac{y_i - \mu_i}{\max(\epsilon, \sigma_i^\beta)} \;\text{(signed, eq. 13)}.

With :math:`n` sorted scores and a symmetric score, the interval at
confidence :math:`c` is :math:`\mu \pm R_{(\lceil c(n+1)\rceil)}\, s(\sigma)`,
whose coverage lies in :math:`[c, c + 1/(n+1))` for exchangeable data (Lei et
al. 2018, Thm. 2.2); a signed score uses each tail's own rank. For a normal
Dataset the scores, intervals and quantiles are identical, to the last bit, to
those of :class:`~calibprob.calibrators.conformal.SplitConformalRegressor` around the base
that produced it (``prefit=True``): only the source of :math:`(\mu, \sigma)`
differs.

References
----------
Lei, J. et al. (2018). Distribution-free predictive inference for regression.
JASA 113(523), 1094–1111.
Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
prediction, §2.3, eq. (9) and (13).
Vovk, V. et al. (2020). Computationally efficient versions of conformal
predictive distributions. Neurocomputing 397 (the signed score as a predictive system).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self, cast

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.estimator import BaseEstimator, check_is_fitted, check_predictive
from calibprob._core.ranks import weighted_upper_rank
from calibprob._core.validation import check_targets
from calibprob.calibrators._weighted import equal_weights, weighted_cps_levels, weighted_cps_quantiles
from calibprob.calibrators.conformal._intervals import (
    check_enough_points,
    conformal_quantile_function,
    interval_dataset,
    lower_rank,
    resolve_levels,
    upper_rank,
    valid_levels,
)
from calibprob.calibrators.conformal.scores import Score, get_score, invert
from calibprob.calibrators.grouping.mondrian import fit_with_groups, keep_group_coord, predict_with_groups
from calibprob.predictive import from_quantiles
from calibprob.weights import Weights, check_attainable, on_small_of, resolve, resolve_test_weights

__all__ = [
    "SplitConformalCalibrator",
    "predictive_mean_std",
    "conformal_thresholds",
    "split_scores",
    "split_intervals",
    "split_quantiles",
    "weighted_split_scores",
    "weighted_split_intervals",
    "weighted_prediction",
    "split_test_weights",
    "checked_test_weights",
    "weighted_quantiles",
    "refuse_weighted_quantiles",
]


def predictive_mean_std(pred: xr.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """The Dataset's own predictive mean and standard deviation, as NumPy (the scores' μ, σ)."""
    mu = np.asarray(pred.calib.mean().values, float)
    sigma = np.asarray(pred.calib.std().values, float)
    return mu, sigma


def conformal_thresholds(
    sorted_scores: np.ndarray,
    confidence_levels: Sequence[float] | np.ndarray,
    *,
    symmetric: bool = True,
    weights: ArrayLike | None = None,
    test_weight: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Score thresholds ``(lo, hi)`` of split-conformal intervals: the split threshold rule.

    The interval at a test point is ``[mu + lo * s, mu + hi * s]`` (:meth:`Score.bounds`).

    Parameters
    ----------
    sorted_scores : ndarray, shape (n,)
        Calibration scores in increasing order.
    confidence_levels : ndarray, shape (C,)
    symmetric : bool
        ``True``: ``hi = R_(ceil(c (n+1)))`` and ``lo = -hi``.
        ``False`` (signed scores): ``lo = R_(floor(alpha/2 (n+1)))``,
        ``hi = R_(ceil((1 - alpha/2)(n+1)))``.
    weights : array_like, shape (n,), optional
        Per-point weights in the order of ``sorted_scores``: the weighted conformal quantile
        with the test point's mass ``test_weight`` at :math:`\pm\infty`
        (``calibprob._core.ranks.weighted_upper_rank``; Tibshirani et al. 2019). A level
        the finite scores do not reach gives an infinite threshold. Equal weights give the
        unweighted thresholds bit for bit.
    test_weight : float, default 1.0

    Returns
    -------
    lo, hi : ndarray, shape (C,)

    Raises
    ------
    ValueError
        Unweighted: if a rank falls outside ``1..n`` (the message says how many scores
        are needed).
    """
    R = np.asarray(sorted_scores, float)
    n = R.size
    lo = np.empty(len(confidence_levels))
    hi = np.empty(len(confidence_levels))
    if weights is not None:
        w = np.asarray(weights, float)
        if w.shape != R.shape:
            raise ValueError(
                f"weights has shape {w.shape} but there are {n} scores; pass one weight per score, in their order."
            )
        for j, c in enumerate(confidence_levels):
            q = c if symmetric else 1.0 - (1.0 - c) / 2.0
            k = weighted_upper_rank(w, q, test_weight)
            hi[j] = np.inf if k > n else R[k - 1]
            if symmetric:
                lo[j] = -hi[j]
            else:  # the lower tail: the same rule on the reversed order, the test mass at -inf
                k = weighted_upper_rank(w[::-1], q, test_weight)
                lo[j] = -np.inf if k > n else R[n - k]
        return lo, hi
    for j, c in enumerate(confidence_levels):
        if symmetric:
            check_enough_points(c, n)
            hi[j] = R[upper_rank(c, n) - 1]
            lo[j] = -hi[j]
        else:
            check_enough_points(c, n, sides=2)
            a = (1.0 - c) / 2.0
            lo[j] = R[lower_rank(a, n) - 1]
            hi[j] = R[upper_rank(1.0 - a, n) - 1]
    return lo, hi


# ---------------------------------------------------------------------------
# the split rule on (mu, sigma) arrays: what the post-processor and SplitConformalRegressor share
# ---------------------------------------------------------------------------


def split_scores(
    score: Score, y: ArrayLike, mu: ArrayLike, sigma: ArrayLike | None, levels: Sequence[float] | np.ndarray
) -> np.ndarray:
    """The sorted calibration scores, checked early against every level (the message says how many points)."""
    R = np.sort(score.score(y, mu, sigma))
    conformal_thresholds(R, levels, symmetric=score.symmetric)
    return R


def split_intervals(
    score: Score, sorted_scores: np.ndarray, mu: ArrayLike, scale: ArrayLike, levels: Sequence[float] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Interval ends ``(lower, upper)``, each (m, L): the split thresholds inverted by the score."""
    lo, hi = conformal_thresholds(sorted_scores, levels, symmetric=score.symmetric)
    return score.bounds(mu, scale, lo, hi)


def split_quantiles(
    score: Score, sorted_scores: np.ndarray, mu: ArrayLike, scale: ArrayLike, levels: ArrayLike | None
) -> tuple[np.ndarray, np.ndarray]:
    """``(quantiles (m, L), levels)`` of the conformal quantile function at the levels the scores resolve."""
    levels = valid_levels(levels, sorted_scores.size, symmetric=score.symmetric)
    return conformal_quantile_function(mu, scale, sorted_scores, levels, symmetric=score.symmetric), levels


def weighted_split_scores(
    score: Score,
    y: ArrayLike,
    mu: ArrayLike,
    sigma: ArrayLike | None,
    levels: Sequence[float] | np.ndarray,
    weights: ArrayLike,
) -> tuple[np.ndarray, np.ndarray]:
    """``(sorted scores, their weights)``: :func:`split_scores` with the weights carried into the scores' order.

    The scores are bit for bit those of :func:`split_scores` (the same values, sorted).
    """
    s = score.score(y, mu, sigma)
    order = np.argsort(s, kind="stable")
    R = s[order]
    conformal_thresholds(R, levels, symmetric=score.symmetric)  # the unweighted minimum size, checked early
    return R, np.asarray(weights, float)[order]


def weighted_split_intervals(
    score: Score,
    sorted_scores: np.ndarray,
    calibration_weights: np.ndarray,
    test_weights: np.ndarray,
    mu: ArrayLike,
    scale: ArrayLike,
    levels: Sequence[float] | np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Interval ends ``(lower, upper)``, each (m, L), of weighted split conformal (Tibshirani et al. 2019).

    At test point :math:`j` the threshold is the level-:math:`c` quantile of
    :math:`\sum_i p_{ij} \delta_{R_i} + p_{n+1,j} \delta_{+\infty}`,
    :math:`p_{ij} = w_i / (\sum_k w_k + t_j)`, :math:`p_{n+1,j} = t_j / (\sum_k w_k + t_j)`:
    :func:`conformal_thresholds` with ``weights=calibration_weights``, ``test_weight=t_j``, asked
    once per distinct test weight. Equal weights give :func:`split_intervals` bit for bit.
    """
    t = np.asarray(test_weights, float)
    distinct, which = np.unique(t, return_inverse=True)
    lo = np.empty((distinct.size, len(levels)))
    hi = np.empty((distinct.size, len(levels)))
    for k, tk in enumerate(distinct):
        lo[k], hi[k] = conformal_thresholds(
            sorted_scores, levels, symmetric=score.symmetric, weights=calibration_weights, test_weight=float(tk)
        )
    mu = np.asarray(mu, float)[:, None]
    scale = np.broadcast_to(np.asarray(scale, float), mu.shape[:1])[:, None]
    return invert(mu, scale, lo[which]), invert(mu, scale, hi[which])


def weighted_prediction(
    model: Any,
    levels: np.ndarray,
    mu: ArrayLike,
    scale: ArrayLike,
    test: tuple[np.ndarray, ArrayLike | Weights],
    attrs: dict,
) -> tuple[np.ndarray, np.ndarray]:
    """The weighted ends at the test points after the level check; the diagnostics go to ``model`` and ``attrs``.

    ``test`` is :func:`split_test_weights`' ``(weights, source)``.
    """
    test_weights = checked_test_weights(model, levels, test, attrs)
    return weighted_split_intervals(
        model.score_, model.scores_, model.calibration_weights_, test_weights, mu, scale, levels
    )


def checked_test_weights(
    model: Any, levels: Sequence[float] | np.ndarray, test: tuple[np.ndarray, ArrayLike | Weights], attrs: dict
) -> np.ndarray:
    """The test weights of ``test`` (:func:`split_test_weights`) after the attainable-level check.

    The one check every weighted method shares: the diagnostics of the calibration weights
    (``model.calibration_weights_``) with these test weights go to ``model.weight_diagnostics_``
    and to ``attrs`` (``weights_ess``, ``weights_attainable_level``); a level above the
    attainable one is refused or warned about (the weights object's ``on_small``).
    """
    test_weights, source = test
    kind = source if isinstance(source, Weights) else model.weights_ if model.weights_ is not None else _ARRAY
    diag = kind.diagnose(model.calibration_weights_, test_weights)
    check_attainable(diag, levels, on_small_of(source, model.weights_))
    model.weight_diagnostics_ = diag
    attrs.update(weights_ess=diag.ess, weights_attainable_level=diag.attainable_level)
    return test_weights


def weighted_quantiles(
    model: Any,
    mu: ArrayLike,
    scale: ArrayLike,
    levels: ArrayLike | None,
    test: tuple[np.ndarray, ArrayLike | Weights],
    attrs: dict,
) -> tuple[np.ndarray, np.ndarray]:
    r"""``(quantiles (m, L), levels)`` of the weighted conformal quantile function (Tibshirani et al. 2019).

    The unweighted function's knots (score :math:`R_{(i)}` at the continuous rank :math:`i`) move to
    the cumulative weights (``calibprob.calibrators._weighted``), the test row's own mass
    :math:`t/(W+t)` kept beyond the last score; the levels are those every row resolves. All-equal
    weights are the unweighted function, computed by it (the same arithmetic).
    """
    # the diagnostics only: a quantile function has no confidence level; its reachable range is checked below
    t = checked_test_weights(model, [], test, attrs)
    symmetric = model.score_.symmetric
    if equal_weights(model.calibration_weights_, t):
        return split_quantiles(model.score_, model.scores_, mu, scale, levels)
    grid = weighted_cps_levels(model.scores_, model.calibration_weights_, t, levels, symmetric=symmetric)
    r = weighted_cps_quantiles(model.scores_, model.calibration_weights_, t, grid, symmetric=symmetric)
    return np.asarray(mu, float)[:, None] + np.asarray(scale, float)[:, None] * r, grid


def split_test_weights(
    model: Any,
    weights: ArrayLike | Weights | None,
    m: int,
    *,
    X: ArrayLike | None = None,
    obs: xr.Dataset | ArrayLike | None = None,
) -> tuple[np.ndarray, ArrayLike | Weights] | None:
    """``(test weights, their source)`` of a (possibly) weighted split model; None for the unweighted path.

    Refuses weights at prediction after an unweighted fit, and an array-weighted fit without
    test weights (each names the fix).
    """
    weighted = getattr(model, "calibration_weights_", None) is not None
    return resolve_test_weights(
        weighted, weights, getattr(model, "weights_", None), m, owner=type(model).__name__, X=X, obs=obs
    )


def refuse_weighted_quantiles(model: Any, weights: ArrayLike | Weights | None = None) -> None:
    """The quantile function of weighted split conformal is not built: refuse rather than drop the weights."""
    if weights is not None or getattr(model, "calibration_weights_", None) is not None:
        raise ValueError(
            "predict() after a weighted calibration would ignore the weights: the weighted conformal quantile "
            "function of this score is not implemented. Use predict_interval(..., weights=) for the weighted "
            "intervals, ConformalPredictiveSystem().fit(..., weights=) for a weighted quantile function, or "
            "calibrate without weights= for the unweighted one."
        )


class _ArrayWeights(Weights):
    """Plain arrays' diagnostics: no coverage-gap bound is known for numbers of unknown origin."""


_ARRAY = _ArrayWeights()


class SplitConformalCalibrator(BaseEstimator):
    r"""Split conformal as a distribution post-processor: ``fit(pred_cal, y_cal)``, ``predict(pred)``.

    Parameters
    ----------
    score : {"absolute", "normalized", "signed", "signed-absolute"} or Score, default "absolute"
        The non-conformity score, with :math:`\mu, \sigma` the Dataset's own
        predictive mean and standard deviation (module docstring).
    beta, eps : float
        Parameters of the normalised scores, :math:`s = \max(\epsilon, \sigma^\beta)`.
    confidence_level : float or sequence of float, default 0.9
        Default level(s) of :meth:`predict_interval`; checked at :meth:`fit`
        against the number of calibration points.

    Attributes
    ----------
    scores_ : ndarray, shape (n_cal,)
        Sorted calibration scores.
    n_calibration_ : int
    score_ : Score

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.calibrators.conformal import SplitConformalCalibrator
    >>> rng = np.random.default_rng(0)
    >>> mu = rng.normal(size=400); y = mu + 2.0 * rng.normal(size=400)     # base too confident
    >>> base = calibprob.normal(mu, np.ones(400))
    >>> cal = SplitConformalCalibrator(score="normalized").fit(base.isel(obs=slice(200)), y[:200])
    >>> iv = cal.predict_interval(base.isel(obs=slice(200, None)), confidence_level=0.9)
    >>> 0.85 < float(((y[200:] >= iv["lower"]) & (y[200:] <= iv["upper"])).mean()) < 0.97
    True

    References
    ----------
    Lei et al. (2018); Pion & Vazquez (2024) §2.3, eq. (9), (13).
    """

    _method = "split-conformal"
    _weights_support = "conformal"  # calibprob.weights.weight_support
    # a calibprob.weights object (may hold a fitted classifier) is not written by save(); pass weights= after load
    _transient_attrs: tuple[str, ...] = ("weights_",)

    scores_: np.ndarray | None
    calibration_weights_: np.ndarray | None = None
    weights_ = None

    def __init__(
        self, *, score: str | Score = "absolute", beta: float = 1.0, eps: float = 0.0, confidence_level: ArrayLike = 0.9
    ) -> None:
        self.score = score
        self.beta = beta
        self.eps = eps
        self.confidence_level = confidence_level

    def _score(self) -> Score:
        return get_score(self.score, beta=self.beta, eps=self.eps)

    def _mondrian_sides(self) -> int:
        """1 for a symmetric score (one rank per interval), 2 for a signed one (the Mondrian minimum size)."""
        return 1 if self._score().symmetric else 2

    def fit(
        self,
        pred_cal: xr.Dataset,
        y_cal: ArrayLike,
        *,
        groups: ArrayLike | None = None,
        weights: ArrayLike | Weights | None = None,
    ) -> Self:
        """Score the calibration predictions; returns ``self``.

        Parameters
        ----------
        pred_cal : xarray.Dataset
            The base's predictive distribution on the calibration data.
        y_cal : array_like or 1-D xarray.DataArray, shape (n_cal,)
        groups : array_like, xarray.DataArray or str, optional
            One group label per calibration point (or an ``obs`` coordinate name): calibrate
            separately within each group (:class:`calibprob.Mondrian`, stored as ``mondrian_``).
        weights : array_like, pandas.Series, xarray.DataArray or calibprob.weights.Weights, optional
            One weight per calibration point (a labelled one aligned to ``pred_cal``'s ``obs``),
            e.g. the density ratio :math:`w(X_i)` under covariate shift, or a
            :mod:`calibprob.weights` object (a :class:`~calibprob.weights.LikelihoodRatio` fitted
            on these calibration rows and the test rows, :class:`~calibprob.weights.DecayingWeights`):
            weighted split conformal (Tibshirani et al. 2019), the test points' weights given to
            :meth:`predict_interval`. Stored in the scores' order as ``calibration_weights_``.

        Raises
        ------
        ValueError
            Too few calibration points for ``confidence_level`` (the message
            says how many), non-finite targets, a length mismatch.
        TypeError
            ``pred_cal`` is not a predictive Dataset (e.g. inputs ``X``).
        """
        if fit_with_groups(self, pred_cal, y_cal, groups, weights):
            return self
        levels, _ = resolve_levels(self.confidence_level)
        score = self._score()
        pred = check_predictive(pred_cal, self, "pred_cal")
        y = check_targets(y_cal, pred.sizes["obs"], "y_cal", obs=pred["obs"].values)
        mu, sigma = predictive_mean_std(pred)
        self.calibration_weights_, self.weights_ = None, weights if isinstance(weights, Weights) else None
        if weights is None:
            R = split_scores(score, y, mu, sigma, levels)
        else:
            w = resolve(weights, y.size, obs=pred, side="calibration")
            R, self.calibration_weights_ = weighted_split_scores(score, y, mu, sigma, levels, w)
        self.scores_ = R
        self.n_calibration_ = int(R.size)
        self.score_ = score
        return self

    def _mu_scale(self, pred: xr.Dataset) -> tuple[xr.Dataset, np.ndarray, np.ndarray]:
        check_is_fitted(self, "scores_", method="fit")
        pred = check_predictive(pred, self, "pred")
        mu, sigma = predictive_mean_std(pred)
        scale = np.broadcast_to(np.asarray(self.score_.scale(sigma), float), mu.shape)
        return pred, mu, scale

    def _method_name(self) -> str:
        return f"{self._method}-{self.score_.name}"

    def predict(
        self,
        pred: xr.Dataset,
        *,
        levels: ArrayLike | None = None,
        groups: ArrayLike | None = None,
        weights: ArrayLike | Weights | None = None,
    ) -> xr.Dataset:
        r"""The conformal quantile function around the Dataset's mean, as a predictive Dataset.

        The quantile at level :math:`p` is the calibration score at the
        continuous rank :math:`p(n+1)` (signed score) or :math:`|2p-1|(n+1)`
        (symmetric score, mirrored around :math:`\mu`), linearly interpolated
        between order statistics (``calibprob.calibrators.conformal._intervals.conformal_quantile_function``).

        Parameters
        ----------
        pred : xarray.Dataset
            The base's predictive distribution at new inputs.
        levels : array_like, optional
            Default: :data:`calibprob.predictive.DEFAULT_LEVELS` restricted to
            the levels the calibration set resolves.
        groups : array_like, xarray.DataArray or str, optional
            Per-row group labels when fitted with ``groups=`` (default: ``pred``'s ``group``
            coordinate).
        weights : array_like or calibprob.weights.Weights, optional
            After a weighted :meth:`fit`: the test rows' weights (default: the object given to
            :meth:`fit`): the weighted quantile function (``calibprob.calibrators._weighted``),
            at the levels every row resolves. Equal weights give the unweighted function bit for bit.

        Returns
        -------
        xarray.Dataset
            The predictive-distribution contract (``family="quantile"``), with
            ``pred``'s ``obs`` coordinate (and its ``group`` coordinate, if any).
        """
        mondrian = predict_with_groups(self, groups)
        if mondrian is not None:
            return mondrian.predict(pred, levels=levels, groups=groups, weights=weights)
        pred, mu, scale = self._mu_scale(pred)
        attrs = {"n_calibration": self.n_calibration_}
        test = split_test_weights(self, weights, mu.size, obs=pred)
        if test is None:  # _mu_scale checked the fit: scores_ is the array
            q, levels = split_quantiles(self.score_, cast(np.ndarray, self.scores_), mu, scale, levels)
        else:
            q, levels = weighted_quantiles(self, mu, scale, levels, test, attrs)
        ds = from_quantiles(q, levels, obs=pred["obs"].values, method=self._method_name())
        ds.attrs.update(attrs)
        return keep_group_coord(ds, pred)

    def predict_interval(
        self,
        pred: xr.Dataset,
        confidence_level: ArrayLike | None = None,
        *,
        groups: ArrayLike | None = None,
        weights: ArrayLike | Weights | None = None,
    ) -> xr.Dataset:
        r"""Exact conformal intervals at one or several confidence levels.

        Parameters
        ----------
        pred : xarray.Dataset
        confidence_level : float or sequence, optional
            Defaults to the constructor's ``confidence_level``.
        groups : array_like, xarray.DataArray or str, optional
            Per-row group labels when fitted with ``groups=``; a group below the minimum size
            gets :math:`(-\infty, \infty)` (:class:`calibprob.Mondrian`).
        weights : array_like, pandas.Series, xarray.DataArray or calibprob.weights.Weights, optional
            After a weighted :meth:`fit`: one positive weight per row of ``pred`` (labelled ones
            aligned to its ``obs``), or a :mod:`calibprob.weights` object (default: the object
            given to :meth:`fit`). Row :math:`j`'s threshold is the level-:math:`c` quantile of the
            calibration scores weighted :math:`w_i/(\sum_k w_k + t_j)` plus the mass
            :math:`t_j/(\sum_k w_k + t_j)` at :math:`+\infty` (Tibshirani et al. 2019); infinite
            where the finite scores cannot reach :math:`c`. A level above what the weights' effective
            sample size supports is refused, naming the attainable level
            (:func:`calibprob.weights.check_attainable`; ``on_small=`` of the weights object).
            The diagnostics are kept as ``weight_diagnostics_``.

        Returns
        -------
        xarray.Dataset
            ``lower``, ``upper`` over (obs, confidence_level); a scalar level
            drops the ``confidence_level`` dimension.
        """
        mondrian = predict_with_groups(self, groups)
        if mondrian is not None:
            return mondrian.predict_interval(pred, confidence_level, groups=groups, weights=weights)
        check_is_fitted(self, "scores_", method="fit")
        levels, scalar = resolve_levels(self.confidence_level if confidence_level is None else confidence_level)
        pred, mu, scale = self._mu_scale(pred)
        attrs = {"n_calibration": self.n_calibration_}
        test = split_test_weights(self, weights, mu.size, obs=pred)
        if test is None:  # _mu_scale checked the fit: scores_ is the array
            lower, upper = split_intervals(self.score_, cast(np.ndarray, self.scores_), mu, scale, levels)
        else:
            lower, upper = weighted_prediction(self, levels, mu, scale, test, attrs)
        ds = interval_dataset(lower, upper, levels, scalar, method=self._method_name(), attrs=attrs)
        return keep_group_coord(ds.assign_coords(obs=pred["obs"].values), pred)
