r"""Closed-form leave-one-out (LOO) predictions of a Gaussian process.

With fixed hyperparameters, the LOO prediction of observation :math:`i` from
the other :math:`n-1` needs no refit (Dubrule 1983). For a zero-mean GP with
observation covariance :math:`K` (kernel plus noise or nugget):

.. math::

    y_i - \mu_{-i} = \frac{(K^{-1} y)_i}{(K^{-1})_{ii}},\qquad
    \sigma^2_{-i} = \frac{1}{(K^{-1})_{ii}}.

With an unknown constant mean re-estimated by generalised least squares in
every fold (universal kriging), :math:`K^{-1}` is replaced by

.. math::

    Q^{-1} = K^{-1} - K^{-1}P\,(P^\top K^{-1} P)^{-1} P^\top K^{-1},\qquad P = 1,

and :math:`\sigma^2_{-i}` then includes the variance of the mean estimate.
:math:`\sigma^2_{-i}` is the predictive variance of the *observation*
:math:`y_i` (noise included); subtract the noise variance for the latent
function.

References
----------
Dubrule, O. (1983). Cross validation of kriging in a unique neighborhood.
Journal of the International Association for Mathematical Geology 15, 687–699.
Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
prediction: methods and comparative analysis (J+GP scores, §3).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from calibprob._validation import check_array, check_choice, check_same_length

__all__ = ["loo_from_kernel"]


def loo_from_kernel(K, y, mean: str = "zero") -> tuple[np.ndarray, np.ndarray]:
    r"""Leave-one-out means and standard deviations from the covariance matrix.

    Parameters
    ----------
    K : array_like, shape (n, n)
        Covariance of the observations, symmetric positive definite (kernel
        matrix plus noise variance or nugget on the diagonal).
    y : array_like, shape (n,)
        Observations.
    mean : {"zero", "constant"}, default "zero"
        ``"constant"``: an unknown constant mean, re-estimated by GLS in every
        fold (the :math:`Q^{-1}` form).

    Returns
    -------
    mu_loo : ndarray, shape (n,)
        :math:`\mu_{-i}`, the prediction of :math:`y_i` from the others.
    sigma_loo : ndarray, shape (n,)
        :math:`\sigma_{-i}`, its predictive standard deviation (noise included).

    References
    ----------
    Dubrule, O. (1983). Cross validation of kriging in a unique neighborhood.
    Mathematical Geology 15, 687–699.

    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, §3 (J+GP scores).

    Examples
    --------
    >>> import numpy as np
    >>> K = np.array([[2.0, 0.5], [0.5, 2.0]])
    >>> mu, sd = loo_from_kernel(K, [1.0, -1.0])
    >>> np.allclose(mu, [-0.25, 0.25]), np.allclose(sd**2, 2.0 - 0.25 / 2.0)
    (True, True)
    """
    K = check_array(K, "K", ndim=2)
    y = check_array(y, "y", ndim=1)
    check_choice(mean, "mean", ("zero", "constant"))
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be square; got shape {K.shape}. Pass the n x n covariance.")
    check_same_length(K=K, y=y)
    n = y.shape[0]
    if n < (2 if mean == "zero" else 3):
        raise ValueError(
            f"leave-one-out needs at least {2 if mean == 'zero' else 3} observations with mean={mean!r}; got {n}."
        )
    try:
        factor = scipy.linalg.cho_factor(K, lower=True)
    except np.linalg.LinAlgError as err:
        raise ValueError("K is not positive definite; add a nugget (noise variance) to its diagonal.") from err
    Kinv = scipy.linalg.cho_solve(factor, np.eye(n))
    Kinv_y = Kinv @ y
    diag = np.diag(Kinv).copy()
    if mean == "constant":
        Kinv_1 = Kinv.sum(axis=1)
        s = Kinv_1.sum()
        Kinv_y = Kinv_y - Kinv_1 * (Kinv_1 @ y) / s
        diag = diag - Kinv_1**2 / s
    resid = Kinv_y / diag
    return y - resid, 1.0 / np.sqrt(diag)
