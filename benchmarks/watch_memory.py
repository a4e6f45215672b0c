"""Run a command and sample the resident memory of it and every process it starts (Dask workers included).

Prints the wall time, the exit status and, per process (the main process, the nannies, each worker),
the peak resident set size seen, sampled every ``--interval`` seconds with psutil. With ``--kill-worker
SECONDS`` it sends SIGKILL to one Dask worker process that many seconds after the start (to show what a
worker killed mid-run costs). ``--min-available GB`` stops the command (SIGTERM to its process group)
when the machine's available memory falls below that many GB, so a run on a shared machine cannot
starve the others.

Run::

    python benchmarks/watch_memory.py [--interval 0.5] [--kill-worker 120] [--log-every 60] -- calibprob compare SPEC --workers 2
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

import psutil


def _is_worker(proc: psutil.Process) -> bool:
    """A Dask worker process: a ``multiprocessing`` spawn child (a LocalCluster's nannies live in the main process)."""
    try:
        return "spawn_main" in " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--kill-worker", type=float, default=None, help="seconds after start: SIGKILL one worker")
    parser.add_argument("--min-available", type=float, default=2.0, help="GB: stop the command below this")
    parser.add_argument("--log-every", type=float, default=None, help="seconds: print each process's RSS so far")
    parser.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    t0 = time.time()
    child = subprocess.Popen(cmd, start_new_session=True)
    root = psutil.Process(child.pid)
    peaks: dict[int, tuple[float, str]] = {}
    killed = None
    logged = t0
    while child.poll() is None:
        procs = [root]
        try:
            procs += root.children(recursive=True)
        except psutil.NoSuchProcess:
            pass
        for p in procs:
            try:
                rss = p.memory_info().rss / 2**30
            except psutil.NoSuchProcess:
                continue
            role = "main" if p.pid == child.pid else ("worker" if _is_worker(p) else "other")
            if rss > peaks.get(p.pid, (0.0, ""))[0]:
                peaks[p.pid] = (rss, role)
        elapsed = time.time() - t0
        if args.log_every is not None and time.time() - logged >= args.log_every:
            logged = time.time()
            now = ", ".join(f"{role} {pid} peak {rss:.2f}" for pid, (rss, role) in sorted(peaks.items()))
            avail = psutil.virtual_memory().available / 2**30
            print(f"[watch] {elapsed / 60:.1f} min: {now} GiB; machine available {avail:.1f} GiB", flush=True)
        if args.kill_worker is not None and killed is None and elapsed >= args.kill_worker:
            workers = [p for p in procs if _is_worker(p)]
            if workers:
                killed = workers[0].pid
                os.kill(killed, signal.SIGKILL)
                print(f"[watch] {elapsed:.0f} s: kill -9 worker pid {killed}", file=sys.stderr, flush=True)
        if psutil.virtual_memory().available < args.min_available * 2**30:
            print(f"[watch] available memory below {args.min_available} GB: stopping", file=sys.stderr)
            os.killpg(child.pid, signal.SIGTERM)
        time.sleep(args.interval)
    wall = time.time() - t0
    print(f"[watch] exit status {child.returncode}, wall {wall:.1f} s ({wall / 60:.1f} min)")
    for pid, (rss, role) in sorted(peaks.items(), key=lambda kv: -kv[1][0]):
        print(f"[watch] pid {pid:>7} {role:<12} peak RSS {rss:6.2f} GiB{' (killed)' if pid == killed else ''}")
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
