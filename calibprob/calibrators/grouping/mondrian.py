r"""Mondrian (group-conditional) calibration of any distribution post-processor.

A Mondrian taxonomy :math:`\kappa` gives every observation a group :math:`k` (a category, a
bin of a feature, of the predicted :math:`\sigma` or of the predicted value; see
:func:`calibprob.bins`). Mondrian calibration fits the calibrator *separately within each
group* on the :math:`n_k` calibration points of that group, and calibrates a test point with
its own group's calibrator. For split conformal and the conformal predictive system this
turns the marginal guarantee into a group-conditional one (Vovk et al. 2005, §4.5; Boström
et al. 2021): when calibration and test points are exchangeable within each group and
:math:`\kappa` does not look at the calibration targets,

.. math::

    P\bigl(Y \in \Gamma^c(X) \mid \kappa(X) = k\bigr) \ge c \quad\text{for every group } k,

and the smoothed CPS value :math:`Q(Y, \tau)` is uniform within every group.

Minimum group sizes (exact)
---------------------------
With :math:`\alpha = 1 - c` taken as an exact fraction (``calibprob._core.ranks.exact_level``, so
``0.9`` is :math:`9/10`, never the binary float :math:`0.9000000000000000222\ldots`), every minimum
below is ``calibprob._core.ranks.least_n``:

* a symmetric score's interval (split conformal with the absolute or normalised score)
  needs :math:`\lfloor \alpha (n_k+1) \rfloor \ge 1`, i.e.
  :math:`n_k \ge \lceil 1/\alpha \rceil - 1` (:func:`min_group_size`, ``sides=1``);
* a two-sided interval from a signed score or a quantile function (CPS, the recalibrators,
  GP-Beta, the online recalibrator) needs both
  :math:`\lfloor (\alpha/2)(n_k+1) \rfloor \ge 1` and
  :math:`\lceil (1-\alpha/2)(n_k+1) \rceil \le n_k`, i.e.
  :math:`n_k \ge \lceil 2/\alpha \rceil - 1` (``sides=2``): 9 at :math:`c = 0.8`, 19 at 0.9,
  39 at 0.95;
* a quantile at level :math:`p` needs :math:`1 \le p(n_k+1) \le n_k`, i.e.
  :math:`n_k \ge \lceil \max(1/p, 1/(1-p)) \rceil - 1` (:func:`min_group_size_for_level`).

A group below the minimum for a confidence level gets the interval
:math:`(-\infty, \infty)` at that level — explicitly infinite, never NaN, never clipped — and
:meth:`Mondrian.fit` warns naming the group, its size and the size it needs. crepes computes
``int((1 - c) * (n + 1))`` in floating point and so asks one point more than needed at
:math:`c = 0.8` and :math:`0.9` (``docs/methods/mondrian.md``, "Minimum group sizes"); calibprob does not.

References
----------
Vovk, V., Gammerman, A. and Shafer, G. (2005). *Algorithmic Learning in a Random World*,
Springer, §4.5 (Mondrian conformal predictors).
Boström, H., Johansson, U. and Löfström, T. (2021). Mondrian conformal predictive
distributions. *PMLR* 152, 24–38.
Lei, J. et al. (2018). Distribution-free predictive inference for regression. *JASA*
113(523) (the split-conformal ranks).
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any, Self, TypeAlias, cast

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.estimator import BaseEstimator, check_is_fitted, check_predictive, clone
from calibprob._core.labels import refuse_kind_clash
from calibprob._core.ranks import exact_level, least_n
from calibprob._core.validation import GROUP_COORD, check_confidence_levels, check_groups, check_levels, check_targets
from calibprob.calibrators._weighted import WeightedBlock
from calibprob.predictive import (
    DEFAULT_LEVELS,
    REACH_VAR,
    CalibprobWarning,
    from_quantiles,
    normal,
    quantile_ppf,
    reach_variable,
)
from calibprob.registry import CLASSES, METHODS, load_object
from calibprob.weights import GivenWeights, Weights, resolve, resolve_test_weights, weight_support

#: What ``groups=`` takes on every calibrator: one label per row (array-like or a DataArray along ``obs``), the
#: name of an ``obs`` coordinate holding them, or None (no grouping).
GroupsLike: TypeAlias = ArrayLike | xr.DataArray | str | None

__all__ = [
    "Mondrian",
    "min_group_size",
    "min_group_size_for_level",
    "interval_sides",
    "POOLED_COORD",
    "fit_with_groups",
    "predict_with_groups",
    "keep_group_coord",
]

#: Name of the per-observation boolean coordinate that marks rows calibrated by the pooled fallback.
POOLED_COORD = "mondrian_pooled"

_FALLBACKS = (None, "pooled")


def min_group_size(confidence_level: float, method: object = None, *, sides: int = 1) -> int:
    r"""The smallest group size whose conformal interval at ``confidence_level`` is finite.

    Computed in exact rational arithmetic on :math:`\alpha = 1 - c`:

    .. math::

        n_{\min} = \Bigl\lceil \frac{s}{\alpha} \Bigr\rceil - 1,

    the least :math:`n` with :math:`\lfloor (\alpha/s)(n+1) \rfloor \ge 1` — for ``sides=2``
    also :math:`\lceil (1-\alpha/2)(n+1) \rceil \le n`, the same condition.

    Parameters
    ----------
    confidence_level : float
        :math:`c` in (0, 1), read as the fraction it stands for (``calibprob._core.ranks.exact_level``).
    method : str or calibrator, optional
        A calibrator kind of :data:`calibprob.registry.METHODS` that :class:`Mondrian` can wrap
        (a distribution post-processor: ``"split-conformal"``, ``"conformal-predictive"``,
        ``"isotonic"``, ``"cqr"``, ...) or an unfitted calibrator instance. Its count is the one
        :class:`Mondrian` applies per group (the calibrator's ``_mondrian_sides``; 1 if its
        guarantee needs no minimum), so ``sides`` is then ignored.
    sides : {1, 2}, default 1
        1: a symmetric score (one rank, :math:`\lceil c(n+1) \rceil`); 2: a signed score or a
        quantile function, each tail getting :math:`\alpha/2`.

    Returns
    -------
    int

    Examples
    --------
    >>> [min_group_size(c) for c in (0.8, 0.9, 0.95, 0.99)]
    [4, 9, 19, 99]
    >>> [min_group_size(c, sides=2) for c in (0.8, 0.9, 0.95)]
    [9, 19, 39]
    >>> min_group_size(0.9, "split-conformal"), min_group_size(0.9, "isotonic")
    (9, 19)

    References
    ----------
    Vovk, Gammerman & Shafer (2005), §4.5; ``docs/methods/mondrian.md``, "Minimum group sizes".
    """
    exact_level(confidence_level, "confidence_level")  # names the parameter in the error
    if method is not None:
        sides = interval_sides(_method_instance(method))
        if sides == 0:
            return 1  # a guarantee on any stream: one point gives a finite interval
    if sides not in (1, 2):
        raise ValueError(f"sides must be 1 (symmetric score) or 2 (signed score / quantiles); got {sides!r}.")
    return max(least_n(confidence_level, rule="upper" if sides == 1 else "two-sided"), 1)


def _method_instance(method: object) -> Any:
    """An unfitted calibrator for ``method`` (a registry kind Mondrian can wrap, or an instance)."""
    if not isinstance(method, str):
        if not callable(getattr(method, "fit", None)):
            raise TypeError(
                f"method must be a calibrator kind name or a calibrator instance; got {method!r}. "
                "Pass e.g. method='split-conformal' or method=calibprob.IsotonicRecalibrator()."
            )
        return method
    wrappable = sorted(k for k, e in METHODS.items() if e.family == "distribution" and e.cls is not None)
    entry = METHODS.get(method)
    if entry is None or method not in wrappable:
        why = (
            "is not a calibrator kind" if entry is None else f"is a {entry.family!r} kind, which Mondrian does not wrap"
        )
        raise ValueError(
            f"method={method!r} {why}. Pass one of the kinds Mondrian wraps per group: {', '.join(wrappable)}."
        )
    # a wrappable kind has a class (filtered above)
    return load_object(CLASSES[cast(str, entry.cls)].target)(**dict(entry.fixed))


def min_group_size_for_level(level: float, *, symmetric: bool = False) -> int:
    r"""The smallest group size whose calibrated quantile at ``level`` is defined.

    A quantile function built on the :math:`n+1` convention (the :math:`j`-th smallest of
    :math:`n` scores at level :math:`j/(n+1)`) reaches :math:`p` iff
    :math:`1 \le p(n+1) \le n`:

    .. math::

        n_{\min}(p) = \Bigl\lceil \max\Bigl(\frac1p, \frac1{1-p}\Bigr) \Bigr\rceil - 1;

    a symmetric score mirrored around the centre reaches :math:`p` iff
    :math:`|2p - 1|(n+1) \le n`, i.e. :func:`min_group_size` at :math:`c = |2p-1|`.
    Exact rational arithmetic throughout.

    Parameters
    ----------
    level : float
        :math:`p` in (0, 1).
    symmetric : bool, default False

    Returns
    -------
    int

    Examples
    --------
    >>> min_group_size_for_level(0.05), min_group_size_for_level(0.5)
    (19, 1)
    >>> min_group_size_for_level(0.95, symmetric=True)
    9

    References
    ----------
    Vovk et al. (2020), Neurocomputing 397 (the split-CPS ranks).
    """
    exact_level(level, "level")  # names the parameter in the error
    return max(least_n(level, rule="mirrored" if symmetric else "quantile"), 1)


def interval_sides(calibrator: Any) -> int:
    """1 if ``calibrator``'s intervals come from one symmetric rank, 0 if it needs no minimum, else 2.

    A calibrator declares it with a method ``_mondrian_sides()`` (split conformal: 1 or 2 by
    its score; the online recalibrator: 0, its guarantee holds on any stream); a newly
    registered post-processor without one is treated as a two-sided quantile function (2),
    the safe side.
    """
    hook = getattr(calibrator, "_mondrian_sides", None)
    return int(hook()) if callable(hook) else 2


def _needed(calibrator: Any, levels: np.ndarray) -> np.ndarray:
    """The minimum group size per confidence level for ``calibrator``."""
    sides = interval_sides(calibrator)
    if sides == 0:
        return np.ones(levels.size, dtype=np.int64)
    return np.array([min_group_size(float(c), sides=sides) for c in levels], dtype=np.int64)


def _normalise_labels(values: np.ndarray) -> np.ndarray:
    """Object arrays of str (pandas text columns) as a str array, so that they save to netCDF."""
    if values.dtype.kind == "O":
        items = values.tolist()
        if all(isinstance(v, str) for v in items):
            return np.asarray(items, dtype=str)
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in items):
            return np.asarray(items, dtype=np.int64)
        return np.asarray([str(v) for v in items], dtype=str)
    return values


def _describe(label: Any) -> str:
    return repr(label.item() if hasattr(label, "item") else label)


def keep_group_coord(out: xr.Dataset, pred: xr.Dataset) -> xr.Dataset:
    """``out`` with ``pred``'s ``group`` coordinate along ``obs``, when ``pred`` carries one."""
    if isinstance(pred, xr.Dataset) and GROUP_COORD in pred.coords and GROUP_COORD not in out.coords:
        coord = pred.coords[GROUP_COORD]
        if coord.dims == ("obs",) and out.sizes.get("obs") == coord.size:
            out = out.assign_coords({GROUP_COORD: ("obs", coord.values)})
    return out


