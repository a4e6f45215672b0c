"""Datasets built from a fitted GP-Beta posterior: posterior-predictive draws and calibration maps."""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from calibprob._core.dims import check_obs_dim
from calibprob.calibrators.gp_beta._link import _latent_numpy, beta_calibration_map, beta_link_ppf_z


def _obs_dim(pred: xr.Dataset, y: Any, n: int) -> Any:
    """The obs dim name and labels: the prediction's, or a 1-D DataArray ``y``'s own (e.g. PyMC's ``obs_id``)."""
    obs_dim = str(pred.attrs.get("obs_dim", "obs"))
    obs_values = pred["obs"].values
    if isinstance(y, xr.DataArray) and y.ndim == 1:
        obs_dim = str(y.dims[0])
        if obs_dim in y.coords and y.sizes[obs_dim] == n:
            obs_values = y[obs_dim].values
    check_obs_dim(obs_dim, "the observation dim")  # written beside chain/draw: never a draw dim's name
    return obs_dim, obs_values


def posterior_predictive_tree(
    est: Any, pred: xr.Dataset, X: np.ndarray, y: Any, random_state: Any, var_name: str
) -> xr.DataTree:
    """One inverse-transform draw per posterior draw and observation (see ``sample_posterior_predictive``)."""
    n = X.shape[0]
    obs_dim, obs_values = _obs_dim(pred, y, n)
    rng = np.random.default_rng(random_state)
    post = est.idata_["posterior"]
    C, D = post.sizes["chain"], post.sizes["draw"]
    draws = np.empty((C * D, n))
    rows = max(1, 2_000_000 // (C * D))
    flat = est._post_flat()
    for start in range(0, n, rows):
        sl = slice(start, start + rows)
        w = _latent_numpy(flat, X[sl], est.inducing_init_, est.rank_)  # (S, rows, 3)
        u = beta_link_ppf_z(rng.uniform(size=w.shape[:2]), w[..., 0], w[..., 1], w[..., 2])
        draws[:, sl] = pred.isel(obs=sl).calib.ppf_zscore(u.T).T
    coords = {"chain": post["chain"].values, "draw": post["draw"].values, obs_dim: obs_values}
    dims = ("chain", "draw", obs_dim)
    groups = {
        "posterior": post.to_dataset(),
        "posterior_predictive": xr.Dataset({var_name: (dims, draws.reshape(C, D, n))}, coords=coords),
    }
    if y is not None:
        yv = est._targets(y, n, "y", obs=pred["obs"].values)
        ll = est.log_likelihood(pred, yv)
        groups["log_likelihood"] = xr.Dataset({var_name: (dims, ll)}, coords=coords)
        groups["observed_data"] = xr.Dataset({var_name: ((obs_dim,), yv)}, coords={obs_dim: obs_values})
    return xr.DataTree.from_dict(groups)


def calibration_map_dataset(w: np.ndarray, p: np.ndarray, c_level: float, post: Any, mu: Any, sigma: Any) -> xr.Dataset:
    """Every draw's map at base CDF values ``p``, their mean and equal-tailed ``c_level`` band."""
    maps = beta_calibration_map(p[None, None, :], w[..., 0, None], w[..., 1, None], w[..., 2, None])
    C, D = post.sizes["chain"], post.sizes["draw"]
    lo, hi = np.quantile(maps, [(1 - c_level) / 2, (1 + c_level) / 2], axis=0)
    coords = {"chain": np.arange(C), "draw": np.arange(D), "obs": np.arange(mu.size), "p": p}
    ds = xr.Dataset(
        {
            "map": (("chain", "draw", "obs", "p"), maps.reshape(C, D, mu.size, p.size)),
            "mean": (("obs", "p"), maps.mean(axis=0)),
            "lower": (("obs", "p"), lo),
            "upper": (("obs", "p"), hi),
            "base_mu": ("obs", mu),
            "base_sigma": ("obs", sigma),
        },
        coords=coords,
    )
    ds.attrs.update(
        {"confidence_level": c_level, "description": "Beta calibration map c(p) = expit(a log p - b log(1-p) + c)"}
    )
    return ds
