"""The ranking's statistics: paired differences, coverage standard errors, the worst group, convergence flags.

:func:`rank_results` ranks the pipelines of each data set; the rules are in :mod:`calibprob.compare.ranking`,
their text in :mod:`calibprob.compare.ranking.text`.
"""

from __future__ import annotations

from typing import cast, overload

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob.bases._pymc_sampling import RHAT_MAX  # r-hat above it in any repetition flags the base

#: Dimensions whose labels together name a pipeline, in label order ("base/calibrator").
PIPELINE_DIMS = ("base", "calibrator")


#: Proper scores a ranking may use (both lower is better).
RANK_SCORES = ("nll", "crps")


#: A difference within this many paired standard errors of the best is a tie;
#: coverage short of nominal by more than this many standard errors under-covers.
TIE_SE = 2.0


#: Root variables of a results file holding a base's convergence diagnostics (written by ``pymc-linear``).
CONVERGENCE_VARS = ("rhat", "divergences")


def _check_by(by: object) -> str:
    if not isinstance(by, str) or by not in RANK_SCORES:
        raise ValueError(
            f"by must be one of {', '.join(map(repr, RANK_SCORES))} (a proper score, lower is "
            f"better); got {by!r}. Rank by width through the interval ranking instead."
        )
    return by


def paired_ranking(scores: ArrayLike, eligible: ArrayLike | None = None) -> dict:
    r"""Rank the rows of a (pipeline × repetition) score matrix; lower is better.

    Parameters
    ----------
    scores : array_like, shape (P, R)
        ``scores[p, r]``: the score of pipeline ``p`` on repetition ``r``; NaN
        where it was not scored (a failed task or calibrator), ``inf`` allowed
        (an infinite interval width ranks last).
    eligible : array_like of bool, shape (P,), optional
        Pipelines that may be ranked (default all). Others get rank 0.

    Returns
    -------
    dict of ndarray, each shape (P,)
        ``mean`` and ``se`` (:math:`\operatorname{sd}/\sqrt{R_p}` over the
        repetitions where the pipeline was scored), ``diff`` (:math:`\Delta_p`,
        mean difference to the best over the shared repetitions, 0 for the
        best), ``dse`` (its paired standard error, module docstring; 0 for the
        best, NaN with fewer than two repetitions), ``rank`` (1 = best, 0 = not
        ranked), ``tied`` (the best, and those with :math:`\Delta_p \le 2\,
        \mathrm{dse}_p`), ``n`` (repetitions scored).

    Notes
    -----
    The shared repetitions are those where at least one eligible pipeline was
    scored (a task that failed as a whole is dropped for all). An eligible
    pipeline missing from any of them is *incomplete* and not ranked: its mean
    is over different splits, so neither it nor its difference is paired.

    Examples
    --------
    >>> from calibprob.compare.ranking import paired_ranking
    >>> r = paired_ranking([[1.0, 2.0, 3.0], [1.1, 2.2, 3.0]])
    >>> r["rank"].tolist(), r["diff"].round(3).tolist(), r["tied"].tolist()
    ([1, 2], [0.0, 0.1], [True, True])
    """
    s = np.asarray(scores, dtype=float)
    if s.ndim != 2:
        raise ValueError(f"scores must be a 2-D (pipeline, repetition) array; got shape {s.shape}.")
    P, _ = s.shape
    elig = np.ones(P, bool) if eligible is None else np.asarray(eligible, bool)
    if elig.shape != (P,):
        raise ValueError(f"eligible must have one entry per pipeline ({P}); got shape {elig.shape}.")
    present = ~np.isnan(s)
    n = present.sum(axis=1)
    out = {k: np.full(P, np.nan) for k in ("mean", "se", "diff", "dse")}
    out["rank"] = np.zeros(P, np.int32)
    out["tied"] = np.zeros(P, bool)
    out["n"] = n.astype(np.int32)
    with np.errstate(invalid="ignore", divide="ignore"):
        for p in np.flatnonzero(n > 0):
            x = s[p, present[p]]
            out["mean"][p] = x.mean()
            out["se"][p] = x.std(ddof=1) / np.sqrt(x.size) if x.size > 1 else np.nan
        shared = (present & elig[:, None]).any(axis=0)
        complete = elig & shared.any() & present[:, shared].all(axis=1)
        if not complete.any():
            return out
        sub = s[:, shared]
        mean = sub.mean(axis=1)
        # lowest mean first; ties in the mean keep the spec's order (stable sort)
        order = [p for p in np.argsort(np.where(complete, mean, np.inf), kind="stable") if complete[p]]
        best = order[0]
        R = sub.shape[1]
        for k, p in enumerate(order):
            out["rank"][p] = k + 1
            out["mean"][p] = mean[p]
            if p == best:
                out["diff"][p], out["dse"][p], out["tied"][p] = 0.0, 0.0, True
                continue
            d = sub[p] - sub[best]
            # (mean of d equals mean[p] - mean[best] when both are finite; inf - inf stays NaN)
            out["diff"][p] = mean[p] - mean[best]
            out["dse"][p] = np.sqrt(R) * d.std(ddof=1) / R if R > 1 else np.nan
            out["tied"][p] = bool(out["diff"][p] <= TIE_SE * out["dse"][p])
    return out


