"""Validation of the contract: :func:`validate` and the interval family's test :func:`is_interval_family`."""

from __future__ import annotations

import numpy as np
import xarray as xr
from scipy import special

from calibprob._core.validation import check_confidence_levels, check_finite, check_levels, check_positive
from calibprob.predictive import _transformed as _tr
from calibprob.predictive._common import _check_finite_rows, _row_blocks, check_interval_ends
from calibprob.predictive._reach import check_reach


def validate(ds: xr.Dataset) -> xr.Dataset:
    r"""Check that ``ds`` follows the predictive-distribution contract; return it.

    Parameters
    ----------
    ds : xarray.Dataset
        A candidate predictive distribution.

    Returns
    -------
    xarray.Dataset
        ``ds`` itself, unchanged.

    Notes
    -----
    The interval family (``lower``/``upper`` over ``confidence_level``, ``attrs["family"] ==
    "interval"``; :func:`~calibprob.predictive.from_intervals`) is checked for its own contract: both ends with dims
    ``(obs, confidence_level)`` (or ``(obs,)`` with a scalar ``confidence_level`` coordinate),
    levels in (0, 1), no NaN (infinite ends allowed) and ``lower <= upper``.

    Raises
    ------
    ValueError
        Naming what is missing or wrong.

    References
    ----------
    The predictive-distribution contract and its interpolation rule (linear in
    :math:`\Phi^{-1}(p)`, Gaussian tails): :doc:`/concepts`.

    Examples
    --------
    >>> import xarray as xr, calibprob
    >>> pred = calibprob.validate(calibprob.normal([0.0], [1.0]))
    >>> try:
    ...     calibprob.validate(xr.Dataset())
    ... except ValueError:
    ...     print("not a predictive distribution")
    not a predictive distribution
    """
    if not isinstance(ds, xr.Dataset):
        raise TypeError(
            f"a predictive distribution must be an xarray.Dataset; got {type(ds).__name__}. "
            "Build one with calibprob.normal / from_quantiles / from_draws / from_cdf_grid."
        )
    if is_interval_family(ds):
        return _check_interval(ds)
    if "quantile" not in ds:
        raise ValueError(
            f"predictive Dataset needs a 'quantile' variable (or 'lower' and 'upper' for the interval "
            f"family); has {list(ds.data_vars)}."
        )
    if ds["quantile"].dims != ("obs", "level"):
        raise ValueError(
            f"'quantile' must have dims ('obs', 'level'); got {ds['quantile'].dims}. Use .transpose('obs', 'level')."
        )
    check_levels(ds["level"].values, "level coordinate")
    q = ds["quantile"].values
    # row blocks: the checks' temporaries stay O(_CHUNK x L) whatever the number of observations
    _check_finite_rows(q, "quantile")
    for sl in _row_blocks(q.shape[0]):
        if np.any(np.diff(q[sl], axis=1) < 0):
            raise ValueError("'quantile' decreases with level somewhere: quantiles must not cross.")
    if ds.attrs.get("family") == "normal" and "loc" in ds and "scale" in ds:
        _check_normal_agrees(ds, q)
    check_reach(ds)
    if ds.attrs.get("target_transform") not in (None, "", "none"):
        _check_transformed(ds, q)
    return ds


def is_interval_family(pred: object) -> bool:
    """Whether ``pred`` is the contract's interval family (``lower``/``upper``, no quantile function).

    Model-aware intervals-only calibrators mark their output with
    ``attrs["family"] == "interval"``; a Dataset with ``lower`` and ``upper``
    but neither ``quantile`` nor ``loc`` is read the same way.
    :func:`evaluate` gives such a Dataset the interval metrics of
    :func:`evaluate_intervals`.

    Parameters
    ----------
    pred : object
        Anything; only an ``xarray.Dataset`` can be the interval family.

    Returns
    -------
    bool

    Notes
    -----
    Defined with the contract in :mod:`calibprob.predictive` (where
    :mod:`calibprob.transforms` reads it), documented and exported in
    :mod:`calibprob.metrics`.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.metrics import is_interval_family
    >>> pred = calibprob.normal(np.zeros(3), np.ones(3))
    >>> is_interval_family(pred), is_interval_family(pred.calib.interval([0.5, 0.9]))
    (False, True)

    References
    ----------
    Pion, A. and Vazquez, E. (2024), §4: intervals-only methods are compared on
    coverage, width and IAE.
    """
    if not isinstance(pred, xr.Dataset):
        return False
    if pred.attrs.get("family") == "interval":
        return True
    names = set(pred.data_vars)
    return {"lower", "upper"} <= names and not ({"quantile", "loc"} & names)


