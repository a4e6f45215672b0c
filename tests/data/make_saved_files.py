"""Write the saved-file fixtures of ``tests/data/saved-0.1.0/`` (files the 0.1.0 release writes).

One fitted instance of every registered class that :meth:`save` can write, fitted on the
seeded data of ``tests/support/saved_rows.py`` (its ``ROWS`` table: every calibrator, base and helper
estimator, user code included), saved with the code of the tree this script runs in, and
beside each file the arrays its prediction gives (``<name>.npz``).
``tests/_core/test_saved_files.py`` loads every file with the current code and checks its
predictions against those arrays, so a change to the file format or to a class's state
that breaks files already on users' disks fails there.

The files were written once, on the 0.1.0 tree (commit da54378), by::

    PYTHONPATH=$PWD OPENBLAS_NUM_THREADS=1 python tests/data/make_saved_files.py

Do not rerun it to make that test pass: the point of the files is that they are old.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the repository root: tests.support.saved_rows holds the ROWS table

import calibprob  # noqa: E402
from tests.support import saved_rows  # noqa: E402

OUT = HERE / "saved-0.1.0"


def main() -> None:
    """Fit, save and predict every row of ``saved_rows.ROWS`` into :data:`OUT`."""
    OUT.mkdir(exist_ok=True)
    data = saved_rows.Data()
    data.base.save(OUT / "_base.nc")
    index = {}
    for row in saved_rows.ROWS:
        est = row.fit(data)
        est.save(OUT / f"{row.name}.nc")  # before predicting: a Generator's state is saved unused
        arrays = saved_rows.arrays(row.predict(est, data))
        np.savez(OUT / f"{row.name}.npz", **arrays)
        index[row.name] = row.cls
    meta = {"calibprob_version": str(calibprob.__version__), "classes": index}
    (OUT / "index.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
