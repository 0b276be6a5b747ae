"""The reactive power of the generators that hold their voltage (OpenDSS generator model 3, a PV
bus), solved around the phase-frame power flow.

Each such generator is two constant-power branches per phase
(:func:`~openg2g.grid.feeder.network.load_ports`): its active power, fixed, and its reactive power
``Q`` per phase (var), the scale of a branch of 1 var. At given ``Q`` the power flow (dense or
sparse) solves exactly; what is left is, for each generator, the miss of the mean magnitude of
its phase voltages ``u_k`` (as OpenDSS measures it, see
:class:`~openg2g.grid.feeder.model.RegulatedGeneratorModel`) from its target ``V_t``::

    h(Q) = c mean_k |u_k| / V_t - 1        (c = 1/sqrt(3) on a delta generator, else 1)

OpenDSS's snapshot holds ``h = 0`` for each generator inside its limits, and leaves a generator
at a limit where its voltage stays on that limit's side (at ``kvar_max`` below the target, at
``kvar_min`` above): the fixed points of OpenDSS's own iteration, which moves ``Q`` by a multiple
of the voltage's miss and clamps it to the limits (``DoPVTypeGen`` in OpenDSS's
``Generator.pas``). Its ``vminpu``/``vmaxpu`` play no part: the current is ``conj((P + jQ) / u)``
at any voltage.

openg2g finds that point by Newton's method on ``Q``, every column of a batch at once. The slopes
``dh/dQ`` come from the network's own Jacobian at a solved point (a right-hand side per generator
branch, :meth:`~openg2g.grid.feeder.powerflow.PowerFlowNetwork.voltage_derivatives`); they are kept
from one solve to the next, like the chord iteration's factors, and taken anew at the last point
whenever an update fails to shrink the largest miss by :data:`SLOPE_RATE`. An update that would
pass a limit stops at it; a generator at a limit whose voltage has crossed to the other side of
its target is free again. A solve is done when every free generator misses its target by less
than the power flow's tolerance (pu), on a power flow solved at that ``Q``.

Voltage sensitivities follow the same physics (:meth:`RegulatedGenerators.held_derivatives`): a
generator inside its limits keeps its voltage when power is drawn elsewhere, so dV/dP is the
network's at fixed ``Q`` plus the reactive power that keeps every free generator on its target.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from openg2g.grid.feeder.model import FeederModel
from openg2g.grid.feeder.network import LoadPorts, regulated_branch_kinds
from openg2g.grid.feeder.powerflow import PowerFlowNetwork, Solution, magnitude_slopes

__all__ = ["MAX_UPDATES", "SLOPE_RATE", "RegulatedGenerators"]

MAX_UPDATES = 30
"""Updates of the generators' reactive power in one solve before it is given up as not converged."""

SLOPE_RATE = 0.1
"""An update that leaves the largest miss above this fraction of the one before takes new slopes."""

_SQRT3 = math.sqrt(3.0)


