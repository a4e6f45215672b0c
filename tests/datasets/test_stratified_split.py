"""train_calibrate_test_split(stratify=, time=): each group split on its own.

Independent reference: the per-group part sizes are the largest-remainder integers closest to
n_k * fractions (computed here in exact arithmetic), the parts partition the rows, and the same
seed gives the same split.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from calibprob.datasets import load_dataset, train_calibrate_test_split
from calibprob.predictive import CalibprobWarning

FR = (Fraction(3, 5), Fraction(1, 5), Fraction(1, 5))


def _expected(n_k: int) -> list[int]:
    exact = [f * n_k for f in FR]
    counts = [int(e) for e in exact]
    order = sorted(range(3), key=lambda j: (-(exact[j] - counts[j]), j))
    for j in order[: n_k - sum(counts)]:
        counts[j] += 1
    return counts


def _data(sizes, seed=0):
    rng = np.random.default_rng(seed)
    g = np.concatenate([[k] * m for k, m in enumerate(sizes)])
    rng.shuffle(g)
    n = g.size
    return np.arange(n, dtype=float).reshape(n, 1), rng.normal(size=n), g


def test_each_group_split_in_proportion_and_rows_partitioned():
    sizes = [5, 10, 23, 40, 7]
    X, y, g = _data(sizes)
    parts = train_calibrate_test_split((X, y, g), seed=3, stratify=g)
    seen = np.concatenate([p[0][:, 0] for p in parts.values()])
    assert np.array_equal(np.sort(seen), np.arange(g.size))  # every row in exactly one part
    for k, m in enumerate(sizes):
        got = [int((p[2] == k).sum()) for p in parts.values()]
        assert got == _expected(m), (k, got)


def test_deterministic_with_a_seed_and_moves_with_it():
    X, y, g = _data([12, 30, 9])
    a = train_calibrate_test_split((X, y), seed=5, stratify=g)
    b = train_calibrate_test_split((X, y), seed=5, stratify=g)
    c = train_calibrate_test_split((X, y), seed=6, stratify=g)
    assert all(np.array_equal(a[k][0], b[k][0]) for k in a)
    assert not np.array_equal(a["calibrate"][0], c["calibrate"][0])


def test_small_group_warned_once_by_name():
    X, y, g = _data([2, 20, 20])
    with pytest.warns(
        CalibprobWarning,
        match=r"1 group\(s\) too small .*group 0 \(2 row\(s\)\) has no test row\. A group needs 5 rows",
    ) as rec:
        parts = train_calibrate_test_split((X, y, g), seed=0, stratify=g)
    assert len([w for w in rec if issubclass(w.category, CalibprobWarning)]) == 1
    assert [int((p[2] == 0).sum()) for p in parts.values()] == _expected(2) == [1, 1, 0]


def test_time_order_within_each_group():
    X, y, g = _data([10, 15])
    t = np.random.default_rng(9).permutation(g.size)
    parts = train_calibrate_test_split((X, y, g, t), seed=0, stratify=g, time=t)
    for k in (0, 1):
        tr, ca, te = (p[3][p[2] == k] for p in parts.values())
        assert tr.max() < ca.min() and ca.max() < te.min()


def test_bundled_grouped_data_by_coordinate_name():
    ds = load_dataset("radon_mn", groups="county")
    with pytest.warns(
        CalibprobWarning, match=r"22 group\(s\) too small .*group 42 \(1 row\(s\)\) has no calibrate, test row"
    ):
        parts = train_calibrate_test_split(ds, seed=0, stratify="group")
    sizes = np.unique(ds["group"].values, return_counts=True)
    cal = dict(zip(*np.unique(parts["calibrate"]["group"].values, return_counts=True)))
    for label, m in zip(*sizes):
        assert cal.get(label, 0) == _expected(int(m))[1]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"stratify": "county"},
            r"stratify='county' is not a coordinate or variable of data .*pass one of those names",
        ),
        (
            {"stratify": np.zeros(3)},
            r"stratify must hold one entry per observation \(919\); got shape \(3,\)\. Pass 919",
        ),
        ({"time": "obs"}, r"time is given without stratify; pass stratify="),
    ],
)
def test_bad_input_refused(kwargs, match):
    ds = load_dataset("radon_mn", groups="county")
    with pytest.raises(ValueError, match=match):
        train_calibrate_test_split(ds, seed=0, **kwargs)
