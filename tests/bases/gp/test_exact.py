"""Exact GP: MAP recovery, σ(θ, x) for any θ, objectives against closed forms, the PyMC model."""

import numpy as np
import pytest
import xarray as xr
from scipy import stats

from calibprob._core.estimator import NotFittedError, clone
from calibprob.bases.gp import (
    GaussianProcessRegressor,
    _pymc,
    get_compile_mode,
    set_compile_mode,
)
from calibprob.bases.gp.kernels import kernel
from tests.support.paths import MODELS


def draw_prior(seed, n, ls, var, noise, kern="se", p=2, mean=0.0):
    """One draw of y = mean + f(X) + ε with f from the GP prior (X uniform on [0, 1]^d)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, len(ls)))
    K = kernel(kern, X, None, np.asarray(ls), var, p=p) + noise * np.eye(n)
    return X, mean + np.linalg.cholesky(K) @ rng.normal(size=n)


TRUE_SE = {"lengthscale": np.array([0.25, 0.6]), "variance": 2.0, "noise": 0.05}
TRUE_M52 = {"lengthscale": np.array([0.3, 0.5]), "variance": 1.5, "noise": 0.02, "mean": 5.0}


@pytest.fixture(scope="module")
def se_data():
    return draw_prior(0, 300, TRUE_SE["lengthscale"], TRUE_SE["variance"], TRUE_SE["noise"])


@pytest.fixture(scope="module")
def se_fit(se_data):
    return GaussianProcessRegressor(kernel="se", random_state=0).fit(*se_data)


@pytest.fixture(scope="module")
def m52_data():
    t = TRUE_M52
    return draw_prior(1, 300, t["lengthscale"], t["variance"], t["noise"], "matern", 2, t["mean"])


@pytest.fixture(scope="module")
def m52_fit(m52_data):
    gp = GaussianProcessRegressor(kernel="matern", p=2, mean="constant", objective="reml", random_state=0)
    return gp.fit(*m52_data)


# The recovery tests rest on a random draw and an optimiser's random restarts: they take both from the seed sweep
# (tests/conftest.py), seed 0 (the fixtures above) in the default run, 0..19 under `make test-seeds`.
SEEDED = pytest.mark.seeded(0, scope="module")


@pytest.fixture(scope="module")
def se_at_seed(seed, se_fit):
    """The SE fit on a prior draw and restarts at ``seed`` (the module's se_fit at seed 0)."""
    if seed == 0:
        return se_fit
    data = draw_prior(seed, 300, TRUE_SE["lengthscale"], TRUE_SE["variance"], TRUE_SE["noise"])
    return GaussianProcessRegressor(kernel="se", random_state=seed).fit(*data)


@pytest.fixture(scope="module")
def m52_at_seed(seed, m52_fit):
    """The Matérn-5/2 REML fit on the prior draw ``seed + 1`` and restarts at ``seed`` (m52_fit at seed 0)."""
    if seed == 0:
        return m52_fit
    t = TRUE_M52
    data = draw_prior(seed + 1, 300, t["lengthscale"], t["variance"], t["noise"], "matern", 2, t["mean"])
    return GaussianProcessRegressor(kernel="matern", p=2, mean="constant", objective="reml", random_state=seed).fit(
        *data
    )


# --------------------------------------------------------------------------- MAP recovery
@SEEDED
def test_map_recovers_se_hyperparameters(se_at_seed, record_property):
    """n = 300 draw from the prior (seed 0): measured ℓ = (0.244, 0.758) for (0.25, 0.6),
    σ² = 2.23 for 2.0, σ_n² = 0.0435 for 0.05.

    The fit must beat the truth on its own objective (the optimiser's part; any draw), and recover the
    hyperparameters as well as 300 points allow (the statistics' part). Over the seed sweep's 20 prior draws
    (tests/conftest.py) ℓ was off by up to 77 %, σ² by a factor 0.32-2.13 (weakly identified on a bounded
    domain, traded against ℓ), σ_n² by up to 18 %: the tolerances are ℓ ±90 %, σ² within a factor 4, σ_n² ±30 %.
    (Until the sweep they were ±30 %, a factor 2 and ±25 %, which 4 of the 20 draws broke.)"""
    se_fit = se_at_seed
    th = se_fit.theta_
    record_property("lengthscale_rel_gap", float(np.max(np.abs(th["lengthscale"] / TRUE_SE["lengthscale"] - 1))))
    record_property("variance_ratio", float(th["variance"] / TRUE_SE["variance"]))
    record_property("noise_rel_gap", float(abs(th["noise"] / TRUE_SE["noise"] - 1)))
    truth = {k: TRUE_SE[k] for k in ("lengthscale", "variance", "noise")}
    record_property(
        "objective_gain_over_truth", float(se_fit.log_marginal_likelihood() - se_fit.log_marginal_likelihood(truth))
    )
    assert se_fit.log_marginal_likelihood() >= se_fit.log_marginal_likelihood(truth)
    np.testing.assert_allclose(th["lengthscale"], TRUE_SE["lengthscale"], rtol=0.90)  # sweep: 0.774
    assert 0.25 < th["variance"] / TRUE_SE["variance"] < 4.0  # sweep: 0.32-2.13
    np.testing.assert_allclose(th["noise"], TRUE_SE["noise"], rtol=0.30)  # sweep: 0.18
    assert all(se_fit.fit_info_["converged"])
    assert se_fit.fit_info_["backend"] == "numpy"


@SEEDED
def test_reml_recovers_matern_hyperparameters_and_mean(m52_at_seed, record_property):
    """Matérn-5/2, constant mean 5, REML (seed 1): measured ℓ = (0.314, 0.486),
    σ² = 1.86, σ_n² = 0.0227, m̂ = 3.71; m̂ must lie within 3 GLS standard errors.

    As for the SE fit: the fit beats the truth on its own objective, and the tolerances are what the seed sweep's
    20 prior draws showed: ℓ off by up to 43 % (tolerance 60 %), σ² by a factor 0.28-2.60 (within 4), σ_n² by up
    to 24 % (30 %), m̂ up to 2.22 standard errors (3). (Until the sweep: ±30 %, a factor 2 and ±25 %, which 4 of
    the 20 draws broke.)"""
    m52_fit = m52_at_seed
    th = m52_fit.theta_
    se_mean = np.sqrt(1.0 / m52_fit._state["s"])  # Var(m̂) = 1 / (1ᵀK⁻¹1)
    record_property("lengthscale_rel_gap", float(np.max(np.abs(th["lengthscale"] / TRUE_M52["lengthscale"] - 1))))
    record_property("variance_ratio", float(th["variance"] / TRUE_M52["variance"]))
    record_property("noise_rel_gap", float(abs(th["noise"] / TRUE_M52["noise"] - 1)))
    record_property("mean_gap_in_se", float(abs(th["mean_"] - TRUE_M52["mean"]) / se_mean))
    truth = {k: TRUE_M52[k] for k in ("lengthscale", "variance", "noise")}
    gain = m52_fit.log_marginal_likelihood() - m52_fit.log_marginal_likelihood(truth)
    record_property("objective_gain_over_truth", float(gain))
    assert gain >= 0
    np.testing.assert_allclose(th["lengthscale"], TRUE_M52["lengthscale"], rtol=0.60)  # sweep: 0.426
    assert 0.25 < th["variance"] / TRUE_M52["variance"] < 4.0  # sweep: 0.28-2.60
    np.testing.assert_allclose(th["noise"], TRUE_M52["noise"], rtol=0.30)  # sweep: 0.24
    assert abs(th["mean_"] - TRUE_M52["mean"]) < 3 * se_mean
    assert m52_fit.mean_ == th["mean_"]


@SEEDED
@pytest.mark.parametrize("which", ["se", "m52"])
def test_fitted_theta_is_a_local_maximum(which, se_at_seed, m52_at_seed):
    gp = se_at_seed if which == "se" else m52_at_seed
    best = gp.log_marginal_likelihood()
    assert best == pytest.approx(gp.log_marginal_likelihood_value_)
    assert best == pytest.approx(gp.fit_info_["best_objective"], abs=1e-8)
    th = gp.theta_
    for key, factor in [("variance", 1.05), ("variance", 0.95), ("noise", 1.05), ("noise", 0.95)]:
        assert gp.log_marginal_likelihood({key: th[key] * factor}) < best
    for j in range(2):
        for f in (0.97, 1.03):
            ls = th["lengthscale"].copy()
            ls[j] *= f
            assert gp.log_marginal_likelihood({"lengthscale": ls}) < best


def test_fit_is_deterministic_under_seed(se_data, se_fit):
    again = GaussianProcessRegressor(kernel="se", random_state=0).fit(*se_data)
    np.testing.assert_allclose(again.theta_["lengthscale"], se_fit.theta_["lengthscale"], rtol=1e-10)
    assert clone(se_fit).get_params() == se_fit.get_params()
    assert not hasattr(clone(se_fit), "theta_")


# ------------------------------------------------------------------ objectives (NumPy)
def test_ml_equals_multivariate_normal_logpdf(se_fit):
    th = {"lengthscale": np.array([0.4, 0.3]), "variance": 1.2, "noise": 0.1}
    X, y = se_fit.X_train_, se_fit.y_train_
    K = kernel("se", X, None, th["lengthscale"], th["variance"]) + th["noise"] * np.eye(len(y))
    ref = stats.multivariate_normal(np.zeros(len(y)), K).logpdf(y)
    assert se_fit.log_marginal_likelihood(th) == pytest.approx(ref, rel=1e-10)


def test_reml_and_profile_ml_closed_forms(m52_data):
    X, y = m52_data
    X, y = X[:80], y[:80]
    th = {"lengthscale": np.array([0.4, 0.3]), "variance": 1.2, "noise": 0.1}
    K = kernel("matern", X, None, th["lengthscale"], th["variance"], p=2) + 0.1 * np.eye(80)
    Ki = np.linalg.inv(K)
    one = np.ones(80)
    Qi = Ki - np.outer(Ki @ one, one @ Ki) / (one @ Ki @ one)
    logdet = np.linalg.slogdet(K)[1]
    reml = -0.5 * (y @ Qi @ y + logdet + np.log(one @ Ki @ one) + 79 * np.log(2 * np.pi))
    mhat = (one @ Ki @ y) / (one @ Ki @ one)
    ml = stats.multivariate_normal(mhat * one, K).logpdf(y)
    for objective, ref in [("reml", reml), ("ml", ml)]:
        gp = GaussianProcessRegressor(
            kernel="matern", p=2, mean="constant", objective=objective, theta=th, optimize=False
        ).fit(X, y)
        assert gp.log_marginal_likelihood() == pytest.approx(ref, rel=1e-10)
        assert gp.mean_ == pytest.approx(mhat, rel=1e-10)


# ------------------------------------------------------------------ σ(θ, x) for any θ
def _kriging_reference(X, y, Xs, th, kern, p, constant):
    """Direct solve of the (universal) kriging system, from scratch."""
    n = len(y)
    K = kernel(kern, X, None, th["lengthscale"], th["variance"], p=p) + th["noise"] * np.eye(n)
    ks = kernel(kern, X, Xs, th["lengthscale"], th["variance"], p=p)
    if not constant:
        w = np.linalg.solve(K, ks)
        return w.T @ y, th["variance"] - np.sum(w * ks, axis=0)
    A = np.block([[K, np.ones((n, 1))], [np.ones((1, n)), np.zeros((1, 1))]])
    sol = np.linalg.solve(A, np.vstack([ks, np.ones((1, ks.shape[1]))]))
    w, nu = sol[:n], sol[n]
    return w.T @ y, th["variance"] - np.sum(w * ks, axis=0) - nu


@pytest.mark.parametrize("which", ["se", "m52"])
def test_sigma_for_new_theta_equals_recomputation(which, se_fit, m52_fit):
    gp = se_fit if which == "se" else m52_fit
    rng = np.random.default_rng(5)
    Xs = rng.uniform(-0.2, 1.2, size=(50, 2))
    new = {"lengthscale": np.array([0.17, 0.9]), "variance": 0.7, "noise": 0.3}
    for th in (new, None):
        mu, sd = gp.predict_mean_std(Xs, theta=th, include_noise=False)
        th_full = gp.theta_ if th is None else th
        ref_mu, ref_var = _kriging_reference(
            gp.X_train_, gp.y_train_, Xs, th_full, gp.kernel, gp.p, gp.mean == "constant"
        )
        np.testing.assert_allclose(mu, ref_mu, rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(sd, np.sqrt(ref_var), rtol=1e-7)
        mu2, sd2 = gp.predict_mean_std(Xs, theta=th, include_noise=True)
        np.testing.assert_allclose(sd2**2, sd**2 + th_full["noise"], rtol=1e-12)
        np.testing.assert_allclose(mu2, mu)
    # the fitted factorisation is untouched by predictions at another θ
    np.testing.assert_allclose(gp.predict_mean_std(Xs)[0], gp.predict_mean_std(Xs, theta=gp.theta_)[0])


def test_partial_theta_fills_in_fitted_values(se_fit):
    Xs = se_fit.X_train_[:7]
    ls = np.array([0.3, 0.3])
    a = se_fit.predict_mean_std(Xs, theta={"lengthscale": 0.3})
    b = se_fit.predict_mean_std(Xs, theta={**se_fit.theta_, "lengthscale": ls})
    np.testing.assert_allclose(a, b)
    np.testing.assert_allclose(
        se_fit.kernel_matrix(Xs, theta={"lengthscale": ls}), kernel("se", Xs, None, ls, se_fit.theta_["variance"])
    )


def test_predict_returns_normal_contract(se_fit):
    from scipy.special import ndtri

    Xs = se_fit.X_train_[:4]
    levels = np.array([0.1, 0.5, 0.9])
    pred = se_fit.predict(Xs, levels=levels)
    assert isinstance(pred, xr.Dataset) and pred.attrs["family"] == "normal"
    mu, sd = se_fit.predict_mean_std(Xs)
    np.testing.assert_allclose(pred["quantile"].values, mu[:, None] + sd[:, None] * ndtri(levels))


def test_interpolation_reproduces_training_data():
    X, y = draw_prior(2, 40, [0.3], 1.0, 0.0 + 1e-10)
    gp = GaussianProcessRegressor(
        kernel="matern", p=1, noise=False, theta={"lengthscale": 0.3, "variance": 1.0}, optimize=False
    ).fit(X, y)
    mu, sd = gp.predict_mean_std(X, include_noise=False)
    np.testing.assert_allclose(mu, y, atol=1e-6)
    assert sd.max() < 1e-3
    assert gp.theta_["noise"] == pytest.approx(1e-8)


# ------------------------------------------------------------------------ the PyMC model
@pytest.mark.parametrize("which", ["se", "m52"])
def test_pymc_model_logp_equals_numpy_objective(which, se_fit, m52_fit):
    gp = se_fit if which == "se" else m52_fit
    th = {"lengthscale": np.array([0.4, 0.35]), "variance": 1.3, "noise": 0.07}
    point = {
        "log_lengthscale": np.log(th["lengthscale"]),
        "log_variance": np.log(th["variance"]),
        "log_noise": np.log(th["noise"]),
    }
    flat = gp.build_model(priors="flat")
    lp = flat.compile_logp(mode="FAST_COMPILE")(point)
    assert lp == pytest.approx(gp.log_marginal_likelihood(th), rel=1e-10)
    weak = gp.build_model(priors="weak")
    centre, _, _ = _pymc.heuristics(gp._spec(2), gp.X_train_, gp.y_train_, gp.nugget)
    values = np.concatenate([point["log_lengthscale"], [point["log_variance"], point["log_noise"]]])
    prior = stats.norm(centre, 2.0).logpdf(values).sum()
    assert weak.compile_logp(mode="FAST_COMPILE")(point) == pytest.approx(lp + prior, abs=1e-7)


def test_compiled_gradient_matches_finite_differences(se_fit):
    spec = se_fit._spec(2)
    entry = _pymc.compiled(spec, get_compile_mode())
    import pymc as pm

    pm.set_data({"X": se_fit.X_train_[:60], "y": se_fit.y_train_[:60]}, model=entry.model)
    x = np.log([0.3, 0.5, 1.5, 0.1])
    _, grad = entry.value_and_grad(x)
    fd = np.array([(entry.value_and_grad(x + h)[0] - entry.value_and_grad(x - h)[0]) / 2e-6 for h in np.eye(4) * 1e-6])
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6)


def test_compile_mode_is_configurable(se_data):
    X, y = se_data
    old = get_compile_mode()
    try:
        set_compile_mode("FAST_COMPILE")
        assert get_compile_mode() == "FAST_COMPILE"
    finally:
        set_compile_mode(old)
    # the exact GP fits with the NumPy objective; the sparse GP's fit compiles the PyMC one
    gp = GaussianProcessRegressor(compile_mode="FAST_COMPILE", n_restarts=1, random_state=0)
    gp.fit(X[:50], y[:50])
    assert gp.fit_info_["backend"] == "numpy" and "compile_mode" not in gp.fit_info_
    from calibprob.bases.gp import SparseGaussianProcessRegressor

    vfe = SparseGaussianProcessRegressor(n_inducing=10, compile_mode="FAST_COMPILE", n_restarts=1, random_state=0).fit(
        X[:50], y[:50]
    )
    assert vfe.fit_info_["compile_mode"] == "FAST_COMPILE" and vfe.fit_info_["backend"] == "pytensor"


@pytest.mark.slow
def test_build_model_samples_with_nuts():
    """Full NUTS on a tiny problem (12–35 s): the MAP lies inside the posterior's 96 % range."""
    import pymc as pm
    from threadpoolctl import threadpool_limits

    X, y = draw_prior(0, 20, [0.3], 1.0, 0.01)
    gp = GaussianProcessRegressor(random_state=0).fit(X, y)
    # 20 x 20 matrices: threaded BLAS only adds overhead (minutes on a busy 2-core box)
    with gp.build_model(), threadpool_limits(limits=1, user_api="blas"):
        idata = pm.sample(
            200,
            tune=200,
            chains=2,
            cores=1,
            random_seed=1,
            progressbar=False,
            compile_kwargs={"mode": "FAST_COMPILE"},
            nuts_sampler="pymc",
            compute_convergence_checks=False,
        )
    post = idata.posterior["lengthscale"].values.ravel()
    assert np.quantile(post, 0.02) < gp.theta_["lengthscale"][0] < np.quantile(post, 0.98)


# ------------------------------------------------------------------------------ bad input
def test_bad_input_messages(se_data):
    X, y = se_data
    gp = GaussianProcessRegressor(theta=TRUE_SE, optimize=False)
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"X must be finite.*NaN\) at index \(3, 1\)"):
        gp.fit(Xn, y)
    yi = y.copy()
    yi[7] = np.inf
    with pytest.raises(ValueError, match=r"y must be finite.*inf\) at index 7"):
        gp.fit(X, yi)
    with pytest.raises(ValueError, match="mismatched lengths: X has 300, y has 299"):
        gp.fit(X, y[:-1])
    with pytest.raises(ValueError, match=r"X must be 2-D.*reshape\(-1, 1\)"):
        gp.fit(X[:, 0], y)
    with pytest.raises(ValueError, match="kernel must be one of 'se', 'matern'; got 'rbf'"):
        GaussianProcessRegressor(kernel="rbf").fit(X, y)
    with pytest.raises(ValueError, match=r"p must be >= 0.*got -1"):
        GaussianProcessRegressor(kernel="matern", p=-1).fit(X, y)
    with pytest.raises(ValueError, match="objective='reml' needs mean='constant'"):
        GaussianProcessRegressor(objective="reml").fit(X, y)
    with pytest.raises(ValueError, match="optimize=False needs fixed hyperparameters"):
        GaussianProcessRegressor(optimize=False).fit(X, y)
    with pytest.raises(ValueError, match="n_restarts must be >= 1; got 0"):
        GaussianProcessRegressor(n_restarts=0).fit(X, y)
    with pytest.raises(ValueError, match=r"theta has unknown key\(s\) \['ls'\]"):
        GaussianProcessRegressor(theta={"ls": 1.0}, optimize=False).fit(X, y)
    with pytest.raises(ValueError, match=r"theta\['variance'\] must be finite and > 0; got -1"):
        GaussianProcessRegressor(theta={**TRUE_SE, "variance": -1}, optimize=False).fit(X, y)


