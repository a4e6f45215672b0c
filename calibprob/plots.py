"""Plots on the predictive-distribution contract (matplotlib).

Each ``plot_*`` function takes one prediction or a ``{name: prediction}`` dict plus the
observed ``y``, draws on ``ax`` (a new figure when omitted) and returns the
Axes. The curve-drawing helpers (``draw_*``) take precomputed curves so that
``calibprob report`` redraws them from a results file without the predictions.
:func:`coverage_by_group` draws coverage within groups from a comparison's results,
:func:`calibprob.evaluate` outputs or a plain per-group table, and returns a Figure of a
fixed width (:func:`group_coverage_table` gives its numbers).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.deprecation import renamed_keywords

__all__ = [
    "plot_reliability",
    "plot_pit_histogram",
    "plot_intervals",
    "plot_coverage",
    "draw_reliability",
    "draw_coverage",
    "coverage_by_group",
    "group_coverage_table",
    "binomial_band",
    "natural_key",
    "plot_rolling_coverage",
]


def _axes(ax: Any, figsize: tuple[float, float] = (5, 5)) -> Any:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=figsize)
    return ax


def _named(preds: xr.Dataset | dict[str, xr.Dataset]) -> dict:
    if isinstance(preds, xr.Dataset):
        return {preds.attrs.get("method", "prediction"): preds}
    return dict(preds)


def _colors() -> list[Any]:
    import matplotlib.pyplot as plt

    return plt.rcParams["axes.prop_cycle"].by_key()["color"]


def draw_reliability(
    ax: Any, levels: ArrayLike, curves: dict, bands: dict | None = None, title: str | None = None
) -> Any:
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


def draw_coverage(ax: Any, nominal: ArrayLike, curves: dict, title: str | None = None) -> Any:
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


def plot_reliability(
    preds: xr.Dataset | dict[str, xr.Dataset], y: ArrayLike, *, levels: ArrayLike | None = None, ax: Any = None
) -> Any:
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


def plot_pit_histogram(pred: xr.Dataset, y: ArrayLike, *, bins: int = 20, ax: Any = None) -> Any:
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


@renamed_keywords({"confidence_levels": "confidence_level"}, where="calibprob.plots.plot_intervals")
def plot_intervals(
    x: ArrayLike,
    pred: xr.Dataset,
    y: ArrayLike | None = None,
    *,
    confidence_level: Any = (0.5, 0.9),
    ax: Any = None,
    label: Any = None,
) -> Any:
    """Central predictive intervals as bands over a 1-D input (sorted by ``x``).

    Parameters
    ----------
    x : array_like, shape (n,)
        The input coordinate to plot against.
    pred : Dataset
    y : array_like, optional
        Observations drawn as points.
    confidence_level : sequence of float

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
    >>> ax = plot_intervals(x, calibprob.normal(np.sin(6 * x), np.full(40, 0.1)), y, confidence_level=(0.5, 0.9))
    """
    ax = _axes(ax, (7, 4))
    x = np.asarray(x, float).ravel()
    order = np.argsort(x)
    c = _colors()[0]
    for k, cl in enumerate(sorted(confidence_level, reverse=True)):
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


@renamed_keywords({"confidence_levels": "confidence_level"}, where="calibprob.plots.plot_coverage")
def plot_coverage(
    preds: xr.Dataset | dict[str, xr.Dataset], y: ArrayLike, *, confidence_level: Any = None, ax: Any = None
) -> Any:
    """Empirical coverage of central intervals against the nominal level.

    Parameters
    ----------
    preds : Dataset or dict of name -> Dataset
        Predictive distributions in the calibprob contract.
    y : array_like, shape (n,)
    confidence_level : array_like, optional
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
    nominal = np.linspace(0.02, 0.98, 25) if confidence_level is None else np.asarray(confidence_level)
    y = np.asarray(y, float)
    curves = {}
    for name, pred in _named(preds).items():
        iv = pred.calib.interval(nominal)
        inside = (y[:, None] >= iv["lower"].values) & (y[:, None] <= iv["upper"].values)
        curves[name] = inside.mean(axis=0)
    return draw_coverage(_axes(ax), nominal, curves, title="Coverage of central intervals")


