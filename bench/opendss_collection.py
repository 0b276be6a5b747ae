"""Every feeder of the OpenDSS test collection through openg2g, beside OpenDSS: the table of
docs/validation.md ("Any OpenDSS feeder").

For each master file of ``../shared/data/opendss-test-cases`` (``$OPENG2G_SHARED_DATA`` when set;
a process of its own, so its peak memory is its own) it prints whether openg2g reads it (or why
not); the largest ``|V_openg2g - V_OpenDSS|`` over every node as the file gives it and with a 2 MW,
pf 0.95 datacenter at a three-phase primary bus (:mod:`openg2g.grid.feeder.crosscheck`), each at
the state OpenDSS's Solve reaches (``controlmode=static``, the controls settled: with openg2g's and
OpenDSS's control iterations, and whether the final taps, capacitor and switch states differ) and
at the file's state (``controlmode=off``); how far apart the two states are (the largest
difference of a node's voltage magnitude between openg2g's settled and held solutions); the seconds to
read the file and to build the grid backend and solve its first step; the milliseconds per step of
openg2g's batched solve (100 steps, the datacenter moving by +-5 %) beside OpenDSS's own snapshot
solve of the same steps back to back (at its default tolerance, 1e-4, and at openg2g's, 1e-8); and
the peak memory of openg2g's part (the OpenDSS timing runs after it is taken). Asserts nothing::

    python bench/opendss_collection.py                 # every feeder, a markdown table
    python bench/opendss_collection.py --only 8500-Node/Master.dss
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from openg2g.grid.feeder.crosscheck import Controls
    from openg2g.grid.feeder.library import Feeder

ROOT = Path(__file__).resolve().parent.parent
COLLECTION = Path(os.environ.get("OPENG2G_SHARED_DATA") or ROOT.parent / "shared" / "data") / "opendss-test-cases"
"""The collection: in the source data beside the clone, or ``$OPENG2G_SHARED_DATA`` (as the tests find it)."""

MASTERS = [
    "IEEETestCases/4Bus-DY-Bal/4Bus-DY-Bal.DSS",
    "IEEETestCases/4Bus-GrdYD-Bal/4Bus-GrdYD-Bal.DSS",
    "IEEETestCases/4Bus-OYOD-Bal/4Bus-OYOD-Bal.DSS",
    "IEEETestCases/4Bus-OYOD-UnBal/4bus-OYOD-UnBal.dss",
    "IEEETestCases/4Bus-YD-Bal/4Bus-YD-Bal.DSS",
    "IEEETestCases/4Bus-YY-Bal/4Bus-YY-Bal.DSS",
    "IEEETestCases/4Bus-YYD/YYD-Master.DSS",
    "IEEETestCases/13Bus/IEEE13Nodeckt.dss",
    "IEEETestCases/34Bus/ieee34Mod1.dss",
    "IEEETestCases/34Bus/ieee34Mod2.dss",
    "IEEETestCases/37Bus/ieee37.dss",
    "IEEETestCases/123Bus/IEEE123Master.dss",
    "IEEETestCases/8500-Node/Master.dss",
    "IEEETestCases/8500-Node/Master-unbal.dss",
    "IEEETestCases/ieee9500dss/ieee9500_base.dss",
    "IEEETestCases/LVTestCase/Master.dss",
    "IEEETestCases/LVTestCaseNorthAmerican/Master.dss",
    "IEEETestCases/NEVTestCase/NEVMASTER.DSS",
    "IEEETestCases/4wire-Delta/Kersting4wire_Lagging.dss",
    "IEEETestCases/SecondaryTestCircuit_modified/Master.DSS",
    "IEEETestCases/DG_Protection/DG_Prot_Fdr.dss",
    "IEEETestCases/IEEE 30 Bus/Master.dss",
    "IEEETestCases/IEEE118Bus/master_file.dss",
    "EPRITestCircuits/ckt5/Master_ckt5.dss",
    "EPRITestCircuits/ckt7/Master_ckt7.dss",
    "EPRITestCircuits/ckt24/master_ckt24.dss",
    "EPRITestCircuits/epri_dpv/J1/Master_noPV.dss",
    "EPRITestCircuits/epri_dpv/J1/Master_withPV.dss",
    "EPRITestCircuits/epri_dpv/K1/Master_NoPV.dss",
    "EPRITestCircuits/epri_dpv/M1/Master_NoPV.dss",
]
"""Every master of the collection that compiles a circuit (Run_* files only add solve and export
commands to these)."""

DC_MW = 2.0
STEPS = 100

CONTROLS: tuple[Controls, ...] = ("static", "off")
"""The states compared (:data:`openg2g.grid.feeder.crosscheck.Controls`)."""


def _opendss_ms_per_step(path: Path, bus: str | None, kw: np.ndarray, tolerance: float) -> float:
    """OpenDSS's snapshot solve of the steps, back to back (ms per step), controls held."""
    from openg2g.grid.feeder.opendss import engine

    with engine(path) as ctx:
        return _time_snapshots(ctx, bus, kw, tolerance)


