r"""Saving and loading fitted estimators as netCDF, without pickle.

:meth:`calibprob._base.BaseEstimator.save` writes an estimator — its
constructor parameters and what it learned — to a netCDF-4 (HDF5) file through
``h5netcdf``; :func:`load` restores it. The file is an ``xarray.DataTree``
that any netCDF tool can read (``xarray.open_datatree(path)``, ``ncdump -h``).

Layout (format 1)
-----------------
* root attrs: ``calibprob_format`` (``"1.0"``), ``calibprob_class`` (the class
  name), ``calibprob_version`` (the package version that wrote it);
* ``/params``: the constructor parameters (:meth:`get_params`);
* ``/state``: the fitted attributes — public names ending in ``_`` and the
  private state that prediction needs. Caches and compiled PyTensor functions
  are not written; they are rebuilt on first use after loading.

Inside ``params`` and ``state`` every value is a node whose attribute
``calibprob_type`` says what it is: a variable for a leaf (``ndarray``,
``int``, ``float``, ``bool``, ``str``, ``none``, homogeneous ``list`` /
``tuple`` of scalars, ``bigint``, ``external``, ``ref``), a group for a
container (``dict``, ``list``, ``tuple``, ``estimator`` — a nested calibprob
estimator with its own ``params`` and ``state`` —, ``object`` — a calibprob
helper such as a conformal score —, ``generator``, ``dataset``,
``dataarray``, ``datatree``, ``randomstate``). Dict keys are kept in ``calibprob_key``.
xarray values are stored as themselves; their attributes are written as they
are when netCDF can hold them exactly (strings, numbers) and otherwise as one
JSON string ``calibprob_attrs_json``.

Security
--------
Loading never executes code from the file. There is no pickle anywhere:
:func:`load` checks the HDF5 signature before opening, refuses raw-bytes
variables or attributes (where a pickle would hide), reads only the type
tags above, parses JSON (which cannot run code), and looks classes up by name
in :data:`REGISTRY`, a fixed table of calibprob's own classes — a name that is
not in it is refused, and nothing named in the file is ever imported.

User code
---------
A user's callable (``CallableRegressor(fit_predict=f)``, a callable
``estimator=``) or a non-calibprob model object cannot be saved without
pickle. Its place is written as an ``external`` node (with its name, for the
message), everything fitted around it is saved, and :func:`load` asks for it
back by parameter name: ``calibprob.load(path, fit_predict=f)``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from calibprob import registry as _registry
from calibprob._version import __version__

__all__ = ["save", "load", "FORMAT_VERSION", "HDF5_SIGNATURE", "REGISTRY"]

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

    def __init__(self, path: str, what: str):
        self.path, self.what = path, what


# ===========================================================================
# Writing
# ===========================================================================


def _registered_name(obj) -> str | None:
    cls = type(obj)
    name = cls.__name__
    module = REGISTRY.get(name)
    # the registry names the public module; the class may be defined in one of its submodules
    if module is not None and (cls.__module__ == module or cls.__module__.startswith(module + ".")):
        return name
    return None


def _describe(obj) -> str:
    if inspect.isfunction(obj) or inspect.ismethod(obj) or inspect.isbuiltin(obj):
        mod = getattr(obj, "__module__", None) or "?"
        return f"function {mod}.{getattr(obj, '__qualname__', repr(obj))}"
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__} instance"


def _safe_attr_value(v) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return False
    if isinstance(v, str):
        return True
    if isinstance(v, (int, np.integer)):
        return _INT64[0] <= int(v) <= _INT64[1]
    return isinstance(v, (float, np.floating))


def _json_default(v):
    if isinstance(v, np.ndarray):
        return {"__ndarray__": v.tolist(), "dtype": str(v.dtype), "shape": list(v.shape)}
    if isinstance(v, np.generic):
        return {"__npscalar__": v.item(), "dtype": str(v.dtype)}
    if isinstance(v, tuple):  # pragma: no cover - json turns tuples into lists first
        return list(v)
    raise TypeError(f"attribute value of type {type(v).__name__} cannot be saved")


def _json_hook(d):
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


class _Writer:
    def __init__(self):
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

    def leaf(self, parent: str, name: str, data, tag: str, extra: dict) -> None:
        arr = np.asarray(data)
        dims = []
        for _ in range(arr.ndim):
            dims.append(f"d{self.n_dims}__")
            self.n_dims += 1
        attrs = {"calibprob_type": tag, **extra}
        self.groups[parent]["vars"][name] = xr.Variable(tuple(dims), arr, attrs)

    # -- values -------------------------------------------------------------
    def value(self, parent: str, name: str, label: str, value, extra: dict) -> None:
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

    def plain(self, parent: str, name: str, label: str, value, extra: dict) -> bool:
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

    def container(self, parent: str, name: str, label: str, value, extra: dict) -> bool:
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

    def obj(self, parent: str, name: str, label: str, value, extra: dict) -> None:
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

    def remember(self, value, label: str) -> None:
        self.memo[id(value)] = label
        self.alive.append(value)

    def ndarray(self, parent, name, label, value, extra):
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

    def sequence(self, parent, name, label, value, extra):
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

    def items(self, path, label, items, *, keyed: bool, attr_labels: bool = False, attrs: dict | None = None):
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

    def estimator(self, path, label, est, extra):
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

    def generator(self, path, label, gen, extra):
        bg = gen.bit_generator
        name = type(bg).__name__
        if _BIT_GENERATORS.get(name) is not type(bg):
            raise TypeError(f"cannot save {label}: numpy bit generator {name} is not one of {sorted(_BIT_GENERATORS)}.")
        self.group(path, {"calibprob_type": "generator", "calibprob_class": name, **extra})
        self.items(_join(path, "state"), label, list(bg.state.items()), keyed=True, attrs={"calibprob_type": "dict"})

    def dataset(self, path, ds: xr.Dataset, tag: str, extra):
        ds = ds.copy(deep=False)
        for var in ds.variables.values():
            var.attrs = _pack_attrs(var.attrs)
            var.encoding = {}
        attrs = _pack_attrs(ds.attrs)
        ds.attrs = {**attrs, "calibprob_type": tag, **extra}
        node = self.group(path, {})
        node["ds"] = ds

    def datatree(self, path, tree: xr.DataTree, extra):
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


def _label(label: str, key, keyed: bool, attr_labels: bool) -> str:
    """How a value is named in messages and references: ``a.b`` (attribute), ``a['k']``, ``a[0]``."""
    if attr_labels:
        return f"{label}.{key}" if label else str(key)
    return f"{label}[{key!r}]" if keyed else f"{label}[{key}]"


def _attr_name(label: str) -> str:
    """The last attribute name in a label: ``estimator_.fit_predict`` -> ``fit_predict``."""
    names = re.findall(r"(?:^|\.)([A-Za-z_][A-Za-z0-9_]*)", label)
    return names[-1] if names else label


def _state_items(obj, *, params) -> list:
    """The attributes written as state: all but the parameters and the class's declared transients."""
    skip = set(params) | set(getattr(type(obj), "_transient_attrs", ()))
    return [(k, v) for k, v in vars(obj).items() if k not in skip]


