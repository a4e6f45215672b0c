"""Write ``mapie_aci_reference.npz``: MAPIE 1.6's ACI intervals on the same base predictions (issue 38).

Run with the peers' interpreter (MAPIE is not a calibprob dependency; the test that reads the file,
``tests/calibrators/online/test_aci_mapie.py``, imports no MAPIE)::

    /work/venvs/peers/bin/python tests/data/make_mapie_aci_reference.py

The base predictions are given, not fitted: MAPIE's ``TimeSeriesRegressor(method="aci", cv="prefit")``
wraps an estimator whose ``predict`` returns its single input column, and that column *is* the
prediction ``mu``, so both libraries score the same residuals ``|y - mu|`` bit for bit.
``AbsoluteConformityScore(sym=True)``: one symmetric threshold, the conformal order statistic
``ceil((1 - alpha_t)(n + 1))`` of the scores (MAPIE's ``_compute_regression_quantile``: level
``ceil(.)/n`` with ``method="lower"``), as in Gibbs & Candès. For every stream row:
``predict(x_t, confidence_level=0.9, allow_infinite_bounds=True)``, record the interval and
``current_alpha``, then ``adapt_conformal_inference(x_t, y_t, gamma)`` (which re-predicts at the same
alpha_t and moves it) and, in the ``window`` configuration, ``update(x_t, y_t)`` (the scores slide by one).

Two configurations, seed 0, n = 200 calibration points, m = 1000 stream points, gamma = 0.005:

* ``window``: ``mu ~ N(0, 1)``, ``y = mu + (1 + t / T) eps`` (the noise grows), the scores slide;
  alpha_t stays inside (0, 1), where the two recursions are the same;
* ``fixed``: the noise triples after the first third of the stream, the calibration scores stay;
  alpha_t falls below 1/(n + 1), where the conformal order statistic does not exist and the paper
  issues the whole line. MAPIE 1.6 raises there instead, even with ``allow_infinite_bounds=True``:
  its symmetric branch (``conformity_scores/regression.py``, ``get_bounds``: ``quantile_ref =
  _compute_regression_quantile(conformity_scores[..., np.newaxis], alpha_ref, axis=0)``) does not
  pass ``unbounded=allow_infinite_bounds`` on, so ``_compute_regression_quantile`` raises
  "The number of calibration samples (200) is too low to reach the requested level". The stream
  stops there; the step and the message are stored (``fixed_failed_at``, ``fixed_error``).
  (Had it gone on, ``adapt_conformal_inference`` clips alpha_t to [0, 1] with ``np.clip``, which
  Gibbs & Candès do not: a second place where the recursions part.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

N_CAL, M, GAMMA, LEVEL = 200, 1000, 0.005, 0.9


def series(kind: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    T = N_CAL + M
    mu = rng.normal(size=T)
    t = np.arange(T)
    noise = 1.0 + t / T if kind == "window" else np.where(t < N_CAL + M // 3, 1.0, 3.0)
    return mu, mu + noise * rng.normal(size=T)


def run(kind: str) -> dict:
    import warnings

    from mapie.conformity_scores import AbsoluteConformityScore
    from mapie.regression import TimeSeriesRegressor
    from sklearn.base import BaseEstimator, RegressorMixin

    class GivenPredictions(RegressorMixin, BaseEstimator):
        """``predict(X)`` is ``X[:, 0]``: the base predictions, computed once and shared."""

        def fit(self, X=None, y=None):
            self.fitted_ = True
            self.n_features_in_ = 1
            return self

        def predict(self, X):
            return np.asarray(X, float)[:, 0]

    # MAPIE 1.6 warns at every update that its confidence_level / optimize_beta arguments do nothing there
    warnings.filterwarnings("ignore", message=r"\s*This function behavior has been changed", category=UserWarning)
    mu, y = series(kind)
    model = TimeSeriesRegressor(
        GivenPredictions().fit(), method="aci", cv="prefit", conformity_score=AbsoluteConformityScore(sym=True)
    ).fit(mu[:N_CAL, None], y[:N_CAL])
    lower, upper, alpha = np.full(M, np.nan), np.full(M, np.nan), np.full(M, np.nan)
    failed_at, error = -1, ""
    for k in range(M):
        x, yt = mu[N_CAL + k : N_CAL + k + 1, None], y[N_CAL + k : N_CAL + k + 1]
        alpha[k] = getattr(model, "current_alpha", {}).get(round(1 - LEVEL, 2), round(1 - LEVEL, 2))
        try:
            _, pis = model.predict(x, confidence_level=LEVEL, allow_infinite_bounds=True)
        except ValueError as err:  # MAPIE 1.6's symmetric branch cannot issue the infinite interval
            failed_at, error = k, str(err)
            break
        lower[k], upper[k] = pis[0, 0, 0], pis[0, 1, 0]
        model.adapt_conformal_inference(x, yt, gamma=GAMMA)
        if kind == "window":
            model.update(x, yt)
    out = {f"{kind}_mu": mu, f"{kind}_y": y, f"{kind}_lower": lower, f"{kind}_upper": upper, f"{kind}_alpha": alpha}
    return {**out, f"{kind}_failed_at": failed_at, f"{kind}_error": error}


def main() -> None:
    import mapie

    out = Path(__file__).with_name("mapie_aci_reference.npz")
    arrays = {**run("window"), **run("fixed")}
    np.savez(out, n_cal=N_CAL, gamma=GAMMA, level=LEVEL, mapie_version=mapie.__version__, **arrays)
    print(f"wrote {out} (MAPIE {mapie.__version__})")


if __name__ == "__main__":
    main()
