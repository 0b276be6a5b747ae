"""The co-simulation engine: one simpy process per component, on an exact integer clock.

Order within one instant (fixed; simpy event priorities enforce it):

1. scenario events scheduled for this instant fire;
2. commands whose communication delay ends now take effect;
3. each datacenter site samples (sites in scenario order) over the period that just ended;
4. the grid solves with what the datacenters produced since its last solve: the mean of those
   samples (``grid.load_aggregation: mean``, default) or the last one (``last``);
5. controllers observe and return commands, in the order the scenario lists them; a command with
   no delay takes effect at once (so the next datacenter sample sees it), one with a delay at
   step 2 of the instant ``delay_s`` later;
6. outputs are flushed every ``outputs.flush_every_s``.

Components run first at their own first period (a datacenter with 0.1 s period first samples at
0.1 s over (0, 0.1]); events at ``t_s = 0`` apply before anything runs.

When ``grid.batch`` is on and the grid allows it (no controls with memory), grid steps between
two instants at which anything can change the grid (a control step, an event, a delivered
command, an output flush, the end) are solved in one batch call; results equal step-by-step
solving because nothing but the loads changes in between.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import simpy
from simpy.events import Event

from openg2g import __version__
from openg2g.core.commands import Command, ShiftReplicas, is_datacenter_command
from openg2g.core.errors import CommandError, ControllerError, PowerFlowError, SimulationError
from openg2g.core.protocols import ControlContext, Controller, DatacenterBackend, GridBackend
from openg2g.core.state import DatacenterState, GridState, Observation
from openg2g.engine.clock import Clock
from openg2g.engine.metrics import RunMetrics
from openg2g.engine.outputs import RunOutputs
from openg2g.scenario.loader import LoadedScenario, build_event_command, load_scenario
from openg2g.scenario.schema import ControllerSpec

__all__ = ["Phase", "RunResult", "Simulation", "build_components", "run_scenario"]


class Phase:
    """simpy priorities of the steps within one instant (lower runs first)."""

    EVENTS = 10
    COMMANDS = 20
    DATACENTER = 30
    GRID = 40
    CONTROL = 50
    FLUSH = 90
    END = 100


class _Wake(Event):
    """A timeout with an explicit priority, so same-instant processes run in :class:`Phase` order."""

    def __init__(self, env: simpy.Environment, delay: int, priority: int):
        super().__init__(env)
        self._ok = True
        self._value = None
        env.schedule(self, priority, delay)


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


def build_components(
    loaded: LoadedScenario,
) -> tuple[list[DatacenterBackend], GridBackend, list[Controller]]:
    """Build the datacenter sites, the grid and the controllers a validated scenario describes."""
    from openg2g.control.registry import build_controller
    from openg2g.datacenter.library import TraceLibrary
    from openg2g.datacenter.replay import ReplayDatacenter
    from openg2g.grid.backend import FeederGrid

    sc = loaded.scenario
    sites: list[DatacenterBackend] = []
    for spec in sc.datacenters:
        library = TraceLibrary.load(None if spec.traces == "bundled" else loaded.base_dir / spec.traces)
        sites.append(ReplayDatacenter.from_spec(spec, library))
    grid = FeederGrid.from_spec(sc.grid, sc.datacenters, loaded.base_dir)
    controllers = [build_controller(spec, loaded.base_dir) for spec in sc.controllers]
    return sites, grid, controllers


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
        components: tuple[list[DatacenterBackend], GridBackend, list[Controller]] | None = None,
    ):
        self.loaded = loaded
        sc = loaded.scenario
        self.scenario = sc
        self.sites, self.grid, controllers = components or build_components(loaded)
        self._site_index = {s.name: s for s in self.sites}
        periods = sc.periods
        if len(controllers) < len(sc.controllers):
            raise SimulationError(f"the scenario lists {len(sc.controllers)} controllers but {len(controllers)} were given")
        # controllers given beyond the scenario's list (e.g. from a notebook) run every control_s, no delay
        specs = [*sc.controllers, *[ControllerSpec(kind=c.name) for c in controllers[len(sc.controllers) :]]]
        controller_periods = [c.period_s or periods.control_s for c in specs]
        times = [periods.datacenter_s, periods.grid_s, periods.control_s, sc.duration_s, *controller_periods]
        times += [c.delay_s for c in specs] + [e.t_s for e in sc.events]
        self.clock = Clock(times)
        self._dc_ticks = self.clock.ticks(periods.datacenter_s)
        self._grid_ticks = self.clock.ticks(periods.grid_s)
        self._end_ticks = self.clock.ticks(sc.duration_s)
        self._control_ticks = self.clock.ticks(periods.control_s)
        self._flush_ticks = max(self._grid_ticks, self._grid_ticks * round(sc.outputs.flush_every_s / float(periods.grid_s)))
        self._controllers = [
            _Scheduled(ctrl, self.clock.ticks(p), self.clock.ticks(spec.delay_s), i)
            for i, (ctrl, p, spec) in enumerate(zip(controllers, controller_periods, specs))
        ]
        self._events = sorted(
            ((self.clock.ticks(e.t_s), i, build_event_command(e.command, e.fields())) for i, e in enumerate(sc.events)),
            key=lambda x: (x[0], x[1]),
        )
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
        )

    def start(self) -> None:
        """Reset every component and schedule the processes; nothing runs yet."""
        sc = self.scenario
        seed = sc.seed
        for i, site in enumerate(self.sites):
            site.reset(seed + 1000 * (i + 1))
        self.grid.reset(seed)
        for sched in self._controllers:
            sched.controller.reset(self.context(self.clock.seconds(sched.period_ticks)), seed)
        self.env = simpy.Environment()
        self.metrics = RunMetrics(sc.grid.v_min_pu, sc.grid.v_max_pu)
        banks = tuple(self.grid.regulators())
        self.outputs = (
            RunOutputs(self.out_dir, self._bus_phases, banks, sc.outputs.voltages == "all") if self.out_dir else None
        )
        self._dc_latest: dict[str, DatacenterState] = {}
        self._dc_window: dict[str, list[DatacenterState]] = {s.name: [] for s in self.sites}
        self._grid_latest: GridState | None = None
        self._grid_pending: list[tuple[float, dict[str, DatacenterState]]] = []
        self._batching = sc.grid.batch and self.grid.can_batch()
        self._sensitivity_cache: dict[str, np.ndarray] = {}
        self._stop_ticks = self._end_ticks
        self._n_commands = 0
        self._wall_start = time.perf_counter()
        self._bar = None
        if self._progress:
            from tqdm import tqdm

            self._bar = tqdm(total=float(sc.duration_s), unit="sim s", desc=sc.name, leave=False, dynamic_ncols=True)
        self.env.process(self._event_process())
        for i, site in enumerate(self.sites):
            self.env.process(self._datacenter_process(i, site))
        self.env.process(self._grid_process())
        for sched in self._controllers:
            self.env.process(self._controller_process(sched))
        if self.outputs is not None:
            self.env.process(self._flush_process())
        self._started = True
        self._ran = False

    # ----------------------------------------------------------------------------- processes
    @property
    def t_s(self) -> float:
        """Current simulation time (s)."""
        return self.clock.seconds(self.env.now)

    def _event_process(self):
        for ticks, _, command in self._events:
            if ticks > self.env.now:
                yield _Wake(self.env, ticks - self.env.now, Phase.EVENTS)
            self._apply(command, f"event {type(command).__name__}")
            if self.outputs is not None:
                self.outputs.record_event(self.t_s, command)

    def _datacenter_process(self, index: int, site: DatacenterBackend):
        dt_s = self.clock.seconds(self._dc_ticks)
        while True:
            yield _Wake(self.env, self._dc_ticks, Phase.DATACENTER + index)
            state = site.step(self.t_s, dt_s)
            self._dc_latest[site.name] = state
            self._dc_window[site.name].append(state)
            if index == len(self.sites) - 1:
                self.metrics.add_datacenters(self._dc_latest, dt_s)
            if self.outputs is not None:
                self.outputs.record_datacenter(state)

    def _grid_loads(self) -> dict[str, DatacenterState]:
        loads: dict[str, DatacenterState] = {}
        for name, window in self._dc_window.items():
            if not window:
                continue
            last = window[-1]
            if self.scenario.grid.load_aggregation == "mean" and len(window) > 1:
                loads[name] = DatacenterState(
                    site=name,
                    t_s=last.t_s,
                    p_w=np.mean([s.p_w for s in window], axis=0),
                    q_var=np.mean([s.q_var for s in window], axis=0),
                    models=last.models,
                    training_power_w=last.training_power_w,
                    online=last.online,
                )
            else:
                loads[name] = last
            window.clear()
        return loads

    def _grid_process(self):
        while True:
            yield _Wake(self.env, self._grid_ticks, Phase.GRID)
            loads = self._grid_loads()
            if self._batching:
                self._grid_pending.append((self.t_s, loads))
                if self._is_barrier(self.env.now):
                    self._flush_grid()
            else:
                self._on_grid_states([self._solve(self.t_s, loads)])

    def _is_barrier(self, ticks: int) -> bool:
        # Windows close at every control_s whether or not a controller runs, so adding a
        # controller that does nothing leaves the batching, and so every number, unchanged.
        if ticks >= self._stop_ticks or ticks % self._control_ticks == 0:
            return True
        return any(ticks % s.period_ticks == 0 for s in self._controllers)

    def _solve(self, t_s: float, loads: dict[str, DatacenterState]) -> GridState:
        dt_s = self.clock.seconds(self._grid_ticks)
        try:
            return self.grid.solve(t_s, loads, dt_s)
        except PowerFlowError:
            if self.scenario.grid.on_nonconvergence != "flag":
                raise
            return self._flagged_state(t_s)

    def _flagged_state(self, t_s: float) -> GridState:
        nan3 = np.full(3, np.nan)
        taps = self._grid_latest.taps if self._grid_latest else {}
        return GridState(t_s, self._bus_phases, np.full(len(self._bus_phases), np.nan), taps, nan3, nan3, float("nan"), False)

    def _flush_grid(self) -> None:
        if not self._grid_pending:
            return
        times = [t for t, _ in self._grid_pending]
        loads = [load for _, load in self._grid_pending]
        self._grid_pending = []
        dt_s = self.clock.seconds(self._grid_ticks)
        try:
            states = self.grid.solve_batch(times, loads, dt_s)
        except PowerFlowError:
            if self.scenario.grid.on_nonconvergence != "flag":
                raise
            states = [self._solve(t, load) for t, load in zip(times, loads)]
        self._on_grid_states(states)

    def _on_grid_states(self, states: Sequence[GridState]) -> None:
        dt_s = self.clock.seconds(self._grid_ticks)
        for state in states:
            violation = self.metrics.add_grid(state, dt_s)
            if self.outputs is not None:
                self.outputs.record_grid(state, violation)
            self._grid_latest = state  # per state: a Ctrl-C inside this loop leaves the summary in step
        self._sensitivity_cache.clear()
        if self._bar is not None:
            self._bar.update(states[-1].t_s - self._bar.n)

    def _controller_process(self, sched: _Scheduled):
        while True:
            yield _Wake(self.env, sched.period_ticks, Phase.CONTROL + sched.index)
            observation = self.observation()
            commands = sched.controller.step(observation)
            self._check_commands(sched.controller.name, commands)
            self._dispatch(commands, sched.controller.name, sched.delay_ticks)

    def _flush_process(self):
        while True:
            yield _Wake(self.env, self._flush_ticks, Phase.FLUSH)
            self._flush_outputs("running")

    # ----------------------------------------------------------------------------- commands
    @staticmethod
    def _check_commands(source: str, commands: Any) -> None:
        if not isinstance(commands, list):
            raise ControllerError(
                f"controller {source!r} returned {type(commands).__name__}; step() must return a list of commands"
            )
        for c in commands:
            if not isinstance(c, Command):
                raise ControllerError(f"controller {source!r} returned {c!r} ({type(c).__name__}), which is not a Command")

    def _dispatch(self, commands: Sequence[Command], source: str, delay_ticks: int) -> None:
        for command in commands:
            self._n_commands += 1
            if self.outputs is not None:
                self.outputs.record_command(self.t_s, self.clock.seconds(self.env.now + delay_ticks), source, command)
            if delay_ticks == 0:
                self._apply(command, f"controller {source!r}")
            else:
                self.env.process(self._deliver_later(command, source, delay_ticks))

    def _deliver_later(self, command: Command, source: str, delay_ticks: int):
        yield _Wake(self.env, delay_ticks, Phase.COMMANDS)
        self._apply(command, f"controller {source!r}")

    def _apply(self, command: Command, source: str) -> None:
        try:
            if is_datacenter_command(command):
                # a shift is offered to the destination first, so a refusal leaves both sites unchanged
                targets = [command.to_site, command.site] if isinstance(command, ShiftReplicas) else [command.site]
                for name in targets:
                    self._site_index[name].apply(command, self.t_s)
            else:
                self._flush_grid()
                self.grid.apply(command, self.t_s)
                self._sensitivity_cache.clear()
        except (CommandError, KeyError) as exc:
            raise SimulationError(f"t={self.t_s:g} s: {command} from {source} was rejected: {exc}") from exc

    def send(self, commands: Sequence[Command], source: str = "agent", delay_s: Fraction | float = 0) -> None:
        """Send commands from outside the scenario's controllers (e.g. an RL agent) at the current time."""
        self._check_commands(source, list(commands))
        self._dispatch(list(commands), source, self.clock.ticks(Fraction(str(delay_s))))

    # ----------------------------------------------------------------------------- observing
    def _sensitivity(self, site: str) -> np.ndarray:
        if site not in self._sensitivity_cache:
            bus = self._site_index[site].info().bus
            matrix = np.array(self.grid.voltage_sensitivity(bus))
            matrix.flags.writeable = False
            self._sensitivity_cache[site] = matrix
        return self._sensitivity_cache[site]

    def observation(self) -> Observation:
        """What a controller sees now: latest datacenter states and grid state."""
        self._flush_grid()
        if self._grid_latest is None:
            raise SimulationError(f"t={self.t_s:g} s: no grid solution yet to observe")
        return Observation(
            t_s=self.t_s,
            datacenters=dict(self._dc_latest),
            grid=self._grid_latest,
            v_min_pu=self.scenario.grid.v_min_pu,
            v_max_pu=self.scenario.grid.v_max_pu,
            _sensitivity=self._sensitivity,
        )

    # ----------------------------------------------------------------------------- running
    def run_until(self, t_s: Fraction | float) -> None:
        """Advance through every instant up to and including ``t_s`` (capped at the scenario's end)."""
        if not self._started:
            self.start()
        target = min(self.clock.ticks(Fraction(str(t_s))), self._end_ticks)
        if target < self.env.now:
            raise SimulationError(f"cannot run back to {t_s} s from {self.t_s} s")
        self._stop_ticks = target
        if target > self.env.now or not self._ran:
            # a wake-up after every phase of the target instant: the run ends with `now == target`
            self.env.run(until=_Wake(self.env, target - self.env.now, Phase.END))
            self._ran = True
        self._flush_grid()

    @property
    def done(self) -> bool:
        """True once the scenario's end has been simulated."""
        return self._started and self.env.now >= self._end_ticks

    def summary(self, status: str, error: str | None = None) -> dict[str, Any]:
        """The run's summary as written to ``summary.json``."""
        sim_time = min(self.clock.seconds(self.env.now), float(self.scenario.duration_s)) if self._started else 0.0
        result: dict[str, Any] = {
            "scenario": self.scenario.name,
            "status": status,
            "sim_time_s": self._grid_latest.t_s if self._grid_latest else sim_time,
            "duration_s": float(self.scenario.duration_s),
            "wall_time_s": time.perf_counter() - self._wall_start,
            **self.metrics.summary(),
            "n_commands": self._n_commands,
            "seed": self.scenario.seed,
            "scenario_sha256": self.loaded.sha256,
            "scenario_file": str(self.loaded.path),
            "openg2g_version": __version__,
        }
        if error:
            result["error"] = error
        return result

    def _flush_outputs(self, status: str, error: str | None = None) -> None:
        if self.outputs is None:
            return
        self._flush_grid()
        self.outputs.flush()
        self.outputs.write_summary(self.summary(status, error))

    def close(self, status: str, error: str | None = None) -> dict[str, Any]:
        """Write everything recorded so far with ``status`` and return the summary."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self.outputs is not None:
            self.outputs.flush()
            self.outputs.write_summary(self.summary(status, error))
        return self.summary(status, error)

    def run(self) -> dict[str, Any]:
        """Run to the end and return the summary; outputs are complete whatever happens.

        :raises SimulationError: the run could not continue (summary status ``failed``).
        :raises KeyboardInterrupt: interrupted (summary status ``interrupted``).
        """
        self.start()  # a failure here has nothing to save and propagates as it is
        try:
            self.run_until(self.scenario.duration_s)
        except KeyboardInterrupt:
            self.close("interrupted", "interrupted by the user (Ctrl-C)")
            raise
        except Exception as exc:
            self.close("failed", f"{type(exc).__name__}: {exc}")
            raise
        summary = self.close("complete")
        if self.outputs is not None and self.scenario.outputs.plots:
            from openg2g.plot.run import plot_run

            plot_run(self.out_dir, v_min_pu=self.scenario.grid.v_min_pu, v_max_pu=self.scenario.grid.v_max_pu)
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
    :param out_dir: output directory, ``None`` for no files.
    :param overrides: ``dotted.key=value`` assignments (as ``openg2g run --set``).
    :param progress: progress bar on stderr.
    :param on_start: called with the simulation before it runs (tests use it to interrupt).
    """
    loaded = scenario if isinstance(scenario, LoadedScenario) else load_scenario(scenario, overrides)
    out = Path(out_dir) if out_dir is not None else None
    sim = Simulation(loaded, out, progress=progress)
    if on_start is not None:
        on_start(sim)
    return RunResult(summary=sim.run(), out_dir=out)
