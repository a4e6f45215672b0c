"""Target transforms: fit on g(y), every metric on the original scale.

Independent checks: the lognormal (scipy.stats and the CRPS of Baran & Lerch
2015) for a Gaussian law on the log scale; hand-computed Jacobian densities
and numerical quadrature of the CRPS and the moments for a skewed,
non-Gaussian law; the invariance of PIT-based metrics under a monotone map.
"""

import numpy as np
import pytest
from scipy import integrate, special, stats

import calibprob
from calibprob.bases.transformed import TransformedTargetRegressor
from calibprob.metrics import crps, evaluate, nll, pit
from calibprob.predictive import DEFAULT_LEVELS, quantile_logpdf, quantile_ppf, quantile_ppf_zscore, quantile_zscore
from calibprob.transforms import (
    back_transform,
    crps_exp_pieces,
    transform_target,
)


def skewed_z(rng, n, df=3, s=0.4):
    """A non-Gaussian quantile-family law on the transformed scale (heavy, asymmetric tails).

    Sorted Student-t samples: ragged pieces, some with log-scale slopes b > 5 (the
    steep-piece branch of the CRPS); with df=3 a row now and then has a slope
    near 40, whose mean e^{b^2/2} overflows (honestly inf).
    """
    base = np.sort(rng.standard_t(df, size=(n, DEFAULT_LEVELS.size)), axis=1) * s
    q = base + rng.normal(1.0, 0.5, size=(n, 1))
    return calibprob.from_quantiles(q, DEFAULT_LEVELS)


@pytest.mark.parametrize(
    "transform, g, log_jac",
    [
        ("log", np.log, lambda y: -np.log(y)),
        ("log1p", np.log1p, lambda y: -np.log1p(y)),
    ],
)
def test_nll_is_the_hand_computed_jacobian_corrected_value(transform, g, log_jac):
    rng = np.random.default_rng(0)
    pz = skewed_z(rng, 300, df=5, s=0.25)
    zq = pz["quantile"].values
    y = (np.exp if transform == "log" else np.expm1)(
        zq[np.arange(300), rng.integers(0, 99, 300)] + 0.05 * rng.normal(size=300)
    )
    py = back_transform(pz, transform)
    # log f_Y(y) = log f_Z(g(y)) + log g'(y), with f_Z the contract's law of the stored z-quantiles
    by_hand = quantile_logpdf(zq, DEFAULT_LEVELS, g(y)) + log_jac(y)
    np.testing.assert_allclose(py.calib.logpdf(y).values, by_hand, rtol=1e-12, atol=1e-12)
    assert float(nll(py, y)) == pytest.approx(-by_hand.mean(), rel=1e-12)
    assert float(evaluate(py, y)["nll"]) == pytest.approx(-by_hand.mean(), rel=1e-12)


