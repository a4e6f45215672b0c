"""``calibprob.conformal_bayes`` on a model built by bambi (>= 0.21; a test-only dependency).

The reference is the core fed by hand: the posterior draws bambi sampled give the likelihood's
parameters at the training and the new rows by NumPy arithmetic, SciPy scores them, and
:class:`calibprob.ConformalBayes` ranks; the door must give the same p-values through bambi's own
``predict`` (closed form) and ``compute_log_likelihood`` (logp) calls.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

import calibprob

bmb = pytest.importorskip("bambi")
pd = pytest.importorskip("pandas")

N = 50


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(5)
    df = pd.DataFrame({"x": rng.normal(size=N), "g": rng.choice(["a", "b"], N)})
    df["y"] = 1.0 + 2.0 * df["x"] + rng.standard_t(4, N)
    df["pos"] = np.exp(0.3 * df["x"] + rng.normal(0, 0.3, N))
    new = pd.DataFrame({"x": [-1.0, 0.0, 1.5], "g": ["a", "b", "a"]})
    return df, new


def _fit(formula, df, family, **kwargs):
    model = bmb.Model(formula, df, family=family, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short chains: convergence warnings are expected
        idata = model.fit(draws=150, tune=150, chains=2, progressbar=False, random_seed=3, cores=1)
    model.compute_log_likelihood(idata)
    return model, idata


def _draws(idata, name):
    return np.asarray(idata["posterior"][name].values, float).reshape(-1)


@pytest.fixture(scope="module")
def gaussian(data):
    return _fit("y ~ x", data[0], "gaussian")


def test_a_gaussian_bambi_model_equals_the_core_fed_by_hand_on_both_paths(data, gaussian):
    df, new = data
    model, idata = gaussian
    grid = np.linspace(-10, 12, 61)
    a, b0, s = _draws(idata, "x"), _draws(idata, "Intercept"), _draws(idata, "sigma")
    ll = stats.norm.logpdf(df["y"].values[None, :], b0[:, None] + a[:, None] * df["x"].values[None, :], s[:, None])
    mu = b0[:, None] + a[:, None] * new["x"].values[None, :]
    logf = stats.norm.logpdf(grid[None, None, :], mu[:, :, None], s[:, None, None])
    by_hand = (
        calibprob.ConformalBayes(confidence_level=0.8, min_ess=0)
        .fit(ll, y=df["y"].values)
        .predict(
            logf, grid, log_density=lambda rows, y: stats.norm.logpdf(y[None], mu[:, rows, None], s[:, None, None])
        )
    )
    for method in ("closed-form", "logp"):
        pred = calibprob.conformal_bayes(model, idata, new, grid=grid, confidence_level=0.8, method=method, min_ess=0)
        assert pred.attrs["log_density"] == method
        np.testing.assert_array_equal(pred["p_value"].values, by_hand["p_value"].values)
    np.testing.assert_allclose(pred["lower"].values, by_hand["lower"].values, rtol=0, atol=1e-12)


@pytest.fixture(scope="module")
def gamma(data):
    return _fit("pos ~ x", data[0], "gamma", link="log")


def test_a_family_without_a_closed_form_goes_through_bambis_log_likelihood(data, gamma):
    df, new = data
    model, idata = gamma
    grid = np.linspace(0.05, 6.0, 60)
    pred = calibprob.conformal_bayes(model, idata, new, grid=grid, confidence_level=0.8, min_ess=0)
    assert pred.attrs["log_density"] == "logp"
    # by hand: log link on mu (asked for), shape alpha (scipy: a = alpha, scale = mu / alpha)
    a, b0, alpha = _draws(idata, "x"), _draws(idata, "Intercept"), _draws(idata, "alpha")
    mu_tr = np.exp(b0[:, None] + a[:, None] * df["x"].values[None, :])
    ll = stats.gamma.logpdf(df["pos"].values[None, :], alpha[:, None], scale=mu_tr / alpha[:, None])
    mu = np.exp(b0[:, None] + a[:, None] * new["x"].values[None, :])
    logf = stats.gamma.logpdf(grid[None, None, :], alpha[:, None, None], scale=(mu / alpha[:, None])[:, :, None])
    np.testing.assert_allclose(ll, np.asarray(idata["log_likelihood"]["pos"].values).reshape(ll.shape), atol=1e-9)
    cb = calibprob.ConformalBayes(confidence_level=0.8, min_ess=0, min_grid_mass=0.9)
    by_hand = cb.fit(ll, y=df["pos"].values).predict(logf, grid)
    np.testing.assert_array_equal(pred["p_value"].values, by_hand["p_value"].values)


def test_groups_pass_through_and_bad_inputs_name_the_fix(data, gaussian, gamma):
    df, new = data
    model, idata = gaussian
    grid = np.linspace(-10, 12, 61)
    pred = calibprob.conformal_bayes(
        model, idata, new, grid=grid, groups=df["g"].values, groups_new=new["g"].values, min_ess=0
    )
    assert list(pred["n_ranked"].values) == [int((df["g"] == g).sum()) for g in new["g"]]
    with pytest.raises(ValueError, match="X_new: a bambi model takes new rows as a pandas DataFrame"):
        calibprob.conformal_bayes(model, idata, new["x"].values, grid=grid)
    with pytest.raises(ValueError, match="method='closed-form' covers the Gaussian and Student-t"):
        calibprob.conformal_bayes(*gamma, new, method="closed-form")
    with pytest.raises(ValueError, match="not been built"):
        calibprob.conformal_bayes(bmb.Model("y ~ x", df), idata, new)
    logged = bmb.Model("np.log(pos) ~ x", df)
    logged.build()
    with pytest.raises(ValueError, match="transformed response"):
        calibprob.conformal_bayes(logged, idata, new)


def test_a_default_grid_for_a_positive_family_stays_in_its_support(data, gamma):
    """The gamma family by bambi's logp at its default grid: positive candidates only, the sets as fed by hand."""
    df, new = data
    model, idata = gamma
    pred = calibprob.conformal_bayes(model, idata, new, confidence_level=0.8, min_ess=0)
    g = pred["grid"].values
    assert (g > 0).all() and pred.attrs["grid_rule"].startswith("per test point: the range")
    a, b0, alpha = _draws(idata, "x"), _draws(idata, "Intercept"), _draws(idata, "alpha")
    mu_tr = np.exp(b0[:, None] + a[:, None] * df["x"].values[None, :])
    ll = stats.gamma.logpdf(df["pos"].values[None, :], alpha[:, None], scale=mu_tr / alpha[:, None])
    scale = (np.exp(b0[:, None] + a[:, None] * new["x"].values[None, :]) / alpha[:, None])[:, :, None]
    logf = stats.gamma.logpdf(g[None], alpha[:, None, None], scale=scale)
    by_hand = calibprob.ConformalBayes(confidence_level=0.8, min_ess=0).fit(ll, y=df["pos"].values).predict(logf, g)
    np.testing.assert_array_equal(pred["p_value"].values, by_hand["p_value"].values)
    assert np.isfinite(pred["lower"].values).all() and (pred["lower"].values > 0).all()
