"""Plots of one run, drawn from its output tables (never from simulator objects).

Each function takes tidy tables (as written to the run directory) and returns a matplotlib
figure; :func:`plot_run` writes every figure the run has the data for as a PNG next to the
tables (:data:`RUN_PLOTS`), and says which it skipped and why. ``openg2g plot RUN_DIR`` calls it
on a finished run.

A PNG is written to a hidden temporary file in the run folder and renamed, so an interruption
(Ctrl-C, kill) leaves either the whole figure or none; :class:`PlotsInterrupted` carries what was
written when Ctrl-C came.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from openg2g.core.atomic import replace_atomically
from openg2g.core.errors import G2GError
from openg2g.grid.topology import Topology
from openg2g.plot.branches import plot_branch_loading
from openg2g.plot.commands import plot_command_timeline
from openg2g.plot.disturbance import disturbance_times, plot_disturbance
from openg2g.plot.extremes import bus_phase_extremes, voltages_at
from openg2g.plot.feeder import plot_worst_voltage_map
from openg2g.plot.overview import scenario_data, scenario_deadlines, scenario_limits
from openg2g.plot.parts import table_parts
from openg2g.plot.profile import plot_voltage_profile, voltage_profile, worst_instant
from openg2g.plot.style import LIMIT_STYLE, PHASE_COLORS, new_figure, styled
from openg2g.plot.substation import plot_substation_power
from openg2g.plot.taps import plot_taps, tap_columns
from openg2g.plot.timeline import Marks, band, changes, envelope, mark, run_marks, titled

__all__ = [
    "FIELD_TABLES",
    "RUN_PLOTS",
    "PlotReport",
    "PlotsInterrupted",
    "RunData",
    "branch_loading_envelope",
    "expand_fields",
    "itl_deadlines",
    "plot_batch_sizes",
    "plot_dc_power",
    "plot_latency",
    "plot_run",
    "plot_voltage_envelope",
    "read_table",
    "scenario_deadlines",
]


FIELD_TABLES = ("commands", "events")
"""Tables that store each command's fields as JSON text in a ``fields`` column (commands differ in
their fields, and one parquet schema must hold them all)."""


def read_table(
    out_dir: Path,
    name: str,
    columns: Sequence[str] | None = None,
    filters: Sequence[tuple[str, str, Any]] | None = None,
) -> pd.DataFrame:
    """Read one output table (a directory of parquet parts); empty frame if it has no rows.

    The ``commands`` and ``events`` tables come with one column per command field (``site``,
    ``model``, ``batch_size``, ``taps``, ...: the values as the command holds them, ``None`` where a
    row's command has no such field) after their stored ``fields`` JSON text.

    :param columns: only these columns (``None``: all).
    :param filters: pyarrow row filters such as ``[("t_s", "==", 60.0)]``; each part is written
        in time order with its time range in its statistics, so a filter on ``t_s`` reads only the
        parts that hold those times.
    """
    path = Path(out_dir) / name
    if not path.is_dir() or not any(path.glob("part-*.parquet")):
        return pd.DataFrame()
    frame = pd.read_parquet(
        path, columns=list(columns) if columns is not None else None, filters=list(filters) if filters else None
    )
    return expand_fields(frame) if name in FIELD_TABLES and "fields" in frame.columns else frame


def expand_fields(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its ``fields`` JSON text spread into one column per field name, in order of
    first appearance."""
    rows = [json.loads(text) for text in frame["fields"]]
    names = list(dict.fromkeys(key for row in rows for key in row))
    clash = [n for n in names if n in frame.columns]
    if clash:
        raise ValueError(f"command fields {clash} have the names of table columns")
    spread = pd.DataFrame({n: [row.get(n) for row in rows] for n in names}, index=frame.index, dtype=object)
    return pd.concat([frame, spread], axis=1)


def plot_dc_power(datacenter: pd.DataFrame, marks: Marks | None = None, run: str = "") -> Figure:
    """Facility power per phase (MW) for each site over time.

    :param datacenter: the run's ``datacenter`` table.
    :param marks: events and training windows to mark (:func:`openg2g.plot.timeline.run_marks`).
    :param run: the run's name, in the title.
    """
    with styled():
        fig = new_figure()
        ax = fig.axes[0]
        for site, df in datacenter.groupby("site", observed=True):
            for ph, color in PHASE_COLORS.items():
                t, p_mw = envelope(df["t_s"], df[f"p_{ph}_w"].to_numpy(dtype=float) / 1e6)
                ax.plot(t, p_mw, color=color, lw=0.8, label=f"{site} phase {ph}")
        mark(ax, marks)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("active power (MW)")
        ax.set_title(titled(run, "Datacenter power per phase"))
        ax.legend(loc="best", fontsize=8)
        fig.tight_layout()
    return fig


def branch_loading_envelope(grid_branches: pd.DataFrame) -> pd.DataFrame:
    """Per grid step, the highest conductor loading and the branch it is on.

    :param grid_branches: the run's ``grid_branches`` table (``t_s``, ``branch``, ``loading_pct``).
    :return: frame with columns ``t_s`` (s), ``max_loading_pct`` (%), ``branch``, in time order.
    """
    frame = grid_branches.dropna(subset=["loading_pct"])
    worst = frame.loc[frame.groupby("t_s")["loading_pct"].idxmax(), ["t_s", "loading_pct", "branch"]]
    worst = worst.rename(columns={"loading_pct": "max_loading_pct"})
    return worst.assign(branch=worst["branch"].astype(str)).sort_values("t_s").reset_index(drop=True)


def plot_voltage_envelope(
    grid: pd.DataFrame,
    v_min_pu: float,
    v_max_pu: float,
    grid_branches: pd.DataFrame | None = None,
    marks: Marks | None = None,
    run: str = "",
) -> Figure:
    """Lowest and highest bus-phase voltage over time, with the limits; with the run's
    ``grid_branches`` table, a second panel beside it (below, same time axis) shows the highest
    branch loading at each step, the 100% line and the branch where the run's maximum occurred.

    :param marks: events and training windows to mark.
    :param run: the run's name, in the title.
    """
    loading = branch_loading_envelope(grid_branches) if grid_branches is not None and not grid_branches.empty else None
    with styled():
        fig = new_figure(nrows=2 if loading is not None else 1, sharex=True)
        ax = fig.axes[0]
        t_lo, v_lo = envelope(grid["t_s"], grid["v_min_pu"])
        t_hi, v_hi = envelope(grid["t_s"], grid["v_max_pu"])
        t_band, band_lo, band_hi = band(grid["t_s"], grid["v_min_pu"], grid["v_max_pu"])
        ax.fill_between(t_band, band_lo, band_hi, step="post", color="#9ecae1", alpha=0.5, label="min-max")
        ax.plot(t_lo, v_lo, color="#08519c", lw=0.8, label="lowest bus-phase")
        ax.plot(t_hi, v_hi, color="#3182bd", lw=0.8, label="highest bus-phase")
        ax.axhline(v_min_pu, **LIMIT_STYLE, label=f"limits {v_min_pu:g}/{v_max_pu:g} pu")
        ax.axhline(v_max_pu, **LIMIT_STYLE)
        ax.set_ylabel("voltage (pu)")
        mark(ax, marks)
        ax.set_title(titled(run, "Voltage envelope" + (" and branch loading" if loading is not None else "")))
        ax.legend(loc="best", fontsize=8)
        if loading is not None and not loading.empty:
            lx = fig.axes[1]
            peak = loading.loc[loading["max_loading_pct"].idxmax()]
            lx.plot(
                *envelope(loading["t_s"], loading["max_loading_pct"]),
                color="#6a3d9a",
                lw=0.8,
                label="most loaded branch",
            )
            lx.axhline(100.0, **{**LIMIT_STYLE, "label": "normal rating"})
            peak_label = f"max {peak['max_loading_pct']:.1f}% ({peak['branch']})"
            lx.plot([peak["t_s"]], [peak["max_loading_pct"]], "o", color="#6a3d9a", ms=4, label=peak_label)
            mark(lx, marks)
            lx.set_ylabel("loading (%)")
            lx.legend(loc="best", fontsize=8)
        fig.axes[-1].set_xlabel("time (s)")
        fig.tight_layout()
    return fig


def _per_model(
    models: pd.DataFrame,
    column: str,
    ylabel: str,
    title: str,
    log2: bool = False,
    levels: Mapping[tuple[str, str], float] | None = None,
    level_label: str = "",
    marks: Marks | None = None,
    run: str = "",
    steps: bool = False,
) -> Figure:
    """One line per (site, model); ``levels`` adds a dashed line of the same colour per (site, model),
    shown once in the legend as ``level_label``; ``steps`` draws a step signal (its change points)."""
    with styled():
        fig = new_figure()
        ax = fig.axes[0]
        for (site, model), df in models.groupby(["site", "model"], observed=True):
            if steps:
                (line,) = ax.plot(
                    *changes(df["t_s"], df[column]), drawstyle="steps-post", lw=0.9, label=f"{site}/{model}"
                )
            else:
                (line,) = ax.plot(*envelope(df["t_s"], df[column]), lw=0.8, label=f"{site}/{model}")
            level = (levels or {}).get((str(site), str(model)))
            if level is not None:  # one legend entry for all levels: the colour says whose it is
                labelled = any(ln.get_label() == level_label for ln in ax.get_lines())
                ax.axhline(level, color=line.get_color(), ls="--", lw=0.8, label="_" if labelled else level_label)
        if log2:
            ax.set_yscale("log", base=2)
        mark(ax, marks)
        ax.set_xlabel("time (s)")
        ax.set_ylabel(ylabel)
        ax.set_title(titled(run, title))
        ax.legend(loc="best", fontsize=7)
        fig.tight_layout()
    return fig


def plot_batch_sizes(models: pd.DataFrame, marks: Marks | None = None, run: str = "") -> Figure:
    """Batch size of each model over time (log2 axis, step lines)."""
    return _per_model(
        models,
        "batch_size",
        "batch size (max_num_seqs)",
        "Batch size per model",
        log2=True,
        marks=marks,
        run=run,
        steps=True,
    )


def plot_latency(
    models: pd.DataFrame,
    deadlines_s: Mapping[tuple[str, str], float] | None = None,
    marks: Marks | None = None,
    run: str = "",
) -> Figure:
    """Mean inter-token latency of each model over time (ms), with its ITL deadline as a dashed line.

    :param deadlines_s: ``(site, model)`` -> ITL deadline (s); models without one get no line.
    :param marks: events and training windows to mark.
    :param run: the run's name, in the title.
    """
    frame = models.assign(itl_ms=models["itl_s"] * 1e3)
    levels = {key: d * 1e3 for key, d in (deadlines_s or {}).items()}
    return _per_model(
        frame,
        "itl_ms",
        "inter-token latency (ms)",
        "Inter-token latency per model",
        levels=levels,
        level_label="ITL deadline (dashed, model colour)",
        marks=marks,
        run=run,
    )


def itl_deadlines(out_dir: Path) -> dict[tuple[str, str], float]:
    """``(site, model)`` -> ITL deadline (s) from the run's ``scenario.yaml``; empty without one."""
    return scenario_deadlines(scenario_data(out_dir))


@dataclass
class RunData:
    """A finished (or interrupted) run's tables and facts, each read once when a figure asks.

    :param out_dir: the run folder.
    :param v_min_pu: lower voltage limit (pu); ``None``: the run's ``scenario.yaml``, else 0.95.
    :param v_max_pu: upper voltage limit (pu); ``None``: the run's ``scenario.yaml``, else 1.05.
    :param scenario_data: the scenario as run, paths absolute (what ``scenario.yaml`` holds);
        ``None`` reads the folder's ``scenario.yaml``.
    :param trust_pickle: the caller's word that the pickle net the scenario names may be read
        (:func:`openg2g.grid.kinds.viewed_grid`). The folder's own ``grid.trust_pickle`` is not
        taken: a run folder may come from anyone. A scenario handed in as ``scenario_data`` is the
        caller's (a run drawing its own plots), so its ``grid.trust_pickle`` stands.
    """

    out_dir: Path
    v_min_pu: float | None = None
    v_max_pu: float | None = None
    scenario_data: Mapping[str, Any] | None = None
    trust_pickle: bool = False
    _tables: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)
    _reading: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.out_dir = Path(self.out_dir)
        v_min_pu, v_max_pu = scenario_limits(self.scenario)
        if self.v_min_pu is None:
            self.v_min_pu = v_min_pu
        if self.v_max_pu is None:
            self.v_max_pu = v_max_pu

    def table(self, name: str) -> pd.DataFrame:
        """One output table (:func:`read_table`), read on first use; threads that ask for a table
        at once (the app's callbacks) wait for one read rather than each reading it."""
        with self._reading:
            if name not in self._tables:
                self._tables[name] = read_table(self.out_dir, name)
            return self._tables[name]

    @cached_property
    def scenario(self) -> Mapping[str, Any]:
        """The scenario as run: :attr:`scenario_data`, else the run's ``scenario.yaml``; empty
        when the folder has none."""
        return self.scenario_data if self.scenario_data is not None else scenario_data(self.out_dir)

    @cached_property
    def name(self) -> str:
        """The run's name for titles: its scenario's name, else its folder's."""
        return str(self.scenario.get("name") or self.out_dir.resolve().name)

    @cached_property
    def marks(self) -> Marks:
        """Its events and training windows (:func:`openg2g.plot.timeline.run_marks`)."""
        return run_marks(self.table("events"), self.table("datacenter"))

    @cached_property
    def sites(self) -> list[str]:
        """The buses of its datacenter sites."""
        return [str(site["bus"]) for site in self.scenario.get("datacenters") or [] if "bus" in site]

    @cached_property
    def topology(self) -> Topology | str:
        """Its grid's topology, or why there is none (no ``scenario.yaml``, a feeder that cannot
        be read any more, a pickle net not trusted: :attr:`trust_pickle`)."""
        grid = self.scenario.get("grid")
        if not grid:
            return "the run folder has no scenario.yaml naming its grid"
        from openg2g.grid.config import GridSpec
        from openg2g.grid.kinds import grid_topology, viewed_grid

        try:
            spec = GridSpec.model_validate(grid)
            trusted = self.trust_pickle or (self.scenario_data is not None and spec.trust_pickle)
            return grid_topology(viewed_grid(spec, self.out_dir, trusted), self.out_dir)
        except (G2GError, ValueError) as exc:
            return f"the grid of scenario.yaml cannot be read: {exc}"


