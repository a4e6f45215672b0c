"""Faults cost only what they touch: a worker killed mid-run, and work that would not fit in its worker.

Three pieces, used by :mod:`calibprob.runs.scheduling` and by the methods that allocate n x n arrays:

* **Why a task's worker died.** A task whose worker process died while running it comes back from Dask
  as ``KilledWorker``. :func:`killed_message` turns that into the row the user reads: the cause (out of
  memory, with the worker's limit and the resident size at which its nanny restarted it, read from the
  scheduler's ``worker-restart-memory`` events; otherwise a signal or the operating system's OOM killer)
  and the fix. A ``LocalCluster`` started by calibprob does not retry such a task on another worker
  (:data:`FAULT_CONFIG`): a task that ran a worker out of memory would take the next one down with it,
  and the methods running there.
* **Lost shared data.** A stage scattered from this process (a base fitted while the cluster started)
  has no recipe on the cluster: when every worker holding it dies, Dask forgets it and the tasks that
  need it are cancelled, and submitting another task that names it raises ``FuturesCancelledError:
  ... already forgotten``, which used to end the run. :func:`is_cancelled` recognises that outcome; the
  scheduler then scatters the stage again (from this process, which keeps it) and re-queues those tasks.
* **Memory budgets.** :func:`memory_budget` is what this process may still allocate: inside a Dask
  worker, the room below the fraction of the worker's ``memory_limit`` at which its nanny restarts it
  (not the machine's available memory, which two workers share); elsewhere, the machine's available
  memory. :func:`check_n_by_n` refuses, before allocating, work of ``k`` float64 ``n x n`` arrays that
  would not fit, naming the cause and the fix.
"""

from __future__ import annotations

import asyncio
import concurrent.futures

from calibprob._core.memory import GIB as _GIB
from calibprob._core.memory import memory_budget
from calibprob._core.memory import terminate_fraction as _terminate_fraction

__all__ = [
    "FAULT_CONFIG",
    "MEMORY_FIX",
    "memory_budget",
    "check_n_by_n",
    "is_cancelled",
    "is_killed_worker",
    "killed_message",
    "N_BY_N",
    "method_memory_arrays",
    "check_method_memory",
]

#: Dask configuration of the clusters calibprob starts: a task whose worker dies while running it is
#: failed at once (``KilledWorker``), not re-run on another worker. The task is recorded with its cause
#: and retried by the next run of the same command.
FAULT_CONFIG = {"distributed.scheduler.allowed-failures": 0}

#: What to do when the n x n work of an exact GP does not fit in a worker (issue 28).
MEMORY_FIX = (
    "use the sparse GP base (kind = 'sparse-gp', linear memory in n), run with --workers 1 (one worker "
    "gets all the memory), or, for the base fit, a smaller n_hyper_subset"
)


def check_n_by_n(n: int, n_matrices: float, what: str, *, fix: str = MEMORY_FIX) -> None:
    """Refuse, before allocating, work needing ``n_matrices`` float64 ``n x n`` arrays beyond :func:`memory_budget`.

    Parameters
    ----------
    n : int
        Rows of the square arrays (training rows of an exact GP).
    n_matrices : float
        How many ``n x n`` arrays are alive at the peak (an estimate; :math:`8 k n^2` bytes).
    what : str
        The step, for the message (e.g. "sharp-gp (variant 'full') on 12000 training rows").
    fix : str
        What to do instead, for the message.

    Raises
    ------
    MemoryError
        Naming the step, the memory it needs, the budget and where it comes from, and the fix.

    Examples
    --------
    >>> from calibprob.runs.faults import check_n_by_n
    >>> check_n_by_n(100, 3, "a small GP")  # 240 kB: fits
    >>> try:
    ...     check_n_by_n(10**7, 3, "a huge GP")
    ... except MemoryError as err:
    ...     print(str(err).split(" but ")[0])
    a huge GP needs about 2400000.0 GB (3 float64 10000000 x 10000000 arrays)
    """
    need = float(n_matrices) * 8.0 * float(n) ** 2
    budget, source = memory_budget()
    if need > budget:
        raise MemoryError(
            f"{what} needs about {need / 1e9:.1f} GB ({n_matrices:g} float64 {n} x {n} arrays) but {source} "
            f"is {budget / 1e9:.1f} GB; refused before allocating. Fix: {fix}."
        )


def is_cancelled(err: BaseException) -> bool:
    """Whether ``err`` says a future was cancelled (e.g. the data it needed was lost with its workers)."""
    return isinstance(err, (asyncio.CancelledError, concurrent.futures.CancelledError))


def is_killed_worker(err: BaseException) -> bool:
    """Whether ``err`` is Dask's ``KilledWorker``: the worker running the task died."""
    return type(err).__name__ == "KilledWorker" and hasattr(err, "last_worker")


