"""The ``pymc-linear`` base: a PyMC linear regression whose predictive is its posterior-predictive draws."""

import warnings

import numpy as np
import pytest

from calibprob import ConvergenceWarning, LinearRegression
from calibprob.bases.pymc_linear import PyMCLinearRegression
from calibprob.compare import SpecError, parse_spec, run_task

FAST = {"draws": 300, "tune": 300, "chains": 2}

# Every test here that reads a sampler's draws takes its seed from the seed sweep (tests/conftest.py): the default
# run keeps the seeds the tests always used, `make test-seeds` runs the same assertions at seeds 0..19. Worst values
# over that sweep (2026-11-29, PyMC 6.4.0): coefficients 0.0065 from OLS (NUTS) and 0.016 (ADVI), intercept 0.0045,
# predictive mean 0.062 and sd 9.2 % from OLS's, LOO means 0.069 from the closed form, r-hat 1.029, bulk ESS 390,
# student-t IQR / Gaussian IQR 0.754: every margin below holds with room.
SEEDED = pytest.mark.seeded(1, scope="module")


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(80, 2)) * [1.0, 10.0] + [0.0, 5.0]
    y = 1.0 + X @ [2.0, -0.1] + 0.5 * rng.normal(size=80)
    return X, y


@pytest.fixture(scope="module")
def fitted(data, seed):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the diagnostics are checked below
        return PyMCLinearRegression(random_state=seed, **FAST).fit(X, y)


@SEEDED
def test_predict_is_a_draws_quantile_dataset(fitted, data):
    X, _ = data
    pred = fitted.predict(X[:7])
    assert pred.attrs["family"] == "quantile"
    assert pred.attrs["n_draws"] == FAST["draws"] * FAST["chains"]
    assert pred["quantile"].dims == ("obs", "level") and pred.sizes["obs"] == 7
    assert {"mean", "std"} <= set(pred.data_vars)
    q = pred["quantile"].values
    assert np.all(np.diff(q, axis=1) >= 0)
    levels = np.asarray([0.1, 0.5, 0.9])
    assert np.allclose(fitted.predict(X[:2], levels=levels)["level"].values, levels)


@SEEDED
def test_posterior_agrees_with_ols_under_weak_priors(fitted, data, record_property):
    # independent check: with 80 points and weakly informative priors the posterior mean of the
    # coefficients and the predictive mean/sd are close to the OLS estimates and prediction sd
    X, y = data
    ols = LinearRegression().fit(X, y)
    mu, sd = ols.predict_mean_std(X[:10])
    pred = fitted.predict(X[:10])
    record_property("coef_gap", float(np.max(np.abs(fitted.coef_ - ols.coef_))))
    record_property("intercept_gap", float(abs(fitted.intercept_ - ols.intercept_)))
    record_property("mean_gap", float(np.max(np.abs(pred["mean"].values - mu))))
    record_property("sd_rel_gap", float(np.max(np.abs(pred["std"].values / sd - 1))))
    np.testing.assert_allclose(fitted.coef_, ols.coef_, atol=0.05)
    assert abs(fitted.intercept_ - ols.intercept_) < 0.3
    mu, sd = ols.predict_mean_std(X[:10])
    pred = fitted.predict(X[:10])
    np.testing.assert_allclose(pred["mean"].values, mu, atol=0.15)
    np.testing.assert_allclose(pred["std"].values, sd, rtol=0.2)


@SEEDED
def test_diagnostics_are_stored(fitted, record_property):
    d = fitted.diagnostics_
    record_property("rhat", float(d["rhat"]))
    record_property("ess_bulk", float(d["ess_bulk"]))
    assert set(d.data_vars) == {"rhat", "ess_bulk", "divergences"}
    assert 1.0 <= float(d["rhat"]) < 1.1
    assert 50 < float(d["ess_bulk"]) <= 2 * FAST["draws"] * FAST["chains"]
    assert float(d["divergences"]) >= 0


@pytest.mark.seeded(2)
def test_student_t_predictive_is_heavier_tailed_than_its_gaussian(data, seed, record_property):
    # the draws are passed on as draws: with nu = 2.5 fixed, the 1%-99% spread exceeds that of a
    # Gaussian with the draws' own sd, which a Gaussian collapse would give
    from scipy.stats import norm

    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = PyMCLinearRegression(likelihood="student-t", nu=2.5, random_state=seed, draws=1000, tune=300, chains=1).fit(
            X, y
        )
    assert np.isnan(float(m.diagnostics_["rhat"]))  # one chain: r-hat undefined
    pred = m.predict(X[:20], levels=[0.25, 0.75])
    iqr = (pred["quantile"].sel(level=0.75) - pred["quantile"].sel(level=0.25)).values
    gauss_iqr = 2 * norm.ppf(0.75) * pred["std"].values
    record_property("iqr_over_gauss_iqr_max", float(np.max(iqr / gauss_iqr)))
    assert np.all(iqr < 0.95 * gauss_iqr)  # heavy tails: most of the sd sits outside the IQR


