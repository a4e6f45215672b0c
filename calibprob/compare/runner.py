"""The comparison runner: one task per (data set, repetition), serial or on Dask.

Each task fits the base model once on its training part and hands it to every
calibrator of the spec; each calibrator's prediction on the test part is scored
by :func:`calibprob.evaluate`. A finished task is written at once to its own
netCDF file in ``<out>.parts/`` (atomically: write then rename), so a killed
run restarted with the same command recomputes only what is missing. Parts
carry the spec's fingerprint: a changed spec never reuses stale results.

Execution is serial by default; ``workers=N`` starts a
``dask.distributed.LocalCluster`` with N single-threaded worker processes;
``scheduler="tcp://host:port"`` submits to an existing Dask cluster unchanged.
"""

from __future__ import annotations

import os
import time
import traceback
from pathlib import Path

import numpy as np
import xarray as xr

from calibprob.compare.spec import Spec, parse_spec

__all__ = ["run_task", "run_comparison", "task_keys", "combine_parts", "results_path_parts"]

_ENGINE = "h5netcdf"


def task_keys(spec: Spec) -> list[tuple[str, int]]:
    """Every (data set, repetition) pair of the spec, in a fixed order.

    Parameters
    ----------
    spec : Spec

    Returns
    -------
    list of (str, int)
        ``(dataset, repetition)`` pairs.

    References
    ----------
    The comparison-spec reference: :doc:`/spec`.

    Examples
    --------
    >>> from calibprob.compare import parse_spec
    >>> spec = parse_spec({
    ...     "name": "demo",
    ...     "datasets": [{"name": "branin", "function": "branin", "n": 80, "noise": 0.1}],
    ...     "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
    ...     "repetitions": 2,
    ...     "base": {"kind": "ols"},
    ...     "methods": {"vanilla": {"kind": "base"}, "scaled": {"kind": "variance-scaling"}},
    ... })
    >>> from calibprob.compare import task_keys
    >>> task_keys(spec)
    [('branin', 0), ('branin', 1)]
    """
    return [(d.name, r) for d in spec.datasets for r in range(spec.repetitions)]


def _task_seed(spec: Spec, dataset: str, repetition: int) -> int:
    # Independent of execution order and worker: a function of the spec seed and the task only.
    idx = spec.dataset_names.index(dataset)
    return int(np.random.SeedSequence([spec.seed, idx, repetition]).generate_state(1)[0])


def _load(spec: Spec, dataset: str, seed: int) -> xr.Dataset:
    from calibprob import datasets as cds

    d = next(d for d in spec.datasets if d.name == dataset)
    if d.path is not None:
        return cds.load_csv(d.path, d.target)
    if d.function is not None:
        return cds.make_synthetic(d.function, d.n, dim=d.dim, noise=d.noise, seed=seed, design=d.design)
    return cds.load_dataset(d.name)


def _prepare(spec: Spec, dataset: str, repetition: int):
    """Split (and standardise) one task's data."""
    from calibprob import datasets as cds

    seed = _task_seed(spec, dataset, repetition)
    data = _load(spec, dataset, seed)
    d = next(d for d in spec.datasets if d.name == dataset)
    split = d.split if d.split is not None else spec.split
    fractions = tuple(split[k] for k in ("train", "calibrate", "test") if k in split)
    parts = cds.train_calibrate_test_split(data, fractions, seed=seed)
    if spec.standardize:
        scaler = cds.Standardizer().fit(parts["train"])
        parts = {k: scaler.transform(v) for k, v in parts.items()}
    arrays = {k: (v["X"].values, v["y"].values) for k, v in parts.items()}
    return seed, arrays


