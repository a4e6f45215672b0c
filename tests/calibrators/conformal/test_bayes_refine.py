"""The set ends' refinement (``_EndRefiner``) and the door's compiled log densities, against plain references.

The refiner is checked end for end against a plain transcription of its algorithm (``REFINE_STEPS``
halvings of each finite bracket ``(last grid value inside, first outside)`` on the exact p-value,
the outer end of the final bracket reported), which ranks every candidate on its own, one
(draws,) column per :func:`aoi_block` call, in one thread: the reported ends must be equal bit for
bit, unweighted, grouped and weighted, with one and two threads, through the core and through the
PyMC door. The door's compiled closed-form passes are checked against NumPy's arithmetic bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import calibprob
from calibprob.calibrators.conformal.bayes import estimator as est
from calibprob.calibrators.conformal.bayes import from_pymc as fp
from calibprob.calibrators.conformal.bayes._numerics import aoi_block

S, N, M = 600, 50, 9


def _reference_ends(refiner, log_density, out):
    """The bisection of every finite bracket, each candidate ranked alone (no threads, no blocks)."""
    thr = np.concatenate([refiner.thresholds, refiner.thresholds], axis=1)
    inside = np.concatenate([out["lower_in"], out["upper_in"]], axis=1)
    outside = np.concatenate([out["lower_out"], out["upper_out"]], axis=1)
    act = np.isfinite(inside) & np.isfinite(outside)
    for _ in range(est.REFINE_STEPS):
        for j, k in zip(*np.nonzero(act), strict=True):
            mid = 0.5 * (inside[j, k] + outside[j, k])
            logf = np.asarray(log_density(slice(j, j + 1), np.array([[mid]])), float).reshape(-1, 1)
            members = None if refiner.member is None else refiner.member[j : j + 1]
            r, _, _ = aoi_block(
                np.ascontiguousarray(logf),
                refiner.log_lik,
                refiner.E,
                refiner.c,
                members,
                refiner.E32,
                point_weights=refiner.point_weights,
            )
            rank = r[0] + (0.0 if refiner.test_weights is None else refiner.test_weights[j])
            if rank > thr[j, k]:
                inside[j, k] = mid
            else:
                outside[j, k] = mid
    L = refiner.thresholds.shape[1]
    return outside[:, :L], outside[:, L:]


@pytest.fixture
def captured(monkeypatch):
    """Records each refinement's refiner, log density and brackets, and the ends it returned."""
    calls = []
    original = est._EndRefiner.__call__

    def spy(self, log_density, out, line=None):
        brackets = {k: np.array(v, copy=True) for k, v in out.items()}
        ends = original(self, log_density, out, line)
        calls.append((self, log_density, brackets, ends))
        return ends

    monkeypatch.setattr(est._EndRefiner, "__call__", spy)
    return calls


def _assert_reference(calls):
    assert calls
    for refiner, log_density, brackets, (lower, upper) in calls:
        ref_lower, ref_upper = _reference_ends(refiner, log_density, brackets)
        assert np.isfinite(lower).sum() > 0
        np.testing.assert_array_equal(lower, ref_lower)
        np.testing.assert_array_equal(upper, ref_upper)


def _normal_problem(seed=0):
    rng = np.random.default_rng(seed)
    x, x_new = rng.normal(size=N), rng.normal(size=M)
    y = 1.5 * x + rng.normal(0, 0.8, size=N)
    b = rng.normal(1.5, 0.1, size=S)
    s = np.abs(rng.normal(0.8, 0.05, size=S))
    ll = stats.norm.logpdf(y[None, :], b[:, None] * x[None, :], s[:, None])
    grid = np.linspace(-7, 7, 57)
    mu = b[:, None] * x_new[None, :]
    logf = stats.norm.logpdf(grid[None, None, :], mu[:, :, None], s[:, None, None])

    def log_density(rows, yc):
        return stats.norm.logpdf(yc[None], mu[:, rows, None], s[:, None, None])

    return {"x": x, "x_new": x_new, "y": y, "ll": ll, "grid": grid, "logf": logf, "log_density": log_density}


