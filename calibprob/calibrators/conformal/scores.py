r"""Non-conformity scores as small pluggable pieces, each with its inverse.

A score maps an observation :math:`y` and a base prediction :math:`(\mu, \sigma)`
to a number; its inverse maps a score threshold back to interval ends. All
three scores here are affine in :math:`y` given the prediction,

.. math::

    R(y) = \frac{y - \mu}{s(\sigma)} \quad\text{(signed)}, \qquad
    R(y) = \frac{|y - \mu|}{s(\sigma)} \quad\text{(symmetric)},

with the scale :math:`s(\sigma) = 1` (absolute residual) or
:math:`s(\sigma) = \max(\epsilon, \sigma^\beta)` (σ-normalised, Pion &
Vazquez 2024, eq. 9 and eq. 13). Because of that, the inverse of a symmetric
score is :math:`[\mu - r\,s(\sigma),\ \mu + r\,s(\sigma)]` and the inverse of
the signed score is :math:`\mu + r\,s(\sigma)`.

Scores are looked up by name with :func:`get_score` (``"absolute"``,
``"normalized"``, ``"signed"``) or passed as instances.

References
----------
Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
prediction: methods and comparative analysis. LOD 2024. Eq. (9), (13).
Lei, J., G'Sell, M., Rinaldo, A., Tibshirani, R. J. and Wasserman, L. (2018).
Distribution-free predictive inference for regression. JASA 113(523).
"""

from __future__ import annotations

from typing import overload

import numpy as np
from numpy.typing import ArrayLike

from calibprob._core.validation import check_finite

__all__ = [
    "Score",
    "AbsoluteScore",
    "NormalizedScore",
    "SignedNormalizedScore",
    "SignedAbsoluteScore",
    "CQRScore",
    "get_score",
    "SCORES",
    "invert",
]


# an array in, an array out (arrays broadcast); three floats give a float
@overload
def invert(mu: float, scale: float, threshold: float) -> float: ...
@overload
def invert(mu: np.ndarray, scale: np.ndarray | float, threshold: np.ndarray | float) -> np.ndarray: ...
@overload
def invert(mu: np.ndarray | float, scale: np.ndarray, threshold: np.ndarray | float) -> np.ndarray: ...
@overload
def invert(mu: np.ndarray | float, scale: np.ndarray | float, threshold: np.ndarray) -> np.ndarray: ...
def invert(mu: np.ndarray | float, scale: np.ndarray | float, threshold: np.ndarray | float) -> np.ndarray | float:
    r"""Interval end :math:`\mu + s\,t` of a score threshold :math:`t`: the one place a (centre, scale) score is inverted.

    Every score of this module is :math:`(y - \mu)/s` (or its absolute value), so the set
    :math:`\{y : \text{score} \le t\}` ends at :math:`\mu \pm s\,t`; split conformal, the CPS,
    jackknife / CV and conditional conformal all turn thresholds into ends here (arrays broadcast).

    Examples
    --------
    >>> float(invert(1.0, 2.0, -1.5))
    -2.0
    """
    return mu + scale * threshold