def test_lifecycle_and_shape_errors(se_fit):
    gp = GaussianProcessRegressor()
    for call in (
        lambda: gp.predict_mean_std(np.zeros((2, 2))),
        lambda: gp.predict(np.zeros((2, 2))),
        gp.loo,
        lambda: gp.kernel_matrix(np.zeros((2, 2))),
    ):
        with pytest.raises(NotFittedError, match=r"not fitted yet\. Call fit\(\.\.\.\)"):
            call()
    with pytest.raises(ValueError, match="X has 3 features but the model was fitted with 2"):
        se_fit.predict_mean_std(np.zeros((4, 3)))
    with pytest.raises(
        ValueError, match=r"theta\['lengthscale'\] must be a scalar or have one entry per feature \(2\)"
    ):
        se_fit.predict_mean_std(np.zeros((4, 2)), theta={"lengthscale": [1.0, 2.0, 3.0]})


def test_blas_thread_policy_is_validated_and_restored(se_data):
    from threadpoolctl import threadpool_info

    from calibprob.bases.gp import get_blas_threads, set_blas_threads

    with pytest.raises(ValueError, match="blas_threads must be 'auto', None or a positive int; got 0"):
        set_blas_threads(0)
    before = [i["num_threads"] for i in threadpool_info()]
    X, y = se_data
    GaussianProcessRegressor(theta=TRUE_SE, optimize=False).fit(X[:50], y[:50])
    assert [i["num_threads"] for i in threadpool_info()] == before
    assert get_blas_threads() == "auto"


