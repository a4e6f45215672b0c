"""The comparison runner: one task per (data set, repetition), serial or on Dask.

Each task fits the base model once on its training part and hands it to every
calibrator of the spec; each calibrator's prediction on the test part is scored
by :func:`calibprob.evaluate`. Tasks run through :mod:`calibprob.runs`,
shared with ``calibprob bo``: a finished task is written at once to its own
netCDF file in ``<out>.parts/`` (atomically), so a killed run restarted with
the same command recomputes only what is missing. A part is reused only if its
fingerprint (the spec and a content hash of every input file), its key,
coordinates and checksum all match; failed tasks are recorded and retried on
the next run; ``<out>.lock`` keeps two runs on one output from racing.

Execution is serial by default; ``workers=N`` starts a
``dask.distributed.LocalCluster`` with N single-threaded worker processes;
``scheduler="tcp://host:port"`` submits to an existing Dask cluster unchanged.

With ``granularity="method"`` (chosen by ``"auto"`` when there are fewer tasks than
workers, e.g. one repetition on two workers) a task is split: one stage fits its
bases (:func:`fit_bases`), and each (data set, repetition, method) is a task of its
own (:func:`run_method_task`) taking the fitted bases as a Dask future copied to
every worker, with its own part file (a killed run resumes per method). The
slices are put back together by :func:`assemble_task`; the scores are identical to
the task-granularity run, since each method sees the same split, seed and fitted
base either way. The base is fitted once per task, not once per method: in the
quickstart the GP base fit (0.8 s) costs as much as most of its methods.
The refits of jackknife, jackknife+ and CV+ are tasks of their own too
(:func:`method_refit_tasks`, :func:`run_method_refits`), so the slowest method of a
repetition is split; they refit a fresh base on the task's split, so they need no
fitted base and start as soon as a worker is up. With ``workers=N`` the first base
stages run in the calling process while the cluster starts (and the refits run on
the other cores); work is handed to each worker as it frees up, the costliest first.
"""

from __future__ import annotations

import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path

import xarray as xr

from calibprob import registry
from calibprob.bases.user import check_factory
from calibprob.compare.assembly import (
    _combine,
    _coords,
    _failed_task,
    _method_part_name,
    _part_name,
    assemble_task,
    combine_parts,
    failed_tasks,
    results_path_parts,
)
from calibprob.compare.spec.model import Spec
from calibprob.compare.spec.parsing import load_spec, parse_spec
from calibprob.compare.tasks import (  # re-exported: the runner was their home before the split
    MAX_REFIT_TASKS,  # noqa: F401
    fit_bases,
    method_refit_tasks,
    run_method_refits,
    run_method_task,
    run_task,
    task_keys,
)
from calibprob.runs import RunOutput, execute, failure_table, finished_parts, local_cluster, safe_name

__all__ = [
    "run",
    "with_bases",
    "run_task",
    "fit_bases",
    "run_method_task",
    "method_refit_tasks",
    "run_method_refits",
    "assemble_task",
    "run_comparison",
    "task_keys",
    "combine_parts",
    "results_path_parts",
    "failed_tasks",
    "local_cluster",
]


