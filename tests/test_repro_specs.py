"""The issue-38 reproductions as comparison specs (``models/``), run by ``calibprob compare``, against the
published numbers: NexCP on ELEC2 (Barber et al. 2023), conformal PID beside ACI on ELEC2 demand
(Angelopoulos, Candès & Tibshirani 2023), EnbPI on the Atlanta solar data (Xu & Xie 2021), ACI on the French
prices (Zaffran et al. 2022; its first 20 days: the whole year's 366 forests are too slow for a test).

Slow: each runs its whole spec (about 1.5, 2.5 and 1.5 minutes at load 9-12 on the shared two cores; see
docs/benchmarks.md). The numbers are the published ones, as the scripts ``benchmarks/repro_*.py`` hold them.
"""

from __future__ import annotations

import numpy as np
import pytest

from calibprob.compare import load_spec, parse_spec, run
from tests.support.elec2 import elec2_extracts
from tests.support.paths import MODELS, load_benchmark


def _scores(name: str, tmp_path, **split):
    spec = load_spec(MODELS / f"{name}.toml")
    if split:  # a documented subset of the spec (the same protocol on a shorter stream)
        spec = parse_spec({**spec.to_dict(), "split": {**spec.split, **split}}, root=MODELS)
    tree = run(spec, out=tmp_path / f"{name}.nc")
    res = tree["/"].to_dataset()
    assert not any(res["error"].values.ravel()), res["error"].values
    return res


def _at(res, var: str, dataset: str, calibrator: str) -> np.ndarray:
    """One pipeline's value at 0.9 in every repetition."""
    return res[var].sel(dataset=dataset, calibrator=calibrator, confidence_level=0.9).values.ravel()


@pytest.mark.slow
def test_nexcp_spec_reproduces_the_elec2_table(tmp_path):
    """Coverage within 0.01 and width within 5 % of the six published figures (the issue's tolerance)."""
    elec2_extracts()  # not shipped: built from ../shared/data, else the test skips
    published = load_benchmark("repro_nexcp_elec2").PUBLISHED
    res = _scores("barber2023-nexcp-elec2", tmp_path)
    names = {"cp-ls": "CP+LS", "nexcp-ls": "nexCP+LS", "nexcp-wls": "nexCP+WLS"}
    for dataset, suffix in (("elec2", ""), ("elec2-permuted", " permuted")):
        assert int(res["n_test"].sel(dataset=dataset).item()) == 3344
        for calibrator, paper in names.items():
            pc, pw = published[paper + suffix]
            cov, width = _at(res, "coverage", dataset, calibrator)[0], _at(res, "width", dataset, calibrator)[0]
            assert abs(cov - pc) <= 0.01 and abs(width / pw - 1) <= 0.05, (dataset, calibrator, cov, width)
    # the drift is real: on the data in time order the decaying weights lift CP+LS's 0.85 towards 0.9
    assert _at(res, "coverage", "elec2", "nexcp-ls")[0] > _at(res, "coverage", "elec2", "cp-ls")[0] + 0.02


@pytest.mark.slow
def test_pid_spec_has_no_infinite_interval_where_aci_has_them(tmp_path):
    """PID (lr 1 and 0.1) covers within 0.01 of 0.9 with no infinite or clipped interval; ACI issues infinite ones."""
    elec2_extracts()
    res = _scores("angelopoulos2023-pid-elec2", tmp_path)
    d = "elec2-nswdemand"
    assert int(res["n_test"].sel(dataset=d).item()) == 1650
    for calibrator in ("pid-lr1", "pid-lr01"):
        assert abs(_at(res, "coverage", d, calibrator)[0] - 0.9) <= 0.01
        assert _at(res, "n_infinite", d, calibrator)[0] == 0 and _at(res, "n_clipped", d, calibrator)[0] == 0
        assert np.isfinite(_at(res, "width", d, calibrator)[0])
    assert _at(res, "n_infinite", d, "aci")[0] > 0 and np.isinf(_at(res, "width", d, "aci")[0])
    # Gibbs & Candès's Proposition 4.1 over the 1650 steps: |coverage - 0.9| <= (max(c, 1 - c) + gamma) / (gamma T)
    assert abs(_at(res, "coverage", d, "aci")[0] - 0.9) <= (0.9 + 0.1) / (0.1 * 1650)


