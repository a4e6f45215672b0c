"""Calibrated Bayesian optimisation (calibprob.bo): acquisitions, the loop, experiments, CLI.

References: Deshpande, Marx & Kuleshov (2024), Algorithms 3-4, App. A.1 and C;
Capone, Hirche & Pleiss (2023), appendix eq. (18).
"""

from __future__ import annotations

import argparse

import numpy as np
import pytest
import scipy.integrate
import xarray as xr
from scipy import special, stats

from calibprob.bo import (
    StandardizedLaw,
    acquisition_loss,
    bo_table,
    expected_improvement,
    format_bo_table,
    minimize,
    minimize_on_box,
    probability_of_improvement,
    run_experiment,
    win_fraction,
)
from calibprob.bo.loop import _time_series_pit, default_gp
from calibprob.calibrators.online import OnlineQuantileRecalibrator
from calibprob.datasets import get_function
from calibprob.predictive import DEFAULT_LEVELS

FORRESTER = get_function("forrester")


@pytest.fixture(scope="module")
def loo_run():
    """One short calibrated run reused by several tests (1-D: one GP graph compile)."""
    return minimize("forrester", n_init=3, n_steps=4, acquisition="lcb", calibration="loo", seed=3)


# -- acquisition layer ------------------------------------------------------------------------
def test_identity_law_gives_gaussian_closed_forms():
    rng = np.random.default_rng(0)
    mu, sd = rng.normal(size=50), np.exp(rng.normal(size=50))
    best = 0.3
    law = StandardizedLaw(DEFAULT_LEVELS)
    assert law.is_identity
    c = (best - mu) / sd
    np.testing.assert_allclose(
        expected_improvement(mu, sd, best, law), sd * (c * special.ndtr(c) + stats.norm.pdf(c)), rtol=1e-12, atol=1e-14
    )
    np.testing.assert_allclose(probability_of_improvement(mu, sd, best, law), special.ndtr(c), atol=1e-14)
    np.testing.assert_allclose(
        acquisition_loss("lcb", mu, sd, law=law, best=best, kappa=2.0), mu - 2.0 * sd, atol=1e-12
    )
    np.testing.assert_array_equal(
        acquisition_loss("ucb", mu, sd, law=law, best=best), acquisition_loss("lcb", mu, sd, law=law, best=best)
    )


def test_recalibrated_ei_pi_match_quadrature():
    """EI/PI under a non-Gaussian recalibrated law vs numerical integration over w ~ N(0, 1)."""
    levels = np.array([0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.98])
    g = np.maximum.accumulate(1.6 * special.ndtri(levels) + 0.3 * special.ndtri(levels) ** 2)
    law = StandardizedLaw(levels, g)
    w_knots = special.ndtri(levels)

    def gfun(w):  # the contract's piecewise-linear-in-w quantile function with linear tails
        k = np.clip(np.searchsorted(w_knots, w) - 1, 0, levels.size - 2)
        slope = (g[k + 1] - g[k]) / (w_knots[k + 1] - w_knots[k])
        return g[k] + slope * (w - w_knots[k])

    for c in (-4.0, -1.0, 0.0, 0.7, 3.0):
        ei, _ = scipy.integrate.quad(
            lambda w: max(c - gfun(w), 0.0) * stats.norm.pdf(w), -12, 12, points=list(w_knots), limit=200
        )
        assert law.lower_partial_expectation(c) == pytest.approx(ei, rel=1e-7, abs=1e-8)
        pi, _ = scipy.integrate.quad(
            lambda w: float(gfun(w) < c) * stats.norm.pdf(w), -12, 12, points=list(w_knots), limit=200
        )
        assert float(law.cdf(c)) == pytest.approx(pi, abs=1e-7)
    # scale equivariance: EI(mu, sd) = sd * E[(c' - Z)^+]
    assert expected_improvement(1.0, 2.0, 0.0, law) == pytest.approx(2.0 * law.lower_partial_expectation(-0.5))


def test_minimize_on_box_finds_interior_minimum():
    rng = np.random.default_rng(1)
    target = np.array([0.31, 0.77])
    x, v = minimize_on_box(lambda U: np.sum((U - target) ** 2, axis=1), 2, rng, n_starts=3)
    np.testing.assert_allclose(x, target, atol=1e-4)
    assert v < 1e-8


