"""Time calibprob's conformal test martingales beside crepes' and MAPIE's on the same p-values.

    PYTHONPATH=. /work/main/.venv/bin/python benchmarks/bench_martingales.py [--n 2000] [--peers /work/venvs/peers/bin/python]

Ours run in this interpreter; crepes and MAPIE (not calibprob dependencies) run in the peers'
interpreter on the same seeded p-values, passed through a temporary .npy file. Each line: the best
of 3 wall-clock times, and the largest relative difference of the paths (the same numbers).
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from calibprob.monitoring import epsilon_bets, plugin_martingale, simple_jumper, sleeper_stayer, step_bets

PEERS = r"""
import sys, time, numpy as np
from crepes.martingales import SimpleJumper, SleeperStayer
from mapie.exchangeability_testing import OnlineMartingaleTest
p = np.load(sys.argv[1]); out = {}
def best(f):
    ts = []
    for _ in range(3):
        t0 = time.perf_counter(); v = f(); ts.append(time.perf_counter() - t0)
    return min(ts), v
def mapie(method):
    omt = OnlineMartingaleTest(test_method=method, burn_in=100, warn=False); path = []
    for v in p:
        path.append(omt.update_simple_jumper_martingale(float(v)) if method == "jumper_martingale"
                    else omt.update_plugin_martingale(float(v)))
        omt.pvalue_history.append(float(v))
    return np.array(path)
for name, f in [("crepes jumper", lambda: SimpleJumper().apply(p)), ("crepes sleeper-stayer", lambda: SleeperStayer().apply(p)),
                ("mapie jumper", lambda: mapie("jumper_martingale")), ("mapie plugin", lambda: mapie("plugin_martingale"))]:
    t, v = best(f); out[name] = v; print(f"{name}\t{t:.4f}")
np.savez(sys.argv[2], **{k.replace(' ', '_'): v for k, v in out.items()})
"""


def best(f):
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        v = f()
        times.append(time.perf_counter() - t0)
    return min(times), v


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--peers", default="/work/venvs/peers/bin/python")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    p = np.clip(rng.random(args.n) ** 1.2, 0, 1)  # mildly non-uniform: the martingales move
    ours = {
        "crepes jumper": lambda: simple_jumper(epsilon_bets(p)),
        "crepes sleeper-stayer": lambda: sleeper_stayer(step_bets(p)),
        "mapie jumper": lambda: simple_jumper(epsilon_bets(p, (-1, 0, 1))),
        "mapie plugin": lambda: plugin_martingale(p, burn_in=100),
    }
    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "p.npy", p)
        res = subprocess.run(
            [args.peers, "-c", PEERS, str(Path(tmp) / "p.npy"), str(Path(tmp) / "theirs.npz")],
            capture_output=True,
            text=True,
            check=True,
        )
        theirs_t = dict(line.split("\t") for line in res.stdout.strip().splitlines())
        theirs = dict(np.load(Path(tmp) / "theirs.npz"))
    print(f"n = {args.n} p-values; best of 3 wall-clock seconds")
    print(f"{'martingale':24s} {'calibprob':>10s} {'peer':>10s} {'max rel diff':>13s}")
    for name, f in ours.items():
        t, v = best(f)
        ref = theirs[name.replace(" ", "_")]
        diff = float(np.max(np.abs(v - ref) / np.abs(ref)))
        print(f"{name:24s} {t:10.4f} {float(theirs_t[name]):10.4f} {diff:13.2e}")


if __name__ == "__main__":
    main()
