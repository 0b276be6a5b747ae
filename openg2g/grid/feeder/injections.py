"""What the grid backend adds to the feeder's own loads: datacenter sites, PV, batteries, extra loads.

Each of them is a constant-PQ wye element (or, for an element with the OpenDSS load model, a
model-1 element with its own voltage band) at the nodes of its bus. The solver sees them
through *PQ ports*: one per node and voltage dependence, shared by every element that has both,
so the solver's load kernel stays small whatever the number of elements.

This module builds the ports, holds the scales and profiles that shape the elements over time
(the feeder's load scale, PV scales and profiles, extra-load profiles), and builds the complex
power drawn at every port at every step (:meth:`Injections.s_pq`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from openg2g.core.errors import CommandError
from openg2g.core.state import PHASES, DatacenterState
from openg2g.grid.config import GridSite, GridSpec, tan_phi, unknown_site
from openg2g.grid.feeder.library import Feeder
from openg2g.grid.feeder.network import LoadPorts, NodeIndex
from openg2g.grid.feeder.profile import Profile
from openg2g.grid.feeder.storage import Battery

__all__ = ["Injection", "Injections"]

Band = tuple[float, float]
"""``(vminpu, vmaxpu)`` of an OpenDSS model-1 element."""


class _VoltageDependent(Protocol):
    @property
    def load_model(self) -> str: ...
    @property
    def vminpu(self) -> float: ...
    @property
    def vmaxpu(self) -> float: ...


def _band(element: _VoltageDependent | None) -> Band | None:
    """``(vminpu, vmaxpu)`` of an OpenDSS model-1 element, None for constant power."""
    if element is None or element.load_model == "constant_power":
        return None
    return (element.vminpu, element.vmaxpu)


@dataclass
class Injection:
    """A constant-PQ wye element (site, PV, battery, extra load) mapped onto PQ ports."""

    name: str
    ports: np.ndarray  # PQ-port index per phase used
    phases: tuple[str, ...]

    def __post_init__(self) -> None:
        # the rows this element adds to: a slice when its ports are consecutive (the usual case:
        # ports are handed out element by element), a plain index when they are distinct, None
        # when a phase is listed twice (it then draws twice: np.add.at, several times slower)
        ports = self.ports.tolist()
        self._rows: slice | np.ndarray | None = None
        if ports and ports == list(range(ports[0], ports[0] + len(ports))):
            self._rows = slice(ports[0], ports[0] + len(ports))
        elif len(set(ports)) == len(ports):
            self._rows = self.ports

    def add_to(self, s: np.ndarray, values: np.ndarray | complex) -> None:
        """Add ``values`` (VA: ``(len(ports), steps)``, or ``(steps,)`` or one value for every port
        alike) to the rows of ``s`` (``(n_ports, steps)``) of this element's ports."""
        if self._rows is None:
            np.add.at(s, self.ports, np.broadcast_to(values, (len(self.ports), s.shape[1])))
        else:
            s[self._rows] += values


class _PortMap:
    """Hands out PQ ports, one per (node, voltage band) however many elements share it."""

    def __init__(self, nodes: NodeIndex) -> None:
        self._nodes = nodes
        self.pq_nodes: list[int] = []
        self.bands: list[Band] = []
        self._port_of: dict[tuple[int, Band | None], int] = {}

    def injection(
        self, name: str, bus: str, phases: Sequence[str], element: _VoltageDependent | None = None
    ) -> Injection:
        band = _band(element)
        ports = []
        for ph in phases:
            node = self._nodes.index[(bus.lower(), ph)]
            if (node, band) not in self._port_of:
                self._port_of[(node, band)] = len(self.pq_nodes)
                self.pq_nodes.append(node)
                self.bands.append(band or (np.nan, np.nan))
            ports.append(self._port_of[(node, band)])
        return Injection(name, np.array(ports, dtype=int), tuple(phases))


