r"""How a GP-Beta posterior is approximated: ADVI, SVI, MAP (NumPy objective) and NUTS (the PyMC model).

Each ``fit_*`` takes the estimator (its hyperparameters) and a :class:`Problem`
(the standardised data of one fit) and returns flat posterior draws by name.
Full-batch ADVI, SVI and MAP evaluate :class:`._objective.LogPosterior`;
minibatch ADVI / SVI and NUTS use the PyMC model of :mod:`._graph`, built (or
taken from the per-process cache) only then.
"""

from __future__ import annotations

import importlib.util
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import minimize

from calibprob._core.estimator import ConvergenceWarning
from calibprob.bases._pymc_sampling import convergence_problems, convergence_summary, sample_posterior
from calibprob.calibrators.gp_beta._graph import _Graph, _graph, _pm, _quiet_compile
from calibprob.calibrators.gp_beta._objective import Layout, LogPosterior
from calibprob.calibrators.gp_beta._svi import advi_fit, svi_fit

#: Posterior variables whose r-hat is meaningful (the coregionalisation factor W is sign-symmetric).
_IDENTIFIABLE = ("theta", "gamma", "delta", "R", "V")


@dataclass
class Problem:
    """The data of one fit, in the model's terms, and the model configuration."""

    layout: Layout
    batch: int | None
    mu: np.ndarray
    sigma: np.ndarray
    u: np.ndarray
    log_jac: np.ndarray
    loc: float
    scale: float
    Z0: np.ndarray
    weights: np.ndarray | None = None  # importance weights of the data terms (NumPy objective only)
    _graph: _Graph | None = field(default=None, repr=False)

    @property
    def X(self) -> np.ndarray:
        return np.c_[(self.mu - self.loc) / self.scale, self.sigma / self.scale]

    def objective(self) -> LogPosterior:
        """The full-batch NumPy log posterior."""
        return LogPosterior(self.layout, self.X, self.u, self.log_jac, self.Z0, self.weights)

    def graph(self) -> _Graph:
        """The PyMC model of this configuration (per-process cache) holding this fit's data."""
        if self.weights is not None:  # the estimator refuses this combination first; a guard for direct use
            raise ValueError("a weighted GP-Beta fit has no PyMC model: use the NumPy objective (full batch).")
        if self._graph is None:
            lay = self.layout
            self._graph = _graph(lay.n_inducing, lay.rank, lay.learn_inducing, self.batch)
            self._graph.set_data(self.mu, self.sigma, self.u, self.log_jac, self.loc, self.scale, self.Z0)
        return self._graph


def fit_advi(est: Any, prob: Problem, seed: int) -> Any:
    """Mean-field or full-rank ADVI; flat draws by name and PyMC's loss per step."""
    full_rank = est.inference == "fullrank_advi"
    rng = np.random.default_rng(seed)
    lay = prob.layout
    start = lay.ravel(lay.start_point(prob.Z0, rng))
    if prob.batch is None:
        res = advi_fit(
            prob.objective(),
            start,
            full_rank=full_rank,
            n_iter=est.n_iter,
            learning_rate=est._learning_rate(),
            n_mc=est.obj_n_mc,
            seed=seed,
            # PyMC starts L's softplus diagonal at softplus(1) = 1.31; draws that wide give Beta
            # maps with exp(+-5) slopes and a loss of ~1e9: start at sd 0.1 instead
            init_sd=0.1 if full_rank else None,
        )
        mu_q, scale, loss = res.mu, res.scale, res.loss
    else:
        mu_q, scale, loss = _advi_pymc(est, prob.graph(), start, seed, full_rank)
    if not np.all(np.isfinite(loss[-50:])):
        raise FloatingPointError("GP-Beta ADVI diverged (non-finite loss). Lower learning_rate or use inference='map'.")
    eps = rng.standard_normal((est.draws, mu_q.size))
    if not full_rank:
        flat = mu_q + eps * np.logaddexp(0.0, scale)  # softplus, as PyMC
    else:
        d = mu_q.size
        L = np.zeros((d, d))
        L[np.tril_indices(d)] = scale
        L[np.diag_indices(d)] = np.logaddexp(0.0, np.diag(L))  # PyMC: softplus on the diagonal
        flat = mu_q + eps @ L.T
    est.advi_mean_ = lay.unravel(mu_q)
    return lay.unravel(flat), loss