Draw = Callable[[RunData], "Figure | str"]
"""A run figure: the figure, or why the run lacks its data."""


def _dc_power(run: RunData) -> Figure | str:
    datacenter = run.table("datacenter")
    if datacenter.empty:
        return "no datacenter table (a grid without sites)"
    return plot_dc_power(datacenter, run.marks, run.name)


def _voltage_envelope(run: RunData) -> Figure | str:
    grid = run.table("grid")
    if grid.empty:
        return "no grid table"
    assert run.v_min_pu is not None and run.v_max_pu is not None
    return plot_voltage_envelope(grid, run.v_min_pu, run.v_max_pu, run.table("grid_branches"), run.marks, run.name)


def _batch_sizes(run: RunData) -> Figure | str:
    models = run.table("models")
    if models.empty:
        return "no models table (no site serves models)"
    return plot_batch_sizes(models, run.marks, run.name)


def _latency(run: RunData) -> Figure | str:
    models = run.table("models")
    if models.empty:
        return "no models table (no site serves models)"
    return plot_latency(models, scenario_deadlines(run.scenario), run.marks, run.name)


def _taps(run: RunData) -> Figure | str:
    grid = run.table("grid")
    if grid.empty or not tap_columns(grid):
        return "no regulator taps in the grid table (a grid without regulators)"
    return plot_taps(grid, run.marks, run.name)


