"""The user's own model as a comparison base: ``kind = "pymc-model"`` and ``kind = "bambi"``.

References: the bases get each part's raw rows, identified by the split's obs ids (checked against the
data file read independently with pandas); the log density is the Normal density of the posterior
draws written out with scipy; the conformal Bayes sets equal the authors' rank computation in NumPy
(``benchmarks/repro_conformal_bayes.reference_kept``) on the same draws; marginal and per-group
calibration differ on the same base.
"""

from __future__ import annotations

import dataclasses
import pickle
import warnings
from importlib import resources

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from calibprob import ConvergenceWarning
from calibprob.bases.pymc_model import BambiBase, PyMCModelBase, build_bambi_base
from calibprob.compare import SpecError, parse_spec
from calibprob.compare import tasks as T
from calibprob.compare.methods import TaskContext, run_kind
from calibprob.compare.runner import with_bases
from tests.support import user_models
from tests.support.paths import MODELS, load_benchmark

GROUP_SHIFT = "tests.support.user_models:group_shift"


def _radon_spec(bases=None, methods=None, **extra) -> dict:
    return {
        "name": "own",
        "datasets": [{"name": "radon_mn", "groups": "county.name"}],
        "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
        "standardize": False,
        "bases": bases or {"mine": {"kind": "pymc-model", "entry": GROUP_SHIFT}},
        "methods": methods or {"raw": {"kind": "base"}},
        **extra,
    }


def _radon_file() -> pd.DataFrame:
    with resources.files("calibprob.datasets").joinpath("data", "radon_mn.csv").open() as fh:
        return pd.read_csv(fh)


# --- the raw rows: the right rows, text and group columns included ------------------------------------


def test_frame_bases_get_the_raw_rows_of_each_part_by_obs_id():
    spec = parse_spec(_radon_spec())
    _, arrays = T._prepare(spec, "radon_mn", 0)
    raw = _radon_file()
    seen = []
    for part in ("train", "calibrate", "test"):
        frame, y = arrays["frames"][part]
        ids = frame.index.to_numpy()
        seen.append(ids)
        # the file's own rows at those ids: text column kept, nothing encoded, the target left out
        pd.testing.assert_frame_equal(
            frame.reset_index(drop=True), raw.drop(columns="log.radon").iloc[ids].reset_index(drop=True)
        )
        assert pd.api.types.is_string_dtype(frame["county.name"]) and frame["county.name"].iloc[0].isupper()
        np.testing.assert_array_equal(y, raw["log.radon"].to_numpy()[ids])
        # the Mondrian groups of the part are the same rows' county names, the numeric X the same rows
        np.testing.assert_array_equal(arrays["groups"][part].astype(str), frame["county.name"].to_numpy(str))
        X = arrays[part][0]
        np.testing.assert_array_equal(X[:, 0], frame["basement"].to_numpy(float))
    ids = np.concatenate(seen)
    assert sorted(ids.tolist()) == list(range(len(raw)))  # a partition of the rows: the split is shuffled, not sliced
    assert seen[0].tolist() != list(range(len(seen[0])))  # not the first rows: picked by id