def save(obj, path) -> Path:
    """Write a calibprob estimator to ``path`` as netCDF-4 (see :mod:`calibprob._io`).

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
            f"calibprob._io.REGISTRY lists {type(obj).__name__} in {REGISTRY[type(obj).__name__]} but it is "
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


# ===========================================================================
# Reading
# ===========================================================================


def _check_file(path: Path) -> None:
    if not path.exists():
        raise FileNotFoundError(f"no such file: '{path}'. Pass the path given to estimator.save(path){_near(path)}.")
    if path.is_dir():
        raise IsADirectoryError(f"'{path}' is a directory; pass the .nc file written by save().")
    with open(path, "rb") as fh:
        head = fh.read(8)
    if head != HDF5_SIGNATURE:
        hint = ""
        if head[:3] == b"CDF":
            hint = (
                " It is a netCDF-3 file; calibprob writes netCDF-4. An OnlineQuantileRecalibrator state "
                "saved by to_dataset() loads with OnlineQuantileRecalibrator.from_dataset("
                "xarray.open_dataset(path))."
            )
        elif _PICKLE_MAGIC.match(head) or head[:1] in (b"(", b"]", b"}", b"c"):
            hint = (
                " It looks like a pickle: calibprob never unpickles (unpickling runs code from the "
                "file). Refit, then save with estimator.save(path)."
            )
        raise ValueError(
            f"'{path}' is not a calibprob file: it does not start with the HDF5/netCDF-4 signature "
            f"(first bytes {head!r}).{hint}"
        )


def _near(path: Path) -> str:
    """Where to look instead of a missing file: the ``.nc`` files of its folder, or the folder's absence."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        return f"; the folder '{folder}' does not exist either (the working directory is '{Path.cwd()}')"
    found = sorted(p.name for p in folder.glob("*.nc"))
    if not found:
        return f"; the folder '{folder}' holds no .nc file"
    more = f" and {len(found) - 5} more" if len(found) > 5 else ""
    return f"; .nc files in the folder '{folder}': {', '.join(found[:5])}{more}"


