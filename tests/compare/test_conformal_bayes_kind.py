"""The comparison runner's ``conformal-bayes`` kind on a ``pymc-linear`` base."""

import warnings

import numpy as np
import pytest

from calibprob import ConvergenceWarning, LinearRegression
from calibprob.bases.pymc_linear import PyMCLinearRegression
from calibprob.compare import SpecError, parse_spec
from calibprob.compare.methods import TaskContext, run_kind
from tests.support.paths import load_benchmark


@pytest.fixture(scope="module")
def task():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(60, 3))
    y = X @ [1.0, 0.0, -0.5] + rng.standard_t(3, size=60)  # heavy tails: a misspecified Normal model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        base = PyMCLinearRegression(
            prior="laplace", noise_prior="halfnormal", noise_prior_scale=0.05, draws=200, tune=200, random_state=2
        ).fit(X[:45], y[:45])
    ctx = TaskContext(
        X[:45], y[:45], None, None, X[45:], base, {"kind": "pymc-linear"}, None, 4, confidence_levels=(0.8,)
    )
    return ctx, y[45:]


def test_sets_equal_a_brute_force_conformal_bayes(task):
    # independent check: the authors' rank computation written out in NumPy (the benchmark's
    # reference_kept) on the same draws and grid gives the same sets
    ref = load_benchmark("repro_conformal_bayes")
    ctx, _ = task
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = run_kind("conformal-bayes", ctx, grid_size=60, grid_margin=1.5)
    assert out.attrs["family"] == "interval" and out.sizes["obs"] == 15
    y = ctx.y_train
    grid = np.linspace(y.min() - 1.5 * y.std(), y.max() + 1.5 * y.std(), 60)
    ll = ctx.base.log_density(ctx.X_train, y[:, None])[:, :, 0]
    logf = ctx.base.log_density(ctx.X_test, grid)
    lower, upper = (out[k].sel(confidence_level=0.8).values for k in ("lower", "upper"))
    step = grid[1] - grid[0]
    tol = step / 2**10  # the refinement's final bracket
    refined = 0
    for j in range(15):
        kept = ref.reference_kept(ll, logf[:, j, :], alpha=0.2)
        first, last = grid[kept][[0, -1]]
        # a set reaching the grid's edge is unbounded on that side, as before
        assert (lower[j] == -np.inf) == kept[0] and (upper[j] == np.inf) == kept[-1]
        # a finite end is refined between the grid points bracketing it, to 2**-10 of the spacing, and reported
        # at the final bracket's outer end: outside the set, with the set one bracket width further in
        for end, inner, side in ((lower[j], first, 1.0), (upper[j], last, -1.0)):
            if np.isinf(end):
                continue
            assert 0.0 < side * (inner - end) <= step
            cand = np.array([[end, end + side * tol]])
            at = ref.reference_kept(ll, ctx.base.log_density(ctx.X_test[j : j + 1], cand)[:, 0, :], alpha=0.2)
            assert at.tolist() == [False, True]
            refined += 1
    assert refined >= 20
    assert out.attrs["interval_ends"].startswith("refined by bisection")


def test_a_base_without_posterior_draws_is_refused(task):
    ctx, _ = task
    plain = TaskContext(
        ctx.X_train, ctx.y_train, None, None, ctx.X_test, LinearRegression().fit(ctx.X_train, ctx.y_train), {}, None, 0
    )
    with pytest.raises(ValueError, match="needs a base with posterior draws and log_density.*got LinearRegression"):
        run_kind("conformal-bayes", plain)


def test_spec_offers_it_for_pymc_bases_only():
    base = {"name": "cb", "datasets": ["diabetes"], "split": {"train": 0.7, "test": 0.3}}
    ok = parse_spec(
        {
            **base,
            "base": {"kind": "pymc-linear", "prior": "laplace"},
            "methods": {"cb": {"kind": "conformal-bayes", "grid_size": 50, "grid_margin": 1.0}},
        }
    )
    assert ok is not None
    with pytest.raises(SpecError, match=r"conformal-bayes.*needs a base of kind 'pymc-linear'"):
        parse_spec({**base, "base": {"kind": "ols"}, "methods": {"cb": {"kind": "conformal-bayes"}}})
    with pytest.raises(SpecError, match=r"methods\.cb\.grid_size must be an integer in \[10, 100000\]"):
        parse_spec(
            {**base, "base": {"kind": "pymc-linear"}, "methods": {"cb": {"kind": "conformal-bayes", "grid_size": 3}}}
        )


def test_groups_true_gives_grouped_conformal_bayes(task):
    """A method's groups = true: the calibrator with the training part's groups (grouped ranks), as by hand."""
    import dataclasses

    from calibprob import ConformalBayes

    ctx, _ = task
    train = np.arange(45) % 3
    test = np.r_[np.arange(14) % 3, 7]  # the last test point's group is absent from training
    grouped = dataclasses.replace(ctx, groups={"train": train, "test": test}, mondrian=True, group_fallback="pooled")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = run_kind("conformal-bayes", grouped, grid_size=60, grid_margin=1.5)
        y = ctx.y_train
        grid = np.linspace(y.min() - 1.5 * y.std(), y.max() + 1.5 * y.std(), 60)
        ll = ctx.base.log_density(ctx.X_train, y[:, None])[:, :, 0]
        cb = ConformalBayes(confidence_level=[0.8], fallback="pooled").fit(ll, y=y, groups=train)
        ref = cb.predict(
            ctx.base.log_density(ctx.X_test, grid),
            grid,
            groups=test,
            log_density=lambda rows, v: ctx.base.log_density(ctx.X_test[rows], v),  # the same end refinement
        )
        marginal = run_kind("conformal-bayes", ctx, grid_size=60, grid_margin=1.5)
    at = {"confidence_level": 0.8}
    np.testing.assert_array_equal(out["lower"].sel(at).values, ref["lower"].sel(at).values)
    np.testing.assert_array_equal(out["upper"].sel(at).values, ref["upper"].sel(at).values)
    assert not np.array_equal(out["upper"].values, marginal["upper"].values)
    refused = dataclasses.replace(grouped, group_fallback=None)
    with pytest.raises(ValueError, match=r"1 test group\(s\) never seen in training \(7\)"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_kind("conformal-bayes", refused, grid_size=60, grid_margin=1.5)
