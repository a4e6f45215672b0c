"""The linear bases at extreme magnitudes: a constant y is a clear error, X and y from 1e-300 to 1e300 fit like
unit-scale data, and where a fitted variance leaves float64 the fit is refused saying how to rescale."""

import numpy as np
import pytest

import calibprob


@pytest.mark.parametrize("cls", [calibprob.LinearRegression, calibprob.BayesianRidge])
def test_constant_y_is_a_clear_error_not_nan(cls):
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match=r"y is constant \(every value 3\.0\)"):
        cls().fit(X, np.full(20, 3.0))


@pytest.mark.parametrize(
    "cls, x_scale, y_scale",
    [
        (calibprob.LinearRegression, 1e300, 1.0),
        (calibprob.LinearRegression, 1e-300, 1.0),
        (calibprob.LinearRegression, 1.0, 1e100),
        (calibprob.LinearRegression, 1e-150, 1e-150),
        # BayesianRidge's weight precision scales as x_scale^2 / y_scale^2: representable up to ~1e150
        (calibprob.BayesianRidge, 1e100, 1.0),
        (calibprob.BayesianRidge, 1e-100, 1.0),
        (calibprob.BayesianRidge, 1.0, 1e100),
        (calibprob.BayesianRidge, 1e-150, 1e-150),
    ],
)
def test_extreme_scales_fit_like_unit_scale(cls, x_scale, y_scale):
    """1e300-scale X is not called rank deficient: predictions equal the unit-scale fit's, rescaled."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3))
    y = X @ [1.0, -2.0, 0.5] + 0.3 + 0.2 * rng.normal(size=50)
    unit = cls().fit(X, y)
    big = cls().fit(X * x_scale, y * y_scale)
    assert np.all(np.isfinite(big.coef_))
    mu1, s1 = unit.predict_mean_std(X[:5])
    mu2, s2 = big.predict_mean_std(X[:5] * x_scale)
    np.testing.assert_allclose(mu2 / y_scale, mu1, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(s2 / y_scale, s1, rtol=1e-6)


@pytest.mark.parametrize(
    "cls, x_scale, y_scale",
    [
        (calibprob.BayesianRidge, 1.0, 1e300),
        (calibprob.BayesianRidge, 1e300, 1.0),
        (calibprob.BayesianRidge, 1e-300, 1.0),
    ],
)
def test_scales_beyond_float64_are_a_clear_error(cls, x_scale, y_scale):
    """Where a fitted parameter (a variance, a precision) is not representable: a clear error, never NaN."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    with pytest.raises(ValueError, match=r"overflow float64 at the scale of these data\. Rescale X and y"):
        cls().fit(X * x_scale, y_scale * (X[:, 0] + rng.normal(size=30)))


@pytest.mark.parametrize("y_scale", [1e300, 1e-300])
def test_linear_regression_predicts_at_scales_whose_variance_is_beyond_float64(y_scale):
    """The noise sd is representable where its square is not (1e600, 1e-600): the fit is not refused at
    1e300, and at 1e-300 sigma is the data's, not the floor sqrt(tiny) = 1.5e-154."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    y = X[:, 0] + rng.normal(size=30)
    ref = calibprob.LinearRegression().fit(X, y).predict_mean_std(X[:5])[1]
    sd = calibprob.LinearRegression().fit(X, y_scale * y).predict_mean_std(X[:5])[1]
    np.testing.assert_allclose(sd / y_scale, ref, rtol=1e-10)
