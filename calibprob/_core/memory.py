"""How much memory this process may still allocate: inside a Dask worker, the room below its limit.

:func:`memory_budget` is what a step that allocates ``n x n`` arrays checks before allocating: inside a Dask
worker, the room below the fraction of the worker's ``memory_limit`` at which its nanny restarts it (not the
machine's available memory, which two workers share); elsewhere, the machine's available memory. It lives
in the core so that the bases (the exact GP's own checks) and the executor (:mod:`calibprob.runs.faults`)
share it without a base reaching into the run layer.
"""

from __future__ import annotations

import os

try:  # installed with Dask (a dependency of distributed); optional for calibprob itself
    import psutil
except ImportError:  # pragma: no cover - depends on the install
    psutil = None

__all__ = ["GIB", "PEAK_N_BY_N", "memory_budget", "terminate_fraction"]

#: Bytes in a GiB (the unit Dask reports worker limits in).
GIB = 2.0**30


def _dask_worker():
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


#: Measured peak of each step's n x n work, in float64 ``n x n`` arrays beyond the fitted base it starts from
#: (``benchmarks/faults_measure.py``: resident size sampled every 2 ms, n = 1000, 2000, 3000, one process;
#: the largest coefficient, rounded up). ``fit``: the exact GP's hyperparameter fit refined on all rows and
#: its factorisation; ``factorise``: the factorisation alone (above 4000 rows the subset's θ is used as it
#: is); ``loo``: its closed-form leave-one-out; ``refit``: one refit of CV+ / jackknife+ (a GP fitted on the
#: other folds, kept until the method is assembled, in units of the refit's own rows); the three GP methods
#: on a fitted exact GP (each predicts the test rows too).
PEAK_N_BY_N = {
    "fit": 7.0,
    "factorise": 5.0,
    "loo": 4.0,
    "refit": 2.0,
    "jackknife-plus-gp": 8.0,
    "asym-jackknife-plus-gp": 8.0,
    "full-conformal-gp": 8.0,
    "sharp-gp": 9.0,
}
