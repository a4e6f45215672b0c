r"""Estimator plumbing and the calibrator contract.

scikit-learn-style parameters, cloning and lifecycle errors, and the two
shapes every calibrator in calibprob takes (:class:`DistributionCalibrator`,
:class:`ModelAwareCalibrator`), written as :class:`typing.Protocol`\ s so that
``isinstance`` checks and type checkers both read them.

The two families
----------------
*Distribution post-processors* map a base model's predictive distribution to a
calibrated one. They never see inputs ``X`` or the base model, only its
prediction, so any base works — a Gaussian (:func:`calibprob.normal`), quantiles
(:func:`calibprob.from_quantiles`), PyMC posterior-predictive draws
(:func:`calibprob.from_draws`) — and nothing is collapsed to a Gaussian::

    cal = IsotonicRecalibrator().fit(pred_cal, y_cal)      # pred_cal: base prediction on calibration data
    pred = cal.predict(pred_test)                          # -> predictive Dataset

Isotonic (RK), Vovk (RV), Marx (RM), variance scaling, GP-Beta, the conformal
predictive system, split conformal on a predictive distribution and the online
recalibrator are of this family.

*Model-aware calibrators* need the model itself (to refit it on folds, to use
its kernel, or to change its hyperparameters). They take the model as
``estimator=`` (``prefit=True``: it is already fitted on training data and is
used as it is), are fitted on inputs and targets and predict from inputs::

    cal = SharpCalibratedGP(estimator=gp).fit(X_cal, y_cal)
    pred = cal.predict(X_test)                             # -> predictive Dataset

The sharp calibrated GP, jackknife / jackknife+ / CV+, J+GP, asymmetric J+GP, the
full-conformal GP and split conformal around a model are of this family. Those
that define central intervals only (no quantile function) return an *interval*
Dataset (``lower``/``upper`` over ``obs`` and ``confidence_level``,
``attrs["family"] == "interval"``) from the same ``predict``; :func:`calibprob.evaluate`
scores both kinds.

In both families ``predict`` returns a Dataset, never a tree; what was learned
lives in attributes ending in ``_`` (diagnostics in ``diagnostics_``, a
posterior in ``idata_``), and every fitted object saves to netCDF.
"""

from __future__ import annotations

import copy
import inspect
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

import xarray as xr

from calibprob._core import persistence
from calibprob.predictive import is_interval_family, validate

__all__ = [
    "BaseEstimator",
    "NotFittedError",
    "ConvergenceWarning",
    "clone",
    "check_is_fitted",
    "DistributionCalibrator",
    "ModelAwareCalibrator",
]


class NotFittedError(RuntimeError):
    """Raised when ``predict`` (or similar) is called before ``fit``; the message names the method to call.

    Examples
    --------
    >>> import calibprob
    >>> try:
    ...     calibprob.IsotonicRecalibrator().predict(calibprob.normal([0.0], [1.0]))
    ... except calibprob.NotFittedError as err:
    ...     print(err)
    This IsotonicRecalibrator instance is not fitted yet. Call fit(...) before using it.
    """


class ConvergenceWarning(UserWarning):
    """An optimiser or sampler did not converge (divergences, r-hat > 1.01, no converged start).

    GP-Beta's NUTS warns with it and stores the diagnostics in ``idata_``; the GP
    fits warn when no start of the optimiser converged. Turn it into an error
    with ``warnings.simplefilter("error", calibprob.ConvergenceWarning)``.

    Examples
    --------
    >>> import warnings, calibprob
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("2 divergences", calibprob.ConvergenceWarning)
    >>> caught[0].category.__name__
    'ConvergenceWarning'

    References
    ----------
    Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. and Bürkner, P.-C. (2021).
    Rank-normalization, folding, and localization: an improved R-hat. *Bayesian
    Analysis* 16(2) (the r-hat < 1.01 rule PyMC checks).
    """


