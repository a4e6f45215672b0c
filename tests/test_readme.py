"""The README's example runs as written (it is the first code a user copies)."""

import re

from tests.support.paths import REPO_ROOT

README = REPO_ROOT / "README.md"


def test_readme_python_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python example"
    namespace: dict = {}
    exec(compile(blocks[0], str(README), "exec"), namespace)
    pred = namespace["pred"]
    assert {"obs", "level"} <= set(pred.dims)
    out = capsys.readouterr().out
    assert "coverage" in out and "lower" in out


def test_readme_names_the_two_commands_and_ci_runs_the_test_one():
    text = README.read_text()
    assert "make run" in text and "make test" in text
    ci = (README.parent / ".ci" / "run").read_text()
    assert "make test" in ci
