"""Incremental, crash-safe output tables.

Each table is a directory of parquet parts (``grid_voltages/part-00000.parquet``, ...). Rows are
buffered in memory and written as a new part every flush; each part is written under a hidden
temporary name (``.part-00000.parquet.tmp``, which ``pandas.read_parquet`` skips) and renamed, so a
crash, Ctrl-C or kill leaves only complete parts. ``pandas.read_parquet`` reads the directory as
one table. Memory stays bounded by the flush interval.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from openg2g.core.arrow import arrow_array

__all__ = ["TableWriter", "arrow_array", "clear_table"]


def _dictionary_array(values: np.ndarray) -> pa.DictionaryArray:
    """``values`` dictionary-encoded as ``pa.Array.dictionary_encode`` does it (int32 indices,
    the distinct values in order of first appearance), without importing ``pyarrow.compute``
    (0.3 s) for it."""
    distinct: dict[Any, int] = {}
    codes = np.fromiter((distinct.setdefault(v, len(distinct)) for v in values.tolist()), np.int32, len(values))
    return pa.DictionaryArray.from_arrays(arrow_array(codes), arrow_array(np.array(list(distinct), dtype=values.dtype)))


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
        self._categories = {k: arrow_array(np.array(v, dtype=object)) for k, v in (categories or {}).items()}
        self._dictionary = dictionary_columns
        self._dictionary_pages = [*self._categories, *dictionary_columns]
        # one entry per append: a chunk is buffered whole or not at all, so a Ctrl-C in the middle
        # of recording never leaves columns of different lengths
        self._chunks: list[dict[str, Any]] = []
        self._parts = 0
        self._pending_rows = 0
        self.rows_written = 0

    def append_row(self, **values: Any) -> None:
        """Buffer one row of scalars."""
        self._chunks.append({name: [value] for name, value in values.items()})

    def append(self, columns: Mapping[str, np.ndarray]) -> None:
        """Buffer a chunk of rows given as equal-length arrays."""
        self._chunks.append(dict(columns))

    def _column(self, name: str, pieces: list[Any]) -> pa.Array:
        values = np.concatenate([np.asarray(piece) for piece in pieces])
        if name in self._categories:
            return pa.DictionaryArray.from_arrays(arrow_array(values.astype(np.int32)), self._categories[name])
        return _dictionary_array(values) if name in self._dictionary else arrow_array(values)

    def flush(self) -> None:
        """Write the buffered rows as one new part (nothing if empty)."""
        self.commit(self.prepare())

    def prepare(self) -> Path | None:
        """Write the buffered rows to a hidden temporary part; :meth:`commit` makes it visible.

        Splitting the two lets several tables be written first and renamed together, so they
        always end at the same step. ``None`` if nothing was buffered.

        :raises OSError: the part could not be written (the temporary file is removed).
        """
        if not self._chunks:
            return None
        names = list(self._chunks[0])
        table = pa.Table.from_arrays(
            [self._column(name, [chunk[name] for chunk in self._chunks]) for name in names], names=names
        )
        tmp = self.directory / f".part-{self._parts:05d}.parquet.tmp"
        try:
            # dictionary pages only where a column is dictionary-encoded: trying them on float columns
            # (times, voltages) costs half the write and saves nothing; min/max statistics only where
            # they can skip a row group: every part holds every bus-phase or branch name, so the
            # names' statistics (a fifth of the write of the per-bus tables) never skip one
            kept = [name for name in names if name not in self._dictionary_pages]
            pq.write_table(table, tmp, use_dictionary=self._dictionary_pages or False, write_statistics=kept)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self._pending_rows = table.num_rows
        return tmp

    def commit(self, tmp: Path | None) -> None:
        """Rename a part written by :meth:`prepare` to its final name and drop the buffered rows."""
        if tmp is None:
            return
        os.replace(tmp, self.directory / f"part-{self._parts:05d}.parquet")
        self._parts += 1
        self.rows_written += self._pending_rows
        self._chunks = []

    def discard(self, tmp: Path | None) -> None:
        """Remove a part written by :meth:`prepare` that will not be committed (rows stay buffered)."""
        if tmp is not None:
            tmp.unlink(missing_ok=True)

    def clear(self) -> None:
        """Remove parts left in the directory by an earlier run into the same folder."""
        clear_table(self.directory)


def clear_table(directory: Path) -> None:
    """Remove the parts of a table (complete and temporary) from ``directory``, if any."""
    for old in [*directory.glob("part-*.parquet"), *directory.glob(".part-*.parquet.tmp")]:
        old.unlink()
