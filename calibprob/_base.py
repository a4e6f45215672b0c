"""scikit-learn-style estimator plumbing: parameters, cloning, lifecycle errors."""

from __future__ import annotations

import inspect

__all__ = ["BaseEstimator", "NotFittedError", "clone", "check_is_fitted"]


class NotFittedError(RuntimeError):
    """Raised when ``predict`` (or similar) is called before ``fit``."""


class BaseEstimator:
    """Minimal scikit-learn contract.

    ``__init__`` only stores keyword-only hyperparameters under attributes of
    the same name; learned state ends in ``_``; ``fit`` returns ``self``.
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

    def set_params(self, **params) -> BaseEstimator:
        """Set hyperparameters; unknown names raise ``ValueError``."""
        valid = set(self._param_names())
        for key, value in params.items():
            if key not in valid:
                raise ValueError(
                    f"{type(self).__name__} has no parameter {key!r}; valid: {sorted(valid)}."
                )
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"


def clone(estimator: BaseEstimator) -> BaseEstimator:
    """A new unfitted estimator with the same hyperparameters."""
    return type(estimator)(**estimator.get_params())


def check_is_fitted(estimator, attribute: str, *, method: str = "fit") -> None:
    """Raise :class:`NotFittedError` naming the method to call first."""
    if getattr(estimator, attribute, None) is None:
        raise NotFittedError(
            f"This {type(estimator).__name__} instance is not fitted yet. "
            f"Call {method}(...) before using it."
        )