def run_comparison(
    spec: Spec,
    out: str | Path,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = True,
    wait: bool = True,
    granularity: str = "auto",
) -> xr.DataTree:
    """Run every task of ``spec`` that is not finished yet and write the results file.

    Parameters
    ----------
    spec : Spec
    out : path
        The results netCDF file; finished tasks go to ``<out>.parts/``. It must
        be a regular-file path in a writable folder (an existing file must be
        netCDF); this is checked before any task runs.
    workers : int, optional
        Run on a new ``dask.distributed.LocalCluster`` with this many worker processes.
    scheduler : str, optional
        Address of an existing Dask scheduler (e.g. ``"tcp://127.0.0.1:8786"``);
        unreachable within 10 s is an error.
    progress : bool
        Show a progress bar (tasks done / total, elapsed, ETA) on stderr.
    wait : bool, default True
        When another run holds ``out``, wait for it (True) or raise at once.
    granularity : {"auto", "task", "method"}
        What one scheduled task is. ``"task"``: one (data set, repetition), its base
        fitted once and shared by its methods, run one after another. ``"method"``:
        the base fit is a stage of its own and each (data set, repetition, method)
        is a task depending on it (a Dask future), so one repetition uses every
        worker, and a killed run resumes per method; the refits of jackknife,
        jackknife+ and CV+ are tasks too (one per fold, at most
        ``MAX_REFIT_TASKS`` per method); the scores are identical to ``"task"``'s.
        ``"auto"`` (default) is ``"method"`` when ``workers`` exceeds the number of
        (data set, repetition) tasks, else ``"task"``.

    Returns
    -------
    xarray.DataTree
        The results, also written to ``out``.

    Raises
    ------
    calibprob.runs.OutputError
        If ``out`` is a device, a directory, a non-netCDF file or in an
        unwritable folder (or is busy and ``wait=False``).

    References
    ----------
    The comparison-spec reference: :doc:`/spec`.

    Examples
    --------
    :doc:`/examples/comparison` runs one small comparison, once, and shows what
    ``run_comparison`` returns.

    """
    mode = _granularity(granularity, spec, workers)
    keys = task_keys(spec)
    with RunOutput(out, wait=wait) as output:
        if granularity == "auto" and mode == "task" and _has_method_parts(spec, output):
            mode = "method"  # an earlier run's method parts are reused (whatever its number of workers)
        if mode == "task":
            results = execute(
                run_task, spec.to_dict(), keys, **_run_options(spec, output, workers, scheduler, progress)
            )
        else:
            results = _run_by_method(spec, output, workers=workers, scheduler=scheduler, progress=progress)
        tree = _combine(spec, [results[k] for k in keys])
        output.write(tree)
    return tree


def _granularity(granularity: str, spec: Spec, workers: int | None) -> str:
    """``"task"`` or ``"method"``: "auto" splits by method when there are fewer tasks than ``workers``."""
    if granularity not in ("auto", "task", "method"):
        raise ValueError(
            f"granularity must be 'auto', 'task' or 'method'; got {granularity!r}. 'method' runs each "
            "(data set, repetition, method) as its own task after one shared base fit."
        )
    if granularity != "auto":
        return granularity
    return "method" if workers is not None and len(task_keys(spec)) < workers else "task"


def _has_method_parts(spec: Spec, output: RunOutput) -> bool:
    """Whether an earlier run of this spec left a (data set, repetition, method) part, finished or failed.

    A run split by method (``--workers`` above the number of tasks) writes one part per method; a later
    run of ``"auto"`` granularity with fewer workers then resumes by method too, reusing those parts,
    instead of recomputing every task whole. The numbers are the same either way (the module docstring).
    """
    name = _method_part_name(spec)
    return any(output.part(name((d, r, m))).exists() for d, r in task_keys(spec) for m in spec.method_names)


def _run_options(
    spec: Spec, output: RunOutput | None, workers: int | None, scheduler: str | None, progress: bool
) -> dict:
    return {
        "fingerprint": spec.fingerprint,
        "on_error": lambda key, msg: _failed_task(key, msg, spec),
        "coords": _coords(spec),
        "output": output,
        "part_name": _part_name,
        "workers": workers,
        "scheduler": scheduler,
        "progress": progress,
        "desc": spec.name,
        "unit": "task",
    }


def _modules(spec: Spec) -> list[str]:
    """What a method task imports first: the runner, the methods and each base's module (e.g. the GP's)."""
    bases = [registry.BASES.get(str(t.get("kind"))) for _, t in spec.base_tables()]
    found = {registry.CLASSES[e.cls].module for e in bases if e is not None and e.cls in registry.CLASSES}
    return ["calibprob.compare.runner", "calibprob.compare.methods", *sorted(found)]


#: Relative cost of a calibrator kind, to start the costliest first (measured on a
#: 20 640-row set: sharp GP ~200 s, CV+ 43-58 s, GP-Beta 5-28 s, the closed-form ones < 0.2 s;
#: the sharp GP's cheaper variants and the refit kinds' groups are scaled below). Unlisted: 1.
_KIND_COST = {"sharp-gp": 200, "cv-plus": 50, "jackknife-plus": 50, "jackknife": 50, "gp-beta": 15}


