"""Commands: the small typed values that controllers and scenario events send to components.

A command is a frozen dataclass. Datacenter commands name the ``site`` they act on; grid
commands name the grid element. Every field is type-checked when the command is made (a
``bool`` is not a number, ``1.5`` is not a tap step, ``"no"`` is not ``False``; numbers must be
finite): a wrong type raises :class:`~openg2g.core.errors.CommandError` naming the command and
the field. The engine routes each command by its type (see :func:`is_datacenter_command`) and
the receiving backend checks its limits: a command outside them raises ``CommandError``, it is
never clamped.

Each command names the settings it writes (:meth:`Command.actuators`): an :class:`Actuator` is a
kind of setting and the path of names that locate it. A setting has one owner among a run's
controllers; the engine refuses a second controller writing it (see ``docs/controllers.md``).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeGuard

import numpy as np

from openg2g.core.errors import CommandError, ControllerError

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "ACTUATOR_LEVELS",
    "COMMANDS",
    "Actuator",
    "ApplyFault",
    "ClearFault",
    "Command",
    "DatacenterCommand",
    "GridCommand",
    "ReleaseBlock",
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
    "SetSourceVoltage",
    "SetStoragePower",
    "SetTaps",
    "ShiftReplicas",
    "command_name",
    "is_datacenter_command",
    "renamed_fields",
]


def _integer(value: Any) -> int | None:
    """``value`` as an ``int`` when it is a whole number (``3``, ``numpy.int64(3)``, ``3.0``)."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer():
        return int(float(value))
    return None


def _real(value: Any) -> float | None:
    """``value`` as a finite ``float`` when it is a real number other than a boolean."""
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)) and math.isfinite(value):
        return float(value)
    return None


# annotation text -> (converter returning None for a wrong value, what the field expects)
_Check = tuple[Callable[[Any], Any], str]
_SCALARS: dict[str, _Check] = {
    "str": (lambda v: v if isinstance(v, str) else None, "a string"),
    "bool": (lambda v: bool(v) if isinstance(v, (bool, np.bool_)) else None, "true or false"),
    "int": (_integer, "a whole number"),
    "float": (_real, "a finite number"),
}


def _field_check(annotation: str) -> tuple[Callable[[Any], Any], str, bool]:
    """(converter, expectation, None allowed) of a command field's annotation text."""
    optional = annotation.endswith(" | None")
    base = annotation.removesuffix(" | None")
    if base == "tuple[int, ...]":

        def taps(value: Any) -> tuple[int, ...] | None:
            if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list)):
                return None
            items = [_integer(x) for x in value]
            return None if any(x is None for x in items) else tuple(typing.cast(list[int], items))

        return taps, "a list of whole numbers", optional
    if base == "tuple[float, ...]":

        def reals(value: Any) -> tuple[float, ...] | None:
            if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list)) or not value:
                return None
            items = [_real(x) for x in value]
            return None if any(x is None for x in items) else tuple(typing.cast(list[float], items))

        return reals, "a non-empty list of finite numbers", optional
    convert, expected = _SCALARS[base]
    return convert, expected, optional


ACTUATOR_LEVELS: dict[str, tuple[str, ...]] = {
    "batch_size": ("site", "model"),
    "power_cap": ("site", "model"),
    "replicas": ("site", "model"),
    "site_online": ("site",),
    "ride_through": ("site", "block"),
    "regulator": ("bank",),
    "capacitor": ("capacitor",),
    "storage": ("battery",),
    "load_scale": ("load",),
    "pv_scale": ("pv",),
    "line": ("line",),
    "fault": ("fault",),
    "source": (),
}
"""Kind of setting -> what each name of an :class:`Actuator` path stands for, outermost first."""


