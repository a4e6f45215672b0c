"""The report's covariate-shift section: the classifier two-sample diagnostic per data set, the weights' ESS.

Shown only when the results hold ``shift_auc`` (a spec data set declared with ``shift``, run beside
its tilted twin: ``calibprob.compare.spec.shift``) or ``weights_ess`` (a method with ``weights``).
Per data set, over repetitions: the mean cross-fitted AUC of a classifier separating the
calibration inputs from the test inputs (0.5: no shift) with its standard error, the share of
repetitions whose permutation p-value is below 0.05, and the effective sample size of the
estimated ratio at the calibration rows; per weighted pipeline, the mean Kish effective sample size
of the weights it calibrated with (Tibshirani et al. 2019 report about 72 of 376 on airfoil).
"""

from __future__ import annotations

import html

import numpy as np
import xarray as xr

__all__ = ["SHIFT_SECTION", "shift_html"]

#: The HTML section shown after "Coverage and width" when the results carry shift diagnostics.
SHIFT_SECTION = "Covariate shift"


def _mean_se(values: np.ndarray) -> str:
    v = values[np.isfinite(values)]
    if v.size == 0:
        return "—"
    se = v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan")
    return f"{v.mean():.3f} ± {se:.3f}" if np.isfinite(se) else f"{v.mean():.3f}"


def _rows_per_dataset(results: xr.Dataset) -> list[list[str]]:
    rows = []
    for d in results["dataset"].values:
        sub = results.sel(dataset=d)
        auc = np.asarray(sub["shift_auc"].values, float).ravel()
        if not np.isfinite(auc).any():
            continue
        p = (
            np.asarray(sub["shift_pvalue"].values, float).ravel()
            if "shift_pvalue" in sub
            else np.full(auc.size, np.nan)
        )
        ess = np.asarray(sub["shift_ess"].values, float).ravel() if "shift_ess" in sub else np.full(auc.size, np.nan)
        finite_p = p[np.isfinite(p)]
        share = f"{np.mean(finite_p < 0.05):.2f}" if finite_p.size else "—"
        rows.append([str(d), _mean_se(auc), share, _mean_se(ess)])
    return rows


def _ess_rows(results: xr.Dataset) -> list[list[str]]:
    ess = results["weights_ess"]
    rows = []
    for d in results["dataset"].values:
        for c in results["calibrator"].values:
            sel = ess.sel(dataset=d, calibrator=c)
            v = np.asarray(sel.values, float).ravel()
            if np.isfinite(v).any():
                n_cal = results["n_calibrate"].sel(dataset=d).values if "n_calibrate" in results else np.nan
                n = f"{np.nanmean(np.asarray(n_cal, float)):.0f}"
                rows.append([str(d), str(c), _mean_se(v), n])
    return rows


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def shift_html(results: xr.Dataset) -> str:
    """The section's HTML ('' when the results hold neither ``shift_auc`` nor ``weights_ess``)."""
    parts = []
    if "shift_auc" in results:
        rows = _rows_per_dataset(results)
        if rows:
            parts.append(
                '<p class="note">A classifier separating the calibration inputs from the test inputs, cross-fitted: '
                "its AUC (0.5 when the test inputs follow the calibration law), the share of repetitions whose "
                "permutation p-value is below 0.05, and the effective sample size of its likelihood ratio at the "
                "calibration rows (what a weighted calibration keeps). Mean ± se over repetitions.</p>"
                + _table(["data set", "AUC", "share p < 0.05", "ESS of the ratio"], rows)
            )
    if "weights_ess" in results and "calibrator" in results["weights_ess"].dims:
        rows = _ess_rows(results)
        if rows:
            parts.append(
                '<p class="note">Weighted pipelines: Kish\'s effective sample size of the calibration weights '
                "they used, beside the calibration part's size.</p>"
                + _table(["data set", "pipeline", "ESS of the weights", "calibration points"], rows)
            )
    return "\n".join(parts)
