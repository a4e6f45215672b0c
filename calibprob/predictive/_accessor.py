"""The ``calib`` accessor: ``ds.calib.cdf(y)``, ``ds.calib.interval(0.9)``, ... on any predictive Dataset."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.dims import OBS_DIM, STACKED_SAMPLE_DIM
from calibprob._core.validation import check_array, check_confidence_levels, check_finite, check_targets
from calibprob.predictive._families import Family, TransformedFamily, family_of


def _as_values(ds: xr.Dataset, y: ArrayLike, name: str = "y") -> xr.DataArray:
    """Observed values as a DataArray whose first dim is obs.

    A scalar is broadcast to every observation; a DataArray that has an ``obs``
    dim plus others (e.g. several y per observation) keeps xarray semantics;
    everything else (NumPy of any rank, a 1-D DataArray with any dim name such
    as PyMC's ``obs_id``) goes through ``calibprob._core.validation.check_targets``
    and is aligned by position.
    """
    n = ds.sizes["obs"]
    if isinstance(y, xr.DataArray) and y.ndim > 1 and "obs" in y.dims:
        check_finite(np.asarray(y.values, float), name)
        return y.astype(float).transpose("obs", ...)
    if not isinstance(y, (xr.DataArray, xr.Dataset, xr.DataTree)) and np.ndim(y) == 0:
        value = check_array(y, name)
        return xr.DataArray(np.full(n, float(value)), dims=("obs",), coords={"obs": ds["obs"]})
    arr = check_targets(y, n, name, obs=ds["obs"].values, ndim=None)
    dims = ("obs",) + tuple(f"{name}_dim_{i}" for i in range(1, arr.ndim))
    return xr.DataArray(arr, dims=dims, coords={"obs": ds["obs"]})


@xr.register_dataset_accessor("calib")
class CalibAccessor:
    """Evaluate a predictive Dataset: ``ds.calib.cdf(y)``, ``ds.calib.interval(0.9)``, ...

    A thin xarray layer over the family of the Dataset (``calibprob.predictive._families.family_of``):
    Gaussian-family Datasets (``attrs["family"] == "normal"``) are evaluated exactly from
    ``loc``/``scale``, quantile Datasets through the piecewise-Gaussian quantile function described
    in :mod:`calibprob.predictive`, back-transformed ones through their transform, and
    interval-family Datasets only at the interval ends they state.
    """

    def __init__(self, ds: xr.Dataset) -> None:
        self._ds = ds

    # -- basic views ------------------------------------------------------
    @property
    def family(self) -> Family:
        """The family reading this Dataset (``calibprob.predictive._families``)."""
        return family_of(self._ds)

    @property
    def levels(self) -> np.ndarray:
        """The stored quantile levels, shape (L,)."""
        return np.asarray(self._ds["level"].values, float)

    @property
    def quantiles(self) -> np.ndarray:
        """The stored quantiles as an ``(n_obs, L)`` ndarray."""
        return np.asarray(self._ds["quantile"].transpose("obs", "level").values, float)

    @property
    def is_normal(self) -> bool:
        """True when the Dataset is an exact Gaussian family."""
        return self._ds.attrs.get("family") == "normal" and "loc" in self._ds and "scale" in self._ds

    @property
    def transform(self) -> str | None:
        """The target transform of a back-transformed Dataset (:mod:`calibprob.transforms`), else None."""
        fam = self.family
        return fam.transform if isinstance(fam, TransformedFamily) else None

    def _apply(self, kernel: str, y: ArrayLike, name: str = "y", out_name: str | None = None) -> xr.DataArray:
        """``kernel`` of the family over ``y`` (obs first, any extra dims), through ``xr.apply_ufunc``."""
        yda = _as_values(self._ds, y, name)
        fam = self.family
        func = getattr(fam, kernel)
        res = xr.apply_ufunc(
            lambda v, *arrays: func(*arrays, v),
            yda,
            *fam.data_arrays(),
            input_core_dims=[[], *[list(d) for d in fam.core_dims]],
            output_core_dims=[[]],
        )
        return res.rename(out_name) if out_name else res

    # -- evaluation -------------------------------------------------------
    def cdf(self, y: ArrayLike) -> xr.DataArray:
        """Predictive CDF :math:`F_i(y_i)`; ``y`` has one value per obs (axis 0)."""
        return self._apply("_cdf", y, out_name="cdf")

    def pit(self, y: ArrayLike) -> xr.DataArray:
        """Probability integral transform values :math:`F_i(y_i)` (same as :meth:`cdf`)."""
        return self.cdf(y).rename("pit")

    def logpdf(self, y: ArrayLike) -> xr.DataArray:
        """Log predictive density at ``y`` (exact for the normal family)."""
        return self._apply("_logpdf", y, out_name="logpdf")

    def zscore(self, y: ArrayLike) -> xr.DataArray:
        r"""Probit-scale PIT :math:`\Phi^{-1}(F_i(y_i))`, never rounded (:func:`quantile_zscore`).

        The z-score :math:`(y_i-\mu_i)/\sigma_i` for the normal family; for any
        Dataset, :math:`\log F_i(y_i) = \log\Phi(u_i)` from it is exact in the tails.
        """
        yv = _as_values(self._ds, y)
        if yv.ndim != 1:
            raise ValueError(f"y must have one value per observation (1-D); got dims {yv.dims}.")
        vals = self.family.zscore(yv.values)
        return xr.DataArray(vals, dims=("obs",), coords={"obs": self._ds["obs"]}, name="zscore")

    def ppf_zscore(self, u: ArrayLike) -> np.ndarray:
        r"""Quantiles :math:`Q_i(\Phi(u_{ij}))` at probit-scale levels, shape (n_obs, P) (:func:`quantile_ppf_zscore`).

        ``u`` has shape (P,) (shared) or (n_obs, P); the inverse of :meth:`zscore`.
        """
        u = np.asarray(u, float)
        n = self._ds.sizes["obs"]
        if u.ndim not in (1, 2) or (u.ndim == 2 and u.shape[0] != n):
            raise ValueError(f"u must have shape (P,) or ({n}, P); got {u.shape}.")
        return self.family.ppf_zscore(u)

    def pdf(self, y: ArrayLike) -> xr.DataArray:
        """Predictive density at ``y``."""
        return cast(xr.DataArray, np.exp(self.logpdf(y))).rename("pdf")  # numpy ufuncs keep a DataArray

    def ppf(self, p: ArrayLike) -> xr.DataArray:
        """Quantile function at probabilities ``p`` (scalar → dims (obs,), array → (obs, prob))."""
        p_arr = np.asarray(p, dtype=float)
        for v in np.atleast_1d(p_arr):
            if not 0.0 < v < 1.0:
                raise ValueError(
                    f"p must be in (0, 1); got {v!r}. Quantiles at 0 or 1 are infinite under the normal tail rule."
                )
        vals = self.family.ppf(p_arr)
        if p_arr.ndim == 0:
            return xr.DataArray(vals, dims=("obs",), coords={"obs": self._ds["obs"]}, name="ppf")
        return xr.DataArray(
            vals,
            dims=("obs", "prob"),
            coords={"obs": self._ds["obs"], "prob": np.atleast_1d(p_arr)},
            name="ppf",
        )

    def interval(self, confidence_level: Any) -> xr.Dataset:
        r"""Central interval ``[Q((1-c)/2), Q((1+c)/2)]`` at each confidence level ``c``.

        An interval-family Dataset answers at its stored levels only; a row with a ``reach``
        (``calibprob.predictive._reach``) gets :math:`(-\infty, \infty)` at every
        :math:`c` above it.

        Returns
        -------
        xarray.Dataset
            ``lower`` and ``upper``; dims (obs,) for a scalar level, else
            (obs, confidence_level).
        """
        scalar = np.ndim(confidence_level) == 0
        c = check_confidence_levels(confidence_level, "confidence_level")
        p = np.concatenate([(1 - c) / 2, (1 + c) / 2])
        fam = self.family
        vals = fam.ppf(p)
        k = c.size
        lower, upper = vals[:, :k], vals[:, k:]
        if fam.reach is not None:
            # c > reach: (-inf, inf) whatever the rounding of (1 -+ c)/2 (predict_interval's rule, exactly)
            wide = c[None, :] > fam.reach[:, None]
            lower, upper = np.where(wide, -np.inf, lower), np.where(wide, np.inf, upper)
        ds = xr.Dataset(
            {"lower": (("obs", "confidence_level"), lower), "upper": (("obs", "confidence_level"), upper)},
            coords={"obs": self._ds["obs"], "confidence_level": c},
        )
        return ds.isel(confidence_level=0) if scalar else ds

    def centre(self, confidence_level: Any = None) -> xr.DataArray:
        """Midpoint ``(lower + upper) / 2`` of the central interval at each level.

        Every family has it; ``confidence_level`` defaults to an interval family's stored levels
        (another family needs it). Dims as :meth:`interval`.
        """
        iv = self.interval(self._interval_levels(confidence_level, "centre"))
        return ((iv["lower"] + iv["upper"]) / 2).rename("centre")

    def width(self, confidence_level: Any = None) -> xr.DataArray:
        """Width ``upper - lower`` of the central interval at each level (``inf`` where unbounded)."""
        iv = self.interval(self._interval_levels(confidence_level, "width"))
        return (iv["upper"] - iv["lower"]).rename("width")

    def contains(self, y: ArrayLike, confidence_level: Any = None) -> xr.DataArray:
        """Whether ``lower <= y_i <= upper`` at each level: the coverage indicator a user reads."""
        iv = self.interval(self._interval_levels(confidence_level, "contains"))
        yv = _as_values(self._ds, y)
        return ((iv["lower"] <= yv) & (yv <= iv["upper"])).rename("contains")

    def _interval_levels(self, confidence_level: Any, method: str) -> Any:
        if confidence_level is not None:
            return confidence_level
        if "confidence_level" in self._ds.coords and "lower" in self._ds:
            return self._ds["confidence_level"].values.tolist()
        raise ValueError(
            f"calib.{method}() needs confidence_level= for a distribution (only an interval-family prediction "
            f"has levels of its own); e.g. calib.{method}(confidence_level=0.9)."
        )

    def mean(self) -> xr.DataArray:
        """Predictive mean: stored ``mean`` if present, else exact from the family."""
        if "mean" in self._ds:
            return self._ds["mean"]
        m, _ = self.family.moments()
        return xr.DataArray(m, dims=("obs",), coords={"obs": self._ds["obs"]}, name="mean")

    def std(self) -> xr.DataArray:
        """Predictive standard deviation: stored ``std`` if present, else exact from the family."""
        if "std" in self._ds:
            return self._ds["std"]
        _, s = self.family.moments()
        return xr.DataArray(s, dims=("obs",), coords={"obs": self._ds["obs"]}, name="std")

    def median(self) -> xr.DataArray:
        """Predictive median ``Q(0.5)``."""
        return self.ppf(0.5).rename("median")

    def sample(self, n: int, rng: np.random.Generator | int | None = None) -> xr.DataArray:
        """``n`` draws per observation, dims (obs, sample)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n must be a positive integer; got {n!r}.")
        vals = self.family.sample(n, np.random.default_rng(rng))
        # the draws dim is the table's stacked-sample name, which from_draws reads back as draws
        return xr.DataArray(
            vals, dims=(OBS_DIM, STACKED_SAMPLE_DIM), coords={OBS_DIM: self._ds[OBS_DIM]}, name=STACKED_SAMPLE_DIM
        )
