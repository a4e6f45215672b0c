"""Process set-up: the workers a run starts (a tuned ``LocalCluster``), the address of a cluster it joins,
and the malloc settings of the ``calibprob`` process itself."""

from __future__ import annotations

import ctypes
import os
import re
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING

from calibprob._core.validation import check_int
from calibprob.runs.faults import FAULT_CONFIG

if TYPE_CHECKING:  # Dask is imported where a cluster starts (an optional dependency)
    from dask.distributed import Client, LocalCluster

__all__ = [
    "SCHEDULER_TIMEOUT",
    "check_scheduler_address",
    "connect",
    "WORKER_MALLOC",
    "WORKER_CONFIG",
    "tune_malloc",
    "local_cluster",
]

#: Seconds to wait for a Dask scheduler before giving up with a clear message (a closed port
#: fails at once: the address is probed with a plain TCP connection first).
SCHEDULER_TIMEOUT = 8.0


def check_scheduler_address(address: object) -> str:
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


def connect(scheduler: str) -> Client:
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

    Called by the ``calibprob`` console script (``calibprob.cli.console_main``), whose
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
    **FAULT_CONFIG,  # a task whose worker died is failed with its cause, not run again on the next worker
}


def local_cluster(n_workers: int, *, preload: Sequence[str] = ()) -> LocalCluster:
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

    n_workers = check_int(n_workers, "n_workers (worker processes; e.g. 2)", minimum=1)
    with dask.config.set(WORKER_CONFIG):
        return LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            preload=list(preload) or None,
        )
