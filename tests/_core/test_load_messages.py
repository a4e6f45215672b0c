"""Every refusal of ``calibprob.load`` says what to do.

A file of a newer format version (major or minor) is refused naming both versions and asking
for an upgrade; a plain netCDF file, a file carrying raw bytes, a missing file and a file of
another class than the one asked for each get a message with the fix. The files are written
here by ``save`` and edited with h5py, as a newer calibprob or a stray tool would leave them.
"""

from __future__ import annotations

import shutil

import h5py
import numpy as np
import pytest
import xarray as xr

import calibprob
from calibprob._core.persistence import FORMAT_VERSION


@pytest.fixture
def ols_file(tmp_path):
    X = np.arange(12.0)[:, None]
    y = 2.0 * X[:, 0] + np.sin(X[:, 0])
    return calibprob.LinearRegression().fit(X, y).save(tmp_path / "ols.nc")


def _edited(src, dst, edit):
    shutil.copy(src, dst)
    with h5py.File(dst, "a") as f:
        edit(f)
    return dst


@pytest.mark.parametrize("newer", ["1.1", "2.0", "10.3"])
def test_newer_format_refused_naming_both_versions_and_the_upgrade(tmp_path, ols_file, newer):
    def stamp(f):
        f.attrs["calibprob_format"] = newer
        f.attrs["calibprob_version"] = "9.9.9"

    path = _edited(ols_file, tmp_path / "new.nc", stamp)
    with pytest.raises(
        ValueError,
        match=rf"file format {newer.replace('.', r'\.')} \(written by calibprob 9\.9\.9\), newer than format "
        rf"{FORMAT_VERSION.replace('.', r'\.')}, the newest this calibprob {calibprob.__version__} reads\. "
        r"Upgrade calibprob \(pip install -U calibprob\)",
    ):
        calibprob.load(path)


def test_same_or_older_format_still_loads(tmp_path, ols_file):
    def older(f):
        f.attrs["calibprob_format"] = "0.9"

    assert isinstance(calibprob.load(_edited(ols_file, tmp_path / "old.nc", older)), calibprob.LinearRegression)
    assert isinstance(calibprob.load(ols_file), calibprob.LinearRegression)


def test_plain_netcdf_says_how_to_read_it_and_what_load_reads(tmp_path):
    path = tmp_path / "data.nc"
    xr.Dataset({"a": ("x", [1.0, 2.0])}).to_netcdf(path, engine="h5netcdf")
    with pytest.raises(
        ValueError,
        match=r"reads only files written by estimator\.save\(path\) .*open it with xarray\.open_dataset\(path\)",
    ):
        calibprob.load(path)


def test_raw_bytes_say_to_refit_and_save_again(tmp_path, ols_file):
    def smuggle(f):
        f["state"].attrs["blob"] = np.void(b"\x80\x04K\x01.")

    with pytest.raises(
        ValueError, match=r"raw bytes.*Load only files written by estimator\.save\(path\).*save it again"
    ):
        calibprob.load(_edited(ols_file, tmp_path / "b.nc", smuggle))


def test_missing_file_lists_the_folder_or_says_it_is_missing_too(tmp_path, ols_file):
    with pytest.raises(FileNotFoundError, match=r"no such file: .*olss\.nc'.*\.nc files in the folder .*: ols\.nc"):
        calibprob.load(tmp_path / "olss.nc")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"estimator\.save\(path\); the folder .*empty' holds no \.nc file"):
        calibprob.load(tmp_path / "empty" / "a.nc")
    with pytest.raises(FileNotFoundError, match=r"the folder .*nowhere' does not exist either"):
        calibprob.load(tmp_path / "nowhere" / "a.nc")


def test_file_of_another_class_than_asked_names_both_and_how_to_load_it(ols_file):
    with pytest.raises(
        TypeError,
        match=r"holds a LinearRegression, not a GaussianProcessRegressor: load it with "
        r"LinearRegression\.load\(path\), or with calibprob\.load\(path\)",
    ):
        calibprob.GaussianProcessRegressor.load(ols_file)
    back = calibprob.LinearRegression.load(ols_file)
    X = np.arange(3.0)[:, None]
    ref = calibprob.load(ols_file)
    assert np.array_equal(back.predict_mean_std(X)[0], ref.predict_mean_std(X)[0])
