"""The GPs' closed-form LOO on factorisations computed once (issue 37): the same bits as recomputing them.

* The exact GP's ``loo()`` reads the Cholesky factor of its fit instead of factorising the same
  ``K`` again: equal, bit for bit, to :func:`loo_from_kernel` on a freshly built ``K`` (the
  arithmetic before the change), and to n brute-force refits (``test_loo.py``) to 1e-8.
* The sparse GP's ``loo_from_system`` reads the :math:`O(nm^2)` kriging system that J+GP's view
  holds: equal, bit for bit, to ``loo()``, which builds its own.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from calibprob.bases.gp import GaussianProcessRegressor, SparseGaussianProcessRegressor, loo_from_kernel
from calibprob.bases.gp._sparse_loo import sparse_kriging_system
from calibprob.bases.gp.loo import loo_from_factor
from calibprob.calibrators.conformal import JackknifePlusGP
from tests.bases.gp.test_loo import brute_force_loo

THETA = {"lengthscale": np.array([0.3, 0.45]), "variance": 1.4, "noise": 0.03}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(37)
    X = rng.uniform(size=(60, 2))
    y = 2.0 + np.sin(4 * X[:, 0]) * np.cos(3 * X[:, 1]) + 0.1 * rng.normal(size=60)
    return X, y


def _recomputed_loo(gp: GaussianProcessRegressor) -> tuple[np.ndarray, np.ndarray]:
    """``loo()`` as it was: K built again at theta_ and factorised again."""
    th = gp.theta_
    K = gp._k(gp.X_train_, None, th)
    K[np.diag_indices_from(K)] += th["noise"]
    mu, sd = loo_from_kernel(K, gp._y_centred(), mean=gp.mean)
    return mu + gp._y_shift, sd


@pytest.mark.parametrize("mean", ["zero", "constant"])
@pytest.mark.parametrize("optimize", [False, True])
def test_exact_loo_on_the_fit_factor_is_the_recomputed_loo_bit_for_bit(data, mean, optimize):
    X, y = data
    params = {"theta": THETA} if not optimize else {"n_restarts": 1, "random_state": 0}
    gp = GaussianProcessRegressor(kernel="matern", p=2, mean=mean, optimize=optimize, **params).fit(X, y)
    mu, sd = gp.loo()
    ref_mu, ref_sd = _recomputed_loo(gp)
    np.testing.assert_array_equal(mu, ref_mu)
    np.testing.assert_array_equal(sd, ref_sd)


def test_exact_loo_on_the_fit_factor_against_refits(data):
    # an independent check of the new path: n refits at fixed theta (Dubrule 1983)
    X, y = data
    params = dict(kernel="matern", p=2, mean="constant", theta=THETA)
    gp = GaussianProcessRegressor(optimize=False, **params).fit(X, y)
    mu, sd = gp.loo()
    ref_mu, ref_sd = brute_force_loo(X, y, **params)
    np.testing.assert_allclose(mu, ref_mu, rtol=0, atol=1e-8 * np.std(y))
    np.testing.assert_allclose(sd, ref_sd, rtol=1e-8)


def test_exact_loo_at_another_theta_still_factorises_its_own_k(data):
    X, y = data
    gp = GaussianProcessRegressor(optimize=False, theta=THETA).fit(X, y)
    other = {**THETA, "variance": 2.0}
    ref = GaussianProcessRegressor(optimize=False, theta=other).fit(X, y)
    np.testing.assert_allclose(gp.loo(theta=other)[0], ref.loo()[0], rtol=1e-12)


def test_loo_from_factor_bad_input():
    L = np.eye(3)
    with pytest.raises(ValueError, match=r"L must have shape \(2, 2\) to match y; got \(3, 3\)"):
        loo_from_factor(L, [1.0, 2.0])
    with pytest.raises(ValueError, match="at least 3 observations with mean='constant'; got 2"):
        loo_from_factor(np.eye(2), [1.0, 2.0], mean="constant")
    with pytest.raises(ValueError, match="mean"):
        loo_from_factor(L, [1.0, 2.0, 3.0], mean="linear")


@pytest.mark.parametrize("mean", ["zero", "constant"])
def test_sparse_loo_from_the_j_gp_view_is_loo_bit_for_bit(data, mean):
    X, y = data
    gp = SparseGaussianProcessRegressor(n_inducing=15, mean=mean, n_restarts=1, random_state=0).fit(X, y)
    view = JackknifePlusGP(estimator=gp, prefit=True).kriging_view()
    for include_noise in (True, False):
        got = gp.loo_from_system(view.system, include_noise=include_noise)
        ref = gp.loo(include_noise=include_noise)
        np.testing.assert_array_equal(got[0], ref[0])
        np.testing.assert_array_equal(got[1], ref[1])


def test_sparse_loo_from_system_rejects_another_mean_handling(data):
    X, y = data
    gp = SparseGaussianProcessRegressor(n_inducing=15, mean="constant", n_restarts=1, random_state=0).fit(X, y)
    fixed_mean = sparse_kriging_system(gp, offset=gp.mean_, gls=False)
    with pytest.raises(ValueError, match=r"system must be this GP's kriging system with gls=True .* got gls=False"):
        gp.loo_from_system(fixed_mean)


def test_exact_loo_factorises_nothing_at_theta_(data, monkeypatch):
    # at the fitted theta no Cholesky runs (the fit's factor); at another theta its own K is factorised
    X, y = data
    gp = GaussianProcessRegressor(optimize=False, theta=THETA, mean="constant").fit(X, y)
    calls: list = []
    real = scipy.linalg.cholesky

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(scipy.linalg, "cholesky", counting)
    gp.loo()
    assert calls == []
    gp.loo(theta={**THETA, "variance": 2.0})
    assert calls == [1]
