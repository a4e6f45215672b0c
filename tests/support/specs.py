"""Small comparison specs and CSV files for the spec, executor and command-line tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr


def spec_dict(**over):
    """A valid two-repetition spec on 40 Branin points (OLS base, isotonic), with ``over`` replacing top-level keys."""
    spec = {
        "name": "r",
        "datasets": [{"name": "branin", "function": "branin", "n": 40, "noise": 0.3}],
        "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
        "repetitions": 2,
        "seed": 3,
        "base": {"kind": "ols"},
        "methods": {"b": {"kind": "base"}, "iso": {"kind": "isotonic", "extrapolate": True}},
        "confidence_level": [0.5, 0.9],
    }
    spec.update(over)
    return spec


def write_csv(path: Path, n: int = 30, seed: int = 0, *, text: bool = False) -> Path:
    """A seeded linear CSV (x1, x2, y), with a three-level text column ``soil`` if ``text``."""
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    frame = pd.DataFrame({"x1": x1, "x2": x2, "y": 1.0 + 2.0 * x1 - x2 + 0.3 * rng.normal(size=n)})
    if text:
        frame["soil"] = np.array(["clay", "loam", "sand"])[np.arange(n) % 3]
    frame.to_csv(path, index=False)
    return path


def csv_spec(tmp_path, **entry):
    """:func:`spec_dict` on the one CSV entry ``d.csv`` (target y), with ``entry`` keys added."""
    return spec_dict(datasets=[{"name": "mine", "path": "d.csv", "target": "y", **entry}])


def metrics_of(path):
    """The results Dataset of a comparison file, loaded and closed."""
    tree = xr.open_datatree(path, engine="h5netcdf")
    ds = tree.to_dataset().load()
    tree.close()
    return ds


def spec_file(folder: Path, **over) -> Path:
    """``spec_dict(**over)`` written as a TOML file ``folder/spec.toml`` (for the command line)."""
    spec = spec_dict(**over)
    lines = [
        f'name = "{spec["name"]}"',
        f"repetitions = {spec['repetitions']}",
        f"seed = {spec['seed']}",
        f"confidence_level = {json.dumps(spec['confidence_level'])}",
        "datasets = ["
        + ", ".join("{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in d.items()) + "}" for d in spec["datasets"])
        + "]",
        "[split]",
        *(f"{k} = {v}" for k, v in spec["split"].items()),
        "[base]",
        *(f"{k} = {json.dumps(v)}" for k, v in spec["base"].items()),
    ]
    for name, m in spec["methods"].items():
        lines += [f"[methods.{name}]", *(f"{k} = {json.dumps(v)}" for k, v in m.items())]
    path = folder / "spec.toml"
    path.write_text("\n".join(lines) + "\n")
    return path
