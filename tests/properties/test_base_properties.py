"""Properties of every registered base model (role ``"base"`` in :mod:`calibprob.registry`).

Each base class is built with the cheapest honest settings, chosen by *constructor parameter*
(:data:`tests.support.bases.BASE_FAST`: one optimiser start, few inducing points, ADVI with few iterations and
draws), never by class name; a base registered tomorrow is checked here at once.

* **shapes** — ``predict(X)`` gives one row per input row; ``X`` with the wrong number of
  columns and ``y`` of the wrong length are refused naming the argument and both sizes;
* **bounds** — quantiles non-decreasing, CDF and PIT in [0, 1], intervals ``lower <= upper``;
* **permutation** — permuting the test rows permutes the prediction (bases without posterior
  sampling; a sampling base draws its predictive noise by row position);
* **equivariance** (bases without posterior sampling: no ``draws`` parameter) — fitted on
  :math:`a + s\\,y` with ``s`` from 1e-200 to 1e200, the predictive is the mapped one, or —
  only beyond 1e±100, where a base's own variances (in y's units squared) leave float64 — the
  fit is refused with a message saying how to rescale (the GPs and BayesianRidge do so at 1e200).

6 classes x 4 properties; examples: a third of the profile's for the fits, which dominate.
"""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.support.bases import (
    BASE_FAST,
    BASES,
    X_TE,
    X_TR,
    Y_TE,
    Y_TR,
    base_class,
    build_base,
    fitted_base,
    samples_posterior,
)

from .conftest import scales, shifts

_EXAMPLES = max(3, settings().max_examples // 3)

_samples = samples_posterior
fitted = fitted_base


@pytest.mark.parametrize("name", BASES)
def test_base_shapes_are_checked(name):
    model = fitted(name)
    assert model.predict(X_TE).sizes["obs"] == len(X_TE)
    with pytest.raises(ValueError, match=r"X.*(3|columns|features).*2|X.*2.*(3|columns|features)"):
        model.predict(np.c_[X_TE, X_TE[:, :1]])
    with pytest.raises(ValueError, match=r"(y|X).*(30|29).*(29|30)"):
        build_base(name).fit(X_TR, Y_TR[:-1])


@pytest.mark.parametrize("name", BASES)
@settings(max_examples=_EXAMPLES)
@given(u=st.floats(-30.0, 30.0), perm=st.permutations(range(7)))
def test_base_bounds_and_permutation(name, u, perm):
    pred = fitted(name).predict(X_TE)
    q = pred.calib.quantiles
    assert np.all(np.diff(q, axis=1) >= 0) and not np.isnan(q).any()
    for v in (pred.calib.cdf(Y_TE + u).values, pred.calib.pit(Y_TE + u).values):
        assert np.all((v >= 0) & (v <= 1))
    iv = pred.calib.interval([0.5, 0.9])
    assert np.all(iv["lower"].values <= iv["upper"].values)
    if not _samples(name):
        # a sampling base draws its posterior-predictive noise by test-row position (seeded):
        # permuting the rows changes which draws each row gets, so only the others are exact
        perm = np.asarray(perm)
        np.testing.assert_allclose(fitted(name).predict(X_TE[perm]).calib.quantiles, q[perm], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", [n for n in BASES if not _samples(n)])
@settings(max_examples=_EXAMPLES)
@given(s=scales(), t=shifts())
@example(s=1e200, t=0.0)
@example(s=1e-200, t=0.0)
@example(s=1e130, t=2.0)
def test_base_is_equivariant(name, s, t):
    a = t * s
    ref = _equivariant_fit(name, X_TR, Y_TR).predict(X_TE).calib.quantiles
    try:
        model = _equivariant_fit(name, X_TR, a + s * Y_TR)
    except ValueError as err:
        # a base whose own parameters (variances, in y's units squared) leave float64 may refuse,
        # but only at extreme magnitudes, and saying how to rescale
        assert not 1e-100 <= s <= 1e100, f"refused at scale {s:g}: {err}"
        assert re.search(r"(Rescale|Divide) .*y", str(err)), str(err)
        return
    out = model.predict(X_TE).calib.quantiles
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose((out - a) / s, ref, rtol=1e-4, atol=1e-4 * (1 + np.abs(ref).max()))


def _equivariant_fit(name, X, y):
    """The base with an offset-invariant mean where it has the choice (a zero-mean GP is, by its
    declared model, not shift-equivariant)."""
    params = inspect.signature(base_class(name)).parameters
    kwargs = {k: v for k, v in BASE_FAST.items() if k in params} | ({"mean": "constant"} if "mean" in params else {})
    return base_class(name)(**kwargs).fit(X, y)
