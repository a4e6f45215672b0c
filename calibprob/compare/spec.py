"""Comparison specs: TOML files in ``models/`` parsed into a validated :class:`Spec`.

A spec names data sets, a base model, the calibrators with their options, the
split, repetitions, seed, metrics and confidence levels. Every key is checked:
an unknown key, an unknown kind, fractions that do not sum to one, a missing CSV
or target column each raise :class:`SpecError` naming the key and the fix.

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
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Spec", "DatasetSpec", "MethodSpec", "SpecError", "load_spec", "parse_spec"]

TOP_KEYS = {
    "name": "a short name for the comparison",
    "description": "free text",
    "datasets": "list of bundled names, or tables {name, path, target} / {name, function, n, noise}",
    "split": "table of fractions: {train, calibrate, test} or {train, test}",
    "standardize": "true to standardise X and y with statistics of the training part",
    "repetitions": "number of random splits",
    "seed": "integer seed of the whole comparison",
    "base": "table {kind = 'gp'|'sparse-gp'|'ols'|'bayesian-ridge', ...options}",
    "methods": "table of named calibrators, each {kind = ..., ...options}",
    "metrics": "metric names shown in the printed table",
    "confidence_levels": "levels of the central intervals scored for coverage and width",
    "levels": "quantile levels stored in each prediction (default 0.01..0.99)",
}
BASE_KINDS = ("gp", "sparse-gp", "ols", "bayesian-ridge")
# Constructor options of each base (random_state comes from the task seed). Kept here, not
# read from the classes, so validating a spec does not import PyMC; a test checks they agree.
_GP_OPTIONS = ("kernel", "p", "mean", "noise", "nugget", "objective", "theta", "optimize", "n_restarts",
               "optimizer", "adam_steps", "learning_rate", "compile_mode")
BASE_OPTIONS = {
    "gp": _GP_OPTIONS,
    "sparse-gp": _GP_OPTIONS + ("n_inducing", "jitter", "inducing_points"),
    "ols": ("fit_intercept",),
    "bayesian-ridge": ("fit_intercept", "max_iter", "tol", "alpha_init", "lambda_init"),
}
SPLIT_KEYS = ("train", "calibrate", "test")
DATASET_KEYS = {"name", "path", "target", "function", "n", "dim", "noise", "design", "split"}
DEFAULT_METRICS = ("ece", "nll", "crps", "std", "rmse", "coverage", "width")


class SpecError(ValueError):
    """A comparison spec that cannot be run; the message names the key and the fix.

    References
    ----------
    The comparison-spec reference: :doc:`/spec`.

    Examples
    --------
    >>> from calibprob.compare import SpecError, parse_spec
    >>> try:
    ...     parse_spec({"name": "x", "datasets": ["boston"], "split": {"train": 0.8, "test": 0.2},
    ...                 "base": {"kind": "gp"}, "methods": {"m": {"kind": "isotonik"}}})
    ... except SpecError as err:
    ...     print("isotonic" in str(err))    # the message suggests the valid kind
    True
    """


@dataclass(frozen=True)
class DatasetSpec:
    """One data set of a spec: bundled (``name``), a CSV (``path``, ``target``) or synthetic (``function``)."""

    name: str
    path: str | None = None
    target: str | None = None
    function: str | None = None
    n: int | None = None
    dim: int | None = None
    noise: float = 0.0
    design: str = "uniform"
    split: dict | None = None  # this data set's own split fractions (overrides the spec's [split])

    def to_dict(self) -> dict:
        return {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class MethodSpec:
    """A named calibrator entry: its ``kind`` and keyword options."""

    name: str
    kind: str
    options: dict = field(default_factory=dict)


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
    base : dict
        The ``[base]`` table: ``kind`` and the base model's options.
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
    confidence_levels : tuple of float
        Levels of the central intervals scored for coverage and width.
    levels : tuple of float, optional
        Quantile levels stored in each prediction (default 0.01, ..., 0.99).
    description, source, root : str
        Free text, the TOML text, and the folder relative CSV paths resolve against.

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
    base: dict
    methods: tuple[MethodSpec, ...]
    repetitions: int = 1
    seed: int = 0
    standardize: bool = True
    metrics: tuple[str, ...] = DEFAULT_METRICS
    confidence_levels: tuple[float, ...] = (0.5, 0.8, 0.9, 0.95)
    levels: tuple[float, ...] | None = None
    description: str = ""
    source: str = ""
    root: str = "."

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
            "base": dict(self.base),
            "methods": {m.name: {"kind": m.kind, **m.options} for m in self.methods},
            "metrics": list(self.metrics),
            "confidence_levels": list(self.confidence_levels),
        }
        if self.levels is not None:
            out["levels"] = list(self.levels)
        return out

    @property
    def fingerprint(self) -> str:
        """Hash of everything that changes a task's results; stored in every finished task file.

        The number of repetitions is left out: a task's split depends only on the
        seed, the data set and its repetition index, so raising ``repetitions``
        (or ``calibprob compare --repetitions``) reuses every finished task.
        """
        payload = self.to_dict()
        payload.pop("description", None)
        payload.pop("metrics", None)  # display only
        payload.pop("repetitions", None)  # tasks are keyed by their own index
        text = json.dumps(payload, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def dataset_names(self) -> list[str]:
        return [d.name for d in self.datasets]

    @property
    def method_names(self) -> list[str]:
        return [m.name for m in self.methods]


def _suggest(key: str, valid) -> str:
    import difflib

    close = difflib.get_close_matches(key, list(valid), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def _check_keys(table: dict, valid, where: str) -> None:
    for key in table:
        if key not in valid:
            raise SpecError(
                f"unknown key {key!r} in {where}.{_suggest(key, valid)} Valid keys: "
                f"{', '.join(sorted(valid))}."
            )


def _parse_datasets(value, root: Path) -> tuple[DatasetSpec, ...]:
    from calibprob.datasets import available_datasets, available_functions

    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise SpecError(
            "datasets must be a non-empty list, e.g. datasets = [\"boston\"] or "
            "[{name = \"mine\", path = \"data.csv\", target = \"y\"}]."
        )
    bundled = available_datasets()
    functions = available_functions()
    out = []
    for i, entry in enumerate(value):
        if isinstance(entry, str):
            if entry not in bundled:
                raise SpecError(
                    f"datasets[{i}] = {entry!r} is not a bundled data set. Valid names: "
                    f"{', '.join(sorted(bundled))}; for your own data use "
                    "{name = ..., path = \"file.csv\", target = \"column\"}."
                )
            out.append(DatasetSpec(name=entry))
            continue
        if not isinstance(entry, dict):
            raise SpecError(f"datasets[{i}] must be a name or a table; got {entry!r}.")
        _check_keys(entry, DATASET_KEYS, f"datasets[{i}]")
        if "name" not in entry:
            raise SpecError(f"datasets[{i}] needs a 'name' key (used as the dataset coordinate).")
        if "path" in entry:
            path = Path(entry["path"])
            path = path if path.is_absolute() else root / path
            if not path.is_file():
                raise SpecError(
                    f"datasets[{i}].path: file {str(path)!r} does not exist. Paths are relative to "
                    "the spec file's folder."
                )
            if "target" not in entry:
                raise SpecError(f"datasets[{i}] reads a CSV and needs 'target' (the column to predict).")
            import csv

            with open(path, newline="") as fh:
                header = next(csv.reader(fh), [])
            if entry["target"] not in header:
                raise SpecError(
                    f"datasets[{i}].target = {entry['target']!r} is not a column of {path.name}; "
                    f"columns: {', '.join(header)}."
                )
            split = None if "split" not in entry else _parse_split(entry["split"], f"datasets[{i}].split")
            out.append(DatasetSpec(name=entry["name"], path=str(path), target=entry["target"], split=split))
        elif "function" in entry:
            if entry["function"] not in functions:
                raise SpecError(
                    f"datasets[{i}].function = {entry['function']!r} is unknown; valid: "
                    f"{', '.join(sorted(functions))}."
                )
            n = entry.get("n")
            if not isinstance(n, int) or n < 4:
                raise SpecError(f"datasets[{i}].n must be an integer >= 4 (the design size); got {n!r}.")
            noise = float(entry.get("noise", 0.0))
            if noise < 0:
                raise SpecError(f"datasets[{i}].noise must be >= 0 (a noise standard deviation); got {noise}.")
            split = None
            if "split" in entry:
                split = _parse_dataset_split(entry["split"], n, f"datasets[{i}].split")
            out.append(
                DatasetSpec(
                    name=entry["name"], function=entry["function"], n=n, dim=entry.get("dim"),
                    noise=noise, design=entry.get("design", "uniform"), split=split,
                )
            )
        else:
            if entry["name"] not in bundled:
                raise SpecError(
                    f"datasets[{i}] = {entry['name']!r} is neither bundled nor has 'path' or 'function'."
                )
            split = None if "split" not in entry else _parse_split(entry["split"], f"datasets[{i}].split")
            out.append(DatasetSpec(name=entry["name"], split=split))
    names = [d.name for d in out]
    if len(set(names)) != len(names):
        raise SpecError(f"dataset names must be unique; got {names}.")
    return tuple(out)


def _parse_dataset_split(value, n: int, where: str) -> dict:
    """A synthetic data set's own split: fractions, or integer counts summing to its ``n``."""
    if isinstance(value, dict) and value and all(isinstance(v, int) and not isinstance(v, bool)
                                                 for v in value.values()):
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
            raise SpecError(f"{where}.{k} must be a fraction in (0, 1); got {v!r}.")
    total = sum(value.values())
    if abs(total - 1.0) > 1e-9:
        raise SpecError(
            f"{where} fractions must sum to 1; got {' + '.join(f'{k}={v}' for k, v in value.items())} = "
            f"{total:g}. Adjust them."
        )
    return {k: float(value[k]) for k in SPLIT_KEYS if k in value}


