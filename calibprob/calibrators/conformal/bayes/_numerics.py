r"""NumPy numerics of conformal Bayes: add-one-in importance weights, conformity scores, ranks.

Notation (Fong and Holmes 2021, §3): :math:`\ell_{s,i} = \log f_{\theta_s}(y_i \mid x_i)` is the
training log-likelihood of draw :math:`s` (an :math:`S \times n` matrix); a *row* :math:`r` is one
(test point, candidate value) pair with column :math:`\lambda_{s,r} = \log f_{\theta_s}(y_r \mid x_r)`.
The add-one-in (AOI) weights are :math:`\bar w_{s,r} = \exp(\lambda_{s,r} - \operatorname{LSE}_t
\lambda_{t,r})` and the conformity scores

.. math::

    \log\sigma_{r,i} = \operatorname{LSE}_s(\log \bar w_{s,r} + \ell_{s,i}),\qquad
    \log\sigma_{r,n+1} = \operatorname{LSE}_s(\log \bar w_{s,r} + \lambda_{s,r}).

The :math:`R \times n` block of :math:`\log\sigma_{r,i}` is one matrix product: with the column
shift :math:`c_i = \max_s \ell_{s,i}` and :math:`E_{s,i} = e^{\ell_{s,i} - c_i} \in (0, 1]`,
:math:`\log\sigma_{r,i} = c_i + \log (\bar W^\top E)_{r,i}`. Every factor lies in :math:`[0, 1]`,
so nothing overflows; an entry that underflows (below :data:`_TINY`) is recomputed with an exact
log-sum-exp, so the result is log-space accurate everywhere. When the columns' maxima lie within
:data:`_SPAN` of each other (always, for real data) one common shift :math:`c` serves every
column, and :math:`\sigma_{r,i} \le \sigma_{r,n+1}` is decided as
:math:`(\bar W^\top E)_{r,i} \le e^{\log\sigma_{r,n+1} - c}` without the log of the block.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np
from scipy.special import logsumexp

#: Below this, a matrix-product entry has lost relative precision to underflow: recompute in log space.
_TINY = 1e-280
#: Float32 products below this are recomputed in float64 (far above float32's underflow).
_TINY32 = 1e-30
#: Entries re-checked in float64 per gather (bounds the (S, k) temporaries).
_RECHECK = 256
#: Draws per float32 partial product of the screen (:func:`product32`): its rounding bound grows with the
#: additions one entry passes through, ``SCREEN_DRAWS`` + S / ``SCREEN_DRAWS`` instead of S, so 15x fewer
#: entries are re-checked in float64 at 8 000 draws, for about 5 % more matrix-product time (measured).
SCREEN_DRAWS = 512
#: Bytes of one chunk of draws in the element-wise pass (:func:`chunked_sums`, within a core's L2 cache).
CHUNK_BYTES = 2**19
#: Largest spread of the columns' maximum log-likelihoods that one common shift takes without underflow.
_SPAN = 600.0
#: Blocks of at least this many (draw, row) entries take the fused path (:func:`_fused_block`, compiled
#: with Numba: one pass for the maxima and shift, one for the sums and the float32 copy); smaller ones
#: the NumPy path, which needs no compilation. Both give the same ranks and bit-identical ESS.
FUSED_MIN = 2**20


def shifted_likelihood(log_lik: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""``(E, c)`` with :math:`E = e^{\ell - c}` (S, n).

    :math:`c` is one common shift :math:`\max_{s,i} \ell_{s,i}` when every column's maximum lies
    within :data:`_SPAN` of it (so no column underflows and the scores can be compared without
    taking the log of the :math:`R \times n` block), else the per-column maxima
    :math:`c_i = \max_s \ell_{s,i}` (an array of shape (n,)).
    """
    col = log_lik.max(axis=0)
    c = col.max() if col.max() - col.min() < _SPAN else col
    return np.ascontiguousarray(np.exp(log_lik - c)), np.asarray(c)


