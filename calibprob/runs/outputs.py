"""Output paths and parts: where a run writes, and which finished tasks a rerun may reuse.

Every finished task is kept in its own netCDF file under ``<out>.parts/`` so that a killed
run restarted with the same command computes only what is missing. What makes the reuse
trustworthy:

* **Fingerprint.** Every part carries the fingerprint of everything that
  changes its result (for ``compare`` the spec *and* a content hash of every
  input file); a part with another fingerprint is recomputed.
* **Identity and checksum.** A part also carries its own key (``task_key``)
  and a SHA-256 checksum of its data (:func:`content_checksum`). Before reuse
  the key, the part's coordinates and the checksum are checked, so a part
  copied over another task's name, or edited by hand, is recomputed.
* **Failures are recorded, then retried.** A task that raised is stored (so
  the results say why) with ``task_failed = 1`` and is run again by the next
  run instead of being served as finished.
* **One run per output.** ``<out>.lock`` is held (``fcntl.flock``) for the
  whole run: a second run on the same ``--out`` waits for the first, then
  finds every part finished and writes the same results. The lock is released
  by the kernel when its holder dies, so a killed run never leaves it stale.
  Temporary files carry the process id, so no two writers share one.
* **Safe outputs.** :func:`check_output_path` refuses devices, directories,
  existing files that are not netCDF and unwritable folders *before* any task
  runs; part names are sanitised (:func:`safe_name`) and resolved inside their
  folder.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Final, TextIO

import numpy as np
import xarray as xr

__all__ = [
    "OutputError",
    "safe_name",
    "inside",
    "is_netcdf",
    "check_output_path",
    "content_checksum",
    "write_atomic",
    "RunOutput",
    "store_part",
    "load_part",
    "default_part_name",
    "finished_parts",
]

_ENGINE: Final = "h5netcdf"  # Final: mypy reads it as the literal the writers accept

# The first bytes of the two netCDF flavours: HDF5 (netCDF-4) and classic CDF (netCDF-3).
_NETCDF_MAGIC = (b"\x89HDF\r\n\x1a\n", b"CDF\x01", b"CDF\x02", b"CDF\x05")


class OutputError(ValueError):
    """An output path that cannot (or must not) be written; the message names it and the fix."""


def safe_name(text: object) -> str:
    """A file-name-safe form of ``text``: letters, digits, ``-`` and ``_`` kept, anything else ``_``.

    Path separators, ``..``, spaces and control characters all become ``_``, so
    the result never leaves the folder it is joined to. Two names may collide
    after sanitising (``"a/b"`` and ``"a_b"``); callers reject such pairs.

    Parameters
    ----------
    text : object
        Converted with ``str``.

    Returns
    -------
    str
        Non-empty (an empty input becomes ``"_"``).

    Examples
    --------
    >>> from calibprob.runs import safe_name
    >>> safe_name("../../etc/passwd"), safe_name("Boston housing")
    ('______etc_passwd', 'Boston_housing')
    """
    out = "".join(c if (c.isascii() and c.isalnum()) or c in "-_" else "_" for c in str(text))
    return out or "_"


def inside(folder: Path, name: str) -> Path:
    """``folder / name`` after checking that it resolves to a direct child of ``folder``."""
    folder = Path(folder)
    path = folder / name
    if path.resolve().parent != folder.resolve():
        raise OutputError(f"file name {name!r} would leave its folder {str(folder)!r}; refusing to write it.")
    return path


def is_netcdf(path: Path) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(8)
    return any(head.startswith(m) for m in _NETCDF_MAGIC)


def check_output_path(out: str | os.PathLike[str], *, what: str = "--out") -> Path:
    """Check that ``out`` may be written as a results file, before any work is done.

    ``out`` must be a regular-file path in a writable folder (created if
    missing). An existing path must be a regular file that is empty or already
    netCDF: devices (``/dev/null``), directories, sockets and files of any other
    format are refused, never replaced. ``<out>.parts`` must be a folder if it
    exists. Nothing is written to ``out`` itself.

    Parameters
    ----------
    out : str or path-like
    what : str
        How the caller names the path in messages (``--out``, ``out``).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    OutputError
        Naming the path, what is wrong and the fix.

    Examples
    --------
    >>> from calibprob.runs import check_output_path, OutputError
    >>> try:
    ...     check_output_path("/dev/null")
    ... except OutputError as err:
    ...     print(str(err).split(";")[0])
    --out = '/dev/null' is a character device, not a regular file
    """
    if out is None or str(out) == "":
        raise OutputError(f"{what} must be a file path such as results/run.nc; got {out!r}.")
    out = Path(out)
    if out.exists():
        mode = os.stat(out).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a directory"
                if stat.S_ISDIR(mode)
                else "a character device"
                if stat.S_ISCHR(mode)
                else "a block device"
                if stat.S_ISBLK(mode)
                else "a FIFO"
                if stat.S_ISFIFO(mode)
                else "a socket"
                if stat.S_ISSOCK(mode)
                else "not a regular file"
            )
            raise OutputError(
                f"{what} = {str(out)!r} is {kind}, not a regular file; refusing to replace it. "
                f"Give a file path such as {str(out).rstrip('/') if stat.S_ISDIR(mode) else 'results'}/run.nc."
            )
        if out.stat().st_size > 0 and not is_netcdf(out):
            raise OutputError(
                f"{what} = {str(out)!r} exists and is not a netCDF file; refusing to overwrite it. "
                "Choose another path or move that file away."
            )
    parent = out.parent
    if parent.exists() and not parent.is_dir():
        raise OutputError(f"{what} = {str(out)!r}: its folder {str(parent)!r} is not a directory.")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".calibprob-probe-"):
            pass
    except OSError as err:
        raise OutputError(
            f"{what} = {str(out)!r}: cannot write in the folder {str(parent)!r} ({err.strerror or err}). "
            "Choose a writable folder."
        ) from None
    parts = out.with_name(out.name + ".parts")
    if parts.exists() and not parts.is_dir():
        raise OutputError(
            f"{what} = {str(out)!r}: {str(parts)!r} (where finished tasks are kept) exists and is not a "
            "folder. Move it away or choose another --out."
        )
    return out


def _canonical(values: np.ndarray) -> bytes:
    v = np.asarray(values)
    if v.dtype.kind in "OUS":
        return "\x1f".join(str(x) for x in v.ravel().tolist()).encode("utf-8", "surrogatepass")
    if v.dtype.kind == "b":
        return v.astype("u1").tobytes()
    if v.dtype.kind in "iu":
        return np.ascontiguousarray(v, dtype="<i8").tobytes()
    if v.dtype.kind in "fc":
        v = np.ascontiguousarray(v, dtype="<c16" if v.dtype.kind == "c" else "<f8")
        return np.where(np.isnan(v), np.nan, v).tobytes()  # one NaN bit pattern
    return repr(v.tolist()).encode()


def content_checksum(ds: xr.Dataset) -> str:
    """SHA-256 of a Dataset's variables (names, dims, shapes, values), ignoring attributes.

    Values are hashed in a canonical form (float64, int64, UTF-8 text) so the
    checksum survives a netCDF round trip: computed before writing, it equals
    the checksum of the file read back.

    Parameters
    ----------
    ds : xarray.Dataset

    Returns
    -------
    str
        64 hexadecimal digits.

    Examples
    --------
    >>> import xarray as xr
    >>> from calibprob.runs import content_checksum
    >>> a = xr.Dataset({"v": ("x", [1.0, 2.0])})
    >>> content_checksum(a) == content_checksum(a.copy()), content_checksum(a) == content_checksum(a + 1)
    (True, False)
    """
    h = hashlib.sha256()
    for name in sorted(map(str, ds.variables)):
        var = ds.variables[name]
        h.update(json.dumps([name, list(map(str, var.dims)), list(var.shape)]).encode())
        h.update(_canonical(var.values))
    return h.hexdigest()


def _write_error(path: Path, err: OSError) -> OSError:
    reason = err.strerror or str(err)
    fix = (
        "free some space or choose another --out"
        if getattr(err, "errno", None) == errno.ENOSPC
        else "check that the folder is writable and has free space, or choose another --out"
    )
    return OSError(f"could not write {str(path)!r}: {reason}. {fix[0].upper() + fix[1:]}.")


def write_atomic(obj: xr.Dataset | xr.DataTree, path: Path) -> None:
    """Write a Dataset or DataTree to ``path`` via a per-process temporary name, then rename.

    A killed run never leaves a half-written file under the final name, and two
    processes never write the same temporary file.
    """
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        obj.to_netcdf(tmp, engine=_ENGINE)
        os.replace(tmp, path)
    except OSError as err:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise _write_error(path, err) from err


class RunOutput:
    """The files of one run: the results file, ``<out>.parts/`` and the lock ``<out>.lock``.

    Use as a context manager: entering checks the path (:func:`check_output_path`),
    takes the lock (waiting for another run on the same output, with a message on
    stderr, or raising ``OutputError`` at once when ``wait=False``) and creates the
    parts folder.

    Parameters
    ----------
    out : path
        The results netCDF file.
    wait : bool, default True
        Wait for a concurrent run on the same ``out`` to finish (True), or refuse.
    """

    def __init__(self, out: str | os.PathLike[str], *, wait: bool = True) -> None:
        self.out = check_output_path(out)
        self.parts = self.out.with_name(self.out.name + ".parts")
        self.lock_path = self.out.with_name(self.out.name + ".lock")
        self.wait = wait
        self._fh: TextIO | None = None

    def __enter__(self) -> RunOutput:
        self._fh = fh = open(self.lock_path, "a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            if not self.wait:
                fh.close()
                raise OutputError(
                    f"{str(self.out)!r} is being written by another calibprob run ({holder}); wait for it "
                    "to finish or choose another --out."
                ) from None
            print(
                f"calibprob: another run ({holder}) is writing {self.out}; waiting for it to finish "
                "(its finished tasks will be reused)…",
                file=sys.stderr,
            )
            fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}")
        fh.flush()
        self.parts.mkdir(exist_ok=True)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None

    def part(self, name: str) -> Path:
        return inside(self.parts, safe_name(name) + ".nc")

    def write(self, obj: xr.Dataset | xr.DataTree) -> None:
        write_atomic(obj, self.out)


def store_part(ds: xr.Dataset, path: Path, *, fingerprint: str, key: Sequence, failed: bool) -> None:
    """Stamp ``ds`` with its fingerprint, key, failure flag and checksum, and write it atomically."""
    ds = ds.copy()
    ds.attrs.update(
        {
            "task_fingerprint": fingerprint,
            "task_key": json.dumps(list(key), default=str),
            "task_failed": int(bool(failed)),
            "task_checksum": content_checksum(ds),
        }
    )
    write_atomic(ds, path)


def load_part(path: Path, *, fingerprint: str, key: Sequence, coords: dict) -> tuple[xr.Dataset | None, str]:
    """Read a part and check it belongs to ``key``; returns ``(dataset or None, why not)``.

    A part is accepted only if it opens, carries ``fingerprint`` and ``key``, its
    coordinates equal ``coords`` (dimension -> the task's single value) and its
    data match the stored checksum.
    """
    if not path.is_file():
        return None, "missing"
    try:
        ds = xr.load_dataset(path, engine=_ENGINE)
    except Exception:  # unreadable, truncated or not netCDF: recompute
        return None, "unreadable"
    attrs = ds.attrs
    if attrs.get("task_fingerprint") != fingerprint:
        return None, "stale (other settings or input files)"
    if attrs.get("task_key") != json.dumps(list(key), default=str):
        return None, "belongs to another task"
    for dim, value in coords.items():  # a scalar: the task's single value; a list: the whole coordinate
        want = list(value) if isinstance(value, (list, tuple)) else [value]
        if dim not in ds.coords or ds[dim].values.tolist() != want:
            return None, "belongs to another task"
    if attrs.get("task_checksum") != content_checksum(ds):
        return None, "checksum mismatch (edited or corrupted)"
    return ds, ""


def default_part_name(key: tuple) -> str:
    """File-name stem of a task's part when the caller gives none: its key joined by ``-``."""
    return "-".join(map(str, key))


def finished_parts(
    keys: Iterable[tuple],
    output: RunOutput | None,
    part_name: Callable[[tuple], str],
    fingerprint: str,
    coords: Callable[[tuple], dict],
) -> dict:
    """Tasks finished by an earlier run with the same fingerprint (failed ones are run again)."""
    results: dict = {}
    if output is None:
        return results
    for key in keys:
        ds, _ = load_part(output.part(part_name(key)), fingerprint=fingerprint, key=key, coords=coords(key))
        if ds is not None and not int(ds.attrs.get("task_failed", 0)):
            results[key] = ds
    return results
