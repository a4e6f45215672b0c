"""Declared option types of the comparison spec, and the error every spec problem raises.

A registered base or calibrator declares the type of each of its options here
(:mod:`calibprob.registry`) so that a spec is validated without importing the
classes (and so without PyMC). ``check(value, where)`` returns the value or
raises :class:`SpecError` naming the key, the value and the fix. Public through
:mod:`calibprob.compare.spec`, which re-exports every name.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any, NoReturn

__all__ = ["SpecError", "Bool", "Int", "Float", "Str", "Choice", "AnyOf", "ListOf", "Theta", "Anything", "OptionType"]


class SpecError(ValueError):
    """A comparison spec that cannot be run; the message names the key and the fix.

    References
    ----------
    The comparison-spec reference: :doc:`/spec`.

    Examples
    --------
    >>> from calibprob.compare import SpecError, parse_spec
    >>> try:
    ...     parse_spec({"name": "x", "datasets": ["boston"], "split": {"train": 0.8, "test": 0.2},
    ...                 "base": {"kind": "gp"}, "methods": {"m": {"kind": "isotonik"}}})
    ... except SpecError as err:
    ...     print("isotonic" in str(err))    # the message suggests the valid kind
    True
    """


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Type:
    """A declared option type: ``check(value, where)`` returns the value or raises SpecError."""

    def check(self, value: Any, where: str) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def fail(self, value: Any, where: str, extra: str = "") -> NoReturn:
        raise SpecError(f"{where} must be {self.describe()}; got {_short(value)}.{extra}")


@dataclass(frozen=True)
class Bool(_Type):
    def describe(self) -> str:
        return "true or false (a TOML boolean, not a string)"

    def check(self, value: Any, where: str) -> Any:
        if not isinstance(value, bool):
            hint = ""
            if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no", "0", "1"):
                hint = f" Write {where.rsplit('.', 1)[-1]} = {str(value.strip().lower() in ('true', 'yes', '1')).lower()} without quotes."
            self.fail(value, where, hint)
        return value


@dataclass(frozen=True)
class Int(_Type):
    lo: int | None = None
    hi: int | None = None

    def describe(self) -> str:
        rng = (
            ""
            if self.lo is None and self.hi is None
            else f" >= {self.lo}"
            if self.hi is None
            else f" <= {self.hi}"
            if self.lo is None
            else f" in [{self.lo}, {self.hi}]"
        )
        return "an integer" + rng

    def check(self, value: Any, where: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(value, where)
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            self.fail(value, where)
        return value


@dataclass(frozen=True)
class Float(_Type):
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False

    def describe(self) -> str:
        if self.lo is None and self.hi is None:
            return "a finite number"
        if self.hi is None:
            return f"a finite number {'>' if self.lo_open else '>='} {self.lo:g}"
        if self.lo is None:
            return f"a finite number {'<' if self.hi_open else '<='} {self.hi:g}"
        return f"a number in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}{')' if self.hi_open else ']'}"

    def check(self, value: Any, where: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            self.fail(value, where)
        if self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo):
            self.fail(value, where)
        if self.hi is not None and (value >= self.hi if self.hi_open else value > self.hi):
            self.fail(value, where)
        return value


@dataclass(frozen=True)
class Str(_Type):
    def describe(self) -> str:
        return "a string"

    def check(self, value: Any, where: str) -> Any:
        if not isinstance(value, str):
            self.fail(value, where)
        return value


@dataclass(frozen=True)
class Choice(_Type):
    values: tuple

    def describe(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)

    def check(self, value: Any, where: str) -> Any:
        if not isinstance(value, str) or value not in self.values:
            hint = _suggest(value, self.values) if isinstance(value, str) else ""
            self.fail(value, where, hint)
        return value


@dataclass(frozen=True)
class AnyOf(_Type):
    options: tuple

    def describe(self) -> str:
        return " or ".join(o.describe() for o in self.options)

    def check(self, value: Any, where: str) -> Any:
        for o in self.options:
            try:
                return o.check(value, where)
            except SpecError:
                continue
        self.fail(value, where)


@dataclass(frozen=True)
class ListOf(_Type):
    item: _Type
    min_len: int = 1

    def describe(self) -> str:
        return f"a list (at least {self.min_len}) of {self.item.describe()}"

    def check(self, value: Any, where: str) -> Any:
        if not isinstance(value, list) or len(value) < self.min_len:
            self.fail(value, where)
        return [self.item.check(v, f"{where}[{i}]") for i, v in enumerate(value)]


@dataclass(frozen=True)
class Theta(_Type):
    """GP hyperparameters: a table {lengthscale, variance, noise} of positive numbers (lengthscale may be a list)."""

    def describe(self) -> str:
        return "a table {lengthscale = ..., variance = ..., noise = ...} of positive numbers"

    def check(self, value: Any, where: str) -> Any:
        if not isinstance(value, dict):
            self.fail(value, where)
        _check_keys(value, ("lengthscale", "variance", "noise"), where)
        pos = Float(0, None, lo_open=True)
        for k, v in value.items():
            if k == "lengthscale" and isinstance(v, list):
                ListOf(pos).check(v, f"{where}.{k}")
            elif k == "noise":
                Float(0, None).check(v, f"{where}.{k}")
            else:
                pos.check(v, f"{where}.{k}")
        return value


@dataclass(frozen=True)
class Anything(_Type):
    """Any value (options of kinds registered through the deprecated untyped decorator)."""

    def describe(self) -> str:
        return "any value"

    def check(self, value: Any, where: str) -> Any:
        return value


OptionType = _Type


def _suggest(key: Any, valid: Any) -> str:
    if not isinstance(key, str):
        return ""
    close = difflib.get_close_matches(key, [str(v) for v in valid], n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def _check_keys(table: dict, valid: Any, where: str) -> None:
    for key in table:
        if key not in valid:
            raise SpecError(
                f"unknown key {key!r} in {where}.{_suggest(key, valid)} Valid keys: "
                f"{', '.join(sorted(map(str, valid))) or '(none)'}."
            )
