"""``PandapowerGrid``: the grid backend on any pandapower net, solved balanced.

The scenario's ``grid.pandapower`` names the net (:mod:`openg2g.grid.nets.source`). Each datacenter
site is a load at its bus drawing the sum of its per-phase P and Q (W, var): constant power, or with
``load_model: opendss`` OpenDSS's load model 1 with the site's ``vminpu``/``vmaxpu``, as on a feeder
(:mod:`openg2g.grid.nets.lowvoltage`). They come on top of the net's own loads (times the load
scale), static generators, generators (PV buses at their voltage setpoints, reactive limits not
enforced, as in ``runpp``'s default), wards and shunts. The power flow is pandapower's balanced
positive-sequence model, solved by :class:`~openg2g.grid.nets.case.PandapowerCase` (a batched Newton
on pandapower's own ``Ybus``).

**Disturbances.** ``set_line_in_service`` takes a line or transformer out of service or puts it
back (:mod:`openg2g.grid.nets.switching`): a bus cut off from every external grid is de-energized
(its bus-phases read 0 pu, ``energized`` False in the state) and a site there draws nothing
(:meth:`PandapowerGrid.unsupplied_sites`). ``apply_fault`` places a three-phase fault to ground,
``clear_fault`` removes it, and ``set_source_voltage`` sets every external grid's voltage magnitude
(:mod:`openg2g.grid.nets.disturbances`; unbalanced ones are refused). While a fault or a source
voltage command is in force, every constant-power injection (the net's loads, static generators,
storage and wards' constant part, and the constant-power sites) is the constant admittance that
draws its power at :data:`~openg2g.grid.nets.lowvoltage.DISTURBANCE_VMINPU` (0.7 pu) wherever its
bus is below that, so that a faulted net has a solution; above 0.7 pu it is the constant power it
always is. Generators hold their voltage setpoints throughout, at whatever reactive power that
takes (no reactive limits): a generator's bus, and the buses close to it, stay up during a fault
nearby more than behind a real machine's reactance. The lower-branch check
(:data:`LOWER_BRANCH_PU`) is not made then: no bus under 0.5 pu draws constant power, and voltages
near a fault are legitimately low.

**Bus-phases.** A balanced solution has equal magnitudes on the three phases, and every bus is
reported as three bus-phases ``"<bus>.a"``, ``"<bus>.b"``, ``"<bus>.c"`` with the same voltage
(pu of the bus's ``vn_kv``), so that the engine, outputs, plots and controllers treat a net like a
feeder. ``<bus>`` follows the naming rule of :mod:`openg2g.grid.nets.source`. The monitored buses are
``grid.monitored_buses``, or every energized bus but those of external grids.

**Sensitivity.** ``voltage_sensitivity(bus)`` is dVm/dP of the monitored bus-phases w.r.t. one
watt drawn on one phase at ``bus`` (a watt of the site's total), reactive power following at the
site's power factor: the same column for phases a, b and c. ``loading_sensitivity(bus)`` is d(loading)/dP of
every branch from the same linearization.

**Results as a net.** :meth:`PandapowerGrid.results_net` (for given site loads) and
:func:`openg2g.scenario.net_results.to_pandapower_results` (for a step of a finished run) give the net back with every site as
a load and ``res_bus`` (``vm_pu``, ``va_degree``), ``res_line`` and ``res_trafo`` filled from this
backend's solution, as ``runpp`` would fill them.

**Branches.** Every line and two-winding transformer (out of service: 0 A), with the current at both ends
(``terminal`` 1 = from/HV end, 2 = to/LV end; three equal phase conductors each) and loading as
pandapower reports it: a line's ``max(i_from, i_to) / (max_i_ka * df * parallel)``, a
transformer's ``max(i_hv * vn_hv_kv, i_lv * vn_lv_kv) * sqrt(3) / (sn_mva * df * parallel)``
(``trafo_loading="current"``). pandapower has no emergency rating: it equals the normal one, flagged
as a default. Three-winding transformers, impedances and switches are not reported.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np

from openg2g.core.commands import (
    ApplyFault,
    ClearFault,
    Command,
    SetLineInService,
    SetLoadScale,
    SetSourceVoltage,
)
from openg2g.core.errors import CommandError, PowerFlowError, ScenarioError
from openg2g.core.interfaces import GridBackend, RegulatorInfo
from openg2g.core.state import PHASES, BranchSet, DatacenterState, GridState, column_rows, frozen_array
from openg2g.core.threads import with_one_blas_thread
from openg2g.grid.config import GridSite, GridSpec, monitored_at_levels, tan_phi, unknown_site
from openg2g.grid.nets.case import PandapowerCase
from openg2g.grid.nets.disturbances import NetFault, net_fault, source_magnitude
from openg2g.grid.nets.lowvoltage import DISTURBANCE_BAND, Band, VoltageDependence, site_band
from openg2g.grid.nets.source import NET_RATINGS, BusNames, load_net
from openg2g.grid.nets.switching import BranchKey, Topology, branch_key, conducting, switched_net, topology

if TYPE_CHECKING:
    from pandapower.auxiliary import pandapowerNet

__all__ = ["LOWER_BRANCH_PU", "PandapowerGrid", "check_net_spec"]

_BATCH_COLUMNS = 1024
"""Operating points solved together in one call (bounds memory on long batches)."""

_SQRT3 = math.sqrt(3.0)

_FEEDER_ONLY = ("regulators", "capacitors", "pv", "storage", "extra_loads")
"""Grid options of feeders that a pandapower net does not take (its own elements stand for them)."""

_SCALED_TABLES = ("load", "sgen", "storage", "motor")
"""Element tables pandapower folds into the buses' constant power, each row times its ``scaling``."""

