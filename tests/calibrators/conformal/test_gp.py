"""GP-specific conformal methods against brute force.

* closed-form leave-one-out at design and test points == n explicit refits (fixed hyperparameters);
* J+GP / asymJ+GP / GP jackknife+ == CrossConformalRegressor with n explicit GP refits, to 1e-8;
* FCP-GP == grid search over the candidate y with a refit for every candidate and every
  left-out point, to the grid's resolution;
* coverage guarantees over seeded draws (FCP >= c, J+GP >= 2c - 1);
both for noisy regression and for interpolation (tiny nugget), zero and constant (GLS) mean;
* Pion & Vazquez (2024) Table 1 rows from the shipped specs in ``models/`` (all 40 repetitions):
  Branin p = 1 and Goldstein-Price p = 5 in the default run, Hartmann6 p = 9 and the one row
  not reproduced (Branin p = 9, pinned as measured) in the slow run.
"""

import math

import numpy as np
import pytest

from calibprob.bases.gp.kernels import matern
from calibprob.calibrators.conformal import CrossConformalRegressor
from calibprob.calibrators.conformal.gp import (
    full_conformal_gp_bounds,
    jackknife_plus_gp_bounds,
    kriging_predict,
    kriging_system,
    loo_at_points,
)
from tests.support.paths import MODELS

LS = np.array([0.3, 0.45])
VAR = 1.7


def kern(A, B=None, p=2):
    return matern(A, B, LS[: A.shape[1]], VAR, p)


def f(X):
    return np.sin(4 * X[:, 0]) + (X[:, 1] - 0.3) ** 2 * 2


# name -> (noise variance, observation noise sd, constant mean)
CASES = {
    "noisy-zero": (0.02, 0.14, False),
    "noisy-const": (0.02, 0.14, True),
    "interp-zero": (1e-8 * VAR, 0.0, False),
    "interp-const": (1e-8 * VAR, 0.0, True),
}


def refit_predict(Xtr, ytr, Xn, noise, const):
    """An independent GP at fixed hyperparameters: explicit solves, GLS constant mean."""
    K = kern(Xtr) + noise * np.eye(len(Xtr))
    kc = kern(Xtr, Xn)
    Kk = np.linalg.solve(K, kc)
    v = VAR + noise - np.einsum("ij,ij->j", kc, Kk)
    if const:
        one = np.ones(len(Xtr))
        K1 = np.linalg.solve(K, one)
        w = 1.0 / (one @ K1)
        b = w * (K1 @ ytr)
        mu = b + Kk.T @ (ytr - b)
        u = 1.0 - one @ Kk
        v = v + w * u * u
    else:
        mu = Kk.T @ ytr
    return mu, np.sqrt(v)


def make(case, n=30, m=25, seed=0):
    noise, sd, const = CASES[case]
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    Xt = rng.uniform(size=(m, 2))
    y = f(X) + sd * rng.normal(size=n) + 3.0  # offset: the constant mean matters
    S = kriging_system(kern(X) + noise * np.eye(n), y, np.ones((n, 1)) if const else None)
    lam, mu, v = kriging_predict(S, kern(X, Xt), np.full(m, VAR + noise), np.ones((m, 1)) if const else None)
    return X, y, Xt, S, lam, mu, v, noise, const


