"""What a run produces, handed to the recorders a caller attaches (tables, figures, a progress bar).

The engine keeps no files and no figures of its own: it calls each attached :class:`Recorder` as
results come, in the order the recorders were given, and merges their :meth:`Recorder.figures`
into the run's summary. The shape is Stable-Baselines3's callbacks: the engine calls the public
``on_*`` methods; a recorder overrides the ``_on_*`` hooks it needs (every hook does nothing by
default) and reads the simulation it was attached to as ``self.sim``.

Order within a run: :meth:`~Recorder.init_recorder` once when the simulation is built;
:meth:`~Recorder.on_start` at every start; the ``on_*`` data hooks as blocks are produced; at every
flush (``flush_every_s`` of run time, and at the end) :meth:`~Recorder.on_flush` then
:meth:`~Recorder.on_summary`; :meth:`~Recorder.on_close` when the run stops, whatever the reason;
:meth:`~Recorder.on_end` only after a complete run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any, Protocol

import numpy as np

from openg2g.core.commands import Command
from openg2g.core.interfaces import DatacenterBackend, FrequencyModel, GridBackend
from openg2g.core.state import DatacenterSeries, GridState

__all__ = ["Recorder", "RunView"]


class RunView(Protocol):
    """What a recorder reads of the run it records (a :class:`~openg2g.engine.simulation.Simulation`)."""

    name: str
    duration_s: Fraction
    v_min_pu: float
    v_max_pu: float
    sites: list[DatacenterBackend]
    grid: GridBackend
    frequency: FrequencyModel | None

    def step_counts(self) -> tuple[int, int]:
        """How many datacenter and grid steps the whole run has."""


class Recorder:
    """Base class of the recorders a :class:`~openg2g.engine.simulation.Simulation` calls.

    ``writes``: the recorder keeps rows that must be written at each flush; the engine schedules
    flushes (every ``flush_every_s``) only when an attached recorder writes.
    """

    writes: bool = False

    def __init__(self) -> None:
        self.sim: RunView | None = None

    # ------------------------------------------------------------------ life cycle
    def init_recorder(self, sim: RunView) -> None:
        """Attach to ``sim`` (once, when the simulation is built)."""
        self.sim = sim
        self._init_recorder()

    def on_start(self) -> None:
        """The run starts (the components were just reset): forget any earlier run."""
        self._on_start()

    def on_flush(self) -> None:
        """Write what was recorded since the last flush.

        :raises ~openg2g.core.errors.OutputError: it could not be written.
        """
        self._on_flush()

    def on_summary(self, summary: Mapping[str, Any]) -> None:
        """The run's summary as of this flush (status ``running``, or how the run ended)."""
        self._on_summary(summary)

    def on_close(self, status: str) -> None:
        """The run stopped with ``status`` (complete, interrupted, failed); its last flush follows."""
        self._on_close(status)

    def on_end(self, summary: dict[str, Any]) -> None:
        """The run is complete and its last flush written; a recorder may add to ``summary``
        (and write it again)."""
        self._on_end(summary)

    def figures(self) -> dict[str, Any]:
        """What this recorder adds to the run's summary (none by default)."""
        return {}

    # ------------------------------------------------------------------ data
    def on_datacenter_block(self, block: Sequence[DatacenterSeries], dt_s: float) -> None:
        """Consecutive datacenter steps of length ``dt_s`` (s), one series per site, sites in order."""
        self._on_datacenter_block(block, dt_s)

    def on_grid_block(self, states: Sequence[GridState], v_pu: np.ndarray, dt_s: float) -> None:
        """Consecutive grid steps of length ``dt_s`` (s); ``v_pu`` their voltages (pu), shape
        ``(len(states), n_bus_phases)``."""
        self._on_grid_block(states, v_pu, dt_s)

    def on_frequency(self, t_s: np.ndarray, f_hz: np.ndarray, delta_p_w: np.ndarray) -> None:
        """The bulk system's frequency (Hz) at grid steps ``t_s`` (s), and the change of the
        grid's draw (W) it followed."""
        self._on_frequency(t_s, f_hz, delta_p_w)

    def on_event(self, t_s: float, command: Command, disturbance: str | None) -> None:
        """A scheduled event fired, or (``disturbance``: its name) a disturbance's command."""
        self._on_event(t_s, command, disturbance)

    def on_command(self, t_issued_s: float, t_effective_s: float, source: str, command: Command) -> None:
        """A controller (or an agent) sent ``command``; it takes effect at ``t_effective_s``."""
        self._on_command(t_issued_s, t_effective_s, source, command)

    def on_supply(self, t_s: float, site: str, bus: str, supplied: bool) -> None:
        """A site's bus lost (``supplied=False``) or regained its supply."""
        self._on_supply(t_s, site, bus, supplied)

    def on_ride_through_transition(self, site: str, t_s: float, fields: Mapping[str, Any]) -> None:
        """A ride-through block of ``site`` changed mode (fields: block, modes, cause, reason)."""
        self._on_ride_through_transition(site, t_s, fields)

    def on_ride_through_records(self, site: str, records: Mapping[str, np.ndarray]) -> None:
        """A ride-through site's per-step, per-block records since the last flush."""
        self._on_ride_through_records(site, records)

    # ------------------------------------------------------------------ hooks (override these)
    def _init_recorder(self) -> None:
        pass

    def _on_start(self) -> None:
        pass

    def _on_flush(self) -> None:
        pass

    def _on_summary(self, summary: Mapping[str, Any]) -> None:
        pass

    def _on_close(self, status: str) -> None:
        pass

    def _on_end(self, summary: dict[str, Any]) -> None:
        pass

    def _on_datacenter_block(self, block: Sequence[DatacenterSeries], dt_s: float) -> None:
        pass

    def _on_grid_block(self, states: Sequence[GridState], v_pu: np.ndarray, dt_s: float) -> None:
        pass

    def _on_frequency(self, t_s: np.ndarray, f_hz: np.ndarray, delta_p_w: np.ndarray) -> None:
        pass

    def _on_event(self, t_s: float, command: Command, disturbance: str | None) -> None:
        pass

    def _on_command(self, t_issued_s: float, t_effective_s: float, source: str, command: Command) -> None:
        pass

    def _on_supply(self, t_s: float, site: str, bus: str, supplied: bool) -> None:
        pass

    def _on_ride_through_transition(self, site: str, t_s: float, fields: Mapping[str, Any]) -> None:
        pass

    def _on_ride_through_records(self, site: str, records: Mapping[str, np.ndarray]) -> None:
        pass
