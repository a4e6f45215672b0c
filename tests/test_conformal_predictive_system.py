"""Split conformal predictive system: exact uniform PIT, level-wise calibration, contract."""

import numpy as np
import pytest
from scipy import stats

import calibprob
from calibprob.conformal import ConformalPredictiveSystem, SplitConformalRegressor


def gauss_base(Xt, yt, Xn):
    """A correctly specified heteroscedastic Gaussian base: mu = 2x, sigma = 0.3 + x."""
    return 2.0 * Xn[:, 0], 0.3 + Xn[:, 0]


def draw(rng, n, skew=True):
    X = rng.uniform(0, 1, size=(n, 1))
    eps = rng.gamma(2.0, 1.0, size=n) - 2.0 if skew else rng.normal(size=n)
    return X, 2.0 * X[:, 0] + (0.3 + X[:, 0]) * eps


def run(rng, n_cal, m, skew=True):
    X, y = draw(rng, n_cal + m, skew)
    cps = ConformalPredictiveSystem(estimator=gauss_base).fit(X[:1], y[:1]).calibrate(X[:n_cal], y[:n_cal])
    return cps, X[n_cal:], y[n_cal:]


def test_randomized_pit_is_exactly_uniform():
    """Vovk et al. (2020), Thm 1: Q(Y, tau) ~ U(0, 1) for tau ~ U(0, 1)."""
    rng = np.random.default_rng(0)
    n_cal, m, reps = 19, 10, 600
    pits = np.concatenate([
        (lambda c, X, y: c.predict_cdf(X, y, tau=rng.uniform(size=len(y))))(*run(rng, n_cal, m))
        for _ in range(reps)
    ])
    u = np.linspace(0.05, 0.95, 19)
    frac = (pits[:, None] <= u[None, :]).mean(0)
    # per-draw correlation inflates the variance; bound it by the calibration-set effect ~ 1/sqrt(reps)
    se = np.sqrt(u * (1 - u) * (1.0 / (reps * m) + 1.0 / (reps * (n_cal + 2))))
    assert np.all(np.abs(frac - u) <= 4 * se), np.abs(frac - u) / se


def test_stored_quantiles_are_calibrated_level_by_level():
    """floor(p(n+1))/(n+1) <= P(Y <= Q(p)) <= ceil(p(n+1))/(n+1) at every stored level."""
    rng = np.random.default_rng(1)
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
    assert np.all(mean >= lo - 3 * se) and np.all(mean <= hi + 3 * se), (mean, lo, hi, se)


def test_contract_and_scores_match_true_distribution():
    """With many calibration points the CPS recovers the (skewed) truth: NLL near the true NLL."""
    rng = np.random.default_rng(2)
    cps, X, y = run(rng, 3000, 2000)
    pred = cps.predict(X)
    calibprob.validate(pred)
    assert pred.attrs["method"] == "conformal-predictive-system"
    assert pred.sizes["level"] == 99
    nll_cps = -pred.calib.logpdf(y).values.mean()
    s = 0.3 + X[:, 0]
    nll_true = -np.mean(stats.gamma(2.0, loc=-2.0).logpdf((y - 2 * X[:, 0]) / s) - np.log(s))
    nll_gauss = -np.mean(stats.norm(2 * X[:, 0], s * np.sqrt(2.0)).logpdf(y))  # right variance, wrong shape
    assert nll_cps < nll_true + 0.06
    assert nll_cps < nll_gauss


def test_intervals_equal_signed_split():
    rng = np.random.default_rng(3)
    X, y = draw(rng, 200)
    a = ConformalPredictiveSystem(estimator=gauss_base, confidence_level=[0.5, 0.9]).fit(X[:1], y[:1])
    a.calibrate(X[:150], y[:150])
    b = SplitConformalRegressor(estimator=gauss_base, score="signed", confidence_level=[0.5, 0.9]).fit(X[:1], y[:1])
    b.calibrate(X[:150], y[:150])
    np.testing.assert_array_equal(a.predict_interval(X[150:])["upper"], b.predict_interval(X[150:])["upper"])


def test_unnormalized_with_mean_only_base():
    rng = np.random.default_rng(4)
    X, y = draw(rng, 300, skew=False)
    cps = ConformalPredictiveSystem(estimator=lambda a, b, c: 2.0 * c[:, 0], normalize=False)
    pred = cps.fit(X[:1], y[:1]).calibrate(X[:200], y[:200]).predict(X[200:])
    # constant shape: every row is a shift of the same quantile function
    q = pred["quantile"].values
    np.testing.assert_allclose(q - q[:, [49]], np.broadcast_to(q[0] - q[0, 49], q.shape), atol=1e-12)
    with pytest.raises(ValueError, match=r"gives only a mean"):
        ConformalPredictiveSystem(estimator=lambda a, b, c: 2.0 * c[:, 0]).fit(X[:1], y[:1]).calibrate(X, y)


def test_too_few_points_for_levels():
    rng = np.random.default_rng(5)
    X, y = draw(rng, 40)
    cps = ConformalPredictiveSystem(estimator=gauss_base, confidence_level=0.5).fit(X[:1], y[:1])
    cps.calibrate(X[:9], y[:9])
    lv = cps.predict(X[9:])["level"].values
    assert lv.min() >= 0.1 - 1e-12 and lv.max() <= 0.9 + 1e-12  # [1/(n+1), n/(n+1)]
    with pytest.raises(ValueError, match=r"level 0.05: .*needs at least 19 calibration points; got n=9"):
        cps.predict(X[9:], levels=[0.05, 0.5])
