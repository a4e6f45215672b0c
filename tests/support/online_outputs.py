"""The outputs of the three one-level online interval classes on one fixed stream (issue 40's refactor check).

:func:`online_interval_outputs` runs :class:`~calibprob.AdaptiveConformalInterval`,
:class:`~calibprob.ConformalPIDInterval` and :class:`~calibprob.AgACIInterval` through ``fit``,
``predict`` / ``predict_interval`` (all levels, one scalar level, one level as a list) and two
``update`` batches, ungrouped and with ``groups=``, with the absolute and the normalised score and a
sliding window. ``tests/data/make_online_interval_reference.py`` stored its result from commit
bfe024b (before the shared ``predict`` / ``predict_interval`` glue of ``calibrators/online/_interval.py``);
``tests/calibrators/online/test_interval_glue.py`` asserts the current code gives the same arrays, bit for bit.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

import calibprob
from calibprob.calibrators.online import AdaptiveConformalInterval, AgACIInterval, ConformalPIDInterval


def _stream(seed: int = 0, n_cal: int = 60, n_stream: int = 80) -> tuple[xr.Dataset, np.ndarray, np.ndarray]:
    """A heteroscedastic Gaussian forecast stream whose noise doubles after calibration; two groups."""
    rng = np.random.default_rng(seed)
    T = n_cal + n_stream
    mu = np.sin(np.arange(T) / 7.0)
    sigma = 0.5 + rng.uniform(size=T)
    noise = np.where(np.arange(T) < n_cal, 1.0, 2.0) * sigma * rng.normal(size=T)
    groups = np.where(np.arange(T) % 3 == 0, "a", "b")
    return calibprob.normal(mu, sigma), mu + noise, groups


def _configs() -> dict[str, object]:
    return {
        "aci": AdaptiveConformalInterval(confidence_level=[0.8, 0.9], gamma=0.05),
        "aci_norm_window": AdaptiveConformalInterval(
            confidence_level=[0.8, 0.9], gamma=0.02, score="normalized", window=15
        ),
        "pid": ConformalPIDInterval(confidence_level=[0.8, 0.9], burnin=20, lr=0.5),
        "pid_norm_noscore": ConformalPIDInterval(
            confidence_level=[0.8, 0.9], burnin=20, scorecaster=None, score="normalized"
        ),
        "agaci": AgACIInterval(confidence_level=[0.8, 0.9], gammas=[0.01, 0.05, 0.1]),
        "agaci_norm_window": AgACIInterval(confidence_level=[0.8, 0.9], score="normalized", window=15),
    }


def _put(out: dict[str, np.ndarray], key: str, ds: xr.Dataset) -> None:
    """Every variable, coordinate and attribute of ``ds``, and the order of its variables."""
    out[f"{key}/vars"] = np.array(list(ds.data_vars))
    out[f"{key}/obs"] = np.asarray(ds["obs"].values)
    out[f"{key}/attrs"] = np.array(repr(sorted(ds.attrs.items())))
    out[f"{key}/coords"] = np.array(repr({k: v.values.tolist() for k, v in ds.coords.items() if k != "obs"}))
    for name, var in ds.data_vars.items():
        out[f"{key}/{name}"] = np.asarray(var.values)


def _run(est, pred: xr.Dataset, y: np.ndarray, groups, key: str, out: dict[str, np.ndarray]) -> None:
    n_cal = 60
    g = groups
    cal, test = pred.isel(obs=slice(0, n_cal)), pred.isel(obs=slice(n_cal, None))
    est.fit(cal, y[:n_cal], groups=None if g is None else g[:n_cal])
    gt = None if g is None else g[n_cal:]
    for step, (lo, hi) in enumerate([(0, 40), (40, 80)]):
        rows = test.isel(obs=slice(lo, hi))
        gr = None if gt is None else gt[lo:hi]
        _put(out, f"{key}/{step}/predict", est.predict(rows, groups=gr))
        _put(out, f"{key}/{step}/all", est.predict_interval(rows, groups=gr))
        _put(out, f"{key}/{step}/scalar", est.predict_interval(rows, 0.9, groups=gr))
        _put(out, f"{key}/{step}/list", est.predict_interval(rows, [0.8], groups=gr))
        est.update(rows, y[n_cal + lo : n_cal + hi], groups=gr)
    if groups is None:
        out[f"{key}/misses"] = np.asarray(est.misses_)


def online_interval_outputs() -> dict[str, np.ndarray]:
    """Every array the three classes give on the fixed stream, keyed ``config[/grouped]/step/call/variable``."""
    pred, y, groups = _stream()
    out: dict[str, np.ndarray] = {}
    for name, est in _configs().items():
        _run(est, pred, y, None, name, out)
    for name, est in _configs().items():
        _run(est, pred, y, groups, f"{name}/grouped", out)
    return out
