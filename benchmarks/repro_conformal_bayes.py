"""Reproduce Fong & Holmes' (2021) conformal-Bayes tables (issue 29, acceptance 1).

Protocol (the authors' ``run_scripts``, edfong/conformal_bayes @0c6d1c1, read in
``../shared/notes/bayesian-conformal.md`` §2):

* **diabetes / boston, sparse regression.** X and y standardised with the
  *full-data* mean and (population) sd before splitting, as the authors do "for
  validity"; 70/30 split ``train_test_split(train_size=int(0.7 n), random_state=100+j)``
  (reproduced without scikit-learn: ``RandomState(seed).permutation(n)``, test =
  the first ``n - n_train`` indices, train = the rest, exactly ShuffleSplit's rule);
  model y ~ N(Xβ + β0, σ²), β_k ~ Laplace(0, b), b ~ Gamma(1, 1), β0 ~ Flat,
  σ ~ HalfNormal(c), c = 1 or 0.02 ("misspec"); NUTS 4 chains × 2000 draws after
  1000 tuning steps (PyMC3's default, which they used), seed 100+j.
* **hierarchical simulation (misspecified).** K = 5 groups, p = 1, 10 train + 10 test
  per group, slopes fixed by ``np.random.seed(24)``, per-group noise sd ~ Exp(1)
  while the model shares one σ; non-centred varying intercepts and slopes,
  σ ~ Exp(1); 2000 tuning steps, target_accept 0.99 (the authors' settings).
* α = 0.2; grid of 100 points on [min y_train − 2, max y_train + 2]
  ([−10, 10] for the simulation); the Bayes band is the authors' grid rule
  (the grid points whose posterior-predictive cdf is nearest α/2 and 1 − α/2).

Per repetition only the posterior draws of (β, β0, σ) are cached (the Normal
likelihood gives every log density in closed form from them), under
``$CALIBPROB_CACHE/cbrepro`` (default ``/work/cache/cbrepro``): the run is resumable.

Run::

    .venv/bin/python benchmarks/repro_conformal_bayes.py sample --reps 50   # the MCMC (hours)
    .venv/bin/python benchmarks/repro_conformal_bayes.py table              # the table from the cache
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np

ALPHA = 0.2
TRAIN_FRAC = 0.7
DRAWS, CHAINS = 2000, 4
EXPERIMENTS = ("diabetes", "diabetes_misspec", "boston", "hier_sim_misspec")
CACHE = Path(os.environ.get("CALIBPROB_CACHE", "/work/cache")) / "cbrepro"
#: "nutpie" (Rust NUTS, compiled once per model, data swapped per repetition) or "pymc"
#: (PyMC's own NUTS, about 25x slower here); the cache of the latter is kept apart.
SAMPLER = os.environ.get("CBREPRO_SAMPLER", "nutpie")


def _cache_dir() -> Path:
    return CACHE if SAMPLER == "nutpie" else CACHE / SAMPLER


# ----------------------------------------------------------------------------- data
def _standardise(a: np.ndarray) -> np.ndarray:
    # population sd (ddof=0), full data, as np.std in the authors' load_data.py
    return (a - a.mean(axis=0)) / a.std(axis=0)


def load_split(dataset: str, seed: int):
    """The authors' split: standardised (X, y) on all rows, then a seeded 70/30 split.

    Returns ``x_train, y_train, x_test, y_test, grid``.
    """
    from calibprob.datasets import load_dataset

    ds = load_dataset(dataset)
    x = _standardise(ds["X"].values.astype(float))
    y = _standardise(ds["y"].values.astype(float))
    n = len(y)
    n_train = int(TRAIN_FRAC * n)
    # sklearn.model_selection.train_test_split(..., train_size=n_train, random_state=seed):
    # ShuffleSplit permutes with RandomState(seed); test = first n - n_train, train = next n_train.
    perm = np.random.RandomState(seed).permutation(n)
    ind_test, ind_train = perm[: n - n_train], perm[n - n_train :]
    yt = y[ind_train]
    grid = np.linspace(yt.min() - 2.0, yt.max() + 2.0, 100)
    return x[ind_train], yt, x[ind_test], y[ind_test], grid


def gen_hier(seed: int, *, n: int = 10, n_test: int = 10, k: int = 5, misspec: bool = True):
    """The authors' hierarchical simulation (``gen_data_hier``, p = 1), same legacy-RNG calls.

    Returns ``x_train, g_train, y_train, x_test, g_test, y_test, grid``.
    """
    np.random.seed(24)
    beta_true = np.random.randn(k, 1)
    sigma_true = np.random.exponential(size=k, scale=1)
    np.random.seed(seed)
    out = []
    for m in (n, n_test):
        xs, gs, ys = [], [], []
        for j in range(k):
            eps = np.random.randn(m) * (sigma_true[j] if misspec else 1.0)
            xj = np.random.randn(m, 1)
            xs.append(xj[:, 0])
            gs.append(np.full(m, j))
            ys.append(xj @ beta_true[j] + eps)
        out += [np.concatenate(xs), np.concatenate(gs), np.concatenate(ys)]
    np.random.seed(None)
    return (*out, np.linspace(-10.0, 10.0, 100))


# ----------------------------------------------------------------------------- models
def sparse_model(x, y, noise_prior_scale: float):
    """The authors' Laplace sparse regression, X and y as ``pm.Data`` on an ``obs`` dim."""
    import pymc as pm

    coords = {"obs": np.arange(len(y)), "feature": np.arange(x.shape[1])}
    with pm.Model(coords=coords) as model:
        xd = pm.Data("X", x, dims=("obs", "feature"))
        yd = pm.Data("y_data", y, dims="obs")
        b = pm.Gamma("b", alpha=1.0, beta=1.0)
        beta = pm.Laplace("beta", mu=0.0, b=b, dims="feature")
        intercept = pm.Flat("intercept")
        # a Data scalar, so that c = 1 and c = 0.02 share one compiled model
        c = pm.Data("noise_prior_scale", float(noise_prior_scale))
        sigma = pm.HalfNormal("sigma", sigma=c)
        mu = pm.Deterministic("mu", pm.math.dot(xd, beta) + intercept, dims="obs")
        pm.Normal("y", mu=mu, sigma=sigma, observed=yd, shape=mu.shape, dims="obs")
    return model


