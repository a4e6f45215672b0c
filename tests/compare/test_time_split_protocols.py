"""The time split's protocols for the issue-38 reproductions: row counts, refits on the past, permuted rows,
the ``full-conformal-ls`` and ``enbpi`` kinds, each against the computation by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibprob.bases.linear import LinearRegression
from calibprob.calibrators.online import AdaptiveConformalInterval
from calibprob.calibrators.timeseries import EnbPI, full_conformal_ls
from calibprob.compare import load_spec, parse_spec, run
from calibprob.compare.tasks import _prepare, row_permutation
from calibprob.registry import METHODS
from tests.support.elec2 import ELEC2_SPECS, elec2_extracts
from tests.support.paths import REPO_ROOT as REPO


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    """A drifting linear series of 120 rows (noise that grows), written as a CSV with a time column."""
    rng = np.random.default_rng(7)
    n = 120
    X = rng.normal(size=(n, 2))
    y = X @ [1.0, -2.0] + 0.5 + (0.3 + np.linspace(0, 1, n)) * rng.normal(size=n)
    path = tmp_path_factory.mktemp("ts") / "series.csv"
    pd.DataFrame({"x1": X[:, 0], "x2": X[:, 1], "y": y}).to_csv(path, index=False)
    return path, X, y


def _spec(path, **over):
    spec = {
        "name": "t",
        "datasets": [{"name": "s", "path": str(path), "target": "y"}],
        "split": {"kind": "time", "train": 30, "burn_in": 20, "horizon": 70},
        "base": {"kind": "ols"},
        "standardize": False,
        "confidence_level": [0.8, 0.9],
        "metrics": ["coverage", "width"],
        "methods": {"b": {"kind": "base"}},
    }
    spec.update(over)
    return spec


def _hits(lower, upper, y):
    return ((lower <= y[:, None]) & (y[:, None] <= upper)).mean(axis=0)


def test_a_time_split_in_row_counts_takes_those_rows_in_order(series):
    path, X, y = series
    spec = parse_spec(_spec(path))
    assert spec.split == {"kind": "time", "train": 30, "burn_in": 20, "horizon": 70}
    assert parse_spec(spec.to_dict()).fingerprint == spec.fingerprint
    _, arrays = _prepare(spec, "s", 0)
    np.testing.assert_array_equal(arrays["train"][1], y[:30])
    np.testing.assert_array_equal(arrays["calibrate"][1], y[30:50])
    np.testing.assert_array_equal(arrays["test"][1], y[50:])
    assert arrays["past_order"] is None  # in time order already: TaskContext.past() concatenates train and burn-in


def test_shuffle_draws_train_and_burn_in_from_their_union_and_keeps_the_past_in_order(series):
    path, X, y = series
    spec = parse_spec(_spec(path, split={"kind": "time", "train": 25, "burn_in": 25, "horizon": 70, "shuffle": True}))
    _, a0 = _prepare(spec, "s", 0)
    _, a1 = _prepare(spec, "s", 1)
    # a partition of the first 50 rows, each part in time order, new halves per repetition, the horizon untouched
    rows = [np.flatnonzero(np.isin(y[:50], a0[k][1])) for k in ("train", "calibrate")]
    assert sorted(np.concatenate(rows).tolist()) == list(range(50)) and rows[0].size == 25
    assert not np.array_equal(a0["train"][1], a1["train"][1])
    np.testing.assert_array_equal(a0["train"][1], y[rows[0]])
    past = np.concatenate([a0["train"][1], a0["calibrate"][1]])[a0["past_order"]]
    np.testing.assert_array_equal(past, y[:50])
    np.testing.assert_array_equal(a0["test"][1], y[50:])


@pytest.mark.parametrize("seed", [98765, 0])
def test_an_integer_shuffle_draws_xu_and_xie_s_halves_with_the_legacy_generator(series, seed):
    """shuffle = s: repetition r trains on np.random.seed(s + r); np.random.choice(50, 25, replace=False),
    the authors' ICP half (hamrel-cxu/EnbPI compute_PIs_ICP_online), and calibrates on the other rows."""
    path, X, y = series
    split = {"kind": "time", "train": 25, "burn_in": 25, "horizon": 70, "shuffle": seed}
    spec = parse_spec(_spec(path, split=split))
    assert spec.split["shuffle"] == seed and parse_spec(spec.to_dict()).fingerprint == spec.fingerprint
    for r in (0, 3):
        np.random.seed(seed + r)  # the authors' global draw, exactly as their code makes it
        proper = np.sort(np.random.choice(50, 25, replace=False))
        _, arrays = _prepare(spec, "s", r)
        np.testing.assert_array_equal(arrays["train"][1], y[proper])
        np.testing.assert_array_equal(arrays["calibrate"][1], np.delete(y[:50], proper))
        np.testing.assert_array_equal(arrays["test"][1], y[50:])
        past = np.concatenate([arrays["train"][1], arrays["calibrate"][1]])[arrays["past_order"]]
        np.testing.assert_array_equal(past, y[:50])


