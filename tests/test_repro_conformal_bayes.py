"""Fong & Holmes's (2021) conformal-Bayes numbers, through
``benchmarks/repro_conformal_bayes.py``: its data protocol in the default run, the numbers in a
slow test on fewer repetitions than the authors' 50 (tolerance widened by the standard error),
and in a slow test on all 50 from the resumable cache."""

import numpy as np
import pytest

from tests.support.paths import load_benchmark


@pytest.fixture(scope="module")
def repro():
    return load_benchmark("repro_conformal_bayes")


def test_bundled_diabetes_is_sklearns_and_the_split_is_the_authors(repro):
    from calibprob.datasets import load_dataset

    ds = load_dataset("diabetes")
    assert ds["X"].shape == (442, 10) and ds["y"].shape == (442,)
    x_tr, y_tr, x_te, y_te, grid = repro.load_split("diabetes", 100)
    assert x_tr.shape == (309, 10) and x_te.shape == (133, 10)
    # standardised on all 442 rows (the authors' "for validity"), population sd
    y_all = np.concatenate([y_tr, y_te])
    assert abs(y_all.mean()) < 1e-12 and abs(y_all.std() - 1.0) < 1e-12
    # the split is a partition, fixed by the seed, and differs between seeds
    assert len(np.unique(np.concatenate([y_tr, y_te]))) == len(np.unique(y_all))
    np.testing.assert_array_equal(repro.load_split("diabetes", 100)[1], y_tr)
    assert not np.array_equal(repro.load_split("diabetes", 101)[1], y_tr)
    assert grid.shape == (100,) and grid[0] == y_tr.min() - 2 and np.isclose(grid[-1], y_tr.max() + 2)


def test_hierarchical_simulation_has_group_specific_noise(repro):
    x, g, y, xt, gt, yt, grid = repro.gen_hier(100)
    assert x.shape == y.shape == g.shape == (50,) and np.bincount(gt).tolist() == [10] * 5
    np.random.seed(24)
    beta = np.random.randn(5, 1)[:, 0]
    sig = np.random.exponential(size=5)
    resid = y - beta[g] * x  # no intercept in the truth
    # residual sd follows the per-group noise sd (Exp(1) draws), not a shared one
    sd = np.array([resid[g == k].std() for k in range(5)])
    assert np.corrcoef(sd, sig)[0, 1] > 0.9
    np.testing.assert_array_equal(grid, np.linspace(-10, 10, 100))


def test_bayes_band_is_the_central_interval_of_a_normal(repro):
    # one posterior draw repeated: the band is the grid point nearest the N(0, 1) 10 % / 90 % quantiles
    grid = np.linspace(-4, 4, 801)
    band = repro.bayes_band(np.zeros((3, 1)), np.ones((3, 1)), grid)
    np.testing.assert_allclose(band[0], [-1.2816, 1.2816], atol=0.006)


@pytest.mark.slow
def test_diabetes_reproduces_the_authors_numbers(repro, tmp_path, monkeypatch):
    """Diabetes, Laplace prior, c = 1 and c = 0.02, α = 0.2: the authors' 50-repetition means
    (Bayes 0.806 / 0.563, conformal Bayes 0.808 / 0.809, CB length 1.87) within the acceptance's
    ±0.02 widened by 2 standard errors of our mean over ``REPS`` repetitions (the per-repetition
    sd of the coverage is about 0.035, so 2 SE ≈ 0.03 at 6 repetitions). The 50-repetition run is
    on docs/benchmarks.md."""
    reps = 6
    monkeypatch.setattr(repro, "CACHE", tmp_path)
    try:
        import nutpie  # noqa: F401
    except ImportError:
        monkeypatch.setattr(repro, "SAMPLER", "pymc")
    for exp, bayes, cb in (("diabetes", 0.806, 0.808), ("diabetes_misspec", 0.563, 0.809)):
        for r in range(reps):
            repro.sample_rep(exp, r)
        s = repro.summarise(exp, reps, "calibprob")
        assert s["reps"] == reps
        (b, b_se), (c, c_se) = s["cov_bayes"], s["cov_cb"]
        assert abs(b - bayes) <= 0.02 + 2 * b_se, (exp, s)
        assert abs(c - cb) <= 0.02 + 2 * c_se, (exp, s)
        assert abs(s["len_cb"][0] / 1.87 - 1.0) <= 0.10, (exp, s)
        # issue 35, counted on the interval a user reads (ends refined on the exact p-value)
        (ci, ci_se) = s["cov_cb_interval"]
        assert ci >= 0.8 - 3 * ci_se and abs(s["len_cb_interval"][0] / 1.87 - 1.0) <= 0.10, (exp, s)


@pytest.mark.slow
def test_all_50_repetitions_reproduce_the_authors_table(repro):
    """The acceptance on the authors' 50 repetitions, from the resumable cache that
    ``repro_conformal_bayes.py sample --reps 50`` fills (hours of NUTS; evaluation is cached too):
    Bayes and conformal Bayes coverage within ±0.02 of the authors' (diabetes c = 1 and 0.02,
    Boston c = 1), conformal Bayes length within 10 %, and grouped conformal Bayes covering
    0.75–0.87 in every group of the misspecified hierarchical simulation where Bayes ranges
    0.52–1.00. Skips, naming the command, when the cache does not hold the 50 sampled repetitions."""
    missing = {e: 50 - len(repro.cached_reps(e, 50)) for e in repro.EXPERIMENTS}
    if any(missing.values()):
        pytest.skip(f"cache {repro.CACHE} lacks repetitions {missing}: run repro_conformal_bayes.py sample --reps 50")
    for exp in ("diabetes", "diabetes_misspec", "boston"):
        bayes, cb, _, cb_len = repro.AUTHORS[exp]
        s = repro.summarise(exp, 50, "calibprob")
        assert s["reps"] == 50
        assert abs(s["cov_bayes"][0] - bayes) <= 0.02, (exp, s)
        assert abs(s["cov_cb"][0] - cb) <= 0.02, (exp, s)
        assert abs(s["len_cb"][0] / cb_len - 1.0) <= 0.10, (exp, s)
        # on the interval a user reads: the authors' conformal Bayes coverage, the same length
        assert abs(s["cov_cb_interval"][0] - cb) <= 0.02 and abs(s["len_cb_interval"][0] / cb_len - 1.0) <= 0.10, s
    s = repro.summarise("hier_sim_misspec", 50, "calibprob")
    assert all(0.75 <= c <= 0.87 for c in s["cov_cb_group"]), s
    assert all(0.75 <= c <= 0.87 for c in s["cov_cb_interval_group"]), s
    assert min(s["cov_bayes_group"]) < 0.6 and max(s["cov_bayes_group"]) > 0.95, s  # Bayes: 0.52-1.00