def run_task(spec_dict: dict, dataset: str, repetition: int) -> xr.Dataset:
    """Run one (data set, repetition) task and return its scores.

    A pure function of its arguments (the spec travels as a dict), so Dask can
    ship it to any worker. A failing calibrator is recorded in ``error`` and
    does not stop the others; a failing base model fails the task.

    Parameters
    ----------
    spec_dict : dict
        ``Spec.to_dict()`` of the comparison.
    dataset : str
        Name of one of its data sets.
    repetition : int
        Repetition index (selects the split's seed).

    Returns
    -------
    xarray.Dataset
        Metric variables of :func:`calibprob.evaluate` stacked over ``calibrator``,
        plus ``fit_time(calibrator)``, ``base_fit_time`` and ``error(calibrator)``.

    References
    ----------
    The comparison-spec reference: :doc:`/spec`.

    Examples
    --------
    >>> from calibprob.compare import parse_spec
    >>> spec = parse_spec({
    ...     "name": "demo",
    ...     "datasets": [{"name": "branin", "function": "branin", "n": 80, "noise": 0.1}],
    ...     "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
    ...     "repetitions": 2,
    ...     "base": {"kind": "ols"},
    ...     "methods": {"vanilla": {"kind": "base"}, "scaled": {"kind": "variance-scaling"}},
    ... })
    >>> from calibprob.compare import run_task
    >>> scores = run_task(spec.to_dict(), "branin", 0)
    >>> scores["calibrator"].values.tolist()
    ['vanilla', 'scaled']
    """
    from calibprob.compare.methods import METHOD_KINDS, TaskContext, make_base
    from calibprob.metrics import evaluate

    spec = parse_spec(spec_dict)
    seed, arrays = _prepare(spec, dataset, repetition)
    X_train, y_train = arrays["train"]
    X_cal, y_cal = arrays.get("calibrate", (None, None))
    X_test, y_test = arrays["test"]
    levels = None if spec.levels is None else np.asarray(spec.levels)

    base = make_base(spec.base, seed=seed)
    t0 = time.perf_counter()
    base.fit(X_train, y_train)
    base_time = time.perf_counter() - t0
    ctx = TaskContext(X_train, y_train, X_cal, y_cal, X_test, base, spec.base, levels, seed,
                      tuple(spec.confidence_levels))

    scores, times, errors = [], [], []
    for m in spec.methods:
        t0 = time.perf_counter()
        try:
            pred = METHOD_KINDS[m.kind].func(ctx, **m.options)
            # one call for both outputs: evaluate scores intervals-only methods (jackknife+, J+GP,
            # FCP-GP) on coverage, width and IAE
            score = evaluate(pred, y_test, confidence_levels=spec.confidence_levels)
            errors.append("")
            scores.append(score.expand_dims(calibrator=[m.name]))
        except Exception as err:  # recorded, never fatal for the other methods
            errors.append(f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=3)}")
        times.append(time.perf_counter() - t0)
    names = spec.method_names
    if scores:
        # merge, not concat: interval-only methods lack the density metrics (NaN there)
        out = xr.merge(scores, join="outer", compat="no_conflicts", combine_attrs="drop_conflicts")
        out = out.reindex(calibrator=names)
    else:
        out = xr.Dataset(coords={"calibrator": names})
    out["fit_time"] = ("calibrator", np.asarray(times))
    out["base_fit_time"] = base_time
    out["error"] = ("calibrator", np.asarray(errors, dtype=object).astype(str))
    out["n_train"] = len(y_train)
    out["n_calibrate"] = 0 if y_cal is None else len(y_cal)
    out["n_test"] = len(y_test)
    return out.expand_dims(dataset=[dataset], repetition=[repetition])


def results_path_parts(out: str | Path) -> Path:
    """The folder holding one file per finished task, next to the results file."""
    out = Path(out)
    return out.with_name(out.name + ".parts")


def _part_file(parts: Path, dataset: str, repetition: int) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in dataset)
    return parts / f"{safe}__rep{repetition:04d}.nc"


def _write_atomic(ds: xr.Dataset, path: Path) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    ds.to_netcdf(tmp, engine=_ENGINE)
    os.replace(tmp, path)  # a killed run never leaves a half-written part behind


def _finished(parts: Path, spec: Spec, key) -> bool:
    path = _part_file(parts, *key)
    if not path.is_file():
        return False
    try:
        with xr.open_dataset(path, engine=_ENGINE) as ds:
            return ds.attrs.get("spec_fingerprint") == spec.fingerprint
    except Exception:
        return False


def _failed_task(key, err: BaseException, spec: Spec) -> xr.Dataset:
    dataset, repetition = key
    msg = f"{type(err).__name__}: {err}"
    ds = xr.Dataset(
        {"task_error": ((), msg), "error": ("calibrator", np.asarray([msg] * len(spec.methods)))},
        coords={"calibrator": spec.method_names},
    )
    return ds.expand_dims(dataset=[dataset], repetition=[repetition])