def coverage_se(coverage: xr.DataArray, n_test: xr.DataArray, level: float | xr.DataArray) -> xr.DataArray:
    r"""Standard error of the mean coverage over repetitions (module docstring).

    :math:`\max(\sqrt{\alpha(1-\alpha)/N},\ \operatorname{sd}_r(c_r)/\sqrt{R})`,
    with :math:`N` the test points pooled over the repetitions where the
    coverage is not NaN.

    Parameters
    ----------
    coverage : xarray.DataArray
        Per-repetition coverage, with a ``repetition`` dimension.
    n_test : xarray.DataArray
        Test points per repetition (broadcast against ``coverage``).
    level : float or xarray.DataArray
        Nominal level(s) :math:`\alpha`.

    Returns
    -------
    xarray.DataArray
        ``coverage`` without its ``repetition`` dimension.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from calibprob.compare.ranking import coverage_se
    >>> cov = xr.DataArray([0.9, 0.9, 0.9, 0.9], dims="repetition")
    >>> round(float(coverage_se(cov, xr.DataArray([100] * 4, dims="repetition"), 0.9)), 4)  # sqrt(.09/400)
    0.015
    """
    present = coverage.notnull()
    N = n_test.where(present).sum("repetition")
    R = present.sum("repetition")
    binom = np.sqrt(level * (1 - level) / N.where(N > 0))
    rep = coverage.std("repetition", ddof=1, skipna=True) / np.sqrt(R.where(R > 1))
    return xr.apply_ufunc(np.fmax, binom, rep)


def undercovers(coverage: xr.DataArray, n_test: xr.DataArray, level: float | xr.DataArray) -> xr.DataArray:
    r"""Whether the mean coverage falls short of ``level`` by more than 2 standard errors.

    :math:`\bar c < \alpha - 2\,\mathrm{se}` with :func:`coverage_se`. Never
    true where the coverage is NaN (not scored).

    Parameters
    ----------
    coverage, n_test, level
        As for :func:`coverage_se`.

    Returns
    -------
    xarray.DataArray of bool

    Examples
    --------
    >>> import xarray as xr
    >>> from calibprob.compare.ranking import undercovers
    >>> n = xr.DataArray([100, 100], dims="repetition")
    >>> bool(undercovers(xr.DataArray([0.84, 0.84], dims="repetition"), n, 0.9))   # se 0.0212
    True
    >>> bool(undercovers(xr.DataArray([0.86, 0.87], dims="repetition"), n, 0.9))
    False
    """
    mean = coverage.mean("repetition", skipna=True)
    short = mean < level - TIE_SE * coverage_se(coverage, n_test, level)
    return short.fillna(False).astype(bool)


