"""Comparison specs: TOML files in ``models/`` parsed into a validated :class:`Spec`.

A spec names data sets, a base model, the calibrators with their options, the
split, repetitions, seed, metrics and confidence levels. Everything is checked
when the spec is loaded, before the first task runs:

* every key is known (an unknown key gets a "did you mean");
* every option has a declared type, range or choice (declared in
  :mod:`calibprob.registry`): booleans must be ``true``/``false`` (never the
  string ``"false"``), integers integers, enums one of their values;
* sizes are capped (``n`` of a synthetic entry, ``repetitions``; see
  :data:`LIMITS`), the message saying how to raise a cap;
* CSV files are read and checked (encoding, byte-order mark, numeric columns,
  missing values, a non-constant target, enough rows for the split), and their
  content hash joins the fingerprint, so an edited file is never served from
  old results;
* data-set names stay distinct once made file-name safe.

Any problem raises :class:`SpecError` naming the key and the fix; no other
exception escapes :func:`parse_spec`.

Example (``models/quickstart.toml``)::

    name = "quickstart"
    datasets = ["boston"]
    repetitions = 3
    seed = 2026
    confidence_levels = [0.5, 0.9, 0.95]

    [split]
    train = 0.6
    calibrate = 0.2
    test = 0.2

    [base]
    kind = "gp"

    [methods.vanilla]
    kind = "base"

Several bases are ``[bases.NAME]`` tables instead of ``[base]``: every method runs on
every base unless it lists ``bases = [...]``, the results gain a ``base`` dimension, and
a GP-only method (one registered with the base kinds it ``serves``) on a base that cannot serve it is refused.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from calibprob import registry
from calibprob._options import (  # re-exported: spec.py is these names' public home
    AnyOf,
    Bool,
    Choice,
    Float,
    Int,
    ListOf,
    SpecError,
    Str,
    _check_keys,
    _short,
    _suggest,
)
from calibprob._validation import describe_unreadable_path

__all__ = [
    "Spec",
    "DatasetSpec",
    "MethodSpec",
    "SpecError",
    "load_spec",
    "parse_spec",
    "LIMITS",
    "BASE_OPTION_TYPES",  # noqa: F822  (a view of calibprob.registry, module __getattr__)
    "METHOD_OPTION_TYPES",  # noqa: F822
    "GP_ONLY_METHODS",  # noqa: F822
    "file_sha256",
]

TOP_KEYS = {
    "name": "a short name for the comparison",
    "description": "free text",
    "datasets": "list of bundled names, or tables {name, path, target} / {name, function, n, noise}",
    "split": "table of fractions: {train, calibrate, test} or {train, test}",
    "standardize": "true to standardise X and y with statistics of the training part",
    "repetitions": "number of random splits",
    "seed": "integer seed of the whole comparison",
    "base": "table {kind = ..., ...options} (one base; kinds in calibprob.registry.BASES)",
    "bases": "tables [bases.NAME] {kind = ..., ...options}: several bases, each run with every method",
    "methods": "table of named calibrators, each {kind = ..., ...options}",
    "metrics": "metric names shown in the printed table",
    "rank_by": "proper score ranking the pipelines of each data set: 'nll' (default) or 'crps'",
    "confidence_levels": "levels of the central intervals scored for coverage and width",
    "levels": "quantile levels stored in each prediction (default 0.01..0.99)",
    "target_transform": "'log' or 'log1p': fit on the transformed target, score on the original scale",
}
#: Values of the top-level ``target_transform`` key (:mod:`calibprob.transforms`).
TARGET_TRANSFORMS = ("log", "log1p")
SPLIT_KEYS = ("train", "calibrate", "test")
_CSV_KEYS = {"path", "target", "features", "exclude", "one_hot", "dropna", "subsample"}
_FUNCTION_KEYS = {"function", "n", "dim", "noise", "design"}
DATASET_KEYS = {"name", "split", "sha256", "groups"} | _CSV_KEYS | _FUNCTION_KEYS
DEFAULT_METRICS = ("ece", "nll", "crps", "std", "rmse", "coverage", "width")
#: Fewest rows any part of a split may get (a score or a calibrator on one point means nothing).
MIN_PART_ROWS = 2

#: Caps on sizes, each raised by the environment variable named in its message. ``n`` is a
#: synthetic entry's design size (the data are allocated at once: 10^8 points of a 2-D function
#: take gigabytes), ``repetitions`` the number of splits per data set, ``gp_train`` the training
#: rows an exact GP base may get (its n x n covariance is allocated several times).
LIMITS = {
    "n": ("CALIBPROB_MAX_N", 1_000_000),
    "repetitions": ("CALIBPROB_MAX_REPETITIONS", 10_000),
    "dim": ("CALIBPROB_MAX_DIM", 1_000),
    "gp_train": ("CALIBPROB_MAX_GP_TRAIN", 20_000),
}


def _limit(name: str) -> int:
    var, default = LIMITS[name]
    raw = os.environ.get(var)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SpecError(f"environment variable {var} must be an integer; got {raw!r}.") from None
    return value


# The option tables of the bases and the method kinds live in calibprob.registry (the one
# source, declared there so that validating a spec does not import the classes); these names
# are views of it, computed on access so a kind registered later is included.
_VIEWS = {
    "BASE_KINDS": lambda: tuple(registry.BASES),
    # (the constructor options of the class-backed bases; `python` takes code, not options)
    "BASE_OPTION_TYPES": lambda: {k: dict(e.options) for k, e in registry.BASES.items() if e.cls is not None},
    "BASE_OPTIONS": lambda: {k: tuple(e.options) for k, e in registry.BASES.items() if e.cls is not None},
    "METHOD_OPTION_TYPES": lambda: {k: dict(e.options) for k, e in registry.METHODS.items()},
    "GP_ONLY_METHODS": lambda: {k: e.serves for k, e in registry.METHODS.items() if e.serves is not None},
}


def _python_label(table: dict) -> dict:
    """A ``kind = "python"`` table with its code named by a description only (other tables unchanged)."""
    if table.get("kind") != "python":
        return table
    from calibprob.compare.user_base import factory_label

    label = table["entry"] if "entry" in table else factory_label(table.get("factory"))
    return {"kind": "python", "label": label}


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(x)}" for k, x in v.items()) + "}"
    return json.dumps(str(v))


def to_toml(data: dict) -> str:
    """TOML text of a spec dict (:meth:`Spec.to_dict`): top-level keys, then one table per entry.

    Enough for what a results file stores (read back with :mod:`tomllib`); not a general writer.
    """
    lines = [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for key, value in data.items():
        if not isinstance(value, dict):
            continue
        nested = key in ("bases", "methods")
        for name, table in value.items() if nested else [(None, value)]:
            header = f"{json.dumps(key)}.{json.dumps(name)}" if nested else json.dumps(key)
            lines += ["", f"[{header}]"] + [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def __getattr__(name):
    """``BASE_KINDS``, ``BASE_OPTION_TYPES``, ``BASE_OPTIONS``, ``METHOD_OPTION_TYPES``, ``GP_ONLY_METHODS``."""
    if name in _VIEWS:
        return _VIEWS[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def file_sha256(path) -> str:
    """SHA-256 of a file's bytes (the content part of the spec fingerprint)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class DatasetSpec:
    """One data set of a spec: bundled (``name``), a CSV (``path``, ``target``) or synthetic (``function``).

    ``sha256`` is the content hash of the data file (CSV or bundled), part of the
    spec's fingerprint. CSV entries may select columns (``features`` or
    ``exclude``), one-hot encode text columns (``one_hot``), drop rows with
    missing values (``dropna``) and keep a seeded random ``subsample`` of rows.
    """

    name: str
    path: str | None = None
    target: str | None = None
    function: str | None = None
    n: int | None = None
    dim: int | None = None
    noise: float = 0.0
    design: str = "uniform"
    split: dict | None = None  # this data set's own split fractions (overrides the spec's [split])
    features: tuple | None = None
    exclude: tuple | None = None
    one_hot: bool | tuple | None = None
    dropna: bool | None = None
    subsample: int | None = None
    sha256: str | None = None
    #: a data column whose labels make the Mondrian groups (calibrators per group)
    groups: str | None = None
    subsample_seed: int | None = field(default=None, compare=True)

    def to_dict(self) -> dict:
        out = {}
        for k, v in self.__dict__.items():
            if v is None or k == "subsample_seed":  # the seed is derived from the spec's seed
                continue
            if k in ("noise", "design") and self.function is None:
                continue
            out[k] = dict(v) if isinstance(v, dict) else list(v) if isinstance(v, tuple) else v
        return out


