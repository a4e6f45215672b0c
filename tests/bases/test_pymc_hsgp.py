"""The pymc-hsgp base: a Hilbert-space approximate GP in PyMC, predicting by posterior draws."""

import numpy as np
import pytest

from calibprob.bases.gp import GaussianProcessRegressor
from calibprob.bases.pymc_hsgp import PyMCHSGPRegression


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(150, 1))
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=150) + 5.0
    Xt = np.linspace(-2.8, 2.8, 300)[:, None]
    yt = np.sin(2 * Xt[:, 0]) + 0.3 * rng.normal(size=300) + 5.0
    model = PyMCHSGPRegression(tune=300, draws=300, chains=1, target_accept=0.95, random_state=1).fit(X, y)
    return X, y, Xt, yt, model


def test_hsgp_predictive_mean_is_the_exact_gps_at_its_hyperparameters(fitted):
    """The HSGP's posterior-predictive mean against the exact GP (constant mean, GLS) with the
    HSGP's posterior-mean hyperparameters: measured max |diff| 0.079 (sd(y) ~ 0.78), noise
    sd 0.329 for a true 0.3; 90 % interval coverage on 300 fresh points."""
    X, y, Xt, yt, model = fitted
    theta = {"lengthscale": model.lengthscale_, "variance": model.amplitude_**2, "noise": model.noise_std_**2}
    exact = GaussianProcessRegressor(mean="constant", theta=theta, optimize=False).fit(X, y)
    mu_exact, sd_exact = exact.predict_mean_std(Xt)
    mu, sd = model.predict_mean_std(Xt)
    assert np.max(np.abs(mu - mu_exact)) < 0.15 * np.std(y)
    assert np.max(np.abs(sd / sd_exact - 1)) < 0.25  # draws: hyperparameter uncertainty and Monte Carlo
    assert model.noise_std_ == pytest.approx(0.3, rel=0.2)
    pred = model.predict(Xt)
    assert pred.attrs["family"] == "quantile" and pred.attrs["method"] == "PyMCHSGPRegression"
    lo, hi = pred["quantile"].sel(level=0.05).values, pred["quantile"].sel(level=0.95).values
    cover = np.mean((yt >= lo) & (yt <= hi))
    assert 0.82 <= cover <= 0.97, cover
    d = model.diagnostics_
    # ESS of 300 draws of one chain: 76.2 alone, 48.0 once in a full suite run (1 of 4 on
    # 2026-11-26, same code): state left by earlier tests changes the NUTS path (not yet found).
    # target_accept 0.95: at the default 0.9 the same seed gave 1 divergent transition with
    # PyTensor 3.3.8 / NumPy 2.5.5 / SciPy 1.18.1 (none with the versions of the last stop)
    assert float(d["divergences"]) == 0 and float(d["ess_bulk"]) > 30
    assert np.isnan(float(d["rhat"]))  # one chain: r-hat undefined


def test_hsgp_bad_input():
    X = np.random.default_rng(0).normal(size=(20, 2))
    y = X[:, 0]
    with pytest.raises(ValueError, match="m = \\[100, 100\\] gives 10000 basis functions"):
        PyMCHSGPRegression(m=100).fit(X, y)
    with pytest.raises(ValueError, match="m has 3 entries but X has 2 features"):
        PyMCHSGPRegression(m=[5, 5, 5]).fit(X, y)
    with pytest.raises(ValueError, match="c must be a number > 1.*got 0.5"):
        PyMCHSGPRegression(c=0.5).fit(X, y)
    with pytest.raises(ValueError, match="kernel must be one of"):
        PyMCHSGPRegression(kernel="rbf").fit(X, y)
    with pytest.raises(ValueError, match="y is constant"):
        PyMCHSGPRegression().fit(X, np.ones(20))
    with pytest.raises(ValueError, match="m must be >= 2; got 1"):
        PyMCHSGPRegression(m=1).fit(X, y)


def test_hsgp_loo_tree_calibrates_without_a_holdout(fitted):
    """from_loo of the HSGP fit: every Pareto k good here, and isotonic recalibration fitted on it keeps the
    90 % coverage of 300 fresh points within 3 binomial standard errors (0.05) of 0.9."""
    import calibprob

    X, y, Xt, yt, model = fitted
    loo = calibprob.from_loo(model.loo_tree())
    # PSIS-LOO is reliable where k-hat < good_k; the seeded NUTS path moves with the processor's floating-point
    # kernels, and one point of 150 crossed 0.596 on an AMD EPYC (all below on the machine that wrote this):
    # require at most 2 % of the points above it (Vehtari et al. 2024 treat a few such points as a warning)
    assert loo.sizes["obs"] == y.size and np.mean(loo["pareto_k"].values >= loo.attrs["good_k"]) <= 0.02
    iso = calibprob.IsotonicRecalibrator(extrapolate=True).fit(loo, y).predict(model.predict(Xt))
    iv = iso.calib.interval(0.9)
    cover = np.mean((yt >= iv["lower"].values) & (yt <= iv["upper"].values))
    assert abs(cover - 0.9) < 0.05, cover