# -- calibration sets: independent brute force -------------------------------------------------
def test_time_series_pit_equals_sequential_conditioning():
    """Cholesky innovations = one-step-ahead forecasts from prefixes with fixed hyperparameters."""
    rng = np.random.default_rng(2)
    U = rng.random((8, 1))
    ys = np.sin(6 * U[:, 0]) + 0.05 * rng.normal(size=8)
    gp = default_gp().set_params(random_state=0).fit(U, ys)
    pit = _time_series_pit(gp, U, ys)
    theta = {k: v for k, v in gp.theta_.items() if k != "mean"}
    for i in range(2, 8):
        prefix = type(gp)(**{**gp.get_params(), "theta": theta, "optimize": False}).fit(U[:i], ys[:i])
        mu, sd = prefix.predict_mean_std(U[i : i + 1])
        assert pit[i] == pytest.approx(special.ndtr((ys[i] - mu[0]) / sd[0]), abs=1e-8)


def test_loo_calibration_set_equals_refits(loo_run):
    """Algorithm 4 with LOO: the recalibrator of step t equals OSD over PITs from n fixed-θ refits."""
    step = 4
    ev, st = loo_run["evaluations"].to_dataset(), loo_run["steps"].to_dataset()
    n = int(loo_run.attrs["n_init"]) + step - 1
    X, y = ev["x"].values[:n], ev["y"].values[:n]
    m, s = y.mean(), y.std()
    ys = (y - m) / s
    lo, hi = FORRESTER.bounds[:, 0], FORRESTER.bounds[:, 1]
    U = (X - lo) / (hi - lo)
    rec = st.sel(step=step)
    theta = {
        "lengthscale": rec["lengthscale"].values / (hi - lo),
        "variance": float(rec["variance"]) / s**2,
        "noise": float(rec["noise"]) / s**2,
    }
    pit = []
    for i in range(n):
        keep = np.arange(n) != i
        gp = type(default_gp())(**{**default_gp().get_params(), "theta": theta, "optimize": False})
        mu, sd = gp.fit(U[keep], ys[keep]).predict_mean_std(U[i : i + 1])
        pit.append(special.ndtr((ys[i] - mu[0]) / sd[0]))
    levels = loo_run["recalibrator"]["level"].values
    brute = OnlineQuantileRecalibrator(levels=levels, eta=float(loo_run.attrs["eta"])).update_pit(pit)
    np.testing.assert_allclose(
        loo_run["recalibrator"]["recalibration"].sel(step=step).values, brute.recalibration_, atol=1e-6
    )
    assert int(loo_run["recalibrator"]["n_calibration"].sel(step=step)) == n


# -- the loop --------------------------------------------------------------------------------
def test_result_schema_regret_and_netcdf_round_trip(loo_run, tmp_path):
    assert set(loo_run.children) == {"evaluations", "steps", "recalibrator"}
    ev = loo_run["evaluations"]
    assert ev.sizes == {"evaluation": 7, "feature": 1}
    assert loo_run["steps"].sizes["step"] == 4
    assert loo_run["recalibrator"].sizes["level"] == DEFAULT_LEVELS.size + 1  # + Phi(-kappa)
    bsf = ev["best_so_far"].values
    assert np.all(np.diff(bsf) <= 0)
    np.testing.assert_allclose(ev["simple_regret"].values, bsf - FORRESTER.minimum)
    assert np.all(ev["simple_regret"].values >= 0)
    assert np.all(np.diff(ev["cumulative_regret"].values) >= 0)
    # the issued forecast's PIT and the base PIT are in [0, 1]; running ECE is finite
    st = loo_run["steps"]
    assert np.all((st["pit"] >= 0) & (st["pit"] <= 1))
    assert np.all(np.isfinite(st["calibration_error"]))
    path = tmp_path / "run.nc"
    loo_run.to_netcdf(path, engine="h5netcdf")
    back = xr.open_datatree(path, engine="h5netcdf")
    xr.testing.assert_identical(back["evaluations"].to_dataset(), ev.to_dataset())
    assert back.attrs["calibration"] == "loo"


def test_seeded_reproducible_and_shared_initial_design(loo_run):
    again = minimize("forrester", n_init=3, n_steps=4, acquisition="lcb", calibration="loo", seed=3)
    np.testing.assert_array_equal(again["evaluations"]["x"].values, loo_run["evaluations"]["x"].values)
    plain = minimize("forrester", n_init=3, n_steps=1, acquisition="lcb", calibration="none", seed=3)
    np.testing.assert_array_equal(plain["evaluations"]["x"].values[:3], loo_run["evaluations"]["x"].values[:3])
    assert "recalibrator" not in plain.children
    # uncalibrated: the forecast used is the base one
    np.testing.assert_array_equal(plain["steps"]["pit"].values, plain["steps"]["pit_base"].values)


