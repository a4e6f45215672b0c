"""weights= and the remaining group readers through the one label / alignment reader (issue 36).

Each test names the silent result it replaces (on the code before this change):

* ``from_draws(weights=DataArray)`` in another ``obs_id`` / ``draw`` order was read by position
  (each weight applied to another observation's draws), and weights with other labels were
  accepted; a DataFrame's column labels were ignored;
* ``ConformalBayes.fit(train_groups=Series)`` ignored the Series' labels against the training
  log-likelihood's observations, and ``predict(groups=Series)`` those of the test densities;
* a label given as ``"1"`` at predict after ``1`` at fit was taken for a new group: pooled by
  ``Mondrian(fallback="pooled")``, ranked marginally by ``ConformalBayes(unseen_group="marginal")``;
* ``bins([1, "1", 2], by="category")`` merged ``1`` and ``"1"`` into one category;
* ``coverage_by_group`` and ``train_calibrate_test_split(stratify=)`` crashed inside NumPy / pandas
  on a pandas missing label or a mix of ``1`` and ``"1"``, and read a labelled ``stratify`` by
  position.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import calibprob
from calibprob.calibrators.conformal.bayes import _inputs as bayes_inputs
from calibprob.calibrators.conformal.conditional import one_hot
from calibprob.calibrators.grouping import Mondrian, bins
from calibprob.datasets import train_calibrate_test_split
from calibprob.metrics import coverage_by_group

RNG = np.random.default_rng(3601)

# ---------------------------------------------------------------------------
# from_draws(weights=)
# ---------------------------------------------------------------------------

OBS_ID = np.array([40, 10, 30])
DRAWS = xr.DataArray(
    RNG.normal(size=(2, 30, 3)) * np.array([1.0, 10.0, 100.0]),
    dims=("chain", "draw", "obs_id"),
    coords={"chain": [0, 1], "draw": np.arange(30), "obs_id": OBS_ID},
)
_W = RNG.gamma(0.3, size=(2, 30, 3))
WEIGHTS = xr.DataArray(_W / _W.sum(axis=(0, 1)), dims=DRAWS.dims, coords=DRAWS.coords)


def test_weights_dataarray_is_aligned_by_its_coordinates():
    ref = calibprob.from_draws(DRAWS, weights=WEIGHTS)
    shuffled = WEIGHTS.isel(obs_id=[2, 0, 1], draw=RNG.permutation(30), chain=[1, 0])
    xr.testing.assert_identical(calibprob.from_draws(DRAWS, weights=shuffled), ref)
    # and the weights do matter: the same numbers by position are another answer
    assert not np.array_equal(calibprob.from_draws(DRAWS, weights=shuffled.values.reshape(-1, 3)).calib.quantiles,
                              ref.calib.quantiles)  # fmt: skip


def test_weights_dataframe_columns_are_aligned_to_the_observations():
    ref = calibprob.from_draws(DRAWS, weights=WEIGHTS)
    table = pd.DataFrame(WEIGHTS.values.reshape(-1, 3), columns=OBS_ID)[[30, 40, 10]]
    xr.testing.assert_identical(calibprob.from_draws(DRAWS, weights=table), ref)


def test_weights_with_other_labels_are_refused_naming_the_first():
    with pytest.raises(ValueError, match=r"weights's obs_id coordinate does not match the draws' obs_id labels: 99"):
        calibprob.from_draws(DRAWS, weights=WEIGHTS.assign_coords(obs_id=[40, 10, 99]))
    with pytest.raises(ValueError, match=r"weights's draw coordinate .* 30 is not a draw label of the draws"):
        calibprob.from_draws(DRAWS, weights=WEIGHTS.assign_coords(draw=np.arange(1, 31)))
    table = pd.DataFrame(WEIGHTS.values.reshape(-1, 3), columns=["a", "b", "c"])
    with pytest.raises(ValueError, match=r"weights's column index does not match .* 'a' is not an obs_id label"):
        calibprob.from_draws(DRAWS, weights=table)


def test_plain_weights_are_read_by_position():
    plain = WEIGHTS.values.reshape(-1, 3)
    xr.testing.assert_identical(
        calibprob.from_draws(DRAWS, weights=plain), calibprob.from_draws(DRAWS, weights=WEIGHTS)
    )


# ---------------------------------------------------------------------------
# conformal Bayes: train groups against the training observations, test groups against the test rows
# ---------------------------------------------------------------------------

S, N, M, G = 40, 6, 3, 30
TRAIN_IDS = np.array([15, 11, 12, 13, 14, 10])
LL = xr.DataArray(RNG.normal(-1.0, 0.2, size=(1, S, N)), dims=("chain", "draw", "obs_id"), coords={"obs_id": TRAIN_IDS})
TRAIN_GROUPS = pd.Series(["a", "a", "a", "b", "b", "b"], index=TRAIN_IDS)
TEST_LD = xr.DataArray(
    RNG.normal(-1.0, 0.2, size=(1, S, M, G)),
    dims=("chain", "draw", "obs", "grid"),
    coords={"obs": ["p", "q", "r"]},
)
GRID = np.linspace(-3, 3, G)
Y_TRAIN = RNG.normal(size=N)


def _cb(**kw):
    return calibprob.ConformalBayes(confidence_level=0.5, min_ess=0, max_pareto_k=100, min_grid_mass=0, **kw)


def test_conformal_bayes_train_groups_are_aligned_to_the_log_likelihood():
    ref = _cb().fit(LL, train_groups=TRAIN_GROUPS.to_numpy(), y=Y_TRAIN).train_groups_
    for shuffled in (
        TRAIN_GROUPS.iloc[[3, 0, 5, 1, 4, 2]],
        xr.DataArray(TRAIN_GROUPS.to_numpy(), dims="obs_id", coords={"obs_id": TRAIN_IDS}).isel(
            obs_id=[5, 4, 3, 2, 1, 0]
        ),
    ):
        np.testing.assert_array_equal(_cb().fit(LL, train_groups=shuffled, y=Y_TRAIN).train_groups_, ref)
    wrong = pd.Series(TRAIN_GROUPS.to_numpy(), index=TRAIN_IDS + 100)
    with pytest.raises(ValueError, match=r"groups's index does not match the training log-likelihood's obs_id"):
        _cb().fit(LL, train_groups=wrong, y=Y_TRAIN)


def test_conformal_bayes_test_groups_are_aligned_to_the_test_densities():
    cb = _cb().fit(LL, train_groups=TRAIN_GROUPS, y=Y_TRAIN)
    test_groups = pd.Series(["a", "b", "a"], index=["p", "q", "r"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the sets reach this small grid's edge: beside the point
        ref = cb.predict(TEST_LD, GRID, groups=test_groups.to_numpy())
        got = cb.predict(TEST_LD, GRID, groups=test_groups.iloc[[2, 0, 1]])
    xr.testing.assert_identical(got, ref)
    with pytest.raises(ValueError, match=r"groups's index does not match test_log_density's obs labels: 'z'"):
        cb.predict(TEST_LD, GRID, groups=pd.Series(["a", "b", "a"], index=["p", "q", "z"]))


def test_conformal_bayes_groups_follow_x_new_row_labels():
    """The door of ``conformal_bayes``: labelled groups against X_new's row index (no model needed)."""
    x_new = pd.DataFrame({"x": [0.0, 1.0, 2.0]}, index=["u", "v", "w"])
    ref = bayes_inputs.row_labels(x_new)
    assert ref is not None and list(ref[1]) == ["u", "v", "w"]
    groups = pd.Series(["a", "b", "c"], index=["u", "v", "w"]).iloc[[2, 0, 1]]
    assert list(bayes_inputs.aligned(groups, ref, "groups", "X_new")) == ["a", "b", "c"]
    assert bayes_inputs.row_labels({"x": np.zeros(3)}) is None  # plain arrays: by position
    with pytest.raises(ValueError, match=r"groups's index does not match X_new's row labels: 'z'"):
        bayes_inputs.aligned(pd.Series(["a"] * 3, index=["u", "v", "z"]), ref, "groups", "X_new")


