r"""A first-order autoregressive model, AR(1), as a ``model_factory`` of :func:`calibprob.predictive.lfo`.

.. math::

    y_t \mid y_{t-1} \sim \mathcal N(c + \phi\, y_{t-1}, \sigma^2), \quad t = 2, \dots, n,
    \qquad c \sim \mathcal N(0, 1),\ \phi \sim \mathcal U(-1, 1),\ \sigma \sim \operatorname{HalfNormal}(1),

conditional on the first point (the conditional likelihood of Box & Jenkins), so the observed
variable scores the last :math:`n - 1` points of a history of :math:`n` and the free variables
:math:`(c, \phi, \sigma)` do not grow with it: what PSIS-LFO needs to score a fit on a short
history against the whole series.

References
----------
Box, G. E. P., Jenkins, G. M., Reinsel, G. C. and Ljung, G. M. (2015). *Time Series Analysis:
Forecasting and Control*, 5th ed. Wiley, §7.1 (conditional least squares / likelihood).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["ar1_model", "simulate_ar1"]


def ar1_model(y_history: ArrayLike) -> Any:  # a pymc.Model
    """The AR(1) model of a history (a 1-D array of at least 2 points); a ``pm.Model``.

    Parameters
    ----------
    y_history : array_like, shape (n,)

    Returns
    -------
    pymc.Model
        Free variables ``c``, ``phi``, ``sigma``; observed ``y`` (the last ``n - 1`` points).
    """
    import pymc as pm

    y = np.asarray(y_history, float)
    if y.ndim != 1 or y.size < 2:
        raise ValueError(f"y_history must be a 1-D array of at least 2 points; got shape {y.shape}.")
    with pm.Model() as model:
        c = pm.Normal("c", 0.0, 1.0)
        phi = pm.Uniform("phi", -1.0, 1.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Normal("y", c + phi * y[:-1], sigma, observed=y[1:])
    return model


def simulate_ar1(
    n: int,
    *,
    c: float = 0.5,
    phi: float = 0.6,
    sigma: float = 1.0,
    random_seed: int | np.random.Generator | None = None,
) -> np.ndarray:
    r"""A stationary AR(1) series of length ``n`` (first point from the stationary law).

    Examples
    --------
    >>> simulate_ar1(3, random_seed=0).shape
    (3,)
    """
    rng = np.random.default_rng(random_seed)
    y = np.empty(n)
    y[0] = c / (1 - phi) + sigma / np.sqrt(1 - phi**2) * rng.standard_normal()
    for t in range(1, n):
        y[t] = c + phi * y[t - 1] + sigma * rng.standard_normal()
    return y
