"""openg2g's power flow beside OpenDSS's own, on the same file at the same state.

The check a user runs before trusting openg2g on a feeder of their own (``openg2g feeders check``),
and what ``docs/validation.md`` tabulates for the OpenDSS test collection: the file is read
(:func:`~openg2g.grid.feeder.opendss.read_opendss`) and solved by :class:`FeederGrid`, optionally
with a datacenter (a balanced wye constant-power load) at a three-phase bus; OpenDSS compiles the
same file, takes the same datacenter as a model-1 load whose band never engages, and solves to
1e-10. Both solve at one of two states:

- ``static`` (the default, OpenDSS's own default ``controlmode=static``): the state OpenDSS's
  ``Solve`` reaches, its RegControls, CapControls and SwtControls settled; openg2g settles them
  itself (:meth:`FeederGrid.settle`), and the final taps, capacitor and switch states of the two are
  compared too;
- ``off`` (``controlmode=off``): the taps, capacitor and switch states the file leaves.

The difference is the largest ``|V_openg2g - V_OpenDSS|`` over every node, in per unit of the
node's bus base (OpenDSS's ``kVBase``), neutrals included; every node of either is one of the other.

:func:`crosscheck_disturbances` makes the same comparison through faults and source sags, both
with controls held (``docs/disturbances.md``): each case's :class:`~openg2g.core.commands.ApplyFault`
is OpenDSS's own ``Fault`` element on the same conductors, a
:class:`~openg2g.core.commands.SetSourceVoltage` the Vsource's ``pu`` when every phase is set alike,
and otherwise its per-phase equivalent: the Vsource left as it is with a single-phase ``Isource`` at
each source node injecting ``Y_src (E' - E)`` (Norton's theorem on the Thevenin source, ``Y_src``
the Vsource's own primitive admittance, ``E`` and ``E'`` its EMF before and after). The datacenter
may be an OpenDSS model-1 load with its band (``dc_load_model="opendss"``), as a site with
``load_model: opendss``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
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
from openg2g.grid.feeder.opendss import engine, read_opendss, run_in_worker, snapshot_mode

__all__ = [
    "OPENDSS_DOES_NOT_CONVERGE",
    "ConstantPowerSite",
    "Controls",
    "CrossCheck",
    "Disturbance",
    "OpenDSSSolution",
    "crosscheck",
    "crosscheck_disturbances",
    "datacenter_bus",
    "opendss_solution",
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

Controls = Literal["static", "off"]
"""The state compared: the controls settled (OpenDSS's ``controlmode=static``) or held (``off``)."""

_MAX_CONTROL_ITERATIONS_EXCEEDED = 485
"""The number of OpenDSS's message when the controls do not settle within ``maxcontroliter``."""


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
    :param controls: the state compared (:data:`Controls`).
    :param iterations: the solves openg2g's settle took (``static``; ``None`` for ``off``).
    :param opendss_iterations: OpenDSS's control iterations (``static``; ``None`` for ``off``).
    :param taps: regulator bank -> openg2g's final tap steps.
    :param differences: every regulating transformer, capacitor and switched line whose final state
        differs between the two, in words (empty when they agree).
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
    controls: Controls = "static"
    iterations: int | None = None
    opendss_iterations: int | None = None
    taps: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    differences: tuple[str, ...] = ()
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
    controls: Controls = "static",
    max_control_iterations: int | None = None,
) -> CrossCheck:
    """Solve ``path`` with openg2g and with OpenDSS at the same state and load, and compare.

    :param path: the OpenDSS file.
    :param dc_bus: three-phase bus of a datacenter, ``None`` for the feeder as the file gives it.
    :param dc_mw: the datacenter's active power (MW, all phases, balanced).
    :param power_factor: its power factor (lagging).
    :param feeder: the file already read (its ``read_s`` is then 0).
    :param controls: ``static`` (OpenDSS's default solve, the controls settled) or ``off`` (held).
    :param max_control_iterations: the most solves of a static settle, in both; None: the file's
        ``maxcontroliter``.
    :raises FeederError: openg2g cannot read the file, OpenDSS does not converge or its controls do
        not settle (checked first), or a node of one is not a node of the other.
    :raises PowerFlowError: openg2g does not converge where OpenDSS does.
    :raises SimulationError: openg2g's controls do not settle where OpenDSS's do.
    """
    path = Path(path).resolve()
    start = time.perf_counter()
    if feeder is None:
        feeder = feeder_from_model(read_opendss(path))
    read_s = time.perf_counter() - start
    theirs = opendss_solution(path, dc_bus, dc_mw, power_factor, controls, max_control_iterations)
    grid, loads = _grid_with_datacenter(feeder, path, dc_bus, dc_mw, power_factor, "constant_power")
    iterations = None
    if controls == "static":
        settled = grid.settle(0.0, loads, max_control_iterations)
        ours, iterations = settled.solution, settled.iterations
    else:
        ours = grid.node_solution(0.0, loads)
    names = ours.nodes.names
    v_base = ours.nodes.v_base_v
    diff = np.zeros(len(names))
    keys = set()
    for k, name in enumerate(names):
        bus, label = name.rsplit(".", 1)
        key = f"{bus}.{node_number(label)}"
        if key not in theirs.volts:
            raise FeederError(f"{path}: node {name} of openg2g's model is not a node of OpenDSS's circuit")
        keys.add(key)
        diff[k] = abs(ours.v_v[k] - theirs.volts[key]) / v_base[k]
    missing = sorted(set(theirs.volts) - keys)
    if missing:
        raise FeederError(f"{path}: OpenDSS's nodes {', '.join(missing[:5])} are not nodes of openg2g's model")
    worst = int(np.argmax(diff))
    return CrossCheck(
        path,
        len(names),
        dc_bus,
        dc_mw,
        float(diff[worst]),
        names[worst],
        read_s,
        controls=controls,
        iterations=iterations,
        opendss_iterations=theirs.iterations,
        taps=grid.taps(),
        differences=_differences(feeder, ours.switching, theirs),
    )


