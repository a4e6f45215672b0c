"""Reading a comparison spec: the TOML file (and its syntax errors), the top level, the bases and the methods."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from calibprob import registry
from calibprob._core.deprecation import warn_renamed
from calibprob._core.options import Bool, Choice, Float, Int, ListOf, SpecError, Str, _check_keys, _short, _suggest
from calibprob._core.validation import check_levels, describe_unreadable_path
from calibprob.bases.pymc_model import check_pymc_model_table
from calibprob.bases.user import check_python_table
from calibprob.compare.ranking import RANK_SCORES
from calibprob.compare.spec.data import _parse_datasets, _parse_split
from calibprob.compare.spec.model import (
    DEFAULT_MAX_METHOD_MINUTES,
    DEFAULT_METRICS,
    METHOD_FALLBACKS,
    TARGET_TRANSFORMS,
    TOP_KEYS,
    DatasetSpec,
    MethodSpec,
    Spec,
    _capped,
)
from calibprob.metrics import METRIC_NAMES
from calibprob.runs import safe_name
from calibprob.weights import weight_support


def _parse_base_table(table: object, where: str, label: str) -> dict:
    """One base table: a registered ``kind`` and its typed options; returns a copy."""
    if not isinstance(table, dict):
        raise SpecError(f"{where} must be a table {{kind = ..., ...options}}; got {_short(table)}.")
    kind = registry.base_kind(table.get("kind"), f"{where}.kind")  # a renamed kind: its new name, with a warning
    table = {**table, "kind": kind} if "kind" in table else table
    kinds = tuple(registry.BASES)
    if not isinstance(kind, str) or kind not in kinds:
        hint = _suggest(kind, kinds) if isinstance(kind, str) else ""
        raise SpecError(f"{where}.kind must be one of {', '.join(kinds)}; got {_short(kind)}.{hint}")
    options = {k: v for k, v in table.items() if k != "kind"}
    if kind == "python":
        check_python_table(options, where)  # imports the user's `entry` (a SpecError if it cannot)
        return dict(table)
    types = registry.BASES[kind].options
    code = {k: v for k, v in options.items() if k == "factory" and kind == "pymc-model"}  # an object, from Python
    _check_keys({k: v for k, v in options.items() if k not in code}, types, f"{label} (kind {kind!r})")
    for k, v in options.items():
        if k not in code:
            types[k].check(v, f"{where}.{k}")
    if kind == "pymc-model":
        check_pymc_model_table(options, where)  # imports the user's `entry` (a SpecError if it cannot)
    if kind == "bambi" and "formula" not in options:
        raise SpecError(
            f"{where} (kind 'bambi') needs formula = '<response> ~ <terms>', e.g. formula = 'y ~ x + (1|county)' "
            "(the response is the data set's target column, in backticks if it holds dots)."
        )
    return dict(table)


def _parse_bases(value: object) -> tuple[tuple[str, dict], ...]:
    """The ``[bases.NAME]`` tables: one or more, names distinct (also once lower-cased and made file-name safe)."""
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


def _check_loo_bases(m: MethodSpec, tables: Sequence[tuple[str | None, dict]]) -> None:
    """``calibration_data = "loo"`` needs bases that give a training-part leave-one-out predictive."""
    for name, table in tables:
        if (m.bases is None or name in m.bases) and table["kind"] not in registry.LOO_BASES:
            where = "[base]" if name is None else f"[bases.{name}]"
            raise SpecError(
                f"methods.{m.name}.calibration_data = 'loo' needs a base with a leave-one-out predictive "
                f"(kind {', '.join(repr(k) for k in registry.LOO_BASES)}), but would run on {where} of kind "
                f"{table['kind']!r}; list its bases (bases = [...]) or drop calibration_data."
            )


def _check_method_bases(
    methods: tuple[MethodSpec, ...], tables: Sequence[tuple[str | None, dict]]
) -> tuple[MethodSpec, ...]:
    """Each method's ``bases`` names existing bases, and no GP-only method lands on a base it cannot serve."""
    names = [n for n, _ in tables]
    for m in methods:
        if m.bases is not None:
            for b in m.bases:
                if b not in names:
                    raise SpecError(
                        f"methods.{m.name}.bases names {b!r}, which is not a base of this spec.{_suggest(b, names)} "
                        f"Bases: {', '.join(cast(list[str], names))}; name one of them."  # named: m.bases is set
                    )
            if len(set(m.bases)) != len(m.bases):
                raise SpecError(f"methods.{m.name}.bases lists a base twice: {list(m.bases)}; list each once.")
        if m.options.get("calibration_data") == "loo" and "calibration_data" in registry.METHODS[m.kind].runner_options:
            _check_loo_bases(m, tables)
        _check_no_refits_of_frame_bases(m, tables)
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