class Mondrian(BaseEstimator):
    r"""Group-conditional (Mondrian) calibration: one clone of ``calibrator`` per group.

    ``fit(pred_cal, y_cal, groups=...)`` fits a fresh clone of ``calibrator`` on each group's
    calibration points; ``predict(pred, groups=...)`` sends every row to its own group's
    calibrator and reassembles the rows in their original order. Any distribution
    post-processor works — split conformal on a predictive, the conformal predictive system,
    isotonic, Vovk, Marx, variance scaling, GP-Beta (per group: the group's own Beta map,
    which is the honest reading of "per group"; GP-Beta with the group as a covariate would
    share strength but give no per-group guarantee), the online recalibrator (one stream per
    group) — and so does a newly registered one: the wrapper uses only ``fit``, ``predict``
    and, where present, ``predict_interval`` and ``confidence_level``.

    The guarantee, the exact minimum group sizes and the infinite bounds below them are in the
    module docstring (``calibprob.calibrators.grouping.mondrian``).

    Parameters
    ----------
    calibrator : distribution post-processor
        The calibrator to run per group (cloned; the instance passed is not fitted).
    fallback : {None, "pooled"}, default None
        ``None``: a group too small for a confidence level gets :math:`(-\infty, \infty)` at
        that level, and a group never seen in calibration is an error. ``"pooled"``: such rows
        are calibrated by one clone fitted on all calibration points, and marked by the
        boolean coordinate ``mondrian_pooled`` of the output.
    confidence_level : float or sequence of float, optional
        The level(s) whose minimum group size :meth:`fit` checks (and warns about), and the
        default of :meth:`predict_interval`; ``None`` takes ``calibrator.confidence_level``
        when it has one, else 0.9.

    Attributes
    ----------
    groups_ : ndarray, shape (K,)
        The groups seen in calibration, sorted.
    counts_ : ndarray of int, shape (K,)
        :math:`n_k`, calibration points per group.
    calibrators_ : list
        The fitted clone per group (``None`` for a group too small for every level).
    pooled_ : estimator or None
        The clone fitted on all points (``fallback="pooled"`` only).
    min_sizes_ : ndarray of int, shape (C,)
        The minimum group size per level of ``confidence_levels_``.
    reach_ : ndarray, shape (K,)
        Each group's reach :math:`R_k = 1 - s/(n_k+1)`: the largest central confidence level its own
        calibration states (1.0: every level), the "reaches" column of the small-group table.
    small_groups_ : list of tuple
        ``(group, n_k, [(level, size needed), ...])`` for every group below a level's minimum size.
    confidence_levels_ : ndarray, shape (C,)

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.calibrators.conformal import SplitConformalCalibrator
    >>> rng = np.random.default_rng(0)
    >>> g = rng.integers(0, 2, size=2000)                    # group 1 is three times noisier
    >>> mu = rng.normal(size=2000); y = mu + np.where(g == 1, 3.0, 1.0) * rng.normal(size=2000)
    >>> base = calibprob.normal(mu, np.ones(2000))
    >>> m = calibprob.Mondrian(SplitConformalCalibrator()).fit(base.isel(obs=slice(1000)), y[:1000], groups=g[:1000])
    >>> iv = m.predict_interval(base.isel(obs=slice(1000, None)), groups=g[1000:])
    >>> hit = (y[1000:] >= iv["lower"].values) & (y[1000:] <= iv["upper"].values)
    >>> [bool(0.86 < hit[g[1000:] == k].mean() < 0.95) for k in (0, 1)]
    [True, True]

    References
    ----------
    Vovk, Gammerman & Shafer (2005), §4.5; Boström, Johansson & Löfström (2021), PMLR 152.
    """

    _method = "mondrian"
    # weights within groups: whatever the wrapped calibrator supports (calibprob.weights.weight_support)
    _weights_support = "inner"
    # a calibprob.weights object (may hold a fitted classifier) is not written by save(); pass weights= after load
    _transient_attrs: tuple[str, ...] = ("weights_",)

    groups_: np.ndarray
    weights_ = None
    weighted_: bool = False

    def __init__(
        self,
        calibrator: Any = None,
        *,
        fallback: str | None = None,
        confidence_level: ArrayLike | None = None,
    ) -> None:
        self.calibrator = calibrator
        self.fallback = fallback
        self.confidence_level = confidence_level

    # -- checks ---------------------------------------------------------------
    def _check_params(self) -> None:
        cal = self.calibrator
        if cal is None or not (hasattr(cal, "fit") and hasattr(cal, "predict") and hasattr(cal, "get_params")):
            raise TypeError(
                "calibrator must be a calibprob distribution post-processor (fit(pred_cal, y_cal), predict(pred)), "
                f"e.g. Mondrian(ConformalPredictiveSystem()); got {type(cal).__name__}."
            )
        if "estimator" in cal.get_params() and cal.get_params()["estimator"] is not None:
            raise TypeError(
                f"calibrator {type(cal).__name__} holds an estimator= (the model-aware form); Mondrian wraps "
                "distribution post-processors. Pass the model's predictive Dataset to a post-processor, or use "
                "SplitConformalRegressor(...).fit(X, y, groups=...)."
            )
        if self.fallback not in _FALLBACKS:
            raise ValueError(f"fallback must be None or 'pooled'; got {self.fallback!r}.")

    def _level_param(self) -> ArrayLike:
        level = self.confidence_level
        if level is None:
            level = getattr(self.calibrator, "confidence_level", None)
        return 0.9 if level is None else level

    def _levels(self) -> np.ndarray:
        return check_confidence_levels(self._level_param(), "confidence_level")

    def _labels(self, groups: ArrayLike | None, pred: xr.Dataset, name: str) -> np.ndarray:
        if groups is None:
            if GROUP_COORD not in pred.coords:
                raise ValueError(
                    f"{name} is required: Mondrian calibrates per group. Pass {name}= (an array, a DataArray or the "
                    f"name of an obs coordinate), or give the prediction an obs coordinate {GROUP_COORD!r}."
                )
            groups = GROUP_COORD
        labels = check_groups(groups, pred.sizes["obs"], pred=pred, name=name)
        assert labels is not None  # groups is not None here
        return _normalise_labels(labels)

    # -- fit --------------------------------------------------------------------
    def _fit_one(
        self, sub: xr.Dataset, y: np.ndarray, ok: np.ndarray, levels: np.ndarray, weights: GivenWeights | None = None
    ) -> Any:
        """A clone fitted on one group, told only the levels its size resolves (None if it cannot fit).

        A group too small for every requested level is still fitted at the highest level it
        resolves, :math:`c = 1 - s/(n_k+1)`, so that :meth:`predict_interval` gives it finite
        bounds at the lower levels it can resolve.
        """
        est = clone(self.calibrator)
        if "confidence_level" in est.get_params():
            lv = levels[ok]
            if lv.size == 0:
                top = 1 - Fraction(max(interval_sides(est), 1), sub.sizes["obs"] + 1)
                if top <= 0:
                    return None
                lv = np.array([float(top)])
            est.set_params(confidence_level=float(lv[0]) if lv.size == 1 else lv.tolist())
        try:
            return est.fit(sub, y) if weights is None else est.fit(sub, y, weights=weights)
        except ValueError:
            if ok.any():
                raise
            return None  # too small to fit at all: infinite bounds, warned above

    def fit(
        self,
        pred_cal: xr.Dataset,
        y_cal: ArrayLike,
        *,
        groups: ArrayLike | None = None,
        weights: ArrayLike | Weights | None = None,
    ) -> Self:
        """Fit one clone of ``calibrator`` per group; returns ``self``.

        Parameters
        ----------
        pred_cal : xarray.Dataset
            The base's predictive distribution on the calibration data.
        y_cal : array_like, shape (n_cal,)
        groups : array_like, xarray.DataArray or str, optional
            One label per calibration point, or the name of an ``obs`` coordinate of
            ``pred_cal``; default: its ``group`` coordinate.
        weights : array_like, pandas.Series, xarray.DataArray or calibprob.weights.Weights, optional
            One weight per calibration point (or a :mod:`calibprob.weights` object): each group's
            calibrator is fitted on its own rows' weights, so the weighted rule runs *within*
            groups (the weights of other groups never enter a group's threshold). Needs a
            calibrator that takes weights (:func:`calibprob.weights.weight_support`); not with
            ``fallback="pooled"``.

        Returns
        -------
        Mondrian

        Warns
        -----
        CalibprobWarning
            A group smaller than the minimum size of a confidence level (named, with the size
            it needs); its intervals at that level are infinite.
        """
        self._check_params()
        pred = check_predictive(pred_cal, self, "pred_cal")
        y = check_targets(y_cal, pred.sizes["obs"], "y_cal", obs=pred["obs"].values)
        labels = self._labels(groups, pred, "groups")
        w = self._calibration_weights(weights, pred)
        levels = self._levels()
        need = _needed(self.calibrator, levels)
        uniq, codes = np.unique(labels, return_inverse=True)
        counts = np.bincount(codes, minlength=uniq.size).astype(np.int64)
        # said up front, before any group is fitted: which groups miss which levels (one warning)
        small = _small_table(uniq, counts, levels, need.astype(np.int64))
        if small:
            warnings.warn(self._small_message(small), CalibprobWarning, stacklevel=2)
        fitted = []
        for k in range(uniq.size):
            rows = np.flatnonzero(codes == k)
            fitted.append(
                self._fit_one(pred.isel(obs=rows), y[rows], counts[k] >= need, levels, self._rows_weights(w, rows))
            )
        self.groups_, self.counts_, self.calibrators_ = uniq, counts, fitted
        self.confidence_levels_, self.min_sizes_ = levels, need.astype(np.int64)
        self.small_groups_ = small
        self.reach_ = np.array([1.0 if (r := self._reach_of(int(c))) is None else float(r) for c in counts])
        self.pooled_ = None
        if self.fallback == "pooled":
            self.pooled_ = self._fit_one(pred, y, pred.sizes["obs"] >= need, levels)
        return self

    def _calibration_weights(self, weights: ArrayLike | Weights | None, pred: xr.Dataset) -> np.ndarray | None:
        """The calibration weights of every row (None unweighted); remembers the weights object for prediction."""
        self.weights_, self.weighted_ = (weights if isinstance(weights, Weights) else None), weights is not None
        if weights is None:
            return None
        support = weight_support(self.calibrator)
        if support is None:
            raise TypeError(
                f"weights= was given, but {type(self.calibrator).__name__} does not take weights; drop weights=, or "
                "wrap a calibrator that does (calibprob.weights.weight_support names them)."
            )
        if self.fallback == "pooled":
            raise ValueError(
                "weights= with fallback='pooled' is not supported: the pooled calibrator would mix the groups' "
                "weights. Pass fallback=None (infinite bounds for small groups), or drop weights=."
            )
        return resolve(weights, pred.sizes["obs"], obs=pred, side="calibration")

    def _rows_weights(self, w: np.ndarray | None, rows: np.ndarray) -> GivenWeights | None:
        """One group's calibration weights, carrying the weights object's ``on_small`` choice."""
        if w is None:
            return None
        on_small = self.weights_.on_small if self.weights_ is not None else "raise"
        return GivenWeights(w[rows], on_small=on_small)

    def _test_weights(self, pred: xr.Dataset, weights: ArrayLike | Weights | None) -> np.ndarray | None:
        """The test weights of every row of ``pred`` for a conformal calibrator fitted with weights; else None."""
        if self.weighted_ and weight_support(self.calibrator) != "conformal":
            if weights is not None:
                raise ValueError(
                    f"{type(self.calibrator).__name__} uses weights in its fitting loss only: pass weights= to fit, "
                    "not to the prediction."
                )
            return None
        test = resolve_test_weights(
            self.weighted_, weights, self.weights_, pred.sizes["obs"], owner="Mondrian", obs=pred
        )
        return None if test is None else test[0]

    def _extrapolates(self) -> bool:
        """True when the inner calibrator defines every level itself (``extrapolate=True``)."""
        hook = getattr(self.calibrator, "_mondrian_extrapolates", None)
        return bool(hook()) if callable(hook) else False

    def _small_message(self, table: list[tuple]) -> str:
        """The one warning of a call: every group below a level's minimum size, with its levels."""
        if self.fallback == "pooled":
            what = "calibrated by the pooled fallback"
        elif self._extrapolates():
            what = "given the group calibrator's extrapolated quantiles (extrapolate=True; no finite-sample guarantee)"
        else:
            what = "given (-inf, inf)"
        return (
            f"{len(table)} group(s) below the minimum group size of a confidence level: "
            f"{_table_text(table, self._reach_of)}. "
            f"At each listed level only, those groups' rows are {what}; their other levels keep the group's own "
            "calibration. Merge small groups (e.g. fewer bins), add calibration data"
            + ("" if self.fallback == "pooled" else ", or pass fallback='pooled'")
            + ". The table: the fitted Mondrian's small_groups_, and the small_groups attribute of predict_interval."
        )

    # -- dispatch ---------------------------------------------------------------
    def _codes(self, labels: np.ndarray) -> np.ndarray:
        """Index into ``groups_`` per row; -1 for a group calibration never saw."""
        refuse_kind_clash(labels, self.groups_, "groups", "calibration")
        uniq, inverse = np.unique(labels, return_inverse=True)
        seen = {g.item() if hasattr(g, "item") else g: k for k, g in enumerate(self.groups_)}
        index = np.array([seen.get(u.item() if hasattr(u, "item") else u, -1) for u in uniq], dtype=np.int64)
        codes = index[inverse] if uniq.size else np.zeros(0, np.int64)
        if (codes < 0).any() and self.fallback != "pooled":
            unseen = [_describe(u) for u, i in zip(uniq, index) if i < 0]
            raise ValueError(
                f"groups holds {len(unseen)} group(s) that calibration never saw: {', '.join(unseen[:10])} "
                f"(calibrated groups: {', '.join(_describe(g) for g in self.groups_[:10])}). Calibrate with "
                "points of every group, map the new ones to a calibrated group, or pass fallback='pooled'."
            )
        return codes

    def _prepare(self, pred: xr.Dataset, groups: ArrayLike | None) -> tuple[xr.Dataset, np.ndarray, np.ndarray]:
        check_is_fitted(self, "groups_", method="fit")
        pred = check_predictive(pred, self, "pred")
        labels = self._labels(groups, pred, "groups")
        return pred, labels, self._codes(labels)

    def _blocks(
        self, codes: np.ndarray, test_weights: np.ndarray | None = None
    ) -> Iterator[tuple[int, np.ndarray, Any]]:
        """``(group index or -1 for pooled rows, row indices, estimator)`` per non-empty block.

        With ``test_weights`` each estimator comes wrapped with its rows' weights (``WeightedBlock``).
        """
        for k in np.unique(codes):
            rows = np.flatnonzero(codes == k)
            est = self.pooled_ if k < 0 else self.calibrators_[k]
            if test_weights is not None and est is not None:
                est = WeightedBlock(est, test_weights[rows], _describe(self.groups_[k]))
            yield int(k), rows, est

    def _finish(self, ds: xr.Dataset, pred: xr.Dataset, labels: np.ndarray, pooled: np.ndarray | None) -> xr.Dataset:
        inner = getattr(self.calibrator, "_method", type(self.calibrator).__name__)
        ds = ds.assign_coords({GROUP_COORD: ("obs", labels)})
        if self.fallback == "pooled" and pooled is not None:
            dims = ("obs", "level") if "level" in ds.dims else ("obs", "confidence_level")
            ds = ds.assign_coords({POOLED_COORD: (dims, pooled)})
        ds.attrs["method"] = f"{self._method}-{ds.attrs.get('method') or inner}"
        ds.attrs["n_groups"] = int(self.groups_.size)
        return ds.assign_coords(obs=pred["obs"].values)

    # -- predict ----------------------------------------------------------------
    def predict(
        self,
        pred: xr.Dataset,
        *,
        levels: ArrayLike | None = None,
        groups: ArrayLike | None = None,
        weights: ArrayLike | Weights | None = None,
    ) -> xr.Dataset:
        r"""Each row calibrated by its own group's calibrator, as a predictive Dataset.

        Every group keeps the quantiles its own size resolves, each level on its own (as
        :meth:`predict_interval`): group :math:`k` states quantiles at the probabilities
        :math:`p` with :math:`n_k \ge` :func:`min_group_size_for_level` (the levels of the
        central intervals up to its *reach* :math:`R_k = 1 - s/(n_k+1)`, :math:`s` the
        calibrator's sides). The output's variable ``reach(obs)`` carries :math:`R_k` per row, and
        ``calib.ppf`` / ``calib.interval`` give :math:`-\infty` / :math:`+\infty` beyond it, so
        ``calib.interval(c)`` is :meth:`predict_interval` at ``c`` (bit for bit at a level whose
        ends are stored quantiles of a calibrator without its own ``predict_interval``). With
        ``fallback="pooled"`` the levels a group misses come from the pooled calibrator
        instead (``mondrian_pooled(obs, level)``), at those levels only.

        The stored quantiles beyond a row's reach (the contract needs finite numbers) are the
        group calibrator's own where it defines them (variance scaling), else the contract's
        Gaussian tail rule continuing the group's own quantile function: the CDF, density,
        CRPS, NLL and moments read that finite law, the ends the calibrator states are infinite.

        Parameters
        ----------
        pred : xarray.Dataset
            The base's predictive distribution at new inputs.
        levels : array_like, optional
            Output levels; default: every level of the groups' own default grids (their
            union), or ``pred``'s levels when no group has a default grid of its own.
        groups : array_like, xarray.DataArray or str, optional
            One label per row, or an ``obs`` coordinate name; default: ``pred``'s ``group``.
        weights : array_like or calibprob.weights.Weights, optional
            After a weighted :meth:`fit` of a conformal calibrator: one positive weight per row
            (default: the weights object given to :meth:`fit`); each group's rows go to its
            calibrator with their own weights.

        Returns
        -------
        xarray.Dataset
            ``quantile(obs, level)`` in ``pred``'s row order, with the ``group`` coordinate,
            ``reach(obs)`` when a row's calibration does not reach every level (and
            ``mondrian_pooled(obs, level)`` with ``fallback="pooled"``). An intervals-only
            calibrator (CQR, conditional conformal: its ``predict`` has no ``levels``) gives the
            interval family of :meth:`predict_interval` at every fitted level, as its own
            ``predict`` does.
        """
        if _gives_intervals(self.calibrator):
            if levels is not None:
                raise ValueError(
                    f"levels= was given, but {type(self.calibrator).__name__} predicts intervals only (no quantile "
                    "levels). Drop levels=, or call predict_interval(pred, confidence_level=...)."
                )
            check_is_fitted(self, "groups_", method="fit")
            return self.predict_interval(pred, self.confidence_levels_.tolist(), groups=groups, weights=weights)
        pred, labels, codes = self._prepare(pred, groups)
        codes = self._route_unfitted(codes, "predict")
        blocks = list(self._blocks(codes, self._test_weights(pred, weights)))
        defaults: dict = {}
        if levels is None:
            grid = self._default_grid(pred, blocks, defaults)
        else:
            grid = check_levels(levels, "levels")
        n = codes.size
        reach = np.ones(n)
        pooled = np.zeros((n, grid.size), dtype=bool)
        parts = {}
        for k, rows, est in blocks:
            sub = pred.isel(obs=rows)
            ds, r, used = self._block(k, est, sub, grid, defaults.get(k))
            parts[k] = (rows, ds)
            reach[rows] = r
            pooled[rows] = used
        out = _assemble(parts, n, grid)
        if (reach < 1.0).any():
            out[REACH_VAR] = reach_variable(reach)
        return self._finish(out, pred, labels, pooled if self.fallback == "pooled" else None)

    def _default_grid(self, pred: xr.Dataset, blocks: list, defaults: dict) -> np.ndarray:
        """The union of the groups' default grids (to 1e-12); ``pred``'s levels when no group has one."""
        grids = []
        for k, rows, est in blocks:
            try:
                defaults[k] = est.predict(pred.isel(obs=rows))
            except ValueError:
                continue  # too small for its default grid: it takes the others' (its reach says what it states)
            grids.append(np.asarray(defaults[k]["level"].values, float))
        if not grids:
            return np.asarray(pred.calib.levels if "level" in pred.coords else DEFAULT_LEVELS, float)
        union = np.sort(np.concatenate(grids))
        return union[np.concatenate([[True], np.diff(union) > 1e-12])]

    def _reach(self, k: int) -> Fraction | None:
        r"""Group ``k``'s reach :math:`R_k = 1 - s/(n_k+1)` (the pooled calibrator's for ``k = -1``).

        The largest central confidence level whose interval its own ranks resolve:
        :math:`c \le R_k` iff :math:`n_k \ge` :func:`min_group_size` at :math:`c`. ``None``: every
        level (the online recalibrator, or an extrapolating calibrator without the pooled fallback).
        """
        return self._reach_of(int(self.counts_.sum()) if k < 0 else int(self.counts_[k]))

    def _reach_of(self, n: int) -> Fraction | None:
        """:meth:`_reach` of a group of ``n`` calibration points."""
        sides = interval_sides(self.calibrator)
        if sides == 0 or (self._extrapolates() and self.fallback != "pooled"):
            return None
        return max(1 - Fraction(sides, n + 1), Fraction(0))

    def _inside(self, k: int, grid: np.ndarray) -> np.ndarray:
        """Mask of the quantile levels group ``k`` resolves (exact: :func:`min_group_size_for_level`)."""
        if self._reach(k) is None:
            return np.ones(grid.size, dtype=bool)
        n = int(self.counts_.sum()) if k < 0 else int(self.counts_[k])
        return n >= _level_needs(tuple(grid.tolist()), interval_sides(self.calibrator) == 1)

    def _block(
        self, k: int, est: Any, sub: xr.Dataset, grid: np.ndarray, default: xr.Dataset | None
    ) -> tuple[xr.Dataset, float, np.ndarray]:
        """One block's Dataset on ``grid``, its rows' reach, and the (rows, level) mask of pooled values."""
        inside = self._inside(k, grid)
        used = np.zeros((sub.sizes["obs"], grid.size), dtype=bool)
        reach = self._reach(k)
        r = 1.0 if reach is None else float(reach)
        if k < 0:
            used[:, inside] = True  # unseen (or unfittable) groups' rows: the pooled calibrator wherever it resolves
        if default is not None and inside.all() and np.array_equal(default["level"].values, grid):
            return default, r, used  # the group's own default prediction, as it is
        ds = self._own_on_grid(k, est, sub, grid, inside)
        if self.fallback != "pooled" or k < 0 or inside.all() or self.pooled_ is None:
            return ds, r, used
        # the pooled calibrator at the levels this group misses (and only there), where it resolves
        pool_in = self._inside(-1, grid) & ~inside
        if not pool_in.any():
            return ds, r, used
        pq = self._own_on_grid(-1, self.pooled_, sub, grid, self._inside(-1, grid)).calib.quantiles
        q = ds.calib.quantiles.copy()
        q[:, ~inside] = pq[:, ~inside]  # beyond the pooled reach too: the pooled placeholders, monotone with it
        if inside.any():
            # a quantile function cannot cross: a pooled end at a missed level stays outside the group's own
            # outermost stated quantile (a pooled interval narrower than the group's own at a lower level is
            # widened to it; predict_interval reports the pooled ends as they are)
            idx = np.arange(grid.size)
            first, last = np.flatnonzero(inside)[[0, -1]]
            low, high = ~inside & (idx < first), ~inside & (idx > last)
            q[:, low] = np.minimum(q[:, low], q[:, [first]])
            q[:, high] = np.maximum(q[:, high], q[:, [last]])
        used[:, pool_in] = True
        pooled_reach = self._reach(-1)
        r = max(r, 1.0 if pooled_reach is None else float(pooled_reach))
        return from_quantiles(q, grid, method=ds.attrs.get("method", "")), r, used

    def _own_on_grid(self, k: int, est: Any, sub: xr.Dataset, grid: np.ndarray, inside: np.ndarray) -> xr.Dataset:
        """``est``'s quantiles on ``grid``: its own at the levels it resolves, finite placeholders beyond.

        Beyond them: the calibrator's own values where it defines every level (variance scaling,
        extrapolation), else the contract's Gaussian tail rule continuing its quantiles at the
        levels it resolves (the reach's outermost probabilities included, so that a group
        resolving fewer than two of the requested levels still has a quantile function).
        """
        if inside.all():
            return self._predict_block(est, sub, grid, k)
        try:
            return est.predict(sub, levels=grid)
        except ValueError:
            pass  # the calibrator refuses levels its size does not resolve: continue its quantile function
        lo, hi = _reach_probabilities(
            int(self.counts_.sum()) if k < 0 else int(self.counts_[k]), interval_sides(self.calibrator)
        )
        stated = grid[inside]
        extra = [v for v in (lo, 0.5, hi) if not np.isclose(stated, v, rtol=0.0, atol=1e-9).any()]
        aux = np.sort(np.concatenate([stated, extra]))
        own = self._predict_block(est, sub, aux, k)
        q_aux = own.calib.quantiles
        q = np.empty((sub.sizes["obs"], grid.size))
        q[:, inside] = q_aux[:, np.searchsorted(aux, stated)]
        q[:, ~inside] = quantile_ppf(q_aux, aux, grid[~inside])
        return from_quantiles(q, grid, method=own.attrs.get("method", ""))

    def _route_unfitted(self, codes: np.ndarray, what: str) -> np.ndarray:
        """Rows of a group too small to fit at all go to the pooled fallback, or raise.

        A group that fits keeps its own calibrator at every level it resolves; the fallback
        takes only the levels it misses (in :meth:`predict`).
        """
        for k, est in enumerate(self.calibrators_):
            if est is None and (codes == k).any():
                if self.fallback != "pooled":
                    raise ValueError(
                        f"group {_describe(self.groups_[k])} has {int(self.counts_[k])} calibration point(s), too "
                        f"few to fit its calibrator (minimum group size: {self._need_text()}), so it has no "
                        f"calibrated distribution to {what}. Use predict_interval (infinite bounds for it), merge groups, "
                        "or pass fallback='pooled'."
                    )
                codes = np.where(codes == k, -1, codes)
        return codes

    def _need_text(self) -> str:
        return ", ".join(f"{c:g} needs {m}" for c, m in zip(self.confidence_levels_, self.min_sizes_))

    def _predict_block(self, est: Any, sub: xr.Dataset, levels: np.ndarray | None, k: int) -> xr.Dataset:
        try:
            return est.predict(sub) if levels is None else est.predict(sub, levels=levels)
        except ValueError as err:
            if k < 0:
                raise
            raise ValueError(
                f"group {_describe(self.groups_[k])} ({int(self.counts_[k])} calibration points): {err}"
            ) from err

    def update(self, pred: xr.Dataset, y: ArrayLike, *, groups: ArrayLike | None = None) -> Self:
        """Continue each group's stream (online calibrators): ``update`` of every group's calibrator.

        Parameters
        ----------
        pred : xarray.Dataset
            Base forecasts of the new observations.
        y : array_like, shape (n,)
            Their outcomes.
        groups : array_like, xarray.DataArray or str, optional
            One label per observation; default: ``pred``'s ``group`` coordinate.

        Returns
        -------
        Mondrian
        """
        pred, _, codes = self._prepare(pred, groups)
        y = check_targets(y, pred.sizes["obs"], "y", obs=pred["obs"].values)
        for k, rows, est in self._blocks(self._route_unfitted(codes, "update")):
            if not hasattr(est, "update"):
                raise TypeError(f"{type(est).__name__} has no update: only online calibrators continue a stream.")
            est.update(pred.isel(obs=rows), y[rows])
        return self

    # -- intervals --------------------------------------------------------------
    def predict_interval(
        self,
        pred: xr.Dataset,
        confidence_level: ArrayLike | None = None,
        *,
        groups: ArrayLike | None = None,
        weights: ArrayLike | Weights | None = None,
    ) -> xr.Dataset:
        r"""Central intervals per row from its group's calibrator; infinite where the group is too small.

        A group with :math:`n_k` below :func:`min_group_size` at a level gets
        :math:`(-\infty, \infty)` there (or the pooled fallback, labelled, when asked).
        Calibrators with a ``predict_interval`` (the conformal ones) give their exact conformal
        ends; the others their quantiles at :math:`(1 \mp c)/2`.

        Parameters
        ----------
        pred : xarray.Dataset
        confidence_level : float or sequence, optional
            Default: the levels checked at :meth:`fit`.
        groups : array_like, xarray.DataArray or str, optional
        weights : array_like or calibprob.weights.Weights, optional
            As in :meth:`predict`: each group's weighted conformal intervals (Tibshirani et al.
            2019 within the group), a level its weights cannot attain refused naming the group.

        Returns
        -------
        xarray.Dataset
            The interval family: ``lower``, ``upper`` over (obs, confidence_level), with the
            ``group`` coordinate; a scalar level drops that dimension.
        """
        pred, labels, codes = self._prepare(pred, groups)
        scalar = np.ndim(self._level_param() if confidence_level is None else confidence_level) == 0
        levels = self.confidence_levels_ if confidence_level is None else check_confidence_levels(confidence_level)
        need = _needed(self.calibrator, levels)
        lower = np.full((codes.size, levels.size), -np.inf)
        upper = np.full((codes.size, levels.size), np.inf)
        pooled = np.zeros((codes.size, levels.size), dtype=bool)
        for k, rows, est in self._blocks(codes, self._test_weights(pred, weights)):
            own = self._own_levels(k, need)
            _fill(lower, upper, rows, own, est, pred.isel(obs=rows), levels)
            if self.fallback == "pooled" and not own.all():
                # the pooled fallback at the levels this group misses (and only there), where it resolves
                rest = ~own & (int(self.counts_.sum()) >= need) & (self.pooled_ is not None)
                _fill(lower, upper, rows, rest, self.pooled_, pred.isel(obs=rows), levels)
                pooled[np.ix_(rows, np.flatnonzero(rest))] = True
        out = xr.Dataset(
            {"lower": (("obs", "confidence_level"), lower), "upper": (("obs", "confidence_level"), upper)},
            coords={"obs": np.arange(codes.size), "confidence_level": levels},
            attrs={"method": getattr(self.calibrator, "_method", ""), "family": "interval"},
        )
        out = self._finish(out, pred, labels, pooled)
        table = _small_table(self.groups_, self.counts_, levels, need, present=np.unique(codes[codes >= 0]))
        if table:
            out.attrs["small_groups"] = _table_text(table, self._reach_of)
        return out.isel(confidence_level=0) if scalar else out

    def _own_levels(self, k: int, need: np.ndarray) -> np.ndarray:
        r"""Mask of the levels at which group ``k``'s own calibrator gives the interval.

        The levels its size resolves (:math:`n_k \ge` the minimum at that level), each on its
        own: a level the group misses never moves the group's other levels to the fallback.
        An extrapolating calibrator (``extrapolate=True``) defines every level itself. An
        unseen group (``k = -1``) or a group too small to fit has none.
        """
        if k < 0 or self.calibrators_[k] is None:
            return np.zeros(need.size, dtype=bool)
        if self._extrapolates() and self.fallback != "pooled":
            return np.ones(need.size, dtype=bool)
        return self.counts_[k] >= need


