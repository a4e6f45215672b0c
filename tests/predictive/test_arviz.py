"""PyMC in, ArviZ out: ``from_draws`` on PyMC/ArviZ trees, ``y`` as PyMC's observed data,
``to_datatree`` read by ArviZ 1 without glue, and a PyMC Student-t regression end to end
(a fixed posterior through ``pm.sample_posterior_predictive`` in the default run; the
NUTS fit is marked slow).

Tolerances are Monte Carlo ones stated where used (CLT, DKW, binomial sd); every random
input is seeded.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr
from scipy import stats

import calibprob
from calibprob import metrics as M

N = 40


def _pp_dataset(rng, n=N, chains=2, draws=300, dim="obs_id", var="y", coord=None):
    """Predictive draws shaped like PyMC's posterior_predictive: gamma rows, loc per obs."""
    loc = np.linspace(-1.0, 1.0, n)
    vals = loc + stats.gamma(a=3.0).rvs(size=(chains, draws, n), random_state=rng)
    coord = np.arange(100, 100 + n) if coord is None else coord
    return xr.Dataset({var: (("chain", "draw", dim), vals)}, coords={dim: coord})


@pytest.fixture(scope="module")
def pp():
    return _pp_dataset(np.random.default_rng(11))


@pytest.fixture(scope="module")
def observed(pp):
    y = np.random.default_rng(12).normal(size=N) + 2.0
    return xr.DataArray(y, dims=("obs_id",), coords={"obs_id": pp["obs_id"].values}, name="y")


# ---------------------------------------------------------------------------
# PyMC in: from_draws
# ---------------------------------------------------------------------------


class _LegacyInferenceData:
    """The ArviZ 0.x InferenceData interface: ``groups()`` names, one attribute (a Dataset) each."""

    def __init__(self, **groups):
        self._groups = list(groups)
        for name, ds in groups.items():
            setattr(self, name, ds)

    def groups(self):
        return list(self._groups)


def test_from_draws_same_dataset_from_every_level_of_a_tree(pp, observed):
    tree = xr.DataTree.from_dict({"posterior_predictive": pp, "observed_data": observed.to_dataset()})
    ref = calibprob.from_draws(tree)
    # independent check: the empirical quantiles (Hyndman-Fan 7) of the 600 flattened draws
    flat = pp["y"].values.reshape(-1, N)
    np.testing.assert_allclose(
        ref["quantile"].values, np.quantile(flat, calibprob.DEFAULT_LEVELS, axis=0).T, rtol=0, atol=1e-12
    )
    np.testing.assert_array_equal(ref["obs"].values, pp["obs_id"].values)  # PyMC's labels kept
    assert ref.attrs["obs_dim"] == "obs_id" and ref.attrs["var_name"] == "y" and ref.attrs["n_draws"] == 600
    for other in (
        tree["posterior_predictive"],  # a DataTree node holding the variables
        tree.posterior_predictive,
        tree.posterior_predictive["y"],
        pp,
        _LegacyInferenceData(posterior_predictive=pp, observed_data=observed.to_dataset()),
        # az.extract's layout: one stacked 'sample' dim (a MultiIndex of chain, draw)
        pp["y"].stack(sample=("chain", "draw")).transpose("obs_id", "sample"),
    ):
        xr.testing.assert_identical(calibprob.from_draws(other), ref)


def test_from_draws_group_rules(pp):
    new = _pp_dataset(np.random.default_rng(5), n=7, coord=np.arange(500, 507))
    only_predictions = xr.DataTree.from_dict({"posterior": pp.isel(obs_id=0), "predictions": new})
    got = calibprob.from_draws(only_predictions)
    assert got.sizes["obs"] == 7 and got["obs"].values.tolist() == list(range(500, 507))
    both = xr.DataTree.from_dict({"posterior_predictive": pp, "predictions": new})
    with pytest.raises(
        ValueError,
        match=r"both a 'posterior_predictive' and a 'predictions' group; pass "
        r"group='posterior_predictive' .* or group='predictions'",
    ):
        calibprob.from_draws(both)
    xr.testing.assert_identical(calibprob.from_draws(both, group="predictions"), got)
    xr.testing.assert_identical(calibprob.from_draws(both, group="posterior_predictive"), calibprob.from_draws(pp))
    with pytest.raises(
        ValueError,
        match=r"group='prior' is not a group of draws; it has groups "
        r"\['posterior_predictive', 'predictions'\]",
    ):
        calibprob.from_draws(both, group="prior")


