"""Your own model as a comparison base: ``kind = "python"`` and ``compare.run(spec, bases={...})``.

A *factory* is any of

1. **a function** ``(X_train, y_train) -> predict`` where ``predict(X)`` returns a
   predictive Dataset (:mod:`calibprob.predictive`), e.g. a PyMC model builder that samples
   and returns ``lambda X: calibprob.from_draws(<posterior predictive at X>)``; it may also
   return a fitted object with such a ``predict``;
2. **an object with** ``fit(X, y)`` **and** ``predict(X)`` (an instance, copied for every
   task with ``sklearn.base.clone`` when it has ``get_params``, else ``copy.deepcopy``;
   a class is instantiated without arguments). After ``fit``, its predictive distribution
   is taken from the first that applies:

   a. ``predict`` accepts ``return_std``: ``mean, std = predict(X, return_std=True)`` is a
      Normal (scikit-learn's ``GaussianProcessRegressor``, ``BayesianRidge``, ``ARDRegression``);
   b. ``predict`` accepts ``quantiles``: ``predict(X, quantiles=levels)`` (one column per
      level) is the quantile function (e.g. quantile-forest's regressors);
   c. ``predict(X)`` returns a Dataset: used as it is (a calibprob model, or your wrapper
      around a PyMC model; given the spec's ``levels`` when ``predict`` takes ``levels``);
   d. otherwise ``predict(X)`` is a point prediction and the predictive is
      ``Normal(predict(X), sigma)`` with one ``sigma`` for all inputs: the root mean square of
      its 5-fold *out-of-fold* residuals on the training part (5 extra fits; in-sample
      residuals of a flexible model such as boosted trees are far too small). This is the
      "point model with a constant σ" base that a calibrator then reshapes.

   An estimator whose ``get_params()`` has ``random_state = None`` gets the task's seed.

From TOML, ``[bases.NAME] kind = "python"`` with ``entry = "package.module:factory"``
imports ``package.module`` (from the Python path: install your package, or set
``PYTHONPATH``) and takes ``factory`` from it. **This runs your code**, as pytest imports
its plugins: a spec naming an ``entry`` is as trusted as the code it names. The import
happens when the spec is loaded, so a wrong name is a :class:`~calibprob.compare.SpecError`
before any task runs. Results files never name code to run: the spec text stored in them
leaves the ``entry`` out, and reading a results file imports nothing.
"""

from __future__ import annotations

import copy
import importlib
import inspect
from collections.abc import Callable
from typing import Any, Self, TypeAlias

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.options import SpecError, _short
from calibprob._core.tables import check_feature_names, check_width, record_feature_names
from calibprob._core.validation import check_prediction
from calibprob.predictive import DEFAULT_LEVELS, from_quantiles, normal, validate

__all__ = ["PythonBase", "check_factory", "check_python_table", "build_python_base", "factory_label", "N_FOLDS"]

#: Folds of the out-of-fold residuals that give a point model its σ (rule d).
N_FOLDS = 5

#: The user's code, duck-typed: a function ``(X, y) -> predict``, or a model (class or instance) with
#: ``fit(X, y)`` and ``predict(X)``; its methods are called by name, so the type is open.
Factory: TypeAlias = Any


def factory_label(factory: object) -> str:
    """A stable description of a factory (``module:qualname``), for fingerprints and messages."""
    target = factory if inspect.isfunction(factory) or isinstance(factory, type) else type(factory)
    label = f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', type(target).__name__)}"
    if not isinstance(factory, type) and hasattr(factory, "get_params"):
        try:
            params = _params(factory)
        except Exception:  # noqa: BLE001 - a label only; a model whose get_params fails is still usable
            params = {}
        label += "(" + ", ".join(f"{k}={v!r}" for k, v in sorted(params.items())) + ")"
    return label


def check_factory(factory: object, where: str) -> None:
    """Refuse what cannot be a factory, naming ``where`` (e.g. ``bases['mine']``) and the forms allowed."""
    estimator_like = hasattr(factory, "fit") and hasattr(factory, "predict")
    if estimator_like or (callable(factory) and not isinstance(factory, (str, bytes))):
        return
    raise TypeError(
        f"{where} must be a factory: a function (X_train, y_train) -> predict(X) returning a predictive "
        "Dataset, or a model with fit(X, y) and predict(X) (scikit-learn style); "
        f"got {type(factory).__name__} {_short(factory)}."
    )


