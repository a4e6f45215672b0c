"""The data sets of a comparison spec: bundled names, CSV files and synthetic functions.

Each entry is checked when the spec is loaded: its keys, its columns, missing values, a non-constant
target, enough rows for every part of the split, the exact-GP size cap and the file's content hash.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Collection, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from calibprob._core.options import (
    AnyOf,
    Bool,
    Choice,
    Float,
    Int,
    ListOf,
    SpecError,
    Str,
    _check_keys,
    _short,
    _suggest,
)
from calibprob._core.validation import describe_unreadable_path
from calibprob.compare.spec.feedback import design_features, feedback_twins, parse_feedback
from calibprob.compare.spec.model import (
    _CSV_KEYS,
    _FUNCTION_KEYS,
    DATASET_KEYS,
    LIMITS,
    MIN_PART_ROWS,
    SPLIT_KEYS,
    DatasetSpec,
    _capped,
    _limit,
    file_sha256,
)
from calibprob.compare.spec.shift import parse_shift, shifted_copy
from calibprob.datasets import available_datasets, available_functions, load_csv
from calibprob.datasets.functions import get_function
from calibprob.datasets.loaders import _resolve
from calibprob.datasets.splits import _allocate
from calibprob.runs import safe_name
from calibprob.transforms import transform_target


def _check_rows(n: int, split: dict, where: str) -> None:
    """Every part of the split gets at least MIN_PART_ROWS of the n rows."""
    if split.get("kind") == "time":
        try:
            time_split_counts(split, n, where)
        except ValueError as err:
            raise SpecError(str(err)) from None
        return
    names = [k for k in SPLIT_KEYS if k in split]
    counts = _allocate(n, np.asarray([split[k] for k in names], dtype=float))
    if counts.min() < MIN_PART_ROWS:
        needed = int(math.ceil(MIN_PART_ROWS / min(split[k] for k in names) - 1e-9))
        sizes = ", ".join(f"{k} {int(c)}" for k, c in zip(names, counts))
        raise SpecError(
            f"{where} has {n} rows, too few for the split ({sizes}): every part needs at least "
            f"{MIN_PART_ROWS}. Use at least {needed} rows or larger fractions."
        )


def _check_gp_size(n: int, split: dict, base_kind: str, where: str) -> None:
    if base_kind != "gp":
        return
    cap = _limit("gp_train")
    n_train = int(round(n * split["train"]))
    if n_train > cap:
        var = LIMITS["gp_train"][0]
        raise SpecError(
            f"{where}: {n_train} training rows for an exact GP base (its {n_train} x {n_train} "
            f"covariance needs about {3 * 8 * n_train**2 / 2**30:.0f} GiB) exceed the cap of {cap}. "
            f'Use kind = "sparse-gp", a subsample = ... of rows, or raise the cap with {var}=N.'
        )


def _bundled_sha256(name: str) -> str:
    ref = resources.files("calibprob.datasets").joinpath("data", _resolve(name).file)
    return hashlib.sha256(ref.read_bytes()).hexdigest()


def _check_sha(entry: dict, actual: str, where: str, what: str) -> None:
    if "sha256" in entry:
        Str().check(entry["sha256"], f"{where}.sha256")
        if entry["sha256"] != actual:
            raise SpecError(
                f"{where}.sha256 = {entry['sha256']!r} does not match the content hash of {what} "
                f"({actual}): the file changed. Update the key or remove it."
            )


def _check_name(name: object, where: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise SpecError(f"{where} must be a non-empty string (used as the dataset coordinate); got {_short(name)}.")
    return name


def _parse_datasets(
    value: object, root: Path, split: dict, seed: int, base_kind: str, target_transform: str | None = None
) -> tuple[DatasetSpec, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise SpecError(
            'datasets must be a non-empty list, e.g. datasets = ["boston"] or '
            '[{name = "mine", path = "data.csv", target = "y"}].'
        )
    bundled = available_datasets()
    out = []
    for i, entry in enumerate(value):
        where = f"datasets[{i}]"
        if isinstance(entry, str):
            out.append(_parse_bundled_name(entry, bundled, split, base_kind, where))
            _check_stratify(split, "bundled", entry, entry, root, where)
            continue
        if not isinstance(entry, dict):
            raise SpecError(f"{where} must be a bundled name or a table; got {_short(entry)}.")
        name, kind = _dataset_entry_kind(entry, where)
        own_split = _dataset_own_split(entry, kind, where)
        eff_split = own_split or split
        if kind == "csv":
            out.append(
                _parse_csv_entry(entry, name, root, own_split, eff_split, seed, base_kind, where, target_transform)
            )
        elif kind == "function":
            out.append(_parse_function_entry(entry, name, own_split, eff_split, base_kind, where))
        else:
            out.append(_parse_bundled_entry(entry, name, bundled, own_split, eff_split, base_kind, where))
        _check_stratify(eff_split, kind, name, entry, root, where)
        if "permute" in entry:
            seed_ = Int(0, 2**32 - 1).check(entry["permute"], f"{where}.permute")
            out.append(dataclasses.replace(out.pop(), permute=seed_))
        out.extend(_with_shift(out.pop(), entry, kind, root, where))
        out.extend(_with_feedback(out.pop(), entry, where))
    _check_dataset_names([d.name for d in out])
    return tuple(out)


def _with_shift(d: DatasetSpec, entry: dict, kind: str, root: Path, where: str) -> list[DatasetSpec]:
    """``[d]``, or ``[d, its shifted twin]`` when the entry declares a ``shift`` table (``spec/shift.py``)."""
    if "shift" not in entry:
        return [d]
    if kind == "csv":
        path = Path(str(d.path))
        with (path if path.is_absolute() else root / path).open("r", encoding="utf-8") as fh:
            names = [str(c) for c in pd.read_csv(fh, nrows=0).columns]
        columns = (names, str(d.target))
    else:
        columns = _bundled_columns(d.name)
    d = dataclasses.replace(d, shift=parse_shift(entry, columns, where))
    return [d, shifted_copy(d)]


#: Keys a ``feedback`` entry refuses: its rows are the design pool as the file has them, and it is not split.
_NOT_WITH_FEEDBACK = {
    "split": "the entry is not split (n_train rows are drawn per repetition, the test row is designed)",
    "shift": "the designed test row is the shift",
    "groups": "the feedback-conformal sets are not grouped",
    "permute": "the rows are drawn at random already",
    "time": "the rows are a pool, not a series",
    "subsample": "the pool is every row of the file",
    "dropna": "the pool is every row of the file (drop the rows in the file itself)",
}


def _with_feedback(d: DatasetSpec, entry: dict, where: str) -> list[DatasetSpec]:
    """``[d]``, or one twin per ``lambda`` when the entry declares a ``feedback`` table (``spec/feedback.py``)."""
    if "feedback" not in entry:
        return [d]
    for key, why in _NOT_WITH_FEEDBACK.items():
        if entry.get(key) not in (None, False):
            raise SpecError(f"{where}.feedback cannot go with {key}: {why}. Drop {key}.")
    path = Path(str(d.path))
    names = [str(c) for c in pd.read_csv(path, nrows=0).columns]
    data = load_csv(path, str(d.target), features=list(d.features) if d.features else None,
                    exclude=list(d.exclude) if d.exclude else None,
                    one_hot=list(d.one_hot) if isinstance(d.one_hot, tuple) else bool(d.one_hot))  # fmt: skip
    fb = parse_feedback(entry, names, str(d.target), int(data.sizes["feature"]), where)
    assert fb is not None  # the entry has the key
    try:
        design_features(data["X"].values, fb["model"], where)
    except ValueError as err:
        raise SpecError(str(err)) from None
    return feedback_twins(dataclasses.replace(d, feedback=fb))


def _feedback_exclude(entry: dict, path: Path, target: str, features: Any, exclude: Any, where: str) -> Any:
    """``exclude`` with a feedback table's ``label_sd`` column added (the noise SDs are not an input).

    A ``label_sd`` that is not a column, or is the target, is left to :func:`parse_feedback` to refuse.
    """
    table = entry.get("feedback")
    column = table.get("label_sd") if isinstance(table, dict) else None
    if not isinstance(column, str) or column == target or column not in pd.read_csv(path, nrows=0).columns:
        return exclude
    if features is not None:
        if column in features:
            raise SpecError(
                f"{where}.features lists {column!r}, the feedback table's label_sd (each row's noise SD): it is "
                "not an input. Remove it from features."
            )
        return exclude
    return tuple(dict.fromkeys([*(exclude or ()), column]))


def _parse_bundled_name(entry: str, bundled: Collection[str], split: dict, base_kind: str, where: str) -> DatasetSpec:
    """A data set given by its bundled name alone (``datasets = ["boston"]``)."""
    if entry not in bundled:
        raise SpecError(
            f"{where} = {entry!r} is not a bundled data set. Valid names: "
            f"{', '.join(sorted(bundled))}; for your own data use "
            '{name = ..., path = "file.csv", target = "column"}.' + _suggest(entry, bundled)
        )
    _check_gp_size(_bundled_rows(entry), split, base_kind, where)
    return DatasetSpec(name=entry, sha256=_bundled_sha256(entry))


def _dataset_entry_kind(entry: dict, where: str) -> tuple[str, str]:
    """The entry's name and kind (``"csv"``, ``"function"`` or ``"bundled"``); keys of another kind are refused."""
    _check_keys(entry, DATASET_KEYS, where)
    if "name" not in entry:
        raise SpecError(f"{where} needs a 'name' key (used as the dataset coordinate).")
    name = _check_name(entry["name"], f"{where}.name")
    if "path" in entry and "function" in entry:
        raise SpecError(f"{where} has both 'path' (a CSV) and 'function' (synthetic); keep one.")
    kind = "csv" if "path" in entry else "function" if "function" in entry else "bundled"
    allowed = {"csv": _CSV_KEYS | {"time"}, "function": _FUNCTION_KEYS, "bundled": set()}[kind] | {
        "name",
        "split",
        "sha256",
    }
    if kind != "function":
        allowed = allowed | {"groups", "shift", "permute"}
    if kind == "csv":
        allowed = allowed | {"feedback"}
    for key in entry:
        if key == "feedback" and key not in allowed:
            raise SpecError(
                f"{where}.feedback draws rows from a CSV file's pool with its noise column, so it applies to CSV "
                "entries (with 'path' and 'target') only."
            )
        if key == "shift" and key not in allowed:
            raise SpecError(
                f"{where}.shift tilts named data columns, so it applies to bundled and CSV entries only; a synthetic "
                "entry has no such column."
            )
        if key == "permute" and key not in allowed:
            raise SpecError(
                f"{where}.permute shuffles the rows of a data file, so it applies to bundled and CSV entries only; a "
                "synthetic entry's rows are drawn independently already."
            )
        if key == "groups" and key not in allowed:
            raise SpecError(
                f"{where}.groups names a data column, so it applies to bundled and CSV entries only; a synthetic "
                "entry has no such column."
            )
        if key not in allowed:
            applies = (
                "CSV entries (with 'path')" if key in _CSV_KEYS | {"time"} else "synthetic entries (with 'function')"
            )
            raise SpecError(f"{where}.{key} applies only to {applies}; this entry is a {kind} entry.")
    return name, kind


def _dataset_own_split(entry: dict, kind: str, where: str) -> dict | None:
    """The entry's own ``split`` (row counts allowed for synthetic entries of known size), or None."""
    if "split" not in entry:
        return None
    n_for_counts = entry.get("n")
    if kind == "function" and isinstance(n_for_counts, int) and not isinstance(n_for_counts, bool):
        return _parse_dataset_split(entry["split"], n_for_counts, f"{where}.split")
    return _parse_split(entry["split"], f"{where}.split")


def _parse_function_entry(
    entry: dict, name: str, own_split: dict | None, eff_split: dict, base_kind: str, where: str
) -> DatasetSpec:
    """A synthetic data set: ``{name, function, n, dim, noise, design}``."""
    functions = available_functions()
    fn = entry["function"]
    if not isinstance(fn, str) or fn not in functions:
        raise SpecError(
            f"{where}.function = {_short(fn)} is unknown.{_suggest(fn, functions)} Valid: {', '.join(sorted(functions))}."
        )
    if "n" not in entry:
        raise SpecError(f"{where} needs 'n' (the design size), e.g. n = 200.")
    n = Int(4, None).check(entry["n"], f"{where}.n")
    _capped("n", n, f"{where}.n")
    dim = entry.get("dim")
    if dim is not None:
        Int(1, None).check(dim, f"{where}.dim")
        _capped("dim", dim, f"{where}.dim")
    try:
        get_function(fn, dim)
    except (ValueError, TypeError) as err:
        raise SpecError(f"{where}.dim: {err}") from None
    noise = Float(0, None).check(entry.get("noise", 0.0), f"{where}.noise")
    design = Choice(("uniform", "lhs", "sobol")).check(entry.get("design", "uniform"), f"{where}.design")
    _check_rows(n, eff_split, where)
    _check_gp_size(n, eff_split, base_kind, where)
    return DatasetSpec(name=name, function=fn, n=n, dim=dim, noise=float(noise), design=design, split=own_split)


def _parse_bundled_entry(
    entry: dict,
    name: str,
    bundled: Collection[str],
    own_split: dict | None,
    eff_split: dict,
    base_kind: str,
    where: str,
) -> DatasetSpec:
    """A bundled data set given as a table (its own split or a pinned ``sha256``)."""
    if name not in bundled:
        raise SpecError(
            f"{where} = {name!r} is neither bundled nor has 'path' or 'function'.{_suggest(name, bundled)} Give a bundled name "
            "(calibprob.datasets.list_datasets()), or a table with 'path' and 'target'."
        )
    sha = _bundled_sha256(name)
    _check_sha(entry, sha, where, f"the bundled file of {name!r}")
    _check_rows(_bundled_rows(name), eff_split, where)
    _check_gp_size(_bundled_rows(name), eff_split, base_kind, where)
    groups = _parse_groups(entry, _bundled_columns(name), where)
    return DatasetSpec(name=name, split=own_split, sha256=sha, groups=groups)


def _bundled_columns(name: str) -> tuple[list[str], str]:
    """The bundled file's columns (the raw ones, before one-hot encoding) and its target."""
    ref = resources.files("calibprob.datasets").joinpath("data", _resolve(name).file)
    with ref.open("r", encoding="utf-8") as fh:
        columns = [str(c) for c in pd.read_csv(fh, nrows=0).columns]
    return columns, columns[-1]


def _parse_groups(entry: dict, columns: tuple[list[str], str], where: str) -> str | None:
    """The entry's ``groups`` column, checked against the file's columns (not the target)."""
    if "groups" not in entry:
        return None
    value = Str().check(entry["groups"], f"{where}.groups")
    names, target = columns
    if value not in names:
        raise SpecError(
            f"{where}.groups = {value!r} is not a column of the data.{_suggest(value, names)} Columns: "
            f"{', '.join(names)}."
        )
    if value == target:
        raise SpecError(f"{where}.groups = {value!r} is the target; name a feature column (e.g. a category).")
    return value


def _check_dataset_names(names: list[str]) -> None:
    """Data set names are unique, also once made file-name safe (they name part and plot files)."""
    if len(set(names)) != len(names):
        raise SpecError(f"dataset names must be unique; got {names}.")
    safe: dict = {}
    for n in names:
        s = safe_name(n)
        if s in safe:
            raise SpecError(
                f"dataset names {safe[s]!r} and {n!r} are the same once made file-name safe ({s!r}, used for "
                "part and plot files); rename one (letters, digits, '-' and '_' are kept as they are)."
            )
        safe[s] = n


def _bundled_rows(name: str) -> int:
    return _resolve(name).rows


def _csv_columns(entry: dict, where: str) -> tuple[Any, Any, Any, bool | None, int | None]:
    """A CSV entry's column choices: ``(features, exclude, one_hot, dropna, subsample)``, each checked."""
    cols = ListOf(Str())
    features = tuple(cols.check(entry["features"], f"{where}.features")) if "features" in entry else None
    exclude = tuple(cols.check(entry["exclude"], f"{where}.exclude")) if "exclude" in entry else None
    if features is not None and exclude is not None:
        raise SpecError(f"{where} has both 'features' (columns to use) and 'exclude' (columns to drop); keep one.")
    one_hot = None
    if "one_hot" in entry:
        one_hot = AnyOf((Bool(), ListOf(Str()))).check(entry["one_hot"], f"{where}.one_hot")
        one_hot = tuple(one_hot) if isinstance(one_hot, list) else one_hot
    dropna = Bool().check(entry["dropna"], f"{where}.dropna") if "dropna" in entry else None
    subsample = Int(1, None).check(entry["subsample"], f"{where}.subsample") if "subsample" in entry else None
    return features, exclude, one_hot, dropna, subsample


def _parse_csv_entry(
    entry: dict,
    name: str,
    root: Path,
    own_split: dict | None,
    eff_split: dict,
    seed: int,
    base_kind: str,
    where: str,
    target_transform: str | None = None,
) -> DatasetSpec:
    raw = Str().check(entry["path"], f"{where}.path")
    path = Path(raw)
    path = path if path.is_absolute() else root / path
    problem = describe_unreadable_path(path, "CSV file")
    if problem is not None:
        raise SpecError(f"{where}.path: file {problem} Paths are relative to the spec file's folder.")
    if "target" not in entry:
        raise SpecError(f"{where} reads a CSV and needs 'target' (the column to predict).")
    target = Str().check(entry["target"], f"{where}.target")
    features, exclude, one_hot, dropna, subsample = _csv_columns(entry, where)
    exclude = _feedback_exclude(entry, path, target, features, exclude, where)
    time = None
    if "time" in entry:
        time = _parse_time_column(entry, path, target, features, where)
        exclude = None if features is not None else tuple(dict.fromkeys([*(exclude or ()), time]))
    try:
        sha = file_sha256(path)
    except OSError as err:
        raise SpecError(
            f"{where}.path: cannot read {str(path)!r} ({err.strerror or err}). Check its permissions."
        ) from None
    _check_sha(entry, sha, where, path.name)
    try:
        data = load_csv(
            path,
            target,
            features=list(features) if features else None,
            exclude=list(exclude) if exclude else None,
            one_hot=list(one_hot) if isinstance(one_hot, tuple) else bool(one_hot),
            dropna=bool(dropna),
            subsample=subsample,
            seed=seed,
            groups=Str().check(entry["groups"], f"{where}.groups") if "groups" in entry else None,
        )
    except (ValueError, TypeError, OSError) as err:
        raise SpecError(f"{where} ({path.name}): {err}") from None
    n = int(data.sizes["obs"])
    _check_rows(n, eff_split, where)
    y = data["y"].values
    if float(y.max() - y.min()) == 0.0:
        raise SpecError(
            f"{where}: the target column {target!r} of {path.name} is constant (every value {float(y[0])!r}); "
            "there is nothing to predict. Choose another target."
        )
    if target_transform is not None:
        _check_transform_domain(y, target_transform, f"{where} ({path.name}, column {target!r})")
    _check_gp_size(n, eff_split, base_kind, where)
    return DatasetSpec(
        name=name,
        path=str(path),
        target=target,
        split=own_split,
        features=features,
        exclude=exclude,
        one_hot=one_hot,
        dropna=dropna,
        subsample=subsample,
        sha256=sha,
        subsample_seed=seed if subsample is not None else None,
        groups=entry.get("groups"),
        time=time,
    )


def read_time_column(path: str | Path, column: str) -> np.ndarray:
    """A CSV column of times as ``datetime64`` (dates) or float (numbers), in file order."""
    raw = pd.read_csv(path, usecols=[column])[column]
    if pd.api.types.is_numeric_dtype(raw):
        return raw.to_numpy(float)
    return pd.to_datetime(raw).to_numpy()


def _parse_time_column(entry: dict, path: Path, target: str, features: Sequence[str] | None, where: str) -> str:
    """The entry's ``time`` column: present, not the target nor a feature, every row's time, strictly increasing."""
    column = Str().check(entry["time"], f"{where}.time")
    names = [str(c) for c in pd.read_csv(path, nrows=0).columns]
    if column not in names or column == target or (features is not None and column in features):
        what = "is the target" if column == target else "is a feature" if column in names else "is not a column"
        raise SpecError(
            f"{where}.time = {column!r} {what}.{_suggest(column, names)} Name the column of the rows' times (dates "
            "or numbers); it is read as the time coordinate, not as a feature."
        )
    for key in ("permute", "subsample"):  # dropna keeps the order, and each kept row keeps its own time (file_row)
        if entry.get(key) not in (None, False):
            raise SpecError(
                f"{where}.time reads the rows' times in file order; {key} reorders or subsamples rows. Drop {key} or "
                "time."
            )
    try:
        stamps = read_time_column(path, column)
    except (ValueError, TypeError) as err:
        raise SpecError(
            f"{where}.time = {column!r}: its values are neither numbers nor dates ({err}). Name a column of numbers "
            "or of dates such as 2020-01-31 or 2020-01-31 12:30."
        ) from None
    steps = np.diff(stamps)
    if pd.isna(stamps).any() or not (steps > np.zeros(1, steps.dtype)[0]).all():
        raise SpecError(
            f"{where}.time = {column!r}: the times must be strictly increasing, with no missing value (a time "
            "split reads the rows in file order); sort the file by time and drop duplicated or empty times."
        )
    return column


def _check_transform_domain(y: ArrayLike, transform: str, where: str) -> None:
    """Every target value inside the transform's domain, or a SpecError naming the count and the fix."""
    try:
        transform_target(y, transform, name="y")
    except ValueError as err:
        raise SpecError(f"{where}: {err}") from None


def _parse_dataset_split(value: object, n: int, where: str) -> dict:
    """A synthetic data set's own split: fractions, or integer counts summing to its ``n``."""
    if (
        isinstance(value, dict)
        and value
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value.values())
    ):
        _check_keys(value, SPLIT_KEYS, where)
        if any(v < 1 for v in value.values()) or sum(value.values()) != n:
            raise SpecError(
                f"{where}: counts {value} must be positive and sum to the data set's n = {n}; "
                "adjust n or the counts (or give fractions)."
            )
        value = {k: v / n for k, v in value.items()}
    return _parse_split(value, where)


#: The keys of a time-ordered split (``[split] kind = "time"``); ``refit_every``, ``slide`` and ``shuffle`` are optional.
TIME_SPLIT_KEYS = ("kind", "train", "burn_in", "horizon", "refit_every", "slide", "shuffle")
_TIME_PARTS = ("train", "burn_in", "horizon")