def hier_model(x, g, y, k: int = 5):
    """The authors' non-centred varying-intercept, varying-slope model, one shared σ ~ Exp(1)."""
    import pymc as pm

    coords = {"obs": np.arange(len(y)), "group": np.arange(k)}
    with pm.Model(coords=coords) as model:
        xd = pm.Data("x", x, dims="obs")
        gd = pm.Data("group_index", g.astype("int64"), dims="obs")
        yd = pm.Data("y_data", y, dims="obs")
        a = pm.Normal("a", 0.0, 1.0)
        sigma_a = pm.Exponential("sigma_a", 1.0)
        b = pm.Normal("b", 0.0, 1.0)
        sigma_b = pm.Exponential("sigma_b", 1.0)
        za = pm.Normal("za_group", 0.0, 1.0, dims="group")
        zb = pm.Normal("zb_group", 0.0, 1.0, dims="group")
        intercept = pm.Deterministic("intercept", a + za * sigma_a, dims="group")
        slope = pm.Deterministic("beta", b + zb * sigma_b, dims="group")
        mu = intercept[gd] + slope[gd] * xd
        sigma = pm.Exponential("sigma", 1.0)
        pm.Normal("y", mu=mu, sigma=sigma, observed=yd, shape=mu.shape, dims="obs")
    return model


_COMPILED: dict = {}


def _sample(model, seed: int, tune: int, target_accept: float, data: dict, key: str):
    if SAMPLER == "nutpie":
        import nutpie

        if key not in _COMPILED:
            _COMPILED[key] = nutpie.compile_pymc_model(model)
        compiled = _COMPILED[key].with_data(**data)
        return nutpie.sample(
            compiled,
            draws=DRAWS,
            tune=tune,
            chains=CHAINS,
            cores=1,
            seed=seed,
            target_accept=target_accept,
            progress_bar=False,
        )
    import pymc as pm

    with model:
        pm.set_data(data)

    with model, warnings.catch_warnings():
        warnings.filterwarnings("ignore")
        return pm.sample(
            draws=DRAWS,
            tune=tune,
            chains=CHAINS,
            cores=1,
            random_seed=seed,
            target_accept=target_accept,
            nuts_sampler="pymc",
            progressbar=False,
            quiet=True,
            compute_convergence_checks=False,
        )


def _flat(post, name):
    a = post[name].values
    return a.reshape(a.shape[0] * a.shape[1], *a.shape[2:])


_MODELS: dict = {}


