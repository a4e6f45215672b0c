"""End to end on a real PyMC model (NUTS) and bundled data: calibration without a holdout.

The protocol of Fong & Holmes (2021) for diabetes, made small: standardised data, a linear
model whose noise prior is far too tight (sigma ~ HalfNormal(0.02), their "misspecified"
c = 0.02), 70/30 split. The Bayes 80 % intervals under-cover; fitting the isotonic recalibrator
on the training points' PSIS-LOO predictive (no data held out) brings coverage to about 0.8,
and so does the LOO jackknife+.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import calibprob
from calibprob.calibrators.conformal.loo_jackknife import LOOJackknifePlus

pm = pytest.importorskip("pymc")

C = 0.8


def _covered(iv, y):
    return float(np.mean((iv["lower"].values <= y) & (y <= iv["upper"].values)))


@pytest.fixture(scope="module")
def diabetes_fit(seed):
    """The fit at NUTS seed ``seed`` (posterior-predictive seeds ``seed + 1``, ``seed + 2``): 1 in the default run,
    0..19 in the seed sweep (tests/conftest.py); the split stays the one of seed 100."""
    ds = calibprob.load_dataset("diabetes")
    X, y = ds["X"].values, ds["y"].values
    # standardised with the full data, as the authors do ("for validity": symmetric in all points)
    X = (X - X.mean(0)) / X.std(0)
    y = (y - y.mean()) / y.std()
    perm = np.random.default_rng(100).permutation(y.size)
    n = int(0.7 * y.size)
    tr, te = perm[:n], perm[n:]
    with pm.Model(coords={"feature": np.arange(X.shape[1])}):
        Xd = pm.Data("X", X[tr], dims=("obs", "feature"))
        beta = pm.Normal("beta", 0.0, 1.0, dims="feature")
        alpha = pm.Normal("alpha", 0.0, 1.0)
        sigma = pm.HalfNormal("sigma", 0.02)  # far too tight: the residual sd is about 0.7
        pm.Normal("y", alpha + Xd @ beta, sigma, observed=y[tr], shape=Xd.shape[0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = pm.sample(
                draws=500, tune=500, chains=2, cores=1, random_seed=seed, nuts_sampler="pymc", progressbar=False
            )
            pm.compute_log_likelihood(idata, progressbar=False)
            pm.sample_posterior_predictive(idata, extend_inferencedata=True, random_seed=seed + 1, progressbar=False)
            pm.set_data({"X": X[te]}, coords={"obs": np.arange(te.size)})
            pred = pm.sample_posterior_predictive(idata, predictions=True, random_seed=seed + 2, progressbar=False)
    return idata, pred, y[tr], y[te]


@pytest.mark.seeded(1, scope="module")
def test_diabetes_too_tight_noise_calibrated_from_loo(diabetes_fit, record_property):
    idata, pred, y_tr, y_te = diabetes_fit
    test = calibprob.from_draws(pred, group="predictions")
    bayes = _covered(test.calib.interval(C), y_te)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", calibprob.CalibprobWarning)  # a too-tight model has high-k points
        loo = calibprob.from_loo(idata)
        jp = LOOJackknifePlus(confidence_level=C).fit_tree(idata)
    iso = calibprob.IsotonicRecalibrator(extrapolate=True).fit(loo, y_tr).predict(test)
    calibrated = _covered(iso.calib.interval(C), y_te)
    jplus = _covered(jp.predict_draws(pred), y_te)
    # 133 test points: 3 binomial standard errors at 0.8 are 0.10. Swept at seeds 0..19 (2026-11-29, PyMC 6.4.0): Bayes
    # 0.496-0.526 (limit 0.65), LOO+isotonic 0.752-0.782 and LOO jackknife+ 0.759-0.774 (limit 0.7-0.9): all pass
    print(f"\ndiabetes c=0.02, 80 %: Bayes {bayes:.3f}, LOO+isotonic {calibrated:.3f}, LOO jackknife+ {jplus:.3f}")
    for name, value in (("bayes", bayes), ("loo_isotonic", calibrated), ("loo_jackknife_plus", jplus)):
        record_property(name, value)
    assert bayes < 0.65
    assert abs(calibrated - C) < 0.1, calibrated
    assert abs(jplus - C) < 0.1, jplus
