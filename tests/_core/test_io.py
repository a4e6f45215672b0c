"""Saving and loading without pickle (calibprob._core.persistence): round trips in a new process, refused files.

Every public estimator class is a row of ``tests.support.saved_rows.ROWS``. The parent fits and saves every row,
then ONE child process (a fresh interpreter that has never seen the fitted objects) loads every file and
predicts; the predictions must agree to 1e-10.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr

import calibprob
import calibprob.calibrators.conformal
from calibprob._core.persistence import FORMAT_VERSION, HDF5_SIGNATURE, REGISTRY
from calibprob._core.persistence.format import _subscripts
from tests.support.paths import REPO_ROOT
from tests.support.saved_rows import ROW_BY_NAME, ROWS, Data, arrays, ols_fit_predict

ATOL = 1e-10


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
            parent[row.name] = arrays(row.predict(est, data))
        except Exception as err:
            fit_errors[row.name] = f"{type(err).__name__}: {err}"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OPENBLAS_NUM_THREADS": "1"}
    code = f"from tests.support.saved_rows import child_main; child_main({str(folder)!r})"
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
            if isinstance(obj, type) and issubclass(obj, calibprob._core.estimator.BaseEstimator):
                names.add(name)
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
        match=r"estimator \(function tests\.support\.saved_rows\.ols_fit_predict\).*"
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


class _Shift:
    """A user model a file cannot hold (not calibprob's): predicts ``x + c``."""

    def __init__(self, c):
        self.c = c

    def predict(self, X):
        return X[:, 0] + self.c


def test_a_list_of_user_objects_passed_again_gives_each_element_its_own(tmp_path):
    """``models_=[m0, m1, m2]``, as the load error asks, puts ``m_i`` at ``models_[i]`` (not the list at each)."""
    gbm = calibprob.QuantileGradientBoosting(levels=[0.1, 0.5, 0.9])
    gbm.models_, gbm.levels_, gbm.n_features_in_ = (
        [_Shift(-1.0), _Shift(0.0), _Shift(1.0)],
        np.array([0.1, 0.5, 0.9]),
        1,
    )
    path = gbm.save(tmp_path / "gbm.nc")
    with pytest.raises(
        ValueError, match=r"models_\[0\] \(tests\._core\.test_io\._Shift instance\).*load\(path, models_=\.\.\.\)"
    ):
        calibprob.load(path)
    back = calibprob.load(path, models_=gbm.models_)
    assert all(b is m for b, m in zip(back.models_, gbm.models_, strict=True))
    X = np.array([[0.0], [2.0]])
    np.testing.assert_array_equal(back.predict(X)["quantile"].values, [[-1.0, 0.0, 1.0], [1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match=r"models_: the file holds a user object at models_\[0\].*got a _Shift"):
        calibprob.load(path, models_=_Shift(0.0))
    with pytest.raises(ValueError, match=r"models_: .*models_\[2\].*got a list without the element 2"):
        calibprob.load(path, models_=gbm.models_[:2])


def test_labels_read_back_into_keys_and_indices():
    assert _subscripts("models_[0]") == [0]
    assert _subscripts("estimator_.models_[1]['k'][-2]") == [1, "k", -2]
    assert _subscripts("estimator_.fit_predict") == [] and _subscripts("a[nan]") == [] and _subscripts("a[") == []


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


def test_a_removed_parameter_at_its_old_default_is_dropped_and_any_other_value_refused(tmp_path, monkeypatch):
    """``_REMOVED_PARAMS`` (name -> old default): how 0.1.0 files holding a removed parameter (``SharpCalibratedGP``'s
    ``base=None``) load as the new form. Exercised on a class whose ``score`` is declared removed for the test."""
    rng = np.random.default_rng(3)
    pred, y = calibprob.normal(rng.normal(size=40), np.ones(40)), rng.normal(size=40)
    at_default = calibprob.SplitConformalCalibrator(score="absolute").fit(pred, y).save(tmp_path / "a.nc")
    other = calibprob.SplitConformalCalibrator(score="normalized").fit(pred, y).save(tmp_path / "b.nc")
    monkeypatch.setattr(calibprob.SplitConformalCalibrator, "_REMOVED_PARAMS", {"score": "absolute"}, raising=False)
    back = calibprob.load(at_default)  # the file's score="absolute" dropped: the constructor's default rebuilds it
    assert back.score == "absolute"
    with pytest.raises(
        ValueError, match=r"holds a SplitConformalCalibrator saved with score=.*removed in calibprob 0\.2\.0"
    ):
        calibprob.load(other)
