"""Feedback-covariate-shift full conformal (Fannjiang et al. 2022): closed form against refits and brute force.

The closed-form leave-one-out fits (rank-one downdates, affine in the candidate label) must equal
refitting the model for every (candidate, left-out point) to 1e-8; with lam = 0 the set is
ordinary full conformal with leave-one-out scores, computed here by an independent loop.
"""

from __future__ import annotations

import numpy as np
import pytest

from calibprob.calibrators.conformal.feedback import (
    KernelRidgeSmoother,
    RidgeSmoother,
    feedback_conformal_set,
    loo_affine,
    refit_conformal_set,
)
from calibprob.predictive import CalibprobWarning


def _rbf(A, B):
    d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    return 1.3 * np.exp(-0.5 * d2 / 0.8**2)


def _problem(seed=0, n=25, m=150, p=4):
    rng = np.random.default_rng(seed)
    pool = rng.normal(size=(m, p))
    pool[:, 0] = 1.0  # an intercept column, left unpenalised by the ridge below
    beta = rng.normal(size=p)
    X = pool[:n]
    y = X @ beta + 0.3 * rng.normal(size=n)
    grid = np.linspace(y.min() - 2, y.max() + 2, 31)
    return X, y, pool[n + 7], pool, grid


SMOOTHERS = {
    "ridge": RidgeSmoother(penalty=2.0, unpenalized=(0,)),
    "kernel-ridge": KernelRidgeSmoother(kernel=_rbf, penalty=0.2, mean=0.4),
}


@pytest.mark.parametrize("name", list(SMOOTHERS))
@pytest.mark.parametrize("shift", ["feedback", "standard"])
def test_closed_form_equals_refits(name, shift):
    X, y, x_t, pool, grid = _problem()
    kw = dict(smoother=SMOOTHERS[name], lam=3.0, grid=grid, pool=pool, shift=shift)
    fast = feedback_conformal_set(X, y, x_t, **kw)
    slow = refit_conformal_set(X, y, x_t, **kw)
    np.testing.assert_allclose(fast.scores, slow.scores, rtol=0, atol=1e-8)
    np.testing.assert_allclose(np.log(fast.weights), np.log(slow.weights), rtol=0, atol=1e-8)
    np.testing.assert_array_equal(fast.in_set, slow.in_set)
    assert 0 < fast.in_set.sum() < grid.size


def test_loo_fits_equal_direct_least_squares():
    """One (i, y) pair by numpy's least squares on the augmented data without point i."""
    X, y, x_t, pool, _ = _problem(1)
    gamma = 2.0
    loo = loo_affine(RidgeSmoother(penalty=gamma), X, y, x_t, pool)
    for i in (0, 7, X.shape[0]):
        for y_cand in (-1.0, 2.5):
            S = np.vstack([X, x_t])
            ya = np.append(y, y_cand)
            keep = np.arange(len(S)) != i
            A = np.vstack([S[keep], np.sqrt(gamma) * np.eye(S.shape[1])])
            b = np.concatenate([ya[keep], np.zeros(S.shape[1])])
            beta = np.linalg.lstsq(A, b, rcond=None)[0]
            E = np.vstack([S, pool])
            np.testing.assert_allclose(loo.c[i] + y_cand * loo.a[i], E @ beta, atol=1e-10)


def test_gp_mean_smoother_equals_the_gp_posterior_mean():
    from calibprob.bases.gp import GaussianProcessRegressor

    rng = np.random.default_rng(2)
    X = rng.random((15, 2))
    y = np.sin(4 * X[:, 0]) + 0.1 * rng.normal(size=15)
    theta = {"lengthscale": np.array([0.3, 0.5]), "variance": 1.0, "noise": 0.05}
    gp = GaussianProcessRegressor(kernel="se", mean="zero", noise=True, theta=theta, optimize=False).fit(X, y)
    sm = KernelRidgeSmoother.from_gp(gp)
    U = rng.random((10, 2))
    np.testing.assert_allclose(sm.fit_predict(X, y, U), gp.predict_mean_std(U)[0], atol=1e-10)


