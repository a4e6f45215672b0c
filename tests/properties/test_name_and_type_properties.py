"""Dims taken by name and saved values by type: properties of the core's two tables.

* **dims** — for any observation-dim name (text, unicode included, or one of the reserved draw
  names), ``from_draws`` then ``to_datatree`` then ``from_draws`` either keeps every observation
  and its labels, or — for a reserved name (:data:`calibprob._core.dims.SAMPLE_DIMS`) — is refused
  with the fix; it is never read back with observations taken for draws;
* **saved values** — a value written as text is read by its declared type
  (:func:`calibprob._core.persistence.values.convert_scalar`): ``true``/``false`` in any case give
  that boolean, the text of an integer or a float gives that number, and any other text is refused
  as a boolean (never converted by its truthiness).

Counts: 2 + 3 properties, :data:`conftest.MAX_EXAMPLES` (12) examples each (milliseconds each).
"""

from __future__ import annotations

import string

import numpy as np
import pytest
import xarray as xr
from hypothesis import given
from hypothesis import strategies as st

import calibprob
from calibprob._core.dims import SAMPLE_DIMS
from calibprob._core.persistence.values import convert_scalar

_RNG = np.random.default_rng(8)
_DRAWS = _RNG.normal(size=(2, 40, 4))
_names = st.one_of(
    st.just("sample"),  # the reserved name that can sit beside chain and draw
    st.text(alphabet=string.ascii_letters + "_0é", min_size=1, max_size=8).filter(lambda s: s not in ("chain", "draw")),
)


@given(name=_names, labels=st.permutations([10, 11, 12, 13]))
def test_an_observation_dim_round_trips_or_is_refused(name, labels):
    da = xr.DataArray(_DRAWS, dims=("chain", "draw", name), coords={name: list(labels)}, name="y")
    if name in SAMPLE_DIMS:
        # read with sample_dims that leave it out, it cannot be written back beside chain/draw
        with pytest.raises(ValueError, match=r"(reserved for draws|which would be read back as draws)\. Rename"):
            calibprob.to_datatree(calibprob.from_draws(da, sample_dims=("chain", "draw")), n_draws=5)
        return
    pred = calibprob.from_draws(da)
    back = calibprob.from_draws(calibprob.to_datatree(pred, np.zeros(4), n_draws=20, random_state=0))
    assert back.attrs["obs_dim"] == name and back["obs"].values.tolist() == list(labels)


@given(order=st.permutations(["chain", "draw", "sample"]))
def test_a_reserved_name_is_refused_by_from_draws_beside_chain_and_draw(order):
    da = xr.DataArray(_DRAWS, dims=("chain", "draw", "sample"), name="y").transpose(*order)
    with pytest.raises(ValueError, match=r"'sample' beside \('chain', 'draw'\) .* Rename it"):
        calibprob.from_draws(da)


@given(value=st.booleans(), spelling=st.sampled_from([str.lower, str.upper, str.title]), pad=st.sampled_from(["", " "]))
def test_a_boolean_written_as_text_reads_as_that_boolean(value, spelling, pad):
    assert convert_scalar(np.asarray(pad + spelling(str(value)) + pad), "bool", "x") is value


@given(text=st.text(max_size=8).filter(lambda s: s.strip().lower() not in ("true", "false")))
def test_any_other_text_is_refused_as_a_boolean(text):
    with pytest.raises(ValueError, match=r"x: the saved value .* is not a bool"):
        convert_scalar(np.asarray(text), "bool", "x")


@given(i=st.integers(-(2**62), 2**62), f=st.floats(allow_nan=False))
def test_numbers_written_as_text_read_as_those_numbers(i, f):
    assert convert_scalar(np.asarray(str(i)), "int", "x") == i
    assert convert_scalar(np.asarray(repr(f)), "float", "x") == f
