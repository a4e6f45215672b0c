"""The one reader of row alignment: an argument that carries row labels is read by label.

A predictive Dataset always has an ``obs`` coordinate. An argument given beside it (``groups=``,
``y``, ``weights=``) may carry row labels of its own: an ``xarray.DataArray`` with an ``obs``
coordinate, or a ``pandas.Series`` / ``DataFrame`` whose index is not the default ``0..n-1``.
Reading such an argument by position when its labels are in another order puts every value on
another row, silently. The rule, the same for every entry point:

* a plain array (NumPy, list) is read **by position**, as documented;
* a labelled argument whose labels are the prediction's ``obs`` labels (in any order) is
  **aligned by label** (reordered to the prediction's rows), as xarray and pandas users expect;
* a ``DataArray`` whose ``obs`` labels differ from the prediction's is **refused**, naming the
  first label that does not match;
* a ``Series`` whose index is a different set of labels from a prediction that carries only the
  default ``0..n-1`` (the usual case after a random train/test split: the prediction was built
  from arrays) is read by position; against a prediction with row labels of its own it is
  refused like a DataArray.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

__all__ = ["align_by_label", "align_to_obs"]


def _obs_index(pred: Any) -> pd.Index | None:
    """The prediction's ``obs`` labels: from a Dataset / DataArray, or given as labels directly."""
    if isinstance(pred, (xr.Dataset, xr.DataArray)):
        return pred.indexes["obs"] if "obs" in pred.indexes else None
    if pred is None:
        return None
    return pd.Index(np.asarray(pred))


def _is_default(index: pd.Index) -> bool:
    n = len(index)
    if isinstance(index, pd.RangeIndex):
        return index.start == 0 and index.step == 1
    return index.dtype.kind in "iu" and bool(np.array_equal(index.to_numpy(), np.arange(n)))


def _show(label: Any) -> str:
    return repr(label.item() if isinstance(label, np.generic) else label)


def _of(whose: str) -> str:
    """The possessive: "the prediction's", "the draws'"."""
    return whose + ("'" if whose.endswith("s") else "'s")


def _first_mismatch(theirs: pd.Index, ours: pd.Index, whose: str, dim: str) -> str:
    extra = theirs.difference(ours, sort=False)
    if len(extra):
        article = "an" if dim[:1] in "aeiou" else "a"
        return f"{_show(extra[0])} is not {article} {dim} label of {whose}"
    missing = ours.difference(theirs, sort=False)
    if len(missing):
        return f"{_of(whose)} {dim} label {_show(missing[0])} is missing"
    return "it repeats a label"


def _refuse(
    name: str, theirs: pd.Index, ours: pd.Index, what: str, whose: str = "the prediction", dim: str = "obs"
) -> None:
    select = "obs=pred.obs" if (dim, whose) == ("obs", "the prediction") else f"{dim}=..."
    raise ValueError(
        f"{name}'s {what} does not match {_of(whose)} {dim} labels: {_first_mismatch(theirs, ours, whose, dim)}. "
        f"Pass {name} with {_of(whose)} rows (e.g. {name}.reindex(...) / .sel({select})), or pass plain values "
        "(.to_numpy()) to read them by position."
    )


def _order(theirs: pd.Index, ours: pd.Index) -> np.ndarray | None:
    """Positions in ``theirs`` of ``ours``' labels, or None when the two label sets differ."""
    if len(theirs) != len(ours) or not theirs.is_unique:
        return None
    where = theirs.get_indexer(ours)
    return None if (where < 0).any() else where


def align_to_obs(value: Any, pred: Any, name: str) -> Any:
    """``value`` in the prediction's row order: aligned by label, or unchanged (read by position).

    Parameters
    ----------
    value : object
        The argument (``groups=``, ``y``, ``weights=``); only a ``DataArray`` with an ``obs``
        coordinate and a ``pandas.Series`` / ``DataFrame`` are labelled.
    pred : xarray.Dataset, array_like or None
        The prediction whose ``obs`` coordinate gives the rows (or those ``obs`` labels
        themselves); None reads by position.
    name : str
        The parameter name used in error messages.

    Returns
    -------
    object
        ``value`` reordered (same type, its labels now equal to the prediction's), or ``value``
        itself.

    Raises
    ------
    ValueError
        Labels that do not match the prediction's, naming the first mismatch.
    """
    return align_by_label(value, _obs_index(pred), name)


def align_by_label(
    value: Any, ours: pd.Index | None, name: str, *, dim: str = "obs", whose: str = "the prediction", axis: Any = 0
) -> Any:
    """``value`` in the order of the labels ``ours`` along one dimension, or unchanged (by position).

    The rule of :func:`align_to_obs` for any labelled dimension: the observations of a training
    log-likelihood (PyMC's ``obs_id``), the draws of a posterior (``chain`` / ``draw``), the
    columns of a table of weights.

    Parameters
    ----------
    value : object
        The argument; a ``DataArray`` is labelled along ``dim`` when it has an index there, a
        ``Series`` / ``DataFrame`` by its index (``axis=0``) or a DataFrame by its columns
        (``axis=1``) when that is not the default ``0..n-1``.
    ours : pandas.Index or None
        The reference labels, in the reference order; None reads by position.
    name : str
        The parameter name used in error messages.
    dim : str, default "obs"
        The dimension's name (a DataArray's dim; in messages for pandas too).
    whose : str, default "the prediction"
        What ``ours`` belongs to, in messages ("the draws", "the training log-likelihood").
    axis : {0, 1}, default 0
        The pandas axis that carries the labels.

    Returns
    -------
    object
        ``value`` reordered along that dimension (same type), or ``value`` itself.

    Raises
    ------
    ValueError
        Labels that do not match ``ours``, naming the first mismatch.
    """
    if ours is None:
        return value
    if isinstance(value, xr.DataArray) and dim in value.indexes:
        theirs = value.indexes[dim]
        if theirs.equals(ours):
            return value
        where = _order(theirs, ours)
        if where is None:
            _refuse(name, theirs, ours, f"{dim} coordinate", whose, dim)
        return value.isel({dim: where})
    if isinstance(value, (pd.Series, pd.DataFrame)) and value.ndim > axis:
        theirs = value.axes[axis]
        if _is_default(theirs) or theirs.equals(ours):
            return value
        where = _order(theirs, ours)
        if where is not None:
            return value.iloc[where] if axis == 0 else value.iloc[:, where]
        if not _is_default(ours):
            _refuse(name, theirs, ours, "index" if axis == 0 else "column index", whose, dim)
    return value
