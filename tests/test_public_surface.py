"""The public surface over the registry: ``calibprob.list_calibrators`` and the interval family's ``predict_interval``."""

from __future__ import annotations

import pytest

import calibprob
from calibprob import registry


def test_list_calibrators_is_the_registry_s_calibrators_with_their_classes():
    """Every entry of role ``calibrator`` appears once, with its class loaded from its module; nothing else does."""
    listed = calibprob.list_calibrators()
    expected = sorted(n for n, e in registry.CLASSES.items() if e.role == "calibrator")
    assert [name for name, *_ in listed] == expected
    for name, cls, family, output in listed:
        entry = registry.CLASSES[name]
        assert cls.__name__ == name and cls is entry.load()
        assert (family, output) == (entry.family, entry.output)
    assert "LinearRegression" not in {name for name, *_ in listed}  # a base, not a calibrator


@pytest.mark.parametrize("family", registry.FAMILIES)
@pytest.mark.parametrize("output", registry.OUTPUTS)
def test_list_calibrators_filters_are_a_partition(family, output):
    """The filtered lists are exactly the matching subset of the full list."""
    full = calibprob.list_calibrators()
    assert calibprob.list_calibrators(family=family, output=output) == [
        row for row in full if row[2] == family and row[3] == output
    ]


def test_list_calibrators_rejects_an_unknown_family_or_output():
    with pytest.raises(
        ValueError, match=r"family must be one of 'distribution', 'model-aware', 'posterior'; got 'mcmc'"
    ):
        calibprob.list_calibrators(family="mcmc")
    with pytest.raises(ValueError, match=r"output must be one of 'distribution', 'intervals'; got 'interval'"):
        calibprob.list_calibrators(output="interval")


@pytest.mark.parametrize("name", [name for name, *_ in calibprob.list_calibrators(output="intervals")])
def test_every_interval_method_has_predict_interval(name):
    """``predict_interval`` on every method of the interval family (issue 40), taking a confidence level."""
    cls = registry.CLASSES[name].load()
    method = getattr(cls, "predict_interval", None)
    assert callable(method), f"{name} (output='intervals') has no predict_interval"
    import inspect

    assert "confidence_level" in inspect.signature(method).parameters
