"""``[split] stratify = "<column>"``: validation, and each group's calibration rows in a run.

Reference: each group's part sizes are the largest-remainder integers closest to
n_k * fractions (the split rule applied to the group alone), counted from the raw column.
"""

from __future__ import annotations

import numpy as np
import pytest

import calibprob
from calibprob.compare import parse_spec
from calibprob.compare.spec import SpecError
from calibprob.compare.tasks import _prepare
from calibprob.datasets.splits import _allocate

FR = {"train": 0.6, "calibrate": 0.2, "test": 0.2}


def _spec(dataset, split=None):
    return {
        "name": "s",
        "datasets": [dataset],
        "split": split or {**FR, "stratify": "origin"},
        "base": {"kind": "ols"},
        "methods": {"cps": {"kind": "conformal-predictive"}},
        "repetitions": 1,
    }


@pytest.mark.parametrize(
    ("dataset", "split", "match"),
    [
        (
            "auto_mpg",
            {**FR, "stratify": "maker"},
            r"datasets\[0\]: split.stratify = 'maker' is not a column of the data\..*columns: cylinders",
        ),
        ("auto_mpg", {**FR, "stratify": "mpg"}, r"split.stratify = 'mpg' is the target\..*Name a feature column"),
        ("auto_mpg", {**FR, "stratify": 3}, r"split.stratify must be a string"),
        ({"name": "f", "function": "branin", "n": 60}, None, r"applies to bundled and CSV entries only"),
    ],
)
def test_stratify_column_is_validated(dataset, split, match):
    with pytest.raises(SpecError, match=match):
        parse_spec(_spec(dataset, split))


def test_stratify_in_a_csv_entry(tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("y,x,soil\n" + "".join(f"{i % 7},{i},{'clay' if i % 3 else 'sand'}\n" for i in range(60)))
    entry = {"name": "mine", "path": str(csv), "target": "y", "exclude": ["soil"]}
    with pytest.raises(SpecError, match=r"split.stratify = 'ground' is not a column of the data"):
        parse_spec(_spec(entry, {**FR, "stratify": "ground"}))
    spec = parse_spec({**_spec(entry, {**FR, "stratify": "soil"}), "standardize": False})
    _, arrays = _prepare(spec, "mine", 0)
    soil = np.where(np.arange(60) % 3, "clay", "sand")
    for j, part in enumerate(("train", "calibrate", "test")):
        rows = arrays[part][0][:, 0].astype(int)  # x is the row number (no standardisation)
        got = dict(zip(*np.unique(soil[rows], return_counts=True)))
        # clay 40 rows -> 24/8/8, sand 20 -> 12/4/4
        assert got == {
            s: int(_allocate(int((soil == s).sum()), np.array([0.6, 0.2, 0.2]))[j]) for s in ("clay", "sand")
        }


@pytest.mark.parametrize("groups", ["origin", None])
def test_every_group_gets_calibration_rows_in_a_spec_run(groups):
    entry = {"name": "auto_mpg", **({"groups": groups} if groups else {})}
    spec = parse_spec(_spec(entry))
    assert spec.split["stratify"] == "origin"
    _, arrays = _prepare(spec, "auto_mpg", 0)
    origin = calibprob.datasets.load_dataset("auto_mpg", groups="origin")["group"].values
    counts = {k: _allocate(int((origin == k).sum()), np.array([0.6, 0.2, 0.2])) for k in np.unique(origin)}
    if groups:
        for j, part in enumerate(("train", "calibrate", "test")):
            got = dict(zip(*np.unique(arrays["groups"][part], return_counts=True)))
            assert got == {k: int(c[j]) for k, c in counts.items()}
    for j, part in enumerate(("train", "calibrate", "test")):
        assert arrays[part][1].size == sum(int(c[j]) for c in counts.values())
    scores = calibprob.compare.run(spec).to_dataset()
    assert not str(scores["error"].values.ravel()[0])
