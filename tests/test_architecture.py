"""The package's import graph, read from the source with :mod:`ast`: no circle, and imports inside
functions only for heavy optional dependencies.

The graph has one node per module of ``calibprob/`` (a package is its ``__init__``) and an edge
``a -> b`` for every ``import`` statement of ``a`` that names ``b``, at module level *and* inside
functions (an import in a function still runs ``b`` before ``a`` can finish the call, so a circle
through it is a circle all the same). Resolution:

* ``import calibprob.x.y`` and ``from calibprob.x.y import name`` -> ``calibprob.x.y``;
* ``from calibprob.x import y`` -> ``calibprob.x.y`` when ``y`` is a submodule, else
  ``calibprob.x`` (``from calibprob import metrics`` is an edge to ``calibprob.metrics``);
* relative imports (``from . import a``, ``from ..b import c``) resolved against the module's package;
* imports under ``if TYPE_CHECKING:`` are excluded: they never run, so they cannot close a circle;
* the implicit import of a parent package (``calibprob.x.y`` runs ``calibprob/x/__init__`` first) is
  not an edge: the parent is always initialised before the child, so such an edge would only add
  circles that Python resolves by construction;
* ``importlib.import_module(<expression>)`` (the registry's lazy tables, ``calibprob.load``'s class
  lookup) cannot be resolved statically; those calls are counted and listed, not drawn.

An import inside a function is allowed only for a heavy dependency: a name of :data:`HEAVY`, or a
*door* -- a calibprob module that itself imports a name of :data:`HEAVY` at module level (a PyTensor
``Op`` module, say), so importing it costs what importing that dependency costs. A door is read from
the source like everything else (:attr:`Graph.doors`), never listed by hand.

Run ``PYTHONPATH=. python tests/test_architecture.py [path/to/calibprob]`` to print the figures for any tree (used
to measure the tree before the persistence change, commit da54378).
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.paths import PACKAGE

ROOT = PACKAGE

#: What an import inside a function may name: heavy dependencies whose import cost (seconds for PyMC /
#: PyTensor / Dask, a GUI backend for matplotlib) ``import calibprob``, ``calibprob --help`` and
#: validating a spec should not pay. A name with a dot is a heavy subpackage of a light library: an
#: import of it or of anything under it counts. Everything else, calibprob's own modules first, is
#: imported at module level.
HEAVY = frozenset(
    {
        "pymc",
        "pytensor",
        "dask",
        "distributed",
        "matplotlib",
        "h5py",
        "h5netcdf",
        "sklearn",
        "arviz",
        "arviz_base",
        "arviz_stats",
        "bambi",  # the bambi door of conformal Bayes, only for a model built by bambi
        "numba",  # conformal Bayes's fused kernels, compiled on first use (importing it takes ~0.3 s)
        # scipy itself is light (``import calibprob`` loads it), but scipy.stats adds about 0.85 s,
        # more than ``import calibprob`` takes (measured after ``import calibprob.cli``:
        # ``t = time.perf_counter(); import scipy.stats.qmc``); only Latin-hypercube / Sobol' designs need it
        "scipy.stats",
    }
)


def is_heavy(name: str) -> bool:
    """Whether an imported name is :data:`HEAVY` (``pymc.math`` and ``scipy.stats.qmc`` are; ``scipy`` is not)."""
    parts = name.split(".")
    return any(".".join(parts[:i]) in HEAVY for i in range(1, len(parts) + 1))


@dataclass
class Graph:
    """The import graph of one package tree."""

    modules: set[str] = field(default_factory=set)
    edges: dict[str, set[str]] = field(default_factory=dict)
    #: every import inside a function: (module, line, imported name or calibprob module)
    local_imports: list[tuple[str, int, str]] = field(default_factory=list)
    #: doors: calibprob modules importing a heavy dependency at module level -> that dependency
    doors: dict[str, str] = field(default_factory=dict)
    #: importlib.import_module calls whose argument is not a literal: (module, line)
    dynamic: list[tuple[str, int]] = field(default_factory=list)
    type_checking_only: int = 0

    @property
    def n_edges(self) -> int:
        return sum(len(v) for v in self.edges.values())


def module_name(path: Path, root: Path) -> str:
    """``calibprob/a/b.py`` -> ``calibprob.a.b``; ``calibprob/a/__init__.py`` -> ``calibprob.a``."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Collector(ast.NodeVisitor):
    """Every import statement of one module with whether it sits in a function."""

    def __init__(self):
        self.found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
        self.dynamic: list[int] = []
        self.type_checking = 0
        self._depth = 0

    def _function(self, node) -> None:
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self.type_checking += sum(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(node))
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found.append((node, self._depth > 0))

    visit_ImportFrom = visit_Import

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name == "import_module" and not (node.args and isinstance(node.args[0], ast.Constant)):
            self.dynamic.append(node.lineno)
        self.generic_visit(node)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_pkg: bool, top: str) -> list[str]:
    """The dotted names an import statement names (relative ones made absolute; ``top`` is the package's name)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        package = module.split(".") if is_pkg else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join(package + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    subs = [f"{base}.{alias.name}" for alias in node.names]
    if base.split(".")[0] == top:  # a submodule, or a name that _resolve cuts back to its module
        return subs
    # another library: the module imported from, unless the name is a heavy subpackage of it (from scipy import stats)
    return [sub if is_heavy(sub) and not is_heavy(base) else base for sub in subs]


def _resolve(name: str, modules: set[str]) -> str:
    """The longest module of the tree that ``name`` starts with (``calibprob.x.Class`` -> ``calibprob.x``)."""
    parts = name.split(".")
    while parts and ".".join(parts) not in modules:
        parts.pop()
    return ".".join(parts)


def build_graph(root: Path = ROOT) -> Graph:
    """The import graph of the package at ``root`` (see the module docstring for the rules)."""
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph = Graph(modules=set(files))
    top = root.name
    for module, path in files.items():
        collector = _Collector()
        collector.visit(ast.parse(path.read_text(encoding="utf-8")))
        graph.type_checking_only += collector.type_checking
        graph.dynamic += [(module, line) for line in collector.dynamic]
        edges = graph.edges.setdefault(module, set())
        for node, local in collector.found:
            names = _targets(node, module, path.name == "__init__.py", top)
            for target in dict.fromkeys(_resolve(t, graph.modules) if t.split(".")[0] == top else t for t in names):
                own = target.split(".")[0] == top
                if own and target != module:
                    edges.add(target)
                if local:
                    graph.local_imports.append((module, node.lineno, target))
                elif not own and is_heavy(target):
                    graph.doors.setdefault(module, target)
    return graph


def components(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan): every module of one
    component reaches every other, so each lies on a circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph.modules):
        if v not in index:
            visit(v)
    return found


def cycles(graph: Graph) -> list[list[str]]:
    """One circle per component of :func:`components`, closed (its first module repeated last)."""
    return [_circle_in(graph, comp) for comp in components(graph)]


def _circle_in(graph: Graph, comp: list[str]) -> list[str]:
    """The shortest circle through the first module of a strongly connected component."""
    members, start = set(comp), comp[0]
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.edges.get(v, ())):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [*reversed(path), start]
                if w in members and w not in parent:
                    parent[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{comp} is not strongly connected")  # pragma: no cover - Tarjan's invariant


def disallowed_local_imports(graph: Graph) -> list[tuple[str, int, str]]:
    """Imports inside functions of anything but a heavy dependency or a door to one."""
    return [(m, line, t) for m, line, t in graph.local_imports if not (is_heavy(t) or t in graph.doors)]


def summary(graph: Graph) -> str:
    """The figures: graph size, circles (with their size), imports inside functions by target."""
    comps = components(graph)
    by_target = Counter(t.split(".")[0] for _, _, t in graph.local_imports)
    door_imports = sorted({(t, graph.doors[t]) for _, _, t in graph.local_imports if t in graph.doors})
    lines = [
        f"modules {len(graph.modules)}, edges {graph.n_edges}, "
        f"TYPE_CHECKING-only imports excluded {graph.type_checking_only}, "
        f"dynamic import_module calls (not drawn) {len(graph.dynamic)}",
        f"strongly connected components (circles) {len(comps)}",
    ]
    for comp in comps:
        lines.append(f"  {len(comp)} modules: {', '.join(comp)}")
        lines.append("    e.g. " + " -> ".join(_circle_in(graph, comp)))
    lines.append(
        f"function-level imports {len(graph.local_imports)} "
        f"(not heavy: {len(disallowed_local_imports(graph))}): "
        + ", ".join(f"{k} {v}" for k, v in by_target.most_common())
    )
    lines.append(
        f"doors (calibprob modules importing a heavy dependency at module level) {len(graph.doors)}; "
        "imported inside functions: " + (", ".join(f"{m} ({dep})" for m, dep in door_imports) or "none")
    )
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the checks


def test_the_import_graph_has_no_circle():
    graph = build_graph()
    print(summary(graph))
    found = cycles(graph)
    assert not found, "import circles (break each by moving the shared piece down a layer):\n" + "\n".join(
        " -> ".join(c) for c in found
    )


def test_function_level_imports_only_for_heavy_optional_dependencies():
    # 177 at commit da54378, 136 before the reorganisation by role, 34 after it (32 by the rules here, which
    # count the import of sharp_gp._op, a door, and of scipy.stats as heavy), none since
    graph = build_graph()
    bad = disallowed_local_imports(graph)
    print(f"function-level imports: {len(graph.local_imports)}, of them not a heavy dependency: {len(bad)}")
    assert not bad, (
        f"{len(bad)} function-level imports of light modules: import calibprob's modules and light libraries at "
        "module level (only heavy dependencies, and calibprob modules that import one at module level, are "
        "imported in functions):\n" + "\n".join(f"{m}:{line} imports {t}" for m, line, t in bad)
    )


# ----------------------------------------------------------------------------- the checker checked


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_checker_finds_a_circle_through_a_function_level_and_a_relative_import(tmp_path):
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from pkg import b\n",
            "b.py": "from .sub import c\n",
            "sub/__init__.py": "",
            "sub/c.py": "def f():\n    from ..a import x\n    import sklearn\n    import json\n",
        },
    )
    graph = build_graph(root)
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]]
    assert graph.local_imports == [("pkg.sub.c", 2, "pkg.a"), ("pkg.sub.c", 3, "sklearn"), ("pkg.sub.c", 4, "json")]
    assert [t for _, _, t in disallowed_local_imports(graph)] == ["pkg.a", "json"]


def test_the_checker_skips_type_checking_imports_and_parent_packages(tmp_path):
    root = _package(
        tmp_path,
        {
            "__init__.py": "from pkg.x.y import Y\n",
            "x/__init__.py": "",
            "x/y.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import z\nY = 1\n",
            "z.py": "from pkg.x import y\n",
        },
    )
    graph = build_graph(root)
    assert graph.edges["pkg"] == {"pkg.x.y"} and graph.edges["pkg.z"] == {"pkg.x.y"}
    assert graph.type_checking_only == 1 and cycles(graph) == []


def test_the_checker_allows_heavy_subpackages_and_doors_to_a_heavy_dependency_only(tmp_path):
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "door.py": "import numpy as np\nfrom pytensor.graph import Op\n",
            "lazy.py": "def f():\n    import pytensor\n",
            "hidden.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pymc\n",
            "user.py": (
                "def f():\n    from pkg.door import Op\n    from pkg import lazy\n    from pkg.hidden import x\n"
                "    from scipy import stats\n    from scipy.stats import qmc\n    from scipy import optimize, special\n"
            ),
        },
    )
    graph = build_graph(root)
    # a door is read from its own module-level imports: not a lazy or a TYPE_CHECKING-only import of PyTensor
    assert graph.doors == {"pkg.door": "pytensor.graph"}
    assert [t for m, _, t in graph.local_imports if m == "pkg.user"] == [
        "pkg.door",
        "pkg.lazy",
        "pkg.hidden",
        "scipy.stats",
        "scipy.stats",
        "scipy",
    ]
    assert [t for _, _, t in disallowed_local_imports(graph)] == ["pkg.lazy", "pkg.hidden", "scipy"]
    assert is_heavy("pymc.math") and is_heavy("scipy.stats.qmc") and not is_heavy("scipy.special")


if __name__ == "__main__":  # pragma: no cover - measurement helper
    print(summary(build_graph(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT)))
