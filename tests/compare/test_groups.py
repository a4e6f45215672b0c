"""``groups = "<column>"`` in a spec's data set entry: validation, loading, and Mondrian calibrators per group.

The reference for the run: each Mondrian calibrator's test coverage per group against the
same calibrator fitted by hand on that group's calibration points (same split, same base).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import calibprob
from calibprob.compare import parse_spec
from calibprob.compare.spec import SpecError, load_spec
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT


def _spec(dataset, **extra):
    return {
        "name": "g",
        "datasets": [dataset],
        "split": {"train": 0.4, "calibrate": 0.3, "test": 0.3},
        "base": {"kind": "ols"},
        "methods": {"cps": {"kind": "conformal-predictive"}},
        **extra,
    }


def test_groups_column_is_validated(tmp_path):
    with pytest.raises(
        SpecError, match=r"datasets\[0\].groups = 'maker' is not a column of the data.*Columns: cylinders"
    ):
        parse_spec(_spec({"name": "auto_mpg", "groups": "maker"}))
    with pytest.raises(SpecError, match="is the target"):
        parse_spec(_spec({"name": "auto_mpg", "groups": "mpg"}))
    with pytest.raises(SpecError, match="applies to bundled and CSV entries only"):
        parse_spec(_spec({"name": "f", "function": "branin", "n": 60, "groups": "x"}))
    csv = tmp_path / "d.csv"
    csv.write_text("y,x,soil\n" + "".join(f"{i % 7},{i},{'clay' if i % 2 else 'sand'}\n" for i in range(40)))
    with pytest.raises(SpecError, match=r"groups must name a column of file d.csv; got 'ground'. Columns: y, x, soil"):
        parse_spec(_spec({"name": "mine", "path": str(csv), "target": "y", "exclude": ["soil"], "groups": "ground"}))
    spec = parse_spec(_spec({"name": "mine", "path": str(csv), "target": "y", "exclude": ["soil"], "groups": "soil"}))
    assert spec.datasets[0].groups == "soil"
    # the group column need not be a feature; its labels are kept per row after dropna/subsample
    data = calibprob.datasets.load_csv(csv, "y", exclude=["soil"], subsample=15, seed=0, groups="soil")
    assert data["X"].shape == (15, 1)
    np.testing.assert_array_equal(data["group"].values, np.where(data["X"].values[:, 0] % 2, "clay", "sand"))


def test_shipped_mondrian_spec_runs_per_group():
    spec = load_spec(ROOT / "models" / "mondrian-auto-mpg.toml")
    assert spec.datasets[0].groups == "origin"
    small = parse_spec({**spec.to_dict(), "repetitions": 1, "methods": {"cps": {"kind": "conformal-predictive"}}})
    scores = calibprob.compare.run(small).to_dataset()
    assert not str(scores["error"].values.ravel()[0])
    # the same task by hand: the runner's split, the base, a CPS per origin
    from calibprob.compare.methods import post_process
    from calibprob.compare.tasks import _fit_base, _prepare

    seed, arrays = _prepare(small, "auto_mpg", 0)
    ctx, _ = _fit_base(small, small.base_tables()[0][1], arrays, seed)
    assert set(np.unique(ctx.groups["calibrate"]).tolist()) == {1, 2, 3}
    pred = post_process(ctx, calibprob.ConformalPredictiveSystem(confidence_level=0.5))
    np.testing.assert_array_equal(pred["group"].values, ctx.groups["test"])
    lv = pred["level"].values
    for k in (1, 2, 3):
        rc, rt = ctx.groups["calibrate"] == k, ctx.groups["test"] == k
        cal = calibprob.ConformalPredictiveSystem(confidence_level=0.5).fit(
            ctx.predict_base(ctx.X_cal[rc]), ctx.y_cal[rc]
        )
        # each origin keeps the levels its own n_k resolves, 1/(n_k+1) <= p <= n_k/(n_k+1) (a smaller origin
        # states fewer: -inf / inf beyond, its reach 1 - 2/(n_k+1))
        n_k = int(rc.sum())
        stated = (lv * (n_k + 1) >= 1 - 1e-9) & (lv * (n_k + 1) <= n_k + 1e-9)
        by_hand = cal.predict(ctx.predict_base(ctx.X_test[rt]), levels=lv[stated]).calib.quantiles
        np.testing.assert_array_equal(pred.calib.quantiles[rt][:, stated], by_hand)
        reach = pred["reach"].values[rt] if "reach" in pred else np.ones(rt.sum())
        assert (reach == float(1 - Fraction(2, n_k + 1))).all()
        assert np.isinf(pred.isel(obs=np.flatnonzero(rt)).calib.ppf(lv[~stated]).values).all()
    # what the runner scored is this per-origin CPS
    mine = calibprob.evaluate(pred, arrays["test"][1], confidence_level=small.confidence_levels)
    assert float(scores["crps"].squeeze()) == pytest.approx(float(mine["crps"]), rel=1e-12)


def test_runner_scores_a_small_groups_infinite_intervals():
    """Grouped distribution methods in a run: a group below a level's minimum size shows (-inf, inf) there.

    The reference: :func:`calibprob.min_group_size` of each kind at the group's calibration count
    (the runner's own split); the report's table (:func:`calibprob.plots.group_coverage_table`)
    reads the same infinite share.
    """
    spec = parse_spec(
        {
            "name": "g",
            "datasets": [{"name": "auto_mpg", "groups": "origin"}],
            "split": {"train": 0.5, "calibrate": 0.15, "test": 0.35},  # about 59 calibration cars: 12-17 per origin
            "base": {"kind": "ols"},
            "repetitions": 1,
            "seed": 3,
            "confidence_level": [0.5, 0.9],
            "methods": {"cps": {"kind": "conformal-predictive"}, "iso": {"kind": "isotonic"}},
        }
    )
    with pytest.warns(calibprob.CalibprobWarning, match=r"0\.9 needs 19, reaches levels up to"):
        scores = calibprob.compare.run(spec).to_dataset()
    assert not any(str(e) for e in scores["error"].values.ravel())
    from calibprob.compare.tasks import _fit_base, _prepare

    seed, arrays = _prepare(spec, "auto_mpg", 0)
    ctx, _ = _fit_base(spec, spec.base_tables()[0][1], arrays, seed)
    counts = {k: int((ctx.groups["calibrate"] == k).sum()) for k in (1, 2, 3)}
    table = calibprob.plots.group_coverage_table(scores, level=0.9)
    seen_infinite = False
    for method, kind in (("cps", "conformal-predictive"), ("iso", "isotonic")):
        for k, n_k in counts.items():
            cell = scores.sel(calibrator=method, group=str(k), confidence_level=0.9).squeeze()  # labels stored as text
            infinite = n_k < calibprob.min_group_size(0.9, kind)
            seen_infinite |= infinite
            assert float(cell["group_infinite"]) == (1.0 if infinite else 0.0), (method, k, n_k)
            assert bool(np.isinf(float(cell["group_width"]))) is infinite
            if infinite:
                assert float(cell["group_coverage"]) == 1.0  # (-inf, inf) holds every point
            row = table[(table["method"] == method) & (table["group"].astype(str) == str(k))]
            assert float(row["infinite"].iloc[0]) == (1.0 if infinite else 0.0)
    assert seen_infinite  # the split leaves an origin below 19 calibration cars