@pytest.mark.parametrize("case", CASES)
def test_closed_form_loo_equals_refits(case):
    X, y, Xt, S, lam, mu, v, noise, const = make(case)
    mu_loo, sd_loo = loo_at_points(S, lam, mu, v)
    n = len(y)
    err = 0.0
    for i in range(n):
        keep = np.arange(n) != i
        m_b, s_b = refit_predict(X[keep], y[keep], np.vstack([X[i : i + 1], Xt]), noise, const)
        err = max(
            err,
            abs(y[i] - m_b[0] - S.loo_residual[i]),
            abs(s_b[0] - S.loo_std[i]),
            np.abs(m_b[1:] - mu_loo[i]).max(),
            np.abs(s_b[1:] - sd_loo[i]).max(),
        )
    full_mu, full_sd = refit_predict(X, y, Xt, noise, const)
    err = max(err, np.abs(full_mu - mu).max(), np.abs(full_sd - np.sqrt(v)).max())
    assert err < 1e-8, err


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("score", ["normalized", "signed", "absolute"])
def test_jackknife_plus_gp_equals_refits(case, score):
    """J+GP (eq. 11-12), asymJ+GP (eq. 13-14), GP jackknife+: closed form == n refits."""
    X, y, Xt, S, lam, mu, v, noise, const = make(case)
    levels = np.array([0.5, 0.8, 0.9])
    lo, hi = jackknife_plus_gp_bounds(S, lam, mu, v, levels, score=score)

    def fp(Xtr, ytr, Xn):
        return refit_predict(Xtr, ytr, Xn, noise, const)

    ref = CrossConformalRegressor(estimator=fp, score=score, confidence_level=levels).fit(X, y).predict_interval(Xt)
    assert np.abs(lo - ref["lower"].values).max() < 1e-8
    assert np.abs(hi - ref["upper"].values).max() < 1e-8


def test_asym_pion_convention_is_one_rank_lower():
    X, y, Xt, S, lam, mu, v, *_ = make("noisy-const", n=40)
    c = np.array([0.9])
    lo_b, hi_b = jackknife_plus_gp_bounds(S, lam, mu, v, c, score="signed")
    lo_p, hi_p = jackknife_plus_gp_bounds(S, lam, mu, v, c, score="signed", convention="pion2024")
    np.testing.assert_array_equal(lo_b, lo_p)
    assert np.all(hi_p <= hi_b) and np.any(hi_p < hi_b)  # floor(0.95*41)=38 vs ceil=39
    mu_loo, sd_loo = loo_at_points(S, lam, mu, v)
    xi = np.sort(mu_loo + (S.loo_residual / S.loo_std)[:, None] * sd_loo, axis=0)
    np.testing.assert_allclose(hi_p[:, 0], xi[37], atol=1e-12)
    np.testing.assert_allclose(hi_b[:, 0], xi[38], atol=1e-12)


def grid_fcp(X, y, x, noise, const, beta, eps, levels, grid):
    """Brute-force FCP: for each candidate z, refit on D_{n+1} minus each point, count scores."""
    n = len(y)
    Xa = np.vstack([X, x[None, :]])
    Ya = np.vstack([np.repeat(y[:, None], grid.size, 1), grid[None, :]])
    R = np.empty((n + 1, grid.size))
    for i in range(n + 1):
        keep = np.arange(n + 1) != i
        K = kern(Xa[keep]) + noise * np.eye(n)
        kc = kern(Xa[keep], Xa[i : i + 1])[:, 0]
        Kk = np.linalg.solve(K, kc)
        var = VAR + noise - kc @ Kk
        Yk = Ya[keep]
        if const:
            one = np.ones(n)
            K1 = np.linalg.solve(K, one)
            w = 1.0 / (one @ K1)
            b = w * (K1 @ Yk)  # one GLS mean per candidate
            m_i = b + Kk @ (Yk - b[None, :])
            var = var + w * (1.0 - one @ Kk) ** 2
        else:
            m_i = Kk @ Yk
        R[i] = np.abs(Ya[i] - m_i) / max(eps, var ** (beta / 2))
    below = (R[:n] < R[n][None, :]).sum(0)
    out = []
    for c in levels:
        k = math.ceil(c * (n + 1) - 1e-9)
        acc = grid[below <= k - 1]
        out.append((acc.min(), acc.max()))
    return np.array(out)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("beta, eps", [(1.0, 0.0), (0.5, 0.05)])
