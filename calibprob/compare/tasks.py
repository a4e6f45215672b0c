"""The tasks of a comparison: one per (data set, repetition), or one per method of it.

A task splits its data set (:func:`_prepare`: the split, the target transform, the standardisation, the
groups), fits each base once on the training part (:func:`fit_bases`) and runs every calibrator on it
(:func:`run_task`), scoring each prediction with :func:`calibprob.evaluate`. Each function is a pure function
of its arguments (the spec travels as a dict), so Dask can ship it to any worker; running them is
``calibprob.compare.runner``, putting their results together ``calibprob.compare.assembly``.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Sequence
from typing import Any, Literal, cast, overload

import numpy as np
import pandas as pd
import xarray as xr

from calibprob import datasets as cds
from calibprob import registry
from calibprob._core.validation import GROUP_COORD
from calibprob.compare.feedback import GRID_SETS, feedback_arrays, grid_set_scores
from calibprob.compare.methods import (
    EXACT_INTERVALS,
    METHOD_KINDS,
    TaskContext,
    count_refits,
    make_base,
    refits_its_base,
    run_refits,
    scalable_form,
    share_base_predictions,
    task_weights,
)
from calibprob.compare.online import expanding_base_predictions, sliding_base_predictions
from calibprob.compare.spec.data import read_time_column, time_split_counts
from calibprob.compare.spec.model import METHOD_FALLBACKS, DatasetSpec, MethodSpec, Spec, file_sha256
from calibprob.compare.spec.parsing import parse_spec
from calibprob.compare.spec.shift import draw_shifted, oracle_weights
from calibprob.datasets import loaders as cds_loaders
from calibprob.metrics import covariate_shift, evaluate, evaluate_intervals, is_interval_family
from calibprob.runs.faults import choose_gp
from calibprob.transforms import back_transform, transform_target


def gp_choices(spec: Spec) -> dict:
    """What each ``kind = "gp"`` base runs as on each data set: ``{(data set, base name): line}``.

    The choice (``calibprob.runs.faults.choose_gp``) depends on the training rows only, the same in
    every repetition (the split's fractions are fixed), so the first repetition's split decides it.
    Empty when no base is ``kind = "gp"``; printed in the run's header and stored in the results.

    Parameters
    ----------
    spec : Spec

    Returns
    -------
    dict
        ``(data set name, base name or None) -> line`` for every ``kind = "gp"`` base.

    Examples
    --------
    >>> from calibprob.compare import gp_choices, parse_spec
    >>> spec = parse_spec({"name": "g", "split": {"train": 0.5, "test": 0.5},
    ...                    "datasets": [{"name": "f", "function": "forrester", "n": 40}],
    ...                    "base": {"kind": "gp"}, "methods": {"raw": {"kind": "base"}}})
    >>> gp_choices(spec)
    {('f', None): 'exact GP (20 training rows <= 5060)'}
    """
    tables = [(b, t) for b, t in spec.base_tables() if t.get("kind") == "gp"]
    out: dict = {}
    for d in spec.datasets if tables else ():
        _, arrays = _prepare(spec, d.name, 0)
        for base_name, table in tables:
            out[(d.name, base_name)] = choose_gp(table, len(arrays["train"][1]))[1]
    return out


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
    Data sets outermost, then repetitions:

    >>> from calibprob.compare import parse_spec, task_keys
    >>> spec = parse_spec({"name": "two", "split": {"train": 0.5, "test": 0.5}, "repetitions": 2,
    ...                    "datasets": [{"name": "a", "function": "forrester", "n": 20},
    ...                                 {"name": "b", "function": "branin", "n": 20}],
    ...                    "base": {"kind": "ols"}, "methods": {"raw": {"kind": "base"}}})
    >>> task_keys(spec)
    [('a', 0), ('a', 1), ('b', 0), ('b', 1)]
    """
    return [(d.name, r) for d in spec.datasets for r in range(spec.repetitions)]


def _task_seed(spec: Spec, dataset: str, repetition: int) -> int:
    # Independent of execution order and worker: a function of the spec seed and the task only.
    # a shifted twin shares its declared entry's seed: the same split, the test part drawn under the tilt
    # (and so do the runs of a feedback entry at each lambda: the same training rows)
    d = next(d for d in spec.datasets if d.name == dataset)
    idx = next(i for i, e in enumerate(spec.datasets) if (e.source or e.name) == (d.source or d.name))
    return int(np.random.SeedSequence([spec.seed, idx, repetition]).generate_state(1)[0])


def _load(spec: Spec, dataset: str, seed: int) -> xr.Dataset:
    d = next(d for d in spec.datasets if d.name == dataset)
    data = _load_rows(spec, d, seed)
    if d.permute is not None:  # the rows in a random order: a time split's exchangeable control
        data = data.isel(obs=row_permutation(data.sizes["obs"], d.permute))
    return data


def row_permutation(n: int, seed: int) -> np.ndarray:
    """The order of a data set's ``permute = seed`` rows: ``numpy.random.RandomState(seed).permutation(n)``.

    The legacy generator, so that ``permute = 98765`` gives the permutation of Barber et al.'s (2023) code
    (``RandomState(98765).choice(n, n, replace=False)`` draws this same permutation).
    """
    return np.random.RandomState(seed).permutation(n)


def _load_rows(spec: Spec, d: DatasetSpec, seed: int) -> xr.Dataset:
    if d.path is not None:
        return _load_table(d)
    if d.function is not None and d.n is not None:  # the validator requires n for synthetic entries
        return cds.make_synthetic(d.function, d.n, dim=d.dim, noise=d.noise, seed=seed, design=d.design)
    if d.groups is not None:  # the raw labels of a data column become the obs coordinate "group"
        return cds.load_dataset(d.source or d.name, groups=d.groups)
    return cds.load_dataset(d.source or d.name)


@overload
def _prepare(spec: Spec, dataset: str, repetition: int, scored: Literal[False] = False) -> tuple[int, dict]: ...


@overload
def _prepare(
    spec: Spec, dataset: str, repetition: int, scored: Literal[True]
) -> tuple[int, dict, dict | None, np.ndarray | xr.DataArray]: ...


def _prepare(
    spec: Spec, dataset: str, repetition: int, scored: bool = False
) -> tuple[int, dict] | tuple[int, dict, dict | None, np.ndarray | xr.DataArray]:
    """Split (and standardise) one task's data: ``(seed, {part: (X, y)})`` as the models see them.

    With ``scored=True`` also how to score: the back-transform of a
    ``target_transform`` spec (or None) and the test targets to score against.
    """
    seed = _task_seed(spec, dataset, repetition)
    data = _load(spec, dataset, seed)
    d = next(d for d in spec.datasets if d.name == dataset)
    if d.feedback is not None:  # a designed test row: not split (calibprob.compare.feedback)
        designed = feedback_arrays(d, data, seed)
        return (seed, designed, None, designed["test"][1]) if scored else (seed, designed)
    split = d.split if d.split is not None else spec.split
    fractions = tuple(split[k] for k in ("train", "calibrate", "test") if k in split)
    if split.get("kind") == "time":
        parts, past_order = _time_parts(data, split, dataset, seed, repetition)
    else:
        parts = cds.train_calibrate_test_split(data, fractions, seed=seed, stratify=_stratify_labels(d, split, data))
    parts, oracle = _shifted_parts(d, parts, seed)
    test_groups = _test_groups(parts["test"])
    # a base that takes the data as the user has them gets each part's raw rows and raw targets,
    # picked by the split's obs ids; specs without such a base compute nothing more
    frames = _frames(spec, d, data, parts) if _wants_frames(spec) else None
    # the Mondrian groups of each part (a spec's groups = "<column>"), taken before any transform
    groups = {k: v["group"].values for k, v in parts.items()} if "group" in data.coords else None
    # target_transform: the models see g(y) (standardised if asked); `back` maps their
    # predictions to the original scale, where every metric is computed against `y_test`
    y_test = parts["test"]["y"].values
    back = None
    if spec.target_transform is not None:
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
    if frames is not None:
        arrays["frames"] = frames
    if split.get("kind") == "time":  # the test part is a stream: online methods see its outcomes one by one
        arrays["time_split"] = True
        # how the rows before the horizon go back into time order (TaskContext.past, built only when a method asks:
        # an array allocated here would move later allocations and, through BLAS alignment, other results' last bits)
        arrays["past_order"] = past_order
        if split.get("refit_every"):
            arrays["refit_every"] = int(split["refit_every"])
            arrays["slide"] = bool(split.get("slide", False))
        if d.time is not None:  # the horizon's own times (dates on the report's coverage over time)
            rows = pd.Index(data["obs"].values).get_indexer(parts["test"]["obs"].values)
            if "file_row" in data.coords:  # dropna dropped lines of the file: each observation's own line
                rows = data["file_row"].values[rows]
            arrays["horizon_times"] = read_time_column(cast(str, d.path), d.time)[rows]  # time is a CSV entry's key
    if oracle is not None:
        arrays["oracle_weights"] = oracle
    if back is None:
        y_test = arrays["test"][1]
    if test_groups is not None:  # the conditional diagnostics of evaluate(groups=): coverage per group
        y_test = xr.DataArray(y_test, dims="obs", coords={GROUP_COORD: ("obs", test_groups)})
    return (seed, arrays, back, y_test) if scored else (seed, arrays)


def _time_parts(
    data: xr.Dataset, split: dict, dataset: str, seed: int, repetition: int
) -> tuple[dict, np.ndarray | None]:
    """A time split's parts: consecutive stretches of rows in the data's order (train, burn-in, horizon).

    The same for every repetition (only the bases' seeds differ), unless ``shuffle``: the train and
    burn-in rows are then drawn at random from their union with the task's seed (``shuffle = true``)
    or with the legacy generator seeded ``shuffle + repetition`` (:func:`legacy_train_rows`), each
    part kept in time order. The horizon keeps its row order, the stream an online method is scored on. Also
    returns the order that sorts the train rows followed by the burn-in rows back into time order
    (the past, for methods that refit on every earlier row): None when they are in order already.
    """
    sizes = time_split_counts(split, data.sizes["obs"], dataset)
    edges = np.cumsum([0, *sizes])
    names = ("train", "calibrate", "test")
    shuffle = split.get("shuffle", False)
    if shuffle is False:  # slices: the same views (and so the same bits downstream) as before
        return {k: data.isel(obs=slice(edges[i], edges[i + 1])) for i, k in enumerate(names)}, None
    if shuffle is True:
        past = np.random.default_rng(seed).permutation(edges[2])
    else:  # an integer: the authors' own draw (bool is an int: True is handled above)
        train = legacy_train_rows(edges[2], sizes[0], shuffle + repetition)
        past = np.concatenate([train, np.setdiff1d(np.arange(edges[2]), train)])
    rows = {"train": np.sort(past[: sizes[0]]), "calibrate": np.sort(past[sizes[0] :])}
    order = np.argsort(np.concatenate([rows["train"], rows["calibrate"]]), kind="stable")
    parts = {k: data.isel(obs=v) for k, v in rows.items()}
    parts["test"] = data.isel(obs=slice(edges[2], edges[3]))
    return parts, order


def legacy_train_rows(n: int, size: int, seed: int) -> np.ndarray:
    """The rows a ``shuffle = s`` time split trains on: ``RandomState(seed).choice(n, size, replace=False)``.

    Xu & Xie's (2021) split conformal ("ICP", hamrel-cxu/EnbPI ``PI_class_EnbPI.compute_PIs_ICP_online``)
    trains on ``np.random.choice(n, n // 2, replace=False)`` right after ``np.random.seed(98765 + itrial)``
    and calibrates on the other rows; the legacy generator's ``choice`` without replacement is the head of
    ``permutation(n)``, drawn here so that ``shuffle = 98765`` gives trial ``r`` of their results file in
    repetition ``r``.
    """
    return np.random.RandomState(seed).permutation(n)[:size]


def _shifted_parts(d: DatasetSpec, parts: dict, seed: int) -> tuple[dict, tuple | None]:
    """A shifted twin's test part drawn under its tilt, and the oracle ratio at the calibration and test rows.

    On raw (unstandardised) columns, before any transform (``calibprob.compare.spec.shift``). The declared
    (unshifted) entry's oracle ratio is 1 everywhere; an entry without ``shift`` has none (None).
    """
    if d.shift is None or "calibrate" not in parts:
        return parts, None
    if d.source is None:
        return parts, (np.ones(parts["calibrate"].sizes["obs"]), np.ones(parts["test"].sizes["obs"]))
    parts = {**parts, "test": parts["test"].isel(obs=draw_shifted(parts["test"], d.shift, seed))}
    return parts, (oracle_weights(parts["calibrate"], d.shift), oracle_weights(parts["test"], d.shift))


def _shift_diagnostic(spec: Spec, dataset: str, arrays: dict, seed: int) -> xr.Dataset | None:
    """The covariate-shift diagnostic of a data set declared with ``shift`` (and its twin): AUC, p-value."""
    d = next(d for d in spec.datasets if d.name == dataset)
    if d.shift is None or "calibrate" not in arrays:
        return None
    X_cal, X_test = arrays["calibrate"][0], arrays["test"][0]
    return covariate_shift(X_cal, X_test, n_permutations=SHIFT_PERMUTATIONS, random_state=seed)


#: Label shuffles of a spec's shift diagnostic per task (its p-value's resolution is 1/(1 + this)).
SHIFT_PERMUTATIONS = 50


def _wants_frames(spec: Spec) -> bool:
    """Whether a base of the spec takes the data as the user has them (:data:`calibprob.registry.FRAME_BASES`)."""
    return any(t.get("kind") in registry.FRAME_BASES for _, t in spec.base_tables())


def _frames(spec: Spec, d: Any, data: xr.Dataset, parts: dict) -> dict:  # d: a DatasetSpec (see _load_table)
    """``{part: (DataFrame, y)}``: each part's rows as the user has them (indexed by their obs ids) and raw targets.

    The rows are the data set's columns before any encoding (text kept, the group column included), read
    again from the same source with the same row selection; their numeric columns are checked against the
    loaded features, so a misaligned read fails here instead of fitting a model on the wrong rows.
    """
    if d.path is not None:
        raw = cds_loaders.csv_frame(
            d.path, d.target, features=d.features, exclude=d.exclude, dropna=d.dropna,
            subsample=d.subsample, seed=d.subsample_seed, groups=d.groups,
        )  # fmt: skip
    elif d.function is not None:
        raw = pd.DataFrame(data["X"].values, columns=[str(f) for f in data["feature"].values])
    else:
        raw = cds_loaders.dataset_frame(d.name)
    features = [str(f) for f in data["feature"].values]
    same = [c for c in raw.columns if c in features and pd.api.types.is_numeric_dtype(raw[c])]
    X = data["X"].values
    # the loaded rows in their (possibly permuted) order; the obs ids below stay the file's positions
    seen = raw if d.permute is None else raw.iloc[row_permutation(len(raw), d.permute)]
    if len(raw) != data.sizes["obs"] or any(
        not np.array_equal(seen[c].to_numpy(float), X[:, features.index(c)]) for c in same
    ):
        raise RuntimeError(f"data set {d.name!r}: its raw rows do not match the loaded rows; please report this.")
    out = {}
    for k, v in parts.items():
        ids = np.asarray(v["obs"].values)
        out[k] = (raw.iloc[ids].set_index(pd.Index(ids, name="obs")), np.asarray(v["y"].values, dtype=float))
    return out


def _base_parts(arrays: dict, table: dict) -> dict:
    """The task's parts as base ``table`` sees them: ``{part: (X, y)}`` (raw DataFrames for a frame base)."""
    if table.get("kind") in registry.FRAME_BASES:
        return arrays["frames"]
    return {k: arrays[k] for k in ("train", "calibrate", "test") if k in arrays}


def _test_groups(test: xr.Dataset) -> np.ndarray | None:
    """The test part's group labels as text (a data set with a ``group`` coordinate along ``obs``), else None.

    Text, so that data sets with integer and with string labels combine into one netCDF-safe
    ``group`` coordinate of the results file.
    """
    if GROUP_COORD not in test.coords:
        return None
    return np.asarray([str(v) for v in test[GROUP_COORD].values])


def _stratify_labels(d: DatasetSpec, split: dict, data: xr.Dataset) -> np.ndarray | None:
    """The labels of the split's ``stratify`` column (None without one), one per row of ``data``.

    The data set's own ``groups`` column is already the ``group`` coordinate; another column is
    read by loading the same rows again with that column as the groups (same file, same
    ``dropna``/``subsample``, so the same rows in the same order).
    """
    column = split.get("stratify")
    if column is None:
        return None
    if column == d.groups:
        return data["group"].values
    again = _load_table(dataclasses.replace(d, groups=column)) if d.path is not None else None
    if again is None:
        again = cds.load_dataset(d.name, groups=column)
    return again["group"].values


def _load_table(d: Any) -> xr.Dataset:  # d: a CSV entry's DatasetSpec, whose optional fields the parser set
    """A CSV entry's data, after checking the file is the one the spec was loaded with."""
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
        base's ``diagnostics_`` (``rhat``, ``ess_bulk``, ``divergences`` of ``pymc-linear``)
        as variables of their own.

    References
    ----------
    The comparison-spec reference: :doc:`/spec`.

    Examples
    --------
    One repetition of an OLS base scored as it is, on a split without a calibration part:

    >>> from calibprob.compare import parse_spec, run_task
    >>> spec = parse_spec({"name": "one", "split": {"train": 0.5, "test": 0.5},
    ...                    "datasets": [{"name": "forrester", "function": "forrester", "n": 40, "noise": 0.1}],
    ...                    "base": {"kind": "ols"}, "methods": {"raw": {"kind": "base"}}})
    >>> scores = run_task(spec.to_dict(), "forrester", 0)
    >>> dict(scores["crps"].sizes), int(scores["n_test"].item())
    ({'dataset': 1, 'repetition': 1, 'calibrator': 1}, 20)
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
        ``[base]`` spec) -> ``(TaskContext, fit time, prediction time)``, or the error
        message of a ``[bases.*]`` base whose fit raised. The context carries the base's
        predictives on the task's parts, computed here once (``TaskContext.shared``,
        :func:`~calibprob.compare.methods.share_base_predictions`), so no method task
        asks the base for them again.

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
    a fresh base once per fold; their refits are split into at most ``MAX_REFIT_TASKS``
    groups per base, so the longest method of a repetition spreads over the workers. They
    need the task's split, not its fitted bases, so they run while the bases are fitted.
    Empty for every other kind.
    """
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
    spec_dict: dict, dataset: str, repetition: int, method: str, base_name: str | None, group: int, groups: int
) -> tuple:
    """Group ``group`` of ``groups`` of a method's refits (see :func:`method_refit_tasks`).

    Returns ``(base name, refits or the exception raised, seconds)``, handed to
    :func:`run_method_task` as one item of ``refits``.
    """
    spec = parse_spec(spec_dict)
    m = next(m for b, m in _method_bases(spec, method) if b == base_name)
    ctx = _refit_context(spec, dataset, repetition, base_name)
    t0 = time.perf_counter()
    ks = np.array_split(np.arange(count_refits(ctx, m.kind, m.options)), groups)[group]
    options = m.options
    try:  # refused at its default: the refits of its scalable form (the method task decides the same)
        ctx, options, _ = scalable_form(ctx, m.kind, m.options, m.strict)
    except (TimeoutError, MemoryError):
        pass  # strict, or no scalable form: run_refits refuses it, and the method records why
    return base_name, run_refits(ctx, m.kind, options, ks), time.perf_counter() - t0


def _refit_context(spec: Spec, dataset: str, repetition: int, base_name: str | None) -> TaskContext:
    """The task's :class:`TaskContext` for one base, unfitted (``base=None``): what a refit needs."""
    seed, arrays = _prepare(spec, dataset, repetition)
    table = _chosen_table(dict(spec.base_tables())[base_name], arrays)
    return _context(spec, table, arrays, seed, None)


