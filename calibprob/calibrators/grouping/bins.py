r"""Mondrian taxonomies: group labels from a categorical, or from quantile bins of a value.

A Mondrian calibrator needs a group per observation that does **not** depend on the
calibration targets (otherwise the within-group exchangeability behind its guarantee
breaks). :func:`bins` makes one from

* ``by="category"``: the labels of a categorical (a data column, a PyMC coordinate);
* ``by="feature"``: equal-frequency bins of a feature (a column of ``X``);
* ``by="sigma"``: equal-frequency bins of the base's predicted standard deviation — binning by
  difficulty, as crepes' ``MondrianCategorizer(de=...)``;
* ``by="mean"``: equal-frequency bins of the base's predicted mean (value).

The thresholds are *fitted* — fit them on data other than the calibration points, e.g. the
proper-training inputs or the base's predictions on them — and stored, so that
:meth:`Bins.apply` labels calibration and test points the same way. With :math:`B` bins the
interior thresholds are the empirical quantiles :math:`t_j = \hat F^{-1}(j/B)`,
:math:`j = 1, \dots, B-1` (observed values: NumPy's ``inverted_cdf`` rule, so no bin of tied
values is empty), the outer ones :math:`\mp\infty`, and a
value :math:`v` gets the bin :math:`\#\{j : t_j \le v\}`. Ties can merge thresholds: then fewer
than :math:`B` bins result, and :func:`bins` warns saying how many (it never returns fewer
bins than asked silently, unlike ``pandas.qcut(..., duplicates="drop")``).

References
----------
Boström, H., Johansson, U. and Löfström, T. (2021). Mondrian conformal predictive
distributions. *PMLR* 152 (binning by difficulty); crepes' ``MondrianCategorizer``.
"""

from __future__ import annotations

import warnings
from typing import Self

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.estimator import BaseEstimator, check_is_fitted
from calibprob._core.labels import refuse_kind_clash
from calibprob._core.validation import check_choice, check_groups, check_int
from calibprob.predictive import CalibprobWarning

__all__ = ["Bins", "bins"]

_BY = ("category", "feature", "sigma", "mean")


