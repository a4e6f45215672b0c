"""Sphinx configuration for the calibprob documentation (built with -W: warnings are errors)."""

import sys
from pathlib import Path

import calibprob

# docs/_ext: the calibprob_api extension (every public name documented; re-exports link)
sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "calibprob"
author = "the calibprob developers"
copyright = "2026, the calibprob developers"
release = calibprob.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.intersphinx",
    "numpydoc",
    "calibprob_api",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

templates_path = ["_templates"]
autosummary_generate = True
autodoc_typehints = "none"
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
numpydoc_class_members_toctree = False

# no network on the build machines: no intersphinx inventories are fetched
intersphinx_mapping = {}

html_theme = "pydata_sphinx_theme"
html_title = "calibprob"
html_static_path = ["_static"]
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
nitpicky = True  # every cross-reference must resolve (issue 40); third-party ones below
# Third-party targets named in docstrings: no intersphinx inventory can be fetched on these offline
# machines, so these stay plain text (nitpicky builds, `sphinx -n`, would otherwise flag them).
nitpick_ignore = [
    ("py:mod", "pickle"),
    ("py:func", "sklearn.utils.all_estimators"),
    ("py:func", "pymc.Minibatch"),
    ("py:func", "pymc.pytensorf.reseed_rngs"),
    ("py:class", "pymc.gp.cov.Covariance"),
    ("py:class", "arviz_stats.utils.ELPDDataLOOKFold"),
]


def _constant_docstring(app, what, name, obj, options, lines):
    """Describe a re-exported module constant by the ``#:`` comment where it is defined.

    ``autodata`` reads ``#:`` comments only in the module named in the directive, and
    otherwise shows the docstring of the value's type (``tuple``, ``ndarray``); the public
    names ``calibprob.DEFAULT_LEVELS``, ``calibprob.calibrators.online.COUPLINGS``, … are re-exports.
    """
    import sys

    from sphinx.pycode import ModuleAnalyzer

    if what != "data" or not name.startswith("calibprob."):
        return
    attr = name.rsplit(".", 1)[1]
    for modname in sorted(m for m in sys.modules if m == "calibprob" or m.startswith("calibprob.")):
        if vars(sys.modules[modname]).get(attr, None) is not obj:
            continue
        comment = ModuleAnalyzer.for_module(modname).find_attr_docs().get(("", attr))
        if comment:
            lines[:] = [line for line in comment]
            return


def setup(app):
    app.connect("autodoc-process-docstring", _constant_docstring, priority=400)
