"""Saved values are converted by their declared type (:mod:`calibprob._core.persistence.values`).

Before issue 36 a saved calibrator whose boolean parameter was edited to the text ``'false'``
loaded as ``True`` (``bool('false')``, the truthiness of a non-empty string).
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import calibprob
from calibprob._core.persistence.values import convert_scalar

_RNG = np.random.default_rng(0)
X = _RNG.normal(size=(20, 2))
Y = X[:, 0] + 0.1 * _RNG.standard_normal(20)


def _edited(tmp_path, name: str, value) -> str:
    """A saved LinearRegression whose parameter ``name`` was rewritten to ``value`` by another tool."""
    path = tmp_path / "model.nc"
    calibprob.LinearRegression(fit_intercept=True).fit(X, Y).save(path)
    with xr.open_datatree(path, engine="h5netcdf") as dt:
        dt.load()
        params = dt["params"].to_dataset()
        attrs = dict(params[name].attrs)
        params[name] = xr.DataArray(np.asarray(value), attrs=attrs)
        dt["params"] = xr.DataTree(params)
        out = tmp_path / "edited.nc"
        dt.to_netcdf(out, engine="h5netcdf")
    return str(out)


@pytest.mark.parametrize("text, expected", [("false", False), ("False", False), (" true ", True), (0, False)])
def test_a_boolean_edited_to_text_loads_as_that_boolean(tmp_path, text, expected):
    back = calibprob.load(_edited(tmp_path, "fit_intercept", text))
    assert back.fit_intercept is expected


@pytest.mark.parametrize("text", ["no", "", "2", 2.5])
def test_anything_else_is_refused_naming_the_path_and_the_type(tmp_path, text):
    with pytest.raises(
        ValueError, match=r"at /params/fit_intercept: the saved value .* is not a bool.* Write a bool \(true or false\)"
    ):
        calibprob.load(_edited(tmp_path, "fit_intercept", text))


@pytest.mark.parametrize(
    "value, declared, expected",
    [
        (np.asarray("false"), "bool", False),
        (np.bool_(True), "bool", True),
        (np.int64(7), "int", 7),
        (np.asarray("-12"), "int", -12),
        (np.float64(3.0), "int", 3),
        (np.asarray("nan"), "float", float("nan")),
        (np.int64(2), "float", 2.0),
        (np.asarray("abc"), "str", "abc"),
    ],
)
def test_convert_scalar_by_declared_type(value, declared, expected):
    out = convert_scalar(value, declared, "here")
    assert type(out).__name__ == declared
    assert out == expected or (out != out and expected != expected)


@pytest.mark.parametrize(
    "value, declared",
    [
        (np.asarray("yes"), "bool"),
        (np.int64(2), "bool"),
        (np.bool_(True), "int"),
        (np.float64(2.5), "int"),
        (np.asarray("x1"), "float"),
        (np.bool_(False), "float"),
        (np.int64(1), "str"),
    ],
)
def test_convert_scalar_refuses_what_is_not_of_the_declared_type(value, declared):
    with pytest.raises(ValueError, match=rf"here: the saved value .* is not a {declared}, the type the file declares"):
        convert_scalar(value, declared, "here")
