r"""A base model fitted on a transformed target: :math:`Z = g(Y)` in, the law of :math:`Y` out.

:class:`TransformedTargetRegressor` fits any base on :math:`g(y)` (``"log"`` or ``"log1p"``) and returns the
original-scale predictive distribution through :func:`calibprob.transforms.back_transform`, whose module describes
the exact back-transformed quantiles, densities and scores.
"""

from __future__ import annotations

from typing import Literal, Self

import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.estimator import BaseEstimator, check_is_fitted, clone
from calibprob._core.tables import check_columns, record_columns
from calibprob.transforms import back_transform, transform_target

__all__ = ["TransformedTargetRegressor"]


class TransformedTargetRegressor(BaseEstimator):
    r"""Fit a base model on :math:`g(y)`; predict the law of :math:`y` on the original scale.

    Parameters
    ----------
    estimator : base model
        Anything with ``fit(X, y)`` and ``predict(X)`` returning a predictive
        Dataset (e.g. :class:`calibprob.GaussianProcessRegressor`,
        :class:`calibprob.LinearRegression`).
    transform : {"log", "log1p"}, default "log"

    Attributes
    ----------
    estimator_ : the fitted base (on the transformed scale)

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.bases.transformed import TransformedTargetRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(size=(300, 1)); y = np.exp(1.0 + X[:, 0] + 0.3 * rng.normal(size=300))
    >>> model = TransformedTargetRegressor(estimator=calibprob.LinearRegression()).fit(X, y)
    >>> pred = model.predict(X[:5])
    >>> pred.attrs["target_transform"], bool((pred["quantile"].values > 0).all())
    ('log', True)

    References
    ----------
    Baran & Lerch (2015) for the lognormal scores; see :mod:`calibprob.transforms`.
    """

    def __init__(self, *, estimator: BaseEstimator | None = None, transform: Literal["log", "log1p"] = "log") -> None:
        self.estimator = estimator
        self.transform = transform

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Fit the base on ``g(y)``; returns ``self``."""
        if self.estimator is None or not hasattr(self.estimator, "fit"):
            raise TypeError(
                "estimator must be a base model with fit(X, y) and predict(X) "
                f"(e.g. calibprob.LinearRegression()); got {self.estimator!r}."
            )
        z = transform_target(y, self.transform, name="y")
        record_columns(self, X)  # checked here too, whatever the wrapped base does with names
        self.estimator_ = clone(self.estimator).fit(X, z)
        return self

    def predict(self, X: ArrayLike) -> xr.Dataset:
        """The original-scale predictive distribution (:func:`~calibprob.transforms.back_transform` of the base's)."""
        check_is_fitted(self, "estimator_", method="fit")
        check_columns(self, X)
        return back_transform(self.estimator_.predict(X), self.transform)
