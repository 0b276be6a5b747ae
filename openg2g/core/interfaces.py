"""The three component interfaces the engine couples (datacenter, grid and controller: the abstract
:class:`DatacenterBackend`, :class:`GridBackend` and :class:`Controller`), the optional faces a
component may also show (:class:`RidesThrough`, :class:`Live`, :class:`FrequencyModel`), and the static facts they
hand each other: a site's :class:`SiteInfo` (its models' :class:`ModelInfo` with their
:class:`CurveFits`, its :class:`TrainingInfo` and :class:`RideThroughInfo`), the grid's
:class:`RegulatorInfo`, and the :class:`ControlContext` a controller starts with.

Components never import simpy: the engine calls ``step`` at each of the component's instants and
routes commands to ``apply``. Time is in seconds (``t_s``) everywhere.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

import numpy as np

from openg2g.core.commands import Actuator, Command
from openg2g.core.state import (
    BranchSet,
    DatacenterSeries,
    DatacenterState,
    GridState,
    Observation,
    RideThroughState,
    StorageUnit,
)

__all__ = [
    "ControlContext",
    "Controller",
    "CurveFits",
    "DatacenterBackend",
    "FrequencyModel",
    "GridBackend",
    "Live",
    "LogisticParams",
    "ModelInfo",
    "RegulatorInfo",
    "RideThroughInfo",
    "RidesThrough",
    "ScheduledEvent",
    "SiteInfo",
    "StoredCurve",
    "TrainingInfo",
]


LogisticParams = tuple[float, float, float, float]
"""``(l_span, x0, k, b0)`` of ``y = b0 + l_span / (1 + exp(-k (x - x0)))``, ``x = log2(batch size)``."""


@dataclass(frozen=True)
class StoredCurve:
    """One curve of a measured quantity against ``x = log2(batch size)``: a logistic where one fits
    the measured means, else the monotone piecewise cubic (PCHIP) through them. Exactly one is set.

    :param logistic: the logistic's parameters, in the units of the quantity.
    :param pchip: the cubic's coefficients: row ``j`` (0-3) holds, for each interval ``i`` between
        consecutive measured ``x``, the coefficient of ``(x - x_i) ** (3 - j)``; beyond the ends
        the end intervals' cubics continue.
    """

    logistic: LogisticParams | None = None
    pchip: tuple[tuple[float, ...], ...] | None = None

    def __post_init__(self) -> None:
        if (self.logistic is None) == (self.pchip is None):
            raise ValueError("a stored curve is either a logistic or a PCHIP cubic")


@dataclass(frozen=True)
class CurveFits:
    """A model's curves of per-batch means against ``x = log2(batch size)``, fitted when the trace
    library was built (:mod:`openg2g.datacenter.fits`) so that controllers need not fit at run time.

    They describe the measured means at ``batch_sizes`` only: they apply to a :class:`ModelInfo`
    with the same ``batch_sizes``.

    :param batch_sizes: batch sizes fitted, ascending.
    :param power_w: mean GPU power per replica (W).
    :param itl_s: mean inter-token latency (s).
    :param throughput_tok_s: output throughput per replica (tok/s).
    """

    batch_sizes: tuple[int, ...]
    power_w: StoredCurve
    itl_s: StoredCurve
    throughput_tok_s: StoredCurve


@dataclass(frozen=True)
class ModelInfo:
    """Static facts about one model served at a site, for controllers to plan with.

    The per-batch tuples are measured means per replica from the trace library, aligned with
    ``batch_sizes`` (ascending).

    :param model: model name.
    :param gpus_per_replica: GPUs per replica (tensor parallel degree).
    :param replicas: configured replica count.
    :param batch_sizes: measured batch sizes, the only ones a controller may set.
    :param power_w: mean GPU power per replica at each batch size (W).
    :param itl_s: mean inter-token latency at each batch size (s).
    :param throughput_tok_s: output throughput per replica at each batch size (tok/s).
    :param itl_deadline_s: ITL deadline (s), ``None`` if none.
    :param initial_batch_size: batch size at the start of the run.
    :param curve_fits: the trace library's fits of these means, ``None`` if it has none for
        these batch sizes (controllers then fit them).
    :param miss_fraction: fraction of tokens over the ITL deadline at each batch size in steady
        state without a power cap, as the site will report it (the trace library's ITL mixture
        evaluated at the deadline; 0 without a deadline); empty when the site cannot tell.
    :param power_cap_range_w: lowest and highest power cap the model's GPUs accept (W per GPU),
        ``None`` when the site cannot cap them.
    """

    model: str
    gpus_per_replica: int
    replicas: int
    batch_sizes: tuple[int, ...]
    power_w: tuple[float, ...]
    itl_s: tuple[float, ...]
    throughput_tok_s: tuple[float, ...]
    itl_deadline_s: float | None
    initial_batch_size: int
    curve_fits: CurveFits | None = None
    miss_fraction: tuple[float, ...] = ()
    power_cap_range_w: tuple[float, float] | None = None


@dataclass(frozen=True)
class TrainingInfo:
    """A site's training job as its operator announces it: when it runs and how much it draws.

    :param start_s: job start (s); it draws power in ``[start_s, end_s)``.
    :param end_s: job end (s).
    :param gpus: GPUs running the job.
    :param mean_power_w: mean GPU power of the whole job once started (W).
    :param peak_power_w: largest GPU power of the whole job (W).
    """

    start_s: float
    end_s: float
    gpus: int
    mean_power_w: float
    peak_power_w: float


@dataclass(frozen=True)
class RideThroughInfo:
    """A site's ride-through as a controller may plan with it (its spec:
    :mod:`openg2g.datacenter.ridethrough`).

    :param blocks: block name -> its share of the site's load (0-1), in the order listed.
    :param actions: block name -> ``"ups"`` or ``"trip"``.
    :param return_mode: ``"auto"`` (blocks return by themselves) or ``"commanded"`` (each waits
        for a :class:`~openg2g.core.commands.ReleaseBlock`).
    :param ramp_s: the return ramp of a block released without its own (s).
    """

    blocks: Mapping[str, float]
    actions: Mapping[str, str]
    return_mode: str
    ramp_s: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "blocks", MappingProxyType(dict(self.blocks)))
        object.__setattr__(self, "actions", MappingProxyType(dict(self.actions)))


@dataclass(frozen=True)
class SiteInfo:
    """Static facts about one datacenter site.

    :param site: site name.
    :param bus: feeder bus it connects to (three-phase).
    :param models: model name -> facts.
    :param power_factor: facility power factor (lagging, 0-1].
    :param pue: power usage effectiveness used for the non-GPU overhead.
    :param training: the site's training job, ``None`` if it runs none.
    :param gpu_capacity: GPUs the site holds (inference and training together), ``None`` when it
        does not tell.
    :param ride_through: its ride-through, ``None`` for a site without one.
    """

    site: str
    bus: str
    models: Mapping[str, ModelInfo]
    power_factor: float
    pue: float
    training: TrainingInfo | None = None
    gpu_capacity: int | None = None
    ride_through: RideThroughInfo | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", MappingProxyType(dict(self.models)))


@dataclass(frozen=True)
class RegulatorInfo:
    """A regulator bank: name, regulated phases and tap step range; ``ganged`` when its phases share
    one tap (a multi-phase transformer: a tap command gives every phase the same step)."""

    bank: str
    phases: tuple[str, ...]
    min_tap: int
    max_tap: int
    step_pu: float
    ganged: bool = False


@dataclass(frozen=True)
class ScheduledEvent:
    """A scenario event known in advance: ``command`` fires at ``t_s`` (s)."""

    t_s: float
    command: Command


@dataclass(frozen=True)
class ControlContext:
    """Everything static a controller may know when a run starts.

    :param sites: site name -> facts.
    :param bus_phases: monitored bus-phases, in the order of ``GridState.v_pu``.
    :param regulators: bank name -> facts.
    :param v_min_pu: lower voltage limit (pu).
    :param v_max_pu: upper voltage limit (pu).
    :param dt_s: the controller's own period (s).
    :param storages: battery names the controller may command.
    :param events: the scenario's scheduled events, by time: a forecast a controller may plan with
        (read-only; the engine fires them whatever the controller does).
    :param branches: the lines and transformers whose loading ``GridState.branch_loading_pct``
        reports (names and ratings), ``None`` when the grid reports none.
    :param storage_units: battery name -> its fixed facts (rating, capacity, state-of-charge
        limits), for the batteries of ``storages``; empty when the grid does not tell.
    :param f0_hz: the bulk system's nominal frequency (Hz) when the scenario models its frequency
        (``grid.frequency``; ``Observation.f_hz`` then follows it), else ``None``.
    """

    sites: Mapping[str, SiteInfo]
    bus_phases: tuple[str, ...]
    regulators: Mapping[str, RegulatorInfo]
    v_min_pu: float
    v_max_pu: float
    dt_s: float
    storages: tuple[str, ...] = field(default=())
    events: tuple[ScheduledEvent, ...] = field(default=())
    branches: BranchSet | None = None
    storage_units: Mapping[str, StorageUnit] = field(default_factory=dict)
    f0_hz: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "sites", MappingProxyType(dict(self.sites)))
        object.__setattr__(self, "regulators", MappingProxyType(dict(self.regulators)))
        object.__setattr__(self, "storage_units", MappingProxyType(dict(self.storage_units)))


class DatacenterBackend(ABC):
    """A datacenter site: produces per-phase power and serving metrics each step.

    Implementers set ``name`` and return :class:`SiteInfo` from :meth:`info`.
    """

    name: str
    supplied: bool = True
    """False while the grid has no path from a source to the site's bus (:meth:`set_supply`)."""

    @abstractmethod
    def info(self) -> SiteInfo:
        """Static facts about the site."""

    @abstractmethod
    def reset(self, seed: int) -> None:
        """Return to the initial state; all randomness is drawn from ``seed``."""

    @abstractmethod
    def step(self, t_s: float, dt_s: float) -> DatacenterState:
        """Advance over ``(t_s - dt_s, t_s]`` and return the state at ``t_s``."""

    def step_block(self, t_s: np.ndarray, dt_s: float) -> DatacenterSeries:
        """Advance over consecutive steps ending at ``t_s`` (ascending, ``dt_s`` apart).

        The engine calls this between two instants at which a command can arrive, so nothing but
        time changes within the block. It must equal calling :meth:`step` at each time;
        vectorized backends override it, the default does exactly that. While the site has no
        supply (:attr:`supplied` False) it returns the series of a site cut off
        (:meth:`DatacenterSeries.without_supply`); so must an override.
        """
        series = DatacenterSeries.from_states([self.step(float(t), dt_s) for t in t_s])
        return series if self.supplied else series.without_supply()

    def set_supply(self, supplied: bool, t_s: float) -> None:
        """The grid lost (``supplied=False``) or regained supply at the site's bus at ``t_s``.

        The engine calls this at the start of a run (after :meth:`reset`) and whenever the supply
        changes; steps after ``t_s`` draw and serve nothing while the site has none. Commands
        keep acting on the site's commanded state meanwhile, which it resumes when supply returns.
        """
        self.supplied = supplied

    grid_feedback: bool = False
    """True for a site whose draw follows the grid's voltage and frequency (a ride-through:
    :mod:`openg2g.datacenter.ridethrough`): the engine then solves the grid one step at a time and
    calls :meth:`observe_grid` after every solve."""

    def observe_grid(self, t_s: float, dt_s: float, v_pu: np.ndarray, f_hz: float | None) -> None:
        """What the grid solve at ``t_s`` found at the site: the phase-to-neutral voltage
        magnitudes at its bus (pu, phases a, b, c; 0 where the bus has no supply) and the bulk
        system's frequency (Hz; ``None`` when the scenario models none: the frequency is then
        taken as nominal). The solve stands for the step ``(t_s - dt_s, t_s]``; what the site makes
        of it applies to its steps after ``t_s``. Called for a site with :attr:`grid_feedback`
        only; the default ignores it."""

    @abstractmethod
    def apply(self, command: Command, t_s: float) -> None:
        """Carry out a datacenter command at ``t_s``.

        :raises CommandError: the command is malformed or outside the site's limits.
        """

    def close(self) -> None:
        """Release what the run held (servers' load, meters); the engine calls it when a run ends,
        however it ends. The next :meth:`reset` starts the site again. The default holds nothing."""


