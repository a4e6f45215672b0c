"""Old import paths that keep working for one release after a module moved.

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

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

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
}


def new_name(old: str) -> str | None:
    """The new dotted name of the old module ``old``, or None when ``old`` did not move.

    The longest matching moved prefix wins, so a module can move out of a package that moved elsewhere.
    """
    for prefix in sorted(MOVED, key=len, reverse=True):
        if old == prefix or old.startswith(prefix + "."):
            return MOVED[prefix] + old[len(prefix) :]
    return None


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

    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001, ANN201 (importlib's protocol)
        """A spec whose loader aliases ``fullname`` to its new module, or None when it did not move."""
        new = new_name(fullname) if fullname.startswith("calibprob.") else None
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(fullname, new))


def install() -> None:
    """Put the finder first on :data:`sys.meta_path` (idempotent; ``import calibprob`` calls it)."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
