"""Read the JUnit XML of a seed sweep (``make test-seeds``) and print, per seeded test, the seeds run, the ones that
failed, and the range of every statistic the test recorded with ``record_property`` (its worst value beside its
margin is what a test's comment quotes).

``python -m tests.support.sweep_summary seed-sweep.xml``
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict


def summarise(path: str) -> str:
    """One block per test: ``name  seeds n  failed [ids]`` then ``statistic  min .. max``."""
    seeds: dict[str, list[str]] = defaultdict(list)
    failed: dict[str, list[str]] = defaultdict(list)
    stats: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for case in ET.parse(path).getroot().iter("testcase"):
        m = re.fullmatch(r"(.*)\[(?:.*-)?(sweep\d+)(?:-.*)?\]", case.get("name", ""))
        if m is None:
            continue
        name = f"{case.get('classname')}::{m.group(1)}"
        seeds[name].append(m.group(2))
        if case.find("failure") is not None or case.find("error") is not None:
            failed[name].append(m.group(2))
        for prop in case.iter("property"):
            try:
                stats[name][prop.get("name", "")].append(float(prop.get("value", "nan")))
            except ValueError:
                continue
    lines = []
    for name in sorted(seeds):
        lines.append(f"{name}  seeds {len(seeds[name])}  failed {failed[name] or 'none'}")
        for stat, values in sorted(stats[name].items()):
            lines.append(f"    {stat:28s} {min(values):.4g} .. {max(values):.4g}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summarise(sys.argv[1] if len(sys.argv) > 1 else "seed-sweep.xml"))
