"""The families of the contract and their one dispatch (calibprob.predictive._families).

Each family is checked against an independent closed form (SciPy's normal and lognormal laws), the
accessor and the metrics are checked to read a prediction through the same code (bit for bit), and
the interval family is checked as a full member: built, validated, read at its stated ends, and
refused elsewhere with a message naming the family.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy import stats

import calibprob
from calibprob import transforms
from calibprob.metrics import _reading
from calibprob.predictive import DEFAULT_LEVELS, from_intervals, validate
from calibprob.predictive._families import (
    IntervalFamily,
    NormalFamily,
    QuantileFamily,
    TransformedFamily,
    family_of,
)


@pytest.fixture
def gauss():
    rng = np.random.default_rng(3)
    loc, scale = rng.normal(size=40), rng.uniform(0.5, 2.0, 40)
    return loc, scale, loc + scale * rng.normal(size=40)


def _preds(loc, scale):
    q = loc[:, None] + scale[:, None] * stats.norm.ppf(DEFAULT_LEVELS)[None, :]
    return {
        "normal": calibprob.normal(loc, scale),
        "quantile": calibprob.from_quantiles(q, DEFAULT_LEVELS),
        "transformed": transforms.back_transform(calibprob.normal(loc, scale), "log"),
    }


def test_family_of_tells_the_four_families_apart(gauss):
    loc, scale, _ = gauss
    preds = _preds(loc, scale)
    assert type(family_of(preds["normal"])) is NormalFamily
    assert type(family_of(preds["quantile"])) is QuantileFamily
    assert type(family_of(preds["transformed"])) is TransformedFamily
    assert family_of(preds["transformed"]).transform == "log"
    iv = preds["normal"].calib.interval([0.5, 0.9])
    assert type(family_of(iv)) is IntervalFamily


def test_each_family_matches_its_closed_form(gauss):
    loc, scale, y = gauss
    preds = _preds(loc, scale)
    for name in ("normal", "quantile"):
        fam = family_of(preds[name])
        np.testing.assert_allclose(fam.cdf(y), stats.norm.cdf(y, loc, scale), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(fam.logpdf(y), stats.norm.logpdf(y, loc, scale), rtol=1e-8)
        np.testing.assert_allclose(
            fam.ppf(np.array([0.1, 0.7])), stats.norm.ppf([[0.1, 0.7]], loc[:, None], scale[:, None])
        )
        mean, std = fam.moments()
        np.testing.assert_allclose(mean, loc, atol=1e-8)
        np.testing.assert_allclose(std, scale, rtol=1e-8)
    # Y = exp(Z), Z ~ N(loc, scale): the lognormal law
    fam = family_of(preds["transformed"])
    ey = np.exp(y)
    law = stats.lognorm(s=scale, scale=np.exp(loc))
    np.testing.assert_allclose(fam.cdf(ey), law.cdf(ey), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(fam.logpdf(ey), law.logpdf(ey), rtol=1e-8)
    np.testing.assert_allclose(fam.ppf(0.3), law.ppf(0.3), rtol=1e-9)
    mean, _ = fam.moments()
    np.testing.assert_allclose(mean, law.mean(), rtol=1e-6)


def test_rows_select_a_block_of_observations(gauss):
    loc, scale, y = gauss
    for pred in _preds(loc, scale).values():
        fam = family_of(pred)
        yy = np.exp(y) if isinstance(fam, TransformedFamily) else y
        sl = slice(5, 17)
        np.testing.assert_array_equal(fam.logpdf(yy[sl], sl), fam.logpdf(yy)[sl])
        np.testing.assert_array_equal(fam.ppf(np.array([0.2, 0.9]), sl), fam.ppf(np.array([0.2, 0.9]))[sl])


def test_accessor_and_metrics_read_through_the_same_family(gauss):
    """One door: the accessor (xarray layer) and the metrics' reader give the family's numbers bit for bit."""
    loc, scale, y = gauss
    p = np.array([0.05, 0.5, 0.95])
    for pred in _preds(loc, scale).values():
        fam = family_of(pred)
        yy = np.exp(y) if isinstance(fam, TransformedFamily) else y
        np.testing.assert_array_equal(pred.calib.cdf(yy).values, fam.cdf(yy))
        np.testing.assert_array_equal(pred.calib.logpdf(yy).values, fam.logpdf(yy))
        np.testing.assert_array_equal(pred.calib.zscore(yy).values, fam.zscore(yy))
        np.testing.assert_array_equal(pred.calib.ppf(p).values, fam.ppf(p))
        np.testing.assert_array_equal(_reading._ppf(pred, p), fam.ppf(p))
        np.testing.assert_array_equal(_reading._logpdf(pred, yy), fam.logpdf(yy))


@pytest.fixture
def intervals():
    lower = np.array([[-1.0, -2.0], [0.0, -np.inf], [3.0, 2.5]])
    upper = np.array([[1.0, 2.0], [0.5, np.inf], [3.0, 4.0]])
    return lower, upper, np.array([0.5, 0.9])


def test_the_interval_family_is_validated_and_read_at_its_stated_ends(intervals):
    lower, upper, c = intervals
    iv = validate(from_intervals(lower, upper, c, method="toy"))
    assert iv.attrs["family"] == "interval" and iv.attrs["method"] == "toy"
    # the ends are Q((1 - c)/2) and Q((1 + c)/2), nothing interpolated
    np.testing.assert_array_equal(
        iv.calib.ppf([0.25, 0.75, 0.05, 0.95]).values, np.c_[lower[:, 0], upper[:, 0], lower[:, 1], upper[:, 1]]
    )
    np.testing.assert_array_equal(iv.calib.ppf(0.95).values, upper[:, 1])
    got = iv.calib.interval(0.9)
    np.testing.assert_array_equal(got["lower"].values, lower[:, 1])
    np.testing.assert_array_equal(got["upper"].values, upper[:, 1])
    # a scalar-level interval Dataset (confidence_level a scalar coordinate) is the family too
    one = validate(iv.isel(confidence_level=1))
    np.testing.assert_array_equal(one.calib.interval(0.9)["upper"].values, upper[:, 1])


def test_the_interval_family_refuses_what_intervals_do_not_state(intervals):
    iv = from_intervals(*intervals)
    with pytest.raises(ValueError, match=r"interval-family prediction .* cannot give quantiles at p=0\.3"):
        iv.calib.ppf(0.3)
    with pytest.raises(ValueError, match=r"confidence levels \[0\.5, 0\.9\]; it cannot give a CDF"):
        iv.calib.cdf([0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="interval-family.*cannot give a density"):
        iv.calib.logpdf([0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="interval-family.*cannot give a z-score"):
        iv.calib.zscore([0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="interval-family.*cannot give a mean"):
        iv.calib.mean()
    with pytest.raises(ValueError, match="interval-family.*cannot give draws"):
        iv.calib.sample(3, 0)
    with pytest.raises(ValueError, match="interval-family.*confidence levels"):
        iv.calib.interval(0.8)


def test_validate_names_what_is_wrong_with_an_interval_dataset(intervals):
    lower, upper, c = intervals
    bad = lower.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match=r"'lower' holds 1 NaN values"):
        validate(from_intervals(bad, upper, c, check=False))
    with pytest.raises(ValueError, match=r"'lower' exceeds 'upper' in 5 intervals \(first: obs 0, column 0"):
        from_intervals(upper, lower, c)
    iv = from_intervals(lower, upper, c)
    with pytest.raises(ValueError, match="needs a 'confidence_level' coordinate"):
        validate(iv.drop_vars("confidence_level"))
    with pytest.raises(ValueError, match=r"'upper' must have dims \('obs', 'confidence_level'\)"):
        validate(iv.assign(upper=iv["upper"].T))
    with pytest.raises(ValueError, match="lacks \\['upper'\\]"):
        validate(iv.drop_vars("upper").assign_attrs(family="interval"))
    with pytest.raises(ValueError, match=r"confidence_level must be in \(0, 1\)|confidence_level"):
        from_intervals(lower, upper, [0.5, 1.5])
    with pytest.raises(ValueError, match=r"lower and upper must both have shape \(n, 2\)"):
        from_intervals(lower[:, :1], upper[:, :1], c)


def test_a_conformal_method_returns_a_valid_interval_family():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 2))
    y = X @ np.array([1.0, -1.0]) + rng.normal(size=120)
    model = (
        calibprob.SplitConformalRegressor(estimator=calibprob.LinearRegression())
        .fit(X[:60], y[:60])
        .calibrate(X[60:100], y[60:100])
    )
    iv = model.predict_interval(X[100:], confidence_level=[0.5, 0.8])
    assert type(family_of(validate(iv))) is IntervalFamily
    np.testing.assert_array_equal(iv.calib.interval(0.8)["lower"].values, iv["lower"].sel(confidence_level=0.8).values)


def test_a_distribution_post_processor_refuses_an_interval_prediction(intervals):
    iv = from_intervals(*intervals)
    with pytest.raises(TypeError, match="distribution post-processor.*interval-family Dataset"):
        calibprob.IsotonicRecalibrator().fit(iv, np.zeros(3))


def test_from_intervals_keeps_obs_labels_and_attrs(intervals):
    iv = from_intervals(*intervals, obs=["a", "b", "c"], attrs={"n_calibration": 7})
    assert iv["obs"].values.tolist() == ["a", "b", "c"] and iv.attrs["n_calibration"] == 7
    assert isinstance(iv, xr.Dataset)


def test_interval_family_centre_width_contains_and_refusals_name_the_family():
    """The interval family answers what its ends state (centre, width, contains) and refuses the rest, naming it."""
    lower = np.array([[0.0, -1.0], [2.0, 1.5], [-np.inf, -np.inf]])
    upper = np.array([[1.0, 2.0], [3.0, 3.5], [np.inf, np.inf]])
    ds = xr.Dataset(
        {"lower": (("obs", "confidence_level"), lower), "upper": (("obs", "confidence_level"), upper)},
        coords={"obs": np.arange(3), "confidence_level": [0.8, 0.9]},
        attrs={"family": "interval"},
    )
    np.testing.assert_array_equal(ds.calib.width().values, upper - lower)
    np.testing.assert_array_equal(ds.calib.centre(0.9).values, [0.5, 2.5, np.nan])  # (-inf + inf) / 2 is undefined
    y = np.array([0.5, 1.75, 1e300])
    np.testing.assert_array_equal(ds.calib.contains(y).values, [[True, True], [False, True], [True, True]])
    with pytest.raises(ValueError, match=r"interval-family prediction .*cannot give a mean"):
        ds.calib.mean()
    # the stated levels are printed as they are meant (0.05, not 0.04999999999999999)
    with pytest.raises(
        ValueError, match=r"quantiles at p=0\.5: it states them only at p in \[0\.05, 0\.1, 0\.9, 0\.95\]"
    ):
        ds.calib.median()
    # a distribution has no levels of its own: the level is asked for
    normal = calibprob.normal(np.zeros(3), np.ones(3))
    with pytest.raises(
        ValueError, match=r"calib\.width\(\) needs confidence_level= .*calib\.width\(confidence_level=0\.9\)"
    ):
        normal.calib.width()
    np.testing.assert_allclose(normal.calib.width(0.9).values, 2 * 1.6448536269514722, rtol=1e-12)
