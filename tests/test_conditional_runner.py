"""The comparison runner stores the per-group diagnostics when the data set carries group labels."""

from __future__ import annotations

import numpy as np
import xarray as xr

from calibprob.compare import parse_spec
from calibprob.compare import runner as runner_mod
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
            "confidence_levels": [0.5, 0.9],
        }
    )


def test_run_task_stores_group_diagnostics_and_they_reach_the_ranking(monkeypatch, tmp_path):
    spec = _spec()
    load = runner_mod._load

    def with_groups(spec, dataset, seed):
        data = load(spec, dataset, seed)
        # the hook: a data set whose loader gives a `group` coordinate along obs (a `groups` column)
        lab = np.where(data["X"].values[:, 0] > np.median(data["X"].values[:, 0]), 2, 1)
        return data.assign_coords(group=("obs", lab))

    plain = runner_mod.run_task(spec.to_dict(), "branin", 0)
    monkeypatch.setattr(runner_mod, "_load", with_groups)
    tasks = [runner_mod.run_task(spec.to_dict(), "branin", r) for r in range(2)]
    got = tasks[0]
    assert got["group"].values.tolist() == ["1", "2"]  # labels stored as text (netCDF-safe)
    assert set(got["group_coverage"].dims) == {"dataset", "repetition", "calibrator", "confidence_level", "group"}
    # the marginal scores are those of the run without groups
    for v in plain.data_vars:
        if v not in ("fit_time", "base_fit_time"):
            xr.testing.assert_identical(got[v], plain[v])
    # group counts add up to the test part, and the group coverages average to the marginal coverage
    n_test = int(got["n_test"].values.ravel()[0])
    counts = got["group_count"].sel(calibrator="b").values.ravel()
    assert counts.sum() == n_test
    pooled = (got["group_coverage"] * got["group_count"]).sum("group") / n_test
    np.testing.assert_allclose(pooled.values, got["coverage"].values, atol=1e-14)
    tree = runner_mod._combine(spec, tasks)
    tree.to_netcdf(tmp_path / "r.nc", engine="h5netcdf")
    back = xr.open_datatree(tmp_path / "r.nc", engine="h5netcdf")
    assert "group_undercovers" in back["ranking"].to_dataset()
    rk = rank_results(back.to_dataset().load())
    assert rk["worst_group"].dims == ("dataset", "confidence_level", "pipeline")
    back.close()
