"""The contract from posterior-predictive draws: PyMC / ArviZ trees, Datasets, arrays, optionally weighted."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.alignment import align_by_label
from calibprob._core.dims import MCMC_DIMS, SAMPLE_DIMS, STACKED_SAMPLE_DIM
from calibprob._core.stable import pow2_scale
from calibprob._core.trees import tree_groups as _tree_groups
from calibprob._core.validation import check_array, check_finite
from calibprob.predictive._common import _dataset, _levels_or_default, _obs_coord

#: Groups of an ArviZ / PyMC DataTree that hold predictive draws, in PyMC's naming:
#: ``posterior_predictive`` (draws at the data the model was fitted on, or at
#: data swapped in with ``pm.set_data``) and ``predictions`` (draws at new data,
#: ``pm.sample_posterior_predictive(..., predictions=True)``).
_PREDICTIVE_GROUPS = ("posterior_predictive", "predictions")


def _predictive_dataset(draws: Any, group: str | None) -> Any:
    """The Dataset of predictive draws inside a tree, by the rules of :func:`from_draws`."""
    groups: Any = _tree_groups(draws)  # a tree here: never None
    if group is not None:
        if not isinstance(group, str) or group not in groups:
            raise ValueError(
                f"group={group!r} is not a group of draws; it has groups {list(groups)}. "
                f"Pass one of them (usually one of {_PREDICTIVE_GROUPS})."
            )
        return groups[group], f"group {group!r}"
    found = [g for g in _PREDICTIVE_GROUPS if g in groups]
    if len(found) == 2:
        raise ValueError(
            "draws has both a 'posterior_predictive' and a 'predictions' group; pass "
            "group='posterior_predictive' (draws at the data the model saw) or "
            "group='predictions' (draws at new data) to say which to use."
        )
    if found:
        return groups[found[0]], f"group {found[0]!r}"
    if isinstance(draws, xr.DataTree) and draws.data_vars:
        # a node such as idata["posterior_predictive"]: its own variables are the draws
        return draws.dataset, f"node {draws.name!r}" if draws.name else "tree"
    raise ValueError(
        f"draws is a {type(draws).__name__} with neither a 'posterior_predictive' nor a "
        f"'predictions' group; it has groups {list(groups)}. Draw them first with "
        "pm.sample_posterior_predictive(idata, extend_inferencedata=True) (predictions=True "
        "for new data), pass group= naming the group that holds draws, or pass the "
        "DataArray itself (e.g. pp.posterior_predictive['y'])."
    )


def _pick_variable(ds: xr.Dataset, var_name: str | None, where: str) -> xr.DataArray:
    names = list(ds.data_vars)
    if var_name is not None:
        if var_name not in names:
            raise ValueError(
                f"var_name={var_name!r} is not a variable of the draws' {where}; it has {names}. Pass one of them."
            )
        return ds[var_name]
    if len(names) == 1:
        return ds[names[0]]
    if not names:
        raise ValueError(f"the draws' {where} holds no variables; pass the group that holds the predicted variable.")
    raise ValueError(
        f"the draws' {where} holds {len(names)} variables {names}; pass var_name= naming the "
        "predicted one (e.g. var_name='y')."
    )


def _select_draws(draws: Any, var_name: str | None, group: str | None) -> xr.DataArray:
    """The draws variable of a DataTree / InferenceData (``group``), a Dataset or a DataArray (``var_name``)."""
    is_tree = _tree_groups(draws) is not None
    if group is not None and not is_tree:
        raise ValueError(
            f"group={group!r} applies to a DataTree / InferenceData; got a {type(draws).__name__}. "
            "Drop group= (or pass the whole tree)."
        )
    if is_tree:
        ds, where = _predictive_dataset(draws, group)
        draws = _pick_variable(ds, var_name, where)
    elif isinstance(draws, xr.Dataset):
        draws = _pick_variable(draws, var_name, "Dataset")
    elif var_name is not None:
        if not isinstance(draws, xr.DataArray):
            raise ValueError(
                f"var_name={var_name!r} applies to a Dataset or DataTree; got a {type(draws).__name__}. Drop var_name=."
            )
        if draws.name is not None and draws.name != var_name:
            raise ValueError(
                f"var_name={var_name!r} but draws is the DataArray {draws.name!r}. "
                "Pass the matching variable or drop var_name=."
            )
    return draws


def _check_reserved(draws: xr.DataArray, present: list, obs_dim: Any, label: str) -> None:
    """Refuse a dim that is both a draw dim and the observation dim (``calibprob._core.dims``).

    ``az.extract`` stacks ``(chain, draw)`` into ``sample``, so the three never index draws
    together: a ``sample`` beside ``chain`` / ``draw`` is an observation dim named like a draw dim,
    which one reader would take as observations and another as draws.
    """
    if STACKED_SAMPLE_DIM in present and any(d in present for d in MCMC_DIMS):
        raise ValueError(
            f"{label} has dims {draws.dims}: {STACKED_SAMPLE_DIM!r} beside {MCMC_DIMS} is not az.extract's "
            "stacked draws, so it must be the observation dim, whose name is reserved for draws. Rename it, "
            f"e.g. draws.rename({{{STACKED_SAMPLE_DIM!r}: 'obs_id'}})."
        )
    if obs_dim is not None and obs_dim in present:
        raise ValueError(
            f"obs_dim={obs_dim!r} is also one of the draw dims {present} of {label}; name the observation "
            "dim, or pass sample_dims= without it."
        )


def _draws_matrix(
    draws: xr.DataArray, sample_dims: Any, obs_dim: Hashable | None
) -> tuple[np.ndarray, Any, dict[str, Any]]:
    """``(draws x obs)`` values of a DataArray, its ``obs`` labels and the attrs recording where they came from."""
    attrs: dict[str, str] = {}
    present = [d for d in sample_dims if d in draws.dims]
    if not present:
        raise ValueError(
            f"draws has dims {draws.dims} but none of sample_dims={tuple(sample_dims)}. "
            "Pass sample_dims naming the draw dimensions."
        )
    others = [d for d in draws.dims if d not in present]
    label = f"variable {draws.name!r}" if draws.name is not None else "draws"
    _check_reserved(draws, present, obs_dim, label)
    if obs_dim is None and len(others) == 1:
        obs_dim = others[0]
    if obs_dim is None or others != [obs_dim]:
        if not others:
            fix = "it has no observation dim; add one (e.g. da.expand_dims(obs=1))."
        elif obs_dim is not None and obs_dim not in others:
            fix = f"obs_dim={obs_dim!r} is not among them."
        else:
            fix = (
                "calibprob needs one value per observation: select the others "
                f"(e.g. da.isel({others[0]}=0)) or stack them into one "
                f"(da.stack(obs={tuple(others)}))."
            )
        raise ValueError(
            f"{label} must have exactly one dimension besides the sample dims {present}; got {others}: {fix}"
        )
    arr = draws.transpose(*present, obs_dim).values.reshape(-1, draws.sizes[obs_dim])
    arr = check_array(arr, "draws", ndim=2)
    obs = draws[obs_dim].values if obs_dim in draws.coords else None
    attrs["obs_dim"] = str(obs_dim)
    if draws.name is not None:
        attrs["var_name"] = str(draws.name)
    return arr, obs, attrs


def from_draws(
    draws: Any,
    levels: ArrayLike | None = None,
    *,
    var_name: str | None = None,
    group: str | None = None,
    sample_dims: Any = SAMPLE_DIMS,
    obs_dim: Hashable | None = None,
    method: str = "draws",
    weights: Any = None,
) -> xr.Dataset:
    r"""A predictive distribution from predictive draws (no Gaussian collapse).

    Accepts PyMC / ArviZ output at any level of nesting, so that
    ``from_draws(idata)``, ``from_draws(idata["posterior_predictive"])``,
    ``from_draws(idata.posterior_predictive)`` and
    ``from_draws(idata.posterior_predictive["y"])`` give the same Dataset.

    Parameters
    ----------
    draws : xarray.DataTree, xarray.Dataset, xarray.DataArray or array_like
        * a DataTree (``az.InferenceData`` in ArviZ 1; a legacy ArviZ 0.x
          ``InferenceData`` too) with a ``posterior_predictive`` or a
          ``predictions`` group. The group is the only one of the two present;
          when both are, ``group=`` must say which. A tree node that holds the
          variables itself (``idata["posterior_predictive"]``) is used as is;
        * a Dataset (a group): the variable named ``var_name``, needed only when
          there is more than one;
        * a DataArray with the ``sample_dims`` present (``chain`` and ``draw``
          from PyMC, or the ``sample`` of ``az.extract``) and exactly one other
          dimension, the observations (PyMC's ``obs_id``, ``y_dim_0``, ...),
          whose coordinate values become the ``obs`` coordinate;
        * an array of shape ``(n_draws, n_obs)``.
    levels : array_like, optional
        Levels at which empirical quantiles are taken (linear interpolation
        between order statistics); default :data:`DEFAULT_LEVELS`.
    var_name : str, optional
        The variable to use from a Dataset or tree; required only when there are
        several.
    group : str, optional
        The tree group holding the draws; required only when a tree has both
        ``posterior_predictive`` and ``predictions``.
    sample_dims : tuple of str, default ("chain", "draw", "sample")
        Dimensions that index draws; those present are flattened together into
        the draws (DataArray / Dataset / tree input). The default is the core's table of
        reserved names (``calibprob._core.dims.SAMPLE_DIMS``); an observation dim named
        ``sample`` beside ``chain`` / ``draw`` is refused (rename it), as one reader would
        take it for draws.
    obs_dim : str, optional
        Name of the observation dimension; inferred when there is exactly one
        non-sample dimension. Renamed to ``obs`` (its name is kept in
        ``attrs["obs_dim"]``, which :func:`to_datatree` reuses).
    method : str
    weights : array_like or xarray.DataArray, shape (n_draws, n_obs), optional
        Normalised importance weights :math:`w_{s,i}` of the draws, one column per
        observation (e.g. PSIS-LOO weights, :func:`calibprob.from_loo`): finite,
        :math:`\ge 0`, each column summing to one (within 1e-6). Linear weights only;
        log-weights (ArviZ's ``log_weights``) are refused with the fix
        (``np.exp(log_weights)``). A DataArray carries the draws' dims and is put in
        their order, aligned by label along every dim the draws label (a weight belongs to
        the draw and observation its coordinates name; labels that differ are refused,
        naming the first); a DataFrame's columns are aligned likewise to the draws'
        observation labels; a plain array is read by position. Default: equal weights, with the unweighted estimators above.
        With weights, the quantile at level :math:`p` interpolates linearly between
        sorted draws :math:`x_{(k)}` placed at the midpoints of their cumulative weight,
        :math:`c_k = \sum_{j \le k} w_{(j)} - w_{(k)}/2` (Hyndman & Fan's definition 5
        when the weights are equal), clamped to the extreme draws; the mean is
        :math:`\sum_s w_s x_s` and the variance
        :math:`\sum_s w_s (x_s - \bar x)^2 / (1 - \sum_s w_s^2)` (the reliability-weights
        correction, which is ``ddof=1`` for equal weights).

    Returns
    -------
    xarray.Dataset
        Empirical quantiles plus the draws' exact ``mean`` and ``std``;
        ``attrs["n_draws"]``, and for xarray input ``attrs["obs_dim"]`` and
        (when the variable is named) ``attrs["var_name"]``.

    Raises
    ------
    ValueError
        A tree with neither predictive group (the message lists the groups it
        has), both groups without ``group=``, several variables without
        ``var_name`` (listing them), an unknown ``var_name``, no sample
        dimension, or a variable with more than one non-sample dimension.

    References
    ----------
    Hyndman, R. J. and Fan, Y. (1996). Sample quantiles in statistical packages.
    The American Statistician 50(4) (linear interpolation between order
    statistics, their definition 7).

    The predictive-distribution contract and its interpolation rule (linear in
    :math:`\Phi^{-1}(p)`, Gaussian tails): :doc:`/concepts`.

    Examples
    --------
    >>> import numpy as np, xarray as xr, calibprob
    >>> draws = np.random.default_rng(0).normal(size=(4000, 2))   # (n_draws, n_obs)
    >>> pred = calibprob.from_draws(draws)
    >>> pred.sizes["obs"], pred.attrs["family"]
    (2, 'quantile')
    >>> bool(abs(float(pred.calib.ppf(0.5)[0])) < 0.1)
    True
    >>> pp = xr.Dataset({"y": (("chain", "draw", "obs_id"), draws.reshape(2, 2000, 2))},
    ...                 coords={"obs_id": [10, 11]})
    >>> idata = xr.DataTree.from_dict({"posterior_predictive": pp})
    >>> calibprob.from_draws(idata)["obs"].values.tolist()
    [10, 11]
    """
    levels = _levels_or_default(levels)
    draws = _select_draws(draws, var_name, group)
    if isinstance(draws, xr.DataArray):
        arr, obs, attrs = _draws_matrix(draws, sample_dims, obs_dim)
    else:
        arr, obs, attrs = check_array(draws, "draws", ndim=2), None, {}
    if arr.shape[0] < 2:
        raise ValueError(f"draws needs at least 2 draws per observation; got {arr.shape[0]}.")
    if weights is None:
        q = np.quantile(arr, levels, axis=0).T
        mean, std = _draw_moments(arr)
    else:
        w = _check_weights(weights, draws, arr.shape, sample_dims)
        q, mean, std = _weighted_summaries(arr, w, levels)
    ds = _dataset(q, levels, _obs_coord(arr.shape[1], obs), method, "quantile", {"mean": mean, "std": std})
    ds.attrs["n_draws"] = int(arr.shape[0])
    if weights is not None:
        ds.attrs["weighted"] = 1
    ds.attrs.update(attrs)
    return ds


def _draw_moments(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column mean and ``ddof=1`` std of draws, without overflow or underflow at any scale.

    The plain formulas (kept bit for bit where they are safe, and copy-free) are redone in units
    of a power of two only for the columns whose magnitude is extreme.
    """
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):  # redone below where it matters
        mean = arr.mean(axis=0)
        std = arr.std(axis=0, ddof=1)
    extreme = ~((std > 1e-100) & (std < 1e100) & np.isfinite(mean)) | (np.abs(mean) > 1e100)
    if extreme.any():
        cols = arr[:, extreme]
        unit = pow2_scale(cols, axis=0)
        scaled = cols / unit
        mean[extreme] = scaled.mean(axis=0) * unit
        std[extreme] = scaled.std(axis=0, ddof=1) * unit
    return mean, std


#: How far a column of ``weights`` may sum from one (float32 weights, exp of normalised log-weights).
WEIGHT_SUM_TOL = 1e-6


def _check_weights(weights: Any, draws: Any, shape: tuple[int, int], sample_dims: Any) -> np.ndarray:
    """``weights`` as a validated ``(n_draws, n_obs)`` array in the order of the draws' matrix."""
    if isinstance(weights, xr.DataArray):
        if not isinstance(draws, xr.DataArray) or set(weights.dims) != set(draws.dims):
            have = draws.dims if isinstance(draws, xr.DataArray) else "an array"
            raise ValueError(
                f"weights has dims {weights.dims} but the draws have {have}; pass weights with the "
                "draws' dims, or both as plain (n_draws, n_obs) arrays."
            )
        present = [d for d in sample_dims if d in draws.dims]
        order = [*present, *[d for d in draws.dims if d not in present]]
        # labels, not positions: a weight belongs to the draw and observation its coordinates name
        for dim in order:
            ours = draws.indexes[dim] if dim in draws.indexes else None
            weights = align_by_label(weights, ours, "weights", dim=str(dim), whose="the draws")
        weights = weights.transpose(*order).values.reshape(shape)
    elif isinstance(weights, pd.DataFrame) and isinstance(draws, xr.DataArray):
        # a (n_draws, n_obs) table: its columns are the observations, aligned by label to the draws' obs dim
        obs_dims = [d for d in draws.dims if d not in sample_dims]
        if len(obs_dims) == 1 and obs_dims[0] in draws.indexes:
            weights = align_by_label(
                weights, draws.indexes[obs_dims[0]], "weights", dim=str(obs_dims[0]), whose="the draws", axis=1
            )
    # one memory layout whatever the input's (a reordered table is column-major): the weighted sums then
    # run in one order, so weights aligned by label give bitwise the result of weights given in order
    w = np.ascontiguousarray(check_array(weights, "weights", ndim=2, finite=False))
    if w.shape != shape:
        raise ValueError(f"weights must have the draws' shape (n_draws, n_obs) = {shape}; got {w.shape}.")
    check_finite(w, "weights")
    if (w < 0).any():
        raise ValueError(
            f"weights must be >= 0; got {int((w < 0).sum())} negative entries (min {w.min():.3g}). "
            "If these are log-weights (e.g. arviz_stats' log_weights), pass np.exp(log_weights)."
        )
    sums = w.sum(axis=0)
    bad = np.abs(sums - 1.0) > WEIGHT_SUM_TOL
    if bad.any():
        j = int(np.argmax(bad))
        raise ValueError(
            f"weights must sum to one over the draws of each observation (within {WEIGHT_SUM_TOL:g}); "
            f"{int(bad.sum())} columns do not, e.g. column {j} sums to {sums[j]:.6g}. "
            "Normalise them: weights / weights.sum(axis=0)."
        )
    return w


def _weighted_summaries(
    arr: np.ndarray, w: np.ndarray, levels: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weighted quantiles (midpoint rule of :func:`from_draws`), means and standard deviations per column."""
    order = np.argsort(arr, axis=0, kind="stable")
    xs = np.take_along_axis(arr, order, axis=0)
    ws = np.take_along_axis(w, order, axis=0)
    # each draw sits at the middle of its weight's step of the weighted CDF (Hazen for equal weights)
    mid = np.cumsum(ws, axis=0) - 0.5 * ws
    q = np.empty((arr.shape[1], levels.size))
    for j in range(arr.shape[1]):
        q[j] = np.interp(levels, mid[:, j], xs[:, j])
    mean = np.einsum("sn,sn->n", w, arr)
    denom = 1.0 - np.einsum("sn,sn->n", w, w)
    var = np.einsum("sn,sn->n", w, (arr - mean) ** 2)
    # one draw holding all the weight has no spread to estimate: report 0, not a division by zero
    std = np.sqrt(np.divide(var, denom, out=np.zeros_like(var), where=denom > 0))
    return q, mean, std
