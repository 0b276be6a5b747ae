"""Solver speed on pandapower nets: the grid backend per step, against pandapower's own power flow.

For each net, a datacenter of ``--mw`` MW (+/-10% per step, pf 0.95) at the given bus: the
build, one ``solve`` per step, ``solve_batch`` of ``--batch`` steps, the engine's pattern
(batches of ``--window`` steps each followed by a voltage sensitivity), and pandapower's own
power flow per step (numba off, as installed here) for scale. A balanced net is a
``PandapowerGrid`` against ``runpp`` (the build: one ``runpp`` and the internal case); an
asymmetric one (``ieee_european_lv_asymmetric``) the phase-frame ``FeederGrid`` of its
conversion against ``runpp_3ph`` (the build: conversion and the dense nodal inversion).

Usage: python bench/bench_pandapower.py [--steps 200] [--batch 1000] [--window 10]
    [--nets case118:59:200 mv_oberrhein:Bus 50:3 ieee_european_lv_asymmetric:639:0.03]
Times are CPU time of this process (time.process_time). Prints figures; asserts nothing.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import copy
import time
from pathlib import Path

import numpy as np
import pandapower as pp
from _grid_timing import site_loads, time_solves

from openg2g.core.interfaces import GridBackend
from openg2g.grid.nets.asymmetric import asymmetric_grid, is_asymmetric
from openg2g.grid.nets.balanced import PandapowerGrid
from openg2g.grid.nets.case import run_pandapower
from openg2g.grid.nets.source import BusNames, load_net, quiet_pandapower
from openg2g.scenario.schema import GridSpec, ModelSpec, SiteSpec

NETS = ["case118:59:200", "mv_oberrhein:Bus 50:3", "create_cigre_network_mv:Bus 14:2", "case300:9001:50"]


def bench(name: str, bus: str, mw: float, steps: int, batch: int, window: int) -> dict[str, float]:
    site = SiteSpec(name="dc", bus=bus, models=[ModelSpec(model="m", gpus_per_replica=1, replicas=1, batch_size=1)])
    net = load_net(name)
    asymmetric = is_asymmetric(net)
    t0 = time.process_time()
    grid: GridBackend
    if asymmetric:
        grid = asymmetric_grid(net, GridSpec(pandapower=name), [site], Path("."))
        grid.solve(0.0, site_loads(1, mw)[0], 0.1)  # the dense nodal inversion happens at the first solve
    else:
        grid = PandapowerGrid(net, name, GridSpec(pandapower=name), [site])
    build_ms = (time.process_time() - t0) * 1e3
    timing = time_solves(grid, site_loads(steps, mw), site_loads(batch, mw, seed=1), window)
    ref = copy.deepcopy(net)
    load = pp.create_load(ref, BusNames(net).bus(bus), p_mw=mw, q_mvar=0.0)
    n_runpp = 5 if asymmetric else 20
    t0 = time.process_time()
    for ld in site_loads(n_runpp, mw, seed=1):
        ref.load.loc[load, ["p_mw", "q_mvar"]] = [ld["dc"].power_w / 1e6, float(np.sum(ld["dc"].q_var)) / 1e6]
        if asymmetric:
            with quiet_pandapower():
                pp.runpp_3ph(ref, numba=False)
        else:
            run_pandapower(ref)
    runpp_ms = (time.process_time() - t0) / n_runpp * 1e3
    return {
        "buses": float(len(net.bus)),
        "build_ms": build_ms,
        **timing,
        "runpp_ms": runpp_ms,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200, help="step-by-step solves per net")
    ap.add_argument("--batch", type=int, default=1000, help="steps in one solve_batch call")
    ap.add_argument("--window", type=int, default=10, help="steps per batch in the engine's pattern")
    ap.add_argument("--nets", nargs="*", default=NETS, help="NAME:BUS:MW (a pandapower.networks name or a file)")
    args = ap.parse_args()
    print(
        f"{'net':24s} {'buses':>5s} {'build ms':>9s} {'solve ms/step':>14s} {'batch ms/step':>14s}"
        f" {f'batch-{args.window} ms/step':>17s} {'sensitivity ms':>15s} {'pandapower ms':>13s}"
    )
    for item in args.nets:
        name, bus, mw = item.split(":")
        r = bench(name, bus, float(mw), args.steps, args.batch, args.window)
        print(
            f"{name:24s} {r['buses']:5.0f} {r['build_ms']:9.1f} {r['solve_ms']:14.3f} {r['batch_step_ms']:14.4f} "
            f"{r['window_step_ms']:17.4f} {r['sensitivity_ms']:15.3f} {r['runpp_ms']:13.1f}"
        )


if __name__ == "__main__":
    main()
