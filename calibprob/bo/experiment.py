r"""Many-seed Bayesian-optimisation experiments, serial or on Dask, and the paper's Table 1.

:func:`run_experiment` runs every (function, acquisition, method, seed) task
of a grid with :func:`calibprob.bo.minimize` — serially, on a new Dask
``LocalCluster`` (``workers=N``) or on an existing cluster
(``scheduler="tcp://..."``), like ``calibprob compare``. Each finished task is
written at once to ``<out>.parts/`` (atomically), so a killed run restarted
with the same command recomputes only the missing tasks. Tasks run through
:mod:`calibprob.runs`, the executor of ``calibprob compare`` (fingerprint,
checksum and key checks before reuse, failed tasks retried, a lock per output). :func:`bo_table`
prints the comparison of Deshpande et al. (2024), Table 1.

Methods
-------
``calibrated``   recalibrated GP, calibration set by closed-form LOO (Algorithm 3 + 4)
``time-series``  recalibrated GP, time-series splits (one-step-ahead forecasts)
``online``       recalibrated GP, the issued forecasts themselves (Algorithm 3, eq. 7)
``uncalibrated`` the same GP and acquisition without recalibration
``sharp``        Capone et al.'s sharp-GP confidence bound (eq. 18); only for
                 the confidence-bound acquisitions (``ucb``/``lcb``)
``conformal``    the GP uncalibrated, queries drawn from the softmax of the
                 confidence bound, each issued with its feedback-shift conformal
                 set (``calibprob.bo.conformal``); ``ucb``/``lcb`` only
``conformal-calibrated``  the same design under the ``calibrated`` (LOO) recalibration
``stanton``      Stanton et al.'s conformal acquisition (``calibprob.bo.stanton``): the
                 task's acquisition integrated over each candidate's feedback-shift
                 conformal set, ``cucb`` for ``ucb``/``lcb``, ``cei`` for ``ei``

With ``interval_level=`` (the conformal methods: 0.9 by default) every run logs, per query, the
interval issued before the outcome and whether the outcome fell in it; :func:`bo_table` then
reports the **query coverage** (mean over seeds and steps) beside the regret.

Table 1 metrics (per function and acquisition, over seeds)
---------------------------------------------------------
* **min found**: final best value, mean ± standard error over seeds.
* **win fraction** (column ``f``): fraction of seeds in which the reference
  method (``calibrated``) beats the row's method — the paper's §A.1: the
  baseline is worse if it does not find a lower minimum, or finds the same
  minimum (within ``tol``, default 0.1 % of the figure's y-range) in more
  steps, or its curve is entirely above the reference's.
* **normalised area** (column ``a``): :func:`calibprob.metrics.normalized_auc`
  of the seed-averaged best-so-far curve from the end of the initial design to
  the last step, with the rectangle shared by the methods of the row group.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from calibprob._core.validation import check_int, check_probability
from calibprob.bo.loop import minimize
from calibprob.calibrators.online.recalibrator import check_eta
from calibprob.datasets.functions import get_function
from calibprob.metrics import normalized_auc
from calibprob.runs import RunOutput, execute

__all__ = ["METHODS", "run_task", "run_experiment", "bo_table", "format_bo_table", "win_fraction"]

#: Method name -> options of :func:`calibprob.bo.minimize` (``acquisition`` is the task's own
#: unless the method fixes it).
METHODS = {
    "calibrated": {"calibration": "loo"},
    "time-series": {"calibration": "time-series"},
    "online": {"calibration": "online"},
    "uncalibrated": {"calibration": "none"},
    "sharp": {"calibration": "none", "acquisition": "sharp-ucb"},
    "conformal": {"calibration": "conformal"},
    "conformal-calibrated": {"calibration": "conformal-loo"},
    # Stanton et al. (2023): the task's acquisition integrated over the conformal set (_STANTON)
    "stanton": {"calibration": "conformal"},
}
_CONFORMAL_METHODS = ("conformal", "conformal-calibrated")
_UCB = ("ucb", "lcb")
#: The conformal acquisition (calibprob.bo.stanton) that method "stanton" runs for each task acquisition.
_STANTON = {"ucb": "cucb", "lcb": "cucb", "ei": "cei"}


def _applicable(method: str, acquisition: str) -> bool:
    if method == "stanton":
        return acquisition in _STANTON
    return (method != "sharp" and method not in _CONFORMAL_METHODS) or acquisition in _UCB


def _fingerprint(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_task(config: dict, function: str, acquisition: str, method: str, seed: int) -> xr.Dataset:
    """Run one BO task; a pure function of its arguments (ships to Dask workers).

    Parameters
    ----------
    config : dict
        Options of :func:`calibprob.bo.minimize` shared by all tasks, plus
        optionally ``n_init_per_function`` (dict function -> n_init).
    function, acquisition, method : str
    seed : int

    Returns
    -------
    xarray.Dataset
        Over (function, acquisition, method, seed, evaluation / step): ``y``,
        ``best_so_far``, ``x``, ``calibration_error``, ``calibration_error_base``,
        ``pit``, ``run_time``, ``n_init``, ``optimum``, ``error`` ("" if fine).
    """
    opts = {k: v for k, v in config.items() if k not in ("n_init_per_function",)}
    per_fn = config.get("n_init_per_function") or {}
    if function in per_fn:
        opts["n_init"] = int(per_fn[function])
    opts.update(METHODS[method])
    opts.setdefault("acquisition", acquisition)
    if "acquisition" not in METHODS[method]:
        opts["acquisition"] = acquisition
    if method == "stanton":
        opts["acquisition"] = _STANTON[acquisition]
    t0 = time.perf_counter()
    res = minimize(function, seed=int(seed), **opts)
    run_time = time.perf_counter() - t0
    ev, st = res["evaluations"].to_dataset(), res["steps"].to_dataset()
    ds = xr.Dataset(
        {
            "y": ev["y"],
            "best_so_far": ev["best_so_far"],
            "x": ev["x"].rename(feature="feature"),
            "calibration_error": st["calibration_error"],
            "calibration_error_base": st["calibration_error_base"],
            "pit": st["pit"],
            "run_time": run_time,
            "n_init": int(res.attrs["n_init"]),
            "n_evaluations": int(ev.sizes["evaluation"]),
            "optimum": float(res.attrs["optimum"]),
            "error": "",
        }
    )
    for key in ("interval_lower", "interval_upper", "covered"):
        if key in st:
            ds[key] = st[key]
    d = ds.sizes["feature"]
    ds = ds.assign_coords(feature=[f"x{j + 1}" for j in range(d)])
    return ds.expand_dims(function=[function], acquisition=[acquisition], method=[method], seed=[int(seed)])


def _failed(key: tuple, msg: str) -> xr.Dataset:
    function, acquisition, method, seed = key
    return xr.Dataset({"error": msg}).expand_dims(
        function=[function], acquisition=[acquisition], method=[method], seed=[int(seed)]
    )


def _part_name(key: tuple) -> str:
    return "__".join(str(k) for k in key[:3]) + f"__seed{int(key[3]):04d}"


def _coords(key: tuple) -> dict:
    return {"function": key[0], "acquisition": key[1], "method": key[2], "seed": int(key[3])}


def _check_config(config: dict, acquisitions: Sequence[str]) -> None:
    """Reject bad options of :func:`calibprob.bo.minimize` before any task runs."""
    known = {
        "n_init",
        "n_steps",
        "eta",
        "kappa",
        "xi",
        "refit_every",
        "n_init_per_function",
        "coupling",
        "levels",
        "init_design",
        "n_candidates",
        "n_starts",
        "sharp_level",
        "interval_level",
        "design_lambda",
        "blas_threads",
        "gp",
        "dim",
    }
    for k in config:
        if k not in known:
            raise ValueError(f"unknown option {k!r} of run_experiment; valid: {', '.join(sorted(known))}.")
    # EI and PI need a GP fitted on at least two points (one point has no spread to estimate)
    min_init = 2 if any(a in ("ei", "pi") for a in acquisitions) else 1
    n_inits = [config.get("n_init", 3), *(config.get("n_init_per_function") or {}).values()]
    for v in n_inits:
        check_int(v, "n_init (initial design size, --n-init)", minimum=min_init)
    check_int(config.get("n_steps", 25), "n_steps (--n-steps)", minimum=0)
    check_int(config.get("refit_every", 1), "refit_every (--refit-every)", minimum=1)
    if "eta" in config:
        check_eta(config["eta"])
    if config.get("interval_level") is not None:
        check_probability(config["interval_level"], "interval_level (--interval-level)")
    lam = config.get("design_lambda", 10.0)
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not np.isfinite(lam) or lam < 0:
        raise ValueError(f"design_lambda (--design-lambda) must be a finite number >= 0; got {lam!r}. Pass e.g. 10.")
    kappa = config.get("kappa", 2.0)
    if isinstance(kappa, bool) or not isinstance(kappa, (int, float)) or not np.isfinite(kappa):
        raise ValueError(f"kappa (--kappa) must be a finite number; got {kappa!r}.")


def _check_functions(functions: Sequence[str]) -> list[str]:
    """Canonical names of a non-empty list of test functions."""
    if isinstance(functions, str) or not len(functions):
        raise ValueError(f"functions must be a non-empty list of test-function names; got {functions!r}.")
    return [get_function(f).name for f in functions]


def _check_methods_and_acquisitions(methods: Sequence[str], acquisitions: Sequence[str]) -> None:
    """Every method a key of :data:`METHODS`; every acquisition one the paper's Table 1 uses."""
    for m in methods:
        if m not in METHODS:
            raise ValueError(f"methods must be among {', '.join(METHODS)}; got {m!r}.")
    for a in acquisitions:
        if a not in ("ucb", "lcb", "ei", "pi"):
            raise ValueError(f"acquisitions must be among 'ucb', 'lcb', 'ei', 'pi'; got {a!r}.")


