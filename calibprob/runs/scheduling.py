"""Scheduling: run a grid of tasks serially, on a new ``LocalCluster`` or on an existing Dask cluster.

Both commands run a grid of independent tasks, each a pure function
``task(config, *key)`` returning an :class:`xarray.Dataset`, serially, on a new
Dask ``LocalCluster`` or on an existing cluster, and keep every finished task
in its own netCDF file under ``<out>.parts/`` so that a killed run restarted
with the same command computes only what is missing.
The parts and their checks are in ``calibprob.runs.outputs``; the workers in ``calibprob.runs.cluster``.
"""

from __future__ import annotations

import collections
import contextlib
import heapq
import itertools
import time
import traceback
from collections.abc import Callable, Hashable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeAlias, cast

import xarray as xr
from tqdm.auto import tqdm

from calibprob._core.progress import Quietly
from calibprob.runs import faults
from calibprob.runs.cluster import check_scheduler_address, connect, local_cluster
from calibprob.runs.outputs import RunOutput, default_part_name, finished_parts, store_part

#: Where a finished key's Dataset goes: ``store(key, ds, failed)``.
Store: TypeAlias = Callable[[tuple, xr.Dataset, bool], None]

__all__ = ["execute", "failure_table"]


def _first_line(text: str) -> str:
    return str(text).strip().splitlines()[0] if str(text).strip() else ""


def execute(
    task: Callable,
    config: Any,
    keys: Sequence[tuple],
    *,
    fingerprint: str,
    on_error: Callable[[tuple, str], xr.Dataset],
    coords: Callable[[tuple], dict],
    output: RunOutput | None = None,
    part_name: Callable[[tuple], str] | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = True,
    desc: str = "",
    unit: str = "task",
    prepare: Callable | None = None,
    split: tuple[Callable, Callable] | None = None,
    priority: Callable[[tuple], int] | None = None,
    preload: Sequence[str] = (),
) -> dict[Hashable, xr.Dataset]:
    """Run ``task(config, *key)`` for every key not finished yet; return every key's Dataset.

    Parameters
    ----------
    task : callable
        A pure function of ``(config, *key)`` returning an ``xarray.Dataset``;
        it travels to Dask workers, so it must be importable at module level.
    config : object
        Passed unchanged to every task (plain data, e.g. ``Spec.to_dict()``).
    keys : sequence of tuple
        One tuple per task.
    fingerprint : str
        Hash of everything that changes a result; stored in each part.
    on_error : callable
        ``on_error(key, message)`` returns the Dataset recorded for a task that
        raised (``message`` holds the exception and a short traceback).
    coords : callable
        ``coords(key)`` -> ``{dim: value}``, the coordinates a task's result must carry
        (a list value: the whole coordinate, e.g. every calibrator of a compare task).
    output : RunOutput, optional
        Where parts live (entered by the caller, so the lock spans the whole
        run). Without it nothing is written and nothing is reused.
    part_name : callable, optional
        ``part_name(key)`` -> file name stem (sanitised here).
    workers, scheduler
        A new ``LocalCluster`` with this many processes, or an existing
        scheduler's address; serial when both are None.
    progress : bool
        Progress bar on stderr.
    prepare : callable, optional
        A shared first stage: ``prepare(config, *key[:-1])`` runs once per distinct
        key prefix among the unfinished keys, and every key of that prefix then runs
        as ``task(config, state, *key)`` with its result (e.g. a base model fitted
        once and handed to one task per method). On Dask the stage is a future the
        tasks depend on, so they spread over every worker; a stage that raises
        fails each of its keys (via ``on_error``). With ``workers``, the first stages
        run in this process while the ``LocalCluster`` starts, and are then copied to
        every worker.
    split : (callable, callable), optional
        With ``prepare``, on Dask only: ``(pieces, piece)``. ``pieces(config, *key)``
        lists argument tuples of independent pieces of a key's work that need no stage
        (e.g. the refits of a CV+, which refit a fresh base); each runs as a task
        ``piece(config, *key, *args)``, from the start (while the stage is still being
        computed), and the key's task then runs as ``task(config, state, *key,
        refits=[their results, in their order])``. Serially the task computes them
        itself (the same numbers).
    priority : callable, optional
        ``priority(key)``: expected cost of a key's task (its pieces share it); on Dask
        the costliest start first (longest-processing-time-first, Graham 1969), so the
        last task to finish is a short one.
    preload : sequence of str
        Modules a new ``LocalCluster``'s workers import as they start (while this
        process runs the first stages), not when the first task arrives.

    Returns
    -------
    dict
        key -> Dataset, failed tasks included (as returned by ``on_error``),
        each with attribute ``task_failed`` (0 or 1).
    """
    if workers is not None and scheduler is not None:
        raise ValueError("pass either workers (a new LocalCluster) or scheduler (an existing cluster), not both.")
    if scheduler is not None:
        check_scheduler_address(scheduler)
    name_of = part_name or default_part_name
    # the work inside a task (a GP fit, conformal Bayes) shows no line of its own: lines from parallel
    # workers would interleave with this bar, which already counts the tasks
    task = Quietly(task)
    prepare = None if prepare is None else Quietly(prepare)
    split = None if split is None else (split[0], Quietly(split[1]))
    results = finished_parts(keys, output, name_of, fingerprint, coords)
    todo = [key for key in keys if key not in results]
    bar = tqdm(
        total=len(keys), initial=len(keys) - len(todo), disable=not progress, desc=desc, unit=unit, dynamic_ncols=True
    )

    def store(key: tuple, ds: xr.Dataset, failed: bool) -> None:
        failed = bool(failed or int(ds.attrs.get("task_failed", 0)))  # the task may flag a partial failure
        ds.attrs["task_failed"] = int(failed)
        if output is not None:
            store_part(ds, output.part(name_of(key)), fingerprint=fingerprint, key=key, failed=failed)
        results[key] = ds
        bar.update(1)

    try:
        if not todo:
            pass
        elif workers is None and scheduler is None:
            _serial_map(task, config, todo, store, on_error, prepare)
        else:
            staging = _Staging(task, config, on_error, prepare, split, priority)
            _dask_map(staging, todo, store, workers=workers, scheduler=scheduler, preload=preload)
    finally:
        bar.close()
    return results


