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
log-sum-exp, so the result is log-space accurate everywhere.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

#: Below this, a matrix-product entry has lost relative precision to underflow: recompute in log space.
_TINY = 1e-280


def shifted_likelihood(log_lik: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""``(E, c)`` with :math:`c_i = \max_s \ell_{s,i}` and :math:`E = e^{\ell - c}` (S, n)."""
    c = log_lik.max(axis=0)
    return np.exp(log_lik - c), c


def aoi_block(logf: np.ndarray, log_lik: np.ndarray, E: np.ndarray, c: np.ndarray):
    r"""Conformity scores of a block of rows.

    Parameters
    ----------
    logf : ndarray, shape (S, R)
        :math:`\lambda_{s,r}`, finite or :math:`-\infty`, at least one finite per column.
    log_lik : ndarray, shape (S, n)
        :math:`\ell_{s,i}` (for the exact fallback).
    E, c : ndarray
        From :func:`shifted_likelihood`.

    Returns
    -------
    log_sigma : ndarray, shape (R, n)
        :math:`\log\sigma_{r,i}` of the training points.
    log_sigma_new : ndarray, shape (R,)
        :math:`\log\sigma_{r,n+1}` of the candidate itself.
    ess : ndarray, shape (R,)
        :math:`1/\sum_s \bar w_{s,r}^2`, the effective sample size of the AOI weights.
    """
    # log-sum-exp by hand (one max, one exp), reusing e = exp(logf - max) for every quantity below
    mx = logf.max(axis=0)
    e = np.exp(logf - mx)
    total = e.sum(axis=0)
    w = e / total  # normalised AOI weights, max >= 1/S: no underflow where it matters
    prod = w.T @ E
    with np.errstate(divide="ignore"):
        log_sigma = np.log(prod) + c
    small = prod < _TINY
    if small.any():
        rows, cols = np.nonzero(small)
        log_w = logf[:, rows] - (mx[rows] + np.log(total[rows]))
        log_sigma[rows, cols] = logsumexp(log_w + log_lik[:, cols], axis=0)
    # sigma_{n+1} = sum_s wbar_s f_s = sum_s w_s^2 / sum_s w_s (Fong & Holmes 2021, §3.1); w e <= 1
    # and the arg-max draw contributes >= 1/S, so the log is finite and accurate
    log_sigma_new = np.log(np.einsum("sr,sr->r", w, e)) + mx
    ess = 1.0 / np.einsum("sr,sr->r", w, w)
    return log_sigma, log_sigma_new, ess


def log_weights(logf: np.ndarray) -> np.ndarray:
    r"""Normalised log AOI weights :math:`\log \bar w_{s}` of columns ``logf`` (S, R)."""
    return logf - logsumexp(logf, axis=0)


def ranks(log_sigma: np.ndarray, log_sigma_new: np.ndarray, members: np.ndarray | None) -> np.ndarray:
    r"""Conformal ranks :math:`1 + \#\{i : \sigma_i \le \sigma_{n+1}\}`, the candidate counted.

    Parameters
    ----------
    log_sigma : ndarray, shape (R, n)
    log_sigma_new : ndarray, shape (R,)
    members : ndarray of bool, shape (R, n), optional
        Which training points each row ranks against (its group); ``None``: all.

    Returns
    -------
    ndarray of int, shape (R,)
    """
    below = log_sigma <= log_sigma_new[:, None]
    if members is not None:
        below &= members
    return below.sum(axis=1) + 1


def runs(mask: np.ndarray) -> int:
    """Number of maximal runs of True in a 1-D boolean array (pieces of a grid set)."""
    if not mask.any():
        return 0
    m = mask.astype(np.int8)
    return int(m[0] + np.count_nonzero(np.diff(m) == 1))
