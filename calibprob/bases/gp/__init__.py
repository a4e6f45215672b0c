"""Gaussian-process regression: kernels, exact and sparse (VFE) GPs, closed-form LOO.

Hyperparameters are the MAP of a PyMC model (flat priors: maximum likelihood
or REML); the exact GP maximises it with an equal NumPy/SciPy value and
gradient (one Cholesky per evaluation), the sparse GP with the model's compiled
log-probability. Prediction, σ(θ, x) for any θ and leave-one-out are NumPy/SciPy.

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
    BLAS threads during optimisation (default ``"auto"``: one per Dask worker and
    for small or busy cases, otherwise measured once per process; the choice is
    in ``fit_info_["blas_threads"]``).
"""

from calibprob.bases.gp._pymc import clear_cache, get_blas_threads, get_compile_mode, set_blas_threads, set_compile_mode
from calibprob.bases.gp.exact import GaussianProcessRegressor
from calibprob.bases.gp.kernels import kernel, matern, matern_coefficients, squared_exponential
from calibprob.bases.gp.loo import loo_from_kernel
from calibprob.bases.gp.sparse import SparseGaussianProcessRegressor, kmeans_inducing_points

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
