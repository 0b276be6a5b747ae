"""``FeederGrid``: the grid backend on a distribution feeder.

Each solve draws the datacenter sites as wye constant-PQ loads at their buses, on top of the
feeder's own loads (OpenDSS load models, times the load scale) and generation (the file's, at its
snapshot output, and the generators that hold their voltage, their reactive power solved with the
power flow: :mod:`~openg2g.grid.feeder.regulated`), PV, storage and extra loads, and reports the
voltage magnitude of every monitored bus-phase.

Solvers (``GridSpec.solver``):

- ``exact`` (default): the phase-frame power flow of :mod:`openg2g.grid.feeder.powerflow` (full
  phase impedance matrices, single- and two-phase laterals, per-phase regulator taps, delta
  loads), dense (:mod:`~openg2g.grid.feeder.solver`) below :data:`SPARSE_MIN_NODES` nodes and
  sparse (:mod:`~openg2g.grid.feeder.sparse`) from there on. It matches OpenDSS to better than
  1e-6 pu on the bundled feeders (tests/grid).
  power-grid-model was measured and not used: its three-phase-only nodes, wye-only asymmetric
  loads and single-ratio transformers cannot represent these feeders exactly, and this solver
  is faster on them (bench/bench_grid.py).
- ``pandapower``: pandapower ``runpp_3ph`` on the feeder's sequence-frame network, a reference
  mode that is approximate (loses untransposed coupling, treats laterals as three-phase, one tap
  per bank, constant-PQ loads) and slow; see :mod:`openg2g.grid.feeder.pandapower_mode`.

``FeederGrid`` composes the parts, one module each: :mod:`~openg2g.grid.feeder.regulators` (banks, tap
steps, automatic band control), :mod:`~openg2g.grid.feeder.storage` (batteries),
:mod:`~openg2g.grid.feeder.injections` (sites, PV, extra loads, scales and profiles, the power at the PQ
ports); dV/dP comes from the solver's own Jacobian
(:meth:`~openg2g.grid.feeder.powerflow.PowerFlowNetwork.voltage_sensitivity`). It owns the compiled network and the switching state
(taps, capacitors, lines) in force, and carries out commands, one handler per command type.

Regulators are fixed or ``auto`` (see :mod:`openg2g.grid.feeder.regulators`), capacitors fixed or
under their feeder file's controls (``grid.capacitor_control: auto``, see
:mod:`openg2g.grid.feeder.capacitors`). Automatic controls act as OpenDSS's time mode does: after the
solve at time t every control samples the solution, the actions due by t are carried out, and the
feeder is solved again at t, until no action is due (at most :data:`MAX_CONTROL_ITERATIONS` rounds);
the state reported at t is the last of these solves. A tap change or a capacitor switching updates
the compiled network in place (:meth:`~openg2g.grid.feeder.powerflow.PowerFlowNetwork.change_admittance`).

Faults (``apply_fault``, ``clear_fault``: :mod:`~openg2g.grid.feeder.faults`) and the source EMF per
phase (``set_source_voltage``) are part of the switching state too; each change rebuilds the network
at the next solve, which starts from the new network's own nominal voltages (docs/disturbances.md).

:meth:`FeederGrid.settle` lets every control of the feeder file settle at once instead, as
OpenDSS's snapshot ``Solve`` does at its default ``controlmode=static``
(:mod:`~openg2g.grid.feeder.settle`): what ``openg2g powerflow`` solves at by default, and a
scenario's starting point with ``grid.initial_controls: static``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from openg2g.core.commands import (
    ApplyFault,
    ClearFault,
    Command,
    SetCapacitor,
    SetLineInService,
    SetLoadScale,
    SetPVScale,
    SetRegulatorMode,
    SetSourceVoltage,
    SetStoragePower,
    SetTaps,
)
from openg2g.core.errors import CommandError, FeederError, PowerFlowError, ScenarioError, SimulationError
from openg2g.core.interfaces import GridBackend, RegulatorInfo
from openg2g.core.state import (
    PHASES,
    BranchSet,
    DatacenterState,
    GridState,
    StorageState,
    StorageUnit,
    frozen_array,
)
from openg2g.core.threads import with_one_blas_thread
from openg2g.grid.config import BranchRatingSpec, GridSite, GridSpec, monitored_at_levels
from openg2g.grid.feeder.branches import BranchFlows
from openg2g.grid.feeder.capacitors import CapacitorControls
from openg2g.grid.feeder.checks import check_against_feeder
from openg2g.grid.feeder.faults import fault_from_command
from openg2g.grid.feeder.injections import Injections
from openg2g.grid.feeder.library import Feeder, load_feeder, resolve_feeder
from openg2g.grid.feeder.model import LineModel, TransformerModel
from openg2g.grid.feeder.network import NodeIndex, Switching, energized, load_ports, node_index
from openg2g.grid.feeder.operating_point import OperatingPoint, Target
from openg2g.grid.feeder.powerflow import PowerFlowNetwork, Solution
from openg2g.grid.feeder.regulated import RegulatedGenerators
from openg2g.grid.feeder.regulators import Regulators, UnitKey, bank_auto_problem
from openg2g.grid.feeder.settle import PANDAPOWER_CANNOT_SETTLE, Changes, StaticControls
from openg2g.grid.feeder.solver import CompiledNetwork
from openg2g.grid.feeder.storage import Battery

if TYPE_CHECKING:
    from openg2g.grid.feeder.pandapower_mode import PandapowerNetwork

__all__ = ["FeederGrid", "NodeSolution", "Settled"]

_MAX_IN_PLACE = 50
"""Tap changes and capacitor switchings applied in place to a compiled network before it is
rebuilt from scratch (each in-place update adds rounding)."""

MAX_CONTROL_ITERATIONS = 10
"""Control iterations at one solve time before a run stops: OpenDSS's default ``maxcontroliter``."""

