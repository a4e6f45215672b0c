"""PSIS-LFO (Bürkner, Gabry & Vehtari 2020): the weight bookkeeping by brute force, bad input, and
(slow) the one-step PITs against exact refits of an AR(1) model."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from calibprob.predictive.leave_future_out import lfo, psis_lfo_weights


def _arviz_psislw(log_ratios):
    from arviz_stats.base import array_stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # arviz-stats' psislw takes a log-likelihood: its ratios are exp(-ary)
        lw, k = array_stats.psislw(-np.asarray(log_ratios, float), r_eff=1.0)
    return np.asarray(lw), float(k)


def _synthetic_fits(n_draws=400, n_times=30, seed=0):
    """A fixed log-likelihood array per fit end: spread growing with the position, so the summed
    ratios grow heavier-tailed the further they reach and some k-hat cross 0.7."""
    rng = np.random.default_rng(seed)
    scale = np.linspace(0.05, 0.9, n_times)
    return {i: -1.0 + scale * rng.standard_normal((n_draws, n_times)) for i in range(n_times + 1)}


def _brute_force(lls, n_times, L, thr, direction):
    """The paper's algorithm written out with explicit loops over draws and positions."""
    fit = L if direction == "forward" else n_times
    order = range(L, n_times) if direction == "forward" else range(n_times - 1, L - 1, -1)
    ratios, calls, refits = {}, [fit], []
    for t in order:
        if t == fit:
            ratios[t] = None
            continue
        S = lls[fit].shape[0]
        if direction == "forward":
            lr = np.array([sum(lls[fit][s, j] for j in range(fit, t)) for s in range(S)])
        else:
            lr = np.array([-sum(lls[fit][s, j] for j in range(t, fit)) for s in range(S)])
        k = _arviz_psislw(lr)[1]
        ratios[t] = (lr, k)
        if k > thr:
            fit = t
            calls.append(t)
            refits.append(t)
            ratios[t] = (None, k)
    return ratios, calls, refits


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_weights_are_smoothed_exp_of_summed_loglik(direction):
    n_times, L, thr = 30, 10, 0.7
    lls = _synthetic_fits(n_times=n_times)
    called = []

    def loglik_of_fit(i):
        called.append(i)
        return lls[i]

    w = psis_lfo_weights(loglik_of_fit, n_times, min_history=L, k_threshold=thr, direction=direction)
    ratios, calls, refits = _brute_force(lls, n_times, L, thr, direction)
    assert called == calls and w.refits == refits
    assert len(refits) >= 1  # the synthetic arrays do cross the threshold
    S = lls[0].shape[0]
    tail = math.ceil(min(0.2 * S, 3 * math.sqrt(S)))  # PSIS smooths the largest M ratios only
    for t, entry in ratios.items():
        lw = w.log_weights[:, t - L]
        np.testing.assert_allclose(np.logaddexp.reduce(lw), 0.0, atol=1e-12)
        if entry is None or entry[0] is None:  # right after a fit: equal weights
            np.testing.assert_allclose(lw, -np.log(S), atol=1e-12)
            if entry is not None:
                np.testing.assert_allclose(w.pareto_k[t - L], entry[1], rtol=1e-12)
            else:
                assert np.isnan(w.pareto_k[t - L])
            continue
        lr, k = entry
        np.testing.assert_allclose(w.pareto_k[t - L], k, rtol=1e-12)
        body = np.argsort(lr)[: S - tail]  # untouched by smoothing: w_s proportional to exp(lr_s)
        diff = lw[body] - lr[body]
        np.testing.assert_allclose(diff, diff[0], atol=1e-9)
        # the smoothed tail never exceeds the largest raw ratio (PSIS truncates at the max)
        assert lw.max() - diff[0] <= lr.max() + 1e-9


def test_fit_end_records_the_fit_in_use():
    n_times, L = 30, 10
    lls = _synthetic_fits(n_times=n_times, seed=3)
    w = psis_lfo_weights(lambda i: lls[i], n_times, min_history=L, k_threshold=0.7)
    ends = [L]
    for t in range(L + 1, n_times):
        ends.append(t if t in w.refits else ends[-1])
    assert w.fit_end.tolist() == ends
    # an infinite threshold never refits; a tiny one refits at every step
    assert psis_lfo_weights(lambda i: lls[i], n_times, min_history=L, k_threshold=1e9).refits == []
    # a tiny one refits wherever k-hat is positive (a one-step ratio's k-hat may be below 0)
    w2 = psis_lfo_weights(lambda i: lls[i], n_times, min_history=L, k_threshold=1e-9)
    assert w2.refits == [t for t in range(L + 1, n_times) if w2.pareto_k[t - L] > 1e-9]
    assert len(w2.refits) >= 10