def _import_entry(entry: str, where: str) -> Factory:
    module, _, name = entry.partition(":")
    if not module or not name:
        raise SpecError(f"{where}.entry must read 'package.module:factory'; got {entry!r}.")
    try:
        obj = importlib.import_module(module)
    except Exception as err:  # noqa: BLE001 - any failure of the user's import is a spec problem
        raise SpecError(
            f"{where}.entry = {entry!r}: cannot import {module!r} ({type(err).__name__}: {err}). "
            "Install the package that defines it or add its folder to PYTHONPATH."
        ) from None
    for part in name.split("."):
        if not hasattr(obj, part):
            raise SpecError(
                f"{where}.entry = {entry!r}: module {module!r} has no attribute {name!r}. Check the name after the colon."
            )
        obj = getattr(obj, part)
    return obj


def factory_from_table(options: dict, where: str, what: str) -> Factory:
    """The factory of a base table holding one of ``entry`` (imported: TOML) or ``factory`` (the object: Python).

    Shared by every base kind that runs the user's code (``python``, ``pymc-model``); ``what`` says
    what a ``factory`` must be, for the message when a string is given where an object belongs.
    """
    if "entry" in options:
        if not isinstance(options["entry"], str):
            raise SpecError(f"{where}.entry must be a string 'package.module:factory'; got {_short(options['entry'])}.")
        return _import_entry(options["entry"], where)
    factory = options["factory"]
    if isinstance(factory, str):
        raise SpecError(f"{where}.factory must be {what}; from TOML name it with entry = '{factory}'.")
    return factory


def check_python_table(options: dict, where: str) -> Factory:
    """A ``kind = "python"`` base table: ``entry`` (importable) or, from Python, ``factory``; returns the factory."""
    keys = set(options)
    if keys - {"entry", "factory"} or len(keys) != 1:
        raise SpecError(
            f"{where} (kind 'python') takes exactly one of entry = 'package.module:factory' (from TOML) or a "
            f"factory given to calibprob.compare.run(spec, bases={{...}}); got keys {sorted(keys) or '(none)'}."
        )
    factory = factory_from_table(options, where, "a Python object")
    try:
        check_factory(factory, where)
    except TypeError as err:
        raise SpecError(str(err)) from None
    return factory


def build_python_base(options: dict, *, seed: int | None = None) -> PythonBase:
    """The registered builder of ``kind = "python"``: an unfitted :class:`PythonBase` for the table."""
    where = f"the python base {options.get('entry') or factory_label(options.get('factory'))}"
    factory = check_python_table(options, where)
    return PythonBase(factory, seed=seed, name=options.get("entry") or factory_label(factory))


def _fresh(factory: Factory, seed: int | None) -> Any:
    """A new unfitted model from an instance or a class, seeded when it takes ``random_state``."""
    if isinstance(factory, type):
        model = factory()
    elif hasattr(factory, "get_params"):
        try:
            from sklearn.base import clone

            model = clone(factory)
        except (ImportError, TypeError, RuntimeError):
            model = copy.deepcopy(factory)
    else:
        model = copy.deepcopy(factory)
    if seed is not None and hasattr(model, "get_params") and hasattr(model, "set_params"):
        if "random_state" in _params(model) and _params(model)["random_state"] is None:
            model.set_params(random_state=int(seed) % 2**32)
    return model


def _params(model: Any) -> dict:
    """``get_params`` of scikit-learn (``deep=False``) or of calibprob (no ``deep``); {} if neither."""
    try:
        return dict(model.get_params(deep=False))
    except TypeError:
        return dict(model.get_params())


def _accepts(func: Callable[..., Any], name: str) -> bool:
    try:
        return name in inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False