@runtime_checkable
class Live(Protocol):
    """A datacenter site that measures the real world as the run goes
    (:class:`openg2g.datacenter.live.site.LiveSite`: inference servers and GPU meters): the
    engine then paces the whole run to the wall clock, one simulated second per second, and its
    steps report what was measured over their windows. Its models' states carry ``in_flight`` and
    ``measured_power_w``."""

    max_lag_s: float
    """How far (s) the run may fall behind the wall clock before it stops (it cannot keep up)."""

    def go_live(self, origin_s: float) -> None:
        """The run's ``t = 0`` is ``time.monotonic() == origin_s``: the step ending at ``t_s``
        covers the wall-clock window ``(origin_s + t_s - dt_s, origin_s + t_s]``. Called once per
        run, after :meth:`DatacenterBackend.reset`, just before the first instant."""


class ModeChange(Protocol):
    """A ride-through block's change of mode, as the events table records it."""

    t_s: float
    block: str

    @property
    def reason(self) -> str:
        """The change in words, for a log line."""

    def fields(self) -> Mapping[str, Any]:
        """The change's fields for the events table (block, from and to mode, cause, ...)."""


@runtime_checkable
class RidesThrough(Protocol):
    """A datacenter site whose load rides through disturbances block by block
    (:class:`openg2g.datacenter.ridethrough_site.RideThroughSite`): the engine shows its blocks to
    controllers and records their changes, records and summary."""

    @property
    def ride_through_state(self) -> RideThroughState:
        """The blocks now (for controllers' observations)."""

    def take_records(self) -> dict[str, np.ndarray]:
        """The per-step, per-block records since the last call."""

    def take_transitions(self) -> Sequence[ModeChange]:
        """The blocks' changes of mode since the last call."""

    def summary(self) -> dict[str, Any]:
        """The site's ride-through figures for the run's summary."""