def _check_seeds(seeds: int | Sequence[int]) -> list[int]:
    """``n`` means seeds 0..n-1; a list must hold distinct non-negative integers."""
    if np.ndim(seeds) == 0:
        if isinstance(seeds, bool) or not isinstance(seeds, (int, np.integer)) or seeds < 1:
            raise ValueError(f"seeds must be a positive number of seeds (or a list of seeds); got {seeds!r}.")
        return list(range(int(seeds)))
    out = [int(s) for s in seeds]  # type: ignore[union-attr]  # a scalar returned above
    if not out or len(set(out)) != len(out) or min(out) < 0:
        raise ValueError(f"seeds must be distinct non-negative integers; got {out!r}.")
    return out


def run_experiment(
    functions: Sequence[str],
    acquisitions: Sequence[str] = ("ucb", "ei"),
    methods: Sequence[str] = ("calibrated", "uncalibrated"),
    seeds: int | Sequence[int] = 20,
    *,
    out: str | Path | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = True,
    **config: Any,
) -> xr.Dataset:
    """Run a grid of BO tasks (function × acquisition × method × seed) and combine the results.

    Parameters
    ----------
    functions : sequence of str
        Test-function names (:func:`calibprob.datasets.get_function`).
    acquisitions : sequence of str
        Among ``"ucb"``, ``"lcb"``, ``"ei"``, ``"pi"``.
    methods : sequence of str
        Keys of :data:`METHODS`; ``"sharp"`` runs only with ``ucb``/``lcb``.
    seeds : int or sequence of int
        ``20`` means seeds 0..19. The same seed gives every method the same
        initial design.
    out : path, optional
        Results netCDF file; finished tasks go to ``<out>.parts/`` and are not
        recomputed on a rerun with the same settings. Without ``out`` nothing
        is written.
    workers : int, optional
        Dask ``LocalCluster`` with this many single-threaded worker processes.
    scheduler : str, optional
        Address of an existing Dask scheduler.
    progress : bool
        Progress bar on stderr.
    **config
        Options of :func:`calibprob.bo.minimize` (``n_init``, ``n_steps``,
        ``eta``, ``refit_every``, ...) and ``n_init_per_function``.

    Returns
    -------
    xarray.Dataset
        Dims ``function``, ``acquisition``, ``method``, ``seed``, ``evaluation``,
        ``step``, ``feature``; non-applicable tasks (sharp with EI) are NaN.

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, §6 and Table 1.

    Examples
    --------
    >>> from calibprob.bo import run_experiment, bo_table, format_bo_table
    >>> ds = run_experiment(["forrester"], acquisitions=["ei"], methods=["calibrated", "uncalibrated"],
    ...                     seeds=2, n_init=3, n_steps=3, progress=False)
    >>> dict(ds["best_so_far"].sizes)
    {'function': 1, 'acquisition': 1, 'method': 2, 'seed': 2, 'evaluation': 6}
    """
    if workers is not None and scheduler is not None:
        raise ValueError("pass either workers (a new LocalCluster) or scheduler (an existing cluster), not both.")
    functions = _check_functions(functions)
    _check_methods_and_acquisitions(methods, acquisitions)
    seeds = _check_seeds(seeds)
    _check_config(config, acquisitions)
    keys = [(f, a, m, s) for f in functions for a in acquisitions for m in methods for s in seeds if _applicable(m, a)]
    if not keys:
        raise ValueError(
            "no task to run: 'sharp' and the conformal methods run only with the ucb/lcb acquisitions; add one of them."
        )
    fp = _fingerprint(config)

    def run(output: Any) -> Any:
        return execute(
            run_task,
            config,
            keys,
            fingerprint=fp,
            on_error=_failed,
            coords=_coords,
            output=output,
            part_name=_part_name,
            workers=workers,
            scheduler=scheduler,
            progress=progress,
            desc="bo",
            unit="run",
        )

    def combine(results: Any) -> xr.Dataset:
        combined = _combine([results[k] for k in keys]).reindex(
            {"function": functions, "acquisition": list(acquisitions), "method": list(methods), "seed": seeds}
        )
        combined.attrs.update(
            {
                "config": json.dumps(config, sort_keys=True, default=str),
                "config_fingerprint": fp,
                "reference_method": "calibrated",
                "title": "calibprob Bayesian-optimisation experiment",
            }
        )
        return combined

    if out is None:
        return combine(run(None))
    with RunOutput(out) as output:
        combined = combine(run(output))
        output.write(combined)
    return combined


