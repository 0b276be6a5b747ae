"""Peak memory and time of reading a large run back: its PNG figures and the app's views.

A utility feeder's run with every voltage recorded holds hundreds of millions of
``grid_voltages`` rows; every reader must work from streamed aggregates
(:mod:`openg2g.plot.extremes`) or one grid step's rows, never the whole table. This script
measures each reader in a process of its own and prints its wall time (interpreter start
included) and peak resident memory (GNU time's maximum resident set size):

1. ``openg2g plot RUN``: every figure of the run, redrawn;
2. ``app views``: what ``openg2g app`` computes for the run (:class:`openg2g.app.data.RunStore`):
   the run's time panels (its overview) and the feeder map and voltage profile at the worst
   instant and at five other times (comparing runs reads their ``grid`` and ``models`` tables and
   summaries, never ``grid_voltages``).

The run (``--prepare`` makes it): the bundled ``ieee8500_ofo`` (two campuses on the IEEE 8500-node
feeder, its 3,817 primary bus-phases monitored) for a whole day at 1 s steps (``periods.grid_s``
and ``datacenter_s`` 1 s, ``control_s`` 10 s), every voltage recorded (``outputs.voltages=all``:
330 million rows, about 3 GB), PNGs off. On this 2-core machine the day took about 5 minutes.
``--run DIR`` measures another run folder instead (a ckt5 hour, say).

Run: ``python bench/bench_plot_memory.py --prepare`` once, then ``python bench/bench_plot_memory.py``.
Asserts nothing; prints one row per reader.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DAY_RUN = ROOT / "runs" / "bench_plot_memory" / "ieee8500_day"
DAY_SETTINGS = (
    "duration_s=86400",
    "periods.grid_s=1",
    "periods.datacenter_s=1",
    "periods.control_s=10",
    "outputs.voltages=all",
    "outputs.plots=false",
)

_APP_VIEWS = """
import sys
from pathlib import Path
from openg2g.app.data import RunStore, map_at
from openg2g.plot.profile import worst_instant

run_dir = Path(sys.argv[1])
store = RunStore(run_dir.parent)
run = store.get(run_dir.name)
overview = store.overview(run)
times = overview.grid_times_s
worst = worst_instant(run.table("grid"), run.v_min_pu, run.v_max_pu)
positions = store.positions(run)
for t_s in [worst, *(times[int(k * (len(times) - 1) / 4)] for k in range(5))]:
    map_at(run, float(t_s), positions, times=times)
"""


def _measured(command: list[str]) -> dict[str, float]:
    """Wall time and the peak resident memory of ``command`` run as a child process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "%M", *command], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    peak_kib = float(done.stderr.strip().splitlines()[-1])
    return {"wall_s": time.perf_counter() - before, "peak_mib": peak_kib / 1024}


def _rows(run: Path) -> int:
    """Rows of the run's ``grid_voltages`` table (from the parts' footers)."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(p).metadata.num_rows for p in (run / "grid_voltages").glob("part-*.parquet"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=DAY_RUN, help="run folder to read (default: the ieee8500 day)")
    parser.add_argument("--prepare", action="store_true", help="run the ieee8500 day into --run first")
    args = parser.parse_args()
    openg2g = [sys.executable, "-m", "openg2g"]
    if args.prepare:
        setting = [arg for s in DAY_SETTINGS for arg in ("--set", s)]
        subprocess.run([*openg2g, "run", "ieee8500_ofo", *setting, "--out", str(args.run), "--overwrite"], check=True)
    run = args.run.resolve()
    summary = json.loads((run / "summary.json").read_text())
    size_gb = sum(p.stat().st_size for p in (run / "grid_voltages").glob("part-*.parquet")) / 1e9
    print(f"run: {run} ({summary['duration_s']:g} s, {_rows(run):,} grid_voltages rows, {size_gb:.1f} GB)")
    plot = _measured([*openg2g, "plot", str(run)])
    views = _measured([sys.executable, "-c", _APP_VIEWS, str(run)])
    print(f"{'reader':<12} {'wall (s)':>9} {'peak (MiB)':>11}")
    for name, figures in (("openg2g plot", plot), ("app views", views)):
        print(f"{name:<12} {figures['wall_s']:>9.1f} {figures['peak_mib']:>11.0f}")


if __name__ == "__main__":
    main()
