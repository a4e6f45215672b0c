r"""Conditional conformal over a finite function class (Gibbs, Cherian & Candès 2023).

Given a fixed conformity score :math:`S(x, y)`, calibration scores :math:`S_i` and a
feature map :math:`\Phi: \mathcal X \to \mathbb R^d`, the prediction set at a test point is
:math:`\hat C(x) = \{y : S(x, y) \le S^*(x)\}`, where :math:`S^*(x)` is the largest imputed
score that the augmented quantile regression

.. math::

    \hat g_S = \arg\min_{g \in \mathcal F} \sum_{i=1}^n \ell_{1-\alpha}(S_i - g(x_i))
               + \ell_{1-\alpha}(S - g(x)),
    \qquad \mathcal F = \{\Phi(\cdot)^\top\beta : \beta \in \mathbb R^d\},

does not put above its fitted quantile (dual weight :math:`\eta_{n+1}(S) < 1-\alpha`;
randomised: :math:`< U`, :math:`U \sim \mathrm{Unif}(-\alpha, 1-\alpha)`). The threshold is
computed exactly (``calibprob.calibrators.conformal._condconf_lp``).

Guarantee (Gibbs et al. 2023, Theorem 2): for every :math:`f \in \mathcal F` with
:math:`f \ge 0` and :math:`E f(X) > 0`,

.. math::

    \frac{E[f(X)\,1\{Y \in \hat C(X)\}]}{E f(X)} \ge 1 - \alpha ,

with equality for the randomised set. With group indicators
:math:`\Phi = (1\{x \in G_1\}, \dots, 1\{x \in G_m\})` this is coverage
:math:`\ge 1 - \alpha` in every group at once, overlapping or not; for the intercept alone
it is split conformal, and for disjoint groups it is split conformal run in each group
(Mondrian conformal), both tested to 1e-10.

Scores and the two calibrator families
--------------------------------------
The class is a *distribution post-processor*: the score uses the base's predictive
Dataset, :math:`S = |y - \mu|` (``score="absolute"``) or :math:`|y - \mu|/\sigma`
(``"normalized"``) with :math:`\mu, \sigma` its own mean and standard deviation, and the
interval is :math:`\mu \pm S^*(x)\,s(x)`. The features come with the data, not the model:
``fit(pred_cal, y_cal, groups=..., features=..., X=...)`` and the same keywords at
``predict``. A model-aware use needs no second class: predict with the model
(``base.predict(X)``, or :func:`calibprob.normal` of its mean and σ) and pass ``X`` for the
``feature_map``. Features are

* ``groups``: a 1-D array of labels (one-hot encoded here; disjoint) or an (n, m) 0/1
  matrix (overlapping groups allowed);
* ``features``: an (n, d) array :math:`\Phi(x)`;
* ``X`` with the constructor's ``feature_map`` callable, :math:`\Phi = \text{feature\_map}(X)`;

concatenated when several are given. **Intercept** (``intercept="auto"``): a constant
column is added unless the constant is already in the span of the features on the
calibration points (one-hot labels, or groups that cover every calibration point and
whose indicator sum is constant), so the function class always contains
:math:`f \equiv 1` (marginal coverage). **Rank**: dependent columns (pivoted QR on the
calibration features) are refused, naming them, or dropped with ``rank_deficient="reduce"``.
A test point with :math:`\Phi(x) = 0` (no group of the class contains it) or in a group
too small to reach the level gets :math:`S^* = \infty`, an explicit infinite interval,
with a warning.

**Weights (a covariate shift).** Gibbs, Cherian & Candès's guarantee holds under every
non-negative tilt in the class: :math:`E_f[1\{Y \in C(X)\}] \ge (1-\alpha)\,E_f[1]` for
:math:`f \in \mathcal F`, :math:`f \ge 0` (their Theorem 2, :math:`\mathbb E[f(X)(1\{Y \in C\} - (1-\alpha))] \ge 0`),
i.e. coverage :math:`\ge 1 - \alpha` when the test inputs follow :math:`f\,dP_X / E[f]`. So the
one spelling ``fit(..., weights=)`` / ``predict(..., weights=)`` adds the likelihood ratio
:math:`w` (its values at the calibration and the test points) as one more column of
:math:`\Phi`, named ``"weights"``: coverage under the shift with ratio :math:`w`, together with
the class's other guarantees (per group, marginal). A level the weights cannot support is
handled as by every weighted calibrator of calibprob (:func:`calibprob.weights.check_attainable`:
the effective sample size of the weights at the worst test point must reach :math:`1/(1-c)`):
refused by default, naming the attainable level, or warned about with ``on_small="warn"`` on the
weights object (a :class:`~calibprob.weights.GivenWeights` for plain numbers), in which case the
LP's threshold is returned as it is, infinite where the class cannot reach the level (warned, as
above). The diagnostics go to ``weight_diagnostics_`` and to the output's attributes
(``weights_ess``, ``weights_attainable_level``). Calibration weights that are all equal are a
constant, already in the class through the intercept: the column is not added and the result is
the unweighted one bit for bit.

References
----------
Gibbs, I., Cherian, J. J. and Candès, E. J. (2023). Conformal prediction with
conditional guarantees. arXiv:2305.12616.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any, Self, cast

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.alignment import align_to_obs
from calibprob._core.estimator import BaseEstimator, check_is_fitted, check_predictive
from calibprob._core.labels import refuse_kind_clash
from calibprob._core.tables import dependent_columns
from calibprob._core.validation import check_array, check_choice, check_groups, check_targets
from calibprob.calibrators.conformal._condconf_lp import thresholds
from calibprob.calibrators.conformal._intervals import interval_dataset, resolve_levels
from calibprob.calibrators.conformal.scores import get_score, invert
from calibprob.calibrators.conformal.split_calibrator import (
    checked_test_weights,
    predictive_mean_std,
    split_test_weights,
)
from calibprob.predictive import CalibprobWarning
from calibprob.weights import Weights, resolve

__all__ = ["ConditionalConformal", "conditional_thresholds", "one_hot"]


def one_hot(labels: ArrayLike, categories: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Indicator columns of 1-D labels, and the categories (sorted, or the ones given).

    Raises ``ValueError`` for a label not among ``categories`` (a group calibration never saw).
    """
    labels = np.asarray(labels)
    if categories is None:
        categories = np.unique(labels)
    else:
        refuse_kind_clash(labels, categories, "groups", "calibration")
    idx = np.searchsorted(categories, labels)
    idx = np.clip(idx, 0, categories.size - 1)
    unseen = categories[idx] != labels
    if unseen.any():
        raise ValueError(
            f"groups has labels {np.unique(labels[unseen]).tolist()[:5]} that calibration never saw (it saw "
            f"{categories.tolist()[:10]}). Calibrate with data from every group, or pass the groups as an (n, m) "
            "0/1 matrix (a point in no group then gets an infinite interval)."
        )
    return (idx[:, None] == np.arange(categories.size)[None, :]).astype(float), categories