@dataclass(frozen=True)
class MethodSpec:
    """A named calibrator entry: its ``kind`` and keyword options."""

    name: str
    kind: str
    options: dict = field(default_factory=dict)
    #: names of the ``[bases.*]`` this method runs on; ``None``: every base
    bases: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Spec:
    """A validated comparison spec (see the module docstring for the TOML layout).

    Parameters
    ----------
    name : str
        Short name of the comparison.
    datasets : tuple of DatasetSpec
        Bundled, CSV or synthetic data sets.
    split : dict
        Fractions ``{train, calibrate, test}`` or ``{train, test}``.
    base : dict or None
        The ``[base]`` table (one base): ``kind`` and the base model's options;
        ``None`` when the spec names its bases with ``[bases.NAME]`` tables.
    methods : tuple of MethodSpec
        The named calibrators (``kind`` and options).
    repetitions : int, default 1
        Random splits per data set.
    seed : int, default 0
        Seed of the whole comparison.
    standardize : bool, default True
        Standardise X and y with statistics of the training part.
    metrics : tuple of str
        Rows of the printed table.
    rank_by : {"nll", "crps"}, default "nll"
        Proper score of the ranking (:mod:`calibprob.compare.ranking`); display
        only, so not part of the fingerprint.
    confidence_levels : tuple of float
        Levels of the central intervals scored for coverage and width.
    levels : tuple of float, optional
        Quantile levels stored in each prediction (default 0.01, ..., 0.99).
    target_transform : {"log", "log1p"}, optional
        Fit the base and the calibrators on ``g(y)``; every prediction is
        mapped back (:func:`calibprob.back_transform`) and scored on
        the original scale of ``y``.
    description, source, root : str
        Free text, the TOML text, and the folder relative CSV paths resolve against.
    bases : tuple of (str, dict), optional
        The ``[bases.NAME]`` tables, in spec order: each name and its table
        (``kind`` and options). The results then carry a ``base`` dimension;
        a ``[base]`` spec keeps the one-base layout (no ``base`` dimension).

    References
    ----------
    The comparison-spec reference: :doc:`/spec`.

    Examples
    --------
    >>> from calibprob.compare import parse_spec
    >>> spec = parse_spec({
    ...     "name": "demo",
    ...     "datasets": [{"name": "branin", "function": "branin", "n": 80, "noise": 0.1}],
    ...     "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
    ...     "repetitions": 2,
    ...     "base": {"kind": "ols"},
    ...     "methods": {"vanilla": {"kind": "base"}, "scaled": {"kind": "variance-scaling"}},
    ... })
    >>> spec.name, [m.kind for m in spec.methods]
    ('demo', ['base', 'variance-scaling'])
    >>> parse_spec(spec.to_dict()) == spec
    True
    """

    name: str
    datasets: tuple[DatasetSpec, ...]
    split: dict
    base: dict | None
    methods: tuple[MethodSpec, ...]
    repetitions: int = 1
    seed: int = 0
    standardize: bool = True
    metrics: tuple[str, ...] = DEFAULT_METRICS
    rank_by: str = "nll"
    confidence_levels: tuple[float, ...] = (0.5, 0.8, 0.9, 0.95)
    levels: tuple[float, ...] | None = None
    target_transform: str | None = None
    description: str = ""
    source: str = ""
    root: str = "."
    bases: tuple[tuple[str, dict], ...] | None = None

    def to_dict(self) -> dict:
        """A JSON-able dict that rebuilds the spec with :func:`parse_spec` (used to ship it to Dask workers)."""
        out = {
            "name": self.name,
            "description": self.description,
            "datasets": [d.to_dict() for d in self.datasets],
            "split": dict(self.split),
            "standardize": self.standardize,
            "repetitions": self.repetitions,
            "seed": self.seed,
            "methods": {
                m.name: {"kind": m.kind, **m.options, **({} if m.bases is None else {"bases": list(m.bases)})}
                for m in self.methods
            },
            "metrics": list(self.metrics),
            "rank_by": self.rank_by,
            "confidence_levels": list(self.confidence_levels),
        }
        # a [base] spec's dict (and so its fingerprint) is what it was before [bases.*] existed
        if self.bases is None:
            out["base"] = dict(self.base or {})
        else:
            out["bases"] = {n: dict(t) for n, t in self.bases}
        if self.levels is not None:
            out["levels"] = list(self.levels)
        if self.target_transform is not None:
            out["target_transform"] = self.target_transform
        return out

    @property
    def fingerprint(self) -> str:
        """Hash of everything that changes a task's results; stored in every finished task file.

        The number of repetitions is left out: a task's split depends only on the
        seed, the data set and its repetition index, so raising ``repetitions``
        (or ``calibprob compare --repetitions``) reuses every finished task.
        """
        payload = self.to_dict()
        # a python base by its label (an object's str would hold its address)
        if "bases" in payload:
            payload["bases"] = {n: _python_label(t) for n, t in payload["bases"].items()}
        elif payload.get("base", {}).get("kind") == "python":
            payload["base"] = _python_label(payload["base"])
        payload.pop("description", None)
        payload.pop("metrics", None)  # display only
        payload.pop("rank_by", None)  # display only: the ranking is recomputed from the scores
        payload.pop("repetitions", None)  # tasks are keyed by their own index
        text = json.dumps(payload, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def results_text(self) -> str:
        """The spec as stored in a results file: its TOML text, never naming code to run.

        A spec with a ``kind = "python"`` base is stored as TOML rebuilt from :meth:`to_dict`
        with the base's ``entry`` (or factory object) replaced by a ``label`` that only
        describes it, so reading a results file can never lead to importing user code.
        """
        if not any(t.get("kind") == "python" for _, t in self.base_tables()):
            return self.source or str(self.to_dict())
        data = self.to_dict()
        if "base" in data:
            data["base"] = _python_label(data["base"])
        else:
            data["bases"] = {n: _python_label(t) for n, t in data["bases"].items()}
        return to_toml(data)

    @property
    def dataset_names(self) -> list[str]:
        return [d.name for d in self.datasets]

    @property
    def method_names(self) -> list[str]:
        return [m.name for m in self.methods]

    @property
    def base_names(self) -> list[str] | None:
        """Names of the ``[bases.*]`` tables (the ``base`` coordinate), or ``None`` for a ``[base]`` spec."""
        return None if self.bases is None else [n for n, _ in self.bases]

    def base_tables(self) -> list[tuple[str | None, dict]]:
        """``(name, table)`` of every base; the name is ``None`` for a ``[base]`` spec."""
        return [(None, dict(self.base or {}))] if self.bases is None else [(n, dict(t)) for n, t in self.bases]

    def methods_on(self, base_name: str | None) -> list[MethodSpec]:
        """The methods that run on base ``base_name`` (all of them unless a method lists ``bases``)."""
        return [m for m in self.methods if m.bases is None or base_name in m.bases]


def _check_rows(n: int, split: dict, where: str) -> None:
    """Every part of the split gets at least MIN_PART_ROWS of the n rows."""
    import numpy as np

    from calibprob.datasets.splits import _allocate

    names = [k for k in SPLIT_KEYS if k in split]
    counts = _allocate(n, np.asarray([split[k] for k in names], dtype=float))
    if counts.min() < MIN_PART_ROWS:
        needed = int(math.ceil(MIN_PART_ROWS / min(split.values()) - 1e-9))
        sizes = ", ".join(f"{k} {int(c)}" for k, c in zip(names, counts))
        raise SpecError(
            f"{where} has {n} rows, too few for the split ({sizes}): every part needs at least "
            f"{MIN_PART_ROWS}. Use at least {needed} rows or larger fractions."
        )


def _check_gp_size(n: int, split: dict, base_kind: str, where: str) -> None:
    if base_kind != "gp":
        return
    cap = _limit("gp_train")
    n_train = int(round(n * split["train"]))
    if n_train > cap:
        var = LIMITS["gp_train"][0]
        raise SpecError(
            f"{where}: {n_train} training rows for an exact GP base (its {n_train} x {n_train} "
            f"covariance needs about {3 * 8 * n_train**2 / 2**30:.0f} GiB) exceed the cap of {cap}. "
            f'Use kind = "sparse-gp", a subsample = ... of rows, or raise the cap with {var}=N.'
        )


def _capped(name: str, value: int, where: str) -> int:
    cap = _limit(name)
    if value > cap:
        var = LIMITS[name][0]
        raise SpecError(
            f"{where} = {value} exceeds the cap of {cap} (set to refuse runs that would exhaust "
            f"memory or time before they start). Raise it with the environment variable {var}, "
            f"e.g. {var}={value}."
        )
    return value


def _bundled_sha256(name: str) -> str:
    from importlib import resources

    from calibprob.datasets.loaders import _resolve

    ref = resources.files("calibprob.datasets").joinpath("data", _resolve(name).file)
    return hashlib.sha256(ref.read_bytes()).hexdigest()


def _check_sha(entry: dict, actual: str, where: str, what: str) -> None:
    if "sha256" in entry:
        Str().check(entry["sha256"], f"{where}.sha256")
        if entry["sha256"] != actual:
            raise SpecError(
                f"{where}.sha256 = {entry['sha256']!r} does not match the content hash of {what} "
                f"({actual}): the file changed. Update the key or remove it."
            )


def _check_name(name, where: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise SpecError(f"{where} must be a non-empty string (used as the dataset coordinate); got {_short(name)}.")
    return name


def _parse_datasets(
    value, root: Path, split: dict, seed: int, base_kind: str, target_transform: str | None = None
) -> tuple[DatasetSpec, ...]:
    from calibprob.datasets import available_datasets

    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise SpecError(
            'datasets must be a non-empty list, e.g. datasets = ["boston"] or '
            '[{name = "mine", path = "data.csv", target = "y"}].'
        )
    bundled = available_datasets()
    out = []
    for i, entry in enumerate(value):
        where = f"datasets[{i}]"
        if isinstance(entry, str):
            out.append(_parse_bundled_name(entry, bundled, split, base_kind, where))
            continue
        if not isinstance(entry, dict):
            raise SpecError(f"{where} must be a bundled name or a table; got {_short(entry)}.")
        name, kind = _dataset_entry_kind(entry, where)
        own_split = _dataset_own_split(entry, kind, where)
        eff_split = own_split or split
        if kind == "csv":
            out.append(
                _parse_csv_entry(entry, name, root, own_split, eff_split, seed, base_kind, where, target_transform)
            )
        elif kind == "function":
            out.append(_parse_function_entry(entry, name, own_split, eff_split, base_kind, where))
        else:
            out.append(_parse_bundled_entry(entry, name, bundled, own_split, eff_split, base_kind, where))
    _check_dataset_names([d.name for d in out])
    return tuple(out)


def _parse_bundled_name(entry: str, bundled, split: dict, base_kind: str, where: str) -> DatasetSpec:
    """A data set given by its bundled name alone (``datasets = ["boston"]``)."""
    if entry not in bundled:
        raise SpecError(
            f"{where} = {entry!r} is not a bundled data set. Valid names: "
            f"{', '.join(sorted(bundled))}; for your own data use "
            '{name = ..., path = "file.csv", target = "column"}.' + _suggest(entry, bundled)
        )
    _check_gp_size(_bundled_rows(entry), split, base_kind, where)
    return DatasetSpec(name=entry, sha256=_bundled_sha256(entry))


def _dataset_entry_kind(entry: dict, where: str) -> tuple[str, str]:
    """The entry's name and kind (``"csv"``, ``"function"`` or ``"bundled"``); keys of another kind are refused."""
    _check_keys(entry, DATASET_KEYS, where)
    if "name" not in entry:
        raise SpecError(f"{where} needs a 'name' key (used as the dataset coordinate).")
    name = _check_name(entry["name"], f"{where}.name")
    if "path" in entry and "function" in entry:
        raise SpecError(f"{where} has both 'path' (a CSV) and 'function' (synthetic); keep one.")
    kind = "csv" if "path" in entry else "function" if "function" in entry else "bundled"
    allowed = {"csv": _CSV_KEYS, "function": _FUNCTION_KEYS, "bundled": set()}[kind] | {"name", "split", "sha256"}
    if kind != "function":
        allowed = allowed | {"groups"}
    for key in entry:
        if key == "groups" and key not in allowed:
            raise SpecError(
                f"{where}.groups names a data column, so it applies to bundled and CSV entries only; a synthetic "
                "entry has no such column."
            )
        if key not in allowed:
            applies = "CSV entries (with 'path')" if key in _CSV_KEYS else "synthetic entries (with 'function')"
            raise SpecError(f"{where}.{key} applies only to {applies}; this entry is a {kind} entry.")
    return name, kind


def _dataset_own_split(entry: dict, kind: str, where: str) -> dict | None:
    """The entry's own ``split`` (row counts allowed for synthetic entries of known size), or None."""
    if "split" not in entry:
        return None
    n_for_counts = entry.get("n")
    if kind == "function" and isinstance(n_for_counts, int) and not isinstance(n_for_counts, bool):
        return _parse_dataset_split(entry["split"], n_for_counts, f"{where}.split")
    return _parse_split(entry["split"], f"{where}.split")


def _parse_function_entry(
    entry: dict, name: str, own_split, eff_split: dict, base_kind: str, where: str
) -> DatasetSpec:
    """A synthetic data set: ``{name, function, n, dim, noise, design}``."""
    from calibprob.datasets import available_functions
    from calibprob.datasets.functions import get_function

    functions = available_functions()
    fn = entry["function"]
    if not isinstance(fn, str) or fn not in functions:
        raise SpecError(
            f"{where}.function = {_short(fn)} is unknown.{_suggest(fn, functions)} Valid: {', '.join(sorted(functions))}."
        )
    if "n" not in entry:
        raise SpecError(f"{where} needs 'n' (the design size), e.g. n = 200.")
    n = Int(4, None).check(entry["n"], f"{where}.n")
    _capped("n", n, f"{where}.n")
    dim = entry.get("dim")
    if dim is not None:
        Int(1, None).check(dim, f"{where}.dim")
        _capped("dim", dim, f"{where}.dim")
    try:
        get_function(fn, dim)
    except (ValueError, TypeError) as err:
        raise SpecError(f"{where}.dim: {err}") from None
    noise = Float(0, None).check(entry.get("noise", 0.0), f"{where}.noise")
    design = Choice(("uniform", "lhs", "sobol")).check(entry.get("design", "uniform"), f"{where}.design")
    _check_rows(n, eff_split, where)
    _check_gp_size(n, eff_split, base_kind, where)
    return DatasetSpec(name=name, function=fn, n=n, dim=dim, noise=float(noise), design=design, split=own_split)


def _parse_bundled_entry(
    entry: dict, name: str, bundled, own_split, eff_split: dict, base_kind: str, where: str
) -> DatasetSpec:
    """A bundled data set given as a table (its own split or a pinned ``sha256``)."""
    if name not in bundled:
        raise SpecError(
            f"{where} = {name!r} is neither bundled nor has 'path' or 'function'.{_suggest(name, bundled)} Give a bundled name "
            "(calibprob.datasets.list_datasets()), or a table with 'path' and 'target'."
        )
    sha = _bundled_sha256(name)
    _check_sha(entry, sha, where, f"the bundled file of {name!r}")
    _check_rows(_bundled_rows(name), eff_split, where)
    _check_gp_size(_bundled_rows(name), eff_split, base_kind, where)
    groups = _parse_groups(entry, _bundled_columns(name), where)
    return DatasetSpec(name=name, split=own_split, sha256=sha, groups=groups)


def _bundled_columns(name: str) -> tuple[list[str], str]:
    """The bundled file's columns (the raw ones, before one-hot encoding) and its target."""
    from importlib import resources

    import pandas as pd

    from calibprob.datasets.loaders import _resolve

    ref = resources.files("calibprob.datasets").joinpath("data", _resolve(name).file)
    with ref.open("r", encoding="utf-8") as fh:
        columns = [str(c) for c in pd.read_csv(fh, nrows=0).columns]
    return columns, columns[-1]


def _parse_groups(entry: dict, columns: tuple[list[str], str], where: str) -> str | None:
    """The entry's ``groups`` column, checked against the file's columns (not the target)."""
    if "groups" not in entry:
        return None
    value = Str().check(entry["groups"], f"{where}.groups")
    names, target = columns
    if value not in names:
        raise SpecError(
            f"{where}.groups = {value!r} is not a column of the data.{_suggest(value, names)} Columns: "
            f"{', '.join(names)}."
        )
    if value == target:
        raise SpecError(f"{where}.groups = {value!r} is the target; name a feature column (e.g. a category).")
    return value


def _check_dataset_names(names: list[str]) -> None:
    """Data set names are unique, also once made file-name safe (they name part and plot files)."""
    from calibprob.runs import safe_name

    if len(set(names)) != len(names):
        raise SpecError(f"dataset names must be unique; got {names}.")
    safe: dict = {}
    for n in names:
        s = safe_name(n)
        if s in safe:
            raise SpecError(
                f"dataset names {safe[s]!r} and {n!r} are the same once made file-name safe ({s!r}, used for "
                "part and plot files); rename one (letters, digits, '-' and '_' are kept as they are)."
            )
        safe[s] = n


def _bundled_rows(name: str) -> int:
    from calibprob.datasets.loaders import _resolve

    return _resolve(name).rows


_TOML_AT = re.compile(r"^(?P<what>.*) \(at line (?P<line>\d+), column (?P<col>\d+)\)$")
_TOML_TABLE = re.compile(r"Cannot declare \((?P<keys>.*)\) twice")


def _first_line(lines: list[str], before: int, pattern: re.Pattern) -> int | None:
    """1-based number of the first of ``lines[:before]`` matching ``pattern``."""
    return next((i + 1 for i, line in enumerate(lines[:before]) if pattern.match(line)), None)


def toml_error_message(err: tomllib.TOMLDecodeError, text: str) -> str:
    """The parser's error as a message that names the key or table, its line and the fix (issue 28).

    Examples
    --------
    >>> import tomllib
    >>> from calibprob.compare.spec import toml_error_message
    >>> text = 'name = "a"\nseed = 1\nname = "b"\n'
    >>> try:
    ...     tomllib.loads(text)
    ... except tomllib.TOMLDecodeError as err:
    ...     print(toml_error_message(err, text)[:58])
    invalid TOML: key 'name' on line 3 is defined twice (first
    """
    m = _TOML_AT.match(str(err))
    if m is None:
        return f"invalid TOML: {err}. Fix the syntax (docs/spec.md shows a complete spec)."
    what, line = m["what"], int(m["line"])
    lines = text.splitlines()
    shown = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    table = _TOML_TABLE.match(what)
    if table is not None:
        name = ".".join(k.strip().strip("'\"") for k in table["keys"].split(",") if k.strip())
        first = _first_line(lines, line - 1, re.compile(rf"^\s*\[+\s*{re.escape(name)}\s*\]"))
        where = f" (first on line {first})" if first else " (also as a key or inline table above)"
        return (
            f"invalid TOML: table [{name}] on line {line} is defined twice{where}. A table is declared "
            "once: merge the two into one [table], or rename one of them."
        )
    if what == "Cannot overwrite a value":
        key = shown.split("=", 1)[0].strip().strip("[]").strip() if shown else "?"
        first = _first_line(lines, line - 1, re.compile(rf"^\s*{re.escape(key)}\s*="))
        where = f" (first on line {first})" if first else " (also set above, e.g. as a table or dotted key)"
        return (
            f"invalid TOML: key {key!r} on line {line} is defined twice{where}. TOML allows each key once per "
            "table: delete one of them, or rename it."
        )
    return (
        f"invalid TOML on line {line}, column {m['col']}: {what[0].lower() + what[1:]}; the line reads "
        f"{shown!r}. Fix its syntax (strings need quotes, lists brackets; docs/spec.md shows a complete spec)."
    )


def _parse_csv_entry(
    entry, name, root, own_split, eff_split, seed, base_kind, where, target_transform=None
) -> DatasetSpec:
    from calibprob.datasets import load_csv

    raw = Str().check(entry["path"], f"{where}.path")
    path = Path(raw)
    path = path if path.is_absolute() else root / path
    problem = describe_unreadable_path(path, "CSV file")
    if problem is not None:
        raise SpecError(f"{where}.path: file {problem} Paths are relative to the spec file's folder.")
    if "target" not in entry:
        raise SpecError(f"{where} reads a CSV and needs 'target' (the column to predict).")
    target = Str().check(entry["target"], f"{where}.target")
    cols = ListOf(Str())
    features = tuple(cols.check(entry["features"], f"{where}.features")) if "features" in entry else None
    exclude = tuple(cols.check(entry["exclude"], f"{where}.exclude")) if "exclude" in entry else None
    if features is not None and exclude is not None:
        raise SpecError(f"{where} has both 'features' (columns to use) and 'exclude' (columns to drop); keep one.")
    one_hot = None
    if "one_hot" in entry:
        one_hot = AnyOf((Bool(), ListOf(Str()))).check(entry["one_hot"], f"{where}.one_hot")
        one_hot = tuple(one_hot) if isinstance(one_hot, list) else one_hot
    dropna = Bool().check(entry["dropna"], f"{where}.dropna") if "dropna" in entry else None
    subsample = None
    if "subsample" in entry:
        subsample = Int(1, None).check(entry["subsample"], f"{where}.subsample")
    try:
        sha = file_sha256(path)
    except OSError as err:
        raise SpecError(
            f"{where}.path: cannot read {str(path)!r} ({err.strerror or err}). Check its permissions."
        ) from None
    _check_sha(entry, sha, where, path.name)
    try:
        data = load_csv(
            path,
            target,
            features=list(features) if features else None,
            exclude=list(exclude) if exclude else None,
            one_hot=list(one_hot) if isinstance(one_hot, tuple) else bool(one_hot),
            dropna=bool(dropna),
            subsample=subsample,
            seed=seed,
            groups=Str().check(entry["groups"], f"{where}.groups") if "groups" in entry else None,
        )
    except (ValueError, TypeError, OSError) as err:
        raise SpecError(f"{where} ({path.name}): {err}") from None
    n = int(data.sizes["obs"])
    _check_rows(n, eff_split, where)
    y = data["y"].values
    if float(y.max() - y.min()) == 0.0:
        raise SpecError(
            f"{where}: the target column {target!r} of {path.name} is constant (every value {float(y[0])!r}); "
            "there is nothing to predict. Choose another target."
        )
    if target_transform is not None:
        _check_transform_domain(y, target_transform, f"{where} ({path.name}, column {target!r})")
    _check_gp_size(n, eff_split, base_kind, where)
    return DatasetSpec(
        name=name,
        path=str(path),
        target=target,
        split=own_split,
        features=features,
        exclude=exclude,
        one_hot=one_hot,
        dropna=dropna,
        subsample=subsample,
        sha256=sha,
        subsample_seed=seed if subsample is not None else None,
        groups=entry.get("groups"),
    )


def _check_transform_domain(y, transform: str, where: str) -> None:
    """Every target value inside the transform's domain, or a SpecError naming the count and the fix."""
    from calibprob.transforms import transform_target

    try:
        transform_target(y, transform, name="y")
    except ValueError as err:
        raise SpecError(f"{where}: {err}") from None


def _parse_dataset_split(value, n: int, where: str) -> dict:
    """A synthetic data set's own split: fractions, or integer counts summing to its ``n``."""
    if (
        isinstance(value, dict)
        and value
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value.values())
    ):
        _check_keys(value, SPLIT_KEYS, where)
        if any(v < 1 for v in value.values()) or sum(value.values()) != n:
            raise SpecError(
                f"{where}: counts {value} must be positive and sum to the data set's n = {n}; "
                "adjust n or the counts (or give fractions)."
            )
        value = {k: v / n for k, v in value.items()}
    return _parse_split(value, where)


def _parse_split(value, where: str = "split") -> dict:
    if not isinstance(value, dict):
        raise SpecError(f"{where} must be a table, e.g. [split] train = 0.6, calibrate = 0.2, test = 0.2.")
    _check_keys(value, SPLIT_KEYS, where)
    if "train" not in value or "test" not in value:
        raise SpecError(f"{where} needs at least 'train' and 'test' fractions (and optionally 'calibrate').")
    for k, v in value.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 < v < 1:
            raise SpecError(f"{where}.{k} must be a fraction in (0, 1); got {_short(v)}.")
    total = sum(value.values())
    if abs(total - 1.0) > 1e-9:
        raise SpecError(
            f"{where} fractions must sum to 1; got {' + '.join(f'{k}={v}' for k, v in value.items())} = "
            f"{total:g}. Adjust them."
        )
    return {k: float(value[k]) for k in SPLIT_KEYS if k in value}


def _parse_base_table(table, where: str, label: str) -> dict:
    """One base table: a registered ``kind`` and its typed options; returns a copy."""
    if not isinstance(table, dict):
        raise SpecError(f"{where} must be a table {{kind = ..., ...options}}; got {_short(table)}.")
    kind = table.get("kind")
    kinds = tuple(registry.BASES)
    if not isinstance(kind, str) or kind not in kinds:
        hint = _suggest(kind, kinds) if isinstance(kind, str) else ""
        raise SpecError(f"{where}.kind must be one of {', '.join(kinds)}; got {_short(kind)}.{hint}")
    options = {k: v for k, v in table.items() if k != "kind"}
    if kind == "python":
        from calibprob.compare.user_base import check_python_table

        check_python_table(options, where)  # imports the user's `entry` (a SpecError if it cannot)
        return dict(table)
    types = registry.BASES[kind].options
    _check_keys(options, types, f"{label} (kind {kind!r})")
    for k, v in options.items():
        types[k].check(v, f"{where}.{k}")
    return dict(table)


def _parse_bases(value) -> tuple[tuple[str, dict], ...]:
    """The ``[bases.NAME]`` tables: one or more, names distinct (also once lower-cased and made file-name safe)."""
    from calibprob.runs import safe_name

    if not isinstance(value, dict) or not value:
        raise SpecError(
            'bases must hold one or more named tables, e.g. [bases.linear] kind = "ols" and [bases.gp] kind = "gp".'
        )
    out: list = []
    seen: dict[str, str] = {}
    for name, table in value.items():
        if not isinstance(name, str) or not name.strip() or "/" in name:
            raise SpecError(
                f"base names must be non-empty strings without '/' (pipelines are labelled "
                f"'base/calibrator'); got {_short(name)}. Rename [bases.{name}]."
            )
        key = safe_name(name).lower()
        if key in seen:
            raise SpecError(
                f"duplicate base names: [bases.{seen[key]}] and [bases.{name}] are the same name "
                "once case and characters outside letters, digits, '-' and '_' are ignored; "
                "rename one."
            )
        seen[key] = name
        out.append((name, _parse_base_table(table, f"bases.{name}", f"[bases.{name}]")))
    return tuple(out)


def _check_loo_bases(m: MethodSpec, tables) -> None:
    """``calibration_data = "loo"`` needs bases that give a training-part leave-one-out predictive."""
    for name, table in tables:
        if (m.bases is None or name in m.bases) and table["kind"] not in registry.LOO_BASES:
            where = "[base]" if name is None else f"[bases.{name}]"
            raise SpecError(
                f"methods.{m.name}.calibration_data = 'loo' needs a base with a leave-one-out predictive "
                f"(kind {', '.join(repr(k) for k in registry.LOO_BASES)}), but would run on {where} of kind "
                f"{table['kind']!r}; list its bases (bases = [...]) or drop calibration_data."
            )


def _check_method_bases(methods, tables) -> tuple[MethodSpec, ...]:
    """Each method's ``bases`` names existing bases, and no GP-only method lands on a base it cannot serve."""
    names = [n for n, _ in tables]
    for m in methods:
        if m.bases is not None:
            for b in m.bases:
                if b not in names:
                    raise SpecError(
                        f"methods.{m.name}.bases names {b!r}, which is not a base of this spec.{_suggest(b, names)} "
                        f"Bases: {', '.join(names)}; name one of them."
                    )
            if len(set(m.bases)) != len(m.bases):
                raise SpecError(f"methods.{m.name}.bases lists a base twice: {list(m.bases)}; list each once.")
        if m.options.get("calibration_data") == "loo" and "calibration_data" in registry.METHODS[m.kind].runner_options:
            _check_loo_bases(m, tables)
        serve = registry.METHODS[m.kind].serves
        if serve is None:
            continue
        for name, table in tables:
            if (m.bases is None or name in m.bases) and table["kind"] not in serve:
                where = "[base]" if name is None else f"[bases.{name}]"
                able = ", ".join(repr(n) for n, t in tables if t["kind"] in serve) or repr("a-gp-base")
                fix = (
                    "use a base of kind " + " or ".join(repr(k) for k in serve)
                    if name is None
                    else f"list the bases it runs on, e.g. bases = [{able}]"
                )
                raise SpecError(
                    f"methods.{m.name} (kind {m.kind!r}) needs a base of kind {' or '.join(repr(k) for k in serve)}, "
                    f"but would run on {where} of kind {table['kind']!r}; {fix}."
                )
    return methods


def _parse_method_bases(entry: dict, name: str, named_bases: bool) -> tuple[str, ...] | None:
    if "bases" not in entry:
        return None
    if not named_bases:
        raise SpecError(
            f"methods.{name}.bases applies only to specs with [bases.NAME] tables; this "
            "spec has one [base]. Remove the key or name the bases."
        )
    return tuple(ListOf(Str()).check(entry["bases"], f"methods.{name}.bases"))


def _parse_methods(value, named_bases: bool = False) -> tuple[MethodSpec, ...]:
    """The ``[methods.NAME]`` tables: each a registered kind with its typed options."""
    if not isinstance(value, dict) or not value:
        raise SpecError('methods must be a table of named entries, e.g. [methods.vanilla] kind = "base".')
    out = []
    for name, entry in value.items():
        if not isinstance(name, str) or not name.strip():
            raise SpecError(f"method names must be non-empty strings; got {_short(name)}.")
        if not isinstance(entry, dict) or "kind" not in entry:
            raise SpecError(f"methods.{name} must be a table with a 'kind' key.")
        kind = entry["kind"]
        if not isinstance(kind, str) or kind not in registry.METHODS:
            raise SpecError(
                f"methods.{name}.kind = {_short(kind)} is unknown.{_suggest(kind, registry.METHODS)} Valid kinds: "
                f"{', '.join(sorted(registry.METHODS))}."
            )
        options = {k: v for k, v in entry.items() if k not in ("kind", "bases")}
        bases = _parse_method_bases(entry, name, named_bases)
        types = registry.METHODS[kind].options
        _check_keys(options, types, f"methods.{name} (kind {kind!r})")
        for k, v in options.items():
            types[k].check(v, f"methods.{name}.{k}")
        out.append(MethodSpec(name=name, kind=kind, options=options, bases=bases))
    return tuple(out)


def parse_spec(data: dict, *, source: str = "", root: str | Path = ".") -> Spec:
    """Validate a spec given as a dict (the parsed TOML).

    Parameters
    ----------
    data : dict
        The parsed TOML (keys as in :doc:`/spec`).
    source : str, optional
        The TOML text, kept for the results file.
    root : str or Path, default "."
        Folder that relative CSV paths are resolved against.

    Returns
    -------
    Spec

    Raises
    ------
    SpecError
        Naming the offending key and the fix; no other exception escapes.

    References
    ----------
    The comparison-spec reference: :doc:`/spec`.

    Examples
    --------
    >>> from calibprob.compare import parse_spec
    >>> spec = parse_spec({
    ...     "name": "demo",
    ...     "datasets": [{"name": "branin", "function": "branin", "n": 80, "noise": 0.1}],
    ...     "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
    ...     "repetitions": 2,
    ...     "base": {"kind": "ols"},
    ...     "methods": {"vanilla": {"kind": "base"}, "scaled": {"kind": "variance-scaling"}},
    ... })
    >>> spec.repetitions, spec.split["calibrate"]
    (2, 0.25)
    """
    try:
        return _parse_spec(data, source=source, root=root)
    except SpecError:
        raise
    except (ValueError, TypeError, OverflowError, KeyError, RecursionError) as err:
        # A check above missed a case: still a spec problem, never a traceback.
        raise SpecError(f"the spec could not be read: {type(err).__name__}: {err}") from None


def _parse_spec(data, *, source, root) -> Spec:
    _check_top_level(data)
    root = Path(root)
    name = Str().check(data["name"], "name")
    description = Str().check(data.get("description", ""), "description")
    base, bases = None, None
    tables: list[tuple[str | None, dict]]
    if "base" in data:
        base = _parse_base_table(data["base"], "base", "[base]")
        tables = [(None, base)]
    else:
        bases = _parse_bases(data["bases"])
        tables = list(bases)
    # the exact-GP size cap applies when any base is an exact GP
    base_kind = "gp" if any(t["kind"] == "gp" for _, t in tables) else tables[0][1]["kind"]
    reps = data.get("repetitions", 1)
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
        raise SpecError(f"repetitions must be a positive integer; got {_short(reps)}.")
    _capped("repetitions", reps, "repetitions")
    seed = Int(0, 2**63 - 1).check(data.get("seed", 0), "seed")
    from calibprob.compare.ranking import RANK_SCORES

    rank_by = Choice(RANK_SCORES).check(data.get("rank_by", "nll"), "rank_by")
    standardize = Bool().check(data.get("standardize", True), "standardize")
    target_transform = None
    if "target_transform" in data:
        target_transform = Choice(TARGET_TRANSFORMS).check(data["target_transform"], "target_transform")
    split = _parse_split(data["split"])
    return Spec(
        name=name,
        description=description,
        datasets=_parse_datasets(data["datasets"], root, split, seed, base_kind, target_transform),
        split=split,
        base=base,
        bases=bases,
        methods=_check_method_bases(_parse_methods(data["methods"], bases is not None), tables),
        repetitions=reps,
        seed=seed,
        standardize=standardize,
        metrics=_parse_metrics(data.get("metrics", list(DEFAULT_METRICS))),
        rank_by=rank_by,
        confidence_levels=_parse_confidence_levels(data.get("confidence_levels", [0.5, 0.8, 0.9, 0.95])),
        levels=_parse_quantile_levels(data.get("levels")),
        target_transform=target_transform,
        source=source,
        root=str(root),
    )


def _check_top_level(data) -> None:
    """The spec is a table with the required keys, no unknown ones, and one of ``[base]`` / ``[bases.NAME]``."""
    if not isinstance(data, dict):
        raise SpecError("a spec must be a TOML table at the top level.")
    _check_keys(data, TOP_KEYS, "the spec's top level")
    for key in ("name", "datasets", "split", "methods"):
        if key not in data:
            raise SpecError(f"the spec needs a {key!r} key: {TOP_KEYS[key]}.")
    if "base" in data and "bases" in data:
        raise SpecError(
            "the spec has both [base] (one base) and [bases.NAME] tables (several); keep one: "
            "move the [base] table to [bases.NAME]."
        )
    if "base" not in data and "bases" not in data:
        raise SpecError(f"the spec needs a 'base' key: {TOP_KEYS['base']}; or several [bases.NAME] tables.")


def _parse_metrics(metrics) -> tuple[str, ...]:
    from calibprob.metrics import METRIC_NAMES

    if not isinstance(metrics, list) or not metrics:
        raise SpecError(
            f'metrics must be a non-empty list of metric names, e.g. metrics = ["ece", "nll"]; got {_short(metrics)}.'
        )
    for m in metrics:
        if not isinstance(m, str) or m not in METRIC_NAMES:
            raise SpecError(
                f"metrics: {_short(m)} is not a metric.{_suggest(m, METRIC_NAMES)} Valid: {', '.join(METRIC_NAMES)}."
            )
    return tuple(metrics)


def _parse_confidence_levels(conf) -> tuple[float, ...]:
    if not isinstance(conf, list) or not conf:
        raise SpecError(
            f"confidence_levels must be a non-empty list of levels in (0, 1), e.g. [0.5, 0.9]; got {_short(conf)}."
        )
    for c in conf:
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 < c < 1:
            raise SpecError(f"confidence_levels must be in (0, 1); got {_short(c)}. Use e.g. 0.9, not 90.")
    if len(set(conf)) != len(conf):
        raise SpecError(f"confidence_levels must be distinct; got {conf}.")
    return tuple(float(c) for c in conf)


def _parse_quantile_levels(levels) -> tuple[float, ...] | None:
    """The spec's ``levels`` (quantile levels of every prediction), or None for the default grid."""
    if levels is None:
        return None
    from calibprob._validation import check_levels

    if not isinstance(levels, list) or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in levels):
        raise SpecError(f"levels must be a list of numbers in (0, 1); got {_short(levels)}.")
    try:
        out = tuple(float(v) for v in check_levels(levels, "levels"))
    except (ValueError, TypeError) as err:
        raise SpecError(str(err)) from None
    if len(out) < 2:
        raise SpecError(f"levels must hold at least two quantile levels; got {list(out)}.")
    return out


