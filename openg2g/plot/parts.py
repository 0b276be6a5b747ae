"""A run's tables read one part at a time: which parts hold a time range, and their rows.

Each output table is a folder of parquet parts (``part-*.parquet``), each written in time order
with its time range in its ``t_s`` statistics. :func:`table_parts` finds the parts that hold a
range from their footers alone (no data is read), so a reader of one grid step or one zoom reads
only those parts; :func:`parts_key` names a table's parts as they are now, what a cache computed
from them is kept under.

``openg2g run`` imports this module (the overview's stamp, :func:`openg2g.plot.overview.overview_stamp`)
without pandas: only :func:`read_parts` loads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from openg2g.core.errors import G2GError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PartsKey", "TablePart", "parts_key", "read_parts", "table_parts"]

PartsKey = tuple[tuple[str, int, int], ...]
"""A table's parts as ``(name, mtime_ns, size)``: it changes when a part is added or rewritten."""


def parts_key(table_dir: Path) -> PartsKey:
    """The parts of the table in ``table_dir`` (:data:`PartsKey`), by name."""
    found = []
    for path in sorted(table_dir.glob("part-*.parquet")):
        stat = path.stat()
        found.append((path.name, stat.st_mtime_ns, stat.st_size))
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


@lru_cache(maxsize=16)
def _parts(table_dir: Path, key: PartsKey) -> tuple[TablePart, ...]:
    parts = []
    for name, _, _ in key:
        meta = pq.ParquetFile(table_dir / name).metadata
        column = meta.schema.to_arrow_schema().get_field_index("t_s")
        lows, highs = [], []
        for k in range(meta.num_row_groups):
            stats = meta.row_group(k).column(column).statistics
            if stats is None or not stats.has_min_max:
                raise G2GError(f"{table_dir / name}: row group {k} has no t_s statistics; it cannot be read in part")
            lows.append(float(stats.min))
            highs.append(float(stats.max))
        if meta.num_rows:
            parts.append(TablePart(table_dir / name, min(lows), max(highs), meta.num_rows))
    return tuple(parts)


def table_parts(out_dir: Path, name: str, t_range: tuple[float, float] | None = None) -> tuple[TablePart, ...]:
    """The parts of a run's table that hold rows in ``t_range`` (all when ``None``), in time order,
    found from each part's ``t_s`` statistics (its footer; no data is read). The statistics are
    kept while the table's parts are unchanged.

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
