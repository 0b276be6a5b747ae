"""The no-op controller: sends nothing. A scenario with it reproduces the uncontrolled baseline."""

from __future__ import annotations

from openg2g.controllers._base import ControllerConfig
from openg2g.core.commands import Command
from openg2g.core.protocols import Controller
from openg2g.core.state import Observation

__all__ = ["NoopController"]


class NoopController(Controller):
    """Does nothing at every step."""

    name = "noop"

    class Config(ControllerConfig):
        """No parameters."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()

    def step(self, observation: Observation) -> list[Command]:
        return []