_REFUSE = (
    "which calibprob never writes — a pickled payload, for instance. calibprob never unpickles; "
    "the file was not written by calibprob.save or has been tampered with. Load only files written "
    "by estimator.save(path); if this one was, it has been altered since: refit the estimator and "
    "save it again."
)


def _binary_text(text: str) -> bool:
    """Undecodable bytes (surrogate-escaped), NULs or a pickle header smuggled in as a string."""
    return bool(re.search("[\udc80-\udcff\x00]", text)) or bool(re.match("\x80[\x01-\x05]", text))


def _binary_array(values: np.ndarray) -> bool:
    kind = values.dtype.kind
    if kind in "SVa":
        return True
    if kind == "O":
        return any(not isinstance(v, str) or _binary_text(v) for v in values.ravel())
    if kind == "U":
        return any(_binary_text(str(v)) for v in values.ravel())
    if values.dtype.itemsize == 1 and kind in "iu" and values.size >= 2:
        raw = values.tobytes()  # a pickle stored as bytes-as-numbers: PROTO header ... STOP
        return bool(_PICKLE_MAGIC.match(raw)) and raw.endswith(b".")
    return False


def _check_no_bytes(groups: dict) -> None:
    """Refuse raw bytes anywhere: a pickled payload would hide there (calibprob writes none)."""
    for gpath, ds in groups.items():
        items = [(f"{gpath} attribute {k!r}", v) for k, v in ds.attrs.items()]
        for name, var in ds.variables.items():
            items += [(f"{gpath} variable {name!r} attribute {k!r}", v) for k, v in var.attrs.items()]
            if _binary_array(np.asarray(var.values)):
                raise ValueError(
                    f"refusing to load: {gpath} variable {name!r} holds raw bytes (dtype {var.dtype}), " + _REFUSE
                )
        for where, v in items:
            if (
                isinstance(v, (bytes, np.bytes_, np.void))
                or (isinstance(v, str) and _binary_text(v))
                or (isinstance(v, np.ndarray) and _binary_array(v))
            ):
                raise ValueError(f"refusing to load: {where} holds raw bytes, " + _REFUSE)


def _parse_version(text, path) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)\.(\d+)", str(text))
    if m is None:
        raise ValueError(f"'{path}' has an unreadable calibprob_format {text!r}; it was not written by calibprob.save.")
    return int(m.group(1)), int(m.group(2))


