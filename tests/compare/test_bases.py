"""Several bases in one spec (``[bases.NAME]``): layout, numbers, and the load-time errors."""

import numpy as np
import pytest
import xarray as xr

from calibprob.compare import SpecError, load_spec, parse_spec, run_comparison, run_task
from calibprob.compare.assembly import failed_tasks
from calibprob.compare.report import format_table, load_results, summary, write_html, write_plots

COMMON = {
    "datasets": ["diabetes", {"name": "branin", "function": "branin", "n": 120, "noise": 0.5}],
    "split": {"train": 0.6, "calibrate": 0.2, "test": 0.2},
    "repetitions": 2,
    "seed": 11,
    "confidence_level": [0.5, 0.9],
}
METHODS = {"b": {"kind": "base"}, "iso": {"kind": "isotonic", "extrapolate": True}, "sc": {"kind": "split-conformal"}}


def two_base(**over):
    spec = {
        "name": "two",
        **COMMON,
        "bases": {"lin": {"kind": "ols"}, "ridge": {"kind": "bayesian-ridge"}},
        "methods": {**METHODS, "vs": {"kind": "variance-scaling", "bases": ["ridge"]}},
    }
    spec.update(over)
    return parse_spec(spec)


def one_base(kind):
    return parse_spec(
        {
            "name": f"one-{kind}",
            **COMMON,
            "base": {"kind": kind},
            "methods": {**METHODS, "vs": {"kind": "variance-scaling"}},
        }
    )


def test_two_bases_equal_their_single_base_specs_task_by_task():
    # independent check: each base's scores in the two-base task are those of a spec with that base alone
    spec = two_base()
    out = run_task(spec.to_dict(), "diabetes", 1)
    assert out["nll"].dims[:4] == ("dataset", "repetition", "base", "calibrator")
    assert out["base"].values.tolist() == ["lin", "ridge"]
    assert out["calibrator"].values.tolist() == ["b", "iso", "sc", "vs"]
    assert out.attrs["task_failed"] == 0
    for name, kind in (("lin", "ols"), ("ridge", "bayesian-ridge")):
        alone = run_task(one_base(kind).to_dict(), "diabetes", 1)
        assert "base" not in alone.dims  # the [base] shorthand keeps the one-base layout
        for cal in ("b", "iso", "sc"):
            for var in ("nll", "crps", "coverage", "width"):
                got = out[var].sel(base=name, calibrator=cal, drop=True)
                want = alone[var].sel(calibrator=cal, drop=True)
                xr.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    # "vs" lists only ridge: it runs there and nowhere else, without an error on lin
    assert np.isfinite(out["nll"].sel(base="ridge", calibrator="vs")).all()
    assert np.isnan(out["nll"].sel(base="lin", calibrator="vs")).all()
    assert str(out["error"].sel(base="lin", calibrator="vs").values.item()) == ""
    ridge_alone = run_task(one_base("bayesian-ridge").to_dict(), "diabetes", 1)
    np.testing.assert_allclose(
        out["nll"].sel(base="ridge", calibrator="vs").values.ravel(),
        ridge_alone["nll"].sel(calibrator="vs").values.ravel(),
        rtol=1e-12,
    )
    # ols and bayesian ridge are different models: their base scores differ
    lin_b = out["nll"].sel(base="lin", calibrator="b").values.item()
    assert lin_b != out["nll"].sel(base="ridge", calibrator="b").values.item()
    assert out["base_fit_time"].dims == ("dataset", "repetition", "base")


def test_two_base_comparison_writes_ranks_and_reports(tmp_path):
    spec = two_base()
    tree = run_comparison(spec, tmp_path / "r.nc", progress=False)
    res = load_results(tmp_path / "r.nc")
    assert set(res["nll"].dims) == {"dataset", "repetition", "base", "calibrator"}
    assert res.attrs["spec_fingerprint"] == spec.fingerprint
    # the ranking stacks base x calibrator into pipelines; "lin/vs" never ran and so is not ranked first
    rk = tree["ranking"].to_dataset()
    pipes = rk["pipeline"].values.tolist()
    assert "lin/b" in pipes and "ridge/vs" in pipes
    # every consumer of a results file takes the base dimension
    table = format_table(res, ["nll", "coverage"])
    assert "ridge/iso" in table and "lin/sc" in table
    assert "base" not in summary(res, ["nll"]).dims
    assert write_plots(res, tmp_path / "plots")
    html = write_html(res, tmp_path / "r.html").read_text()
    assert "ridge/iso" in html
    assert failed_tasks(res) == []
    # a second run reuses every part (the parts carry the base coordinate)
    again = run_comparison(spec, tmp_path / "r.nc", progress=False)
    xr.testing.assert_identical(again.to_dataset(), tree.to_dataset())


def test_a_base_spec_keeps_its_fingerprint_and_layout():
    # the [base] shorthand's dict has no 'bases' key, so its fingerprint (and finished parts) are unchanged
    spec = one_base("ols")
    d = spec.to_dict()
    assert "base" in d and "bases" not in d
    assert spec.bases is None and spec.base_names is None
    assert parse_spec(d) == spec
    spec2 = two_base()
    assert "base" not in spec2.to_dict() and parse_spec(spec2.to_dict()) == spec2


