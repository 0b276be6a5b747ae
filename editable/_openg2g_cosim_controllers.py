"""``openg2g.controllers`` in an editable install: the checkout's top-level ``controllers/`` folder.

A wheel carries that folder inside the package (``force-include`` in ``pyproject.toml``). An
editable install imports the checkout itself, so that an edit shows without a reinstall, and
exposes ``openg2g`` alone (``dev-mode-exact``), not the checkout's root, which would make
``controllers``, ``tests`` and ``bench`` importable from anywhere and each stock controller two
classes (``controllers.ofo.OFOController`` and ``openg2g.controllers.ofo.OFOController``).
hatchling maps only top-level packages that way, so ``hatch_build.py`` adds this finder, run at
start-up by the ``.pth`` file beside it, for the one subpackage that lives elsewhere.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType


class StockControllersFinder:
    """Finds ``openg2g.controllers`` beside the ``openg2g`` package being imported from, so a
    checkout put first on ``sys.path`` (a worktree on ``PYTHONPATH``) gets its own controllers."""

    @classmethod
    def find_spec(
        cls, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != "openg2g.controllers" or not path:
            return None
        return PathFinder.find_spec(fullname, [os.path.dirname(entry) for entry in path])


sys.meta_path.append(StockControllersFinder)