def test_full_conformal_gp_equals_grid_search(case, beta, eps):
    X, y, Xt, S, lam, mu, v, noise, const = make(case, n=14, m=3, seed=4)
    levels = np.array([0.6, 0.8, 0.9])
    lo, hi = full_conformal_gp_bounds(S, lam, mu, v, levels, beta=beta, eps=eps)
    for j in range(len(Xt)):
        finite = np.concatenate([lo[j][np.isfinite(lo[j])], hi[j][np.isfinite(hi[j])]])
        pad = finite.max() - finite.min() + 1e-6
        grid = np.linspace(finite.min() - pad, finite.max() + pad, 3001)
        h = grid[1] - grid[0]
        ref = grid_fcp(X, y, Xt[j], noise, const, beta, eps, levels, grid)
        # the grid's accepted hull lies inside the exact one, within one grid step;
        # an infinite exact end shows up as a grid hull reaching the grid's end
        for end, r, edge in ((lo[j], ref[:, 0], grid[0]), (hi[j], ref[:, 1], grid[-1])):
            fin = np.isfinite(end)
            assert np.all(np.abs(end[fin] - r[fin]) <= h + 1e-9), (end, r, h)
            assert np.all(r[~fin] == edge)
        assert np.all(lo[j] <= ref[:, 0] + 1e-9) and np.all(hi[j] >= ref[:, 1] - 1e-9)
    if case.startswith("interp") and beta == 0.5:
        # with beta < 1 the normaliser of a close design point can outgrow the candidate's:
        # the exact set is then unbounded, and the grid agrees (checked above)
        assert not np.all(np.isfinite(hi))


def test_full_conformal_chunk_invariant_and_finite():
    X, y, Xt, S, lam, mu, v, *_ = make("noisy-const", n=40, m=30)
    levels = np.array([0.5, 0.9])
    lo, hi = full_conformal_gp_bounds(S, lam, mu, v, levels)
    lo2, hi2 = full_conformal_gp_bounds(S, lam[:, :7], mu[:7], v[:7], levels)
    np.testing.assert_array_equal(lo[:7], lo2)
    assert np.all(np.isfinite(lo)) and np.all(lo < mu[:, None]) and np.all(hi > mu[:, None])
    assert np.all(hi[:, 1] - lo[:, 1] >= hi[:, 0] - lo[:, 0])


def test_too_few_training_points_gp():
    X, y, Xt, S, lam, mu, v, *_ = make("noisy-zero", n=10, m=3)
    with pytest.raises(ValueError, match=r"needs at least 19 training points .*got n=10"):
        full_conformal_gp_bounds(S, lam, mu, v, np.array([0.95]))
    with pytest.raises(ValueError, match=r"needs at least 19 training points \(n >= 2/\(1-c\) - 1"):
        jackknife_plus_gp_bounds(S, lam, mu, v, np.array([0.9]), score="signed")
    with pytest.raises(ValueError, match=r"not positive definite"):
        kriging_system(-np.eye(3), np.zeros(3))


def coverage_draws(method, n, c, reps, seed):
    """Exchangeable data: uniform X, a fixed function with noise; fixed kernel."""
    rng = np.random.default_rng(seed)
    noise = 0.02
    cov = np.empty(reps)
    for r in range(reps):
        X = rng.uniform(size=(n + 20, 2))
        y = f(X) + 0.14 * rng.standard_t(5, size=n + 20)
        S = kriging_system(kern(X[:n]) + noise * np.eye(n), y[:n], np.ones((n, 1)))
        lam, mu, v = kriging_predict(S, kern(X[:n], X[n:]), np.full(20, VAR + noise), np.ones((20, 1)))
        if method == "fcp":
            lo, hi = full_conformal_gp_bounds(S, lam, mu, v, np.array([c]))
        else:
            lo, hi = jackknife_plus_gp_bounds(S, lam, mu, v, np.array([c]), score=method)
        cov[r] = np.mean((y[n:] >= lo[:, 0]) & (y[n:] <= hi[:, 0]))
    return cov.mean(), cov.std(ddof=1) / np.sqrt(reps)


@pytest.mark.parametrize("method", ["fcp", "normalized", "signed"])
@pytest.mark.seeded(3)
def test_gp_conformal_coverage_fast(method, seed, record_property):
    c = 0.8
    mean, se = coverage_draws(method, 19, c, reps=300, seed=seed)
    bound = c if method == "fcp" else 2 * c - 1
    record_property("se_below_bound", float((bound - mean) / se))  # swept at seeds 0..19: 1.68 at worst (3)
    assert mean >= bound - 3 * se, (mean, se)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["fcp", "normalized", "signed"])
