"""Split conformal predictive system: exact uniform PIT, level-wise calibration, contract."""

import numpy as np
import pytest
from scipy import stats

import calibprob
from calibprob.calibrators.conformal import ConformalPredictiveSystem, SplitConformalRegressor


def gauss_base(Xt, yt, Xn):
    """A correctly specified heteroscedastic Gaussian base: mu = 2x, sigma = 0.3 + x."""
    return 2.0 * Xn[:, 0], 0.3 + Xn[:, 0]


def base_pred(X):
    """The same base as a predictive Dataset (what a post-processor takes)."""
    return calibprob.normal(2.0 * X[:, 0], 0.3 + X[:, 0])


def draw(rng, n, skew=True):
    X = rng.uniform(0, 1, size=(n, 1))
    eps = rng.gamma(2.0, 1.0, size=n) - 2.0 if skew else rng.normal(size=n)
    return X, 2.0 * X[:, 0] + (0.3 + X[:, 0]) * eps


def run(rng, n_cal, m, skew=True):
    X, y = draw(rng, n_cal + m, skew)
    cps = ConformalPredictiveSystem().fit(base_pred(X[:n_cal]), y[:n_cal])
    return cps, base_pred(X[n_cal:]), y[n_cal:]


@pytest.mark.seeded(0)
def test_randomized_pit_is_exactly_uniform(seed, record_property):
    """Vovk et al. (2020), Thm 1: Q(Y, tau) ~ U(0, 1) for tau ~ U(0, 1) (the draws' seed from the seed sweep, 0 in the default run)."""
    rng = np.random.default_rng(seed)
    n_cal, m, reps = 19, 10, 600
    pits = np.concatenate(
        [(lambda c, X, y: c.predict_cdf(X, y, tau=rng.uniform(size=len(y))))(*run(rng, n_cal, m)) for _ in range(reps)]
    )
    u = np.linspace(0.05, 0.95, 19)
    frac = (pits[:, None] <= u[None, :]).mean(0)
    # per-draw correlation inflates the variance; bound it by the calibration-set effect ~ 1/sqrt(reps)
    se = np.sqrt(u * (1 - u) * (1.0 / (reps * m) + 1.0 / (reps * (n_cal + 2))))
    record_property("pit_error_se", float(np.max(np.abs(frac - u) / se)))
    assert np.all(np.abs(frac - u) <= 4 * se), np.abs(frac - u) / se


@pytest.mark.seeded(1)
def test_stored_quantiles_are_calibrated_level_by_level(seed, record_property):
    """floor(p(n+1))/(n+1) <= P(Y <= Q(p)) <= ceil(p(n+1))/(n+1) at every stored level (the draws' seed from the
    seed sweep, 1 in the default run)."""
    rng = np.random.default_rng(seed)
    n_cal, m, reps = 30, 20, 400
    levels = np.array([0.05, 0.2, 0.5, 0.7, 0.95])
    below = np.zeros((reps, levels.size))
    for r in range(reps):
        cps, X, y = run(rng, n_cal, m)
        q = cps.predict(X, levels=levels)["quantile"].values
        below[r] = (y[:, None] <= q).mean(0)
    mean = below.mean(0)
    se = below.std(0, ddof=1) / np.sqrt(reps)
    lo = np.floor(levels * (n_cal + 1)) / (n_cal + 1)
    hi = np.ceil(levels * (n_cal + 1)) / (n_cal + 1)
    record_property("outside_se", float(np.max(np.maximum(lo - mean, mean - hi) / se)))
    assert np.all(mean >= lo - 3 * se) and np.all(mean <= hi + 3 * se), (mean, lo, hi, se)


@pytest.mark.seeded(2)
def test_contract_and_scores_match_true_distribution(seed, record_property):
    """With many calibration points the CPS recovers the (skewed) truth: NLL near the true NLL (the draws' seed from
    the seed sweep, 2 in the default run)."""
    rng = np.random.default_rng(seed)
    X, y = draw(rng, 5000)
    cps = ConformalPredictiveSystem().fit(base_pred(X[:3000]), y[:3000])
    X, y = X[3000:], y[3000:]
    pred = cps.predict(base_pred(X))
    calibprob.validate(pred)
    assert pred.attrs["method"] == "conformal-predictive-system"
    assert pred.sizes["level"] == 99
    nll_cps = -pred.calib.logpdf(y).values.mean()
    s = 0.3 + X[:, 0]
    nll_true = -np.mean(stats.gamma(2.0, loc=-2.0).logpdf((y - 2 * X[:, 0]) / s) - np.log(s))
    nll_gauss = -np.mean(stats.norm(2 * X[:, 0], s * np.sqrt(2.0)).logpdf(y))  # right variance, wrong shape
    record_property("nll_excess", nll_cps - nll_true)
    record_property("nll_gain_over_gauss", nll_gauss - nll_cps)
    assert nll_cps < nll_true + 0.06
    assert nll_cps < nll_gauss


