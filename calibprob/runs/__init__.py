"""Running a grid of tasks: output paths and parts, scheduling (serial, a LocalCluster, a cluster), process set-up.

The one resumable task executor behind ``calibprob compare`` and ``calibprob bo`` (it was
``calibprob.runs`` before 0.2.0; that path still imports, with a ``FutureWarning``):

* ``calibprob.runs.outputs`` -- the results path, ``<out>.parts/`` (one checksummed file per
  finished task, reused by a rerun), the lock, atomic writes;
* ``calibprob.runs.scheduling`` -- :func:`execute`: serial, a new ``LocalCluster`` or an existing
  cluster, shared stages, pieces, longest-first hand-out;
* ``calibprob.runs.cluster`` -- the workers' process set-up (malloc, Dask configuration) and the
  scheduler address;
* ``calibprob.runs.faults`` -- what a killed worker or a memory budget costs: the cause and the fix
  of a failed task, the memory a task may use in its worker.
"""

from __future__ import annotations

from calibprob.runs.cluster import (
    SCHEDULER_TIMEOUT,
    WORKER_CONFIG,
    WORKER_MALLOC,
    check_scheduler_address,
    local_cluster,
    tune_malloc,
)
from calibprob.runs.outputs import (
    OutputError,
    RunOutput,
    check_output_path,
    content_checksum,
    default_part_name,
    finished_parts,
    inside,
    is_netcdf,
    load_part,
    safe_name,
    store_part,
    write_atomic,
)
from calibprob.runs.scheduling import execute, failure_table

__all__ = [
    "OutputError",
    "safe_name",
    "inside",
    "is_netcdf",
    "check_output_path",
    "content_checksum",
    "write_atomic",
    "RunOutput",
    "store_part",
    "load_part",
    "default_part_name",
    "finished_parts",
    "execute",
    "failure_table",
    "tune_malloc",
    "local_cluster",
    "check_scheduler_address",
    "SCHEDULER_TIMEOUT",
    "WORKER_MALLOC",
    "WORKER_CONFIG",
]
