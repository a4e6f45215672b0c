"""Bounded memory over test points.

CPS prediction, the exact quantile CRPS, jackknife+/CV+ bounds and
``evaluate`` work in blocks of test points. Two things are checked:

* chunked results equal the one-block results *exactly* (``assert_array_equal``)
  on seeded random inputs, with chunk sizes that do not divide the number of
  test points (1, 7, 13, 4096, n + 5);
* the extra memory of ``evaluate`` and of the CPS prediction, measured with
  ``tracemalloc`` (NumPy reports its buffers to it), stays a small fraction of
  the quantile array itself at 60 000 test points — the one-shot versions
  allocated one to four more arrays of that size.
"""

import tracemalloc

import numpy as np
import pytest

import calibprob
from calibprob.calibrators.conformal import ConformalPredictiveSystem, CrossConformalRegressor
from calibprob.calibrators.conformal._intervals import conformal_quantile_function, rank_interpolated_quantiles
from calibprob.calibrators.conformal.jackknife import jackknife_plus_bounds
from calibprob.metrics import crps_quantile, evaluate
from calibprob.predictive import DEFAULT_LEVELS, quantile_ppf

CHUNKS = [1, 7, 13, 4096]


def skewed_prediction(rng, n):
    """A non-Gaussian quantile-family prediction (lognormal-ish rows, ties and all) and targets."""
    z = rng.normal(size=(n, 1)) * 0.4
    base = np.exp(z + 0.3 * rng.normal(size=(1, DEFAULT_LEVELS.size)).cumsum(axis=1).clip(-3, 3))
    q = np.sort(base + rng.normal(size=(n, 1)), axis=1)
    q[: n // 10, 40:43] = q[: n // 10, 40:41]  # tied quantiles (point-mass-like pieces)
    y = q[np.arange(n), rng.integers(0, DEFAULT_LEVELS.size, size=n)] + 0.01 * rng.normal(size=n)
    y[::17] += 5.0  # some far in the right tail
    return calibprob.from_quantiles(q, DEFAULT_LEVELS), y


def assert_datasets_identical(a, b):
    assert set(a.data_vars) == set(b.data_vars)
    for name in a.data_vars:
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)


@pytest.mark.parametrize("family", ["quantile", "normal"])
def test_evaluate_chunked_equals_unchunked_exactly(family):
    rng = np.random.default_rng(21)
    n = 1001
    if family == "quantile":
        pred, y = skewed_prediction(rng, n)
    else:
        loc, scale = rng.normal(size=n), rng.gamma(2.0, size=n)
        pred, y = calibprob.normal(loc, scale), loc + scale * rng.standard_t(3, size=n)
    whole = evaluate(pred, y, chunk_size=n + 5)
    for chunk in CHUNKS:
        assert_datasets_identical(evaluate(pred, y, chunk_size=chunk), whole)
    med = evaluate(pred, y, point="median", chunk_size=n)
    assert_datasets_identical(evaluate(pred, y, point="median", chunk_size=13), med)


def test_evaluate_chunked_counts_equal_brute_force():
    """The integer-count metrics equal their definitions on the whole arrays (independent check)."""
    rng = np.random.default_rng(3)
    pred, y = skewed_prediction(rng, 777)
    res = evaluate(pred, y, chunk_size=10)
    q, lv = pred["quantile"].values, pred["level"].values
    c = res["confidence_level"].values
    lo = quantile_ppf(q, lv, (1 - c) / 2)
    hi = quantile_ppf(q, lv, (1 + c) / 2)
    np.testing.assert_allclose(
        res["coverage"].values, ((lo <= y[:, None]) & (y[:, None] <= hi)).mean(axis=0), rtol=0, atol=1e-15
    )
    np.testing.assert_allclose(res["width"].values, (hi - lo).mean(axis=0), rtol=1e-13)
    p = res["ece_level"].values[1:-1]
    frac = (y[:, None] <= quantile_ppf(q, lv, p)).mean(axis=0)
    np.testing.assert_allclose(res["observed_fraction"].values[1:-1], frac, rtol=0, atol=1e-15)
    assert res["observed_fraction"].values[0] == 0.0 and res["observed_fraction"].values[-1] == 1.0