_BATCH_COLUMNS = 1024
"""Operating points solved together in one batch call (bounds memory on long batches)."""

_BATCH_NODE_VALUES = 1 << 20
"""Node voltages held per batch call (16 MiB of complex values): a large feeder solves fewer
operating points at a time (the IEEE 8500-node feeder 122), a small one :data:`_BATCH_COLUMNS`."""

MAX_SOURCE_PU = 2.0
"""Largest source EMF magnitude a :class:`SetSourceVoltage` may set (pu): a swell on a distribution
feeder stays well below it."""

SPARSE_MIN_NODES = 1000
"""Feeders with at least this many nodes are solved by the sparse network
(:class:`~openg2g.grid.feeder.sparse.SparseNetwork`), smaller ones by the dense one
(:class:`~openg2g.grid.feeder.solver.CompiledNetwork`): the crossover ``bench/bench_grid.py``
measures (docs/performance.md, "Large feeders"): at 562 nodes neither path is faster at
everything, from 1,124 on the sparse one is. The bundled IEEE feeders (at most 278 nodes) stay
dense; the European LV network of ``eu_lv_edge_none`` (2,700 bus-phases) goes sparse. Tests and
benchmarks set it to force a path (0: always sparse)."""


def _with_source_pu(feeder: Feeder, source_pu: float | None) -> Feeder:
    """``feeder`` with the source voltage set to ``source_pu`` (pu), unchanged when None."""
    if source_pu is None:
        return feeder
    source = dataclasses.replace(feeder.model.source, v_pu=source_pu)
    return dataclasses.replace(feeder, model=dataclasses.replace(feeder.model, source=source), _net=None)


def _with_ratings(feeder: Feeder, ratings: Mapping[str, BranchRatingSpec]) -> Feeder:
    """``feeder`` with the lines' and transformers' ratings of ``grid.branch_ratings`` (names
    checked by :func:`~openg2g.grid.feeder.checks.check_against_feeder`), unchanged when there are none."""
    if not ratings:
        return feeder
    by_name = {name.lower(): r for name, r in ratings.items()}

    def rated_line(ln: LineModel) -> LineModel:
        r = by_name.get(f"line.{ln.name}".lower())
        if r is None:
            return ln
        return dataclasses.replace(
            ln,
            norm_amps=ln.norm_amps if r.normal_a is None else r.normal_a,
            emerg_amps=ln.emerg_amps if r.emergency_a is None else r.emergency_a,
        )

    def rated_transformer(t: TransformerModel) -> TransformerModel:
        r = by_name.get(f"transformer.{t.name}".lower())
        if r is None:
            return t
        return dataclasses.replace(
            t,
            norm_kva=t.norm_kva if r.normal_kva is None else r.normal_kva,
            emerg_kva=t.emerg_kva if r.emergency_kva is None else r.emergency_kva,
        )

    model = dataclasses.replace(
        feeder.model,
        lines=[rated_line(ln) for ln in feeder.model.lines],
        transformers=[rated_transformer(t) for t in feeder.model.transformers],
    )
    return dataclasses.replace(feeder, model=model, _net=None)


def _monitored(
    feeder: Feeder, spec: GridSpec, sites: Sequence[GridSite], nodes: NodeIndex
) -> tuple[tuple[str, ...], np.ndarray]:
    """Names ``"<bus>.<phase>"`` and node indices of the monitored bus-phases: of ``monitored_buses``,
    or of every bus but the source side, those at the levels that count
    (:func:`openg2g.grid.config.monitored_at_levels`)."""
    if spec.monitored_buses:
        candidates = [b.lower() for b in spec.monitored_buses]
    else:
        skip = set(feeder.source_side_buses)
        candidates = [b for b in feeder.model.bus_kv if b not in skip]
    site_buses = {s.bus.lower() for s in sites}
    mon_buses = monitored_at_levels(spec, candidates, feeder.model.bus_kv.__getitem__, site_buses)
    pairs = [(b, p) for b in mon_buses for p in feeder.bus_phases[b]]
    return tuple(f"{b}.{p}" for b, p in pairs), np.array([nodes.index[bp] for bp in pairs], dtype=np.int64)


class NodeSolution(NamedTuple):
    """One solved operating point in the phase frame (:meth:`FeederGrid.node_solution`).

    :ivar nodes: the node numbering (rows of ``v_v``).
    :ivar v_v: complex node voltage to ground (V), ``(n_nodes,)``.
    :ivar switching: the taps, capacitor and line states it was solved at.
    :ivar load_scale: scale of each of the feeder's own loads (``model.loads`` order).
    """

    nodes: NodeIndex
    v_v: np.ndarray
    switching: Switching
    load_scale: np.ndarray


class Settled(NamedTuple):
    """The settled state of the feeder's controls (:meth:`FeederGrid.settle`).

    :ivar solution: every node at that state.
    :ivar iterations: the solves it took (OpenDSS's control iterations).
    :ivar taps: regulator bank -> per-phase tap steps.
    :ivar capacitors: every capacitor -> closed.
    :ivar switches: every line a SwtControl operates -> in service (closed).
    """

    solution: NodeSolution
    iterations: int
    taps: Mapping[str, tuple[int, ...]]
    capacitors: Mapping[str, bool]
    switches: Mapping[str, bool]


