"""openg2g's power flow beside OpenDSS's own, on the same file at the same state.

The check a user runs before trusting openg2g on a feeder of their own (``openg2g feeders check``),
and what ``docs/validation.md`` tabulates for the OpenDSS test collection: the file is read
(:func:`~openg2g.grid.feeder.opendss.read_opendss`) and solved by :class:`FeederGrid` at the taps,
capacitor and switch states the file leaves, optionally with a datacenter (a balanced wye
constant-power load) at a three-phase bus; OpenDSS compiles the same file, holds its controls,
takes the same datacenter as a model-1 load whose band never engages, and solves to 1e-10. The
difference is the largest ``|V_openg2g - V_OpenDSS|`` over every node, in per unit of the node's
bus base (OpenDSS's ``kVBase``), neutrals included.

:func:`crosscheck_disturbances` makes the same comparison through faults and source sags
(``docs/disturbances.md``): each case's :class:`~openg2g.core.commands.ApplyFault` is OpenDSS's own
``Fault`` element on the same conductors, a :class:`~openg2g.core.commands.SetSourceVoltage` the
Vsource's ``pu`` when every phase is set alike, and otherwise its per-phase equivalent: the Vsource
left as it is with a single-phase ``Isource`` at each source node injecting ``Y_src (E' - E)``
(Norton's theorem on the Thevenin source, ``Y_src`` the Vsource's own primitive admittance, ``E``
and ``E'`` its EMF before and after). The datacenter may be an OpenDSS model-1 load with its band
(``dc_load_model="opendss"``), as a site with ``load_model: opendss``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from openg2g.core.commands import ApplyFault, SetSourceVoltage
from openg2g.core.errors import FeederError
from openg2g.core.state import DatacenterState
from openg2g.grid.config import GridSpec, tan_phi
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.faults import fault_text
from openg2g.grid.feeder.library import Feeder, feeder_from_model
from openg2g.grid.feeder.model import node_number
from openg2g.grid.feeder.network import Switching, energized, node_index
from openg2g.grid.feeder.opendss import engine, read_opendss

__all__ = [
    "OPENDSS_DOES_NOT_CONVERGE",
    "ConstantPowerSite",
    "CrossCheck",
    "Disturbance",
    "crosscheck",
    "crosscheck_disturbances",
    "datacenter_bus",
]

OPENDSS_DOES_NOT_CONVERGE = "does not converge with this load"
"""The words of the error when OpenDSS itself fails at the load compared."""

_OPENDSS_TOLERANCE = 1e-10
"""OpenDSS's convergence tolerance in the comparison (its default, 1e-4, is far looser than ours)."""

_OPENDSS_VMINPU = 0.001
"""``vminpu`` of the constant-power datacenter in OpenDSS (with ``vlowpu`` half of it): its band
never engages at the voltages compared."""

Disturbance = Sequence[ApplyFault | SetSourceVoltage]
"""One case of :func:`crosscheck_disturbances`: faults placed and the source set, all at once."""


@dataclass(frozen=True)
class ConstantPowerSite:
    """A datacenter site as the grid sees it (:class:`~openg2g.grid.config.GridSite`): constant power at
    any voltage."""

    name: str
    bus: str
    power_factor: float
    load_model: Literal["constant_power", "opendss"] = "constant_power"
    vminpu: float = 0.95
    vmaxpu: float = 1.05


@dataclass(frozen=True)
class CrossCheck:
    """The comparison of one file at one load.

    :param path: the OpenDSS file.
    :param nodes: nodes compared (every node of the circuit).
    :param dc_bus: bus of the datacenter, ``None`` without one.
    :param dc_mw: its active power (MW, all phases).
    :param max_dv_pu: largest ``|V_openg2g - V_OpenDSS|`` (pu of the node's bus base).
    :param worst: node where it is (``"bus.a"``).
    :param read_s: time to read the file into openg2g's model (s).
    :param disturbance: the faults and source setting of the case (:func:`crosscheck_disturbances`),
        ``""`` for none.
    """

    path: Path
    nodes: int
    dc_bus: str | None
    dc_mw: float
    max_dv_pu: float
    worst: str
    read_s: float
    disturbance: str = ""