def _no_model(_):
    raise AssertionError("the input checks come before any model is built")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"min_history": 8}, r"min_history=8 leaves nothing to predict in a series of 8 points"),
        ({"min_history": 12}, r"min_history=12 leaves nothing to predict"),
        ({"min_history": 0}, r"min_history must be an integer >= 1"),
        ({"min_history": 3, "k_threshold": 0.0}, r"k_threshold must be a number > 0 .*got 0\.0"),
        ({"min_history": 3, "k_threshold": -0.5}, r"k_threshold must be a number > 0"),
        ({"min_history": 3, "direction": "sideways"}, r"direction must be one of \('forward', 'backward'\)"),
        (
            {"min_history": 3, "times": [0, 1, 2, 4, 3, 5, 6, 7]},
            r"times must be strictly increasing .*positions 3 and 4",
        ),
        ({"min_history": 3, "times": [0, 1, 1, 2, 3, 4, 5, 6]}, r"unordered or duplicated times at positions 1 and 2"),
        ({"min_history": 3, "times": [0, 1, 2]}, r"times must have one entry per point of y \(8\)"),
    ],
)
def test_bad_input(kwargs, match):
    y = np.arange(8.0)
    times = kwargs.pop("times", None)
    with pytest.raises(ValueError, match=match):
        lfo(_no_model, y, times, **kwargs)


def test_bad_series():
    with pytest.raises(ValueError, match=r"y must be a 1-D array of finite numbers"):
        lfo(_no_model, np.ones((3, 2)), min_history=1)
    with pytest.raises(ValueError, match=r"k_threshold must be a number > 0"):
        psis_lfo_weights(_no_model, 5, min_history=2, k_threshold=True)


# ---------------------------------------------------------------------------
# slow: against exact refits (NUTS, 1 + refits + 15 fits)
# ---------------------------------------------------------------------------


def _exact_pits(y, L, draws, seed):
    """u_t = mean over the posterior of y[:t] of Phi((y_t - c - phi y_{t-1}) / sigma): exact LFO."""
    import pymc as pm

    from calibprob.examples.ar1 import ar1_model

    out = []
    for t in range(L, y.size):
        with ar1_model(y[:t]):
            idata = pm.sample(
                draws=draws,
                tune=draws,
                chains=2,
                random_seed=seed + t,
                progressbar=False,
                compute_convergence_checks=False,
                nuts_sampler="pymc",
            )
        p = idata.posterior
        z = (y[t] - p["c"].values - p["phi"].values * y[t - 1]) / p["sigma"].values
        out.append(stats.norm.cdf(z).mean())
    return np.array(out)


@pytest.fixture(scope="module")
def ar1_series():
    from calibprob.examples.ar1 import simulate_ar1

    y = simulate_ar1(40, random_seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return y, _exact_pits(y, 25, 300, seed=100)


@pytest.mark.slow
@pytest.mark.parametrize(("direction", "k_threshold"), [("forward", 0.7), ("backward", 0.7), ("forward", 0.05)])
def test_lfo_pits_match_exact_refits(ar1_series, direction, k_threshold):
    from calibprob import OnlineQuantileRecalibrator
    from calibprob.examples.ar1 import ar1_model

    y, exact = ar1_series
    L = 25
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pred = lfo(
            ar1_model,
            y,
            min_history=L,
            k_threshold=k_threshold,
            direction=direction,
            draws=300,
            tune=300,
            random_seed=2,
            sample_kwargs={"nuts_sampler": "pymc"},
        )
    u = pred["pit"].values
    se = pred["pit_mcse"].values
    k = pred["pareto_k"].values
    good = ~(k > k_threshold) | pred["refit"].values  # a refit's prediction is exact
    assert pred["refit"].values.sum() == pred.attrs["n_refits"] == len(pred.attrs["refit_times"])
    diff = np.abs(u - exact)
    # the exact PIT averages a smooth CDF over 600 draws (MC sd < 0.01); the LFO PIT is a weighted
    # indicator with standard error pit_mcse (iid formula, so NUTS autocorrelation widens it a little)
    z = diff / (se + 0.01)
    print(
        "max |u - exact| (good k):",
        diff[good].max().round(4),
        "mean:",
        diff[good].mean().round(4),
        "max z:",
        z[good].max().round(2),
        "mean mcse:",
        se.mean().round(4),
        "refits:",
        pred.attrs["refit_times"],
        "k:",
        np.round(k, 2).tolist(),
    )
    assert good.sum() >= 10
    assert z[good].max() < 4.0
    assert diff[good].mean() < 0.04
    # the PITs stream into the online recalibrator: fit on the first, update along the rest
    rec = OnlineQuantileRecalibrator().fit(pred.isel(obs=slice(0, 5)), y[L : L + 5])
    rec.update(pred.isel(obs=slice(5, None)), y[L + 5 :])


def test_datetime_times_are_checked_in_order():
    from calibprob.predictive.leave_future_out import _check_series

    days = np.arange("2024-01-01", "2024-01-09", dtype="datetime64[D]")
    y, times = _check_series(np.arange(8.0), days)
    assert times.dtype.kind == "M" and y.size == 8
    with pytest.raises(ValueError, match=r"times must be strictly increasing .*positions 5 and 6"):
        lfo(_no_model, np.arange(8.0), days[[0, 1, 2, 3, 4, 6, 5, 7]], min_history=3)
