"""The optional ``reach(obs)`` of a quantile Dataset (Mondrian: one calibration size per group).

Independent reference: the same Dataset without ``reach`` (the finite law), masked by hand
at the probabilities outside :math:`[(1-R)/2, (1+R)/2]`.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy import stats

import calibprob
from calibprob.predictive import REACH_VAR, reach_variable

LEVELS = np.round(np.linspace(0.05, 0.95, 19), 10)


def _pair(n=40, seed=0):
    rng = np.random.default_rng(seed)
    mu, sd = rng.normal(size=n), rng.uniform(0.5, 2.0, size=n)
    plain = calibprob.from_quantiles(mu[:, None] + sd[:, None] * stats.norm.ppf(LEVELS)[None, :], LEVELS)
    reach = np.where(np.arange(n) % 2 == 0, 0.8, 1.0)  # half the rows state central levels up to 0.8 only
    limited = plain.assign({REACH_VAR: reach_variable(reach)})
    y = mu + sd * rng.normal(size=n)
    return plain, limited, reach, y


def test_ppf_and_interval_are_infinite_beyond_the_reach_only():
    plain, limited, reach, _ = _pair()
    p = np.array([0.05, 0.1, 0.5, 0.9, 0.95])
    got, ref = limited.calib.ppf(p).values, plain.calib.ppf(p).values
    small = reach < 1
    np.testing.assert_array_equal(got[~small], ref[~small])
    np.testing.assert_array_equal(got[small][:, 1:4], ref[small][:, 1:4])  # 0.1 and 0.9 are (1 -+ 0.8)/2
    assert (got[small][:, 0] == -np.inf).all() and (got[small][:, 4] == np.inf).all()
    iv, iv_ref = limited.calib.interval([0.8, 0.9]), plain.calib.interval([0.8, 0.9])
    np.testing.assert_array_equal(iv["lower"].values[:, 0], iv_ref["lower"].values[:, 0])
    assert (iv["lower"].values[small, 1] == -np.inf).all() and (iv["upper"].values[small, 1] == np.inf).all()
    np.testing.assert_array_equal(iv["upper"].values[~small, 1], iv_ref["upper"].values[~small, 1])
    assert (limited.calib.width(0.9).values[small] == np.inf).all()


def test_the_law_is_the_stored_one():
    """CDF, density, moments and draws read the finite stored quantiles, reach or not."""
    plain, limited, _, y = _pair()
    np.testing.assert_array_equal(limited.calib.cdf(y).values, plain.calib.cdf(y).values)
    np.testing.assert_array_equal(limited.calib.logpdf(y).values, plain.calib.logpdf(y).values)
    np.testing.assert_array_equal(limited.calib.mean().values, plain.calib.mean().values)
    np.testing.assert_array_equal(limited.calib.sample(5, 0).values, plain.calib.sample(5, 0).values)


def test_evaluate_counts_the_stated_ends_and_scores_the_law():
    plain, limited, reach, y = _pair()
    m, ref = calibprob.evaluate(limited, y, [0.8, 0.9]), calibprob.evaluate(plain, y, [0.8, 0.9])
    for v in ("crps", "nll", "pinball", "rmse", "std"):  # scores of the finite law: never NaN, never inf
        assert float(m[v]) == float(ref[v]), v
    assert float(m["coverage"].sel(confidence_level=0.8)) == float(ref["coverage"].sel(confidence_level=0.8))
    # at 0.9 the limited rows hold every y (-inf, inf): coverage by hand
    iv = plain.calib.interval(0.9)
    hit = (iv["lower"].values <= y) & (y <= iv["upper"].values)
    assert float(m["coverage"].sel(confidence_level=0.9)) == np.mean(np.where(reach < 1, True, hit))
    assert np.isinf(float(m["width"].sel(confidence_level=0.9)))
    assert np.isfinite(float(m["iae"])) and np.isfinite(float(m["ece"]))
    g = np.where(reach < 1, "small", "big")
    mg = calibprob.evaluate(limited, y, [0.8, 0.9], groups=g)
    assert float(mg["group_infinite"].sel(group="small", confidence_level=0.9)) == 1.0
    assert float(mg["group_infinite"].sel(group="big", confidence_level=0.9)) == 0.0
    assert float(mg["group_infinite"].sel(group="small", confidence_level=0.8)) == 0.0


def test_reach_survives_row_selection_and_saving(tmp_path):
    _, limited, reach, _ = _pair()
    sub = limited.isel(obs=[0, 1])
    assert sub.calib.interval(0.9)["lower"].values[0] == -np.inf
    assert np.isfinite(sub.calib.interval(0.9)["lower"].values[1])
    path = tmp_path / "r.nc"
    limited.to_netcdf(path)
    back = xr.load_dataset(path)
    np.testing.assert_array_equal(back.calib.interval(0.9)["lower"].values, limited.calib.interval(0.9)["lower"].values)


@pytest.mark.parametrize(
    ("values", "match"),
    [
        (np.full(40, 1.5), r"'reach' must lie in \[0, 1\].*got 1\.5 in 40 row\(s\)\. Drop the variable"),
        (np.full(40, np.nan), r"'reach' must lie in \[0, 1\].*got nan"),
    ],
)
def test_validate_refuses_a_bad_reach(values, match):
    plain, _, _, _ = _pair()
    with pytest.raises(ValueError, match=match):
        calibprob.validate(plain.assign({REACH_VAR: ("obs", values)}))
    with pytest.raises(ValueError, match=r"'reach' must have dims \('obs',\); got \('level',\)"):
        calibprob.validate(plain.assign({REACH_VAR: ("level", np.ones(LEVELS.size))}))


def test_back_transform_keeps_the_reach():
    """A monotone back-transform maps quantiles level by level: the stated levels, and so the reach, are kept."""
    from calibprob.transforms import back_transform

    plain, limited, reach, _ = _pair()
    out = back_transform(limited, "log", shift=0.0, scale=0.5)
    np.testing.assert_array_equal(out[REACH_VAR].values, reach)
    ref = back_transform(plain, "log", shift=0.0, scale=0.5).calib.interval(0.9)
    got = out.calib.interval(0.9)
    assert (got["lower"].values[reach < 1] == -np.inf).all() and (got["upper"].values[reach < 1] == np.inf).all()
    np.testing.assert_array_equal(got["lower"].values[reach == 1], ref["lower"].values[reach == 1])
