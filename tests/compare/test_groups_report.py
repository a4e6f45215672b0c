"""The comparison runner stores the per-group diagnostics when the data set carries group labels."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from calibprob.compare import assembly, parse_spec
from calibprob.compare import tasks as tasks_mod
from calibprob.compare.ranking import rank_results


def _spec():
    return parse_spec(
        {
            "name": "groups",
            "datasets": [{"name": "branin", "function": "branin", "n": 240, "noise": 0.5}],
            "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
            "repetitions": 2,
            "seed": 3,
            "base": {"kind": "bayesian-ridge"},
            "methods": {"b": {"kind": "base"}, "vs": {"kind": "variance-scaling"}},
            "confidence_level": [0.5, 0.9],
        }
    )


def test_run_task_stores_group_diagnostics_and_they_reach_the_ranking(monkeypatch, tmp_path):
    spec = _spec()
    load = tasks_mod._load

    def with_groups(spec, dataset, seed):
        data = load(spec, dataset, seed)
        # the hook: a data set whose loader gives a `group` coordinate along obs (a `groups` column)
        lab = np.where(data["X"].values[:, 0] > np.median(data["X"].values[:, 0]), 2, 1)
        return data.assign_coords(group=("obs", lab))

    plain = tasks_mod.run_task(spec.to_dict(), "branin", 0)
    monkeypatch.setattr(tasks_mod, "_load", with_groups)
    tasks = [tasks_mod.run_task(spec.to_dict(), "branin", r) for r in range(2)]
    got = tasks[0]
    assert got["group"].values.tolist() == ["1", "2"]  # labels stored as text (netCDF-safe)
    assert set(got["group_coverage"].dims) == {"dataset", "repetition", "calibrator", "confidence_level", "group"}
    # the base's marginal scores are those of the run without groups (the calibrators run per group:
    # a spec's groups make the distribution post-processors Mondrian)
    for v in plain.data_vars:
        if not v.endswith("_time"):  # timings (fit, base fit, shared base predictions) differ run to run
            pick = {"calibrator": "b"} if "calibrator" in plain[v].dims else {}
            xr.testing.assert_identical(got[v].sel(pick), plain[v].sel(pick))
    # group counts add up to the test part, and the group coverages average to the marginal coverage
    n_test = int(got["n_test"].values.ravel()[0])
    counts = got["group_count"].sel(calibrator="b").values.ravel()
    assert counts.sum() == n_test
    pooled = (got["group_coverage"] * got["group_count"]).sum("group") / n_test
    np.testing.assert_allclose(pooled.values, got["coverage"].values, atol=1e-14)
    tree = assembly._combine(spec, tasks)
    tree.to_netcdf(tmp_path / "r.nc", engine="h5netcdf")
    back = xr.open_datatree(tmp_path / "r.nc", engine="h5netcdf")
    assert "group_undercovers" in back["ranking"].to_dataset()
    rk = rank_results(back.to_dataset().load())
    assert rk["worst_group"].dims == ("dataset", "confidence_level", "pipeline")
    back.close()
    from calibprob.cli import main

    # `calibprob report` writes the coverage-by-group PNG beside the others
    assert main(["report", str(tmp_path / "r.nc"), "--plots", str(tmp_path / "plots")]) == 0
    assert (tmp_path / "plots" / "branin_coverage_by_group.png").is_file()


def _grouped_results():
    """A two-calibrator results Dataset with per-group diagnostics: ``narrow`` fails group y."""
    R = 3
    rng = np.random.default_rng(0)
    gc = np.array([[0.98, 0.60], [0.90, 0.90]])[None, None, :, None, :].repeat(R, 1)
    return xr.Dataset(
        {
            "nll": (("dataset", "repetition", "calibrator"), rng.normal(size=(1, R, 2))),
            "coverage": (("dataset", "repetition", "calibrator", "confidence_level"), np.full((1, R, 2, 1), 0.9)),
            "width": (("dataset", "repetition", "calibrator", "confidence_level"), np.ones((1, R, 2, 1))),
            "iae_coverage": (("dataset", "repetition", "calibrator", "iae_level"), np.full((1, R, 2, 2), 0.5)),
            "n_test": (("dataset", "repetition"), np.full((1, R), 200)),
            "group_coverage": (("dataset", "repetition", "calibrator", "confidence_level", "group"), gc),
            "group_count": (("dataset", "repetition", "calibrator", "group"), np.full((1, R, 2, 2), 100)),
        },
        coords={
            "dataset": ["d"],
            "repetition": np.arange(R),
            "calibrator": ["narrow", "wide"],
            "confidence_level": [0.9],
            "iae_level": [0.5, 0.9],
            "group": ["x", "y"],
        },
    )


def test_the_coverage_by_group_plot_is_in_the_png_plots_and_the_html_report(tmp_path):
    from calibprob.compare.report import GROUP_SECTION, write_html, write_plots

    res = _grouped_results()
    names = [p.name for p in write_plots(res, tmp_path)]
    assert "d_coverage_by_group.png" in names
    page = write_html(res, tmp_path / "r.html").read_text()
    assert f'<h2 id="coverage-by-group">{GROUP_SECTION}</h2>' in page
    assert page.index("Coverage and width</h2>") < page.index(f"{GROUP_SECTION}</h2>")
    assert "worst group y under-covers" in page  # the ranking says why narrow is not best
    section = page[page.index(f"{GROUP_SECTION}</h2>") :].split("</section>")[0]
    assert section.count('<img alt="d: coverage by group"') == 1  # one figure per data set and level
    plain = res.drop_vars(["group_coverage", "group_count", "group"])
    assert "d_coverage_by_group.png" not in [p.name for p in write_plots(plain, tmp_path / "p")]
    assert GROUP_SECTION not in write_html(plain, tmp_path / "p.html").read_text()


def test_plot_coverage_by_group_of_evaluate_outputs_is_the_public_plot():
    import calibprob
    from calibprob.compare.report.group_plots import plot_coverage_by_group

    rng = np.random.default_rng(0)
    g = rng.integers(0, 3, 300)
    y = rng.normal(size=300) * (1 + g)
    m = calibprob.evaluate(calibprob.normal(np.zeros(300), np.ones(300)), y, [0.8, 0.9], groups=g)
    fig = plot_coverage_by_group({"a": m, "b": m})
    assert len(fig.subfigs) == 2  # one block of panels per level
    # the markers of level 0.9 (the second block) are the group coverages, once per method
    ax = fig.subfigs[1].axes[0]
    xs = sorted(float(v) for line in ax.lines if line.get_marker() == "o" for v in line.get_xdata())
    assert xs == sorted(2 * m["group_coverage"].sel(confidence_level=0.9).values.tolist())
    with pytest.raises(ValueError, match=r"data\['x'\] has no group coverage; compute it with"):
        plot_coverage_by_group({"x": calibprob.evaluate(calibprob.normal(np.zeros(300), np.ones(300)), y)})


def test_repetitions_whose_test_parts_hold_different_groups_combine_without_spreading_scores(monkeypatch):
    spec = _spec()
    load = tasks_mod._load

    def many_groups(spec, dataset, seed):
        data = load(spec, dataset, seed)
        # 40 groups of 6 points: a random test part of 60 points misses some, a different few each repetition
        return data.assign_coords(group=("obs", np.arange(data.sizes["obs"]) % 40))

    monkeypatch.setattr(tasks_mod, "_load", many_groups)
    tasks = [tasks_mod.run_task(spec.to_dict(), "branin", r) for r in range(2)]
    labels = [set(t["group"].values.tolist()) for t in tasks]
    assert labels[0] != labels[1]  # the case that broke the combination
    ds = assembly._combine(spec, tasks).to_dataset()
    assert ds["nll"].dims == ("dataset", "repetition", "calibrator")  # no group dimension spread over the scores
    assert set(ds["group"].values.tolist()) == labels[0] | labels[1]
    for r, t in enumerate(tasks):
        xr.testing.assert_equal(ds["nll"].isel(repetition=r), t["nll"].isel(repetition=0))
        # a group absent from a repetition's test part has no count there; the others add up to the test part
        counts = ds["group_count"].isel(repetition=r).sel(calibrator="b").squeeze()
        assert int(counts.sum()) == int(t["n_test"].values.ravel()[0])
        assert int(counts.notnull().sum()) == len(labels[r])
