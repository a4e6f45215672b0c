"""Conformal PID control (Angelopoulos, Candès & Tibshirani 2023): the authors' update equations by hand,
the paper's indexing, Proposition 1's long-run bound on adversarial sequences, finite intervals unless asked,
the PIT-scale rule and its reduction, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

import calibprob
from calibprob.calibrators.online import (
    ARScorecaster,
    BaseScorecaster,
    ConformalPIDInterval,
    OnlineQuantileRecalibrator,
)
from calibprob.calibrators.online._pid import pid_path, saturation_log
from tests.support.streams import KINDS, adversarial_stream


def _gauss(mu, sigma):
    return calibprob.normal(np.atleast_1d(np.asarray(mu, float)), np.atleast_1d(np.asarray(sigma, float)))


def _authors(scores, alpha, lr, T_burnin, Csat, KI, forecast=None):
    """``quantile_integrator_log_scorecaster`` of aangelopoulos/conformal-time-series ``core/methods.py`` @ a1e9765,
    ``ahead=1``, ``proportional_lr=True``, transcribed by hand (the Theta model replaced by ``forecast``)."""
    T = scores.shape[0]
    qs, qts, scorecasts, covereds = np.zeros(T), np.zeros(T), np.zeros(T), np.zeros(T)
    for t in range(T):
        lo = max(t - T_burnin, 0)
        lr_t = lr * (scores[lo:t].max() - scores[lo:t].min()) if t > 0 else lr
        covereds[t] = qs[t] >= scores[t]
        grad = alpha if covereds[t] else -(1 - alpha)
        arg = (1 - covereds)[:t].sum() - t * alpha
        x = arg * np.log(t + 1) / (Csat * (t + 1))
        integrator = 0.0 if KI == 0 else KI * (np.inf if x >= np.pi / 2 else -np.inf if x <= -np.pi / 2 else np.tan(x))
        if forecast is not None and t > T_burnin and t + 1 < T:
            scorecasts[t + 1] = forecast(scores[:t])
        if t < T - 1:
            qts[t + 1] = qts[t] - lr_t * grad
            qs[t + 1] = qts[t + 1] + integrator + scorecasts[t + 1]
    return qs, 1 - covereds


def _paper(scores, alpha, lr, Csat, KI):
    """The paper's equation with a fixed step: q_{t+1} = q̂_{t+1} + r_t(sum_{i<=t} (err_i - alpha)), by hand."""
    q_hat, q, errs = 0.0, 0.0, []
    for t, s in enumerate(scores, start=1):
        errs.append(float(s > q))
        q_hat += lr * (errs[-1] - alpha)
        x = (sum(errs) - t * alpha) * np.log(t) / (Csat * t)
        q = q_hat + (KI * np.tan(x) if abs(x) < np.pi / 2 else np.sign(x) * np.inf)
    return np.array(errs), q


@pytest.mark.parametrize("forecast", [None, "mean5", "ar"])
def test_the_authors_recursion_by_hand(forecast):
    rng = np.random.default_rng(0)
    s = np.abs(rng.normal(size=600)) * (1 + np.arange(600) / 200)  # growing scores: the integrator works
    sc = {"mean5": type("M", (), {"forecast": staticmethod(lambda h: float(np.mean(h[-5:])))})(), "ar": ARScorecaster()}
    caster = sc.get(forecast)
    q, err = _authors(s, 0.1, 0.1, 50, 5.0, 10.0, None if caster is None else caster.forecast)
    out = pid_path(
        s,
        0.1,
        lr=0.1,
        csat=5.0,
        ki=10.0,
        burnin=50,
        proportional_lr="rolling",
        scorecaster=caster,
        authors_indexing=True,
    )
    np.testing.assert_array_equal(out["q"], q)
    np.testing.assert_array_equal(out["err"], err)


def test_the_paper_indexing_by_hand():
    rng = np.random.default_rng(1)
    s = np.abs(rng.normal(size=400)) * np.where(np.arange(400) < 200, 1.0, 3.0)
    errs, q_last = _paper(s, 0.1, 0.2, 5.0, 10.0)
    out = pid_path(s, 0.1, lr=0.2, csat=5.0, ki=10.0, proportional_lr="none")
    np.testing.assert_array_equal(out["err"], errs)
    np.testing.assert_allclose(saturation_log([0.0, 1e9, -1e9], 3, 1.0, 2.0), [0.0, np.inf, -np.inf])
    assert np.isfinite(q_last)


