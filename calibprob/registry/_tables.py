"""The registry's machinery: the entry types, the three tables, the registration calls and the generated
docs tables. The package :mod:`calibprob.registry` re-exports all of it and registers calibprob's own classes."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, TypeVar, Unpack

from calibprob._core.deprecation import warn_renamed
from calibprob._core.options import Choice, OptionType, SpecError

#: The calibrator families: the two of ``calibprob._core.estimator``, and ``posterior`` (fitted on a
#: posterior's pointwise log-likelihood, e.g. conformal Bayes: ``fit(log_likelihood)``).
FAMILIES = ("distribution", "model-aware", "posterior")
#: What a calibrator's ``predict`` returns: a quantile function or central intervals only.
OUTPUTS = ("distribution", "intervals")
ROLES = ("calibrator", "base", "helper")
#: Constructor arguments the runner fills from the task, never from the spec: the base model,
#: the interval levels an intervals-only method must resolve, and the quantile levels.
TASK_ARGUMENTS = ("estimator", "prefit", "confidence_level", "levels")


def load_object(target: str) -> Any:  # a dynamic import: whatever class or function the target names
    """Import ``"package.module:name"`` and return the object (a class or a function)."""
    module, _, name = target.partition(":")
    if not module or not name:
        raise ValueError(f"a registry target must read 'package.module:Name'; got {target!r}.")
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class ClassEntry:
    """A public estimator class: where it lives, its role, family, output and exporting namespaces."""

    name: str
    module: str
    role: str
    family: str | None = None
    output: str | None = None
    exports: tuple[str, ...] = ()

    @property
    def target(self) -> str:
        return f"{self.module}:{self.name}"

    def load(self) -> type:
        """The class itself (imports its module)."""
        return load_object(self.target)


@dataclass(frozen=True)
class MethodEntry:
    """A calibrator kind of the comparison spec.

    Attributes
    ----------
    kind : str
        The spec's ``kind = ...``.
    cls : str or None
        Name of its class in :data:`CLASSES` (``None`` for the uncalibrated ``base`` kind).
    family, output : str
        As the class's (see the module docstring).
    options : mapping of str to OptionType
        The options a spec may give and their declared types; each is a keyword of the
        class's constructor unless listed in ``runner_options``.
    doc : str
        One line for the kinds table.
    fixed : mapping
        Constructor arguments the kind fixes (e.g. ``method="plus"`` for jackknife+).
    seed : str or None
        Constructor argument seeded with the task's seed when the spec does not give it.
    serves : tuple of str or None
        Base kinds it can run on (``None``: any base).
    needs_calibration_split : bool
        Refused at run time on a split without a ``calibrate`` part.
    defaults : mapping
        Defaults of the runner options (e.g. ``calibration_data = "auto"`` for GP-Beta).
    runner_options : tuple of str
        Options that the runner or the adapter consumes (``calibration_data``), not the class.
    hidden : tuple of str
        Constructor arguments deliberately not offered to specs (e.g. ``chunk_size``).
    adapter : str, callable or None
        ``"module:function"`` (or the function) called as ``function(ctx, entry, **options)`` when the family's
        lifecycle does not suffice; ``None`` for most methods.
    """

    kind: str
    cls: str | None
    family: str
    output: str
    options: Mapping[str, OptionType] = field(default_factory=dict)
    doc: str = ""
    fixed: Mapping[str, Any] = field(default_factory=dict)
    seed: str | None = None
    serves: tuple[str, ...] | None = None
    needs_calibration_split: bool = False
    defaults: Mapping[str, Any] = field(default_factory=dict)
    runner_options: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    adapter: str | Callable | None = None

    def load(self) -> type:
        """The calibrator class (imports its module)."""
        if self.cls is None:
            raise TypeError(
                f"method kind {self.kind!r} has no class (it runs through its adapter): run it with calibprob.compare."
            )
        return CLASSES[self.cls].load()

    def constructor_options(self, options: Mapping) -> dict:
        """The keyword arguments of the class for a spec's ``options`` (runner options removed)."""
        return {k: v for k, v in options.items() if k not in self.runner_options}


@dataclass(frozen=True)
class BaseEntry:
    """A base-model kind of the comparison spec: its class, declared options and seed argument."""

    kind: str
    cls: str | None
    options: Mapping[str, OptionType] = field(default_factory=dict)
    doc: str = ""
    seed: str | None = None
    hidden: tuple[str, ...] = ()
    #: a factory ``"module:function"`` building the model from the table (kinds without a class)
    builder: str | None = None
    #: options the runner reads and never gives the class (``kind = "gp"``'s choice: ``exact``, ``n_inducing``)
    runner_options: tuple[str, ...] = ()

    def load(self) -> type:
        if self.cls is None:
            raise TypeError(f"base kind {self.kind!r} has no class: build it with {self.builder}.")
        return CLASSES[self.cls].load()


