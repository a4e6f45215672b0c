"""Small optimisation pieces shared by the NumPy-side fitting loops."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Adam"]


class Adam:
    r"""Adam's moment estimates for one parameter array (Kingma & Ba 2015).

    :meth:`step` turns a gradient :math:`g_t` into the bias-corrected update
    :math:`\eta\,\hat m_t / (\sqrt{\hat v_t} + \epsilon)`; the caller adds it (ascent) or
    subtracts it (descent), so one implementation serves the GP base-model protocol
    (``calibprob.bases.gp._pymc.adam``) and GP-Beta's SVI
    (:func:`calibprob.calibrators.gp_beta.svi_fit`).

    Parameters
    ----------
    shape : tuple of int
        Shape of the parameter array.
    learning_rate : float
        Step size :math:`\eta`.
    beta1, beta2, eps : float
        The usual Adam constants.

    References
    ----------
    Kingma, D. P. and Ba, J. (2015). Adam: a method for stochastic optimization. ICLR.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob._core.optim import Adam
    >>> opt, x = Adam((1,), 0.1), np.array([3.0])
    >>> for _ in range(500):
    ...     x = x - opt.step(2 * x)  # minimise x^2
    >>> bool(abs(x[0]) < 0.05)
    True
    """

    def __init__(
        self, shape: Any, learning_rate: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8
    ) -> None:
        self.learning_rate = float(learning_rate)
        self.beta1, self.beta2, self.eps = beta1, beta2, eps
        self.m = np.zeros(shape)
        self.v = np.zeros(shape)
        self.t = 0

    def step(self, grad: np.ndarray) -> np.ndarray:
        """The update for gradient ``grad`` (advances the step counter)."""
        self.t += 1
        self.m = self.beta1 * self.m + (1 - self.beta1) * grad
        self.v = self.beta2 * self.v + (1 - self.beta2) * grad * grad
        m_hat = self.m / (1 - self.beta1**self.t)
        v_hat = self.v / (1 - self.beta2**self.t)
        return self.learning_rate * m_hat / (np.sqrt(v_hat) + self.eps)
