r"""Leave-one-out predictive distributions from one posterior (PSIS-LOO).

Every training point's leave-one-out (LOO) predictive distribution
:math:`p(\tilde y_i \mid x_i, Z_{-i})` is the posterior predictive at :math:`x_i`
reweighted by the importance ratios :math:`r_{s,i} \propto 1/p(y_i \mid \theta_s)`
(Gelfand et al. 1992), smoothed by Pareto-smoothed importance sampling
(Vehtari et al. 2017, 2024) as ArviZ computes them:

.. math::

    \tilde w_{s,i} = \frac{\operatorname{PSIS}(r_{\cdot,i})_s}{\sum_t \operatorname{PSIS}(r_{\cdot,i})_t},
    \qquad
    p(\tilde y_i \le y \mid Z_{-i}) \approx \sum_s \tilde w_{s,i}\, 1[\tilde y_{s,i} \le y],

with :math:`\tilde y_{s,i}` the posterior-predictive draws at :math:`x_i` (observation
noise included). :func:`from_loo` turns them into the predictive Dataset of
:mod:`calibprob.predictive` (weighted quantiles, mean and standard deviation by
:func:`calibprob.from_draws` with ``weights=``), so that any distribution post-processor
can be fitted on ``(from_loo(idata), y_train)`` without a held-out split.

The approximation is only as good as the importance weights: the Pareto shape
:math:`\hat k_i` of each point's ratios is stored as ``pareto_k`` and points above
ArviZ's threshold :math:`\min(1 - 1/\log_{10} S,\ 0.7)` are warned about by name.

References
----------
Gelfand, A. E., Dey, D. K. and Chang, H. (1992). Model determination using predictive
distributions with implementation via sampling-based methods. Bayesian Statistics 4.

Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model evaluation using
leave-one-out cross-validation and WAIC. Statistics and Computing 27(5).

Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto smoothed
importance sampling. Journal of Machine Learning Research 25(72).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.dims import MCMC_DIMS
from calibprob._core.trees import check_tree
from calibprob.predictive._common import CalibprobWarning, _levels_or_default
from calibprob.predictive._draws import _pick_variable, _tree_groups, from_draws

__all__ = ["from_loo", "LOOWeights", "loo_weights"]

_SAMPLE_DIMS = MCMC_DIMS  # the core's table of reserved dim names


@dataclass
class LOOWeights:
    r"""PSIS-LOO weights of a tree's training points, as ``loo_weights`` returns them.

    Attributes
    ----------
    log_weights : xarray.DataArray
        Normalised log-weights :math:`\log \tilde w_{s,i}`, dims ``(chain, draw, obs_dim)``
        (``logsumexp`` over the draws is 0 for every point).
    pareto_k : xarray.DataArray
        Pareto shape :math:`\hat k_i` per point, dim ``obs_dim``.
    good_k : float
        ArviZ's threshold :math:`\min(1 - 1/\log_{10} S,\ 0.7)`.
    var_name : str
        The observed variable.
    obs_dim : str
        Its observation dimension.
    """

    log_weights: xr.DataArray
    pareto_k: xr.DataArray
    good_k: float
    var_name: str
    obs_dim: str

    def matrix(self) -> np.ndarray:
        """Linear weights as an ``(S, n)`` array, draws flattened in (chain, draw) order."""
        lw = self.log_weights.transpose(*_SAMPLE_DIMS, self.obs_dim).values
        return np.exp(lw.reshape(-1, lw.shape[-1]))


def _group(groups: dict, name: str, fix: str) -> xr.Dataset:
    if name not in groups or not groups[name].data_vars:
        raise ValueError(f"the tree has no {name!r} group (it has {list(groups)}); {fix}")
    return groups[name]


def _var_and_obs_dim(ll: xr.Dataset, var_name: str | None) -> tuple[str, str]:
    da = _pick_variable(ll, var_name, "group 'log_likelihood'")
    missing = [d for d in _SAMPLE_DIMS if d not in da.dims]
    others = [d for d in da.dims if d not in _SAMPLE_DIMS]
    if missing or len(others) != 1:
        raise ValueError(
            f"log_likelihood[{da.name!r}] must have dims (chain, draw, <one observation dim>); got {da.dims}. "
            "Stack extra dims into one (da.stack(obs=...)) before computing LOO."
        )
    return str(da.name), str(others[0])


def good_k_threshold(n_samples: int) -> float:
    r"""ArviZ's Pareto-:math:`\hat k` threshold :math:`\min(1 - 1/\log_{10} S,\ 0.7)`.

    Parameters
    ----------
    n_samples : int
        Number of posterior draws :math:`S`.

    Returns
    -------
    float

    Examples
    --------
    >>> round(good_k_threshold(1000), 4), good_k_threshold(4000)
    (0.6667, 0.7)
    """
    return float(min(1.0 - 1.0 / np.log10(n_samples), 0.7))


def _relative_efficiency(groups: dict, n_samples: int) -> float:
    """ArviZ's default r_eff of ``arviz_stats.loo`` (1 for one chain or no posterior; else mean ESS / S)."""
    post = groups.get("posterior")
    if post is None or post.sizes.get(MCMC_DIMS[0], 1) == 1 or not post.data_vars:
        return 1.0
    ess = post.azstats.ess(method="mean")
    return float(np.hstack([ess[v].values.ravel() for v in ess.data_vars]).mean() / n_samples)