def test_csv_rows_follow_dropna_subsample_and_groups(tmp_path):
    rng = np.random.default_rng(3)
    n = 80
    table = pd.DataFrame(
        {
            "id": rng.permutation(n).astype(float),  # a shuffled id: identity, not position
            "soil": rng.choice(["clay", "loam", "sand"], n),
            "site": rng.choice(["north", "south"], n),
            "x": rng.normal(size=n),
            "y": rng.normal(size=n),
        }
    )
    table.loc[[4, 17], "x"] = np.nan
    path = tmp_path / "plants.csv"
    table.to_csv(path, index=False)
    entry = {"name": "plants", "path": str(path), "target": "y", "features": ["id", "x", "soil"], "one_hot": ["soil"]}
    entry |= {"dropna": True, "subsample": 60, "groups": "site"}
    spec = parse_spec(_radon_spec(datasets=[entry]), root=tmp_path)
    _, arrays = T._prepare(spec, "plants", 0)
    for part in ("train", "calibrate", "test"):
        frame, y = arrays["frames"][part]
        assert list(frame.columns) == ["id", "x", "soil", "site"]  # the group column too, though not a feature
        X = arrays[part][0]
        np.testing.assert_array_equal(frame["id"].to_numpy(), X[:, 0])  # the same rows as the model matrix
        rows = table.set_index("id").loc[frame["id"]]
        np.testing.assert_array_equal(frame["soil"].to_numpy(), rows["soil"].to_numpy())
        np.testing.assert_array_equal(frame["site"].to_numpy(), arrays["groups"][part])
        np.testing.assert_array_equal(y, rows["y"].to_numpy())


def test_specs_without_a_frame_base_compute_no_raw_rows():
    spec = parse_spec(_radon_spec(bases={"ols": {"kind": "bayesian-ridge"}}))
    _, arrays = T._prepare(spec, "radon_mn", 0)
    assert "frames" not in arrays


# --- bad input, refused naming the fix ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "match"),
    [
        ({"kind": "pymc-model"}, r"bases.mine \(kind 'pymc-model'\) needs exactly one of entry"),
        ({"kind": "pymc-model", "entry": "no_such_module_xyz:f"}, r"cannot import 'no_such_module_xyz'.*PYTHONPATH"),
        ({"kind": "pymc-model", "entry": "tests.support.user_models:nope"}, r"has no attribute 'nope'"),
        ({"kind": "pymc-model", "entry": GROUP_SHIFT, "drawz": 10}, r"unknown key 'drawz'.*Did you mean 'draws'"),
        ({"kind": "bambi"}, r"bases.mine \(kind 'bambi'\) needs formula = "),
        ({"kind": "bambi", "formula": "y ~ x", "familly": "t"}, r"unknown key 'familly'.*Valid keys: chains, draws"),
        ({"kind": "bambi", "formula": "y ~ x", "draws": 5}, r"bases.mine.draws"),
    ],
)
def test_bad_base_tables_are_refused(table, match):
    with pytest.raises(SpecError, match=match):
        parse_spec(_radon_spec(bases={"mine": table}))


def test_a_frame_base_on_the_standardised_scale_is_refused():
    data = _radon_spec()
    del data["standardize"]
    with pytest.raises(SpecError, match=r"\[bases.mine\] \(kind 'pymc-model'\) sees the data.*set standardize = false"):
        parse_spec(data)
    parse_spec({**data, "target_transform": "log1p"})  # every score on the original scale: fine


def test_posterior_kinds_accept_the_new_bases_and_refuse_others():
    methods = {"cb": {"kind": "conformal-bayes"}, "lj": {"kind": "loo-jackknife-plus"}}
    methods["loo"] = {"kind": "isotonic", "calibration_data": "loo"}
    bases = {"mine": {"kind": "pymc-model", "entry": GROUP_SHIFT}, "b": {"kind": "bambi", "formula": "y ~ x"}}
    parse_spec(_radon_spec(bases=bases, methods=methods))
    with pytest.raises(SpecError, match=r"needs a base of kind 'pymc-linear' or 'pymc-model' or 'bambi'.*bases = \["):
        parse_spec(_radon_spec(bases={**bases, "r": {"kind": "bayesian-ridge"}}, methods=methods))


