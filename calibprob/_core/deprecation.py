"""Old names that keep working for one release: moved modules, and renamed keyword arguments.

**Keyword arguments** renamed in 0.2.0 (one name per idea across calibprob, issue 40: ``normalize`` and CQR's
``variant`` became ``score``, ``block_rows`` ``chunk_size``, ``unseen_group`` ``fallback``, ``train_groups``
``groups``, ``confidence_levels`` ``confidence_level``) are declared with the one decorator
:func:`renamed_keywords`: the old keyword still works for one release with a :class:`FutureWarning` naming the
old name, the new one and the release that removes it (:data:`REMOVED_IN`); both given at once are refused. The
signature (and so the naming test, the stubs, ``get_params`` and editors) shows only the new name. A saved file
that holds an old parameter name loads through :func:`current_keywords`.

**Modules** moved in the reorganisation by role:

The house was reorganised by role in 0.2.0 (``calibprob.linear`` became ``calibprob.bases.linear``, and so on).
A user's ``import calibprob.linear`` -- or a pickle, or a saved file naming the old module -- still works for one
release: a meta-path finder maps the old dotted name to the new one, imports the new module, registers it under the
old name too (so the classes are the *same* objects, and ``isinstance`` holds across both names), and warns once with
a :class:`FutureWarning` naming the new path.

A finder is used rather than stub files at the old paths because a moved *package* (``calibprob.gp`` ->
``calibprob.bases.gp``) would otherwise have its submodules loaded a second time from the new folder under the old
name, giving two copies of every class.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import inspect
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])

#: The release that moved the modules, and the release that drops the old paths.
MOVED_IN = "0.2.0"
REMOVED_IN = "0.3.0"

#: old dotted module name -> new dotted module name. A moved package moves its submodules with it: an entry
#: ``"calibprob.gp": "calibprob.bases.gp"`` also maps ``calibprob.gp.exact`` to ``calibprob.bases.gp.exact``.
#: Each module move adds its line here (the architecture test forbids calibprob's own code to use an old path).
MOVED: dict[str, str] = {
    # the internal core: estimator base class, validation, options, persistence, small numerical helpers
    "calibprob._base": "calibprob._core.estimator",
    "calibprob._validation": "calibprob._core.validation",
    "calibprob._options": "calibprob._core.options",
    "calibprob._io": "calibprob._core.persistence",
    "calibprob._stable": "calibprob._core.stable",
    "calibprob._optim": "calibprob._core.optim",
    "calibprob._ranks": "calibprob._core.ranks",
    "calibprob._pytensor": "calibprob._core.pytensor_setup",
    "calibprob._warm": "calibprob._core.warm",
    # base models
    "calibprob.linear": "calibprob.bases.linear",
    "calibprob.pymc_glm": "calibprob.bases.pymc_linear",
    "calibprob.pymc_hsgp": "calibprob.bases.pymc_hsgp",
    "calibprob.quantile_gbm": "calibprob.bases.quantile_gbm",
    "calibprob._pymc_sampling": "calibprob.bases._pymc_sampling",
    "calibprob.gp": "calibprob.bases.gp",
    "calibprob.compare.user_base": "calibprob.bases.user",
    # calibrators: the conformal package joins the new conformal code under calibrators/, online recalibration too
    "calibprob.conformal": "calibprob.calibrators.conformal",
    "calibprob.online": "calibprob.calibrators.online",
    # the contract became the package calibprob.predictive (numerics, families, constructors, validation apart)
    "calibprob._numerics": "calibprob.predictive._numerics",
    "calibprob._transformed": "calibprob.predictive._transformed",
    "calibprob.loo_predictive": "calibprob.predictive.loo",
    "calibprob.compare.group_plots": "calibprob.compare.report.group_plots",
    "calibprob._executor": "calibprob.runs",  # the executor became a package (outputs, scheduling, cluster apart)
    # the conformal package's modules named for what they hold (issue 40)
    "calibprob.calibrators.conformal.distribution": "calibprob.calibrators.conformal.split_calibrator",
    "calibprob.calibrators.conformal._common": "calibprob.calibrators.conformal._intervals",
    # conformal Bayes became a subpackage like gp_beta/; grouping (Mondrian, bins) a layer of its own (issue 40)
    "calibprob.calibrators.conformal._bayes_bambi": "calibprob.calibrators.conformal.bayes._bambi",
    "calibprob.calibrators.conformal._bayes_grid": "calibprob.calibrators.conformal.bayes._grid",
    "calibprob.calibrators.conformal._bayes_inputs": "calibprob.calibrators.conformal.bayes._inputs",
    "calibprob.calibrators.conformal._bayes_numerics": "calibprob.calibrators.conformal.bayes._numerics",
    "calibprob.calibrators.conformal.from_pymc": "calibprob.calibrators.conformal.bayes.from_pymc",
    "calibprob.calibrators.conformal.mondrian": "calibprob.calibrators.grouping.mondrian",
    "calibprob.calibrators.conformal.bins": "calibprob.calibrators.grouping.bins",
}


def new_name(old: str) -> str | None:
    """The new dotted name of the old module ``old``, or None when ``old`` did not move.

    The longest matching moved prefix wins, so a module can move out of a package that moved elsewhere; a name
    moved twice (``calibprob.conformal.mondrian`` -> ``calibprob.calibrators.conformal.mondrian`` ->
    ``calibprob.calibrators.grouping.mondrian``) follows the chain to its last place.
    """
    new = None
    for _ in range(len(MOVED)):  # each step follows one entry; a chain is at most as long as the table
        step = next(
            (
                MOVED[p] + old[len(p) :]
                for p in sorted(MOVED, key=len, reverse=True)
                if old == p or old.startswith(p + ".")
            ),
            None,
        )
        if step is None:
            break
        new = old = step
    return new


class _AliasLoader(importlib.abc.Loader):
    """Returns the already-imported new module as the old name's module (no second execution)."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"`{self.old}` moved to `{self.new}` in calibprob {MOVED_IN}; the old path is removed in "
            f"{REMOVED_IN}. Import from `{self.new}` instead.",
            FutureWarning,
            stacklevel=2,
        )
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the new module was executed under its own name."""


class _MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the old dotted names in :data:`MOVED` before the file system is searched."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        """A spec whose loader aliases ``fullname`` to its new module, or None when it did not move."""
        new = new_name(fullname) if fullname.startswith("calibprob.") else None
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(fullname, new))


def install() -> None:
    """Put the finder first on :data:`sys.meta_path` (idempotent; ``import calibprob`` calls it)."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())