def loo_weights(tree: Any, *, var_name: str | None = None) -> LOOWeights:
    r"""PSIS-LOO weights of every training point of a PyMC / ArviZ tree.

    The weights of ``arviz_stats.loo(tree, pointwise=True)``, without its ELPD: ArviZ's
    ``psislw`` on the log-likelihood with ``arviz_stats.loo``'s default relative
    efficiency :math:`r_{\mathrm{eff}}` (mean ESS / S over the posterior's variables; 1 for
    one chain or a tree without a ``posterior`` group).

    Parameters
    ----------
    tree : xarray.DataTree
        With a ``log_likelihood`` group (``pm.compute_log_likelihood(idata)``).
    var_name : str, optional
        The observed variable; needed only when the group holds several.

    Returns
    -------
    LOOWeights

    Raises
    ------
    ValueError
        No ``log_likelihood`` group (naming ``pm.compute_log_likelihood(idata)``), several
        variables and no ``var_name``, or dims other than (chain, draw, one observation dim).

    References
    ----------
    Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto smoothed
    importance sampling. Journal of Machine Learning Research 25(72).
    """
    import arviz_stats  # noqa: F401  # registers the .azstats accessor (heavy: loaded on first use)

    groups = _tree_groups(tree)
    if groups is None:
        raise ValueError(
            f"tree must be an xarray.DataTree (what pm.sample returns); got {type(tree).__name__}. "
            "Pass the idata of the fitted model."
        )
    ll = _group(
        groups,
        "log_likelihood",
        (
            "compute it with pm.compute_log_likelihood(idata) first "
            "(bambi: model.compute_log_likelihood(idata), or fit with idata_kwargs={'log_likelihood': True})."
        ),
    )
    var_name, obs_dim = _var_and_obs_dim(ll, var_name)
    # r_eff reads the posterior: its draws must be the log-likelihood's
    check_tree(tree, ("posterior", "log_likelihood"), var_name=var_name, where="tree")
    da = ll[var_name]
    n_samples = int(np.prod([da.sizes[d] for d in _SAMPLE_DIMS]))
    if not np.isfinite(da.values).all():
        raise ValueError(
            f"log_likelihood[{var_name!r}] holds {int((~np.isfinite(da.values)).sum())} non-finite values; "
            "LOO weights need a finite log-likelihood at every draw and point."
        )
    with warnings.catch_warnings():
        # arviz warns about high k itself; from_loo warns once, naming the points
        warnings.simplefilter("ignore")
        lw, k = da.azstats.psislw(dim=list(_SAMPLE_DIMS), r_eff=_relative_efficiency(groups, n_samples))
    return LOOWeights(
        log_weights=lw.transpose(*_SAMPLE_DIMS, obs_dim),
        pareto_k=k,
        good_k=good_k_threshold(n_samples),
        var_name=var_name,
        obs_dim=obs_dim,
    )


def _warn_high_k(weights: LOOWeights) -> None:
    k = weights.pareto_k.values
    bad = np.flatnonzero(k > weights.good_k)
    if bad.size:
        labels = weights.pareto_k[weights.obs_dim].values[bad] if weights.obs_dim in weights.pareto_k.coords else bad
        shown = ", ".join(f"{lab} (k={k[j]:.2f})" for lab, j in zip(labels[:10], bad[:10], strict=True))
        more = f" and {bad.size - 10} more" if bad.size > 10 else ""
        warnings.warn(
            f"{bad.size} of {k.size} points have Pareto k above the good-k threshold {weights.good_k:.3g} "
            f"(min(1 - 1/log10 S, 0.7)): {shown}{more}. Their LOO predictive distributions are unreliable; "
            "refit without them (reloo), use moment matching (arviz_stats.loo_moment_match), or draw more samples.",
            CalibprobWarning,
            stacklevel=3,
        )