def _branch_loading(run: RunData) -> Figure | str:
    branches = run.table("grid_branches")
    if branches.empty or not branches["loading_pct"].notna().any():
        return "no grid_branches table (set outputs.branches: all)"
    return plot_branch_loading(branches, marks=run.marks, run=run.name)


def _substation(run: RunData) -> Figure | str:
    grid = run.table("grid")
    if grid.empty:
        return "no grid table"
    return plot_substation_power(grid, run.marks, run.name)


def _commands(run: RunData) -> Figure | str:
    commands, events = run.table("commands"), run.table("events")
    if commands.empty and events.empty:
        return "no command was sent and no scenario event fired"
    grid = run.table("grid")
    end_s = float(grid["t_s"].max()) if not grid.empty else None
    try:
        return plot_command_timeline(commands, events, end_s, run.marks, run.name)
    except ValueError as exc:
        return str(exc)


def _voltage_topology(run: RunData) -> Topology | str:
    """The run's topology when it recorded every voltage, else why its voltage pictures are missing."""
    if not table_parts(run.out_dir, "grid_voltages"):
        return "no grid_voltages table (set outputs.voltages: all)"
    return run.topology


def _feeder_map(run: RunData) -> Figure | str:
    topology = _voltage_topology(run)
    if isinstance(topology, str):
        return topology
    assert run.v_min_pu is not None and run.v_max_pu is not None
    return plot_worst_voltage_map(
        topology.buses,
        topology.edges,
        bus_phase_extremes(run.out_dir),
        run.v_min_pu,
        run.v_max_pu,
        run.sites,
        run.name,
    )


