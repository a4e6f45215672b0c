"""One name per idea: the public argument names of every registered calibrator, checked against a synonym table.

Every argument of ``__init__``, ``fit``, ``calibrate``, ``predict``, ``predict_interval`` and ``update`` of every
class :func:`calibprob.list_calibrators` returns is collected; for each idea of :data:`SYNONYMS` only its first
(chosen) name may appear. :data:`PENDING` lists the uses still to rename (each with a deprecation of the old keyword;
empty since issue 40's renames); the test fails on any use outside it, and on an entry of it that no longer occurs (remove it
when the rename lands), so the list can only shrink.
"""

from __future__ import annotations

import inspect

import calibprob

METHODS = ("__init__", "fit", "calibrate", "predict", "predict_interval", "update")

#: idea -> (the chosen name, *synonyms that must not appear)
SYNONYMS = {
    "conformity score": ("score", "normalize", "variant", "score_type", "nonconformity"),
    "rows per block": ("chunk_size", "block_rows", "block_size"),
    "group unseen at calibration": ("fallback", "unseen_group", "unseen", "missing_group"),
    "interval levels": ("confidence_level", "confidence_levels", "coverage", "alpha_level"),
    "grid points": ("n_grid", "grid_size", "n_points_grid"),
    "group labels": ("groups", "train_groups", "group", "group_labels"),
    "number of draws": ("n_draws", "num_draws", "n_samples_draws"),
}

#: (class, method, argument) still to rename: none left. Issue 40 renamed CPS's ``normalize`` and CQR's ``variant``
#: to ``score``, conformal Bayes' ``block_rows`` to ``chunk_size``, ``unseen_group`` to ``fallback`` and its
#: ``fit(train_groups=)`` to ``groups``; the old keywords warn (calibprob._core.deprecation.renamed_keywords, tested
#: in tests/test_renamed_arguments.py) and are not in the signatures this test reads.
PENDING: set[tuple[str, str, str]] = set()


#: Uses of a listed word for a different idea (checked: each still occurs, else the test fails).
DIFFERENT_IDEA = {
    ("SharpCalibratedGP", "__init__", "variant"): "the paper's method variant (full / scaled / cross-fitted)",
}
# GPBetaCalibrator's batch_size (an ADVI minibatch, not a block of rows) is why "batch_size" is not in the table.


def public_arguments() -> dict[tuple[str, str, str], None]:
    """Every (class, method, argument) of the registry's calibrators (``self`` and ``*args``/``**kwargs`` left out)."""
    found: dict[tuple[str, str, str], None] = {}
    for name, cls, _family, _output in calibprob.list_calibrators():
        for method in METHODS:
            func = getattr(cls, method, None)
            if func is None or (method == "__init__" and func is object.__init__):
                continue
            for p in list(inspect.signature(func).parameters.values())[1:]:
                if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and not p.name.startswith("_"):
                    found[(name, method, p.name)] = None
    return found


def synonym_uses(arguments) -> set[tuple[str, str, str]]:
    """The uses of a non-chosen name of an idea of :data:`SYNONYMS`."""
    banned = {word for _chosen, *others in SYNONYMS.values() for word in others}
    return {key for key in arguments if key[2] in banned and key not in DIFFERENT_IDEA}


def test_the_listing_covers_every_calibrator_and_its_core_arguments():
    """The list is not empty by accident: every calibrator contributes, and ``confidence_level`` is found."""
    args = public_arguments()
    assert {c for c, _m, _a in args} == {name for name, *_ in calibprob.list_calibrators()}
    assert ("SplitConformalRegressor", "__init__", "confidence_level") in args


def test_no_synonym_outside_the_pending_renames():
    uses = synonym_uses(public_arguments())
    new = sorted(uses - PENDING)
    assert not new, (
        f"argument names that are synonyms of a chosen name: {new}; use the chosen name of tests/test_naming.py's "
        "SYNONYMS (and keep the old keyword working: calibprob._core.deprecation.renamed_keywords)."
    )
    assert set(DIFFERENT_IDEA) <= set(public_arguments()), "a DIFFERENT_IDEA entry no longer occurs: remove it"
    fixed = sorted(PENDING - uses)
    assert not fixed, f"renamed already, remove from PENDING in tests/test_naming.py: {fixed}"


def test_the_check_catches_a_synonym():
    """The detector itself: a toy signature with ``block_rows`` is reported, ``chunk_size`` is not."""
    assert synonym_uses({("Toy", "__init__", "block_rows"): None, ("Toy", "__init__", "chunk_size"): None}) == {
        ("Toy", "__init__", "block_rows")
    }


def test_the_public_functions_take_the_chosen_names():
    """Beyond the calibrators: the metrics and plots take ``confidence_level`` (``confidence_levels`` is deprecated)."""
    from calibprob import metrics, plots

    banned = {word for _chosen, *others in SYNONYMS.values() for word in others}
    funcs = (calibprob.evaluate, metrics.evaluate_intervals, metrics.interval_levels, plots.plot_intervals)
    for func in (*funcs, plots.plot_coverage):
        names = set(inspect.signature(func).parameters)
        assert not names & banned, (func.__qualname__, sorted(names & banned))
        assert "confidence_level" in names, func.__qualname__