@dataclass(frozen=True)
class Actuator:
    """One setting commands write: its ``kind`` (a key of :data:`ACTUATOR_LEVELS`) and the ``path``
    of names that locate it (``("dc1", "Llama-3.1-8B")`` for a model's batch size at site dc1).

    A shorter path stands for every setting below it: ``Actuator("power_cap", ("dc1",))`` is the cap
    of every model at dc1, ``Actuator("load_scale", ())`` the scale of every feeder load.
    """

    kind: str
    path: tuple[str, ...]

    def __post_init__(self) -> None:
        levels = ACTUATOR_LEVELS.get(self.kind)
        if levels is None:
            raise ControllerError(f"unknown actuator kind {self.kind!r}; valid: {sorted(ACTUATOR_LEVELS)}")
        if len(self.path) > len(levels):
            raise ControllerError(f"actuator {self.kind} has {len(levels)} levels {levels}, got path {self.path}")

    def overlaps(self, other: Actuator) -> bool:
        """True when both name one setting, or one of them covers the other."""
        n = min(len(self.path), len(other.path))
        return self.kind == other.kind and self.path[:n] == other.path[:n]

    def __str__(self) -> str:
        levels = ACTUATOR_LEVELS[self.kind]
        parts = [f"{level} {name!r}" for level, name in zip(levels, self.path)]
        if len(self.path) < len(levels):
            parts.append(f"every {levels[len(self.path)]}")
        return f"{self.kind} of {', '.join(parts)}"