def _combine(pieces: Sequence[xr.Dataset]) -> xr.Dataset:
    clean = []
    for p in pieces:
        p = p.copy()
        p.attrs = {}
        clean.append(p)
    # merge, not concat: concatenating along `feature` (1-D and 2-D functions together)
    # would broadcast every variable over it
    ds = xr.merge(clean, join="outer", compat="no_conflicts", combine_attrs="drop")
    if "error" in ds:
        ds["error"] = ds["error"].fillna("").astype(str)
    return ds


# ---------------------------------------------------------------------------- table
def _curves(ds: xr.Dataset, function: str, acquisition: str, method: str) -> np.ndarray:
    """Best-so-far over BO steps (end of the initial design .. last step), shape (seeds, T+1)."""
    sub = ds.sel({"function": function, "acquisition": acquisition, "method": method})
    n_init = sub["n_init"].values
    n0 = int(np.nanmax(n_init)) if np.isfinite(n_init).any() else 1
    n_evaluations = sub["n_evaluations"].values
    n_ev = int(np.nanmax(n_evaluations)) if np.isfinite(n_evaluations).any() else sub.sizes["evaluation"]
    bsf = sub["best_so_far"].transpose("seed", "evaluation").values
    return bsf[:, n0 - 1 : n_ev]


def win_fraction(reference: np.ndarray, baseline: np.ndarray, tol: float) -> float:
    """Fraction of seeds where ``reference`` beats ``baseline`` (Deshpande et al. 2024, §A.1).

    Parameters
    ----------
    reference, baseline : ndarray, shape (seeds, T)
        Best-so-far curves (minimisation), same seeds in the same order.
    tol : float
        Values within ``tol`` count as the same minimum.

    Returns
    -------
    float
        NaN when no seed has both curves finite.

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, Table 1 and §A.1.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.bo import win_fraction
    >>> reference = np.array([[3.0, 1.0], [3.0, 2.0]])   # best-so-far curves of two seeds
    >>> baseline = np.array([[3.0, 2.0], [3.0, 2.0]])
    >>> win_fraction(reference, baseline, tol=1e-9)   # seed 0 wins; identical curves do not
    0.5
    """
    wins, n = 0, 0
    for r, b in zip(reference, baseline):
        if not (np.isfinite(r[-1]) and np.isfinite(b[-1])):
            continue
        n += 1
        if r[-1] < b[-1] - tol:
            wins += 1
        elif abs(r[-1] - b[-1]) <= tol:
            t_r = int(np.argmax(r <= r[-1] + tol))
            t_b = int(np.argmax(b <= b[-1] + tol))
            above = np.all(np.nan_to_num(b, nan=np.inf) >= r - tol) and np.any(b > r + tol)
            if t_r < t_b or above:
                wins += 1
    return wins / n if n else np.nan


