"""The co-simulation engine: one simpy process per component, on an exact integer clock.

Order within one instant (fixed; simpy event priorities enforce it):

1. scenario events scheduled for this instant fire;
2. commands whose communication delay ends now take effect;
3. each datacenter site samples (sites in scenario order) over the period that just ended;
4. the grid solves with what the datacenters produced since its last solve: the mean of those
   samples (``grid.load_aggregation: mean``, default) or the last one (``last``);
5. controllers observe and return commands, in the order the scenario lists them; a command with
   no delay takes effect at once (so the next datacenter sample sees it), one with a delay at
   step 2 of the instant ``delay_s`` later. A command writing a setting another controller owns
   stops the run (:mod:`openg2g.engine.actuators`);
6. outputs are flushed every ``outputs.flush_every_s``.

A site whose bus loses its supply (the grid's :meth:`GridBackend.unsupplied_sites`, asked at
the start and after every grid command) is told at once (:meth:`DatacenterBackend.set_supply`),
so its samples from that instant on draw and serve nothing until the supply returns; each change
adds a row to the events table (``supply_lost``, ``supply_restored``) and the loss is logged as a
warning.

Components run first at their own first period (a datacenter with 0.1 s period first samples at
0.1 s over (0, 0.1]); events at ``t_s = 0`` apply before anything runs.

Steps 3 and 4 run in blocks (*block stepping*): between two instants at which anything can change
a component's inputs (an event, a delivered command, a control step, an output flush, the end),
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import simpy
from simpy.events import Event, EventPriority

from openg2g import __version__
from openg2g.core.commands import Command, SetPowerCap, ShiftReplicas, is_datacenter_command
from openg2g.core.errors import (
    CommandError,
    ControllerError,
    OutputError,
    PowerFlowError,
    SimulationError,
    raised_in_user_code,
)
from openg2g.core.interfaces import ControlContext, Controller, DatacenterBackend, ScheduledEvent
from openg2g.core.limits import CAP_CALIBRATED_MIN_W
from openg2g.core.progress import progress_bar
from openg2g.core.state import PHASES, DatacenterSeries, DatacenterState, GridState, ModelState, Observation
from openg2g.core.threads import one_blas_thread
from openg2g.datacenter.ridethrough_site import RideThroughSite
from openg2g.engine.actuators import ONE_OWNER, ActuatorOwners, claim_declared, controller_label
from openg2g.engine.clock import Clock
from openg2g.engine.load_loss import LoadLoss
from openg2g.engine.metrics import RunMetrics
from openg2g.engine.outputs import RunOutputs
from openg2g.engine.timeline import Timeline
from openg2g.grid.frequency import SystemFrequency
from openg2g.scenario.build import Components, build_components
from openg2g.scenario.disturbances import plan as plan_disturbances
from openg2g.scenario.loader import LoadedScenario, build_event_command, load_scenario, write_resolved_scenario
from openg2g.scenario.schema import ControllerSpec

__all__ = ["Priority", "RunResult", "Simulation", "run_scenario"]

_log = logging.getLogger(__name__)


class Priority:
    """simpy priorities of the steps within one instant (lower runs first)."""

    EVENTS = 10
    COMMANDS = 20
    DATACENTER = 30
    GRID = 40
    CONTROL = 50
    FLUSH = 90
    END = 100


class _Wake(Event):
    """A timeout with an explicit priority, so same-instant processes run in :class:`Priority` order."""

    def __init__(self, env: simpy.Environment, delay: int, priority: int):
        super().__init__(env)
        self._ok = True
        self._value = None
        env.schedule(self, EventPriority(priority), delay)


@dataclass
class RunResult:
    """What :func:`run_scenario` returns: the summary (as in ``summary.json``) and the output folder."""

    summary: dict[str, Any]
    out_dir: Path | None


@dataclass
class _Scheduled:
    controller: Controller
    period_ticks: int
    delay_ticks: int
    index: int


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
    """One run of a scenario.

    Use :meth:`run` for a whole run, or :meth:`start`, :meth:`run_until`, :meth:`observation` and
    :meth:`send` to drive it from outside (the Gymnasium env does).

    :param loaded: a validated scenario.
    :param out_dir: where to write outputs; ``None`` writes nothing (metrics are still kept).
    :param progress: show a progress bar on stderr.
    :param components: prebuilt ``(sites, grid, controllers)``; default builds from the scenario.
        Controllers beyond the scenario's ``controllers`` list run every ``periods.control_s``
        with no delay, after the listed ones.
    """

    def __init__(
        self,
        loaded: LoadedScenario,
        out_dir: Path | str | None = None,
        progress: bool = False,
        components: Components | None = None,
    ):
        self.loaded = loaded
        sc = loaded.scenario
        self.scenario = sc
        self.sites, self.grid, controllers = components or build_components(loaded)
        self._site_index = {s.name: s for s in self.sites}
        # sites whose draw follows the grid's voltage need every solve before their next sample
        self._feedback_sites = [site for site in self.sites if site.grid_feedback]
        self._ride_through = {site.name: site for site in self.sites if isinstance(site, RideThroughSite)}
        periods = sc.periods
        if len(controllers) < len(sc.controllers):
            raise SimulationError(
                f"the scenario lists {len(sc.controllers)} controllers but {len(controllers)} were given"
            )
        # controllers given beyond the scenario's list (e.g. from a notebook) run every control_s, no delay
        specs = [*sc.controllers, *[ControllerSpec(kind=c.name) for c in controllers[len(sc.controllers) :]]]
        controller_periods = [c.period_s or periods.control_s for c in specs]
        times = [periods.datacenter_s, periods.grid_s, periods.control_s, sc.duration_s, *controller_periods]
        times += [c.delay_s for c in specs] + [e.t_s for e in sc.events]
        self.disturbances = (
            plan_disturbances(sc.disturbances, periods.grid_s, sc.duration_s) if sc.disturbances is not None else None
        )
        if self.disturbances is not None:
            times += [self.disturbances.step_s, *(t for t, _, _ in self.disturbances.commands)]
            times += [t for window in self.disturbances.windows for t in window]
        self.clock = Clock(times)
        self._dc_ticks = self.clock.ticks(periods.datacenter_s)
        self._grid_ticks = self.clock.ticks(periods.grid_s)
        self._timeline = (
            Timeline(
                self._dc_ticks,
                self._grid_ticks,
                [(self.clock.ticks(a), self.clock.ticks(b)) for a, b in self.disturbances.windows],
                self.clock.ticks(self.disturbances.step_s),
            )
            if self.disturbances is not None
            else Timeline(self._dc_ticks, self._grid_ticks)
        )
        self._end_ticks = self.clock.ticks(sc.duration_s)
        self._control_ticks = self.clock.ticks(periods.control_s)
        self._flush_ticks = max(
            self._grid_ticks, self._grid_ticks * round(sc.outputs.flush_every_s / float(periods.grid_s))
        )
        self._controllers = [
            _Scheduled(ctrl, self.clock.ticks(p), self.clock.ticks(spec.delay_s), i)
            for i, (ctrl, p, spec) in enumerate(zip(controllers, controller_periods, specs))
        ]
        # (ticks, order, command, the disturbance it carries out or None for a scenario event)
        events: list[tuple[int, int, Command, str | None]] = [
            (self.clock.ticks(e.t_s), i, build_event_command(e.command, e.fields()), None)
            for i, e in enumerate(sc.events)
        ]
        if self.disturbances is not None:
            events += [
                (self.clock.ticks(t), len(sc.events) + i, command, name)
                for i, (t, command, name) in enumerate(self.disturbances.commands)
            ]
        self._events = sorted(events, key=lambda x: (x[0], x[1]))
        # the periods at whose multiples grid windows close (_is_barrier)
        self._barrier_periods = (self._control_ticks, *(c.period_ticks for c in self._controllers))
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self._progress = progress
        self._bar = None
        self._bus_phases = self.grid.bus_phases()
        self._started = False

    # ----------------------------------------------------------------------------- set-up
    def context(self, dt_s: float) -> ControlContext:
        """The static facts handed to a controller with period ``dt_s``."""
        return ControlContext(
            sites={s.name: s.info() for s in self.sites},
            bus_phases=self._bus_phases,
            regulators=self.grid.regulators(),
            v_min_pu=self.scenario.grid.v_min_pu,
            v_max_pu=self.scenario.grid.v_max_pu,
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
            f0_hz=self.scenario.grid.frequency.f0_hz if self.scenario.grid.frequency is not None else None,
        )

    def start(self) -> None:
        """Reset every component and schedule the processes; nothing runs yet."""
        with one_blas_thread():
            self._start()

    def _start(self) -> None:
        sc = self.scenario
        seed = sc.seed
        for i, site in enumerate(self.sites):
            site.reset(seed + 1000 * (i + 1))
        self.grid.reset(seed)
        for sched in self._controllers:
            sched.controller.reset(self.context(self.clock.seconds(sched.period_ticks)), seed)
        self._owners = ActuatorOwners()
        conflicts = claim_declared(self._owners, [s.controller for s in self._controllers])
        if conflicts:
            raise SimulationError("; ".join(msg for _, msg in conflicts))
        self.env = simpy.Environment()
        self._branches = self.grid.branches()
        self.metrics = RunMetrics(
            sc.grid.v_min_pu,
            sc.grid.v_max_pu,
            self._branches.names if self._branches is not None else None,
            tuple(self._bus_phases),
            float(sc.outputs.metrics_start_s),
        )
        banks = {name: info.phases for name, info in self.grid.regulators().items()}
        table_branches = self._branches if sc.outputs.branches == "all" else None
        self.outputs = (
            RunOutputs(
                self.out_dir,
                self._bus_phases,
                banks,
                sc.outputs.voltages == "all",
                table_branches,
                self.grid.controlled_capacitors(),
                storage=bool(self.grid.storages()),
                frequency=sc.grid.frequency is not None,
                ride_through=bool(self._ride_through),
                steps=(
                    self._timeline.count(self._end_ticks, self._dc_ticks),
                    self._timeline.count(self._end_ticks, self._grid_ticks),
                ),
            )
            if self.out_dir
            else None
        )
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
        self._batching = sc.grid.batch and self.grid.can_batch() and not self._coupled
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
        spec = sc.grid.frequency
        first = min((float(r.start_s) for r in self.disturbances.records), default=None) if self.disturbances else None
        self._frequency = SystemFrequency(spec, event_t_s=first) if spec is not None else None
        self._f_hz: float | None = spec.f0_hz if spec is not None else None  # at the latest solve
        self._p_start_w: float | None = None  # the grid's draw from the bulk system at the first solve
        self._unsupplied: frozenset[str] = frozenset()
        self._update_supply(start=True)
        self._stop_ticks = self._end_ticks
        self._n_commands = 0
        self._caps_below_calibration = 0
        self._lowest_cap_w: float | None = None
        self._wall_start = time.perf_counter()
        self._bar = None
        if self._progress:
            self._bar = progress_bar(total=float(sc.duration_s), unit="sim s", desc=sc.name, leave=False)
        self.env.process(self._event_process())
        for sched in self._controllers:
            self.env.process(self._controller_process(sched))
        if self.outputs is not None:
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
            if self.outputs is not None:  # before the rows of what it causes (a loss of supply)
                self.outputs.record_event(self.t_s, command, disturbance)
            source = f"event {type(command).__name__}" if disturbance is None else f"disturbance {disturbance!r}"
            self._apply(command, source, before_sampling=True)

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
            self.metrics.add_datacenter_block(block, dt_s)
            if self._load_loss is not None:
                self._load_loss.add_block(block)
            if self.outputs is not None:
                self.outputs.record_datacenter_block(block)

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
        mean = self.scenario.grid.load_aggregation == "mean" and per_step > 1
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

    def _solve(self, t_s: float, loads: dict[str, DatacenterState]) -> GridState:
        dt_s = self.clock.seconds(self._pending_step)
        try:
            return self.grid.solve(t_s, loads, dt_s)
        except PowerFlowError:
            if self.scenario.grid.on_nonconvergence != "flag":
                raise
            latest = self._grid_latest
            taps, capacitors = (latest.taps, latest.capacitors) if latest else ({}, {})
            return GridState.not_converged(t_s, self._bus_phases, taps, self._branches, capacitors)

    def _solve_pending(self) -> None:
        if not self._grid_pending:
            return
        times = [t for t, _ in self._grid_pending]
        loads = [load for _, load in self._grid_pending]
        self._grid_pending = []
        if len(times) == 1:
            self._on_grid_states([self._solve(times[0], loads[0])])
            return
        dt_s = self.clock.seconds(self._pending_step)
        try:
            states = self.grid.solve_batch(times, loads, dt_s)
        except PowerFlowError:
            if self.scenario.grid.on_nonconvergence != "flag":
                raise
            states = [self._solve(t, load) for t, load in zip(times, loads)]
        self._on_grid_states(states)

    def _on_grid_states(self, states: Sequence[GridState]) -> None:
        dt_s = self.clock.seconds(self._pending_step)
        v_pu = np.array([s.v_pu for s in states])  # np.stack's result, without its per-row views
        times = [s.t_s for s in states]
        violations = self.metrics.add_grid_block(v_pu, np.array([s.converged for s in states]), dt_s, times)
        self.metrics.add_taps([s.taps for s in states])
        if self._branches is not None:
            rows = [s.branch_loading_pct for s in states]
            if any(row is None for row in rows):
                nan = np.full(len(self._branches.names), np.nan)  # a state without branch results
                rows = [nan if row is None else row for row in rows]
            loading = np.array(rows)
            self.metrics.add_branch_block(loading, dt_s, times)
        if self.outputs is not None:
            self.outputs.record_grid_block(states, v_pu, violations)
        if self._frequency is not None:
            self._step_frequency(states, dt_s)
        self._grid_latest = states[-1]
        if self._coupled:  # one state: the grid is solved step by step
            self._feed_back(states[-1], dt_s)
        self._sensitivity_cache.clear()
        if self._bar is not None:
            self._bar.update(states[-1].t_s - self._bar.n)

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
        assert self._frequency is not None
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
            f_hz[i] = self._frequency.step(dt_s, float(delta_w[i]), state.t_s)
        self._f_hz = float(f_hz[-1])
        if self.outputs is not None:
            self.outputs.record_frequency(np.array([s.t_s for s in states]), f_hz, delta_w)

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
                if self.outputs is not None:
                    self.outputs.record_ride_through_transition(name, transition.t_s, transition.fields())

    def _controller_process(self, sched: _Scheduled):
        while True:
            yield _Wake(self.env, sched.period_ticks, Priority.CONTROL + sched.index)
            observation = self.observation()
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
            self._write_outputs("running")

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
            if self.outputs is not None:
                self.outputs.record_command(self.t_s, self.clock.seconds(self._now + delay_ticks), source, command)
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
            if self.outputs is not None:
                self.outputs.record_supply(self.t_s, site.name, bus, not lost)
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
            v_min_pu=self.scenario.grid.v_min_pu,
            v_max_pu=self.scenario.grid.v_max_pu,
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

    def _rating_figures(self) -> dict[str, Any]:
        """Where the ratings that loading is measured against come from (:meth:`BranchSet.rating_sources`):
        ``max_loading_rating`` for the most loaded branch, ``branch_rating_sources`` the number of
        branches per source; nothing for a grid that reports no branches."""
        if self._branches is None:
            return {}
        sources = self._branches.rating_sources(self.scenario.grid.branch_ratings)
        by_name = dict(zip(self._branches.names, sources))
        worst = self.metrics.max_loading_branch
        return {
            "max_loading_rating": by_name.get(worst) if worst is not None else None,
            "branch_rating_sources": {s: sources.count(s) for s in ("file", "default", "scenario")},
        }

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

    def _frequency_figures(self) -> dict[str, Any]:
        """The bulk system's frequency over the run (:mod:`openg2g.grid.frequency_metrics`);
        nothing without a frequency model."""
        if self._frequency is None or not self._started:
            return {}
        m = self._frequency.metrics()
        return {
            "frequency_nadir_hz": m.nadir_hz,
            "frequency_nadir_at_s": m.nadir_t_s,
            "frequency_zenith_hz": m.zenith_hz,
            "frequency_zenith_at_s": m.zenith_t_s,
            "frequency_rocof_hz_s": m.rocof_hz_s,
            "frequency_rocof_at_s": m.rocof_t_s,
            "frequency_rocof_window_s": m.rocof_window_s,
            "frequency_event_at_s": m.event_t_s,
            "frequency_settling_hz": m.settling_hz,
            "frequency_settled_at_s": m.settling_t_s,
        }

    def summary(self, status: str, error: str | None = None) -> dict[str, Any]:
        """The run's summary as written to ``summary.json``."""
        sim_time = min(self.clock.seconds(self._now), float(self.scenario.duration_s)) if self._started else 0.0
        result: dict[str, Any] = {
            "scenario": self.scenario.name,
            "status": status,
            "sim_time_s": self._grid_latest.t_s if self._grid_latest else sim_time,
            "duration_s": float(self.scenario.duration_s),
            "wall_time_s": time.perf_counter() - self._wall_start,
            **self.metrics.summary(),
            **self._rating_figures(),
            **self._disturbance_figures(),
            **self._frequency_figures(),
            **self._ride_through_figures(),
            "n_commands": self._n_commands,
            "power_caps_below_calibration": self._caps_below_calibration,
            "lowest_power_cap_w_per_gpu": self._lowest_cap_w,
            "seed": self.scenario.seed,
            "scenario_sha256": self.loaded.sha256,
            "scenario_file": str(self.loaded.path),
            "openg2g_version": __version__,
        }
        if error:
            result["error"] = error
        return result

    def _write_outputs(self, status: str, error: str | None = None) -> dict[str, Any]:
        """Write every buffered row and the summary; returns the summary written.

        :raises OutputError: the outputs could not be written; the summary then says ``failed``
            with the reason if it can still be written.
        """
        summary = self.summary(status, error)
        if self.outputs is None:
            return summary
        if self._started:
            self._record_transitions()
            for name, site in self._ride_through.items():
                self.outputs.record_ride_through(name, site.take_records())
        try:
            self.outputs.flush()
        except OutputError as exc:
            with contextlib.suppress(OutputError):
                self.outputs.write_summary(self.summary("failed", str(exc)))
            raise
        self.outputs.write_summary(summary)
        return summary

    def close(self, status: str, error: str | None = None) -> dict[str, Any]:
        """Write everything recorded so far with ``status`` and return the summary."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        return self._write_outputs(status, error)

    def run(self) -> dict[str, Any]:
        """Run to the end and return the summary; outputs are complete whatever happens.

        :raises SimulationError: the run could not continue (summary status ``failed``).
        :raises KeyboardInterrupt: interrupted (summary status ``interrupted``).
        """
        self.start()  # a failure here has nothing to save and propagates as it is
        try:
            self.run_until(self.scenario.duration_s)
        except KeyboardInterrupt as exc:
            self.close("interrupted", str(exc) or "interrupted by the user (Ctrl-C)")
            raise
        except Exception as exc:
            self.close("failed", f"{type(exc).__name__}: {exc}")
            raise
        summary = self.close("complete")
        if self.outputs is not None:
            self.outputs.write_overview()
        if self.outputs is not None and self.out_dir is not None and self.scenario.outputs.plots:
            import yaml

            from openg2g.plot.run import PlotsInterrupted, plot_run
            from openg2g.scenario.loader import resolved_scenario_text

            # the feeder map reads the grid from the scenario as run, written to the folder or not
            as_run = yaml.safe_load(resolved_scenario_text(self.loaded))
            try:
                report = plot_run(self.out_dir, self.scenario.grid.v_min_pu, self.scenario.grid.v_max_pu, as_run)
            except PlotsInterrupted as exc:
                # the run is complete; the summary says so, and which plots are there
                summary["plots"] = exc.report.as_summary()
                self.outputs.write_summary(summary)
                raise
            summary["plots"] = report.as_summary()
            self.outputs.write_summary(summary)
        return summary


def run_scenario(
    scenario: str | Path | LoadedScenario,
    out_dir: Path | str | None = None,
    overrides: Sequence[str] = (),
    progress: bool = False,
    on_start: Callable[[Simulation], None] | None = None,
) -> RunResult:
    """Load (if needed), validate and run a scenario.

    :param scenario: a path, a bundled scenario's name, or an already loaded scenario.
    :param out_dir: output directory, ``None`` for no files; it keeps the scenario as run
        (``scenario.yaml``, written first), which ``openg2g plot`` reads to redraw the run.
    :param overrides: ``dotted.key=value`` assignments (as ``openg2g run --set``).
    :param progress: progress bar on stderr.
    :param on_start: called with the simulation before it runs (tests use it to interrupt).
    """
    loaded = scenario if isinstance(scenario, LoadedScenario) else load_scenario(scenario, overrides)
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        write_resolved_scenario(loaded, out)
    sim = Simulation(loaded, out, progress=progress)
    if on_start is not None:
        on_start(sim)
    return RunResult(summary=sim.run(), out_dir=out)