class PythonBase:
    """A user's model wrapped to the base-model protocol: ``fit(X, y)``, ``predict(X, levels=None)`` -> Dataset.

    Parameters
    ----------
    factory : callable or estimator
        See the module docstring for the forms and the order in which the predictive is found.
    seed : int, optional
        The task's seed, given to an estimator whose ``random_state`` is ``None``.
    name : str
        Used in error messages.

    Examples
    --------
    >>> import numpy as np
    >>> import calibprob
    >>> from calibprob.bases.user import PythonBase
    >>> def build(X, y):
    ...     beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    ...     sd = np.std(y - X @ beta)
    ...     return lambda Xn: calibprob.normal(Xn @ beta, np.full(len(Xn), sd))
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 2)); y = X @ [1.0, -2.0] + 0.1 * rng.normal(size=50)
    >>> base = PythonBase(build).fit(X, y)
    >>> base.mode_, base.predict(X[:3]).sizes["obs"]
    ('function', 3)
    """

    def __init__(self, factory: Factory, *, seed: int | None = None, name: str = "python") -> None:
        check_factory(factory, f"the factory of base {name!r}")
        self.factory = factory
        self.seed = seed
        self.name = name
        self.predict_: Callable | None = None  # set by fit (a function factory's predict)

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        # the user's model sees a plain array: the names and width are kept here and checked at predict
        record_feature_names(self, X)
        X, y = np.asarray(X), np.asarray(y)
        self.n_features_in_ = X.shape[1] if X.ndim == 2 else None
        if not (hasattr(self.factory, "fit") and hasattr(self.factory, "predict")):
            out = self.factory(X, y)
            self.predict_ = out if callable(out) else getattr(out, "predict", None)
            if not callable(self.predict_):
                raise TypeError(
                    f"the factory of base {self.name!r} must return a function predict(X) -> predictive Dataset "
                    f"(or a fitted object with such a predict); got {type(out).__name__}."
                )
            self.mode_ = "function"
            return self
        self.model_ = _fresh(self.factory, self.seed).fit(X, y)
        self.mode_ = self._mode(X)
        if self.mode_ == "point":
            self.sigma_ = self._out_of_fold_sigma(X, y)
        return self

    def _mode(self, X: np.ndarray) -> str:
        """Which rule of the module docstring gives this model's predictive (in its order)."""
        predict = self.model_.predict
        if _accepts(predict, "return_std"):
            return "std"
        if _accepts(predict, "quantiles"):
            return "quantiles"
        return "dataset" if isinstance(predict(X[:2]), xr.Dataset) else "point"

    def _out_of_fold_sigma(self, X: np.ndarray, y: np.ndarray) -> float:
        """RMS of 5-fold out-of-fold residuals (rule d of the module docstring)."""
        rng = np.random.default_rng(self.seed)
        folds = np.array_split(rng.permutation(len(y)), min(N_FOLDS, len(y)))
        resid = np.empty(len(y))
        for idx in folds:
            train = np.setdiff1d(np.arange(len(y)), idx)
            model = _fresh(self.factory, self.seed).fit(X[train], y[train])
            resid[idx] = y[idx] - self._point(model.predict(X[idx]), len(idx))
        sigma = float(np.sqrt(np.mean(resid**2)))
        if not np.isfinite(sigma) or sigma <= 0:
            raise ValueError(f"base {self.name!r}: the out-of-fold residuals give sigma = {sigma}; need > 0.")
        return sigma

    def _point(self, values: object, n: int) -> np.ndarray:
        if isinstance(values, xr.Dataset):
            raise ValueError(
                f"base {self.name!r}: predict(X) gave a Dataset for {n} inputs; need one number per input."
            )
        # the one validation layer: shape (n,) (or (n, 1)), finite, named in the message
        return check_prediction(values, n, "the prediction", source=f"base {self.name!r}'s predict(X)")

    def predict(self, X: ArrayLike, levels: ArrayLike | None = None) -> xr.Dataset:
        """The predictive distribution at ``X`` (the contract of :mod:`calibprob.predictive`).

        A DataFrame is checked against the columns of the one given to ``fit`` (names and order),
        and any 2-D ``X`` against the fitted width, before the user's model sees it.
        """
        check_feature_names(self, X, "X")
        X = np.asarray(X)
        width = getattr(self, "n_features_in_", None)
        if width is not None:
            check_width(X, width, "X", fitted=f"base {self.name!r} was fitted")
        n = len(X)
        if self.mode_ == "function" and self.predict_ is not None:
            return self._check_dataset(self.predict_(X), n)
        if self.mode_ == "dataset":
            predict = self.model_.predict
            take_levels = levels is not None and _accepts(predict, "levels")
            return self._check_dataset(predict(X, levels=levels) if take_levels else predict(X), n)
        if self.mode_ == "std":
            out = self.model_.predict(X, return_std=True)
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError(f"base {self.name!r}: predict(X, return_std=True) must return (mean, std).")
            return normal(self._point(out[0], n), self._point(out[1], n), levels=levels)
        if self.mode_ == "quantiles":
            lv = np.asarray(DEFAULT_LEVELS if levels is None else levels, dtype=float)
            q = np.asarray(self.model_.predict(X, quantiles=list(lv)), dtype=float)
            if q.shape != (n, lv.size):
                raise ValueError(
                    f"base {self.name!r}: predict(X, quantiles=levels) gave shape {q.shape}; need ({n}, {lv.size})."
                )
            return from_quantiles(np.sort(q, axis=1), lv)
        return normal(self._point(self.model_.predict(X), n), np.full(n, self.sigma_), levels=levels)

    def _check_dataset(self, pred: object, n: int) -> xr.Dataset:
        if not isinstance(pred, xr.Dataset):
            raise TypeError(
                f"base {self.name!r}: predict(X) must return a predictive Dataset (e.g. calibprob.from_draws of the "
                f"posterior predictive, or calibprob.normal(mean, std)); got {type(pred).__name__}."
            )
        if pred.sizes.get("obs") != n:
            raise ValueError(
                f"base {self.name!r}: predict(X) returned {pred.sizes.get('obs')} predictions for {n} inputs; "
                "return one per row of X (obs dim)."
            )
        validate(pred)
        return pred
