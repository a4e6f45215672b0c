"""Constants and level grids shared by the metrics (ECE levels, IAE grid, interval levels)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from calibprob._core.deprecation import renamed_keywords
from calibprob._core.validation import check_confidence_levels, check_int

#: Scalar or per-confidence-level metric variables returned by :func:`evaluate`
#: (the names a comparison spec's ``metrics`` may list).
METRIC_NAMES = (
    "ece",
    "iae",
    "nll",
    "crps",
    "pinball",
    "mse",
    "rmse",
    "std",
    "coverage",
    "width",
    "median_width",
    "interval_score",
    "ueb_violation",
    "ueb_width",
)

#: Confidence levels of the central intervals reported by :func:`evaluate`.
DEFAULT_CONFIDENCE_LEVELS = (0.5, 0.8, 0.9, 0.95, 0.99)

#: Miscoverage levels :math:`\alpha` of the IAE (Pion & Vazquez 2024, their code):
#: ``linspace(0.02, 0.98, 20)``; the intervals have confidence level ``1 - alpha``.
IAE_MISCOVERAGE = np.linspace(0.02, 0.98, 20)

#: Quantile levels of the pinball loss (Song et al. 2019): 0.05, 0.10, ..., 0.95.
PINBALL_LEVELS = np.round(np.arange(1, 20) * 0.05, 10)

# rows per block in the chunked evaluations (memory O(_CHUNK x L), cache-friendly)
_CHUNK = 4096


def ece_levels(n_levels: int = 21) -> np.ndarray:
    r"""The ECE levels :math:`p_j = j/(m-1)`, :math:`j = 0, \dots, m-1` (``m = n_levels``).

    With the default ``m = 21``: 0, 0.05, ..., 1, as in Capone et al. 2023.

    Parameters
    ----------
    n_levels : int, default 21
        Number :math:`m \ge 2` of levels.

    Returns
    -------
    ndarray, shape (m,)

    References
    ----------
    Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
    processes. NeurIPS 36, eq. (8) and Table 1.

    Kuleshov, V., Fenner, N. and Ermon, S. (2018). Accurate uncertainties for deep
    learning using calibrated regression. ICML.

    Examples
    --------
    >>> from calibprob.metrics import ece_levels
    >>> ece_levels(5).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    m = check_int(n_levels, "n_ece_levels", minimum=2)
    return np.linspace(0.0, 1.0, m)


def iae_confidence_levels() -> np.ndarray:
    r"""The IAE's central-interval confidence levels :math:`1-\alpha_k`, sorted increasingly.

    :math:`\alpha_k` = ``linspace(0.02, 0.98, 20)`` (:data:`IAE_MISCOVERAGE`);
    the grid is symmetric about 1/2, so the 20 levels are 0.02, ..., 0.98 again
    (rounded to 12 digits so that they are exactly the same floats).

    Returns
    -------
    ndarray, shape (20,)

    References
    ----------
    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, §2 (J_IAE) and their public code.

    Examples
    --------
    >>> from calibprob.metrics import iae_confidence_levels
    >>> c = iae_confidence_levels()
    >>> c.size, float(c[0]), float(c[-1])
    (20, 0.02, 0.98)
    """
    return np.sort(np.round(1.0 - IAE_MISCOVERAGE, 12))


@renamed_keywords({"confidence_levels": "confidence_level"}, where="calibprob.metrics.interval_levels")
def interval_levels(confidence_level: ArrayLike = DEFAULT_CONFIDENCE_LEVELS) -> np.ndarray:
    """The confidence levels an interval-only method must provide for :func:`evaluate_intervals`.

    The union of ``confidence_level`` and the IAE grid :func:`iae_confidence_levels`.

    Parameters
    ----------
    confidence_level : sequence of float, default :data:`DEFAULT_CONFIDENCE_LEVELS`
        Levels in (0, 1) whose ``coverage`` and ``width`` are reported. Called
        ``confidence_levels`` before 0.2.0 (warns ``FutureWarning`` until 0.3.0).

    Returns
    -------
    ndarray, sorted

    References
    ----------
    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, §2 and Table 1.

    Examples
    --------
    >>> from calibprob.metrics import interval_levels
    >>> levels = interval_levels([0.9])
    >>> levels.size, bool(0.9 in levels)
    (21, True)
    """
    c = check_confidence_levels(confidence_level, "confidence_level")
    return np.unique(np.round(np.concatenate([c, iae_confidence_levels()]), 12))
