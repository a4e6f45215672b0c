"""The predictive-distribution contract, checked against scipy.stats closed forms."""

import numpy as np
import pytest
import xarray as xr
from scipy import stats

import calibprob
from calibprob.predictive import (
    DEFAULT_LEVELS,
    CalibprobWarning,
    quantile_cdf,
    quantile_logpdf,
    quantile_moments,
    quantile_ppf,
)


@pytest.fixture
def gaussian(gaussian_forecasts):
    """50 Gaussian forecasts 2 times too narrow."""
    return gaussian_forecasts(50, seed=0, spread=2)


def test_normal_matches_scipy(gaussian):
    loc, scale, y = gaussian
    pred = calibprob.normal(loc, scale)
    ref = stats.norm(loc, scale)
    np.testing.assert_allclose(pred.calib.cdf(y), ref.cdf(y), atol=1e-12)
    np.testing.assert_allclose(pred.calib.logpdf(y), ref.logpdf(y), atol=1e-9)
    p = np.array([0.001, 0.1, 0.5, 0.77, 0.999])
    np.testing.assert_allclose(pred.calib.ppf(p), ref.ppf(p[:, None]).T, atol=1e-9)
    iv = pred.calib.interval([0.5, 0.9])
    np.testing.assert_allclose(iv["upper"].sel(confidence_level=0.9), ref.ppf(0.95), atol=1e-9)
    np.testing.assert_allclose(pred.calib.mean(), loc)
    np.testing.assert_allclose(pred.calib.std(), scale)
    assert pred.attrs["family"] == "normal"
    assert pred["quantile"].dims == ("obs", "level")


def test_gaussian_quantile_grid_is_exact(gaussian):
    """99 Gaussian quantiles reproduce the exact CDF and log density everywhere.

    The piecewise-Gaussian interpolation is linear in Phi^{-1}(level), so it is
    exact for the Gaussian family: the documented bound is 1e-9 (rounding only),
    inside *and* beyond the level range (the normal tail rule).
    """
    loc, scale, y = gaussian
    exact = calibprob.normal(loc, scale)
    grid = calibprob.from_quantiles(exact["quantile"].values, DEFAULT_LEVELS)
    ref = stats.norm(loc, scale)
    np.testing.assert_allclose(grid.calib.cdf(y), ref.cdf(y), atol=1e-9)
    np.testing.assert_allclose(grid.calib.logpdf(y), ref.logpdf(y), atol=1e-9)
    np.testing.assert_allclose(grid.calib.mean(), loc, atol=1e-9)
    np.testing.assert_allclose(grid.calib.std(), scale, rtol=1e-9)
    np.testing.assert_allclose(grid.calib.ppf([1e-4, 0.3]), ref.ppf(np.array([[1e-4], [0.3]])).T, atol=1e-9)


@pytest.mark.parametrize(
    "dist, cdf_bound, logpdf_bound",
    [(stats.t(df=5), 3e-4, 0.1), (stats.lognorm(s=0.5), 3e-4, 0.08)],
)
def test_non_gaussian_grid_bounds(dist, cdf_bound, logpdf_bound):
    """Documented accuracy with the default 99 levels for non-Gaussian laws.

    Measured over [Q(0.01), Q(0.99)]: Student-t(5) max |dCDF| = 2.3e-4,
    max |dlogpdf| = 0.090 (0.028 over [Q(0.05), Q(0.95)]); lognormal(s=0.5)
    1.7e-4 and 0.069 (0.027). The log-density error concentrates in the
    outermost segments, where the quantile function curves most in z.
    """
    q = dist.ppf(DEFAULT_LEVELS)[None, :]
    y = np.linspace(dist.ppf(0.01), dist.ppf(0.99), 2001)
    cdf = quantile_cdf(np.repeat(q, y.size, 0), DEFAULT_LEVELS, y)
    assert np.max(np.abs(cdf - dist.cdf(y))) < cdf_bound
    lp = quantile_logpdf(np.repeat(q, y.size, 0), DEFAULT_LEVELS, y)
    assert np.max(np.abs(lp - dist.logpdf(y))) < logpdf_bound
    # the quantile function passes through every stored quantile exactly
    np.testing.assert_allclose(quantile_ppf(q, DEFAULT_LEVELS, DEFAULT_LEVELS), q, atol=1e-12)


