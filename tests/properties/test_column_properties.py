"""Columns are read by name, never by position: properties over every registered base and model-aware class.

Issue 36's "columns by position": a model fitted on a pandas DataFrame and then given the same
columns in another order, renamed, with one missing or one extra, must refuse (scikit-learn's
``feature_names_in_`` behaviour, :mod:`calibprob._core.tables`), or — for a model that aligns
columns by name — give exactly the prediction of the aligned table. The classes come from
:mod:`calibprob.registry` (role ``"base"``: :data:`tests.support.bases.BASES`; model-aware
calibrators that do not need a PyMC posterior), so a class registered tomorrow is checked at once.

* **reorder** — a non-identity permutation of the columns, names carried along: refused naming
  the order, or the aligned prediction;
* **rename / drop / add** — one column renamed (to any other text), one dropped, or one extra
  column (any name, any position): refused, the message naming the column;
* **promise** — every base with ``predict_quantiles`` (documented as non-crossing) returns sorted
  rows, one per input row, and counts the rows it rearranged.

Counts (default ``props`` profile): 7 bases x 2 properties, the bases with ``predict_quantiles``
(1 today) x 1, and 5 model-aware classes x 2 properties; examples per property: :data:`conftest.MAX_EXAMPLES` // 2 (= 6) for the bases,
// 4 (= 3) for the model-aware classes (each example predicts once on a model fitted once per
class and session, so the examples cost a prediction each).
"""

from __future__ import annotations

import functools
import inspect
import string

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import calibprob
from calibprob import registry
from tests.support.bases import BASES, X_TE, X_TR, Y_TR, base_class, build_base

from .conftest import build, calibrators, gp_only, pymc_only

NAMES = ["alpha", "beta"]
DF_TR = pd.DataFrame(X_TR, columns=NAMES)
DF_TE = pd.DataFrame(X_TE, columns=NAMES)
AWARE = [n for n in calibrators("model-aware") if not pymc_only(n)]
_BASE_EXAMPLES = max(3, settings().max_examples // 2)
_AWARE_EXAMPLES = max(3, settings().max_examples // 4)

#: What a refusal says: the fitted columns and the fix.
REFUSED = r"X has (the fitted columns in another order|other columns than in fit).*feature_names_in_"


@functools.cache
def _fitted_base(name: str):
    return build_base(name).fit(DF_TR, Y_TR)


def _base_output(model, X) -> np.ndarray:
    return model.predict(X).calib.quantiles


def _aware_estimator(name):
    if gp_only(name):
        return calibprob.GaussianProcessRegressor(random_state=0, n_restarts=1, mean="constant").fit(
            DF_TR.iloc[:20], Y_TR[:20]
        )
    return calibprob.LinearRegression().fit(DF_TR.iloc[:20], Y_TR[:20])


@functools.cache
def _fitted_aware(name: str):
    """The family's lifecycle on DataFrames (training on rows 0-19, calibration on 20-29)."""
    cls = registry.CLASSES[name].load()
    fit_params = list(inspect.signature(cls.fit).parameters.values())[1:]
    if hasattr(cls, "calibrate"):
        return build(name, estimator=_aware_estimator(name)).calibrate(DF_TR.iloc[20:], Y_TR[20:])
    if fit_params and fit_params[0].default is None:  # fit() on the prefit base's own data
        return build(name, estimator=_aware_estimator(name)).fit()
    if fit_params and fit_params[0].name == "X_cal":
        return build(name, estimator=_aware_estimator(name)).fit(DF_TR.iloc[20:], Y_TR[20:])
    return build(name, estimator=calibprob.LinearRegression(), cv=5).fit(DF_TR, Y_TR)


def _aware_output(name, model, X) -> np.ndarray:
    if registry.CLASSES[name].output == "intervals":
        iv = model.predict_interval(X, [0.5, 0.9])
        return np.c_[iv["lower"].values, iv["upper"].values]
    return model.predict(X).calib.quantiles


def _reorder_holds(output, X) -> None:
    """Reordered columns with their names: refused naming the order, or the aligned prediction."""
    reference = output(DF_TE)
    try:
        got = output(X)
    except ValueError as err:
        assert "another order" in str(err) and "feature_names_in_" in str(err), str(err)
        return
    np.testing.assert_allclose(got, reference, rtol=1e-12, atol=0)


_other_name = st.text(alphabet=string.ascii_letters + "_é0", min_size=1, max_size=6).filter(lambda s: s not in NAMES)


@st.composite
def _changed_tables(draw):
    """A table whose column names differ from the fitted ones: one renamed, one dropped, or one added."""
    how = draw(st.sampled_from(["rename", "drop", "add"]))
    if how == "rename":
        j = draw(st.integers(0, len(NAMES) - 1))
        return how, DF_TE.rename(columns={NAMES[j]: draw(_other_name)})
    if how == "drop":
        return how, DF_TE.drop(columns=NAMES[draw(st.integers(0, len(NAMES) - 1))])
    out = DF_TE.copy()
    out.insert(draw(st.integers(0, len(NAMES))), draw(_other_name), draw(st.floats(-2, 2)))
    return how, out


_reordered = st.permutations(NAMES).filter(lambda p: list(p) != NAMES)


@pytest.mark.parametrize("name", BASES)
@settings(max_examples=_BASE_EXAMPLES)
@given(order=_reordered)
def test_a_base_reordered_by_name_refuses_or_aligns(name, order):
    model = _fitted_base(name)
    assert list(model.feature_names_in_) == NAMES
    _reorder_holds(lambda X: _base_output(model, X), DF_TE[list(order)])


@pytest.mark.parametrize("name", BASES)
@settings(max_examples=_BASE_EXAMPLES)
@given(change=_changed_tables())
def test_a_base_refuses_renamed_missing_or_extra_columns(name, change):
    with pytest.raises(ValueError, match=REFUSED):
        _base_output(_fitted_base(name), change[1])


@pytest.mark.parametrize("name", AWARE)
@settings(max_examples=_AWARE_EXAMPLES)
@given(order=_reordered)
def test_a_model_aware_class_reordered_by_name_refuses_or_aligns(name, order):
    model = _fitted_aware(name)
    _reorder_holds(lambda X: _aware_output(name, model, X), DF_TE[list(order)])


@pytest.mark.parametrize("name", AWARE)
@settings(max_examples=_AWARE_EXAMPLES)
@given(change=_changed_tables())
def test_a_model_aware_class_refuses_renamed_missing_or_extra_columns(name, change):
    with pytest.raises(ValueError, match=REFUSED):
        _aware_output(name, _fitted_aware(name), change[1])


#: Bases with a ``predict_quantiles`` method, whose docstring promises non-crossing rows.
QUANTILE_BASES = [n for n in BASES if callable(getattr(base_class(n), "predict_quantiles", None))]


@pytest.mark.parametrize("name", QUANTILE_BASES)
@settings(max_examples=_BASE_EXAMPLES)
@given(X=arrays(np.float64, st.tuples(st.integers(1, 25), st.just(2)), elements=st.floats(-6, 6)))
def test_predict_quantiles_keeps_its_non_crossing_promise(name, X):
    q, n_changed = _fitted_base(name).predict_quantiles(X, return_n_rearranged=True)
    assert q.shape[0] == len(X) and np.all(np.diff(q, axis=1) >= 0)
    assert 0 <= n_changed <= len(X)