def test_smooth_kernel_on_few_points_does_not_stop_in_the_white_noise_mode():
    # Branin, n = 40, Matern nu = 9.5, REML: from var(y) the first start used to slide into
    # lengthscales ~1e-2 (REML -194) while the basin at lengthscales ~(6, 30) has REML -63.
    # The start's variance scan must land the single data-based start in the best basin
    # found by 20 random restarts.

    from calibprob.compare import load_spec
    from calibprob.compare.tasks import _prepare

    spec = load_spec(MODELS / "pion2024-table1-p9.toml")
    seed, arrays = _prepare(spec, "branin", 14)
    X, y = arrays["train"]
    opts = dict(kernel="matern", p=9, mean="constant", objective="reml", noise=False, random_state=seed)
    one = GaussianProcessRegressor(n_restarts=1, **opts).fit(X, y)
    many = GaussianProcessRegressor(n_restarts=20, **opts).fit(X, y)
    assert one.fit_info_["best_objective"] == pytest.approx(many.fit_info_["best_objective"], abs=1e-3)
    assert np.all(one.theta_["lengthscale"] > 1.0)


def test_adam_protocol_is_a_few_steps_of_adam_from_log2():
    # optimizer="adam" reproduces Capone et al.'s loose base: the result equals a hand-written
    # Adam on the same compiled objective, and is a worse fit than L-BFGS-B to convergence.
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, size=(60, 2))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.normal(size=60)
    loose = GaussianProcessRegressor(optimizer="adam", adam_steps=20, learning_rate=0.1).fit(X, y)
    tight = GaussianProcessRegressor(random_state=0).fit(X, y)
    assert loose.fit_info_["best_objective"] < tight.fit_info_["best_objective"] - 1.0
    # independent Adam on a finite-difference gradient of the public objective
    from calibprob.bases.gp import _pymc

    spec = loose._spec(2)
    x = np.full(4, np.log(np.log(2.0)))
    m = v = np.zeros(4)

    def f(z):
        return loose.log_marginal_likelihood(_pymc.unpack(spec, z))

    for t in range(1, 21):
        g = np.array([(f(x + h) - f(x - h)) / 2e-6 for h in 1e-6 * np.eye(4)]) / -60
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        x = x - 0.1 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    np.testing.assert_allclose(np.log(loose.theta_["lengthscale"]), x[:2], atol=1e-4)
    np.testing.assert_allclose(np.log([loose.theta_["variance"], loose.theta_["noise"]]), x[2:], atol=1e-4)