@functools.lru_cache(maxsize=64)
def _level_needs(grid: tuple, symmetric: bool) -> np.ndarray:
    """:func:`min_group_size_for_level` of every level of ``grid`` (once per grid, not once per group)."""
    return np.array([min_group_size_for_level(p, symmetric=symmetric) for p in grid], dtype=np.int64)


def _reach_probabilities(n: int, sides: int) -> tuple[float, float]:
    r"""The outermost probabilities whose quantiles ``n`` scores resolve: :math:`[(1-R)/2, (1+R)/2]`.

    :math:`R = 1 - s/(n+1)`: :math:`[1/(n+1),\ n/(n+1)]` for a quantile function (``sides=2``),
    :math:`[1/(2(n+1)),\ 1 - 1/(2(n+1))]` for a symmetric score mirrored around the centre.
    """
    lo = Fraction(1, (n + 1) * (2 if sides == 1 else 1))
    return float(lo), float(1 - lo)


def _gives_intervals(calibrator: Any) -> bool:
    """True for an intervals-only post-processor: a ``predict_interval``, and a ``predict`` without ``levels``."""
    predict = getattr(calibrator, "predict", None)
    if not hasattr(calibrator, "predict_interval") or predict is None:
        return False
    return "levels" not in inspect.signature(predict).parameters


