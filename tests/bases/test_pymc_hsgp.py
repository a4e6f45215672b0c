"""The pymc-hsgp base: a Hilbert-space approximate GP in PyMC, predicting by posterior draws."""

import numpy as np
import pytest

from calibprob.bases.gp import GaussianProcessRegressor
from calibprob.bases.pymc_hsgp import PyMCHSGPRegression


def _data():
    """150 noisy points of sin(2x) + 5 to fit on, 300 fresh ones to check coverage on (seeded)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(150, 1))
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=150) + 5.0
    Xt = np.linspace(-2.8, 2.8, 300)[:, None]
    yt = np.sin(2 * Xt[:, 0]) + 0.3 * rng.normal(size=300) + 5.0
    return X, y, Xt, yt


def _fit(X, y, seed):
    return PyMCHSGPRegression(tune=300, draws=300, chains=1, target_accept=0.95, random_state=seed).fit(X, y)


@pytest.fixture(scope="module")
def fitted(seed):
    """One fit per sampler seed, shared by the tests of the module (seed 1 in the default run; the sweep's
    seeds under ``make test-seeds``, tests/conftest.py)."""
    X, y, Xt, yt = _data()
    return X, y, Xt, yt, _fit(X, y, seed=seed)


#: Bulk ESS floor for 300 draws of one chain, and the divergent transitions allowed. The seeded NUTS path depends on
#: the CPU's floating-point kernels and on what ran before in the process (another machine gave 26.6 at seed 1,
#: where this one gives 47.6-76.2), so a run elsewhere is in effect another sampler seed. Over 24 sampler seeds
#: (then test_hsgp_sweep_over_sampler_seeds; now the seeded sweep of tests/conftest.py, at 20 seeds) on this machine
#: (2026-11-28, PyMC 6.4.0, PyTensor 3.3.8, NumPy 2.5.5) bulk ESS ranged 18.1-106.3 (median 63; the two lowest 18.1
#: and 38.5: a long lower tail) and 6 of 24 seeds had one divergent transition, none two. The floor is half the
#: sweep's minimum, rounded down, for a path worse than any of 24 seen; a chain that does not move gives a bulk ESS
#: of one to a few draws, still below it. One divergence in 300 draws is the sampler's normal behaviour here; two is
#: the margin over the most seen. The seeded sweep at seeds 0..19 (2026-11-29, same versions, make test-seeds) gave
#: bulk ESS 18.1-103, 0-1 divergences, mean gap 0.108 sd(y) (limit 0.15), sd ratio gap 0.160 (0.25), noise sd
#: 0.327-0.330 (0.24-0.36), 90 % coverage 0.933-0.953 (0.82-0.97): every margin below holds.
ESS_FLOOR = 9
MAX_DIVERGENCES = 2


def _check_against_exact_gp(X, y, Xt, yt, model, record=lambda name, value: None):
    """The HSGP's posterior-predictive mean against the exact GP (constant mean, GLS) with the
    HSGP's posterior-mean hyperparameters, its noise sd against the true 0.3, its 90 % interval
    coverage on 300 fresh points, and its convergence (divergences and bulk ESS: see ESS_FLOOR). ``record`` (pytest's
    ``record_property``) keeps each checked statistic, so the sweep's worst values can be read off (make test-seeds)."""
    theta = {"lengthscale": model.lengthscale_, "variance": model.amplitude_**2, "noise": model.noise_std_**2}
    exact = GaussianProcessRegressor(mean="constant", theta=theta, optimize=False).fit(X, y)
    mu_exact, sd_exact = exact.predict_mean_std(Xt)
    mu, sd = model.predict_mean_std(Xt)
    d = model.diagnostics_
    record("mean_gap_over_sd_y", float(np.max(np.abs(mu - mu_exact)) / np.std(y)))
    record("sd_ratio_gap", float(np.max(np.abs(sd / sd_exact - 1))))
    record("noise_sd", float(model.noise_std_))
    record("divergences", float(d["divergences"]))
    record("ess_bulk", float(d["ess_bulk"]))
    assert np.max(np.abs(mu - mu_exact)) < 0.15 * np.std(y)
    assert np.max(np.abs(sd / sd_exact - 1)) < 0.25  # draws: hyperparameter uncertainty and Monte Carlo
    assert model.noise_std_ == pytest.approx(0.3, rel=0.2)
    pred = model.predict(Xt)
    assert pred.attrs["family"] == "quantile" and pred.attrs["method"] == "PyMCHSGPRegression"
    lo, hi = pred["quantile"].sel(level=0.05).values, pred["quantile"].sel(level=0.95).values
    cover = np.mean((yt >= lo) & (yt <= hi))
    record("coverage_90", float(cover))
    assert 0.82 <= cover <= 0.97, cover
    # target_accept 0.95 (not the default 0.9): fewer divergent transitions; see MAX_DIVERGENCES
    assert float(d["divergences"]) <= MAX_DIVERGENCES, float(d["divergences"])
    assert float(d["ess_bulk"]) > ESS_FLOOR, float(d["ess_bulk"])
    assert np.isnan(float(d["rhat"]))  # one chain: r-hat undefined


@pytest.mark.seeded(1, scope="module")
def test_hsgp_predictive_mean_is_the_exact_gps_at_its_hyperparameters(fitted, record_property):
    """Seed 1: measured max |diff| 0.083 sd(y) (sd(y) ~ 0.78), noise sd 0.330 for a true 0.3, bulk ESS
    47.6 after one earlier fit in the same process, 76.2 alone, 26.6 on another machine (see ESS_FLOOR).
    The seeded sweep (about 1 min a fit) checks that ESS_FLOOR and the other tolerances keep against a change
    of NUTS path (another CPU, other versions)."""
    _check_against_exact_gp(*fitted, record=record_property)


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


@pytest.mark.seeded(1, scope="module")
def test_hsgp_loo_tree_calibrates_without_a_holdout(fitted, record_property):
    """from_loo of the HSGP fit: every Pareto k good here, and isotonic recalibration fitted on it keeps the
    90 % coverage of 300 fresh points within 3 binomial standard errors of 0.9, counting both sources of error:
    the 150 LOO points the recalibrator is fitted on and the 300 test points, 3 sqrt(0.09 (1/150 + 1/300)) = 0.090.
    (The margin was 0.05, the test points' alone: the seed sweep, 2026-11-29, gave 0.927-0.960 over seeds 0..19,
    failing at seed 7 with 0.960; the test points are one fixed draw, so every seed sits on the same side.)"""
    import calibprob

    X, y, Xt, yt, model = fitted
    loo = calibprob.from_loo(model.loo_tree())
    # PSIS-LOO is reliable where k-hat < good_k; the seeded NUTS path moves with the processor's floating-point
    # kernels, and one point of 150 crossed 0.596 on an AMD EPYC (all below on the machine that wrote this):
    # require at most 2 % of the points above it (Vehtari et al. 2024 treat a few such points as a warning)
    record_property("share_k_above_good_k", float(np.mean(loo["pareto_k"].values >= loo.attrs["good_k"])))
    assert loo.sizes["obs"] == y.size and np.mean(loo["pareto_k"].values >= loo.attrs["good_k"]) <= 0.02
    iso = calibprob.IsotonicRecalibrator(extrapolate=True).fit(loo, y).predict(model.predict(Xt))
    iv = iso.calib.interval(0.9)
    cover = np.mean((yt >= iv["lower"].values) & (yt <= iv["upper"].values))
    record_property("coverage_90", float(cover))
    assert abs(cover - 0.9) < 3 * np.sqrt(0.9 * 0.1 * (1 / y.size + 1 / yt.size)), cover
