"""Start-up time of ``openg2g run``: everything before the first simulation step, split by phase.

Each sample is a fresh interpreter (a child process of this script), so imports are cold in the
sense that matters (no module cached in ``sys.modules``; the OS file cache is warm after the first
sample). A sample times, in the order ``openg2g run`` does them:

1. ``imports``: ``openg2g.cli.main`` and the command-line parser with every sub-command, then the
   modules the ``run`` command loads (scenario loader, engine);
2. ``load``: ``load_scenario`` (read, merge ``--set``, validate);
3. ``build``: the sites, the grid and the controllers (:class:`Simulation` constructor);
4. ``reset``: ``Simulation.start`` (site, grid and controller resets, output writers), with the
   controllers' own ``reset`` (curve fits of OFO/MPC) also shown on its own;

and then, apart from the start-up, ``first 1 s``: the first simulated second (the first steps of
every component, with whatever they import on first use).

Python's bytecode caches are used as an installed package has them: the children run with
``PYTHONDONTWRITEBYTECODE`` removed from their environment, after one priming process has written
the caches (with it set and no caches, as on this project's CI machine, every start compiles each
openg2g module again, some 0.3 s more).

Then whole ``openg2g`` processes (``python -m openg2g``, this checkout's code), each timed with
its own resource usage (``os.wait4``: wall, CPU, peak resident memory):

- the light commands ``--help``, ``schema`` and ``validate SCENARIO``, with the heavy packages
  (scipy, numba, matplotlib, pandapower, torch, pandas, pyarrow) each leaves in ``sys.modules``;
- ``run SCENARIO`` for 60 simulated seconds, plots off: first with an empty numba cache (a fresh
  ``NUMBA_CACHE_DIR``, as the first run after an install, which compiles the kernels), then warm
  (the same cache, as every later run).

Run: ``python bench/bench_startup.py [--scenario ieee13_ofo] [--repeat 5]``. Prints the median and
the minimum of each phase over the samples (wall seconds, and the process's CPU seconds in total,
which a busy machine inflates less), and the best of ``--repeat`` processes for each command;
asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PHASES = ("imports", "load", "build", "reset", "  of which controllers", "total", "total CPU", "first 1 s")
HEAVY = ("scipy", "numba", "llvmlite", "matplotlib", "pandapower", "torch", "pandas", "pyarrow")
"""Packages whose import the light commands should not pay for (reported when they do)."""
REPO = Path(__file__).resolve().parents[1]


def sample(scenario: str) -> dict[str, float]:
    """One start-up in this process; seconds per phase. Must be the first openg2g use of the process."""
    cpu = time.process_time()
    t_imp = time.perf_counter()
    from openg2g.cli.main import build_parser

    build_parser()
    from openg2g.engine.simulation import Simulation
    from openg2g.scenario.loader import load_scenario

    t_load = time.perf_counter()
    loaded = load_scenario(scenario, ["outputs.plots=false"])
    t_build = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        sim = Simulation.from_scenario(loaded, Path(out))
        t_reset = time.perf_counter()
        controller_s = 0.0
        for sched in sim._controllers:
            ctrl = sched.controller
            reset = ctrl.reset

            def timed_reset(*args, _reset=reset, **kwargs):  # type: ignore[no-untyped-def]
                nonlocal controller_s
                start = time.perf_counter()
                _reset(*args, **kwargs)
                controller_s += time.perf_counter() - start

            ctrl.reset = timed_reset  # type: ignore[method-assign]
        sim.start()
        t_end = time.perf_counter()
        cpu_end = time.process_time()
        sim.run_until(1)
        t_first = time.perf_counter()
    return {
        "imports": t_load - t_imp,
        "load": t_build - t_load,
        "build": t_reset - t_build,
        "reset": t_end - t_reset,
        "  of which controllers": controller_s,
        "total": t_end - t_imp,
        "total CPU": cpu_end - cpu,
        "first 1 s": t_first - t_end,
    }


def heavy_after(argv: list[str]) -> list[str]:
    """The :data:`HEAVY` packages imported by ``openg2g ARGV`` run in this process (its output dropped)."""
    from openg2g.cli.main import main as openg2g

    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):  # --help exits
        openg2g(argv)
    return sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY))


def process(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """``python -m openg2g ARGV`` in a fresh process: wall and CPU seconds, peak resident MB."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "openg2g", *argv], cwd=REPO, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, for its resource usage
    if child.returncode:
        raise SystemExit(f"openg2g {' '.join(argv)} exited with status {child.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # ru_maxrss: kB on Linux


def commands(scenario: str, repeat: int, env: dict[str, str]) -> None:
    """Print the light commands' and a 60 s run's whole-process figures (best of ``repeat``)."""
    light = [["--help"], ["schema"], ["validate", scenario]]
    print(f"\nwhole processes, best of {repeat} (wall s, CPU s, peak MB; heavy packages imported)")
    for argv in light:
        best = min(process(argv, env) for _ in range(repeat))
        out = subprocess.run(
            [sys.executable, __file__, "--heavy", *argv], check=True, capture_output=True, text=True, env=env
        )
        print(f"{'openg2g ' + ' '.join(argv):<34}{best[0]:>7.2f}{best[1]:>7.2f}{best[2]:>7.0f}  {out.stdout.strip()}")
    with tempfile.TemporaryDirectory() as tmp:
        run = ["run", scenario, "--set", "duration_s=60", "--set", "outputs.plots=false", "--no-progress", "--out"]
        cached = {**env, "NUMBA_CACHE_DIR": str(Path(tmp) / "numba")}  # empty: the kernels compile once
        first = process([*run, str(Path(tmp) / "first")], cached)
        warm = min(process([*run, str(Path(tmp) / f"warm{i}")], cached) for i in range(repeat))
    for label, (wall, cpu, peak) in (("first (empty numba cache)", first), ("warm", warm)):
        print(f"{'run 60 s, ' + label:<34}{wall:>7.2f}{cpu:>7.2f}{peak:>7.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="ieee13_ofo", help="bundled scenario name or file (default ieee13_ofo)")
    parser.add_argument("--repeat", type=int, default=5, help="fresh processes to sample (default 5)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--heavy", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(sample(args.scenario)))
        return
    if args.heavy is not None:
        print(" ".join(heavy_after(args.heavy)) or "none")
        return
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cmd = [sys.executable, __file__, "--child", "--scenario", args.scenario]
    runs = []
    for i in range(args.repeat + 1):
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
        if i:  # the first (priming) process writes the bytecode caches and is not a sample
            runs.append(json.loads(out.splitlines()[-1]))
    print(f"start-up of {args.scenario} before the first step, {args.repeat} fresh processes (seconds)")
    print(f"{'phase':<24}{'median':>8}{'min':>8}")
    for phase in PHASES:
        values = [r[phase] for r in runs]
        print(f"{phase:<24}{statistics.median(values):>8.3f}{min(values):>8.3f}")
    commands(args.scenario, args.repeat, {**env, "PYTHONPATH": str(REPO)})


if __name__ == "__main__":
    main()
