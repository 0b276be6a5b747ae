"""Grid disturbances in a scenario file: faults with their reclosing, line trips, source sags.

A scenario's ``disturbances`` block lists what happens to the grid and when; :func:`plan`
expands it into the timed grid commands that carry it out (:class:`~openg2g.core.commands.ApplyFault`,
:class:`~openg2g.core.commands.ClearFault`, :class:`~openg2g.core.commands.SetLineInService`,
:class:`~openg2g.core.commands.SetSourceVoltage`) and the **windows** in which the engine refines its
datacenter and grid steps to ``window.step_s`` (one cycle by default).

A **fault** starts at ``start_s`` and lasts ``clearing_s``, the time its protection takes to clear
it. Without ``reclosing`` it is simply gone then (cleared upstream, or self-extinguished). With
``reclosing`` the protective device opens ``reclosing.line`` as it clears the fault and closes it
again after each dead time; at each reclose the fault is there again if it is permanent
(``persists_s`` None) or still burning (the reclose comes before ``start_s + persists_s``), and the
device opens again ``clearing_s`` later. After the last dead time a fault still there **locks the
line out**: it stays open. A reclose onto a fault that is gone succeeds and ends the sequence.

Fault types as OpenDSS's ``Fault`` element builds them (a resistance ``r_ohm`` per conductor):
``slg`` one phase to ground; ``ll`` between two phases; ``llg`` two phases each to ground; ``3ph``
three phases each to ground.

A **line trip** opens a line at ``start_s`` and, with ``reclose_after_s``, closes it again. A
**source sag** sets the source voltage per phase at the times of its profile, held from one point
to the next; its last point's voltage stays (write the source's own voltage there to end it).

Each command's instant ``t`` opens a window ``[t - before_s, t + after_s]``; overlapping windows
merge, and each is widened to whole grid periods so that the regular steps resume on their own
grid. The solve at ``t`` is the first to see what happens at ``t`` and stands for the step ending
at ``t``, so a window always starts before ``t`` (at the latest one grid period before it).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from openg2g.core.commands import ApplyFault, ClearFault, Command, SetLineInService, SetSourceVoltage
from openg2g.core.config import ConfigModel, Name, Seconds, check_run_time
from openg2g.core.state import PHASES
from openg2g.engine.disturbances import DisturbancePlan, DisturbanceRecord

__all__ = [
    "DisturbanceSpec",
    "FaultDisturbance",
    "LineTripDisturbance",
    "Reclosing",
    "SagPoint",
    "SourceSagDisturbance",
    "WindowSpec",
    "fault_command",
    "plan",
]

FaultType = Literal["slg", "ll", "llg", "3ph"]

_PHASE_COUNT: dict[str, int] = {"slg": 1, "ll": 2, "llg": 2, "3ph": 3}
"""Faulted phases of each fault type."""

_DEFAULT_PHASES: dict[str, str] = {"slg": "a", "ll": "ab", "llg": "ab", "3ph": "abc"}


def _positive(v: Fraction) -> Fraction:
    return check_run_time(v, zero_ok=False)


def _instant(v: Fraction) -> Fraction:
    return check_run_time(v, zero_ok=True, later=True)


class WindowSpec(ConfigModel):
    """How the engine resolves time around each disturbance."""

    step_s: Seconds = Field(
        Fraction(1, 60),
        description=(
            "Datacenter and grid step inside a window (s): one cycle at 60 Hz by default (1/50 for a "
            "50 Hz system). The grid and datacenter periods must be whole multiples of it."
        ),
    )
    before_s: Seconds = Field(Fraction(0), description="Window start before each disturbance instant (s).")
    after_s: Seconds = Field(
        Fraction(1),
        description="Window end after each disturbance instant (s): a fault's clearing, a reclose, a sag point.",
    )

    @field_validator("step_s")
    @classmethod
    def _step(cls, v: Fraction) -> Fraction:
        return _positive(v)

    @field_validator("before_s", "after_s")
    @classmethod
    def _margin(cls, v: Fraction) -> Fraction:
        return check_run_time(v, zero_ok=True)


class Reclosing(ConfigModel):
    """The protective device that clears a fault by opening a line, and its reclosing sequence."""

    line: Name = Field(description="Line or switch the device opens (the feeder's or net's name).")
    dead_times_s: list[Seconds] = Field(
        min_length=1,
        description=(
            "Open time before each reclose attempt (s), in order; after the last one a fault still there "
            "locks the line out (it stays open)."
        ),
    )

    @field_validator("dead_times_s")
    @classmethod
    def _dead_times(cls, v: list[Fraction]) -> list[Fraction]:
        return [_positive(t) for t in v]


class FaultDisturbance(ConfigModel):
    """A fault at a bus, cleared after ``clearing_s``, with an optional reclosing sequence."""

    kind: Literal["fault"]
    name: Name | None = Field(None, description="Name in the events table; default fault<i> (its place in the list).")
    bus: Name = Field(description="Faulted bus.")
    type: FaultType = Field(description="slg, ll, llg or 3ph.")
    phases: str | None = Field(
        None,
        description="Faulted phases, e.g. 'a' (slg), 'bc' (ll, llg); default a, ab, ab, abc by type.",
    )
    r_ohm: float = Field(0.0001, gt=0, le=1e6, description="Fault resistance per conductor (ohm); 1e-4: bolted.")
    start_s: Seconds = Field(description="Fault inception (s).")
    clearing_s: Seconds = Field(description="Time from inception (or each reclose onto it) to clearing (s).")
    persists_s: Seconds | None = Field(
        None,
        description=(
            "A temporary fault extinguishes this long after start_s, so a reclose after that succeeds; "
            "None: permanent. Needs reclosing."
        ),
    )
    reclosing: Reclosing | None = Field(None, description="Device and dead times; None: cleared once, nothing opens.")

    @field_validator("start_s")
    @classmethod
    def _start(cls, v: Fraction) -> Fraction:
        return _instant(v)

    @field_validator("clearing_s", "persists_s")
    @classmethod
    def _length(cls, v: Fraction | None) -> Fraction | None:
        return None if v is None else _positive(v)

    @model_validator(mode="after")
    def _consistent(self) -> FaultDisturbance:
        phases = self.fault_phases()
        want = _PHASE_COUNT[self.type]
        if len(phases) != want or len(set(phases)) != want or any(p not in PHASES for p in phases):
            raise ValueError(f"phases {self.phases!r}: a {self.type} fault needs {want} distinct phase(s) of a, b, c")
        if self.persists_s is not None and self.reclosing is None:
            raise ValueError("persists_s says when a temporary fault is gone for a reclose: it needs reclosing")
        return self

    def fault_phases(self) -> str:
        """The faulted phases, in the order given (``"ab"``)."""
        return self.phases if self.phases is not None else _DEFAULT_PHASES[self.type]


class LineTripDisturbance(ConfigModel):
    """A line opened (a trip) and optionally closed again."""

    kind: Literal["line_trip"]
    name: Name | None = Field(None, description="Name in the events table; default line_trip<i>.")
    line: Name = Field(description="Line or switch that opens.")
    start_s: Seconds = Field(description="Trip time (s).")
    reclose_after_s: Seconds | None = Field(None, description="Time open before it closes again (s); None: stays open.")

    @field_validator("start_s")
    @classmethod
    def _start(cls, v: Fraction) -> Fraction:
        return _instant(v)

    @field_validator("reclose_after_s")
    @classmethod
    def _reclose(cls, v: Fraction | None) -> Fraction | None:
        return None if v is None else _positive(v)


class SagPoint(ConfigModel):
    """One point of a source sag profile: the source voltage from ``after_s`` on."""

    after_s: Seconds = Field(description="Time after the sag's start (s).")
    v_pu: list[Annotated[float, Field(ge=0, le=2)]] = Field(
        min_length=1,
        max_length=3,
        description="Source voltage magnitude per phase a, b, c (pu of the source bus base), or one for all.",
    )

    @field_validator("after_s")
    @classmethod
    def _after(cls, v: Fraction) -> Fraction:
        return check_run_time(v, zero_ok=True)

    @field_validator("v_pu")
    @classmethod
    def _phases(cls, v: list[float]) -> list[float]:
        if len(v) == 2:
            raise ValueError("give one voltage for every phase or three, one per phase a, b, c")
        return v


class SourceSagDisturbance(ConfigModel):
    """A voltage sag (or swell) arriving from upstream: the source voltage per phase over time."""

    kind: Literal["source_sag"]
    name: Name | None = Field(None, description="Name in the events table; default source_sag<i>.")
    start_s: Seconds = Field(description="Sag start (s).")
    profile: list[SagPoint] = Field(
        min_length=2,
        description=(
            "Source voltage from each point's after_s on, held to the next point; the first at after_s 0, "
            "times increasing; the last point's voltage stays (the source's own voltage ends the sag)."
        ),
    )

    @field_validator("start_s")
    @classmethod
    def _start(cls, v: Fraction) -> Fraction:
        return _instant(v)

    @model_validator(mode="after")
    def _increasing(self) -> SourceSagDisturbance:
        times = [p.after_s for p in self.profile]
        if times[0] != 0:
            raise ValueError(f"profile.0.after_s must be 0 (the sag's start), got {times[0]}")
        for i in range(1, len(times)):
            if times[i] <= times[i - 1]:
                raise ValueError(f"profile.{i}.after_s ({times[i]}) must be later than profile.{i - 1}.after_s")
        return self


def _kind(value: Any) -> str | None:
    """The ``kind`` of a disturbance as read or built (the strict base validates every field before
    it is read, so pydantic's own field discriminator cannot be used)."""
    return value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)


