"""The co-simulation engine: one simpy process per component, on an exact integer clock.

A :class:`Simulation` is built from its components (sites, grid, controllers), its periods and
its recorders; it knows no file (:meth:`Simulation.from_scenario` asks a scenario for its parts).
Order within one instant (fixed; simpy event priorities enforce it):

1. scheduled events (a scenario's ``events``) and disturbance commands for this instant fire;
2. commands whose communication delay ends now take effect;
3. each datacenter site samples (sites in order) over the period that just ended;
4. the grid solves with what the datacenters produced since its last solve: the mean of those
   samples (``load_aggregation="mean"``, default) or the last one (``"last"``);
5. controllers observe and return commands, in the order given; a command with no delay takes
   effect at once (so the next datacenter sample sees it), one with a delay at step 2 of the
   instant ``delay_s`` later. A command writing a setting another controller owns stops the run
   (:mod:`openg2g.engine.actuators`);
6. recorders that write are flushed every ``flush_every_s`` (:mod:`openg2g.engine.recording`).

A live site (:class:`~openg2g.core.interfaces.Live`: real inference servers and GPU meters) paces
the whole run to the wall clock (simpy's :class:`~simpy.rt.RealtimeEnvironment`, one simulated
second per second): every instant is processed no earlier than its wall-clock time, so the samples
the engine asks of the site at an instant cover windows that have passed. After each control
instant's work the engine measures how far it runs behind; past the live sites' ``max_lag_s`` the
run stops with a :class:`SimulationError` (the machine cannot keep up). Every site is closed
(:meth:`DatacenterBackend.close`) when the run ends, however it ends.

A site whose bus loses its supply (the grid's :meth:`GridBackend.unsupplied_sites`, asked at
the start and after every grid command) is told at once (:meth:`DatacenterBackend.set_supply`),
so its samples from that instant on draw and serve nothing until the supply returns; each change
goes to the recorders (the events table's ``supply_lost``, ``supply_restored``) and is logged as
a warning.

Components run first at their own first period (a datacenter with 0.1 s period first samples at
0.1 s over (0, 0.1]); events at ``t_s = 0`` apply before anything runs.

Steps 3 and 4 run in blocks (*block stepping*): between two instants at which anything can change
a component's inputs (an event, a delivered command, a control step, a flush, the end),
the datacenters produce all their samples in one vectorized call
(:meth:`DatacenterBackend.step_block`) and, when ``grid.batch`` is on and the grid allows it (no
controls with memory), the grid solves them in one batch call per control window. Work is done
when something needs it (a command is about to apply, a controller observes, outputs flush, the
run ends), so the order of effects above holds exactly; blocks produce the same numbers, bit for
bit, as stepping one instant at a time.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, Protocol, TypeVar

import numpy as np
import simpy
import simpy.rt
from simpy.events import Event, EventPriority

from openg2g.core.commands import Command, SetPowerCap, ShiftReplicas, is_datacenter_command
from openg2g.core.errors import (
    CommandError,
    ControllerError,
    OutputError,
    SimulationError,
    raised_in_user_code,
)
from openg2g.core.interfaces import (
    ControlContext,
    Controller,
    DatacenterBackend,
    FrequencyModel,
    GridBackend,
    Live,
    RidesThrough,
    ScheduledEvent,
)
from openg2g.core.interrupts import one_stop_signal
from openg2g.core.jsontext import finite_or_none
from openg2g.core.limits import CAP_CALIBRATED_MIN_W
from openg2g.core.state import PHASES, DatacenterSeries, DatacenterState, GridState, ModelState, Observation
from openg2g.core.threads import one_blas_thread
from openg2g.engine.actuators import ONE_OWNER, ActuatorOwners, claim_declared, controller_label
from openg2g.engine.clock import Clock
from openg2g.engine.disturbances import DisturbancePlan
from openg2g.engine.load_loss import LoadLoss
from openg2g.engine.periods import Periods
from openg2g.engine.recording import Recorder
from openg2g.engine.sensors import noisy_voltages, sensor_rng
from openg2g.engine.timeline import Timeline

__all__ = ["Priority", "ScenarioParts", "Scheduled", "Simulation"]

_log = logging.getLogger(__name__)


_R = TypeVar("_R", bound=Recorder)


class Priority:
    """simpy priorities of the steps within one instant (lower runs first)."""

    EVENTS = 10
    COMMANDS = 20
    DATACENTER = 30
    GRID = 40
    CONTROL = 50
    FLUSH = 90
    PACE = 95
    END = 100


class _Wake(Event):
    """A timeout with an explicit priority, so same-instant processes run in :class:`Priority` order."""

    def __init__(self, env: simpy.Environment, delay: int, priority: int):
        super().__init__(env)
        self._ok = True
        self._value = None
        env.schedule(self, EventPriority(priority), delay)


@dataclass(frozen=True)
class Scheduled:
    """A controller with its own period and communication delay.

    :param controller: the controller.
    :param period_s: how often it observes and commands (s); ``None``: the simulation's
        ``periods.control_s``.
    :param delay_s: from a command's issue to its effect (s).
    :param voltage_noise_pu: standard deviation of the error on each bus-phase voltage it reads
        (pu; :mod:`openg2g.engine.sensors`); 0: the grid's solution itself.
    """

    controller: Controller
    period_s: Fraction | float | None = None
    delay_s: Fraction | float = 0
    voltage_noise_pu: float = 0.0


Components = tuple[Sequence[DatacenterBackend], GridBackend, Sequence[Controller]]
"""``(sites, grid, controllers)`` of one run."""


class ScenarioParts(Protocol):
    """A description of a run that can build its simulation's parts (a scenario file:
    :class:`openg2g.scenario.loader.LoadedScenario`): :meth:`Simulation.from_scenario` reads it."""

    def simulation_parts(
        self, out_dir: Path | str | None = None, progress: bool = False, components: Components | None = None
    ) -> dict[str, Any]:
        """The keyword arguments of :class:`Simulation` for this run."""


@dataclass
class _Scheduled:
    controller: Controller
    period_ticks: int
    delay_ticks: int
    index: int
    voltage_noise_pu: float = 0.0
    sensor: np.random.Generator | None = None


def _exact(t_s: Fraction | float) -> Fraction:
    """A time as an exact rational: a float as it is written (0.1 is 1/10)."""
    return t_s if isinstance(t_s, Fraction) else Fraction(str(t_s))


def _noise(sigma_pu: float) -> float:
    """A controller's sensor error as :class:`Scheduled` gives it, checked: finite and >= 0 (pu)."""
    sigma = float(sigma_pu)
    if not (math.isfinite(sigma) and sigma >= 0.0):
        raise SimulationError(f"Scheduled.voltage_noise_pu must be a finite number >= 0 (pu), got {sigma_pu!r}")
    return sigma


