"""A run's disturbances as the engine carries them out: their commands, records and fine-step windows."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from openg2g.core.commands import Command

__all__ = ["DisturbancePlan", "DisturbanceRecord"]


@dataclass(frozen=True)
class DisturbanceRecord:
    """One disturbance as it will play out.

    :param name: its name.
    :param kind: ``fault``, ``line_trip`` or ``source_sag``.
    :param start_s: when it starts (s).
    :param end_s: its last command's time (s): the last clearing, reclose or sag point.
    :param outcome: what the sequence ends in: ``cleared`` (no reclosing), ``reclosed`` (a reclose
        found the fault gone), ``lockout`` (the line stays open), ``open``, ``closed`` (a line trip),
        ``restored`` (a sag's last point).
    """

    name: str
    kind: str
    start_s: Fraction
    end_s: Fraction
    outcome: str


@dataclass(frozen=True)
class DisturbancePlan:
    """The commands that carry out a scenario's disturbances, and the refined windows.

    :param commands: ``(time, command, disturbance name)`` in time order (s).
    :param windows: ``(start, end)`` intervals (s), sorted and disjoint, on the grid period's grid.
    :param records: the disturbances, in the file's order.
    :param step_s: the step inside the windows (s).
    """

    commands: tuple[tuple[Fraction, Command, str], ...]
    windows: tuple[tuple[Fraction, Fraction], ...]
    records: tuple[DisturbanceRecord, ...]
    step_s: Fraction