def _chosen_table(table: dict, arrays: dict) -> dict:
    """The base table as it runs on the task's training rows: ``kind = "gp"`` exact or sparse (:func:`choose_gp`)."""
    return choose_gp(table, len(arrays["train"][1]))[0]


def _fit_stage(spec: Spec, dataset: str, repetition: int) -> dict:
    seed, arrays, back, y_score = _prepare(spec, dataset, repetition, True)
    fits: dict = {}
    for base_name, table in spec.base_tables():
        try:
            ctx, base_time = _fit_base(spec, table, arrays, seed)
            # --- shared base predictions (issue 37): once per (data set, repetition, base) ---
            t0 = time.perf_counter()
            ctx = share_base_predictions(ctx, spec.methods_on(base_name) if spec.bases is not None else spec.methods)
            if arrays.get("refit_every"):  # a time split's expanding (or sliding) window: the base refitted
                refit = sliding_base_predictions if arrays.get("slide") else expanding_base_predictions
                ctx = refit(ctx, arrays["refit_every"])
            fits[base_name] = (ctx, base_time, time.perf_counter() - t0)
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
    for base_name, table in spec.base_tables():
        methods = [m for m in (spec.methods_on(base_name) if named else spec.methods) if m.name in names]
        fit = fitted["fits"][base_name]
        if isinstance(fit, str):
            # one base of several failed: its methods record why, the other bases' scores stand
            pieces.append(_failed_base(base_name, methods, fit))
            continue
        ctx, base_time, predict_time = fit
        # a frame base predicts on the raw target's scale already: nothing to map back
        base_back = None if table.get("kind") in registry.FRAME_BASES else back
        piece = _run_methods(spec, methods, ctx, base_back, y_score, (refits or {}).get(base_name))
        piece["base_fit_time"] = base_time
        piece["base_predict_time"] = predict_time
        diag = getattr(ctx.base, "diagnostics_", None)
        if isinstance(diag, xr.Dataset):  # a PyMC base's rhat, ess_bulk, divergences (report's diagnostics)
            for k, v in diag.data_vars.items():
                piece[k] = v.astype(float)
        pieces.append(piece.expand_dims(base=[base_name]) if named else piece)
    out = _merge_bases(spec, pieces, names) if named else pieces[0]
    if "horizon_times" in arrays and "time" in out.dims:  # the step along the horizon -> the row's own time
        out["time_stamp"] = ("time", arrays["horizon_times"])
    errors = [e for e in out["error"].values.ravel() if e]
    out["n_train"] = len(y_train)
    out["n_calibrate"] = 0 if y_cal is None else len(y_cal)
    out["n_test"] = len(arrays["test"][1])
    shift = _shift_diagnostic(spec, dataset, arrays, _task_seed(spec, dataset, repetition))
    if shift is not None:
        out = out.assign({k: v for k, v in shift.data_vars.items() if k in ("shift_auc", "shift_pvalue", "shift_ess")})
    out = out.expand_dims(dataset=[dataset], repetition=[repetition])
    if named:
        out = out.transpose("dataset", "repetition", "base", ...)
    # a calibrator that raised makes the task count as failed: it is stored (so the results
    # say why) and run again by the next run, never served as finished
    out.attrs["task_failed"] = int(any(errors))
    return out


