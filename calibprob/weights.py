r"""How much each calibration point counts for each test point: weights for calibration under shift.

Split conformal's guarantee assumes calibration and test points are exchangeable. When the
test inputs come from another distribution (covariate shift: :math:`P_X \to \tilde P_X`, the
law of :math:`Y \mid X` unchanged), Tibshirani, Barber, Candès & Ramdas (2019) reweight: with
the likelihood ratio :math:`w(x) = d\tilde P_X / dP_X(x)`, the interval at a test input
:math:`x` is the level-:math:`c` quantile of

.. math::

    \sum_{i=1}^n p_i(x)\, \delta_{R_i} + p_{n+1}(x)\, \delta_{+\infty},\qquad
    p_i(x) = \frac{w(X_i)}{\sum_{j=1}^n w(X_j) + w(x)},\quad
    p_{n+1}(x) = \frac{w(x)}{\sum_{j=1}^n w(X_j) + w(x)},

and covers with probability at least :math:`c` when :math:`w` is the true ratio (their
Corollary 1). Barber, Candès, Ramdas & Tibshirani (2023, "NexCP") use *fixed* weights
:math:`w_i = \rho^{\,n+1-i}` (test weight 1) for data that drift, with coverage at least
:math:`c - \sum_i \tilde w_i\, d_{TV}(Z, Z^i)`, :math:`\tilde w_i = w_i / (\sum_j w_j + 1)`
(their Theorem 2).

One object type, :class:`Weights`, gives both sides of that rule: :meth:`Weights.calibration`
(one weight per calibration point) and :meth:`Weights.test` (one per test point). The kinds:

* :class:`LikelihoodRatio` -- the ratio estimated by a probabilistic classifier separating
  calibration inputs (label 0) from test inputs (label 1), :math:`\hat w(x) =
  \frac{\hat p(x)}{1-\hat p(x)} \cdot \frac{n_0}{n_1}`, cross-fitted, with the reference code's
  clipping of :math:`\hat p` to :math:`[0.01, 0.99]` (ryantibs/conformal
  ``tibshirani2019/sim.airfoil.R``);
* :class:`DensityRatio` -- a known ratio (a user's tilt, or an optimiser's design density);
* :class:`DecayingWeights` -- NexCP's fixed weights :math:`\rho^{\,n+1-i}`;
* :class:`GivenWeights` -- numbers computed elsewhere (importance weights, a ratio evaluated
  by hand), with the same checks and ``on_small=`` choice as the other kinds.

Every kind reports, through :func:`diagnose`, the effective sample size (Kish), the largest
normalised weight and the coverage-gap bound where one exists, and a level the weights cannot
support is refused (``on_small="raise"``, the default) or warned about (``"warn"``), naming the
level that is attainable (:func:`check_attainable`).

The works (full entries; the module docstring has no References section, which the API page
would render twice): Tibshirani, R. J., Barber, R. F., Candès, E. J. and Ramdas, A. (2019).
Conformal prediction under covariate shift. NeurIPS 32. -- Barber, R. F., Candès, E. J.,
Ramdas, A. and Tibshirani, R. J. (2023). Conformal prediction beyond exchangeability. Ann.
Statist. 51(2), 816–845. -- Kish, L. (1965). *Survey Sampling*, Wiley (the effective sample size).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Protocol, Self

import numpy as np
from numpy.typing import ArrayLike

from calibprob._core.alignment import align_to_obs
from calibprob._core.ranks import exact_level
from calibprob._core.validation import _short, check_array, check_choice, check_int
from calibprob.predictive import CalibprobWarning

if TYPE_CHECKING:
    import xarray as xr

__all__ = [
    "Weights",
    "LikelihoodRatio",
    "DensityRatio",
    "DecayingWeights",
    "GivenWeights",
    "WeightDiagnostics",
    "check_weights",
    "diagnose",
    "check_attainable",
    "effective_sample_size",
    "weight_support",
    "WEIGHT_SUPPORT",
]


class Classifier(Protocol):
    """What :class:`LikelihoodRatio` fits: a probabilistic classifier (scikit-learn's ``fit`` / ``predict_proba``)."""

    def fit(self, X: np.ndarray, y: np.ndarray) -> Classifier: ...

    def predict_proba(self, X: np.ndarray) -> np.ndarray: ...

    def get_params(self) -> dict[str, object]: ...

    def set_params(self, **params: object) -> Classifier: ...


_ON_SMALL = ("raise", "warn", "ignore")

#: What a calibrator's declared weight support means (its class attribute ``_weights_support``):
#: ``"conformal"`` -- weighted conformal calibration, ``fit(..., weights=)`` for the calibration points and
#: ``predict*(..., weights=)`` for the test points, with Tibshirani et al.'s finite-sample guarantee for the
#: true ratio; ``"loss"`` -- weights in the fitting loss only (``fit(..., weights=)``), no finite-sample
#: guarantee; ``"inner"`` -- a wrapper (Mondrian) that has the support of the calibrator it wraps.
WEIGHT_SUPPORT = ("conformal", "loss", "inner")


# ---------------------------------------------------------------------------
# validation and diagnostics: the NumPy layer every calibrator shares
# ---------------------------------------------------------------------------


def check_weights(
    weights: ArrayLike,
    n: int,
    name: str = "weights",
    *,
    obs: xr.Dataset | xr.DataArray | ArrayLike | None = None,
    positive: bool = False,
) -> np.ndarray:
    """One weight per point, as a finite non-negative float array that is not all zero.

    Parameters
    ----------
    weights : array_like, pandas.Series or xarray.DataArray
        A labelled argument (a DataArray with an ``obs`` coordinate, a Series with an index) is
        aligned to ``obs`` by label (``calibprob._core.alignment.align_to_obs``); a plain
        array is read by position.
    n : int
        Number of points.
    name : str
        Parameter name for the messages.
    obs : xarray.Dataset or array_like, optional
        The prediction (or its ``obs`` labels) the weights belong to.
    positive : bool, default False
        Require every weight to be > 0 (a test point's weight: its mass sits at infinity).

    Returns
    -------
    ndarray, shape (n,)

    Raises
    ------
    ValueError
        NaN or infinite, negative, all-zero (or, with ``positive``, any zero) weights, a
        length other than ``n``; each message names the fix.

    Examples
    --------
    >>> check_weights([1, 2, 0], 3).tolist()
    [1.0, 2.0, 0.0]
    """
    weights = align_to_obs(weights, obs, name)
    w = check_array(getattr(weights, "values", weights), name, ndim=1, finite=False, min_length=0)
    if w.shape[0] != n:
        raise ValueError(f"{name} has {w.shape[0]} entries for {n} points; pass one weight per point, in their order.")
    bad = np.flatnonzero(~np.isfinite(w))
    if bad.size:
        raise ValueError(
            f"{name} must be finite; got {w[bad[0]]} at index {int(bad[0])} ({bad.size} non-finite). "
            "Drop those points or give them a finite weight (0 to ignore a calibration point)."
        )
    neg = np.flatnonzero(w < 0)
    if neg.size:
        raise ValueError(
            f"{name} must be non-negative; got {w[neg[0]]} at index {int(neg[0])}. Weights are density ratios "
            "or importance weights: pass exp(log_weights) rather than log weights."
        )
    if positive and np.any(w == 0):
        i = int(np.flatnonzero(w == 0)[0])
        raise ValueError(
            f"{name} must be positive for test points; got 0 at index {i}. A test point with ratio 0 could not "
            "have been drawn: drop it, or floor the ratio (e.g. LikelihoodRatio's clip=)."
        )
    if not np.any(w > 0):
        raise ValueError(
            f"{name} are all zero ({n} points): no calibration point counts. Pass positive weights, or omit "
            f"{name}= for the unweighted method."
        )
    return w


def effective_sample_size(weights: ArrayLike) -> float:
    r"""Kish's effective sample size :math:`(\sum_i w_i)^2 / \sum_i w_i^2` (:math:`n` for equal weights).

    Parameters
    ----------
    weights : array_like, shape (n,)
        Non-negative, not all zero.

    Returns
    -------
    float

    Examples
    --------
    >>> effective_sample_size([1.0, 1.0, 1.0, 1.0]), effective_sample_size([1.0, 0.0, 0.0])
    (4.0, 1.0)
    """
    w = np.asarray(weights, float)
    w = w / w.max()  # scale-free: no overflow for huge ratios
    return float(w.sum() ** 2 / np.sum(w * w))


@dataclass(frozen=True)
class WeightDiagnostics:
    r"""What the weights of one calibration set and its test points amount to (built by :func:`diagnose`).

    Parameters
    ----------
    n_calibration, ess, ess_test, max_weight, attainable_level, coverage_gap_bound
        As the attributes.

    Attributes
    ----------
    n_calibration : int
    ess : float
        Kish's effective sample size of the calibration weights alone (Tibshirani et al.
        2019 report it: about 72 of 376 on the airfoil data).
    ess_test : ndarray, shape (m,)
        Per test point, the effective size of the :math:`n + 1` masses
        :math:`p_1(x), \dots, p_n(x), p_{n+1}(x)`:
        :math:`(W + w(x))^2 / (\sum_i w_i^2 + w(x)^2)`, :math:`W = \sum_i w_i`;
        :math:`n + 1` for equal weights.
    max_weight : float
        The largest normalised mass :math:`\max_x \max(\max_i p_i(x), p_{n+1}(x))`.
    attainable_level : float
        :math:`1 - 1/\min_x \mathrm{ess\_test}(x)`: the largest confidence level the weights
        support at every test point (:math:`n/(n+1)` for equal weights, the unweighted rule).
    coverage_gap_bound : float or None
        The bound on the coverage shortfall where one exists (0 for a known ratio;
        :meth:`DecayingWeights.coverage_gap_bound` for NexCP; None for an estimated ratio).

    Examples
    --------
    >>> diagnose([1.0, 1.0, 1.0], [1.0]).as_dict()["attainable_level"]
    0.75

    References
    ----------
    Tibshirani, R. J., Barber, R. F., Candès, E. J. and Ramdas, A. (2019). Conformal prediction
    under covariate shift. NeurIPS 32.
    """

    n_calibration: int
    ess: float
    ess_test: np.ndarray
    max_weight: float
    attainable_level: float
    coverage_gap_bound: float | None = None

    def as_dict(self) -> dict:
        """Plain numbers (the per-test-point ESS summarised by its minimum and median)."""
        return {
            "n_calibration": self.n_calibration,
            "ess": self.ess,
            "ess_test_min": float(self.ess_test.min()),
            "ess_test_median": float(np.median(self.ess_test)),
            "max_weight": self.max_weight,
            "attainable_level": self.attainable_level,
            "coverage_gap_bound": self.coverage_gap_bound,
        }


def diagnose(
    calibration_weights: ArrayLike, test_weights: ArrayLike, *, coverage_gap_bound: float | None = None
) -> WeightDiagnostics:
    """The :class:`WeightDiagnostics` of calibration weights (n,) and test weights (m,).

    Parameters
    ----------
    calibration_weights : array_like, shape (n,)
    test_weights : array_like, shape (m,)
    coverage_gap_bound : float, optional
        Stored as given (the kind's bound, :meth:`Weights.coverage_gap_bound`).

    Returns
    -------
    WeightDiagnostics

    Examples
    --------
    >>> d = diagnose([1.0] * 9, [1.0])
    >>> d.ess, float(d.ess_test[0]), d.attainable_level
    (9.0, 10.0, 0.9)
    """
    w = np.asarray(calibration_weights, float)
    t = np.atleast_1d(np.asarray(test_weights, float))
    scale = max(float(w.max()), float(t.max()))  # scale-free sums: ratios can be huge
    ws, ts = w / scale, t / scale
    W, S2 = float(ws.sum()), float(np.sum(ws * ws))
    ess_test = (W + ts) ** 2 / (S2 + ts**2)
    worst = float(ess_test.min())
    max_w = float(np.max(np.maximum(ws.max(), ts) / (W + ts)))
    return WeightDiagnostics(
        n_calibration=int(w.size),
        ess=effective_sample_size(w),
        ess_test=ess_test,
        max_weight=max_w,
        attainable_level=max(0.0, 1.0 - 1.0 / worst),
        coverage_gap_bound=coverage_gap_bound,
    )


def check_attainable(diagnostics: WeightDiagnostics, levels: ArrayLike, on_small: str = "raise") -> None:
    r"""Refuse (or warn about) a confidence level the weights' effective sample size cannot support.

    A level :math:`c` needs :math:`\mathrm{ESS} \ge 1/(1-c)` at every test point: with equal
    weights (:math:`\mathrm{ESS} = n + 1`) this is the unweighted rule :math:`n \ge c/(1-c)`
    exactly (compared in exact rational arithmetic), below which the conformal set is the
    whole line. Concentrated weights (a classifier that separates the two sets, a tilt that
    puts a test point far outside the calibration inputs) make it fail at much larger
    :math:`n`.

    Parameters
    ----------
    diagnostics : WeightDiagnostics
    levels : array_like
        The confidence levels asked for.
    on_small : {"raise", "warn", "ignore"}

    Raises
    ------
    ValueError
        ``on_small="raise"`` and a level above the attainable one (the message names it).

    Examples
    --------
    >>> check_attainable(diagnose([1.0] * 9, [1.0]), [0.9])          # 9 equal weights reach 0.9
    >>> try:
    ...     check_attainable(diagnose([1.0] * 8, [1.0]), [0.9])
    ... except ValueError as err:
    ...     print(str(err).split("0.9: ")[1][:30])
    the attainable level is 0.8889
    """
    on_small = check_choice(on_small, "on_small", _ON_SMALL)
    worst = float(diagnostics.ess_test.min())
    need = [float(c) for c in np.ravel(levels) if Fraction(worst) * (1 - exact_level(float(c))) < 1]
    if not need or on_small == "ignore":
        return
    msg = (
        f"the weights' effective sample size is {worst:.3g} at the worst test point (calibration alone: "
        f"{diagnostics.ess:.3g} of {diagnostics.n_calibration}), too small for confidence level {max(need)}: "
        f"the attainable level is {diagnostics.attainable_level:.4g} (1 - 1/ESS). Lower the level, add "
        "calibration points near the test inputs, or smooth the ratio (a simpler classifier, clip=); "
        "on_small='warn' proceeds with the (possibly infinite) intervals."
    )
    if on_small == "raise":
        raise ValueError(msg)
    warnings.warn(msg, CalibprobWarning, stacklevel=3)


# ---------------------------------------------------------------------------
# the weight objects
# ---------------------------------------------------------------------------


class Weights:
    """Base of the weight kinds: one weight per calibration point and one per test point.

    Subclasses implement :meth:`calibration` and :meth:`test`; ``on_small`` says what a level
    the weights cannot support does (:func:`check_attainable`).

    Examples
    --------
    >>> w = DecayingWeights(0.5)
    >>> isinstance(w, Weights), w.diagnose(w.calibration(n=3), w.test(m=1)).n_calibration
    (True, 3)
    """

    on_small: str = "raise"

    def calibration(self, X: ArrayLike | None = None, *, n: int) -> np.ndarray:
        """The weights of ``n`` calibration points (inputs ``X`` when the kind needs them)."""
        raise NotImplementedError

    def test(self, X: ArrayLike | None = None, *, m: int) -> np.ndarray:
        """The weights of ``m`` test points (inputs ``X`` when the kind needs them)."""
        raise NotImplementedError

    def coverage_gap_bound(self, calibration_weights: np.ndarray) -> float | None:
        """The bound on the coverage shortfall of these weights; None where none is known."""
        return None

    def diagnose(self, calibration_weights: np.ndarray, test_weights: np.ndarray) -> WeightDiagnostics:
        """:func:`diagnose` with this kind's coverage-gap bound."""
        return diagnose(
            calibration_weights, test_weights, coverage_gap_bound=self.coverage_gap_bound(calibration_weights)
        )

    def __repr__(self) -> str:
        args = ", ".join(
            f"{k}={_short(v, 40)}" for k, v in vars(self).items() if not (k.endswith("_") or k.startswith("_"))
        )
        return f"{type(self).__name__}({args})"


def _inputs(X: ArrayLike, name: str) -> np.ndarray:
    X = getattr(X, "values", X)  # a DataFrame's values (the rows are given in order)
    return check_array(X, name, ndim=(1, 2))


class DensityRatio(Weights):
    r"""A known density ratio :math:`w(x) = d\tilde P_X / dP_X(x)`: a tilt, or a design density.

    With the true ratio, weighted split conformal covers at least :math:`c` (Tibshirani et
    al. 2019, Corollary 1): the coverage-gap bound is 0.

    Parameters
    ----------
    ratio : callable
        ``ratio(X) -> (m,)`` non-negative values (up to a constant factor, which cancels).
    on_small : {"raise", "warn", "ignore"}, default "raise"

    Examples
    --------
    >>> import numpy as np
    >>> tilt = DensityRatio(lambda X: np.exp(X[:, 0]))
    >>> tilt.calibration(np.array([[0.0], [1.0]]), n=2).round(3).tolist()
    [1.0, 2.718]

    References
    ----------
    Tibshirani, R. J., Barber, R. F., Candès, E. J. and Ramdas, A. (2019). Conformal prediction
    under covariate shift. NeurIPS 32.
    """

    def __init__(self, ratio: Callable[[np.ndarray], ArrayLike], *, on_small: str = "raise") -> None:
        if not callable(ratio):
            raise TypeError(
                f"ratio must be a callable X -> weights; got {type(ratio).__name__} {_short(ratio)}. "
                "For fixed numbers pass the array itself as weights=."
            )
        self.ratio = ratio
        self.on_small = check_choice(on_small, "on_small", _ON_SMALL)

    def _at(self, X: ArrayLike | None, n: int, name: str, positive: bool) -> np.ndarray:
        if X is None:
            raise ValueError(
                f"DensityRatio needs the {name} inputs to evaluate the ratio. With a post-processor (no X), pass "
                f"the numbers instead: weights=ratio(X_{name[:3]})."
            )
        return check_weights(self.ratio(_inputs(X, f"X ({name})")), n, f"ratio(X) ({name})", positive=positive)

    def calibration(self, X: ArrayLike | None = None, *, n: int) -> np.ndarray:
        return self._at(X, n, "calibration", False)

    def test(self, X: ArrayLike | None = None, *, m: int) -> np.ndarray:
        return self._at(X, m, "test", True)

    def coverage_gap_bound(self, calibration_weights: np.ndarray) -> float:
        """0: the true ratio gives exact weighted exchangeability (Tibshirani et al. 2019, Thm. 2)."""
        return 0.0


class DecayingWeights(Weights):
    r"""NexCP's fixed weights :math:`w_i = \rho^{\,n+1-i}` (oldest first), test weight 1.

    Barber et al. (2023), Theorem 2: for any data, weighted split conformal with these weights
    covers at least

    .. math::

        c - \sum_{i=1}^n \tilde w_i\, d_{TV}(R(Z), R(Z^i)),\qquad \tilde w_i = \frac{w_i}{\sum_j w_j + 1},

    :math:`Z^i` the data with points :math:`i` and :math:`n+1` swapped; exact coverage
    (gap 0) for exchangeable data.

    Parameters
    ----------
    rho : float in (0, 1], default 0.99
        The decay (NexCP's experiments: 0.99). ``rho=1`` gives equal weights.
    on_small : {"raise", "warn", "ignore"}, default "raise"

    Examples
    --------
    >>> DecayingWeights(0.5).calibration(n=3).tolist()
    [0.125, 0.25, 0.5]

    References
    ----------
    Barber, R. F., Candès, E. J., Ramdas, A. and Tibshirani, R. J. (2023). Conformal prediction
    beyond exchangeability. Ann. Statist. 51(2), 816–845.
    """

    def __init__(self, rho: float = 0.99, *, on_small: str = "raise"):
        r = float(rho)
        if not 0.0 < r <= 1.0:
            raise ValueError(f"rho must be in (0, 1]; got {rho!r}. NexCP uses 0.99; rho=1 gives equal weights.")
        self.rho = r
        self.on_small = check_choice(on_small, "on_small", _ON_SMALL)

    def calibration(self, X: ArrayLike | None = None, *, n: int) -> np.ndarray:
        n = check_int(n, "n", minimum=1)
        return self.rho ** np.arange(n, 0, -1, dtype=float)  # i = 1..n: rho^(n+1-i)

    def test(self, X: ArrayLike | None = None, *, m: int) -> np.ndarray:
        return np.ones(check_int(m, "m", minimum=0))

    def coverage_gap_bound(
        self, calibration_weights: np.ndarray, *, tv: ArrayLike | None = None, drift: float | None = None
    ) -> float | None:
        r""":math:`\sum_i \tilde w_i\, \delta_i` for bounds :math:`\delta_i \ge d_{TV}(R(Z), R(Z^i))`.

        Parameters
        ----------
        calibration_weights : array_like, shape (n,)
        tv : float or array_like, shape (n,), optional
            The bounds :math:`\delta_i` (0 for exchangeable data).
        drift : float, optional
            Independent points whose law moves by at most ``drift`` in total variation per
            step: :math:`\delta_i = \min(1, 2\,\mathrm{drift}\,(n+1-i))` (Barber et al. 2023,
            §4.4: :math:`d_{TV}(Z, Z^i) \le 2\, d_{TV}(Z_i, Z_{n+1})`).

        Returns
        -------
        float or None
            None when neither ``tv`` nor ``drift`` is given (the bound needs one of them).

        Examples
        --------
        >>> w = DecayingWeights(0.5).calibration(n=2)          # [0.25, 0.5]
        >>> DecayingWeights(0.5).coverage_gap_bound(w, tv=1.0)  # 0.75 / 1.75
        0.42857142857142855
        """
        w = np.asarray(calibration_weights, float)
        if tv is None and drift is None:
            return None
        if drift is not None:
            lag = np.arange(w.size, 0, -1, dtype=float)
            tv = np.minimum(1.0, 2.0 * float(drift) * lag)
        delta = np.broadcast_to(np.asarray(tv, float), w.shape)
        if np.any(~np.isfinite(delta)) or np.any((delta < 0) | (delta > 1)):
            raise ValueError(f"tv must lie in [0, 1] (total-variation distances); got {_short(tv)}.")
        return float(np.sum(w * delta) / (w.sum() + 1.0))


class GivenWeights(Weights):
    r"""Weights computed elsewhere: one per calibration point and, optionally, one per test point.

    A plain array passed as ``weights=`` behaves the same, with ``on_small="raise"``; this kind
    lets the numbers carry another ``on_small`` (e.g. a simulation that expects some infinite
    intervals) and the test points' weights of the first prediction.

    Parameters
    ----------
    calibration : array_like, shape (n,)
    test : array_like, shape (m,), optional
        The default test weights of the prediction after calibration (arrays passed there win).
    on_small : {"raise", "warn", "ignore"}, default "raise"

    Examples
    --------
    >>> GivenWeights([1.0, 2.0], test=[3.0]).test(m=1).tolist()
    [3.0]
    """

    def __init__(self, calibration: ArrayLike, test: ArrayLike | None = None, *, on_small: str = "raise") -> None:
        self.calibration_weights = check_weights(calibration, len(np.atleast_1d(calibration)), "calibration")
        self.test_weights = (
            None if test is None else check_weights(test, len(np.atleast_1d(test)), "test", positive=True)
        )
        self.on_small = check_choice(on_small, "on_small", _ON_SMALL)

    def calibration(self, X: ArrayLike | None = None, *, n: int) -> np.ndarray:
        return check_weights(self.calibration_weights, n, "GivenWeights calibration")

    def test(self, X: ArrayLike | None = None, *, m: int) -> np.ndarray:
        if self.test_weights is None:
            raise ValueError(
                "GivenWeights holds no test weights: pass weights= (one per test point) to the prediction, or "
                "GivenWeights(calibration, test=...)."
            )
        return check_weights(self.test_weights, m, "GivenWeights test", positive=True)


class LikelihoodRatio(Weights):
    r"""The likelihood ratio estimated by a classifier separating calibration from test inputs.

    Label the calibration inputs 0 and the test inputs 1, fit a probabilistic classifier
    :math:`\hat p(x) = \hat P(\text{test} \mid x)` and take

    .. math::

        \hat w(x) = \frac{\hat p(x)}{1 - \hat p(x)} \cdot \frac{n_0}{n_1},

    with :math:`\hat p` clipped to ``clip`` (the reference code's ``[0.01, 0.99]`` for its random
    forest, ryantibs/conformal ``tibshirani2019/sim.airfoil.R``; the factor :math:`n_0/n_1`
    cancels in the normalised weights). The rows the classifier was fitted on get
    *cross-fitted* probabilities: each from a classifier that did not see that row (``cv`` folds,
    or a forest's out-of-bag votes), so that the ratio does not overfit its own points (a point
    it memorised would look like a test point). New inputs get the classifier refitted on every
    row.

    Parameters
    ----------
    classifier : scikit-learn classifier, optional
        Anything with ``fit`` and ``predict_proba``. Default: logistic regression without
        penalty on standardised inputs (the reference code's ``glm(family="binomial")``).
    cv : int, None or "oob", default 5
        Number of stratified folds for the cross-fitted probabilities; ``None``: in-sample (the
        reference code's logistic regression); ``"oob"``: out-of-bag votes of a bagged classifier
        (``oob_score=True`` is set; the reference code's random forest, R's
        ``predict(rf, type="prob")``).
    clip : (float, float) or None, default (0.01, 0.99)
        Bounds on :math:`\hat p`; ``None`` for none. They bound the ratio to
        :math:`[1/99, 99] \cdot n_0/n_1`.
    random_state : int, default 0
        Seeds the folds (and the classifier, when it takes ``random_state`` and has none).
    on_small : {"raise", "warn", "ignore"}, default "raise"

    Attributes
    ----------
    calibration_weights_, test_weights_ : ndarray
        The cross-fitted ratio at the rows given to :meth:`fit`.
    n_calibration_, n_test_ : int

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X0, X1 = rng.normal(size=(300, 1)), rng.normal(0.5, 1.0, size=(300, 1))
    >>> lr = LikelihoodRatio().fit(X0, X1)
    >>> w = lr.calibration(X0, n=300)       # the cross-fitted ratio, close to exp(0.5 x - 0.125)
    >>> bool(np.corrcoef(np.log(w), X0[:, 0])[0, 1] > 0.99)
    True
    """

    def __init__(
        self,
        classifier: Classifier | None = None,
        *,
        cv: int | str | None = 5,
        clip: tuple[float, float] | None = (0.01, 0.99),
        random_state: int = 0,
        on_small: str = "raise",
    ) -> None:
        self.classifier = classifier
        self.cv = cv
        self.clip = clip
        self.random_state = random_state
        self.on_small = check_choice(on_small, "on_small", _ON_SMALL)

    def _classifier(self) -> Classifier:
        from sklearn.base import clone
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        if self.classifier is None:
            return make_pipeline(StandardScaler(), LogisticRegression(C=np.inf, max_iter=1000))
        if not (hasattr(self.classifier, "fit") and hasattr(self.classifier, "predict_proba")):
            raise TypeError(
                f"classifier must have fit and predict_proba (a scikit-learn classifier); got "
                f"{type(self.classifier).__name__}. Use e.g. LogisticRegression() or RandomForestClassifier()."
            )
        model = clone(self.classifier)
        params = model.get_params()
        if "random_state" in params and params["random_state"] is None:
            model.set_params(random_state=self.random_state)
        return model

    def _check_options(self) -> tuple[float, float] | None:
        if not (self.cv is None or self.cv == "oob" or (isinstance(self.cv, int) and self.cv >= 2)):
            raise ValueError(f"cv must be an int >= 2, None (in-sample) or 'oob'; got {self.cv!r}.")
        if self.clip is None:
            return None
        lo, hi = (float(v) for v in self.clip)
        if not 0.0 < lo < hi < 1.0:
            raise ValueError(
                f"clip must be (lo, hi) with 0 < lo < hi < 1, or None; got {self.clip!r}, e.g. (0.01, 0.99)."
            )
        return lo, hi

    def _odds(self, p: np.ndarray) -> np.ndarray:
        clip = self._check_options()
        if clip is not None:
            p = np.clip(p, *clip)
        with np.errstate(divide="ignore"):
            return p / (1.0 - p) * (self.n_calibration_ / self.n_test_)

    def fit(self, X_calibration: ArrayLike, X_test: ArrayLike) -> Self:
        """Fit the classifier and cross-fit the ratio at both sets of rows; returns ``self``.

        Parameters
        ----------
        X_calibration : array_like, shape (n, d)
            The calibration inputs (label 0).
        X_test : array_like, shape (m, d)
            The test inputs (label 1), of the same columns.
        """
        self._check_options()
        X0, X1 = _inputs(X_calibration, "X_calibration"), _inputs(X_test, "X_test")
        X0, X1 = X0.reshape(len(X0), -1), X1.reshape(len(X1), -1)
        if X0.shape[1] != X1.shape[1]:
            raise ValueError(
                f"X_test has {X1.shape[1]} columns but X_calibration has {X0.shape[1]}; pass the same columns."
            )
        Z = np.vstack([X0, X1])
        label = np.r_[np.zeros(len(X0), int), np.ones(len(X1), int)]
        self.n_calibration_, self.n_test_ = len(X0), len(X1)
        p = self._cross_fitted(Z, label)
        odds = self._odds(p)
        self.calibration_weights_, self.test_weights_ = odds[: len(X0)], odds[len(X0) :]
        self._fitted_on = (X0.copy(), X1.copy())
        self.model_: Classifier | None = None  # refitted on every row on the first new input (ratio)
        self._Z, self._label = Z, label
        return self

    def _cross_fitted(self, Z: np.ndarray, label: np.ndarray) -> np.ndarray:
        if self.cv is None:
            return self._classifier().fit(Z, label).predict_proba(Z)[:, 1]
        if self.cv == "oob":
            model = self._classifier()
            if "oob_score" not in model.get_params():
                raise ValueError(
                    f"cv='oob' needs a bagged classifier (oob_score=, e.g. RandomForestClassifier); got "
                    f"{type(model).__name__}. Use cv=5 for cross-fitting."
                )
            model.set_params(oob_score=True).fit(Z, label)
            oob = getattr(model, "oob_decision_function_")  # a bagged classifier's out-of-bag probabilities
            return np.nan_to_num(oob[:, 1], nan=0.5)  # a row never out of bag: 1/2
        from sklearn.model_selection import StratifiedKFold

        if min(np.bincount(label)) < self.cv:
            raise ValueError(
                f"cv={self.cv} folds need at least {self.cv} rows in each set; pass a smaller cv or more rows."
            )
        p = np.empty(label.size)
        folds = StratifiedKFold(self.cv, shuffle=True, random_state=self.random_state)
        for train, held in folds.split(Z, label):
            p[held] = self._classifier().fit(Z[train], label[train]).predict_proba(Z[held])[:, 1]
        return p

    def ratio(self, X: ArrayLike) -> np.ndarray:
        """The estimated ratio at new inputs: the classifier refitted on every row given to :meth:`fit`."""
        if not hasattr(self, "_fitted_on"):
            raise ValueError("LikelihoodRatio is not fitted: call fit(X_calibration, X_test) first.")
        X = _inputs(X, "X")
        model = self.model_
        if model is None:
            model = self.model_ = self._classifier().fit(self._Z, self._label)
        return self._odds(model.predict_proba(X.reshape(len(X), -1))[:, 1])

    def _side(self, X: ArrayLike | None, count: int, which: int, name: str) -> np.ndarray:
        if not hasattr(self, "_fitted_on"):
            raise ValueError("LikelihoodRatio is not fitted: call fit(X_calibration, X_test) first.")
        own = (self.calibration_weights_, self.test_weights_)[which]
        rows = self._fitted_on[which]
        if X is None:
            if count != own.size:
                raise ValueError(
                    f"LikelihoodRatio was fitted on {own.size} {name} rows but {count} {name} points were given; "
                    f"fit it on these {name} inputs, or pass them as X."
                )
            return own
        X = _inputs(X, "X")
        same = X.reshape(len(X), -1).shape == rows.shape and np.array_equal(X.reshape(len(X), -1), rows)
        return own if same else self.ratio(X)  # its own rows keep their cross-fitted ratio

    def calibration(self, X: ArrayLike | None = None, *, n: int) -> np.ndarray:
        """The cross-fitted ratio at the calibration rows of :meth:`fit` (``X`` those rows, or None), else :meth:`ratio`."""
        return check_weights(self._side(X, n, 0, "calibration"), n, "LikelihoodRatio calibration weights")

    def test(self, X: ArrayLike | None = None, *, m: int) -> np.ndarray:
        """The cross-fitted ratio at the test rows of :meth:`fit` (``X`` those rows, or None), else :meth:`ratio`."""
        return check_weights(self._side(X, m, 1, "test"), m, "LikelihoodRatio test weights", positive=True)


# ---------------------------------------------------------------------------
# what the calibrators call
# ---------------------------------------------------------------------------


def resolve(
    weights: ArrayLike | Weights,
    n: int,
    *,
    X: ArrayLike | None = None,
    obs: xr.Dataset | xr.DataArray | ArrayLike | None = None,  # or the rows' labels (a pandas index)
    side: str = "calibration",
    name: str = "weights",
) -> np.ndarray:
    """The weights of ``n`` points on one ``side`` ("calibration" or "test") from an array or a :class:`Weights`."""
    if isinstance(weights, Weights):
        return weights.calibration(X, n=n) if side == "calibration" else weights.test(X, m=n)
    return check_weights(weights, n, name, obs=obs, positive=side == "test")


def resolve_test_weights(
    weighted: bool,
    weights: ArrayLike | Weights | None,
    stored: Weights | None,
    m: int,
    *,
    owner: str,
    X: ArrayLike | None = None,
    obs: xr.Dataset | xr.DataArray | ArrayLike | None = None,
) -> tuple[np.ndarray, ArrayLike | Weights] | None:
    r"""The test weights of a conformal prediction, checked against how the calibration was weighted.

    The one check every weighted conformal method runs at prediction (split, CPS, CQR,
    conditional conformal, Mondrian): the weighted quantile of Tibshirani et al. (2019, eq. 7)
    puts the test point's mass :math:`w(x_{n+1})/(\sum_i w(x_i) + w(x_{n+1}))` at :math:`+\infty`, so
    it needs the test weights exactly when the calibration scores were weighted.

    Parameters
    ----------
    weighted : bool
        Whether the calibration scores were weighted.
    weights : array_like, Weights or None
        The ``weights=`` passed to the prediction.
    stored : Weights or None
        The weights object the calibration was fitted with (None for a plain array): its
        :meth:`Weights.test` gives the test weights when ``weights`` is None.
    m : int
        Number of test points.
    owner : str
        The calibrator's name, for the messages.
    X, obs : optional
        Test inputs (for a weights object that reads them) and the test Dataset (for alignment).

    Returns
    -------
    (ndarray, source) or None
        The test weights, shape (m,), and where they came from; None for an unweighted calibration.

    Raises
    ------
    ValueError
        Weights at prediction after an unweighted calibration, or none after a calibration
        weighted by a plain array (each message names the fix).

    Examples
    --------
    >>> resolve_test_weights(False, None, None, 3, owner="SplitConformalCalibrator") is None
    True
    >>> resolve_test_weights(True, [1.0, 2.0], None, 2, owner="SplitConformalCalibrator")[0].tolist()
    [1.0, 2.0]
    """
    if not weighted:
        if weights is not None:
            raise ValueError(
                f"weights= at prediction needs a weighted fit: this {owner} was calibrated without weights. Pass "
                "weights= (an array or a calibprob.weights object) when fitting or calibrating too, or drop it here."
            )
        return None
    source = weights if weights is not None else stored
    if source is None:
        raise ValueError(
            "the calibration points were weighted by an array, so the test points need their weights too: pass "
            "weights= (one per test point, e.g. the density ratio at each), or a calibprob.weights object."
        )
    return resolve(source, m, X=X, obs=obs, side="test"), source


def weight_support(calibrator: object) -> str | None:
    """How ``calibrator`` (a class or an instance) takes weights: "conformal", "loss" or None (not at all).

    Read from the class attribute ``_weights_support`` that each calibrator declares explicitly
    (:data:`WEIGHT_SUPPORT`); a wrapper's ``"inner"`` resolves to its ``calibrator``'s support.

    Parameters
    ----------
    calibrator : class or instance
        A calibrator (a :class:`~calibprob.Mondrian` instance resolves to the calibrator it wraps).

    Returns
    -------
    str or None
        ``"conformal"``, ``"loss"``, or None when the class declares no weight support.

    Examples
    --------
    >>> from calibprob.calibrators.conformal import ConformalPredictiveSystem
    >>> weight_support(ConformalPredictiveSystem)
    'conformal'
    """
    support = getattr(calibrator, "_weights_support", None)
    if support == "inner":
        inner = getattr(calibrator, "calibrator", None)
        return None if inner is None or isinstance(inner, property) else weight_support(inner)
    return support


def on_small_of(*candidates: object) -> str:
    """The ``on_small`` of the first :class:`Weights` among ``candidates`` ("raise" for plain arrays)."""
    for w in candidates:
        if isinstance(w, Weights):
            return w.on_small
    return "raise"