def _advi_pymc(est: Any, g: _Graph, start: np.ndarray, seed: int, full_rank: bool) -> Any:
    """PyMC's compiled ADVI step (minibatches through ``pm.Minibatch``): ``(mu, rho or L_tril, loss)``."""
    pm = _pm()
    inference, step, lr, rngs, state = g.advi_step(est.inference, est.obj_n_mc, est._mode())
    for var, value in state:  # fresh optimiser state and variational parameters
        var.set_value(np.copy(value))
    group = inference.approx.groups[0]
    group.params_dict["mu"].set_value(start.copy())
    if full_rank:
        d = start.size
        group.params_dict["L_tril"].set_value(np.log(np.expm1(0.1)) * np.eye(d)[np.tril_indices(d)])
    pm.pytensorf.reseed_rngs(rngs, seed)
    lr.set_value(np.float64(est._learning_rate()))
    loss = np.empty(est.n_iter)
    for i in range(est.n_iter):
        loss[i] = step()
    scale = group.params_dict["L_tril" if full_rank else "rho"].get_value()
    return group.params_dict["mu"].get_value(), np.asarray(scale), loss


def fit_svi(est: Any, prob: Problem, seed: int) -> Any:
    """The sparse variational GP: Gaussian q over V, point hyperparameters; draws by name and loss."""
    rng = np.random.default_rng(seed)
    if prob.batch is None:
        fn = prob.objective()
    else:
        g = prob.graph()
        fn = g.compiled_logp_dlogp(est._mode())
        # pm.Minibatch draws each call's batch from shared RNGs in the compiled graph:
        # seed them so that a minibatched fit is as reproducible as a full-batch one
        g.reseed_minibatch(int(rng.integers(2**31 - 1)))
    lay = prob.layout
    x0 = lay.ravel(lay.start_point(prob.Z0, rng))
    variational = lay.ravel({k: np.full(s, k == "V", float) for k, s in lay.shapes.items()}).astype(bool)
    fit = svi_fit(
        fn, x0, variational, n_iter=est.n_iter, learning_rate=est._learning_rate(), n_mc=est.obj_n_mc, rng=rng
    )
    if not np.all(np.isfinite(fit.loss[-50:])):
        raise FloatingPointError("GP-Beta SVI diverged (non-finite loss). Lower learning_rate or use inference='map'.")
    flat = fit.sample(est.draws, rng)
    est.svi_mean_ = lay.unravel(fit.mean)
    return lay.unravel(flat), fit.loss


def fit_map(est: Any, prob: Problem, seed: int) -> Any:
    """L-BFGS-B on the log posterior (NumPy value and gradient); the point by name and a summary."""
    fn = prob.objective()
    lay = prob.layout
    x0 = lay.ravel(lay.start_point(prob.Z0, np.random.default_rng(seed)))

    def objective(x: Any) -> Any:
        lp, grad = fn(x)
        if not np.isfinite(lp):
            return 1e300, np.zeros_like(x)
        return -float(lp), -np.asarray(grad, float)

    res = minimize(objective, x0, jac=True, method="L-BFGS-B", options={"maxiter": 5000})
    info = {
        "success": int(res.success),
        "message": str(res.message),
        "n_iter": int(res.nit),
        "log_posterior": float(-res.fun),
    }
    return lay.unravel(res.x), info


def fit_nuts(est: Any, g: _Graph, seed: int) -> Any:
    """NUTS on the PyMC model (nutpie when installed), with PyMC's pointwise log-likelihood."""
    pm = _pm()
    sampler = "nutpie" if importlib.util.find_spec("nutpie") is not None else "pymc"
    compile_kwargs = {"mode": est._mode()} if sampler == "pymc" else None
    with _quiet_compile():
        idata = sample_posterior(
            inference="nuts",
            draws=est.draws,
            tune=est.tune,
            chains=est.chains,
            seed=seed,
            target_accept=est.target_accept,
            model=g.model,
            nuts_sampler=sampler,
            compile_kwargs=compile_kwargs,
        )
        pm.compute_log_likelihood(
            idata,
            model=g.model,
            progressbar=False,
            extend_inferencedata=True,
            compile_kwargs={"mode": est._mode()},
        )
    est.nuts_sampler_ = sampler
    return idata


def convergence(idata: Any) -> dict:
    """PyMC's convergence checks on a NUTS fit: warn on divergences and r-hat > 1.01; return them."""
    # r-hat on the identifiable quantities only: W (and with it the whitened inducing values)
    # is sign-symmetric, so its chains may sit in mirror modes of one posterior
    max_rhat, min_ess, divergences = convergence_summary(idata, var_names=_IDENTIFIABLE)
    n_div = int(divergences)
    problems = convergence_problems(divergences, max_rhat)
    if problems:
        warnings.warn(
            "GP-Beta NUTS did not converge cleanly: " + "; ".join(problems) + ". The posterior may be "
            "biased: raise tune/draws or target_accept (now in idata_.sample_stats.attrs), or use "
            "inference='svi'/'map'. Check az.summary(cal.idata_).",
            ConvergenceWarning,
            stacklevel=4,
        )
    return {"n_divergences": n_div, "max_rhat": max_rhat, "min_ess_bulk": min_ess, "converged": int(not problems)}