def combine_parts(spec: Spec, parts: Path) -> xr.DataTree:
    """Assemble finished task files into the results DataTree.

    The root Dataset holds the metrics over (dataset, calibrator, repetition[,
    confidence_level, ...]); the ``timing`` group holds per-task fit times,
    which differ between runs and so are kept apart from the scores.

    Parameters
    ----------
    spec : Spec
    parts : Path
        The ``<out>.parts/`` folder written by :func:`run_comparison`.

    Returns
    -------
    xarray.DataTree
        Root: the scores; group ``timing``: fit times.

    References
    ----------
    The comparison-spec reference: :doc:`/spec`.

    Examples
    --------
    >>> from calibprob.compare import parse_spec
    >>> spec = parse_spec({
    ...     "name": "demo",
    ...     "datasets": [{"name": "branin", "function": "branin", "n": 80, "noise": 0.1}],
    ...     "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
    ...     "repetitions": 2,
    ...     "base": {"kind": "ols"},
    ...     "methods": {"vanilla": {"kind": "base"}, "scaled": {"kind": "variance-scaling"}},
    ... })
    >>> import tempfile, pathlib
    >>> from calibprob.compare import run_comparison, load_results
    >>> tmp = tempfile.TemporaryDirectory()
    >>> out = pathlib.Path(tmp.name) / "demo.nc"
    >>> tree = run_comparison(spec, out, progress=False)
    >>> from calibprob.compare import combine_parts
    >>> again = combine_parts(spec, pathlib.Path(str(out) + ".parts"))
    >>> list(again.children)
    ['timing']
    >>> tmp.cleanup()
    """
    pieces = []
    for key in task_keys(spec):
        path = _part_file(parts, *key)
        if path.is_file():
            pieces.append(xr.load_dataset(path, engine=_ENGINE))
    if not pieces:
        raise RuntimeError("no finished task to combine")
    for p in pieces:
        p.attrs = {}
        if "task_error" not in p:
            p["task_error"] = (("dataset", "repetition"), np.full((1, 1), "", dtype=object).astype(str))
        else:
            p["task_error"] = p["task_error"].broadcast_like(p["repetition"]).broadcast_like(p["dataset"])
    ds = xr.combine_by_coords(pieces, combine_attrs="drop", join="outer")
    ds = ds.reindex(dataset=spec.dataset_names, repetition=np.arange(spec.repetitions),
                    calibrator=spec.method_names)
    # Encodings come from whichever part file was read first (e.g. a fixed-width
    # string of that part's data set name); reused on write they truncate longer names.
    for var in ds.variables.values():
        var.encoding = {}
    for name in ("error", "task_error"):
        if name in ds:
            ds[name] = ds[name].fillna("").astype(str)
    timing_vars = [v for v in ("fit_time", "base_fit_time") if v in ds]
    timing = ds[timing_vars]
    metrics = ds.drop_vars(timing_vars)
    from calibprob import __version__

    metrics.attrs.update(
        {
            "spec_name": spec.name,
            "spec": spec.source or str(spec.to_dict()),
            "spec_fingerprint": spec.fingerprint,
            "repetitions": spec.repetitions,
            "calibprob_version": __version__,
            "title": f"calibprob comparison: {spec.name}",
        }
    )
    return xr.DataTree.from_dict({"/": metrics, "timing": timing})


def run_comparison(
    spec: Spec,
    out: str | Path,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = True,
) -> xr.DataTree:
    """Run every task of ``spec`` that is not finished yet and write the results file.

    Parameters
    ----------
    spec : Spec
    out : path
        The results netCDF file; finished tasks go to ``<out>.parts/``.
    workers : int, optional
        Run on a new ``dask.distributed.LocalCluster`` with this many worker processes.
    scheduler : str, optional
        Address of an existing Dask scheduler (e.g. ``"tcp://127.0.0.1:8786"``).
    progress : bool
        Show a progress bar (tasks done / total, elapsed, ETA) on stderr.

    Returns
    -------
    xarray.DataTree
        The results, also written to ``out``.

    References
    ----------
    The comparison-spec reference: :doc:`/spec`.

    Examples
    --------
    >>> from calibprob.compare import parse_spec
    >>> spec = parse_spec({
    ...     "name": "demo",
    ...     "datasets": [{"name": "branin", "function": "branin", "n": 80, "noise": 0.1}],
    ...     "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
    ...     "repetitions": 2,
    ...     "base": {"kind": "ols"},
    ...     "methods": {"vanilla": {"kind": "base"}, "scaled": {"kind": "variance-scaling"}},
    ... })
    >>> import tempfile, pathlib
    >>> from calibprob.compare import run_comparison, load_results
    >>> tmp = tempfile.TemporaryDirectory()
    >>> out = pathlib.Path(tmp.name) / "demo.nc"
    >>> tree = run_comparison(spec, out, progress=False)
    >>> res = load_results(out)
    >>> res["ece"].dims
    ('dataset', 'repetition', 'calibrator')
    >>> tmp.cleanup()
    """
    from tqdm.auto import tqdm

    if workers is not None and scheduler is not None:
        raise ValueError("pass either workers (a new LocalCluster) or scheduler (an existing cluster), not both.")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    parts = results_path_parts(out)
    parts.mkdir(exist_ok=True)
    keys = task_keys(spec)
    todo = [k for k in keys if not _finished(parts, spec, k)]
    spec_dict = spec.to_dict()
    bar = tqdm(total=len(keys), initial=len(keys) - len(todo), disable=not progress,
               desc=f"{spec.name}", unit="task", dynamic_ncols=True)

    def store(key, result: xr.Dataset) -> None:
        result.attrs["spec_fingerprint"] = spec.fingerprint
        _write_atomic(result, _part_file(parts, *key))
        bar.update(1)

    try:
        if not todo:
            pass
        elif workers is None and scheduler is None:
            for key in todo:
                try:
                    result = run_task(spec_dict, *key)
                except Exception as err:
                    result = _failed_task(key, err, spec)
                store(key, result)
        else:
            _run_dask(spec_dict, spec, todo, store, workers=workers, scheduler=scheduler)
    finally:
        bar.close()
    tree = combine_parts(spec, parts)
    tmp = out.with_name(out.name + ".tmp")
    tree.to_netcdf(tmp, engine=_ENGINE)
    os.replace(tmp, out)
    return tree



