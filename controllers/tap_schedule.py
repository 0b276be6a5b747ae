"""Time-tabled regulator taps: at each scheduled time, fix a bank's per-phase tap positions.

Scenario use::

    controllers:
      - kind: tap_schedule
        params:
          schedule:
            - {t_s: 1500, bank: reg1, taps: [16, 6, 17]}
            - {t_s: 3300, bank: reg1, taps: [10, 6, 10]}

An entry is sent at the first control step whose time is at or after its ``t_s`` (so with a 1 s
control period an entry at 1500 s goes out at exactly 1500 s). Entries are checked against the
feeder's regulators at :meth:`TapScheduleController.reset`: an unknown bank, a wrong number of
phases or a tap outside the bank's range is an error, never clamped.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from openg2g.core.commands import Actuator, Command, SetTaps
from openg2g.core.errors import ControllerError
from openg2g.core.interfaces import ControlContext
from openg2g.core.state import Observation

from ._base import ConfiguredController, ControllerConfig

__all__ = ["TapEntry", "TapScheduleController"]


class TapEntry(BaseModel):
    """One scheduled tap change."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    t_s: float = Field(ge=0, description="Time of the change (s).")
    bank: str = Field(description="Regulator bank name as the feeder names it.")
    taps: tuple[int, ...] = Field(min_length=1, description="Tap steps per regulated phase, in phase order.")


class TapScheduleController(ConfiguredController):
    """Sends :class:`SetTaps` commands at scheduled times."""

    name = "tap_schedule"
    requires = "a schedule (params.schedule)"

    class Config(ControllerConfig):
        """Parameters of :class:`TapScheduleController`."""

        schedule: tuple[TapEntry, ...] = Field(description="Tap changes; sorted by t_s when read.")

        @field_validator("schedule")
        @classmethod
        def _sorted(cls, v: tuple[TapEntry, ...]) -> tuple[TapEntry, ...]:
            return tuple(sorted(v, key=lambda e: e.t_s))

    config: Config

    def reset(self, context: ControlContext, seed: int) -> None:
        super().reset(context, seed)
        for i, entry in enumerate(self.config.schedule):
            reg = context.regulators.get(entry.bank)
            if reg is None:
                raise ControllerError(
                    f"tap_schedule: schedule[{i}] names unknown bank {entry.bank!r}; "
                    f"valid banks: {sorted(context.regulators)}"
                )
            if len(entry.taps) != len(reg.phases):
                raise ControllerError(
                    f"tap_schedule: schedule[{i}] gives {len(entry.taps)} taps for bank {entry.bank!r}, "
                    f"which regulates {len(reg.phases)} phases {list(reg.phases)}"
                )
            bad = [t for t in entry.taps if not reg.min_tap <= t <= reg.max_tap]
            if bad:
                raise ControllerError(
                    f"tap_schedule: schedule[{i}] taps {bad} outside [{reg.min_tap}, {reg.max_tap}] of bank {entry.bank!r}"
                )
        self._next = 0

    def actuators(self) -> tuple[Actuator, ...]:
        banks = dict.fromkeys(entry.bank for entry in self.config.schedule)
        return tuple(Actuator("regulator", (bank,)) for bank in banks)

    def step(self, observation: Observation) -> list[Command]:
        out: list[Command] = []
        schedule = self.config.schedule
        eps = 1e-9
        while self._next < len(schedule) and schedule[self._next].t_s <= observation.t_s + eps:
            entry = schedule[self._next]
            out.append(SetTaps(bank=entry.bank, taps=tuple(entry.taps)))
            self._next += 1
        return out