#: The authors' split conformal ("ICP", RidgeCV, train 1654) coverage in trials 0-9
#: (hamrel-cxu/EnbPI Results/Solar_Atl_many_train_new.csv; ``../shared/data/reference``). Their halves are
#: ``RandomState(98765 + k).choice(1654, 827, replace=False)``, the spec's ``shuffle = 98765``.
AUTHORS_ICP = (0.636645, 0.654095, 0.644948, 0.685336, 0.638897, 0.674782, 0.682803, 0.665072, 0.618773, 0.664368)


@pytest.mark.slow
def test_enbpi_spec_reproduces_the_solar_table(tmp_path):
    """EnbPI-Ridge within 0.02 / 10 % of 0.904 / 290 and split conformal within 0.02 / 10 % of 0.657 / 133; on the
    authors' own halves split conformal covers each trial as theirs does, a little more (the conformal rank 746 of
    827 residuals against their 90th linear percentile, between ranks 744 and 745)."""
    published = load_benchmark("repro_enbpi_solar").PUBLISHED
    res = _scores("xu2021-enbpi-solar", tmp_path)
    d = "solar-atl"
    assert res.sizes["repetition"] == 10 and int(res["n_test"].sel(dataset=d).max()) == 7106
    pc, pw = published["EnbPI-Ridge"]
    cov, width = _at(res, "coverage", d, "enbpi-ridge"), _at(res, "width", d, "enbpi-ridge")
    assert abs(cov.mean() - pc) <= 0.02 and abs(width.mean() / pw - 1) <= 0.10, (cov, width)
    pc, pw = published["split CP (Ridge)"]
    cov, width = _at(res, "coverage", d, "split-cp"), _at(res, "width", d, "split-cp")
    assert abs(cov.mean() - pc) <= 0.02 and abs(width.mean() / pw - 1) <= 0.10, (cov.mean(), width.mean())
    gap = cov - np.array(AUTHORS_ICP)  # the same halves: only the wider rank (two residuals up) moves a trial
    assert np.all(gap >= 0) and np.all(gap <= 0.01), gap
    # the point of the table: EnbPI holds 0.9 on the drifting year where split conformal falls short
    assert _at(res, "coverage", d, "enbpi-ridge").min() > cov.max()


#: The authors' ACI bounds over the first 20 days of 2019 (reference/zaffran2022_aci_reference.csv, MAPIE's copy of
#: Zaffran et al.'s ACP_0.04_RF.pkl, against the prices of models/data/zaffran2022_prices_hour0_rf.csv): 18 days
#: covered, mean width 19.0151 EUR/MWh. Over the 365 days: 0.896 and 12.84 (the published row).
AUTHORS_ACI_20_DAYS = (18, 19.015120)


@pytest.mark.slow
def test_aci_spec_follows_the_authors_bounds_over_the_first_days_of_2019(tmp_path):
    """The spec's protocol (a forest of 1000 trees refitted daily on the sliding window, ACI at gamma 0.04) on its
    first 20 days, a documented subset (21 forests: 4.7 min at load 12; the whole spec's 366 forests are too slow
    for a test, docs/benchmarks.md gives its run): the same 18 days covered as by the authors' bounds and the mean
    width within 3 % of theirs (the forests are the authors'; ACI here reads one more calibration residual a day)."""
    res = _scores("zaffran2022-aci-prices", tmp_path, horizon=20)
    d = "prices-hour0"
    assert int(res["n_test"].sel(dataset=d).item()) == 20
    covered, width = AUTHORS_ACI_20_DAYS
    assert round(20 * _at(res, "coverage", d, "aci")[0]) == covered
    assert abs(_at(res, "width", d, "aci")[0] / width - 1) <= 0.03, _at(res, "width", d, "aci")
    assert np.isfinite(_at(res, "width", d, "agaci")[0])  # AgACI beside it, on the same forests