def from_loo(tree: Any, *, var_name: str | None = None, levels: ArrayLike | None = None) -> xr.Dataset:
    r"""Each training point's PSIS-LOO predictive distribution as the predictive Dataset.

    .. math::

        \hat F_{-i}(y) = \sum_s \tilde w_{s,i}\, 1[\tilde y_{s,i} \le y]

    with :math:`\tilde w_{s,i}` the Pareto-smoothed LOO weights of point :math:`i`
    (``loo_weights``) and :math:`\tilde y_{s,i}` its posterior-predictive draws,
    summarised by :func:`calibprob.from_draws` with ``weights=`` (weighted quantiles,
    mean and standard deviation). Fit any distribution post-processor on
    ``(from_loo(idata), y_train)`` and apply it to the posterior predictive at new
    points: calibration without a held-out split.

    Parameters
    ----------
    tree : xarray.DataTree
        A fitted PyMC model's idata with ``log_likelihood``
        (``pm.compute_log_likelihood(idata)``) and ``posterior_predictive``
        (``pm.sample_posterior_predictive(idata, extend_inferencedata=True)``) at the
        training points, with the same draws and observations.
    var_name : str, optional
        The observed variable; needed only when the groups hold several.
    levels : array_like, optional
        Quantile levels; default :data:`calibprob.predictive.DEFAULT_LEVELS`.

    Returns
    -------
    xarray.Dataset
        The contract's ``quantile(obs, level)``, ``mean``, ``std``, plus ``pareto_k(obs)``;
        ``attrs["good_k"]``, ``attrs["method"] == "loo"``.

    Raises
    ------
    ValueError
        No ``log_likelihood`` or ``posterior_predictive`` group (each naming the PyMC call
        that adds it), draws or observations that differ between the two groups.

    Warns
    -----
    calibprob.CalibprobWarning
        Naming the points whose :math:`\hat k` exceeds :math:`\min(1 - 1/\log_{10} S,\ 0.7)`.

    References
    ----------
    Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model evaluation
    using leave-one-out cross-validation and WAIC. Statistics and Computing 27(5).

    Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto smoothed
    importance sampling. Journal of Machine Learning Research 25(72).

    Examples
    --------
    >>> import numpy as np, xarray as xr, calibprob
    >>> rng = np.random.default_rng(0)
    >>> mu = rng.normal(0.0, 0.1, size=(1, 2000))            # posterior draws of a mean
    >>> y = np.array([0.3, -0.2, 0.1])
    >>> ll = -0.5 * (y - mu[..., None]) ** 2 - 0.5 * np.log(2 * np.pi)
    >>> pp = mu[..., None] + rng.normal(size=(1, 2000, 3))
    >>> dims = ("chain", "draw", "obs")
    >>> tree = xr.DataTree.from_dict({
    ...     "posterior": xr.Dataset({"mu": (("chain", "draw"), mu)}),
    ...     "log_likelihood": xr.Dataset({"y": (dims, ll)}),
    ...     "posterior_predictive": xr.Dataset({"y": (dims, pp)})})
    >>> pred = calibprob.from_loo(tree)
    >>> pred.sizes["obs"], sorted(v for v in pred.data_vars)
    (3, ['mean', 'pareto_k', 'quantile', 'std'])
    """
    levels = _levels_or_default(levels)
    weights = loo_weights(tree, var_name=var_name)
    groups = check_tree(
        tree, ("posterior", "log_likelihood", "posterior_predictive"), var_name=weights.var_name, where="tree"
    )
    pp = _group(
        groups,
        "posterior_predictive",
        "draw it with pm.sample_posterior_predictive(idata, extend_inferencedata=True) "
        "(bambi: model.predict(idata, kind='response', inplace=True)).",
    )
    draws = _pick_variable(pp, weights.var_name if weights.var_name in pp else var_name, "group 'posterior_predictive'")
    lw = weights.log_weights
    if dict(draws.sizes) != dict(lw.sizes):
        raise ValueError(
            f"posterior_predictive[{draws.name!r}] has sizes {dict(draws.sizes)} but log_likelihood"
            f"[{weights.var_name!r}] has {dict(lw.sizes)}: the LOO weights need the same draws and the same "
            "training observations. Draw the posterior predictive at the training data from this posterior."
        )
    o = weights.obs_dim
    if o in draws.coords and o in lw.coords and not np.array_equal(draws[o].values, lw[o].values):
        raise ValueError(
            f"the observations of posterior_predictive[{draws.name!r}] and log_likelihood[{weights.var_name!r}] "
            f"differ (coordinate {o!r}); both must be the training points, in the same order."
        )
    draws = draws.transpose(*_SAMPLE_DIMS, o)
    pred = from_draws(
        draws, levels, sample_dims=_SAMPLE_DIMS, obs_dim=weights.obs_dim, method="loo", weights=weights.matrix()
    )
    pred["pareto_k"] = ("obs", np.asarray(weights.pareto_k.values, float))
    pred["pareto_k"].attrs["long_name"] = "Pareto shape of the point's PSIS-LOO weights (Vehtari et al. 2024)"
    pred.attrs["good_k"] = weights.good_k
    _warn_high_k(weights)
    return pred