def _fill(
    lower: np.ndarray,
    upper: np.ndarray,
    rows: np.ndarray,
    mask: np.ndarray,
    est: Any,
    sub: xr.Dataset,
    levels: np.ndarray,
) -> None:
    """Write ``est``'s interval ends at ``levels[mask]`` into the rows ``rows`` of ``lower``/``upper``."""
    if est is None or not mask.any():
        return
    cols = np.flatnonzero(mask)
    lo, hi = _interval_ends(est, sub, levels[mask])
    lower[np.ix_(rows, cols)] = lo
    upper[np.ix_(rows, cols)] = hi


def _small_table(
    groups: np.ndarray, counts: np.ndarray, levels: np.ndarray, need: np.ndarray, present: np.ndarray | None = None
) -> list[tuple]:
    """``(group, n_k, [(level, needed size), ...])`` for every group below a level's minimum size."""
    keep = range(len(groups)) if present is None else present
    table = []
    for k in keep:
        missed = [(float(c), int(m)) for c, m in zip(levels, need) if counts[k] < m]
        if missed:
            table.append((groups[k].item() if hasattr(groups[k], "item") else groups[k], int(counts[k]), missed))
    return table


def _table_text(table: list[tuple], reach: Callable[[int], Fraction | None] | None = None, limit: int = 20) -> str:
    """The table as one line: ``group 7 has 5 calibration point(s), 0.9 needs 9, reaches 0.8333; ...``.

    ``reach(n_k)`` gives the group's reach (:meth:`Mondrian._reach`): the largest central level its
    own calibration states (``None``: every level).
    """
    rows = [
        f"group {label!r} has {n_k} calibration point(s), "
        + ", ".join(f"{c:g} needs {m}" for c, m in missed)
        + ("" if reach is None else _reach_text(reach(n_k)))
        for label, n_k, missed in table
    ]
    more = f"; and {len(rows) - limit} more" if len(rows) > limit else ""
    return "; ".join(rows[:limit]) + more