def killed_message(err: BaseException, events=()) -> str:
    """The cause and the fix of a task whose worker died (a ``KilledWorker``), as a failed row says it.

    Parameters
    ----------
    err : KilledWorker
        Dask's exception; its ``last_worker`` carries the worker's address and memory limit.
    events : sequence of (float, dict)
        The scheduler's ``worker-restart-memory`` events (``client.get_events("worker-restart-memory")``):
        ``{"worker": address, "rss": bytes}`` for each worker its nanny restarted for memory.

    Returns
    -------
    str
        E.g. "worker killed: out of memory at 95 % of its 11.8 GiB limit (restarted at 11.3 GiB) ...".

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from calibprob.runs.faults import killed_message
    >>> err = SimpleNamespace(last_worker=SimpleNamespace(address="tcp://a:1", memory_limit=2**30))
    >>> killed_message(err, [(0.0, {"worker": "tcp://a:1", "rss": 1.0e9})]).split(";")[0]
    'worker killed: out of memory at 95 % of its 1.0 GiB limit (its nanny restarted it at 0.9 GiB)'
    """
    last = getattr(err, "last_worker", None)
    address = getattr(last, "address", "?")
    limit = float(getattr(last, "memory_limit", 0) or 0)
    rss = [float(e.get("rss", 0)) for _, e in events if isinstance(e, dict) and e.get("worker") == address]
    limit_text = f"{limit / _GIB:.1f} GiB" if limit else "unknown"
    if rss:
        cause = (
            f"worker killed: out of memory at {_terminate_fraction() * 100:.0f} % of its {limit_text} limit "
            f"(its nanny restarted it at {rss[-1] / _GIB:.1f} GiB)"
        )
    else:
        cause = (
            f"worker killed: its process ({address}, memory limit {limit_text}) died while running this "
            "task -- a signal, or the operating system's out-of-memory killer"
        )
    return (
        f"{cause}; the methods finished on other workers are kept, and rerunning the same command runs only "
        f"what is missing. Fix: {MEMORY_FIX}."
    )


#: Float64 ``n x n`` arrays alive at the peak of a method kind on an exact-GP base of ``n`` training rows,
#: by kind and variant, for the work that the GP's own checks (fit, leave-one-out) do not cover. The sharp
#: GP's ``full`` and ``cross-fitted`` variants factorise K(θ_δ) + σ²I at every objective evaluation: the
#: forward pass keeps the distances, the covariance, its Cholesky factor and the distances to the
#: calibration points; the gradient adds the covariance again, the n x n gradient with its triangle
#: copies and the lengthscale derivative (counted from ``calibrators/sharp_gp/_op.py``: 8-9). The
#: full-conformal GP adds L⁻¹ and one more n x n product to the fitted GP's factor.
N_BY_N = {
    ("sharp-gp", "full"): 9.0,
    ("sharp-gp", "cross-fitted"): 9.0,
    ("full-conformal-gp", None): 2.0,
}

#: Exact-GP base kinds (their methods' n x n work is what :func:`check_method_memory` refuses).
EXACT_GP_BASES = ("gp",)


def method_memory_arrays(kind: str, options: dict) -> float:
    """How many ``n x n`` float64 arrays a method of ``kind`` allocates on an exact GP at its peak (0: none)."""
    variant = options.get("variant", "full") if kind == "sharp-gp" else None
    return N_BY_N.get((kind, variant), 0.0)


def check_method_memory(kind: str, options: dict, base_kind, n_train: int) -> None:
    """Refuse a method whose n x n work on an exact-GP base would not fit in this worker, before it starts.

    Parameters
    ----------
    kind : str
        The method's kind (e.g. ``"sharp-gp"``).
    options : dict
        Its spec options (``variant`` of the sharp GP).
    base_kind : str or None
        The kind of the base it runs on; only an exact GP (``"gp"``) has n x n work.
    n_train : int
        The base's training rows.

    Raises
    ------
    MemoryError
        From :func:`check_n_by_n`, naming the method, the memory it needs, the worker's budget and the
        fix (the sharp GP's ``variant = "scaled"``, the sparse GP base, ``--workers 1``).

    Examples
    --------
    >>> from calibprob.runs.faults import check_method_memory
    >>> check_method_memory("sharp-gp", {"variant": "scaled"}, "gp", 10**6)  # no n x n work: nothing to check
    >>> check_method_memory("sharp-gp", {}, "gp", 300)  # 6 MB: fits
    """
    k = method_memory_arrays(kind, options)
    if not k or base_kind not in EXACT_GP_BASES:
        return
    fix = ("variant = 'scaled' (the base GP's own σ, no n x n work), " if kind == "sharp-gp" else "") + MEMORY_FIX
    variant = f" (variant {options.get('variant', 'full')!r})" if kind == "sharp-gp" else ""
    check_n_by_n(n_train, k, f"{kind}{variant} on an exact GP of {n_train} training rows", fix=fix)