@pytest.mark.parametrize("n_jobs", [1, 2])
@pytest.mark.parametrize("thread_safe", [False, True])
@pytest.mark.parametrize("case", ["plain", "grouped", "weighted"])
def test_refined_ends_equal_the_plain_bisection_bit_for_bit(captured, case, n_jobs, thread_safe):
    p = _normal_problem()
    log_density = p["log_density"]
    if thread_safe:  # the door's densities say so: the refiner calls them without its lock

        def log_density(rows, yc, f=p["log_density"]):
            return f(rows, yc)

        log_density.thread_safe = True
    cb = calibprob.ConformalBayes(confidence_level=[0.7, 0.9], n_jobs=n_jobs, min_ess=0.0, pareto_k=False)
    fit, predict = {}, {}
    if case == "grouped":
        fit["groups"] = np.arange(N) % 3
        predict["groups"] = np.arange(M) % 3
    elif case == "weighted":
        fit["weights"] = np.exp(0.4 * p["x"])
        predict["weights"] = np.exp(0.4 * p["x_new"])
    cb.fit(p["ll"], y=p["y"], **fit)
    cb.predict(p["logf"], p["grid"], log_density=log_density, **predict)
    _assert_reference(captured)


def test_a_chunk_with_a_gap_in_its_rows_asks_for_the_span_and_uses_its_rows(captured):
    # a test point whose set reaches the grid's edge on both sides has no finite bracket: the chunk's rows
    # skip it, and the density is asked for the consecutive span (the skipped row at a placeholder)
    p = _normal_problem(1)
    wide = p["logf"].copy()
    asked = []

    def log_density(rows, yc):
        asked.append((rows, yc.shape))
        return p["log_density"](rows, yc)

    cb = calibprob.ConformalBayes(confidence_level=0.8, n_jobs=1, min_ess=0.0, pareto_k=False, min_grid_mass=0.0)
    grid = np.tile(p["grid"], (M, 1))
    grid[4] = np.linspace(-0.05, 0.05, 57)  # point 4's grid lies inside its set: no finite end
    wide[:, 4, :] = stats.norm.logpdf(grid[4][None, :], 0.0, 1.0)
    mu = np.zeros((S, M))

    def log_density4(rows, yc):
        out = log_density(rows, yc)
        if rows.start <= 4 < rows.stop:
            out[:, 4 - rows.start] = stats.norm.logpdf(yc[4 - rows.start][None, :], mu[:, 4, None], 1.0)
        return out

    with pytest.warns(calibprob.CalibprobWarning, match="grid's edge"):
        pred = cb.fit(p["ll"], y=p["y"]).predict(wide, grid, log_density=log_density4)
    assert np.isinf(pred["lower"].values[4]).all() and np.isinf(pred["upper"].values[4]).all()
    assert all(r.start == 0 and r.stop == M for r, _ in asked)  # one chunk, its span the whole batch
    _assert_reference(captured)


pm = pytest.importorskip("pymc")
az = pytest.importorskip("arviz")


