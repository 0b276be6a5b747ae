"""Faults in the phase-frame network: OpenDSS's ``Fault`` element.

A fault is a resistance ``r`` (ohm) from each of its ``phases`` conductors at ``bus1`` to the
matching conductor at ``bus2``, ground when there is no ``bus2``: one conductance ``G = 1 / r``
(S) per conductor, stamped as a two-terminal branch ``[[G, -G], [-G, G]]`` between its two nodes
(ground dropped). That is OpenDSS's ``Fault`` primitive admittance with its default ``Gmatrix``
(diagonal, no coupling between the conductors), on from the start of a snapshot (``ONtime=0``).
Bus names carry their nodes as OpenDSS writes them (``"671.1.2"``; node 0 is ground); a bus
without nodes means nodes 1 to ``phases``. So:

- line to ground (SLG): ``bus1=671.1``;
- line to line (LL): ``bus1=671.1 bus2=671.2``;
- double line to ground (LLG): ``bus1=671.1.2 phases=2``;
- three-phase to ground (3ph): ``bus1=671 phases=3``.

A fault in force is part of the network's switching state
(:attr:`~openg2g.grid.feeder.network.Switching.faults`): :func:`~openg2g.grid.feeder.network.admittance_stamps`
stamps it after every other element, and a fault between two nodes links them in
:func:`~openg2g.grid.feeder.network.energized`. This module reads a fault from a command
(:func:`fault_from_command`, checked against the feeder) or from OpenDSS's property text
(:func:`parse_fault`, the command line's ``--fault``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from openg2g.core.commands import ApplyFault
from openg2g.core.errors import CommandError
from openg2g.grid.feeder.model import FeederModel, node_label

__all__ = [
    "FAULT_PROPERTIES",
    "MAX_FAULT_PHASES",
    "OPENDSS_FAULT_R_OHM",
    "Fault",
    "fault_from_command",
    "fault_text",
    "parse_fault",
]

FAULT_PROPERTIES = ("bus1", "bus2", "phases", "r")
"""The properties of OpenDSS's ``Fault`` that :func:`parse_fault` takes."""

OPENDSS_FAULT_R_OHM = 0.0001
"""OpenDSS's default fault resistance ``r`` (ohm), a bolted fault (also :class:`ApplyFault`'s)."""

MAX_FAULT_PHASES = 3
"""Most conductors of one fault."""


@dataclass(frozen=True)
class Fault:
    """A fault checked against a feeder: its conductors as node pairs.

    :param command: the command that placed it (name, buses as given, phases, resistance).
    :param node_pairs: per conductor, the node at ``bus1`` and the node at ``bus2`` (-1: ground).
    """

    command: ApplyFault
    node_pairs: tuple[tuple[int, int], ...]

    @property
    def name(self) -> str:
        """The fault's name."""
        return self.command.name

    def stamps(self) -> list[tuple[list[int], np.ndarray]]:
        """Nodes and admittance block (S) of each conductor: ``G = 1 / r`` between its two nodes
        (a node -1, ground, is dropped when stamped)."""
        g = 1.0 / self.command.r_ohm
        block = g * np.array([[1.0, -1.0], [-1.0, 1.0]])
        return [([a, b], block) for a, b in self.node_pairs]

    def describe(self) -> str:
        """The fault in OpenDSS's property syntax (:func:`fault_text`)."""
        return fault_text(self.command)


def fault_text(command: ApplyFault) -> str:
    """A fault command in OpenDSS's ``Fault`` property syntax, ``"bus1=671.1 phases=1 r=0.0001"``
    (what :func:`parse_fault` reads back)."""
    bus2 = f" bus2={command.bus2}" if command.bus2 is not None else ""
    return f"bus1={command.bus1}{bus2} phases={command.phases} r={command.r_ohm:g}"


def _terminal(
    where: str,
    field: str,
    text: str,
    phases: int,
    model: FeederModel,
    index: Mapping[tuple[str, str], int],
    ground_ok: bool,
) -> list[int]:
    """Node of each of the ``phases`` conductors at bus-with-nodes ``text`` (-1 for node 0, ground,
    where ``ground_ok``).

    :raises CommandError: unknown bus or node, a node count other than ``phases``, a node listed twice.
    """
    bus, *parts = text.strip().lower().split(".")
    if bus not in model.bus_phases:
        raise CommandError(f"{where}: {field}: unknown bus {bus!r} on feeder {model.name} (in {text!r})")
    present = ", ".join(str(n) for n in _node_numbers(model.bus_phases[bus]))
    if not parts:
        numbers = list(range(1, phases + 1))
    else:
        numbers = []
        for part in parts:
            if not part.strip().isdigit():
                raise CommandError(
                    f"{where}: {field}: {text!r}: node {part!r} is not a node number (bus {bus}: {present})"
                )
            numbers.append(int(part))
        if len(numbers) != phases:
            raise CommandError(
                f"{where}: {field}: {text!r} lists {len(numbers)} node(s) for a fault of {phases} phase(s) "
                "(give one node per phase, or none for nodes 1 to phases)"
            )
    if len(set(numbers)) != len(numbers):
        raise CommandError(f"{where}: {field}: {text!r} lists a node twice")
    nodes = []
    for n in numbers:
        if n == 0:
            if not ground_ok:
                raise CommandError(f"{where}: {field}: {text!r}: node 0 is ground; bus1 names the faulted conductors")
            nodes.append(-1)
            continue
        label = node_label(n)
        if label is None or (bus, label) not in index:
            raise CommandError(f"{where}: {field}: bus {bus} has no node {n} (its nodes: {present})")
        nodes.append(index[(bus, label)])
    return nodes


