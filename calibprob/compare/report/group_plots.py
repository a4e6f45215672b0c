r"""The coverage-by-group plot: each group's coverage against the band a calibrated method would fall in.

A method can cover 90 % on average while one group gets 60 %, and the average hides it. This plot shows, per
confidence level :math:`\alpha`, every group's coverage pooled over the repetitions,

.. math::

    \hat c_g = \frac{\sum_r n_{g,r}\, c_{g,r}}{N_g}, \qquad N_g = \sum_r n_{g,r},

one marker per pipeline, over a grey **binomial band**: the central 95 % of
:math:`\mathrm{Binomial}(N_g, \alpha)/N_g`, where the coverage of a group of :math:`N_g` test
points falls with probability about 0.95 when the method covers exactly :math:`\alpha` in that
group (the exact binomial quantiles, not a normal approximation, so small groups get their
honest, wide and asymmetric band). A marker below its band is a group the method fails.
The repetitions' test points are pooled as if independent; they are for a fixed split, so the band
is slightly narrow for a method whose interval varies between splits.

It appears in ``calibprob report`` (a PNG per data set) and in the HTML report when the results
carry the per-group diagnostics (``group_coverage``, ``group_count``; stored by the runner for a
data set with groups, from :func:`calibprob.evaluate` with ``groups=``).

References
----------
Clopper, C. J. and Pearson, E. S. (1934). The use of confidence or fiducial limits illustrated in
the case of the binomial. Biometrika 26(4), 404-413 (exact binomial limits).
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from scipy import stats

__all__ = ["BAND_MASS", "binomial_band", "pooled_group_coverage", "group_coverage_figure", "plot_coverage_by_group"]

#: Probability mass of the binomial band around nominal coverage.
BAND_MASS = 0.95


def binomial_band(level, n, mass: float = BAND_MASS) -> tuple[np.ndarray, np.ndarray]:
    r"""The central ``mass`` of the coverage of ``n`` points under exact nominal coverage.

    :math:`[F^{-1}((1-m)/2),\ F^{-1}((1+m)/2)] / n` with :math:`F` the CDF of
    :math:`\mathrm{Binomial}(n, \alpha)`.

    Parameters
    ----------
    level : float or array_like
        Nominal coverage :math:`\alpha` in (0, 1).
    n : int or array_like of int
        Points per group (broadcast against ``level``); 0 gives NaN.
    mass : float, default :data:`BAND_MASS`

    Returns
    -------
    lower, upper : ndarray

    Examples
    --------
    >>> from calibprob.compare.report.group_plots import binomial_band
    >>> lo, hi = binomial_band(0.9, 100)
    >>> float(lo), float(hi)
    (0.84, 0.95)
    """
    a = np.asarray(level, float)
    nn = np.asarray(n, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = stats.binom.ppf((1 - mass) / 2, nn, a) / nn
        hi = stats.binom.ppf((1 + mass) / 2, nn, a) / nn
    bad = ~(nn > 0)
    return np.where(bad, np.nan, lo), np.where(bad, np.nan, hi)


def pooled_group_coverage(group_coverage: xr.DataArray, group_count: xr.DataArray) -> tuple[xr.DataArray, xr.DataArray]:
    r"""Each group's coverage pooled over repetitions, :math:`\hat c_g`, and its points :math:`N_g`.

    Parameters
    ----------
    group_coverage : xarray.DataArray
        With ``repetition`` and ``group`` dimensions; NaN where not scored.
    group_count : xarray.DataArray
        Test points per group and repetition (broadcast against ``group_coverage``).

    Returns
    -------
    coverage, count : xarray.DataArray
        Without ``repetition``; NaN coverage where a group has no point.

    Examples
    --------
    >>> import xarray as xr
    >>> from calibprob.compare.report.group_plots import pooled_group_coverage
    >>> c = xr.DataArray([[1.0, 0.5], [0.8, 0.7]], dims=("repetition", "group"))
    >>> n = xr.DataArray([[10, 2], [10, 10]], dims=("repetition", "group"))
    >>> [round(float(v), 4) for v in pooled_group_coverage(c, n)[0]]
    [0.9, 0.6667]
    """
    n = group_count.broadcast_like(group_coverage).where(group_coverage.notnull())
    N = n.sum("repetition", skipna=True)
    return (group_coverage * n).sum("repetition", skipna=True) / N.where(N > 0), N


def group_coverage_figure(group_coverage: xr.DataArray, group_count: xr.DataArray, dim: str, title: str, colors=None):
    """The coverage-by-group figure of one data set: a panel per confidence level.

    Parameters
    ----------
    group_coverage : xarray.DataArray
        Over ``repetition``, ``dim``, ``confidence_level`` and ``group``.
    group_count : xarray.DataArray
        Over ``repetition``, ``group`` and possibly ``dim``.
    dim : str
        The pipeline dimension (``calibrator`` or ``pipeline``).
    title : str
        Shown above the panels.
    colors : dict, optional
        Colour per pipeline label.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    cov, N = pooled_group_coverage(group_coverage, group_count)
    # groups no pipeline saw on this data set (the union over data sets of a results file) are dropped
    seen = cov.notnull().any([d for d in cov.dims if d != "group"])
    cov, N = cov.sel(group=seen), N.sel(group=seen)
    n_g = N.max([d for d in N.dims if d != "group"]) if N.ndim > 1 else N
    levels = cov["confidence_level"].values
    labels = [str(g) for g in cov["group"].values]
    pipes = [str(p) for p in cov[dim].values]
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = colors or {p: cycle[i % len(cycle)] for i, p in enumerate(pipes)}
    ncol = min(4, levels.size)
    nrow = -(-levels.size // ncol)
    fig, axes = plt.subplots(
        nrow, ncol, figsize=(max(3.3, 0.55 * len(labels) + 1.5) * ncol, 3.3 * nrow + 0.7), squeeze=False
    )
    x = np.arange(len(labels))
    offsets = (np.arange(len(pipes)) - (len(pipes) - 1) / 2) * min(0.6 / max(len(pipes), 1), 0.15)
    for ax, c in zip(axes.flat, levels):
        lo, hi = binomial_band(c, n_g.values)
        ax.bar(x, hi - lo, bottom=lo, width=0.8, color="0.88", edgecolor="none", zorder=0)
        ax.axhline(c, color="0.3", ls="--", lw=1, zorder=1)
        for k, p in enumerate(pipes):
            y = cov.sel({dim: p, "confidence_level": c}).values
            ax.plot(x + offsets[k], y, "o", ms=5, color=colors.get(p), label=p, zorder=2)
        ax.set_xticks(x, [f"{g}\n(n={int(n)})" for g, n in zip(labels, n_g.values)], fontsize=7)
        ax.set_title(f"level {c:g}", fontsize=9)
        ax.set_ylabel("coverage in group")
    for ax in axes.flat[levels.size :]:
        ax.axis("off")
    fig.suptitle(f"{title} (grey: central {BAND_MASS:.0%} of Binomial(n, level)/n; dashed: nominal)", fontsize=10)
    handles, names = axes.flat[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, names, loc="lower center", ncol=min(5, len(names)), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07 if handles else 0, 1, 1))
    return fig


