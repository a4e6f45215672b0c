"""CQR inside jackknife+ / CV+ (``CrossConformalRegressor(score="cqr")``): a hand computation, an exact identity
with the absolute-score jackknife+, and bad input.

Romano, Patterson & Candès (2019)'s score :math:`E_i = \\max(\\hat q_{lo}^{-i}(x_i) - y_i, y_i - \\hat q_{hi}^{-i}(x_i))`
with Barber et al. (2021)'s ranks :math:`\\lfloor\\alpha(n+1)\\rfloor` (lower, over :math:`\\hat q_{lo}^{-i}(x) - E_i`)
and :math:`\\lceil(1-\\alpha)(n+1)\\rceil` (upper, over :math:`\\hat q_{hi}^{-i}(x) + E_i`).
"""

import math

import numpy as np
import pytest
from scipy.stats import norm

import calibprob
from calibprob._core.estimator import BaseEstimator
from calibprob.calibrators.conformal import CQRScore, CrossConformalRegressor


class GaussianOLS(BaseEstimator):
    """Least squares with a Gaussian predictive N(x'b, s^2): s the residual RMS (``sigma=None``) or a fixed value."""

    def __init__(self, *, sigma=None):
        self.sigma = sigma

    def fit(self, X, y):
        A = np.c_[np.ones(len(X)), X]
        self.coef_ = np.linalg.lstsq(A, y, rcond=None)[0]
        self.s_ = float(np.sqrt(np.mean((y - A @ self.coef_) ** 2))) if self.sigma is None else float(self.sigma)
        return self

    def predict_mean_std(self, X, *, include_noise=True):
        return np.c_[np.ones(len(X)), X] @ self.coef_, np.full(len(X), self.s_)

    def predict(self, X):
        mu, s = self.predict_mean_std(X)
        return calibprob.normal(mu, s)


class MeanOnly(BaseEstimator):
    """A base with no predictive distribution: predict returns the mean array."""

    def fit(self, X, y):
        self.m_ = float(np.mean(y))
        return self

    def predict(self, X):
        return np.full(len(X), self.m_)


def _tiny():
    rng = np.random.default_rng(3)
    X = rng.uniform(-1.0, 1.0, size=(8, 1))
    y = 1.0 + 2.0 * X[:, 0] + rng.normal(scale=0.5, size=8)
    return X, y, np.array([[-0.7], [0.1], [0.9]])


def test_cqr_jackknife_plus_equals_a_hand_computation():
    """n = 8, level 0.6: refit OLS without each point, closed-form normal quantiles mu -/+ z s, scores, two ranks."""
    X, y, Xt = _tiny()
    c = 0.6
    n, a = len(y), 1.0 - c
    z = norm.ppf(1.0 - a / 2.0)
    lo_seq, hi_seq = [], []
    for i in range(n):
        keep = np.arange(n) != i
        A = np.c_[np.ones(n - 1), X[keep, 0]]
        b = np.linalg.solve(A.T @ A, A.T @ y[keep])  # closed-form least squares
        s = math.sqrt(np.sum((y[keep] - A @ b) ** 2) / (n - 1))
        mu_i, mu_t = b[0] + b[1] * X[i, 0], b[0] + b[1] * Xt[:, 0]
        E = max((mu_i - z * s) - y[i], y[i] - (mu_i + z * s))
        lo_seq.append(mu_t - z * s - E)
        hi_seq.append(mu_t + z * s + E)
    k_lo, k_hi = math.floor(a * (n + 1)), math.ceil((1 - a) * (n + 1))  # 3 and 6 of 8
    assert (k_lo, k_hi) == (3, 6)
    want_lo = np.sort(np.array(lo_seq), axis=0)[k_lo - 1]
    want_hi = np.sort(np.array(hi_seq), axis=0)[k_hi - 1]
    model = CrossConformalRegressor(estimator=GaussianOLS(), score="cqr", confidence_level=c).fit(X, y)
    iv = model.predict_interval(Xt)
    np.testing.assert_allclose(iv["lower"].values, want_lo, rtol=0, atol=1e-12)
    np.testing.assert_allclose(iv["upper"].values, want_hi, rtol=0, atol=1e-12)
    assert iv.attrs["method"] == "jackknife+-cqr"
    assert model.scores_.shape == (n, 1)


