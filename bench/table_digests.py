"""Digest of every bundled scenario's output tables, to check that a refactor changes nothing.

Runs each bundled run scenario (``scenarios/*.yaml`` that are runs, not sweeps, studies or benchmark suites) through
the CLI with every table on (``outputs.voltages: all``) and plots off, reads each table back, and
prints one SHA-256 per table over its column names, types and values (the bytes of the parquet
files also carry writer metadata, so the data is hashed, not the files), plus the summary
figures that do not depend on the wall clock. Two runs of this script on two commits print the
same lines exactly when every table is bit-identical::

    python bench/table_digests.py > before.txt
    # ... change the code ...
    python bench/table_digests.py > after.txt && diff before.txt after.txt

``--duration-s`` shortens every run (a quick check while working; the full check runs each
scenario for its own duration). ``--only`` picks scenarios by name. ``--root`` runs another checkout's
code (a git worktree of an older commit); ``--keep DIR`` keeps every run's outputs in ``DIR/<name>``
for ``bench/table_compare.py``, which says by how much two sets differ when they are not identical.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
_WALL_CLOCK_KEYS = {"wall_time_s", "scenario_file", "openg2g_version"}


def run_scenarios() -> list[str]:
    """Names of the bundled scenarios that are single runs (sweeps and studies are not)."""
    names = []
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        if not path.name.startswith(("sweep_", "study_", "benchmark_")):
            names.append(path.stem)
    return names


def table_digest(folder: Path) -> str:
    """SHA-256 over a table's schema and values, parts in order."""
    digest = hashlib.sha256()
    for part in sorted(folder.glob("part-*.parquet")):
        table = pq.read_table(part)
        digest.update(str(table.schema).encode())
        for column in table.columns:
            if pa.types.is_integer(column.type) or pa.types.is_floating(column.type):
                digest.update(column.to_numpy().tobytes())
            else:
                digest.update(json.dumps(column.to_pylist(), default=str).encode())
    return digest.hexdigest()


def digest_run(name: str, duration_s: float | None, root: Path = ROOT, keep: Path | None = None) -> list[str]:
    """Run one scenario (with the code of checkout ``root``) and return its lines of digests."""
    with tempfile.TemporaryDirectory() as tmp:
        out = keep / name if keep is not None else Path(tmp) / "run"
        cmd = [sys.executable, "-m", "openg2g", "run", name, "--out", str(out), "--no-progress"]
        cmd += ["--set", "outputs.plots=false", "--set", "outputs.voltages=all"]
        if duration_s is not None:
            cmd += ["--set", f"duration_s={duration_s}"]
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=root)
        if proc.returncode != 0:
            return [f"{name} FAILED (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}"]
        lines = []
        for folder in sorted(p for p in out.iterdir() if p.is_dir() and any(p.glob("part-*.parquet"))):
            lines.append(f"{name} {folder.name} {table_digest(folder)}")
        summary = json.loads((out / "summary.json").read_text())
        figures = {k: v for k, v in summary.items() if k not in _WALL_CLOCK_KEYS}
        lines.append(f"{name} summary {hashlib.sha256(json.dumps(figures, sort_keys=True).encode()).hexdigest()}")
        return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-s", type=float, default=None, help="shorten every run to this many seconds")
    parser.add_argument("--only", nargs="*", default=None, help="scenario names (default: every bundled run)")
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout whose code runs (default: this one)")
    parser.add_argument("--keep", type=Path, default=None, help="keep each run's outputs in KEEP/<name>")
    args = parser.parse_args()
    for name in args.only or run_scenarios():
        for line in digest_run(name, args.duration_s, args.root, args.keep):
            print(line, flush=True)


if __name__ == "__main__":
    main()
