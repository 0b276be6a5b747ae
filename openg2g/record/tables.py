"""The files a run writes, kept complete at every flush.

``OUT/``
  ``summary.json``      run figures, status (running / complete / interrupted / failed), hashes
  ``datacenter/``       one row per datacenter step and site (per-phase P and Q, totals)
  ``models/``           one row per datacenter step, site and model (batch, power, ITL, throughput)
  ``grid/``             one row per grid step (envelope, violation, substation power, taps, and
                        ``cap_<name>``, True when closed, per capacitor under automatic control)
  ``grid_voltages/``    one row per grid step and bus-phase (``outputs.voltages: all``)
  ``grid_branches/``    one row per grid step and line/transformer conductor: current, loading,
                        ratings (``outputs.branches: all``)
  ``storage/``          one row per grid step and battery: P and Q delivered (> 0 discharging,
                        injecting), setpoint, state of charge, energy, limit (grids with batteries)
  ``commands/``         one row per command (issued and effective time, source, fields)
  ``events/``           one row per scenario event fired, and one per change of a site's
                        supply (``command`` ``supply_lost`` or ``supply_restored``, fields
                        ``{"site", "bus"}``)
  ``*.png``             plots, written when the run ends (:data:`PLOT_FILES`; ``summary.json``
                        then lists them under ``plots``)
  ``.openg2g-app-overview.parquet``  what ``openg2g app`` draws first (each line thinned for a
                        browser), built from each flush's rows as they are written and written
                        once, whole, when the run completes (:meth:`TableRecorder.on_end`)

:class:`TableRecorder` is the recorder (:mod:`openg2g.engine.recording`) that writes them.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from openg2g.core.atomic import write_json_atomic
from openg2g.core.commands import Command, command_name
from openg2g.core.errors import OutputError
from openg2g.core.interfaces import Live, RidesThrough
from openg2g.core.interrupts import stop_signals_deferred
from openg2g.core.state import PHASES, BranchSet, DatacenterSeries, GridState, StorageState
from openg2g.engine.recording import Recorder
from openg2g.record.metrics import violation_pu
from openg2g.record.writer import TableWriter, clear_table

if TYPE_CHECKING:
    from openg2g.plot.overview import OverviewBuilder

__all__ = ["PLOT_FILES", "TableRecorder", "command_fields_json", "write_summary"]

_log = logging.getLogger(__name__)

PLOT_FILES = (
    "dc_power.png",
    "voltage_envelope.png",
    "batch_sizes.png",
    "latency.png",
    "taps.png",
    "branch_loading.png",
    "substation_power.png",
    "commands.png",
    "feeder_map.png",
    "voltage_profile.png",
    "disturbance.png",
)
"""The plots written at the end of a complete run (:data:`openg2g.plot.run.RUN_PLOTS`, kept here
so a run that draws none need not import matplotlib to clear an earlier run's)."""


def _tap_column(bank: str, phase: str) -> str:
    """The ``grid`` table's column of one regulated phase's tap."""
    return f"tap_{bank}_{phase}"


def command_fields_json(command: Command) -> str:
    """A command's fields as compact JSON (for the commands and events tables)."""
    return json.dumps(dataclasses.asdict(command), separators=(",", ":"))


def _or_nan(measured: np.ndarray | None, like: np.ndarray) -> np.ndarray:
    """A measured column of a model's series, NaN for a site that measures nothing."""
    return measured if measured is not None else np.full(like.shape, np.nan)


def write_summary(out_dir: Path, summary: Mapping[str, Any]) -> None:
    """Replace ``out_dir/summary.json`` atomically.

    :raises OutputError: it could not be written.
    """
    try:
        write_json_atomic(out_dir / "summary.json", summary)
    except OSError as exc:
        raise OutputError(f"cannot write {out_dir / 'summary.json'}: {exc}") from exc


class TableRecorder(Recorder):
    """Writes every output table of a run (module docstring) in ``out_dir``, and the app's overview.

    :param out_dir: the run's output directory (created at the start; an earlier run's tables and
        plots there are cleared).
    :param all_voltages: write the per-bus-phase voltage table.
    :param all_branches: write the per-conductor branch table (for a grid that reports branches).
    :param overview: build the app's overview from the rows as they come
        (:class:`openg2g.plot.overview.OverviewBuilder`) and write it when the run completes.
    """

    writes = True

    def __init__(
        self, out_dir: Path | str, all_voltages: bool = False, all_branches: bool = False, overview: bool = True
    ):
        super().__init__()
        self.out_dir = Path(out_dir)
        self._all_voltages = all_voltages
        self._all_branches = all_branches
        self._with_overview = overview

    def _on_start(self) -> None:
        sim = self.sim
        assert sim is not None
        grid = sim.grid
        banks = {name: info.phases for name, info in grid.regulators().items()}
        # a live site's models add what its servers and meters measured (NaN for the other sites)
        self._measured = any(isinstance(site, Live) for site in sim.sites)
        self._open(
            tuple(grid.bus_phases()),
            banks,
            grid.branches() if self._all_branches else None,
            grid.controlled_capacitors(),
            storage=bool(grid.storages()),
            frequency=sim.frequency is not None,
            ride_through=any(isinstance(site, RidesThrough) for site in sim.sites),
            steps=sim.step_counts() if self._with_overview else None,
        )

    def _open(
        self,
        bus_phases: tuple[str, ...],
        banks: Mapping[str, tuple[str, ...]],
        branches: BranchSet | None,
        capacitors: tuple[str, ...],
        storage: bool,
        frequency: bool,
        ride_through: bool,
        steps: tuple[int, int] | None,
    ) -> None:
        """New writers for every table of this run (``banks``: regulator bank -> its phases, one
        tap column each; ``capacitors``: those under automatic control, one ``cap_<name>`` column
        each; ``steps``: the run's datacenter and grid steps, for the overview)."""
        out_dir = self.out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        assert self.sim is not None
        self._v_min_pu, self._v_max_pu = self.sim.v_min_pu, self.sim.v_max_pu
        self._n_bp = len(bus_phases)
        self._codes = np.arange(self._n_bp, dtype=np.int32)
        self._banks = banks
        self._capacitors = capacitors
        self._dc_blocks: list[Sequence[DatacenterSeries]] = []
        self._grid_blocks: list[tuple[Sequence[GridState], np.ndarray, np.ndarray]] = []
        self.datacenter = TableWriter(out_dir / "datacenter", dictionary_columns=("site",))
        self.models = TableWriter(out_dir / "models", dictionary_columns=("site", "model"))
        self.grid = TableWriter(out_dir / "grid")
        self.voltages = (
            TableWriter(out_dir / "grid_voltages", categories={"bus_phase": bus_phases}) if self._all_voltages else None
        )
        self._branches = branches
        self.branches = (
            TableWriter(out_dir / "grid_branches", categories={"branch": branches.names, "phase": PHASES})
            if branches is not None
            else None
        )
        self.storage = (
            TableWriter(out_dir / "storage", dictionary_columns=("name", "bus", "limit")) if storage else None
        )
        self.frequency = TableWriter(out_dir / "frequency") if frequency else None
        self.ride_through = (
            TableWriter(out_dir / "ride_through", dictionary_columns=("site", "block", "mode"))
            if ride_through
            else None
        )
        self.commands = TableWriter(out_dir / "commands", dictionary_columns=("source", "command"))
        self.events = TableWriter(out_dir / "events", dictionary_columns=("command",))
        # a rerun into the same folder starts from empty tables and no plots of the earlier run,
        # and keeps no table this run does not write (e.g. every voltage, recorded the last time)
        for writer in self._writers():
            writer.clear()
        for name, optional in (
            ("grid_voltages", self.voltages),
            ("grid_branches", self.branches),
            ("storage", self.storage),
            ("frequency", self.frequency),
            ("ride_through", self.ride_through),
        ):
            if optional is None:
                clear_table(out_dir / name)
        for name in PLOT_FILES:
            (out_dir / name).unlink(missing_ok=True)
        self._overview: OverviewBuilder | None = None
        if steps is not None:
            # imported here: a run without outputs never loads it
            from openg2g.plot.overview import OVERVIEW_CACHE, OverviewBuilder

            (out_dir / OVERVIEW_CACHE).unlink(missing_ok=True)  # an earlier run's; this one's is written at its end
            taps = [_tap_column(bank, phase) for bank, phases in banks.items() for phase in phases]
            self._overview = OverviewBuilder(*steps, taps)

    def _on_datacenter_block(self, block: Sequence[DatacenterSeries], dt_s: float) -> None:
        """Kept as they are until the next flush turns them into table rows."""
        self._dc_blocks.append(block)

    def _on_grid_block(self, states: Sequence[GridState], v_pu: np.ndarray, dt_s: float) -> None:
        """Envelope rows, and every bus-phase if configured, kept until the next flush."""
        self._grid_blocks.append((states, v_pu, violation_pu(v_pu, self._v_min_pu, self._v_max_pu)))

    def _on_frequency(self, t_s: np.ndarray, f_hz: np.ndarray, delta_p_w: np.ndarray) -> None:
        assert self.frequency is not None, "the outputs were made without a frequency table"
        self.frequency.append({"t_s": t_s, "f_hz": f_hz, "delta_p_w": delta_p_w})

    def _on_ride_through_records(self, site: str, records: Mapping[str, np.ndarray]) -> None:
        """Per step and block: ``t_s``, ``block``, ``mode``, ``grid_fraction``,
        ``serving_fraction``, ``ups_energy_kwh``, ``recharge_w``."""
        assert self.ride_through is not None, "the outputs were made without a ride-through table"
        if len(records["t_s"]):
            self.ride_through.append({"site": np.full(len(records["t_s"]), site, dtype=object), **records})

    def _on_ride_through_transition(self, site: str, t_s: float, fields: Mapping[str, Any]) -> None:
        self._event_row(t_s, "ride_through", json.dumps({"site": site, **fields}, separators=(",", ":")))

    def _append(self, writer: TableWriter, columns: dict[str, Any]) -> None:
        """Rows for ``writer``'s table, and for the overview's lines drawn from it."""
        writer.append(columns)
        if self._overview is not None and writer is not self.branches:
            self._overview.add(writer.directory.name, columns)

    def _datacenter_rows(self) -> None:
        """Buffered datacenter blocks -> rows in time order, then site order, then model order."""
        if not any(self._dc_blocks):  # no block, or a grid without sites
            self._dc_blocks = []
            return
        by_site = list(zip(*self._dc_blocks))  # per site, its series of every block
        n = sum(len(series) for series in by_site[0])

        def interleave(get: Callable[[Any], np.ndarray], items: list[tuple[Any, ...]]) -> np.ndarray:
            per_item = [np.concatenate([get(x) for x in runs]) for runs in items]
            return per_item[0] if len(per_item) == 1 else np.stack(per_item, axis=1).reshape(-1)

        def names(values: list[str]) -> np.ndarray:
            return np.array(values * n, dtype=object)

        sites = [tuple(runs) for runs in by_site]
        columns: dict[str, Any] = {"t_s": interleave(lambda s: s.t_s, sites), "site": names([r[0].site for r in sites])}
        p_w, q_var = (
            interleave(lambda s: s.p_w, sites).reshape(-1, 3),
            interleave(lambda s: s.q_var, sites).reshape(-1, 3),
        )
        for i, ph in enumerate(PHASES):
            columns[f"p_{ph}_w"] = p_w[:, i]
        for i, ph in enumerate(PHASES):
            columns[f"q_{ph}_var"] = q_var[:, i]
        columns["power_w"] = interleave(lambda s: s.power_w, sites)
        columns["training_power_w"] = interleave(lambda s: s.training_power_w, sites)
        columns["online"] = interleave(lambda s: s.online, sites)
        columns["supplied"] = interleave(lambda s: s.supplied, sites)
        self._append(self.datacenter, columns)
        models = [tuple(s.models[name] for s in runs) for runs in sites for name in runs[0].models]
        times = [runs for runs in sites for _ in runs[0].models]
        self._dc_blocks = []
        if not models:
            return
        self._append(
            self.models,
            {
                "t_s": interleave(lambda s: s.t_s, times),
                "site": names([runs[0].site for runs in times]),
                "model": names([runs[0].model for runs in models]),
                "replicas": interleave(lambda m: m.replicas, models),
                "batch_size": interleave(lambda m: m.batch_size, models),
                "power_w": interleave(lambda m: m.power_w, models),
                "itl_s": interleave(lambda m: m.itl_s, models),
                "throughput_tok_s": interleave(lambda m: m.throughput_tok_s, models),
                "deadline_miss_fraction": interleave(lambda m: m.deadline_miss_fraction, models),
                "power_cap_w": interleave(lambda m: m.power_cap_w, models),
                **(
                    {
                        "in_flight": interleave(lambda m: _or_nan(m.in_flight, m.power_w), models),
                        "measured_power_w": interleave(lambda m: _or_nan(m.measured_power_w, m.power_w), models),
                    }
                    if self._measured
                    else {}
                ),
            },
        )

    def _grid_rows(self) -> None:
        """Buffered grid blocks -> envelope rows (and per-bus-phase rows)."""
        if not self._grid_blocks:
            return
        states = [s for block, _, _ in self._grid_blocks for s in block]
        v_pu = np.concatenate([v for _, v, _ in self._grid_blocks])
        violation = np.concatenate([x for _, _, x in self._grid_blocks])
        self._grid_blocks = []
        t_s = np.array([s.t_s for s in states])
        columns: dict[str, Any] = {"t_s": t_s}
        if np.isfinite(v_pu).all():
            columns.update(v_min_pu=v_pu.min(axis=1), v_max_pu=v_pu.max(axis=1), v_mean_pu=v_pu.mean(axis=1))
        else:
            finite = np.isfinite(v_pu).any(axis=1)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows of non-converged steps
                columns["v_min_pu"] = np.where(finite, np.nanmin(v_pu, axis=1), np.nan)
                columns["v_max_pu"] = np.where(finite, np.nanmax(v_pu, axis=1), np.nan)
                columns["v_mean_pu"] = np.where(finite, np.nanmean(v_pu, axis=1), np.nan)
        columns["violation_pu"] = violation.sum(axis=1)
        columns["n_violating"] = np.count_nonzero(violation, axis=1)
        p_sub = np.array([s.p_sub_w for s in states])
        q_sub = np.array([s.q_sub_var for s in states])
        for i, ph in enumerate(PHASES):
            columns[f"p_sub_{ph}_w"] = p_sub[:, i]
        for i, ph in enumerate(PHASES):
            columns[f"q_sub_{ph}_var"] = q_sub[:, i]
        columns["losses_w"] = np.array([s.losses_w for s in states], dtype=np.float64)
        for bank, phases in self._banks.items():
            taps = np.array([s.taps[bank] for s in states], dtype=np.int64).reshape(len(states), len(phases))
            for k, phase in enumerate(phases):
                columns[_tap_column(bank, phase)] = taps[:, k]
        for cap in self._capacitors:
            columns[f"cap_{cap}"] = np.array([s.capacitors.get(cap, False) for s in states], dtype=bool)
        columns["converged"] = np.array([s.converged for s in states], dtype=bool)
        self._append(self.grid, columns)
        if self.voltages is not None:
            self.voltages.append(
                {
                    "t_s": np.repeat(t_s, self._n_bp),
                    "bus_phase": np.tile(self._codes, len(states)),
                    "v_pu": v_pu.reshape(-1),
                }
            )
        if self.branches is not None:
            self._branch_rows(states, t_s)
        if self.storage is not None:
            self._storage_rows(states)

    def _branch_rows(self, states: Sequence[GridState], t_s: np.ndarray) -> None:
        """Per-conductor rows of the branch table (NaN currents where a step did not converge)."""
        b = self._branches
        assert b is not None and self.branches is not None
        nan = np.full(len(b), np.nan)
        current_a = np.stack([nan if s.branch_current_a is None else s.branch_current_a for s in states])
        loading_pct = current_a * (100.0 / b.rating_a)
        if self._overview is not None:
            self._overview.add_branch_loading(t_s, loading_pct)
        n = len(states)

        def tile(values: np.ndarray) -> np.ndarray:
            return np.tile(values, n)

        self._append(
            self.branches,
            {
                "t_s": np.repeat(t_s, len(b)),
                "branch": tile(b.branch.astype(np.int32)),
                "terminal": tile(b.terminal.astype(np.int8)),
                "phase": tile(np.array([PHASES.index(p) for p in b.phase], dtype=np.int32)),
                "current_a": current_a.reshape(-1),
                "loading_pct": loading_pct.reshape(-1),
                "rating_a": tile(b.rating_a),
                "emergency_a": tile(b.emergency_a),
                "rating_default": tile(b.default_rating),
                "emergency_default": tile(b.default_emergency),
            },
        )

    def _storage_rows(self, states: Sequence[GridState]) -> None:
        """Per-battery rows of the storage table, in time order, then battery order."""
        assert self.storage is not None
        rows = [(s.t_s, b) for s in states for b in s.storage.values()]
        if not rows:
            return

        def column(get: Callable[[StorageState], Any], dtype: type) -> np.ndarray:
            return np.array([get(b) for _, b in rows], dtype=dtype)

        self.storage.append(
            {
                "t_s": np.array([t for t, _ in rows], dtype=np.float64),
                "name": column(lambda b: b.unit.name, object),
                "bus": column(lambda b: b.unit.bus, object),
                "p_w": column(lambda b: b.p_w, np.float64),
                "q_var": column(lambda b: b.q_var, np.float64),
                "p_set_w": column(lambda b: b.p_set_w, np.float64),
                "soc": column(lambda b: b.soc, np.float64),
                "energy_kwh": column(lambda b: b.energy_kwh, np.float64),
                "limited": column(lambda b: b.limited, bool),
                "limit": column(lambda b: b.limit or "none", object),
            }
        )

    def _on_command(self, t_issued_s: float, t_effective_s: float, source: str, command: Command) -> None:
        name, fields = command_name(type(command)), command_fields_json(command)
        self.commands.append_row(
            t_issued_s=t_issued_s, t_effective_s=t_effective_s, source=source, command=name, fields=fields
        )
        if self._overview is not None:
            self._overview.add_command(t_effective_s, source, name, fields)

    def _on_event(self, t_s: float, command: Command, disturbance: str | None) -> None:
        """A disturbance's command has the disturbance's name as its first field."""
        fields = dataclasses.asdict(command)
        if disturbance is not None:
            fields = {"disturbance": disturbance, **fields}
        self._event_row(t_s, command_name(type(command)), json.dumps(fields, separators=(",", ":")))

    def _on_supply(self, t_s: float, site: str, bus: str, supplied: bool) -> None:
        name = "supply_restored" if supplied else "supply_lost"
        self._event_row(t_s, name, json.dumps({"site": site, "bus": bus}, separators=(",", ":")))

    def _event_row(self, t_s: float, name: str, fields: str) -> None:
        self.events.append_row(t_s=t_s, command=name, fields=fields)
        if self._overview is not None:
            self._overview.add_event(t_s, name, fields)

    def _writers(self) -> list[TableWriter]:
        tables = (
            self.datacenter,
            self.models,
            self.grid,
            self.voltages,
            self.branches,
            self.storage,
            self.frequency,
            self.ride_through,
            self.commands,
            self.events,
        )
        return [w for w in tables if w is not None]

    def _on_flush(self) -> None:
        """Write every buffered row: all tables' parts first, then made visible together, so the
        tables always end at the same step.

        A stop signal arriving meanwhile (Ctrl-C) is delivered once the flush has ended
        (:func:`~openg2g.core.interrupts.stop_signals_deferred`): rows taken from the buffer are
        written, never dropped halfway.

        :raises OutputError: a part could not be written (full or read-only disk, ...); nothing of
            this flush is visible and the rows stay buffered.
        """
        with stop_signals_deferred():
            self._flush()

    def _flush(self) -> None:
        self._datacenter_rows()
        self._grid_rows()
        prepared: list[tuple[TableWriter, Path | None]] = []
        try:
            for writer in self._writers():
                prepared.append((writer, writer.prepare()))
        except OSError as exc:
            for writer, tmp in prepared:
                writer.discard(tmp)
            raise OutputError(f"cannot write the outputs in {self.out_dir}: {exc}") from exc
        for writer, tmp in prepared:
            writer.commit(tmp)

    def _on_end(self, summary: dict[str, Any]) -> None:
        self.write_overview()

    def write_overview(self) -> bool:
        """Write the app's overview of the complete run (every row flushed), whole, beside the
        tables; computed from the rows as they came, so no table is read back.

        :return: whether it was written: not without an overview, nor when a line's rows were not
            the expected steps (a grid step that did not converge has no branch loading), nor when
            the file cannot be written (a warning is logged: the run's results are complete and
            the app computes the overview from the tables).
        """
        if self._overview is None:
            return False
        from openg2g.plot.overview import OVERVIEW_CACHE, overview_stamp, scenario_data, write_overview

        found = self._overview.finish(scenario_data(self.out_dir))
        if found is None:
            return False
        try:
            write_overview(self.out_dir / OVERVIEW_CACHE, found, overview_stamp(self.out_dir))
        except OSError as exc:
            _log.warning("cannot write %s (the app computes it when it opens the run): %s", OVERVIEW_CACHE, exc)
            return False
        return True

    def _on_summary(self, summary: Mapping[str, Any]) -> None:
        write_summary(self.out_dir, summary)
