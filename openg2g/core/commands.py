"""Commands: the small typed values that controllers and scenario events send to components.

A command is a frozen dataclass. Datacenter commands name the ``site`` they act on; grid
commands name the grid element. The engine routes each command by its type (see
:func:`is_datacenter_command`) and the receiving backend validates it: a command outside the
component's limits raises :class:`~openg2g.core.errors.CommandError`, it is never clamped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "COMMANDS",
    "Command",
    "DatacenterCommand",
    "GridCommand",
    "SetBatchSize",
    "SetCapacitor",
    "SetInferenceScale",
    "SetLineInService",
    "SetLoadScale",
    "SetPVScale",
    "SetPowerCap",
    "SetRegulatorMode",
    "SetReplicas",
    "SetSiteOnline",
    "SetStoragePower",
    "SetTaps",
    "ShiftReplicas",
    "command_name",
    "is_datacenter_command",
]


@dataclass(frozen=True)
class Command:
    """Base of all commands."""


@dataclass(frozen=True)
class DatacenterCommand(Command):
    """A command for one datacenter site.

    :param site: name of the site, as in the scenario file.
    """

    site: str


@dataclass(frozen=True)
class GridCommand(Command):
    """A command for the grid backend."""


@dataclass(frozen=True)
class SetBatchSize(DatacenterCommand):
    """Set the serving batch size (vLLM ``max_num_seqs``) of every replica of one model.

    :param model: model name as in the trace library (e.g. ``"Llama-3.1-8B"``).
    :param batch_size: one of the batch sizes measured for that model.
    """

    model: str
    batch_size: int


@dataclass(frozen=True)
class SetPowerCap(DatacenterCommand):
    """Cap GPU board power.

    :param cap_w_per_gpu: power cap per GPU (W); ``None`` removes the cap.
    :param model: model whose GPUs are capped; ``None`` caps every model at the site.
    """

    cap_w_per_gpu: float | None
    model: str | None = None


@dataclass(frozen=True)
class SetReplicas(DatacenterCommand):
    """Start or stop replicas of one model so that ``replicas`` are active after ``ramp_s`` seconds.

    :param model: model name.
    :param replicas: target number of active replicas (>= 0, within the site's GPU capacity).
    :param ramp_s: duration of the linear ramp (s); 0 switches at once.
    """

    model: str
    replicas: int
    ramp_s: float = 0.0


@dataclass(frozen=True)
class ShiftReplicas(DatacenterCommand):
    """Move ``replicas`` replicas of ``model`` from ``site`` to ``to_site`` over ``ramp_s`` seconds."""

    model: str
    replicas: int
    to_site: str
    ramp_s: float = 0.0


@dataclass(frozen=True)
class SetInferenceScale(DatacenterCommand):
    """Scale every model's active replicas to ``fraction`` of its configured count over ``ramp_s`` s.

    The way a scenario writes "inference ramps down to 50% between 2500 s and 3000 s".
    """

    fraction: float
    ramp_s: float = 0.0


@dataclass(frozen=True)
class SetSiteOnline(DatacenterCommand):
    """Take a whole site off the grid (``online=False``: an outage) or bring it back."""

    online: bool


@dataclass(frozen=True)
class SetTaps(GridCommand):
    """Fix a regulator bank's per-phase tap positions (steps, e.g. +10 = 1.0625 pu at 0.00625/step).

    :param bank: regulator bank name as the feeder names it (``"reg1"``).
    :param taps: one integer step per regulated phase of the bank, in phase order.
    """

    bank: str
    taps: tuple[int, ...]


@dataclass(frozen=True)
class SetRegulatorMode(GridCommand):
    """Switch a regulator bank between fixed taps (``"fixed"``) and its own band control (``"auto"``)."""

    bank: str
    mode: str


@dataclass(frozen=True)
class SetCapacitor(GridCommand):
    """Close (``closed=True``) or open a shunt capacitor bank."""

    name: str
    closed: bool


@dataclass(frozen=True)
class SetStoragePower(GridCommand):
    """Battery setpoint: active power ``p_kw`` (> 0 discharges into the grid) and reactive ``q_kvar``."""

    name: str
    p_kw: float
    q_kvar: float = 0.0


@dataclass(frozen=True)
class SetLoadScale(GridCommand):
    """Scale the feeder's own loads (all, or the one named ``load``) to ``scale`` x their base value."""

    scale: float
    load: str | None = None


@dataclass(frozen=True)
class SetPVScale(GridCommand):
    """Scale PV output (all PV, or the one named ``pv``) to ``scale`` x its rating (irradiance step)."""

    scale: float
    pv: str | None = None


@dataclass(frozen=True)
class SetLineInService(GridCommand):
    """Open (``in_service=False``: outage) or close a line or switch."""

    line: str
    in_service: bool


def is_datacenter_command(command: Command) -> bool:
    """True for commands the engine routes to a datacenter site rather than to the grid."""
    return isinstance(command, DatacenterCommand)


def command_name(cls: type[Command]) -> str:
    """The snake_case name a scenario file uses for a command class (``SetTaps`` -> ``set_taps``)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", cls.__name__).lower()


COMMANDS: dict[str, type[Command]] = {
    command_name(cls): cls
    for cls in (
        SetBatchSize,
        SetPowerCap,
        SetReplicas,
        ShiftReplicas,
        SetInferenceScale,
        SetSiteOnline,
        SetTaps,
        SetRegulatorMode,
        SetCapacitor,
        SetStoragePower,
        SetLoadScale,
        SetPVScale,
        SetLineInService,
    )
}
"""Every command a scenario event or a controller may send, by its snake_case name."""
