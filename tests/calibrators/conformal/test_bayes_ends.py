"""Conformal Bayes's interval ends: refined on the exact p-value, compared with the exact full-conformal set.

The conjugate Normal location model (known noise) has a closed-form full-conformal set, so the
width of the returned interval can be checked against the exact one, and coverage is counted on
the *returned ends* (the interval a user reads), not on the grid.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from calibprob import CalibprobWarning
from calibprob.calibrators.conformal.bayes._grid import default_grid as _default_grid
from calibprob.calibrators.conformal.bayes.estimator import REFINE_STEPS, ConformalBayes
from tests.calibrators.conformal.test_bayes import M0, S_NOISE, T0, normal_logpdf, posterior


def exact_hull(y, level, lo, hi, n_fine=200_001):
    """The exact full-conformal set's hull for the conjugate model, on a fine grid of [lo, hi].

    With the candidate added, every predictive density is N(m'(y_c), s^2 + t'^2), so the score
    comparison is |y_i - m'| >= |y_c - m'|, and the set is {rank > floor(alpha (n + 1))}.
    """
    yc = np.linspace(lo, hi, n_fine)
    n = len(y)
    prec = 1 / T0**2 + (n + 1) / S_NOISE**2
    m1 = (M0 / T0**2 + (y.sum() + yc) / S_NOISE**2) / prec
    rank = 1 + (np.abs(y[None, :] - m1[:, None]) >= np.abs(yc - m1)[:, None]).sum(axis=1)
    kept = rank > math.floor((1 - level) * (n + 1) + 1e-9)
    assert not kept[0] and not kept[-1]
    return yc[kept][0], yc[kept][-1]


def _fit_predict(y, rng, n_draws, levels, n_grid=100, refine=True, x_shift=0.0):
    """Conformal Bayes at the door's default per-point grid, fed by exact posterior draws."""
    m, sd = posterior(y)
    theta = rng.normal(m, sd, size=n_draws) + x_shift
    mu, sigma = theta[:, None], np.full((n_draws, 1), S_NOISE)
    ll = normal_logpdf(y[None, :], theta[:, None] - x_shift)
    grid = _default_grid(None, y, n_grid, 1, family="NormalRV", params=[mu, sigma], log_likelihood=ll)
    logf = normal_logpdf(grid[None, :, :], mu[:, :, None])
    density = (lambda rows, v: normal_logpdf(v[None], mu[:, rows, None])) if refine else None
    cb = ConformalBayes(confidence_level=levels, min_ess=0.0, pareto_k=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibprobWarning)
        return cb.fit(ll, y=y).predict(logf, grid, log_density=density)


@pytest.mark.parametrize("level", [0.8, 0.9])
def test_width_is_within_5_percent_of_the_exact_full_conformal_set(level):
    rng = np.random.default_rng(3)
    y = rng.normal(0.5, 1.0, size=40)
    pred = _fit_predict(y, rng, 20_000, [level])
    lo, hi = exact_hull(y, level, y.min() - 5, y.max() + 5)
    got_lo, got_hi = pred["lower"].item(), pred["upper"].item()
    assert abs((got_hi - got_lo) - (hi - lo)) <= 0.05 * (hi - lo)
    # the old ends (grid points inside the set) lost up to a spacing per side; the outer grid neighbours
    # (no refiner) contain the set's hull on the grid
    outer = _fit_predict(y, np.random.default_rng(3).__class__(np.random.PCG64(3)), 20_000, [level], refine=False)
    assert outer.attrs["interval_ends"] == "outer grid neighbours"
    assert outer["upper"].item() - outer["lower"].item() >= got_hi - got_lo


def test_refined_ends_sit_on_the_p_value_crossing():
    """At the reported end the p-value is <= alpha; 2**-REFINE_STEPS of the spacing inwards it is > alpha."""
    rng = np.random.default_rng(9)
    y = rng.normal(size=25)
    m, sd = posterior(y)
    theta = rng.normal(m, sd, size=4000)
    ll = normal_logpdf(y[None, :], theta[:, None])
    grid = np.linspace(-4, 4, 41)
    cb = ConformalBayes(confidence_level=0.8, min_ess=0.0).fit(ll, y=y)
    pred = cb.predict(
        normal_logpdf(grid[None, None, :], theta[:, None, None]),
        grid,
        log_density=lambda rows, v: normal_logpdf(v[None], theta[:, None, None]),
    )
    tol = (grid[1] - grid[0]) / 2**REFINE_STEPS
    lo, hi = pred["lower"].item(), pred["upper"].item()
    probe = ConformalBayes(confidence_level=0.8, min_ess=0.0, min_grid_mass=0.0, pareto_k=False).fit(ll, y=y)

    def p_at(v):  # the p-value at v alone (a 2-point grid per value, its first point read)
        pair = np.array([[v, v + tol / 10]])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CalibprobWarning)
            return probe.predict(normal_logpdf(pair[None], theta[:, None, None]), pair)["p_value"].values[0, 0]

    p = [p_at(v) for v in (lo, lo + tol, hi - tol, hi)]
    alpha = 0.2
    assert p[0] <= alpha < p[1] and p[2] > alpha >= p[3]


