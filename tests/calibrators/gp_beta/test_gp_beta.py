"""GP-Beta distribution calibration (Song et al. 2019), checked against closed forms and the paper.

Default tests compile one PyTensor graph (the full-batch mean-field ADVI step for
16 inducing points, rank 1; C backend), shared through module-scoped fixtures:
~70 s on an empty PyTensor cache, ~20 s warm. MAP, NUTS, minibatch, full-rank
ADVI, learned inducing points and rank 0 are in ``@pytest.mark.slow`` tests.

Measured figures (ADVI, 16 inducing points):

* identity recovery (``identity_fit``: calibrated heteroscedastic base, n = 400,
  2000 held-out points): sup over points and p of |posterior-mean map(p) - p| = 0.042,
  sup |calibrated CDF - base CDF| at the held-out targets = 0.042, held-out NLL
  1.2352 vs the base's 1.2307 (+0.0044);
* Fig. 1 bimodal set (``fig1``: 360 training, 2000 held-out points, sqrt(2) read
  as the noise standard deviation): NLL OLS base 3.093, isotonic (RK) 3.204,
  GP-Beta 2.802 (exact posterior-average density 2.801); the brute-force best Beta link
  for the true mixture at x = 40 is unimodal (a = 0.47, b = 0.49), so no correct fit of
  the model gives the bimodal density of the paper's figure there; GP-Beta's density is
  0.005-0.049 nats (ADVI) and <= 0.014 nats (MAP) above that optimum at x = 10..40;
* NUTS, 200 points, 8 inducing, 2 x 1000 draws after 2000 tuning steps, seed 4 (slow test): max
  r-hat 1.0031, 7 divergences (PyTensor 3.3.8; with earlier libraries at tune 1000: 1.008, 3 divergences,
  elpd_loo -570.2 (se 10.2), max Pareto k 0.32).
"""

import numpy as np
import pytest
import xarray as xr
from scipy import integrate, stats

import calibprob
from calibprob._core.estimator import NotFittedError, clone
from calibprob.calibrators import gp_beta as gb
from calibprob.calibrators.gp_beta import (
    GPBetaCalibrator,
    beta_calibration_map,
    beta_link_cdf,
    beta_link_logpdf,
    gaussian_embedding_kernel,
    held_out_elpd,
)
from tests.support.paths import MODELS

# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------


def fig1_sample(n, rng):
    """Song et al. (2019) Fig. 1: x ~ U[-10, 40], equal mixture of y = 0.5x + e and y = e.

    The paper writes e ~ N(0, sqrt 2); calibprob reads sqrt(2) as the standard
    deviation (noise variance 2).
    """
    x = rng.uniform(-10, 40, n)
    comp = rng.integers(0, 2, n)
    y = np.where(comp == 1, 0.5 * x, 0.0) + rng.normal(0.0, np.sqrt(2.0), n)
    return x, y


@pytest.fixture(scope="module")
def fig1_data():
    """The Fig. 1 set (360 training, 2000 held-out points, seed 0) and its OLS base: no fit."""
    rng = np.random.default_rng(0)
    x, y = fig1_sample(360, rng)
    xt, yt = fig1_sample(2000, rng)
    A = np.c_[np.ones_like(x), x]
    beta = np.linalg.lstsq(A, y, rcond=None)[0]
    s = np.sqrt(np.sum((y - A @ beta) ** 2) / (y.size - 2))  # OLS: one residual sd for all
    mu, sd = A @ beta, np.full_like(x, s)
    mut, sdt = np.c_[np.ones_like(xt), xt] @ beta, np.full_like(xt, s)
    return dict(mu=mu, sd=sd, y=y, mut=mut, sdt=sdt, yt=yt, ols=beta)


#: The tests that read an ADVI fit take its seed from the seed sweep (tests/conftest.py): the default run keeps the
#: seeds these tests always used (1 for Fig. 1, 0 for the identity fit: the measured figures above), ``make
#: test-seeds`` runs the same assertions at seeds 0..19.
SEEDED_FIG1 = pytest.mark.seeded(1, scope="module")
SEEDED_IDENTITY = pytest.mark.seeded(0, scope="module")


@pytest.fixture(scope="module")
def fig1(fig1_data, seed):
    """The Fig. 1 set with GP-Beta (ADVI, 16 inducing points) fitted at ``seed`` and its held-out prediction."""
    d = fig1_data
    cal = GPBetaCalibrator(random_state=seed).fit(calibprob.normal(d["mu"], d["sd"]), d["y"])
    return dict(d, cal=cal, pred=cal.predict(calibprob.normal(d["mut"], d["sdt"])))


def calibrated_sample(n, rng):
    """A heteroscedastic base that is already distribution-calibrated: y ~ N(mu, sd^2)."""
    x = rng.uniform(-3, 3, n)
    mu = 2 * np.sin(x) + x
    sd = 0.3 + 0.4 * np.abs(x)
    return mu, sd, rng.normal(mu, sd)


@pytest.fixture(scope="module")
def identity_fit(seed):
    rng = np.random.default_rng(100)
    mu, sd, y = calibrated_sample(400, rng)
    mut, sdt, yt = calibrated_sample(2000, rng)
    cal = GPBetaCalibrator(random_state=seed).fit(calibprob.normal(mu, sd), y)
    return dict(mu=mu, sd=sd, y=y, mut=mut, sdt=sdt, yt=yt, cal=cal)


def _fast(outputs, inputs=()):
    """Compile a tiny PyTensor graph without Numba (no JIT cost in the default tests)."""
    import pytensor

    return pytensor.function(list(inputs), outputs, mode="FAST_COMPILE")


# ---------------------------------------------------------------------------
# NumPy / PyTensor building blocks against closed forms
# ---------------------------------------------------------------------------


def test_kernel_is_the_gaussian_embedding_inner_product():
    # eq. 9 equals E[exp(-(X - X')^2 / (2 theta^2))] for X ~ N(m1, s1^2), X' ~ N(m2, s2^2)
    # (times theta / theta = 1 at s = 0): checked by 2-D quadrature.
    theta = 0.7
    for (m1, s1), (m2, s2) in [((0.0, 0.3), (0.5, 0.8)), ((-1.0, 0.0), (1.0, 0.0)), ((2.0, 1.5), (1.0, 0.2))]:

        def integrand(u, v):
            a = m1 + s1 * u
            b = m2 + s2 * v
            return np.exp(-((a - b) ** 2) / (2 * theta**2)) * stats.norm.pdf(u) * stats.norm.pdf(v)

        ref, _ = integrate.dblquad(integrand, -9, 9, -9, 9, epsabs=1e-11)
        k = gaussian_embedding_kernel(np.array([[m1, s1]]), np.array([[m2, s2]]), theta)[0, 0]
        assert k == pytest.approx(ref, rel=1e-7)


