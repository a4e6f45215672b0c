"""Comparison reports: the text table, the PNG plots and one self-contained HTML page.

``text`` (the table), ``plots`` (PNG files),
``html`` with ``figures`` (the HTML page),
``group_plots`` (coverage by group) and
``results`` (reading a results file).
"""

from __future__ import annotations

from calibprob.compare.report.html import DIAGNOSTIC_NAMES, GROUP_SECTION, HTML_SECTIONS, write_html  # noqa: F401
from calibprob.compare.report.plots import write_plots
from calibprob.compare.report.results import load_results
from calibprob.compare.report.text import LOWER_IS_BETTER, format_table, summary

__all__ = ["summary", "format_table", "write_plots", "load_results", "LOWER_IS_BETTER"]
