"""A method kind that kills its Dask worker once (the killed-worker test), registered when imported.

Imported by the test (to validate specs) and preloaded by the test's Dask workers (each worker process
has its own registry). ``kill-worker-once`` SIGKILLs the worker running it the first time (it leaves a
marker file first), and afterwards returns the base's predictive; it never kills a process that is not
a Dask worker (a serial run would be the test process itself).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from calibprob import registry
from calibprob._core.options import Str

KIND = "kill-worker-once"


def kill_once(ctx, entry, *, marker: str):
    """SIGKILL this Dask worker unless ``marker`` exists (it is written first); then the base's predictive."""
    from distributed import get_worker

    try:
        get_worker()
        in_worker = True
    except ValueError:
        in_worker = False
    path = Path(marker)
    if in_worker and not path.exists():
        path.write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    return ctx.predict_base(ctx.X_test)


def register() -> None:
    if KIND not in registry.METHODS:
        registry.register_method(
            KIND,
            None,
            family="distribution",
            output="distribution",
            options={"marker": Str()},
            doc="Test only: SIGKILL the Dask worker running it, once.",
            adapter=f"{__name__}:kill_once",
        )


register()
