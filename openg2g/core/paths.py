"""Where the bundled data lives: the repository's top-level folders, or their copies in a wheel."""

from __future__ import annotations

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
    ``openg2g.controllers`` (the repository's ``controllers/`` folder, linked into the package in a
    checkout and an editable install, copied into it in a wheel)."""
    return _PACKAGE / "controllers" / "policies"