@pytest.mark.parametrize("n, c", [(19, 0.9), (40, 0.8)])
def test_gp_conformal_coverage_slow(method, n, c):
    mean, se = coverage_draws(method, n, c, reps=3000, seed=13)
    bound = c if method == "fcp" else 2 * c - 1
    assert mean >= bound - 3 * se, (mean, se)
    if method == "fcp":  # full conformal is also at most c + 1/(n+1) (continuous scores)
        assert mean <= c + 1 / (n + 1) + 3 * se


def test_fcp_inside_jackknife_plus_gp_and_equal_for_beta_one():
    """beta = 1, eps = 0: R_i(z) >= R_{n+1}(z) iff z in [xi_i^-, xi_i^+] (bivariate-normal identity),
    so the FCP set is inside the J+GP interval and typically equal; with beta != 1 they differ."""
    levels = np.array([0.5, 0.8, 0.9])
    n_equal = n_total = 0
    for seed in range(25):
        for case in CASES:
            X, y, Xt, S, lam, mu, v, *_ = make(case, n=20, m=20, seed=seed)
            lo_f, hi_f = full_conformal_gp_bounds(S, lam, mu, v, levels)
            lo_j, hi_j = jackknife_plus_gp_bounds(S, lam, mu, v, levels)
            assert np.all(lo_f >= lo_j - 1e-9) and np.all(hi_f <= hi_j + 1e-9)
            same = (np.abs(lo_f - lo_j) < 1e-9) & (np.abs(hi_f - hi_j) < 1e-9)
            n_equal += same.sum()
            n_total += same.size
    assert n_equal >= 0.99 * n_total
    X, y, Xt, S, lam, mu, v, *_ = make("noisy-const", n=20, m=20)
    lo_f, _ = full_conformal_gp_bounds(S, lam, mu, v, levels, beta=0.5)
    lo_j, _ = jackknife_plus_gp_bounds(S, lam, mu, v, levels, beta=0.5)
    assert np.abs(lo_f - lo_j).max() > 1e-3


# ---------------------------------------------------------------------------
# Estimator layer with calibprob.bases.gp.GaussianProcessRegressor at fixed
# hyperparameters (optimize=False: no PyTensor compile, the refits of
# CrossConformalRegressor are then exact brute force).
# ---------------------------------------------------------------------------

from calibprob._core.estimator import NotFittedError  # noqa: E402
from calibprob.bases.gp import GaussianProcessRegressor  # noqa: E402
from calibprob.calibrators.conformal import FullConformalGP, JackknifePlusGP  # noqa: E402

THETA = {"lengthscale": LS, "variance": VAR, "noise": 0.02}


def fixed_gp(noise=True, mean="constant"):
    return GaussianProcessRegressor(kernel="matern", p=2, mean=mean, noise=noise, theta=THETA, optimize=False)


def gp_data(n=30, m=400, seed=6, sd=0.14):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    return X, f(X) + sd * rng.normal(size=n) + 3.0, rng.uniform(size=(m, 2))


@pytest.mark.parametrize("noise, mean", [(True, "constant"), (False, "constant"), (True, "zero"), (False, "zero")])
@pytest.mark.parametrize("score", ["normalized", "signed"])
def test_jackknife_plus_gp_class_equals_gp_refits(noise, mean, score):
    """J+GP / asymJ+GP with the closed form == jackknife+ refitting the GP n times (fixed theta)."""
    X, y, Xt = gp_data(sd=0.14 if noise else 0.0)
    levels = [0.5, 0.8, 0.9]
    jgp = JackknifePlusGP(estimator=fixed_gp(noise, mean), score=score, confidence_level=levels, chunk_size=64)
    a = jgp.fit(X, y).predict_interval(Xt)
    ref = CrossConformalRegressor(estimator=fixed_gp(noise, mean), score=score, confidence_level=levels)
    b = ref.fit(X, y).predict_interval(Xt)
    err = max(float(np.abs(a["lower"] - b["lower"]).max()), float(np.abs(a["upper"] - b["upper"]).max()))
    assert err < 1e-8, err
    assert a.attrs["method"] == ("J+GP" if score == "normalized" else "asymJ+GP")
    # the LOO at the design points is the GP's own closed form
    mu_loo, sd_loo = jgp.estimator_.loo()
    np.testing.assert_allclose(y - jgp.loo_residuals_, mu_loo, atol=1e-9)
    np.testing.assert_allclose(jgp.loo_std_, sd_loo, rtol=1e-9)