class _Reader:
    def __init__(self, groups: dict, path: Path, objects: dict):
        self.groups = groups
        self.path = path
        self.objects = dict(objects)
        self.used: set[str] = set()
        self.missing: list[tuple[str, str]] = []
        self.by_label: dict[str, object] = {}
        self.pending_rebuild: list = []  # estimators whose derived state is rebuilt once all is read

    def fail(self, where: str, what: str):
        raise ValueError(
            f"'{self.path}' is not a valid calibprob file at {where or '/'}: {what}. It was not written by "
            "calibprob.save or is damaged."
        )

    def children(self, path: str) -> list[tuple[str, object]]:
        """(name, attrs-or-variable) of the direct children (variables and groups) of ``path``."""
        ds = self.groups[path]
        out = [(name, var) for name, var in ds.data_vars.items()] + [(name, var) for name, var in ds.coords.items()]
        prefix = "/" if path == "/" else path + "/"
        for gpath in self.groups:
            if gpath != path and gpath.startswith(prefix) and "/" not in gpath[len(prefix) :]:
                out.append((gpath[len(prefix) :], None))
        return out

    def node_attrs(self, path: str, name: str, var) -> dict:
        if var is not None:
            return var.attrs
        return self.groups[f"{path.rstrip('/')}/{name}"].attrs

    def items(self, path: str, label: str, keyed: bool, attr_labels: bool = False) -> list:
        entries = []
        for name, var in self.children(path):
            attrs = self.node_attrs(path, name, var)
            if "calibprob_index" not in attrs:
                self.fail(f"{path}/{name}", "a node without calibprob_index")
            entries.append((int(attrs["calibprob_index"]), name, var, attrs))
        entries.sort(key=lambda e: e[0])
        if [e[0] for e in entries] != list(range(len(entries))):
            self.fail(path, "item indices are not 0..n-1")
        out = []
        for index, name, var, attrs in entries:
            if keyed:
                try:
                    key = json.loads(str(attrs["calibprob_key"]))
                except (KeyError, ValueError):
                    self.fail(_join(path, name), "a dict item without a valid calibprob_key")
                if isinstance(key, bool) or not isinstance(key, (str, int, float)):
                    self.fail(_join(path, name), f"dict key {key!r} is not a str, int or float")
            else:
                key = index
            out.append((key, self.value(path, name, var, attrs, _label(label, key, keyed, attr_labels))))
        return out

    def value(self, parent: str, name: str, var, attrs: dict, label: str):
        tag = attrs.get("calibprob_type")
        path = f"{parent.rstrip('/')}/{name}"
        if var is not None:
            return self.leaf(path, var, tag, attrs, label)
        if tag == "dict":
            return dict(self.items(path, label, keyed=True))
        if tag in ("list", "tuple"):
            vals = [v for _, v in self.items(path, label, keyed=False)]
            return vals if tag == "list" else tuple(vals)
        if tag == "estimator":
            return self.estimator(path, label)
        if tag == "object":
            return self.obj(path, label)
        if tag == "generator":
            return self.generator(path, label)
        if tag == "randomstate":
            return self.randomstate(path, label)
        if tag in ("dataset", "dataarray"):
            return self.dataset(path, tag)
        if tag == "datatree":
            return self.datatree(path)
        self.fail(path, f"unknown node type {tag!r}")

    def leaf(self, path, var, tag, attrs, label):
        values = var.values
        if tag == "none":
            return None
        if tag == "bool":
            return bool(values)
        if tag == "int":
            return int(values)
        if tag == "bigint":
            text = str(values)
            if not re.fullmatch(r"-?\d{1,2000}", text):
                self.fail(path, f"bigint {text[:40]!r} is not an integer")
            return int(text)
        if tag == "float":
            return float(values)
        if tag == "str":
            return str(values)
        if tag == "ndarray":
            arr = np.array(values)
            return arr[()] if int(attrs.get("calibprob_scalar", 0)) else arr
        if tag in ("list", "tuple"):
            elem = attrs.get("calibprob_elem")
            if elem not in ("float", "str", "bool", "int"):
                self.fail(path, f"unknown list element type {elem!r}")
            vals = [{"float": float, "str": str, "bool": bool, "int": int}[elem](v) for v in np.ravel(values)]
            return vals if tag == "list" else tuple(vals)
        if tag == "ref":
            target = str(values)
            if target not in self.by_label:
                self.fail(path, f"reference to {target!r}, which is not an earlier object")
            return self.by_label[target]
        if tag == "external":
            return self.external(label, str(values))
        self.fail(path, f"unknown value type {tag!r}")

    def external(self, label: str, what: str):
        for key in (label, _attr_name(label)):
            if key in self.objects:
                self.used.add(key)
                obj = self.objects[key]
                self.by_label[label] = obj
                return obj
        self.missing.append((label, what))
        obj = _Unsaved(label, what)
        self.by_label[label] = obj
        return obj

    def _class(self, path: str, name, kind: str = "class"):
        if not isinstance(name, str) or name not in REGISTRY:
            raise ValueError(
                f"'{self.path}' names an unknown {kind} {name!r} at {path}; calibprob.load restores only "
                f"calibprob's own classes ({', '.join(sorted(REGISTRY))}) and never imports code named "
                "in a file."
            )
        return _registered_class(name)

    def estimator(self, path: str, label: str):
        attrs = self.groups[path].attrs
        cls_name = attrs.get("calibprob_class")
        cls = self._class(path, cls_name)
        if not hasattr(cls, "get_params"):
            self.fail(path, f"{cls_name} is not an estimator")
        prefix = label
        obj = cls.__new__(cls)
        self.by_label[label] = obj
        if _join(path, "params") not in self.groups or _join(path, "state") not in self.groups:
            self.fail(path, "an estimator without params/state groups")
        params = dict(self.items(_join(path, "params"), prefix, keyed=True, attr_labels=True))
        valid = set(cls._param_names())
        unknown = sorted(set(params) - valid)
        if unknown:
            raise ValueError(
                f"'{self.path}' holds {cls_name} parameters {unknown} that this calibprob's {cls_name} "
                f"does not take (valid: {sorted(valid)}); it was written by another calibprob version. "
                "Refit with this version and save again."
            )
        try:
            fresh = cls(**params)
        except TypeError as err:
            raise ValueError(f"cannot construct {cls_name} from '{self.path}': {err}") from None
        obj.__dict__.update(fresh.__dict__)
        state = dict(self.items(_join(path, "state"), prefix, keyed=True, attr_labels=True))
        obj.__dict__.update(state)
        self.pending_rebuild.append(obj)
        return obj

    def obj(self, path: str, label: str):
        cls_name = self.groups[path].attrs.get("calibprob_class")
        cls = self._class(path, cls_name)
        obj = cls.__new__(cls)
        self.by_label[label] = obj
        obj.__dict__.update(dict(self.items(_join(path, "state"), label, keyed=True, attr_labels=True)))
        return obj

    def generator(self, path: str, label: str):
        name = self.groups[path].attrs.get("calibprob_class")
        if name not in _BIT_GENERATORS:
            raise ValueError(f"'{self.path}' names an unknown numpy bit generator {name!r} at {path}.")
        bg = _BIT_GENERATORS[name]()
        try:
            bg.state = dict(self.items(_join(path, "state"), label, keyed=True))
        except (TypeError, ValueError, KeyError) as err:
            self.fail(path, f"invalid {name} state ({err})")
        gen = np.random.Generator(bg)
        self.by_label[label] = gen
        return gen

    def randomstate(self, path: str, label: str):
        state = tuple(v for _, v in self.items(_join(path, "state"), label, keyed=False))
        rs = np.random.RandomState()
        try:
            if not state or state[0] != "MT19937":
                raise ValueError("not an MT19937 state")
            rs.set_state(state)
        except (TypeError, ValueError) as err:
            self.fail(path, f"invalid numpy RandomState state ({err})")
        self.by_label[label] = rs
        return rs

    def _plain(self, path: str) -> xr.Dataset:
        ds = self.groups[path].copy()
        for k, var in ds.variables.items():
            var.attrs = _unpack_attrs(var.attrs, f"{path}/{k}")
            var.encoding = {}
        ds.attrs = _unpack_attrs(ds.attrs, path)
        ds.encoding = {}
        return ds

    def dataset(self, path: str, tag: str):
        ds = self._plain(path)
        if tag == "dataset":
            return ds
        name = json.loads(str(self.groups[path].attrs.get("calibprob_dataarray_name", "null")))
        if len(ds.data_vars) != 1:
            self.fail(path, "a DataArray node must hold one variable")
        da = ds[next(iter(ds.data_vars))]
        return da.rename(name)

    def datatree(self, path: str):
        prefix = path + "/"
        nodes = {"/": self._plain(path)}
        for gpath in self.groups:
            if gpath.startswith(prefix):
                nodes["/" + gpath[len(prefix) :]] = self._plain(gpath)
        return xr.DataTree.from_dict(nodes)


