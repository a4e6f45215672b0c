"""The one resumable task executor behind ``calibprob compare`` and ``calibprob bo``.

Both commands run a grid of independent tasks, each a pure function
``task(config, *key)`` returning an :class:`xarray.Dataset`, serially, on a new
Dask ``LocalCluster`` or on an existing cluster, and keep every finished task
in its own netCDF file under ``<out>.parts/`` so that a killed run restarted
with the same command computes only what is missing. What makes the reuse
trustworthy:

* **Fingerprint.** Every part carries the fingerprint of everything that
  changes its result (for ``compare`` the spec *and* a content hash of every
  input file); a part with another fingerprint is recomputed.
* **Identity and checksum.** A part also carries its own key (``task_key``)
  and a SHA-256 checksum of its data (:func:`content_checksum`). Before reuse
  the key, the part's coordinates and the checksum are checked, so a part
  copied over another task's name, or edited by hand, is recomputed.
* **Failures are recorded, then retried.** A task that raised is stored (so
  the results say why) with ``task_failed = 1`` and is run again by the next
  run instead of being served as finished.
* **One run per output.** ``<out>.lock`` is held (``fcntl.flock``) for the
  whole run: a second run on the same ``--out`` waits for the first, then
  finds every part finished and writes the same results. The lock is released
  by the kernel when its holder dies, so a killed run never leaves it stale.
  Temporary files carry the process id, so no two writers share one.
* **Safe outputs.** :func:`check_output_path` refuses devices, directories,
  existing files that are not netCDF and unwritable folders *before* any task
  runs; part names are sanitised (:func:`safe_name`) and resolved inside their
  folder.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import hashlib
import heapq
import itertools
import json
import os
import re
import stat
import sys
import tempfile
import traceback
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import TextIO

import numpy as np
import xarray as xr

__all__ = [
    "OutputError",
    "safe_name",
    "check_output_path",
    "content_checksum",
    "RunOutput",
    "execute",
    "tune_malloc",
    "check_scheduler_address",
    "SCHEDULER_TIMEOUT",
]

_ENGINE = "h5netcdf"
#: Seconds to wait for a Dask scheduler before giving up with a clear message (a closed port
#: fails at once: the address is probed with a plain TCP connection first).
SCHEDULER_TIMEOUT = 8.0
# The first bytes of the two netCDF flavours: HDF5 (netCDF-4) and classic CDF (netCDF-3).
_NETCDF_MAGIC = (b"\x89HDF\r\n\x1a\n", b"CDF\x01", b"CDF\x02", b"CDF\x05")


class OutputError(ValueError):
    """An output path that cannot (or must not) be written; the message names it and the fix."""


def safe_name(text) -> str:
    """A file-name-safe form of ``text``: letters, digits, ``-`` and ``_`` kept, anything else ``_``.

    Path separators, ``..``, spaces and control characters all become ``_``, so
    the result never leaves the folder it is joined to. Two names may collide
    after sanitising (``"a/b"`` and ``"a_b"``); callers reject such pairs.

    Parameters
    ----------
    text : object
        Converted with ``str``.

    Returns
    -------
    str
        Non-empty (an empty input becomes ``"_"``).

    Examples
    --------
    >>> from calibprob.runs import safe_name
    >>> safe_name("../../etc/passwd"), safe_name("Boston housing")
    ('______etc_passwd', 'Boston_housing')
    """
    out = "".join(c if (c.isascii() and c.isalnum()) or c in "-_" else "_" for c in str(text))
    return out or "_"


def inside(folder: Path, name: str) -> Path:
    """``folder / name`` after checking that it resolves to a direct child of ``folder``."""
    folder = Path(folder)
    path = folder / name
    if path.resolve().parent != folder.resolve():
        raise OutputError(f"file name {name!r} would leave its folder {str(folder)!r}; refusing to write it.")
    return path


def _is_netcdf(path: Path) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(8)
    return any(head.startswith(m) for m in _NETCDF_MAGIC)


def check_output_path(out, *, what: str = "--out") -> Path:
    """Check that ``out`` may be written as a results file, before any work is done.

    ``out`` must be a regular-file path in a writable folder (created if
    missing). An existing path must be a regular file that is empty or already
    netCDF: devices (``/dev/null``), directories, sockets and files of any other
    format are refused, never replaced. ``<out>.parts`` must be a folder if it
    exists. Nothing is written to ``out`` itself.

    Parameters
    ----------
    out : str or path-like
    what : str
        How the caller names the path in messages (``--out``, ``out``).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    OutputError
        Naming the path, what is wrong and the fix.

    Examples
    --------
    >>> from calibprob.runs import check_output_path, OutputError
    >>> try:
    ...     check_output_path("/dev/null")
    ... except OutputError as err:
    ...     print(str(err).split(";")[0])
    --out = '/dev/null' is a character device, not a regular file
    """
    if out is None or str(out) == "":
        raise OutputError(f"{what} must be a file path such as results/run.nc; got {out!r}.")
    out = Path(out)
    if out.exists():
        mode = os.stat(out).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a directory"
                if stat.S_ISDIR(mode)
                else "a character device"
                if stat.S_ISCHR(mode)
                else "a block device"
                if stat.S_ISBLK(mode)
                else "a FIFO"
                if stat.S_ISFIFO(mode)
                else "a socket"
                if stat.S_ISSOCK(mode)
                else "not a regular file"
            )
            raise OutputError(
                f"{what} = {str(out)!r} is {kind}, not a regular file; refusing to replace it. "
                f"Give a file path such as {str(out).rstrip('/') if stat.S_ISDIR(mode) else 'results'}/run.nc."
            )
        if out.stat().st_size > 0 and not _is_netcdf(out):
            raise OutputError(
                f"{what} = {str(out)!r} exists and is not a netCDF file; refusing to overwrite it. "
                "Choose another path or move that file away."
            )
    parent = out.parent
    if parent.exists() and not parent.is_dir():
        raise OutputError(f"{what} = {str(out)!r}: its folder {str(parent)!r} is not a directory.")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".calibprob-probe-"):
            pass
    except OSError as err:
        raise OutputError(
            f"{what} = {str(out)!r}: cannot write in the folder {str(parent)!r} ({err.strerror or err}). "
            "Choose a writable folder."
        ) from None
    parts = out.with_name(out.name + ".parts")
    if parts.exists() and not parts.is_dir():
        raise OutputError(
            f"{what} = {str(out)!r}: {str(parts)!r} (where finished tasks are kept) exists and is not a "
            "folder. Move it away or choose another --out."
        )
    return out


def _canonical(values: np.ndarray) -> bytes:
    v = np.asarray(values)
    if v.dtype.kind in "OUS":
        return "\x1f".join(str(x) for x in v.ravel().tolist()).encode("utf-8", "surrogatepass")
    if v.dtype.kind == "b":
        return v.astype("u1").tobytes()
    if v.dtype.kind in "iu":
        return np.ascontiguousarray(v, dtype="<i8").tobytes()
    if v.dtype.kind in "fc":
        v = np.ascontiguousarray(v, dtype="<c16" if v.dtype.kind == "c" else "<f8")
        return np.where(np.isnan(v), np.nan, v).tobytes()  # one NaN bit pattern
    return repr(v.tolist()).encode()


def content_checksum(ds: xr.Dataset) -> str:
    """SHA-256 of a Dataset's variables (names, dims, shapes, values), ignoring attributes.

    Values are hashed in a canonical form (float64, int64, UTF-8 text) so the
    checksum survives a netCDF round trip: computed before writing, it equals
    the checksum of the file read back.

    Parameters
    ----------
    ds : xarray.Dataset

    Returns
    -------
    str
        64 hexadecimal digits.

    Examples
    --------
    >>> import xarray as xr
    >>> from calibprob.runs import content_checksum
    >>> a = xr.Dataset({"v": ("x", [1.0, 2.0])})
    >>> content_checksum(a) == content_checksum(a.copy()), content_checksum(a) == content_checksum(a + 1)
    (True, False)
    """
    h = hashlib.sha256()
    for name in sorted(map(str, ds.variables)):
        var = ds.variables[name]
        h.update(json.dumps([name, list(map(str, var.dims)), list(var.shape)]).encode())
        h.update(_canonical(var.values))
    return h.hexdigest()


def _write_error(path: Path, err: OSError) -> OSError:
    reason = err.strerror or str(err)
    fix = (
        "free some space or choose another --out"
        if getattr(err, "errno", None) == errno.ENOSPC
        else "check that the folder is writable and has free space, or choose another --out"
    )
    return OSError(f"could not write {str(path)!r}: {reason}. {fix[0].upper() + fix[1:]}.")


def write_atomic(obj, path: Path) -> None:
    """Write a Dataset or DataTree to ``path`` via a per-process temporary name, then rename.

    A killed run never leaves a half-written file under the final name, and two
    processes never write the same temporary file.
    """
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        obj.to_netcdf(tmp, engine=_ENGINE)
        os.replace(tmp, path)
    except OSError as err:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise _write_error(path, err) from err


class RunOutput:
    """The files of one run: the results file, ``<out>.parts/`` and the lock ``<out>.lock``.

    Use as a context manager: entering checks the path (:func:`check_output_path`),
    takes the lock (waiting for another run on the same output, with a message on
    stderr, or raising ``OutputError`` at once when ``wait=False``) and creates the
    parts folder.

    Parameters
    ----------
    out : path
        The results netCDF file.
    wait : bool, default True
        Wait for a concurrent run on the same ``out`` to finish (True), or refuse.
    """

    def __init__(self, out, *, wait: bool = True):
        self.out = check_output_path(out)
        self.parts = self.out.with_name(self.out.name + ".parts")
        self.lock_path = self.out.with_name(self.out.name + ".lock")
        self.wait = wait
        self._fh: TextIO | None = None

    def __enter__(self) -> RunOutput:
        import fcntl

        self._fh = fh = open(self.lock_path, "a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            if not self.wait:
                fh.close()
                raise OutputError(
                    f"{str(self.out)!r} is being written by another calibprob run ({holder}); wait for it "
                    "to finish or choose another --out."
                ) from None
            print(
                f"calibprob: another run ({holder}) is writing {self.out}; waiting for it to finish "
                "(its finished tasks will be reused)…",
                file=sys.stderr,
            )
            fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}")
        fh.flush()
        self.parts.mkdir(exist_ok=True)
        return self

    def __exit__(self, *exc) -> None:
        import fcntl

        if self._fh is not None:
            fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None

    def part(self, name: str) -> Path:
        return inside(self.parts, safe_name(name) + ".nc")

    def write(self, obj) -> None:
        write_atomic(obj, self.out)


def store_part(ds: xr.Dataset, path: Path, *, fingerprint: str, key: Sequence, failed: bool) -> None:
    """Stamp ``ds`` with its fingerprint, key, failure flag and checksum, and write it atomically."""
    ds = ds.copy()
    ds.attrs.update(
        {
            "task_fingerprint": fingerprint,
            "task_key": json.dumps(list(key), default=str),
            "task_failed": int(bool(failed)),
            "task_checksum": content_checksum(ds),
        }
    )
    write_atomic(ds, path)


def load_part(path: Path, *, fingerprint: str, key: Sequence, coords: dict) -> tuple[xr.Dataset | None, str]:
    """Read a part and check it belongs to ``key``; returns ``(dataset or None, why not)``.

    A part is accepted only if it opens, carries ``fingerprint`` and ``key``, its
    coordinates equal ``coords`` (dimension -> the task's single value) and its
    data match the stored checksum.
    """
    if not path.is_file():
        return None, "missing"
    try:
        ds = xr.load_dataset(path, engine=_ENGINE)
    except Exception:  # unreadable, truncated or not netCDF: recompute
        return None, "unreadable"
    attrs = ds.attrs
    if attrs.get("task_fingerprint") != fingerprint:
        return None, "stale (other settings or input files)"
    if attrs.get("task_key") != json.dumps(list(key), default=str):
        return None, "belongs to another task"
    for dim, value in coords.items():  # a scalar: the task's single value; a list: the whole coordinate
        want = list(value) if isinstance(value, (list, tuple)) else [value]
        if dim not in ds.coords or ds[dim].values.tolist() != want:
            return None, "belongs to another task"
    if attrs.get("task_checksum") != content_checksum(ds):
        return None, "checksum mismatch (edited or corrupted)"
    return ds, ""


def check_scheduler_address(address) -> str:
    """Check that ``address`` looks like a Dask scheduler address (``tcp://host:port``).

    Raises
    ------
    ValueError
        Naming the value and an example.
    """
    example = "e.g. tcp://127.0.0.1:8786 (start a cluster with `dask scheduler` and `dask worker ADDRESS`)"
    if not isinstance(address, str) or not address.strip():
        raise ValueError(f"scheduler must be an address string, {example}; got {address!r}.")
    m = re.fullmatch(r"(?:(tcp|tls|ws|wss|ucx)://)?(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.\-_]+):(\d{1,5})", address.strip())
    if m is None or not 0 < int(m.group(3)) < 65536:
        raise ValueError(f"scheduler must be an address such as tcp://HOST:PORT, {example}; got {address!r}.")
    return address.strip()


def _probe(address: str) -> None:
    """Fail at once when nothing listens at a tcp address (Dask itself retries until its timeout)."""
    import socket

    m = re.fullmatch(r"(?:tcp://)?(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.\-_]+):(\d+)", address)
    if m is None:
        return  # tls://, ucx://, ...: left to Dask
    host = m.group(1).strip("[]")
    try:
        with socket.create_connection((host, int(m.group(2))), timeout=SCHEDULER_TIMEOUT / 2):
            pass
    except OSError as err:
        raise ConnectionError(
            f"could not reach the Dask scheduler at {address} ({err.strerror or type(err).__name__}). Check the "
            "address, or start a cluster with `dask scheduler` and `dask worker ADDRESS` (or use --workers N "
            "for a local one)."
        ) from None


def _connect(scheduler: str):
    from dask.distributed import Client

    address = check_scheduler_address(scheduler)
    _probe(address)
    try:
        return Client(address, timeout=SCHEDULER_TIMEOUT)
    except (OSError, TimeoutError) as err:
        raise ConnectionError(
            f"could not reach the Dask scheduler at {address} within {SCHEDULER_TIMEOUT:g} s "
            f"({type(err).__name__}). Check the address, or start a cluster with `dask scheduler` and "
            "`dask worker ADDRESS` (or use --workers N for a local one)."
        ) from None


def _first_line(text: str) -> str:
    return str(text).strip().splitlines()[0] if str(text).strip() else ""


def execute(
    task: Callable,
    config,
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
    from tqdm.auto import tqdm

    if workers is not None and scheduler is not None:
        raise ValueError("pass either workers (a new LocalCluster) or scheduler (an existing cluster), not both.")
    if scheduler is not None:
        check_scheduler_address(scheduler)
    name_of = part_name or default_part_name
    results = _finished_parts(keys, output, name_of, fingerprint, coords)
    todo = [key for key in keys if key not in results]
    bar = tqdm(
        total=len(keys), initial=len(keys) - len(todo), disable=not progress, desc=desc, unit=unit, dynamic_ncols=True
    )

    def store(key, ds: xr.Dataset, failed: bool) -> None:
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


def default_part_name(key: tuple) -> str:
    """File-name stem of a task's part when the caller gives none: its key joined by ``-``."""
    return "-".join(map(str, key))


def _finished_parts(keys, output: RunOutput | None, part_name, fingerprint: str, coords) -> dict:
    """Tasks finished by an earlier run with the same fingerprint (failed ones are run again)."""
    results: dict = {}
    if output is None:
        return results
    for key in keys:
        ds, _ = load_part(output.part(part_name(key)), fingerprint=fingerprint, key=key, coords=coords(key))
        if ds is not None and not int(ds.attrs.get("task_failed", 0)):
            results[key] = ds
    return results


def _groups(keys) -> dict[tuple, list[tuple]]:
    """Keys grouped by their prefix ``key[:-1]`` (the shared stage's arguments), in first-seen order."""
    groups: dict[tuple, list[tuple]] = {}
    for key in keys:
        groups.setdefault(tuple(key[:-1]), []).append(key)
    return groups


def _serial_map(task, config, keys, store, on_error, prepare=None) -> None:
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

    def __init__(self, task, config, on_error, prepare=None, split=None, priority=None):
        self.task, self.config, self.on_error = task, config, on_error
        self.prepare, self.split = prepare, split
        self.priority = priority or (lambda key: 0)
        self._ready: list = []  # heap of (-cost, order, entry)
        self._order = itertools.count()
        self._running: dict = {}  # future -> (entry, the worker it was handed to)
        self._stage: dict = {}  # key -> its finished stage's future
        self._pieces: dict = {}  # key -> [pieces still running, the pieces' futures in their order]
        self._dropped: set = set()  # keys whose stage failed: their pieces are not needed

    def run_early(self, keys, ready: Callable[[], bool]) -> dict:
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

    def pieces(self, keys) -> None:
        """Queue the pieces of every key (they need no stage: they start on the first free workers)."""
        for key in keys if self.split is not None else ():
            try:
                args = self.split[0](self.config, *key)
            except Exception:  # e.g. unreadable data: the key runs whole, and its stage records why
                args = []
            if args:
                self._pieces[key] = [len(args), [None] * len(args)]
                for i, a in enumerate(args):
                    self._push(self.priority(key) / len(args), ("piece", key, None, (i, a)))

    def plan(self, client, keys, early: dict) -> list[tuple]:
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
            # copied to every worker now, so any free worker can take the stage's tasks
            future = client.scatter([state], broadcast=True, hash=False)[0]  # a list: a dict would scatter per value
            self._stage_done(future, members)
        return failures

    def _stage_done(self, stage, members) -> None:
        for key in members:
            self._stage[key] = stage
            self._queue_if_ready(key)

    def _queue_if_ready(self, key) -> None:
        """Queue a key's task once its stage and all its pieces have finished."""
        waiting = self._pieces.get(key)
        if key not in self._stage or (waiting is not None and waiting[0] > 0):
            return
        self._pieces.pop(key, None)
        refits = None if waiting is None else waiting[1]
        self._push(self.priority(key), ("task", key, self._stage.pop(key), refits))

    def fill(self, client, pending, reserve: int = 0) -> None:
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
                future = client.submit(self.split[1], self.config, *key, *extra[1], pure=False, **placement)
            else:
                head = (self.config,) if stage is None else (self.config, stage)
                kwargs = {"refits": extra} if extra else {}
                future = client.submit(self.task, *head, *key, pure=False, **placement, **kwargs)
            self._running[future] = (entry, where)
            pending.add(future)

    def _free_slots(self, client, reserve: int) -> list:
        """One address per worker thread running none of this run's work, ``reserve`` of them held back."""
        busy = collections.Counter(where for _, where in self._running.values())
        slots = [addr for addr, n in sorted(client.nthreads().items()) for _ in range(n - busy[addr])]
        return slots[: max(0, len(slots) - reserve)]

    def finished(self, client, future) -> list[tuple]:
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
        except Exception as err:
            return [(key, self.on_error(key, _message(err)), True)]

    def _finished_stage(self, client, stage, members) -> list[tuple]:
        """Queue the tasks of a finished stage, or fail each of its keys.

        The stage's result is first copied to every worker: while it sits on one worker
        only, Dask would keep all its dependents there (their data is local), so one
        repetition would still run on one core.
        """
        try:
            stage.result()
        except Exception as err:  # the stage failed: so did each of its keys
            why = _message(err)
            self._dropped.update(members)
            return [(key, self.on_error(key, why), True) for key in members]
        client.replicate([stage])
        self._stage_done(stage, members)
        return []


def _start_local(workers: int, staging: _Staging, keys, preload: Sequence[str] = ()) -> tuple:
    """``(cluster, client, pending, early stages)``: a new ``LocalCluster`` while this process runs the first stages.

    Its workers import ``preload`` as they start. Once the cluster is up the pieces that
    need no stage are handed to all its workers but one at once (from the thread that
    started it), so the workers compute while this process is still fitting the first
    stage on the remaining core.
    """
    from concurrent.futures import ThreadPoolExecutor

    from dask.distributed import Client, as_completed

    def start():
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


def _dask_map(staging: _Staging, keys, store, *, workers, scheduler, preload: Sequence[str] = ()) -> None:
    """Submit every key to Dask and store results as they finish (failures via ``on_error``)."""
    try:
        from dask.distributed import as_completed
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ImportError("parallel runs need Dask: pip install 'calibprob[dask]' (dask[distributed]).") from err
    cluster, early = None, {}
    if scheduler is None:
        cluster, client, pending, early = _start_local(workers, staging, keys, preload)
    else:
        client = _connect(scheduler)
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


#: glibc malloc settings for the workers :func:`local_cluster` starts (Dask's nannies set
#: ``MALLOC_TRIM_THRESHOLD_=65536``, which puts every array above 128 KiB in a fresh,
#: zero-filled ``mmap``). Fixed, not dynamic: arrays up to 32 MiB (glibc's largest mmap
#: threshold; a 2 000 x 2 000 matrix) come from the heap, and up to 256 MiB of freed heap is
#: kept for the next task. One arena, as in a serial run: the task runs in a worker thread,
#: whose own arena was seen to return and re-fault its memory on every GP evaluation.
WORKER_MALLOC = {
    "MALLOC_MMAP_THRESHOLD_": str(32 * 2**20),
    "MALLOC_TRIM_THRESHOLD_": str(256 * 2**20),
    "MALLOC_ARENA_MAX": "1",
}

#: glibc's ``mallopt`` parameter of each :data:`WORKER_MALLOC` variable (``malloc.h``).
_MALLOPT = {"MALLOC_MMAP_THRESHOLD_": -3, "MALLOC_TRIM_THRESHOLD_": -1, "MALLOC_ARENA_MAX": -8}


def tune_malloc() -> bool:
    """Give this process the workers' glibc malloc settings (:data:`WORKER_MALLOC`), via ``mallopt``.

    Called by the ``calibprob`` console script (:func:`calibprob.cli.console_main`), whose
    process fits the first bases itself (while the workers start) or the whole comparison
    (serially): with glibc's dynamic thresholds, whether
    its GP matrices were reused or faulted in afresh on every evaluation varied from run
    to run (a 7 s GP base fit with 14 000 or 510 000 page faults, 1.1 s of system time).
    A variable the user set in the environment is left as it is.

    Returns
    -------
    bool
        Whether every setting was applied (False off glibc, e.g. on macOS or musl).
    """
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process runs on
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    todo = {k: v for k, v in WORKER_MALLOC.items() if k not in os.environ}
    return all(mallopt(_MALLOPT[k], int(v)) == 1 for k, v in todo.items())


#: Dask configuration of the workers :func:`local_cluster` starts. The statistical profiler
#: (a thread sampling the task's stack every 10 ms, for a dashboard these clusters do not
#: serve) and the 20 ms event-loop tick each take the GIL from the running task; the system
#: monitor does every 0.5 s. The memory monitor (100 ms, which enforces the memory limit) is kept.
WORKER_CONFIG = {
    **{f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in WORKER_MALLOC.items()},
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
}


def local_cluster(n_workers: int, *, preload: Sequence[str] = ()):
    """A ``dask.distributed.LocalCluster`` of single-threaded worker processes tuned for GP work.

    Dask's nannies start workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (to hand freed
    memory back to the OS). Setting it disables glibc's dynamic mmap threshold, so every
    NumPy array above 128 KiB is mmap-ed and zero-filled afresh: measured here, a GP fit
    on 300 points took 4.0 s in such a worker against 2.1 s in a plain process. Leaving
    it unset was not enough either: the task runs in a worker thread, and after some
    tasks (a sharp GP fit) every later GP evaluation re-faulted its matrices (0.7-1.0
    million page faults and 1.3 s of system time per CV+ refit, 25 % slower). The
    workers get :data:`WORKER_MALLOC` instead (fixed thresholds, one arena) and
    :data:`WORKER_CONFIG` (no statistical profiler, a 1 s event-loop tick), with which
    every refit of the one-repetition benchmark runs as fast as in a serial process.

    Parameters
    ----------
    n_workers : int
        Number of worker processes (one thread each: the GP algebra runs one BLAS
        thread per process).
    preload : sequence of str
        Modules each worker imports as it starts (Dask's worker ``preload``).

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
    ...     client.run(lambda: __import__("os").environ.get("MALLOC_ARENA_MAX"))
    """
    import dask
    from dask.distributed import LocalCluster

    from calibprob._validation import check_int

    n_workers = check_int(n_workers, "n_workers (worker processes; e.g. 2)", minimum=1)
    with dask.config.set(WORKER_CONFIG):
        return LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            preload=list(preload) or None,
        )
