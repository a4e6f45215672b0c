"""Every registered base model built with the cheapest honest settings, chosen by constructor parameter.

:data:`BASE_FAST` names parameters, never classes (one optimiser start, few inducing points, ADVI with few
iterations and draws), so a base registered tomorrow is built and checked at once by the base contract of
``tests/test_common.py`` and the properties of ``tests/properties/test_base_properties.py``.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from calibprob import registry

#: The registered base classes (role ``"base"``), by name.
BASES = sorted(n for n, e in registry.CLASSES.items() if e.role == "base")
BASE_FAST = {
    "n_restarts": 1,
    "random_state": 0,
    "n_inducing": 6,
    "inference": "advi",
    "n_iter": 300,
    "draws": 40,
    "chains": 1,
    "tune": 0,
    "m": 8,
}


#: A small seeded 2-D regression (30 training, 7 test rows) every base fits in well under a second, PyMC's aside.
_RNG = np.random.default_rng(17)
X_TR = _RNG.uniform(-2, 2, size=(30, 2))
Y_TR = np.sin(X_TR[:, 0]) + 0.5 * X_TR[:, 1] + 0.3 * _RNG.standard_normal(30)
X_TE = _RNG.uniform(-2, 2, size=(7, 2))
Y_TE = np.sin(X_TE[:, 0]) + 0.5 * X_TE[:, 1]


def base_class(name: str) -> type:
    """The registered base class ``name``."""
    return registry.CLASSES[name].load()


def build_base(name: str):
    """An unfitted ``name`` with the :data:`BASE_FAST` values its constructor takes."""
    params = inspect.signature(base_class(name)).parameters
    return base_class(name)(**{k: v for k, v in BASE_FAST.items() if k in params})


def samples_posterior(name: str) -> bool:
    """Whether the base draws from a posterior (a ``draws`` parameter): the slow fits, PyMC's."""
    return "draws" in inspect.signature(base_class(name)).parameters


@functools.cache
def fitted_base(name: str):
    """``build_base(name)`` fitted on :data:`X_TR`, :data:`Y_TR`, once per test session (callers only predict)."""
    return build_base(name).fit(X_TR, Y_TR)
