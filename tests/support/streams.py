"""Seeded streams that break exchangeability, shared by the online calibrators' guarantee tests.

Proposition 4.1 of Gibbs & Candès (2021) and Theorem 2 of Deshpande et al. (2024) hold for *any*
sequence; these three are the issue's adversarial kinds (an abrupt change, a slow drift, a
seasonal series), on which split conformal fitted once loses its coverage.
"""

from __future__ import annotations

import numpy as np

#: The kinds :func:`adversarial_stream` draws.
KINDS = ("abrupt", "drift", "seasonal")


def adversarial_stream(kind: str, T: int, rng: np.random.Generator) -> np.ndarray:
    """Outcomes around a forecast of N(0, 1): the noise quadruples after T/3 (``"abrupt"``), the mean
    drifts by 3 over the stream (``"drift"``), or the noise scale swings with period 200 (``"seasonal"``)."""
    t = np.arange(T)
    if kind == "abrupt":
        return np.where(t < T // 3, 1.0, 4.0) * rng.normal(size=T)
    if kind == "drift":
        return rng.normal(size=T) + 3.0 * t / T
    if kind == "seasonal":
        return (1.0 + 0.8 * np.sin(2 * np.pi * t / 200)) * rng.normal(size=T)
    raise ValueError(f"kind must be one of {KINDS}; got {kind!r}.")