def _grid_with_datacenter(
    feeder: Feeder,
    path: Path,
    dc_bus: str | None,
    dc_mw: float,
    power_factor: float,
    dc_load_model: Literal["constant_power", "opendss"],
) -> tuple[FeederGrid, dict[str, DatacenterState]]:
    """openg2g's grid of the feeder with the datacenter (when ``dc_bus``), and its load."""
    sites = [ConstantPowerSite("dc", dc_bus, power_factor, dc_load_model)] if dc_bus is not None else []
    grid = FeederGrid(feeder, GridSpec(feeder=str(path)), sites, path.parent)
    loads = {}
    if dc_bus is not None:
        p_w = np.full(3, dc_mw * 1e6 / 3)
        loads["dc"] = DatacenterState("dc", 0.0, p_w, p_w * tan_phi(power_factor), {})
    return grid, loads


def crosscheck_disturbances(
    path: str | Path,
    cases: Sequence[Disturbance],
    dc_bus: str | None = None,
    dc_mw: float = 0.0,
    power_factor: float = 0.95,
    feeder: Feeder | None = None,
    dc_load_model: Literal["constant_power", "opendss"] = "constant_power",
) -> list[CrossCheck]:
    """:func:`crosscheck` with controls held (``off``) of each case of ``cases`` (the module
    docstring says how OpenDSS takes them): openg2g's grid, reset, has the case's commands applied;
    OpenDSS's circuit, compiled and solved once, gets the case's elements, is solved again, and has
    them disabled (the source set back) before the next case. An empty case is the feeder
    undisturbed.

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
    grid, loads = _grid_with_datacenter(feeder, path, dc_bus, dc_mw, power_factor, dc_load_model)
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
        out.append(
            CrossCheck(
                path,
                len(names),
                dc_bus,
                dc_mw,
                float(diff[worst]),
                names[worst],
                read_s,
                controls="off",
                disturbance=text,
            )
        )
    return out


def _describe(command: ApplyFault | SetSourceVoltage) -> str:
    """A case's command in words: a fault in OpenDSS's properties, or the source setting."""
    if isinstance(command, SetSourceVoltage):
        return "source " + "/".join(f"{v:g}" for v in command.v_pu) + " pu"
    return f"fault {fault_text(command)}"


@dataclass(frozen=True)
class OpenDSSSolution:
    """OpenDSS's solution: node voltages (V) ``{"bus.node": V}`` and their magnitudes (pu of the
    bus's base), the final winding-2 tap (pu) of every transformer, state of every capacitor
    (closed) and line (in service), control iterations (None with controls off)."""

    volts: dict[str, complex]
    v_pu: dict[str, float]
    taps_pu: dict[str, float]
    capacitors: dict[str, bool]
    lines: dict[str, bool]
    iterations: int | None


def _differences(feeder: Feeder, ours: Switching, theirs: OpenDSSSolution) -> tuple[str, ...]:
    """The regulating transformers, capacitors and lines a SwtControl operates whose final states differ."""
    out = []
    for t in feeder.model.transformers:
        if t.bank is None:
            continue
        steps = sorted({round((float(x) - 1.0) / t.step_pu) for x in ours.taps_pu[t.name]})
        theirs_step = round((theirs.taps_pu[t.name] - 1.0) / t.step_pu)
        if steps != [theirs_step]:
            out.append(f"transformer {t.name}: tap {'/'.join(map(str, steps))} (openg2g), {theirs_step} (OpenDSS)")
    for name, closed in ours.capacitors.items():
        if closed != theirs.capacitors[name]:
            out.append(f"capacitor {name}: {_closed(closed)} (openg2g), {_closed(theirs.capacitors[name])} (OpenDSS)")
    for sc in feeder.model.swtcontrols:
        name = sc.element.partition(".")[2]
        if name in ours.lines and ours.lines[name] != theirs.lines[name]:
            out.append(f"line {name}: {_closed(ours.lines[name])} (openg2g), {_closed(theirs.lines[name])} (OpenDSS)")
    return tuple(out)


def _closed(closed: bool) -> str:
    return "closed" if closed else "open"


def _circuit_with_datacenter(
    ctx: Any,
    path: Path,
    dc_bus: str | None,
    dc_mw: float,
    power_factor: float,
    dc_load_model: Literal["constant_power", "opendss"],
) -> None:
    """Solve the compiled ``path`` once with controls held (at 1e-10) and add the datacenter: a
    balanced wye model-1 load of ``dc_mw`` (MW) at power factor ``power_factor`` at ``dc_bus``,
    whose band never engages (``constant_power``) or is OpenDSS's 0.95-1.05 pu (``opendss``)."""
    circuit = ctx.ActiveCircuit
    snapshot_mode(ctx)
    ctx.Text.Command = f"set controlmode=off maxiterations=1000 tolerance={_OPENDSS_TOLERANCE}"
    circuit.Solution.Solve()
    if any(circuit.Buses(i).kVBase == 0.0 for i in range(circuit.NumBuses)):
        ctx.Text.Command = "CalcVoltageBases"
    if dc_bus is None:
        return
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


