"""The one way openg2g turns data into JSON text: standard JSON only.

Python's ``json`` writes ``NaN`` and ``Infinity`` for non-finite floats, which no standard JSON
reader accepts (``jq``, browsers, most languages). Every JSON file and JSON printout of the project
goes through :func:`json_text`, which refuses them and names the field that holds one.
"""

from __future__ import annotations

import json
import math
from typing import Any

from openg2g.core.errors import OutputError

__all__ = ["json_text"]


def json_text(data: Any, where: str, *, indent: int | None = 2, **options: Any) -> str:
    """``data`` as standard JSON text (``json.dumps`` with ``allow_nan=False``).

    :param where: what the text becomes (a file path, ``"--json output"``), for the error.
    :param indent: as ``json.dumps``.
    :param options: further ``json.dumps`` options (``sort_keys``, ``separators``, ...).
    :raises OutputError: a float in ``data`` is NaN or infinite (the message gives its path).
    """
    try:
        return json.dumps(data, indent=indent, allow_nan=False, **options)
    except ValueError:
        found = _non_finite(data, "")
        if found is None:
            raise
        path, value = found
        raise OutputError(
            f"{where}: {path or '(the value)'} is {value}, which standard JSON cannot hold (a number must be finite)"
        ) from None


def _non_finite(data: Any, path: str) -> tuple[str, float] | None:
    """The dotted path and value of the first non-finite float in ``data``; None if there is none."""
    if isinstance(data, float):
        return None if math.isfinite(data) else (path, data)
    if isinstance(data, dict):
        items: list[tuple[object, Any]] = list(data.items())
    elif isinstance(data, (list, tuple)):
        items = list(enumerate(data))
    else:
        return None
    for key, value in items:
        found = _non_finite(value, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None