def test_optimizer_option_is_validated():
    with pytest.raises(ValueError, match="optimizer must be one of 'lbfgs', 'adam'; got 'sgd'"):
        GaussianProcessRegressor(optimizer="sgd").fit(np.zeros((3, 1)), np.zeros(3))


# -- scale: hyperparameters on a subset, memory check, chunked prediction ---------------------


def test_subset_hyperparameters_equal_a_manual_fit_on_the_subset(se_data):
    X, y = se_data
    gp = GaussianProcessRegressor(random_state=3, n_hyper_subset=120, refine_hyper=False).fit(X, y)
    rec = gp.fit_info_["hyper_subset"]
    idx = rec["indices"]
    assert rec["size"] == 120 and len(np.unique(idx)) == 120 and not rec["refined"]
    manual = GaussianProcessRegressor(random_state=3).fit(X[idx], y[idx])
    for key in ("lengthscale", "variance", "noise"):
        np.testing.assert_array_equal(gp.theta_[key], manual.theta_[key])
    # ... and the factorisation is on every row: the objective is the full data's at that θ
    fixed = GaussianProcessRegressor(theta=manual.theta_, optimize=False).fit(X, y)
    assert gp.log_marginal_likelihood_value_ == pytest.approx(fixed.log_marginal_likelihood_value_, rel=1e-12)
    assert gp.X_train_.shape[0] == len(y)
    # the same seed draws the same subset
    again = GaussianProcessRegressor(random_state=3, n_hyper_subset=120, refine_hyper=False).fit(X, y)
    np.testing.assert_array_equal(again.fit_info_["hyper_subset"]["indices"], idx)