@pytest.mark.parametrize("kind", KINDS)
def test_proposition_1_on_adversarial_sequences(kind):
    """Fixed step, q_1 = 0: |mean err - alpha| <= bound <= (B + eta)/(eta T), B the largest |s - r| (no scorecaster)."""
    rng = np.random.default_rng(5)
    T, lr = 3000, 0.05
    s = np.abs(adversarial_stream(kind, T, rng))
    out = pid_path(s, 0.1, lr=lr, ki=0.0, proportional_lr="none")
    gap = abs(out["err"].mean() - 0.1)
    assert gap <= out["bound"][0] + 1e-12
    assert out["bound"][0] <= (s.max() + lr) / (lr * T) + 1e-12


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("scorecaster", [None, "ar"])
def test_the_interval_keeps_its_bound_on_adversarial_sequences(kind, scorecaster):
    rng = np.random.default_rng(11)
    T = 1500
    pid = ConformalPIDInterval(confidence_level=[0.8, 0.9], burnin=50, scorecaster=scorecaster)
    pid.fit(_gauss(np.zeros(60), np.ones(60)), rng.normal(size=60))
    pid.update(_gauss(np.zeros(T), np.ones(T)), adversarial_stream(kind, T, rng))
    gap = np.abs(pid.miss_rate() - [0.2, 0.1])
    assert np.all(gap <= pid.coverage_error_bound() + 1e-12)
    assert np.all(pid.coverage_error_bound() < 0.05)  # informative, not vacuous
    assert np.all(gap < 0.02)


def test_before_any_outcome_it_is_split_conformal():
    rng = np.random.default_rng(8)
    cal = _gauss(rng.normal(size=60), rng.uniform(0.5, 2.0, size=60))
    y = rng.normal(size=60) * 1.3
    new = _gauss(rng.normal(size=7), rng.uniform(0.5, 2.0, size=7))
    a = ConformalPIDInterval(confidence_level=[0.8, 0.9], burnin=20).fit(cal, y).predict_interval(new)
    s = calibprob.SplitConformalCalibrator(confidence_level=[0.8, 0.9]).fit(cal, y).predict_interval(new)
    np.testing.assert_array_equal(a["upper"].values, s["upper"].values)


def test_never_infinite_unless_asked():
    """A saturating integrator issues the whole line in the paper: the largest score here, counted."""
    rng = np.random.default_rng(2)
    y = np.concatenate([rng.normal(size=40), 50.0 * rng.normal(size=80)])
    kw = {"confidence_level": 0.9, "burnin": 30, "csat": 0.05, "ki": 1.0, "scorecaster": None, "lr": 1e-4}
    finite, infinite = ConformalPIDInterval(**kw), ConformalPIDInterval(**kw, allow_infinite=True)
    for est in (finite, infinite):
        est.fit(_gauss(np.zeros(30), np.ones(30)), rng.normal(size=30))
    widths = {id(e): [] for e in (finite, infinite)}
    for t in range(y.size):
        for est in (finite, infinite):
            ds = est.predict_interval(_gauss(0.0, 1.0))
            # one level, one row (a scalar constructor level drops its dim)
            widths[id(est)].append(float(ds["upper"].values.reshape(-1)[0]))
            est.update(_gauss(0.0, 1.0), [y[t]])
    assert np.all(np.isfinite(widths[id(finite)])) and finite.n_clipped_[0] > 0
    assert np.isinf(widths[id(infinite)]).any() and infinite.n_clipped_[0] == 0


def test_the_pit_scale_rule_keeps_its_bound_and_its_floor():
    """Every quantile stays finite (a distribution of the contract has none infinite): the floor binds, counted."""
    rng = np.random.default_rng(4)
    levels = [0.05, 0.25, 0.5, 0.75, 0.95]
    T = 1500
    y = adversarial_stream("abrupt", T, rng)
    rec = OnlineQuantileRecalibrator(levels=levels, rule="pid", burnin=40)
    rec.fit(_gauss(np.zeros(40), np.ones(40)), rng.normal(size=40)).update(_gauss(np.zeros(T), np.ones(T)), y)
    assert np.all(np.abs(rec.miss_rate() - [0.1, 0.5]) <= rec.coverage_error_bound() + 1e-12)
    assert rec.recalibration_[0] == 0.0 and rec.n_floored_[0] > 0  # the paper's whole line for the outer pair
    q = np.asarray(rec.recalibrate(_gauss([0.0], [1.0])).calib.quantiles)
    assert np.all(np.isfinite(q)) and q[0, -1] == pytest.approx(3.090232, abs=1e-5)  # read at the 1e-3 floor