@pytest.mark.parametrize("calibration", ["time-series", "online"])
@pytest.mark.parametrize("acquisition", ["ei", "pi"])
def test_other_calibration_sets_and_acquisitions_run(calibration, acquisition):
    res = minimize(
        FORRESTER, n_init=3, n_steps=3, acquisition=acquisition, calibration=calibration, seed=1, refit_every=2
    )
    st = res["steps"]
    np.testing.assert_array_equal(st["refit"].values, [True, False, True])
    x = res["evaluations"]["x"].values
    assert np.all((x >= 0) & (x <= 1))


def test_online_calibration_obeys_theorem2_inside_bo():
    """calibration='online': hits of the recalibrator over the BO steps satisfy its proven bound."""
    res = minimize("forrester", n_init=3, n_steps=10, acquisition="ei", calibration="online", seed=4, eta=1.0)
    rec = res["recalibrator"].to_dataset()
    # state stored at step t is before observing y_t; rebuild the final state by one more update
    final = OnlineQuantileRecalibrator.from_dataset(rec.isel(step=-1)).update_pit(
        [float(res["steps"]["pit_base"].values[-1])]
    )
    assert final.n_updates_ == 10
    assert np.all(np.abs(final.coverage() - final.levels_) <= final.coverage_bound() + 1e-12)


@pytest.mark.seeded(0)
def test_plain_callable_with_bounds_and_custom_gp(seed, record_property):
    """7 evaluations (3 random, 4 by EI) of a quadratic on [-1, 1] reach within 0.22 of its minimiser; the loop's
    seed (initial design and hyperparameter restarts) from the seed sweep, 0 in the default run. Swept at seeds 0..19
    (2026-11-29): the best value found is 3.3e-4 at worst (limit 0.05)."""

    def f(X):
        return np.sum((X - 0.3) ** 2, axis=1)

    gp = default_gp().set_params(n_restarts=1)
    res = minimize(f, bounds=[[-1.0, 1.0]], n_init=3, n_steps=4, acquisition="ei", calibration="loo", gp=gp, seed=seed)
    record_property("best_so_far", float(res["evaluations"]["best_so_far"][-1]))
    assert float(res["evaluations"]["best_so_far"][-1]) < 0.05
    assert "simple_regret" not in res["evaluations"]


def test_non_finite_objective_values_are_recorded_not_fatal():
    calls = {"n": 0}

    def flaky(X):  # call 1: the initial design (3 rows); call k >= 2: step k - 1
        calls["n"] += 1
        out = FORRESTER(X)
        if calls["n"] == 1:
            out[1] = np.nan
        elif calls["n"] == 3:
            out[:] = np.nan
        elif calls["n"] == 4:
            out[:] = -np.inf
        return out

    res = minimize(flaky, bounds=FORRESTER.bounds, n_init=3, n_steps=5, acquisition="lcb", calibration="loo", seed=0)
    ev = res["evaluations"]
    y = ev["y"].values
    assert np.isnan(y[1]) and np.isnan(y[4]) and y[5] == -np.inf
    np.testing.assert_array_equal(ev["finite"].values, np.isfinite(y))
    # modelled value = worst finite value observed so far
    assert ev["y_model"].values[1] == y[0]
    assert np.isfinite(ev["y_model"].values).all()
    # -inf is a failure, not a minimum
    assert np.isfinite(ev["best_so_far"].values).all()
    assert float(ev["best_so_far"][-1]) == pytest.approx(np.min(y[np.isfinite(y)]))
    assert np.isnan(res["steps"]["pit"].values[[1, 2]]).all()  # steps 2, 3 evaluated evaluations 4, 5


