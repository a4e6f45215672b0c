"""Input handling of conformal Bayes: log-likelihood trees and arrays, test densities, grids, groups.

Every message names the parameter, the value received and the fix.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from calibprob._core.alignment import align_by_label
from calibprob._core.dims import MCMC_DIMS, STACKED_SAMPLE_DIM
from calibprob._core.trees import check_tree
from calibprob._core.validation import check_groups

SAMPLE_DIMS = MCMC_DIMS  # the reserved names of the core's table (chain, draw; az.extract's sample)


def _fix_ll() -> str:
    return (
        "Compute it with pm.compute_log_likelihood(idata) (PyMC) or pass the (draws, n) log-likelihood matrix yourself."
    )


def _pick(ds: Any, var_name: Any, where: str, param: str = "var_name") -> xr.DataArray:
    names = list(ds.data_vars)
    if var_name is None:
        if len(names) != 1:
            raise ValueError(
                f"the {where} group holds {names}; pass {param}= naming the observed variable to calibrate."
            )
        var_name = names[0]
    if var_name not in names:
        raise ValueError(f"{param}={var_name!r} is not in the {where} group, which holds {names}.")
    return ds[var_name]


def _tree_log_likelihood(tree: xr.DataTree, var_name: Any) -> Any:
    groups = {g.lstrip("/") for g in tree.groups}
    if "log_likelihood" not in groups or not tree["log_likelihood"].data_vars:
        raise ValueError(
            f"log_likelihood: the DataTree has no (or an empty) 'log_likelihood' group (groups: "
            f"{sorted(g for g in groups if g)}). {_fix_ll()}"
        )
    da = _pick(tree["log_likelihood"].to_dataset(), var_name, "log_likelihood")
    # the weights pair log_likelihood's draws with the posterior's (the PyMC and bambi doors read it)
    check_tree(tree, ("posterior", "log_likelihood"), var_name=str(da.name), where="log_likelihood")
    obs = None
    name = str(da.name)
    if "observed_data" in groups and name in tree["observed_data"].data_vars:
        obs = tree["observed_data"][name]
    return da, obs


def sample_matrix(da: xr.DataArray, name: str) -> tuple[np.ndarray, tuple[int, ...]]:
    """``(values (S, rest...), sample shape)`` of a DataArray with (chain, draw) or draw dims first."""
    sample = [d for d in SAMPLE_DIMS if d in da.dims] or ([STACKED_SAMPLE_DIM] if STACKED_SAMPLE_DIM in da.dims else [])
    if not sample:
        raise ValueError(
            f"{name} has dims {da.dims} and no draw dimension; name the draws 'chain'/'draw' (ArviZ) "
            "or 'sample', or pass a NumPy array with the draws on axis 0."
        )
    rest = [d for d in da.dims if d not in sample]
    da = da.transpose(*sample, *rest)
    shape = tuple(int(da.sizes[d]) for d in sample)
    values = np.asarray(da.values, dtype=float)
    return values.reshape((int(np.prod(shape)),) + values.shape[len(sample) :]), shape


def train_log_likelihood(log_likelihood: Any, var_name: Any) -> Any:
    """``(ll (S, n), sample shape or None, observed DataArray or None, ll DataArray or None)``."""
    obs = da = None
    if isinstance(log_likelihood, xr.DataTree):
        da, obs = _tree_log_likelihood(log_likelihood, var_name)
    elif isinstance(log_likelihood, xr.Dataset):
        da = _pick(log_likelihood, var_name, "log_likelihood Dataset")
    elif isinstance(log_likelihood, xr.DataArray):
        da = log_likelihood
    if da is not None:
        values, shape = sample_matrix(da, "log_likelihood")
        ll = values.reshape(values.shape[0], -1)
    else:
        shape = None
        try:
            ll = np.asarray(log_likelihood, dtype=float)
        except (TypeError, ValueError) as err:
            raise TypeError(
                f"log_likelihood must be a DataTree with a log_likelihood group, a DataArray (chain, draw, obs) "
                f"or a (draws, n) array; got {type(log_likelihood).__name__}. {_fix_ll()}"
            ) from err
        if ll.ndim != 2:
            raise ValueError(f"log_likelihood must be a (draws, n) array; got shape {ll.shape}.")
    check_log_density(ll, "log_likelihood", allow_minus_inf=False)
    if ll.shape[0] < 2 or ll.shape[1] < 1:
        raise ValueError(f"log_likelihood needs at least 2 draws and 1 observation; got shape {ll.shape}.")
    return ll, shape, obs, da


def check_log_density(values: np.ndarray, name: str, *, allow_minus_inf: bool) -> None:
    """Refuse NaN and +inf (and -inf unless allowed), saying where and what to do."""
    bad = np.isnan(values) | (values == np.inf)
    if not allow_minus_inf:
        bad |= values == -np.inf
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"{name} must be finite log densities; got {int(bad.sum())} NaN/inf value(s), the first "
            f"({values[idx]}) at index {idx}. Check the model's likelihood at those draws "
            "(a NaN usually means an invalid parameter, e.g. a negative scale)."
        )


def test_density_array(test_log_density: Any, n_draws: int, sample_shape: Any) -> np.ndarray | xr.DataArray:
    """The (S, m, G) test log densities as an array-like (sliced lazily), after shape checks."""
    if isinstance(test_log_density, xr.DataArray):
        sample = [d for d in SAMPLE_DIMS if d in test_log_density.dims]
        if sample and sample_shape is not None and len(sample) == len(sample_shape):
            got = tuple(int(test_log_density.sizes[d]) for d in sample)
            if got != tuple(sample_shape):
                raise ValueError(
                    f"test_log_density has {dict(zip(sample, got))} draws but the training log-likelihood "
                    f"{dict(zip(sample, sample_shape))}: both must come from the same posterior draws, in "
                    "the same order."
                )
        grid_dims = [d for d in test_log_density.dims if d in ("grid", "grid_point")]
        if grid_dims:  # a named grid dimension goes last whatever its position
            test_log_density = test_log_density.transpose(..., grid_dims[0])
        values, _ = sample_matrix(test_log_density, "test_log_density")
        arr = values
    else:
        arr = np.asarray(test_log_density, dtype=float)
    if arr.ndim != 3:
        raise ValueError(
            f"test_log_density must have shape (draws, n_test, n_grid); got {arr.shape}. A single test point "
            "is arr[:, None, :]."
        )
    if arr.shape[0] != n_draws:
        raise ValueError(
            f"test_log_density has {arr.shape[0]} draws but the training log-likelihood has {n_draws}: "
            "both must be evaluated at the same posterior draws, in the same order."
        )
    return arr


def check_grid(grid: Any, m: int, n_grid: int) -> np.ndarray:
    """The (m, G) candidate grid: increasing and equispaced per test point."""
    g = np.asarray(grid, dtype=float)
    if g.ndim == 1:
        g = np.broadcast_to(g, (m, g.size))
    if g.shape != (m, n_grid):
        raise ValueError(
            f"grid must have shape ({n_grid},) or ({m}, {n_grid}) to match test_log_density; got {np.shape(grid)}."
        )
    if n_grid < 2 or not np.isfinite(g).all():
        raise ValueError(f"grid must hold at least 2 finite candidate values per test point; got shape {g.shape}.")
    step = np.diff(g, axis=1)
    if (step <= 0).any():
        raise ValueError("grid must be strictly increasing along its last axis; sort it (numpy.sort).")
    if not np.allclose(step, step[:, :1], rtol=1e-6, atol=0.0):
        raise ValueError(
            "grid must be equispaced (the set's length is its number of grid points times the spacing); "
            "build it with numpy.linspace."
        )
    return g


def check_grid_covers(g: np.ndarray, y_train: np.ndarray | None) -> None:
    """Refuse a grid that does not span the training targets (the sets would be clipped to it)."""
    if y_train is None:
        return
    lo, hi = float(np.min(y_train)), float(np.max(y_train))
    bad = (g[:, 0] > lo) | (g[:, -1] < hi)
    if bad.any():
        j = int(np.argmax(bad))
        raise ValueError(
            f"grid for test point {j} spans [{g[j, 0]:.6g}, {g[j, -1]:.6g}] but the training targets span "
            f"[{lo:.6g}, {hi:.6g}]: a conformal set outside the grid would be clipped. Widen the grid, e.g. "
            f"numpy.linspace({lo:.6g} - 2 * sd, {hi:.6g} + 2 * sd, 100) (Fong and Holmes use +-2 on standardised y)."
        )


def row_labels(values: Any, *, skip: Any = ()) -> tuple[str, pd.Index] | None:
    """``(dim, labels)`` of the observations of a DataArray (its one dim besides draws and ``skip``), or None.

    Also the row labels of new inputs that carry them: a pandas ``DataFrame`` / ``Series`` with a
    non-default index, or a dict of such columns sharing one index (``dim`` is then ``"row"``).
    """
    if isinstance(values, xr.DataArray):
        rest = [d for d in values.dims if d not in (*SAMPLE_DIMS, STACKED_SAMPLE_DIM, *skip)]
        if len(rest) == 1 and rest[0] in values.indexes:
            return str(rest[0]), values.indexes[rest[0]]
        return None
    columns = list(values.values()) if isinstance(values, dict) else [values]
    indexes = [c.index for c in columns if isinstance(c, (pd.Series, pd.DataFrame))]
    if indexes and len(indexes) == len(columns) and all(ix.equals(indexes[0]) for ix in indexes):
        return "row", indexes[0]
    return None


def aligned(value: Any, ref: tuple[str, pd.Index] | None, name: str, whose: str) -> Any:
    """Labelled group labels (a Series, a 1-D DataArray with a coordinate) in the order of ``ref``'s rows.

    The package's one alignment reader (``calibprob._core.alignment.align_by_label``): aligned by
    label, refused naming the first mismatch; plain arrays, and everything when ``ref`` is None (the
    observations carry no labels), by position.
    """
    if ref is None or value is None or isinstance(value, str):
        return value
    dim, ours = ref
    if isinstance(value, xr.DataArray) and value.ndim == 1 and value.dims[0] in value.indexes:
        dim = str(value.dims[0])
    return align_by_label(value, ours, name, dim=dim, whose=whose)


def group_labels(value: Any, n: int, name: str, ref: Any = None, whose: str = "") -> np.ndarray:
    """Group labels as a 1-D NumPy array of length ``n`` (strings or integers).

    Read by the package's one groups reader (``calibprob._core.validation.check_groups``: length,
    dimensions, missing labels), after alignment to the rows ``ref`` labels (``aligned``); ranks
    compare labels, so floats are refused here.
    """
    arr = check_groups(aligned(value, ref, name, whose), n, name=name)
    assert arr is not None  # value is not None at every caller
    if arr.dtype.kind == "O":
        arr = arr.astype(str)
    if arr.dtype.kind not in "iuUSb":
        raise TypeError(f"{name} must hold integer or string labels; got dtype {arr.dtype}. Use .astype(str).")
    return arr


def train_groups_from(train_groups: Any, n: int, obs: Any, da: Any) -> np.ndarray | None:
    """Training groups (``fit(groups=)``): labels, or the name of a coordinate of observed_data / the log-likelihood."""
    if train_groups is None:
        return None
    if isinstance(train_groups, str):
        for source in (obs, da):
            if source is not None and train_groups in source.coords:
                coord = source.coords[train_groups]
                return group_labels(
                    coord.values.reshape(-1) if coord.ndim else coord, n, "groups (the training points' labels)"
                )
        raise ValueError(
            f"groups={train_groups!r} (the training points' labels) names no coordinate of the tree's observed_data or log_likelihood "
            "variable; pass the labels themselves (one per training point) or add the coordinate "
            "(pm.Model(coords=...) with a per-observation coordinate)."
        )
    return group_labels(train_groups, n, "groups", row_labels(da), "the training log-likelihood")