def _method_cost(spec: Spec) -> Callable[[tuple], int]:
    """``key -> expected cost`` of a (data set, repetition, method) task, for longest-first scheduling."""

    def cost(key: tuple) -> int:
        m = next(m for m in spec.methods if m.name == key[2])
        scale = 0.5 if m.kind == "sharp-gp" and m.options.get("variant") not in (None, "full") else 1.0
        return int(_KIND_COST.get(m.kind, 1) * scale * 1000)

    return cost


def _run_by_method(
    spec: Spec, output: RunOutput | None, *, workers: int | None, scheduler: str | None, progress: bool
) -> dict:
    """Every (data set, repetition) as one base-fit stage plus one task per method; results per task.

    A (data set, repetition) finished whole by an earlier run (a ``task``-granularity
    part) is reused as it is; the rest resume per method.
    """
    done = finished_parts(task_keys(spec), output, _part_name, spec.fingerprint, _coords(spec))
    keys = [(d, r, m) for d, r in task_keys(spec) if (d, r) not in done for m in spec.method_names]
    options = _run_options(spec, output, workers, scheduler, progress)
    options.update(
        part_name=_method_part_name(spec),
        unit="method",
        prepare=fit_bases,
        split=(method_refit_tasks, run_method_refits),
        priority=_method_cost(spec),
        preload=_modules(spec),
    )
    by_method = execute(run_method_task, spec.to_dict(), keys, **options)
    for d, r in task_keys(spec):
        if (d, r) not in done:
            done[(d, r)] = assemble_task(spec, [by_method[(d, r, m)] for m in spec.method_names])
    return done


__all__ += ["failure_table"]


def _spec_data(spec: str | Path | Spec | dict) -> tuple[dict, str, str]:
    """A spec given as a path, a Spec or a dict: its dict, TOML text and root folder (not yet validated)."""
    if isinstance(spec, Spec):
        return spec.to_dict(), spec.source, spec.root
    if isinstance(spec, dict):
        return dict(spec), "", "."
    if isinstance(spec, (str, Path)):
        load_spec(spec)  # every check and message of a spec file (then read again below)
        path = Path(spec)
        return tomllib.loads(path.read_bytes().decode("utf-8-sig")), "", str(path.parent.resolve())
    raise TypeError(f"spec must be a path to a TOML spec, a parsed Spec or a dict; got {type(spec).__name__}.")


def _add_bases(data: dict, bases: dict) -> dict:
    """The spec dict with the user's models as ``kind = "python"`` bases (``[base]`` becomes ``[bases.<kind>]``)."""
    if not isinstance(bases, dict) or not bases:
        raise TypeError(f"bases must be a non-empty dict {{name: factory}}; got {type(bases).__name__}.")
    data = dict(data)
    tables = dict(data.pop("bases", None) or {})
    if "base" in data:
        base = data.pop("base")
        tables[base.get("kind", "base") if isinstance(base, dict) else "base"] = base
    taken = {safe_name(str(n)).lower(): n for n in tables}
    for name, factory in bases.items():
        if not isinstance(name, str) or not name.strip() or "/" in name:
            raise ValueError(f"bases: names must be non-empty strings without '/'; got {name!r}.")
        if safe_name(name).lower() in taken:
            raise ValueError(
                f"bases[{name!r}]: the spec already has a base {taken[safe_name(name).lower()]!r} of that name "
                "(names are compared ignoring case); rename one."
            )
        taken[safe_name(name).lower()] = name
        if isinstance(factory, dict):  # a base table with code in it, e.g. {"kind": "pymc-model", "factory": f}
            tables[name] = dict(factory)
            continue
        check_factory(factory, f"bases[{name!r}]")
        tables[name] = {"kind": "python", "factory": factory}
    data["bases"] = tables
    return data


def with_bases(spec: str | Path | Spec | dict, bases: dict) -> Spec:
    """``spec`` (a path, Spec or dict) with the user's models added as ``kind = "python"`` bases.

    A ``[base]`` spec becomes a ``[bases.*]`` one, its base named after its kind; its methods
    may then list ``bases = [...]`` naming the user's bases.
    """
    data, _, root = _spec_data(spec)
    return parse_spec(_add_bases(data, bases), root=root)


