"""Properties of every constructor of the predictive contract, at magnitudes 1e-200 ... 1e200.

For each constructor of :data:`conftest.CONSTRUCTORS` (5 of them) and each affine map
:math:`y \\mapsto a + s\\,y` (``s = m 10^e``, ``e`` in [-200, 200]; the log-transformed law
takes scalings only, since :math:`\\log(s Y) = \\log s + \\log Y`), the law of :math:`a + sY`
built directly from the mapped inputs must be the mapped law (the independent reference is
the unmapped law, computed at magnitude one):

* quantiles, mean, median, std and central intervals map as :math:`a + s\\,(\\cdot)` (std and
  widths as :math:`s\\,(\\cdot)`);
* CDF and PIT at :math:`a + s y` equal those at :math:`y`, and lie in [0, 1];
* :func:`calibprob.evaluate`: CRPS, pinball, rmse, std and widths scale by ``s``, the NLL moves
  by :math:`+\\log s` (the density of :math:`a + sY` is :math:`f(y)/s`), and ECE, IAE, coverage
  and the UEB violation rate are unchanged;
* nothing is NaN or infinite where the true value is representable, and the one value that is
  not (the mse at scale 1e200, :math:`10^{400}`) comes with a warning naming why.

5 constructors x 3 properties, :data:`conftest.MAX_EXAMPLES` examples each.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import calibprob
from calibprob.predictive import CalibprobWarning

from .conftest import CONSTRUCTORS, LEVELS, scales, shifts, y_for

NAMES = sorted(CONSTRUCTORS)


def _affine(name, a, s):
    builder, shifts_ok = CONSTRUCTORS[name]
    return builder(a if shifts_ok else 0.0, s), (a if shifts_ok else 0.0)


def _close(mapped, reference, s, what):
    """``mapped / s`` equals ``reference`` to rounding (the comparison is in units of the scale)."""
    mapped, reference = np.asarray(mapped, float), np.asarray(reference, float)
    assert np.all(np.isfinite(mapped)), f"{what}: non-finite {mapped}"
    np.testing.assert_allclose(
        mapped / s, reference, rtol=1e-7, atol=1e-7 * (1 + np.abs(reference).max()), err_msg=what
    )


@pytest.mark.parametrize("name", NAMES)
@given(s=scales(), t=shifts())
@example(s=1e200, t=0.0)  # std was nan at scale 1e200 (found by this test for from_quantiles)
@example(s=1e-200, t=0.0)  # std was 0 at scale 1e-200
@example(s=1e200, t=3.0)
def test_quantiles_moments_intervals_are_equivariant(name, s, t):
    ref, _ = _affine(name, 0.0, 1.0)
    pred, a = _affine(name, t * s, s)
    calibprob.validate(pred)
    p = np.array([0.01, 0.05, 0.3, 0.5, 0.8, 0.99])
    _close(pred.calib.ppf(p).values - a, ref.calib.ppf(p).values, s, "ppf")
    _close(pred.calib.quantiles - a, ref.calib.quantiles, s, "stored quantiles")
    _close(pred.calib.mean().values - a, ref.calib.mean().values, s, "mean")
    _close(pred.calib.median().values - a, ref.calib.median().values, s, "median")
    std = pred.calib.std().values
    assert np.all(std > 0), f"std underflowed to {std}"
    _close(std, ref.calib.std().values, s, "std")
    iv, iv_ref = pred.calib.interval([0.5, 0.9]), ref.calib.interval([0.5, 0.9])
    _close(iv["upper"].values - iv["lower"].values, iv_ref["upper"].values - iv_ref["lower"].values, s, "width")
    assert np.all(iv["lower"].values <= iv["upper"].values)
    assert np.all(np.diff(pred.calib.ppf(np.linspace(0.001, 0.999, 41)).values, axis=1) >= 0)


@pytest.mark.parametrize("name", NAMES)
@given(s=scales(), t=shifts(), u=st.floats(-6.0, 6.0))
@example(s=1e200, t=0.0, u=0.0)
@example(s=1e-200, t=0.0, u=0.0)
def test_cdf_and_pit_are_invariant_and_in_unit_interval(name, s, t, u):
    ref, _ = _affine(name, 0.0, 1.0)
    pred, a = _affine(name, t * s, s)
    y_ref = y_for(name, 0.0, 1.0) + (u if CONSTRUCTORS[name][1] else 0.0)
    y = a + s * y_ref
    cdf, cdf_ref = pred.calib.cdf(y).values, ref.calib.cdf(y_ref).values
    assert np.all((cdf >= 0) & (cdf <= 1)), cdf
    np.testing.assert_allclose(cdf, cdf_ref, atol=1e-6)
    pit = pred.calib.pit(y).values
    assert np.all((pit >= 0) & (pit <= 1))
    lp, lp_ref = pred.calib.logpdf(y).values, ref.calib.logpdf(y_ref).values
    finite = np.isfinite(lp_ref)
    np.testing.assert_allclose(lp[finite], lp_ref[finite] - np.log(s), rtol=1e-6, atol=1e-6)


_SCALED = ("crps", "pinball", "rmse", "std", "ueb_width")
_INVARIANT = ("ece", "iae", "ueb_violation")


@pytest.mark.parametrize("name", NAMES)
@given(s=scales(), t=shifts())
@example(s=1e200, t=0.0)  # rmse was inf and std nan at scale 1e200
@example(s=1e-200, t=0.0)  # std was 0 at scale 1e-200
def test_evaluate_is_equivariant(name, s, t):
    ref, _ = _affine(name, 0.0, 1.0)
    pred, a = _affine(name, t * s, s)
    m_ref = calibprob.evaluate(ref, y_for(name, 0.0, 1.0), pinball_levels=LEVELS[::3])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = calibprob.evaluate(pred, y_for(name, a, s), pinball_levels=LEVELS[::3])
    for key in _SCALED:
        _close(float(m[key]), float(m_ref[key]), s, key)
    _close(m["width"].values, m_ref["width"].values, s, "width")
    for key in _INVARIANT:
        np.testing.assert_allclose(float(m[key]), float(m_ref[key]), atol=1e-9, err_msg=key)
    np.testing.assert_array_equal(m["coverage"].values, m_ref["coverage"].values)
    assert np.all((m["coverage"].values >= 0) & (m["coverage"].values <= 1))
    np.testing.assert_allclose(float(m["nll"]), float(m_ref["nll"]) + np.log(s), rtol=1e-9, atol=1e-7)
    mse_true = float(m_ref["mse"]) * s * s  # inf exactly when the true mse is beyond float64
    if np.isfinite(mse_true):
        np.testing.assert_allclose(float(m["mse"]), mse_true, rtol=1e-7)
    else:
        assert any(issubclass(w.category, CalibprobWarning) and "mse overflows" in str(w.message) for w in caught)
    # no silent non-finite value: a NaN/inf anywhere must have been announced
    bad = [k for k in m.data_vars if not np.all(np.isfinite(m[k].values))]
    assert not bad or caught, f"silent non-finite metrics {bad}"
    assert set(bad) <= {"mse"}, bad
