"""The no-op controller: sends nothing. A scenario with it reproduces the uncontrolled baseline."""

from __future__ import annotations

from openg2g.core.commands import Actuator, Command
from openg2g.core.state import Observation

from ._base import ConfiguredController, ControllerConfig

__all__ = ["NoopController"]


class NoopController(ConfiguredController):
    """Does nothing at every step."""

    name = "noop"

    class Config(ControllerConfig):
        """No parameters."""

    config: Config

    def actuators(self) -> tuple[Actuator, ...]:
        return ()

    def step(self, observation: Observation) -> list[Command]:
        return []