def datacenter_bus(feeder: Feeder) -> str:
    """A three-phase bus for a test datacenter: at the highest voltage level below the source's
    (the primary, or the source's own level when there is none below), connected to the source,
    the one in the middle of the feeder's bus order (which follows the feeder from its source).

    :raises FeederError: the feeder has no connected three-phase bus.
    """
    model = feeder.model
    nodes = node_index(model)
    live = energized(model, nodes, Switching.initial(model))
    skip = set(feeder.source_side_buses)
    three = [
        b
        for b, ph in feeder.bus_phases.items()
        if len(ph) == 3 and b not in skip and all(live[nodes.index[(b, p)]] for p in ph)
    ]
    if not three:
        raise FeederError(f"feeder {feeder.name}: no three-phase bus connected to the source for a datacenter")
    level = max(round(model.bus_kv[b], 6) for b in three)
    at_level = [b for b in three if round(model.bus_kv[b], 6) == level]
    return at_level[len(at_level) // 2]


def crosscheck(
    path: str | Path,
    dc_bus: str | None = None,
    dc_mw: float = 0.0,
    power_factor: float = 0.95,
    feeder: Feeder | None = None,
) -> CrossCheck:
    """Solve ``path`` with openg2g and with OpenDSS at the same state and load, and compare.

    :param path: the OpenDSS file.
    :param dc_bus: three-phase bus of a datacenter, ``None`` for the feeder as the file gives it.
    :param dc_mw: the datacenter's active power (MW, all phases, balanced).
    :param power_factor: its power factor (lagging).
    :param feeder: the file already read (its ``read_s`` is then 0).
    :raises FeederError: openg2g cannot read the file (checked first: a refusal comes before
        OpenDSS runs the file for the comparison), or OpenDSS does not converge.
    :raises PowerFlowError: openg2g does not converge where OpenDSS does.
    """
    return crosscheck_disturbances(path, [()], dc_bus, dc_mw, power_factor, feeder)[0]


def crosscheck_disturbances(
    path: str | Path,
    cases: Sequence[Disturbance],
    dc_bus: str | None = None,
    dc_mw: float = 0.0,
    power_factor: float = 0.95,
    feeder: Feeder | None = None,
    dc_load_model: Literal["constant_power", "opendss"] = "constant_power",
) -> list[CrossCheck]:
    """:func:`crosscheck` of each case of ``cases`` (the module docstring says how OpenDSS takes
    them): openg2g's grid, reset, has the case's commands applied; OpenDSS's circuit, compiled and
    solved once, gets the case's elements, is solved again, and has them disabled (the source set
    back) before the next case. An empty case is the feeder undisturbed.

    :param dc_load_model: the datacenter at constant power (``"constant_power"``), or as an
        OpenDSS model-1 load with vminpu 0.95 and vmaxpu 1.05 (``"opendss"``: constant
        impedance below 0.95 pu, as a site with ``load_model: opendss``).
    :raises FeederError: openg2g cannot read the file, or OpenDSS does not converge on a case.
    :raises CommandError: a case's command does not fit the feeder.
    :raises PowerFlowError: openg2g does not converge where OpenDSS does.
    """
    path = Path(path).resolve()
    start = time.perf_counter()
    if feeder is None:
        feeder = feeder_from_model(read_opendss(path))
    read_s = time.perf_counter() - start
    theirs = _opendss_voltages(path, dc_bus, dc_mw, power_factor, dc_load_model, cases)
    sites = [ConstantPowerSite("dc", dc_bus, power_factor, dc_load_model)] if dc_bus is not None else []
    grid = FeederGrid(feeder, GridSpec(feeder=str(path)), sites, path.parent)
    loads = {}
    if dc_bus is not None:
        p_w = np.full(3, dc_mw * 1e6 / 3)
        loads["dc"] = DatacenterState("dc", 0.0, p_w, p_w * tan_phi(power_factor), {})
    out = []
    for case, volts in zip(cases, theirs):
        grid.reset(0)
        for command in case:
            grid.apply(command, 0.0)
        ours = grid.node_solution(0.0, loads)
        names = ours.nodes.names
        v_base = ours.nodes.v_base_v
        diff = np.zeros(len(names))
        for k, name in enumerate(names):
            bus, label = name.rsplit(".", 1)
            key = f"{bus}.{node_number(label)}"
            if key not in volts:
                raise FeederError(f"{path}: node {name} of openg2g's model is not a node of OpenDSS's circuit")
            diff[k] = abs(ours.v_v[k] - volts[key]) / v_base[k]
        worst = int(np.argmax(diff))
        text = "; ".join(_describe(command) for command in case)
        out.append(CrossCheck(path, len(names), dc_bus, dc_mw, float(diff[worst]), names[worst], read_s, text))
    return out


def _describe(command: ApplyFault | SetSourceVoltage) -> str:
    """A case's command in words: a fault in OpenDSS's properties, or the source setting."""
    if isinstance(command, SetSourceVoltage):
        return "source " + "/".join(f"{v:g}" for v in command.v_pu) + " pu"
    return f"fault {fault_text(command)}"


def _opendss_voltages(
    path: Path,
    dc_bus: str | None,
    dc_mw: float,
    power_factor: float,
    dc_load_model: Literal["constant_power", "opendss"],
    cases: Sequence[Disturbance],
) -> list[dict[str, complex]]:
    """OpenDSS's node voltages (V) ``{"bus.node": V}`` of ``path`` with the datacenter, controls
    held, undisturbed and then through each case's faults and source setting.

    :raises FeederError: OpenDSS does not converge.
    """
    with engine(path) as ctx:
        circuit = ctx.ActiveCircuit
        ctx.Text.Command = f"set mode=snapshot controlmode=off maxiterations=1000 tolerance={_OPENDSS_TOLERANCE}"
        circuit.Solution.Solve()
        if any(circuit.Buses(i).kVBase == 0.0 for i in range(circuit.NumBuses)):
            ctx.Text.Command = "CalcVoltageBases"
        if dc_bus is not None:
            circuit.SetActiveBus(dc_bus)
            kv_ll = circuit.ActiveBus.kVBase * math.sqrt(3.0)
            kw = dc_mw * 1000.0
            band = (
                f"vminpu={_OPENDSS_VMINPU!r} vlowpu={_OPENDSS_VMINPU / 2!r} vmaxpu=100"
                if dc_load_model == "constant_power"
                else "vminpu=0.95 vmaxpu=1.05"
            )
            ctx.Text.Command = (
                f"new load.openg2g_dc bus1={dc_bus}.1.2.3 phases=3 conn=wye model=1 kv={kv_ll!r} kw={kw!r} "
                f"kvar={kw * tan_phi(power_factor)!r} {band} status=fixed"
            )
        circuit.Solution.Solve()
        if not circuit.Solution.Converged:
            raise FeederError(f"{path}: OpenDSS {OPENDSS_DOES_NOT_CONVERGE}")
        out = []
        for i, case in enumerate(cases):
            undo = [_disturb(ctx, command, f"{i}_{k}") for k, command in enumerate(case)]
            if case:
                circuit.Solution.Solve()
                if not circuit.Solution.Converged:
                    raise FeederError(
                        f"{path}: OpenDSS {OPENDSS_DOES_NOT_CONVERGE} through {'; '.join(map(_describe, case))}"
                    )
            volts = np.asarray(circuit.AllBusVolts, dtype=float).view(complex)
            out.append({name.lower(): v for name, v in zip(circuit.AllNodeNames, volts)})
            for commands in undo:
                for command in commands:
                    ctx.Text.Command = command
        return out


def _disturb(ctx: Any, command: ApplyFault | SetSourceVoltage, tag: str) -> list[str]:
    """Put ``command`` into the circuit as OpenDSS's own elements (module docstring), named with
    ``tag``; returns the commands that take it out again."""
    if isinstance(command, ApplyFault):
        bus2 = f" bus2={command.bus2}" if command.bus2 is not None else ""
        name = f"fault.openg2g_fault{tag}"
        ctx.Text.Command = f"new {name} bus1={command.bus1}{bus2} phases={command.phases} r={command.r_ohm!r}"
        return [f"{name}.enabled=no"]
    circuit = ctx.ActiveCircuit
    vs = circuit.Vsources
    more = vs.First  # the first three-phase Vsource: the source openg2g reads
    while more and vs.Phases != 3:
        more = vs.Next
    source = f"vsource.{vs.Name}"
    v_pu = np.broadcast_to(np.asarray(command.v_pu, dtype=float), (3,))
    if (v_pu == v_pu[0]).all():
        undo = [f"{source}.pu={vs.pu!r}"]
        vs.pu = float(v_pu[0])
        return undo
    circuit.SetActiveElement(source)
    y_src = np.asarray(circuit.ActiveCktElement.Yprim, dtype=float).view(complex).reshape(6, 6)[:3, :3]
    bus = circuit.ActiveCktElement.BusNames[0].split(".")[0]
    rotation = np.exp(1j * np.radians(vs.AngleDeg + np.array([0.0, -120.0, 120.0])))
    d_i = y_src @ ((v_pu - vs.pu) * vs.BasekV * 1000.0 / math.sqrt(3.0) * rotation)
    undo = []
    for phase in range(3):
        name = f"isource.openg2g_sag{tag}_{phase + 1}"
        ctx.Text.Command = (
            f"new {name} bus1={bus}.{phase + 1} phases=1 "
            f"amps={float(abs(d_i[phase]))!r} angle={float(np.degrees(np.angle(d_i[phase])))!r}"
        )
        undo.append(f"{name}.enabled=no")
    return undo