def test_pymc_covariance_matches_numpy_and_is_psd():
    import pytensor.tensor as pt

    rng = np.random.default_rng(3)
    X = np.c_[rng.normal(size=12), rng.uniform(0.1, 1.0, 12)]
    Z = np.c_[rng.normal(size=5), rng.uniform(0.1, 1.0, 5)]
    cov = gb.GaussianEmbeddingRBF(pt.as_tensor(0.8))
    full, cross, diag = _fast(
        [cov(pt.as_tensor(X)), cov(pt.as_tensor(X), pt.as_tensor(Z)), cov(pt.as_tensor(X), diag=True)]
    )()
    np.testing.assert_allclose(full, gaussian_embedding_kernel(X, X, 0.8), rtol=1e-12)
    np.testing.assert_allclose(cross, gaussian_embedding_kernel(X, Z, 0.8), rtol=1e-12)
    np.testing.assert_allclose(diag, np.diag(full), rtol=1e-12)
    assert np.linalg.eigvalsh(full).min() > -1e-12
    # sigma = 0: the plain unit-variance RBF of width theta
    X0 = np.c_[X[:, 0], np.zeros(12)]
    rbf = np.exp(-((X0[:, None, 0] - X0[None, :, 0]) ** 2) / (2 * 0.8**2))
    np.testing.assert_allclose(gaussian_embedding_kernel(X0, X0, 0.8), rbf, rtol=1e-12)


PARAMS = [(0.0, 0.0, 0.0), (np.log(3.0), np.log(0.5), 1.2), (np.log(0.2), np.log(0.3), -0.7), (np.log(8), np.log(8), 0)]


@pytest.mark.parametrize("log_a, log_b, c", PARAMS)
def test_beta_link_density_normalises_and_is_the_cdf_derivative(log_a, log_b, c):
    mu, sd = 1.5, 2.0
    pdf = lambda v: np.exp(beta_link_logpdf(v, mu, sd, log_a, log_b, c))  # noqa: E731
    total, _ = integrate.quad(pdf, -np.inf, np.inf, limit=400, epsabs=1e-12)
    assert total == pytest.approx(1.0, abs=1e-7)
    y = np.linspace(-4, 7, 23)
    h = 1e-5
    fd = (beta_link_cdf(y + h, mu, sd, log_a, log_b, c) - beta_link_cdf(y - h, mu, sd, log_a, log_b, c)) / (2 * h)
    # atol: cancellation in F(y+h) - F(y-h) where F ~ 1 (eps / h ~ 1e-11)
    np.testing.assert_allclose(fd, pdf(y), rtol=1e-6, atol=1e-9)
    # the CDF is the Beta map of the base CDF
    np.testing.assert_allclose(
        beta_link_cdf(y, mu, sd, log_a, log_b, c),
        beta_calibration_map(stats.norm.cdf(y, mu, sd), log_a, log_b, c),
        rtol=1e-10,
    )


def test_identity_parameters_leave_the_base_unchanged():
    y = np.linspace(-30, 30, 61)
    np.testing.assert_allclose(
        beta_link_logpdf(y, 0.5, 1.3, 0.0, 0.0, 0.0), stats.norm.logpdf(y, 0.5, 1.3), rtol=1e-12, atol=1e-12
    )
    p = np.linspace(0.001, 0.999, 50)
    np.testing.assert_allclose(beta_calibration_map(p, 0.0, 0.0, 0.0), p, rtol=1e-12)


def test_pytensor_likelihood_matches_numpy_and_is_stable_in_the_tails():
    import pytensor.tensor as pt

    v, m, s, la, lb, c = (pt.dvector(k) for k in ("v", "m", "s", "la", "lb", "c"))
    # the likelihood takes the base's probit PIT u = (y - m)/s and log Jacobian -log s
    f = _fast(gb.beta_link_logp((v - m) / s, -pt.log(s), la, lb, c), [v, m, s, la, lb, c])
    rng = np.random.default_rng(4)
    n = 40
    # z from -38 to 38: Phi(z) within 1e-300 of 0 or 1
    z = np.r_[np.linspace(-38, 38, 20), rng.normal(size=n - 20)]
    m_, s_ = rng.normal(size=n), rng.uniform(0.5, 2, n)
    la_, lb_, c_ = rng.normal(0, 0.7, n), rng.normal(0, 0.7, n), rng.normal(0, 1, n)
    got = f(m_ + s_ * z, m_, s_, la_, lb_, c_)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, beta_link_logpdf(m_ + s_ * z, m_, s_, la_, lb_, c_), rtol=1e-9, atol=1e-9)


@pytest.mark.seeded(5)
def test_tail_bounds_hold_at_most_p_tail(seed, record_property):
    rng = np.random.default_rng(seed)
    la, lb, c = rng.normal(0, 1.5, 500), rng.normal(0, 1.5, 500), rng.normal(0, 3, 500)
    lo, hi = gb._tail_bounds(la, lb, c, 1e-7)
    # the bound holds wherever it is not clipped at |z| = 37 (a or b below ~0.02)
    ok_lo, ok_hi = lo > -37, hi < 37
    record_property("unclipped_share", float(min(ok_lo.mean(), ok_hi.mean())))  # seeds 0..19: 0.982 at worst
    assert ok_lo.mean() > 0.9 and ok_hi.mean() > 0.9
    assert np.all(beta_link_cdf(lo, 0.0, 1.0, la, lb, c)[ok_lo] <= 1e-7 * (1 + 1e-6))
    assert np.all((1 - beta_link_cdf(hi, 0.0, 1.0, la, lb, c))[ok_hi] <= 1e-7 * (1 + 1e-6) + 1e-15)


# ---------------------------------------------------------------------------
# bad input and lifecycle
# ---------------------------------------------------------------------------

MU, SD, Y = np.linspace(0, 1, 40), np.full(40, 0.5), np.linspace(0, 1, 40)


@pytest.mark.parametrize(
    "kwargs, args, match",
    [
        ({}, (MU, SD, np.r_[Y[:-1], np.inf]), "y_cal must be finite"),
        ({}, (MU, SD, Y[:-3]), "mismatched lengths: y_cal has 37 entries"),
        ({}, (MU[:10], SD[:10], Y[:10]), "too few points for n_inducing=16"),
        ({"n_inducing": 8}, (np.r_[MU[:3], MU[:3]], np.r_[SD[:3], SD[:3]], Y[:6]), "3 distinct"),
        ({"inference": "vi"}, (MU, SD, Y), "inference must be one of 'advi', 'fullrank_advi', 'svi', 'map', 'nuts'"),
        ({"rank": 4}, (MU, SD, Y), "rank must be in 0..3"),
        ({"learning_rate": -1.0}, (MU, SD, Y), "learning_rate must be a positive"),
        ({"batch_size": 0}, (MU, SD, Y), "batch_size must be >= 1"),
    ],
)
def test_bad_input_raises_clear_errors(kwargs, args, match):
    mu, sd, y = args
    with pytest.raises(ValueError, match=match):
        GPBetaCalibrator(**kwargs).fit(calibprob.normal(mu, sd), y)


@pytest.mark.parametrize(
    "args, match",
    [
        ((np.zeros((40, 2)), Y), r"distribution post-processor: pred_cal must be .* got ndarray of shape \(40, 2\)"),
        ((MU, SD, Y, Y), r"takes 3 positional arguments but 5 were given"),  # the 0.1 (mu, sigma, y) form: removed
        (("pred", Y), "pred_cal must be the base model's predictive distribution .* got str"),
    ],
)
def test_fit_rejects_what_is_not_a_predictive_distribution(args, match):
    """GP-Beta is a post-processor: X, or anything but a predictive Dataset, is refused with the fix."""
    with pytest.raises(TypeError, match=match):
        GPBetaCalibrator().fit(*args)