def test_results_never_name_the_code_and_python_objects_are_accepted():
    spec = parse_spec(_radon_spec())
    text = spec.results_text()
    assert "entry" not in text and f'"label" = "{GROUP_SHIFT}"' in text and '"kind" = "pymc-model"' in text
    data = _radon_spec()
    del data["bases"]
    data["base"] = {"kind": "bayesian-ridge"}
    table = {"kind": "pymc-model", "factory": user_models.group_shift, "draws": 50}
    mine = with_bases(data, {"mine": table})
    assert dict(mine.bases)["mine"]["factory"] is user_models.group_shift
    again = with_bases(data, {"mine": dict(table)})
    assert mine.fingerprint == again.fingerprint  # the factory by its name, not its address
    assert "tests.support.user_models:group_shift" in mine.results_text()
    with pytest.raises(SpecError, match=r"bases.mine.factory must be a Python function; from TOML name it with entry"):
        with_bases(data, {"mine": {"kind": "pymc-model", "factory": "tests.support.user_models:group_shift"}})


def test_kinds_that_refit_per_fold_are_refused_on_a_sampled_model():
    with pytest.raises(
        SpecError, match=r"methods.cv \(kind 'cv-plus'\) refits its base.*use kind 'loo-jackknife-plus'"
    ):
        parse_spec(_radon_spec(methods={"cv": {"kind": "cv-plus"}}))


_DF = pd.DataFrame({"x": [0.0, 1.0, 2.0, 3.0], "g": ["a", "b", "a", "b"]})
_Y = np.array([0.1, 1.2, 1.9, 3.2])


def test_a_factory_that_returns_no_model_is_refused():
    with pytest.raises(
        TypeError, match=r"must return a pymc.Model \(built in `with pm.Model\(\) as model:`.*got DataFrame"
    ):
        PyMCModelBase(user_models.not_a_model).fit(_DF, _Y)


def test_a_model_without_pm_data_is_refused():
    with pytest.raises(ValueError, match=r"has no pm.Data input containers.*x = pm.Data\('x', data\['x'\]"):
        PyMCModelBase(user_models.no_data).fit(_DF, _Y)


def test_non_frame_input_is_refused():
    with pytest.raises(TypeError, match=r"data must be a pandas DataFrame of the data set's columns"):
        PyMCModelBase(user_models.linear_x).fit(_DF.to_numpy(), _Y)


def test_a_bambi_formula_naming_a_missing_column_is_refused():
    base = build_bambi_base({"formula": "y ~ x + nothere"}, seed=0)
    with pytest.raises(ValueError, match=r"names 'nothere', which is not a column of the data.*\['x', 'g'\]"):
        base.fit(_DF, _Y)


def test_a_transformed_bambi_response_is_refused():
    with pytest.raises(ValueError, match=r"response 'log\(y\)' must be a plain column name.*target_transform"):
        BambiBase("log(y) ~ x").fit(_DF, _Y)


# --- a tiny fitted model: every method kind the posterior bases serve ---------------------------------


#: The tests below read one NUTS fit (100 draws x 2 chains): its sampler seed comes from the seed sweep
#: (tests/conftest.py), 3 in the default run, 0..19 under ``make test-seeds``; the data stay those of seed 35.
#: Swept at seeds 0..19 (2026-11-29, PyMC 6.4.0): all pass; predictive mean within 3.36 Monte Carlo standard
#: errors at worst (limit 5), LOO jackknife+ 80 % coverage 0.833-0.867 on the 30 test points (limit 0.5-1).
SEEDED = pytest.mark.seeded(3, scope="module")


