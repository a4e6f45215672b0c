r"""Split conformal predictive system: a full predictive CDF from calibration scores.

With a signed, σ-normalised conformity score
:math:`A(x, y) = (y - \mu(x)) / s(x)`, :math:`s = \max(\epsilon, \sigma^\beta)`
(increasing in :math:`y`), and sorted calibration scores
:math:`A_{(1)} \le \dots \le A_{(n)}`, Vovk et al.'s split conformal
predictive distribution at a test point :math:`x` is

.. math::

    Q(y, \tau) = \frac{\#\{i : A_i < A(x, y)\} + \tau\,(\#\{i : A_i = A(x, y)\} + 1)}{n + 1},
    \qquad \tau \in [0, 1],

a step function of :math:`y` with jumps at
:math:`y_{(i)} = \mu(x) + s(x) A_{(i)}`. For exchangeable data and
:math:`\tau \sim U(0, 1)`, :math:`Q(Y, \tau)` is exactly uniform: the
system is calibrated in probability (Vovk et al. 2020, Thm. 1).

To fit the predictive-distribution contract (quantiles at levels, smooth in
between), calibprob stores the continuous version that passes through the
middle of every jump, :math:`F(y_{(i)}) = i/(n+1)`: the quantile at level
:math:`p` is the score at the continuous rank :math:`p(n+1)`, linearly
interpolated between order statistics. It reaches levels in
:math:`[1/(n+1), n/(n+1)]`; beyond them the contract's Gaussian tail rule
extends it. At every stored level :math:`p`,

.. math::

    \frac{\lfloor p(n+1) \rfloor}{n+1} \le P\bigl(Y \le Q(p)\bigr) \le \frac{\lceil p(n+1) \rceil}{n+1},

which ``tests/test_conformal_predictive_system.py`` checks over seeded draws.

References
----------
Vovk, V., Petej, I., Nouretdinov, I., Manokhin, V. and Gammerman, A. (2020).
Computationally efficient versions of conformal predictive distributions.
Neurocomputing 397, 292–308 (split conformal predictive systems).
Vovk, V., Shen, J., Manokhin, V. and Xie, M. (2017). Nonparametric predictive
distributions based on conformal prediction. PMLR 60.
"""

from __future__ import annotations

import numpy as np

from calibprob.conformal.scores import SignedAbsoluteScore, SignedNormalizedScore
from calibprob.conformal.split import SplitConformalRegressor

__all__ = ["ConformalPredictiveSystem", "cps_cdf"]


def cps_cdf(sorted_scores, test_scores, tau=0.5) -> np.ndarray:
    r"""Exact split-CPS value :math:`Q(y, \tau)` from the test point's own score.

    Parameters
    ----------
    sorted_scores : ndarray, shape (n,)
        Calibration scores, increasing.
    test_scores : ndarray, shape (m,)
        :math:`A(x_j, y_j)` of the test points.
    tau : float or ndarray, shape (m,)
        Tie-breaking variable in [0, 1]; ``U(0, 1)`` draws make the values
        exactly uniform under exchangeability.

    Returns
    -------
    ndarray, shape (m,)
    """
    R = np.asarray(sorted_scores, float)
    a = np.asarray(test_scores, float)
    below = np.searchsorted(R, a, side="left")
    ties = np.searchsorted(R, a, side="right") - below
    return (below + np.asarray(tau, float) * (ties + 1)) / (R.size + 1)


class ConformalPredictiveSystem(SplitConformalRegressor):
    r"""Split conformal predictive system (Vovk et al. 2020) around any base.

    The calibration scores are the signed normalised residuals
    :math:`(y - \mu)/\max(\epsilon, \sigma^\beta)` (or the raw signed
    residuals with ``normalize=False``, for bases without σ). :meth:`predict`
    returns the full predictive distribution per test point as the
    predictive-distribution contract, so NLL, CRPS and ECE are defined for
    it; :meth:`predict_interval` gives the exact conformal (signed-score)
    intervals; :meth:`predict_cdf` the exact step CDF :math:`Q(y, \tau)`.

    Parameters
    ----------
    estimator : base regressor or callable
    normalize : bool, default True
        Divide residuals by :math:`\max(\epsilon, \sigma^\beta)`.
    beta, eps : float
        Parameters of the normaliser.
    confidence_level : float or sequence, default 0.9
    prefit : bool, default False
    chunk_size : int, optional

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> X = rng.uniform(size=(400, 1)); y = X[:, 0] + rng.normal(size=400)
    >>> base = lambda Xt, yt, Xn: (np.full(len(Xn), yt.mean()), np.full(len(Xn), yt.std()))
    >>> cps = ConformalPredictiveSystem(estimator=base).fit(X[:200], y[:200]).calibrate(X[200:], y[200:])
    >>> pred = cps.predict(X[:5])
    >>> pred.sizes["level"]
    99

    References
    ----------
    Vovk et al. (2020), Neurocomputing 397; Pion & Vazquez (2024) eq. (13) for the score.
    """

    def __init__(
        self,
        *,
        estimator=None,
        normalize: bool = True,
        beta: float = 1.0,
        eps: float = 0.0,
        confidence_level=0.9,
        prefit: bool = False,
        chunk_size: int | None = None,
    ):
        self.estimator = estimator
        self.normalize = normalize
        self.beta = beta
        self.eps = eps
        self.confidence_level = confidence_level
        self.prefit = prefit
        self.chunk_size = chunk_size

    def _score(self):
        return SignedNormalizedScore(beta=self.beta, eps=self.eps) if self.normalize else SignedAbsoluteScore()

    def predict(self, X, *, levels=None):
        """Predictive distribution per test point (see the module docstring)."""
        ds = super().predict(X, levels=levels)
        ds.attrs["method"] = "conformal-predictive-system"
        return ds

    def predict_cdf(self, X, y, *, tau=0.5) -> np.ndarray:
        r"""Exact split-CPS CDF :math:`Q(y_j, \tau)` at the observed ``y``.

        Parameters
        ----------
        X : array_like, shape (m, d)
        y : array_like, shape (m,)
        tau : float or ndarray, shape (m,), default 0.5

        Returns
        -------
        ndarray, shape (m,)
        """
        from calibprob._validation import check_array

        mu, scale = self._mu_scale(X)
        y = check_array(y, "y", ndim=1)
        if y.shape != mu.shape:
            raise ValueError(f"mismatched lengths: X has {mu.size} rows, y has {y.size} entries.")
        return cps_cdf(self.scores_, (y - mu) / scale, tau)
