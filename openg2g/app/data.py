"""What the app shows, read from the run folders under its runs folder: no Dash, no plotly here.

Every run is named by its folder's path relative to the runs folder (its *run id*, ``a/b`` with
forward slashes); :func:`resolve_run` turns an id back into a folder and refuses one that leaves
the runs folder, so a request can never read elsewhere. The tables are read by the functions of
:mod:`openg2g.plot` and reduced here to what a browser can draw:

- time series (:func:`run_panels`): each line thinned to at most ``points`` points by
  :func:`openg2g.plot.timeline.envelope` (the lowest and the highest sample of each run of
  samples, so every extreme is drawn), over the zoomed time range or the whole run, the tables
  read one part at a time; the whole run's kept beside the run (:func:`overview`,
  :data:`OVERVIEW_CACHE`), so opening a run reads one small file;
- the feeder map and the voltage profile at one grid step (:func:`map_at`): only that step's rows
  of ``grid_voltages`` are read (the part that holds it, found from the parts' ``t_s``
  statistics by :func:`table_parts`, then a filter on ``t_s``), so a day-long run of 250
  bus-phases costs one step's rows, not 200 million;
- the most loaded branch (:func:`branch_loading`): three columns of ``grid_branches``, the parts
  of a zoomed range only; the whole run's figures computed one part at a time and kept beside the
  run (:data:`LOADING_CACHE`);
- runs side by side (:func:`compare`): summaries with the change against a baseline
  (:func:`openg2g.plot.compare.baseline_deltas`) and the curves of
  :func:`openg2g.plot.compare_runs.run_series`.
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from openg2g.core.atomic import replace_atomically
from openg2g.core.errors import G2GError
from openg2g.core.folder_lock import lock_held
from openg2g.core.state import PHASES
from openg2g.plot.commands import command_records
from openg2g.plot.compare import DEFAULT_METRICS, baseline_deltas, read_summaries
from openg2g.plot.compare_runs import SERIES, run_series
from openg2g.plot.feeder import edge_segments, layout, worst_bus_voltages
from openg2g.plot.overview import (
    OVERVIEW_CACHE,
    VIEW_POINTS,
    Line,
    Overview,
    Panel,
    PanelLines,
    PartsKey,
    TableLines,
    assemble_panels,
    command_rows,
    loading_line,
    overview_stamp,
    parts_key,
    read_overview,
    scenario_deadlines,
    write_overview,
)
from openg2g.plot.profile import profile_segments, voltage_profile
from openg2g.plot.run import RunData, branch_loading_envelope
from openg2g.plot.timeline import Marks, envelope, run_marks

__all__ = [
    "KEY_FIGURES",
    "LOADING_CACHE",
    "OVERVIEW_CACHE",
    "VIEW_POINTS",
    "AppError",
    "Comparison",
    "Line",
    "MapState",
    "Overview",
    "Panel",
    "RunEntry",
    "RunStore",
    "TablePart",
    "branch_loading",
    "building",
    "compare",
    "folder_inside",
    "folders_under",
    "is_run",
    "list_runs",
    "map_at",
    "overview",
    "read_parts",
    "resolve_run",
    "run_panels",
    "table_parts",
]

MAX_DEPTH = 3
"""How deep under the runs folder run folders are looked for (``whatif/<name>`` is depth 2)."""

KEY_FIGURES: tuple[str, ...] = (
    "violation_integral_pu_s",
    "v_min_pu",
    "mean_throughput_tok_s",
    "itl_deadline_miss_fraction",
)
"""The summary figures the runs list shows."""


class AppError(G2GError):
    """A request the app cannot serve (a run that is not under the runs folder, a time outside the
    run); the message is shown on the page as it is."""


@dataclass(frozen=True)
class RunEntry:
    """One run folder under the runs folder.

    :param run_id: its path relative to the runs folder, ``/``-separated.
    :param status: ``complete``, ``running``, ``interrupted``, ``failed`` (the summary's), or
        ``stopped`` (the summary says ``running`` but no process holds the folder's lock: the run
        died without its last summary, e.g. ``kill -9``), or ``starting`` (a ``scenario.yaml`` and
        no summary yet), or ``unreadable`` (a summary that is not a JSON object).
    :param scenario: the scenario's name (``""`` when unknown).
    :param sim_time_s: simulated time reached (s).
    :param duration_s: the scenario's duration (s).
    :param figures: :data:`KEY_FIGURES` that the summary has, as numbers.
    """

    run_id: str
    status: str
    scenario: str
    sim_time_s: float
    duration_s: float
    figures: dict[str, float] = field(default_factory=dict)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def _entry(root: Path, folder: Path) -> RunEntry:
    run_id = folder.relative_to(root).as_posix()
    try:
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return RunEntry(run_id, "starting", "", 0.0, math.nan)
    except (OSError, UnicodeDecodeError, ValueError):
        summary = None
    if not isinstance(summary, dict):
        return RunEntry(run_id, "unreadable", "", math.nan, math.nan)
    figures = {k: _number(summary.get(k)) for k in KEY_FIGURES if k in summary}
    return RunEntry(
        run_id,
        _status(folder, str(summary.get("status", "complete"))),
        str(summary.get("scenario", "")),
        _number(summary.get("sim_time_s")),
        _number(summary.get("duration_s")),
        figures,
    )


def _status(folder: Path, written: str) -> str:
    """The summary's status, ``stopped`` for a ``running`` one whose folder's lock no process
    holds (a run written through the Python API has no lock file and keeps its summary's word)."""
    if written != "running":
        return written
    try:
        held = lock_held(folder)
    except OSError:
        return written  # a lock file we may not open: nothing to say against the summary
    return "stopped" if held is False else written


def is_run(folder: Path) -> bool:
    """Whether ``folder`` is a run's: it holds ``summary.json`` or ``scenario.yaml``."""
    return (folder / "summary.json").is_file() or (folder / "scenario.yaml").is_file()


def folders_under(root: Path, enter: Callable[[Path], bool]) -> list[Path]:
    """``root`` and its folders at most :data:`MAX_DEPTH` deep, level by level in name order;
    hidden folders and symbolic links to folders are skipped, and a folder is looked into only
    where ``enter(folder)`` says so (a run's sub-folders are its tables).

    :raises AppError: ``root`` is not a folder.
    """
    if not root.is_dir():
        raise AppError(f"runs folder {root} is not a folder")
    found: list[Path] = []
    level = [root]
    for _ in range(MAX_DEPTH + 1):
        below: list[Path] = []
        for folder in level:
            found.append(folder)
            if not enter(folder):
                continue
            try:
                below += [
                    p for p in folder.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
                ]
            except OSError:
                continue
        level = sorted(below)
    return found


def folder_inside(root: Path, ident: str, what: str) -> Path:
    """The folder ``ident`` names inside ``root`` (resolved), refused when it leaves ``root``.

    :param what: ``"run"`` or ``"study"``, for messages.
    :raises AppError: ``ident`` is not a non-empty string, or it leaves ``root`` (``..``, an
        absolute path, a link pointing out).
    """
    if not isinstance(ident, str) or not ident or "\x00" in ident:
        raise AppError(f"not a {what} id: {ident!r}")
    folder = (root / ident).resolve()
    if folder != root and root not in folder.parents:
        raise AppError(f"{what} {ident!r} is not inside the runs folder")
    return folder


def list_runs(root: Path) -> list[RunEntry]:
    """The run folders under ``root`` (itself included), at most :data:`MAX_DEPTH` deep, sorted
    by run id; hidden folders and symbolic links to folders are not entered.

    :raises AppError: ``root`` is not a folder.
    """
    root = Path(root).resolve()
    runs = [_entry(root, f) for f in folders_under(root, lambda f: not is_run(f)) if is_run(f)]
    return sorted(runs, key=lambda e: e.run_id)


def resolve_run(root: Path, run_id: str) -> Path:
    """The folder of a run id, refused when it is not a run folder inside ``root``.

    :raises AppError: the id leaves ``root`` (``..``, an absolute path, a link pointing out) or
        names no run folder.
    """
    root = Path(root).resolve()
    folder = folder_inside(root, run_id, "run")
    if not folder.is_dir() or not is_run(folder):
        raise AppError(f"no run {run_id!r} in the runs folder (no summary.json or scenario.yaml)")
    return folder


class RunStore:
    """The open runs of one runs folder, each a :class:`openg2g.plot.run.RunData` read once and
    kept while its ``summary.json`` is unchanged (a running run is read again as it grows).

    :param root: the runs folder.
    :param size: runs kept at most (the least recently used is dropped).
    """

    def __init__(self, root: Path, size: int = 8) -> None:
        self.root = Path(root).resolve()
        self.size = size
        self._runs: OrderedDict[str, tuple[float, RunData]] = OrderedDict()
        self._positions: dict[Path, dict[str, tuple[float, float]]] = {}
        self._overviews: dict[Path, tuple[RunData, Overview]] = {}
        self._lock = threading.Lock()

    def get(self, run_id: str) -> RunData:
        """The run of ``run_id`` (:func:`resolve_run`)."""
        folder = resolve_run(self.root, run_id)
        summary = folder / "summary.json"
        stamp = summary.stat().st_mtime if summary.is_file() else 0.0
        with self._lock:  # callbacks open a run from several threads at once: one RunData, read once
            held = self._runs.get(run_id)
            if held is None or held[0] != stamp:
                held = (stamp, RunData(folder))
            self._runs[run_id] = held
            self._runs.move_to_end(run_id)
            while len(self._runs) > self.size:
                _, (_, dropped) = self._runs.popitem(last=False)
                self._positions.pop(dropped.out_dir, None)
                self._overviews.pop(dropped.out_dir, None)
            return held[1]

    def overview(self, run: RunData) -> Overview:
        """:func:`overview` of an open run, asked of the files once per :class:`RunData` (which
        :meth:`get` renews when the run's summary changes), not at each slider step."""
        held = self._overviews.get(run.out_dir)
        if held is None or held[0] is not run:
            held = (run, overview(run))
            self._overviews[run.out_dir] = held
        return held[1]

    def building(self, run_id: str) -> tuple[int, int] | None:
        """``(parts read, parts)`` of the overview being computed for ``run_id`` (:func:`building`),
        ``None`` when none is."""
        return building(resolve_run(self.root, run_id))

    def positions(self, run: RunData) -> dict[str, tuple[float, float]] | None:
        """Bus -> drawing position of an open run's feeder, laid out once (a graph layout of a
        net without coordinates takes seconds); ``None`` when the run has no readable topology."""
        if isinstance(run.topology, str):
            return None
        if run.out_dir not in self._positions:
            self._positions[run.out_dir] = layout(run.topology.buses, run.topology.edges)
        return self._positions[run.out_dir]


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

    :param run: the run (:class:`RunStore`).
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
                raise AppError(f"{table_dir / name}: row group {k} has no t_s statistics; it cannot be read in part")
            lows.append(float(stats.min))
            highs.append(float(stats.max))
        if meta.num_rows:
            parts.append(TablePart(table_dir / name, min(lows), max(highs), meta.num_rows))
    return tuple(parts)


def table_parts(out_dir: Path, name: str, t_range: tuple[float, float] | None = None) -> tuple[TablePart, ...]:
    """The parts of a run's table that hold rows in ``t_range`` (all when ``None``), in time order,
    found from each part's ``t_s`` statistics (its footer; no data is read). The statistics are
    kept while the table's parts are unchanged.

    :raises AppError: a part without ``t_s`` statistics.
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
    if not parts:
        return pd.DataFrame()
    return pd.read_parquet([p.path for p in parts], columns=columns, filters=filters)


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
    ``t_range`` (:func:`table_parts`). The whole run's figures (``t_range=None``) are computed once
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


def run_marks_in(marks: Marks, t_range: tuple[float, float] | None = None) -> Marks:
    """The events and training windows of ``marks`` (a run's, :attr:`Overview.marks`) that fall
    in ``t_range``."""
    if t_range is None:
        return marks
    lo, hi = t_range
    return Marks(
        events=tuple(e for e in marks.events if lo <= e[0] <= hi),
        spans=tuple(s for s in marks.spans if s[1] >= lo and s[0] <= hi),
    )


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


@dataclass(frozen=True)
class MapState:
    """The feeder at one grid step.

    :param t_s: the grid step (s).
    :param positions: bus -> drawing position.
    :param segments: ``(kind, in_service)`` -> branch segments (:func:`openg2g.plot.feeder.edge_segments`).
    :param bus_phase_v_pu: the step's rows of ``grid_voltages``: bus-phase -> voltage (pu).
    :param bus_v_pu: bus -> its worst bus-phase voltage at the step (nearest to or furthest
        beyond a limit; pu), NaN for a bus without a monitored phase.
    :param worst: the bus-phases nearest to or beyond the limits: ``bus_phase``, ``v_pu``,
        ``margin_pu`` (negative outside the band), smallest margin first.
    :param profile: :func:`openg2g.plot.profile.voltage_profile` at the step.
    :param profile_segments: phase -> branch segments ``[(km, pu), (km, pu)]`` of the profile.
    :param sites: the datacenter buses.
    """

    t_s: float
    positions: dict[str, tuple[float, float]]
    segments: dict[tuple[str, bool], list[list[tuple[float, float]]]]
    bus_phase_v_pu: dict[str, float]
    bus_v_pu: dict[str, float]
    worst: pd.DataFrame
    profile: pd.DataFrame
    profile_segments: dict[str, list[list[tuple[float, float]]]]
    sites: tuple[str, ...]


def map_at(
    run: RunData,
    t_s: float,
    positions: dict[str, tuple[float, float]] | None = None,
    n_worst: int = 8,
    times: np.ndarray | None = None,
) -> MapState:
    """The feeder map and voltage profile of a run at the grid step at or just before ``t_s``.

    Reads only that step's rows of ``grid_voltages``.

    :param positions: bus -> drawing position (:meth:`RunStore.positions`); ``None`` computes
        them (:func:`openg2g.plot.feeder.layout`).
    :param n_worst: bus-phases in :attr:`MapState.worst`.
    :param times: the run's grid step times (s), ascending (:attr:`Overview.grid_times_s`);
        ``None`` reads them (:func:`grid_times`).

    :raises AppError: the run has no ``grid_voltages`` or no readable topology, or ``t_s`` is
        before its first grid step.
    """
    topology = run.topology
    if isinstance(topology, str):
        raise AppError(f"no feeder map: {topology}")
    times = grid_times(run) if times is None else times
    at = times[times <= t_s + 1e-9]
    if at.size == 0:
        raise AppError(
            f"no grid step at or before t = {t_s:g} s" + (f" (the first is {times[0]:g} s)" if times.size else "")
        )
    step = float(at[-1])
    rows = read_parts(table_parts(run.out_dir, "grid_voltages", (step, step)), filters=[("t_s", "==", step)])
    if rows.empty:
        raise AppError("no feeder map: the run has no grid_voltages table (set outputs.voltages: all)")
    assert run.v_min_pu is not None and run.v_max_pu is not None
    per_bus = worst_bus_voltages(rows, run.v_min_pu, run.v_max_pu)
    phase_margin = np.fmin(rows["v_pu"] - run.v_min_pu, run.v_max_pu - rows["v_pu"])
    worst = (
        pd.DataFrame(
            {"bus_phase": rows["bus_phase"].astype(str), "v_pu": rows["v_pu"].astype(float), "margin_pu": phase_margin}
        )
        .sort_values("margin_pu", kind="stable")
        .head(n_worst)
        .reset_index(drop=True)
    )
    profile = voltage_profile(rows, topology, step)
    live = topology.edges[topology.edges["in_service"].astype(bool)]
    if positions is None:
        positions = layout(topology.buses, topology.edges)
    return MapState(
        t_s=step,
        positions=positions,
        segments=edge_segments(topology.edges, positions),
        bus_phase_v_pu=dict(zip(rows["bus_phase"].astype(str), rows["v_pu"].astype(float))),
        bus_v_pu={str(b): float(v) for b, v in per_bus["v_pu"].items()},
        worst=worst,
        profile=profile,
        profile_segments={
            ph: profile_segments(profile[(profile["phase"] == ph) & profile["distance_km"].notna()], live)
            for ph in PHASES
        },
        sites=tuple(run.sites),
    )


@dataclass(frozen=True)
class Comparison:
    """Runs side by side.

    :param labels: run id -> its label in the tables (the scenario name, or the folder when runs
        share one).
    :param summaries: one row per run (index the labels), the compared figures as columns.
    :param deltas: each run's change against the baseline (:func:`openg2g.plot.compare.baseline_deltas`).
    :param curves: quantity -> run label -> thinned ``(t_s, values)`` in the quantity's display unit.
    :param baseline: the baseline's label.
    """

    labels: dict[str, str]
    summaries: pd.DataFrame
    deltas: pd.DataFrame
    curves: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]
    baseline: str


def compare(root: Path, run_ids: list[str], baseline_id: str, points: int = VIEW_POINTS) -> Comparison:
    """Compare runs against a baseline among them.

    :raises AppError: fewer than two runs, the baseline not among them, or a run id that is not a
        run folder (:func:`resolve_run`).
    """
    if len(run_ids) < 2:
        raise AppError("select two or more runs to compare")
    if baseline_id not in run_ids:
        raise AppError(f"the baseline {baseline_id!r} is not among the selected runs")
    folders = [resolve_run(root, r) for r in run_ids]
    rows = read_summaries(folders)
    labels = {r: label for r, (label, _) in zip(run_ids, rows)}
    keys = list(DEFAULT_METRICS)
    frame = pd.DataFrame({label: {k: summary.get(k) for k in keys} for label, summary in rows}).T
    deltas = baseline_deltas(rows, labels[baseline_id], keys)
    curves: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    for run_id, folder in zip(run_ids, folders):
        for key, curve in run_series(folder).items():
            scale = SERIES[key].scale
            curves.setdefault(key, {})[labels[run_id]] = envelope(
                curve.index.to_numpy(dtype=float), curve.to_numpy(dtype=float) * scale, points
            )
    return Comparison(labels, frame, deltas, curves, labels[baseline_id])
