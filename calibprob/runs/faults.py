"""Faults cost only what they touch: a worker killed mid-run, and work that would not fit in its worker.

Four pieces, used by ``calibprob.runs.scheduling`` and by the methods that allocate n x n arrays:

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
* **Memory budgets.** ``calibprob._core.memory.memory_budget`` is what this process may still
  allocate: inside a Dask worker, the room below the fraction of the worker's ``memory_limit`` at which
  its nanny restarts it (not the machine's available memory, which two workers share); elsewhere, the
  machine's available memory. :func:`check_n_by_n` refuses, before allocating, work of ``k`` float64
  ``n x n`` arrays that would not fit, naming the cause and the fix.
* **Estimates before the n x n work of a method on an exact GP** (:func:`method_work`): its Cholesky
  factorisations counted by size (:data:`COST`, measured) and its peak memory (measured coefficients,
  :data:`calibprob._core.memory.PEAK_N_BY_N`). :func:`check_method_time` refuses a method whose
  factorisations, at this process's measured :func:`factorisation_rate`, would take longer than the
  spec's ``max_method_minutes``; :func:`check_method_memory` one that would not fit in the worker.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from calibprob._core.memory import GIB, PEAK_N_BY_N, PEAK_OVERHEAD, machine_total, memory_budget
from calibprob._core.memory import terminate_fraction as _terminate_fraction

__all__ = [
    "FAULT_CONFIG",
    "MEMORY_FIX",
    "memory_budget",
    "check_n_by_n",
    "is_cancelled",
    "is_killed_worker",
    "killed_message",
    "PEAK_N_BY_N",
    "COST",
    "Work",
    "method_work",
    "gp_fit_factorisations",
    "check_method_memory",
    "check_method_time",
    "factorisation_rate",
    "choose_gp",
    "gp_exact_max_rows",
    "sparse_gp_table",
]

#: Dask configuration of the clusters calibprob starts: a task whose worker dies while running it is
#: failed at once (``KilledWorker``), not re-run on another worker. The task is recorded with its cause
#: and retried by the next run of the same command.
FAULT_CONFIG = {"distributed.scheduler.allowed-failures": 0}

#: What to do when the n x n work of an exact GP does not fit in a worker (the message names a way out).
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


def killed_message(err: BaseException, events: Sequence[tuple[float, dict]] = ()) -> str:
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
    limit_text = f"{limit / GIB:.1f} GiB" if limit else "unknown"
    if rss:
        cause = (
            f"worker killed: out of memory at {_terminate_fraction() * 100:.0f} % of its {limit_text} limit "
            f"(its nanny restarted it at {rss[-1] / GIB:.1f} GiB)"
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


#: Measured time of each step in Cholesky factorisations of its ``n x n`` matrix (``n^3/3`` flops at the
#: process's :func:`factorisation_rate`; ``benchmarks/faults_measure.py`` and ``tests/runs/test_faults.py``,
#: n = 1000 to 4600). ``fit-evals``: the exact GP's multi-start hyperparameter fit on all its rows (below
#: 1000 rows, or its subset), never less than ``fit-floor`` factorisations of 500 rows (below ~1200 rows the
#: PyTensor and optimiser overhead of its evaluations, not their n^3, sets its time: 8-10 s at 500 to 900
#: rows); ``refine``: the refinement on all rows (1000 to 4000 rows; fit at 2000 rows measured 3.3-3.5e11
#: flops with its 500-row subset); ``factorise``: the factorisation after the fit (2.0-3.0 measured);
#: ``loo`` and the GP conformal methods: the closed-form leave-one-out and the test predictions (J+GP
#: 1.5-3.1 on an idle machine, 7-10 at a load average of 8, where the short timing of the rate
#: overstates the sustained speed); ``sharp-gp-knot``: one knot of the sharp GP's ``full`` /
#: ``cross-fitted`` variant (its L-BFGS-B evaluations, each a factorisation with its gradient; 1066 per
#: knot at n = 1000 with 21 knots, where the objective's overhead dominates; 665 per knot at n = 2000
#: with 3 knots, whose first knot's restarts weigh 2.45 times more than with 21 at n = 1000, so about
#: 270 with 21 knots: 300 is used, low for a small training set, where overhead dominates).
COST = {
    "fit-evals": 400.0,
    "fit-floor": 6000.0,
    "refine": 30.0,
    "factorise": 3.0,
    "loo": 5.0,
    "jackknife-plus-gp": 4.0,
    "asym-jackknife-plus-gp": 4.0,
    "full-conformal-gp": 5.0,
    "sharp-gp-knot": 300.0,
}

#: Exact-GP base kinds (their methods' n x n work is what :func:`check_method_memory` refuses).
EXACT_GP_BASES = ("gp",)

#: The exact GP's automatic hyperparameter subset (mirrors :mod:`calibprob.bases.gp.exact`'s constants).
_SUBSET_MIN_N, _SUBSET_SIZE, _REFINE_MAX_N, _LARGE_SUBSET_SIZE = 1000, 500, 4000, 2000

#: The fix of a method whose estimated time is beyond the spec's ``max_method_minutes``.
TIME_FIX = (
    "use the sparse GP base (kind = 'sparse-gp', time linear in n), raise max_method_minutes at the top of "
    "the spec, or give the base a smaller n_hyper_subset"
)


@dataclass(frozen=True)
class Work:
    r"""A method's estimated ``n x n`` work on an exact GP: Cholesky factorisations by size, and its peak memory.

    ``factorisations``: ``(count, rows)`` items, each ``count`` factorisation-equivalents of a
    ``rows x rows`` matrix (:math:`\text{rows}^3/3` flops each); ``what``: the steps they count, for
    messages; ``peak_bytes``: float64 bytes alive at the peak beyond the fitted base; ``peak_text``: how
    that figure is made up.
    """

    factorisations: tuple[tuple[float, int], ...] = ()
    what: str = ""
    peak_bytes: float = 0.0
    peak_text: str = ""

    @property
    def flops(self) -> float:
        r"""Floating-point operations of the factorisations: :math:`\sum \text{count}\cdot\text{rows}^3/3`."""
        return sum(c * float(r) ** 3 / 3.0 for c, r in self.factorisations)

    def describe(self) -> str:
        """The factorisations by size, e.g. ``"6300 of 12000 x 12000 (21 knots' L-BFGS-B evaluations)"``."""
        sizes: dict[int, float] = {}
        for c, r in self.factorisations:
            sizes[r] = sizes.get(r, 0.0) + c
        counts = " + ".join(f"{c:.0f} of {r} x {r}" for r, c in sorted(sizes.items(), key=lambda rc: -rc[0]))
        return f"{counts} ({self.what})" if self.what else counts


def gp_fit_factorisations(n: int, base_options: dict | None = None) -> list[tuple[float, int]]:
    """Factorisation-equivalents of fitting the exact GP on ``n`` rows with its spec options (``n_hyper_subset``...).

    Mirrors ``calibprob.bases.gp.GaussianProcessRegressor._subset_plan``: no optimisation, one
    factorisation; all rows (below 1000, or ``n_hyper_subset = None``-like), the multi-start fit on them;
    otherwise the fit of the subset (itself by these rules) and, up to 4000 rows, a refinement on all rows.
    """
    opts = base_options or {}
    out = [(COST["factorise"], n)]
    if opts.get("optimize", True) is False or opts.get("optimizer", "lbfgs") != "lbfgs":
        return out
    m = opts.get("n_hyper_subset", "auto")
    if m == "auto":
        m = None if n < _SUBSET_MIN_N else (_SUBSET_SIZE if n <= _REFINE_MAX_N else _LARGE_SUBSET_SIZE)
    if m is None or int(m) >= n:
        # (the floor: a 500-row fit's overhead, counted in factorisations of n rows)
        return [(max(COST["fit-evals"], COST["fit-floor"] * (_SUBSET_SIZE / n) ** 3), n), *out]
    refine = opts.get("refine_hyper", "auto")
    refine = n <= _REFINE_MAX_N if refine == "auto" else bool(refine)
    sub = gp_fit_factorisations(int(m), {k: v for k, v in opts.items() if k not in ("n_hyper_subset", "refine_hyper")})
    return sub + ([(COST["refine"], n)] if refine else []) + out


def _kind_work(kind: str, options: dict, base_options: dict, n: int, refits: tuple[int, int] | None) -> Work:
    """:class:`Work` of one method kind on an exact GP of ``n`` training rows (``refits``: count and rows)."""
    if refits is not None and refits[0] > 0:
        count, rows = refits
        one = gp_fit_factorisations(rows, base_options)
        held = count * PEAK_N_BY_N["refit"] * 8.0 * rows**2
        return Work(
            tuple((count * c, r) for c, r in one),
            f"{count} refits of the GP on {rows} rows, each a hyperparameter fit and a factorisation",
            PEAK_OVERHEAD + held + PEAK_N_BY_N["fit"] * 8.0 * rows**2,
            f"{count} refitted GPs of {rows} rows kept until the method is assembled, and one fit",
        )
    if kind == "sharp-gp" and options.get("variant", "full") in ("full", "cross-fitted"):
        rows = min(n, int(options.get("n_train_subset") or n))
        knots = int(options.get("n_levels", 21))
        return Work(
            ((knots * COST["sharp-gp-knot"], rows),),
            f"{knots} knots' L-BFGS-B evaluations",
            PEAK_OVERHEAD + PEAK_N_BY_N["sharp-gp"] * 8.0 * rows**2,
            f"{PEAK_N_BY_N['sharp-gp']:g} arrays of {rows} x {rows} and {PEAK_OVERHEAD / GIB:g} GiB",
        )
    if kind in COST and kind in PEAK_N_BY_N:  # the GP conformal methods: the closed-form LOO on all rows
        return Work(
            ((COST[kind], n),),
            "the closed-form leave-one-out and the test predictions",
            PEAK_OVERHEAD + PEAK_N_BY_N[kind] * 8.0 * n**2,
            f"{PEAK_N_BY_N[kind]:g} arrays of {n} x {n} and {PEAK_OVERHEAD / GIB:g} GiB",
        )
    return Work()


def method_work(kind: str, options: dict, base_spec: dict, n_train: int, refits: tuple[int, int] | None = None) -> Work:
    """The estimated ``n x n`` work of a method on its base (none unless the base is an exact GP).

    Parameters
    ----------
    kind : str
        The method's kind.
    options : dict
        Its spec options (``variant``, ``n_levels``, ``n_train_subset`` of the sharp GP).
    base_spec : dict
        The base's spec table (``kind``; ``n_hyper_subset``, ``refine_hyper``, ``optimize``).
    n_train : int
        The base's training rows.
    refits : (int, int), optional
        For a method that refits the base (CV+, jackknife+, jackknife): how many refits, on how many rows.

    Returns
    -------
    Work

    Examples
    --------
    >>> from calibprob.runs.faults import method_work
    >>> method_work("sharp-gp", {}, {"kind": "gp"}, 2000).describe()
    "6300 of 2000 x 2000 (21 knots' L-BFGS-B evaluations)"
    >>> method_work("sharp-gp", {}, {"kind": "sparse-gp"}, 2000).flops
    0
    """
    if base_spec.get("kind") not in EXACT_GP_BASES:
        return Work()
    options = {k: v for k, v in options.items() if k != "bases"}
    return _kind_work(kind, options, {k: v for k, v in base_spec.items() if k != "kind"}, int(n_train), refits)


# ---------------------------------------------------------------------------
# kind = "gp" that chooses: the exact GP up to a documented size, the sparse GP above (issue 37)
# ---------------------------------------------------------------------------

#: The memory the exact GP's fit may take when ``kind = "gp"`` chooses (``exact`` not given): its
#: measured peak, :data:`PEAK_N_BY_N` ``["fit"]`` arrays of n x n plus :data:`PEAK_OVERHEAD`, within
#: 1.6 GB, so that two workers with the J+GP's closed form and CV+'s refits beside it stay within 8 GB.
GP_EXACT_MEMORY = 1.6e9

#: The sparse GP's inducing points when ``kind = "gp"`` chooses it (its own default; ``n_inducing`` sets them).
GP_SPARSE_INDUCING = 300

#: Options of ``kind = "gp"`` that the runner reads (the choice), never given to the class.
GP_CHOICE_OPTIONS = ("exact", "n_inducing")

#: Options of the exact GP that the sparse GP does not take (dropped when the sparse GP is chosen).
_EXACT_ONLY = ("refine_hyper",)


def gp_exact_max_rows() -> int:
    r"""The largest training size at which ``kind = "gp"`` runs the exact GP: 5 061 rows.

    The largest :math:`n` with :math:`8 \cdot 6.5\, n^2 + 0.25\ \text{GiB} \le` :data:`GP_EXACT_MEMORY`
    (the exact fit's measured peak, :data:`PEAK_N_BY_N`); there its fit is about 3 factorisations of
    n x n after a 2000-row hyperparameter subset (:func:`gp_fit_factorisations`), under a minute at
    1 GFLOP/s, while the sharp GP's ``full`` variant and CV+'s refits are already hours or gigabytes.

    Examples
    --------
    >>> from calibprob.runs.faults import gp_exact_max_rows
    >>> gp_exact_max_rows()
    5060
    """
    return int(((GP_EXACT_MEMORY - PEAK_OVERHEAD) / (8.0 * PEAK_N_BY_N["fit"])) ** 0.5)


def sparse_gp_table(table: dict) -> dict:
    """The sparse GP's table for an exact GP's (``kind`` ``gp``): the options they share, ``n_inducing``.

    ``n_inducing`` is the table's, else :data:`GP_SPARSE_INDUCING`; the exact GP's own options are dropped.

    Examples
    --------
    >>> from calibprob.runs.faults import sparse_gp_table
    >>> sparse_gp_table({"kind": "gp", "kernel": "se", "refine_hyper": True, "exact": True})
    {'kind': 'sparse-gp', 'kernel': 'se', 'n_inducing': 300}
    """
    m = int(table.get("n_inducing", GP_SPARSE_INDUCING))
    rest = {k: v for k, v in table.items() if k not in (*GP_CHOICE_OPTIONS, *_EXACT_ONLY)}
    return {**rest, "kind": "sparse-gp", "n_inducing": m}


def choose_gp(table: dict, n_train: int) -> tuple[dict, str]:
    """The base table a ``kind = "gp"`` base runs as on ``n_train`` rows, and a line saying what and why.

    Up to :func:`gp_exact_max_rows` training rows (or with ``exact = true``) the exact GP, its table
    unchanged but for the choice options; above, the sparse GP (kind ``sparse-gp``) with
    ``n_inducing`` (default :data:`GP_SPARSE_INDUCING`) and the exact GP's options it shares. Any other
    kind comes back as it is, with an empty line.

    Examples
    --------
    >>> from calibprob.runs.faults import choose_gp
    >>> choose_gp({"kind": "gp", "kernel": "se"}, 300)[0]
    {'kind': 'gp', 'kernel': 'se'}
    >>> choose_gp({"kind": "gp", "kernel": "se"}, 12000)[0]
    {'kind': 'sparse-gp', 'kernel': 'se', 'n_inducing': 300}
    """
    if table.get("kind") != "gp":
        return table, ""
    limit = gp_exact_max_rows()
    rest = {k: v for k, v in table.items() if k not in GP_CHOICE_OPTIONS}
    if table.get("exact") or n_train <= limit:
        why = "exact = true" if table.get("exact") else f"{n_train} training rows <= {limit}"
        return rest, f"exact GP ({why})"
    sparse = sparse_gp_table(table)
    m = sparse["n_inducing"]
    return sparse, (
        f"sparse GP with {m} inducing points ({n_train} training rows > {limit}, where the exact GP's fit "
        f"alone would need about {(PEAK_OVERHEAD + 8.0 * PEAK_N_BY_N['fit'] * n_train**2) / 1e9:.1f} GB; "
        "exact = true forces the exact GP)"
    )


def _method_fix(kind: str, options: dict, generic: str) -> str:
    if kind == "sharp-gp":
        return (
            "variant = 'scaled' (the base GP's own σ: no n x n work), n_train_subset = 2000 (θ fitted on a subset "
            "of the training rows), " + generic
        )
    return generic


def check_method_memory(
    kind: str,
    options: dict,
    base_kind: str | None,
    n_train: int,
    *,
    base_spec: dict | None = None,
    refits: tuple[int, int] | None = None,
) -> None:
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
    base_spec : dict, optional
        The base's spec table (its options); default ``{"kind": base_kind}``.
    refits : (int, int), optional
        Refits of the base and their rows (CV+, jackknife+), see :func:`method_work`.

    Raises
    ------
    MemoryError
        Naming the method, the memory it needs (:data:`PEAK_N_BY_N`, measured), the worker's budget and
        the fix (the sharp GP's ``variant = "scaled"``, the sparse GP base, ``--workers 1``).

    Examples
    --------
    >>> from calibprob.runs.faults import check_method_memory
    >>> check_method_memory("sharp-gp", {"variant": "scaled"}, "gp", 10**6)  # no n x n work: nothing to check
    >>> check_method_memory("sharp-gp", {}, "gp", 300)  # 6 MB: fits
    """
    work = method_work(kind, options, base_spec or {"kind": base_kind}, n_train, refits)
    if not work.peak_bytes:
        return
    budget, source = memory_budget()
    if work.peak_bytes > budget:
        fix = MEMORY_FIX
        if work.peak_bytes > 0.95 * machine_total():  # one worker with all the memory would not hold it either
            fix = f"use the sparse GP base (kind = 'sparse-gp', linear memory in n) or fewer training rows ({fix_rows(work, n_train)})"
        raise MemoryError(
            f"{_method_label(kind, options, n_train)} needs about {work.peak_bytes / 1e9:.1f} GB ({work.peak_text}, "
            f"measured) but {source} is {budget / 1e9:.1f} GB; refused before allocating. "
            f"Fix: {_method_fix(kind, options, fix)}."
        )


def fix_rows(work: Work, n_train: int) -> str:
    """How many training rows would fit in 95 % of the machine's memory (the estimate grows as n^2)."""
    scale = (0.95 * machine_total() / max(work.peak_bytes, 1.0)) ** 0.5
    return f"at most about {int(n_train * scale)} on this machine's {machine_total() / GIB:.1f} GiB"


def _method_label(kind: str, options: dict, n_train: int) -> str:
    variant = f" (variant {options.get('variant', 'full')!r})" if kind == "sharp-gp" else ""
    return f"{kind}{variant} on an exact GP of {n_train} training rows"


def check_method_time(
    kind: str,
    options: dict,
    base_spec: dict,
    n_train: int,
    max_minutes: float,
    *,
    refits: tuple[int, int] | None = None,
) -> float:
    r"""Refuse a method whose estimated time on an exact GP is beyond ``max_minutes``, before it starts.

    The estimate is :math:`\sum_i c_i\, n_i^3/3` flops (:func:`method_work`: the count :math:`c_i` of
    Cholesky factorisations of each size :math:`n_i`, measured per step in :data:`COST`) over this process's
    measured :func:`factorisation_rate`.

    Parameters
    ----------
    kind, options, base_spec, n_train, refits
        As in :func:`method_work`.
    max_minutes : float
        The spec's ``max_method_minutes``.

    Returns
    -------
    float
        The estimated minutes (0 for a method without n x n work).

    Raises
    ------
    TimeoutError
        Naming the estimate, the count and size of the factorisations, the measured rate, the budget and the
        fix (the sparse GP base, a larger ``max_method_minutes``, ``n_hyper_subset``; for the sharp GP its
        ``variant = "scaled"`` or ``n_train_subset``).

    Examples
    --------
    >>> from calibprob.runs.faults import check_method_time
    >>> check_method_time("isotonic", {}, {"kind": "gp"}, 10**6, 1.0)  # no n x n work
    0.0
    """
    work = method_work(kind, options, base_spec, n_train, refits)
    if not work.flops:
        return 0.0
    rate = factorisation_rate()
    minutes = work.flops / rate / 60.0
    if minutes > max_minutes:
        raise TimeoutError(
            f"{_method_label(kind, options, n_train)} would take about {minutes:.0f} min "
            f"({work.describe()} Cholesky factorisations at the {rate / 1e9:.1f} GFLOP/s measured in this "
            f"process), beyond max_method_minutes = {max_minutes:g}; refused before starting. "
            f"Fix: {_method_fix(kind, options, TIME_FIX)}."
        )
    return minutes


#: Rows of the Cholesky factorisation timed by :func:`factorisation_rate` (0.33 GFLOP: a tenth of a second).
RATE_N = 1000

_RATE: dict[str, float] = {}


def factorisation_rate() -> float:
    r"""This process's measured Cholesky rate in flop/s: :math:`n^3/3` flops over the best of three timings.

    A one-off timing of the factorisation of a :data:`RATE_N`-row SPD matrix (seeded), cached for the
    life of the process (a Dask worker measures once, with the BLAS threads it runs with).

    Returns
    -------
    float
        Flop/s.

    Examples
    --------
    >>> from calibprob.runs.faults import factorisation_rate
    >>> factorisation_rate() > 1e7  # any machine: more than 10 Mflop/s
    True
    """
    if "rate" not in _RATE:
        rng = np.random.default_rng(0)
        A = rng.standard_normal((RATE_N, RATE_N))
        A = A @ A.T + RATE_N * np.eye(RATE_N)
        best = np.inf
        for _ in range(3):
            B = A.copy()
            t0 = time.perf_counter()
            scipy.linalg.cho_factor(B, lower=True, overwrite_a=True, check_finite=False)
            best = min(best, time.perf_counter() - t0)
        _RATE["rate"] = RATE_N**3 / 3.0 / max(best, 1e-9)
    return _RATE["rate"]
