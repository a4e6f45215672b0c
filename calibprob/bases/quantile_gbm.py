r"""A quantile gradient-boosting base: one scikit-learn ``HistGradientBoostingRegressor`` per level.

:class:`QuantileGradientBoosting` fits, for each level :math:`p` of ``levels``,
a boosted-tree model of the conditional :math:`p`-quantile by minimising the
pinball loss :math:`\rho_p(y - q) = \max\{p(y - q), (p - 1)(y - q)\}`
(scikit-learn's ``loss="quantile"``, ``quantile=p``), and predicts the
contract's quantile family (:func:`calibprob.from_quantiles`). Separately fitted
quantiles can cross; each predicted row is sorted (the monotone rearrangement
of Chernozhukov et al. 2010, which never increases the pinball loss), so the
Dataset always satisfies the contract, and the number of rows that needed it is
kept in ``attrs["n_rearranged"]``. It is the quantile base that conformalized
quantile regression (:class:`calibprob.ConformalizedQuantileRegression`)
calibrates; between and beyond its levels the contract's interpolation and tail
rule apply.

scikit-learn is an optional dependency (``pip install scikit-learn``), imported
when the model is fitted. The same model through the user-base route needs no
registration: ``docs/methods/cqr.md`` shows the factory.

References
----------
Koenker, R. and Bassett, G. (1978). Regression quantiles. Econometrica 46(1).
Friedman, J. H. (2001). Greedy function approximation: a gradient boosting
machine. Annals of Statistics 29(5).
Chernozhukov, V., Fernández-Val, I. and Galichon, A. (2010). Quantile and
probability curves without crossing. Econometrica 78(3).
"""

from __future__ import annotations

from typing import Any, Literal, Self, overload

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.estimator import BaseEstimator, check_is_fitted
from calibprob._core.tables import check_table, record_table
from calibprob._core.validation import check_array, check_int, check_levels, check_same_length
from calibprob.predictive import from_quantiles

__all__ = ["QuantileGradientBoosting", "GBM_LEVELS"]

#: Default levels: the median and the tails of central intervals at 50, 80, 90, 95 and 99 %.
GBM_LEVELS = np.array([0.005, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.975, 0.995])


def _hgb() -> type[Any]:
    try:
        # deferred: scikit-learn is an optional dependency, needed only by this base
        from sklearn.ensemble import HistGradientBoostingRegressor
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "QuantileGradientBoosting needs scikit-learn: pip install scikit-learn (or calibprob[gbm])."
        ) from err
    return HistGradientBoostingRegressor


