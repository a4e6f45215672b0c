"""Row labels and group labels are identities (issue 36) in evaluate, weights and the group helpers.

The companion of :mod:`tests.properties.test_group_label_properties` (which covers the
post-processors' ``groups=``). Here, over the entry points that read ``y``, ``groups=`` or
``weights=`` beside a prediction or draws, and over the group helpers:

* **shuffle WITH labels changes nothing**: a ``Series`` / ``DataArray`` argument carrying the rows'
  labels, permuted together with them, gives bitwise the result of the unpermuted argument
  (aligned by label);
* **shuffle WITHOUT labels changes the answer exactly as the shuffle says**: the same values as a
  plain array are read by position, giving bitwise the result of the permuted values (and not
  the reference, whenever the permutation moves a value to another row of different value);
* **relabelling by an injective map** (to integers, text, unicode text, a Categorical) leaves
  every per-group number bitwise identical, the group coordinate mapped.

Driven by the predictive constructors' table (:data:`tests.properties.conftest.CONSTRUCTORS`) for
:func:`calibprob.evaluate`. Examples per property: the ``props`` profile's
:data:`~tests.properties.conftest.MAX_EXAMPLES` (derandomised), fewer where a fit is involved.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

import calibprob
from calibprob.calibrators.grouping import Mondrian
from calibprob.datasets import train_calibrate_test_split
from calibprob.metrics import coverage_by_group

from .conftest import CONSTRUCTORS, MAX_EXAMPLES, N_OBS, y_for

#: distinct pairs of labels of one kind; the map codes 0 -> a, 1 -> b is injective
PAIRS = {
    "int": st.lists(st.integers(-(2**62), 2**62), min_size=2, max_size=2, unique=True),
    "text": st.lists(st.text("abcxyz0123", min_size=1, max_size=4), min_size=2, max_size=2, unique=True),
    "unicode": st.lists(st.text("äπ漢🙂é", min_size=1, max_size=3), min_size=2, max_size=2, unique=True),
    "categorical": st.lists(st.text("ab", min_size=1, max_size=3), min_size=2, max_size=2, unique=True),
}


def relabel(kind: str, a, b, codes: np.ndarray):
    """Codes 0/1 as the labels a/b, in the container of ``kind``."""
    values = np.where(codes == 0, a, b)
    if kind == "categorical":
        return pd.Categorical(values)
    return values.astype(np.int64) if kind == "int" else values


def is_moving(perm: np.ndarray, values: np.ndarray) -> bool:
    """Whether permuting ``values`` by ``perm`` changes them (some value lands on a row of another value)."""
    return not np.array_equal(values[perm], values)


# ---------------------------------------------------------------------------
# evaluate: y and groups beside a prediction with row labels
# ---------------------------------------------------------------------------

OBS = np.array([f"r{i}" for i in range(N_OBS)])
G_CODES = np.array([0, 1, 0, 1, 1, 0])
assert G_CODES.size == N_OBS


def _pred(name):
    return CONSTRUCTORS[name][0](0.0, 1.0).assign_coords(obs=OBS)


def _evaluate(name, y, groups):
    return calibprob.evaluate(_pred(name), y, groups=groups)


_EVAL_REF: dict[str, xr.Dataset] = {}


def _eval_reference(name):
    if name not in _EVAL_REF:
        _EVAL_REF[name] = _evaluate(name, y_for(name, 0.0, 1.0), G_CODES)
    return _EVAL_REF[name]


@pytest.mark.parametrize("name", sorted(CONSTRUCTORS))
@settings(max_examples=MAX_EXAMPLES)
@given(perm=st.permutations(range(N_OBS)), perm_g=st.permutations(range(N_OBS)))
def test_evaluate_shuffle_with_labels_changes_nothing(name, perm, perm_g):
    perm, perm_g = np.asarray(perm), np.asarray(perm_g)
    y = y_for(name, 0.0, 1.0)
    y_da = xr.DataArray(y, dims="obs", coords={"obs": OBS}).isel(obs=perm)
    g_series = pd.Series(G_CODES, index=OBS).iloc[perm_g]
    xr.testing.assert_identical(_evaluate(name, y_da, g_series), _eval_reference(name))
    # the values without their labels are read by position: exactly the permuted problem
    shuffled = _evaluate(name, y[perm], G_CODES[perm_g])
    xr.testing.assert_identical(shuffled, _evaluate(name, np.asarray(y[perm]), np.asarray(G_CODES[perm_g])))
    if is_moving(perm, y):
        assert not shuffled.equals(_eval_reference(name)), "shuffled y read as if it were the original"


def _mapped_equal(out: xr.Dataset, ref: xr.Dataset, mapping: dict) -> None:
    """``out`` is ``ref`` with the group labels mapped: bitwise, group by group."""
    order = [mapping[g] for g in ref["group"].values.tolist()]
    back = out.sel(group=order).assign_coords(group=ref["group"])
    # the worst group: the mapped one; on a tie (equal coverage and size) the documented rule takes
    # the first label in sorted order, which a relabelling may change: the first of the mapped tied ones
    cov, count = ref["group_coverage"].values, ref["group_count"].values
    for k, worst in enumerate(out["worst_group"].values.tolist()):
        key = list(zip(cov[:, k].tolist(), (-count).tolist()))
        tied = [mapping[g] for g, kk in zip(ref["group"].values.tolist(), key) if kk == min(key)]
        assert worst == sorted(tied)[0], (k, worst, tied)
    xr.testing.assert_identical(back.drop_vars("worst_group"), ref.drop_vars("worst_group"))


@pytest.mark.parametrize("name", sorted(CONSTRUCTORS))
@settings(max_examples=MAX_EXAMPLES)
@given(data=st.data(), kind=st.sampled_from(sorted(PAIRS)))
def test_evaluate_relabelling_groups_changes_nothing_but_labels(name, data, kind):
    a, b = data.draw(PAIRS[kind])
    out = _evaluate(name, y_for(name, 0.0, 1.0), relabel(kind, a, b, G_CODES))
    _mapped_equal(out, _eval_reference(name), {0: a, 1: b})


# ---------------------------------------------------------------------------
# weights: from_draws(weights=) aligned by the draws' labels
# ---------------------------------------------------------------------------

_RNG = np.random.default_rng(3636)
N_CHAIN, N_DRAW, N_W = 2, 40, 5
W_OBS = np.array([101, 7, 55, 3, 12])
DRAWS = xr.DataArray(
    _RNG.normal(size=(N_CHAIN, N_DRAW, N_W)) * np.arange(1, N_W + 1),
    dims=("chain", "draw", "obs_id"),
    coords={"chain": [0, 1], "draw": np.arange(N_DRAW), "obs_id": W_OBS},
)
_W = _RNG.gamma(0.5, size=(N_CHAIN, N_DRAW, N_W))
WEIGHTS = xr.DataArray(_W / _W.sum(axis=(0, 1)), dims=DRAWS.dims, coords=DRAWS.coords)
W_REF = calibprob.from_draws(DRAWS, weights=WEIGHTS)


@settings(max_examples=MAX_EXAMPLES)
@given(
    perm_obs=st.permutations(range(N_W)),
    perm_draw=st.permutations(range(N_DRAW)),
    chains=st.sampled_from([[0, 1], [1, 0]]),
)
def test_weights_shuffled_with_labels_change_nothing(perm_obs, perm_draw, chains):
    shuffled = WEIGHTS.isel(obs_id=list(perm_obs), draw=list(perm_draw), chain=chains)
    xr.testing.assert_identical(calibprob.from_draws(DRAWS, weights=shuffled), W_REF)
    # a table of (draws, observations) with labelled columns: aligned by the column labels
    table = pd.DataFrame(WEIGHTS.values.reshape(-1, N_W), columns=W_OBS).iloc[:, list(perm_obs)]
    xr.testing.assert_identical(calibprob.from_draws(DRAWS, weights=table), W_REF)


@settings(max_examples=MAX_EXAMPLES)
@given(perm_obs=st.permutations(range(N_W)))
def test_weights_shuffled_without_labels_are_read_by_position(perm_obs):
    perm = np.asarray(perm_obs)
    plain = WEIGHTS.values[:, :, perm]
    out = calibprob.from_draws(DRAWS, weights=plain.reshape(-1, N_W))
    same = calibprob.from_draws(DRAWS, weights=WEIGHTS.copy(data=plain))  # the same numbers, labelled as given
    xr.testing.assert_identical(out, same)
    if not np.array_equal(perm, np.arange(N_W)):
        assert not np.array_equal(out.calib.quantiles, W_REF.calib.quantiles)


# ---------------------------------------------------------------------------
# the group helpers: coverage by group, the Mondrian minimum-size table, the stratified split
# ---------------------------------------------------------------------------

N_H = 30
H_CODES = _RNG.permutation(np.repeat([0, 1], [12, 18]))
COVERED = _RNG.random((N_H, 3)) < 0.8
#: quarter-integer widths: every per-group sum is exact, so any row order gives the same bits
WIDTHS = _RNG.integers(1, 40, size=(N_H, 3)) / 4.0


def _by_group(covered, widths, groups):
    r = coverage_by_group(covered, widths, groups)
    return r["labels"].tolist(), {k: v for k, v in r.items() if k != "labels"}


@settings(max_examples=MAX_EXAMPLES)
@given(perm=st.permutations(range(N_H)), data=st.data(), kind=st.sampled_from(sorted(PAIRS)))
def test_coverage_by_group_rows_and_labels(perm, data, kind):
    perm = np.asarray(perm)
    labels, ref = _by_group(COVERED, WIDTHS, H_CODES)
    # rows permuted together with their labels: every per-group number bitwise the same
    labels_p, got = _by_group(COVERED[perm], WIDTHS[perm], H_CODES[perm])
    assert labels_p == labels
    for key in ref:
        np.testing.assert_array_equal(got[key], ref[key], err_msg=key)
    # relabelled: the same numbers under the mapped labels
    a, b = data.draw(PAIRS[kind])
    labels_m, got = _by_group(COVERED, WIDTHS, relabel(kind, a, b, H_CODES))
    mapping = {0: a, 1: b}
    for key in ref:
        rows = [labels_m.index(mapping[g]) for g in labels]
        np.testing.assert_array_equal(got[key][rows], ref[key], err_msg=key)


_MU = _RNG.normal(size=N_H)
PRED_H = calibprob.normal(_MU, np.ones(N_H)).assign_coords(obs=[f"o{i}" for i in range(N_H)])
Y_H = _MU + _RNG.standard_normal(N_H)


def _small_table(groups):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the small groups' warning: the table is what is checked
        model = Mondrian(calibprob.ConformalPredictiveSystem(), confidence_level=[0.9, 0.95]).fit(
            PRED_H, Y_H, groups=groups
        )
    return model.small_groups_


_SMALL_REF = _small_table(H_CODES)


@settings(max_examples=max(3, MAX_EXAMPLES // 2))
@given(perm=st.permutations(range(N_H)), data=st.data(), kind=st.sampled_from(sorted(PAIRS)))
def test_min_group_size_table_rows_and_labels(perm, data, kind):
    # (group, size, [(level, minimum size)]) for each group below a level's minimum
    assert len(_SMALL_REF) == 2, "the fixture's groups (12 and 18 rows) are below 19, CPS's minimum at 0.9"
    series = pd.Series(H_CODES, index=PRED_H.indexes["obs"]).iloc[list(perm)]
    assert _small_table(series) == _SMALL_REF
    a, b = data.draw(PAIRS[kind])
    mapping = {0: a, 1: b}
    got = {g: rest for g, *rest in _small_table(relabel(kind, a, b, H_CODES))}
    assert got == {mapping[g]: rest for g, *rest in _SMALL_REF}


SPLIT_DATA = xr.Dataset(
    {"x": ("obs", _RNG.normal(size=N_H))},
    coords={"obs": np.arange(1000, 1000 + N_H), "t": ("obs", _RNG.permutation(N_H).astype(float))},
)


def _parts(data, stratify, time="t"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parts = train_calibrate_test_split(data, (0.5, 0.25, 0.25), seed=0, stratify=stratify, time=time)
    return {k: sorted(v["obs"].values.tolist()) for k, v in parts.items()}


_SPLIT_REF = _parts(SPLIT_DATA, H_CODES)


@settings(max_examples=MAX_EXAMPLES)
@given(perm=st.permutations(range(N_H)), data=st.data(), kind=st.sampled_from(sorted(PAIRS)))
def test_stratified_split_rows_and_labels(perm, data, kind):
    """In time order, each group's split is a function of its rows: the same rows whatever the order or labels."""
    perm = np.asarray(perm)
    shuffled = SPLIT_DATA.isel(obs=perm)
    assert _parts(shuffled, pd.Series(H_CODES, index=SPLIT_DATA.indexes["obs"]).iloc[perm]) == _SPLIT_REF
    assert _parts(shuffled, xr.DataArray(H_CODES, dims="obs", coords={"obs": SPLIT_DATA["obs"]})) == _SPLIT_REF
    a, b = data.draw(PAIRS[kind])
    assert _parts(SPLIT_DATA, relabel(kind, a, b, H_CODES)) == _SPLIT_REF
    # without labels, by position: the permuted labels' split
    if is_moving(perm, H_CODES):
        assert _parts(shuffled, H_CODES) != _SPLIT_REF


