"""The method registry (calibprob.registry) is the one source: every reader agrees with it.

Checked: every registered option is a constructor keyword of its class (and every keyword is
an option, fixed by the kind, filled by the task or deliberately hidden); the generated tables
of docs/spec.md are up to date; the lazy-import tables and ``calibprob._core.persistence.REGISTRY`` list the
registered classes; the runner scores a kind by its registered output. The whole path
of a new method: a toy calibrator defined here plus one registration call runs in ``calibprob compare``,
appears in the generated kinds table and is checked by tests/test_common.py, with no other edit.
"""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

import calibprob
from calibprob import registry
from calibprob._core.estimator import BaseEstimator, check_is_fitted, check_predictive
from calibprob._core.options import Float
from calibprob._core.validation import check_array, check_same_length
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT


# ---------------------------------------------------------------------------
# the toy calibrator: a distribution post-processor written against the contract only
# ---------------------------------------------------------------------------


class ToyScaleCalibrator(BaseEstimator):
    r"""Scale the base's quantile function about its mean by the calibration RMS of the z-scores.

    :math:`s = \sqrt{\overline{z^2}}`, :math:`z_i = (y_i - m_i)/\sigma_i`;
    :math:`Q'_i(p) = m_i + \max(s, \text{floor})\,(Q_i(p) - m_i)`.
    """

    def __init__(self, floor: float = 0.0):
        self.floor = floor

    def fit(self, pred_cal, y_cal):
        pred_cal = check_predictive(pred_cal, self, "pred_cal")
        y = check_array(y_cal, "y_cal", ndim=1)
        check_same_length(pred_cal=np.empty(pred_cal.sizes["obs"]), y_cal=y)
        z = (y - pred_cal.calib.mean().values) / pred_cal.calib.std().values
        self.scale_ = max(float(np.sqrt(np.mean(z**2))), self.floor)
        return self

    def predict(self, pred, *, levels=None):
        check_is_fitted(self, "scale_")
        pred = check_predictive(pred, self, "pred")
        m = pred.calib.mean().values[:, None]
        q = m + self.scale_ * (pred.calib.quantiles - m)
        return calibprob.from_quantiles(q, pred.calib.levels, obs=pred["obs"].values)


def register_toy():
    """The one registration call."""
    return registry.register_method(
        "toy-scale",
        f"{__name__}:ToyScaleCalibrator",
        family="distribution",
        output="distribution",
        options={"floor": Float(0, None)},
        doc="Toy: the base's spread scaled by the calibration RMS z-score.",
    )


def pytest_configure(config):
    """Loaded as a plugin (``-p test_compare_registry``), this module registers the toy before collection."""
    register_toy()


@pytest.fixture
def toy():
    entry = register_toy()
    yield entry
    registry.METHODS.pop("toy-scale")
    registry.CLASSES.pop("ToyScaleCalibrator")


TOY_SPEC = """
name = "toy"
datasets = [{ name = "branin", function = "branin", n = 120, noise = 0.3 }]
repetitions = 2
seed = 5
confidence_level = [0.5, 0.9]

[split]
train = 0.5
calibrate = 0.25
test = 0.25

[base]
kind = "ols"

[methods.b]
kind = "base"

[methods.toy]
kind = "toy-scale"
floor = 0.5

[methods.vs]
kind = "variance-scaling"
"""


def test_a_toy_calibrator_and_one_registration_run_in_calibprob_compare(toy, tmp_path, capsys):
    from calibprob.cli import main
    from calibprob.compare import load_results

    spec_path = tmp_path / "toy.toml"
    spec_path.write_text(TOY_SPEC)
    assert main(["compare", str(spec_path), "--out", str(tmp_path / "r.nc"), "--no-progress"]) == 0
    assert "toy" in capsys.readouterr().out
    res = load_results(tmp_path / "r.nc")
    assert res["error"].sel(calibrator="toy").values.ravel().tolist() == ["", ""]
    # independent check: on an OLS base the toy's scale is the RMS z-score, exactly what the
    # one-factor variance scaling fits by maximum likelihood on a Gaussian base; the OLS base
    # is Student-t, so the two are close but not equal
    toy_nll = res["nll"].sel(calibrator="toy").values
    vs_nll = res["nll"].sel(calibrator="vs").values
    np.testing.assert_allclose(toy_nll, vs_nll, rtol=0.05)
    cov = res["coverage"].sel(calibrator="toy", confidence_level=0.9).values
    assert np.all((cov > 0.6) & (cov <= 1.0))


def test_the_toy_appears_in_the_generated_kinds_table(toy):
    table = registry.render_kinds_table()
    row = next(line for line in table.splitlines() if line.startswith("| `toy-scale`"))
    assert "post-processor" in row and "`floor`" in row and "RMS z-score" in row
    assert "toy-scale" not in (ROOT / "docs" / "spec.md").read_text()  # no other edit


