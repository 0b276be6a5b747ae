"""Grid power-flow speed per feeder and path (dense or sparse network).

Per feeder and path, each in a fresh process: build time (the feeder read or made, ``FeederGrid``
built, first solve), ms per step in ``solve_batch`` windows of 1, 10 and 100 steps with a moving
datacenter load (``--mw`` MW at pf 0.95, each phase +-10% step to step), ms per voltage
sensitivity (all sites at once, after a solve), ms per tap change (a ``SetTaps`` and a solve, less
a solve; nan on a feeder without regulators), and the process's peak memory. Feeders: the bundled
ones, SYNTHETIC large ones (``--synthetic N``: N copies of openg2g-ieee123 on a 115 kV chain,
``_synthetic_feeder.py``; not real feeders) and OpenDSS master files (``--master PATH --bus
NAME``). The dense path is
skipped above ``--dense-max-nodes`` (it holds n^2 complex matrices). The crossover between the
paths sets ``openg2g.grid.feeder.backend.SPARSE_MIN_NODES``.

Usage: python bench/bench_grid.py [--feeders ieee13 ieee123] [--synthetic 2 4 30] [--master PATH --bus NAME]
       [--steps 300] [--mw 2] [--paths dense sparse]
Times are CPU time of the process (time.process_time), BLAS held to one thread. Prints figures;
asserts nothing.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

from _grid_timing import site_loads

from openg2g.core.commands import SetTaps
from openg2g.grid.feeder import backend
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.library import Feeder, list_feeders, load_feeder
from openg2g.grid.feeder.network import node_index
from openg2g.scenario.schema import GridSpec, ModelSpec, SiteSpec

DC_BUS = {"ieee13": "671", "ieee34": "806", "ieee37": "701", "ieee123": "67", "ieee8500": "e192860"}
"""Datacenter bus of each bundled feeder (and of the openg2g- variants). On IEEE 37, a three-wire
delta feeder, a wye datacenter finds no zero-sequence return: its runs report a collapse."""

WINDOWS = (1, 10, 100)


def _feeder(name: str) -> tuple[Feeder, str]:
    """The feeder named ``name`` (bundled, ``synthetic-N`` or ``master:PATH@BUS``) and its datacenter bus."""
    if name.startswith("synthetic-"):
        from _synthetic_feeder import synthetic_feeder

        copies = int(name.removeprefix("synthetic-"))
        return synthetic_feeder(copies), f"c{copies // 2}_67"
    if name.startswith("master:"):
        path, bus = name.removeprefix("master:").rsplit("@", 1)
        return load_feeder(path), bus
    return load_feeder(name), DC_BUS[name.removeprefix("openg2g-")]


def run_one(name: str, path: str, steps: int, mw: float, dense_max_nodes: int) -> dict[str, float]:
    """Figures of one feeder on one path (in this process); only the node count when the dense
    path would hold more than ``dense_max_nodes`` nodes."""
    backend.SPARSE_MIN_NODES = 0 if path == "sparse" else 1 << 62
    t0 = time.process_time()
    feeder, bus = _feeder(name)
    n_nodes = len(node_index(feeder.model))
    if path == "dense" and n_nodes > dense_max_nodes:
        return {"nodes": n_nodes, "skipped": 1.0}
    site = SiteSpec(name="dc", bus=bus, models=[ModelSpec(model="m", gpus_per_replica=1, replicas=1, batch_size=1)])
    grid = FeederGrid(feeder, GridSpec(feeder=feeder.name), [site], Path("."))
    grid.solve(0.0, site_loads(1, mw)[0], 0.1)
    out = {"build_s": time.process_time() - t0, "nodes": len(grid._nodes)}
    loads = site_loads(steps, mw, seed=1)
    t_s = [0.1 * i for i in range(steps)]
    for window in WINDOWS:
        t0 = time.process_time()
        for start in range(0, steps, window):
            grid.solve_batch(t_s[start : start + window], loads[start : start + window], 0.1)
        out[f"w{window}_ms"] = (time.process_time() - t0) / steps * 1e3
    sens = 0.0
    for i in range(5):
        grid.solve(0.1 * i, loads[i], 0.1)
        t0 = time.process_time()
        grid.voltage_sensitivity("dc")
        sens += time.process_time() - t0
    out["sensitivity_ms"] = sens / 5 * 1e3
    out["tap_change_ms"] = math.nan  # a feeder without a regulator (a transmission case) has no taps to change
    if grid.regulators():
        bank, info = next(iter(grid.regulators().items()))
        n_taps = 20
        t0 = time.process_time()
        for i in range(n_taps):
            grid.apply(SetTaps(bank, tuple([i % 5] * len(info.phases))), 0.1 * i)
            grid.solve(0.1 * i, loads[i], 0.1)
        out["tap_change_ms"] = (time.process_time() - t0) / n_taps * 1e3 - out["w1_ms"]
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--feeders", nargs="*", default=list_feeders(), help="bundled feeders")
    ap.add_argument("--synthetic", nargs="*", type=int, default=[], help="SYNTHETIC feeders of N copies of IEEE 123")
    ap.add_argument("--master", type=Path, help="an OpenDSS master file")
    ap.add_argument("--bus", help="the datacenter's three-phase bus on --master")
    ap.add_argument("--paths", nargs="*", default=["dense", "sparse"], choices=["dense", "sparse"])
    ap.add_argument("--steps", type=int, default=300, help="steps solved in each window size")
    ap.add_argument("--mw", type=float, default=2.0, help="datacenter power (MW)")
    ap.add_argument("--dense-max-nodes", type=int, default=3000, help="largest feeder the dense path is run on")
    ap.add_argument("--one", nargs=2, metavar=("FEEDER", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one[0], args.one[1], args.steps, args.mw, args.dense_max_nodes)))
        return
    names = list(args.feeders) + [f"synthetic-{n}" for n in args.synthetic]
    if args.master:
        names.append(f"master:{args.master}@{args.bus}")
    print(
        f"{'feeder':28s} {'path':6s} {'nodes':>6s} {'build s':>8s}"
        + "".join(f" {f'w{w} ms/step':>12s}" for w in WINDOWS)
        + f" {'sens ms':>8s} {'tap ms':>8s} {'peak MB':>8s}"
    )
    for name in names:
        for path in args.paths:
            cmd = [sys.executable, __file__, "--one", name, path, "--steps", str(args.steps), "--mw", str(args.mw)]
            cmd += ["--dense-max-nodes", str(args.dense_max_nodes)]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                print(f"{name[-28:]:28s} {path:6s} failed: {proc.stderr.strip().splitlines()[-1:]}")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            if "skipped" in r:
                print(f"{name[-28:]:28s} {path:6s} {r['nodes']:6d}  skipped (above --dense-max-nodes)")
                continue
            print(
                f"{name[-28:]:28s} {path:6s} {r['nodes']:6d} {r['build_s']:8.2f}"
                + "".join(f" {r[f'w{w}_ms']:12.3f}" for w in WINDOWS)
                + f" {r['sensitivity_ms']:8.2f} {r['tap_change_ms']:8.2f} {r['peak_mb']:8.0f}"
            )


if __name__ == "__main__":
    main()
