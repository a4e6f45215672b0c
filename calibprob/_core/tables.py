"""The one reader of tables (``X``): which column is which, and how many there are.

A model fitted on a pandas DataFrame learns its column *names* as well as its column *count*
(scikit-learn's ``feature_names_in_``). Taking a later table's columns by position would
silently predict from the wrong features when the same columns come in another order, or
under other names, so every base and every model-aware calibrator reads ``X`` through this
module:

* at fit, :func:`record_table` stores ``n_features_in_`` and, for a DataFrame whose column
  names are all strings, ``feature_names_in_`` (removed again when refitted on a plain array);
* at predict, :func:`check_table` refuses a DataFrame with reordered, renamed, missing or extra
  columns, listing the difference and the fix, and any table of another width, naming both
  widths, *before* any matrix product is formed (so no error comes from inside NumPy).

A plain array is read by position, as documented: it has no names to contradict. A DataFrame
given to a model fitted on a plain array is read by position too (scikit-learn warns there;
calibprob follows the array it was fitted on).

Examples
--------
>>> import numpy as np, pandas as pd, calibprob
>>> X = pd.DataFrame({"a": [0.0, 1.0, 2.0, 3.0], "b": [1.0, 0.0, 1.0, 3.0]})
>>> ols = calibprob.LinearRegression().fit(X, [0.1, 1.2, 1.9, 3.1])
>>> ols.feature_names_in_.tolist()
['a', 'b']
>>> try:
...     ols.predict(X[["b", "a"]])
... except ValueError as err:
...     print(str(err)[:52])
X has the fitted columns in another order (['b', 'a'
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import qr

from calibprob._core.validation import _short, check_array

__all__ = [
    "column_names",
    "record_feature_names",
    "check_feature_names",
    "check_width",
    "record_table",
    "check_table",
    "check_fitted_X",
    "record_columns",
    "check_columns",
    "dependent_columns",
    "adopt_columns",
    "column_rank",
]


def column_names(X: Any) -> np.ndarray | None:
    """The column names of a pandas DataFrame when they are all strings (an object array), else None.

    Non-string column labels (pandas' default ``RangeIndex`` of 0, 1, ...) carry no meaning
    beyond position, as in scikit-learn, so they are not recorded.
    """
    if not (hasattr(X, "columns") and hasattr(X, "iloc")):
        return None
    names = list(X.columns)
    if not names or not all(isinstance(c, str) for c in names):
        return None
    return np.asarray(names, dtype=object)


def record_feature_names(estimator: Any, X: Any) -> None:
    """At fit: set ``estimator.feature_names_in_`` from a DataFrame's string columns (or remove it).

    Examples
    --------
    >>> import pandas as pd, calibprob
    >>> X = pd.DataFrame({"a": [0.0, 1.0, 2.0, 3.0], "b": [1.0, 0.0, 1.0, 3.0]})
    >>> ols = calibprob.LinearRegression().fit(X, [0.1, 1.2, 1.9, 3.1])
    >>> ols.feature_names_in_.tolist()
    ['a', 'b']
    """
    names = column_names(X)
    if names is None:
        if "feature_names_in_" in vars(estimator):
            del estimator.feature_names_in_
    else:
        estimator.feature_names_in_ = names


def _difference(fitted: list, names: list) -> str:
    """``missing 'a'; not seen in fit 'c'`` (either part may be absent)."""
    have, want = set(names), set(fitted)
    missing = [c for c in fitted if c not in have]
    extra = [c for c in names if c not in want]
    parts = []
    if missing:
        parts.append(f"missing {', '.join(map(repr, missing))}")
    if extra:
        parts.append(f"not seen in fit {', '.join(map(repr, extra))}")
    return "; ".join(parts)


def check_feature_names(estimator: Any, X: Any, name: str = "X") -> None:
    """At predict: a DataFrame must have the columns seen in fit, in the same order.

    Plain arrays are accepted as they are (their columns are taken in fit's
    order); a DataFrame with reordered, missing, renamed or extra columns raises,
    because taking its columns by position would silently give other predictions.

    Raises
    ------
    ValueError
        Naming the missing, unexpected or reordered columns and the fix.
    """
    fitted = getattr(estimator, "feature_names_in_", None)
    names = column_names(X)
    if fitted is None or names is None or list(names) == list(fitted):
        return
    fix = f"Pass {name}[model.feature_names_in_] (the fitted columns: {_short(list(fitted))})."
    desc = _difference(list(fitted), list(names))
    if desc:
        raise ValueError(f"{name} has other columns than in fit ({desc}). {fix}")
    raise ValueError(
        f"{name} has the fitted columns in another order ({_short(list(names))}); taking them by position "
        f"would give wrong predictions. {fix}"
    )


def check_width(X: np.ndarray, n_features: int, name: str = "X", *, fitted: str = "the model was fitted") -> None:
    """Refuse a 2-D array whose number of columns is not ``n_features``, naming both."""
    if X.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D (rows x {int(n_features)} features) as in fit; got shape {X.shape}. "
            f"Pass a table with one row per point, e.g. {name}.reshape(-1, {int(n_features)})."
        )
    if X.shape[1] != int(n_features):
        raise ValueError(
            f"{name} has {X.shape[1]} features but {fitted} with {int(n_features)}. Pass the same columns as in fit."
        )


def record_table(estimator: Any, X: Any, name: str = "X", *, min_length: int = 1) -> np.ndarray:
    """At fit: ``X`` as a finite 2-D float array; records ``n_features_in_`` and the column names.

    Parameters
    ----------
    estimator : object
        Receives ``n_features_in_`` and (for a DataFrame with string columns) ``feature_names_in_``.
    X : array_like or pandas.DataFrame, shape (n, d)
    name : str
        The argument's name in messages.
    """
    arr = check_array(X, name, ndim=2, min_length=min_length)
    record_feature_names(estimator, X)
    estimator.n_features_in_ = int(arr.shape[1])
    return arr


def check_table(estimator: Any, X: Any, name: str = "X", *, min_length: int = 1) -> np.ndarray:
    """At predict: ``X`` with the names and the width the estimator was fitted with.

    Names first (:func:`check_feature_names`: a reordered DataFrame has the right width), then
    the width against ``estimator.n_features_in_`` when it was recorded; returns the float array.
    """
    check_feature_names(estimator, X, name)
    arr = check_array(X, name, ndim=2, min_length=min_length)
    n_features = getattr(estimator, "n_features_in_", None)
    if n_features is not None:
        check_width(arr, n_features, name)
    return arr


def check_fitted_X(estimator: Any, X: Any, name: str = "X") -> np.ndarray:
    """``X`` at predict time: a finite 2-D float array with the columns the estimator was fitted on.

    Checks the column names a DataFrame was fitted with (:func:`check_feature_names`) and the
    width against ``estimator.n_features_in_``; the caller checks it is fitted first.
    """
    check_feature_names(estimator, X, name)
    X = check_array(X, name, ndim=2)
    check_width(X, estimator.n_features_in_, name)
    return X


def record_columns(owner: Any, X: Any) -> None:
    """At fit of a wrapper (a model-aware calibrator): remember ``X``'s column names and width.

    The wrapper hands its estimator a plain array, which loses a DataFrame's names; so the
    wrapper itself keeps them (``feature_names_in_``, ``n_features_in_``) and
    :func:`check_columns` refuses a later table that contradicts them.
    """
    record_feature_names(owner, X)
    shape = np.shape(X)
    if len(shape) == 2:
        owner.n_features_in_ = int(shape[1])


def check_columns(owner: Any, X: Any, name: str = "X") -> None:
    """At predict of a wrapper: the names (for a DataFrame) and the width recorded by :func:`record_columns`."""
    check_feature_names(owner, X, name)
    n_features = getattr(owner, "n_features_in_", None)
    shape = np.shape(X)
    if n_features is not None and len(shape) == 2 and shape[1] != n_features:
        raise ValueError(
            f"{name} has {shape[1]} features but {type(owner).__name__} was fitted with {n_features}. "
            "Pass the same columns as in fit."
        )


#: Relative tolerance of :func:`dependent_columns` on unit-norm columns.
RANK_RTOL = 1e-10


def dependent_columns(A: np.ndarray, *, rtol: float = RANK_RTOL) -> np.ndarray:
    r"""Indices of the columns of ``A`` in the span of the columns kept *before* them (left to right).

    The decision is made on the column-scaled matrix: each column is divided by its largest
    magnitude and then by its Euclidean norm, so that it does not depend on the units of any
    one column (a column measured in 1e12 beside one measured in 1 is independent). Column
    :math:`j` is dependent when the norm of its part orthogonal to the kept columns, the last
    diagonal entry :math:`|r_{kk}|` of the QR factor of :math:`[A_{\text{kept}}, a_j]`, is at
    most ``rtol`` (a unit-norm column's residual lies in [0, 1]). A zero column is dependent,
    and once as many columns are kept as ``A`` has rows, every further column is (``n`` points
    span at most ``n`` dimensions: a QR of a wide block has no diagonal entry for it).

    Scanning in order makes the rule predictable: of two proportional columns the later one is
    named, an intercept given first is kept.

    Parameters
    ----------
    A : ndarray, shape (n, d)
    rtol : float
        Tolerance on the orthogonal residual of a unit-norm column.

    Returns
    -------
    ndarray of int
        The dependent columns, increasing.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.c_[np.ones(4), [1e12, 2e12, 0.0, 5e12], [2.0, 2.0, 2.0, 2.0]]
    >>> dependent_columns(A).tolist()
    [2]
    """
    A = np.asarray(A, dtype=float)
    n = A.shape[0]
    peak = np.max(np.abs(A), axis=0) if A.size else np.zeros(A.shape[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        scaled = np.where(peak > 0, A / np.where(peak > 0, peak, 1.0), 0.0)
    norms = np.linalg.norm(scaled, axis=0)
    kept: list[int] = []
    dep: list[int] = []
    for j in range(A.shape[1]):
        if norms[j] == 0 or len(kept) >= n:
            dep.append(j)
            continue
        cols = kept + [j]
        r = qr(scaled[:, cols] / norms[cols], mode="r")[0]
        (kept if abs(r[len(kept), len(kept)]) > rtol else dep).append(j)
    return np.asarray(dep, dtype=int)


def adopt_columns(owner: Any, estimator: Any) -> bool:
    """A wrapper around a *prefit* estimator takes the columns that estimator was fitted on.

    The wrapper hands the estimator plain arrays, so a DataFrame given to the wrapper is checked
    here against the estimator's ``feature_names_in_`` (and ``n_features_in_``) instead. Returns
    whether the estimator had column names to adopt; stale names of an earlier fit are removed.
    """
    names = getattr(estimator, "feature_names_in_", None)
    width = getattr(estimator, "n_features_in_", None)
    if "feature_names_in_" in vars(owner):
        del owner.feature_names_in_
    if names is not None:
        owner.feature_names_in_ = np.asarray(list(names), dtype=object)
    if isinstance(width, (int, np.integer)):
        owner.n_features_in_ = int(width)
    return names is not None


def column_rank(A: np.ndarray) -> int:
    """The numerical rank of ``A`` decided on its column-scaled copy (each column of unit norm).

    NumPy's ``matrix_rank`` compares singular values with a tolerance relative to the largest
    one, so a column in 1e12 beside a column in 1 makes the small one look dependent; scaling
    each column first (a zero column stays zero) makes the decision independent of units.
    """
    A = np.asarray(A, dtype=float)
    if A.size == 0:
        return 0
    peak = np.max(np.abs(A), axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        scaled = np.where(peak > 0, A / np.where(peak > 0, peak, 1.0), 0.0)
    norms = np.linalg.norm(scaled, axis=0)
    return int(np.linalg.matrix_rank(scaled / np.where(norms > 0, norms, 1.0)))
