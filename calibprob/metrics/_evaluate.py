"""The public entry points: every metric of a prediction in one Dataset, and the interval family."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.deprecation import renamed_keywords
from calibprob._core.stable import stable_mean, stable_rms
from calibprob._core.validation import (
    check_choice,
    check_confidence_levels,
    check_groups,
    check_int,
    check_levels,
    check_targets,
)
from calibprob.metrics._attrs import _ATTRS
from calibprob.metrics._calibration import (
    calibration_error,
    integrated_absolute_error,
    interval_coverage,
    mean_interval_width,
    ueb_violation_rate,
)
from calibprob.metrics._conditional import coverage_indicators
from calibprob.metrics._levels import (
    _CHUNK,
    DEFAULT_CONFIDENCE_LEVELS,
    PINBALL_LEVELS,
    ece_levels,
    iae_confidence_levels,
)
from calibprob.metrics._reading import (
    _check_pred,
    _check_y,
    _crps_rows,
    _moments_rows,
    _ppf_rows,
    _scalar,
    _ueb_bounds,
)
from calibprob.metrics._scores import crps_normal, interval_score, mean_squared_error, pinball_loss
from calibprob.metrics._shift import add_shift_diagnostics
from calibprob.metrics._temporal import add_time_diagnostics, stream_times
from calibprob.metrics._xr_conditional import (
    check_diagnostic_options,
    check_slab_features,
    diagnostics_dataset,
)
from calibprob.predictive import CalibprobWarning, is_interval_family, validate
from calibprob.predictive._families import NormalFamily
from calibprob.predictive._reach import beyond_reach


@renamed_keywords({"confidence_levels": "confidence_level"})
def evaluate(
    pred: xr.Dataset,
    y: ArrayLike,
    confidence_level: ArrayLike = DEFAULT_CONFIDENCE_LEVELS,
    *,
    n_ece_levels: int = 21,
    point: str = "mean",
    pinball_levels: ArrayLike | None = None,
    chunk_size: int | None = None,
    groups: ArrayLike | str | None = None,
    X: ArrayLike | None = None,
    diagnostics: dict | None = None,
    time_window: int | None = None,
    shift: tuple | xr.Dataset | None = None,
) -> xr.Dataset:
    r"""Every calibration, sharpness and scoring metric of a prediction, in one Dataset.

    Parameters
    ----------
    pred : xarray.Dataset
        A predictive distribution following the contract of
        :mod:`calibprob.predictive` (dims ``obs``, ``level``), or the interval
        family (``lower``/``upper`` over ``obs``, ``confidence_level``, from an
        intervals-only calibrator's ``predict``), which gets the interval
        metrics of :func:`evaluate_intervals`.
    y : array_like or xarray.DataArray, shape (n_obs,)
        Observed values, finite, one per observation of ``pred``.
    confidence_level : float or sequence of float, default (0.5, 0.8, 0.9, 0.95, 0.99)
        Confidence levels in (0, 1) of the central intervals whose
        ``coverage`` and ``width`` are reported (an interval-family prediction:
        default, its own levels). Called ``confidence_levels`` before 0.2.0
        (one name across calibprob): the old keyword warns ``FutureWarning``
        until 0.3.0.
    n_ece_levels : int, default 21
        Number m of evenly spaced ECE levels :math:`p_j = j/(m-1)`.
    point : {"mean", "median"}, default "mean"
        Point prediction scored by ``mse`` / ``rmse``.
    pinball_levels : array_like, optional
        Levels of the pinball loss; default 0.05, 0.10, ..., 0.95.
    chunk_size : int, optional
        Observations per block (default 4096). Memory beyond ``pred`` itself
        is O(chunk_size x L) plus a few numbers per observation, whatever the
        number of observations; the result does not depend on it.
    groups : str, array_like or xarray.DataArray, optional
        One group label per observation (an array, a DataArray by position,
        or the name of an ``obs`` coordinate of ``pred``, by convention
        ``"group"``). Adds the per-group diagnostics below.
    X : array_like, shape (n_obs, n_features), optional
        Features of the observations; adds ``worst_slab_coverage``.
    diagnostics : dict, optional
        Options of the conditional diagnostics: ``num_bins`` (3, the
        size-stratified bins), ``delta`` (0.1, the smallest slab mass),
        ``n_directions`` (1000), ``find_fraction`` (0.25, the share of points
        that finds the worst slab; ``None`` for the in-sample estimate),
        ``seed`` (0), ``hsic_kernel_sizes`` ((1, 1)).
    time_window : int, optional
        Rows per window of the rolling diagnostics of a prediction with a ``time``
        coordinate along ``obs`` (default ``min(100, n_obs)``; at most ``n_obs``).
        Refused without a ``time`` coordinate.
    shift : (X_calibration, X_test) or xarray.Dataset, optional
        Opt-in covariate-shift diagnostic (``calibprob.metrics._shift``): the calibration and
        test inputs, or a :func:`~calibprob.metrics.covariate_shift` result; adds ``shift_auc``,
        ``shift_pvalue``, ``shift_ess``. A prediction from a weighted calibrator adds
        ``weights_ess`` (the effective sample size of its weights) in any case.

    Returns
    -------
    xarray.Dataset
        Scalars (no dims): ``ece``, ``iae``, ``nll``, ``crps``, ``pinball``,
        ``mse``, ``rmse``, ``std`` (mean predictive standard deviation),
        ``ueb_violation``, ``ueb_width``; over ``confidence_level``:
        ``coverage``, ``width``, ``interval_score`` (Gneiting & Raftery 2007,
        eq. 43, the Winkler score); curves: ``observed_fraction(ece_level)``
        (reliability diagram, :func:`~calibprob.metrics.calibration_curve`) and
        ``iae_coverage(iae_level)`` (:func:`~calibprob.metrics.iae`). Every variable carries
        ``long_name``, ``definition`` and ``paper`` attributes. Lower is better
        for all scalars except that ``coverage`` should match its level.

        With ``groups`` or ``X`` (else the Dataset is exactly as without
        them), the conditional-coverage diagnostics of
        ``calibprob.metrics._conditional``: ``ssc_coverage(confidence_level,
        ssc_bin)`` (size-stratified coverage) and ``hsic(confidence_level)``
        always; with ``groups``, over the new ``group`` coordinate,
        ``group_count(group)``, ``group_coverage``, ``group_coverage_se``,
        ``group_width`` and ``group_infinite`` (the share of the group's points
        whose interval is infinite) over (``group``, ``confidence_level``), and over
        ``confidence_level`` ``worst_group`` (label), ``worst_group_coverage``,
        ``worst_group_count``, ``coverage_gap``, ``coverage_gap_weighted``;
        with ``X``, ``worst_slab_coverage(confidence_level)``. Definitions:
        the metrics docs page, "Conditional coverage".

        With a ``time`` coordinate along ``obs`` (strictly increasing: the
        outcomes in time order; else the Dataset is exactly as without it), the
        diagnostics over time of ``calibprob.metrics._temporal``, over the new
        ``time`` coordinate: ``rolling_coverage(time, confidence_level)`` with its
        binomial band ``rolling_coverage_band_lower`` / ``_upper``,
        ``long_run_coverage_error(time, confidence_level)``, and over
        ``confidence_level`` ``long_run_coverage_error_bound`` (the producing
        method's, NaN where it reports none), ``longest_miss_run``,
        ``n_infinite``, ``n_clipped``, ``width_quantiles(confidence_level,
        width_quantile)``, plus ``rolling_crps(time)`` and ``rolling_nll(time)``.

    Raises
    ------
    ValueError
        If ``y`` is not finite or its length differs from the prediction's,
        if a confidence level is outside (0, 1), or if ``pred`` breaks the
        contract (:func:`calibprob.validate`); ``groups`` of the wrong length
        or with missing labels; ``X`` not 2-D, of the wrong number of rows,
        or not finite.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=1000)
    >>> m = calibprob.evaluate(calibprob.normal(np.zeros(1000), np.ones(1000)), y)
    >>> float(m["coverage"].sel(confidence_level=0.9)) > 0.85
    True

    References
    ----------
    See the module docstring: Capone et al. 2023 (ECE, STD, NLL, 95% CI,
    Table 2), Pion & Vazquez 2024 (IAE, coverage, width), Song et al. 2019
    (NLL, MSE, pinball), Gneiting & Raftery 2007 (CRPS).
    """
    if is_interval_family(pred):
        # intervals-only methods (jackknife+, CV+, J+GP, FCP-GP): their predict(X) gives intervals,
        # not a quantile function, so only the interval metrics exist
        out = evaluate_intervals(
            pred, y, confidence_level, groups=groups, X=X, diagnostics=diagnostics, time_window=time_window
        )
        return add_shift_diagnostics(out, pred, shift)
    validate(_check_pred(pred))
    yv = _check_y(pred, y)
    times = stream_times(pred)  # refuses unordered or duplicated times before any work
    plan = _Plan.parse(confidence_level, n_ece_levels, point, pinball_levels, chunk_size)
    cond = _Conditional.parse(pred, yv.size, groups, X, diagnostics)
    totals = _accumulate(pred, yv, plan)
    out = _metrics_dataset(pred, yv, plan, totals)
    out = cond.add_to(out, totals.covered, totals.widths, plan.c)
    out = add_time_diagnostics(
        out,
        pred,
        times,
        time_window,
        totals.covered,
        totals.widths,
        plan.c,
        crps=totals.crps_values,
        logpdf=totals.logpdf,
    )
    return add_shift_diagnostics(out, pred, shift)


@dataclass(frozen=True)
class _Conditional:
    """The checked ``groups``, ``X`` and options of the conditional diagnostics (all None: none asked)."""

    groups: np.ndarray | None
    X: np.ndarray | None
    options: dict

    @classmethod
    def parse(
        cls, pred: xr.Dataset, n: int, groups: ArrayLike | str | None, X: ArrayLike | None, diagnostics: dict | None
    ) -> _Conditional:
        return cls(
            groups=check_groups(groups, n, pred=pred),
            X=None if X is None else check_slab_features(X, n),
            options=check_diagnostic_options(diagnostics),
        )

    def add_to(self, out: xr.Dataset, covered: np.ndarray, widths: np.ndarray, levels: np.ndarray) -> xr.Dataset:
        """``out`` with the diagnostics added; ``out`` itself when neither groups nor X was given."""
        if self.groups is None and self.X is None:
            return out
        diag = diagnostics_dataset(covered, widths, levels, groups=self.groups, X=self.X, options=self.options)
        return out.assign(diag.data_vars).assign_coords(diag.coords)


@dataclass(frozen=True)
class _Plan:
    """The validated arguments of :func:`evaluate` and every probability its metrics need.

    ``blocks`` names the columns of the one quantile evaluation per row block:
    the xarray-layer functions would each re-derive the segment slopes.
    """

    c: np.ndarray  # confidence levels of coverage / width
    p: np.ndarray  # ECE levels, 0 and 1 included
    tau: np.ndarray  # pinball levels
    c_iae: np.ndarray  # confidence levels of the IAE grid
    point: str
    chunk: int

    @classmethod
    def parse(
        cls,
        confidence_levels: ArrayLike,
        n_ece_levels: int,
        point: str,
        pinball_levels: ArrayLike | None,
        chunk_size: int | None,
    ) -> _Plan:
        c = check_confidence_levels(confidence_levels, "confidence_level")
        p = ece_levels(n_ece_levels)
        check_choice(point, "point", ("mean", "median"))
        tau = PINBALL_LEVELS if pinball_levels is None else check_levels(pinball_levels, "pinball_levels")
        chunk = _CHUNK if chunk_size is None else check_int(chunk_size, "chunk_size", minimum=1)
        return cls(c=c, p=p, tau=tau, c_iae=iae_confidence_levels(), point=point, chunk=chunk)

    @property
    def inner(self) -> np.ndarray:
        """ECE levels strictly inside (0, 1): the others need no quantile (Q(0) = -inf, Q(1) = +inf)."""
        return (self.p > 0) & (self.p < 1)

    @property
    def blocks(self) -> dict[str, np.ndarray]:
        return {
            "ece": self.p[self.inner],
            "iae_lo": (1 - self.c_iae) / 2,
            "iae_hi": (1 + self.c_iae) / 2,
            "cov_lo": (1 - self.c) / 2,
            "cov_hi": (1 + self.c) / 2,
            "tau": self.tau,
            "median": np.array([0.5]) if self.point == "median" else np.empty(0),
        }


class _Totals:
    """What outlives a row block: integer counts and O(n) per-observation values.

    The counts (ECE, IAE, coverage) are exact and every per-observation value
    (CRPS, log density, point, sd, pinball row mean, interval widths) is a
    row-wise computation, so the result does not depend on the chunk size
    (tested bit for bit with chunk sizes that do not divide n).
    """

    def __init__(self, n: int, plan: _Plan) -> None:
        self.below = np.zeros(plan.p.size, dtype=np.int64)
        self.iae_hits = np.zeros(plan.c_iae.size, dtype=np.int64)
        self.cov_hits = np.zeros(plan.c.size, dtype=np.int64)
        self.covered = np.empty((n, plan.c.size), dtype=bool)  # per observation: the conditional diagnostics
        self.widths = np.empty((n, plan.c.size))
        self.interval_scores = np.empty((n, plan.c.size))
        self.pin_rows = np.empty(n)
        self.point_pred = np.empty(n)
        self.sd = np.empty(n)
        self.crps_values = np.empty(n)
        self.logpdf = np.empty(n)

    def count(self, sl: slice, yc: np.ndarray, cols: dict[str, np.ndarray], plan: _Plan) -> None:
        """Add the block's calibration counts, interval widths and pinball losses."""
        # y <= Q(0) = -inf never, y <= Q(1) = +inf always
        self.below[plan.p >= 1] += yc.size
        self.below[plan.inner] += np.count_nonzero(yc[:, None] <= cols["ece"], axis=0)
        self.iae_hits += _hits(yc, cols["iae_lo"], cols["iae_hi"])
        self.cov_hits += _hits(yc, cols["cov_lo"], cols["cov_hi"])
        self.widths[sl] = cols["cov_hi"] - cols["cov_lo"]
        self.interval_scores[sl] = interval_score(yc, cols["cov_lo"], cols["cov_hi"], plan.c)
        self.covered[sl] = (cols["cov_lo"] <= yc[:, None]) & (yc[:, None] <= cols["cov_hi"])
        self.pin_rows[sl] = np.mean(pinball_loss(yc, cols["tau"], plan.tau), axis=1)


def _hits(y: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """How many ``y`` lie in ``[lo, hi]``, per column."""
    return np.count_nonzero((lo <= y[:, None]) & (y[:, None] <= hi), axis=0)


def _accumulate(pred: xr.Dataset, yv: np.ndarray, plan: _Plan) -> _Totals:
    """One pass over the observations in blocks of ``plan.chunk`` rows (memory O(chunk x L))."""
    n = yv.size
    blocks = plan.blocks
    probs = np.concatenate(list(blocks.values()))
    fam = pred.calib.family
    normal_family = isinstance(fam, NormalFamily)
    totals = _Totals(n, plan)
    for start in range(0, n, plan.chunk):
        sl = slice(start, min(start + plan.chunk, n))
        yc = yv[sl]
        Q = _ppf_rows(fam, probs, sl, stated=fam.reach is None)
        if normal_family:  # exact moments and CRPS from loc/scale, whatever mean/std are stored
            mean_c, totals.sd[sl] = fam.moments(sl)
            totals.crps_values[sl] = crps_normal(yc, *fam.arrays(sl))
        else:
            mean_c, totals.sd[sl] = _moments_rows(pred, fam, sl)
            totals.crps_values[sl] = _crps_rows(fam, yc, sl, plan.chunk)
        cols = dict(zip(blocks, np.split(Q, np.cumsum([b.size for b in blocks.values()])[:-1], axis=1)))
        if fam.reach is not None:
            # rows of a limited reach (Mondrian): the interval and calibration metrics count the ends the
            # calibrator states (infinite beyond it), the scores (pinball, median) read the finite law, as the CRPS
            for key in ("ece", "iae_lo", "iae_hi", "cov_lo", "cov_hi"):
                cols[key] = beyond_reach(cols[key], blocks[key], fam.reach[sl])
        totals.count(sl, yc, cols, plan)
        totals.point_pred[sl] = mean_c if plan.point == "mean" else cols["median"][:, 0]
        totals.logpdf[sl] = fam.logpdf(yc, sl)
        del Q, cols
    return totals


def _metrics_dataset(pred: xr.Dataset, yv: np.ndarray, plan: _Plan, totals: _Totals) -> xr.Dataset:
    """The Dataset of :func:`evaluate` from the accumulated totals."""
    n = yv.size
    frac = totals.below / n
    iae_cov = totals.iae_hits / n
    with np.errstate(over="ignore"):
        mse_value = mean_squared_error(yv, totals.point_pred)
    if not np.isfinite(mse_value):
        # a representable rmse whose square is not: say so rather than return a silent inf
        warnings.warn(
            f"mse overflows float64 (rmse = {stable_rms(yv - totals.point_pred):.6g}, its square is beyond "
            "1.8e308): use rmse, or rescale y and the prediction.",
            CalibprobWarning,
            stacklevel=3,
        )
    ueb_lo, ueb_hi, ueb_attrs = _ueb_bounds(pred)
    point = plan.point
    data = {
        "ece": _scalar(calibration_error(frac, plan.p), "ece", _ATTRS["ece"] | {"n_ece_levels": plan.p.size}),
        "iae": _scalar(integrated_absolute_error(iae_cov, plan.c_iae), "iae", dict(_ATTRS["iae"])),
        "nll": _scalar(-np.mean(totals.logpdf), "nll", dict(_ATTRS["nll"])),
        "crps": _scalar(stable_mean(totals.crps_values), "crps", dict(_ATTRS["crps"])),
        "pinball": _scalar(stable_mean(totals.pin_rows), "pinball", _ATTRS["pinball"] | {"pinball_levels": plan.tau}),
        "mse": _scalar(mse_value, "mse", _ATTRS["mse"] | {"point": point}),
        # scaled (calibprob.predictive._numerics): a representable rmse even where mse = rmse^2 is not
        "rmse": _scalar(stable_rms(yv - totals.point_pred), "rmse", _ATTRS["rmse"] | {"point": point}),
        "std": _scalar(stable_mean(totals.sd), "std", dict(_ATTRS["std"])),
        "coverage": _along(totals.cov_hits / n, "confidence_level", "coverage"),
        "width": _along(stable_mean(totals.widths, axis=0), "confidence_level", "width"),
        "interval_score": _along(stable_mean(totals.interval_scores, axis=0), "confidence_level", "interval_score"),
        "ueb_violation": _scalar(
            ueb_violation_rate(yv, ueb_lo, ueb_hi), "ueb_violation", _ATTRS["ueb_violation"] | ueb_attrs
        ),
        "ueb_width": _scalar(stable_mean(ueb_hi - ueb_lo), "ueb_width", _ATTRS["ueb_width"] | ueb_attrs),
        "observed_fraction": _along(frac, "ece_level", "observed_fraction"),
        "iae_coverage": _along(iae_cov, "iae_level", "iae_coverage"),
    }
    out = xr.Dataset(data, coords=_coords(confidence_level=plan.c, ece_level=plan.p, iae_level=plan.c_iae))
    out.attrs.update(
        method=str(pred.attrs.get("method", "unknown")),
        family=str(pred.attrs.get("family", "quantile")),
        n_obs=int(n),
        point=point,
        description="calibprob.evaluate: calibration, sharpness and scoring metrics of one prediction",
    )
    return out


_COORD_DESCRIPTIONS = {
    "confidence_level": "confidence level of the central interval",
    "ece_level": "quantile level p_j = j/(m-1)",
    "iae_level": "confidence level 1 - alpha of the central interval",
}


def _coords(**values: np.ndarray) -> dict:
    """The described level coordinates of the metrics Datasets."""
    return {dim: (dim, v, {"description": _COORD_DESCRIPTIONS[dim]}) for dim, v in values.items()}


def _along(values: np.ndarray, dim: str, name: str) -> xr.DataArray:
    """A metric over one level dimension, with the attributes of ``name``."""
    return xr.DataArray(values, dims=(dim,), attrs=dict(_ATTRS[name]))


@renamed_keywords({"confidence_levels": "confidence_level"}, where="calibprob.metrics.evaluate_intervals")
def evaluate_intervals(
    intervals: xr.Dataset,
    y: ArrayLike,
    confidence_level: ArrayLike | None = DEFAULT_CONFIDENCE_LEVELS,
    *,
    groups: ArrayLike | str | None = None,
    X: ArrayLike | None = None,
    diagnostics: dict | None = None,
    time_window: int | None = None,
) -> xr.Dataset:
    r"""The interval metrics of a method that gives intervals but no quantile function.

    Jackknife+, CV+, J+GP, asymJ+GP and the full-conformal GP define central
    intervals at each confidence level, not a predictive distribution, so only
    ``coverage``, ``width`` and the IAE (Pion & Vazquez 2024) are defined for
    them; :func:`evaluate` gives the rest for methods with a quantile function.

    Parameters
    ----------
    intervals : xarray.Dataset
        ``lower`` and ``upper`` over (``obs``, ``confidence_level``). An
        unbounded interval (``-inf``/``inf``, the honest conformal answer when
        too few points resolve a level) counts as covering with infinite width.
    y : array_like, shape (n_obs,)
    confidence_level : float or sequence of float, optional
        Levels of the reported ``coverage`` and ``width``, among those the
        intervals hold; default (or the library's default list): the
        intervals' own levels. The IAE needs the 21 levels of
        :func:`interval_levels`; without them ``iae`` is NaN and its
        ``not_available`` attribute says why (nothing is demanded). Called
        ``confidence_levels`` before 0.2.0 (warns ``FutureWarning`` until 0.3.0).
    groups, X, diagnostics
        The conditional-coverage diagnostics, as in :func:`evaluate` (a
        ``str`` names an ``obs`` coordinate of ``intervals``).
    time_window : int, optional
        With a ``time`` coordinate along ``obs``: the rolling window of the
        diagnostics over time, as in :func:`evaluate` (no CRPS or NLL here).

    Returns
    -------
    xarray.Dataset
        ``iae`` (scalar), ``coverage``, ``width`` and ``interval_score`` over ``confidence_level``,
        ``iae_coverage`` over ``iae_level`` — the same names, dims and
        attributes as in :func:`evaluate`; with ``groups`` or ``X`` also the
        conditional diagnostics of :func:`evaluate`.

    Raises
    ------
    ValueError
        Missing ``lower``/``upper``, a level not provided, non-finite ``y`` or a
        length mismatch.

    Examples
    --------
    >>> import numpy as np, xarray as xr, calibprob
    >>> from calibprob.metrics import evaluate_intervals, interval_levels
    >>> c = interval_levels([0.9]); z = calibprob.normal(np.zeros(500), np.ones(500)).calib.interval(c)
    >>> y = np.random.default_rng(0).normal(size=500)
    >>> m = evaluate_intervals(z, y, [0.9])
    >>> 0.85 < float(m["coverage"].sel(confidence_level=0.9)) < 0.95
    True

    References
    ----------
    Pion, A., Vazquez, E. (2024), Table 1 (IAE, coverage, width); Gneiting, T.,
    Raftery, A. E. (2007), eq. (43) (interval score).
    """
    if not isinstance(intervals, xr.Dataset) or not {"lower", "upper"} <= set(intervals.data_vars):
        raise ValueError(
            "intervals must be an xarray.Dataset with 'lower' and 'upper' variables over "
            "(obs, confidence_level), e.g. from predict_interval(X, confidence_level=[...])."
        )
    if "confidence_level" in intervals.coords and "confidence_level" not in intervals.dims:
        # predict_interval(X, 0.9) drops the dimension for one level (kept as a scalar coordinate, xarray's
        # .sel convention): scored as the one-level interval family it is
        intervals = intervals.expand_dims("confidence_level", axis=-1)
    lo_all = intervals["lower"].transpose("obs", "confidence_level")
    hi_all = intervals["upper"].transpose("obs", "confidence_level")
    yv = check_targets(y, lo_all.sizes["obs"], "y", obs=intervals["obs"].values if "obs" in intervals.coords else None)
    have = np.round(np.asarray(intervals["confidence_level"].values, float), 12)
    # scored at its own levels unless levels were asked for: an interval-only method predicts the levels it was
    # asked for, and the library's default list is not a demand on it
    own = confidence_level is DEFAULT_CONFIDENCE_LEVELS or confidence_level is None
    c = check_confidence_levels(have if own else confidence_level, "confidence_level")
    cond = _Conditional.parse(intervals, yv.size, groups, X, diagnostics)
    times = stream_times(intervals)
    c_iae = iae_confidence_levels()
    lo, hi = _interval_columns(lo_all.values, hi_all.values, have, c)
    iae_attrs = dict(_ATTRS["iae"])
    if all(np.isclose(have, lv, rtol=0, atol=1e-9).any() for lv in np.round(c_iae, 12)):
        lo_i, hi_i = _interval_columns(lo_all.values, hi_all.values, have, c_iae)
        iae_cov = interval_coverage(yv, lo_i, hi_i)
        iae_value = integrated_absolute_error(iae_cov, c_iae)
    else:
        iae_cov, iae_value = np.full(c_iae.size, np.nan), np.nan
        iae_attrs["not_available"] = (
            f"the IAE integrates coverage over the {c_iae.size} levels of calibprob.metrics.interval_levels(); these "
            f"intervals hold {_level_list(have)}. Predict at those levels to have it."
        )
    with np.errstate(invalid="ignore"):
        widths = mean_interval_width(lo, hi)
        scores = stable_mean(interval_score(yv, lo, hi, c), axis=0)
    data = {
        "iae": _scalar(iae_value, "iae", iae_attrs),
        "coverage": _along(interval_coverage(yv, lo, hi), "confidence_level", "coverage"),
        "width": _along(widths, "confidence_level", "width"),
        "interval_score": _along(scores, "confidence_level", "interval_score"),
        "iae_coverage": _along(iae_cov, "iae_level", "iae_coverage"),
    }
    out = xr.Dataset(data, coords=_coords(confidence_level=c, iae_level=c_iae))
    out.attrs.update(
        method=str(intervals.attrs.get("method", "unknown")),
        family="intervals",
        n_obs=int(yv.size),
        description="calibprob.evaluate_intervals: interval metrics of an interval-only method",
    )
    if times is None and cond.groups is None and cond.X is None:
        return add_time_diagnostics(out, intervals, times, time_window, None, None, c)
    covered, widths = coverage_indicators(yv, lo, hi)
    out = cond.add_to(out, covered, widths, c)
    return add_time_diagnostics(out, intervals, times, time_window, covered, widths, c)


def _level_list(levels: np.ndarray) -> str:
    """Levels as short decimals (``0.8, 0.9``), never float noise such as 0.07500000000000001."""
    return ", ".join(f"{float(v):.10g}" for v in levels)


def _interval_columns(
    lower: np.ndarray, upper: np.ndarray, have: np.ndarray, levels: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The ``(obs, level)`` columns of ``lower`` / ``upper`` at ``levels`` (``have``: their levels, rounded)."""
    idx = []
    for lv in np.round(levels, 12):
        hit = np.flatnonzero(np.isclose(have, lv, rtol=0, atol=1e-9))
        if hit.size == 0:
            raise ValueError(
                f"intervals lack confidence_level={lv:g}; they hold {_level_list(have)}. Ask for those levels "
                "(or leave confidence_level out: intervals are scored at their own), or predict at this one."
            )
        idx.append(hit[0])
    return lower[:, idx], upper[:, idx]
