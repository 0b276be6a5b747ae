"""Engine speed: overhead per step with trivial components, and a full bundled run split by component.

The bundled run is timed twice: without outputs, and with every table on (``outputs.voltages:
all``) written to a temporary folder, so the cost of recording and parquet writing shows as the
difference. Within one process the second run can come out slower in every part (the first
run's garbage, warm caches of the other kind), so ``--outputs off`` or ``--outputs on`` times one of
them alone, for pairs of fresh processes (e.g. under ``farm-bench --vs``).
Usage: python bench/bench_engine.py [--scenario ieee13_ofo] [--duration-s 3600] [--outputs both|off|on]
Prints figures (wall and CPU seconds of the process); asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from openg2g.engine.simulation import Simulation
from openg2g.scenario.build import build_components
from openg2g.scenario.loader import load_scenario

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the analytic toys live with the tests
from tests.engine.toys import KilowattSite, TwoBusGrid, make_loaded


def _timed(obj, method: str, bucket: dict, key: str) -> None:
    """Wrap obj.method so its wall time accumulates in bucket[key]."""
    inner = getattr(obj, method)

    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            bucket[key] += time.perf_counter() - t0

    setattr(obj, method, wrapper)


def engine_overhead(duration_s: int) -> None:
    log: list = []
    loaded = make_loaded(duration_s=duration_s, outputs={"plots": False})
    sim = Simulation.from_scenario(loaded, components=([KilowattSite("dc", log)], TwoBusGrid(log), []))
    t0 = time.perf_counter()
    sim.run()
    wall = time.perf_counter() - t0
    steps = duration_s * 10
    print(
        f"engine with trivial components: {steps} DC + {steps} grid steps in {wall:.2f} s "
        f"= {wall / steps * 1e6:.1f} us per (DC + grid) step"
    )


def full_run(name: str, duration_s: int, out_dir: str | None) -> float:
    """Run ``name`` for ``duration_s`` with outputs in ``out_dir`` (none if ``None``); returns wall s."""
    overrides = [f"duration_s={duration_s}", "outputs.plots=false", "outputs.voltages=all", "outputs.branches=all"]
    loaded = load_scenario(name, overrides)
    sites, grid, controllers = build_components(loaded)
    bucket: dict[str, float] = defaultdict(float)
    for site in sites:
        _timed(site, "step_block", bucket, "datacenter step_block")
    _timed(grid, "solve", bucket, "grid solve")
    _timed(grid, "solve_batch", bucket, "grid solve_batch")
    for c in controllers:
        _timed(c, "step", bucket, f"controller {c.name}")
    sim = Simulation.from_scenario(loaded, Path(out_dir) if out_dir else None, components=(sites, grid, controllers))
    t0, c0 = time.perf_counter(), time.process_time()
    summary = sim.run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(
        f"{name}: {duration_s} simulated s in {wall:.2f} s wall, {cpu:.2f} s CPU "
        f"(outputs {'on, all tables' if out_dir else 'off'})"
    )
    for key, seconds in sorted(bucket.items(), key=lambda kv: -kv[1]):
        print(f"  {key:<28s} {seconds:8.2f} s")
    print(f"  {'engine + recording':<28s} {wall - sum(bucket.values()):8.2f} s")
    print(f"  violation integral {summary['violation_integral_pu_s']:.4f} pu.s")
    return wall


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", default="ieee13_ofo")
    parser.add_argument("--duration-s", type=int, default=3600)
    parser.add_argument("--outputs", choices=["both", "off", "on"], default="both")
    args = parser.parse_args()
    if args.outputs == "both":
        engine_overhead(600)
    if args.outputs != "on":
        without = full_run(args.scenario, args.duration_s, None)
    if args.outputs != "off":
        with tempfile.TemporaryDirectory() as out:
            with_outputs = full_run(args.scenario, args.duration_s, out)
    if args.outputs == "both":
        print(
            f"outputs (recording + parquet): {with_outputs - without:+.2f} s, "
            f"{with_outputs / without - 1:+.1%} of the run"
        )
