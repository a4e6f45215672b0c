"""Build the two ELEC2 extracts the issue-38 specs read, from a local copy of ``elec2.csv``.

ELEC2's licence is not established (``../shared/data/README.md``: neither source repository has a
licence file and the data state none), so calibprob does not ship it, not even these 5 469 rows.
The specs ``models/barber2023-nexcp-elec2.toml`` and ``models/angelopoulos2023-pid-elec2.toml`` read
the files this script writes next to it::

    python models/data/make_elec2_extracts.py --data ../shared/data

``elec2.csv`` is qc-zhao/McGill_BIOS_694_Project_NexCP ``data/electricity-normalized.csv`` @ ab8cdf8b
(the same git blob as hamrel-cxu/SPCI-code ``Data/electricity-normalized.csv``; OpenML 151). The
files are rewritten only when their content would change (a run's data fingerprint stays the same).
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
NEXCP = HERE / "barber2023_elec2_nexcp.csv"
PID = HERE / "angelopoulos2023_elec2_nswdemand.csv"


def _with_time(e: pd.DataFrame) -> pd.DataFrame:
    # the file's `date` column is normalised: each row's time is 1996-05-07 00:00 + 30 min x its row index
    # (45 312 half-hours, the conformal-PID authors' loader's assumption)
    stamp = pd.Timestamp("1996-05-07") + pd.to_timedelta(np.arange(len(e)) * 30, unit="min")
    e = e.copy()
    e.insert(0, "time", stamp.strftime("%Y-%m-%d %H:%M"))
    return e


def nexcp_extract(e: pd.DataFrame) -> pd.DataFrame:
    """Barber et al.'s (2023) subset: rows from index 17760 on, half-hours strictly between rows 17 and 24's."""
    df = _with_time(e).iloc[17760:].reset_index(drop=True)
    period = df["period"].to_numpy()
    keep = (period > period[17]) & (period < period[24])
    return df.loc[keep, ["time", "nswprice", "nswdemand", "vicprice", "vicdemand", "transfer"]]


def pid_extract(e: pd.DataFrame) -> pd.DataFrame:
    """The conformal-PID authors' series: ``nswdemand`` of the first 2000 half-hours, each with its three lags."""
    e = _with_time(e)
    y = e["nswdemand"].to_numpy(float)[:2000]
    return pd.DataFrame(
        {"time": e["time"][3:2000].values, "lag1": y[2:1999], "lag2": y[1:1998], "lag3": y[0:1997], "nswdemand": y[3:2000]}
    )


def _write(df: pd.DataFrame, path: Path) -> bool:
    buf = io.StringIO()
    df.to_csv(buf, index=False)
    text = buf.getvalue()
    if path.exists() and path.read_text() == text:
        return False
    path.write_text(text)
    return True


def make(data: Path) -> list[Path]:
    """Write both extracts from ``data / "elec2.csv"``; returns the files written (unchanged ones are not)."""
    source = Path(data) / "elec2.csv"
    if not source.exists():
        raise FileNotFoundError(
            f"{source} does not exist. Pass --data the folder holding ELEC2's elec2.csv (in this project, ../shared/data)."
        )
    e = pd.read_csv(source)
    return [p for df, p in ((nexcp_extract(e), NEXCP), (pid_extract(e), PID)) if _write(df, p)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="folder holding elec2.csv, e.g. ../shared/data")
    for path in make(parser.parse_args().data):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