class RegulatedGenerators:
    """The voltage-regulating generators of a feeder and their reactive power (module docstring).

    :param model: the feeder (``model.regulated_generators`` not empty).
    :param ports: its load branches, those of the generators included.
    """

    def __init__(self, model: FeederModel, ports: LoadPorts) -> None:
        gens = model.regulated_generators
        self.names = tuple(g.name for g in gens)
        generator, reactive = regulated_branch_kinds(model, ports)
        self._rows = np.flatnonzero(reactive)
        """Load branches carrying each generator's reactive power, a generator's phases together."""
        self._gen = generator[self._rows]
        self._from = ports.from_node[self._rows]
        self._to = ports.to_node[self._rows]
        n_rows = np.bincount(self._gen, minlength=len(gens))
        c = np.array([1.0 / _SQRT3 if g.conn == "delta" else 1.0 for g in gens])
        target_v = np.array([g.v_pu * g.kv * 1000.0 / (_SQRT3 if g.n_phases > 1 else 1.0) for g in gens])
        self._weight = (c / (n_rows * target_v))[self._gen][:, None]
        self.q_min = np.array([g.kvar_min * 1000.0 / g.n_phases for g in gens])
        """Lowest reactive power per phase of each generator (var)."""
        self.q_max = np.array([g.kvar_max * 1000.0 / g.n_phases for g in gens])
        """Highest reactive power per phase of each generator (var)."""
        self._q_file = np.clip([g.kvar * 1000.0 / g.n_phases for g in gens], self.q_min, self.q_max)
        self.reset()

    def reset(self) -> None:
        """Start again from the reactive power OpenDSS solved when the file was read."""
        self.q_var = self._q_file.copy()
        """Reactive power per phase of each generator (var) at the last accepted solve."""
        self.held = np.zeros(len(self.names), dtype=bool)
        """True for each generator held at a limit at the last accepted solve."""
        self._slopes: np.ndarray | None = None

    # ------------------------------------------------------------------ the voltages
    def _branch_voltages(self, v: np.ndarray) -> np.ndarray:
        """Each reactive branch's voltage (V) for node voltages ``v`` (``(n_nodes, cols)``)."""
        ground = np.zeros((1, v.shape[1]), dtype=v.dtype)
        v_ext = np.concatenate([v, ground])  # row -1: ground
        return v_ext[self._from] - v_ext[self._to]

    def misses(self, v: np.ndarray) -> np.ndarray:
        """``h`` of every generator (pu of its target, > 0 above it) for node voltages ``v`` (V,
        ``(n_nodes, cols)``), ``(n_generators, cols)``."""
        h = np.full((len(self.names), v.shape[1]), -1.0)
        np.add.at(h, self._gen, self._weight * np.abs(self._branch_voltages(v)))
        return h

    def _responses(
        self, network: PowerFlowNetwork, v: np.ndarray, scale: np.ndarray, s_pq: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """dV/dQ (V/var, ``(n_nodes, n_generators)``: a generator's reactive power per phase, all its
        phases together) and the slopes dh/dQ (pu/var, ``(n_generators, n_generators)``) at the
        solved single-column point ``(scale, s_pq)`` whose node voltages are ``v`` (V, ``(n_nodes,)``).

        A branch's current from its first node to its second moves by ``j / conj(u)`` per var; as
        power drawn at each node ``m`` (what the network's derivatives take) that is ``-j V_m / u``
        at the first and ``j V_m / u`` at the second."""
        u = self._branch_voltages(v[:, None])[:, 0]
        live = u != 0
        with np.errstate(divide="ignore", invalid="ignore"):
            first = np.where(live, -1j * v[self._from] / u, 0.0)
            grounded = self._to < 0
            second = np.where(live, 1j * v[self._to] / u, 0.0)[~grounded]
        nodes = np.concatenate([self._from, self._to[~grounded]])
        _, dv = network.voltage_derivatives(scale, s_pq, nodes, np.concatenate([first, second]))
        per_branch = dv[:, : self._rows.size].copy()
        per_branch[:, np.flatnonzero(~grounded)] += dv[:, self._rows.size :]
        dv_dq = np.zeros((dv.shape[0], len(self.names)), dtype=complex)
        np.add.at(dv_dq.T, self._gen, per_branch.T)
        return dv_dq, self._slopes_of(v, dv_dq)

    def _slopes_of(self, v: np.ndarray, dv: np.ndarray) -> np.ndarray:
        """dh/dx (pu per unit of x) of every generator along node-voltage derivatives ``dv`` (V per
        unit of x, ``(n_nodes, k)``) at node voltages ``v`` (V, ``(n_nodes,)``)."""
        ground = np.zeros((1, dv.shape[1]), dtype=complex)
        dv_ext = np.concatenate([dv, ground])
        du = dv_ext[self._from] - dv_ext[self._to]
        u = self._branch_voltages(v[:, None])[:, 0]
        slopes = np.zeros((len(self.names), dv.shape[1]))
        np.add.at(slopes, self._gen, self._weight * magnitude_slopes(u, du))
        return slopes

    # ------------------------------------------------------------------ solving
    def solve(
        self,
        network: PowerFlowNetwork,
        scale: np.ndarray,
        s_pq_va: np.ndarray,
        tol_pu: float = 1e-8,
        max_iter: int = 100,
        u_init: np.ndarray | None = None,
    ) -> tuple[Solution, np.ndarray]:
        """Solve the columns of ``(scale, s_pq_va)`` (as :meth:`PowerFlowNetwork.solve`) with every
        generator's reactive power at the value that holds its voltage, or at its limit.

        :return: the solution, and the branch scales it was solved at (``(n_branch, n_cols)``, the
            generators' reactive power in their rows): the operating point to linearize.
        """
        n_cols = s_pq_va.shape[1]
        q = np.repeat(self.q_var[:, None], n_cols, axis=1)
        at = np.array(np.broadcast_to(scale, (scale.shape[0], n_cols)))
        worst_before = math.inf
        for _ in range(MAX_UPDATES):
            at[self._rows] = q[self._gen]
            sol = network.solve(at, s_pq_va, tol_pu, max_iter, u_init)
            u_init = None  # from then on, the network's own warm start: the last column solved
            if not sol.converged:
                return sol, at
            h = self.misses(sol.v)
            # a generator cut off from the source (its bus de-energized) delivers nothing: nothing to hold
            held = ((q >= self.q_max[:, None]) & (h <= 0.0)) | ((q <= self.q_min[:, None]) & (h >= 0.0))
            held |= self._cut_off(network)[:, None]
            worst = float(np.abs(np.where(held, 0.0, h)).max(initial=0.0))
            if worst < tol_pu:
                self.q_var, self.held = q[:, -1].copy(), held[:, -1].copy()
                return sol, at
            if self._slopes is None or worst > SLOPE_RATE * worst_before:
                self._slopes = self._responses(network, sol.v[:, -1], at[:, -1:], s_pq_va[:, -1:])[1]
            worst_before = worst
            q = np.clip(q + self._step(h, held), self.q_min[:, None], self.q_max[:, None])
        return dataclasses.replace(sol, converged=False), at

    def _cut_off(self, network: PowerFlowNetwork) -> np.ndarray:
        """True for each generator none of whose branches is energized in ``network``."""
        live = np.zeros(len(self.names), dtype=bool)
        np.logical_or.at(live, self._gen, ~network.currents.dead_branch[self._rows])
        return ~live

    def _step(self, h: np.ndarray, held: np.ndarray) -> np.ndarray:
        """Newton's update of the reactive power (var per phase, ``(n_generators, cols)``) that
        brings the free generators' misses ``h`` to 0, with the held ones' kept; the least-squares
        one where two generators regulate one voltage (their split is then not determined)."""
        assert self._slopes is not None
        dq = np.zeros_like(h)
        patterns, cols = np.unique(~held, axis=1, return_inverse=True)
        for k in range(patterns.shape[1]):
            free = np.flatnonzero(patterns[:, k])
            if free.size:
                these = np.flatnonzero(cols.ravel() == k)
                block = self._slopes[np.ix_(free, free)]
                dq[np.ix_(free, these)] = np.linalg.lstsq(block, -h[np.ix_(free, these)], rcond=None)[0]
        return dq

    # ------------------------------------------------------------------ sensitivities
    def held_derivatives(
        self, network: PowerFlowNetwork, scale: np.ndarray, s_pq_va: np.ndarray, v: np.ndarray, dv: np.ndarray
    ) -> np.ndarray:
        """dV/dP (V/W, ``(n_nodes, k)``) with the generators responding: ``dv`` is the network's at
        fixed reactive power at the point ``(scale, s_pq_va)`` of the last accepted solve (node
        voltages ``v``, V); each generator free there moves its reactive power so that its voltage
        stays on target, the held ones keep theirs."""
        free = np.flatnonzero(~self.held)
        if not free.size:
            return dv
        dv_dq, slopes = self._responses(network, v, scale, s_pq_va)
        miss = self._slopes_of(v, dv)[free]
        dq = np.linalg.lstsq(slopes[np.ix_(free, free)], -miss, rcond=None)[0]
        return dv + dv_dq[:, free] @ dq
