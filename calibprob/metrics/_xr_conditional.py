"""xarray layer of the conditional-coverage diagnostics: their options, attributes and the Dataset :func:`evaluate` adds.

The array functions (coverage by group, coverage gap, SSC, worst slab, HSIC) are in
``calibprob.metrics._conditional``; this module names, checks and assembles their results.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.validation import check_int
from calibprob.metrics._conditional import (
    _check_delta,
    _check_slab_X,
    coverage_by_group,
    coverage_gap,
    hsic,
    size_stratified_coverage,
    worst_group,
    worst_slab_coverage,
)

__all__ = ["DIAGNOSTIC_OPTIONS", "check_diagnostic_options", "check_slab_features", "diagnostics_dataset"]

#: Options of the diagnostics in :func:`calibprob.evaluate` (its ``diagnostics=`` argument) and their defaults.
DIAGNOSTIC_OPTIONS = {
    "num_bins": 3,
    "delta": 0.1,
    "n_directions": 1000,
    "find_fraction": 0.25,
    "seed": 0,
    "hsic_kernel_sizes": (1.0, 1.0),
}

_PAPER_DING = "Ding, Angelopoulos, Bates, Jordan & Tibshirani (2023), Class-conditional conformal prediction"
_DIAG_ATTRS = {
    "group_count": ("points per group", "n_g = #{i : g_i = g}", ""),
    "group_coverage": ("coverage within each group", "mean_{i in g} 1[l_i <= y_i <= u_i]", _PAPER_DING),
    "group_coverage_se": (
        "standard error of the group coverage",
        "sqrt(c_g (1 - c_g) / n_g), plugged in (0 at c_g = 0 or 1)",
        "",
    ),
    "group_width": ("mean interval width within each group", "mean_{i in g} (u_i - l_i); inf if any is", ""),
    "group_infinite": (
        "share of the group's points whose interval is infinite (covered trivially)",
        "mean_{i in g} 1[u_i - l_i = inf]",
        "",
    ),
    "worst_group": ("the group of lowest coverage", "argmin_g c_g (ties: the larger group)", ""),
    "worst_group_coverage": ("worst-group coverage", "min_g c_g", _PAPER_DING),
    "worst_group_count": ("points in the worst group", "n_{g*}", ""),
    "coverage_gap": ("coverage gap across groups", "mean_g |c_g - (1 - alpha)|", _PAPER_DING),
    "coverage_gap_weighted": ("weighted coverage gap", "sum_g (n_g / n) |c_g - (1 - alpha)|", _PAPER_DING),
    "ssc_coverage": (
        "size-stratified coverage",
        "coverage within num_bins near-equal bins of width, narrowest first (np.argsort, np.array_split)",
        "Angelopoulos & Bates (2021), §3; MAPIE regression_ssc",
    ),
    "hsic": (
        "HSIC between coverage and width",
        "sqrt(tr(L H K H)) / (n - 1), K = exp(-(w_i - w_j)^2 / k1), L = exp(-(c_i - c_j)^2 / k2)",
        "Feldman, Bates & Romano (2021); MAPIE hsic",
    ),
    "worst_slab_coverage": (
        "worst-slab coverage",
        "min over directions v and slabs a <= v'x <= b of mass >= delta of the coverage in the slab; standardised X; "
        "slab found on find_fraction of the points, coverage measured on the others",
        "Cauchois, Gupta & Duchi (2021); Romano, Sesia & Candès (2020)",
    ),
}


def _attrs(name: str, **extra: Any) -> dict:
    long_name, definition, paper = _DIAG_ATTRS[name]
    out = {"long_name": long_name, "definition": definition}
    if paper:
        out["paper"] = paper
    return out | extra


def check_diagnostic_options(diagnostics: dict[str, Any] | None) -> dict:
    """The options of the conditional diagnostics, defaults filled in; unknown keys are refused."""
    if diagnostics is None:
        return dict(DIAGNOSTIC_OPTIONS)
    if not isinstance(diagnostics, dict):
        raise TypeError(f"diagnostics must be a dict of options or None; got {type(diagnostics).__name__}.")
    unknown = sorted(set(diagnostics) - set(DIAGNOSTIC_OPTIONS))
    if unknown:
        raise ValueError(f"diagnostics has unknown option(s) {unknown}; the options are {sorted(DIAGNOSTIC_OPTIONS)}.")
    opts = DIAGNOSTIC_OPTIONS | diagnostics
    for key, minimum in (("num_bins", 1), ("n_directions", 1), ("seed", 0)):
        check_int(opts[key], f"diagnostics['{key}']", minimum=minimum)
    _check_delta(opts["delta"])
    ff = opts["find_fraction"]
    if ff is not None and (isinstance(ff, bool) or not isinstance(ff, int | float) or not 0 < ff < 1):
        raise ValueError(
            f"diagnostics['find_fraction'] must be in (0, 1), the share of points that finds the worst slab, "
            f"or None for the in-sample estimate; got {ff!r}."
        )
    return opts


def check_slab_features(X: ArrayLike, n: int) -> np.ndarray:
    """``X`` for worst-slab coverage: 2-D, one finite row per observation (DataFrame / DataArray accepted)."""
    return _check_slab_X(X, n)


def diagnostics_dataset(
    covered: np.ndarray,
    widths: np.ndarray,
    levels: np.ndarray,
    *,
    groups: np.ndarray | None = None,
    X: np.ndarray | None = None,
    options: dict[str, Any] | None = None,
) -> xr.Dataset:
    """The conditional-coverage diagnostics as Dataset variables over ``confidence_level`` (and ``group``).

    Parameters
    ----------
    covered, widths : ndarray, shape (n, k)
        From :func:`coverage_indicators`.
    levels : ndarray, shape (k,)
        The confidence levels (the ``confidence_level`` coordinate).
    groups : ndarray, shape (n,), optional
        Checked labels (``calibprob._core.validation.check_groups``).
    X : ndarray, shape (n, d), optional
        Checked features (:func:`check_slab_features`).
    options : dict, optional
        :data:`DIAGNOSTIC_OPTIONS`.

    Returns
    -------
    xarray.Dataset
        The variables listed in :func:`calibprob.evaluate`.
    """
    opts = check_diagnostic_options(options)
    lv = ("confidence_level",)
    data: dict = {}
    if groups is not None:
        data |= _group_vars(covered, widths, levels, groups)
    data["ssc_coverage"] = xr.DataArray(
        size_stratified_coverage(covered, widths, opts["num_bins"]),
        dims=("confidence_level", "ssc_bin"),
        attrs=_attrs("ssc_coverage", num_bins=int(opts["num_bins"])),
    )
    ks = tuple(float(k) for k in opts["hsic_kernel_sizes"])
    data["hsic"] = xr.DataArray(
        hsic(covered, widths, kernel_sizes=ks, seed=opts["seed"]), dims=lv, attrs=_attrs("hsic", kernel_sizes=ks)
    )
    if X is not None:
        wsc = worst_slab_coverage(
            X,
            covered,
            delta=opts["delta"],
            n_directions=opts["n_directions"],
            find_fraction=opts["find_fraction"],
            seed=opts["seed"],
        )
        split = "in-sample" if opts["find_fraction"] is None else float(opts["find_fraction"])
        data["worst_slab_coverage"] = xr.DataArray(
            wsc,
            dims=lv,
            attrs=_attrs(
                "worst_slab_coverage",
                delta=float(opts["delta"]),
                n_directions=int(opts["n_directions"]),
                find_fraction=split,
                seed=int(opts["seed"]),
            ),
        )
    coords = {"ssc_bin": ("ssc_bin", np.arange(opts["num_bins"]), {"description": "width bin, narrowest first"})}
    return xr.Dataset(data, coords=coords)


def _group_vars(covered: np.ndarray, widths: np.ndarray, levels: np.ndarray, groups: np.ndarray) -> dict:
    """The per-group variables, the worst group and the coverage gaps."""
    r = coverage_by_group(covered, widths, groups)
    gl = ("group", "confidence_level")
    idx, worst_cov = worst_group(r["coverage"], r["count"])
    group = xr.DataArray(r["labels"], dims="group", attrs={"description": "group label"})
    return {
        "group_count": xr.DataArray(r["count"], dims="group", coords={"group": group}, attrs=_attrs("group_count")),
        "group_coverage": xr.DataArray(r["coverage"], dims=gl, attrs=_attrs("group_coverage")),
        "group_coverage_se": xr.DataArray(r["se"], dims=gl, attrs=_attrs("group_coverage_se")),
        "group_width": xr.DataArray(r["width"], dims=gl, attrs=_attrs("group_width")),
        "group_infinite": xr.DataArray(r["infinite"], dims=gl, attrs=_attrs("group_infinite")),
        "worst_group": xr.DataArray(r["labels"][idx], dims="confidence_level", attrs=_attrs("worst_group")),
        "worst_group_coverage": xr.DataArray(worst_cov, dims="confidence_level", attrs=_attrs("worst_group_coverage")),
        "worst_group_count": xr.DataArray(r["count"][idx], dims="confidence_level", attrs=_attrs("worst_group_count")),
        "coverage_gap": xr.DataArray(
            coverage_gap(covered, groups, levels), dims="confidence_level", attrs=_attrs("coverage_gap")
        ),
        "coverage_gap_weighted": xr.DataArray(
            coverage_gap(covered, groups, levels, weighted=True),
            dims="confidence_level",
            attrs=_attrs("coverage_gap_weighted"),
        ),
    }