def test_post_processor_equals_model_aware_split_conformal_bit_for_bit():
    """On a normal Dataset the post-processor is the model-aware split conformal around the same base."""
    rng = np.random.default_rng(3)
    X, y = draw(rng, 200)
    a = ConformalPredictiveSystem(confidence_level=[0.5, 0.9]).fit(base_pred(X[:150]), y[:150])
    b = SplitConformalRegressor(estimator=gauss_base, score="signed", confidence_level=[0.5, 0.9]).fit(X[:1], y[:1])
    b.calibrate(X[:150], y[:150])
    np.testing.assert_array_equal(a.predict_interval(base_pred(X[150:]))["upper"], b.predict_interval(X[150:])["upper"])
    np.testing.assert_array_equal(
        a.predict(base_pred(X[150:]))["quantile"].values, b.predict(X[150:])["quantile"].values
    )


@pytest.mark.parametrize(
    "kwargs, names",
    [
        ({"estimator": gauss_base}, "estimator="),
        ({"estimator": gauss_base, "prefit": True}, "estimator=, prefit="),
        ({"chunk_size": 8}, "chunk_size="),
    ],
)
def test_removed_model_aware_form_is_refused_naming_the_fix(kwargs, names):
    """The 0.1.0 ``estimator=``/``prefit=``/``chunk_size=`` form was removed in 0.2.0 (CHANGELOG)."""
    with pytest.raises(
        TypeError,
        match=rf"ConformalPredictiveSystem\({names}\) was removed in calibprob 0.2.0.*"
        r"fit\(model.predict\(X_cal\), y_cal\).*SplitConformalRegressor\(estimator=",
    ):
        ConformalPredictiveSystem(score="signed", **kwargs)
    assert not hasattr(ConformalPredictiveSystem, "calibrate")  # no separate calibrate step any more
    assert "estimator" not in ConformalPredictiveSystem().get_params()


def test_unnormalized_scores_shift_one_quantile_function():
    rng = np.random.default_rng(4)
    X, y = draw(rng, 300, skew=False)
    cps = ConformalPredictiveSystem(score="signed-absolute")
    pred = cps.fit(base_pred(X[:200]), y[:200]).predict(base_pred(X[200:]))
    # constant shape: every row is a shift of the same quantile function
    q = pred["quantile"].values
    np.testing.assert_allclose(q - q[:, [49]], np.broadcast_to(q[0] - q[0, 49], q.shape), atol=1e-12)


def test_draws_from_a_non_gaussian_base_go_in_as_they_are():
    """A Student-t posterior predictive given as draws: scores from the Dataset's own mean and std."""
    rng = np.random.default_rng(6)
    n = 300
    loc = rng.normal(size=n)
    pred = calibprob.from_draws((loc[:, None] + rng.standard_t(4, size=(n, 2000))).T)
    y = loc + 1.5 * rng.standard_t(4, size=n)
    cps = ConformalPredictiveSystem().fit(pred.isel(obs=slice(200)), y[:200])
    mu, sd = pred.calib.mean().values[:200], pred.calib.std().values[:200]
    np.testing.assert_allclose(cps.scores_, np.sort((y[:200] - mu) / sd), rtol=1e-12)
    out = cps.predict(pred.isel(obs=slice(200, None)))
    np.testing.assert_array_equal(out["obs"].values, np.arange(200, 300))  # the Dataset's own obs


def test_too_few_points_for_levels():
    rng = np.random.default_rng(5)
    X, y = draw(rng, 40)
    cps = ConformalPredictiveSystem(confidence_level=0.5).fit(base_pred(X[:9]), y[:9])
    lv = cps.predict(base_pred(X[9:]))["level"].values
    assert lv.min() >= 0.1 - 1e-12 and lv.max() <= 0.9 + 1e-12  # [1/(n+1), n/(n+1)]
    with pytest.raises(ValueError, match=r"level 0.05: .*needs at least 19 calibration points; got n=9"):
        cps.predict(base_pred(X[9:]), levels=[0.05, 0.5])


@pytest.mark.parametrize(
    "args, exc, match",
    [
        ((np.zeros((10, 1)), np.zeros(10)), TypeError, r"distribution post-processor: pred_cal must be .* got ndarray"),
        ((None, np.zeros(10)), TypeError, "pred_cal must be the base model's predictive distribution"),
        (("y", np.zeros(3)), TypeError, "got str"),
    ],
)
def test_post_processor_refuses_inputs_x_with_the_fix(args, exc, match):
    with pytest.raises(exc, match=match):
        ConformalPredictiveSystem().fit(*args)


def test_bad_targets_and_unfitted():
    X, y = draw(np.random.default_rng(7), 50)
    with pytest.raises(ValueError, match="mismatched lengths: y_cal has 49 entries, the prediction has 50"):
        ConformalPredictiveSystem().fit(base_pred(X), y[:-1])
    with pytest.raises(ValueError, match="y_cal must be finite"):
        ConformalPredictiveSystem().fit(base_pred(X), np.r_[y[:-1], np.nan])
    with pytest.raises(calibprob.NotFittedError, match=r"Call fit\(\.\.\.\)"):
        ConformalPredictiveSystem().predict(base_pred(X))