def test_no_finite_initial_value_raises():
    with pytest.raises(ValueError, match="no finite value on the 3 initial points"):
        minimize(lambda X: np.full(X.shape[0], np.nan), bounds=[[0, 1]], n_init=3, n_steps=2)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"bounds": [[1.0, 0.0]]}, "bounds must have lower < upper"),
        ({"bounds": [[0.0, 0.0]]}, "bounds must have lower < upper"),
        ({"bounds": [[0.0, 1.0, 2.0]]}, "bounds must have shape \\(d, 2\\)"),
        ({"bounds": [[0.0, np.inf]]}, "bounds must be finite"),
        ({"eta": 0.0}, "eta must be > 0"),
        ({"eta": -0.5}, "eta must be > 0"),
        ({"levels": [0.0, 0.5]}, "levels must lie strictly inside \\(0, 1\\)"),
        ({"levels": [0.5, 1.2]}, "levels must lie strictly inside \\(0, 1\\)"),
        ({"sharp_level": 1.0}, "sharp_level must be in \\(0, 1\\)"),
        ({"acquisition": "thompson"}, "acquisition must be one of"),
        ({"calibration": "cv"}, "calibration must be one of"),
        ({"acquisition": "sharp-ucb", "calibration": "loo"}, "pass calibration='none'"),
        ({"n_init": 0}, "n_init must be >= 1"),
        ({"X_init": [[2.0]]}, "X_init must lie inside bounds"),
    ],
)
def test_bad_input(kwargs, match):
    args = {"bounds": [[0.0, 1.0]], **kwargs}
    with pytest.raises(ValueError, match=match):
        minimize(lambda X: X[:, 0], n_steps=1, **args)


def test_objective_must_return_one_value_per_row():
    with pytest.raises(ValueError, match="one value per row"):
        minimize(lambda X: np.zeros(2), bounds=[[0, 1]], n_init=3, n_steps=1)
    with pytest.raises(ValueError, match="bounds are required"):
        minimize(lambda X: X[:, 0], n_steps=1)


def test_sharp_ucb_runs_and_flags_fallback():
    res = minimize("forrester", n_init=3, n_steps=3, acquisition="sharp-ucb", calibration="none", seed=0)
    fitted = res["steps"]["sharp_fitted"].values
    # n = 3 points cannot be split into two halves of >= 2: vanilla fallback at step 1 only
    np.testing.assert_array_equal(fitted, [False, True, True])
    assert np.isnan(res["steps"]["pit"].values).all()


# -- experiments, table, CLI, plots ---------------------------------------------------------------
def test_win_fraction_definition():
    ref = np.array([[5.0, 1.0, 1.0], [5.0, 5.0, 1.0], [5.0, 2.0, 2.0], [5.0, 3.0, 3.0]])
    base = np.array([[5.0, 2.0, 2.0], [5.0, 1.0, 1.0], [5.0, 5.0, 2.0], [5.0, 3.0, 3.0]])
    # seed 0: lower minimum -> win; seed 1: same minimum, later -> loss; seed 2: same minimum,
    # reached earlier -> win; seed 3: identical curves -> not a win
    assert win_fraction(ref, base, tol=1e-9) == pytest.approx(0.5)
    assert np.isnan(win_fraction(np.full((1, 3), np.nan), base[:1], tol=1e-9))


def test_experiment_table_and_resume(tmp_path, monkeypatch):
    out = tmp_path / "bo.nc"
    kw = dict(n_init=3, n_steps=2, out=out, progress=False)
    ds = run_experiment(["forrester"], ["ucb", "ei"], ["calibrated", "uncalibrated", "sharp"], 2, **kw)
    assert list(ds["method"].values) == ["calibrated", "uncalibrated", "sharp"]
    assert ds.sizes["seed"] == 2 and ds.sizes["evaluation"] == 5
    # sharp is a UCB method: not run with EI
    assert np.isnan(ds["best_so_far"].sel({"acquisition": "ei", "method": "sharp"}).values).all()
    assert (ds["error"].values[np.isfinite(ds["run_time"].values)] == "").all()
    # the same seed gives every method the same initial design
    x = ds["x"].sel({"acquisition": "ucb"}).isel(evaluation=slice(0, 3))
    np.testing.assert_array_equal(x.sel({"method": "calibrated"}).values, x.sel({"method": "uncalibrated"}).values)
    table = bo_table(ds)
    assert np.isnan(table["win_fraction"].sel({"method": "calibrated"})).all()
    wf = table["win_fraction"].sel({"function": "forrester", "acquisition": "ucb", "method": "uncalibrated"})
    assert 0.0 <= float(wf) <= 1.0
    assert ((table["auc"] >= 0) | table["auc"].isnull()).all()
    text = format_bo_table(table)
    assert "calibrated wins" in text and "forrester" in text
    # resume: nothing is recomputed
    import calibprob.bo.experiment as exp

    monkeypatch.setattr(exp, "run_task", lambda *a, **k: (_ for _ in ()).throw(AssertionError("recomputed")))
    again = run_experiment(["forrester"], ["ucb", "ei"], ["calibrated", "uncalibrated", "sharp"], 2, **kw)
    xr.testing.assert_identical(again.drop_attrs(), ds.drop_attrs())