def test_cdf_and_ppf_are_inverse():
    rng = np.random.default_rng(1)
    q = np.sort(rng.normal(size=(20, 9)), axis=1)
    levels = np.linspace(0.1, 0.9, 9)
    p = np.array([0.01, 0.05, 0.12, 0.5, 0.93, 0.999])
    x = quantile_ppf(q, levels, p)
    np.testing.assert_allclose(quantile_cdf(q, levels, x[:, 2]), 0.12, atol=1e-12)
    back = np.stack([quantile_cdf(q, levels, x[:, j]) for j in range(p.size)], axis=1)
    np.testing.assert_allclose(back, np.broadcast_to(p, back.shape), atol=1e-12)


def test_density_is_cdf_derivative_and_moments_are_exact():
    """logpdf is the derivative of the CDF; mean/std equal numerical integrals."""
    from scipy import integrate

    rng = np.random.default_rng(2)
    q = np.sort(rng.gamma(2.0, size=(3, 15)), axis=1)
    levels = np.linspace(0.05, 0.95, 15)
    y = rng.uniform(-1, 8, size=(3, 400))
    h = 1e-6
    fd = (quantile_cdf(q[:, None, :], levels, y + h) - quantile_cdf(q[:, None, :], levels, y - h)) / (2 * h)
    dens = np.exp(quantile_logpdf(q[:, None, :], levels, y))
    np.testing.assert_allclose(fd, dens, rtol=1e-5, atol=1e-9)
    mean, std = quantile_moments(q, levels)
    for i in range(3):
        pdf = lambda t, i=i: float(np.exp(quantile_logpdf(q[i], levels, t)))  # noqa: E731
        pts = list(q[i])
        lo, hi = q[i, 0] - 40 * std[i], q[i, -1] + 40 * std[i]
        mass = integrate.quad(pdf, lo, hi, points=pts, limit=500)[0]
        m1 = integrate.quad(lambda t: t * pdf(t), lo, hi, points=pts, limit=500)[0]
        m2 = integrate.quad(lambda t: (t - m1) ** 2 * pdf(t), lo, hi, points=pts, limit=500)[0]
        assert abs(mass - 1) < 1e-8
        assert abs(m1 - mean[i]) < 1e-7
        assert abs(np.sqrt(m2) - std[i]) < 1e-7


@pytest.mark.seeded(3)
def test_from_draws_matches_sampled_quantiles(seed, record_property):
    """4000 draws of a skewed law: quantiles within Monte Carlo error of the truth (the draws' seed from the seed
    sweep, 3 in the default run)."""
    rng = np.random.default_rng(seed)
    dist = stats.gamma(a=3.0, scale=2.0)
    draws = xr.DataArray(dist.rvs(size=(4, 1000, 5), random_state=rng), dims=("chain", "draw", "y_dim_0"))
    pred = calibprob.from_draws(draws)
    assert pred.sizes == {"obs": 5, "level": 99}
    p = DEFAULT_LEVELS
    true_q = dist.ppf(p)
    # asymptotic sd of the empirical p-quantile: sqrt(p(1-p)/n)/f(q)
    mc_sd = np.sqrt(p * (1 - p) / 4000) / dist.pdf(true_q)
    err = np.abs(pred["quantile"].values - true_q)
    record_property("quantile_error_sd", float(np.max(err / mc_sd)))
    assert np.all(err < 5 * mc_sd)
    np.testing.assert_allclose(pred.calib.mean(), draws.mean(("chain", "draw")), rtol=1e-12)
    # a plain (n_draws, n_obs) array works too and gives the same answer
    flat = calibprob.from_draws(draws.stack(s=("chain", "draw")).transpose("s", "y_dim_0").values)
    np.testing.assert_allclose(flat["quantile"], pred["quantile"])


def test_from_cdf_grid_inverts_a_known_cdf():
    grid = np.linspace(-10, 10, 4001)
    loc = np.array([0.0, 1.0, -2.0])
    cdf = stats.norm.cdf(grid[None, :], loc[:, None], 1.5)
    pred = calibprob.from_cdf_grid(grid, cdf)
    exact = stats.norm.ppf(DEFAULT_LEVELS[None, :], loc[:, None], 1.5)
    assert np.max(np.abs(pred["quantile"].values - exact)) < 1e-4