def test_failed_task_with_bases_names_base_and_calibrator():
    from calibprob.compare.assembly import _failed_task

    spec = two_base()
    ds = _failed_task(("diabetes", 0), "boom", spec)
    assert ds["error"].dims == ("dataset", "repetition", "base", "calibrator")


def _toml(tmp_path, text):
    p = tmp_path / "s.toml"
    p.write_text('name = "x"\ndatasets = ["diabetes"]\n[split]\ntrain = 0.6\ncalibrate = 0.2\ntest = 0.2\n' + text)
    return p


def test_bases_from_toml(tmp_path):
    spec = load_spec(
        _toml(
            tmp_path,
            '[bases.a]\nkind = "ols"\n[bases.b]\nkind = "gp"\n'
            '[methods.j]\nkind = "jackknife-plus-gp"\nbases = ["b"]\n'
            '[methods.m]\nkind = "base"\n',
        )
    )
    assert spec.base_names == ["a", "b"]
    assert [m.name for m in spec.methods_on("a")] == ["m"]
    assert [m.name for m in spec.methods_on("b")] == ["j", "m"]


BASES = {"lin": {"kind": "ols"}, "g": {"kind": "gp"}}


@pytest.mark.parametrize(
    "over, match",
    [
        ({"bases": {"lin": {"kind": "olss"}}}, r"bases\.lin\.kind must be one of .*Did you mean 'ols'"),
        ({"base": {"kind": "pymc"}}, r"base\.kind must be one of gp, sparse-gp, ols"),
        (
            {"bases": BASES, "methods": {"j": {"kind": "jackknife-plus-gp"}}},
            r"methods\.j \(kind 'jackknife-plus-gp'\) needs a base of kind 'gp' or 'sparse-gp', but would run on "
            r"\[bases\.lin\] of kind 'ols'; list the bases it runs on, e.g. bases = \['g'\]",
        ),
        (
            {"bases": {"s": {"kind": "pymc-linear"}}, "methods": {"f": {"kind": "full-conformal-gp"}}},
            r"methods\.f \(kind 'full-conformal-gp'\).*\[bases\.s\] of kind 'pymc-linear'",
        ),
        (
            {"bases": BASES, "methods": {"s": {"kind": "sharp-gp", "bases": ["lin"]}}},
            r"methods\.s \(kind 'sharp-gp'\) needs a base of kind 'gp' or 'sparse-gp'.*\[bases\.lin\] of kind 'ols'",
        ),
        (
            {"base": {"kind": "bayesian-ridge"}, "methods": {"j": {"kind": "asym-jackknife-plus-gp"}}},
            r"methods\.j .*\[base\] of kind 'bayesian-ridge'; use a base of kind 'gp' or 'sparse-gp'",
        ),
        (
            {"bases": BASES, "methods": {"m": {"kind": "base", "bases": ["gp"]}}},
            r"methods\.m\.bases names 'gp', which is not a base of this spec\. Did you mean 'g'\? Bases: lin, g",
        ),
        ({"bases": BASES, "methods": {"m": {"kind": "base", "bases": ["g", "g"]}}}, r"lists a base twice"),
        ({"bases": BASES, "methods": {"m": {"kind": "base", "bases": []}}}, r"methods\.m\.bases must be a list"),
        (
            {"bases": {"Lin": {"kind": "ols"}, "lin": {"kind": "bayesian-ridge"}}},
            r"duplicate base names: \[bases\.Lin\] and \[bases\.lin\]",
        ),
        ({"bases": {"a/b": {"kind": "ols"}}}, r"without '/'"),
        ({"bases": {}}, r"bases must hold one or more named tables"),
        ({"bases": BASES, "base": {"kind": "ols"}}, r"both \[base\].*and \[bases\.NAME\]"),
        (
            {"base": {"kind": "ols"}, "methods": {"m": {"kind": "base", "bases": ["x"]}}},
            r"methods\.m\.bases applies only to specs with \[bases\.NAME\]",
        ),
        ({"bases": {"lin": {"kind": "ols", "alpha": 1}}}, r"unknown key 'alpha' in \[bases\.lin\] \(kind 'ols'\)"),
        (
            {"bases": {"lin": {"kind": "ols", "fit_intercept": "no"}}},
            r"bases\.lin\.fit_intercept must be true or false",
        ),
    ],
)
def test_bad_bases_are_spec_errors(over, match):
    spec = {"name": "x", **COMMON, "methods": {"b": {"kind": "base"}}}
    spec.pop("base", None)
    spec.update(over)
    if "bases" in over and "base" not in over:
        spec.pop("base", None)
    with pytest.raises(SpecError, match=match):
        parse_spec(spec)


def test_no_base_at_all_is_a_spec_error():
    with pytest.raises(SpecError, match=r"needs a 'base' key.*or several \[bases\.NAME\] tables"):
        parse_spec({"name": "x", **COMMON, "methods": {"b": {"kind": "base"}}})


def test_duplicate_base_table_in_toml_is_a_spec_error(tmp_path):
    p = _toml(tmp_path, '[bases.a]\nkind = "ols"\n[bases.a]\nkind = "gp"\n[methods.m]\nkind = "base"\n')
    with pytest.raises(SpecError, match=r"invalid TOML.*bases.*a"):
        load_spec(p)