_BLOCK_CELLS = 1_000_000
"""Upper bound on (datacenter steps x replica columns) computed in one block, to bound memory."""


def _block_steps(sites: Sequence[DatacenterBackend]) -> int:
    """Datacenter steps per block: as many as keep a block's arrays within :data:`_BLOCK_CELLS`."""
    columns = sum(sum(m.replicas for m in s.info().models.values()) for s in sites)
    return max(1, min(3000, _BLOCK_CELLS // max(columns, 1)))


_NO_MODELS: Mapping[str, ModelState] = MappingProxyType({})
"""The models of a site's load as the grid receives it (none: the grid needs only its power)."""


def _read_only(array: np.ndarray) -> np.ndarray:
    """``array`` (fresh, owned here) made read-only, so the states built on it need no copies."""
    array.flags.writeable = False
    return array


def _mean_of_rows(x: np.ndarray) -> np.ndarray:
    """Mean over axis 1 of ``(steps, rows, 3)``, summed row after row (the same floats for any
    number of steps)."""
    total = x[:, 0].copy()
    for j in range(1, x.shape[1]):
        total += x[:, j]
    return total / x.shape[1]


class Simulation:
    """One run of a datacenter-grid system, built from its components.

    Use :meth:`run` for a whole run, :meth:`steps` to walk through it (a notebook, a live
    driver), or :meth:`start`, :meth:`run_until`, :meth:`observation` and :meth:`send` to drive
    it from outside (the Gymnasium env does). :meth:`from_scenario` builds one from a scenario
    file. What the run produces goes to the ``recorders`` (:mod:`openg2g.engine.recording`): the
    engine itself writes nothing.

    :param sites: the datacenter sites.
    :param grid: the grid they draw from.
    :param controllers: controllers, each alone (it runs every ``periods.control_s`` with no
        delay) or :class:`Scheduled` with its own period and delay; they run in this order.
    :param duration_s: the run's length (s).
    :param periods: how often datacenters sample, the grid solves and controllers run (s).
    :param v_min_pu: lower voltage limit, for controllers and observations (pu).
    :param v_max_pu: upper voltage limit (pu).
    :param events: ``(t_s, command)`` carried out at fixed times (a scenario's events); known
        to controllers in advance (:attr:`ControlContext.events`).
    :param disturbances: the disturbances' commands and fine-step windows; unknown to controllers.
    :param frequency: the bulk system's frequency, stepped with the grid's draw; ``None``: none.
    :param recorders: what records the run (tables, metrics, plots, a progress bar).
    :param seed: the run's seed; site ``i`` is reset with ``seed + 1000 (i + 1)``.
    :param name: the run's name (in its summary).
    :param load_aggregation: the load each grid solve takes from the datacenter samples since the
        last: their ``mean`` or the ``last`` one.
    :param batch: solve the grid steps between two control instants in one call when the grid
        allows it.
    :param flush_every_s: how often recorders that write are flushed (s of run time).
    :param about: facts about where the run comes from, added to its summary (a scenario's file
        and hash).
    """

    def __init__(
        self,
        sites: Sequence[DatacenterBackend],
        grid: GridBackend,
        controllers: Sequence[Controller | Scheduled] = (),
        *,
        duration_s: Fraction | float,
        periods: Periods | None = None,
        v_min_pu: float = 0.95,
        v_max_pu: float = 1.05,
        events: Sequence[tuple[Fraction | float, Command]] = (),
        disturbances: DisturbancePlan | None = None,
        frequency: FrequencyModel | None = None,
        recorders: Sequence[Recorder] = (),
        seed: int = 0,
        name: str = "run",
        load_aggregation: Literal["mean", "last"] = "mean",
        batch: bool = True,
        flush_every_s: float = 60.0,
        about: Mapping[str, Any] | None = None,
    ):
        self.sites = list(sites)
        self.grid = grid
        self.name = name
        self.seed = seed
        self.duration_s = _exact(duration_s)
        self.periods = periods = periods if periods is not None else Periods()
        self.v_min_pu = v_min_pu
        self.v_max_pu = v_max_pu
        self.disturbances = disturbances
        self.recorders = tuple(recorders)
        self.frequency = frequency
        self._load_aggregation = load_aggregation
        self._batch = batch
        self._about = dict(about or {})
        self._site_index = {s.name: s for s in self.sites}
        # sites whose draw follows the grid's voltage need every solve before their next sample
        self._feedback_sites = [site for site in self.sites if site.grid_feedback]
        self._ride_through = {site.name: site for site in self.sites if isinstance(site, RidesThrough)}
        self._live = [site for site in self.sites if isinstance(site, Live)]
        slots = [c if isinstance(c, Scheduled) else Scheduled(c) for c in controllers]
        controller_periods = [_exact(c.period_s) if c.period_s is not None else periods.control_s for c in slots]
        controller_delays = [_exact(c.delay_s) for c in slots]
        exact_events = [(_exact(t), command) for t, command in events]
        times = [periods.datacenter_s, periods.grid_s, periods.control_s, self.duration_s, *controller_periods]
        times += controller_delays + [t for t, _ in exact_events]
        if disturbances is not None:
            times += [disturbances.step_s, *(t for t, _, _ in disturbances.commands)]
            times += [t for window in disturbances.windows for t in window]
        self.clock = Clock(times)
        self._dc_ticks = self.clock.ticks(periods.datacenter_s)
        self._grid_ticks = self.clock.ticks(periods.grid_s)
        self._timeline = (
            Timeline(
                self._dc_ticks,
                self._grid_ticks,
                [(self.clock.ticks(a), self.clock.ticks(b)) for a, b in disturbances.windows],
                self.clock.ticks(disturbances.step_s),
            )
            if disturbances is not None
            else Timeline(self._dc_ticks, self._grid_ticks)
        )
        self._end_ticks = self.clock.ticks(self.duration_s)
        self._control_ticks = self.clock.ticks(periods.control_s)
        self._flush_ticks = max(self._grid_ticks, self._grid_ticks * round(flush_every_s / float(periods.grid_s)))
        self._controllers = [
            _Scheduled(slot.controller, self.clock.ticks(p), self.clock.ticks(d), i, _noise(slot.voltage_noise_pu))
            for i, (slot, p, d) in enumerate(zip(slots, controller_periods, controller_delays))
        ]
        # (ticks, order, command, the disturbance it carries out or None for a scheduled event)
        scheduled: list[tuple[int, int, Command, str | None]] = [
            (self.clock.ticks(t), i, command, None) for i, (t, command) in enumerate(exact_events)
        ]
        if disturbances is not None:
            scheduled += [
                (self.clock.ticks(t), len(exact_events) + i, command, name)
                for i, (t, command, name) in enumerate(disturbances.commands)
            ]
        self._events = sorted(scheduled, key=lambda x: (x[0], x[1]))
        # the periods at whose multiples grid windows close (_is_barrier)
        self._barrier_periods = (self._control_ticks, *(c.period_ticks for c in self._controllers))
        self._writes = any(r.writes for r in self.recorders)
        self._bus_phases = self.grid.bus_phases()
        self._started = False
        for recorder in self.recorders:
            recorder.init_recorder(self)

    @classmethod
    def from_scenario(
        cls,
        scenario: ScenarioParts,
        out_dir: Path | str | None = None,
        progress: bool = False,
        components: Components | None = None,
    ) -> Simulation:
        """The simulation of a scenario file (:class:`openg2g.scenario.loader.LoadedScenario`),
        with its recorders: the run's metrics always, its tables and plots in ``out_dir``.

        :param out_dir: where to write outputs; ``None`` writes nothing (metrics are still kept).
        :param progress: show a progress bar on stderr.
        :param components: prebuilt ``(sites, grid, controllers)``; default builds them from the
            scenario. Controllers beyond the scenario's ``controllers`` list run every
            ``periods.control_s`` with no delay, after the listed ones.
        """
        return cls(**scenario.simulation_parts(out_dir, progress, components))

    def step_counts(self) -> tuple[int, int]:
        """How many datacenter and grid steps the whole run has (disturbance windows included)."""
        return (
            self._timeline.count(self._end_ticks, self._dc_ticks),
            self._timeline.count(self._end_ticks, self._grid_ticks),
        )

    def recorder(self, kind: type[_R]) -> _R:
        """The attached recorder of type ``kind`` (the first, if several).

        :raises SimulationError: none is attached.
        """
        for recorder in self.recorders:
            if isinstance(recorder, kind):
                return recorder
        raise SimulationError(f"no {kind.__name__} recorder is attached to this simulation")

    # ----------------------------------------------------------------------------- set-up
    def context(self, dt_s: float) -> ControlContext:
        """The static facts handed to a controller with period ``dt_s``."""
        return ControlContext(
            sites={s.name: s.info() for s in self.sites},
            bus_phases=self._bus_phases,
            regulators=self.grid.regulators(),
            v_min_pu=self.v_min_pu,
            v_max_pu=self.v_max_pu,
            dt_s=dt_s,
            storages=self.grid.storages(),
            # a disturbance is no forecast: a controller meets it when it happens
            events=tuple(
                ScheduledEvent(self.clock.seconds(ticks), command)
                for ticks, _, command, disturbance in self._events
                if disturbance is None
            ),
            branches=self.grid.branches(),
            storage_units=self.grid.storage_units(),
            f0_hz=self.frequency.f0_hz if self.frequency is not None else None,
        )

    def start(self) -> None:
        """Reset every component and schedule the processes; nothing runs yet."""
        with one_blas_thread():
            try:
                self._start()
            except BaseException:
                self._close_sites()  # a live site reset before the failure holds its servers' load
                raise

    def _close_sites(self) -> None:
        for site in self.sites:
            site.close()

    def _start(self) -> None:
        for i, site in enumerate(self.sites):
            site.reset(self.seed + 1000 * (i + 1))
        self.grid.reset(self.seed)
        for sched in self._controllers:
            sched.controller.reset(self.context(self.clock.seconds(sched.period_ticks)), self.seed)
            sched.sensor = sensor_rng(self.seed, sched.index) if sched.voltage_noise_pu > 0 else None
        self._owners = ActuatorOwners()
        conflicts = claim_declared(self._owners, [s.controller for s in self._controllers])
        if conflicts:
            raise SimulationError("; ".join(msg for _, msg in conflicts))
        # one tick of simulated time takes its length in wall-clock seconds when a site is live
        self.env = (
            simpy.rt.RealtimeEnvironment(factor=float(self.clock.tick_s), strict=False)
            if self._live
            else simpy.Environment()
        )
        self._branches = self.grid.branches()
        self._load_loss = (
            LoadLoss([float(r.start_s) for r in self.disturbances.records]) if self.disturbances is not None else None
        )
        self._dc_latest: dict[str, DatacenterSeries] = {}
        # per site, the (P, Q) rows sampled since the grid last took its loads
        self._dc_window: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {s.name: [] for s in self.sites}
        self._dc_done = 0  # ticks up to which the datacenters have sampled
        self._grid_done = 0  # ticks up to which the grid has solved
        self._grid_latest: GridState | None = None
        self._grid_pending: list[tuple[float, dict[str, DatacenterState]]] = []
        self._coupled = bool(self._feedback_sites)
        self._batching = self._batch and self.grid.can_batch() and not self._coupled
        self._block_steps = _block_steps(self.sites)
        self._pending_step = self._grid_ticks  # the step length of the solves in _grid_pending
        self._sensitivity_cache: dict[tuple[str, str], np.ndarray] = {}
        self._site_bus = {s.name: s.info().bus for s in self.sites}  # info() builds every model's facts: once
        self._bus_phase_index = {name: i for i, name in enumerate(self._bus_phases)}
        for site in self._feedback_sites:
            bus = self._site_bus[site.name]
            if not all(f"{bus}.{phase}" in self._bus_phase_index for phase in PHASES):
                raise SimulationError(
                    f"site {site.name!r} follows its bus voltage (ride-through), but the grid does not report "
                    f"every phase of bus {bus!r}: add the bus to grid.monitored_buses"
                )
        if self.frequency is not None:
            self.frequency.reset()
        self._f_hz: float | None = self.frequency.f0_hz if self.frequency is not None else None  # at the latest solve
        self._p_start_w: float | None = None  # the grid's draw from the bulk system at the first solve
        for recorder in self.recorders:
            recorder.on_start()
        self._unsupplied: frozenset[str] = frozenset()
        self._update_supply(start=True)
        self._stop_ticks = self._end_ticks
        self._n_commands = 0
        self._caps_below_calibration = 0
        self._lowest_cap_w: float | None = None
        self._wall_start = time.perf_counter()
        self._lag_s: list[float] = []  # how far each control instant ended behind the wall clock (s)
        if self._live:
            origin = self.env.real_start  # type: ignore[attr-defined]
            for site in self._live:
                site.go_live(origin)
            self.env.process(self._pace_process(origin, min(site.max_lag_s for site in self._live)))
        self.env.process(self._event_process())
        for sched in self._controllers:
            self.env.process(self._controller_process(sched))
        if self._writes:
            self.env.process(self._flush_process())
        self._started = True
        self._ran = False

    # ----------------------------------------------------------------------------- processes
    @property
    def _now(self) -> int:
        """Current simulation time (ticks); simpy's clock only ever advances by whole ticks here."""
        return int(self.env.now)

    @property
    def t_s(self) -> float:
        """Current simulation time (s)."""
        return self.clock.seconds(self._now)

    def _event_process(self):
        for ticks, _, command, disturbance in self._events:
            if ticks > self._now:
                yield _Wake(self.env, ticks - self._now, Priority.EVENTS)
            if self._coupled:  # the rows of the solves before it (a block's change of mode) come first
                self._catch_up(self._now - 1)
            for recorder in self.recorders:  # before the rows of what it causes (a loss of supply)
                recorder.on_event(self.t_s, command, disturbance)
            source = f"event {type(command).__name__}" if disturbance is None else f"disturbance {disturbance!r}"
            self._apply(command, source, before_sampling=True)

    def _pace_process(self, origin_s: float, max_lag_s: float):
        """At each control instant, after its work: how far the run is behind the wall clock."""
        while True:
            yield _Wake(self.env, self._control_ticks, Priority.PACE)
            self._catch_up(self._now)  # the instant's samples and solves are part of keeping up
            lag_s = time.monotonic() - (origin_s + self.t_s)
            self._lag_s.append(lag_s)
            if lag_s > max_lag_s:
                raise SimulationError(
                    f"at t = {self.t_s:g} s the run is {lag_s:.2f} s behind the wall clock (a live site allows "
                    f"{max_lag_s:g} s): this machine cannot simulate the scenario in real time; lengthen "
                    "periods.grid_s or periods.control_s, or solve a smaller feeder"
                )

    def _catch_up_datacenters(self, through: int) -> None:
        """Sample every site at each datacenter instant up to tick ``through``, in blocks of one
        step length (:mod:`openg2g.engine.timeline`: the period, or the window step in a window)."""
        while True:
            step, regime_end = self._timeline.dc_step(self._dc_done)
            if self._dc_done + step > through:  # nothing to sample (a command's usual case)
                return
            last = min(through - through % step, self._dc_done + step * self._block_steps)
            if regime_end is not None:
                last = min(last, regime_end)
            first = self._dc_done + step
            dt_s = self.clock.seconds(step)
            t_s = self.clock.seconds_of(np.arange(first, last + 1, step))
            block = [site.step_block(t_s, dt_s) for site in self.sites]
            self._dc_done = last
            for series in block:
                self._dc_latest[series.site] = series
                self._dc_window[series.site].append((series.p_w, series.q_var))
            if self._load_loss is not None:
                self._load_loss.add_block(block)
            for recorder in self.recorders:
                recorder.on_datacenter_block(block, dt_s)

    def _catch_up(self, through: int) -> None:
        """Bring datacenters and grid up to tick ``through``, a block at a time.

        Grid steps are solved in windows that close at every barrier (:meth:`_is_barrier`), at
        every change of step length and at each call's end, as step-by-step running would, so
        blocks never change a number.
        """
        while True:
            step, regime_end = self._timeline.grid_step(self._grid_done)
            if self._grid_done + step > through:
                break
            if self._grid_pending and step != self._pending_step:
                self._solve_pending()
            self._pending_step = step
            reach = self._grid_done + (
                step if self._coupled else max(self._block_steps * self._timeline.dc_step(self._grid_done)[0], step)
            )
            self._catch_up_datacenters(min(through, reach if regime_end is None else min(reach, regime_end)))
            sampled = self._dc_done if regime_end is None else min(self._dc_done, regime_end)
            for loads in self._take_grid_loads((sampled - self._grid_done) // step, step):
                self._grid_done += step
                self._grid_pending.append((self.clock.seconds(self._grid_done), loads))
                if not self._batching or self._is_barrier(self._grid_done):
                    self._solve_pending()
        self._catch_up_datacenters(through)
        self._solve_pending()

    def _take_grid_loads(self, n_steps: int, step: int) -> list[dict[str, DatacenterState]]:
        """Each site's load for the next ``n_steps`` grid steps of ``step`` ticks, from the samples
        each step covers: their mean (``grid.load_aggregation: mean``) or the last one."""
        per_step = step // self._timeline.dc_step(self._grid_done)[0]
        used = n_steps * per_step
        loads: list[dict[str, DatacenterState]] = [{} for _ in range(n_steps)]
        seconds, done = self.clock.seconds, self._grid_done
        times = [seconds(done + step * i) for i in range(1, n_steps + 1)]
        mean = self._load_aggregation == "mean" and per_step > 1
        for name, window in self._dc_window.items():
            if len(window) == 1:  # one block's samples (read-only): the loads are views of them
                p_w, q_var = window[0]
            else:
                p_w, q_var = (
                    _read_only(np.concatenate([p for p, _ in window])),
                    _read_only(np.concatenate([q for _, q in window])),
                )
            window[:] = [(p_w[used:], q_var[used:])] if used < len(p_w) else []
            p_steps = p_w[:used].reshape(n_steps, per_step, 3)
            q_steps = q_var[:used].reshape(n_steps, per_step, 3)
            if mean:
                p_load, q_load = _read_only(_mean_of_rows(p_steps)), _read_only(_mean_of_rows(q_steps))
            else:
                p_load, q_load = p_steps[:, -1], q_steps[:, -1]
            for load, state in zip(loads, DatacenterState.of_rows(name, times, p_load, q_load, _NO_MODELS)):
                load[name] = state
        return loads

    def _is_barrier(self, ticks: int) -> bool:
        # Windows close at every control_s whether or not a controller runs, so adding a
        # controller that does nothing leaves the batching, and so every number, unchanged.
        if ticks >= self._stop_ticks:
            return True
        for period in self._barrier_periods:
            if ticks % period == 0:
                return True
        return False

    def _last_barrier(self, ticks: int) -> int:
        """The latest barrier (:meth:`_is_barrier`) at or before ``ticks``."""
        if ticks >= self._stop_ticks:
            return ticks
        return max(ticks - ticks % period for period in self._barrier_periods)

    def _solve_pending(self) -> None:
        """Solve the grid steps waiting in :attr:`_grid_pending`, in one batch when there are
        several. A step that does not converge is the grid's to report: it raises
        :class:`PowerFlowError` or returns a state with ``converged=False``, as its own policy says
        (``grid.on_nonconvergence`` of the bundled grids)."""
        if not self._grid_pending:
            return
        times = [t for t, _ in self._grid_pending]
        loads = [load for _, load in self._grid_pending]
        self._grid_pending = []
        dt_s = self.clock.seconds(self._pending_step)
        if len(times) == 1:
            self._on_grid_states([self.grid.solve(times[0], loads[0], dt_s)])
        else:
            self._on_grid_states(self.grid.solve_batch(times, loads, dt_s))

    def _on_grid_states(self, states: Sequence[GridState]) -> None:
        dt_s = self.clock.seconds(self._pending_step)
        v_pu = np.array([s.v_pu for s in states])  # np.stack's result, without its per-row views
        for recorder in self.recorders:
            recorder.on_grid_block(states, v_pu, dt_s)
        if self.frequency is not None:
            self._step_frequency(states, dt_s)
        self._grid_latest = states[-1]
        if self._coupled:  # one state: the grid is solved step by step
            self._feed_back(states[-1], dt_s)
        self._sensitivity_cache.clear()

    def _site_voltages(self, state: GridState, bus: str) -> np.ndarray:
        """The voltage magnitudes of phases a, b, c at ``bus`` in ``state`` (pu; 0 for a phase the
        bus lacks or without supply, NaN where the solve did not converge)."""
        index = self._bus_phase_index
        v = np.zeros(3)
        for k, phase in enumerate(PHASES):
            i = index.get(f"{bus}.{phase}")
            if i is not None:
                v[k] = state.v_pu[i]
        return v

    def _step_frequency(self, states: Sequence[GridState], dt_s: float) -> None:
        """Step the bulk system's frequency over each solved step with the change of the grid's
        draw from it (its substation power, all phases) since the first solve."""
        assert self.frequency is not None
        f_hz = np.empty(len(states))
        delta_w = np.empty(len(states))
        for i, state in enumerate(states):
            p_w = float(state.p_sub_w.sum())
            if not math.isfinite(p_w):
                raise SimulationError(
                    f"t={state.t_s:g} s: the grid did not converge, so the bulk system's frequency has no load to follow"
                )
            if self._p_start_w is None:
                self._p_start_w = p_w
            delta_w[i] = p_w - self._p_start_w
            f_hz[i] = self.frequency.step(dt_s, float(delta_w[i]), state.t_s)
        self._f_hz = float(f_hz[-1])
        t_s = np.array([s.t_s for s in states])
        for recorder in self.recorders:
            recorder.on_frequency(t_s, f_hz, delta_w)

    def _feed_back(self, state: GridState, dt_s: float) -> None:
        """Tell each site with grid feedback what the solve at ``state.t_s`` found at its bus."""
        for site in self._feedback_sites:
            site.observe_grid(state.t_s, dt_s, self._site_voltages(state, self._site_bus[site.name]), self._f_hz)
        self._record_transitions()

    def _record_transitions(self) -> None:
        """The ride-through blocks' changes of mode since the last call, as events rows (and a log line each)."""
        for name, site in self._ride_through.items():
            for transition in site.take_transitions():
                _log.info("t=%g s: site %s block %s %s", transition.t_s, name, transition.block, transition.reason)
                for recorder in self.recorders:
                    recorder.on_ride_through_transition(name, transition.t_s, transition.fields())

    def _controller_process(self, sched: _Scheduled):
        while True:
            yield _Wake(self.env, sched.period_ticks, Priority.CONTROL + sched.index)
            observation = self.observation()
            if sched.sensor is not None:
                observation = noisy_voltages(observation, sched.sensor, sched.voltage_noise_pu)
            try:
                commands = sched.controller.step(observation)
            except Exception as exc:  # controller code (a user's too) may fail in any way
                raise ControllerError(
                    f"t={self.t_s:g} s: controller {sched.controller.name!r} step() raised {type(exc).__name__}: "
                    f"{exc}{raised_in_user_code(exc)}"
                ) from exc
            self._check_commands(sched.controller.name, commands)
            owner = controller_label(sched.index, sched.controller.name)
            self._dispatch(commands, sched.controller.name, owner, sched.delay_ticks)

    def _flush_process(self):
        while True:
            yield _Wake(self.env, self._flush_ticks, Priority.FLUSH)
            # only up to the last barrier: a grid window closed here, between two barriers, would
            # be solved in two batches, whose iterative solutions differ in the last bits from the
            # one batch of any other flush period
            self._catch_up(self._last_barrier(self._now))
            self._flush("running")

    # ----------------------------------------------------------------------------- commands
    @staticmethod
    def _check_commands(source: str, commands: Any) -> None:
        if not isinstance(commands, list):
            raise ControllerError(
                f"controller {source!r} returned {type(commands).__name__}; step() must return a list of commands"
            )
        for c in commands:
            if not isinstance(c, Command):
                raise ControllerError(
                    f"controller {source!r} returned {c!r} ({type(c).__name__}), which is not a Command"
                )

    def _dispatch(self, commands: Sequence[Command], source: str, owner: str, delay_ticks: int) -> None:
        """Record and carry out (now or after ``delay_ticks``) the commands ``source`` sent, once
        ``owner`` (``source`` as ownership errors name it) is found to own every setting they write."""
        for command in commands:
            conflict = self._owners.claim(owner, command.actuators())
            if conflict is not None:
                raise SimulationError(f"t={self.t_s:g} s: {command}: {conflict}; {ONE_OWNER}")
            self._n_commands += 1
            for recorder in self.recorders:
                recorder.on_command(self.t_s, self.clock.seconds(self._now + delay_ticks), source, command)
            if delay_ticks == 0:
                self._apply(command, f"controller {source!r}")
            else:
                self.env.process(self._deliver_later(command, source, delay_ticks))

    def _deliver_later(self, command: Command, source: str, delay_ticks: int):
        yield _Wake(self.env, delay_ticks, Priority.COMMANDS)
        self._apply(command, f"controller {source!r}", before_sampling=True)

    def _apply(self, command: Command, source: str, before_sampling: bool = False) -> None:
        """Carry out ``command`` now; ``before_sampling``: it acts before this instant's samples
        (events and delivered commands), otherwise after them (a controller's undelayed command)."""
        now = self._now
        t_s = self.clock.seconds(now)
        try:
            if is_datacenter_command(command):
                self._catch_up_datacenters(now - 1 if before_sampling else now)
                # a shift is offered to the destination first, so a refusal leaves both sites unchanged
                if isinstance(command, ShiftReplicas):
                    self._site_index[command.to_site].apply(command, t_s)
                self._site_index[command.site].apply(command, t_s)
            else:
                self._catch_up(now - 1 if before_sampling else now)
                self.grid.apply(command, t_s)
                self._sensitivity_cache.clear()
        except (CommandError, KeyError) as exc:
            raise SimulationError(f"t={t_s:g} s: {command} from {source} was rejected: {exc}") from exc
        if isinstance(command, SetPowerCap) and command.cap_w_per_gpu is not None:
            cap = command.cap_w_per_gpu
            self._lowest_cap_w = cap if self._lowest_cap_w is None else min(self._lowest_cap_w, cap)
            if cap < CAP_CALIBRATED_MIN_W:
                self._caps_below_calibration += 1
        if not is_datacenter_command(command):
            self._update_supply()

    def _update_supply(self, start: bool = False) -> None:
        """Tell every site whose supply changed (every site at the ``start``) whether the grid
        supplies its bus now, and record each change: an events row, a log line."""
        cut = self.grid.unsupplied_sites()
        for site in self.sites:
            lost = site.name in cut
            changed = lost != (site.name in self._unsupplied)
            if start or changed:
                site.set_supply(not lost, self.t_s)
            if not changed:
                continue
            bus = self._site_bus[site.name]
            if lost:
                _log.warning(
                    "t=%g s: site %s lost supply (bus %s has no path to a source): it draws and serves "
                    "nothing until supply returns",
                    self.t_s,
                    site.name,
                    bus,
                )
            else:
                _log.info("t=%g s: site %s has supply again at bus %s", self.t_s, site.name, bus)
            for recorder in self.recorders:
                recorder.on_supply(self.t_s, site.name, bus, not lost)
        self._unsupplied = cut

    def send(self, commands: Sequence[Command], source: str = "agent", delay_s: Fraction | float = 0) -> None:
        """Send commands from outside the scenario's controllers (e.g. an RL agent) at the current time."""
        sent = list(commands)
        self._check_commands(source, sent)
        if not sent:
            return
        delay_ticks = 0 if delay_s == 0 else self.clock.ticks(Fraction(str(delay_s)))  # an agent's: 0, no parsing
        self._dispatch(sent, source, repr(source), delay_ticks)

    # ----------------------------------------------------------------------------- observing
    def _sensitivity(self, site: str) -> np.ndarray:
        return self._cached_sensitivity("voltage", self.grid.voltage_sensitivity, site)

    def _loading_sensitivity(self, site: str) -> np.ndarray:
        return self._cached_sensitivity("loading", self.grid.loading_sensitivity, site)

    def _cached_sensitivity(self, kind: str, of: Callable[[str], np.ndarray], site: str) -> np.ndarray:
        """``of(site's bus)`` as a read-only copy, kept (as ``kind``) until the grid state or
        switching changes."""
        key = (kind, site)
        if key not in self._sensitivity_cache:
            matrix = np.array(of(self._site_bus[site]))
            matrix.flags.writeable = False
            self._sensitivity_cache[key] = matrix
        return self._sensitivity_cache[key]

    def observation(self) -> Observation:
        """What a controller sees now: latest datacenter states and grid state."""
        self._catch_up(self._now)
        if self._grid_latest is None:
            raise SimulationError(f"t={self.t_s:g} s: no grid solution yet to observe")
        return Observation(
            t_s=self.t_s,
            datacenters=MappingProxyType({name: series.state() for name, series in self._dc_latest.items()}),
            grid=self._grid_latest,
            v_min_pu=self.v_min_pu,
            v_max_pu=self.v_max_pu,
            _sensitivity=self._sensitivity,
            _loading_sensitivity=self._loading_sensitivity if self._branches is not None else None,
            f_hz=self._f_hz,
            ride_through=MappingProxyType({name: site.ride_through_state for name, site in self._ride_through.items()}),
        )

    # ----------------------------------------------------------------------------- running
    def run_until(self, t_s: Fraction | float) -> None:
        """Advance through every instant up to and including ``t_s`` (capped at the scenario's end)."""
        with one_blas_thread():
            self._advance(t_s)

    def _advance(self, t_s: Fraction | float) -> None:
        if not self._started:
            self.start()
        exact = t_s if isinstance(t_s, Fraction) else Fraction(str(t_s))  # a float as it is written
        target = min(self.clock.ticks(exact), self._end_ticks)
        if target < self._now:
            raise SimulationError(f"cannot run back to {t_s} s from {self.t_s} s")
        self._stop_ticks = target
        if target > self._now or not self._ran:
            # a wake-up after every phase of the target instant: the run ends with `now == target`
            self.env.run(until=_Wake(self.env, target - self._now, Priority.END))
            self._ran = True
        self._catch_up(target)

    @property
    def done(self) -> bool:
        """True once the scenario's end has been simulated."""
        return self._started and self._now >= self._end_ticks

    def _disturbance_figures(self) -> dict[str, Any]:
        """Each disturbance as it played out and the load it took off the sites
        (:mod:`openg2g.engine.load_loss`); nothing for a scenario without disturbances."""
        if self.disturbances is None or self._load_loss is None:
            return {}
        events = []
        for record, loss in zip(self.disturbances.records, self._load_loss.events):
            events.append(
                {
                    "name": record.name,
                    "kind": record.kind,
                    "start_s": float(record.start_s),
                    "end_s": float(record.end_s),
                    "outcome": record.outcome,
                    "load_before_mw": loss.before_w / 1e6 if loss.before_w is not None else None,
                    "load_lost_mw": loss.lost_mw(),
                    "load_lowest_at_s": loss.low_at_s,
                }
            )
        run = self._load_loss.run
        return {
            "disturbances": events,
            "load_lost_mw": run.lost_mw(),
            "load_lowest_at_s": run.low_at_s,
            "disturbance_windows_s": [[float(a), float(b)] for a, b in self.disturbances.windows],
        }

    def _ride_through_figures(self) -> dict[str, Any]:
        """Per site with a ride-through: its events (MW lost, blocks transferred or tripped, UPS
        energy, time to full return, tokens not served) and the run's energy and token totals."""
        if not self._ride_through or not self._started:
            return {}
        return {"ride_through": {name: site.summary() for name, site in self._ride_through.items()}}

    def summary(self, status: str, error: str | None = None) -> dict[str, Any]:
        """The run's summary as written to ``summary.json``: how far it got, each recorder's
        figures, the disturbances, the frequency and the ride-through, the commands, and
        :attr:`about`.

        A figure that is not a finite number (a plug-in's NaN) is ``None``, named in
        ``unavailable_figures`` (figure -> why) beside those a recorder names itself, so the
        summary can always be written as JSON."""
        sim_time = min(self.clock.seconds(self._now), float(self.duration_s)) if self._started else 0.0
        result: dict[str, Any] = {
            "scenario": self.name,
            "status": status,
            "sim_time_s": self._grid_latest.t_s if self._started and self._grid_latest else sim_time,
            "duration_s": float(self.duration_s),
            "wall_time_s": time.perf_counter() - self._wall_start if self._started else 0.0,
        }
        for recorder in self.recorders:
            result.update(recorder.figures())
        result.update(self._disturbance_figures())
        if self.frequency is not None and self._started:
            result.update(self.frequency.figures())
        result.update(self._ride_through_figures())
        if self._live and self._started and self._lag_s:
            result["realtime"] = {
                "lag_max_s": max(self._lag_s),
                "lag_mean_s": sum(self._lag_s) / len(self._lag_s),
                "instants": len(self._lag_s),
            }
        result.update(
            n_commands=self._n_commands if self._started else 0,
            power_caps_below_calibration=self._caps_below_calibration if self._started else 0,
            lowest_power_cap_w_per_gpu=self._lowest_cap_w if self._started else None,
            seed=self.seed,
            **self._about,
        )
        if error:
            result["error"] = error
        result, non_finite = finite_or_none(result)
        if non_finite:
            why = {path: f"not a finite number ({value})" for path, value in non_finite.items()}
            result["unavailable_figures"] = {**why, **result.get("unavailable_figures", {})}
        return result

    def _flush(self, status: str, error: str | None = None) -> dict[str, Any]:
        """Flush every recorder and hand each the summary; returns the summary.

        :raises OutputError: a recorder could not write; the summary then says ``failed`` with the
            reason where it can still be written.
        """
        summary = self.summary(status, error)
        if not self._writes:
            return summary
        if self._started:
            self._record_transitions()
            for name, site in self._ride_through.items():
                records = site.take_records()
                for recorder in self.recorders:
                    recorder.on_ride_through_records(name, records)
        try:
            for recorder in self.recorders:
                recorder.on_flush()
        except OutputError as exc:
            failed = self.summary("failed", str(exc))
            for recorder in self.recorders:
                with contextlib.suppress(OutputError):
                    recorder.on_summary(failed)
            raise
        for recorder in self.recorders:
            recorder.on_summary(summary)
        return summary

    def close(self, status: str, error: str | None = None) -> dict[str, Any]:
        """End the run with ``status``: every site is closed and every recorder told, then flushed;
        returns the summary."""
        self._close_sites()
        for recorder in self.recorders:
            recorder.on_close(status)
        return self._flush(status, error)

    def _finish(self) -> dict[str, Any]:
        """Close a complete run and let the recorders finish (the app's overview, the plots)."""
        summary = self.close("complete")
        for recorder in self.recorders:
            recorder.on_end(summary)
        return summary

    def run(self) -> dict[str, Any]:
        """Run to the end and return the summary; the recorders' files are complete whatever happens.

        :raises SimulationError: the run could not continue (summary status ``failed``).
        :raises KeyboardInterrupt: interrupted (summary status ``interrupted``); stop signals after
            the first are ignored until the run is closed, so a burst of Ctrl-C cannot cut short
            the closing the first began.
        """
        self.start()  # a failure here has nothing to save and propagates as it is
        with one_stop_signal(), self._closing():
            self.run_until(self.duration_s)
        return self._finish()

    def steps(self, every_s: Fraction | float | None = None) -> Iterator[Observation]:
        """Run in steps of ``every_s`` (s; default ``periods.control_s``), yielding after each what a
        controller would observe then; the last step ends at the run's end, which closes the run
        as :meth:`run` does. Leaving the loop early closes it as ``interrupted``.

        The same run, stepped or not, gives the same numbers: stopping changes no block.
        """
        step = self.clock.ticks(_exact(every_s)) if every_s is not None else self._control_ticks
        if step <= 0:
            raise SimulationError(f"steps(every_s={every_s}): the step must be > 0 s")
        self.start()
        with self._closing():
            while not self.done:
                self.run_until(self.clock.tick_s * min(self._now + step, self._end_ticks))
                yield self.observation()
        self._finish()

    @contextlib.contextmanager
    def _closing(self) -> Iterator[None]:
        """Close the run with the right status if the body does not finish it."""
        try:
            yield
        except KeyboardInterrupt as exc:
            self.close("interrupted", str(exc) or "interrupted by the user (Ctrl-C)")
            raise
        except GeneratorExit:
            self.close("interrupted", "the caller stopped stepping before the end")
            raise
        except Exception as exc:
            self.close("failed", f"{type(exc).__name__}: {exc}")
            raise
