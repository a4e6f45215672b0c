r"""The one data contract: predictive distributions as xarray Datasets.

Every predictor and calibrator in calibprob returns the same object, an
``xr.Dataset`` with

* dimension ``obs`` (one entry per input point) and dimension ``level`` (a
  coordinate of quantile levels strictly inside (0, 1), strictly increasing);
* variable ``quantile(obs, level)``: the predictive quantile function sampled
  at those levels, non-decreasing in ``level`` for every ``obs``;
* optionally ``mean(obs)`` and ``std(obs)``; for the Gaussian family also
  ``loc(obs)`` and ``scale(obs)`` with ``attrs["family"] == "normal"``, in
  which case every evaluation is exact;
* attributes ``method`` (who made it), ``family`` (``"normal"`` or
  ``"quantile"``) and ``tail`` (the tail rule, below).

Interpolation rule ("piecewise-Gaussian")
-----------------------------------------
Between two stored levels :math:`p_k < p_{k+1}` the quantile function is
linear in the standard-normal score :math:`z = \Phi^{-1}(p)`:

.. math::

    Q(p) = q_k + s_k\,\bigl(\Phi^{-1}(p) - z_k\bigr), \qquad
    s_k = \frac{q_{k+1} - q_k}{z_{k+1} - z_k} \ge 0 .

It is monotone whenever the stored quantiles are, it is *exact* for every
Gaussian (whose quantile function is linear in :math:`z`), and its CDF and
density have closed forms: for :math:`y` in segment :math:`k`,
:math:`F(y) = \Phi(z_k + (y - q_k)/s_k)` and
:math:`f(y) = \varphi(z_k + (y-q_k)/s_k)/s_k`. The density is thus the
derivative of the CDF obtained by inverting the quantile function, as the
papers compute NLL for quantile-only methods.

Tail rule ``"normal"``
----------------------
Below the lowest and above the highest stored level the same formula
continues with a Gaussian tail anchored at the extreme quantile. Its scale is
the larger of the outermost segment's slope and the slope of the chord from the
extreme level to the stored level about one unit of :math:`z` inwards (0.01 to
0.09 with the default levels): both are the exact :math:`\sigma` for a Gaussian;
a heavy tail keeps its outermost slope, while one nearly tied outer segment (as
level-by-level calibrators can produce) cannot collapse the tail and send the
log density of an observation just beyond it to minus hundreds. Quantiles at levels 0 and 1 are therefore
infinite, CDF values are strictly inside (0, 1) and the log density is finite
everywhere.

Accuracy
--------
For a Gaussian the representation is exact to floating-point rounding at any
set of levels (tested to 1e-9). For a non-Gaussian distribution the error is
that of a piecewise-linear fit in :math:`z`; ``tests/test_predictive.py``
states measured bounds for a Student-t(5) and a lognormal with the default 99
levels.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable
from typing import cast

import numpy as np
import xarray as xr
from scipy import special

from calibprob import _transformed as _tr
from calibprob._numerics import (
    quantile_cdf,
    quantile_logpdf,
    quantile_moments,
    quantile_pieces,
    quantile_ppf,
    quantile_ppf_zscore,
    quantile_sample,
    quantile_zscore,
)
from calibprob._stable import pow2_scale
from calibprob._validation import (
    check_array,
    check_confidence_levels,
    check_finite,
    check_int,
    check_levels,
    check_positive,
    check_targets,
)

__all__ = [
    "DEFAULT_LEVELS",
    "CalibprobWarning",
    "normal",
    "from_quantiles",
    "from_draws",
    "from_cdf_grid",
    "to_datatree",
    "heldout_elpd",
    "validate",
    "quantile_cdf",
    "quantile_logpdf",
    "quantile_ppf",
    "quantile_moments",
    "quantile_pieces",
    "quantile_sample",
    "quantile_zscore",
    "quantile_ppf_zscore",
]

#: The default quantile levels: 0.01, 0.02, ..., 0.99.
DEFAULT_LEVELS = np.round(np.linspace(0.01, 0.99, 99), 10)

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)
_CHUNK = 4096  # rows per block where temporaries are (rows x L)


class CalibprobWarning(UserWarning):
    """A warning raised when calibprob repairs its input (e.g. crossing quantiles).

    Examples
    --------
    >>> import warnings, numpy as np, calibprob
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     pred = calibprob.from_quantiles(np.array([[1.0, 0.0, 2.0]]), [0.2, 0.5, 0.8])
    >>> caught[0].category is calibprob.CalibprobWarning
    True
    >>> pred["quantile"].values.tolist()   # repaired by sorting
    [[0.0, 1.0, 2.0]]
    """


# ---------------------------------------------------------------------------
# Constructors (xarray layer)
# ---------------------------------------------------------------------------


def _obs_coord(n: int, obs) -> np.ndarray:
    if obs is None:
        return np.arange(n)
    obs = np.asarray(obs)
    if obs.shape != (n,):
        raise ValueError(f"obs must have one label per observation ({n}); got shape {obs.shape}.")
    return obs


def _levels_or_default(levels) -> np.ndarray:
    levels = DEFAULT_LEVELS if levels is None else check_levels(levels)
    if levels.size < 2:
        raise ValueError(
            f"levels must hold at least 2 levels to define a quantile function; got {levels.size}. "
            "Use e.g. calibprob.predictive.DEFAULT_LEVELS."
        )
    return levels


def _dataset(quantile, levels, obs, method, family, extra=None) -> xr.Dataset:
    data: dict[str, tuple] = {"quantile": (("obs", "level"), quantile)}
    for name, values in (extra or {}).items():
        if values is not None:
            data[name] = ("obs", np.asarray(values, float))
    ds = xr.Dataset(data, coords={"obs": obs, "level": levels})
    ds.attrs.update({"method": method, "family": family, "tail": "normal"})
    ds["level"].attrs["description"] = "quantile level (probability) in (0, 1)"
    return ds


def normal(loc, scale, levels=None, *, obs=None, method: str = "normal") -> xr.Dataset:
    r"""A Gaussian predictive distribution per observation (exact evaluation).

    Parameters
    ----------
    loc : array_like, shape (n,)
        Predictive means :math:`\mu_i`.
    scale : array_like, shape (n,)
        Predictive standard deviations :math:`\sigma_i > 0`.
    levels : array_like, shape (L,), optional
        Quantile levels stored in ``quantile``; default :data:`DEFAULT_LEVELS`.
    obs : array_like, shape (n,), optional
        Labels for the ``obs`` coordinate; default ``0..n-1``.
    method : str, default "normal"
        Recorded in ``attrs["method"]``.

    Returns
    -------
    xarray.Dataset
        ``quantile(obs, level) = loc + scale * Phi^{-1}(level)``, plus ``loc``,
        ``scale``, ``mean``, ``std``; ``attrs["family"] == "normal"``.

    References
    ----------
    The predictive-distribution contract and its interpolation rule (linear in
    :math:`\Phi^{-1}(p)`, Gaussian tails): :doc:`/concepts`.

    Examples
    --------
    >>> import calibprob
    >>> pred = calibprob.normal([0.0, 1.0], [1.0, 2.0])
    >>> float(pred.calib.cdf([0.0, 1.0])[0])
    0.5
    """
    loc = check_array(loc, "loc", ndim=1)
    scale = check_array(scale, "scale", ndim=1)
    if loc.shape != scale.shape:
        raise ValueError(
            f"mismatched lengths: loc has {loc.shape[0]}, scale has {scale.shape[0]} entries. "
            "Pass one loc and one scale per observation."
        )
    check_positive(scale, "scale")
    levels = _levels_or_default(levels)
    q = loc[:, None] + scale[:, None] * special.ndtri(levels)[None, :]
    extra = {"loc": loc, "scale": scale, "mean": loc, "std": scale}
    return _dataset(q, levels, _obs_coord(loc.size, obs), method, "normal", extra)


def _row_blocks(n: int, chunk: int = _CHUNK):
    """Consecutive row slices of at most ``chunk`` rows (checks on (n, L) arrays in O(chunk x L) memory)."""
    for start in range(0, n, chunk):
        yield slice(start, min(start + chunk, n))


def _check_finite_rows(q: np.ndarray, name: str) -> None:
    """:func:`check_finite` in row blocks; on failure the full check builds the usual message."""
    for sl in _row_blocks(q.shape[0]):
        if not np.isfinite(q[sl]).all():
            check_finite(q, name)  # error path only: the whole-array message (first bad index, count)


def _repair_crossing(q: np.ndarray, name: str = "quantiles") -> np.ndarray:
    # the crossing check runs in row blocks: np.diff of all rows at once would be a
    # second (n, L) array, as large as the quantiles themselves
    crossed = np.zeros(q.shape[0], dtype=bool)
    for sl in _row_blocks(q.shape[0]):
        crossed[sl] = np.any(np.diff(q[sl], axis=-1) < 0, axis=-1)
    if crossed.any():
        warnings.warn(
            f"{name} crossed (decreased with the level) in {int(crossed.sum())} of "
            f"{crossed.size} observations; repaired by sorting each row (monotone "
            "rearrangement, Chernozhukov et al. 2010, which never increases the pinball loss).",
            CalibprobWarning,
            stacklevel=3,
        )
        q = np.sort(q, axis=-1)
    return q


def from_quantiles(quantiles, levels, *, obs=None, method: str = "quantiles", mean=None, std=None) -> xr.Dataset:
    r"""A predictive distribution from quantiles at given levels.

    Parameters
    ----------
    quantiles : array_like, shape (n, L)
        Predictive quantiles; crossing rows are repaired by sorting (with a
        :class:`CalibprobWarning`), never silently returned.
    levels : array_like, shape (L,)
        Strictly increasing levels in (0, 1), ``L >= 2``.
    obs : array_like, shape (n,), optional
    method : str
    mean, std : array_like, shape (n,), optional
        Stored as ``mean``/``std`` if the producer knows them exactly;
        otherwise the accessor computes them from the quantile function.

    Returns
    -------
    xarray.Dataset
        ``attrs["family"] == "quantile"``.

    References
    ----------
    The predictive-distribution contract and its interpolation rule (linear in
    :math:`\Phi^{-1}(p)`, Gaussian tails): :doc:`/concepts`.

    Chernozhukov, V., Fernández-Val, I. and Galichon, A. (2010). Quantile and
    probability curves without crossing. Econometrica 78(3).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> pred = calibprob.from_quantiles(np.array([[-1.0, 0.0, 1.0]]), [0.2, 0.5, 0.8])
    >>> float(pred.calib.ppf(0.5)[0])
    0.0
    """
    levels = _levels_or_default(levels)
    q = check_array(quantiles, "quantiles", ndim=2, finite=False)
    _check_finite_rows(q, "quantiles")
    if q.shape[1] != levels.size:
        raise ValueError(f"quantiles must have one column per level: shape (n, {levels.size}); got {q.shape}.")
    q = _repair_crossing(q)
    n = q.shape[0]
    for name, v in (("mean", mean), ("std", std)):
        if v is not None and np.shape(v) != (n,):
            raise ValueError(f"{name} must have shape ({n},); got {np.shape(v)}.")
    if std is not None:
        check_positive(std, "std", strict=False)
    return _dataset(q, levels, _obs_coord(n, obs), method, "quantile", {"mean": mean, "std": std})


#: Groups of an ArviZ / PyMC DataTree that hold predictive draws, in PyMC's naming:
#: ``posterior_predictive`` (draws at the data the model was fitted on, or at
#: data swapped in with ``pm.set_data``) and ``predictions`` (draws at new data,
#: ``pm.sample_posterior_predictive(..., predictions=True)``).
_PREDICTIVE_GROUPS = ("posterior_predictive", "predictions")


def _tree_groups(obj) -> dict | None:
    """``{group name: Dataset}`` of a DataTree or a legacy ``az.InferenceData``; else None."""
    if isinstance(obj, xr.DataTree):
        return {name: child.dataset for name, child in obj.children.items()}
    groups = getattr(obj, "groups", None)
    if callable(groups) and not isinstance(obj, (xr.Dataset, xr.DataArray)):
        # ArviZ < 1 InferenceData: groups() lists names, each an attribute holding a Dataset
        return {name: getattr(obj, name) for name in groups()}
    return None


def _predictive_dataset(draws, group):
    """The Dataset of predictive draws inside a tree, by the rules of :func:`from_draws`."""
    groups = _tree_groups(draws)
    if group is not None:
        if not isinstance(group, str) or group not in groups:
            raise ValueError(
                f"group={group!r} is not a group of draws; it has groups {list(groups)}. "
                f"Pass one of them (usually one of {_PREDICTIVE_GROUPS})."
            )
        return groups[group], f"group {group!r}"
    found = [g for g in _PREDICTIVE_GROUPS if g in groups]
    if len(found) == 2:
        raise ValueError(
            "draws has both a 'posterior_predictive' and a 'predictions' group; pass "
            "group='posterior_predictive' (draws at the data the model saw) or "
            "group='predictions' (draws at new data) to say which to use."
        )
    if found:
        return groups[found[0]], f"group {found[0]!r}"
    if isinstance(draws, xr.DataTree) and draws.data_vars:
        # a node such as idata["posterior_predictive"]: its own variables are the draws
        return draws.dataset, f"node {draws.name!r}" if draws.name else "tree"
    raise ValueError(
        f"draws is a {type(draws).__name__} with neither a 'posterior_predictive' nor a "
        f"'predictions' group; it has groups {list(groups)}. Draw them first with "
        "pm.sample_posterior_predictive(idata, extend_inferencedata=True) (predictions=True "
        "for new data), pass group= naming the group that holds draws, or pass the "
        "DataArray itself (e.g. pp.posterior_predictive['y'])."
    )


def _pick_variable(ds, var_name, where: str) -> xr.DataArray:
    names = list(ds.data_vars)
    if var_name is not None:
        if var_name not in names:
            raise ValueError(
                f"var_name={var_name!r} is not a variable of the draws' {where}; it has {names}. Pass one of them."
            )
        return ds[var_name]
    if len(names) == 1:
        return ds[names[0]]
    if not names:
        raise ValueError(f"the draws' {where} holds no variables; pass the group that holds the predicted variable.")
    raise ValueError(
        f"the draws' {where} holds {len(names)} variables {names}; pass var_name= naming the "
        "predicted one (e.g. var_name='y')."
    )


def _select_draws(draws, var_name, group):
    """The draws variable of a DataTree / InferenceData (``group``), a Dataset or a DataArray (``var_name``)."""
    is_tree = _tree_groups(draws) is not None
    if group is not None and not is_tree:
        raise ValueError(
            f"group={group!r} applies to a DataTree / InferenceData; got a {type(draws).__name__}. "
            "Drop group= (or pass the whole tree)."
        )
    if is_tree:
        ds, where = _predictive_dataset(draws, group)
        draws = _pick_variable(ds, var_name, where)
    elif isinstance(draws, xr.Dataset):
        draws = _pick_variable(draws, var_name, "Dataset")
    elif var_name is not None:
        if not isinstance(draws, xr.DataArray):
            raise ValueError(
                f"var_name={var_name!r} applies to a Dataset or DataTree; got a {type(draws).__name__}. Drop var_name=."
            )
        if draws.name is not None and draws.name != var_name:
            raise ValueError(
                f"var_name={var_name!r} but draws is the DataArray {draws.name!r}. "
                "Pass the matching variable or drop var_name=."
            )
    return draws


def _draws_matrix(draws: xr.DataArray, sample_dims, obs_dim: Hashable | None):
    """``(draws x obs)`` values of a DataArray, its ``obs`` labels and the attrs recording where they came from."""
    attrs: dict[str, str] = {}
    present = [d for d in sample_dims if d in draws.dims]
    if not present:
        raise ValueError(
            f"draws has dims {draws.dims} but none of sample_dims={tuple(sample_dims)}. "
            "Pass sample_dims naming the draw dimensions."
        )
    others = [d for d in draws.dims if d not in present]
    label = f"variable {draws.name!r}" if draws.name is not None else "draws"
    if obs_dim is None and len(others) == 1:
        obs_dim = others[0]
    if obs_dim is None or others != [obs_dim]:
        if not others:
            fix = "it has no observation dim; add one (e.g. da.expand_dims(obs=1))."
        elif obs_dim is not None and obs_dim not in others:
            fix = f"obs_dim={obs_dim!r} is not among them."
        else:
            fix = (
                "calibprob needs one value per observation: select the others "
                f"(e.g. da.isel({others[0]}=0)) or stack them into one "
                f"(da.stack(obs={tuple(others)}))."
            )
        raise ValueError(
            f"{label} must have exactly one dimension besides the sample dims {present}; got {others}: {fix}"
        )
    arr = draws.transpose(*present, obs_dim).values.reshape(-1, draws.sizes[obs_dim])
    arr = check_array(arr, "draws", ndim=2)
    obs = draws[obs_dim].values if obs_dim in draws.coords else None
    attrs["obs_dim"] = str(obs_dim)
    if draws.name is not None:
        attrs["var_name"] = str(draws.name)
    return arr, obs, attrs


def from_draws(
    draws,
    levels=None,
    *,
    var_name: str | None = None,
    group: str | None = None,
    sample_dims=("chain", "draw", "sample"),
    obs_dim: Hashable | None = None,
    method: str = "draws",
    weights=None,
) -> xr.Dataset:
    r"""A predictive distribution from predictive draws (no Gaussian collapse).

    Accepts PyMC / ArviZ output at any level of nesting, so that
    ``from_draws(idata)``, ``from_draws(idata["posterior_predictive"])``,
    ``from_draws(idata.posterior_predictive)`` and
    ``from_draws(idata.posterior_predictive["y"])`` give the same Dataset.

    Parameters
    ----------
    draws : xarray.DataTree, xarray.Dataset, xarray.DataArray or array_like
        * a DataTree (``az.InferenceData`` in ArviZ 1; a legacy ArviZ 0.x
          ``InferenceData`` too) with a ``posterior_predictive`` or a
          ``predictions`` group. The group is the only one of the two present;
          when both are, ``group=`` must say which. A tree node that holds the
          variables itself (``idata["posterior_predictive"]``) is used as is;
        * a Dataset (a group): the variable named ``var_name``, needed only when
          there is more than one;
        * a DataArray with the ``sample_dims`` present (``chain`` and ``draw``
          from PyMC, or the ``sample`` of ``az.extract``) and exactly one other
          dimension, the observations (PyMC's ``obs_id``, ``y_dim_0``, ...),
          whose coordinate values become the ``obs`` coordinate;
        * an array of shape ``(n_draws, n_obs)``.
    levels : array_like, optional
        Levels at which empirical quantiles are taken (linear interpolation
        between order statistics); default :data:`DEFAULT_LEVELS`.
    var_name : str, optional
        The variable to use from a Dataset or tree; required only when there are
        several.
    group : str, optional
        The tree group holding the draws; required only when a tree has both
        ``posterior_predictive`` and ``predictions``.
    sample_dims : tuple of str, default ("chain", "draw", "sample")
        Dimensions that index draws; those present are flattened together into
        the draws (DataArray / Dataset / tree input).
    obs_dim : str, optional
        Name of the observation dimension; inferred when there is exactly one
        non-sample dimension. Renamed to ``obs`` (its name is kept in
        ``attrs["obs_dim"]``, which :func:`to_datatree` reuses).
    method : str
    weights : array_like or xarray.DataArray, shape (n_draws, n_obs), optional
        Normalised importance weights :math:`w_{s,i}` of the draws, one column per
        observation (e.g. PSIS-LOO weights, :func:`calibprob.from_loo`): finite,
        :math:`\ge 0`, each column summing to one (within 1e-6). Linear weights only;
        log-weights (ArviZ's ``log_weights``) are refused with the fix
        (``np.exp(log_weights)``). A DataArray carries the draws' dims and is put in
        their order. Default: equal weights, with the unweighted estimators above.
        With weights, the quantile at level :math:`p` interpolates linearly between
        sorted draws :math:`x_{(k)}` placed at the midpoints of their cumulative weight,
        :math:`c_k = \sum_{j \le k} w_{(j)} - w_{(k)}/2` (Hyndman & Fan's definition 5
        when the weights are equal), clamped to the extreme draws; the mean is
        :math:`\sum_s w_s x_s` and the variance
        :math:`\sum_s w_s (x_s - \bar x)^2 / (1 - \sum_s w_s^2)` (the reliability-weights
        correction, which is ``ddof=1`` for equal weights).

    Returns
    -------
    xarray.Dataset
        Empirical quantiles plus the draws' exact ``mean`` and ``std``;
        ``attrs["n_draws"]``, and for xarray input ``attrs["obs_dim"]`` and
        (when the variable is named) ``attrs["var_name"]``.

    Raises
    ------
    ValueError
        A tree with neither predictive group (the message lists the groups it
        has), both groups without ``group=``, several variables without
        ``var_name`` (listing them), an unknown ``var_name``, no sample
        dimension, or a variable with more than one non-sample dimension.

    References
    ----------
    Hyndman, R. J. and Fan, Y. (1996). Sample quantiles in statistical packages.
    The American Statistician 50(4) (linear interpolation between order
    statistics, their definition 7).

    The predictive-distribution contract and its interpolation rule (linear in
    :math:`\Phi^{-1}(p)`, Gaussian tails): :doc:`/concepts`.

    Examples
    --------
    >>> import numpy as np, xarray as xr, calibprob
    >>> draws = np.random.default_rng(0).normal(size=(4000, 2))   # (n_draws, n_obs)
    >>> pred = calibprob.from_draws(draws)
    >>> pred.sizes["obs"], pred.attrs["family"]
    (2, 'quantile')
    >>> bool(abs(float(pred.calib.ppf(0.5)[0])) < 0.1)
    True
    >>> pp = xr.Dataset({"y": (("chain", "draw", "obs_id"), draws.reshape(2, 2000, 2))},
    ...                 coords={"obs_id": [10, 11]})
    >>> idata = xr.DataTree.from_dict({"posterior_predictive": pp})
    >>> calibprob.from_draws(idata)["obs"].values.tolist()
    [10, 11]
    """
    levels = _levels_or_default(levels)
    draws = _select_draws(draws, var_name, group)
    if isinstance(draws, xr.DataArray):
        arr, obs, attrs = _draws_matrix(draws, sample_dims, obs_dim)
    else:
        arr, obs, attrs = check_array(draws, "draws", ndim=2), None, {}
    if arr.shape[0] < 2:
        raise ValueError(f"draws needs at least 2 draws per observation; got {arr.shape[0]}.")
    if weights is None:
        q = np.quantile(arr, levels, axis=0).T
        mean, std = _draw_moments(arr)
    else:
        w = _check_weights(weights, draws, arr.shape, sample_dims)
        q, mean, std = _weighted_summaries(arr, w, levels)
    ds = _dataset(q, levels, _obs_coord(arr.shape[1], obs), method, "quantile", {"mean": mean, "std": std})
    ds.attrs["n_draws"] = int(arr.shape[0])
    if weights is not None:
        ds.attrs["weighted"] = 1
    ds.attrs.update(attrs)
    return ds


def _draw_moments(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column mean and ``ddof=1`` std of draws, without overflow or underflow at any scale.

    The plain formulas (kept bit for bit where they are safe, and copy-free) are redone in units
    of a power of two only for the columns whose magnitude is extreme.
    """
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):  # redone below where it matters
        mean = arr.mean(axis=0)
        std = arr.std(axis=0, ddof=1)
    extreme = ~((std > 1e-100) & (std < 1e100) & np.isfinite(mean)) | (np.abs(mean) > 1e100)
    if extreme.any():
        cols = arr[:, extreme]
        unit = pow2_scale(cols, axis=0)
        scaled = cols / unit
        mean[extreme] = scaled.mean(axis=0) * unit
        std[extreme] = scaled.std(axis=0, ddof=1) * unit
    return mean, std


#: How far a column of ``weights`` may sum from one (float32 weights, exp of normalised log-weights).
WEIGHT_SUM_TOL = 1e-6


def _check_weights(weights, draws, shape: tuple[int, int], sample_dims) -> np.ndarray:
    """``weights`` as a validated ``(n_draws, n_obs)`` array in the order of the draws' matrix."""
    if isinstance(weights, xr.DataArray):
        if not isinstance(draws, xr.DataArray) or set(weights.dims) != set(draws.dims):
            have = draws.dims if isinstance(draws, xr.DataArray) else "an array"
            raise ValueError(
                f"weights has dims {weights.dims} but the draws have {have}; pass weights with the "
                "draws' dims, or both as plain (n_draws, n_obs) arrays."
            )
        present = [d for d in sample_dims if d in draws.dims]
        order = [*present, *[d for d in draws.dims if d not in present]]
        weights = weights.transpose(*order).values.reshape(shape)
    w = check_array(weights, "weights", ndim=2, finite=False)
    if w.shape != shape:
        raise ValueError(f"weights must have the draws' shape (n_draws, n_obs) = {shape}; got {w.shape}.")
    check_finite(w, "weights")
    if (w < 0).any():
        raise ValueError(
            f"weights must be >= 0; got {int((w < 0).sum())} negative entries (min {w.min():.3g}). "
            "If these are log-weights (e.g. arviz_stats' log_weights), pass np.exp(log_weights)."
        )
    sums = w.sum(axis=0)
    bad = np.abs(sums - 1.0) > WEIGHT_SUM_TOL
    if bad.any():
        j = int(np.argmax(bad))
        raise ValueError(
            f"weights must sum to one over the draws of each observation (within {WEIGHT_SUM_TOL:g}); "
            f"{int(bad.sum())} columns do not, e.g. column {j} sums to {sums[j]:.6g}. "
            "Normalise them: weights / weights.sum(axis=0)."
        )
    return w


def _weighted_summaries(arr: np.ndarray, w: np.ndarray, levels: np.ndarray):
    """Weighted quantiles (midpoint rule of :func:`from_draws`), means and standard deviations per column."""
    order = np.argsort(arr, axis=0, kind="stable")
    xs = np.take_along_axis(arr, order, axis=0)
    ws = np.take_along_axis(w, order, axis=0)
    # each draw sits at the middle of its weight's step of the weighted CDF (Hazen for equal weights)
    mid = np.cumsum(ws, axis=0) - 0.5 * ws
    q = np.empty((arr.shape[1], levels.size))
    for j in range(arr.shape[1]):
        q[j] = np.interp(levels, mid[:, j], xs[:, j])
    mean = np.einsum("sn,sn->n", w, arr)
    denom = 1.0 - np.einsum("sn,sn->n", w, w)
    var = np.einsum("sn,sn->n", w, (arr - mean) ** 2)
    # one draw holding all the weight has no spread to estimate: report 0, not a division by zero
    std = np.sqrt(np.divide(var, denom, out=np.zeros_like(var), where=denom > 0))
    return q, mean, std


def from_cdf_grid(grid, cdf, levels=None, *, obs=None, method: str = "cdf-grid") -> xr.Dataset:
    r"""A predictive distribution from CDF values on a grid, by monotone inversion.

    Parameters
    ----------
    grid : array_like, shape (G,) or (n, G)
        Increasing evaluation points (shared by all observations or per row).
    cdf : array_like, shape (n, G)
        CDF values in [0, 1], non-decreasing along the grid. Decreases are
        repaired by a running maximum; any beyond rounding noise (1e-9) emit a
        :class:`CalibprobWarning`, as crossing quantiles do in :func:`from_quantiles`.
    levels : array_like, optional
        Default :data:`DEFAULT_LEVELS`.

    Returns
    -------
    xarray.Dataset
        Quantiles by linear interpolation of the inverse CDF. Levels outside the
        CDF range covered by the grid are clipped to the grid's ends: make the
        grid cover the mass (e.g. mean ± 8 sd, as Song et al. 2019 do).

    References
    ----------
    Song, H., Diethe, T., Kull, M. and Flach, P. (2019). Distribution calibration
    for regression. ICML, §5 (a grid covering mean ± 8 sd).

    The predictive-distribution contract and its interpolation rule (linear in
    :math:`\Phi^{-1}(p)`, Gaussian tails): :doc:`/concepts`.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from scipy import stats
    >>> grid = np.linspace(-8.0, 8.0, 4001)
    >>> pred = calibprob.from_cdf_grid(grid, stats.norm.cdf(grid)[None, :], levels=[0.1, 0.5, 0.9])
    >>> bool(np.allclose(pred["quantile"].values, stats.norm.ppf([0.1, 0.5, 0.9]), atol=1e-3))
    True
    """
    levels = _levels_or_default(levels)
    F = check_array(cdf, "cdf", ndim=2)
    n, G = F.shape
    g = check_array(grid, "grid", ndim=(1, 2))
    g = np.broadcast_to(g, (n, G)) if g.ndim == 1 and g.size == G else g
    if g.shape != (n, G):
        raise ValueError(f"grid must have shape ({G},) or ({n}, {G}); got {np.shape(grid)}.")
    if np.any(np.diff(g, axis=1) <= 0):
        raise ValueError("grid must be strictly increasing along its last axis; sort it first.")
    if F.min() < -1e-9 or F.max() > 1 + 1e-9:
        raise ValueError(f"cdf values must lie in [0, 1]; got range [{F.min():.3g}, {F.max():.3g}].")
    F = np.clip(F, 0.0, 1.0)
    F_mono = np.maximum.accumulate(F, axis=1)
    drop = np.max(F_mono - F, axis=1)
    repaired = drop > 1e-9  # beyond rounding noise: the input was not a CDF there
    if repaired.any():
        warnings.warn(
            f"cdf decreased along the grid in {int(repaired.sum())} of {n} observations (largest drop "
            f"{float(drop.max()):.3g}); repaired by a running maximum, which can move quantiles far "
            "(a spike raises every later value). Check the CDF that was passed.",
            CalibprobWarning,
            stacklevel=2,
        )
    F = F_mono
    # Vectorised inversion: offset each row by 2*row so one searchsorted serves all rows.
    offset = 2.0 * np.arange(n)[:, None]
    flat = (F + offset).ravel()
    targets = (levels[None, :] + offset).ravel()
    pos = np.searchsorted(flat, targets, side="left").reshape(n, levels.size)
    pos -= (np.arange(n) * G)[:, None]
    hi = np.clip(pos, 1, G - 1)
    lo = hi - 1
    rows = np.arange(n)[:, None]
    F_lo, F_hi = F[rows, lo], F[rows, hi]
    g_lo, g_hi = g[rows, lo], g[rows, hi]
    w = np.where(F_hi > F_lo, (levels[None, :] - F_lo) / np.where(F_hi > F_lo, F_hi - F_lo, 1.0), 0.5)
    q = g_lo + np.clip(w, 0.0, 1.0) * (g_hi - g_lo)
    q = np.maximum.accumulate(q, axis=1)
    return _dataset(q, levels, _obs_coord(n, obs), method, "quantile")


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
    if "quantile" not in ds:
        raise ValueError(f"predictive Dataset needs a 'quantile' variable; has {list(ds.data_vars)}.")
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
    if ds.attrs.get("target_transform") not in (None, "", "none"):
        _check_transformed(ds, q)
    return ds


def is_interval_family(pred) -> bool:
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

    def disagree(sl):
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


def to_datatree(
    pred: xr.Dataset,
    y=None,
    *,
    n_draws: int = 1000,
    n_chains: int = 1,
    random_state=None,
    obs_dim: str | None = None,
    var_name: str = "y",
) -> xr.DataTree:
    r"""The prediction as an ArviZ 1 DataTree: predictive draws, observations, log density.

    Every group has ArviZ's layout, so ArviZ reads it without glue: its PPC and
    PIT plots (``az.plot_ppc_dist``, ``az.plot_ppc_pit``), the PIT / ECDF
    computations on ``posterior_predictive`` against ``observed_data``, and
    ``az.compare`` through :func:`heldout_elpd`.

    Parameters
    ----------
    pred : xarray.Dataset
        A predictive distribution (the contract of :mod:`calibprob.predictive`).
    y : array_like or xarray.DataArray, optional
        Observed values, one per observation (NumPy, or a 1-D DataArray with any
        dim name, aligned by position). Without it only ``posterior_predictive``
        is written.
    n_draws : int, default 1000
        Draws per chain.
    n_chains : int, default 1
        Chains. The draws are independent, so chains add nothing statistically;
        more than one only matters to tools that expect several.
    random_state : int or numpy.random.Generator, optional
        Seeds the draws (``pred.calib.sample``: exact Gaussian draws for the
        normal family, else the inverse transform :math:`Q_i(\Phi(U))`,
        :math:`U \sim N(0, 1)`, of the contract's quantile function).
    obs_dim : str, optional
        Name of the observation dimension. Default: ``y``'s dim when ``y`` is a
        DataArray (PyMC's ``obs_id``), else ``pred.attrs["obs_dim"]`` (set by
        :func:`from_draws`), else ``"obs"``.
    var_name : str, default "y"
        Name of the variable in every group.

    Returns
    -------
    xarray.DataTree
        Groups

        * ``posterior_predictive``: ``var_name(chain, draw, obs_dim)``;
        * ``observed_data``: ``var_name(obs_dim)`` (only with ``y``);
        * ``log_likelihood``: ``var_name(chain, draw, obs_dim)`` = :math:`\log
          f_i(y_i)` from ``pred.calib.logpdf(y)`` (only with ``y``). It is the
          held-out log predictive density, the same for every draw: ``pred`` is
          already the posterior predictive, there is no per-draw likelihood to
          store. Its sum over ``obs_dim`` (any draw) equals ``-n *
          evaluate(pred, y)["nll"]``. The sample dims keep ArviZ's layout of this
          group (and PyMC's, for a model scored on test data).

        The ``obs_dim`` coordinate is ``y``'s coordinate when ``y`` is a
        DataArray that has one (so the tree lines up with the user's own
        ``idata``), else ``pred["obs"]``.

    Notes
    -----
    ``az.loo`` and ``az.loo_pit`` do not apply: PSIS-LOO corrects an in-sample
    fit for leaving each point out, while here every ``y`` is already held out
    (the right importance weights are uniform). ArviZ 1.3 refuses the constant
    log likelihood ("All tail values are the same") and also needs a
    ``posterior`` group, which a predictive distribution does not have. Use
    :func:`heldout_elpd` for ``az.compare``, and ``az.plot_ppc_pit`` (the
    non-LOO PIT) for calibration plots.

    Raises
    ------
    ValueError
        A prediction breaking the contract, a bad ``n_draws`` / ``n_chains``, a
        ``y`` that is not finite or of the wrong length (both lengths named), or
        a dim name that clashes with ``chain`` / ``draw``.

    References
    ----------
    ArviZ's InferenceData schema (groups ``posterior_predictive``,
    ``observed_data``, ``log_likelihood``; sample dims ``chain``, ``draw``):
    https://python.arviz.org/en/stable/schema/schema.html.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> pred = calibprob.normal([0.0, 1.0, 2.0], [1.0, 1.0, 2.0])
    >>> dt = calibprob.to_datatree(pred, [0.1, 0.9, 2.5], n_draws=500, random_state=0)
    >>> sorted(dt.children)
    ['log_likelihood', 'observed_data', 'posterior_predictive']
    >>> dt.posterior_predictive["y"].dims, dt.posterior_predictive["y"].shape
    (('chain', 'draw', 'obs'), (1, 500, 3))
    >>> nll = float(calibprob.evaluate(pred, [0.1, 0.9, 2.5])["nll"])
    >>> bool(np.isclose(dt.log_likelihood["y"].isel(chain=0, draw=0).sum(), -3 * nll))
    True
    """
    validate(pred)
    n_draws = check_int(n_draws, "n_draws", minimum=1)
    n_chains = check_int(n_chains, "n_chains", minimum=1)
    if not isinstance(var_name, str) or not var_name:
        raise ValueError(f"var_name must be a non-empty string; got {var_name!r}.")
    n = pred.sizes["obs"]
    coord = pred["obs"].values
    dim = pred.attrs.get("obs_dim", "obs")
    yv = None
    if y is not None:
        yv = check_targets(y, n, "y", obs=pred["obs"].values)
        if isinstance(y, xr.DataArray):
            dim = y.dims[0]
            if dim in y.coords:
                coord = y[dim].values
    if obs_dim is not None:
        dim = obs_dim
    if not isinstance(dim, str) or dim in ("chain", "draw"):
        raise ValueError(
            f"obs_dim must be a string other than 'chain' and 'draw'; got {dim!r}. "
            "Pass obs_dim='obs' (or your model's name, e.g. 'obs_id')."
        )
    rng = np.random.default_rng(random_state)
    draws = pred.calib.sample(n_chains * n_draws, rng).values  # (obs, chain * draw)
    draws = draws.T.reshape(n_chains, n_draws, n)
    coords = {"chain": np.arange(n_chains), "draw": np.arange(n_draws), dim: coord}
    sample = ("chain", "draw", dim)
    attrs = {"created_by": "calibprob.to_datatree", "method": str(pred.attrs.get("method", "unknown"))}
    groups = {"posterior_predictive": xr.Dataset({var_name: (sample, draws)}, coords=coords, attrs=attrs)}
    if yv is not None:
        groups["observed_data"] = xr.Dataset({var_name: ((dim,), yv)}, coords={dim: coord}, attrs=attrs)
        logpdf = pred.calib.logpdf(yv).values
        ll = np.broadcast_to(logpdf, (n_chains, n_draws, n)).copy()
        groups["log_likelihood"] = xr.Dataset({var_name: (sample, ll)}, coords=coords, attrs=attrs)
    return xr.DataTree.from_dict(groups)


def heldout_elpd(data, *, var_name: str | None = None):
    r"""Held-out expected log predictive density of a DataTree, as ArviZ's ELPD result.

    For observations the model did not see, the elpd needs no leave-one-out
    correction: :math:`\widehat{\mathrm{elpd}}_i = \log \frac1S \sum_s
    p(y_i \mid \theta_s)` from the ``log_likelihood`` group (for a tree from
    :func:`to_datatree` this is :math:`\log f_i(y_i)` exactly; for a PyMC model
    scored on test data with ``pm.compute_log_likelihood`` it is the usual
    log pointwise predictive density). The result is ArviZ's k-fold container
    (its estimator without importance sampling, here one held-out fold), so
    ``az.compare({"a": heldout_elpd(dt_a), "b": heldout_elpd(dt_b)})`` ranks
    models on the test set, with the paired ``elpd_diff`` and its ``dse``.

    Parameters
    ----------
    data : xarray.DataTree
        A tree with a ``log_likelihood`` group whose variable has sample dims
        (``chain``, ``draw``) and one or more observation dims.
    var_name : str, optional
        The ``log_likelihood`` variable; required when there are several.

    Returns
    -------
    arviz_stats.utils.ELPDDataLOOKFold
        ``elpd`` (sum of ``elpd_i``), ``se`` = :math:`\sqrt{n\,\mathrm{Var}(\mathrm{elpd}_i)}`,
        ``elpd_i`` (pointwise, over the observation dims), ``n_folds == 1``;
        ``p`` is NaN (the effective number of parameters needs the in-sample fit).

    Raises
    ------
    ValueError
        No ``log_likelihood`` group, an ambiguous or unknown ``var_name``, or no
        ``chain`` / ``draw`` dims.

    References
    ----------
    Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model
    evaluation using leave-one-out cross-validation and WAIC. Statistics and
    Computing 27, eq. (3)-(5) (lppd, and the se of a sum of pointwise terms).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> y = np.random.default_rng(0).normal(size=200)
    >>> dt = calibprob.to_datatree(calibprob.normal(np.zeros(200), np.ones(200)), y, n_draws=10)
    >>> res = calibprob.heldout_elpd(dt)
    >>> bool(np.isclose(res.elpd, -200 * float(calibprob.evaluate(calibprob.normal(np.zeros(200), np.ones(200)), y)["nll"])))
    True
    """
    if not isinstance(data, xr.DataTree) or "log_likelihood" not in data.children:
        groups = list(data.children) if isinstance(data, xr.DataTree) else None
        raise ValueError(
            "data must be a DataTree with a 'log_likelihood' group; got "
            + (f"a tree with groups {groups}" if groups is not None else f"a {type(data).__name__}")
            + ". Build one with calibprob.to_datatree(pred, y)."
        )
    ll = _pick_variable(data["log_likelihood"].dataset, var_name, "log_likelihood group")
    sample = [d for d in ("chain", "draw") if d in ll.dims]
    if not sample:
        raise ValueError(
            f"log_likelihood variable {ll.name!r} has dims {ll.dims}, without 'chain'/'draw'; "
            "the ArviZ layout puts the sample dims first: pass idata.log_likelihood (dims chain, draw, obs)."
        )
    s = int(np.prod([ll.sizes[d] for d in sample]))
    obs_dims = [d for d in ll.dims if d not in sample]
    return _heldout_elpd_data(ll.transpose(*sample, ...).values.reshape(s, -1), ll, obs_dims)


def _heldout_elpd_data(ll: np.ndarray, like=None, obs_dims=("obs",)):
    r"""ArviZ's one-fold ELPD result from pointwise held-out log-likelihoods ``ll`` of shape (S, n).

    :math:`\mathrm{elpd}_i = \log\frac1S\sum_s e^{\ell_{si}}` (no importance
    sampling: the points are held out), :math:`p_i = \mathrm{elpd}_i - \overline{\ell_{\cdot i}}`;
    ``like`` (a DataArray) lends the observation dims' sizes and coordinates.
    """
    from arviz_stats.utils import ELPDDataLOOKFold  # lazy: ArviZ takes ~1 s to import

    S = ll.shape[0]
    elpd_flat = special.logsumexp(ll, axis=0) - np.log(S)
    p_flat = elpd_flat - ll.mean(axis=0)
    if like is None:
        shape, coords, name = (ll.shape[1],), {"obs": np.arange(ll.shape[1])}, None
    else:
        shape = tuple(like.sizes[d] for d in obs_dims)
        coords, name = {d: like[d] for d in obs_dims if d in like.coords}, like.name
    elpd_i = xr.DataArray(elpd_flat.reshape(shape), dims=list(obs_dims), coords=coords, name=name)
    p_i = xr.DataArray(p_flat.reshape(shape), dims=list(obs_dims), coords=coords)
    n = int(elpd_flat.size)
    return ELPDDataLOOKFold(
        elpd=float(elpd_flat.sum()),
        se=float(np.sqrt(n * elpd_flat.var())),
        p=float(p_flat.sum()),
        n_samples=S,
        n_data_points=n,
        scale="log",
        warning=False,
        good_k=None,  # type: ignore[arg-type]  # k-fold has no Pareto-k threshold; ArviZ's own k-fold passes None
        elpd_i=elpd_i,
        n_folds=1,
        p_kfold_i=p_i,
    )


# ---------------------------------------------------------------------------
# The `calib` accessor
# ---------------------------------------------------------------------------


def _as_values(ds: xr.Dataset, y, name: str = "y") -> xr.DataArray:
    """Observed values as a DataArray whose first dim is obs.

    A scalar is broadcast to every observation; a DataArray that has an ``obs``
    dim plus others (e.g. several y per observation) keeps xarray semantics;
    everything else (NumPy of any rank, a 1-D DataArray with any dim name such
    as PyMC's ``obs_id``) goes through :func:`~calibprob._validation.check_targets`
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

    Gaussian-family Datasets (``attrs["family"] == "normal"``) are evaluated
    exactly from ``loc``/``scale``; all others through the piecewise-Gaussian
    quantile function described in :mod:`calibprob.predictive`.
    """

    def __init__(self, ds: xr.Dataset):
        self._ds = ds

    # -- basic views ------------------------------------------------------
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
        return _tr.dataset_transform(self._ds)

    def _zq(self) -> np.ndarray:
        """Quantiles on the transformed scale, where the law is piecewise Gaussian."""
        return _tr.forward(cast(str, self.transform), self.quantiles)  # only called on a transformed Dataset

    def _apply(self, func, y, name="y", out_name=None) -> xr.DataArray:
        yda = _as_values(self._ds, y, name)
        if self.is_normal:
            loc, scale = self._ds["loc"], self._ds["scale"]
            res = func(None, None, yda, loc, scale)
        else:
            res = xr.apply_ufunc(
                lambda q, v: func(q, self.levels, v, None, None),
                self._ds["quantile"],
                yda,
                input_core_dims=[["level"], []],
                output_core_dims=[[]],
            )
        return res.rename(out_name) if out_name else res

    # -- evaluation -------------------------------------------------------
    def cdf(self, y) -> xr.DataArray:
        """Predictive CDF :math:`F_i(y_i)`; ``y`` has one value per obs (axis 0)."""

        t = self.transform

        def f(q, levels, v, loc, scale):
            if q is None:
                return xr.apply_ufunc(special.ndtr, (v - loc) / scale)
            if t is not None:
                tr = _tr
                return tr.cdf(tr.forward(t, q), levels, v, t)
            return quantile_cdf(q, levels, v)

        return self._apply(f, y, out_name="cdf")

    def pit(self, y) -> xr.DataArray:
        """Probability integral transform values :math:`F_i(y_i)` (same as :meth:`cdf`)."""
        return self.cdf(y).rename("pit")

    def logpdf(self, y) -> xr.DataArray:
        """Log predictive density at ``y`` (exact for the normal family)."""

        t = self.transform

        def f(q, levels, v, loc, scale):
            if q is None:
                zz = (v - loc) / scale
                return -0.5 * zz * zz - _LOG_SQRT_2PI - np.log(scale)
            if t is not None:
                tr = _tr
                return tr.logpdf(tr.forward(t, q), levels, v, t)
            return quantile_logpdf(q, levels, v)

        return self._apply(f, y, out_name="logpdf")

    def zscore(self, y) -> xr.DataArray:
        r"""Probit-scale PIT :math:`\Phi^{-1}(F_i(y_i))`, never rounded (:func:`quantile_zscore`).

        The z-score :math:`(y_i-\mu_i)/\sigma_i` for the normal family; for any
        Dataset, :math:`\log F_i(y_i) = \log\Phi(u_i)` from it is exact in the tails.
        """
        yv = _as_values(self._ds, y)
        if yv.ndim != 1:
            raise ValueError(f"y must have one value per observation (1-D); got dims {yv.dims}.")
        if self.is_normal:
            vals = (yv.values - self._ds["loc"].values) / self._ds["scale"].values
        elif self.transform is not None:
            vals = _tr.zscore(self._zq(), self.levels, yv.values, self.transform)
        else:
            vals = quantile_zscore(self.quantiles, self.levels, yv.values)
        return xr.DataArray(vals, dims=("obs",), coords={"obs": self._ds["obs"]}, name="zscore")

    def ppf_zscore(self, u) -> np.ndarray:
        r"""Quantiles :math:`Q_i(\Phi(u_{ij}))` at probit-scale levels, shape (n_obs, P) (:func:`quantile_ppf_zscore`).

        ``u`` has shape (P,) (shared) or (n_obs, P); the inverse of :meth:`zscore`.
        """
        u = np.asarray(u, float)
        n = self._ds.sizes["obs"]
        if u.ndim not in (1, 2) or (u.ndim == 2 and u.shape[0] != n):
            raise ValueError(f"u must have shape (P,) or ({n}, P); got {u.shape}.")
        if self.is_normal:
            ub = np.broadcast_to(u, (n,) + u.shape[-1:])
            return self._ds["loc"].values[:, None] + self._ds["scale"].values[:, None] * ub
        if self.transform is not None:
            return _tr.inverse(self.transform, quantile_ppf_zscore(self._zq(), self.levels, u))
        return quantile_ppf_zscore(self.quantiles, self.levels, u)

    def pdf(self, y) -> xr.DataArray:
        """Predictive density at ``y``."""
        return cast(xr.DataArray, np.exp(self.logpdf(y))).rename("pdf")  # numpy ufuncs keep a DataArray

    def ppf(self, p) -> xr.DataArray:
        """Quantile function at probabilities ``p`` (scalar → dims (obs,), array → (obs, prob))."""
        p_arr = np.asarray(p, dtype=float)
        for v in np.atleast_1d(p_arr):
            if not 0.0 < v < 1.0:
                raise ValueError(
                    f"p must be in (0, 1); got {v!r}. Quantiles at 0 or 1 are infinite under the normal tail rule."
                )
        if self.is_normal:
            zz = special.ndtri(np.atleast_1d(p_arr))
            vals = self._ds["loc"].values[:, None] + self._ds["scale"].values[:, None] * zz
            vals = vals[:, 0] if p_arr.ndim == 0 else vals
        elif self.transform is not None:
            vals = _tr.inverse(self.transform, quantile_ppf(self._zq(), self.levels, p_arr))
        else:
            vals = quantile_ppf(self.quantiles, self.levels, p_arr)
        if p_arr.ndim == 0:
            return xr.DataArray(vals, dims=("obs",), coords={"obs": self._ds["obs"]}, name="ppf")
        return xr.DataArray(
            vals,
            dims=("obs", "prob"),
            coords={"obs": self._ds["obs"], "prob": np.atleast_1d(p_arr)},
            name="ppf",
        )

    def interval(self, confidence_level) -> xr.Dataset:
        """Central interval ``[Q((1-c)/2), Q((1+c)/2)]`` at each confidence level ``c``.

        Returns
        -------
        xarray.Dataset
            ``lower`` and ``upper``; dims (obs,) for a scalar level, else
            (obs, confidence_level).
        """
        scalar = np.ndim(confidence_level) == 0
        c = check_confidence_levels(confidence_level, "confidence_level")
        p = np.concatenate([(1 - c) / 2, (1 + c) / 2])
        vals = self.ppf(p).values
        k = c.size
        lower, upper = vals[:, :k], vals[:, k:]
        ds = xr.Dataset(
            {"lower": (("obs", "confidence_level"), lower), "upper": (("obs", "confidence_level"), upper)},
            coords={"obs": self._ds["obs"], "confidence_level": c},
        )
        return ds.isel(confidence_level=0) if scalar else ds

    def _moments(self):
        if self.transform is not None:
            return _tr.moments(self._zq(), self.levels, self.transform)
        return quantile_moments(self.quantiles, self.levels)

    def mean(self) -> xr.DataArray:
        """Predictive mean: stored ``mean`` if present, else exact from the quantile function."""
        if "mean" in self._ds:
            return self._ds["mean"]
        m, _ = self._moments()
        return xr.DataArray(m, dims=("obs",), coords={"obs": self._ds["obs"]}, name="mean")

    def std(self) -> xr.DataArray:
        """Predictive standard deviation: stored ``std`` if present, else exact from the quantile function."""
        if "std" in self._ds:
            return self._ds["std"]
        _, s = self._moments()
        return xr.DataArray(s, dims=("obs",), coords={"obs": self._ds["obs"]}, name="std")

    def median(self) -> xr.DataArray:
        """Predictive median ``Q(0.5)``."""
        return self.ppf(0.5).rename("median")

    def sample(self, n: int, rng: np.random.Generator | int | None = None) -> xr.DataArray:
        """``n`` draws per observation, dims (obs, sample)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n must be a positive integer; got {n!r}.")
        rng = np.random.default_rng(rng)
        if self.is_normal:
            vals = self._ds["loc"].values[:, None] + self._ds["scale"].values[:, None] * rng.standard_normal(
                (self._ds.sizes["obs"], n)
            )
        elif self.transform is not None:
            vals = _tr.inverse(self.transform, quantile_sample(self._zq(), self.levels, n, rng))
        else:
            vals = quantile_sample(self.quantiles, self.levels, n, rng)
        return xr.DataArray(vals, dims=("obs", "sample"), coords={"obs": self._ds["obs"]}, name="sample")
