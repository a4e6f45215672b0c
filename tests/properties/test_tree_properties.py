"""A tree with one group thinned or truncated is refused by every entry point that reads a tree.

Issue 36's "draws that do not belong together": importance weights pair draw ``s`` of
``log_likelihood`` with draw ``s`` of ``posterior`` (and of ``posterior_predictive``). Hypothesis
thins (every k-th draw), truncates (the first or last draws only) or drops a chain of one group
the entry point reads; every entry point must refuse the tree naming the groups and their sizes
(the one reader, :mod:`calibprob._core.trees`), and read the untouched tree.

Entry points: :func:`calibprob.predictive.loo.loo_weights`, :func:`calibprob.from_loo`,
:meth:`calibprob.LOOJackknifePlus.fit_tree`, :meth:`calibprob.ConformalBayes.fit` (the PyMC and
bambi doors of conformal Bayes read the tree through it). Counts: 4 entry points x 1 property,
:data:`conftest.MAX_EXAMPLES` (12) examples each; each example reads a 2 x 60-draw tree of 12
points (milliseconds).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import calibprob
from calibprob.predictive.loo import loo_weights

_RNG = np.random.default_rng(4)
N, C, D = 12, 2, 60
_Y = _RNG.normal(size=N)
_MU = _RNG.normal(0, 0.2, size=(C, D))
_SIG = np.exp(_RNG.normal(0, 0.1, size=(C, D)))
_COORDS = {"chain": np.arange(C), "draw": np.arange(D), "obs_id": np.arange(N)}
_GROUPS = {
    "posterior": xr.Dataset({"mu": (("chain", "draw"), _MU), "sigma": (("chain", "draw"), _SIG)}),
    "log_likelihood": xr.Dataset(
        {"y": (("chain", "draw", "obs_id"), stats.norm.logpdf(_Y, _MU[..., None], _SIG[..., None]))}
    ),
    "posterior_predictive": xr.Dataset(
        {"y": (("chain", "draw", "obs_id"), _RNG.normal(_MU[..., None], _SIG[..., None], size=(C, D, N)))}
    ),
    "observed_data": xr.Dataset({"y": (("obs_id",), _Y)}),
}

#: entry point -> (call, the groups it reads)
ENTRY_POINTS = {
    "loo_weights": (lambda t: loo_weights(t), ("posterior", "log_likelihood")),
    "from_loo": (lambda t: calibprob.from_loo(t), ("posterior", "log_likelihood", "posterior_predictive")),
    "LOOJackknifePlus.fit_tree": (
        lambda t: calibprob.LOOJackknifePlus().fit_tree(t),
        ("posterior", "log_likelihood", "posterior_predictive"),
    ),
    "ConformalBayes.fit": (lambda t: calibprob.ConformalBayes().fit(t), ("posterior", "log_likelihood")),
}


def _tree(group=None, selection=None) -> xr.DataTree:
    out = {}
    for name, ds in _GROUPS.items():
        ds = ds.assign_coords({k: v for k, v in _COORDS.items() if k in ds.dims})
        out[name] = ds.isel(selection) if name == group else ds
    return xr.DataTree.from_dict(out)


@st.composite
def _damage(draw):
    """``{dim: indexer}`` that thins, truncates or drops a chain (never the identity)."""
    how = draw(st.sampled_from(["thin", "head", "tail", "chain"]))
    if how == "thin":
        return {"draw": slice(None, None, draw(st.integers(2, 7)))}
    if how == "chain":
        return {"chain": [draw(st.integers(0, C - 1))]}
    k = draw(st.integers(2, D - 1))
    return {"draw": slice(0, k) if how == "head" else slice(D - k, D)}


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@given(data=st.data())
def test_a_thinned_or_truncated_group_is_refused(entry, data):
    call, reads = ENTRY_POINTS[entry]
    group = data.draw(st.sampled_from(reads))
    selection = data.draw(_damage())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # high Pareto k on a small tree is beside the point
        call(_tree())
        with pytest.raises(ValueError, match=rf"do not hold the same draws .*{group} \(chain=\d+, draw=\d+\)"):
            call(_tree(group, selection))
