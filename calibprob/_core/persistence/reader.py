"""Reading an estimator back (:func:`load`): type tags only, classes by name from the fixed registry."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import xarray as xr

from calibprob._core.deprecation import current_keywords
from calibprob._core.persistence.format import (
    _BIT_GENERATORS,
    FORMAT_VERSION,
    REGISTRY,
    _attr_name,
    _join,
    _label,
    _registered_class,
    _subscripts,
    _unpack_attrs,
    _Unsaved,
)
from calibprob._core.persistence.safety import _check_file, _check_no_bytes, _parse_version
from calibprob._core.persistence.values import SCALAR_TYPES, convert_scalar
from calibprob._version import __version__


class _Reader:
    def __init__(self, groups: dict, path: Path, objects: dict) -> None:
        self.groups = groups
        self.path = path
        self.objects = dict(objects)
        self.used: set[str] = set()
        self.missing: list[tuple[str, str]] = []
        self.by_label: dict[str, object] = {}
        self.pending_rebuild: list = []  # estimators whose derived state is rebuilt once all is read

    def fail(self, where: str, what: str) -> NoReturn:
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

    def node_attrs(self, path: str, name: str, var: Any) -> dict:
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

    def value(self, parent: str, name: str, var: Any, attrs: dict, label: str) -> Any:
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

    def leaf(self, path: Any, var: Any, tag: Any, attrs: Any, label: Any) -> Any:
        values = var.values
        if tag == "none":
            return None
        if tag in ("bool", "int", "float", "str"):  # by the declared type, never by truthiness
            return convert_scalar(values, tag, f"'{self.path}' at {path}")
        if tag == "bigint":
            text = str(values)
            if not re.fullmatch(r"-?\d{1,2000}", text):
                self.fail(path, f"bigint {text[:40]!r} is not an integer")
            return int(text)
        if tag == "ndarray":
            arr = np.array(values)
            return arr[()] if int(attrs.get("calibprob_scalar", 0)) else arr
        if tag in ("list", "tuple"):
            elem = attrs.get("calibprob_elem")
            if elem not in SCALAR_TYPES:
                self.fail(path, f"unknown list element type {elem!r}")
            vals = [convert_scalar(v, elem, f"'{self.path}' at {path}[{i}]") for i, v in enumerate(np.ravel(values))]
            return vals if tag == "list" else tuple(vals)
        if tag == "ref":
            target = str(values)
            if target not in self.by_label:
                self.fail(path, f"reference to {target!r}, which is not an earlier object")
            return self.by_label[target]
        if tag == "external":
            return self.external(label, str(values))
        self.fail(path, f"unknown value type {tag!r}")

    def external(self, label: str, what: str) -> Any:
        for key in (label, _attr_name(label)):
            if key in self.objects:
                self.used.add(key)
                obj = self.objects[key] if key == label else self.element(self.objects[key], key, label, what)
                self.by_label[label] = obj
                return obj
        self.missing.append((label, what))
        obj = _Unsaved(label, what)
        self.by_label[label] = obj
        return obj

    def element(self, value: Any, name: str, label: str, what: str) -> Any:
        """The object at ``label`` inside ``value``, passed as ``name=``: ``models_=[m0, m1]`` gives
        ``models_[1]`` its own ``m1``, as the attribute held them when saved."""
        for key in _subscripts(label):
            try:
                value = value[key]
            except (LookupError, TypeError):
                raise ValueError(
                    f"{name}: the file holds a user object at {label} ({what}), an element of {name}; pass "
                    f"{name}= the whole {name} as it was when saved (a list or dict holding it); got a "
                    f"{type(value).__name__} without the element {key!r}."
                ) from None
        return value

    def _class(self, path: str, name: str, kind: str = "class") -> Any:
        if not isinstance(name, str) or name not in REGISTRY:
            raise ValueError(
                f"'{self.path}' names an unknown {kind} {name!r} at {path}; calibprob.load restores only "
                f"calibprob's own classes ({', '.join(sorted(REGISTRY))}) and never imports code named "
                "in a file."
            )
        return _registered_class(name)

    def _without_removed(self, path: str, cls: type, params: dict) -> dict:
        """``params`` without the parameters a class removed (its ``_REMOVED_PARAMS``: name -> the old default).

        A 0.1.0 file stores every constructor parameter, the removed ones too (``SharpCalibratedGP``'s
        ``base=None``); at their default they meant nothing and are dropped, so the file loads as the new
        form. A file that used a removed form (a value other than the default) is refused naming it.
        """
        removed = getattr(cls, "_REMOVED_PARAMS", {})
        for name in sorted(set(params) & set(removed)):
            value = params.pop(name)
            if value is not removed[name] and value != removed[name]:
                raise ValueError(
                    f"'{self.path}' holds a {cls.__name__} saved with {name}= (at {path or '/'}), a form removed in "
                    "calibprob 0.2.0 (see the CHANGELOG). Refit with this version and save again."
                )
        return params

    def estimator(self, path: str, label: str) -> Any:
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
        # a file of an earlier release may hold a renamed parameter (0.1.0's normalize): its new name, silently
        params = current_keywords(cls.__init__, params)
        params = self._without_removed(path, cls, params)
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

    def obj(self, path: str, label: str) -> Any:
        cls_name = self.groups[path].attrs.get("calibprob_class")
        cls = self._class(path, cls_name)
        obj = cls.__new__(cls)
        self.by_label[label] = obj
        obj.__dict__.update(dict(self.items(_join(path, "state"), label, keyed=True, attr_labels=True)))
        return obj

    def generator(self, path: str, label: str) -> Any:
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

    def randomstate(self, path: str, label: str) -> Any:
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

    def dataset(self, path: str, tag: str) -> Any:
        ds = self._plain(path)
        if tag == "dataset":
            return ds
        name = json.loads(str(self.groups[path].attrs.get("calibprob_dataarray_name", "null")))
        if len(ds.data_vars) != 1:
            self.fail(path, "a DataArray node must hold one variable")
        da = ds[next(iter(ds.data_vars))]
        return da.rename(name)

    def datatree(self, path: str) -> Any:
        prefix = path + "/"
        nodes = {"/": self._plain(path)}
        for gpath in self.groups:
            if gpath.startswith(prefix):
                nodes["/" + gpath[len(prefix) :]] = self._plain(gpath)
        return xr.DataTree.from_dict(nodes)


def load(path: Any, **objects: Any) -> Any:
    """Restore an estimator written by :meth:`save <calibprob._core.estimator.BaseEstimator.save>`.

    Parameters
    ----------
    path : str or path-like
        A file written by ``estimator.save(path)`` (or by
        ``OnlineQuantileRecalibrator.to_dataset().to_netcdf(path)``).
    **objects
        User objects that were not saved, by parameter name (or full dotted
        path as printed in the error): the function of a
        :class:`~calibprob.calibrators.conformal.CallableRegressor` (``fit_predict=f``),
        a callable or non-calibprob ``estimator=``. The message of the
        error raised without them says which are needed. An attribute that held
        a list (or dict) of them is passed whole, as it was when saved
        (``models_=[m0, m1]``): each element takes its own place again.

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


def _load_plain_recalibrator(groups: dict[str, xr.Dataset], path: Path, objects: dict) -> Any:
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


def _check_format(root: Any, path: Path) -> None:
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


def _check_user_objects(reader: _Reader, obj: Any, root: Any, path: Path, objects: dict) -> None:
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
