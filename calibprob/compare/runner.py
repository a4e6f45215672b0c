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

import time
import traceback
from pathlib import Path

import numpy as np
import xarray as xr

from calibprob._validation import GROUP_COORD
from calibprob.compare.spec import Spec, parse_spec
from calibprob.runs import RunOutput, execute, failure_table, load_part, local_cluster, safe_name
from calibprob.runs.faults import check_method_memory

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
        return _load_table(d)
    if d.function is not None and d.n is not None:  # the validator requires n for synthetic entries
        return cds.make_synthetic(d.function, d.n, dim=d.dim, noise=d.noise, seed=seed, design=d.design)
    if d.groups is not None:  # the raw labels of a data column become the obs coordinate "group"
        return cds.load_dataset(d.name, groups=d.groups)
    return cds.load_dataset(d.name)


def _prepare(spec: Spec, dataset: str, repetition: int, scored: bool = False):
    """Split (and standardise) one task's data: ``(seed, {part: (X, y)})`` as the models see them.

    With ``scored=True`` also how to score: the back-transform of a
    ``target_transform`` spec (or None) and the test targets to score against.
    """
    from calibprob import datasets as cds

    seed = _task_seed(spec, dataset, repetition)
    data = _load(spec, dataset, seed)
    d = next(d for d in spec.datasets if d.name == dataset)
    split = d.split if d.split is not None else spec.split
    fractions = tuple(split[k] for k in ("train", "calibrate", "test") if k in split)
    parts = cds.train_calibrate_test_split(data, fractions, seed=seed)
    test_groups = _test_groups(parts["test"])
    # the Mondrian groups of each part (a spec's groups = "<column>"), taken before any transform
    groups = {k: v["group"].values for k, v in parts.items()} if "group" in data.coords else None
    # target_transform: the models see g(y) (standardised if asked); `back` maps their
    # predictions to the original scale, where every metric is computed against `y_test`
    y_test = parts["test"]["y"].values
    back = None
    if spec.target_transform is not None:
        from calibprob.transforms import transform_target

        parts = {
            k: v.assign(y=("obs", transform_target(v["y"].values, spec.target_transform, name=f"{dataset} {k} target")))
            for k, v in parts.items()
        }
        back = {"transform": spec.target_transform, "shift": 0.0, "scale": 1.0}
    if spec.standardize:
        scaler = cds.Standardizer().fit(parts["train"])
        parts = {k: scaler.transform(v) for k, v in parts.items()}
        if back is not None:
            back.update(shift=float(scaler.y_mean_), scale=float(scaler.y_scale_))
    arrays: dict = {k: (v["X"].values, v["y"].values) for k, v in parts.items()}
    if groups is not None:
        arrays["groups"] = groups
    if back is None:
        y_test = arrays["test"][1]
    if test_groups is not None:  # the conditional diagnostics of evaluate(groups=) (issue 30)
        y_test = xr.DataArray(y_test, dims="obs", coords={GROUP_COORD: ("obs", test_groups)})
    return (seed, arrays, back, y_test) if scored else (seed, arrays)


def _test_groups(test: xr.Dataset) -> np.ndarray | None:
    """The test part's group labels as text (a data set with a ``group`` coordinate along ``obs``), else None.

    Text, so that data sets with integer and with string labels combine into one netCDF-safe
    ``group`` coordinate of the results file.
    """
    if GROUP_COORD not in test.coords:
        return None
    return np.asarray([str(v) for v in test[GROUP_COORD].values])


