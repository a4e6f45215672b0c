"""The documentation: it builds with warnings as errors, its links resolve, and every public
name has a complete numpydoc docstring whose examples run.

The build runs once per session (about 30 s); the docstring checks import the package only.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import inspect
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

import numpy as np
import pytest

from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
DOCS = ROOT / "docs"


def _api_extension():
    """docs/_ext/calibprob_api.py, the Sphinx extension that reads the public API from ``__all__``."""
    spec = importlib.util.spec_from_file_location("calibprob_api", DOCS / "_ext" / "calibprob_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Modules whose public names must have complete numpydoc docstrings (the API reference itself
#: covers more: every public package's ``__all__``, found by docs/_ext/calibprob_api.py).
PUBLIC_MODULES = (
    "calibprob",
    "calibprob.predictive",
    "calibprob.bases.gp",
    "calibprob.calibrators.conformal",
    "calibprob.calibrators",
    "calibprob.calibrators.online",
    "calibprob.bo",
    "calibprob.compare",
    "calibprob.datasets",
    "calibprob.metrics",
    "calibprob.monitoring",
    "calibprob.plots",
    "calibprob.weights",
)


def public_names():
    """``[(module, name, object)]`` for every name in the public modules' ``__all__``."""
    out = []
    for modname in PUBLIC_MODULES:
        module = importlib.import_module(modname)
        for name in module.__all__:
            out.append((modname, name, getattr(module, name)))
    return out


def public_objects():
    """Each public callable once (re-exports share one object): ``{id: (qualified name, obj)}``."""
    seen = {}
    for modname, name, obj in public_names():
        if callable(obj) and id(obj) not in seen:
            seen[id(obj)] = (f"{modname}.{name}", obj)
    return seen