def test_permute_shuffles_the_rows_with_the_legacy_generator(series):
    path, X, y = series
    spec = parse_spec(_spec(path, datasets=[{"name": "p", "path": str(path), "target": "y", "permute": 98765}]))
    _, arrays = _prepare(spec, "p", 0)
    perm = np.random.RandomState(98765).choice(120, 120, replace=False)  # Barber et al.'s draw
    np.testing.assert_array_equal(row_permutation(120, 98765), perm)
    np.testing.assert_array_equal(arrays["train"][1], y[perm][:30])
    np.testing.assert_array_equal(arrays["test"][0], X[perm][50:])


def test_refit_every_refits_the_base_on_every_earlier_row(series, tmp_path):
    """refit_every = 1: ACI's stream around OLS refitted on all rows before each forecast, by hand."""
    path, X, y = series
    split = {"kind": "time", "train": 30, "burn_in": 20, "horizon": 30, "refit_every": 1}  # rows 80-119 unused
    methods = {"aci": {"kind": "aci", "gamma": 0.05}}
    res = run(parse_spec(_spec(path, split=split, methods=methods)), out=tmp_path / "r.nc")["/"].to_dataset()

    def forecast(t):
        return LinearRegression().fit(X[:t], y[:t]).predict(X[t : t + 1])

    import xarray as xr

    burn = xr.concat([forecast(t) for t in range(30, 50)], dim="obs")
    aci = AdaptiveConformalInterval(confidence_level=[0.8, 0.9], gamma=0.05).fit(burn, y[30:50])
    lo, hi = np.empty((30, 2)), np.empty((30, 2))
    for k, t in enumerate(range(50, 80)):
        f = forecast(t)
        iv = aci.predict_interval(f)
        lo[k], hi[k] = iv["lower"].values.ravel(), iv["upper"].values.ravel()
        aci.update(f, y[t : t + 1])
    np.testing.assert_allclose(
        res["coverage"].sel(calibrator="aci").values.ravel(), _hits(lo, hi, y[50:80]), atol=1e-12
    )
    np.testing.assert_allclose(res["width"].sel(calibrator="aci").values.ravel(), (hi - lo).mean(axis=0), rtol=1e-9)