def run_task(spec_dict: dict, dataset: str, repetition: int) -> xr.Dataset:
    """Run one (data set, repetition) task and return its scores.

    A pure function of its arguments (the spec travels as a dict), so Dask can
    ship it to any worker. A failing calibrator is recorded in ``error`` and
    does not stop the others. A failing base fails the task of a ``[base]``
    spec; with ``[bases.*]`` its methods record the error and the other bases
    are scored (the task still counts as failed, so the next run retries it).

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
        plus ``fit_time(calibrator)``, ``base_fit_time`` and ``error(calibrator)``;
        with ``[bases.*]`` every one of them also over ``base`` (each base fitted on the
        same split with the same seed, so it scores as in a spec of its own), and a
        base's ``diagnostics_`` (``rhat``, ``ess_bulk``, ``divergences`` of ``pymc-glm``)
        as variables of their own.

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
    spec = parse_spec(spec_dict)
    return _task_scores(spec, dataset, repetition, _fit_stage(spec, dataset, repetition))


def fit_bases(spec_dict: dict, dataset: str, repetition: int) -> dict:
    """The shared stage of a (data set, repetition): its split data and every base fitted once.

    The first stage of a run at method granularity (:func:`run_method_task` takes
    its result); a pure function of its arguments, so it travels to a Dask worker.

    Returns
    -------
    dict
        ``back`` and ``y_score`` (how to score) and ``fits``: base name (None for a
        ``[base]`` spec) -> ``(TaskContext, fit time)``, or the error message of a
        ``[bases.*]`` base whose fit raised.

    Raises
    ------
    Exception
        Whatever the one base of a ``[base]`` spec raised (its task then fails).
    """
    return _fit_stage(parse_spec(spec_dict), dataset, repetition)


def run_method_task(
    spec_dict: dict, fitted: dict, dataset: str, repetition: int, method: str, refits: list | None = None
) -> xr.Dataset:
    """One (data set, repetition, method) task on the bases of :func:`fit_bases`.

    Returns the slice of :func:`run_task`'s result for ``method`` (``calibrator = [method]``)
    with the task-level variables (``base_fit_time``, diagnostics, sizes);
    :func:`assemble_task` puts a task's slices back together, equal to :func:`run_task`.
    ``refits``: the results of :func:`run_method_refits` for every group of
    :func:`method_refit_tasks` (each refit then runs as a task of its own); the
    method is assembled from them, with the same scores, and its ``fit_time`` is
    the refits' time plus its own.
    """
    spec = parse_spec(spec_dict)
    if method not in spec.method_names:
        raise ValueError(
            f"method {method!r} is not in the spec; its methods are {spec.method_names}: pass one of them."
        )
    by_base: dict = {}
    for base_name, got, seconds in refits or ():
        done, total = by_base.get(base_name, ([], 0.0))
        # a failed group carries its exception; the method raises it where it is assembled
        merged = got if isinstance(got, BaseException) or isinstance(done, BaseException) else [*done, *got]
        by_base[base_name] = (merged, total + seconds)
    return _task_scores(spec, dataset, repetition, fitted, only=method, refits=by_base)


#: At most this many refit tasks per method: a jackknife's n refits are grouped.
MAX_REFIT_TASKS = 16


def _method_bases(spec: Spec, method: str) -> list:
    """``(base name, method)`` for every base the method runs on (None for a ``[base]`` spec)."""
    if spec.bases is None:
        return [(None, m) for m in spec.methods if m.name == method]
    return [(b, m) for b, _ in spec.base_tables() for m in spec.methods_on(b) if m.name == method]


def method_refit_tasks(spec_dict: dict, dataset: str, repetition: int, method: str) -> list[tuple]:
    """The refit groups of one method task that can run as tasks of their own: ``(base, group, groups)``.

    Jackknife, jackknife+ and CV+ (:func:`calibprob.compare.methods.count_refits`) refit
    a fresh base once per fold; their refits are split into at most :data:`MAX_REFIT_TASKS`
    groups per base, so the longest method of a repetition spreads over the workers. They
    need the task's split, not its fitted bases, so they run while the bases are fitted.
    Empty for every other kind.
    """
    from calibprob.compare.methods import count_refits, refits_its_base

    spec = parse_spec(spec_dict)
    out: list[tuple] = []
    for base_name, m in _method_bases(spec, method):
        if not refits_its_base(m.kind):  # nothing to split: no need to load the data
            continue
        n = count_refits(_refit_context(spec, dataset, repetition, base_name), m.kind, m.options)
        groups = min(n, MAX_REFIT_TASKS)
        out += [(base_name, i, groups) for i in range(groups)] if groups > 1 else []
    return out


def run_method_refits(
    spec_dict: dict, dataset: str, repetition: int, method: str, base_name, group: int, groups: int
) -> tuple:
    """Group ``group`` of ``groups`` of a method's refits (see :func:`method_refit_tasks`).

    Returns ``(base name, refits or the exception raised, seconds)``, handed to
    :func:`run_method_task` as one item of ``refits``.
    """
    from calibprob.compare.methods import count_refits, run_refits

    spec = parse_spec(spec_dict)
    m = next(m for b, m in _method_bases(spec, method) if b == base_name)
    ctx = _refit_context(spec, dataset, repetition, base_name)
    t0 = time.perf_counter()
    ks = np.array_split(np.arange(count_refits(ctx, m.kind, m.options)), groups)[group]
    return base_name, run_refits(ctx, m.kind, m.options, ks), time.perf_counter() - t0


def _refit_context(spec: Spec, dataset: str, repetition: int, base_name):
    """The task's :class:`TaskContext` for one base, unfitted (``base=None``): what a refit needs."""
    seed, arrays = _prepare(spec, dataset, repetition)
    table = dict(spec.base_tables())[base_name]
    return _context(spec, table, arrays, seed, None)


