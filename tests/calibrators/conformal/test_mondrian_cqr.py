"""Mondrian CQR: the minimum group size of each variant, and per-group equality with CQR."""

import numpy as np
import pytest

import calibprob
from calibprob.calibrators.conformal import min_group_size


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
    m = calibprob.Mondrian(calibprob.ConformalizedQuantileRegression(variant=variant)).fit(pred, y, groups=g)
    iv = m.predict_interval(pred, [0.9], groups=g)
    small = g == "small"
    alone = calibprob.ConformalizedQuantileRegression(variant=variant).fit(pred.isel(obs=small), y[small])
    ref = alone.predict_interval(pred.isel(obs=small), [0.9])
    for end in ("lower", "upper"):
        got = iv[end].sel(confidence_level=0.9).values[small]
        assert np.all(np.isfinite(got))
        np.testing.assert_array_equal(got, ref[end].sel(confidence_level=0.9).values)


def test_asymmetric_needs_the_two_sided_minimum():
    pred, y = _quantile_base(62, seed=2)
    g = np.repeat(["big", "small"], [50, 12])
    m = calibprob.Mondrian(calibprob.ConformalizedQuantileRegression(variant="asymmetric"))
    with pytest.warns(calibprob.CalibprobWarning, match=r"group 'small' has 12 calibration point\(s\).*needs 19"):
        m.fit(pred, y, groups=g)
    iv = m.predict_interval(pred, [0.9], groups=g).sel(confidence_level=0.9)
    assert np.all(np.isinf(iv["lower"].values[g == "small"])) and np.all(np.isinf(iv["upper"].values[g == "small"]))
