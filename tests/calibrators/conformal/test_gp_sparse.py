"""J+GP, asymJ+GP and the full-conformal GP on a sparse (VFE) base: closed forms against refits.

The sparse base is the VFE posterior with fixed hyperparameters and inducing inputs;
"refit" below means fitting that posterior again (same θ, same Z) on the changed
training set, which is what the closed forms of :mod:`calibprob.bases.gp._sparse_loo` claim
to reproduce without any n x n matrix.
"""

import numpy as np
import pytest

from calibprob.bases.gp import GaussianProcessRegressor, SparseGaussianProcessRegressor
from calibprob.calibrators.conformal._intervals import upper_rank
from calibprob.calibrators.conformal.gp import FullConformalGP, JackknifePlusGP, _gp_view, loo_at_points

THETA = {"lengthscale": np.array([0.3, 0.4]), "variance": 1.0, "noise": 0.04}


def sparse(X, y, mean="zero", Z=None, **kw):
    opts = dict(mean=mean, theta=THETA, optimize=False)
    if Z is None:
        return SparseGaussianProcessRegressor(n_inducing=8, random_state=0, **opts, **kw).fit(X, y)
    return SparseGaussianProcessRegressor(inducing_points=Z, **opts, **kw).fit(X, y)


@pytest.mark.parametrize("mean, refit_mean", [("zero", True), ("constant", True), ("constant", False)])
def test_loo_at_test_points_equals_refits(mean, refit_mean, sine_surface):
    """mu_{-i}(x), sigma_{-i}(x) from the rank-one downdate = the sparse posterior refitted without i."""
    X, y = sine_surface(20, seed=1)
    Xt = np.random.default_rng(2).uniform(size=(4, 2))
    gp = sparse(X, y, mean)
    view = _gp_view(gp, refit_mean)
    lam, mu, var, _ = view.predict_with_extra(Xt)
    mu_loo, sd_loo = loo_at_points(view.system, lam, mu, var)
    offset = view.offset
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        if mean == "constant" and not refit_mean:  # known mean: a zero-mean GP on y - mean_
            refit, shift = sparse(X[keep], y[keep] - offset, "zero", Z=gp.inducing_points_), 0.0
        else:  # the view works on y - offset; the refit on y itself
            refit, shift = sparse(X[keep], y[keep], mean, Z=gp.inducing_points_), offset
        m_i, s_i = refit.predict_mean_std(Xt)
        np.testing.assert_allclose(mu_loo[i] + shift, m_i, atol=1e-8)
        np.testing.assert_allclose(sd_loo[i], s_i, atol=1e-8)


@pytest.mark.parametrize("mean", ["zero", "constant"])
@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_full_conformal_on_sparse_base_matches_refits_at_the_ends(mean, beta, sine_surface):
    """Just inside each end of the FCP-GP interval the candidate is in the conformal set, just
    outside it is not — membership decided by refitting the sparse posterior on the augmented
    data (the test point as a training point) and its leave-one-out (checked above/against refits)."""
    X, y = sine_surface(30, seed=3)
    Xt = np.random.default_rng(4).uniform(size=(4, 2))
    gp = sparse(X, y, mean)
    c = 0.8
    iv = FullConformalGP(estimator=gp, prefit=True, beta=beta, confidence_level=c).fit().predict_interval(Xt)
    k = upper_rank(c, len(y))

    def member(x, z):
        aug = sparse(np.vstack([X, x]), np.r_[y, z], mean, Z=gp.inducing_points_)
        mu, sd = aug.loo()
        R = np.abs(np.r_[y, z] - mu) / sd**beta
        return (R[:-1] < R[-1]).sum() <= k - 1

    for j, x in enumerate(Xt):
        lo, hi = float(iv["lower"][j]), float(iv["upper"][j])
        step = 1e-6 * (hi - lo)
        assert member(x, lo + step) and not member(x, lo - step)
        assert member(x, hi - step) and not member(x, hi + step)