def test_slide_refits_on_a_sliding_window_and_renews_aci_s_calibration_by_hand(series, tmp_path):
    """slide = true, refit_every = 2 (Zaffran et al.'s protocol): before the block at step s, OLS on rows [s, s + 30),
    ACI recalibrated on the forecasts of rows [s + 30, s + 50), the level carried on; the base's forecasts too."""
    path, X, y = series
    split = {"kind": "time", "train": 30, "burn_in": 20, "horizon": 31, "refit_every": 2, "slide": True}
    methods = {"aci": {"kind": "aci", "gamma": 0.05}, "b": {"kind": "base"}}
    spec = parse_spec(_spec(path, split=split, methods=methods))
    assert spec.split["slide"] is True and parse_spec(spec.to_dict()).fingerprint == spec.fingerprint
    res = run(spec, out=tmp_path / "r.nc")["/"].to_dataset()
    assert not any(res["error"].values.ravel()), res["error"].values
    aci, lo, hi, mean = None, np.empty((31, 2)), np.empty((31, 2)), np.empty(31)
    for s in range(0, 31, 2):
        model = LinearRegression().fit(X[s : s + 30], y[s : s + 30])
        cal = model.predict(X[s + 30 : s + 50])
        if aci is None:
            aci = AdaptiveConformalInterval(confidence_level=[0.8, 0.9], gamma=0.05).fit(cal, y[30:50])
        aci.calibrate(cal, y[s + 30 : s + 50])
        for t in range(s, min(s + 2, 31)):
            f = model.predict(X[50 + t : 51 + t])
            iv = aci.predict_interval(f)
            lo[t], hi[t], mean[t] = iv["lower"].values.ravel(), iv["upper"].values.ravel(), f.calib.mean().item()
            aci.update(f, y[50 + t : 51 + t])
    got = res["coverage"].sel(calibrator="aci").values.ravel()
    np.testing.assert_allclose(got, _hits(lo, hi, y[50:81]), atol=1e-12)
    np.testing.assert_allclose(res["width"].sel(calibrator="aci").values.ravel(), (hi - lo).mean(axis=0), rtol=1e-9)
    # the expanding window (no slide) gives other intervals: the test can tell the two apart
    plain = parse_spec(_spec(path, split={**split, "slide": False}, methods=methods))
    other = run(plain, out=tmp_path / "p.nc")["/"].to_dataset()
    assert not np.allclose(other["width"].sel(calibrator="aci").values.ravel(), (hi - lo).mean(axis=0), rtol=1e-6)


def test_slide_refuses_an_online_kind_that_cannot_recalibrate(series, tmp_path):
    path, _, _ = series
    split = {"kind": "time", "train": 30, "burn_in": 20, "horizon": 10, "refit_every": 1, "slide": True}
    spec = parse_spec(_spec(path, split=split, methods={"pid": {"kind": "pid", "burnin": 10}}))
    res = run(spec, out=tmp_path / "r.nc")["/"].to_dataset()
    assert "kind 'pid' has no calibrate(pred, y) method" in str(res["error"].values.ravel()[0])
    assert "Drop slide, or run a kind that recalibrates" in str(res["error"].values.ravel()[0])


def test_full_conformal_ls_kind_is_the_paper_protocol_by_hand(series, tmp_path):
    """CP+LS, nexCP+LS and nexCP+WLS: at each step the closed-form interval from every earlier row."""
    path, X, y = series
    methods = {
        "cp": {"kind": "full-conformal-ls"},
        "nex": {"kind": "full-conformal-ls", "rho": 0.95},
        "wls": {"kind": "full-conformal-ls", "rho": 0.95, "weighted_fit": True, "random_state": 3},
        "icpt": {"kind": "full-conformal-ls", "fit_intercept": True},
    }
    res = run(parse_spec(_spec(path, methods=methods)), out=tmp_path / "r.nc")["/"].to_dataset()
    assert not any(res["error"].values.ravel())
    Xi = np.column_stack([np.ones(120), X])
    for name, kw, XX in (
        ("cp", {}, X),
        ("nex", {"rho": 0.95}, X),
        ("wls", {"rho": 0.95, "weighted_fit": True}, X),
        ("icpt", {}, Xi),
    ):
        rng = np.random.default_rng(3)  # one generator for the stream, its swap drawn once per step
        ends = {
            c: np.array(
                [
                    full_conformal_ls(XX[:t], y[:t], XX[t], confidence_level=c, **kw, random_state=rng)
                    for t in range(50, 120)
                ]
            )  # fmt: skip
            for c in (0.8,)
        }
        if name != "wls":  # the WLS levels share each step's draw: checked at the first level only
            ends[0.9] = np.array(
                [full_conformal_ls(XX[:t], y[:t], XX[t], confidence_level=0.9, **kw) for t in range(50, 120)]
            )
        for c, iv in ends.items():
            got = res["coverage"].sel(calibrator=name, confidence_level=c).item()
            assert got == pytest.approx(_hits(iv[:, :1], iv[:, 1:], y[50:])[0], abs=1e-12), (name, c)
            width = res["width"].sel(calibrator=name, confidence_level=c).item()
            assert width == pytest.approx(float(np.mean(iv[:, 1] - iv[:, 0])), rel=1e-12), (name, c)