def worst_group_coverage(
    group_coverage: xr.DataArray, group_count: xr.DataArray, level: float | xr.DataArray
) -> xr.Dataset:
    r"""The worst group's coverage pooled over repetitions, its standard error and whether it under-covers.

    :math:`\hat c_g = \sum_r n_{g,r} c_{g,r} / N_g`, :math:`g^* = \arg\min_g \hat c_g`,
    :math:`\mathrm{se} = \sqrt{\alpha(1-\alpha)/N_{g^*}}` (module docstring); the
    group under-covers when :math:`\hat c_{g^*} < \alpha - 2\,\mathrm{se}`.

    Parameters
    ----------
    group_coverage : xarray.DataArray
        Per-repetition coverage of each group, with ``repetition`` and ``group`` dimensions
        (NaN where a group has no test point or the pipeline was not scored).
    group_count : xarray.DataArray
        Test points of each group per repetition (broadcast against ``group_coverage``).
    level : float or xarray.DataArray
        Nominal level(s) :math:`\alpha`.

    Returns
    -------
    xarray.Dataset
        ``worst_group_coverage``, ``worst_group_se``, ``worst_group`` (label as text, ``""``
        when no group was scored) and ``group_undercovers`` (bool), without the
        ``repetition`` and ``group`` dimensions.

    Examples
    --------
    >>> import xarray as xr
    >>> from calibprob.compare.ranking import worst_group_coverage
    >>> cov = xr.DataArray([[0.95, 0.70], [0.93, 0.74]], dims=("repetition", "group"),
    ...                    coords={"group": ["a", "b"]})
    >>> n = xr.DataArray([[100, 50], [100, 50]], dims=("repetition", "group"))
    >>> r = worst_group_coverage(cov, n, 0.9)     # b: 0.72 pooled over 100 points, se 0.03
    >>> str(r["worst_group"].item()), round(float(r["worst_group_coverage"]), 4), bool(r["group_undercovers"])
    ('b', 0.72, True)
    """
    n = group_count.broadcast_like(group_coverage).where(group_coverage.notnull())
    N = n.sum("repetition", skipna=True)
    pooled = (group_coverage * n).sum("repetition", skipna=True) / N.where(N > 0)
    # argmin over groups; a pipeline with no scored group gets NaN and label ""
    filled = pooled.fillna(np.inf)
    idx = filled.argmin("group")
    worst = pooled.isel(group=idx)
    n_worst = N.isel(group=idx)
    se = cast(xr.DataArray, np.sqrt(level * (1 - level) / n_worst.where(n_worst > 0)))
    labels = np.asarray([str(v) for v in group_coverage["group"].values], dtype=object)
    label = xr.DataArray(labels[idx.values], dims=idx.dims, coords=idx.coords).where(worst.notnull(), "")
    short = (worst < level - TIE_SE * se).fillna(False).astype(bool)
    drop = [c for c in ("group",) if c in worst.coords]
    return xr.Dataset(
        {
            "worst_group_coverage": worst.drop_vars(drop),
            "worst_group_se": se.drop_vars(drop, errors="ignore"),
            "worst_group": label.drop_vars(drop, errors="ignore").astype(str),
            "group_undercovers": short.drop_vars(drop, errors="ignore"),
        }
    )


def _pipeline_dims(ds: xr.Dataset | xr.DataArray) -> list[str]:
    dims = [d for d in PIPELINE_DIMS if d in ds.dims]
    if not dims:
        raise ValueError(
            f"results have none of the pipeline dimensions {PIPELINE_DIMS}; give the root "
            "Dataset of a results file (calibprob.compare.load_results)."
        )
    return dims


@overload
def stack_pipelines(ds: xr.Dataset) -> xr.Dataset: ...


@overload
def stack_pipelines(ds: xr.DataArray) -> xr.DataArray: ...


