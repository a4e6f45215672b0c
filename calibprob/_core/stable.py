r"""Magnitude-safe reductions: means, standard deviations and root mean squares at any scale.

A Gaussian predictive at scale :math:`10^{200}` has a representable standard deviation, but
its variance :math:`10^{400}` is not, and at scale :math:`10^{-200}` the variance
:math:`10^{-400}` underflows to zero. Every reduction here divides by a power of two
:math:`2^e` close to the largest magnitude first and multiplies back after. Division by a
power of two is exact in binary floating point (barring subnormals), so for data of
ordinary magnitude the results are bit for bit those of the unscaled formulas — no
existing number changes — while extreme magnitudes no longer overflow or underflow.

References
----------
Higham, N. J. (2002). Accuracy and Stability of Numerical Algorithms, 2nd ed., SIAM, §1.12
and §27.8 (scaling to avoid overflow and underflow, as in the BLAS ``nrm2``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["pow2_scale", "stable_mean", "stable_rms"]


def pow2_scale(a: Any, axis: int | None = None, keepdims: bool = False) -> Any:
    r"""The power of two :math:`2^e` with :math:`\max|a| \in [2^e, 2^{e+1})` along ``axis``.

    (Not the next power up: :math:`2^{1024}` itself would overflow for the largest doubles.)

    Non-finite entries are ignored; an all-zero (or all non-finite) slice gives 1.

    Parameters
    ----------
    a : array_like
    axis : int or None
        Axis of the reduction (``None``: all).
    keepdims : bool, default False
        Keep the reduced axis with length 1 (to divide ``a`` by the result).

    Returns
    -------
    ndarray
        Powers of two, ``float64``.

    Examples
    --------
    >>> from calibprob._core.stable import pow2_scale
    >>> float(pow2_scale([3.0, -5.0]))
    4.0
    """
    a = np.asarray(a, dtype=float)
    finite = np.abs(np.where(np.isfinite(a), a, 0.0))
    m = np.max(finite, axis=axis, keepdims=keepdims, initial=0.0)  # type: ignore[call-overload]
    _, e = np.frexp(m)  # m = f 2^e with f in [0.5, 1), and e = 0 for m = 0
    return np.ldexp(1.0, e - 1)


def stable_mean(a: Any, axis: int | None = None) -> Any:
    r"""Mean :math:`2^e\,\overline{(a / 2^e)}`: no overflow in the sum where the mean is representable.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob._core.stable import stable_mean
    >>> float(stable_mean(np.array([1e308, 1e308])))
    1e+308
    """
    a = np.asarray(a, dtype=float)
    s = pow2_scale(a, axis=axis, keepdims=True)
    out = np.mean(a / s, axis=axis, keepdims=True) * s
    return out.reshape(()) if axis is None else np.squeeze(out, axis=axis)


def stable_rms(a: Any, axis: int | None = None) -> Any:
    r"""Root mean square :math:`2^e\sqrt{\overline{(a/2^e)^2}}`, neither squared overflow nor underflow.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob._core.stable import stable_rms
    >>> float(stable_rms(np.array([1e200, -1e200])))    # the squares 1e400 are not representable
    1e+200
    """
    a = np.asarray(a, dtype=float)
    s = pow2_scale(a, axis=axis, keepdims=True)
    b = a / s
    out = np.sqrt(np.mean(b * b, axis=axis, keepdims=True)) * s
    return out.reshape(()) if axis is None else np.squeeze(out, axis=axis)