def _reach_text(reach: Fraction | None) -> str:
    """The table's "levels reached" column: the largest central level the group's own calibration states."""
    if reach is None:
        return ", reaches every level"
    if reach <= 0:
        return ", reaches no level"
    return f", reaches levels up to {float(reach):.4g}"


def _assemble(parts: dict, n: int, levels: np.ndarray) -> xr.Dataset:
    """One predictive Dataset from the groups' parts, rows in their original order.

    All-Gaussian parts (variance scaling of a Gaussian base) stay Gaussian (exact); otherwise
    the quantiles are copied as they are (bit for bit) into one quantile-family Dataset.
    """
    method = next(iter(parts.values()))[1].attrs.get("method", "")
    if all(ds.calib.is_normal for _, ds in parts.values()):
        loc, scale = np.empty(n), np.empty(n)
        for rows, ds in parts.values():
            loc[rows], scale[rows] = ds["loc"].values, ds["scale"].values
        return normal(loc, scale, levels, method=method)
    q = np.empty((n, levels.size))
    for rows, ds in parts.values():
        q[rows] = ds.calib.quantiles
    return from_quantiles(q, levels, method=method)


def _interval_ends(est: Any, sub: xr.Dataset, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)``, each (rows, levels), from one fitted calibrator."""
    if hasattr(est, "predict_interval"):
        iv = est.predict_interval(sub, confidence_level=levels.tolist())
        return (
            iv["lower"].transpose("obs", "confidence_level").values,
            iv["upper"].transpose("obs", "confidence_level").values,
        )
    tails = np.concatenate([(1.0 - levels) / 2.0, (1.0 + levels) / 2.0])
    grid, where = np.unique(tails, return_inverse=True)
    out = est.predict(sub, levels=grid)
    got = np.asarray(out.calib.levels, float)
    if got.shape != grid.shape or not np.allclose(got, grid, rtol=0.0, atol=1e-12):
        # a calibrator that does not honour levels= (a third party's): read its ends by level, never by position
        iv = out.calib.interval(levels.tolist())
        return (
            iv["lower"].transpose("obs", "confidence_level").values,
            iv["upper"].transpose("obs", "confidence_level").values,
        )
    q = out.calib.quantiles
    return q[:, where[: levels.size]], q[:, where[levels.size :]]


# ---------------------------------------------------------------------------
# groups= on the calibrator classes: route to a Mondrian of a clone
# ---------------------------------------------------------------------------


def fit_with_groups(
    calibrator: Any,
    pred_cal: xr.Dataset,
    y_cal: ArrayLike,
    groups: ArrayLike | None,
    weights: ArrayLike | Weights | None = None,
) -> bool:
    """``calibrator.fit(..., groups=groups)``: fit ``calibrator.mondrian_``; False when ``groups`` is None.

    The one routing every post-processor's ``groups=`` uses: a clone of the calibrator (same
    parameters) runs per group inside a :class:`Mondrian` stored as ``mondrian_``; without
    groups ``mondrian_`` is ``None`` and the class fits as before, bit for bit.
    """
    if groups is None:
        calibrator.mondrian_ = None
        return False
    calibrator.mondrian_ = Mondrian(clone(calibrator)).fit(pred_cal, y_cal, groups=groups, weights=weights)
    return True


def predict_with_groups(calibrator: Any, groups: ArrayLike | None) -> Mondrian | None:
    """The fitted :class:`Mondrian` that serves ``predict(..., groups=)``, or None for the ungrouped path."""
    if not hasattr(calibrator, "mondrian_"):
        return None  # not fitted: the class's own check names fit
    mondrian = calibrator.mondrian_
    if mondrian is None:
        if groups is not None:
            raise ValueError(
                f"groups= was given to predict, but this {type(calibrator).__name__} was fitted without groups. "
                "Fit with fit(pred_cal, y_cal, groups=...) for per-group calibration, or drop groups=."
            )
        return None
    return mondrian