def _fit_stage(spec: Spec, dataset: str, repetition: int) -> dict:
    seed, arrays, back, y_score = _prepare(spec, dataset, repetition, True)
    fits: dict = {}
    for base_name, table in spec.base_tables():
        try:
            fits[base_name] = _fit_base(spec, table, arrays, seed)
        except Exception as err:
            if spec.bases is None:
                raise  # the one base failed: the task failed (recorded by the executor)
            fits[base_name] = f"base {base_name!r} failed: {type(err).__name__}: {err}\n{traceback.format_exc(limit=3)}"
    return {"arrays": arrays, "back": back, "y_score": y_score, "fits": fits}


def _task_scores(
    spec: Spec, dataset: str, repetition: int, fitted: dict, only: str | None = None, refits: dict | None = None
) -> xr.Dataset:
    """A task's scores from its fitted bases: every method, or ``only`` that one (its slice, with its ``refits``)."""
    arrays, back, y_score = fitted["arrays"], fitted["back"], fitted["y_score"]
    X_train, y_train = arrays["train"]
    y_cal = arrays.get("calibrate", (None, None))[1]
    named = spec.bases is not None
    names = spec.method_names if only is None else [only]
    pieces = []
    for base_name, _ in spec.base_tables():
        methods = [m for m in (spec.methods_on(base_name) if named else spec.methods) if m.name in names]
        fit = fitted["fits"][base_name]
        if isinstance(fit, str):
            # one base of several failed: its methods record why, the other bases' scores stand
            pieces.append(_failed_base(base_name, methods, fit))
            continue
        ctx, base_time = fit
        piece = _run_methods(spec, methods, ctx, back, y_score, (refits or {}).get(base_name))
        piece["base_fit_time"] = base_time
        diag = getattr(ctx.base, "diagnostics_", None)
        if isinstance(diag, xr.Dataset):  # a PyMC base's rhat, ess_bulk, divergences (report's diagnostics)
            for k, v in diag.data_vars.items():
                piece[k] = v.astype(float)
        pieces.append(piece.expand_dims(base=[base_name]) if named else piece)
    out = _merge_bases(spec, pieces, names) if named else pieces[0]
    errors = [e for e in out["error"].values.ravel() if e]
    out["n_train"] = len(y_train)
    out["n_calibrate"] = 0 if y_cal is None else len(y_cal)
    out["n_test"] = len(arrays["test"][1])
    out = out.expand_dims(dataset=[dataset], repetition=[repetition])
    if named:
        out = out.transpose("dataset", "repetition", "base", ...)
    # a calibrator that raised makes the task count as failed: it is stored (so the results
    # say why) and run again by the next run, never served as finished
    out.attrs["task_failed"] = int(any(errors))
    return out


def _fit_base(spec: Spec, table: dict, arrays: dict, seed: int):
    """Build and fit one base on the task's training part: its :class:`TaskContext` and fit time."""
    from calibprob.compare.methods import make_base

    # every base gets the task's seed and split, so a base of a [bases.*] spec scores exactly as
    # it would as the [base] of a spec of its own
    base = make_base(table, seed=seed)
    t0 = time.perf_counter()
    base.fit(*arrays["train"])
    base_time = time.perf_counter() - t0
    return _context(spec, table, arrays, seed, base), base_time


