"""Plots of Bayesian-optimisation runs: best-so-far, calibration error, a 1-D snapshot (paper Fig. 6).

Every function takes either one run (the DataTree of :func:`calibprob.bo.minimize`),
a dict ``{label: run}`` to overlay, or an experiment Dataset of
:func:`calibprob.bo.run_experiment` (mean ± standard error over seeds, one
curve per method), and returns the matplotlib ``Axes``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike
from scipy import special

from calibprob.bo.acquisition import StandardizedLaw
from calibprob.bo.loop import default_gp

__all__ = ["plot_best_so_far", "plot_calibration_error", "plot_snapshot_1d", "snapshot"]


def _axes(ax: Any) -> Any:
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(6, 4))
    return ax


def _as_runs(results: Any) -> Any:
    if isinstance(results, xr.DataTree):
        return {results.attrs.get("calibration", "run"): results}
    if isinstance(results, dict):
        return results
    return None


def _experiment_band(
    ds: xr.Dataset, var: str, function: str | None, acquisition: str | None, ax: Any, step_dim: str
) -> Any:
    function = ds["function"].values[0] if function is None else function
    acquisition = ds["acquisition"].values[0] if acquisition is None else acquisition
    for m in ds["method"].values:
        sel = {"function": function, "acquisition": acquisition, "method": m}
        if not np.isfinite(ds["n_init"].sel(sel).values).any():
            continue  # not run for this acquisition (e.g. sharp with EI)
        sub = ds[var].sel(sel)
        if step_dim == "evaluation":
            n0 = int(np.nanmax(ds["n_init"].sel({"function": function, "acquisition": acquisition, "method": m})))
            n_ev = int(
                np.nanmax(ds["n_evaluations"].sel({"function": function, "acquisition": acquisition, "method": m}))
            )
            sub = sub.isel(evaluation=slice(n0 - 1, n_ev))
            x = np.arange(sub.sizes["evaluation"])
        else:
            x = sub[step_dim].values
        vals = sub.transpose("seed", ...).values
        if step_dim == "step":
            keep = np.isfinite(vals).any(axis=0)
            vals, x = vals[:, keep], x[keep]
        ok = np.isfinite(vals).all(axis=1) if vals.size else np.zeros(vals.shape[0], bool)
        if not ok.any():
            continue
        vals = vals[ok]
        mean = vals.mean(axis=0)
        se = vals.std(axis=0, ddof=1) / np.sqrt(vals.shape[0]) if vals.shape[0] > 1 else 0 * mean
        ax.plot(x, mean, label=f"{m} (n={vals.shape[0]})")
        ax.fill_between(x, mean - se, mean + se, alpha=0.25)
    ax.set_title(f"{function}, {acquisition}")
    return ax


def plot_best_so_far(
    results: Any, *, function: str | None = None, acquisition: str | None = None, regret: bool = False, ax: Any = None
) -> Any:
    """Best value found so far against the BO step.

    Parameters
    ----------
    results : DataTree, dict of DataTree, or experiment Dataset
    function, acquisition : str, optional
        Which panel of an experiment Dataset (default the first).
    regret : bool
        Plot the simple regret (log scale) instead (runs with a known optimum).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, Fig. 3.

    Examples
    --------
    >>> from calibprob.bo import minimize
    >>> run = minimize("forrester", n_init=3, n_steps=3, seed=0)
    >>> other = minimize("forrester", n_init=3, n_steps=3, calibration="none", seed=0)
    >>> ax = plot_best_so_far({"calibrated": run, "uncalibrated": other})
    """
    ax = _axes(ax)
    runs = _as_runs(results)
    if runs is None:
        ax = _experiment_band(results, "best_so_far", function, acquisition, ax, "evaluation")
        if regret:
            ax.set_yscale("symlog")
        ax.set(xlabel="BO step (0 = end of the initial design)", ylabel="best value found (mean ± s.e.)")
    else:
        for label, run in runs.items():
            ev = run["evaluations"]
            var = "simple_regret" if regret and "simple_regret" in ev else "best_so_far"
            ax.plot(ev["evaluation"].values, ev[var].values, marker=".", label=str(label))
            n0 = int(run.attrs.get("n_init", 0))
            if n0:
                ax.axvline(n0 - 0.5, color="0.7", lw=0.8, ls="--")
        if regret:
            ax.set_yscale("log")
        ax.set(
            xlabel="evaluation (dashed: end of initial design)",
            ylabel="simple regret" if regret else "best value found",
        )
    ax.legend(fontsize="small")
    return ax


def plot_calibration_error(
    results: Any, *, function: str | None = None, acquisition: str | None = None, base: bool = False, ax: Any = None
) -> Any:
    """Running calibration error (ECE over 21 levels) of the forecasts made before each observation.

    Parameters
    ----------
    results : DataTree, dict of DataTree, or experiment Dataset
    base : bool
        Single runs: also draw the base GP's calibration error (dashed).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, Fig. 4 (calibration error per step).

    Examples
    --------
    >>> from calibprob.bo import minimize
    >>> run = minimize("forrester", n_init=3, n_steps=3, seed=0)
    >>> ax = plot_calibration_error(run, base=True)
    """
    ax = _axes(ax)
    runs = _as_runs(results)
    if runs is None:
        ax = _experiment_band(results, "calibration_error", function, acquisition, ax, "step")
    else:
        for label, run in runs.items():
            st = run["steps"]
            (line,) = ax.plot(st["step"].values, st["calibration_error"].values, marker=".", label=str(label))
            if base:
                ax.plot(
                    st["step"].values,
                    st["calibration_error_base"].values,
                    ls="--",
                    color=line.get_color(),
                    label=f"{label} (base GP)",
                )
    ax.set(xlabel="BO step", ylabel="calibration error (ECE, steps 1..t)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    return ax


def snapshot(
    result: xr.DataTree, step: int, grid: ArrayLike, *, gp: Any = None, confidence_level: float = 0.95
) -> xr.Dataset:
    """Rebuild the model of a run at a step (the one that chose the step's point) on a grid.

    Parameters
    ----------
    result : DataTree
        A run of :func:`calibprob.bo.minimize`.
    step : int
        1..n_steps.
    grid : array_like, shape (m, d)
        Points (original units).
    gp : GaussianProcessRegressor, optional
        The template the run used (default :func:`calibprob.bo.loop.default_gp`).
    confidence_level : float

    Returns
    -------
    xarray.Dataset
        Over ``obs``: ``mean``, base ``lower``/``upper``, recalibrated
        ``lower_recal``/``upper_recal`` (equal to the base without a
        recalibrator), in original units; attrs ``chosen_x``.

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, Fig. 6.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.bo import minimize
    >>> run = minimize("forrester", n_init=3, n_steps=3, seed=0)
    >>> snap = snapshot(run, step=2, grid=np.linspace(0.0, 1.0, 50)[:, None])
    >>> snap.sizes["obs"], sorted(snap.data_vars)
    (50, ['lower', 'lower_recal', 'mean', 'upper', 'upper_recal'])
    """
    ev, st = result["evaluations"].to_dataset(), result["steps"].to_dataset()
    n0 = int(result.attrs["n_init"])
    n = n0 + step - 1
    X = ev["x"].values[:n]
    y = ev["y"].values[:n]
    fin = np.isfinite(y)
    ym = np.where(fin, y, np.max(y[fin]))
    m, s = ym.mean(), ym.std() or 1.0
    grid = np.asarray(grid, float).reshape(-1, X.shape[1])
    bounds = np.asarray(result.attrs["bounds"], float).reshape(-1, 2)
    span = bounds[:, 1] - bounds[:, 0]
    rec = st.sel(step=step)
    theta = {
        "lengthscale": rec["lengthscale"].values / span,
        "variance": float(rec["variance"]) / s**2,
        "noise": float(rec["noise"]) / s**2,
    }
    template = default_gp() if gp is None else gp
    model = type(template)(**{**template.get_params(), "theta": theta, "optimize": False})
    model.fit((X - bounds[:, 0]) / span, (ym - m) / s)
    mu, sd = model.predict_mean_std((grid - bounds[:, 0]) / span)
    p = np.array([(1 - confidence_level) / 2, (1 + confidence_level) / 2])
    z = special.ndtri(p)
    zr = z
    if "recalibrator" in result:
        R = result["recalibrator"].to_dataset().sel(step=step)
        floor = 1e-3
        g = special.ndtri(np.clip(R["recalibration"].values, floor, 1 - floor))
        zr = StandardizedLaw(R["level"].values, np.maximum.accumulate(g)).ppf(p)
    out = xr.Dataset(
        {
            "mean": ("obs", m + s * mu),
            "lower": ("obs", m + s * (mu + z[0] * sd)),
            "upper": ("obs", m + s * (mu + z[1] * sd)),
            "lower_recal": ("obs", m + s * (mu + zr[0] * sd)),
            "upper_recal": ("obs", m + s * (mu + zr[1] * sd)),
        },
        attrs={"chosen_x": ev["x"].values[n].tolist(), "step": step, "confidence_level": confidence_level},
    )
    return out


def plot_snapshot_1d(
    result: xr.DataTree,
    step: int,
    *,
    objective: Any = None,
    grid: ArrayLike | None = None,
    gp: Any = None,
    confidence_level: float = 0.95,
    ax: Any = None,
) -> Any:
    """Deshpande et al. Fig. 6: the model, its interval and the recalibrated interval at one step (1-D).

    Parameters
    ----------
    result : DataTree
        A 1-D run of :func:`calibprob.bo.minimize` (its root attrs must hold ``bounds``).
    step : int
    objective : callable, optional
        The true function, drawn in green.
    grid : array_like, optional
        Default 400 points over the run's bounds.
    gp : GaussianProcessRegressor, optional
    confidence_level : float
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, Fig. 6.

    Examples
    --------
    >>> from calibprob.bo import minimize
    >>> run = minimize("forrester", n_init=3, n_steps=3, seed=0)
    >>> from calibprob.datasets import get_function
    >>> ax = plot_snapshot_1d(run, step=2, objective=get_function("forrester"))
    """
    ax = _axes(ax)
    bounds = np.asarray(result.attrs["bounds"], float).reshape(-1, 2)
    if bounds.shape[0] != 1:
        raise ValueError(f"plot_snapshot_1d needs a 1-D run; this one has d = {bounds.shape[0]}.")
    g = np.linspace(bounds[0, 0], bounds[0, 1], 400) if grid is None else np.asarray(grid, float).ravel()
    snap = snapshot(result, step, g[:, None], gp=gp, confidence_level=confidence_level)
    if objective is not None:
        ax.plot(g, np.asarray(objective(g[:, None])), color="green", lw=1.5, label="objective")
    ax.plot(g, snap["mean"], color="C0", label="GP mean")
    ax.fill_between(g, snap["lower"], snap["upper"], color="C0", alpha=0.2, label=f"GP {confidence_level:.0%} interval")
    if "recalibrator" in result:
        ax.plot(g, snap["lower_recal"], color="C3", ls="--", label="recalibrated interval")
        ax.plot(g, snap["upper_recal"], color="C3", ls="--")
    n = int(result.attrs["n_init"]) + step - 1
    ev = result["evaluations"].to_dataset()
    ax.scatter(ev["x"].values[:n, 0], ev["y"].values[:n], color="k", zorder=3, s=15, label="data")
    ax.axvline(snap.attrs["chosen_x"][0], color="C1", lw=1, label="next point")
    ax.set(
        title=f"step {step} ({result.attrs.get('calibration')}, {result.attrs.get('acquisition')})",
        xlabel="x",
        ylabel="y",
    )
    ax.legend(fontsize="x-small")
    return ax
