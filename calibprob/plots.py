"""Plots on the predictive-distribution contract (matplotlib).

Each function takes one prediction or a ``{name: prediction}`` dict plus the
observed ``y``, draws on ``ax`` (a new figure when omitted) and returns the
Axes. The curve-drawing helpers (``draw_*``) take precomputed curves so that
``calibprob report`` redraws them from a results file without the predictions.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

__all__ = [
    "plot_reliability",
    "plot_pit_histogram",
    "plot_intervals",
    "plot_coverage",
    "draw_reliability",
    "draw_coverage",
]


def _axes(ax, figsize=(5, 5)):
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=figsize)
    return ax


def _named(preds) -> dict:
    if isinstance(preds, xr.Dataset):
        return {preds.attrs.get("method", "prediction"): preds}
    return dict(preds)


def _colors():
    import matplotlib.pyplot as plt

    return plt.rcParams["axes.prop_cycle"].by_key()["color"]


def draw_reliability(ax, levels, curves: dict, bands: dict | None = None, title: str | None = None):
    """Reliability lines: observed fraction below Q(p) against p, with optional ±bands.

    Parameters
    ----------
    ax : matplotlib Axes
    levels : array, shape (m,)
    curves : dict of name -> array (m,)
    bands : dict of name -> (lower (m,), upper (m,)), optional

    Returns
    -------
    matplotlib Axes
        ``ax``.

    References
    ----------
    Kuleshov, V., Fenner, N. and Ermon, S. (2018). Accurate uncertainties for deep
    learning using calibrated regression. ICML.

    Examples
    --------
    >>> import numpy as np, matplotlib.pyplot as plt
    >>> from calibprob.plots import draw_reliability
    >>> p = np.linspace(0, 1, 21)
    >>> ax = draw_reliability(plt.figure().gca(), p, {"model": p ** 1.2}, bands={"model": (p ** 1.3, p ** 1.1)})
    """
    ax.plot([0, 1], [0, 1], color="0.6", ls="--", lw=1, label="ideal")
    for i, (name, frac) in enumerate(curves.items()):
        if np.all(np.isnan(np.asarray(frac, dtype=float))):
            continue  # interval-only method: no quantile function (the colour slot is kept)
        c = _colors()[i % len(_colors())]
        ax.plot(levels, frac, marker="o", ms=3, color=c, label=str(name))
        if bands and name in bands:
            ax.fill_between(levels, *bands[name], color=c, alpha=0.15, lw=0)
    ax.set(xlabel="quantile level p", ylabel="observed fraction of y ≤ Q(p)", xlim=(0, 1), ylim=(0, 1))
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    return ax


def draw_coverage(ax, nominal, curves: dict, title: str | None = None):
    """Empirical coverage of central intervals against their nominal level.

    Parameters
    ----------
    ax : matplotlib Axes
    nominal : array, shape (k,)
        Nominal confidence levels.
    curves : dict of name -> array (k,)
        Empirical coverage per method.
    title : str, optional

    Returns
    -------
    matplotlib Axes
        ``ax``.

    References
    ----------
    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, §2 (coverage curves).

    Examples
    --------
    >>> import numpy as np, matplotlib.pyplot as plt
    >>> from calibprob.plots import draw_coverage
    >>> c = np.linspace(0.02, 0.98, 20)
    >>> ax = draw_coverage(plt.figure().gca(), c, {"model": np.sqrt(c)}, title="coverage")
    """
    ax.plot([0, 1], [0, 1], color="0.6", ls="--", lw=1, label="ideal")
    for i, (name, cov) in enumerate(curves.items()):
        ax.plot(nominal, cov, marker="o", ms=3, color=_colors()[i % len(_colors())], label=str(name))
    ax.set(xlabel="nominal confidence level", ylabel="empirical coverage", xlim=(0, 1), ylim=(0, 1))
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    return ax


def plot_reliability(preds, y, *, levels=None, ax=None):
    """Reliability diagram (Kuleshov et al. 2018): fraction of ``y ≤ Q(p)`` against ``p``.

    Parameters
    ----------
    preds : Dataset or dict of name -> Dataset
        Predictive distributions in the calibprob contract.
    y : array_like, shape (n,)
    levels : array_like, optional
        Levels p; default 0.05, 0.10, ..., 0.95.

    Returns
    -------
    matplotlib Axes

    References
    ----------
    Kuleshov, V., Fenner, N. and Ermon, S. (2018). Accurate uncertainties for deep
    learning using calibrated regression. ICML.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.plots import plot_reliability
    >>> ax = plot_reliability(calibprob.normal(np.zeros(50), np.ones(50)), np.linspace(-2, 2, 50))
    """
    levels = np.linspace(0.05, 0.95, 19) if levels is None else np.asarray(levels, float)
    curves = {}
    for name, pred in _named(preds).items():
        pit = pred.calib.pit(y).values
        curves[name] = (pit[:, None] <= levels[None, :]).mean(axis=0)
    return draw_reliability(_axes(ax), levels, curves, title="Reliability diagram")


def plot_pit_histogram(pred, y, *, bins: int = 20, ax=None):
    """Histogram of PIT values ``F_i(y_i)``; flat for a calibrated forecast.

    Parameters
    ----------
    pred : xarray.Dataset
        A predictive distribution in the calibprob contract.
    y : array_like, shape (n,)
    bins : int, default 20
    ax : matplotlib Axes, optional
        Drawn on a new figure when omitted.

    Returns
    -------
    matplotlib Axes

    References
    ----------
    Kuleshov, V., Fenner, N. and Ermon, S. (2018). Accurate uncertainties for deep
    learning using calibrated regression. ICML.

    Gneiting, T., Balabdaoui, F. and Raftery, A. E. (2007). Probabilistic forecasts,
    calibration and sharpness. JRSS B 69(2).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=500)
    >>> calibrated = calibprob.normal(np.zeros(500), np.ones(500))
    >>> overconfident = calibprob.normal(np.zeros(500), np.full(500, 0.5))
    >>> from calibprob.plots import plot_pit_histogram
    >>> ax = plot_pit_histogram(overconfident, y)        # U-shaped: too narrow
    """
    ax = _axes(ax, (5, 3.5))
    pit = pred.calib.pit(y).values
    ax.hist(pit, bins=bins, range=(0, 1), density=True, color=_colors()[0], alpha=0.7, edgecolor="white")
    ax.axhline(1.0, color="0.3", ls="--", lw=1)
    ax.set(xlabel="PIT value", ylabel="density", title="PIT histogram", xlim=(0, 1))
    return ax


def plot_intervals(x, pred, y=None, *, confidence_levels=(0.5, 0.9), ax=None, label=None):
    """Central predictive intervals as bands over a 1-D input (sorted by ``x``).

    Parameters
    ----------
    x : array_like, shape (n,)
        The input coordinate to plot against.
    pred : Dataset
    y : array_like, optional
        Observations drawn as points.
    confidence_levels : sequence of float

    Returns
    -------
    matplotlib Axes

    References
    ----------
    Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
    processes. NeurIPS 36, Fig. 2 (interval bands of the calibrators).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.plots import plot_intervals
    >>> x = np.linspace(0, 1, 40); y = np.sin(6 * x) + 0.1 * np.random.default_rng(0).normal(size=40)
    >>> ax = plot_intervals(x, calibprob.normal(np.sin(6 * x), np.full(40, 0.1)), y, confidence_levels=(0.5, 0.9))
    """
    ax = _axes(ax, (7, 4))
    x = np.asarray(x, float).ravel()
    order = np.argsort(x)
    c = _colors()[0]
    for k, cl in enumerate(sorted(confidence_levels, reverse=True)):
        iv = pred.calib.interval(cl)
        ax.fill_between(
            x[order],
            iv["lower"].values[order],
            iv["upper"].values[order],
            color=c,
            alpha=0.15 + 0.15 * k,
            lw=0,
            label=f"{cl:.0%} interval",
        )
    ax.plot(x[order], pred.calib.median().values[order], color=c, lw=1.5, label=label or "median")
    if y is not None:
        ax.scatter(x, np.asarray(y), s=8, color="k", alpha=0.6, label="observed")
    ax.legend(fontsize=8)
    return ax


def plot_coverage(preds, y, *, confidence_levels=None, ax=None):
    """Empirical coverage of central intervals against the nominal level.

    Parameters
    ----------
    preds : Dataset or dict of name -> Dataset
        Predictive distributions in the calibprob contract.
    y : array_like, shape (n,)
    confidence_levels : array_like, optional
        Nominal levels; default the IAE grid 0.02, ..., 0.98.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib Axes

    References
    ----------
    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, Fig. 3 and §2 (coverage curves, IAE).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=500)
    >>> calibrated = calibprob.normal(np.zeros(500), np.ones(500))
    >>> overconfident = calibprob.normal(np.zeros(500), np.full(500, 0.5))
    >>> from calibprob.plots import plot_coverage
    >>> ax = plot_coverage({"calibrated": calibrated, "overconfident": overconfident}, y)
    """
    nominal = np.linspace(0.02, 0.98, 25) if confidence_levels is None else np.asarray(confidence_levels)
    y = np.asarray(y, float)
    curves = {}
    for name, pred in _named(preds).items():
        iv = pred.calib.interval(nominal)
        inside = (y[:, None] >= iv["lower"].values) & (y[:, None] <= iv["upper"].values)
        curves[name] = inside.mean(axis=0)
    return draw_coverage(_axes(ax), nominal, curves, title="Coverage of central intervals")
