"""How much memory this process may still allocate: inside a Dask worker, the room below its limit.

:func:`memory_budget` is what a step that allocates ``n x n`` arrays checks before allocating: inside a Dask
worker, the room below the fraction of the worker's ``memory_limit`` at which its nanny restarts it (not the
machine's available memory, which two workers share); elsewhere, the machine's available memory. It lives
in the core so that the bases (the exact GP's own checks) and the executor (``calibprob.runs.faults``)
share it without a base reaching into the run layer.
"""

from __future__ import annotations

import os
from typing import Any

try:  # installed with Dask (a dependency of distributed); optional for calibprob itself
    import psutil
except ImportError:  # pragma: no cover - depends on the install
    psutil = None

__all__ = ["GIB", "PEAK_N_BY_N", "PEAK_OVERHEAD", "machine_total", "memory_budget", "terminate_fraction"]

#: Bytes in a GiB (the unit Dask reports worker limits in).
GIB = 2.0**30


def _dask_worker() -> Any:
    """The Dask worker running this code, or None (serial runs, the main process, no Dask installed)."""
    try:
        from distributed import get_worker
    except ImportError:  # pragma: no cover - Dask is optional
        return None
    try:
        return get_worker()
    except ValueError:  # "No worker found": not inside a task
        return None


def terminate_fraction() -> float:
    """The fraction of its memory limit at which a worker's nanny restarts it (Dask's default 0.95)."""
    try:
        import dask

        value = dask.config.get("distributed.worker.memory.terminate", 0.95)
    except ImportError:  # pragma: no cover
        value = 0.95
    return float(value) if value else 1.0


def _machine_available() -> float:
    """The memory the operating system reports as available (psutil, else ``/proc/meminfo``; inf if unknown)."""
    if psutil is not None:
        return float(psutil.virtual_memory().available)
    try:  # pragma: no cover - Linux without psutil
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024.0
    except OSError:  # pragma: no cover
        pass
    return float("inf")  # pragma: no cover


def machine_total() -> float:
    """The machine's total memory in bytes (psutil; inf if unknown): what one worker could have at most."""
    if psutil is None:  # pragma: no cover - depends on the install
        return float("inf")
    return float(psutil.virtual_memory().total)


def memory_budget() -> tuple[float, str]:
    r"""Bytes this process may still allocate, and where the figure comes from.

    Inside a Dask worker with a memory limit :math:`M` whose nanny restarts it at the fraction
    :math:`f` of it (``distributed.worker.memory.terminate``, 0.95 by default), the budget is
    :math:`f M - \mathrm{RSS}`, the room left before the restart, capped by the machine's available
    memory; elsewhere the machine's available memory.

    Returns
    -------
    budget : float
        Bytes.
    source : str
        What the figure is, for messages (e.g. "the room left in this Dask worker: 95 % of its
        11.8 GiB memory limit minus 2.3 GiB in use").

    Examples
    --------
    >>> from calibprob._core.memory import memory_budget
    >>> budget, source = memory_budget()  # not in a Dask worker: the machine's available memory
    >>> budget > 0, source
    (True, "the machine's available memory")
    """
    machine = _machine_available()
    worker = _dask_worker()
    limit = getattr(getattr(worker, "memory_manager", None), "memory_limit", None)
    if not limit:
        return machine, "the machine's available memory"
    fraction = terminate_fraction()
    used = float(psutil.Process(os.getpid()).memory_info().rss)
    room = max(0.0, fraction * float(limit) - used)
    source = (
        f"the room left in this Dask worker: {fraction:.0%} of its {float(limit) / GIB:.1f} GiB memory "
        f"limit minus {used / GIB:.1f} GiB in use"
    )
    return (room, source) if room <= machine else (machine, "the machine's available memory")


#: Measured peak of each step's n x n work beyond the fitted base it starts from: :data:`PEAK_OVERHEAD`
#: bytes plus this many float64 ``n x n`` arrays (``benchmarks/faults_measure.py``: resident size sampled
#: every 2 ms in one process, n = 1000 to 4600; the coefficient at the largest n, rounded up; at small n a
#: fixed part -- the objective's compilation, the test predictions -- dominates and is what the overhead
#: covers). Measured (arrays of n x n at n = 1000 / 2000 / 4600): ``fit`` (the exact GP's hyperparameter
#: fit refined on all rows, and its factorisation) 6.3 / 4.0 / -; ``factorise`` (the factorisation alone,
#: as above 4000 rows) 4.6 / 2.7 / 2.2; ``loo`` (its closed-form leave-one-out) 3.0 / 3.0 / - (4.0 at 2500 and 3500 rows of 3 features);
#: ``refit`` (one refit of CV+ / jackknife+, kept until the method is assembled; in arrays of the refit's
#: own rows) 1.8 / 1.8 / 1.8; J+GP 7.7 / 2.8 / 2.0; the full-conformal GP 8.4 / 2.9 / -; the sharp GP's
#: ``full`` variant 21.2 / 11.0 / - (its objective's compilation: most of the 0.16 GiB at n = 1000).
PEAK_N_BY_N = {
    "fit": 6.5,
    "factorise": 5.0,
    "loo": 4.5,
    "refit": 2.0,
    "jackknife-plus-gp": 3.5,
    "asym-jackknife-plus-gp": 3.5,
    "full-conformal-gp": 3.5,
    "sharp-gp": 12.0,
}

#: Bytes of every step's measured peak that do not grow with n (see :data:`PEAK_N_BY_N`).
PEAK_OVERHEAD = 0.25 * GIB