class MethodExtra(TypedDict, total=False):
    """The optional fields of :class:`MethodEntry` that :func:`register_method` passes on."""

    fixed: Mapping[str, object]
    seed: str | None
    serves: tuple[str, ...] | None
    needs_calibration_split: bool
    defaults: Mapping[str, object]
    runner_options: tuple[str, ...]
    hidden: tuple[str, ...]
    adapter: str | Callable | None


class BaseExtra(TypedDict, total=False):
    """The optional fields of :class:`BaseEntry` that :func:`register_base` passes on."""

    seed: str | None
    hidden: tuple[str, ...]
    builder: str | None
    runner_options: tuple[str, ...]


CLASSES: dict[str, ClassEntry] = {}
METHODS: dict[str, MethodEntry] = {}
BASES: dict[str, BaseEntry] = {}

#: Base kinds renamed in 0.2.0 (old -> new). A spec naming the old kind still runs for one release, with a
#: FutureWarning naming the new one; the old name is removed in 0.3.0.
RENAMED_BASE_KINDS = {"pymc-glm": "pymc-linear"}  # keep-old-name


#: Method options renamed in 0.2.0 with their constructor argument (one name per idea, issue 40), per kind:
#: old option -> (new option, {old value: new value} or None when the values are the same). A spec with the old
#: option still runs for one release, with the FutureWarning of calibprob._core.deprecation; removed in 0.3.0.
RENAMED_OPTIONS: dict[str, dict[str, tuple[str, dict | None]]] = {
    "conformal-predictive": {"normalize": ("score", {True: "signed", False: "signed-absolute"})},
    "cqr": {"variant": ("score", None)},
}


def current_options(kind: str, options: dict, where: str) -> dict:
    """``options`` of a method of kind ``kind`` with every renamed option under its new name, with a FutureWarning.

    Parameters
    ----------
    kind : str
        A registered method kind.
    options : dict
        The spec table's options.
    where : str
        The table, for the messages (``"methods.cqr"``).

    Returns
    -------
    dict
        A copy; unchanged when no old name is used.

    Raises
    ------
    SpecError
        Both the old and the new name given, or an old value with no new equivalent.
    """
    out = dict(options)
    for old, (new, values) in RENAMED_OPTIONS.get(kind, {}).items():
        if old not in out:
            continue
        if new in out:
            raise SpecError(
                f"{where}: both {old!r} and {new!r} given; {old!r} is the old name of {new!r} (removed in calibprob "
                f"0.3.0): keep only {new} = {out[new]!r}."
            )
        value = out.pop(old)
        if values is not None:
            if not isinstance(value, type(next(iter(values)))) or value not in values:
                raise SpecError(
                    f"{where}.{old} must be one of {', '.join(map(repr, values))}; got {value!r}. Better: write "
                    f"{new} = {next(iter(values.values()))!r} (the new name)."
                )
            value = values[value]
        out[new] = value
        warn_renamed(f"{where}.{old}", old, new, f"{new} = {value!r}", stacklevel=3)
    return out


_Kind = TypeVar("_Kind")


def base_kind(kind: _Kind, where: str = "base.kind") -> _Kind | str:
    """The registered name of base kind ``kind``: a renamed kind gives its new name, with a FutureWarning.

    Anything else comes back unchanged (the caller checks it against :data:`BASES`).
    """
    new = RENAMED_BASE_KINDS.get(kind) if isinstance(kind, str) else None
    if new is None:
        return kind
    warnings.warn(
        f"{where}: kind {kind!r} was renamed {new!r} in calibprob 0.2.0 (module calibprob.bases.pymc_linear, class "
        f"PyMCLinearRegression); the old name is removed in 0.3.0. Write kind = {new!r}.",
        FutureWarning,
        stacklevel=3,
    )
    return new


def _check_choice(value: object, name: str, valid: Collection[object]) -> None:
    if value not in valid:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, valid))}; got {value!r}.")


def _split_target(target: str) -> tuple[str, str]:
    module, _, name = target.partition(":")
    if not module or not name or "." in name:
        raise ValueError(f"target must read 'package.module:ClassName'; got {target!r}.")
    return module, name