def test_the_0_1_mu_sigma_call_is_removed_and_refused_naming_the_fix(fig1_data):
    """``fit(mu, sigma, y)`` / ``predict(mu, sigma)`` (0.1, removed in 0.2.0): refused, naming ``calibprob.normal``."""
    d = fig1_data
    with pytest.raises(TypeError, match=r"takes 3 positional arguments but 4 were given"):
        GPBetaCalibrator(inference="map", random_state=1).fit(d["mu"], d["sd"], d["y"])
    new = GPBetaCalibrator(inference="map", random_state=1).fit(calibprob.normal(d["mu"], d["sd"]), d["y"])
    with pytest.raises(TypeError, match=r"takes 2 positional arguments but 3 were given"):
        new.predict(d["mut"][:20], d["sdt"][:20])
    with pytest.raises(TypeError, match=r"pred must be .* predictive distribution.*calibprob\.normal\(mu, sigma\)"):
        new.predict(d["mut"][:20])


def test_any_predictive_dataset_goes_in_without_a_gaussian_collapse():
    """The Beta link needs only the base's F(y) and f(y) (Song et al. 2019, eq. 6).

    On a Student-t base given as draws or as quantiles, the calibrated density at
    y is f(y) * beta(F(y); a, b, c) with F, f read from the Dataset itself:
    checked against that closed form with the fitted (a, b, c), and the
    identity-initialised calibrator's likelihood is not that of the Gaussian
    collapse of the same Dataset.
    """
    rng = np.random.default_rng(11)
    n = 120
    loc = rng.normal(size=n)
    draws = loc[:, None] + 0.8 * rng.standard_t(3, size=(n, 4000))
    pred = calibprob.from_draws(draws.T)  # (draws, obs), as PyMC stacks them
    y = loc + 0.8 * 1.4 * rng.standard_t(3, size=n)
    cal = GPBetaCalibrator(inference="map", n_inducing=8, random_state=0).fit(pred, y)
    beta = cal.beta_parameters(pred)
    F = pred.calib.cdf(y).values
    f = pred.calib.logpdf(y).values
    assert beta.sizes["chain"] * beta.sizes["draw"] == 1  # MAP: one point
    a, b, c = (beta[k].values.reshape(n) for k in ("a", "b", "c"))
    # Song et al. eq. (6): r(F) = 1 / (1 + exp(-c) (1-F)^b / F^a); its density wrt F is
    # dr/dF = r(1-r) (a/F + b/(1-F)), so log p(y) = log f(y) + log dr/dF.
    r = 1.0 / (1.0 + np.exp(-c) * (1 - F) ** b / F**a)
    expect = f + np.log(r * (1 - r) * (a / F + b / (1 - F)))
    np.testing.assert_allclose(cal.logpdf(pred, y), expect, rtol=1e-6, atol=1e-8)
    # the calibrated quantile function inverts the calibrated CDF on the same Dataset
    out = cal.predict(pred, levels=[0.1, 0.5, 0.9])
    np.testing.assert_allclose(cal.cdf(pred, out.calib.quantiles[:, 1]), 0.5, atol=1e-4)  # grid inversion


def test_predict_before_fit_names_the_method():
    with pytest.raises(NotFittedError, match=r"Call fit\(\.\.\.\)"):
        GPBetaCalibrator().predict(calibprob.normal(MU, SD))


def test_hyperparameters_are_cloneable():
    cal = GPBetaCalibrator(n_inducing=8, inference="map", random_state=3)
    assert clone(cal).get_params() == cal.get_params()


@SEEDED_FIG1
def test_predict_rejects_bad_new_inputs(fig1):
    with pytest.raises(ValueError, match="scale must be > 0"):
        fig1["cal"].predict(calibprob.normal(fig1["mut"][:5], np.zeros(5)))
    with pytest.raises(ValueError, match="mismatched lengths"):
        fig1["cal"].predict(calibprob.normal(fig1["mut"][:5], fig1["sdt"][:4]))


# ---------------------------------------------------------------------------
# acceptance: identity map, Fig. 1
# ---------------------------------------------------------------------------


@SEEDED_IDENTITY
def test_identity_map_is_recovered_on_a_calibrated_base(identity_fit, record_property):
    d = identity_fit
    cal = d["cal"]
    cmap = cal.calibration_map(calibprob.normal(d["mut"][::10], d["sdt"][::10]))
    map_gap = float(np.max(np.abs(cmap["mean"] - cmap["p"])))
    F = cal.cdf(calibprob.normal(d["mut"], d["sdt"]), d["yt"])
    cdf_gap = float(np.max(np.abs(F - stats.norm.cdf(d["yt"], d["mut"], d["sdt"]))))
    nll_base = -np.mean(stats.norm.logpdf(d["yt"], d["mut"], d["sdt"]))
    nll_gpb = float(calibprob.evaluate(cal.predict(calibprob.normal(d["mut"], d["sdt"])), d["yt"])["nll"])
    for name, value in (("map_gap", map_gap), ("cdf_gap", cdf_gap), ("nll_excess", nll_gpb - nll_base)):
        record_property(name, value)
    # posterior-mean calibration map stays within 0.08 of the identity everywhere (measured 0.042)
    assert map_gap < 0.08
    # and the calibrated CDF at the held-out targets within 0.08 of the base CDF
    assert cdf_gap < 0.08
    assert nll_gpb - nll_base < 0.02


@SEEDED_FIG1
def test_fig1_gp_beta_beats_ols_and_isotonic(fig1, record_property):
    from calibprob.calibrators import IsotonicRecalibrator

    yt = fig1["yt"]
    nll_base = -np.mean(stats.norm.logpdf(yt, fig1["mut"], fig1["sdt"]))
    iso = IsotonicRecalibrator().fit(calibprob.normal(fig1["mu"], fig1["sd"]), fig1["y"])
    nll_iso = float(calibprob.evaluate(iso.predict(calibprob.normal(fig1["mut"], fig1["sdt"])), yt)["nll"])
    nll_gpb = float(calibprob.evaluate(fig1["pred"], yt)["nll"])
    record_property("nll_gain_over_base", float(nll_base - nll_gpb))
    record_property("nll_gain_over_isotonic", float(nll_iso - nll_gpb))
    assert nll_gpb < nll_base - 0.2  # measured 2.80 vs 3.09
    assert nll_gpb < nll_iso - 0.2  # isotonic measured 3.20
    # the density of the quantile representation agrees with the exact posterior average
    nll_exact = -np.mean(fig1["cal"].logpdf(calibprob.normal(fig1["mut"], fig1["sdt"]), yt))
    record_property("quantile_vs_exact_nll", float(abs(nll_gpb - nll_exact)))
    assert nll_gpb == pytest.approx(nll_exact, abs=0.01)
    # distribution calibration: sharper on the left (a, b > 1), wider on the right (a, b < 1)
    params = fig1["cal"].beta_parameters(calibprob.normal(np.array([-2.0, 10.0]), np.full(2, fig1["sd"][0])))
    a = params["a"].mean(("chain", "draw")).values
    record_property("a_left", float(a[0]))
    record_property("a_right", float(a[1]))
    assert a[0] > 1.5 and a[1] < 1.0


