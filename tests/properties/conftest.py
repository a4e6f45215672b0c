"""Shared strategies, Hypothesis profiles and the table of predictive constructors.

Profiles (``CALIBPROB_HYPOTHESIS_PROFILE``, default ``"props"``): ``props`` is the default test
run — ``derandomize=True`` (the same examples every run, so CI is reproducible), no deadline
(a GP fit's first call compiles), and :data:`MAX_EXAMPLES` examples per property; ``thorough``
(``CALIBPROB_HYPOTHESIS_PROFILE=thorough``) draws 20x as many, at random, to hunt for new
counterexamples. The per-test ``max_examples`` of the expensive model-aware properties are
fractions of the profile's (see each test).

What runs by default (measured 2026-11-26 on the 2-core shared machine: 90 tests, 163 s of
pytest time for ``pytest tests/properties``):

==========================  =======  ==========  =====================================
file                        classes  properties  examples per property
==========================  =======  ==========  =====================================
test_predictive_properties  5 ctors  3           12 (+ 2-3 pinned ``@example``)
test_calibrator_properties  8 + 5    4 + 2       12 post-processors, 3 model-aware (+2)
test_base_properties        6        3           3-4 (+3 pinned for equivariance)
test_edge_cases             —        15 cases    one each (named edge cases)
test_row_label_properties   5 ctors  11          12 (the Mondrian table 6); issue 36
test_messages               all      1 (+1)      every raise site (AST scan)
==========================  =======  ==========  =====================================

Every magnitude is drawn as ``m * 10**e`` with ``e`` from -200 to 200 (both ends included by
:func:`scales`), so the named extremes (1e-200, 1e200) are always tried: Hypothesis
shrinks toward the simplest example, and ``@example`` pins the named ones.
"""

from __future__ import annotations

import inspect
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from scipy import stats

import calibprob
from calibprob import registry
from calibprob.transforms import back_transform

#: Hypothesis examples per property in the default run (the ``props`` profile).
MAX_EXAMPLES = 12

settings.register_profile(
    "props",
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)
settings.register_profile(
    "thorough",
    max_examples=20 * MAX_EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)
settings.load_profile(os.environ.get("CALIBPROB_HYPOTHESIS_PROFILE", "props"))


def scales() -> st.SearchStrategy[float]:
    """Positive factors ``m * 10**e``, ``e`` in [-200, 200], ``m`` in [1, 10): every magnitude from 1e-200 to 1e200."""
    return st.builds(lambda e, m: float(m) * 10.0**e, st.integers(-200, 200), st.floats(1.0, 9.99))


def shifts() -> st.SearchStrategy[float]:
    """Shifts in units of the scale (a shift of 1e5 scales at scale 1e-200 would be all rounding)."""
    return st.floats(-100.0, 100.0, allow_nan=False)


# ---------------------------------------------------------------------------
# the predictive contract's constructors: each builds the law of a + s * Y from the law of Y
# ---------------------------------------------------------------------------

N_OBS = 6
LEVELS = np.round(np.linspace(0.05, 0.95, 19), 10)
_RNG = np.random.default_rng(20261126)
_LOC = _RNG.normal(size=N_OBS)
_SD = np.exp(_RNG.normal(scale=0.3, size=N_OBS))
_T_QUANTILES = _LOC[:, None] + _SD[:, None] * stats.t.ppf(LEVELS, 4)[None, :]
_DRAWS = _LOC + _SD * _RNG.standard_t(5, size=(400, N_OBS))
_GRID = np.linspace(-8, 8, 161)
_GRID_CDF = stats.logistic.cdf((_GRID[None, :] - _LOC[:, None]) / (0.6 * _SD[:, None]))
#: observed values (on the scale of the unshifted law), one per observation
Y_OBS = _LOC + _SD * _RNG.standard_normal(N_OBS)


def _normal(a, s):
    return calibprob.normal(a + s * _LOC, s * _SD)


def _quantiles(a, s):
    return calibprob.from_quantiles(a + s * _T_QUANTILES, LEVELS)


def _draws(a, s):
    return calibprob.from_draws(a + s * _DRAWS)