# --- renamed keyword arguments ------------------------------------------------------------------------------------

#: The attribute :func:`renamed_keywords` sets on the function it wraps: old name -> (new name, converter or None).
RENAMED_ATTR = "__calibprob_renamed_keywords__"


def _call_name(func: Callable[..., Any]) -> str:
    """How a user writes the call: ``Class(...)`` for ``__init__``, ``Class.method(...)``, ``function(...)``."""
    owner, _, name = func.__qualname__.rpartition(".")
    if name == "__init__" and owner:
        return owner
    return func.__qualname__ if owner else f"calibprob.{name}"


def _passed_positionally(sig: inspect.Signature, name: str, n_args: int) -> bool:
    """Whether the parameter ``name`` of ``sig`` received one of the ``n_args`` positional arguments."""
    names = list(sig.parameters)
    param = sig.parameters[name]
    return param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD) and names.index(name) < n_args


def warn_renamed(what: str, old: str, new: str, write: str, *, stacklevel: int = 2) -> None:
    """The one :class:`FutureWarning` of a renamed argument or spec option: old name, new name, removal release.

    Parameters
    ----------
    what : str
        What the user wrote (``"ConformalBayes(block_rows=...)"``, ``"methods.cqr.variant"``).
    old, new : str
        The old and the new name.
    write : str
        What to write instead (``"ConformalBayes(chunk_size=...)"``, ``'score = "cqr-r"'``).
    stacklevel : int, default 2
        Of the warning, counted from the caller of this function.
    """
    warnings.warn(
        f"{what} is deprecated: the argument is now called {new!r} (one name per idea across calibprob); the old "
        f"name {old!r} is removed in calibprob {REMOVED_IN}. Write {write}.",
        FutureWarning,
        stacklevel=stacklevel + 1,
    )