@pytest.mark.seeded(0)
def test_svi_fit_recovers_a_gaussian_target(seed, record_property):
    # For log p(h, v) = -(h - 2)^2 / 2 - (v - m*)' P (v - m*) / 2 the bound is maximised by
    # h = 2 and q(v) = N(m*, P^-1) exactly (the full-rank family contains the target).
    # Measured: |h - 2| < 1e-4, max |m - m*| 0.017, max |cov error| 0.015.
    from calibprob.calibrators.gp_beta import svi_fit

    m_star = np.array([1.0, -0.5, 0.3])
    cov = np.array([[1.0, 0.6, 0.2], [0.6, 0.8, -0.3], [0.2, -0.3, 0.5]])
    P = np.linalg.inv(cov)

    def logp_dlogp(x):
        h, v = x[0], x[1:]
        r = v - m_star
        return -0.5 * (h - 2.0) ** 2 - 0.5 * r @ P @ r, np.concatenate([[-(h - 2.0)], -P @ r])

    fit = svi_fit(
        logp_dlogp,
        np.zeros(4),
        np.array([False, True, True, True]),
        n_iter=6000,
        learning_rate=0.01,
        n_mc=8,
        rng=np.random.default_rng(seed),
    )
    record_property("h_gap", float(abs(fit.mean[0] - 2.0)))
    record_property("mean_gap", float(np.max(np.abs(fit.mean[1:] - m_star))))
    record_property("cov_gap", float(np.max(np.abs(fit.chol @ fit.chol.T - cov))))
    assert fit.mean[0] == pytest.approx(2.0, abs=0.05)
    np.testing.assert_allclose(fit.mean[1:], m_star, atol=0.05)
    np.testing.assert_allclose(fit.chol @ fit.chol.T, cov, atol=0.06)
    draws = fit.sample(20_000, np.random.default_rng(seed + 1))
    assert np.all(draws[:, 0] == fit.mean[0])  # point estimates are not sampled
    np.testing.assert_allclose(np.cov(draws[:, 1:].T), fit.chol @ fit.chol.T, atol=0.03)
    assert fit.loss[-500:].mean() < fit.loss[:100].mean()


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"x0": np.array([0.0, np.nan])}, ValueError, "x0"),
        ({"x0": np.zeros((2, 1))}, ValueError, "x0"),
        ({"variational": np.array([0, 1])}, ValueError, "variational must be a boolean mask with the shape of x0"),
        ({"variational": np.array([True])}, ValueError, "variational must be a boolean mask"),
        ({"variational": np.array([False, False])}, ValueError, "variational selects no coordinate"),
        ({"n_iter": 0}, ValueError, "n_iter must be >= 1"),
        ({"n_mc": 0}, ValueError, "n_mc must be >= 1"),
        ({"learning_rate": -0.1}, ValueError, "learning_rate must be a positive finite number; got -0.1"),
        ({"init_scale": float("nan")}, ValueError, "init_scale must be a positive finite number"),
        ({"rng": 0}, TypeError, "rng must be a numpy.random.Generator"),
        ({"logp_dlogp": None}, TypeError, "logp_dlogp must be a callable"),
    ],
)
def test_svi_fit_rejects_bad_input(kwargs, error, match):
    from calibprob.calibrators.gp_beta import svi_fit

    args = {
        "logp_dlogp": lambda x: (-0.5 * x @ x, -x),
        "x0": np.zeros(2),
        "variational": np.array([False, True]),
        "n_iter": 5,
        "learning_rate": 0.01,
        "n_mc": 1,
        "rng": np.random.default_rng(0),
    }
    args.update(kwargs)
    with pytest.raises(error, match=match):
        svi_fit(**args)


def test_svi_result_sample_rejects_bad_count():
    from calibprob.calibrators.gp_beta import svi_fit

    fit = svi_fit(
        lambda x: (-0.5 * x @ x, -x),
        np.zeros(2),
        np.array([False, True]),
        n_iter=5,
        learning_rate=0.01,
        n_mc=1,
        rng=np.random.default_rng(0),
    )
    with pytest.raises(ValueError, match="n \\(number of draws\\) must be >= 1"):
        fit.sample(0, np.random.default_rng(0))


def _best_beta_link(y, mu, sigma):
    """Population-optimal Beta-link map (a, b, c) for draws y of the true conditional: brute-force MLE."""
    from scipy import optimize

    def nll(p):
        return -np.mean(beta_link_logpdf(y, mu, sigma, p[0], p[1], p[2]))

    res = optimize.minimize(
        nll, [0.0, 0.0, 0.0], method="Nelder-Mead", options={"xatol": 1e-6, "fatol": 1e-10, "maxiter": 4000}
    )
    return res.x, res.fun


#: The brute-force optimum per (x0, OLS mean, sd): the same draws (seed 7) at every GP-Beta seed, so the seed sweep
#: computes it once per process, not once per seed.
_BEST_LINK: dict = {}


@SEEDED_FIG1
def test_fig1_fit_approaches_the_best_beta_link_map_which_is_unimodal(fig1, record_property):
    # Fig. 1 asks for a bimodal calibrated density at the right end. The Beta link cannot give
    # one there at its likelihood optimum: the brute-force best (a, b, c) for the true mixture
    # at x = 40 (a = 0.47, b = 0.49) gives a flat-topped density with a single mode, and any
    # bimodal member (a = b <= 0.4) costs >= 0.027 nats per point more. GP-Beta is checked
    # against that optimum: the ADVI posterior-average density is within 0.045 nats of it at
    # x = 10, 20, 30 and 0.08 at x = 40, the edge of the data, where the posterior spread is widest
    # (seed 1: excess 0.005, 0.024, 0.025, 0.049; over the seed sweep, seeds 0..19, 2026-11-29: at most
    # 0.011, 0.030, 0.032 and 0.061 — one limit of 0.06 for all four broke at x = 40 at seed 8; a fit that
    # misses the link, like the OLS base, is 0.29 nats worse); MAP within 0.02 (slow test, measured <= 0.014).
    rng = np.random.default_rng(7)
    s = float(fig1["sd"][0])
    for x0 in (10.0, 20.0, 30.0, 40.0):
        y = np.where(rng.integers(0, 2, 40_000) == 1, 0.5 * x0, 0.0) + rng.normal(0, np.sqrt(2.0), 40_000)
        m = float(fig1["ols"] @ [1.0, x0])
        if (x0, m, s) not in _BEST_LINK:
            _BEST_LINK[x0, m, s] = _best_beta_link(y, m, s)
        (log_a, log_b, c), best = _BEST_LINK[x0, m, s]
        fitted = -np.mean(fig1["cal"].logpdf(calibprob.normal(np.full(y.size, m), np.full(y.size, s)), y))
        record_property(f"excess_nats_x{x0:.0f}", float(fitted - best))
        assert best <= fitted + 1e-3  # the brute-force optimum is a lower bound ...
        assert fitted - best < (0.08 if x0 == 40.0 else 0.045), (x0, fitted, best)  # ... which GP-Beta nears
        if x0 == 40.0:
            grid = np.linspace(m - 4 * s, m + 4 * s, 2001)
            dens = beta_link_logpdf(grid, m, s, log_a, log_b, c)
            n_modes = int(np.sum((dens[1:-1] > dens[:-2]) & (dens[1:-1] > dens[2:])))
            assert n_modes == 1 and 0.35 < np.exp(log_a) < 0.6 and 0.35 < np.exp(log_b) < 0.6
            for a_bimodal in (0.4, 0.3):
                cost = -np.mean(beta_link_logpdf(y, m, s, np.log(a_bimodal), np.log(a_bimodal), 0.0)) - best
                assert cost > 0.02


