"""Page faults per allocation: whether freed GP-sized matrices are reused or mmap-ed (and faulted in) afresh."""

from __future__ import annotations

import resource

import numpy as np


def faults_per_allocation() -> float:
    """Page faults per 4 MB array allocated and freed again and again (a GP fit's working set)."""

    def burst():
        for _ in range(20):
            a = np.ones((720, 720))
            del a

    burst()  # the first use of the memory faults it in
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    burst()
    return (resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before) / 20
