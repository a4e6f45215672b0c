r"""End-only evaluation of conformal Bayes sets: ranks at the set ends, not at every grid value.

The expensive part of conformal Bayes is the :math:`R \times n` block of conformity scores, one
matrix product over the draws per (test point, grid value) row (:mod:`._numerics`). Where the set
:math:`\{y_g : \text{rank}_g > \lfloor\alpha(n+1)\rfloor\}` is one interval of grid indices its
two ends decide it, and they are found with few rows:

1. **Coarse scan**: ranks at every :data:`COARSE_STEP`-th grid index and at the last one; where a
   level keeps none of them (a set narrower than the spacing), also every value between the scan's
   neighbours of its largest rank.
2. **Refinement**: per test point, level and side, the bracket (evaluated index outside the set,
   evaluated index inside) is halved on grid *indices* until the two are neighbours (binary search on
   the p-value's crossing: :math:`\lceil\log_2 \text{COARSE\_STEP}\rceil` rows per end).
3. **Check**: per test point and level, the kept rows among all evaluated ones (coarse and
   bisection) must form one run. A level that keeps nothing, or whose kept rows are in
   several runs (a set in several pieces, or a non-monotone p-value profile), fails the check, and
   the test point is evaluated on the **full grid** (counted in ``attrs["n_full_grid"]``).

A grid value not evaluated gets the smaller of the ranks of its nearest evaluated neighbours (a
*surrogate* rank): it lies inside a level's set iff both neighbours do, so the sets built from
the surrogate ranks are the intervals found above. They equal the full grid's sets whenever no
level's threshold is crossed twice between two neighbouring evaluated values (a dip inside the set,
or a piece outside it, narrower than the scan's spacing) — always for a p-value unimodal along the
grid. That case is the one no scan short of the full grid can see; the tests compare both modes on
the diabetes shape and on a bimodal predictive.

The element-wise pass over the draws (maxima, :math:`e^{\lambda - m}`, the sums) still runs on every
grid value: it gives the grid-mass check, the effective sample sizes and the Pareto
:math:`\hat k` exactly as the full mode does (bit for bit). It keeps no block-sized array: the draws
are taken in cache-sized chunks (:func:`row_stats`), and the weights :math:`e^{\lambda - m}` of the
few rows ranked are recomputed from the block (:func:`row_weights`), so that the estimator can take
blocks several times larger than the full mode's (more rows per matrix product, nearer the floor).

References
----------
Fong, E. and Holmes, C. (2021). Conformal Bayesian computation. NeurIPS 34, §3.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np

from calibprob.calibrators.conformal.bayes import _numerics
from calibprob.calibrators.conformal.bayes._numerics import (
    _c_rows,
    _exact_below,
    _screened_unnormalised,
)

#: Spacing of the coarse scan in grid indices (3 halvings refine an end to its neighbour pair).
COARSE_STEP = 8


def row_stats(logf: np.ndarray, check: Callable[[], None] | None, scratch: Any) -> SimpleNamespace:
    r"""The element-wise pass of every row of a block (S, b, G): the maxima and the sums of :math:`e^{\lambda - m}`.

    Returns ``mx``, ``total`` (:math:`\sum_s e`), ``log_new`` (:math:`\log\sigma_{n+1}`), ``ess`` and
    ``log_norm`` per row, and ``lf`` (the block as (S, R) rows) for :func:`row_weights`; the same
    arithmetic as :func:`._numerics.aoi_block`, so the ESS and the grid mass equal the full mode's bit
    for bit. Large blocks take the full mode's chunked pass (:func:`._numerics.chunked_sums`) without its
    float32 copy: no block-sized array is kept, and :func:`row_weights` recomputes :math:`e` for the few
    rows ranked. Small blocks (NumPy) keep ``e``.
    """
    S = logf.shape[0]
    lf = logf.reshape(S, -1)
    R = lf.shape[1]
    e = None
    if logf.size >= _numerics.FUSED_MIN:  # read at call time (the tests move it)
        lf = _c_rows(lf)
        mx, total, sq = _numerics.chunked_sums(lf, R, scratch)
    else:
        mx = lf.max(axis=0)
        with np.errstate(invalid="ignore"):  # a NaN or an all -inf row: reported by check below
            e = np.exp(lf - mx)
        total = e.sum(axis=0)
        sq = np.einsum("sr,sr->r", e, e)
    if check is not None and not (np.isfinite(mx).all() and np.isfinite(total).all()):
        check()
    log_new = np.log(sq) - np.log(total) + mx
    return SimpleNamespace(
        e=e, lf=lf, mx=mx, total=total, log_new=log_new, ess=total * total / sq, log_norm=mx + np.log(total)
    )


def row_weights(st: SimpleNamespace, cols: np.ndarray) -> np.ndarray:
    r""":math:`e^{\lambda - m}` (S, len(cols)) of the rows ``cols``, C-ordered, bit for bit the full mode's.

    Recomputed from the block where :func:`row_stats` did not keep it (:func:`._numerics.row_weights`).
    """
    if st.e is not None:
        return np.take(st.e, cols, axis=1)  # 3x faster than the fancy index st.e[:, cols] (measured)
    return _numerics.row_weights(st.lf, st.mx, cols)


def ranks_at(
    st: SimpleNamespace,
    cols: np.ndarray,
    logf: np.ndarray,
    log_lik: np.ndarray,
    E: np.ndarray,
    c: np.ndarray,
    E32: np.ndarray,
    members: np.ndarray | None,
    scratch: Any = None,
) -> np.ndarray:
    r"""Ranks :math:`1 + \#\{i: \sigma_{r,i} \le \sigma_{r,n+1}\}` of the rows ``cols`` of a block.

    The float32 screen on the unnormalised product with float64 rechecks
    (:func:`._numerics._screened_unnormalised`) and the exact log-space recomputation of underflowed
    entries, as the full mode; ``members`` (len(cols), n) or None.
    """
    e = row_weights(st, cols)
    thr = np.exp(st.log_new[cols] - c)
    below, small = _screened_unnormalised(
        lambda rows: np.take(e, rows, axis=1), st.total[cols], E, E32, e.astype(np.float32), thr, scratch
    )
    if small.any():
        r, i = np.nonzero(small)
        below[r, i] = _exact_below(logf, log_lik, st.mx, st.total, st.log_new, cols[r], i)
    if members is not None:
        below &= members
    return below.sum(axis=1) + 1


def end_ranks(
    evaluate: Callable[[np.ndarray, np.ndarray], np.ndarray], b: int, G: int, thr: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Coarse scan, bisection of each end, check; full grid where the check fails.

    Parameters
    ----------
    evaluate : callable
        ``evaluate(points, indices) -> ranks`` for (test point in the block, grid index) pairs.
    b, G : int
        Test points in the block and grid size.
    thr : ndarray of int, shape (b, L)
        Keep thresholds: a grid value is in a level's set iff its rank exceeds them.

    Returns
    -------
    rank : ndarray of int, shape (b, G)
        Evaluated ranks, surrogate ranks elsewhere (see the module docstring).
    done : ndarray of bool, shape (b, G)
        Which grid values were evaluated.
    full : ndarray of bool, shape (b,)
        The test points evaluated on the full grid (check failed).
    """
    rank = np.zeros((b, G), np.int64)
    done = np.zeros((b, G), bool)

    def run(pts: np.ndarray, idx: np.ndarray) -> None:
        pairs = np.unique(np.stack([pts, idx]), axis=1)
        pairs = pairs[:, ~done[pairs[0], pairs[1]]]
        if pairs.shape[1]:
            rank[pairs[0], pairs[1]] = evaluate(pairs[0], pairs[1])
            done[pairs[0], pairs[1]] = True

    coarse = np.unique(np.r_[np.arange(0, G, COARSE_STEP), G - 1])
    run(np.repeat(np.arange(b), coarse.size), np.tile(coarse, b))
    # a level whose set the scan misses (narrower than its spacing): every value around the scan's peak
    missed = np.flatnonzero(~(rank[:, None, coarse] > thr[:, :, None]).any(axis=2).all(axis=1))
    if missed.size:
        peak = np.argmax(rank[missed][:, coarse], axis=1)
        lo, hi = coarse[np.maximum(peak - 1, 0)], coarse[np.minimum(peak + 1, coarse.size - 1)]
        width = hi - lo + 1
        run(np.repeat(missed, width), np.repeat(lo, width) + _ramps(width))
    pj, pk, inside, outside = _brackets(rank, done, thr)
    while True:  # bisection of every bracket on grid indices, all brackets of the block in lockstep
        act = np.abs(inside - outside) > 1
        if not act.any():
            break
        mid = (inside + outside) // 2
        run(pj[act], mid[act])
        now_in = rank[pj, mid] > thr[pj, pk]
        inside = np.where(act & now_in, mid, inside)
        outside = np.where(act & ~now_in, mid, outside)
    full = (_runs(_surrogate(rank, done), thr) != 1).any(axis=1)
    if full.any():
        pts = np.flatnonzero(full)
        run(np.repeat(pts, G), np.tile(np.arange(G), pts.size))
    return _surrogate(rank, done), done, full