# ---------------------------------------------------------------------------
# the prediction contract
# ---------------------------------------------------------------------------


@SEEDED_FIG1
def test_prediction_follows_the_contract(fig1):
    pred = fig1["pred"]
    calibprob.validate(pred)
    assert pred.attrs["method"] == "gp-beta"
    np.testing.assert_allclose(pred.calib.levels, calibprob.DEFAULT_LEVELS)
    assert np.all(np.diff(pred.calib.quantiles, axis=1) >= 0)
    # quantiles invert the exact posterior-averaged CDF
    F = fig1["cal"].cdf(calibprob.normal(fig1["mut"][:200], fig1["sdt"][:200]), pred.calib.quantiles[:200])
    np.testing.assert_allclose(F, np.broadcast_to(pred.calib.levels, F.shape), atol=2e-3)
    # stored moments agree with the quantile function's (piecewise-Gaussian) moments
    from calibprob.predictive import quantile_moments

    m, s = quantile_moments(pred.calib.quantiles, pred.calib.levels)
    np.testing.assert_allclose(pred["mean"], m, atol=0.05 * fig1["sd"][0])
    np.testing.assert_allclose(pred["std"], s, rtol=0.05)
    other = fig1["cal"].predict(calibprob.normal(fig1["mut"][:10], fig1["sdt"][:10]), levels=[0.1, 0.5, 0.9])
    np.testing.assert_allclose(other.calib.quantiles, pred.calib.ppf([0.1, 0.5, 0.9]).values[:10], atol=0.02)


@SEEDED_FIG1
def test_grid_resolution_is_converged(fig1):
    cal = fig1["cal"]
    fine = clone(cal).set_params(n_grid=4096)
    for k in ("idata_", "loc_", "scale_", "inducing_init_", "rank_", "n_features_in_"):
        setattr(fine, k, getattr(cal, k))
    q_fine = fine.predict(calibprob.normal(fig1["mut"][:50], fig1["sdt"][:50])).calib.quantiles
    q = fig1["pred"].calib.quantiles[:50]
    assert np.max(np.abs(q - q_fine)) / fig1["sd"][0] < 1e-3


@SEEDED_IDENTITY
def test_same_seed_same_result(identity_fit):
    d = identity_fit
    seed = d["cal"].random_state
    again = GPBetaCalibrator(random_state=seed).fit(calibprob.normal(d["mu"], d["sd"]), d["y"])
    np.testing.assert_array_equal(again.idata_["posterior"]["V"].values, d["cal"].idata_["posterior"]["V"].values)
    other = GPBetaCalibrator(random_state=seed + 1).fit(calibprob.normal(d["mu"], d["sd"]), d["y"])
    assert not np.array_equal(other.idata_["posterior"]["V"].values, d["cal"].idata_["posterior"]["V"].values)


# ---------------------------------------------------------------------------
# ArviZ objects
# ---------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Estimated shape parameter of Pareto")
@SEEDED_FIG1
def test_idata_is_an_arviz_datatree(fig1, tmp_path):
    import arviz as az

    idata = fig1["cal"].idata_
    for group in ("posterior", "sample_stats", "log_likelihood", "observed_data", "constant_data", "variational"):
        assert group in idata.children
    assert idata["log_likelihood"]["y"].dims == ("chain", "draw", "obs")
    assert idata["log_likelihood"]["y"].shape == (1, 200, 360)
    summary = az.summary(idata, var_names=["theta", "gamma", "delta", "R"])
    assert np.all(np.isfinite(summary["mean"]))
    loo = az.loo(idata, pointwise=True)
    assert np.isfinite(loo.elpd) and loo.pareto_k.shape == (360,)
    # the stored log-likelihood is eq. 6-7 at the posterior draws (independent recomputation)
    cal = fig1["cal"]
    np.testing.assert_allclose(
        cal.log_likelihood(calibprob.normal(fig1["mu"], fig1["sd"]), fig1["y"]),
        idata["log_likelihood"]["y"].values,
        rtol=1e-12,
    )
    path = tmp_path / "gpbeta.nc"
    idata.to_netcdf(path)
    back = xr.open_datatree(path)
    xr.testing.assert_allclose(back["posterior"].to_dataset(), idata["posterior"].to_dataset())
    xr.testing.assert_allclose(back["log_likelihood"].to_dataset(), idata["log_likelihood"].to_dataset())


@SEEDED_FIG1
def test_compare_ranks_gp_beta_above_the_base_on_held_out_data(fig1, record_property):
    import arviz as az

    yt, mut, sdt = fig1["yt"], fig1["mut"], fig1["sdt"]
    e_gpb = fig1["cal"].held_out_elpd(calibprob.normal(mut, sdt), yt)
    e_base = held_out_elpd(stats.norm.logpdf(yt, mut, sdt))
    assert e_base.elpd == pytest.approx(stats.norm.logpdf(yt, mut, sdt).sum())
    assert e_gpb.elpd == pytest.approx(fig1["cal"].logpdf(calibprob.normal(mut, sdt), yt).sum())
    table = az.compare({"gp-beta": e_gpb, "base": e_base})
    record_property("base_elpd_diff", float(table.loc["base", "elpd_diff"]))
    assert table.index[0] == "gp-beta"
    assert table.loc["base", "elpd_diff"] < -100


@SEEDED_FIG1
def test_calibration_map_has_a_credible_band(fig1):
    cal = fig1["cal"]
    p = np.linspace(0.01, 0.99, 25)
    cm = cal.calibration_map(
        calibprob.normal(np.array([-2.0, 4.0, 10.0]), np.full(3, fig1["sd"][0])), p, confidence_level=0.9
    )
    assert cm["map"].dims == ("chain", "draw", "obs", "p")
    assert np.all(cm["lower"] <= cm["mean"] + 1e-12) and np.all(cm["mean"] <= cm["upper"] + 1e-12)
    assert np.all(np.diff(cm["map"].values, axis=-1) > 0)  # every draw's map is increasing
    assert float((cm["upper"] - cm["lower"]).max()) > 0.01  # a band, not a point
    with pytest.raises(ValueError, match="confidence_level must be in"):
        cal.calibration_map(calibprob.normal(np.zeros(1), np.ones(1)), confidence_level=90)


@SEEDED_FIG1
def test_plot_calibration_map(fig1):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from calibprob.calibrators import IsotonicRecalibrator

    iso = IsotonicRecalibrator().fit(calibprob.normal(fig1["mu"], fig1["sd"]), fig1["y"])
    axes = gb.plot_calibration_map(fig1["cal"], calibprob.normal(fig1["mu"], fig1["sd"]), isotonic=iso.calibration_map)
    assert len(axes) == 4 and axes[3].get_title() == "calibration maps"
    plt.close("all")


