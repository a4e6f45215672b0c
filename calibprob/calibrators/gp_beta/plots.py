"""The paper's Fig. 2 for a fitted GP-Beta calibrator (matplotlib, imported on use)."""

from __future__ import annotations

from typing import Any

import numpy as np

from calibprob.predictive import normal


def plot_calibration_map(
    calibrator: Any,
    pred: Any,
    *,
    at: Any = None,
    isotonic: Any = None,
    confidence_level: float = 0.68,
    axes: Any = None,
) -> Any:
    r"""The paper's Fig. 2: latent a, b, c along the base mean, and calibration maps at chosen means.

    Parameters
    ----------
    calibrator : GPBetaCalibrator
        A fitted calibrator.
    pred : xarray.Dataset
        Base predictions along whose means the three left panels are drawn
        (sorted by mean); e.g. the calibration data's, or
        ``calibprob.normal(grid, sigma)`` for a grid of means at a constant std.
    at : sequence of int, optional
        Indices into ``mu`` where the right panel draws the map (default: the
        10th, 50th and 90th percentile of ``mu``).
    isotonic : callable, optional
        ``p -> map(p)`` of a global recalibrator (e.g.
        ``IsotonicRecalibrator().calibration_map``), drawn for comparison.
    confidence_level : float, default 0.68
        Width of the shaded credible bands (0.68 ≈ the paper's ±1 sd).
    axes : array of 4 matplotlib Axes, optional

    Returns
    -------
    numpy.ndarray of matplotlib Axes, shape (4,)
    """
    import matplotlib.pyplot as plt

    pred, _ = calibrator._prediction("plot_calibration_map", pred, ())
    mu, sigma = calibrator._covariates(pred)
    order = np.argsort(mu)
    mu, sigma = mu[order], sigma[order]
    pred = normal(mu, sigma)  # only the GP's inputs matter for the maps
    if axes is None:
        _, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    axes = np.asarray(axes).ravel()
    params = calibrator.beta_parameters(pred)
    lo_q, hi_q = (1 - confidence_level) / 2, (1 + confidence_level) / 2
    Z = calibrator.inducing_init_
    for ax, name in zip(axes[:3], ("a", "b", "c")):
        da = params[name].stack(sample=("chain", "draw"))
        ax.plot(mu, da.median("sample"), color="C0", lw=1.5)
        ax.fill_between(mu, da.quantile(lo_q, "sample"), da.quantile(hi_q, "sample"), color="C0", alpha=0.25)
        ref = 0.0 if name == "c" else 1.0
        ax.axhline(ref, color="0.5", ls="--", lw=0.8)
        ax.plot(
            Z[:, 0] * calibrator.scale_ + calibrator.loc_,
            np.full(Z.shape[0], ref),
            "o",
            color="C3",
            ms=4,
            label="inducing (init)",
        )
        ax.set_xlabel(r"base mean $\mu$")
        ax.set_title(f"latent {name}")
    idx = at if at is not None else [int(np.argmin(np.abs(mu - np.quantile(mu, q)))) for q in (0.1, 0.5, 0.9)]
    cmap = calibrator.calibration_map(pred.isel(obs=idx), confidence_level=confidence_level)
    ax = axes[3]
    p = cmap["p"].values
    for j in range(len(idx)):
        ax.plot(p, cmap["mean"][j], color=f"C{j}", label=rf"GP-Beta at $\mu$={mu[idx][j]:.3g}")
        ax.fill_between(p, cmap["lower"][j], cmap["upper"][j], color=f"C{j}", alpha=0.2)
    if isotonic is not None:
        ax.plot(p, isotonic(p), color="k", ls=":", label="isotonic (global)")
    ax.plot([0, 1], [0, 1], color="0.6", ls="--", lw=0.8)
    ax.set_xlabel("base CDF $q$")
    ax.set_ylabel("calibrated CDF")
    ax.set_title("calibration maps")
    ax.legend(fontsize=7)
    return axes
