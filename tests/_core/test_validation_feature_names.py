"""Fitted column names: a DataFrame given to predict with its columns reordered or renamed is refused, naming the fix."""

import numpy as np
import pandas as pd
import pytest

import calibprob


@pytest.mark.parametrize(
    "cls",
    [
        calibprob.LinearRegression,
        calibprob.BayesianRidge,
        calibprob.GaussianProcessRegressor,
        calibprob.SparseGaussianProcessRegressor,
    ],
)
def test_reordered_or_missing_dataframe_columns_are_refused(cls):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=40), "b": 10 * rng.normal(size=40)})
    y = X["a"] - 0.1 * X["b"] + 0.1 * rng.normal(size=40)
    model = cls().fit(X, y)
    assert model.feature_names_in_.tolist() == ["a", "b"]
    mu, _ = model.predict_mean_std(X)
    np.testing.assert_allclose(model.predict_mean_std(X.to_numpy())[0], mu)  # plain arrays: fit's order
    with pytest.raises(
        ValueError,
        match=r"X has the fitted columns in another order \(\['b', 'a'\]\).*"
        r"X\[model\.feature_names_in_\]",
    ):
        model.predict_mean_std(X[["b", "a"]])
    with pytest.raises(ValueError, match=r"X has other columns than in fit \(missing 'b'; not seen in fit 'c'\)"):
        model.predict_mean_std(X.rename(columns={"b": "c"}))
    refit = cls().fit(X.to_numpy(), y)
    assert not hasattr(refit, "feature_names_in_")
