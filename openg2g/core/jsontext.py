"""The one way openg2g turns data into JSON text: standard JSON only.

Python's ``json`` writes ``NaN`` and ``Infinity`` for non-finite floats, which no standard JSON
reader accepts (``jq``, browsers, most languages). Every JSON file and JSON printout of the project
goes through :func:`json_text`, which refuses them and names the field that holds one; data that
must be written whatever it holds (a run's summary) goes through :func:`finite_or_none` first.
"""

from __future__ import annotations

import json
import math
from typing import Any

from openg2g.core.errors import OutputError

__all__ = ["finite_or_none", "json_text"]


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
        found = finite_or_none(data)[1]
        if not found:
            raise
        path, value = next(iter(found.items()))  # the first, in the order of the text
        raise OutputError(
            f"{where}: {path or '(the value)'} is {value}, which standard JSON cannot hold (a number must be finite)"
        ) from None


def finite_or_none(data: Any) -> tuple[Any, dict[str, float]]:
    """A copy of ``data`` with every non-finite float (NaN, infinity) as ``None`` and tuples as
    lists (as JSON reads them back), and the dotted path of each float replaced -> its value."""
    found: dict[str, float] = {}
    return _finite_or_none(data, "", found), found


def _finite_or_none(data: Any, path: str, found: dict[str, float]) -> Any:
    if isinstance(data, float) and not math.isfinite(data):
        found[path] = data
        return None
    if isinstance(data, dict):
        return {key: _finite_or_none(value, _child(path, key), found) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite_or_none(value, _child(path, i), found) for i, value in enumerate(data)]
    return data


def _child(path: str, key: object) -> str:
    """The dotted path of ``key`` inside the value at ``path``."""
    return f"{path}.{key}" if path else str(key)
