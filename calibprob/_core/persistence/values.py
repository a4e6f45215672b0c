"""Saved scalar values converted by their declared type, never by truthiness.

Every leaf of a saved file carries its type (``calibprob_type``: ``bool``, ``int``, ``float``,
``str``, or a list / tuple of one of them). A file is text that anyone may edit or produce with
another tool, so the stored value is converted by that declared type and refused when it is not
a value of it: ``bool("false")`` is ``True`` in Python (a non-empty string), which would silently
turn a parameter edited to ``'false'`` into ``True``.

=========  ==========================================================================
declared   accepted stored values
=========  ==========================================================================
``bool``   a boolean; the integers 0 and 1; the text ``true`` / ``false`` (any case,
           surrounding spaces ignored)
``int``    an integer (not a boolean); a float with an integral value; the text of an
           integer
``float``  a real number (not a boolean); the text of one (``nan``, ``inf`` included)
``str``    text
=========  ==========================================================================

Anything else is refused with the path, the declared type, the value found and the fix.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

__all__ = ["SCALAR_TYPES", "convert_scalar"]

_INT_TEXT = re.compile(r"\s*[-+]?\d+\s*")
_BOOL_TEXT = {"true": True, "false": False}


def _item(value: Any) -> Any:
    """The Python scalar of a 0-d array or NumPy scalar (bytes decoded as ASCII), else ``value``."""
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            return value
        value = value[()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bytes):
        value = value.decode("ascii", errors="replace")
    return value


def _to_bool(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in _BOOL_TEXT:
        return _BOOL_TEXT[v.strip().lower()]
    return None


def _to_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and np.isfinite(v) and v == int(v):
        return int(v)
    if isinstance(v, str) and _INT_TEXT.fullmatch(v):
        return int(v)
    return None


def _to_float(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


def _to_str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


#: The converter of each declared scalar type: the value, or None when it is not one.
SCALAR_TYPES = {"bool": _to_bool, "int": _to_int, "float": _to_float, "str": _to_str}


def convert_scalar(value: Any, declared: str, where: str) -> Any:
    """``value`` (as stored) converted to the ``declared`` type, or a ``ValueError`` naming all three.

    Parameters
    ----------
    value : scalar or 0-d array
        The stored value.
    declared : {"bool", "int", "float", "str"}
    where : str
        Where the value sits (file and path), for the message.

    Examples
    --------
    >>> convert_scalar(np.asarray("false"), "bool", "params/fit_intercept")
    False
    >>> convert_scalar(np.int64(1), "bool", "params/fit_intercept")
    True
    """
    v = _item(value)
    out = SCALAR_TYPES[declared](v)
    if out is None:
        fix = " (true or false)" if declared == "bool" else ""
        raise ValueError(
            f"{where}: the saved value {v!r} ({type(v).__name__}) is not a {declared}, the type the file "
            f"declares for it. Write a {declared}{fix} there, or save the estimator again with calibprob."
        )
    return out