@pytest.mark.parametrize("mean", ["zero", "constant"])
@pytest.mark.parametrize("score", ["normalized", "signed"])
def test_jgp_sparse_with_all_points_inducing_is_the_exact_jgp(mean, score, sine_surface):
    X, y = sine_surface(30, seed=5)
    Xt = np.random.default_rng(6).uniform(size=(10, 2))
    exact = GaussianProcessRegressor(mean=mean, theta=THETA, optimize=False).fit(X, y)
    full = sparse(X, y, mean, Z=X, jitter=1e-10)
    kw = dict(prefit=True, score=score, confidence_level=[0.7, 0.9])
    a = JackknifePlusGP(estimator=exact, **kw).fit().predict_interval(Xt)
    b = JackknifePlusGP(estimator=full, **kw).fit().predict_interval(Xt)
    np.testing.assert_allclose(b["lower"], a["lower"], atol=1e-6)
    np.testing.assert_allclose(b["upper"], a["upper"], atol=1e-6)


@pytest.mark.seeded(11)
def test_jgp_on_sparse_base_covers_at_its_guarantee(seed, record_property):
    """Seeded synthetic data, hyperparameters fitted on the training set (n = 600, m = 40):
    90 % J+GP and asymJ+GP intervals on 4 000 test points. Guarantee (Barber et al.): 2c - 1 = 0.8;
    measured 0.9015 and 0.8993 at seed 11. The data and the optimiser's random start both move with ``seed``
    (tests/conftest.py's sweep): over seeds 0..19 coverage ranged 0.860-0.930 (J+GP) and 0.880-0.928 (asymJ+GP),
    the spread of one training set's conditional coverage (sd about sqrt(0.09 / 600) = 0.012, plus 0.005 from
    the 4 000 test points). The window 0.85-0.95 holds over the sweep and still fails a method that reaches only
    the worst-case guarantee 0.8."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(4600, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.3 * rng.normal(size=4600)
    gp = SparseGaussianProcessRegressor(n_inducing=40, n_restarts=1, random_state=seed).fit(X[:600], y[:600])
    for score in ("normalized", "signed"):
        iv = (
            JackknifePlusGP(estimator=gp, prefit=True, score=score, confidence_level=0.9)
            .fit()
            .predict_interval(X[600:])
        )
        cover = float(np.mean((y[600:] >= iv["lower"].values) & (y[600:] <= iv["upper"].values)))
        record_property(f"coverage_{score}", cover)
        assert 0.85 <= cover <= 0.95, (score, cover)  # sweep of 20 seeds: 0.860-0.930


def test_sparse_conformal_never_builds_an_n_by_n_matrix(monkeypatch, sine_surface):
    """n = 3000: an n x n float matrix would be 72 MB; the whole J+GP/FCP fit and prediction
    stays under 15 MB of NumPy allocations (tracemalloc), and the n x n kernel path is never called."""
    import tracemalloc

    X, y = sine_surface(3000, seed=7)
    Xt = np.random.default_rng(8).uniform(size=(50, 2))
    gp = SparseGaussianProcessRegressor(n_inducing=20, mean="constant", theta=THETA, optimize=False, random_state=0)
    gp.fit(X, y)

    def refuse(*args, **kwargs):
        raise AssertionError("the sparse base's n x n kernel matrix was requested")

    monkeypatch.setattr(gp, "kernel_matrix", refuse)
    tracemalloc.start()
    try:
        for cls in (JackknifePlusGP, FullConformalGP):
            cls(estimator=gp, prefit=True, confidence_level=0.9, chunk_size=10).fit().predict_interval(Xt)
        mu, sd = gp.loo()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 15e6, peak
    assert np.all(np.isfinite(mu)) and np.all(sd > 0)


def test_sparse_jgp_saves_and_loads(tmp_path, sine_surface):
    import calibprob

    X, y = sine_surface(60, seed=12)
    gp = sparse(X, y, "constant")
    jgp = JackknifePlusGP(estimator=gp, prefit=True, confidence_level=0.9).fit()
    path = tmp_path / "jgp.nc"
    jgp.save(path)
    back = calibprob.load(path)
    Xt = np.random.default_rng(13).uniform(size=(5, 2))
    a, b = jgp.predict_interval(Xt), back.predict_interval(Xt)
    np.testing.assert_allclose(b["lower"], a["lower"], rtol=1e-12)
    np.testing.assert_allclose(b["upper"], a["upper"], rtol=1e-12)