def _cdf_grid(a, s):
    return calibprob.from_cdf_grid(a + s * _GRID[None, :] * np.ones((N_OBS, 1)), _GRID_CDF, LEVELS)


def _log_transformed(a, s):
    # Y = exp(Z): s * Y = exp(Z + log s), so the scaled law is the back-transform of a shifted Z law
    assert a == 0.0
    return back_transform(calibprob.normal(_LOC + np.log(s), 0.5 * _SD), "log")


#: name -> (builder(a, s), supports shifts); a builder registered tomorrow is a new row here
CONSTRUCTORS = {
    "normal": (_normal, True),
    "from_quantiles": (_quantiles, True),
    "from_draws": (_draws, True),
    "from_cdf_grid": (_cdf_grid, True),
    "log-transformed": (_log_transformed, False),
}


def y_for(name: str, a: float, s: float) -> np.ndarray:
    """Observed values for the law of constructor ``name`` under ``a + s * Y``."""
    if name == "log-transformed":
        return s * np.exp(Y_OBS)
    return a + s * Y_OBS


# ---------------------------------------------------------------------------
# the registry's calibrators, chosen by role/family/output, never by class name
# ---------------------------------------------------------------------------

#: Cheapest honest settings, keyed by *constructor parameter* (applied to any class that has it):
#: MAP instead of sampling, few inducing points and levels, a fixed seed, extrapolated tails.
FAST_PARAMETERS = {
    "inference": "map",
    "n_inducing": 8,
    "n_levels": 5,
    "random_state": 0,
    "extrapolate": True,
    "prefit": True,
    "variant": "scaled",
    "n_bootstraps": 4,  # EnbPI: four bootstrap fits instead of 30
    "burnin": 3,  # conformal PID's proportional step from the last 3 scores (groups of a few rows)
}


def calibrators(family: str) -> list[str]:
    """Registered calibrator classes of one family (a class registered tomorrow appears here)."""
    return sorted(n for n, e in registry.CLASSES.items() if e.role == "calibrator" and e.family == family)


def gp_only(name: str) -> bool:
    """Whether every spec kind of this class serves only GP bases (the registry's ``serves``)."""
    kinds = [m for m in registry.METHODS.values() if m.cls == name]
    return bool(kinds) and all(m.serves is not None and "gp" in m.serves for m in kinds)


def pymc_only(name: str) -> bool:
    """Whether every spec kind of this class serves only PyMC bases (it needs a fitted posterior).

    Such a class (the LOO jackknife+) is left out of the model-aware property checks, which fit
    cheap NumPy bases many times; its own tests (tests/test_loo_*.py) check it on PyMC fits.
    """
    kinds = [m for m in registry.METHODS.values() if m.cls == name]
    return bool(kinds) and all(
        m.serves is not None and all(b.startswith("pymc") or b in registry.FRAME_BASES for b in m.serves) for m in kinds
    )


def _accepts(name: str, key: str, value) -> bool:
    """Whether ``value`` is allowed for option ``key`` by every spec kind of class ``name`` that declares it."""
    for m in registry.METHODS.values():
        option = (m.options or {}).get(key) if m.cls == name else None
        if option is not None and hasattr(option, "values") and value not in option.values:
            return False
    return True


def build(name: str, **extra):
    """An instance of registered class ``name`` with :data:`FAST_PARAMETERS` where it takes them."""
    cls = registry.CLASSES[name].load()
    params = inspect.signature(cls).parameters
    kwargs = {k: v for k, v in FAST_PARAMETERS.items() if k in params and _accepts(name, k, v)}
    # a lifecycle's extras (``cv=`` of a cross-conformal fit) go only to the classes that take them
    kwargs.update({k: v for k, v in extra.items() if k in params})
    return cls(**kwargs)


@pytest.fixture(scope="session")
def tiny_gp_problem():
    """A 1-D regression problem and an exact GP fitted once on it (for the GP-only classes)."""
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, size=(40, 1))
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.standard_normal(40)
    gp = calibprob.GaussianProcessRegressor(random_state=0).fit(X[:20], y[:20])
    return {"X_tr": X[:20], "y_tr": y[:20], "X_cal": X[20:], "y_cal": y[20:], "gp": gp}