def plot_coverage_by_group(metrics, title: str = "Coverage by group"):
    """The coverage-by-group figure of :func:`calibprob.evaluate` outputs (one test set, no repetitions).

    Parameters
    ----------
    metrics : xarray.Dataset or dict of str to xarray.Dataset
        Outputs of :func:`calibprob.evaluate` with ``groups=`` (each holding
        ``group_coverage`` and ``group_count``), keyed by the method's name; one
        Dataset is named by its ``method`` attribute.
    title : str, default "Coverage by group"

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        If a Dataset has no group diagnostics.

    References
    ----------
    Clopper, C. J. and Pearson, E. S. (1934). Biometrika 26(4), 404-413.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.compare.report.group_plots import plot_coverage_by_group
    >>> rng = np.random.default_rng(0); g = rng.integers(0, 3, 300)
    >>> m = calibprob.evaluate(calibprob.normal(np.zeros(300), np.ones(300)), rng.normal(size=300) * (1 + g),
    ...                        [0.9], groups=g)
    >>> fig = plot_coverage_by_group({"base": m})
    >>> len(fig.axes[0].get_xticklabels())
    3
    """
    if isinstance(metrics, xr.Dataset):
        metrics = {str(metrics.attrs.get("method", "method")): metrics}
    for name, m in metrics.items():
        if not isinstance(m, xr.Dataset) or "group_coverage" not in m or "group_count" not in m:
            raise ValueError(
                f"metrics[{name!r}] has no group diagnostics; compute it with calibprob.evaluate(pred, y, groups=...)."
            )
    names = list(metrics)
    cov = xr.concat([metrics[k]["group_coverage"] for k in names], dim="pipeline", join="outer")
    count = xr.concat([metrics[k]["group_count"] for k in names], dim="pipeline", join="outer")
    cov = cov.assign_coords(pipeline=names).expand_dims(repetition=[0])
    count = count.assign_coords(pipeline=names).expand_dims(repetition=[0])
    return group_coverage_figure(cov, count, "pipeline", title)
