"""How long a benchmark suite will take, from short samples of its runs.

For the first case of each group, every run of the suite (baseline and each controller) is run
in this process for ``--sample-s`` simulated seconds (tables written, plots off, as in the suite)
and its CPU time measured (one BLAS thread, as in a sweep worker). Each run of the suite is then
costed at its group's and controller's CPU seconds per simulated second times its duration, plus
``--startup-s`` per run (process start, imports, loading; see bench_startup.py). The CPU time is
printed, and the predicted wall time with N workers on N free cores. CPU time is less inflated
than wall time on a loaded machine, but it is still inflated: report the load average with it.

Usage: python bench/bench_benchmark_suite.py [scenarios/benchmark_ieee.yaml] [--sample-s 30] [--workers 2]
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from threadpoolctl import threadpool_limits

from openg2g.benchmark.spec import controllers_override, load_suite
from openg2g.scenario.loader import load_scenario
from openg2g.scenario.run import run_scenario


def _cpu_per_sim_s(scenario, overrides: list[str], sample_s: float) -> float:
    loaded = load_scenario(scenario, ["outputs.plots=false", *overrides, f"duration_s={sample_s}"])
    with tempfile.TemporaryDirectory() as out:  # the suite's runs write their tables too
        t0 = time.process_time()
        run_scenario(loaded, Path(out))
        return (time.process_time() - t0) / sample_s


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("suite", nargs="?", default="scenarios/benchmark_ieee.yaml")
    p.add_argument("--sample-s", type=float, default=30.0, help="simulated seconds per sample run")
    p.add_argument("--startup-s", type=float, default=1.2, help="CPU s per run outside the simulation")
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    suite = load_suite(args.suite, check=False)
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    rates: dict[tuple[str, str], float] = {}
    warm: set[str] = set()
    total_cpu_s = 0.0
    with threadpool_limits(limits=1):
        for case in suite.cases:
            duration_s = float(load_scenario(case.scenario, case.overrides).scenario.duration_s)
            for name, block in suite.controllers[case.case_id].items():
                key = (case.group, name)
                if key not in rates:
                    overrides = [*case.overrides, controllers_override(block)]
                    if name not in warm:  # imports (torch for a policy) and caches, paid once per process
                        _cpu_per_sim_s(case.scenario, overrides, 1.0)
                        warm.add(name)
                    rates[key] = _cpu_per_sim_s(case.scenario, overrides, args.sample_s)
                    print(f"{case.group:22s} {name:12s} {rates[key] * 1000:8.1f} ms CPU per simulated s", flush=True)
                total_cpu_s += rates[key] * duration_s + args.startup_s
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    print(
        f"predicted: {total_cpu_s / 60:.1f} CPU min for {suite.n_runs()} runs; "
        f"{total_cpu_s / 60 / args.workers:.1f} min wall with {args.workers} workers on free cores"
    )


if __name__ == "__main__":
    main()
