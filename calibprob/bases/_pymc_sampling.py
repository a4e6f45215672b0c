"""The one way calibprob's PyMC models are sampled, and the one reading of their convergence.

The PyMC bases (:class:`~calibprob.bases.pymc_linear.PyMCLinearRegression`,
:class:`~calibprob.bases.pymc_hsgp.PyMCHSGPRegression`) and GP-Beta's NUTS all call
:func:`sample_posterior` (NUTS with one core per process — the comparison runner parallelises over
tasks — no progress bar and no PyMC convergence checks, which :func:`convergence_summary` does once,
the same way for every model; or ADVI) and judge the fit with :func:`convergence_problems`
(divergences after tuning; rank-normalised split r-hat above 1.01, Vehtari et al. 2021).

PyMC is imported inside the functions: it is heavy, and ``import calibprob`` stays light.

References
----------
Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. and Bürkner, P.-C. (2021). Rank-normalization,
folding, and localization: an improved R-hat for assessing convergence of MCMC. *Bayesian Analysis*
16(2), 667–718.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import xarray as xr

__all__ = ["RHAT_MAX", "sample_posterior", "convergence_summary", "convergence_problems"]

#: r-hat above this flags a fit as not converged (Vehtari et al. 2021).
RHAT_MAX = 1.01


def sample_posterior(
    *,
    inference: str,
    draws: int,
    tune: int,
    chains: int,
    seed: int | None,
    target_accept: float,
    n_iter: int | None = None,
    model: Any = None,
    nuts_sampler: str = "pymc",
    compile_kwargs: dict | None = None,
) -> xr.DataTree:
    """Posterior draws of the model in context (or ``model``): NUTS, or ADVI when ``inference="advi"``.

    Parameters
    ----------
    inference : {"nuts", "advi"}
    draws, tune, chains : int
        NUTS settings; ADVI draws ``draws * chains`` from the fitted approximation.
    seed : int or None
    target_accept : float
    n_iter : int, optional
        ADVI iterations (required for ``"advi"``).
    model : pymc.Model, optional
        Default: the model of the enclosing ``with`` block.
    nuts_sampler : str, default "pymc"
    compile_kwargs : dict, optional
        Passed to :func:`pymc.sample`.

    Returns
    -------
    xarray.DataTree
        PyMC's result (``posterior``, ``sample_stats`` for NUTS).
    """
    import pymc as pm

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*could not link to a BLAS.*")
        warnings.filterwarnings("ignore", message=".*NumPy C-API based implementation for BLAS.*")
        warnings.filterwarnings("ignore", message=".*chains.*")
        if inference == "nuts":
            kwargs = {"model": model} if model is not None else {}
            if compile_kwargs is not None:
                kwargs["compile_kwargs"] = compile_kwargs
            return pm.sample(
                draws=draws,
                tune=tune,
                chains=chains,
                cores=1,
                random_seed=seed,
                target_accept=target_accept,
                nuts_sampler=nuts_sampler,
                progressbar=False,
                quiet=True,
                compute_convergence_checks=False,
                **kwargs,
            )
        approx = pm.fit(n=n_iter, method="advi", random_seed=seed, progressbar=False, model=model)
        return approx.sample(draws * chains, random_seed=seed)


def convergence_summary(idata: xr.DataTree, *, var_names: Sequence[str] | None = None) -> tuple[float, float, float]:
    """Max r-hat, min bulk ESS over the parameters, and the number of divergent transitions.

    r-hat is NaN for a single chain; ``var_names`` restricts both to the identifiable parameters.
    """
    import arviz as az

    post = idata["posterior"].to_dataset()
    keep = [v for v in (var_names or ()) if v in post.data_vars]
    if keep:
        post = post[keep]
    rhat = float("nan")
    if post.sizes.get("chain", 1) > 1:
        r = az.rhat(post)
        rhat = float(max(float(r[v].max()) for v in r.data_vars))
    e = az.ess(post, method="bulk")
    ess = float(min(float(e[v].min()) for v in e.data_vars))
    divergences = float(cast(xr.DataArray, idata["sample_stats"]["diverging"]).values.sum())
    return rhat, ess, divergences


def convergence_problems(divergences: float, rhat: float, rhat_max: float = RHAT_MAX) -> list[str]:
    """What is wrong with a NUTS fit, one phrase each (empty when it converged cleanly)."""
    problems = []
    if divergences > 0:
        problems.append(f"{int(divergences)} divergent transition(s) after tuning")
    if np.isfinite(rhat) and rhat > rhat_max:
        problems.append(f"max r-hat {rhat:.3f} > {rhat_max}")
    return problems
