"""Tests of calibprob.calibrators.sharp_gp (Capone, Hirche & Pleiss 2023).

References used as independent checks:

* q_lin (eq. 6) against ``numpy.quantile(method="weibull")`` (the N + 1 convention);
* the compiled PyTensor σ(θ, x) against the GP module's NumPy predictor for the
  same θ, and its gradient against central finite differences;
* Theorem 5.4: held-out coverage of every level within 1/(N+1) of the level up
  to binomial error, at the knots and for the interpolated quantile function;
* the split-conformal identity P(y <= Q(j/(N_B+1))) = j/(N_B+1) for the
  cross-fitted variant (slow, over repetitions);
* a Fig. 2-like toy on which the 99% interval must be narrower than RK's, RV's
  and RM's at matching coverage.

All data are seeded. The compiled graph is built once (module-level cache);
base GPs with fixed hyperparameters avoid compiling their objective.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy import special

from calibprob._core.estimator import NotFittedError
from calibprob.bases.gp import GaussianProcessRegressor, SparseGaussianProcessRegressor, get_compile_mode
from calibprob.calibrators.sharp_gp import (
    SharpCalibratedGP,
    exact_monotone_knots,
    interpolate_knots,
    knot_levels,
    monotone_knots,
    q_lin,
    required_calibration_points,
    sharp_gp_ucb,
)
from calibprob.calibrators.sharp_gp._graph import _compiled, _GraphKey, _placeholder
from calibprob.calibrators.sharp_gp._knots import _phi_from_theta

# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------


def _f(x):
    return np.sin(3.0 * x) * x


def _toy(rng, n):
    """Heteroscedastic 1-D data: the base GP's σ shape is wrong by design."""
    x = rng.uniform(-3, 3, size=(n, 1))
    y = _f(x[:, 0]) + (0.1 + 0.3 * np.abs(x[:, 0])) * rng.normal(size=n)
    return x, y


