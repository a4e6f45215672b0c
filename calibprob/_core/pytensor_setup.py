r"""PyTensor and BLAS plumbing shared by every compiled graph in calibprob.

Three things every model-fitting module needs, in one place:

* **compile mode** — the process-wide PyTensor mode for graphs compiled with
  ``compile_mode=None`` (:func:`get_compile_mode`, :func:`set_compile_mode`,
  environment variable ``CALIBPROB_COMPILE_MODE``; default ``"FAST_COMPILE"``:
  the Python VM calling NumPy/SciPy ops, no C compilation). GP-Beta's ADVI
  step keeps its own measured default (``"CVM"``, see
  :mod:`calibprob.calibrators.gp_beta`) because its many small ops run 3x
  faster in C and ``make venv`` warms that cache once per machine.
* **graph caches** — :class:`GraphCache`: a compiled function is built once
  per process for each key that changes the symbolic graph (kernel, input
  dimension, mode, ...), with data passed through ``pm.Data`` containers, and
  reused by every fit; :func:`clear_caches` empties all of them.
* **BLAS threads** — the one policy for how many BLAS threads a fit uses
  (:func:`blas_policy`, :func:`set_blas_threads`) and the one context manager
  applying an explicit limit (:func:`limit_blas_threads`). Multi-threaded
  OpenBLAS on a shared 2-core machine was measured 2-20x *slower* than one
  thread for the matrices calibprob factorises (spin-waiting threads), so one
  thread is the default everywhere except for large exact GPs on idle cores.

References
----------
PyTensor compilation modes: https://pytensor.readthedocs.io (``FAST_COMPILE``,
``CVM``, ``NUMBA``). threadpoolctl: https://github.com/joblib/threadpoolctl.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
import scipy.linalg
from threadpoolctl import threadpool_limits

__all__ = [
    "get_compile_mode",
    "set_compile_mode",
    "GraphCache",
    "clear_caches",
    "get_blas_threads",
    "set_blas_threads",
    "blas_policy",
    "blas_limit",
    "limit_blas_threads",
]

# ---------------------------------------------------------------------------
# Compile mode
# ---------------------------------------------------------------------------

_COMPILE_MODE: Any = os.environ.get("CALIBPROB_COMPILE_MODE", "FAST_COMPILE")


def get_compile_mode() -> Any:
    """The PyTensor mode used to compile graphs when ``compile_mode=None``.

    Returns
    -------
    str, pytensor Mode or None
        The mode set by :func:`set_compile_mode` (default ``"FAST_COMPILE"``).

    References
    ----------
    PyTensor compilation modes: https://pytensor.readthedocs.io (``FAST_COMPILE``,
    ``CVM``, ``NUMBA``).

    Examples
    --------
    >>> from calibprob.bases.gp import get_compile_mode, set_compile_mode
    >>> previous = get_compile_mode()   # "FAST_COMPILE" unless changed
    >>> set_compile_mode("NUMBA")
    >>> get_compile_mode()
    'NUMBA'
    >>> set_compile_mode(previous)
    """
    return _COMPILE_MODE


def set_compile_mode(mode: Any) -> None:
    """Set the process-wide PyTensor compile mode.

    Parameters
    ----------
    mode : str or pytensor Mode or None
        ``"FAST_COMPILE"`` (default; fast cold start), ``"NUMBA"`` or ``None``
        (PyTensor's default, Numba: slow cold JIT, cached on disk), ``"CVM"``
        (C, ~40 s cold). Already compiled functions stay cached under their own
        mode.

    References
    ----------
    PyTensor compilation modes: https://pytensor.readthedocs.io (``FAST_COMPILE``,
    ``CVM``, ``NUMBA``).

    Examples
    --------
    >>> from calibprob.bases.gp import get_compile_mode, set_compile_mode
    >>> previous = get_compile_mode()
    >>> set_compile_mode("FAST_COMPILE")
    >>> get_compile_mode()
    'FAST_COMPILE'
    >>> set_compile_mode(previous)
    """
    global _COMPILE_MODE
    _COMPILE_MODE = mode


def mode_key(mode: Any) -> Hashable:
    """A hashable stand-in for a compile mode in a cache key (a ``Mode`` object by identity)."""
    return mode if isinstance(mode, (str, type(None))) else id(mode)


# ---------------------------------------------------------------------------
# Graph caches
# ---------------------------------------------------------------------------

_ALL_CACHES: weakref.WeakSet = weakref.WeakSet()


class GraphCache:
    """A process-wide, thread-safe cache of compiled graphs.

    Parameters
    ----------
    name : str
        Names the cache in ``repr`` (which module's graphs it holds).

    Notes
    -----
    ``get(key, build)`` calls ``build()`` once per key, under the cache's lock
    (two threads asking for the same new graph compile it once). The key must
    hold everything that changes the symbolic graph; data go through
    ``pm.Data`` containers so one compiled function serves every data set.

    Examples
    --------
    >>> cache = GraphCache("example")
    >>> cache.get(("se", 2), lambda: "compiled")
    'compiled'
    >>> cache.get(("se", 2), lambda: "never called")
    'compiled'
    >>> len(cache)
    1
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._entries: dict = {}
        self._lock = threading.RLock()  # a build may itself ask a cache for a graph
        _ALL_CACHES.add(self)

    def get(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The entry under ``key``, built by ``build()`` on first use."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = build()
            return entry

    def clear(self) -> None:
        """Forget every entry (rebuilt on next use)."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Any) -> bool:
        return key in self._entries

    def __repr__(self) -> str:
        return f"GraphCache({self.name!r}, {len(self)} entries)"


def clear_caches() -> None:
    """Forget every compiled graph of every calibprob module (frees memory; rebuilt on next use).

    Examples
    --------
    >>> from calibprob._core.pytensor_setup import clear_caches
    >>> clear_caches()
    """
    for cache in list(_ALL_CACHES):
        cache.clear()


# ---------------------------------------------------------------------------
# BLAS threads
# ---------------------------------------------------------------------------

_BLAS_THREADS: int | str | None = "auto"
_AUTO_MEASURE_MIN_N = 1500  # below this, one thread (measured: no gain, stalls under load)
_MEASURED: dict = {}


def get_blas_threads() -> Any:
    """BLAS thread policy during GP hyperparameter optimisation (see :func:`set_blas_threads`).

    Returns
    -------
    "auto", int or None
        The policy set by :func:`set_blas_threads` (default ``"auto"``).

    References
    ----------
    threadpoolctl: https://github.com/joblib/threadpoolctl (the limit is applied
    with ``threadpool_limits``).

    Examples
    --------
    >>> from calibprob.bases.gp import get_blas_threads, set_blas_threads
    >>> previous = get_blas_threads()   # "auto" unless changed
    >>> set_blas_threads(None)
    >>> get_blas_threads() is None
    True
    >>> set_blas_threads(previous)
    """
    return _BLAS_THREADS


def set_blas_threads(value: Any) -> None:
    """BLAS threads used while optimising GP hyperparameters.

    Parameters
    ----------
    value : "auto", int or None
        ``"auto"`` (default): one thread inside a Dask worker (the workers
        already occupy the cores), for training sets below
        1500 rows, and whenever the machine's one-minute
        load leaves less than one idle core besides this process; otherwise a
        *measured* choice, made once per process: a Cholesky factorisation of
        a 1500 × 1500 covariance is timed with one thread and with every
        usable core, and the faster setting is kept. ``None``: never change the
        process setting. An int: that many threads.

    Notes
    -----
    The setting never oversubscribes by construction: one thread per Dask
    worker, and more than one thread in a single process only when the
    cores are idle *and* the measurement shows a gain. Measured on a shared
    2-core machine (OpenBLAS 0.3, load ≈ 1.2): two threads made ``dpotrf``
    2–4.7x and ``dpotri`` up to 3.9x *slower* than one at n = 1000–3000,
    and a 300-point fit was once 20x slower (44 s against 2.1 s) from
    OpenBLAS threads busy-waiting. The choice and its reason are recorded
    in ``fit_info_["blas_threads"]`` / ``fit_info_["blas_reason"]``. The
    limit is applied with ``threadpoolctl`` for the duration of ``fit``
    only (not prediction).

    References
    ----------
    threadpoolctl: https://github.com/joblib/threadpoolctl (the limit is applied
    with ``threadpool_limits``).

    Examples
    --------
    >>> from calibprob.bases.gp import get_blas_threads, set_blas_threads
    >>> previous = get_blas_threads()
    >>> set_blas_threads(1)
    >>> get_blas_threads()
    1
    >>> set_blas_threads(previous)
    """
    global _BLAS_THREADS
    if not (value is None or value == "auto" or (isinstance(value, int) and value >= 1)):
        raise ValueError(f"blas_threads must be 'auto', None or a positive int; got {value!r}.")
    _BLAS_THREADS = value


def _in_dask_worker() -> bool:
    try:
        from distributed import get_worker
    except ImportError:  # pragma: no cover - distributed is a dependency
        return False
    try:
        get_worker()
    except ValueError:
        return False
    return True


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _measure_threads(cores: int) -> int:
    """Faster of 1 and ``cores`` BLAS threads for a 1500 x 1500 Cholesky (best of 3)."""
    rng = np.random.default_rng(0)
    m = 1500
    A = rng.standard_normal((m, 64))
    K = A @ A.T / 64.0 + np.eye(m)
    best = {}
    for threads in (1, cores):
        with threadpool_limits(limits=threads, user_api="blas"):
            scipy.linalg.lapack.dpotrf(K, lower=1)  # warm-up (thread start-up)
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                scipy.linalg.lapack.dpotrf(K, lower=1)
                times.append(time.perf_counter() - t0)
        best[threads] = min(times)
    # more threads must win by a margin: under load they lose far more than they gain
    return cores if best[cores] < 0.8 * best[1] else 1


def blas_policy(n_rows: int) -> tuple[int | None, str]:
    """BLAS threads for a fit on ``n_rows`` rows under the current policy, and why.

    Returns
    -------
    threads : int or None
        ``None`` leaves the process setting alone.
    reason : str
    """
    policy = _BLAS_THREADS
    if policy is None:
        return None, "process setting (set_blas_threads(None))"
    if policy != "auto":
        return int(policy), "set_blas_threads"
    if _in_dask_worker():
        return 1, "one thread per Dask worker"
    cores = _usable_cores()
    if cores <= 1:
        return 1, "one usable core"
    if n_rows < _AUTO_MEASURE_MIN_N:
        return 1, f"n < {_AUTO_MEASURE_MIN_N}: threading does not pay"
    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover - no load average
        load = 0.0
    # this process is about to run, so it is part of the load it will see
    if cores - load < 1.5:
        return 1, f"machine busy (load {load:.1f} on {cores} cores)"
    if cores not in _MEASURED:
        _MEASURED[cores] = _measure_threads(cores)
    threads = _MEASURED[cores]
    return threads, f"measured: {threads} of {cores} cores faster for a 1500-row Cholesky"


def limit_blas_threads(threads: int | None) -> Any:
    """Context manager limiting BLAS to ``threads`` threads (``None``: leave the process setting).

    Examples
    --------
    >>> from calibprob._core.pytensor_setup import limit_blas_threads
    >>> with limit_blas_threads(1):
    ...     pass
    """
    if threads is None:
        return contextlib.nullcontext()
    return threadpool_limits(limits=int(threads), user_api="blas")


def blas_limit(n_rows: int, info: dict | None = None) -> Any:
    """Context manager applying :func:`blas_policy` for ``n_rows``; records the choice in ``info``."""
    threads, reason = blas_policy(n_rows)
    if info is not None:
        info["blas_threads"] = threads
        info["blas_reason"] = reason
    return limit_blas_threads(threads)
