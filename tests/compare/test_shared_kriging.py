"""The GP's kriging view is computed once per (data set, repetition, base) for every method that needs it (issue 37).

J+GP, asymJ+GP and the full-conformal GP on one fitted GP all start from the same kriging view
(``calibprob.calibrators.conformal.gp``; :math:`O(n^3)` for the exact GP, :math:`O(nm^2)` for the
sparse GP), and a sparse GP's closed-form LOO is read off the same system. Checked by counting the
computations (a patched ``_gp_view`` and ``sparse_kriging_system``) and against the run that
shares nothing (``shared_kriging_views`` patched to return nothing): identical scores.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import xarray as xr

import calibprob.bases.gp._sparse_loo as sparse_loo
import calibprob.bases.gp.sparse as sparse_module
import calibprob.calibrators.conformal.gp as cgp
from calibprob.bases.gp import GaussianProcessRegressor
from calibprob.calibrators.conformal import FullConformalGP, JackknifePlusGP
from calibprob.compare import methods as cm
from calibprob.compare import parse_spec, run_comparison, run_task
from calibprob.compare import tasks as ct

EXACT = {"kind": "gp", "kernel": "matern", "p": 1, "mean": "constant", "n_restarts": 1}
SPARSE = {"kind": "sparse-gp", "n_inducing": 20, "mean": "constant", "n_restarts": 1}
GP_METHODS = {
    "fcp": {"kind": "full-conformal-gp"},
    "j": {"kind": "jackknife-plus-gp"},
    "aj": {"kind": "asym-jackknife-plus-gp"},
}


def _spec(base: dict, methods: dict, split: dict | None = None, **extra) -> dict:
    return {
        "name": "kriging",
        "seed": 3,
        "split": split or {"train": 0.6, "test": 0.4},
        "datasets": [{"name": "forrester", "function": "forrester", "n": 150, "noise": 0.2}],
        "base": base,
        "methods": methods,
        **extra,
    }


def _count(monkeypatch, module, name: str) -> list:
    calls: list = []
    real = getattr(module, name)

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


def _metrics(ds: xr.Dataset) -> xr.Dataset:
    return ds.drop_vars([v for v in ("fit_time", "base_fit_time", "base_predict_time") if v in ds])


def _unshared(monkeypatch) -> None:
    monkeypatch.setattr(cm, "shared_kriging_views", lambda ctx, methods, loo=False: {})


@pytest.mark.parametrize("base", [EXACT, SPARSE], ids=["exact", "sparse"])
@pytest.mark.parametrize("n_methods", [1, 3])
def test_the_view_is_computed_once_whatever_the_number_of_methods(monkeypatch, base, n_methods):
    views = _count(monkeypatch, cgp, "_gp_view")
    methods = dict(list(GP_METHODS.items())[:n_methods])
    out = run_task(_spec(base, methods), "forrester", 0)
    assert not any(out["error"].values.ravel())
    assert len(views) == 1


@pytest.mark.parametrize("base", [EXACT, SPARSE], ids=["exact", "sparse"])
def test_without_sharing_every_method_computes_the_view(monkeypatch, base):
    # the reference the sharing replaces: one view per method
    views = _count(monkeypatch, cgp, "_gp_view")
    _unshared(monkeypatch)
    run_task(_spec(base, GP_METHODS), "forrester", 0)
    assert len(views) == 3


@pytest.mark.parametrize("base", [EXACT, SPARSE], ids=["exact", "sparse"])
def test_shared_view_scores_identical_to_recomputed(monkeypatch, base):
    methods = {**GP_METHODS, "j-fixed-mean": {"kind": "jackknife-plus-gp", "refit_mean": False}}
    shared = run_task(_spec(base, methods), "forrester", 1)
    _unshared(monkeypatch)
    alone = run_task(_spec(base, methods), "forrester", 1)
    assert _metrics(shared).identical(_metrics(alone))


def test_two_mean_handlings_are_two_views(monkeypatch):
    # refit_mean = false on a constant-mean GP is another view (the fitted constant kept): one of each
    views = _count(monkeypatch, cgp, "_gp_view")
    methods = {**GP_METHODS, "j-fixed": {"kind": "jackknife-plus-gp", "refit_mean": False}}
    run_task(_spec(EXACT, methods), "forrester", 0)
    assert sorted(refit_mean for _, refit_mean in views) == [False, True]


def test_a_zero_mean_gp_has_one_view_for_either_refit_mean(monkeypatch):
    views = _count(monkeypatch, cgp, "_gp_view")
    methods = {"j": {"kind": "jackknife-plus-gp"}, "j-fixed": {"kind": "jackknife-plus-gp", "refit_mean": False}}
    run_task(_spec({**EXACT, "mean": "zero"}, methods), "forrester", 0)
    assert len(views) == 1


def test_sparse_loo_calibration_reads_the_shared_system(monkeypatch):
    # no calibration part: "vs-loo" calibrates on the sparse GP's closed-form LOO, J+GP needs the view;
    # the O(n m^2) pass over the training rows runs once for both
    systems = _count(monkeypatch, sparse_loo, "sparse_kriging_system")
    monkeypatch.setattr(cgp, "sparse_kriging_system", sparse_loo.sparse_kriging_system)
    monkeypatch.setattr(sparse_module, "sparse_kriging_system", sparse_loo.sparse_kriging_system)
    methods = {"j": {"kind": "jackknife-plus-gp"}, "vs-loo": {"kind": "variance-scaling", "calibration_data": "loo"}}
    shared = run_task(_spec(SPARSE, methods), "forrester", 0)
    assert len(systems) == 1
    _unshared(monkeypatch)
    alone = run_task(_spec(SPARSE, methods), "forrester", 0)
    assert len(systems) == 3  # the run without sharing adds two: loo()'s own pass and J+GP's
    assert not any(shared["error"].values.ravel())
    assert _metrics(shared).identical(_metrics(alone))


def test_a_refused_method_does_not_count(monkeypatch):
    # a method refused for its n x n work never has its view computed, in the shared stage or elsewhere
    views = _count(monkeypatch, cgp, "_gp_view")
    out = run_task(_spec(EXACT, GP_METHODS, max_method_minutes=1e-9), "forrester", 0)
    assert views == []
    assert all("TimeoutError" in e for e in out["error"].values.ravel())


def test_the_shared_context_with_a_view_survives_pickle():
    spec = _spec(SPARSE, GP_METHODS)
    fitted = ct.fit_bases(spec, "forrester", 0)
    ctx = fitted["fits"][None][0]
    assert ("kriging", True) in ctx.shared
    back = pickle.loads(pickle.dumps(fitted))
    ctx2 = back["fits"][None][0]
    # the view's kernel is the unpickled base's, not a copy of it
    assert ctx2.shared[("kriging", True)].kernel.gp is ctx2.base
    a = cm.run_gp_conformal(ctx, cm.registry.METHODS["jackknife-plus-gp"])
    b = cm.run_gp_conformal(ctx2, cm.registry.METHODS["jackknife-plus-gp"])
    assert a.identical(b)


def test_fit_with_view_is_fit_bit_for_bit():
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(70, 1))
    y = np.sin(2 * X[:, 0]) + 0.2 * rng.normal(size=70)
    gp = GaussianProcessRegressor(mean="constant", random_state=0).fit(X[:50], y[:50])
    for cls in (JackknifePlusGP, FullConformalGP):
        view = cls(estimator=gp, prefit=True).kriging_view()
        a = cls(estimator=gp, prefit=True, confidence_level=[0.5, 0.9]).fit().predict_interval(X[50:])
        b = cls(estimator=gp, prefit=True, confidence_level=[0.5, 0.9]).fit_with_view(view).predict_interval(X[50:])
        assert a.identical(b)


def test_view_entry_points_need_prefit():
    gp = GaussianProcessRegressor(random_state=0).fit(np.arange(10.0)[:, None], np.sin(np.arange(10.0)))
    with pytest.raises(ValueError, match="kriging_view needs prefit=True .* got prefit=False"):
        JackknifePlusGP(estimator=gp).kriging_view()
    view = JackknifePlusGP(estimator=gp, prefit=True).kriging_view()
    with pytest.raises(ValueError, match="fit_with_view needs prefit=True .* got prefit=False"):
        JackknifePlusGP(estimator=gp).fit_with_view(view)


def _scores(path) -> xr.Dataset:
    return xr.open_datatree(path, engine="h5netcdf").to_dataset().load()


def test_method_granularity_with_the_view_equals_task_granularity(tmp_path):
    # each method a task of its own on the one fitted stage (and its one view): the task's results
    spec = parse_spec(_spec(SPARSE, {**GP_METHODS, "vs": {"kind": "variance-scaling", "calibration_data": "loo"}}))
    run_comparison(spec, tmp_path / "task.nc", progress=False, granularity="task")
    run_comparison(spec, tmp_path / "method.nc", progress=False, granularity="method")
    xr.testing.assert_identical(_scores(tmp_path / "task.nc"), _scores(tmp_path / "method.nc"))


@pytest.mark.slow
def test_the_view_travels_to_two_workers(tmp_path):
    # on a Dask LocalCluster the fitted stage, its view included, is pickled to the workers
    spec = parse_spec(_spec(EXACT, GP_METHODS))
    run_comparison(spec, tmp_path / "serial.nc", progress=False)
    run_comparison(spec, tmp_path / "dask.nc", progress=False, workers=2, granularity="method")
    a, b = _scores(tmp_path / "serial.nc"), _scores(tmp_path / "dask.nc")
    assert not any(a["error"].values.ravel())
    xr.testing.assert_identical(a, b)


@pytest.mark.parametrize("base", [EXACT, SPARSE], ids=["exact", "sparse"])
def test_the_base_is_factorised_once_whatever_the_number_of_methods(monkeypatch, base):
    # the K (exact) or K_mm and m x m (sparse) Cholesky factors at the fitted theta: once, in the base's fit;
    # every method reads them (predictions, the kriging view, the closed-form LOO)
    cls = GaussianProcessRegressor if base is EXACT else sparse_module.SparseGaussianProcessRegressor
    calls: list = []
    real = cls._factorize

    def counting(self, theta):
        calls.append(id(self))
        return real(self, theta)

    monkeypatch.setattr(cls, "_factorize", counting)
    holdout = {"train": 0.5, "calibrate": 0.25, "test": 0.25}
    everything = {
        "raw": {"kind": "base"},
        "iso": {"kind": "isotonic", "extrapolate": True},
        "cps": {"kind": "conformal-predictive"},
        "split": {"kind": "split-conformal"},
        **GP_METHODS,
    }
    for methods in ({"raw": {"kind": "base"}}, everything):
        calls.clear()
        out = run_task(_spec(base, methods, holdout), "forrester", 0)
        assert not any(out["error"].values.ravel())
        assert len(calls) == 1
