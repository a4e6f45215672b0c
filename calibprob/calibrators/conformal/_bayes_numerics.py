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

import numpy as np
from scipy.special import logsumexp

#: Below this, a matrix-product entry has lost relative precision to underflow: recompute in log space.
_TINY = 1e-280
#: Largest spread of the columns' maximum log-likelihoods that one common shift takes without underflow.
_SPAN = 600.0


def shifted_likelihood(log_lik: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""``(E, c)`` with :math:`E = e^{\ell - c}` (S, n).

    :math:`c` is one common shift :math:`\max_{s,i} \ell_{s,i}` when every column's maximum lies
    within :data:`_SPAN` of it (so no column underflows and the scores can be compared without
    taking the log of the :math:`R \times n` block), else the per-column maxima
    :math:`c_i = \max_s \ell_{s,i}` (an array of shape (n,)).
    """
    col = log_lik.max(axis=0)
    c = col.max() if col.max() - col.min() < _SPAN else col
    return np.exp(log_lik - c), np.asarray(c)


def aoi_block(logf: np.ndarray, log_lik: np.ndarray, E: np.ndarray, c: np.ndarray, members=None):
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

    Returns
    -------
    rank : ndarray of int, shape (R,)
        :math:`1 + \#\{i : \sigma_{r,i} \le \sigma_{r,n+1}\}`, the candidate counted.
    ess : ndarray, shape (R,)
        :math:`1/\sum_s \bar w_{s,r}^2`, the effective sample size of the AOI weights.
    log_norm : ndarray, shape (R,)
        :math:`\operatorname{LSE}_s \lambda_{s,r}` (minus :math:`\log S`: the log posterior
        predictive density of the row's candidate).
    """
    S = logf.shape[0]
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
        log_w = logf.reshape(S, -1)[:, rows] - (mx[rows] + np.log(total[rows]))
        below[rows, cols] = logsumexp(log_w + log_lik[:, cols], axis=0) <= log_new[rows]
    if members is not None:
        below &= members
    return below.sum(axis=1) + 1, ess, mx + np.log(total)


def log_weights(logf: np.ndarray) -> np.ndarray:
    r"""Normalised log AOI weights :math:`\log \bar w_{s}` of columns ``logf`` (S, R)."""
    return logf - logsumexp(logf, axis=0)


def runs(mask: np.ndarray) -> int:
    """Number of maximal runs of True in a 1-D boolean array (pieces of a grid set)."""
    if not mask.any():
        return 0
    m = mask.astype(np.int8)
    return int(m[0] + np.count_nonzero(np.diff(m) == 1))
