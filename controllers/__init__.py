"""Stock controllers. A scenario names them in ``controllers[].kind`` by the entry-point names of
the ``openg2g.controllers`` group in ``pyproject.toml`` (``ofo``, ``mpc``, ``pid``, ...).

Each class subclasses :class:`openg2g.core.interfaces.Controller`, has a pydantic ``Config`` (frozen,
unknown keys rejected) and is built as ``cls(cls.Config(**params))``.
"""

from __future__ import annotations

from openg2g.controllers.joint import JointController
from openg2g.controllers.load_shift import LoadShiftController
from openg2g.controllers.mpc import MPCController
from openg2g.controllers.noop import NoopController
from openg2g.controllers.ofo import OFOController
from openg2g.controllers.pid import PIDController
from openg2g.controllers.return_coordinator import ReturnCoordinator
from openg2g.controllers.rl_policy import RLPolicy
from openg2g.controllers.rule_based import RuleBasedController
from openg2g.controllers.storage_droop import StorageDroopController
from openg2g.controllers.tap_schedule import TapScheduleController

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