def test_prefit_gp_and_fcp_class():
    X, y, Xt = gp_data(n=25, m=300, seed=7)
    gp = fixed_gp().fit(X, y)
    jgp = JackknifePlusGP(estimator=fixed_gp(), confidence_level=0.8).fit(X, y)
    pre = JackknifePlusGP(estimator=gp, confidence_level=0.8, prefit=True).fit()
    np.testing.assert_array_equal(pre.predict_interval(Xt)["upper"], jgp.predict_interval(Xt)["upper"])
    fcp = FullConformalGP(estimator=gp, confidence_level=0.8, prefit=True, chunk_size=50).fit()
    iv = fcp.predict_interval(Xt)
    S = kriging_system(kern(X) + 0.02 * np.eye(25), y, np.ones((25, 1)))
    lam, mu, v = kriging_predict(S, kern(X, Xt), np.full(300, VAR + 0.02), np.ones((300, 1)))
    lo, hi = full_conformal_gp_bounds(S, lam, mu, v, np.array([0.8]))
    np.testing.assert_allclose(iv["lower"], lo[:, 0], atol=1e-10)
    np.testing.assert_allclose(iv["upper"], hi[:, 0], atol=1e-10)
    assert iv.attrs["method"] == "FCP-GP"
    # keeping the fitted constant fixed (not re-estimated per fold) is a different, also valid, model
    fixed = FullConformalGP(estimator=gp, confidence_level=0.8, prefit=True, refit_mean=False).fit()
    assert np.abs(fixed.predict_interval(Xt)["upper"] - iv["upper"]).max() > 1e-6


def test_gp_class_bad_input():
    X, y, _ = gp_data(n=12)
    with pytest.raises(ValueError, match=r"needs at least 19 training points .*got n=12"):
        FullConformalGP(estimator=fixed_gp(), confidence_level=0.95).fit(X, y)
    with pytest.raises(ValueError, match=r"confidence_level must be in \(0, 1\); got 0"):
        JackknifePlusGP(estimator=fixed_gp(), confidence_level=0).fit(X, y)
    with pytest.raises(ValueError, match=r"convention must be one of 'barber', 'pion2024'"):
        JackknifePlusGP(estimator=fixed_gp(), convention="paper").fit(X, y)
    with pytest.raises(TypeError, match=r"needs a calibprob GaussianProcessRegressor .*no 'kernel_matrix'"):
        JackknifePlusGP(estimator=lambda a, b, c: np.zeros(len(c)), confidence_level=0.5).fit(X, y)
    with pytest.raises(NotFittedError, match=r"Call fit"):
        FullConformalGP(estimator=fixed_gp()).predict_interval(X)
    with pytest.raises(NotFittedError, match=r"Call fit"):
        JackknifePlusGP(estimator=fixed_gp(), prefit=True).fit()


@pytest.mark.slow
def test_jackknife_plus_gp_after_ml_fit():
    """With hyperparameters fitted by ML (compiles a PyTensor graph), J+GP still equals refits at theta_."""
    X, y, Xt = gp_data(n=40, m=200, seed=9)
    gp = GaussianProcessRegressor(kernel="matern", p=2, mean="constant", random_state=0).fit(X, y)
    a = JackknifePlusGP(estimator=gp, prefit=True, confidence_level=0.9).fit().predict_interval(Xt)
    theta = {k: v for k, v in gp.theta_.items() if k != "mean_"}
    ref_gp = GaussianProcessRegressor(kernel="matern", p=2, mean="constant", theta=theta, optimize=False)
    b = CrossConformalRegressor(estimator=ref_gp, score="normalized", confidence_level=0.9).fit(X, y)
    b = b.predict_interval(Xt)
    assert float(np.abs(a["upper"] - b["upper"]).max()) < 1e-8