@pytest.mark.parametrize(
    "kw, err, match",
    [
        ({"likelihood": "cauchy"}, ValueError, "likelihood"),
        ({"inference": "smc"}, ValueError, "inference"),
        ({"draws": 5}, ValueError, "draws"),
        ({"nu": -1.0}, ValueError, r"nu must be a positive number of degrees of freedom or 'learn'; got -1\.0"),
        ({"target_accept": 1.5}, ValueError, r"target_accept must be a number in \(0, 1\)"),
        ({"standardize": "yes"}, TypeError, "standardize must be True or False"),
    ],
)
def test_bad_parameters(kw, err, match, data):
    X, y = data
    with pytest.raises(err, match=match):
        PyMCLinearRegression(**kw).fit(X, y)


@SEEDED
def test_predict_checks(fitted, data):
    X, y = data
    with pytest.raises(ValueError, match="X has 3 features but the model was fitted with 2"):
        fitted.predict(np.ones((2, 3)))
    with pytest.raises(Exception, match="fit"):
        PyMCLinearRegression().predict(X)
    with pytest.raises(ValueError, match="y is constant"):
        PyMCLinearRegression().fit(X, np.ones(len(y)))


def test_spec_options_are_typed():
    base = {
        "name": "x",
        "datasets": ["diabetes"],
        "split": {"train": 0.6, "calibrate": 0.2, "test": 0.2},
        "methods": {"b": {"kind": "base"}},
    }
    with pytest.raises(SpecError, match=r"base\.likelihood must be one of 'normal', 'student-t'; got 'studentt'"):
        parse_spec({**base, "base": {"kind": "pymc-linear", "likelihood": "studentt"}})
    with pytest.raises(SpecError, match=r"bases\.g\.draws must be an integer in \[10, 1000000\]"):
        parse_spec({**base, "bases": {"g": {"kind": "pymc-linear", "draws": 2}}})
    with pytest.raises(SpecError, match=r"unknown key 'sampler' in \[bases\.g\] \(kind 'pymc-linear'\)"):
        parse_spec({**base, "bases": {"g": {"kind": "pymc-linear", "sampler": "nutpie"}}})
    with pytest.raises(
        SpecError,
        match=r"methods\.j \(kind 'jackknife-plus-gp'\) needs a base of kind 'gp'.*"
        r"\[bases\.g\] of kind 'pymc-linear'",
    ):
        parse_spec({**base, "bases": {"g": {"kind": "pymc-linear"}}, "methods": {"j": {"kind": "jackknife-plus-gp"}}})


