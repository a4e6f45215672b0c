"""``kind = "gp"`` chooses: the exact GP up to a documented size, the sparse GP above; ``exact = true`` forces it (issue 37)."""

from __future__ import annotations

import numpy as np
import pytest

from calibprob._core.memory import PEAK_N_BY_N, PEAK_OVERHEAD
from calibprob._core.options import SpecError
from calibprob.bases.gp import GaussianProcessRegressor, SparseGaussianProcessRegressor
from calibprob.compare import gp_choices, parse_spec, run_task
from calibprob.compare import tasks as ct
from calibprob.runs import faults
from calibprob.runs.faults import GP_SPARSE_INDUCING, choose_gp, gp_exact_max_rows


def _fit_peak(n: int) -> float:
    # the exact fit's measured peak (calibprob._core.memory): 6.5 arrays of n x n and the overhead
    return PEAK_OVERHEAD + 8.0 * PEAK_N_BY_N["fit"] * n**2


def test_the_size_is_the_largest_whose_exact_fit_fits_the_memory():
    n = gp_exact_max_rows()
    assert n == 5060  # the documented figure (docs/spec.md, the registry's doc)
    assert _fit_peak(n) <= faults.GP_EXACT_MEMORY < _fit_peak(n + 1)


def test_below_and_at_the_size_the_table_is_unchanged():
    table = {"kind": "gp", "kernel": "se", "n_restarts": 2}
    n = gp_exact_max_rows()
    for rows in (50, n):
        got, line = choose_gp(table, rows)
        assert got == table and line.startswith("exact GP")


def test_above_the_size_the_sparse_gp_with_the_shared_options():
    table = {"kind": "gp", "kernel": "matern", "p": 2, "refine_hyper": True, "n_hyper_subset": 1000}
    got, line = choose_gp(table, gp_exact_max_rows() + 1)
    # refine_hyper is the exact GP's only: dropped; the others carry over
    assert got == {"kind": "sparse-gp", "kernel": "matern", "p": 2, "n_hyper_subset": 1000, "n_inducing": 300}
    assert GP_SPARSE_INDUCING == 300 and "300 inducing points" in line and "exact = true" in line
    got, _ = choose_gp({"kind": "gp", "n_inducing": 128}, 10**5)
    assert got["n_inducing"] == 128


def test_exact_true_forces_the_exact_gp():
    got, line = choose_gp({"kind": "gp", "exact": True, "n_inducing": 64}, 10**5)
    assert got == {"kind": "gp"} and "exact = true" in line


def test_other_kinds_pass_through():
    table = {"kind": "sparse-gp", "n_inducing": 50}
    assert choose_gp(table, 10**6) == (table, "")


def _spec(base: dict) -> dict:
    return {
        "name": "choice",
        "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
        "seed": 3,
        "datasets": [{"name": "forrester", "function": "forrester", "n": 100, "noise": 0.2}],
        "base": base,
        "methods": {"raw": {"kind": "base"}, "iso": {"kind": "isotonic"}},
    }


def test_a_task_runs_the_chosen_base(monkeypatch):
    # a size of 40 rows (the memory the estimate gives 40 rows): 50 training rows run the sparse GP
    monkeypatch.setattr(faults, "GP_EXACT_MEMORY", _fit_peak(40))
    spec = _spec({"kind": "gp", "kernel": "se", "n_restarts": 1, "n_inducing": 10})
    fitted = ct.fit_bases(spec, "forrester", 0)
    ctx = fitted["fits"][None][0]
    assert isinstance(ctx.base, SparseGaussianProcessRegressor) and ctx.base.n_inducing == 10
    assert ctx.base_spec["kind"] == "sparse-gp"  # the refits of CV+ build the same base
    assert ct._refit_context(parse_spec(spec), "forrester", 0, None).base_spec == ctx.base_spec
    (line,) = gp_choices(parse_spec(spec)).values()
    assert line.startswith("sparse GP with 10 inducing points (50 training rows > 40")
    forced = ct.fit_bases(_spec({"kind": "gp", "kernel": "se", "n_restarts": 1, "exact": True}), "forrester", 0)
    assert isinstance(forced["fits"][None][0].base, GaussianProcessRegressor)


def test_the_exact_gp_size_cap_binds_only_where_exact_is_forced():
    big = {"name": "f", "function": "forrester", "n": 50_000}
    spec = _spec({"kind": "gp"})
    spec["datasets"] = [big]
    parse_spec(spec)  # chooses the sparse GP: nothing to refuse
    spec["base"] = {"kind": "gp", "exact": True}
    with pytest.raises(SpecError, match="25000 training rows for an exact GP base"):
        parse_spec(spec)


# --- methods switch to their scalable form instead of refusing at their defaults ---------------