# -- Pion & Vazquez (2024), Table 1, from the shipped specs -------------------------------------
# (function, p) -> method -> (90 % width, IAE) as printed in the paper's Table 1
PION_TABLE1 = {
    ("branin", 1): {"REML": (14.0, 0.24), "FCP-GP": (7.6, 0.06), "J+GP": (8.7, 0.06), "asymJ+GP": (9.1, 0.06)},
    ("goldstein-price", 5): {
        "REML": (3.3e4, 0.09),
        "FCP-GP": (4.4e4, 0.08),
        "J+GP": (4.8e4, 0.08),
        "asymJ+GP": (4.9e4, 0.08),
    },
    ("hartmann6", 9): {"REML": (0.63, 0.11), "FCP-GP": (0.53, 0.04), "J+GP": (0.56, 0.04), "asymJ+GP": (0.59, 0.04)},
    ("branin", 9): {"REML": (0.75, 0.08), "FCP-GP": (0.9, 0.09), "J+GP": (0.88, 0.09), "asymJ+GP": (0.91, 0.09)},
}


def _pion_row(function, p):
    """Mean 90 % width and IAE per method over all repetitions of one shipped Pion spec row."""
    import tomllib

    import xarray as xr

    from calibprob.compare import parse_spec
    from calibprob.compare.tasks import run_task

    path = MODELS / f"pion2024-table1-p{p}.toml"
    spec = parse_spec(tomllib.loads(path.read_text())).to_dict()
    res = xr.concat([run_task(spec, function, r) for r in range(spec["repetitions"])], dim="repetition")
    return (
        res["width"].sel(confidence_level=0.9).mean(("repetition", "dataset")),
        res["iae"].mean(("repetition", "dataset")),
    )


@pytest.mark.parametrize(
    "row",
    [
        ("branin", 1),
        ("goldstein-price", 5),
        pytest.param(("hartmann6", 9), marks=pytest.mark.slow),
    ],
)
def test_pion_table1_row_from_the_shipped_spec(row):
    """All 40 repetitions of one Table 1 row, run exactly as ``calibprob compare`` runs them:
    conformal IAE within +-0.03 of the paper, every 90 % width (REML's too) within +-30 %, and the
    conformal IAE below REML's where the paper's is. Measured: docs/benchmarks.md."""
    width, iae = _pion_row(*row)
    reml_paper = PION_TABLE1[row]["REML"][1]
    for method, (w_paper, iae_paper) in PION_TABLE1[row].items():
        w, e = float(width.sel(calibrator=method)), float(iae.sel(calibrator=method))
        assert 0.7 <= w / w_paper <= 1.3, (method, w, w_paper)
        if method != "REML":
            assert abs(e - iae_paper) <= 0.03, (method, e, iae_paper)
            if iae_paper < reml_paper:
                assert e < float(iae.sel(calibrator="REML")), (method, e)


@pytest.mark.slow
def test_pion_table1_branin_p9_matches_the_iae_but_not_the_widths():
    """The one Table 1 row not reproduced, pinned as measured: every conformal IAE within +-0.03 of
    the paper, but every 90 % width 0.3-0.55x the paper's (measured 0.51x REML, 0.39x the
    conformal methods). The paper's own library, GPmp, on the same designs gives narrower widths
    still; the widths follow the numerical nugget (docs/benchmarks.md). If this test starts to fail
    because the widths moved toward the paper, find out why before changing it."""
    width, iae = _pion_row("branin", 9)
    for method, (w_paper, iae_paper) in PION_TABLE1[("branin", 9)].items():
        w, e = float(width.sel(calibrator=method)), float(iae.sel(calibrator=method))
        assert 0.3 <= w / w_paper <= 0.55, (method, w, w_paper)
        if method != "REML":
            assert abs(e - iae_paper) <= 0.03, (method, e, iae_paper)
