"""A run's tables read one part at a time: which parts hold a time range, and their rows.

Each output table is a folder of parquet parts (``part-*.parquet``), each written in time order
with its time range in its ``t_s`` statistics. :func:`table_parts` finds the parts that hold a
range from their footers alone (no data is read), so a reader of one grid step or one zoom reads
only those parts; :func:`parts_key` names a table's parts as they are now, what a cache computed
from them is kept under. The footers read are kept beside the parts (:data:`PARTS_CACHE`), so a
new reader of a long run (the app after a restart) reads only the footers of parts added or
rewritten since.

``openg2g run`` imports this module (the overview's stamp, :func:`openg2g.plot.overview.overview_stamp`)
without pandas: only :func:`read_parts` loads it.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from openg2g.core.atomic import write_text_atomic
from openg2g.core.errors import G2GError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PARTS_CACHE", "PartsKey", "TablePart", "parts_key", "read_parts", "table_parts"]

PartsKey = tuple[tuple[str, int, int], ...]
"""A table's parts as ``(name, mtime_ns, size)``: it changes when a part is added or rewritten."""


def parts_key(table_dir: Path) -> PartsKey:
    """The parts of the table in ``table_dir`` (:data:`PartsKey`), by name.

    Listed with :func:`os.scandir` and sorted as names: a day's run has 1,440 parts a table, and
    globbing and sorting them as paths took 8-12 ms a table (2.5 ms so), each time a reader asks."""
    found = []
    with os.scandir(table_dir) as entries:
        for entry in entries:
            if entry.name.startswith("part-") and entry.name.endswith(".parquet"):
                stat = entry.stat()
                found.append((entry.name, stat.st_mtime_ns, stat.st_size))
    found.sort()
    return tuple(found)


@dataclass(frozen=True)
class TablePart:
    """One parquet part of an output table and the time range its statistics give.

    :param path: the part file.
    :param t_min_s: its first time (s).
    :param t_max_s: its last time (s).
    :param rows: its rows.
    """

    path: Path
    t_min_s: float
    t_max_s: float
    rows: int


PARTS_CACHE = ".openg2g-app-parts.json"
"""Each part's ``t_s`` range and rows as its footer gives them, kept in the table's folder (hidden;
written whole or not at all) under the part's name, modification time and size: a part whose
entry does not match it exactly (added, rewritten, or the file not one this module wrote) has its
footer read again."""

_KEPT_LOCK = threading.Lock()
"""One writer of a folder's :data:`PARTS_CACHE` at a time (the app's callbacks run in threads)."""


def _footer(path: Path) -> tuple[float | None, float | None, int]:
    """A part's first and last ``t_s`` (s; ``None`` for a part without rows) and its rows."""
    meta = pq.ParquetFile(path).metadata
    if not meta.num_rows:
        return None, None, 0
    column = meta.schema.to_arrow_schema().get_field_index("t_s")
    lows, highs = [], []
    for k in range(meta.num_row_groups):
        stats = meta.row_group(k).column(column).statistics
        if stats is None or not stats.has_min_max:
            raise G2GError(f"{path}: row group {k} has no t_s statistics; it cannot be read in part")
        lows.append(float(stats.min))
        highs.append(float(stats.max))
    return min(lows), max(highs), meta.num_rows


def _kept(table_dir: Path) -> dict[str, Any]:
    """The entries of the table's :data:`PARTS_CACHE`, by part name; none where it is missing or
    not a JSON object (each entry is checked where it is used)."""
    try:
        kept = json.loads((table_dir / PARTS_CACHE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return kept if isinstance(kept, dict) else {}


def _matching(entry: Any, mtime_ns: int, size: int) -> tuple[float | None, float | None, int] | None:
    """A kept entry ``[mtime_ns, size, t_min_s, t_max_s, rows]`` when it is one for the part as it
    is now, else ``None``."""
    if not (isinstance(entry, list) and len(entry) == 5 and entry[:2] == [mtime_ns, size]):
        return None
    t_min, t_max, rows = entry[2:]
    if type(rows) is not int or rows < 0:
        return None
    if rows == 0:
        return (None, None, 0) if t_min is None and t_max is None else None
    times = (t_min, t_max)
    if not all(type(t) in (int, float) for t in times) or not t_min <= t_max:
        return None
    return float(t_min), float(t_max), rows


@lru_cache(maxsize=16)
def _parts(table_dir: Path, key: PartsKey) -> tuple[TablePart, ...]:
    kept = _kept(table_dir)
    entries: dict[str, list[Any]] = {}
    parts, read = [], False
    for name, mtime_ns, size in key:
        found = _matching(kept.get(name), mtime_ns, size)
        if found is None:
            found, read = _footer(table_dir / name), True
        t_min, t_max, rows = found
        entries[name] = [mtime_ns, size, t_min, t_max, rows]
        if rows:
            assert t_min is not None and t_max is not None
            parts.append(TablePart(table_dir / name, t_min, t_max, rows))
    if read:
        with _KEPT_LOCK:
            try:
                write_text_atomic(table_dir / PARTS_CACHE, json.dumps(entries))
            except OSError:
                pass  # a folder we may not write: the footers are kept in memory only
    return tuple(parts)


def table_parts(out_dir: Path, name: str, t_range: tuple[float, float] | None = None) -> tuple[TablePart, ...]:
    """The parts of a run's table that hold rows in ``t_range`` (all when ``None``), in time order,
    found from each part's ``t_s`` statistics (its footer; no data is read). The statistics are
    kept in memory while the table's parts are unchanged and in :data:`PARTS_CACHE` while each part
    is (a restarted reader of a day-long run's 1,440 parts reads one small file, not 1,440
    footers).

    :raises G2GError: a part without ``t_s`` statistics.
    """
    table_dir = Path(out_dir) / name
    parts = _parts(table_dir, parts_key(table_dir)) if table_dir.is_dir() else ()
    if t_range is not None:
        parts = tuple(p for p in parts if p.t_max_s >= t_range[0] and p.t_min_s <= t_range[1])
    return tuple(sorted(parts, key=lambda p: p.t_min_s))


def read_parts(
    parts: tuple[TablePart, ...],
    columns: list[str] | None = None,
    filters: list[tuple[str, str, Any]] | None = None,
) -> pd.DataFrame:
    """The rows of ``parts`` (:func:`table_parts`) that pass ``filters`` (pyarrow row filters),
    only ``columns`` (``None``: all); an empty frame for no parts."""
    import pandas as pd  # here, not above: a run imports this module and never reads a table back

    if not parts:
        return pd.DataFrame()
    return pd.read_parquet([p.path for p in parts], columns=columns, filters=filters)