def register_class(
    target: str,
    *,
    role: str,
    family: str | None = None,
    output: str | None = None,
    exports: tuple[str, ...] = (),
) -> ClassEntry:
    """Register a public class (``"package.module:Class"``); returns its entry.

    Parameters
    ----------
    target : str
        The module that exports the class and its name; the module is not imported.
    role : {"calibrator", "base", "helper"}
    family : {"distribution", "model-aware", "posterior"}, optional
        Required for a calibrator.
    output : {"distribution", "intervals"}, optional
        Required for a calibrator.
    exports : tuple of str
        Namespaces that export the name lazily (``"calibprob"``, ``"calibprob.calibrators"``,
        ``"calibprob.calibrators.conformal"``).
    """
    module, name = _split_target(target)
    _check_choice(role, "role", ROLES)
    if role == "calibrator":
        _check_choice(family, "family", FAMILIES)
        _check_choice(output, "output", OUTPUTS)
    entry = ClassEntry(name, module, role, family, output, tuple(exports))
    CLASSES[name] = entry
    return entry


def register_method(
    kind: str,
    target: str | None,
    *,
    family: str,
    output: str,
    options: Mapping[str, OptionType] | None = None,
    doc: str = "",
    exports: tuple[str, ...] = (),
    **extra: Unpack[MethodExtra],
) -> MethodEntry:
    """Register a calibrator kind of the comparison spec (and its class, when new).

    Parameters
    ----------
    kind : str
        The name a spec gives as ``kind``.
    target : str or None
        ``"package.module:Class"``; ``None`` only with an ``adapter``.
    family : {"distribution", "model-aware"}
        Decides how the runner runs it: ``fit(pred_cal, y_cal)``/``predict(pred)`` on the
        task's base prediction, or ``estimator=`` the task's fitted base, ``fit(X_cal, y_cal)``,
        ``predict(X_test)``.
    output : {"distribution", "intervals"}
        Decides how it is scored: every metric, or coverage, width and IAE only.
    options : mapping of str to OptionType
        Spec options and their declared types (``calibprob._core.options``).
    doc : str
        One line for the generated kinds table.
    exports : tuple of str
        As in :func:`register_class`, when the class is registered by this call.
    **extra
        The other fields of :class:`MethodEntry` (``fixed``, ``seed``, ``serves``,
        ``needs_calibration_split``, ``defaults``, ``runner_options``, ``hidden``, ``adapter``).

    Returns
    -------
    MethodEntry

    Examples
    --------
    >>> from calibprob.registry import METHODS
    >>> METHODS["isotonic"].family, METHODS["isotonic"].output, sorted(METHODS["isotonic"].options)
    ('distribution', 'distribution', ['calibration_data', 'extrapolate'])
    >>> METHODS["jackknife-plus-gp"].output, METHODS["jackknife-plus-gp"].serves
    ('intervals', ('gp', 'sparse-gp'))
    """
    _check_choice(family, "family", FAMILIES)
    _check_choice(output, "output", OUTPUTS)
    cls = None
    if target is not None:
        module, cls = _split_target(target)
        known = CLASSES.get(cls)
        if known is None or known.module != module:
            register_class(target, role="calibrator", family=family, output=output, exports=exports)
    elif extra.get("adapter") is None:
        raise ValueError(f"method kind {kind!r} needs a class target or an adapter.")
    entry = MethodEntry(kind, cls, family, output, dict(options or {}), doc, **extra)
    METHODS[kind] = entry
    return entry


def register_base(
    kind: str,
    target: str | None,
    *,
    options: Mapping[str, OptionType] | None = None,
    doc: str = "",
    exports: tuple[str, ...] = (),
    **extra: Unpack[BaseExtra],
) -> BaseEntry:
    """Register a base-model kind (``[base] kind = ...``) and, when new, its class; returns its entry.

    ``extra``: ``seed`` (the constructor argument given the task seed), ``hidden``, ``builder``.
    """
    cls = None
    if target is not None:
        module, cls = _split_target(target)
        known = CLASSES.get(cls)
        if known is None or known.module != module:
            register_class(target, role="base", exports=exports)
    elif extra.get("builder") is None:
        raise ValueError(f"base kind {kind!r} needs a class target or a builder.")
    entry = BaseEntry(kind, cls, dict(options or {}), doc, **extra)
    BASES[kind] = entry
    return entry


def exports(namespace: str) -> dict[str, str]:
    """``{name: module}`` of the classes that ``namespace`` exports lazily."""
    return {e.name: e.module for e in CLASSES.values() if namespace in e.exports}