def run(
    spec: str | Path | Spec | dict,
    *,
    bases: dict | None = None,
    out: str | Path | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = False,
    granularity: str = "auto",
) -> xr.DataTree:
    """Run a comparison from Python, with your own models as bases.

    Parameters
    ----------
    spec : str, Path, Spec or dict
        A TOML spec file, a parsed :class:`~calibprob.compare.Spec`, or its dict.
    bases : dict of str to factory, optional
        Your models, added to the spec's bases under these names. A factory is a
        function ``(X_train, y_train) -> predict`` whose ``predict(X)`` returns a
        predictive Dataset (e.g. a PyMC model builder), or a model with ``fit(X, y)``
        and ``predict`` (copied per task), whose predictive is, in this order,
        ``predict(X, return_std=True)`` as a Normal, ``predict(X, quantiles=levels)``
        as a quantile function, ``predict(X)`` when it returns a Dataset, or else its
        point predictions with one σ, the RMS of its 5-fold out-of-fold residuals (see
        :mod:`calibprob.bases.user`). Every method runs on every base unless it
        lists ``bases``; a GP-only method must list the GP bases. A value may also be a
        base table with your code in it, e.g. ``{"kind": "pymc-model", "factory": f, "draws": 500}``
        (your PyMC model: ``calibprob.bases.pymc_model``).
    out : path, optional
        The results file (finished tasks kept in ``<out>.parts/`` for resuming, as with
        ``calibprob compare``). By default a temporary file, removed after loading.
    workers, scheduler, progress, granularity
        As in :func:`run_comparison`.

    Returns
    -------
    xarray.DataTree
        The results (scores, ``timing`` and ``ranking`` groups), loaded into memory.

    Raises
    ------
    SpecError
        A problem in the spec (e.g. a GP-only method running on your base).
    TypeError, ValueError
        A factory that is none of the above, or a name clash with the spec's bases.

    Notes
    -----
    A base whose fit or predict raises does not stop the others: its methods record the
    error (``failed_tasks`` lists them) and the task is retried by the next run on ``out``.
    The results never name code to run; the stored spec describes a Python base by its
    ``module:qualname`` only.

    References
    ----------
    The comparison-spec reference: :doc:`/spec`.

    Examples
    --------
    >>> import numpy as np
    >>> import calibprob
    >>> from calibprob import compare
    >>> def mine(X, y):
    ...     beta, *_ = np.linalg.lstsq(np.c_[np.ones(len(X)), X], y, rcond=None)
    ...     sd = np.std(y - np.c_[np.ones(len(X)), X] @ beta)
    ...     return lambda Xn: calibprob.normal(np.c_[np.ones(len(Xn)), Xn] @ beta, np.full(len(Xn), sd))
    >>> tree = compare.run({
    ...     "name": "demo", "datasets": ["diabetes"], "repetitions": 2,
    ...     "split": {"train": 0.6, "calibrate": 0.2, "test": 0.2},
    ...     "base": {"kind": "ols"},
    ...     "methods": {"b": {"kind": "base"}, "iso": {"kind": "isotonic", "extrapolate": True}},
    ... }, bases={"mine": mine})
    >>> tree["base"].values.tolist(), tree["calibrator"].values.tolist()
    (['ols', 'mine'], ['b', 'iso'])
    """
    if bases:
        spec = with_bases(spec, bases)
    else:
        data, source, root = _spec_data(spec)
        spec = spec if isinstance(spec, Spec) else parse_spec(data, source=source, root=root)
    if out is not None:
        return run_comparison(
            spec, out, workers=workers, scheduler=scheduler, progress=progress, granularity=granularity
        )
    with tempfile.TemporaryDirectory(prefix="calibprob-run-") as tmp:
        tree = run_comparison(
            spec,
            Path(tmp) / "results.nc",
            workers=workers,
            scheduler=scheduler,
            progress=progress,
            granularity=granularity,
        )
        return tree.load()
