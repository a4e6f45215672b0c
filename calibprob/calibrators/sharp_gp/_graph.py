r"""The PyMC model of one level of the sharp GP, compiled once per configuration.

:func:`build_model` writes eq. (7) of Capone et al. (2023) as a PyMC model: the
free variable is the log-hyperparameter vector (σ-increasing coordinates), the
objective a ``pm.Potential``; every input is ``pm.Data``, so one compiled
function (:func:`_compiled`, cached in a ``calibprob._core.pytensor_setup.GraphCache``)
serves every level, restart, data set and input dimension.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from calibprob._core.pytensor_setup import GraphCache
from calibprob._core.ranks import RANK_TOL as _RANK_TOL
from calibprob._core.validation import check_choice
from calibprob.bases.gp import kernels

__all__ = ["build_model", "clear_cache"]


@dataclass(frozen=True)
class _GraphKey:
    kind: str  # "exact" or "vfe"
    kernel: str
    p: int
    mode: Any


def _placeholder(kind: str) -> dict:
    data = {
        "X_train": np.zeros((3, 1)) + np.arange(3)[:, None],
        "X_cal": np.zeros((2, 1)) + np.arange(2)[:, None] + 0.5,
        "residual": np.array([-1.0, 1.0]),
        "level": np.asarray(0.5),
        "phi_ref": np.zeros(3),
        "anchor": np.zeros(3),
        "free": np.array([1.0, 1.0, 0.0]),
        "constrained": np.asarray(0.0),
        "include_noise": np.asarray(1.0),
        "noise_tied": np.asarray(0.0),
        "constant_mean": np.asarray(0.0),
        "prior_sd": np.asarray(3.0),
    }
    if kind == "vfe":
        data["Z"] = np.zeros((2, 1)) + np.arange(2)[:, None]
        data["jitter"] = np.asarray(1e-6)
    return data


def build_model(kind: str = "exact", kernel: str = "se", p: int = 2, data: dict | None = None) -> Any:
    r"""The PyMC model of the single-level problem (6)–(7).

    Parameters
    ----------
    kind : {"exact", "vfe"}
        Posterior variance of an exact GP or of the VFE sparse GP (inducing
        inputs ``Z``, relative jitter on :math:`K_{mm}`).
    kernel : {"se", "matern"}
    p : int
        Matérn smoothness (ignored for ``"se"``).
    data : dict, optional
        Initial values of the ``pm.Data`` containers (see below); placeholders
        by default. Shapes are symbolic, so the compiled functions accept any
        data size and input dimension.

    Returns
    -------
    pymc.Model
        ``pm.Data``: ``X_train (n, d)``, ``X_cal (N, d)``, ``residual (N,)``,
        ``level`` δ, ``phi_ref (d+2,)`` (prior centre, values of fixed
        entries), ``anchor (d+2,)`` (previous level's φ), ``free (d+2,)``
        (1 = optimised), ``constrained`` (1: Remark 5.3's
        :math:`\phi = \text{anchor} - e^{u}`; 0: :math:`\phi = u`),
        ``include_noise``, ``noise_tied`` (relative nugget when the base
        interpolates, else 0), ``constant_mean`` (add the GLS-mean variance
        term), ``prior_sd``; for VFE also ``Z (m, d)`` and ``jitter``.
        Free variable ``u`` (``pm.Flat``, shape ``(d+2,)``), deterministics
        ``log_theta`` (φ), ``sigma_cal`` (σ(θ, x_cal)), ``beta``
        (:math:`q_{\mathrm{lin}}`) and ``sharpness`` (mean of (βσ)²); potentials
        ``sharpness_objective`` and ``prior``.
    """
    import pymc as pm
    import pytensor.tensor as pt

    check_choice(kind, "kind", ("exact", "vfe"))
    data = _placeholder(kind) if data is None else data
    names = list(_placeholder(kind))
    with pm.Model() as model:
        c = {name: pm.Data(name, data[name]) for name in names}
        u = pm.Flat("u", shape=(c["phi_ref"].shape[0],))
        phi_opt = pt.switch(c["constrained"] > 0.5, c["anchor"] - pt.exp(u), u)
        phi = pm.Deterministic("log_theta", c["free"] * phi_opt + (1.0 - c["free"]) * c["phi_ref"])
        d = c["X_train"].shape[1]
        ls = pt.exp(-phi[:d])
        var = pt.exp(phi[d])
        noise = pt.switch(c["noise_tied"] > 0, c["noise_tied"] * var, pt.exp(phi[d + 1]))
        if kind == "exact":
            # latent posterior variance (incl. the GLS-mean term) with an analytic
            # pullback: see calibprob.calibrators.sharp_gp._op, a PyTensor Op module
            # (it imports PyTensor at module level, so it is imported where the graph is built)
            from calibprob.calibrators.sharp_gp._op import posterior_variance_op

            outs = posterior_variance_op(kernel, p)(c["X_train"], c["X_cal"], ls, var, noise, c["constant_mean"])
            total = cast(list, outs)[0]
        else:
            total = _vfe_variance(c, kernel, p, ls, var, noise)
        total = total + c["include_noise"] * noise
        sigma = pm.Deterministic("sigma_cal", pt.sqrt(pt.maximum(total, 1e-12 * var)))
        _sharpness_potentials(c, sigma, phi)
    return model


def _vfe_variance(c: dict, kernel: str, p: int, ls: Any, var: Any, noise: Any) -> Any:
    r"""VFE predictive variance (latent, incl. the GLS-mean term) at the calibration inputs.

    :math:`\sigma^2 = k_{**} - k_*^\top K_{mm}^{-1} k_* + k_*^\top (K_{mm} + K_{mn}K_{nm}/\sigma_n^2)^{-1} k_*`
    (Titsias 2009), symbolic in PyTensor.
    """
    import pytensor.tensor as pt

    def k(A: Any, B: Any) -> Any:
        return kernels.kernel(kernel, A, B, ls, var, p=p, xp=pt)

    solve = pt.linalg.solve
    Z, Xtr, Xc = c["Z"], c["X_train"], c["X_cal"]
    N = Xc.shape[0]
    Kmm = k(Z, None) + c["jitter"] * var * pt.eye(Z.shape[0])
    Kmn = k(Z, Xtr)
    Kms = k(Z, Xc)
    S = Kmm + pt.dot(Kmn, Kmn.T) / noise
    one = pt.sum(Kmn, axis=1, keepdims=True) / noise
    A1 = solve(Kmm, Kms, assume_a="pos")
    A2 = solve(S, pt.concatenate([Kms, one], axis=1), assume_a="pos")
    post = var - pt.sum(Kms * A1, axis=0) + pt.sum(Kms * A2[:, :N], axis=0)
    a1 = A2[:, N]  # S⁻¹ K_mn 1 / σ_n²
    h = 1.0 - pt.sum(Kms * a1[:, None], axis=0)
    s11 = (Xtr.shape[0] - pt.sum(one[:, 0] * a1) * noise) / noise
    return post + c["constant_mean"] * h * h / s11


def _sharpness_potentials(c: dict, sigma: Any, phi: Any) -> None:
    """β (eq. 6, through the sort), the sharpness (7) and the prior, added to the current model."""
    import pymc as pm
    import pytensor.tensor as pt

    r = c["residual"]
    N = c["X_cal"].shape[0]
    zs = pt.sort(r / sigma)
    t = c["level"] * (N + 1)
    low = pt.clip(pt.floor(t + _RANK_TOL), 1, N - 1).astype("int64")
    beta = pm.Deterministic("beta", zs[low - 1] + (t - low) * (zs[low] - zs[low - 1]))
    sharp = pm.Deterministic("sharpness", pt.mean((beta * sigma) ** 2))
    pm.Potential("sharpness_objective", -N * sharp / pt.mean(r**2))
    pm.Potential("prior", pt.sum(c["free"] * -0.5 * ((phi - c["phi_ref"]) / c["prior_sd"]) ** 2))


@dataclass
class _Compiled:
    """The model and its compiled functions of the free variable ``u``.

    ``fn``: ``u -> (logp, dlogp, β, sharpness, σ_cal, φ)`` (L-BFGS-B); ``value_fn``
    (compiled on first use): the same without the gradient, for line searches and
    backtracking, where the pullback (as costly as the forward pass) is not needed.
    """

    key: _GraphKey
    model: Any
    fn: Any
    value_fn: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def set_data(self, values: dict) -> None:
        import pymc as pm

        pm.set_data(values, model=self.model)

    def __call__(self, u: np.ndarray) -> tuple[float, np.ndarray, float, float, np.ndarray, np.ndarray]:
        lp, g, beta, sharp, sigma, phi = self.fn(np.asarray(u, float))
        return float(lp), np.asarray(g, float), float(beta), float(sharp), np.asarray(sigma), np.asarray(phi)

    def values(self, u: np.ndarray) -> tuple[float, float, float, np.ndarray, np.ndarray]:
        """``(logp, β, sharpness, σ_cal, φ)`` at ``u``, without the gradient."""
        if self.value_fn is None:
            self.value_fn = _value_function(self.model, self.key.mode)
        lp, beta, sharp, sigma, phi = self.value_fn(np.asarray(u, float))
        return float(lp), float(beta), float(sharp), np.asarray(sigma), np.asarray(phi)


def _outputs(model: Any) -> list:
    return model.replace_rvs_by_values([model["beta"], model["sharpness"], model["sigma_cal"], model["log_theta"]])


def _value_function(model: Any, mode: Any) -> Any:
    import pytensor

    u_value = model.rvs_to_values[model["u"]]
    return pytensor.function([u_value], [model.logp(), *_outputs(model)], mode=mode)


_CACHE = GraphCache("calibprob.calibrators.sharp_gp")


def _compiled(key: _GraphKey) -> _Compiled:
    def build() -> _Compiled:
        import pytensor
        import pytensor.tensor as pt

        model = build_model(key.kind, key.kernel, key.p)
        u_value = model.rvs_to_values[model["u"]]
        logp = model.logp()
        grad = cast(Any, pt.grad(logp, u_value))
        return _Compiled(key, model, pytensor.function([u_value], [logp, grad, *_outputs(model)], mode=key.mode))

    return _CACHE.get(key, build)


def clear_cache() -> None:
    """Forget the compiled single-level objectives (rebuilt on next use)."""
    _CACHE.clear()