#: the adapter of the kinds that refit a fresh base once per fold (jackknife, jackknife+, CV+)
_REFITTING_ADAPTER = "calibprob.compare.methods:run_cross_conformal"


def _check_no_refits_of_frame_bases(m: MethodSpec, tables: Sequence[tuple[str | None, dict]]) -> None:
    """A kind that refits its base per fold does not run on a user's sampled model (one NUTS run per fold)."""
    if registry.METHODS[m.kind].adapter != _REFITTING_ADAPTER:
        return
    for name, table in tables:
        if (m.bases is None or name in m.bases) and table["kind"] in registry.FRAME_BASES:
            where = "[base]" if name is None else f"[bases.{name}]"
            raise SpecError(
                f"methods.{m.name} (kind {m.kind!r}) refits its base once per fold, but {where} (kind "
                f"{table['kind']!r}) samples your model by NUTS: list the bases it runs on (bases = [...]), or use "
                "kind 'loo-jackknife-plus' (jackknife+ from one posterior, no refit)."
            )


def _parse_method_bases(entry: dict, name: str, named_bases: bool) -> tuple[str, ...] | None:
    if "bases" not in entry:
        return None
    if not named_bases:
        raise SpecError(
            f"methods.{name}.bases applies only to specs with [bases.NAME] tables; this "
            "spec has one [base]. Remove the key or name the bases."
        )
    return tuple(ListOf(Str()).check(entry["bases"], f"methods.{name}.bases"))


def _parse_methods(value: object, named_bases: bool = False) -> tuple[MethodSpec, ...]:
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
        runner_keys = ("kind", "bases", "groups", "fallback", "strict", "weights")
        options = {k: v for k, v in entry.items() if k not in runner_keys}
        options = registry.current_options(kind, options, f"methods.{name}")  # 0.1 option names, with a warning
        bases = _parse_method_bases(entry, name, named_bases)
        groups, fallback = _parse_method_groups(entry, name, kind)
        types = registry.METHODS[kind].options
        _check_keys(options, types, f"methods.{name} (kind {kind!r})")
        for k, v in options.items():
            types[k].check(v, f"methods.{name}.{k}")
        strict = Bool().check(entry.get("strict", False), f"methods.{name}.strict")  # refused, never switched
        out.append(
            MethodSpec(
                name=name,
                kind=kind,
                options=options,
                bases=bases,
                groups=groups,
                fallback=fallback,
                strict=strict,
                weights=_parse_method_weights(entry, name, kind),
            )
        )
    return tuple(out)


#: A method's ``weights`` values (``calibprob.compare.methods.task_weights``).
METHOD_WEIGHTS = ("oracle", "logistic", "random-forest")


def _weightable(kind: str) -> bool:
    """A post-processor kind whose class takes conformal weights, run by the lifecycle that passes them."""
    e = registry.METHODS[kind]
    if e.family != "distribution" or e.adapter not in (None, "calibprob.compare.methods:run_cqr"):
        return False
    return weight_support(e.load()) == "conformal"


def _parse_method_weights(entry: dict, name: str, kind: str) -> str | None:
    """A method's ``weights`` key: one of :data:`METHOD_WEIGHTS`, for a kind whose class takes weights."""
    if "weights" not in entry:
        return None
    value = Choice(METHOD_WEIGHTS).check(entry["weights"], f"methods.{name}.weights")
    if not _weightable(kind):
        able = ", ".join(sorted(k for k in registry.METHODS if _weightable(k)))
        raise SpecError(
            f"methods.{name}.weights: kind {kind!r} takes no conformal weights; use one of {able}, or drop weights."
        )
    return value


def _groups_capable(kind: str) -> bool:
    """Whether a kind has a per-group version: a distribution post-processor run by the family's lifecycle
    (as :class:`calibprob.Mondrian` of itself), or conformal Bayes (grouped ranks)."""
    entry = registry.METHODS[kind]
    # conformal Bayes: grouped ranks over the training part (its own per-group version)
    return (entry.family == "distribution" and entry.adapter is None) or kind == "conformal-bayes"


