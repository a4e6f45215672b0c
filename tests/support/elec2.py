"""ELEC2 for the tests: the shared ``elec2.csv`` and the two extracts the issue-38 specs read.

ELEC2's licence is not established, so the repository ships neither the file nor the extracts
(``models/data/make_elec2_extracts.py`` builds them). Tests that need them call :func:`elec2_extracts`,
which builds them from ``$CALIBPROB_SHARED_DATA`` (default ``../shared/data`` beside the checkout) or
skips, naming the folder it looked in.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from tests.support.paths import MODELS, REPO_ROOT

DATA = Path(os.environ.get("CALIBPROB_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
ELEC2_SPECS = ("barber2023-nexcp-elec2", "angelopoulos2023-pid-elec2")


def extract_builder():
    """``models/data/make_elec2_extracts.py`` as a module."""
    spec = importlib.util.spec_from_file_location("make_elec2_extracts", MODELS / "data" / "make_elec2_extracts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def elec2_extracts() -> tuple[Path, Path]:
    """The two extracts' paths, built from the shared ``elec2.csv`` when it is there (else the test skips)."""
    if not (DATA / "elec2.csv").exists():
        pytest.skip(
            f"{DATA} lacks elec2.csv (not shipped: its licence is not established); set CALIBPROB_SHARED_DATA "
            "to the folder holding it"
        )
    builder = extract_builder()
    builder.make(DATA)
    return builder.NEXCP, builder.PID
