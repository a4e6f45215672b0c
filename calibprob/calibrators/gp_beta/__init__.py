r"""GP-Beta distribution calibration (Song, Diethe, Kull & Flach 2019) as a PyMC model.

A base regressor predicts a Gaussian :math:`N(\mu_i, \sigma_i^2)` for every
input. GP-Beta recalibrates the *whole* predictive distribution, point by
point: a latent multi-output Gaussian process over the base's outputs
:math:`(\mu, \sigma)` sets the three parameters :math:`(a, b, c)` of a Beta
calibration map applied to the base CDF,

.. math::

    \hat F_i(y) = c_\beta\bigl(\Phi(z_i)\bigr), \qquad
    c_\beta(q) = \operatorname{expit}\bigl(a_i \log q - b_i \log(1-q) + c_i\bigr),
    \qquad z_i = (y - \mu_i)/\sigma_i,

so that the calibrated density is the base density times the Beta link
:math:`r_\beta(q) = c_\beta'(q)` (Song et al. eq. 6–7):

.. math::

    \log \hat p_i(y) = \log\varphi(z_i) - \log\sigma_i
        + \log\operatorname{expit}(t) + \log\operatorname{expit}(-t)
        + \log\bigl(a_i(1-q) + b_i q\bigr) - \log q - \log(1-q),
    \qquad t = a_i\log q - b_i\log(1-q) + c_i .

Every term is evaluated in log space — :math:`\log q = \log\Phi(z)` and
:math:`\log(1-q) = \log\Phi(-z)` by the ``erfcx`` form of the normal log-CDF,
:math:`\log(a(1-q)+bq)` by ``logaddexp`` — so the likelihood stays finite for
:math:`\Phi(z)` within ``1e-300`` of 0 or 1 (20+ base standard deviations out).

The model (all free parameters are unconstrained Normals, so ADVI, MAP and NUTS
work on the same graph and posterior draws need no back-transform):

* inputs are standardised: :math:`\tilde\mu = (\mu - m)/s`, :math:`\tilde\sigma = \sigma/s`
  with :math:`m = \overline{\mu}` and :math:`s = \sqrt{\operatorname{var}(\mu) + \overline{\sigma^2}}`
  (the base's marginal predictive scale) — one scale for both, so that the
  kernel below keeps its meaning as an inner product of Gaussian embeddings;
* kernel (eq. 9, the RBF inner product of the embeddings of :math:`N(\tilde\mu_i, \tilde\sigma_i^2)`;
  the paper's :math:`\sigma` there is a variance):
  :math:`k_{ij} = \theta\,(\tilde\sigma_i^2 + \tilde\sigma_j^2 + \theta^2)^{-1/2}
  \exp\bigl(-(\tilde\mu_i-\tilde\mu_j)^2 / (2(\tilde\sigma_i^2+\tilde\sigma_j^2+\theta^2))\bigr)`,
  :math:`\log\theta \sim N(0, 0.75^2)`;
* coregionalisation (ICM, eq. 10): :math:`\operatorname{cov}(w_j(x), w_{j'}(x')) = R_{jj'} k(x, x')`
  with :math:`B = WW^\top + \operatorname{diag}(\kappa)`, :math:`W \in \mathbb R^{3\times r}`,
  :math:`W \sim N(0, 1)`, :math:`\log\kappa \sim N(0, 0.5^2)`, used in its correlation form
  :math:`R = D^{-1/2} B D^{-1/2}` — the per-output scale is carried by the
  paper's :math:`\gamma` below, and keeping it in both places would leave NUTS an
  unidentified ridge;
* sparse whitened inducing points (the SVGP parametrisation of the paper's
  §4.3 with a Gaussian :math:`q(u)`): :math:`m` inducing inputs :math:`Z` in
  :math:`(\tilde\mu, \tilde\sigma)` space (k-means of the data, optionally learned,
  :math:`Z \sim N(Z_0, 0.25^2)`), :math:`V \sim N(0, I_{m\times 3})`,
  :math:`u = L_K V L_R^\top` (so :math:`\operatorname{cov}(\operatorname{vec} u) = R\otimes K_{ZZ}`),
  and at the data :math:`f = K_{XZ} K_{ZZ}^{-1} u = K_{XZ} L_K^{-\top} V L_R^\top`
  (the projected-process / subset-of-regressors mean; the conditional
  variance :math:`k(x,x) - q(x,x)` is dropped, which is exact at the inducing
  points and reverts to the identity map far from the data);
* link (§4.2): :math:`\log a = f_a/\gamma_a + \delta_a`, :math:`\log b = f_b/\gamma_b + \delta_b`,
  :math:`c = f_c/\gamma_c + \delta_c` with :math:`\log\gamma \sim N(\log 2, 0.75^2)`,
  :math:`\delta \sim N(0, 1)`: the identity map (:math:`a = b = 1, c = 0`) is the prior centre.

Inference: ``"advi"`` (mean-field over every parameter, Adam, minibatches
through :func:`pymc.Minibatch` for large ``n``), ``"fullrank_advi"``,
``"svi"`` (the sparse variational GP of Hensman et al. [3]_ as the paper and
netcal fit it: a full-covariance Gaussian over the whitened inducing values,
the hyperparameters — kernel, coregionalisation, link scale and offset —
as point estimates maximising the same evidence lower bound plus their log
prior; minibatches for large ``n`` as for ADVI), ``"map"`` (L-BFGS on the log posterior) or ``"nuts"``
(nutpie when installed, PyMC's NUTS otherwise). The fitted
calibrator keeps an ArviZ ``DataTree`` (``posterior``, ``sample_stats``,
``log_likelihood``, ``observed_data``, ``constant_data``) in ``idata_``.

Prediction: the calibrated CDF is the posterior average of the Beta-mapped
base CDF, evaluated on a fine per-observation grid in :math:`z` and inverted
monotonically to quantiles (linear in :math:`\Phi^{-1}(\bar F)`); mean and
standard deviation are integrals of the same averaged CDF; densities are exact
posterior averages (:meth:`GPBetaCalibrator.logpdf`). The calibration map and
its credible band come from :meth:`GPBetaCalibrator.calibration_map`.

Computation: full-batch ``"map"``, ``"advi"``, ``"fullrank_advi"`` and ``"svi"``
evaluate the log posterior and its gradient in NumPy / SciPy
(:class:`LogPosterior`, equal to the PyMC model's ``logp`` and ``dlogp`` to
1e-9, tested), and ADVI runs PyMC's own algorithm on it (:func:`advi_fit`:
its parametrisation, random stream and Adam, step for step) — so these fits
build and compile no graph. The PyMC model (:func:`build_model`) is the
declared model: NUTS samples it, minibatch ADVI / SVI (``pm.Minibatch``)
differentiate it, and ``pm.compute_log_likelihood`` scores it. Its graph
depends only on ``(n_inducing, rank, learn_inducing, minibatch size)``; data,
standardisation and inducing initialisation are shared variables
(``pm.Data``), so one compiled function serves every data set of a
configuration in a process (module cache) and across processes (PyTensor's
disk cache); the C backend (``"CVM"``) is its default mode (see
``DEFAULT_COMPILE_MODE``). Fits and predictions run with one BLAS thread
(small triangular solves are ~20x slower with two). Prediction is pure NumPy.

Layout: :mod:`._link` (Beta-link and kernel numerics), :mod:`._objective`
(NumPy log posterior), :mod:`._graph` (PyMC model, graph cache), :mod:`._svi`
(SVI and ADVI optimisers), :mod:`._inference` (the five inference methods),
:mod:`._grid` (prediction grid), :mod:`._tree` (``idata_``), :mod:`.estimator`
(:class:`GPBetaCalibrator`), :mod:`.plots` (Fig. 2).

References
----------
.. [1] Song, H., Diethe, T., Kull, M., Flach, P. (2019). Distribution calibration
   for regression. ICML. (§4, eq. 6–12.)
.. [2] Kull, M., Silva Filho, T., Flach, P. (2017). Beta calibration: a
   well-founded and easily implemented improvement on logistic calibration for
   binary classifiers. AISTATS.
.. [3] Hensman, J., Matthews, A., Ghahramani, Z. (2015). Scalable variational
   Gaussian process classification. AISTATS.
"""

