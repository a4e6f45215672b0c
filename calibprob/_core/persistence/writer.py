"""Writing an estimator as a netCDF DataTree (:func:`save`); the layout is described in ``calibprob._core.persistence``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from calibprob._core.persistence.format import (
    _BIT_GENERATORS,
    _INT64,
    _SAFE_NAME,
    FORMAT_VERSION,
    REGISTRY,
    _describe,
    _join,
    _label,
    _pack_attrs,
    _registered_name,
    _state_items,
)
from calibprob._version import __version__


class _Writer:
    def __init__(self) -> None:
        self.groups: dict[str, dict] = {}  # path -> {"vars": {...}, "attrs": {...}, "ds": Dataset|None}
        self.memo: dict[int, str] = {}
        self.alive: list = []  # keep memoised objects alive so ids stay unique
        self.n_dims = 0
        self.externals: list[str] = []

    # -- nodes --------------------------------------------------------------
    def group(self, path: str, attrs: dict) -> dict:
        node = {"vars": {}, "attrs": dict(attrs), "ds": None}
        self.groups[path] = node
        return node

    def leaf(self, parent: str, name: str, data: Any, tag: str, extra: dict) -> None:
        arr = np.asarray(data)
        dims = []
        for _ in range(arr.ndim):
            dims.append(f"d{self.n_dims}__")
            self.n_dims += 1
        attrs = {"calibprob_type": tag, **extra}
        self.groups[parent]["vars"][name] = xr.Variable(tuple(dims), arr, attrs)

    # -- values -------------------------------------------------------------
    def value(self, parent: str, name: str, label: str, value: Any, extra: dict) -> None:
        """Write ``value`` as variable or group ``name`` of group ``parent``.

        Tried in order: scalars and arrays (one variable), containers and xarray
        objects (a group), then objects that may be shared (a reference when
        already written, else their own group, else an external description).
        """
        if self.plain(parent, name, label, value, extra):
            return
        if self.container(parent, name, label, value, extra):
            return
        self.obj(parent, name, label, value, extra)

    def plain(self, parent: str, name: str, label: str, value: Any, extra: dict) -> bool:
        """None, bool, NumPy scalar or array, int, float, str as one variable; False for anything else."""
        if value is None:
            self.leaf(parent, name, np.int8(0), "none", extra)
        elif isinstance(value, bool):
            self.leaf(parent, name, np.asarray(value), "bool", extra)
        elif isinstance(value, (np.generic, np.ndarray)):
            self.ndarray(parent, name, label, value, extra)
        elif isinstance(value, int):
            if _INT64[0] <= value <= _INT64[1]:
                self.leaf(parent, name, np.int64(value), "int", extra)
            else:
                self.leaf(parent, name, np.asarray(str(value), dtype=str), "bigint", extra)
        elif isinstance(value, float):
            self.leaf(parent, name, np.float64(value), "float", extra)
        elif isinstance(value, str):
            self.leaf(parent, name, np.asarray(value, dtype=str), "str", extra)
        else:
            return False
        return True

    def container(self, parent: str, name: str, label: str, value: Any, extra: dict) -> bool:
        """list, tuple, dict and xarray objects as a group ``name`` of ``parent``; False for anything else."""
        path = _join(parent, name)
        if type(value) in (list, tuple):
            self.sequence(parent, name, label, value, extra)
        elif type(value) is dict:
            self.group(path, {"calibprob_type": "dict", **extra})
            self.items(path, label, list(value.items()), keyed=True)
        elif isinstance(value, xr.DataTree):
            self.datatree(path, value, extra)
        elif isinstance(value, xr.Dataset):
            self.dataset(path, value, "dataset", extra)
        elif isinstance(value, xr.DataArray):
            ds = value.to_dataset(name="values" if value.name is None else value.name)
            self.dataset(path, ds, "dataarray", {**extra, "calibprob_dataarray_name": json.dumps(value.name)})
        else:
            return False
        return True

    def obj(self, parent: str, name: str, label: str, value: Any, extra: dict) -> None:
        """Objects that may be shared (the same function twice, ``estimator_ is estimator``)."""
        path = _join(parent, name)
        key = id(value)
        if key in self.memo:
            return self.leaf(parent, name, np.asarray(self.memo[key], dtype=str), "ref", extra)
        if isinstance(value, np.random.Generator):
            self.remember(value, label)
            return self.generator(path, label, value, extra)
        if type(value) is np.random.RandomState:
            self.remember(value, label)
            self.group(path, {"calibprob_type": "randomstate", **extra})
            return self.items(
                _join(path, "state"),
                label,
                list(enumerate(value.get_state())),
                keyed=False,
                attrs={"calibprob_type": "tuple"},
            )
        cls_name = _registered_name(value)
        if cls_name is not None and hasattr(value, "get_params"):
            return self.estimator(path, label, value, extra)
        if cls_name is not None:
            self.remember(value, label)
            self.group(path, {"calibprob_type": "object", "calibprob_class": cls_name, **extra})
            return self.items(
                _join(path, "state"),
                label,
                _state_items(value, params=()),
                keyed=True,
                attr_labels=True,
                attrs={"calibprob_type": "dict"},
            )
        mod = type(value).__module__ or ""
        if mod.split(".")[0] in ("calibprob", "pytensor", "pymc", "xarray", "numpy"):
            raise TypeError(
                f"cannot save {label}: a {type(value).__module__}.{type(value).__qualname__} has no netCDF "
                "form in calibprob's format (a cache that should be rebuilt on load?); please report it."
            )
        self.remember(value, label)
        self.externals.append(label)
        return self.leaf(parent, name, np.asarray(_describe(value), dtype=str), "external", extra)

    def remember(self, value: Any, label: str) -> None:
        self.memo[id(value)] = label
        self.alive.append(value)

    def ndarray(self, parent: Any, name: str, label: Any, value: Any, extra: Any) -> None:
        scalar = isinstance(value, np.generic)
        arr = np.asarray(value)
        if arr.dtype.kind == "O":
            if arr.size and all(isinstance(v, str) for v in arr.ravel()):
                arr = arr.astype(str)
            else:
                raise TypeError(f"cannot save {label}: an object array that is not all strings.")
        if arr.dtype.kind not in "biufU":
            raise TypeError(
                f"cannot save {label}: arrays of dtype {arr.dtype} have no exact netCDF form "
                "(real numbers, booleans and strings are saved)."
            )
        self.leaf(parent, name, arr, "ndarray", {**extra, "calibprob_scalar": int(scalar)})

    def sequence(self, parent: Any, name: str, label: Any, value: Any, extra: Any) -> Any:
        kind = "list" if type(value) is list else "tuple"
        for scalar_type, elem, dtype in (
            (float, "float", float),
            (str, "str", str),
            (bool, "bool", bool),
            (int, "int", np.int64),
        ):
            if value and all(type(v) is scalar_type for v in value):
                if elem == "int" and not all(_INT64[0] <= v <= _INT64[1] for v in value):
                    break
                arr = np.asarray(value, dtype=dtype)
                return self.leaf(parent, name, arr, kind, {**extra, "calibprob_elem": elem})
        path = _join(parent, name)
        self.group(path, {"calibprob_type": kind, **extra})
        return self.items(path, label, list(enumerate(value)), keyed=False)

    def items(
        self, path: Any, label: Any, items: Any, *, keyed: bool, attr_labels: bool = False, attrs: dict | None = None
    ) -> None:
        if attrs is not None:
            self.group(path, attrs)
        used = set()
        for index, (key, value) in enumerate(items):
            extra: dict[str, int | str] = {"calibprob_index": index}
            if keyed:
                if isinstance(key, bool) or not isinstance(key, (str, int, float)):
                    raise TypeError(
                        f"cannot save {label or 'the estimator'}: dict key {key!r} is not a str, int or float."
                    )
                extra["calibprob_key"] = json.dumps(key)
                if isinstance(key, str) and _SAFE_NAME.fullmatch(key):
                    base = key
                elif isinstance(key, str) and _SAFE_NAME.fullmatch("private" + key):
                    base = "private" + key  # _state -> private_state (names cannot start with _)
                else:
                    base = f"item{index}"
            else:
                base = f"item{index}"
            name = base
            while name in used:
                name = f"{base}_{index}"
            used.add(name)
            self.value(path, name, _label(label, key, keyed, attr_labels), value, extra)

    def estimator(self, path: Any, label: Any, est: Any, extra: Any) -> None:
        self.remember(est, label)
        cls_name = _registered_name(est)
        self.group(path, {"calibprob_type": "estimator", "calibprob_class": cls_name, **extra})
        params = est.get_params()
        self.items(
            _join(path, "params"),
            label,
            list(params.items()),
            keyed=True,
            attr_labels=True,
            attrs={"calibprob_type": "dict"},
        )
        self.items(
            _join(path, "state"),
            label,
            _state_items(est, params=params),
            keyed=True,
            attr_labels=True,
            attrs={"calibprob_type": "dict"},
        )

    def generator(self, path: Any, label: Any, gen: Any, extra: Any) -> None:
        bg = gen.bit_generator
        name = type(bg).__name__
        if _BIT_GENERATORS.get(name) is not type(bg):
            raise TypeError(f"cannot save {label}: numpy bit generator {name} is not one of {sorted(_BIT_GENERATORS)}.")
        self.group(path, {"calibprob_type": "generator", "calibprob_class": name, **extra})
        self.items(_join(path, "state"), label, list(bg.state.items()), keyed=True, attrs={"calibprob_type": "dict"})

    def dataset(self, path: Any, ds: xr.Dataset, tag: str, extra: Any) -> None:
        ds = ds.copy(deep=False)
        for var in ds.variables.values():
            var.attrs = _pack_attrs(var.attrs)
            var.encoding = {}
        attrs = _pack_attrs(ds.attrs)
        ds.attrs = {**attrs, "calibprob_type": tag, **extra}
        node = self.group(path, {})
        node["ds"] = ds

    def datatree(self, path: Any, tree: xr.DataTree, extra: Any) -> None:
        for node in tree.subtree:
            rel = node.relative_to(tree)
            sub = path if rel == "." else f"{path}/{rel}"
            ds = node.to_dataset(inherit=False)
            self.dataset(sub, ds, "datatree" if rel == "." else "datatree_node", extra if rel == "." else {})

    # -- output -------------------------------------------------------------
    def to_tree(self) -> xr.DataTree:
        out = {}
        for path, node in self.groups.items():
            if node["ds"] is not None:
                out[path] = node["ds"]
            else:
                out[path] = xr.Dataset(node["vars"], attrs=node["attrs"])
        return xr.DataTree.from_dict(out)


def save(obj: Any, path: Any) -> Path:
    """Write a calibprob estimator to ``path`` as netCDF-4 (see ``calibprob._core.persistence``).

    Parameters
    ----------
    obj : calibprob estimator
        Fitted or not; any class in :data:`REGISTRY`.
    path : str or path-like
        Destination (overwritten). ``.nc`` is the usual suffix.

    Returns
    -------
    pathlib.Path
        The path written.

    Raises
    ------
    TypeError
        ``obj`` is not one of calibprob's classes (a subclass included: loading
        constructs classes only from calibprob's fixed registry), or holds a
        value with no netCDF form (the message names the attribute).
    """
    cls_name = _registered_name(obj)
    if (
        cls_name is None
        and REGISTRY.get(type(obj).__name__) is not None
        and type(obj).__module__.startswith("calibprob.")
    ):  # pragma: no cover - guards the table against a moved class
        raise TypeError(
            f"calibprob._core.persistence.REGISTRY lists {type(obj).__name__} in {REGISTRY[type(obj).__name__]} but it is "
            f"defined in {type(obj).__module__}; update the registry."
        )
    if cls_name is None or not hasattr(obj, "get_params"):
        raise TypeError(
            f"save() writes calibprob's own estimators only; got {type(obj).__module__}."
            f"{type(obj).__qualname__}. calibprob.load constructs classes from a fixed registry "
            f"(no code is imported from a file), so subclasses cannot be restored: save an instance of "
            f"one of {sorted(k for k in REGISTRY if 'Score' not in k)} instead."
        )
    path = Path(os.fspath(path))
    w = _Writer()
    w.estimator("/", "", obj, {})
    tree = w.to_tree()
    tree.attrs.update(
        {
            "calibprob_format": FORMAT_VERSION,
            "calibprob_version": str(__version__),
            "calibprob_externals": json.dumps(w.externals),
        }
    )
    tree.to_netcdf(path, engine="h5netcdf", mode="w")
    return path
