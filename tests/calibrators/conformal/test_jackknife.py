"""Jackknife, jackknife+ and CV+: explicit-loop definitions, Barber et al. guarantees, bad input."""

import math

import numpy as np
import pytest

from calibprob._core.estimator import BaseEstimator, NotFittedError
from calibprob.calibrators.conformal import CrossConformalRegressor


class OLS(BaseEstimator):
    """Least squares with a residual-based constant sigma (a test base)."""

    def __init__(self, *, ridge: float = 0.0):
        self.ridge = ridge

    def fit(self, X, y):
        A = np.c_[np.ones(len(X)), X]
        self.coef_ = np.linalg.solve(A.T @ A + self.ridge * np.eye(A.shape[1]), A.T @ y)
        self.s_ = np.std(y - A @ self.coef_) + 1e-3
        return self

    def predict_mean_std(self, X, *, include_noise=True):
        return np.c_[np.ones(len(X)), X] @ self.coef_, np.full(len(X), self.s_) * (1 + 0.1 * np.abs(X[:, 0]))


def draw(rng, n, d=2):
    X = rng.normal(size=(n, d))
    y = X @ np.arange(1.0, d + 1) + rng.standard_t(3, size=n) * (1 + 0.5 * np.abs(X[:, 0]))
    return X, y


def explicit_plus(X, y, Xt, folds, c, score):
    """Jackknife+/CV+ by hand: xi^-, xi^+ with the ranks floor(a(n+1)), ceil((1-a)(n+1))."""
    n = len(y)
    mu_loo = np.empty((n, len(Xt)))
    s_loo = np.empty((n, len(Xt)))
    R = np.empty(n)
    for idx in folds:
        keep = np.setdiff1d(np.arange(n), idx)
        est = OLS().fit(X[keep], y[keep])
        m_i, s_i = est.predict_mean_std(X[idx])
        m_t, s_t = est.predict_mean_std(Xt)
        if score == "absolute":
            R[idx], s_t = np.abs(y[idx] - m_i), np.ones_like(s_t)
        elif score == "normalized":
            R[idx] = np.abs(y[idx] - m_i) / s_i
        else:
            R[idx] = (y[idx] - m_i) / s_i
        mu_loo[idx] = m_t
        s_loo[idx] = s_t
    a = 1 - c
    if score == "signed":
        xi = np.sort(mu_loo + R[:, None] * s_loo, axis=0)
        return xi[math.floor(a / 2 * (n + 1)) - 1], xi[math.ceil((1 - a / 2) * (n + 1)) - 1]
    lo = np.sort(mu_loo - R[:, None] * s_loo, axis=0)[math.floor(a * (n + 1)) - 1]
    hi = np.sort(mu_loo + R[:, None] * s_loo, axis=0)[math.ceil((1 - a) * (n + 1)) - 1]
    return lo, hi


@pytest.mark.parametrize("score", ["absolute", "normalized", "signed"])
@pytest.mark.parametrize("cv", ["loo", 5])
def test_plus_matches_explicit_definition(score, cv):
    rng = np.random.default_rng(0)
    X, y = draw(rng, 43)
    Xt = rng.normal(size=(17, 2))
    c = 0.8
    model = CrossConformalRegressor(estimator=OLS(), cv=cv, score=score, confidence_level=c, random_state=3)
    iv = model.fit(X, y).predict_interval(Xt)
    folds = [np.flatnonzero(model.fold_of_ == k) for k in range(len(model.estimators_))]
    lo, hi = explicit_plus(X, y, Xt, folds, c, score)
    np.testing.assert_allclose(iv["lower"], lo, atol=1e-12)
    np.testing.assert_allclose(iv["upper"], hi, atol=1e-12)
    assert iv.attrs["method"].startswith("jackknife+" if cv == "loo" else "cv+")


def test_base_jackknife_and_chunking():
    rng = np.random.default_rng(1)
    X, y = draw(rng, 30)
    Xt = rng.normal(size=(11, 2))
    model = CrossConformalRegressor(estimator=OLS(), method="base", confidence_level=[0.5, 0.9]).fit(X, y)
    iv = model.predict_interval(Xt)
    mu = OLS().fit(X, y).predict_mean_std(Xt)[0]
    q = np.sort(model.scores_)[[math.ceil(0.5 * 31) - 1, math.ceil(0.9 * 31) - 1]]
    np.testing.assert_allclose(iv["upper"].values, mu[:, None] + q[None, :], atol=1e-12)
    np.testing.assert_allclose(iv["lower"].values, mu[:, None] - q[None, :], atol=1e-12)
    # chunked J+ equals unchunked
    a = CrossConformalRegressor(estimator=OLS(), confidence_level=0.8).fit(X, y).predict_interval(Xt)
    b = CrossConformalRegressor(estimator=OLS(), confidence_level=0.8, chunk_size=3).fit(X, y).predict_interval(Xt)
    np.testing.assert_array_equal(a["lower"], b["lower"])