def _door_problem(likelihood="normal"):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(N, 2))
    y = X @ np.array([1.0, -1.0]) + rng.normal(size=N)
    with pm.Model() as model:
        xd = pm.Data("X", X)
        yd = pm.Data("y", y)
        b = pm.Normal("b", 0, 5, shape=2)
        s = pm.HalfNormal("s", 1)
        if likelihood == "normal":
            pm.Normal("lik", xd @ b, s, observed=yd, shape=xd.shape[0])
        else:
            pm.StudentT("lik", nu=5.0, mu=xd @ b, sigma=s, observed=yd, shape=xd.shape[0])
    post = {"b": rng.normal([1.0, -1.0], 0.1, size=(2, S // 2, 2)), "s": np.abs(rng.normal(1.0, 0.05, (2, S // 2)))}
    idata = az.from_dict({"posterior": post, "observed_data": {"lik": y}})
    pm.compute_log_likelihood(idata, model=model, progressbar=False)
    return model, idata, rng.normal(size=(M, 2))


@pytest.mark.parametrize("grid_mode", ["full", "ends"])
@pytest.mark.parametrize(("likelihood", "method"), [("normal", "closed-form"), ("normal", "logp"), ("t", "auto")])
def test_the_doors_refined_ends_equal_the_plain_bisection(captured, likelihood, method, grid_mode):
    model, idata, X_new = _door_problem(likelihood)
    groups = np.arange(N) % 2
    pred = calibprob.conformal_bayes(
        model, idata, X_new, method=method, n_jobs=2, grid_mode=grid_mode, confidence_level=[0.8, 0.9],
        groups=groups, groups_new=np.arange(M) % 2, min_ess=0.0,
    )  # fmt: skip
    assert pred.attrs["interval_ends"].startswith("refined")
    _assert_reference(captured)


def test_the_compiled_student_t_density_is_numpys_bit_for_bit():
    rng = np.random.default_rng(4)
    nu, mu, sigma = rng.uniform(1.5, 30, size=(50, 4)), rng.normal(size=(50, 4)), rng.uniform(0.1, 3.0, size=(50, 4))
    y = rng.normal(0, 3, size=(4, 17))
    ref = fp._closed_form_logpdf("StudentTRV", [nu[:, :, None], mu[:, :, None], sigma[:, :, None]], y[None])
    out = np.full((50, 4, 17), np.nan)
    assert fp._student_t_logpdf(nu, mu, sigma, y, out) is out
    assert np.array_equal(out, ref)
    # a constant nu (no draw axis), as the door passes a fixed degree of freedom
    ref5 = fp._closed_form_logpdf("StudentTRV", [np.full((50, 4, 1), 5.0), mu[:, :, None], sigma[:, :, None]], y[None])
    assert np.array_equal(fp._student_t_logpdf(np.broadcast_to(5.0, (50, 4)), mu, sigma, y), ref5)
    np.testing.assert_allclose(ref, stats.t.logpdf(y[None], nu[:, :, None], mu[:, :, None], sigma[:, :, None]), 1e-12)


def test_the_door_reuses_one_buffer_per_thread():
    bufs = fp._ThreadBuffers()
    a = bufs.get((3, 4, 5))
    b = bufs.get((2, 4, 5))  # smaller: the same memory
    assert a.flags.c_contiguous and b.flags.c_contiguous and np.shares_memory(a, b)
    c = bufs.get((5, 4, 5))  # larger: grown
    assert c.shape == (5, 4, 5) and not np.shares_memory(a, c)


@pytest.mark.parametrize("family", ["NormalRV", "StudentTRV"])
def test_the_doors_closed_form_density_is_numpys_bit_for_bit_on_any_rows(family):
    # the door's parameters come as (draws, m) views, a per-draw sigma broadcast over the points (stride 0),
    # and its terms free of the candidate are computed once for all points, then sliced per block
    rng = np.random.default_rng(6)
    n_draws, m = 70, 11
    mu = rng.normal(size=(n_draws, m))
    sigma = np.broadcast_to(rng.uniform(0.2, 2.0, size=(n_draws, 1)), (n_draws, m))
    params = [mu, sigma] if family == "NormalRV" else [np.broadcast_to(4.5, (n_draws, m)), mu, sigma]
    density = fp._ClosedForm(family, params)
    for rows, K in ((slice(0, m), 23), (slice(3, 8), 2), (slice(10, 11), 1)):
        y = rng.normal(0, 2, size=(rows.stop - rows.start, K))
        ref = fp._closed_form_logpdf(family, [p[:, rows, None] for p in params], y[None])
        out = np.empty((n_draws, *y.shape))
        assert density(rows, y, out) is out
        assert np.array_equal(out, ref)


def test_the_logp_path_takes_containers_with_dims_and_an_index_as_inputs():
    # containers tied to a model dimension (coords), a group index among them: the compiled logp takes them as
    # inputs (the dimension's length follows the rows given), evaluated by two threads at once, and leaves the
    # model's own containers as they were
    rng = np.random.default_rng(8)
    X, grp = rng.normal(size=(N, 2)), np.arange(N) % 3
    y = X @ np.array([1.0, -1.0]) + 0.5 * grp + rng.normal(size=N)
    with pm.Model(coords={"obs": np.arange(N), "feat": ["a", "b"], "group": [0, 1, 2]}) as model:
        xd = pm.Data("X", X, dims=("obs", "feat"))
        gd = pm.Data("g", grp, dims="obs")
        yd = pm.Data("y", y, dims="obs")
        b = pm.Normal("b", 0, 5, dims="feat")
        a = pm.Normal("a", 0, 5, dims="group")
        s = pm.HalfNormal("s", 1)
        pm.Normal("lik", xd @ b + a[gd], s, observed=yd, dims="obs")
    post = {
        "b": rng.normal([1.0, -1.0], 0.1, size=(2, S // 2, 2)),
        "a": rng.normal([0.0, 0.5, 1.0], 0.1, size=(2, S // 2, 3)),
        "s": np.abs(rng.normal(1.0, 0.05, (2, S // 2))),
    }
    idata = az.from_dict(
        {"posterior": post, "observed_data": {"lik": y}},
        dims={"b": ["feat"], "a": ["group"], "lik": ["obs"]},
        coords={"feat": ["a", "b"], "group": [0, 1, 2], "obs": np.arange(N)},
    )
    pm.compute_log_likelihood(idata, model=model, progressbar=False)
    X_new = {"X": rng.normal(size=(M, 2)), "g": np.arange(M) % 3}
    kw = {"confidence_level": 0.8, "min_ess": 0.0, "n_jobs": 2}
    closed = calibprob.conformal_bayes(model, idata, X_new, method="closed-form", **kw)
    logp = calibprob.conformal_bayes(model, idata, X_new, method="logp", grid=closed["grid"].values, **kw)
    np.testing.assert_array_equal(logp["p_value"].values, closed["p_value"].values)
    np.testing.assert_allclose(logp["upper"].values, closed["upper"].values, rtol=0, atol=1e-9)
    door = fp._Door(model, idata, None, None)
    g = closed["grid"].values
    by_logp = np.concatenate([v for _, v in door.logp_blocks(door.new_data(X_new), g)], axis=1)
    mu = post["b"].reshape(-1, 2) @ X_new["X"].T + post["a"].reshape(-1, 3)[:, X_new["g"]]
    ref = stats.norm.logpdf(g[None], mu[:, :, None], post["s"].reshape(-1)[:, None, None])
    np.testing.assert_allclose(by_logp, ref, rtol=0, atol=1e-10)
    assert model["X"].get_value().shape == (N, 2) and model.dim_lengths["obs"].eval() == N


@pytest.mark.slow
@pytest.mark.parametrize("grid_mode", ["full", "ends"])
def test_at_the_diabetes_shape_the_doors_ends_equal_the_plain_bisection(captured, grid_mode):
    # benchmarks/bench_conformal_bayes.py's shape (n = 309, 8 000 draws, 133 test points, 100 grid values), both
    # paths, both cores: 2 660 candidates per path checked one by one (about 10 s each on a quiet machine)
    from tests.support.paths import load_benchmark

    bench = load_benchmark("bench_conformal_bayes")
    p = bench.make_problem()
    with pm.Model() as model:
        xd = pm.Data("X", p["X"])
        yd = pm.Data("y", p["y"])
        b = pm.Normal("b", 0, 1, shape=bench.D)
        b0 = pm.Normal("b0", 0, 1)
        s = pm.HalfNormal("s", 1)
        pm.Normal("obs", xd @ b + b0, s, observed=yd, shape=xd.shape[0])
    post = {"b": p["beta"].reshape(4, -1, bench.D), "b0": p["intercept"].reshape(4, -1), "s": p["sigma"].reshape(4, -1)}
    idata = az.from_dict({"posterior": post, "observed_data": {"obs": p["y"]}})
    pm.compute_log_likelihood(idata, model=model, progressbar=False)
    preds = [
        calibprob.conformal_bayes(
            model,
            idata,
            p["X_test"],
            grid=p["grid"],
            method=method,
            min_ess=0.0,
            confidence_level=0.8,
            grid_mode=grid_mode,
            n_jobs=2,
        )  # fmt: skip
        for method in ("closed-form", "logp")
    ]
    assert len(captured) == 2
    _assert_reference(captured)
    np.testing.assert_array_equal(preds[0]["upper"].values, preds[1]["upper"].values)
