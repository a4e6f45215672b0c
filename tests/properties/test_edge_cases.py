"""Named edge cases, one test each: extreme magnitudes, malformed user predictions and inputs, TOML and CSV
errors, and a results file replaced atomically.

The properties of the other files cover these cases as classes; each case here is kept as its own test so
that a regression names the case it breaks.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from scipy import stats

import calibprob
from calibprob.compare.spec import SpecError, load_spec
from calibprob.datasets import load_csv

# --- magnitudes ---------------------------------------------------------------------------


@pytest.mark.parametrize("s", [1e200, 1e-200])
def test_moments_and_rmse_at_extreme_scales(s):
    """Gaussian-shaped quantiles at scale 1e200 gave std = nan, rmse = inf; at 1e-200 std = 0."""
    lv = np.linspace(0.05, 0.95, 19)
    pred = calibprob.from_quantiles(s * stats.norm.ppf(lv)[None, :].repeat(3, 0), lv)
    np.testing.assert_allclose(pred.calib.std().values / s, 1.0, rtol=2e-3)  # 19 levels: tails approximate
    unit = np.random.default_rng(0).standard_normal((500, 3))
    draws = calibprob.from_draws(s * unit)
    np.testing.assert_allclose(draws.calib.std().values / s, np.std(unit, axis=0, ddof=1), rtol=1e-12)
    m = calibprob.evaluate(pred, s * np.array([0.1, -0.3, 2.0]))
    np.testing.assert_allclose(float(m["rmse"]) / s, np.sqrt(np.mean(np.array([0.1, -0.3, 2.0]) ** 2)), rtol=1e-6)
    np.testing.assert_allclose(float(m["std"]) / s, 1.0, rtol=2e-3)


# --- shapes at the boundary ----------------------------------------------------------------


def test_online_update_refuses_a_2d_y():
    """A (5, 2) y was taken as 10 stream steps."""
    rec = calibprob.OnlineQuantileRecalibrator()
    with pytest.raises(ValueError, match=r"y must be 1-D; got an array of shape \(5, 2\)\. Expected shape \(5,\)"):
        rec.update(calibprob.normal(np.zeros(5), np.ones(5)), np.zeros((5, 2)))
    assert getattr(rec, "n_updates_", 0) == 0


class _User:
    """A user's model: ``fit`` and ``predict``, no ``get_params`` (not scikit-learn)."""

    def __init__(self, out):
        self.out = out

    def fit(self, X, y):
        return self

    def predict(self, X):
        return self.out(X)


_BAD_PREDICTIONS = {
    "scalar": (lambda X: 1.0, ValueError, r"mu from _User's prediction must have shape \(\d+,\).*got shape \(\)"),
    "two columns": (lambda X: np.zeros((len(X), 2)), ValueError, r"must have shape \((\d+),\).*got shape \(\1, 2\)"),
    "NaN": (lambda X: np.full(len(X), np.nan), ValueError, r"mu from _User's prediction must be finite"),
    "list": (lambda X: [np.zeros(2), np.zeros(3)], TypeError, r"must be a numeric array of shape \(\d+,\); got list"),
}


@pytest.mark.parametrize("case", sorted(_BAD_PREDICTIONS))
def test_a_users_estimator_with_a_bad_prediction_is_refused(case):
    """A scalar gave one interval for five rows; two columns a NumPy broadcasting message."""
    out, err, match = _BAD_PREDICTIONS[case]
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(20, 2)), rng.normal(size=20)
    model = calibprob.SplitConformalRegressor(estimator=_User(out), score="absolute").fit(X[:10], y[:10])
    with pytest.raises(err, match=match):
        model.calibrate(X[10:], y[10:])
    with pytest.raises(err, match=match):
        calibprob.calibrators.conformal.CrossConformalRegressor(estimator=_User(out), cv=3).fit(X, y)


def test_cps_cdf_stays_in_unit_interval():
    """predict_cdf with tau = 1.2 returned 1.0095: tau outside [0, 1] is refused."""
    rng = np.random.default_rng(0)
    cps = calibprob.ConformalPredictiveSystem().fit(calibprob.normal(np.zeros(20), np.ones(20)), rng.normal(size=20))
    pred = calibprob.normal(np.zeros(3), np.ones(3))
    with pytest.raises(ValueError, match=r"tau must lie in \[0, 1\].*got range \[1\.2, 1\.2\]"):
        cps.predict_cdf(pred, np.array([0.0, 100.0, -100.0]), tau=1.2)
    with pytest.raises(
        ValueError, match=r"tau must be one number or one per test point, shape \(3,\); got shape \(2,\)"
    ):
        cps.predict_cdf(pred, np.zeros(3), tau=np.array([1.0, 0.5]))
    values = cps.predict_cdf(pred, np.array([0.0, 100.0, -100.0]), tau=1.0)
    assert np.all((values >= 0) & (values <= 1))