@pytest.mark.parametrize(
    "make, match",
    [
        (  # a tree with neither group: names the groups present and the fix
            lambda pp: xr.DataTree.from_dict({"posterior": pp.isel(obs_id=0), "observed_data": pp.isel(chain=0)}),
            r"neither a 'posterior_predictive' nor a 'predictions' group; it has groups "
            r"\['posterior', 'observed_data'\]\. Draw them first with pm\.sample_posterior_predictive",
        ),
        (  # several variables, no var_name: lists the candidates
            lambda pp: pp.assign(mu=pp["y"] * 2),
            r"the draws' Dataset holds 2 variables \['y', 'mu'\]; pass var_name=",
        ),
        (
            lambda pp: xr.DataTree.from_dict({"posterior_predictive": pp.assign(mu=pp["y"])}),
            r"the draws' group 'posterior_predictive' holds 2 variables \['y', 'mu'\]; pass var_name=",
        ),
        (  # more than one non-sample dim
            lambda pp: pp["y"].expand_dims(output=2, axis=-1),
            r"variable 'y' must have exactly one dimension besides the sample dims \['chain', 'draw'\]; "
            r"got \['obs_id', 'output'\]",
        ),
        (
            lambda pp: pp["y"].isel(obs_id=0),
            r"got \[\]: it has no observation dim",
        ),
        (
            lambda pp: pp["y"].rename(chain="c", draw="d"),
            r"none of sample_dims=\('chain', 'draw', 'sample'\)",
        ),
    ],
)
def test_from_draws_rejects_bad_input(pp, make, match):
    with pytest.raises(ValueError, match=match):
        calibprob.from_draws(make(pp))


def test_from_draws_var_name_errors(pp):
    with pytest.raises(ValueError, match=r"var_name='z' is not a variable of the draws' Dataset; it has \['y'\]"):
        calibprob.from_draws(pp, var_name="z")
    tree = xr.DataTree.from_dict({"posterior_predictive": pp.assign(mu=pp["y"] - 1.0)})
    with pytest.raises(
        ValueError,
        match=r"var_name='z' is not a variable of the draws' group "
        r"'posterior_predictive'; it has \['y', 'mu'\]",
    ):
        calibprob.from_draws(tree, var_name="z")
    chosen = calibprob.from_draws(tree, var_name="mu")
    np.testing.assert_allclose(chosen["mean"], (pp["y"] - 1.0).mean(("chain", "draw")), rtol=1e-12)
    with pytest.raises(ValueError, match=r"var_name='mu' but draws is the DataArray 'y'"):
        calibprob.from_draws(pp["y"], var_name="mu")
    with pytest.raises(ValueError, match=r"group='predictions' applies to a DataTree / InferenceData; got a Dataset"):
        calibprob.from_draws(pp, group="predictions")


# ---------------------------------------------------------------------------
# y as NumPy or a 1-D DataArray with any dim name (one helper everywhere)
# ---------------------------------------------------------------------------

_Y_FUNCS = {
    "pit": M.pit,
    "calibration_curve": M.calibration_curve,
    "ece": M.ece,
    "coverage": M.coverage,
    "iae": M.iae,
    "nll": M.nll,
    "crps": M.crps,
    "pinball": M.pinball,
    "mse": M.mse,
    "rmse": M.rmse,
    "ueb_violation": M.ueb_violation,
    "cdf": lambda p, y: p.calib.cdf(y),
    "pdf": lambda p, y: p.calib.pdf(y),
    "logpdf": lambda p, y: p.calib.logpdf(y),
    "accessor pit": lambda p, y: p.calib.pit(y),
    "zscore": lambda p, y: p.calib.zscore(y),
}


@pytest.mark.parametrize("name", list(_Y_FUNCS))
@pytest.mark.parametrize("family", ["normal", "draws"])
def test_y_with_any_dim_name_matches_numpy(pp, observed, name, family):
    pred = calibprob.from_draws(pp) if family == "draws" else calibprob.normal(np.zeros(N), np.ones(N))
    func = _Y_FUNCS[name]
    want = func(pred, observed.values)
    for y in (observed, observed.rename(obs_id="y_dim_0"), observed.drop_vars("obs_id")):
        np.testing.assert_array_equal(np.asarray(func(pred, y)), np.asarray(want))
    with pytest.raises(
        ValueError,
        match=rf"mismatched lengths: y has {N - 1} entries, the prediction has {N} "
        r"observations",
    ):
        func(pred, observed[:-1])


