"""Ranking with paired uncertainty (calibprob.compare.ranking), checked on results built by hand.

Every expected number below is computed in the test from its definition (written out with
plain arithmetic), not read back from the code under test.
"""

import math
import warnings

import numpy as np
import pytest
import xarray as xr

from calibprob.compare import SpecError, format_table, parse_spec, rank_results, summary
from calibprob.compare.ranking import (
    coverage_se,
    format_ranking,
    paired_ranking,
    stack_pipelines,
    undercovers,
)


def results(nll=None, coverage=None, width=None, n_test=100, names=None, levels=(0.9,)):
    """A results root Dataset over (dataset, repetition, calibrator) from per-(calibrator, repetition) rows."""
    some = next(x for x in (nll, coverage, width) if x is not None)
    P, R = np.asarray(some, float).shape[:2]
    names = names or [f"m{i}" for i in range(P)]
    coords = {"dataset": ["d"], "repetition": np.arange(R), "calibrator": names, "confidence_level": list(levels)}
    ds = xr.Dataset(coords=coords)
    if nll is not None:
        ds["nll"] = (("dataset", "repetition", "calibrator"), np.asarray(nll, float).T[None])
    for name, x in (("coverage", coverage), ("width", width)):
        if x is not None:
            a = np.asarray(x, float)
            a = a[..., None] if a.ndim == 2 else a  # (P, R, level)
            ds[name] = (("dataset", "repetition", "calibrator", "confidence_level"), a.transpose(1, 0, 2)[None])
    ds["n_test"] = (("dataset", "repetition"), np.full((1, R), n_test))
    return ds


def sd(xs):
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


# ------------------------------------------------------------------------------------ the tie rule
def test_two_pipelines_within_two_dse_are_tied_and_a_consistent_difference_is_not():
    # The repetitions differ a lot (splits of different difficulty), the pipelines little:
    # "far" is worse by 0.10-0.12 on every split (paired: clearly worse), "near" by -0.05..+0.15
    # (paired: within noise). An unpaired comparison could not tell them apart.
    best = [1.00, 2.00, 3.00, 1.50]
    far = [1.10, 2.12, 3.11, 1.60]
    near = [0.95, 2.15, 3.05, 1.60]
    rk = rank_results(results(nll=[far, best, near], names=["far", "best", "near"]))
    b = rk.sel(dataset="d")
    R = 4
    for name, s in (("far", far), ("near", near)):
        d = [x - y for x, y in zip(s, best)]
        delta = sum(d) / R
        dse = math.sqrt(R) * sd(d) / R  # az.compare's sqrt(n) sd(diff), divided by R for a mean
        assert float(b["score_diff"].sel(pipeline=name)) == pytest.approx(delta, abs=1e-12)
        assert float(b["score_dse"].sel(pipeline=name)) == pytest.approx(dse, abs=1e-12)
        assert bool(b["score_tied"].sel(pipeline=name)) == (delta <= 2 * dse)
    assert bool(b["score_tied"].sel(pipeline="near"))  # 0.0625 <= 2 * 0.0427
    assert not bool(b["score_tied"].sel(pipeline="far"))  # 0.1075 > 2 * 0.0048
    assert b["score_rank"].sel(pipeline=["best", "near", "far"]).values.tolist() == [1, 2, 3]
    assert bool(b["score_tied"].sel(pipeline="best"))
    # the unpaired standard errors overlap hugely: pairing is what separates "far"
    assert float(b["score_se"].sel(pipeline="far")) > 5 * float(b["score_dse"].sel(pipeline="far"))
    text = format_ranking(rk, 4)
    near_line = next(line for line in text.splitlines() if " near " in line)
    far_line = next(line for line in text.splitlines() if " far " in line)
    assert near_line.rstrip().endswith("tied") and not far_line.rstrip().endswith("tied")


def test_crps_ranking_uses_crps_and_bad_score_is_rejected():
    ds = results(nll=[[1.0, 1.0], [2.0, 2.0]], names=["a", "b"])
    ds["crps"] = ds["nll"].copy(data=ds["nll"].values[..., ::-1])  # b is best by CRPS
    assert rank_results(ds, "crps")["score_rank"].sel(dataset="d").values.tolist() == [2, 1]
    assert rank_results(ds, "crps").attrs["rank_by"] == "crps"
    with pytest.raises(ValueError, match=r"by must be one of 'nll', 'crps'.*got 'width'"):
        rank_results(ds, "width")