def _fit_base(spec: Spec, table: dict, arrays: dict, seed: int) -> tuple[TaskContext, float]:
    """Build and fit one base on the task's training part: its :class:`TaskContext` and fit time."""
    # every base gets the task's seed and split, so a base of a [bases.*] spec scores exactly as
    # it would as the [base] of a spec of its own
    table = _chosen_table(table, arrays)
    base = make_base(table, seed=seed)
    t0 = time.perf_counter()
    base.fit(*_base_parts(arrays, table)["train"])
    base_time = time.perf_counter() - t0
    return _context(spec, table, arrays, seed, base), base_time


def _context(spec: Spec, table: dict, arrays: dict, seed: int, base: Any) -> TaskContext:
    """The :class:`TaskContext` of a task's split for one base (fitted, or None for the refits)."""
    parts = _base_parts(arrays, table)
    X_train, y_train = parts["train"]
    X_cal, y_cal = parts.get("calibrate", (None, None))
    levels = None if spec.levels is None else np.asarray(spec.levels)
    return TaskContext(
        X_train,
        y_train,
        X_cal,
        y_cal,
        parts["test"][0],
        base,
        table,
        levels,
        seed,
        tuple(spec.confidence_levels),
        groups=arrays.get("groups"),
        max_method_minutes=spec.max_method_minutes,
        y_stream=parts["test"][1] if arrays.get("time_split") else None,
        past_order=arrays.get("past_order"),
        oracle_weights=arrays.get("oracle_weights"),
        feedback=arrays.get("feedback"),
    )