def test_evaluate_takes_pymc_observed_data_by_position(pp, observed):
    pred = calibprob.from_draws(pp)
    tree = xr.DataTree.from_dict({"observed_data": observed.to_dataset()})
    got = calibprob.evaluate(pred, tree.observed_data["y"])
    xr.testing.assert_identical(got, calibprob.evaluate(pred, observed.values))
    # by position even when the labels differ from pred's (e.g. pred built from NumPy draws)
    plain = calibprob.from_draws(pp["y"].values.reshape(-1, N))
    xr.testing.assert_identical(calibprob.evaluate(plain, observed), calibprob.evaluate(plain, observed.values))
    intervals = pred.calib.interval(M.interval_levels([0.9]))
    xr.testing.assert_identical(
        M.evaluate_intervals(intervals, observed, [0.9]), M.evaluate_intervals(intervals, observed.values, [0.9])
    )


@pytest.mark.parametrize(
    "y, err, match",
    [
        (
            lambda pp, obs: obs[:-3],
            ValueError,
            rf"mismatched lengths: y has {N - 3} entries, the prediction has {N} observations",
        ),
        (
            lambda pp, obs: pp["y"],
            ValueError,
            r"y as a DataArray must be 1-D.*got dims \('chain', 'draw', 'obs_id'\)\. Its dims \['chain', 'draw'\] "
            r"index draws: pass the observed values",
        ),
        (
            lambda pp, obs: obs.to_dataset(),
            TypeError,
            r"y must be an array or a 1-D DataArray; got a Dataset with variables \['y'\]\. Pass one variable",
        ),
        (
            lambda pp, obs: xr.DataTree.from_dict({"/": obs.to_dataset()}),
            TypeError,
            r"got a DataTree with variables \['y'\]\. Pass one variable, e\.g\. idata\.observed_data\['y'\]",
        ),
        (
            lambda pp, obs: obs.where(obs.obs_id != 105),
            ValueError,
            r"y must be finite; got 1 non-finite value\(s\), the first \(NaN\) at index 5",
        ),
    ],
)
def test_bad_targets_are_rejected_everywhere(pp, observed, y, err, match):
    pred = calibprob.from_draws(pp)
    bad = y(pp, observed)
    for call in (
        lambda: calibprob.evaluate(pred, bad),
        lambda: M.nll(pred, bad),
        lambda: pred.calib.cdf(bad),
        lambda: pred.calib.zscore(bad),
        lambda: calibprob.to_datatree(pred, bad, n_draws=5),
    ):
        with pytest.raises(err, match=match):
            call()


def test_obs_dim_labels_still_checked_when_the_dim_is_obs():
    pred = calibprob.normal([0.0, 1.0], [1.0, 1.0])
    shuffled = xr.DataArray([0.0, 1.0], dims=("obs",), coords={"obs": [1, 5]})
    with pytest.raises(
        ValueError, match=r"y's obs coordinate does not match the prediction's obs labels: 5 is not an obs label"
    ):
        pred.calib.logpdf(shuffled)


# ---------------------------------------------------------------------------
# ArviZ out: to_datatree
# ---------------------------------------------------------------------------


def test_to_datatree_layout_and_dim_names(pp, observed):
    pred = calibprob.from_draws(pp)
    dt = calibprob.to_datatree(pred, observed, n_draws=50, n_chains=2, random_state=0)
    assert set(dt.children) == {"posterior_predictive", "observed_data", "log_likelihood"}
    for group, dims in (
        ("posterior_predictive", ("chain", "draw", "obs_id")),
        ("observed_data", ("obs_id",)),
        ("log_likelihood", ("chain", "draw", "obs_id")),
    ):
        assert dt[group]["y"].dims == dims
        np.testing.assert_array_equal(dt[group]["obs_id"].values, observed["obs_id"].values)
    assert dt.posterior_predictive.sizes == {"chain": 2, "draw": 50, "obs_id": N}
    np.testing.assert_array_equal(dt.observed_data["y"].values, observed.values)
    # without y: only draws; the dim name comes from pred.attrs["obs_dim"] (from_draws), else "obs"
    only = calibprob.to_datatree(pred, n_draws=5)
    assert list(only.children) == ["posterior_predictive"] and only.posterior_predictive["y"].dims[-1] == "obs_id"
    plain = calibprob.normal(np.zeros(3), np.ones(3))
    assert calibprob.to_datatree(plain, [0.0, 1.0, 2.0], n_draws=5)["observed_data"]["y"].dims == ("obs",)
    named = calibprob.to_datatree(plain, [0.0, 1.0, 2.0], n_draws=5, obs_dim="row", var_name="target")
    assert named.posterior_predictive["target"].dims == ("chain", "draw", "row")
    # seeded: the same random_state gives the same draws
    again = calibprob.to_datatree(pred, observed, n_draws=50, n_chains=2, random_state=0)
    xr.testing.assert_identical(dt, again)