def test_the_toy_is_checked_by_test_common(tmp_path):
    """tests/test_common.py, unedited, runs its checks on the toy once the toy is registered."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(  # this module, under its dotted name wherever it lives, is the plugin registering the toy
        [sys.executable, "-m", "pytest", "-q", "-p", __name__, "-p", "no:cacheprovider"]
        + ["tests/test_common.py", "-k", "ToyScaleCalibrator", "-W", "ignore::pytest.PytestAssertRewriteWarning"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    summary = out.stdout.strip().splitlines()[-1]
    n_passed = int(summary.split(" passed")[0].split()[-1])
    # calibprob.testing.check_calibrator (all nine checks of a post-processor), the house wording of its errors
    # (no save/load: not calibprob's own class), and Mondrian's level independence x 2 fallbacks (which found that
    # Mondrian read a calibrator ignoring levels= by position)
    assert n_passed == 4, out.stdout[-2000:]


def test_a_registered_kind_outside_calibprob_is_never_loadable_from_a_file(toy):
    from calibprob._core import persistence as _io

    assert "ToyScaleCalibrator" in registry.CLASSES
    assert "ToyScaleCalibrator" not in registry.builtin_classes()
    assert "ToyScaleCalibrator" not in _io.REGISTRY
    assert all(m.split(".")[0] == "calibprob" for m in _io.REGISTRY.values())


# ---------------------------------------------------------------------------
# the registry agrees with the classes, the docs and the readers
# ---------------------------------------------------------------------------


def _params(cls) -> set[str]:
    return set(inspect.signature(cls).parameters)


@pytest.mark.parametrize("kind", sorted(k for k, e in registry.METHODS.items() if e.cls is not None))
def test_method_options_are_the_constructor_keywords(kind):
    entry = registry.METHODS[kind]
    params = _params(entry.load())
    offered = set(entry.options) - set(entry.runner_options)
    assert offered <= params, f"{kind}: options {sorted(offered - params)} are not keywords of {entry.cls}"
    assert set(entry.fixed) <= params and set(entry.hidden) <= params
    assert entry.seed is None or entry.seed in params
    accounted = offered | set(entry.fixed) | set(entry.hidden) | set(registry.TASK_ARGUMENTS) | {entry.seed}
    assert params <= accounted, f"{kind}: {sorted(params - accounted)} of {entry.cls} is neither offered nor hidden"
    assert set(entry.runner_options) <= set(entry.options) and set(entry.defaults) <= set(entry.options)


@pytest.mark.parametrize("kind", sorted(k for k, e in registry.BASES.items() if e.cls is not None))
def test_base_options_are_the_constructor_keywords(kind):
    entry = registry.BASES[kind]
    params = _params(entry.load())
    offered = set(entry.options) - set(entry.runner_options)  # the runner's own options never reach the class
    assert params == offered | set(entry.hidden) | ({entry.seed} - {None}), kind


def test_option_defaults_pass_their_declared_types():
    for kind, entry in registry.METHODS.items():
        if entry.cls is None:
            continue
        params = inspect.signature(entry.load()).parameters
        for name, typ in entry.options.items():
            default = entry.defaults.get(name, params[name].default if name in params else None)
            if default is not None and default is not inspect.Parameter.empty:
                typ.check(default, f"{kind}.{name}")


def test_docs_spec_tables_are_generated_from_the_registry():
    page = (ROOT / "docs" / "spec.md").read_text(encoding="utf-8")
    assert registry.render_doc(page) == page, (
        'docs/spec.md is out of date: run python -c "from calibprob.registry import update_doc; '
        "update_doc('docs/spec.md')\""
    )
    for kind in registry.METHODS:
        assert f"| `{kind}`" in page


def test_lazy_tables_read_the_registry():
    from calibprob import calibrators
    from calibprob.calibrators import conformal

    for namespace, module in (("calibprob", calibprob), ("calibprob.calibrators", calibrators)):
        for name, mod in registry.exports(namespace).items():
            assert name in module.__all__ and getattr(module, name) is registry.CLASSES[name].load()
            assert getattr(importlib.import_module(mod), name) is getattr(module, name)
    assert set(registry.exports("calibprob.calibrators.conformal")) <= set(conformal.__all__)
    assert calibprob.PyMCLinearRegression is registry.BASES["pymc-linear"].load()


def test_spec_views_follow_the_registry(toy):
    from calibprob.compare import methods, spec

    assert spec.METHOD_OPTION_TYPES["toy-scale"] == {"floor": registry.METHODS["toy-scale"].options["floor"]}
    assert methods.METHOD_KINDS["toy-scale"].options == frozenset({"floor"})
    assert spec.GP_ONLY_METHODS["jackknife-plus-gp"] == ("gp", "sparse-gp")
    assert spec.BASE_KINDS == tuple(registry.BASES)
    with pytest.raises(AttributeError, match="no attribute 'NOPE'"):
        spec.NOPE  # noqa: B018


def test_a_kind_whose_output_disagrees_with_its_registration_is_an_error():
    from calibprob.compare import parse_spec, run_task

    registry.register_method(
        "toy-wrong",
        "calibprob.calibrators.conformal.gp:JackknifePlusGP",
        family="model-aware",
        output="distribution",  # wrong: J+GP gives intervals
        adapter="calibprob.compare.methods:run_gp_conformal",
        serves=("gp",),
    )
    try:
        spec = parse_spec(
            {
                "name": "w",
                "datasets": [{"name": "b", "function": "branin", "n": 40, "noise": 0.3}],
                "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
                "base": {"kind": "gp"},
                "methods": {"w": {"kind": "toy-wrong"}},
            }
        )
        out = run_task(spec.to_dict(), "b", 0)
    finally:
        registry.METHODS.pop("toy-wrong")
    assert "registered with output 'distribution' but returned intervals" in str(out["error"].values.ravel()[0])


def test_registration_refuses_bad_entries():
    with pytest.raises(
        ValueError, match=r"family must be one of 'distribution', 'model-aware', 'posterior'; got 'post'"
    ):
        registry.register_method("x", "m:C", family="post", output="distribution")
    with pytest.raises(ValueError, match=r"output must be one of 'distribution', 'intervals'; got 'quantiles'"):
        registry.register_method("x", "m:C", family="distribution", output="quantiles")
    with pytest.raises(ValueError, match=r"target must read 'package\.module:ClassName'; got 'nocolon'"):
        registry.register_method("x", "nocolon", family="distribution", output="distribution")
    with pytest.raises(ValueError, match="needs a class target or an adapter"):
        registry.register_method("x", None, family="distribution", output="distribution")
    assert "x" not in registry.METHODS