def test_enbpi_kind_fits_on_the_past_and_streams_the_horizon(series, tmp_path):
    path, X, y = series
    methods = {"enbpi": {"kind": "enbpi", "n_bootstraps": 10, "center": "quantile", "random_state": 5}}
    res = run(parse_spec(_spec(path, methods=methods)), out=tmp_path / "r.nc")["/"].to_dataset()
    model = EnbPI(LinearRegression(), n_bootstraps=10, center="quantile", confidence_level=[0.8, 0.9], random_state=5)
    iv = model.fit(X[:50], y[:50]).predict_and_update(X[50:], y[50:])
    lo, hi = iv["lower"].values, iv["upper"].values
    np.testing.assert_allclose(
        res["coverage"].sel(calibrator="enbpi").values.ravel(), _hits(lo, hi, y[50:]), atol=1e-12
    )
    np.testing.assert_allclose(res["width"].sel(calibrator="enbpi").values.ravel(), (hi - lo).mean(axis=0), rtol=1e-9)


def test_the_new_kinds_are_online_and_refuse_a_random_split(series, tmp_path):
    path, _, _ = series
    assert METHODS["enbpi"].adapter == "calibprob.compare.online:run_enbpi"
    spec = _spec(
        path, split={"train": 0.5, "calibrate": 0.3, "test": 0.2}, methods={"f": {"kind": "full-conformal-ls"}}
    )
    res = run(parse_spec(spec), out=tmp_path / "r.nc")["/"].to_dataset()
    assert 'needs a time-ordered split. Use [split] kind = "time"' in str(res["error"].values.ravel()[0])


@pytest.mark.parametrize(
    ("split", "match"),
    [
        (
            {"kind": "time", "train": 30, "burn_in": 0.2, "horizon": 70},
            r"split\.train must be a fraction in \(0, 1\) \(or give all three as row counts",
        ),
        (
            {"kind": "time", "train": 30, "burn_in": 1, "horizon": 70},
            r"split\.burn_in = 1 rows is too short: each stretch needs at least 2",
        ),
        ({"kind": "time", "train": 30, "burn_in": 20, "horizon": 71}, r"asks for .* rows, 121 in all, but it has 120\. Shorten a stretch"),
        ({"kind": "time", "train": 30, "burn_in": 20, "horizon": 70, "refit_every": 0}, r"split\.refit_every"),
        ({"kind": "time", "train": 30, "burn_in": 20, "horizon": 70, "shuffle": "yes"}, r"split\.shuffle"),
        (
            {"kind": "time", "train": 30, "burn_in": 20, "horizon": 70, "shuffle": -1},
            r"split\.shuffle must be true, false or an integer seed in \[0, .*got -1",
        ),
        (
            {"kind": "time", "train": 30, "burn_in": 20, "horizon": 70, "shuffle": 0, "refit_every": 1},
            r"refit_every refits the base on every row before each step.*Keep one of the two",
        ),
        (
            {"kind": "time", "train": 30, "burn_in": 20, "horizon": 70, "shuffle": True, "refit_every": 1},
            r"refit_every refits the base on every row before each step.*Keep one of the two",
        ),
        ({"kind": "time", "train": 30, "burn_in": 20, "horizon": 70, "window": 5}, r"unknown key 'window' in split"),
        (
            {"kind": "time", "train": 30, "burn_in": 20, "horizon": 70, "slide": True},
            r"split: slide = true slides the train and burn-in stretches .* needs refit_every",
        ),
        ({"kind": "time", "train": 30, "burn_in": 20, "horizon": 70, "refit_every": 1, "slide": 1}, r"split\.slide"),
    ],
)  # fmt: skip
def test_bad_time_split_protocols_are_refused(series, split, match):
    with pytest.raises(ValueError, match=match):
        parse_spec(_spec(series[0], split=split))


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ({"permute": -1}, r"datasets\[0\]\.permute"),
        ({"permute": 1.5}, r"datasets\[0\]\.permute"),
        (
            {"function": "forrester", "n": 50, "permute": 1},
            r"permute shuffles the rows of a data file.*CSV entries only",
        ),
    ],
)
def test_bad_permute_is_refused(series, entry, match):
    base = {"name": "s", "path": str(series[0]), "target": "y"}
    if "function" in entry:
        base = {"name": "s"}
    with pytest.raises(ValueError, match=match):
        parse_spec(_spec(series[0], datasets=[{**base, **entry}]))


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"kind": "full-conformal-ls", "rho": 1.5}, r"methods\.m\.rho"),
        ({"kind": "full-conformal-ls", "decay": 0.9}, r"unknown key 'decay'"),
        ({"kind": "enbpi", "n_bootstraps": 1}, r"methods\.m\.n_bootstraps"),
        ({"kind": "enbpi", "center": "median"}, r"methods\.m\.center"),
    ],
)
def test_bad_options_of_the_new_kinds_are_refused(series, options, match):
    with pytest.raises(ValueError, match=match):
        parse_spec(_spec(series[0], methods={"m": options}))


