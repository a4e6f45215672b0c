"""The table of every saveable estimator: how to fit it and how to predict with it, on seeded data.

Every public estimator class is a row of ``ROWS``: a ``fit`` lambda (data -> fitted estimator) and a ``predict``
lambda (estimator, data -> prediction). ``tests/_core/test_io.py`` saves every row and loads it in a new process
(:func:`child_main`); ``tests/_core/test_saved_files.py`` loads the files 0.1.0 wrote from the same rows
(``tests/data/make_saved_files.py``). When a signature changes, change the row's lambdas.

The user code below (:func:`ols_fit_predict`, :class:`UserModel`) is what saved files name as user objects; a
file records only the name, and the object is passed again to :func:`calibprob.load`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import xarray as xr

import calibprob
import calibprob.calibrators.conformal
import calibprob.datasets
from tests.support.conjugate import tree


# ----------------------------------------------------------------------------- user code
def ols_fit_predict(X_train, y_train, X_new):
    """A user's function (what CallableRegressor / a callable estimator= wraps)."""
    A = np.c_[np.ones(len(X_train)), X_train]
    coef = np.linalg.lstsq(A, y_train, rcond=None)[0]
    resid = y_train - A @ coef
    sd = np.sqrt(resid @ resid / (len(y_train) - A.shape[1]))
    return np.c_[np.ones(len(X_new)), X_new] @ coef, np.full(len(X_new), sd)


class UserModel:
    """A scikit-learn-like user model (not a calibprob class): fit + predict_mean_std."""

    def fit(self, X, y):
        self.coef_ = np.polyfit(X[:, 0], y, 3)
        self.sd_ = float(np.std(y - np.polyval(self.coef_, X[:, 0])))
        return self

    def predict_mean_std(self, X):
        return np.polyval(self.coef_, X[:, 0]), np.full(len(X), self.sd_)


# ----------------------------------------------------------------------------- data
class Data:
    """Seeded data; the base GP is fitted here (parent) or loaded from its file (child)."""

    def __init__(self, base=None, *, fit_base: bool = True):
        rng = np.random.default_rng(0)
        X = rng.uniform(-2.0, 2.0, size=(80, 1))
        y = np.sin(2.0 * X[:, 0]) + 0.2 * rng.normal(size=80)
        self.X_train, self.y_train = X[:40], y[:40]
        self.X_cal, self.y_cal = X[40:], y[40:]
        self.X_test = np.linspace(-2.2, 2.2, 9)[:, None]
        self.base = base
        if base is None and fit_base:
            self.base = calibprob.GaussianProcessRegressor(random_state=0).fit(self.X_train, self.y_train)

    def pred(self, X):
        """The base's predictive Dataset (input of the distribution post-processors)."""
        return self.base.predict(X)


@dataclasses.dataclass
class Row:
    name: str
    cls: str
    fit: Callable
    predict: Callable
    objects: Callable = dict  # user objects to pass again to calibprob.load (child side)


def _gpb_fit(d):
    return calibprob.GPBetaCalibrator(inference="map", n_inducing=5, random_state=0).fit(d.pred(d.X_cal), d.y_cal)


def _gpb_predict(e, d):
    return e.predict(d.pred(d.X_test))


def _cb_problem(seed: int = 0):
    """A conjugate normal-mean posterior (known sd 1, N(0, 10^2) prior): exact draws, grid densities."""
    rng = np.random.default_rng(seed)
    y = rng.normal(size=30)
    prec = 1 / 100 + y.size
    theta = rng.normal(y.sum() / prec, prec**-0.5, size=400)
    grid = np.linspace(y.min() - 3, y.max() + 3, 61)
    ll = -0.5 * (y[None, :] - theta[:, None]) ** 2 - 0.5 * np.log(2 * np.pi)
    logf = -0.5 * (grid[None, None, :] - theta[:, None, None]) ** 2 - 0.5 * np.log(2 * np.pi)
    return ll, np.repeat(logf, 2, axis=1), grid


