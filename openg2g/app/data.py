"""What the app shows, read from the run folders under its runs folder: no Dash, no plotly here.

Every run is named by its folder's path relative to the runs folder (its *run id*, ``a/b`` with
forward slashes); :func:`resolve_run` turns an id back into a folder and refuses one that leaves
the runs folder, so a request can never read elsewhere. A run folder is data of unknown origin:
symbolic links in it that point out of the runs folder (:func:`links_out`) make the app refuse
it (listed as ``outside``), and nothing it names is imported or unpickled (a pickle net only with
``openg2g app --allow-code``: :class:`RunStore`). The tables are read by the functions of
:mod:`openg2g.plot` and reduced here to what a browser can draw:

- time series: the run's overview (:func:`openg2g.plot.overview_tables.overview`, kept beside the
  run, so opening a run reads one small file) and a zoom's panels
  (:func:`openg2g.plot.overview_tables.run_panels`), each line thinned to at most ``points``
  points, are :mod:`openg2g.plot`'s; the app keeps each open run's overview
  (:meth:`RunStore.overview`), says how far one being computed is (:meth:`RunStore.building`) and
  picks a zoom's marks (:func:`run_marks_in`);
- the feeder map and the voltage profile at one grid step (:func:`map_at`): only that step's rows
  of ``grid_voltages`` are read (the part that holds it, found from the parts' ``t_s``
  statistics by :func:`openg2g.plot.parts.table_parts`, then a filter on ``t_s``), so a day-long
  run of 250 bus-phases costs one step's rows, not 200 million;
- runs side by side (:func:`compare`): summaries with the change against a baseline
  (:func:`openg2g.plot.compare.baseline_deltas`) and the curves of
  :func:`openg2g.plot.compare_runs.run_series`.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from openg2g.core.errors import G2GError
from openg2g.core.folder_lock import lock_held
from openg2g.core.state import PHASES
from openg2g.plot.compare import DEFAULT_METRICS, baseline_deltas, read_summaries
from openg2g.plot.compare_runs import SERIES, run_series
from openg2g.plot.extremes import extremes_of
from openg2g.plot.feeder import edge_segments, layout, worst_bus_voltages
from openg2g.plot.overview import VIEW_POINTS, Overview
from openg2g.plot.overview_tables import building, grid_times, overview
from openg2g.plot.parts import read_parts, table_parts
from openg2g.plot.profile import profile_segments, voltage_profile
from openg2g.plot.run import RunData
from openg2g.plot.timeline import Marks, envelope

__all__ = [
    "KEY_FIGURES",
    "AppError",
    "Comparison",
    "MapState",
    "RunEntry",
    "RunStore",
    "compare",
    "folder_inside",
    "folders_under",
    "is_run",
    "links_out",
    "list_runs",
    "map_at",
    "resolve_run",
    "run_marks_in",
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
        no summary yet), or ``unreadable`` (a summary that is not a JSON object), or ``outside``
        (the folder holds symbolic links out of the runs folder, :func:`links_out`: nothing of it
        is read).
    :param scenario: the scenario's name (``""`` when unknown).
    :param sim_time_s: simulated time reached (s).
    :param duration_s: the scenario's duration (s).
    :param figures: :data:`KEY_FIGURES` that the summary has, as numbers.
    :param error: why the run failed or stopped, as its summary says (``""`` when it says nothing).
    """

    run_id: str
    status: str
    scenario: str
    sim_time_s: float
    duration_s: float
    figures: dict[str, float] = field(default_factory=dict)
    error: str = ""


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def _entry(root: Path, folder: Path) -> RunEntry:
    run_id = folder.relative_to(root).as_posix()
    if links_out(root, folder):
        return RunEntry(run_id, "outside", "", math.nan, math.nan)
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
        str(summary.get("error") or ""),
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


