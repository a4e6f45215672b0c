"""GP-Beta (Song et al. 2019) benchmarks: first-fit cost, ADVI speed, held-out NLL, minibatch memory.

Prints, each part in its own subprocess (so that cache state and peak memory are clean):

* **compile** — the same full-batch ADVI (n = 1000, 16 inducing points) two
  ways, side by side: calibprob's NumPy objective with :func:`advi_fit` (what
  ``fit`` runs; nothing to compile) and PyMC's compiled ADVI step on the
  declared model (what full-batch fits ran before issue 18; what minibatch
  fits still run) — the first fit of a process with an *empty* PyTensor cache
  (``base_compiledir`` pointed at a new temporary folder), the first fit of a
  new process with that cache now warm, and a refit in the same process. For
  the default C backend (``"CVM"``) and, with ``--numba``, PyTensor's Numba backend.
* **n1000** — ADVI with 16 inducing points on n = 1000 points of the paper's
  Fig. 1 data (OLS base): fit and predict wall time (warm), held-out NLL of the
  base, isotonic recalibration (RK) and GP-Beta on 2000 test points, and the same
  for MAP (the point estimate of the same model) and SVI (variational inducing
  values, point hyperparameters: the paper's and netcal's inference). The arrays
  are saved to ``--save`` (``.npz``: mu, sigma, y, mu_test, sigma_test, y_test)
  so that another implementation (netcal's ``GPBeta``, in a separate Python 3.11
  environment with PyTorch, never in calibprob's) can be scored on identical data.
* **minibatch** — minibatch ADVI and minibatch SVI (batch 256) on n = 20 000: wall time and peak
  memory (tracemalloc peak of Python/NumPy allocations, and the process's max RSS).

BLAS runs single-threaded (GP-Beta sets this itself for fits and predictions).

With ``--netcal PYTHON`` the same n = 1000 arrays go to ``netcal_gpbeta.py``
under that interpreter (see its docstring for building the environment), and
the wall-time ratio and both held-out NLLs are printed (TARGETS.md P4).

Run::

    .venv/bin/python benchmarks/bench_gp_beta.py [--quick] [--numba] [--save /tmp/gpbeta_n1000.npz]
        [--netcal /tmp/netcal-venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import calibprob


def fig1_sample(n, rng):
    """Song et al. (2019), Fig. 1: x ~ U[-10, 40]; y = 0.5x + e or y = e (equal mixture), e ~ N(0, 2)."""
    x = rng.uniform(-10, 40, n)
    comp = rng.integers(0, 2, n)
    return x, np.where(comp == 1, 0.5 * x, 0.0) + rng.normal(0.0, np.sqrt(2.0), n)


def ols_base(n, n_test, seed):
    rng = np.random.default_rng(seed)
    x, y = fig1_sample(n, rng)
    xt, yt = fig1_sample(n_test, rng)
    A = np.c_[np.ones_like(x), x]
    beta = np.linalg.lstsq(A, y, rcond=None)[0]
    s = np.sqrt(np.sum((y - A @ beta) ** 2) / (n - 2))
    mu, sd = A @ beta, np.full(n, s)
    mut, sdt = np.c_[np.ones_like(xt), xt] @ beta, np.full(n_test, s)
    return mu, sd, y, mut, sdt, yt


# ---------------------------------------------------------------------------
# parts (run in child processes)
# ---------------------------------------------------------------------------


def part_compile(mode: str, n_iter: int) -> dict:
    from calibprob.calibrators.gp_beta import GPBetaCalibrator
    from calibprob.calibrators.gp_beta._inference import _advi_pymc

    mu, sd, y, *_ = ols_base(1000, 10, 0)
    cal = GPBetaCalibrator(n_inducing=16, n_iter=n_iter, compile_mode=mode, random_state=0)
    out = {}
    for key in ("numpy_first_s", "numpy_refit_s"):
        t = time.perf_counter()
        cal.fit(calibprob.normal(mu, sd), y)
        out[key] = time.perf_counter() - t
    # the identical ADVI through PyMC's compiled step on the declared model (same start, same draws)
    prob = cal._problem(calibprob.normal(mu, sd), y, np.random.default_rng(0))
    start = prob.layout.ravel(prob.layout.start_point(prob.Z0, np.random.default_rng(1)))
    for key in ("pymc_first_s", "pymc_refit_s"):
        t = time.perf_counter()
        _advi_pymc(cal, prob.graph(), start, 1, False)
        out[key] = time.perf_counter() - t
    return out


def part_n1000(n_iter: int, save: str | None) -> dict:
    from scipy import stats

    import calibprob
    from calibprob.calibrators import IsotonicRecalibrator
    from calibprob.calibrators.gp_beta import GPBetaCalibrator

    mu, sd, y, mut, sdt, yt = ols_base(1000, 2000, 1)
    if save:
        np.savez(save, mu=mu, sigma=sd, y=y, mu_test=mut, sigma_test=sdt, y_test=yt)
    cal = GPBetaCalibrator(n_inducing=16, n_iter=n_iter, random_state=0)
    cal.fit(calibprob.normal(mu, sd), y)  # compile (or load) once; the timed fit below is warm
    t = time.perf_counter()
    cal.fit(calibprob.normal(mu, sd), y)
    fit = time.perf_counter() - t
    t = time.perf_counter()
    pred = cal.predict(calibprob.normal(mut, sdt))
    predict = time.perf_counter() - t
    iso = IsotonicRecalibrator().fit(calibprob.normal(mu, sd), y)
    # MAP (the point estimate) and SVI (variational inducing values, point hyperparameters:
    # the paper's and netcal's inference) on the same arrays; ADVI is the default
    others = {}
    for inference in ("map", "svi"):
        other = GPBetaCalibrator(n_inducing=16, inference=inference, n_iter=n_iter, random_state=0)
        other.fit(calibprob.normal(mu, sd), y)
        t = time.perf_counter()
        other.fit(calibprob.normal(mu, sd), y)
        fit_o = time.perf_counter() - t
        t = time.perf_counter()
        pred_o = other.predict(calibprob.normal(mut, sdt))
        others[inference] = {
            "fit_s": fit_o,
            "predict_s": time.perf_counter() - t,
            "nll": float(calibprob.evaluate(pred_o, yt)["nll"]),
            "nll_exact": float(-np.mean(other.logpdf(calibprob.normal(mut, sdt), yt))),
        }
        if save:
            np.save(
                save.replace(".npz", "") + f"_calibprob_{inference}_logpdf.npy",
                other.logpdf(calibprob.normal(mut, sdt), yt),
            )
    if save:
        np.save(save.replace(".npz", "") + "_calibprob_logpdf.npy", cal.logpdf(calibprob.normal(mut, sdt), yt))
    return {
        "others": others,
        "fit_s": fit,
        "predict_s": predict,
        "n_iter": n_iter,
        "nll_base": float(-np.mean(stats.norm.logpdf(yt, mut, sdt))),
        "nll_isotonic": float(calibprob.evaluate(iso.predict(calibprob.normal(mut, sdt)), yt)["nll"]),
        "nll_gp_beta": float(calibprob.evaluate(pred, yt)["nll"]),
        "nll_gp_beta_exact": float(-np.mean(cal.logpdf(calibprob.normal(mut, sdt), yt))),
    }


def part_seeds(n_iter: int, seeds: int) -> dict:
    """Held-out NLL of ADVI, SVI and MAP for random_state = 0 .. seeds - 1 on the n = 1000 arrays."""
    from calibprob.calibrators.gp_beta import GPBetaCalibrator

    mu, sd, y, mut, sdt, yt = ols_base(1000, 2000, 1)
    out = {}
    for inference in ("advi", "svi", "map"):
        out[inference] = [
            float(
                -np.mean(
                    GPBetaCalibrator(n_inducing=16, inference=inference, n_iter=n_iter, random_state=s)
                    .fit(calibprob.normal(mu, sd), y)
                    .logpdf(calibprob.normal(mut, sdt), yt)
                )
            )
            for s in range(seeds)
        ]
    return out


def part_minibatch(n: int, n_iter: int, inference: str) -> dict:
    import resource
    import tracemalloc

    from scipy import stats

    from calibprob.calibrators.gp_beta import GPBetaCalibrator

    mu, sd, y, mut, sdt, yt = ols_base(n, 2000, 2)
    cal = GPBetaCalibrator(n_inducing=16, inference=inference, n_iter=n_iter, batch_size=256, random_state=0)
    t = time.perf_counter()
    cal.fit(
        calibprob.normal(mu, sd), y
    )  # includes the compile of the minibatch graph (cached on disk after the first run)
    first = time.perf_counter() - t
    tracemalloc.start()
    t = time.perf_counter()
    cal.fit(calibprob.normal(mu, sd), y)
    fit = time.perf_counter() - t
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "n": n,
        "inference": inference,
        "batch_size": 256,
        "n_iter": n_iter,
        "first_fit_s": first,
        "fit_s": fit,
        "tracemalloc_peak_mb": peak / 2**20,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "nll_base": float(-np.mean(stats.norm.logpdf(yt, mut, sdt))),
        "nll_gp_beta": float(-np.mean(cal.logpdf(calibprob.normal(mut, sdt), yt))),
    }


def _child(args) -> None:
    if args.part == "compile":
        out = part_compile(args.mode, args.n_iter)
    elif args.part == "n1000":
        out = part_n1000(args.n_iter, args.save)
    elif args.part == "seeds":
        out = part_seeds(args.n_iter, args.seeds)
    else:
        out = part_minibatch(args.n, args.n_iter, args.inference)
    print("RESULT " + json.dumps(out))


def _run(part: str, *extra, env=None) -> dict:
    cmd = [sys.executable, __file__, "--part", part, *map(str, extra)]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[7:])
            res["process_wall_s"] = wall
            return res
    raise RuntimeError(f"part {part} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


def _print_first_fit(modes, n_iter: int, env_base: dict) -> None:
    """The ``compile`` part: NumPy ADVI vs PyMC's compiled step, empty then warm cache, per backend."""
    print("first fit, n = 1000 full-batch ADVI: NumPy objective (calibprob) vs PyMC's compiled step:")
    for mode in modes:
        with tempfile.TemporaryDirectory(prefix="gpbeta-cache-") as cache:
            env = dict(env_base, PYTENSOR_FLAGS=f"base_compiledir={cache}")
            cold = _run("compile", "--mode", mode, "--n-iter", n_iter, env=env)
            warm = _run("compile", "--mode", mode, "--n-iter", n_iter, env=env)
        for name, key in (("NumPy", "numpy"), (f"PyMC {mode}", "pymc")):
            print(
                f"  {name:10s} empty cache: first fit {cold[key + '_first_s']:6.1f} s | warm disk cache: "
                f"first fit {warm[key + '_first_s']:5.1f} s | same process refit {warm[key + '_refit_s']:5.2f} s"
            )
        print(
            f"  ratio NumPy / PyMC: first fit (empty cache) {cold['numpy_first_s'] / cold['pymc_first_s']:.3f}, "
            f"(warm cache) {warm['numpy_first_s'] / warm['pymc_first_s']:.3f}, "
            f"refit {warm['numpy_refit_s'] / warm['pymc_refit_s']:.2f}"
        )


