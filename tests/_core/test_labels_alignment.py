"""The one label reader and the one alignment reader (issue 36): each class of silent error refused or fixed.

Each test fails on the code before ``calibprob/_core/labels.py`` and ``alignment.py``:

* missing labels spelled as pandas' NA (nullable string, Categorical), NaT, an empty CSV cell
  became a group of their own (``'nan'``) or raised pandas' "boolean value of NA is ambiguous";
* the integer 1 and the text "1" were merged into one group (compared by their text);
* a Series / DataArray whose index / ``obs`` coordinate is in another order than the
  prediction's rows was read by position.

The reference is always an independent computation on the same data: the calibrator fitted
on labels given as a plain array in the prediction's row order.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import calibprob
from calibprob._core.alignment import align_to_obs
from calibprob._core.labels import missing_mask, read_labels
from calibprob.calibrators.conformal import SplitConformalCalibrator
from calibprob.datasets import load_csv


def _data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    g = np.array(["a", "b", "c"])[rng.integers(0, 3, size=n)]
    mu = rng.normal(size=n)
    y = mu + rng.normal(size=n) * np.where(g == "a", 3.0, 1.0)
    return calibprob.normal(mu, np.ones(n)), y, g


# --- missing labels in every spelling ------------------------------------------------------------


@pytest.mark.parametrize(
    "spelling",
    [
        pytest.param(lambda g: pd.Series(g, dtype="string").mask(np.arange(g.size) == 4), id="string-NA"),
        pytest.param(lambda g: pd.Categorical(np.where(np.arange(g.size) == 4, None, g)), id="categorical-NaN"),
        pytest.param(lambda g: pd.array(np.where(np.arange(g.size) == 4, None, g), dtype="string"), id="string-array"),
        pytest.param(lambda g: np.where(np.arange(g.size) == 4, pd.NA, g.astype(object)), id="object-pd.NA"),
        pytest.param(
            lambda g: np.where(np.arange(g.size) == 4, np.datetime64("NaT", "D"), np.datetime64("2020-01-01", "D")),
            id="NaT",
        ),
    ],
)
@pytest.mark.parametrize("entry", ["calibrator", "evaluate"])
def test_missing_label_spellings_are_refused(spelling, entry):
    pred, y, g = _data()
    groups = spelling(g)
    with pytest.raises(ValueError, match=r"groups has 1 missing label\(s\).*at row index 4.*fillna"):
        if entry == "calibrator":
            SplitConformalCalibrator(confidence_level=0.8).fit(pred, y, groups=groups)
        else:
            calibprob.evaluate(pred, y, groups=groups)


def test_missing_mask_from_file_counts_blank_cells():
    values = np.array(["a", "", "  ", "b", None, pd.NA], dtype=object)
    np.testing.assert_array_equal(missing_mask(values), [False, False, False, False, True, True])
    np.testing.assert_array_equal(missing_mask(values, from_file=True), [False, True, True, False, True, True])


def _csv(tmp_path, cells):
    rows = "\n".join(f"{i},{0.5 * i},{c}" for i, c in enumerate(cells))
    path = tmp_path / "d.csv"
    path.write_text("y,x,region\n" + rows + "\n")
    return path


@pytest.mark.parametrize("blank", ["", "   "])
def test_csv_empty_group_cell_is_refused_or_dropped(tmp_path, blank):
    path = _csv(tmp_path, ["n", "s", blank, "n", "s", "n"])
    with pytest.raises(ValueError, match=r"groups column 'region' of file d.csv has 1 empty.*line\(s\) 4.*dropna"):
        load_csv(path, target="y", features=["x"], groups="region")
    ds = load_csv(path, target="y", features=["x"], groups="region", dropna=True)
    assert ds.attrs["rows_dropped"] == 1
    assert ds["group"].values.tolist() == ["n", "s", "n", "s", "n"]
    np.testing.assert_array_equal(ds["y"].values, [0, 1, 3, 4, 5])


# --- distinct labels never merged by their text -------------------------------------------------


def test_int_and_text_of_the_same_digits_are_refused():
    pred, y, _ = _data()
    groups = np.array([1 if i % 2 else "1" for i in range(y.size)], dtype=object)
    with pytest.raises(ValueError, match=r"mixes label types.*1 \(int\) and '1' \(text\)|'1' \(text\) and 1 \(int\)"):
        SplitConformalCalibrator(confidence_level=0.8).fit(pred, y, groups=groups)
    with pytest.raises(ValueError, match="mixes label types"):
        calibprob.evaluate(pred, y, groups=list(groups))


def test_equal_values_of_different_types_are_refused():
    with pytest.raises(ValueError, match=r"1 \(int\) and 1.0 \(float\)"):
        read_labels(np.array([1, 1.0, 2], dtype=object))
    with pytest.raises(ValueError, match=r"True \(bool\) and 1 \(int\)"):
        read_labels([True, 1, 2])


def test_labels_keep_their_type():
    np.testing.assert_array_equal(read_labels(pd.Series([3, 1, 3], dtype="Int64")), [3, 1, 3])
    assert read_labels(pd.Series([3, 1, 3], dtype="Int64")).dtype == np.int64
    assert read_labels(pd.Categorical(["x", "y"])).tolist() == ["x", "y"]
    assert read_labels([1, "a"]).tolist() == ["1", "a"]  # no collision: their text is one-to-one


# --- labelled arguments aligned by label --------------------------------------------------------


def _reference(pred, y, g):
    return SplitConformalCalibrator(confidence_level=0.8).fit(pred, y, groups=g).predict(pred, groups=g)


def test_shuffled_series_and_dataarray_groups_are_aligned_by_label():
    pred, y, g = _data()
    perm = np.random.default_rng(1).permutation(g.size)
    want = _reference(pred, y, g)
    series = pd.Series(g, index=pred.indexes["obs"]).iloc[perm]
    array = xr.DataArray(g, dims="obs", coords={"obs": pred["obs"].values}).isel(obs=perm)
    for shuffled in (series, array):
        cal = SplitConformalCalibrator(confidence_level=0.8).fit(pred, y, groups=shuffled)
        got = cal.predict(pred, groups=shuffled)
        xr.testing.assert_identical(got, want)


def test_labels_that_do_not_match_are_refused():
    pred, y, g = _data()
    other = xr.DataArray(g, dims="obs", coords={"obs": np.arange(g.size) + 100})
    with pytest.raises(ValueError, match=r"groups's obs coordinate does not match.*100 is not an obs label"):
        SplitConformalCalibrator(confidence_level=0.8).fit(pred, y, groups=other)
    labelled = pred.assign_coords(obs=[f"r{i}" for i in range(g.size)])
    with pytest.raises(ValueError, match=r"groups's index does not match.*'x0' is not an obs label"):
        align_to_obs(pd.Series(g, index=[f"x{i}" for i in range(g.size)]), labelled, "groups")


def test_plain_array_and_unlabelled_series_read_by_position():
    pred, _, g = _data()
    series = pd.Series(g, index=np.arange(g.size) + 1000)  # e.g. after a random split: no labels to match
    assert align_to_obs(series, pred, "groups") is series
    assert align_to_obs(g, pred, "groups") is g


@pytest.mark.parametrize("kind", ["series", "dataarray"])
def test_shuffled_labelled_y_is_aligned_by_label(kind):
    pred, y, g = _data()
    perm = np.random.default_rng(2).permutation(y.size)
    obs = pred["obs"].values
    shuffled = (
        pd.Series(y, index=obs).iloc[perm]
        if kind == "series"
        else xr.DataArray(y, dims="obs", coords={"obs": obs}).isel(obs=perm)
    )
    want = SplitConformalCalibrator(confidence_level=0.8).fit(pred, y).predict(pred)
    got = SplitConformalCalibrator(confidence_level=0.8).fit(pred, shuffled).predict(pred)
    xr.testing.assert_identical(got, want)
    np.testing.assert_array_equal(
        calibprob.evaluate(pred, shuffled)["crps"].values, calibprob.evaluate(pred, y)["crps"].values
    )
