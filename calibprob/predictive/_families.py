r"""The families of the contract and the one dispatch of cdf / logpdf / ppf / moments over them.

A predictive Dataset belongs to one of four families, told apart by :func:`family_of` (the only
place that looks at ``attrs["family"]``, ``loc``/``scale``, ``target_transform`` or
``lower``/``upper`` to decide how a prediction is read):

``normal``
    ``loc``/``scale`` with ``attrs["family"] == "normal"``: every evaluation exact,
    :math:`F(y) = \Phi((y-\mu)/\sigma)`.
``quantile``
    ``quantile(obs, level)``: the piecewise-Gaussian quantile function of
    ``calibprob.predictive._numerics``.
``transformed``
    a back-transformed quantile Dataset (``attrs["target_transform"]``): the law of
    :math:`g^{-1}(Z)` with :math:`Z` piecewise Gaussian (``calibprob.predictive._transformed``).
``interval``
    ``lower``/``upper`` over ``confidence_level`` (intervals-only methods, e.g. CV+ or J+GP).
    Such a prediction states :math:`Q_i((1-c)/2)` and :math:`Q_i((1+c)/2)` at its stored
    confidence levels :math:`c` and nothing else: :meth:`IntervalFamily.ppf` answers exactly at
    those probabilities, and the CDF, density, z-score, moments and draws, which the intervals do
    not determine, are refused with a message naming the family. Interpolating between the
    stored ends would invent a distribution the method never stated.

Each family is a small class (one per family, as MAPIE's conformity scores are): it reads its
arrays from the Dataset once (:meth:`Family.arrays`), and its methods work on plain NumPy arrays,
observations on axis 0 (``rows`` selects a block of them, so the metrics can read a large
prediction in O(chunk x L) memory). The ``calib`` accessor wraps these methods with
``xr.apply_ufunc``; the metrics and the calibrators call them directly. Both therefore read a
prediction through the same code.

References
----------
The layering follows arviz-stats (``base/array.py`` -> ``base/dataarray.py`` -> ``accessors.py``):
NumPy functions, a thin xarray wrapper, then the accessor.
"""

from __future__ import annotations

from typing import Any, ClassVar, NoReturn

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike
from scipy import special

from calibprob.predictive import _transformed as _tr
from calibprob.predictive._numerics import (
    quantile_cdf,
    quantile_logpdf,
    quantile_moments,
    quantile_ppf,
    quantile_ppf_zscore,
    quantile_sample,
    quantile_zscore,
)
from calibprob.predictive._reach import beyond_reach, read_reach
from calibprob.predictive._validate import is_interval_family

__all__ = ["Family", "NormalFamily", "QuantileFamily", "TransformedFamily", "IntervalFamily", "family_of"]

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)
_ALL = slice(None)