def _failed_base(base_name: str | None, methods: Sequence[MethodSpec], msg: str) -> xr.Dataset:
    """The piece of a base whose fit raised: every one of its methods carries the message."""
    names = [m.name for m in methods]
    ds = xr.Dataset({"error": ("calibrator", np.asarray([msg] * len(names)))}, coords={"calibrator": names})
    return ds.expand_dims(base=[base_name])


def _merge_bases(spec: Spec, pieces: list[xr.Dataset], names: list[str]) -> xr.Dataset:
    # merge, not concat: a method that skips a base (its `bases` list) is NaN there, with no error
    out = xr.merge(pieces, join="outer", compat="no_conflicts", combine_attrs="drop_conflicts")
    out = out.reindex(base=spec.base_names, calibrator=names)
    out["error"] = out["error"].fillna("").astype(str)
    if "ran_as" in out:
        out["ran_as"] = out["ran_as"].fillna("").astype(str)
    return out


def _score(
    spec: Spec,
    kind: str,
    pred: xr.Dataset,
    y_score: np.ndarray | xr.DataArray,
    groups: np.ndarray | None = None,
    stream: bool = False,
) -> xr.Dataset:
    """Score one prediction the way its kind's registered output says: every metric, or intervals only.

    ``stream``: the test part is a time split's horizon; its rows get their step along it as the
    ``time`` coordinate, so the scores hold the diagnostics over time (rolling coverage, ...).
    """
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
    if stream:
        pred = pred.assign_coords(time=("obs", np.arange(pred.sizes["obs"])))
    if output == "intervals":  # jackknife+, CV+, J+GP, FCP-GP: coverage, width and IAE only
        sets = pred.attrs.get(GRID_SETS)
        if sets is None:
            return evaluate_intervals(pred, y_score, spec.confidence_levels, groups=groups)
        pred = pred.copy()
        del pred.attrs[GRID_SETS]  # a set on a label grid (feedback-conformal): scored as a set, not its hull
        out = evaluate_intervals(pred, y_score, spec.confidence_levels, groups=groups)
        return grid_set_scores(out, sets, y_score, spec.confidence_levels)
    exact = pred.attrs.get(EXACT_INTERVALS)
    if exact is None:
        return evaluate(pred, y_score, confidence_level=spec.confidence_levels, groups=groups)
    pred = pred.copy()
    del pred.attrs[EXACT_INTERVALS]
    out = evaluate(pred, y_score, confidence_level=spec.confidence_levels, groups=groups)
    return _exact_interval_scores(out, exact, y_score, spec.confidence_levels)


