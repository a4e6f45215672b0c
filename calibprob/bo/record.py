r"""The BO loop's step recorder and the ``xarray.DataTree`` it builds.

:class:`StepRecorder` collects one record per BO step (the forecast issued
before the outcome, its PITs, the acquisition value, the GP hyperparameters in
original units, timings) and the recalibrator state used at that step;
:meth:`StepRecorder.to_datatree` assembles the result of
:func:`calibprob.bo.minimize`: groups ``evaluations``, ``steps`` and (when
recalibrated) ``recalibrator``, settings as root attributes.

References
----------
Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and
conformal prediction improves Bayesian optimization. AISTATS (calibration
error of the issued forecasts, Fig. 3; simple and cumulative regret).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from calibprob.metrics import (
    best_so_far,
    calibration_curve_from_pit,
    calibration_error,
    cumulative_regret,
    ece_levels,
    simple_regret,
)

__all__ = ["StepRecorder", "STEP_FIELDS", "INTERVAL_FIELDS"]

#: Per-step fields: name -> (dtype, attrs); ``lengthscale`` has a ``feature`` dimension.
STEP_FIELDS: dict[str, tuple[type, dict]] = {
    "forecast_mean": (float, {}),
    "forecast_std": (float, {}),
    "pit": (float, {"long_name": "PIT of y under the forecast used for the decision"}),
    "pit_base": (float, {"long_name": "PIT of y under the base GP forecast"}),
    "acquisition_value": (float, {}),
    "refit": (bool, {}),
    "lengthscale": (float, {}),
    "variance": (float, {}),
    "noise": (float, {}),
    "time_model": (float, {}),
    "time_calibration": (float, {}),
    "time_acquisition": (float, {}),
    "n_calibration": (int, {}),
    "sharp_fitted": (bool, {"long_name": "sharp GP calibrated at this step (else vanilla mu - 2 sigma)"}),
}

#: Optional per-step fields: the interval issued before each outcome (``interval_level=``).
INTERVAL_FIELDS: dict[str, dict] = {
    "interval_lower": {"long_name": "lower end of the interval issued before observing y"},
    "interval_upper": {"long_name": "upper end of the interval issued before observing y"},
    "covered": {"long_name": "y fell in the interval issued before observing it (NaN: y not finite)"},
}

#: Fields that go to another group or only with the sharp-GP acquisition.
_NOT_IN_STEPS = ("n_calibration", "sharp_fitted", "lengthscale")


def running_ece(pit: np.ndarray) -> np.ndarray:
    """ECE (mean over :func:`calibprob.metrics.ece_levels`) of the finite PITs of steps 1..t, for each t."""
    lv = ece_levels()
    out = np.full(pit.size, np.nan)
    for t in range(pit.size):
        u = pit[: t + 1]
        u = u[np.isfinite(u)]
        if u.size:
            out[t] = calibration_error(calibration_curve_from_pit(u, lv), lv)
    return out


def evaluations_dataset(X: np.ndarray, y: np.ndarray, n0: int, optimum: float | None) -> xr.Dataset:
    """Group ``evaluations``: inputs, values as returned, modelled values, best so far and regrets."""
    n, d = X.shape
    finite = np.isfinite(y)
    bsf = best_so_far(np.where(finite, y, np.inf))
    bsf = np.where(np.isfinite(bsf), bsf, np.nan)
    worst_so_far = np.array(
        [np.max(y[: i + 1][finite[: i + 1]]) if finite[: i + 1].any() else np.nan for i in range(n)]
    )
    y_model = np.where(finite, y, worst_so_far)
    evals = xr.Dataset(
        {
            "x": (("evaluation", "feature"), X, {"long_name": "evaluated input"}),
            "y": ("evaluation", y, {"long_name": "objective value as returned (NaN/inf kept)"}),
            "finite": ("evaluation", finite),
            "initial": ("evaluation", np.arange(n) < n0),
            "y_model": (
                "evaluation",
                y_model,
                {"long_name": "value modelled (non-finite replaced by the worst finite value so far)"},
            ),
            "best_so_far": ("evaluation", bsf, {"long_name": "smallest finite value so far"}),
        },
        coords={"evaluation": np.arange(n), "feature": [f"x{j + 1}" for j in range(d)]},
    )
    if optimum is not None and np.isfinite(optimum):
        evals["simple_regret"] = ("evaluation", simple_regret(np.where(finite, y, np.inf), optimum))
        evals["simple_regret"] = evals["simple_regret"].where(np.isfinite(evals["simple_regret"]))
        evals["cumulative_regret"] = (
            "evaluation",
            cumulative_regret(y_model, optimum),
            {"long_name": "cumulative regret of the modelled values"},
        )
    return evals


class StepRecorder:
    """Collects the per-step records of a BO run and builds its output tree.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.bo.record import StepRecorder, STEP_FIELDS
    >>> rec = StepRecorder()
    >>> rec.record(**{k: 0.5 for k in STEP_FIELDS if k != "lengthscale"}, lengthscale=[1.0])
    >>> len(rec)
    1
    """

    def __init__(self) -> None:
        self.values: dict[str, list] = {k: [] for k in STEP_FIELDS}
        self.intervals: dict[str, list] = {k: [] for k in INTERVAL_FIELDS}
        self.states: list[xr.Dataset] = []

    def __len__(self) -> int:
        return len(self.values["pit"])

    def record(self, **fields: Any) -> None:
        """Append one step; every name of :data:`STEP_FIELDS` must be given."""
        missing = set(STEP_FIELDS) - set(fields)
        unknown = set(fields) - set(STEP_FIELDS)
        if missing or unknown:
            raise ValueError(
                f"a step record needs exactly the fields {sorted(STEP_FIELDS)}; "
                f"missing {sorted(missing)}, unknown {sorted(unknown)}."
            )
        for key, val in fields.items():
            self.values[key].append(val)

    def record_interval(self, **fields: Any) -> None:
        """Append the interval issued at this step and whether it covered (every name of :data:`INTERVAL_FIELDS`)."""
        if set(fields) != set(INTERVAL_FIELDS):
            raise ValueError(
                f"an interval record needs exactly the fields {sorted(INTERVAL_FIELDS)}; got {sorted(fields)}."
            )
        for key, val in fields.items():
            self.intervals[key].append(float(val))

    def record_state(self, state: xr.Dataset | None) -> None:
        """Append the recalibrator state used at this step (``None``: not recalibrated)."""
        if state is not None:
            self.states.append(state)

    def array(self, key: str) -> np.ndarray:
        """The recorded values of ``key`` over steps, with the field's dtype."""
        return np.asarray(self.values[key], STEP_FIELDS[key][0])

    def steps_dataset(self, feature: Any, n0: int, sharp: bool) -> xr.Dataset:
        """Group ``steps`` (dim ``step`` = 1..T), with running calibration errors."""
        T = len(self)
        data: dict[str, tuple] = {"evaluation": ("step", n0 + np.arange(T))}
        for key in ("forecast_mean", "forecast_std", "pit", "pit_base"):
            data[key] = ("step", self.array(key), STEP_FIELDS[key][1])
        data["calibration_error"] = (
            "step",
            running_ece(self.array("pit")),
            {"long_name": "running ECE (mean over 21 levels) of pit, steps 1..t"},
        )
        data["calibration_error_base"] = ("step", running_ece(self.array("pit_base")))
        for key in ("acquisition_value", "refit"):
            data[key] = ("step", self.array(key))
        data["lengthscale"] = (("step", "feature"), self.array("lengthscale").reshape(T, len(feature)))
        for key in STEP_FIELDS:
            if key not in data and key not in _NOT_IN_STEPS:
                data[key] = ("step", self.array(key))
        steps = xr.Dataset(data, coords={"step": np.arange(1, T + 1), "feature": feature})
        if self.intervals["covered"]:
            for key, attrs in INTERVAL_FIELDS.items():
                steps[key] = ("step", np.asarray(self.intervals[key], float), attrs)
        if sharp:
            steps["sharp_fitted"] = ("step", self.array("sharp_fitted"), STEP_FIELDS["sharp_fitted"][1])
        return steps

    def recalibrator_dataset(self) -> xr.Dataset | None:
        """Group ``recalibrator`` (dims ``step``, ``level``), or ``None`` when never recalibrated."""
        if not self.states:
            return None
        n_upd = [int(r.attrs["n_updates"]) for r in self.states]
        rs = xr.concat(self.states, dim="step", combine_attrs="drop_conflicts")
        rs["n_updates"] = ("step", np.asarray(n_upd, int), {"long_name": "outcomes the recalibrator has seen"})
        rs = rs.assign_coords(step=np.arange(1, len(self) + 1))
        rs["n_calibration"] = ("step", self.array("n_calibration"))
        return rs

    def to_datatree(self, X: Any, y: Any, n0: int, optimum: float | None, settings: dict) -> xr.DataTree:
        """The result of :func:`calibprob.bo.minimize` (see its Returns section)."""
        evals = evaluations_dataset(np.asarray(X), np.asarray(y, float), n0, optimum)
        attrs = {
            **settings,
            "title": "calibprob Bayesian optimisation run",
            "reference": "Deshpande, Marx & Kuleshov (2024), AISTATS",
        }
        tree = {
            "/": xr.Dataset(attrs=attrs),
            "evaluations": evals,
            "steps": self.steps_dataset(evals["feature"].values, n0, settings["acquisition"] == "sharp-ucb"),
        }
        recalibrator = self.recalibrator_dataset()
        if recalibrator is not None:
            tree["recalibrator"] = recalibrator
        return xr.DataTree.from_dict(tree)