@pytest.mark.parametrize("unseen_group", ["raise", "marginal"])
def test_conformal_bayes_refuses_1_vs_text_1_between_fit_and_predict(unseen_group):
    cb = _cb(unseen_group=unseen_group).fit(LL.values[0], train_groups=[1, 1, 1, 2, 2, 2], y=Y_TRAIN)
    with pytest.raises(ValueError, match=r"groups holds '1' \(text\) but train_groups saw 1 \(int\)"):
        cb.predict(TEST_LD.values[0], GRID, groups=["1", "2", "1"])


def test_conformal_bayes_refuses_missing_and_colliding_train_labels():
    with pytest.raises(ValueError, match=r"groups has 1 missing label"):
        _cb().fit(LL, train_groups=pd.Series(["a", pd.NA, "a", "b", "b", "b"], dtype="string"), y=Y_TRAIN)
    with pytest.raises(ValueError, match=r"groups mixes label types .* 1 \(int\) and '1' \(text\)"):
        _cb().fit(LL, train_groups=pd.Series([1, "1", 1, 2, 2, 2], dtype=object), y=Y_TRAIN)


# ---------------------------------------------------------------------------
# 1 vs "1" across fit and predict: Mondrian, conditional conformal, bins
# ---------------------------------------------------------------------------