Disturbance = Annotated[
    Annotated[FaultDisturbance, Tag("fault")]
    | Annotated[LineTripDisturbance, Tag("line_trip")]
    | Annotated[SourceSagDisturbance, Tag("source_sag")],
    Discriminator(
        _kind,
        custom_error_type="disturbance_kind",
        custom_error_message="kind must be one of fault, line_trip, source_sag",
    ),
]


class DisturbanceSpec(ConfigModel):
    """What happens to the grid and when, and how finely the engine resolves it."""

    window: WindowSpec = Field(default_factory=WindowSpec, description="Time resolution around each disturbance.")
    events: list[Disturbance] = Field(min_length=1, description="Faults, line trips and source sags.")

    @model_validator(mode="after")
    def _unique(self) -> DisturbanceSpec:
        names = [name for name, _ in _named(self)]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"disturbance names must be unique, repeated: {dup}")
        return self


def _named(spec: DisturbanceSpec) -> list[tuple[str, FaultDisturbance | LineTripDisturbance | SourceSagDisturbance]]:
    """Each disturbance with its name (given, or its kind and place in the list)."""
    return [(d.name or f"{d.kind}{i}", d) for i, d in enumerate(spec.events)]


def fault_command(name: str, bus: str, fault_type: str, phases: str, r_ohm: float) -> ApplyFault:
    """The :class:`ApplyFault` of a fault of ``fault_type`` on ``phases`` of ``bus`` (module docstring)."""
    nodes = [str(PHASES.index(p) + 1) for p in phases]
    if fault_type == "ll":
        return ApplyFault(name=name, bus1=f"{bus}.{nodes[0]}", bus2=f"{bus}.{nodes[1]}", phases=1, r_ohm=r_ohm)
    return ApplyFault(name=name, bus1=".".join([bus, *nodes]), phases=len(nodes), r_ohm=r_ohm)


