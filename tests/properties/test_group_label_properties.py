"""Group labels and row labels are identities, not text or positions (issue 36), over every post-processor.

Driven by the registry: every distribution post-processor (all of them take ``groups=``, see
:func:`test_every_post_processor_takes_groups`), on 60 calibration and 8 test points in two
groups of 30 / 4. Properties (``props`` profile: :data:`MAX_EXAMPLES` // 2 examples each, derandomised):

* relabelling the groups by an injective map -- to integers, text, unicode text or a pandas
  Categorical -- changes nothing but the labels (the predicted values are bitwise equal);
* the groups given as a ``pandas.Series`` / ``DataArray`` carrying the prediction's row labels,
  shuffled with them, change nothing (aligned by label); the same values shuffled without their
  labels (a plain array) are read by position: the result is the one of the permuted groups.

The reference is the same calibrator fitted with the integer codes ``0, 1`` as plain arrays.
"""

from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

import calibprob
from calibprob import registry
from calibprob.predictive import is_interval_family

from .conftest import MAX_EXAMPLES, build, calibrators

POST = calibrators("distribution")
#: an iterative Bayesian fit (``inference=``, GP-Beta) per group: seconds per example, so slow
CASES = [
    pytest.param(n, marks=pytest.mark.slow)
    if "inference" in inspect.signature(registry.CLASSES[n].load()).parameters
    else n
    for n in POST
]
_EXAMPLES = max(3, MAX_EXAMPLES // 2)

_RNG = np.random.default_rng(36)
N_CAL, N_TE = 60, 8
_MU_C, _SD_C = _RNG.normal(size=N_CAL), np.exp(_RNG.normal(scale=0.3, size=N_CAL))
Y_CAL = _MU_C + _SD_C * _RNG.standard_normal(N_CAL)
_MU_T, _SD_T = _RNG.normal(size=N_TE), np.exp(_RNG.normal(scale=0.3, size=N_TE))
G_CAL = _RNG.permutation(np.repeat([0, 1], N_CAL // 2))
G_TE = np.array([0, 1, 1, 0, 0, 1, 0, 1])
P_CAL, P_TE = calibprob.normal(_MU_C, 0.5 * _SD_C), calibprob.normal(_MU_T, 0.5 * _SD_T)

_ORDERED = {"random_state", "update"}  # a randomised or online calibrator reads groups in label order


def _values(out):
    if is_interval_family(out):
        return np.concatenate([out["lower"].values, out["upper"].values], axis=-1)
    return out.calib.quantiles


def _run(name, g_cal, g_te):
    params = inspect.signature(registry.CLASSES[name].load()).parameters
    model = build(name, **({"confidence_level": 0.8} if "confidence_level" in params else {}))
    return _values(model.fit(P_CAL, Y_CAL, groups=g_cal).predict(P_TE, groups=g_te))


_REFERENCE: dict[str, np.ndarray] = {}


def _reference(name):
    if name not in _REFERENCE:
        _REFERENCE[name] = _run(name, G_CAL, G_TE)
    return _REFERENCE[name]


def _order_sensitive(name) -> bool:
    params = inspect.signature(registry.CLASSES[name].load()).parameters
    return bool(_ORDERED & set(params)) or hasattr(registry.CLASSES[name].load(), "update")


def test_every_post_processor_takes_groups():
    """The docs' promise (docs/methods: every post-processor takes ``groups=``) against the registry."""
    assert POST, "no distribution post-processor registered"
    for name in POST:
        cls = registry.CLASSES[name].load()
        for method in ("fit", "predict"):
            assert "groups" in inspect.signature(getattr(cls, method)).parameters, (
                f"{name}.{method} takes no groups=; give it groups= or refuse it naming calibprob.Mondrian"
            )


def _labels(kind, a, b):
    if kind == "categorical":
        return lambda codes: pd.Categorical(np.where(codes == 0, a, b))
    return lambda codes: np.where(codes == 0, a, b) if kind != "int" else np.where(codes == 0, a, b).astype(np.int64)


_PAIRS = {
    "int": st.lists(st.integers(-(2**62), 2**62), min_size=2, max_size=2, unique=True),
    "text": st.lists(st.text("abcxyz0123", min_size=1, max_size=4), min_size=2, max_size=2, unique=True),
    "unicode": st.lists(st.text("äπ漢🙂é", min_size=1, max_size=3), min_size=2, max_size=2, unique=True),
    "categorical": st.lists(st.text("ab", min_size=1, max_size=3), min_size=2, max_size=2, unique=True),
}


@pytest.mark.parametrize("name", CASES)
@settings(max_examples=_EXAMPLES)
@given(data=st.data(), kind=st.sampled_from(sorted(_PAIRS)))
def test_relabelling_groups_changes_nothing_but_labels(name, data, kind):
    a, b = data.draw(_PAIRS[kind])
    if _order_sensitive(name):
        # its random numbers / updates follow the groups' sorted order: keep that order
        a, b = sorted([a, b])
    relabel = _labels(kind, a, b)
    np.testing.assert_array_equal(_run(name, relabel(G_CAL), relabel(G_TE)), _reference(name))


@pytest.mark.parametrize("name", CASES)
@settings(max_examples=_EXAMPLES)
@given(perm_cal=st.permutations(range(N_CAL)), perm_te=st.permutations(range(N_TE)))
def test_shuffled_labelled_groups_change_nothing(name, perm_cal, perm_te):
    perm_cal, perm_te = np.asarray(perm_cal), np.asarray(perm_te)
    series = pd.Series(G_CAL, index=P_CAL.indexes["obs"]).iloc[perm_cal]
    array = xr.DataArray(G_TE, dims="obs", coords={"obs": P_TE["obs"].values}).isel(obs=perm_te)
    np.testing.assert_array_equal(_run(name, series, array), _reference(name))
    # the values without their labels: read by position, exactly as the permuted plain groups
    shuffled = pd.Series(G_CAL[perm_cal])  # default index: no labels
    if not np.array_equal(G_CAL[perm_cal], G_CAL):
        np.testing.assert_array_equal(_run(name, shuffled, G_TE), _run(name, np.asarray(G_CAL[perm_cal]), G_TE))