def test_experiment_bad_input():
    with pytest.raises(ValueError, match="methods must be among"):
        run_experiment(["forrester"], ["ei"], ["magic"], 1, progress=False)
    with pytest.raises(ValueError, match="acquisitions must be among"):
        run_experiment(["forrester"], ["sharp-ucb"], ["calibrated"], 1, progress=False)
    with pytest.raises(ValueError, match="name must be a known test function"):
        run_experiment(["nope"], ["ei"], ["calibrated"], 1, progress=False)


def _parser():
    from calibprob.bo.cli import add_bo_parser

    parser = argparse.ArgumentParser(prog="calibprob")
    add_bo_parser(parser.add_subparsers(dest="command", required=True))
    return parser


def test_cli_bo_command(tmp_path, capsys):
    args = _parser().parse_args(
        [
            "bo",
            "--functions",
            "forrester",
            "--acquisitions",
            "ei",
            "--seeds",
            "2",
            "--n-init",
            "3",
            "--n-steps",
            "2",
            "--no-progress",
            "--out",
            str(tmp_path / "r.nc"),
            "--plots",
            str(tmp_path / "plots"),
        ]
    )
    assert args.func(args) == 0
    out = capsys.readouterr()
    assert "min found" in out.out and "uncalibrated" in out.out
    assert (tmp_path / "plots" / "bo_forrester_ei.png").is_file()
    bad = _parser().parse_args(["bo", "--functions", "forrester", "ackley", "--n-init", "3", "4", "5"])
    assert bad.func(bad) == 2
    assert "--n-init takes one value or one per function" in capsys.readouterr().err


def test_plots_smoke(loo_run):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from calibprob.bo import plot_best_so_far, plot_calibration_error, plot_snapshot_1d, snapshot

    fig, axes = plt.subplots(1, 3)
    plot_best_so_far({"loo": loo_run}, ax=axes[0], regret=True)
    plot_calibration_error(loo_run, base=True, ax=axes[1])
    plot_snapshot_1d(loo_run, 2, objective=FORRESTER, ax=axes[2])
    plt.close(fig)
    snap = snapshot(loo_run, 2, np.linspace(0, 1, 5))
    assert np.all(snap["upper"] >= snap["lower"]) and np.all(snap["upper_recal"] >= snap["lower_recal"])


# -- slow: the paper's Figure 6 situation and the Dask runner --------------------------------------
@pytest.mark.slow
def test_figure6_situation_calibrated_escapes_local_minimum():
    """Forrester, 3 initial points missing [0.6, 0.9], hyperparameters fitted once on them (the GP is
    overconfident there): uncalibrated UCB stays at the local minimum near 0.14, calibrated UCB
    widens its intervals and finds the global minimum near 0.757."""
    X_init = np.array([[0.2], [0.45], [0.98]])
    runs = {
        cal: minimize(
            "forrester", X_init=X_init, n_steps=25, acquisition="ucb", calibration=cal, seed=0, refit_every=100
        )
        for cal in ("none", "loo")
    }
    assert float(runs["none"]["evaluations"]["best_so_far"][-1]) > -1.0
    assert float(runs["loo"]["evaluations"]["best_so_far"][-1]) < -6.0
    x_loo = runs["loo"]["evaluations"]["x"].values[:, 0]
    assert np.any(np.abs(x_loo - 0.7572) < 0.01)
    # the recalibrated 95% interval over [0.6, 0.9] is wider than the GP's when it goes there
    from calibprob.bo import snapshot

    step = int(np.argmax((x_loo[3:] > 0.6) & (x_loo[3:] < 0.9))) + 1
    snap = snapshot(runs["loo"], step, np.linspace(0.6, 0.9, 31))
    assert float((snap["upper_recal"] - snap["lower_recal"]).mean()) > 1.1 * float(
        (snap["upper"] - snap["lower"]).mean()
    )


@pytest.mark.slow
def test_dask_local_cluster_matches_serial(tmp_path):
    kw = dict(n_init=3, n_steps=3, progress=False)
    serial = run_experiment(["forrester"], ["ei"], ["calibrated", "uncalibrated"], 2, **kw)
    dask = run_experiment(
        ["forrester"], ["ei"], ["calibrated", "uncalibrated"], 2, workers=2, out=tmp_path / "d.nc", **kw
    )
    np.testing.assert_allclose(dask["y"].values, serial["y"].values)
    np.testing.assert_allclose(dask["best_so_far"].values, serial["best_so_far"].values)