def links_out(root: Path, folder: Path) -> list[str]:
    """The names of the entries of ``folder`` that are symbolic links resolving outside ``root``
    (resolved): a run folder sent by someone else could make its ``summary.json`` or a table a
    link to any file of this machine."""
    try:
        links = [p for p in folder.iterdir() if p.is_symlink()]
    except OSError:
        return []
    return sorted(p.name for p in links if not p.resolve().is_relative_to(root))


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

    :raises AppError: the id leaves ``root`` (``..``, an absolute path, a link pointing out),
        names no run folder, or a folder holding links out of ``root`` (:func:`links_out`).
    """
    root = Path(root).resolve()
    folder = folder_inside(root, run_id, "run")
    if not folder.is_dir() or not is_run(folder):
        raise AppError(f"no run {run_id!r} in the runs folder (no summary.json or scenario.yaml)")
    out = links_out(root, folder)
    if out:
        raise AppError(f"run {run_id!r} is not read: {', '.join(out)} in it are symbolic links out of the runs folder")
    return folder


class RunStore:
    """The open runs of one runs folder, each a :class:`openg2g.plot.run.RunData` read once and
    kept while its ``summary.json`` is unchanged (a running run is read again as it grows).

    :param root: the runs folder.
    :param size: runs kept at most (the least recently used is dropped).
    :param trust_pickle: read the pickle nets that runs name (``openg2g app --allow-code``); a
        run folder's own ``grid.trust_pickle`` is never taken (:class:`openg2g.plot.run.RunData`).
    """

    def __init__(self, root: Path, size: int = 8, trust_pickle: bool = False) -> None:
        self.root = Path(root).resolve()
        self.size = size
        self.trust_pickle = trust_pickle
        self._runs: OrderedDict[str, tuple[float, RunData]] = OrderedDict()
        self._positions: dict[Path, dict[str, tuple[float, float]]] = {}
        self._overviews: dict[Path, tuple[RunData, Overview]] = {}
        self._computing: dict[Path, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, run_id: str) -> RunData:
        """The run of ``run_id`` (:func:`resolve_run`)."""
        folder = resolve_run(self.root, run_id)
        summary = folder / "summary.json"
        stamp = summary.stat().st_mtime if summary.is_file() else 0.0
        with self._lock:  # callbacks open a run from several threads at once: one RunData, read once
            held = self._runs.get(run_id)
            if held is None or held[0] != stamp:
                held = (stamp, RunData(folder, trust_pickle=self.trust_pickle))
            self._runs[run_id] = held
            self._runs.move_to_end(run_id)
            while len(self._runs) > self.size:
                _, (_, dropped) = self._runs.popitem(last=False)
                self._positions.pop(dropped.out_dir, None)
                self._overviews.pop(dropped.out_dir, None)
                self._computing.pop(dropped.out_dir, None)
            return held[1]

    def overview(self, run: RunData) -> Overview:
        """:func:`openg2g.plot.overview_tables.overview` of an open run, asked of the files once per
        :class:`RunData` (which :meth:`get` renews when the run's summary changes), not at each
        slider step."""
        with self._lock:
            computing = self._computing.setdefault(run.out_dir, threading.Lock())
        # one reader per run: the panels and the map ask for it at once when a run is ticked
        with computing:
            held = self._overviews.get(run.out_dir)
            if held is None or held[0] is not run:
                held = (run, overview(run))
                self._overviews[run.out_dir] = held
            return held[1]

    def building(self, run_id: str) -> tuple[int, int] | None:
        """``(parts read, parts)`` of the overview being computed for ``run_id``
        (:func:`openg2g.plot.overview_tables.building`), ``None`` when none is."""
        return building(resolve_run(self.root, run_id))

    def positions(self, run: RunData) -> dict[str, tuple[float, float]] | None:
        """Bus -> drawing position of an open run's feeder, laid out once
        (:func:`openg2g.plot.feeder.layout`); ``None`` when the run has no readable topology."""
        if isinstance(run.topology, str):
            return None
        if run.out_dir not in self._positions:
            self._positions[run.out_dir] = layout(run.topology.buses, run.topology.edges, run.topology.source)
        return self._positions[run.out_dir]


def run_marks_in(marks: Marks, t_range: tuple[float, float] | None = None) -> Marks:
    """The events and training windows of ``marks`` (a run's, :attr:`openg2g.plot.overview.Overview.marks`) that fall
    in ``t_range``."""
    if t_range is None:
        return marks
    lo, hi = t_range
    return Marks(
        events=tuple(e for e in marks.events if lo <= e[0] <= hi),
        spans=tuple(s for s in marks.spans if s[1] >= lo and s[0] <= hi),
    )


LOADING_COLUMNS = ("branch", "from_bus", "to_bus", "loading_pct", "rating_default")
"""The columns of :attr:`MapState.loading`."""


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
    :param loading: the step's branch loading where the run records it (``outputs.branches:
        all``), one row per branch drawn on the map: ``branch`` (as in ``grid_branches``),
        ``from_bus``, ``to_bus`` and ``loading_pct`` (its most loaded terminal and phase, % of the
        normal rating) and ``rating_default`` (that rating is OpenDSS's default, the feeder
        giving none), most loaded first; empty without a ``grid_branches`` table.
    :param unplaced: branches of the step's ``grid_branches`` rows that match no branch of the
        map (a regulator bank recorded per phase, e.g. ``transformer.reg1a``).
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
    loading: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(LOADING_COLUMNS)))
    unplaced: tuple[str, ...] = ()

    def drawing_key(self) -> str:
        """A digest of the step's bus-phases in their order, which of them have a value and
        whether branch loading is drawn: two steps of a run with equal keys draw the same traces
        (only values differ), so the browser's figures of one need only their values patched to
        show the other."""
        digest = hashlib.blake2b("\n".join(self.bus_phase_v_pu).encode(), digest_size=16)
        digest.update(np.isfinite(np.fromiter(self.bus_phase_v_pu.values(), dtype=float)).tobytes())
        digest.update(b"loading" if len(self.loading) else b"")
        return digest.hexdigest()


def loading_at(run: RunData, step: float, edges: pd.DataFrame) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """The branch loading of grid step ``step`` (s) on the map's branches (:attr:`MapState.loading`)
    and the recorded branches that match none (:attr:`MapState.unplaced`).

    A recorded branch ``kind.name`` is the map's branch of that ``name`` (a switch the grid
    models as a line included); ``kind.<name><phase>`` with no such branch is one phase of the
    map's regulator ``name`` (a bank recorded per phase: ``transformer.reg1a`` of ``reg1``),
    which shows its most loaded phase.
    """
    rows = read_parts(
        table_parts(run.out_dir, "grid_branches", (step, step)),
        columns=["branch", "loading_pct", "rating_default"],
        filters=[("t_s", "==", step)],
    )
    if rows.empty:
        return pd.DataFrame(columns=list(LOADING_COLUMNS)), ()
    per_branch = rows.assign(branch=rows["branch"].astype(str)).groupby("branch", sort=False)
    most, default = per_branch["loading_pct"].max(), per_branch["rating_default"].any()
    by_name = edges.assign(name=edges["name"].astype(str)).drop_duplicates("name").set_index("name")
    regulators = set(by_name.index[by_name["kind"] == "regulator"]) if "kind" in by_name else set()
    names = most.index.str.split(".", n=1).str[-1]
    banked = np.array([n[:-1] in regulators and n[-1:] in PHASES for n in names], dtype=bool)
    exact = names.isin(by_name.index)
    edge = np.where(exact, names, np.where(banked, names.str[:-1], ""))
    placed = edge != ""
    label = np.where(exact, most.index, np.char.add("regulator.", edge.astype(str)))  # a bank by its regulator
    grouped = (
        pd.DataFrame(
            {
                "edge": edge,
                "branch": label,
                "loading_pct": most.to_numpy(dtype=float),
                "rating_default": default.to_numpy(dtype=bool),
            }
        )[placed]
        .groupby("edge", sort=False)
        .agg(branch=("branch", "first"), loading_pct=("loading_pct", "max"), rating_default=("rating_default", "any"))
    )
    ends = by_name.loc[grouped.index, ["from_bus", "to_bus"]].astype(str)
    frame = pd.DataFrame(
        {
            "branch": grouped["branch"].to_numpy(),
            "from_bus": ends["from_bus"].to_numpy(),
            "to_bus": ends["to_bus"].to_numpy(),
            "loading_pct": grouped["loading_pct"].to_numpy(dtype=float),
            "rating_default": grouped["rating_default"].to_numpy(dtype=bool),
        }
    )
    frame = frame.sort_values("loading_pct", ascending=False, kind="stable").reset_index(drop=True)
    return frame, tuple(most.index[~placed])


def band_margin(run: RunData, v_pu: Any) -> Any:
    """How far each voltage (pu) lies inside the run's limits (pu): negative beyond one, NaN for NaN."""
    assert run.v_min_pu is not None and run.v_max_pu is not None
    return np.fmin(v_pu - run.v_min_pu, run.v_max_pu - v_pu)


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
    :param times: the run's grid step times (s), ascending (:attr:`openg2g.plot.overview.Overview.grid_times_s`);
        ``None`` reads them (:func:`openg2g.plot.overview_tables.grid_times`).

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
    per_bus = worst_bus_voltages(extremes_of(rows), run.v_min_pu, run.v_max_pu)
    phase_margin = band_margin(run, rows["v_pu"])
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
        positions = layout(topology.buses, topology.edges, topology.source)
    loading, unplaced = loading_at(run, step, topology.edges)
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
        loading=loading,
        unplaced=unplaced,
    )


