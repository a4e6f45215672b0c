"""The data the weighted (covariate-shift) conformal tests share (Tibshirani, Barber, Candès & Ramdas 2019).

- :func:`heteroscedastic_data` / :func:`gaussian_pred`: ``y = x_0 + (1 + |x_1|) eps`` and a base's
  Gaussian predictive with a spread of its own (so the normalised and signed scores differ);
- :func:`brute_threshold`: the weighted split-conformal threshold by a plain loop, the independent check;
- :func:`tilted_draw` / :func:`tilt_ratio` / :func:`tilted_coverage`: the tilted stream of Corollary 1's check, calibration
  ``x ~ N(0, 1)``, test ``x ~ N(1, 1)``, so the true likelihood ratio is ``w(x) = exp(x - 1/2)``,
  with ``y = x + (0.5 + x^2/2) eps`` (the residual spread grows where the test inputs go).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

import calibprob
from calibprob.weights import GivenWeights


def heteroscedastic_data(seed: int = 0, n: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """``X ~ N(0, I_2)`` and ``y = X_0 + (1 + |X_1|) eps``, seeded."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = X[:, 0] + (1 + np.abs(X[:, 1])) * rng.normal(size=n)
    return X, y


def gaussian_pred(X: np.ndarray) -> xr.Dataset:
    """A base's Gaussian predictive with a spread of its own: ``N(X_0, (1 + |X_1|/2)^2)``."""
    return calibprob.normal(X[:, 0], 1 + 0.5 * np.abs(X[:, 1]))


def brute_threshold(scores, w, t: float, q: float) -> float:
    """The level-q quantile of sum_i w_i/(W+t) delta_{R_i} + t/(W+t) delta_{+inf}, by a plain loop."""
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    total = sum(w) + t
    acc = 0.0
    for i in order:
        acc += w[i] / total
        if acc >= q - 1e-12:
            return scores[i]
    return np.inf


def tilt_ratio(x: np.ndarray) -> np.ndarray:
    """The true likelihood ratio of ``N(1, 1)`` to ``N(0, 1)`` at ``x``: ``exp(x - 1/2)``."""
    return np.exp(x - 0.5)


def tilted_draw(rng: np.random.Generator, n: int, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One repetition of the tilt: ``(x_cal, x_test, y_cal, y_test)``, drawn in that order from ``rng``."""
    xc, xt = rng.normal(size=n), rng.normal(1.0, 1.0, size=m)
    yc = xc + (0.5 + xc**2 / 2) * rng.normal(size=n)
    yt = xt + (0.5 + xt**2 / 2) * rng.normal(size=m)
    return xc, xt, yc, yt


def tilted_coverage(make, draw: tuple, level: float, *, weighted: bool = True) -> float:
    """The fraction of one tilted draw's test points that ``make()``'s interval at ``level`` covers.

    ``weighted``: fitted with the true ratio (``on_small="ignore"``: a test point far in the tail may get
    an infinite interval, its own mass exceeding 1 - level, which is part of the method); otherwise unweighted.
    """
    xc, xt, yc, yt = draw
    cal, test = calibprob.normal(xc, np.ones(xc.size)), calibprob.normal(xt, np.ones(xt.size))
    if weighted:
        model = make().fit(cal, yc, weights=GivenWeights(tilt_ratio(xc), on_small="ignore"))
        iv = model.predict_interval(test, level, weights=tilt_ratio(xt))
    else:
        iv = make().fit(cal, yc).predict_interval(test, level)
    return float(np.mean((iv["lower"].values <= yt) & (yt <= iv["upper"].values)))
