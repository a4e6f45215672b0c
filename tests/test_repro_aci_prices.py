"""ACI on French spot prices (Zaffran et al. 2022), hour 0 of 2019, against the authors' bounds.

Slow: 365 random forests of 1 000 trees (about 13 minutes on one loaded core; the forecasts are
cached under ``$CALIBPROB_CACHE``). The data stay in ``../shared/data`` (the test skips, naming
it, where that folder is absent)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.support.paths import REPO_ROOT, load_benchmark

DATA = Path(os.environ.get("CALIBPROB_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="module")
def repro():
    return load_benchmark("repro_aci_prices")


@pytest.mark.slow
def test_aci_reproduces_the_authors_coverage_and_width(repro):
    """The acceptance: coverage 0.896 +- 0.015 and mean width within 10 % of 12.84 EUR/MWh."""
    if not (DATA / "zaffran2022_prices.csv.gz").exists():
        pytest.skip(f"{DATA} lacks zaffran2022_prices.csv.gz (set CALIBPROB_SHARED_DATA to the shared data folder)")
    X, y, train_size = repro.load(DATA)
    assert train_size == 1089 and y.size - train_size == 365
    lower, upper, aci = repro.run_aci(y, train_size, repro.forecasts(X, y, train_size))
    ours = repro.summary(y[train_size:], lower, upper)
    assert abs(ours["coverage"] - 0.896) <= 0.015 and abs(ours["mean_width"] / 12.84 - 1) <= 0.10, ours
    assert ours["infinite"] == 0
    ref = pd.read_csv(DATA / "reference" / "zaffran2022_aci_reference.csv")
    # the same forests up to scikit-learn's version: the day-by-day bounds agree closely
    assert np.median(np.abs(upper - ref["Y_sup"].to_numpy())) < 0.5
    assert abs((1 - ours["coverage"]) - 0.1) <= aci.coverage_error_bound()[0]  # Proposition 4.1


@pytest.mark.slow
def test_agaci_beside_aci_on_the_same_forests(repro):
    """AgACI (Zaffran et al.'s aggregation) on the same forests: finite, coverage within 0.015 of 0.9 (measured
    0.904, mean width 13.55; no bound exists for AgACI)."""
    if not (DATA / "zaffran2022_prices.csv.gz").exists():
        pytest.skip(f"{DATA} lacks zaffran2022_prices.csv.gz (set CALIBPROB_SHARED_DATA to the shared data folder)")
    X, y, train_size = repro.load(DATA)
    lower, upper, ag = repro.run_agaci(y, train_size, repro.forecasts(X, y, train_size))
    ours = repro.summary(y[train_size:], lower, upper)
    assert ours["infinite"] == 0 and abs(ours["coverage"] - 0.9) <= 0.015, ours
    assert abs(ours["mean_width"] / 12.84 - 1) <= 0.10, ours
