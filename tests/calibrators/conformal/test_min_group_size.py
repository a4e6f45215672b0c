"""calibprob.min_group_size(level, method): against the brute force.

Independent reference: the smallest n at which the calibrator itself, fitted on n seeded
points, returns finite interval ends at the level (read as Mondrian reads them), found by
fitting on n = 1, 2, ...; and the issue's figures (9 points for split conformal at 90 %,
19 for isotonic or CPS).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import calibprob
from calibprob.calibrators.grouping.mondrian import _interval_ends, _method_instance

KINDS = ["split-conformal", "conformal-predictive", "isotonic", "cqr"]


def _brute(kind: str, c: float, n_max: int = 60) -> int | None:
    rng = np.random.default_rng(0)
    test = calibprob.normal(np.zeros(3), np.ones(3))
    for n in range(1, n_max):
        mu = rng.normal(size=n)
        y = mu + rng.normal(size=n)
        est = _method_instance(kind)
        if "confidence_level" in est.get_params():
            est.set_params(confidence_level=c)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(calibprob.normal(mu, np.ones(n)), y)
                lo, hi = _interval_ends(est, test, np.array([c]))
        except ValueError:
            continue  # the calibrator refuses so few points: not finite
        if np.isfinite(lo).all() and np.isfinite(hi).all():
            return n
    return None


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("c", [0.8, 0.9])
def test_min_group_size_equals_the_calibrators_own_brute_force(kind, c):
    assert calibprob.min_group_size(c, kind) == _brute(kind, c)


def test_the_issues_figures():
    assert calibprob.min_group_size(0.9, "split-conformal") == 9
    assert calibprob.min_group_size(0.9, "isotonic") == 19
    assert calibprob.min_group_size(0.9, "conformal-predictive") == 19
    # an instance counts as its kind; the old sides= form is unchanged
    assert calibprob.min_group_size(0.9, calibprob.IsotonicRecalibrator()) == 19
    assert calibprob.min_group_size(0.9, sides=2) == 19


@pytest.mark.parametrize(
    ("args", "err", "match"),
    [
        ((1.2, "isotonic"), ValueError, r"confidence_level must be in \(0, 1\); got 1\.2"),
        ((0.0, "isotonic"), ValueError, r"confidence_level must be in \(0, 1\); got 0\.0"),
        ((0.9, "no-such"), ValueError, r"method='no-such' is not a calibrator kind\. Pass one of .*isotonic"),
        ((0.9, "conformal-bayes"), ValueError, r"'posterior' kind, which Mondrian does not wrap\. Pass one of"),
        ((0.9, 3), TypeError, r"method must be a calibrator kind name or a calibrator instance; got 3\. Pass"),
    ],
)
def test_bad_input_refused(args, err, match):
    with pytest.raises(err, match=match):
        calibprob.min_group_size(*args)


class _Boom(calibprob.IsotonicRecalibrator):
    """An isotonic recalibrator whose fit fails: shows what Mondrian said before fitting a group."""

    def fit(self, pred_cal, y_cal):
        raise RuntimeError("fitted")


def test_mondrian_warns_before_any_group_is_fitted():
    rng = np.random.default_rng(1)
    n = 30
    g = np.r_[np.zeros(25, int), np.ones(5, int)]
    mu = rng.normal(size=n)
    pred, y = calibprob.normal(mu, np.ones(n)), mu + rng.normal(size=n)
    m = calibprob.Mondrian(_Boom(), confidence_level=[0.8, 0.9])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="fitted"):
            m.fit(pred, y, groups=g)
    said = [str(w.message) for w in seen if issubclass(w.category, calibprob.CalibprobWarning)]
    assert len(said) == 1
    assert "group 1 has 5 calibration point(s), 0.8 needs 9, 0.9 needs 19" in said[0]
    assert "group 0" not in said[0]  # 25 points reach 0.9 (19 needed)


def test_mondrian_fit_table_agrees_with_min_group_size():
    rng = np.random.default_rng(2)
    sizes = {"a": 3, "b": 10, "c": 25}
    g = np.concatenate([[k] * v for k, v in sizes.items()])
    mu = rng.normal(size=g.size)
    m = calibprob.Mondrian(calibprob.SplitConformalCalibrator(), confidence_level=[0.8, 0.9, 0.95])
    with pytest.warns(calibprob.CalibprobWarning, match=r"2 group\(s\) below") as rec:
        m.fit(calibprob.normal(mu, np.ones(g.size)), mu + rng.normal(size=g.size), groups=g)
    assert len([w for w in rec if issubclass(w.category, calibprob.CalibprobWarning)]) == 1
    expect = []
    for k, n_k in sizes.items():
        missed = [(c, calibprob.min_group_size(c, "split-conformal")) for c in (0.8, 0.9, 0.95)]
        missed = [(c, m_) for c, m_ in missed if n_k < m_]
        if missed:
            expect.append((k, n_k, missed))
    assert m.small_groups_ == expect


@pytest.mark.parametrize("kind", ["split-conformal", "conformal-predictive", "isotonic"])
def test_levels_reached_column_agrees_with_min_group_size(kind):
    """The table's "reaches" column: a group reaches c exactly when n_k >= min_group_size(c, kind)."""
    rng = np.random.default_rng(3)
    sizes = {"a": 2, "b": 5, "c": 12, "d": 40}
    g = np.concatenate([[k] * v for k, v in sizes.items()])
    mu = rng.normal(size=g.size)
    est = _method_instance(kind)
    with pytest.warns(calibprob.CalibprobWarning) as rec:
        m = calibprob.Mondrian(est, confidence_level=[0.8, 0.9]).fit(
            calibprob.normal(mu, np.ones(g.size)), mu + rng.normal(size=g.size), groups=g
        )
    grid = np.round(np.arange(0.01, 1.0, 0.01), 2)
    for k, n_k in enumerate(sizes.values()):
        reached = grid <= m.reach_[k]
        assert (reached == np.array([n_k >= calibprob.min_group_size(c, kind) for c in grid])).all(), (kind, n_k)
    msg = str(rec[0].message)
    for label, n_k in sizes.items():
        if n_k < calibprob.min_group_size(0.9, kind):
            assert f"group {label!r} has {n_k} calibration point(s)" in msg
            assert f"reaches levels up to {m.reach_[list(sizes).index(label)]:.4g}" in msg