# ----------------------------------------------------------------------------- coverage by group
#: Probability mass of the binomial band drawn around the nominal level of each group.
BAND_MASS = 0.95
#: Width of the coverage-by-group figure in inches, the same at 2 groups as at 200.
GROUP_FIGURE_WIDTH = 8.0
#: The orders of :func:`coverage_by_group`'s rows.
GROUP_SORTS = ("coverage", "label", "count")
#: Inches of rows one column of panels may take before the groups wrap into the next column,
#: and the most columns a level gets (beyond them the figure grows taller instead of narrower).
_PANEL_HEIGHT = 10.0
_MAX_COLUMNS = 4
#: Dimensions of a results Dataset that are not pipelines.
_NOT_PIPELINE = ("dataset", "repetition", "confidence_level", "group")
_TABLE_COLUMNS = ("method", "level", "group", "count", "coverage", "infinite")


def binomial_band(level: Any, n: Any, mass: float = BAND_MASS) -> tuple[np.ndarray, np.ndarray]:
    r"""The central ``mass`` of the coverage of ``n`` points under exactly nominal coverage.

    :math:`[F^{-1}((1-m)/2),\ F^{-1}((1+m)/2)] / n` with :math:`F` the CDF of
    :math:`\mathrm{Binomial}(n, \alpha)` and :math:`F^{-1}(q) = \min\{k : F(k) \ge q\}`:
    the exact binomial quantiles (Clopper & Pearson 1934 use the same distribution for their
    limits), not a normal approximation, so a small group gets its wide, asymmetric band.

    Parameters
    ----------
    level : float or array_like
        Nominal coverage :math:`\alpha` in (0, 1).
    n : int or array_like of int
        Points per group (broadcast against ``level``); 0 gives NaN.
    mass : float, default ``BAND_MASS``

    Returns
    -------
    lower, upper : ndarray

    References
    ----------
    Clopper, C. J. and Pearson, E. S. (1934). The use of confidence or fiducial limits illustrated
    in the case of the binomial. Biometrika 26(4), 404-413.

    Examples
    --------
    >>> from calibprob.plots import binomial_band
    >>> lo, hi = binomial_band(0.9, 100)
    >>> float(lo), float(hi)
    (0.84, 0.95)
    """
    from scipy import stats

    a = np.asarray(level, float)
    nn = np.asarray(n, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = stats.binom.ppf((1 - mass) / 2, nn, a) / nn
        hi = stats.binom.ppf((1 + mass) / 2, nn, a) / nn
    bad = ~(nn > 0)
    return np.where(bad, np.nan, lo), np.where(bad, np.nan, hi)


def natural_key(label: Any) -> tuple:
    """Sort key of a group label in natural order: ``"2" < "10"``, ``"county 9" < "county 10"``.

    Digit runs compare as numbers, text case-insensitively; a label that is a number
    (``"-1.5"``) sorts by its value, before every text label.

    Parameters
    ----------
    label : object
        A group label (read as text).

    Returns
    -------
    tuple

    Examples
    --------
    >>> from calibprob.plots import natural_key
    >>> sorted(["10", "2", "1", "11", "0"], key=natural_key)
    ['0', '1', '2', '10', '11']
    >>> sorted(["b10", "B9", "a"], key=natural_key)
    ['a', 'B9', 'b10']
    """
    text = str(label).strip()
    try:
        return (0, float(text), text)
    except ValueError:
        pass
    parts = re.split(r"(\d+)", text)
    return (1, tuple((0, int(p), "") if p.isdigit() else (1, 0, p.lower()) for p in parts if p), text)


def _check_mass(mass: object) -> float:
    if isinstance(mass, bool) or not isinstance(mass, int | float) or not 0 < mass < 1:
        raise ValueError(f"mass must be a probability in (0, 1), e.g. 0.95 for a central 95% band; got {mass!r}.")
    return float(mass)


def group_coverage_table(
    data: Any, level: Any = None, *, dataset: str | None = None, mass: float = BAND_MASS
) -> pd.DataFrame:
    r"""Each group's coverage pooled over repetitions, its size, its infinite share and its binomial band.

    Over repetitions :math:`r` with :math:`n_{g,r}` test points in group :math:`g`,

    .. math::

        N_g = \sum_r n_{g,r}, \qquad \hat c_g = \frac{1}{N_g}\sum_r n_{g,r}\, c_{g,r}, \qquad
        \hat\iota_g = \frac{1}{N_g}\sum_r n_{g,r}\, \iota_{g,r},

    with :math:`\iota_{g,r}` the share of the group's points whose interval was infinite (a
    Mondrian group too small for the level with fallback ``none``, a conformal set that is the
    whole line): such a point counts as covered, but trivially, so it is counted apart. The band
    is :func:`binomial_band` of :math:`(\alpha, N_g)`: where :math:`\hat c_g` falls with
    probability about ``mass`` when the method covers exactly :math:`\alpha` in that group. The
    repetitions' test points are pooled as if independent.

    Parameters
    ----------
    data : xarray.Dataset, xarray.DataTree, str, Path, dict or pandas.DataFrame
        A comparison's results (the file ``calibprob compare`` writes, its tree or its root
        Dataset, with ``group_coverage`` and ``group_count``; pipeline dimensions such as
        ``calibrator`` and ``base`` become methods ``base/calibrator``); an output of
        :func:`calibprob.evaluate` with ``groups=`` or a dict ``{method: output}``; or a plain
        table with columns ``group``, ``coverage``, ``count`` and optionally ``method``,
        ``level`` (or ``confidence_level``) and ``infinite`` (share in [0, 1] or bool).
    level : float or sequence of float, optional
        The confidence levels to keep; default every level in ``data``.
    dataset : str, optional
        The data set of a results file with more than one.
    mass : float, default ``BAND_MASS``

    Returns
    -------
    pandas.DataFrame
        One row per (method, level, group): ``method``, ``level``, ``group`` (text), ``count``,
        ``coverage``, ``infinite``, ``band_lower``, ``band_upper`` and ``below_band`` (coverage
        under its band, never for a group whose intervals were all infinite).

    Raises
    ------
    ValueError
        If ``data`` has no group coverage or lacks a column, a level is not in ``data``, the
        data set is not named where several are, or ``mass`` is not in (0, 1).

    References
    ----------
    Ding, T., Angelopoulos, A. N., Bates, S., Jordan, M. I. and Tibshirani, R. J. (2023).
    Class-conditional conformal prediction with many classes. NeurIPS.

    Examples
    --------
    >>> import pandas as pd
    >>> from calibprob.plots import group_coverage_table
    >>> t = group_coverage_table(pd.DataFrame({"group": ["a", "b"], "coverage": [0.7, 1.0],
    ...                                        "count": [100, 5], "infinite": [0, 1]}), level=0.9)
    >>> t[["group", "band_lower", "band_upper", "below_band"]].values.tolist()
    [['a', 0.84, 0.95, True], ['b', 0.6, 1.0, False]]
    """
    mass = _check_mass(mass)
    if level is not None:
        asked = np.atleast_1d(np.asarray(level, dtype=float))
        if asked.ndim != 1 or asked.size == 0 or not np.all((asked > 0) & (asked < 1)):
            raise ValueError(f"level must be a confidence level in (0, 1) or a list of them, e.g. 0.9; got {level!r}.")
    table = _read_group_data(data, dataset, level)
    table = _select_levels(table, level)
    lo, hi = binomial_band(table["level"].to_numpy(float), table["count"].to_numpy(float), mass)
    table["band_lower"], table["band_upper"] = lo, hi
    table["below_band"] = (table["coverage"] < lo) & (table["infinite"] < 1)
    return table.reset_index(drop=True)


def _read_group_data(data: Any, dataset: str | None, level: Any) -> pd.DataFrame:
    """The long table (method, level, group, count, coverage, infinite) of any accepted input."""
    if isinstance(data, str | Path):
        data = _open_results(Path(data))
    if isinstance(data, xr.DataTree):
        data = data.to_dataset()
    if isinstance(data, pd.DataFrame):
        return _from_frame(data, level)
    if isinstance(data, xr.Dataset) and "dataset" in data.dims:
        return _from_results(data, dataset)
    if isinstance(data, xr.Dataset) and _is_results(data):
        return _from_evaluate({"": data})  # one data set of a results file: its pipelines name the methods
    if isinstance(data, xr.Dataset):
        data = {str(data.attrs.get("method", "method")): data}
    if isinstance(data, dict) and data:
        return _from_evaluate(data)
    raise ValueError(
        f"data must be a comparison's results (a file, DataTree or Dataset), calibprob.evaluate outputs with "
        f"groups= (a Dataset or a non-empty dict of them) or a pandas DataFrame; got {type(data).__name__}."
    )


def _open_results(path: Path) -> xr.Dataset:
    if not path.is_file():
        raise ValueError(f"data {str(path)!r} is not a file; give the results file `calibprob compare` wrote.")
    tree = xr.open_datatree(path, engine="h5netcdf")
    try:
        return tree.to_dataset().load()
    finally:
        tree.close()


def _from_results(ds: xr.Dataset, dataset: str | None) -> pd.DataFrame:
    """Pool a results Dataset's per-repetition group coverage over its repetitions."""
    if "group_coverage" not in ds or "group_count" not in ds:
        raise ValueError(
            "data has no group coverage (group_coverage, group_count): run the comparison on a data set "
            'with groups = "<column>" in its spec entry.'
        )
    names = [str(d) for d in ds["dataset"].values]
    if dataset is None and len(names) > 1:
        raise ValueError(f"data holds data sets {names}; pass dataset= one of them.")
    if dataset is not None and str(dataset) not in names:
        raise ValueError(f"dataset={dataset!r} is not in data; its data sets are {names}; pass one of them.")
    ds = ds.sel(dataset=names[0] if dataset is None else str(dataset))
    return _from_evaluate({"": ds})


def _is_results(ds: xr.Dataset) -> bool:
    """Whether a Dataset without ``dataset`` is one data set of a results file (repetitions or pipelines)."""
    cov = ds.get("group_coverage")
    return cov is not None and any(d not in _NOT_PIPELINE or d == "repetition" for d in cov.dims)


def _infinite_share(m: xr.Dataset) -> xr.DataArray:
    """``group_infinite``, or for files written before it an infinite ``group_width`` (the whole group)."""
    if "group_infinite" in m:
        return m["group_infinite"]
    if "group_width" in m:
        return xr.apply_ufunc(np.isinf, m["group_width"]).astype(float)
    return xr.zeros_like(m["group_coverage"])


def _from_evaluate(named: dict) -> pd.DataFrame:
    """The long table of ``{method: Dataset}`` (evaluate outputs, or one results Dataset under ``""``)."""
    rows = []
    for name, m in named.items():
        if not isinstance(m, xr.Dataset) or "group_coverage" not in m or "group_count" not in m:
            raise ValueError(
                f"data[{name!r}] has no group coverage; compute it with calibprob.evaluate(pred, y, groups=...)."
            )
        cov = m["group_coverage"]
        if "repetition" not in cov.dims:
            cov = cov.expand_dims(repetition=[0])
        n = m["group_count"].broadcast_like(cov).where(cov.notnull())
        inf = _infinite_share(m).broadcast_like(cov)
        N = n.sum("repetition", skipna=True)
        pooled = xr.Dataset(
            {
                "count": N,
                "coverage": (cov * n).sum("repetition", skipna=True) / N.where(N > 0),
                "infinite": (inf * n).sum("repetition", skipna=True) / N.where(N > 0),
            }
        )
        pipes = [d for d in cov.dims if d not in _NOT_PIPELINE]
        frame = pooled.to_dataframe().reset_index()
        labels = frame[pipes].astype(str).agg("/".join, axis=1) if pipes else pd.Series(name, index=frame.index)
        frame["method"] = labels if name == "" or not pipes else name + "/" + labels
        rows.append(frame.rename(columns={"confidence_level": "level"}))
    table = pd.concat(rows, ignore_index=True)
    table = table[table["coverage"].notna()]
    table["group"] = table["group"].astype(str)
    return table[list(_TABLE_COLUMNS)].astype({"count": float, "level": float})


def _from_frame(frame: pd.DataFrame, level: Any) -> pd.DataFrame:
    """A user's plain per-group table, checked and completed."""
    t = frame.rename(columns={"confidence_level": "level"}).copy()
    missing = [c for c in ("group", "coverage", "count") if c not in t.columns]
    if missing:
        raise ValueError(
            f"data (a DataFrame) lacks column(s) {missing}; it needs group, coverage and count, "
            f"optionally method, level and infinite; it has {list(frame.columns)}."
        )
    if "level" not in t.columns:
        if level is None or not np.isscalar(level):
            raise ValueError(
                "level= must be one nominal level (e.g. level=0.9) when data (a DataFrame) has no level column."
            )
        t["level"] = float(level)  # type: ignore[arg-type]  # a scalar: checked above
    t["method"] = t["method"].astype(str) if "method" in t.columns else "method"
    t["infinite"] = t["infinite"].astype(float) if "infinite" in t.columns else 0.0
    t["group"] = t["group"].astype(str)
    t = t[list(_TABLE_COLUMNS)].astype({"count": float, "coverage": float, "level": float})
    for col, ok in (
        ("coverage", t["coverage"].between(0, 1) | t["coverage"].isna()),
        ("count", t["count"] >= 0),
        ("infinite", t["infinite"].between(0, 1)),
    ):
        if not ok.all():
            bad = t.loc[~ok, col].iloc[0]
            raise ValueError(
                f"data column {col!r} holds {float(bad):g}; coverage and infinite must be shares in [0, 1], count >= 0."
            )
    return t[t["coverage"].notna()]


def _select_levels(table: pd.DataFrame, level: Any) -> pd.DataFrame:
    """The rows at the asked levels (matched to 1e-9), with a message naming the levels there are."""
    if table.empty:
        raise ValueError("data holds no group with a coverage (an empty table); give at least one scored group.")
    have = sorted(set(table["level"].round(12)))
    if level is None:
        return table
    asked = np.atleast_1d(np.asarray(level, float))
    for a in asked:
        if not any(abs(a - h) < 1e-9 for h in have):
            raise ValueError(
                f"level={a:g} is not in data; its levels are {[float(f'{h:g}') for h in have]}; pass one of them."
            )
    keep = np.any(np.abs(table["level"].to_numpy()[:, None] - asked[None, :]) < 1e-9, axis=1)
    return table[keep]


def coverage_by_group(
    data: Any,
    level: Any = None,
    *,
    sort: str = "coverage",
    dataset: str | None = None,
    title: str | None = None,
    colors: dict | None = None,
    mass: float = BAND_MASS,
) -> Any:
    r"""Coverage within each group against the band a calibrated method would fall in.

    A method can cover 90 % on average while one group gets 60 %; this plot shows every group.
    Groups are rows (the y axis), coverage :math:`\hat c_g` pooled over repetitions
    (:func:`group_coverage_table`) the x axis, one marker per method, over a grey **binomial
    band** per row: the central ``mass`` of :math:`\mathrm{Binomial}(N_g, \alpha)/N_g`
    (:func:`binomial_band`), where a group of :math:`N_g` test points falls when the method covers
    exactly :math:`\alpha` in it. A marker left of its band is a group the method fails; its label
    is red. The dashed line is the nominal level. A group whose intervals were infinite for some or
    all of its points (a Mondrian group too small for the level, fallback ``none``) is drawn with
    a hollow triangle: it counts as covered, but trivially, and never as below its band.

    The figure is ``GROUP_FIGURE_WIDTH`` inches wide whatever the number of groups: rows take
    about 0.15 in (0.075 in per method with three or more, side by side within a row) and wrap
    into up to four columns of panels (small multiples) when a level's rows would pass 10 in
    (then rows get closer, down to 0.15 in, before the figure grows taller); labels
    longer than 18 characters are shortened with "…". Each level is one block of panels,
    stacked; pass ``level=`` for one. Markers at the axis edge are not clipped.

    Parameters
    ----------
    data : xarray.Dataset, xarray.DataTree, str, Path, dict or pandas.DataFrame
        As in :func:`group_coverage_table`: a comparison's results (file, tree or root Dataset,
        or one data set of it), :func:`calibprob.evaluate` output(s) with ``groups=``, or a plain
        table with columns ``group``, ``coverage``, ``count`` (and optionally ``method``,
        ``level``, ``infinite``).
    level : float or sequence of float, optional
        Confidence level(s) to draw; default every level in ``data``. Required for a table
        without a ``level`` column (it is then the nominal level of every row).
    sort : {"coverage", "label", "count"}, default "coverage"
        Row order, top to bottom: lowest coverage first (the lowest over the methods; ties by
        label), labels in natural order (numbers numerically: 0, 1, 2, 10, not 0, 1, 10, 2), or
        largest group first.
    dataset : str, optional
        The data set of a results file with more than one.
    title : str, optional
        Above the figure; default "Coverage by group".
    colors : dict, optional
        Colour per method; default matplotlib's colour cycle in the order the methods appear.
    mass : float, default ``BAND_MASS``
        Probability of the band.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        If ``sort`` is not one of ``GROUP_SORTS``, and as :func:`group_coverage_table`
        (no group coverage, an empty table, a level not in ``data``, ``mass`` outside (0, 1)).

    References
    ----------
    Ding, T., Angelopoulos, A. N., Bates, S., Jordan, M. I. and Tibshirani, R. J. (2023).
    Class-conditional conformal prediction with many classes. NeurIPS (coverage within groups).

    Clopper, C. J. and Pearson, E. S. (1934). Biometrika 26(4), 404-413 (exact binomial limits).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.plots import coverage_by_group
    >>> rng = np.random.default_rng(0); g = rng.integers(0, 12, 600)
    >>> y = rng.normal(size=600) * (0.7 + 0.05 * g)           # noise grows with the group label
    >>> m = calibprob.evaluate(calibprob.normal(np.zeros(600), np.ones(600)), y, [0.9], groups=g)
    >>> fig = coverage_by_group({"N(0, 1)": m}, level=0.9, sort="label")
    >>> [t.get_text() for t in fig.axes[0].get_yticklabels()][8:]      # natural order: 9 before 10
    ['8 (n=55)', '9 (n=54)', '10 (n=52)', '11 (n=62)']
    >>> fig.get_size_inches()[0]
    np.float64(8.0)
    """
    import matplotlib.pyplot as plt

    if sort not in GROUP_SORTS:
        raise ValueError(f"sort={sort!r} is not a row order; pass one of {', '.join(map(repr, GROUP_SORTS))}.")
    table = group_coverage_table(data, level, dataset=dataset, mass=mass)
    levels = sorted(set(table["level"]))
    methods = list(dict.fromkeys(table["method"]))
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = {m: (colors or {}).get(m, cycle[i % len(cycle)]) for i, m in enumerate(methods)}
    blocks = [table[table["level"] == c] for c in levels]
    ncol, _, row_h = _group_grid(table["group"].nunique(), len(methods))
    rows = [int(np.ceil(block["group"].nunique() / ncol)) for block in blocks]
    fig = plt.figure(figsize=(GROUP_FIGURE_WIDTH, sum(rows) * row_h + 0.95 * len(levels) + 0.9), layout="constrained")
    # one sub-figure per level, so a level's title does not widen the first column of panels
    subs = fig.subfigures(len(levels), 1, height_ratios=[r * row_h + 0.95 for r in rows], squeeze=False)
    for sub, c, block, n_rows in zip(subs.ravel(), levels, blocks, rows):
        axes = sub.subplots(1, ncol, sharex=True, squeeze=False)[0]
        _draw_group_level(axes, block, c, methods, colors, sort, n_rows, mass)
    fig.suptitle(title or "Coverage by group", fontsize=11)
    fig.legend(
        handles=_group_legend(methods, colors, bool((table["infinite"] > 0).any()), mass),
        loc="outside lower center",
        ncol=min(4, len(methods) + 3),
        fontsize=8,
        frameon=False,
    )
    return fig


def _group_grid(n_groups: int, n_methods: int) -> tuple[int, int, float]:
    """(columns of panels, rows per panel, inches per row) of one level's block."""
    row_h = max(0.15, 0.075 * n_methods)
    ncol = int(min(_MAX_COLUMNS, max(1, np.ceil(n_groups * row_h / _PANEL_HEIGHT))))
    rows = int(np.ceil(n_groups / ncol))
    # at the last column the rows get closer (not below 0.15 in) before the figure grows taller
    return ncol, rows, max(0.15, min(row_h, _PANEL_HEIGHT / rows))


def _group_order(block: pd.DataFrame, sort: str) -> list[str]:
    """The groups of one level in the asked order (top row first)."""
    labels = sorted(set(block["group"]), key=natural_key)
    if sort == "label":
        return labels
    rank = {g: i for i, g in enumerate(labels)}
    if sort == "count":
        size = block.groupby("group")["count"].max()
        return sorted(labels, key=lambda g: (-size[g], rank[g]))
    worst = block.groupby("group")["coverage"].min()
    return sorted(labels, key=lambda g: (worst[g], rank[g]))


def _short(label: str, n: float) -> str:
    text = label if len(label) <= 18 else label[:17] + "…"
    return f"{text} (n={int(n)})"


def _draw_group_level(
    axes: Any,
    block: pd.DataFrame,
    c: float,
    methods: list[str],
    colors: dict[str, Any],
    sort: str,
    rows: int,
    mass: float,
) -> None:
    """One level's row of panels: bands, the nominal line, one marker per (group, method)."""
    ncol = len(axes)
    groups = _group_order(block, sort)
    cov = block.pivot(index="group", columns="method", values="coverage").reindex(index=groups, columns=methods)
    inf = block.pivot(index="group", columns="method", values="infinite").reindex(index=groups, columns=methods)
    count = block.groupby("group")["count"].max().reindex(groups).to_numpy()
    lo, hi = binomial_band(c, count, mass)
    below = block.groupby("group")["below_band"].any().reindex(groups).to_numpy()
    # the axis spans the coverages and the nominal level; a small group's band may run past it (clipped)
    xlo = max(0.0, np.floor((min(np.nanmin(cov.to_numpy()), c) - 0.04) * 20) / 20)
    xhi = min(1.0, np.ceil((max(np.nanmax(cov.to_numpy()), np.nanmax(hi), c) + 0.02) * 20) / 20)
    step = min(0.8 / len(methods), 0.25)
    offsets = (np.arange(len(methods)) - (len(methods) - 1) / 2) * step
    fontsize = 7.5 if ncol <= 2 else 6.5
    for j, ax in enumerate(axes):
        part = slice(j * rows, (j + 1) * rows)
        y = np.arange(len(groups[part]))
        ax.barh(y, (hi - lo)[part], left=lo[part], height=0.8, color="0.87", lw=0, zorder=0)
        ax.axvline(c, color="0.25", ls="--", lw=1, zorder=2.5)  # above the grid line at the same place
        for k, m in enumerate(methods):
            x, trivial = cov[m].to_numpy()[part], inf[m].to_numpy()[part] > 0
            ms = 5 if len(methods) <= 3 else 4
            style = {"color": colors[m], "ms": ms, "marker": "o"}
            trivial_style = {"mfc": "white", "mec": colors[m], "mew": 1.2, "ms": ms + 1.5, "marker": ">"}
            for keep, kw in ((~trivial, style), (trivial, trivial_style)):
                if keep.any():
                    # unclipped, so a marker at coverage 1 or at the axis edge shows whole; left out of the
                    # layout, whose bounding boxes of unclipped lines would squeeze the axes
                    (line,) = ax.plot(x[keep], y[keep] + offsets[k], ls="", clip_on=False, zorder=3, **kw)
                    line.set_in_layout(False)
        ax.set_yticks(y, [_short(g, n) for g, n in zip(groups[part], count[part])], fontsize=fontsize)
        for tick, bad in zip(ax.get_yticklabels(), below[part]):
            tick.set_color("#b3261e" if bad else "0.1")
        ax.set_ylim(rows - 0.5, -0.5)
        # a little room past 0 and 1, so a marker there sits whole inside the panel, clear of the labels
        ax.set_xlim(xlo - 0.02 * (xhi - xlo), xhi + 0.03 * (xhi - xlo))
        ax.tick_params(axis="y", length=0, pad=4)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(axis="x", color="0.92", lw=0.8, zorder=-1)
        ax.set_xlabel("coverage in group", fontsize=8)
    for ax in axes[-(-len(groups) // rows) :]:
        ax.axis("off")  # a level with fewer groups than the others leaves its last panels empty
    n_inf = int((inf.to_numpy() > 0).any(axis=1).sum())
    note = f"; {n_inf} with infinite intervals" if n_inf else ""
    axes[0].get_figure(root=False).suptitle(
        f"level {c:g}: {int(below.sum())} of {len(groups)} groups under the band{note}", fontsize=9.5
    )


def _group_legend(methods: list[str], colors: dict[str, Any], any_infinite: bool, mass: float) -> list:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list = [Line2D([], [], ls="", marker="o", color=colors[m], label=m) for m in methods]
    if any_infinite:
        handles.append(
            Line2D([], [], ls="", marker=">", mfc="white", mec="0.3", ms=6.5, label="infinite interval (trivial hit)")
        )
    handles.append(Patch(color="0.87", label=f"central {mass:.0%} of Binomial(n, level)/n"))
    handles.append(Line2D([], [], color="0.3", ls="--", lw=1, label="nominal level"))
    return handles


# ----------------------------------------------------------------------------- coverage over time
def plot_rolling_coverage(
    metrics: xr.Dataset, *, confidence_level: ArrayLike | None = None, ax: Any = None, label: str | None = None
) -> Any:
    r"""Rolling coverage over time against the nominal level, with the binomial band of a calibrated forecaster.

    Draws ``rolling_coverage`` of :func:`calibprob.evaluate` on a prediction with a ``time``
    coordinate (one line per level), the nominal level (dashed) and the central 95 % of
    :math:`\mathrm{Bin}(w, c)/w` (:func:`binomial_band`, shaded): where the rolling coverage of a
    calibrated forecaster with independent hits stays at each time with that probability. A line
    leaving the band for long is miscalibration over time, whatever the coverage over the whole stream.

    Parameters
    ----------
    metrics : xarray.Dataset
        The output of :func:`calibprob.evaluate` with its diagnostics over time.
    confidence_level : float or sequence of float, optional
        Levels to draw (default all of ``metrics``' levels).
    ax : matplotlib Axes, optional
    label : str, optional
        Prefix of the legend entries (a method's name).

    Returns
    -------
    matplotlib Axes

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.plots import plot_rolling_coverage
    >>> rng = np.random.default_rng(0)
    >>> pred = calibprob.normal(np.zeros(300), np.ones(300)).assign_coords(time=("obs", np.arange(300)))
    >>> m = calibprob.evaluate(pred, np.r_[rng.normal(size=150), 2 * rng.normal(size=150)], [0.9], time_window=50)
    >>> ax = plot_rolling_coverage(m)
    >>> ax.get_ylabel()
    'rolling coverage (50 rows)'
    """
    if not isinstance(metrics, xr.Dataset) or "rolling_coverage" not in metrics:
        raise ValueError(
            "metrics must be calibprob.evaluate's output on a prediction with a 'time' coordinate along obs "
            "(it has no 'rolling_coverage'). Attach the times: pred.assign_coords(time=('obs', t))."
        )
    ax = _axes(ax, figsize=(8, 4))
    levels = metrics["confidence_level"].values if confidence_level is None else np.atleast_1d(confidence_level)
    colors = _colors()
    t = metrics["time"].values
    w = int(metrics["rolling_coverage"].attrs["time_window"])
    for i, c in enumerate(levels):
        m = metrics.sel(confidence_level=float(c), method="nearest")
        color = colors[i % len(colors)]
        name = f"{label}: {float(c):g}" if label else f"{float(c):g}"
        ax.plot(t, m["rolling_coverage"].values, color=color, lw=1.2, label=name)
        ax.axhline(float(c), color=color, ls="--", lw=0.8)
        lo, hi = float(m["rolling_coverage_band_lower"]), float(m["rolling_coverage_band_upper"])
        ax.axhspan(lo, hi, color=color, alpha=0.12, lw=0)
    ax.set_xlabel("time")
    ax.set_ylabel(f"rolling coverage ({w} rows)")
    ax.set_title("Rolling coverage against nominal (shaded: 95 % binomial band)")
    ax.legend(title="confidence level", fontsize="small")
    return ax
