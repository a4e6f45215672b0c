"""The one-level online interval classes after their ``predict`` / ``predict_interval`` glue was written once
(``calibrators/online/_interval.py``, issue 40): every output equals the one stored before the refactor."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.support.online_outputs import online_interval_outputs

REFERENCE = Path(__file__).parents[2] / "data" / "online_interval_reference.npz"


@pytest.fixture(scope="module")
def outputs() -> dict[str, np.ndarray]:
    return online_interval_outputs()


def test_outputs_equal_the_pre_refactor_ones_bit_for_bit(outputs):
    # stored from commit bfe024b by tests/data/make_online_interval_reference.py
    with np.load(REFERENCE) as ref:
        assert sorted(ref.files) == sorted(outputs)
        for key in ref.files:
            np.testing.assert_array_equal(outputs[key], ref[key], err_msg=key, strict=True)
