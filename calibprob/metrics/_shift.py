r"""Covariate-shift diagnostics: did the test inputs move away from the calibration inputs?

A classifier two-sample test (Lopez-Paz & Oquab 2017; Friedman 2003): label the calibration
inputs 0 and the test inputs 1, fit a probabilistic classifier with cross-fitting (each row
scored by a classifier that did not see it; :class:`~calibprob.weights.LikelihoodRatio` with
``clip=None``), and report the area under the ROC curve of those held-out scores,

.. math::

    \mathrm{AUC} = \frac{1}{n_0 n_1} \sum_{i: \text{cal}} \sum_{j: \text{test}}
    \bigl(\mathbb 1\{s_j > s_i\} + \tfrac12 \mathbb 1\{s_j = s_i\}\bigr)

(Mann–Whitney, ties counted half). Without shift the two samples are exchangeable and the AUC
is 1/2 up to noise; the p-value is the permutation one: the same cross-fitted AUC recomputed
with the labels shuffled :math:`B` times, :math:`p = (1 + \#\{b: \mathrm{AUC}_b \ge
\mathrm{AUC}\})/(1 + B)`, valid in finite samples under exchangeability of the pooled rows
(Phipson & Smyth 2010). An AUC near 1 is the warning the weights give too: the classifier
separates the sets, the likelihood ratio is extreme and the weighted calibration's effective
sample size collapses (``ess`` below, Kish's, of the cross-fitted ratio at the calibration rows).

References
----------
Lopez-Paz, D. and Oquab, M. (2017). Revisiting classifier two-sample tests. ICLR.
Tibshirani, R. J., Barber, R. F., Candès, E. J. and Ramdas, A. (2019). Conformal prediction
under covariate shift. NeurIPS 32 (the classifier's odds as the likelihood ratio).
Phipson, B. and Smyth, G. K. (2010). Permutation p-values should never be zero. Stat. Appl.
Genet. Mol. Biol. 9(1).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.validation import check_int
from calibprob.weights import LikelihoodRatio, effective_sample_size

__all__ = ["covariate_shift", "auc", "add_shift_diagnostics"]


def auc(scores_negative: ArrayLike, scores_positive: ArrayLike) -> float:
    """Mann–Whitney AUC: the chance a positive scores above a negative (ties half).

    Examples
    --------
    >>> auc([0.1, 0.2], [0.3, 0.2])
    0.875
    """
    a = np.asarray(scores_negative, float)
    b = np.asarray(scores_positive, float)
    pooled = np.concatenate([a, b])
    order = np.argsort(pooled, kind="stable")
    ranks = np.empty(pooled.size)
    ranks[order] = np.arange(1, pooled.size + 1)
    # midranks for ties
    uniq, inverse, counts = np.unique(pooled, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    ranks = (sums / counts)[inverse]
    r_pos = ranks[a.size :].sum()
    return float((r_pos - b.size * (b.size + 1) / 2.0) / (a.size * b.size))


def _features(X: Any, name: str) -> np.ndarray:
    X = np.asarray(getattr(X, "values", X), float)
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(
            f"{name} must be a 2-D array of inputs (rows, features) with at least 2 rows; got shape {X.shape}."
        )
    if not np.isfinite(X).all():
        raise ValueError(f"{name} must be finite; drop or impute the rows with NaN or inf before the shift diagnostic.")
    return X


def _cross_fitted_auc(lr: LikelihoodRatio, Z: np.ndarray, n0: int) -> tuple[float, LikelihoodRatio]:
    lr = LikelihoodRatio(lr.classifier, cv=lr.cv, clip=None, random_state=lr.random_state, on_small="ignore")
    lr.fit(Z[:n0], Z[n0:])
    with np.errstate(divide="ignore", invalid="ignore"):
        return auc(lr.calibration_weights_, lr.test_weights_), lr


def covariate_shift(
    X_calibration: Any,
    X_test: Any,
    *,
    classifier: Any = None,
    cv: int = 5,
    n_permutations: int = 100,
    random_state: int = 0,
) -> xr.Dataset:
    r"""The classifier two-sample diagnostic of covariate shift between calibration and test inputs.

    Parameters
    ----------
    X_calibration : array_like, shape (n, d)
    X_test : array_like, shape (m, d)
        The same columns.
    classifier : scikit-learn classifier, optional
        Default: logistic regression without penalty on standardised inputs (that of
        :class:`~calibprob.weights.LikelihoodRatio`).
    cv : int, default 5
        Folds of the cross-fitting (:class:`~calibprob.weights.LikelihoodRatio`).
    n_permutations : int, default 100
        Label shuffles of the permutation p-value (0: no p-value, NaN); each refits the
        classifier ``cv`` times.
    random_state : int, default 0
        Seeds the folds and the shuffles.

    Returns
    -------
    xarray.Dataset
        Scalars ``shift_auc``, ``shift_pvalue`` (permutation; NaN with ``n_permutations=0``),
        ``shift_ess`` (Kish's effective sample size of the cross-fitted likelihood ratio at the
        calibration rows, the size a weighted calibration would keep) and ``shift_n_calibration``,
        ``shift_n_test``; each with ``long_name`` and ``definition`` attributes.

    Raises
    ------
    ValueError
        Inputs that are not 2-D and finite, different columns, a negative ``n_permutations``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> same = covariate_shift(rng.normal(size=(200, 2)), rng.normal(size=(200, 2)), n_permutations=20)
    >>> moved = covariate_shift(rng.normal(size=(200, 2)), rng.normal(1.0, 1.0, size=(200, 2)), n_permutations=20)
    >>> bool(float(same["shift_pvalue"]) > 0.05), bool(float(moved["shift_pvalue"]) < 0.05)
    (True, True)
    """
    X0, X1 = _features(X_calibration, "X_calibration"), _features(X_test, "X_test")
    if X0.shape[1] != X1.shape[1]:
        raise ValueError(
            f"X_test has {X1.shape[1]} columns but X_calibration has {X0.shape[1]}; pass the same input columns."
        )
    B = check_int(n_permutations, "n_permutations", minimum=0)
    template = LikelihoodRatio(classifier, cv=cv, random_state=random_state)
    Z = np.vstack([X0, X1])
    observed, fitted = _cross_fitted_auc(template, Z, len(X0))
    rng = np.random.default_rng(random_state)
    null = np.array([_cross_fitted_auc(template, Z[rng.permutation(len(Z))], len(X0))[0] for _ in range(B)])
    pvalue = (1.0 + np.sum(null >= observed - 1e-12)) / (1.0 + B) if B else np.nan
    ratio = np.clip(fitted.calibration_weights_, 0.0, np.finfo(float).max)
    ess = effective_sample_size(ratio) if np.isfinite(ratio).all() and ratio.max() > 0 else 1.0
    return xr.Dataset(
        {
            "shift_auc": (
                (),
                observed,
                _attrs("classifier AUC, calibration vs test inputs", "cross-fitted AUC (0.5: no shift)"),
            ),
            "shift_pvalue": (
                (),
                pvalue,
                _attrs("shift permutation p-value", f"(1 + #(AUC_b >= AUC)) / (1 + B), B = {B}"),
            ),
            "shift_ess": (
                (),
                ess,
                _attrs(
                    "effective sample size of the estimated ratio",
                    "Kish ESS of the cross-fitted odds at the calibration rows",
                ),
            ),
            "shift_n_calibration": ((), len(X0), _attrs("calibration inputs", "rows of X_calibration")),
            "shift_n_test": ((), len(X1), _attrs("test inputs", "rows of X_test")),
        }
    )


def _attrs(long_name: str, definition: str) -> dict:
    return {
        "long_name": long_name,
        "definition": definition,
        "paper": "Lopez-Paz & Oquab (2017); Tibshirani et al. (2019)",
    }


def add_shift_diagnostics(out: xr.Dataset, pred: xr.Dataset, shift: Any) -> xr.Dataset:
    """``evaluate``'s opt-in: ``out`` with the shift diagnostic and the weights' effective sample size.

    Parameters
    ----------
    out : xarray.Dataset
        The metrics.
    pred : xarray.Dataset
        The prediction (a weighted calibrator's carries ``weights_ess`` in its attributes).
    shift : None, (X_calibration, X_test) or xarray.Dataset
        ``None``: nothing added (``out`` unchanged) but the weights' ESS if the prediction has one;
        a pair of input arrays: :func:`covariate_shift` on them; a Dataset: a result of
        :func:`covariate_shift`, added as it is.
    """
    if "weights_ess" in pred.attrs:
        out = out.assign(
            weights_ess=(
                (),
                float(pred.attrs["weights_ess"]),
                _attrs("effective sample size of the weights", "Kish ESS of the calibration weights used"),
            ),
        )
        out["weights_ess"].attrs["paper"] = "Kish (1965); Tibshirani et al. (2019)"
    if shift is None:
        return out
    if isinstance(shift, xr.Dataset):
        if "shift_auc" not in shift:
            raise ValueError(
                "shift= as a Dataset must be a result of calibprob.metrics.covariate_shift (no shift_auc)."
            )
        diag = shift
    elif isinstance(shift, (tuple, list)) and len(shift) == 2:
        diag = covariate_shift(*shift)
    else:
        raise ValueError(
            f"shift must be (X_calibration, X_test) or a covariate_shift(...) Dataset; got {type(shift).__name__}. "
            "Pass the calibration and test inputs as a pair."
        )
    return out.assign(diag.data_vars)
