"""Shared data fixtures: the seeded synthetic sets several test modules use (generators in ``tests.support.data``).

A fixture here is shared only when the data are the same formula drawn in the same order; each test asks for its
own ``n`` and seed, so every number a test checks is the one it always checked. Data one module alone uses stay in
that module. Repository paths are in ``tests.support.paths`` (constants, needed at import time by parametrize).
"""

from __future__ import annotations

import os

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


# --- The seed sweep (issue 40) -------------------------------------------------------------------------------------
# A test whose assertion rests on a random path (NUTS/ADVI draws, an optimiser's random starts, a Monte Carlo
# statistic against a threshold) takes its seed from the ``seed`` argument and carries ``@pytest.mark.seeded(s)``:
# the default run uses seed ``s`` (the one the test always used, so its documented numbers stay), and the same
# assertions are collected again at seeds 0..N-1 marked ``slow`` (ids ``sweep0``...), so ``make test-seeds``
# (``pytest -m "seeded and slow"``) and ``make test-slow`` run the sweep. A seeded NUTS path moves with the
# processor's floating-point kernels and the package versions, so a run on another machine is in effect another
# seed: a margin that holds over the sweep holds there too. N is 20 unless ``--seed-sweep=N`` or the environment
# variable ``CALIBPROB_SEED_SWEEP`` says otherwise. ``seeded(s, scope="module")`` lets a module-scoped fixture
# (one fit shared by several tests) take ``seed`` too.

SEED_SWEEP_DEFAULT = 20


def pytest_addoption(parser):
    parser.addoption(
        "--seed-sweep",
        type=int,
        default=None,
        help="number of seeds (0..N-1) the slow sweep of every @pytest.mark.seeded test runs "
        f"(default $CALIBPROB_SEED_SWEEP or {SEED_SWEEP_DEFAULT})",
    )


def _sweep_size(config) -> int:
    n = config.getoption("--seed-sweep")
    if n is None:
        n = int(os.environ.get("CALIBPROB_SEED_SWEEP", SEED_SWEEP_DEFAULT))
    if n < 0:
        raise pytest.UsageError(f"--seed-sweep must be >= 0; got {n}. Give the number of seeds, e.g. --seed-sweep=20.")
    return n


def pytest_generate_tests(metafunc):
    marker = metafunc.definition.get_closest_marker("seeded")
    if marker is None or "seed" not in metafunc.fixturenames:
        return
    if len(marker.args) != 1 or not isinstance(marker.args[0], int):
        raise pytest.UsageError(
            f"{metafunc.definition.nodeid}: seeded takes the default seed, e.g. @pytest.mark.seeded(1); got {marker.args}"
        )
    values = [pytest.param(marker.args[0], id=f"seed{marker.args[0]}")]
    values += [pytest.param(s, id=f"sweep{s}", marks=pytest.mark.slow) for s in range(_sweep_size(metafunc.config))]
    metafunc.parametrize("seed", values, scope=marker.kwargs.get("scope", "function"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A recorded statistic as a plain Python number: pytest-xdist's workers cannot send a NumPy scalar."""
    report = yield
    report.user_properties = [(k, v.item() if hasattr(v, "item") else v) for k, v in report.user_properties]
    return report