def local_cluster(n_workers: int):
    """A ``dask.distributed.LocalCluster`` of single-threaded worker processes tuned for GP work.

    Dask's nannies start workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (to hand freed
    memory back to the OS). Setting it disables glibc's dynamic mmap threshold, so every
    NumPy array above 128 KiB is mmap-ed and zero-filled afresh: measured here, a GP fit
    on 300 points took 4.0 s in such a worker against 2.1 s in a plain process, and
    1.9 s with the variable unset. calibprob's tasks allocate many mid-sized matrices,
    so the variable is left unset for the workers this function starts.

    Parameters
    ----------
    n_workers : int
        Number of worker processes (one thread each: the GP algebra runs one BLAS
        thread per process).

    Returns
    -------
    dask.distributed.LocalCluster

    References
    ----------
    Dask documentation, "Worker memory management: automatically trim memory";
    glibc ``mallopt(3)``, ``M_TRIM_THRESHOLD`` (setting it disables the dynamic mmap threshold).

    Examples
    --------
    >>> from calibprob.compare.runner import local_cluster
    >>> from dask.distributed import Client
    >>> with local_cluster(1) as cluster, Client(cluster) as client:  # doctest: +SKIP
    ...     client.run(lambda: __import__("os").environ.get("MALLOC_TRIM_THRESHOLD_"))
    """
    import dask
    from dask.distributed import LocalCluster

    from calibprob._validation import check_int

    n_workers = check_int(n_workers, "n_workers (worker processes; e.g. 2)", minimum=1)
    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}):
        return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                            dashboard_address=None)

def _run_dask(spec_dict, spec, todo, store, *, workers, scheduler) -> None:
    _dask_map(run_task, spec_dict, todo, store, lambda key, err: _failed_task(key, err, spec),
             workers=workers, scheduler=scheduler)


def _dask_map(task, config, keys, store, on_error, *, workers: int | None, scheduler: str | None) -> None:
    """Run ``task(config, *key)`` for every key on Dask, storing results as they finish.

    The one submit/collect loop of ``calibprob compare`` and ``calibprob bo``: a task
    that raises is recorded through ``on_error(key, exception)`` instead of stopping
    the run, so one failing fit never loses the others.

    Parameters
    ----------
    task : callable
        Pure function of ``(config, *key)``; it travels to the workers.
    config : dict
        The (plain-dict) specification every task receives.
    keys : iterable of tuple
        One tuple per task.
    store : callable
        ``store(key, result)``, called in the client process as each task finishes.
    on_error : callable
        ``on_error(key, exception)`` returns the result to store for a failed task.
    workers : int or None
        Worker processes of a :func:`local_cluster` (used when ``scheduler`` is None).
    scheduler : str or None
        Address of a running Dask scheduler (e.g. ``"tcp://host:8786"``).
    """
    try:
        from dask.distributed import Client, as_completed
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ImportError(
            "parallel runs need Dask: pip install 'calibprob[dask]' (dask[distributed])."
        ) from err
    cluster = None
    if scheduler is None:
        cluster = local_cluster(workers)
        client = Client(cluster)
    else:
        client = Client(scheduler)
    try:
        futures = {client.submit(task, config, *key, pure=False): key for key in keys}
        for fut in as_completed(futures):
            key = futures[fut]
            try:
                result = fut.result()
            except Exception as err:
                result = on_error(key, err)
            store(key, result)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