def _print_netcal(args, r: dict, env_base: dict) -> None:
    """netcal's GPBeta on the saved n = 1000 arrays, and the ratios to calibprob's fit (TARGETS.md P4)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netcal_gpbeta.py")
    nc_out = args.save.replace(".npz", "") + "_netcal_logpdf.npy"
    proc = subprocess.run([args.netcal, script, args.save, "16", nc_out], capture_output=True, text=True, env=env_base)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if not line:
        print(f"  netcal run failed:\n{proc.stderr[-3000:]}")
    else:
        nc = json.loads(line[0][7:])
        print(
            f"  netcal {nc.get('torch', '')} GPBeta (16 inducing, 200 epochs): fit {nc['fit_s']:.2f} s, "
            f"predict {nc['predict_s']:.2f} s, held-out NLL {nc['nll']:.4f}"
        )
        print(
            f"  wall-time ratio netcal / calibprob: fit {nc['fit_s'] / r['fit_s']:.2f}x, "
            f"fit + predict {(nc['fit_s'] + nc['predict_s']) / (r['fit_s'] + r['predict_s']):.2f}x; "
            f"NLL calibprob - netcal {r['nll_gp_beta'] - nc['nll']:+.4f}"
        )
        for name, o in r["others"].items():
            print(
                f"  {name.upper()}: wall-time ratio netcal / calibprob fit {nc['fit_s'] / o['fit_s']:.2f}x, "
                f"fit + predict {(nc['fit_s'] + nc['predict_s']) / (o['fit_s'] + o['predict_s']):.2f}x; "
                f"NLL calibprob - netcal {o['nll'] - nc['nll']:+.4f}"
            )
        for label, suffix in (
            ("ADVI", "_calibprob_logpdf.npy"),
            ("MAP", "_calibprob_map_logpdf.npy"),
            ("SVI", "_calibprob_svi_logpdf.npy"),
        ):
            diff = -(np.load(args.save.replace(".npz", "") + suffix) - np.load(nc_out))
            print(
                f"  paired per-point NLL difference calibprob {label} - netcal (exact densities): "
                f"{diff.mean():+.4f} ± {diff.std(ddof=1) / np.sqrt(diff.size):.4f} (s.e.)"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("compile", "n1000", "seeds", "minibatch"), help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="CVM", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=20_000, help=argparse.SUPPRESS)
    ap.add_argument("--inference", default="advi", choices=("advi", "svi"), help=argparse.SUPPRESS)
    ap.add_argument("--n-iter", type=int, default=4000)
    ap.add_argument("--save", default=None, help="save the n = 1000 arrays to this .npz")
    ap.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="with --netcal: also repeat every fit (calibprob and netcal) for this many seeds",
    )
    ap.add_argument("--quick", action="store_true", help="fewer iterations, n = 5000 for minibatch")
    ap.add_argument("--numba", action="store_true", help="also time the Numba backend's cold compile (~2 min)")
    ap.add_argument(
        "--netcal",
        default=None,
        metavar="PYTHON",
        help="python of a separate env with torch + netcal 1.4: compare on the n = 1000 arrays",
    )
    args = ap.parse_args()
    if args.seeds < 1:
        ap.error(f"--seeds must be >= 1; got {args.seeds}.")
    if args.part:
        _child(args)
        return
    n_iter = 1000 if args.quick else args.n_iter
    env_base = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")

    print("GP-Beta benchmarks (Song et al. 2019); 16 inducing points, rank 1, mean-field ADVI\n")
    _print_first_fit(["CVM"] + (["NUMBA"] if args.numba else []), n_iter, env_base)

    if args.netcal and not args.save:
        args.save = os.path.join(tempfile.gettempdir(), "gpbeta_n1000.npz")
    r = _run("n1000", "--n-iter", n_iter, *(["--save", args.save] if args.save else []), env=env_base)
    print(f"\nADVI, n = 1000 (Fig. 1 data, OLS base), {r['n_iter']} iterations, warm:")
    print(f"  fit {r['fit_s']:.2f} s, predict 2000 test points {r['predict_s']:.2f} s")
    print(
        f"  held-out NLL: base {r['nll_base']:.4f} | isotonic {r['nll_isotonic']:.4f} | "
        f"GP-Beta {r['nll_gp_beta']:.4f} (exact density {r['nll_gp_beta_exact']:.4f})"
    )
    for name, o in r["others"].items():
        print(
            f"  {name.upper()} instead of ADVI: fit {o['fit_s']:.2f} s, predict {o['predict_s']:.2f} s, "
            f"held-out NLL {o['nll']:.4f} (exact density {o['nll_exact']:.4f})"
        )
    if args.save:
        print(f"  arrays saved to {args.save}")
    if args.netcal:
        _print_netcal(args, r, env_base)

    if args.netcal and args.seeds > 1:
        # seed-to-seed spread of the stochastic fits (ADVI, SVI, netcal's SVGP) on the same arrays
        ours = _run("seeds", "--n-iter", n_iter, "--seeds", args.seeds, env=env_base)
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netcal_gpbeta.py")
        theirs = []
        for seed in range(args.seeds):
            seed_out = args.save.replace(".npz", "") + f"_netcal_seed{seed}.npy"
            proc = subprocess.run(
                [args.netcal, script, args.save, "16", seed_out, str(seed)],
                capture_output=True,
                text=True,
                env=env_base,
            )
            line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
            theirs.append(json.loads(line[0][7:])["nll"] if line else np.nan)
        print(f"\nheld-out NLL over seeds 0..{args.seeds - 1} (mean ± sd; same arrays):")
        for name, vals in [("netcal GPBeta", theirs), *((k.upper(), ours[k]) for k in ("advi", "svi", "map"))]:
            v = np.asarray(vals, float)
            print(f"  {name:14s} {v.mean():.4f} ± {v.std(ddof=1):.4f}   [{', '.join(f'{x:.4f}' for x in v)}]")

    n = 5000 if args.quick else 20_000
    for inference in ("advi", "svi"):
        m = _run("minibatch", "--n", n, "--n-iter", n_iter, "--inference", inference, env=env_base)
        print(f"\nminibatch {inference.upper()}, n = {m['n']}, batch {m['batch_size']}, {m['n_iter']} iterations:")
        print(f"  fit {m['fit_s']:.2f} s warm (first fit in process {m['first_fit_s']:.1f} s)")
        print(f"  peak memory: tracemalloc {m['tracemalloc_peak_mb']:.1f} MB, process max RSS {m['max_rss_mb']:.0f} MB")
        print(f"  held-out NLL: base {m['nll_base']:.4f} | GP-Beta {m['nll_gp_beta']:.4f}")


if __name__ == "__main__":
    main()
