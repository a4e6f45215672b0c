"""Modules moved in the reorganisation by role keep their old import path for one release, with a warning.

Every entry of :data:`calibprob._core.deprecation.MOVED` is checked: the old path imports, warns with a
``FutureWarning`` naming the new path, and gives the *same* module object (so classes are identical across both
names, and pickles or saved files naming the old module still load). calibprob's own code never uses an old path.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import sys
from pathlib import Path

import pytest

import calibprob
from calibprob._core import deprecation

PACKAGE_DIR = Path(calibprob.__file__).parent


def _old_names() -> list[tuple[str, str]]:
    """Every moved module and, for a moved package, each of its submodules, as (old, new) names."""
    pairs = []
    for old, new in sorted(deprecation.MOVED.items()):
        pairs.append((old, new))
        module = importlib.import_module(new)
        for info in pkgutil.walk_packages(getattr(module, "__path__", []), prefix=new + "."):
            pairs.append((old + info.name[len(new) :], info.name))
    return pairs


@pytest.mark.parametrize(("old", "new"), _old_names())
def test_old_path_warns_and_is_the_new_module(old, new):
    new_module = importlib.import_module(new)
    sys.modules.pop(old, None)
    with pytest.warns(FutureWarning, match=rf"`{old}` moved to `{new}`.*Import from `{new}` instead"):
        old_module = importlib.import_module(old)
    assert old_module is new_module


def test_the_finder_maps_prefixes_and_leaves_other_names_alone(monkeypatch):
    monkeypatch.setattr(deprecation, "MOVED", {"calibprob.a": "calibprob.x.a", "calibprob.a.b": "calibprob.y"})
    assert deprecation.new_name("calibprob.a") == "calibprob.x.a"
    assert deprecation.new_name("calibprob.a.c.d") == "calibprob.x.a.c.d"
    assert deprecation.new_name("calibprob.a.b.e") == "calibprob.y.e"  # the longest moved prefix wins
    assert deprecation.new_name("calibprob.ab") is None
    monkeypatch.setitem(deprecation.MOVED, "calibprob.x", "calibprob.z")  # moved twice: the chain is followed
    assert deprecation.new_name("calibprob.a.c") == "calibprob.z.a.c"
    assert deprecation.new_name("calibprob.metrics") is None


def test_a_moved_module_is_imported_through_the_finder(monkeypatch):
    """An invented old name aliases a real module: the mechanism works before any real module has moved."""
    monkeypatch.setitem(deprecation.MOVED, "calibprob.old_place_for_tests", "calibprob._stable")
    monkeypatch.delitem(sys.modules, "calibprob.old_place_for_tests", raising=False)
    # calibprob._stable itself moved to calibprob._core.stable: the warning names the end of the chain
    with pytest.warns(FutureWarning, match=r"`calibprob.old_place_for_tests` moved to `calibprob._core.stable`"):
        from calibprob.old_place_for_tests import pow2_scale
    from calibprob._stable import pow2_scale as same

    assert pow2_scale is same
    sys.modules.pop("calibprob.old_place_for_tests", None)


def _imported_names(tree: ast.AST) -> list[tuple[str, int]]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append((node.module, node.lineno))
            names += [(f"{node.module}.{alias.name}", node.lineno) for alias in node.names]
    return names


def test_calibprobs_own_code_uses_no_old_path():
    """Old paths are for users; calibprob's modules, tests and lazy tables name the new ones."""
    offenders = []
    roots = [PACKAGE_DIR, PACKAGE_DIR.parent / "tests", PACKAGE_DIR.parent / "benchmarks"]
    for path in sorted(p for root in roots if root.exists() for p in root.rglob("*.py")):
        if path.name == "test_moved_paths.py" or path == PACKAGE_DIR / "_core" / "deprecation.py":  # the table itself
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, line in _imported_names(tree):
            if deprecation.new_name(name) is not None and importlib.util.find_spec(name.rsplit(".", 1)[0]):
                offenders.append(
                    f"{path.relative_to(PACKAGE_DIR.parent)}:{line}: {name} -> {deprecation.new_name(name)}"
                )
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and deprecation.new_name(node.value):
                offenders.append(f"{path.relative_to(PACKAGE_DIR.parent)}:{node.lineno}: '{node.value}'")
    assert not offenders, "old module paths used inside calibprob (use the new ones):\n" + "\n".join(offenders)
