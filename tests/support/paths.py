"""The repository's folders, found from the repository root (the folder holding ``pyproject.toml``).

Tests name files through these constants rather than ``Path(__file__).parents[k]``, so a test file can move to
another folder under ``tests/`` with ``git mv`` and nothing else.
"""

from __future__ import annotations

from pathlib import Path


def _repo_root() -> Path:
    """The nearest folder above this file that holds ``pyproject.toml``."""
    for folder in Path(__file__).resolve().parents:
        if (folder / "pyproject.toml").is_file():
            return folder
    raise RuntimeError(f"no pyproject.toml above {__file__}: the tests run from a calibprob checkout")


REPO_ROOT = _repo_root()
PACKAGE = REPO_ROOT / "calibprob"
TESTS = REPO_ROOT / "tests"
TEST_DATA = TESTS / "data"
MODELS = REPO_ROOT / "models"
DOCS = REPO_ROOT / "docs"
NOTEBOOKS = REPO_ROOT / "notebooks"
BENCHMARKS = REPO_ROOT / "benchmarks"


def load_benchmark(name: str):
    """Import ``benchmarks/<name>.py`` as a module (the benchmarks are scripts, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