def test_log_likelihood_sums_to_minus_n_nll(pp, observed):
    for pred in (calibprob.from_draws(pp), calibprob.normal(np.linspace(1, 3, N), np.full(N, 0.7))):
        dt = calibprob.to_datatree(pred, observed, n_draws=20, n_chains=2, random_state=1)
        nll = float(calibprob.evaluate(pred, observed)["nll"])
        sums = dt.log_likelihood["y"].sum("obs_id").values
        np.testing.assert_allclose(sums, -N * nll, rtol=1e-12)
        elpd = calibprob.heldout_elpd(dt)
        assert elpd.elpd == pytest.approx(-N * nll, rel=1e-12)
        np.testing.assert_allclose(elpd.elpd_i.values, pred.calib.logpdf(observed.values).values, rtol=1e-12)


@pytest.mark.seeded(2)
def test_normal_draws_match_loc_and_scale(seed, record_property):
    """Seeded: sample mean and sd within 4.5 CLT standard errors of loc and scale for every obs (25 obs, so
    about a 1e-4 chance per run that one falls outside). Over the seed sweep's 20 seeds (tests/conftest.py) the
    largest gaps were 3.03 (mean) and 3.54 (sd) standard errors."""
    loc = np.linspace(-3.0, 3.0, 25)
    scale = np.linspace(0.2, 4.0, 25)
    S = 4 * 1000
    dt = calibprob.to_datatree(calibprob.normal(loc, scale), n_draws=1000, n_chains=4, random_state=seed)
    draws = dt.posterior_predictive["y"]
    mean, sd = draws.mean(("chain", "draw")).values, draws.std(("chain", "draw"), ddof=1).values
    record_property("mean_gap_in_se", float(np.max(np.abs(mean - loc) / (scale / np.sqrt(S)))))
    record_property("sd_gap_in_se", float(np.max(np.abs(sd - scale) / (scale / np.sqrt(2 * S)))))
    assert np.all(np.abs(mean - loc) < 4.5 * scale / np.sqrt(S))
    assert np.all(np.abs(sd - scale) < 4.5 * scale / np.sqrt(2 * S))  # sd of a normal sample sd


@pytest.mark.seeded(3)
def test_round_trip_from_draws_to_datatree_keeps_the_distribution(pp, seed, record_property):
    """pred -> to_datatree (S = 4000 draws) -> from_draws: the quantiles agree within DKW.

    Mapped through pred's own CDF F, the round trip's empirical quantile at level p is a
    uniform empirical quantile, whatever F's shape: by the Dvoretzky-Kiefer-Wolfowitz
    inequality (Massart's constant) sup_p |F(q_hat_p) - p| <= eps = sqrt(log(2/alpha)/(2S))
    for all 99 levels at once with probability >= 1 - alpha; alpha = 1e-6 per obs gives
    eps = 0.0426, plus 1/S for the interpolation between order statistics. (An asymptotic
    per-level sd sqrt(p(1-p)/S)/f does not apply here: the 600-draw law has kinks whose
    slopes differ by 5x within the sd window.)
    """
    pred = calibprob.from_draws(pp)
    S = 4000
    back = calibprob.from_draws(calibprob.to_datatree(pred, n_draws=2000, n_chains=2, random_state=seed))
    assert back.attrs["obs_dim"] == "obs_id" and back["obs"].values.tolist() == pred["obs"].values.tolist()
    p = pred.calib.levels
    q_hat = back.calib.quantiles
    F = np.stack([pred.calib.cdf(q_hat[:, j]).values for j in range(p.size)], axis=1)
    eps = np.sqrt(np.log(2 / 1e-6) / (2 * S)) + 1 / S
    record_property("dkw_gap_over_eps", float(np.abs(F - p).max() / eps))
    assert np.abs(F - p).max() < eps  # at most 0.66 eps over the seed sweep's 20 seeds
    # the same in the data's units, for the record: within eps of probability either side
    lo = pred.calib.ppf(np.clip(p - eps, 1e-6, None)).values
    hi = pred.calib.ppf(np.clip(p + eps, None, 1 - 1e-6)).values
    assert np.all((lo <= q_hat) & (q_hat <= hi))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_draws": 0}, r"n_draws must be >= 1; got 0"),
        ({"n_chains": 0}, r"n_chains must be >= 1; got 0"),
        (
            {"obs_dim": "draw"},
            r"obs_dim must be a string other than the draw dims \('chain', 'draw', 'sample'\); got 'draw'",
        ),
        ({"obs_dim": "sample"}, r"obs_dim must be .* got 'sample', which would be read back as draws. Rename"),
        ({"var_name": ""}, r"var_name must be a non-empty string; got ''"),
        ({"y": [0.0, 1.0]}, r"mismatched lengths: y has 2 entries, the prediction has 3 observations"),
    ],
)
def test_to_datatree_rejects_bad_input(kwargs, match):
    pred = calibprob.normal([0.0, 1.0, 2.0], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=match):
        calibprob.to_datatree(pred, **kwargs)


