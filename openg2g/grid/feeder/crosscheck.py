"""openg2g's power flow beside OpenDSS's own, on the same file at the same state.

The check a user runs before trusting openg2g on a feeder of their own (``openg2g feeders check``),
and what ``docs/validation.md`` tabulates for the OpenDSS test collection: the file is read
(:func:`~openg2g.grid.feeder.opendss.read_opendss`) and solved by :class:`FeederGrid` at the taps,
capacitor and switch states the file leaves, optionally with a datacenter (a balanced wye
constant-power load) at a three-phase bus; OpenDSS compiles the same file, holds its controls,
takes the same datacenter as a model-1 load whose band never engages, and solves to 1e-10. The
difference is the largest ``|V_openg2g - V_OpenDSS|`` over every node, in per unit of the node's
bus base (OpenDSS's ``kVBase``), neutrals included.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from openg2g.core.errors import FeederError
from openg2g.core.state import DatacenterState
from openg2g.grid.config import GridSpec, tan_phi
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.library import Feeder, feeder_from_model
from openg2g.grid.feeder.model import node_number
from openg2g.grid.feeder.network import Switching, energized, node_index
from openg2g.grid.feeder.opendss import engine, read_opendss

__all__ = ["OPENDSS_DOES_NOT_CONVERGE", "ConstantPowerSite", "CrossCheck", "crosscheck", "datacenter_bus"]

OPENDSS_DOES_NOT_CONVERGE = "does not converge with this load"
"""The words of the error when OpenDSS itself fails at the load compared."""

_OPENDSS_TOLERANCE = 1e-10
"""OpenDSS's convergence tolerance in the comparison (its default, 1e-4, is far looser than ours)."""


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
    """

    path: Path
    nodes: int
    dc_bus: str | None
    dc_mw: float
    max_dv_pu: float
    worst: str
    read_s: float


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
    path = Path(path).resolve()
    start = time.perf_counter()
    if feeder is None:
        feeder = feeder_from_model(read_opendss(path))
    read_s = time.perf_counter() - start
    theirs = _opendss_voltages(path, dc_bus, dc_mw, power_factor)
    sites = [ConstantPowerSite("dc", dc_bus, power_factor)] if dc_bus is not None else []
    grid = FeederGrid(feeder, GridSpec(feeder=str(path)), sites, path.parent)
    loads = {}
    if dc_bus is not None:
        p_w = np.full(3, dc_mw * 1e6 / 3)
        loads["dc"] = DatacenterState("dc", 0.0, p_w, p_w * tan_phi(power_factor), {})
    ours = grid.node_solution(0.0, loads)
    names = ours.nodes.names
    v_base = ours.nodes.v_base_v
    diff = np.zeros(len(names))
    for k, name in enumerate(names):
        bus, label = name.rsplit(".", 1)
        key = f"{bus}.{node_number(label)}"
        if key not in theirs:
            raise FeederError(f"{path}: node {name} of openg2g's model is not a node of OpenDSS's circuit")
        diff[k] = abs(ours.v_v[k] - theirs[key]) / v_base[k]
    worst = int(np.argmax(diff))
    return CrossCheck(path, len(names), dc_bus, dc_mw, float(diff[worst]), names[worst], read_s)


def _opendss_voltages(path: Path, dc_bus: str | None, dc_mw: float, power_factor: float) -> dict[str, complex]:
    """OpenDSS's node voltages (V) ``{"bus.node": V}`` of ``path`` with the datacenter, controls held.

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
            ctx.Text.Command = (
                f"new load.openg2g_dc bus1={dc_bus}.1.2.3 phases=3 conn=wye model=1 kv={kv_ll!r} kw={kw!r} "
                f"kvar={kw * tan_phi(power_factor)!r} vminpu=0.001 vlowpu=0.0005 vmaxpu=100 status=fixed"
            )
        circuit.Solution.Solve()
        if not circuit.Solution.Converged:
            raise FeederError(f"{path}: OpenDSS {OPENDSS_DOES_NOT_CONVERGE}")
        volts = np.asarray(circuit.AllBusVolts, dtype=float).view(complex)
        return {name.lower(): v for name, v in zip(circuit.AllNodeNames, volts)}