_TABLE_VARS = ("min_mean", "min_se", "win_fraction", "auc", "auc_seed_mean", "n_seeds", "final_calibration_error")


def _finished_curves(ds: xr.Dataset, function: str, acquisition: str, methods: Sequence[str]) -> dict[str, np.ndarray]:
    """Best-so-far curves (seed, evaluation) of the methods with at least one finished seed."""
    curves = {}
    for m in methods:
        c = _curves(ds, function, acquisition, m)
        if np.isfinite(c[:, -1]).any():
            curves[m] = c
    return curves


@dataclass(frozen=True)
class _CurveScale:
    """The ranges areas are normalised by, in one (function, acquisition) cell.

    ``lo``/``hi``: range of every finished seed's values (per-seed areas and the
    tie tolerance ``tol``); ``mean_lo``/``mean_hi``: range of the mean curves
    (area of the mean curve), as in the paper's §A.1.
    """

    lo: float
    hi: float
    tol: float
    means: dict
    mean_lo: float
    mean_hi: float

    @classmethod
    def of(cls, curves: dict[str, np.ndarray], tol_fraction: float) -> _CurveScale:
        allv = np.concatenate([c[np.isfinite(c[:, -1])].ravel() for c in curves.values()])
        allv = allv[np.isfinite(allv)]
        lo, hi = float(allv.min()), float(allv.max())
        means = {m: np.nanmean(c[np.isfinite(c[:, -1])], axis=0) for m, c in curves.items()}
        return cls(
            lo=lo,
            hi=hi,
            tol=tol_fraction * max(hi - lo, 1e-12),
            means=means,
            mean_lo=min(float(v.min()) for v in means.values()),
            mean_hi=max(float(v.max()) for v in means.values()),
        )