@pytest.mark.parametrize("kern, mean, objective", [("se", "zero", "ml"), ("matern", "constant", "reml")])
def test_refined_subset_fit_reaches_the_full_fit_optimum(kern, mean, objective):
    X, y = draw_prior(4, 260, [0.3, 0.5], 1.5, 0.02, kern=kern, mean=2.0 if mean == "constant" else 0.0)
    kw = dict(kernel=kern, mean=mean, objective=objective, random_state=0)
    full = GaussianProcessRegressor(n_hyper_subset=None, **kw).fit(X, y)
    sub = GaussianProcessRegressor(n_hyper_subset=90, refine_hyper=True, **kw).fit(X, y)
    assert sub.fit_info_["hyper_subset"]["refined"] and all(sub.fit_info_["converged"])
    assert sub.log_marginal_likelihood_value_ == pytest.approx(full.log_marginal_likelihood_value_, rel=1e-9)
    np.testing.assert_allclose(sub.theta_["lengthscale"], full.theta_["lengthscale"], rtol=1e-3)
    # fewer full-data evaluations than the multi-start on every row
    ev_sub, ev_full = sub.fit_info_["n_evaluations"], full.fit_info_["n_evaluations"]
    assert ev_sub["value_and_grad"] + ev_sub["value"] < ev_full["value_and_grad"] + ev_full["value"]


