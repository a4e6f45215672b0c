"""The coverage-by-group plot of the reports: now :func:`calibprob.plots.coverage_by_group`.

This module keeps the names that notebooks and scripts imported from here before the plot became
public: :func:`plot_coverage_by_group` (every level of :func:`calibprob.evaluate` outputs in one
figure) and :func:`binomial_band`; both are the public functions of :mod:`calibprob.plots`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from calibprob.plots import BAND_MASS, binomial_band, coverage_by_group

if TYPE_CHECKING:  # matplotlib is imported where the figure is drawn
    import xarray as xr
    from matplotlib.figure import Figure

__all__ = ["BAND_MASS", "binomial_band", "plot_coverage_by_group"]


def plot_coverage_by_group(metrics: xr.Dataset | dict[str, xr.Dataset], title: str = "Coverage by group") -> Figure:
    """The coverage-by-group figure of :func:`calibprob.evaluate` outputs: :func:`calibprob.plots.coverage_by_group`.

    Parameters
    ----------
    metrics : xarray.Dataset or dict of str to xarray.Dataset
        Outputs of :func:`calibprob.evaluate` with ``groups=``, keyed by the method's name.
    title : str, default "Coverage by group"

    Returns
    -------
    matplotlib.figure.Figure
        Every level, one block of panels each, groups in natural order of their labels.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.compare.report.group_plots import plot_coverage_by_group
    >>> rng = np.random.default_rng(0); g = rng.integers(0, 3, 300)
    >>> m = calibprob.evaluate(calibprob.normal(np.zeros(300), np.ones(300)), rng.normal(size=300) * (1 + g),
    ...                        [0.9], groups=g)
    >>> fig = plot_coverage_by_group({"base": m})
    >>> len(fig.axes[0].get_yticklabels())
    3
    """
    return coverage_by_group(metrics, sort="label", title=title)