def _groups(keys: Iterable[tuple]) -> dict[tuple, list[tuple]]:
    """Keys grouped by their prefix ``key[:-1]`` (the shared stage's arguments), in first-seen order."""
    groups: dict[tuple, list[tuple]] = {}
    for key in keys:
        groups.setdefault(tuple(key[:-1]), []).append(key)
    return groups


def _serial_map(
    task: Callable,
    config: Any,
    keys: Sequence[tuple],
    store: Store,
    on_error: Callable[[tuple, str], xr.Dataset],
    prepare: Callable | None = None,
) -> None:
    """Run every key in this process, in order; a task that raises is recorded via ``on_error``.

    With ``prepare``, each key prefix's stage runs once, just before its keys, and is
    dropped after them (one fitted base in memory at a time, as without the stage).
    """
    if prepare is None:
        for key in keys:
            try:
                ds, failed = task(config, *key), False
            except Exception as err:  # recorded, never fatal for the other tasks
                ds, failed = on_error(key, _message(err, traceback.format_exc(limit=4))), True
            store(key, ds, failed)
        return
    for prefix, members in _groups(keys).items():
        try:
            state, why = prepare(config, *prefix), ""
        except Exception as err:  # the stage failed: so did each of its keys
            state, why = None, _message(err, traceback.format_exc(limit=4))
        for key in members:
            if why:
                store(key, on_error(key, why), True)
                continue
            try:
                ds, failed = task(config, state, *key), False
            except Exception as err:
                ds, failed = on_error(key, _message(err, traceback.format_exc(limit=4))), True
            store(key, ds, failed)


def _message(err: BaseException, tb: str = "") -> str:
    msg = f"{type(err).__name__}: {err}"
    return msg + ("\n" + tb if tb else "")