def _exact_interval_scores(out: xr.Dataset, exact: xr.Dataset, y: np.ndarray, levels: Sequence[float]) -> xr.Dataset:
    """Coverage and (mean, median) width of a shift data set's exact intervals, in place of the quantile function's.

    Tibshirani et al. (2019) score the weighted split-conformal interval itself and report its
    median length (a weighted interval is infinite where the test row's own mass exceeds
    :math:`\alpha`, so its mean length can be infinite).
    """
    exact = exact.transpose("obs", "confidence_level").sel(confidence_level=list(levels))
    lo, hi = exact["lower"].values, exact["upper"].values
    yy = np.asarray(y, float)[:, None]
    level = out["coverage"]["confidence_level"]
    out = out.copy()
    out["coverage"] = (level.dims, np.mean((lo <= yy) & (yy <= hi), axis=0), out["coverage"].attrs)
    out["width"] = (level.dims, np.mean(hi - lo, axis=0), out["width"].attrs)
    out["median_width"] = (
        level.dims,
        np.median(hi - lo, axis=0),
        {"long_name": "median interval width", "description": "median over the test rows of upper - lower"},
    )
    return out


def _method_context(ctx: TaskContext, m: MethodSpec) -> TaskContext:
    """The task's context as method ``m`` sees it: marginal (``groups = false``), or Mondrian with its ``fallback``.

    Scoring keeps the task's test groups either way, so a marginal method is scored per group too.
    """
    if m.weights is not None:
        ctx = dataclasses.replace(ctx, weights=task_weights(ctx, m.weights))
    if m.groups is False:
        return dataclasses.replace(ctx, groups=None)
    if m.groups:
        return dataclasses.replace(ctx, group_fallback=METHOD_FALLBACKS[m.fallback or "pooled"], mondrian=True)
    return ctx