def _time_snapshots(ctx: Any, bus: str | None, kw: np.ndarray, tolerance: float) -> float:
    """The timing of :func:`_opendss_ms_per_step` on a compiled circuit."""
    circuit = ctx.ActiveCircuit
    ctx.Text.Command = f"set mode=snapshot controlmode=off maxiterations=1000 tolerance={tolerance}"
    circuit.Solution.Solve()
    loads = circuit.Loads
    if bus is not None:
        circuit.SetActiveBus(bus)
        kv = circuit.ActiveBus.kVBase * math.sqrt(3.0)
        ctx.Text.Command = (
            f"new load.openg2g_dc bus1={bus}.1.2.3 phases=3 kv={kv!r} kw={float(kw[0])!r} kvar=0 model=1 status=fixed"
        )
        loads.Name = "openg2g_dc"
    circuit.Solution.Solve()
    start = time.perf_counter()
    for p in kw:
        if bus is not None:
            loads.kW = float(p)
            loads.kvar = float(p) * math.tan(math.acos(0.95))
        circuit.Solution.Solve()
    return 1000.0 * (time.perf_counter() - start) / len(kw)


def _crosschecks(row: dict[str, object], path: Path, feeder: Feeder, bus: str | None, controls: Controls) -> None:
    """The differences from OpenDSS at ``controls``, as given and with the datacenter at ``bus``
    (none when None), in ``row``: a static one with its control iterations and differing final states."""
    from openg2g.core.errors import G2GError
    from openg2g.grid.feeder.crosscheck import crosscheck

    for case, dc in (("as_given", None), ("dc", bus)):
        if case == "dc" and dc is None:
            continue
        key = f"dv_{case}_{controls}"
        try:
            check = crosscheck(path, dc, DC_MW if dc else 0.0, feeder=feeder, controls=controls)
        except G2GError as exc:
            row[f"{key}_error"] = str(exc).replace(str(path), "").lstrip(": ")[:160]
            continue
        row[key] = check.max_dv_pu
        if controls == "static":
            row[f"iterations_{case}"] = f"{check.iterations}/{check.opendss_iterations}"
            row[f"differences_{case}"] = list(check.differences)


