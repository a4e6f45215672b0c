"""Warm PyTensor's on-disk compile cache for the graphs of shipped specs (once per machine).

``make venv`` (and so ``make run``, ``make test``) runs ``python -m calibprob._core.warm
models/quickstart.toml`` right after installing: the first repetition of each
given spec's first data set is run in this process and its results are
discarded. Every PyTensor graph those calibrators compile lands in PyTensor's
cache directory (``~/.pytensor`` or the ``base_compiledir`` of
``PYTENSOR_FLAGS``), so the first real run loads compiled modules instead of
compiling them.

Since GP-Beta's full-batch MAP / ADVI / SVI evaluate a NumPy objective
(``calibprob.calibrators.gp_beta._objective``), the quickstart compiles nothing: its cold run equals its warm run,
and warming costs one repetition (~4 s of CPU) and reports that there was
nothing to compile. Specs that sample GP-Beta with NUTS, minibatch its ADVI /
SVI (more than 4096 calibration points) or fit a PyMC base still compile
graphs, and those are what this step warms.

Usage::

    python -m calibprob._core.warm [SPEC ...]        # default: models/quickstart.toml
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from calibprob.compare import load_spec
from calibprob.compare.tasks import run_task


def warm(spec_path: str | Path) -> float:
    """Run repetition 0 of the spec's first data set in-process; return the seconds taken.

    Parameters
    ----------
    spec_path : str or Path
        A comparison spec (TOML).

    Returns
    -------
    float
    """
    spec = load_spec(spec_path)
    t0 = time.perf_counter()
    run_task(spec.to_dict(), spec.datasets[0].name, 0)
    return time.perf_counter() - t0


def main(argv: Any = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv) or ["models/quickstart.toml"]
    for path in args:
        if not Path(path).is_file():
            print(
                f"calibprob._core.warm: no spec file {path!r}; pass the path of a TOML spec, e.g. models/quickstart.toml",
                file=sys.stderr,
            )
            return 2
        seconds = warm(path)
        if "pytensor" in sys.modules:
            print(f"calibprob: warmed the PyTensor compile cache for {path} in {seconds:.1f} s", file=sys.stderr)
        else:
            print(
                f"calibprob: {path} compiles no PyTensor graph (ran one repetition in {seconds:.1f} s; nothing to warm)",
                file=sys.stderr,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
