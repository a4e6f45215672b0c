"""The contract's own checks: validate compares a normal Dataset's loc/scale with its quantiles, and from_cdf_grid
warns when it repairs a CDF that decreases."""

import warnings

import numpy as np
import pytest

import calibprob


def test_validate_checks_normal_loc_scale_against_quantiles():
    pred = calibprob.normal([0.0, 1.0], [1.0, 2.0], levels=[0.1, 0.5, 0.9])
    calibprob.validate(pred)
    bad = pred.copy(deep=True)
    bad["quantile"][1] = bad["quantile"][1] + 5.0
    with pytest.raises(
        ValueError,
        match=r"family='normal' Dataset's 'quantile' disagrees with its loc/scale in 1 "
        r"of 2 observations \(first: obs 1, level 0\.1",
    ):
        calibprob.validate(bad)
    with pytest.raises(ValueError, match="disagrees with its loc/scale"):
        calibprob.evaluate(bad, [0.0, 1.0])


def test_from_cdf_grid_warns_when_it_repairs():
    grid = np.linspace(-4, 4, 801)
    from scipy import stats

    cdf = stats.norm.cdf(grid)[None, :].copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clean = calibprob.from_cdf_grid(grid, cdf, levels=[0.25, 0.5, 0.75])
    spiked = cdf.copy()
    spiked[0, 20] = 0.9  # a spike far in the left tail
    with pytest.warns(
        calibprob.CalibprobWarning,
        match=r"cdf decreased along the grid in 1 of 1 observations "
        r"\(largest drop 0\.9",
    ):
        repaired = calibprob.from_cdf_grid(grid, spiked, levels=[0.25, 0.5, 0.75])
    assert abs(float(clean["quantile"][0, 1])) < 0.01
    assert float(repaired["quantile"][0, 1]) < -3.0  # the median moved: exactly why the warning is needed
