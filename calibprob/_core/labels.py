"""Group labels and row labels: one definition of "missing", of "the same label", and of alignment.

Every ``groups=`` argument is read by :func:`calibprob._core.validation.check_groups`, which
calls these three rules, so that no entry point decides them on its own:

* **missing** (:func:`missing_labels`): ``None``, NaN, pandas' ``NA`` (nullable string and
  Categorical columns), ``NaT``; in data read from files also an empty or whitespace-only cell
  (pandas reads a blank text cell as NaN, but a quoted one as ``""``);
* **the same label** (:func:`check_label_types`): labels are compared by value *and* type, never
  by their text; a mix such as the integer ``1`` and the string ``"1"``, which print the same
  and would silently become one group wherever labels meet text (a results file, a plot, a
  ranking), is refused, naming the colliding values;
* **alignment** (:func:`aligned_values`): an argument that carries its own row labels (a
  DataArray along ``obs`` with an ``obs`` coordinate, a pandas Series with a non-default index) is
  put in the prediction's row order by those labels, or refused when they do not match; a plain
  array is read by position.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

__all__ = ["missing_labels", "check_label_types", "aligned_values"]


def missing_labels(values: np.ndarray, *, blank_is_missing: bool = False) -> np.ndarray:
    """Boolean mask of the missing labels in a 1-D array (see the module's definition)."""
    values = np.asarray(values)
    if values.dtype.kind == "f":
        return np.isnan(values)
    if values.dtype.kind in "mM":
        return np.isnat(values)
    if values.dtype.kind in "US":
        return np.char.strip(values.astype(str)) == "" if blank_is_missing else np.zeros(values.shape, bool)
    if values.dtype.kind != "O":
        return np.zeros(values.shape, bool)
    out = np.asarray(pd.isna(values), dtype=bool)
    if blank_is_missing:
        out |= np.array([isinstance(v, str) and not v.strip() for v in values], dtype=bool)
    return out


def check_label_types(values: np.ndarray, name: str) -> None:
    """Refuse labels of different types that print the same (``1`` and ``"1"``): they would merge as text."""
    values = np.asarray(values)
    if values.dtype.kind != "O" or values.size == 0:
        return
    seen: dict[str, set] = {}
    for v in values:
        # numbers compare by value (1 == 1.0 == True are one label to NumPy and to Python's ==)
        kind = "number" if isinstance(v, (bool, int, float, np.number)) else type(v).__name__
        seen.setdefault(str(v), set()).add(kind)
    clashes = [text for text, kinds in seen.items() if len(kinds) > 1]
    if clashes:
        text = clashes[0]
        kinds = sorted(seen[text])
        raise ValueError(
            f"{name} mixes label types that print the same: {text!r} is both a {kinds[0]} and a {kinds[1]} "
            f"({len(clashes)} such label(s)), and they would merge into one group wherever labels become text. "
            "Convert the labels to one type first, e.g. groups.astype(str) or pandas' .astype('category')."
        )


def aligned_values(arg, pred, n: int, name: str) -> np.ndarray:
    """The values of ``arg`` in the prediction's row order: by label when ``arg`` carries row labels.

    Parameters
    ----------
    arg : xarray.DataArray, pandas.Series or array_like
    pred : xarray.Dataset or None
        The prediction whose ``obs`` coordinate gives the row order (None: by position).
    n : int
        The number of rows.
    name : str
        The parameter name, for messages.
    """
    labels, values = _row_labels(arg)
    if labels is None or pred is None or "obs" not in getattr(pred, "coords", {}):
        return values
    target = np.asarray(pred["obs"].values)
    if labels.shape == target.shape and np.array_equal(labels, target):
        return values
    index = pd.Index(labels)
    if not index.is_unique:
        raise ValueError(
            f"{name}'s row labels repeat (e.g. {index[index.duplicated()][0]!r}); give each row one label, or pass "
            "plain values (e.g. .values) to be read by position."
        )
    pos = index.get_indexer(target)
    if (pos < 0).any() or len(labels) != n:
        j = int(np.argmax(pos < 0)) if (pos < 0).any() else 0
        missing = _plain(target[j]) if (pos < 0).any() else None
        extra = sorted(set(map(str, labels)) - set(map(str, target)))[:1]
        raise ValueError(
            f"{name}'s row labels do not match the prediction's obs coordinate: "
            + (f"the prediction's row {missing!r} has no label in {name}" if missing is not None else "")
            + (f"; {name} has the label {extra[0]!r} the prediction lacks" if extra else "")
            + ". Pass values for the same rows (aligned by label), or plain values (e.g. .values) to be read by "
            "position."
        )
    return values[pos]


def _plain(value):
    """A NumPy scalar as the Python value it holds (so that messages print 'r0', not np.str_('r0'))."""
    return value.item() if isinstance(value, np.generic) else value


def _row_labels(arg) -> tuple[np.ndarray | None, np.ndarray]:
    """``(row labels or None, values)`` of a DataArray (its dimension's coordinate), a Series (its index), or an array."""
    if isinstance(arg, xr.DataArray):
        # xarray aligns dimensions of the same name: a DataArray along the prediction's own "obs" is aligned by
        # its coordinate; one along another dimension (PyMC's obs_id) is read by position, as documented
        if arg.ndim == 1 and arg.dims[0] == "obs" and "obs" in arg.coords:
            return np.asarray(arg[arg.dims[0]].values), np.asarray(arg.values)
        return None, np.asarray(arg.values)
    if isinstance(arg, pd.Series):
        index = arg.index
        default = isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1
        return (None if default else np.asarray(index)), np.asarray(arg.to_numpy())
    return None, np.asarray(arg)
