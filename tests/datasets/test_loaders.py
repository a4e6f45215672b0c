"""Tests of calibprob.datasets: bundled data, CSV loading, splits, Standardizer.

Independent references: PROVENANCE.md's table (shapes, targets), the CSV
files read with the standard-library ``csv`` module (values), NumPy statistics
of the training rows (standardiser), scipy.stats.norm (NLL shift).
"""

from __future__ import annotations

import csv
import re
from importlib import resources

import numpy as np
import pytest
import xarray as xr
from scipy import stats

from calibprob._core.estimator import NotFittedError
from calibprob.datasets import (
    Standardizer,
    available_datasets,
    list_datasets,
    load_csv,
    load_dataset,
    train_calibrate_test_split,
)

DATA = resources.files("calibprob.datasets").joinpath("data")


def _provenance_table() -> dict[str, tuple[int, int, str]]:
    """name -> (rows, cols, target) parsed from PROVENANCE.md (the shipped documentation)."""
    text = DATA.joinpath("PROVENANCE.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\|\s*(\w+)\.csv\s*\|\s*(\d+)\s*×\s*(\d+)\s*\|\s*([\w.]+)\s*\|", text, flags=re.M)
    return {name: (int(r), int(c), target) for name, r, c, target in rows}


PROVENANCE = _provenance_table()
BUNDLED = ["boston", "auto_mpg", "concrete", "diabetes", "airfoil", "wine_quality_red"]


def test_provenance_lists_every_bundled_set():
    assert sorted(PROVENANCE) == sorted([*BUNDLED, "diamonds", "radon_mn"])


