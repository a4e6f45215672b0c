"""Group labels read one way everywhere (issue 36): every spelling of "missing" refused, labels compared
by value and type, and labelled arguments aligned by their labels, never by position."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import calibprob
from calibprob._core.validation import check_groups


def _problem(n=40, seed=0):
    rng = np.random.default_rng(seed)
    mu, sigma = rng.normal(size=n), rng.uniform(0.5, 1.5, size=n)
    pred = calibprob.normal(mu, sigma).assign_coords(obs=[f"r{i}" for i in range(n)])
    y = mu + sigma * rng.normal(size=n) * np.where(np.arange(n) % 2, 2.0, 0.5)
    groups = np.where(np.arange(n) % 2, "odd", "even")
    return pred, y, groups


@pytest.mark.parametrize(
    "spelling",
    [
        pd.array(["a", pd.NA, "b", "a"], dtype="string"),  # pandas' nullable string: NA
        pd.Categorical(["a", None, "b", "a"]),  # a Categorical's missing code
        np.array(["2020-01-01", "NaT", "2020-01-02", "2020-01-01"], dtype="datetime64[D]"),  # NaT
        np.array(["a", None, "b", "a"], dtype=object),
        np.array([1.0, np.nan, 2.0, 1.0]),
    ],
)
def test_every_spelling_of_missing_is_refused_with_its_row(spelling):
    with pytest.raises(ValueError, match=r"groups has 1 missing label\(s\) .* at row\(s\) 1\. Give every observation"):
        check_groups(spelling, 4)


def test_a_missing_label_is_refused_by_an_entry_point():
    pred, y, groups = _problem()
    labels = pd.array(groups, dtype="string")
    labels[3] = pd.NA
    with pytest.raises(ValueError, match=r"missing label\(s\).*row\(s\) 3"):
        calibprob.SplitConformalCalibrator(confidence_level=0.8).fit(pred, y, groups=labels)


def test_labels_that_print_the_same_but_differ_are_refused_not_merged():
    labels = np.array([1, "1", 2, 2], dtype=object)
    with pytest.raises(ValueError, match=r"'1' is both a number and a str .*Convert the labels to one type"):
        check_groups(labels, 4)
    # one type: kept as is, and 1 / 1.0 / True-like numbers are one label by value
    assert check_groups(np.array([1, 1.0, 2, 2], dtype=object), 4).tolist() == [1, 1.0, 2, 2]


def test_a_labelled_argument_is_aligned_by_its_labels():
    """A DataArray along obs or a Series indexed by row label, shuffled: the same calibration as in order."""
    pred, y, groups = _problem()
    cal = calibprob.SplitConformalCalibrator(confidence_level=0.8)
    ref = cal.fit(pred, y, groups=groups).predict_interval(pred, groups=groups)
    perm = np.random.default_rng(1).permutation(len(y))
    obs = pred["obs"].values
    for shuffled in (
        xr.DataArray(groups[perm], dims="obs", coords={"obs": obs[perm]}),
        pd.Series(groups[perm], index=obs[perm]),
    ):
        got = cal.fit(pred, y, groups=shuffled).predict_interval(pred, groups=shuffled)
        xr.testing.assert_identical(got, ref)
    # plain values, shuffled, are read by position: another calibration (the shuffle is the user's)
    moved = cal.fit(pred, y, groups=groups[perm]).predict_interval(pred, groups=groups[perm])
    assert not np.array_equal(moved["upper"].values, ref["upper"].values)


def test_labels_that_do_not_match_the_rows_are_refused():
    pred, y, groups = _problem()
    wrong = pd.Series(groups, index=[f"x{i}" for i in range(len(y))])
    with pytest.raises(
        ValueError,
        match=r"groups's row labels do not match the prediction's obs coordinate: the "
        r"prediction's row 'r0' has no label in groups; groups has the label 'x0'",
    ):
        calibprob.SplitConformalCalibrator(confidence_level=0.8).fit(pred, y, groups=wrong)
    twice = pd.Series(groups, index=["r0"] * len(y))
    with pytest.raises(ValueError, match=r"groups's row labels repeat \(e.g. 'r0'\)"):
        calibprob.SplitConformalCalibrator(confidence_level=0.8).fit(pred, y, groups=twice)


def test_a_blank_group_cell_in_a_csv_is_refused_with_its_row(tmp_path):
    """Read by a spec or load_csv, an empty cell would otherwise become a group named 'nan'."""
    path = tmp_path / "homes.csv"
    path.write_text("x,county,y\n1,a,1.0\n2,,2.0\n3,b,3.0\n4, ,4.0\n")
    with pytest.raises(
        ValueError,
        match=r"groups column 'county' has 2 missing or blank cell\(s\), at data row\(s\) "
        r"1, 3 \(0-based, header excluded\)\. Fill them",
    ):
        calibprob.datasets.load_csv(path, target="y", features=["x"], groups="county")
