"""Stock controllers, by the name a scenario file uses in ``controllers[].kind``.

Each class subclasses :class:`openg2g.core.interfaces.Controller`, has a pydantic ``Config`` (frozen,
unknown keys rejected) and is built as ``cls(cls.Config(**params))``.
"""

from __future__ import annotations

from controllers.load_shift import LoadShiftController
from controllers.mpc import MPCController
from controllers.noop import NoopController
from controllers.ofo import OFOController
from controllers.pid import PIDController
from controllers.rl_policy import RLPolicy
from controllers.rule_based import RuleBasedController
from controllers.storage_droop import StorageDroopController
from controllers.tap_schedule import TapScheduleController
from openg2g.core.interfaces import Controller

__all__ = [
    "STOCK",
    "LoadShiftController",
    "MPCController",
    "NoopController",
    "OFOController",
    "PIDController",
    "RLPolicy",
    "RuleBasedController",
    "StorageDroopController",
    "TapScheduleController",
]

STOCK: dict[str, type[Controller]] = {
    "noop": NoopController,
    "rule_based": RuleBasedController,
    "pid": PIDController,
    "ofo": OFOController,
    "mpc": MPCController,
    "tap_schedule": TapScheduleController,
    "storage_droop": StorageDroopController,
    "load_shift": LoadShiftController,
    "rl_policy": RLPolicy,
}
"""Scenario name -> controller class."""
