"""The one reader of an inference tree (an ArviZ DataTree or a legacy ``InferenceData``).

Importance weights (PSIS-LOO, conformal Bayes's add-one-in weights) pair the draws of several
groups: draw :math:`s` of ``log_likelihood`` must be :math:`\\log p(y_i \\mid \\theta_s)` for draw
:math:`s` of ``posterior``, and draw :math:`s` of ``posterior_predictive`` must be drawn from that
same :math:`\\theta_s`. A tree in which one group was thinned, truncated or recomputed on another
posterior still has the right dims, and every formula still returns numbers, computed against
another posterior. :func:`check_tree` is the one place that refuses it: every group an entry
point uses must hold the same chains and draws (sizes and coordinate values), and the
``log_likelihood`` variable must index the same observations as ``observed_data``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import xarray as xr

from calibprob._core.dims import MCMC_DIMS

__all__ = ["tree_groups", "check_tree", "SAMPLING_FIX"]

#: What to do about a mismatch: recompute the derived groups from the one posterior.
SAMPLING_FIX = (
    "Every group must come from the same posterior draws: recompute the derived groups on it "
    "(pm.compute_log_likelihood(idata) for log_likelihood, pm.sample_posterior_predictive(idata, "
    "extend_inferencedata=True) for posterior_predictive), or thin / select every group alike "
    "(idata.isel(draw=...))."
)


def tree_groups(obj: Any) -> dict[str, xr.Dataset] | None:
    """``{group name: Dataset}`` of a DataTree or a legacy ``az.InferenceData``; else None."""
    if isinstance(obj, xr.DataTree):
        return {name: child.dataset for name, child in obj.children.items()}
    groups = getattr(obj, "groups", None)
    if callable(groups) and not isinstance(obj, (xr.Dataset, xr.DataArray)):
        # ArviZ < 1 InferenceData: groups() lists names, each an attribute holding a Dataset
        return {name: getattr(obj, name) for name in groups()}
    return None


def _draw_index(ds: xr.Dataset) -> dict[str, np.ndarray] | None:
    """``{dim: coordinate values}`` of the chain and draw dims a group has (None without any)."""
    present = [d for d in MCMC_DIMS if d in ds.dims]
    if not present:
        return None
    return {d: (np.asarray(ds[d].values) if d in ds.coords else np.arange(ds.sizes[d])) for d in present}


def _describe(index: dict[str, np.ndarray]) -> str:
    return ", ".join(f"{d}={v.size}" for d, v in index.items())


def _same_draws(groups: dict[str, xr.Dataset], names: Iterable[str], where: str) -> None:
    indexed = {g: idx for g in names if g in groups and (idx := _draw_index(groups[g])) is not None}
    if len(indexed) < 2:
        return
    first, ref = next(iter(indexed.items()))
    for g, idx in indexed.items():
        same = idx.keys() == ref.keys() and all(
            idx[d].shape == ref[d].shape and np.array_equal(idx[d], ref[d]) for d in ref
        )
        if not same:
            sizes = "; ".join(f"{name} ({_describe(i)})" for name, i in indexed.items())
            what = "sizes" if any(idx.get(d, np.empty(0)).size != v.size for d, v in ref.items()) else "draw labels"
            raise ValueError(
                f"{where}: the groups {list(indexed)} do not hold the same draws ({what} differ between "
                f"{first!r} and {g!r}): {sizes}. {SAMPLING_FIX}"
            )


def _same_observations(groups: dict[str, xr.Dataset], var_name: str | None, where: str) -> None:
    """The ``log_likelihood`` variable's observation dims match ``observed_data``'s (sizes and labels)."""
    ll, obs = groups.get("log_likelihood"), groups.get("observed_data")
    if ll is None or obs is None:
        return
    names = [var_name] if var_name is not None else list(ll.data_vars)
    for name in names:
        if name not in ll.data_vars or name not in obs.data_vars:
            continue
        a, b = ll[name], obs[name]
        dims_a = [d for d in a.dims if d not in MCMC_DIMS]
        if dims_a != list(b.dims) or any(a.sizes[d] != b.sizes[d] for d in dims_a):
            raise ValueError(
                f"{where}: log_likelihood[{name!r}] indexes observations {_sizes(a, dims_a)} but "
                f"observed_data[{name!r}] {_sizes(b, list(b.dims))}. Compute the log-likelihood at the "
                "observed data of this tree (pm.compute_log_likelihood(idata))."
            )
        for d in dims_a:
            if d in a.coords and d in b.coords and not np.array_equal(a[d].values, b[d].values):
                bad = int(np.flatnonzero(a[d].values != b[d].values)[0])
                raise ValueError(
                    f"{where}: log_likelihood[{name!r}] and observed_data[{name!r}] label the observations "
                    f"differently along {d!r} (first at position {bad}: {a[d].values[bad].item()!r} vs "
                    f"{b[d].values[bad].item()!r}). Put both in the same order (idata.sel({d}=...)) or recompute "
                    "the log-likelihood on this tree."
                )


def _sizes(da: xr.DataArray, dims: list) -> str:
    return "(" + ", ".join(f"{d}={da.sizes[d]}" for d in dims) + ")"


def check_tree(
    tree: Any,
    uses: Iterable[str],
    *,
    var_name: str | None = None,
    where: str = "idata",
) -> dict[str, xr.Dataset]:
    """The groups of ``tree``, after checking that those in ``uses`` hold the same draws.

    Parameters
    ----------
    tree : xarray.DataTree or arviz.InferenceData
    uses : iterable of str
        The groups the caller reads (those absent are skipped; the caller refuses a missing
        group it needs, with the call that adds it). Groups without ``chain``/``draw`` dims
        (``observed_data``) take no part in the draw check.
    var_name : str, optional
        The observed variable whose ``log_likelihood`` and ``observed_data`` must index the same
        observations (default: every variable in both).
    where : str
        The argument's name in messages.

    Returns
    -------
    dict
        ``{group name: Dataset}``.

    Raises
    ------
    TypeError
        ``tree`` is not a DataTree or InferenceData.
    ValueError
        Groups with different chains or draws (naming each group and its sizes, and the fix), or
        a log-likelihood whose observations differ from ``observed_data``'s.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> ll = xr.Dataset({"y": (("chain", "draw", "obs"), np.zeros((2, 50, 3)))})
    >>> post = xr.Dataset({"mu": (("chain", "draw"), np.zeros((1, 100)))})
    >>> tree = xr.DataTree.from_dict({"posterior": post, "log_likelihood": ll})
    >>> try:
    ...     check_tree(tree, ("posterior", "log_likelihood"))
    ... except ValueError as err:
    ...     print(str(err)[:98])
    idata: the groups ['posterior', 'log_likelihood'] do not hold the same draws (sizes differ between
    """
    groups = tree_groups(tree)
    if groups is None:
        raise TypeError(
            f"{where} must be an xarray.DataTree or arviz.InferenceData (what pm.sample returns); got "
            f"{type(tree).__name__}. Pass the idata of the fitted model."
        )
    uses = list(uses)
    _same_draws(groups, uses, where)
    if "log_likelihood" in uses:
        _same_observations(groups, var_name, where)
    return groups