@pytest.mark.parametrize("shift", ["feedback", "standard", "none"])
def test_lambda_zero_is_ordinary_full_conformal(shift):
    """lam = 0: equal weights; the set is {y : #{i <= n : S_i(y) < S_n+1(y)} < c (n + 1)}, by refits here."""
    X, y, x_t, pool, grid = _problem(3)
    gamma, c, n = 1.0, 0.8, X.shape[0]
    cs = feedback_conformal_set(
        X, y, x_t, smoother=RidgeSmoother(penalty=gamma), lam=0.0, grid=grid, pool=pool, confidence_level=c, shift=shift
    )
    S = np.vstack([X, x_t])
    expected = np.zeros(grid.size, bool)
    for k, yc in enumerate(grid):
        ya = np.append(y, yc)
        s = np.empty(n + 1)
        for i in range(n + 1):
            keep = np.arange(n + 1) != i
            beta = np.linalg.solve(S[keep].T @ S[keep] + gamma * np.eye(S.shape[1]), S[keep].T @ ya[keep])
            s[i] = abs(ya[i] - S[i] @ beta)
        expected[k] = np.sum(s[:n] < s[n]) < c * (n + 1)
    np.testing.assert_array_equal(cs.in_set, expected)
    np.testing.assert_allclose(cs.weights, 1.0 / (n + 1))


def test_covers_uses_half_a_grid_step():
    X, y, x_t, pool, grid = _problem(4)
    cs = feedback_conformal_set(X, y, x_t, smoother=RidgeSmoother(), lam=1.0, grid=grid, pool=pool)
    lo, hi = cs.interval
    step = grid[1] - grid[0]
    assert cs.covers(lo + 0.49 * step) and not cs.covers(hi + 0.51 * step)


# -- bad input ------------------------------------------------------------------------------------
@pytest.mark.parametrize("lam", [np.inf, np.nan, "hot"])
def test_lambda_must_be_finite(lam):
    X, y, x_t, pool, grid = _problem()
    with pytest.raises(ValueError, match="lam .*must be (finite|a finite number)"):
        feedback_conformal_set(X, y, x_t, smoother=RidgeSmoother(), lam=lam, grid=grid, pool=pool)


def test_grid_not_covering_the_labels_warns_or_refuses():
    X, y, x_t, pool, _ = _problem()
    narrow = np.linspace(y.min() + 0.5, y.max(), 20)
    with pytest.warns(CalibprobWarning, match="does not cover the training labels' range.*Widen the grid"):
        feedback_conformal_set(X, y, x_t, smoother=RidgeSmoother(), lam=1.0, grid=narrow, pool=pool)
    with pytest.raises(ValueError, match="does not cover the training labels' range"):
        feedback_conformal_set(X, y, x_t, smoother=RidgeSmoother(), lam=1.0, grid=narrow, pool=pool, on_outside="raise")
    with pytest.raises(ValueError, match="strictly increasing"):
        feedback_conformal_set(X, y, x_t, smoother=RidgeSmoother(), lam=1.0, grid=[1.0, 0.0], pool=pool)


def test_design_density_of_the_wrong_shape():
    X, y, x_t, pool, grid = _problem()
    with pytest.raises(ValueError, match=r"pool \(the design density's support\) must have 4 columns"):
        feedback_conformal_set(X, y, x_t, smoother=RidgeSmoother(), lam=1.0, grid=grid, pool=pool[:, :3])
    with pytest.raises(ValueError, match=r"train_density must give one positive finite density .*shape \(26,\)"):
        feedback_conformal_set(
            X, y, x_t, smoother=RidgeSmoother(), lam=1.0, grid=grid, pool=pool, train_density=np.ones(5)
        )
    with pytest.raises(ValueError, match="pool is required for shift='feedback'"):
        feedback_conformal_set(X, y, x_t, smoother=RidgeSmoother(), lam=1.0, grid=grid)


def test_unknown_shift():
    X, y, x_t, pool, grid = _problem()
    with pytest.raises(ValueError, match="shift must be one of 'feedback', 'standard', 'none'; got 'label'"):
        feedback_conformal_set(X, y, x_t, smoother=RidgeSmoother(), lam=1.0, grid=grid, pool=pool, shift="label")