def test_radon_is_shipped_with_its_county_names_one_hot_encoded():
    """The hierarchical-model set (homes within 85 counties), against the standard-library csv reader."""
    rows, cols, target = PROVENANCE["radon_mn"]
    with DATA.joinpath("radon_mn.csv").open("r", encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        raw = list(reader)
    assert (len(raw), len(header), header[-1]) == (rows, cols, target) == (919, 5, "log.radon")
    ds = load_dataset("radon")  # the alias
    assert ds.attrs["name"] == "radon_mn" and ds["y"].attrs["target"] == "log.radon"
    np.testing.assert_array_equal(ds["y"].values, [float(r[-1]) for r in raw])
    feats = list(ds["feature"].values)
    names = sorted({r[3] for r in raw})
    assert len(names) == 85 and len(feats) == 3 + 84
    for lv in names[1:]:
        np.testing.assert_array_equal(
            ds["X"].values[:, feats.index(f"county.name={lv}")], [float(r[3] == lv) for r in raw]
        )
    for col in ("basement", "uranium", "county"):
        j = header.index(col)
        np.testing.assert_array_equal(ds["X"].values[:, feats.index(col)], [float(r[j]) for r in raw])
    grouped = load_dataset("radon_mn", groups="county")
    counts = np.unique(grouped["group"].values, return_counts=True)[1]
    assert (counts.size, counts.min(), counts.max()) == (85, 1, 116)


def test_diamonds_is_shipped_with_its_grades_one_hot_encoded():
    """The 53 940-row set with text columns, against the standard-library csv reader."""
    rows, cols, target = PROVENANCE["diamonds"]
    with DATA.joinpath("diamonds.csv").open("r", encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        raw = list(reader)
    assert (len(raw), len(header), header[-1]) == (rows, cols, target) == (53940, 10, "price")
    ds = load_dataset("diamonds")
    assert ds["X"].dtype == np.float64 and np.isfinite(ds["X"].values).all()
    np.testing.assert_array_equal(ds["y"].values, [float(r[-1]) for r in raw])
    feats = list(ds["feature"].values)
    for j, col in enumerate(header[:-1]):
        levels = sorted({r[j] for r in raw})
        if col in ("cut", "color", "clarity"):  # one 0/1 column per level but the first (sorted)
            for lv in levels[1:]:
                k = feats.index(f"{col}={lv}")
                np.testing.assert_array_equal(ds["X"].values[:, k], [float(r[j] == lv) for r in raw])
            assert f"{col}={levels[0]}" not in feats
        else:
            np.testing.assert_array_equal(ds["X"].values[:, feats.index(col)], [float(r[j]) for r in raw])
    assert len(feats) == 6 + (5 - 1) + (7 - 1) + (8 - 1)
    assert ds.attrs["license"].startswith("MIT")
    assert float(ds["y"].min()) > 0  # the log transform applies


@pytest.mark.parametrize("name", BUNDLED)
def test_load_dataset_layout_matches_provenance(name):
    rows, cols, target = PROVENANCE[name]
    ds = load_dataset(name)
    assert isinstance(ds, xr.Dataset)
    assert ds["X"].dims == ("obs", "feature")
    assert ds["y"].dims == ("obs",)
    assert ds["X"].shape == (rows, cols - 1)
    assert ds["y"].shape == (rows,)
    assert ds["X"].dtype == np.float64 and ds["y"].dtype == np.float64
    assert np.isfinite(ds["X"].values).all() and np.isfinite(ds["y"].values).all()
    assert ds["y"].attrs["target"] == target == ds.attrs["target"]
    for key in ("source", "license"):
        assert ds["y"].attrs[key] and ds.attrs[key]
    assert ds.attrs["name"] == name and ds.attrs["description"]
    np.testing.assert_array_equal(ds["obs"].values, np.arange(rows))

    # values against the standard-library csv reader (independent of pandas)
    with DATA.joinpath(f"{name}.csv").open("r", encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        values = np.array([[float(v) for v in row] for row in reader])
    assert list(ds["feature"].values) == header[:-1]
    assert header[-1] == target
    np.testing.assert_array_equal(ds["X"].values, values[:, :-1])
    np.testing.assert_array_equal(ds["y"].values, values[:, -1])


def test_aliases_and_case():
    mpg = load_dataset("mpg")
    assert mpg.attrs["name"] == "auto_mpg"
    xr.testing.assert_identical(mpg, load_dataset("auto_mpg"))
    assert load_dataset("WINE").attrs["name"] == "wine_quality_red"
    assert {"mpg", "wine", "diamonds", "radon", "radon_mn", *BUNDLED} == set(available_datasets())


def test_unknown_dataset_lists_valid_names():
    with pytest.raises(
        ValueError, match=r"got 'yacht'.*'boston'.*'auto_mpg'.*'mpg'.*'concrete'.*'diabetes'.*'wine_quality_red'"
    ):
        load_dataset("yacht")


def test_boston_carries_the_b_column_note():
    ds = load_dataset("boston")
    assert "B" in list(ds["feature"].values)
    desc = ds.attrs["description"]
    assert "B column" in desc and "racially derived" in desc and "papers" in desc
    assert "racially derived" in load_dataset.__doc__


def test_list_datasets_table():
    table = list_datasets()
    assert list(table.columns[:5]) == ["name", "rows", "features", "target", "source"]
    assert list(table["name"]) == [*BUNDLED, "diamonds", "radon_mn"]
    for _, row in table.iterrows():
        rows, cols, target = PROVENANCE[row["name"]]
        # diamonds: 9 raw feature columns, 3 of them text grades one-hot encoded into 17
        # radon: 4 raw feature columns, the text county name one-hot encoded into 84
        n_features = {"diamonds": 23, "radon_mn": 87}.get(row["name"], cols - 1)
        assert (row["rows"], row["features"], row["target"]) == (rows, n_features, target)


def test_dataset_round_trips_through_netcdf(tmp_path):
    ds = load_dataset("diabetes")
    path = tmp_path / "d.nc"
    ds.to_netcdf(path, engine="h5netcdf")
    with xr.open_dataset(path, engine="h5netcdf") as back:
        back = back.load()
    np.testing.assert_array_equal(back["X"].values, ds["X"].values)
    assert list(back["feature"].values) == list(ds["feature"].values)
    assert back.attrs == ds.attrs


# ------------------------------------------------------------------ load_csv
def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_load_csv_layout(tmp_path):
    p = _write(tmp_path / "toy.csv", "a,target,b\n1,10,2.5\n2,20,3.5\n3,30,4.5\n")
    ds = load_csv(p, "target")
    assert list(ds["feature"].values) == ["a", "b"]
    np.testing.assert_array_equal(ds["X"].values, [[1, 2.5], [2, 3.5], [3, 4.5]])
    np.testing.assert_array_equal(ds["y"].values, [10, 20, 30])
    assert ds.attrs["name"] == "toy" and ds["y"].attrs["target"] == "target"
    sub = load_csv(p, "target", features=["b"], name="mine")
    assert list(sub["feature"].values) == ["b"] and sub.attrs["name"] == "mine"


def test_load_csv_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"does not exist"):
        load_csv(tmp_path / "nope.csv", "y")
    p = _write(tmp_path / "toy.csv", "a,b\n1,2\n3,4\n")
    with pytest.raises(ValueError, match=r"target must be a column of toy.csv; got 'y'\. Columns: 'a', 'b'"):
        load_csv(p, "y")
    with pytest.raises(ValueError, match=r"not found: 'zz'"):
        load_csv(p, "b", features=["zz"])
    with pytest.raises(ValueError, match=r"must not contain the target"):
        load_csv(p, "b", features=["a", "b"])
    q = _write(tmp_path / "text.csv", "a,colour,y\n1,red,2\n3,blue,4\n")
    with pytest.raises(ValueError, match=r"non-numeric: 'colour' \(e\.g\. 'red'\)"):
        load_csv(q, "y")
    assert load_csv(q, "y", features=["a"])["X"].shape == (2, 1)
    r = _write(tmp_path / "gaps.csv", "a,y\n1,2\n,4\n5,6\n")
    with pytest.raises(ValueError, match=r"missing values \('a': 1\).*dropna=True"):
        load_csv(r, "y")
    ds = load_csv(r, "y", dropna=True)
    assert ds.sizes["obs"] == 2 and ds.attrs["rows_dropped"] == 1


# -------------------------------------------------------------------- splits
@pytest.mark.parametrize(
    ("fractions", "match"),
    [
        ((0.6, 0.2, 0.1), r"must sum to 1; got 0\.6 \+ 0\.2 \+ 0\.1 = 0\.9"),
        ((0.7, 0.4), r"must sum to 1"),
        ((0.8, -0.1, 0.3), r"must all be > 0"),
        ((1.0, 0.0), r"must all be > 0"),
        ((1.0,), r"2 entries \(train, test\) or 3"),
        ((0.25, 0.25, 0.25, 0.25), r"2 entries \(train, test\) or 3"),
        ((0.5, np.nan, 0.5), r"must all be > 0"),
    ],
)
def test_split_fraction_errors(fractions, match):
    X = np.zeros((50, 2))
    with pytest.raises(ValueError, match=match):
        train_calibrate_test_split((X, X[:, 0]), fractions, seed=0)


def test_split_too_few_observations():
    with pytest.raises(ValueError, match=r"3 observations.*'calibrate' part would be empty.*at least 10"):
        train_calibrate_test_split(np.arange(3.0), (0.8, 0.1, 0.1), seed=0)


def test_split_bad_inputs():
    with pytest.raises(ValueError, match=r"mismatched lengths"):
        train_calibrate_test_split((np.zeros((5, 2)), np.zeros(4)), seed=0)
    with pytest.raises(ValueError, match=r"'obs' dimension"):
        train_calibrate_test_split(xr.DataArray(np.zeros(5), dims="row"), seed=0)


def test_split_partitions_dataset():
    ds = load_dataset("boston")
    parts = train_calibrate_test_split(ds, seed=3)
    assert list(parts) == ["train", "calibrate", "test"]
    sizes = [parts[k].sizes["obs"] for k in parts]
    assert sizes == [304, 101, 101]  # largest remainder: 303.6 -> 304, 101.2 -> 101
    ids = np.concatenate([parts[k]["obs"].values for k in parts])
    np.testing.assert_array_equal(np.sort(ids), np.arange(506))  # disjoint and complete
    # each row travels with its obs label
    sub = parts["test"]
    np.testing.assert_array_equal(sub["y"].values, ds["y"].values[sub["obs"].values])
    assert sub.attrs == ds.attrs


def test_split_capone_boston_fractions():
    parts = train_calibrate_test_split(load_dataset("boston"), (0.64, 0.16, 0.20), seed=0)
    assert [parts[k].sizes["obs"] for k in parts] == [324, 81, 101]


def test_split_two_parts_and_arrays_match_dataset():
    ds = load_dataset("concrete")
    two = train_calibrate_test_split(ds, (0.75, 0.25), seed=11)
    assert list(two) == ["train", "test"]
    arr = train_calibrate_test_split((ds["X"].values, ds["y"].values), (0.75, 0.25), seed=11)
    for k in two:
        X, y = arr[k]
        np.testing.assert_array_equal(X, two[k]["X"].values)
        np.testing.assert_array_equal(y, two[k]["y"].values)
    single = train_calibrate_test_split(ds["y"].values, (0.75, 0.25), seed=11)
    np.testing.assert_array_equal(single["test"], two["test"]["y"].values)


def test_split_determinism_under_seed():
    X = np.random.default_rng(0).normal(size=(200, 3))
    a = train_calibrate_test_split((X,), seed=5)
    b = train_calibrate_test_split((X,), seed=5)
    c = train_calibrate_test_split((X,), seed=6)
    for k in a:
        np.testing.assert_array_equal(a[k][0], b[k][0])
    assert not np.array_equal(a["test"][0], c["test"][0])
    g = train_calibrate_test_split((X,), seed=np.random.default_rng(5))
    np.testing.assert_array_equal(g["train"][0], a["train"][0])


# --------------------------------------------------------------- Standardizer
@pytest.fixture(scope="module")
def concrete_parts():
    return train_calibrate_test_split(load_dataset("concrete"), seed=2)


def test_standardizer_fitted_on_train_only(concrete_parts):
    train = concrete_parts["train"]
    sc = Standardizer().fit(train)
    Xtr, ytr = train["X"].values, train["y"].values
    np.testing.assert_allclose(sc.X_mean_, Xtr.mean(axis=0))
    np.testing.assert_allclose(sc.X_scale_, Xtr.std(axis=0))
    assert sc.y_mean_ == pytest.approx(ytr.mean()) and sc.y_scale_ == pytest.approx(ytr.std())
    full = load_dataset("concrete")
    assert not np.allclose(sc.X_mean_, full["X"].values.mean(axis=0))  # not the full-data statistics

    t = sc.transform(train)
    np.testing.assert_allclose(t["X"].values.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(t["X"].values.std(axis=0), 1.0, rtol=1e-12)
    assert abs(t["y"].values.mean()) < 1e-12 and t["y"].values.std() == pytest.approx(1.0)
    assert t.attrs["standardized"] == 1 and t["y"].attrs["y_scale"] == sc.y_scale_

    test = sc.transform(concrete_parts["test"])
    # test rows use the training statistics, so their mean is not forced to 0
    np.testing.assert_allclose(test["y"].values, (concrete_parts["test"]["y"].values - ytr.mean()) / ytr.std())
    assert abs(test["y"].values.mean()) > 1e-6


def test_standardizer_round_trips(concrete_parts):
    sc = Standardizer().fit(concrete_parts["train"])
    test = concrete_parts["test"]
    back = sc.inverse_transform(sc.transform(test))
    np.testing.assert_allclose(back["X"].values, test["X"].values, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(back["y"].values, test["y"].values, rtol=1e-12)
    assert "standardized" not in back.attrs and "y_scale" not in back["y"].attrs

    X, y = test["X"].values, test["y"].values
    Xs, ys = sc.transform(X, y)
    np.testing.assert_allclose(sc.inverse_transform_X(Xs), X, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(sc.inverse_transform_y(ys), y, rtol=1e-12)
    sig = np.array([0.5, 2.0, 7.0])
    np.testing.assert_allclose(sc.inverse_transform_scale(sc.transform_scale(sig)), sig)
    np.testing.assert_allclose(sc.transform_scale(sig), sig / concrete_parts["train"]["y"].values.std())


def test_standardizer_nll_shift_is_log_sd(concrete_parts):
    # NLL of a Gaussian prediction on the original scale = NLL on the standardised scale + log s_y
    sc = Standardizer().fit(concrete_parts["train"])
    y = concrete_parts["test"]["y"].values
    rng = np.random.default_rng(0)
    mu, sigma = y + rng.normal(0, 5, y.size), rng.uniform(3, 10, y.size)
    nll_orig = -stats.norm.logpdf(y, mu, sigma).mean()
    nll_std = -stats.norm.logpdf(sc.transform_y(y), sc.transform_y(mu), sc.transform_scale(sigma)).mean()
    assert nll_orig == pytest.approx(nll_std + np.log(sc.y_scale_), rel=1e-12)
    assert sc.inverse_transform_nll(nll_std) == pytest.approx(nll_orig, rel=1e-12)


def test_standardizer_predictive_round_trip():
    sc = Standardizer().fit(np.zeros((4, 1)) + np.arange(4)[:, None], np.array([1.0, 3.0, 5.0, 7.0]))
    levels = np.array([0.1, 0.5, 0.9])
    loc, scale = np.array([0.0, 1.0]), np.array([1.0, 2.0])
    q = loc[:, None] + scale[:, None] * stats.norm.ppf(levels)
    pred = xr.Dataset(
        {
            "quantile": (("obs", "level"), q),
            "loc": ("obs", loc),
            "scale": ("obs", scale),
            "mean": ("obs", loc),
            "std": ("obs", scale),
        },
        coords={"level": levels},
        attrs={"family": "normal"},
    )
    out = sc.inverse_transform_predictive(pred)
    s, m = np.sqrt(5.0), 4.0
    np.testing.assert_allclose(out["loc"].values, loc * s + m)
    np.testing.assert_allclose(out["scale"].values, scale * s)
    # quantiles stay the quantiles of N(loc', scale'): the map is exact for Gaussians
    np.testing.assert_allclose(
        out["quantile"].values, stats.norm.ppf(levels, out["loc"].values[:, None], out["scale"].values[:, None])
    )
    np.testing.assert_array_equal(out["level"].values, levels)
    xr.testing.assert_allclose(sc.transform_predictive(out), pred)


def test_standardizer_options_and_errors():
    X = np.column_stack([np.arange(5.0), np.full(5, 3.0)])  # second column constant
    y = np.arange(5.0) * 2
    sc = Standardizer().fit(X, y)
    assert sc.X_scale_[1] == 1.0  # constant column: only centred
    np.testing.assert_allclose(sc.transform_X(X)[:, 1], 0.0)
    raw = Standardizer(with_X=False, with_y=False).fit(X, y)
    np.testing.assert_array_equal(raw.transform_X(X), X)
    np.testing.assert_array_equal(raw.transform_y(y), y)
    only_X = Standardizer().fit(X)
    assert (only_X.y_mean_, only_X.y_scale_) == (0.0, 1.0)
    with pytest.raises(NotFittedError, match=r"Call fit"):
        Standardizer().transform_X(X)
    with pytest.raises(ValueError, match=r"X must have 2 features \(as in fit\); got 3"):
        sc.transform_X(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"mismatched lengths"):
        Standardizer().fit(X, y[:3])
    with pytest.raises(ValueError, match=r"X must be finite"):
        Standardizer().fit(np.array([[np.nan], [1.0]]))
    with pytest.raises(ValueError, match=r"y must be None when X is a Dataset"):
        Standardizer().fit(load_dataset("diabetes"), y)
    assert Standardizer(with_y=False).get_params() == {"with_X": True, "with_y": False}
