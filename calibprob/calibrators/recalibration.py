r"""Recalibration baselines: isotonic (RK), Vovk's randomized (RV), Marx's constant offsets (RM), variance scaling.

Each calibrator post-processes the predictive distribution of *any* base
model (Gaussian family or quantile family, see :mod:`calibprob.predictive`):
``fit(pred_cal, y_cal)`` takes the base's prediction on held-out calibration
data and the observed values, ``predict(pred)`` maps the base's prediction on
new inputs to the recalibrated predictive Dataset (a full, non-crossing
quantile function on the prediction's levels).

Scores
------
The three distribution-free calibrators work with one scalar *score* per
calibration point and the empirical quantile function of the scores:

* RK and RV score a point by its probability integral transform
  :math:`u_i = F_i(y_i)`, kept on the probit scale
  :math:`w_i = \Phi^{-1}(u_i)` (for a Gaussian base this is the z-score
  :math:`(y_i - \mu_i)/\sigma_i`, with no rounding of :math:`u` to 0 or 1);
  the recalibrated quantile maps a score back through the base:
  :math:`Q_i(p) = F_i^{-1}(\Phi(w(p)))`.
* RM scores by the raw residual :math:`r_i = y_i - \mu_i` and returns
  :math:`Q_i(p) = \mu_i + r(p)` (constant width, the base's σ is ignored).

With sorted scores :math:`s_{(1)} \le \dots \le s_{(n)}`, the score quantile
function passes through the knots :math:`(k/(n+1),\ s_{(k)})` (the
:math:`n + 1` convention of conformal prediction and of Marx et al. 2022,
Thm. 1: for exchangeable data :math:`P(S \le s_{(k)}) = k/(n+1)` exactly).
Between knots it is interpolated like every quantile function in calibprob,
linearly in :math:`\Phi^{-1}(p)` (exact when the scores are Gaussian, i.e.
when the base was already calibrated up to an affine map).

Levels outside the calibration range
------------------------------------
The data determine the score quantile only for
:math:`1/(n+1) \le p \le n/(n+1)`, so a level :math:`p` needs
:math:`n \ge \max(1/p,\ 1/(1-p)) - 1` calibration points (99 for the default
levels 0.01, ..., 0.99; see :func:`min_calibration_points`). By default
``predict`` raises when a requested level is outside that range. With
``extrapolate=True`` the score quantile function continues beyond the outer
knots with the contract's Gaussian tail rule (a Gaussian tail matched to the
two outermost knots), which keeps every quantile finite.

Guarantees (tested in ``tests/calibrators/test_recalibration.py``)
-------------------------------------------------------
For exchangeable calibration and test data with continuous scores, at a
level :math:`p` inside the calibration range,

* RK and RM: :math:`\lfloor p(n+1)\rfloor/(n+1) \le P(Y \le Q(p)) \le
  \lceil p(n+1)\rceil/(n+1)`, so coverage is within :math:`1/(n+1)` of the
  level (Marx et al. 2022, Thm. 1; Capone et al. 2023, Lemma 8.1);
* RV: :math:`P(Y \le Q(p)) = p` exactly (Vovk et al. 2020), thanks to the
  randomisation.

Variance scaling has no such guarantee (it is a one-parameter parametric
fix) but is the maximum-likelihood σ multiplier.

References
----------
Kuleshov, V., Fenner, N. and Ermon, S. (2018). Accurate uncertainties for
deep learning using calibrated regression. ICML, PMLR 80, 2796–2804 (RK).
Vovk, V., Petej, I., Toccaceli, P., Gammerman, A., Ahlberg, E. and Carlsson,
L. (2020). Conformal calibrators. COPA, PMLR 128, 84–99 (RV).
Marx, C., Zhao, S., Neiswanger, W. and Ermon, S. (2022). Modular conformal
calibration. ICML, PMLR 162, 15180–15195 (RM).
Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
processes. NeurIPS, §7 and Table 1 (RK, RV, RM as baselines).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import xarray as xr
from scipy import optimize, special

from calibprob._core.estimator import BaseEstimator, check_is_fitted, check_predictive
from calibprob._core.ranks import knot_levels, levels_in_range, min_calibration_points
from calibprob._core.validation import check_array, check_choice, check_levels, check_targets
from calibprob.calibrators._recalibration_numerics import (
    _SCALE_GRID,
    _center,
    _ppf_probit,
    _probit_pit,
    isotonic_calibration_knots,
    probit_interpolated_quantiles,
    quantile_scale_candidates,
    variance_scale_factor,
    vovk_ranks,
    weighted_knot_levels,
)
from calibprob.calibrators.grouping.mondrian import fit_with_groups, keep_group_coord, predict_with_groups
from calibprob.predictive import (
    from_quantiles,
    normal,
    quantile_cdf,
    quantile_ppf,
)
from calibprob.weights import resolve

#: What a weighted fit of a non-conformal post-processor states about its guarantee (``weights_guarantee_``).
NO_GUARANTEE = (
    "none: the weights enter the fitting loss (an importance-weighted empirical distribution of the "
    "calibration scores); no finite-sample coverage guarantee under shift, unlike the weighted conformal methods"
)

__all__ = [
    # NumPy layer
    "min_calibration_points",
    "levels_in_range",
    "knot_levels",
    "probit_interpolated_quantiles",
    "isotonic_calibration_knots",
    "vovk_ranks",
    "variance_scale_factor",
    # estimators
    "IsotonicRecalibrator",
    "VovkRecalibrator",
    "MarxRecalibrator",
    "VarianceScalingRecalibrator",
    # comparison-runner kinds
]


class _Recalibrator(BaseEstimator):
    """Shared fit/predict plumbing: validation, levels, output Dataset."""

    _method = "recalibrated"
    _min_points = 2
    # set by each subclass's __init__ / fit, and its predict
    extrapolate: bool
    n_calibration_: int
    predict: Callable[..., xr.Dataset]

    def _loss_weights(self, weights: Any, pred_cal: xr.Dataset, n: int) -> np.ndarray | None:
        """The calibration points' importance weights (None unweighted or all equal: the same fit exactly).

        Sets ``weights_guarantee_``: :data:`NO_GUARANTEE` after a weighted fit, None otherwise.
        """
        self.weights_guarantee_ = None
        if weights is None:
            return None
        w = resolve(weights, n, obs=pred_cal, side="calibration")
        self.weights_guarantee_ = NO_GUARANTEE
        return None if np.all(w == w[0]) else w

    def _check_fit_input(self, pred_cal: Any, y_cal: Any) -> tuple[xr.Dataset, np.ndarray]:
        pred_cal = check_predictive(pred_cal, self, "pred_cal")
        y = check_targets(y_cal, pred_cal.sizes["obs"], "y_cal", obs=pred_cal["obs"].values)
        if y.size < self._min_points:
            raise ValueError(
                f"{type(self).__name__} needs at least {self._min_points} calibration points; "
                f"got {y.size}. Hold out more data for calibration."
            )
        return pred_cal, y

    def _levels(self, pred: xr.Dataset, levels: Any) -> np.ndarray:
        out = pred.calib.levels if levels is None else check_levels(levels, "levels")
        if out.size < 2:
            raise ValueError(f"levels must hold at least 2 levels to define a quantile function; got {out.size}.")
        return out

    def _mondrian_extrapolates(self) -> bool:
        r"""Mondrian's hook: with ``extrapolate=True`` this calibrator defines every level itself.

        A group below a level's minimum size then gets the group's own extrapolated quantiles
        at that level (what :meth:`predict` returns for it), not :math:`(-\infty, \infty)`, and
        Mondrian's warning says so: the output and the warning agree.
        """
        return bool(getattr(self, "extrapolate", False))

    def _check_range(self, levels: np.ndarray, n: int) -> np.ndarray:
        """Which levels need extrapolation; raise unless ``extrapolate`` allows it."""
        inside = levels_in_range(levels, n)
        if not inside.all() and not self.extrapolate:
            need = min_calibration_points(levels)
            raise ValueError(
                f"too few calibration points for levels in [{levels.min():.4g}, {levels.max():.4g}]: "
                f"{type(self).__name__} determines the quantile at level p from the n calibration "
                f"points only for 1/(n+1) <= p <= n/(n+1), so these levels need at least {need} "
                f"calibration points; got n={n} (range [{1 / (n + 1):.4g}, {n / (n + 1):.4g}]). "
                "Use more calibration points, request levels inside that range, or pass "
                "extrapolate=True (Gaussian tails beyond the outermost calibration scores)."
            )
        return ~inside

    def _output(self, pred: xr.Dataset, q: np.ndarray, levels: np.ndarray) -> xr.Dataset:
        # piecewise-linear maps of monotone inputs are monotone; the running
        # maximum only removes rounding-level (1 ulp) decreases
        q = np.maximum.accumulate(q, axis=1)
        ds = from_quantiles(q, levels, obs=pred["obs"].values, method=self._method)
        ds.attrs["n_calibration"] = int(self.n_calibration_)
        ds.attrs["base_method"] = str(pred.attrs.get("method", ""))
        return keep_group_coord(ds, pred)

    def transform(self, pred: Any, *, levels: Any = None) -> xr.Dataset:
        """Alias of :meth:`predict`."""
        return self.predict(pred, levels=levels)


class IsotonicRecalibrator(_Recalibrator):
    r"""Kuleshov et al. (2018) isotonic recalibration of PIT values (RK).

    ``fit`` computes the calibration points' PIT values
    :math:`u_t = F_t(y_t)` under the base prediction and fits the isotonic
    calibration map :math:`R` (``isotonic_calibration_knots``);
    ``predict`` returns the recalibrated quantiles

    .. math::

        Q_i(p) = F_i^{-1}\bigl(R^{-1}(p)\bigr),

    for a Gaussian base :math:`\mu_i + \sigma_i\,w(p)` with :math:`w(p)` the
    empirical quantile function of the calibration z-scores (what Capone et
    al. 2023 run as their RK baseline). :math:`R^{-1}` interpolates its knots
    linearly in :math:`\Phi^{-1}(p)` (exact for an affinely miscalibrated
    Gaussian base) and is flat where :math:`R` jumps (tied PITs); beyond the
    calibration range :math:`[1/(n+1), n/(n+1)]` see ``extrapolate``.

    Parameters
    ----------
    extrapolate : bool, default False
        Levels outside :math:`[1/(n+1), n/(n+1)]` raise ``ValueError``
        (saying how many calibration points they need) unless True, in which
        case :math:`R^{-1}` continues with Gaussian tails matched to its two
        outermost knots.

    Weights (``fit(..., weights=)``, e.g. a likelihood ratio under covariate shift) weigh the
    observed frequency and the isotonic fit (``isotonic_calibration_knots(..., weights=)``): a
    weighted *fitting loss* with **no finite-sample guarantee** (``weights_guarantee_`` says so;
    the weighted conformal methods have one). Equal weights are the unweighted fit exactly.

    Attributes
    ----------
    pit_scores_ : ndarray, shape (n,)
        Sorted calibration PITs on the probit scale :math:`\Phi^{-1}(u_t)`.
    knot_levels_, knot_scores_ : ndarray, shape (J,)
        Knots of :math:`R^{-1}` (levels in (0, 1), probit scores).
    n_calibration_ : int

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> mu = rng.normal(size=300); y = mu + 2.0 * rng.normal(size=300)
    >>> base = calibprob.normal(mu[:200], np.ones(200))          # overconfident: true sd is 2
    >>> rk = IsotonicRecalibrator().fit(base, y[:200])
    >>> pred = rk.predict(calibprob.normal(mu[200:], np.ones(100), levels=[0.1, 0.5, 0.9]))
    >>> bool(pred.calib.quantiles[0, 2] - pred.calib.quantiles[0, 0] > 3.5)  # ~ 2 * 2.56
    True

    References
    ----------
    Kuleshov, Fenner & Ermon (2018), Alg. 1; Capone, Hirche & Pleiss (2023), §7.
    """

    _method = "isotonic-recalibration"
    _weights_support = "loss"  # calibprob.weights.weight_support: no finite-sample guarantee
    weights_guarantee_: str | None = None

    def __init__(self, *, extrapolate: bool = False) -> None:
        self.extrapolate = extrapolate

    def fit(self, pred_cal: Any, y_cal: Any, *, groups: Any = None, weights: Any = None) -> IsotonicRecalibrator:
        """Fit :math:`R` on the base prediction ``pred_cal`` (n obs) and ``y_cal`` (n,).

        ``weights``: one importance weight per calibration point, or a :mod:`calibprob.weights`
        object (class docstring: a weighted loss, no finite-sample guarantee).
        """
        if fit_with_groups(self, pred_cal, y_cal, groups, weights):  # per group: a Mondrian of clones
            return self
        pred_cal, y = self._check_fit_input(pred_cal, y_cal)
        v = self._loss_weights(weights, pred_cal, y.size)
        raw = _probit_pit(pred_cal, y)
        w = np.sort(raw)
        if w[0] == w[-1]:
            raise ValueError(
                f"all {w.size} calibration PIT values are equal ({special.ndtr(w[0]):.4g}); the "
                "isotonic calibration map needs at least 2 distinct values. Check the base prediction "
                "and y_cal."
            )
        self.knot_levels_, self.knot_scores_ = isotonic_calibration_knots(w if v is None else raw, v)
        self.pit_scores_ = w
        self.n_calibration_ = int(y.size)
        return self

    def _score_quantiles(self, levels: np.ndarray) -> np.ndarray:
        return quantile_ppf(self.knot_scores_, self.knot_levels_, levels)

    def inverse_map(self, levels: Any) -> np.ndarray:
        r""":math:`R^{-1}(p)` on the PIT scale: the base level whose quantile is returned at level ``p``."""
        check_is_fitted(self, "knot_levels_", method="fit")
        return special.ndtr(self._score_quantiles(check_levels(levels, "levels", increasing=False)))

    def calibration_map(self, pit: Any) -> np.ndarray:
        r""":math:`R(u)`: the observed frequency of base PIT values at or below ``u`` (reliability curve)."""
        check_is_fitted(self, "knot_levels_", method="fit")
        u = np.asarray(pit, float)
        return quantile_cdf(self.knot_scores_, self.knot_levels_, special.ndtri(np.clip(u, 0.0, 1.0)))

    def predict(self, pred: Any, *, levels: Any = None, groups: Any = None) -> xr.Dataset:
        """Recalibrated predictive Dataset for the base prediction ``pred``.

        Parameters
        ----------
        pred : xarray.Dataset
            The base's prediction on new inputs (the contract).
        levels : array_like, optional
            Output levels; default: ``pred``'s levels.

        Returns
        -------
        xarray.Dataset
            ``quantile(obs, level)``, ``attrs["method"] = "isotonic-recalibration"``.
        """
        mondrian = predict_with_groups(self, groups)
        if mondrian is not None:
            return mondrian.predict(pred, levels=levels, groups=groups)
        check_is_fitted(self, "knot_levels_", method="fit")
        pred = check_predictive(pred, self, "pred")
        levels = self._levels(pred, levels)
        self._check_range(levels, self.n_calibration_)
        return self._output(pred, _ppf_probit(pred, self._score_quantiles(levels)), levels)


class VovkRecalibrator(_Recalibrator):
    r"""Vovk et al. (2020) randomized split conformal calibrator (RV).

    The conformity score of a point is its base PIT :math:`u = F(y)` (kept on
    the probit scale); with sorted calibration scores
    :math:`w_{(1)} \le \dots \le w_{(n)}` the calibrated predictive CDF of a
    test point is the split conformal predictive distribution

    .. math::

        C(y, \tau) = \frac{\#\{i : w_i < w(y)\} + \tau\,\bigl(\#\{i : w_i = w(y)\} + 1\bigr)}{n + 1},
        \qquad \tau \sim U(0, 1),

    whose quantile at level :math:`p` is
    :math:`Q(p) = F^{-1}(\Phi(w_{(k)}))`, :math:`k = \lceil p(n+1) - \tau\rceil`
    (``vovk_ranks``): a random choice between the two order statistics
    adjacent to the continuous rank :math:`p(n+1)`, with probabilities given
    by its fractional part. One :math:`\tau` is drawn per test point and
    shared by all its levels, so quantiles never cross, and for exchangeable
    data :math:`P(Y \le Q(p)) = p` exactly (calibrated in probability, Vovk
    et al. 2020). The stored quantile function is this step function sampled
    at the requested levels (the contract interpolates between them).

    Capone et al.'s public code draws, per level and test point, a uniform
    point *between* the two order statistics independently across levels
    (which can cross); calibprob follows Vovk's definition instead.

    Parameters
    ----------
    extrapolate : bool, default False
        Outside :math:`[1/(n+1), n/(n+1)]` a rank 0 or :math:`n+1` (an
        infinite quantile) can be drawn: raise ``ValueError`` (default) or,
        when True, replace those infinite quantiles by RK's Gaussian tail of
        the score quantile function (below :math:`w_{(1)}` / above
        :math:`w_{(n)}`, so monotonicity is kept).
    random_state : int, numpy.random.Generator or None
        Seeds the :math:`\tau` draws; with an int, every ``predict`` call on
        the same data returns the same result.

    Weights (``fit(..., weights=)``) replace the counts of the calibrator's CDF by importance
    weights, :math:`C(a, \tau) = (\sum_{s_i < a} v_i + \tau(\sum_{s_i = a} v_i + \bar v))/(V + \bar v)`,
    whose inverse at level :math:`p` is :math:`s_{(k)}` with :math:`k` the least rank whose cumulative
    weight reaches :math:`p(V + \bar v) - \tau \bar v`: a weighted *fitting loss* with **no
    finite-sample guarantee** (``weights_guarantee_`` says so). Equal weights are the unweighted fit.

    Attributes
    ----------
    scores_ : ndarray, shape (n,)
        Sorted calibration PITs on the probit scale.
    score_weights_ : ndarray, shape (n,) or None
        Their importance weights, in the same order (None unweighted).
    n_calibration_ : int

    References
    ----------
    Vovk, Petej, Toccaceli, Gammerman, Ahlberg & Carlsson (2020), Conformal
    calibrators, PMLR 128; Capone, Hirche & Pleiss (2023), §7 (RV).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> mu = rng.normal(size=300); y = mu + 2.0 * rng.normal(size=300)
    >>> base_cal = calibprob.normal(mu[:200], np.ones(200))        # overconfident: the true sd is 2
    >>> base_test = calibprob.normal(mu[200:], np.ones(100), levels=[0.1, 0.5, 0.9])
    >>> rv = calibprob.VovkRecalibrator(random_state=0).fit(base_cal, y[:200])
    >>> pred = rv.predict(base_test)
    >>> width = pred.calib.quantiles[:, 2] - pred.calib.quantiles[:, 0]
    >>> bool(3.5 < float(np.mean(width)) < 6.5)    # about 2 x 2.56, not the base's 2.56
    True
    """

    _method = "vovk-recalibration"
    _weights_support = "loss"  # calibprob.weights.weight_support: no finite-sample guarantee
    weights_guarantee_: str | None = None
    score_weights_: np.ndarray | None = None

    def __init__(self, *, extrapolate: bool = False, random_state: Any = None) -> None:
        self.extrapolate = extrapolate
        self.random_state = random_state

    def fit(self, pred_cal: Any, y_cal: Any, *, groups: Any = None, weights: Any = None) -> VovkRecalibrator:
        """Store the sorted calibration scores of ``pred_cal`` (n obs) and ``y_cal`` (n,) (and their weights)."""
        if fit_with_groups(self, pred_cal, y_cal, groups, weights):  # per group: a Mondrian of clones
            return self
        pred_cal, y = self._check_fit_input(pred_cal, y_cal)
        v = self._loss_weights(weights, pred_cal, y.size)
        raw = _probit_pit(pred_cal, y)
        order = np.argsort(raw, kind="stable")
        self.scores_ = raw[order]
        self.score_weights_ = None if v is None else v[order]
        self.n_calibration_ = int(y.size)
        return self

    def predict(self, pred: Any, *, levels: Any = None, tau: Any = None, groups: Any = None) -> xr.Dataset:
        """Recalibrated (randomised) predictive Dataset for the base prediction ``pred``.

        Parameters
        ----------
        pred : xarray.Dataset
        levels : array_like, optional
            Default: ``pred``'s levels.
        tau : float or array_like of shape (n_obs,), optional
            Tie-breaking variables in [0, 1); default: drawn from
            ``random_state``.

        Returns
        -------
        xarray.Dataset
        """
        mondrian = predict_with_groups(self, groups)
        if mondrian is not None:
            if tau is not None:
                raise ValueError(
                    "tau cannot be given with groups: leave tau=None (each group's calibrator draws its own from "
                    "random_state)."
                )
            return mondrian.predict(pred, levels=levels, groups=groups)
        check_is_fitted(self, "scores_", method="fit")
        pred = check_predictive(pred, self, "pred")
        levels = self._levels(pred, levels)
        n, m = self.n_calibration_, pred.sizes["obs"]
        self._check_range(levels, n)
        if tau is None:
            tau = np.random.default_rng(self.random_state).random(m)
        else:
            tau = np.broadcast_to(check_array(tau, "tau", ndim=(0, 1)), (m,))
            if np.any((tau < 0) | (tau >= 1)):
                raise ValueError("tau must lie in [0, 1); pass U(0, 1) draws or leave it None.")
        k = (
            vovk_ranks(levels, n, tau)
            if self.score_weights_ is None
            else _weighted_vovk_ranks(self.score_weights_, levels, tau)
        )
        w = self.scores_[np.clip(k, 1, n) - 1]
        if self.extrapolate:
            tail = probit_interpolated_quantiles(self.scores_, levels)
            w = np.where((k == 0) | (k == n + 1), tail[None, :], w)
        return self._output(pred, _ppf_probit(pred, w), levels)


def _weighted_vovk_ranks(weights: np.ndarray, levels: np.ndarray, tau: np.ndarray) -> np.ndarray:
    r"""Ranks (m, L) of the weighted Vovk calibrator: the least :math:`k` with :math:`C_k \ge p(V + \bar v) - \tau \bar v`.

    0 where the target is :math:`\le 0` (below every score), :math:`n + 1` above :math:`V`: the
    unweighted ``vovk_ranks`` :math:`\lceil p(n+1) - \tau \rceil` for equal weights.
    """
    C = np.cumsum(weights)
    mean = float(weights.mean())
    target = np.asarray(levels, float)[None, :] * (C[-1] + mean) - np.asarray(tau, float)[:, None] * mean
    k = np.searchsorted(C, target, side="left") + 1
    return np.where(target <= 0.0, 0, k)


class MarxRecalibrator(_Recalibrator):
    r"""Marx et al. (2022) variance-free calibration: constant offsets around the mean (RM).

    The score is the raw residual :math:`r_i = y_i - \mu_i` (μ the base's
    predictive mean, or median); the recalibrated quantile is

    .. math::

        Q_i(p) = \mu_i + r(p),

    :math:`r(p)` the empirical quantile function of the calibration residuals
    (``probit_interpolated_quantiles``). The base's spread is discarded: every interval
    has the same width at every input, as in Capone et al. 2023's RM
    baseline.

    Parameters
    ----------
    center : {"mean", "median"}, default "mean"
        The point prediction :math:`\mu` taken from the base's predictive
        distribution.
    extrapolate : bool, default False
        As in :class:`IsotonicRecalibrator` (Gaussian tails of the residual
        quantile function beyond its outermost knots).

    Weights (``fit(..., weights=)``) make :math:`r(p)` the importance-weighted quantile function
    of the residuals (knots at the cumulative weights, ``weighted_knot_levels``): a weighted *fitting
    loss* with **no finite-sample guarantee** (``weights_guarantee_`` says so). Equal weights are the
    unweighted fit exactly.

    Attributes
    ----------
    residuals_ : ndarray, shape (n,)
        Sorted calibration residuals.
    residual_levels_ : ndarray, shape (n,) or None
        The weighted knots of the residuals (None unweighted: :math:`k/(n+1)`).
    n_calibration_ : int

    References
    ----------
    Marx, Zhao, Neiswanger & Ermon (2022), Modular conformal calibration;
    Capone, Hirche & Pleiss (2023), §7 (RM).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> mu = rng.normal(size=300); y = mu + 2.0 * rng.normal(size=300)
    >>> base_cal = calibprob.normal(mu[:200], np.ones(200))        # overconfident: the true sd is 2
    >>> base_test = calibprob.normal(mu[200:], np.ones(100), levels=[0.1, 0.5, 0.9])
    >>> rm = calibprob.MarxRecalibrator().fit(base_cal, y[:200])
    >>> pred = rm.predict(base_test)
    >>> width = pred.calib.quantiles[:, 2] - pred.calib.quantiles[:, 0]
    >>> bool(np.allclose(width, width[0]))          # the same width everywhere
    True
    """

    _method = "marx-recalibration"
    _weights_support = "loss"  # calibprob.weights.weight_support: no finite-sample guarantee
    weights_guarantee_: str | None = None
    residual_levels_: np.ndarray | None = None

    def __init__(self, *, center: str = "mean", extrapolate: bool = False) -> None:
        self.center = center
        self.extrapolate = extrapolate

    def fit(self, pred_cal: Any, y_cal: Any, *, groups: Any = None, weights: Any = None) -> MarxRecalibrator:
        """Store the sorted residuals ``y_cal - mu(pred_cal)`` (and their weighted knots with ``weights``)."""
        if fit_with_groups(self, pred_cal, y_cal, groups, weights):  # per group: a Mondrian of clones
            return self
        check_choice(self.center, "center", ("mean", "median"))
        pred_cal, y = self._check_fit_input(pred_cal, y_cal)
        v = self._loss_weights(weights, pred_cal, y.size)
        r = y - _center(pred_cal, self.center)
        self.residual_levels_ = None
        if v is None:
            self.residuals_ = np.sort(r)
        else:
            order = np.argsort(r, kind="stable")
            keep = v[order] > 0  # a zero-weight residual carries no mass (its knot would repeat the previous one)
            self.residuals_ = r[order][keep]
            self.residual_levels_ = weighted_knot_levels(v[order])[keep]
        self.n_calibration_ = int(y.size)
        return self

    def predict(self, pred: Any, *, levels: Any = None, groups: Any = None) -> xr.Dataset:
        """Recalibrated predictive Dataset ``mu(pred) + r(level)``; same shapes as :meth:`IsotonicRecalibrator.predict`."""
        mondrian = predict_with_groups(self, groups)
        if mondrian is not None:
            return mondrian.predict(pred, levels=levels, groups=groups)
        check_is_fitted(self, "residuals_", method="fit")
        pred = check_predictive(pred, self, "pred")
        levels = self._levels(pred, levels)
        self._check_range(levels, self.n_calibration_)
        if self.residual_levels_ is None:
            r = probit_interpolated_quantiles(self.residuals_, levels)
        else:  # the weighted knots; beyond them the contract's Gaussian tails (no guarantee either way)
            r = quantile_ppf(self.residuals_, self.residual_levels_, levels)
        q = _center(pred, self.center)[:, None] + r[None, :]
        return self._output(pred, q, levels)


class VarianceScalingRecalibrator(_Recalibrator):
    r"""One σ multiplier fitted by maximum likelihood on the calibration data.

    For a Gaussian base :math:`N(\mu_i, \sigma_i^2)` the recalibrated
    prediction is :math:`N(\mu_i, s^2\sigma_i^2)` with the closed-form MLE
    (``variance_scale_factor``)

    .. math::

        s^2 = \frac1n\sum_{i=1}^n \Bigl(\frac{y_i - \mu_i}{\sigma_i}\Bigr)^2 .

    For a quantile-family base the whole quantile function is scaled about
    the predictive mean, :math:`Q_i'(p) = m_i + s\,(Q_i(p) - m_i)`, and
    :math:`s` maximises the exact log-likelihood
    :math:`\sum_i \log f_i(m_i + (y_i - m_i)/s) - \log s` of that family.
    That likelihood is not smooth (the piecewise-Gaussian density jumps where a
    scaled point crosses a stored quantile), a saw of up to :math:`nL` teeth,
    each convex in :math:`1/s` with its optimum in closed form: the fit takes
    the best tooth exactly (``quantile_scale_candidates`` in ``_recalibration_numerics``),
    checked against a grid of 241 points in :math:`\log s` over :math:`\pm 3`
    around the Gaussian estimate refined by bounded Brent (a back-transformed
    base, whose density carries a Jacobian, uses that search alone); for a
    base that is exactly Gaussian it reproduces the closed form. Variance scaling corrects over-
    or under-confidence but not bias or shape: it is the parametric baseline.

    Weights (``fit(..., weights=)``, e.g. a likelihood ratio :math:`v_i` under covariate shift)
    make :math:`s` the maximiser of the importance-weighted log-likelihood
    :math:`\sum_i v_i \log f_i(\cdot)` (Gaussian: :math:`s^2 = \sum_i v_i z_i^2 / \sum_i v_i`;
    Shimodaira 2000's weighted maximum likelihood under covariate shift): a weighted *fitting
    loss* with **no finite-sample guarantee** (``weights_guarantee_`` says so). Equal weights are
    the unweighted fit exactly.

    Attributes
    ----------
    scale_factor_ : float
        :math:`s`.
    n_calibration_ : int

    References
    ----------
    Kuleshov, Fenner & Ermon (2018) and Song et al. (2019) list σ scaling as
    the simplest recalibration (a one-parameter temperature scaling).
    Shimodaira, H. (2000). Improving predictive inference under covariate shift by weighting
    the log-likelihood function. J. Statist. Plann. Inference 90(2), 227–244 (the weights).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> mu = rng.normal(size=300); y = mu + 2.0 * rng.normal(size=300)
    >>> base_cal = calibprob.normal(mu[:200], np.ones(200))        # overconfident: the true sd is 2
    >>> base_test = calibprob.normal(mu[200:], np.ones(100), levels=[0.1, 0.5, 0.9])
    >>> vs = calibprob.VarianceScalingRecalibrator().fit(base_cal, y[:200])
    >>> bool(1.8 < vs.scale_factor_ < 2.2)           # the true sd over the base's: 2
    True
    """

    _method = "variance-scaling"
    _min_points = 1
    _weights_support = "loss"  # calibprob.weights.weight_support: no finite-sample guarantee
    weights_guarantee_: str | None = None

    def __init__(self) -> None:
        pass

    def fit(self, pred_cal: Any, y_cal: Any, *, groups: Any = None, weights: Any = None) -> VarianceScalingRecalibrator:
        """Fit :math:`s` on the base prediction ``pred_cal`` (n obs) and ``y_cal`` (n,).

        ``weights``: one importance weight per calibration point, or a :mod:`calibprob.weights`
        object (class docstring: a weighted log-likelihood, no finite-sample guarantee).
        """
        if fit_with_groups(self, pred_cal, y_cal, groups, weights):  # per group: a Mondrian of clones
            return self
        pred_cal, y = self._check_fit_input(pred_cal, y_cal)
        v = self._loss_weights(weights, pred_cal, y.size)
        if pred_cal.calib.is_normal:
            s = variance_scale_factor((y - pred_cal["loc"].values) / pred_cal["scale"].values, v)
        else:
            s = _quantile_family_scale(pred_cal, y, v)
        if not s > 0:
            raise ValueError(
                "every calibration point sits exactly at its predicted mean, so the ML scale factor "
                "is 0; variance scaling is undefined. Check the calibration data."
            )
        self.scale_factor_ = float(s)
        self.n_calibration_ = int(y.size)
        return self

    def predict(self, pred: Any, *, levels: Any = None, groups: Any = None) -> xr.Dataset:
        """The base prediction with its spread multiplied by ``scale_factor_``.

        A Gaussian-family input gives a Gaussian-family output (exact); a
        quantile-family input a quantile-family output with ``mean`` and
        ``std`` (= ``s`` × the base's).
        """
        mondrian = predict_with_groups(self, groups)
        if mondrian is not None:
            return mondrian.predict(pred, levels=levels, groups=groups)
        check_is_fitted(self, "scale_factor_", method="fit")
        pred = check_predictive(pred, self, "pred")
        levels = self._levels(pred, levels)
        s = self.scale_factor_
        if pred.calib.is_normal:
            ds = normal(
                pred["loc"].values, s * pred["scale"].values, levels, obs=pred["obs"].values, method=self._method
            )
            ds.attrs["n_calibration"] = int(self.n_calibration_)
            ds.attrs["base_method"] = str(pred.attrs.get("method", ""))
            ds.attrs["scale_factor"] = s
            return keep_group_coord(ds, pred)
        m = np.asarray(pred.calib.mean().values, float)
        sd = np.asarray(pred.calib.std().values, float)
        base_q = pred.calib.family.ppf(levels)
        ds = self._output(pred, m[:, None] + s * (base_q - m[:, None]), levels)
        ds["mean"] = ("obs", m)
        ds["std"] = ("obs", s * sd)
        ds.attrs["scale_factor"] = s
        return ds


def _quantile_family_scale(pred: xr.Dataset, y: np.ndarray, weights: np.ndarray | None = None) -> float:
    """ML scale factor about the mean for a quantile-family prediction (importance-weighted with ``weights``)."""
    family = pred.calib.family
    m = np.asarray(pred.calib.mean().values, float)
    sd = np.asarray(pred.calib.std().values, float)
    # Gaussian quasi-likelihood start: exact for a Gaussian-shaped quantile function
    s0 = variance_scale_factor((y - m) / sd, weights)
    if not s0 > 0:
        return 0.0

    def nll(log_s: float) -> float:
        s = np.exp(log_s)
        if weights is None:
            return -(np.sum(family.logpdf(m + (y - m) / s)) - y.size * log_s)
        lp = family.logpdf(m + (y - m) / s)
        # a zero-weight point counts for nothing, even where its density is 0 (0 * -inf would be NaN)
        return -(np.sum(weights * np.where(weights > 0, lp, 0.0)) - np.sum(weights) * log_s)

    # The piecewise-Gaussian density jumps at the stored levels, so the likelihood
    # is a saw in s: a grid over a factor e^(+-3) around the start finds a good
    # basin and bounded Brent refines it, but the best tooth can sit between two
    # grid points (issue 40). For the plain quantile family every tooth's optimum
    # is known in closed form (quantile_scale_candidates); the best of grid, Brent
    # and those optima on this nll is kept, so the fit never does worse than the
    # grid alone. The transformed family (a Jacobian in y) keeps the grid.
    grid = np.log(s0) + np.linspace(-3.0, 3.0, _SCALE_GRID)
    values = np.array([nll(g) for g in grid])
    j = int(np.argmin(values))
    step = grid[1] - grid[0]
    res = optimize.minimize_scalar(
        nll, bounds=(grid[j] - step, grid[j] + step), method="bounded", options={"xatol": 1e-10}
    )
    tried = [(values[j], grid[j]), (res.fun, res.x)]
    if family.name == "quantile":
        q = family.arrays()[0]
        tried += [(nll(g), g) for g in np.log(quantile_scale_candidates(q, family.levels, m, y, weights))]
    return float(np.exp(min(tried, key=lambda c: c[0])[1]))