def test_gaussian_on_the_log_scale_is_the_lognormal():
    rng = np.random.default_rng(1)
    mu, s = rng.normal(size=200), rng.gamma(3.0, 0.15, size=200)
    y = np.exp(mu + s * rng.standard_t(5, size=200))
    py = back_transform(calibprob.normal(mu, s), "log")
    ln = stats.lognorm(s=s, scale=np.exp(mu))
    np.testing.assert_allclose(py.calib.cdf(y).values, ln.cdf(y), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(py.calib.logpdf(y).values, ln.logpdf(y), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(py.calib.mean().values, ln.mean(), rtol=1e-12)
    np.testing.assert_allclose(py.calib.std().values, ln.std(), rtol=1e-11)
    np.testing.assert_allclose(py.calib.ppf(0.37).values, ln.ppf(0.37), rtol=1e-12)
    # CRPS of the lognormal, Baran & Lerch (2015), eq. (5)
    z = (np.log(y) - mu) / s
    ref = y * (2 * special.ndtr(z) - 1) - 2 * np.exp(mu + s**2 / 2) * (
        special.ndtr(z - s) + special.ndtr(s / np.sqrt(2)) - 1
    )
    assert float(crps(py, y)) == pytest.approx(ref.mean(), rel=1e-12)
    m = evaluate(py, y)
    assert float(m["crps"]) == pytest.approx(ref.mean(), rel=1e-12)
    assert float(m["std"]) == pytest.approx(ln.std().mean(), rel=1e-11)
    assert float(m["mse"]) == pytest.approx(np.mean((y - ln.mean()) ** 2), rel=1e-12)


@pytest.mark.parametrize("transform", ["log", "log1p"])
def test_quantiles_map_back_exactly_and_pit_metrics_are_invariant(transform):
    rng = np.random.default_rng(2)
    pz = skewed_z(rng, 400)
    zq = pz["quantile"].values
    inv = np.exp if transform == "log" else np.expm1
    g = np.log if transform == "log" else np.log1p
    py = back_transform(pz, transform)
    np.testing.assert_array_equal(py["quantile"].values, inv(zq))  # stored levels: exact
    p = np.array([0.003, 0.25, 0.5, 0.8, 0.999])  # between and beyond the stored levels
    np.testing.assert_allclose(py.calib.ppf(p).values, inv(quantile_ppf(zq, DEFAULT_LEVELS, p)), rtol=1e-14)
    y = inv(quantile_ppf_zscore(zq, DEFAULT_LEVELS, rng.normal(size=(400, 1)) * 1.3)[:, 0])
    np.testing.assert_allclose(pit(py, y).values, pit(pz, g(y)).values, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(py.calib.zscore(y).values, quantile_zscore(zq, DEFAULT_LEVELS, g(y)), rtol=1e-12)
    a, b = evaluate(py, y), evaluate(pz, g(y))
    for name in ("ece", "iae", "coverage", "observed_fraction", "iae_coverage", "ueb_violation"):
        np.testing.assert_allclose(a[name].values, b[name].values, rtol=1e-12, err_msg=name)
    iv = py.calib.interval(0.9)
    np.testing.assert_allclose(iv["upper"].values, inv(pz.calib.interval(0.9)["upper"].values), rtol=1e-14)


def _crps_by_quadrature(zrow, y):
    """2 * int (1{Q > y} - Phi(u)) (Q(u) - y) phi(u) du, Q = exp(piecewise z-quantile), piece by piece."""
    zk = special.ndtri(DEFAULT_LEVELS)
    us = quantile_zscore(zrow[None, :], DEFAULT_LEVELS, [np.log(y)])[0] if y > 0 else -38.0
    edges = np.unique(np.concatenate([[-38.0, us, 38.0], zk]))

    def f(u):
        qv = np.exp(quantile_ppf_zscore(zrow[None, :], DEFAULT_LEVELS, [u])[0, 0])
        return 2 * ((qv > y) - special.ndtr(u)) * (qv - y) * np.exp(-u * u / 2) / np.sqrt(2 * np.pi)

    return sum(integrate.quad(f, a, b, epsabs=1e-14, epsrel=1e-13, limit=200)[0] for a, b in zip(edges[:-1], edges[1:]))


def test_crps_of_a_skewed_law_equals_quadrature():
    rng = np.random.default_rng(3)
    zq = skewed_z(rng, 3)["quantile"].values
    for i in range(3):
        for y in (0.5, 2.0, 30.0, -1.0):  # below, in and above the bulk; below the support
            exact = crps_exp_pieces(np.array([y]), zq[i : i + 1], DEFAULT_LEVELS)[0]
            assert exact == pytest.approx(_crps_by_quadrature(zq[i], y), rel=1e-11, abs=1e-12), (i, y)


def test_moments_of_a_skewed_law_equal_quadrature():
    rng = np.random.default_rng(4)
    pz = skewed_z(rng, 2)
    py = back_transform(pz, "log1p")
    zq = pz["quantile"].values
    for i in range(2):

        def q(u, k):
            return np.expm1(quantile_ppf_zscore(zq[i : i + 1], DEFAULT_LEVELS, [u])[0, 0]) ** k * stats.norm.pdf(u)

        edges = np.concatenate([[-38.0], special.ndtri(DEFAULT_LEVELS), [38.0]])
        m1 = sum(integrate.quad(q, a, b, args=(1,), epsabs=1e-14)[0] for a, b in zip(edges[:-1], edges[1:]))
        m2 = sum(integrate.quad(q, a, b, args=(2,), epsabs=1e-14)[0] for a, b in zip(edges[:-1], edges[1:]))
        assert float(py.calib.mean()[i]) == pytest.approx(m1, rel=1e-10)
        assert float(py.calib.std()[i]) == pytest.approx(np.sqrt(m2 - m1 * m1), rel=1e-8)


def test_standardised_scale_is_undone_exactly():
    rng = np.random.default_rng(5)
    loc, scale = rng.normal(size=50), rng.gamma(2.0, 0.2, size=50)
    m, s = 7.3, 0.9
    a = back_transform(calibprob.normal(loc, scale), "log", shift=m, scale=s)
    b = back_transform(calibprob.normal(m + s * loc, s * scale), "log")
    np.testing.assert_allclose(a["quantile"].values, b["quantile"].values, rtol=1e-14)
    y = np.exp(m + s * (loc + scale * rng.normal(size=50)))
    np.testing.assert_allclose(evaluate(a, y)["nll"], evaluate(b, y)["nll"], rtol=1e-12)


def test_interval_family_ends_are_mapped():
    iv = calibprob.normal([0.0, 1.0], [1.0, 0.5]).calib.interval([0.5, 0.9])
    iv.attrs["family"] = "interval"
    out = back_transform(iv, "log", shift=1.0, scale=2.0)
    np.testing.assert_allclose(out["lower"].values, np.exp(1.0 + 2.0 * iv["lower"].values), rtol=1e-15)
    assert out.attrs["target_transform"] == "log"


def test_transformed_target_regressor_fits_on_the_log_scale():
    rng = np.random.default_rng(6)
    X = rng.uniform(size=(200, 2))
    y = np.exp(1.0 + X @ [1.0, -0.5] + 0.2 * rng.normal(size=200))
    model = TransformedTargetRegressor(estimator=calibprob.LinearRegression()).fit(X, y)
    direct = calibprob.LinearRegression().fit(X, np.log(y)).predict(X[:10])
    np.testing.assert_allclose(model.predict(X[:10])["quantile"].values, np.exp(direct["quantile"].values), rtol=1e-14)


def test_bad_input_is_refused_with_the_fix():
    with pytest.raises(
        ValueError,
        match=r"target_transform='log' needs y > 0; y has 2 value\(s\) <= 0 "
        r"\(the first, y\[1\] = 0\.0\).*'log1p'",
    ):
        transform_target([1.0, 0.0, -2.0], "log")
    with pytest.raises(
        ValueError,
        match=r"target_transform='log1p' needs y > -1; y has 1 value\(s\) <= -1 "
        r"\(the first, y\[0\] = -1\.0\)",
    ):
        transform_target([-1.0, 3.0], "log1p")
    with pytest.raises(ValueError, match=r"target_transform must be one of 'log', 'log1p'; got 'sqrt'"):
        transform_target([1.0], "sqrt")
    with pytest.raises(ValueError, match=r"y must be finite"):
        transform_target([1.0, np.nan], "log")
    pz = calibprob.normal([0.0], [1.0])
    with pytest.raises(ValueError, match=r"transform must be one of 'log', 'log1p'; got 'exp'"):
        back_transform(pz, "exp")
    with pytest.raises(ValueError, match=r"scale must be > 0 \(a standard deviation\); got -1\.0"):
        back_transform(pz, "log", scale=-1.0)
    with pytest.raises(ValueError, match=r"already on the original scale \(target_transform='log'\)"):
        back_transform(back_transform(pz, "log"), "log")
    with pytest.raises(ValueError, match=r"overflow or underflow on the original scale under 'log'"):
        back_transform(calibprob.normal([800.0], [1.0]), "log")
    with pytest.raises(TypeError, match=r"pred must be a predictive xarray.Dataset; got ndarray"):
        back_transform(np.zeros((2, 3)), "log")
    with pytest.raises(ValueError, match=r"target_transform='log' needs y > 0"):
        TransformedTargetRegressor(estimator=calibprob.LinearRegression()).fit(np.ones((3, 1)), [1.0, -1.0, 2.0])
    bad = back_transform(pz, "log")
    bad.attrs["target_transform"] = "boxcox"
    with pytest.raises(ValueError, match=r"attrs\['target_transform'\] must be one of 'log', 'log1p'; got 'boxcox'"):
        calibprob.validate(bad)


def test_spec_key_and_the_runner_score_on_the_original_scale(tmp_path):
    from calibprob.compare import SpecError, parse_spec
    from calibprob.compare.tasks import _prepare, run_task

    rng = np.random.default_rng(7)
    X = rng.uniform(size=(120, 2))
    price = np.exp(2.0 + X @ [1.0, 0.5] + 0.3 * rng.normal(size=120))
    path = tmp_path / "d.csv"
    np.savetxt(path, np.c_[X, price], delimiter=",", header="a,b,price", comments="")
    spec_dict = {
        "name": "t",
        "datasets": [{"name": "d", "path": str(path), "target": "price"}],
        "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
        "base": {"kind": "ols"},
        "methods": {"vanilla": {"kind": "base"}, "cps": {"kind": "conformal-predictive"}},
        "target_transform": "log",
    }
    spec = parse_spec(spec_dict)
    assert spec.target_transform == "log" and parse_spec(spec.to_dict()) == spec
    assert spec.fingerprint != parse_spec({**spec_dict, "target_transform": "log1p"}).fingerprint
    out = run_task(spec.to_dict(), "d", 0)
    assert not out.attrs["task_failed"]
    # the vanilla row by hand: OLS on standardised log price, back to the price scale
    seed, arrays = _prepare(spec, "d", 0)
    from calibprob.datasets import Standardizer, load_csv, train_calibrate_test_split

    parts = train_calibrate_test_split(load_csv(path, "price"), (0.5, 0.25, 0.25), seed=seed)
    logged = {k: v.assign(y=("obs", np.log(v["y"].values))) for k, v in parts.items()}
    sc = Standardizer().fit(logged["train"])
    tr, te = sc.transform(logged["train"]), sc.transform(logged["test"])
    pz = calibprob.LinearRegression().fit(tr["X"].values, tr["y"].values).predict(te["X"].values)
    py = back_transform(pz, "log", shift=sc.y_mean_, scale=sc.y_scale_)
    y = parts["test"]["y"].values
    assert float(out["nll"].sel(calibrator="vanilla").squeeze()) == pytest.approx(float(nll(py, y)), rel=1e-10)
    assert float(out["crps"].sel(calibrator="vanilla").squeeze()) == pytest.approx(float(crps(py, y)), rel=1e-10)

    with pytest.raises(SpecError, match=r"target_transform must be one of 'log', 'log1p'; got 'Log'"):
        parse_spec({**spec_dict, "target_transform": "Log"})
    neg = tmp_path / "neg.csv"
    np.savetxt(neg, np.c_[X, price - 10.0], delimiter=",", header="a,b,price", comments="")
    with pytest.raises(SpecError, match=r"datasets\[0\].*neg.csv.*column 'price'.*needs y > 0"):
        parse_spec({**spec_dict, "datasets": [{"name": "d", "path": str(neg), "target": "price"}]})


def test_domain_bound_names_the_domain_and_refuses_unknown_transforms():
    from calibprob.transforms import domain_bound

    assert domain_bound("log") == 0.0 and domain_bound("log1p") == -1.0
    with pytest.raises(ValueError, match="transform must be one of 'log', 'log1p'; got 'sqrt'"):
        domain_bound("sqrt")
