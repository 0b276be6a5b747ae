"""A run's overview computed from its tables: for a run folder without a current one beside it.

``openg2g run`` writes a run's overview as it writes the tables
(:class:`~openg2g.plot.overview.OverviewBuilder`); a run written by an older version or elsewhere,
interrupted, still running, or with a line of another length than expected has none, or one out of
date. :func:`overview` then computes it from the tables, one part at a time
(:func:`~openg2g.plot.parts.table_parts`; :func:`building` says how far), feeding the same
:class:`~openg2g.plot.overview.PanelLines` the run feeds, so the same rows give the same points,
and keeps it in :data:`~openg2g.plot.overview.OVERVIEW_CACHE` and in memory. :func:`run_panels`
is the same computation over a zoomed time range; the most loaded branch's figures it draws
(:func:`branch_loading`) are kept in :data:`LOADING_CACHE`.

Apart from :mod:`openg2g.plot.overview`, whose recording path a run imports without pandas or
matplotlib, this path reads the tables with both loaded (:class:`~openg2g.plot.run.RunData`).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from openg2g.core.atomic import replace_atomically
from openg2g.plot.commands import command_records
from openg2g.plot.overview import (
    OVERVIEW_CACHE,
    VIEW_POINTS,
    Overview,
    Panel,
    PanelLines,
    TableLines,
    assemble_panels,
    command_rows,
    loading_line,
    overview_stamp,
    read_overview,
    scenario_deadlines,
    write_overview,
)
from openg2g.plot.parts import PartsKey, TablePart, parts_key, read_parts, table_parts
from openg2g.plot.run import RunData, branch_loading_envelope
from openg2g.plot.timeline import Marks, run_marks

__all__ = ["LOADING_CACHE", "branch_loading", "building", "grid_times", "overview", "run_panels"]


def _window(frame: pd.DataFrame, t_range: tuple[float, float] | None, column: str = "t_s") -> pd.DataFrame:
    if t_range is None or frame.empty:
        return frame
    t = frame[column].to_numpy(dtype=float)
    return frame[(t >= t_range[0]) & (t <= t_range[1])]


def _read_part(part: TablePart, columns: list[str], t_range: tuple[float, float] | None) -> pa.Table:
    """``columns`` (and ``t_s``) of one part's rows in ``t_range`` (``None``: all), read through
    the part's own file (a third of the time of a one-file dataset)."""
    table = pq.ParquetFile(part.path).read(columns=list(dict.fromkeys([*columns, "t_s"])))
    if t_range is None:
        return table
    t = table.column("t_s")
    return table.filter(pc.and_(pc.greater_equal(t, t_range[0]), pc.less_equal(t, t_range[1])))


def _group_rows(parts: tuple[TablePart, ...], lines: TableLines, t_range: tuple[float, float] | None) -> dict[Any, int]:
    """Each group's rows in ``parts`` (within ``t_range``), read from the key columns only."""
    keys = lines.keys
    key_columns = [keys] if isinstance(keys, str) else list(keys or [])
    counts: dict[Any, int] = {}
    for part in parts:
        found = _read_part(part, key_columns, t_range)
        if not key_columns:
            counts[None] = counts.get(None, 0) + found.num_rows
            continue
        for row in found.group_by(key_columns, use_threads=False).aggregate([([], "count_all")]).to_pylist():
            key = row[keys] if isinstance(keys, str) else tuple(row[k] for k in key_columns)
            counts[key] = counts.get(key, 0) + int(row["count_all"])
    return counts


def _columns(out_dir: Path, table: str) -> list[str]:
    """The column names of a table (its first part's schema; empty without parts)."""
    parts = table_parts(out_dir, table)
    return list(pq.read_schema(parts[0].path).names) if parts else []


