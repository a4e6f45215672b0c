"""The ArviZ bridge: a prediction as an ArviZ DataTree (:func:`to_datatree`), held-out ELPD for ``az.compare``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike
from scipy import special

from calibprob._core.dims import CHAIN_DIM, DRAW_DIM, MCMC_DIMS, check_obs_dim, sample_dims_of
from calibprob._core.validation import check_int, check_targets
from calibprob.predictive._draws import _pick_variable
from calibprob.predictive._validate import validate


def to_datatree(
    pred: xr.Dataset,
    y: ArrayLike | None = None,
    *,
    n_draws: int = 1000,
    n_chains: int = 1,
    random_state: Any = None,
    obs_dim: str | None = None,
    var_name: str = "y",
) -> xr.DataTree:
    r"""The prediction as an ArviZ 1 DataTree: predictive draws, observations, log density.

    Every group has ArviZ's layout, so ArviZ reads it without glue: its PPC and
    PIT plots (``az.plot_ppc_dist``, ``az.plot_ppc_pit``), the PIT / ECDF
    computations on ``posterior_predictive`` against ``observed_data``, and
    ``az.compare`` through :func:`heldout_elpd`.

    Parameters
    ----------
    pred : xarray.Dataset
        A predictive distribution (the contract of :mod:`calibprob.predictive`).
    y : array_like or xarray.DataArray, optional
        Observed values, one per observation (NumPy, or a 1-D DataArray with any
        dim name, aligned by position). Without it only ``posterior_predictive``
        is written.
    n_draws : int, default 1000
        Draws per chain.
    n_chains : int, default 1
        Chains. The draws are independent, so chains add nothing statistically;
        more than one only matters to tools that expect several.
    random_state : int or numpy.random.Generator, optional
        Seeds the draws (``pred.calib.sample``: exact Gaussian draws for the
        normal family, else the inverse transform :math:`Q_i(\Phi(U))`,
        :math:`U \sim N(0, 1)`, of the contract's quantile function).
    obs_dim : str, optional
        Name of the observation dimension. Default: ``y``'s dim when ``y`` is a
        DataArray (PyMC's ``obs_id``), else ``pred.attrs["obs_dim"]`` (set by
        :func:`from_draws`), else ``"obs"``.
    var_name : str, default "y"
        Name of the variable in every group.

    Returns
    -------
    xarray.DataTree
        Groups

        * ``posterior_predictive``: ``var_name(chain, draw, obs_dim)``;
        * ``observed_data``: ``var_name(obs_dim)`` (only with ``y``);
        * ``log_likelihood``: ``var_name(chain, draw, obs_dim)`` = :math:`\log
          f_i(y_i)` from ``pred.calib.logpdf(y)`` (only with ``y``). It is the
          held-out log predictive density, the same for every draw: ``pred`` is
          already the posterior predictive, there is no per-draw likelihood to
          store. Its sum over ``obs_dim`` (any draw) equals ``-n *
          evaluate(pred, y)["nll"]``. The sample dims keep ArviZ's layout of this
          group (and PyMC's, for a model scored on test data).

        The ``obs_dim`` coordinate is ``y``'s coordinate when ``y`` is a
        DataArray that has one (so the tree lines up with the user's own
        ``idata``), else ``pred["obs"]``.

    Notes
    -----
    ``az.loo`` and ``az.loo_pit`` do not apply: PSIS-LOO corrects an in-sample
    fit for leaving each point out, while here every ``y`` is already held out
    (the right importance weights are uniform). ArviZ 1.3 refuses the constant
    log likelihood ("All tail values are the same") and also needs a
    ``posterior`` group, which a predictive distribution does not have. Use
    :func:`heldout_elpd` for ``az.compare``, and ``az.plot_ppc_pit`` (the
    non-LOO PIT) for calibration plots.

    Raises
    ------
    ValueError
        A prediction breaking the contract, a bad ``n_draws`` / ``n_chains``, a
        ``y`` that is not finite or of the wrong length (both lengths named), or
        an observation dim named like a draw dim (``chain``, ``draw`` or ``sample``, the
        reserved names of ``calibprob._core.dims``): it would be read back as draws.

    References
    ----------
    ArviZ's InferenceData schema (groups ``posterior_predictive``,
    ``observed_data``, ``log_likelihood``; sample dims ``chain``, ``draw``):
    https://python.arviz.org/en/stable/schema/schema.html.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> pred = calibprob.normal([0.0, 1.0, 2.0], [1.0, 1.0, 2.0])
    >>> dt = calibprob.to_datatree(pred, [0.1, 0.9, 2.5], n_draws=500, random_state=0)
    >>> sorted(dt.children)
    ['log_likelihood', 'observed_data', 'posterior_predictive']
    >>> dt.posterior_predictive["y"].dims, dt.posterior_predictive["y"].shape
    (('chain', 'draw', 'obs'), (1, 500, 3))
    >>> nll = float(calibprob.evaluate(pred, [0.1, 0.9, 2.5])["nll"])
    >>> bool(np.isclose(dt.log_likelihood["y"].isel(chain=0, draw=0).sum(), -3 * nll))
    True
    """
    validate(pred)
    n_draws = check_int(n_draws, "n_draws", minimum=1)
    n_chains = check_int(n_chains, "n_chains", minimum=1)
    if not isinstance(var_name, str) or not var_name:
        raise ValueError(f"var_name must be a non-empty string; got {var_name!r}.")
    n = pred.sizes["obs"]
    coord = pred["obs"].values
    dim = pred.attrs.get("obs_dim", "obs")
    yv = None
    if y is not None:
        yv = check_targets(y, n, "y", obs=pred["obs"].values)
        if isinstance(y, xr.DataArray):
            dim = y.dims[0]
            if dim in y.coords:
                coord = y[dim].values
    if obs_dim is not None:
        dim = obs_dim
    # a dim named like a draw dim (az.extract's 'sample') would be read back as draws
    check_obs_dim(dim, "obs_dim")
    rng = np.random.default_rng(random_state)
    draws = pred.calib.sample(n_chains * n_draws, rng).values  # (obs, chain * draw)
    draws = draws.T.reshape(n_chains, n_draws, n)
    coords = {CHAIN_DIM: np.arange(n_chains), DRAW_DIM: np.arange(n_draws), dim: coord}
    sample = (CHAIN_DIM, DRAW_DIM, dim)
    attrs = {"created_by": "calibprob.to_datatree", "method": str(pred.attrs.get("method", "unknown"))}
    groups = {"posterior_predictive": xr.Dataset({var_name: (sample, draws)}, coords=coords, attrs=attrs)}
    if yv is not None:
        groups["observed_data"] = xr.Dataset({var_name: ((dim,), yv)}, coords={dim: coord}, attrs=attrs)
        logpdf = pred.calib.logpdf(yv).values
        ll = np.broadcast_to(logpdf, (n_chains, n_draws, n)).copy()
        groups["log_likelihood"] = xr.Dataset({var_name: (sample, ll)}, coords=coords, attrs=attrs)
    return xr.DataTree.from_dict(groups)


def heldout_elpd(data: Any, *, var_name: str | None = None) -> Any:
    r"""Held-out expected log predictive density of a DataTree, as ArviZ's ELPD result.

    For observations the model did not see, the elpd needs no leave-one-out
    correction: :math:`\widehat{\mathrm{elpd}}_i = \log \frac1S \sum_s
    p(y_i \mid \theta_s)` from the ``log_likelihood`` group (for a tree from
    :func:`to_datatree` this is :math:`\log f_i(y_i)` exactly; for a PyMC model
    scored on test data with ``pm.compute_log_likelihood`` it is the usual
    log pointwise predictive density). The result is ArviZ's k-fold container
    (its estimator without importance sampling, here one held-out fold), so
    ``az.compare({"a": heldout_elpd(dt_a), "b": heldout_elpd(dt_b)})`` ranks
    models on the test set, with the paired ``elpd_diff`` and its ``dse``.

    Parameters
    ----------
    data : xarray.DataTree
        A tree with a ``log_likelihood`` group whose variable has sample dims
        (``chain``, ``draw``) and one or more observation dims.
    var_name : str, optional
        The ``log_likelihood`` variable; required when there are several.

    Returns
    -------
    arviz_stats.utils.ELPDDataLOOKFold
        ``elpd`` (sum of ``elpd_i``), ``se`` = :math:`\sqrt{n\,\mathrm{Var}(\mathrm{elpd}_i)}`,
        ``elpd_i`` (pointwise, over the observation dims), ``n_folds == 1``;
        ``p`` is NaN (the effective number of parameters needs the in-sample fit).

    Raises
    ------
    ValueError
        No ``log_likelihood`` group, an ambiguous or unknown ``var_name``, or no
        ``chain`` / ``draw`` dims.

    References
    ----------
    Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model
    evaluation using leave-one-out cross-validation and WAIC. Statistics and
    Computing 27, eq. (3)-(5) (lppd, and the se of a sum of pointwise terms).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> y = np.random.default_rng(0).normal(size=200)
    >>> dt = calibprob.to_datatree(calibprob.normal(np.zeros(200), np.ones(200)), y, n_draws=10)
    >>> res = calibprob.heldout_elpd(dt)
    >>> bool(np.isclose(res.elpd, -200 * float(calibprob.evaluate(calibprob.normal(np.zeros(200), np.ones(200)), y)["nll"])))
    True
    """
    if not isinstance(data, xr.DataTree) or "log_likelihood" not in data.children:
        groups = list(data.children) if isinstance(data, xr.DataTree) else None
        raise ValueError(
            "data must be a DataTree with a 'log_likelihood' group; got "
            + (f"a tree with groups {groups}" if groups is not None else f"a {type(data).__name__}")
            + ". Build one with calibprob.to_datatree(pred, y)."
        )
    ll = _pick_variable(data["log_likelihood"].dataset, var_name, "log_likelihood group")
    sample = sample_dims_of(ll.dims, MCMC_DIMS)
    if not sample:
        raise ValueError(
            f"log_likelihood variable {ll.name!r} has dims {ll.dims}, without 'chain'/'draw'; "
            "the ArviZ layout puts the sample dims first: pass idata.log_likelihood (dims chain, draw, obs)."
        )
    s = int(np.prod([ll.sizes[d] for d in sample]))
    obs_dims = [d for d in ll.dims if d not in sample]
    return _heldout_elpd_data(ll.transpose(*sample, ...).values.reshape(s, -1), ll, obs_dims)


def _heldout_elpd_data(ll: np.ndarray, like: Any = None, obs_dims: Sequence[Any] = ("obs",)) -> Any:
    r"""ArviZ's one-fold ELPD result from pointwise held-out log-likelihoods ``ll`` of shape (S, n).

    :math:`\mathrm{elpd}_i = \log\frac1S\sum_s e^{\ell_{si}}` (no importance
    sampling: the points are held out), :math:`p_i = \mathrm{elpd}_i - \overline{\ell_{\cdot i}}`;
    ``like`` (a DataArray) lends the observation dims' sizes and coordinates.
    """
    from arviz_stats.utils import ELPDDataLOOKFold  # lazy: ArviZ takes ~1 s to import

    S = ll.shape[0]
    elpd_flat = special.logsumexp(ll, axis=0) - np.log(S)
    p_flat = elpd_flat - ll.mean(axis=0)
    if like is None:
        shape, coords, name = (ll.shape[1],), {"obs": np.arange(ll.shape[1])}, None
    else:
        shape = tuple(like.sizes[d] for d in obs_dims)
        coords, name = {d: like[d] for d in obs_dims if d in like.coords}, like.name
    elpd_i = xr.DataArray(elpd_flat.reshape(shape), dims=list(obs_dims), coords=coords, name=name)
    p_i = xr.DataArray(p_flat.reshape(shape), dims=list(obs_dims), coords=coords)
    n = int(elpd_flat.size)
    return ELPDDataLOOKFold(
        elpd=float(elpd_flat.sum()),
        se=float(np.sqrt(n * elpd_flat.var())),
        p=float(p_flat.sum()),
        n_samples=S,
        n_data_points=n,
        scale="log",
        warning=False,
        good_k=None,  # type: ignore[arg-type]  # k-fold has no Pareto-k threshold; ArviZ's own k-fold passes None
        elpd_i=elpd_i,
        n_folds=1,
        p_kfold_i=p_i,
    )