class QuantileGradientBoosting(BaseEstimator):
    r"""Quantile regression by histogram gradient boosting, one model per level; predicts quantiles.

    Parameters
    ----------
    levels : array_like, optional
        Strictly increasing quantile levels in (0, 1) to fit (default ``GBM_LEVELS``).
    max_iter : int, default 100
        Boosting iterations per level.
    learning_rate : float, default 0.1
    max_leaf_nodes : int, default 31
    min_samples_leaf : int, default 20
    random_state : int, optional
        Seed of every per-level model (the same seed for all levels).

    Attributes
    ----------
    levels_ : ndarray, shape (L,)
    models_ : list of ``HistGradientBoostingRegressor``
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        The column names when fitted on a DataFrame with string columns; ``predict`` then
        refuses a DataFrame whose columns are reordered, renamed, missing or extra.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(size=(400, 1)); y = X[:, 0] + 0.1 * rng.normal(size=400)
    >>> gbm = QuantileGradientBoosting(levels=[0.05, 0.5, 0.95], random_state=0).fit(X, y)  # doctest: +SKIP
    >>> gbm.predict(X[:2])["quantile"].shape  # doctest: +SKIP
    (2, 3)

    References
    ----------
    Koenker & Bassett (1978); Friedman (2001); Chernozhukov et al. (2010).
    """

    def __init__(
        self,
        *,
        levels: ArrayLike | None = None,
        max_iter: int = 100,
        learning_rate: float = 0.1,
        max_leaf_nodes: int = 31,
        min_samples_leaf: int = 20,
        random_state: int | None = None,
    ) -> None:
        self.levels = levels
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_leaf = min_samples_leaf
        self.random_state = random_state

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Fit one boosted quantile model per level; returns ``self``.

        Parameters
        ----------
        X : array_like, shape (n, d)
        y : array_like, shape (n,)
        """
        levels = GBM_LEVELS if self.levels is None else check_levels(self.levels, "levels")
        X_in = X
        X = check_array(X, "X", ndim=2)
        y = check_array(y, "y", ndim=1)
        check_same_length(X=X, y=y)
        if not (np.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise ValueError(f"learning_rate must be > 0; got {self.learning_rate!r}. Pass e.g. 0.1.")
        HGB = _hgb()
        self.models_ = [
            HGB(
                loss="quantile",
                quantile=float(p),
                max_iter=check_int(self.max_iter, "max_iter", minimum=1),
                learning_rate=float(self.learning_rate),
                max_leaf_nodes=check_int(self.max_leaf_nodes, "max_leaf_nodes", minimum=2),
                min_samples_leaf=check_int(self.min_samples_leaf, "min_samples_leaf", minimum=1),
                random_state=self.random_state,
            ).fit(X, y)
            for p in levels
        ]
        self.levels_ = np.asarray(levels, float)
        record_table(self, X_in)  # n_features_in_ and a DataFrame's column names, checked at predict
        return self

    @overload
    def predict_quantiles(self, X: ArrayLike, *, return_n_rearranged: Literal[False] = False) -> np.ndarray: ...

    @overload
    def predict_quantiles(self, X: ArrayLike, *, return_n_rearranged: Literal[True]) -> tuple[np.ndarray, int]: ...

    def predict_quantiles(
        self, X: ArrayLike, *, return_n_rearranged: bool = False
    ) -> np.ndarray | tuple[np.ndarray, int]:
        r"""The fitted quantiles at ``self.levels_``, each row sorted (non-crossing), shape (n, L).

        The per-level models are fitted separately and their predictions can cross; each row is
        sorted (the monotone rearrangement :math:`\tilde q_{(1)} \le \dots \le \tilde q_{(L)}`
        of Chernozhukov et al. 2010, which never increases the pinball loss of any row).

        Parameters
        ----------
        X : array_like or pandas.DataFrame, shape (n, d)
            The fitted columns (by name for a DataFrame fitted on one).
        return_n_rearranged : bool, default False
            Also return how many rows crossed and were sorted.

        Returns
        -------
        q : ndarray, shape (n, L)
            Non-decreasing along each row.
        n_rearranged : int
            Only with ``return_n_rearranged=True``: the rows whose fitted quantiles crossed.
        """
        check_is_fitted(self, "models_", method="fit")
        X = check_table(self, X, "X")
        raw = np.column_stack([m.predict(X) for m in self.models_])
        crossed = int(np.any(np.diff(raw, axis=1) < 0, axis=1).sum())
        q = np.sort(raw, axis=1)
        return (q, crossed) if return_n_rearranged else q

    def predict(self, X: ArrayLike, *, levels: ArrayLike | None = None) -> xr.Dataset:
        """The quantile predictive Dataset at ``X``.

        Parameters
        ----------
        X : array_like, shape (n, d)
        levels : array_like, optional
            Levels of the returned Dataset; default the fitted levels (stored
            exactly). Other levels are read by the contract's interpolation.

        Returns
        -------
        xarray.Dataset
            ``family="quantile"``; ``attrs["n_rearranged"]``: rows whose fitted quantiles crossed and were sorted.
        """
        q, crossed = self.predict_quantiles(X, return_n_rearranged=True)
        pred = from_quantiles(q, self.levels_, method="quantile-gbm")
        if levels is not None:
            lv = check_levels(levels, "levels")
            if lv.shape != self.levels_.shape or not np.array_equal(lv, self.levels_):
                pred = from_quantiles(pred.calib.ppf(lv).values, lv, method="quantile-gbm")
        pred.attrs["n_rearranged"] = crossed
        return pred
