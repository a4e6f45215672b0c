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

import numpy as np
import pandas as pd
import xarray as xr

__all__ = ["align_to_obs"]


def _obs_index(pred) -> pd.Index | None:
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


def _show(label) -> str:
    return repr(label.item() if isinstance(label, np.generic) else label)


def _first_mismatch(theirs: pd.Index, ours: pd.Index) -> str:
    extra = theirs.difference(ours, sort=False)
    if len(extra):
        return f"{_show(extra[0])} is not an obs label of the prediction"
    missing = ours.difference(theirs, sort=False)
    if len(missing):
        return f"the prediction's obs label {_show(missing[0])} is missing"
    return "it repeats a label"


def _refuse(name: str, theirs: pd.Index, ours: pd.Index, what: str) -> None:
    raise ValueError(
        f"{name}'s {what} does not match the prediction's obs labels: {_first_mismatch(theirs, ours)}. "
        f"Pass {name} with the prediction's rows (e.g. {name}.reindex(...) / .sel(obs=pred.obs)), or pass "
        "plain values (.to_numpy()) to read them by position."
    )


def _order(theirs: pd.Index, ours: pd.Index) -> np.ndarray | None:
    """Positions in ``theirs`` of ``ours``' labels, or None when the two label sets differ."""
    if len(theirs) != len(ours) or not theirs.is_unique:
        return None
    where = theirs.get_indexer(ours)
    return None if (where < 0).any() else where


def align_to_obs(value, pred, name: str):
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
    ours = _obs_index(pred)
    if ours is None:
        return value
    if isinstance(value, xr.DataArray) and "obs" in value.indexes:
        theirs = value.indexes["obs"]
        if theirs.equals(ours):
            return value
        where = _order(theirs, ours)
        if where is None:
            _refuse(name, theirs, ours, "obs coordinate")
        return value.isel(obs=where)
    if isinstance(value, (pd.Series, pd.DataFrame)) and not _is_default(value.index):
        theirs = value.index
        if theirs.equals(ours):
            return value
        where = _order(theirs, ours)
        if where is not None:
            return value.iloc[where]
        if not _is_default(ours):
            _refuse(name, theirs, ours, "index")
    return value
