"""The generated ``__init__.pyi`` stubs: they match the registry exactly, and mypy sees the public classes through them."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from calibprob.registry import _stubs

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("namespace", _stubs.STUBBED)
def test_stub_on_disk_is_the_rendering_of_the_registry(namespace):
    """Each stub equals what the current registry renders (fix: ``python -m calibprob.registry._stubs``)."""
    path = _stubs.stub_path(namespace)
    assert path.exists(), f"{path} is missing; run `python -m calibprob.registry._stubs`."
    assert path.read_text() == _stubs.render_stub(namespace), (
        f"{path} is stale against the registry; run `python -m calibprob.registry._stubs`."
    )


@pytest.mark.parametrize("namespace", _stubs.STUBBED)
def test_stub_exports_exactly_the_runtime_names(namespace):
    """The stub's ``__all__`` is the module's run-time ``__all__``, and every name in it resolves at run time."""
    import importlib

    module = importlib.import_module(namespace)
    tree = ast.parse(_stubs.stub_path(namespace).read_text())
    (declared,) = [ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)]
    imported = {a.asname for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert sorted(declared) == sorted(set(module.__all__))
    assert set(declared) <= imported | {"SUBPACKAGES"}, set(declared) - imported
    for name in imported:
        assert getattr(module, name) is not None


def test_render_stub_refuses_an_unknown_namespace():
    with pytest.raises(ValueError, match=r"namespace='calibprob.metrics' has no generated stub; pick one of"):
        _stubs.render_stub("calibprob.metrics")


@pytest.mark.slow
def test_mypy_reports_a_misspelt_keyword_on_three_public_classes(tmp_path):
    """Through the stubs mypy knows the classes: each misspelt keyword is a ``call-arg`` error (without the stubs,
    the lazy ``__getattr__`` makes them ``Any`` and mypy reports nothing). About 45 s, hence slow."""
    mypy = shutil.which("mypy", path=str(Path(sys.executable).parent)) or shutil.which("mypy")
    assert mypy, "mypy is a test dependency (pip install -e '.[test]'); it is not installed"
    script = tmp_path / "user.py"
    script.write_text(
        "import calibprob\n"
        "a = calibprob.SplitConformalRegressor(estimatr=None)\n"
        "b = calibprob.IsotonicRecalibrator(extrapolat=True)\n"
        "c = calibprob.ConformalizedQuantileRegression(symetric=True)\n"
    )
    env = {"PYTHONPATH": str(ROOT), "PATH": str(Path(sys.executable).parent)}
    out = subprocess.run(
        [mypy, "--ignore-missing-imports", "--follow-imports=silent", "--no-incremental", str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    )
    errors = [line for line in out.stdout.splitlines() if "error:" in line]
    for bad, cls in (
        ("estimatr", "SplitConformalRegressor"),
        ("extrapolat", "IsotonicRecalibrator"),
        ("symetric", "ConformalizedQuantileRegression"),
    ):
        assert any(f'"{bad}" for "{cls}"' in line for line in errors), out.stdout
    assert len(errors) == 3, out.stdout