from __future__ import annotations

from typing import Any

# ruff: noqa: F401 - this package's namespace re-exports its modules' names (public, and the
# private ones tests, benchmarks and the old single-module users import)
from calibprob.calibrators.gp_beta._graph import (
    _GRAPHS,
    DEFAULT_COMPILE_MODE,
    _graph,
    _quiet_compile,
    beta_link_logp,
    build_model,
    clear_graph_cache,
    kernel_class,
)
from calibprob.calibrators.gp_beta._kmeans import _kmeans
from calibprob.calibrators.gp_beta._link import (
    _JITTER,
    _LOG_SQRT_2PI,
    OUTPUTS,
    PRIORS,
    _correlation,
    _latent_numpy,
    _pointwise_loglik,
    _tail_bounds,
    beta_calibration_map,
    beta_link_cdf,
    beta_link_cdf_z,
    beta_link_logpdf,
    beta_link_logpdf_z,
    beta_link_ppf_z,
    gaussian_embedding_kernel,
)
from calibprob.calibrators.gp_beta._objective import Layout, LogPosterior
from calibprob.calibrators.gp_beta._svi import ADVIResult, SVIResult, advi_fit, svi_fit
from calibprob.calibrators.gp_beta._tree import held_out_elpd
from calibprob.calibrators.gp_beta.estimator import (
    AUTO_BATCH_SIZE,
    AUTO_FULL_BATCH,
    INFERENCE_METHODS,
    GPBetaCalibrator,
)
from calibprob.calibrators.gp_beta.plots import plot_calibration_map