def run_panels(
    run: RunData,
    t_range: tuple[float, float] | None = None,
    points: int = VIEW_POINTS,
    on_part: Callable[[], None] | None = None,
) -> list[Panel]:
    """The time panels of a run that it has the data for, each line at most ``points`` points
    (:func:`openg2g.plot.overview.assemble_panels`). The ``datacenter``, ``models`` and ``grid``
    tables are read one part at a time, only the parts that hold ``t_range``: a first pass counts
    each group's rows from the key columns (what the thinning needs), a second feeds every line
    as its part comes (:class:`openg2g.plot.overview.TableLines`), which equals thinning each
    whole column at once.

    :param run: the run.
    :param t_range: ``(start, end)`` (s) to read in detail (a zoom), ``None`` for the whole run.
    :param points: points per line at most (:func:`openg2g.plot.timeline.envelope`).
    :param on_part: called after each part of those tables and of ``grid_branches`` is drawn.
    """
    out = run.out_dir
    counts: dict[str, dict[Any, int]] = {}
    lines = PanelLines(_columns(out, "grid"), lambda table, key: counts[table][key], points)
    for table, table_lines in lines.tables.items():
        parts = table_parts(out, table, t_range)
        counts[table] = _group_rows(parts, table_lines, t_range)
        for part in parts:
            found = _read_part(part, table_lines.columns, t_range)
            table_lines.add({c: found.column(c).to_numpy() for c in table_lines.columns})
            if on_part is not None:
                on_part()
    worst = branch_loading(out, t_range, on_part)
    loading = None if worst.empty else loading_line(worst["t_s"], worst["max_loading_pct"], points)
    commands = _window(run.table("commands"), t_range, "t_effective_s")
    records = command_records(commands, _window(run.table("events"), t_range))
    assert run.v_min_pu is not None and run.v_max_pu is not None
    limits = (run.v_min_pu, run.v_max_pu)
    return assemble_panels(lines, scenario_deadlines(run.scenario), limits, loading, command_rows(records))


_LOADING_COLUMNS = ["t_s", "branch", "loading_pct"]
LOADING_CACHE = ".openg2g-app-branch-loading.parquet"
"""The whole run's most loaded branch per grid step, kept beside the run's tables (hidden; written
whole or not at all) with the ``grid_branches`` parts it was computed from in its metadata."""
_LOADING_KEY = b"openg2g.grid_branches_parts"
_LOADING_LOCK = threading.Lock()
_LOADINGS: OrderedDict[tuple[Path, PartsKey], pd.DataFrame] = OrderedDict()


def _most_loaded(
    parts: tuple[TablePart, ...], t_range: tuple[float, float] | None, on_part: Callable[[], None] | None = None
) -> pd.DataFrame:
    """:func:`branch_loading_envelope` of the parts, one part at a time (a day of ``grid_branches``
    is 250 million rows: only one part's three columns are in memory at once); ``on_part`` is
    called after each."""
    filters = [("t_s", ">=", t_range[0]), ("t_s", "<=", t_range[1])] if t_range is not None else None
    steps = []
    for part in parts:
        found = branch_loading_envelope(read_parts((part,), _LOADING_COLUMNS, filters))
        if not found.empty:
            steps.append(found)
        if on_part is not None:
            on_part()
    if not steps:
        return pd.DataFrame({"t_s": [], "max_loading_pct": [], "branch": []})
    return pd.concat(steps, ignore_index=True).sort_values("t_s", kind="stable").reset_index(drop=True)


def _whole_run_loading(out_dir: Path, key: PartsKey, on_part: Callable[[], None] | None) -> pd.DataFrame:
    held = _LOADINGS.get((out_dir, key))
    if held is not None:
        _LOADINGS.move_to_end((out_dir, key))
        return held
    frame = _loading_file(out_dir, key, on_part)
    _LOADINGS[(out_dir, key)] = frame
    while len(_LOADINGS) > 8:
        _LOADINGS.popitem(last=False)
    return frame


def _loading_file(out_dir: Path, key: PartsKey, on_part: Callable[[], None] | None) -> pd.DataFrame:
    """The figures kept in :data:`LOADING_CACHE` for the parts ``key``, else computed and kept."""
    cache = out_dir / LOADING_CACHE
    stamp = json.dumps(key).encode()
    try:
        table = pq.read_table(cache)
        if (table.schema.metadata or {}).get(_LOADING_KEY) == stamp:
            return table.to_pandas()
    except (OSError, ValueError):
        pass  # no cache yet, or one cut short: computed again below
    frame = _most_loaded(table_parts(out_dir, "grid_branches"), None, on_part)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    try:
        with replace_atomically(cache) as tmp:
            pq.write_table(table.replace_schema_metadata({**(table.schema.metadata or {}), _LOADING_KEY: stamp}), tmp)
    except OSError:
        pass  # a runs folder we may not write: the figures are kept in memory only
    return frame


def branch_loading(
    out_dir: Path, t_range: tuple[float, float] | None = None, on_part: Callable[[], None] | None = None
) -> pd.DataFrame:
    """The most loaded branch conductor of each grid step (:func:`openg2g.plot.run.branch_loading_envelope`:
    ``t_s`` (s), ``max_loading_pct`` (%), ``branch``), empty without a ``grid_branches`` table or
    a loading figure.

    Only ``t_s``, ``branch`` and ``loading_pct`` are read, and only from the parts that hold
    ``t_range`` (:func:`~openg2g.plot.parts.table_parts`). The whole run's figures (``t_range=None``) are computed once
    per set of parts and kept in :data:`LOADING_CACHE` beside the tables and in memory for the
    eight runs last asked; a part added or rewritten (a running run) computes them again.

    :param out_dir: the run folder.
    :param t_range: ``(start, end)`` (s), ``None`` for the whole run.
    :param on_part: called after each part read.
    """
    out_dir = Path(out_dir).resolve()
    if t_range is not None:
        return _most_loaded(table_parts(out_dir, "grid_branches", t_range), t_range, on_part)
    table_dir = out_dir / "grid_branches"
    if not table_dir.is_dir():
        return _most_loaded((), None)
    with _LOADING_LOCK:  # two draws at once compute a day's figures once, not twice
        return _whole_run_loading(out_dir, parts_key(table_dir), on_part)