class FrequencyModel(Protocol):
    """The bulk system's frequency, stepped by the engine with the change of the grid's draw
    (:class:`openg2g.grid.frequency.SystemFrequency`)."""

    @property
    def f0_hz(self) -> float:
        """Nominal frequency (Hz): the frequency at the start."""

    def reset(self) -> None:
        """Back to nominal frequency at ``t = 0``, no load change (the engine calls it at each start)."""

    def step(self, dt_s: float, delta_p_w: float, t_s: float | None = None) -> float:
        """Advance ``dt_s`` (s) with the draw ``delta_p_w`` (W) above its value at the start;
        returns the frequency at the step's end (Hz)."""

    def figures(self) -> dict[str, Any]:
        """Nadir, zenith, RoCoF and settling of the run so far, for its summary."""


class GridBackend(ABC):
    """A distribution feeder: solves the power flow for the datacenter loads it is given."""

    @abstractmethod
    def bus_phases(self) -> tuple[str, ...]:
        """Monitored bus-phases ``"<bus>.<phase>"``, in the order of ``GridState.v_pu``."""

    @abstractmethod
    def regulators(self) -> Mapping[str, RegulatorInfo]:
        """Regulator banks by name."""

    @abstractmethod
    def storages(self) -> tuple[str, ...]:
        """Battery names."""

    def storage_units(self) -> Mapping[str, StorageUnit]:
        """Battery name -> its fixed facts, for the batteries of :meth:`storages`; none by default
        (a grid that does not tell)."""
        return {}

    @abstractmethod
    def reset(self, seed: int) -> None:
        """Return to the initial state (taps, switches, scales, storage state of charge)."""

    @abstractmethod
    def solve(self, t_s: float, loads: Mapping[str, DatacenterState], dt_s: float) -> GridState:
        """Solve the power flow at ``t_s`` with the given datacenter site loads.

        :param loads: site name -> the datacenter state whose ``p_w``/``q_var`` to draw.
        :param dt_s: time since the previous solve (s), for storage energy and regulator delays.
        :raises PowerFlowError: the power flow did not converge (message names time and feeder).
            What a step that does not converge does is the grid's policy, and the grid's alone
            (the bundled grids' ``on_nonconvergence``): raise, or return
            :meth:`GridState.not_converged` and let the run go on; the engine passes either on.
        """

    def solve_batch(
        self, t_s: Sequence[float], loads: Sequence[Mapping[str, DatacenterState]], dt_s: float
    ) -> list[GridState]:
        """Solve several steps during which only the loads change. Equals solving one by one.

        Backends with a batch solver override this; the default loops over :meth:`solve`.
        """
        return [self.solve(t, load, dt_s) for t, load in zip(t_s, loads)]

    def can_batch(self) -> bool:
        """True when steps are independent given loads (no automatic controls with memory)."""
        return False

    def unsupplied_sites(self) -> frozenset[str]:
        """The datacenter sites whose bus has no path to a source at the switching in force (a
        line out of service cut it off), so they cannot draw; none by default (a grid whose
        switching never changes, or that does not tell)."""
        return frozenset()

    def branches(self) -> BranchSet | None:
        """The lines and transformers whose currents every :class:`GridState` reports (the same
        object as its ``branches``), or ``None`` for a grid that reports none (the default)."""
        return None

    def controlled_capacitors(self) -> tuple[str, ...]:
        """The capacitors under automatic control, whose states every :class:`GridState` reports
        (``capacitors``); none by default."""
        return ()

    @abstractmethod
    def apply(self, command: Command, t_s: float) -> None:
        """Carry out a grid command at ``t_s``.

        :raises CommandError: unknown element or value outside its limits.
        """

    @abstractmethod
    def voltage_sensitivity(self, bus: str) -> np.ndarray:
        """dV/dP of each monitored bus-phase w.r.t. per-phase active power at ``bus`` (pu/W).

        Shape ``(len(bus_phases()), 3)``; reactive power is assumed to move with P at the
        attached site's power factor. Valid at the last solved operating point and taps.
        """

    def loading_sensitivity(self, bus: str) -> np.ndarray:
        """d(loading)/dP of each branch of :meth:`branches` w.r.t. per-phase active power at
        ``bus`` (% per W), as :meth:`voltage_sensitivity` (same operating point, same reactive
        power assumption): the derivative of each branch's most loaded conductor.

        Shape ``(len(branches().names), 3)``. Grids that report branches override this; the
        default (a grid without branches) refuses.

        :raises NotImplementedError: the grid reports no branches.
        """
        raise NotImplementedError(f"{type(self).__name__} reports no branches, so no loading sensitivity")


class Controller(ABC):
    """A control policy: reads an observation, returns commands.

    Subclasses implement :meth:`step`; :meth:`reset` receives the static context at the start of
    each run. A controller never touches backends: everything it knows arrives in the context
    and the observation, everything it does leaves as commands.
    """

    name: str = "controller"

    def reset(self, context: ControlContext, seed: int) -> None:
        """Prepare for a run; the default stores the context as ``self.context``."""
        self.context = context

    def actuators(self) -> tuple[Actuator, ...] | None:
        """The settings this controller may write in the run it was last reset for.

        A run refuses two controllers whose settings overlap before anything is simulated. The
        default, ``None``, says "unknown": the engine then checks each command as it is sent, and
        the first one writing a setting another controller owns stops the run.
        """
        return None

    @abstractmethod
    def step(self, observation: Observation) -> list[Command]:
        """Return the commands to send at this control step (possibly none)."""