# The estimator's public home is this package (as before the split): saved files, pickles,
# the class registry of calibprob._core.persistence and the docs name it calibprob.calibrators.gp_beta.
GPBetaCalibrator.__module__ = __name__

__all__ = [
    "GPBetaCalibrator",
    "GaussianEmbeddingRBF",  # noqa: F822 - built lazily by the module __getattr__ (PyMC import)
    "gaussian_embedding_kernel",
    "beta_link_logpdf",
    "beta_link_logpdf_z",
    "beta_link_cdf",
    "beta_link_cdf_z",
    "beta_link_ppf_z",
    "beta_calibration_map",
    "plot_calibration_map",
    "held_out_elpd",
    "INFERENCE_METHODS",
    "clear_graph_cache",
    "svi_fit",
    "SVIResult",
    "advi_fit",
    "ADVIResult",
    "LogPosterior",
]


def __getattr__(name: Any) -> Any:
    # The Covariance subclass needs PyMC; build it on first access so that
    # importing this package stays light.
    if name == "GaussianEmbeddingRBF":
        return kernel_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ===========================================================================
# Comparison-spec runner (kind "gp-beta")
# ===========================================================================

#: Hyperparameters the ``gp-beta`` kind of a comparison spec passes to :class:`GPBetaCalibrator`
#: (the kind also accepts ``calibration_data``, see :func:`calibprob.compare.methods.calibration_prediction`).
RUN_OPTIONS = (
    "n_inducing",
    "rank",
    "inference",
    "draws",
    "n_iter",
    "learning_rate",
    "obj_n_mc",
    "batch_size",
    "learn_inducing",
    "tune",
    "chains",
    "target_accept",
    "n_grid",
    "compile_mode",
)
