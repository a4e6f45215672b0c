"""Build ``fannjiang2022_fluorescence.csv``, the extract ``models/fannjiang2022-fluorescence.toml`` reads.

From the two files of ``../shared/data`` (``poelwijk2019_fluorescence.csv`` and
``poelwijk2019_noise_se.csv``, clarafy/conformal-for-design @ ec484b5, MIT; Poelwijk et al. 2019, CC BY 4.0):
the 13 sites of each of the 2^13 genotypes as 0/1 columns ``s1``..``s13`` (``s1`` the first character of
``binary_genotype``), the per-sequence noise SDs ``red_se``, ``blue_se`` and the brightnesses
``brightness_red``, ``brightness_blue`` (values unchanged, full double precision), rows in the file's
order. Run from the repository root::

    python models/data/make_fluorescence_extract.py --data ../shared/data
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
OUT = HERE / "fannjiang2022_fluorescence.csv"


def extract(data: Path) -> pd.DataFrame:
    """The extract as a DataFrame (checked equal to the source values)."""
    df = pd.read_csv(data / "poelwijk2019_fluorescence.csv", dtype={"binary_genotype": str})
    se = pd.read_csv(data / "poelwijk2019_noise_se.csv")
    bits = np.array([[int(b) for b in s.strip("'")] for s in df["binary_genotype"]])
    out = pd.DataFrame(bits, columns=[f"s{k + 1}" for k in range(bits.shape[1])])
    out["red_se"] = se["red_se_n"].to_numpy(float)
    out["blue_se"] = se["blue_se_n"].to_numpy(float)
    out["brightness_red"] = df["brightness_red"].to_numpy(float)
    out["brightness_blue"] = df["brightness_blue"].to_numpy(float)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(HERE.parents[1].parent / "shared" / "data"))
    args = ap.parse_args(argv)
    out = extract(Path(args.data))
    out.to_csv(OUT, index=False)  # shortest repr of each double: read back exactly
    back = pd.read_csv(OUT)
    assert all(np.array_equal(back[c].to_numpy(), out[c].to_numpy()) for c in out.columns), "not equal on re-reading"
    print(f"wrote {OUT} ({len(out)} rows)")


if __name__ == "__main__":
    main()
