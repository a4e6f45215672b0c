"""Size-dependent defaults of the sharp calibrated GP.

Above ``LARGE_N`` = 1000 calibration rows the ``"auto"`` / ``None`` options switch to
``interpolate="quantile"``, one L-BFGS-B start and warm-started knots; at or below it
the fit is bitwise the explicit paper settings (so every paper-table number is
unchanged). Checked against the explicit options, the calibration guarantee on all N
rows (β is set on every row whatever θ's settings) and the recorded optimiser starts.
"""

from __future__ import annotations

import numpy as np
import pytest

from calibprob.bases.gp import GaussianProcessRegressor
from calibprob.calibrators.sharp_gp import SharpCalibratedGP, _solver
from calibprob.calibrators.sharp_gp._validate import LARGE_MAXLS, LARGE_N, resolve_auto


def _data(rng, n):
    x = rng.uniform(-3, 3, size=(n, 1))
    y = np.sin(3.0 * x[:, 0]) * x[:, 0] + (0.1 + 0.3 * np.abs(x[:, 0])) * rng.normal(size=n)
    return x, y


@pytest.fixture(scope="module")
def large():
    rng = np.random.default_rng(21)
    Xtr, ytr = _data(rng, 40)
    Xc, yc = _data(rng, LARGE_N + 150)
    gp = GaussianProcessRegressor(random_state=0).fit(Xtr, ytr)
    return {"gp": gp, "Xc": Xc, "yc": yc}


def test_auto_settings_switch_above_large_n():
    m = SharpCalibratedGP()
    assert resolve_auto(m, LARGE_N) == {"interpolate": "theta", "n_restarts": 2, "warm_start": False, "maxls": 20}
    assert resolve_auto(m, LARGE_N + 1) == {
        "interpolate": "quantile",
        "n_restarts": 1,
        "warm_start": True,
        "maxls": LARGE_MAXLS,
    }
    explicit = SharpCalibratedGP(interpolate="theta", n_restarts=3, warm_start=False)
    assert resolve_auto(explicit, 10 * LARGE_N) == {
        "interpolate": "theta",
        "n_restarts": 3,
        "warm_start": False,
        "maxls": LARGE_MAXLS,
    }


def test_small_n_defaults_are_the_paper_settings_bitwise():
    rng = np.random.default_rng(3)
    Xtr, ytr = _data(rng, 40)
    Xc, yc = _data(rng, 120)
    gp = GaussianProcessRegressor(random_state=0).fit(Xtr, ytr)
    a = SharpCalibratedGP(estimator=gp, n_levels=5, random_state=1).fit(Xc, yc)
    b = SharpCalibratedGP(
        estimator=gp, n_levels=5, random_state=1, interpolate="theta", n_restarts=2, warm_start=False
    ).fit(Xc, yc)
    assert (a.interpolate_, a.n_restarts_, a.warm_start_) == ("theta", 2, False)
    np.testing.assert_array_equal(a.nodes_beta_, b.nodes_beta_)
    np.testing.assert_array_equal(a.nodes_log_theta_, b.nodes_log_theta_)
    np.testing.assert_array_equal(a.diagnostics_["n_eval"].values, b.diagnostics_["n_eval"].values)
    X = rng.uniform(-3, 3, size=(50, 1))
    np.testing.assert_array_equal(a.predict(X)["quantile"].values, b.predict(X)["quantile"].values)


