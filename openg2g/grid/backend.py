"""``FeederGrid``: the grid backend on a distribution feeder.

Each solve draws the datacenter sites as wye constant-PQ loads at their buses, on top of the
feeder's own loads (OpenDSS load models, times the load scale), PV, storage and extra loads,
and reports the voltage magnitude of every monitored bus-phase.

Solvers (``GridSpec.solver``):

- ``exact`` (default): the phase-frame solver of :mod:`openg2g.grid.solver` (full phase
  impedance matrices, single- and two-phase laterals, per-phase regulator taps, delta loads).
  It matches OpenDSS to better than 1e-6 pu on the bundled feeders (tests/grid).
  power-grid-model was measured and not used: its three-phase-only nodes, wye-only asymmetric
  loads and single-ratio transformers cannot represent these feeders exactly, and this solver
  is faster on them (bench/bench_grid.py).
- ``pandapower``: pandapower ``runpp_3ph`` on the feeder's sequence-frame network, a reference
  mode that is approximate (loses untransposed coupling, treats laterals as three-phase, one tap
  per bank, constant-PQ loads) and slow; see :mod:`openg2g.grid.ppsolve`.

Regulators are fixed or ``auto``: in auto mode a regulator compares its line-drop-compensated
voltage (RegControl vreg/band/ptratio/ctprim/R/X from the feeder file, vreg/band overridable in
the scenario) with its band and moves one step after the voltage has been outside the band for
``delay_s``; the move takes effect at the next solve.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from openg2g.core.commands import (
    Command,
    SetCapacitor,
    SetLineInService,
    SetLoadScale,
    SetPVScale,
    SetRegulatorMode,
    SetStoragePower,
    SetTaps,
)
from openg2g.core.errors import CommandError, FeederError, PowerFlowError, ScenarioError
from openg2g.core.protocols import GridBackend, RegulatorInfo
from openg2g.core.state import PHASES, BranchSet, DatacenterState, GridState, frozen_array
from openg2g.grid.branches import BranchFlows
from openg2g.grid.feeders import Feeder, load_feeder, resolve_feeder
from openg2g.grid.model import RegControlModel
from openg2g.grid.network import (
    Switching,
    load_ports,
    node_index,
    transformer_winding_admittance,
)
from openg2g.grid.profile import Profile
from openg2g.grid.solver import CompiledNetwork, Solution
from openg2g.grid.validate import check_against_feeder
from openg2g.scenario.schema import GridSpec, SiteSpec

if TYPE_CHECKING:
    from openg2g.grid.ppsolve import PandapowerNetwork

__all__ = ["FeederGrid"]

_MAX_RETAPS = 50
"""Tap changes applied in place to a compiled network before it is rebuilt from scratch."""

_BATCH_COLUMNS = 1024
"""Operating points solved together in one batch call (bounds memory on long batches)."""

_SENS_DP_W = 1000.0
"""Per-phase active power step of the finite-difference sensitivity (W)."""


class _VoltageDependent(Protocol):
    load_model: str
    vminpu: float
    vmaxpu: float


def _band(element: _VoltageDependent | None) -> tuple[float, float] | None:
    """``(vminpu, vmaxpu)`` of an OpenDSS model-1 element, None for constant power."""
    if element is None or element.load_model == "constant_power":
        return None
    return (element.vminpu, element.vmaxpu)


def _tan_phi(pf: float) -> float:
    return math.tan(math.acos(min(max(pf, 0.0), 1.0)))


@dataclass
class _Injection:
    """A constant-PQ wye element (site, PV, storage, extra load) mapped onto PQ ports."""

    name: str
    ports: np.ndarray  # PQ-port index per phase used
    phases: tuple[str, ...]


@dataclass
class _Storage:
    name: str
    kw: float
    kwh: float
    soc0: float
    soc_min: float
    soc_max: float
    efficiency: float
    soc: float = 0.0
    p_kw: float = 0.0
    q_kvar: float = 0.0


@dataclass
class _Unit:
    """One regulated phase: transformer, its phase index, and its control."""

    transformer: str
    k: int
    control: RegControlModel | None
    timer_s: float = 0.0


@dataclass
class _Bank:
    info: RegulatorInfo
    units: list[_Unit]
    mode: str = "fixed"
    vreg_v: float | None = None
    band_v: float | None = None
    delay_s: float = 15.0
    ganged: bool = False
    initial_taps: tuple[int, ...] = field(default_factory=tuple)
    initial_mode: str = "fixed"


class FeederGrid(GridBackend):
    """Grid backend on a feeder (see the module docstring).

    :param feeder: the feeder.
    :param spec: the grid section of the scenario.
    :param sites: datacenter sites (name, bus, power factor).
    :param base_dir: folder that profile paths are relative to.
    """

    def __init__(self, feeder: Feeder, spec: GridSpec, sites: Sequence[SiteSpec], base_dir: Path) -> None:
        problems = check_against_feeder(feeder, spec, sites)
        if problems:
            raise ScenarioError(problems)
        if spec.source_pu is not None:
            source = dataclasses.replace(feeder.model.source, v_pu=spec.source_pu)
            feeder = dataclasses.replace(feeder, model=dataclasses.replace(feeder.model, source=source), _net=None)
        self.feeder = feeder
        self.spec = spec
        self._sites = {s.name: s for s in sites}
        model = feeder.model
        self._model = model
        self._nodes = node_index(model)
        self._ports = load_ports(model, self._nodes)
        self._load_names = [ld.name for ld in model.loads]
        self._flows = BranchFlows(model, self._nodes)
        base_dir = Path(base_dir)

        # PQ ports: one per node and voltage dependence carrying a site, PV, storage or extra load
        pq_nodes: list[int] = []
        pq_band: list[tuple[float, float]] = []
        port_of: dict[tuple[int, tuple[float, float] | None], int] = {}

        def ports_for(bus: str, phases: Sequence[str], element: _VoltageDependent | None = None) -> np.ndarray:
            band = _band(element)
            out = []
            for ph in phases:
                node = self._nodes.index[(bus.lower(), ph)]
                if (node, band) not in port_of:
                    port_of[(node, band)] = len(pq_nodes)
                    pq_nodes.append(node)
                    pq_band.append(band or (np.nan, np.nan))
                out.append(port_of[(node, band)])
            return np.array(out, dtype=int)

        self._site_inj = {s.name: _Injection(s.name, ports_for(s.bus, PHASES, s), PHASES) for s in sites}
        self._pv = [(_Injection(pv.name, ports_for(pv.bus, pv.phases, pv), tuple(pv.phases)), pv) for pv in spec.pv]
        self._pv_profiles = {
            pv.name: Profile.read(base_dir / pv.profile, f"grid.pv.{i}.profile")
            for i, pv in enumerate(spec.pv)
            if pv.profile
        }
        self._storage_inj = {}
        self._storage: dict[str, _Storage] = {}
        for st in spec.storage:
            phases = feeder.bus_phases[st.bus.lower()]
            self._storage_inj[st.name] = _Injection(st.name, ports_for(st.bus, phases), phases)
            self._storage[st.name] = _Storage(
                st.name, st.kw, st.kwh, st.soc0, st.soc_min, st.soc_max, st.efficiency, soc=st.soc0
            )
        self._extra = [
            (_Injection(x.name, ports_for(x.bus, x.phases, x), tuple(x.phases)), x) for x in spec.extra_loads
        ]
        self._extra_profiles = {
            x.name: Profile.read(base_dir / x.profile, f"grid.extra_loads.{i}.profile")
            for i, x in enumerate(spec.extra_loads)
            if x.profile
        }
        self._pq_band = np.array(pq_band, dtype=float).reshape(-1, 2)
        self._pq_nodes = np.array(pq_nodes, dtype=int)

        # monitored bus-phases
        if spec.monitored_buses:
            mon_buses = [b.lower() for b in spec.monitored_buses]
        else:
            skip = set(feeder.source_side_buses)
            mon_buses = [b for b in model.bus_kv if b not in skip]
        names = [f"{b}.{p}" for b in mon_buses for p in feeder.bus_phases[b]]
        self._bus_phases = tuple(names)
        self._mon_idx = np.array(
            [self._nodes.index[(b, p)] for b in mon_buses for p in feeder.bus_phases[b]], dtype=np.int64
        )

        # regulator banks
        controls = {rc.transformer: rc for rc in model.regcontrols}
        self._transformers = {t.name: t for t in model.transformers}
        self._banks: dict[str, _Bank] = {}
        for bank, info in feeder.regulators.items():
            units = [_Unit(t, k, controls.get(t)) for t, k in feeder.bank_units[bank]]
            rs = spec.regulators.get(bank) or next((v for k, v in spec.regulators.items() if k.lower() == bank), None)
            b = _Bank(info=info, units=units, ganged=feeder.is_ganged(bank))
            state0 = Switching.initial(model)
            taps = tuple(self._step(u.transformer, float(state0.taps_pu[u.transformer][u.k])) for u in units)
            if rs is not None:
                if rs.taps is not None:
                    taps = tuple(rs.taps)
                b.initial_mode = rs.mode
                b.vreg_v, b.band_v, b.delay_s = rs.vreg_v, rs.band_v, rs.delay_s
                b.info = dataclasses.replace(
                    info,
                    min_tap=info.min_tap if rs.min_tap is None else rs.min_tap,
                    max_tap=info.max_tap if rs.max_tap is None else rs.max_tap,
                )
                outside = [x for x in taps if not b.info.min_tap <= x <= b.info.max_tap]
                if outside:
                    raise FeederError(
                        f"regulator bank {bank}: taps {list(taps)} lie outside the scenario's range "
                        f"[{b.info.min_tap}, {b.info.max_tap}]"
                    )
            b.initial_taps = taps
            self._banks[bank] = b
        self._cap_names = {c.lower(): c for c in feeder.capacitors}
        self._line_names = {ln.lower(): ln for ln in feeder.lines}
        self._regulators = {k: b.info for k, b in self._banks.items()}
        self._storage_names = tuple(self._storage)
        self._net: CompiledNetwork | PandapowerNetwork | None = None
        self._net_prev: CompiledNetwork | PandapowerNetwork | None = None
        self._sens_cache: dict[str, np.ndarray] = {}
        self._last: tuple[np.ndarray, np.ndarray] | None = None
        self._retaps = 0
        self.reset(0)

    # ----------------------------------------------------------------------------- building
    @classmethod
    def from_spec(cls, spec: GridSpec, sites: Sequence[SiteSpec], base_dir: Path) -> FeederGrid:
        """Load ``spec.feeder`` (a bundled name, or a .dss path relative to ``base_dir``) and
        build the backend.

        :raises FeederError: unknown feeder or unreadable feeder file.
        :raises ScenarioError: the spec does not fit the feeder (see :func:`validate_grid`).
        """
        return cls(load_feeder(resolve_feeder(spec.feeder, base_dir)), spec, sites, base_dir)

    def _step(self, transformer: str, tap_pu: float) -> int:
        t = self._transformers[transformer]
        return round((tap_pu - 1.0) / t.step_pu)

    def _compile(self) -> CompiledNetwork | PandapowerNetwork:
        if self._net is None:
            if self.spec.solver == "pandapower":
                from openg2g.grid.ppsolve import PandapowerNetwork  # pandapower imported only for this mode

                self._net = PandapowerNetwork(
                    self.feeder, self._nodes, self._ports.load, self._pq_nodes, self._switching
                )
            else:
                net = CompiledNetwork(
                    self._model, self._nodes, self._ports, self._pq_nodes, self._switching, self._pq_band
                )
                if self._net_prev is not None and self._net_prev.u_last.shape[0] == net.u0.shape[0]:
                    net.u_last = self._net_prev.u_last[:, :1].copy()  # warm start across tap changes
                self._net = net
            self._retaps = 0
            self._sens_cache.clear()
        return self._net

    def _invalidate(self) -> None:
        if self._net is not None:
            self._net_prev = self._net
        self._net = None
        self._sens_cache.clear()

    # ----------------------------------------------------------------------------- protocol
    def bus_phases(self) -> tuple[str, ...]:
        """Monitored bus-phases ``"<bus>.<phase>"`` (all buses but the source side, or the
        scenario's ``monitored_buses``)."""
        return self._bus_phases

    def regulators(self) -> Mapping[str, RegulatorInfo]:
        """Regulator banks by name."""
        return dict(self._regulators)

    def storages(self) -> tuple[str, ...]:
        """Battery names."""
        return self._storage_names

    def branches(self) -> BranchSet:
        """Every line and transformer of the feeder (see :mod:`openg2g.grid.branches`)."""
        return self._flows.branches

    def reset(self, seed: int) -> None:
        """Initial taps, modes, capacitor and line states, load/PV scales, storage state of
        charge (the feeder has no randomness; ``seed`` is unused)."""
        self._net = None
        self._net_prev = None
        self._retaps = 0
        self._sens_cache.clear()
        self._last = None
        self._switching = Switching.initial(self._model)
        for name, closed in self.spec.capacitors.items():
            self._switching.capacitors[self._cap_names[name.lower()]] = closed
        for bank in self._banks.values():
            bank.mode = bank.initial_mode
            self._set_bank_taps(bank, bank.initial_taps)
            for u in bank.units:
                u.timer_s = 0.0
        self._load_scale = np.full(len(self._model.loads), float(self.spec.load_scale))
        self._pv_scale = {pv.name: pv.scale for _, pv in self._pv}
        self._pv_override: set[str] = set()
        for st in self._storage.values():
            st.soc, st.p_kw, st.q_kvar = st.soc0, 0.0, 0.0

    def _set_bank_taps(self, bank: _Bank, taps: Sequence[int]) -> None:
        self._set_unit_taps({(u.transformer, u.k): tap for u, tap in zip(bank.units, taps)})

    def _set_unit_taps(self, steps: Mapping[tuple[str, int], int]) -> None:
        """Put ``(transformer, phase index) -> tap step`` in force; a compiled network is updated
        in place (low-rank update) up to :data:`_MAX_RETAPS` times, then rebuilt."""
        new_taps: dict[str, np.ndarray] = {}
        for (name, k), step in steps.items():
            arr = new_taps.setdefault(name, self._switching.taps_pu[name].copy())
            arr[k] = 1.0 + step * self._transformers[name].step_pu
        changed = {n: a for n, a in new_taps.items() if not np.array_equal(a, self._switching.taps_pu[n])}
        if not changed:
            return
        net = self._net
        in_place = isinstance(net, CompiledNetwork) and self._retaps < _MAX_RETAPS
        for name, new in changed.items():
            if in_place:
                net.retap(self._transformers[name], self._switching.taps_pu[name], new)  # type: ignore[union-attr]
            self._switching.taps_pu[name] = new
        if in_place:
            self._retaps += 1
            self._sens_cache.clear()
        else:
            self._invalidate()

    def _bank_taps(self, bank: _Bank) -> tuple[int, ...]:
        return tuple(self._step(u.transformer, float(self._switching.taps_pu[u.transformer][u.k])) for u in bank.units)

    def taps(self) -> dict[str, tuple[int, ...]]:
        """Regulator bank -> per-phase tap steps in force."""
        return {name: self._bank_taps(b) for name, b in self._banks.items()}

    def can_batch(self) -> bool:
        """True when no regulator is in auto mode and there is no battery (steps independent)."""
        return not self._storage and all(b.mode == "fixed" for b in self._banks.values())

    # ----------------------------------------------------------------------------- injections
    def _s_pq(self, t_s: Sequence[float], loads: Sequence[Mapping[str, DatacenterState]]) -> np.ndarray:
        """Complex power drawn at each PQ port at each step (VA, > 0 = consumption), shape
        ``(n_ports, steps)``; each column is summed in the same order whatever the batch."""
        t = np.asarray(t_s, dtype=np.float64)
        s = np.zeros((len(self._pq_nodes), t.size), dtype=complex)
        sites: dict[str, np.ndarray] = {}
        for j, step_loads in enumerate(loads):
            for name, state in step_loads.items():
                if name not in self._site_inj:
                    raise PowerFlowError(
                        f"t={t[j]} s, feeder {self.feeder.name}: load for unknown site {name!r} "
                        f"(sites: {', '.join(self._site_inj) or 'none'})"
                    )
                column = sites.setdefault(name, np.zeros((len(self._site_inj[name].ports), t.size), dtype=complex))
                column[:, j] = np.asarray(state.p_w) + 1j * np.asarray(state.q_var)
        for name, values in sites.items():
            np.add.at(s, self._site_inj[name].ports, values)
        for inj, pv in self._pv:
            scale = np.full(t.size, self._pv_scale[pv.name])
            if pv.name in self._pv_profiles and pv.name not in self._pv_override:
                scale = self._pv_profiles[pv.name].at(t)
            p = pv.kw * 1000.0 * scale / len(inj.phases)
            np.add.at(s, inj.ports, np.broadcast_to(-(p + 1j * p * _tan_phi(pv.power_factor)), (len(inj.ports), t.size)))
        for name, inj in self._storage_inj.items():
            st = self._storage[name]
            n = len(inj.phases)
            np.add.at(s, inj.ports, -(st.p_kw + 1j * st.q_kvar) * 1000.0 / n)
        for inj, x in self._extra:
            scale = self._extra_profiles[x.name].at(t) if x.name in self._extra_profiles else np.ones(t.size)
            p = x.kw_per_phase * 1000.0 * scale
            np.add.at(s, inj.ports, np.broadcast_to(p + 1j * p * _tan_phi(x.power_factor), (len(inj.ports), t.size)))
        return s

    def _branch_scale(self) -> np.ndarray:
        return self._load_scale[self._ports.load][:, None]

    def _advance_storage(self, dt_s: float) -> None:
        for st in self._storage.values():
            if st.p_kw == 0.0 or dt_s <= 0:
                continue
            if st.p_kw > 0:  # discharging: the cells give more than the grid receives
                d_soc = -st.p_kw * dt_s / 3600.0 / st.efficiency / st.kwh
            else:
                d_soc = -st.p_kw * dt_s / 3600.0 * st.efficiency / st.kwh
            st.soc = min(max(st.soc + d_soc, st.soc_min), st.soc_max)
            if (st.p_kw > 0 and st.soc <= st.soc_min) or (st.p_kw < 0 and st.soc >= st.soc_max):
                st.p_kw = 0.0

    # ----------------------------------------------------------------------------- solving
    def _branch_results(self, sol: Solution) -> tuple[np.ndarray, np.ndarray]:
        """Conductor currents (A) and branch loading (%) of every column of ``sol``, at the taps
        and line states it was solved with."""
        current_a = self._flows.currents_a(sol.v, self._switching)
        return current_a, self._flows.loading_pct(current_a)

    def _state(
        self,
        t_s: float,
        sol: Solution,
        col: int,
        taps: Mapping[str, tuple[int, ...]],
        ok: bool,
        flows: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> GridState:
        """The reported state of column ``col`` (``flows`` from :meth:`_branch_results`); a
        non-converged step reports NaN values."""
        branches = self._flows.branches
        if not ok or flows is None:
            nan3 = np.full(3, np.nan)
            v_nan = np.full(len(self._bus_phases), np.nan)
            i_nan, loading_nan = np.full(len(branches), np.nan), np.full(len(branches.names), np.nan)
            return GridState(
                t_s, self._bus_phases, v_nan, taps, nan3, nan3, float("nan"), False, branches, i_nan, loading_nan
            )
        v = np.abs(sol.v[self._mon_idx, col]) / self._nodes.v_base_v[self._mon_idx]
        return GridState(
            t_s=t_s,
            bus_phases=self._bus_phases,
            v_pu=v,
            taps=taps,
            p_sub_w=sol.s_sub_va[:, col].real,
            q_sub_var=sol.s_sub_va[:, col].imag,
            losses_w=float(sol.losses_w[col]),
            converged=True,
            branches=branches,
            branch_current_a=flows[0][:, col],
            branch_loading_pct=flows[1][:, col],
        )

    def _failed(self, t_s: float, loads: Mapping[str, DatacenterState], sol: Solution) -> PowerFlowError:
        """The error of a step that did not converge, or converged only past the collapse point."""
        attached = ", ".join(f"{n}@{self._sites[n].bus}={s.power_w / 1e6:.3f} MW" for n, s in loads.items())
        lo, hi = float(self._load_scale.min(initial=1.0)), float(self._load_scale.max(initial=1.0))
        scale = f"{lo:g}" if lo == hi else f"{lo:g} to {hi:g}"
        level = f"datacenter loads: {attached or 'none'}; feeder load scale {scale}"
        if sol.collapsed[0]:
            v_pu = np.abs(sol.v[:, 0]) / self._nodes.v_base_v
            live = v_pu > 0  # de-energized nodes read 0
            k = int(np.flatnonzero(live)[np.argmin(v_pu[live])])
            return PowerFlowError(
                f"voltage collapse at t={t_s} s on feeder {self.feeder.name}: the feeder can carry only "
                f"{100 * sol.load_fraction[0]:.1f}% of this step's load (all loads and injections scaled "
                f"together) before the power flow reaches the nose of the P-V curve, where bus-phase "
                f"{self._nodes.names[k]} is at {v_pu[k]:.3f} pu ({level})"
            )
        return PowerFlowError(f"power flow did not converge at t={t_s} s on feeder {self.feeder.name} ({level})")

    def solve(self, t_s: float, loads: Mapping[str, DatacenterState], dt_s: float) -> GridState:
        """Solve at ``t_s``; in auto mode, regulators then update their timers and taps.

        :raises PowerFlowError: no convergence, or voltage collapse (the load is past the nose of
            the P-V curve: the message gives the share of it the feeder can carry), unless ``on_nonconvergence == "flag"``, which returns a state
            with ``converged=False`` and NaN voltages and powers.
        """
        self._advance_storage(dt_s)
        net = self._compile()
        s_pq = self._s_pq([t_s], [loads])
        scale = self._branch_scale()
        sol = net.solve(scale, s_pq)
        taps = self.taps()
        if not sol.converged:
            if self.spec.on_nonconvergence == "flag":
                return self._state(t_s, sol, 0, taps, False)
            raise self._failed(t_s, loads, sol)
        self._last = (scale, s_pq)
        self._sens_cache.clear()
        flows = self._branch_results(sol)
        self._regulate(sol, dt_s)
        return self._state(t_s, sol, 0, taps, True, flows)

    def solve_batch(
        self, t_s: Sequence[float], loads: Sequence[Mapping[str, DatacenterState]], dt_s: float
    ) -> list[GridState]:
        """Solve several steps in one call, :data:`_BATCH_COLUMNS` operating points at a time
        (equal to solving them one by one when :meth:`can_batch`; otherwise it does exactly that)."""
        if not self.can_batch() or len(t_s) < 2:
            return [self.solve(t, ld, dt_s) for t, ld in zip(t_s, loads)]
        out: list[GridState] = []
        for start in range(0, len(t_s), _BATCH_COLUMNS):
            chunk_t = list(t_s[start : start + _BATCH_COLUMNS])
            chunk_loads = list(loads[start : start + _BATCH_COLUMNS])
            net = self._compile()
            s_pq = self._s_pq(chunk_t, chunk_loads)
            scale = self._branch_scale()
            sol = net.solve(scale, s_pq, u_init=net.u_last[:, :1])
            if not sol.converged:
                out.extend(self.solve(t, ld, dt_s) for t, ld in zip(chunk_t, chunk_loads))
                continue
            self._last = (scale, s_pq[:, -1:])
            self._sens_cache.clear()
            taps = self.taps()
            flows = self._branch_results(sol)
            out.extend(self._state(t, sol, j, taps, True, flows) for j, t in enumerate(chunk_t))
        return out

    # ----------------------------------------------------------------------------- regulators
    def _regulate(self, sol: Solution, dt_s: float) -> None:
        moves: dict[tuple[str, int], int] = {}
        for bank in self._banks.values():
            if bank.mode != "auto":
                continue
            units = bank.units[:1] if bank.ganged else bank.units
            for u in units:
                rc = u.control
                if rc is None:
                    continue
                v120 = self._control_voltage(u, rc, sol)
                vreg = bank.vreg_v if bank.vreg_v is not None else rc.vreg_v
                band = bank.band_v if bank.band_v is not None else rc.band_v
                if abs(v120 - vreg) <= band / 2.0:
                    u.timer_s = 0.0
                    continue
                u.timer_s += dt_s
                if u.timer_s + 1e-9 < bank.delay_s:
                    continue
                u.timer_s = 0.0
                step = 1 if v120 < vreg else -1
                targets = bank.units if bank.ganged else [u]
                for tu in targets:
                    cur = self._step(tu.transformer, float(self._switching.taps_pu[tu.transformer][tu.k]))
                    moves[(tu.transformer, tu.k)] = min(max(cur + step, bank.info.min_tap), bank.info.max_tap)
        if moves:
            self._set_unit_taps(moves)

    def _control_voltage(self, u: _Unit, rc: RegControlModel, sol: Solution) -> float:
        """Line-drop-compensated regulator voltage on the 120 V base (V)."""
        t = self._transformers[u.transformer]
        k = u.k if not (t.n_phases > 1) else rc.ptphase - 1
        w1, w2 = t.windings
        i1 = self._nodes.index[(w1.bus, w1.phases[k])]
        i2 = self._nodes.index[(w2.bus, w2.phases[k])]
        v1, v2 = sol.v[i1, 0], sol.v[i2, 0]
        y, a = transformer_winding_admittance(t, float(self._switching.taps_pu[t.name][k]))
        i_line = y * (v1 / a - v2)
        v_ctrl = v2 / rc.ptratio - complex(rc.r_v, rc.x_v) * i_line / rc.ctprim_a
        return float(abs(v_ctrl))

    # ----------------------------------------------------------------------------- commands
    def apply(self, command: Command, t_s: float) -> None:
        """Carry out a grid command (see :mod:`openg2g.core.commands`).

        :raises CommandError: unknown element, wrong number of taps, value out of range.
        """
        if isinstance(command, SetTaps):
            bank = self._bank(command.bank)
            info = bank.info
            taps = tuple(command.taps)
            if len(taps) != len(info.phases):
                raise CommandError(
                    f"set_taps {info.bank}: {len(taps)} taps given, the bank regulates phases {', '.join(info.phases)}"
                )
            bad = [x for x in taps if not info.min_tap <= x <= info.max_tap]
            if bad:
                raise CommandError(f"set_taps {info.bank}: taps {bad} outside [{info.min_tap}, {info.max_tap}]")
            if bank.ganged and len(set(taps)) > 1:
                raise CommandError(
                    f"set_taps {info.bank}: taps {list(taps)} differ per phase, but the bank is one "
                    f"{len(info.phases)}-phase (ganged) regulator with a single tap: give the same tap on every phase"
                )
            self._set_bank_taps(bank, taps)
        elif isinstance(command, SetRegulatorMode):
            bank = self._bank(command.bank)
            if command.mode not in ("fixed", "auto"):
                raise CommandError(f"set_regulator_mode {command.bank}: mode {command.mode!r} (fixed or auto)")
            bank.mode = command.mode
            for u in bank.units:
                u.timer_s = 0.0
        elif isinstance(command, SetCapacitor):
            name = self._cap_names.get(command.name.lower())
            if name is None:
                raise CommandError(
                    f"set_capacitor: unknown capacitor {command.name!r} (capacitors: {', '.join(self._cap_names) or 'none'})"
                )
            self._switching.capacitors[name] = bool(command.closed)
            self._invalidate()
        elif isinstance(command, SetLineInService):
            name = self._line_names.get(command.line.lower())
            if name is None:
                raise CommandError(f"set_line_in_service: unknown line {command.line!r} on feeder {self.feeder.name}")
            self._switching.lines[name] = bool(command.in_service)
            self._invalidate()
        elif isinstance(command, SetStoragePower):
            st = self._storage.get(command.name)
            if st is None:
                raise CommandError(
                    f"set_storage_power: unknown battery {command.name!r} (batteries: {', '.join(self._storage) or 'none'})"
                )
            if math.hypot(command.p_kw, command.q_kvar) > st.kw * (1 + 1e-9):
                raise CommandError(
                    f"set_storage_power {st.name}: |{command.p_kw} kW + j{command.q_kvar} kvar| exceeds the "
                    f"{st.kw} kW rating"
                )
            st.p_kw, st.q_kvar = float(command.p_kw), float(command.q_kvar)
        elif isinstance(command, SetLoadScale):
            if not (command.scale >= 0 and math.isfinite(command.scale)):
                raise CommandError(f"set_load_scale: scale must be >= 0, got {command.scale}")
            if command.load is None:
                self._load_scale[:] = command.scale
            else:
                names = [n.lower() for n in self._load_names]
                if command.load.lower() not in names:
                    raise CommandError(f"set_load_scale: unknown load {command.load!r} on feeder {self.feeder.name}")
                self._load_scale[names.index(command.load.lower())] = command.scale
        elif isinstance(command, SetPVScale):
            if not 0.0 <= command.scale <= 1.0:
                raise CommandError(f"set_pv_scale: scale must be within [0, 1], got {command.scale}")
            targets = list(self._pv_scale) if command.pv is None else [command.pv]
            for name in targets:
                if name not in self._pv_scale:
                    raise CommandError(f"set_pv_scale: unknown PV {name!r} (PV: {', '.join(self._pv_scale) or 'none'})")
                self._pv_scale[name] = command.scale
                self._pv_override.add(name)
        else:
            raise CommandError(f"the grid backend does not handle {type(command).__name__}")

    def _bank(self, name: str) -> _Bank:
        bank = self._banks.get(name) or self._banks.get(name.lower())
        if bank is None:
            raise CommandError(f"unknown regulator bank {name!r} (banks: {', '.join(self._banks) or 'none'})")
        return bank

    # ----------------------------------------------------------------------------- sensitivity
    def voltage_sensitivity(self, bus: str) -> np.ndarray:
        """dV/dP (pu/W) of every monitored bus-phase w.r.t. per-phase active power drawn at
        ``bus`` (a bus name, or a site name meaning its bus), Q following at the site's power
        factor (unity if no site is there). Central finite differences of +/-1 kW per phase
        around the last solved operating point, at the taps in force.

        :return: read-only array of shape ``(len(bus_phases()), 3)``, columns phases a, b, c.
        :raises KeyError: unknown bus or site, or a bus without three phases.
        """
        site = self._sites.get(bus)
        bus_name = (site.bus if site else bus).lower()
        if bus_name not in self.feeder.bus_phases or len(self.feeder.bus_phases[bus_name]) != 3:
            raise KeyError(f"voltage_sensitivity: {bus!r} is not a site or a three-phase bus of {self.feeder.name}")
        if site is None:
            site = next((s for s in self._sites.values() if s.bus.lower() == bus_name), None)
        pf = site.power_factor if site else 1.0
        key = f"{bus_name}@{pf}"
        if key in self._sens_cache:
            return self._sens_cache[key]
        net = self._compile()
        scale, s_pq = self._last if self._last is not None else (self._branch_scale(), self._s_pq([0.0], [{}]))
        nodes = [self._nodes.index[(bus_name, p)] for p in PHASES]
        constant = np.isnan(self._pq_band[:, 0])  # perturb a constant-power port: dP is then exact
        extra = [n for n in nodes if n not in set(self._pq_nodes[constant].tolist())]
        if extra or not isinstance(net, CompiledNetwork):
            pq_nodes = np.concatenate([self._pq_nodes, np.array(extra, dtype=int)])
            constant = np.concatenate([constant, np.ones(len(extra), dtype=bool)])
            band = np.concatenate([self._pq_band, np.full((len(extra), 2), np.nan)])
            net = CompiledNetwork(self._model, self._nodes, self._ports, pq_nodes, self._switching, band)
            s_pq = np.concatenate([s_pq, np.zeros((len(extra), 1), dtype=complex)])
            net.solve(scale, s_pq)
        else:
            pq_nodes = self._pq_nodes
        pos = [int(np.flatnonzero((pq_nodes == n) & constant)[0]) for n in nodes]
        ds = _SENS_DP_W * (1.0 + 1j * _tan_phi(pf))
        cols = np.repeat(s_pq, 6, axis=1)
        for k, p in enumerate(pos):
            cols[p, 2 * k] += ds
            cols[p, 2 * k + 1] -= ds
        sol = net.solve(scale, cols, tol_pu=1e-12, max_iter=200, u_init=net.u_last[:, :1])
        vm = np.abs(sol.v[self._mon_idx]) / self._nodes.v_base_v[self._mon_idx][:, None]
        sens = (vm[:, 0::2] - vm[:, 1::2]) / (2 * _SENS_DP_W)
        out = frozen_array(sens)
        self._sens_cache[key] = out
        return out
