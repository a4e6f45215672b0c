"""Every notebook in notebooks/ runs top to bottom (reduced size via CALIBPROB_NOTEBOOK_SMOKE)."""

import os
import re
import sys
from pathlib import Path

import pytest

from tests.support import paths

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted(paths.NOTEBOOKS.glob("*.ipynb"))

#: What the smoke run must print, per notebook: the code paths a shortened run could otherwise skip
#: (notebook 12's stream is long enough in smoke mode to reach the alarm and the Monitored actions on it).
MUST_PRINT = {
    "12-calibrated-over-time.ipynb": (
        r"first alarm 2017-12-27, day 144 of the stream",
        r"reset actions: \[\('2017-12-27', 'reset'\)",
        r"refit actions: \[\('2017-12-27', 'refit'\)",
        r"one-step predictives from \d+ fits",
    ),
}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    monkeypatch.setenv("CALIBPROB_NOTEBOOK_SMOKE", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    # the kernel must be this interpreter (the project's virtual environment)
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"
    ]
    assert not errors
    printed = "".join(
        o.get("text", "")
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("name") == "stdout"
    )
    for pattern in MUST_PRINT.get(path.name, ()):
        assert re.search(pattern, printed), f"{path.name}: the smoke run printed no {pattern!r}"