def test_user_callable_refits():
    rng = np.random.default_rng(2)
    X, y = draw(rng, 25)
    Xt = rng.normal(size=(6, 2))
    calls = []

    def fp(Xtr, ytr, Xn):
        calls.append(len(ytr))
        return OLS().fit(Xtr, ytr).predict_mean_std(Xn)

    iv = CrossConformalRegressor(estimator=fp, score="normalized").fit(X, y).predict_interval(Xt)
    ref = CrossConformalRegressor(estimator=OLS(), score="normalized").fit(X, y).predict_interval(Xt)
    np.testing.assert_allclose(iv["lower"], ref["lower"], atol=1e-12)
    assert set(calls) == {24}  # every fit saw n - 1 points


def coverage(cv, n, c, reps, seed, score="absolute"):
    rng = np.random.default_rng(seed)
    cov = np.empty(reps)
    for r in range(reps):
        X, y = draw(rng, n + 30)
        m = CrossConformalRegressor(estimator=OLS(), cv=cv, score=score, confidence_level=c, random_state=r)
        iv = m.fit(X[:n], y[:n]).predict_interval(X[n:])
        cov[r] = np.mean((y[n:] >= iv["lower"].values) & (y[n:] <= iv["upper"].values))
    return cov.mean(), cov.std(ddof=1) / np.sqrt(reps)


@pytest.mark.seeded(7)
def test_jackknife_plus_guarantee_fast(seed, record_property):
    """Barber et al. (2021) Thm 1: P(cover) >= 1 - 2 alpha = 2c - 1."""
    c = 0.9
    mean, se = coverage("loo", 19, c, reps=400, seed=seed)
    record_property("coverage_mean", float(mean))
    assert mean >= 2 * c - 1 - 3 * se
    # in practice close to c (not a guarantee; a sanity bound): 0.894-0.905 over the sweep's 20 seeds
    assert mean >= c - 0.05


@pytest.mark.seeded(8)
def test_cv_plus_guarantee_fast(seed, record_property):
    """CV+ (Barber et al. Thm 4): >= 2c - 1 - min(2(1-1/K)/(n/K+1), (1-K/n)/(K+1)); we check >= 2c - 1."""
    c = 0.9
    mean, se = coverage(5, 40, c, reps=400, seed=seed)
    record_property("coverage_mean", float(mean))
    assert mean >= 2 * c - 1 - 3 * se
    assert mean >= c - 0.05  # 0.903-0.913 over the sweep's 20 seeds


@pytest.mark.slow
@pytest.mark.parametrize("cv, n", [("loo", 19), ("loo", 40), (5, 40), (10, 60)])
@pytest.mark.parametrize("score", ["absolute", "normalized", "signed"])
def test_plus_guarantee_slow(cv, n, score):
    c = 0.9 if score != "signed" else 0.8
    mean, se = coverage(cv, n, c, reps=1500, seed=21, score=score)
    assert mean >= 2 * c - 1 - 3 * se


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------


def test_bad_input():
    rng = np.random.default_rng(3)
    X, y = draw(rng, 12)
    with pytest.raises(ValueError, match=r"too few training points for confidence_level=0.95: .*at least 19"):
        CrossConformalRegressor(estimator=OLS(), confidence_level=0.95).fit(X, y)
    with pytest.raises(ValueError, match=r"confidence_level must be in \(0, 1\); got 1.5"):
        CrossConformalRegressor(estimator=OLS(), confidence_level=1.5).fit(X, y)
    with pytest.raises(ValueError, match=r"cv must be <= the number of training points \(12\); got 20"):
        CrossConformalRegressor(estimator=OLS(), cv=20, confidence_level=0.5).fit(X, y)
    with pytest.raises(ValueError, match=r"cv must be >= 2"):
        CrossConformalRegressor(estimator=OLS(), cv=1, confidence_level=0.5).fit(X, y)
    with pytest.raises(ValueError, match=r"method must be one of 'plus', 'base'"):
        CrossConformalRegressor(estimator=OLS(), method="minmax").fit(X, y)
    with pytest.raises(ValueError, match=r"gives only a mean"):
        CrossConformalRegressor(
            estimator=lambda a, b, c: np.zeros(len(c)), score="normalized", confidence_level=0.5
        ).fit(X, y)
    with pytest.raises(NotFittedError, match=r"Call fit"):
        CrossConformalRegressor(estimator=OLS()).predict_interval(X)
    m = CrossConformalRegressor(estimator=OLS(), confidence_level=0.5).fit(X, y)
    with pytest.raises(ValueError, match=r"confidence_level=0.99: .*at least 99 training points"):
        m.predict_interval(X, confidence_level=0.99)
