"""The synthetic 20 000-row regression set of the faults benchmark (issue 28 item 4).

Eight features (uniform on [0, 1]), a smooth nonlinear mean and heteroscedastic noise, seeded,
written as a CSV. With the 0.6 / 0.2 / 0.2 split of ``benchmarks/faults-12k.toml`` the base is
fitted on 12 000 training rows (the size at which issue 28's run lost every method).

Run::

    python benchmarks/make_faults_data.py [--out benchmarks/data/faults-12k.csv] [--rows 20000]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def make(rows: int, seed: int = 2028) -> np.ndarray:
    """``rows`` x 9 array: eight features and the target ``y`` (last column)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(rows, 8))
    mean = np.sin(2 * np.pi * X[:, 0]) + 2 * (X[:, 1] - 0.5) ** 2 + X[:, 2] * X[:, 3] + 0.5 * np.cos(3 * X[:, 4])
    noise = (0.1 + 0.3 * X[:, 5]) * rng.standard_normal(rows)  # heteroscedastic: GP calibration matters
    return np.column_stack([X, mean + noise])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(Path(__file__).parent / "data" / "faults-12k.csv"))
    parser.add_argument("--rows", type=int, default=20_000)
    args = parser.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    data = make(args.rows)
    header = ",".join([*(f"x{i}" for i in range(8)), "y"])
    np.savetxt(out, data, delimiter=",", header=header, comments="", fmt="%.8g")
    print(f"wrote {out}: {data.shape[0]} rows, {data.shape[1] - 1} features and y")


if __name__ == "__main__":
    main()