def _parse_methods(value) -> tuple[MethodSpec, ...]:
    from calibprob.compare.methods import METHOD_KINDS

    if not isinstance(value, dict) or not value:
        raise SpecError(
            "methods must be a table of named entries, e.g. [methods.vanilla] kind = \"base\"."
        )
    out = []
    for name, entry in value.items():
        if not isinstance(entry, dict) or "kind" not in entry:
            raise SpecError(f"methods.{name} must be a table with a 'kind' key.")
        kind = entry["kind"]
        if kind not in METHOD_KINDS:
            raise SpecError(
                f"methods.{name}.kind = {kind!r} is unknown.{_suggest(kind, METHOD_KINDS)} Valid kinds: "
                f"{', '.join(sorted(METHOD_KINDS))}."
            )
        options = {k: v for k, v in entry.items() if k != "kind"}
        allowed = METHOD_KINDS[kind].options
        _check_keys(options, allowed, f"methods.{name} (kind {kind!r})")
        out.append(MethodSpec(name=name, kind=kind, options=options))
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
        Naming the offending key and the fix.

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
    from calibprob.metrics import METRIC_NAMES

    if not isinstance(data, dict):
        raise SpecError("a spec must be a TOML table at the top level.")
    _check_keys(data, TOP_KEYS, "the spec's top level")
    for key in ("name", "datasets", "split", "base", "methods"):
        if key not in data:
            raise SpecError(f"the spec needs a {key!r} key: {TOP_KEYS[key]}.")
    root = Path(root)
    base = data["base"]
    if not isinstance(base, dict) or base.get("kind") not in BASE_KINDS:
        got = base.get("kind") if isinstance(base, dict) else base
        raise SpecError(f"base.kind must be one of {', '.join(BASE_KINDS)}; got {got!r}.")
    _check_keys(base, ("kind",) + BASE_OPTIONS[base["kind"]], f"[base] (kind {base['kind']!r})")
    reps = data.get("repetitions", 1)
    if not isinstance(reps, int) or isinstance(reps, bool) or reps < 1:
        raise SpecError(f"repetitions must be a positive integer; got {reps!r}.")
    seed = data.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise SpecError(f"seed must be a non-negative integer; got {seed!r}.")
    metrics = tuple(data.get("metrics", DEFAULT_METRICS))
    for m in metrics:
        if m not in METRIC_NAMES:
            raise SpecError(
                f"metrics: {m!r} is not a metric.{_suggest(m, METRIC_NAMES)} Valid: {', '.join(METRIC_NAMES)}."
            )
    conf = tuple(float(c) for c in data.get("confidence_levels", (0.5, 0.8, 0.9, 0.95)))
    for c in conf:
        if not 0 < c < 1:
            raise SpecError(f"confidence_levels must be in (0, 1); got {c}. Use e.g. 0.9, not 90.")
    levels = data.get("levels")
    if levels is not None:
        from calibprob._validation import check_levels

        try:
            levels = tuple(float(v) for v in check_levels(levels, "levels"))
        except ValueError as err:
            raise SpecError(str(err)) from None
    standardize = data.get("standardize", True)
    if not isinstance(standardize, bool):
        raise SpecError(f"standardize must be true or false; got {standardize!r}.")
    return Spec(
        name=str(data["name"]),
        description=str(data.get("description", "")),
        datasets=_parse_datasets(data["datasets"], root),
        split=_parse_split(data["split"]),
        base=dict(base),
        methods=_parse_methods(data["methods"]),
        repetitions=reps,
        seed=seed,
        standardize=standardize,
        metrics=metrics,
        confidence_levels=conf,
        levels=levels,
        source=source,
        root=str(root),
    )


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
    if not path.is_file():
        raise SpecError(
            f"spec file {str(path)!r} does not exist. Specs live in models/, e.g. models/quickstart.toml."
        )
    text = path.read_text()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{path}: invalid TOML: {err}") from None
    return parse_spec(data, source=text, root=path.parent.resolve())