def _loo_tree(seed: int = 0):
    """A PyMC-shaped tree of a conjugate regression (exact draws) and the draws at 4 new points."""
    rng = np.random.default_rng(seed)
    X = np.c_[np.ones(34), rng.normal(size=(34, 1))]
    y = X @ [0.5, 1.0] + 0.5 * rng.standard_normal(34)
    return tree(rng, X[:30], y[:30], 0.5, 3.0, draws=300, X_new=X[30:])


G = calibprob  # short alias in the table
ROWS = [
    # base regressors
    Row(
        "LinearRegression",
        "LinearRegression",
        lambda d: G.LinearRegression().fit(d.X_train, d.y_train),
        lambda e, d: e.predict(d.X_test),
    ),
    Row(
        "BayesianRidge",
        "BayesianRidge",
        lambda d: G.BayesianRidge().fit(d.X_train, d.y_train),
        lambda e, d: e.predict(d.X_test),
    ),
    Row("GaussianProcessRegressor", "GaussianProcessRegressor", lambda d: d.base, lambda e, d: e.predict(d.X_test)),
    Row(
        "GaussianProcessRegressor-constant-matern",
        "GaussianProcessRegressor",
        lambda d: G.GaussianProcessRegressor(
            kernel="matern", p=1, mean="constant", objective="reml", random_state=np.random.default_rng(1)
        ).fit(d.X_train, d.y_train),
        lambda e, d: (e.predict(d.X_test), e.loo()),
    ),
    Row(
        "SparseGaussianProcessRegressor",
        "SparseGaussianProcessRegressor",
        lambda d: G.SparseGaussianProcessRegressor(n_inducing=8, random_state=0).fit(d.X_train, d.y_train),
        lambda e, d: e.predict(d.X_test),
    ),
    Row(
        "PyMCLinearRegression",
        "PyMCLinearRegression",  # the pymc-linear base: posterior draws saved
        lambda d: G.PyMCLinearRegression(likelihood="student-t", draws=100, tune=100, chains=2, random_state=0).fit(
            d.X_train, d.y_train
        ),
        lambda e, d: e.predict(d.X_test),
    ),
    Row(
        "PyMCHSGPRegression",
        "PyMCHSGPRegression",  # the pymc-hsgp base: posterior draws and the HSGP box saved
        lambda d: G.PyMCHSGPRegression(m=6, inference="advi", n_iter=200, draws=50, chains=1, random_state=0).fit(
            d.X_train, d.y_train
        ),
        lambda e, d: e.predict(d.X_test),
    ),
    Row(
        "CallableRegressor",
        "CallableRegressor",
        lambda d: G.calibrators.conformal.CallableRegressor(fit_predict=ols_fit_predict).fit(d.X_train, d.y_train),
        lambda e, d: e.predict_mean_std(d.X_test),
        lambda: {"fit_predict": ols_fit_predict},
    ),
    # distribution post-processors
    Row(
        "Mondrian",
        "Mondrian",  # one isotonic recalibrator per group (x < 0, x >= 0); each group's fit is saved
        lambda d: G.Mondrian(G.IsotonicRecalibrator(extrapolate=True)).fit(
            d.pred(d.X_cal), d.y_cal, groups=d.X_cal[:, 0] >= 0
        ),
        lambda e, d: e.predict(d.pred(d.X_test), groups=d.X_test[:, 0] >= 0),
    ),
    Row(
        "Bins",
        "Bins",  # a Mondrian taxonomy: the learnt thresholds are saved
        lambda d: G.bins(d.X_cal, by="feature", n_bins=3),
        lambda e, d: e.apply(d.X_test),
    ),
    Row(
        "IsotonicRecalibrator",
        "IsotonicRecalibrator",
        lambda d: G.IsotonicRecalibrator(extrapolate=True).fit(d.pred(d.X_cal), d.y_cal),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    Row(
        "VovkRecalibrator",
        "VovkRecalibrator",
        lambda d: G.VovkRecalibrator(extrapolate=True, random_state=3).fit(d.pred(d.X_cal), d.y_cal),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    Row(
        "VovkRecalibrator-generator",
        "VovkRecalibrator",  # a numpy Generator's state round-trips
        lambda d: G.VovkRecalibrator(extrapolate=True, random_state=np.random.default_rng(5)).fit(
            d.pred(d.X_cal), d.y_cal
        ),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    Row(
        "MarxRecalibrator",
        "MarxRecalibrator",
        lambda d: G.MarxRecalibrator(center="median", extrapolate=True).fit(d.pred(d.X_cal), d.y_cal),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    Row(
        "VarianceScalingRecalibrator",
        "VarianceScalingRecalibrator",
        lambda d: G.VarianceScalingRecalibrator().fit(d.pred(d.X_cal), d.y_cal),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    Row("GPBetaCalibrator", "GPBetaCalibrator", _gpb_fit, _gpb_predict),
    Row(
        "OnlineQuantileRecalibrator",
        "OnlineQuantileRecalibrator",
        lambda d: G.OnlineQuantileRecalibrator(eta=0.5).fit(d.pred(d.X_cal), d.y_cal),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    Row(  # ACI on the PIT scale: calibration PITs, then outcomes moving every pair's level (issue 38)
        "OnlineQuantileRecalibrator-aci",
        "OnlineQuantileRecalibrator",
        lambda d: (
            G.OnlineQuantileRecalibrator(levels=[0.05, 0.25, 0.5, 0.75, 0.95], rule="aci", gamma=0.05, window=20)
            .fit(d.pred(d.X_cal[:20]), d.y_cal[:20])
            .update(d.pred(d.X_cal[20:]), d.y_cal[20:])
        ),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    Row(  # ACI with its recursion mid-stream: the score window, alpha_t and the counters are the state
        "AdaptiveConformalInterval",
        "AdaptiveConformalInterval",
        lambda d: (
            G.AdaptiveConformalInterval(confidence_level=[0.8, 0.9], gamma=0.05, window=20)
            .fit(d.pred(d.X_cal[:20]), d.y_cal[:20])
            .update(d.pred(d.X_cal[20:]), d.y_cal[20:])
        ),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    Row(  # conformal PID mid-stream: P part, integrator, AR scorecast and the score history are the state
        "ConformalPIDInterval",
        "ConformalPIDInterval",
        lambda d: (
            G.ConformalPIDInterval(confidence_level=[0.8, 0.9], burnin=15)
            .fit(d.pred(d.X_cal[:20]), d.y_cal[:20])
            .update(d.pred(d.X_cal[20:]), d.y_cal[20:])
        ),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    Row(  # AgACI mid-stream: the experts' levels, both BOA states and the score window are the state
        "AgACIInterval",
        "AgACIInterval",
        lambda d: (
            G.AgACIInterval(confidence_level=[0.8, 0.9], gammas=[0.01, 0.05, 0.1], window=20)
            .fit(d.pred(d.X_cal[:20]), d.y_cal[:20])
            .update(d.pred(d.X_cal[20:]), d.y_cal[20:])
        ),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    Row(  # conformal PID on the PIT scale, every central pair at once
        "OnlineQuantileRecalibrator-pid",
        "OnlineQuantileRecalibrator",
        lambda d: (
            G.OnlineQuantileRecalibrator(levels=[0.05, 0.25, 0.5, 0.75, 0.95], rule="pid", burnin=15, scorecaster="ar")
            .fit(d.pred(d.X_cal[:20]), d.y_cal[:20])
            .update(d.pred(d.X_cal[20:]), d.y_cal[20:])
        ),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    Row(  # NexCP mid-stream: the scores in time order (their decaying weights) are the state
        "NexCP",
        "NexCP",
        lambda d: (
            G.NexCP(confidence_level=[0.8, 0.9], rho=0.95)
            .fit(d.pred(d.X_cal[:20]), d.y_cal[:20])
            .update(d.pred(d.X_cal[20:]), d.y_cal[20:])
        ),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    # model-aware calibrators
    Row(
        "SharpCalibratedGP",
        "SharpCalibratedGP",
        lambda d: G.SharpCalibratedGP(estimator=d.base, n_levels=5, n_restarts=1, maxiter=20, random_state=0).fit(
            d.X_cal, d.y_cal
        ),
        lambda e, d: e.predict(d.X_test),
    ),
    Row(  # EnbPI mid-stream: the bootstrap models, their bags and the residual window (a pending block)
        "EnbPI",
        "EnbPI",
        lambda d: (
            G.EnbPI(estimator=G.BayesianRidge(), n_bootstraps=4, step=2, confidence_level=[0.8, 0.9])
            .fit(d.X_train, d.y_train)
            .update(d.X_cal[:3], d.y_cal[:3])
        ),
        lambda e, d: e.predict(d.X_test),
    ),
    Row(
        "SplitConformalRegressor",
        "SplitConformalRegressor",
        lambda d: (
            G.SplitConformalRegressor(estimator=G.BayesianRidge(), score="normalized", confidence_level=[0.5, 0.8])
            .fit(d.X_train, d.y_train)
            .calibrate(d.X_cal, d.y_cal)
        ),
        lambda e, d: (e.predict_interval(d.X_test), e.predict(d.X_test)),
    ),
    Row(
        "SplitConformalRegressor-callable",
        "SplitConformalRegressor",
        lambda d: (
            G.SplitConformalRegressor(estimator=ols_fit_predict).fit(d.X_train, d.y_train).calibrate(d.X_cal, d.y_cal)
        ),
        lambda e, d: e.predict_interval(d.X_test),
        lambda: {"estimator": ols_fit_predict},
    ),
    Row(
        "SplitConformalRegressor-user-model",
        "SplitConformalRegressor",
        lambda d: G.SplitConformalRegressor(
            estimator=UserModel().fit(d.X_train, d.y_train), prefit=True, score="signed"
        ).calibrate(d.X_cal, d.y_cal),
        lambda e, d: e.predict_interval(d.X_test),
        lambda: {"estimator": UserModel().fit(Data(fit_base=False).X_train, Data(fit_base=False).y_train)},
    ),
    Row(
        "ConformalPredictiveSystem",
        "ConformalPredictiveSystem",
        lambda d: G.ConformalPredictiveSystem().fit(d.pred(d.X_cal), d.y_cal),
        lambda e, d: (e.predict(d.pred(d.X_test)), e.predict_cdf(d.pred(d.X_test), np.zeros(9))),
    ),
    Row(
        "SplitConformalCalibrator",
        "SplitConformalCalibrator",
        lambda d: G.SplitConformalCalibrator(score="normalized", confidence_level=[0.5, 0.8]).fit(
            d.pred(d.X_cal), d.y_cal
        ),
        lambda e, d: (e.predict(d.pred(d.X_test)), e.predict_interval(d.pred(d.X_test))),
    ),
    Row(
        "CrossConformalRegressor",
        "CrossConformalRegressor",
        lambda d: G.CrossConformalRegressor(
            estimator=G.LinearRegression(), cv=4, random_state=0, confidence_level=[0.5, 0.8]
        ).fit(d.X_train, d.y_train),
        lambda e, d: e.predict(d.X_test),
    ),
    Row(
        "CrossConformalRegressor-jackknife-callable",
        "CrossConformalRegressor",
        lambda d: G.CrossConformalRegressor(
            estimator=ols_fit_predict, method="base", cv="loo", score="normalized", confidence_level=0.8
        ).fit(d.X_train, d.y_train),
        lambda e, d: e.predict_interval(d.X_test),
        lambda: {"estimator": ols_fit_predict},
    ),
    Row(
        "JackknifePlusGP",
        "JackknifePlusGP",
        lambda d: G.JackknifePlusGP(estimator=d.base, prefit=True, score="signed", confidence_level=[0.5, 0.8]).fit(),
        lambda e, d: e.predict(d.X_test),
    ),
    Row(
        "FullConformalGP",
        "FullConformalGP",
        lambda d: G.FullConformalGP(
            estimator=G.GaussianProcessRegressor(mean="constant", random_state=0), confidence_level=0.8
        ).fit(d.X_train, d.y_train),
        lambda e, d: e.predict_interval(d.X_test),
    ),
    # calibrators added after 0.1.0 (their files are not in tests/data/saved-0.1.0)
    Row(
        "ConformalizedQuantileRegression",
        "ConformalizedQuantileRegression",
        lambda d: G.ConformalizedQuantileRegression(confidence_level=0.8).fit(d.pred(d.X_cal), d.y_cal),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    Row(
        "ConditionalConformal",
        "ConditionalConformal",
        lambda d: G.ConditionalConformal(confidence_level=0.8).fit(d.pred(d.X_cal), d.y_cal),
        lambda e, d: e.predict(d.pred(d.X_test)),
    ),
    Row(
        "ConformalBayes",
        "ConformalBayes",
        lambda d: G.ConformalBayes(confidence_level=0.8, pareto_k=False).fit(_cb_problem()[0]),
        lambda e, d: e.predict(*_cb_problem()[1:]),
    ),
    Row(
        "LOOJackknifePlus",
        "LOOJackknifePlus",
        lambda d: G.LOOJackknifePlus(confidence_level=0.8).fit_tree(_loo_tree()[0]),
        lambda e, d: e.predict_draws(_loo_tree()[1]),
    ),
    # helper estimators
    Row(
        "Standardizer",
        "Standardizer",
        lambda d: G.datasets.Standardizer().fit(d.X_train, d.y_train),
        lambda e, d: (e.transform_X(d.X_test), e.transform_scale(np.ones(3))),
    ),
]
ROW_BY_NAME = {r.name: r for r in ROWS}


def arrays(result, prefix: str = "") -> dict[str, np.ndarray]:
    """Every array of a prediction (Dataset, DataTree, tuple, ndarray), by name."""
    out = {}
    if isinstance(result, xr.DataTree):
        for node in result.subtree:
            out.update(arrays(node.to_dataset(inherit=False), f"{prefix}{node.path}:"))
    elif isinstance(result, xr.Dataset):
        for name, var in result.variables.items():
            out[f"{prefix}{name}"] = np.asarray(var.values)
    elif isinstance(result, tuple):
        for i, item in enumerate(result):
            out.update(arrays(item, f"{prefix}{i}."))
    elif result is not None:
        out[prefix or "value"] = np.asarray(result)
    return {k: (v.astype(str) if v.dtype.kind == "O" else v) for k, v in out.items()}


def predict_all(folder: Path, data: Data, rows) -> tuple[dict, dict]:
    results, errors = {}, {}
    for row in rows:
        try:
            est = calibprob.load(folder / f"{row.name}.nc", **row.objects())
            for k, v in arrays(row.predict(est, data)).items():
                results[f"{row.name}|{k}"] = v
        except Exception as err:  # reported per row by the parent
            errors[row.name] = f"{type(err).__name__}: {err}"
    return results, errors


def child_main(folder: str) -> None:
    """Run in the new process: load every saved file, predict, write the results."""
    folder = Path(folder)
    data = Data(base=calibprob.load(folder / "_base.nc"))
    results, errors = predict_all(folder, data, ROWS)
    np.savez(folder / "child.npz", **results)
    (folder / "child_errors.json").write_text(json.dumps(errors))
