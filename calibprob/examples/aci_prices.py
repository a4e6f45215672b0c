r"""The random forest of Zaffran et al.'s (2022) ACI experiments, for ``models/zaffran2022-aci-prices.toml``.

The authors' forecaster of the French hour-0 spot price (mzaffran/AdaptiveConformalPredictionsTimeSeries,
as MAPIE's ``zaffran2022`` reproduction spells it out): scikit-learn's ``RandomForestRegressor`` with
1 000 trees, ``max_features = 6``, ``min_samples_leaf = 1`` and ``random_state = 1``, refitted each day.
A spec's ``kind = "python"`` base names :func:`forest` (``entry = "calibprob.examples.aci_prices:forest"``),
a function factory ``(X, y) -> predict``: ``predict(X)`` is a Normal whose mean is the forest's
prediction, bit for bit (the trees' predictions summed in order and divided by their number, as
``RandomForestRegressor.predict`` does), and whose standard deviation is the spread of the 1 000 trees'
predictions,

.. math::

    \mu(x) = \frac1B \sum_{b=1}^B T_b(x), \qquad
    \sigma(x) = \Big(\frac1B \sum_{b=1}^B T_b(x)^2 - \mu(x)^2\Big)^{1/2},

a rough spread (not a calibrated one) read in the same pass; ACI's absolute score reads only
:math:`\mu`. A forest is a point model, and the ``python`` base's rule for a bare point model (a
constant :math:`\sigma` from 5-fold out-of-fold residuals) would cost five more forests a day. Needs
scikit-learn.

References
----------
Zaffran, M., Féron, O., Goude, Y., Josse, J. and Dieuleveut, A. (2022). Adaptive conformal predictions for
time series. ICML, PMLR 162, 25834–25866.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob.predictive import normal

__all__ = ["forest", "FOREST_PARAMS", "MIN_SPREAD"]

#: The authors' forest.
FOREST_PARAMS = {"n_estimators": 1000, "max_features": 6, "min_samples_leaf": 1, "random_state": 1}

#: The smallest standard deviation issued (all trees agreeing would give 0, which a Normal refuses).
MIN_SPREAD = 1e-9


def forest(X: ArrayLike, y: ArrayLike) -> Callable[[ArrayLike], xr.Dataset]:
    """Fit the authors' forest on ``(X, y)``; return ``predict(X) -> Normal(mean of the trees, their spread)``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(40, 8)), rng.normal(size=40)
    >>> pred = forest(X, y)(X[:3])
    >>> rf = RandomForestRegressor(**FOREST_PARAMS).fit(X, y)
    >>> bool(np.array_equal(pred["mean"].values, rf.predict(X[:3])))
    True
    """
    from sklearn.ensemble import RandomForestRegressor

    model = RandomForestRegressor(**FOREST_PARAMS).fit(np.asarray(X, float), np.asarray(y, float))

    def predict(X_new: ArrayLike) -> xr.Dataset:
        X_new = np.asarray(X_new, float)
        total, squares = np.zeros(len(X_new)), np.zeros(len(X_new))
        for tree in model.estimators_:  # in order, as RandomForestRegressor.predict accumulates them
            p = tree.predict(X_new)
            total += p
            squares += p * p
        mean = total / len(model.estimators_)
        spread = np.sqrt(np.maximum(squares / len(model.estimators_) - mean**2, 0.0))
        return normal(mean, np.maximum(spread, MIN_SPREAD))

    return predict
