"""Are the faulted steps openg2g reports unsolvable truly so? The figures of docs/disturbances.md
("What the solver does").

On a bundled feeder, every fault of ``tests/grid/fault_cases.py``'s four kinds at every
three-phase bus past the substation (or every ``--every``-th), through each resistance of
:data:`R_OHM`, is solved with a datacenter at ``--site`` drawing ``--mw`` MW (pf 0.95) at constant
power, then with none, then with it as an OpenDSS model-1 load. Every step that the solver
reports collapsed or not converged is then followed on a path of its own, apart from the
continuation (which scales the load): from the operating point before the fault, the fault
resistance falls from 1e4 ohm to its value in ``--steps`` geometric steps, each a chord Newton
solve warm-started from the last, whose Jacobian's determinant is checked for a fold. A path
that reaches the fault's resistance on the operating branch would make the report a misreport;
one that loses convergence or crosses a fold before it confirms it. Prints the counts, and each
misreport. Asserts nothing::

    python bench/fault_collapse.py --feeder ieee13 --site 671
    python bench/fault_collapse.py --feeder ieee123 --site 67 --every 3 --steps 150
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the fault kinds live with the tests

from openg2g.core.commands import ApplyFault, ClearFault
from openg2g.core.errors import PowerFlowError
from openg2g.core.state import DatacenterState
from openg2g.grid.config import GridSpec, tan_phi
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.faults import fault_from_command
from openg2g.scenario.schema import ModelSpec, SiteSpec
from tests.grid.fault_cases import FAULT_KINDS, fault

R_OHM = (0.0001, 0.01, 0.1, 0.3, 1.0, 3.0, 10.0)
"""Fault resistances swept (ohm)."""

PF = 0.95


def _grid(feeder: str, bus: str | None, load_model: str) -> FeederGrid:
    sites = []
    if bus is not None:
        models = [ModelSpec(model="m", gpus_per_replica=1, replicas=1, batch_size=1)]
        sites = [SiteSpec(name="dc", bus=bus, power_factor=PF, load_model=load_model, models=models)]
    return FeederGrid.from_spec(GridSpec(feeder=feeder), sites, Path("."))


def _loads(mw: float, with_site: bool) -> dict[str, DatacenterState]:
    if not with_site:
        return {}
    p = np.full(3, mw * 1e6 / 3)
    return {"dc": DatacenterState("dc", 0.0, p, p * tan_phi(PF), {})}


def follow(grid: FeederGrid, loads: dict[str, DatacenterState], command: ApplyFault, steps: int) -> str:
    """Follow the pre-fault operating point down the fault resistance (module docstring): "solves"
    when it reaches ``command.r_ohm``, else where it stopped.

    It drives the network's own chord Newton and fold test directly: ``solve`` would run the very
    continuation this checks."""
    s_pq = grid._injections.s_pq([0.0], [loads])
    scale = grid._branch_scale()
    switching = grid._switching
    placed = fault_from_command(command, grid._model, grid._nodes.index)
    switching.faults.clear()
    net = grid._build_network(grid._injections.pq_nodes, grid._injections.pq_band)
    sol = net.solve(scale, s_pq)
    if not sol.converged:
        return "no operating point before the fault"
    u = net.u_last.copy()
    try:
        for r in np.geomspace(1e4, command.r_ohm, steps):
            switching.faults[command.name] = dataclasses.replace(
                placed, command=dataclasses.replace(command, r_ohm=float(r))
            )
            net = grid._build_network(grid._injections.pq_nodes, grid._injections.pq_band)
            ctx = net.currents.prepared(scale, 1)
            s_conj = np.conj(s_pq * net.currents.live_pq)
            result = net._newton(u.copy(), ctx, s_conj, 1e-8, 100)
            if not result.converged:
                return f"lost at {r:.3g} ohm"
            if net._low_branch(result.u, ctx, s_conj, 0):
                return f"fold at {r:.3g} ohm"
            u = result.u
        return "solves"
    finally:
        switching.faults.clear()
        grid.reset(0)


def sweep(grid: FeederGrid, loads: dict[str, DatacenterState], buses: list[str]) -> list[ApplyFault]:
    """The faults of the sweep whose step fails."""
    failed = []
    for bus in buses:
        for r in R_OHM:
            for kind in FAULT_KINDS:
                command = fault(kind, bus, r)
                grid.apply(command, 0.0)
                try:
                    grid.solve(0.0, loads, 1.0)
                except PowerFlowError:
                    failed.append(command)
                grid.apply(ClearFault(command.name), 0.0)
    return failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--feeder", default="ieee13")
    parser.add_argument("--site", default="671", help="three-phase bus of the datacenter")
    parser.add_argument("--mw", type=float, default=1.0, help="its power (MW, all phases)")
    parser.add_argument("--every", type=int, default=1, help="fault every n-th three-phase bus")
    parser.add_argument("--steps", type=int, default=400, help="steps of the resistance path")
    args = parser.parse_args()
    probe = _grid(args.feeder, None, "constant_power")
    skip = set(probe.feeder.source_side_buses)
    buses = [b for b, ph in probe.feeder.bus_phases.items() if len(ph) == 3 and b not in skip][:: args.every]
    n = len(buses) * len(R_OHM) * len(FAULT_KINDS)
    print(f"{args.feeder}: {n} faults ({len(buses)} buses x {len(R_OHM)} resistances x {len(FAULT_KINDS)} kinds)")
    for label, bus, model in (("no site", None, "constant_power"), ("opendss site", args.site, "opendss")):
        start = time.perf_counter()
        failed = sweep(_grid(args.feeder, bus, model), _loads(args.mw, bus is not None), buses)
        print(f"  {label}: {len(failed)} of {n} fail ({time.perf_counter() - start:.0f} s)", flush=True)
    grid = _grid(args.feeder, args.site, "constant_power")
    loads = _loads(args.mw, True)
    start = time.perf_counter()
    failed = sweep(grid, loads, buses)
    print(f"  {args.mw:g} MW constant-power site at {args.site}: {len(failed)} of {n} fail", flush=True)
    outcomes = [(command, follow(grid, loads, command, args.steps)) for command in failed]
    misreports = [(c, o) for c, o in outcomes if o == "solves"]
    print(
        f"  resistance paths ({args.steps} steps): {len(failed) - len(misreports)} of {len(failed)} stop before "
        f"the fault's resistance (the report confirmed), {len(misreports)} reach it "
        f"({time.perf_counter() - start:.0f} s)"
    )
    for command, _ in misreports:
        print(f"    misreport: {command}")


if __name__ == "__main__":
    main()