def _run_methods(
    spec: Spec,
    methods: Sequence[MethodSpec],
    ctx: TaskContext,
    back: dict | None,
    y_score: np.ndarray | xr.DataArray,
    refits: tuple | None = None,
) -> xr.Dataset:
    """Every method of ``methods`` on one fitted base: scores over ``calibrator``, fit times and errors.

    ``refits``: ``(refits, seconds)`` computed as separate tasks, for the one method of a method task.
    """
    if refits is not None:  # a copy: the fitted stage is shared by every task on this worker
        ctx = dataclasses.replace(ctx, refits=refits[0])

    scores, times, errors, ran_as = [], [], [], []
    for m in methods:
        t0 = time.perf_counter()
        note = ""
        try:
            m_ctx, options = ctx, m.options
            if refits is None or not m.strict:  # (a strict method's refit tasks checked it before refitting)
                # refused at its defaults: its scalable form, and the row says so (issue 37)
                m_ctx, options, note = scalable_form(ctx, m.kind, m.options, m.strict)
            pred = METHOD_KINDS[m.kind].func(_method_context(m_ctx, m), **options)
            if back is not None:  # fitted on g(y): score the law of y, on the original scale
                pred = back_transform(pred, **back)
            score = _score(
                spec,
                m.kind,
                pred,
                y_score,
                None if ctx.groups is None else ctx.groups["test"],
                ctx.y_stream is not None,
            )
            errors.append("")
            scores.append(score.expand_dims(calibrator=[m.name]))
        except Exception as err:  # recorded, never fatal for the other methods
            errors.append(f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=3)}")
        times.append(time.perf_counter() - t0 + (0.0 if refits is None else refits[1]))
        ran_as.append(note)
    names = [m.name for m in methods]
    if scores:
        # merge, not concat: interval-only methods lack the density metrics (NaN there)
        out = xr.merge(scores, join="outer", compat="no_conflicts", combine_attrs="drop_conflicts")
        out = out.reindex(calibrator=names)
    else:
        out = xr.Dataset(coords={"calibrator": names})
    out["fit_time"] = ("calibrator", np.asarray(times))
    out["error"] = ("calibrator", np.asarray(errors, dtype=object).astype(str))
    if any(ran_as):  # only where a method switched: the results of every other run are as before
        out["ran_as"] = ("calibrator", np.asarray(ran_as, dtype=object).astype(str))
    return out
