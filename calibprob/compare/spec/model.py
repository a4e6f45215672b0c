"""The comparison spec's model: :class:`Spec`, its data-set and method entries, the size caps, the TOML writer.

Reading a spec into these classes is :mod:`calibprob.compare.spec.parsing` (the top level, the bases, the
methods) and :mod:`calibprob.compare.spec.data` (the data sets); :mod:`calibprob.compare.spec` re-exports
the public names.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass, field

from calibprob import registry
from calibprob._core.options import SpecError
from calibprob.bases.user import factory_label

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
    "confidence_level": "levels of the central intervals scored for coverage and width (0.1: confidence_levels)",
    "levels": "quantile levels stored in each prediction (default 0.01..0.99)",
    "target_transform": "'log' or 'log1p': fit on the transformed target, score on the original scale",
    "max_method_minutes": "minutes a method's estimated n x n work on an exact GP may take before it is refused",
}

#: Default of the spec's ``max_method_minutes`` (:func:`calibprob.runs.faults.check_method_time`).
DEFAULT_MAX_METHOD_MINUTES = 60.0


#: Values of the top-level ``target_transform`` key (:mod:`calibprob.transforms`).
TARGET_TRANSFORMS = ("log", "log1p")


SPLIT_KEYS = ("train", "calibrate", "test")


_CSV_KEYS = {"path", "target", "features", "exclude", "one_hot", "dropna", "subsample"}


_FUNCTION_KEYS = {"function", "n", "dim", "noise", "design"}


DATASET_KEYS = (
    {"name", "split", "sha256", "groups", "shift", "permute", "time", "feedback"} | _CSV_KEYS | _FUNCTION_KEYS
)


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


#: Base kinds whose table names code to run (``entry``, or a ``factory`` object from Python).
CODE_BASES = ("python", "pymc-model")


def _python_label(table: dict) -> dict:
    """A table naming code (``kind = "python"`` or ``"pymc-model"``) with the code named by a description only.

    Its other options (a ``pymc-model``'s sampler settings) are kept; other tables are unchanged.
    """
    if table.get("kind") not in CODE_BASES:
        return table

    label = table["entry"] if "entry" in table else factory_label(table.get("factory"))
    rest = {k: v for k, v in table.items() if k not in ("kind", "entry", "factory")}
    return {"kind": table["kind"], "label": label, **rest}


def _toml_value(v: object) -> str:
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


def file_sha256(path: str | os.PathLike[str]) -> str:
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
    #: a shifted test set (``calibprob.compare.spec.shift``): ``{"tilt": {column: a}, "fraction": f}``
    shift: dict | None = None
    #: the entry whose data a shifted twin loads (None for a declared entry)
    source: str | None = None
    #: the rows in the random order of ``numpy.random.RandomState(permute).permutation`` (a time split's control)
    permute: int | None = None
    #: a CSV column holding each row's time (dates or numbers, strictly increasing): not a feature; a time
    #: split's scores carry the horizon's times as ``time_stamp`` (the report's dates)
    time: str | None = None
    #: a designed test point (``calibprob.compare.spec.feedback``): ``{"lambda": (...), "n_train": n, "label_sd": column,
    #: "label_floor": f, "model": {...}}``; its runs at each lambda are twins named ``<name>-lambda<λ>``
    feedback: dict | None = None
    #: a feedback twin's inverse temperature (None for every other entry)
    lam: float | None = None

    def to_dict(self) -> dict:
        if self.lam is not None:  # a feedback twin writes its declared entry (every lambda in its table)
            return dataclasses.replace(self, name=str(self.source), source=None, lam=None).to_dict()
        out: dict = {}
        for k, v in self.__dict__.items():
            if v is None or k == "subsample_seed":  # the seed is derived from the spec's seed
                continue
            if k == "feedback":
                out[k] = _feedback_table(v)
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
    #: ``True``: the method's Mondrian version (per group of the data sets' ``groups`` column);
    #: ``False``: marginal; ``None``: as the data set says (Mondrian when it has ``groups``)
    groups: bool | None = None
    #: with ``groups = true``: ``"pooled"`` (default: a group too small, or absent from the
    #: calibration data, is calibrated on all points, labelled) or ``"none"`` (infinite bounds)
    fallback: str | None = None
    #: ``True``: refused where its default's n x n work is too long or too large, never switched to its
    #: scalable form (``calibprob.compare.methods.scalable_form``)
    strict: bool = False
    #: weighted calibration under covariate shift (``calibprob.compare.methods.task_weights``):
    #: ``"oracle"`` (a shifted data set's tilt), ``"logistic"`` or ``"random-forest"`` (a classifier's ratio)
    weights: str | None = None

    def table(self) -> dict:
        """The method's spec table (``kind``, its options and the runner keys it sets)."""
        out = {"kind": self.kind, **self.options}
        if self.bases is not None:
            out["bases"] = list(self.bases)
        if self.groups is not None:
            out["groups"] = self.groups
        if self.fallback is not None:
            out["fallback"] = self.fallback
        if self.strict:
            out["strict"] = True
        if self.weights is not None:
            out["weights"] = self.weights
        return out


def _feedback_table(fb: dict) -> dict:
    """A ``feedback`` table as the spec gives it (lists for tuples, no unset keys): it parses again as it is."""
    out = {k: (list(v) if isinstance(v, tuple) else dict(v) if isinstance(v, dict) else v) for k, v in fb.items()}
    return {k: v for k, v in out.items() if v is not None}


def _declared(datasets: tuple[DatasetSpec, ...]) -> list[dict]:
    """The data set entries as declared: the twins (shifted, or one per feedback lambda) folded into their entry."""
    out, seen = [], set()
    for d in datasets:
        if d.source is None or (d.lam is not None and d.source not in seen):
            out.append(d.to_dict())
            seen.add(d.source if d.lam is not None else d.name)
    return out


#: Values of a method's ``fallback`` key (with ``groups = true``) and :class:`calibprob.Mondrian`'s ``fallback``.
METHOD_FALLBACKS = {"pooled": "pooled", "none": None}


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
    A one-method spec (a full one: :func:`calibprob.compare.parse_spec`);
    :meth:`to_dict` writes it back as the dict it was read from:

    >>> from calibprob.compare import parse_spec
    >>> spec = parse_spec({"name": "tiny", "datasets": [{"name": "f", "function": "forrester", "n": 20}],
    ...                    "split": {"train": 0.5, "test": 0.5}, "base": {"kind": "ols"},
    ...                    "methods": {"raw": {"kind": "base"}}})
    >>> spec.repetitions, spec.to_dict()["methods"]
    (1, {'raw': {'kind': 'base'}})
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
    max_method_minutes: float = DEFAULT_MAX_METHOD_MINUTES

    def to_dict(self) -> dict:
        """A JSON-able dict that rebuilds the spec with :func:`parse_spec` (used to ship it to Dask workers)."""
        out = {
            "name": self.name,
            "description": self.description,
            # a shifted twin is rebuilt from its declared entry's shift table, feedback twins from their entry's
            "datasets": _declared(self.datasets),
            "split": dict(self.split),
            "standardize": self.standardize,
            "repetitions": self.repetitions,
            "seed": self.seed,
            "methods": {m.name: m.table() for m in self.methods},
            "metrics": list(self.metrics),
            "rank_by": self.rank_by,
            "confidence_level": list(self.confidence_levels),
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
        if self.max_method_minutes != DEFAULT_MAX_METHOD_MINUTES:
            out["max_method_minutes"] = self.max_method_minutes
        return out

    @property
    def fingerprint(self) -> str:
        """Hash of everything that changes a task's results; stored in every finished task file.

        The number of repetitions is left out: a task's split depends only on the
        seed, the data set and its repetition index, so raising ``repetitions``
        (or ``calibprob compare --repetitions``) reuses every finished task.
        """
        payload = self.to_dict()
        # the key renamed in 0.2.0 (one name per idea) hashes under its 0.1 name: every finished task is reused
        payload["confidence_levels"] = payload.pop("confidence_level")
        # a python base by its label (an object's str would hold its address)
        if "bases" in payload:
            payload["bases"] = {n: _python_label(t) for n, t in payload["bases"].items()}
        elif payload.get("base", {}).get("kind") in CODE_BASES:
            payload["base"] = _python_label(payload["base"])
        # a CSV entry by its content hash, not its absolute path: a project moved or cloned elsewhere keeps its
        # finished tasks, and a file edited in place changes the hash (and so the fingerprint)
        payload["datasets"] = [
            {k: v for k, v in d.items() if k != "path"} if isinstance(d, dict) and "sha256" in d else d
            for d in payload.get("datasets", [])
        ]
        payload.pop("description", None)
        payload.pop("metrics", None)  # display only
        payload.pop("rank_by", None)  # display only: the ranking is recomputed from the scores
        payload.pop("repetitions", None)  # tasks are keyed by their own index
        payload.pop("max_method_minutes", None)  # decides what is refused, not what a finished method scores
        text = json.dumps(payload, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def results_text(self) -> str:
        """The spec as stored in a results file: its TOML text, never naming code to run.

        A spec with a ``kind = "python"`` base is stored as TOML rebuilt from :meth:`to_dict`
        with the base's ``entry`` (or factory object) replaced by a ``label`` that only
        describes it, so reading a results file can never lead to importing user code.
        """
        if not any(t.get("kind") in CODE_BASES for _, t in self.base_tables()):
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
