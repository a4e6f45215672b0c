"""The fitted GP-Beta calibrator's ArviZ ``DataTree`` (``idata_``) and held-out ELPD."""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from calibprob._core.validation import check_array
from calibprob.calibrators.gp_beta._link import OUTPUTS, _correlation, _pointwise_loglik
from calibprob.predictive._arviz import _heldout_elpd_data

_DIMS = {
    "log_theta": (),
    "W": ("output", "rank"),
    "log_kappa": ("output",),
    "log_gamma": ("output",),
    "delta": ("output",),
    "V": ("inducing", "output"),
    "Z": ("inducing", "input"),
}


def post_flat(posterior: Any, rank: int) -> dict:
    """Posterior draws by name with (chain, draw) flattened to one sample axis."""
    names = ["log_theta", "log_gamma", "delta", "V"] + (["W", "log_kappa"] if rank > 0 else [])
    if "Z" in posterior:
        names.append("Z")
    out = {}
    for k in names:
        values = np.asarray(posterior[k].values)
        out[k] = values.reshape((-1,) + values.shape[2:])
    return out


def _posterior(post: dict, coords: dict, rank: int) -> xr.Dataset:
    """Free parameters plus the derived, identifiable ones (``theta``, ``gamma``, ``kappa``, ``R``)."""
    data = {k: (("chain", "draw") + _DIMS[k], np.asarray(v, float)) for k, v in post.items()}
    # derived, identifiable quantities (what to read in az.summary)
    data["theta"] = (("chain", "draw"), np.exp(post["log_theta"]))
    data["gamma"] = (("chain", "draw", "output"), np.exp(post["log_gamma"]))
    if rank > 0:
        data["kappa"] = (("chain", "draw", "output"), np.exp(post["log_kappa"]))
        W = post["W"]
        B = W @ np.swapaxes(W, -1, -2) + np.exp(post["log_kappa"])[..., None] * np.eye(3)
        data["R"] = (("chain", "draw", "output", "output2"), _correlation(B))
    return xr.Dataset(data, coords={k: v for k, v in coords.items() if k != "obs"})


def make_tree(est: Any, post: dict, data: Any, y: Any, sample_stats: Any, extra_groups: dict) -> xr.DataTree:
    """Assemble ``idata_`` from posterior draws ``post`` (name -> (chain, draw, ...)) and the fit's data.

    ``data`` is the fit's :class:`._inference.Problem`; ``extra_groups`` may carry
    ``variational`` / ``map`` groups, NUTS's own ``log_likelihood`` (which replaces
    the NumPy one) and ``_posterior_attrs``.
    """
    chain, draw = next(iter(post.values())).shape[:2]
    n = data.mu.size
    coords = {
        "chain": np.arange(chain),
        "draw": np.arange(draw),
        "output": list(OUTPUTS),
        "inducing": np.arange(est.n_inducing),
        "input": ["mu", "sigma"],
        "output2": list(OUTPUTS),
        "obs": np.arange(n),
    }
    if est.rank > 0:
        coords["rank"] = np.arange(est.rank)
    posterior = _posterior(post, coords, est.rank)
    posterior.attrs.update(extra_groups.pop("_posterior_attrs", {}))
    posterior.attrs.update({"inference": est.inference, "n_inducing": est.n_inducing, "rank": est.rank})

    flat = {k: v.reshape((-1,) + v.shape[2:]) for k, v in post.items()}
    ll = _pointwise_loglik(flat, data.X, data.u, data.log_jac, est.inducing_init_, est.rank).reshape(chain, draw, n)
    sample_dims = {"chain": coords["chain"], "draw": coords["draw"]}
    log_lik = xr.Dataset({"y": (("chain", "draw", "obs"), ll)}, coords={**sample_dims, "obs": coords["obs"]})
    if sample_stats is None:
        sample_stats = xr.Dataset(
            {"log_likelihood": (("chain", "draw"), ll.sum(axis=-1))},
            coords=sample_dims,
            attrs={"inference": est.inference},
        )
    groups = {
        "posterior": posterior,
        "sample_stats": sample_stats,
        "log_likelihood": log_lik,
        "observed_data": xr.Dataset({"y": ("obs", y)}, coords={"obs": coords["obs"]}),
        "constant_data": _constant_data(est, data, coords),
    }
    groups.update(extra_groups)  # NUTS: PyMC's log_likelihood replaces the NumPy one
    tree = xr.DataTree.from_dict(groups)
    tree.attrs.update(
        {
            "method": "gp-beta",
            "inference": est.inference,
            "n_inducing": est.n_inducing,
            "rank": est.rank,
            "learn_inducing": int(bool(est.learn_inducing)),
            "batch_size": 0 if data.batch is None else int(data.batch),
            "paper": "Song, Diethe, Kull & Flach (2019)",
        }
    )
    return tree


def _constant_data(est: Any, data: Any, coords: dict) -> xr.Dataset:
    return xr.Dataset(
        {
            "base_mu": ("obs", data.mu),
            "base_sigma": ("obs", data.sigma),
            "base_zscore": ("obs", data.u),
            "base_log_jacobian": ("obs", data.log_jac),
            "loc": est.loc_,
            "scale": est.scale_,
            "inducing_init": (("inducing", "input"), est.inducing_init_),
        },
        coords={"obs": coords["obs"], "inducing": coords["inducing"], "input": coords["input"]},
    )


def held_out_elpd(log_lik: Any) -> Any:
    r"""Held-out expected log predictive density as an ArviZ ``ELPDData`` (for ``arviz.compare``).

    With pointwise log-likelihoods :math:`\ell_{si} = \log p(y_i\mid\vartheta_s)` of
    *held-out* points under posterior draws :math:`s`,
    :math:`\mathrm{elpd}_i = \log\frac1S\sum_s e^{\ell_{si}}` — the exact held-out
    predictive density, with no importance sampling. (PSIS-LOO on points that were
    never in the fit would estimate something else, and fails on a base model whose
    log-likelihood does not vary over draws.) Returned as the one-fold case of
    :class:`arviz_stats.utils.ELPDDataLOOKFold`, so models scored on the same
    held-out points compare with ``arviz.compare({...})``.

    Parameters
    ----------
    log_lik : array_like, shape (n,), (S, n) or (chain, draw, n)
        A plug-in model (e.g. the uncalibrated Gaussian base) passes shape (n,).

    Returns
    -------
    arviz_stats.utils.ELPDDataLOOKFold
        ``elpd`` (sum), ``se``, ``p`` (:math:`\sum_i \mathrm{elpd}_i - \overline{\ell_{\cdot i}}`),
        ``elpd_i`` (DataArray over ``obs``).
    """
    ll = np.asarray(log_lik, float)
    n = ll.shape[-1]
    ll = ll.reshape(-1, n)
    check_array(ll, "log_lik", ndim=2)
    return _heldout_elpd_data(ll)
