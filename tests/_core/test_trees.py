"""The one reader of inference trees (:mod:`calibprob._core.trees`): every group it uses holds the same draws.

Before issue 36 a tree whose ``posterior`` was thinned or truncated (and so no longer the posterior
of its ``log_likelihood``) was accepted by :func:`calibprob.predictive.loo.loo_weights`,
:func:`calibprob.from_loo`, :meth:`calibprob.LOOJackknifePlus.fit_tree` and
:meth:`calibprob.ConformalBayes.fit`, which computed importance weights against another posterior
(r_eff from one posterior, weights from another), and a ``log_likelihood`` indexed in another order
than ``observed_data`` was paired with it by position.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr
from scipy import stats

import calibprob
from calibprob._core.trees import check_tree
from calibprob.predictive.loo import loo_weights

_RNG = np.random.default_rng(0)
N, C, D = 30, 2, 200
Y = _RNG.normal(size=N)
_MU = _RNG.normal(0, 0.2, size=(C, D))
_SIG = np.exp(_RNG.normal(0, 0.1, size=(C, D)))
_LL = stats.norm.logpdf(Y[None, None, :], _MU[..., None], _SIG[..., None])
_PP = _RNG.normal(_MU[..., None], _SIG[..., None], size=(C, D, N))
_DIMS = ("chain", "draw", "obs_id")
_DRAW_COORDS = {"chain": np.arange(C), "draw": np.arange(D)}  # as pm.sample labels them


def _tree(posterior=slice(None), log_likelihood=slice(None), posterior_predictive=slice(None), obs_order=None):
    obs = np.arange(N) if obs_order is None else np.asarray(obs_order)
    return xr.DataTree.from_dict(
        {
            "posterior": xr.Dataset(
                {"mu": (("chain", "draw"), _MU), "sigma": (("chain", "draw"), _SIG)}, coords=_DRAW_COORDS
            ).isel(draw=posterior),
            "log_likelihood": xr.Dataset({"y": (_DIMS, _LL)}, coords={"obs_id": np.arange(N), **_DRAW_COORDS}).isel(
                draw=log_likelihood
            ),
            "posterior_predictive": xr.Dataset(
                {"y": (_DIMS, _PP)}, coords={"obs_id": np.arange(N), **_DRAW_COORDS}
            ).isel(draw=posterior_predictive),
            "observed_data": xr.Dataset({"y": (("obs_id",), Y[obs])}, coords={"obs_id": obs}),
        }
    )


ENTRY_POINTS = {
    "loo_weights": lambda t: loo_weights(t),
    "from_loo": lambda t: calibprob.from_loo(t),
    "LOOJackknifePlus.fit_tree": lambda t: calibprob.LOOJackknifePlus().fit_tree(t),
    "ConformalBayes.fit": lambda t: calibprob.ConformalBayes().fit(t),
}


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize(
    "change, sizes",
    [
        ({"posterior": slice(0, 100)}, r"posterior \(chain=2, draw=100\); log_likelihood \(chain=2, draw=200\)"),
        ({"posterior": slice(None, None, 2)}, r"posterior \(chain=2, draw=100\)"),
        ({"log_likelihood": slice(0, 150)}, r"log_likelihood \(chain=2, draw=150\)"),
    ],
)
def test_a_thinned_or_truncated_group_is_refused_by_every_entry_point(entry, change, sizes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # high Pareto k on this small tree is beside the point
        ENTRY_POINTS[entry](_tree())  # the whole tree is read
        with pytest.raises(
            ValueError, match=r"do not hold the same draws .*" + sizes + r".*pm\.compute_log_likelihood"
        ):
            ENTRY_POINTS[entry](_tree(**change))


@pytest.mark.parametrize("entry", ["from_loo", "LOOJackknifePlus.fit_tree"])
def test_a_truncated_posterior_predictive_is_refused_where_it_is_read(entry):
    with pytest.raises(ValueError, match=r"posterior_predictive \(chain=2, draw=120\)"):
        ENTRY_POINTS[entry](_tree(posterior_predictive=slice(0, 120)))


def test_the_same_sizes_with_other_draws_are_refused():
    tree = _tree(posterior=slice(100, 200), log_likelihood=slice(0, 100))
    with pytest.raises(ValueError, match=r"draw labels differ between 'posterior' and 'log_likelihood'"):
        check_tree(tree, ("posterior", "log_likelihood"))


def test_observations_labelled_in_another_order_are_refused():
    order = np.r_[1, 0, np.arange(2, N)]
    with pytest.raises(
        ValueError, match=r"label the observations differently along 'obs_id' \(first at position 0: 0 vs 1\)"
    ):
        calibprob.ConformalBayes().fit(_tree(obs_order=order))


def test_a_non_tree_is_refused_naming_the_fix():
    with pytest.raises(TypeError, match=r"idata must be an xarray.DataTree or arviz.InferenceData .* got dict"):
        check_tree({}, ("posterior",))
