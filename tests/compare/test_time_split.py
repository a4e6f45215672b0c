"""A time-ordered split with online methods as kinds (issue 38, item 7): parsing, the stream, rankings, report."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibprob.bases.linear import LinearRegression
from calibprob.calibrators.online import AdaptiveConformalInterval, AgACIInterval, ConformalPIDInterval
from calibprob.calibrators.timeseries import NexCP
from calibprob.compare import load_spec, parse_spec, run
from calibprob.compare.report.html import write_html
from calibprob.registry import METHODS
from tests.support.paths import REPO_ROOT as REPO

PRICES = REPO / "models" / "data" / "zaffran2022_prices_hour0.csv"


def _spec(**over):
    spec = {
        "name": "t",
        "datasets": [{"name": "prices", "path": str(PRICES), "target": "Spot", "exclude": ["Date", "dow_6"]}],
        # 1454 rows: 727 train, 654 burn-in, 73 horizon (the last 73 days of 2019)
        "split": {"kind": "time", "train": 0.5, "burn_in": 0.45, "horizon": 0.05},
        "base": {"kind": "ols"},
        "standardize": False,
        "confidence_level": [0.8, 0.9],
        "methods": {
            "aci": {"kind": "aci", "gamma": 0.04},
            "online-aci": {"kind": "online-recalibration", "rule": "aci"},
        },
    }
    spec.update(over)
    return spec


def test_the_runner_streams_the_horizon_as_aci_by_hand(tmp_path):
    tree = run(parse_spec(_spec()), out=tmp_path / "r.nc")
    res = tree["/"].to_dataset()
    assert res.attrs["split_kind"] == "time" and int(res["n_test"].max()) == 73
    # ACI by hand: the OLS base fitted on the first stretch, ACI fitted on the burn-in, then predict/update per day

    df = pd.read_csv(PRICES)
    X, y = df.drop(columns=["Date", "dow_6", "Spot"]).to_numpy(float), df["Spot"].to_numpy(float)
    base = LinearRegression().fit(X[:727], y[:727])
    aci = AdaptiveConformalInterval(confidence_level=[0.8, 0.9], gamma=0.04).fit(base.predict(X[727:1381]), y[727:1381])
    hits = []
    for i in range(1381, 1454):
        f = base.predict(X[i : i + 1])
        iv = aci.predict_interval(f)
        hits.append(((iv["lower"].values <= y[i]) & (y[i] <= iv["upper"].values)).ravel())
        aci.update(f, y[i : i + 1])
    cov = res["coverage"].sel(calibrator="aci").squeeze().values
    np.testing.assert_allclose(cov, np.mean(hits, axis=0), rtol=0, atol=1e-12)
    # the diagnostics over time and the ranking by long-run coverage error
    assert res["rolling_coverage"].sizes["time"] == 73
    rk = tree["ranking"].to_dataset()
    np.testing.assert_allclose(
        rk["long_run_error_mean"].sel(pipeline="aci").values.ravel(), np.abs(cov - [0.8, 0.9]), atol=1e-12
    )


def test_pid_agaci_nexcp_kinds_stream_the_horizon_as_the_classes_by_hand(tmp_path):
    """Issue 38 item 7: the online classes as kinds; each runner coverage is the class's own stream, by hand."""
    kinds = {
        "pid": (ConformalPIDInterval, {"lr": 0.05, "ki": 5.0, "burnin": 100}),
        "agaci": (AgACIInterval, {"gammas": [0.01, 0.05]}),
        "nexcp": (NexCP, {"rho": 0.98}),
    }
    methods = {k: {"kind": k, **opts} for k, (_, opts) in kinds.items()}
    res = run(parse_spec(_spec(methods=methods)), out=tmp_path / "r.nc")["/"].to_dataset()
    df = pd.read_csv(PRICES)
    X, y = df.drop(columns=["Date", "dow_6", "Spot"]).to_numpy(float), df["Spot"].to_numpy(float)
    base = LinearRegression().fit(X[:727], y[:727])
    for kind, (cls, opts) in kinds.items():
        model = cls(confidence_level=[0.8, 0.9], **opts).fit(base.predict(X[727:1381]), y[727:1381])
        hits = []
        for i in range(1381, 1454):
            f = base.predict(X[i : i + 1])
            iv = model.predict_interval(f)
            hits.append(((iv["lower"].values <= y[i]) & (y[i] <= iv["upper"].values)).ravel())
            model.update(f, y[i : i + 1])
        cov = res["coverage"].sel(calibrator=kind).squeeze().values
        np.testing.assert_allclose(cov, np.mean(hits, axis=0), rtol=0, atol=1e-12, err_msg=kind)
        assert METHODS[kind].adapter == "calibprob.compare.online:run_online"


def test_an_online_kind_on_a_random_split_is_refused_with_the_fix(tmp_path):
    spec = _spec(split={"train": 0.5, "calibrate": 0.3, "test": 0.2}, methods={"aci": {"kind": "aci"}})
    res = run(parse_spec(spec), out=tmp_path / "r.nc")["/"].to_dataset()
    assert 'needs a time-ordered split. Use [split] kind = "time"' in str(res["error"].values.ravel()[0])


def test_online_kinds_are_registered_with_the_online_adapter():
    for kind in ("aci", "online-recalibration"):
        assert METHODS[kind].adapter == "calibprob.compare.online:run_online"
    assert (
        "split_kind"
        not in run(parse_spec(_spec(split={"train": 0.6, "test": 0.4}, methods={"b": {"kind": "base"}})))["/"].attrs
    )


@pytest.mark.parametrize(
    ("split", "match"),
    [
        ({"kind": "time", "train": 0.5, "burn_in": 0.2, "horizon": 0.2, "test": 0.1}, r"unknown key 'test' in split"),
        ({"kind": "time", "train": 0.5, "horizon": 0.2}, r"split of kind 'time' needs 'burn_in'"),
        (
            {"kind": "time", "train": 0.6, "burn_in": 0.3, "horizon": 0.3},
            r"train \+ burn_in \+ horizon = 1\.2 exceeds 1",
        ),
        (
            {"kind": "time", "train": 0.5, "burn_in": 0, "horizon": 0.2},
            r"split\.burn_in must be a fraction in \(0, 1\)",
        ),
        ({"kind": "rolling", "train": 0.5}, r"split\.kind must be 'time' \(a time-ordered split\); got 'rolling'"),
    ],
)
def test_bad_time_splits_are_refused(split, match):
    with pytest.raises(ValueError, match=match):
        parse_spec(_spec(split=split))


def test_the_shipped_spec_parses_with_its_time_split():
    spec = load_spec(REPO / "models" / "aci-prices.toml")
    assert spec.split == {"kind": "time", "train": 0.5, "burn_in": 0.249, "horizon": 0.251}
    assert parse_spec(spec.to_dict()).fingerprint == spec.fingerprint


@pytest.mark.slow
def test_aci_prices_spec_keeps_long_run_coverage_within_its_bound(tmp_path):
    """models/aci-prices.toml: ACI along 2019 (365 days, gamma 0.04) within Proposition 4.1's bound."""
    res = run(load_spec(REPO / "models" / "aci-prices.toml"), out=tmp_path / "r.nc")["/"].to_dataset()
    T, g = 365, 0.04
    for c in (0.8, 0.9):
        cov = float(res["coverage"].sel(calibrator="aci", confidence_level=c).squeeze())
        assert abs(cov - c) <= (max(c, 1 - c) + g) / (g * T)
    html = write_html(res, tmp_path / "r.html").read_text()
    assert "Coverage over time" in html and "rolling coverage at 0.9" in html
