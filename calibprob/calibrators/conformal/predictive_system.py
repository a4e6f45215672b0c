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

which ``tests/calibrators/conformal/test_predictive_system.py`` checks over seeded draws.

**Under covariate shift** (``fit(..., weights=)``, ``predict(..., weights=)``): the counts
become weights, Tibshirani et al.'s (2019) weighted empirical law of the scores with the test
point's mass :math:`t` kept beside them,

.. math::

    Q(y, \tau) = \frac{\sum_{A_i < A(x, y)} w_i + \tau\,\bigl(\sum_{A_i = A(x, y)} w_i + t(x)\bigr)}
    {\sum_i w_i + t(x)},

uniform for the true likelihood ratio :math:`w = d\tilde P_X/dP_X` (weighted exchangeability,
Tibshirani et al. 2019, Lemma 3), and the continuous version passes through the middle of every
weighted jump (``calibprob.calibrators._weighted``). The levels a weighted system
resolves shrink by the test point's own mass :math:`t/(\sum_i w_i + t)`.

References
----------
Vovk, V., Petej, I., Nouretdinov, I., Manokhin, V. and Gammerman, A. (2020).
Computationally efficient versions of conformal predictive distributions.
Neurocomputing 397, 292–308 (split conformal predictive systems).
Vovk, V., Shen, J., Manokhin, V. and Xie, M. (2017). Nonparametric predictive
distributions based on conformal prediction. PMLR 60.
Tibshirani, R. J., Barber, R. F., Candès, E. J. and Ramdas, A. (2019). Conformal prediction
under covariate shift. NeurIPS 32 (the weights).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.deprecation import renamed_keywords
from calibprob._core.validation import check_choice, check_targets, check_tau
from calibprob.calibrators._weighted import weighted_cps_cdf
from calibprob.calibrators.conformal.scores import Score, get_score
from calibprob.calibrators.conformal.split_calibrator import (
    SplitConformalCalibrator,
    checked_test_weights,
    split_test_weights,
)

if TYPE_CHECKING:
    from calibprob.weights import Weights

__all__ = ["ConformalPredictiveSystem", "cps_cdf"]


def _score_of_normalize(normalize: bool) -> str:
    """The ``score`` of the deprecated ``normalize`` flag: True -> "signed", False -> "signed-absolute"."""
    if not isinstance(normalize, (bool, np.bool_)):
        raise TypeError(f"normalize must be True or False; got {normalize!r}. Better: pass score='signed' instead.")
    return "signed" if normalize else "signed-absolute"


def cps_cdf(sorted_scores: ArrayLike, test_scores: ArrayLike, tau: ArrayLike = 0.5) -> np.ndarray:
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


_F = TypeVar("_F", bound=Callable[..., Any])