def test_to_datatree_rejects_a_non_prediction():
    with pytest.raises(TypeError, match="a predictive distribution must be an xarray.Dataset; got ndarray"):
        calibprob.to_datatree(np.zeros(3))


def test_to_datatree_round_trips_netcdf(tmp_path, observed):
    dt = calibprob.to_datatree(calibprob.normal(np.zeros(N), np.ones(N)), observed, n_draws=10, random_state=0)
    path = tmp_path / "pred.nc"
    dt.to_netcdf(path, engine="h5netcdf")
    xr.testing.assert_identical(xr.open_datatree(path, engine="h5netcdf").load(), dt)


# ---------------------------------------------------------------------------
# ArviZ 1 reads it without glue
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def heldout():
    """y ~ N(0, 1) on 200 held-out points; a calibrated and an overconfident prediction."""
    y = np.random.default_rng(21).normal(size=200)
    y = xr.DataArray(y, dims=("obs_id",), coords={"obs_id": np.arange(1000, 1200)})
    good = calibprob.normal(np.zeros(200), np.ones(200))
    narrow = calibprob.normal(np.zeros(200), np.full(200, 0.5))
    return y, good, narrow


@pytest.mark.seeded(4)
def test_arviz_pit_ecdf_reads_the_tree(heldout, seed, record_property):
    """ArviZ's PIT (draws <= y over chain, draw) and its simultaneous 99 % envelope (the draws' seed from the seed
    sweep, 4 in the default run)."""
    from arviz_stats.ecdf_utils import compute_ecdf, difference_ecdf_pit

    y, good, narrow = heldout
    for pred, calibrated in ((good, True), (narrow, False)):
        dt = calibprob.to_datatree(pred, y, n_draws=1000, random_state=seed)
        res = difference_ecdf_pit(dt.posterior_predictive.dataset, dt.observed_data.dataset, 0.99, False, 1000)
        x, d, lo, hi = res["y"].values
        # independent: the PIT from the draws by hand, and its ECDF at ArviZ's points
        pit = (dt.posterior_predictive["y"] <= dt.observed_data["y"]).mean(("chain", "draw")).values
        np.testing.assert_allclose(d[1:-1], compute_ecdf(pit, x[1:-1]) - x[1:-1], atol=1e-15)
        # the draws' PIT estimates pred's exact PIT within 4.5 binomial sd (S = 1000)
        exact = pred.calib.pit(y).values
        sd = np.sqrt(exact * (1 - exact) / 1000)
        record_property(f"pit_error_sd_{calibrated}", float(np.max((np.abs(pit - exact) - 1e-3) / sd)))
        assert np.all(np.abs(pit - exact) <= 4.5 * np.sqrt(exact * (1 - exact) / 1000) + 1e-3)
        inside = bool(np.all((d >= lo - 1e-12) & (d <= hi + 1e-12)))
        assert inside is calibrated


