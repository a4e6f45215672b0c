"""Files saved by calibprob 0.1.0 still load, and predict what they predicted then.

``tests/data/saved-0.1.0/`` holds one file per registered class that ``save`` writes
(every row of ``tests.support.saved_rows.ROWS``), written by the 0.1.0 tree with
``tests/data/make_saved_files.py``, and beside each the arrays its prediction gave at
that time. The reference is those stored arrays: each file is loaded with the current
code, predicts on the same seeded inputs, and must give the same arrays — bit for bit
(``np.array_equal``), since every prediction here is deterministic given the saved state
(seeded generators are saved with their state).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import calibprob
from tests.support import saved_rows
from tests.support.paths import TEST_DATA

SAVED = TEST_DATA / "saved-0.1.0"
INDEX = json.loads((SAVED / "index.json").read_text())["classes"]


@pytest.fixture(scope="module")
def data():
    return saved_rows.Data(base=calibprob.load(SAVED / "_base.nc"))


def test_every_class_saved_by_0_1_0_is_still_registered_and_saveable():
    """The files cover every class 0.1.0 could save (the index was written from the ROWS of tests/support/saved_rows.py);
    a class added since has its round trip in tests/_core/test_io.py, not a 0.1.0 file."""
    savable = {
        name
        for name, entry in calibprob.registry.CLASSES.items()
        if entry.module.startswith("calibprob") and hasattr(calibprob.registry.load_object(entry.target), "get_params")
    }
    saved = set(INDEX.values())
    assert len(saved) >= 20
    assert saved <= savable, sorted(saved - savable)


#: (row, key prefix) of outputs recomputed, after loading, by code whose floating-point steps changed
#: since 0.1.0 on purpose, with the relative tolerance and why. Everything else is bit for bit.
RECOMPUTED = {
    ("GaussianProcessRegressor-constant-matern", "1."): (
        1e-13,
        "GP.loo() now goes through the one closed-form LOO (calibprob.bases.gp.loo's kriging system: Cholesky "
        "and trtri, instead of cho_solve against the identity); the same formula, 5.4e-15 relative apart",
    ),
}


@pytest.mark.parametrize("name", sorted(INDEX))
def test_file_saved_by_0_1_0_loads_and_predicts_the_same(data, name):
    row = saved_rows.ROW_BY_NAME[name]
    est = calibprob.load(SAVED / f"{name}.nc", **row.objects())
    assert type(est).__name__ == INDEX[name]
    got = saved_rows.arrays(row.predict(est, data))
    with np.load(SAVED / f"{name}.npz", allow_pickle=False) as z:
        want = {k: z[k] for k in z.files}
    assert set(got) == set(want)
    for key, expected in want.items():
        assert got[key].shape == expected.shape, key
        tol = next(
            (t for (row_name, prefix), (t, _) in RECOMPUTED.items() if row_name == name and key.startswith(prefix)), 0
        )
        if tol:
            np.testing.assert_allclose(got[key], expected, rtol=tol, atol=0, err_msg=key)
        else:
            assert np.array_equal(got[key], expected, equal_nan=expected.dtype.kind == "f"), key