class Score:
    """Base class of a non-conformity score.

    Attributes
    ----------
    name : str
    needs_sigma : bool
        Whether the base must provide a predictive standard deviation.
    symmetric : bool
        ``True`` for ``|y - mu|``-type scores (one threshold gives both ends),
        ``False`` for signed scores (the two ends come from two ranks).

    References
    ----------
    Lei, J., G'Sell, M., Rinaldo, A., Tibshirani, R. J. and Wasserman, L. (2018).
    Distribution-free predictive inference for regression. JASA 113(523).

    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, eq. (9) and (13).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.calibrators.conformal import Score, get_score
    >>> isinstance(get_score("normalized"), Score)
    True
    >>> class HalfAbsolute(Score):        # a custom score |y - mu| / 2
    ...     name = "half-absolute"
    ...     def scale(self, sigma):
    ...         return 2.0
    >>> s = HalfAbsolute()
    >>> s.score([4.0], [0.0]).tolist()
    [2.0]
    >>> [end.tolist() for end in s.inverse(1.5, [0.0])]   # interval ends for a threshold of 1.5
    [[-3.0], [3.0]]
    """

    name = "score"
    needs_sigma = False
    symmetric = True

    def scale(self, sigma: ArrayLike | None) -> np.ndarray | float:
        """The normaliser :math:`s(\\sigma)` (1 for the absolute residual)."""
        return 1.0

    def score(self, y: ArrayLike, mu: ArrayLike, sigma: ArrayLike | None = None) -> np.ndarray:
        """Score of observations ``y`` under predictions ``(mu, sigma)``; shapes broadcast."""
        r = (np.asarray(y, float) - np.asarray(mu, float)) / self.scale(sigma)
        return np.abs(r) if self.symmetric else r

    def inverse(
        self, r: ArrayLike, mu: ArrayLike, sigma: ArrayLike | None = None
    ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """Interval ends from score thresholds (``invert``).

        Symmetric scores: ``(mu - r s, mu + r s)`` for a threshold ``r >= 0``.
        Signed scores: ``mu + r s`` (call once per end).
        """
        s = self.scale(sigma)
        mu = np.asarray(mu, float)
        r = np.asarray(r, float)
        if self.symmetric:
            return invert(mu, s, -r), invert(mu, s, r)
        return invert(mu, s, r)

    def bounds(self, mu: ArrayLike, scale: ArrayLike, lo: ArrayLike, hi: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        r"""Interval ends of every point at every level: :math:`\mu + s\,t_{lo}` and :math:`\mu + s\,t_{hi}`.

        Parameters
        ----------
        mu, scale : ndarray, shape (m,)
            The centre and this score's normaliser :math:`s = ` :meth:`scale` of each point.
        lo, hi : ndarray, shape (L,)
            The signed score thresholds per level (``-r`` and ``r`` for a symmetric score).

        Returns
        -------
        (ndarray, ndarray), each shape (m, L)
        """
        mu = np.asarray(mu, float)[:, None]
        scale = np.broadcast_to(np.asarray(scale, float), mu.shape[:1])[:, None]
        return invert(mu, scale, np.asarray(lo, float)[None, :]), invert(mu, scale, np.asarray(hi, float)[None, :])

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class AbsoluteScore(Score):
    r"""Absolute residual :math:`R = |y - \mu|` (no σ needed).

    References
    ----------
    Lei, J., G'Sell, M., Rinaldo, A., Tibshirani, R. J. and Wasserman, L. (2018).
    Distribution-free predictive inference for regression. JASA 113(523).

    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, §2.3.

    Examples
    --------
    >>> AbsoluteScore().score([1.0, -2.0], [0.0, 0.0])
    array([1., 2.])
    """

    name = "absolute"


class NormalizedScore(Score):
    r"""σ-normalised residual, Pion & Vazquez (2024) eq. (9).

    .. math::

        R = \frac{|y - \mu|}{\max(\epsilon, \sigma^\beta)}

    Parameters
    ----------
    beta : float, default 1.0
        Exponent :math:`\beta > 0`; ``beta = 1`` makes the score a standard
        normal modulus under a well-specified Gaussian base.
    eps : float, default 0.0
        Floor :math:`\epsilon \ge 0` of the normaliser. With ``eps = 0`` every
        σ must be strictly positive; with ``eps > 0`` a σ of exactly 0 (an
        interpolating GP at a design point) is allowed. Negative or
        non-finite σ is always an error.

    References
    ----------
    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, eq. (9).

    Lei, J., G'Sell, M., Rinaldo, A., Tibshirani, R. J. and Wasserman, L. (2018).
    Distribution-free predictive inference for regression. JASA 113(523) (locally weighted residuals).

    Examples
    --------
    >>> from calibprob.calibrators.conformal import NormalizedScore
    >>> NormalizedScore().score([1.0, -2.0], [0.0, 0.0], [0.5, 4.0]).tolist()
    [2.0, 0.5]
    >>> [end.tolist() for end in NormalizedScore().inverse(2.0, [0.0], [0.5])]   # mu -/+ 2 sigma
    [[-1.0], [1.0]]
    """

    name = "normalized"
    needs_sigma = True

    def __init__(self, beta: float = 1.0, eps: float = 0.0) -> None:
        beta, eps = float(beta), float(eps)
        if not (np.isfinite(beta) and beta > 0):
            raise ValueError(f"beta must be > 0 (the exponent of sigma in Pion eq. 9); got {beta}.")
        if not (np.isfinite(eps) and eps >= 0):
            raise ValueError(f"eps must be >= 0 (the floor of sigma**beta); got {eps}.")
        self.beta = beta
        self.eps = eps

    def scale(self, sigma: ArrayLike | None) -> np.ndarray:
        r""":math:`\max(\epsilon, \sigma^\beta)`, after checking :math:`\sigma`."""
        if sigma is None:
            raise ValueError(
                f"score={self.name!r} needs the base's predictive standard deviation sigma; got None. "
                "Use score='absolute' or a base whose predict_mean_std returns (mu, sigma)."
            )
        sigma = np.asarray(sigma, dtype=float)
        check_finite(sigma, "sigma")
        bad = sigma < 0 if self.eps > 0 else sigma <= 0
        if np.any(bad):
            rel = ">= 0" if self.eps > 0 else "> 0"
            raise ValueError(
                f"sigma must be {rel} for a normalised score (eps={self.eps:g}); got "
                f"{int(np.sum(bad))} value(s) violating it (e.g. {sigma[bad].ravel()[0]!r}). Check the base "
                "model's predictive std, or pass eps > 0 to floor sigma**beta."
            )
        return np.maximum(self.eps, sigma**self.beta)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(beta={self.beta:g}, eps={self.eps:g})"


class SignedNormalizedScore(NormalizedScore):
    r"""Signed σ-normalised residual, Pion & Vazquez (2024) eq. (13).

    .. math::

        R = \frac{y - \mu}{\max(\epsilon, \sigma^\beta)}

    (the paper writes :math:`\beta = 1`). Signed scores let the two interval
    ends move independently, which suits skewed errors (Barber et al. 2021,
    App. A). Parameters as in :class:`NormalizedScore`.

    Parameters
    ----------
    beta : float, default 1.0
        Exponent :math:`\beta > 0` of :math:`\sigma`.
    eps : float, default 0.0
        Floor :math:`\epsilon \ge 0` of the normaliser (see :class:`NormalizedScore`).

    References
    ----------
    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, eq. (13)–(14).

    Barber, R. F., Candès, E. J., Ramdas, A. and Tibshirani, R. J. (2021).
    Predictive inference with the jackknife+. Annals of Statistics 49(1), App. A.

    Examples
    --------
    >>> from calibprob.calibrators.conformal import SignedNormalizedScore
    >>> SignedNormalizedScore().score([1.0, -2.0], [0.0, 0.0], [0.5, 4.0]).tolist()
    [2.0, -0.5]
    """

    name = "signed"
    symmetric = False


class SignedAbsoluteScore(Score):
    r"""Signed residual :math:`R = y - \mu` (no σ needed; Barber et al. 2021, App. A).

    References
    ----------
    Barber, R. F., Candès, E. J., Ramdas, A. and Tibshirani, R. J. (2021).
    Predictive inference with the jackknife+. Annals of Statistics 49(1), App. A.

    Examples
    --------
    >>> SignedAbsoluteScore().score([1.0, -2.0], [0.0, 0.0])
    array([ 1., -2.])
    """

    name = "signed-absolute"
    symmetric = False


class CQRScore(Score):
    r"""The CQR score of Romano et al. (2019) on a base's quantile pair, for jackknife+ / CV+.

    At confidence level :math:`c` (:math:`\alpha = 1 - c`) the base's predictive gives the pair
    :math:`\hat q_{lo}(x), \hat q_{hi}(x)` at levels :math:`\alpha/2` and :math:`1 - \alpha/2`, and

    .. math::

        E = \max\{\hat q_{lo}(x) - y,\ y - \hat q_{hi}(x)\}, \qquad
        \{y : E \le t\} = [\hat q_{lo}(x) - t,\ \hat q_{hi}(x) + t],

    so each end is a (centre, scale) inverse with the quantile as centre and scale 1
    (``invert``). Unlike the other scores it depends on the level through the pair, so the
    thresholds are computed per level; :class:`~calibprob.calibrators.conformal.CrossConformalRegressor`
    takes it as ``score="cqr"`` (CQR inside jackknife+ / CV+, Barber et al. 2021). Split CQR, with its
    asymmetric, CQR-r and CQR-m forms, is
    :class:`~calibprob.ConformalizedQuantileRegression`.

    References
    ----------
    Romano, Y., Patterson, E. and Candès, E. J. (2019). Conformalized quantile regression. NeurIPS 32, eq. (6)–(7).

    Barber, R. F., Candès, E. J., Ramdas, A. and Tibshirani, R. J. (2021).
    Predictive inference with the jackknife+. Annals of Statistics 49(1), 486–507.

    Examples
    --------
    >>> from calibprob.calibrators.conformal import CQRScore
    >>> CQRScore().score([0.0, 3.0, 1.0], [-1.0, -1.0, -1.0], [2.0, 2.0, 2.0]).tolist()
    [-1.0, 1.0, -1.0]
    >>> [end.tolist() for end in CQRScore().inverse(0.5, [-1.0], [2.0])]
    [[-1.5], [2.5]]
    """

    name = "cqr"
    needs_quantiles = True

    @staticmethod
    def quantile_levels(confidence_levels: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        r"""The base's quantile levels :math:`(\alpha/2, 1 - \alpha/2)` of each confidence level :math:`c = 1 - \alpha`."""
        c = np.asarray(confidence_levels, float)
        return (1.0 - c) / 2.0, (1.0 + c) / 2.0

    def score(self, y: ArrayLike, q_lo: ArrayLike, q_hi: ArrayLike | None = None) -> np.ndarray:
        r""":math:`E = \max(\hat q_{lo} - y,\ y - \hat q_{hi})`; shapes broadcast."""
        if q_hi is None:
            raise ValueError(
                "score='cqr' needs the base's upper quantile q_hi; got None. Pass score(y, q_lo, q_hi), the "
                "pair read from the base's predictive at levels (1 - c)/2 and (1 + c)/2."
            )
        y = np.asarray(y, float)
        return np.maximum(np.asarray(q_lo, float) - y, y - np.asarray(q_hi, float))

    def inverse(
        self, r: ArrayLike, q_lo: ArrayLike, q_hi: ArrayLike | None = None
    ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        r"""Interval ends :math:`(\hat q_{lo} - r,\ \hat q_{hi} + r)` of a threshold ``r`` (``invert``, scale 1)."""
        if q_hi is None:
            raise ValueError("score='cqr' inverts onto the quantile pair: pass inverse(r, q_lo, q_hi); got q_hi=None.")
        r = np.asarray(r, float)
        return invert(np.asarray(q_lo, float), 1.0, -r), invert(np.asarray(q_hi, float), 1.0, r)


SCORES = {
    "absolute": AbsoluteScore,
    "normalized": NormalizedScore,
    "signed": SignedNormalizedScore,
    "signed-absolute": SignedAbsoluteScore,
}


def get_score(score: str | Score, *, beta: float = 1.0, eps: float = 0.0) -> Score:
    """A :class:`Score` from a name or an instance.

    Parameters
    ----------
    score : {"absolute", "normalized", "signed", "signed-absolute"} or Score
    beta, eps : float
        Passed to the normalised scores (ignored for ``"absolute"``).

    Returns
    -------
    Score

    References
    ----------
    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, eq. (9) and (13).

    Examples
    --------
    >>> from calibprob.calibrators.conformal import get_score
    >>> get_score("signed", beta=0.5)
    SignedNormalizedScore(beta=0.5, eps=0)
    >>> get_score("absolute").symmetric
    True
    """
    if isinstance(score, Score):
        return score
    if score == "absolute":
        return AbsoluteScore()
    if score in ("normalized", "normalised"):
        return NormalizedScore(beta=beta, eps=eps)
    if score == "signed":
        return SignedNormalizedScore(beta=beta, eps=eps)
    if score == "signed-absolute":
        return SignedAbsoluteScore()
    raise ValueError(
        "score must be one of 'absolute', 'normalized', 'signed', 'signed-absolute' or a Score "
        f"instance; got {score!r}."
    )
