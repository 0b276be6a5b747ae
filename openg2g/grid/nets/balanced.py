"""``PandapowerGrid``: the grid backend on any pandapower net, solved balanced.

The scenario's ``grid.pandapower`` names the net (:mod:`openg2g.grid.nets.source`). Each datacenter
site is a constant-power load at its bus: the sum of its per-phase P and Q (W, var), on top of the
net's own loads (times the load scale), static generators, generators (PV buses at their
voltage setpoints, reactive limits not enforced, as in ``runpp``'s default), wards and shunts. The
power flow is pandapower's balanced positive-sequence model, solved by
:class:`~openg2g.grid.nets.case.PandapowerCase` (a batched Newton on pandapower's own ``Ybus``).

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
:func:`openg2g.engine.net_results.to_pandapower_results` (for a step of a finished run) give the net back with every site as
a load and ``res_bus`` (``vm_pu``, ``va_degree``), ``res_line`` and ``res_trafo`` filled from this
backend's solution, as ``runpp`` would fill them.

**Branches.** Every line and two-winding transformer, with the current at both ends
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

from openg2g.core.commands import Command, SetLoadScale
from openg2g.core.errors import CommandError, PowerFlowError, ScenarioError
from openg2g.core.interfaces import GridBackend, RegulatorInfo
from openg2g.core.state import PHASES, BranchSet, DatacenterState, GridState, column_rows, frozen_array
from openg2g.core.threads import with_one_blas_thread
from openg2g.grid.config import GridSite, GridSpec, tan_phi, unknown_site
from openg2g.grid.nets.case import PandapowerCase
from openg2g.grid.nets.source import NET_RATINGS, BusNames, load_net

if TYPE_CHECKING:
    from pandapower.auxiliary import pandapowerNet

__all__ = ["LOWER_BRANCH_PU", "PandapowerGrid", "check_net_spec"]

_BATCH_COLUMNS = 1024
"""Operating points solved together in one call (bounds memory on long batches)."""

_SQRT3 = math.sqrt(3.0)

_FEEDER_ONLY = ("regulators", "capacitors", "pv", "storage", "extra_loads")
"""Grid options of feeders that a pandapower net does not take (its own elements stand for them)."""


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
    :param sites: datacenter sites (name, bus, power factor).
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
        self.names = BusNames(self.net)
        self._s_load = self.case.load_injection(self.net)
        self._sites = {s.name: s for s in sites}
        self._site_pp_bus = attach
        """Site -> pandapower bus it draws at: its bus, or its transformer's LV bus."""
        self._site_bus = {name: self._internal(b) for name, b in attach.items()}
        self._bus_phases, self._mon_idx = self._monitored(spec.monitored_buses, spec.monitored_min_kv)
        self._branches = _branch_set(self.net)
        rows = np.concatenate(
            [self.case.branch_rows("line", len(self.net.line)), self.case.branch_rows("trafo", len(self.net.trafo))]
        )
        self._gather = self._conductor_rows(rows)
        self._starts = self._branches.starts
        self.load_scale = spec.load_scale
        self._v_last: np.ndarray | None = None
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
        """The internal bus of pandapower bus ``bus``.

        :raises ScenarioError: the bus is cut off from every external grid.
        """
        k = self.case.pp_bus.get(bus)
        if k is None:
            label = dict(zip(self.names.index, self.names.names))[bus]
            raise ScenarioError(
                [("grid.pandapower", f"bus {label!r} of net {self.label} is not connected to an external grid")]
            )
        return k

    def _monitored(self, buses: Sequence[str] | None, min_kv: float | None) -> tuple[tuple[str, ...], np.ndarray]:
        if buses:
            chosen = [self.names.bus(b) for b in buses]
        else:
            slack = {int(b) for b in self.net.ext_grid.loc[self.net.ext_grid["in_service"].astype(bool), "bus"]}
            chosen = [b for b in self.names.index if b in self.case.pp_bus and b not in slack]
        if min_kv is not None:
            chosen = [b for b in chosen if b is not None and self.net.bus.at[b, "vn_kv"] >= min_kv * (1.0 - 1e-6)]
        label = dict(zip(self.names.index, self.names.names))
        pairs = [(label[b], self.case.pp_bus[b]) for b in chosen if b is not None]
        bus_phases = tuple(f"{name}.{ph}" for name, _ in pairs for ph in PHASES)
        return bus_phases, np.repeat(np.array([k for _, k in pairs], dtype=np.int64), 3)

    def _conductor_rows(self, rows: np.ndarray) -> np.ndarray:
        """Per conductor, its row in ``[i_from; i_to; 0]`` (an out-of-service branch reads 0)."""
        n_br = self.case.yf.shape[0]
        from_row = np.where(rows >= 0, rows, 2 * n_br)
        to_row = np.where(rows >= 0, n_br + rows, 2 * n_br)
        per_branch = np.stack([from_row, to_row], axis=1)  # (branches, terminals)
        return np.repeat(per_branch.reshape(-1), 3)

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

    def reset(self, seed: int) -> None:
        """The scenario's load scale; the warm start is the net's own solution and no Jacobian is
        kept (no randomness: every run from a reset gives the same bits)."""
        self.load_scale = self.spec.load_scale
        self._v_last = None
        self.case.forget()
        self._sens_cache.clear()

    # ----------------------------------------------------------------------------- solving
    def injections(self, t_s: Sequence[float], loads: Sequence[Mapping[str, DatacenterState]]) -> np.ndarray:
        """Specified bus injections (pu, ``(n_bus, K)``): the net's own at the load scale, minus each site's P + jQ.

        :raises UnknownNameError: a load for a site that is not on this grid.
        """
        s = np.repeat((self.case.s_spec + (self.load_scale - 1.0) * self._s_load)[:, None], len(t_s), axis=1)
        to_pu = 1.0 / (self.case.base_mva * 1e6)
        for j, step in enumerate(loads):
            for name, state in step.items():
                k = self._site_bus.get(name)
                if k is None:
                    raise unknown_site(t_s[j], f"net {self.label}", name, self._site_bus)
                s[k, j] -= (float(np.sum(state.p_w)) + 1j * float(np.sum(state.q_var))) * to_pu
        return s

    def _failed(self, t_s: float, loads: Mapping[str, DatacenterState]) -> PowerFlowError:
        """The error of a step that did not converge, with the share of the sites' load the net
        can carry (:meth:`_carryable_fraction`)."""
        attached = ", ".join(f"{n}@{self._sites[n].bus}={s.power_w / 1e6:.3f} MW" for n, s in loads.items())
        level = f"datacenter loads: {attached or 'none'}; net load scale {self.load_scale:g}"
        share = self._carryable_fraction(t_s, loads) if loads else None
        if share is None:
            return PowerFlowError(f"power flow did not converge at t={t_s} s on net {self.label} ({level})")
        total_mw = sum(s.power_w for s in loads.values()) / 1e6
        return PowerFlowError(
            f"power flow did not converge at t={t_s} s on net {self.label} ({level}): the net carries at most "
            f"{100 * share:.1f}% of this datacenter load ({share * total_mw:.3f} MW of {total_mw:.3f} MW) before its "
            "power flow reaches the nose of the P-V curve"
        )

    def _carryable_fraction(self, t_s: float, loads: Mapping[str, DatacenterState]) -> float | None:
        """The largest share (to 0.1 %) of the sites' load at which the step still converges, the
        net's own loads held; None if it does not converge even without the sites."""
        without = self.injections([t_s], [{}])
        sites = self.injections([t_s], [loads]) - without
        lo, hi = 0.0, 1.0
        if not self.case.solve(without).converged[0]:
            return None
        while hi - lo > 1e-3:
            mid = 0.5 * (lo + hi)
            if self.case.solve(without + mid * sites).converged[0]:
                lo = mid
            else:
                hi = mid
        return lo

    def _states(self, t_s: Sequence[float], s_spec: np.ndarray, v: np.ndarray, ok: np.ndarray) -> list[GridState]:
        """The reported states of solutions ``v`` of injections ``s_spec`` (pu); NaN where not ``ok``."""
        base_w = self.case.base_mva * 1e6
        s_calc = self.case.injections(v)
        s_slack = (s_calc[self.case.ref] - s_spec[self.case.ref]).sum(axis=0) * base_w
        losses = s_calc.real.sum(axis=0) * base_w
        vm = np.abs(v[self._mon_idx])
        i_from, i_to = self.case.branch_currents_ka(v)
        stacked = np.vstack([i_from, i_to, np.zeros((1, v.shape[1]))])
        current_a = stacked[self._gather] * 1000.0
        loading = np.maximum.reduceat(current_a * (100.0 / self._branches.rating_a)[:, None], self._starts, axis=0)
        no_taps: Mapping[str, tuple[int, ...]] = MappingProxyType({})
        p_sub = np.repeat(s_slack.real[None, :] / 3, 3, axis=0)
        q_sub = np.repeat(s_slack.imag[None, :] / 3, 3, axis=0)
        columns = zip(*map(column_rows, (vm, p_sub, q_sub, current_a, loading)))
        return [
            GridState(t, self._bus_phases, v, no_taps, p, q, float(loss), True, self._branches, i, pct)
            if good
            else GridState.not_converged(t, self._bus_phases, {}, self._branches)
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
            loads and the load scale), unless ``on_nonconvergence == "flag"``, which reports it
            with ``converged=False`` and NaN values.
        :raises UnknownNameError: a load for a site that is not on this grid.
        """
        out: list[GridState] = []
        for start in range(0, len(t_s), _BATCH_COLUMNS):
            chunk_t = list(t_s[start : start + _BATCH_COLUMNS])
            chunk_loads = list(loads[start : start + _BATCH_COLUMNS])
            s_spec = self.injections(chunk_t, chunk_loads)
            sol = self.case.solve(s_spec, self._v_last)
            converged = sol.converged & _upper_branch(sol.v)
            if not converged.all() and self.spec.on_nonconvergence == "stop":
                j = int(np.flatnonzero(~converged)[0])
                raise self._failed(chunk_t[j], chunk_loads[j])
            out.extend(self._states(chunk_t, s_spec, sol.v, converged))
            good = np.flatnonzero(converged)
            if good.size:
                self._v_last = sol.v[:, good[-1]].copy()
                self._sens_cache.clear()
        return out

    # ----------------------------------------------------------------------------- commands
    @functools.singledispatchmethod
    def apply(self, command: Command, t_s: float) -> None:
        """Carry out a grid command: only ``set_load_scale`` (all of the net's loads) applies to a net.

        :raises CommandError: any other command, or a load scale for one named load.
        """
        raise CommandError(f"the pandapower grid of net {self.label} does not handle {type(command).__name__}")

    @apply.register
    def _set_load_scale(self, command: SetLoadScale, t_s: float) -> None:
        if command.load is not None:
            raise CommandError(f"set_load_scale: net {self.label} scales all its loads together (give no load)")
        if not (command.scale >= 0 and math.isfinite(command.scale)):
            raise CommandError(f"set_load_scale: scale must be a finite number >= 0, got {command.scale}")
        self.load_scale = float(command.scale)

    # ----------------------------------------------------------------------------- sensitivity
    @with_one_blas_thread
    def voltage_sensitivity(self, bus: str) -> np.ndarray:
        """dV/dP (pu/W) of every monitored bus-phase w.r.t. one watt drawn on one phase at ``bus``
        (a bus name, or a site name meaning its bus), Q following at the site's power factor
        (unity if no site is there), at the last solved operating point (the net's own solution
        before the first solve): implicit function theorem on the power-flow equations.

        :return: read-only array of shape ``(len(bus_phases()), 3)``, the three columns equal.
        :raises KeyError: unknown bus or site.
        """
        k, q_per_p, key = self._sensitivity_point(bus, "voltage_sensitivity")
        if key not in self._sens_cache:
            dv = self.case.voltage_sensitivity(self._v_point(), np.array([k]), q_per_p)[:, 0] / self._w_per_pu
            self._sens_cache[key] = frozen_array(np.repeat(dv[self._mon_idx][:, None], 3, axis=1))
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
        k, q_per_p, key = self._sensitivity_point(bus, "loading_sensitivity")
        if key not in self._sens_cache:
            v = self._v_point()
            dv = self.case.voltage_derivatives(v, np.array([k]), q_per_p) / self._w_per_pu
            i_from, i_to, di_from, di_to = self.case.branch_current_slopes_ka(v, dv)
            current_a = np.concatenate([i_from, i_to, [0.0]])[self._gather] * 1000.0
            slopes_a = np.vstack([di_from, di_to, np.zeros((1, 1))])[self._gather] * 1000.0
            loading = self._branches.loading_slopes_pct(current_a, slopes_a)
            self._sens_cache[key] = frozen_array(np.repeat(loading, 3, axis=1))
        return self._sens_cache[key]

    def _sensitivity_point(self, bus: str, asked: str) -> tuple[int, float, str]:
        """Internal bus, reactive power per unit of active power and cache key of a sensitivity
        ``asked`` to ``bus`` (a site, meaning its bus, or an energized bus).

        :raises KeyError: unknown bus or site.
        """
        site = self._sites.get(bus)
        pp_bus = self._site_pp_bus[site.name] if site else self.names.bus(bus)
        k = None if pp_bus is None else self.case.pp_bus.get(pp_bus)
        if k is None:
            raise KeyError(f"{asked}: {bus!r} is not a site or an energized bus of net {self.label}")
        if site is None:
            site = next((s for s in self._sites.values() if self._site_bus[s.name] == k), None)
        pf = site.power_factor if site else 1.0
        return k, tan_phi(pf), f"{asked}:{k}@{pf}"

    def _v_point(self) -> np.ndarray:
        """The operating point sensitivities are taken at: the last solution, or the net's own."""
        return self.case.v_net if self._v_last is None else self._v_last

    # ----------------------------------------------------------------------------- results as a net
    def results_net(self, loads: Mapping[str, DatacenterState], t_s: float = 0.0) -> pandapowerNet:
        """A copy of the net at one operating point, with this backend's results.

        Each site is a load named ``openg2g:<site>`` at its bus drawing the state's total P and
        Q; the net's own loads carry the load scale in ``scaling``; ``res_bus`` (``vm_pu``,
        ``va_degree``), ``res_line`` and ``res_trafo`` (flows, currents, voltages at the ends,
        ``loading_percent``) are filled from the solution. ``pandapower.runpp`` on the returned
        net reproduces them. Out-of-service branches read 0 (voltages NaN).

        :raises PowerFlowError: the operating point does not converge.
        """
        import pandapower as pp

        s_spec = self.injections([t_s], [loads])
        sol = self.case.solve(s_spec, self._v_last)
        if not sol.converged[0]:
            raise self._failed(t_s, loads)
        v = sol.v[:, 0]
        net = copy.deepcopy(self.net)
        net.load["scaling"] = net.load["scaling"] * self.load_scale
        for name, state in loads.items():
            bus = self._site_pp_bus[name]
            pp.create_load(
                net, bus, p_mw=state.power_w / 1e6, q_mvar=float(np.sum(state.q_var)) / 1e6, name=f"openg2g:{name}"
            )
        internal = [self.case.pp_bus.get(int(b), -1) for b in net.bus.index]
        has = np.array(internal) >= 0
        v_bus = np.where(has, v[np.maximum(internal, 0)], np.nan)
        net.res_bus = _frame(net.bus.index, vm_pu=np.abs(v_bus), va_degree=np.degrees(np.angle(v_bus)))
        net.res_line = self._branch_frame(net.line, "line", v, ("from", "to"))
        net.res_trafo = self._branch_frame(net.trafo, "trafo", v, ("hv", "lv"))
        return net

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
