"""The package namespace: subpackages reachable as attributes after ``import calibprob``, imported lazily."""

import subprocess
import sys

import pytest


def test_subpackages_are_attributes_imported_on_first_use():
    code = (
        "import sys, calibprob\n"
        "assert 'calibprob.calibrators' not in sys.modules\n"
        "print(calibprob.calibrators.GPBetaCalibrator.__name__, calibprob.conformal.JackknifePlusGP.__name__)\n"
        "assert 'calibprob.calibrators' in sys.modules\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["GPBetaCalibrator", "JackknifePlusGP"]


def test_an_unknown_attribute_is_still_an_attribute_error():
    import calibprob

    with pytest.raises(AttributeError, match="module 'calibprob' has no attribute 'calibrator'"):
        calibprob.calibrator  # noqa: B018
    assert "calibrators" in dir(calibprob)