def test_wls_without_rho_is_an_error_naming_the_fix(series, tmp_path):
    spec = _spec(series[0], methods={"w": {"kind": "full-conformal-ls", "weighted_fit": True}})
    res = run(parse_spec(spec), out=tmp_path / "r.nc")["/"].to_dataset()
    assert "weighted_fit=True needs rho" in str(res["error"].values.ravel()[0])


@pytest.mark.parametrize(
    ("name", "split", "n_data"),
    [
        ("barber2023-nexcp-elec2", {"kind": "time", "train": 50, "burn_in": 50, "horizon": 3344}, 3444),
        ("xu2021-enbpi-solar", {"kind": "time", "train": 827, "burn_in": 827, "horizon": 7106, "shuffle": 98765}, 8760),
        (
            "zaffran2022-aci-prices",
            {"kind": "time", "train": 544, "burn_in": 545, "horizon": 365, "refit_every": 1, "slide": True},
            1454,
        ),
        (
            "angelopoulos2023-pid-elec2",
            {"kind": "time", "train": 47, "burn_in": 300, "horizon": 1650, "refit_every": 1},
            1997,
        ),
    ],
)
def test_the_reproduction_specs_parse_with_their_protocols(name, split, n_data):
    if name in ELEC2_SPECS:
        elec2_extracts()  # ELEC2 is not shipped (licence not established): built from ../shared/data, else skip
    spec = load_spec(REPO / "models" / f"{name}.toml")
    assert spec.split == split
    assert parse_spec(spec.to_dict()).fingerprint == spec.fingerprint
    for d in spec.datasets:
        assert len(pd.read_csv(d.path)) == n_data


@pytest.fixture(scope="module")
def dated(series, tmp_path_factory):
    """The series with a ``date`` column (daily from 2020-01-01), and a copy whose dates are out of order."""
    path, X, y = series
    df = pd.read_csv(path)
    df.insert(0, "date", pd.date_range("2020-01-01", periods=len(df), freq="D").strftime("%Y-%m-%d"))
    folder = tmp_path_factory.mktemp("dated")
    df.to_csv(folder / "dated.csv", index=False)
    df.iloc[[1, 0, *range(2, len(df))]].to_csv(folder / "unordered.csv", index=False)
    return folder