def _reuse(key, build):
    """One model per data set, its ``pm.Data`` swapped per repetition (the shapes do not change)."""
    if key not in _MODELS:
        _MODELS[key] = build()
    return _MODELS[key]


def sample_rep(experiment: str, rep: int) -> Path:
    """Fit repetition ``rep`` of ``experiment`` and cache its posterior draws (skips if cached)."""
    path = _cache_dir() / f"{experiment}_rep{rep:02d}.npz"
    if path.exists():
        return path
    seed = 100 + rep
    t0 = time.perf_counter()
    if experiment.startswith("hier"):
        x, g, y, *_ = gen_hier(seed)
        data = {"x": x, "group_index": g.astype("int64"), "y_data": y}
        model = _reuse("hier", lambda: hier_model(x, g, y))
        idata = _sample(model, seed, tune=2000, target_accept=0.99, data=data, key="hier")
    else:
        dataset = experiment.split("_")[0]
        x, y, *_ = load_split(dataset, seed)
        c = 0.02 if experiment.endswith("misspec") else 1.0
        data = {"X": x, "y_data": y, "noise_prior_scale": np.asarray(c)}
        model = _reuse(dataset, lambda: sparse_model(x, y, c))
        idata = _sample(model, seed, tune=1000, target_accept=0.8, data=data, key=dataset)
    elapsed = time.perf_counter() - t0
    post = idata["posterior"].to_dataset()
    div = int(idata["sample_stats"]["diverging"].values.sum())
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(
        tmp,
        beta=_flat(post, "beta"),
        intercept=_flat(post, "intercept"),
        sigma=_flat(post, "sigma"),
        seconds=elapsed,
        divergences=div,
    )
    tmp.replace(path)  # atomic: an interrupted run never leaves a half-written repetition
    return path


def main_sample(args) -> None:
    exps = args.experiments or list(EXPERIMENTS)
    for rep in range(args.start, args.reps):
        for exp in exps:
            t0 = time.perf_counter()
            existed = (_cache_dir() / f"{exp}_rep{rep:02d}.npz").exists()
            path = sample_rep(exp, rep)
            if not existed:
                d = np.load(path)
                print(
                    f"{time.strftime('%H:%M:%S')} {exp} rep {rep}: {time.perf_counter() - t0:.1f} s "
                    f"(sampling {float(d['seconds']):.1f} s), divergences {int(d['divergences'])}, "
                    f"mean sigma {float(d['sigma'].mean()):.3f}",
                    flush=True,
                )


def main_evaluate(args) -> None:
    """Evaluate the cached repetitions round-robin over the experiments (rep 0 of each, then 1...),
    so that an interrupted run leaves every experiment with about as many repetitions."""
    exps = args.experiments or list(EXPERIMENTS)
    for rep in range(args.reps):
        for exp in exps:
            if rep in cached_reps(exp, args.reps):
                res = evaluate_rep(exp, rep, args.engine)
                print(
                    f"{time.strftime('%H:%M:%S')} {exp} rep {rep}: CB cov {np.mean(res['cov_cb']):.3f} "
                    f"({float(res.get('eval_seconds', np.nan)):.1f} s)",
                    flush=True,
                )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    ps = sub.add_parser("sample", help="run (or resume) the MCMC and cache the draws")
    ps.add_argument("--reps", type=int, default=50)
    ps.add_argument("--start", type=int, default=0)
    ps.add_argument("--experiments", nargs="*", choices=EXPERIMENTS)
    pt = sub.add_parser("table", help="the table from the cache")
    pt.add_argument("--reps", type=int, default=50)
    pt.add_argument("--experiments", nargs="*", choices=EXPERIMENTS)
    pt.add_argument("--engine", choices=("calibprob", "reference"), default="calibprob")
    pt.add_argument("--verbose", action="store_true")
    pt.add_argument("--only-evaluated", action="store_true", help="skip repetitions not yet evaluated")
    pe = sub.add_parser("evaluate", help="evaluate the cached repetitions round-robin (cached)")
    pe.add_argument("--reps", type=int, default=50)
    pe.add_argument("--experiments", nargs="*", choices=EXPERIMENTS)
    pe.add_argument("--engine", choices=("calibprob", "reference"), default="calibprob")
    args = parser.parse_args(argv)
    {"sample": main_sample, "table": main_table, "evaluate": main_evaluate}[args.cmd](args)