def _parse_method_groups(entry: dict, name: str, kind: str) -> tuple[bool | None, str | None]:
    """A method's ``groups = true/false`` (Mondrian or marginal) and its ``fallback`` (with ``groups = true``)."""
    groups = Bool().check(entry["groups"], f"methods.{name}.groups") if "groups" in entry else None
    if groups and not _groups_capable(kind):
        able = ", ".join(sorted(k for k in registry.METHODS if _groups_capable(k)))
        raise SpecError(
            f"methods.{name}.groups = true: kind {kind!r} has no Mondrian (per-group) version; set groups = false "
            f"or remove the key, or use one of the kinds that have one: {able}."
        )
    if "fallback" not in entry:
        return groups, ("pooled" if groups else None)
    if not groups:
        raise SpecError(
            f"methods.{name}.fallback applies with groups = true only (what a too-small or unseen group gets); "
            "add groups = true or remove the key."
        )
    fallback = Choice(tuple(METHOD_FALLBACKS)).check(entry["fallback"], f"methods.{name}.fallback")
    return groups, fallback


def _check_method_groups(methods: Sequence[MethodSpec], datasets: Sequence[DatasetSpec]) -> None:
    """A method with ``groups = true`` needs every data set to name its ``groups`` column."""
    for m in methods:
        missing = [d.name for d in datasets if d.groups is None]
        if m.groups and missing:
            raise SpecError(
                f"methods.{m.name}.groups = true needs a group column on every data set, but {missing[0]!r} has "
                f'none; add groups = "<column>" to that data set entry (e.g. {{name = "{missing[0]}", '
                'groups = "county"}).'
            )


def _check_feedback(
    methods: Sequence[MethodSpec], datasets: Sequence[DatasetSpec], standardize: bool, target_transform: str | None
) -> None:
    """Feedback entries on the features as encoded; ``feedback-conformal`` methods with a grid, and such an entry."""
    fed = [d.name for d in datasets if d.feedback is not None]
    if fed and (standardize or target_transform is not None):
        key = "standardize = true" if standardize else f"target_transform = {target_transform!r}"
        raise SpecError(
            f"data set {fed[0]!r} has a feedback table, whose ridge penalty and label grid are on the data as "
            f"they are; {key} would change both. Set standardize = false and drop target_transform."
        )
    for m in methods:
        if m.kind != "feedback-conformal":
            continue
        if not fed:
            raise SpecError(
                f"methods.{m.name} (kind 'feedback-conformal') needs a data set with a feedback table (the design's "
                'pool, lambda and model): add feedback = { lambda = [...], n_train = ..., model = { kind = "ridge", '
                "penalty = ... } } to a CSV data set entry."
            )
        grid = m.options.get("grid")
        if grid is None or len(grid) != 3 or not grid[2] > 0 or not grid[1] > grid[0]:
            raise SpecError(
                f"methods.{m.name}.grid must be [start, stop, step] of the candidate labels with stop > start and "
                f"step > 0; got {grid!r}. E.g. grid = [0.0, 2.2, 0.02] (the authors' 111 labels)."
            )
        if (grid[1] - grid[0]) / grid[2] > MAX_GRID_LABELS:
            raise SpecError(
                f"methods.{m.name}.grid = {grid!r} has more than {MAX_GRID_LABELS} labels (each costs a pass over "
                "the pool per training row); use a larger step."
            )


#: Most candidate labels of a ``feedback-conformal`` grid.
MAX_GRID_LABELS = 100_000


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


def _renamed_top_keys(data: Any) -> Any:  # the TOML document, checked by _check_top_level next
    """The spec with its 0.1 top-level key ``confidence_levels`` read as ``confidence_level`` (one name per idea).

    The old key warns (``FutureWarning``, removed in 0.3.0); both keys at once are refused.
    """
    if not isinstance(data, dict) or "confidence_levels" not in data:
        return data
    if "confidence_level" in data:
        raise SpecError(
            "the spec has both confidence_level and confidence_levels (its 0.1 name); keep confidence_level only."
        )
    value = data["confidence_levels"]
    warn_renamed(
        "the spec key confidence_levels",
        "confidence_levels",
        "confidence_level",
        f"confidence_level = {value!r}",
        stacklevel=4,
    )
    return {("confidence_level" if k == "confidence_levels" else k): v for k, v in data.items()}


