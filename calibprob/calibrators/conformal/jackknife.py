r"""Jackknife, jackknife+ and CV+ for any refittable base regressor.

For each fold :math:`S_k` (single points for the jackknife, :math:`K` blocks
for CV+), the base is refitted on the other points, giving
:math:`\mu_{-S_k}` (and :math:`\sigma_{-S_k}`). Writing :math:`\mu_{-i}` for
the model that did not see point :math:`i`, the leave-out scores are
:math:`R_i = R(x_i, y_i; \mu_{-i}, \sigma_{-i})` with the score's normaliser
:math:`s_{-i}(x) = s(\sigma_{-i}(x))` (1 for the absolute residual).

``method="plus"`` (jackknife+ / CV+, Barber et al. 2021, eq. 6 and 8)
    Symmetric scores: with :math:`\alpha = 1 - c`,

    .. math::

        \xi^-_i(x) = \mu_{-i}(x) - R_i\, s_{-i}(x), \qquad
        \xi^+_i(x) = \mu_{-i}(x) + R_i\, s_{-i}(x),

    * lower end: the :math:`\lfloor \alpha (n+1) \rfloor`-th smallest of the
      :math:`\xi^-_i(x)` (equivalently minus the
      :math:`\lceil (1-\alpha)(n+1) \rceil`-th smallest of
      :math:`-\xi^-_i(x)`);
    * upper end: the :math:`\lceil (1-\alpha)(n+1) \rceil`-th smallest of the
      :math:`\xi^+_i(x)`.

    Signed scores (the asymmetric variant, Barber et al. 2021 App. A; Pion &
    Vazquez 2024 eq. 14) use one sequence
    :math:`\xi_i(x) = \mu_{-i}(x) + R_i\, s_{-i}(x)` and split the
    miscoverage between the tails:

    * lower end: the :math:`\lfloor (\alpha/2)(n+1) \rfloor`-th smallest
      :math:`\xi_i(x)`;
    * upper end: the :math:`\lceil (1-\alpha/2)(n+1) \rceil`-th smallest
      :math:`\xi_i(x)` (Pion eq. 14 prints a floor here; the ceiling is the
      rank that carries the guarantee, see
      :class:`calibprob.calibrators.conformal.JackknifePlusGP` for the ``convention``
      switch).

    Guarantees for exchangeable data: jackknife+ covers with probability
    :math:`\ge 1 - 2\alpha = 2c - 1` (Barber et al. 2021, Thm. 1); CV+ with
    :math:`\ge 1 - 2\alpha - \min\{2(1 - 1/K)/(n/K + 1),\ (1 - K/n)/(K + 1)\}`
    (Thm. 4). Both need :math:`n \ge 1/\alpha - 1` (signed:
    :math:`n \ge 2/\alpha - 1`), else the interval is infinite and calibprob
    raises.

``method="base"`` (the jackknife / cross-validation conformal, eq. 6 of Pion)
    :math:`\mu(x) \pm R_{(\lceil (1-\alpha)(n+1) \rceil)}\, s(x)` around the
    model fitted on all data (signed scores: the two tail ranks above). No
    finite-sample guarantee in general, but often the narrowest.

References
----------
Barber, R. F., Candès, E. J., Ramdas, A. and Tibshirani, R. J. (2021).
Predictive inference with the jackknife+. Annals of Statistics 49(1), 486–507.
Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
prediction, §2.4–2.5.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.estimator import BaseEstimator, check_not_predictive, clone
from calibprob._core.tables import record_columns
from calibprob._core.validation import check_choice, check_int
from calibprob.calibrators.conformal._intervals import (
    IntervalPredictor,
    as_regressor,
    check_enough_points,
    check_Xy,
    default_chunk_size,
    iter_chunks,
    lower_rank,
    order_statistic,
    predict_mean_std_chunked,
    resolve_levels,
    upper_rank,
)
from calibprob.calibrators.conformal.cqr import read_quantiles
from calibprob.calibrators.conformal.scores import CQRScore, Score, get_score, invert
from calibprob.calibrators.conformal.split import conformal_thresholds

__all__ = ["CrossConformalRegressor", "jackknife_plus_bounds"]


def jackknife_plus_ranks(levels: ArrayLike, n: int, *, symmetric: bool) -> tuple[list[int], list[int]]:
    r"""1-based ranks of the lower and upper jackknife+ ends among ``n`` values, one per level.

    Symmetric scores: the :math:`\lfloor \alpha(n+1) \rfloor`-th smallest :math:`\xi^-`
    and the :math:`\lceil (1-\alpha)(n+1) \rceil`-th smallest :math:`\xi^+`; signed
    scores: the :math:`\lfloor (\alpha/2)(n+1) \rfloor`-th and
    :math:`\lceil (1-\alpha/2)(n+1) \rceil`-th smallest :math:`\xi` (module docstring).
    Raises ``ValueError`` when ``n`` cannot resolve a level.
    """
    levels = np.asarray(levels, float)
    if symmetric:
        for c in levels:
            check_enough_points(c, n, what="training points")
        return [lower_rank(1.0 - c, n) for c in levels], [upper_rank(c, n) for c in levels]
    for c in levels:
        check_enough_points(c, n, what="training points", sides=2)
    a = (1.0 - levels) / 2.0
    return [lower_rank(ai, n) for ai in a], [upper_rank(1.0 - ai, n) for ai in a]


def jackknife_plus_bounds(
    mu_loo: ArrayLike,
    scale_loo: ArrayLike,
    scores: ArrayLike,
    confidence_levels: ArrayLike,
    *,
    symmetric: bool = True,
    chunk_size: int | None = None,
    mu_loo_upper: ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Jackknife+ interval ends from leave-out predictions at test points.

    Parameters
    ----------
    mu_loo : ndarray, shape (n, m)
        :math:`\mu_{-i}(x_j)`: row ``i`` is the model that did not see point ``i``.
    scale_loo : ndarray, shape (n, m) or broadcastable (e.g. scalar 1.0)
        :math:`s_{-i}(x_j)`, the score normaliser of that model at the test points.
    scores : ndarray, shape (n,)
        Leave-out scores :math:`R_i` (signed for ``symmetric=False``).
    confidence_levels : ndarray, shape (C,)
    symmetric : bool
    chunk_size : int, optional
        Test points (columns) per block; default keeps each ``n x chunk``
        temporary near 32 MB. The order statistics are exact selections, so
        the ends do not depend on the chunk size (tested bit for bit).
    mu_loo_upper : ndarray, shape (n, m), optional
        Centres of the upper sequence :math:`\xi^+` when they differ from those of
        the lower one (symmetric scores only): the CQR score's
        :math:`\hat q_{hi}^{-i}(x_j)`, with ``mu_loo`` the :math:`\hat q_{lo}^{-i}(x_j)`.
        Default: ``mu_loo`` for both.

    Returns
    -------
    lower, upper : ndarray, shape (m, C)
        Ranks as in the module docstring.
    """
    mu_loo = np.asarray(mu_loo, float)
    n, m = mu_loo.shape
    R = np.asarray(scores, float)[:, None]
    levels = np.asarray(confidence_levels, float)
    ranks_lo, ranks_hi = jackknife_plus_ranks(levels, n, symmetric=symmetric)
    scale_loo = np.broadcast_to(np.asarray(scale_loo, float), mu_loo.shape)
    mu_up_all = mu_loo if mu_loo_upper is None else np.asarray(mu_loo_upper, float)
    lower = np.empty((m, levels.size))
    upper = np.empty((m, levels.size))
    # column blocks: the xi sequences and the partition's copies are n x chunk, not n x m
    for sl in iter_chunks(m, default_chunk_size(4 * n, chunk_size)):
        mu, scale = mu_loo[:, sl], scale_loo[:, sl]
        if symmetric:
            # upper: ceil(c (n+1))-th smallest of xi+; lower: floor(alpha (n+1))-th smallest of xi-
            up = order_statistic(invert(mu_up_all[:, sl], scale, R), ranks_hi, axis=0)
            lo = order_statistic(invert(mu, scale, -R), ranks_lo, axis=0)
        else:
            both = order_statistic(invert(mu, scale, R), ranks_lo + ranks_hi, axis=0)
            lo, up = both[: len(levels)], both[len(levels) :]
        lower[sl], upper[sl] = lo.T, up.T
    return lower, upper


