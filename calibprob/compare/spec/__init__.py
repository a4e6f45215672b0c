"""Comparison specs: TOML files in ``models/`` parsed into a validated :class:`Spec`.

A spec names data sets, a base model, the calibrators with their options, the
split, repetitions, seed, metrics and confidence levels. Everything is checked
when the spec is loaded, before the first task runs:

* every key is known (an unknown key gets a "did you mean");
* every option has a declared type, range or choice (declared in
  :mod:`calibprob.registry`): booleans must be ``true``/``false`` (never the
  string ``"false"``), integers integers, enums one of their values;
* sizes are capped (``n`` of a synthetic entry, ``repetitions``; see
  :data:`LIMITS`), the message saying how to raise a cap;
* CSV files are read and checked (encoding, byte-order mark, numeric columns,
  missing values, a non-constant target, enough rows for the split), and their
  content hash joins the fingerprint, so an edited file is never served from
  old results;
* data-set names stay distinct once made file-name safe.

Any problem raises :class:`SpecError` naming the key and the fix; no other
exception escapes :func:`parse_spec`.

Example (``models/quickstart.toml``)::

    name = "quickstart"
    datasets = ["boston"]
    repetitions = 3
    seed = 2026
    confidence_level = [0.5, 0.9, 0.95]

    [split]
    train = 0.6
    calibrate = 0.2
    test = 0.2

    [base]
    kind = "gp"

    [methods.vanilla]
    kind = "base"

Several bases are ``[bases.NAME]`` tables instead of ``[base]``: every method runs on
every base unless it lists ``bases = [...]``, the results gain a ``base`` dimension, and
a GP-only method (one registered with the base kinds it ``serves``) on a base that cannot serve it is refused.
"""

from __future__ import annotations

from typing import Any

from calibprob._core.options import (  # noqa: F401 (re-exported: the spec is these names' public home)
    AnyOf,
    Bool,
    Choice,
    Float,
    Int,
    ListOf,
    SpecError,
    Str,
)
from calibprob.compare.spec.model import (  # noqa: F401 (the spec's public names, re-exported)
    _VIEWS,
    DATASET_KEYS,
    DEFAULT_METRICS,
    LIMITS,
    MIN_PART_ROWS,
    SPLIT_KEYS,
    TARGET_TRANSFORMS,
    TOP_KEYS,
    DatasetSpec,
    MethodSpec,
    Spec,
    file_sha256,
    to_toml,
)
from calibprob.compare.spec.parsing import load_spec, parse_spec, toml_error_message  # noqa: F401

__all__ = [
    "Spec",
    "DatasetSpec",
    "MethodSpec",
    "SpecError",
    "load_spec",
    "parse_spec",
    "LIMITS",
    "BASE_OPTION_TYPES",  # noqa: F822  (a view of calibprob.registry, module __getattr__)
    "METHOD_OPTION_TYPES",  # noqa: F822
    "GP_ONLY_METHODS",  # noqa: F822
    "file_sha256",
]


def __getattr__(name: str) -> Any:
    """``BASE_KINDS``, ``BASE_OPTION_TYPES``, ``BASE_OPTIONS``, ``METHOD_OPTION_TYPES``, ``GP_ONLY_METHODS``."""
    if name in _VIEWS:
        return _VIEWS[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
