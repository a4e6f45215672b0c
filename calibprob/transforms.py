r"""Target transforms: fit on :math:`Z = g(Y)`, report every metric on the scale of :math:`Y`.

A right-skewed positive target (prices, counts, durations) is often modelled
on the log scale. With :math:`g = \log` (``"log"``, :math:`Y > 0`) or
:math:`g = \log(1 + \cdot)` (``"log1p"``, :math:`Y > -1`) and a predictive law
for :math:`Z` (any member of the contract, possibly standardised:
:math:`Z = m + s\,\tilde Z`), the law of :math:`Y = g^{-1}(Z)` is

.. math::

    Q_Y(p) = g^{-1}\bigl(Q_Z(p)\bigr), \qquad
    F_Y(y) = F_Z\bigl(g(y)\bigr), \qquad
    \log f_Y(y) = \log f_Z\bigl(g(y)\bigr) + \log g'(y),

with :math:`\log g'(y) = -\log y` (log) or :math:`-\log(1+y)` (log1p): the
quantiles map back exactly because :math:`g` is increasing, and the density
carries the Jacobian.

:func:`back_transform` returns such a Dataset: ``quantile`` holds
:math:`Q_Y` at the stored levels (so anything that reads stored quantiles
reads original-scale values) and ``attrs["target_transform"]`` tells the
``.calib`` accessor and :mod:`calibprob.metrics` that *between* levels the
law is the piecewise-Gaussian law of :math:`g(Y)` mapped through
:math:`g^{-1}` — not a piecewise-Gaussian law in :math:`y`. Every evaluation
stays exact: on each piece :math:`Y = e^{a + bU}` (minus 1 for log1p) with
:math:`U \sim N(0, 1)`, so the moments are lognormal partial expectations and
the CRPS has the closed form of :func:`crps_exp_pieces` (Baran & Lerch 2015
give its one-piece case, the lognormal).

:func:`transform_target` maps observed values to the transformed scale and
refuses values outside the domain; :class:`calibprob.bases.transformed.TransformedTargetRegressor` wraps a
base model so that ``fit(X, y)`` fits it on :math:`g(y)` and ``predict(X)``
returns the original-scale law.

Sources: Baran, S. and Lerch, S. (2015). Log-normal distribution based ensemble model
output statistics models for probabilistic wind-speed forecasting. QJRMS 141
(the CRPS of the lognormal).
Gneiting, T. and Raftery, A. E. (2007). Strictly proper scoring rules,
prediction, and estimation. JASA 102(477).
Owen, D. B. (1956). Tables for computing bivariate normal probabilities.
Ann. Math. Statist. 27(4) (the bivariate normal CDF through Owen's T).
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import numpy as np
import xarray as xr

from calibprob.predictive import (
    REACH_VAR,
    from_quantiles,
    is_interval_family,
    validate,
)

# the transformed family's numerics live one layer down (the predictive contract reads them too);
# re-exported here, where users and the rest of calibprob have always found them
from calibprob.predictive._transformed import (
    _CHUNK,
    _DOMAIN,
    TARGET_TRANSFORMS,
    check_transform,
    crps_exp_pieces,
    dataset_transform,
    inverse,
    transform_target,
)
from calibprob.predictive._transformed import cdf as cdf  # re-exports: ``transforms.cdf`` etc. are read by the metrics
from calibprob.predictive._transformed import crps as crps
from calibprob.predictive._transformed import domain_bound as domain_bound
from calibprob.predictive._transformed import forward as forward
from calibprob.predictive._transformed import log_jacobian as log_jacobian
from calibprob.predictive._transformed import logpdf as logpdf
from calibprob.predictive._transformed import moments as moments
from calibprob.predictive._transformed import zscore as zscore

__all__ = [
    "TARGET_TRANSFORMS",
    "transform_target",
    "back_transform",
    "check_transform",
    "crps_exp_pieces",
]


def back_transform(pred: xr.Dataset, transform: str, *, shift: float = 0.0, scale: float = 1.0) -> xr.Dataset:
    r"""The law of :math:`Y = g^{-1}(\mathrm{shift} + \mathrm{scale}\cdot Z)` from a predictive Dataset for :math:`Z`.

    Parameters
    ----------
    pred : xarray.Dataset
        A predictive distribution on the transformed (and possibly
        standardised) scale: any member of the contract, or the interval
        family (``lower``/``upper``, from an intervals-only method), whose ends
        are mapped the same way.
    transform : {"log", "log1p"}
        The transform :math:`g` the model was fitted under.
    shift, scale : float
        Undo a standardisation of :math:`g(y)`: :math:`g(y) = \mathrm{shift} +
        \mathrm{scale}\cdot z` (``scale > 0``).

    Returns
    -------
    xarray.Dataset
        ``quantile`` = :math:`g^{-1}(\mathrm{shift} + \mathrm{scale}\, Q_Z)` at
        the same levels (exact: :math:`g` is increasing), ``family="quantile"``,
        ``attrs["target_transform"] = transform``; the accessor and the
        metrics then evaluate the law exactly (module docstring), densities
        with the Jacobian. An interval Dataset comes back with mapped ends.

    Raises
    ------
    ValueError
        An unknown transform, a non-positive ``scale``, a Dataset that is
        already back-transformed, or quantiles that overflow or underflow
        on the original scale.

    References
    ----------
    Baran, S. and Lerch, S. (2015), QJRMS 141 (the lognormal law and its CRPS);
    the change of variables for densities, :math:`f_Y(y) = f_Z(g(y))\,g'(y)`.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.transforms import back_transform
    >>> pred = back_transform(calibprob.normal([0.0], [0.5]), "log")   # a lognormal
    >>> round(float(pred.calib.median()[0]), 12), round(float(pred.calib.mean()[0]), 6)
    (1.0, 1.133148)
    >>> from scipy import stats                              # log f_Y(2) = log f_Z(log 2) - log 2
    >>> bool(np.isclose(pred.calib.logpdf([2.0])[0], stats.norm(0, 0.5).logpdf(np.log(2.0)) - np.log(2.0)))
    True
    """
    transform = check_transform(transform, "transform")
    if not isinstance(pred, xr.Dataset):
        raise TypeError(f"pred must be a predictive xarray.Dataset; got {type(pred).__name__}.")
    for nm, v in (("shift", shift), ("scale", scale)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not np.isfinite(v):
            raise ValueError(f"{nm} must be a finite number; got {v!r}.")
    if scale <= 0:
        raise ValueError(f"scale must be > 0 (a standard deviation); got {scale!r}.")
    if dataset_transform(pred) is not None:
        raise ValueError(
            f"pred is already on the original scale (target_transform={dataset_transform(pred)!r}); "
            "back-transform the prediction made on the transformed scale, once."
        )
    if is_interval_family(pred):
        out = pred.copy()
        for var in ("lower", "upper"):
            out[var] = inverse(transform, shift + scale * pred[var])
        out.attrs["target_transform"] = transform
        return out
    validate(pred)
    zq = pred.calib.quantiles
    q = np.empty(zq.shape)
    with np.errstate(over="ignore"):
        for i in range(0, zq.shape[0], _CHUNK):
            q[i : i + _CHUNK] = inverse(transform, shift + scale * zq[i : i + _CHUNK])
    bound = _DOMAIN[transform][0]
    for i in range(0, q.shape[0], _CHUNK):
        blk = q[i : i + _CHUNK]
        if not (np.isfinite(blk).all() and (blk > bound).all()):
            raise ValueError(
                f"the quantiles overflow or underflow on the original scale under {transform!r} "
                f"(transformed-scale quantiles from {float(zq.min()):.4g} to {float(zq.max()):.4g} after "
                f"shift={shift!r}, scale={scale!r}); check that pred is on the transformed scale and that "
                "shift/scale undo the standardisation."
            )
    ds = from_quantiles(
        q, pred["level"].values, obs=pred["obs"].values, method=str(pred.attrs.get("method", "quantiles"))
    )
    ds.attrs["target_transform"] = transform
    for k, v in pred.attrs.items():
        if k not in ds.attrs and k not in ("family", "tail"):
            ds.attrs[k] = v
    if REACH_VAR in pred.data_vars:  # g is increasing: the levels a row states are the same on both scales
        ds[REACH_VAR] = pred[REACH_VAR].assign_coords(obs=ds["obs"].values)
    return ds


#: Names that moved out of this module (the base model went to ``calibprob.bases.transformed``); they keep
#: working for one release with a FutureWarning.
_MOVED_NAMES = {"TransformedTargetRegressor": "calibprob.bases.transformed"}


def __getattr__(name: str) -> Any:
    if name in _MOVED_NAMES:
        new = _MOVED_NAMES[name]
        warnings.warn(
            f"`calibprob.transforms.{name}` moved to `{new}.{name}` in calibprob 0.2.0; the old path is removed in "
            f"0.3.0. Import it from `{new}` (or `calibprob`) instead.",
            FutureWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(new), name)
    raise AttributeError(f"module 'calibprob.transforms' has no attribute {name!r}")
