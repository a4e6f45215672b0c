"""Kernels: one code path for NumPy and PyTensor, checked against PyMC and the Bessel form."""

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy.special import gamma, kv

from calibprob.bases.gp.kernels import kernel, matern, matern_coefficients, scaled_sqdist, squared_exponential

# every graph in this module is tiny: compile it without Numba's slow cold JIT
FAST = pytensor.config.change_flags(mode="FAST_COMPILE")


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X1 = rng.normal(size=(25, 3))
    X2 = rng.normal(size=(17, 3))
    ls = np.array([0.5, 1.3, 2.0])
    return X1, X2, ls, 1.7


@pytest.mark.parametrize("p, cls", [(0, pm.gp.cov.Matern12), (1, pm.gp.cov.Matern32), (2, pm.gp.cov.Matern52)])
def test_matern_equals_pymc(data, p, cls):
    X1, X2, ls, var = data
    with FAST:
        cov = cls(3, ls=ls)
        ref_cross = var * cov(X1, X2).eval()
        ref_sym = var * cov(X1).eval()
    np.testing.assert_allclose(matern(X1, X2, ls, var, p), ref_cross, rtol=0, atol=1e-10)
    if p > 0:
        # PyMC adds 1e-12 under its sqrt: invisible at r = 0 only for p >= 1 (k'(0) = 0)
        np.testing.assert_allclose(matern(X1, None, ls, var, p), ref_sym, rtol=0, atol=1e-10)


def test_exponential_is_pymc_exponential_with_half_lengthscale(data):
    X1, X2, ls, var = data
    with FAST:
        ref = var * pm.gp.cov.Exponential(3, ls=ls / 2).full(X1, X2).eval()
    np.testing.assert_allclose(matern(X1, X2, ls, var, 0), ref, rtol=0, atol=1e-10)


def test_se_equals_pymc_expquad(data):
    X1, X2, ls, var = data
    with FAST:
        ref_cross = var * pm.gp.cov.ExpQuad(3, ls=ls)(X1, X2).eval()
        ref_sym = var * pm.gp.cov.ExpQuad(3, ls=ls)(X1).eval()
    np.testing.assert_allclose(squared_exponential(X1, X2, ls, var), ref_cross, atol=1e-12)
    np.testing.assert_allclose(kernel("se", X1, None, ls, var), ref_sym, atol=1e-12)


