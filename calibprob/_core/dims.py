"""The one table of reserved dimension names, and the checks that read dims by name.

PyMC and ArviZ index posterior draws by ``chain`` and ``draw``; ``az.extract`` stacks the two
into one ``sample`` dim. Everything else on a draws array is an observation dim (PyMC's
``obs_id``, ``y_dim_0``, calibprob's ``obs``). calibprob identifies dims by these names and
nowhere else, so that a name cannot mean a draw dim in one function and an observation dim in
another: an observation dim called ``sample`` would be written by one reader as observations and
read back by another as draws. A name that would be both is refused with the fix (rename it).

The level helpers check that a level array indexes the quantiles it is given (one level per
quantile column), before any arithmetic pairs them.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

import numpy as np

__all__ = [
    "CHAIN_DIM",
    "DRAW_DIM",
    "STACKED_SAMPLE_DIM",
    "MCMC_DIMS",
    "SAMPLE_DIMS",
    "OBS_DIM",
    "is_sample_dim",
    "sample_dims_of",
    "check_obs_dim",
    "check_levels_match",
]

#: The chains of an MCMC run (PyMC, ArviZ).
CHAIN_DIM = "chain"
#: The draws within a chain.
DRAW_DIM = "draw"
#: ``az.extract``'s stacked ``(chain, draw)``.
STACKED_SAMPLE_DIM = "sample"
#: The dims of a posterior group in ArviZ's layout (what :func:`calibprob.to_datatree` writes).
MCMC_DIMS = (CHAIN_DIM, DRAW_DIM)
#: Every name that indexes draws: never an observation dim.
SAMPLE_DIMS = (CHAIN_DIM, DRAW_DIM, STACKED_SAMPLE_DIM)
#: calibprob's observation dim of a predictive Dataset.
OBS_DIM = "obs"


def is_sample_dim(name: Hashable) -> bool:
    """Whether ``name`` is a reserved draw dim (:data:`SAMPLE_DIMS`)."""
    return isinstance(name, str) and name in SAMPLE_DIMS


def sample_dims_of(dims: Iterable[Hashable], sample_dims: Iterable[Hashable] = SAMPLE_DIMS) -> list[Hashable]:
    """The draw dims among ``dims``, in the order of ``sample_dims``."""
    have = list(dims)
    return [d for d in sample_dims if d in have]


def check_obs_dim(name: str, argument: str = "obs_dim", *, sample_dims: Iterable[Hashable] = SAMPLE_DIMS) -> None:
    """Refuse an observation-dim name that is also a draw dim (or not a string), naming the fix.

    Raises
    ------
    ValueError
        ``name`` is one of ``sample_dims`` (by default :data:`SAMPLE_DIMS`) or not a non-empty string.
    """
    reserved = tuple(sample_dims)
    if not isinstance(name, str) or not name or name in reserved:
        raise ValueError(
            f"{argument} must be a string other than the draw dims {reserved}; got {name!r}, which "
            "would be read back as draws. Rename the observation dim (e.g. da.rename({"
            f"{name!r}: 'obs_id'}})) or pass {argument}='obs'."
        )


def check_levels_match(q: np.ndarray, levels: Any, name: str = "levels") -> np.ndarray:
    """``levels`` as a 1-D float array with one level per quantile column of ``q`` (``q.shape[-1]``).

    Raises
    ------
    ValueError
        ``levels`` is not 1-D, has fewer than two entries, or its length differs from the
        number of quantile columns (both named).
    """
    lv = np.asarray(levels, dtype=float)
    n_q = q.shape[-1] if q.ndim else 0
    if lv.ndim != 1 or lv.size < 2 or lv.size != n_q:
        raise ValueError(
            f"{name} must be a 1-D array with one level per quantile column: q has {n_q} columns "
            f"(shape {q.shape}) but {name} has shape {lv.shape}. Pass the levels the quantiles were "
            "computed at (at least two)."
        )
    return lv