# ---------------------------------------------------------------------------
# (a) the build
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def html(tmp_path_factory):
    """Build the docs with ``sphinx -W --keep-going`` into a temporary directory."""
    for module in ("sphinx", "myst_parser", "numpydoc", "pydata_sphinx_theme"):
        pytest.importorskip(module)
    out = tmp_path_factory.mktemp("docs")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = [
        sys.executable,
        "-m",
        "sphinx",
        "-W",
        "--keep-going",
        "-q",
        "-b",
        "html",
        "-d",
        str(out / "doctrees"),
        str(DOCS),
        str(out / "html"),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, f"sphinx -W failed:\n{proc.stderr[-6000:]}"
    return out / "html"


def test_docs_build_without_warnings(html):
    for page in ("index", "getting-started", "concepts", "methods/index", "spec", "benchmarks", "data", "api"):
        assert (html / f"{page}.html").is_file(), page
    for page in ("gp", "conformal", "recalibration", "gp-beta", "sharp-gp", "online-bo"):
        assert (html / "methods" / f"{page}.html").is_file(), page


# ---------------------------------------------------------------------------
# (b) internal links
# ---------------------------------------------------------------------------


class _PageParser(HTMLParser):
    """Collect ids, internal links and unresolved cross-references of one HTML page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[str, str]] = []  # (attribute, value)
        self.unresolved: list[str] = []
        self._in_a = 0
        self._xref: list | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        if tag in ("a", "link") and attrs.get("href") is not None:
            self.links.append(("href", attrs["href"]))
        if tag in ("img", "script") and attrs.get("src"):
            self.links.append(("src", attrs["src"]))
        if tag == "a":
            self._in_a += 1
        classes = (attrs.get("class") or "").split()
        if tag in ("code", "span") and "xref" in classes and not self._in_a and self._xref is None:
            self._xref = [tag, ""]

    def handle_endtag(self, tag):
        if tag == "a":
            self._in_a = max(0, self._in_a - 1)
        if self._xref is not None and tag == self._xref[0]:
            self.unresolved.append(self._xref[1].strip())
            self._xref = None

    def handle_data(self, data):
        if self._xref is not None:
            self._xref[1] += data


@pytest.fixture(scope="module")
def pages(html):
    parsed = {}
    for path in sorted(html.rglob("*.html")):
        if path.relative_to(html).parts[0] == "_static":
            continue  # theme templates copied verbatim, not pages
        parser = _PageParser()
        parser.feed(path.read_text(encoding="utf-8"))
        parsed[path.resolve()] = parser
    return parsed


def test_internal_links_resolve(html, pages):
    broken = []
    for page, parser in pages.items():
        for attr, value in parser.links:
            parts = urlsplit(value)
            if parts.scheme or value.startswith("//") or value in ("", "#"):
                continue  # external (checked by nobody on an offline machine) or a no-op anchor
            target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{page.relative_to(html.resolve())}: {attr}={value!r} (no file)")
                continue
            fragment = unquote(parts.fragment)
            if fragment and target.suffix == ".html":
                if fragment not in pages[target.resolve()].ids:
                    broken.append(f"{page.relative_to(html.resolve())}: {attr}={value!r} (no anchor #{fragment})")
    assert not broken, f"{len(broken)} broken internal link(s):\n" + "\n".join(broken[:200])


def test_cross_references_in_written_pages_resolve(html, pages):
    """Every ``{class}``/``{func}``/``{doc}`` role in the hand-written pages links somewhere."""
    bad = []
    for page, parser in pages.items():
        rel = page.relative_to(html.resolve()).as_posix()
        if rel.startswith(("api", "_", "genindex", "search", "py-modindex")):
            continue  # generated pages: docstrings may name private helpers
        bad += [f"{rel}: {text}" for text in parser.unresolved]
    assert not bad, "unresolved cross-reference(s):\n" + "\n".join(bad)


def test_every_public_name_is_in_the_api_reference(html, pages):
    """Each name of every public ``__all__`` (calibprob's and each public subpackage's, read from the
    package by the docs extension) has an anchor in the built API reference (re-exports: under one of
    their names; a constant under its own name)."""
    anchors = set()
    for page, parser in pages.items():
        if page.relative_to(html.resolve()).as_posix().startswith("api"):
            anchors |= parser.ids
    names = _api_extension().public_names()
    aliases: dict[int, set[str]] = {}
    for modname, name, obj in names:
        aliases.setdefault(id(obj), set()).add(f"{modname}.{name}")

    def found(modname, name, obj):
        if f"{modname}.{name}" in anchors:
            return True
        same = aliases[id(obj)] if callable(obj) else {a for a in aliases[id(obj)] if a.endswith("." + name)}
        return bool(same & anchors)

    missing = sorted(f"{modname}.{name}" for modname, name, obj in names if not found(modname, name, obj))
    assert not missing, "not in docs/api.md: " + ", ".join(missing)


#: The packages the API reference must cover whatever else the discovery finds.
_EXPECTED_PUBLIC = (
    "calibprob",
    "calibprob.predictive",
    "calibprob.metrics",
    "calibprob.plots",
    "calibprob.compare",
    "calibprob.datasets",
    "calibprob.calibrators",
    "calibprob.calibrators.conformal",
    "calibprob.calibrators.online",
    "calibprob.bases.gp",
    "calibprob.bo",
    "calibprob.transforms",
    "calibprob.registry",
)


def test_public_modules_are_found_from_the_package():
    """The public modules are every public package with ``__all__`` and each top-level module with one;
    never a private module, never a module inside a package."""
    found = _api_extension().public_modules()
    assert set(_EXPECTED_PUBLIC) <= set(found), sorted(set(_EXPECTED_PUBLIC) - set(found))
    assert not [m for m in found if any(part.startswith("_") for part in m.split("."))]
    assert "calibprob.compare.runner" not in found  # implementation: its __all__ serves the package
    assert set(PUBLIC_MODULES) <= set(found)


def _api_md_entries() -> set[str]:
    """The dotted names listed in docs/api.md's autosummary tables (without a Sphinx build)."""
    listed, current, in_table = set(), None, False
    for line in (DOCS / "api.md").read_text(encoding="utf-8").splitlines():
        text = line.strip()
        if text.startswith((".. currentmodule::", ".. py:module::")):
            current = text.split("::", 1)[1].strip()
        directive = re.match(r"\.\. (?:py:(?:data|function|class)|auto(?:data|function|class))::\s*(\S+)", text)
        if directive:
            listed.add(f"{current}.{directive.group(1)}")
        if text.startswith(".. autosummary::"):
            in_table = True
        elif in_table and text.startswith("```"):
            in_table = False
        elif in_table and text and not text.startswith((":", "..")):
            name = text.lstrip("~")
            listed.add(name if name.startswith("calibprob.") else f"{current}.{name}")
    return listed


def test_api_md_lists_every_public_name():
    """Without building: every public name is an autosummary entry of docs/api.md under one of the
    names it is exported as (a fast check of what the docs build enforces)."""
    ext = _api_extension()
    listed = _api_md_entries()
    documented: dict[int, list[str]] = {}
    for entry in sorted(listed):
        try:
            documented.setdefault(id(ext.resolve(entry)), []).append(entry)
        except LookupError:
            pass
    missing = ext.missing_names(listed, documented)
    assert not missing, "add to an autosummary table of docs/api.md: " + ", ".join(missing)


def test_the_coverage_check_names_a_missing_public_name():
    """The docs build's check fails for a public name that nothing documents, and only for it."""
    ext = _api_extension()
    listed = _api_md_entries() - {"calibprob.evaluate"}
    documented: dict[int, list[str]] = {}
    for entry in sorted(listed):
        try:
            documented.setdefault(id(ext.resolve(entry)), []).append(entry)
        except LookupError:
            pass
    # exported twice (calibprob.evaluate, calibprob.metrics.evaluate), documented under neither
    assert sorted(ext.missing_names(listed, documented)) == ["calibprob.evaluate", "calibprob.metrics.evaluate"]


# ---------------------------------------------------------------------------
# (c) numpydoc docstrings
# ---------------------------------------------------------------------------


def _takes_arguments(obj) -> bool:
    if inspect.isclass(obj):
        # only a Python-level __init__ (its own or a calibprob base's) documents parameters;
        # exceptions and warnings inherit the builtin one
        init = next((c.__dict__["__init__"] for c in obj.__mro__ if "__init__" in c.__dict__), None)
        if not inspect.isfunction(init):
            return False
        params = list(inspect.signature(init).parameters.values())[1:]
    else:
        params = list(inspect.signature(obj).parameters.values())
    return bool(params)


def _returns_none(func) -> bool:
    """Annotated ``-> None``: a procedure, which numpydoc documents without a Returns section."""
    return inspect.signature(func).return_annotation in (None, "None")


def docstring_problems(obj) -> list[str]:
    """The numpydoc sections ``obj``'s docstring lacks (empty list: complete)."""
    from numpydoc.docscrape import NumpyDocString

    text = inspect.getdoc(obj)
    if not text:
        return ["docstring"]
    try:
        doc = NumpyDocString(text)
    except Exception as err:  # numpydoc raises on malformed sections
        return [f"parseable docstring ({err})"]
    missing = []
    if _takes_arguments(obj) and not doc["Parameters"]:
        missing.append("Parameters")
    if not inspect.isclass(obj) and not (doc["Returns"] or doc["Yields"]) and not _returns_none(obj):
        missing.append("Returns")
    if not doc["Examples"]:
        missing.append("Examples")
    if not doc["References"] and cites_a_work(doc):
        missing.append("References (the text cites a work)")
    return missing


#: An author-year citation in running text: "Vovk et al. (2020)", "Capone, Hirche & Pleiss (2023)",
#: "Barber et al. 2021", "Song and Flach (2019)", "Titsias (2009)"; not a capitalised word before a number.
_NAME = r"[A-Z][\w'-]+"
_YEAR = r"(?:1[89]|20)\d\d[a-z]?\b"
_CITATION = re.compile(
    rf"\b{_NAME}(?: et al\.| (?:and|&) {_NAME}|(?:, {_NAME})+,? (?:and|&) {_NAME}),? \(?{_YEAR}"  # authors, year
    rf"|\b{_NAME},? \({_YEAR}"  # one author, (year)
)


def cites_a_work(doc) -> bool:
    """Whether the docstring's text (everything but its References and Examples) cites a paper or book.

    A docstring that cites a work gives the full entry under References; one that cites none (a warning,
    an exception, a plumbing function) needs no References section.
    """
    parts = list(doc["Summary"]) + list(doc["Extended Summary"]) + list(doc["Notes"])
    for section in ("Parameters", "Returns", "Yields", "Attributes", "Raises", "Warns"):
        for item in doc[section]:
            parts += [item.name, item.type, *item.desc]
    return bool(_CITATION.search(" ".join(parts)))


def test_the_citation_rule_finds_author_year_citations():
    """What counts as citing a work (and so needs References): author-year forms, not bare years or names."""
    from numpydoc.docscrape import NumpyDocString

    cited = ("Barber et al. (2021) prove it.", "As in Capone, Hirche & Pleiss (2023).", "Vovk (2005), ch. 4.")
    for text in (*cited, "Song and Flach 2019"):
        assert cites_a_work(NumpyDocString(text)), text
    for text in ("Raised when the CDF decreases.", "Keeps 2000 draws per chain.", "The Branin function."):
        assert not cites_a_work(NumpyDocString(text)), text


def test_public_callables_have_complete_numpydoc_docstrings():
    """Parameters, Returns and Examples everywhere; References wherever the text cites a work."""
    pytest.importorskip("numpydoc")
    offenders = []
    for qualname, obj in public_objects().values():
        missing = docstring_problems(obj)
        if missing:
            offenders.append(f"{qualname}: {', '.join(missing)}")
    assert not offenders, f"{len(offenders)} public name(s) with incomplete docstrings:\n" + "\n".join(offenders)


def test_public_constants_are_described():
    """A public constant has no docstring of its own: its definition carries a ``#:`` comment."""
    from sphinx.pycode import ModuleAnalyzer

    undocumented = []
    for modname, name, obj in public_names():
        if callable(obj) or name == "__version__":
            continue
        homes = [
            m
            for m in sorted(sys.modules)
            if (m == "calibprob" or m.startswith("calibprob.")) and vars(sys.modules[m]).get(name, None) is obj
        ]
        if not any(("", name) in ModuleAnalyzer.for_module(m).find_attr_docs() for m in homes):
            undocumented.append(f"{modname}.{name}")
    assert not undocumented, "constants without a '#:' comment: " + ", ".join(undocumented)


def test_public_examples_run():
    """Every Examples section runs and prints what it says (doctest, in the defining module's namespace)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    failures = []
    for qualname, obj in public_objects().values():
        home = sys.modules[obj.__module__]
        for test in finder.find(obj, qualname, module=home, globs=dict(vars(home))):
            out: list[str] = []
            result = runner.run(test, out=out.append)
            plt.close("all")
            if result.failed:
                failures.append("".join(out))
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_method_pages_examples_run():
    """The python example of every method page runs as written (about 40 s)."""
    import matplotlib

    matplotlib.use("Agg")
    for page in sorted((DOCS / "methods").glob("*.md")):
        for block in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S):
            exec(compile(block, str(page), "exec"), {"__name__": "__main__"})


@pytest.mark.slow
def test_hierarchical_howto_runs(capsys):
    """docs/examples/hierarchical-model.md: its python blocks run in order as one script (PyMC and bambi
    fits, every route; 109 s at a load of 9 on the shared 2-core machine) and print the minimum group
    sizes the page states."""
    import matplotlib

    matplotlib.use("Agg")
    page = (DOCS / "examples" / "hierarchical-model.md").read_text(encoding="utf-8")
    namespace = {"__name__": "__main__"}
    for block in re.findall(r"```python\n(.*?)```", page, flags=re.S):
        exec(compile(block, "examples/hierarchical-model.md", "exec"), namespace)
    printed = capsys.readouterr().out
    stated = re.search(r"`(\{\(0\.8, 'split-conformal'\): 4.*?\})`", page).group(1)
    assert stated in printed
    assert set(namespace["scored"]) >= {"conformal Bayes", "conformal Bayes, grouped", "Mondrian split conformal"}


def test_comparison_example_prints_what_it_shows(capsys):
    """docs/examples/comparison.md runs one whole comparison, the one place an example does (the comparison
    functions' docstrings point to it), and prints exactly the text block shown under it."""
    import matplotlib

    matplotlib.use("Agg")
    page = (DOCS / "examples" / "comparison.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", page, flags=re.S).group(1)
    shown = re.search(r"```text\n(.*?)```", page, flags=re.S).group(1)
    exec(compile(code, "examples/comparison.md", "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out.strip() == shown.strip()


def test_getting_started_prints_what_it_shows(capsys):
    """The first example of docs/getting-started.md prints the text block shown under it."""
    page = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    section = page[page.index("## A first example") :]
    code = re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)
    shown = re.search(r"```text\n(.*?)```", section, flags=re.S).group(1)
    exec(compile(code, "getting-started.md", "exec"), {"__name__": "__main__"})
    printed = capsys.readouterr().out
    number = r"-?\d+\.\d+"
    assert re.sub(number, "#", printed).split() == re.sub(number, "#", shown).split()
    np.testing.assert_allclose(
        [float(v) for v in re.findall(number, printed)],
        [float(v) for v in re.findall(number, shown)],
        rtol=2e-3,
        atol=6e-3,
    )
