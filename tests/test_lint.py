"""ruff (pyflakes, pycodestyle, import order, format; configured in pyproject.toml) passes on the code base.

Run by the default test command so that a lint error fails CI like a test does.
"""

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT


def test_ruff_passes():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is a test dependency (pip install -e '.[dev]'); it is not installed"
    out = subprocess.run(
        [ruff, "check", "--output-format", "concise", "calibprob", "tests", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_format_is_applied():
    """The code is formatted by ``ruff format`` (run it before committing; CONTRIBUTING.md)."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is a test dependency (pip install -e '.[dev]'); it is not installed"
    out = subprocess.run(
        [ruff, "format", "--check", "calibprob", "tests", "benchmarks"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, "run `ruff format calibprob tests benchmarks`:\n" + out.stdout + out.stderr


def test_mypy_passes():
    """mypy (basic mode, configured in pyproject.toml's [tool.mypy]) finds no type error in calibprob/."""
    mypy = shutil.which("mypy", path=str(Path(sys.executable).parent)) or shutil.which("mypy")
    assert mypy, "mypy is a test dependency (pip install -e '.[dev]'); it is not installed"
    out = subprocess.run([mypy], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


#: The limit on a function's length: lines of code, its docstring not counted.
MAX_FUNCTION_LINES = 80


def long_functions(root: Path, limit: int = MAX_FUNCTION_LINES) -> list[tuple[int, str]]:
    """``(lines, "path:line name")`` of every function under ``root`` longer than ``limit`` lines of code.

    A function's length runs from its ``def`` to its last line, less its docstring (numpydoc
    docstrings with equations and examples are documentation, not logic to split).
    """
    import ast

    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            lines = node.end_lineno - node.lineno + 1
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines -= first.end_lineno - first.lineno + 1
            if lines > limit:
                found.append((lines, f"{path.relative_to(root.parent)}:{node.lineno} {node.name}"))
    return sorted(found, reverse=True)


def test_no_function_is_longer_than_80_lines_of_code():
    long = long_functions(ROOT / "calibprob")
    assert not long, "split these by meaning:\n" + "\n".join(f"{n:4d}  {where}" for n, where in long)


def test_the_length_check_finds_a_long_function_and_skips_docstrings(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(85))
    doc = '    """' + "\n".join(["doc"] * 40) + '"""'
    (pkg / "a.py").write_text(f"def long():\n{body}\n\n\ndef documented():\n{doc}\n    return 1\n")
    assert long_functions(pkg) == [(86, "pkg/a.py:1 long")]
