"""A user's own PyMC model, calibrated: the workflow of notebooks/07 as a test with its numbers.

A robust Student-t linear regression written in PyMC on the bundled Auto MPG
data (40/30/30 split, seed 0), 2 chains; posterior-predictive draws on the
calibration and test parts go into calibprob *as they are* (``from_draws`` of
PyMC's own DataTree — no Gaussian collapse), then three distribution
post-processors. The independent references: GP-Beta's likelihood is the
paper's (Song et al. 2019, eq. 6-7), so on held-out data it must beat the base
it calibrates when the base is misspecified (a linear mean for a curved,
heteroscedastic response); the conformal predictive system's 90 % interval
has finite-sample coverage >= 0.9 - O(1/sqrt(n_test)) (Vovk et al. 2020).

Measured (``pytest -s tests/predictive/test_pymc_workflow.py``, 2 x 400 draws): held-out
NLL base 2.650, isotonic 2.962, CPS 2.876, GP-Beta (MAP) 2.554; 90 % coverage
0.906 / 0.897 / 0.897 / 0.880 (117 test points). Isotonic and the CPS are
calibrated step functions of 118 calibration scores, so their densities (and
NLL) are rough; their coverage is on target.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import calibprob
from calibprob.datasets import load_dataset, train_calibrate_test_split

pm = pytest.importorskip("pymc")

# Every test reads the one NUTS fit: its sampler seed (and GP-Beta's, which starts its MAP from it) comes from the
# seed sweep (tests/conftest.py), 1 in the default run (the numbers above), 0..19 under `make test-seeds`.
# Swept at seeds 0..19 (2026-11-29, PyMC 6.4.0): all four tests pass at every seed; GP-Beta's held-out NLL gain over
# the base 0.096-0.200 (limit 0.05), the CPS's 90 % coverage 0.872-0.915 (limit 0.817), GP-Beta first in elpd.
pytestmark = pytest.mark.seeded(1, scope="module")


@pytest.fixture(scope="module")
def workflow(seed):
    parts = train_calibrate_test_split(load_dataset("auto_mpg"), (0.4, 0.3, 0.3), seed=0)
    X = {k: v["X"].values for k, v in parts.items()}
    y = {k: v["y"].values for k, v in parts.items()}
    x_mean, x_sd = X["train"].mean(0), X["train"].std(0)
    Z = {k: (v - x_mean) / x_sd for k, v in X.items()}
    with pm.Model(coords={"feature": np.arange(Z["train"].shape[1]), "obs_id": np.arange(len(y["train"]))}) as model:
        x = pm.Data("x", Z["train"], dims=("obs_id", "feature"))
        y_obs = pm.Data("y_obs", y["train"], dims="obs_id")
        a = pm.Normal("a", y["train"].mean(), 10.0)
        b = pm.Normal("b", 0.0, 5.0, dims="feature")
        sigma = pm.HalfNormal("sigma", 5.0)
        nu = pm.Gamma("nu", 2.0, 0.1)
        pm.StudentT("y", nu=nu, mu=a + x @ b, sigma=sigma, observed=y_obs, dims="obs_id")
        idata = pm.sample(
            400, tune=400, chains=2, cores=1, random_seed=seed, progressbar=False, compute_convergence_checks=False
        )
    trees = {}
    for part in ("calibrate", "test"):
        with model:
            pm.set_data({"x": Z[part], "y_obs": y[part]}, coords={"obs_id": np.arange(len(y[part]))})
            trees[part] = pm.sample_posterior_predictive(
                idata, random_seed=seed + 1, progressbar=False, extend_inferencedata=False
            )
            trees[part]["observed_data"] = xr.DataTree(
                xr.Dataset({"y": ("obs_id", y[part])}, coords={"obs_id": np.arange(len(y[part]))})
            )
    return trees, y


@pytest.fixture(scope="module")
def results(workflow, seed):
    trees, y = workflow
    pred_cal = calibprob.from_draws(trees["calibrate"])  # PyMC's DataTree, as it is
    pred_test = calibprob.from_draws(trees["test"])
    y_cal = trees["calibrate"]["observed_data"]["y"]  # dim obs_id, as PyMC names it
    y_test = trees["test"]["observed_data"]["y"]
    calibrators = {
        "isotonic": calibprob.IsotonicRecalibrator(),
        "cps": calibprob.ConformalPredictiveSystem(),
        # GP-Beta's seed: 0 at the default seed 1 (the measured numbers), another per sweep seed
        "gp-beta": calibprob.GPBetaCalibrator(inference="map", random_state=(seed - 1) % 1000),
    }
    preds = {"base": pred_test}
    for name, cal in calibrators.items():
        preds[name] = cal.fit(pred_cal, y_cal).predict(pred_test)
    scores = {k: calibprob.evaluate(p, y_test) for k, p in preds.items()}
    return preds, scores, calibrators, pred_test, y_test


def test_draws_go_in_as_they_are(workflow, results):
    """PyMC's DataTree gives the same Dataset as stacking chain x draw by hand (no Gaussian collapse)."""
    trees, y = workflow
    base = results[0]["base"]
    assert base.attrs["family"] == "quantile"  # the draws' quantile function, not loc/scale
    draws = trees["test"]["posterior_predictive"]["y"].stack(s=("chain", "draw")).transpose("s", "obs_id").values
    np.testing.assert_array_equal(base.calib.quantiles, calibprob.from_draws(draws).calib.quantiles)


