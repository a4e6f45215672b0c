"""``pymc-linear`` with Fong & Holmes's sparse-regression priors, its closed-form log densities and
its ``log_likelihood`` group (the inputs of conformal Bayes)."""

import warnings

import numpy as np
import pytest

from calibprob import ConvergenceWarning, LinearRegression
from calibprob.bases.pymc_linear import PyMCLinearRegression

FAST = {"draws": 250, "tune": 300, "chains": 2}

# The tests that read the sampler's draws take its seed from the seed sweep (tests/conftest.py): 5 in the default
# run, 0..19 under `make test-seeds`. Worst values over that sweep (2026-11-29, PyMC 6.4.0): mixture mean 2.65 Monte
# Carlo standard errors from the draws' (bound 4), sigma 6.5 % from the residual sd (bound 20 %), the tight prior's
# sigma 0.571 of the residual sd (bound 0.6: small room, but the sweep's spread is 0.003).
SEEDED = pytest.mark.seeded(5, scope="module")


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(70, 4)) * [1.0, 3.0, 0.5, 1.0]
    y = 2.0 + X @ [1.5, 0.0, 0.0, -1.0] + 0.7 * rng.normal(size=70)
    return X, y


def _fit(data, seed, **kw):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return PyMCLinearRegression(prior="laplace", noise_prior="halfnormal", random_state=seed, **FAST, **kw).fit(
            X, y
        )


@pytest.fixture(scope="module")
def laplace(data, seed):
    return _fit(data, seed, log_likelihood=True)


@SEEDED
def test_laplace_model_declares_the_authors_priors(laplace):
    # the sampled variables are the sparse regression's (b ~ Gamma(1, 1), flat intercept)
    post = laplace.idata_["posterior"]
    assert {"alpha", "beta", "b", "sigma"} <= set(post.data_vars)
    assert float(post["b"].min()) > 0 and float(post["sigma"].min()) > 0


@SEEDED
def test_log_likelihood_group_matches_pymc_logp(laplace, data):
    # independent check: PyMC's own pointwise log-likelihood (on the standardised target) shifted
    # by -log s_y is the stored y-scale group (change of variables y = ybar + s_y z)
    import pymc as pm

    X, y = data
    ll = laplace.idata_["log_likelihood"]["y"]
    assert ll.dims == ("chain", "draw", "obs") and ll.shape == (2, FAST["draws"], len(y))
    Xs = (X - laplace.x_mean_) / laplace.x_scale_
    z = (y - laplace.y_mean_) / laplace.y_scale_
    with pm.Model(coords={"feature": np.arange(X.shape[1])}):
        alpha, beta, sigma = laplace._priors(pm, np.ones(X.shape[1]))
        pm.Normal("z", alpha + pm.math.dot(Xs, beta), sigma, observed=z)
        ref = pm.compute_log_likelihood(laplace.idata_, var_names=["z"], extend_inferencedata=False, progressbar=False)
    np.testing.assert_allclose(ll.values, ref["z"].values - np.log(laplace.y_scale_), rtol=1e-10, atol=1e-10)
    # one y-scale formula: loo_tree's group is the stored one, bit for bit
    np.testing.assert_array_equal(laplace.loo_tree()["log_likelihood"]["y"].values, ll.values)


@SEEDED
def test_log_density_integrates_to_one_and_matches_draws(laplace, data, record_property):
    X, _ = data
    grid = np.linspace(-15.0, 20.0, 3501)
    lp = laplace.log_density(X[:3], grid)
    assert lp.shape == (2 * FAST["draws"], 3, grid.size)
    mass = np.exp(lp).sum(axis=2) * (grid[1] - grid[0])
    np.testing.assert_allclose(mass, 1.0, atol=1e-3)
    # the mixture's mean is the mean of the posterior-predictive draws (Monte Carlo, 40 000 draws)
    mix_mean = (np.exp(lp).mean(axis=0) * grid).sum(axis=1) * (grid[1] - grid[0])
    draws = np.concatenate([laplace.sample_predictive(X[:3], random_state=s) for s in range(80)])
    record_property(
        "mean_gap_in_se",
        float(np.max(np.abs(mix_mean - draws.mean(axis=0))) / (draws.std(axis=0).max() / np.sqrt(draws.shape[0]))),
    )
    np.testing.assert_allclose(mix_mean, draws.mean(axis=0), atol=4 * draws.std(axis=0).max() / np.sqrt(draws.shape[0]))
    # one grid per row gives the same numbers
    np.testing.assert_allclose(laplace.log_density(X[:3], np.tile(grid[:50], (3, 1))), lp[:, :, :50])


@SEEDED
def test_tight_noise_prior_shrinks_sigma_below_the_residual_sd(laplace, data, seed, record_property):
    # Fong & Holmes's misspecification: HalfNormal(0.02) on the noise sd of the standardised target
    X, y = data
    tight = _fit(data, seed, noise_prior_scale=0.02)
    resid_sd = np.std(y - LinearRegression().fit(X, y).predict_mean_std(X)[0]) / laplace.y_scale_
    record_property("sigma_rel_gap", float(abs(laplace._sigma.mean() / resid_sd - 1.0)))
    record_property("tight_sigma_over_resid", float(tight._sigma.mean() / resid_sd))
    assert abs(laplace._sigma.mean() / resid_sd - 1.0) < 0.2
    assert tight._sigma.mean() < 0.6 * resid_sd
    assert "log_likelihood" not in tight.idata_.children


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"prior": "horseshoe"}, "prior"),
        ({"noise_prior": "cauchy"}, "noise_prior"),
        ({"noise_prior_scale": 0.0}, "noise_prior_scale must be a positive finite number.*got 0.0"),
        ({"noise_prior_scale": True}, "noise_prior_scale"),
        ({"log_likelihood": "yes"}, "log_likelihood must be True or False; got 'yes'"),
    ],
)
def test_bad_options_are_refused(data, kw, match):
    X, y = data
    with pytest.raises((ValueError, TypeError), match=match):
        PyMCLinearRegression(**kw).fit(X, y)


@SEEDED
def test_log_density_rows_must_match(laplace, data):
    X, _ = data
    with pytest.raises(ValueError, match="values has 2 rows but X has 3"):
        laplace.log_density(X[:3], np.zeros((2, 5)))


def test_the_new_options_are_spec_options():
    from calibprob.compare import SpecError, parse_spec

    base = {
        "name": "cb",
        "datasets": ["diabetes"],
        "split": {"train": 0.7, "test": 0.3},
        "methods": {"b": {"kind": "base"}},
    }
    glm = {"kind": "pymc-linear", "prior": "laplace", "noise_prior": "halfnormal", "noise_prior_scale": 0.02}
    assert parse_spec({**base, "base": {**glm, "log_likelihood": True}}) is not None
    with pytest.raises(SpecError, match=r"base\.noise_prior_scale"):
        parse_spec({**base, "base": {**glm, "noise_prior_scale": -1.0}})
