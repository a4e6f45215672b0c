"""The Examples sections of every module's functions, classes and methods run as written.

``tests/test_docs.py::test_public_examples_run`` runs the public names' class and function docstrings. The
rest — methods' examples, private helpers' examples, module docstrings — ran nowhere, and five of them had
drifted from the code (a changed cost constant, a widened registry entry, an AUC printed for the swapped
arguments, a slice one character off, a float printed to the last bit). Here every module's doctests run, one
test per module (so pytest-xdist spreads them), each in a fresh temporary working directory; the few that fit a
model for tens of seconds run under ``slow``.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import calibprob
from tests.test_docs import public_objects

#: Modules whose examples fit models (NUTS, GP-Beta SVI, whole comparison runs) for 10-40 s each at quiet load:
#: ``make test-slow`` runs them. Measured with ``pytest --doctest-modules calibprob --durations=15``.
SLOW_MODULES = {
    "calibprob.predictive._arviz",  # heldout_elpd: a NUTS fit, 36 s
    "calibprob.compare.runner",  # run: a whole comparison, 25 s
    "calibprob.metrics._shift",  # covariate_shift: a cross-fitted permutation test, 22 s
    "calibprob.calibrators.sharp_gp",  # SharpCalibratedGP: a full fit, 21 s
    "calibprob.bo.plots",  # three BO runs for the plots, 33 s
    "calibprob.bo.experiment",  # run_experiment, 12 s
    "calibprob.calibrators.gp_beta._svi",  # svi_fit, 10 s
}


def _modules() -> list[str]:
    names = ["calibprob"]
    for info in pkgutil.walk_packages(calibprob.__path__, "calibprob."):
        if ".__main__" not in info.name:
            names.append(info.name)
    return sorted(names)


def _params() -> list:
    marks = {name: (pytest.mark.slow,) for name in SLOW_MODULES}
    return [pytest.param(name, marks=marks.get(name, ()), id=name) for name in _modules()]


def test_the_slow_list_names_real_modules():
    assert SLOW_MODULES <= set(_modules()), sorted(SLOW_MODULES - set(_modules()))


@pytest.mark.parametrize("module_name", _params())
def test_module_examples_run(module_name, tmp_path, monkeypatch):
    """Every doctest the module defines (its own objects only), except the public names' own docstrings."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.chdir(tmp_path)  # an example that writes a file writes it here
    module = importlib.import_module(module_name)
    covered = {name for name, _ in public_objects().values()} | {
        f"{obj.__module__}.{obj.__qualname__}" for _, obj in public_objects().values() if hasattr(obj, "__qualname__")
    }
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    failures = []
    for test in finder.find(module, module_name, globs=dict(vars(module))):
        if not test.examples or test.name in covered:
            continue
        out: list[str] = []
        result = runner.run(test, out=out.append)
        plt.close("all")
        if result.failed:
            failures.append("".join(out))
    assert not failures, "\n".join(failures)
