"""Where the bundled data lives: the repository's top-level folders, or their copies in a wheel."""

from __future__ import annotations

from pathlib import Path

__all__ = ["bundled_dir"]

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
