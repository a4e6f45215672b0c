"""EnbPI (Xu & Xie 2021): the leave-one-out aggregation and the residuals against explicit loops, the
one-pass online loop against predict/update row by row, the paper's strided window, the beta search,
and the bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, Ridge

import calibprob
from calibprob.calibrators.timeseries import EnbPI, loo_aggregate


def _data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = X @ [1.0, -2.0] + (1.0 + 0.5 * np.arange(n) / n) * rng.normal(size=n)
    return X, y


@pytest.mark.parametrize("aggregation", ["mean", "median"])
def test_loo_aggregation_equals_explicit_loops(aggregation):
    rng = np.random.default_rng(1)
    B, n, m = 6, 5, 3
    P = rng.normal(size=(B, m))
    in_bag = rng.random((B, n)) < 0.5
    in_bag[:, 4] = True  # a point every model saw: no leave-one-out value
    got = loo_aggregate(P, in_bag, aggregation)
    for i in range(n):
        keep = [b for b in range(B) if not in_bag[b, i]]
        if not keep:
            assert np.all(np.isnan(got[i]))
            continue
        for j in range(m):
            vals = [P[b, j] for b in keep]
            want = sum(vals) / len(vals) if aggregation == "mean" else float(np.median(vals))
            assert got[i, j] == pytest.approx(want, rel=1e-14)


def test_the_fit_equals_a_hand_written_enbpi():
    """Resamples, out-of-bag means and residuals by explicit loops with the same draws."""
    X, y = _data(25)
    enbpi = EnbPI(LinearRegression(), n_bootstraps=6, random_state=np.random.RandomState(3)).fit(X, y)
    rs = np.random.RandomState(3)
    models, bags = [], []
    for _ in range(6):
        idx = rs.choice(25, 25)
        models.append(LinearRegression().fit(X[idx], y[idx]))
        bags.append(set(idx.tolist()))
    resid = []
    for i in range(25):
        preds = [m.predict(X[i : i + 1])[0] for m, bag in zip(models, bags, strict=True) if i not in bag]
        if preds:
            resid.append(y[i] - sum(preds) / len(preds))
    assert np.allclose(enbpi.residuals_, resid, rtol=0, atol=1e-12)
    x_new = np.array([[0.3, -0.1]])
    centre = np.mean(
        [
            np.mean([m.predict(x_new)[0] for m, bag in zip(models, bags, strict=True) if i not in bag])
            for i in range(25)
            if any(i not in bag for bag in bags)
        ]
    )
    iv = enbpi.predict_interval(x_new, confidence_level=0.8)
    w = np.quantile(np.abs(resid), 0.8)
    assert iv["lower"].values[0] == pytest.approx(centre - w) and iv["upper"].values[0] == pytest.approx(centre + w)


@pytest.mark.parametrize(
    ("step", "center", "optimize_beta"), [(1, "mean", False), (3, "quantile", False), (2, "mean", True)]
)
def test_one_pass_equals_predict_then_update_row_by_row(step, center, optimize_beta):
    X, y = _data(90)
    kw = dict(n_bootstraps=10, step=step, center=center, optimize_beta=optimize_beta, window=50)
    a = EnbPI(Ridge(), **kw).fit(X[:60], y[:60])
    b = EnbPI(Ridge(), **kw).fit(X[:60], y[:60])
    one = a.predict_and_update(X[60:], y[60:], confidence_level=[0.8, 0.9])
    for t in range(60, 90):
        iv = b.predict_interval(X[t : t + 1], confidence_level=[0.8, 0.9])
        assert np.allclose(iv["lower"].values[0], one["lower"].values[t - 60], rtol=0, atol=1e-12)
        assert np.allclose(iv["upper"].values[0], one["upper"].values[t - 60], rtol=0, atol=1e-12)
        b.update(X[t : t + 1], y[t : t + 1])
    assert np.allclose(a.residuals_, b.residuals_, rtol=0, atol=1e-12) and a.n_pending_ == b.n_pending_ == 30 % step


def test_the_window_slides_as_the_papers_strided_windows():
    """s = 2: rows 2k and 2k+1 read the width from residuals [2k, 2k + n) of the whole sequence (the paper's strided_app)."""
    X, y = _data(100)
    enbpi = EnbPI(Ridge(), n_bootstraps=12, step=2).fit(X[:60], y[:60])
    n = enbpi.n_loo_
    iv = enbpi.predict_and_update(X[60:], y[60:], confidence_level=0.9)
    r = np.abs(enbpi.residuals_)
    centre = 0.5 * (iv["lower"].values + iv["upper"].values)
    for j in range(40):
        k = j // 2 * 2
        assert iv["upper"].values[j] - centre[j] == pytest.approx(np.percentile(r[k : k + n], 90))


def test_optimize_beta_picks_the_narrowest_interval_on_the_grid():
    X, y = _data(80)
    enbpi = EnbPI(Ridge(), n_bootstraps=10, optimize_beta=True).fit(X, y)
    iv = enbpi.predict_interval(X[:1], confidence_level=0.8)
    widths = [
        np.quantile(enbpi.residuals_, 0.8 + b) - np.quantile(enbpi.residuals_, b) for b in np.linspace(0, 0.2, 101)
    ]
    assert float((iv["upper"] - iv["lower"]).values[0]) == pytest.approx(min(widths), rel=1e-12)
    sym = EnbPI(Ridge(), n_bootstraps=10).fit(X, y).predict_interval(X[:1], confidence_level=0.8)
    assert float((iv["upper"] - iv["lower"]).values[0]) <= float((sym["upper"] - sym["lower"]).values[0]) + 1e-12


def test_a_calibprob_base_and_a_callable_serve_as_the_estimator():
    X, y = _data(60)
    a = EnbPI(calibprob.LinearRegression(), n_bootstraps=5).fit(X, y).predict_interval(X[:3])

    def ols(Xt, yt, Xn):
        return np.c_[np.ones(len(Xn)), Xn] @ np.linalg.lstsq(np.c_[np.ones(len(Xt)), Xt], yt, rcond=None)[0]

    b = EnbPI(ols, n_bootstraps=5).fit(X, y).predict_interval(X[:3])
    assert np.allclose(a["lower"].values, b["lower"].values, atol=1e-10)


def test_bad_input_is_refused_naming_the_fix():
    X, y = _data(30)
    with pytest.raises(ValueError, match=r"window=50 is larger than the history: the fit left \d+ leave-one-out"):
        EnbPI(Ridge(), window=50).fit(X, y)
    with pytest.raises(ValueError, match="step must be >= 1"):
        EnbPI(Ridge(), step=0).fit(X, y)
    with pytest.raises(ValueError, match="n_bootstraps must be >= 2"):
        EnbPI(Ridge(), n_bootstraps=1).fit(X, y)
    with pytest.raises(ValueError, match="aggregation"):
        EnbPI(Ridge(), aggregation="max").fit(X, y)
    with pytest.raises(ValueError, match="estimator is required"):
        EnbPI().fit(X, y)
    with pytest.raises(TypeError, match="model-aware"):
        EnbPI(Ridge()).fit(calibprob.normal(np.zeros(30), np.ones(30)), y)
    with pytest.raises(ValueError, match="mismatched lengths"):
        EnbPI(Ridge()).fit(X, y[:-1])
    with pytest.raises(calibprob.NotFittedError, match="fit"):
        EnbPI(Ridge()).predict_interval(X)


def test_times_label_the_stream_and_must_increase():
    X, y = _data(80)
    enbpi = EnbPI(Ridge(), n_bootstraps=5).fit(X[:50], y[:50])
    t = np.arange("2024-01-01T00", "2024-01-05T00", dtype="datetime64[h]")[50:80]
    iv = enbpi.predict_and_update(X[50:70], y[50:70], times=t[:20])
    assert np.array_equal(iv["time"].values, t[:20])
    with pytest.raises(ValueError, match=r"times's first time .* is not after the last time already seen"):
        enbpi.predict_and_update(X[70:], y[70:], times=t[:10])
    with pytest.raises(ValueError, match=r"times's time coordinate must be strictly increasing.*duplicated"):
        enbpi.predict_and_update(X[70:72], y[70:72], times=np.array([t[25], t[25]]))