@pytest.mark.parametrize("cv", ["loo", 4])
def test_constant_sigma_cqr_jackknife_plus_is_absolute_jackknife_plus(cv):
    r"""Identity: with a symmetric Gaussian base of fixed :math:`\sigma`, :math:`\hat q_{lo,hi}^{-i} = \mu_{-i} \mp z\sigma`,
    so :math:`E_i = |y_i - \mu_{-i}(x_i)| - z\sigma = R_i - z\sigma` and
    :math:`\hat q_{lo}^{-i}(x) - E_i = \mu_{-i}(x) - R_i`, :math:`\hat q_{hi}^{-i}(x) + E_i = \mu_{-i}(x) + R_i`:
    the two sequences, hence the order statistics, are jackknife+'s with the absolute residual (the quantile
    offset :math:`z\sigma` cancels). Equal to rounding, at every level."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(30, 2))
    y = X @ np.array([1.0, -0.5]) + rng.standard_t(4, size=30)
    Xt = rng.normal(size=(7, 2))
    levels = [0.5, 0.8, 0.9]
    kw = {"estimator": GaussianOLS(sigma=0.7), "cv": cv, "random_state": 0, "confidence_level": levels}
    cqr = CrossConformalRegressor(score="cqr", **kw).fit(X, y).predict_interval(Xt)
    absolute = CrossConformalRegressor(score="absolute", **kw).fit(X, y).predict_interval(Xt)
    np.testing.assert_allclose(cqr["lower"].values, absolute["lower"].values, rtol=0, atol=1e-12)
    np.testing.assert_allclose(cqr["upper"].values, absolute["upper"].values, rtol=0, atol=1e-12)


def test_scores_at_other_levels_and_fit_from_refits():
    """A level not given at fit is scored from the stored leave-out predictives; the refit split gives fit's result."""
    X, y, Xt = _tiny()
    model = CrossConformalRegressor(estimator=GaussianOLS(), score="cqr", confidence_level=0.6, cv=4, random_state=1)
    fitted = model.fit(X, y)
    both = fitted.predict_interval(Xt, confidence_level=[0.6, 0.5])
    alone = (
        CrossConformalRegressor(estimator=GaussianOLS(), score="cqr", confidence_level=0.5, cv=4, random_state=1)
        .fit(X, y)
        .predict_interval(Xt)
    )
    np.testing.assert_array_equal(both["lower"].values[:, 1], alone["lower"].values)
    np.testing.assert_array_equal(both["upper"].values[:, 1], alone["upper"].values)
    refits = [model.fit_refit(X, y, k) for k in range(model.n_refits(len(y)))]
    again = CrossConformalRegressor(
        estimator=GaussianOLS(), score="cqr", confidence_level=0.6, cv=4, random_state=1
    ).fit_from_refits(X, y, refits)
    np.testing.assert_array_equal(again.predict_interval(Xt)["lower"].values, both["lower"].values[:, 0])
    np.testing.assert_array_equal(again.scores_, fitted.scores_)


def test_cqr_score_object():
    """The score and its inverse: {y : E <= t} = [q_lo - t, q_hi + t]."""
    s = CQRScore()
    np.testing.assert_array_equal(s.score([0.0, 5.0, -3.0], -1.0, 2.0), [-1.0, 3.0, 2.0])
    lo, hi = s.inverse(0.25, [-1.0], [2.0])
    assert (lo.tolist(), hi.tolist()) == ([-1.25], [2.25])
    np.testing.assert_array_equal(CQRScore.quantile_levels([0.9])[0], [(1 - 0.9) / 2])
    with pytest.raises(ValueError, match="score='cqr' needs the base's upper quantile q_hi"):
        s.score([0.0], [0.0])


def test_bad_input():
    X, y, Xt = _tiny()
    with pytest.raises(ValueError, match=r"score='cqr' reads the quantile pair .* MeanOnly.predict returned ndarray"):
        CrossConformalRegressor(estimator=MeanOnly(), score="cqr", confidence_level=0.6).fit(X, y)
    # 8 points resolve a symmetric level only when 8 >= 1/alpha - 1, i.e. c <= 8/9
    with pytest.raises(
        ValueError, match=r"too few training points for confidence_level=0.95: .* at least 19 .* got n=8"
    ):
        CrossConformalRegressor(estimator=GaussianOLS(), score="cqr", confidence_level=0.95).fit(X, y)
    with pytest.raises(ValueError, match=r"score='cqr' .* needs method='plus'; got method='base'"):
        CrossConformalRegressor(estimator=GaussianOLS(), score="cqr", method="base").fit(X, y)
    fitted = CrossConformalRegressor(estimator=GaussianOLS(), score="cqr", confidence_level=0.6).fit(X, y)
    with pytest.raises(ValueError, match=r"too few training points for confidence_level=0.95"):
        fitted.predict_interval(Xt, confidence_level=0.95)