def opendss_solution(
    path: Path, dc_bus: str | None, dc_mw: float, power_factor: float, controls: Controls, max_iterations: int | None
) -> OpenDSSSolution:
    """OpenDSS's solution of ``path`` with a datacenter of ``dc_mw`` (MW, balanced, power factor
    ``power_factor``) at ``dc_bus`` (none when None), its controls settled (``static``, in at most
    ``max_iterations`` solves, the file's ``maxcontroliter`` when None) or held (``off``), to 1e-10;
    the engine run as :func:`~openg2g.grid.feeder.opendss.read_opendss` runs it (its own process,
    the same scan, memory cap and timeout).

    :raises FeederError: OpenDSS does not converge, its controls do not settle, or the engine
        refuses the file, crashes or times out.
    """
    found = run_in_worker(path, _solution, (path, dc_bus, dc_mw, power_factor, controls, max_iterations))
    return OpenDSSSolution(
        _volts(found["volts"]),
        found["v_pu"],
        found["taps_pu"],
        found["capacitors"],
        found["lines"],
        found["iterations"],
    )


def _volts(pairs: dict[str, list[float]]) -> dict[str, complex]:
    """Node voltages from the worker's ``{"bus.node": [re, im]}`` (V)."""
    return {name: complex(re, im) for name, (re, im) in pairs.items()}