def test_a_time_column_gives_the_horizon_its_dates_in_the_scores_and_the_report(dated, tmp_path):
    from calibprob.compare.report.results import stack_pipelines
    from calibprob.compare.report.time_plots import _horizon_axis

    spec = _spec(dated / "dated.csv", methods={"aci": {"kind": "aci", "gamma": 0.05}})
    spec["datasets"][0]["time"] = "date"
    parsed = parse_spec(spec)
    assert parsed.datasets[0].exclude == ("date",)  # not a feature
    res = run(parsed, out=tmp_path / "r.nc")["/"].to_dataset()
    stamps = res["time_stamp"].squeeze().values
    np.testing.assert_array_equal(stamps, pd.date_range("2020-02-20", periods=70, freq="D").to_numpy())
    x, dated_axis = _horizon_axis(stack_pipelines(res).sel(dataset="s", confidence_level=0.9))
    assert dated_axis and x[0] == np.datetime64("2020-02-20")
    # without a time column: the step along the horizon, as before
    plain = _spec(dated / "dated.csv", methods={"aci": {"kind": "aci"}})
    plain["datasets"][0]["exclude"] = ["date"]
    plain = run(parse_spec(plain))["/"].to_dataset()
    assert "time_stamp" not in plain


def test_dropna_in_a_dated_series_keeps_each_row_with_its_own_time(dated, tmp_path):
    """dropna drops a row with a missing cell and every kept row keeps its own date: the same scores and dates as
    the file with those rows deleted by hand (a missing cell in the training part and one in the horizon)."""
    df = pd.read_csv(dated / "dated.csv")
    df.insert(1, "store", ["north", "south"] * (len(df) // 2) + ["north"] * (len(df) % 2))
    holes = df.copy()
    holes.loc[3, "store"] = None  # training part
    holes.loc[100, "x1"] = None  # horizon
    holes.to_csv(tmp_path / "holes.csv", index=False)
    df.drop(index=[3, 100]).to_csv(tmp_path / "deleted.csv", index=False)
    methods = {"aci": {"kind": "aci", "gamma": 0.05}}
    split = {"kind": "time", "train": 30, "burn_in": 20, "horizon": 68}
    common = {"name": "s", "target": "y", "time": "date", "one_hot": ["store"]}
    with pytest.raises(ValueError, match=r"missing value.*dropna"):  # without dropna: refused, naming dropna
        parse_spec(_spec(tmp_path / "holes.csv", datasets=[{**common, "path": str(tmp_path / "holes.csv")}]))
    runs = {}
    for name, extra in (("holes", {"dropna": True}), ("deleted", {})):
        entry = {**common, "path": str(tmp_path / f"{name}.csv"), **extra}
        spec = _spec(tmp_path / f"{name}.csv", datasets=[entry], split=split, methods=methods)
        runs[name] = run(parse_spec(spec), out=tmp_path / f"{name}.nc")["/"].to_dataset()
    kept_dates = pd.to_datetime(df.drop(index=[3, 100])["date"]).to_numpy()[50:]
    for res in runs.values():
        np.testing.assert_array_equal(res["time_stamp"].squeeze().values, kept_dates)
    assert np.datetime64("2020-04-10") not in runs["holes"]["time_stamp"].values  # row 100's date is gone with it
    for var in ("coverage", "width"):
        np.testing.assert_array_equal(runs["holes"][var].values, runs["deleted"][var].values)


@pytest.mark.parametrize(
    ("file", "extra", "match"),
    [
        ("dated.csv", {"time": "when"}, r"datasets\[0\]\.time = 'when' is not a column"),
        ("dated.csv", {"time": "y"}, r"datasets\[0\]\.time = 'y' is the target"),
        ("dated.csv", {"time": "date", "permute": 1}, r"time reads the rows' times in file order; permute reorders"),
        ("dated.csv", {"time": "date", "subsample": 50}, r"subsample reorders or subsamples rows"),
        ("unordered.csv", {"time": "date"}, r"the times must be strictly increasing.*sort the file by time"),
        ("dated.csv", {"time": "x1", "features": ["x1", "x2"]}, r"time = 'x1' is a feature"),
    ],
)
def test_bad_time_columns_are_refused(dated, file, extra, match):
    entry = {"name": "s", "path": str(dated / file), "target": "y", **extra}
    with pytest.raises(ValueError, match=match):
        parse_spec(_spec(dated / file, datasets=[entry]))