def _fault_commands(name: str, d: FaultDisturbance) -> tuple[list[tuple[Fraction, Command]], str]:
    """The commands of one fault and its reclosing, and the sequence's outcome."""
    apply = fault_command(name, d.bus, d.type, d.fault_phases(), d.r_ohm)
    clear = ClearFault(name=name)
    out: list[tuple[Fraction, Command]] = [(d.start_s, apply), (d.start_s + d.clearing_s, clear)]
    if d.reclosing is None:
        return out, "cleared"
    line = d.reclosing.line
    opened = d.start_s + d.clearing_s
    out.append((opened, SetLineInService(line=line, in_service=False)))
    for dead in d.reclosing.dead_times_s:
        close = opened + dead
        out.append((close, SetLineInService(line=line, in_service=True)))
        if d.persists_s is not None and close >= d.start_s + d.persists_s:
            return out, "reclosed"
        opened = close + d.clearing_s
        out += [(close, apply), (opened, clear), (opened, SetLineInService(line=line, in_service=False))]
    return out, "lockout"


def _commands(
    name: str, d: FaultDisturbance | LineTripDisturbance | SourceSagDisturbance
) -> tuple[list[tuple[Fraction, Command]], str]:
    if isinstance(d, FaultDisturbance):
        return _fault_commands(name, d)
    if isinstance(d, LineTripDisturbance):
        out: list[tuple[Fraction, Command]] = [(d.start_s, SetLineInService(line=d.line, in_service=False))]
        if d.reclose_after_s is None:
            return out, "open"
        out.append((d.start_s + d.reclose_after_s, SetLineInService(line=d.line, in_service=True)))
        return out, "closed"
    return [(d.start_s + p.after_s, SetSourceVoltage(v_pu=tuple(p.v_pu))) for p in d.profile], "restored"


def plan(spec: DisturbanceSpec, grid_s: Fraction, duration_s: Fraction) -> DisturbancePlan:
    """Expand ``spec`` into commands and windows for a run of ``duration_s`` at grid period ``grid_s``.

    Commands after ``duration_s`` are kept (the engine never fires them, as with events); windows
    are cut at ``duration_s``.

    :raises ValueError: ``grid_s`` is not a whole multiple of the window step.
    """
    step = spec.window.step_s
    if grid_s % step:
        raise ValueError(
            f"disturbances.window.step_s ({step} s) must divide periods.grid_s ({grid_s} s) a whole number of times"
        )
    commands: list[tuple[Fraction, Command, str]] = []
    records = []
    for name, d in _named(spec):
        timed, outcome = _commands(name, d)
        commands += [(t, c, name) for t, c in timed]
        records.append(DisturbanceRecord(name, d.kind, timed[0][0], max(t for t, _ in timed), outcome))
    commands.sort(key=lambda item: item[0])  # stable: a disturbance's own order within one instant
    windows: list[tuple[Fraction, Fraction]] = []
    for t in sorted({t for t, _, _ in commands}):
        # the solve at t is the first to see what happens at t: the step it ends must be a fine one
        start = t - spec.window.before_s
        start -= start % grid_s
        if start >= t:
            start -= grid_s
        start = max(Fraction(0), start)
        end = t + spec.window.after_s
        end = min(duration_s, end + (-end) % grid_s)
        if start >= end:
            continue
        if windows and start <= windows[-1][1]:
            windows[-1] = (windows[-1][0], max(windows[-1][1], end))
        else:
            windows.append((start, end))
    return DisturbancePlan(tuple(commands), tuple(windows), tuple(records), step)