def _pairs(circuit: Any) -> dict[str, list[float]]:
    """The circuit's node voltages as ``{"bus.node": [re, im]}`` (V), for JSON."""
    volts = np.asarray(circuit.AllBusVolts, dtype=float).reshape(-1, 2)
    return {name.lower(): [float(re), float(im)] for name, (re, im) in zip(circuit.AllNodeNames, volts)}


def _solution(
    path: Path, dc_bus: str | None, dc_mw: float, power_factor: float, controls: Controls, max_iterations: int | None
) -> dict[str, Any]:
    """:func:`opendss_solution` in its worker process, as JSON."""
    from dss import DSSException

    with engine(path) as ctx:
        circuit = ctx.ActiveCircuit
        _circuit_with_datacenter(ctx, path, dc_bus, dc_mw, power_factor, "constant_power")
        ctx.Text.Command = f"set controlmode={controls}"
        if max_iterations is not None:
            ctx.Text.Command = f"set maxcontroliter={max_iterations}"
        try:
            circuit.Solution.Solve()
        except DSSException as exc:
            if exc.args[0] != _MAX_CONTROL_ITERATIONS_EXCEEDED:
                raise
            raise FeederError(
                f"{path}: OpenDSS's controls do not settle in {circuit.Solution.MaxControlIterations} control "
                "iterations (maxcontroliter)"
            ) from None
        if not circuit.Solution.Converged:
            raise FeederError(f"{path}: OpenDSS {OPENDSS_DOES_NOT_CONVERGE}")
        names = [name.lower() for name in circuit.AllNodeNames]
        return {
            "volts": _pairs(circuit),
            "v_pu": dict(zip(names, map(float, circuit.AllBusVmagPu))),
            "taps_pu": _winding2_taps(circuit),
            "capacitors": _capacitor_states(circuit),
            "lines": _line_states(circuit),
            "iterations": int(circuit.Solution.ControlIterations) if controls == "static" else None,
        }


def _opendss_voltages(
    path: Path,
    dc_bus: str | None,
    dc_mw: float,
    power_factor: float,
    dc_load_model: Literal["constant_power", "opendss"],
    cases: Sequence[Disturbance],
) -> list[dict[str, complex]]:
    """OpenDSS's node voltages (V) ``{"bus.node": V}`` of ``path`` with the datacenter, controls
    held, undisturbed and then through each case's faults and source setting (in the engine's
    worker process, as :func:`opendss_solution`).

    :raises FeederError: OpenDSS does not converge, or the engine refuses the file, crashes or
        times out.
    """
    found = run_in_worker(path, _disturbed, (path, dc_bus, dc_mw, power_factor, dc_load_model, cases))
    return [_volts(case) for case in found]


def _disturbed(
    path: Path,
    dc_bus: str | None,
    dc_mw: float,
    power_factor: float,
    dc_load_model: Literal["constant_power", "opendss"],
    cases: Sequence[Disturbance],
) -> list[dict[str, list[float]]]:
    """:func:`_opendss_voltages` in its worker process, as JSON."""
    with engine(path) as ctx:
        circuit = ctx.ActiveCircuit
        _circuit_with_datacenter(ctx, path, dc_bus, dc_mw, power_factor, dc_load_model)
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
            out.append(_pairs(circuit))
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


def _each(collection: Any) -> Iterator[str]:
    """The name of each element of an engine collection (``circuit.Lines``...), each made the
    active one in turn (lower case)."""
    more = collection.First
    while more:
        yield collection.Name.lower()
        more = collection.Next


def _winding2_taps(circuit: Any) -> dict[str, float]:
    """Every transformer's winding-2 tap (pu)."""
    tr = circuit.Transformers
    out = {}
    for name in _each(tr):
        tr.Wdg = 2
        out[name] = float(tr.Tap)
    return out


def _capacitor_states(circuit: Any) -> dict[str, bool]:
    """Every capacitor's first step: closed."""
    caps = circuit.Capacitors
    return {name: bool(caps.States[0]) for name in _each(caps)}


def _line_states(circuit: Any) -> dict[str, bool]:
    """Every line: in service (neither terminal open)."""
    out = {}
    for name in _each(circuit.Lines):
        e = circuit.ActiveCktElement
        out[name] = not (e.IsOpen(1, 0) or e.IsOpen(2, 0))
    return out
