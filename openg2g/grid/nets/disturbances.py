"""Faults and source sags on a balanced net: what ``apply_fault`` and ``set_source_voltage`` mean there.

A balanced net is solved in the positive sequence only, so it carries only balanced disturbances:

- **a three-phase fault to ground** (``apply_fault`` with ``phases: 3``, no ``bus2``; ``bus1`` a
  bus, or the bus with nodes ``.1.2.3``): each phase conductor tied to ground through ``r_ohm``,
  which in the positive sequence is the conductance ``1 / r_ohm`` to ground, ``vn_kv^2 / (r_ohm
  baseMVA)`` in per unit of the net's base (:class:`NetFault`), added to ``Ybus`` at that bus;
- **a sag or swell of the external grids** (``set_source_voltage`` with one value or three equal
  ones): every in-service external grid's voltage magnitude, its angle kept.

Every unbalanced fault (line to ground, line to line, double line to ground) and an unequal sag
needs the negative and zero sequences, which the balanced model does not have: refused, naming a
phase-frame grid (a feeder) as the place to model it. A fault at a bus whose voltage the power
flow holds (an external grid's, or a generator's PV bus: reactive limits are not enforced, so the
generator supplies whatever reactive power the fault takes) would change no voltage: refused too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from openg2g.core.commands import ApplyFault, SetSourceVoltage
from openg2g.core.errors import CommandError
from openg2g.grid.nets.source import BusNames

__all__ = ["MAX_SOURCE_PU", "NetFault", "net_fault", "source_magnitude"]

MAX_SOURCE_PU = 2.0
"""Largest source voltage a ``set_source_voltage`` command may set on a net (pu), the bound of
``grid.v_max_pu``."""

_PHASE_FRAME = (
    "a balanced net is solved in the positive sequence only, with no negative or zero sequence to carry "
    "it: model it on a phase-frame grid (a feeder, grid.feeder)"
)


@dataclass(frozen=True)
class NetFault:
    """A three-phase fault to ground in place on a balanced net.

    :param name: the fault's name.
    :param bus: the pandapower bus it is at.
    :param label: that bus's name, for messages.
    :param r_ohm: resistance of each phase to ground (ohm).
    :param y_pu: its positive-sequence admittance to ground (pu of the net's baseMVA): ``vn_kv^2 / (r_ohm baseMVA)``.
    """

    name: str
    bus: int
    label: str
    r_ohm: float
    y_pu: float


def _bus_and_nodes(text: str, names: BusNames) -> tuple[int, tuple[int, ...] | None] | None:
    """The bus ``text`` names and the nodes it gives (``"Bus 14.1.2.3"`` -> Bus 14, (1, 2, 3);
    ``"Bus 14"`` -> Bus 14, None); None when no bus matches. A whole name wins over a name with
    nodes, and a longer name over a shorter one."""
    bus = names.bus(text)
    if bus is not None:
        return bus, None
    parts = text.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        tail = parts[cut:]
        if not all(p.strip().isdigit() for p in tail):
            break
        bus = names.bus(".".join(parts[:cut]))
        if bus is not None:
            return bus, tuple(int(p) for p in tail)
    return None


def net_fault(
    command: ApplyFault,
    label: str,
    names: BusNames,
    vn_kv: Mapping[int, float],
    base_mva: float,
    held: Mapping[int, str],
    in_place: Mapping[str, NetFault],
) -> NetFault:
    """The fault ``command`` places on net ``label``.

    :param names: the net's bus names.
    :param vn_kv: pandapower bus -> its rated voltage (kV), for the buses a fault may be at (the
        energized buses of the net as loaded).
    :param base_mva: the net's base power (MVA).
    :param held: pandapower bus -> what holds its voltage (``"external grid 0"``), for the slack
        and PV buses.
    :param in_place: the faults in place, by name.
    :raises CommandError: a name in use, a resistance not above 0, an unknown, out-of-service or
        held bus, or an unbalanced fault (see the module docstring).
    """
    what = f"apply_fault {command.name!r} on net {label}"
    if command.name in in_place:
        raise CommandError(f"{what}: a fault of that name is already in place (clear_fault it first)")
    if not command.r_ohm > 0:
        raise CommandError(f"{what}: r_ohm must be above 0 (ohm per phase), got {command.r_ohm}")
    if command.phases not in (1, 2, 3):
        raise CommandError(f"{what}: phases must be 1, 2 or 3, got {command.phases}")
    found = _bus_and_nodes(command.bus1, names)
    if found is None:
        raise CommandError(f"{what}: unknown bus {command.bus1!r} (buses named {names.rule()}: {names.some()})")
    bus, nodes = found
    if nodes is not None:
        stray = sorted({n for n in nodes if not 1 <= n <= 3})
        if stray:
            raise CommandError(f"{what}: bus1 {command.bus1!r}: nodes {stray} are not phase conductors (1, 2, 3)")
        if len(nodes) != command.phases or len(set(nodes)) != len(nodes):
            raise CommandError(
                f"{what}: bus1 {command.bus1!r} names nodes {list(nodes)} for phases={command.phases}: give one "
                "distinct node per phase"
            )
    label_of = dict(zip(names.index, names.names))
    if command.bus2 is not None:
        other = _bus_and_nodes(command.bus2, names)
        if other is not None and other[0] == bus:
            raise CommandError(f"{what}: a fault between phases of one bus is unbalanced; {_PHASE_FRAME}")
        raise CommandError(
            f"{what}: a fault from bus1 to bus2 is not modelled on a balanced net; give no bus2 (three phases "
            "to ground at bus1)"
        )
    if command.phases < 3:
        kind = "single line-to-ground" if command.phases == 1 else "double line-to-ground"
        raise CommandError(f"{what}: a {kind} fault is unbalanced; {_PHASE_FRAME}")
    if bus not in vn_kv:
        raise CommandError(
            f"{what}: bus {label_of[bus]!r} is out of service or not connected to an external grid in the net"
        )
    if bus in held:
        raise CommandError(
            f"{what}: bus {label_of[bus]!r} holds its voltage at the setpoint of {held[bus]} (the power flow's "
            "slack or PV bus, reactive limits not enforced), so a fault there would change no voltage: fault a "
            "bus next to it"
        )
    return NetFault(command.name, bus, label_of[bus], command.r_ohm, vn_kv[bus] ** 2 / (command.r_ohm * base_mva))


def source_magnitude(command: SetSourceVoltage, label: str) -> float:
    """The external grids' voltage magnitude (pu) ``command`` sets on net ``label``.

    :raises CommandError: not one value or three, three unequal ones, or a value not above 0 or
        above :data:`MAX_SOURCE_PU`.
    """
    v = command.v_pu
    what = f"set_source_voltage on net {label}"
    if len(v) not in (1, 3):
        raise CommandError(f"{what}: v_pu takes one value or three (phases a, b, c), got {len(v)}: {list(v)}")
    if len(set(v)) != 1:
        raise CommandError(
            f"{what}: the phases differ ({list(v)}); the source of a balanced net has one positive-sequence "
            "voltage, so an unequal sag cannot be modelled there: model it on a phase-frame grid (a feeder, "
            "grid.feeder), or give equal phases"
        )
    if not 0 < v[0] <= MAX_SOURCE_PU:
        raise CommandError(f"{what}: v_pu must be above 0 and at most {MAX_SOURCE_PU:g} pu, got {v[0]}")
    return v[0]
