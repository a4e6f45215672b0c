"""Scripted model comparison: specs in ``models/``, a resumable runner (serial or Dask), reports.

:func:`run` runs a spec from Python, with your own models as bases
(``run(spec, bases={"mine": factory})``).

The package is split by concern: :mod:`~calibprob.compare.spec` (the spec's model, its parsing and its
data sets), ``tasks`` (what one task computes), ``assembly``
(part files and the results tree), ``runner`` (running the tasks, serially or on
Dask), :mod:`~calibprob.compare.ranking` and :mod:`~calibprob.compare.report` (text, plots and HTML).
"""

from __future__ import annotations

import importlib
from typing import Any

from calibprob.compare.ranking import format_ranking, rank_results
from calibprob.compare.spec import Spec, SpecError, load_spec, parse_spec

# name -> module that defines it, imported on first access: running a comparison loads every method's
# code (the GPs, conformal, the calibrators) and a report loads SciPy's statistics, which validating a
# spec, `import calibprob.compare` and `calibprob --help` need not pay for (as `calibprob` itself does).
_LAZY = {
    "run": "calibprob.compare.runner",
    "run_comparison": "calibprob.compare.runner",
    "run_task": "calibprob.compare.tasks",
    "task_keys": "calibprob.compare.tasks",
    "gp_choices": "calibprob.compare.tasks",
    "combine_parts": "calibprob.compare.assembly",
    "failed_tasks": "calibprob.compare.assembly",
    "format_table": "calibprob.compare.report",
    "summary": "calibprob.compare.report",
    "write_plots": "calibprob.compare.report",
    "write_html": "calibprob.compare.report",
    "load_results": "calibprob.compare.report",
}
#: Submodules reachable as attributes after ``import calibprob.compare`` (imported on first use).
SUBMODULES = ("assembly", "methods", "ranking", "report", "runner", "spec", "tasks", "online")

__all__ = [
    "Spec",
    "SpecError",
    "load_spec",
    "parse_spec",
    "run",
    "run_comparison",
    "run_task",
    "task_keys",
    "gp_choices",
    "combine_parts",
    "format_table",
    "summary",
    "write_plots",
    "write_html",
    "rank_results",
    "format_ranking",
    "load_results",
]


def __getattr__(name: str) -> Any:
    """The names of :data:`_LAZY` and the :data:`SUBMODULES`, imported on first access."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *SUBMODULES})