# --- messages: TOML and data paths ------------------------------------------------------


@pytest.mark.parametrize(
    "text, match",
    [
        (
            'name = "a"\nseed = 1\nname = "b"\n',
            r"key 'name' on line 3 is defined twice \(first on line 1\)\. .*delete one",
        ),
        (
            '[methods.x]\nkind = "isotonic"\n[methods.x]\nkind = "vovk"\n',
            r"table \[methods\.x\] on line 3 is defined twice \(first on line 1\)\. .*merge the two",
        ),
    ],
)
def test_toml_errors_name_the_key_the_line_and_the_fix(tmp_path, text, match):
    path = tmp_path / "spec.toml"
    path.write_text(text)
    with pytest.raises(SpecError, match=match):
        load_spec(path)


def _paths(tmp_path):
    (tmp_path / "folder.csv").mkdir()
    os.symlink(tmp_path / "nowhere.csv", tmp_path / "broken.csv")
    os.symlink(tmp_path / "loop.csv", tmp_path / "loop.csv")
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "header.csv").write_text("y,x\n")


_PATH_CASES = {
    "folder.csv": r"is a directory, not a CSV file\. Give the path of the CSV file inside it",
    "broken.csv": r"is a broken symbolic link: its target .*nowhere\.csv' does not exist\. Restore the target",
    "loop.csv": r"is a symbolic link that loops .* give the CSV file's real path",
}


@pytest.mark.parametrize("name", sorted(_PATH_CASES))
def test_data_paths_that_are_not_files_get_their_own_message(tmp_path, name):
    _paths(tmp_path)
    with pytest.raises(FileNotFoundError, match=_PATH_CASES[name]):
        load_csv(tmp_path / name, target="y")
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f'name = "t"\ndatasets = [{{ name = "d", path = "{name}", target = "y" }}]\n'
        'split = { train = 0.6, calibrate = 0.2, test = 0.2 }\n[base]\nkind = "ols"\n[methods.b]\nkind = "base"\n'
    )
    with pytest.raises(SpecError, match=_PATH_CASES[name]):
        load_spec(spec)


def test_empty_and_header_only_csv_get_their_own_message(tmp_path):
    _paths(tmp_path)
    with pytest.raises(ValueError, match=r"empty\.csv is empty: a CSV needs a header row and data rows"):
        load_csv(tmp_path / "empty.csv", target="y")
    with pytest.raises(ValueError, match=r"header\.csv has a header row \(y, x\) but no data rows\. Add the data"):
        load_csv(tmp_path / "header.csv", target="y")


# --- the results file ---------------------------------------------------------------------

_TINY = """name = "tiny"
datasets = ["boston"]
repetitions = 1
seed = 0
split = { train = 0.6, calibrate = 0.2, test = 0.2 }
[base]
kind = "ols"
[methods.iso]
kind = "isotonic"
"""


def test_results_file_open_elsewhere_is_replaced_atomically(tmp_path):
    """A results file held open by a reader (here h5py, in this process) does not block a rerun,
    and a write that fails midway leaves the previous file whole.

    ``calibprob compare`` writes through ``calibprob.runs.write_atomic`` (a temporary name in
    the same folder, then ``os.replace``); this test passes on da54378 too: it guards that
    behaviour rather than reproducing a failure (the reported "unable to truncate" was not
    reproduced on this machine).
    """
    import h5py
    import xarray as xr

    from calibprob import cli, runs

    spec, out = tmp_path / "tiny.toml", tmp_path / "r.nc"
    spec.write_text(_TINY)
    assert cli.main(["compare", str(spec), "--out", str(out), "--no-progress"]) == 0
    before = out.read_bytes()
    with h5py.File(out, "r"):
        assert cli.main(["compare", str(spec), "--out", str(out), "--no-progress"]) == 0
    xr.open_datatree(out, engine="h5netcdf").close()

    class Boom:
        def to_netcdf(self, path, engine=None):
            with open(path, "wb") as fh:
                fh.write(b"half")
            raise OSError(28, "No space left on device")

    kept = out.read_bytes()
    with pytest.raises(OSError, match=r"could not write .*No space left on device\. Free some space"):
        runs.write_atomic(Boom(), out)
    assert out.read_bytes() == kept and len(kept) > 1000 and len(before) > 1000
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []
