"""What a file must pass before it is read: the HDF5 signature, no raw bytes anywhere, a readable format version."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from calibprob._core.persistence.format import _PICKLE_MAGIC, HDF5_SIGNATURE


def _check_file(path: Path) -> None:
    if not path.exists():
        raise FileNotFoundError(f"no such file: '{path}'. Pass the path given to estimator.save(path){_near(path)}.")
    if path.is_dir():
        raise IsADirectoryError(f"'{path}' is a directory; pass the .nc file written by save().")
    with open(path, "rb") as fh:
        head = fh.read(8)
    if head != HDF5_SIGNATURE:
        hint = ""
        if head[:3] == b"CDF":
            hint = (
                " It is a netCDF-3 file; calibprob writes netCDF-4. An OnlineQuantileRecalibrator state "
                "saved by to_dataset() loads with OnlineQuantileRecalibrator.from_dataset("
                "xarray.open_dataset(path))."
            )
        elif _PICKLE_MAGIC.match(head) or head[:1] in (b"(", b"]", b"}", b"c"):
            hint = (
                " It looks like a pickle: calibprob never unpickles (unpickling runs code from the "
                "file). Refit, then save with estimator.save(path)."
            )
        raise ValueError(
            f"'{path}' is not a calibprob file: it does not start with the HDF5/netCDF-4 signature "
            f"(first bytes {head!r}).{hint}"
        )


def _near(path: Path) -> str:
    """Where to look instead of a missing file: the ``.nc`` files of its folder, or the folder's absence."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        return f"; the folder '{folder}' does not exist either (the working directory is '{Path.cwd()}')"
    found = sorted(p.name for p in folder.glob("*.nc"))
    if not found:
        return f"; the folder '{folder}' holds no .nc file"
    more = f" and {len(found) - 5} more" if len(found) > 5 else ""
    return f"; .nc files in the folder '{folder}': {', '.join(found[:5])}{more}"


_REFUSE = (
    "which calibprob never writes — a pickled payload, for instance. calibprob never unpickles; "
    "the file was not written by calibprob.save or has been tampered with. Load only files written "
    "by estimator.save(path); if this one was, it has been altered since: refit the estimator and "
    "save it again."
)


def _binary_text(text: str) -> bool:
    """Undecodable bytes (surrogate-escaped), NULs or a pickle header smuggled in as a string."""
    return bool(re.search("[\udc80-\udcff\x00]", text)) or bool(re.match("\x80[\x01-\x05]", text))


def _binary_array(values: np.ndarray) -> bool:
    kind = values.dtype.kind
    if kind in "SVa":
        return True
    if kind == "O":
        return any(not isinstance(v, str) or _binary_text(v) for v in values.ravel())
    if kind == "U":
        return any(_binary_text(str(v)) for v in values.ravel())
    if values.dtype.itemsize == 1 and kind in "iu" and values.size >= 2:
        raw = values.tobytes()  # a pickle stored as bytes-as-numbers: PROTO header ... STOP
        return bool(_PICKLE_MAGIC.match(raw)) and raw.endswith(b".")
    return False


def _check_no_bytes(groups: dict) -> None:
    """Refuse raw bytes anywhere: a pickled payload would hide there (calibprob writes none)."""
    for gpath, ds in groups.items():
        items = [(f"{gpath} attribute {k!r}", v) for k, v in ds.attrs.items()]
        for name, var in ds.variables.items():
            items += [(f"{gpath} variable {name!r} attribute {k!r}", v) for k, v in var.attrs.items()]
            if _binary_array(np.asarray(var.values)):
                raise ValueError(
                    f"refusing to load: {gpath} variable {name!r} holds raw bytes (dtype {var.dtype}), " + _REFUSE
                )
        for where, v in items:
            if (
                isinstance(v, (bytes, np.bytes_, np.void))
                or (isinstance(v, str) and _binary_text(v))
                or (isinstance(v, np.ndarray) and _binary_array(v))
            ):
                raise ValueError(f"refusing to load: {where} holds raw bytes, " + _REFUSE)


def _parse_version(text: Any, path: Any) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)\.(\d+)", str(text))
    if m is None:
        raise ValueError(f"'{path}' has an unreadable calibprob_format {text!r}; it was not written by calibprob.save.")
    return int(m.group(1)), int(m.group(2))
