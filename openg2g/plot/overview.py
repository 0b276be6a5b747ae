"""A run's whole-run time panels (what the app's first paint draws) and the file that keeps them.

Each line is thinned for a browser (:data:`VIEW_POINTS` points at most) by
:class:`~openg2g.plot.timeline.EnvelopeStream`, step signals by
:class:`~openg2g.plot.timeline.ChangeStream`, both fed a table's rows in time-ordered pieces
through :class:`TableLines`. Two paths feed them: ``openg2g run``, with the rows of each flush
as it writes them (:class:`OverviewBuilder`, so a finished run already has its overview), and
:mod:`openg2g.plot.overview_tables`, with a finished run's table parts read one at a time (a run
written before, or elsewhere), what the app opens. The same rows give the same points either way.

The overview is kept in :data:`OVERVIEW_CACHE` beside the run's tables, written whole or not at
all, with the table parts and ``scenario.yaml`` it was computed from (:func:`overview_stamp`): a
reader uses it only while those are unchanged.

This module imports neither pandas nor matplotlib (``openg2g run`` builds the overview without
them; the path from the tables, which reads them with pandas, is therefore a module of its own):
the readings of a run's files both paths share are here too, the command rows
(:func:`command_rows`), the tap columns (:func:`tap_columns_of`), the scenario's deadlines and
voltage limits (:func:`scenario_deadlines`, :func:`scenario_limits`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from openg2g.core.arrow import arrow_array
from openg2g.core.atomic import replace_atomically
from openg2g.core.errors import G2GError
from openg2g.core.state import PHASES
from openg2g.core.yamltext import YamlTextError, read_yaml_text
from openg2g.plot.colors import PHASE_COLORS
from openg2g.plot.parts import parts_key
from openg2g.plot.timeline import (
    ChangeStream,
    EnvelopeStream,
    Marks,
    TrainingSpans,
    envelope,
    table_groups,
)

__all__ = [
    "DEADLINE",
    "HIGHEST_V",
    "LOWEST_V",
    "OVERVIEW_CACHE",
    "OVERVIEW_TABLES",
    "VIEW_POINTS",
    "CommandRow",
    "Line",
    "LineSpec",
    "Overview",
    "OverviewBuilder",
    "Panel",
    "PanelLines",
    "TableLines",
    "assemble_panels",
    "command_rows",
    "deadline_of",
    "loading_line",
    "overview_stamp",
    "read_overview",
    "scenario_data",
    "scenario_deadlines",
    "scenario_limits",
    "tap_columns_of",
    "write_overview",
]

VIEW_POINTS = 1600
"""Points per line sent to the browser: two (lowest, highest) per pixel column of a plot 800
columns wide."""

OVERVIEW_CACHE = ".openg2g-app-overview.parquet"
"""A run's whole-run time panels (:class:`Overview`), kept beside its tables (hidden; written whole
or not at all): one row per drawn point (``line``, ``t_s``, ``y``), then one per grid step (its
time), the panels, lines and marks and the table parts they were computed from in its metadata."""

OVERVIEW_TABLES = ("datacenter", "models", "grid", "grid_branches", "commands", "events")
"""The tables an overview is computed from."""

_OVERVIEW_KEY = b"openg2g.overview"
_OVERVIEW_VERSION = 1


@dataclass(frozen=True)
class Line:
    """One line of a time panel, already thinned for drawing.

    :param name: legend name.
    :param t_s: times (s).
    :param y: values in the panel's unit.
    :param step: a step signal (drawn holding each value until the next).
    :param dash: ``solid``, ``dot`` or ``dash``.
    :param color: a CSS colour, or ``""`` for the plot's next colour.
    """

    name: str
    t_s: np.ndarray
    y: np.ndarray
    step: bool = False
    dash: str = "solid"
    color: str = ""


@dataclass(frozen=True)
class Panel:
    """One row of the time series: a quantity, its unit and its lines.

    :param key: short stable name (``dc_power``, ``batch``...).
    :param ylabel: axis label with the unit.
    :param lines: the lines drawn.
    :param log2: a base-2 logarithmic axis (batch sizes).
    :param levels: horizontal reference lines ``(value, label)`` (limits, 100 % loading).
    :param categories: for the command panel, the actuator names the y values index.
    """

    key: str
    ylabel: str
    lines: list[Line]
    log2: bool = False
    levels: tuple[tuple[float, str], ...] = ()
    categories: tuple[str, ...] = ()


@dataclass(frozen=True)
class Overview:
    """What a run's first paint draws: the time panels of the whole run and its marks.

    :param panels: the time panels, each line thinned to :data:`VIEW_POINTS` points at most.
    :param marks: the run's events and training windows.
    :param grid_times_s: the times (s) of its grid steps, ascending (the slider's steps).
    """

    panels: list[Panel]
    marks: Marks
    grid_times_s: np.ndarray


@dataclass(frozen=True)
class LineSpec:
    """How one line of a group of a table is drawn: ``value`` turns the column into the panel's
    unit; a ``step`` line keeps its changes (:class:`ChangeStream`), the others their envelope;
    ``{}`` in ``name`` is replaced by the group's name."""

    name: str
    column: str
    value: Callable[[np.ndarray], np.ndarray] = field(default=lambda y: y)
    step: bool = False
    dash: str = "solid"
    color: str = ""


class TableLines:
    """The thinned lines of one table's groups, its rows fed in time-ordered pieces.

    :param keys: the columns that name a group (``None``: the table is one group).
    :param specs: the lines of each group.
    :param label: a group's name in the line names.
    :param total: a group's number of rows in the whole table (what :class:`EnvelopeStream`
        needs before its first piece).
    :param points: points per line at most.
    """

    def __init__(
        self,
        keys: str | list[str] | None,
        specs: list[LineSpec],
        label: Callable[[Any], str],
        total: Callable[[Any], int],
        points: int,
    ) -> None:
        self.keys = keys
        self.specs = specs
        self._label = label
        self._total = total
        self._points = points
        self._streams: dict[Any, list[tuple[LineSpec, EnvelopeStream | ChangeStream]]] = {}

    @property
    def columns(self) -> list[str]:
        """The columns a piece must have: the keys, ``t_s`` and the lines' columns."""
        keys = [self.keys] if isinstance(self.keys, str) else list(self.keys or [])
        return list(dict.fromkeys([*keys, "t_s", *(s.column for s in self.specs)]))

    def add(self, columns: Mapping[str, Any]) -> None:
        """The next rows of the table: :attr:`columns` -> values, after every row added before."""
        t_all = np.asarray(columns["t_s"], dtype=float)
        for key, rows in table_groups(columns, self.keys):
            streams = self._streams.get(key)
            if streams is None:
                streams = [
                    (
                        replace(spec, name=spec.name.format(self._label(key))),
                        ChangeStream() if spec.step else EnvelopeStream(self._total(key), self._points),
                    )
                    for spec in self.specs
                ]
                self._streams[key] = streams
            t = t_all[rows]
            for spec, stream in streams:
                stream.add(t, spec.value(np.asarray(columns[spec.column], dtype=float)[rows]))

    def lines(self) -> list[Line]:
        """Every group's lines, the groups in order of first appearance.

        :raises ValueError: a group was given other than its ``total`` rows.
        """
        return [
            Line(spec.name, *stream.result(), step=spec.step, dash=spec.dash, color=spec.color)
            for streams in self._streams.values()
            for spec, stream in streams
        ]


def _mw(y: np.ndarray) -> np.ndarray:
    return y / 1e6


def _ms(y: np.ndarray) -> np.ndarray:
    return y * 1e3


_POWER = [LineSpec(f"{{}} {ph}", f"p_{ph}_w", _mw, color=PHASE_COLORS[ph]) for ph in PHASES]
_PER_MODEL = [
    LineSpec("{}", "batch_size", step=True),
    LineSpec("{}", "itl_s", _ms),
    LineSpec("{}", "throughput_tok_s", _mw),
]


LOWEST_V = "lowest bus-phase"
"""The voltage panel's line of each grid step's lowest bus-phase voltage (pu)."""

HIGHEST_V = "highest bus-phase"
"""The voltage panel's line of each grid step's highest bus-phase voltage (pu)."""


def _grid_specs(banks: Mapping[str, Mapping[str, str]]) -> list[LineSpec]:
    return (
        [
            LineSpec(LOWEST_V, "v_min_pu", color="#08519c"),
            LineSpec(HIGHEST_V, "v_max_pu", color="#6baed6"),
        ]
        + [LineSpec(f"P {ph}", f"p_sub_{ph}_w", _mw, color=PHASE_COLORS[ph]) for ph in PHASES]
        + [LineSpec(f"Q {ph}", f"q_sub_{ph}_var", _mw, color=PHASE_COLORS[ph], dash="dot") for ph in PHASES]
        + [
            LineSpec(f"{bank} {phase}", column, step=True)
            for bank, columns in banks.items()
            for phase, column in columns.items()
        ]
    )


class PanelLines:
    """The lines of the ``datacenter``, ``models`` and ``grid`` tables' panels, fed in pieces.

    :param grid_columns: the ``grid`` table's columns (its regulator taps are lines).
    :param total: ``(table, group)`` -> the group's rows in the whole table.
    :param points: points per line at most.
    """

    def __init__(self, grid_columns: list[str], total: Callable[[str, Any], int], points: int = VIEW_POINTS) -> None:
        self.banks = tap_columns_of(grid_columns)

        def of(table: str) -> Callable[[Any], int]:
            return lambda key: total(table, key)

        self.tables = {
            "datacenter": TableLines("site", _POWER, str, of("datacenter"), points),
            "models": TableLines(["site", "model"], _PER_MODEL, lambda k: f"{k[0]}/{k[1]}", of("models"), points),
            "grid": TableLines(None, _grid_specs(self.banks), str, of("grid"), points),
        }


DEADLINE = "deadline "
"""How an ITL panel's level names its model's deadline: ``deadline site/model``."""


def deadline_of(label: str) -> str | None:
    """The ``site/model`` (a model line's name) whose ITL deadline a panel level labelled
    ``label`` is, ``None`` for any other level."""
    return label.removeprefix(DEADLINE) if label.startswith(DEADLINE) else None


def assemble_panels(
    lines: PanelLines,
    deadlines: Mapping[tuple[str, str], float],
    limits: tuple[float, float],
    loading: Line | None,
    commands: list[CommandRow],
) -> list[Panel]:
    """The time panels that a run has the data for, in the page's order.

    Rows: datacenter power per phase (MW), batch size per model (steps), ITL per model (ms) with
    its deadline, throughput per model (million tok/s), lowest and highest bus-phase voltage (pu)
    with the limits, substation P (MW) and Q (Mvar) per phase, regulator taps (steps), the most
    loaded branch (%), controller commands and scenario events (one row per actuator).

    :param lines: the tables' lines, every row fed.
    :param deadlines: ``(site, model)`` -> ITL deadline (s) (:func:`scenario_deadlines`).
    :param limits: the voltage limits (pu) (:func:`scenario_limits`).
    :param loading: the most loaded branch's line, ``None`` without branch figures.
    :param commands: the commands and events to show (:func:`command_rows`).
    :raises ValueError: a line was fed other than its total rows.
    """
    panels: list[Panel] = []
    dc = lines.tables["datacenter"].lines()
    if dc:
        panels.append(Panel("dc_power", "datacenter P (MW)", dc))
    models = lines.tables["models"].lines()
    if models:
        levels = tuple((d * 1e3, f"{DEADLINE}{s}/{m}") for (s, m), d in deadlines.items())
        panels.append(Panel("batch", "batch size", models[0::3], log2=True))
        panels.append(Panel("itl", "ITL (ms)", models[1::3], levels=levels))
        panels.append(Panel("throughput", "throughput (M tok/s)", models[2::3]))
    grid = lines.tables["grid"].lines()
    if grid:
        panels.append(
            Panel("voltage", "voltage (pu)", grid[:2], levels=((limits[0], "lower limit"), (limits[1], "upper limit")))
        )
        panels.append(Panel("substation", "substation P (MW), Q (Mvar, dotted)", grid[2:8]))
        if lines.banks:
            panels.append(Panel("taps", "regulator tap (step)", grid[8:]))
    if loading is not None:
        panels.append(Panel("loading", "most loaded branch (%)", [loading], levels=((100.0, "normal rating"),)))
    if commands:
        actuators = tuple(dict.fromkeys(row[0] for row in commands))
        index = {a: k for k, a in enumerate(actuators)}
        by_source: dict[str, list[tuple[float, int]]] = {}
        for actuator, _, t_s, _, source in commands:
            by_source.setdefault(source, []).append((t_s, index[actuator]))
        shown = [
            Line(
                source,
                np.array([t for t, _ in points], dtype=float),
                np.array([k for _, k in points], dtype=float),
                dash="markers",
            )
            for source, points in by_source.items()
        ]
        panels.append(Panel("commands", "commands", shown, categories=actuators))
    return panels


CommandRow = tuple[str, str, float, float, str]
"""One value of a command: ``(actuator, series, t_s, value, source)`` (:func:`command_rows`)."""


def _value_fields(fields: Mapping[str, Any]) -> list[tuple[str, float]]:
    """``(series name, value)`` of a command's first numeric field (NaN for a ``None``)."""
    for name, value in fields.items():
        if isinstance(value, str):
            continue
        if isinstance(value, list):
            return [(f"{name}[{k}]", float(v)) for k, v in enumerate(value)]
        return [(name, np.nan if value is None else float(value))]
    return []


def command_rows(records: Iterable[tuple[float, str, str, Any]]) -> list[CommandRow]:
    """Commands and scenario events as one row per actuator, series and time, in time order (the
    order of ``records`` among equal times).

    A command's actuator is its name and the names it targets (its text fields: site and model,
    bank...); its values are its first numeric field (a list gives one series per entry); a
    record without a numeric field (a supply change) gives none.

    :param records: ``(t_s, source, command name, fields)``, the fields as JSON text or a mapping:
        the ``commands`` table's ``t_effective_s``, ``source``, ``command``, ``fields``, then the
        ``events`` table's with source ``event``.
    """
    rows: list[CommandRow] = []
    for t_s, source, name, text in records:
        fields = json.loads(text) if isinstance(text, str) else dict(text)
        targets = "/".join(v for v in fields.values() if isinstance(v, str))
        actuator = f"{name} {targets}".strip()
        for series, value in _value_fields(fields):
            rows.append((actuator, series, float(t_s), value, str(source)))
    return sorted(rows, key=lambda row: row[2])  # a stable sort: equal times keep their order


_TAP = re.compile(r"^tap_(?P<bank>.+)_(?P<phase>[^_]+)$")


def tap_columns_of(columns: Iterable[Any]) -> dict[str, dict[str, str]]:
    """Regulator bank -> phase (the column's suffix, a letter or a unit index) -> tap column, of
    the ``grid`` table's column names; empty when the grid has no regulators."""
    banks: dict[str, dict[str, str]] = {}
    for column in columns:
        match = _TAP.match(str(column))
        if match:
            banks.setdefault(match["bank"], {})[match["phase"]] = str(column)
    return banks


def scenario_data(out_dir: Path) -> Mapping[str, Any]:
    """The scenario as run, from the run folder's ``scenario.yaml`` (read as data, its aliases
    bounded: :func:`openg2g.core.yamltext.read_yaml_text`); empty when it has none.

    :raises G2GError: the file is not UTF-8 or not YAML that can be read (the message names it).
    """
    path = Path(out_dir) / "scenario.yaml"
    if not path.is_file():
        return {}
    try:
        data = read_yaml_text(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, YamlTextError) as exc:
        raise G2GError(f"{path}: {exc}") from None
    return data if isinstance(data, dict) else {}


def scenario_deadlines(data: Mapping[str, Any]) -> dict[tuple[str, str], float]:
    """``(site, model)`` -> ITL deadline (s) of a scenario as run (what ``scenario.yaml`` holds)."""
    return {
        (str(site["name"]), str(m["model"])): float(m["itl_deadline_s"])
        for site in data.get("datacenters") or []
        for m in site.get("models") or []
        if m.get("itl_deadline_s") is not None
    }


def scenario_limits(data: Mapping[str, Any]) -> tuple[float, float]:
    """The voltage limits ``(v_min_pu, v_max_pu)`` of a scenario as run; 0.95 and 1.05 where it
    states none."""
    grid = data.get("grid") or {}
    return float(grid.get("v_min_pu", 0.95)), float(grid.get("v_max_pu", 1.05))


def loading_line(t_s: Any, max_loading_pct: Any, points: int) -> Line:
    """The most loaded branch's line (%), thinned (:func:`~openg2g.plot.timeline.envelope`)."""
    tt, yy = envelope(t_s, max_loading_pct, points)
    return _loading(tt, yy)


def _loading(t_s: np.ndarray, y: np.ndarray) -> Line:
    return Line("most loaded branch", t_s, y, color="#6a3d9a")


def overview_stamp(out_dir: Path) -> str:
    """The table parts (name, mtime, size) and the ``scenario.yaml`` an overview is computed from:
    it changes when a part is added or rewritten."""
    scenario = out_dir / "scenario.yaml"
    found: dict[str, Any] = {name: parts_key(out_dir / name) for name in OVERVIEW_TABLES if (out_dir / name).is_dir()}
    if scenario.is_file():
        stat = scenario.stat()
        found["scenario.yaml"] = (stat.st_mtime_ns, stat.st_size)
    return json.dumps({"version": _OVERVIEW_VERSION, "points": VIEW_POINTS, **found}, sort_keys=True)


class _LineMeta(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    points: int = Field(ge=0, description="its rows in the file, after the lines before it")
    step: bool
    dash: str
    color: str


class _PanelMeta(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    key: str
    ylabel: str
    log2: bool
    levels: list[tuple[float, str]]
    categories: list[str]
    lines: list[_LineMeta]


class _OverviewMeta(BaseModel):
    """The metadata of :data:`OVERVIEW_CACHE`."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    version: int
    stamp: str = Field(description="the tables' parts and scenario.yaml it was computed from")
    panels: list[_PanelMeta]
    events: list[tuple[float, str]]
    spans: list[tuple[float, float, str]]
    grid_steps: int = Field(ge=0, description="rows after the lines': the grid step times")


def read_overview(path: Path, stamp: str) -> Overview | None:
    """The overview kept in ``path`` if it was computed from ``stamp``; ``None`` when there is
    none, it is cut short or it is out of date."""
    try:
        table = pq.read_table(path)
        meta = _OverviewMeta.model_validate_json((table.schema.metadata or {}).get(_OVERVIEW_KEY, b""))
    except (OSError, ValueError):
        return None  # none yet, or one cut short or of another version: computed again
    if meta.version != _OVERVIEW_VERSION or meta.stamp != stamp:
        return None
    t = table.column("t_s").to_numpy()
    y = table.column("y").to_numpy()
    panels, at = [], 0
    for p in meta.panels:
        lines = []
        for ln in p.lines:
            lines.append(Line(ln.name, t[at : at + ln.points], y[at : at + ln.points], ln.step, ln.dash, ln.color))
            at += ln.points
        panels.append(Panel(p.key, p.ylabel, lines, p.log2, tuple(p.levels), tuple(p.categories)))
    times = t[at : at + meta.grid_steps]
    times.setflags(write=False)
    return Overview(panels, Marks(tuple(meta.events), tuple(meta.spans)), times)


def write_overview(path: Path, found: Overview, stamp: str) -> None:
    """Replace ``path`` with ``found`` computed from ``stamp`` (:func:`overview_stamp`), whole.

    :raises OSError: it could not be written (the previous file is kept).
    """
    lines = [ln for p in found.panels for ln in p.lines]
    meta = _OverviewMeta(
        version=_OVERVIEW_VERSION,
        stamp=stamp,
        panels=[
            _PanelMeta(
                key=p.key,
                ylabel=p.ylabel,
                log2=p.log2,
                levels=list(p.levels),
                categories=list(p.categories),
                lines=[
                    _LineMeta(name=ln.name, points=ln.t_s.size, step=ln.step, dash=ln.dash, color=ln.color)
                    for ln in p.lines
                ],
            )
            for p in found.panels
        ],
        events=list(found.marks.events),
        spans=list(found.marks.spans),
        grid_steps=found.grid_times_s.size,
    )
    steps = found.grid_times_s
    table = pa.table(
        {  # through arrow_array: pa.array imports pandas, which a run has not loaded
            "line": arrow_array(
                np.repeat(np.arange(len(lines) + 1, dtype=np.int32), [*(ln.t_s.size for ln in lines), steps.size])
            ),
            "t_s": arrow_array(np.concatenate([*(np.asarray(ln.t_s, dtype=float) for ln in lines), steps])),
            "y": arrow_array(
                np.concatenate([*(np.asarray(ln.y, dtype=float) for ln in lines), np.full(steps.size, np.nan)])
            ),
        }
    )
    with replace_atomically(path) as tmp:
        pq.write_table(table.replace_schema_metadata({_OVERVIEW_KEY: meta.model_dump_json().encode()}), tmp)


class OverviewBuilder:
    """A run's overview built from the rows it writes, one flush at a time, by ``openg2g run``.

    Each line's thinning needs the line's length before its first rows: a site's or model's
    datacenter steps and the grid steps of the whole run. A run that ends early (interrupted,
    failed) or a line of another length (a step whose grid did not converge has no branch
    loading) gives no overview (:meth:`finish` returns ``None``); the app then computes it from
    the parts.

    :param dc_steps: datacenter steps of the whole run (rows per site and per model).
    :param grid_steps: grid steps of the whole run.
    :param grid_columns: the columns of the run's ``grid`` table (its regulator taps are lines).
    :param points: points per line at most.
    """

    def __init__(self, dc_steps: int, grid_steps: int, grid_columns: list[str], points: int = VIEW_POINTS) -> None:
        self._dc_steps = dc_steps
        self._grid_steps = grid_steps
        self._lines = PanelLines(grid_columns, self._total, points)
        self._loading = EnvelopeStream(grid_steps, points)
        self._has_loading = False
        self._spans = TrainingSpans()
        self._grid_times: list[np.ndarray] = []
        self._commands: list[tuple[float, str, str, Any]] = []
        self._events: list[tuple[float, str, str, Any]] = []

    def _total(self, table: str, _key: Any) -> int:
        return self._grid_steps if table == "grid" else self._dc_steps

    def add(self, table: str, columns: Mapping[str, Any]) -> None:
        """The rows of one flush of ``table`` (``datacenter``, ``models`` or ``grid``) as the run
        writes them: column -> values."""
        self._lines.tables[table].add(columns)
        if table == "grid":
            self._grid_times.append(np.asarray(columns["t_s"], dtype=float))
        if table == "datacenter":
            self._spans.add(columns["t_s"], columns["site"], columns["training_power_w"])

    def add_branch_loading(self, t_s: np.ndarray, loading_pct: np.ndarray) -> None:
        """One flush's branch loading: per grid step ``t_s`` (s), each conductor's loading (%,
        shape ``(steps, conductors)``, NaN where the step has no result). Its highest per step is
        :func:`~openg2g.plot.run.branch_loading_envelope`'s ``max_loading_pct``, steps without a
        result left out as there."""
        finite = ~np.isnan(loading_pct)
        kept = finite.any(axis=1)
        if not kept.any():
            return
        self._has_loading = True
        worst = np.where(finite[kept], loading_pct[kept], -np.inf).max(axis=1)
        self._loading.add(np.asarray(t_s, dtype=float)[kept], worst)

    def add_command(self, t_effective_s: float, source: str, name: str, fields: str) -> None:
        """A row of the ``commands`` table (fields as JSON text)."""
        self._commands.append((t_effective_s, source, name, fields))

    def add_event(self, t_s: float, name: str, fields: str) -> None:
        """A row of the ``events`` table (fields as JSON text)."""
        self._events.append((t_s, "event", name, fields))

    def finish(self, scenario: Mapping[str, Any]) -> Overview | None:
        """The overview, once every row of the run was added; ``None`` when a line was fed other
        than its expected rows (see the class).

        :param scenario: the scenario as run (:func:`scenario_data` of the run folder).
        """
        try:
            loading = _loading(*self._loading.result()) if self._has_loading else None
            panels = assemble_panels(
                self._lines,
                scenario_deadlines(scenario),
                scenario_limits(scenario),
                loading,
                command_rows(self._commands + self._events),
            )
        except ValueError:
            return None
        times = np.concatenate(self._grid_times) if self._grid_times else np.array([])
        times.setflags(write=False)
        events = tuple((float(t), str(name)) for t, _, name, _ in self._events)
        return Overview(panels, Marks(events, tuple(self._spans.result())), times)
