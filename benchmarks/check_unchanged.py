"""Refactors keep every number: run comparison specs on two trees and require identical results.

    python benchmarks/check_unchanged.py OLD_REF [--new NEW_REF] [--spec models/quickstart.toml ...]
    python benchmarks/check_unchanged.py OLD_REF --paper      # the quickstart and every paper-table spec
    python benchmarks/check_unchanged.py OLD_REF --spec models/capone2023-table1.toml --repetitions 3

Each ref (a commit, branch or tag; ``--new`` defaults to this working tree, uncommitted changes
included) is checked out with ``git worktree add --detach`` into a temporary folder and every spec is
run there by that tree's own code (``PYTHONPATH`` = the tree, the same interpreter) with that tree's
own copy of the spec file, serially. The two results files must be ``xarray.DataTree.identical``
after dropping what legitimately differs between runs: the ``/timing`` group (wall times) and the
attributes that describe the code or the spec text rather than the numbers (``calibprob_version``,
``spec``, ``spec_fingerprint`` — a kind renamed by a refactor changes the text, not the result).
Everything else — every metric, every per-level curve, the ranking, the error strings — must be equal
to the bit. Exit status 0 when every spec is identical, 1 otherwise (the differing variables printed).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import xarray as xr

ROOT = Path(__file__).resolve().parents[1]
PAPER_SPECS = [
    "models/quickstart.toml",
    "models/pion2024-table1-p1.toml",
    "models/pion2024-table1-p5.toml",
    "models/pion2024-table1-p9.toml",
    "models/song2019-table1-ols.toml",
    "models/song2019-table1-bayesian-ridge.toml",
    "models/song2019-table1-gp.toml",
    "models/capone2023-table1.toml",
    "models/capone2023-table1-paper-base.toml",
]
#: root attributes that describe the code or the spec's text, not the numbers
VOLATILE_ATTRS = ("calibprob_version", "spec", "spec_fingerprint")


def checkout(ref: str, into: Path) -> Path:
    """A detached worktree of ``ref`` (the caller removes it)."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(into), ref], check=True)
    return into


def run_spec(tree: Path, spec: str, out: Path, repetitions: int | None = None) -> float:
    """Run one spec with the tree's own code and spec file; return the wall time.

    ``repetitions`` runs only the spec's first N repetitions (``calibprob compare --repetitions``:
    the same splits as the full run), for specs whose full run takes hours on a shared machine.
    """
    env = dict(os.environ, PYTHONPATH=str(tree), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    code = "import sys; from calibprob.cli import main; sys.exit(main(sys.argv[1:]))"
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code, "compare", str(tree / spec), "--out", str(out)]
        + ([] if repetitions is None else ["--repetitions", str(repetitions)]),
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{spec} failed in {tree}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return time.perf_counter() - start


def comparable(path: Path) -> xr.DataTree:
    """The results file without its wall times and code-describing attributes."""
    tree = xr.open_datatree(path, engine="h5netcdf").load()
    kept = {name: node.to_dataset() for name, node in tree.subtree_with_keys if name != "timing"}
    kept = {("/" if name == "." else "/" + name): ds for name, ds in kept.items()}
    root = kept["/"]
    root.attrs = {k: v for k, v in root.attrs.items() if k not in VOLATILE_ATTRS}
    return xr.DataTree.from_dict(kept)


def differences(old: xr.DataTree, new: xr.DataTree) -> list[str]:
    """Where two results differ, one line each (empty when identical)."""
    if old.identical(new):
        return []
    out = []
    for path in sorted(set(old.groups) | set(new.groups)):
        if path not in old.groups or path not in new.groups:
            out.append(f"{path}: group only in {'new' if path in new.groups else 'old'}")
            continue
        a, b = old[path].to_dataset(), new[path].to_dataset()
        for name in sorted(set(a.variables) | set(b.variables)):
            if name not in a.variables or name not in b.variables:
                out.append(f"{path}/{name}: only in {'new' if name in b.variables else 'old'}")
            elif not a[name].identical(b[name]):
                out.append(f"{path}/{name}: values or attributes differ")
        if a.attrs != b.attrs:
            out.append(f"{path}: attributes differ")
    return out or ["the trees differ (structure)"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", help="the reference commit (e.g. main before the refactor)")
    parser.add_argument("--new", default=None, help="the commit to check (default: this working tree)")
    parser.add_argument("--spec", action="append", default=None, help="a spec path (repeatable)")
    parser.add_argument("--paper", action="store_true", help="the quickstart and every paper-table spec")
    parser.add_argument("--repetitions", type=int, default=None, help="run only each spec's first N repetitions")
    args = parser.parse_args(argv)
    specs = PAPER_SPECS if args.paper else (args.spec or ["models/quickstart.toml"])
    failed = 0
    with tempfile.TemporaryDirectory(prefix="calibprob-unchanged-") as tmp:
        tmp_path = Path(tmp)
        trees = {"old": checkout(args.old, tmp_path / "old")}
        trees["new"] = checkout(args.new, tmp_path / "new") if args.new else ROOT
        try:
            for spec in specs:
                outs = {}
                for side, tree in trees.items():
                    outs[side] = tmp_path / f"{side}-{Path(spec).stem}.nc"
                    seconds = run_spec(tree, spec, outs[side], args.repetitions)
                    print(f"{spec:48s} {side}: {seconds:7.1f} s", flush=True)
                diff = differences(comparable(outs["old"]), comparable(outs["new"]))
                print(f"{spec:48s} {'IDENTICAL' if not diff else 'DIFFERENT'}", flush=True)
                for line in diff:
                    print(f"    {line}")
                failed += bool(diff)
        finally:
            for side in ("old", "new"):
                if side in trees and trees[side] != ROOT:
                    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(trees[side])])
    print(f"{len(specs) - failed} of {len(specs)} specs identical")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
