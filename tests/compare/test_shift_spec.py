"""A spec's shifted test set and its methods' weights (issue 39, item 5).

Independent checks: the shifted twin uses the same train / calibration split as its declared entry
and draws its test rows from that entry's test part, with the tilt's law (the share of large-tilt
rows rises as exp(tilt) says); the oracle weights are the tilt itself at the raw rows; a tilt on a
column that does not exist, or weights on a kind that takes none, is refused naming the fix; a task
records the shift diagnostic and the weighted method differs from the unweighted one only on the
shifted twin.
"""

from __future__ import annotations

import numpy as np
import pytest

from calibprob._core.options import SpecError
from calibprob.compare import tasks
from calibprob.compare.spec import parse_spec
from calibprob.compare.spec.shift import draw_shifted, tilt_ratio
from calibprob.compare.tasks import _prepare, run_task
from calibprob.datasets import load_dataset

TILT = {"tilt": {"log_Frequency": -1.0, "log_Suction": 1.0}, "fraction": 0.25}


def _spec(**over):
    spec = {
        "name": "shift",
        "datasets": [{"name": "airfoil", "shift": TILT}],
        "split": {"train": 0.25, "calibrate": 0.25, "test": 0.5},
        "standardize": False,
        "repetitions": 1,
        "seed": 3,
        "base": {"kind": "ols"},
        "confidence_levels": [0.9],
        "methods": {
            "plain": {"kind": "split-conformal"},
            "oracle": {"kind": "split-conformal", "weights": "oracle"},
            "cqr-oracle": {"kind": "cqr", "weights": "oracle"},
        },
    }
    spec.update(over)
    return spec


def test_a_shift_table_adds_a_twin_that_round_trips():
    spec = parse_spec(_spec())
    assert spec.dataset_names == ["airfoil", "airfoil-shifted"]
    assert [m.weights for m in spec.methods] == [None, "oracle", "oracle"]
    again = parse_spec(spec.to_dict())
    assert again.dataset_names == spec.dataset_names and again.fingerprint == spec.fingerprint


def test_the_twin_shares_the_split_and_draws_its_test_rows_from_it():
    spec = parse_spec(_spec())
    _, plain = _prepare(spec, "airfoil", 0)
    _, shifted = _prepare(spec, "airfoil-shifted", 0)
    for part in ("train", "calibrate"):
        assert np.array_equal(plain[part][0], shifted[part][0])
    rows = {tuple(r) for r in plain["test"][0]}
    assert all(tuple(r) in rows for r in shifted["test"][0])
    assert len(shifted["test"][1]) > 0.25 * len(plain["test"][1])
    # the oracle ratio is the tilt at the raw rows (1 on the declared entry)
    w_cal, w_te = shifted["oracle_weights"]
    X = shifted["calibrate"][0]
    np.testing.assert_allclose(w_cal, np.exp(-X[:, 0] + X[:, 4]), rtol=1e-12)
    assert np.all(plain["oracle_weights"][0] == 1.0)


@pytest.mark.seeded(0)
def test_the_draw_follows_the_tilt(seed, record_property):
    """Rejection rounds draw row i with expected count proportional to w_i: the drawn mean of log w matches.

    The seed sweep's ``seed`` picks the block of 40 draws, seeds 40 seed .. 40 seed + 39 (0..39 in the default run).
    """
    data = load_dataset("airfoil")
    w = tilt_ratio(data, TILT)
    counts = np.zeros(w.size)
    for draw in range(40 * seed, 40 * seed + 40):
        np.add.at(counts, draw_shifted(data, TILT, draw), 1.0)
    tilted_mean = np.sum(w * np.log(w)) / np.sum(w)  # E_w[log w] under the tilted law
    drawn_mean = np.sum(counts * np.log(w)) / counts.sum()
    record_property("drawn_mean_gap", float(abs(drawn_mean - tilted_mean)))  # seeds 0..19: 0.021 at worst (0.05)
    assert drawn_mean == pytest.approx(tilted_mean, abs=0.05)
    assert drawn_mean > np.mean(np.log(w)) + 0.5  # far from the untilted mean


