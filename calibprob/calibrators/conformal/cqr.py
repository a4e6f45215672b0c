r"""Conformalized quantile regression (CQR) as a distribution post-processor.

A base model gives, at every input, a lower and an upper quantile
:math:`\hat q_{lo}(x) = \hat Q(\alpha/2 \mid x)` and
:math:`\hat q_{hi}(x) = \hat Q(1-\alpha/2 \mid x)` (and, for CQR-m, the median
:math:`\hat q_{50}(x)`), read here from the base's predictive Dataset through
``pred.calib.ppf`` at the stored levels. With :math:`n` calibration points,
confidence :math:`c = 1 - \alpha` and :math:`k = \lceil c\,(n+1) \rceil`
(``calibprob._core.ranks.upper_rank``, exact integer rank):

* **two-sided** (``score="symmetric"``, Romano et al. 2019, eq. 6-7):

  .. math::

      E_i = \max\{\hat q_{lo}(x_i) - y_i,\ y_i - \hat q_{hi}(x_i)\},\qquad
      \hat C(x) = [\hat q_{lo}(x) - E_{(k)},\ \hat q_{hi}(x) + E_{(k)}];

* **asymmetric** (``score="asymmetric"``, Romano et al. 2019, §6): each tail
  has its own correction at level :math:`1 - \alpha/2`,
  :math:`k' = \lceil (1-\alpha/2)(n+1) \rceil`,

  .. math::

      \hat C(x) = [\hat q_{lo}(x) - (\hat q_{lo} - y)_{(k')},\ \hat q_{hi}(x) + (y - \hat q_{hi})_{(k')}];

* **CQR-r** (``score="cqr-r"``, Sesia & Candès 2020): the score divided by the
  width :math:`w(x) = \hat q_{hi}(x) - \hat q_{lo}(x)`,
  :math:`E_i = \max\{\hat q_{lo} - y_i,\ y_i - \hat q_{hi}\}/w(x_i)` and
  :math:`\hat C(x) = [\hat q_{lo} - E_{(k)} w(x),\ \hat q_{hi} + E_{(k)} w(x)]`;
* **CQR-m** (``score="cqr-m"``, Sesia & Candès 2020): each side divided by its
  distance to the median,
  :math:`E_i = \max\{(\hat q_{lo} - y_i)/(\hat q_{50} - \hat q_{lo}),\ (y_i - \hat q_{hi})/(\hat q_{hi} - \hat q_{50})\}`,
  :math:`\hat C(x) = [\hat q_{lo} - E_{(k)}(\hat q_{50} - \hat q_{lo}),\ \hat q_{hi} + E_{(k)}(\hat q_{hi} - \hat q_{50})]`.

The CQR-r / CQR-m corrections are applied on the score scale and then inverted,
as the notes require; TorchCP's ``CQRR.generate_intervals`` multiplies the
correction by a freshly zeroed array instead (its intervals are the base's,
up to :math:`10^{-6}`) — not copied.

Guarantee: for exchangeable calibration and test points
:math:`P(Y \in \hat C(X)) \ge c`, and if the scores are almost surely distinct
:math:`P(Y \in \hat C(X)) \le c + 1/(n+1)` (Romano et al. 2019, Theorem 1) for
the two-sided, CQR-r and CQR-m scores; the asymmetric one has the upper bound
:math:`c + 2/(n+1)`. ``tests/calibrators/conformal/test_cqr.py`` checks both over many seeded draws.

The output is the contract's interval family (``lower``/``upper`` over ``obs``
and ``confidence_level``, ``attrs["family"] == "interval"``): CQR defines
intervals, not a quantile function.

MAPIE's ``ConformalizedQuantileRegressor(prefit=True)`` gives the same intervals
(``benchmarks/bench_conditional.py``): ``symmetric_correction=True`` is
``score="symmetric"``, the default ``symmetric_correction=False`` is
``score="asymmetric"``. Unlike MAPIE, which only logs "ill-sorted" quantiles,
crossing or missing quantile levels are refused here.

References
----------
Romano, Y., Patterson, E. and Candès, E. J. (2019). Conformalized quantile
regression. NeurIPS 32, arXiv:1905.03222.
Sesia, M. and Candès, E. J. (2020). A comparison of some conformal quantile
regression methods. Stat 9(1), e261.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self, cast

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.deprecation import renamed_keywords
from calibprob._core.estimator import BaseEstimator, check_is_fitted, check_predictive
from calibprob._core.ranks import upper_rank
from calibprob._core.validation import check_array, check_choice, check_targets
from calibprob.calibrators._weighted import weighted_thresholds
from calibprob.calibrators.conformal._intervals import check_enough_points, interval_dataset, resolve_levels
from calibprob.calibrators.conformal.scores import invert
from calibprob.calibrators.conformal.split_calibrator import checked_test_weights, split_test_weights
from calibprob.calibrators.grouping.mondrian import fit_with_groups, predict_with_groups
from calibprob.weights import Weights, resolve

__all__ = [
    "ConformalizedQuantileRegression",
    "VARIANTS",
    "cqr_scores",
    "cqr_corrections",
    "cqr_intervals",
    "read_quantiles",
    "weighted_cqr_corrections",
]

#: The CQR variants: two-sided, asymmetric, CQR-r, CQR-m.
VARIANTS = ("symmetric", "asymmetric", "cqr-r", "cqr-m")

#: Two stored levels closer than this are the same level (levels are never meaningful to 1e-9).
LEVEL_TOL = 1e-9


def _check_sorted(q_lo: np.ndarray, q_hi: np.ndarray, q_med: np.ndarray | None = None) -> None:
    """Refuse crossing quantiles, naming how many rows cross and the fix."""
    pairs = (
        [("q_lo", q_lo, "q_hi", q_hi)]
        if q_med is None
        else [("q_lo", q_lo, "q_med", q_med), ("q_med", q_med, "q_hi", q_hi)]
    )
    for a_name, a, b_name, b in pairs:
        bad = np.flatnonzero(a > b)
        if bad.size:
            raise ValueError(
                f"crossing quantiles: {a_name} > {b_name} in {bad.size} of {a.size} rows (first at row {bad[0]}: "
                f"{float(a[bad[0]])!r} > {float(b[bad[0]])!r}). CQR needs q_lo <= q_med <= q_hi; repair the base's quantiles "
                "(e.g. calibprob.from_quantiles sorts each row) or fit a non-crossing quantile model."
            )


def _scale(
    q_lo: np.ndarray, q_hi: np.ndarray, q_med: np.ndarray | None, variant: str, eps: float
) -> tuple[np.ndarray | float, np.ndarray | float]:
    """The per-point scale of the score: 1, the width (CQR-r), or the two half-widths (CQR-m)."""
    if variant == "cqr-r":
        pieces = [("q_hi - q_lo", q_hi - q_lo)]
    elif variant == "cqr-m":
        pieces = [("q_med - q_lo", q_med - q_lo), ("q_hi - q_med", q_hi - q_med)]
    else:
        return 1.0, 1.0
    out = []
    for name, s in pieces:
        s = np.maximum(s, eps) if eps > 0 else s
        bad = np.flatnonzero(~(s > 0))
        if bad.size:
            raise ValueError(
                f"the {variant!r} score divides by {name}, which is {float(s[bad[0]])!r} <= 0 in {bad.size} of {s.size} rows "
                f"(first at row {bad[0]}). Pass eps > 0 (a floor on the scale, TorchCP uses 1e-6) or use "
                "the 'symmetric' score (score='symmetric', in cqr_scores too)."
            )
        out.append(s)
    return (out[0], out[0]) if len(out) == 1 else (out[0], out[1])


@renamed_keywords({"variant": "score"}, where="calibprob.calibrators.conformal.cqr.cqr_scores")
def cqr_scores(
    y: ArrayLike,
    q_lo: ArrayLike,
    q_hi: ArrayLike,
    *,
    score: str = "symmetric",
    q_med: ArrayLike | None = None,
    eps: float = 0.0,
) -> np.ndarray:
    r"""CQR conformity scores of calibration points (module docstring for the formulas).

    Parameters
    ----------
    y, q_lo, q_hi : array_like, shape (n,)
        Targets and the base's lower and upper quantiles at the calibration points.
    score : {"symmetric", "asymmetric", "cqr-r", "cqr-m"}
    q_med : array_like, shape (n,), optional
        The base's median; required by ``"cqr-m"``.
    eps : float, default 0
        Floor of the CQR-r / CQR-m scales (0: a zero scale is refused).

    Returns
    -------
    ndarray, shape (n,) or, for ``"asymmetric"``, (n, 2)
        :math:`E_i` of the variant; the asymmetric columns are
        :math:`\hat q_{lo} - y_i` and :math:`y_i - \hat q_{hi}`.

    Raises
    ------
    ValueError
        Crossing quantiles, a missing median for CQR-m, a non-positive scale.

    References
    ----------
    Romano et al. (2019), eq. (6); Sesia & Candès (2020), §2.

    Examples
    --------
    >>> cqr_scores([0.0, 3.0], [-1.0, -1.0], [1.0, 1.0])
    array([-1.,  2.])
    """
    variant = check_choice(score, "score", VARIANTS)  # the CQR variant, called score= (0.1: variant=)
    y = check_array(y, "y", ndim=1)
    q_lo = check_array(q_lo, "q_lo", ndim=1)
    q_hi = check_array(q_hi, "q_hi", ndim=1)
    if variant == "cqr-m":
        if q_med is None:
            raise ValueError("score='cqr-m' needs the base's median q_med (the 0.5 quantile); got None.")
        q_med = check_array(q_med, "q_med", ndim=1)
    else:
        q_med = None
    if not (y.size == q_lo.size == q_hi.size and (q_med is None or q_med.size == y.size)):
        raise ValueError(f"mismatched lengths: y {y.size}, q_lo {q_lo.size}, q_hi {q_hi.size}; pass one per point.")
    _check_sorted(q_lo, q_hi, q_med)
    lo_side, hi_side = q_lo - y, y - q_hi
    if variant == "asymmetric":
        return np.column_stack([lo_side, hi_side])
    s_lo, s_hi = _scale(q_lo, q_hi, q_med, variant, eps)
    return np.maximum(lo_side / s_lo, hi_side / s_hi)


@renamed_keywords({"variant": "score"}, where="calibprob.calibrators.conformal.cqr.cqr_corrections")
def cqr_corrections(scores: ArrayLike, confidence_level: float, *, score: str = "symmetric") -> tuple[float, float]:
    r"""The corrections ``(Q_lo, Q_hi)``: exact order statistics of the scores.

    Two-sided, CQR-r, CQR-m: :math:`Q_{lo} = Q_{hi} = E_{(\lceil c(n+1) \rceil)}`;
    asymmetric: each column's :math:`\lceil (1 - \alpha/2)(n+1) \rceil`-th smallest.

    Parameters
    ----------
    scores : ndarray, shape (n,) or (n, 2)
        From :func:`cqr_scores`.
    confidence_level : float
    score : str

    Returns
    -------
    tuple of float

    Raises
    ------
    ValueError
        Too few calibration points for ``confidence_level`` (the message says how many).

    References
    ----------
    Romano et al. (2019), eq. (7) and §6.
    """
    variant = score  # the CQR variant, called score= like every calibprob score (0.1: variant=)
    scores = np.asarray(scores, float)
    n = scores.shape[0]
    c = float(confidence_level)
    if variant == "asymmetric":
        check_enough_points(c, n, sides=2)
        k = upper_rank(1.0 - (1.0 - c) / 2.0, n)
        return float(np.partition(scores[:, 0], k - 1)[k - 1]), float(np.partition(scores[:, 1], k - 1)[k - 1])
    check_enough_points(c, n)
    k = upper_rank(c, n)
    q = float(np.partition(scores, k - 1)[k - 1])
    return q, q


def weighted_cqr_corrections(
    scores: ArrayLike,
    calibration_weights: ArrayLike,
    test_weights: ArrayLike,
    confidence_level: float,
    *,
    score: str = "symmetric",
) -> tuple[np.ndarray, np.ndarray]:
    r"""Per test point, the corrections ``(Q_lo, Q_hi)`` of weighted CQR (Tibshirani et al. 2019's rule).

    :func:`cqr_corrections` with the empirical law of the scores replaced by
    :math:`\sum_i \frac{w_i}{W + t_j} \delta_{E_i} + \frac{t_j}{W + t_j} \delta_{+\infty}`
    (``calibprob.calibrators._weighted``): the level-:math:`c` quantile (each
    column's :math:`1 - \alpha/2` quantile for ``"asymmetric"``); :math:`+\infty` where the finite
    scores' mass does not reach it. Equal weights give :func:`cqr_corrections` bit for bit (the
    ranks are exact integers).

    Parameters
    ----------
    scores : ndarray, shape (n,) or (n, 2)
    calibration_weights : ndarray, shape (n,)
    test_weights : ndarray, shape (m,)
    confidence_level : float
    score : str

    Returns
    -------
    Q_lo, Q_hi : ndarray, shape (m,)

    References
    ----------
    Romano et al. (2019), eq. (7); Tibshirani et al. (2019), Corollary 1.
    """
    scores = np.asarray(scores, float)
    c = float(confidence_level)
    if score == "asymmetric":
        q = 1.0 - (1.0 - c) / 2.0
        return (
            weighted_thresholds(scores[:, 0], calibration_weights, test_weights, q),
            weighted_thresholds(scores[:, 1], calibration_weights, test_weights, q),
        )
    both = weighted_thresholds(scores, calibration_weights, test_weights, c)
    return both, both


@renamed_keywords({"variant": "score"}, where="calibprob.calibrators.conformal.cqr.cqr_intervals")
def cqr_intervals(
    q_lo: ArrayLike,
    q_hi: ArrayLike,
    corrections: Sequence[Any],
    *,
    score: str = "symmetric",
    q_med: ArrayLike | None = None,
    eps: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Intervals :math:`[\hat q_{lo} - Q_{lo} s_{lo},\ \hat q_{hi} + Q_{hi} s_{hi}]` at new points.

    Parameters
    ----------
    q_lo, q_hi : array_like, shape (m,)
    corrections : tuple of float (or of arrays of shape (m,))
        From :func:`cqr_corrections` (or :func:`weighted_cqr_corrections`, one per point).
    score : str
    q_med : array_like, shape (m,), optional
        Required by ``"cqr-m"``.
    eps : float

    Returns
    -------
    lower, upper : ndarray, shape (m,)

    References
    ----------
    Romano et al. (2019), eq. (7); Sesia & Candès (2020), §2.
    """
    variant = score  # the CQR variant, called score= like every calibprob score (0.1: variant=)
    q_lo, q_hi = np.asarray(q_lo, float), np.asarray(q_hi, float)
    q_med = None if q_med is None or variant != "cqr-m" else np.asarray(q_med, float)
    _check_sorted(q_lo, q_hi, q_med)
    s_lo, s_hi = _scale(q_lo, q_hi, q_med, variant, eps)
    # each end is a (centre, scale) score's inverse: the quantile end moved by its scaled correction
    return invert(q_lo, s_lo, -corrections[0]), invert(q_hi, s_hi, corrections[1])


def _match_levels(pred: xr.Dataset, wanted: np.ndarray, missing: str) -> np.ndarray:
    """The stored levels equal (to :data:`LEVEL_TOL`) to ``wanted``; refuse or interpolate the missing ones."""
    if pred.calib.is_normal:  # exact at every level
        return wanted
    stored = pred.calib.levels
    idx = np.searchsorted(stored, wanted)
    out = wanted.copy()
    lost = []
    for j, (p, i) in enumerate(zip(wanted, idx)):
        near = [k for k in (i - 1, i) if 0 <= k < stored.size and abs(stored[k] - p) <= LEVEL_TOL]
        if near:
            out[j] = stored[near[0]]  # the stored level itself: ppf returns the stored quantile exactly
        else:
            lost.append(float(p))
    if lost and missing == "raise":
        raise ValueError(
            f"missing quantile levels: CQR reads the base's quantiles at {[round(p, 10) for p in lost]}, which the "
            f"predictive Dataset does not store (it has {stored.size} levels from {stored[0]:g} to {stored[-1]:g}). "
            "Predict the base at these levels (e.g. base.predict(X, levels=...) or calibprob.from_quantiles with "
            "these columns), or pass missing_levels='interpolate' to read them by the contract's interpolation."
        )
    return out


def read_quantiles(pred: xr.Dataset, confidence_levels: ArrayLike, *, median: bool, missing: str = "raise") -> dict:
    r"""The base's :math:`\hat q_{lo}, \hat q_{hi}` (and :math:`\hat q_{50}`) for every confidence level.

    Read through ``pred.calib.ppf`` at the stored levels :math:`(1 \mp c)/2` (and 0.5),
    so a quantile Dataset gives back its own stored values exactly; a normal one
    is exact at every level.

    Parameters
    ----------
    pred : xarray.Dataset
        A predictive Dataset (validated: crossing quantiles are refused).
    confidence_levels : ndarray, shape (C,)
    median : bool
        Also read the median.
    missing : {"raise", "interpolate"}
        A level the Dataset does not store: refuse it, or read it by interpolation.

    Returns
    -------
    dict
        ``"lo"``, ``"hi"`` (and ``"med"``): arrays of shape (obs, C) (``"med"``: (obs,)).

    References
    ----------
    Romano et al. (2019), §3 (the base's quantiles at :math:`\alpha/2` and :math:`1 - \alpha/2`).
    """
    c = np.asarray(confidence_levels, float)
    wanted = np.concatenate([(1.0 - c) / 2.0, (1.0 + c) / 2.0] + ([np.array([0.5])] if median else []))
    levels = _match_levels(pred, wanted, missing)
    vals = np.asarray(pred.calib.ppf(levels).values, float)
    out = {"lo": vals[:, : c.size], "hi": vals[:, c.size : 2 * c.size]}
    if median:
        out["med"] = vals[:, -1]
    return out


def _checked_predictive(pred: xr.Dataset, owner: Any, argument: str) -> xr.Dataset:
    """``check_predictive`` with a CQR message for crossing quantiles."""
    try:
        return check_predictive(pred, owner, argument)
    except ValueError as err:
        if "cross" not in str(err):
            raise
        raise ValueError(
            f"crossing quantiles in {argument}: {err} CQR needs q_lo <= q_med <= q_hi at every point; build the "
            "Dataset with calibprob.from_quantiles (which sorts each row, with a warning) or fix the base."
        ) from None


class ConformalizedQuantileRegression(BaseEstimator):
    r"""Conformalized quantile regression on any quantile predictive: ``fit(pred_cal, y_cal)``, ``predict(pred)``.

    Parameters
    ----------
    score : {"symmetric", "asymmetric", "cqr-r", "cqr-m"}, default "symmetric"
        The conformity score (module docstring): two-sided (Romano et al. 2019),
        asymmetric (one correction per tail), CQR-r (scaled by the width) or CQR-m
        (scaled by the distances to the median; the Dataset must give the 0.5
        quantile). Called ``variant`` before 0.2.0: that keyword still works,
        with a ``FutureWarning``, until 0.3.0.
    confidence_level : float or sequence of float, default 0.9
        The levels :math:`c`; at each, the base's quantiles at :math:`(1 \mp c)/2`
        are conformalized. Checked at :meth:`fit` against the number of
        calibration points.
    missing_levels : {"raise", "interpolate"}, default "raise"
        A quantile level the base's Dataset does not store: refuse it (naming the
        levels and the fix), or read it by the contract's interpolation (which is
        then part of the base whose coverage CQR corrects; the guarantee still holds).
    eps : float, default 0
        Floor of the CQR-r / CQR-m scales; 0 refuses a zero scale.

    Attributes
    ----------
    confidence_levels_ : ndarray, shape (C,)
    corrections_ : ndarray, shape (C, 2)
        :math:`(Q_{lo}, Q_{hi})` per level (equal for all but the asymmetric variant).
    scores_ : ndarray, shape (n_cal, C) or (n_cal, C, 2)
        Calibration scores per level.
    n_calibration_ : int

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> mu = rng.normal(size=600); y = mu + 2.0 * rng.normal(size=600)   # base too narrow
    >>> base = calibprob.normal(mu, np.ones(600))
    >>> cqr = calibprob.ConformalizedQuantileRegression().fit(base.isel(obs=slice(300)), y[:300])
    >>> iv = cqr.predict(base.isel(obs=slice(300, None))).sel(confidence_level=0.9)
    >>> 0.85 < float(((y[300:] >= iv["lower"]) & (y[300:] <= iv["upper"])).mean()) < 0.96
    True

    References
    ----------
    Romano, Y., Patterson, E. and Candès, E. J. (2019). Conformalized quantile regression. NeurIPS 32.
    Sesia, M. and Candès, E. J. (2020). A comparison of some conformal quantile regression methods. Stat 9(1).
    """

    corrections_: np.ndarray | None
    _weights_support = "conformal"  # calibprob.weights.weight_support
    # a calibprob.weights object (may hold a fitted classifier) is not written by save(); pass weights= after load
    _transient_attrs: tuple[str, ...] = ("weights_",)
    calibration_weights_: np.ndarray | None = None
    weights_ = None

    @renamed_keywords({"variant": "score"})
    def __init__(
        self,
        *,
        score: str = "symmetric",
        confidence_level: ArrayLike = 0.9,
        missing_levels: str = "raise",
        eps: float = 0.0,
    ) -> None:
        self.score = score
        self.confidence_level = confidence_level
        self.missing_levels = missing_levels
        self.eps = eps

    def _check_params(self) -> str:
        variant = check_choice(self.score, "score", VARIANTS)
        check_choice(self.missing_levels, "missing_levels", ("raise", "interpolate"))
        if not (np.isfinite(self.eps) and self.eps >= 0):
            raise ValueError(f"eps must be a finite number >= 0; got {self.eps!r}. Pass 0 or e.g. 1e-6.")
        return variant

    def _mondrian_sides(self) -> int:
        """The Mondrian minimum group size: one rank per interval (1), or one per side for "asymmetric" (2)."""
        # symmetric, CQR-r and CQR-m correct both ends by the one order statistic ceil(c (n+1)),
        # so n >= ceil(1/alpha) - 1 points resolve c; the asymmetric variant needs each side's
        # ceil((1 - alpha/2)(n+1)) <= n, the two-sided minimum.
        return 2 if self.score == "asymmetric" else 1

    def fit(
        self,
        pred_cal: xr.Dataset,
        y_cal: ArrayLike,
        *,
        groups: ArrayLike | None = None,
        weights: ArrayLike | Weights | None = None,
    ) -> Self:
        """Score the calibration points at every confidence level; returns ``self``.

        Parameters
        ----------
        pred_cal : xarray.Dataset
            The base's predictive distribution on the calibration data, storing the
            levels :math:`(1 \\mp c)/2` (and 0.5 for CQR-m).
        y_cal : array_like or 1-D xarray.DataArray, shape (n_cal,)
        groups : array_like, xarray.DataArray or str, optional
            One label per calibration point (or an ``obs`` coordinate name): Mondrian CQR, one
            clone per group (:class:`calibprob.Mondrian`), each level on its own.
        weights : array_like, pandas.Series, xarray.DataArray or calibprob.weights.Weights, optional
            One weight per calibration point (e.g. the likelihood ratio :math:`w(X_i)`) or a
            :mod:`calibprob.weights` object: weighted CQR (:func:`weighted_cqr_corrections`), the
            test points' weights given to :meth:`predict_interval`. Stored as
            ``calibration_weights_`` (the points' order); within groups with ``groups=``.

        Raises
        ------
        ValueError
            Missing or crossing quantile levels, too few calibration points for a
            level (the message says how many), non-finite targets, a length mismatch.
        TypeError
            ``pred_cal`` is not a predictive Dataset.
        """
        if fit_with_groups(self, pred_cal, y_cal, groups, weights):
            return self
        variant = self._check_params()
        levels, _ = resolve_levels(self.confidence_level)
        pred = _checked_predictive(pred_cal, self, "pred_cal")
        y = check_targets(y_cal, pred.sizes["obs"], "y_cal", obs=pred["obs"].values)
        self.weights_ = weights if isinstance(weights, Weights) else None
        self.calibration_weights_ = None if weights is None else resolve(weights, y.size, obs=pred, side="calibration")
        q = read_quantiles(pred, levels, median=variant == "cqr-m", missing=self.missing_levels)
        scores, corrections = [], []
        for j, c in enumerate(levels):
            s = cqr_scores(y, q["lo"][:, j], q["hi"][:, j], score=variant, q_med=q.get("med"), eps=self.eps)
            corrections.append(cqr_corrections(s, c, score=variant))
            scores.append(s)
        self.scores_ = np.stack(scores, axis=1)
        self.corrections_ = np.asarray(corrections, float)
        self.confidence_levels_ = levels
        self.n_calibration_ = int(y.size)
        return self

    def _level_index(self, confidence_level: ArrayLike | None) -> tuple[np.ndarray, np.ndarray, bool]:
        check_is_fitted(self, "corrections_", method="fit")
        if confidence_level is None:
            # no level asked: the fitted ones, in the form the constructor was given (a scalar drops the
            # dimension, as Mondrian's predict_interval does for the same default; calibprob.testing.check_level_dims)
            scalar = np.ndim(self.confidence_level) == 0
            return self.confidence_levels_, np.arange(self.confidence_levels_.size), scalar
        levels, scalar = resolve_levels(confidence_level)
        idx = [int(np.argmin(np.abs(self.confidence_levels_ - c))) for c in levels]
        bad = [float(c) for c, i in zip(levels, idx) if abs(self.confidence_levels_[i] - c) > LEVEL_TOL]
        if bad:
            raise ValueError(
                f"confidence_level {bad} was not calibrated: this model was fitted at "
                f"{self.confidence_levels_.tolist()}. Refit with confidence_level including these levels."
            )
        return levels, np.asarray(idx), scalar

    def predict_interval(
        self,
        pred: xr.Dataset,
        confidence_level: ArrayLike | None = None,
        *,
        groups: ArrayLike | None = None,
        weights: ArrayLike | Weights | None = None,
    ) -> xr.Dataset:
        """CQR intervals at one or several of the fitted confidence levels.

        Parameters
        ----------
        pred : xarray.Dataset
            The base's predictive distribution at new inputs.
        confidence_level : float or sequence, optional
            Fitted levels to return (default: all, as the constructor's ``confidence_level`` was given); a
            scalar drops the ``confidence_level`` dimension (kept as a scalar coordinate), a sequence keeps it.
        groups : array_like, xarray.DataArray or str, optional
            Per-row group labels when fitted with ``groups=``.
        weights : array_like or calibprob.weights.Weights, optional
            After a weighted :meth:`fit`: one positive weight per row of ``pred`` (default: the
            weights object given to :meth:`fit`); each row's corrections are the weighted
            quantiles of the scores with the row's mass at :math:`+\\infty`. A level the weights'
            effective sample size cannot support is refused, naming the attainable level
            (:func:`calibprob.weights.check_attainable`); the diagnostics are kept as
            ``weight_diagnostics_`` and in the attributes.

        Returns
        -------
        xarray.Dataset
            The interval family: ``lower``, ``upper`` over (obs, confidence_level).
        """
        mondrian = predict_with_groups(self, groups)
        if mondrian is not None:
            return mondrian.predict_interval(pred, confidence_level, groups=groups, weights=weights)
        levels, idx, scalar = self._level_index(confidence_level)
        pred = _checked_predictive(pred, self, "pred")
        variant = self._check_params()
        q = read_quantiles(pred, levels, median=variant == "cqr-m", missing=self.missing_levels)
        m = pred.sizes["obs"]
        attrs = {"n_calibration": self.n_calibration_}
        corrections = self._row_corrections(pred, levels, idx, variant, weights, attrs)
        lower, upper = np.empty((m, levels.size)), np.empty((m, levels.size))
        for j in range(levels.size):
            lower[:, j], upper[:, j] = cqr_intervals(
                q["lo"][:, j], q["hi"][:, j], corrections[j], score=variant, q_med=q.get("med"), eps=self.eps
            )
        ds = interval_dataset(lower, upper, levels, scalar, method=f"cqr-{variant}", attrs=attrs)
        return ds.assign_coords(obs=pred["obs"].values)

    def _row_corrections(
        self,
        pred: xr.Dataset,
        levels: np.ndarray,
        idx: np.ndarray,
        variant: str,
        weights: ArrayLike | Weights | None,
        attrs: dict,
    ) -> list:
        """Per requested level, ``(Q_lo, Q_hi)``: the fitted numbers, or per row under weights."""
        test = split_test_weights(self, weights, pred.sizes["obs"], obs=pred)
        if test is None:
            return [tuple(np.asarray(self.corrections_)[k]) for k in idx]
        t = checked_test_weights(self, levels, test, attrs)
        cal_w = cast(np.ndarray, self.calibration_weights_)  # test weights exist only after a weighted fit
        return [weighted_cqr_corrections(self.scores_[:, k], cal_w, t, c, score=variant) for c, k in zip(levels, idx)]

    def predict(
        self,
        pred: xr.Dataset,
        *,
        confidence_level: ArrayLike | None = None,
        groups: ArrayLike | None = None,
        weights: ArrayLike | Weights | None = None,
    ) -> xr.Dataset:
        """The interval family at every fitted level (or those asked for), ``confidence_level`` kept as a dimension.

        Parameters
        ----------
        pred : xarray.Dataset
        confidence_level : float or sequence, optional
        groups : array_like, xarray.DataArray or str, optional
            Per-row group labels when fitted with ``groups=``.
        weights : array_like or calibprob.weights.Weights, optional
            As in :meth:`predict_interval`.

        Returns
        -------
        xarray.Dataset
            ``lower``, ``upper`` over (obs, confidence_level), ``attrs["family"] == "interval"``.
        """
        mondrian = predict_with_groups(self, groups)
        if mondrian is not None:
            levels = mondrian.confidence_levels_ if confidence_level is None else np.atleast_1d(confidence_level)
            return mondrian.predict_interval(pred, list(np.asarray(levels, float)), groups=groups, weights=weights)
        check_is_fitted(self, "corrections_", method="fit")
        levels = self.confidence_levels_ if confidence_level is None else np.atleast_1d(confidence_level)
        return self.predict_interval(pred, confidence_level=list(np.asarray(levels, float)), weights=weights)