@dataclass(frozen=True)
class Command(ABC):
    """Base of all commands; checks (and normalizes, e.g. ``numpy.int64`` to ``int``) every field."""

    _checks: ClassVar[dict[type, list[tuple[str, Callable[[Any], Any], str, bool]]]] = {}

    renamed: ClassVar[dict[str, str]] = {}
    """Former field name -> what replaced it; a command given a former name is refused, naming the new one."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        # runs before the dataclass __init__, which would only say "unexpected keyword argument"
        old = renamed_fields(cls, kwargs)
        if old:
            raise CommandError(f"{cls.__name__}: {old}")
        return super().__new__(cls)

    def __post_init__(self) -> None:
        cls = type(self)
        checks = Command._checks.get(cls)
        if checks is None:
            checks = [(f.name, *_field_check(str(f.type))) for f in dataclasses.fields(cls)]
            Command._checks[cls] = checks
        for name, convert, expected, optional in checks:
            value = getattr(self, name)
            if value is None and optional:
                continue
            converted = convert(value)
            if converted is None:
                raise CommandError(
                    f"{cls.__name__}.{name}: expected {expected}{' or None' if optional else ''}, "
                    f"got {value!r} ({type(value).__name__})"
                )
            object.__setattr__(self, name, converted)  # frozen: set the normalized value once, here

    @abstractmethod
    def actuators(self) -> tuple[Actuator, ...]:
        """The settings this command writes (the engine gives each one owner)."""


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

    def actuators(self) -> tuple[Actuator, ...]:
        return (Actuator("batch_size", (self.site, self.model)),)


@dataclass(frozen=True)
class SetPowerCap(DatacenterCommand):
    """Cap GPU board power.

    :param cap_w_per_gpu: power cap per GPU (W), 200-700 W; ``None`` removes the cap. Caps below
        602 W, outside what the power-cap model is calibrated on, are counted in the run summary.
    :param model: model whose GPUs are capped; ``None`` caps every model at the site.
    """

    cap_w_per_gpu: float | None
    model: str | None = None

    def actuators(self) -> tuple[Actuator, ...]:
        return (Actuator("power_cap", (self.site,) if self.model is None else (self.site, self.model)),)


@dataclass(frozen=True)
class SetReplicas(DatacenterCommand):
    """Start or stop replicas of one model so that ``replicas`` are active after ``ramp_s`` seconds.

    :param model: model name.
    :param replicas: target number of active replicas, a whole number (>= 0, within the site's GPU
        capacity). Replicas are started and stopped whole; the fractional counts a site reports
        during a ramp are the ramp's progress, so a fractional target is refused.
    :param ramp_s: duration of the linear ramp (s); 0 switches at once.
    """

    model: str
    replicas: int
    ramp_s: float = 0.0

    def actuators(self) -> tuple[Actuator, ...]:
        return (Actuator("replicas", (self.site, self.model)),)


@dataclass(frozen=True)
class ShiftReplicas(DatacenterCommand):
    """Move ``replicas`` replicas of ``model`` from ``site`` to ``to_site`` over ``ramp_s`` seconds."""

    model: str
    replicas: int
    to_site: str
    ramp_s: float = 0.0

    def actuators(self) -> tuple[Actuator, ...]:
        return (Actuator("replicas", (self.site, self.model)), Actuator("replicas", (self.to_site, self.model)))


@dataclass(frozen=True)
class SetInferenceScale(DatacenterCommand):
    """Scale every model's active replicas to ``fraction`` of its configured count over ``ramp_s`` s.

    The way a scenario writes "inference ramps down to 50% between 2500 s and 3000 s". Replicas are
    whole: each model aims at the count nearest ``fraction`` times its configured replicas, a half
    rounded up (0.333 of 90 is 30 replicas, 0.5 of 45 is 23).
    """

    fraction: float
    ramp_s: float = 0.0

    def actuators(self) -> tuple[Actuator, ...]:
        return (Actuator("replicas", (self.site,)),)


@dataclass(frozen=True)
class SetSiteOnline(DatacenterCommand):
    """Take a whole site off the grid (``online=False``: an outage) or bring it back."""

    online: bool

    def actuators(self) -> tuple[Actuator, ...]:
        return (Actuator("site_online", (self.site,)),)


@dataclass(frozen=True)
class ReleaseBlock(DatacenterCommand):
    """Let a block of a site's ride-through (``ride_through.blocks``) return to the grid, under
    ``return_to_service.mode: commanded``: its ramp starts at once if the supply has been back
    inside the return band for ``delay_s``, else as soon as it has. A controller paces a site's
    return by releasing its blocks one at a time.

    :param block: the block's name.
    :param ramp_s: duration of its linear return ramp (s), >= 0; ``None``: the site's
        ``return_to_service.ramp_s``.
    """

    block: str
    ramp_s: float | None = None

    def actuators(self) -> tuple[Actuator, ...]:
        return (Actuator("ride_through", (self.site, self.block)),)


@dataclass(frozen=True)
class SetTaps(GridCommand):
    """Fix a regulator bank's per-phase tap positions (steps, e.g. +10 = 1.0625 pu at 0.00625/step).

    :param bank: regulator bank name as the feeder names it (``"reg1"``).
    :param taps: one integer step per regulated phase of the bank, in phase order.
    """

    bank: str
    taps: tuple[int, ...]

    def actuators(self) -> tuple[Actuator, ...]:
        return (Actuator("regulator", (self.bank,)),)


@dataclass(frozen=True)
class SetRegulatorMode(GridCommand):
    """Switch a regulator bank between fixed taps (``"fixed"``) and its own band control (``"auto"``)."""

    bank: str
    mode: str

    def actuators(self) -> tuple[Actuator, ...]:
        return (Actuator("regulator", (self.bank,)),)


@dataclass(frozen=True)
class SetCapacitor(GridCommand):
    """Close (``closed=True``) or open a shunt capacitor bank, at once. Under automatic capacitor
    control (``grid.capacitor_control: auto``) the bank's own control goes on from the new state, as
    OpenDSS's does after a script switches a bank: it switches the bank again when its settings call
    for it (a manual opening does not start its dead time)."""

    name: str
    closed: bool

    def actuators(self) -> tuple[Actuator, ...]:
        return (Actuator("capacitor", (self.name,)),)


@dataclass(frozen=True)
class SetStoragePower(GridCommand):
    """Battery setpoint, held until the next one or until the state of charge reaches a limit.

    :param name: battery name, as in the scenario's ``grid.storage``.
    :param p_w: active power (W); > 0 discharges into the grid, < 0 charges.
    :param q_var: reactive power (var); > 0 injects into the grid.
    """

    renamed: ClassVar[dict[str, str]] = {
        "p_kw": "p_w, in W (it was in kW: multiply by 1000)",
        "q_kvar": "q_var, in var (it was in kvar: multiply by 1000)",
    }

    name: str
    p_w: float
    q_var: float = 0.0

    def actuators(self) -> tuple[Actuator, ...]:
        return (Actuator("storage", (self.name,)),)


@dataclass(frozen=True)
class SetLoadScale(GridCommand):
    """Scale the feeder's own loads (all, or the one named ``load``) to ``scale`` x their base value."""

    scale: float
    load: str | None = None

    def actuators(self) -> tuple[Actuator, ...]:
        return (Actuator("load_scale", () if self.load is None else (self.load,)),)