@dataclass(frozen=True)
class BusVoltages:
    """One bus's voltages over a run (the feeder view's chart of a bus clicked on the map).

    :param bus: the bus.
    :param phases: phase -> ``(t_s, v_pu)``, thinned to :data:`~openg2g.plot.overview.VIEW_POINTS`
        without losing an extreme (:func:`~openg2g.plot.timeline.envelope`).
    :param steps: grid steps recorded for the bus.
    :param steps_beyond: of those, the steps at which a phase is beyond a limit.
    :param seconds_beyond: ``steps_beyond`` times the grid step (s).
    :param worst_t_s: the time of the bus-phase voltage nearest to or furthest beyond a limit (s).
    :param worst_v_pu: that voltage (pu).
    :param worst_phase: its phase.
    """

    bus: str
    phases: dict[str, tuple[np.ndarray, np.ndarray]]
    steps: int
    steps_beyond: int
    seconds_beyond: float
    worst_t_s: float
    worst_v_pu: float
    worst_phase: str


def bus_voltages(run: RunData, bus: str) -> BusVoltages:
    """Every recorded voltage of ``bus`` (each phase), counted against the run's limits.

    Reads the bus's rows of ``grid_voltages`` (a filter on ``bus_phase``: every part is scanned).

    :raises AppError: the run has no ``grid_voltages`` or does not record ``bus``.
    """
    assert run.v_min_pu is not None and run.v_max_pu is not None
    names = [f"{bus}.{ph}" for ph in PHASES]
    rows = read_parts(
        table_parts(run.out_dir, "grid_voltages"),
        columns=["t_s", "bus_phase", "v_pu"],
        filters=[("bus_phase", "in", names)],
    )
    if rows.empty:
        raise AppError(f"bus {bus!r} has no recorded voltage in this run (not monitored, or no grid_voltages table)")
    rows = rows.assign(bus_phase=rows["bus_phase"].astype(str)).sort_values("t_s", kind="stable")
    t = rows["t_s"].to_numpy(dtype=float)
    v = rows["v_pu"].to_numpy(dtype=float)
    margin = band_margin(run, v)
    if not np.isfinite(margin).any():
        raise AppError(f"bus {bus!r} has no voltage with a value in this run")
    steps = np.unique(t)
    beyond = np.unique(t[margin < 0])
    step_s = float(np.median(np.diff(steps))) if steps.size > 1 else 0.0
    worst = int(np.nanargmin(margin))
    phases = {}
    for name in names:
        mine = (rows["bus_phase"] == name).to_numpy()
        if mine.any():
            phases[name.rsplit(".", 1)[1]] = envelope(t[mine], v[mine], VIEW_POINTS)
    return BusVoltages(
        bus=bus,
        phases=phases,
        steps=int(steps.size),
        steps_beyond=int(beyond.size),
        seconds_beyond=beyond.size * step_s,
        worst_t_s=float(t[worst]),
        worst_v_pu=float(v[worst]),
        worst_phase=str(rows["bus_phase"].iloc[worst]).rsplit(".", 1)[1],
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
    :param lengths_s: run label -> the simulated time it covers (s; NaN where its summary says none).
    """

    labels: dict[str, str]
    summaries: pd.DataFrame
    deltas: pd.DataFrame
    curves: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]
    baseline: str
    lengths_s: dict[str, float] = field(default_factory=dict)

    def unlike_baseline(self) -> list[str]:
        """The runs (labels) that cover another length of time than the baseline: their totals
        (tap operations, violation integral) differ by the length, not by the control."""
        base = self.lengths_s.get(self.baseline, math.nan)
        return [
            label
            for label, length in self.lengths_s.items()
            if label != self.baseline
            and math.isfinite(base)
            and math.isfinite(length)
            and not math.isclose(length, base)
        ]


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
    lengths = {label: _number(summary.get("sim_time_s")) for label, summary in rows}
    return Comparison(labels, frame, deltas, curves, labels[baseline_id], lengths)