class CrossConformalRegressor(IntervalPredictor, BaseEstimator):
    r"""Jackknife, jackknife+ and CV+ around any refittable base regressor.

    ================================  ===============  ==========
    method                            ``cv``           ``method``
    ================================  ===============  ==========
    jackknife (Pion eq. 6)            ``"loo"``        ``"base"``
    jackknife+ (Barber et al. 2021)   ``"loo"``        ``"plus"``
    CV+ (Barber et al. 2021)          ``K`` (int)      ``"plus"``
    K-fold cross-conformal            ``K``            ``"base"``
    ================================  ===============  ==========

    The per-side rank conventions are written out in
    ``calibprob.calibrators.conformal.jackknife``: with :math:`\alpha = 1 - c`, the
    lower end is the :math:`\lfloor \alpha(n+1) \rfloor`-th smallest of
    :math:`\mu_{-i}(x) - R_i s_{-i}(x)` and the upper end the
    :math:`\lceil (1-\alpha)(n+1) \rceil`-th smallest of
    :math:`\mu_{-i}(x) + R_i s_{-i}(x)`; signed scores use
    :math:`\lfloor (\alpha/2)(n+1) \rfloor` and
    :math:`\lceil (1-\alpha/2)(n+1) \rceil` on one sequence.

    Parameters
    ----------
    estimator : base regressor or callable
        Refitted with ``calibprob._core.estimator.clone`` for every fold; a callable
        ``fit_predict(X_train, y_train, X_new) -> mu | (mu, sigma)`` is wrapped
        in :class:`~calibprob.calibrators.conformal.CallableRegressor`.
    method : {"plus", "base"}, default "plus"
    cv : "loo" or int, default "loo"
        Leave-one-out (jackknife) or ``K``-fold (CV+), ``2 <= K <= n``.
    score : {"absolute", "normalized", "signed", "signed-absolute", "cqr"} or Score
        ``"cqr"`` (or a :class:`~calibprob.calibrators.conformal.CQRScore`): CQR inside
        jackknife+ / CV+ (``method="plus"`` only). Each refit's predictive Dataset
        (``predict``) gives the quantile pair at :math:`\alpha/2, 1 - \alpha/2`, the
        leave-out score is :math:`E_i = \max(\hat q_{lo}^{-i}(x_i) - y_i,\ y_i - \hat q_{hi}^{-i}(x_i))`
        (Romano et al. 2019) and the interval
        :math:`[\,q_{\lfloor\alpha(n+1)\rfloor}\{\hat q_{lo}^{-i}(x) - E_i\},\
        q_{\lceil(1-\alpha)(n+1)\rceil}\{\hat q_{hi}^{-i}(x) + E_i\}\,]`
        (Barber et al. 2021's ranks; with the absolute residual in place of :math:`E_i`
        it is jackknife+). Its coverage guarantee is jackknife+'s, :math:`\ge 1 - 2\alpha`:
        Barber et al.'s Thm. 1 holds for any score symmetric in the training points.
        Normalised-score parameters (Pion eq. 9).
    confidence_level : float or sequence, default 0.9
    random_state : int or numpy.random.Generator, optional
        Shuffles the ``K`` folds (unused for ``"loo"``).
    chunk_size : int, optional
        Test points per chunk; default keeps the ``n x chunk`` temporaries near 32 MB.

    Attributes
    ----------
    estimators_ : list
        The ``K`` (or ``n``) leave-out models.
    fold_of_ : ndarray of int, shape (n,)
        Index into ``estimators_`` of the model that did not see each point.
    scores_ : ndarray, shape (n,)
        Leave-out scores :math:`R_i` in training order (``score="cqr"``: shape
        ``(n, C)``, the :math:`E_i` at each of the constructor's ``C`` levels; other
        levels are scored from the stored leave-out predictives when asked for).
    estimator_ : the model fitted on all data (``method="base"`` only)

    Notes
    -----
    All ``K`` leave-out models are kept (as MAPIE does): memory is ``K``
    times one fitted model, e.g. 500 exact-GP factorisations of 500 x 500 for
    the jackknife+ of a GP with n = 500 (about 1 GB). For GPs use
    :class:`~calibprob.calibrators.conformal.JackknifePlusGP`, which needs no refit and
    stores one factorisation. Test points are processed in chunks, so the
    ``n x n_test`` leave-out predictions are never held at once.

    References
    ----------
    Barber et al. (2021), Annals of Statistics 49(1); Pion & Vazquez (2024) §2.4–2.5;
    Romano, Patterson & Candès (2019), Conformalized quantile regression, NeurIPS 32 (``score="cqr"``).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(size=(200, 1)); y = 2.0 * X[:, 0] + rng.normal(size=200)
    >>> cvplus = calibprob.CrossConformalRegressor(estimator=calibprob.LinearRegression(), method="plus",
    ...                                            cv=5, confidence_level=0.9, random_state=0).fit(X[:100], y[:100])
    >>> iv = cvplus.predict_interval(X[100:])
    >>> coverage = float(np.mean((iv["lower"] <= y[100:]) & (y[100:] <= iv["upper"])))
    >>> bool(coverage > 0.75)
    True
    """

    def __init__(
        self,
        *,
        estimator: Any = None,
        method: str = "plus",
        cv: int | str = "loo",
        score: str | Score = "absolute",
        beta: float = 1.0,
        eps: float = 0.0,
        confidence_level: ArrayLike = 0.9,
        random_state: int | np.random.Generator | None = None,
        chunk_size: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.method = method
        self.cv = cv
        self.score = score
        self.beta = beta
        self.eps = eps
        self.confidence_level = confidence_level
        self.random_state = random_state
        self.chunk_size = chunk_size

    def _folds(self, n: int) -> list[np.ndarray]:
        if isinstance(self.cv, str):
            check_choice(self.cv, "cv", ("loo",))
            return [np.array([i]) for i in range(n)]
        K = check_int(self.cv, "cv", minimum=2)
        if K > n:
            raise ValueError(f"cv must be <= the number of training points ({n}); got {K}. Use cv='loo'.")
        perm = np.random.default_rng(self.random_state).permutation(n)
        return [np.sort(f) for f in np.array_split(perm, K)]

    def _setup(self, X: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray, Score, Any, list[np.ndarray]]:
        """Validated ``(X, y, score, base, folds)`` of a fit (every check of :meth:`fit`)."""
        check_choice(self.method, "method", ("plus", "base"))
        levels, _ = resolve_levels(self.confidence_level)
        score = _resolve_score(self.score, beta=self.beta, eps=self.eps)
        if _is_cqr(score) and self.method != "plus":
            raise ValueError(
                f"score='cqr' is CQR inside jackknife+ / CV+ and needs method='plus'; got method={self.method!r}. "
                "Use method='plus', or calibprob.ConformalizedQuantileRegression for split CQR."
            )
        check_not_predictive(X, self)
        record_columns(self, X)
        X, y = check_Xy(X, y, min_length=2)
        for c in levels:
            check_enough_points(c, y.size, what="training points", sides=1 if score.symmetric else 2)
        return X, y, score, as_regressor(self.estimator), self._folds(y.size)

    def n_refits(self, n: int) -> int:
        """How many independent refits :meth:`fit` makes on ``n`` points: one per fold, plus the all-data model of ``method="base"``.

        With :meth:`fit_refit` and :meth:`fit_from_refits` they let a scheduler run
        the refits as separate tasks (``calibprob compare`` does, at method
        granularity); :meth:`fit` runs the same code in order.

        Parameters
        ----------
        n : int
            Number of training points.

        Returns
        -------
        int
        """
        n = check_int(n, "n (training points)", minimum=2)
        k = n if isinstance(self.cv, str) else check_int(self.cv, "cv", minimum=2)
        return k + (self.method == "base")

    def fit_refit(self, X: ArrayLike, y: ArrayLike, k: int) -> tuple:
        """Refit ``k`` of :meth:`fit`: ``(index, scores, model)``, a pure function of ``X, y, k``.

        Refit ``k < K`` is the model without fold ``k``, its leave-out points' indices
        and their scores; ``k == K`` (``method="base"`` only) the model on all points
        (index and scores None). Folds of an integer ``cv`` are shuffled by
        ``random_state``, which must then be an int, so every call sees the same folds.

        Parameters
        ----------
        X : array_like, shape (n, d)
        y : array_like, shape (n,)
        k : int
            ``0 <= k < n_refits(n)``.

        Returns
        -------
        tuple
            ``(ndarray of int or None, ndarray or None, fitted model)``; hand the
            list of every ``k`` to :meth:`fit_from_refits`.

        Raises
        ------
        ValueError
            If ``k`` is out of range, or ``cv`` is an int and ``random_state`` is not an int.
        """
        if not isinstance(self.cv, str) and not isinstance(self.random_state, (int, np.integer)):
            raise ValueError(
                f"fit_refit needs an int random_state when cv is a number of folds (got {self.random_state!r}), "
                "so that every refit sees the same folds; pass e.g. random_state=0."
            )
        X, y, score, base, folds = self._setup(X, y)
        k = check_int(k, "k (refit index)", minimum=0)
        if k > len(folds) - (self.method != "base"):
            raise ValueError(f"k must be < n_refits(n) = {self.n_refits(y.size)}; got {k}.")
        return self._refit(X, y, score, base, folds, k)

    def _refit(self, X: np.ndarray, y: np.ndarray, score: Score, base: Any, folds: list[np.ndarray], k: int) -> tuple:
        if k == len(folds):  # method="base": the model on every point
            return None, None, clone(base).fit(X, y)
        idx = folds[k]
        mask = np.ones(y.size, dtype=bool)
        mask[idx] = False
        est = clone(base).fit(X[mask], y[mask])
        if _is_cqr(score):  # the leave-out predictive: its quantile pair is read per level (_cqr_scores)
            pred = _predictive(est, X[idx])
            read_quantiles(pred, resolve_levels(self.confidence_level)[0], median=False)  # refuse a missing level now
            return idx, (y[idx], pred), est
        mu, sigma = predict_mean_std_chunked(est, X[idx], need_sigma=score.needs_sigma, chunk_size=self.chunk_size)
        return idx, score.score(y[idx], mu, sigma), est

    def fit(self, X: ArrayLike, y: ArrayLike) -> CrossConformalRegressor:
        """Fit one model per fold and compute the leave-out scores; returns ``self``.

        Parameters
        ----------
        X : array_like, shape (n, d)
        y : array_like, shape (n,)
        """
        X, y, score, base, folds = self._setup(X, y)
        refits = [self._refit(X, y, score, base, folds, k) for k in range(len(folds) + (self.method == "base"))]
        return self._assemble(y.size, score, folds, refits)

    def fit_from_refits(self, X: ArrayLike, y: ArrayLike, refits: Sequence[tuple]) -> CrossConformalRegressor:
        """Fitted from the results of :meth:`fit_refit` for every ``k`` in order: equal to :meth:`fit`.

        Parameters
        ----------
        X, y : array_like
            The data given to :meth:`fit_refit`.
        refits : sequence
            ``[fit_refit(X, y, k) for k in range(n_refits(n))]``, computed anywhere.

        Returns
        -------
        self
        """
        X, y, score, _, folds = self._setup(X, y)
        refits = list(refits)
        want = len(folds) + (self.method == "base")
        if len(refits) != want or any(
            not isinstance(r, (tuple, list)) or len(r) != 3 or not np.array_equal(r[0], f)
            for r, f in zip(refits, folds, strict=False)
        ):
            raise ValueError(
                f"refits must be the {want} results of fit_refit(X, y, k) for k = 0..{want - 1} on these X, y "
                f"with this cv and random_state; got {len(refits)} that do not match."
            )
        return self._assemble(y.size, score, folds, refits)

    def _assemble(
        self, n: int, score: Score, folds: list[np.ndarray], refits: Sequence[tuple]
    ) -> CrossConformalRegressor:
        fold_of = np.empty(n, dtype=int)
        for k, idx in enumerate(folds):
            fold_of[idx] = k
        self.estimators_ = [r[2] for r in refits[: len(folds)]]
        self.fold_of_ = fold_of
        self.score_ = score
        self.n_train_ = n
        if _is_cqr(score):
            # (indices, targets, predictive) of each fold's left-out points: E_i at any level
            self.loo_predictives_ = [(idx, r[1][0], r[1][1]) for idx, r in zip(folds, refits, strict=False)]
            self.scores_ = self._cqr_scores(resolve_levels(self.confidence_level)[0])
        else:
            R = np.empty(n)
            for k, idx in enumerate(folds):
                R[idx] = refits[k][1]
            self.scores_ = R
        self.estimator_ = refits[len(folds)][2] if self.method == "base" else None
        return self

    def _loo_predictions(self, Xc: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """``(K, m)`` means and score normalisers of the leave-out models at ``Xc``."""
        needs = self.score_.needs_sigma
        K, m = len(self.estimators_), Xc.shape[0]
        M = np.empty((K, m))
        S = np.empty((K, m)) if needs else None
        for k, est in enumerate(self.estimators_):
            mu, sigma = predict_mean_std_chunked(est, Xc, need_sigma=needs, chunk_size=self.chunk_size)
            M[k] = mu
            if S is not None:  # needs: S was allocated above
                S[k] = self.score_.scale(sigma)
        return M, S

    # the predict / predict_interval pair: IntervalPredictor's
    def _interval_sides(self) -> int:
        return 1 if self.score_.symmetric else 2

    def _method_name(self) -> str:
        name = {("loo", "plus"): "jackknife+", ("loo", "base"): "jackknife"}.get(
            (self.cv if isinstance(self.cv, str) else "cv", self.method),
            "cv+" if self.method == "plus" else "cv",
        )
        return f"{name}-{self.score_.name}"

    def _interval_chunk(self) -> int | None:
        return None if self.method == "base" else default_chunk_size(4 * self.n_train_, self.chunk_size)

    def _interval_attrs(self) -> dict:
        return {"n_train": self.n_train_, "n_folds": len(self.estimators_)}

    def _chunk_bounds(self, X: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._base_bounds(X, levels) if self.method == "base" else self._plus_bounds(X, levels)

    def _base_bounds(self, X: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Jackknife / CV: the full model's mean (and scale) plus the score quantiles."""
        lo, hi = conformal_thresholds(np.sort(self.scores_), levels, symmetric=self.score_.symmetric)
        mu, sigma = predict_mean_std_chunked(
            self.estimator_, X, need_sigma=self.score_.needs_sigma, chunk_size=self.chunk_size
        )
        return self.score_.bounds(mu, self.score_.scale(sigma), lo, hi)

    def _cqr_scores(self, levels: Sequence[float] | np.ndarray) -> np.ndarray:
        r"""``(n, C)`` leave-out CQR scores :math:`E_i` at ``levels``, from the stored leave-out predictives."""
        E = np.empty((self.n_train_, len(levels)))
        for idx, y_k, pred in self.loo_predictives_:
            q = read_quantiles(pred, levels, median=False)
            E[idx] = self.score_.score(y_k[:, None], q["lo"], q["hi"])
        return E

    def _cqr_plus_bounds(self, X: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""CQR-jackknife+: order statistics of :math:`\hat q_{lo}^{-i}(x) - E_i` and :math:`\hat q_{hi}^{-i}(x) + E_i`."""
        K, m = len(self.estimators_), X.shape[0]
        q_lo, q_hi = np.empty((K, m, len(levels))), np.empty((K, m, len(levels)))
        for k, est in enumerate(self.estimators_):
            q = read_quantiles(_predictive(est, X), levels, median=False)
            q_lo[k], q_hi[k] = q["lo"], q["hi"]
        E = self._cqr_scores(levels)
        lower, upper = np.empty((m, len(levels))), np.empty((m, len(levels)))
        for j, c in enumerate(levels):  # the pair and the scores differ per level
            lo, up = jackknife_plus_bounds(
                q_lo[self.fold_of_, :, j], 1.0, E[:, j], [c], symmetric=True, mu_loo_upper=q_hi[self.fold_of_, :, j]
            )
            lower[:, j], upper[:, j] = lo[:, 0], up[:, 0]
        return lower, upper

    def _plus_bounds(self, X: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Jackknife+ / CV+: each fold's prediction plus (minus) its scores, order statistics over folds."""
        if _is_cqr(self.score_):
            return self._cqr_plus_bounds(X, levels)
        M, S = self._loo_predictions(X)
        mu_loo = M[self.fold_of_]
        scale_loo = 1.0 if S is None else S[self.fold_of_]
        return jackknife_plus_bounds(mu_loo, scale_loo, self.scores_, levels, symmetric=self.score_.symmetric)


def _is_cqr(score: Score) -> bool:
    return getattr(score, "needs_quantiles", False)


def _resolve_score(score: str | Score, *, beta: float, eps: float) -> Score:
    """:func:`get_score`, plus ``"cqr"`` (jackknife+ / CV+ only: the other rules have no quantile path)."""
    if isinstance(score, str) and score == "cqr":
        return CQRScore()
    return get_score(score, beta=beta, eps=eps)


def _predictive(est: Any, X: np.ndarray) -> xr.Dataset:
    """The refit's predictive Dataset at ``X``: ``score="cqr"`` reads its quantile pair."""
    pred = est.predict(X)
    if not hasattr(pred, "calib"):
        raise ValueError(
            f"score='cqr' reads the quantile pair from each refit's predictive Dataset, but "
            f"{type(est).__name__}.predict returned {type(pred).__name__}, which has no quantiles. Use a base whose "
            "predict returns a predictive Dataset (e.g. calibprob.LinearRegression()) or score='absolute'."
        )
    return pred