def _method_row(curves: dict[str, np.ndarray], method: str, reference: str, scale: _CurveScale) -> dict[str, float]:
    """Table 1 entries of one method: final minimum (mean, s.e.), areas and the reference's win fraction."""
    c = curves[method]
    fin = c[np.isfinite(c[:, -1]), -1]
    row = {
        "n_seeds": float(fin.size),
        "min_mean": float(fin.mean()),
        "min_se": float(fin.std(ddof=1) / np.sqrt(fin.size)) if fin.size > 1 else np.nan,
    }
    if scale.mean_hi > scale.mean_lo:
        row["auc"] = float(normalized_auc(scale.means[method], lower=scale.mean_lo, upper=scale.mean_hi))
    if scale.hi > scale.lo:
        good = c[np.isfinite(c).all(axis=1)]
        if good.size:
            row["auc_seed_mean"] = float(np.mean(normalized_auc(good, lower=scale.lo, upper=scale.hi)))
    if method != reference and reference in curves:
        row["win_fraction"] = win_fraction(curves[reference], c, scale.tol)
    return row


def _final_calibration_error(ds: xr.Dataset, function: str, acquisition: str, method: str) -> float:
    """Mean over seeds of the last finite running ECE (NaN when no seed has one)."""
    sel = ds["calibration_error"].sel({"function": function, "acquisition": acquisition, "method": method})
    ce = sel.transpose("seed", "step").values
    last = np.array([row[np.isfinite(row)][-1] for row in ce if np.isfinite(row).any()])
    return float(last.mean()) if last.size else np.nan