@pytest.mark.seeded(7)
def test_runner_fits_on_the_calibration_part(seed, record_property):
    """The task's seed (GP-Beta's random_state) from the seed sweep: 7 in the default run."""
    from calibprob.compare.methods import TaskContext

    class Base:  # a fixed Gaussian base following the base-regressor protocol
        def predict_mean_std(self, X, *, include_noise=True):
            return 0.25 * X[:, 0], np.full(X.shape[0], 5.5)

    rng = np.random.default_rng(9)
    x, y = fig1_sample(300, rng)
    xt, yt = fig1_sample(500, rng)
    ctx = TaskContext(x[:, None], y, None, None, xt[:, None], Base(), {"kind": "ols"}, None, seed)
    from calibprob.compare.methods import METHOD_KINDS

    pred = METHOD_KINDS["gp-beta"].func(ctx, n_iter=2000, draws=100)
    calibprob.validate(pred)
    assert pred.sizes["obs"] == 500
    gain = -np.mean(stats.norm.logpdf(yt, 0.25 * xt, 5.5)) - float(calibprob.evaluate(pred, yt)["nll"])
    record_property("nll_gain_over_base", float(gain))
    assert gain > 0.1
    with pytest.raises(ValueError, match="calibration_data='loo' needs a base with a loo"):
        METHOD_KINDS["gp-beta"].func(ctx, calibration_data="loo")


# ---------------------------------------------------------------------------
# slow: other inference methods and larger problems
# ---------------------------------------------------------------------------


@pytest.mark.slow
def test_map_on_fig1(fig1_data):
    fig1 = fig1_data
    cal = GPBetaCalibrator(inference="map", random_state=1).fit(calibprob.normal(fig1["mu"], fig1["sd"]), fig1["y"])
    assert cal.idata_["map"].attrs["success"] == 1
    nll = -np.mean(cal.logpdf(calibprob.normal(fig1["mut"], fig1["sdt"]), fig1["yt"]))
    assert nll < -np.mean(stats.norm.logpdf(fig1["yt"], fig1["mut"], fig1["sdt"])) - 0.2
    # the MAP map tracks the brute-force best Beta link (measured excess 0.014, 0.012, 0.001,
    # 0.0004 nats at x = 10, 20, 30, 40)
    rng = np.random.default_rng(7)
    s = float(fig1["sd"][0])
    for x0 in (10.0, 20.0, 30.0, 40.0):
        y = np.where(rng.integers(0, 2, 40_000) == 1, 0.5 * x0, 0.0) + rng.normal(0, np.sqrt(2.0), 40_000)
        m = float(fig1["ols"] @ [1.0, x0])
        _, best = _best_beta_link(y, m, s)
        fitted = -np.mean(cal.logpdf(calibprob.normal(np.full(y.size, m), np.full(y.size, s)), y))
        assert -1e-3 < fitted - best < 0.02, (x0, fitted, best)


@pytest.mark.slow
def test_svi_on_fig1(fig1_data):
    fig1 = fig1_data
    cal = GPBetaCalibrator(inference="svi", random_state=1).fit(calibprob.normal(fig1["mu"], fig1["sd"]), fig1["y"])
    post = cal.idata_["posterior"]
    assert post.sizes["draw"] == cal.draws and "variational" in cal.idata_
    # hyperparameters are point estimates (equal in every draw); the inducing values vary
    assert float(post["log_gamma"].std(("chain", "draw")).max()) < 1e-12
    assert float(post["V"].std(("chain", "draw")).min()) > 0.0
    nll = -np.mean(cal.logpdf(calibprob.normal(fig1["mut"], fig1["sdt"]), fig1["yt"]))
    assert nll < -np.mean(stats.norm.logpdf(fig1["yt"], fig1["mut"], fig1["sdt"])) - 0.2


def _fake_nuts_tree(shift, diverging):
    rng = np.random.default_rng(0)
    draws = rng.normal(size=(2, 400, 2))
    draws[1] += shift  # the second chain sits elsewhere: r-hat > 1 by construction
    post = xr.Dataset(
        {
            "theta": (("chain", "draw", "d"), draws),
            "W": (("chain", "draw"), np.r_[[1.0], [-1.0]][:, None] * np.ones((2, 400))),
        }
    )
    stats_ = xr.Dataset({"diverging": (("chain", "draw"), np.zeros((2, 400), bool))})
    stats_["diverging"][0, :diverging] = True
    return xr.DataTree.from_dict({"posterior": post, "sample_stats": stats_})


def test_nuts_convergence_checks_warn_and_report():
    """Divergences or r-hat > 1.01 warn ConvergenceWarning; a sign-symmetric W alone does not."""
    import arviz as az

    clean = GPBetaCalibrator._convergence(_fake_nuts_tree(0.0, 0))  # W's chains are mirror images
    assert clean["n_divergences"] == 0 and clean["converged"] == 1 and clean["max_rhat"] < 1.01
    with pytest.warns(calibprob.ConvergenceWarning, match="2 divergent transition"):
        out = GPBetaCalibrator._convergence(_fake_nuts_tree(0.0, 2))
    assert out["n_divergences"] == 2 and out["converged"] == 0
    with pytest.warns(calibprob.ConvergenceWarning, match=r"max r-hat 1\.\d+ > 1\.01"):
        out = GPBetaCalibrator._convergence(_fake_nuts_tree(0.5, 0))
    expect = float(az.rhat(_fake_nuts_tree(0.5, 0)["posterior"].to_dataset()[["theta"]])["theta"].max())
    assert out["max_rhat"] == pytest.approx(expect)


@pytest.mark.slow
def test_nuts_200_points_converges_and_supports_loo_and_compare():
    import arviz as az

    rng = np.random.default_rng(0)
    x, y = fig1_sample(200, rng)
    xt, yt = fig1_sample(1000, rng)
    A = np.c_[np.ones_like(x), x]
    beta = np.linalg.lstsq(A, y, rcond=None)[0]
    s = np.sqrt(np.sum((y - A @ beta) ** 2) / (y.size - 2))
    mu, sd = A @ beta, np.full_like(x, s)
    mut, sdt = np.c_[np.ones_like(xt), xt] @ beta, np.full_like(xt, s)
    # seed 4, tune 2000: with PyTensor 3.3.8 / NumPy 2.5 / SciPy 1.18 the same seed at tune 1000 gave max
    # r-hat 1.0915 and 152 divergences (bit-identical on the code before the reorganisation: the newer
    # libraries changed the chains); tune 2000 gives 1.0031 and 7 divergences. With earlier libraries
    # seeds 3 / 4 / 5 at tune 1000 gave 1.075 / 1.008 / 1.005.
    cal = GPBetaCalibrator(inference="nuts", n_inducing=8, draws=1000, tune=2000, chains=2, random_state=4)
    cal.fit(calibprob.normal(mu, sd), y)
    idata = cal.idata_
    # r-hat on the identifiable quantities (W is sign-symmetric; its products are in R)
    summary = az.summary(idata, var_names=["theta", "gamma", "delta", "R", "V"])
    assert summary["r_hat"].max() <= 1.01
    divergences = int(idata["sample_stats"]["diverging"].sum())
    assert divergences < 0.01 * 2000  # reported in the closing note
    stats_attrs = idata["sample_stats"].attrs  # PyMC's convergence checks, kept
    assert stats_attrs["n_divergences"] == divergences
    assert stats_attrs["max_rhat"] == pytest.approx(summary["r_hat"].max(), abs=0.006)
    # log_likelihood came from pm.compute_log_likelihood on the CustomDist; NumPy agrees
    np.testing.assert_allclose(
        cal.log_likelihood(calibprob.normal(mu, sd), y), idata["log_likelihood"]["y"].values, rtol=1e-9, atol=1e-9
    )
    loo = az.loo(idata, pointwise=True)
    assert np.isfinite(loo.elpd) and loo.pareto_k.shape == (200,) and np.all(np.isfinite(loo.pareto_k))
    print(
        f"NUTS[{cal.nuts_sampler_}] max r_hat {summary['r_hat'].max():.4f}, divergences {divergences}, "
        f"elpd_loo {loo.elpd:.2f} (se {loo.se:.2f}), max Pareto k {float(loo.pareto_k.max()):.3f}"
    )
    table = az.compare(
        {
            "gp-beta": cal.held_out_elpd(calibprob.normal(mut, sdt), yt),
            "base": held_out_elpd(stats.norm.logpdf(yt, mut, sdt)),
        }
    )
    assert table.index[0] == "gp-beta"