def test_mondrian_pooled_fallback_does_not_pool_a_retyped_label():
    mu = RNG.normal(size=40)
    pred = calibprob.normal(mu, np.ones(40))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = Mondrian(calibprob.ConformalPredictiveSystem(), fallback="pooled").fit(
            pred, mu + RNG.normal(size=40), groups=np.repeat([1, 2], 20)
        )
    with pytest.raises(ValueError, match=r"groups holds '1' \(text\) but calibration saw 1 \(int\)"):
        model.predict(calibprob.normal(mu[:2], np.ones(2)), groups=np.array(["1", "2"]))


def test_conditional_conformal_one_hot_refuses_a_retyped_label():
    with pytest.raises(ValueError, match=r"groups holds '1' \(text\) but calibration saw 1 \(int\)"):
        one_hot(np.array(["1", "2"]), np.array([1, 2]))


def test_bins_category_keeps_label_types():
    with pytest.raises(ValueError, match=r"values mixes label types .* 1 \(int\) and '1' \(text\)"):
        bins([1, "1", 2], by="category")
    with pytest.raises(ValueError, match=r"values holds '1' \(text\) but fit saw 1 \(int\)"):
        bins(np.array([1, 2, 1]), by="category").apply(np.array(["1", "2", "1"]))
    with pytest.raises(ValueError, match=r"values has 1 missing label"):
        bins(pd.Series(["a", pd.NA, "b"], dtype="string"), by="category")


# ---------------------------------------------------------------------------
# coverage_by_group and the stratified split
# ---------------------------------------------------------------------------


def test_coverage_by_group_reads_labels_by_the_label_reader():
    covered, widths = np.ones((4, 1), bool), np.ones((4, 1))
    with pytest.raises(ValueError, match=r"groups mixes label types .* 1 \(int\) and '1' \(text\)"):
        coverage_by_group(covered, widths, np.array([1, "1", 2, 2], dtype=object))
    with pytest.raises(ValueError, match=r"groups has 1 missing label\(s\) .* at row index 1"):
        coverage_by_group(covered, widths, pd.Series(["a", pd.NA, "b", "b"], dtype="string"))


def test_split_stratify_is_read_and_aligned_by_label():
    data = xr.Dataset({"x": ("obs", np.arange(20.0))}, coords={"obs": np.arange(100, 120)})
    g = pd.Series(np.repeat(["a", "b"], 10), index=np.arange(100, 120))
    ref = train_calibrate_test_split(data, (0.5, 0.5), seed=0, stratify=g.to_numpy())
    got = train_calibrate_test_split(data, (0.5, 0.5), seed=0, stratify=g.iloc[RNG.permutation(20)])
    for part in ref:
        xr.testing.assert_identical(got[part], ref[part])
    with pytest.raises(ValueError, match=r"stratify's index does not match data's obs labels: 120"):
        train_calibrate_test_split(
            data, (0.5, 0.5), seed=0, stratify=pd.Series(g.to_numpy(), index=np.arange(101, 121))
        )
    with pytest.raises(ValueError, match=r"stratify has 10 missing label"):
        train_calibrate_test_split(data, (0.5, 0.5), seed=0, stratify=pd.Series(["a", pd.NA] * 10, dtype="string"))
    with pytest.raises(ValueError, match=r"stratify mixes label types"):
        train_calibrate_test_split(data, (0.5, 0.5), seed=0, stratify=np.array([1, "1"] * 10, dtype=object))


def test_coverage_by_group_refuses_no_groups():
    with pytest.raises(ValueError, match=r"groups is None; pass one group label per observation"):
        coverage_by_group(np.ones((2, 1), bool), np.ones((2, 1)), None)