def test_the_pit_rule_equals_the_numpy_path_on_pit_scores():
    """One central pair on the PIT scale is the one-track controller on the scores |2u - 1| (issued on [0, 1])."""
    rng = np.random.default_rng(6)
    u = rng.uniform(size=300) ** 2
    rec = OnlineQuantileRecalibrator(levels=[0.1, 0.9], rule="pid", scorecaster=None, proportional_lr="none", lr=0.05)
    rec.update_pit(u)
    s = np.abs(2 * u - 1)
    q = 0.8  # the identity map: r_1 = 1 - 2p
    q_hat, errs = 0.8, []
    for t, st in enumerate(s, start=1):
        errs.append(float(st > min(max(q, 0.0), 1.0)))
        q_hat += 0.05 * (errs[-1] - 0.2)
        x = (sum(errs) - t * 0.2) * np.log(t) / (5.0 * t)
        q = q_hat + (10.0 * np.tan(x) if abs(x) < np.pi / 2 else np.sign(x) * np.inf)
    assert rec.misses_[0] == sum(errs)
    np.testing.assert_allclose(rec.recalibration_, [(1 - min(max(q, 0), 1)) / 2, (1 + min(max(q, 0), 1)) / 2])


def test_a_calibprob_base_as_scorecaster():
    rng = np.random.default_rng(7)
    caster = BaseScorecaster(calibprob.LinearRegression(), lags=2, window=60, refit_every=10)
    pid = ConformalPIDInterval(burnin=30, scorecaster=caster)
    pid.fit(_gauss(np.zeros(40), np.ones(40)), rng.normal(size=40))
    pid.update(_gauss(np.zeros(200), np.ones(200)), adversarial_stream("seasonal", 200, rng))
    assert pid.pid_state_["g"][0] != 0.0 and abs(pid.miss_rate()[0] - 0.1) <= pid.coverage_error_bound()[0]
    s = 1.0 + 0.5 ** np.arange(40)  # exactly AR(1): the forecast is the next term
    assert abs(BaseScorecaster(calibprob.LinearRegression(), lags=1).forecast(s) - (1.0 + 0.5**40)) < 1e-6


def test_save_and_load_continue_bit_for_bit(tmp_path):
    rng = np.random.default_rng(9)
    pid = ConformalPIDInterval(confidence_level=[0.8, 0.9], burnin=30)
    pid.fit(_gauss(np.zeros(40), np.ones(40)), rng.normal(size=40))
    pid.update(_gauss(np.zeros(120), np.ones(120)), 2 * rng.normal(size=120))
    pid.save(tmp_path / "pid.nc")
    back = calibprob.load(tmp_path / "pid.nc")
    f, more = _gauss(np.zeros(50), np.ones(50)), rng.normal(size=50)
    pid.update(f, more)
    back.update(f, more)
    np.testing.assert_array_equal(back.predict_interval(f)["upper"].values, pid.predict_interval(f)["upper"].values)
    np.testing.assert_array_equal(back.misses_, pid.misses_)


def test_bad_input_names_the_parameter_and_the_fix():
    f, y = _gauss(np.zeros(30), np.ones(30)), np.zeros(30)
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match=rf"lr must be a finite number > 0 \(conformal PID\); got {bad}"):
            ConformalPIDInterval(lr=bad, burnin=10).fit(f, y)
        with pytest.raises(ValueError, match=rf"csat must be a finite number > 0 \(conformal PID\); got {bad}"):
            OnlineQuantileRecalibrator(rule="pid", csat=bad).fit(f, y)
    with pytest.raises(ValueError, match=r"ki must be a finite number >= 0 .*got -2.0.*0 switches the integrator off"):
        ConformalPIDInterval(ki=-2.0, burnin=10).fit(f, y)
    with pytest.raises(ValueError, match=r"burnin=50 is longer than the data: pred_cal holds 30 .*burnin <= 30"):
        ConformalPIDInterval().fit(f, y)
    with pytest.raises(ValueError, match=r"burnin=50 is longer than the data: the calibration stream holds 30"):
        OnlineQuantileRecalibrator(levels=[0.1, 0.9], rule="pid").fit(f, y)
    with pytest.raises(ValueError, match=r"burnin must be an integer >= 1 .*got 0"):
        ConformalPIDInterval(burnin=0).fit(f, y)
    with pytest.raises(ValueError, match=r"proportional_lr must be one of 'burnin', 'rolling', 'none'; got True"):
        ConformalPIDInterval(proportional_lr=True, burnin=10).fit(f, y)
    with pytest.raises(ValueError, match=r"scorecaster must be one of \('ar',\), None or an object .*got 'theta'"):
        ConformalPIDInterval(scorecaster="theta", burnin=10).fit(f, y)
    with pytest.raises(TypeError, match=r"scorecaster must have a method forecast\(history\).*BaseScorecaster"):
        ConformalPIDInterval(scorecaster=3, burnin=10).fit(f, y)
    with pytest.raises(ValueError, match=r"rule must be one of 'osd', 'aci', 'dtaci', 'pid'; got 'PID'"):
        OnlineQuantileRecalibrator(rule="PID").fit(f, y)
    with pytest.raises(ValueError, match=r"confidence_level=\[0.5\] was not fitted"):
        ConformalPIDInterval(burnin=10).fit(f, y).predict_interval(f, 0.5)
