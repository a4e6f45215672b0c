"""Mondrian's quantile path per group (issue 35): every post-processor of the registry, each level on its own.

A group keeps the quantiles its own size resolves; beyond its reach ``calib.interval`` gives
(-inf, inf), as ``predict_interval`` does and as the fit-time warning says. Independent
references: the plain (ungrouped) calibrator fitted on one group's rows alone (brute force),
and the exact minimum group sizes of :func:`calibprob.min_group_size`.
"""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest

import calibprob
from calibprob.calibrators.grouping.mondrian import _gives_intervals, _interval_ends, interval_sides
from tests.test_common import POST_PROCESSORS, problem  # noqa: F401  (problem: the module-scoped fixture)

#: Calibration group sizes: a 2-point group, a 12-point one, the rest split in two large groups.
_SMALL = {"two": 2, "twelve": 12}


def _labels(n: int) -> np.ndarray:
    small = np.concatenate([np.full(k, name) for name, k in _SMALL.items()])
    rest = np.where(np.arange(n - small.size) % 2 == 0, "a", "b")
    return np.concatenate([small, rest])


def _tails(levels) -> np.ndarray:
    """The probabilities of the central intervals at ``levels``, computed as ``calib.interval`` does."""
    c = np.asarray(levels, float)
    return np.unique(np.concatenate([(1 - c) / 2, (1 + c) / 2]))


def _make(name, p):
    est = POST_PROCESSORS[name](p)
    if "extrapolate" in est.get_params():
        est.set_params(extrapolate=False)  # the honest default: no quantile beyond the calibration scores
    return est


