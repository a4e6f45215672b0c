"""Saving and loading without pickle (calibprob._core.persistence): round trips in a new process, refused files.

Every public estimator class is a row of ``ROWS``: a ``fit`` lambda (data -> fitted
estimator) and a ``predict`` lambda (estimator, data -> prediction). The parent
fits and saves every row, then ONE child process (a fresh interpreter that has
never seen the fitted objects) loads every file and predicts; the predictions
must agree to 1e-10. When a signature changes, change the row's lambdas.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr

import calibprob
import calibprob.bases.pymc_hsgp
import calibprob.bases.pymc_linear
import calibprob.calibrators.conformal
import calibprob.datasets
from calibprob._core.persistence import FORMAT_VERSION, HDF5_SIGNATURE, REGISTRY

TESTS_DIR = Path(__file__).resolve().parent
ATOL = 1e-10


# ----------------------------------------------------------------------------- user code
def ols_fit_predict(X_train, y_train, X_new):
    """A user's function (what CallableRegressor / a callable estimator= wraps)."""
    A = np.c_[np.ones(len(X_train)), X_train]
    coef = np.linalg.lstsq(A, y_train, rcond=None)[0]
    resid = y_train - A @ coef
    sd = np.sqrt(resid @ resid / (len(y_train) - A.shape[1]))
    return np.c_[np.ones(len(X_new)), X_new] @ coef, np.full(len(X_new), sd)


class UserModel:
    """A scikit-learn-like user model (not a calibprob class): fit + predict_mean_std."""

    def fit(self, X, y):
        self.coef_ = np.polyfit(X[:, 0], y, 3)
        self.sd_ = float(np.std(y - np.polyval(self.coef_, X[:, 0])))
        return self

    def predict_mean_std(self, X):
        return np.polyval(self.coef_, X[:, 0]), np.full(len(X), self.sd_)


# ----------------------------------------------------------------------------- data
class Data:
    """Seeded data; the base GP is fitted here (parent) or loaded from its file (child)."""

    def __init__(self, base=None, *, fit_base: bool = True):
        rng = np.random.default_rng(0)
        X = rng.uniform(-2.0, 2.0, size=(80, 1))
        y = np.sin(2.0 * X[:, 0]) + 0.2 * rng.normal(size=80)
        self.X_train, self.y_train = X[:40], y[:40]
        self.X_cal, self.y_cal = X[40:], y[40:]
        self.X_test = np.linspace(-2.2, 2.2, 9)[:, None]
        self.base = base
        if base is None and fit_base:
            self.base = calibprob.GaussianProcessRegressor(random_state=0).fit(self.X_train, self.y_train)

    def pred(self, X):
        """The base's predictive Dataset (input of the distribution post-processors)."""
        return self.base.predict(X)


@dataclasses.dataclass
class Row:
    name: str
    cls: str
    fit: Callable
    predict: Callable
    objects: Callable = dict  # user objects to pass again to calibprob.load (child side)


def _gpb_fit(d):
    return calibprob.GPBetaCalibrator(inference="map", n_inducing=5, random_state=0).fit(d.pred(d.X_cal), d.y_cal)


def _gpb_predict(e, d):
    return e.predict(d.pred(d.X_test))


def _cb_problem(seed: int = 0):
    """A conjugate normal-mean posterior (known sd 1, N(0, 10^2) prior): exact draws, grid densities."""
    rng = np.random.default_rng(seed)
    y = rng.normal(size=30)
    prec = 1 / 100 + y.size
    theta = rng.normal(y.sum() / prec, prec**-0.5, size=400)
    grid = np.linspace(y.min() - 3, y.max() + 3, 61)
    ll = -0.5 * (y[None, :] - theta[:, None]) ** 2 - 0.5 * np.log(2 * np.pi)
    logf = -0.5 * (grid[None, None, :] - theta[:, None, None]) ** 2 - 0.5 * np.log(2 * np.pi)
    return ll, np.repeat(logf, 2, axis=1), grid


def _loo_tree(seed: int = 0):
    """A PyMC-shaped tree of a conjugate regression (exact draws) and the draws at 4 new points."""
    sys.path.insert(0, str(Path(__file__).parent))
    from _conjugate import tree

    rng = np.random.default_rng(seed)
    X = np.c_[np.ones(34), rng.normal(size=(34, 1))]
    y = X @ [0.5, 1.0] + 0.5 * rng.standard_normal(34)
    return tree(rng, X[:30], y[:30], 0.5, 3.0, draws=300, X_new=X[30:])