# ----------------------------------------------------------------------------- evaluation
def _normal_logpdf(y, mu, sigma):
    return -0.5 * ((y - mu) / sigma) ** 2 - np.log(sigma) - 0.5 * np.log(2.0 * np.pi)


def _normal_logpdf_inplace(y, mu, sigma):
    """:func:`_normal_logpdf` bit for bit (the same operations in the same order), in place: one
    temporary instead of five over the (S, chunk, G) block."""
    z = np.subtract(y, mu)
    z /= sigma
    z *= z
    z *= -0.5
    z -= np.log(sigma)
    z -= 0.5 * np.log(2.0 * np.pi)
    return z


def rep_inputs(experiment: str, rep: int):
    """Everything conformal Bayes and the Bayes band need for one cached repetition.

    Returns a dict: ``ll`` (S, n) training log-likelihood, ``mu_test`` (S, m), ``sigma`` (S, 1),
    ``y_test`` (m,), ``grid`` (G,), and for the simulation ``g_train``, ``g_test``.
    """
    d = np.load(_cache_dir() / f"{experiment}_rep{rep:02d}.npz")
    beta, icpt, sigma = d["beta"], d["intercept"], d["sigma"][:, None]
    seed = 100 + rep
    out: dict = {"seconds": float(d["seconds"]), "divergences": int(d["divergences"])}
    if experiment.startswith("hier"):
        x, g, y, xt, gt, yt, grid = gen_hier(seed)
        mu, mu_t = icpt[:, g] + beta[:, g] * x, icpt[:, gt] + beta[:, gt] * xt
        out.update(g_train=g, g_test=gt)
    else:
        x, y, xt, yt, grid = load_split(experiment.split("_")[0], seed)
        mu, mu_t = beta @ x.T + icpt[:, None], beta @ xt.T + icpt[:, None]
    out.update(ll=_normal_logpdf(y, mu, sigma), mu_test=mu_t, sigma=sigma, y_test=yt, grid=grid)
    return out


def bayes_band(mu_test, sigma, grid, alpha: float = ALPHA):
    r"""The authors' Bayes band: the grid points whose posterior-predictive cdf
    :math:`\bar F(y_g) = S^{-1}\sum_s \Phi((y_g - \mu_s)/\sigma_s)` is nearest α/2 and 1 − α/2."""
    from scipy.special import ndtr

    band = np.empty((mu_test.shape[1], 2))
    for j in range(mu_test.shape[1]):
        cdf = ndtr((grid[:, None] - mu_test[None, :, j]) / sigma[None, :, 0]).mean(axis=1)
        band[j] = grid[np.argmin(np.abs(cdf - alpha / 2))], grid[np.argmin(np.abs(cdf - (1 - alpha / 2)))]
    return band


def reference_kept(ll, logf, alpha: float = ALPHA, members=None):
    """Independent check only (not the package's code path): the authors' ``compute_rank_IS``
    and ``compute_cb_region_IS`` in NumPy. ``logf`` (S, G) at one test point; returns the kept mask (G,)."""
    from scipy.special import logsumexp

    if members is not None:
        ll = ll[:, members]
    lw = logf - logsumexp(logf, axis=0, keepdims=True)  # (S, G) normalised AOI log weights
    c = ll.max(axis=0)
    log_sig = c[None, :] + np.log(np.exp(lw).T @ np.exp(ll - c))  # (G, n)
    log_new = logsumexp(lw + logf, axis=0)  # (G,)
    rank = (log_sig <= log_new[:, None]).sum(axis=1) + 1
    return rank / (ll.shape[1] + 1.0) > alpha


