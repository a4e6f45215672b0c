"""AgACI (Zaffran et al. 2022): BOA as opera's ``BOA.R`` by hand, one expert is ACI, the ends aggregated apart,
and bad input."""

from __future__ import annotations

import numpy as np
import pytest

import calibprob
from calibprob.calibrators.online import AdaptiveConformalInterval, AgACIInterval
from calibprob.calibrators.online.agaci import boa_update, boa_weights
from tests.support.streams import KINDS, adversarial_stream


def _gauss(mu, sigma):
    return calibprob.normal(np.atleast_1d(np.asarray(mu, float)), np.atleast_1d(np.asarray(sigma, float)))


def _opera_boa(y, experts, tau):
    """``BOA`` of opera (``R/BOA.R``, Dralliag/opera) with ``loss.type=list(name="pinball", tau=tau)``,
    ``loss.gradient=TRUE``, uniform ``w0``, everyone awake: transcribed by hand. Returns the weights per step."""
    T, N = experts.shape
    w0 = np.ones(N)
    R_reg, r_reg = np.zeros(N), np.zeros(N)
    eta_inv2 = np.zeros((T + 1, N))
    weights = np.zeros((T, N))
    empty = True
    idx_nonzero = eta_inv2[0] > 0
    for t in range(T):
        w = w0.copy()
        if not empty:
            R_aux = (
                -np.log(eta_inv2[t, idx_nonzero]) / 2
                + np.log(w0[idx_nonzero])
                + R_reg[idx_nonzero] / np.sqrt(eta_inv2[t, idx_nonzero])
            )
            w[idx_nonzero] = np.sum(w0[idx_nonzero]) * np.exp(R_aux - R_aux.max()) / np.sum(np.exp(R_aux - R_aux.max()))
        p = w / np.sum(w)
        pred = experts[t] @ p
        weights[t] = p
        grad = float(y[t] < pred) - tau  # gradient_pinball(pred, y, tau), times x
        r = grad * pred - grad * experts[t]
        eta_inv2[t + 1] = eta_inv2[t] + 2.2 * r**2
        idx_nonzero = eta_inv2[t + 1] > 0
        if empty:
            empty = idx_nonzero.sum() == 0
        if not empty:
            r_reg[idx_nonzero] = r[idx_nonzero] - r[idx_nonzero] ** 2 / np.sqrt(eta_inv2[t + 1, idx_nonzero])
        R_reg = R_reg + r_reg
    return weights


@pytest.mark.parametrize("tau", [0.05, 0.95])
def test_boa_equals_operas_by_hand(tau):
    rng = np.random.default_rng(0)
    T, K = 300, 6
    y = np.cumsum(rng.normal(size=T))
    experts = y[:, None] + rng.normal(size=(T, K)) * np.arange(1, K + 1) + rng.normal(size=K)
    want = _opera_boa(y, experts, tau)
    E, R = np.zeros((1, K)), np.zeros((1, K))
    for t in range(T):
        np.testing.assert_allclose(boa_weights(E, R)[0], want[t], rtol=0, atol=1e-12)
        E, R, _ = boa_update(E, R, experts[t][None, :], y[t], np.array([tau]))


@pytest.mark.parametrize("window", [None, 30])
def test_one_expert_is_aci_with_its_infinite_ends_thresholded(window):
    """K = 1: BOA's weight is 1, so AgACI is ACI (the paper's sets) whose infinite ends are read at the largest score."""
    rng = np.random.default_rng(3)
    kw = {"confidence_level": [0.8, 0.95], "window": window}
    ag = AgACIInterval(gammas=[0.05], **kw)
    aci = AdaptiveConformalInterval(gamma=0.05, infinite="allow", **kw)
    cal = _gauss(np.zeros(40), np.ones(40)), rng.normal(size=40)
    ag.fit(*cal)
    aci.fit(*cal)
    y = adversarial_stream("abrupt", 120, rng)
    for t in range(120):
        f = _gauss(0.1 * t / 300, 1.0)
        mu = 0.1 * t / 300
        a, b = ag.predict_interval(f), aci.predict_interval(f)
        top = float(aci.scores_.max())  # the paper's infinite end, thresholded at the largest score
        np.testing.assert_array_equal(a["upper"].values, np.minimum(b["upper"].values - mu, top) + mu)
        np.testing.assert_array_equal(a["lower"].values, mu - np.minimum(mu - b["lower"].values, top))
        ag.update(f, [y[t]])
        aci.update(f, [y[t]])
    np.testing.assert_array_equal(ag.expert_alpha_[:, 0], aci.alpha_)
    assert ag.n_thresholded_.sum() > 0


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.seeded(21)
def test_long_run_coverage_measured_on_adversarial_sequences(kind, seed, record_property):
    """No bound exists for AgACI (regret guarantees only): measured, within 0.03 of nominal at T = 1500 (the
    stream's seed from the seed sweep, 21 in the default run)."""
    rng = np.random.default_rng(seed)
    ag = AgACIInterval(confidence_level=[0.8, 0.9], window=50)
    ag.fit(_gauss(np.zeros(50), np.ones(50)), rng.normal(size=50))
    ag.update(_gauss(np.zeros(1500), np.ones(1500)), adversarial_stream(kind, 1500, rng))
    record_property("miss_rate_gap", float(np.max(np.abs(ag.miss_rate() - [0.2, 0.1]))))
    # 0.03 is 3 binomial sds of 1500 independent misses at 0.2 (0.0103): the old 0.02 broke at seed 17 (seasonal),
    # the sweep's worst over seeds 0..19 and the three streams, 0.0233
    assert np.all(np.abs(ag.miss_rate() - [0.2, 0.1]) < 0.03), ag.miss_rate()


def test_bad_input_names_the_parameter_and_the_fix():
    f, y = _gauss(np.zeros(30), np.ones(30)), np.zeros(30)
    for bad in ([0.0, 0.1], [0.1, 0.05], [0.5, 1.0]):
        with pytest.raises(ValueError, match=r"gammas must be increasing step sizes in \(0, 1\) \(AgACI's experts\)"):
            AgACIInterval(gammas=bad).fit(f, y)
    with pytest.raises(ValueError, match=r"window=50 is larger than the history: pred_cal holds 30.*window <= 30"):
        AgACIInterval(window=50).fit(f, y)
    with pytest.raises(ValueError, match=r"score='signed' is signed; AgACI's experts adapt one symmetric"):
        AgACIInterval(score="signed").fit(f, y)
    with pytest.raises(ValueError, match=r"confidence_level=\[0.5\] was not fitted: .* AgACIInterval tracks \[0.9\]"):
        AgACIInterval().fit(f, y).predict_interval(f, 0.5)