class _Staging:
    """How keys become Dask tasks, handed out one free worker thread at a time.

    A key is a task of its own, or (with ``prepare``) a shared stage and a task per key;
    a key's pieces (``split``) need no stage, so they start at once, on the workers that
    would otherwise wait for the stage. Nothing is submitted before a worker thread is
    free for it: Dask places a task as soon as it is submitted, before any duration is
    known, and keeps a second one queued on a busy one-thread worker (measured: a
    one-repetition comparison left one of two workers idle for its last 8 s while the
    other ran queued CV+ refits). Handing out the costliest ready work whenever a thread
    frees up is Graham's list scheduling (longest processing time first): the last task
    to finish is a short one.
    """

    #: Shared stages go before anything else: every task of their keys waits on them.
    _STAGE = float("inf")

    def __init__(
        self,
        task: Callable,
        config: Any,
        on_error: Callable[[tuple, str], xr.Dataset],
        prepare: Callable | None = None,
        split: tuple[Callable, Callable] | None = None,
        priority: Callable[[tuple], float] | None = None,
    ) -> None:
        self.task, self.config, self.on_error = task, config, on_error
        self.prepare, self.split = prepare, split
        self.priority = priority or (lambda key: 0)
        self._ready: list = []  # heap of (-cost, order, entry)
        self._order = itertools.count()
        self._running: dict = {}  # future -> (entry, the worker it was handed to)
        self._stage: dict = {}  # key -> its finished stage's future
        self._pieces: dict = {}  # key -> [pieces still running, the pieces' futures in their order]
        self._dropped: set = set()  # keys whose stage failed: their pieces are not needed
        self._early: dict = {}  # prefix -> a stage computed in this process (scattered again if lost)
        self._current: dict = {}  # prefix -> the stage's future now in use
        self._retries: collections.Counter = collections.Counter()  # key -> times re-queued after a loss

    def run_early(self, keys: Sequence[tuple], ready: Callable[[], bool]) -> dict:
        """Stages run in this process until ``ready()`` (a cluster started): prefix -> (state, failure)."""
        early: dict = {}
        if self.prepare is None:
            return early
        for prefix in _groups(keys):
            if ready():
                break
            try:
                early[prefix] = (self.prepare(self.config, *prefix), "")
            except Exception as err:  # the stage failed: so does each of its keys
                early[prefix] = (None, _message(err, traceback.format_exc(limit=4)))
        return early

    def _push(self, cost: float, entry: tuple) -> None:
        heapq.heappush(self._ready, (-cost, next(self._order), entry))

    def pieces(self, keys: Sequence[tuple]) -> None:
        """Queue the pieces of every key (they need no stage: they start on the first free workers)."""
        for key in keys if self.split is not None else ():
            try:
                args = cast(tuple, self.split)[0](self.config, *key)  # the loop runs only with a split
            except Exception:  # e.g. unreadable data: the key runs whole, and its stage records why
                args = []
            if args:
                self._pieces[key] = [len(args), [None] * len(args)]
                for i, a in enumerate(args):
                    self._push(self.priority(key) / len(args), ("piece", key, None, (i, a)))

    def plan(self, client: Any, keys: Sequence[tuple], early: dict) -> list[tuple]:
        """Queue every key's work; returns ``[(key, failure Dataset)]`` for keys whose early stage failed."""
        if self.prepare is None:
            for key in keys:
                self._push(self.priority(key), ("task", key, None, None))
            return []
        failures = []
        for prefix, members in _groups(keys).items():
            if prefix not in early:
                self._push(self._STAGE, ("stage", prefix, None, members))
                continue
            state, why = early[prefix]
            if why:
                failures += [(key, self.on_error(key, why)) for key in members]
                self._dropped.update(members)
                continue
            self._early[prefix] = state  # kept: the cluster cannot recompute it if its workers die
            self._stage_done(self._scatter(client, prefix), members)
        return failures

    def _scatter(self, client: Any, prefix: tuple) -> Any:
        """The early stage of ``prefix`` on the workers, so any free worker can take its tasks.

        The first time it is copied to every worker. Scattered again after a loss, workers may
        still be restarting (their nannies bring them back in seconds, longer on a loaded
        machine): Dask's broadcast then fails ("Can not use replicate to delete data", a closed
        comm), so this waits until a worker runs and gives it one copy (Dask copies it on to
        the others when their tasks need it).
        """
        data = [self._early[prefix]]  # a list: a dict would be scattered per value
        if prefix not in self._current:
            future = client.scatter(data, broadcast=True, hash=False)[0]
        else:
            future = self._scatter_again(client, data)
        self._current[prefix] = future
        return future

    #: Seconds to wait for a running worker before a lost stage is scattered again.
    RESCATTER_WAIT = 300.0

    def _scatter_again(self, client: Any, data: list) -> Any:
        deadline = time.monotonic() + self.RESCATTER_WAIT
        while True:
            try:
                if client.nthreads():
                    return client.scatter(data, hash=False)[0]
            except Exception:  # a worker leaving mid-copy, a comm closed under it: try again
                if time.monotonic() > deadline:
                    raise
            if time.monotonic() > deadline:
                raise TimeoutError(f"no Dask worker came back within {self.RESCATTER_WAIT:g} s to hold a lost stage")
            time.sleep(0.5)

    def _live_stage(self, client: Any, key: tuple, stage: Any) -> Any:
        """The stage future a key's task should use: the newest one, scattered again when the old one was lost.

        Scattered data has no recipe: when every worker holding it has died (a worker restarted
        by its nanny comes back empty), Dask forgets it and cancels what depends on it. A stage
        computed on the cluster is recomputed by Dask itself.
        """
        prefix = tuple(key[:-1])
        current = self._current.get(prefix, stage)
        if current is not None and current.status in ("cancelled", "lost") and prefix in self._early:
            current = self._scatter(client, prefix)
        return current

    def _stage_done(self, stage: Any, members: list[tuple]) -> None:
        if members:
            self._current[tuple(members[0][:-1])] = stage
        for key in members:
            self._stage[key] = stage
            self._queue_if_ready(key)

    def _queue_if_ready(self, key: tuple) -> None:
        """Queue a key's task once its stage and all its pieces have finished."""
        waiting = self._pieces.get(key)
        if key not in self._stage or (waiting is not None and waiting[0] > 0):
            return
        self._pieces.pop(key, None)
        refits = None if waiting is None else waiting[1]
        self._push(self.priority(key), ("task", key, self._stage.pop(key), refits))

    def fill(self, client: Any, pending: Any, reserve: int = 0) -> None:
        """Hand the costliest ready work to each free worker thread (always one thing in flight).

        Each submission names the free worker it is for: left to itself, Dask put a task
        behind a busy worker's running one while the other worker idled (its occupancy
        estimates come from durations it has not measured yet). ``reserve``: threads left
        free for this process (one while it computes a stage on the same machine, so that
        it and the workers do not share the cores three ways).
        """
        slots = self._free_slots(client, reserve)
        while self._ready and (slots or not self._running):
            _, _, entry = heapq.heappop(self._ready)
            kind, key, stage, extra = entry
            if kind == "piece" and key in self._dropped:
                continue
            where = slots.pop(0) if slots else None
            # loose: if that worker has left, any other may take it
            placement = {} if where is None else {"workers": [where], "allow_other_workers": True}
            if kind == "stage":
                future = client.submit(self.prepare, self.config, *key, pure=False, **placement)
            elif kind == "piece":
                piece = cast(tuple, self.split)[1]  # pieces are queued only with a split
                future = client.submit(piece, self.config, *key, *extra[1], pure=False, **placement)
            else:
                stage = None if stage is None else self._live_stage(client, key, stage)
                entry = (kind, key, stage, extra)
                head = (self.config,) if stage is None else (self.config, stage)
                kwargs = {"refits": extra} if extra else {}
                future = client.submit(self.task, *head, *key, pure=False, **placement, **kwargs)
            self._running[future] = (entry, where)
            pending.add(future)

    def _free_slots(self, client: Any, reserve: int) -> list:
        """One address per worker thread running none of this run's work, ``reserve`` of them held back."""
        busy = collections.Counter(where for _, where in self._running.values())
        slots = [addr for addr, n in sorted(client.nthreads().items()) for _ in range(n - busy[addr])]
        return slots[: max(0, len(slots) - reserve)]

    def finished(self, client: Any, future: Any) -> list[tuple]:
        """Book a finished future: ``[(key, Dataset, failed)]`` to store (none for stages and pieces)."""
        (kind, key, stage, extra), _ = self._running.pop(future)
        if kind == "stage":
            return self._finished_stage(client, future, extra)
        if kind == "piece":
            if key not in self._dropped:
                waiting = self._pieces[key]
                waiting[0] -= 1
                waiting[1][extra[0]] = future  # in the pieces' order; one that raised makes its task raise
                self._queue_if_ready(key)
            return []
        try:
            return [(key, future.result(), False)]
        except BaseException as err:
            if faults.is_cancelled(err):  # the stage it needed was lost with its workers: run it again
                return self._requeue(client, key, stage, extra, err)
            if not isinstance(err, Exception):  # KeyboardInterrupt, SystemExit
                raise
            # the task raised, or its worker died (KilledWorker): only this key fails
            return [(key, self.on_error(key, self._why(client, err)), True)]

    #: A task cancelled because its stage was lost is queued again at most this many times.
    MAX_REQUEUE = 2

    def _requeue(self, client: Any, key: tuple, stage: Any, refits: list | None, err: BaseException) -> list[tuple]:
        """Queue a task again on its stage re-created (:meth:`_live_stage`), or fail it after :data:`MAX_REQUEUE` tries."""
        self._retries[key] += 1
        if self._retries[key] > self.MAX_REQUEUE or stage is None:
            why = (
                f"{_message(err)}: the data this task needed was lost with its workers {self._retries[key]} "
                "times. Rerun the same command: finished tasks are kept and only what is missing runs."
            )
            return [(key, self.on_error(key, why), True)]
        prefix = tuple(key[:-1])
        if prefix in self._early and self._current.get(prefix) is stage:  # its loss cancelled this task
            stage = self._scatter(client, prefix)
        self._push(self.priority(key), ("task", key, stage, refits))
        return []

    @staticmethod
    def _why(client: Any, err: BaseException) -> str:
        """A failed task's message: the cause and the fix when its worker was killed, else the exception."""
        if not faults.is_killed_worker(err):
            return _message(err)
        try:
            events = client.get_events("worker-restart-memory")
        except Exception:  # an old or unreachable scheduler: the cause without the memory figures
            events = ()
        return faults.killed_message(err, events)

    def _finished_stage(self, client: Any, stage: Any, members: list[tuple]) -> list[tuple]:
        """Queue the tasks of a finished stage, or fail each of its keys.

        The stage's result is first copied to every worker: while it sits on one worker
        only, Dask would keep all its dependents there (their data is local), so one
        repetition would still run on one core.
        """
        try:
            stage.result()
        except Exception as err:  # the stage failed (or its worker died): so did each of its keys
            why = self._why(client, err)
            self._dropped.update(members)
            return [(key, self.on_error(key, why), True) for key in members]
        with contextlib.suppress(Exception):  # a worker leaving mid-copy: the copy is only a speed-up
            client.replicate([stage])
        self._stage_done(stage, members)
        return []


