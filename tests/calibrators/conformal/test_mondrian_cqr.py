"""Mondrian CQR: the minimum group size of each variant, and per-group equality with CQR."""

import numpy as np
import pytest

import calibprob
from calibprob.calibrators.grouping import min_group_size


def _quantile_base(n, seed):
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    y = mu + rng.normal(size=n) * 1.7
    q = mu[:, None] + np.array([-1.0, 0.0, 1.0])[None, :]  # too narrow a 5-95 % band
    return calibprob.from_quantiles(q, [0.05, 0.5, 0.95]), y


@pytest.mark.parametrize("variant", ["symmetric", "cqr-r", "cqr-m"])
def test_one_rank_variants_resolve_a_group_of_the_symmetric_minimum(variant):
    # 12 points: above the symmetric minimum (9) at 0.9, below the two-sided one (19)
    assert min_group_size(0.9) <= 12 < min_group_size(0.9, sides=2)
    pred, y = _quantile_base(62, seed=1)
    g = np.repeat(["big", "small"], [50, 12])
    m = calibprob.Mondrian(calibprob.ConformalizedQuantileRegression(score=variant)).fit(pred, y, groups=g)
    iv = m.predict_interval(pred, [0.9], groups=g)
    small = g == "small"
    alone = calibprob.ConformalizedQuantileRegression(score=variant).fit(pred.isel(obs=small), y[small])
    ref = alone.predict_interval(pred.isel(obs=small), [0.9])
    for end in ("lower", "upper"):
        got = iv[end].sel(confidence_level=0.9).values[small]
        assert np.all(np.isfinite(got))
        np.testing.assert_array_equal(got, ref[end].sel(confidence_level=0.9).values)


def test_asymmetric_needs_the_two_sided_minimum():
    pred, y = _quantile_base(62, seed=2)
    g = np.repeat(["big", "small"], [50, 12])
    m = calibprob.Mondrian(calibprob.ConformalizedQuantileRegression(score="asymmetric"))
    with pytest.warns(calibprob.CalibprobWarning, match=r"group 'small' has 12 calibration point\(s\).*needs 19"):
        m.fit(pred, y, groups=g)
    iv = m.predict_interval(pred, [0.9], groups=g).sel(confidence_level=0.9)
    assert np.all(np.isinf(iv["lower"].values[g == "small"])) and np.all(np.isinf(iv["upper"].values[g == "small"]))


def test_groups_on_cqr_equals_a_hand_computation_per_group():
    """Mondrian x CQR (``groups=``): each group's interval is [lo - Q_k, hi + Q_k], Q_k by hand.

    Q_k is the ceil(c (n_k + 1))-th smallest of the group's scores max(lo - y, y - hi)
    (Romano, Patterson & Candès 2019, eq. 6-7); ``predict`` (which raised a KeyError from
    xarray through Mondrian before) gives the same interval family as ``predict_interval``.
    """
    pred, y = _quantile_base(90, seed=3)
    g = np.repeat(["a", "b", "c"], [40, 30, 20])
    cqr = calibprob.ConformalizedQuantileRegression(confidence_level=[0.9]).fit(pred, y, groups=g)
    q = pred.calib.quantiles
    lo, hi = q[:, 0], q[:, 2]  # the 0.05 and 0.95 quantiles: CQR at 0.9
    iv = cqr.predict_interval(pred, 0.9, groups=g)
    for k, n_k in (("a", 40), ("b", 30), ("c", 20)):
        rows = g == k
        scores = np.sort(np.maximum(lo[rows] - y[rows], y[rows] - hi[rows]))
        Q = scores[int(np.ceil(0.9 * (n_k + 1))) - 1]
        np.testing.assert_allclose(iv["lower"].values[rows], lo[rows] - Q, rtol=0, atol=1e-12)
        np.testing.assert_allclose(iv["upper"].values[rows], hi[rows] + Q, rtol=0, atol=1e-12)
    both = cqr.predict(pred, groups=g)
    assert both.attrs["family"] == "interval"
    np.testing.assert_array_equal(both["lower"].sel(confidence_level=0.9).values, iv["lower"].values)
    via_wrapper = calibprob.Mondrian(calibprob.ConformalizedQuantileRegression(confidence_level=[0.9]))
    assert via_wrapper.fit(pred, y, groups=g).predict(pred, groups=g).identical(both)
    with pytest.raises(ValueError, match=r"levels= was given, but ConformalizedQuantileRegression predicts intervals"):
        via_wrapper.predict(pred, levels=[0.1, 0.9], groups=g)
