r"""The GP-Beta PyMC model (the declared model), its PyTensor pieces and the per-process graph cache.

:func:`build_model` writes the model of the package docstring with PyMC on
placeholder data (``pm.Data``), so one graph serves every data set of a
configuration ``(n_inducing, rank, learn_inducing, batch_size)``. It is what
NUTS samples, what minibatch ADVI / SVI differentiate and what
``pm.compute_log_likelihood`` scores; full-batch MAP, ADVI and SVI use the
identical NumPy log posterior of :mod:`._objective` instead, so that a process
that never samples never builds this graph.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calibprob._core.pytensor_setup import GraphCache
from calibprob.calibrators.gp_beta._link import _JITTER, _LOG_SQRT_2PI, OUTPUTS, PRIORS
from calibprob.calibrators.gp_beta._objective import Layout

#: PyTensor mode of the compiled ADVI step / log posterior when ``compile_mode=None``.
#: Measured for the 16-inducing-point ADVI step (this 2-core box): the C backend
#: ("CVM") compiles in ~47 s cold / ~2.3 s warm and runs a step in 0.17 ms (n = 32);
#: Numba (PyTensor's default) takes ~112 s cold / ~4.5 s warm and 0.24 ms per step.
DEFAULT_COMPILE_MODE = "CVM"


def _pm() -> Any:
    import pymc as pm

    return pm


def _log_ndtr_pt(z: Any) -> Any:
    """log Phi(z), stable in both tails (the erfcx form PyMC uses for the normal log-CDF)."""
    import pytensor.tensor as pt

    return pt.switch(
        pt.lt(z, -1.0),
        pt.log(pt.erfcx(-z / np.sqrt(2.0)) / 2.0) - pt.sqr(z) / 2.0,
        pt.log1p(-pt.erfc(z / np.sqrt(2.0)) / 2.0),
    )


def beta_link_logp(value: Any, log_jac: Any, log_a: Any, log_b: Any, c: Any) -> Any:
    r"""Elementwise log density of eq. 6–7 as a PyTensor graph (the ``pm.CustomDist`` logp).

    ``value`` is the base's probit PIT :math:`u` of the observation and
    ``log_jac`` its log Jacobian; same formula as :func:`beta_link_logpdf_z`.
    """
    import pytensor.tensor as pt

    lq = _log_ndtr_pt(value)
    l1q = _log_ndtr_pt(-value)
    t = pt.exp(log_a) * lq - pt.exp(log_b) * l1q + c
    log_r = -pt.softplus(-t) - pt.softplus(t) + pt.logaddexp(log_a + l1q, log_b + lq) - lq - l1q
    return -0.5 * value * value - _LOG_SQRT_2PI + log_jac + log_r


def _gaussian_embedding_rbf_class() -> Any:
    pm = _pm()
    import pytensor.tensor as pt

    class _GaussianEmbeddingRBF(pm.gp.cov.Covariance):  # type: ignore[name-defined]  # PyMC imported on use
        r"""Gaussian-embedding RBF kernel (Song et al. 2019, eq. 9) as a ``pm.gp.cov.Covariance``.

        Inputs are rows ``(mu, s)`` with ``s`` a standard deviation; see
        :func:`gaussian_embedding_kernel` for the formula.

        Parameters
        ----------
        theta : scalar tensor
            RBF width of the embedding kernel.
        active_dims : list of int, optional
            Two columns holding ``(mu, s)``; default ``[0, 1]``.
        """

        def __init__(self, theta: Any, active_dims: Any = None) -> None:
            super().__init__(2, active_dims)
            self.theta = pt.as_tensor_variable(theta)

        def full(self, X: Any, Xs: Any = None) -> Any:
            X, Xs = self._slice(X, Xs)
            if Xs is None:
                Xs = X
            d = pt.square(X[:, 1])[:, None] + pt.square(Xs[:, 1])[None, :] + pt.square(self.theta)
            r2 = pt.square(X[:, 0][:, None] - Xs[:, 0][None, :])
            return self.theta / pt.sqrt(d) * pt.exp(-r2 / (2.0 * d))

        def diag(self, X: Any) -> Any:
            X, _ = self._slice(X, None)
            return self.theta / pt.sqrt(2.0 * pt.square(X[:, 1]) + pt.square(self.theta))

    _GaussianEmbeddingRBF.__name__ = "GaussianEmbeddingRBF"
    _GaussianEmbeddingRBF.__qualname__ = "GaussianEmbeddingRBF"
    return _GaussianEmbeddingRBF


_KERNEL_CLASS = None


def kernel_class() -> Any:
    """The ``GaussianEmbeddingRBF`` covariance class (built on first use: it needs PyMC)."""
    global _KERNEL_CLASS
    if _KERNEL_CLASS is None:
        _KERNEL_CLASS = _gaussian_embedding_rbf_class()
    return _KERNEL_CLASS


def build_model(n_inducing: int, rank: int, learn_inducing: bool, batch_size: int | None) -> Any:
    """The GP-Beta PyMC model on placeholder data (replaced by ``pm.set_data`` before use)."""
    pm = _pm()
    import pytensor.tensor as pt
    from pytensor.tensor.linalg import cholesky, solve_triangular

    kernel_cls = kernel_class()
    m = n_inducing
    n0 = max(2 * m, 8)
    coords = {
        "output": list(OUTPUTS),
        "inducing": np.arange(m),
        "input": ["mu", "sigma"],
    }
    if rank > 0:
        coords["rank"] = np.arange(rank)
    if batch_size is None:
        coords["obs"] = np.arange(n0)
    obs_dims = "obs" if batch_size is None else None
    with pm.Model(coords=coords) as model:
        # covariates of the latent GP: the base's predictive mean and standard deviation
        mu_d = pm.Data("base_mu", np.zeros(n0), dims=obs_dims)
        sigma_d = pm.Data("base_sigma", np.ones(n0), dims=obs_dims)
        # the observations enter through the base's probit PIT u = Phi^-1(F(y)) and the log
        # Jacobian log f(y) - log phi(u): any base law (Gaussian, quantiles, draws) is exact
        u_d = pm.Data("base_zscore", np.zeros(n0), dims=obs_dims)
        jac_d = pm.Data("base_log_jacobian", np.zeros(n0), dims=obs_dims)
        loc_d = pm.Data("loc", 0.0)
        scale_d = pm.Data("scale", 1.0)
        z0_d = pm.Data("inducing_init", np.zeros((m, 2)), dims=("inducing", "input"))

        if batch_size is None:
            mu_b, sigma_b, u_b, jac_b = mu_d, sigma_d, u_d, jac_d
            total = None
        else:
            mu_b, sigma_b, u_b, jac_b = pm.Minibatch(mu_d, sigma_d, u_d, jac_d, batch_size=batch_size)
            total = [mu_d.shape[0]]

        log_theta = pm.Normal("log_theta", *PRIORS["log_theta"])
        if rank > 0:
            W = pm.Normal("W", *PRIORS["W"], dims=("output", "rank"))
            log_kappa = pm.Normal("log_kappa", *PRIORS["log_kappa"], dims="output")
        log_gamma = pm.Normal("log_gamma", *PRIORS["log_gamma"], dims="output")
        delta = pm.Normal("delta", *PRIORS["delta"], dims="output")
        V = pm.Normal("V", *PRIORS["V"], dims=("inducing", "output"))
        if learn_inducing:
            Z = pm.Normal("Z", z0_d, PRIORS["Z"][1], dims=("inducing", "input"))
        else:
            Z = z0_d

        cov = kernel_cls(pt.exp(log_theta))
        Lk = cholesky(cov(Z) + _JITTER * pt.eye(m))
        if rank > 0:
            # ICM coregionalisation B = W W^T + diag(kappa), used as a correlation matrix
            B = pm.gp.cov.Coregion(1, W=W, kappa=pt.exp(log_kappa)).B
            d = pt.sqrt(pt.diag(B))
            VL = V @ cholesky(B / d[:, None] / d[None, :]).T
        else:
            VL = V
        # whitened inducing values: u = L_K V L_R^T; f(X) = K_XZ K_ZZ^{-1} u = K_XZ (L_K^{-T} V L_R^T)
        U = solve_triangular(Lk.T, VL, lower=False)
        X = pt.stack([(mu_b - loc_d) / scale_d, sigma_b / scale_d], axis=1)
        F = cov(X, Z) @ U
        w = F * pt.exp(-log_gamma)[None, :] + delta[None, :]
        pm.CustomDist(
            "y",
            jac_b,
            w[:, 0],
            w[:, 1],
            w[:, 2],
            logp=beta_link_logp,
            signature="(),(),(),()->()",
            observed=u_b,
            total_size=total,
            dims=obs_dims,
        )
    return model


@dataclass
class _Graph:
    """One model configuration with its compiled functions (reused across fits)."""

    n_inducing: int
    rank: int
    learn_inducing: bool
    batch_size: int | None
    model: Any = None  # pymc.Model (PyMC is imported on first use)
    advi: dict = field(default_factory=dict)
    logp_dlogp: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.model = build_model(self.n_inducing, self.rank, self.learn_inducing, self.batch_size)
        self.layout = Layout(self.n_inducing, self.rank, self.learn_inducing)
        self.names = self.layout.names
        self.shapes = self.layout.shapes
        if [v.name for v in self.model.free_RVs] != self.names:  # the flat order both sides share
            raise RuntimeError(f"GP-Beta model parameters {self.model.free_RVs} differ from the layout {self.names}.")

    def set_data(self, mu: Any, sigma: Any, u: Any, log_jac: Any, loc: Any, scale: Any, Z0: Any) -> None:
        pm = _pm()
        coords = {"obs": np.arange(mu.size)} if self.batch_size is None else None
        pm.set_data(
            {
                "base_mu": mu,
                "base_sigma": sigma,
                "base_zscore": u,
                "base_log_jacobian": log_jac,
                "loc": float(loc),
                "scale": float(scale),
                "inducing_init": Z0,
            },
            model=self.model,
            coords=coords,
        )

    # -- flat vectors <-> named parameters (value vars are the RVs: no transforms)
    def advi_step(self, method: str, obj_n_mc: int, mode: Any) -> Any:
        """Compiled ADVI step (cached per method, MC sample count and compile mode)."""
        key = (method, obj_n_mc, str(mode))
        if key not in self.advi:
            pm = _pm()
            import pytensor

            cls = {"advi": pm.ADVI, "fullrank_advi": pm.FullRankADVI}[method]
            inference = cls(model=self.model, random_seed=0)
            lr = pytensor.shared(np.float64(0.01), name="gpbeta_learning_rate")
            with _quiet_compile():
                step = inference.objective.step_function(
                    score=True,
                    obj_n_mc=obj_n_mc,
                    obj_optimizer=pm.adam(learning_rate=lr),
                    compile_kwargs={"mode": mode},
                )
            data = {v.name for v in self.model.data_vars}
            shared = [v for v in step.get_shared() if v.name not in data]
            rngs = [v for v in shared if isinstance(v.get_value(borrow=True), np.random.Generator)]
            state = [(v, np.copy(v.get_value())) for v in shared if v not in rngs]
            self.advi[key] = (inference, step, lr, rngs, state)
        return self.advi[key]

    def reseed_minibatch(self, seed: int) -> None:
        """Seed the shared RNGs of :func:`pymc.Minibatch` (they pick each evaluation's batch)."""
        from pymc.pytensorf import find_rng_nodes, reseed_rngs

        reseed_rngs(find_rng_nodes([self.model.logp()]), seed)

    def compiled_logp_dlogp(self, mode: Any) -> Any:
        if str(mode) not in self.logp_dlogp:
            with _quiet_compile():
                fn = self.model.logp_dlogp_function(ravel_inputs=True, mode=mode)
            fn.set_extra_values({})
            self.logp_dlogp[str(mode)] = fn
        return self.logp_dlogp[str(mode)]


_GRAPHS = GraphCache("calibprob.calibrators.gp_beta")


def _graph(n_inducing: int, rank: int, learn_inducing: bool, batch_size: int | None) -> _Graph:
    key = (n_inducing, rank, bool(learn_inducing), batch_size)
    return _GRAPHS.get(key, lambda: _Graph(*key))


def clear_graph_cache() -> None:
    """Forget every cached GP-Beta model and compiled function (frees memory)."""
    _GRAPHS.clear()


@contextlib.contextmanager
def _quiet_compile() -> Iterator[Any]:
    # The C backend warns once per compile that it found no BLAS to link; it then
    # uses NumPy's C-API dot, which is what these small matrices need anyway.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*could not link to a BLAS.*")
        warnings.filterwarnings("ignore", message=".*NumPy C-API based implementation for BLAS.*")
        yield
