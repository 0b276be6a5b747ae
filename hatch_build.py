"""Build hook (hatchling's ``custom`` hook of the wheel target): what an editable install adds."""

from __future__ import annotations

import os
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

_EDITABLE_FILES = ("_openg2g_cosim_controllers.py", "_openg2g_cosim_controllers.pth")


class EditableControllersHook(BuildHookInterface):
    """An editable wheel gets the finder of ``openg2g.controllers`` (editable/, whose module
    docstring says why) in place of the wheel's forced copies of ``controllers/``, ``traces/`` and
    ``scenarios/``: copies would go stale, and an editable install reads those folders in the
    checkout (``openg2g.core.paths``)."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            folder = os.path.join(self.root, "editable")
            build_data["force_include_editable"] = {os.path.join(folder, name): name for name in _EDITABLE_FILES}