def _refuse_removed_form(init: _F) -> _F:
    """Refuse the model-aware keywords removed in 0.2.0 naming what to write instead (not a bare ``TypeError``).

    ``functools.wraps`` keeps the signature (``inspect.signature`` follows ``__wrapped__``), so ``get_params``
    and the registry see only the current keywords.
    """

    @functools.wraps(init)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> None:
        removed = sorted(set(kwargs) & set(ConformalPredictiveSystem._REMOVED_PARAMS))
        if removed:
            raise TypeError(
                f"ConformalPredictiveSystem({'=, '.join(removed)}=) was removed in calibprob 0.2.0: it is a "
                "distribution post-processor. Pass the model's predictions: "
                "ConformalPredictiveSystem().fit(model.predict(X_cal), y_cal), then predict(model.predict(X)); "
                "or use SplitConformalRegressor(estimator=..., score='signed') for the model-aware form."
            )
        init(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps init's signature


class ConformalPredictiveSystem(SplitConformalCalibrator):
    r"""Split conformal predictive system (Vovk et al. 2020): a distribution post-processor.

    ``fit(pred_cal, y_cal)`` on the base's predictive Dataset for calibration
    data; ``predict(pred)`` the full conformal predictive distribution per test
    point, as the predictive-distribution contract (so NLL, CRPS and ECE are
    defined for it). The calibration scores are the signed normalised
    residuals :math:`(y - \mu)/\max(\epsilon, \sigma^\beta)` with
    :math:`\mu, \sigma` the Dataset's own mean and standard deviation (or the
    raw signed residuals with ``score="signed-absolute"``). :meth:`predict_interval`
    gives the exact conformal (signed-score) intervals; :meth:`predict_cdf`
    the exact step CDF :math:`Q(y, \tau)`. Any Dataset goes in: Gaussian, from
    quantiles, or a PyMC model's posterior-predictive draws
    (:func:`calibprob.from_draws`).

    Parameters
    ----------
    score : {"signed", "signed-absolute"} or Score, default "signed"
        The signed conformity score: ``"signed"`` divides residuals by
        :math:`\max(\epsilon, \sigma^\beta)` (Pion & Vazquez 2024, eq. 13),
        ``"signed-absolute"`` keeps the raw residual :math:`y - \mu`; or a
        :class:`~calibprob.calibrators.conformal.Score` instance whose
        ``symmetric`` is False.
    beta, eps : float
        Parameters of the normaliser.
    confidence_level : float or sequence, default 0.9
        Default level(s) of :meth:`predict_interval`.
    normalize : bool, deprecated
        The former form of ``score`` (``True`` is ``"signed"``, ``False`` is
        ``"signed-absolute"``); warns ``FutureWarning``, removed in 0.3.0.

    Notes
    -----
    The model-aware form of 0.1.0 (``estimator=``, ``prefit=``,
    ``chunk_size=`` then ``fit(X, y)``/``calibrate(X_cal, y_cal)``) was
    removed in 0.2.0: write ``SplitConformalRegressor(estimator=...,
    score="signed")`` for a conformal quantile function around a model, or
    pass the model's predictions to this class.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(1)
    >>> mu = rng.normal(size=600); y = mu + rng.standard_t(3, size=600)    # heavy-tailed truth
    >>> base = calibprob.normal(mu, np.ones(600))
    >>> cps = ConformalPredictiveSystem().fit(base.isel(obs=slice(400)), y[:400])
    >>> pred = cps.predict(base.isel(obs=slice(400, None)))
    >>> pred.sizes["level"]
    99

    References
    ----------
    Vovk et al. (2020), Neurocomputing 397; Pion & Vazquez (2024) eq. (13) for the score.
    """

    _method = "conformal-predictive-system"

    #: Removed in 0.2.0 (the model-aware ``estimator=`` form): a 0.1.0 file holds them at their
    #: defaults, dropped at load (``calibprob._core.persistence.reader``).
    _REMOVED_PARAMS = {"estimator": None, "prefit": False, "chunk_size": None}

    @_refuse_removed_form
    @renamed_keywords({"normalize": ("score", _score_of_normalize)})
    def __init__(
        self,
        *,
        score: str | Score = "signed",
        beta: float = 1.0,
        eps: float = 0.0,
        confidence_level: ArrayLike = 0.9,
    ) -> None:
        self.score = score
        self.beta = beta
        self.eps = eps
        self.confidence_level = confidence_level

    def _score(self) -> Score:
        if isinstance(self.score, Score):
            if self.score.symmetric:
                raise ValueError(
                    f"score must be a signed score (symmetric = False) for a predictive system; got {self.score!r}. "
                    "Use score='signed' or 'signed-absolute'."
                )
            return self.score
        check_choice(self.score, "score", ("signed", "signed-absolute"))
        return get_score(self.score, beta=self.beta, eps=self.eps)

    def _method_name(self) -> str:
        return self._method

    def fit(
        self,
        pred_cal: xr.Dataset,
        y_cal: ArrayLike,
        *,
        groups: ArrayLike | None = None,
        weights: ArrayLike | Weights | None = None,
    ) -> ConformalPredictiveSystem:
        r"""Score the calibration predictions; returns ``self``.

        Parameters
        ----------
        pred_cal : xarray.Dataset
            The base's predictive distribution on the calibration data.
        y_cal : array_like or 1-D xarray.DataArray, shape (n_cal,)
        groups : array_like, xarray.DataArray or str, optional
            One group label per calibration point: a Mondrian CPS, one system per group
            (:class:`calibprob.Mondrian`; a two-sided interval at ``c`` needs
            :math:`n_k \ge \lceil 2/(1-c) \rceil - 1` points).
        weights : array_like, pandas.Series, xarray.DataArray or calibprob.weights.Weights, optional
            One weight per calibration point (e.g. the likelihood ratio :math:`w(X_i)`) or a
            :mod:`calibprob.weights` object: the weighted system of the module docstring, the
            test points' weights given to :meth:`predict`, :meth:`predict_interval` and
            :meth:`predict_cdf` (:meth:`SplitConformalCalibrator.fit`). With ``groups=``, the
            weights act within each group.
        """
        return super().fit(pred_cal, y_cal, groups=groups, weights=weights)

    def predict(
        self,
        pred: xr.Dataset,
        *,
        levels: ArrayLike | None = None,
        groups: ArrayLike | None = None,
        weights: ArrayLike | Weights | None = None,
    ) -> xr.Dataset:
        """Predictive distribution per test point (see the module docstring); ``groups=`` as in :meth:`fit`.

        ``weights=``: after a weighted :meth:`fit`, one positive weight per row of ``pred`` (or a
        :mod:`calibprob.weights` object; default: the object given to :meth:`fit`): the weighted
        system of the module docstring at the levels every row resolves (``levels=None``: the
        default levels inside that range; an explicit level outside it is refused, naming the
        range). Equal weights give the unweighted system bit for bit.
        """
        if groups is not None or getattr(self, "mondrian_", None) is not None:
            return super().predict(pred, levels=levels, groups=groups, weights=weights)
        return super().predict(pred, levels=levels, weights=weights)

    def predict_interval(
        self,
        pred: xr.Dataset,
        confidence_level: ArrayLike | None = None,
        *,
        groups: ArrayLike | None = None,
        weights: ArrayLike | Weights | None = None,
    ) -> xr.Dataset:
        r"""Exact conformal (signed-score) intervals; see :meth:`SplitConformalCalibrator.predict_interval`.

        ``weights=`` as there: each row's ends are the weighted quantiles of the scores at
        :math:`(1 \mp c)/2` with the row's mass at :math:`\mp\infty`.
        """
        if groups is not None or getattr(self, "mondrian_", None) is not None:
            return super().predict_interval(pred, confidence_level, groups=groups, weights=weights)
        return super().predict_interval(pred, confidence_level, weights=weights)

    def predict_cdf(
        self, pred: xr.Dataset, y: ArrayLike, *, tau: ArrayLike = 0.5, weights: ArrayLike | Weights | None = None
    ) -> np.ndarray:
        r"""Exact split-CPS CDF :math:`Q(y_j, \tau)` at the observed ``y``.

        Parameters
        ----------
        pred : xarray.Dataset
            The base's predictive distribution at the test points.
        y : array_like or 1-D xarray.DataArray, shape (m,)
        tau : float or ndarray, shape (m,), default 0.5
        weights : array_like or calibprob.weights.Weights, optional
            After a weighted :meth:`fit`: the test points' weights (default: the object given to
            :meth:`fit`); the weighted :math:`Q` of the module docstring.

        Returns
        -------
        ndarray, shape (m,)
        """
        pred, mu, scale = self._mu_scale(pred)
        y = check_targets(y, mu.size, "y")
        tau = check_tau(tau, mu.size)
        test = split_test_weights(self, weights, mu.size, obs=pred)
        scores = cast(np.ndarray, self.scores_)  # _mu_scale checked the fit: scores_ is the array
        if test is None:
            return cps_cdf(scores, (y - mu) / scale, tau)
        t = checked_test_weights(self, [], test, {})
        # a weighted fit (test weights given) sets the calibration weights
        return weighted_cps_cdf(scores, cast(np.ndarray, self.calibration_weights_), (y - mu) / scale, t, tau)