def cb_kept(inp, engine: str, chunk: int = 32):
    """Kept grid mask (m, G) of conformal Bayes at every test point, by ``engine``."""
    grid, mu_t, sigma, ll = inp["grid"], inp["mu_test"], inp["sigma"], inp["ll"]
    m = mu_t.shape[1]
    kept = np.empty((m, len(grid)), bool)
    if engine == "reference":
        for j in range(m):
            logf = _normal_logpdf(grid[None, :], mu_t[:, j : j + 1], sigma)
            mem = None if "g_train" not in inp else inp["g_train"] == inp["g_test"][j]
            kept[j] = reference_kept(ll, logf, members=mem)
        return kept, None
    import calibprob

    # min_grid_mass=0: the authors' fixed grid, kept as is (calibprob would refuse a test point whose
    # predictive leaves it; Boston has a few with 95 % of their mass on it)
    cb = calibprob.ConformalBayes(confidence_level=1 - ALPHA, pareto_k=False, min_grid_mass=0.0)
    grouped = "g_train" in inp
    cb.fit(ll, groups=inp["g_train"] if grouped else None)
    ends = np.empty((m, 2))
    for j0 in range(0, m, chunk):
        sl = slice(j0, min(j0 + chunk, m))
        logf = _normal_logpdf_inplace(grid[None, None, :], mu_t[:, sl, None], sigma[:, :, None])

        def log_density(rows, y, sl=sl):  # the exact test density at any candidate: the ends are refined on it
            return _normal_logpdf(y[None], mu_t[:, sl][:, rows, None], sigma[:, :, None])

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ESS warnings at far grid tails are expected here
            ds = cb.predict(logf, grid, groups=inp["g_test"][sl] if grouped else None, log_density=log_density)
        thr = np.floor(ALPHA * (ds["n_ranked"].values + 1.0))
        kept[sl] = ds["p_value"].values * (ds["n_ranked"].values[:, None] + 1.0) > thr[:, None] + 1e-9
        ends[sl] = np.stack([ds["lower"].values[:, 0], ds["upper"].values[:, 0]], axis=1)
    return kept, ends


def evaluate_rep(experiment: str, rep: int, engine: str) -> dict:
    """Per-test-point coverage and length of Bayes and conformal Bayes for one repetition,
    cached beside the draws (``*_eval_<engine>.npz``)."""
    path = _cache_dir() / f"{experiment}_rep{rep:02d}_eval_{engine}.npz"
    if path.exists():
        with np.load(path) as d:
            return {k: d[k] for k in d.files}
    t0 = time.perf_counter()
    res = _evaluate_rep(experiment, rep, engine)
    res["eval_seconds"] = time.perf_counter() - t0
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, **res)
    tmp.replace(path)
    return res


def _evaluate_rep(experiment: str, rep: int, engine: str) -> dict:
    inp = rep_inputs(experiment, rep)
    grid, yt = inp["grid"], inp["y_test"]
    dy = grid[1] - grid[0]
    band = bayes_band(inp["mu_test"], inp["sigma"], grid)
    kept, ends = cb_kept(inp, engine)
    nearest = np.argmin(np.abs(yt[:, None] - grid[None, :]), axis=1)
    res = {
        "cov_bayes": (yt >= band[:, 0]) & (yt <= band[:, 1]),
        "len_bayes": band[:, 1] - band[:, 0],
        "cov_cb": kept[np.arange(len(yt)), nearest],
        "len_cb": kept.sum(axis=1) * dy,
        "seconds": inp["seconds"],
        "divergences": inp["divergences"],
    }
    if ends is not None:  # issue 35: the interval a user reads (calibprob's refined ends), counted on y itself
        res["cov_cb_interval"] = (yt >= ends[:, 0]) & (yt <= ends[:, 1])
        res["len_cb_interval"] = ends[:, 1] - ends[:, 0]
    if "g_test" in inp:
        res["group"] = inp["g_test"]
    return res


def cached_reps(experiment: str, reps: int, engine: str | None = None) -> list[int]:
    """Repetitions whose draws are cached (with ``engine``: whose evaluation by it is cached)."""
    suffix = "" if engine is None else f"_eval_{engine}"
    return [r for r in range(reps) if (_cache_dir() / f"{experiment}_rep{r:02d}{suffix}.npz").exists()]


def summarise(experiment: str, reps: int, engine: str, verbose: bool = False, only_evaluated: bool = False) -> dict:
    """Mean over test points per repetition, then mean and SE over repetitions (the authors' eval.py)."""
    done = cached_reps(experiment, reps, engine if only_evaluated else None)
    rows = []
    for r in done:
        rows.append(evaluate_rep(experiment, r, engine))
        if verbose:
            print(f"  {experiment} rep {r} evaluated", flush=True)
    out: dict = {"experiment": experiment, "reps": len(done)}
    if not rows:
        return out
    for key in ("cov_bayes", "len_bayes", "cov_cb", "len_cb", "cov_cb_interval", "len_cb_interval"):
        if key not in rows[0]:  # the reference engine reports the grid count only
            continue
        # an empty set (narrower than the grid spacing: no grid point kept) has no ends (NaN, counted as a
        # miss) and a set reaching the grid's edge an infinite one: the mean length is over finite intervals
        per_rep = np.array([np.mean(r[key][np.isfinite(r[key])]) for r in rows])
        out[key] = (float(per_rep.mean()), float(per_rep.std() / np.sqrt(len(per_rep))))
    if "len_cb_interval" in rows[0]:
        out["cb_interval_empty"] = int(sum(np.isnan(r["len_cb_interval"]).sum() for r in rows))
        out["cb_interval_infinite"] = int(sum(np.isinf(r["len_cb_interval"]).sum() for r in rows))
    out["mcmc_seconds"] = float(np.median([r["seconds"] for r in rows]))  # rep 0 includes the compile
    out["divergences"] = int(sum(r["divergences"] for r in rows))
    if "group" in rows[0]:
        groups = np.unique(rows[0]["group"])
        for key in ("cov_bayes", "cov_cb", "len_bayes", "len_cb", "cov_cb_interval", "len_cb_interval"):
            if key not in rows[0]:
                continue
            out[key + "_group"] = [float(np.mean([np.mean(r[key][r["group"] == k]) for r in rows])) for k in groups]
    return out


