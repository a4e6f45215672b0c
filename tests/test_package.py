"""The package namespace: subpackages reachable as attributes after ``import calibprob``, imported lazily."""

import re
import subprocess
import sys
import tomllib

import pytest

import calibprob
from calibprob._version import __version__
from tests.support.paths import REPO_ROOT


def test_subpackages_are_attributes_imported_on_first_use():
    code = (
        "import sys, calibprob\n"
        "assert 'calibprob.calibrators' not in sys.modules\n"
        "print(calibprob.calibrators.GPBetaCalibrator.__name__, calibprob.calibrators.conformal.JackknifePlusGP.__name__)\n"
        "assert 'calibprob.calibrators' in sys.modules\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["GPBetaCalibrator", "JackknifePlusGP"]


def test_an_unknown_attribute_is_still_an_attribute_error():
    import calibprob

    with pytest.raises(AttributeError, match="module 'calibprob' has no attribute 'calibrator'"):
        calibprob.calibrator  # noqa: B018
    assert "calibrators" in dir(calibprob)


def test_the_version_is_defined_once():
    """pyproject.toml reads the version from calibprob/_version.py; no other file states it."""

    root = REPO_ROOT
    project = tomllib.loads((root / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "calibprob._version.__version__"}
    assert calibprob.__version__ == __version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    stated = [
        str(p.relative_to(root))
        for p in (root / "calibprob").rglob("*.py")
        if p.name != "_version.py" and re.search(r"__version__\s*=\s*['\"]", p.read_text())
    ]
    assert stated == [], f"a second definition of the version: {stated}"


def test_the_package_ships_its_annotations():
    """PEP 561: py.typed is in the package and in its package data."""

    root = REPO_ROOT
    assert (root / "calibprob" / "py.typed").is_file()
    project = tomllib.loads((root / "pyproject.toml").read_text())
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["calibprob"]