class Bins(BaseEstimator):
    r"""A fitted Mondrian taxonomy: :meth:`~Bins.fit` learns categories or thresholds, :meth:`~Bins.apply` labels.

    Parameters
    ----------
    by : {"category", "feature", "sigma", "mean"}, default "feature"
        What the groups are made of (module docstring).
    n_bins : int, default 10
        Equal-frequency bins (not used with ``by="category"``).
    column : int, optional
        The column of a 2-D ``X`` to bin (``by="feature"``); required when ``X`` has more
        than one column.

    Attributes
    ----------
    thresholds_ : ndarray, shape (B + 1,)
        Bin edges, ``-inf`` and ``inf`` outside (quantile bins).
    categories_ : ndarray, shape (K,)
        The categories seen at :meth:`fit` (``by="category"``).
    n_bins_ : int
        The number of bins that resulted (fewer than ``n_bins`` after ties).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> b = calibprob.bins(rng.normal(size=1000), by="feature", n_bins=4)
    >>> np.bincount(b.apply(rng.normal(size=2000))).size
    4

    References
    ----------
    Boström, Johansson & Löfström (2021), PMLR 152.
    """

    def __init__(self, *, by: str = "feature", n_bins: int = 10, column: int | None = None) -> None:
        self.by = by
        self.n_bins = n_bins
        self.column = column

    def _values(self, values: ArrayLike | xr.DataArray | xr.Dataset, name: str) -> np.ndarray:
        """The 1-D values the taxonomy reads from ``values``."""
        if self.by in ("sigma", "mean"):
            if not isinstance(values, xr.Dataset):
                raise TypeError(
                    f"bins(by={self.by!r}) reads the base's predictive Dataset ({name} = base.predict(X)); got "
                    f"{type(values).__name__}. Pass the prediction, or by='feature' for an array."
                )
            da = values.calib.std() if self.by == "sigma" else values.calib.mean()
            return np.asarray(da.values, float)
        arr = self._array(values)
        if arr.ndim == 2:
            if self.column is None and arr.shape[1] != 1:
                raise ValueError(f"{name} has {arr.shape[1]} columns; pass column= (the index of the one to bin).")
            col = 0 if self.column is None else check_int(self.column, "column", minimum=0)
            if col >= arr.shape[1]:
                raise ValueError(f"column must be below {arr.shape[1]} (the columns of {name}); got {col}.")
            arr = arr[:, col]
        if arr.ndim != 1:
            raise ValueError(f"{name} must be 1-D (or 2-D with column=); got shape {arr.shape}.")
        if self.by == "category":
            # pandas' own 1-D column (nullable text, Categorical) goes to the label reader as it is
            labels = values if isinstance(values, (pd.Series, pd.Categorical)) and arr.ndim == 1 else arr
            out = check_groups(labels, arr.shape[0], name=name)
            assert out is not None
            return out
        arr = arr.astype(float)
        if not np.isfinite(arr).all():
            raise ValueError(f"{name} has non-finite values; bin finite values only (impute or drop them first).")
        return arr

    def _array(self, values: ArrayLike | xr.DataArray) -> np.ndarray:
        """``values`` as an array; category labels keep each label's type (``[1, "1"]`` stays two kinds)."""
        if isinstance(values, xr.DataArray):
            values = values.values
        if self.by != "category":
            return np.asarray(values)
        if isinstance(values, (pd.Series, pd.DataFrame, pd.Categorical)):
            return np.asarray(values.astype(object) if not isinstance(values, pd.Categorical) else values, dtype=object)
        if isinstance(values, np.ndarray):
            return values
        # a list: np.asarray would turn [1, "1"] into two equal texts
        return np.asarray(values, dtype=object)

    def fit(self, values: ArrayLike | xr.DataArray | xr.Dataset) -> Self:
        """Learn the categories or the bin thresholds; returns ``self``.

        Parameters
        ----------
        values : array_like, xarray.DataArray or xarray.Dataset
            Labels (``by="category"``), a feature (1-D, or 2-D with ``column=``), or the base's
            predictive Dataset (``by="sigma"`` / ``"mean"``) — on data other than the
            calibration points (e.g. the proper-training set).

        Returns
        -------
        Bins

        Warns
        -----
        CalibprobWarning
            Ties left fewer distinct thresholds than ``n_bins`` asks for; the message says how
            many bins resulted.
        """
        check_choice(self.by, "by", _BY)
        v = self._values(values, "values")
        if self.by == "category":
            self.categories_ = np.unique(v)
            self.n_bins_ = int(self.categories_.size)
            return self
        n_bins = check_int(self.n_bins, "n_bins", minimum=1)
        if v.size < n_bins:
            raise ValueError(f"n_bins={n_bins} needs at least {n_bins} values to fit; got {v.size}. Use fewer bins.")
        inner = np.unique(np.quantile(v, np.arange(1, n_bins) / n_bins, method="inverted_cdf"))
        # a threshold equal to the smallest value leaves its lower bin empty: drop it too
        inner = inner[inner > v.min()]
        self.thresholds_ = np.concatenate([[-np.inf], inner, [np.inf]])
        self.n_bins_ = int(inner.size + 1)
        if self.n_bins_ < n_bins:
            warnings.warn(
                f"bins(by={self.by!r}, n_bins={n_bins}): tied values leave only {self.n_bins_} distinct bins. Use "
                "fewer bins, a value with more distinct levels, or by='category' for a discrete one.",
                CalibprobWarning,
                stacklevel=2,
            )
        return self

    def apply(self, values: ArrayLike | xr.DataArray | xr.Dataset) -> np.ndarray:
        """The group label of each value: its bin index ``0 .. n_bins_ - 1``, or its category.

        Parameters
        ----------
        values : array_like, xarray.DataArray or xarray.Dataset
            As at :meth:`fit` (calibration or test data).

        Returns
        -------
        ndarray, shape (n,)
            Integer bin indices, or the category labels.

        Raises
        ------
        ValueError
            A category not seen at :meth:`fit`.
        """
        check_is_fitted(self, "n_bins_", method="fit")
        v = self._values(values, "values")
        if self.by == "category":
            refuse_kind_clash(v, self.categories_, "values", "fit")
            unseen = np.setdiff1d(np.unique(v), self.categories_)
            if unseen.size:
                raise ValueError(
                    f"values holds {unseen.size} category(ies) not seen at fit: {unseen[:10].tolist()} (known: "
                    f"{self.categories_[:10].tolist()}). Fit on data with every category, or map the new ones."
                )
            return v
        return (np.searchsorted(self.thresholds_[1:-1], v, side="right")).astype(np.int64)


def bins(
    values: ArrayLike | xr.DataArray | xr.Dataset, *, by: str = "feature", n_bins: int = 10, column: int | None = None
) -> Bins:
    r"""A Mondrian taxonomy fitted on ``values``: ``bins(...).apply(x)`` gives the groups.

    Parameters
    ----------
    values : array_like, xarray.DataArray or xarray.Dataset
        What to fit the taxonomy on (see :meth:`Bins.fit`) — not the calibration points: the
        proper-training features or the base's prediction on them.
    by : {"category", "feature", "sigma", "mean"}, default "feature"
        A categorical; equal-frequency bins of a feature; of the base's predicted σ
        (difficulty); of its predicted mean.
    n_bins : int, default 10
    column : int, optional
        The column of a 2-D ``values`` to bin.

    Returns
    -------
    Bins
        Fitted; ``.apply(values)`` labels calibration and test data alike.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(1)
    >>> mu = rng.normal(size=500); sd = rng.uniform(0.5, 2.0, size=500)
    >>> taxonomy = calibprob.bins(calibprob.normal(mu, sd), by="sigma", n_bins=5)   # difficulty bins
    >>> taxonomy.apply(calibprob.normal([0.0, 0.0], [0.6, 1.9])).tolist()
    [0, 4]

    References
    ----------
    Boström, Johansson & Löfström (2021), PMLR 152; crepes' ``MondrianCategorizer``.
    """
    return Bins(by=by, n_bins=n_bins, column=column).fit(values)