def test_arviz_plots_run_on_the_tree(heldout):
    import matplotlib

    matplotlib.use("Agg")
    import arviz as az
    import matplotlib.pyplot as plt

    y, good, _ = heldout
    dt = calibprob.to_datatree(good, y, n_draws=200, random_state=5)
    for plot in (az.plot_ppc_pit, az.plot_ppc_dist, az.plot_ppc_interval):
        pc = plot(dt)
        assert pc.viz["figure"].item() is not None
        plt.close("all")


def test_arviz_compare_ranks_held_out_elpd(heldout):
    import arviz as az

    y, good, narrow = heldout
    trees = {
        name: calibprob.to_datatree(pred, y, n_draws=50, random_state=6)
        for name, pred in (("good", good), ("narrow", narrow))
    }
    res = az.compare({k: calibprob.heldout_elpd(v) for k, v in trees.items()}, round_to="none")
    assert list(res.index) == ["good", "narrow"]
    # independent: the closed-form normal log densities at the held-out points
    li = {"good": stats.norm.logpdf(y.values), "narrow": stats.norm.logpdf(y.values, scale=0.5)}
    assert res.loc["good", "elpd"] == pytest.approx(li["good"].sum(), rel=1e-12)
    assert res.loc["narrow", "elpd"] == pytest.approx(li["narrow"].sum(), rel=1e-12)
    diff = li["narrow"] - li["good"]  # ArviZ 1: elpd of the model minus that of the best
    assert res.loc["narrow", "elpd_diff"] == pytest.approx(diff.sum(), rel=1e-10) and diff.sum() < 0
    assert res.loc["narrow", "dse"] == pytest.approx(np.sqrt(diff.size * diff.var()), rel=1e-10)


def test_arviz_loo_does_not_apply_to_held_out_predictions(heldout):
    """Pins the documented limitation: PSIS-LOO needs a posterior group and per-draw variation."""
    import arviz as az

    y, good, _ = heldout
    dt = calibprob.to_datatree(good, y, n_draws=100, random_state=7)
    with pytest.raises(TypeError, match="Must be able to extract a posterior group"):
        az.loo(dt)
    with pytest.raises(ValueError, match="All tail values are the same"):
        az.loo(dt, reff=1.0)


def test_heldout_elpd_rejects_bad_input(pp):
    with pytest.raises(
        ValueError,
        match=r"data must be a DataTree with a 'log_likelihood' group; got a tree "
        r"with groups \['posterior_predictive'\]\. Build one with "
        r"calibprob\.to_datatree\(pred, y\)",
    ):
        calibprob.heldout_elpd(xr.DataTree.from_dict({"posterior_predictive": pp}))
    with pytest.raises(ValueError, match="got a Dataset"):
        calibprob.heldout_elpd(pp)
    two = xr.DataTree.from_dict({"log_likelihood": pp.assign(z=pp["y"])})
    with pytest.raises(ValueError, match=r"log_likelihood group holds 2 variables \['y', 'z'\]; pass var_name="):
        calibprob.heldout_elpd(two)
    flat = xr.DataTree.from_dict({"log_likelihood": xr.Dataset({"y": ("obs_id", np.zeros(3))})})
    with pytest.raises(ValueError, match=r"has dims \('obs_id',\), without 'chain'/'draw'"):
        calibprob.heldout_elpd(flat)


# ---------------------------------------------------------------------------
# A real PyMC model
# ---------------------------------------------------------------------------


