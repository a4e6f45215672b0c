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

from typing import Self

import numpy as np
import xarray as xr

from calibprob._core.estimator import BaseEstimator, check_is_fitted, check_predictive
from calibprob._core.ranks import weighted_upper_rank
from calibprob._core.validation import check_targets
from calibprob.calibrators.conformal._intervals import (
    check_enough_points,
    conformal_quantile_function,
    interval_dataset,
    lower_rank,
    resolve_levels,
    upper_rank,
    valid_levels,
)
from calibprob.calibrators.conformal.mondrian import fit_with_groups, keep_group_coord, predict_with_groups
from calibprob.calibrators.conformal.scores import Score, get_score
from calibprob.predictive import from_quantiles

__all__ = [
    "SplitConformalCalibrator",
    "predictive_mean_std",
    "conformal_thresholds",
    "split_scores",
    "split_intervals",
    "split_quantiles",
]


def predictive_mean_std(pred: xr.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """The Dataset's own predictive mean and standard deviation, as NumPy (the scores' μ, σ)."""
    mu = np.asarray(pred.calib.mean().values, float)
    sigma = np.asarray(pred.calib.std().values, float)
    return mu, sigma


def conformal_thresholds(sorted_scores, confidence_levels, *, symmetric: bool = True, weights=None, test_weight=1.0):
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


def split_scores(score: Score, y, mu, sigma, levels) -> np.ndarray:
    """The sorted calibration scores, checked early against every level (the message says how many points)."""
    R = np.sort(score.score(y, mu, sigma))
    conformal_thresholds(R, levels, symmetric=score.symmetric)
    return R


def split_intervals(score: Score, sorted_scores, mu, scale, levels) -> tuple[np.ndarray, np.ndarray]:
    """Interval ends ``(lower, upper)``, each (m, L): the split thresholds inverted by the score."""
    lo, hi = conformal_thresholds(sorted_scores, levels, symmetric=score.symmetric)
    return score.bounds(mu, scale, lo, hi)


def split_quantiles(score: Score, sorted_scores, mu, scale, levels) -> tuple[np.ndarray, np.ndarray]:
    """``(quantiles (m, L), levels)`` of the conformal quantile function at the levels the scores resolve."""
    levels = valid_levels(levels, sorted_scores.size, symmetric=score.symmetric)
    return conformal_quantile_function(mu, scale, sorted_scores, levels, symmetric=score.symmetric), levels


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

    scores_: np.ndarray | None

    def __init__(self, *, score="absolute", beta: float = 1.0, eps: float = 0.0, confidence_level=0.9):
        self.score = score
        self.beta = beta
        self.eps = eps
        self.confidence_level = confidence_level

    def _score(self) -> Score:
        return get_score(self.score, beta=self.beta, eps=self.eps)

    def _mondrian_sides(self) -> int:
        """1 for a symmetric score (one rank per interval), 2 for a signed one (the Mondrian minimum size)."""
        return 1 if self._score().symmetric else 2

    def fit(self, pred_cal, y_cal, *, groups=None) -> Self:
        """Score the calibration predictions; returns ``self``.

        Parameters
        ----------
        pred_cal : xarray.Dataset
            The base's predictive distribution on the calibration data.
        y_cal : array_like or 1-D xarray.DataArray, shape (n_cal,)
        groups : array_like, xarray.DataArray or str, optional
            One group label per calibration point (or an ``obs`` coordinate name): calibrate
            separately within each group (:class:`calibprob.Mondrian`, stored as ``mondrian_``).

        Raises
        ------
        ValueError
            Too few calibration points for ``confidence_level`` (the message
            says how many), non-finite targets, a length mismatch.
        TypeError
            ``pred_cal`` is not a predictive Dataset (e.g. inputs ``X``).
        """
        if fit_with_groups(self, pred_cal, y_cal, groups):
            return self
        levels, _ = resolve_levels(self.confidence_level)
        score = self._score()
        pred = check_predictive(pred_cal, self, "pred_cal")
        y = check_targets(y_cal, pred.sizes["obs"], "y_cal", obs=pred["obs"].values)
        mu, sigma = predictive_mean_std(pred)
        R = split_scores(score, y, mu, sigma, levels)
        self.scores_ = R
        self.n_calibration_ = int(R.size)
        self.score_ = score
        return self

    def _mu_scale(self, pred) -> tuple[xr.Dataset, np.ndarray, np.ndarray]:
        check_is_fitted(self, "scores_", method="fit")
        pred = check_predictive(pred, self, "pred")
        mu, sigma = predictive_mean_std(pred)
        scale = np.broadcast_to(np.asarray(self.score_.scale(sigma), float), mu.shape)
        return pred, mu, scale

    def _method_name(self) -> str:
        return f"{self._method}-{self.score_.name}"

    def predict(self, pred, *, levels=None, groups=None) -> xr.Dataset:
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

        Returns
        -------
        xarray.Dataset
            The predictive-distribution contract (``family="quantile"``), with
            ``pred``'s ``obs`` coordinate (and its ``group`` coordinate, if any).
        """
        mondrian = predict_with_groups(self, groups)
        if mondrian is not None:
            return mondrian.predict(pred, levels=levels, groups=groups)
        pred, mu, scale = self._mu_scale(pred)
        q, levels = split_quantiles(self.score_, self.scores_, mu, scale, levels)
        ds = from_quantiles(q, levels, obs=pred["obs"].values, method=self._method_name())
        ds.attrs["n_calibration"] = self.n_calibration_
        return keep_group_coord(ds, pred)

    def predict_interval(self, pred, confidence_level=None, *, groups=None) -> xr.Dataset:
        r"""Exact conformal intervals at one or several confidence levels.

        Parameters
        ----------
        pred : xarray.Dataset
        confidence_level : float or sequence, optional
            Defaults to the constructor's ``confidence_level``.
        groups : array_like, xarray.DataArray or str, optional
            Per-row group labels when fitted with ``groups=``; a group below the minimum size
            gets :math:`(-\infty, \infty)` (:class:`calibprob.Mondrian`).

        Returns
        -------
        xarray.Dataset
            ``lower``, ``upper`` over (obs, confidence_level); a scalar level
            drops the ``confidence_level`` dimension.
        """
        mondrian = predict_with_groups(self, groups)
        if mondrian is not None:
            return mondrian.predict_interval(pred, confidence_level, groups=groups)
        check_is_fitted(self, "scores_", method="fit")
        levels, scalar = resolve_levels(self.confidence_level if confidence_level is None else confidence_level)
        pred, mu, scale = self._mu_scale(pred)
        lower, upper = split_intervals(self.score_, self.scores_, mu, scale, levels)
        ds = interval_dataset(
            lower, upper, levels, scalar, method=self._method_name(), attrs={"n_calibration": self.n_calibration_}
        )
        return keep_group_coord(ds.assign_coords(obs=pred["obs"].values), pred)