def _tiny_budget(methods: dict, base: dict | None = None) -> dict:
    spec = _spec(base or {"kind": "gp", "kernel": "se", "n_restarts": 1})
    spec["datasets"][0]["n"] = 60
    spec["max_method_minutes"] = 1e-9  # every n x n estimate is beyond it: the defaults are refused
    spec["methods"] = methods
    return spec


def _scores(ds):
    drop = ("fit_time", "base_fit_time", "base_predict_time", "ran_as")
    return ds.drop_vars([v for v in drop if v in ds])


def test_sharp_gp_refused_for_time_runs_its_scaled_variant_and_says_so():
    got = run_task(_tiny_budget({"sharp": {"kind": "sharp-gp", "n_levels": 5}}), "forrester", 0)
    note = str(got["ran_as"].sel(calibrator="sharp").item())
    assert got["error"].sel(calibrator="sharp").item() == ""
    assert note.startswith("ran as variant 'scaled'") and "max_method_minutes" in note and "strict = true" in note
    # the same numbers as asking for the scaled variant (which has no n x n work: nothing switched)
    ref = run_task(_tiny_budget({"sharp": {"kind": "sharp-gp", "n_levels": 5, "variant": "scaled"}}), "forrester", 0)
    assert "ran_as" not in ref
    assert _scores(got).identical(_scores(ref))


def test_strict_keeps_the_refusal():
    got = run_task(_tiny_budget({"sharp": {"kind": "sharp-gp", "n_levels": 5, "strict": True}}), "forrester", 0)
    assert got["error"].sel(calibrator="sharp").item().startswith("TimeoutError: sharp-gp (variant 'full')")
    assert "ran_as" not in got


def test_cv_plus_refused_on_an_exact_gp_refits_the_sparse_gp():
    got = run_task(_tiny_budget({"cv": {"kind": "cv-plus", "folds": 3}}), "forrester", 0)
    note = str(got["ran_as"].sel(calibrator="cv").item())
    assert note.startswith("ran as refits of the sparse GP with 300 inducing points")
    # the same intervals as CV+ on a sparse-GP base of the same options
    base = {"kind": "sparse-gp", "kernel": "se", "n_restarts": 1, "n_inducing": 300}
    ref = run_task(_tiny_budget({"cv": {"kind": "cv-plus", "folds": 3}}, base), "forrester", 0)
    np.testing.assert_array_equal(got["coverage"].values, ref["coverage"].values)
    np.testing.assert_array_equal(got["width"].values, ref["width"].values)


def test_strict_must_be_a_bool():
    with pytest.raises(SpecError, match="methods.sharp.strict must be"):
        parse_spec(_tiny_budget({"sharp": {"kind": "sharp-gp", "strict": "yes"}}))


def test_cv_plus_switch_at_method_granularity_equals_the_serial_run():
    # --workers: the refits run as tasks of their own and the method is assembled from them
    spec = _tiny_budget({"cv": {"kind": "cv-plus", "folds": 3}})
    serial = run_task(spec, "forrester", 0)
    fitted = ct.fit_bases(spec, "forrester", 0)
    groups = ct.method_refit_tasks(spec, "forrester", 0, "cv")
    assert len(groups) > 1
    refits = [ct.run_method_refits(spec, "forrester", 0, "cv", *g) for g in groups]
    sliced = ct.run_method_task(spec, fitted, "forrester", 0, "cv", refits=refits)
    assert _scores(sliced).identical(_scores(serial))
    assert sliced["ran_as"].item() == serial["ran_as"].item()


def test_the_results_file_says_what_ran(monkeypatch, tmp_path):
    from calibprob.cli import _ran_as
    from calibprob.compare import run_comparison

    monkeypatch.setattr(faults, "GP_EXACT_MEMORY", _fit_peak(20))  # 30 training rows: the sparse GP
    spec = _tiny_budget({"raw": {"kind": "base"}, "sharp": {"kind": "sharp-gp", "n_levels": 5}})
    spec["datasets"][0]["n"] = 60
    tree = run_comparison(parse_spec(spec), tmp_path / "r.nc", progress=False)
    assert tree.attrs["gp_choice"].startswith("forrester: sparse GP with 300 inducing points (30 training rows > 20")
    # on the sparse GP the sharp GP's full variant has no n x n work: nothing switched, nothing recorded
    assert "ran_as" not in tree.to_dataset()
    monkeypatch.setattr(faults, "GP_EXACT_MEMORY", _fit_peak(40))  # the exact GP: its full variant is refused
    tree = run_comparison(parse_spec(spec), tmp_path / "r2.nc", progress=False)
    assert "gp_choice" not in tree.attrs
    (line,) = _ran_as(tree.to_dataset())
    assert line.startswith("sharp: ran as variant 'scaled'")