def _context(spec: Spec, table: dict, arrays: dict, seed: int, base):
    """The :class:`TaskContext` of a task's split for one base (fitted, or None for the refits)."""
    from calibprob.compare.methods import TaskContext

    X_train, y_train = arrays["train"]
    X_cal, y_cal = arrays.get("calibrate", (None, None))
    levels = None if spec.levels is None else np.asarray(spec.levels)
    return TaskContext(
        X_train,
        y_train,
        X_cal,
        y_cal,
        arrays["test"][0],
        base,
        table,
        levels,
        seed,
        tuple(spec.confidence_levels),
        groups=arrays.get("groups"),
    )


def _failed_base(base_name: str | None, methods, msg: str) -> xr.Dataset:
    """The piece of a base whose fit raised: every one of its methods carries the message."""
    names = [m.name for m in methods]
    ds = xr.Dataset({"error": ("calibrator", np.asarray([msg] * len(names)))}, coords={"calibrator": names})
    return ds.expand_dims(base=[base_name])


def _merge_bases(spec: Spec, pieces, names: list[str]) -> xr.Dataset:
    # merge, not concat: a method that skips a base (its `bases` list) is NaN there, with no error
    out = xr.merge(pieces, join="outer", compat="no_conflicts", combine_attrs="drop_conflicts")
    out = out.reindex(base=spec.base_names, calibrator=names)
    out["error"] = out["error"].fillna("").astype(str)
    return out


def _score(spec: Spec, kind: str, pred, y_score, groups=None) -> xr.Dataset:
    """Score one prediction the way its kind's registered output says: every metric, or intervals only."""
    from calibprob import registry
    from calibprob.metrics import evaluate, evaluate_intervals, is_interval_family

    output = registry.METHODS[kind].output if kind in registry.METHODS else "distribution"
    if is_interval_family(pred) != (output == "intervals"):
        got = "intervals" if is_interval_family(pred) else "a predictive distribution"
        raise TypeError(
            f"kind {kind!r} is registered with output {output!r} but returned {got}; fix its registration "
            "(calibprob.registry.register_method(..., output=...)) or its predict."
        )
    # test targets with group labels (a data set with groups): the per-group diagnostics too
    if isinstance(y_score, xr.DataArray) and GROUP_COORD in y_score.coords:
        groups = y_score[GROUP_COORD].values
    y_score = np.asarray(y_score)
    if output == "intervals":  # jackknife+, CV+, J+GP, FCP-GP: coverage, width and IAE only
        return evaluate_intervals(pred, y_score, spec.confidence_levels, groups=groups)
    return evaluate(pred, y_score, confidence_levels=spec.confidence_levels, groups=groups)


def _run_methods(spec: Spec, methods, ctx, back, y_score, refits: tuple | None = None) -> xr.Dataset:
    """Every method of ``methods`` on one fitted base: scores over ``calibrator``, fit times and errors.

    ``refits``: ``(refits, seconds)`` computed as separate tasks, for the one method of a method task.
    """
    import dataclasses

    from calibprob.compare.methods import METHOD_KINDS

    if refits is not None:  # a copy: the fitted stage is shared by every task on this worker
        ctx = dataclasses.replace(ctx, refits=refits[0])

    scores, times, errors = [], [], []
    for m in methods:
        t0 = time.perf_counter()
        try:
            check_method_memory(m.kind, m.options, ctx.base_spec.get("kind"), len(ctx.y_train))  # issue 28
            pred = METHOD_KINDS[m.kind].func(ctx, **m.options)
            if back is not None:  # fitted on g(y): score the law of y, on the original scale
                from calibprob.transforms import back_transform

                pred = back_transform(pred, **back)
            score = _score(spec, m.kind, pred, y_score, None if ctx.groups is None else ctx.groups["test"])
            errors.append("")
            scores.append(score.expand_dims(calibrator=[m.name]))
        except Exception as err:  # recorded, never fatal for the other methods
            errors.append(f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=3)}")
        times.append(time.perf_counter() - t0 + (0.0 if refits is None else refits[1]))
    names = [m.name for m in methods]
    if scores:
        # merge, not concat: interval-only methods lack the density metrics (NaN there)
        out = xr.merge(scores, join="outer", compat="no_conflicts", combine_attrs="drop_conflicts")
        out = out.reindex(calibrator=names)
    else:
        out = xr.Dataset(coords={"calibrator": names})
    out["fit_time"] = ("calibrator", np.asarray(times))
    out["error"] = ("calibrator", np.asarray(errors, dtype=object).astype(str))
    return out