def _student_t_regression(sample: bool):
    """Robust Student-t linear regression on n = 60 points (+ 30 held out), PyMC's own layout.

    ``sample=True``: NUTS, 2 chains x 200 draws (about 4 s with a warm PyTensor cache, 24 s
    cold under load). ``sample=False``: a fixed posterior (2 x 200 draws near the generating
    values) through ``pm.sample_posterior_predictive`` only (about 1 s warm, 8 s cold) — the
    groups, dims and coordinates PyMC writes are the same either way.
    """
    pm = pytest.importorskip("pymc")
    rng = np.random.default_rng(8)
    x = rng.uniform(-2.0, 2.0, 90)
    y = 1.0 + 0.5 * x + 0.4 * rng.standard_t(3, 90)
    train = np.arange(60)
    test = np.arange(60, 90)
    with pm.Model(coords={"obs_id": train}):
        xd = pm.Data("x", x[train], dims="obs_id")
        yd = pm.Data("y_obs", y[train], dims="obs_id")
        a = pm.Normal("a", 0.0, 5.0)
        b = pm.Normal("b", 0.0, 5.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        nu = pm.Gamma("nu", 2.0, 0.1)
        pm.StudentT("y", nu=nu, mu=a + b * xd, sigma=sigma, observed=yd, shape=xd.shape, dims="obs_id")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # short-run r-hat / "use 4 chains" notices
            if sample:
                idata = pm.sample(
                    draws=200,
                    tune=200,
                    chains=2,
                    cores=1,
                    random_seed=1,
                    progressbar=False,
                    nuts_sampler="pymc",
                    compute_convergence_checks=False,
                )
            else:
                r = np.random.default_rng(9)
                cd = ("chain", "draw")
                post = xr.Dataset(
                    {
                        "a": (cd, 1.0 + 0.05 * r.standard_normal((2, 200))),
                        "b": (cd, 0.5 + 0.05 * r.standard_normal((2, 200))),
                        "sigma": (cd, 0.4 * np.exp(0.1 * r.standard_normal((2, 200)))),
                        "nu": (cd, 4.0 * np.exp(0.3 * r.standard_normal((2, 200)))),
                    }
                )
                idata = xr.DataTree.from_dict({"posterior": post})
            pm.sample_posterior_predictive(idata, extend_inferencedata=True, random_seed=2, progressbar=False)
            pm.set_data({"x": x[test], "y_obs": y[test]}, coords={"obs_id": test})
            pm.sample_posterior_predictive(
                idata, extend_inferencedata=True, predictions=True, random_seed=3, progressbar=False
            )
    return idata, y[train], y[test], test


@pytest.fixture(scope="module")
def pymc_fit():
    return _student_t_regression(sample=False)


@pytest.fixture(scope="module")
def pymc_nuts():
    return _student_t_regression(sample=True)


def _check_posterior_predictive_in_and_arviz_out(fit):
    idata, y_train, _, _ = fit
    pred = calibprob.from_draws(idata, group="posterior_predictive")
    for other in (idata["posterior_predictive"], idata.posterior_predictive["y"]):
        xr.testing.assert_identical(calibprob.from_draws(other), pred)
    assert pred.sizes == {"obs": 60, "level": 99} and pred.attrs["n_draws"] == 400
    np.testing.assert_array_equal(pred["obs"].values, idata.observed_data["obs_id"].values)
    m = calibprob.evaluate(pred, idata.observed_data["y"])
    xr.testing.assert_identical(m, calibprob.evaluate(pred, y_train))
    dt = calibprob.to_datatree(pred, idata.observed_data["y"], n_draws=200, n_chains=2, random_state=0)
    assert dt.posterior_predictive["y"].dims == ("chain", "draw", "obs_id")
    assert dt.log_likelihood["y"].dims == ("chain", "draw", "obs_id")
    xr.testing.assert_equal(dt.observed_data["y"], idata.observed_data["y"].astype(float))


def _check_predictions_group_at_new_data(fit):
    idata, _, y_test, test = fit
    with pytest.raises(ValueError, match="both a 'posterior_predictive' and a 'predictions' group"):
        calibprob.from_draws(idata)
    pred = calibprob.from_draws(idata, group="predictions")
    np.testing.assert_array_equal(pred["obs"].values, test)  # the new obs_id labels
    draws = idata.predictions["y"].values.reshape(-1, test.size)
    np.testing.assert_allclose(pred.calib.mean().values, draws.mean(axis=0), rtol=1e-12)
    # held-out scores from the Student-t draws (no Gaussian collapse), and ArviZ's compare on them
    nll = float(calibprob.evaluate(pred, y_test)["nll"])
    dt = calibprob.to_datatree(pred, y_test, n_draws=100, random_state=1)
    assert calibprob.heldout_elpd(dt).elpd == pytest.approx(-test.size * nll, rel=1e-12)


def test_pymc_posterior_predictive_in_and_arviz_out(pymc_fit):
    _check_posterior_predictive_in_and_arviz_out(pymc_fit)


def test_pymc_predictions_group_at_new_data(pymc_fit):
    _check_predictions_group_at_new_data(pymc_fit)


@pytest.mark.slow
def test_pymc_nuts_fit_in_and_arviz_out(pymc_nuts):
    """The same with a real NUTS fit (2 chains x 200 draws): 24 s with a cold PyTensor cache."""
    _check_posterior_predictive_in_and_arviz_out(pymc_nuts)
    _check_predictions_group_at_new_data(pymc_nuts)