def test_auto_subset_policy():
    gp = GaussianProcessRegressor()
    assert gp._subset_plan(999) == (None, False)
    assert gp._subset_plan(1000) == (500, True)
    assert gp._subset_plan(4000) == (500, True)
    assert gp._subset_plan(4001) == (2000, False)
    assert GaussianProcessRegressor(n_hyper_subset=None)._subset_plan(10**5) == (None, False)
    assert GaussianProcessRegressor(n_hyper_subset=300)._subset_plan(200) == (None, False)
    assert GaussianProcessRegressor(n_hyper_subset=300, refine_hyper=True)._subset_plan(10**4) == (300, True)
    assert GaussianProcessRegressor(optimize=False, theta={})._subset_plan(10**4) == (None, False)
    assert GaussianProcessRegressor(optimizer="adam")._subset_plan(10**4) == (None, False)


def test_subset_options_are_validated(se_data):
    X, y = se_data
    with pytest.raises(ValueError, match="n_hyper_subset"):
        GaussianProcessRegressor(n_hyper_subset=2).fit(X, y)
    with pytest.raises(TypeError, match="n_hyper_subset"):
        GaussianProcessRegressor(n_hyper_subset="half").fit(X, y)
    with pytest.raises(ValueError, match="refine_hyper must be True, False or 'auto'; got 'yes'"):
        GaussianProcessRegressor(refine_hyper="yes").fit(X, y)