def list_calibrators(family: str | None = None, output: str | None = None) -> list[tuple[str, type, str, str]]:
    """Every registered calibrator as ``(name, class, family, output)``, sorted by name.

    Like scikit-learn's :func:`sklearn.utils.all_estimators`: what a tool or a test loops over. The
    classes are imported (calibprob's own import no PyMC model at import time); a third party's appear
    once its :func:`register_class` or :func:`register_method` call has run.

    Parameters
    ----------
    family : {"distribution", "model-aware", "posterior"}, optional
        Keep only this family (the lifecycle: ``fit(pred_cal, y_cal)``, ``estimator=`` with
        ``fit(X, y)``, or ``fit(log_likelihood)``).
    output : {"distribution", "intervals"}, optional
        Keep only this output kind (a quantile function, or central intervals only).

    Returns
    -------
    list of (str, type, str, str)

    Examples
    --------
    >>> import calibprob
    >>> [name for name, *_ in calibprob.list_calibrators(family="model-aware", output="intervals")][:2]
    ['CrossConformalRegressor', 'EnbPI']
    """
    if family is not None:
        _check_choice(family, "family", FAMILIES)
    if output is not None:
        _check_choice(output, "output", OUTPUTS)
    return [
        (e.name, e.load(), str(e.family), str(e.output))
        for e in sorted(CLASSES.values(), key=lambda e: e.name)
        if e.role == "calibrator" and family in (None, e.family) and output in (None, e.output)
    ]


def builtin_classes() -> dict[str, str]:
    """``{name: module}`` of calibprob's own classes (what :func:`calibprob.load` may construct)."""
    return {e.name: e.module for e in CLASSES.values() if e.module.split(".")[0] == "calibprob"}


def _options_cell(entry: MethodEntry) -> str:
    if not entry.options:
        return "—"
    cells = []
    for name, typ in entry.options.items():
        if isinstance(typ, Choice):
            cells.append(f"`{name}` ({', '.join(f'`{v}`' for v in typ.values)})")
        else:
            cells.append(f"`{name}`")
    return ", ".join(cells)


def render_kinds_table() -> str:
    """The Markdown table of every registered method kind (the one in ``docs/spec.md``).

    Columns: the kind (▪ marks intervals-only output), its family, what it does and the
    base kinds it needs, and its options (enum values in brackets).
    """
    rows = ["| kind | family | what | options |", "| --- | --- | --- | --- |"]
    for kind, e in METHODS.items():
        mark = " ▪" if e.output == "intervals" else ""
        what = e.doc.rstrip(".")
        if e.serves is not None:
            what += "; needs a " + " or ".join(f"`{b}`" for b in e.serves) + " base"
        if e.needs_calibration_split:
            what += "; needs a calibration part"
        family = (
            "—"
            if e.cls is None
            else {"distribution": "post-processor", "model-aware": "model-aware", "posterior": "posterior"}[e.family]
        )
        rows.append(f"| `{kind}`{mark} | {family} | {what} | {_options_cell(e)} |")
    return "\n".join(rows) + "\n"


def render_bases_table() -> str:
    """The Markdown table of every registered base kind (the one in ``docs/spec.md``)."""
    rows = ["| kind | class | what | options |", "| --- | --- | --- | --- |"]
    for kind, e in BASES.items():
        cls = "—" if e.cls is None else f"`{e.cls}`"
        opts = ", ".join(
            f"`{n}` ({', '.join(f'`{v}`' for v in t.values)})" if isinstance(t, Choice) else f"`{n}`"
            for n, t in e.options.items()
        )
        rows.append(f"| `{kind}` | {cls} | {e.doc} | {opts or '—'} |")
    return "\n".join(rows) + "\n"


#: The generated blocks of ``docs/spec.md``: (first line, last line, renderer).
DOC_BLOCKS = {
    "kinds": (
        "<!-- method kinds: generated by calibprob.registry.update_doc('docs/spec.md'); do not edit -->",
        "<!-- end of method kinds -->",
        render_kinds_table,
    ),
    "bases": (
        "<!-- base kinds: generated by calibprob.registry.update_doc('docs/spec.md'); do not edit -->",
        "<!-- end of base kinds -->",
        render_bases_table,
    ),
}


def update_doc(path: str | Path) -> bool:
    """Rewrite the generated blocks of the page at ``path`` (e.g. ``docs/spec.md``); True if it changed."""
    page = Path(path)
    old = page.read_text(encoding="utf-8")
    new = render_doc(old)
    if new != old:
        page.write_text(new, encoding="utf-8")
    return new != old


def render_doc(text: str) -> str:
    """``text`` (a page such as ``docs/spec.md``) with every generated block rendered afresh."""
    for name, (begin, end, render) in DOC_BLOCKS.items():
        i, j = text.find(begin), text.find(end)
        if i < 0 or j < i:
            raise ValueError(f"the page lacks the generated {name} block: add the lines {begin!r} and {end!r}.")
        text = text[: i + len(begin)] + "\n" + render() + text[j:]
    return text
