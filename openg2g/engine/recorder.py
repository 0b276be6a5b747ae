"""Incremental, crash-safe output tables.

Each table is a directory of parquet parts (``grid_voltages/part-00000.parquet``, ...). Rows are
buffered in memory and written as a new part every flush; each part is written to a temporary
name and renamed, so a crash, Ctrl-C or kill leaves only complete parts. ``pandas.read_parquet``
reads the directory as one table. Memory stays bounded by the flush interval.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["TableWriter", "write_json_atomic"]


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` as JSON to ``path`` through a temporary file and rename."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


class TableWriter:
    """Buffers rows of one table and writes them as parquet parts.

    Rows arrive either one at a time (:meth:`append_row`, scalars) or as column chunks
    (:meth:`append`, equal-length numpy arrays); a table uses one style.

    :param directory: the table's directory (created).
    :param categories: column -> category names; that column is given as integer codes and
        stored dictionary-encoded (e.g. bus-phase names repeated at every step).
    :param dictionary_columns: string columns to store dictionary-encoded.
    """

    def __init__(
        self,
        directory: Path,
        categories: Mapping[str, list[str] | tuple[str, ...]] | None = None,
        dictionary_columns: tuple[str, ...] = (),
    ):
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self._categories = {k: pa.array(list(v), type=pa.string()) for k, v in (categories or {}).items()}
        self._dictionary = dictionary_columns
        self._columns: dict[str, list[Any]] = {}
        self._parts = 0
        self.rows_written = 0

    def append_row(self, **values: Any) -> None:
        """Buffer one row of scalars."""
        for name, value in values.items():
            self._columns.setdefault(name, []).append(value)

    def append(self, columns: Mapping[str, np.ndarray]) -> None:
        """Buffer a chunk of rows given as equal-length arrays."""
        for name, array in columns.items():
            self._columns.setdefault(name, []).append(array)

    def _column(self, name: str, pieces: list[Any]) -> pa.Array:
        if isinstance(pieces[0], np.ndarray):
            values = np.concatenate(pieces)
        else:
            values = pieces
        if name in self._categories:
            return pa.DictionaryArray.from_arrays(pa.array(np.asarray(values, dtype=np.int32)), self._categories[name])
        array = pa.array(values)
        return array.dictionary_encode() if name in self._dictionary else array

    def flush(self) -> None:
        """Write the buffered rows as one new part (nothing if empty)."""
        if not self._columns:
            return
        table = pa.Table.from_arrays(
            [self._column(name, pieces) for name, pieces in self._columns.items()], names=list(self._columns)
        )
        final = self.directory / f"part-{self._parts:05d}.parquet"
        tmp = final.with_suffix(".parquet.tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, final)
        self._parts += 1
        self.rows_written += table.num_rows
        self._columns = {}