def _load_table(d):
    """A CSV entry's data, after checking the file is the one the spec was loaded with."""
    from calibprob import datasets as cds
    from calibprob.compare.spec import file_sha256

    if d.sha256 is not None and file_sha256(d.path) != d.sha256:
        raise ValueError(
            f"data file {d.path!r} changed after the spec was loaded (its content hash differs); "
            "run the command again so the new content is checked and fingerprinted."
        )
    return cds.load_csv(
        d.path,
        d.target,
        features=d.features,
        exclude=d.exclude,
        one_hot=d.one_hot,
        dropna=d.dropna,
        subsample=d.subsample,
        seed=d.subsample_seed,
        groups=d.groups,
    )


def results_path_parts(out: str | Path) -> Path:
    """The folder holding one file per finished task, next to the results file."""
    out = Path(out)
    return out.with_name(out.name + ".parts")


def _part_name(key) -> str:
    dataset, repetition = key
    return f"{safe_name(dataset)}__rep{int(repetition):04d}"


def _method_part_name(spec: Spec):
    """File stem of a (data set, repetition, method) part; the method's index keeps sanitised names apart."""
    return lambda key: f"{_part_name(key[:2])}__m{spec.method_names.index(key[2]):03d}_{safe_name(key[2])}"


def _calibrators(spec: Spec, key) -> list[str]:
    # a (data set, repetition) key covers every calibrator; a (.., method) key its own one
    return spec.method_names if len(key) == 2 else [key[2]]


def _coords(spec: Spec):
    """The coordinates a part must carry: its data set, its repetition, its calibrators (and the bases)."""
    if spec.bases is None:
        return lambda key: {"dataset": key[0], "repetition": int(key[1]), "calibrator": _calibrators(spec, key)}
    return lambda key: {
        "dataset": key[0],
        "repetition": int(key[1]),
        "base": spec.base_names,
        "calibrator": _calibrators(spec, key),
    }


def _failed_task(key, msg: str, spec: Spec) -> xr.Dataset:
    dataset, repetition = key[:2]
    error: tuple
    coords: dict[str, object]
    names = _calibrators(spec, key)
    if spec.bases is None:
        error = ("calibrator", np.asarray([msg] * len(names)))
        coords = {"calibrator": names}
    else:
        error = (("base", "calibrator"), np.full((len(spec.bases), len(names)), msg))
        coords = {"base": spec.base_names, "calibrator": names}
    # a (data set, repetition, method) key failed alone (e.g. its worker was killed): its row says why, and
    # the task's other methods stand (issue 28); a whole-task key fails the task
    whole = {"task_error": ((), msg)} if len(key) == 2 else {}
    ds = xr.Dataset({**whole, "error": error}, coords=coords)
    return ds.expand_dims(dataset=[dataset], repetition=[repetition])


def assemble_task(spec: Spec, pieces) -> xr.Dataset:
    """One (data set, repetition)'s result from its per-method slices, as :func:`run_task` returns it.

    Variables over ``calibrator`` are merged (each slice holds one calibrator); the
    task-level ones (sizes, a base's diagnostics, ``base_fit_time``, ``task_error``)
    are the same in every slice but the timing, and are taken from the first slice
    that has them.

    Parameters
    ----------
    spec : Spec
    pieces : sequence of xarray.Dataset
        Results of :func:`run_method_task` (or of a failed method task) for one task.

    Returns
    -------
    xarray.Dataset
        Over every calibrator of the spec, in its order; attribute ``task_failed``
        is 1 when any slice failed.
    """
    import functools

    per_cal = [[v for v in p.data_vars if "calibrator" in p[v].dims] for p in pieces]
    scores = xr.merge(
        [p[v] for p, v in zip(pieces, per_cal, strict=True)], join="outer", compat="no_conflicts", combine_attrs="drop"
    )
    rest = functools.reduce(
        lambda a, b: a.combine_first(b), [p.drop_vars([*v, "calibrator"]) for p, v in zip(pieces, per_cal, strict=True)]
    )
    out = xr.merge([scores, rest], combine_attrs="drop").reindex(calibrator=spec.method_names)
    out["error"] = out["error"].fillna("").astype(str)
    if "task_error" in out:
        out["task_error"] = out["task_error"].fillna("").astype(str)
    if spec.bases is not None:
        out = out.transpose("dataset", "repetition", "base", ...)
    out.attrs["task_failed"] = int(any(int(p.attrs.get("task_failed", 0)) for p in pieces))
    return out