def measure(rel: str) -> dict[str, object]:
    """Every figure of one feeder (see the module docstring)."""
    from openg2g.core.errors import G2GError
    from openg2g.core.state import DatacenterState
    from openg2g.grid.config import GridSpec, tan_phi
    from openg2g.grid.feeder.backend import FeederGrid
    from openg2g.grid.feeder.crosscheck import ConstantPowerSite, datacenter_bus
    from openg2g.grid.feeder.library import feeder_from_model
    from openg2g.grid.feeder.opendss import read_opendss

    path = COLLECTION / rel
    row: dict[str, object] = {"feeder": rel}
    start = time.perf_counter()
    try:
        model = read_opendss(path)
    except G2GError as exc:  # the table reports every refusal as it is worded, on one line
        row["refused"] = " ".join(str(exc).replace(str(path), "").lstrip(": ").split())
        return row
    row["read_s"] = time.perf_counter() - start
    feeder = feeder_from_model(model)
    row["loads"] = len(model.loads)
    row["nodes"] = sum(len(n) for n in model.bus_phases.values())
    try:
        bus: str | None = datacenter_bus(feeder)
    except G2GError:
        bus = None
    row["dc_bus"] = bus
    _crosschecks(row, path, feeder, bus, "off")

    kw = DC_MW * 1000.0 * (1.0 + 0.05 * np.sin(np.arange(STEPS) / 7.0))
    loads = [
        {"dc": DatacenterState("dc", 0.0, np.full(3, p * 1e3 / 3), np.full(3, p * 1e3 / 3 * tan_phi(0.95)), {})}
        if bus
        else {}
        for p in kw
    ]
    start = time.perf_counter()
    sites = [ConstantPowerSite("dc", bus, 0.95)] if bus else []
    grid = FeederGrid(feeder, GridSpec(feeder=str(path)), sites, path.parent)
    try:
        grid.solve(0.0, loads[0], 0.1)  # as OpenDSS's timing starts: solved once with the datacenter
        row["build_s"] = time.perf_counter() - start
        start = time.perf_counter()
        grid.solve_batch([0.1 * (k + 1) for k in range(STEPS)], loads, 0.1)
        row["ms_per_step"] = 1000.0 * (time.perf_counter() - start) / STEPS
    except G2GError as exc:
        row["batch_error"] = str(exc)[:160]
    row["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    _crosschecks(row, path, feeder, bus, "static")  # after the peak: as before static settling existed
    held = FeederGrid(feeder, GridSpec(feeder=str(path)), [], path.parent)
    try:
        off = held.node_solution(0.0, {})
        settled = held.settle(0.0, {}).solution
        row["static_vs_off"] = float(np.max(np.abs(np.abs(settled.v_v) - np.abs(off.v_v)) / off.nodes.v_base_v))
    except G2GError as exc:
        row["static_vs_off_error"] = str(exc)[:160]
    if "dv_dc_off" in row:
        row["opendss_ms_default"] = _opendss_ms_per_step(path, bus, kw, 1e-4)
        row["opendss_ms_1e-8"] = _opendss_ms_per_step(path, bus, kw, 1e-8)
    return row


def _cell(row: dict[str, object], key: str, fmt: str) -> str:
    value = row.get(key)
    return format(value, fmt) if isinstance(value, float) else "-"


def _dv(row: dict[str, object], key: str) -> str:
    """A difference (pu), with the control iterations and any differing final state of a static
    one, or the error that kept it from being computed."""
    if key not in row:
        return str(row.get(f"{key}_error", "-"))
    text = _cell(row, key, ".1e")
    if key.endswith("_static"):
        case = key.removeprefix("dv_").removesuffix("_static")
        text += f" ({row[f'iterations_{case}']})"
        differences = row.get(f"differences_{case}")
        if isinstance(differences, list) and differences:
            text += f"; differs: {', '.join(map(str, differences))}"
    return text


def table(rows: list[dict[str, object]]) -> str:
    """The two markdown tables of docs/validation.md: the agreement with OpenDSS at both states, and
    the speed and memory."""
    accuracy = [
        (
            "| feeder | loads | nodes | max \\|ΔV\\| static (control iterations openg2g/OpenDSS) "
            "| max \\|ΔV\\| off | static vs off (pu) | 2 MW DC at | with DC, static | with DC, off |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    speed = [
        "| feeder | read s | build s | ms/step (batch of 100) | OpenDSS ms/step (tol 1e-4 / 1e-8) | peak MB |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        if "refused" in r:
            accuracy.append(f"| `{r['feeder']}` | refused: {r['refused']} | | | | | | | |")
            continue
        accuracy.append(
            f"| `{r['feeder']}` | {r['loads']} | {r['nodes']} | {_dv(r, 'dv_as_given_static')} "
            f"| {_dv(r, 'dv_as_given_off')} | {_cell(r, 'static_vs_off', '.3f')} | {r.get('dc_bus') or '-'} "
            f"| {_dv(r, 'dv_dc_static')} | {_dv(r, 'dv_dc_off')} |"
        )
        dss = f"{_cell(r, 'opendss_ms_default', '.2f')} / {_cell(r, 'opendss_ms_1e-8', '.2f')}"
        speed.append(
            f"| `{r['feeder']}` | {_cell(r, 'read_s', '.2f')} | {_cell(r, 'build_s', '.2f')} "
            f"| {_cell(r, 'ms_per_step', '.2f')} | {dss} | {_cell(r, 'peak_mb', '.0f')} |"
        )
    return "\n".join([*accuracy, "", *speed])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="masters to run (paths as in MASTERS, or a part of one)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one)))
        return
    masters = [m for m in MASTERS if not args.only or any(o in m for o in args.only)]
    rows = []
    for rel in masters:
        done = subprocess.run(
            [sys.executable, __file__, "--one", rel], capture_output=True, text=True, check=False, cwd=ROOT
        )
        try:
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        except (IndexError, json.JSONDecodeError):
            rows.append({"feeder": rel, "refused": f"bench crashed: {done.stderr.strip().splitlines()[-1:]}"})
        print(f"{rel}: {rows[-1]}", file=sys.stderr, flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
