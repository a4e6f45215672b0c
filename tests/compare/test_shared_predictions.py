"""The base's predictives are computed once per (data set, repetition, base) and shared by every method (issue 37).

Checked against the run that asks the base again in every method (``share_base_predictions``
patched to share nothing): identical scores, and the base asked once per part instead of
once per method and part.
"""

from __future__ import annotations

import pickle

import numpy as np
import xarray as xr

from calibprob.compare import methods as cm
from calibprob.compare import parse_spec, run_task
from calibprob.compare import tasks as ct


def _spec(split: dict, methods: dict) -> dict:
    return {
        "name": "shared",
        "split": split,
        "seed": 7,
        "datasets": [{"name": "forrester", "function": "forrester", "n": 80, "noise": 0.2}],
        "base": {"kind": "ols"},
        "methods": methods,
    }


HOLDOUT = _spec(
    {"train": 0.5, "calibrate": 0.25, "test": 0.25},
    {
        "raw": {"kind": "base"},
        "iso": {"kind": "isotonic"},
        "cps": {"kind": "conformal-predictive"},
        "vs": {"kind": "variance-scaling"},
    },
)


def _count_predictions(monkeypatch) -> list:
    calls: list = []
    real = cm.base_predictive

    def counting(base, X, *, levels=None):
        calls.append(len(X))
        return real(base, X, levels=levels)

    monkeypatch.setattr(cm, "base_predictive", counting)
    return calls


def _unshared(monkeypatch):
    monkeypatch.setattr(ct, "share_base_predictions", lambda ctx, methods: ctx)


def test_base_asked_once_per_part(monkeypatch):
    calls = _count_predictions(monkeypatch)
    run_task(HOLDOUT, "forrester", 0)
    # the calibration part (20 rows) and the test part (20 rows), once each, for four methods
    assert sorted(calls) == [20, 20]


def test_without_sharing_the_base_is_asked_per_method(monkeypatch):
    # the reference the sharing replaces: every method asks again (base: 1, three post-processors: 2 each)
    calls = _count_predictions(monkeypatch)
    _unshared(monkeypatch)
    run_task(HOLDOUT, "forrester", 0)
    assert len(calls) == 7


def _metrics(ds: xr.Dataset) -> xr.Dataset:
    return ds.drop_vars([v for v in ("fit_time", "base_fit_time", "base_predict_time") if v in ds])


def test_shared_scores_identical_to_recomputed(monkeypatch):
    shared = run_task(HOLDOUT, "forrester", 1)
    _unshared(monkeypatch)
    alone = run_task(HOLDOUT, "forrester", 1)
    assert _metrics(shared).identical(_metrics(alone))
    assert float(shared["base_predict_time"].item()) >= 0.0


def test_no_holdout_shares_the_loo_and_the_training_prediction(monkeypatch):
    spec = _spec(
        {"train": 0.6, "test": 0.4},
        {"iso": {"kind": "isotonic"}, "iso-loo": {"kind": "isotonic", "calibration_data": "loo"}},
    )
    spec["base"] = {"kind": "gp", "kernel": "se", "n_restarts": 1}
    ctx, _ = ct._fit_base(parse_spec(spec), dict(parse_spec(spec).base_tables())[None], *_arrays(spec))
    parts = cm.shared_parts(ctx, parse_spec(spec).methods)
    # in sample for "iso", the GP's closed-form LOO for "iso-loo"; no calibration part
    assert parts == ["test", "train", "loo"]
    shared = run_task(spec, "forrester", 0)
    _unshared(monkeypatch)
    alone = run_task(spec, "forrester", 0)
    assert _metrics(shared).identical(_metrics(alone))


def _arrays(spec: dict):
    seed, arrays = ct._prepare(parse_spec(spec), "forrester", 0)
    return arrays, seed


def test_shared_context_survives_pickle():
    # the shared stage travels to process-pool and Dask workers pickled: its parts must still be found
    fitted = ct.fit_bases(HOLDOUT, "forrester", 0)
    ctx = pickle.loads(pickle.dumps(fitted))["fits"][None][0]
    assert set(ctx.shared) == {"calibrate", "test"}
    got = ctx.predict_base(ctx.X_test)
    assert got.identical(ctx.shared["test"]) and got is not ctx.shared["test"]
    # a copy of the array is not the part: asked of the base, same numbers
    again = ctx.predict_base(np.array(ctx.X_test))
    np.testing.assert_array_equal(again["mean"].values, got["mean"].values)


def test_a_method_cannot_change_anothers_input():
    fitted = ct.fit_bases(HOLDOUT, "forrester", 0)
    ctx = fitted["fits"][None][0]
    first = ctx.predict_base(ctx.X_cal)
    first["mean"].values[:] = 0.0
    assert not np.all(ctx.predict_base(ctx.X_cal)["mean"].values == 0.0)


def test_no_methods_share_nothing():
    fitted = ct.fit_bases(HOLDOUT, "forrester", 0)
    assert cm.shared_parts(fitted["fits"][None][0], []) == []
