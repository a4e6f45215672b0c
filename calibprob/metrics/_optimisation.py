"""Array layer, Bayesian-optimisation metrics: best-so-far curves, regrets, normalised area."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from calibprob._core.validation import check_finite


def best_so_far(values: ArrayLike, *, axis: int = -1, minimize: bool = True) -> np.ndarray:
    r"""Best objective value found up to each step: :math:`b_t = \min_{s \le t} f(x_s)`.

    Parameters
    ----------
    values : ndarray, shape (..., T)
        Objective values in the order they were evaluated (along ``axis``).
    minimize : bool, default True
        Use the running maximum for maximisation problems.

    Returns
    -------
    ndarray, same shape

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, Table 1 and Fig. 3 (optimisation curves).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import best_so_far
    >>> best_so_far(np.array([3.0, 1.0, 2.0, 0.5])).tolist()
    [3.0, 1.0, 1.0, 0.5]
    """
    values = np.asarray(values, float)
    op = np.minimum if minimize else np.maximum
    return op.accumulate(values, axis=axis)


def simple_regret(values: ArrayLike, optimum: float, *, axis: int = -1, minimize: bool = True) -> np.ndarray:
    r"""Simple regret after each step: :math:`r_t = \min_{s\le t} f(x_s) - f^*` (minimisation).

    For maximisation :math:`r_t = f^* - \max_{s\le t} f(x_s)`. The last entry is
    the simple regret of the run.

    Parameters
    ----------
    values : ndarray, shape (..., T)
        Objective values in evaluation order (along ``axis``).
    optimum : float
        The global optimum :math:`f^*`.
    axis : int, default -1
    minimize : bool, default True

    Returns
    -------
    ndarray, same shape as ``values``

    References
    ----------
    Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
    processes. NeurIPS 36, §BO experiments (simple regret).

    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import simple_regret
    >>> simple_regret(np.array([3.0, 1.0, 2.0]), optimum=0.5).tolist()
    [2.5, 0.5, 0.5]
    """
    b = best_so_far(values, axis=axis, minimize=minimize)
    return b - optimum if minimize else optimum - b


def cumulative_regret(values: ArrayLike, optimum: float, *, axis: int = -1, minimize: bool = True) -> np.ndarray:
    r"""Cumulative regret :math:`R_t = \sum_{s \le t} (f(x_s) - f^*)` (minimisation).

    For maximisation the instantaneous regret is :math:`f^* - f(x_s)`.

    Parameters
    ----------
    values : ndarray, shape (..., T)
        Objective values in evaluation order (along ``axis``).
    optimum : float
        The global optimum :math:`f^*`.
    axis : int, default -1
    minimize : bool, default True

    Returns
    -------
    ndarray, same shape as ``values``

    References
    ----------
    Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
    processes. NeurIPS 36, §BO experiments (cumulative regret).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import cumulative_regret
    >>> cumulative_regret(np.array([3.0, 1.0, 2.0]), optimum=0.5).tolist()
    [2.5, 3.0, 4.5]
    """
    values = np.asarray(values, float)
    inst = values - optimum if minimize else optimum - values
    return np.cumsum(inst, axis=axis)


def normalized_auc(
    curve: ArrayLike, *, lower: float | None = None, upper: float | None = None, axis: int = -1
) -> np.ndarray | float:
    r"""Normalised area under optimisation curves (Deshpande et al. 2024, Table 1 and §A.1).

    The paper: "we compute the area under its optimization curve (i.e., its
    optimum as a function of the number of optimization steps) and normalize
    it relative to the area of the rectangle formed by upper and lower bounds
    along the x, y axes (hence max a is one). Smaller values ... are better."
    calibprob implements this as the trapezoid-rule area between the curve
    :math:`b_1, \dots, b_T` and the lower bound, over steps 1..T, divided by
    the rectangle :math:`(T - 1)(\text{upper} - \text{lower})`:

    .. math::

        a = \frac{\sum_{t=1}^{T-1} \tfrac12\bigl[(b_t - \ell) + (b_{t+1} - \ell)\bigr]}
                 {(T-1)\,(u - \ell)} \in [0, 1].

    The y-axis bounds :math:`\ell, u` default to the minimum and maximum over
    *all* curves passed (the axes of one figure, shared by the methods being
    compared), so curves of different methods are comparable and a curve
    stuck at the top scores 1. This reading reproduces the paper's
    Forrester rows (a method whose curve stays at its start scores ≈ 1, one
    that reaches the global minimum early ≈ 0.24). Pass ``lower``/``upper``
    (e.g. the known optimum and the worst initial value) to compare runs
    across figures.

    Parameters
    ----------
    curve : ndarray, shape (..., T)
        Best-so-far curves (:func:`best_so_far`, possibly averaged over
        repetitions), steps along ``axis``; ``T >= 2``.
    lower, upper : float, optional
        The y-axis bounds of the rectangle.

    Returns
    -------
    ndarray, shape ``curve.shape`` without ``axis`` (a float for one curve)

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, Table 1 and §A.1.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import normalized_auc
    >>> float(normalized_auc(np.array([1.0, 0.0, 0.0]), lower=0.0, upper=1.0))
    0.25
    """
    b = np.moveaxis(np.asarray(curve, float), axis, -1)
    check_finite(b, "curve")
    T = b.shape[-1]
    if T < 2:
        raise ValueError(f"curve needs at least 2 steps along axis {axis} to have an area; got {T}.")
    lo = float(np.min(b)) if lower is None else float(lower)
    hi = float(np.max(b)) if upper is None else float(upper)
    if not hi > lo:
        raise ValueError(
            f"normalized_auc needs upper > lower; got lower={lo!r}, upper={hi!r} "
            "(a flat curve has no scale: pass lower= and upper= explicitly)."
        )
    d = b - lo
    area = 0.5 * (d[..., :-1] + d[..., 1:]).sum(axis=-1)
    out = area / ((T - 1) * (hi - lo))
    return float(out) if out.ndim == 0 else out