@pytest.fixture(scope="module")
def fig1_6000():
    """6000 Fig. 1 points with a fixed Gaussian base (the population OLS line), 2000 held out."""
    rng = np.random.default_rng(11)
    x, y = fig1_sample(6000, rng)
    xt, yt = fig1_sample(2000, rng)
    return {
        "mu": 0.25 * x,
        "sd": np.full_like(x, 5.5),
        "y": y,
        "mut": 0.25 * xt,
        "sdt": np.full_like(xt, 5.5),
        "yt": yt,
    }


@pytest.mark.slow
def test_minibatch_advi_on_a_larger_set(fig1_6000):
    d = fig1_6000
    cal = GPBetaCalibrator(batch_size=256, n_iter=4000, random_state=2).fit(calibprob.normal(d["mu"], d["sd"]), d["y"])
    assert cal.idata_.attrs["batch_size"] == 256
    nll = -np.mean(cal.logpdf(calibprob.normal(d["mut"], d["sdt"]), d["yt"]))
    assert nll < -np.mean(stats.norm.logpdf(d["yt"], d["mut"], d["sdt"])) - 0.2


@pytest.mark.slow
def test_minibatch_svi_is_reproducible_and_close_to_full_batch_svi(fig1_6000):
    # minibatch SVI follows unbiased (n / batch)-scaled gradients of the same bound as
    # full-batch SVI, so its held-out NLL is that of full-batch SVI up to gradient noise;
    # the batches come from seeded RNGs, so a fit is repeatable
    mu, sd, y, mut, sdt, yt = (fig1_6000[k] for k in ("mu", "sd", "y", "mut", "sdt", "yt"))
    mini = [
        GPBetaCalibrator(inference="svi", batch_size=256, random_state=s).fit(calibprob.normal(mu, sd), y)
        for s in (2, 2, 3)
    ]
    assert all(c.idata_.attrs["batch_size"] == 256 for c in mini)
    v = [c.idata_["posterior"]["V"].values for c in mini]
    np.testing.assert_array_equal(v[0], v[1])
    assert not np.array_equal(v[0], v[2])
    full = GPBetaCalibrator(inference="svi", batch_size=None, random_state=2).fit(calibprob.normal(mu, sd), y)
    assert full.idata_.attrs["batch_size"] == 0
    nll = {name: -np.mean(c.logpdf(calibprob.normal(mut, sdt), yt)) for name, c in [("mini", mini[0]), ("full", full)]}
    assert nll["mini"] < -np.mean(stats.norm.logpdf(yt, mut, sdt)) - 0.2
    assert abs(nll["mini"] - nll["full"]) < 0.01, nll


@pytest.mark.slow
@pytest.mark.parametrize("kwargs", [{"inference": "fullrank_advi"}, {"learn_inducing": True}, {"rank": 0}])
def test_other_configurations_fit_fig1(fig1_data, kwargs):
    fig1 = fig1_data
    cal = GPBetaCalibrator(random_state=1, **kwargs).fit(calibprob.normal(fig1["mu"], fig1["sd"]), fig1["y"])
    if kwargs.get("learn_inducing"):
        assert cal.idata_["posterior"]["Z"].dims == ("chain", "draw", "inducing", "input")
    nll = -np.mean(cal.logpdf(calibprob.normal(fig1["mut"], fig1["sdt"]), fig1["yt"]))
    assert nll < -np.mean(stats.norm.logpdf(fig1["yt"], fig1["mut"], fig1["sdt"])) - 0.2


@pytest.mark.parametrize("spec_name", ["song2019-table1-ols", "song2019-table1-bayesian-ridge"])
@pytest.mark.seeded(0)
def test_song_table1_boston_rows_from_the_shipped_spec(spec_name, seed, record_property):
    """Song et al. (2019) Table 1, Boston, linear bases: GP-Beta's NLL at least 0.1 below the base's
    and below isotonic's (TARGETS.md), on a block of three repetitions of the spec in ``models/``
    exactly as ``calibprob compare`` runs them (same splits, same seeds; GPB16 column only).

    The seed sweep's ``seed`` picks the block: repetitions 3 seed .. 3 seed + 2 of the spec's protocol
    (a repetition's split and seeds come from the spec's seed and the repetition's index alone, as in
    ``calibprob compare --repetitions``), so the default run (seed 0) keeps the first three. Swept at seeds 0..19
    (2026-11-29, 60 repetitions per base): GP-Beta's mean NLL 0.167 below the base's at worst (OLS, repetitions
    18..20; the margin 0.1) and 0.155 below isotonic's; in every split at least 0.037 below the base.
    Measured on these three repetitions: OLS base 2.959, isotonic 2.973, GP-Beta 2.726 (means);
    Bayesian ridge 2.977, 2.973, 2.735 — the same values as the spec's own run (all five
    repetitions in docs/benchmarks.md: OLS 2.91 -> 2.70, Bayesian ridge 2.94 -> 2.72).
    """
    import tomllib

    from calibprob.compare import parse_spec
    from calibprob.compare.tasks import run_task

    path = MODELS / f"{spec_name}.toml"
    data = tomllib.loads(path.read_text())
    data["methods"] = {k: v for k, v in data["methods"].items() if k in ("base", "isotonic", "gp-beta-16")}
    data["repetitions"] = max(data["repetitions"], 3 * seed + 3)  # the protocol's repetitions up to the block
    spec = parse_spec(data).to_dict()
    block = range(3 * seed, 3 * seed + 3)
    nll = xr.concat([run_task(spec, "boston", r)["nll"] for r in block], dim="repetition")
    gpb, base, iso = (nll.sel(calibrator=c).squeeze() for c in ("gp-beta-16", "base", "isotonic"))
    record_property("gain_over_base", float(base.mean() - gpb.mean()))
    record_property("gain_over_isotonic", float(iso.mean() - gpb.mean()))
    record_property("worst_split_excess", float((gpb - base).max()))
    assert float(gpb.mean()) <= float(base.mean()) - 0.1, nll.values
    assert float(gpb.mean()) < float(iso.mean()), nll.values
    assert (gpb <= base + 0.02).all(), nll.values  # never worse than the base in any split