class Injections:
    """The sites, PV, batteries and extra loads of a scenario on its feeder, with their scales.

    :param feeder: the feeder.
    :param spec: the grid section of the scenario.
    :param sites: datacenter sites.
    :param nodes: the feeder's node index.
    :param batteries: the batteries by name (their setpoints are read at every step).
    :param base_dir: folder that profile paths are relative to.
    """

    def __init__(
        self,
        feeder: Feeder,
        spec: GridSpec,
        sites: Sequence[GridSite],
        nodes: NodeIndex,
        batteries: Mapping[str, Battery],
        base_dir: Path,
    ) -> None:
        self._feeder_name = feeder.name
        self._load_names = [ld.name.lower() for ld in feeder.model.loads]
        self._scaled = np.array([not ld.fixed for ld in feeder.model.loads], dtype=bool)
        # the feeder's generators' branches follow the loads', two per voltage-regulating one
        self._n_generators = len(feeder.model.generators) + 2 * len(feeder.model.regulated_generators)
        self._spec = spec
        self._batteries = batteries
        ports = _PortMap(nodes)  # the order of the elements below fixes the order of the ports
        self.sites = {s.name: ports.injection(s.name, s.bus, PHASES, s) for s in sites}
        self._pv = [(ports.injection(pv.name, pv.bus, pv.phases, pv), pv, tan_phi(pv.power_factor)) for pv in spec.pv]
        self._pv_profiles = {
            pv.name: Profile.read(base_dir / pv.profile, f"grid.pv.{i}.profile")
            for i, pv in enumerate(spec.pv)
            if pv.profile
        }
        self._storage = {
            st.name: ports.injection(st.name, st.bus, feeder.bus_phases[st.bus.lower()]) for st in spec.storage
        }
        self._extra = [
            (ports.injection(x.name, x.bus, x.phases, x), x, tan_phi(x.power_factor)) for x in spec.extra_loads
        ]
        self._extra_profiles = {
            x.name: Profile.read(base_dir / x.profile, f"grid.extra_loads.{i}.profile")
            for i, x in enumerate(spec.extra_loads)
            if x.profile
        }
        self.pq_band = np.array(ports.bands, dtype=float).reshape(-1, 2)
        """Voltage band ``(vminpu, vmaxpu)`` per PQ port, NaN for constant power."""
        self.pq_nodes = np.array(ports.pq_nodes, dtype=int)
        """Node of each PQ port."""
        self.reset()

    # ----------------------------------------------------------------------------- scales
    def reset(self) -> None:
        """The scenario's load scale (on every load but the fixed ones) and PV scales; PV profiles in
        force again."""
        self.load_scale = np.where(self._scaled, float(self._spec.load_scale), 1.0)
        """Scale of each of the feeder's own loads (x its base value)."""
        self._pv_scale = {pv.name: pv.scale for _, pv, _ in self._pv}
        self._pv_override: set[str] = set()

    def set_load_scale(self, scale: float, load: str | None) -> None:
        """Scale the feeder's own loads (all but the fixed ones, as OpenDSS's load multiplier, or the
        one named ``load``, any case) to ``scale`` x base.

        :raises CommandError: a negative or non-finite scale, or an unknown load.
        """
        if not (scale >= 0 and math.isfinite(scale)):
            raise CommandError(f"set_load_scale: scale must be >= 0, got {scale}")
        if load is None:
            self.load_scale[self._scaled] = scale
            return
        if load.lower() not in self._load_names:
            raise CommandError(f"set_load_scale: unknown load {load!r} on feeder {self._feeder_name}")
        self.load_scale[self._load_names.index(load.lower())] = scale

    def set_pv_scale(self, scale: float, pv: str | None) -> None:
        """Set PV output (all PV, or the one named ``pv``) to ``scale`` x its rating; it overrides the
        PV's profile from now on.

        :raises CommandError: a scale outside [0, 1], or an unknown PV.
        """
        if not 0.0 <= scale <= 1.0:
            raise CommandError(f"set_pv_scale: scale must be within [0, 1], got {scale}")
        for name in list(self._pv_scale) if pv is None else [pv]:
            if name not in self._pv_scale:
                raise CommandError(f"set_pv_scale: unknown PV {name!r} (PV: {', '.join(self._pv_scale) or 'none'})")
            self._pv_scale[name] = scale
            self._pv_override.add(name)

    def branch_scale(self, ports: LoadPorts) -> np.ndarray:
        """Scale of each load branch of the feeder, shape ``(n_branches, 1)``: its load's scale, 1
        for the feeder's own generators (their branches follow the loads'; the reactive-power
        branch of a voltage-regulating one is scaled by the power flow,
        :mod:`~openg2g.grid.feeder.regulated`)."""
        if not self._n_generators:
            return self.load_scale[ports.load][:, None]
        return np.concatenate([self.load_scale, np.ones(self._n_generators)])[ports.load][:, None]

    def load_scale_range(self) -> tuple[float, float]:
        """Lowest and highest scale of the feeder's own loads (1 and 1 on a feeder without loads)."""
        return float(self.load_scale.min(initial=1.0)), float(self.load_scale.max(initial=1.0))

    # ----------------------------------------------------------------------------- power
    def s_pq(self, t_s: Sequence[float], loads: Sequence[Mapping[str, DatacenterState]]) -> np.ndarray:
        """Complex power drawn at each PQ port at each step (VA, > 0 = consumption), shape
        ``(n_ports, steps)``; each column is summed in the same order whatever the batch.

        :raises UnknownNameError: a load for a site that is not on this grid.
        """
        t = np.asarray(t_s, dtype=np.float64)
        s = np.zeros((len(self.pq_nodes), t.size), dtype=complex)
        self._add_sites(s, t, loads)
        for inj, pv, pv_tan_phi in self._pv:
            if pv.name in self._pv_profiles and pv.name not in self._pv_override:
                scale = self._pv_profiles[pv.name].at(t)
            else:
                scale = np.full(t.size, self._pv_scale[pv.name])
            p = pv.kw * 1000.0 * scale / len(inj.phases)
            inj.add_to(s, -(p + 1j * p * pv_tan_phi))
        for name, inj in self._storage.items():
            bat = self._batteries[name]
            inj.add_to(s, -(bat.p_w + 1j * bat.q_var) / len(inj.phases))
        for inj, x, x_tan_phi in self._extra:
            scale = self._extra_profiles[x.name].at(t) if x.name in self._extra_profiles else np.ones(t.size)
            p = x.kw_per_phase * 1000.0 * scale
            inj.add_to(s, p + 1j * p * x_tan_phi)
        return s

    def _add_sites(self, s: np.ndarray, t: np.ndarray, loads: Sequence[Mapping[str, DatacenterState]]) -> None:
        """Add each site's per-phase power at every step to ``s`` (VA): gathered per site over the
        steps, then added at once (zero at a step without the site)."""
        by_site: dict[str, tuple[list[int], list[np.ndarray], list[np.ndarray]]] = {}
        for j, step_loads in enumerate(loads):
            for name, state in step_loads.items():
                steps = by_site.get(name)
                if steps is None:
                    if name not in self.sites:
                        raise unknown_site(float(t[j]), f"feeder {self._feeder_name}", name, self.sites)
                    steps = by_site[name] = ([], [], [])
                steps[0].append(j)
                steps[1].append(state.p_w)
                steps[2].append(state.q_var)
        for name, (cols, p, q) in by_site.items():
            inj = self.sites[name]
            s_site = (np.array(p) + 1j * np.array(q)).T
            if len(cols) < t.size:
                values = np.zeros((len(inj.ports), t.size), dtype=complex)
                values[:, cols] = s_site
                s_site = values
            inj.add_to(s, s_site)
