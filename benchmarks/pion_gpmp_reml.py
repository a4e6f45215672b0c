"""Pion & Vazquez (2024) Table 1: calibprob's REML GP beside GPmp's, on identical designs.

calibprob reproduces Table 1 of the paper within the issue's bands except the Branin rows
at smooth kernels (p = 9: widths 0.39x the paper's). This script asks whether the gap is
calibprob's: it fits the paper's own library, GPmp (0.9.18 by default; 0.9.14 and 0.9.15,
the releases before the paper's submission in July 2024, give the same result;
``gp.kernel.select_parameters_with_reml`` as in the authors' public code
``gpmp-dev/lod2024-conformal``: constant mean, Matérn nu = p + 1/2, one SLSQP run from
GPmp's initial guess, nugget 10 eps sigma^2), and calibprob's REML GP (the settings of
``models/pion2024-table1-p*.toml``) on the *same* uniform designs (n = 20 d training
points, 1100 test points), and prints for each the mean 90 % width and IAE over the
repetitions, the paper's values beside them, and J+GP run by calibprob at GPmp's
parameters (the conformal step with the paper's REML optimum). It also evaluates
the restricted log-likelihood at both optima under both nuggets (calibprob's 1e-12 and
GPmp's 10 eps ~ 2.2e-15, relative to sigma^2): each optimum is the higher one under its
own nugget, i.e. for these smooth kernels the REML optimum is set by the numerical nugget.

GPmp (GPL-3) and PyTorch live in a separate Python 3.11 environment, never in
calibprob's dependencies. Build it once::

    python3.11 -m venv /tmp/gpmp-venv
    /tmp/gpmp-venv/bin/pip install torch==2.13.0
    /tmp/gpmp-venv/bin/pip install gpmp==0.9.18 scipy matplotlib

and run::

    .venv/bin/python benchmarks/pion_gpmp_reml.py --gpmp /tmp/gpmp-venv/bin/python \
        [--function branin] [--p 5 9] [--repetitions 40]

(the script calls itself under the GPmp interpreter with ``--gpmp-side``).

With ``--nuggets`` it needs no GPmp: calibprob's REML GP and J+GP at each given fixed nugget
(relative to the kernel variance), to show which of the table's numbers the nugget sets::

    .venv/bin/python benchmarks/pion_gpmp_reml.py --nuggets 1e-12 1e-10 1e-8 1e-6 --p 1 5 9
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from scipy.stats import norm  # noqa: E402

#: Pion & Vazquez (2024), Table 1: (REML 90% width, REML IAE, J+GP width, J+GP IAE).
PAPER = {
    ("branin", 1): (14.0, 0.24, 8.7, 0.06),
    ("branin", 5): (0.52, 0.12, 0.51, 0.10),
    ("branin", 9): (0.75, 0.08, 0.88, 0.09),
    ("goldstein_price", 1): (6.4e4, 0.19, 7.0e4, 0.06),
    ("goldstein_price", 5): (3.3e4, 0.09, 4.8e4, 0.08),
    ("goldstein_price", 9): (2.9e4, 0.11, 4.5e4, 0.08),
    ("hartmann6", 1): (0.68, 0.14, 0.56, 0.03),
    ("hartmann6", 5): (0.64, 0.11, 0.56, 0.04),
    ("hartmann6", 9): (0.63, 0.11, 0.56, 0.04),
}
#: IAE levels of the paper's code: alpha = linspace(0.02, 0.98, 20), coverage 1 - alpha.
LEVELS = 1.0 - np.linspace(0.02, 0.98, 20)
NUGGET = 1e-12  # models/pion2024-table1-p*.toml
GPMP_NUGGET = 10 * np.finfo(float).eps  # gpmp.kernel.maternp_covariance_ii_or_tt


def iae_gaussian(y, mean, sd):
    """IAE of central Gaussian intervals over :data:`LEVELS` (the paper's ``iae_alpha``)."""
    half = norm.ppf(0.5 + LEVELS / 2)[:, None] * sd[None, :]
    cover = np.mean(np.abs(y - mean)[None, :] <= half, axis=1)
    return float(np.mean(np.abs(cover - LEVELS)))


def iae_intervals(y, lower, upper):
    cover = np.mean((y[None, :] >= lower) & (y[None, :] <= upper), axis=1)
    return float(np.mean(np.abs(cover - LEVELS)))


def designs(function, repetitions, seed):
    from calibprob.datasets.functions import get_function

    f = get_function(function)
    lo, hi = np.asarray(f.lower), np.asarray(f.upper)
    d = lo.size
    for r in range(repetitions):
        rng = np.random.default_rng([seed, r])
        X = lo + (hi - lo) * rng.uniform(size=(20 * d, d))
        Xt = lo + (hi - lo) * rng.uniform(size=(1100, d))
        yield X, np.asarray(f(X), float), Xt, np.asarray(f(Xt), float)


def gpmp_side(npz, out, p):
    """Runs under the GPmp interpreter: REML as in the paper's public code."""
    import importlib.metadata
    import importlib.util  # noqa: F401  (GPmp 0.9.14/0.9.15 call importlib.util without importing it)

    import gpmp as gp
    import gpmp.num as gnp

    def kernel(x, z, covparam, pairwise=False):
        return gp.kernel.maternp_covariance(x, z, p, covparam, pairwise)

    def constant_mean(x, param):
        return gnp.ones((x.shape[0], 1))

    data = np.load(npz)
    R = int(data["R"])
    covparams, means, variances = [], [], []
    for r in range(R):
        X, y, Xt = (gnp.asarray(data[f"{k}{r}"]) for k in ("X", "y", "Xt"))
        model = gp.core.Model(constant_mean, kernel)
        model = gp.kernel.select_parameters_with_reml(model, X, y)
        zpm, zpv = model.predict(X, y, Xt, convert_out=True)
        covparams.append(np.asarray(model.covparam, float))
        means.append(np.asarray(zpm, float).ravel())
        variances.append(np.asarray(zpv, float).ravel())
    np.savez(out, covparam=np.array(covparams), mean=np.array(means), var=np.array(variances))
    print("RESULT " + json.dumps({"gpmp": importlib.metadata.version("gpmp")}))


def gp_at(theta_or_none, p, X, y, seed, nugget=NUGGET):
    from calibprob.bases.gp import GaussianProcessRegressor

    kw = dict(kernel="matern", p=p, mean="constant", objective="reml", noise=False, nugget=nugget)
    if theta_or_none is None:
        return GaussianProcessRegressor(n_restarts=3, random_state=seed, **kw).fit(X, y)
    return GaussianProcessRegressor(theta=theta_or_none, optimize=False, **kw).fit(X, y)


def interval_scores(model, mean, sd, Xt, yt):
    """REML 90 % width, REML IAE, J+GP 90 % width, J+GP IAE of a fitted GP (the table's four numbers)."""
    from calibprob.calibrators.conformal import JackknifePlusGP

    n = model.X_train_.shape[0]
    # levels above n/(n+1) have an unbounded jackknife+ interval (coverage 1)
    ok = LEVELS <= n / (n + 1.0)
    lower = np.full((LEVELS.size, len(yt)), -np.inf)
    upper = np.full((LEVELS.size, len(yt)), np.inf)
    iv = JackknifePlusGP(estimator=model, prefit=True, confidence_level=list(LEVELS[ok])).fit().predict_interval(Xt)
    lower[ok], upper[ok] = np.asarray(iv["lower"]).T, np.asarray(iv["upper"]).T
    k90 = int(np.argmin(np.abs(LEVELS - 0.9)))
    return (
        2 * norm.ppf(0.95) * float(np.mean(sd)),
        iae_gaussian(yt, mean, sd),
        float(np.mean(upper[k90] - lower[k90])),
        iae_intervals(yt, lower, upper),
    )


def nugget_sweep(function, ps, nuggets, repetitions, seed):
    """calibprob's REML GP and J+GP at several fixed nuggets: how much of each number the nugget sets."""
    data = list(designs(function, repetitions, seed))
    print(
        f"{function}: calibprob REML at fixed nuggets (relative to the kernel variance); "
        f"{repetitions} uniform designs of {data[0][0].shape[0]} points; mean (s.e.) over repetitions"
    )
    print(f"{'p':>2} {'nugget':>8s} {'REML W90':>17s} {'REML IAE':>15s} {'J+GP W90':>17s} {'J+GP IAE':>15s}")
    for p in ps:
        for nugget in nuggets:
            v = np.array(
                [
                    interval_scores(m, *m.predict_mean_std(Xt), Xt, yt)
                    for r, (X, y, Xt, yt) in enumerate(data)
                    for m in [gp_at(None, p, X, y, r, nugget=nugget)]
                ]
            )
            m, se = v.mean(axis=0), v.std(axis=0, ddof=1) / np.sqrt(len(v))
            print(f"{p:>2} {nugget:>8.0e} " + " ".join(f"{a:>9.4g} ({b:.2g})" for a, b in zip(m, se)))
            if len(v) >= 80:  # the spread of the table's statistic: means over disjoint sets of 40 designs
                blocks = v[: len(v) // 40 * 40].reshape(-1, 40, 4).mean(axis=1)
                print(
                    f"   {len(blocks)} disjoint sets of 40 designs: REML W90 {blocks[:, 0].min():.3g}-"
                    f"{blocks[:, 0].max():.3g}, J+GP W90 {blocks[:, 2].min():.3g}-{blocks[:, 2].max():.3g}"
                )
        pw = PAPER[(function, p)]
        print(f"{p:>2} {'paper':>8s} {pw[0]:>17.4g} {pw[1]:>15.4g} {pw[2]:>17.4g} {pw[3]:>15.4g}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpmp", help="python of the GPmp environment")
    ap.add_argument("--function", default="branin", choices=sorted({k[0] for k in PAPER}))
    ap.add_argument("--p", type=int, nargs="+", default=[5, 9], choices=[1, 5, 9])
    ap.add_argument("--repetitions", type=int, default=40)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument(
        "--nuggets",
        type=float,
        nargs="+",
        help="calibprob only (no GPmp): the table's numbers at each of these fixed nuggets",
    )
    ap.add_argument("--gpmp-side", nargs=3, metavar=("NPZ", "OUT", "P"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.repetitions < 2:
        ap.error(f"--repetitions must be >= 2 (the table prints standard errors); got {args.repetitions}.")
    if args.gpmp_side:
        gpmp_side(args.gpmp_side[0], args.gpmp_side[1], int(args.gpmp_side[2]))
        return
    if args.nuggets:
        bad = [v for v in args.nuggets if not 0 < v < 1]
        if bad:
            ap.error(f"--nuggets must lie in (0, 1) (relative to the kernel variance); got {bad}.")
        nugget_sweep(args.function, args.p, args.nuggets, args.repetitions, args.seed)
        return
    if not args.gpmp:
        print(
            "Pion/GPmp check skipped: GPmp lives in a separate environment; run with --gpmp "
            "/path/to/python (this script's docstring shows how to build it)"
        )
        return
    data = list(designs(args.function, args.repetitions, args.seed))
    print(
        f"{args.function}: {args.repetitions} uniform designs of {data[0][0].shape[0]} points, "
        f"1100 test points; mean (s.e.) over repetitions"
    )
    header = (
        f"{'p':>2} {'fit':24s} {'REML W90':>17s} {'REML IAE':>15s} {'J+GP W90':>17s} "
        f"{'J+GP IAE':>15s} {'REML loglik 1e-12':>17s} {'at 10 eps':>15s}"
    )
    print(header)
    for p in args.p:
        with tempfile.TemporaryDirectory() as tmp:
            npz, out = Path(tmp) / "designs.npz", Path(tmp) / "gpmp.npz"
            arrays = {"R": len(data)}
            for r, (X, y, Xt, _) in enumerate(data):
                arrays.update({f"X{r}": X, f"y{r}": y, f"Xt{r}": Xt})
            np.savez(npz, **arrays)
            proc = subprocess.run(
                [args.gpmp, __file__, "--gpmp-side", str(npz), str(out), str(p)], capture_output=True, text=True
            )
            if proc.returncode != 0:
                sys.exit(f"GPmp side failed:\n{proc.stderr}")
            g = dict(np.load(out))
            version = json.loads(proc.stdout.split("RESULT ", 1)[1])["gpmp"]
        gname = f"GPmp {version} REML"
        rows = {gname: [], "calibprob REML": []}
        for r, (X, y, Xt, yt) in enumerate(data):
            cp = g["covparam"][r]
            # GPmp's Matérn scales distances by 2 sqrt(nu) / rho; PyMC's by sqrt(2 nu) / ell
            theta_g = {"lengthscale": np.exp(-cp[1:]) / np.sqrt(2.0), "variance": float(np.exp(cp[0]))}
            fits = {gname: gp_at(theta_g, p, X, y, r), "calibprob REML": gp_at(None, p, X, y, r)}
            for name, model in fits.items():
                if name == gname:
                    mean, sd = g["mean"][r], np.sqrt(np.maximum(g["var"][r], 0.0))
                else:
                    mean, sd = model.predict_mean_std(Xt)
                rows[name].append(
                    (
                        *interval_scores(model, mean, sd, Xt, yt),
                        float(model.log_marginal_likelihood_value_),
                        float(
                            gp_at(
                                {k: model.theta_[k] for k in ("lengthscale", "variance")},
                                p,
                                X,
                                y,
                                r,
                                nugget=GPMP_NUGGET,
                            ).log_marginal_likelihood_value_
                        ),
                    )
                )
        for name, vals in rows.items():
            v = np.array(vals)
            m, se = v.mean(axis=0), v.std(axis=0, ddof=1) / np.sqrt(len(v))
            print(f"{p:>2} {name:24s} " + " ".join(f"{a:>9.4g} ({b:.2g})" for a, b in zip(m, se)))
        pw = PAPER[(args.function, p)]
        print(f"{p:>2} {'paper (Table 1)':24s} {pw[0]:>17.4g} {pw[1]:>15.4g} {pw[2]:>17.4g} {pw[3]:>15.4g}")
        diff = np.array(rows["calibprob REML"])[:, 4:] - np.array(rows[gname])[:, 4:]
        for j, nug in enumerate(("1e-12 (calibprob's)", "10 eps (GPmp's)")):
            print(
                f"   nugget {nug}: calibprob's optimum higher than GPmp's in {np.mean(diff[:, j] > 1e-6):.0%} "
                f"of the designs (median difference {np.median(diff[:, j]):+.2f} nats)"
            )


if __name__ == "__main__":
    main()
