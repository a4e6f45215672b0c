"""Tiny user models for the ``pymc-model`` and ``bambi`` base tests (importable by a spec's ``entry``)."""

from __future__ import annotations

import numpy as np
import pandas as pd


class GroupInputs:
    """``rows -> {container: values}``: ``x`` as is, the text column ``g`` by the training levels (unseen: 0)."""

    def __init__(self, levels):
        self.levels = list(levels)

    def __call__(self, rows: pd.DataFrame) -> dict:
        code = {name: k for k, name in enumerate(self.levels)}
        return {
            "x": rows["x"].to_numpy(dtype=float),
            "g_idx": np.asarray([code.get(str(v), 0) for v in rows["g"]], dtype=np.int64),
        }


def group_shift(data: pd.DataFrame, y: np.ndarray):
    """``y ~ Normal(a[g] + b x, s)`` with a text group ``g``: returns ``(model, inputs)``."""
    import pymc as pm

    inputs = GroupInputs(sorted(map(str, data["g"].unique())))
    start = inputs(data)
    with pm.Model(coords={"g": inputs.levels}) as model:
        x = pm.Data("x", start["x"])
        g = pm.Data("g_idx", start["g_idx"])
        a = pm.Normal("a", 0.0, 3.0, dims="g")
        b = pm.Normal("b", 0.0, 3.0)
        s = pm.HalfNormal("s", 2.0)
        pm.Normal("y", a[g] + b * x, s, observed=y, shape=x.shape[0])
    return model, inputs


def linear_x(data: pd.DataFrame, y: np.ndarray):
    """``y ~ Normal(b x, s)``: the container ``x`` is the column of the same name (no inputs function)."""
    import pymc as pm

    with pm.Model() as model:
        x = pm.Data("x", data["x"].to_numpy(dtype=float))
        b = pm.Normal("b", 0.0, 3.0)
        s = pm.HalfNormal("s", 2.0)
        pm.Normal("y", b * x, s, observed=y, shape=x.shape[0])
    return model


def no_data(data: pd.DataFrame, y: np.ndarray):
    """A model whose input is a constant, not a ``pm.Data`` container: refused."""
    import pymc as pm

    with pm.Model() as model:
        b = pm.Normal("b", 0.0, 3.0)
        pm.Normal("y", b * data["x"].to_numpy(dtype=float), 1.0, observed=y)
    return model


def not_a_model(data: pd.DataFrame, y: np.ndarray):
    """Returns the data, not a model: refused."""
    return data
