"""Stock controllers. A scenario names them in ``controllers[].kind`` by the entry-point names of
the ``openg2g.controllers`` group in ``pyproject.toml`` (``ofo``, ``mpc``, ``pid``, ...).

Each class subclasses :class:`openg2g.core.interfaces.Controller`, has a pydantic ``Config`` (frozen,
unknown keys rejected) and is built as ``cls(cls.Config(**params))``.
"""

from __future__ import annotations

from .joint import JointController
from .load_shift import LoadShiftController
from .mpc import MPCController
from .noop import NoopController
from .ofo import OFOController
from .pid import PIDController
from .return_coordinator import ReturnCoordinator
from .rl_policy import RLPolicy
from .rule_based import RuleBasedController
from .storage_droop import StorageDroopController
from .tap_schedule import TapScheduleController

__all__ = [
    "JointController",
    "LoadShiftController",
    "MPCController",
    "NoopController",
    "OFOController",
    "PIDController",
    "RLPolicy",
    "ReturnCoordinator",
    "RuleBasedController",
    "StorageDroopController",
    "TapScheduleController",
]
