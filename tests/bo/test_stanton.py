"""Stanton et al.'s conformal acquisitions (calibprob.bo.stanton) against a brute-force integral, and bad input.

The brute force refits a GP (same hyperparameters) for every candidate label and every left-out
point: the conditioned posterior at the candidate gives the utility (EI by numerical quadrature),
the left-out GPs give the scores and the softmax-of-LCB design weights (Fannjiang et al. 2022,
eq. 6) and so the conformal set, and the posterior term is a quadrature over the GP's predictive.

Reference: Stanton, Maddox and Wilson (2023), §4 and the authors' ``_conformal_integration``.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, special, stats

from calibprob.bases.gp import GaussianProcessRegressor
from calibprob.bo import minimize
from calibprob.bo.conformal import label_grid
from calibprob.bo.stanton import acquisition_grid, conformal_acquisition

THETA = {"lengthscale": np.array([0.25]), "variance": 1.3, "noise": 0.04}
LAM, KAPPA, LEVEL = 2.0, 2.0, 0.8


def _gp(U: np.ndarray, y: np.ndarray) -> GaussianProcessRegressor:
    return GaussianProcessRegressor(kernel="se", mean="zero", noise=True, theta=THETA, optimize=False).fit(U, y)


@pytest.fixture(scope="module")
def problem() -> tuple:
    rng = np.random.default_rng(3)
    U = rng.random((7, 1))
    y = np.sin(6 * U[:, 0]) + 0.1 * rng.normal(size=7)
    return U, y, np.array([0.43]), rng.random((30, 1))


def _np_gp(S: np.ndarray, y: np.ndarray, E: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Latent posterior means and sds at E of a zero-mean SE GP on (S, y), by a dense solve (no calibprob code)."""

    def k(A, B):
        return THETA["variance"] * np.exp(-0.5 * ((A[:, None, 0] - B[None, :, 0]) / THETA["lengthscale"][0]) ** 2)

    K = k(S, S) + THETA["noise"] * np.eye(S.shape[0])
    k_e = k(S, E)
    var = THETA["variance"] - np.einsum("ie,ie->e", k_e, np.linalg.solve(K, k_e))
    return k_e.T @ np.linalg.solve(K, y), np.sqrt(var)


def _np_latent(S: np.ndarray, y: np.ndarray, u: np.ndarray) -> tuple[float, float]:
    m, sd = _np_gp(S, y, u[None, :])
    return float(m[0]), float(sd[0])


def _ei_quad(m: float, sd: float, best: float) -> float:
    """E[(best - F)^+], F ~ N(m, sd^2), by quadrature."""
    val, _ = integrate.quad(lambda f: (best - f) * stats.norm.pdf(f, m, sd), -np.inf, best, epsabs=1e-12)
    return val


def _utility(name: str, U, y, u, label: float, best: float, *, quad: bool = True) -> float:
    """The utility of the GP refitted on the data plus (u, label), at u (EI by quadrature or Jones et al.'s formula)."""
    m, sd = _np_latent(np.vstack([U, u[None, :]]), np.append(y, label), u)
    if name == "cei":
        if quad:
            return _ei_quad(m, sd, best)
        z = (best - m) / sd
        return float(sd * (z * stats.norm.cdf(z) + stats.norm.pdf(z)))
    return -(m - KAPPA * sd)


def _in_set(U, y, u, pool, label: float) -> bool:
    """Weighted full conformal by refits: sum_{i<=n} p_i 1{S_i < S_test} < level, p from -lam * LCB softmaxes."""
    S, y_aug = np.vstack([U, u[None, :]]), np.append(y, label)
    scores, logw = np.empty(S.shape[0]), np.empty(S.shape[0])
    for i in range(S.shape[0]):
        keep = np.arange(S.shape[0]) != i
        mu, sd_f = _np_gp(S[keep], y_aug[keep], np.vstack([S[i : i + 1], pool]))
        sd = np.sqrt(sd_f**2 + THETA["noise"])  # the predictive sd, noise included
        a = -LAM * (mu - KAPPA * sd)
        logw[i] = a[0] - special.logsumexp(a[1:])
        scores[i] = abs(y_aug[i] - mu[0])
    p = np.exp(logw - special.logsumexp(logw))
    return bool(np.sum(p[:-1] * (scores[:-1] < scores[-1])) < LEVEL)


def test_dense_gp_is_calibprobs_gp(problem):
    """The test's own GP (for the utilities) is calibprob's: same kernel convention, same posterior."""
    U, y, u, _ = problem
    E = np.vstack([u[None, :], U])
    m, sd = _gp(U, y).predict_mean_std(E, include_noise=False)
    np.testing.assert_allclose(_np_gp(U, y, E), (m, sd), rtol=1e-9)