def _start_local(workers: int, staging: _Staging, keys: Sequence[tuple], preload: Sequence[str] = ()) -> tuple:
    """``(cluster, client, pending, early stages)``: a new ``LocalCluster`` while this process runs the first stages.

    Its workers import ``preload`` as they start. Once the cluster is up the pieces that
    need no stage are handed to all its workers but one at once (from the thread that
    started it), so the workers compute while this process is still fitting the first
    stage on the remaining core.
    """
    from dask.distributed import Client, as_completed

    def start() -> tuple[Any, Any, Any]:
        cluster = local_cluster(workers, preload=preload)
        try:
            client = Client(cluster)
            pending = as_completed(loop=client.loop)
            staging.pieces(keys)
            staging.fill(client, pending, reserve=1)  # this process is busy with a stage: one core is its
        except BaseException:
            cluster.close()
            raise
        return cluster, client, pending

    with ThreadPoolExecutor(1) as pool:
        starting = pool.submit(start)
        try:
            early = staging.run_early(keys, starting.done)
        except BaseException:  # e.g. Ctrl-C during a stage: do not leave the workers running
            cluster, client, _ = starting.result()
            client.close()
            cluster.close()
            raise
        return *starting.result(), early


def _dask_map(
    staging: _Staging,
    keys: Sequence[tuple],
    store: Store,
    *,
    workers: int | None,
    scheduler: str | None,
    preload: Sequence[str] = (),
) -> None:
    """Submit every key to Dask and store results as they finish (failures via ``on_error``)."""
    try:
        from dask.distributed import as_completed
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ImportError("parallel runs need Dask: pip install 'calibprob[dask]' (dask[distributed]).") from err
    cluster, early = None, {}
    if scheduler is None:
        # no scheduler: execute came here only because workers is set
        cluster, client, pending, early = _start_local(cast(int, workers), staging, keys, preload)
    else:
        client = connect(scheduler)
        pending = as_completed(loop=client.loop)
        staging.pieces(keys)
    try:
        for key, ds in staging.plan(client, keys, early):
            store(key, ds, True)
        staging.fill(client, pending)
        for fut in pending:
            done = staging.finished(client, fut)
            staging.fill(client, pending)  # the freed thread gets work before this process writes parts
            for key, ds, failed in done:
                store(key, ds, failed)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def failure_table(rows: Sequence[tuple[str, str]], *, limit: int = 200) -> str:
    """Aligned text of ``(task, message)`` rows, one line per failed task (first line of its message)."""
    if not rows:
        return ""
    width = max(len(t) for t, _ in rows)
    lines = [f"{'task'.ljust(width)}  error", f"{'-' * width}  -----"]
    for t, msg in rows[:limit]:
        lines.append(f"{t.ljust(width)}  {_first_line(msg)}")
    if len(rows) > limit:
        lines.append(f"... and {len(rows) - limit} more")
    return "\n".join(lines)
