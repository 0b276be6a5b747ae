"""By how much two sets of run outputs differ, table by table and column by column.

``bench/table_digests.py --keep A`` on one commit and ``--keep B`` on another keep every bundled
scenario's outputs; this prints, for each scenario and table present in both, the largest absolute
difference of every numeric column (``identical`` when the column is equal bit for bit) and any
column or row count that differs, then each scenario's summary figures that differ. Asserts nothing::

    python bench/table_compare.py /tmp/tables_before /tmp/tables_after
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd


def compare_table(a: Path, b: Path) -> list[str]:
    """Lines describing how table folders ``a`` and ``b`` differ (empty when identical)."""
    left, right = pd.read_parquet(a), pd.read_parquet(b)
    if list(left.columns) != list(right.columns):
        return [f"columns differ: {sorted(set(left.columns) ^ set(right.columns))}"]
    if len(left) != len(right):
        return [f"rows {len(left)} != {len(right)}"]
    lines = []
    for col in left.columns:
        x, y = left[col].to_numpy(), right[col].to_numpy()
        if x.dtype.kind in "fiub" and y.dtype.kind in "fiub":
            xf, yf = x.astype(float), y.astype(float)
            if np.array_equal(xf, yf, equal_nan=True):
                continue
            diff = np.abs(xf - yf)
            lines.append(f"{col}: max |diff| {np.nanmax(diff):.3g} ({int(np.count_nonzero(diff > 0))} rows)")
        elif not (x == y).all():
            lines.append(f"{col}: {int((x != y).sum())} values differ")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    for run in sorted(p for p in args.before.iterdir() if (args.after / p.name).is_dir()):
        other = args.after / run.name
        for table in sorted(t for t in run.iterdir() if t.is_dir() and any(t.glob("part-*.parquet"))):
            if (other / table.name).is_dir():
                for line in compare_table(table, other / table.name):
                    print(f"{run.name} {table.name} {line}")
            else:
                print(f"{run.name} {table.name}: missing after")
        before = json.loads((run / "summary.json").read_text())
        after = json.loads((other / "summary.json").read_text())
        for key in sorted(set(before) & set(after) - {"wall_time_s", "scenario_file", "openg2g_version"}):
            if before[key] != after[key]:
                print(f"{run.name} summary {key}: {before[key]!r} -> {after[key]!r}")


if __name__ == "__main__":
    main()
