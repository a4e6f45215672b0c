"""The file format shared by the writer and the reader: constants, the class table, attribute packing."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
from typing import Any

import numpy as np

from calibprob import registry as _registry

#: Format written by :func:`save` ("major.minor"). A reader refuses any newer version (minor ones
#: included: it cannot tell what a newer writer stored), naming both and asking for an upgrade.
FORMAT_VERSION = "1.0"

#: The first 8 bytes of every HDF5 (and so netCDF-4) file.
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"

#: Classes :func:`load` may construct: name -> the module that exports it. Built in code from
#: calibprob's own entries of :mod:`calibprob.registry` (the one source), never from a file and
#: never from a class registered outside calibprob; a class name read from a file that is not
#: a key here is refused.
REGISTRY: dict[str, str] = _registry.builtin_classes()

# Bit generators a saved numpy Generator may use (random_state=np.random.default_rng(...)).
_BIT_GENERATORS = {
    "PCG64": np.random.PCG64,
    "PCG64DXSM": np.random.PCG64DXSM,
    "MT19937": np.random.MT19937,
    "Philox": np.random.Philox,
    "SFC64": np.random.SFC64,
}


_INT64 = (np.iinfo(np.int64).min, np.iinfo(np.int64).max)
_SAFE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_PICKLE_MAGIC = re.compile(rb"\A\x80[\x01-\x05]")


class _Unsaved:
    """Placeholder, during loading, for a user object that was not written."""

    def __init__(self, path: str, what: str) -> None:
        self.path, self.what = path, what


def _registered_name(obj: Any) -> str | None:
    cls = type(obj)
    name = cls.__name__
    module = REGISTRY.get(name)
    # the registry names the public module; the class may be defined in one of its submodules
    if module is not None and (cls.__module__ == module or cls.__module__.startswith(module + ".")):
        return name
    return None


def _describe(obj: Any) -> str:
    if inspect.isfunction(obj) or inspect.ismethod(obj) or inspect.isbuiltin(obj):
        mod = getattr(obj, "__module__", None) or "?"
        return f"function {mod}.{getattr(obj, '__qualname__', repr(obj))}"
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__} instance"


def _safe_attr_value(v: Any) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return False
    if isinstance(v, str):
        return True
    if isinstance(v, (int, np.integer)):
        return _INT64[0] <= int(v) <= _INT64[1]
    return isinstance(v, (float, np.floating))


def _json_default(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return {"__ndarray__": v.tolist(), "dtype": str(v.dtype), "shape": list(v.shape)}
    if isinstance(v, np.generic):
        return {"__npscalar__": v.item(), "dtype": str(v.dtype)}
    if isinstance(v, tuple):  # pragma: no cover - json turns tuples into lists first
        return list(v)
    raise TypeError(f"attribute value of type {type(v).__name__} cannot be saved")


def _json_hook(d: Any) -> Any:
    if "__ndarray__" in d:
        return np.asarray(d["__ndarray__"], dtype=_check_dtype(d["dtype"])).reshape(d["shape"])
    if "__npscalar__" in d:
        return np.dtype(_check_dtype(d["dtype"])).type(d["__npscalar__"])
    return d


def _check_dtype(name: str) -> str:
    # numeric / bool / unicode dtypes only: no object, void or bytes dtype from a file
    dt = np.dtype(str(name))
    if dt.kind not in "biufU":
        raise ValueError(f"dtype {name!r} in a JSON attribute is not allowed")
    return name


def _pack_attrs(attrs: dict) -> dict:
    """xarray attrs as written: natively when exact, else one JSON string."""
    if all(isinstance(k, str) and not k.startswith("calibprob_") and _safe_attr_value(v) for k, v in attrs.items()):
        return dict(attrs)
    try:
        text = json.dumps(attrs, default=_json_default, allow_nan=True)
    except TypeError as err:
        raise TypeError(f"{err}; only strings, numbers, booleans, None, lists, dicts and arrays are saved") from None
    return {"calibprob_attrs_json": text}


def _unpack_attrs(attrs: dict, where: str) -> dict:
    attrs = {k: v for k, v in attrs.items() if not (k.startswith("calibprob_") and k != "calibprob_attrs_json")}
    if "calibprob_attrs_json" in attrs:
        text = attrs.pop("calibprob_attrs_json")
        if not isinstance(text, str):
            raise ValueError(f"{where}: calibprob_attrs_json must be a string")
        attrs.update(json.loads(text, object_hook=_json_hook))
    return attrs


def _registered_class(name: str) -> Any:
    """The class ``name`` of :data:`REGISTRY`, imported from the module the registry names for it.

    The lookup goes through the registry's import paths at load time, so this module
    imports no estimator module (the estimators import it, through ``BaseEstimator.save``).
    """
    cls = getattr(importlib.import_module(REGISTRY[name]), name, None)
    if not isinstance(cls, type) or cls.__name__ != name:  # pragma: no cover - registry is code
        raise ValueError(f"calibprob has no class {name!r} in {REGISTRY[name]} any more.")
    return cls


def _join(parent: str, name: str) -> str:
    return f"{parent.rstrip('/')}/{name}"


def _label(label: str, key: Any, keyed: bool, attr_labels: bool) -> str:
    """How a value is named in messages and references: ``a.b`` (attribute), ``a['k']``, ``a[0]``."""
    if attr_labels:
        return f"{label}.{key}" if label else str(key)
    return f"{label}[{key!r}]" if keyed else f"{label}[{key}]"


def _attr_name(label: str) -> str:
    """The last attribute name in a label: ``estimator_.fit_predict`` -> ``fit_predict``."""
    names = re.findall(r"(?:^|\.)([A-Za-z_][A-Za-z0-9_]*)", label)
    return names[-1] if names else label


def _subscripts(label: str) -> list:
    """The keys and indices after a label's last attribute name: ``a.models_[0]['k']`` -> ``[0, 'k']``.

    A label is a Python expression (:func:`_label` writes ``repr`` of each key), so it is read
    with :mod:`ast`; a key without a literal form (``nan``) gives no subscripts.
    """
    try:
        node = ast.parse(label, mode="eval").body
    except SyntaxError:
        return []
    keys = []
    while isinstance(node, ast.Subscript):
        try:
            keys.append(ast.literal_eval(node.slice))
        except ValueError:
            return []
        node = node.value
    return keys[::-1]


def _state_items(obj: Any, *, params: Any) -> list:
    """The attributes written as state: all but the parameters and the class's declared transients."""
    skip = set(params) | set(getattr(type(obj), "_transient_attrs", ()))
    return [(k, v) for k, v in vars(obj).items() if k not in skip]