def test_gp_beta_lowers_held_out_nll_below_the_base(results, record_property):
    scores = results[1]
    nll = {k: float(s["nll"]) for k, s in scores.items()}
    cov = {k: float(s["coverage"].sel(confidence_level=0.9)) for k, s in scores.items()}
    print(
        "held-out NLL",
        {k: round(v, 3) for k, v in nll.items()},
        "90% coverage",
        {k: round(v, 3) for k, v in cov.items()},
    )
    record_property("nll_gain_gp_beta", float(nll["base"] - nll["gp-beta"]))
    record_property("coverage_cps", float(cov["cps"]))
    assert nll["gp-beta"] < nll["base"] - 0.05
    n_test = results[3].sizes["obs"]
    assert cov["cps"] >= 0.9 - 3 * np.sqrt(0.09 / n_test)


def test_arviz_reads_what_comes_out(results):
    """to_datatree gives ArviZ's layout: PIT and held-out elpd work without glue."""
    import arviz as az

    preds, _, calibrators, pred_test, y_test = results
    tree = calibprob.to_datatree(preds["gp-beta"], y_test, n_draws=400, random_state=0)
    assert tree["posterior_predictive"]["y"].dims == ("chain", "draw", "obs_id")
    assert set(tree.children) >= {"posterior_predictive", "observed_data", "log_likelihood"}
    ll = tree["log_likelihood"]["y"].isel(chain=0, draw=0).values
    np.testing.assert_allclose(ll, preds["gp-beta"].calib.logpdf(y_test.values).values, rtol=1e-12)
    import matplotlib

    matplotlib.use("Agg")
    az.plot_ppc_pit(tree, var_names="y")  # ArviZ's PIT plot on calibprob's output, no glue
    base_tree = calibprob.to_datatree(pred_test, y_test, n_draws=400, random_state=0)
    table = az.compare({"gp-beta": calibprob.heldout_elpd(tree), "base": calibprob.heldout_elpd(base_tree)})
    assert table.index[0] == "gp-beta"  # held-out elpd ranks the calibrated model first


def test_fitted_calibrators_save_and_load(results, tmp_path):
    preds, _, calibrators, pred_test, _ = results
    for name, cal in calibrators.items():
        path = tmp_path / f"{name}.nc"
        cal.save(path)
        assert path.read_bytes()[:8] == b"\x89HDF\r\n\x1a\n"
        back = calibprob.load(path)
        np.testing.assert_allclose(
            back.predict(pred_test).calib.quantiles, preds[name].calib.quantiles, rtol=0, atol=1e-10
        )
