"""Each bus-phase's lowest and highest voltage over a run, streamed from ``grid_voltages``.

A utility feeder's hour holds a hundred million rows of ``grid_voltages`` (3,400 bus-phases at
0.1 s), more than a laptop holds as a table. :func:`bus_phase_extremes` reads the parts one batch
at a time and keeps one running minimum and maximum per bus-phase, with the first time each was
reached, so memory is bounded by a batch, whatever the run's length. :func:`extremes_of` gives the
same frame for rows already in memory (one grid step, a test's table), and :func:`voltages_at`
reads one grid step's rows only. The feeder map (:func:`openg2g.plot.feeder.worst_bus_voltages`)
works from these frames.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from openg2g.plot.parts import read_parts, table_parts

__all__ = ["EXTREME_COLUMNS", "bus_phase_extremes", "extremes_of", "voltages_at"]

EXTREME_COLUMNS = ("bus_phase", "v_min_pu", "t_min_s", "v_max_pu", "t_max_s")
"""Columns of an extremes frame: per bus-phase the lowest voltage (pu) and the first time (s) it
was reached, and the same for the highest; NaN for a bus-phase that never had a voltage."""

BATCH_ROWS = 1 << 20
"""Rows read at a time (about 25 MB of columns): the streaming reader's memory bound."""


class _Running:
    """Running per-bus-phase extremes over batches that come in time order."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.lo = np.empty(0)
        self.hi = np.empty(0)
        self.t_lo = np.empty(0)
        self.t_hi = np.empty(0)

    def _codes(self, names: list[str], indices: np.ndarray) -> np.ndarray:
        """Global codes of a batch's dictionary indices (new names get the next codes)."""
        mapping = np.fromiter((self.index.setdefault(n, len(self.index)) for n in names), np.int64, len(names))
        grow = len(self.index) - self.lo.size
        if grow:
            self.lo = np.concatenate([self.lo, np.full(grow, np.nan)])
            self.hi = np.concatenate([self.hi, np.full(grow, np.nan)])
            self.t_lo = np.concatenate([self.t_lo, np.full(grow, np.nan)])
            self.t_hi = np.concatenate([self.t_hi, np.full(grow, np.nan)])
        return mapping[indices]

    def add(self, t_s: np.ndarray, names: list[str], indices: np.ndarray, v_pu: np.ndarray) -> None:
        """Fold in one batch: ``names[indices[k]]`` had ``v_pu[k]`` at ``t_s[k]``."""
        finite = np.isfinite(v_pu)
        codes = self._codes(names, indices)[finite]
        t, v = t_s[finite], v_pu[finite]
        n = self.lo.size
        for pick, held, held_t in ((np.fmin, self.lo, self.t_lo), (np.fmax, self.hi, self.t_hi)):
            batch = np.full(n, np.nan)
            pick.at(batch, codes, v)
            # the batch's first row that reaches it, then kept only where it beats the held value:
            # the first time of the whole run wins a tie, as batches come in time order
            rows = np.flatnonzero(v == batch[codes])
            reached, first = np.unique(codes[rows], return_index=True)
            first_row = np.full(n, -1)
            first_row[reached] = rows[first]
            better = np.isnan(held) | (pick(batch, held) != held)
            better &= first_row >= 0
            held[better] = batch[better]
            held_t[better] = t[first_row[better]]

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "bus_phase": list(self.index),
                "v_min_pu": self.lo,
                "t_min_s": self.t_lo,
                "v_max_pu": self.hi,
                "t_max_s": self.t_hi,
            },
            columns=list(EXTREME_COLUMNS),
        )


def _names_and_indices(column: pa.ChunkedArray | pa.Array) -> tuple[list[str], np.ndarray]:
    """A bus-phase column (dictionary-encoded or plain strings) as names and indices into them."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not pa.types.is_dictionary(array.type):
        array = array.dictionary_encode()
    return [str(n) for n in array.dictionary.to_pylist()], array.indices.to_numpy(zero_copy_only=False)


def bus_phase_extremes(out_dir: Path, t_range: tuple[float, float] | None = None) -> pd.DataFrame:
    """Each bus-phase's extremes over a run (:data:`EXTREME_COLUMNS`), read from its
    ``grid_voltages`` table a batch at a time (memory bounded by :data:`BATCH_ROWS`).

    :param out_dir: the run folder.
    :param t_range: only grid steps in ``[start, end]`` (s); ``None``: the whole run.
    :return: one row per bus-phase in order of first appearance; empty when the run has no
        ``grid_voltages`` table.
    """
    running = _Running()
    for part in table_parts(Path(out_dir), "grid_voltages", t_range):
        for batch in pq.ParquetFile(part.path).iter_batches(BATCH_ROWS, columns=["t_s", "bus_phase", "v_pu"]):
            t = batch.column("t_s").to_numpy(zero_copy_only=False)
            v = batch.column("v_pu").to_numpy(zero_copy_only=False)
            names, indices = _names_and_indices(batch.column("bus_phase"))
            if t_range is not None:
                keep = (t >= t_range[0]) & (t <= t_range[1])
                t, v, indices = t[keep], v[keep], indices[keep]
            running.add(t, names, indices, v)
    return running.frame()


def extremes_of(rows: pd.DataFrame) -> pd.DataFrame:
    """The extremes frame (:data:`EXTREME_COLUMNS`) of ``grid_voltages`` rows in memory
    (``t_s``, ``bus_phase``, ``v_pu``, in time order), e.g. one grid step's."""
    running = _Running()
    if not rows.empty:
        names, indices = _names_and_indices(pa.array(rows["bus_phase"].astype(str)))
        running.add(rows["t_s"].to_numpy(dtype=float), names, indices, rows["v_pu"].to_numpy(dtype=float))
    return running.frame()


def voltages_at(out_dir: Path, t_s: float) -> pd.DataFrame:
    """The ``grid_voltages`` rows of the grid step at exactly ``t_s`` (s), reading only the parts
    whose statistics hold it; empty when there are none."""
    return read_parts(table_parts(Path(out_dir), "grid_voltages", (t_s, t_s)), filters=[("t_s", "==", t_s)])
