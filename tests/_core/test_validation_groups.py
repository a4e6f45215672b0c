"""Group labels: the one reader of every ``groups=`` argument (calibprob._core.validation.check_groups)."""

import numpy as np
import pytest
import xarray as xr

import calibprob
from calibprob._core.validation import GROUP_COORD, check_groups


def test_groups_forms_agree():
    pred = calibprob.normal(np.zeros(4), np.ones(4))
    labels = np.array(["a", "b", "a", "c"])
    pred = pred.assign_coords({GROUP_COORD: ("obs", labels)})
    for g in (labels, list(labels), xr.DataArray(labels, dims="obs_id"), "group"):
        np.testing.assert_array_equal(check_groups(g, 4, pred=pred), labels)
    assert check_groups(None, 4) is None


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.array([1, 2, 3]), "3 labels but there are 4"),
        (np.array([1.0, np.nan, 2.0, 3.0]), "missing label.*index 1"),
        (np.array(["a", None, "b", "c"], dtype=object), "missing label"),
        (np.ones((4, 1)), r"must be 1-D.*ravel"),
        (np.ones((2, 2)), "must be 1-D"),
        ("cut", "not a coordinate of the prediction"),
    ],
)
def test_groups_bad(bad, match):
    pred = calibprob.normal(np.zeros(4), np.ones(4))
    with pytest.raises(ValueError, match=match):
        check_groups(bad, 4, pred=pred)


def test_groups_name_without_pred():
    with pytest.raises(TypeError, match="names a coordinate"):
        check_groups("group", 4)
