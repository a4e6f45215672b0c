"""ruff (pyflakes, pycodestyle, import order, format; configured in pyproject.toml) passes on the code base.

Run by the default test command so that a lint error fails CI like a test does.
"""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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
