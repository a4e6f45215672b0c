"""Shared data fixtures: the seeded synthetic sets several test modules use (generators in ``tests.support.data``).

A fixture here is shared only when the data are the same formula drawn in the same order; each test asks for its
own ``n`` and seed, so every number a test checks is the one it always checked. Data one module alone uses stay in
that module. Repository paths are in ``tests.support.paths`` (constants, needed at import time by parametrize).
"""

from __future__ import annotations

import pytest

from tests.support import data


@pytest.fixture(scope="session")
def sine_surface():
    """``sine_surface(n, seed, noise=0.2) -> (X, y)``: the smooth 2-D surface of the GP tests."""
    return data.sine_surface


@pytest.fixture(scope="session")
def gaussian_forecasts():
    """``gaussian_forecasts(n, seed, spread) -> (loc, scale, y)``: Gaussian forecasts, outcomes ``spread`` wider."""
    return data.gaussian_forecasts