def _combine(spec: Spec, pieces) -> xr.DataTree:
    if not pieces:
        raise RuntimeError("no finished task to combine")
    clean = []
    for p in pieces:
        p = p.copy()
        p.attrs = {}
        if "task_error" not in p:
            p["task_error"] = (("dataset", "repetition"), np.full((1, 1), "", dtype=object).astype(str))
        else:
            p["task_error"] = p["task_error"].broadcast_like(p["repetition"]).broadcast_like(p["dataset"])
        clean.append(p)
    ds = xr.combine_by_coords(clean, combine_attrs="drop", join="outer")
    assert isinstance(ds, xr.Dataset)  # the parts are Datasets, so is their combination
    index: dict[str, object] = {
        "dataset": spec.dataset_names,
        "repetition": np.arange(spec.repetitions),
        "calibrator": spec.method_names,
    }
    if spec.bases is not None:
        index["base"] = spec.base_names
    ds = ds.reindex(index)
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
            # never names code to run: a python base's `entry` is left out (reading the file imports nothing)
            "spec": spec.results_text(),
            "spec_fingerprint": spec.fingerprint,
            "repetitions": spec.repetitions,
            "calibprob_version": __version__,
            "title": f"calibprob comparison: {spec.name}",
        }
    )
    from calibprob.compare.ranking import rank_results

    # the ranking is derived from the scores (recomputed by `calibprob report`); stored so the file
    # answers "which is best" on its own, with the rule in its attributes
    return xr.DataTree.from_dict({"/": metrics, "timing": timing, "ranking": rank_results(metrics, spec.rank_by)})


def combine_parts(spec: Spec, parts: Path) -> xr.DataTree:
    """Assemble finished task files into the results DataTree.

    Only parts that belong to ``spec`` are used: each is checked for the spec's
    fingerprint, its own key and coordinates, and its checksum (failed tasks
    are included, so the results say why they failed). A task run at method
    granularity is assembled from its per-method parts when every one is there.

    The root Dataset holds the metrics over (dataset, calibrator, repetition[,
    confidence_level, ...]); the ``timing`` group holds per-task fit times,
    which differ between runs and so are kept apart from the scores; the
    ``ranking`` group holds :func:`calibprob.compare.ranking.rank_results`
    by the spec's ``rank_by``.

    Parameters
    ----------
    spec : Spec
    parts : Path
        The ``<out>.parts/`` folder written by :func:`run_comparison`.

    Returns
    -------
    xarray.DataTree
        Root: the scores; group ``timing``: fit times; group ``ranking``: the ranking.

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
    ['timing', 'ranking']
    >>> tmp.cleanup()
    """
    from calibprob.runs import inside

    parts = Path(parts)
    coords, by_method = _coords(spec), _method_part_name(spec)

    def part(key, name):
        return load_part(inside(parts, name + ".nc"), fingerprint=spec.fingerprint, key=key, coords=coords(key))[0]

    pieces = []
    for key in task_keys(spec):
        ds = part(key, _part_name(key))
        if ds is None:  # a run at method granularity: the task's per-method parts, when all are there
            slices = [part((*key, m), by_method((*key, m))) for m in spec.method_names]
            ds = None if any(s is None for s in slices) else assemble_task(spec, slices)
        if ds is not None:
            pieces.append(ds)
    return _combine(spec, pieces)


