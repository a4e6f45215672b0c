"""Marginal coverage of conformal Bayes and of the model itself on the Minnesota radon survey, over seeds.

The varying-intercept model of notebook 11 and of the docs page *Calibrate your own hierarchical model*
(log radon ~ basement + county intercept, non-centred, one noise level), fitted by NUTS (2 chains x 500
draws) on a 75 / 25 split stratified by county, once per seed. For each split: the coverage of the test
homes by conformal Bayes's sets (Fong & Holmes 2021; ``calibprob.conformal_bayes``) and by the model's
own central posterior-predictive intervals, at 80 % and 90 %. One split's test part has 219 homes (a
binomial standard error of 0.027 at 80 %), so a single split says little; the mean over seeds and its
standard error are what this prints.

Usage: ``python benchmarks/radon_coverage.py [n_seeds]`` (default 10; about 25 s per seed on one core).
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pandas as pd

import calibprob
from calibprob.datasets import load_dataset, train_calibrate_test_split

LEVELS = [0.8, 0.9]


def frame(part):
    return pd.DataFrame(
        {"y": part["y"].values, "basement": part["X"].sel(feature="basement").values, "county": part["group"].values}
    )


def one_split(ds, counties, seed: int) -> dict:
    """Coverage of conformal Bayes and of the model's own intervals on one seeded stratified split."""
    import pymc as pm

    parts = train_calibrate_test_split(ds, (0.75, 0.25), seed=seed, stratify="group")
    train, test = frame(parts["train"]), frame(parts["test"])

    def index(county):
        return pd.Categorical(county, categories=counties).codes

    with pm.Model(coords={"county": counties, "obs_id": np.arange(len(train))}) as model:
        county = pm.Data("county_idx", index(train["county"]), dims="obs_id")
        basement = pm.Data("basement", train["basement"].values, dims="obs_id")
        mu_a, sigma_a = pm.Normal("mu_a", 0.0, 5.0), pm.HalfNormal("sigma_a", 1.0)
        a = mu_a + sigma_a * pm.Normal("z", 0.0, 1.0, dims="county")
        b, sigma = pm.Normal("b", 0.0, 2.0), pm.HalfNormal("sigma", 2.0)
        pm.Normal("y", a[county] + b * basement, sigma, observed=train["y"].values, dims="obs_id")
        idata = pm.sample(500, tune=500, chains=2, cores=1, random_seed=seed, progressbar=False)
        pm.compute_log_likelihood(idata, progressbar=False)
        X_new = {"county_idx": index(test["county"]), "basement": test["basement"].values}
        pm.set_data(X_new, coords={"obs_id": np.arange(len(test))})
        new = pm.sample_posterior_predictive(idata, predictions=True, random_seed=seed, progressbar=False)
    cb = calibprob.conformal_bayes(model, idata, X_new, confidence_level=LEVELS)
    own = calibprob.from_draws(new, group="predictions")
    out = {}
    for name, pred in (("conformal Bayes", cb), ("model", own)):
        coverage = calibprob.evaluate(pred, test["y"].values, LEVELS)["coverage"].values
        out.update({(name, level): float(c) for level, c in zip(LEVELS, coverage)})
    return out


def main(n_seeds: int = 10) -> pd.DataFrame:
    ds = load_dataset("radon_mn", groups="county.name")
    counties = np.unique(ds["group"].values)
    rows = {}
    with warnings.catch_warnings():
        # the small counties' split warning and the PSIS / ESS diagnostics: the same every seed
        warnings.simplefilter("ignore")
        for seed in range(n_seeds):
            rows[seed] = one_split(ds, counties, seed)
            print(f"seed {seed}: " + ", ".join(f"{k[0]} {k[1]:.0%} {v:.3f}" for k, v in rows[seed].items()), flush=True)
    table = pd.DataFrame(rows).T
    summary = pd.DataFrame({"mean": table.mean(), "se": table.std(ddof=1) / np.sqrt(len(table))})
    print(f"\nover {n_seeds} seeded stratified 75/25 splits:")
    print(summary.round(3).to_string())
    return summary


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