def test_crps_quantile_chunked_equals_unchunked_exactly():
    rng = np.random.default_rng(5)
    pred, y = skewed_prediction(rng, 1000)
    q, lv = pred["quantile"].values, pred["level"].values
    whole = crps_quantile(y, q, lv, chunk_size=1000)
    for chunk in CHUNKS:
        np.testing.assert_array_equal(crps_quantile(y, q, lv, chunk_size=chunk), whole)


@pytest.mark.parametrize("symmetric", [True, False])
def test_conformal_quantile_function_chunked_equals_one_shot(symmetric):
    rng = np.random.default_rng(8)
    m, n = 1003, 250
    mu, scale = rng.normal(size=m), rng.gamma(2.0, size=m)
    scores = np.sort(np.abs(rng.standard_t(3, size=n)) if symmetric else rng.standard_t(3, size=n))
    levels = DEFAULT_LEVELS[4:-4]
    r = rank_interpolated_quantiles(scores, levels, symmetric=symmetric)
    one_shot = mu[:, None] + scale[:, None] * r[None, :]  # the formula, all rows at once
    for chunk in CHUNKS + [m + 5, None]:
        got = conformal_quantile_function(mu, scale, scores, levels, symmetric=symmetric, chunk_size=chunk)
        np.testing.assert_array_equal(got, one_shot)


def test_cps_predict_is_the_one_shot_formula():
    rng = np.random.default_rng(9)
    mu = rng.normal(size=5000)
    y = mu + rng.standard_t(4, size=5000)
    base = calibprob.normal(mu, np.full(5000, 1.3))
    cps = ConformalPredictiveSystem().fit(base.isel(obs=slice(800)), y[:800])
    test = base.isel(obs=slice(800, None))  # 4200 rows: more than one default block, not a multiple
    pred = cps.predict(test)
    lv = pred["level"].values
    r = rank_interpolated_quantiles(cps.scores_, lv, symmetric=False)
    expected = mu[800:, None] + np.full(4200, 1.3)[:, None] * r[None, :]
    np.testing.assert_array_equal(pred["quantile"].values, expected)


@pytest.mark.parametrize("symmetric", [True, False])
def test_jackknife_plus_bounds_chunked_equal_unchunked(symmetric):
    rng = np.random.default_rng(13)
    n, m = 97, 1003
    mu_loo = rng.normal(size=(n, m))
    scale_loo = rng.gamma(2.0, size=(n, m))
    R = np.abs(rng.normal(size=n)) if symmetric else rng.normal(size=n)
    c = np.array([0.5, 0.8, 0.9])
    whole = jackknife_plus_bounds(mu_loo, scale_loo, R, c, symmetric=symmetric, chunk_size=m + 5)
    # independent: full sort of the xi sequences
    if symmetric:
        hi_ref = np.sort(mu_loo + R[:, None] * scale_loo, axis=0)[[int(np.ceil(ci * (n + 1))) - 1 for ci in c]].T
        lo_ref = np.sort(mu_loo - R[:, None] * scale_loo, axis=0)[[int(np.floor((1 - ci) * (n + 1))) - 1 for ci in c]].T
    else:
        xi = np.sort(mu_loo + R[:, None] * scale_loo, axis=0)
        lo_ref = xi[[int(np.floor((1 - ci) / 2 * (n + 1))) - 1 for ci in c]].T
        hi_ref = xi[[int(np.ceil((1 + ci) / 2 * (n + 1))) - 1 for ci in c]].T
    np.testing.assert_array_equal(whole[0], lo_ref)
    np.testing.assert_array_equal(whole[1], hi_ref)
    for chunk in CHUNKS:
        lo, hi = jackknife_plus_bounds(mu_loo, scale_loo, R, c, symmetric=symmetric, chunk_size=chunk)
        np.testing.assert_array_equal(lo, whole[0])
        np.testing.assert_array_equal(hi, whole[1])
    # a scalar normaliser (the absolute score) broadcasts
    lo1, hi1 = jackknife_plus_bounds(mu_loo, 1.0, R, c, symmetric=symmetric, chunk_size=7)
    lo2, hi2 = jackknife_plus_bounds(mu_loo, np.ones((n, m)), R, c, symmetric=symmetric)
    np.testing.assert_array_equal(lo1, lo2)
    np.testing.assert_array_equal(hi1, hi2)


