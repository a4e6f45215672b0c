r"""The calibration diagnostics of a fitted sharp GP (the ``calibration`` group)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

if TYPE_CHECKING:
    from calibprob.calibrators.sharp_gp._solver import _Knot
    from calibprob.calibrators.sharp_gp.estimator import SharpCalibratedGP

__all__ = ["calibration_dataset"]


def _knot_columns(knots: Sequence[_Knot], kl: np.ndarray) -> dict:
    """Per knot, the solver's record of the nearest fitted level.

    The cross-fitted variant fits θ at levels clipped to the other part's range;
    each knot reports the fit of the nearest fitted level.
    """
    fitted = np.array([k.level for k in knots])
    nearest = [knots[int(np.argmin(np.abs(fitted - lv)))] for lv in kl]
    attrs = ("sharpness", "converged", "message", "n_iter", "n_eval", "backtracked", "side", "seconds")
    return {a: np.array([getattr(k, a) for k in nearest]) for a in attrs}


#: the flags of ``repaired`` (estimator._set_knots): exact_monotone_knots' 4, then monotone_knots' 1 and 2
_REPAIRED = (
    "monotone repair after recomputing β: 4 φ moved toward the outer knot's (β exact), "
    "1 β widened (rounding), 2 φ raised; added"
)


# the signature packed by hand (fmt: skip): one parameter per line would take the function past the 80-line limit
def calibration_dataset(
    model: SharpCalibratedGP, knots: Sequence[_Knot], kl: np.ndarray, beta: np.ndarray, coverage: np.ndarray,
    repaired: np.ndarray, skipped: np.ndarray, r_b: np.ndarray, sig: np.ndarray, theta_R: dict, n_fit: int,
    use_subset: bool,
) -> xr.Dataset:  # fmt: skip
    """Per-knot and per-node diagnostics of ``model`` (a fitted :class:`SharpCalibratedGP`).

    Parameters
    ----------
    model : SharpCalibratedGP
        With its knot and node attributes set.
    knots : list of _Knot
        The solver's knots.
    kl, beta, coverage, repaired : ndarray, shape (K,)
        Knot levels, final β, calibration coverage, repair flags.
    skipped : ndarray
        Levels not fitted (β changes sign there).
    r_b : ndarray, shape (N_B,)
        Residuals of the points that set β.
    sig : ndarray, shape (K, N_B)
        σ(θ_δ, x) at those points.
    theta_R : dict
        The base's hyperparameters.
    n_fit : int
    use_subset : bool

    Returns
    -------
    xarray.Dataset
    """
    d = model.n_features_in_
    cols = _knot_columns(knots, kl)

    sharp = np.mean((beta[:, None] * sig) ** 2, axis=1)
    nodes_th = np.exp(-model.nodes_log_theta_[:, :d])
    ds = xr.Dataset(
        {
            "beta": ("knot", beta, {"long_name": "calibration scale β_δ (q_lin of z-scores, eq. 6)"}),
            "lengthscale": (
                ("knot", "feature"),
                model.knot_lengthscale_,
                {"long_name": "calibration lengthscales of θ_δ"},
            ),
            "variance": ("knot", model.knot_variance_, {"long_name": "calibration signal variance"}),
            "noise": ("knot", model.knot_noise_, {"long_name": "noise variance used in σ(θ_δ, x)"}),
            "objective": (
                "knot",
                sharp,
                {"long_name": "sharpness: mean over calibration points of (β_δ σ(θ_δ, x))², eq. (7)/N"},
            ),
            "fit_objective": (
                "knot",
                cols["sharpness"],
                {"long_name": "sharpness on the points that fitted θ (cross-fitted: the other part)"},
            ),
            "coverage": (
                "knot",
                coverage,
                {"long_name": "fraction of calibration residuals <= β_δ σ(θ_δ, x) (target ≈ δ(N+1)/N)"},
            ),
            "converged": (
                "knot",
                cols["converged"].astype(bool),
                {"long_name": "L-BFGS-B (or line search) reported success"},
            ),
            "message": ("knot", cols["message"].astype(str)),
            "n_iter": ("knot", cols["n_iter"].astype(int)),
            "n_eval": (
                "knot",
                cols["n_eval"].astype(int),
                {"long_name": "objective+gradient evaluations, all starts"},
            ),
            "backtracked": (
                "knot",
                cols["backtracked"].astype(bool),
                {"long_name": "φ moved back toward the outer level to keep |β| shrinking inward"},
            ),
            "repaired": (
                "knot",
                repaired.astype(int),
                {"long_name": _REPAIRED},
            ),
            "side": ("knot", cols["side"].astype(str)),
            "seconds": ("knot", cols["seconds"].astype(float)),
            "node_beta": ("node", model.nodes_beta_),
            "node_lengthscale": (("node", "feature"), nodes_th),
            "node_log_theta": (
                ("node", "param"),
                model.nodes_log_theta_,
                {"long_name": "interpolation nodes in σ-increasing coordinates (-log ℓ, log σ_f², log σ_n²)"},
            ),
            "base_lengthscale": ("feature", np.broadcast_to(theta_R["lengthscale"], (d,)).astype(float)),
        },
        coords={
            "knot": np.arange(kl.size),
            "level": ("knot", kl),
            "node": np.arange(model.nodes_level_.size),
            "node_level": ("node", model.nodes_level_),
            "feature": np.arange(d),
            "param": [f"neg_log_lengthscale[{j}]" for j in range(d)] + ["log_variance", "log_noise"],
        },
    )
    ds.attrs.update(_attributes(model, r_b.size, n_fit, use_subset, theta_R, skipped))
    return ds


def _attributes(
    model: SharpCalibratedGP, n_b: int, n_fit: int, use_subset: bool, theta_R: dict, skipped: np.ndarray
) -> dict:
    """The Dataset's attributes: variant, sizes, switches and the base's θ."""
    return {
        "method": f"sharp-gp/{model.variant}",
        "variant": model.variant,
        "n_calibration": int(n_b),
        "n_fit": int(n_fit),
        "cross_fitted": int(model.variant == "cross-fitted"),
        "include_noise": int(model.include_noise),
        "fit_noise": int(model.fit_noise),
        "train_subset": int(use_subset),
        "base_variance": float(theta_R["variance"]),
        "base_noise": float(theta_R["noise"]),
        "skipped_levels": ", ".join(f"{v:.6g}" for v in skipped),
        "paper": "Capone, Hirche & Pleiss (2023), Sharp calibrated Gaussian processes, NeurIPS",
    }
