"""Seeded train / calibrate / test splits and a standardiser fitted on the training part.

Calibrators need three disjoint parts: the base model is fitted on *train*,
the calibration map on *calibrate*, and every metric is computed on *test*.
Standardisation statistics come from the training part only, so that nothing
about the calibration or test data leaks into the model.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.alignment import align_by_label
from calibprob._core.estimator import BaseEstimator, check_is_fitted
from calibprob._core.labels import read_labels
from calibprob._core.validation import check_array, check_same_length
from calibprob.predictive._common import CalibprobWarning

__all__ = ["train_calibrate_test_split", "Standardizer"]

_PART_NAMES = {2: ("train", "test"), 3: ("train", "calibrate", "test")}


def _check_fractions(fractions: ArrayLike) -> np.ndarray:
    try:
        fr = np.asarray(fractions, dtype=float)
    except (TypeError, ValueError) as err:
        raise TypeError(f"fractions must be a sequence of 2 or 3 numbers; got {fractions!r}.") from err
    if fr.ndim != 1 or fr.size not in (2, 3):
        raise ValueError(
            f"fractions must have 2 entries (train, test) or 3 (train, calibrate, test); "
            f"got {fr.size if fr.ndim == 1 else fr.shape}: {fractions!r}. "
            "E.g. fractions=(0.6, 0.2, 0.2)."
        )
    if not np.isfinite(fr).all() or (fr <= 0).any():
        raise ValueError(
            f"fractions must all be > 0 (every part non-empty); got {tuple(fr.tolist())}. "
            "E.g. fractions=(0.6, 0.2, 0.2)."
        )
    if not np.isclose(fr.sum(), 1.0, rtol=0.0, atol=1e-9):
        raise ValueError(
            f"fractions must sum to 1; got {' + '.join(f'{f:g}' for f in fr)} = {fr.sum():g}. "
            "E.g. fractions=(0.6, 0.2, 0.2)."
        )
    return fr


def _allocate(n: int, fr: np.ndarray) -> np.ndarray:
    """Part sizes summing to n, by the largest-remainder rule (closest to n * fractions)."""
    exact = fr * n
    counts = np.floor(exact).astype(int)
    short = n - counts.sum()
    # ties broken by position (train first), so the rule is deterministic
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[:short]] += 1
    return counts


def _n_obs(data: Any) -> int:
    if isinstance(data, (xr.Dataset, xr.DataArray)):
        if "obs" not in data.dims:
            raise ValueError(
                f"data must have an 'obs' dimension; got dims {tuple(data.dims)}. "
                "Use calibprob.datasets.load_dataset / load_csv, or rename your sample dimension to 'obs'."
            )
        return int(data.sizes["obs"])
    if isinstance(data, np.ndarray):
        if data.ndim == 0:
            raise ValueError("data must have at least one dimension (obs on axis 0); got a scalar.")
        return data.shape[0]
    if isinstance(data, (tuple, list)):
        if not data:
            raise ValueError("data must not be an empty sequence; pass (X, y).")
        arrays = {f"data[{i}]": np.asarray(a) for i, a in enumerate(data)}
        for key, a in arrays.items():
            if a.ndim == 0:
                raise ValueError(f"{key} must have at least one dimension (obs on axis 0); got a scalar.")
        return check_same_length(**arrays)
    raise TypeError(
        f"data must be an xarray.Dataset/DataArray with an 'obs' dimension, an array, or a tuple "
        f"of arrays such as (X, y); got {type(data).__name__}."
    )


def _take(data: Any, idx: np.ndarray) -> Any:
    if isinstance(data, (xr.Dataset, xr.DataArray)):
        return data.isel(obs=idx)
    if isinstance(data, np.ndarray):
        return data[idx]
    return tuple(np.asarray(a)[idx] for a in data)


def train_calibrate_test_split(
    data: Any, fractions: Sequence[float] = (0.6, 0.2, 0.2), *, seed: int | None, stratify: Any = None, time: Any = None
) -> dict:
    """Split data at random into train / calibrate / test (or train / test) parts.

    Parameters
    ----------
    data : xarray.Dataset, xarray.DataArray, ndarray or tuple of arrays
        A Dataset/DataArray with dimension ``obs`` (e.g. from
        :func:`~calibprob.datasets.load_dataset`), one array, or a tuple of
        arrays with observations on axis 0 and a common length, e.g. ``(X, y)``.
    fractions : sequence of 2 or 3 floats, default (0.6, 0.2, 0.2)
        Fractions of the observations in (train, calibrate, test), or in
        (train, test). Each must be > 0 and they must sum to 1.
    seed : int, numpy.random.SeedSequence or numpy.random.Generator
        Seed of the random permutation (required, so every split is reproducible).
    stratify : array_like or str, optional
        One group label per observation, or the name of an ``obs`` coordinate or variable of
        a Dataset (e.g. ``"group"``, as :func:`~calibprob.datasets.load_dataset` with
        ``groups=`` makes). Each group is split on its own with the same fractions
        (largest-remainder rule per group), so every group with at least
        ``ceil(1 / min(fractions))`` rows gets rows in every part, in proportion: what
        a Mondrian (group-conditional) calibrator needs, :func:`calibprob.min_group_size <calibprob.calibrators.conformal.min_group_size>`
        calibration rows per group. A group too small for a part is named in one
        :class:`~calibprob.CalibprobWarning` (its rows go to the earlier parts, train first).
        Labels are read by the package's label reader (a missing label refused with its rows;
        ``1`` and ``"1"`` are different groups and refused together); a Series or DataArray
        carrying row labels is aligned to a Dataset's ``obs`` coordinate (refused when they
        differ), a plain array read by position.
    time : array_like or str, optional
        With ``stratify``: one sortable time stamp per observation (or the name of a coordinate
        or variable). Each group is then split in time order instead of at random: its
        earliest rows train, the next calibrate, the latest test (a forecast's split, no
        future row in an earlier part). Ties keep the data's order.

    Returns
    -------
    dict
        Keys ``"train"``, ``"calibrate"``, ``"test"`` (or ``"train"``, ``"test"``),
        in that order. Values have the type of ``data``: Datasets keep their
        original ``obs`` coordinate (so each row can be traced back); a tuple
        input gives tuples in the same order. Within each part the
        observations keep their original order.

    Raises
    ------
    ValueError
        If ``fractions`` do not have 2 or 3 entries, are not all positive, do
        not sum to 1, or if some part would be empty for this number of
        observations (the message says how many are needed).

    Notes
    -----
    Part sizes are the integers closest to :math:`n f_k` that sum to :math:`n`
    (largest-remainder rule), e.g. 506 rows with (0.6, 0.2, 0.2) give
    304 / 101 / 101.

    References
    ----------
    Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
    processes. NeurIPS (60/20/20 splits; 64/16/20 for Boston and yacht).

    Examples
    --------
    >>> from calibprob.datasets import load_dataset
    >>> parts = train_calibrate_test_split(load_dataset("boston"), seed=0)
    >>> {k: v.sizes["obs"] for k, v in parts.items()}
    {'train': 304, 'calibrate': 101, 'test': 101}
    """
    fr = _check_fractions(fractions)
    n = _n_obs(data)
    names = _PART_NAMES[fr.size]
    if stratify is not None:
        return _stratified(data, fr, n, names, seed, stratify, time)
    if time is not None:
        raise ValueError("time is given without stratify; pass stratify= (the group column) with time=, or neither.")
    counts = _allocate(n, fr)
    if (counts == 0).any():
        needed = int(np.ceil(1.0 / fr.min() - 1e-9))
        raise ValueError(
            f"data has {n} observations, too few for fractions {tuple(fr.tolist())}: the "
            f"{names[int(np.argmin(counts))]!r} part would be empty. Pass at least {needed} "
            "observations or larger fractions."
        )
    perm = np.random.default_rng(seed).permutation(n)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    return {name: _take(data, np.sort(perm[bounds[k] : bounds[k + 1]])) for k, name in enumerate(names)}


def _column(data: Any, value: Any, name: str, n: int) -> np.ndarray:
    """``value`` as one entry per observation: an array, or a coordinate / variable of a Dataset."""
    if isinstance(value, str):
        if not isinstance(data, xr.Dataset) or value not in data.variables:
            have = sorted(map(str, data.variables)) if isinstance(data, xr.Dataset) else []
            raise ValueError(
                f"{name}={value!r} is not a coordinate or variable of data (it has {have}); pass one of those "
                f"names, or the {n} labels themselves."
            )
        out = np.asarray(data[value].values)
    else:
        # a Series / DataArray carrying row labels is aligned to the data's obs coordinate, or refused
        rows = data.indexes.get("obs") if isinstance(data, (xr.Dataset, xr.DataArray)) else None
        value = align_by_label(value, rows, name, whose="data")
        if name == "stratify" and np.ndim(value) == 1 and np.shape(value)[0] == n:
            # group labels by the package's one reader: missing refused, 1 and "1" never merged
            return read_labels(value.values if isinstance(value, xr.DataArray) else value, name)
        out = np.asarray(value)
    if out.shape != (n,):
        raise ValueError(f"{name} must hold one entry per observation ({n}); got shape {out.shape}. Pass {n} entries.")
    if name == "stratify":
        out = read_labels(out, name)
    return out


def _stratified(data: Any, fr: np.ndarray, n: int, names: tuple, seed: int | None, stratify: Any, time: Any) -> dict:
    """Each group split on its own (at random, or in ``time`` order); groups too small for a part warned."""
    labels = _column(data, stratify, "stratify", n)
    stamps = None if time is None else _column(data, time, "time", n)
    uniq, codes = np.unique(labels, return_inverse=True)
    rng = np.random.default_rng(seed)
    parts: list[list[np.ndarray]] = [[] for _ in names]
    short = []
    for k in range(uniq.size):
        rows = np.flatnonzero(codes == k)
        # random order per group from one generator (groups in sorted order: deterministic), or time order
        rows = rows[np.argsort(stamps[rows], kind="stable")] if stamps is not None else rng.permutation(rows)
        counts = _allocate(rows.size, fr)
        if (counts == 0).any():
            short.append(
                (
                    uniq[k].item() if hasattr(uniq[k], "item") else uniq[k],
                    rows.size,
                    [names[j] for j in np.flatnonzero(counts == 0)],
                )
            )
        bounds = np.concatenate([[0], np.cumsum(counts)])
        for j in range(len(names)):
            parts[j].append(rows[bounds[j] : bounds[j + 1]])
    idx = [np.sort(np.concatenate(p)) for p in parts]
    empty = [names[j] for j, p in enumerate(idx) if p.size == 0]
    if empty:
        raise ValueError(
            f"the {empty[0]!r} part would be empty: every group of stratify has too few rows for fractions "
            f"{tuple(fr.tolist())}. Pass larger groups, larger fractions, or no stratify."
        )
    if short:
        _warn_short(short, fr)
    return {name: _take(data, idx[j]) for j, name in enumerate(names)}


def _warn_short(short: list, fr: np.ndarray) -> None:
    """One warning naming every group too small to reach a part."""
    text = "; ".join(f"group {g!r} ({m} row(s)) has no {', '.join(p)} row" for g, m, p in short[:20])
    more = f"; and {len(short) - 20} more" if len(short) > 20 else ""
    warnings.warn(
        f"{len(short)} group(s) too small for every part of the split {tuple(fr.tolist())}: {text}{more}. "
        f"A group needs {int(np.ceil(1.0 / fr.min() - 1e-9))} rows to reach every part; merge small groups or "
        "use a Mondrian fallback for them.",
        CalibprobWarning,
        stacklevel=4,
    )


class Standardizer(BaseEstimator):
    r"""Centre and scale the features and the target with training statistics only.

    .. math::

        \tilde x_j = \frac{x_j - \bar x_j}{s_j}, \qquad
        \tilde y = \frac{y - \bar y}{s_y}, \qquad
        \tilde\sigma = \frac{\sigma}{s_y},

    with means and (population, ``ddof=0``) standard deviations of the
    training part. A constant column gets :math:`s_j = 1` (it is only centred).

    Parameters
    ----------
    with_X : bool, default True
        Standardise the features.
    with_y : bool, default True
        Standardise the target (and predictive scales).

    Attributes
    ----------
    X_mean_, X_scale_ : ndarray, shape (d,)
        Feature means and scales (0 and 1 when ``with_X=False``).
    y_mean_, y_scale_ : float
        Target mean and scale (0 and 1 when ``with_y=False``).
    n_features_in_ : int
        Number of features seen in ``fit``.

    Notes
    -----
    **Metrics on the standardised scale.** Capone et al. (2023) report every
    metric on the standardised target. Quantile levels, PIT values, coverage,
    ECE and the miscalibration area do not change under this affine map;
    RMSE, interval widths, predictive STD, CRPS and the pinball loss are
    divided by :math:`s_y`; densities are multiplied by :math:`s_y`, so

    .. math::

        \mathrm{NLL}_{\text{original}} = \mathrm{NLL}_{\text{standardised}} + \log s_y .

    Use :meth:`inverse_transform_nll` to move an NLL back to the data's units.

    References
    ----------
    Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
    processes. NeurIPS.

    Examples
    --------
    >>> from calibprob.datasets import load_dataset, train_calibrate_test_split
    >>> parts = train_calibrate_test_split(load_dataset("concrete"), seed=1)
    >>> sc = Standardizer().fit(parts["train"])
    >>> scaled = {k: sc.transform(v) for k, v in parts.items()}
    """

    def __init__(self, *, with_X: bool = True, with_y: bool = True) -> None:
        self.with_X = with_X
        self.with_y = with_y

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any = None) -> Standardizer:
        """Learn means and scales from the training part.

        Parameters
        ----------
        X : xarray.Dataset or array_like, shape (n, d)
            A Dataset with ``X(obs, feature)`` and optionally ``y(obs)`` (then
            ``y`` must be None), or the feature matrix.
        y : array_like, shape (n,), optional
            The training target; without it only the features are fitted
            (``y_mean_ = 0``, ``y_scale_ = 1``).

        Returns
        -------
        self
        """
        X_arr, y_arr = self._unpack(X, y, fitted=False)
        if self.with_X:
            self.X_mean_ = X_arr.mean(axis=0)
            self.X_scale_ = _safe_scale(X_arr.std(axis=0), self.X_mean_)
        else:
            self.X_mean_ = np.zeros(X_arr.shape[1])
            self.X_scale_ = np.ones(X_arr.shape[1])
        if self.with_y and y_arr is not None:
            self.y_mean_ = float(y_arr.mean())
            self.y_scale_ = float(_safe_scale(np.atleast_1d(y_arr.std()), self.y_mean_)[0])
        else:
            self.y_mean_, self.y_scale_ = 0.0, 1.0
        self.n_features_in_ = X_arr.shape[1]
        return self

    def _unpack(self, X: Any, y: Any, *, fitted: bool) -> tuple[Any, Any]:
        if isinstance(X, xr.Dataset):
            if y is not None:
                raise ValueError("y must be None when X is a Dataset (its 'y' variable is used); got an array.")
            if "X" not in X:
                raise ValueError(f"X must hold a variable 'X(obs, feature)'; got variables {list(X.data_vars)}.")
            X_arr = check_array(X["X"].transpose("obs", ...).values, "X", ndim=2)
            y_arr = check_array(X["y"].values, "y", ndim=1) if "y" in X else None
        else:
            X_arr = check_array(X, "X", ndim=2)
            y_arr = None if y is None else check_array(y, "y", ndim=1)
        if y_arr is not None:
            check_same_length(X=X_arr, y=y_arr)
        if fitted:
            self._check_width(X_arr)
        return X_arr, y_arr

    def _check_width(self, X_arr: np.ndarray) -> None:
        check_is_fitted(self, "X_mean_", method="fit")
        if X_arr.shape[1] != self.n_features_in_:
            raise ValueError(f"X must have {self.n_features_in_} features (as in fit); got {X_arr.shape[1]}.")

    # ------------------------------------------------------------ features
    def transform_X(self, X: ArrayLike) -> np.ndarray:
        """Standardised features, shape (n, d)."""
        X_arr = check_array(X, "X", ndim=2)
        self._check_width(X_arr)
        return (X_arr - self.X_mean_) / self.X_scale_

    def inverse_transform_X(self, X: ArrayLike) -> np.ndarray:
        """Features back in the original units, shape (n, d)."""
        X_arr = check_array(X, "X", ndim=2)
        self._check_width(X_arr)
        return X_arr * self.X_scale_ + self.X_mean_

    # -------------------------------------------------------------- target
    def transform_y(self, y: ArrayLike) -> np.ndarray:
        """Standardised target (any shape): :math:`(y - \\bar y)/s_y`."""
        check_is_fitted(self, "y_scale_", method="fit")
        return (np.asarray(y, dtype=float) - self.y_mean_) / self.y_scale_

    def inverse_transform_y(self, y: ArrayLike) -> np.ndarray:
        """Target (or quantiles, means) back in original units: :math:`\\tilde y s_y + \\bar y`."""
        check_is_fitted(self, "y_scale_", method="fit")
        return np.asarray(y, dtype=float) * self.y_scale_ + self.y_mean_

    def transform_scale(self, sigma: ArrayLike) -> np.ndarray:
        """A predictive scale (standard deviation, interval width) on the standardised scale: :math:`\\sigma/s_y`."""
        check_is_fitted(self, "y_scale_", method="fit")
        return np.asarray(sigma, dtype=float) / self.y_scale_

    def inverse_transform_scale(self, sigma: ArrayLike) -> np.ndarray:
        """A standardised predictive scale back in original units: :math:`\\tilde\\sigma s_y`."""
        check_is_fitted(self, "y_scale_", method="fit")
        return np.asarray(sigma, dtype=float) * self.y_scale_

    def inverse_transform_nll(self, nll: ArrayLike) -> Any:
        """An NLL computed on the standardised target, in original units: :math:`\\mathrm{NLL} + \\log s_y`."""
        check_is_fitted(self, "y_scale_", method="fit")
        return nll + np.log(self.y_scale_)

    # ------------------------------------------------------------- datasets
    def transform(self, X: Any, y: Any = None) -> Any:
        """Standardise a Dataset (``X`` and ``y``), or arrays.

        Parameters
        ----------
        X : xarray.Dataset or array_like, shape (n, d)
        y : array_like, shape (n,), optional (arrays only)

        Returns
        -------
        xarray.Dataset, ndarray or (ndarray, ndarray)
            A Dataset of the same layout (attribute ``standardized = 1``; the
            statistics are stored on ``y`` as ``y_mean``, ``y_scale``); or
            the standardised ``X`` (and ``y`` when given).
        """
        return self._apply(X, y, inverse=False)

    def inverse_transform(self, X: Any, y: Any = None) -> Any:
        """Undo :meth:`transform` (same input and output types)."""
        return self._apply(X, y, inverse=True)

    def _apply(self, X: Any, y: Any, *, inverse: bool) -> Any:
        fx = self.inverse_transform_X if inverse else self.transform_X
        fy = self.inverse_transform_y if inverse else self.transform_y
        if isinstance(X, xr.Dataset):
            if y is not None:
                raise ValueError("y must be None when X is a Dataset (its 'y' variable is used).")
            out = X.copy()
            Xda = X["X"].transpose("obs", "feature")
            out["X"] = Xda.copy(data=fx(Xda.values)).transpose(*X["X"].dims)
            if "y" in X:
                out["y"] = X["y"].copy(data=fy(X["y"].values))
                if inverse:
                    for key in ("y_mean", "y_scale"):
                        out["y"].attrs.pop(key, None)
                else:
                    out["y"].attrs.update(y_mean=self.y_mean_, y_scale=self.y_scale_)
            if inverse:
                out.attrs.pop("standardized", None)
            else:
                out.attrs["standardized"] = 1
            return out
        X_out = fx(X)
        if y is None:
            return X_out
        check_same_length(X=X_out, y=np.asarray(y))
        return X_out, fy(y)

    def transform_predictive(self, pred: xr.Dataset) -> xr.Dataset:
        """Move a predictive distribution (calibprob data contract) to the standardised scale.

        Location variables (``quantile``, ``mean``, ``loc``, ``median``) are
        centred and scaled; scale variables (``std``, ``scale``) are divided by
        :math:`s_y`; levels and every other variable are left unchanged.
        """
        return self._predictive(pred, inverse=False)

    def inverse_transform_predictive(self, pred: xr.Dataset) -> xr.Dataset:
        """Move a predictive distribution from the standardised scale back to original units.

        Quantiles, ``mean``, ``loc``, ``median`` map through :math:`\\tilde y s_y + \\bar y`;
        ``std`` and ``scale`` are multiplied by :math:`s_y`.
        """
        return self._predictive(pred, inverse=True)

    def _predictive(self, pred: xr.Dataset, *, inverse: bool) -> xr.Dataset:
        check_is_fitted(self, "y_scale_", method="fit")
        if not isinstance(pred, xr.Dataset):
            raise TypeError(f"pred must be an xarray.Dataset (a predictive distribution); got {type(pred).__name__}.")
        loc_f = self.inverse_transform_y if inverse else self.transform_y
        scale_f = self.inverse_transform_scale if inverse else self.transform_scale
        out = pred.copy()
        for var in ("quantile", "mean", "loc", "median"):
            if var in out:
                out[var] = out[var].copy(data=loc_f(out[var].values))
        for var in ("std", "scale"):
            if var in out:
                out[var] = out[var].copy(data=scale_f(out[var].values))
        return out


def _safe_scale(std: np.ndarray, mean: np.ndarray | float) -> np.ndarray:
    # a constant column would divide by zero (or by rounding noise of its mean):
    # centre it only, as scikit-learn does
    std = np.atleast_1d(np.asarray(std, dtype=float)).copy()
    tiny = (std == 0) | (std <= 10 * np.finfo(float).eps * np.abs(np.atleast_1d(mean)))
    std[tiny] = 1.0
    return std