class FeederGrid(GridBackend):
    """Grid backend on a feeder (see the module docstring).

    :param feeder: the feeder.
    :param spec: the grid section of the scenario.
    :param sites: datacenter sites (name, bus, power factor).
    :param base_dir: folder that profile paths are relative to.
    :raises ScenarioError: the spec does not fit the feeder.
    :raises FeederError: a regulator's initial taps lie outside the scenario's tap range.
    """

    def __init__(self, feeder: Feeder, spec: GridSpec, sites: Sequence[GridSite], base_dir: Path) -> None:
        problems = check_against_feeder(feeder, spec, sites)
        if problems:
            raise ScenarioError(problems)
        feeder = _with_ratings(_with_source_pu(feeder, spec.source_pu), spec.branch_ratings)
        self.feeder = feeder
        self.spec = spec
        self._sites = {s.name: s for s in sites}
        self._model = feeder.model
        self._nodes = node_index(self._model)
        self._site_nodes = {s.name: [self._nodes.index[(s.bus.lower(), ph)] for ph in PHASES] for s in sites}
        self._live: tuple[frozenset[str], np.ndarray] | None = None  # kept until a line switches
        self._ports = load_ports(self._model, self._nodes)
        self._regulated = RegulatedGenerators(self._model, self._ports) if self._model.regulated_generators else None
        self._flows = BranchFlows(self._model, self._nodes)
        self._batteries = {st.name: Battery.from_spec(st) for st in spec.storage}
        self._injections = Injections(feeder, spec, sites, self._nodes, self._batteries, Path(base_dir))
        self._bus_phases, self._mon_idx = _monitored(feeder, spec, sites, self._nodes)
        self._mon_v_base = self._nodes.v_base_v[self._mon_idx][:, None]
        self._regulators = Regulators(feeder, spec.regulators, self._nodes)
        self._capacitor_controls = (
            CapacitorControls(self._model, self._nodes) if spec.capacitor_control == "auto" else None
        )
        self._capacitors = {c.name: c for c in self._model.capacitors}
        controls = self._capacitor_controls.controls if self._capacitor_controls is not None else []
        self._controlled_caps = tuple(dict.fromkeys(c.capacitor.name for c in controls))
        self._cap_names = {c.lower(): c for c in feeder.capacitors}
        self._line_names = {ln.lower(): ln for ln in feeder.lines}
        self._net: PowerFlowNetwork | PandapowerNetwork | None = None
        self._net_prev: PowerFlowNetwork | PandapowerNetwork | None = None
        self._last: tuple[np.ndarray, np.ndarray] | None = None  # the loads of the last accepted solve
        self._point: OperatingPoint | None = None  # the last linearized, while it still holds
        self._exact: PowerFlowNetwork | None = None  # the network solve mode pandapower linearizes
        self._in_place = 0
        self._taps_view: Mapping[str, tuple[int, ...]] | None = None  # made once per tap setting
        self._stated_taps = frozenset(
            self._regulators.bank(b).info.bank for b, r in spec.regulators.items() if r.taps is not None
        )
        self.reset(0)

    # ----------------------------------------------------------------------------- building
    @classmethod
    def from_spec(cls, spec: GridSpec, sites: Sequence[GridSite], base_dir: Path) -> FeederGrid:
        """Load ``spec.feeder`` (a bundled name, or a .dss path relative to ``base_dir``) and
        build the backend.

        :raises FeederError: unknown feeder or unreadable feeder file.
        :raises ScenarioError: the spec does not fit the feeder (see :func:`validate_grid`).
        """
        assert spec.feeder is not None, "FeederGrid needs grid.feeder (a pandapower net is a PandapowerGrid)"
        return cls(load_feeder(resolve_feeder(spec.feeder, base_dir)), spec, sites, base_dir)

    def _build_network(self, pq_nodes: np.ndarray, pq_band: np.ndarray) -> PowerFlowNetwork:
        """A phase-frame network at the switching in force, with PQ ports at ``pq_nodes``: sparse from
        :data:`SPARSE_MIN_NODES` nodes on, dense below."""
        if len(self._nodes) < SPARSE_MIN_NODES:
            return CompiledNetwork(self._model, self._nodes, self._ports, pq_nodes, self._switching, pq_band)
        from openg2g.grid.feeder.sparse import SparseNetwork  # KLU loaded for large feeders only

        return SparseNetwork(self._model, self._nodes, self._ports, pq_nodes, self._switching, pq_band)

    def _compile(self) -> PowerFlowNetwork | PandapowerNetwork:
        if self._net is None:
            if self.spec.solver == "pandapower":
                from openg2g.grid.feeder.pandapower_mode import (
                    PandapowerNetwork,  # pandapower imported only for this mode
                )

                self._net = PandapowerNetwork(
                    self.feeder, self._nodes, self._ports.load, self._injections.pq_nodes, self._switching
                )
            else:
                net = self._build_network(self._injections.pq_nodes, self._injections.pq_band)
                if self._net_prev is not None and self._net_prev.u_last.shape[0] == net.u0.shape[0]:
                    net.u_last = self._net_prev.u_last[:, :1].copy()  # warm start across tap changes
                self._net = net
            self._in_place = 0
        return self._net

    def _invalidate(self) -> None:
        if self._net is not None:
            self._net_prev = self._net
        self._net = None

    # ----------------------------------------------------------------------------- protocol
    def bus_phases(self) -> tuple[str, ...]:
        """Monitored bus-phases ``"<bus>.<phase>"`` (all buses but the source side, or the
        scenario's ``monitored_buses``)."""
        return self._bus_phases

    def regulators(self) -> Mapping[str, RegulatorInfo]:
        """Regulator banks by name."""
        return self._regulators.info()

    def storages(self) -> tuple[str, ...]:
        """Battery names."""
        return tuple(self._batteries)

    def storage_units(self) -> Mapping[str, StorageUnit]:
        """Battery name -> its fixed facts (rating, capacity, state-of-charge limits)."""
        return {name: battery.unit for name, battery in self._batteries.items()}

    def branches(self) -> BranchSet:
        """Every line and transformer of the feeder (see :mod:`openg2g.grid.feeder.branches`)."""
        return self._flows.branches

    def controlled_capacitors(self) -> tuple[str, ...]:
        """The capacitors a CapControl switches, under ``capacitor_control: auto``; none otherwise."""
        return self._controlled_caps

    def reset(self, seed: int) -> None:
        """Initial taps, modes, capacitor and line states, load/PV scales, storage state of
        charge (the feeder has no randomness; ``seed`` is unused). With ``grid.initial_controls:
        static`` the controls then settle (:meth:`settle` at 0 s with no site drawing).

        :raises FeederError: ``initial_controls: static`` on a feeder with a control openg2g cannot run.
        :raises SimulationError: they do not settle (within the file's ``maxcontroliter``), or a
            solve fails meanwhile (:class:`PowerFlowError`).
        """
        self._net = None
        self._net_prev = None
        self._in_place = 0
        self._last = None
        self._live = None
        self._switching = Switching.initial(self._model)
        self._taps_view = None
        for name, closed in self.spec.capacitors.items():
            self._switching.capacitors[self._cap_names[name.lower()]] = closed
        if self._capacitor_controls is not None:
            self._capacitor_controls.reset()
        self._set_unit_taps(self._regulators.reset())
        self._injections.reset()
        if self._regulated is not None:
            self._regulated.reset()
        for battery in self._batteries.values():
            battery.reset()
        if self.spec.initial_controls == "static":
            self.settle(0.0, {})

    def _set_unit_taps(self, steps: Mapping[UnitKey, int]) -> None:
        """Put ``(transformer, phase index) -> tap step`` in force; a compiled network is updated
        in place (low-rank update) up to :data:`_MAX_IN_PLACE` times, then rebuilt."""
        new_taps: dict[str, np.ndarray] = {}
        for (name, k), step in steps.items():
            arr = new_taps.setdefault(name, self._switching.taps_pu[name].copy())
            arr[k] = self._regulators.tap_pu(name, step)
        changed = {n: a for n, a in new_taps.items() if not np.array_equal(a, self._switching.taps_pu[n])}
        if not changed:
            return
        self._taps_view = None
        net = self._in_place_network()
        for name, new in changed.items():
            if net is not None:
                net.retap(self._regulators.transformer(name), self._switching.taps_pu[name], new)
            self._switching.taps_pu[name] = new
        self._updated(net)

    def _switch_capacitors(self, closed: Mapping[str, bool]) -> None:
        """Put capacitor name -> closed in force, in place as :meth:`_set_unit_taps`."""
        changed = {name: c for name, c in closed.items() if self._switching.capacitors[name] != c}
        if not changed:
            return
        net = self._in_place_network()
        for name, c in changed.items():
            if net is not None:
                net.switch_capacitor(self._capacitors[name], c)
            self._switching.capacitors[name] = c
        self._updated(net)

    def _switch_lines(self, in_service: Mapping[str, bool]) -> None:
        """Put line name -> in service in force (the network is rebuilt at the next solve)."""
        for name, state in in_service.items():
            self._switching.lines[name] = state
        self._live = None
        self._invalidate()

    def _put_in_force(self, changes: Changes) -> None:
        """Put a static-mode control action's changes in force."""
        self._set_unit_taps(changes.taps)
        self._switch_capacitors(changes.capacitors)
        if changes.lines:
            self._switch_lines(changes.lines)

    def _in_place_network(self) -> PowerFlowNetwork | None:
        """The compiled network to update in place, None when there is none or it is due for a rebuild."""
        net = self._net
        return net if isinstance(net, PowerFlowNetwork) and self._in_place < _MAX_IN_PLACE else None

    def _updated(self, net: PowerFlowNetwork | None) -> None:
        """After a switching change: count an in-place update of ``net``, or rebuild at the next solve."""
        if net is not None:
            self._in_place += 1
        else:
            self._invalidate()

    def taps(self) -> dict[str, tuple[int, ...]]:
        """Regulator bank -> per-phase tap steps in force."""
        return dict(self._taps_in_force())

    def _taps_in_force(self) -> Mapping[str, tuple[int, ...]]:
        """:meth:`taps` as a read-only mapping, made once per tap setting: the states of every step
        solved at that setting share it."""
        if self._taps_view is None:
            self._taps_view = MappingProxyType(self._regulators.taps(self._switching))
        return self._taps_view

    def _capacitor_states(self) -> Mapping[str, bool]:
        """Closed per capacitor under automatic control, as reported in a state."""
        return MappingProxyType({name: self._switching.capacitors[name] for name in self._controlled_caps})

    def unsupplied_sites(self) -> frozenset[str]:
        """The sites any phase of whose bus has no path to the source through the lines in service
        (the feeder's switching in force), so they cannot run."""
        return self._supply()[0]

    def _supply(self) -> tuple[frozenset[str], np.ndarray]:
        """The sites cut off and the energized monitored bus-phases (read-only) at the line states
        in force, kept until a line switches (transformers and other elements never do)."""
        if self._live is None:
            live = energized(self._model, self._nodes, self._switching)
            cut = frozenset(name for name, nodes in self._site_nodes.items() if not live[nodes].all())
            self._live = (cut, frozen_array(live[self._mon_idx], bool))
        return self._live

    def _storage_states(self) -> Mapping[str, StorageState]:
        """Every battery's state as reported in a grid state (empty without batteries)."""
        return MappingProxyType({name: battery.state() for name, battery in self._batteries.items()})

    def can_batch(self) -> bool:
        """True when no regulator is in auto mode, capacitors are fixed and there is no battery
        (steps independent)."""
        return not self._batteries and self._regulators.all_fixed() and self._capacitor_controls is None

    # ----------------------------------------------------------------------------- solving
    def _branch_scale(self) -> np.ndarray:
        return self._injections.branch_scale(self._ports)

    def _solve_network(
        self, scale: np.ndarray, s_pq: np.ndarray, u_init: np.ndarray | None = None
    ) -> tuple[Solution, np.ndarray]:
        """Solve the network in force at load scales ``scale`` and PQ powers ``s_pq``, with the
        voltage-regulating generators' reactive power solved too where the feeder has any
        (:mod:`~openg2g.grid.feeder.regulated`): the solution and the branch scales it holds."""
        net = self._compile()
        tol_pu = self.spec.tolerance_pu
        if self._regulated is None or not isinstance(net, PowerFlowNetwork):
            return net.solve(scale, s_pq, tol_pu, u_init=u_init), scale
        return self._regulated.solve(net, scale, s_pq, tol_pu, u_init=u_init)

    def _branch_results(self, sol: Solution) -> tuple[np.ndarray, np.ndarray]:
        """Conductor currents (A) and branch loading (%) of every column of ``sol``, at the taps
        and line states it was solved with."""
        current_a = self._flows.currents_a(sol.v, self._switching)
        return current_a, self._flows.loading_pct(current_a)

    def _states(
        self,
        t_s: Sequence[float],
        sol: Solution,
        taps: Mapping[str, tuple[int, ...]],
        flows: tuple[np.ndarray, np.ndarray],
    ) -> list[GridState]:
        """The reported state of every column of a converged ``sol`` (``flows`` from
        :meth:`_branch_results`, ``taps`` from :meth:`_taps_in_force`): each quantity is computed
        for the whole batch at once and laid out in one table of a row per column
        (:meth:`GridState.of_table`), so a state's arrays are contiguous segments of its row."""
        v_pu = np.abs(sol.v[self._mon_idx]) / self._mon_v_base
        # one read-only table, a row per column, whose segments (views) are a state's arrays
        table = np.concatenate([v_pu, sol.s_sub_va.real, sol.s_sub_va.imag, *flows]).T.copy()
        table.flags.writeable = False
        # batteries keep this backend from batching (can_batch), so a batch with several columns has none
        return GridState.of_table(
            t_s,
            self._bus_phases,
            table,
            sol.losses_w.tolist(),
            taps,
            self._flows.branches,
            self._capacitor_states(),
            self._supply()[1],
            self._storage_states(),
        )

    def _failed(self, t_s: float, loads: Mapping[str, DatacenterState], sol: Solution) -> PowerFlowError:
        """The error of a step that did not converge, or converged only past the collapse point
        (:meth:`_failed_through` while a fault or a source setting is in force)."""
        attached = ", ".join(f"{n}@{self._sites[n].bus}={s.power_w / 1e6:.3f} MW" for n, s in loads.items())
        lo, hi = self._injections.load_scale_range()
        scale = f"{lo:g}" if lo == hi else f"{lo:g} to {hi:g}"
        level = f"datacenter loads: {attached or 'none'}; feeder load scale {scale}"
        if self._switching.faults or self._switching.source_pu is not None:
            return self._failed_through(t_s, loads, sol, level)
        if sol.collapsed[0]:
            return PowerFlowError(
                f"voltage collapse at t={t_s} s on feeder {self.feeder.name}: {self._collapse_text(sol)} ({level})"
            )
        return PowerFlowError(f"power flow did not converge at t={t_s} s on feeder {self.feeder.name} ({level})")

    def _collapse_text(self, sol: Solution) -> str:
        """How far a collapsed ``sol`` got: the share of the load carried and the lowest voltage there."""
        v_pu = np.abs(sol.v[:, 0]) / self._nodes.v_base_v
        live = v_pu > 0  # de-energized nodes read 0
        k = int(np.flatnonzero(live)[np.argmin(v_pu[live])])
        return (
            f"the feeder can carry only {100 * sol.load_fraction[0]:.1f}% of this step's load (all loads and "
            "injections scaled together) before the power flow reaches the nose of the P-V curve, where "
            f"bus-phase {self._nodes.names[k]} is at {v_pu[k]:.3f} pu"
        )

    def _failed_through(
        self, t_s: float, loads: Mapping[str, DatacenterState], sol: Solution, level: str
    ) -> PowerFlowError:
        """The error of a step that cannot be solved through the faults or source setting in force:
        it names them, the time, and what draws constant power whatever the voltage, which a
        disturbance can leave unable to be supplied: the sites with ``load_model: constant_power``,
        lowest first in the voltage the disturbed network alone leaves at them, or else the
        feeder's own loads with no low-voltage band (``vminpu`` 0: a pandapower net's, drawn as
        ``runpp_3ph`` draws them), the lowest of them."""
        sw = self._switching
        through = ", ".join([f"fault {f.name} ({f.describe()})" for f in sw.faults.values()])
        if sw.source_pu is not None:
            through += (", " if through else "") + "source at " + "/".join(f"{v:g}" for v in sw.source_pu) + " pu"
        head = f"power flow at t={t_s} s on feeder {self.feeder.name} cannot be solved through {through}"
        outcome = f"voltage collapse: {self._collapse_text(sol)}" if sol.collapsed[0] else "no convergence"
        net = self._compile()
        assert isinstance(net, PowerFlowNetwork), "faults and source settings are refused under solver: pandapower"
        v_pu = np.abs(net.nominal_port_voltages()) / net.currents.v_ref[:, 0]
        first = net.currents.n_load
        fixed = {
            name: float(v_pu[first + self._injections.sites[name].ports].min())
            for name, state in loads.items()
            if self._sites[name].load_model == "constant_power" and state.power_w > 0
        }
        undo = "clear the fault sooner" if sw.faults else "sag the source less"
        if fixed:
            names = ", ".join(
                f"{name} (bus {self._sites[name].bus}, {loads[name].power_w / 1e6:.3f} MW, where the network "
                f"alone leaves {v:.3f} pu)"
                for name, v in sorted(fixed.items(), key=lambda item: item[1])
            )
            sites = f"site {names} draws" if len(fixed) == 1 else f"sites {names} draw"
            return PowerFlowError(
                f"{head}: {sites} constant power (load_model: constant_power), which the disturbed feeder "
                f"cannot deliver at any voltage ({outcome}); draw a site near the disturbance as an OpenDSS "
                f"model-1 load (load_model: opendss: constant impedance below its vminpu), or {undo} ({level})"
            )
        ports = self._ports
        own = np.flatnonzero((ports.model == 1) & (ports.vminpu <= 0) & (ports.load < len(self._model.loads)))
        if own.size:
            k = int(own[np.argmin(v_pu[own])])
            load = self._model.loads[int(ports.load[k])]
            return PowerFlowError(
                f"{head}: the feeder's load {load.name} (bus {load.bus}, where the network alone leaves "
                f"{v_pu[k]:.3f} pu) and {own.size - 1} other load branch(es) draw constant power at any voltage "
                f"(vminpu 0, as runpp_3ph draws a pandapower net's loads), which the disturbed feeder cannot "
                f"deliver ({outcome}); {undo} ({level})"
            )
        return PowerFlowError(f"{head} ({outcome}; {level})")

    @with_one_blas_thread
    def solve(self, t_s: float, loads: Mapping[str, DatacenterState], dt_s: float) -> GridState:
        """Solve at ``t_s``, with the automatic controls' actions due by then (see the module docstring).

        :raises PowerFlowError: no convergence, or voltage collapse (the load is past the nose of
            the P-V curve: the message gives the share of it the feeder can carry), unless
            ``on_nonconvergence == "flag"``, which returns a state with ``converged=False`` and NaN
            voltages and powers.
        :raises SimulationError: automatic controls still acting after :data:`MAX_CONTROL_ITERATIONS` rounds.
        :raises UnknownNameError: a load for a site that is not on this grid.
        """
        for battery in self._batteries.values():
            battery.advance(dt_s)
        s_pq = self._injections.s_pq([t_s], [loads])
        sol, scale = self._controlled(t_s, self._branch_scale(), s_pq)
        taps = self._taps_in_force()
        if not sol.converged:
            if self.spec.on_nonconvergence == "flag":
                return GridState.not_converged(
                    t_s,
                    self._bus_phases,
                    taps,
                    self._flows.branches,
                    self._capacitor_states(),
                    self._supply()[1],
                    self._storage_states(),
                )
            raise self._failed(t_s, loads, sol)
        self._last = (scale, s_pq)
        flows = self._branch_results(sol)
        return self._states([t_s], sol, taps, flows)[0]

    def _controlled(self, t_s: float, scale: np.ndarray, s_pq: np.ndarray) -> tuple[Solution, np.ndarray]:
        """The solution at ``t_s`` once the automatic controls have acted, and the branch scales it
        holds (:meth:`_solve_network`): solve, let every control sample, carry out the actions due,
        and while any were, solve again (when one changed the network) and sample again: OpenDSS's
        control iterations in time mode. A solve that fails ends the iterations."""
        sol, solved_at = self._solve_network(scale, s_pq)
        caps = self._capacitor_controls
        for _ in range(MAX_CONTROL_ITERATIONS):
            if not sol.converged:
                return sol, solved_at
            v = sol.v[:, 0]
            self._regulators.sample(t_s, v, self._switching)
            if caps is not None:
                caps.sample(t_s, v, self._switching)
            moves, tapped = self._regulators.act(t_s, self._switching)
            switches, switched = caps.act(t_s, self._switching) if caps is not None else ({}, False)
            if not (tapped or switched):
                return sol, solved_at
            if moves or switches:
                self._set_unit_taps(moves)
                self._switch_capacitors(switches)
                sol, solved_at = self._solve_network(scale, s_pq)
        acting = [*self._regulators.armed(), *(caps.armed() if caps is not None else [])]
        raise SimulationError(
            f"t={t_s} s, feeder {self.feeder.name}: automatic controls still act after "
            f"{MAX_CONTROL_ITERATIONS} control iterations at one time (OpenDSS's maxcontroliter: they undo "
            f"each other's actions); armed: {', '.join(acting) or 'none'} (widen a band or lengthen a delay)"
        )

    @with_one_blas_thread
    def node_solution(self, t_s: float, loads: Mapping[str, DatacenterState]) -> NodeSolution:
        """The complex node voltages at ``t_s`` with ``loads``, at the switching and scales in
        force. Unlike :meth:`solve` nothing advances (batteries, automatic controls, the operating
        point sensitivities refer to); only the solver's warm starts move (the network's, and the
        reactive power the voltage-regulating generators start from).

        :raises PowerFlowError: no convergence, or voltage collapse.
        """
        sol, _ = self._solve_network(self._branch_scale(), self._injections.s_pq([t_s], [loads]))
        if not sol.converged:
            raise self._failed(t_s, loads, sol)
        return NodeSolution(self._nodes, sol.v[:, 0].copy(), self._switching.copy(), self._injections.load_scale.copy())

    @with_one_blas_thread
    def settle(self, t_s: float, loads: Mapping[str, DatacenterState], max_iterations: int | None = None) -> Settled:
        """Let the feeder file's controls settle as OpenDSS's snapshot ``Solve`` does with
        ``controlmode=static`` (:mod:`~openg2g.grid.feeder.settle`): from the switching in force, at
        ``t_s`` (s) with ``loads``, every RegControl, CapControl and SwtControl acts until none does,
        whatever mode a bank runs in, except the RegControls of the banks whose taps the scenario
        states (``grid.regulators.<bank>.taps``), which hold them. The taps, capacitor and line
        states it reaches stay in force. Nothing else advances (batteries, time-mode controls).

        :param max_iterations: the most solves; None: the feeder file's ``maxcontroliter``.
        :raises FeederError: a control openg2g cannot run (named), or the pandapower reference
            solver, whose bank is one transformer at the mean of its taps.
        :raises PowerFlowError: a solve does not converge.
        :raises SimulationError: the controls still act after ``max_iterations`` solves.
        """
        if self.spec.solver == "pandapower":
            raise FeederError(f"feeder {self.feeder.name}: {PANDAPOWER_CANNOT_SETTLE}")
        controls = StaticControls(self._model, self._nodes, self._regulators, held=self._stated_taps)
        scale, s_pq = self._branch_scale(), self._injections.s_pq([t_s], [loads])
        limit = self._model.max_control_iterations if max_iterations is None else max_iterations
        sol, iterations = controls.settle(
            t_s, self._switching, lambda: self._solve_network(scale, s_pq)[0], self._put_in_force, limit
        )
        if not sol.converged:
            raise self._failed(t_s, loads, sol)
        solution = NodeSolution(
            self._nodes, sol.v[:, 0].copy(), self._switching.copy(), self._injections.load_scale.copy()
        )
        return Settled(
            solution,
            iterations,
            self.taps(),
            dict(self._switching.capacitors),
            {name: self._switching.lines[name] for name in controls.switched_lines},
        )

    @with_one_blas_thread
    def solve_batch(
        self, t_s: Sequence[float], loads: Sequence[Mapping[str, DatacenterState]], dt_s: float
    ) -> list[GridState]:
        """Solve several steps in one call, up to :data:`_BATCH_COLUMNS` operating points at a time
        (fewer on a large feeder, :data:`_BATCH_NODE_VALUES`; equal to solving them one by one when
        :meth:`can_batch`; otherwise it does exactly that)."""
        if not self.can_batch() or len(t_s) < 2:
            return [self.solve(t, ld, dt_s) for t, ld in zip(t_s, loads)]
        out: list[GridState] = []
        columns = max(1, min(_BATCH_COLUMNS, _BATCH_NODE_VALUES // len(self._nodes)))
        for start in range(0, len(t_s), columns):
            chunk_t = list(t_s[start : start + columns])
            chunk_loads = list(loads[start : start + columns])
            net = self._compile()
            s_pq = self._injections.s_pq(chunk_t, chunk_loads)
            scale = self._branch_scale()
            sol, scale = self._solve_network(scale, s_pq, u_init=net.u_last[:, :1])
            if not sol.converged:
                out.extend(self.solve(t, ld, dt_s) for t, ld in zip(chunk_t, chunk_loads))
                continue
            self._last = (scale[:, -1:], s_pq[:, -1:])
            taps = self._taps_in_force()
            flows = self._branch_results(sol)
            out.extend(self._states(chunk_t, sol, taps, flows))
        return out

    # ----------------------------------------------------------------------------- commands
    @functools.singledispatchmethod
    def apply(self, command: Command, t_s: float) -> None:
        """Carry out a grid command (see :mod:`openg2g.core.commands`); one handler per command type.

        :raises CommandError: a command the grid does not handle, an unknown element, a wrong
            number of taps, or a value out of range.
        """
        raise CommandError(f"the grid backend does not handle {type(command).__name__}")

    @apply.register
    def _set_taps(self, command: SetTaps, t_s: float) -> None:
        bank = self._regulators.bank(command.bank)
        taps = tuple(command.taps)
        self._regulators.check_taps(bank, taps)
        self._set_unit_taps(self._regulators.unit_steps(bank, taps))

    @apply.register
    def _set_regulator_mode(self, command: SetRegulatorMode, t_s: float) -> None:
        bank = self._regulators.bank(command.bank)
        if command.mode not in ("fixed", "auto"):
            raise CommandError(f"set_regulator_mode {command.bank}: mode {command.mode!r} (fixed or auto)")
        why = bank_auto_problem(self.feeder, bank.info.bank) if command.mode == "auto" else None
        if why is not None:
            raise CommandError(f"set_regulator_mode {command.bank}: auto: {why}")
        bank.mode = command.mode
        bank.reset_controls()

    @apply.register
    def _set_capacitor(self, command: SetCapacitor, t_s: float) -> None:
        name = self._cap_names.get(command.name.lower())
        if name is None:
            known = ", ".join(self._cap_names) or "none"
            raise CommandError(f"set_capacitor: unknown capacitor {command.name!r} (capacitors: {known})")
        self._switch_capacitors({name: bool(command.closed)})

    @apply.register
    def _set_line_in_service(self, command: SetLineInService, t_s: float) -> None:
        name = self._line_names.get(command.line.lower())
        if name is None:
            raise CommandError(f"set_line_in_service: unknown line {command.line!r} on feeder {self.feeder.name}")
        self._switch_lines({name: bool(command.in_service)})

    @apply.register
    def _apply_fault(self, command: ApplyFault, t_s: float) -> None:
        self._exact_solver_only("apply_fault")
        placed = self._switching.faults.get(command.name)
        if placed is not None:
            raise CommandError(
                f"apply_fault {command.name!r}: name: a fault of that name is in place ({placed.describe()}); "
                "clear it first, or give the new one another name"
            )
        self._switching.faults[command.name] = fault_from_command(command, self._model, self._nodes.index)
        self._disturbed()

    @apply.register
    def _clear_fault(self, command: ClearFault, t_s: float) -> None:
        self._exact_solver_only("clear_fault")
        if command.name not in self._switching.faults:
            placed = ", ".join(self._switching.faults) or "none"
            raise CommandError(
                f"clear_fault {command.name!r}: name: no fault of that name is in place (in place: {placed})"
            )
        del self._switching.faults[command.name]
        self._disturbed()

    @apply.register
    def _set_source_voltage(self, command: SetSourceVoltage, t_s: float) -> None:
        self._exact_solver_only("set_source_voltage")
        v_pu = tuple(command.v_pu)
        if len(v_pu) not in (1, 3):
            raise CommandError(
                f"set_source_voltage: v_pu: {len(v_pu)} values (one per source phase a, b, c, or one for all)"
            )
        for v in v_pu:
            if not v > 0:
                raise CommandError(f"set_source_voltage: v_pu: {v!r} (pu of the source's base voltage, must be > 0)")
            if v > MAX_SOURCE_PU:
                raise CommandError(
                    f"set_source_voltage: v_pu: {v!r} (pu of the source's base voltage, at most {MAX_SOURCE_PU:g}: "
                    "a larger value is no swell, more likely a voltage in V or kV)"
                )
        a, b, c = v_pu * 3 if len(v_pu) == 1 else v_pu
        self._switching.source_pu = (a, b, c)
        self._disturbed()

    def _exact_solver_only(self, command: str) -> None:
        """Refuse a fault or source command under ``solver: pandapower``, whose sequence-frame
        network models neither.

        :raises CommandError: that solver is in force.
        """
        if self.spec.solver == "pandapower":
            raise CommandError(
                f"{command}: the pandapower solver mode does not model faults or source sags (grid.solver: exact does)"
            )

    def _disturbed(self) -> None:
        """After a fault is placed or cleared or the source changes: the network is built again at
        the next solve, from its own nominal voltages (its every load at its nominal admittance,
        the fault in place), not from the last solution of the network before, which is far from
        the new one."""
        self._live = None
        self._net = self._net_prev = None

    @apply.register
    def _set_storage_power(self, command: SetStoragePower, t_s: float) -> None:
        battery = self._batteries.get(command.name)
        if battery is None:
            known = ", ".join(self._batteries) or "none"
            raise CommandError(f"set_storage_power: unknown battery {command.name!r} (batteries: {known})")
        battery.set_power(command.p_w, command.q_var)

    @apply.register
    def _set_load_scale(self, command: SetLoadScale, t_s: float) -> None:
        self._injections.set_load_scale(command.scale, command.load)

    @apply.register
    def _set_pv_scale(self, command: SetPVScale, t_s: float) -> None:
        self._injections.set_pv_scale(command.scale, command.pv)

    # ----------------------------------------------------------------------------- sensitivity
    @with_one_blas_thread
    def voltage_sensitivity(self, bus: str) -> np.ndarray:
        """dV/dP (pu/W) of every monitored bus-phase w.r.t. per-phase active power drawn at
        ``bus`` (a bus name, or a site name meaning its bus), Q following at the site's power
        factor (unity if no site is there). Exact derivatives of the power flow (the solver's
        Jacobian, every load model included) at the last solved operating point, at the taps in
        force (:meth:`PowerFlowNetwork.voltage_sensitivity`). The first call at an operating point
        also computes (and keeps) those of every site, in the same solve: a controller asks for
        all of them.

        :return: read-only array of shape ``(len(bus_phases()), 3)``, columns phases a, b, c.
        :raises KeyError: unknown bus or site, or a bus without three phases.
        :raises PowerFlowError: the operating point no longer converges (e.g. after a tap change).
        """
        return self._operating_point().voltage_sensitivity(self._target(bus, "voltage_sensitivity"))

    @with_one_blas_thread
    def loading_sensitivity(self, bus: str) -> np.ndarray:
        """d(loading)/dP (%/W) of every branch of :meth:`branches` w.r.t. per-phase active power
        drawn at ``bus``, as :meth:`voltage_sensitivity` (same operating point, linearization and
        arguments): each conductor's ``d|I|/dP = Re(conj(I) M dV/dP) / |I|`` with the complex
        ``dV/dP`` of :meth:`PowerFlowNetwork.voltage_derivatives`, through the branch's most loaded
        conductor (:meth:`BranchSet.loading_slopes_pct`).

        :return: read-only array of shape ``(len(branches().names), 3)``, columns phases a, b, c.
        :raises KeyError: unknown bus or site, or a bus without three phases.
        :raises PowerFlowError: the operating point no longer converges.
        """
        return self._operating_point().loading_sensitivity(self._target(bus, "loading_sensitivity"))

    def _target(self, bus: str, asked: str) -> Target:
        """The three-phase bus of ``bus`` (a site, or a bus) and the power factor of its site (unity
        where there is none).

        :raises KeyError: unknown, or not a three-phase bus.
        """
        site = self._sites.get(bus)
        bus_name = (site.bus if site else bus).lower()
        if bus_name not in self.feeder.bus_phases or len(self.feeder.bus_phases[bus_name]) != 3:
            raise KeyError(f"{asked}: {bus!r} is not a site or a three-phase bus of {self.feeder.name}")
        if site is None:
            site = next((s for s in self._sites.values() if s.bus.lower() == bus_name), None)
        return bus_name, site.power_factor if site else 1.0

    def _operating_point(self) -> OperatingPoint:
        """The operating point of the network in force at the last solve's loads (the file's, with no
        site drawing, before any solve): kept while both hold."""
        net = self._compile()
        if not isinstance(net, PowerFlowNetwork):  # the pandapower mode: linearize the exact model
            if self._point is None or self._exact is None or self._point.network is not self._exact:
                self._exact = self._build_network(self._injections.pq_nodes, self._injections.pq_band)
            net = self._exact
        loads = self._last
        if loads is None:
            s_pq = self._injections.s_pq([0.0], [{}])
            scale = self._branch_scale()
            if self._regulated is not None:  # the point where the generators hold their voltage
                scale = self._regulated.solve(net, scale, s_pq, self.spec.tolerance_pu)[1]
            loads = (scale, s_pq)
        if self._point is None or not self._point.holds(net, loads):
            sites = {
                s.name: (s.bus.lower(), s.power_factor)
                for s in self._sites.values()
                if len(self.feeder.bus_phases[s.bus.lower()]) == 3
            }
            self._point = OperatingPoint(
                net, loads, self._nodes, self._mon_idx, self._flows, self._switching, sites, self._regulated
            )
        return self._point
