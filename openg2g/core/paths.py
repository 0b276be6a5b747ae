"""Where the bundled data lives: the repository's top-level folders, or their copies in a wheel."""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["bundled_dir", "bundled_policies_dir"]

_PACKAGE = Path(__file__).resolve().parent.parent


def bundled_dir(name: str) -> Path:
    """Path of a bundled top-level folder (``"traces"``, ``"scenarios"``).

    An editable install or a source checkout finds it beside the package; a wheel carries a
    copy under ``openg2g/_bundled``.
    """
    for candidate in (_PACKAGE.parent / name, _PACKAGE / "_bundled" / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"bundled folder {name!r} not found beside {_PACKAGE}")


def bundled_policies_dir() -> Path:
    """Folder of the bundled trained policies: ``policies/`` inside the stock controllers package
    ``openg2g.controllers``, wherever that imports from (the repository's top-level ``controllers/``
    folder in an editable install, its copy inside the package in a wheel).

    :raises FileNotFoundError: ``openg2g.controllers`` is not importable.
    """
    spec = importlib.util.find_spec("openg2g.controllers")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the stock controllers package openg2g.controllers is not importable beside {_PACKAGE} "
            "(a checkout needs an editable install of itself: pip install -e .)"
        )
    return Path(spec.submodule_search_locations[0]) / "policies"
