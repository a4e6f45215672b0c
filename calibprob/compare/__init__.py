"""Scripted model comparison: specs in ``models/``, a resumable runner (serial or Dask), reports.

:func:`run` runs a spec from Python, with your own models as bases
(``run(spec, bases={"mine": factory})``).
"""

from calibprob.compare.ranking import format_ranking, rank_results
from calibprob.compare.report import format_table, load_results, summary, write_html, write_plots
from calibprob.compare.runner import combine_parts, run, run_comparison, run_task, task_keys
from calibprob.compare.spec import Spec, SpecError, load_spec, parse_spec

__all__ = [
    "Spec",
    "SpecError",
    "load_spec",
    "parse_spec",
    "run",
    "run_comparison",
    "run_task",
    "task_keys",
    "combine_parts",
    "format_table",
    "summary",
    "write_plots",
    "write_html",
    "rank_results",
    "format_ranking",
    "load_results",
]
