"""Seeded synthetic data sets shared by several test modules (the fixtures of ``tests/conftest.py`` hand them out).

Each generator draws from ``numpy.random.default_rng(seed)`` in a fixed order, so a test that asks for the same
``(n, seed, ...)`` gets the same numbers it always had.
"""

from __future__ import annotations

import numpy as np


def sine_surface(n: int, seed: int, noise: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    r"""``n`` points uniform on :math:`[0, 1]^2`, :math:`y = \sin 6x_1 + \cos 4x_2 + \text{noise}\,\varepsilon`.

    The smooth 2-D surface of the exact, sparse and conformal GP tests (lengthscales near 0.3-0.4).
    """
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    y = np.sin(6 * X[:, 0]) + np.cos(4 * X[:, 1]) + noise * rng.normal(size=n)
    return X, y


def gaussian_forecasts(n: int, seed: int, spread: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Heteroscedastic Gaussian forecasts ``N(loc, scale)`` and outcomes drawn ``N(loc, spread * scale)``.

    ``spread > 1`` makes the forecasts over-confident by that factor (a known miscalibration for the metrics).
    """
    rng = np.random.default_rng(seed)
    loc = rng.normal(size=n)
    scale = np.exp(rng.normal(scale=0.5, size=n))
    y = rng.normal(loc, spread * scale)
    return loc, scale, y