def test_one_repetition_leaves_dse_undefined_and_ties_nothing_but_the_best():
    r = paired_ranking([[1.0], [1.0 + 1e-9]])
    assert r["rank"].tolist() == [1, 2]
    assert np.isnan(r["dse"][1]) and r["tied"].tolist() == [True, False]


def test_identical_pipelines_are_tied():
    r = paired_ranking([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    assert r["diff"][1] == 0 and r["dse"][1] == 0 and r["tied"].tolist() == [True, True]


def test_incomplete_pipeline_is_not_ranked_and_failed_task_is_dropped_for_all():
    nan = np.nan
    s = np.array(
        [
            [1.0, 2.0, nan, 1.5],  # a: scored on the tasks that ran
            [1.2, 2.1, nan, 1.7],  # b: likewise
            [0.5, nan, nan, 0.6],  # c: failed on repetition 1 alone -> incomplete, not paired
            [nan, nan, nan, nan],  # d: intervals only
        ]
    )
    r = paired_ranking(s)
    assert r["rank"].tolist() == [1, 2, 0, 0]
    assert r["n"].tolist() == [3, 3, 2, 0]
    # repetition 2 failed for everyone: a and b are compared on the three others
    d = [1.2 - 1.0, 2.1 - 2.0, 1.7 - 1.5]
    assert r["dse"][1] == pytest.approx(sd(d) / math.sqrt(3))
    assert r["mean"][2] == pytest.approx(0.55)  # its own mean is kept for display, never ranked
    ds = results(nll=s, names=["a", "b", "c", "d"])
    text = format_ranking(rank_results(ds))
    assert "incomplete: scored on 2 repetition(s)" in text and "not scored (failed)" in text


def test_bad_score_matrix_is_rejected():
    with pytest.raises(ValueError, match="scores must be a 2-D"):
        paired_ranking([1.0, 2.0])
    with pytest.raises(ValueError, match="eligible must have one entry per pipeline"):
        paired_ranking([[1.0], [2.0]], eligible=[True])


# --------------------------------------------------------------------------- intervals and coverage
def test_coverage_se_is_the_larger_of_binomial_and_across_repetition():
    cov = xr.DataArray([0.80, 0.90, 1.00], dims="repetition")
    n = xr.DataArray([50, 50, 50], dims="repetition")
    binom = math.sqrt(0.9 * 0.1 / 150)
    across = sd([0.8, 0.9, 1.0]) / math.sqrt(3)
    assert float(coverage_se(cov, n, 0.9)) == pytest.approx(max(binom, across))
    steady = xr.DataArray([0.85, 0.85, 0.85], dims="repetition")
    assert float(coverage_se(steady, n, 0.9)) == pytest.approx(binom)
    # one repetition: the across-repetition se is undefined and the binomial one is used
    assert float(coverage_se(steady[:1], n[:1], 0.9)) == pytest.approx(math.sqrt(0.09 / 50))
    assert not bool(undercovers(xr.DataArray([np.nan, np.nan], dims="repetition"), n[:2], 0.9))


def test_a_narrower_under_covering_interval_is_not_marked_best():
    # 3 repetitions of 100 test points at level 0.9: binomial se sqrt(.09/300) = 0.0173
    narrow = dict(cov=[0.84, 0.85, 0.83], width=[1.0, 1.1, 0.9])  # short by 0.06 > 2 se
    edge = dict(cov=[0.88, 0.87, 0.89], width=[1.3, 1.4, 1.2])  # short by 0.02 < 2 se: admissible
    wide = dict(cov=[0.91, 0.90, 0.92], width=[1.6, 1.7, 1.5])
    ds = results(
        coverage=[narrow["cov"], edge["cov"], wide["cov"]],
        width=[narrow["width"], edge["width"], wide["width"]],
        names=["narrow", "edge", "wide"],
    )
    se_n = max(math.sqrt(0.09 / 300), sd(narrow["cov"]) / math.sqrt(3))
    assert 0.84 < 0.9 - 2 * se_n  # the hand check of the premise
    rk = rank_results(ds).sel(dataset="d", confidence_level=0.9)
    assert rk["undercovers"].values.tolist() == [True, False, False]
    assert rk["width_rank"].values.tolist() == [0, 1, 2]
    assert float(rk["coverage_se"].sel(pipeline="narrow")) == pytest.approx(se_n)
    # the comparison table's "*" agrees: the narrowest admissible width, not the narrowest
    best = summary(ds, ["width"])["best"].sel(dataset="d", row="width@0.9")
    assert best.values.tolist() == [False, True, False]
    table = format_table(ds, ["width"])
    row = next(line for line in table.splitlines() if line.startswith("width@0.9"))
    assert "*1.300" in row and "*1.000" not in row
    text = format_ranking(rank_results(ds))
    assert "no pipeline has nll scores" in text
    assert next(line for line in text.splitlines() if " narrow " in line).rstrip().endswith("under-covers")


def test_interval_only_method_is_ranked_by_width_only():
    ds = results(
        nll=[[1.0, 1.1, 0.9], [np.nan] * 3],
        coverage=[[0.9, 0.92, 0.91], [0.9, 0.91, 0.9]],
        width=[[2.0, 2.1, 1.9], [1.5, 1.6, 1.4]],
        names=["dist", "jplus"],
    )
    rk = rank_results(ds).sel(dataset="d")
    assert rk["score_rank"].values.tolist() == [1, 0]
    assert rk["width_rank"].sel(confidence_level=0.9).values.tolist() == [2, 1]
    assert "intervals only: ranked by width below" in format_ranking(rank_results(ds))


def test_infinite_width_ranks_last_and_is_never_tied():
    r = paired_ranking([[1.0, 1.2], [np.inf, np.inf], [1.1, 1.3]])
    assert r["rank"].tolist() == [1, 3, 2]
    assert not r["tied"][1]


# ------------------------------------------------------------------------- pipelines and the file
def test_ranking_runs_over_base_calibrator_pairs():
    # a future results file with a `base` dimension: the pairs are ranked together
    rng = np.random.default_rng(4)
    noise = rng.normal(0, 1, size=(1, 5, 1, 1))  # split difficulty, shared by every pair
    shift = np.array([[0.0, 0.3], [0.1, 0.6]])  # (base, calibrator)
    nll = noise + shift[None, None] + rng.normal(0, 1e-3, size=(1, 5, 2, 2))
    ds = xr.Dataset(
        {"nll": (("dataset", "repetition", "base", "calibrator"), nll)},
        coords={"dataset": ["d"], "repetition": np.arange(5), "base": ["gp", "ols"], "calibrator": ["iso", "none"]},
    )
    rk = rank_results(ds)
    assert rk["pipeline"].values.tolist() == ["gp/iso", "gp/none", "ols/iso", "ols/none"]
    assert rk["pipeline_base"].values.tolist() == ["gp", "gp", "ols", "ols"]
    assert rk["score_rank"].sel(dataset="d").values.tolist() == [1, 3, 2, 4]
    assert rk.attrs["pipeline_dims"] == "base,calibrator"
    st = stack_pipelines(ds)
    np.testing.assert_array_equal(
        st["nll"].sel(pipeline="ols/none").values, ds["nll"].sel(base="ols", calibrator="none")
    )


def test_ranking_without_pipeline_dimension_is_rejected():
    with pytest.raises(ValueError, match="none of the pipeline dimensions"):
        rank_results(xr.Dataset({"nll": ("dataset", [1.0])}, coords={"dataset": ["d"]}))


def test_ranking_round_trips_through_netcdf(tmp_path):
    ds = results(
        nll=[[1.0, 1.2, 0.9], [np.nan] * 3],
        coverage=[[0.8, 0.81, 0.8], [0.9, 0.9, 0.9]],
        width=[[1.0, 1.0, 1.0], [2.0, 2.1, 2.2]],
        names=["a", "b"],
    )
    rk = rank_results(ds)
    rk.to_netcdf(tmp_path / "r.nc", engine="h5netcdf")
    back = xr.open_dataset(tmp_path / "r.nc", engine="h5netcdf").load()
    xr.testing.assert_identical(back, rk)


def test_rank_by_is_a_typed_spec_key_outside_the_fingerprint():
    base = {
        "name": "x",
        "datasets": [{"name": "b", "function": "branin", "n": 40, "noise": 0.1}],
        "split": {"train": 0.5, "test": 0.5},
        "base": {"kind": "ols"},
        "methods": {"m": {"kind": "base"}},
    }
    assert parse_spec(base).rank_by == "nll"
    crps = parse_spec({**base, "rank_by": "crps"})
    assert crps.rank_by == "crps" and crps.fingerprint == parse_spec(base).fingerprint
    assert parse_spec(crps.to_dict()) == crps
    with pytest.raises(SpecError, match=r"rank_by must be one of 'nll', 'crps'; got 'crsp'\. Did you mean 'crps'"):
        parse_spec({**base, "rank_by": "crsp"})
    with pytest.raises(SpecError, match=r"rank_by must be one of 'nll', 'crps'; got 1"):
        parse_spec({**base, "rank_by": 1})


def test_compare_stores_and_prints_the_ranking(tmp_path, capsys):
    from calibprob.cli import main

    spec = tmp_path / "s.toml"
    spec.write_text("""
name = "rank"
datasets = [{ name = "branin", function = "branin", n = 120, noise = 0.2 }]
repetitions = 3
seed = 5
confidence_level = [0.5, 0.9]
[split]
train = 0.5
calibrate = 0.25
test = 0.25
[base]
kind = "ols"
[methods.vanilla]
kind = "base"
[methods.scaled]
kind = "variance-scaling"
[methods."J+"]
kind = "jackknife-plus"
""")
    out = tmp_path / "r.nc"
    assert main(["compare", str(spec), "--out", str(out), "--no-progress", "--rank-by", "crps"]) == 0
    printed = capsys.readouterr().out
    assert "== branin: ranking by crps (lower is better), paired over 3 repetitions" in printed
    assert "intervals only: ranked by width below" in printed
    tree = xr.open_datatree(out, engine="h5netcdf")
    try:
        stored = tree["ranking"].to_dataset().load()
        metrics = tree.to_dataset().load()
    finally:
        tree.close()
    assert stored.attrs["rank_by"] == "crps"
    again = rank_results(metrics, "crps")
    for name in again.data_vars:  # (the stored group also inherits the root's coordinates)
        xr.testing.assert_allclose(stored[name], again[name])
    assert stored["score_rank"].sel(dataset="branin", pipeline="J+").item() == 0
    # `report` prints the same ranking (by the spec's nll unless told)
    from calibprob.cli import main as cli

    assert cli(["report", str(out), "--rank-by", "crps", "--plots", str(tmp_path / "p")]) == 0
    assert "ranking by crps" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli(["report", str(out), "--rank-by", "width"])
    assert "invalid choice: 'width'" in capsys.readouterr().err


# ------------------------------------------------------------------ convergence of an MCMC base
def _two_bases(rhat_pm, div_pm):
    """nll over (base, calibrator) with the diagnostics a pymc-linear base stores: only base 'pm' has them."""
    rng = np.random.default_rng(7)
    R = len(rhat_pm)
    nan = np.full(R, np.nan)
    return xr.Dataset(
        {
            "nll": (("dataset", "repetition", "base", "calibrator"), rng.normal(size=(1, R, 2, 2))),
            "rhat": (("dataset", "repetition", "base"), np.stack([rhat_pm, nan], axis=1)[None]),
            "divergences": (("dataset", "repetition", "base"), np.stack([div_pm, nan], axis=1)[None]),
        },
        coords={"dataset": ["d"], "repetition": np.arange(R), "base": ["pm", "ols"], "calibrator": ["b", "iso"]},
    )


def test_a_base_with_high_rhat_or_divergences_is_flagged_in_ranking_and_table():
    from calibprob.compare.ranking import RHAT_MAX, convergence_flags

    rhat = [1.001, 1.047, 1.0132, 1.004]
    div = [0.0, 0.0, 5.0, 2.0]
    ds = _two_bases(rhat, div)
    # the reason, computed here from its definition: the largest r-hat, how many repetitions exceed
    # 1.01, the total divergent transitions and in how many repetitions
    n_high = sum(r > RHAT_MAX for r in rhat)
    reason = (
        f"max r̂ {max(rhat):.3f} > 1.01 in {n_high} of 4 repetition(s); "
        f"{int(sum(div))} divergent transition(s) in {sum(d > 0 for d in div)} of 4 repetition(s)"
    )
    assert reason == "max r̂ 1.047 > 1.01 in 2 of 4 repetition(s); 7 divergent transition(s) in 2 of 4 repetition(s)"
    flags = convergence_flags(ds).sel(dataset="d")
    assert flags.sel(pipeline="pm/b").item() == reason and flags.sel(pipeline="pm/iso").item() == reason
    assert flags.sel(pipeline="ols/b").item() == "" and flags.sel(pipeline="ols/iso").item() == ""

    rk = rank_results(ds)
    assert rk["base_flag"].sel(dataset="d", pipeline="pm/iso").item() == reason
    printed = format_ranking(rk, 4)
    note = f"! base not converged for pm/b, pm/iso: {reason}; its scores may not be the model's"
    assert note in printed
    # every row of the flagged base carries the marker, no row of the other base does
    for pipe, flagged in (("pm/b", True), ("pm/iso", True), ("ols/b", False), ("ols/iso", False)):
        row = next(line for line in printed.splitlines() if f"  {pipe}  " in line)
        assert row.rstrip().endswith("! base not converged") == flagged, row

    table = format_table(ds, ["nll"])
    assert note in table
    header = table.splitlines()[2]
    assert "pm/b !" in header and "pm/iso !" in header and "ols/b !" not in header
    assert summary(ds, ["nll"])["base_flag"].sel(dataset="d", calibrator="pm/b").item() == reason


def test_a_converged_base_and_a_file_without_diagnostics_are_not_flagged():
    ds = _two_bases([1.001, 1.009, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0])
    rk = rank_results(ds)
    assert (rk["base_flag"].values == "").all()
    assert "not converged" not in format_ranking(rk) and "not converged" not in format_table(ds, ["nll"])
    plain = ds.drop_vars(["rhat", "divergences"])
    assert "base_flag" not in rank_results(plain) and "base_flag" not in summary(plain, ["nll"])
    # only divergences (ADVI stores NaN r-hat): still flagged
    only_div = _two_bases([np.nan] * 4, [0.0, 1.0, 0.0, 0.0])
    assert rank_results(only_div)["base_flag"].sel(dataset="d", pipeline="pm/b").item() == (
        "1 divergent transition(s) in 1 of 4 repetition(s)"
    )
    # an infinite r-hat (a chain that never moved: NUTS without tuning) is the least converged, not "no diagnostic"
    stuck = _two_bases([1.0, np.inf, 1.0, 1.0], [0.0, 3.0, 0.0, 0.0])
    assert rank_results(stuck)["base_flag"].sel(dataset="d", pipeline="pm/b").item() == (
        "max r̂ inf > 1.01 in 1 of 4 repetition(s); 3 divergent transition(s) in 1 of 4 repetition(s)"
    )


def test_table_prints_an_infinite_score_as_inf_without_warnings():
    # One repetition whose back-transformed law has no finite variance (transforms.moments
    # returns std = inf) — the table says inf, not nan, and no RuntimeWarning leaks to the user.
    ds = results(nll=[[1.0], [np.inf]], names=["finite", "wide"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = format_table(ds, ["nll"])
    row = next(line for line in table.splitlines() if line.startswith("nll"))
    assert row.split()[1:] == ["*1.000", "inf"]


def test_table_prints_a_dash_where_a_method_has_no_score():
    # An interval-only method (ACI, PID, ...) has no NLL: the table says so with a dash, as the
    # ranking does, not "nan".
    ds = results(nll=[[1.0], [np.nan]], names=["dist", "intervals"])
    table = format_table(ds, ["nll"])
    row = next(line for line in table.splitlines() if line.startswith("nll"))
    assert row.split()[1:] == ["*1.000", "—"]


def test_one_repetition_leaves_the_undefined_paired_se_blank():
    # With one repetition there is no spread to pair: dse is NaN in the Dataset, blank in print.
    ds = results(nll=[[1.0], [1.2]], coverage=[[0.9], [0.91]], width=[[2.0], [2.2]])
    rk = rank_results(ds)
    assert np.isnan(rk["score_dse"].sel(dataset="d", pipeline="m1"))  # the best has dse 0 (itself)
    text = format_ranking(rk)
    assert "nan" not in text
    assert "m1" in text and "0.2000" in text  # the difference to the best is still printed
    from calibprob.compare.report.html import _ranking_html

    html = _ranking_html(rk, "d")  # the HTML report's ranking uses the same rule
    assert "nan" not in html and "0.2000" in html
