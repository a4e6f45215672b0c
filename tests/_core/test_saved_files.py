"""Files saved by calibprob 0.1.0 still load, and predict what they predicted then.

``tests/data/saved-0.1.0/`` holds one file per registered class that ``save`` writes
(every row of ``tests.support.saved_rows.ROWS``), written by the 0.1.0 tree with
``tests/data/make_saved_files.py``, and beside each the arrays its prediction gave at
that time. The reference is those stored arrays: each file is loaded with the current
code, predicts on the same seeded inputs, and must give the same arrays: the same
infinities, and finite values within ``CROSS_MACHINE`` of the array's scale (bit for bit on
the machine that wrote them; the last bits move with the processor). Every prediction here
is deterministic given the saved state (seeded generators are saved with their state).
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


#: Largest difference allowed between a prediction now and the one stored, relative to the array's largest finite
#: magnitude. The stored arrays were written on another processor: NumPy's SIMD loops (exp, log, sqrt) and
#: OpenBLAS's kernels are chosen by CPU at run time, so the last bits of a GP's Cholesky solve differ between
#: machines with the same package versions (measured on an AMD EPYC with AVX-512 against the stored files:
#: at most 1.6e-13 of the array's scale, over every class; GP.loo() moved to the one closed-form LOO since
#: 0.1.0, 4.4e-14). A wrong load (another hyperparameter, another calibration set) moves them by orders more.
CROSS_MACHINE = 1e-11


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
        if expected.dtype.kind != "f":
            assert np.array_equal(got[key], expected), key
            continue
        finite = np.isfinite(expected)
        np.testing.assert_array_equal(np.isfinite(got[key]), finite, err_msg=key)
        np.testing.assert_array_equal(got[key][~finite], expected[~finite], err_msg=key)  # the same infinities
        scale = np.max(np.abs(expected[finite]), initial=0.0)
        np.testing.assert_allclose(got[key][finite], expected[finite], rtol=0, atol=CROSS_MACHINE * scale, err_msg=key)
