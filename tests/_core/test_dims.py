"""Dims identified by name from one table (:mod:`calibprob._core.dims`); levels checked against quantiles.

Before issue 36: a posterior predictive whose observation dim is called ``sample`` was written by
``to_datatree`` beside ``chain`` / ``draw`` and could not be read back (``from_draws`` took
``sample`` for draws); the ``quantile_*`` helpers given levels of another length than the
quantiles returned numbers.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy import stats

import calibprob
from calibprob._core.dims import SAMPLE_DIMS, check_levels_match, check_obs_dim
from calibprob.predictive import (
    quantile_cdf,
    quantile_logpdf,
    quantile_moments,
    quantile_pieces,
    quantile_ppf,
    quantile_sample,
    quantile_zscore,
)

_RNG = np.random.default_rng(0)
_DRAWS = _RNG.normal(size=(2, 100, 5))


def _pp(obs_dim):
    return xr.Dataset({"y": (("chain", "draw", obs_dim), _DRAWS)}, coords={obs_dim: np.arange(5)})


def test_the_table_reserves_chain_draw_and_sample():
    assert SAMPLE_DIMS == ("chain", "draw", "sample")
    for name in SAMPLE_DIMS:
        with pytest.raises(ValueError, match=rf"obs_dim must be a string other than the draw dims .* got '{name}'"):
            check_obs_dim(name)
    check_obs_dim("obs_id")


def test_an_observation_dim_named_sample_is_refused_where_it_would_be_read_as_draws():
    # read with sample_dims that leave 'sample' out, the prediction carries obs_dim='sample' ...
    pred = calibprob.from_draws(_pp("sample"), sample_dims=("chain", "draw"))
    assert pred.attrs["obs_dim"] == "sample" and pred.sizes["obs"] == 5
    # ... which to_datatree refused to write beside chain/draw, where every reader takes it for draws
    with pytest.raises(ValueError, match=r"got 'sample', which would be read back as draws\. Rename"):
        calibprob.to_datatree(pred, np.zeros(5), n_draws=10)
    dt = calibprob.to_datatree(pred, np.zeros(5), n_draws=10, obs_dim="obs_id")
    assert calibprob.from_draws(dt).sizes["obs"] == 5  # written under another name, read back
    # from_draws itself names the clash instead of "no observation dim"
    tree = xr.DataTree.from_dict({"posterior_predictive": _pp("sample")})
    with pytest.raises(ValueError, match=r"'sample' beside \('chain', 'draw'\) .* Rename it, e\.g\. draws\.rename"):
        calibprob.from_draws(tree)
    with pytest.raises(ValueError, match=r"obs_dim='draw' is also one of the draw dims"):
        calibprob.from_draws(_pp("obs_id"), obs_dim="draw")


def test_a_datatree_round_trip_keeps_every_observation():
    pred = calibprob.from_draws(_pp("obs_id"))
    dt = calibprob.to_datatree(pred, np.zeros(5), n_draws=50, random_state=0)
    back = calibprob.from_draws(dt)
    assert back.sizes["obs"] == 5 and back.attrs["obs_dim"] == "obs_id"


_LEVELS = np.array([0.1, 0.5, 0.9])
_Q = stats.norm.ppf(_LEVELS)[None, :].repeat(4, axis=0)


@pytest.mark.parametrize(
    "call",
    [
        lambda lv: quantile_cdf(_Q, lv, 0.0),
        lambda lv: quantile_logpdf(_Q, lv, 0.0),
        lambda lv: quantile_ppf(_Q, lv, [0.3]),
        lambda lv: quantile_zscore(_Q, lv, np.zeros(4)),
        lambda lv: quantile_pieces(_Q, lv),
        lambda lv: quantile_moments(_Q, lv),
        lambda lv: quantile_sample(_Q, lv, 3, np.random.default_rng(0)),
    ],
)
def test_quantile_helpers_refuse_levels_of_another_length(call):
    call(_LEVELS)  # the right levels: fine
    with pytest.raises(ValueError, match=r"levels must be a 1-D array with one level per quantile column: q has 3"):
        call(np.array([0.1, 0.3, 0.5, 0.9]))
    with pytest.raises(ValueError, match=r"q has 3 columns .* levels has shape \(2,\)"):
        call(np.array([0.1, 0.9]))


def test_check_levels_match_returns_float_levels():
    np.testing.assert_array_equal(check_levels_match(np.zeros((2, 3)), [0.1, 0.5, 0.9]), _LEVELS)
