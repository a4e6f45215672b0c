"""Conformal BO queries under feedback shift (calibprob.bo.conformal): closed forms against GP refits, logging, bad input.

References: Fannjiang et al. (2022), eq. 3 and 6; Stanton et al. (2023).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy import special

from calibprob.bases.gp import GaussianProcessRegressor
from calibprob.bo import bo_table, format_bo_table, minimize, run_experiment
from calibprob.bo.conformal import label_grid, loo_std, query_set

THETA = {"lengthscale": np.array([0.25]), "variance": 1.3, "noise": 0.04}


def _gp(U, y):
    return GaussianProcessRegressor(kernel="se", mean="zero", noise=True, theta=THETA, optimize=False).fit(U, y)


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    U = rng.random((7, 1))
    y = np.sin(6 * U[:, 0]) + 0.1 * rng.normal(size=7)
    return U, y, np.array([0.43]), rng.random((40, 1))


def test_loo_std_equals_refitted_gps(problem):
    U, y, u_t, pool = problem
    sd = loo_std(_gp(U, y), U, u_t, pool)
    S = np.vstack([U, u_t[None, :]])
    E = np.vstack([S, pool])
    y_aug = np.append(y, 0.0)  # the std does not depend on the labels
    for i in range(S.shape[0]):
        keep = np.arange(S.shape[0]) != i
        np.testing.assert_allclose(sd[i], _gp(S[keep], y_aug[keep]).predict_mean_std(E)[1], rtol=1e-8)


def test_query_set_weights_equal_refits(problem):
    """Normalised weights of one candidate label: softmax of -lam * LCB of each left-out GP, at its own point."""
    U, y, u_t, pool = problem
    lam, kappa = 2.0, 2.0
    cs, contains = query_set(_gp(U, y), U, y, u_t, pool, lam=lam, q=-kappa, confidence_level=0.9)
    assert [contains(g) for g in cs.grid] == cs.in_set.tolist()  # the exact rule agrees on the grid
    S = np.vstack([U, u_t[None, :]])
    grid = label_grid(y)
    np.testing.assert_array_equal(cs.grid, grid)
    for k in (3, 60):
        y_aug = np.append(y, grid[k])
        logw = np.empty(S.shape[0])
        for i in range(S.shape[0]):
            keep = np.arange(S.shape[0]) != i
            mu, sd = _gp(S[keep], y_aug[keep]).predict_mean_std(np.vstack([S[i : i + 1], pool]))
            a = -lam * (mu - kappa * sd)
            logw[i] = a[0] - special.logsumexp(a[1:])
        np.testing.assert_allclose(cs.weights[:, k], np.exp(logw - special.logsumexp(logw)), rtol=1e-8)


def test_query_intervals_are_logged():
    res = minimize("forrester", n_init=4, n_steps=2, acquisition="lcb", calibration="none", seed=0, interval_level=0.9)
    st = res["steps"]
    z = special.ndtri(0.95)
    np.testing.assert_allclose(st["interval_lower"], st["forecast_mean"] - z * st["forecast_std"], rtol=1e-6)
    np.testing.assert_allclose(st["interval_upper"], st["forecast_mean"] + z * st["forecast_std"], rtol=1e-6)
    y = res["evaluations"]["y"].values[4:]
    inside = (y >= st["interval_lower"].values) & (y <= st["interval_upper"].values)
    np.testing.assert_array_equal(st["covered"].values, inside.astype(float))
    assert res.attrs["interval_level"] == 0.9


def test_conformal_run_and_table():
    ds = run_experiment(
        ["forrester"],
        ["ucb"],
        ["uncalibrated", "conformal"],
        1,
        n_init=4,
        n_steps=2,
        interval_level=0.9,
        progress=False,
    )
    table = bo_table(ds)
    assert "query_coverage" in table
    assert np.isfinite(table["query_coverage"].sel(method="conformal")).all()
    assert "query cov." in format_bo_table(table)
    assert "covered" not in run_experiment(
        ["forrester"], ["ucb"], ["uncalibrated"], 1, n_init=3, n_steps=1, progress=False
    )


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (
            {"calibration": "conformal", "acquisition": "ei"},
            "acquisition='ei' is not supported there. Pass acquisition='lcb'",
        ),
        (
            {"calibration": "conformal", "acquisition": "lcb", "design_lambda": np.inf},
            "design_lambda .* must be a finite",
        ),
        ({"calibration": "none", "interval_level": 1.5}, "interval_level must be in"),
        ({"calibration": "conformal", "acquisition": "softmax"}, "acquisition must be one of"),
    ],
)
def test_bad_conformal_options(kw, match):
    with pytest.raises(ValueError, match=match):
        minimize("forrester", n_init=3, n_steps=1, seed=0, **kw)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--design-lambda", "inf"], r"design_lambda \(--design-lambda\) must be a finite number >= 0; got inf"),
        (["--interval-level", "2"], r"interval_level \(--interval-level\) must be in"),
    ],
)
def test_cli_bad_conformal_options_are_one_clear_line(args, match, capsys):
    from calibprob.cli import main

    code = main(["bo", "--functions", "forrester", "--seeds", "1", "--n-steps", "1", "--no-progress", *args])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert re.search(match, err), err