def _voltage_profile(run: RunData) -> Figure | str:
    topology = _voltage_topology(run)
    if isinstance(topology, str):
        return topology
    assert run.v_min_pu is not None and run.v_max_pu is not None
    try:
        t_s = worst_instant(run.table("grid"), run.v_min_pu, run.v_max_pu)
    except ValueError as exc:
        return str(exc)
    profile = voltage_profile(voltages_at(run.out_dir, t_s), topology, t_s)
    return plot_voltage_profile(profile, topology, run.v_min_pu, run.v_max_pu, t_s, run.name)


def _disturbance(run: RunData) -> Figure | str:
    events, ride_through, frequency = run.table("events"), run.table("ride_through"), run.table("frequency")
    if not disturbance_times(events) and ride_through.empty and frequency.empty:
        return "no disturbance, ride-through or frequency model in the run"
    assert run.v_min_pu is not None and run.v_max_pu is not None
    return plot_disturbance(
        run.table("datacenter"),
        run.table("grid"),
        ride_through,
        frequency,
        events,
        run.scenario,
        run.v_min_pu,
        run.v_max_pu,
        run.name,
    )


RUN_PLOTS: dict[str, Draw] = {
    "dc_power.png": _dc_power,
    "voltage_envelope.png": _voltage_envelope,
    "batch_sizes.png": _batch_sizes,
    "latency.png": _latency,
    "taps.png": _taps,
    "branch_loading.png": _branch_loading,
    "substation_power.png": _substation,
    "commands.png": _commands,
    "feeder_map.png": _feeder_map,
    "voltage_profile.png": _voltage_profile,
    "disturbance.png": _disturbance,
}
"""File name -> figure of a run, in the order :func:`plot_run` draws them."""


