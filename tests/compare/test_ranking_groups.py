"""The ranking never names as best for width a method whose worst group under-covers."""

from __future__ import annotations

import numpy as np
import xarray as xr

from calibprob.compare.ranking import format_ranking, rank_results, worst_group_coverage


def _results(group_cov, R=3, seed=0):
    """Two calibrators, one level; ``narrow`` is narrower, both cover 0.9 marginally."""
    rng = np.random.default_rng(seed)
    gc = np.asarray(group_cov, float)[None, None, :, None, :].repeat(R, 1)
    return xr.Dataset(
        {
            "nll": (("dataset", "repetition", "calibrator"), rng.normal(size=(1, R, 2))),
            "coverage": (("dataset", "repetition", "calibrator", "confidence_level"), np.full((1, R, 2, 1), 0.9)),
            "width": (
                ("dataset", "repetition", "calibrator", "confidence_level"),
                np.array([1.0, 2.0])[None, None, :, None] + 0.01 * rng.normal(size=(1, R, 2, 1)),
            ),
            "n_test": (("dataset", "repetition"), np.full((1, R), 200)),
            "group_coverage": (("dataset", "repetition", "calibrator", "confidence_level", "group"), gc),
            "group_count": (("dataset", "repetition", "calibrator", "group"), np.full((1, R, 2, 2), 100)),
        },
        coords={
            "dataset": ["d"],
            "repetition": np.arange(R),
            "calibrator": ["narrow", "wide"],
            "confidence_level": [0.9],
            "group": ["x", "y"],
        },
    )


def test_pooled_worst_group_by_hand():
    cov = xr.DataArray(
        [[0.95, 0.70], [0.93, np.nan], [0.91, 0.80]], dims=("repetition", "group"), coords={"group": ["a", "b"]}
    )
    n = xr.DataArray([[100, 50], [100, 0], [80, 20]], dims=("repetition", "group"))
    r = worst_group_coverage(cov, n, 0.9)
    pooled_b = (0.70 * 50 + 0.80 * 20) / 70  # the NaN repetition (no point of b) is left out
    assert str(r["worst_group"].item()) == "b"
    assert float(r["worst_group_coverage"]) == np.float64(pooled_b)
    assert float(r["worst_group_se"]) == np.sqrt(0.9 * 0.1 / 70)
    assert bool(r["group_undercovers"]) == (pooled_b < 0.9 - 2 * np.sqrt(0.09 / 70))


def test_a_method_whose_worst_group_undercovers_is_never_best_for_width_and_the_ranking_says_so():
    rk = rank_results(_results([[0.98, 0.60], [0.90, 0.90]]))
    at = {"dataset": "d", "confidence_level": 0.9}
    assert bool(rk["group_undercovers"].sel(**at, pipeline="narrow"))
    assert not bool(rk["undercovers"].sel(**at, pipeline="narrow"))  # marginal coverage hides it
    assert int(rk["width_rank"].sel(**at, pipeline="narrow")) == 0
    assert int(rk["width_rank"].sel(**at, pipeline="wide")) == 1
    text = format_ranking(rk)
    line = next(t for t in text.splitlines() if " narrow " in t and "0.9000" in t)
    assert "worst group y under-covers (0.6000 ± 0.0173)" in line  # se sqrt(.09/300)
    assert "never named best for width" in text


def test_a_worst_group_within_two_se_keeps_its_rank():
    # 0.87 pooled over 300 points: se 0.0173, 0.9 - 2 se = 0.865 < 0.87
    rk = rank_results(_results([[0.93, 0.87], [0.90, 0.90]]))
    at = {"dataset": "d", "confidence_level": 0.9}
    assert not bool(rk["group_undercovers"].sel(**at, pipeline="narrow"))
    assert int(rk["width_rank"].sel(**at, pipeline="narrow")) == 1
    assert "worst group" not in format_ranking(rk)


def test_without_group_diagnostics_the_ranking_is_unchanged():
    res = _results([[0.98, 0.60], [0.90, 0.90]]).drop_vars(["group_coverage", "group_count", "group"])
    rk = rank_results(res)
    assert "group_undercovers" not in rk
    assert int(rk["width_rank"].sel(dataset="d", confidence_level=0.9, pipeline="narrow")) == 1