def stack_pipelines(ds: xr.Dataset | xr.DataArray) -> xr.Dataset | xr.DataArray:
    """Stack the pipeline dimensions of ``ds`` into one ``pipeline`` dimension with string labels.

    Labels are the component labels joined by ``/`` in :data:`PIPELINE_DIMS`
    order (a single dimension keeps its own labels). Each component is kept as
    a string coordinate ``pipeline_<dim>`` along ``pipeline``, so the result
    stays netCDF-safe (no MultiIndex).

    Parameters
    ----------
    ds : xarray.Dataset or xarray.DataArray

    Returns
    -------
    Same type as ``ds``

    Examples
    --------
    >>> import xarray as xr
    >>> from calibprob.compare.ranking import stack_pipelines
    >>> da = xr.DataArray([[1, 2], [3, 4]], dims=("base", "calibrator"),
    ...                   coords={"base": ["gp", "ols"], "calibrator": ["a", "b"]})
    >>> stack_pipelines(da)["pipeline"].values.tolist()
    ['gp/a', 'gp/b', 'ols/a', 'ols/b']
    """
    dims = _pipeline_dims(ds)
    if len(dims) == 1:
        d = dims[0]
        out = ds.rename({d: "pipeline"})
        labels = [str(v) for v in out["pipeline"].values]
        return out.assign_coords(pipeline=labels, **{f"pipeline_{d}": ("pipeline", labels)})  # type: ignore[arg-type]
    stacked = ds.stack(pipeline=dims)
    parts = {d: [str(v) for v in stacked[d].values] for d in dims}
    labels = ["/".join(t) for t in zip(*parts.values())]
    stacked = stacked.drop_vars(["pipeline", *dims])
    coords = {f"pipeline_{d}": ("pipeline", parts[d]) for d in dims}
    return stacked.assign_coords(pipeline=labels, **coords)  # type: ignore[arg-type]  # **coords: coordinates


def _empty(shape: int | tuple[int, ...], key: str) -> np.ndarray:
    """Initial array of a ranking field: 0 for ranks and counts, False for ties, NaN otherwise."""
    if key in ("rank", "n"):
        return np.zeros(shape, np.int32)
    if key == "tied":
        return np.zeros(shape, bool)
    return np.full(shape, np.nan)


def _add_score_ranking(out: xr.Dataset, st: xr.Dataset, by: str) -> None:
    """``score_*`` over (dataset, pipeline): the paired ranking by the proper score ``by``."""
    datasets = st["dataset"].values
    keys = ("mean", "se", "diff", "dse", "rank", "tied", "n")
    score = {k: _empty((datasets.size, st.sizes["pipeline"]), k) for k in keys}
    if by in st:
        for i, d in enumerate(datasets):
            r = paired_ranking(st[by].sel(dataset=d).transpose("pipeline", "repetition").values)
            for k in keys:
                score[k][i] = r[k]
    for k in keys:
        out[f"score_{k}"] = (("dataset", "pipeline"), score[k])
    out["score_mean"].attrs["long_name"] = f"mean {by} over repetitions"


def _add_interval_ranking(out: xr.Dataset, st: xr.Dataset) -> None:
    """Coverage, its se and under-coverage, and the width ranking among the intervals that do not under-cover."""
    levels = st["confidence_level"].values
    cov = st["coverage"]
    n_test = st["n_test"] if "n_test" in st else xr.full_like(cov.isel(pipeline=0, drop=True), np.nan)
    lvl = xr.DataArray(levels, dims="confidence_level", coords={"confidence_level": levels})
    dims = ("dataset", "confidence_level", "pipeline")
    out["coverage"] = cov.mean("repetition", skipna=True).transpose(*dims)
    out["coverage_se"] = coverage_se(cov, n_test, lvl).transpose(*dims)
    out["undercovers"] = undercovers(cov, n_test, lvl).transpose(*dims)
    excluded = out["undercovers"]
    if "group_coverage" in st and "group_count" in st:
        wg = worst_group_coverage(st["group_coverage"], st["group_count"], lvl)
        for name, var in wg.data_vars.items():
            out[name] = var.transpose(*dims)
        excluded = excluded | out["group_undercovers"]
    keys = ("mean", "se", "diff", "dse", "rank", "tied")
    n_d = st.sizes["dataset"]
    width = {k: _empty((n_d, levels.size, st.sizes["pipeline"]), k) for k in keys}
    if "width" in st:
        w = st["width"].transpose(*dims, "repetition").values
        short = excluded.values
        for i in range(n_d):
            for j in range(levels.size):
                r = paired_ranking(w[i, j], eligible=~short[i, j])
                for k in keys:
                    width[k][i, j] = r[k]
    out["width"] = (dims, width.pop("mean"))
    for k, v in width.items():
        out[f"width_{k}"] = (dims, v)


