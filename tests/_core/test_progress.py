"""Progress lines inside long calls (issue 37 item 5): shown when asked, hidden when silenced, never changing a result."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import calibprob
from calibprob._core import progress
from calibprob.bases.gp import SparseGaussianProcessRegressor
from calibprob.runs.scheduling import execute


@pytest.fixture
def no_delay(monkeypatch):
    """Lines appear at once (the default waits a few seconds, longer than these small calls)."""
    monkeypatch.setattr(progress, "DELAY", 0.0)
    monkeypatch.setattr(progress, "MIN_INTERVAL", 0.0)  # every update drawn, so the final count is on stderr
    monkeypatch.delenv("CALIBPROB_PROGRESS", raising=False)


def _conformal_bayes_inputs(seed=0, S=400, n=40, m=6, G=30):
    """A conjugate-free Normal model's draws: mean draws around the data, log densities on a grid."""
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n)
    mu = rng.normal(y.mean(), 0.2, size=S)
    ll = -0.5 * (y[None, :] - mu[:, None]) ** 2 - 0.5 * np.log(2 * np.pi)
    grid = np.linspace(-4, 4, G)
    logf = np.broadcast_to(-0.5 * (grid[None, None, :] - mu[:, None, None]) ** 2 - 0.5 * np.log(2 * np.pi), (S, m, G))
    return ll, y, np.ascontiguousarray(logf), grid


def test_conformal_bayes_line_shows_counts_every_test_point_and_leaves_the_sets_bitwise_unchanged(no_delay, capsys):
    ll, y, logf, grid = _conformal_bayes_inputs()
    shown = calibprob.ConformalBayes(confidence_level=0.8, progress=True).fit(ll, y=y).predict(logf, grid)
    err = capsys.readouterr().err
    assert "conformal Bayes" in err and "6/6" in err  # every one of the 6 test points counted
    hidden = calibprob.ConformalBayes(confidence_level=0.8, progress=False).fit(ll, y=y).predict(logf, grid)
    assert capsys.readouterr().err == ""
    xr.testing.assert_identical(shown, hidden)


def test_show_progress_hides_lines_for_a_block_and_a_call_can_still_ask_for_its_own(no_delay, capsys):
    ll, y, logf, grid = _conformal_bayes_inputs()
    with calibprob.show_progress(False):
        calibprob.ConformalBayes(confidence_level=0.8).fit(ll, y=y).predict(logf, grid)
        assert capsys.readouterr().err == ""
        calibprob.ConformalBayes(confidence_level=0.8, progress=True).fit(ll, y=y).predict(logf, grid)
        assert "conformal Bayes" in capsys.readouterr().err
    with calibprob.show_progress(True):  # shown although pytest's stderr is not a terminal
        calibprob.ConformalBayes(confidence_level=0.8).fit(ll, y=y).predict(logf, grid)
        assert "conformal Bayes" in capsys.readouterr().err


def test_environment_variable_decides_when_nothing_else_does(no_delay, monkeypatch):
    monkeypatch.setenv("CALIBPROB_PROGRESS", "0")
    assert progress._decide(None) is False
    monkeypatch.setenv("CALIBPROB_PROGRESS", "1")
    assert progress._decide(None) is True
    with calibprob.show_progress(False):
        assert progress._decide(None) is False  # the switch beats the environment
    assert progress._decide(False) is False  # the call's own setting beats both


def test_gp_fit_counts_its_objective_evaluations_and_fits_the_same_hyperparameters(no_delay, capsys):
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(300, 2))
    y = np.sin(4 * X[:, 0]) + 0.1 * rng.normal(size=300)
    with calibprob.show_progress(True):
        shown = SparseGaussianProcessRegressor(n_inducing=20, n_restarts=1, random_state=0).fit(X, y)
    err = capsys.readouterr().err
    evaluations = shown.fit_info_["n_evaluations"]
    total = sum(evaluations.values()) if isinstance(evaluations, dict) else int(evaluations)
    assert f"SparseGaussianProcessRegressor fit (300 rows): {total} evaluations" in err
    with calibprob.show_progress(False):
        hidden = SparseGaussianProcessRegressor(n_inducing=20, n_restarts=1, random_state=0).fit(X, y)
    assert capsys.readouterr().err == ""
    for key in shown.theta_:
        np.testing.assert_array_equal(shown.theta_[key], hidden.theta_[key])


def _task_with_a_line(config, key):
    """A task that would print a progress line if the scheduler let it."""
    with progress.bar(desc="inner work", unit=" steps", total=3) as line:
        line.update(3)
    return xr.Dataset({"value": key})


def test_tasks_of_the_scheduler_run_silenced_even_when_lines_are_asked_for(no_delay, capsys):
    with calibprob.show_progress(True):
        out = execute(
            _task_with_a_line,
            {},
            [(1,), (2,)],
            fingerprint="f",
            on_error=lambda key, why: xr.Dataset(),
            coords=lambda key: {},
            progress=False,
        )
    assert sorted(int(ds["value"]) for ds in out.values()) == [1, 2]
    assert "inner work" not in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["yes", 1, 0.5])
def test_bad_progress_values_are_refused_naming_the_fix(bad):
    with pytest.raises(TypeError, match=r"progress must be True, False or None .* progress=False"):
        calibprob.ConformalBayes(progress=bad).fit(np.zeros((30, 5)))
    with pytest.raises(TypeError, match=r"show_progress takes True or False; got .*show_progress\(False\)"):
        calibprob.show_progress(bad)