def load(path, **objects):
    """Restore an estimator written by :meth:`save <calibprob._base.BaseEstimator.save>`.

    Parameters
    ----------
    path : str or path-like
        A file written by ``estimator.save(path)`` (or by
        ``OnlineQuantileRecalibrator.to_dataset().to_netcdf(path)``).
    **objects
        User objects that were not saved, by parameter name (or full dotted
        path as printed in the error): the function of a
        :class:`~calibprob.conformal.CallableRegressor` (``fit_predict=f``),
        a callable or non-calibprob ``estimator=``. The message of the
        error raised without them says which are needed.

    Returns
    -------
    estimator
        A new instance of the saved class with the saved parameters and fitted
        state; compiled PyTensor functions are rebuilt on first use.

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    ValueError
        Not an HDF5/netCDF-4 file (a pickle included: calibprob never
        unpickles), a netCDF file not written by calibprob, raw bytes in the
        file, a class name outside calibprob's registry, a newer format
        version, or user objects missing from ``objects``.
    TypeError
        ``objects`` holds a name the file has no user object for.

    References
    ----------
    The netCDF-4 format is HDF5 with conventions: Unidata, *NetCDF Users Guide*,
    "NetCDF-4 format" (https://docs.unidata.ucar.edu/nug/). Why pickle is not
    used: the Python documentation of :mod:`pickle` ("The pickle module is not
    secure. Only unpickle data you trust.").

    Examples
    --------
    >>> import numpy as np, calibprob, tempfile, os
    >>> X = np.arange(10.0)[:, None]; y = 2.0 * X[:, 0] + np.sin(X[:, 0])
    >>> ols = calibprob.LinearRegression().fit(X, y)
    >>> path = os.path.join(tempfile.mkdtemp(), "ols.nc")
    >>> _ = ols.save(path)
    >>> back = calibprob.load(path)
    >>> bool(np.array_equal(back.predict_mean_std(X)[1], ols.predict_mean_std(X)[1]))
    True
    """
    path = Path(os.fspath(path))
    _check_file(path)
    groups = _read_groups(path)
    root = groups["/"].attrs
    if "calibprob_format" not in root:
        return _load_plain_recalibrator(groups, path, objects)
    _check_format(root, path)
    reader = _Reader(groups, path, objects)
    obj = reader.estimator("/", "")
    _check_user_objects(reader, obj, root, path, objects)
    for est in reader.pending_rebuild:
        # each class rebuilds its own caches and views (BaseEstimator._rebuild_after_load)
        rebuild = getattr(est, "_rebuild_after_load", None)
        if rebuild is not None:
            rebuild()
    return obj