def _node_numbers(labels: tuple[str, ...]) -> list[int]:
    """OpenDSS node numbers of a bus's node labels, in increasing order."""
    return sorted(("abc".index(lb) + 1) if lb in ("a", "b", "c") else int(lb) for lb in labels)


def fault_from_command(command: ApplyFault, model: FeederModel, index: Mapping[tuple[str, str], int]) -> Fault:
    """The fault ``command`` places on ``model``, its conductors numbered by ``index``
    (``(bus, node label)`` -> node, :attr:`~openg2g.grid.feeder.network.NodeIndex.index`).

    :raises CommandError: naming the command and the field: ``phases`` not 1 to 3, ``r_ohm`` not
        > 0, an unknown bus or node, a node list whose length is not ``phases``, a node listed twice,
        a conductor whose two ends are one node.
    """
    where = f"apply_fault {command.name!r}"
    if not 1 <= command.phases <= MAX_FAULT_PHASES:
        raise CommandError(f"{where}: phases: {command.phases} (a fault has 1 to {MAX_FAULT_PHASES} conductors)")
    if not command.r_ohm > 0:
        raise CommandError(f"{where}: r_ohm: {command.r_ohm!r} ohm (must be > 0; OpenDSS's bolted fault is 0.0001)")
    ends1 = _terminal(where, "bus1", command.bus1, command.phases, model, index, ground_ok=False)
    if command.bus2 is None:
        ends2 = [-1] * command.phases
    else:
        ends2 = _terminal(where, "bus2", command.bus2, command.phases, model, index, ground_ok=True)
    for k, (a, b) in enumerate(zip(ends1, ends2)):
        if a == b:
            raise CommandError(
                f"{where}: bus2: conductor {k + 1} joins node {command.bus1!r} to itself (bus2 {command.bus2!r})"
            )
    return Fault(command, tuple(zip(ends1, ends2)))


def parse_fault(text: str, name: str) -> ApplyFault:
    """The fault of OpenDSS property text ``"bus1=671.1 phases=1 r=0.01"`` (properties
    :data:`FAULT_PROPERTIES`, separated by spaces, any order, names in any case; ``phases``
    defaults to 1 and ``r`` to :data:`OPENDSS_FAULT_R_OHM`, as in OpenDSS), named ``name``. The
    buses and nodes are checked against a feeder when the fault is applied (:func:`fault_from_command`).

    :raises CommandError: the message starts with ``text`` quoted, then names the property: one
        without a value, unknown, given twice, ``bus1`` missing, ``phases`` not a whole number 1 to
        3, ``r`` not a finite number > 0.
    """
    known = ", ".join(FAULT_PROPERTIES)
    values: dict[str, str] = {}
    for item in text.split():
        prop, eq, value = item.partition("=")
        prop = prop.lower()
        if not eq or not prop or not value:
            raise CommandError(f"{text!r}: {item!r} is not property=value (properties: {known})")
        if prop not in FAULT_PROPERTIES:
            raise CommandError(f"{text!r}: {prop}: not a property taken here (properties: {known})")
        if prop in values:
            raise CommandError(f"{text!r}: {prop}: given twice")
        values[prop] = value
    if "bus1" not in values:
        raise CommandError(f"{text!r}: bus1: missing (the faulted bus with its nodes, e.g. bus1=671.1)")
    phases_text = values.get("phases", "1")
    if not phases_text.isdigit() or not 1 <= int(phases_text) <= MAX_FAULT_PHASES:
        raise CommandError(f"{text!r}: phases: {phases_text!r} is not a whole number 1 to {MAX_FAULT_PHASES}")
    r_text = values.get("r", repr(OPENDSS_FAULT_R_OHM))
    try:
        r_ohm = float(r_text)
    except ValueError:
        r_ohm = math.nan
    if not (math.isfinite(r_ohm) and r_ohm > 0):
        raise CommandError(f"{text!r}: r: {r_text!r} is not a resistance in ohm (a finite number > 0)")
    return ApplyFault(name=name, bus1=values["bus1"], phases=int(phases_text), r_ohm=r_ohm, bus2=values.get("bus2"))
