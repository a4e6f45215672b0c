"""Mondrian conformal predictive system: calibprob vs crepes 0.9, side by side, same inputs.

n_cal = n_test = 100 000 points of a heteroscedastic problem, 10 Mondrian bins of the base's
predicted σ (difficulty; thresholds fitted on a separate "proper-training" prediction with
:func:`calibprob.bins`), the normalised signed score (y - μ)/σ, central intervals at
c = 0.8 and 0.9. Each side runs in its own fresh process (so its peak resident memory is its
own): calibprob's ``Mondrian(ConformalPredictiveSystem())`` — ``fit`` then
``predict_interval`` — and crepes' ``ConformalPredictiveSystem().fit(residuals, sigmas,
bins)`` then ``predict(..., lower_percentiles, higher_percentiles)``. Prints wall time (best
of ``--repeat``), peak RSS, and whether the bounds are identical.

Percentile conventions. calibprob's lower end at c is the ⌊(α/2)(n_k+1)⌋-th smallest score of
the bin and the upper the ⌈(1-α/2)(n_k+1)⌉-th (α = 1 - c, exact ranks); crepes' lower
percentile p gives index ``int(p/100 * (n_k+1)) - 1`` and its higher ``ceil(p/100 * (n_k+1)) - 1``,
so ``lower_percentiles = 100 α/2``, ``higher_percentiles = 100 (1 - α/2)`` are the same ranks
— given as the decimal literals 5 / 95 and 10 / 90. crepes' own ``predict_int(confidence=c)``
computes them as ``(1-c)/2*100`` = 4.999999999999999 (c = 0.9) in floating point and so falls
one rank short wherever (α/2)(n_k+1) is an integer (notes/conditional-calibration.md, the
float pitfall); the script counts those rows too.

Run::

    .venv/bin/python benchmarks/bench_mondrian.py --crepes /work/venvs/crepes/bin/python

(the script calls itself under the crepes interpreter with ``--side crepes``; without
``--crepes`` and without crepes importable, the crepes column is skipped with a message).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

LEVELS = (0.8, 0.9)
PERCENTILES = {0.8: (10, 90), 0.9: (5, 95)}  # 100 α/2 and 100 (1 - α/2), as decimal literals


def make_data(n: int, seed: int = 0) -> dict:
    """Proper-training, calibration and test predictions (μ, σ) with targets; σ-bins from the training part."""
    rng = np.random.default_rng(seed)
    out = {}
    for part in ("train", "cal", "test"):
        x = rng.uniform(-3, 3, size=n)
        mu = np.sin(x) + 0.1 * x
        sigma = 0.2 + 0.3 * np.abs(x) + 0.05 * rng.random(n)
        # a base that is right about the trend, wrong about the shape: Student-t noise, σ off by 1.5x
        y = mu + 1.5 * sigma * rng.standard_t(4, size=n)
        out[part] = (mu, sigma, y)
    return out


def _peak_mb() -> float:
    """This process's peak resident memory (VmHWM: reset by exec, unlike ru_maxrss, which Linux keeps)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _best(fn, repeat: int):
    best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def calibprob_side(npz: Path, out: Path, repeat: int) -> None:
    import calibprob
    from calibprob.calibrators.conformal import ConformalPredictiveSystem

    d = np.load(npz)
    pred_cal = calibprob.normal(d["mu_cal"], d["sigma_cal"])
    pred_test = calibprob.normal(d["mu_test"], d["sigma_test"])

    def run():
        m = calibprob.Mondrian(ConformalPredictiveSystem(confidence_level=list(LEVELS)))
        m.fit(pred_cal, d["y_cal"], groups=d["bins_cal"])
        return m.predict_interval(pred_test, list(LEVELS), groups=d["bins_test"])

    seconds, iv = _best(run, repeat)
    np.savez(out, lower=iv["lower"].values, upper=iv["upper"].values)
    print(json.dumps({"seconds": seconds, "peak_mb": _peak_mb()}))