# ---------------------------------------------------------------------------
# The NumPy objective and ADVI against the PyMC model (no PyTensor graph per process)
# ---------------------------------------------------------------------------


def _small_problem(rank=1, learn_inducing=False, n_inducing=4, seed=0):
    from calibprob.calibrators.gp_beta._inference import Problem
    from calibprob.calibrators.gp_beta._objective import Layout

    rng = np.random.default_rng(seed)
    n = 60
    mu, sd = rng.uniform(-2, 2, n), rng.uniform(0.5, 1.5, n)
    y = mu + np.where(mu > 0, 2.0, 0.5) * rng.normal(size=n)
    loc, scale = float(mu.mean()), float(np.sqrt(mu.var() + np.mean(sd**2)))
    Z0 = gb._kmeans(np.c_[(mu - loc) / scale, sd / scale], n_inducing, rng)
    lay = Layout(n_inducing, rank, learn_inducing)
    return Problem(lay, None, mu, sd, (y - mu) / sd, -np.log(sd), loc, scale, Z0)


@pytest.mark.parametrize("rank, learn_inducing", [(0, False), (1, False), (2, True)])
def test_numpy_log_posterior_equals_the_pymc_model(rank, learn_inducing):
    """Value and gradient of LogPosterior equal PyMC's logp_dlogp_function of the declared model to 1e-9."""
    prob = _small_problem(rank, learn_inducing)
    fn = prob.graph().compiled_logp_dlogp("FAST_COMPILE")
    ours = prob.objective()
    rng = np.random.default_rng(1)
    start = prob.layout.ravel(prob.layout.start_point(prob.Z0, rng))
    for scale in (0.0, 0.3, 1.0):
        x = start + scale * rng.normal(size=start.size)
        lp, grad = ours(x)
        lp_ref, grad_ref = fn(x)
        assert lp == pytest.approx(float(lp_ref), abs=1e-9, rel=1e-12)
        np.testing.assert_allclose(grad, grad_ref, rtol=1e-9, atol=1e-9)


def test_numpy_log_posterior_gradient_matches_finite_differences():
    """Independent of PyMC: central differences of the NumPy value reproduce its gradient."""
    prob = _small_problem(rank=2, learn_inducing=True)
    f = prob.objective()
    x = 0.3 * np.random.default_rng(2).normal(size=prob.layout.size)
    _, grad = f(x)
    h = 1e-6
    fd = np.array([(f(x + h * e)[0] - f(x - h * e)[0]) / (2 * h) for e in np.eye(x.size)])
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-5 * np.abs(grad).max())


@pytest.mark.parametrize("inference", ["advi", "fullrank_advi"])
def test_numpy_advi_reproduces_pymc_advi_step_for_step(inference):
    """advi_fit on the NumPy objective = PyMC's compiled ADVI step on the model: same draws, same path."""
    from calibprob.calibrators.gp_beta._inference import _advi_pymc
    from calibprob.calibrators.gp_beta._svi import advi_fit

    prob = _small_problem()
    est = GPBetaCalibrator(n_inducing=4, n_iter=150, inference=inference, compile_mode="FAST_COMPILE")
    full_rank = inference == "fullrank_advi"
    start = prob.layout.ravel(prob.layout.start_point(prob.Z0, np.random.default_rng(5)))
    mu_ref, scale_ref, loss_ref = _advi_pymc(est, prob.graph(), start, 123, full_rank)
    res = advi_fit(
        prob.objective(),
        start,
        full_rank=full_rank,
        n_iter=150,
        learning_rate=est._learning_rate(),
        n_mc=1,
        seed=123,
        init_sd=0.1 if full_rank else None,
    )
    np.testing.assert_allclose(res.mu, mu_ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(res.scale, scale_ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(res.loss, loss_ref, rtol=1e-10)


@pytest.mark.seeded(0)
def test_advi_fit_recovers_the_mean_field_optimum_of_a_gaussian(seed, record_property):
    """On N(m, S) the mean-field KL optimum is q = N(m, diag(1 / diag(S^-1))) (Bishop 2006, §10.1.2)."""
    from calibprob.calibrators.gp_beta import advi_fit

    m = np.array([1.0, -0.5])
    S = np.array([[1.0, 0.6], [0.6, 0.8]])
    P = np.linalg.inv(S)
    fit = advi_fit(
        lambda x: (-0.5 * (x - m) @ P @ (x - m), -P @ (x - m)),
        np.zeros(2),
        full_rank=False,
        n_iter=6000,
        learning_rate=0.01,
        n_mc=8,
        seed=seed,
    )
    record_property("mean_gap", float(np.max(np.abs(fit.mu - m))))
    record_property("sd_gap", float(np.max(np.abs(np.diag(fit.chol()) - 1 / np.sqrt(np.diag(P))))))
    # the last iterate of stochastic-gradient ADVI (8 Monte Carlo draws a step) sits within Monte Carlo noise of the
    # optimum: over the seed sweep (seeds 0..19, 2026-11-29) 0.058 for the mean and 0.061 for the sd at worst (an
    # atol of 0.05 broke at seeds 14 and 19); 0.08 still tells the mean-field sds (0.74, 0.66) from the marginal
    # ones (1.0, 0.89) a fit that ignored the factorisation would give
    np.testing.assert_allclose(fit.mu, m, atol=0.08)
    np.testing.assert_allclose(np.diag(fit.chol()), 1 / np.sqrt(np.diag(P)), atol=0.08)
    assert np.all(np.abs(np.diag(fit.chol()) - np.sqrt(np.diag(S))) > 0.15)


def test_advi_fit_rejects_bad_input():
    from calibprob.calibrators.gp_beta import advi_fit

    f = lambda x: (-0.5 * x @ x, -x)  # noqa: E731
    with pytest.raises(ValueError, match="n_iter must be >= 1"):
        advi_fit(f, np.zeros(2), full_rank=False, n_iter=0, learning_rate=0.01, n_mc=1, seed=0)
    with pytest.raises(ValueError, match="x0"):
        advi_fit(f, np.zeros((2, 2)), full_rank=False, n_iter=5, learning_rate=0.01, n_mc=1, seed=0)


@pytest.mark.parametrize("inference", ["map", "advi", "svi"])
def test_full_batch_fits_build_no_pymc_graph(inference):
    """Full-batch MAP / ADVI / SVI evaluate the NumPy objective: the per-process graph cache stays empty."""
    gb.clear_graph_cache()
    mu, sd, y = calibrated_sample(80, np.random.default_rng(3))
    cal = GPBetaCalibrator(n_inducing=4, inference=inference, n_iter=50, draws=20, random_state=0)
    cal.fit(calibprob.normal(mu, sd), y)
    assert len(gb._GRAPHS) == 0
    assert np.all(np.isfinite(cal.logpdf(calibprob.normal(mu, sd), y)))
