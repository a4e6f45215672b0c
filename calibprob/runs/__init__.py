"""Running a grid of tasks: output paths and parts, scheduling (serial, a LocalCluster, a cluster), process set-up.

The one resumable task executor behind ``calibprob compare`` and ``calibprob bo`` (it was
``calibprob.runs`` before 0.2.0; that path still imports, with a ``FutureWarning``).
"""

from __future__ import annotations

from calibprob.runs.scheduling import (
    SCHEDULER_TIMEOUT,
    WORKER_CONFIG,
    WORKER_MALLOC,
    OutputError,
    RunOutput,
    check_output_path,
    check_scheduler_address,
    content_checksum,
    default_part_name,
    execute,
    failure_table,
    inside,
    load_part,
    local_cluster,
    safe_name,
    store_part,
    tune_malloc,
    write_atomic,
)
from calibprob.runs.scheduling import _finished_parts as finished_parts
from calibprob.runs.scheduling import _is_netcdf as is_netcdf

__all__ = [
    "OutputError",
    "safe_name",
    "inside",
    "check_output_path",
    "content_checksum",
    "write_atomic",
    "RunOutput",
    "store_part",
    "load_part",
    "default_part_name",
    "finished_parts",
    "is_netcdf",
    "execute",
    "failure_table",
    "tune_malloc",
    "local_cluster",
    "check_scheduler_address",
    "SCHEDULER_TIMEOUT",
    "WORKER_MALLOC",
    "WORKER_CONFIG",
]