def aoi_block(
    logf: np.ndarray,
    log_lik: np.ndarray,
    E: np.ndarray,
    c: np.ndarray,
    members: np.ndarray | None = None,
    E32: np.ndarray | None = None,
    *,
    check: Callable[[], None] | None = None,
    scratch: Scratch | None = None,
    point_weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Ranks of a block of rows, and the AOI weights' diagnostics.

    Parameters
    ----------
    logf : ndarray, shape (S, ...)
        :math:`\lambda_{s,r}` for the block's rows (any trailing shape, flattened to R rows),
        finite or :math:`-\infty`, at least one finite per row.
    log_lik : ndarray, shape (S, n)
        :math:`\ell_{s,i}` (for the exact fallback).
    E, c : ndarray
        From :func:`shifted_likelihood`.
    members : ndarray of bool, shape (R, n), optional
        Which training points each row ranks among (its group); ``None``: all.
    E32 : ndarray of float32, shape (S, n), optional
        ``E`` in float32: with one common shift, the product is screened in float32 and only the
        entries it cannot decide are recomputed in float64 (:func:`_screened_compare`); the
        ranks are the float64 ones.
    check : callable, optional
        Called (to raise a precise error) when the block holds a NaN, a :math:`+\\infty` or a row
        that is :math:`-\\infty` at every draw; ``None``: no check.
    scratch : Scratch, optional
        Per-thread buffers of the fused path (allocated per call without one).
    point_weights : ndarray, shape (n,), optional
        The training points' covariate-shift weights :math:`w(x_i)` (weighted conformal,
        Tibshirani et al. 2019): the first output is then the weighted count
        :math:`\sum_i w(x_i)\,\mathbf 1[\sigma_{r,i} \le \sigma_{r,n+1}]` (the candidate *not*
        counted: its weight is the test point's, added by the caller). The comparisons are the
        unweighted ones, bit for bit.

    Returns
    -------
    rank : ndarray of int, shape (R,)
        :math:`1 + \#\{i : \sigma_{r,i} \le \sigma_{r,n+1}\}`, the candidate counted (with
        ``point_weights``: the weighted count above, float).
    ess : ndarray, shape (R,)
        :math:`1/\sum_s \bar w_{s,r}^2`, the effective sample size of the AOI weights.
    log_norm : ndarray, shape (R,)
        :math:`\operatorname{LSE}_s \lambda_{s,r}` (minus :math:`\log S`: the log posterior
        predictive density of the row's candidate).
    """
    S = logf.shape[0]
    if c.ndim == 0 and E32 is not None and logf.size >= FUSED_MIN:
        return _fused_block(logf, log_lik, E, c, members, E32, check, scratch or Scratch(), point_weights)
    if check is not None and not np.isfinite(logf).all():  # one pass in the common case; details when needed
        check()
    # log-sum-exp by hand (one max, one exp in place), e = exp(logf - max) serving every quantity below
    mx = logf.max(axis=0)
    e = np.subtract(logf, mx).reshape(S, -1)
    mx = mx.reshape(-1)
    np.exp(e, out=e)
    total = e.sum(axis=0)
    sq = np.einsum("sr,sr->r", e, e)
    # sigma_{n+1} = sum_s wbar_s f_s = sum_s e_s^2 / sum_s e_s * exp(max) (Fong & Holmes 2021, §3.1);
    # the arg-max draw has e = 1, so both sums are >= 1: the logs are finite and accurate
    log_new = np.log(sq) - np.log(total) + mx
    ess = total * total / sq
    w = np.divide(e, total, out=e)  # normalised AOI weights, max >= 1/S: no underflow where it matters
    if c.ndim == 0 and E32 is not None:
        below, small = _screened_compare(w, E, E32, np.exp(log_new - c))
    else:
        prod = w.T @ E  # sigma_{r,i} * exp(-c_i)
        if c.ndim == 0:
            # one shift: sigma_i <= sigma_new  <=>  prod_i <= exp(log sigma_new - c), no log of the block
            below = prod <= np.exp(log_new - c)[:, None]
        else:
            with np.errstate(divide="ignore"):
                below = np.log(prod) + c <= log_new[:, None]
        small = prod < _TINY  # underflowed: recompute those scores exactly in log space
    if small.any():
        rows, cols = np.nonzero(small)
        below[rows, cols] = _exact_below(logf, log_lik, mx, total, log_new, rows, cols)
    return _count(below, members, point_weights), ess, mx + np.log(total)


def _count(below: np.ndarray, members: np.ndarray | None, point_weights: np.ndarray | None) -> np.ndarray:
    """Per row: 1 + the number of training points at or below the candidate, or their total weight."""
    if members is not None:
        below &= members
    if point_weights is None:
        return below.sum(axis=1) + 1
    return below @ point_weights  # a zero-weight point (or one outside the group) adds exactly 0


def _fused_block(
    logf: np.ndarray,
    log_lik: np.ndarray,
    E: np.ndarray,
    c: np.ndarray,
    members: np.ndarray | None,
    E32: np.ndarray,
    check: Callable[[], None] | None,
    scratch: Scratch,
    point_weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r""":func:`aoi_block` with one common shift: one chunked pass over the block, then the float32 screen.

    The element-wise pass (:func:`chunked_sums`) reads the block twice (the maxima
    :math:`m_r = \max_s \lambda_{s,r}`, then chunks of draws in the core's cache: :math:`e = e^{\lambda - m}`,
    :math:`\sum_s e_{s,r}`, :math:`\sum_s e_{s,r}^2` over the draws in order, bit for bit NumPy's
    ``sum(axis=0)`` and ``einsum``) and writes only :math:`e` in float32; no block-sized float64 array.
    The float32 screen then runs on the *unnormalised* product :math:`e^\top E = (\sum_s e_{s,r})\,\bar
    w^\top E` against :math:`(\sum_s e_{s,r})\,\sigma_{n+1}e^{-c}` (no division pass), and the few entries
    it cannot decide are recomputed in float64 from :math:`e` of their rows, recomputed from the block
    (:func:`row_weights`, the same subtraction and ``exp``) exactly as on the NumPy path.
    """
    S = logf.shape[0]
    lf = _c_rows(logf.reshape(S, -1))
    R = logf.size // S
    e32 = scratch.e32(S, R)
    mx, total, sq = chunked_sums(lf, R, scratch, e32)
    # a NaN reaches the maximum or the sum, a +inf the maximum, an all -inf row the maximum (-inf)
    if check is not None and not (np.isfinite(mx).all() and np.isfinite(total).all()):
        check()
    log_new = np.log(sq) - np.log(total) + mx
    ess = total * total / sq
    thr = np.exp(log_new - c)
    below, small = _screened_unnormalised(lambda rows: row_weights(lf, mx, rows), total, E, E32, e32, thr, scratch)
    if small.any():
        rows, cols = np.nonzero(small)
        below[rows, cols] = _exact_below(logf, log_lik, mx, total, log_new, rows, cols)
    return _count(below, members, point_weights), ess, mx + np.log(total)


def chunked_sums(
    lf: np.ndarray, R: int, scratch: Scratch, e32: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Per row of ``lf`` (S, at least R columns, C-ordered; the first R are the block): the maxima
    :math:`m_r`, :math:`\sum_s e^{\lambda_{s,r} - m_r}` and :math:`\sum_s e^{2(\lambda_{s,r} - m_r)}`.

    One compiled pass for the maxima, then the draws in chunks of :data:`CHUNK_BYTES` (a core's L2 cache):
    the shift (compiled), NumPy's ``exp`` in place (its compiled loops' ``exp`` differs in the last bit),
    and the sums continued over the chunk's draws in order (compiled), so the sums are bit for bit NumPy's
    ``sum(axis=0)`` and ``einsum("sr,sr->r")`` of the whole block; with ``e32`` (S, R) the chunk is also
    written there in float32 (the screen's operand). Main memory sees two reads of the block and the float32
    write, where the block-sized float64 :math:`e` took three more passes (measured 1.6x slower).
    """
    S = lf.shape[0]
    mx, total, sq = np.empty(R), np.zeros(R), np.zeros(R)
    k = _kernels()
    k.maxima(lf, mx)
    step = max(1, CHUNK_BYTES // (8 * R))
    buf = scratch.chunk(step * R)
    for s0 in range(0, S, step):
        x = buf[: min(step, S - s0) * R].reshape(-1, R)
        k.shift(lf, s0, mx, x)
        np.exp(x, out=x)
        if e32 is None:
            k.accumulate(x, total, sq)
        else:
            k.accumulate_cast(x, total, sq, e32, s0)
    return mx, total, sq


def row_weights(lf: np.ndarray, mx: np.ndarray, cols: np.ndarray) -> np.ndarray:
    r""":math:`e^{\lambda - m}` (S, len(cols)) of the rows ``cols`` of a block ``lf`` (S, R), C-ordered.

    Bit for bit :func:`chunked_sums`' values: the same float64 subtraction and NumPy's ``exp``, element-wise
    (its value does not depend on the array around it: tested).
    """
    x = np.take(lf, cols, axis=1)  # 3x faster than the fancy index lf[:, cols] (measured)
    np.subtract(x, mx[cols], out=x)
    return np.exp(x, out=x)


def product32(a32: np.ndarray, b32: np.ndarray, out: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    r"""The float32 product :math:`a^\top b` of (S, R) and (S, n), and the additions each entry passed through.

    Over at most :data:`SCREEN_DRAWS` draws in one product; more are taken in chunks of
    :data:`SCREEN_DRAWS` draws whose products are added up in float32. Each entry then passes through at
    most :math:`h = K - 1 + \lceil S/K \rceil - 1` additions whatever order the BLAS sums in (:math:`K`
    terms in a chunk, then the chunks' sums), against :math:`S - 1` for one product: the screen's rounding
    bound (Higham 2002, §4.2: :math:`\gamma_{h+3}` for nonnegative terms) is 15 times tighter at
    :math:`S = 8\,000` and :math:`K = 512`.
    """
    S = a32.shape[0]
    K = SCREEN_DRAWS
    if S <= K:
        return np.matmul(a32.T, b32, out=out), S - 1
    acc = np.matmul(a32[:K].T, b32[:K], out=out)
    part = np.empty_like(acc)
    for s0 in range(K, S, K):
        acc += np.matmul(a32[s0 : s0 + K].T, b32[s0 : s0 + K], out=part)
    return acc, K - 1 + -(-S // K) - 1


def _screen_bounds(thr: np.ndarray, S: int, additions: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Float32 thresholds ``(lo, hi)`` (R, 1) outside which a float32 product proves :math:`p < thr` / :math:`p > thr`.

    Every term :math:`a_{s,r} b_{s,i}` is :math:`\ge 0`, so the float32 product :math:`\hat p` of float64
    inputs in :math:`[0, 1]` satisfies :math:`|\hat p - p| \le \delta p + a` with :math:`\delta = 1.01 (h +
    5) u` (:math:`u = 2^{-24}`: rounding of both inputs and of each product, and the :math:`h` additions an
    entry passes through, in any order; Higham 2002, §3.1 and §4.2) and :math:`a = S \cdot 2^{-146}`
    (float32 underflow). :math:`\hat p > thr (1+2\delta) + a` then proves :math:`p > thr`, and
    :math:`\hat p < thr (1-2\delta) - a` proves :math:`p < thr`. The float32 thresholds are rounded outward by
    one ulp so the float32 comparisons stay conservative.
    """
    delta = 1.01 * (additions + 5) * 2.0**-24
    a = S * 2.0**-146
    hi = np.nextafter((thr * (1 + 2 * delta) + a).astype(np.float32), np.float32(np.inf))[:, None]
    lo = np.nextafter((thr * (1 - 2 * delta) - a).astype(np.float32), np.float32(-np.inf))[:, None]
    return lo, hi


def _screened_unnormalised(
    weights_of: Callable[[np.ndarray], np.ndarray],
    total: np.ndarray,
    E: np.ndarray,
    E32: np.ndarray,
    e32: np.ndarray,
    thr: np.ndarray,
    scratch: Scratch | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""``(e^T E)_{r,i} / total_r <= thr_r`` decided exactly from the float32 product ``e32^T E32``.

    :func:`_screened_compare`'s bound (:func:`_screen_bounds`), applied to :math:`\hat p = (e^\top
    E)_{r,i}` in float32 (:func:`product32`) and the threshold :math:`T_r = \text{total}_r\,
    \text{thr}_r`: every :math:`e_{s,r} \in [0, 1]`, so the same bound holds; the float64 rounding of
    :math:`T_r` and of the normalisation (relative :math:`\le (S+2) 2^{-53}`) is far inside the margin.
    Undecided entries: :math:`\sum_s (e_{s,r}/\text{total}_r) E_{s,i} \le \text{thr}_r` in float64, with
    :math:`e` of their rows from ``weights_of(rows) -> (S, len(rows))`` (C-ordered), the NumPy path's
    arithmetic bit for bit. An entry whose float64 sum and exact value lie on two sides of the threshold is
    within :math:`S 2^{-53}` of it, so inside every screen's band: it is re-checked by the same float64 sum
    whatever the band's width, and the decisions do not depend on it. The two (S, :data:`_RECHECK`) gather
    buffers come from ``scratch`` (per thread, allocated once, the same shape every call: the same strides
    and summation order).
    """
    S = e32.shape[0]
    prod, additions = product32(e32, E32)
    lo, hi = _screen_bounds(thr * total, S, additions)
    below = prod < lo
    unsure = ~below & (prod <= hi) | (prod < _TINY32)
    small = np.zeros_like(below)
    if unsure.any():
        rows, cols = np.nonzero(unsure)
        # the weights of the rows involved, once each (the entries of a row share its column of e)
        urows, at = np.unique(rows, return_inverse=True)
        e, tot = weights_of(urows), total[urows]
        w, Ec = (scratch or Scratch()).recheck(S)
        gather = _gather()
        for k in range(0, rows.size, _RECHECK):
            q, i = at[k : k + _RECHECK], cols[k : k + _RECHECK]
            # e[:, q] / tot[q] and E[:, i] by one compiled pass (4x faster than NumPy's fancy indexing)
            gather(e, tot, E, q, i, w, Ec)
            p64 = np.einsum("sk,sk->k", w[:, : q.size], Ec[:, : q.size])
            r = rows[k : k + _RECHECK]
            below[r, i] = p64 <= thr[r]
            small[r, i] = p64 < _TINY
    return below, small


def _c_rows(lf: np.ndarray) -> np.ndarray:
    """``lf`` (S, R) as a C-ordered array whose first R columns are ``lf``: the compiled loops run 3x
    faster on a C-ordered array than on a strided view (measured at the diabetes shape).

    A block of test points cut from an (S, m, G) C-ordered input has contiguous rows spaced by the
    parent's row length: the C-ordered view of that spacing *is* the block, with the columns beyond R
    belonging to the next test points (never read: the loops stop at R). Otherwise one copy.
    """
    if lf.flags.c_contiguous:
        return lf
    step = lf.strides[0] // lf.itemsize
    if lf.strides[1] == lf.itemsize and lf.strides[0] % lf.itemsize == 0 and step >= lf.shape[1]:
        return np.lib.stride_tricks.as_strided(lf, shape=(lf.shape[0], step), strides=(lf.strides[0], lf.itemsize))
    return np.ascontiguousarray(lf)


class Scratch(threading.local):
    """Per-thread buffers of the fused path, reused block after block (grown when a block is larger)."""

    def e32(self, S: int, R: int) -> np.ndarray:
        """The block's float32 weights (S, R), the screen's operand."""
        buf = getattr(self, "e32_", None)
        if buf is None or buf.size < S * R:
            self.e32_ = buf = np.empty(S * R, np.float32)
        return buf[: S * R].reshape(S, R)

    def chunk(self, size: int) -> np.ndarray:
        """A flat float64 buffer of at least ``size`` (the element-wise pass's chunks of draws)."""
        c = getattr(self, "c", None)
        if c is None or c.size < size:
            self.c = np.empty(size)
        return self.c

    def recheck(self, S: int) -> tuple[np.ndarray, np.ndarray]:
        """The float64 rechecks' gather buffers (S, :data:`_RECHECK`), the same shape (so the same
        strides and summation order) on every call."""
        w = getattr(self, "w", None)
        if w is None or w.shape[0] != S:
            self.w, self.Ec = np.empty((S, _RECHECK)), np.empty((S, _RECHECK))
        return self.w, self.Ec


@functools.cache
def _kernels() -> SimpleNamespace:
    """The element-wise pass's loops (:func:`chunked_sums`), compiled by Numba on first use (cached on disk),
    releasing the GIL."""
    import numba

    @numba.njit(nogil=True, cache=True)
    def maxima(lf: np.ndarray, mx: np.ndarray) -> None:  # pragma: no cover - compiled
        # draws outer, rows inner: each draw's row segment is contiguous (streamed, vectorised); the block is
        # the first R columns of lf (see _c_rows); a NaN is caught later (it reaches the sums)
        S, R = lf.shape[0], mx.size
        for j in range(R):
            mx[j] = lf[0, j]
        for s in range(1, S):
            for j in range(R):
                v = lf[s, j]
                mx[j] = v if v > mx[j] else mx[j]

    @numba.njit(nogil=True, cache=True)
    def shift(lf: np.ndarray, s0: int, mx: np.ndarray, x: np.ndarray) -> None:  # pragma: no cover - compiled
        C, R = x.shape
        for s in range(C):
            for j in range(R):
                x[s, j] = lf[s0 + s, j] - mx[j]

    @numba.njit(nogil=True, cache=True)
    def accumulate(x: np.ndarray, total: np.ndarray, sq: np.ndarray) -> None:  # pragma: no cover - compiled
        # over the chunk's draws in order, continuing the sums (NumPy's sum(axis=0) and einsum, bit for bit)
        C, R = x.shape
        for s in range(C):
            for j in range(R):
                v = x[s, j]
                total[j] += v
                sq[j] += v * v

    @numba.njit(nogil=True, cache=True)
    def accumulate_cast(
        x: np.ndarray, total: np.ndarray, sq: np.ndarray, e32: np.ndarray, s0: int
    ) -> None:  # pragma: no cover - compiled
        C, R = x.shape
        for s in range(C):
            for j in range(R):
                v = x[s, j]
                total[j] += v
                sq[j] += v * v
                e32[s0 + s, j] = v

    return SimpleNamespace(maxima=maxima, shift=shift, accumulate=accumulate, accumulate_cast=accumulate_cast)


@functools.cache
def _gather() -> Callable[..., None]:
    """The rechecks' gather (:func:`_screened_unnormalised`), compiled by Numba on first use (cached on disk)."""
    import numba

    @numba.njit(nogil=True, cache=True)
    def gather(
        e: np.ndarray,
        total: np.ndarray,
        E: np.ndarray,
        rows: np.ndarray,
        cols: np.ndarray,
        w: np.ndarray,
        Ec: np.ndarray,
    ) -> None:  # pragma: no cover - compiled
        # w[:, q] = e[:, rows[q]] / total[rows[q]] and Ec[:, q] = E[:, cols[q]], row by row (cache friendly)
        for s in range(e.shape[0]):
            for q in range(rows.size):
                w[s, q] = e[s, rows[q]] / total[rows[q]]
                Ec[s, q] = E[s, cols[q]]

    return gather  # type: ignore[no-any-return]


def _exact_below(
    logf: np.ndarray,
    log_lik: np.ndarray,
    mx: np.ndarray,
    total: np.ndarray,
    log_new: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
) -> np.ndarray:
    """``sigma_{r,i} <= sigma_new_r`` by an exact log-sum-exp over the draws, for entries ``(rows, cols)``."""
    S = logf.shape[0]
    log_w = logf.reshape(S, -1)[:, rows] - (mx[rows] + np.log(total[rows]))
    return logsumexp(log_w + log_lik[:, cols], axis=0) <= log_new[rows]


def _screened_compare(w: np.ndarray, E: np.ndarray, E32: np.ndarray, thr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""``(w^T E)_{r,i} <= thr_r`` decided exactly, the product taken in float32 with a proven error bound.

    Returns the decisions and the mask of entries whose float64 product is below :data:`_TINY`
    (for the caller's exact log-space recomputation, as on the float64 path).

    The float32 product :func:`product32` of the float64 inputs is within :func:`_screen_bounds`' bound of
    the exact one: outside the band it decides; the few entries in the band, and every entry whose float32
    value is below :data:`_TINY32`, are recomputed as float64 dot products (the float64 path's result, bit
    for bit on those entries up to summation order). The float32 product costs half the float64 one.
    """
    S = w.shape[0]
    prod, additions = product32(w.astype(np.float32), E32)
    lo, hi = _screen_bounds(thr, S, additions)
    below = prod < lo
    unsure = ~below & (prod <= hi) | (prod < _TINY32)
    small = np.zeros_like(below)
    if unsure.any():
        rows, cols = np.nonzero(unsure)
        for k in range(0, rows.size, _RECHECK):
            r, i = rows[k : k + _RECHECK], cols[k : k + _RECHECK]
            p64 = np.einsum("sk,sk->k", w[:, r], E[:, i])
            below[r, i] = p64 <= thr[r]
            small[r, i] = p64 < _TINY
    return below, small


def log_weights(logf: np.ndarray) -> np.ndarray:
    r"""Normalised log AOI weights :math:`\log \bar w_{s}` of columns ``logf`` (S, R)."""
    return logf - logsumexp(logf, axis=0)


def runs(mask: np.ndarray) -> int:
    """Number of maximal runs of True in a 1-D boolean array (pieces of a grid set)."""
    if not mask.any():
        return 0
    m = mask.astype(np.int8)
    return int(m[0] + np.count_nonzero(np.diff(m) == 1))


def pareto_khat(logw: np.ndarray) -> np.ndarray:
    r"""Pareto :math:`\hat k` of each column's importance weights, arviz-stats' ``psislw`` rule, vectorised.

    Per column (weights :math:`w_s \propto e^{\log w_s}`, :math:`S` draws), as
    ``arviz_stats``' ``psislw(r_eff=1)``: the :math:`M = \lfloor 3\sqrt S\rfloor` largest weights
    (:math:`\lfloor S/5 \rfloor` when :math:`S \le 225`) above the next largest :math:`u` are
    fitted with a generalised Pareto distribution by Zhang and Stephens's (2009) empirical-Bayes
    estimate, and :math:`\hat k` is shrunk towards 0.5 with the weakly informative prior of
    Vehtari et al. (2024, eq. 7): :math:`\hat k = (M \bar k + 5)/(M + 10)`. One ``np.partition``
    over the draws finds every tail at once (no per-column sort), and the profile over the
    :math:`m_{est} = 30 + \lfloor\sqrt M\rfloor` candidate :math:`b` values is one broadcast.

    Parameters
    ----------
    logw : ndarray, shape (S, m)
        Log weights (any normalisation) of ``m`` columns.

    Returns
    -------
    ndarray, shape (m,)
        :math:`\hat k` per column; NaN where the tail is flat or its first quartile does not exceed
        its minimum (arviz-stats: an error / NaN), :math:`+\infty` where the fit fails.

    References
    ----------
    Zhang, J. and Stephens, M. A. (2009). A new and efficient estimation method for the
    generalized Pareto distribution. Technometrics 51(3).
    Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto smoothed
    importance sampling. JMLR 25(72).
    """
    S = logw.shape[0]
    M = int(np.floor(3 * np.sqrt(S))) if S > 225 else S // 5
    if M < 5:
        raise ValueError(f"pareto_khat needs at least 25 draws (5 tail draws); got {S}.")
    lw = logw - logw.max(axis=0)
    part = np.partition(lw, S - M - 1, axis=0)[S - M - 1 :]  # cutoff, then the M largest (unsorted)
    tail = np.exp(np.sort(part[1:], axis=0))
    x = tail - np.exp(part[0])  # (M, m), ascending
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        kappa = _gpd_kappa(x)
    flat = (tail[-1] - tail[0] < np.finfo(float).tiny) | (x[int(M / 4 + 0.5) - 1] <= x[0])
    return np.where(flat, np.nan, kappa)


def _gpd_kappa(x: np.ndarray) -> np.ndarray:
    """Zhang-Stephens GPD shape with the 0.5-centred prior, per column of sorted exceedances ``x`` (n, m)."""
    n = x.shape[0]
    m_est = 30 + int(n**0.5)
    xstar = x[int(n / 4 + 0.5) - 1]  # first quartile
    b = (1 - np.sqrt(m_est / (np.arange(1, m_est + 1, dtype=float) - 0.5)))[:, None] / (3 * xstar) + 1 / x[-1]
    k = np.mean(np.log1p(-b[:, None, :] * x[None]), axis=1)  # (m_est, m)
    len_scale = n * (np.log(-b / k) - k - 1)
    w = np.exp(len_scale - logsumexp(len_scale, axis=0))
    w = np.where(w >= 10 * np.finfo(float).eps, w, 0.0)  # arviz-stats drops negligible weights
    w /= w.sum(axis=0)
    b_post = np.sum(b * w, axis=0)
    kappa = np.mean(np.log1p(-b_post * x), axis=0)
    kappa = (n * kappa + 10 * 0.5) / (n + 10)
    return np.where(np.isnan(kappa), np.inf, kappa)