def test_bad_shift_and_weights_are_refused_naming_the_fix():
    with pytest.raises(
        SpecError,
        match=r"shift.tilt names 'log_Frequncy', which is not a column of the data\. Did you mean 'log_Frequency'",
    ):
        parse_spec(_spec(datasets=[{"name": "airfoil", "shift": {"tilt": {"log_Frequncy": 1.0}}}]))
    with pytest.raises(SpecError, match=r"shift.tilt names 'Sound', which is the target"):
        parse_spec(_spec(datasets=[{"name": "airfoil", "shift": {"tilt": {"Sound": 1.0}}}]))
    with pytest.raises(SpecError, match=r"shift.fraction must be a number in \(0, 1\]; got 2"):
        parse_spec(_spec(datasets=[{"name": "airfoil", "shift": {"tilt": {"Angle": 1.0}, "fraction": 2}}]))
    with pytest.raises(SpecError, match=r"shift applies to bundled and CSV entries only|tilts named data columns"):
        parse_spec(_spec(datasets=[{"name": "f", "function": "branin", "n": 100, "shift": TILT}]))
    with pytest.raises(SpecError, match=r"methods.iso.weights: kind 'isotonic' takes no conformal weights"):
        parse_spec(_spec(methods={"iso": {"kind": "isotonic", "weights": "oracle"}}))
    with pytest.raises(SpecError, match=r"methods.w.weights"):
        parse_spec(_spec(methods={"w": {"kind": "split-conformal", "weights": "psychic"}}))


def test_a_task_records_the_shift_and_the_oracle_weights_move_only_the_twin(monkeypatch):
    monkeypatch.setattr(tasks, "SHIFT_PERMUTATIONS", 9)  # p-value resolution 0.1: enough here, and fast
    spec = parse_spec(_spec())
    plain = run_task(spec.to_dict(), "airfoil", 0)
    shifted = run_task(spec.to_dict(), "airfoil-shifted", 0)
    assert not any(plain["error"].values.ravel()) and not any(shifted["error"].values.ravel())
    assert float(shifted["shift_auc"].squeeze()) > 0.75 and float(shifted["shift_pvalue"].squeeze()) == 0.1
    assert float(plain["shift_pvalue"].squeeze()) > 0.1
    width = lambda out, m: float(out["width"].sel(calibrator=m, confidence_level=0.9).squeeze())  # noqa: E731
    assert width(plain, "oracle") == pytest.approx(width(plain, "plain"), rel=1e-12)  # ratio 1: unweighted
    assert width(shifted, "oracle") > width(shifted, "plain")  # the tilt moves the test rows to noisier inputs


def _exact(arrays, weights):
    """Coverage and median length of weighted split conformal around OLS, by SplitConformalRegressor's exact rule."""
    from calibprob.calibrators.conformal import SplitConformalRegressor
    from calibprob.weights import GivenWeights

    def ols(X, y, X_new):
        beta = np.linalg.lstsq(np.c_[np.ones(len(X)), X], y, rcond=None)[0]
        return np.c_[np.ones(len(X_new)), X_new] @ beta

    (Xf, yf), (Xc, yc), (Xt, yt) = arrays["train"], arrays["calibrate"], arrays["test"]
    g = GivenWeights(weights[0], test=weights[1], on_small="ignore")
    model = SplitConformalRegressor(estimator=ols, confidence_level=0.9).fit(Xf, yf).calibrate(Xc, yc, weights=g)
    iv = model.predict_interval(Xt, 0.9, weights=g)
    lo, up = iv["lower"].values, iv["upper"].values
    return float(np.mean((lo <= yt) & (yt <= up))), float(np.median(up - lo))


def test_the_shift_protocol_scores_the_exact_weighted_intervals_and_fits_the_ratio_on_the_training_half(monkeypatch):
    """Tibshirani et al.'s protocol, on one split: the exact thresholds (the test row's mass at +inf), their median
    length, and the logistic ratio fitted on the whole training half (fit + calibration parts) against the test rows."""
    from calibprob.weights import LikelihoodRatio

    monkeypatch.setattr(tasks, "SHIFT_PERMUTATIONS", 9)
    methods = {"oracle": {"kind": "split-conformal", "weights": "oracle"}}
    methods["logistic"] = {"kind": "split-conformal", "weights": "logistic"}
    spec = parse_spec(_spec(methods=methods, metrics=["coverage", "width", "median_width"]))
    out = run_task(spec.to_dict(), "airfoil-shifted", 0)
    _, arrays = _prepare(spec, "airfoil-shifted", 0)
    X_half = np.vstack([arrays["train"][0], arrays["calibrate"][0]])
    ratio = LikelihoodRatio(cv=None, clip=None).fit(X_half, arrays["test"][0])
    n_fit = len(arrays["train"][0])
    expected = {
        "oracle": _exact(arrays, arrays["oracle_weights"]),
        "logistic": _exact(arrays, (ratio.calibration_weights_[n_fit:], ratio.test_weights_)),
    }
    for method, (coverage, median) in expected.items():
        row = out.sel(calibrator=method, confidence_level=0.9).squeeze()
        assert float(row["coverage"]) == coverage, method
        assert float(row["median_width"]) == pytest.approx(median, rel=1e-12), method
