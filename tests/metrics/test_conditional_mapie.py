"""calibprob's conditional-coverage diagnostics equal MAPIE's on the same inputs (stored reference values).

The references come from tests/data/make_mapie_conditional_refs.py, run with MAPIE 1.6.0 and
covmetrics 0.1.2 in a separate environment (MAPIE is not a calibprob dependency).

Where the algorithm is the same the values agree to 1e-12 (SSC, HSIC, coverage gap; worst-slab
coverage in its in-sample form with covmetrics' directions). Conventions that differ, and why:

* MAPIE's ``coverage_gap`` takes one level and integer labels; calibprob takes every level and any
  labels.
* ``worst_slab_coverage`` is in-sample in MAPIE (biased low); calibprob's default finds the slab on
  a quarter of the points and measures it on the rest, so only ``find_fraction=None`` is compared.
  calibprob standardises X itself (MAPIE does not); the reference was computed on X standardised
  the same way. calibprob's m = ceil(delta n) is exact, covmetrics' a float ceil (equal here).
* MAPIE's ``regression_ssc`` raises with fewer distinct widths than bins; calibprob gives NaN.
  MAPIE refuses infinite bounds; calibprob counts them as covering with infinite width.
"""

from __future__ import annotations

import numpy as np
import pytest

from calibprob.metrics import coverage_gap, coverage_indicators, hsic, size_stratified_coverage, worst_slab_coverage
from tests.support.paths import TEST_DATA

REFS = TEST_DATA / "mapie_conditional_refs.npz"


@pytest.fixture(scope="module")
def ref():
    with np.load(REFS) as f:
        out = dict(f)
    c, w = coverage_indicators(out["y"], out["lower"], out["upper"])
    return out | {"covered": c, "widths": w}


def test_reference_was_made_with_mapie_1_5_or_later(ref):
    major, minor = (int(t) for t in str(ref["mapie_version"]).split(".")[:2])
    assert (major, minor) >= (1, 5)


@pytest.mark.parametrize("bins", [3, 5])
def test_size_stratified_coverage_equals_regression_ssc(ref, bins):
    np.testing.assert_allclose(
        size_stratified_coverage(ref["covered"], ref["widths"], bins), ref[f"ssc_{bins}"], rtol=0, atol=1e-12
    )


@pytest.mark.parametrize(("sizes", "key"), [((1.0, 1.0), "hsic_1_1"), ((0.5, 2.0), "hsic_05_2")])
def test_hsic_equals_mapie(ref, sizes, key):
    np.testing.assert_allclose(hsic(ref["covered"], ref["widths"], kernel_sizes=sizes), ref[key], rtol=0, atol=1e-12)


@pytest.mark.parametrize("weighted", [False, True])
def test_coverage_gap_equals_mapie(ref, weighted):
    got = coverage_gap(ref["covered"], ref["groups"], ref["levels"], weighted=weighted)
    want = [float(ref[f"covgap_{'w_' if weighted else ''}{k}"]) for k in range(2)]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_in_sample_worst_slab_equals_covmetrics_with_its_directions(ref):
    got = worst_slab_coverage(ref["X"], ref["covered"], delta=0.1, directions=ref["directions"], find_fraction=None)
    np.testing.assert_allclose(got, [float(ref["wsc_0"]), float(ref["wsc_1"])], rtol=0, atol=1e-12)