def crepes_side(npz: Path, out: Path, repeat: int) -> None:
    from crepes import ConformalPredictiveSystem

    d = np.load(npz)
    lows = [PERCENTILES[c][0] for c in LEVELS]
    highs = [PERCENTILES[c][1] for c in LEVELS]

    def run():
        cps = ConformalPredictiveSystem().fit(d["y_cal"] - d["mu_cal"], sigmas=d["sigma_cal"], bins=d["bins_cal"])
        p = cps.predict(
            d["mu_test"], sigmas=d["sigma_test"], bins=d["bins_test"], lower_percentiles=lows, higher_percentiles=highs
        )
        return cps, p

    seconds, (cps, p) = _best(run, repeat)
    via_int = cps.predict_int(d["mu_test"], sigmas=d["sigma_test"], bins=d["bins_test"], confidence=0.9)
    np.savez(out, lower=p[:, : len(LEVELS)], upper=p[:, len(LEVELS) :], int_90=via_int)
    print(json.dumps({"seconds": seconds, "peak_mb": _peak_mb()}))


def _run_side(python: str, side: str, npz: Path, out: Path, repeat: int) -> dict:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [python, __file__, "--side", side, str(npz), str(out), "--repeat", str(repeat)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the {side} side failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _crepes_python(arg: str | None) -> str | None:
    if arg:
        return arg
    try:
        import crepes  # noqa: F401
    except ImportError:
        return None
    return sys.executable


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--crepes", help="python of an environment with crepes >= 0.9")
    ap.add_argument("--n", type=int, default=100_000, help="calibration and test points each")
    ap.add_argument("--bins", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--side", nargs=3, metavar=("NAME", "NPZ", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.side is not None:  # a worker process: one side, its own peak memory
        name, npz, out = args.side
        (calibprob_side if name == "calibprob" else crepes_side)(Path(npz), Path(out), args.repeat)
        return
    _compare(args)


def _compare(args) -> None:
    import calibprob

    data = make_data(args.n)
    mu_tr, sigma_tr, _ = data["train"]
    taxonomy = calibprob.bins(calibprob.normal(mu_tr, sigma_tr), by="sigma", n_bins=args.bins)
    arrays = {}
    for part in ("cal", "test"):
        mu, sigma, y = data[part]
        arrays.update({f"mu_{part}": mu, f"sigma_{part}": sigma, f"y_{part}": y})
        arrays[f"bins_{part}"] = taxonomy.apply(calibprob.normal(mu, sigma))
    counts = np.bincount(arrays["bins_cal"])
    print(
        f"n_cal = n_test = {args.n}, {taxonomy.n_bins_} bins of predicted sigma, n_k in [{counts.min()}, {counts.max()}]"
    )
    with tempfile.TemporaryDirectory() as tmp:
        npz = Path(tmp) / "data.npz"
        np.savez(npz, **arrays)
        ours = _run_side(sys.executable, "calibprob", npz, Path(tmp) / "ours.npz", args.repeat)
        mine = np.load(Path(tmp) / "ours.npz")
        print(
            f"calibprob Mondrian(ConformalPredictiveSystem()): {ours['seconds']:.3f} s, peak RSS {ours['peak_mb']:.0f} MB"
        )
        python = _crepes_python(args.crepes)
        if python is None:
            print(
                "crepes column skipped: crepes is not importable here; pass --crepes /path/to/python of an "
                'environment with `pip install "crepes>=0.9"`.'
            )
            return
        theirs = _run_side(python, "crepes", npz, Path(tmp) / "theirs.npz", args.repeat)
        ref = np.load(Path(tmp) / "theirs.npz")
        print(
            f"crepes ConformalPredictiveSystem (Mondrian):   {theirs['seconds']:.3f} s, peak RSS {theirs['peak_mb']:.0f} MB"
        )
        print(f"speed-up {theirs['seconds'] / ours['seconds']:.1f}x")
        for j, c in enumerate(LEVELS):
            same = np.array_equal(mine["lower"][:, j], ref["lower"][:, j]) and np.array_equal(
                mine["upper"][:, j], ref["upper"][:, j]
            )
            diff = max(
                np.max(np.abs(mine["lower"][:, j] - ref["lower"][:, j])),
                np.max(np.abs(mine["upper"][:, j] - ref["upper"][:, j])),
            )
            print(f"c = {c}: bounds identical: {same} (max |difference| {diff:.3g})")
        j = LEVELS.index(0.9)
        off = ~((ref["int_90"][:, 0] == mine["lower"][:, j]) & (ref["int_90"][:, 1] == mine["upper"][:, j]))
        exact_int = [k for k, n_k in enumerate(counts) if (n_k + 1) % 20 == 0]
        print(
            f"crepes predict_int(confidence=0.9) differs on {int(off.sum())} test rows "
            f"(bins where (alpha/2)(n_k+1) is an integer: {exact_int})"
        )


if __name__ == "__main__":
    main()