def conditional_thresholds(
    scores: ArrayLike,
    features: ArrayLike,
    test_features: ArrayLike,
    confidence_level: float,
    *,
    theta: ArrayLike | None = None,
) -> np.ndarray:
    r"""Exact conditional-conformal score cutoffs :math:`S^*` of test points (NumPy layer).

    Parameters
    ----------
    scores : array_like, shape (n,)
        Calibration scores :math:`S_i`.
    features : array_like, shape (n, d)
        :math:`\Phi(x_i)`, full column rank.
    test_features : array_like, shape (m, d)
        :math:`\Phi(x_{n+1})` of each test point.
    confidence_level : float
        :math:`1 - \alpha`.
    theta : array_like, shape (m,), optional
        Dual threshold per test point; default :math:`1 - \alpha` (deterministic set).
        Randomised: draws of :math:`\mathrm{Unif}(-\alpha, 1 - \alpha)`.

    Returns
    -------
    ndarray, shape (m,)
        The set is :math:`\{y : S(x, y) \le S^*\}`; :math:`+\infty` where the class says nothing.

    References
    ----------
    Gibbs, Cherian & Candès (2023), §3-4.

    Examples
    --------
    >>> import numpy as np
    >>> s = np.arange(1.0, 20.0)
    >>> float(conditional_thresholds(s, np.ones((19, 1)), np.ones((1, 1)), 0.9)[0])   # split conformal: rank 18
    18.0
    """
    S = check_array(scores, "scores", ndim=1)
    Phi = check_array(features, "features", ndim=2)
    phi = check_array(test_features, "test_features", ndim=2)
    if Phi.shape[0] != S.size or phi.shape[1] != Phi.shape[1]:
        raise ValueError(
            f"features must be ({S.size}, d) and test_features (m, d) with the same d; got {Phi.shape} and {phi.shape}."
        )
    tau = float(confidence_level)
    theta = np.full(phi.shape[0], tau) if theta is None else np.asarray(theta, float).reshape(-1)
    return thresholds(S, Phi, phi, tau, theta)