@pytest.fixture(scope="module")
def task(seed):
    """A text-grouped linear model, 60 fit / 30 calibrate / 30 test rows, indexed by shuffled obs ids; NUTS at
    ``seed`` (the task's own seed ``seed + 1``: 4 in the default run)."""
    rng = np.random.default_rng(35)
    n = 120
    g = rng.choice(["east", "north", "west"], n)
    x = rng.normal(size=n)
    y = (
        x
        + np.select([g == "east", g == "north"], [1.5, -1.0], 0.0)
        + rng.normal(size=n) * np.where(g == "west", 1.5, 0.3)
    )
    ids = rng.permutation(1000)[:n]
    frame = pd.DataFrame({"x": x, "g": g}, index=pd.Index(ids, name="obs"))
    parts = {"train": slice(0, 60), "calibrate": slice(60, 90), "test": slice(90, n)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        base = PyMCModelBase(user_models.group_shift, draws=100, tune=100, chains=2, random_state=seed)
        base.fit(frame.iloc[parts["train"]], y[parts["train"]])
    groups = {k: g[sl] for k, sl in parts.items()}
    ctx = TaskContext(
        frame.iloc[parts["train"]], y[parts["train"]], frame.iloc[parts["calibrate"]], y[parts["calibrate"]],
        frame.iloc[parts["test"]], base, {"kind": "pymc-model"}, None, seed + 1, confidence_levels=(0.5, 0.8), groups=groups,
    )  # fmt: skip
    return ctx, y[parts["test"]]


@SEEDED
def test_the_log_density_is_the_normal_density_of_the_posterior_draws(task, seed, record_property):
    ctx, _ = task
    post = ctx.base.idata_["posterior"]
    a = post["a"].values.reshape(-1, 3)
    b, s = post["b"].values.reshape(-1), post["s"].values.reshape(-1)
    level = {"east": 0, "north": 1, "west": 2}
    X = ctx.X_test.iloc[:7]
    mu = a[:, [level[v] for v in X["g"]]] + b[:, None] * X["x"].to_numpy()[None, :]
    grid = np.linspace(-3, 3, 11)
    want = stats.norm.logpdf(grid[None, None, :], mu[:, :, None], s[:, None, None])
    np.testing.assert_allclose(ctx.base.log_density(X, grid), want, rtol=1e-10, atol=1e-10)
    # predictive draws: seeded, one per posterior draw, centred on the draws' means
    d1 = ctx.base.sample_predictive(X, random_state=seed + 6)  # 9 in the default run
    np.testing.assert_array_equal(d1, ctx.base.sample_predictive(X, random_state=seed + 6))
    assert d1.shape == mu.shape
    # the mean of 200 predictive draws against the posterior draws' mean: within 5 Monte Carlo standard errors
    # (of the 7 points; the sweep's worst is recorded as mean_gap_in_se)
    se = float(s.mean()) / np.sqrt(len(s))
    record_property("mean_gap_in_se", float(np.max(np.abs(d1.mean(axis=0) - mu.mean(axis=0))) / se))
    np.testing.assert_allclose(d1.mean(axis=0), mu.mean(axis=0), atol=5 * se)


@SEEDED
def test_a_fitted_base_travels_by_pickle(task):
    # a Dask worker gets the fitted base by pickle: the model is built again, the draws are the same
    ctx, _ = task
    again = pickle.loads(pickle.dumps(ctx.base))
    X = ctx.X_test.iloc[:4]
    np.testing.assert_array_equal(again.log_density(X, [0.0, 1.0]), ctx.base.log_density(X, [0.0, 1.0]))
    np.testing.assert_array_equal(
        again.sample_predictive(X, random_state=1), ctx.base.sample_predictive(X, random_state=1)
    )


@SEEDED
def test_conformal_bayes_on_the_user_model_equals_the_authors_ranks(task):
    ref = load_benchmark("repro_conformal_bayes")
    ctx, _ = task
    out = run_kind("conformal-bayes", ctx, grid_size=40, grid_margin=1.0)
    assert out.sizes["obs"] == 30
    y = ctx.y_train
    grid = np.linspace(y.min() - y.std(), y.max() + y.std(), 40)
    ll = ctx.base.log_density(ctx.X_train, y[:, None])[:, :, 0]
    logf = ctx.base.log_density(ctx.X_test, grid)
    lower, upper = (out[k].sel(confidence_level=0.8).values for k in ("lower", "upper"))
    step = grid[1] - grid[0]
    for j in range(30):
        kept = ref.reference_kept(ll, logf[:, j, :], alpha=0.2)
        first, last = grid[kept][[0, -1]]
        assert np.isfinite(lower[j]) and 0.0 < first - lower[j] <= step  # refined just outside the kept grid points
        assert np.isfinite(upper[j]) and 0.0 < upper[j] - last <= step


@SEEDED
def test_loo_kinds_run_on_the_user_model(task, record_property):
    ctx, y_test = task
    loo = run_kind("isotonic", ctx, calibration_data="loo", extrapolate=True)
    held = run_kind("isotonic", ctx, extrapolate=True)
    assert loo.sizes["obs"] == held.sizes["obs"] == 30
    assert not np.allclose(loo["quantile"].values, held["quantile"].values)  # calibrated on other data
    jk = run_kind("loo-jackknife-plus", ctx)
    lo, hi = (jk[k].sel(confidence_level=0.8).values for k in ("lower", "upper"))
    assert np.isfinite(lo).all() and (hi > lo).all()
    record_property("jackknife_plus_coverage_80", float(np.mean((lo <= y_test) & (y_test <= hi))))
    assert 0.5 <= np.mean((lo <= y_test) & (y_test <= hi)) <= 1.0


@SEEDED
def test_marginal_and_per_group_calibration_differ_on_the_user_model(task):
    ctx, _ = task
    marginal = dataclasses.replace(ctx, groups=None)
    per_group = dataclasses.replace(ctx, group_fallback=None, mondrian=True)  # each group its own calibrator
    for kind, options, var in (
        ("isotonic", {"extrapolate": True}, "quantile"),
        ("conformal-bayes", {"grid_size": 40}, "upper"),
    ):
        a = run_kind(kind, marginal, **options)[var].values
        b = run_kind(kind, per_group, **options)[var].values
        assert a.shape == b.shape and not np.allclose(a, b), kind


# --- the real run --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_radon_spec_runs_from_the_cli_and_reports_coverage_by_county(tmp_path):
    from calibprob.cli import main

    out = tmp_path / "radon.nc"
    assert main(["compare", str(MODELS / "radon.toml"), "--out", str(out), "--no-progress"]) == 0
    import xarray as xr

    ds = xr.open_datatree(out).to_dataset()
    errors = {(b, c): e for (b, c), e in np.ndenumerate(ds["error"].isel(dataset=0, repetition=0).values) if e}
    assert not errors, errors
    assert set(ds["base"].values) == {"pymc", "bambi"}
    html = tmp_path / "radon.html"
    assert main(["report", str(out), "--html", str(html)]) == 0
    assert "coverage by group" in html.read_text().lower()


@pytest.mark.slow
def test_the_bambi_base_density_is_the_formula_written_out_from_its_posterior():
    rng = np.random.default_rng(7)
    n = 60
    frame = pd.DataFrame({"x": rng.normal(size=n), "site": rng.choice(["a.1", "b.2", "c.3"], n)})
    y = 0.5 + frame["x"].to_numpy() + frame["site"].map({"a.1": -1.0, "b.2": 0.0, "c.3": 1.0}).to_numpy()
    y = y + 0.3 * rng.normal(size=n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = BambiBase("y ~ x + (1|site)", draws=100, tune=200, chains=2, random_state=1).fit(frame[:45], y[:45])
    post = base.idata_["posterior"]
    X = frame[45:]
    effect = post["1|site"].sel({"site__factor_dim": X["site"].to_numpy()}).values.reshape(-1, len(X))
    mu = post["Intercept"].values.reshape(-1, 1) + post["x"].values.reshape(-1, 1) * X["x"].to_numpy() + effect
    sigma = post["sigma"].values.reshape(-1, 1, 1)
    grid = np.linspace(-3, 3, 9)
    want = stats.norm.logpdf(grid[None, None, :], mu[:, :, None], sigma)
    np.testing.assert_allclose(base.log_density(X, grid), want, rtol=1e-9, atol=1e-9)
    tree = base.loo_tree(random_state=2)
    assert tree["log_likelihood"]["y"].shape == (2, 100, 45)