def failed_tasks(results: xr.Dataset) -> list[tuple[str, str]]:
    """``(task, message)`` for every failed task and failed calibrator of a results Dataset.

    Parameters
    ----------
    results : xarray.Dataset
        The root of a results file (:func:`calibprob.compare.load_results`).

    Returns
    -------
    list of (str, str)
        ``task`` is ``"dataset/rep N"`` (a whole task) or ``"dataset/rep N/calibrator"``
        (``"dataset/rep N/base/calibrator"`` with several bases).
    """
    rows = []
    for d in results["dataset"].values:
        for r in results["repetition"].values:
            te = str(results["task_error"].sel(dataset=d, repetition=r).values) if "task_error" in results else ""
            if te:
                rows.append((f"{d}/rep {int(r)}", te))
                continue
            if "error" in results:
                bases = results["base"].values if "base" in results["error"].dims else [None]
                for b in bases:
                    for c in results["calibrator"].values:
                        sel = {"dataset": d, "repetition": r, "calibrator": c, **({} if b is None else {"base": b})}
                        e = str(results["error"].sel(sel).values)
                        if e:
                            rows.append((f"{d}/rep {int(r)}/{c if b is None else f'{b}/{c}'}", e))
    return rows


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
        :data:`MAX_REFIT_TASKS` per method); the scores are identical to ``"task"``'s.
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
    mode = _granularity(granularity, spec, workers)
    keys = task_keys(spec)
    with RunOutput(out, wait=wait) as output:
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


def _run_options(spec: Spec, output, workers, scheduler, progress) -> dict:
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
    from calibprob import registry

    bases = [registry.BASES.get(str(t.get("kind"))) for _, t in spec.base_tables()]
    found = {registry.CLASSES[e.cls].module for e in bases if e is not None and e.cls in registry.CLASSES}
    return ["calibprob.compare.runner", "calibprob.compare.methods", *sorted(found)]


#: Relative cost of a calibrator kind, to start the costliest first (measured in issue 21 on a
#: 20 640-row set: sharp GP ~200 s, CV+ 43-58 s, GP-Beta 5-28 s, the closed-form ones < 0.2 s;
#: the sharp GP's cheaper variants and the refit kinds' groups are scaled below). Unlisted: 1.
_KIND_COST = {"sharp-gp": 200, "cv-plus": 50, "jackknife-plus": 50, "jackknife": 50, "gp-beta": 15}


def _method_cost(spec: Spec):
    """``key -> expected cost`` of a (data set, repetition, method) task, for longest-first scheduling."""

    def cost(key) -> int:
        m = next(m for m in spec.methods if m.name == key[2])
        scale = 0.5 if m.kind == "sharp-gp" and m.options.get("variant") not in (None, "full") else 1.0
        return int(_KIND_COST.get(m.kind, 1) * scale * 1000)

    return cost


def _run_by_method(spec: Spec, output, *, workers, scheduler, progress) -> dict:
    """Every (data set, repetition) as one base-fit stage plus one task per method; results per task.

    A (data set, repetition) finished whole by an earlier run (a ``task``-granularity
    part) is reused as it is; the rest resume per method.
    """
    from calibprob.runs import finished_parts as _finished_parts

    done = _finished_parts(task_keys(spec), output, _part_name, spec.fingerprint, _coords(spec))
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


def _spec_data(spec) -> tuple[dict, str, str]:
    """A spec given as a path, a Spec or a dict: its dict, TOML text and root folder (not yet validated)."""
    import tomllib

    from calibprob.compare.spec import load_spec

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
    from calibprob.compare.user_base import check_factory
    from calibprob.runs import safe_name

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
        check_factory(factory, f"bases[{name!r}]")
        taken[safe_name(name).lower()] = name
        tables[name] = {"kind": "python", "factory": factory}
    data["bases"] = tables
    return data


def with_bases(spec, bases: dict) -> Spec:
    """``spec`` (a path, Spec or dict) with the user's models added as ``kind = "python"`` bases.

    A ``[base]`` spec becomes a ``[bases.*]`` one, its base named after its kind; its methods
    may then list ``bases = [...]`` naming the user's bases.
    """
    data, _, root = _spec_data(spec)
    return parse_spec(_add_bases(data, bases), root=root)


def run(
    spec,
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
        :mod:`calibprob.compare.user_base`). Every method runs on every base unless it
        lists ``bases``; a GP-only method must list the GP bases.
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
    import tempfile

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