def _short_names(names: list[str], idx: np.ndarray, limit: int = 6) -> str:
    shown = [names[j] for j in idx[:limit]]
    return ", ".join(shown) + (f", ... ({len(idx) - limit} more)" if len(idx) > limit else "")


def _constant_in_span(Phi: np.ndarray) -> bool:
    if Phi.shape[1] == 0:
        return False
    one = np.ones(Phi.shape[0])
    coef, *_ = np.linalg.lstsq(Phi, one, rcond=None)
    return bool(np.linalg.norm(Phi @ coef - one) <= 1e-9 * np.sqrt(Phi.shape[0]))


class ConditionalConformal(BaseEstimator):
    r"""Conditional conformal intervals (Gibbs, Cherian & Candès 2023): ``fit(pred_cal, y_cal, groups=...)``.

    Parameters
    ----------
    score : {"absolute", "normalized"}, default "absolute"
        :math:`|y - \mu|` or :math:`|y - \mu|/\sigma`, from the predictive Dataset's mean and std.
    confidence_level : float or sequence of float, default 0.9
    feature_map : callable, optional
        :math:`\Phi(X)` returning an (n, d) array, applied to the ``X`` given to fit and predict.
    intercept : {"auto", True, False}, default "auto"
        Add a constant column (module docstring for "auto").
    rank_deficient : {"raise", "reduce"}, default "raise"
        Refuse dependent feature columns (naming them) or drop them with a warning.
    randomize : bool, default False
        The randomised set (exact coverage :math:`1 - \alpha` for every :math:`f`) instead of
        the deterministic, conservative one.
    random_state : int, optional
        Seed of the randomised thresholds (the same seed gives the same intervals).

    Attributes
    ----------
    scores_ : ndarray, shape (n_cal,)
    features_ : ndarray, shape (n_cal, d)
        The calibration features, after the intercept rule and any reduction.
    columns_ : list of str
        Names of the kept columns ("intercept", "group <label>", "feature j", "map j").
    categories_ : ndarray or None
        The labels seen by ``fit`` when ``groups`` was 1-D.
    n_calibration_ : int

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> g = rng.integers(0, 2, 800); y = rng.normal(size=800) * (1 + 2 * g)   # noise depends on the group
    >>> base = calibprob.normal(np.zeros(800), np.ones(800))
    >>> cc = calibprob.ConditionalConformal().fit(base.isel(obs=slice(400)), y[:400], groups=g[:400])
    >>> iv = cc.predict(base.isel(obs=slice(400, None)), groups=g[400:]).sel(confidence_level=0.9)
    >>> hit = (y[400:] >= iv["lower"].values) & (y[400:] <= iv["upper"].values)
    >>> bool(hit[g[400:] == 1].mean() > 0.83)
    True

    References
    ----------
    Gibbs, I., Cherian, J. J. and Candès, E. J. (2023). Conformal prediction with conditional guarantees.
    """

    scores_: np.ndarray | None
    categories_: np.ndarray | None
    _weights_support = "conformal"  # calibprob.weights.weight_support: the tilt as a column of the class
    # a calibprob.weights object (may hold a fitted classifier) is not written by save(); pass weights= after load
    _transient_attrs: tuple[str, ...] = ("weights_",)
    calibration_weights_: np.ndarray | None = None
    weights_ = None
    tilt_column_: bool = False

    def __init__(
        self,
        *,
        score: str = "absolute",
        confidence_level: ArrayLike = 0.9,
        feature_map: Callable | None = None,
        intercept: bool | str = "auto",
        rank_deficient: str = "raise",
        randomize: bool = False,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.score = score
        self.confidence_level = confidence_level
        self.feature_map = feature_map
        self.intercept = intercept
        self.rank_deficient = rank_deficient
        self.randomize = randomize
        self.random_state = random_state

    # -- features -------------------------------------------------------------------------
    def _raw_features(
        self, n: int, groups: Any, features: ArrayLike | None, X: Any, *, fitting: bool
    ) -> tuple[np.ndarray, list[str]]:
        blocks, names = [], []
        if groups is not None:
            G, names_g = self._group_block(groups, n, fitting=fitting)
            blocks.append(G)
            names += names_g
        if features is not None:
            F = check_array(features, "features", ndim=(1, 2))
            F = F[:, None] if F.ndim == 1 else F
            blocks.append(self._check_rows(F, n, "features"))
            names += [f"feature {j}" for j in range(F.shape[1])]
        if X is not None or self.feature_map is not None:
            F = self._mapped(X, n)
            blocks.append(F)
            names += [f"map {j}" for j in range(F.shape[1])]
        return (np.hstack(blocks) if blocks else np.zeros((n, 0))), names

    @staticmethod
    def _check_rows(F: np.ndarray, n: int, name: str) -> np.ndarray:
        if F.shape[0] != n:
            raise ValueError(
                f"{name} has {F.shape[0]} rows but the predictive Dataset has {n} observations; pass one row per point."
            )
        return F

    def _group_block(self, groups: Any, n: int, *, fitting: bool) -> tuple[np.ndarray, list[str]]:
        if isinstance(groups, str):  # the name of a coordinate of the predictive Dataset
            pred = getattr(self, "_pred", None)  # the Dataset being fitted / predicted
            if pred is None or groups not in pred.coords:
                have = [] if pred is None else list(pred.coords)
                raise ValueError(
                    f"groups={groups!r} names no coordinate of the predictive Dataset (it has {have}); pass the "
                    "labels as an array, or assign_coords the group labels along obs."
                )
            groups = pred[groups]
        # labelled groups (a DataArray with an obs coordinate, a Series / DataFrame with an index) are
        # aligned to the prediction's rows by the package's one alignment reader
        groups = align_to_obs(groups, getattr(self, "_pred", None), "groups")
        g = np.asarray(groups.values if isinstance(groups, (xr.DataArray, pd.Series, pd.DataFrame)) else groups)
        if g.ndim == 1:
            # one label per point: read by the package's one label reader (missing, value and type)
            self._check_rows(g[:, None], n, "groups")
            labels = check_groups(groups, n, name="groups")
            assert labels is not None  # groups is not None here
            G, cats = one_hot(labels, None if fitting else self.categories_)
            if fitting:
                self.categories_ = cats
            return G, [f"group {c}" for c in cats]
        G = check_array(g, "groups", ndim=2)
        if not np.isin(G, (0.0, 1.0)).all():
            raise ValueError("groups as a matrix must hold 0/1 membership indicators (n, m); got other values.")
        if fitting:
            self.categories_ = None
        return self._check_rows(G, n, "groups"), [f"group {j}" for j in range(G.shape[1])]

    def _mapped(self, X: Any, n: int) -> np.ndarray:
        if self.feature_map is None or X is None:
            raise ValueError(
                "feature_map and X go together: pass X=... to fit/predict for the constructor's feature_map, "
                f"or drop X (got feature_map={self.feature_map!r}, X {'given' if X is not None else 'None'})."
            )
        F = check_array(self.feature_map(X), "feature_map(X)", ndim=(1, 2))
        return self._check_rows(F[:, None] if F.ndim == 1 else F, n, "feature_map(X)")

    def _fit_columns(self, Phi: np.ndarray, names: list[str]) -> tuple[np.ndarray, list[str]]:
        """Apply the intercept rule and the rank check to the calibration features; remember the choices."""
        add = self.intercept is True or (self.intercept == "auto" and not _constant_in_span(Phi))
        if add:
            Phi, names = np.hstack([np.ones((Phi.shape[0], 1)), Phi]), ["intercept", *names]
        self.add_intercept_ = bool(add)
        self.n_columns_ = Phi.shape[1]
        if Phi.shape[1] == 0:
            raise ValueError(
                "no features: with intercept=False, pass groups=, features= or X= (with feature_map), or use intercept='auto'."
            )
        dep = dependent_columns(Phi)  # decided on unit-norm columns: units do not matter
        if dep.size and self.rank_deficient == "raise":
            raise ValueError(
                f"rank-deficient features: the columns {[names[j] for j in dep]} are linear combinations of the "
                f"others on the calibration points ({Phi.shape[1]} columns, rank {Phi.shape[1] - dep.size}). Drop "
                "them, or pass rank_deficient='reduce' to drop them automatically."
            )
        if dep.size:
            warnings.warn(
                f"dropped dependent feature columns {[names[j] for j in dep]} (rank_deficient='reduce').",
                CalibprobWarning,
                stacklevel=3,
            )
        self.kept_ = np.setdiff1d(np.arange(Phi.shape[1]), dep)
        if Phi.shape[0] <= self.kept_.size:
            # n <= d independent columns: the quantile regression interpolates every score, so the
            # threshold of a new point is unbounded whatever the level (Gibbs et al. need n > d)
            raise ValueError(
                f"conditional conformal needs more calibration points than independent feature columns: "
                f"n_cal = {Phi.shape[0]}, columns = {self.kept_.size} ({_short_names(names, self.kept_)}). "
                "Pass more calibration points, or fewer columns (coarser groups, fewer features)."
            )
        return Phi[:, self.kept_], [names[j] for j in self.kept_]

    def _test_columns(self, Phi: np.ndarray) -> np.ndarray:
        if self.add_intercept_:
            Phi = np.hstack([np.ones((Phi.shape[0], 1)), Phi])
        if Phi.shape[1] != self.n_columns_:
            raise ValueError(
                f"the test features have {Phi.shape[1]} columns but calibration had {self.n_columns_}; pass the "
                "same groups / features / X columns to predict as to fit."
            )
        return Phi[:, self.kept_]

    # -- lifecycle --------------------------------------------------------------------------
    def _scores(
        self, pred: xr.Dataset, y: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        check_choice(self.score, "score", ("absolute", "normalized"))
        sigma: np.ndarray | None
        mu, sigma = predictive_mean_std(pred)
        if self.score == "normalized" and not np.all(sigma > 0):
            raise ValueError("score='normalized' needs the predictive std > 0 at every point; use score='absolute'.")
        # the score object computes the score (and its scale for the inverse): one place for both
        score = get_score(self.score)
        sigma = sigma if score.needs_sigma else None
        scale = np.broadcast_to(np.asarray(score.scale(sigma), float), mu.shape)
        return mu, scale, (None if y is None else score.score(y, mu, sigma))

    def fit(
        self,
        pred_cal: xr.Dataset,
        y_cal: ArrayLike,
        *,
        groups: Any = None,
        features: ArrayLike | None = None,
        X: Any = None,
        weights: ArrayLike | Weights | None = None,
    ) -> Self:
        """Compute the calibration scores and features; returns ``self``.

        Parameters
        ----------
        pred_cal : xarray.Dataset
            The base's predictive distribution on the calibration data.
        y_cal : array_like, shape (n_cal,)
        groups : array_like, xarray.DataArray or str, optional
            1-D labels or an (n_cal, m) 0/1 membership matrix, or the name of a coordinate of
            ``pred_cal`` along ``obs`` holding the labels.
        features : array_like, shape (n_cal, d), optional
        X : array_like, optional
            Inputs for the constructor's ``feature_map``.
        weights : array_like, pandas.Series, xarray.DataArray or calibprob.weights.Weights, optional
            The likelihood ratio at the calibration points (or a :mod:`calibprob.weights` object):
            one more column of the feature map, for coverage under that shift (module docstring);
            the test points' values go to :meth:`predict`.

        Raises
        ------
        ValueError
            Rank-deficient features (naming the columns), features of the wrong length, NaN;
            NaN, negative or all-zero weights.
        """
        if not (self.intercept is True or self.intercept is False or self.intercept == "auto"):
            raise ValueError(f"intercept must be 'auto', True or False; got {self.intercept!r}.")
        check_choice(self.rank_deficient, "rank_deficient", ("raise", "reduce"))
        resolve_levels(self.confidence_level)
        pred = check_predictive(pred_cal, self, "pred_cal")
        n = pred.sizes["obs"]
        y = check_targets(y_cal, n, "y_cal", obs=pred["obs"].values)
        _, _, S = self._scores(pred, y)
        self._pred = pred
        Phi, names = self._raw_features(n, groups, features, X, fitting=True)
        self._pred = None
        Phi, names = self._with_weights(Phi, names, weights, pred)
        self.features_, self.columns_ = self._fit_columns(Phi, names)
        self.scores_ = S
        self.n_calibration_ = int(n)
        return self

    def _with_weights(
        self, Phi: np.ndarray, names: list[str], weights: ArrayLike | Weights | None, pred: xr.Dataset
    ) -> tuple[np.ndarray, list[str]]:
        """The calibration features with the weights' column (module docstring); equal weights add none."""
        self.weights_ = weights if isinstance(weights, Weights) else None
        self.calibration_weights_ = None
        self.tilt_column_ = False
        if weights is None:
            return Phi, names
        w = resolve(weights, Phi.shape[0], obs=pred, side="calibration")
        self.calibration_weights_ = w
        if np.all(w == w[0]):
            return Phi, names  # a constant tilt: already in the class (the intercept)
        self.tilt_column_ = True
        return np.hstack([Phi, w[:, None]]), [*names, "weights"]

    def _test_weight_column(
        self,
        phi: np.ndarray,
        weights: ArrayLike | Weights | None,
        pred: xr.Dataset,
        levels: Sequence[float] | np.ndarray = (),
        attrs: dict | None = None,
    ) -> np.ndarray:
        """The test features with the weights' column (after a weighted fit); refuses misuse, naming the fix.

        The weights' attainable-level check (``checked_test_weights``: refuse or warn per ``on_small``)
        runs here, its diagnostics written to ``weight_diagnostics_`` and ``attrs``.
        """
        test = split_test_weights(self, weights, phi.shape[0], obs=pred)
        if test is None:
            return phi
        checked_test_weights(self, levels, test, {} if attrs is None else attrs)
        return np.hstack([phi, test[0][:, None]]) if self.tilt_column_ else phi

    def _theta(self, c: float, m: int, rng: np.random.Generator) -> np.ndarray:
        return rng.uniform(c - 1.0, c, size=m) if self.randomize else np.full(m, c)

    def predict(
        self,
        pred: xr.Dataset,
        *,
        groups: Any = None,
        features: ArrayLike | None = None,
        X: Any = None,
        confidence_level: ArrayLike | None = None,
        weights: ArrayLike | Weights | None = None,
    ) -> xr.Dataset:
        r"""Intervals :math:`\mu \pm S^*(x)\, s(x)` at every confidence level (the interval family).

        Parameters
        ----------
        pred : xarray.Dataset
            The base's predictive distribution at the test points.
        groups, features, X :
            As given to :meth:`fit`, for the test points.
        confidence_level : float or sequence, optional
            Default: the constructor's.
        weights : array_like or calibprob.weights.Weights, optional
            After a weighted :meth:`fit`: the likelihood ratio at the test points (default: the
            weights object given to :meth:`fit`).

        Returns
        -------
        xarray.Dataset
            ``lower``, ``upper`` over (obs, confidence_level), ``attrs["family"] == "interval"``;
            ``attrs["n_unbounded"]``: test points given the whole line.
        """
        check_is_fitted(self, "scores_", method="fit")
        levels, _ = resolve_levels(self.confidence_level if confidence_level is None else confidence_level)
        pred = check_predictive(pred, self, "pred")
        m = pred.sizes["obs"]
        mu, scale, _ = self._scores(pred)
        self._pred = pred
        raw = self._raw_features(m, groups, features, X, fitting=False)[0]
        self._pred = None
        attrs: dict = {}
        phi = self._test_columns(self._test_weight_column(raw, weights, pred, levels, attrs))
        rng = np.random.default_rng(self.random_state)
        scores = cast(np.ndarray, self.scores_)  # checked fitted above: scores_ is the array
        cut = np.column_stack(
            [thresholds(scores, self.features_, phi, float(c), self._theta(c, m, rng)) for c in levels]
        )
        self._warn_unbounded(cut, phi)
        lower, upper = invert(mu[:, None], scale[:, None], -cut), invert(mu[:, None], scale[:, None], cut)
        ds = interval_dataset(lower, upper, levels, False, method=f"conditional-conformal-{self.score}")
        ds.attrs.update(n_calibration=self.n_calibration_, n_unbounded=int(np.isinf(cut).any(axis=1).sum()), **attrs)
        return ds.assign_coords(obs=pred["obs"].values)

    def predict_interval(
        self,
        pred: xr.Dataset,
        confidence_level: ArrayLike | None = None,
        *,
        groups: Any = None,
        features: ArrayLike | None = None,
        X: Any = None,
        weights: ArrayLike | Weights | None = None,
    ) -> xr.Dataset:
        """The interval family's entry point: :meth:`predict`, a scalar level dropping its dimension.

        The same intervals as :meth:`predict` (this method's only output), under the name every
        interval method of calibprob answers to, so that wrappers (:class:`~calibprob.Mondrian`)
        and users reach them alike.

        Parameters
        ----------
        pred : xarray.Dataset
        confidence_level : float or sequence, optional
            Default: the constructor's.
        groups, features, X, weights :
            As given to :meth:`fit`, for the test points.

        Returns
        -------
        xarray.Dataset
        """
        level = self.confidence_level if confidence_level is None else confidence_level
        ds = self.predict(pred, groups=groups, features=features, X=X, confidence_level=level, weights=weights)
        return ds.isel(confidence_level=0) if np.ndim(level) == 0 else ds

    @staticmethod
    def _warn_unbounded(cut: np.ndarray, phi: np.ndarray) -> None:
        inf = np.isinf(cut).any(axis=1)
        if inf.any():
            zero = int((~np.any(phi, axis=1)).sum())
            warnings.warn(
                f"{int(inf.sum())} test points get an infinite interval: {zero} have features Phi(x) = 0 (no group "
                "of the class contains them) and the others lie where the class cannot reach the level (a group with "
                "too few calibration points, or a test weight too large for the calibration weights). Add calibration "
                "data in those groups or near those test inputs, or add an intercept (intercept=True).",
                CalibprobWarning,
                stacklevel=3,
            )
