"""Warm PyTensor's on-disk compile cache for the graphs of shipped specs (once per machine).

``make venv`` (and so ``make run``, ``make test``) runs ``python -m calibprob._warm
models/quickstart.toml`` right after installing: the first repetition of each
given spec's first data set is run in this process and its results are
discarded. Every PyTensor graph those calibrators compile (GP-Beta's ADVI step
with the C backend is the expensive one: ~45 s of C compilation of ~90 modules
on an empty cache) lands in PyTensor's cache directory (``~/.pytensor`` or the
``base_compiledir`` of ``PYTENSOR_FLAGS``), so the first real run loads compiled
modules instead of compiling them. The GP's own hyperparameter fit compiles
nothing (NumPy/SciPy objective), and the conformal and sharp-GP "scaled"
calibrators are NumPy.

Usage::

    python -m calibprob._warm [SPEC ...]        # default: models/quickstart.toml
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


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
    from calibprob.compare import load_spec
    from calibprob.compare.runner import run_task

    spec = load_spec(spec_path)
    t0 = time.perf_counter()
    run_task(spec.to_dict(), spec.datasets[0].name, 0)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv) or ["models/quickstart.toml"]
    for path in args:
        if not Path(path).is_file():
            print(
                f"calibprob._warm: no spec file {path!r}; pass the path of a TOML spec, e.g. models/quickstart.toml",
                file=sys.stderr,
            )
            return 2
        seconds = warm(path)
        print(f"calibprob: warmed the PyTensor compile cache for {path} in {seconds:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