#: The authors' result files (notes §2): Bayes cov, CB cov, Bayes len, CB len.
AUTHORS = {
    "diabetes": (0.806, 0.808, 1.84, 1.87),
    "diabetes_misspec": (0.563, 0.809, 1.14, 1.87),
    "boston": (0.860, 0.800, 1.35, 1.12),
    "hier_sim_misspec": (0.830, 0.811, 3.61, 3.65),
}


def _cell(s: dict, key: str, digits: int, se: bool = False) -> str:
    if key not in s:
        return "-"
    mean, err = s[key]
    return f"{mean:.{digits}f} ({err:.{digits}f})" if se else f"{mean:.{digits}f}"


def _markdown(rows: list[dict]) -> None:
    print(
        "| experiment | reps | Bayes cov | CB cov | Bayes len | CB len | CB interval cov | CB interval len "
        "| authors Bayes cov / CB cov / Bayes len / CB len |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for s in rows:
        a = AUTHORS[s["experiment"]]
        print(
            f"| {s['experiment']} | {s['reps']} | {s['cov_bayes'][0]:.3f} ({s['cov_bayes'][1]:.3f}) | "
            f"{s['cov_cb'][0]:.3f} ({s['cov_cb'][1]:.3f}) | {s['len_bayes'][0]:.2f} | {s['len_cb'][0]:.2f} | "
            f"{_cell(s, 'cov_cb_interval', 3, se=True)} | {_cell(s, 'len_cb_interval', 2)} | "
            f"{a[0]:.3f} / {a[1]:.3f} / {a[2]:.2f} / {a[3]:.2f} |"
        )


def main_table(args) -> None:
    rows = []
    for exp in args.experiments or EXPERIMENTS:
        s = summarise(exp, args.reps, args.engine, verbose=args.verbose, only_evaluated=args.only_evaluated)
        if s["reps"] == 0:
            print(f"{exp}: no cached repetitions")
            continue
        rows.append(s)
        a = AUTHORS[exp]
        print(
            f"{exp} ({s['reps']} reps, MCMC median {s['mcmc_seconds']:.1f} s/rep, {s['divergences']} divergences): "
            f"Bayes cov {s['cov_bayes'][0]:.3f} ({s['cov_bayes'][1]:.3f}) len {s['len_bayes'][0]:.2f}; "
            f"CB cov {s['cov_cb'][0]:.3f} ({s['cov_cb'][1]:.3f}) len {s['len_cb'][0]:.2f} | "
            f"authors: Bayes {a[0]:.3f}/{a[2]:.2f}, CB {a[1]:.3f}/{a[3]:.2f}"
        )
        if "cov_cb_interval" in s:
            print(
                f"  CB on the interval a user reads (ends refined on the exact p-value): cov "
                f"{s['cov_cb_interval'][0]:.3f} ({s['cov_cb_interval'][1]:.3f}) len {s['len_cb_interval'][0]:.2f} "
                f"(finite ones; {s['cb_interval_empty']} empty: narrower than the grid spacing, counted as misses; "
                f"{s['cb_interval_infinite']} reaching the grid's edge)"
            )
        if "cov_cb_group" in s:
            for key in ("cov_bayes_group", "cov_cb_group", "len_bayes_group", "len_cb_group", "cov_cb_interval_group"):
                if key in s:
                    print(f"  {key}: " + ", ".join(f"{v:.3f}" for v in s[key]))
    if rows:
        _markdown(rows)


if __name__ == "__main__":
    main()