@dataclass(frozen=True)
class SetPVScale(GridCommand):
    """Scale PV output (all PV, or the one named ``pv``) to ``scale`` x its rating (irradiance step)."""

    scale: float
    pv: str | None = None

    def actuators(self) -> tuple[Actuator, ...]:
        return (Actuator("pv_scale", () if self.pv is None else (self.pv,)),)


@dataclass(frozen=True)
class SetLineInService(GridCommand):
    """Open (``in_service=False``: outage) or close a line or switch. A datacenter site whose bus
    it cuts off from the source draws and serves nothing until supply returns."""

    line: str
    in_service: bool

    def actuators(self) -> tuple[Actuator, ...]:
        return (Actuator("line", (self.line,)),)


@dataclass(frozen=True)
class ApplyFault(GridCommand):
    """Place a fault, as OpenDSS's ``Fault`` element describes one: a resistance of ``r_ohm`` from
    each of the ``phases`` conductors at ``bus1`` to the matching conductor at ``bus2`` (ground when
    ``bus2`` is ``None``). Bus names carry their nodes as OpenDSS writes them: ``"671.1"`` (node 1,
    phase a), ``"671.1.2"``; a bus without nodes means nodes 1 to ``phases``. So ``bus1="671.1"``
    is a line-to-ground fault on phase a, ``bus1="671.1", bus2="671.2"`` a line-to-line fault between
    a and b, ``bus1="671.1.2", phases=2`` a double line-to-ground fault, ``bus1="671", phases=3`` a
    three-phase fault to ground. The fault stays until a :class:`ClearFault` names it.

    :param name: the fault's name (unique among the faults in place).
    :param bus1: bus, with nodes.
    :param phases: conductors of the fault (1-3).
    :param r_ohm: resistance of each conductor (ohm), > 0.
    :param bus2: the other end, with nodes; ``None`` for ground.
    """

    name: str
    bus1: str
    phases: int = 1
    r_ohm: float = 0.0001
    bus2: str | None = None

    def actuators(self) -> tuple[Actuator, ...]:
        return (Actuator("fault", (self.name,)),)


@dataclass(frozen=True)
class ClearFault(GridCommand):
    """Remove the fault ``name`` placed by :class:`ApplyFault` (the arc extinguished, or the
    faulted equipment isolated)."""

    name: str

    def actuators(self) -> tuple[Actuator, ...]:
        return (Actuator("fault", (self.name,)),)


@dataclass(frozen=True)
class SetSourceVoltage(GridCommand):
    """Set the source voltage magnitude per phase, a sag or swell arriving from upstream of the
    feeder or net; angles stay the source's own.

    :param v_pu: the magnitude per source phase a, b, c (pu of the source bus's base voltage), or
        one value for every phase; ``[0.5, 1.0, 1.0]`` is a sag to 50% on phase a.
    """

    v_pu: tuple[float, ...]

    def actuators(self) -> tuple[Actuator, ...]:
        return (Actuator("source", ()),)


def renamed_fields(cls: type[Command], fields: Iterable[str]) -> str:
    """A sentence naming the former field names among ``fields`` and their replacements ("" if none)."""
    old = [name for name in fields if name in cls.renamed]
    return "; ".join(f"field {name!r} was renamed to {cls.renamed[name]}" for name in old)


def is_datacenter_command(command: Command) -> TypeGuard[DatacenterCommand]:
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
        ReleaseBlock,
        SetTaps,
        SetRegulatorMode,
        SetCapacitor,
        SetStoragePower,
        SetLoadScale,
        SetPVScale,
        SetLineInService,
        ApplyFault,
        ClearFault,
        SetSourceVoltage,
    )
}
"""Every command a scenario event or a controller may send, by its snake_case name."""