def bo_table(ds: xr.Dataset, *, reference: str = "calibrated", tol_fraction: float = 1e-3) -> xr.Dataset:
    """Table 1 of Deshpande et al. (2024) from :func:`run_experiment`'s results.

    Parameters
    ----------
    ds : xarray.Dataset
        Results of :func:`run_experiment`.
    reference : str, default "calibrated"
        The method whose wins are counted (the paper's calibrated BO).
    tol_fraction : float, default 1e-3
        Minima within this fraction of the data range count as ties.

    Returns
    -------
    xarray.Dataset
        Over (function, acquisition, method): ``min_mean``, ``min_se``,
        ``win_fraction`` (reference beats the row; NaN on the reference row),
        ``auc`` (normalised area of the mean curve), ``auc_seed_mean``
        (mean of per-seed areas with the same rectangle), ``n_seeds``,
        ``final_calibration_error`` (mean over seeds of the last step's running ECE);
        ``query_coverage`` (share of queries whose outcome fell in the interval issued before it)
        when the runs logged intervals (``interval_level=``).

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, Table 1 and §A.1.

    Examples
    --------
    >>> from calibprob.bo import run_experiment, bo_table, format_bo_table
    >>> ds = run_experiment(["forrester"], acquisitions=["ei"], seeds=1, n_init=3, n_steps=2, progress=False)
    >>> table = bo_table(ds)
    >>> sorted(table.data_vars)[:3]
    ['auc', 'auc_seed_mean', 'final_calibration_error']
    >>> table["method"].values.tolist()
    ['calibrated', 'uncalibrated']
    """
    fns, acqs, meths = (list(ds[c].values) for c in ("function", "acquisition", "method"))
    shape = (len(fns), len(acqs), len(meths))
    out = {k: np.full(shape, np.nan) for k in _TABLE_VARS}
    for i, f in enumerate(fns):
        for j, a in enumerate(acqs):
            curves = _finished_curves(ds, f, a, meths)
            if not curves:
                continue
            scale = _CurveScale.of(curves, tol_fraction)
            for k, m in enumerate(meths):
                if m not in curves:
                    continue
                row = _method_row(curves, m, reference, scale)
                row["final_calibration_error"] = _final_calibration_error(ds, f, a, m)
                for key, value in row.items():
                    out[key][i, j, k] = value
    dims = ("function", "acquisition", "method")
    if "covered" in ds:
        # mean over seeds and steps of "the outcome fell in the interval issued before it"
        cov = ds["covered"].transpose("function", "acquisition", "method", ...)
        out["query_coverage"] = cov.mean([d for d in cov.dims if d not in dims], skipna=True).values
    return xr.Dataset(
        {k: (dims, v) for k, v in out.items()},
        coords={"function": fns, "acquisition": acqs, "method": meths},
        attrs={"reference_method": reference, "tol_fraction": tol_fraction},
    )


def format_bo_table(table: xr.Dataset) -> str:
    """Render :func:`bo_table` as text, one row per (function, acquisition, method).

    Parameters
    ----------
    table : xarray.Dataset
        The output of :func:`bo_table`.

    Returns
    -------
    str

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, Table 1.

    Examples
    --------
    >>> from calibprob.bo import run_experiment, bo_table, format_bo_table
    >>> ds = run_experiment(["forrester"], acquisitions=["ei"], seeds=1, n_init=3, n_steps=2, progress=False)
    >>> print(format_bo_table(bo_table(ds)).splitlines()[0])  # doctest: +NORMALIZE_WHITESPACE
    function acq method min found (± s.e.) f (calibrated wins) AUC a ECE(last) seeds
    """
    ref = table.attrs.get("reference_method", "calibrated")
    head = ["function", "acq", "method", "min found (± s.e.)", f"f ({ref} wins)", "AUC a", "ECE(last)", "seeds"]
    query = "query_coverage" in table
    if query:
        head.insert(-1, "query cov.")
    rows = []
    for f in table["function"].values:
        for a in table["acquisition"].values:
            for m in table["method"].values:
                r = table.sel({"function": f, "acquisition": a, "method": m})
                if not np.isfinite(r["min_mean"]):
                    continue
                se = float(r["min_se"])
                wf = float(r["win_fraction"])
                rows.append(
                    [
                        str(f),
                        str(a),
                        str(m),
                        f"{float(r['min_mean']):.4g} ({se:.2g})" if np.isfinite(se) else f"{float(r['min_mean']):.4g}",
                        "—" if not np.isfinite(wf) else f"{wf:.2f}",
                        "—" if not np.isfinite(r["auc"]) else f"{float(r['auc']):.3f}",
                        "—"
                        if not np.isfinite(r["final_calibration_error"])
                        else f"{float(r['final_calibration_error']):.4f}",
                        f"{int(r['n_seeds'])}",
                    ]
                )
                if query:
                    qc = float(r["query_coverage"])
                    rows[-1].insert(-1, "—" if not np.isfinite(qc) else f"{qc:.3f}")
    cells = [head] + rows
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines = ["  ".join(t.ljust(w) for t, w in zip(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