@dataclass
class PlotReport:
    """What :func:`plot_run` did with each figure.

    :param written: file names written, in order.
    :param skipped: file name -> why the run has no data for it.
    :param failed: file name -> the error that stopped its drawing.
    """

    written: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    def missing(self) -> list[str]:
        """The figures neither written, skipped nor failed (not reached: an interruption)."""
        done = {*self.written, *self.skipped, *self.failed}
        return [name for name in RUN_PLOTS if name not in done]

    def as_summary(self) -> dict[str, Any]:
        """The report as ``summary.json``'s ``plots`` entry (``not_drawn`` when interrupted)."""
        entry: dict[str, Any] = {"written": list(self.written), "skipped": dict(self.skipped)}
        if self.failed:
            entry["failed"] = dict(self.failed)
        if self.missing():
            entry["not_drawn"] = self.missing()
        return entry

    def lines(self) -> list[str]:
        """One line per figure, for the terminal."""
        out = [f"plot {name}: written" for name in self.written]
        out += [f"plot {name}: skipped, {why}" for name, why in self.skipped.items()]
        out += [f"plot {name}: failed, {why}" for name, why in self.failed.items()]
        out += [f"plot {name}: not drawn (interrupted)" for name in self.missing()]
        return out


class PlotsInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) came while :func:`plot_run` was drawing; ``report`` says what was written."""

    def __init__(self, report: PlotReport) -> None:
        super().__init__("interrupted while drawing the plots")
        self.report = report


def save_png(fig: Figure, path: Path, dpi: int = 110) -> None:
    """Write ``fig`` to ``path`` whole or not at all (:func:`~openg2g.core.atomic.replace_atomically`)."""
    with replace_atomically(path) as tmp:
        fig.savefig(tmp, dpi=dpi, format="png")


def plot_run(
    out_dir: Path,
    v_min_pu: float | None = None,
    v_max_pu: float | None = None,
    scenario_data: Mapping[str, Any] | None = None,
    trust_pickle: bool = False,
) -> PlotReport:
    """Write every figure of :data:`RUN_PLOTS` the run has the data for, as PNGs in ``out_dir``.

    A figure without its data is skipped with the reason; one whose drawing fails (out of memory
    included) is reported with its error and the others are still drawn. Titles name the run (its scenario's name).

    :param out_dir: the run folder (tables, ``scenario.yaml``).
    :param v_min_pu: lower voltage limit (pu); ``None`` reads it from the run's ``scenario.yaml``.
    :param v_max_pu: upper voltage limit (pu); likewise.
    :param scenario_data: the scenario as run (:class:`RunData`); ``None`` reads ``scenario.yaml``.
    :param trust_pickle: read the pickle net the scenario names (:class:`RunData`); never taken
        from the folder's ``scenario.yaml``.
    :raises PlotsInterrupted: Ctrl-C came; no partial PNG is left.
    """
    run = RunData(Path(out_dir), v_min_pu, v_max_pu, scenario_data, trust_pickle)
    report = PlotReport()
    try:
        for name, draw in RUN_PLOTS.items():
            try:
                fig = draw(run)
                if isinstance(fig, str):
                    report.skipped[name] = fig
                    continue
                save_png(fig, run.out_dir / name)
            except MemoryError:
                # the run's tables are complete and the other figures may fit: say which, go on
                report.failed[name] = (
                    "MemoryError: out of memory while drawing it (a run with --set outputs.voltages=envelope "
                    "records only the per-step voltage envelope)"
                )
                continue
            except (G2GError, ValueError, KeyError, OSError) as exc:
                report.failed[name] = f"{type(exc).__name__}: {exc}"
                continue
            report.written.append(name)
    except KeyboardInterrupt as exc:
        raise PlotsInterrupted(report) from exc
    return report
