r"""The sharp calibrated GP's confidence bound in the BO loop (Capone et al. 2023, appendix eq. 18).

.. math::

    \alpha(x) = \mu(\theta^R, x) + \hat\beta_\delta\, \sigma(\hat\theta_\delta, x),

for minimisation with the lower level :math:`\delta` (default 0.01: the
paper's "one percent of the evaluations outside the confidence region").
:class:`calibprob.calibrators.sharp_gp.SharpCalibratedGP` needs calibration
points disjoint from the GP's training data, which a BO run does not have, so
at every step the data (in acquisition order) are split in two interleaved
halves: a copy of the GP with the current hyperparameters :math:`\theta^R` is
conditioned on the even positions and the sharp GP (``variant="full"``, the
paper's Algorithm 1, knots at the extreme levels :math:`1/(N+1)` and
:math:`N/(N+1)`) is calibrated on the odd positions. The fitted
:math:`\hat\beta_\delta, \hat\theta_\delta` are then used with the posterior of
*all* the data (the mean of the full GP and :math:`\sigma(\hat\theta_\delta, x)`
conditioned on every point). :math:`\delta = 0.01` lies beyond the reachable
knots with so few points; the sharp GP's documented tail rule extrapolates.
With fewer than two points in either half, or when the sharp GP's fit
raises, the step falls back to the vanilla bound :math:`\mu - 2\sigma`
(Capone et al.'s vanilla UCB, β = 2) and ``sharp_fitted`` is False.

References
----------
Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
processes. NeurIPS 36, appendix "Bayesian optimization", eq. (17)-(18).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from calibprob.calibrators.sharp_gp import SharpCalibratedGP

__all__ = ["sharp_lower_bound"]


def sharp_lower_bound(
    model: Any, U: np.ndarray, ys: np.ndarray, *, level: float = 0.01, seed: Any = None, variant: str = "full"
) -> Any:
    """Build the eq. (18) bound on the unit box for the current data.

    Parameters
    ----------
    model : calibprob.bases.gp.GaussianProcessRegressor
        The GP fitted on all the data ``(U, ys)``.
    U : ndarray, shape (n, d)
        Inputs in the unit box, acquisition order.
    ys : ndarray, shape (n,)
        Standardised outputs.
    level : float
        Lower quantile level δ of the bound.
    seed : int, optional
    variant : {"full", "scaled", "cross-fitted"}

    Returns
    -------
    callable
        ``(m, d) -> (m,)``, the bound to minimise; its attribute ``fitted``
        tells whether the sharp GP was calibrated (False: vanilla fallback).
    """
    n = U.shape[0]
    train = np.arange(n) % 2 == 0
    fitted = bool(train.sum() >= 2 and (~train).sum() >= 2)
    theta_delta, beta = None, -2.0
    if fitted:
        theta_R = {k: v for k, v in model.theta_.items() if k != "mean"}
        base = type(model)(**{**model.get_params(), "theta": theta_R, "optimize": False})
        base.fit(U[train], ys[train])
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sharp = SharpCalibratedGP(
                    estimator=base, variant=variant, n_levels=2, random_state=seed, blas_threads=None
                ).fit(U[~train], ys[~train])
            beta = float(sharp.calibration_beta([level])[0])
            th = sharp.calibration_theta([level])
            theta_delta = {"lengthscale": th["lengthscale"][0], "variance": float(th["variance"][0])}
            if getattr(model, "noise", True):
                theta_delta["noise"] = float(th["noise"][0])
        except Exception as err:  # noqa: BLE001 - a failed calibration must not stop the BO run
            fitted, beta, theta_delta = False, -2.0, None
            warnings.warn(
                f"sharp GP calibration failed ({type(err).__name__}: {err}); this step uses "
                "the vanilla bound mu - 2 sigma.",
                RuntimeWarning,
                stacklevel=2,
            )

    return _Bound(model, beta, theta_delta, fitted)


class _Bound:
    """``mu(theta_R, x) + beta * sigma(theta_delta, x)`` on the unit box; ``fitted``: sharp GP calibrated."""

    def __init__(self, model: Any, beta: float, theta_delta: dict | None, fitted: bool) -> None:
        self.model, self.beta, self.theta_delta, self.fitted = model, beta, theta_delta, fitted

    def __call__(self, Uc: np.ndarray) -> np.ndarray:
        mu, sd = self.model.predict_mean_std(Uc)
        if self.theta_delta is not None:
            sd = self.model.predict_mean_std(Uc, theta=self.theta_delta)[1]
        return mu + self.beta * sd
