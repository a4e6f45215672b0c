"""calibprob.plots.coverage_by_group: order, band, infinite intervals, size, and bad input."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import xarray as xr  # noqa: E402
from scipy import stats  # noqa: E402

import calibprob  # noqa: E402
from calibprob.metrics import coverage_by_group as coverage_by_group_array  # noqa: E402
from calibprob.plots import (  # noqa: E402
    GROUP_FIGURE_WIDTH,
    binomial_band,
    coverage_by_group,
    group_coverage_table,
    natural_key,
)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _table(n_groups: int, seed: int = 0, methods=("a",), labels=None) -> pd.DataFrame:
    """A plain per-group table: binomial hits at 0.9 in groups of 1-40 points."""
    rng = np.random.default_rng(seed)
    n = rng.integers(1, 40, n_groups)
    labels = [f"g{i}" for i in range(n_groups)] if labels is None else labels
    rows = [
        pd.DataFrame({"method": m, "group": labels, "count": n, "coverage": rng.binomial(n, 0.9) / n}) for m in methods
    ]
    return pd.concat(rows, ignore_index=True)


def _rows(fig, k: int = 0) -> list[str]:
    """The group labels of panel ``k``, top row first (without the ``(n=...)``)."""
    return [t.get_text().rsplit(" (n=", 1)[0] for t in fig.axes[k].get_yticklabels()]


# ----------------------------------------------------------------------------- order


def test_natural_order_sorts_numbers_numerically_not_as_text():
    labels = [str(i) for i in (0, 1, 10, 11, 2, 21, 3, 20)]  # the order a text sort gives
    assert sorted(labels, key=natural_key) == ["0", "1", "2", "3", "10", "11", "20", "21"]
    assert sorted(["county 10", "County 9", "county 1b", "county 1a"], key=natural_key) == [
        "county 1a",
        "county 1b",
        "County 9",
        "county 10",
    ]
    assert sorted(["-1", "2.5", "10", "b"], key=natural_key) == ["-1", "2.5", "10", "b"]
    # the figure's rows, top to bottom, with 22 numeric groups stored as text (as a results file does)
    t = _table(22, labels=[str(i) for i in range(22)])
    fig = coverage_by_group(t, level=0.9, sort="label")
    assert _rows(fig) == [str(i) for i in range(22)]


def test_sort_by_coverage_puts_the_lowest_coverage_over_the_methods_on_top_and_by_count_the_largest():
    t = pd.DataFrame(
        {
            "method": ["a", "a", "a", "b", "b", "b"],
            "group": ["x", "y", "z", "x", "y", "z"],
            "count": [10, 30, 20, 10, 30, 20],
            "coverage": [0.9, 0.8, 1.0, 0.95, 0.85, 0.5],
        }
    )
    assert _rows(coverage_by_group(t, level=0.9)) == ["z", "y", "x"]  # min over methods: 0.5, 0.8, 0.9
    assert _rows(coverage_by_group(t, level=0.9, sort="count")) == ["y", "z", "x"]


# ----------------------------------------------------------------------------- the band


@pytest.mark.parametrize(("level", "n"), [(0.9, 1), (0.9, 7), (0.8, 37), (0.5, 120), (0.95, 300)])
def test_binomial_band_is_the_central_interval_of_the_exact_binomial(level, n):
    # brute force from scipy.stats.binom's pmf: the smallest k with P(K <= k) >= q
    cdf = np.cumsum(stats.binom.pmf(np.arange(n + 1), n, level))
    want_lo = np.argmax(cdf >= 0.025 - 1e-12) / n
    want_hi = np.argmax(cdf >= 0.975 - 1e-12) / n
    lo, hi = binomial_band(level, n)
    assert (float(lo), float(hi)) == (want_lo, want_hi)
    # the mass inside is at least 0.95 (a central interval of a discrete law)
    k = np.arange(n + 1)
    assert stats.binom.pmf(k[(k / n >= want_lo) & (k / n <= want_hi)], n, level).sum() >= 0.95 - 1e-12


def test_the_drawn_band_of_each_group_is_the_binomial_band_of_its_size():
    t = _table(6, seed=3)
    fig = coverage_by_group(t, level=0.8, sort="label")
    ax = fig.axes[0]
    bars = sorted(ax.patches, key=lambda p: p.get_y())  # top row first (y grows downwards)
    sizes = t.set_index("group")["count"]
    for bar, label in zip(bars, _rows(fig)):
        n = int(sizes[label])
        cdf = np.cumsum(stats.binom.pmf(np.arange(n + 1), n, 0.8))
        lo, hi = np.argmax(cdf >= 0.025 - 1e-12) / n, np.argmax(cdf >= 0.975 - 1e-12) / n
        assert bar.get_x() == pytest.approx(lo, abs=1e-12)
        assert bar.get_x() + bar.get_width() == pytest.approx(hi, abs=1e-12)
    # the nominal line
    assert any(np.allclose(line.get_xdata(), 0.8) and line.get_linestyle() == "--" for line in ax.lines)


# ----------------------------------------------------------------------------- infinite intervals


def test_the_metric_counts_each_groups_infinite_intervals():
    covered = np.array([[1], [1], [0], [1], [1], [1]], bool)
    widths = np.array([[np.inf], [1.0], [2.0], [np.inf], [np.inf], [np.inf]])
    r = coverage_by_group_array(covered, widths, ["a", "a", "a", "b", "b", "b"])
    assert r["infinite"].ravel().tolist() == [1 / 3, 1.0]
    assert r["coverage"].ravel().tolist() == [2 / 3, 1.0]  # an infinite interval covers (trivially)


def test_infinite_intervals_are_counted_and_drawn_apart_from_hits():
    t = pd.DataFrame(
        {
            "group": ["tiny", "hit", "miss", "part"],
            "count": [3, 50, 50, 10],
            "coverage": [1.0, 1.0, 0.6, 0.9],
            "infinite": [1.0, 0.0, 0.0, 0.3],
        }
    )
    table = group_coverage_table(t, level=0.9).set_index("group")
    assert table.loc["tiny", "infinite"] == 1.0 and table.loc["part", "infinite"] == 0.3
    assert table["below_band"].tolist() == [False, False, True, False]
    fig = coverage_by_group(t, level=0.9, sort="label")
    ax = fig.axes[0]
    rows = _rows(fig)
    hollow = [line for line in ax.lines if line.get_marker() == ">"]
    filled = [line for line in ax.lines if line.get_marker() == "o"]
    assert sorted(rows[int(round(y))] for line in hollow for y in line.get_ydata()) == ["part", "tiny"]
    assert sorted(rows[int(round(y))] for line in filled for y in line.get_ydata()) == ["hit", "miss"]
    assert all(line.get_markerfacecolor() == "white" for line in hollow)
    assert "2 with infinite intervals" in fig.texts[0].get_text() or any(
        "2 with infinite intervals" in sf._suptitle.get_text() for sf in fig.subfigs
    )
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "infinite interval (trivial hit)" in legend
    # the red label marks the group under its band, not the infinite ones
    red = [tick.get_text() for tick in ax.get_yticklabels() if tick.get_color() == "#b3261e"]
    assert red == ["miss (n=50)"]


def test_a_results_file_before_group_infinite_reads_an_infinite_group_width():
    ds = _results(with_infinite=False)
    table = group_coverage_table(ds, level=0.9)
    got = table.set_index(["method", "group"])["infinite"]
    assert got[("wide", "y")] == pytest.approx(10 / 40)  # infinite in repetition 1: its 10 of the 40 points
    assert got[("narrow", "x")] == 0


# ----------------------------------------------------------------------------- results files


def _results(with_infinite: bool = True) -> xr.Dataset:
    """Results of one data set, 3 repetitions, 2 calibrators, 2 groups of unequal sizes."""
    cov = np.array([[[0.9, 0.5], [1.0, 1.0]], [[0.8, 0.7], [0.9, 1.0]], [[1.0, 0.6], [0.95, 0.9]]])  # (rep, cal, grp)
    count = np.array([[20, 10], [30, 10], [10, 20]])  # (rep, group)
    width = np.where(np.arange(3)[:, None, None] * np.array([0, 1])[None, :, None] * np.array([0, 1]) == 1, np.inf, 1)
    ds = xr.Dataset(
        {
            "group_coverage": (("dataset", "repetition", "calibrator", "group", "confidence_level"), cov[None, ..., None]),
            "group_count": (("dataset", "repetition", "calibrator", "group"), np.repeat(count[None, :, None], 2, 2)),
            "group_width": (("dataset", "repetition", "calibrator", "group", "confidence_level"), width[None, ..., None]),
        },
        coords={"dataset": ["d"], "repetition": [0, 1, 2], "calibrator": ["narrow", "wide"], "group": ["x", "y"],
                "confidence_level": [0.9]},
    )  # fmt: skip
    if with_infinite:
        ds["group_infinite"] = np.isinf(ds["group_width"]).astype(float)
    return ds


def test_a_results_dataset_is_pooled_over_repetitions_weighted_by_group_size(tmp_path):
    ds = _results()
    table = group_coverage_table(ds, level=0.9).set_index(["method", "group"])
    # narrow, group y: (10 * 0.5 + 10 * 0.7 + 20 * 0.6) / 40
    assert table.loc[("narrow", "y"), "coverage"] == pytest.approx((5 + 7 + 12) / 40)
    assert table.loc[("narrow", "y"), "count"] == 40
    # a base dimension gives methods base/calibrator; a results file on disk reads the same
    two = xr.concat([ds, ds], dim=xr.DataArray(["ols", "gp"], dims="base", name="base"))
    assert set(group_coverage_table(two)["method"]) == {"ols/narrow", "ols/wide", "gp/narrow", "gp/wide"}
    xr.DataTree(ds).to_netcdf(tmp_path / "r.nc", engine="h5netcdf")
    on_disk = group_coverage_table(tmp_path / "r.nc").set_index(["method", "group"])
    pd.testing.assert_frame_equal(on_disk.sort_index(), table.sort_index(), check_like=True)


def test_evaluate_outputs_are_drawn_with_their_group_coverage_as_the_markers():
    rng = np.random.default_rng(0)
    g = rng.integers(0, 12, 600)
    y = rng.normal(size=600) * (0.7 + 0.05 * g)
    m = calibprob.evaluate(calibprob.normal(np.zeros(600), np.ones(600)), y, [0.8, 0.9], groups=g)
    fig = coverage_by_group({"N(0, 1)": m}, level=0.9, sort="label")
    assert _rows(fig) == [str(i) for i in range(12)]
    xs = np.concatenate([line.get_xdata() for line in fig.axes[0].lines if line.get_marker() == "o"])
    np.testing.assert_array_equal(np.sort(xs), np.sort(m["group_coverage"].sel(confidence_level=0.9).values))
    both = coverage_by_group(m)  # every level: one block of panels each
    assert len(both.subfigs) == 2


# ----------------------------------------------------------------------------- readable at 2 and 200 groups


def _overlaps(boxes) -> bool:
    boxes = sorted(boxes, key=lambda b: b.y0)
    return any(a.y1 > b.y0 + 0.5 for a, b in zip(boxes, boxes[1:]))


@pytest.mark.parametrize("n_groups", [2, 22, 200])
@pytest.mark.parametrize("n_methods", [1, 3])
def test_the_figure_keeps_its_width_and_its_labels_apart_at_2_to_200_groups(n_groups, n_methods):
    t = _table(n_groups, methods=[f"m{k}" for k in range(n_methods)], labels=[f"County {i}" for i in range(n_groups)])
    fig = coverage_by_group(t, level=0.9)
    w, h = fig.get_size_inches()
    assert w == GROUP_FIGURE_WIDTH
    assert h <= 12.5  # 200 groups wrap into columns of panels instead of growing
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    drawn = [ax for ax in fig.axes if ax.axison]
    assert sum(len(ax.get_yticklabels()) for ax in drawn) == n_groups
    fig_box = fig.bbox
    for ax in drawn:
        boxes = [t.get_window_extent(renderer) for t in ax.get_yticklabels()]
        assert not _overlaps(boxes)
        assert all(b.x0 >= fig_box.x0 - 1 and b.y0 >= fig_box.y0 - 1 for b in boxes)  # inside the figure
        for line in ax.lines:
            if line.get_marker() in ("o", ">"):
                assert not line.get_clip_on()  # a marker at coverage 1 or at the edge shows whole
    # the panels of one level never overlap each other
    boxes = [ax.get_window_extent(renderer) for ax in drawn]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


# ----------------------------------------------------------------------------- bad input


def test_bad_input_is_refused_with_the_parameter_the_value_and_the_fix():
    t = _table(3)
    with pytest.raises(ValueError, match=r"level=0.95 is not in data; its levels are \[0.5, 0.8, 0.9\]; pass one"):
        coverage_by_group(t.assign(level=np.repeat([0.5, 0.8, 0.9], 1)), level=0.95)
    with pytest.raises(
        ValueError, match=r"level must be a confidence level in \(0, 1\) or a list of them, e.g. 0.9; got 90"
    ):
        coverage_by_group(t, level=90)
    with pytest.raises(ValueError, match=r"data holds no group with a coverage \(an empty table\); give at least"):
        coverage_by_group(t.iloc[:0], level=0.9)
    with pytest.raises(ValueError, match=r"sort='size' is not a row order; pass one of 'coverage', 'label', 'count'"):
        coverage_by_group(t, level=0.9, sort="size")
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['count'\]; it needs group, coverage and count"):
        coverage_by_group(t.drop(columns="count"), level=0.9)
    with pytest.raises(ValueError, match=r"level= must be one nominal level \(e.g. level=0.9\) when data"):
        coverage_by_group(t)
    with pytest.raises(ValueError, match=r"data column 'coverage' holds 1.5; coverage and infinite must be shares"):
        coverage_by_group(t.assign(coverage=1.5), level=0.9)
    with pytest.raises(ValueError, match=r"mass must be a probability in \(0, 1\), e.g. 0.95 .*; got 95"):
        coverage_by_group(t, level=0.9, mass=95)
    two = xr.concat([_results(), _results()], dim=xr.DataArray(["d1", "d2"], dims="dataset", name="dataset"))
    with pytest.raises(ValueError, match=r"data holds data sets \['d1', 'd2'\]; pass dataset= one of them"):
        coverage_by_group(two)
    with pytest.raises(ValueError, match=r"dataset='d3' is not in data; its data sets are \['d1', 'd2'\]"):
        coverage_by_group(two, dataset="d3")
    with pytest.raises(ValueError, match=r"data has no group coverage .* with groups = \"<column>\" in its spec"):
        coverage_by_group(_results().drop_vars(["group_coverage"]))
    with pytest.raises(ValueError, match=r"data\['x'\] has no group coverage; compute it with calibprob.evaluate"):
        coverage_by_group({"x": xr.Dataset()})
    with pytest.raises(ValueError, match=r"data must be a comparison's results .*; got list"):
        coverage_by_group([1, 2])
    with pytest.raises(ValueError, match=r"data '.*nowhere.nc' is not a file; give the results file"):
        coverage_by_group("/nowhere.nc")
