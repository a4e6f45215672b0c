"""Sphinx extension: the API reference covers every public name, and re-exports link.

The public API is read from the package, not from a list kept by hand: every name in the
``__all__`` of :data:`PUBLIC_ROOT`, of each public subpackage (``calibprob.metrics``,
``calibprob.compare.spec``, ...; a package whose dotted path has no ``_`` component) and of each
public module directly under the top level (``calibprob.plots``, ``calibprob.transforms``,
``calibprob.cli``). Modules deeper inside a package (``calibprob.compare.runner``) are
implementation: their ``__all__`` says what other modules of the package import.

Three hooks:

* ``env-check-consistency``: after every page is read, each public name must be documented by a
  Python-domain object description (an ``autosummary`` entry in ``docs/api.md``, under any of
  the names it is exported as). A missing one is a warning, and the build runs with ``-W``, so a
  new public name without an entry fails ``make docs`` with the list of what to add.
* ``missing-reference``: a cross-reference to a re-export (``calibprob.predictive.DEFAULT_LEVELS``)
  or a short name in a docstring (``evaluate``, written in the module that imports it) resolves to
  the entry of the *same object* where it is documented (``calibprob.DEFAULT_LEVELS``). Only an
  object identical to a documented one is linked; anything else stays unresolved.
* ``autodoc-process-bases``: a class's "Bases" line names public classes only; a private base
  (``calibprob._core.estimator.BaseEstimator``) is replaced by its own bases, recursively.

``tests/test_docs.py`` imports :func:`public_names` from this file for its checks.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

#: The package whose public names the API reference documents.
PUBLIC_ROOT = "calibprob"

#: ``{id(object): [documented names]}``, filled once the pages are read (``env-check-consistency``).
_DOCUMENTED: dict[int, list[str]] = {}


def _is_public(dotted: str) -> bool:
    return not any(part.startswith("_") for part in dotted.split("."))


def public_modules() -> list[str]:
    """Dotted names of the modules whose ``__all__`` is public API (see the module docstring)."""
    root = importlib.import_module(PUBLIC_ROOT)
    names = [PUBLIC_ROOT]
    for info in pkgutil.walk_packages(root.__path__, PUBLIC_ROOT + "."):
        if not _is_public(info.name):
            continue
        if info.ispkg or info.name.count(".") == 1:
            module = importlib.import_module(info.name)
            if hasattr(module, "__all__"):
                names.append(info.name)
    return sorted(names)


def public_names() -> list[tuple[str, str, object]]:
    """``[(module, name, object)]`` for every name in the public modules' ``__all__``."""
    out = []
    for modname in public_modules():
        module = importlib.import_module(modname)
        for name in module.__all__:
            out.append((modname, name, getattr(module, name)))
    return out


def resolve(dotted: str):
    """The object a dotted name refers to (``calibprob.metrics.ece``, ``calibprob.Mondrian.fit``).

    Raises
    ------
    LookupError
        If no importable prefix of ``dotted`` has the remaining attributes.
    """
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            break
        return obj
    raise LookupError(dotted)


def _documented(env) -> dict[int, list[str]]:
    """``{id(object): [documented names]}`` over the Python domain's object descriptions."""
    seen: dict[int, list[str]] = {}
    for fullname in sorted(env.get_domain("py").objects):
        try:
            obj = resolve(fullname)
        except LookupError:
            continue
        seen.setdefault(id(obj), []).append(fullname)
    return seen


def _entry(obj, name: str, documented: dict[int, list[str]]) -> str | None:
    """The documented name of ``obj`` exported as ``name``, or None.

    Classes, functions and modules are matched by identity (a re-export is the same object); a
    constant also by its last name component, since equal small values (``5``, ``"gp"``) can be
    one object.
    """
    names = documented.get(id(obj), [])
    if callable(obj) or inspect.ismodule(obj):
        return names[0] if names else None
    last = name.rsplit(".", 1)[-1]
    return next((n for n in names if n.rsplit(".", 1)[-1] == last), None)


def missing_names(described, documented: dict[int, list[str]]) -> list[str]:
    """The public names (``module.name``) that no object description documents.

    Parameters
    ----------
    described : collection of str
        The dotted names of the Python domain's object descriptions.
    documented : dict
        ``{id(object): [documented names]}`` of those descriptions (:func:`_documented`).

    Returns
    -------
    list of str
    """
    # a name documented under its own dotted path counts even when each access builds a new
    # object (a lazily computed constant such as calibprob.compare.spec.METHOD_OPTION_TYPES)
    return [
        f"{mod}.{name}"
        for mod, name, obj in public_names()
        if f"{mod}.{name}" not in described and _entry(obj, name, documented) is None
    ]


def _check_coverage(app, env) -> None:
    from sphinx.util import logging

    documented = _documented(env)
    _DOCUMENTED.clear()
    _DOCUMENTED.update(documented)
    missing = missing_names(env.get_domain("py").objects, documented)
    if missing:
        logging.getLogger(__name__).warning(
            "%d public name(s) in an __all__ have no entry in the API reference: %s. Add each to an "
            "autosummary table of docs/api.md (under the module a user imports it from).",
            len(missing),
            ", ".join(missing),
            type="calibprob",
            subtype="api",
        )


def _written_in(node) -> str | None:
    """The module whose source holds the docstring the reference is in (``None`` outside a docstring).

    autodoc marks each docstring line's source as ``"<file>:docstring of <object>"``; a short name
    there (``evaluate``) means that name as the defining module sees it.
    """
    source = node.source or (node.parent.source if node.parent is not None else None) or ""
    if "docstring of " not in source:
        return None
    try:
        obj = resolve(source.rsplit("docstring of ", 1)[1].strip())
    except LookupError:
        return None
    return obj.__name__ if inspect.ismodule(obj) else getattr(obj, "__module__", None)


def _alias_target(env, node) -> str | None:
    """The documented name of the object a missing ``py`` reference denotes, if any."""
    target = node["reftarget"].lstrip("~.")
    candidates = [target]
    for context in (node.get("py:class"), node.get("py:module"), _written_in(node)):
        if context:
            candidates.append(f"{context}.{target}")
    for candidate in candidates:
        try:
            obj = resolve(candidate)
        except LookupError:
            continue
        name = _entry(obj, target, _DOCUMENTED)
        if name is not None and name != target:
            return name
    return None


def _resolve_alias(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    if not _DOCUMENTED:
        _DOCUMENTED.update(_documented(env))
    name = _alias_target(env, node)
    if name is None:
        return None
    domain = env.get_domain("py")
    return domain.resolve_xref(env, node["refdoc"], app.builder, "obj", name, node, contnode)


def _public_bases(app, name, obj, options, bases: list) -> None:
    out: list = []

    def add(cls):
        if cls is object:
            return
        public = _is_public(cls.__module__) and not cls.__name__.startswith("_")
        if public or not cls.__module__.startswith(PUBLIC_ROOT):
            if cls not in out:
                out.append(cls)
            return
        for base in cls.__bases__:
            add(base)

    for base in bases:
        add(base)
    bases[:] = out


def setup(app):
    app.connect("env-check-consistency", _check_coverage)
    app.connect("missing-reference", _resolve_alias)
    app.connect("autodoc-process-bases", _public_bases)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
