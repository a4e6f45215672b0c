"""Write ``online_interval_reference.npz``: the three one-level online interval classes' outputs (issue 40).

Run from the repository root, at commit bfe024b (before the ``predict`` / ``predict_interval`` glue of
``calibprob/calibrators/online/_interval.py`` was written once)::

    PYTHONPATH=$PWD python tests/data/make_online_interval_reference.py

What is stored: ``tests.support.online_outputs.online_interval_outputs()`` (ACI, conformal PID and AgACI,
each with two configurations, ungrouped and grouped, over a fixed seeded stream). The test
``tests/calibrators/online/test_interval_glue.py`` asserts the current code reproduces every array exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.support.online_outputs import online_interval_outputs


def main() -> None:
    path = Path(__file__).with_name("online_interval_reference.npz")
    np.savez_compressed(path, **online_interval_outputs())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