@pytest.mark.parametrize("p", range(10))
def test_matern_equals_bessel_form(data, p):
    """k(r) = σ² 2^{1-ν}/Γ(ν) (√(2ν) r)^ν K_ν(√(2ν) r) with ν = p + 1/2 (Stein 1999)."""
    X1, X2, ls, var = data
    nu = p + 0.5
    r = np.sqrt((((X1[:, None, :] - X2[None]) / ls) ** 2).sum(-1))
    z = np.sqrt(2 * nu) * r
    ref = var * 2 ** (1 - nu) / gamma(nu) * z**nu * kv(nu, z)
    np.testing.assert_allclose(matern(X1, X2, ls, var, p), ref, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(np.diag(matern(X1, None, ls, var, p)), var, rtol=1e-14)


def test_matern_coefficients_closed_form():
    np.testing.assert_allclose(matern_coefficients(0), [1.0])
    np.testing.assert_allclose(matern_coefficients(1), [1.0, 1.0])
    np.testing.assert_allclose(matern_coefficients(2), [1.0, 1.0, 1.0 / 3.0])
    # nu = 7/2: 1 + u + 2u^2/5 + u^3/15
    np.testing.assert_allclose(matern_coefficients(3), [1.0, 1.0, 0.4, 1.0 / 15.0])


@pytest.mark.parametrize("name, p", [("se", 2), ("matern", 0), ("matern", 1), ("matern", 3)])
def test_numpy_and_pytensor_agree(data, name, p):
    X1, X2, ls, var = data
    A, B, L = pt.dmatrix("A"), pt.dmatrix("B"), pt.dvector("L")
    sym = kernel(name, A, B, L, var, p=p, xp=pt)
    sym_self = kernel(name, A, None, L, var, p=p, xp=pt)
    f = pytensor.function([A, B, L], [sym, sym_self], mode="FAST_COMPILE")
    cross, self_k = f(X1, X2, ls)
    np.testing.assert_allclose(cross, kernel(name, X1, X2, ls, var, p=p), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(self_k, kernel(name, X1, None, ls, var, p=p), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("name, p", [("se", 2), ("matern", 0), ("matern", 2)])
def test_gradient_finite_at_zero_distance(data, name, p):
    """Duplicated rows (r = 0 off the diagonal too) must not give NaN/inf gradients."""
    X1, _, ls, var = data
    X = np.vstack([X1[:5], X1[:5]])  # every point twice
    L = pt.dvector("log_ls")
    A = pt.dmatrix("A")
    Xc = pt.dmatrix("Xc")
    obj = pt.sum(kernel(name, A, None, pt.exp(L), var, p=p, xp=pt) * Xc)
    g = pytensor.function([A, L, Xc], pytensor.grad(obj, L), mode="FAST_COMPILE")
    weights = np.random.default_rng(1).normal(size=(10, 10))
    assert np.all(np.isfinite(g(X, np.log(ls), weights)))
    # against central finite differences of the NumPy kernel; the duplicate pairs
    # (i, i+5) are left out there: their distance is round-off (~1e-8) that moves
    # at random with ℓ, which makes a finite difference (not the gradient) noisy
    dup = np.zeros((10, 10), bool)
    dup[np.arange(5), np.arange(5) + 5] = dup[np.arange(5) + 5, np.arange(5)] = True
    weights[dup] = 0.0
    grad = g(X, np.log(ls), weights)
    fd = np.empty(3)
    for j in range(3):
        e = np.zeros(3)
        e[j] = 1e-6
        up = np.sum(kernel(name, X, None, np.exp(np.log(ls) + e), var, p=p) * weights)
        dn = np.sum(kernel(name, X, None, np.exp(np.log(ls) - e), var, p=p) * weights)
        fd[j] = (up - dn) / 2e-6
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-7)


def test_symmetric_distance_has_exact_zero_diagonal_and_psd(data):
    X1, _, ls, var = data
    assert np.all(np.diag(scaled_sqdist(X1, None, ls)) == 0.0)
    K = matern(X1, None, ls, var, 1)
    np.testing.assert_allclose(K, K.T)
    assert np.linalg.eigvalsh(K).min() > -1e-12


def test_bad_kernel_name_and_p(data):
    X1, X2, ls, var = data
    with pytest.raises(ValueError, match="kernel must be one of 'se', 'matern'; got 'rbf'"):
        kernel("rbf", X1, X2, ls, var)
    with pytest.raises(ValueError, match=r"p must be >= 0 .*got -1"):
        matern(X1, X2, ls, var, -1)
    with pytest.raises(TypeError, match="p must be a non-negative integer"):
        matern(X1, X2, ls, var, 1.5)


def test_numpy_kernels_are_bitwise_the_generic_expressions():
    """The in-place NumPy path (two n x n arrays at most) rounds exactly as the written formula."""
    from math import sqrt

    from calibprob.bases.gp.kernels import _R2_FLOOR, kernel, matern_coefficients

    rng = np.random.default_rng(3)
    X, Z = rng.normal(size=(60, 3)), rng.normal(size=(20, 3))
    X[4] = X[9]  # a duplicate row: zero distance off the diagonal
    ls, var = np.array([0.5, 1.3, 2.0]), 1.7
    for X2 in (None, Z):
        A = X / ls
        B = A if X2 is None else X2 / ls
        d2 = np.sum(A * A, axis=1)[:, None] + np.sum(B * B, axis=1)[None, :] - 2.0 * (A @ B.T)
        if X2 is None:
            d2 = d2 * (1.0 - np.eye(len(X)))
        d2 = np.maximum(d2, 0.0)
        np.testing.assert_array_equal(kernel("se", X, X2, ls, var), var * np.exp(-0.5 * d2))
        for p in (0, 1, 2, 3):
            coef = matern_coefficients(p)
            u = sqrt(2.0 * p + 1.0) * np.sqrt(np.maximum(d2, _R2_FLOOR))
            poly = coef[p] * np.ones_like(u) if p == 0 else coef[p] * u + coef[p - 1]
            for j in range(p - 2, -1, -1):
                poly = poly * u + coef[j]
            np.testing.assert_array_equal(kernel("matern", X, X2, ls, var, p=p), var * poly * np.exp(-u))