_WARD_TABLES = ("ward", "xward")
"""Element tables whose constant power (``ps_mw``, ``qs_mvar``) pandapower folds into the buses'."""


LOWER_BRANCH_PU = 0.5
"""A solution with an energized bus below this voltage (pu) counts as not converged. A load fed at
voltage E through any impedance reaches the nose of its P-V curve at ``E / (2 cos((theta - phi) / 2))``
or above (theta the impedance angle, phi the load's), never below E / 2: a Newton solution under
half the source voltage lies on the lower branch, a state no network operates in, and a warm start
after a collapsed step can land there."""


def _upper_branch(v: np.ndarray) -> np.ndarray:
    """Per column of solved voltages ``v`` (pu, ``(n_bus, K)``), whether every energized bus (a
    nonzero voltage) is at :data:`LOWER_BRANCH_PU` or above."""
    magnitude = np.abs(v)
    return np.all((magnitude >= LOWER_BRANCH_PU) | (magnitude == 0), axis=0)


def check_net_spec(net: pandapowerNet, spec: GridSpec, sites: Sequence[GridSite]) -> list[tuple[str, str]]:
    """Problems of ``spec``/``sites`` on ``net`` as ``(field path, message)``: feeder-only options,
    unknown or de-energized site and monitored buses."""
    names = BusNames(net)
    problems: list[tuple[str, str]] = []
    for field in _FEEDER_ONLY:
        if getattr(spec, field):
            problems.append((f"grid.{field}", "not available on a pandapower net: add the element to the net itself"))
    if spec.capacitor_control != "fixed":
        problems.append(("grid.capacitor_control", "a pandapower net has no capacitor controls to run (give fixed)"))
    if spec.initial_controls != "stated":
        problems.append(("grid.initial_controls", "a balanced pandapower net has no controls to settle (give stated)"))
    if spec.branch_ratings:
        problems.append(("grid.branch_ratings", NET_RATINGS))
    if spec.solver != "exact":
        problems.append(("grid.solver", "a pandapower net is always solved balanced (solver: exact)"))
    live = _energized(net)

    def bus_ok(path: str, bus: str) -> None:
        b = names.bus(bus)
        if b is None:
            problems.append(
                (path, f"unknown bus {bus!r} on net {spec.pandapower} (buses named {names.rule()}: {names.some()})")
            )
        elif b not in live:
            problems.append(
                (path, f"bus {bus!r} of net {spec.pandapower} is out of service or not connected to an external grid")
            )

    for i, site in enumerate(sites):
        bus_ok(f"datacenters.{i}.bus", site.bus)
    for i, bus in enumerate(spec.monitored_buses or []):
        bus_ok(f"grid.monitored_buses.{i}", bus)
    site_names = [s.name for s in sites]
    for name in spec.site_transformers:
        if name not in site_names:
            problems.append(
                (
                    f"grid.site_transformers.{name}",
                    f"no datacenter site {name!r} (sites: {', '.join(site_names) or 'none'})",
                )
            )
    return problems


def _add_site_transformers(net: pandapowerNet, spec: GridSpec, sites: Sequence[GridSite]) -> dict[str, int]:
    """Add each site's step-up transformer (``grid.site_transformers``) to ``net``: a new bus
    ``openg2g:<site>`` on its LV side and a transformer of the same name; the pandapower bus each
    site draws at (that new bus, or the site's own bus)."""
    import pandapower as pp

    names = BusNames(net)
    attach: dict[str, int] = {}
    for site in sites:
        bus = names.bus(site.bus)
        assert bus is not None  # checked by check_net_spec
        t = spec.site_transformers.get(site.name)
        if t is not None:
            lv = pp.create_bus(net, vn_kv=t.vn_lv_kv, name=f"openg2g:{site.name}")
            pp.create_transformer_from_parameters(
                net,
                hv_bus=bus,
                lv_bus=lv,
                sn_mva=t.sn_mva,
                vn_hv_kv=float(net.bus.at[bus, "vn_kv"]),
                vn_lv_kv=t.vn_lv_kv,
                vkr_percent=t.vkr_percent,
                vk_percent=t.vk_percent,
                pfe_kw=0.0,
                i0_percent=0.0,
                name=f"openg2g:{site.name}",
            )
            bus = int(lv)
        attach[site.name] = bus
    return attach


def _energized(net: pandapowerNet) -> set[int]:
    """In-service buses (connectivity is checked by the solver: a bus cut off maps nowhere)."""
    return {int(b) for b in net.bus.index[net.bus["in_service"].astype(bool)]}


def _branch_set(net: pandapowerNet) -> BranchSet:
    """Lines, then two-winding transformers: two terminals of three phase conductors each."""
    names: list[str] = []
    rating_ka: list[float] = []
    for idx, line in net.line.iterrows():
        names.append(f"line.{idx}")
        rating_ka += [float(line["max_i_ka"] * line["df"] * line["parallel"])] * 2
    for idx, t in net.trafo.iterrows():
        names.append(f"transformer.{idx}")
        s_mva = float(t["sn_mva"] * t["df"] * t["parallel"])
        rating_ka += [s_mva / (_SQRT3 * float(t["vn_hv_kv"])), s_mva / (_SQRT3 * float(t["vn_lv_kv"]))]
    n = len(names)
    rating_a = np.repeat(np.array(rating_ka) * 1000.0, 3)
    return BranchSet(
        names=tuple(names),
        branch=np.repeat(np.arange(n), 6),
        terminal=np.tile(np.repeat([1, 2], 3), n),
        phase=PHASES * (2 * n),
        rating_a=rating_a,
        emergency_a=rating_a,
        default_rating=np.zeros(6 * n, dtype=bool),
        default_emergency=np.ones(6 * n, dtype=bool),
    )