G = calibprob  # short alias in the table
ROWS = [
    # base regressors
    Row(
        "LinearRegression",
        "LinearRegression",
        lambda d: G.LinearRegression().fit(d.X_train, d.y_train),
        lambda e, d: e.predict(d.X_test),
    ),
    Row(
        "BayesianRidge",
        "BayesianRidge",
        lambda d: G.BayesianRidge().fit(d.X_train, d.y_train),
        lambda e, d: e.predict(d.X_test),
    ),
    Row("GaussianProcessRegressor", "GaussianProcessRegressor", lambda d: d.base, lambda e, d: e.predict(d.X_test)),
    Row(
        "GaussianProcessRegressor-constant-matern",
        "GaussianProcessRegressor",
        lambda d: G.GaussianProcessRegressor(
            kernel="matern", p=1, mean="constant", objective="reml", random_state=np.random.default_rng(1)
        ).fit(d.X_train, d.y_train),
        lambda e, d: (e.predict(d.X_test), e.loo()),
    ),
    Row(
        "SparseGaussianProcessRegressor",
        "SparseGaussianProcessRegressor",
        lambda d: G.SparseGaussianProcessRegressor(n_inducing=8, random_state=0).fit(d.X_train, d.y_train),
        lambda e, d: e.predict(d.X_test),
    ),
    Row(
        "PyMCLinearRegression",
        "PyMCLinearRegression",  # the pymc-linear base: posterior draws saved
        lambda d: G.bases.pymc_linear.PyMCLinearRegression(
            likelihood="student-t", draws=100, tune=100, chains=2, random_state=0
        ).fit(d.X_train, d.y_train),
        lambda e, d: e.predict(d.X_test),
    ),
    Row(
        "PyMCHSGPRegression",
        "PyMCHSGPRegression",  # the pymc-hsgp base: posterior draws and the HSGP box saved
        lambda d: G.bases.pymc_hsgp.PyMCHSGPRegression(
            m=6, inference="advi", n_iter=200, draws=50, chains=1, random_state=0
        ).fit(d.X_train, d.y_train),
        lambda e, d: e.predict(d.X_test),
    ),
    Row(
        "CallableRegressor",
        "CallableRegressor",
        lambda d: G.conformal.CallableRegressor(fit_predict=ols_fit_predict).fit(d.X_train, d.y_train),
        lambda e, d: e.predict_mean_std(d.X_test),
        lambda: {"fit_predict": ols_fit_predict},
    ),
    # distribution post-processors
    Row(
        "IsotonicRecalibrator",
        "IsotonicRecalibrator",
        lambda d: G.IsotonicRecalibrator(extrapolate=True).fit(d.pred(d.X_cal), d.y_cal),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    Row(
        "VovkRecalibrator",
        "VovkRecalibrator",
        lambda d: G.VovkRecalibrator(extrapolate=True, random_state=3).fit(d.pred(d.X_cal), d.y_cal),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    Row(
        "VovkRecalibrator-generator",
        "VovkRecalibrator",  # a numpy Generator's state round-trips
        lambda d: G.VovkRecalibrator(extrapolate=True, random_state=np.random.default_rng(5)).fit(
            d.pred(d.X_cal), d.y_cal
        ),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    Row(
        "MarxRecalibrator",
        "MarxRecalibrator",
        lambda d: G.MarxRecalibrator(center="median", extrapolate=True).fit(d.pred(d.X_cal), d.y_cal),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    Row(
        "VarianceScalingRecalibrator",
        "VarianceScalingRecalibrator",
        lambda d: G.VarianceScalingRecalibrator().fit(d.pred(d.X_cal), d.y_cal),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    Row("GPBetaCalibrator", "GPBetaCalibrator", _gpb_fit, _gpb_predict),
    Row(
        "OnlineQuantileRecalibrator",
        "OnlineQuantileRecalibrator",
        lambda d: G.OnlineQuantileRecalibrator(eta=0.5).fit(d.pred(d.X_cal), d.y_cal),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    # model-aware calibrators
    Row(
        "SharpCalibratedGP",
        "SharpCalibratedGP",
        lambda d: G.SharpCalibratedGP(estimator=d.base, n_levels=5, n_restarts=1, maxiter=20, random_state=0).fit(
            d.X_cal, d.y_cal
        ),
        lambda e, d: e.predict(d.X_test),
    ),
    Row(
        "SplitConformalRegressor",
        "SplitConformalRegressor",
        lambda d: (
            G.SplitConformalRegressor(estimator=G.BayesianRidge(), score="normalized", confidence_level=[0.5, 0.8])
            .fit(d.X_train, d.y_train)
            .calibrate(d.X_cal, d.y_cal)
        ),
        lambda e, d: (e.predict_interval(d.X_test), e.predict(d.X_test)),
    ),
    Row(
        "SplitConformalRegressor-callable",
        "SplitConformalRegressor",
        lambda d: (
            G.SplitConformalRegressor(estimator=ols_fit_predict).fit(d.X_train, d.y_train).calibrate(d.X_cal, d.y_cal)
        ),
        lambda e, d: e.predict_interval(d.X_test),
        lambda: {"estimator": ols_fit_predict},
    ),
    Row(
        "SplitConformalRegressor-user-model",
        "SplitConformalRegressor",
        lambda d: G.SplitConformalRegressor(
            estimator=UserModel().fit(d.X_train, d.y_train), prefit=True, score="signed"
        ).calibrate(d.X_cal, d.y_cal),
        lambda e, d: e.predict_interval(d.X_test),
        lambda: {"estimator": UserModel().fit(Data(fit_base=False).X_train, Data(fit_base=False).y_train)},
    ),
    Row(
        "ConformalPredictiveSystem",
        "ConformalPredictiveSystem",
        lambda d: G.ConformalPredictiveSystem().fit(d.pred(d.X_cal), d.y_cal),
        lambda e, d: (e.predict(d.pred(d.X_test)), e.predict_cdf(d.pred(d.X_test), np.zeros(9))),
    ),
    Row(
        "SplitConformalCalibrator",
        "SplitConformalCalibrator",
        lambda d: G.SplitConformalCalibrator(score="normalized", confidence_level=[0.5, 0.8]).fit(
            d.pred(d.X_cal), d.y_cal
        ),
        lambda e, d: (e.predict(d.pred(d.X_test)), e.predict_interval(d.pred(d.X_test))),
    ),
    Row(
        "CrossConformalRegressor",
        "CrossConformalRegressor",
        lambda d: G.CrossConformalRegressor(
            estimator=G.LinearRegression(), cv=4, random_state=0, confidence_level=[0.5, 0.8]
        ).fit(d.X_train, d.y_train),
        lambda e, d: e.predict(d.X_test),
    ),
    Row(
        "CrossConformalRegressor-jackknife-callable",
        "CrossConformalRegressor",
        lambda d: G.CrossConformalRegressor(
            estimator=ols_fit_predict, method="base", cv="loo", score="normalized", confidence_level=0.8
        ).fit(d.X_train, d.y_train),
        lambda e, d: e.predict_interval(d.X_test),
        lambda: {"estimator": ols_fit_predict},
    ),
    Row(
        "JackknifePlusGP",
        "JackknifePlusGP",
        lambda d: G.JackknifePlusGP(estimator=d.base, prefit=True, score="signed", confidence_level=[0.5, 0.8]).fit(),
        lambda e, d: e.predict(d.X_test),
    ),
    Row(
        "FullConformalGP",
        "FullConformalGP",
        lambda d: G.FullConformalGP(
            estimator=G.GaussianProcessRegressor(mean="constant", random_state=0), confidence_level=0.8
        ).fit(d.X_train, d.y_train),
        lambda e, d: e.predict_interval(d.X_test),
    ),
    # calibrators added after 0.1.0 (their files are not in tests/data/saved-0.1.0)
    Row(
        "ConformalizedQuantileRegression",
        "ConformalizedQuantileRegression",
        lambda d: G.ConformalizedQuantileRegression(confidence_level=0.8).fit(d.pred(d.X_cal), d.y_cal),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    Row(
        "ConditionalConformal",
        "ConditionalConformal",
        lambda d: G.ConditionalConformal(confidence_level=0.8).fit(d.pred(d.X_cal), d.y_cal),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    Row(
        "ConformalBayes",
        "ConformalBayes",
        lambda d: G.ConformalBayes(confidence_level=0.8, pareto_k=False).fit(_cb_problem()[0]),
        lambda e, d: e.predict(*_cb_problem()[1:]),
    ),
    Row(
        "LOOJackknifePlus",
        "LOOJackknifePlus",
        lambda d: G.LOOJackknifePlus(confidence_level=0.8).fit_tree(_loo_tree()[0]),
        lambda e, d: e.predict_draws(_loo_tree()[1]),
    ),
    # helper estimators
    Row(
        "Standardizer",
        "Standardizer",
        lambda d: G.datasets.Standardizer().fit(d.X_train, d.y_train),
        lambda e, d: (e.transform_X(d.X_test), e.transform_scale(np.ones(3))),
    ),
]
ROW_BY_NAME = {r.name: r for r in ROWS}


def _arrays(result, prefix: str = "") -> dict[str, np.ndarray]:
    """Every array of a prediction (Dataset, DataTree, tuple, ndarray), by name."""
    out = {}
    if isinstance(result, xr.DataTree):
        for node in result.subtree:
            out.update(_arrays(node.to_dataset(inherit=False), f"{prefix}{node.path}:"))
    elif isinstance(result, xr.Dataset):
        for name, var in result.variables.items():
            out[f"{prefix}{name}"] = np.asarray(var.values)
    elif isinstance(result, tuple):
        for i, item in enumerate(result):
            out.update(_arrays(item, f"{prefix}{i}."))
    elif result is not None:
        out[prefix or "value"] = np.asarray(result)
    return {k: (v.astype(str) if v.dtype.kind == "O" else v) for k, v in out.items()}


def _predict_all(folder: Path, data: Data, rows) -> tuple[dict, dict]:
    results, errors = {}, {}
    for row in rows:
        try:
            est = calibprob.load(folder / f"{row.name}.nc", **row.objects())
            for k, v in _arrays(row.predict(est, data)).items():
                results[f"{row.name}|{k}"] = v
        except Exception as err:  # reported per row by the parent
            errors[row.name] = f"{type(err).__name__}: {err}"
    return results, errors


def child_main(folder: str) -> None:
    """Run in the new process: load every saved file, predict, write the results."""
    folder = Path(folder)
    data = Data(base=calibprob.load(folder / "_base.nc"))
    results, errors = _predict_all(folder, data, ROWS)
    np.savez(folder / "child.npz", **results)
    (folder / "child_errors.json").write_text(json.dumps(errors))


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory):
    folder = tmp_path_factory.mktemp("io")
    data = Data()
    data.base.save(folder / "_base.nc")
    parent, fit_errors = {}, {}
    for row in ROWS:
        try:
            est = row.fit(data)
            est.save(folder / f"{row.name}.nc")  # before predicting: a Generator's state is saved unused
            parent[row.name] = _arrays(row.predict(est, data))
        except Exception as err:
            fit_errors[row.name] = f"{type(err).__name__}: {err}"
    root = Path(calibprob.__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(TESTS_DIR)]), "OPENBLAS_NUM_THREADS": "1"}
    code = f"import test_io; test_io.child_main({str(folder)!r})"
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900, cwd=folder
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    with np.load(folder / "child.npz", allow_pickle=False) as z:
        child = {k: z[k] for k in z.files}
    child_errors = json.loads((folder / "child_errors.json").read_text())
    return folder, parent, fit_errors, child, child_errors


@pytest.mark.parametrize("name", list(ROW_BY_NAME))
def test_round_trip_in_new_process(round_trip, name):
    folder, parent, fit_errors, child, child_errors = round_trip
    assert name not in fit_errors, fit_errors.get(name)
    assert name not in child_errors, child_errors.get(name)
    path = folder / f"{name}.nc"
    assert path.read_bytes()[:8] == HDF5_SIGNATURE
    expected = parent[name]
    got = {k.split("|", 1)[1]: v for k, v in child.items() if k.split("|", 1)[0] == name}
    assert expected and set(got) == set(expected)
    for key, want in expected.items():
        have = got[key]
        assert have.shape == want.shape, key
        if want.dtype.kind in "fiub":
            np.testing.assert_allclose(have, want, rtol=0, atol=ATOL, err_msg=f"{name}: {key}")
        else:
            assert np.array_equal(have, want), f"{name}: {key}"


def _public_estimator_classes() -> set[str]:
    import calibprob.bases.gp
    import calibprob.bases.linear
    import calibprob.calibrators
    import calibprob.calibrators.online

    names = set()
    for mod in (
        calibprob.calibrators,
        calibprob.calibrators.conformal,
        calibprob.calibrators.online,
        calibprob.bases.linear,
        calibprob.bases.gp,
    ):
        for name in mod.__all__:
            obj = getattr(mod, name)
            helper = name in calibprob.registry.CLASSES and calibprob.registry.CLASSES[name].role == "helper"
            if isinstance(obj, type) and issubclass(obj, calibprob._core.estimator.BaseEstimator) and not helper:
                names.add(name)  # helpers (Mondrian, Bins: they wrap a calibrator) have their own round trips
    return names


def test_every_public_class_has_a_row_and_is_registered():
    public = _public_estimator_classes()
    assert len(public) >= 17
    assert public <= {r.cls for r in ROWS}
    assert public <= set(REGISTRY)
    assert {r.cls for r in ROWS} <= set(REGISTRY)


# ----------------------------------------------------------------------------- same process
@pytest.fixture(scope="module")
def data():
    return Data()


@pytest.fixture
def ols_file(tmp_path, data):
    path = tmp_path / "ols.nc"
    calibprob.LinearRegression().fit(data.X_train, data.y_train).save(path)
    return path


def test_file_layout_is_readable_netcdf(ols_file):
    tree = xr.open_datatree(ols_file, engine="h5netcdf")
    assert tree.attrs["calibprob_format"] == FORMAT_VERSION
    assert tree.attrs["calibprob_class"] == "LinearRegression"
    assert bool(tree["params"]["fit_intercept"].values) is True
    assert tree["state"]["coef_"].shape == (1,)
    assert "private_R" in tree["state"].data_vars  # private state needed to predict
    tree.close()


def test_unfitted_and_parameter_types_round_trip(tmp_path):
    theta = {"lengthscale": np.array([0.5, 2.0]), "variance": 1.5, "noise": 0.01}
    gp = calibprob.GaussianProcessRegressor(theta=theta, optimize=False, n_restarts=2, compile_mode=None)
    gp.save(tmp_path / "gp.nc")
    back = calibprob.load(tmp_path / "gp.nc")
    params = back.get_params()
    assert params["compile_mode"] is None and params["optimize"] is False and params["n_restarts"] == 2
    np.testing.assert_array_equal(params["theta"]["lengthscale"], theta["lengthscale"])
    assert type(params["theta"]["variance"]) is float
    assert not hasattr(back, "theta_")


def test_caches_not_saved_and_refit_after_load(tmp_path, data):
    gp = calibprob.GaussianProcessRegressor(random_state=0).fit(data.X_train, data.y_train)
    gp.predict_mean_std(data.X_test, theta={"variance": 2.0})  # fills the _last_state cache
    assert gp._last_state is not None
    gp.save(tmp_path / "gp.nc")
    tree = xr.open_datatree(tmp_path / "gp.nc", engine="h5netcdf")
    assert "private_last_state" not in tree["state"].children
    assert "private_last_state" not in tree["state"].data_vars
    tree.close()
    back = calibprob.load(tmp_path / "gp.nc")
    assert back._last_state is None
    np.testing.assert_allclose(
        back.predict_mean_std(data.X_test, theta={"variance": 2.0})[1],
        gp.predict_mean_std(data.X_test, theta={"variance": 2.0})[1],
        rtol=0,
        atol=ATOL,
    )
    refit = back.fit(data.X_train, data.y_train)  # compiled objective rebuilt on demand
    np.testing.assert_allclose(refit.theta_["lengthscale"], gp.theta_["lengthscale"], rtol=1e-8)


def test_shared_objects_stay_shared(tmp_path, data):
    jgp = calibprob.JackknifePlusGP(estimator=data.base, prefit=True).fit()
    jgp.save(tmp_path / "j.nc")
    back = calibprob.load(tmp_path / "j.nc")
    assert back.estimator_ is back.estimator  # prefit: the fitted GP is the parameter itself
    assert back.view_ is not None  # derived kriging view rebuilt on load


def test_online_to_dataset_files_load_too(tmp_path, data):
    rec = calibprob.OnlineQuantileRecalibrator(eta=0.5).fit(data.pred(data.X_cal), data.y_cal)
    rec.to_dataset().to_netcdf(tmp_path / "state.nc", engine="h5netcdf")
    back = calibprob.load(tmp_path / "state.nc")
    assert isinstance(back, calibprob.OnlineQuantileRecalibrator)
    np.testing.assert_array_equal(back.theta_, rec.theta_)
    assert back.n_updates_ == rec.n_updates_
    rec.save(tmp_path / "saved.nc")
    generic = calibprob.load(tmp_path / "saved.nc")
    xr.testing.assert_identical(generic.to_dataset(), rec.to_dataset())


# ----------------------------------------------------------------------------- user code
def test_user_callable_must_be_passed_again(tmp_path, data):
    scp = (
        calibprob.SplitConformalRegressor(estimator=ols_fit_predict)
        .fit(data.X_train, data.y_train)
        .calibrate(data.X_cal, data.y_cal)
    )
    scp.save(tmp_path / "scp.nc")
    with pytest.raises(
        ValueError,
        match=r"estimator \(function test_io\.ols_fit_predict\).*"
        r"pass the object\(s\) again: calibprob\.load\(path, estimator=\.\.\.\)",
    ):
        calibprob.load(tmp_path / "scp.nc")
    with pytest.raises(TypeError, match=r"unexpected keyword\(s\) \['fit_predict'\].*user objects at \['estimator'\]"):
        calibprob.load(tmp_path / "scp.nc", estimator=ols_fit_predict, fit_predict=ols_fit_predict)
    back = calibprob.load(tmp_path / "scp.nc", estimator=ols_fit_predict)
    assert back.estimator is ols_fit_predict and back.estimator_.fit_predict is ols_fit_predict
    plain = calibprob.LinearRegression().save(tmp_path / "l.nc")
    with pytest.raises(TypeError, match=r"unexpected keyword\(s\) \['estimator'\].*no path"):
        calibprob.load(plain, estimator=ols_fit_predict)


def test_nested_callable_by_dotted_path(tmp_path, data):
    cr = calibprob.calibrators.conformal.CallableRegressor(fit_predict=ols_fit_predict).fit(data.X_train, data.y_train)
    scp = calibprob.SplitConformalRegressor(estimator=cr, prefit=True).calibrate(data.X_cal, data.y_cal)
    scp.save(tmp_path / "s.nc")
    with pytest.raises(ValueError, match=r"estimator\.fit_predict .*calibprob\.load\(path, fit_predict=\.\.\.\)"):
        calibprob.load(tmp_path / "s.nc")
    back = calibprob.load(tmp_path / "s.nc", **{"estimator.fit_predict": ols_fit_predict})
    xr.testing.assert_allclose(back.predict_interval(data.X_test), scp.predict_interval(data.X_test))


# ----------------------------------------------------------------------------- bad input
def test_missing_file_and_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no such file: '.*nope\.nc'"):
        calibprob.load(tmp_path / "nope.nc")
    with pytest.raises(IsADirectoryError, match="is a directory; pass the .nc file"):
        calibprob.load(tmp_path)


def test_not_hdf5_refused(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match=r"does not start with the HDF5/netCDF-4 signature"):
        calibprob.load(path)
    nc3 = tmp_path / "v3.nc"
    xr.Dataset({"a": ("x", [1.0])}).to_netcdf(nc3, engine="scipy")
    with pytest.raises(ValueError, match=r"signature .*It is a netCDF-3 file; calibprob writes netCDF-4"):
        calibprob.load(nc3)


class _Evil:
    """Unpickling this would run a command that creates a marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_pickle_file_refused_without_unpickling(tmp_path, protocol):
    marker = tmp_path / "PWNED"
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(_Evil(marker), protocol=protocol))
    with pytest.raises(ValueError, match=r"HDF5/netCDF-4 signature.*looks like a pickle: calibprob never unpickles"):
        calibprob.load(path)
    assert not marker.exists()


def _crafted(src: Path, dst: Path, edit) -> Path:
    shutil.copy(src, dst)
    with h5py.File(dst, "a") as f:
        edit(f)
    return dst


def _evil_bytes(marker) -> bytes:
    return pickle.dumps(_Evil(marker), protocol=pickle.HIGHEST_PROTOCOL)


@pytest.mark.parametrize("how", ["opaque-variable", "bytes-variable", "uint8-variable", "opaque-attr", "bytes-attr"])
def test_netcdf_with_pickled_payload_refused(tmp_path, ols_file, how):
    marker = tmp_path / "PWNED"
    payload = _evil_bytes(marker)

    def edit(f):
        g = f["state"]
        index = len(g.keys())
        if how.endswith("variable"):
            data = {"opaque": np.void(payload), "bytes": np.bytes_(payload), "uint8": np.frombuffer(payload, np.uint8)}[
                how.split("-")[0]
            ]
            d = g.create_dataset("evil", data=data)
            d.attrs["calibprob_type"] = "ndarray"
            d.attrs["calibprob_index"] = index
            d.attrs["calibprob_key"] = '"evil"'
        else:
            g.attrs["evil"] = np.void(payload) if how == "opaque-attr" else np.bytes_(payload)

    path = _crafted(ols_file, tmp_path / f"{how}.nc", edit)
    with pytest.raises(ValueError, match=r"refusing to load: /state .*raw bytes.*calibprob never unpickles"):
        calibprob.load(path)
    assert not marker.exists()


def test_unknown_class_refused(tmp_path, ols_file):
    def root(f):
        f.attrs["calibprob_class"] = "os.system"

    with pytest.raises(
        ValueError,
        match=r"unknown class 'os\.system' at /; calibprob\.load restores only "
        r"calibprob's own classes .* never imports code",
    ):
        calibprob.load(_crafted(ols_file, tmp_path / "a.nc", root))

    src = tmp_path / "nested.nc"
    calibprob.SplitConformalRegressor(estimator=calibprob.LinearRegression()).save(src)

    def nested(f):
        f["params/estimator"].attrs["calibprob_class"] = "subprocess.Popen"

    with pytest.raises(ValueError, match=r"unknown class 'subprocess\.Popen' at /params/estimator"):
        calibprob.load(_crafted(src, tmp_path / "b.nc", nested))


def test_newer_format_refused(tmp_path, ols_file):
    def newer(f):
        f.attrs["calibprob_format"] = "2.0"

    with pytest.raises(
        ValueError,
        match=r"file format 2\.0 .*newer than format 1\.0, the newest this calibprob .* reads\. "
        r"Upgrade calibprob",
    ):
        calibprob.load(_crafted(ols_file, tmp_path / "n.nc", newer))

    def minor(f):
        f.attrs["calibprob_format"] = "1.7"

    # a newer minor version is refused too (a newer writer may store what this reader would drop)
    with pytest.raises(ValueError, match=r"file format 1\.7 .*newer than format 1\.0.*Upgrade calibprob"):
        calibprob.load(_crafted(ols_file, tmp_path / "m.nc", minor))


def test_foreign_netcdf_and_damaged_file_refused(tmp_path, ols_file):
    path = tmp_path / "data.nc"
    xr.Dataset({"a": ("x", [1.0, 2.0])}).to_netcdf(path, engine="h5netcdf")
    with pytest.raises(
        ValueError, match=r"not one written by calibprob's save\(\): its root has no 'calibprob_format'"
    ):
        calibprob.load(path)
    bad = tmp_path / "trunc.nc"
    bad.write_bytes(ols_file.read_bytes()[:600])
    with pytest.raises(ValueError, match="starts like an HDF5 file but netCDF cannot read it"):
        calibprob.load(bad)

    def drop_index(f):
        del f["state/coef_"].attrs["calibprob_index"]

    with pytest.raises(ValueError, match=r"not a valid calibprob file at /state/coef_: a node without calibprob_index"):
        calibprob.load(_crafted(ols_file, tmp_path / "d.nc", drop_index))

    def bad_tag(f):
        f["state/coef_"].attrs["calibprob_type"] = "pickle"

    with pytest.raises(ValueError, match=r"at /state/coef_: unknown value type 'pickle'"):
        calibprob.load(_crafted(ols_file, tmp_path / "t.nc", bad_tag))


def test_renamed_parameter_refused(tmp_path, ols_file):
    def rename(f):
        f["params"].move("fit_intercept", "intercept")
        f["params/intercept"].attrs["calibprob_key"] = '"intercept"'

    with pytest.raises(
        ValueError,
        match=r"LinearRegression parameters \['intercept'\] that this calibprob's "
        r"LinearRegression does not take",
    ):
        calibprob.load(_crafted(ols_file, tmp_path / "r.nc", rename))


def test_save_refuses_subclasses_and_unsaveable_values(tmp_path, data):
    class MyOLS(calibprob.LinearRegression):
        pass

    with pytest.raises(TypeError, match=r"save\(\) writes calibprob's own estimators only; got .*MyOLS"):
        MyOLS().fit(data.X_train, data.y_train).save(tmp_path / "m.nc")
    ols = calibprob.LinearRegression().fit(data.X_train, data.y_train)
    ols.extra_ = np.array([1 + 2j])
    with pytest.raises(TypeError, match=r"cannot save extra_: arrays of dtype complex128"):
        ols.save(tmp_path / "c.nc")
    ols.extra_ = {(1, 2): 3.0}
    with pytest.raises(TypeError, match=r"cannot save extra_: dict key \(1, 2\) is not a str, int or float"):
        ols.save(tmp_path / "k.nc")


def test_values_round_trip_exactly(tmp_path, data):
    """Every value type of the format, with types preserved (float vs int vs numpy scalar)."""
    ols = calibprob.LinearRegression().fit(data.X_train, data.y_train)
    values = {
        "none": None,
        "t": True,
        "i": -3,
        "big": 2**100,
        "f": 0.1,
        "s": "héllo",
        "empty": "",
        "np_f32": np.float32(1.5),
        "np_i": np.int32(7),
        "arr0": np.array(2.5),
        "strs": np.array(["a", "bc"]),
        "bools": np.array([True, False]),
        "floats": [0.1, 0.2],
        "mixed": [1, "a", None, [2.0]],
        "tup": (1, 2),
        "empty_list": [],
        "nested": {"a": {"b": [np.arange(3)]}, 3: "int key", 0.5: "float key"},
        "dataset": xr.Dataset(
            {"v": ("obs", [1.0, np.nan])},
            coords={"obs": [10, 20]},
            attrs={"flag": True, "list": [1, 2], "none": None, "name": "x"},
        ),
        "dataarray": xr.DataArray([1, 2], dims="k", name="counts", attrs={"units": "m"}),
        "tree": xr.DataTree.from_dict(
            {
                "posterior": xr.Dataset({"mu": (("chain", "draw"), np.ones((2, 3)))}),
                "sample_stats": xr.Dataset(attrs={"ok": False}),
            }
        ),
        "gen": np.random.default_rng(11),
        "legacy_rng": np.random.RandomState(4),
    }
    ols.extra_ = values
    ols.save(tmp_path / "v.nc")
    back = calibprob.load(tmp_path / "v.nc").extra_
    assert set(back) == set(values)
    for key in ("none", "t", "i", "big", "f", "s", "empty", "floats", "mixed", "tup", "empty_list"):
        assert back[key] == values[key] and type(back[key]) is type(values[key]), key
    for key in ("np_f32", "np_i"):
        assert back[key] == values[key] and back[key].dtype == values[key].dtype, key
    for key in ("arr0", "strs", "bools"):
        np.testing.assert_array_equal(back[key], values[key])
        assert back[key].dtype == values[key].dtype
    assert back["nested"][3] == "int key" and back["nested"][0.5] == "float key"
    np.testing.assert_array_equal(back["nested"]["a"]["b"][0], np.arange(3))
    xr.testing.assert_identical(back["dataset"], values["dataset"])
    assert back["dataset"].attrs == values["dataset"].attrs
    xr.testing.assert_identical(back["dataarray"], values["dataarray"])
    xr.testing.assert_identical(back["tree"], values["tree"])
    assert back["gen"].random() == values["gen"].random()
    assert back["legacy_rng"].random_sample() == values["legacy_rng"].random_sample()