class RowwiseLinear(calibprob.LinearRegression):
    """Least squares whose prediction is an elementwise expression per row.

    A BLAS matrix-vector product may round differently for a block of 1 row and
    one of 1000 (different kernels), which would blur what the test checks: the
    chunking of the conformal bounds, not of the base's arithmetic.
    """

    def predict_mean_std(self, X, *, include_noise=True):
        b = self.coef_
        mu = self.intercept_ + X[:, 0] * b[0] + X[:, 1] * b[1]
        return mu, 0.5 + np.abs(X[:, 0])


@pytest.mark.parametrize("score", ["normalized", "signed"])
def test_cv_plus_intervals_chunked_equal_unchunked(score):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(120, 2))
    y = X @ [1.0, -2.0] + rng.standard_t(3, size=120)
    Xt = rng.normal(size=(1001, 2))
    kw = dict(estimator=RowwiseLinear(), cv=5, score=score, confidence_level=[0.5, 0.9], random_state=0)
    whole = CrossConformalRegressor(**kw, chunk_size=2000).fit(X, y).predict_interval(Xt)
    for chunk in (1, 7, 13):
        got = CrossConformalRegressor(**kw, chunk_size=chunk).fit(X, y).predict_interval(Xt)
        assert_datasets_identical(got, whole)


def test_bad_chunk_size_is_refused():
    rng = np.random.default_rng(0)
    pred, y = skewed_prediction(rng, 20)
    with pytest.raises(ValueError, match=r"chunk_size must be >= 1; got 0"):
        evaluate(pred, y, chunk_size=0)
    with pytest.raises(TypeError, match=r"chunk_size must be an integer"):
        evaluate(pred, y, chunk_size=2.5)
    with pytest.raises(ValueError, match=r"chunk_size must be >= 1; got -3"):
        jackknife_plus_bounds(np.zeros((20, 4)), 1.0, np.ones(20), [0.5], chunk_size=-3)


def _extra_peak(func):
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        func()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_extra_memory_does_not_scale_with_the_quantile_array():
    """From 6 000 to 60 000 test points (4.8 -> 48 MB of quantiles) the working memory hardly grows.

    What may grow is the output (CPS) and a few numbers per observation
    (``evaluate``: about 12, i.e. 1 MB per 10 000 points); the one-shot
    versions grew by one to four full (n, L) arrays.
    """
    rng = np.random.default_rng(0)
    mu_cal = rng.normal(size=2000)
    cps = ConformalPredictiveSystem().fit(
        calibprob.normal(mu_cal, np.ones(2000)), mu_cal + rng.standard_t(4, size=2000)
    )
    extra = {}
    for n in (6_000, 60_000):
        mu = rng.normal(size=n)
        y = mu + rng.standard_t(4, size=n)
        base = calibprob.normal(mu, np.ones(n))
        out = {}
        extra["cps", n] = _extra_peak(lambda: out.setdefault("pred", cps.predict(base))) - base["quantile"].nbytes
        extra["eval-q", n] = _extra_peak(lambda: evaluate(out["pred"], y))
        extra["eval-normal", n] = _extra_peak(lambda: evaluate(base, y))
        size = base["quantile"].nbytes
    for what in ("cps", "eval-q", "eval-normal"):
        growth = extra[what, 60_000] - extra[what, 6_000]
        assert growth < 0.15 * size, (what, growth, size)