def test_crossing_quantiles_are_repaired_with_warning():
    q = np.array([[0.0, 1.0, 0.5], [0.0, 1.0, 2.0]])
    with pytest.warns(CalibprobWarning, match="crossed .* in 1 of 2"):
        pred = calibprob.from_quantiles(q, [0.1, 0.5, 0.9])
    assert np.all(np.diff(pred["quantile"].values, axis=1) >= 0)


@pytest.mark.seeded(4)
def test_sample_follows_the_distribution(seed, record_property):
    """20 000 draws of the stored exponential's quantile function pass a KS test (the sampler's seed from the seed
    sweep, 4 in the default run)."""
    pred = calibprob.from_quantiles(stats.expon.ppf(DEFAULT_LEVELS)[None, :], DEFAULT_LEVELS)
    s = pred.calib.sample(20_000, rng=seed).values[0]
    res = stats.kstest(stats.expon.cdf(np.clip(s, 0, None)), "uniform")
    record_property("ks_pvalue", res.pvalue)
    record_property("ks_statistic", res.statistic)
    assert res.pvalue > 1e-3 or res.statistic < 0.02
    np.testing.assert_array_equal(pred.calib.sample(5, rng=1), pred.calib.sample(5, rng=1))


def test_netcdf_round_trip(tmp_path):
    pred = calibprob.normal([0.0, 1.0], [1.0, 2.0], method="test")
    path = tmp_path / "p.nc"
    pred.to_netcdf(path, engine="h5netcdf")
    back = xr.load_dataset(path, engine="h5netcdf")
    xr.testing.assert_identical(back, pred)
    np.testing.assert_allclose(back.calib.cdf([0.5, 0.5]), pred.calib.cdf([0.5, 0.5]))