class PandapowerGrid(GridBackend):
    """Grid backend on a pandapower net (see the module docstring).

    :param net: the net (not modified: the backend keeps its own copy).
    :param label: the net's name in messages (``grid.pandapower``).
    :param spec: the grid section of the scenario (``source_pu`` sets every external grid's
        ``vm_pu``; ``load_scale`` multiplies the net's own loads; limits, monitored buses and
        ``on_nonconvergence`` as for feeders).
    :param sites: datacenter sites (name, bus, power factor, load model).
    :raises ScenarioError: the spec or a site does not fit the net.
    :raises FeederError: the net's own power flow does not converge.
    """

    def __init__(self, net: pandapowerNet, label: str, spec: GridSpec, sites: Sequence[GridSite]) -> None:
        problems = check_net_spec(net, spec, sites)
        if problems:
            raise ScenarioError(problems)
        self.label = label
        self.spec = spec
        self.net = copy.deepcopy(net)
        if spec.source_pu is not None:
            self.net.ext_grid["vm_pu"] = spec.source_pu
        attach = _add_site_transformers(self.net, spec, sites)
        self.case = PandapowerCase(self.net, label)
        """The case every solve uses: the net at the branch states in force, with the faults and
        source voltage in force."""
        self.names = BusNames(self.net)
        self._sites = {s.name: s for s in sites}
        self._site_pp_bus = attach
        """Site -> pandapower bus it draws at: its bus, or its transformer's LV bus."""
        for b in attach.values():
            self._internal(b)
        self._site_band = {s.name: site_band(s.vminpu, s.vmaxpu) for s in sites if s.load_model != "constant_power"}
        """Site with ``load_model: opendss`` -> its band."""
        self._bus_phases, monitored = self._monitored(spec, sites)
        self._monitored_pp = monitored
        self._branches = _branch_set(self.net)
        self._base = topology(self.net, self.case, attach, monitored)
        self._topo = self._base
        self._topologies: dict[frozenset[tuple[BranchKey, bool]], Topology] = {frozenset(): self._base}
        """Branch states (those that differ from the net's) -> the view of the net at them."""
        self._starts = self._branches.starts
        self.load_scale = spec.load_scale
        self._lines: dict[BranchKey, bool] = {}
        """Branches commanded to a state other than the net's own -> that state (True = conducting)."""
        self._faults: dict[str, NetFault] = {}
        self._source_pu: float | None = None
        """The external grids' voltage magnitude set by a command (pu), None while none is in force."""
        self._held = self._held_buses()
        self._v_last: np.ndarray | None = None
        self._dep_last: VoltageDependence | None = None
        """The voltage-dependent injections of the last solution (one operating point), if any."""
        self._sens_cache: dict[str, np.ndarray] = {}
        self._w_per_pu = self.case.base_mva * 1e6
        """W per pu of baseMVA."""

    @classmethod
    def from_spec(cls, spec: GridSpec, sites: Sequence[GridSite], base_dir: Path | None) -> PandapowerGrid:
        """Load ``spec.pandapower`` (a path relative to ``base_dir``, or a network name) and build the backend.

        :raises FeederError: the net cannot be read or solved (:func:`~openg2g.grid.nets.source.load_net`).
        :raises ScenarioError: the spec does not fit the net.
        """
        assert spec.pandapower is not None
        return cls(load_net(spec.pandapower, base_dir, spec.trust_pickle), spec.pandapower, spec, sites)

    def _internal(self, bus: int) -> int:
        """The internal bus of pandapower bus ``bus`` in the net as loaded.

        :raises ScenarioError: the bus is cut off from every external grid.
        """
        k = self.case.pp_bus.get(bus)
        if k is None:
            label = dict(zip(self.names.index, self.names.names))[bus]
            raise ScenarioError(
                [("grid.pandapower", f"bus {label!r} of net {self.label} is not connected to an external grid")]
            )
        return k

    def _monitored(self, spec: GridSpec, sites: Sequence[GridSite]) -> tuple[tuple[str, ...], list[int]]:
        """The monitored bus-phases and the pandapower bus of each monitored bus: of
        ``monitored_buses``, or of every bus but the external grids', those at the levels that count
        (:func:`openg2g.grid.config.monitored_at_levels`)."""
        if spec.monitored_buses:
            chosen = [self.names.bus(b) for b in spec.monitored_buses]
        else:
            slack = {int(b) for b in self.net.ext_grid.loc[self.net.ext_grid["in_service"].astype(bool), "bus"]}
            chosen = [b for b in self.names.index if b in self.case.pp_bus and b not in slack]
        known = [b for b in chosen if b is not None]
        site_buses = {b for b in (self.names.bus(s.bus) for s in sites) if b is not None}
        picked = monitored_at_levels(spec, known, lambda b: float(self.net.bus.at[b, "vn_kv"]), site_buses)
        label = dict(zip(self.names.index, self.names.names))
        bus_phases = tuple(f"{label[b]}.{ph}" for b in picked for ph in PHASES)
        return bus_phases, picked

    def _held_buses(self) -> dict[int, str]:
        """Pandapower bus -> what holds its voltage (external grids, generators), for every bus of
        a slack or PV bus of the net as loaded (buses a closed bus-bus switch fuses share it)."""
        holders: dict[int, list[str]] = {}
        for table, what in (("ext_grid", "external grid"), ("gen", "generator")):
            if table not in self.net or not len(self.net[table]):
                continue
            rows = self.net[table]
            for idx in rows.index[rows["in_service"].astype(bool)]:
                k = self.case.pp_bus.get(int(rows.at[idx, "bus"]))
                if k is not None:
                    holders.setdefault(k, []).append(f"{what} {idx}")
        held_internal = {int(k) for k in np.concatenate([self.case.ref, self.case.pv])}
        return {
            b: " and ".join(holders.get(k, ["a generator"])) for b, k in self.case.pp_bus.items() if k in held_internal
        }

    # ----------------------------------------------------------------------------- protocol
    def bus_phases(self) -> tuple[str, ...]:
        """Monitored bus-phases ``"<bus>.a|b|c"`` (three equal entries per bus)."""
        return self._bus_phases

    def regulators(self) -> Mapping[str, RegulatorInfo]:
        """None: a net's tap changers are fixed at their ``tap_pos``."""
        return {}

    def storages(self) -> tuple[str, ...]:
        """None."""
        return ()

    def branches(self) -> BranchSet:
        """Every line and two-winding transformer of the net."""
        return self._branches

    def can_batch(self) -> bool:
        """Always: nothing in the net has memory between steps."""
        return True

    def unsupplied_sites(self) -> frozenset[str]:
        """The sites whose bus the branches out of service cut off from every external grid."""
        return self._topo.unsupplied

    def reset(self, seed: int) -> None:
        """The scenario's load scale, the net's own branch states, no fault, the net's own source
        voltage; the warm start is the net's own solution and no Jacobian is kept (no randomness:
        every run from a reset gives the same bits)."""
        self.load_scale = self.spec.load_scale
        self._lines.clear()
        self._faults.clear()
        self._source_pu = None
        self._topo = self._base
        self.case = self._base.case
        self._v_last = None
        self._dep_last = None
        for view in self._topologies.values():
            view.case.forget()
        self._sens_cache.clear()

    @property
    def _disturbed(self) -> bool:
        """Whether a fault or a source voltage command is in force (the low-voltage model applies)."""
        return bool(self._faults) or self._source_pu is not None

    # ----------------------------------------------------------------------------- solving
    def injections(self, t_s: Sequence[float], loads: Sequence[Mapping[str, DatacenterState]]) -> np.ndarray:
        """Specified bus injections (pu, ``(n_bus, K)``): the net's own at the load scale, minus each
        supplied site's P + jQ (a site cut off draws nothing).

        :raises UnknownNameError: a load for a site that is not on this grid.
        """
        topo = self._topo
        s = np.repeat((self.case.s_spec + (self.load_scale - 1.0) * topo.s_load)[:, None], len(t_s), axis=1)
        to_pu = 1.0 / (self.case.base_mva * 1e6)
        for j, step in enumerate(loads):
            for name, state in step.items():
                k = topo.site_bus.get(name)
                if k is None:
                    if name in self._sites:
                        continue
                    raise unknown_site(t_s[j], f"net {self.label}", name, self._sites)
                s[k, j] -= (float(np.sum(state.p_w)) + 1j * float(np.sum(state.q_var))) * to_pu
        return s

    def _band_parts(self, loads: Sequence[Mapping[str, DatacenterState]]) -> dict[Band, np.ndarray]:
        """The injections (pu, ``(n_bus, K)``) of the supplied sites with ``load_model: opendss``,
        by band."""
        parts: dict[Band, np.ndarray] = {}
        if not self._site_band:
            return parts
        to_pu = 1.0 / (self.case.base_mva * 1e6)
        for j, step in enumerate(loads):
            for name, state in step.items():
                band = self._site_band.get(name)
                k = self._topo.site_bus.get(name)
                if band is None or k is None:
                    continue
                part = parts.setdefault(band, np.zeros((self.case.n_bus, len(loads)), dtype=complex))
                part[k, j] -= (float(np.sum(state.p_w)) + 1j * float(np.sum(state.q_var))) * to_pu
        return parts

    def _dependence(self, s_spec: np.ndarray, parts: Mapping[Band, np.ndarray]) -> VoltageDependence | None:
        """The voltage-dependent part of injections ``s_spec`` (pu, ``(n_bus, K)``): the opendss
        sites' ``parts``, and while disturbed every other injection but the generators'; None
        when all of it is constant power."""
        pairs = [(part, band) for band, part in parts.items()]
        if self._disturbed:
            rest = s_spec - (self.case.s_spec - self.case.s_demand)[:, None]
            for part in parts.values():
                rest = rest - part
            pairs.append((rest, DISTURBANCE_BAND))
        return VoltageDependence(pairs) if pairs else None

    def _demand(
        self, t_s: Sequence[float], loads: Sequence[Mapping[str, DatacenterState]]
    ) -> tuple[np.ndarray, VoltageDependence | None]:
        """The injections of :meth:`injections` and their voltage-dependent part."""
        s = self.injections(t_s, loads)
        return s, self._dependence(s, self._band_parts(loads))

    def _failed(self, t_s: float, loads: Mapping[str, DatacenterState]) -> PowerFlowError:
        """The error of a step that did not converge, with the share of the sites' load the net
        can carry (:meth:`_carryable_fraction`)."""
        attached = ", ".join(f"{n}@{self._sites[n].bus}={s.power_w / 1e6:.3f} MW" for n, s in loads.items())
        level = f"datacenter loads: {attached or 'none'}; net load scale {self.load_scale:g}{self._disturbances()}"
        share = self._carryable_fraction(t_s, loads) if loads else None
        if share is None:
            return PowerFlowError(f"power flow did not converge at t={t_s} s on net {self.label} ({level})")
        total_mw = sum(s.power_w for s in loads.values()) / 1e6
        return PowerFlowError(
            f"power flow did not converge at t={t_s} s on net {self.label} ({level}): the net carries at most "
            f"{100 * share:.1f}% of this datacenter load ({share * total_mw:.3f} MW of {total_mw:.3f} MW) before its "
            "power flow reaches the nose of the P-V curve"
        )

    def _disturbances(self) -> str:
        """The disturbances in force, for messages ("" when none)."""
        words = [f"fault {f.name} at {f.label} ({f.r_ohm:g} ohm)" for f in self._faults.values()]
        words += [f"{table}.{index} {'in' if on else 'out of'} service" for (table, index), on in self._lines.items()]
        if self._source_pu is not None:
            words.append(f"source at {self._source_pu:g} pu")
        return "; " + ", ".join(words).replace("trafo.", "transformer.") if words else ""

    def _carryable_fraction(self, t_s: float, loads: Mapping[str, DatacenterState]) -> float | None:
        """The largest share (to 0.1 %) of the sites' load at which the step still converges, the
        net's own loads held; None if it does not converge even without the sites."""
        without = self.injections([t_s], [{}])
        sites = self.injections([t_s], [loads]) - without
        parts = self._band_parts([loads])

        def converges(share: float) -> bool:
            s = without + share * sites
            dep = self._dependence(s, {band: share * part for band, part in parts.items()})
            return bool(self.case.solve(s, dependence=dep).converged[0])

        lo, hi = 0.0, 1.0
        if not converges(0.0):
            return None
        while hi - lo > 1e-3:
            mid = 0.5 * (lo + hi)
            if converges(mid):
                lo = mid
            else:
                hi = mid
        return lo

    def _monitored_rows(self, x: np.ndarray) -> np.ndarray:
        """Rows of ``x`` (per internal bus) for each monitored bus-phase, 0 where de-energized."""
        rows = x[self._topo.mon_idx]
        if self._topo.all_live:
            return rows
        live = self._topo.live.reshape((-1,) + (1,) * (x.ndim - 1))
        return np.where(live, rows, 0.0)

    def _states(
        self,
        t_s: Sequence[float],
        s_spec: np.ndarray,
        dep: VoltageDependence | None,
        v: np.ndarray,
        ok: np.ndarray,
    ) -> list[GridState]:
        """The reported states of solutions ``v`` of injections ``s_spec`` (pu, the part ``dep``
        voltage-dependent); NaN where not ``ok``."""
        base_w = self.case.base_mva * 1e6
        s_calc = self.case.injections(v)
        s_drawn = self.case.drawn(v, s_spec, dep)
        s_slack = (s_calc[self.case.ref] - s_drawn[self.case.ref]).sum(axis=0) * base_w
        losses = s_calc.real.sum(axis=0) * base_w
        vm = self._monitored_rows(np.abs(v))
        i_from, i_to = self.case.branch_currents_ka(v)
        stacked = np.vstack([i_from, i_to, np.zeros((1, v.shape[1]))])
        current_a = stacked[self._topo.gather] * 1000.0
        loading = np.maximum.reduceat(current_a * (100.0 / self._branches.rating_a)[:, None], self._starts, axis=0)
        no_taps: Mapping[str, tuple[int, ...]] = MappingProxyType({})
        p_sub = np.repeat(s_slack.real[None, :] / 3, 3, axis=0)
        q_sub = np.repeat(s_slack.imag[None, :] / 3, 3, axis=0)
        live = self._topo.live
        columns = zip(*map(column_rows, (vm, p_sub, q_sub, current_a, loading)))
        return [
            GridState(t, self._bus_phases, v, no_taps, p, q, float(loss), True, self._branches, i, pct, energized=live)
            if good
            else GridState.not_converged(t, self._bus_phases, {}, self._branches, energized=live)
            for t, good, loss, (v, p, q, i, pct) in zip(t_s, ok, losses, columns)
        ]

    @with_one_blas_thread
    def solve(self, t_s: float, loads: Mapping[str, DatacenterState], dt_s: float) -> GridState:
        """Solve at ``t_s`` (see :meth:`solve_batch`)."""
        return self.solve_batch([t_s], [loads], dt_s)[0]

    @with_one_blas_thread
    def solve_batch(
        self, t_s: Sequence[float], loads: Sequence[Mapping[str, DatacenterState]], dt_s: float
    ) -> list[GridState]:
        """Solve several steps, :data:`_BATCH_COLUMNS` at a time, warm-started from the last solution.

        :raises PowerFlowError: a step does not converge (the message names the time, the sites'
            loads, the load scale and the disturbances in force), unless ``on_nonconvergence ==
            "flag"``, which reports it with ``converged=False`` and NaN values.
        :raises UnknownNameError: a load for a site that is not on this grid.
        """
        out: list[GridState] = []
        for start in range(0, len(t_s), _BATCH_COLUMNS):
            chunk_t = list(t_s[start : start + _BATCH_COLUMNS])
            chunk_loads = list(loads[start : start + _BATCH_COLUMNS])
            s_spec, dep = self._demand(chunk_t, chunk_loads)
            sol = self.case.solve(s_spec, self._v_last, dep)
            # disturbed, no bus below 0.5 pu draws constant power: no solution is on a lower branch
            converged = sol.converged if self._disturbed else sol.converged & _upper_branch(sol.v)
            if not converged.all() and self.spec.on_nonconvergence == "stop":
                j = int(np.flatnonzero(~converged)[0])
                raise self._failed(chunk_t[j], chunk_loads[j])
            out.extend(self._states(chunk_t, s_spec, dep, sol.v, converged))
            good = np.flatnonzero(converged)
            if good.size:
                self._v_last = sol.v[:, good[-1]].copy()
                self._dep_last = None if dep is None else dep.column(int(good[-1]))
                self._sens_cache.clear()
        return out

    # ----------------------------------------------------------------------------- commands
    @functools.singledispatchmethod
    def apply(self, command: Command, t_s: float) -> None:
        """Carry out a grid command: ``set_load_scale`` (all of the net's loads),
        ``set_line_in_service``, ``apply_fault`` (three-phase to ground), ``clear_fault`` and
        ``set_source_voltage`` (equal phases) apply to a net.

        :raises CommandError: any other command, or one these refuse.
        """
        raise CommandError(f"the pandapower grid of net {self.label} does not handle {type(command).__name__}")

    @apply.register
    def _set_load_scale(self, command: SetLoadScale, t_s: float) -> None:
        if command.load is not None:
            raise CommandError(f"set_load_scale: net {self.label} scales all its loads together (give no load)")
        if not (command.scale >= 0 and math.isfinite(command.scale)):
            raise CommandError(f"set_load_scale: scale must be a finite number >= 0, got {command.scale}")
        self.load_scale = float(command.scale)

    @apply.register
    def _set_line_in_service(self, command: SetLineInService, t_s: float) -> None:
        key = branch_key(self.net, command.line)
        if key is None:
            names = self._branches.names
            raise CommandError(
                f"set_line_in_service: unknown line or transformer {command.line!r} on net {self.label} (branches "
                f"by net.line/net.trafo index: {', '.join(names[:6])}{', ...' if len(names) > 6 else ''}; "
                f"{len(names)} in all)"
            )
        if bool(command.in_service) == conducting(self.net, key):
            self._lines.pop(key, None)
        else:
            self._lines[key] = bool(command.in_service)
        self._refresh()

    @apply.register
    def _apply_fault(self, command: ApplyFault, t_s: float) -> None:
        vn_kv = {b: float(self.net.bus.at[b, "vn_kv"]) for b in self._base.case.pp_bus}
        fault = net_fault(command, self.label, self.names, vn_kv, self.case.base_mva, self._held, self._faults)
        self._faults[fault.name] = fault
        self._refresh()

    @apply.register
    def _clear_fault(self, command: ClearFault, t_s: float) -> None:
        if self._faults.pop(command.name, None) is None:
            raise CommandError(
                f"clear_fault: no fault {command.name!r} in place on net {self.label} "
                f"(in place: {', '.join(self._faults) or 'none'})"
            )
        self._refresh()

    @apply.register
    def _set_source_voltage(self, command: SetSourceVoltage, t_s: float) -> None:
        vm = source_magnitude(command, self.label)
        grids = self.net.ext_grid[self.net.ext_grid["in_service"].astype(bool)]
        # the net's own source voltage ends the sag: the undisturbed equations again, bit for bit
        self._source_pu = None if bool((grids["vm_pu"] == vm).all()) else vm
        self._refresh()

    def _refresh(self) -> None:
        """After a command: the view of the net at the branch states in force (built once per set
        of states), and the case with the faults and source voltage in force."""
        key = frozenset(self._lines.items())
        view = self._topologies.get(key)
        if view is None:
            case = PandapowerCase(switched_net(self.net, self._lines), self.label, require_solution=False)
            view = topology(self.net, case, self._site_pp_bus, self._monitored_pp)
            self._topologies[key] = view
        if view is not self._topo:
            self._v_last = None if self._v_last is None else self._moved(self._v_last, self._topo, view)
            self._dep_last = None
            self._topo = view
        shunts: dict[int, complex] = {}
        for fault in self._faults.values():
            k = view.case.pp_bus.get(fault.bus)
            if k is not None:  # a fault on a de-energized bus draws nothing
                shunts[k] = shunts.get(k, 0.0) + fault.y_pu
        sources = {k: self._source_pu for k in view.sources} if self._source_pu is not None else {}
        self.case = view.case.disturbed(shunts, sources) if shunts or sources else view.case
        self._sens_cache.clear()

    @staticmethod
    def _moved(v: np.ndarray, old: Topology, new: Topology) -> np.ndarray:
        """The solution ``v`` at branch states ``old`` as a warm start at ``new``: each bus energized
        in both keeps its voltage, the others start from the net's own solution at ``new``."""
        out = new.case.v_net.copy()
        for b, k in new.case.pp_bus.items():
            k_old = old.case.pp_bus.get(b)
            if k_old is not None:
                out[k] = v[k_old]
        return out

    # ----------------------------------------------------------------------------- sensitivity
    @with_one_blas_thread
    def voltage_sensitivity(self, bus: str) -> np.ndarray:
        """dV/dP (pu/W) of every monitored bus-phase w.r.t. one watt drawn on one phase at ``bus``
        (a bus name, or a site name meaning its bus), Q following at the site's power factor
        (unity if no site is there), at the last solved operating point (the net's own solution
        before the first solve): implicit function theorem on the power-flow equations, every
        voltage-dependent injection included. A de-energized bus, and a de-energized monitored
        bus-phase, reads 0.

        :return: read-only array of shape ``(len(bus_phases()), 3)``, the three columns equal.
        :raises KeyError: unknown bus or site.
        """
        point = self._sensitivity_point(bus, "voltage_sensitivity")
        if point is None:
            return frozen_array(np.zeros((len(self._bus_phases), 3)))
        k, q_per_p, key = point
        if key not in self._sens_cache:
            v = self._v_point()
            dv = self.case.voltage_sensitivity(v, np.array([k]), q_per_p, self._dep_last, self._gain(bus, k, v))
            dv = dv[:, 0] / self._w_per_pu
            self._sens_cache[key] = frozen_array(np.repeat(self._monitored_rows(dv)[:, None], 3, axis=1))
        return self._sens_cache[key]

    @with_one_blas_thread
    def loading_sensitivity(self, bus: str) -> np.ndarray:
        """d(loading)/dP (%/W) of every branch of :meth:`branches` w.r.t. one watt drawn on one
        phase at ``bus``, as :meth:`voltage_sensitivity`: each end's ``d|I|/dP = Re(conj(I) Y dV/dP)
        / |I|`` (``Y`` the branch's ``Yf`` or ``Yt`` row, ``dV/dP`` complex from the same
        linearization), through the branch's most loaded end.

        :return: read-only array of shape ``(len(branches().names), 3)``, the three columns equal.
        :raises KeyError: unknown bus or site.
        """
        point = self._sensitivity_point(bus, "loading_sensitivity")
        if point is None:
            return frozen_array(np.zeros((len(self._branches.names), 3)))
        k, q_per_p, key = point
        if key not in self._sens_cache:
            v = self._v_point()
            gain = self._gain(bus, k, v)
            dv = self.case.voltage_derivatives(v, np.array([k]), q_per_p, self._dep_last, gain) / self._w_per_pu
            i_from, i_to, di_from, di_to = self.case.branch_current_slopes_ka(v, dv)
            gather = self._topo.gather
            current_a = np.concatenate([i_from, i_to, [0.0]])[gather] * 1000.0
            slopes_a = np.vstack([di_from, di_to, np.zeros((1, 1))])[gather] * 1000.0
            loading = self._branches.loading_slopes_pct(current_a, slopes_a)
            self._sens_cache[key] = frozen_array(np.repeat(loading, 3, axis=1))
        return self._sens_cache[key]

    def _sensitivity_point(self, bus: str, asked: str) -> tuple[int, float, str] | None:
        """Internal bus, reactive power per unit of active power and cache key of a sensitivity
        ``asked`` to ``bus`` (a site, meaning its bus, or an energized bus); None for a bus the
        branches out of service cut off.

        :raises KeyError: unknown bus or site, or a bus not energized in the net as loaded.
        """
        site = self._sites.get(bus)
        pp_bus = self._site_pp_bus[site.name] if site else self.names.bus(bus)
        if pp_bus is None or pp_bus not in self._base.case.pp_bus:
            raise KeyError(f"{asked}: {bus!r} is not a site or an energized bus of net {self.label}")
        k = self.case.pp_bus.get(pp_bus)
        if k is None:
            return None
        if site is None:
            site = next((s for s in self._sites.values() if self._topo.site_bus.get(s.name) == k), None)
        pf = site.power_factor if site else 1.0
        return k, tan_phi(pf), f"{asked}:{k}@{pf}"

    def _gain(self, bus: str, k: int, v: np.ndarray) -> float:
        """The power a watt scheduled at internal bus ``k`` draws at the voltages ``v`` (per watt):
        1 at constant power, its band's gain where a site with ``load_model: opendss`` is (or
        ``bus`` names one) and, while disturbed, elsewhere."""
        site = self._sites.get(bus)
        if site is None:
            site = next((s for s in self._sites.values() if self._topo.site_bus.get(s.name) == k), None)
        band = self._site_band.get(site.name) if site else None
        if band is None and self._disturbed:
            band = DISTURBANCE_BAND
        if band is None:
            return 1.0
        g, _ = band.gain(np.abs(v[k : k + 1]))
        return float(g[0])

    def _v_point(self) -> np.ndarray:
        """The operating point sensitivities are taken at: the last solution, or the net's own."""
        return self.case.v_net if self._v_last is None else self._v_last

    # ----------------------------------------------------------------------------- results as a net
    def results_net(self, loads: Mapping[str, DatacenterState], t_s: float = 0.0) -> pandapowerNet:
        """A copy of the net at one operating point, with this backend's results.

        Each site is a load named ``openg2g:<site>`` at its bus drawing what it draws at the
        solution (its state's total P and Q, unless its voltage is outside its band); the net's
        own loads carry the load scale in ``scaling``; the disturbances in force are in the net:
        branches out of service (or in service, their switches closed), each fault a shunt
        ``openg2g:fault:<name>`` of ``vn_kv^2 / r_ohm`` MW, the external grids' ``vm_pu`` at the
        source voltage in force, and every injection below
        :data:`~openg2g.grid.nets.lowvoltage.DISTURBANCE_VMINPU` at what it draws there (its
        ``scaling``, or a ward's ``ps_mw``/``qs_mvar``, times the gain). ``res_bus`` (``vm_pu``,
        ``va_degree``), ``res_line`` and ``res_trafo`` (flows, currents, voltages at the ends,
        ``loading_percent``) are filled from the solution. ``pandapower.runpp`` on the returned net
        reproduces them. Out-of-service branches read 0 (voltages NaN), de-energized buses NaN.

        :raises PowerFlowError: the operating point does not converge.
        """
        import pandapower as pp

        s_spec, dep = self._demand([t_s], [loads])
        sol = self.case.solve(s_spec, self._v_last, dep)
        if not sol.converged[0]:
            raise self._failed(t_s, loads)
        v = sol.v[:, 0]
        vm = np.abs(v)
        net = switched_net(self.net, self._lines)
        net.load["scaling"] = net.load["scaling"] * self.load_scale
        if self._source_pu is not None:
            net.ext_grid.loc[net.ext_grid["in_service"].astype(bool), "vm_pu"] = self._source_pu
        for fault in self._faults.values():
            vn_kv = float(net.bus.at[fault.bus, "vn_kv"])
            pp.create_shunt(net, fault.bus, q_mvar=0.0, p_mw=vn_kv**2 / fault.r_ohm, name=f"openg2g:fault:{fault.name}")
        if self._disturbed:
            self._scale_low_injections(net, vm)
        for name, state in loads.items():
            k = self._topo.site_bus.get(name)
            band = self._site_band.get(name, DISTURBANCE_BAND if self._disturbed else None)
            gain = 1.0 if band is None or k is None else float(band.gain(vm[k : k + 1])[0][0])
            pp.create_load(
                net,
                self._site_pp_bus[name],
                p_mw=gain * state.power_w / 1e6,
                q_mvar=gain * float(np.sum(state.q_var)) / 1e6,
                name=f"openg2g:{name}",
            )
        internal = [self.case.pp_bus.get(int(b), -1) for b in net.bus.index]
        has = np.array(internal) >= 0
        v_bus = np.where(has, v[np.maximum(internal, 0)], np.nan)
        net.res_bus = _frame(net.bus.index, vm_pu=np.abs(v_bus), va_degree=np.degrees(np.angle(v_bus)))
        net.res_line = self._branch_frame(net.line, "line", v, ("from", "to"))
        net.res_trafo = self._branch_frame(net.trafo, "trafo", v, ("hv", "lv"))
        return net

    def _scale_low_injections(self, net: pandapowerNet, vm: np.ndarray) -> None:
        """Each constant-power element of ``net`` at a bus below its band (voltages ``vm``, pu, per
        internal bus) times its gain there: what it draws at the solution."""
        gain = DISTURBANCE_BAND.gain(vm)[0]
        for table in (*_SCALED_TABLES, *_WARD_TABLES):
            if table not in net or not len(net[table]):
                continue
            rows = net[table]
            at = np.array([self.case.pp_bus.get(int(b), -1) for b in rows["bus"]], dtype=np.int64)
            factor = np.where(at >= 0, gain[np.maximum(at, 0)], 1.0)
            columns = ("scaling",) if table in _SCALED_TABLES else ("ps_mw", "qs_mvar")
            for column in columns:
                rows[column] = rows[column] * factor

    def _branch_frame(self, table: object, element: str, v: np.ndarray, ends: tuple[str, str]) -> object:
        """pandapower's result table of ``element`` (``line``/``trafo``) for the solution ``v``."""
        rows = self.case.branch_rows(element, len(table))  # type: ignore[arg-type]
        live = rows >= 0
        r = np.maximum(rows, 0)
        f_bus, t_bus = self.case.branch_buses()
        base = self.case.base_mva
        s_f = v[f_bus[r]] * np.conj(self.case.yf[r] @ v) * base
        s_t = v[t_bus[r]] * np.conj(self.case.yt[r] @ v) * base
        i_f, i_t = (x[:, 0] for x in self.case.branch_currents_ka(v[:, None]))
        i_f, i_t = i_f[r], i_t[r]
        if element == "line":
            rating_ka = (table["max_i_ka"] * table["df"] * table["parallel"]).to_numpy(float)  # type: ignore[index]
            loading = np.maximum(i_f, i_t) / rating_ka * 100.0
        else:
            s_rated = (table["sn_mva"] * table["df"] * table["parallel"]).to_numpy(float)  # type: ignore[index]
            kv = (table["vn_hv_kv"].to_numpy(float), table["vn_lv_kv"].to_numpy(float))  # type: ignore[index]
            loading = np.maximum(i_f * kv[0], i_t * kv[1]) * _SQRT3 / s_rated * 100.0

        def dead0(x: np.ndarray) -> np.ndarray:
            return np.where(live, x, 0.0)

        def dead_nan(x: np.ndarray) -> np.ndarray:
            return np.where(live, x, np.nan)

        a, b = ends
        columns = {
            f"p_{a}_mw": dead0(s_f.real),
            f"q_{a}_mvar": dead0(s_f.imag),
            f"p_{b}_mw": dead0(s_t.real),
            f"q_{b}_mvar": dead0(s_t.imag),
            "pl_mw": dead0(s_f.real + s_t.real),
            "ql_mvar": dead0(s_f.imag + s_t.imag),
            f"i_{a}_ka": dead0(i_f),
            f"i_{b}_ka": dead0(i_t),
        }
        if element == "line":
            columns["i_ka"] = dead0(np.maximum(i_f, i_t))
        columns.update(
            {
                f"vm_{a}_pu": dead_nan(np.abs(v[f_bus[r]])),
                f"va_{a}_degree": dead_nan(np.degrees(np.angle(v[f_bus[r]]))),
                f"vm_{b}_pu": dead_nan(np.abs(v[t_bus[r]])),
                f"va_{b}_degree": dead_nan(np.degrees(np.angle(v[t_bus[r]]))),
                "loading_percent": dead0(loading),
            }
        )
        return _frame(table.index, **columns)  # type: ignore[attr-defined]


def _frame(index: object, **columns: np.ndarray) -> object:
    import pandas as pd

    return pd.DataFrame(columns, index=index)