def _read_groups(path: Path) -> dict[str, xr.Dataset]:
    """Every group of the file, loaded into memory (the file closed), with no raw bytes in it."""
    try:
        raw = xr.open_groups(path, engine="h5netcdf", phony_dims="access")
        groups = {k: v.load() for k, v in raw.items()}
        for v in raw.values():
            v.close()
    except Exception as err:  # h5py/h5netcdf errors on a damaged file
        raise ValueError(f"'{path}' starts like an HDF5 file but netCDF cannot read it: {err}") from None
    _check_no_bytes(groups)
    return groups


def _load_plain_recalibrator(groups: dict[str, xr.Dataset], path: Path, objects: dict):
    """A file without calibprob's format attribute: only ``OnlineQuantileRecalibrator.to_dataset()`` output loads."""
    root = groups["/"]
    if root.attrs.get("estimator") == "OnlineQuantileRecalibrator" and not root.data_vars.keys() - {
        "theta",
        "recalibration",
        "hits",
        "n_updates",
    }:
        if objects:
            raise TypeError(f"unexpected keyword(s) {sorted(objects)}: '{path}' holds no user objects.")
        return _registered_class("OnlineQuantileRecalibrator").from_dataset(root)
    raise ValueError(
        f"'{path}' is a netCDF file but not one written by calibprob's save(): its root has no "
        "'calibprob_format' attribute. calibprob.load reads only files written by estimator.save(path) "
        "(refit the estimator and save it if you have none); to read this file as data, open it with "
        "xarray.open_dataset(path) or xarray.open_datatree(path)."
    )


def _check_format(root, path: Path) -> None:
    """The file's format is one this calibprob reads (not newer), and its root is an estimator.

    A newer format is refused, minor versions included: a newer writer may store state that
    this reader would misread or silently drop, so only an upgrade makes the file safe to load.
    """
    fmt = _parse_version(root["calibprob_format"], path)
    if fmt > _parse_version(FORMAT_VERSION, ""):
        raise ValueError(
            f"'{path}' uses calibprob file format {root['calibprob_format']} (written by calibprob "
            f"{root.get('calibprob_version', '?')}), newer than format {FORMAT_VERSION}, the newest this "
            f"calibprob {__version__} reads. Upgrade calibprob (pip install -U calibprob) to load it."
        )
    if root.get("calibprob_type") != "estimator":
        raise ValueError(
            f"'{path}' has no estimator at its root; it was not written by calibprob.save. Pass a file "
            "written by estimator.save(path)."
        )


def _check_user_objects(reader: _Reader, obj, root, path: Path, objects: dict) -> None:
    """Every user object the file needs was passed, and no keyword names one it does not hold."""
    if reader.missing:
        paths = [p for p, _ in reader.missing]
        names = sorted({_attr_name(p) for p in paths})
        listing = "; ".join(f"{p} ({what})" for p, what in reader.missing)
        call = ", ".join(f"{n}=..." for n in names)
        raise ValueError(
            f"{type(obj).__name__} in '{path}' was saved with user code that a file cannot hold without "
            f"pickle: {listing}. Everything it fitted is saved; pass the object(s) again: "
            f"calibprob.load(path, {call})."
        )
    unused = sorted(set(objects) - reader.used)
    if unused:
        have = json.loads(str(root.get("calibprob_externals", "[]")))
        raise TypeError(
            f"unexpected keyword(s) {unused} for calibprob.load: '{path}' holds user objects at "
            f"{have or 'no path'}; pass each by its parameter name."
        )