def load_spec(path: str | Path) -> Spec:
    """Read and validate a TOML spec file.

    Parameters
    ----------
    path : str or Path
        The ``.toml`` file. Relative CSV paths inside it are resolved against its folder.

    Returns
    -------
    Spec

    References
    ----------
    The comparison-spec reference: :doc:`/spec`.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from calibprob.compare import load_spec
    >>> toml = '''
    ... name = "ols-on-boston"
    ... datasets = ["boston"]
    ... [split]
    ... train = 0.8
    ... test = 0.2
    ... [base]
    ... kind = "ols"
    ... [methods.vanilla]
    ... kind = "base"
    ... '''
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "spec.toml"
    ...     _ = path.write_text(toml)
    ...     spec = load_spec(path)
    >>> spec.name, spec.split
    ('ols-on-boston', {'train': 0.8, 'test': 0.2})
    """
    path = Path(path)
    problem = describe_unreadable_path(path, "spec file")
    if problem is not None:
        raise SpecError(f"spec file {problem} Specs live in models/, e.g. models/quickstart.toml.")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise SpecError(f"{path}: a spec must be UTF-8 text ({err.reason} at byte {err.start}).") from None
    except OSError as err:
        raise SpecError(f"{path}: cannot read the spec ({err.strerror or err}).") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{path}: {toml_error_message(err, text)}") from None
    return parse_spec(data, source=text, root=path.parent.resolve())
