"""The docs' claims about *sets* of calibrators, checked against the registry (issue 36, item 5).

A sentence such as "every post-processor takes ``groups=``" is true of the classes registered
today; a class registered tomorrow can make it false without anyone editing the page. So each
such sentence carries a marker right after it, invisible in the rendered page::

    <!-- claim: family=distribution :: fit,predict take groups -->

``SELECTOR :: PREDICATE``. The selector picks registry classes (:data:`calibprob.registry.CLASSES`)
by their metadata, every term must hold: ``key=v1,v2`` (one of the values), ``key!=v``,
``key~text`` (the field contains the text); keys ``name``, ``role`` (default ``calibrator``),
``family``, ``output``, ``module``. The predicate is one of:

* ``m1,m2 take p1,p2`` -- every selected class's methods ``m1``, ``m2`` (``__init__`` for the
  constructor) take the parameters ``p1``, ``p2``;
* ``have a1,a2`` -- every selected class has the attributes;
* ``are C1, C2, ...`` -- the selected classes are exactly these (a list in the prose);
* ``FIELD in v1,v2`` -- every selected class's registry field is one of the values.

:func:`test_every_set_sentence_is_marked` keeps new sentences honest: in the pages checked, a
sentence that states a property of every post-processor / calibrator / base / model-aware class
must carry a marker within its paragraph.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from calibprob import registry

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted((DOCS / "methods").glob("*.md")) + [DOCS / "concepts.md", DOCS / "conditional-coverage.md"]
CLAIM = re.compile(r"<!--\s*claim:\s*(.*?)\s*::\s*(.*?)\s*-->")
#: sentences that state a property of a whole set of calibrators / bases
SET_SENTENCE = re.compile(
    r"\b(every|each|all)\s+(other\s+)?(exported\s+|distribution\s+|model-aware\s+|public\s+)?"
    r"(post-processors?|calibrators?|bases?|model-aware class(es)?)\b(?! (in|of) (the|a|this) (spec|stream|page))",
    re.IGNORECASE,
)
_FIELDS = ("name", "role", "family", "output", "module")


def _claims():
    for page in PAGES:
        for lineno, line in enumerate(page.read_text().splitlines(), 1):
            for m in CLAIM.finditer(line):
                yield pytest.param(page.name, lineno, m.group(1), m.group(2), id=f"{page.name}:{lineno}")


def _value(entry, key: str) -> str:
    return str(getattr(entry, key))


def select(selector: str) -> dict[str, object]:
    """Registry classes (name -> entry) matching every ``key=v1,v2`` / ``key!=v`` / ``key~text`` term."""
    terms = selector.split()
    if not any(t.startswith("role") for t in terms):
        terms.append("role=calibrator")
    out = {}
    for name, entry in registry.CLASSES.items():
        ok = True
        for term in terms:
            m = re.fullmatch(r"(\w+)(!=|=|~)(.+)", term)
            assert m and m.group(1) in _FIELDS, f"bad selector term {term!r} (keys: {_FIELDS})"
            key, op, want = m.groups()
            have = _value(entry, key)
            if op == "=":
                ok &= have in want.split(",")
            elif op == "!=":
                ok &= have not in want.split(",")
            else:
                ok &= want in have
        if ok:
            out[name] = entry
    return out


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def falsified(selected: dict, predicate: str) -> list[str]:
    """The selected classes for which ``predicate`` does not hold (each with the reason)."""
    m = re.fullmatch(r"(\S+) take (\S+)", predicate)
    if m:
        methods, params = _split(m.group(1)), _split(m.group(2))
        bad = []
        for name, entry in selected.items():
            cls = entry.load()
            for meth in methods:
                sig = inspect.signature(cls if meth == "__init__" else getattr(cls, meth))
                missing = [p for p in params if p not in sig.parameters]
                if missing:
                    bad.append(f"{name}.{meth} lacks {missing}")
        return bad
    m = re.fullmatch(r"have (\S+)", predicate)
    if m:
        return [f"{n} lacks {a}" for n, e in selected.items() for a in _split(m.group(1)) if not hasattr(e.load(), a)]
    m = re.fullmatch(r"are (.+)", predicate)
    if m:
        listed, have = set(_split(m.group(1))), set(selected)
        return [f"registry has {n}, the page does not list it" for n in sorted(have - listed)] + [
            f"the page lists {n}, the registry's selection does not have it" for n in sorted(listed - have)
        ]
    m = re.fullmatch(r"(\w+) in (\S+)", predicate)
    if m:
        return [f"{n}.{m.group(1)} = {_value(e, m.group(1))}" for n, e in selected.items()
                if _value(e, m.group(1)) not in _split(m.group(2))]  # fmt: skip
    raise AssertionError(f"unknown predicate {predicate!r} (take / have / are / in)")


@pytest.mark.parametrize(("page", "lineno", "selector", "predicate"), list(_claims()))
def test_claim_holds_over_the_registry(page, lineno, selector, predicate):
    selected = select(selector)
    assert selected, f"{page}:{lineno}: the selector {selector!r} picks no registered class"
    bad = falsified(selected, predicate)
    assert not bad, f"docs/{page}:{lineno} claims [{selector} :: {predicate}], false for: " + "; ".join(bad)


def test_the_pages_carry_claims():
    """The pages whose sentences are about sets of calibrators are marked (a removed marker is noticed)."""
    marked = {name for name, *_ in (p.values for p in _claims())}
    assert {"concepts.md", "mondrian.md", "index.md", "conformal.md", "gp.md"} <= marked, marked


def _paragraphs(text: str):
    """``(first line number, paragraph)``; code and math blocks blanked (line numbers kept)."""
    text = re.sub(r"(```|\$\$).*?\1", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.DOTALL)
    start = 1
    for block in re.split(r"(\n\s*\n)", text):
        if block.strip():
            yield start, block
        start += block.count("\n")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_set_sentence_is_marked(page):
    """A sentence about every post-processor / calibrator / base / model-aware class carries a claim."""
    unmarked = []
    for start, para in _paragraphs(page.read_text()):
        if para.lstrip().startswith("#"):
            continue  # a heading: its section's sentences carry the claims
        prose = re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), para)
        for m in SET_SENTENCE.finditer(prose):
            if not CLAIM.search(para):
                line = start + prose[: m.start()].count("\n")
                unmarked.append(f"{page.name}:{line}: {m.group(0)!r}")
    assert not unmarked, (
        "sentences about a whole set of classes without a claim marker (add <!-- claim: SELECTOR :: PREDICATE -->, "
        "see tests/test_doc_claims.py, or restrict the sentence): " + "; ".join(unmarked)
    )


def test_selector_and_predicates_can_fail():
    """The checker itself: a false claim is reported (so a marker cannot pass vacuously)."""
    assert falsified(select("family=distribution"), "fit take no_such_parameter")
    assert falsified(select("family=distribution"), "are SplitConformalCalibrator")
    assert falsified(select("role=base"), "have predict_mean_std") == [
        "QuantileGradientBoosting lacks predict_mean_std"
    ]
    assert falsified(select("family=model-aware"), "family in distribution")