@pytest.mark.seeded(5)
def test_pymc_glm_runs_as_one_of_several_bases(tmp_path, seed, record_property):
    spec = parse_spec(
        {
            "name": "glm",
            "datasets": [{"name": "lin", "function": "branin", "n": 100, "noise": 0.5}],
            "split": {"train": 0.6, "calibrate": 0.2, "test": 0.2},
            "seed": seed,  # the data's draw, the split and the NUTS seed
            "confidence_level": [0.5, 0.9],
            "bases": {
                "ols": {"kind": "ols"},
                "glm": {"kind": "pymc-linear", "likelihood": "student-t", "draws": 200, "tune": 200},
            },
            "methods": {"b": {"kind": "base"}, "sc": {"kind": "split-conformal"}},
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        out = run_task(spec.to_dict(), "lin", 0)
    assert out.attrs["task_failed"] == 0, out["error"].values
    assert np.isfinite(out["nll"].sel(base="glm")).all()
    # a linear model on branin: both linear bases score alike (their predictive sds differ only by
    # the t tails and the posterior spread), and the GLM's convergence diagnostics are stored per base
    nll = out["nll"].sel(calibrator="b").squeeze()
    record_property("nll_gap", abs(float(nll.sel(base="glm")) - float(nll.sel(base="ols"))))
    record_property("rhat", float(out["rhat"].sel(base="glm").squeeze()))
    # swept at seeds 0..19 (2026-11-29): 0.68 at seed 4 (GLM 2.02, OLS 1.35; r-hat 1.07 at worst over the sweep),
    # 0.5 broke there; 1.0 now
    assert abs(float(nll.sel(base="glm")) - float(nll.sel(base="ols"))) < 1.0
    assert out["rhat"].dims == ("dataset", "repetition", "base")
    assert np.isfinite(out["rhat"].sel(base="glm")).all() and np.isnan(out["rhat"].sel(base="ols")).all()
    assert float(out["divergences"].sel(base="glm").squeeze()) >= 0

    # through the whole runner: the results file, the table and the HTML report carry the diagnostics
    from calibprob.compare import format_table, load_results, run_comparison, write_html

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        run_comparison(spec, tmp_path / "r.nc", progress=False)
    res = load_results(tmp_path / "r.nc")
    np.testing.assert_allclose(res["nll"].values, out["nll"].values, rtol=1e-12)  # same task, same numbers
    assert "glm/sc" in format_table(res, ["nll"])
    html = write_html(res, tmp_path / "r.html").read_text()
    assert "rhat" in html and "ess_bulk" in html and "glm/b" in html


@pytest.mark.seeded(4)
def test_advi_option_approximates_the_posterior(data, seed, record_property):
    # mean-field ADVI: coefficients near OLS, draws still passed on as draws; no NUTS diagnostics
    X, y = data
    m = PyMCLinearRegression(inference="advi", random_state=seed, draws=250, chains=2).fit(X, y)
    ols = LinearRegression().fit(X, y)
    record_property("coef_gap", float(np.max(np.abs(m.coef_ - ols.coef_))))
    np.testing.assert_allclose(m.coef_, ols.coef_, atol=0.1)
    pred = m.predict(X[:5])
    assert pred.attrs["family"] == "quantile" and pred.attrs["n_draws"] == 500
    assert all(np.isnan(float(m.diagnostics_[k])) for k in ("rhat", "ess_bulk", "divergences"))


@pytest.mark.seeded(5)
def test_compare_flags_a_base_whose_sampler_did_not_converge(tmp_path, capsys, seed, record_property):
    """No tuning and 10 draws: NUTS cannot converge, so `calibprob compare` flags the base."""
    import re

    import xarray as xr

    from calibprob.cli import main

    spec = tmp_path / "s.toml"
    spec.write_text(
        """
name = "tiny-glm"
datasets = [{ name = "lin", function = "branin", n = 80, noise = 0.5 }]
repetitions = 1
seed = SEED
confidence_level = [0.9]
[split]
train = 0.6
calibrate = 0.2
test = 0.2
[base]
kind = "pymc-linear"
draws = 10
tune = 0
chains = 2
[methods.b]
kind = "base"
""".replace("SEED", str(seed))
    )
    out = tmp_path / "r.nc"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["compare", str(spec), "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    tree = xr.open_datatree(out, engine="h5netcdf")
    try:
        rhat = float(tree.to_dataset()["rhat"].squeeze())
        flag = str(tree["ranking"].to_dataset()["base_flag"].sel(dataset="lin", pipeline="b").item())
    finally:
        tree.close()
    record_property("rhat", rhat)
    assert rhat > 1.01  # the stored diagnostic itself says "not converged"
    assert flag.startswith(f"max r̂ {rhat:.3f} > 1.01 in 1 of 1 repetition(s)")
    # the scores table and the ranking both say so
    # r-hat is inf when a chain never moved (seeds 3, 9, 12 of the sweep: the flag then said only "divergent")
    assert re.search(r"== lin .*\n! base not converged for b: max r̂ (\d\.\d{3}|inf) > 1\.01 in 1 of 1", printed)
    assert re.search(r"\n\s+1\s+b\s.*best, ! base not converged\n", printed)
    assert printed.count("! base not converged for b") == 2


@SEEDED
def test_loo_tree_gives_the_ols_leave_one_out_predictions(fitted, data, record_property):
    """from_loo of the fit (PSIS-LOO) against the closed-form OLS leave-one-out prediction
    y_i - e_i / (1 - h_ii): with weak priors and 80 points they agree within 0.15, as the full-data means do."""
    import calibprob

    X, y = data
    tree = fitted.loo_tree()
    assert set(tree.children) == {"posterior", "log_likelihood", "posterior_predictive", "observed_data"}
    assert tree["log_likelihood"]["y"].dims == ("chain", "draw", "obs")
    np.testing.assert_array_equal(tree["observed_data"]["y"].values, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", calibprob.CalibprobWarning)
        loo = calibprob.from_loo(tree)
    A = np.c_[np.ones(len(y)), X]
    H = A @ np.linalg.pinv(A)
    e = y - H @ y
    record_property("loo_mean_gap", float(np.max(np.abs(loo["mean"].values - (y - e / (1 - np.diag(H)))))))
    np.testing.assert_allclose(loo["mean"].values, y - e / (1 - np.diag(H)), atol=0.15)
    # leave-one-out predictions are further from their targets than in-sample ones
    assert np.mean((y - loo["mean"].values) ** 2) > np.mean((y - fitted.predict(X)["mean"].values) ** 2)