class Family:
    """How one family reads a predictive Dataset (subclasses define the kernels).

    Parameters
    ----------
    ds : xarray.Dataset
        A prediction of this family.

    Notes
    -----
    The kernels ``_cdf``, ``_logpdf``, ``_zscore`` take the family's arrays first and the values
    last, broadcast against each other with observations on axis 0 (the accessor passes
    them as ``xr.apply_ufunc`` arranges them); the public methods take ``rows`` instead.
    """

    name: ClassVar[str]
    #: The Dataset variables the family reads, and each one's core dims (besides ``obs``).
    variables: ClassVar[tuple[str, ...]]
    core_dims: ClassVar[tuple[tuple[str, ...], ...]]

    def __init__(self, ds: xr.Dataset) -> None:
        self.ds = ds
        self._arrays: tuple[np.ndarray, ...] | None = None
        #: Per-row reach (the largest central confidence level stated), or None: every level.
        self.reach = read_reach(ds)

    def _read(self) -> tuple[np.ndarray, ...]:
        return tuple(np.asarray(self.ds[v].values, float) for v in self.variables)

    def arrays(self, rows: slice = _ALL) -> tuple[np.ndarray, ...]:
        """The family's arrays (read once), restricted to the observations ``rows``."""
        if self._arrays is None:
            self._arrays = self._read()
        return tuple(a[rows] for a in self._arrays)

    def data_arrays(self) -> tuple[xr.DataArray, ...]:
        """The family's variables as DataArrays, for ``xr.apply_ufunc`` (the accessor's layer)."""
        return tuple(self.ds[v] for v in self.variables)

    def _refuse(self, what: str) -> NoReturn:
        raise ValueError(f"the {self.name} family cannot give {what}.")

    # -- evaluation on values y (rows x ...) ------------------------------------------------------
    def cdf(self, y: ArrayLike, rows: slice = _ALL) -> np.ndarray:
        """Predictive CDF :math:`F_i(y_i)` of the observations ``rows``."""
        return self._cdf(*self.arrays(rows), y)

    def logpdf(self, y: ArrayLike, rows: slice = _ALL) -> np.ndarray:
        """Log predictive density :math:`\\log f_i(y_i)`."""
        return self._logpdf(*self.arrays(rows), y)

    def zscore(self, y: ArrayLike, rows: slice = _ALL) -> np.ndarray:
        """Probit-scale PIT :math:`\\Phi^{-1}(F_i(y_i))`, never rounded."""
        return self._zscore(*self.arrays(rows), y)

    def _cdf(self, *args: Any) -> np.ndarray:
        self._refuse("a CDF")

    def _logpdf(self, *args: Any) -> np.ndarray:
        self._refuse("a density")

    def _zscore(self, *args: Any) -> np.ndarray:
        self._refuse("a z-score")

    # -- quantities of the law ---------------------------------------------------------------------
    def ppf(self, p: np.ndarray, rows: slice = _ALL) -> np.ndarray:
        r"""Quantiles at probabilities ``p``: shape (rows,) for a scalar ``p``, else (rows, P).

        A row with a ``reach`` :math:`R_i` (:data:`~calibprob.predictive._common.REACH_VAR`)
        states no quantile outside :math:`[(1-R_i)/2,\ (1+R_i)/2]`: there it is
        :math:`-\infty` (below) or :math:`+\infty` (above), as its calibrator's finite-sample
        ranks say (:func:`beyond_reach`).
        """
        vals = self._ppf(p, rows)
        if self.reach is None:
            return vals
        return beyond_reach(vals, p, self.reach[rows])

    def law_ppf(self, p: np.ndarray, rows: slice = _ALL) -> np.ndarray:
        """Quantiles of the finite law the stored numbers define, reach or not (what CRPS and pinball score)."""
        return self._ppf(p, rows)

    def _ppf(self, p: np.ndarray, rows: slice = _ALL) -> np.ndarray:
        raise NotImplementedError

    def ppf_zscore(self, u: np.ndarray, rows: slice = _ALL) -> np.ndarray:
        """Quantiles :math:`Q_i(\\Phi(u))` at probit-scale levels ``u`` ((P,) or (rows, P))."""
        self._refuse("quantiles at probit-scale levels")

    def moments(self, rows: slice = _ALL) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation of the law (not the stored ``mean``/``std``)."""
        self._refuse("a mean or a standard deviation")

    def sample(self, n: int, rng: np.random.Generator, rows: slice = _ALL) -> np.ndarray:
        """``n`` draws per observation, shape (rows, n)."""
        self._refuse("draws")


class NormalFamily(Family):
    r"""Gaussian :math:`N(\mu_i, \sigma_i^2)` from ``loc``/``scale``: every evaluation exact."""

    name = "normal"
    variables = ("loc", "scale")
    core_dims = ((), ())

    def _read(self) -> tuple[np.ndarray, ...]:
        # the arrays as stored (loc/scale are float by construction and by validate)
        return (self.ds["loc"].values, self.ds["scale"].values)

    def _cdf(self, loc: np.ndarray, scale: np.ndarray, y: np.ndarray) -> np.ndarray:
        return special.ndtr((y - loc) / scale)

    def _logpdf(self, loc: np.ndarray, scale: np.ndarray, y: np.ndarray) -> np.ndarray:
        zz = (y - loc) / scale
        return -0.5 * zz * zz - _LOG_SQRT_2PI - np.log(scale)

    def _zscore(self, loc: np.ndarray, scale: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (y - loc) / scale

    def _ppf(self, p: np.ndarray, rows: slice = _ALL) -> np.ndarray:
        loc, scale = self.arrays(rows)
        zz = special.ndtri(np.atleast_1d(p))
        vals = loc[:, None] + scale[:, None] * zz
        return vals[:, 0] if np.ndim(p) == 0 else vals

    def ppf_zscore(self, u: np.ndarray, rows: slice = _ALL) -> np.ndarray:
        loc, scale = self.arrays(rows)
        ub = np.broadcast_to(u, (loc.size,) + u.shape[-1:])
        return loc[:, None] + scale[:, None] * ub

    def moments(self, rows: slice = _ALL) -> tuple[np.ndarray, np.ndarray]:
        loc, scale = self.arrays(rows)
        return loc, scale

    def sample(self, n: int, rng: np.random.Generator, rows: slice = _ALL) -> np.ndarray:
        loc, scale = self.arrays(rows)
        return loc[:, None] + scale[:, None] * rng.standard_normal((loc.size, n))


class QuantileFamily(Family):
    """The piecewise-Gaussian quantile function through ``quantile(obs, level)``."""

    name = "quantile"
    variables = ("quantile",)
    core_dims = (("level",),)

    def __init__(self, ds: xr.Dataset) -> None:
        super().__init__(ds)
        self.levels = np.asarray(ds["level"].values, float)

    def _read(self) -> tuple[np.ndarray, ...]:
        return (np.asarray(self.ds["quantile"].transpose("obs", "level").values, float),)

    def _q(self, rows: slice) -> np.ndarray:
        return self.arrays(rows)[0]

    def _cdf(self, q: np.ndarray, y: np.ndarray) -> np.ndarray:
        return quantile_cdf(q, self.levels, y)

    def _logpdf(self, q: np.ndarray, y: np.ndarray) -> np.ndarray:
        return quantile_logpdf(q, self.levels, y)

    def _zscore(self, q: np.ndarray, y: np.ndarray) -> np.ndarray:
        return quantile_zscore(q, self.levels, y)

    def _ppf(self, p: np.ndarray, rows: slice = _ALL) -> np.ndarray:
        return quantile_ppf(self._q(rows), self.levels, p)

    def ppf_zscore(self, u: np.ndarray, rows: slice = _ALL) -> np.ndarray:
        return quantile_ppf_zscore(self._q(rows), self.levels, u)

    def moments(self, rows: slice = _ALL) -> tuple[np.ndarray, np.ndarray]:
        return quantile_moments(self._q(rows), self.levels)

    def sample(self, n: int, rng: np.random.Generator, rows: slice = _ALL) -> np.ndarray:
        return quantile_sample(self._q(rows), self.levels, n, rng)


class TransformedFamily(QuantileFamily):
    r"""The law of :math:`g^{-1}(Z)`, :math:`Z` piecewise Gaussian on the transformed scale.

    The stored quantiles are on the original scale; every kernel maps them forward with
    :math:`g` (where the law is piecewise Gaussian) and adds the Jacobian where a density needs it.
    """

    name = "transformed"

    def __init__(self, ds: xr.Dataset, transform: str) -> None:
        super().__init__(ds)
        self.transform = transform

    def _zq(self, q: np.ndarray) -> np.ndarray:
        return _tr.forward(self.transform, q)

    def _cdf(self, q: np.ndarray, y: np.ndarray) -> np.ndarray:
        return _tr.cdf(self._zq(q), self.levels, y, self.transform)

    def _logpdf(self, q: np.ndarray, y: np.ndarray) -> np.ndarray:
        return _tr.logpdf(self._zq(q), self.levels, y, self.transform)

    def _zscore(self, q: np.ndarray, y: np.ndarray) -> np.ndarray:
        return _tr.zscore(self._zq(q), self.levels, y, self.transform)

    def _ppf(self, p: np.ndarray, rows: slice = _ALL) -> np.ndarray:
        return _tr.inverse(self.transform, quantile_ppf(self._zq(self._q(rows)), self.levels, p))

    def ppf_zscore(self, u: np.ndarray, rows: slice = _ALL) -> np.ndarray:
        return _tr.inverse(self.transform, quantile_ppf_zscore(self._zq(self._q(rows)), self.levels, u))

    def moments(self, rows: slice = _ALL) -> tuple[np.ndarray, np.ndarray]:
        return _tr.moments(self._zq(self._q(rows)), self.levels, self.transform)

    def sample(self, n: int, rng: np.random.Generator, rows: slice = _ALL) -> np.ndarray:
        return _tr.inverse(self.transform, quantile_sample(self._zq(self._q(rows)), self.levels, n, rng))


class IntervalFamily(Family):
    r"""Central intervals ``lower``/``upper`` at stored confidence levels :math:`c_1, \dots, c_C` only.

    :meth:`ppf` answers at the probabilities the intervals state, :math:`(1 - c_k)/2` (``lower``)
    and :math:`(1 + c_k)/2` (``upper``), to within ``1e-9``; every other evaluation is refused.
    """

    name = "interval"
    variables = ("lower", "upper")
    core_dims = (("confidence_level",), ("confidence_level",))
    #: How close a requested probability must be to a stored end's to be read as it.
    TOL = 1e-9

    def __init__(self, ds: xr.Dataset) -> None:
        super().__init__(ds)
        self.confidence_levels = np.atleast_1d(np.asarray(ds["confidence_level"].values, float))

    def _read(self) -> tuple[np.ndarray, ...]:
        def two_d(name: str) -> np.ndarray:
            da = self.ds[name]
            vals = da.transpose("obs", ...).values if "confidence_level" in da.dims else da.values[:, None]
            return np.asarray(vals, float)

        return (two_d("lower"), two_d("upper"))

    def _refuse(self, what: str) -> NoReturn:
        raise ValueError(
            f"an interval-family prediction (attrs['family'] == 'interval', {self.ds.attrs.get('method', '?')!r}) "
            f"states only central intervals at confidence levels {self.confidence_levels.tolist()}; it cannot "
            f"give {what}. Use pred.calib.interval(c) at a stored level or calibprob.evaluate (coverage, width, "
            "IAE), or a method that returns a quantile function (e.g. split conformal or a conformal predictive system)."
        )

    def _columns(self, p: np.ndarray) -> np.ndarray:
        """Index into ``[lower | upper]`` columns of each probability in ``p``; refuses one not stored."""
        stated = np.concatenate([(1 - self.confidence_levels) / 2, (1 + self.confidence_levels) / 2])
        dist = np.abs(p[:, None] - stated[None, :])
        col = np.argmin(dist, axis=1)
        bad = dist[np.arange(p.size), col] > self.TOL
        if bad.any():
            listed = ", ".join(f"{v:.10g}" for v in sorted(stated.tolist()))  # 0.05, not 0.04999999999999999
            self._refuse(f"quantiles at p={float(p[bad][0]):.10g}: it states them only at p in [{listed}]")
        return col

    def ppf(self, p: np.ndarray, rows: slice = _ALL) -> np.ndarray:
        p_arr = np.atleast_1d(np.asarray(p, float))
        col = self._columns(p_arr)
        vals = np.concatenate(self.arrays(rows), axis=1)[:, col]
        return vals[:, 0] if np.ndim(p) == 0 else vals


def family_of(ds: xr.Dataset) -> Family:
    """The family of a predictive Dataset: the one place that decides how a prediction is read.

    Parameters
    ----------
    ds : xarray.Dataset
        A prediction (the contract of :mod:`calibprob.predictive`).

    Returns
    -------
    Family
        ``IntervalFamily`` for ``lower``/``upper`` intervals; ``NormalFamily`` for
        ``attrs["family"] == "normal"`` with ``loc`` and ``scale``; ``TransformedFamily`` for a
        back-transformed Dataset; ``QuantileFamily`` otherwise. Its methods (``cdf``,
        ``logpdf``, ``zscore``, ``ppf``, ``ppf_zscore``, ``moments``, ``sample``) work on NumPy
        arrays, observations on axis 0, optionally on a block of rows.

    References
    ----------
    The predictive-distribution contract and its families: :doc:`/concepts`; the layering follows
    arviz-stats (NumPy layer, ``xr.apply_ufunc`` wrapper, accessor).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.predictive import family_of
    >>> fam = family_of(calibprob.normal([0.0, 1.0], [1.0, 2.0]))
    >>> fam.name, fam.cdf(np.array([0.0, 1.0])).tolist()
    ('normal', [0.5, 0.5])
    >>> family_of(calibprob.normal([0.0], [1.0]).calib.interval([0.5, 0.9])).name
    'interval'
    """
    if is_interval_family(ds):
        return IntervalFamily(ds)
    if ds.attrs.get("family") == "normal" and "loc" in ds and "scale" in ds:
        return NormalFamily(ds)
    t = _tr.dataset_transform(ds)
    return QuantileFamily(ds) if t is None else TransformedFamily(ds, t)
