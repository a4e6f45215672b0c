"""The fast sparse J+GP prediction path against the general one and against a sort.

On a sparse base :class:`JackknifePlusGP` builds its weights test-point-major and
selects the order statistics in place along rows
(:func:`calibprob.calibrators.conformal.gp._jackknife_plus_gp_bounds_test_major`). It must give
the ends of the general column-major path — :func:`jackknife_plus_gp_bounds` on
:func:`loo_at_points`, itself checked against refits in
``tests/calibrators/conformal/test_gp_sparse.py`` — for every score and convention, whatever the
chunk size.
"""

import numpy as np
import pytest

from calibprob.bases.gp import SparseGaussianProcessRegressor
from calibprob.calibrators.conformal._gp_bounds import _select_rows
from calibprob.calibrators.conformal.gp import JackknifePlusGP, jackknife_plus_gp_bounds

THETA = {"lengthscale": np.array([0.3, 0.4]), "variance": 1.0, "noise": 0.04}
LEVELS = [0.5, 0.8, 0.9]


@pytest.fixture(scope="module")
def fitted(sine_surface):
    X, y = sine_surface(400, seed=5)
    Xt = np.random.default_rng(6).uniform(size=(150, 2))
    gps = {
        mean: SparseGaussianProcessRegressor(n_inducing=25, mean=mean, theta=THETA, optimize=False, random_state=0).fit(
            X, y
        )
        for mean in ("zero", "constant")
    }
    return gps, Xt


CASES = [
    ("zero", True, "normalized", 1.0, 0.0, "barber"),
    ("constant", True, "normalized", 1.0, 0.0, "barber"),
    ("constant", False, "normalized", 1.0, 0.0, "barber"),
    ("constant", True, "normalized", 0.5, 0.1, "barber"),
    ("constant", True, "signed", 1.0, 0.0, "barber"),
    ("constant", True, "signed", 1.0, 0.0, "pion2024"),
    ("zero", True, "signed", 0.7, 0.05, "pion2024"),
    ("constant", True, "absolute", 1.0, 0.0, "barber"),
    ("constant", True, "signed-absolute", 1.0, 0.0, "barber"),
]


@pytest.mark.parametrize("mean, refit_mean, score, beta, eps, convention", CASES)
def test_fast_sparse_path_equals_the_general_path(fitted, mean, refit_mean, score, beta, eps, convention):
    gps, Xt = fitted
    kw = dict(score=score, beta=beta, eps=eps, convention=convention, confidence_level=LEVELS)
    jgp = JackknifePlusGP(estimator=gps[mean], prefit=True, refit_mean=refit_mean, **kw).fit()
    iv = jgp.predict_interval(Xt)
    view = jgp.view_
    lam, mu, var = view.predict(Xt)  # column-major weights (n, c), the general path
    lo, hi = jackknife_plus_gp_bounds(
        view.system, lam, mu, var, np.array(LEVELS), score=score, beta=beta, eps=eps, convention=convention
    )
    np.testing.assert_allclose(iv["lower"].values, lo + view.offset, rtol=0, atol=1e-12)
    np.testing.assert_allclose(iv["upper"].values, hi + view.offset, rtol=0, atol=1e-12)
    assert np.all(iv["upper"].values >= iv["lower"].values)


@pytest.mark.parametrize("score", ["normalized", "signed"])
def test_chunked_equals_one_block(fitted, score):
    gps, Xt = fitted
    out = []
    for chunk in (1, 7, 64, len(Xt)):
        jgp = JackknifePlusGP(
            estimator=gps["constant"], prefit=True, score=score, confidence_level=LEVELS, chunk_size=chunk
        ).fit()
        iv = jgp.predict_interval(Xt)
        out.append((iv["lower"].values, iv["upper"].values))
    for lo, hi in out[:-1]:
        np.testing.assert_allclose(lo, out[-1][0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(hi, out[-1][1], rtol=0, atol=1e-12)


def test_select_rows_is_the_sorted_order_statistic():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(30, 101))
    values[3, :50] = 1.5  # ties
    ranks = [1, 5, 5, 51, 101]
    expected = np.sort(values, axis=1)[:, np.array(ranks) - 1]
    np.testing.assert_array_equal(_select_rows(values.copy(), ranks), expected)
