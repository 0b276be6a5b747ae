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
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from openg2g.core.errors import FeederError
from openg2g.core.state import DatacenterState
from openg2g.grid.config import GridSpec, tan_phi
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.library import Feeder, feeder_from_model
from openg2g.grid.feeder.model import node_number
from openg2g.grid.feeder.network import Switching, energized, node_index
from openg2g.grid.feeder.opendss import engine, read_opendss, snapshot_mode

__all__ = [
    "OPENDSS_DOES_NOT_CONVERGE",
    "ConstantPowerSite",
    "Controls",
    "CrossCheck",
    "OpenDSSSolution",
    "crosscheck",
    "datacenter_bus",
    "opendss_solution",
]

OPENDSS_DOES_NOT_CONVERGE = "does not converge with this load"
"""The words of the error when OpenDSS itself fails at the load compared."""

_OPENDSS_TOLERANCE = 1e-10
"""OpenDSS's convergence tolerance in the comparison (its default, 1e-4, is far looser than ours)."""

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
    theirs = opendss_solution(path, dc_bus, dc_mw, power_factor, controls, max_control_iterations)
    start = time.perf_counter()
    if feeder is None:
        feeder = feeder_from_model(read_opendss(path))
    read_s = time.perf_counter() - start
    sites = [ConstantPowerSite("dc", dc_bus, power_factor)] if dc_bus is not None else []
    grid = FeederGrid(feeder, GridSpec(feeder=str(path)), sites, path.parent)
    loads = {}
    if dc_bus is not None:
        p_w = np.full(3, dc_mw * 1e6 / 3)
        loads["dc"] = DatacenterState("dc", 0.0, p_w, p_w * tan_phi(power_factor), {})
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
        controls,
        iterations,
        theirs.iterations,
        grid.taps(),
        _differences(feeder, ours.switching, theirs),
    )


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


def opendss_solution(
    path: Path, dc_bus: str | None, dc_mw: float, power_factor: float, controls: Controls, max_iterations: int | None
) -> OpenDSSSolution:
    """OpenDSS's solution of ``path`` with a datacenter of ``dc_mw`` (MW, balanced, power factor
    ``power_factor``) at ``dc_bus`` (none when None), its controls settled (``static``, in at most
    ``max_iterations`` solves, the file's ``maxcontroliter`` when None) or held (``off``), to 1e-10.

    :raises FeederError: OpenDSS does not converge, or its controls do not settle.
    """
    from dss import DSSException

    with engine(path) as ctx:
        circuit = ctx.ActiveCircuit
        snapshot_mode(ctx)
        ctx.Text.Command = f"set controlmode=off maxiterations=1000 tolerance={_OPENDSS_TOLERANCE}"
        circuit.Solution.Solve()
        if any(circuit.Buses(i).kVBase == 0.0 for i in range(circuit.NumBuses)):
            ctx.Text.Command = "CalcVoltageBases"
        if dc_bus is not None:
            circuit.SetActiveBus(dc_bus)
            kv_ll = circuit.ActiveBus.kVBase * math.sqrt(3.0)
            kw = dc_mw * 1000.0
            ctx.Text.Command = (
                f"new load.openg2g_dc bus1={dc_bus}.1.2.3 phases=3 conn=wye model=1 kv={kv_ll!r} kw={kw!r} "
                f"kvar={kw * tan_phi(power_factor)!r} vminpu=0.001 vlowpu=0.0005 vmaxpu=100 status=fixed"
            )
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
        volts = np.asarray(circuit.AllBusVolts, dtype=float).view(complex)
        names = [name.lower() for name in circuit.AllNodeNames]
        return OpenDSSSolution(
            dict(zip(names, volts)),
            dict(zip(names, map(float, circuit.AllBusVmagPu))),
            _winding2_taps(circuit),
            _capacitor_states(circuit),
            _line_states(circuit),
            int(circuit.Solution.ControlIterations) if controls == "static" else None,
        )


def _winding2_taps(circuit: Any) -> dict[str, float]:
    """Every transformer's winding-2 tap (pu)."""
    out = {}
    tr = circuit.Transformers
    i = tr.First
    while i:
        tr.Wdg = 2
        out[tr.Name.lower()] = float(tr.Tap)
        i = tr.Next
    return out


def _capacitor_states(circuit: Any) -> dict[str, bool]:
    """Every capacitor's first step: closed."""
    out = {}
    caps = circuit.Capacitors
    i = caps.First
    while i:
        out[caps.Name.lower()] = bool(caps.States[0])
        i = caps.Next
    return out


def _line_states(circuit: Any) -> dict[str, bool]:
    """Every line: in service (neither terminal open)."""
    out = {}
    lines = circuit.Lines
    i = lines.First
    while i:
        e = circuit.ActiveCktElement
        out[lines.Name.lower()] = not (e.IsOpen(1, 0) or e.IsOpen(2, 0))
        i = lines.Next
    return out