@pytest.mark.parametrize("name", ["cei", "cucb"])
def test_conformal_acquisition_equals_brute_force_integral(problem, name):
    U, y, u, pool = problem
    gp = _gp(U, y)
    best = float(y.min())
    mu, s = (float(v[0]) for v in gp.predict_mean_std(u[None, :]))
    grid = mu + s * np.linspace(-4.0, 4.0, 17)
    got = conformal_acquisition(
        name, gp, U, y, u, pool, lam=LAM, q=-KAPPA, confidence_level=LEVEL, best=best, kappa=KAPPA, grid=grid
    )
    # the conformal term: midpoint rule over the set's labels (the optimistic ones for cucb)
    mids = np.concatenate([[grid[0]], (grid[1:] + grid[:-1]) / 2, [grid[-1]]])
    width = np.diff(mids)
    member = np.array([_in_set(U, y, u, pool, g) for g in grid])
    if name == "cucb":
        member &= grid <= mu
    assert 0 < member.sum() < grid.size  # a proper subset: the test exercises the set
    util = np.array([_utility(name, U, y, u, g, best) for g in grid])
    inside = np.sum(width * member * util) / np.sum(width * member)
    # the posterior term: the utility averaged over the GP's predictive (y <= mu only for cucb)
    upper = mu if name == "cucb" else np.inf
    num, _ = integrate.quad(
        lambda t: _utility(name, U, y, u, t, best, quad=False) * stats.norm.pdf(t, mu, s), -np.inf, upper
    )
    post = num / (0.5 if name == "cucb" else 1.0)
    expected = (1 - LEVEL) * post + LEVEL * inside
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_default_grid_holds_the_coarse_grid_and_a_fine_one_around_the_mean(problem):
    U, y, _, _ = problem
    g = acquisition_grid(y, 0.3, 0.01)
    assert np.all(np.diff(g) > 0)
    assert np.isin(label_grid(y), g).all()  # the loop's coarse grid
    assert np.isin(0.3 + 0.01 * np.linspace(-4, 4, 33), g).all()  # 33 labels over mu +- 4 sd
    assert g.size == label_grid(y).size + 33


@pytest.mark.parametrize("acquisition", ["cei", "cucb"])
def test_conformal_acquisition_run_logs_query_coverage(acquisition):
    res = minimize("forrester", n_init=3, n_steps=2, acquisition=acquisition, calibration="conformal", seed=0)
    st = res["steps"]
    assert set(np.unique(st["covered"].values)) <= {0.0, 1.0}
    assert np.all(st["interval_lower"].values <= st["interval_upper"].values)
    assert res.attrs["acquisition"] == acquisition and res.attrs["interval_level"] == 0.9


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (
            {"acquisition": "cei", "calibration": "none"},
            r"acquisition='cei' .* got calibration='none'\. Pass calibration='conformal'",
        ),
        (
            {"acquisition": "cucb", "calibration": "conformal-loo"},
            r"got calibration='conformal-loo'\. Pass calibration='conformal'",
        ),
        ({"acquisition": "cei", "calibration": "conformal", "interval_level": 1.0}, "interval_level must be in"),
    ],
)
def test_bad_conformal_acquisition_options(kw, match):
    with pytest.raises(ValueError, match=match):
        minimize("forrester", n_init=3, n_steps=1, seed=0, **kw)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"name": "cpi"}, r"name \(the conformal acquisition\) must be one of 'cei', 'cucb'; got 'cpi'"),
        ({"grid": np.array([1.0, 0.0])}, "grid must hold at least two finite, strictly increasing"),
        ({"confidence_level": 0.0}, "confidence_level must be in"),
    ],
)
def test_bad_conformal_acquisition_input(problem, kw, match):
    U, y, u, pool = problem
    args = {"name": "cei", "confidence_level": 0.9, "grid": None} | kw
    with pytest.raises(ValueError, match=match):
        conformal_acquisition(
            args["name"],
            _gp(U, y),
            U,
            y,
            u,
            pool,
            lam=LAM,
            q=-KAPPA,
            confidence_level=args["confidence_level"],
            best=0.0,
            kappa=KAPPA,
            grid=args["grid"],
        )


def test_stanton_method_in_the_experiment_and_the_cli(tmp_path, capsys):
    from calibprob.bo import bo_table, run_experiment
    from calibprob.cli import main

    ds = run_experiment(["forrester"], ["ucb", "pi"], ["stanton"], 1, n_init=3, n_steps=1, progress=False)
    assert np.isfinite(bo_table(ds)["query_coverage"].sel({"method": "stanton", "acquisition": "ucb"})).all()
    assert "covered" in ds and ds["error"].sel(acquisition="pi").isnull().all()  # not applicable with PI
    args = ["bo", "--functions", "forrester", "--acquisitions", "ei", "--methods", "stanton", "--seeds", "1"]
    assert main([*args, "--n-steps", "1", "--no-progress"]) == 0
    assert "stanton" in capsys.readouterr().out