def _add_long_run_ranking(out: xr.Dataset, st: xr.Dataset) -> None:
    r"""``long_run_error_*`` over (dataset, confidence_level, pipeline): the ranking by :math:`|\text{coverage} - c|`.

    On a time split the coverage is the stream's long-run coverage, and its distance to the nominal
    level is what adaptive conformal inference bounds (Gibbs & Candès 2021, Proposition 4.1); lower
    is better, ties within ``TIE_SE`` paired standard errors over repetitions.
    """
    levels = st["confidence_level"].values
    dims = ("dataset", "confidence_level", "pipeline")
    lvl = xr.DataArray(levels, dims="confidence_level", coords={"confidence_level": levels})
    err = abs(st["coverage"] - lvl).transpose(*dims, "repetition").values
    keys = ("mean", "se", "diff", "dse", "rank", "tied")
    res = {k: _empty(err.shape[:3], k) for k in keys}
    for i in range(err.shape[0]):
        for j in range(err.shape[1]):
            r = paired_ranking(err[i, j])
            for k in keys:
                res[k][i, j] = r[k]
    for k, v in res.items():
        out[f"long_run_error_{k}"] = (dims, v)
    out["long_run_error_mean"].attrs["long_name"] = "mean |long-run coverage - nominal| over repetitions"


def _convergence_problem(rhat: np.ndarray | None, divergences: np.ndarray | None) -> str:
    """Why one base on one data set is not converged, over its repetitions ('' when it is)."""
    parts = []
    if rhat is not None:
        # NaN: no diagnostic (ADVI, a base without one); +inf: a chain that never moved, the worst r-hat of all
        r = rhat[~np.isnan(rhat)]
        high = r > RHAT_MAX
        if high.any():
            parts.append(f"max r̂ {r.max():.3f} > {RHAT_MAX:g} in {int(high.sum())} of {r.size} repetition(s)")
    if divergences is not None:
        dv = divergences[np.isfinite(divergences)]
        bad = dv > 0
        if bad.any():
            parts.append(f"{int(dv.sum())} divergent transition(s) in {int(bad.sum())} of {dv.size} repetition(s)")
    return "; ".join(parts)


def _flags(st: xr.Dataset) -> xr.DataArray | None:
    """``base_flag`` over (dataset, pipeline) from stacked results; None without diagnostics."""
    names = [n for n in CONVERGENCE_VARS if n in st]
    if not names:
        return None
    datasets, pipes = st["dataset"].values, st["pipeline"].values
    flags = np.full((datasets.size, pipes.size), "", dtype=object)
    for i, d in enumerate(datasets):
        for k, p in enumerate(pipes):
            at = {"dataset": d, "pipeline": p}
            per_rep = {
                n: np.atleast_1d(st[n].sel({k: v for k, v in at.items() if k in st[n].dims}).values).astype(float)
                for n in names
            }
            flags[i, k] = _convergence_problem(per_rep.get("rhat"), per_rep.get("divergences"))
    return xr.DataArray(
        flags.astype(str),
        dims=("dataset", "pipeline"),
        coords={"dataset": datasets, "pipeline": pipes},
        attrs={
            "long_name": f"why the pipeline's base did not converge (r-hat > {RHAT_MAX:g} or divergences); '' if it did"
        },
    )


def convergence_flags(results: xr.Dataset) -> xr.DataArray | None:
    """Per (dataset, pipeline): why the pipeline's MCMC base did not converge, or ``""``.

    A base is flagged on a data set when its stored ``rhat`` exceeds
    :data:`RHAT_MAX` or its ``divergences`` are positive in any repetition
    (the diagnostics a ``pymc-linear`` base stores per task).

    Parameters
    ----------
    results : xarray.Dataset
        The root of a results file.

    Returns
    -------
    xarray.DataArray of str or None
        ``None`` when the file holds no convergence diagnostics.

    References
    ----------
    Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. and Bürkner, P.-C. (2021).
    Rank-normalization, folding, and localization: an improved R-hat. Bayesian
    Analysis 16(2), 667-718.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from calibprob.compare.ranking import convergence_flags
    >>> res = xr.Dataset(
    ...     {"nll": (("dataset", "repetition", "calibrator"), np.zeros((1, 2, 1))),
    ...      "rhat": (("dataset", "repetition"), [[1.002, 1.08]])},
    ...     coords={"dataset": ["d"], "repetition": [0, 1], "calibrator": ["base"]})
    >>> str(convergence_flags(res).sel(dataset="d", pipeline="base").item())
    'max r̂ 1.080 > 1.01 in 1 of 2 repetition(s)'
    """
    return _flags(stack_pipelines(results))


