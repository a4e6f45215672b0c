"""Write ``mapie_enbpi_reference.npz``: MAPIE 1.6's EnbPI intervals on a small drifting series (issue 38).

Run with the peers' interpreter (MAPIE is not a calibprob dependency; the test that reads the file,
``tests/calibrators/timeseries/test_enbpi_mapie.py``, imports no MAPIE)::

    /work/venvs/peers/bin/python tests/data/make_mapie_enbpi_reference.py

The series: ``X ~ N(0, I_3)``, ``y = X @ (1, -1, 0.5) + (1 + t / T) * eps`` (the noise grows), seed 0,
T = 300, the first 200 points train. MAPIE: ``TimeSeriesRegressor(Ridge(), method="enbpi",
cv=BlockBootstrap(n_resamplings=30, n_blocks=200, random_state=7), agg_function="mean",
conformity_score=AbsoluteConformityScore(sym=True))``: blocks of length 1 are the i.i.d. bootstrap
of the paper, drawn by ``RandomState(7).randint(0, 200, 200)`` per model, i.e. the draws of
``RandomState(7).choice(200, 200)``. Then for every test row: ``predict(x_t, ensemble=True,
confidence_level=0.9)``, and ``update(x_t, y_t, ensemble=True)`` (the residual window slides by one).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def series(T: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(T, 3))
    return X, X @ [1.0, -1.0, 0.5] + (1.0 + np.arange(T) / T) * rng.normal(size=T)


def main() -> None:
    import warnings

    import mapie
    from mapie.conformity_scores import AbsoluteConformityScore
    from mapie.regression import TimeSeriesRegressor
    from mapie.subsample import BlockBootstrap
    from sklearn.linear_model import Ridge

    # MAPIE 1.6 warns at every update that its confidence_level and optimize_beta arguments do nothing there
    warnings.filterwarnings("ignore", message="\\s*This function behavior has been changed", category=UserWarning)
    X, y = series()
    n = 200
    cv = BlockBootstrap(n_resamplings=30, n_blocks=n, overlapping=False, random_state=7)
    model = TimeSeriesRegressor(
        Ridge(), method="enbpi", cv=cv, agg_function="mean", conformity_score=AbsoluteConformityScore(sym=True)
    ).fit(X[:n], y[:n])
    lower, upper = np.empty(len(y) - n), np.empty(len(y) - n)
    for k, t in enumerate(range(n, len(y))):
        _, pis = model.predict(X[t : t + 1], ensemble=True, confidence_level=0.9, allow_infinite_bounds=True)
        lower[k], upper[k] = pis[0, 0, 0], pis[0, 1, 0]
        model.update(X[t : t + 1], y[t : t + 1], ensemble=True)
    out = Path(__file__).with_name("mapie_enbpi_reference.npz")
    np.savez(out, X=X, y=y, n_train=n, lower=lower, upper=upper, mapie_version=mapie.__version__)
    print(f"wrote {out} (MAPIE {mapie.__version__})")


if __name__ == "__main__":
    main()