def _is_count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _time_sizes(value: dict, where: str) -> dict:
    """The three stretches as fractions in (0, 1) summing to at most 1, or as row counts (all integers)."""
    sizes = {k: value[k] for k in _TIME_PARTS}
    if all(_is_count(v) for v in sizes.values()):
        for k, v in sizes.items():
            if v < MIN_PART_ROWS:
                raise SpecError(
                    f"{where}.{k} = {v} rows is too short: each stretch needs at least {MIN_PART_ROWS} rows. "
                    "Give a larger count (or fractions of the rows)."
                )
        return {k: int(v) for k, v in sizes.items()}
    for k, v in sizes.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 < v < 1:
            hint = " (or give all three as row counts, e.g. train = 50, burn_in = 50, horizon = 3344)"
            raise SpecError(f"{where}.{k} must be a fraction in (0, 1){hint}; got {_short(v)}.")
    total = sum(float(v) for v in sizes.values())
    if total > 1.0 + 1e-9:
        raise SpecError(
            f"{where}: train + burn_in + horizon = {total:g} exceeds 1 (they are consecutive stretches of the rows). "
            "Shorten one of them."
        )
    return {k: float(v) for k, v in sizes.items()}


def _parse_time_split(value: dict, where: str) -> dict:
    """``kind = "time"``: train, burn-in and horizon stretches taken in row order (the data's time order).

    Each stretch is a fraction of the rows, or (all three integers) a number of rows. The parts are the
    random split's ``train``, ``calibrate`` (the burn-in) and ``test`` (the horizon)
    (``calibprob.compare.tasks``). Optional: ``refit_every = k`` refits the base on every earlier row
    before each block of ``k`` rows of the burn-in and the horizon (an expanding window), and
    ``slide = true`` (with ``refit_every``) makes that window slide: each refit trains on the
    train-length stretch ending a burn-in before the block, whose burn-in-length stretch renews the
    online methods' calibration (Zaffran et al. 2022's protocol; ``calibprob.compare.online``);
    ``shuffle = true`` draws the train and burn-in rows at random from their union (seeded per
    repetition; split conformal on a series as Xu & Xie 2021's "ICP"); ``shuffle = s`` (an integer)
    draws them as the authors' code does, ``numpy.random.RandomState(s + repetition)``
    (``calibprob.compare.tasks.legacy_train_rows``). The stored table is the one given, so it parses
    again as it is.
    """
    _check_keys(value, TIME_SPLIT_KEYS, where)
    missing = [k for k in _TIME_PARTS if k not in value]
    if missing:
        raise SpecError(
            f"{where} of kind 'time' needs {', '.join(repr(k) for k in missing)}: fractions (or row counts) of the "
            "rows, in order, that train the base, that the online method burns in on, and that it is scored on "
            "(e.g. train = 0.5, burn_in = 0.1, horizon = 0.4)."
        )
    out: dict = {"kind": "time", **_time_sizes(value, where)}
    if "refit_every" in value:
        out["refit_every"] = Int(1, None).check(value["refit_every"], f"{where}.refit_every")
    if "shuffle" in value:
        out["shuffle"] = _shuffle(value["shuffle"], f"{where}.shuffle")
    if "slide" in value:
        out["slide"] = Bool().check(value["slide"], f"{where}.slide")
        if out["slide"] and "refit_every" not in out:
            raise SpecError(
                f"{where}: slide = true slides the train and burn-in stretches along the stream at each refit, so it "
                "needs refit_every (e.g. refit_every = 1 for a daily refit)."
            )
    if out.get("shuffle", False) is not False and "refit_every" in out:
        raise SpecError(
            f"{where}: refit_every refits the base on every row before each step, which needs the train and burn-in "
            "stretches in time order; shuffle draws them at random. Keep one of the two."
        )
    return out


