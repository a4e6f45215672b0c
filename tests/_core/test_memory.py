"""The memory budget: the machine's available memory, or, inside a Dask worker, the room below its limit."""

from __future__ import annotations

from types import SimpleNamespace

import psutil
import pytest

from calibprob._core import memory

GIB = 2.0**30


def test_memory_budget_outside_a_worker_is_the_machines_available_memory():
    budget, source = memory.memory_budget()
    assert source == "the machine's available memory"
    assert budget == pytest.approx(psutil.virtual_memory().available, rel=0.05)


def test_memory_budget_inside_a_worker_is_the_room_below_its_limit(monkeypatch):
    """Dask's memory limit of the worker, not the machine's memory: 0.95 x limit minus what the process holds."""
    limit = 3 * GIB
    worker = SimpleNamespace(memory_manager=SimpleNamespace(memory_limit=limit))
    monkeypatch.setattr(memory, "_dask_worker", lambda: worker)
    rss = psutil.Process().memory_info().rss
    budget, source = memory.memory_budget()
    assert budget == pytest.approx(0.95 * limit - rss, abs=64 * 2**20)  # the RSS moves a little between reads
    assert "95% of its 3.0 GiB memory limit" in source and "GiB in use" in source
    huge = SimpleNamespace(memory_manager=SimpleNamespace(memory_limit=10**15))
    monkeypatch.setattr(memory, "_dask_worker", lambda: huge)  # a limit beyond the machine: the machine bounds it
    assert memory.memory_budget()[1] == "the machine's available memory"