def _fig2(rng, n, train=False):
    """Fig. 2-like toy: training data with a gap, calibration/test everywhere."""
    if train:
        x = np.concatenate([rng.uniform(-4, -1.2, n // 2), rng.uniform(1.2, 4, n - n // 2)])
    else:
        x = rng.uniform(-4, 4, n)
    x = x[:, None]
    return x, np.sin(2 * x[:, 0]) + 0.3 * x[:, 0] + 0.1 * rng.normal(size=n)


@pytest.fixture(scope="module")
def toy():
    rng = np.random.default_rng(20230)
    Xtr, ytr = _toy(rng, 60)
    Xc, yc = _toy(rng, 200)
    Xt, yt = _toy(rng, 4000)
    gp = GaussianProcessRegressor(random_state=0).fit(Xtr, ytr)
    return {"gp": gp, "Xc": Xc, "yc": yc, "Xt": Xt, "yt": yt}


#: The tests that read the full fit take its seed (the random restarts of the per-level hyperparameter search) from
#: the seed sweep (tests/conftest.py): 1 in the default run, as always; 0..19 under ``make test-seeds``. The toy data
#: and the base GP stay those of seed 20230 and 0. Swept at seeds 0..19 (2026-11-29): every recorded statistic of the
#: full fit is the same at all 20 seeds (knot coverage 0.59 of its tolerance, base gap 2.9x the calibrated one, 95 %
#: of the levels converged): its restarts end at the same optimum. Cross-fitted: 0.62 of its tolerance at worst.
SEEDED = pytest.mark.seeded(1, scope="module")


@pytest.fixture(scope="module")
def full_fit(toy, seed):
    return SharpCalibratedGP(estimator=toy["gp"], random_state=seed).fit(toy["Xc"], toy["yc"])


def _fixed_gp(X, y, **kw):
    theta = {"lengthscale": np.full(X.shape[1], 0.8), "variance": 1.3, "noise": 0.05}
    return GaussianProcessRegressor(theta=theta, optimize=False, **kw).fit(X, y)


# ---------------------------------------------------------------------------
# NumPy layer
# ---------------------------------------------------------------------------


def test_q_lin_is_weibull_quantile():
    rng = np.random.default_rng(1)
    a = rng.normal(size=37)
    n = a.size
    lv = np.linspace(1 / (n + 1), n / (n + 1), 113)
    np.testing.assert_allclose(q_lin(lv, a), np.quantile(a, lv, method="weibull"), atol=1e-12)
    # knots map to order statistics exactly
    j = np.arange(1, n + 1)
    np.testing.assert_allclose(q_lin(j / (n + 1), a), np.sort(a), atol=1e-12)
    assert q_lin(0.5, [3.0, 1.0, 2.0]) == 2.0


def test_knot_levels_and_required_points():
    k = knot_levels(100, 21)
    assert k[0] == pytest.approx(1 / 101) and k[-1] == pytest.approx(100 / 101)
    assert np.all(np.diff(k) > 0) and np.allclose(k * 101, np.round(k * 101))
    assert 15 <= k.size <= 21
    np.testing.assert_allclose(knot_levels(9), np.arange(1, 10) / 10)
    assert required_calibration_points([0.05, 0.95]) == 19
    assert required_calibration_points([0.01, 0.5]) == 99


def test_monotone_knots_widen_and_insert_minimum():
    lv = np.array([0.1, 0.3, 0.6, 0.9])
    beta = np.array([-1.0, -1.2, 0.5, 0.4])  # both sides violate monotonicity
    phi = np.array([[0.0, 0.0], [0.5, -1.0], [-0.2, 0.3], [-0.5, 1.0]])
    nl, nb, nf, rep = monotone_knots(lv, beta, phi)
    assert np.all(np.diff(nb) >= 0)
    # outward widening: the outer β moved away from 0, never toward it
    assert nb[0] == -1.2 and nb[-1] == 0.5
    assert rep.tolist() == [3, 0, 0, 3]
    # a node at β = 0 between the sides, φ the entry-wise minimum of its neighbours
    z = int(np.flatnonzero(nb == 0)[0])
    assert lv[1] < nl[z] < lv[2]
    np.testing.assert_allclose(nf[z], np.minimum(nf[z - 1], nf[z + 1]))
    # φ non-increasing on the negative side, non-decreasing on the positive side
    assert np.all(np.diff(nf[: z + 1], axis=0) <= 0) and np.all(np.diff(nf[z:], axis=0) >= 0)


def test_exact_monotone_knots_moves_phi_and_keeps_every_knot_exact():
    """The repair after β is recomputed: monotone β and φ, and still exactly j points below knot j/(N+1).

    Independent check: the counts of residuals under β σ(φ) at the returned φ (brute force), a σ family
    increasing in every φ entry (Assumption 4.1), and knots whose φ makes |β| grow inward on both sides."""
    rng = np.random.default_rng(3)
    n = 60
    x = rng.uniform(0.5, 2.0, n)
    r = x * rng.normal(size=n)

    def sigma(phi):
        return np.exp(phi[0]) + np.exp(phi[1]) * x**2

    j = np.array([3, 12, 20, 40, 48, 57])
    lv = j / (n + 1)
    # outer knots wide, inner ones much narrower: |β| grows toward the median on both sides
    phi = np.array([[1.0, 1.0], [-1.0, -2.0], [-1.5, -3.0], [-1.5, -3.0], [-1.0, -2.0], [1.0, 1.0]])
    before = np.array([q_lin(level, r / sigma(ph)) for level, ph in zip(lv, phi)])
    assert before[1] < before[0] and before[-2] > before[-1]  # the case the repair is for
    f, b, sig, moved = exact_monotone_knots(lv, phi, r, sigma)
    assert moved.any() and not moved[0] and not moved[-1]  # a pass's outermost knot never moves
    assert np.all(np.diff(b) >= 0)
    np.testing.assert_array_equal(f[~moved], phi[~moved])
    lower, upper = b < 0, b >= 0
    assert np.all(np.diff(f[lower], axis=0) <= 0) and np.all(np.diff(f[upper], axis=0) >= 0)
    for level, jj, ph, beta, s in zip(lv, j, f, b, sig):
        np.testing.assert_allclose(s, sigma(ph), rtol=1e-15)
        assert beta == pytest.approx(q_lin(level, r / sigma(ph)), rel=1e-12)
        q = beta * sigma(ph)
        assert int(np.sum(r <= q + 1e-12 * np.abs(q))) == jj  # the j-th point itself sits on its quantile
    # nothing to repair: nothing moves
    f2, b2, _, moved2 = exact_monotone_knots(lv, f, r, sigma)
    assert not moved2.any()
    np.testing.assert_array_equal(f2, f)
    np.testing.assert_array_equal(b2, b)


def test_interpolate_knots_linear_in_probit_and_tails():
    lv = np.array([0.1, 0.5, 0.9])
    beta = special.ndtri(lv) * 2.0  # Gaussian z-scores: interpolation is exact
    phi = np.array([[1.0], [0.0], [1.0]])
    grid = np.array([0.001, 0.05, 0.3, 0.7, 0.999])
    b, f = interpolate_knots(lv, beta, phi, grid)
    np.testing.assert_allclose(b, 2.0 * special.ndtri(grid), atol=1e-12)
    assert f[0, 0] == 1.0 and f[-1, 0] == 1.0  # constant beyond the outer knots
    with pytest.raises(ValueError, match="single level"):
        interpolate_knots(lv[:1], beta[:1], phi[:1], [0.2, 0.3])


# ---------------------------------------------------------------------------
# The compiled PyMC model
# ---------------------------------------------------------------------------


def _entry(kernel="se", p=0):
    mode = get_compile_mode()
    return _compiled(_GraphKey("exact", kernel, p, mode if isinstance(mode, (str, type(None))) else id(mode)))


@pytest.mark.parametrize(
    "mean,noise,include_noise,kernel,p",
    [
        ("zero", True, True, "se", 2),
        ("constant", True, False, "se", 2),
        ("zero", False, True, "se", 2),
        ("zero", True, True, "matern", 0),
        ("constant", True, True, "matern", 1),
        ("zero", True, False, "matern", 2),
    ],
)
def test_graph_sigma_matches_gp_and_gradient(mean, noise, include_noise, kernel, p):
    rng = np.random.default_rng(7)
    X, y = rng.normal(size=(25, 2)), rng.normal(size=25)
    Xc, rc = rng.normal(size=(15, 2)), rng.normal(size=15)
    gp = _fixed_gp(X, y, mean=mean, noise=noise, kernel=kernel, p=p)
    theta = {"lengthscale": np.array([0.5, 2.0]), "variance": 0.7, "noise": 0.02}
    theta_full = gp._theta_for(theta)  # noise = nugget * variance when noise=False
    phi = _phi_from_theta(theta_full, 2)
    entry = _entry(kernel, p if kernel == "matern" else 0)
    tied = 0.0 if noise else gp.nugget
    with entry.lock:
        entry.set_data(
            {
                "X_train": X,
                "X_cal": Xc,
                "residual": rc,
                "level": np.asarray(0.8),
                "phi_ref": phi,
                "anchor": phi,
                "free": np.array([1.0, 1.0, 1.0, float(noise)]),
                "constrained": np.asarray(0.0),
                "include_noise": np.asarray(float(include_noise)),
                "noise_tied": np.asarray(tied),
                "constant_mean": np.asarray(float(mean == "constant")),
                "prior_sd": np.asarray(3.0),
            }
        )
        try:
            lp, g, beta, sharp, sigma, phi_out = entry(phi)
            _, sd = gp.predict_mean_std(Xc, theta=theta, include_noise=include_noise)
            np.testing.assert_allclose(sigma, sd, rtol=1e-7)
            np.testing.assert_allclose(phi_out, phi)
            assert beta == pytest.approx(q_lin(0.8, rc / sd), rel=1e-8)
            assert sharp == pytest.approx(np.mean((beta * sd) ** 2), rel=1e-8)
            # gradient by central differences (away from a sort switch: small step)
            eps = 1e-6
            fd = np.array([(entry(phi + eps * e)[0] - entry(phi - eps * e)[0]) / (2 * eps) for e in np.eye(phi.size)])
            # (the interpolating base is ill-conditioned: FD error ~1e-5 of the gradient's scale)
            np.testing.assert_allclose(g, fd, rtol=1e-4, atol=1e-4 * np.abs(g).max())
            # Remark 5.3's constrained mode: φ = anchor - exp(u)
            entry.set_data({"constrained": np.asarray(1.0), "anchor": phi + 1.0})
            np.testing.assert_allclose(entry(np.zeros(phi.size))[5], phi)
            assert entry(np.full(phi.size, np.log(0.5)))[5][0] == pytest.approx(phi[0] + 0.5)
        finally:
            entry.set_data(_placeholder("exact"))


def test_graph_sigma_sparse_vfe():
    rng = np.random.default_rng(8)
    X, y = rng.uniform(-2, 2, size=(120, 2)), rng.normal(size=120)
    Xc = rng.uniform(-2, 2, size=(10, 2))
    theta = {"lengthscale": np.array([0.9, 1.4]), "variance": 1.1, "noise": 0.1}
    sgp = SparseGaussianProcessRegressor(n_inducing=15, theta=theta, optimize=False, random_state=0).fit(X, y)
    new = {"lengthscale": np.array([0.4, 3.0]), "variance": 0.6, "noise": 0.05}
    phi = _phi_from_theta(new, 2)
    mode = get_compile_mode()
    entry = _compiled(_GraphKey("vfe", "se", 0, mode if isinstance(mode, (str, type(None))) else id(mode)))
    with entry.lock:
        entry.set_data(
            {
                "X_train": X,
                "X_cal": Xc,
                "residual": rng.normal(size=10),
                "level": np.asarray(0.5),
                "phi_ref": phi,
                "anchor": phi,
                "free": np.ones(4),
                "constrained": np.asarray(0.0),
                "include_noise": np.asarray(1.0),
                "noise_tied": np.asarray(0.0),
                "constant_mean": np.asarray(0.0),
                "prior_sd": np.asarray(3.0),
                "Z": sgp.inducing_points_,
                "jitter": np.asarray(sgp.jitter),
            }
        )
        try:
            sigma = entry(phi)[4]
        finally:
            entry.set_data(_placeholder("vfe"))
    _, sd = sgp.predict_mean_std(Xc, theta=new)
    np.testing.assert_allclose(sigma, sd, rtol=1e-6)


# ---------------------------------------------------------------------------
# Algorithm 1 on the toy: Theorem 5.4, monotonicity, output contract
# ---------------------------------------------------------------------------


def _coverage_tolerance(levels, n_cal, n_test, k=3.0):
    levels = np.asarray(levels)
    sd = np.sqrt(levels * (1 - levels) * (1.0 / n_cal + 1.0 / n_test))
    return 1.0 / (n_cal + 1) + k * sd


@SEEDED
def test_theorem_5_4_coverage_knots_and_interpolated(toy, full_fit, record_property):
    yt = toy["yt"]
    n_cal = full_fit.n_calibration_
    # knots: exact on the calibration set, within the theorem's band on held-out data
    knots = full_fit.knot_level_
    np.testing.assert_allclose(full_fit.diagnostics_["coverage"].values, knots * (n_cal + 1) / n_cal, atol=1.5 / n_cal)
    qk = full_fit.quantile(toy["Xt"], knots)
    cov = np.mean(yt[:, None] <= qk, axis=0)
    record_property(
        "knot_gap_over_tolerance", float(np.max(np.abs(cov - knots) / _coverage_tolerance(knots, n_cal, yt.size)))
    )
    assert np.all(np.abs(cov - knots) <= _coverage_tolerance(knots, n_cal, yt.size))
    # the interpolated quantile function at levels that are not knots
    lv = np.array([0.02, 0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 0.93, 0.98])
    q = full_fit.quantile(toy["Xt"], lv)
    cov = np.mean(yt[:, None] <= q, axis=0)
    record_property(
        "level_gap_over_tolerance", float(np.max(np.abs(cov - lv) / _coverage_tolerance(lv, n_cal, yt.size)))
    )
    assert np.all(np.abs(cov - lv) <= _coverage_tolerance(lv, n_cal, yt.size))
    # the base GP is miscalibrated on this toy (what the calibration repairs)
    mu, sd = toy["gp"].predict_mean_std(toy["Xt"])
    base_cov = np.mean(yt[:, None] <= mu[:, None] + sd[:, None] * special.ndtri(lv), axis=0)
    record_property("base_gap_over_calibrated_gap", float(np.max(np.abs(base_cov - lv)) / np.max(np.abs(cov - lv))))
    assert np.max(np.abs(base_cov - lv)) > 2 * np.max(np.abs(cov - lv))


@SEEDED
def test_quantiles_never_cross_and_monotone_structure(toy, full_fit):
    lv = np.linspace(0.001, 0.999, 301)
    q = full_fit.quantile(toy["Xt"][:500], lv)
    assert np.all(np.diff(q, axis=1) >= 0)
    assert full_fit._last_crossing == 0  # Assumption 4.1 held: nothing was repaired
    beta = full_fit.calibration_beta(lv)
    assert np.all(np.diff(beta) >= 0)
    nb, nf = full_fit.nodes_beta_, full_fit.nodes_log_theta_
    neg, pos = nb < 0, nb > 0
    assert np.all(np.diff(nf[neg], axis=0) <= 1e-12)  # σ shrinks toward the median ...
    assert np.all(np.diff(nf[pos], axis=0) >= -1e-12)  # ... and grows again above it
    # θ̂ has its minimum where β̂ = 0
    z = np.flatnonzero(nb == 0)
    assert z.size == 1
    assert np.all(nf[z[0]] <= nf.min(axis=0) + 1e-12)
    assert not full_fit.diagnostics_["repaired"].any()


@SEEDED
def test_predict_contract_diagnostics_and_roundtrip(tmp_path, toy, full_fit, record_property):
    pred = full_fit.predict(toy["Xt"][:50], levels=[0.05, 0.25, 0.5, 0.75, 0.95])
    assert isinstance(pred, xr.Dataset)  # the contract; the diagnostics live in diagnostics_
    assert pred["quantile"].dims == ("obs", "level") and pred.sizes["obs"] == 50
    assert pred.attrs["method"] == "sharp-gp/full" and pred.attrs["crossing_repaired"] == 0
    tree = xr.DataTree.from_dict({"predictions": pred, "calibration": full_fit.diagnostics_})
    cal = tree["calibration"].dataset
    for var in ("beta", "lengthscale", "variance", "objective", "coverage", "converged", "node_log_theta"):
        assert var in cal
    record_property("share_converged", float(cal["converged"].values.mean()))
    assert cal["converged"].values.mean() >= 0.8
    path = tmp_path / "sharp.nc"
    tree.to_netcdf(path)
    back = xr.open_datatree(path)
    xr.testing.assert_allclose(back["predictions"].to_dataset(), pred)
    np.testing.assert_array_equal(back["calibration"]["converged"].values, cal["converged"].values)
    back.close()
    # default levels and the accessor work on the output
    ds = full_fit.predict_distribution(toy["Xt"][:5])  # the former name, an alias
    xr.testing.assert_identical(ds, full_fit.predict(toy["Xt"][:5]))
    assert ds.sizes["level"] == 99
    assert np.all(np.isfinite(ds.calib.logpdf(toy["yt"][:5]).values))


@SEEDED
def test_ucb_is_the_calibrated_upper_quantile(toy, full_fit):
    X = toy["Xt"][:20]
    u = sharp_gp_ucb(full_fit, X, level=0.99)
    np.testing.assert_allclose(u, full_fit.quantile(X, [0.5, 0.99])[:, 1])
    assert np.all(u > full_fit.quantile(X, 0.5))


def test_fit_is_deterministic_under_seed(toy):
    fits = [
        SharpCalibratedGP(estimator=toy["gp"], n_levels=4, n_restarts=3, random_state=5).fit(toy["Xc"], toy["yc"])
        for _ in range(2)
    ]
    np.testing.assert_array_equal(fits[0].nodes_beta_, fits[1].nodes_beta_)
    np.testing.assert_array_equal(fits[0].nodes_log_theta_, fits[1].nodes_log_theta_)


# ---------------------------------------------------------------------------
# Variants
# ---------------------------------------------------------------------------


@SEEDED
def test_scaled_variant_is_a_one_factor_family(toy, full_fit, record_property):
    s = SharpCalibratedGP(estimator=toy["gp"], variant="scaled").fit(toy["Xc"], toy["yc"])
    th = toy["gp"].theta_
    np.testing.assert_allclose(s.knot_variance_, th["variance"])
    np.testing.assert_allclose(s.knot_noise_, th["noise"])
    yt = toy["yt"]
    q = s.quantile(toy["Xt"], s.knot_level_)
    cov = np.mean(yt[:, None] <= q, axis=0)
    assert np.all(np.abs(cov - s.knot_level_) <= _coverage_tolerance(s.knot_level_, 200, yt.size))
    # the full variant searches a superset (and starts from the line search): no worse
    record_property(
        "full_over_scaled_objective",
        float(np.mean(full_fit.diagnostics_["objective"]) / np.mean(s.diagnostics_["objective"])),
    )
    assert np.mean(full_fit.diagnostics_["objective"]) <= np.mean(s.diagnostics_["objective"]) * 1.02


@pytest.mark.seeded(3)
def test_cross_fitted_variant(toy, seed, record_property):
    s = SharpCalibratedGP(estimator=toy["gp"], variant="cross-fitted", n_levels=11, random_state=seed).fit(
        toy["Xc"], toy["yc"]
    )
    assert s.n_calibration_ == 100 and s.diagnostics_.attrs["n_fit"] == 100
    k = s.knot_level_
    np.testing.assert_allclose(k * 101, np.round(k * 101))  # knots j/(N_B + 1)
    # j of the N_B points that set β at or below the knot j/(N_B + 1), at knots the repair moved too
    np.testing.assert_allclose(s.diagnostics_["coverage"].values, k * 101 / 100, atol=1.5 / 100)
    # swept at seeds 0..19 (2026-11-29): the repair moved one knot at seeds 2, 9, 17; exact at every knot
    record_property("knots_moved", int(np.sum(s.diagnostics_["repaired"].values & 4 > 0)))
    yt = toy["yt"]
    q = s.quantile(toy["Xt"], k)
    assert np.all(np.diff(s.quantile(toy["Xt"][:300], np.linspace(0.01, 0.99, 99)), axis=1) >= 0)
    cov = np.mean(yt[:, None] <= q, axis=0)
    record_property(
        "knot_gap_over_tolerance", float(np.max(np.abs(cov - k) / _coverage_tolerance(k, 100, yt.size, k=3.5)))
    )
    assert np.all(np.abs(cov - k) <= _coverage_tolerance(k, 100, yt.size, k=3.5))


def test_value_only_function_matches_the_gradient_function():
    """The value-only compiled function (line searches, backtracking) = the L-BFGS-B one without its gradient."""
    rng = np.random.default_rng(9)
    X, y = rng.normal(size=(30, 2)), rng.normal(size=30)
    gp = _fixed_gp(X, y, mean="constant")
    Xc, rc = rng.normal(size=(20, 2)), rng.normal(size=20)
    phi = _phi_from_theta(gp.theta_, 2)
    entry = _entry()
    with entry.lock:
        entry.set_data(
            {
                "X_train": X,
                "X_cal": Xc,
                "residual": rc,
                "level": np.asarray(0.3),
                "phi_ref": phi,
                "anchor": phi,
                "free": np.ones(4),
                "constrained": np.asarray(0.0),
                "include_noise": np.asarray(1.0),
                "noise_tied": np.asarray(0.0),
                "constant_mean": np.asarray(1.0),
                "prior_sd": np.asarray(3.0),
            }
        )
        try:
            for u in (phi, phi + 0.3, phi - rng.normal(size=4)):
                lp, _, beta, sharp, sigma, phi_out = entry(u)
                lp_v, beta_v, sharp_v, sigma_v, phi_v = entry.values(u)
                assert (lp_v, beta_v, sharp_v) == pytest.approx((lp, beta, sharp), rel=1e-12)
                np.testing.assert_allclose(sigma_v, sigma, rtol=1e-12)
                np.testing.assert_array_equal(phi_v, phi_out)
        finally:
            entry.set_data(_placeholder("exact"))


@pytest.mark.seeded(2)
def test_calibration_subset_fits_theta_on_part_and_beta_on_all(toy, seed, record_property):
    """n_cal_subset: θ on a subset, β on all N points (exact calibration-set coverage at the knots).

    β recomputed on all 200 points need not shrink toward the median: the repair then moves φ toward the
    outer knot's (exact_monotone_knots), so every knot keeps exactly k (N + 1) of the N points. Swept at seeds
    0..19 (2026-11-29): the repair moved one knot at 5 of 20 seeds (2, 11, 16, 17, 19); calibration coverage
    exact at every knot of every seed, held-out knot gap 0.59 of its tolerance at worst. The former repair
    widened β instead and left the moved knot off by up to 4 / N (0.08 for 0.10 at seeds 11, 16, 17, 19)."""
    s = SharpCalibratedGP(estimator=toy["gp"], n_cal_subset=80, n_levels=9, random_state=seed)
    s.fit(toy["Xc"], toy["yc"])
    n = 200
    assert s.diagnostics_.attrs["n_fit"] == 80 and s.n_calibration_ == n
    k = s.knot_level_
    np.testing.assert_allclose(k * (n + 1), np.round(k * (n + 1)))  # knots j/(N+1) of all N
    record_property("knots_moved", int(np.sum(s.diagnostics_["repaired"].values & 4 > 0)))
    # j of the N points at or below the knot j/(N+1); 1.5 / N leaves room only for the rounding of z_(j) σ
    # against r_(j) at the point that sets β (the widening repair was 4 / N off)
    np.testing.assert_allclose(s.diagnostics_["coverage"].values, k * (n + 1) / n, atol=1.5 / n)
    assert np.all(np.diff(s.knot_beta_) >= 0)
    yt = toy["yt"]
    cov = np.mean(yt[:, None] <= s.quantile(toy["Xt"], k), axis=0)
    record_property("knot_gap_over_tolerance", float(np.max(np.abs(cov - k) / _coverage_tolerance(k, n, yt.size))))
    assert np.all(np.abs(cov - k) <= _coverage_tolerance(k, n, yt.size))
    assert np.all(np.diff(s.quantile(toy["Xt"][:300], np.linspace(0.01, 0.99, 99)), axis=1) >= 0)
    # the default (1000) leaves N = 200 alone: the same fit as n_cal_subset=None
    a = SharpCalibratedGP(estimator=toy["gp"], n_levels=4, random_state=5).fit(toy["Xc"], toy["yc"])
    b = SharpCalibratedGP(estimator=toy["gp"], n_levels=4, n_cal_subset=None, random_state=5).fit(toy["Xc"], toy["yc"])
    np.testing.assert_array_equal(a.nodes_beta_, b.nodes_beta_)
    np.testing.assert_array_equal(a.nodes_log_theta_, b.nodes_log_theta_)


@SEEDED
def test_quantile_interpolation_between_nodes(toy, full_fit, seed):
    """interpolate="quantile": equal at the nodes, linear in Φ⁻¹(δ) between them, monotone, calibrated."""
    fast = SharpCalibratedGP(estimator=toy["gp"], random_state=seed, interpolate="quantile").fit(toy["Xc"], toy["yc"])
    np.testing.assert_array_equal(fast.nodes_log_theta_, full_fit.nodes_log_theta_)  # same fit
    X = toy["Xt"][:400]
    nodes = full_fit.nodes_level_
    np.testing.assert_allclose(fast.quantile(X, nodes), full_fit.quantile(X, nodes), rtol=1e-12, atol=1e-12)
    # halfway between two nodes in Φ⁻¹: the mean of the two node quantiles
    z = special.ndtri(nodes[3:5])
    mid = special.ndtr(z.mean())
    q3, q4 = full_fit.quantile(X, nodes[3]), full_fit.quantile(X, nodes[4])
    np.testing.assert_allclose(fast.quantile(X, mid), 0.5 * (q3 + q4), rtol=1e-9, atol=1e-12)
    # the tails follow the "theta" rule (σ of the outer node, β extrapolated)
    tails = [0.001, 0.999]
    np.testing.assert_allclose(fast.quantile(X, tails), full_fit.quantile(X, tails), rtol=1e-12, atol=1e-12)
    lv = np.linspace(0.001, 0.999, 301)
    q = fast.quantile(X, lv)
    assert np.all(np.diff(q, axis=1) >= 0) and fast._last_crossing == 0
    lv = np.array([0.02, 0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 0.93, 0.98])
    cov = np.mean(toy["yt"][:, None] <= fast.quantile(toy["Xt"], lv), axis=0)
    assert np.all(np.abs(cov - lv) <= _coverage_tolerance(lv, 200, toy["yt"].size))


def test_train_subset_recomputes_beta_on_all_training_data(toy):
    s = SharpCalibratedGP(estimator=toy["gp"], n_train_subset=30, n_levels=5, random_state=0).fit(toy["Xc"], toy["yc"])
    assert s.diagnostics_.attrs["train_subset"] == 1
    # β is exact for the posterior on all 60 training points at every knot
    n = 200
    np.testing.assert_allclose(s.diagnostics_["coverage"].values, s.knot_level_ * (n + 1) / n, atol=1.5 / n)


def test_sparse_base(toy):
    rng = np.random.default_rng(11)
    X, y = _toy(rng, 400)
    theta = dict(toy["gp"].theta_)
    sgp = SparseGaussianProcessRegressor(n_inducing=20, theta=theta, optimize=False, random_state=0).fit(
        X[:200], y[:200]
    )
    s = SharpCalibratedGP(estimator=sgp, n_levels=5, random_state=0).fit(X[200:], y[200:])
    assert s.diagnostics_.attrs["train_subset"] == 0  # n <= 500: the VFE graph itself
    np.testing.assert_allclose(s.diagnostics_["coverage"].values, s.knot_level_ * 201 / 200, atol=1.5 / 200)
    assert np.all(np.diff(s.quantile(toy["Xt"][:100], [0.1, 0.5, 0.9]), axis=1) >= 0)


def test_run_sharp_gp_task_context(toy):
    from calibprob.compare.methods import TaskContext

    ctx = TaskContext(
        X_train=toy["gp"].X_train_,
        y_train=toy["gp"].y_train_,
        X_cal=toy["Xc"],
        y_cal=toy["yc"],
        X_test=toy["Xt"][:40],
        base=toy["gp"],
        base_spec={"kind": "gp"},
        levels=np.array([0.05, 0.5, 0.95]),
        seed=4,
    )
    from calibprob.compare.methods import METHOD_KINDS

    ds = METHOD_KINDS["sharp-gp"].func(ctx, variant="scaled", n_levels=9)
    assert ds.sizes == {"obs": 40, "level": 3}
    assert ds.attrs["method"] == "sharp-gp/scaled"


# ---------------------------------------------------------------------------
# Fig. 2-like toy: sharper than RK, RV, RM at matching coverage
# ---------------------------------------------------------------------------


def _fig2_widths(seed):
    from calibprob.calibrators.recalibration import (
        IsotonicRecalibrator,
        MarxRecalibrator,
        VovkRecalibrator,
    )

    rng = np.random.default_rng(seed)
    Xtr, ytr = _fig2(rng, 30, train=True)
    Xc, yc = _fig2(rng, 300)
    Xt, yt = _fig2(rng, 4000)
    gp = GaussianProcessRegressor(random_state=0).fit(Xtr, ytr)
    lv = np.array([0.005, 0.995])
    out = {}
    sharp = SharpCalibratedGP(estimator=gp, random_state=0).fit(Xc, yc)
    out["sharp"] = sharp.quantile(Xt, lv)
    pc, pt_ = gp.predict(Xc, levels=lv), gp.predict(Xt, levels=lv)
    for name, cal in (
        ("RK", IsotonicRecalibrator()),
        ("RV", VovkRecalibrator(random_state=0)),
        ("RM", MarxRecalibrator()),
    ):
        out[name] = cal.fit(pc, yc).predict(pt_).calib.quantiles
    return {
        k: (float(np.mean(q[:, 1] - q[:, 0])), float(np.mean((yt >= q[:, 0]) & (yt <= q[:, 1]))))
        for k, q in out.items()
    }


@pytest.mark.seeded(0)
def test_fig2_toy_sharper_than_recalibration_baselines(seed, record_property):
    res = _fig2_widths(seed)
    w, c = res["sharp"]
    record_property("sharp_coverage_gap", abs(c - 0.99))
    record_property("baseline_coverage_gap", max(abs(res[k][1] - 0.99) for k in ("RK", "RV", "RM")))
    for name in ("RK", "RV", "RM"):
        record_property(f"width_ratio_{name}", w / res[name][0])
    # measured (seed 0): sharp 0.71 @ 0.982, RK 1.07 @ 0.973, RV 1.07 @ 0.975, RM 1.13 @ 0.986. Swept at seeds
    # 0..19 of the toy's draw (2026-11-29): coverage 0.0135 from 0.99 at worst (sharp) and 0.0168 (baselines);
    # the sharp interval 0.73 of RK's and RV's width at most (0.8), but only below RM's own width: 0.8 of it broke
    # at 8 of 20 draws (ratio up to 0.962). RM's constant offset suits this toy's constant noise away from the gap.
    assert abs(c - 0.99) <= 0.015  # matching coverage: same binomial band as the baselines
    for name, most in (("RK", 0.8), ("RV", 0.8), ("RM", 1.0)):
        wb, cb = res[name]
        assert abs(cb - 0.99) <= 0.02
        assert w < most * wb, (name, res)


@pytest.mark.slow
def test_fig2_toy_sharper_on_average_over_seeds():
    runs = [_fig2_widths(s) for s in range(8)]
    mean = {k: np.mean([r[k][0] for r in runs]) for k in runs[0]}
    cov = {k: np.mean([r[k][1] for r in runs]) for k in runs[0]}
    assert abs(cov["sharp"] - 0.99) <= 0.006
    for name in ("RK", "RV", "RM"):
        assert abs(cov[name] - 0.99) <= 0.006
        assert mean["sharp"] < 0.85 * mean[name], (mean, cov)


# ---------------------------------------------------------------------------
# Theorem 5.4 over repetitions (slow)
# ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("variant,levels", [("full", "all"), ("cross-fitted", None)])
def test_theorem_5_4_marginal_over_repetitions(variant, levels):
    """Average held-out coverage over repetitions: within 1/(N+1) of δ (+ 3 standard errors).

    With ``levels="all"`` every j/(N+1) is a knot (the theorem's setting); the
    cross-fitted variant's knots have exact marginal coverage j/(N_B+1).
    """
    reps, n_cal, n_test = 20, 60, 1000
    lv = np.array([0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.95])
    covs = []
    for rep in range(reps):
        rng = np.random.default_rng(1000 + rep)
        Xtr, ytr = _toy(rng, 40)
        Xc, yc = _toy(rng, n_cal)
        Xt, yt = _toy(rng, n_test)
        gp = _fixed_gp(Xtr, ytr)
        s = SharpCalibratedGP(estimator=gp, variant=variant, levels=levels, n_restarts=2, random_state=rep).fit(Xc, yc)
        covs.append(np.mean(yt[:, None] <= s.quantile(Xt, lv), axis=0))
    covs = np.array(covs)
    n_b = n_cal if variant == "full" else n_cal // 2
    se = covs.std(axis=0, ddof=1) / np.sqrt(reps)
    assert np.all(np.abs(covs.mean(axis=0) - lv) <= 1.0 / (n_b + 1) + 3 * se + 1e-3), covs.mean(axis=0)


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


def test_bad_input(toy):
    gp, Xc, yc = toy["gp"], toy["Xc"], toy["yc"]
    with pytest.raises(ValueError, match=r"levels must lie strictly inside \(0, 1\)"):
        SharpCalibratedGP(estimator=gp, levels=[0.0, 0.5]).fit(Xc, yc)
    with pytest.raises(ValueError, match=r"levels must lie strictly inside \(0, 1\)"):
        SharpCalibratedGP(estimator=gp, levels=[0.5, 1.2]).fit(Xc, yc)
    with pytest.raises(ValueError, match=r"need N >= 99 calibration points; got N = 50"):
        SharpCalibratedGP(estimator=gp, levels=[0.01, 0.5, 0.99]).fit(Xc[:50], yc[:50])
    with pytest.raises(ValueError, match=r"cross-fitted variant sets β with 25"):
        SharpCalibratedGP(estimator=gp, variant="cross-fitted", levels=[0.02, 0.98]).fit(Xc[:50], yc[:50])
    with pytest.raises(NotFittedError, match=r"GaussianProcessRegressor instance is not fitted yet"):
        SharpCalibratedGP(estimator=GaussianProcessRegressor()).fit(Xc, yc)
    with pytest.raises(ValueError, match="estimator must be a fitted"):
        SharpCalibratedGP().fit(Xc, yc)
    # the two families refuse each other's inputs, naming the fix
    with pytest.raises(TypeError, match="model-aware calibrator: X_cal must be the model's inputs"):
        SharpCalibratedGP(estimator=gp).fit(gp.predict(Xc), yc)
    with pytest.raises(TypeError, match="estimator is a predictive Dataset"):
        SharpCalibratedGP(estimator=gp.predict(Xc)).fit(Xc, yc)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'base'"):  # removed in 0.2.0
        SharpCalibratedGP(base=gp, variant="scaled", n_levels=3)
    y_nan = yc.copy()
    y_nan[3] = np.nan
    with pytest.raises(ValueError, match=r"y_cal must be finite.*index 3"):
        SharpCalibratedGP(estimator=gp).fit(Xc, y_nan)
    X_nan = Xc.copy()
    X_nan[5, 0] = np.nan
    with pytest.raises(ValueError, match="X_cal must be finite"):
        SharpCalibratedGP(estimator=gp).fit(X_nan, yc)
    with pytest.raises(ValueError, match="mismatched lengths"):
        SharpCalibratedGP(estimator=gp).fit(Xc, yc[:-1])
    with pytest.raises(ValueError, match="X_cal has 2 features but the base GP was fitted with 1"):
        SharpCalibratedGP(estimator=gp).fit(np.hstack([Xc, Xc]), yc)
    with pytest.raises(ValueError, match="variant must be one of"):
        SharpCalibratedGP(estimator=gp, variant="fast").fit(Xc, yc)
    with pytest.raises(ValueError, match="interpolate must be one of"):
        SharpCalibratedGP(estimator=gp, interpolate="sigma").fit(Xc, yc)
    with pytest.raises(ValueError, match="n_cal_subset"):
        SharpCalibratedGP(estimator=gp, n_cal_subset=1).fit(Xc, yc)
    with pytest.raises(ValueError, match=r"fit_fraction must be in \(0, 1\)"):
        SharpCalibratedGP(estimator=gp, variant="cross-fitted", fit_fraction=1.0).fit(Xc, yc)
    with pytest.raises(NotFittedError, match=r"Call fit"):
        SharpCalibratedGP(estimator=gp).predict(Xc)
    with pytest.raises(TypeError, match="needs σ"):
        SharpCalibratedGP(estimator=object()).fit(Xc, yc)


@pytest.mark.parametrize(
    ("levels", "phi", "residual", "match"),
    [
        ([0.2, 0.1], [[0.0], [0.0]], [0.1, -0.2], r"levels must be strictly increasing knot levels inside \(0, 1\)"),
        ([0.2, 1.0], [[0.0], [0.0]], [0.1, -0.2], r"levels must be strictly increasing"),
        ([0.2, 0.8], [[0.0]], [0.1, -0.2], r"phi must hold one finite row .* shape \(2, P\); got shape \(1, 1\)"),
        ([0.2, 0.8], [[0.0], [np.nan]], [0.1, -0.2], r"phi must hold .* with NaN or inf"),
        ([0.2, 0.8], [[0.0], [0.0]], [0.1, np.nan], r"residual must be a 1-D array of finite residuals.*impute"),
    ],
)
def test_exact_monotone_knots_rejects_bad_input(levels, phi, residual, match):
    with pytest.raises(ValueError, match=match):
        exact_monotone_knots(levels, phi, residual, lambda ph: np.ones(len(residual)))


def test_exact_monotone_knots_rejects_a_sig_of_the_wrong_shape():
    with pytest.raises(ValueError, match=r"sig must be sigma at each knot's phi, shape \(K, N\) = \(2, 3\)"):
        exact_monotone_knots([0.2, 0.8], [[0.0], [0.0]], [0.1, -0.2, 0.3], lambda ph: np.ones(3), sig=np.ones((2, 2)))