def test_diagnostics_and_ends_of_one_level_do_not_depend_on_the_other_levels_asked():
    """Asking for 0.5 beside a 0.95 whose sets reach the grid's edges leaves 0.5's ends, ESS and k-hat bitwise as when asked alone."""
    rng = np.random.default_rng(4)
    y = rng.normal(size=30)
    m, sd = posterior(y)
    theta = rng.normal(m, sd, size=3000)
    ll = normal_logpdf(y[None, :], theta[:, None])
    grid = np.broadcast_to(np.linspace(-1.8, 1.8, 60), (2, 60))  # narrow, per point: 0.95 reaches both edges
    logf = normal_logpdf(grid[None], theta[:, None, None] + np.array([0.0, 0.4])[None, :, None])

    def density(rows, v):
        return normal_logpdf(v[None], theta[:, None, None] + np.array([0.0, 0.4])[None, rows, None])

    cb = ConformalBayes(min_ess=0.0, min_grid_mass=0.5).fit(ll, y=y)
    alone = cb.predict(logf, grid, confidence_level=0.5, log_density=density)
    with pytest.warns(CalibprobWarning, match=r"grid's edge at level\(s\) 0.95 \(2 points\)"):
        both = cb.predict(logf, grid, confidence_level=[0.5, 0.95], log_density=density)
    for name in ("lower", "upper", "min_ess", "pareto_k", "n_pieces"):
        np.testing.assert_array_equal(
            both[name].sel(confidence_level=0.5).values, alone[name].sel(confidence_level=0.5).values
        )
    assert np.isinf(both["upper"].sel(confidence_level=0.95).values).all()


def test_a_log_density_that_is_not_callable_or_of_the_wrong_shape_is_refused():
    rng = np.random.default_rng(0)
    y = rng.normal(size=20)
    theta = rng.normal(*posterior(y), size=200)
    ll = normal_logpdf(y[None, :], theta[:, None])
    grid = np.linspace(-4, 4, 30)
    logf = normal_logpdf(grid[None, None, :], theta[:, None, None])
    cb = ConformalBayes(confidence_level=0.8, min_ess=0.0, pareto_k=False).fit(ll, y=y)
    with pytest.raises(TypeError, match=r"log_density must be a callable log_density\(rows, y\).*got ndarray"):
        cb.predict(logf, grid, log_density=logf)
    with pytest.raises(ValueError, match=r"must return shape \(S, len\(rows\), K\) = \(200, 1, 2\); got \(200, 2\)"):
        cb.predict(logf, grid, log_density=lambda rows, v: normal_logpdf(v, theta[:, None]))


def _interval_coverage(reps, level, misspecified, seed):
    rng = np.random.default_rng(seed)
    hits, unbounded = 0, 0
    for _ in range(reps):
        n = 30
        if misspecified:  # heavy tails, sd 2: the model (noise sd 1) is wrong
            y_all = rng.standard_t(3, size=n + 1) * 2.0 + 1.0
        else:
            y_all = rng.normal(rng.normal(M0, 1.0), S_NOISE, size=n + 1)
        pred = _fit_predict(y_all[:n], rng, 1000, [level])
        lo, hi = pred["lower"].item(), pred["upper"].item()
        hits += int(lo <= y_all[n] <= hi)
        unbounded += int(np.isinf(lo) or np.isinf(hi))
    return hits / reps, unbounded


@pytest.mark.slow
@pytest.mark.parametrize("misspecified", [False, True])
@pytest.mark.parametrize("level", [0.8, 0.9])
def test_interval_coverage_at_defaults_over_400_repetitions(level, misspecified):
    """Coverage of the returned interval (not the grid) >= nominal - 3 se, and not far above."""
    reps = 400
    cov, unbounded = _interval_coverage(reps, level, misspecified, seed=2021 + int(100 * level) + misspecified)
    se = math.sqrt(level * (1 - level) / reps)
    assert level - 3 * se <= cov <= level + 1 / 31 + 3 * se, cov
    assert unbounded == 0  # the default grid holds every set: no end reported at the grid's edge
