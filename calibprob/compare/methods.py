"""The calibrator kinds a comparison spec can name, and the base models.

Each kind is a function ``(ctx, **options) -> predictive Dataset on ctx.X_test``
registered with its allowed option names. The :class:`TaskContext` carries the
split data and the base model fitted once per task, shared by every method of
that task. Calibrator modules are imported lazily so a spec that does not use
them never pays for them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import xarray as xr

__all__ = ["TaskContext", "MethodKind", "METHOD_KINDS", "register", "make_base"]


@dataclass
class TaskContext:
    """Everything a calibrator needs inside one (data set, repetition) task.

    ``X_cal``/``y_cal`` are ``None`` when the spec's split has no calibration
    part (protocols that calibrate in-sample, e.g. Song et al. 2019).
    """

    X_train: np.ndarray
    y_train: np.ndarray
    X_cal: np.ndarray | None
    y_cal: np.ndarray | None
    X_test: np.ndarray
    base: object  # fitted base following the base-regressor protocol
    base_spec: dict
    levels: np.ndarray | None
    seed: int

    def new_base(self):
        """A fresh, unfitted copy of the base model (for methods that refit it)."""
        return make_base(self.base_spec, seed=self.seed)

    @property
    def calibration(self) -> tuple[np.ndarray, np.ndarray]:
        """The calibration data, falling back to the training data when there is none."""
        if self.X_cal is None:
            return self.X_train, self.y_train
        return self.X_cal, self.y_cal


@dataclass(frozen=True)
class MethodKind:
    """A registered calibrator kind: the function and the option names it accepts."""

    name: str
    func: Callable[..., xr.Dataset]
    options: frozenset
    doc: str = ""


METHOD_KINDS: dict[str, MethodKind] = {}


def register(name: str, options=(), doc: str = ""):
    """Decorator registering a calibrator kind under ``name`` with its allowed options."""

    def deco(func):
        METHOD_KINDS[name] = MethodKind(name, func, frozenset(options), doc or (func.__doc__ or "").strip())
        return func

    return deco


def make_base(base_spec: dict, *, seed: int | None = None):
    """Build an unfitted base model from a spec's ``[base]`` table."""
    options = {k: v for k, v in base_spec.items() if k != "kind"}
    kind = base_spec["kind"]
    if kind == "gp":
        from calibprob.gp import GaussianProcessRegressor

        options.setdefault("random_state", seed)
        return GaussianProcessRegressor(**options)
    if kind == "sparse-gp":
        from calibprob.gp import SparseGaussianProcessRegressor

        options.setdefault("random_state", seed)
        return SparseGaussianProcessRegressor(**options)
    if kind == "ols":
        from calibprob.linear import LinearRegression

        return LinearRegression(**options)
    if kind == "bayesian-ridge":
        from calibprob.linear import BayesianRidge

        return BayesianRidge(**options)
    raise ValueError(f"unknown base kind {kind!r}")


@register("base", options=(), doc="The uncalibrated base model's Gaussian predictive distribution.")
def _base(ctx: TaskContext) -> xr.Dataset:
    """The uncalibrated base model (B in Capone et al. 2023)."""
    return ctx.base.predict(ctx.X_test, levels=ctx.levels)