def _ramps(width: np.ndarray) -> np.ndarray:
    """``0, 1, ..., w - 1`` for each ``w`` in ``width``, concatenated."""
    return np.arange(width.sum()) - np.repeat(np.cumsum(width) - width, width)


def _brackets(
    rank: np.ndarray, done: np.ndarray, thr: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(point, level, inside, outside) of every finite set end among the evaluated values.

    Per test point and level, the first and last evaluated values kept and their evaluated
    neighbours outside the set (none where the set reaches the grid's edge, or keeps nothing).
    """
    b, G = rank.shape
    pos = np.arange(G)
    left = np.maximum.accumulate(np.where(done, pos, -1), axis=1)  # last evaluated value <= i
    right = np.minimum.accumulate(np.where(done, pos, G)[:, ::-1], axis=1)[:, ::-1]  # first >= i
    kept = done[:, None, :] & (rank[:, None, :] > thr[:, :, None])
    j, k = np.nonzero(kept.any(axis=2))
    first = np.argmax(kept[j, k], axis=1)
    last = G - 1 - np.argmax(kept[j, k, ::-1], axis=1)
    lo, up = first > 0, last < G - 1
    outside = np.r_[left[j[lo], first[lo] - 1], right[j[up], last[up] + 1]]
    return np.r_[j[lo], j[up]], np.r_[k[lo], k[up]], np.r_[first[lo], last[up]], outside


def _surrogate(rank: np.ndarray, done: np.ndarray) -> np.ndarray:
    """Ranks with each unevaluated value replaced by the smaller rank of its nearest evaluated neighbours."""
    b, G = rank.shape
    pos = np.arange(G)
    left = np.maximum.accumulate(np.where(done, pos, -1), axis=1)
    right = np.minimum.accumulate(np.where(done, pos, G)[:, ::-1], axis=1)[:, ::-1]
    rows = np.arange(b)[:, None]
    # the first and last grid values are always evaluated (coarse scan), so both neighbours exist
    fill = np.minimum(rank[rows, np.clip(left, 0, G - 1)], rank[rows, np.clip(right, 0, G - 1)])
    return np.where(done, rank, fill)


def _runs(rank: np.ndarray, thr: np.ndarray) -> np.ndarray:
    """Runs of kept grid values per (test point, level)."""
    kept = (rank[:, None, :] > thr[:, :, None]).astype(np.int8)
    return kept[:, :, 0] + np.count_nonzero(np.diff(kept, axis=2) == 1, axis=2)