# -- the loop's pieces: settings, calibration strategies, step recorder, BLAS limit -------------
def test_settings_validate_and_complete_levels():
    from calibprob.bo.settings import BOSettings

    s = BOSettings(acquisition="lcb", kappa=1.5, n_steps=3)
    # Phi(-kappa) is added to the default levels: the confidence bound's own level is tracked
    assert np.isclose(s.recalibrator_levels, special.ndtr(-1.5)).sum() == 1
    assert s.n_steps == 3 and isinstance(s.kappa, float)
    with pytest.raises(ValueError, match="kappa must be finite; got inf"):
        BOSettings(kappa=np.inf)
    with pytest.raises(ValueError, match="n_steps must be >= 0"):
        BOSettings(n_steps=-1)
    with pytest.raises(AttributeError):
        s.eta = 1.0  # frozen: a run cannot change its settings half-way


def test_calibration_strategy_table_covers_every_calibration():
    from calibprob.bo.calibration import CALIBRATION_STRATEGIES, strategy_for
    from calibprob.bo.loop import CALIBRATIONS
    from calibprob.bo.settings import BOSettings

    assert set(CALIBRATION_STRATEGIES) == set(CALIBRATIONS) | {"sharp-gp", "conformal-acquisition"}
    for cal in CALIBRATIONS:
        assert strategy_for(BOSettings(calibration=cal, acquisition="lcb")).name == cal
    assert strategy_for(BOSettings(acquisition="sharp-ucb", calibration="none")).name == "sharp-gp"
    for acq in ("cei", "cucb"):  # Stanton et al.'s conformal acquisitions
        assert strategy_for(BOSettings(acquisition=acq, calibration="conformal")).name == "conformal-acquisition"


def test_online_strategy_learns_only_from_observed_pits():
    """The online strategy's law at step t is OSD over the t-1 base PITs seen so far (eq. 7)."""
    from calibprob.bo.calibration import ModelData, strategy_for
    from calibprob.bo.settings import BOSettings

    settings = BOSettings(calibration="online", eta=1.0)
    strat = strategy_for(settings)
    data = ModelData.from_history([[0.1], [0.5]], [1.0, 2.0], np.zeros(1), np.ones(1))
    assert strat.recalibrate(None, data).n_calibration == 0
    pits = [0.05, 0.9, 0.3]
    for u in pits:
        strat.observe(u)
    cal = strat.recalibrate(None, data)
    brute = OnlineQuantileRecalibrator(levels=settings.recalibrator_levels, eta=1.0).update_pit(pits)
    np.testing.assert_allclose(cal.state["recalibration"].values, brute.recalibration_)
    assert cal.n_calibration == 3


def test_model_data_replaces_failures_by_worst_finite():
    from calibprob.bo.calibration import ModelData

    data = ModelData.from_history([[0.0], [2.0], [4.0]], [1.0, np.nan, 3.0], np.zeros(1), np.full(1, 4.0))
    y_model = np.array([1.0, 3.0, 3.0])
    np.testing.assert_allclose(data.ys, (y_model - y_model.mean()) / y_model.std())
    np.testing.assert_allclose(data.U[:, 0], [0.0, 0.5, 1.0])
    assert data.best == pytest.approx(data.ys[0]) and data.incumbent[0] == 0.0


def test_step_recorder_rejects_incomplete_records():
    from calibprob.bo.record import StepRecorder

    with pytest.raises(ValueError, match=r"missing \['acquisition_value'"):
        StepRecorder().record(pit=0.5)


def test_blas_limit_holds_during_the_run_and_is_restored():
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def blas_threads():
        return [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]

    seen = []

    def f(X):
        seen.extend(blas_threads())
        return FORRESTER(X)

    # start from 2 threads so that the limit of 1 inside the run is visible
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        if not before or set(before) != {2}:
            pytest.skip("no BLAS library whose thread count threadpoolctl can set")
        minimize(f, bounds=FORRESTER.bounds, n_init=3, n_steps=1, calibration="none", blas_threads=1)
        assert blas_threads() == before
    assert seen and set(seen) == {1}
    with pytest.raises(ValueError, match="blas_threads must be >= 1"):
        minimize(f, bounds=FORRESTER.bounds, n_steps=1, blas_threads=0)
