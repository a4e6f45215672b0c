"""Non-conformity scores: definitions (Pion eq. 9, 13), inverses, bad input."""

import numpy as np
import pytest

from calibprob.calibrators.conformal.scores import (
    AbsoluteScore,
    NormalizedScore,
    SignedAbsoluteScore,
    SignedNormalizedScore,
    get_score,
)


@pytest.fixture
def pred():
    rng = np.random.default_rng(0)
    mu = rng.normal(size=200)
    sigma = np.exp(rng.normal(scale=0.7, size=200))
    y = mu + sigma * rng.standard_t(5, size=200)
    return y, mu, sigma


def test_definitions_match_pion_eq9_eq13(pred):
    y, mu, sigma = pred
    np.testing.assert_allclose(AbsoluteScore().score(y, mu), np.abs(y - mu))
    for beta, eps in [(1.0, 0.0), (0.5, 0.3), (2.0, 1e-3)]:
        s = np.maximum(eps, sigma**beta)
        np.testing.assert_allclose(NormalizedScore(beta, eps).score(y, mu, sigma), np.abs(y - mu) / s)
        np.testing.assert_allclose(SignedNormalizedScore(beta, eps).score(y, mu, sigma), (y - mu) / s)
    np.testing.assert_allclose(SignedAbsoluteScore().score(y, mu), y - mu)


@pytest.mark.parametrize("name", ["absolute", "normalized", "signed", "signed-absolute"])
def test_inverse_recovers_observation(pred, name):
    """The interval end at threshold R(y) passes exactly through y."""
    y, mu, sigma = pred
    sc = get_score(name, beta=0.7, eps=0.05)
    r = sc.score(y, mu, sigma)
    if sc.symmetric:
        lo, hi = sc.inverse(r, mu, sigma)
        np.testing.assert_allclose(np.where(y >= mu, hi, lo), y, atol=1e-12)
        assert np.all(lo <= hi)
    else:
        np.testing.assert_allclose(sc.inverse(r, mu, sigma), y, atol=1e-12)


def test_eps_floor_allows_zero_sigma_only_with_eps():
    sc = NormalizedScore(beta=1.0, eps=0.1)
    np.testing.assert_allclose(sc.score([1.0], [0.0], [0.0]), [10.0])
    with pytest.raises(ValueError, match=r"sigma must be > 0 .*eps=0"):
        NormalizedScore().score([1.0], [0.0], [0.0])


@pytest.mark.parametrize(
    "kwargs, sigma, match",
    [
        ({}, [1.0, -0.5], r"sigma must be > 0"),
        ({"eps": 0.1}, [1.0, -0.5], r"sigma must be >= 0"),
        ({}, [1.0, np.nan], r"sigma must be finite"),
        ({}, None, r"needs the base's predictive standard deviation"),
    ],
)
def test_bad_sigma(kwargs, sigma, match):
    with pytest.raises(ValueError, match=match):
        NormalizedScore(**kwargs).score([0.0, 1.0], [0.0, 0.0], sigma)


def test_bad_parameters():
    with pytest.raises(ValueError, match=r"beta must be > 0"):
        NormalizedScore(beta=0.0)
    with pytest.raises(ValueError, match=r"eps must be >= 0"):
        SignedNormalizedScore(eps=-1.0)
    with pytest.raises(ValueError, match=r"score must be one of 'absolute', 'normalized'"):
        get_score("residual")