def renamed_keywords(
    renames: Mapping[str, str | tuple[str, Callable[[Any], Any]]], *, where: str | None = None
) -> Callable[[_F], _F]:
    """Keep old keyword names of a function working for one release, with a :class:`FutureWarning`.

    The one way calibprob renames an argument: the decorated function's signature has only the new
    names; a call with an old one warns (the old name, the new one, :data:`REMOVED_IN`, and the call
    to write instead) and runs exactly as the call with the new name, so the result is the same bit
    for bit. A call that gives both the old and the new name (by keyword, or the new one by
    position) is refused with a :class:`TypeError` naming both.

    Parameters
    ----------
    renames : mapping
        Old keyword -> new keyword, or -> ``(new keyword, converter)`` when the old argument's
        values differ too (``normalize=False`` is ``score="signed-absolute"``): the converter maps
        an old value to the new argument's value, and refuses a bad one naming the old argument.
    where : str, optional
        The call as the user writes it, for the messages (default: ``Class`` for ``__init__``,
        ``Class.method``, or ``calibprob.function``).

    Returns
    -------
    callable
        The decorator. The wrapped function keeps its signature (``inspect.signature`` follows
        ``__wrapped__``) and carries the table under :data:`RENAMED_ATTR` for :func:`current_keywords`.

    Examples
    --------
    >>> import warnings
    >>> @renamed_keywords({"block_rows": "chunk_size"}, where="f")
    ... def f(*, chunk_size=None):
    ...     return chunk_size
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     f(block_rows=8)
    8
    >>> caught[0].category.__name__, "removed in calibprob 0.3.0" in str(caught[0].message)
    ('FutureWarning', True)
    """
    table = {old: (new, None) if isinstance(new, str) else (new[0], new[1]) for old, new in renames.items()}

    def decorate(func: _F) -> _F:
        sig = inspect.signature(func)
        for old, (new, _) in table.items():
            if new not in sig.parameters or old in sig.parameters:  # a mistake in calibprob itself, at import
                raise TypeError(
                    f"renamed_keywords on {func.__qualname__}: the signature must have the new name {new!r} and "
                    f"not the old one {old!r}; rename the parameter in the signature."
                )
        label = where or _call_name(func)

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not table.keys() & kwargs.keys():
                return func(*args, **kwargs)
            for old in table.keys() & kwargs.keys():
                new, convert = table[old]
                value = kwargs.pop(old)
                if new in kwargs or _passed_positionally(sig, new, len(args)):
                    raise TypeError(
                        f"{label}() got both {old}= and {new}=; {old} is the old name of {new} (removed in "
                        f"calibprob {REMOVED_IN}): pass {new}= only."
                    )
                kwargs[new] = value if convert is None else convert(value)
                shown = "..." if convert is None else repr(kwargs[new])
                warn_renamed(f"{label}({old}=...)", old, new, f"{label}({new}={shown})", stacklevel=3)
            return func(*args, **kwargs)

        setattr(wrapper, RENAMED_ATTR, table)
        return wrapper  # type: ignore[return-value]

    return decorate


def current_keywords(func: Callable[..., Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with every old keyword of ``func`` (see :func:`renamed_keywords`) under its new name, silently.

    For :func:`calibprob.load`: a file saved by an earlier release holds the old parameter names
    (a 0.1.0 ``ConformalPredictiveSystem`` its ``normalize``); the user did not write them, so no
    warning. A name that is both old and new in ``params`` keeps the new one's value.

    Examples
    --------
    >>> @renamed_keywords({"block_rows": "chunk_size"})
    ... def g(*, chunk_size=None):
    ...     return chunk_size
    >>> current_keywords(g, {"block_rows": 8, "other": 1})
    {'other': 1, 'chunk_size': 8}
    """
    table = getattr(func, RENAMED_ATTR, {})
    out = {k: v for k, v in params.items() if k not in table}
    for old, (new, convert) in table.items():
        if old in params and new not in out:
            out[new] = params[old] if convert is None else convert(params[old])
    return out
