"""The one reader of group labels: what "missing" means, and when two labels are the same.

Every ``groups=`` argument of calibprob (Mondrian calibrators, conformal Bayes, bins,
:func:`calibprob.evaluate`) and every group column a spec reads from a file ends here, through
``calibprob._core.validation.check_groups``, so that they agree on two questions:

* **Missing.** NaN, ``None``, pandas' missing value (``pd.NA`` in a nullable string, integer or
  Categorical column), ``NaT``; and, for data read from a file, an empty or whitespace-only
  cell. A missing label is refused with its row numbers: calibrating the missing rows as a
  group of their own (the old behaviour turned them into a group named ``'nan'``) reports a
  coverage for a group nobody defined.
* **Equality.** Two labels are the same group when they are equal *and of the same kind*
  (integer, float, boolean, text, ...), never because they print the same: the integer ``1``
  and the text ``"1"`` are different labels. A mix of kinds in which two labels would collide
  (same text, or equal values such as ``1`` and ``1.0`` or ``True``) is refused, naming them,
  because every later step (netCDF files, result tables) stores labels as text or compares them
  by value, and would merge them silently.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["label_kind", "missing_mask", "read_labels", "refuse_kind_clash"]


def label_kind(value: Any) -> str:
    """The kind of one label: ``"bool"``, ``"int"``, ``"float"``, ``"text"`` or its type name."""
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float"
    if isinstance(value, (str, np.str_)):
        return "text"
    return type(value).__name__


def _as_object_or_native(values: Any) -> np.ndarray:
    """A 1-D NumPy array of the labels, keeping each label's own type.

    pandas extension columns (nullable strings and integers, Categorical) become object arrays
    whose missing entries are ``pd.NA`` / NaN, which :func:`missing_mask` recognises; a list of
    mixed kinds stays an object array (``np.asarray([1, "1"])`` would turn both into text).
    """
    if isinstance(values, (pd.Series, pd.Index)):
        values = values.array
    if isinstance(values, pd.api.extensions.ExtensionArray):
        return np.asarray(values.astype(object), dtype=object)
    if isinstance(values, np.ndarray):
        return values
    arr = np.asarray(values)
    if arr.ndim == 1 and len({label_kind(v) for v in values}) > 1:
        # mixed kinds: np.asarray would make [1, "1"] text and [True, 1] integers
        return np.asarray(list(values), dtype=object)
    return arr


def missing_mask(values: np.ndarray, *, from_file: bool = False) -> np.ndarray:
    """Where ``values`` hold a missing label (see the module's definition).

    Parameters
    ----------
    values : numpy.ndarray, shape (n,)
    from_file : bool, default False
        The labels were read from a file: an empty or whitespace-only text cell is missing too.
        (In memory, ``""`` is a label a user chose.)
    """
    kind = values.dtype.kind
    if kind in "fc":
        mask = np.isnan(values)
    elif kind in "mM":
        mask = np.isnat(values)
    elif kind == "O":
        mask = np.asarray(pd.isna(values), dtype=bool)
    else:
        mask = np.zeros(values.shape, dtype=bool)
    if from_file and kind in "OU":
        blank = np.array([isinstance(v, str) and not v.strip() for v in values.tolist()], dtype=bool)
        mask = mask | blank
    return mask


def _rows(index: np.ndarray, limit: int = 5) -> str:
    shown = ", ".join(str(int(i)) for i in index[:limit])
    return shown + (f", ... ({index.size} rows)" if index.size > limit else "")


def _refuse_missing(values: np.ndarray, name: str, from_file: bool) -> None:
    missing = missing_mask(values, from_file=from_file)
    if missing.any():
        where = np.flatnonzero(missing)
        spelled = "NaN, None, pandas NA, NaT" + (" or an empty cell" if from_file else "")
        raise ValueError(
            f"{name} has {where.size} missing label(s) ({spelled}) at row index {_rows(where)}. "
            "Give every observation a group, e.g. fill them with a label such as 'unknown' "
            "(series.fillna('unknown')), or drop those rows before calibrating."
        )


def _collisions(items: list) -> list[tuple]:
    """Pairs of distinct labels of different kinds that would become one group (same text or equal)."""
    by_text: dict[str, object] = {}
    by_value: dict[object, object] = {}
    found = []
    for v in dict.fromkeys((label_kind(x), x) for x in items):
        label = v[1]
        text = str(label)
        if text in by_text and label_kind(by_text[text]) != v[0]:
            found.append((by_text[text], label))
        by_text.setdefault(text, label)
        try:
            other = by_value.get(label)
        except TypeError:  # an unhashable label: compared by its text only
            continue
        if other is not None and label_kind(other) != v[0]:
            found.append((other, label))
        by_value.setdefault(label, label)
    return found


def _narrow(values: np.ndarray, name: str) -> np.ndarray:
    """An object array of labels as the narrowest array that keeps them distinct.

    One kind: that kind's dtype (text, int64, bool, float). Several kinds: refused if two labels
    would collide; otherwise their text, which is then one-to-one.
    """
    items = values.tolist()
    kinds = {label_kind(v) for v in items}
    if len(kinds) <= 1:
        kind = next(iter(kinds), "text")
        dtype = {"text": str, "int": np.int64, "bool": bool, "float": float}.get(kind)
        return values if dtype is None else np.asarray(items, dtype=dtype)
    clash = _collisions(items)
    if clash:
        shown = "; ".join(f"{a!r} ({label_kind(a)}) and {b!r} ({label_kind(b)})" for a, b in clash[:3])
        raise ValueError(
            f"{name} mixes label types and some would be merged into one group: {shown}. Labels are compared "
            "by value and type; convert the column to one type first (e.g. groups.astype(str) if they are "
            "the same group, or rename one of them if they are not)."
        )
    return np.asarray([str(v) for v in items], dtype=str)


def read_labels(values: Any, name: str = "groups", *, from_file: bool = False) -> np.ndarray:
    """Group labels as a 1-D NumPy array, missing labels and colliding types refused.

    Parameters
    ----------
    values : array_like, pandas.Series, pandas.Categorical or numpy.ndarray, shape (n,)
        One label per observation (the caller has checked the length and dimensions).
    name : str, default "groups"
        The parameter name used in error messages.
    from_file : bool, default False
        The labels were read from a file: an empty or whitespace-only cell is missing too.

    Returns
    -------
    numpy.ndarray, shape (n,)
        Text labels as a ``str`` array, integers as ``int64``, booleans as ``bool``; a mix of
        kinds with no collision as their text.

    Raises
    ------
    ValueError
        A missing label (its rows named) or two labels of different types that would merge.
    """
    arr = _as_object_or_native(values)
    _refuse_missing(arr, name, from_file)
    if arr.dtype.kind == "O":
        arr = _narrow(arr, name)
    return arr


def refuse_kind_clash(labels: Any, known: Any, name: str = "groups", known_name: str = "calibration") -> None:
    """Refuse new labels that are known labels of another kind (``"1"`` at predict, ``1`` at fit).

    A label never seen is a new group (refused, or pooled / ranked marginally where the caller
    allows it); but a label whose text is a known label's text while its kind differs is the
    same group spelled in another type, and treating it as unseen would silently calibrate it
    with the pooled or marginal rule. The same comparison as within one argument: by value and
    type, never by text.

    Parameters
    ----------
    labels, known : array_like, shape (n,) and (k,)
        The labels given now (read by :func:`read_labels`) and the ones seen when fitting.
    name : str, default "groups"
        The parameter name used in error messages.
    known_name : str, default "calibration"
        Where the known labels come from, in messages.

    Raises
    ------
    ValueError
        Naming the first clashing pair and the fix.
    """
    known_items = np.asarray(known).tolist()
    by_text = {str(k): k for k in known_items}
    by_value: dict[object, object] = {}
    for k in known_items:
        try:
            by_value.setdefault(k, k)
        except TypeError:  # an unhashable label: compared by its text only
            continue
    seen = {(label_kind(k), str(k)) for k in known_items}
    for v in dict.fromkeys(np.asarray(labels).tolist()):
        other = by_text.get(str(v))
        if other is None:
            try:
                other = by_value.get(v)
            except TypeError:
                other = None
        if other is not None and (label_kind(v), str(v)) not in seen:
            raise ValueError(
                f"{name} holds {v!r} ({label_kind(v)}) but {known_name} saw {other!r} ({label_kind(other)}): "
                "labels are compared by value and type, so these are different groups. Pass the labels in "
                f"the type {known_name} used (e.g. groups.astype({type(other).__name__}))."
            )
