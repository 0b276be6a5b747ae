"""One operating point of a feeder and what controllers ask of it, made once per point.

A point is a network (the compiled power flow at the switching in force, named by the object and
its :attr:`~openg2g.grid.feeder.powerflow.PowerFlowNetwork.version`) and the loads of the last
accepted solve. :class:`FeederGrid <openg2g.grid.feeder.backend.FeederGrid>` keeps the point it
made last and makes a new one when either changed (:meth:`OperatingPoint.holds`); nothing is
cleared by hand. At a point:

- **voltage sensitivities** dV/dP (pu/W) of the monitored bus-phases to power drawn on each phase
  of a three-phase bus, reactive power following a power factor: the first request also computes
  those of every site, in one solve of the network's Jacobian (a controller asks for all of them);
  on a feeder whose generators hold their voltage, with each one inside its limits responding
  (:meth:`~openg2g.grid.feeder.regulated.RegulatedGenerators.held_derivatives`);
- **loading sensitivities** d(loading)/dP (%/W) of every branch, from the same complex dV/dP,
  made only for a controller that asks (a product per conductor).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from openg2g.core.state import PHASES, frozen_array
from openg2g.grid.config import tan_phi
from openg2g.grid.feeder.branches import BranchFlows
from openg2g.grid.feeder.network import NodeIndex, Switching
from openg2g.grid.feeder.powerflow import PowerFlowNetwork, magnitude_slopes
from openg2g.grid.feeder.regulated import RegulatedGenerators

__all__ = ["OperatingPoint", "Target"]

Target = tuple[str, float]
"""Where power is drawn: a three-phase bus and the power factor reactive power follows."""


class OperatingPoint:
    """The linearization of a feeder's power flow at one operating point (module docstring).

    :param network: the power flow at the switching in force.
    :param loads: ``(branch scales, PQ-port powers)`` of the point, as the last solve had them.
    :param nodes: the node numbering.
    :param monitored: node of each monitored bus-phase.
    :param flows: the branch currents, for loading sensitivities.
    :param switching: the switching in force (taps for the transformers' currents).
    :param sites: every site's target, computed with the first one asked.
    :param regulated: the feeder's voltage-regulating generators, None when it has none.
    """

    def __init__(
        self,
        network: PowerFlowNetwork,
        loads: tuple[np.ndarray, np.ndarray],
        nodes: NodeIndex,
        monitored: np.ndarray,
        flows: BranchFlows,
        switching: Switching,
        sites: Mapping[str, Target],
        regulated: RegulatedGenerators | None = None,
    ) -> None:
        self.network = network
        self.version = network.version
        self.loads = loads
        self._nodes = nodes
        self._monitored = monitored
        self._flows = flows
        self._switching = switching
        self._sites = dict(sites)
        self._regulated = regulated
        self._voltage: dict[Target, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._loading: dict[Target, np.ndarray] = {}

    def holds(self, network: PowerFlowNetwork, loads: tuple[np.ndarray, np.ndarray]) -> bool:
        """True when this is the point of ``network`` (unchanged since) at ``loads`` (the same object)."""
        return network is self.network and network.version == self.version and loads is self.loads

    def voltage_sensitivity(self, target: Target) -> np.ndarray:
        """dV/dP (pu/W) of the monitored bus-phases to power drawn at ``target``, shape
        ``(n_monitored, 3)`` (columns phases a, b, c), read-only."""
        return self._derivatives(target)[0]

    def loading_sensitivity(self, target: Target) -> np.ndarray:
        """d(loading)/dP (%/W) of every branch to power drawn at ``target``, shape ``(n_branches, 3)``,
        read-only: each conductor's ``d|I|/dP = Re(conj(I) M dV/dP) / |I|`` through the branch's most
        loaded conductor (:meth:`~openg2g.core.state.BranchSet.loading_slopes_pct`)."""
        if target not in self._loading:
            _, v, dv = self._derivatives(target)
            slopes = self._flows.branches.loading_slopes_pct(*self._flows.current_slopes(v, dv, self._switching))
            self._loading[target] = frozen_array(slopes)
        return self._loading[target]

    def _derivatives(self, target: Target) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(dV/dP pu/W of the monitored bus-phases, complex node voltages V, complex dV/dP V/W)``
        of ``target``; with those of every site not yet computed, in one solve."""
        if target not in self._voltage:
            wanted = [target, *(t for t in self._sites.values() if t != target and t not in self._voltage)]
            wanted = list(dict.fromkeys(wanted))
            nodes = np.array([self._nodes.index[(bus, p)] for bus, _ in wanted for p in PHASES])
            s_dir = np.repeat([1.0 + 1j * tan_phi(pf) for _, pf in wanted], len(PHASES))
            v, dv = self.network.voltage_derivatives(*self.loads, nodes, s_dir)
            if self._regulated is not None:
                dv = self._regulated.held_derivatives(self.network, *self.loads, v, dv)
            mon = self._monitored
            dv_dp = magnitude_slopes(v[mon], dv[mon]) / self._nodes.v_base_v[mon][:, None]
            for i, key in enumerate(wanted):
                cols = slice(3 * i, 3 * i + 3)
                self._voltage[key] = (frozen_array(dv_dp[:, cols]), v, dv[:, cols])
        return self._voltage[target]