def test_memory_check_refuses_before_allocating(monkeypatch):
    import tracemalloc

    from calibprob.bases.gp import _shared  # the memory check of the exact and the sparse GP

    rng = np.random.default_rng(0)
    n = 3000  # one n x n float64 matrix: 72 MB
    X, y = rng.uniform(size=(n, 2)), rng.normal(size=n)
    monkeypatch.setattr(_shared, "available_memory", lambda: (50e6, "the available memory"))
    for gp in (GaussianProcessRegressor(n_hyper_subset=None), GaussianProcessRegressor(n_hyper_subset=500)):
        tracemalloc.start()
        with pytest.raises(
            MemoryError, match=r"SparseGaussianProcessRegressor, spec kind 'sparse-gp'.*CALIBPROB_GP_MEMORY_GB"
        ):
            gp.fit(X, y)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 8 * n * n / 4  # refused before a quarter of one n x n matrix existed
    # a fitted model refuses a factorisation at another θ and the LOO the same way
    monkeypatch.setattr(_shared, "available_memory", lambda: (float("inf"), "unknown"))
    gp = GaussianProcessRegressor(theta={"lengthscale": 0.3, "variance": 1.0, "noise": 0.1}, optimize=False)
    gp.fit(X[:200], y[:200])
    monkeypatch.setattr(_shared, "available_memory", lambda: (1e3, "the available memory"))
    with pytest.raises(MemoryError, match="factorisation of the covariance"):
        gp.predict_mean_std(X[:5], theta={"noise": 0.2})
    with pytest.raises(MemoryError, match="leave-one-out"):
        gp.loo()


