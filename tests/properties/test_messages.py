"""Every ``ValueError`` / ``TypeError`` / ``SpecError`` calibprob raises says what to do or what is expected.

The rule for every message: it names the thing, and says what to do or what is expected
("must be ...", "pass ...", "use ...", "one of ...", "Divide y by ..."). An AST scan of every
raise site in the package (not a sample of tests: a raise site added tomorrow is checked the day
it is written) reads the message's literal text — including string constants the function
assigns to names it interpolates (``hint = "Give ..."``) — and requires a word of advice or
expectation from :data:`ADVICE`. A message that only *wraps* another one (``f"{where}: {err}"``,
where ``err`` was raised by a checked site) has no literal advice of its own; those are listed
in :data:`WRAPPERS` with the reason, and the list is checked to stay exact (no stale entries).

``calibprob/_core/persistence/`` (save/load) is owned by another branch (its load messages are being
rewritten there) and is left out here.
"""

from __future__ import annotations

import ast
import pathlib
import re

import calibprob

ROOT = pathlib.Path(calibprob.__file__).parent
EXCLUDED = {f"_core/persistence/{name}.py" for name in ("__init__", "format", "writer", "safety", "reader")}
KINDS = ("ValueError", "TypeError", "SpecError")
#: words that say what to do, or what is expected
ADVICE = re.compile(
    r"\b(must|expected|expects?|pass|use|give|set|check|needs?|choose|should|add|remove|drop|call|one of|"
    r"e\.g\.|try|rescale|divide|fix|install|run|create|rename|delete|merge|point|restore|select|provide|"
    r"valid|allowed|only|at least|at most|instead|upgrade|refit|reduce|increase|convert|save|wrap|"
    r"reshape|align|omit|keep|requires?|request|return|produce|leave|update|registered|list each|takes|build|"
    r"predict|back-transform|recompute|draw|name|load|compute|map|the options are|columns|which holds)\b",
    re.I,
)
#: (file, message start) of raise sites that re-raise a checked message with a prefix, and why
WRAPPERS = {
    ("cli.py", "--scheduler: "): "wraps check_scheduler_address's message",
    ("compare/spec/data.py", ".dim: "): "wraps the option type's own message",
    ("compare/spec/data.py", " ( ): "): "wraps load_csv's message, which says what to do",
    ("compare/spec/data.py", ": "): "prefixes a location to a SpecError raised by a checked site",
    ("compare/spec/parsing.py", ": "): "prefixes a location to a SpecError raised by a checked site",
    ("compare/spec/parsing.py", "the spec could not be read:  : "): "wraps the parser's message, prefixed",
    ("compare/spec/data.py", ".path: file   Paths are relative"): "problem is describe_unreadable_path's advice",
    ("compare/spec/parsing.py", "spec file   Specs live in"): "problem is describe_unreadable_path's advice",
    ("datasets/loaders.py", "could not be parsed as CSV: "): "wraps pandas' parser message (line and column)",
    ("calibrators/conformal/bayes/_inputs.py", "log_likelihood: the DataTree has no"): "appends _fix_ll(): "
    "'compute it with pm.compute_log_likelihood(idata)'",
    ("calibrators/grouping/mondrian.py", "group "): "prefixes the group to its own calibrator's checked message",
    ("calibrators/_weighted.py", "group "): "prefixes the group to its weighted calibrator's checked message",
    ("predictive/loo.py", "the tree has no "): "appends the caller's fix (the PyMC call that adds the group)",
}


def _constants(node) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _assigned_strings(func) -> dict[str, str]:
    """Names a function assigns string literals to (``hint = "Give ..."``), for interpolated advice."""
    out: dict[str, str] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = out.get(target.id, "") + " " + " ".join(_constants(node.value))
    return out


def raise_sites():
    """(file, line, kind, literal text) of every ValueError/TypeError/SpecError raised with a message."""
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in EXCLUDED:
            continue
        tree = ast.parse(path.read_text())
        funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for func in [tree, *funcs]:
            names = _assigned_strings(func) if func is not tree else {}
            body = (
                func.body
                if func is not tree
                else [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.ClassDef))]
            )
            for node in (n for stmt in body for n in ast.walk(stmt)):
                exc = node.exc if isinstance(node, ast.Raise) else None
                if not (isinstance(exc, ast.Call) and exc.args):
                    continue
                fn = exc.func
                kind = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
                if kind not in KINDS:
                    continue
                parts = _constants(exc.args[0])
                if not parts:
                    continue  # a variable re-raised: its own raise site is checked
                extra = [names[n.id] for n in ast.walk(exc.args[0]) if isinstance(n, ast.Name) and n.id in names]
                yield rel, node.lineno, kind, " ".join(parts), " ".join(parts + extra)


def test_every_message_says_what_to_do_or_what_is_expected():
    sites = {(rel, line): (text, full) for rel, line, _, text, full in raise_sites()}
    assert len(sites) > 300, "the scan found too few raise sites: is it reading the package?"
    wrappers_seen = set()
    bad = []
    for (rel, line), (text, full) in sorted(sites.items()):
        key = next((k for k in WRAPPERS if k[0] == rel and text.strip().startswith(k[1].strip())), None)
        if key is not None:
            wrappers_seen.add(key)
        elif not ADVICE.search(full):
            bad.append(f"{rel}:{line}: {text[:100]!r}")
    assert not bad, "messages that state the problem but not the fix:\n" + "\n".join(bad)
    assert wrappers_seen == set(WRAPPERS), f"stale WRAPPERS entries: {set(WRAPPERS) - wrappers_seen}"


def test_the_scan_flags_a_message_without_advice():
    """The check can fail: a bare statement of the problem is flagged, one with advice is not."""
    assert not ADVICE.search("the file is broken.")
    assert ADVICE.search("the file is broken; pass another one.")