def test_validate_accepts_contract_and_rejects_others():
    pred = calibprob.normal([0.0], [1.0])
    assert calibprob.validate(pred) is pred
    with pytest.raises(ValueError, match="'quantile' variable"):
        calibprob.validate(pred.drop_vars("quantile"))
    with pytest.raises(TypeError, match="xarray.Dataset"):
        calibprob.validate(np.zeros(3))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: calibprob.normal([0.0, np.nan], [1.0, 1.0]), "loc must be finite.*NaN"),
        (lambda: calibprob.normal([0.0, 1.0], [1.0, np.inf]), "scale must be finite.*inf"),
        (lambda: calibprob.normal([0.0, 1.0], [1.0]), "mismatched lengths"),
        (lambda: calibprob.normal([0.0], [0.0]), r"scale must be > 0"),
        (lambda: calibprob.normal([0.0], [1.0], levels=[0.0, 0.5]), r"strictly inside \(0, 1\)"),
        (lambda: calibprob.normal([0.0], [1.0], levels=[0.5, 0.2]), "strictly increasing"),
        (lambda: calibprob.normal([0.0], [1.0], levels=[0.5]), "at least 2 levels"),
        (lambda: calibprob.from_quantiles(np.zeros((2, 3)), [0.1, 0.9]), "one column per level"),
        (lambda: calibprob.from_quantiles(np.zeros(3), [0.1, 0.5, 0.9]), "must be 2-D"),
        (lambda: calibprob.normal([0.0], [1.0]).calib.interval(1.5), r"confidence_level must be in \(0, 1\); got 1.5"),
        (lambda: calibprob.normal([0.0], [1.0]).calib.ppf(1.0), r"p must be in \(0, 1\)"),
        (lambda: calibprob.normal([0.0], [1.0]).calib.cdf([1.0, 2.0]), "y has 2 entries.*1 observations"),
        (lambda: calibprob.normal([0.0], [1.0]).calib.cdf([np.nan]), "y must be finite"),
        (lambda: calibprob.from_draws(np.zeros((1, 3))), "at least 2 draws"),
        (
            lambda: calibprob.from_cdf_grid(np.linspace(0, 1, 5), np.full((1, 5), 2.0)),
            r"cdf values must lie in \[0, 1\]",
        ),
    ],
)
def test_bad_input_is_rejected_with_a_clear_message(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_tail_does_not_collapse_on_a_nearly_tied_outer_segment():
    from scipy import stats

    from calibprob.predictive import DEFAULT_LEVELS, quantile_logpdf

    z = stats.norm.ppf(DEFAULT_LEVELS)
    q = z.copy()
    q[0] = q[1] - 1e-4  # the outermost segment nearly flat: a pair rule gives a tail scale ~ 4e-4
    y = np.array([q[0] - 1.0])
    # the chord from 0.01 to 0.09 (about one unit of z) sets the tail scale: here exactly
    # (q[8] - q[0]) / (z[8] - z[0]), and the log density is that Gaussian tail's
    k = int(np.argmin(np.abs(z - (z[0] + 1))))
    s = (q[k] - q[0]) / (z[k] - z[0])
    expected = stats.norm.logpdf(z[0] + (y - q[0]) / s) - np.log(s)
    np.testing.assert_allclose(quantile_logpdf(q[None, :], DEFAULT_LEVELS, y), expected, rtol=1e-12)
    s_pair = (q[1] - q[0]) / (z[1] - z[0])  # the old two-quantile rule: log density ~ -1e7
    pair = stats.norm.logpdf(z[0] + (y - q[0]) / s_pair) - np.log(s_pair)
    assert expected[0] > -10 and pair[0] < -1e6


def test_heavy_tail_keeps_its_outermost_slope():
    from scipy import stats

    from calibprob.predictive import DEFAULT_LEVELS, quantile_cdf

    q = stats.t(3).ppf(DEFAULT_LEVELS)
    z = stats.norm.ppf(DEFAULT_LEVELS)
    y = np.array([q[-1] + 2.0])
    s = (q[-1] - q[-2]) / (z[-1] - z[-2])  # steeper than the one-unit chord for Student-t
    np.testing.assert_allclose(
        quantile_cdf(q[None, :], DEFAULT_LEVELS, y), stats.norm.cdf(z[-1] + (y - q[-1]) / s), rtol=1e-12
    )


def test_quantile_pieces_are_the_quantile_function():
    """a_j + b_j u on the piece holding u is the quantile function (checked against quantile_ppf_zscore),
    the pieces pass through every stored quantile and join continuously at the knots."""
    from calibprob.predictive import quantile_pieces, quantile_ppf_zscore

    rng = np.random.default_rng(7)
    levels = np.array([0.02, 0.1, 0.3, 0.5, 0.8, 0.97])
    q = np.sort(rng.gamma(2.0, size=(5, levels.size)), axis=1)
    a, b, lo, hi = quantile_pieces(q, levels)
    assert a.shape == b.shape == (5, levels.size + 1) and lo.shape == hi.shape == (levels.size + 1,)
    assert np.all(b > 0) and lo[0] == -np.inf and hi[-1] == np.inf
    np.testing.assert_array_equal(lo[1:], hi[:-1])
    u = rng.normal(scale=2.0, size=(5, 40))
    j = np.searchsorted(lo, u, side="right") - 1
    rows = np.arange(5)[:, None]
    np.testing.assert_allclose(a[rows, j] + b[rows, j] * u, quantile_ppf_zscore(q, levels, u), rtol=1e-12, atol=1e-12)
    z = stats.norm.ppf(levels)
    np.testing.assert_allclose(a[:, 1:] + b[:, 1:] * z, q, rtol=1e-12, atol=1e-12)  # left end of pieces 1..L
    np.testing.assert_allclose(a[:, :-1] + b[:, :-1] * z, q, rtol=1e-12, atol=1e-12)  # right end of pieces 0..L-1


def test_is_interval_family_lives_with_the_contract():
    """One predicate, read by calibprob.metrics and calibprob.transforms alike."""
    from calibprob import metrics, predictive, transforms

    assert metrics.is_interval_family is predictive.is_interval_family is transforms.is_interval_family
    pred = calibprob.normal(np.zeros(3), np.ones(3))
    assert not predictive.is_interval_family(pred)
    assert predictive.is_interval_family(pred.calib.interval([0.5]))
    assert not predictive.is_interval_family(np.zeros(3))