def _parse_spec(data: Any, *, source: str, root: str | Path) -> Spec:
    data = _renamed_top_keys(data)
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
    # the exact GP's size cap binds only where it is forced: kind = "gp" chooses the sparse GP above its size
    exact = any(t["kind"] == "gp" and t.get("exact") for _, t in tables)
    base_kind = "gp" if exact else ("sparse-gp" if tables[0][1]["kind"] == "gp" else tables[0][1]["kind"])
    reps = data.get("repetitions", 1)
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
        raise SpecError(f"repetitions must be a positive integer; got {_short(reps)}.")
    _capped("repetitions", reps, "repetitions")
    seed = Int(0, 2**63 - 1).check(data.get("seed", 0), "seed")

    rank_by = Choice(RANK_SCORES).check(data.get("rank_by", "nll"), "rank_by")
    standardize = Bool().check(data.get("standardize", True), "standardize")
    target_transform = None
    if "target_transform" in data:
        target_transform = Choice(TARGET_TRANSFORMS).check(data["target_transform"], "target_transform")
    _check_frame_scale(tables, standardize, target_transform)
    split = _parse_split(data["split"])
    max_minutes = _parse_max_method_minutes(data.get("max_method_minutes", DEFAULT_MAX_METHOD_MINUTES))
    datasets = _parse_datasets(data["datasets"], root, split, seed, base_kind, target_transform)
    methods = _check_method_bases(_parse_methods(data["methods"], bases is not None), tables)
    _check_method_groups(methods, datasets)
    _check_feedback(methods, datasets, standardize, target_transform)
    return Spec(
        name=name,
        description=description,
        datasets=datasets,
        split=split,
        base=base,
        bases=bases,
        methods=methods,
        repetitions=reps,
        seed=seed,
        standardize=standardize,
        metrics=_parse_metrics(data.get("metrics", list(DEFAULT_METRICS))),
        rank_by=rank_by,
        confidence_levels=_parse_confidence_levels(data.get("confidence_level", [0.5, 0.8, 0.9, 0.95])),
        levels=_parse_quantile_levels(data.get("levels")),
        target_transform=target_transform,
        source=source,
        root=str(root),
        max_method_minutes=max_minutes,
    )


def _check_frame_scale(
    tables: Sequence[tuple[str | None, dict]], standardize: bool, target_transform: str | None
) -> None:
    """A base that sees the raw data is scored on the target's own scale: the spec's scores must be on it too.

    With ``standardize = true`` and no ``target_transform`` every other base is scored on the standardised
    target, so the two would not compare; with a ``target_transform`` every score is on the original scale.
    """
    frame = [(n, t["kind"]) for n, t in tables if t["kind"] in registry.FRAME_BASES]
    if frame and standardize and target_transform is None:
        name, kind = frame[0]
        where = "[base]" if name is None else f"[bases.{name}]"
        raise SpecError(
            f"{where} (kind {kind!r}) sees the data as you have them and predicts on the target's own scale, but "
            "standardize = true scores the other bases on the standardised target; set standardize = false "
            "(your model standardises inside itself if it needs to)."
        )


def _parse_max_method_minutes(value: object) -> float:
    """The spec's ``max_method_minutes``: a positive number of minutes (as a float)."""
    try:
        return float(Float(0.0, lo_open=True).check(value, "max_method_minutes"))
    except SpecError as err:
        raise SpecError(
            f"{err} It caps the estimated time of each method's n x n work on an exact GP (refused beyond it); set it "
            f"larger to allow more, e.g. max_method_minutes = 120 for two hours (default {DEFAULT_MAX_METHOD_MINUTES:g})."
        ) from None


def _check_top_level(data: object) -> None:
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


def _parse_metrics(metrics: object) -> tuple[str, ...]:
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


def _parse_confidence_levels(conf: object) -> tuple[float, ...]:
    if not isinstance(conf, list) or not conf:
        raise SpecError(
            f"confidence_level must be a non-empty list of levels in (0, 1), e.g. [0.5, 0.9]; got {_short(conf)}."
        )
    for c in conf:
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 < c < 1:
            raise SpecError(f"confidence_level must be in (0, 1); got {_short(c)}. Use e.g. 0.9, not 90.")
    if len(set(conf)) != len(conf):
        raise SpecError(f"confidence_level must be distinct; got {conf}.")
    return tuple(float(c) for c in conf)


def _parse_quantile_levels(levels: object) -> tuple[float, ...] | None:
    """The spec's ``levels`` (quantile levels of every prediction), or None for the default grid."""
    if levels is None:
        return None

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


_TOML_AT = re.compile(r"^(?P<what>.*) \(at line (?P<line>\d+), column (?P<col>\d+)\)$")


_TOML_TABLE = re.compile(r"Cannot declare \((?P<keys>.*)\) twice")


def _first_line(lines: list[str], before: int, pattern: re.Pattern) -> int | None:
    """1-based number of the first of ``lines[:before]`` matching ``pattern``."""
    return next((i + 1 for i, line in enumerate(lines[:before]) if pattern.match(line)), None)


def toml_error_message(err: tomllib.TOMLDecodeError, text: str) -> str:
    r"""The parser's error as a message that names the key or table, its line and the fix.

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