def test_memory_cap_from_the_environment(monkeypatch, se_data):
    from calibprob.bases.gp import exact

    X, y = se_data
    monkeypatch.setenv(exact.MEMORY_ENV, "0.0001")  # 100 kB < one 300 x 300 matrix (720 kB)
    with pytest.raises(MemoryError, match=r"the cap CALIBPROB_GP_MEMORY_GB=0.0001 is 0.00 GB"):
        GaussianProcessRegressor().fit(X, y)
    monkeypatch.setenv(exact.MEMORY_ENV, "lots")
    with pytest.raises(ValueError, match="CALIBPROB_GP_MEMORY_GB must be a number of GB; got 'lots'"):
        GaussianProcessRegressor().fit(X, y)
    monkeypatch.setenv(exact.MEMORY_ENV, "1")
    assert exact.available_memory() == (1e9, "the cap CALIBPROB_GP_MEMORY_GB=1")


@pytest.mark.parametrize("mean", ["zero", "constant"])
def test_chunked_prediction_equals_unchunked_exactly(monkeypatch, mean):
    from calibprob.bases.gp import exact

    X, y = draw_prior(5, 200, [0.3, 0.5], 1.0, 0.05, mean=1.0 if mean == "constant" else 0.0)
    gp = GaussianProcessRegressor(mean=mean, random_state=0).fit(X, y)
    Xs = np.random.default_rng(1).uniform(size=(301, 2))
    mu1, sd1 = gp.predict_mean_std(Xs)
    assert gp._predict_rows() >= Xs.shape[0]  # one block
    monkeypatch.setattr(exact, "_CHUNK", 7)
    assert gp._predict_rows() == 7
    mu2, sd2 = gp.predict_mean_std(Xs)
    np.testing.assert_array_equal(mu1, mu2)
    # the std goes through a triangular solve with one right-hand side per test row; SciPy 1.18.1's
    # OpenBLAS rounds its trsm differently with the number of right-hand sides (9.99e-15 relative
    # between 7-row and 301-row blocks; bit-equal with the SciPy of the last stop). The block size
    # is a function of n_train only, so a given fit still predicts the same bits on every run.
    np.testing.assert_allclose(sd1, sd2, rtol=1e-13, atol=0)
    # and the block size bounds the memory: rows x n_train <= 2**23 entries
    monkeypatch.setattr(exact, "_CHUNK", 10**9)
    assert gp._predict_rows() * gp.X_train_.shape[0] <= exact._BLOCK_ELEMENTS