@settings(max_examples=MAX_EXAMPLES)
@given(perm=st.permutations(range(N_H)), data=st.data(), kind=st.sampled_from(sorted(PAIRS)))
def test_random_stratified_split_counts(perm, data, kind):
    """At random, each group's count in each part depends on its size only (largest-remainder rule)."""
    perm = np.asarray(perm)

    def counts(data_, stratify):
        parts = _parts(data_, stratify, time=None)
        labels = dict(zip(SPLIT_DATA["obs"].values.tolist(), H_CODES.tolist()))
        return {k: np.bincount([labels[o] for o in v], minlength=2).tolist() for k, v in parts.items()}

    ref = counts(SPLIT_DATA, H_CODES)
    assert counts(SPLIT_DATA.isel(obs=perm), H_CODES[perm]) == ref
    a, b = data.draw(PAIRS[kind])
    assert counts(SPLIT_DATA, relabel(kind, a, b, H_CODES)) == ref


# ---------------------------------------------------------------------------
# conformal Bayes: train groups against the log-likelihood's observations, test groups against the test rows
# ---------------------------------------------------------------------------

S_CB, N_CB, M_CB, G_CB = 60, 10, 4, 40
CB_TRAIN_IDS = _RNG.permutation(np.arange(500, 500 + N_CB))
CB_LL = xr.DataArray(
    _RNG.normal(-1.0, 0.3, size=(1, S_CB, N_CB)), dims=("chain", "draw", "obs_id"), coords={"obs_id": CB_TRAIN_IDS}
)
CB_TRAIN_CODES = np.array([0, 1] * (N_CB // 2))
CB_TEST_IDS = np.array(["p", "q", "r", "s"])
CB_TEST = xr.DataArray(
    _RNG.normal(-1.0, 0.3, size=(1, S_CB, M_CB, G_CB)),
    dims=("chain", "draw", "obs", "grid"),
    coords={"obs": CB_TEST_IDS},
)
CB_TEST_CODES = np.array([0, 1, 1, 0])
CB_GRID = np.linspace(-4, 4, G_CB)
CB_Y = _RNG.normal(size=N_CB)


def _cb_predict(train_groups, groups):
    cb = calibprob.ConformalBayes(confidence_level=[0.5, 0.7], min_ess=0, max_pareto_k=100, min_grid_mass=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sets reaching this small grid's edge: beside the point
        return cb.fit(CB_LL, train_groups=train_groups, y=CB_Y).predict(CB_TEST, CB_GRID, groups=groups)


_CB_REF = _cb_predict(CB_TRAIN_CODES, CB_TEST_CODES)


@settings(max_examples=MAX_EXAMPLES)
@given(perm_tr=st.permutations(range(N_CB)), perm_te=st.permutations(range(M_CB)))
def test_conformal_bayes_shuffled_labelled_groups_change_nothing(perm_tr, perm_te):
    perm_tr, perm_te = np.asarray(perm_tr), np.asarray(perm_te)
    train = pd.Series(CB_TRAIN_CODES, index=CB_TRAIN_IDS).iloc[perm_tr]
    test = xr.DataArray(CB_TEST_CODES, dims="obs", coords={"obs": CB_TEST_IDS}).isel(obs=perm_te)
    xr.testing.assert_identical(_cb_predict(train, test), _CB_REF)
    # without labels: by position, exactly the permuted groups
    got = _cb_predict(CB_TRAIN_CODES[perm_tr], CB_TEST_CODES)
    xr.testing.assert_identical(got, _cb_predict(pd.Series(CB_TRAIN_CODES[perm_tr]).to_numpy(), CB_TEST_CODES))
    if is_moving(perm_tr, CB_TRAIN_CODES):
        assert not got.equals(_CB_REF)


@settings(max_examples=MAX_EXAMPLES)
@given(data=st.data(), kind=st.sampled_from(sorted(PAIRS)))
def test_conformal_bayes_relabelling_changes_nothing_but_labels(data, kind):
    a, b = data.draw(PAIRS[kind])
    got = _cb_predict(relabel(kind, a, b, CB_TRAIN_CODES), relabel(kind, a, b, CB_TEST_CODES))
    mapping = {0: a, 1: b}
    assert got["group"].values.tolist() == [mapping[g] for g in _CB_REF["group"].values.tolist()]
    xr.testing.assert_identical(got.drop_vars("group"), _CB_REF.drop_vars("group"))