@lru_cache(maxsize=16)
def _grid_times(table_dir: Path, key: PartsKey) -> np.ndarray:
    times = np.sort(read_parts(table_parts(table_dir.parent, table_dir.name), ["t_s"])["t_s"].to_numpy(dtype=float))
    times.setflags(write=False)  # shared by every caller while the parts are unchanged
    return times


def grid_times(run: RunData) -> np.ndarray:
    """The times (s) of the run's grid steps, ascending (empty without a grid table); only the
    ``t_s`` column is read, once while the table's parts are unchanged. Read-only."""
    table_dir = run.out_dir.resolve() / "grid"
    key = parts_key(table_dir) if table_dir.is_dir() else ()
    return _grid_times(table_dir, key) if key else np.array([])


_OVERVIEW_LOCK = threading.Lock()
_OVERVIEWS: OrderedDict[Path, tuple[str, Overview]] = OrderedDict()
_BUILDING: dict[Path, tuple[int, int]] = {}


def _whole_run_marks(run: RunData) -> Marks:
    """:func:`openg2g.plot.timeline.run_marks` reading only the ``datacenter`` columns it needs."""
    columns: list[str] = [c for c in ("t_s", "site", "training_power_w") if c in _columns(run.out_dir, "datacenter")]
    datacenter = read_parts(table_parts(run.out_dir, "datacenter"), columns) if len(columns) == 3 else pd.DataFrame()
    return run_marks(run.table("events"), datacenter)


def building(out_dir: Path) -> tuple[int, int] | None:
    """``(parts read, parts)`` of the overview being computed for the run in ``out_dir``;
    ``None`` when none is."""
    return _BUILDING.get(Path(out_dir).resolve())


def _build_overview(run: RunData, out_dir: Path, on_progress: Callable[[int, int], None] | None) -> Overview:
    """:func:`run_panels` of the whole run, its marks and grid steps, with :func:`building`
    saying how many of the tables' parts are read."""
    total = sum(len(table_parts(out_dir, t)) for t in ("datacenter", "models", "grid", "grid_branches"))
    _BUILDING[out_dir] = (0, total)

    def one_more() -> None:
        done, parts = _BUILDING[out_dir]
        _BUILDING[out_dir] = (min(done + 1, parts), parts)
        if on_progress is not None:
            on_progress(*_BUILDING[out_dir])

    try:
        return Overview(run_panels(run, on_part=one_more), _whole_run_marks(run), grid_times(run))
    finally:
        del _BUILDING[out_dir]


def overview(run: RunData, on_progress: Callable[[int, int], None] | None = None) -> Overview:
    """The run's whole-run time panels and marks, what its first paint draws.

    ``openg2g run`` writes it beside the tables as it runs (:data:`OVERVIEW_CACHE`,
    :class:`openg2g.plot.overview.OverviewBuilder`); for a run without one (written by an older
    version or elsewhere, interrupted, or still running) it is computed once per set of table
    parts (:func:`run_panels`, one part at a time, :func:`building` saying how far) and kept in
    that file; both are kept in memory for the eight runs last asked. A part added or rewritten
    (a running run) or a changed ``scenario.yaml`` computes it again.

    :param on_progress: called with ``(parts read, parts)`` after each part while computing it.
    """
    out_dir = run.out_dir.resolve()
    path = out_dir / OVERVIEW_CACHE
    with _OVERVIEW_LOCK:  # callbacks asking at once compute a run's overview once
        stamp = overview_stamp(out_dir)
        held = _OVERVIEWS.get(out_dir)
        if held is not None and held[0] == stamp:
            _OVERVIEWS.move_to_end(out_dir)
            return held[1]
        found = read_overview(path, stamp)
        if found is None:
            found = _build_overview(run, out_dir, on_progress)
            try:
                write_overview(path, found, stamp)
            except OSError:
                pass  # a runs folder we may not write: kept in memory only
        _OVERVIEWS[out_dir] = (stamp, found)
        while len(_OVERVIEWS) > 8:
            _OVERVIEWS.popitem(last=False)
        return found
