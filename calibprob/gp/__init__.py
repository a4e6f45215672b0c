"""Gaussian-process regression: kernels, exact and sparse (VFE) GPs, closed-form LOO.

Hyperparameters are fitted as the MAP of a PyMC model (flat priors: maximum
likelihood or REML) whose log-probability and gradient are compiled once per
configuration; prediction, σ(θ, x) for any θ and leave-one-out are NumPy/SciPy.

Public API
----------
GaussianProcessRegressor, SparseGaussianProcessRegressor
    Base regressors (``fit``, ``predict_mean_std``, ``predict``; GP extras
    ``theta_``, ``loo``, ``kernel_matrix``, ``log_marginal_likelihood``,
    ``build_model``).
loo_from_kernel
    Dubrule's closed-form leave-one-out (zero or unknown constant mean).
kernel, squared_exponential, matern
    Kernels for NumPy and PyTensor (``xp=numpy`` or ``xp=pytensor.tensor``).
get_compile_mode, set_compile_mode, clear_cache
    PyTensor compile mode of the objectives (default ``"FAST_COMPILE"``).
get_blas_threads, set_blas_threads
    BLAS threads during optimisation (default ``"auto"``: 1 for n <= 2000).
"""

from calibprob.gp._pymc import (
    clear_cache,
    get_blas_threads,
    get_compile_mode,
    set_blas_threads,
    set_compile_mode,
)
from calibprob.gp.exact import GaussianProcessRegressor
from calibprob.gp.kernels import kernel, matern, matern_coefficients, squared_exponential
from calibprob.gp.loo import loo_from_kernel
from calibprob.gp.sparse import SparseGaussianProcessRegressor, kmeans_inducing_points

__all__ = [
    "GaussianProcessRegressor",
    "SparseGaussianProcessRegressor",
    "loo_from_kernel",
    "kernel",
    "matern",
    "matern_coefficients",
    "squared_exponential",
    "kmeans_inducing_points",
    "get_compile_mode",
    "set_compile_mode",
    "get_blas_threads",
    "set_blas_threads",
    "clear_cache",
]