def _fit(name, p, request, fallback):
    pred_cal, _ = p["normal"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", calibprob.CalibprobWarning)
        m = calibprob.Mondrian(_make(name, p), fallback=fallback, confidence_level=request)
        return m.fit(pred_cal, p["y_cal"], groups=_labels(pred_cal.sizes["obs"]))


def _fitted(m, label) -> bool:
    return m.calibrators_[list(m.groups_).index(label)] is not None


def _both_paths(m, pred_te, g_te, request):
    """``predict_interval`` at ``request``, and the intervals read from ``predict``'s quantiles (None: intervals only).

    A group too small to fit its calibrator at all (GP-Beta's inducing points need more than 2) has no
    distribution to predict without the pooled fallback: ``predict`` says so, and its rows are left out there.
    """
    iv = m.predict_interval(pred_te, request, groups=g_te)
    if _gives_intervals(m.calibrator):
        return iv, None
    keep = np.ones(g_te.size, dtype=bool)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", calibprob.CalibprobWarning)
        if not _fitted(m, "two") and m.fallback is None:
            with pytest.raises(ValueError, match=r"group 'two' has 2 calibration point\(s\), too few to fit"):
                m.predict(pred_te, levels=_tails(request), groups=g_te)
            keep = g_te != "two"
        q = m.predict(pred_te.isel(obs=np.flatnonzero(keep)), levels=_tails(request), groups=g_te[keep])
    return iv, q.calib.interval(request)


@pytest.mark.parametrize("fallback", [None, "pooled"])
@pytest.mark.parametrize("name", sorted(POST_PROCESSORS))
def test_adding_a_level_leaves_both_paths_unchanged(name, fallback, problem):  # noqa: F811
    """0.8 asked alone or with 0.9: every row's 0.8 interval is the same bits, from both paths."""
    _, pred_te = problem["normal"]
    g_te = np.resize(np.array(["two", "twelve", "a", "b"]), pred_te.sizes["obs"])
    out = {}
    for request in ([0.8], [0.8, 0.9]):
        m = _fit(name, problem, request, fallback)
        out[tuple(request)] = _both_paths(m, pred_te, g_te, request)
    (iv1, qi1), (iv2, qi2) = out[(0.8,)], out[(0.8, 0.9)]
    for end in ("lower", "upper"):
        np.testing.assert_array_equal(
            iv1[end].sel(confidence_level=0.8).values, iv2[end].sel(confidence_level=0.8).values
        )
        if qi1 is not None:
            a, b = qi1[end].sel(confidence_level=0.8).values, qi2[end].sel(confidence_level=0.8).values
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", sorted(POST_PROCESSORS))
def test_two_points_get_infinite_ends_and_big_groups_their_own(name, problem):  # noqa: F811
    """At 0.9: the 2-point group (-inf, inf) from both paths; group 'a' finite, the plain calibrator on its rows alone."""
    pred_cal, pred_te = problem["normal"]
    g_cal = _labels(pred_cal.sizes["obs"])
    g_te = np.resize(np.array(["two", "twelve", "a", "b"]), pred_te.sizes["obs"])
    m = _fit(name, problem, [0.8, 0.9], None)
    iv = m.predict_interval(pred_te, [0.8, 0.9], groups=g_te)
    sides = interval_sides(m.calibrator)
    two = g_te == "two"
    if sides:  # the online recalibrator needs no minimum: its stream guarantee holds from one point
        assert calibprob.min_group_size(0.9, m.calibrator) > 2
        for end, inf in (("lower", -np.inf), ("upper", np.inf)):
            assert (iv[end].sel(confidence_level=0.9).values[two] == inf).all()
    rows_a = g_te == "a"
    assert np.isfinite(iv["lower"].sel(confidence_level=0.9).values[rows_a]).all()
    # brute force: group 'a' calibrated by the plain calibrator fitted on its calibration rows alone
    sub_cal = g_cal == "a"
    alone = _make(name, problem)
    if "confidence_level" in alone.get_params():
        alone.set_params(confidence_level=[0.8, 0.9])  # what Mondrian tells a group resolving both levels
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", calibprob.CalibprobWarning)
        alone.fit(pred_cal.isel(obs=np.flatnonzero(sub_cal)), problem["y_cal"][sub_cal])
    sub_te = pred_te.isel(obs=np.flatnonzero(rows_a))
    lo, hi = _interval_ends(alone, sub_te, np.array([0.8, 0.9]))
    np.testing.assert_array_equal(iv["lower"].values[rows_a], lo)
    np.testing.assert_array_equal(iv["upper"].values[rows_a], hi)
    if _gives_intervals(m.calibrator):
        return
    # the quantile path: the same ends where the arithmetic is the same (quantiles at the tails)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", calibprob.CalibprobWarning)
        if m.calibrators_[list(m.groups_).index("two")] is None:
            with pytest.raises(ValueError, match=r"group 'two' has 2 calibration point\(s\), too few to fit"):
                m.predict(pred_te, levels=_tails([0.8, 0.9]), groups=g_te)
            keep = ~two
        else:
            keep = np.ones(two.size, dtype=bool)
        q = m.predict(pred_te.isel(obs=np.flatnonzero(keep)), levels=_tails([0.8, 0.9]), groups=g_te[keep])
        own = alone.predict(sub_te, levels=_tails([0.8, 0.9])).calib.interval([0.8, 0.9])
    qi = q.calib.interval([0.8, 0.9])
    in_a = g_te[keep] == "a"
    for end in ("lower", "upper"):
        np.testing.assert_array_equal(qi[end].values[in_a], own[end].values)
        if not hasattr(m.calibrator, "predict_interval"):  # the same arithmetic: bit for bit, every row and level
            np.testing.assert_array_equal(qi[end].values, iv[end].values[keep])
    if sides and keep[two].any():
        assert np.isinf(qi["lower"].sel(confidence_level=0.9).values[two[keep]]).all()
        reach = float(1 - Fraction(sides, 3))
        assert (q["reach"].values[two[keep]] == reach).all()
    assert np.isfinite(qi["lower"].sel(confidence_level=0.9).values[in_a]).all()


@pytest.mark.parametrize("name", sorted(n for n in POST_PROCESSORS if not _gives_intervals(POST_PROCESSORS[n]({}))))
def test_quantile_path_matches_the_twelve_point_group_alone(name, problem):  # noqa: F811
    """The 12-point group: at every level it resolves, its quantiles are the plain calibrator's on its 12 rows."""
    pred_cal, pred_te = problem["normal"]
    g_cal = _labels(pred_cal.sizes["obs"])
    g_te = np.resize(np.array(["twelve", "a"]), pred_te.sizes["obs"])
    m = _fit(name, problem, [0.8], None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", calibprob.CalibprobWarning)
        q = m.predict(pred_te, groups=g_te)  # the default grid: the big groups' own
        sub = g_cal == "twelve"
        alone = _make(name, problem)
        if "confidence_level" in alone.get_params():
            alone.set_params(confidence_level=0.8)
        alone.fit(pred_cal.isel(obs=np.flatnonzero(sub)), problem["y_cal"][sub])
    lv = q["level"].values
    sides = interval_sides(m.calibrator)
    stated = np.array(
        [12 >= calibprob.calibrators.grouping.mondrian.min_group_size_for_level(p, symmetric=sides == 1) for p in lv]
    )
    if sides == 0 or m._extrapolates():
        stated[:] = True
    rows = np.flatnonzero(g_te == "twelve")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", calibprob.CalibprobWarning)
        ref = alone.predict(pred_te.isel(obs=rows), levels=lv[stated]).calib.quantiles
    np.testing.assert_array_equal(q.calib.quantiles[rows][:, stated], ref)
    # beyond the group's reach: infinite ppf, finite placeholders read by the CDF (never NaN)
    if not stated.all():
        p_out = lv[~stated]
        assert np.isinf(q.isel(obs=rows).calib.ppf(p_out).values).all()
        assert np.isfinite(q.calib.quantiles).all()
        m_ = calibprob.evaluate(q, problem["y_te"], confidence_levels=[0.8, 0.9], groups=g_te)
        for v in ("crps", "nll", "iae", "ece"):
            assert np.isfinite(float(m_[v])), v
        assert float(m_["group_infinite"].sel(group="twelve", confidence_level=0.9)) == (
            0.0 if 12 >= calibprob.min_group_size(0.9, m.calibrator) else 1.0
        )
