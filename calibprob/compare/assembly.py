"""Assembling a comparison's results: part files, failed tasks, one task from its method slices, the results tree.

Every finished task is a part file in ``<out>.parts/`` named after its key (:func:`_part_name`); a failed
one is recorded with its message (:func:`_failed_task`); a task run per method is put back together
(:func:`assemble_task`); and the tasks make the results DataTree (:func:`_combine`, :func:`combine_parts`):
the scores at the root, the fit times in ``timing``, the ranking in ``ranking``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import numpy as np
import xarray as xr

from calibprob import __version__
from calibprob.compare.ranking import rank_results
from calibprob.compare.spec.model import Spec
from calibprob.compare.tasks import gp_choices, task_keys
from calibprob.runs import inside, load_part, safe_name


def results_path_parts(out: str | Path) -> Path:
    """The folder holding one file per finished task, next to the results file."""
    out = Path(out)
    return out.with_name(out.name + ".parts")


def _part_name(key: tuple) -> str:
    dataset, repetition = key
    return f"{safe_name(dataset)}__rep{int(repetition):04d}"


def _method_part_name(spec: Spec) -> Callable[[tuple], str]:
    """File stem of a (data set, repetition, method) part; the method's index keeps sanitised names apart."""
    return lambda key: f"{_part_name(key[:2])}__m{spec.method_names.index(key[2]):03d}_{safe_name(key[2])}"


def _calibrators(spec: Spec, key: tuple) -> list[str]:
    # a (data set, repetition) key covers every calibrator; a (.., method) key its own one
    return spec.method_names if len(key) == 2 else [key[2]]


def _coords(spec: Spec) -> Callable[[tuple], dict]:
    """The coordinates a part must carry: its data set, its repetition, its calibrators (and the bases)."""
    if spec.bases is None:
        return lambda key: {"dataset": key[0], "repetition": int(key[1]), "calibrator": _calibrators(spec, key)}
    return lambda key: {
        "dataset": key[0],
        "repetition": int(key[1]),
        "base": spec.base_names,
        "calibrator": _calibrators(spec, key),
    }


def _failed_task(key: tuple, msg: str, spec: Spec) -> xr.Dataset:
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
    # the task's other methods stand (one method's fault must not cost the others); a whole-task key fails the task
    whole = {"task_error": ((), msg)} if len(key) == 2 else {}
    ds = xr.Dataset({**whole, "error": error}, coords=coords)
    return ds.expand_dims(dataset=[dataset], repetition=[repetition])


def assemble_task(spec: Spec, pieces: Sequence[xr.Dataset]) -> xr.Dataset:
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


def _combine(spec: Spec, pieces: Sequence[xr.Dataset]) -> xr.DataTree:
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
    # a random split puts different groups in each repetition's test part (radon: 85 counties, a few
    # homes each): the pieces are put on the union of the group labels first, so that the combination
    # runs along dataset and repetition only (combine_by_coords would otherwise take `group` for a
    # dimension to concatenate along and spread every score over it)
    if sum("group" in p.dims for p in clean) > 1:
        groups = sorted(set().union(*(p["group"].values.tolist() for p in clean if "group" in p.dims)))
        clean = [p.reindex(group=groups) if "group" in p.dims else p for p in clean]
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
    for name in ("error", "task_error", "ran_as"):
        if name in ds:
            ds[name] = ds[name].fillna("").astype(str)
    timing_vars = [v for v in ("fit_time", "base_fit_time", "base_predict_time") if v in ds]
    timing = ds[timing_vars]
    metrics = ds.drop_vars(timing_vars)

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
    if any((d.split or spec.split).get("kind") == "time" for d in spec.datasets):
        # a time split's coverage is an online method's long-run coverage: ranked by its error too
        metrics.attrs["split_kind"] = "time"
    # kind = "gp" that ran as the sparse GP says so (issue 37: no silent switch); an exact GP, as
    # before, adds nothing, so the results of a spec below the size are the same file as before
    sparse = {k: v for k, v in gp_choices(spec).items() if not v.startswith("exact")}
    if sparse:
        metrics.attrs["gp_choice"] = "; ".join(
            f"{d}{'' if b is None else f' / base {b}'}: {line}" for (d, b), line in sparse.items()
        )

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
    :doc:`/examples/comparison` runs one small comparison, once, and shows what
    ``combine_parts`` returns.

    """
    parts = Path(parts)
    coords, by_method = _coords(spec), _method_part_name(spec)

    def part(key: tuple, name: str) -> xr.Dataset | None:
        return load_part(inside(parts, name + ".nc"), fingerprint=spec.fingerprint, key=key, coords=coords(key))[0]

    pieces = []
    for key in task_keys(spec):
        ds = part(key, _part_name(key))
        if ds is None:  # a run at method granularity: the task's per-method parts, when all are there
            slices = [part((*key, m), by_method((*key, m))) for m in spec.method_names]
            ds = None if any(s is None for s in slices) else assemble_task(spec, cast(list[xr.Dataset], slices))
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