@runtime_checkable
class DistributionCalibrator(Protocol):
    """A post-processor of predictive distributions: ``fit(pred_cal, y_cal)``, ``predict(pred)``.

    ``pred_cal`` and ``pred`` follow the contract of :mod:`calibprob.predictive`;
    ``y_cal`` is a 1-D array or DataArray (any dim name), one value per observation.
    Isotonic, Vovk, Marx, variance scaling, GP-Beta, the conformal predictive
    system, split conformal on a predictive distribution and the online
    recalibrator follow it. The two families: :doc:`/concepts`.

    Parameters
    ----------
    pred_cal : xarray.Dataset
        (of ``fit``) The base's predictive distribution on calibration data.
    y_cal : array_like or xarray.DataArray
        (of ``fit``) The calibration targets.
    pred : xarray.Dataset
        (of ``predict``) The base's predictive distribution at new inputs.

    Examples
    --------
    >>> import calibprob
    >>> isinstance(calibprob.IsotonicRecalibrator(), calibprob.DistributionCalibrator)
    True

    """

    def fit(self, pred_cal: Any, y_cal: Any, /) -> Any:  # pragma: no cover - protocol
        """Learn the calibration from the base's prediction on calibration data; return ``self``."""
        ...

    def predict(self, pred: Any, /) -> Any:  # pragma: no cover - protocol
        """The calibrated predictive Dataset for a base prediction."""
        ...


@runtime_checkable
class ModelAwareCalibrator(Protocol):
    """A calibrator around a model (``estimator=``): ``fit(X, y)``, ``predict(X)``.

    It needs the model itself (to refit it or re-evaluate it), not only its
    predictions: the sharp GP, split conformal around a model,
    jackknife/jackknife+/CV+, J+GP/asymJ+GP and the full-conformal GP.
    ``prefit=True`` (where offered) means the estimator is already fitted.
    Intervals-only methods return the interval family from ``predict``. The two families: :doc:`/concepts`.

    Parameters
    ----------
    estimator : object
        The model (a calibprob base, or a callable for the conformal methods).
    X : array_like, shape (n, d)
        (of ``fit`` / ``predict``) Inputs.
    y : array_like or xarray.DataArray, shape (n,)
        (of ``fit``) Targets.

    Examples
    --------
    >>> import calibprob
    >>> isinstance(calibprob.JackknifePlusGP(), calibprob.ModelAwareCalibrator)
    True
    >>> isinstance(calibprob.JackknifePlusGP(), calibprob.DistributionCalibrator)   # same method names
    True

    """

    estimator: object

    def fit(self, X: Any, y: Any, /) -> Any:  # pragma: no cover - protocol
        """Fit (or calibrate) on inputs and targets; return ``self``."""
        ...

    def predict(self, X: Any, /) -> Any:  # pragma: no cover - protocol
        """The calibrated predictive (or interval) Dataset at inputs ``X``."""
        ...


