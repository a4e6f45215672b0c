"""The one reader of tables (:mod:`calibprob._core.tables`): which column is which, and how many.

Each test below failed before the reader existed (issue 36, "columns by position" and "errors from
inside NumPy"): the quantile boosting base and a user's model wrapped by calibprob predicted from
a reordered DataFrame by position; a split-conformal wrapper did the same with its estimator; the
conditional-conformal rank check refused independent columns in different units and accepted
``n_cal == d`` columns; a conformal-Bayes ``X_new`` of the wrong width reached the model's graph.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import calibprob
from calibprob._core.tables import (
    adopt_columns,
    check_columns,
    check_table,
    column_rank,
    dependent_columns,
    record_columns,
    record_table,
)
from calibprob.bases.user import PythonBase

_RNG = np.random.default_rng(3)
X = _RNG.uniform(-1, 1, size=(60, 3))
Y = X @ [1.0, -2.0, 0.5] + 0.1 * _RNG.standard_normal(60)
DF = pd.DataFrame(X, columns=["a", "b", "c"])


class _Owner:
    pass


@pytest.mark.parametrize(
    "table, match",
    [
        (DF[["b", "a", "c"]], r"X has the fitted columns in another order \(\['b', 'a', 'c'\]\).*feature_names_in_"),
        (DF.rename(columns={"a": "z"}), r"X has other columns than in fit \(missing 'a'; not seen in fit 'z'\)"),
        (DF[["a", "b"]], r"X has other columns than in fit \(missing 'c'\)"),
        (DF.assign(d=1.0), r"X has other columns than in fit \(not seen in fit 'd'\)"),
        (X[:, :2], r"X has 2 features but the model was fitted with 3. Pass the same columns"),
    ],
)
def test_the_reader_refuses_every_difference_naming_it(table, match):
    owner = _Owner()
    record_table(owner, DF)
    assert owner.feature_names_in_.tolist() == ["a", "b", "c"] and owner.n_features_in_ == 3
    with pytest.raises(ValueError, match=match):
        check_table(owner, table)
    np.testing.assert_array_equal(check_table(owner, DF), X)  # the same columns: read as they are
    np.testing.assert_array_equal(check_table(owner, X), X)  # a plain array: by position, as documented


def test_a_refit_on_an_array_forgets_the_names():
    owner = _Owner()
    record_columns(owner, DF)
    record_columns(owner, X)
    assert not hasattr(owner, "feature_names_in_")
    check_columns(owner, DF[["c", "b", "a"]])  # no names to contradict: by position
    with pytest.raises(ValueError, match=r"X has 1 features but _Owner was fitted with 3"):
        check_columns(owner, X[:, :1])


def test_a_wrapper_adopts_a_prefit_estimators_columns():
    base = calibprob.LinearRegression().fit(DF, Y)
    owner = _Owner()
    assert adopt_columns(owner, base)
    assert owner.feature_names_in_.tolist() == ["a", "b", "c"] and owner.n_features_in_ == 3
    with pytest.raises(ValueError, match="another order"):
        check_columns(owner, DF[["c", "a", "b"]])


def test_quantile_boosting_refuses_reordered_columns():
    pytest.importorskip("sklearn")
    from calibprob.bases.quantile_gbm import QuantileGradientBoosting

    model = QuantileGradientBoosting(levels=[0.1, 0.5, 0.9], max_iter=5, random_state=0).fit(DF, Y)
    assert model.feature_names_in_.tolist() == ["a", "b", "c"]
    with pytest.raises(ValueError, match=r"another order \(\['c', 'b', 'a'\]\)"):
        model.predict(DF[["c", "b", "a"]])
    with pytest.raises(ValueError, match=r"missing 'a'; not seen in fit 'A'"):
        model.predict(DF.rename(columns={"a": "A"}))


def test_a_users_model_wrapped_as_a_base_refuses_reordered_columns():
    sklearn_linear = pytest.importorskip("sklearn.linear_model")
    base = PythonBase(sklearn_linear.LinearRegression()).fit(DF, Y)
    same = base.predict(DF.iloc[:5]).calib.quantiles
    np.testing.assert_allclose(base.predict(X[:5]).calib.quantiles, same)
    with pytest.raises(ValueError, match=r"another order"):
        base.predict(DF.iloc[:5][["b", "a", "c"]])
    with pytest.raises(ValueError, match=r"X has 2 features but base 'python' was fitted with 3"):
        base.predict(X[:5, :2])


@pytest.mark.parametrize("prefit", [False, True])
def test_a_model_aware_wrapper_refuses_reordered_columns(prefit):
    sklearn_linear = pytest.importorskip("sklearn.linear_model")
    if prefit:
        est = sklearn_linear.LinearRegression().fit(DF.iloc[:30], Y[:30])
        model = calibprob.SplitConformalRegressor(estimator=est, prefit=True)
    else:
        model = calibprob.SplitConformalRegressor(estimator=sklearn_linear.LinearRegression()).fit(DF.iloc[:30], Y[:30])
    model.calibrate(DF.iloc[30:], Y[30:])
    model.predict_interval(DF.iloc[:3], 0.8)
    with pytest.raises(ValueError, match=r"X has the fitted columns in another order"):
        model.predict_interval(DF.iloc[:3][["a", "c", "b"]], 0.8)
    with pytest.raises(ValueError, match=r"X has 2 features but SplitConformalRegressor was fitted with 3"):
        model.predict_interval(X[:3, :2], 0.8)


def _least_squares(X_train, y_train, X_new):
    A = np.c_[np.ones(len(X_train)), X_train]
    return np.c_[np.ones(len(X_new)), X_new] @ np.linalg.lstsq(A, y_train, rcond=None)[0]


@pytest.mark.parametrize("kind", ["cv+", "split"])
def test_a_wrapped_callable_gets_the_width_checked_before_any_product(kind):
    # before: NumPy's "matmul: Input operand 1 has a mismatch in its core dimension", naming no argument
    if kind == "cv+":
        model = calibprob.CrossConformalRegressor(estimator=_least_squares, cv=5).fit(X, Y)
    else:
        model = calibprob.SplitConformalRegressor(estimator=_least_squares).fit(X[:30], Y[:30])
        model.calibrate(X[30:], Y[30:])
    with pytest.raises(
        ValueError, match=r"X has 2 features but \w+ConformalRegressor was fitted with 3\. Pass the same"
    ):
        model.predict_interval(X[:3, :2], 0.8)


def test_the_rank_decision_does_not_depend_on_units():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=40), rng.normal(size=40)
    # independent columns in different units: both kept (a whole-matrix tolerance drops the small one)
    assert dependent_columns(np.c_[1e12 * a, b]).tolist() == []
    assert dependent_columns(np.c_[1e-12 * a, 1e12 * b]).tolist() == []
    # a dependent column is found whatever its scale
    assert dependent_columns(np.c_[a, b, 1e12 * (a - 3 * b)]).tolist() == [2]
    # beyond as many columns as rows every further column is dependent (no diagonal entry for it)
    wide = rng.normal(size=(5, 7))
    assert dependent_columns(wide).tolist() == [5, 6]
    assert dependent_columns(np.c_[a, np.zeros(40)]).tolist() == [1]


def _cc_problem(n):
    rng = np.random.default_rng(1)
    pred = calibprob.normal(rng.normal(size=n), np.ones(n))
    return pred, rng.normal(size=n), rng


def test_conditional_conformal_keeps_independent_columns_in_other_units():
    pred, y, rng = _cc_problem(60)
    F = np.c_[1e12 * rng.normal(size=60), rng.normal(size=60)]
    model = calibprob.ConditionalConformal(intercept=False).fit(pred, y, features=F)
    assert model.kept_.tolist() == [0, 1]


def test_conditional_conformal_refuses_as_many_columns_as_calibration_points():
    pred, y, rng = _cc_problem(12)
    with pytest.raises(
        ValueError, match=r"more calibration points than independent feature columns: n_cal = 12, columns = 12"
    ):
        calibprob.ConditionalConformal(intercept=False).fit(pred, y, features=rng.normal(size=(12, 12)))


def test_column_rank_is_decided_on_unit_columns():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=30), rng.normal(size=30)
    A = np.c_[1e15 * a, b]
    assert np.linalg.matrix_rank(A) == 1  # NumPy's whole-matrix tolerance: the unit column is lost
    assert column_rank(A) == 2
    assert column_rank(np.c_[a, 1e15 * a, b]) == 2 and column_rank(np.zeros((3, 2))) == 0


def test_the_recorded_columns_survive_save_and_load(tmp_path):
    model = calibprob.CrossConformalRegressor(estimator=calibprob.LinearRegression(), cv=5).fit(DF, Y)
    model.save(tmp_path / "cv.nc")
    back = calibprob.load(tmp_path / "cv.nc")
    assert back.feature_names_in_.tolist() == ["a", "b", "c"] and back.n_features_in_ == 3
    with pytest.raises(ValueError, match="another order"):
        back.predict_interval(DF.iloc[:2][["c", "a", "b"]], 0.8)