def _check_interval(ds: xr.Dataset) -> xr.Dataset:
    """The interval family's contract (see :func:`validate`)."""
    missing = [v for v in ("lower", "upper") if v not in ds]
    if missing:
        raise ValueError(
            f"an interval-family Dataset needs 'lower' and 'upper'; it lacks {missing}. "
            "Build it with calibprob.predictive.from_intervals(lower, upper, confidence_level)."
        )
    if "confidence_level" not in ds.coords:
        raise ValueError(
            "an interval-family Dataset needs a 'confidence_level' coordinate (the level of each interval); "
            "build it with calibprob.predictive.from_intervals(lower, upper, confidence_level)."
        )
    scalar = ds["confidence_level"].ndim == 0
    want = ("obs",) if scalar else ("obs", "confidence_level")
    for name in ("lower", "upper"):
        if ds[name].dims != want:
            raise ValueError(f"'{name}' must have dims {want}; got {ds[name].dims}. Use .transpose{want}.")
    check_confidence_levels(ds["confidence_level"].values, "the 'confidence_level' coordinate")
    lo, hi = (np.asarray(ds[v].values, float) for v in ("lower", "upper"))
    check_interval_ends(lo.reshape(lo.shape[0], -1), hi.reshape(hi.shape[0], -1))
    return ds


def _check_transformed(ds: xr.Dataset, q: np.ndarray) -> None:
    """A back-transformed Dataset (:func:`calibprob.back_transform`): a known transform, quantiles in its domain."""
    tr = _tr
    t = tr.check_transform(ds.attrs["target_transform"], "the Dataset's attrs['target_transform']")
    bound = tr.domain_bound(t)
    if ds.attrs.get("family") == "normal":
        raise ValueError(
            "a back-transformed Dataset cannot have family='normal' (its law is not Gaussian); keep the "
            "family='quantile' that calibprob.transforms.back_transform sets."
        )
    for sl in _row_blocks(q.shape[0]):
        if not (q[sl] > bound).all():
            raise ValueError(
                f"'quantile' of a Dataset with target_transform={t!r} must exceed {bound:g} "
                "(the transform's domain); it was not made by calibprob.transforms.back_transform."
            )


def _check_normal_agrees(ds: xr.Dataset, q: np.ndarray) -> None:
    """A Gaussian-family Dataset is evaluated through loc/scale: its quantiles must be theirs."""
    loc = np.asarray(ds["loc"].values, dtype=float)
    scale = np.asarray(ds["scale"].values, dtype=float)
    if loc.shape != (q.shape[0],) or scale.shape != (q.shape[0],):
        raise ValueError(f"'loc' and 'scale' must have dims ('obs',) like 'quantile'; got {loc.shape}, {scale.shape}.")
    check_finite(loc, "loc")
    check_positive(scale, "scale")
    z = special.ndtri(ds["level"].values)

    def disagree(sl: slice) -> tuple[np.ndarray, np.ndarray]:
        expected = loc[sl, None] + scale[sl, None] * z[None, :]
        tol = 1e-8 * (np.abs(loc[sl])[:, None] + scale[sl, None] * (1.0 + np.abs(z)[None, :]))
        return np.abs(q[sl] - expected) > tol, expected

    # row blocks keep the (rows x L) temporaries bounded; the message needs the whole picture
    # only when something is wrong
    if not any(disagree(sl)[0].any() for sl in _row_blocks(q.shape[0])):
        return
    bad, expected = disagree(slice(None))
    i, j = (int(k) for k in np.argwhere(bad)[0])
    raise ValueError(
        f"a family='normal' Dataset's 'quantile' disagrees with its loc/scale in {int(bad.any(axis=1).sum())} "
        f"of {q.shape[0]} observations (first: obs {i}, level {float(ds['level'].values[j]):g}: quantile "
        f"{q[i, j]:.6g}, loc + scale * Phi^-1(level) = {expected[i, j]:.6g}); evaluate and interval would use "
        "loc/scale. Rebuild it with calibprob.normal(loc, scale, levels), or drop loc/scale and set "
        "attrs['family'] = 'quantile' to use the quantiles."
    )
