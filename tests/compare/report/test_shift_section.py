"""The report's covariate-shift section (issue 39, item 5): the diagnostic per data set and the weights' ESS."""

from __future__ import annotations

import numpy as np
import xarray as xr

from calibprob.compare.report.shift import shift_html


def _results(with_shift=True, with_ess=True):
    rng = np.random.default_rng(0)
    ds = xr.Dataset(coords={"dataset": ["a", "a-shifted"], "repetition": [0, 1, 2], "calibrator": ["plain", "w"]})
    if with_shift:
        ds["shift_auc"] = (("dataset", "repetition"), np.array([[0.5, 0.52, 0.48], [0.9, 0.88, 0.86]]))
        ds["shift_pvalue"] = (("dataset", "repetition"), np.array([[0.6, 0.3, 0.9], [0.02, 0.02, 0.2]]))
        ds["shift_ess"] = (("dataset", "repetition"), rng.uniform(60, 80, size=(2, 3)))
    if with_ess:
        ess = np.full((2, 3, 2), np.nan)
        ess[:, :, 1] = [[100.0, 100.0, 100.0], [70.0, 72.0, 74.0]]
        ds["weights_ess"] = (("dataset", "repetition", "calibrator"), ess)
        ds["n_calibrate"] = (("dataset", "repetition"), np.full((2, 3), 100))
    return ds


def test_the_section_tabulates_the_auc_the_share_and_the_ess():
    page = shift_html(_results())
    assert "<td>a-shifted</td><td>0.880 ± 0.012</td><td>0.67</td>" in page  # mean, se of (.9, .88, .86); 2 of 3
    assert "<td>a</td><td>0.500 ± 0.012</td><td>0.00</td>" in page
    assert "<td>a-shifted</td><td>w</td><td>72.000 ± 1.155</td><td>100</td>" in page
    assert "<td>plain</td>" not in page  # an unweighted pipeline has no weights


def test_no_section_without_shift_or_weights():
    assert shift_html(_results(False, False)) == ""
    assert "AUC" not in shift_html(_results(False, True)) and "AUC" in shift_html(_results(True, False))