def rank_results(results: xr.Dataset, by: str = "nll") -> xr.Dataset:
    """The ranking of every data set's pipelines: by a proper score, and by width per level.

    Parameters
    ----------
    results : xarray.Dataset
        The root of a results file (:func:`calibprob.compare.load_results`):
        metrics over ``dataset``, ``repetition`` and the pipeline dimensions
        (``calibrator``; later also ``base``).
    by : {"nll", "crps"}, default "nll"
        The proper score of the first ranking.

    Returns
    -------
    xarray.Dataset
        Over (``dataset``, ``pipeline``): ``score_mean``, ``score_se``,
        ``score_diff``, ``score_dse``, ``score_rank`` (int, 1 = best, 0 = not
        ranked), ``score_tied`` (bool), ``score_n`` (repetitions scored);
        over (``dataset``, ``confidence_level``, ``pipeline``): ``coverage``,
        ``coverage_se``, ``undercovers``, ``width``, ``width_se``,
        ``width_diff``, ``width_dse``, ``width_rank``, ``width_tied``; for results of a time split
        (attribute ``split_kind = "time"``) also ``long_run_error_mean``, ``_se``, ``_diff``, ``_dse``,
        ``_rank``, ``_tied`` (the ranking by :math:`|\text{coverage} - c|`); with per-group
        diagnostics also ``worst_group``, ``worst_group_coverage``, ``worst_group_se``,
        ``group_undercovers`` (:func:`worst_group_coverage`). Attribute
        ``rank_by``; strings and integers only, so it writes to netCDF as is.
        The rules are in the module docstring.

    Raises
    ------
    ValueError
        If ``by`` is not a proper score of :data:`RANK_SCORES`.

    References
    ----------
    Vehtari, Gelman & Gabry (2017), §5.2 (paired standard error); see the
    module docstring.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from calibprob.compare.ranking import rank_results
    >>> res = xr.Dataset(
    ...     {"nll": (("dataset", "repetition", "calibrator"), [[[1.0, 1.5], [2.0, 2.4], [3.0, 3.6]]])},
    ...     coords={"dataset": ["d"], "repetition": [0, 1, 2], "calibrator": ["a", "b"]})
    >>> r = rank_results(res)
    >>> r["score_rank"].sel(dataset="d").values.tolist(), bool(r["score_tied"].sel(dataset="d", pipeline="b"))
    ([1, 2], False)
    """
    by = _check_by(by)
    st = stack_pipelines(results)
    out = xr.Dataset(
        coords={
            "dataset": st["dataset"].values,
            "pipeline": st["pipeline"].values,
            **{k: st[k] for k in st.coords if str(k).startswith("pipeline_")},
        }
    )
    _add_score_ranking(out, st, by)
    if "coverage" in st and "confidence_level" in st["coverage"].dims:
        _add_interval_ranking(out, st)
        if results.attrs.get("split_kind") == "time":
            _add_long_run_ranking(out, st)
    flags = _flags(st)
    if flags is not None:
        out["base_flag"] = flags
    out.attrs.update(
        rank_by=by,
        tie_rule=f"tied: mean difference to the best <= {TIE_SE:g} paired standard errors (dse) over repetitions",
        coverage_rule=(
            f"under-covers: mean coverage < nominal - {TIE_SE:g} se, se = max(binomial "
            "sqrt(a(1-a)/N) over pooled test points, across-repetition sd/sqrt(R)); never ranked by width"
        ),
        group_rule=(
            f"worst group under-covers: pooled coverage of the lowest-covered group < nominal - {TIE_SE:g} "
            "sqrt(a(1-a)/N_g); never ranked by width"
        ),
        pipeline_dims=",".join(_pipeline_dims(results)),
    )
    return out