def _shuffle(value: object, where: str) -> bool | int:
    """A time split's ``shuffle``: true/false, or the seed of the legacy generator (an integer in [0, 2**32 - 2**16))."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and 0 <= value < 2**32 - 2**16:  # room for the repetitions' seeds s + r
        return value
    raise SpecError(
        f"{where} must be true, false or an integer seed in [0, {2**32 - 2**16}) (the legacy generator's seed of "
        f"the first repetition, e.g. shuffle = 98765 for Xu & Xie's trials); got {_short(value)}."
    )


def time_split_counts(split: dict, n: int, dataset: str) -> list[int]:
    """The rows of a time split's train, burn-in and horizon stretches in a data set of ``n`` rows.

    Raises
    ------
    ValueError
        A stretch shorter than ``MIN_PART_ROWS`` rows, or counts that exceed the data.
    """
    sizes = [split[k] if _is_count(split[k]) else int(round(n * split[k])) for k in _TIME_PARTS]
    named = dict(zip(_TIME_PARTS, sizes))
    if sum(sizes) > n:
        raise ValueError(
            f"data set {dataset!r}: its time split asks for {named} rows, {sum(sizes)} in all, but it has {n}. "
            "Shorten a stretch or use fractions."
        )
    if min(sizes) < MIN_PART_ROWS:
        raise ValueError(
            f"data set {dataset!r}: its time split gives {named} rows of {n}; each stretch needs at least "
            f"{MIN_PART_ROWS}. Lengthen the short stretch or use more rows."
        )
    return sizes


def _parse_split(value: object, where: str = "split") -> dict:
    """Fractions per part, and the optional ``stratify`` column (a string, checked per data set later)."""
    if not isinstance(value, dict):
        raise SpecError(f"{where} must be a table, e.g. [split] train = 0.6, calibrate = 0.2, test = 0.2.")
    if "kind" in value:
        if value["kind"] != "time":
            raise SpecError(
                f"{where}.kind must be 'time' (a time-ordered split); got {_short(value['kind'])}. Leave kind out "
                "for a random split."
            )
        return _parse_time_split(value, where)
    _check_keys(value, (*SPLIT_KEYS, "stratify"), where)
    stratify = Str().check(value["stratify"], f"{where}.stratify") if "stratify" in value else None
    value = {k: v for k, v in value.items() if k != "stratify"}
    if "train" not in value or "test" not in value:
        raise SpecError(f"{where} needs at least 'train' and 'test' fractions (and optionally 'calibrate').")
    for k, v in value.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 < v < 1:
            raise SpecError(f"{where}.{k} must be a fraction in (0, 1); got {_short(v)}.")
    total = sum(value.values())
    if abs(total - 1.0) > 1e-9:
        raise SpecError(
            f"{where} fractions must sum to 1; got {' + '.join(f'{k}={v}' for k, v in value.items())} = "
            f"{total:g}. Adjust them."
        )
    out = {k: float(value[k]) for k in SPLIT_KEYS if k in value}
    return out if stratify is None else {**out, "stratify": stratify}


def _check_stratify(
    split: dict,
    kind: str,
    name: str,
    entry: Any,
    root: Path,
    where: str,  # entry: a name, or a table (csv)
) -> None:
    """A split's ``stratify`` names a feature column of this data set (refused otherwise, with the columns)."""
    if "stratify" not in split:
        return
    value = split["stratify"]
    if kind == "function":
        raise SpecError(
            f"{where}: split.stratify = {value!r} names a data column, so it applies to bundled and CSV entries "
            "only; a synthetic entry has no such column. Give this entry its own split without stratify."
        )
    if kind == "csv":
        path = Path(entry["path"])
        names = [str(c) for c in pd.read_csv(path if path.is_absolute() else root / path, nrows=0).columns]
        target = entry["target"]
    else:
        names, target = _bundled_columns(name)
    if value not in names or value == target:
        what = "is the target" if value == target else "is not a column of the data"
        raise SpecError(
            f"{where}: split.stratify = {value!r} {what}.{_suggest(value, names)} Name a feature column "
            f"(e.g. a category); columns: {', '.join(n for n in names if n != target)}."
        )
