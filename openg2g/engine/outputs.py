"""The files a run writes, kept complete at every flush.

``OUT/``
  ``summary.json``      run figures, status (running / complete / interrupted / failed), hashes
  ``datacenter/``       one row per datacenter step and site (per-phase P and Q, totals)
  ``models/``           one row per datacenter step, site and model (batch, power, ITL, throughput)
  ``grid/``             one row per grid step (envelope, violation, substation power, taps)
  ``grid_voltages/``    one row per grid step and bus-phase (``outputs.voltages: all``)
  ``commands/``         one row per command (issued and effective time, source, fields)
  ``events/``           one row per scenario event fired
  ``*.png``             plots, written when the run ends
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from openg2g.core.commands import Command, command_name
from openg2g.core.state import PHASES, DatacenterState, GridState
from openg2g.engine.recorder import TableWriter, write_json_atomic

__all__ = ["RunOutputs", "command_fields_json"]


def command_fields_json(command: Command) -> str:
    """A command's fields as compact JSON (for the commands and events tables)."""
    return json.dumps(dataclasses.asdict(command), separators=(",", ":"))


class RunOutputs:
    """Writers for every output table of one run.

    :param out_dir: run output directory (created).
    :param bus_phases: monitored bus-phase names.
    :param banks: regulator bank names (one tap column per bank and phase).
    :param all_voltages: write the per-bus-phase voltage table.
    """

    def __init__(self, out_dir: Path, bus_phases: tuple[str, ...], banks: tuple[str, ...], all_voltages: bool):
        self.out_dir = out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        self._n_bp = len(bus_phases)
        self._codes = np.arange(self._n_bp, dtype=np.int32)
        self._banks = banks
        self.datacenter = TableWriter(out_dir / "datacenter", dictionary_columns=("site",))
        self.models = TableWriter(out_dir / "models", dictionary_columns=("site", "model"))
        self.grid = TableWriter(out_dir / "grid")
        self.voltages = TableWriter(out_dir / "grid_voltages", categories={"bus_phase": bus_phases}) if all_voltages else None
        self.commands = TableWriter(out_dir / "commands", dictionary_columns=("source", "command"))
        self.events = TableWriter(out_dir / "events", dictionary_columns=("command",))

    def record_datacenter(self, state: DatacenterState) -> None:
        """One site's datacenter step."""
        row: dict[str, Any] = {"t_s": state.t_s, "site": state.site}
        for i, ph in enumerate(PHASES):
            row[f"p_{ph}_w"] = float(state.p_w[i])
        for i, ph in enumerate(PHASES):
            row[f"q_{ph}_var"] = float(state.q_var[i])
        row["power_w"] = state.power_w
        row["training_power_w"] = state.training_power_w
        row["online"] = state.online
        self.datacenter.append_row(**row)
        for m in state.models.values():
            self.models.append_row(
                t_s=state.t_s,
                site=state.site,
                model=m.model,
                replicas=float(m.replicas),
                batch_size=int(m.batch_size),
                power_w=float(m.power_w),
                itl_s=float(m.itl_s),
                throughput_tok_s=float(m.throughput_tok_s),
                deadline_miss_fraction=float(m.deadline_miss_fraction),
                power_cap_w=float("nan") if m.power_cap_w is None else float(m.power_cap_w),
            )

    def record_grid(self, state: GridState, violation: np.ndarray) -> None:
        """One grid step: envelope row, and every bus-phase if configured."""
        finite = np.isfinite(state.v_pu).any()
        row: dict[str, Any] = {
            "t_s": state.t_s,
            "v_min_pu": float(np.nanmin(state.v_pu)) if finite else float("nan"),
            "v_max_pu": float(np.nanmax(state.v_pu)) if finite else float("nan"),
            "v_mean_pu": float(np.nanmean(state.v_pu)) if finite else float("nan"),
            "violation_pu": float(violation.sum()),
            "n_violating": int(np.count_nonzero(violation)),
        }
        for i, ph in enumerate(PHASES):
            row[f"p_sub_{ph}_w"] = float(state.p_sub_w[i])
        for i, ph in enumerate(PHASES):
            row[f"q_sub_{ph}_var"] = float(state.q_sub_var[i])
        row["losses_w"] = float(state.losses_w)
        for bank in self._banks:
            for k, tap in enumerate(state.taps.get(bank, ())):
                row[f"tap_{bank}_{k}"] = int(tap)
        row["converged"] = bool(state.converged)
        self.grid.append_row(**row)
        if self.voltages is not None:
            self.voltages.append(
                {"t_s": np.full(self._n_bp, state.t_s), "bus_phase": self._codes, "v_pu": np.asarray(state.v_pu)}
            )

    def record_command(self, t_issued_s: float, t_effective_s: float, source: str, command: Command) -> None:
        """A command a controller sent (or an agent through the env)."""
        self.commands.append_row(
            t_issued_s=t_issued_s,
            t_effective_s=t_effective_s,
            source=source,
            command=command_name(type(command)),
            fields=command_fields_json(command),
        )

    def record_event(self, t_s: float, command: Command) -> None:
        """A scenario event that fired."""
        self.events.append_row(t_s=t_s, command=command_name(type(command)), fields=command_fields_json(command))

    def flush(self) -> None:
        """Write every buffered row."""
        for writer in (self.datacenter, self.models, self.grid, self.voltages, self.commands, self.events):
            if writer is not None:
                writer.flush()

    def write_summary(self, summary: Mapping[str, Any]) -> None:
        """Replace ``summary.json`` atomically."""
        write_json_atomic(self.out_dir / "summary.json", summary)
