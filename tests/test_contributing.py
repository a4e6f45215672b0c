"""CONTRIBUTING.md's layout section names exactly the top-level modules and packages of ``calibprob/``.

The section is one code block under "## The layout in one picture, in words": a ``calibprob/`` line, then one
line per top-level module (``name.py``) or package (``name/``), indented two spaces, with its description;
continuation lines are indented further. A module added, moved or removed without its line fails here.
"""

from __future__ import annotations

import re

import pytest

from tests.support.paths import PACKAGE, REPO_ROOT

HEADING = "## The layout in one picture, in words"


def layout_entries(text: str) -> list[str]:
    """The names listed in the layout block of ``text`` (CONTRIBUTING.md), in order."""
    section = text[text.index(HEADING) :]
    block = re.search(r"```\ncalibprob/\n(.*?)```", section, flags=re.S)
    if block is None:
        raise ValueError(f"no ``` block starting with 'calibprob/' under {HEADING!r}")
    return [m.group(1) for m in re.finditer(r"^  (\S+)(?:\s|$)", block.group(1), flags=re.M)]


def package_entries(root=PACKAGE) -> set[str]:
    """The top-level modules (``x.py``, not ``__init__.py``) and packages (``x/`` with ``__init__.py``) of ``root``."""
    modules = {p.name for p in root.glob("*.py") if p.name != "__init__.py"}
    packages = {f"{p.name}/" for p in root.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    return modules | packages


def test_the_layout_section_matches_the_package():
    listed = layout_entries((REPO_ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8"))
    assert len(listed) == len(set(listed)), f"listed twice: {sorted({n for n in listed if listed.count(n) > 1})}"
    present = package_entries()
    assert not set(listed) - present, f"named in CONTRIBUTING.md but not in calibprob/: {sorted(set(listed) - present)}"
    assert not present - set(listed), (
        f"in calibprob/ but not in CONTRIBUTING.md's layout: {sorted(present - set(listed))}"
    )


def test_the_parser_reads_one_line_per_entry_and_skips_continuations(tmp_path):
    text = f"{HEADING}\n\n```\ncalibprob/\n  a.py     one\n           more on a\n  b/       two\n  c.py\n```\n"
    assert layout_entries(text) == ["a.py", "b/", "c.py"]
    with pytest.raises(ValueError, match="no ``` block starting with 'calibprob/'"):
        layout_entries(f"{HEADING}\n\nnothing\n")
    (tmp_path / "m.py").write_text("")
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "data").mkdir()  # not a package
    assert package_entries(tmp_path) == {"m.py", "pkg/"}