def test_large_n_defaults_equal_explicit_options_and_keep_coverage(large):
    n = large["yc"].size
    a = SharpCalibratedGP(estimator=large["gp"], n_levels=5, random_state=4).fit(large["Xc"], large["yc"])
    assert (a.interpolate_, a.n_restarts_, a.warm_start_) == ("quantile", 1, True)
    b = SharpCalibratedGP(
        estimator=large["gp"], n_levels=5, random_state=4, interpolate="quantile", n_restarts=1, warm_start=True
    ).fit(large["Xc"], large["yc"])
    np.testing.assert_array_equal(a.nodes_log_theta_, b.nodes_log_theta_)
    # β on all N rows: the calibration-set coverage at each knot j/(N+1) is j/N exactly
    k = a.knot_level_
    assert a.n_calibration_ == n and a.diagnostics_.attrs["n_fit"] == 1000
    np.testing.assert_allclose(a.diagnostics_["coverage"].values, np.round(k * (n + 1)) / n, atol=1.5 / n)
    X = np.linspace(-3, 3, 200)[:, None]
    q = a.predict(X)["quantile"].values
    assert np.all(np.diff(q, axis=1) >= 0)
    # "quantile" interpolation: σ at the nodes only, the node quantiles equal the "theta" rule's
    c = SharpCalibratedGP(
        estimator=large["gp"], n_levels=5, random_state=4, interpolate="theta", n_restarts=1, warm_start=True
    ).fit(large["Xc"], large["yc"])
    nodes = a.nodes_level_
    np.testing.assert_allclose(a.quantile(X, nodes), c.quantile(X, nodes), rtol=1e-12, atol=1e-12)


def test_warm_start_begins_at_the_outer_neighbours_decrements(large, monkeypatch):
    starts = []
    original = _solver._FullSolver._minimize

    def record(self, u0, bounds):
        res = original(self, u0, bounds)
        starts.append((np.array(u0), np.array(res.x)))
        return res

    monkeypatch.setattr(_solver._FullSolver, "_minimize", record)
    knots = []
    solve = _solver._FullSolver.solve

    def keep(self, level, side, prev):
        knot = solve(self, level, side, prev)
        knots.append(knot)
        return knot

    monkeypatch.setattr(_solver._FullSolver, "solve", keep)
    maxls = []
    minimize = _solver.optimize.minimize

    def spy(*args, **kwargs):
        maxls.append(kwargs["options"]["maxls"])
        return minimize(*args, **kwargs)

    monkeypatch.setattr(_solver.optimize, "minimize", spy)
    SharpCalibratedGP(estimator=large["gp"], n_levels=7, random_state=4, warm_start=True).fit(large["Xc"], large["yc"])
    assert set(maxls) == {LARGE_MAXLS}  # N > LARGE_N: the capped line search
    free = np.array([1.0, 1.0, 0.0]) > 0  # 1-D: lengthscale and variance free, noise fixed
    n_warm = 0
    for i, knot in enumerate(knots[1:], start=1):
        prev, (u0, _) = knots[i - 1], starts[i]  # one start per knot (n_restarts = 1)
        if knot.side != prev.side:
            continue  # a pass's first knot: the line-search start
        if prev.u is None:
            np.testing.assert_array_equal(u0[free], np.log(0.02))
        else:
            np.testing.assert_allclose(u0[free], np.clip(np.maximum(prev.u[free], -8.0), -15.0, 3.0))
            n_warm += 1
    assert n_warm >= 1
    # off: every constrained knot starts at Δ = log 0.02
    starts.clear()
    knots.clear()
    SharpCalibratedGP(estimator=large["gp"], n_levels=7, random_state=4, warm_start=False).fit(large["Xc"], large["yc"])
    for i, knot in enumerate(knots[1:], start=1):
        if knot.side == knots[i - 1].side:
            np.testing.assert_array_equal(starts[i][0][free], np.log(0.02))
    # at N <= LARGE_N: scipy's 20 line-search steps
    maxls.clear()
    SharpCalibratedGP(estimator=large["gp"], n_levels=3, random_state=4).fit(large["Xc"][:300], large["yc"][:300])
    assert set(maxls) == {20}


def test_bad_large_n_options_are_rejected(large):
    gp, Xc, yc = large["gp"], large["Xc"][:50], large["yc"][:50]
    with pytest.raises(TypeError, match="warm_start must be True, False or None"):
        SharpCalibratedGP(estimator=gp, warm_start="yes").fit(Xc, yc)
    with pytest.raises(ValueError, match="n_restarts"):
        SharpCalibratedGP(estimator=gp, n_restarts=0).fit(Xc, yc)
    with pytest.raises(ValueError, match="maxls"):
        SharpCalibratedGP(estimator=gp, maxls=0).fit(Xc, yc)
    with pytest.raises(ValueError, match="interpolate must be one of"):
        SharpCalibratedGP(estimator=gp, interpolate="linear").fit(Xc, yc)