class BaseEstimator:
    """Minimal scikit-learn contract.

    ``__init__`` only stores keyword-only hyperparameters under attributes of
    the same name; learned state ends in ``_``; ``fit`` returns ``self``.

    Persistence (:meth:`save`, :func:`calibprob.load`) reads two declarations of
    the class itself, so the save/load module names no class (as scikit-learn's
    ``IsotonicRegression`` rebuilds its interpolant in ``__setstate__``):
    :attr:`_transient_attrs`, the attributes that are caches or derived objects
    and are not written, and :meth:`_rebuild_after_load`, which rebuilds them.
    """

    #: Attributes not written by :meth:`save` (caches, compiled functions, views derived
    #: from other state); :meth:`_rebuild_after_load` restores what prediction needs.
    _transient_attrs: tuple[str, ...] = ()

    def _rebuild_after_load(self) -> None:
        """Rebuild the derived state of :attr:`_transient_attrs` once :func:`calibprob.load` has read the rest.

        Called once per loaded estimator, nested ones first (so an outer estimator
        may use its fitted inner one). Nothing to do by default.
        """

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [
            p.name
            for p in sig.parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]

    def get_params(self) -> dict:
        """Hyperparameters as passed to ``__init__``."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> BaseEstimator:
        """Set hyperparameters; unknown names raise ``ValueError``."""
        valid = set(self._param_names())
        for key, value in params.items():
            if key not in valid:
                raise ValueError(f"{type(self).__name__} has no parameter {key!r}; valid: {sorted(valid)}.")
            setattr(self, key, value)
        return self

    def save(self, path: Any) -> Path:
        """Write this estimator (parameters and fitted state) to netCDF-4, without pickle.

        Restore it with :func:`calibprob.load`; the format is described in
        :ref:`saving-and-loading` (and in ``calibprob._core.persistence``). User code it holds (a callable, a non-calibprob
        model) is not written: ``load`` asks for it back by parameter name.

        Parameters
        ----------
        path : str or path-like
            Destination file (overwritten), conventionally ``*.nc``.

        Returns
        -------
        pathlib.Path
        """
        return persistence.save(self, path)

    @classmethod
    def load(cls, path: Any, **objects: Any) -> Any:
        """Restore an estimator of this class from a file written by :meth:`save`.

        :func:`calibprob.load` returns whichever class the file holds; this method also
        checks that the file holds this class (or a subclass of it), so a file mixed up
        with another is refused with the class it does hold and how to load it.

        Parameters
        ----------
        path : str or path-like
            A file written by ``estimator.save(path)``.
        **objects
            User objects that were not saved, by parameter name (see :func:`calibprob.load`).

        Returns
        -------
        estimator
            The loaded instance of this class.

        Raises
        ------
        TypeError
            The file holds an estimator of another class.

        Examples
        --------
        >>> import numpy as np, calibprob, tempfile, os
        >>> X = np.arange(10.0)[:, None]; y = 2.0 * X[:, 0]
        >>> path = os.path.join(tempfile.mkdtemp(), "ols.nc")
        >>> _ = calibprob.LinearRegression().fit(X, y).save(path)
        >>> type(calibprob.LinearRegression.load(path)).__name__
        'LinearRegression'
        """
        obj = persistence.load(path, **objects)
        if not isinstance(obj, cls):
            held = type(obj).__name__
            raise TypeError(
                f"'{path}' holds a {held}, not a {cls.__name__}: load it with {held}.load(path), or with "
                f"calibprob.load(path), which returns whichever class the file holds."
            )
        return obj

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"


_Estimator = TypeVar("_Estimator", bound=BaseEstimator)


def clone(estimator: _Estimator) -> _Estimator:
    """A new unfitted estimator with the same hyperparameters.

    A user's model without ``get_params`` (any object with ``fit``/``predict``) is deep-copied
    instead, as :func:`sklearn.base.clone` does with ``safe=False``: the caller's instance is
    never fitted in place.
    """
    if not hasattr(estimator, "get_params"):
        return copy.deepcopy(estimator)
    return type(estimator)(**estimator.get_params())


def check_is_fitted(estimator: Any, attribute: str, *, method: str = "fit") -> None:
    """Raise :class:`NotFittedError` naming the method to call first."""
    if getattr(estimator, attribute, None) is None:
        raise NotFittedError(
            f"This {type(estimator).__name__} instance is not fitted yet. Call {method}(...) before using it."
        )


# returns a Dataset; typed Any because callers store it in attributes they later set to None
def check_predictive(pred: Any, owner: Any, argument: str = "pred") -> Any:
    """The argument of a distribution post-processor: a predictive Dataset, validated.

    Anything else — inputs ``X``, a NumPy array of means — is refused with a
    message saying what to pass and which family to use instead, so that a
    user who reaches for the wrong family learns the fix from the error.
    """
    name = owner if isinstance(owner, str) else type(owner).__name__
    if isinstance(pred, xr.Dataset):
        if is_interval_family(pred):  # a valid prediction, but it states no distribution to post-process
            raise TypeError(
                f"{name} is a distribution post-processor: {argument} must state a whole predictive "
                "distribution; got an interval-family Dataset (lower/upper only). Use the base model's "
                "distribution, or evaluate the intervals with calibprob.evaluate."
            )
        return validate(pred)
    what = type(pred).__name__
    if hasattr(pred, "shape"):
        what += f" of shape {tuple(pred.shape)}"
    raise TypeError(
        f"{name} is a distribution post-processor: {argument} must be the base model's predictive "
        f"distribution as an xarray.Dataset (base.predict(X), calibprob.from_draws(idata) for PyMC "
        f"posterior-predictive draws, or calibprob.normal(mu, sigma)); got {what}. If you have inputs X "
        "and a model, predict with the model first, or use a model-aware calibrator "
        "(SplitConformalRegressor(estimator=...), SharpCalibratedGP(estimator=...))."
    )


def check_not_predictive(X: Any, owner: Any, argument: str = "X") -> None:
    """Refuse a predictive Dataset where a model-aware calibrator needs inputs ``X``."""
    name = owner if isinstance(owner, str) else type(owner).__name__
    if isinstance(X, (xr.Dataset, xr.DataTree)):
        raise TypeError(
            f"{name} is a model-aware calibrator: {argument} must be the model's inputs (an array of shape "
            "(n, d)); got a predictive xarray object. To calibrate a predictive distribution "
            "directly, use a distribution post-processor: ConformalPredictiveSystem(), "
            "SplitConformalCalibrator(), IsotonicRecalibrator() or GPBetaCalibrator() "
            "(fit(pred_cal, y_cal), predict(pred))."
        )
