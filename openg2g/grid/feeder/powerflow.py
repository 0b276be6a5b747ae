"""What the dense and the sparse phase-frame power flows share: chord Newton's driver, the
continuation that tells operating points from low-voltage solutions, the voltage sensitivities,
and the :class:`Solution` they return.

Both solve the same equations (:mod:`~openg2g.grid.feeder.ports` for the loads): the network
(source, lines, transformers, capacitors, nominal load admittances) is linear, with nodal
admittance ``Y``; the ports draw compensation currents ``i_c(u)`` at their voltages ``u = P V``.
The dense network (:mod:`~openg2g.grid.feeder.solver`) iterates on the port voltages with
``Z = Y^-1``; the sparse one (:mod:`~openg2g.grid.feeder.sparse`) on the node voltages with a
sparse LU. Either keeps the LU factors of its Jacobian from one solve to the next (chord Newton)
and refreshes them when the iteration contracts slowly.

Voltage collapse: past the nose of the P-V curve the equations keep solutions on the
low-voltage branch (true solutions but not operating points), and a warm start can find one, or
follow that branch back down after the load falls. The operating point is the solution reached
continuously from no load. The real Jacobian's determinant keeps its no-load sign up to a fold
(the nose), where it changes sign. So a column whose lowest port voltage is below
:data:`BRANCH_CHECK_PU`, or that did not converge, is solved again by continuation: the whole
load scaled up from 0 in adaptive steps, each Newton solve warm-started from the previous one
and accepted only while the determinant keeps its no-load sign. If the path ends before full
load the column is collapsed and the fraction of its load the feeder can carry is reported.
Steps whose voltages are all above the threshold skip this (one comparison per port). A rejected
column is never used as a warm start.

Faults (:mod:`~openg2g.grid.feeder.faults`) are part of the network, so "no load" means the
faulted network's own voltages: a port is a suspect only when its load pulls it below
:data:`BRANCH_CHECK_PU` of what the faulted network leaves there, never for the depression the
fault itself causes, and the continuation scales the loads, not the fault. Loads near a fault sit
at their low-voltage models (an OpenDSS model-1 load is an admittance below its ``vminpu``), which
the continuation carries to full load; a port drawing constant power there asks for more than any
voltage delivers, and its column is collapsed (or reaches no load fraction at all).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

import numpy as np

from openg2g.core.errors import PowerFlowError
from openg2g.grid.feeder.model import CapacitorModel, FeederModel, TransformerModel
from openg2g.grid.feeder.network import (
    LoadPorts,
    NodeIndex,
    Switching,
    capacitor_admittance,
    tap_change_admittance,
)
from openg2g.grid.feeder.ports import KernelContext, PortCurrents, column, columns

__all__ = [
    "BRANCH_CHECK_PU",
    "CHORD_RATE",
    "DIVERGED_PU",
    "Linearization",
    "NewtonResult",
    "PowerFlowNetwork",
    "Solution",
    "magnitude_slopes",
]

DIVERGED_PU = 10.0
"""A port-voltage residual above this (pu) means the iteration is diverging."""

CHORD_RATE = 0.1
"""A chord iteration that reduces the update by less than this factor is slow: the dense path
then refactorizes the Jacobian at the current point (the sparse one if that also pays). Measured
on the bundled feeders with 0.1 s load steps: a Jacobian from an earlier operating point
contracts by 0.15-0.2 per iteration (8-11 iterations to 1e-8 pu), a fresh one by 1e-3 or better
(2-4 iterations)."""

BRANCH_CHECK_PU = 0.75
"""A converged column with a port voltage below this fraction of its no-load voltage is re-solved
by continuation. On the bundled feeders the nose of the P-V curve lies near 0.6 pu (IEEE 123 with
a pf 0.95 datacenter at bus 300: 0.62 pu at 4.8 MW), so low-branch solutions fall below it, while
operating points inside any voltage limit skip the continuation."""

_PATH_FIRST_STEP = 0.25
"""First load-fraction step of the continuation (doubled after each success, halved on failure)."""

_PATH_MIN_STEP = 1.0 / 512
"""Smallest load-fraction step: failing at it means the path has reached the nose."""

_PATH_MAX_ITER = 30
"""Newton iteration limit per continuation step (a step that needs more is halved)."""

FactorsT = TypeVar("FactorsT")
"""A network's LU factors of its Jacobian."""


def magnitude_slopes(z: np.ndarray, dz: np.ndarray) -> np.ndarray:
    """Derivatives ``d|z| = Re(conj(z) dz) / |z|`` of the magnitudes of complex ``z`` (``(n,)``)
    along derivatives ``dz`` (``(n, k)``), in the units of ``dz``; 0 where ``z`` is 0 (a
    de-energized node, a branch carrying nothing)."""
    zc = z[:, None]
    magnitude = np.abs(zc)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(magnitude > 0, np.real(np.conj(zc) * dz) / magnitude, 0.0)


def _put_columns(into: tuple[np.ndarray, np.ndarray, np.ndarray], cols: np.ndarray, *parts: np.ndarray) -> None:
    """Write each of ``parts`` into columns ``cols`` of the matching array of ``into``."""
    for target, part in zip(into, parts):
        target[:, cols] = part


def _same_point(scale_a: np.ndarray, s_pq_a: np.ndarray, scale_b: np.ndarray, s_pq_b: np.ndarray) -> bool:
    """True if two single-column operating points have the same loads, bit for bit."""
    return np.array_equal(scale_a, scale_b) and np.array_equal(s_pq_a, s_pq_b)


class NewtonResult(NamedTuple):
    """What a network's chord Newton ends with.

    :ivar u: the network's unknowns (V): port voltages (dense) or node voltages (sparse).
    :ivar converged: every column met the tolerance.
    :ivar iterations: iterations used.
    :ivar i_comp: compensation currents (A) that go with ``u`` (the network driven by them has
        the voltages ``u`` when converged).
    :ivar i_actual: load currents (A) that go with ``u``.
    """

    u: np.ndarray
    converged: bool
    iterations: int
    i_comp: np.ndarray
    i_actual: np.ndarray


@dataclass(frozen=True)
class Linearization(Generic[FactorsT]):
    """A solved operating point and its Jacobian, for voltage sensitivities.

    :param scale: the load multipliers it was solved at.
    :param s_pq_va: the PQ powers it was solved at (VA).
    :param v: node voltages (V).
    :param dx: derivative of each port's compensation current with respect to the real part of
        its voltage (S), ``(n_ports, 1)``; ``dy`` likewise for the imaginary part.
    :param factors: LU factors of the Jacobian there.
    """

    scale: np.ndarray
    s_pq_va: np.ndarray
    v: np.ndarray
    dx: np.ndarray
    dy: np.ndarray
    factors: FactorsT


@dataclass(frozen=True)
class Solution:
    """A solved set of operating points (one column each).

    :param v: node voltages (V), shape ``(n_nodes, n_cols)``.
    :param s_sub_va: complex power the source delivers per phase a, b, c (VA), ``(3, n_cols)``.
    :param losses_w: active losses (W) per column.
    :param iterations: iterations used.
    :param converged: True if every column has an operating point at its full load that meets
        the tolerance.
    :param collapsed: per column, True when the load is past the voltage-collapse point (the
        operating point, followed up from no load, ends at the nose before full load).
    :param load_fraction: per column, the fraction of the column's load (all loads and
        injections scaled together) up to which its operating point was followed: 1.0 when
        solved, below 1 when collapsed (``v``, ``s_sub_va`` and ``losses_w`` are then those of
        that last solvable point), 0.0 when not even a small fraction solves.
    """

    v: np.ndarray
    s_sub_va: np.ndarray
    losses_w: np.ndarray
    iterations: int
    converged: bool
    collapsed: np.ndarray
    load_fraction: np.ndarray


class PowerFlowNetwork(ABC, Generic[FactorsT]):
    """A feeder at one switching state, ready to solve (the dense or the sparse formulation).

    A subclass sets :attr:`u0` (its unknowns with every load at its nominal admittance) and then
    calls :meth:`_start`; it provides the chord Newton iteration, the Jacobian's factors and
    determinant test, and the network quantities of a solution.

    :param model: the feeder.
    :param nodes: its node numbering.
    :param ports: its load branches.
    :param pq_nodes: node of each PQ port (wye injections).
    :param state: taps, capacitor and line states.
    :param pq_band: per PQ port ``(vminpu, vmaxpu)`` of an OpenDSS model-1 element (constant
        power inside the band, constant impedance outside), NaNs for constant power at any
        voltage; None = every port constant power.
    """

    u0: np.ndarray
    """The unknowns (V) with every load at its nominal admittance: the start of the continuation."""

    _retire_converged: bool
    """True when a converged column of a batch leaves the chord iteration (the others go on)."""

    u_last: np.ndarray
    """The unknowns (V) of the last accepted column, ``(n, 1)``: the default warm start."""

    def __init__(
        self,
        model: FeederModel,
        nodes: NodeIndex,
        ports: LoadPorts,
        pq_nodes: np.ndarray,
        state: Switching,
        pq_band: np.ndarray | None = None,
    ) -> None:
        self.nodes = nodes
        self.ports = ports
        self.pq_nodes = np.asarray(pq_nodes, dtype=int)
        self.currents = PortCurrents(model, nodes, ports, self.pq_nodes, state, pq_band)

    def _start(self) -> None:
        """Set the state a new network starts from, once :attr:`u0` is known."""
        self._v_check = self._branch_check_v()
        self.u_last = self.u0[:, None].copy()
        self._factors: FactorsT | None = None
        self._lin: Linearization[FactorsT] | None = None
        self._solved: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # last accepted (scale, s_pq, v)
        self.version = 0
        """Count of in-place admittance changes: with the object, it names the network."""

    def retap(self, t: TransformerModel, old_taps_pu: np.ndarray, new_taps_pu: np.ndarray) -> None:
        """Change a transformer's winding-2 taps in place (cheaper than a new network)."""
        self.change_admittance(tap_change_admittance(t, old_taps_pu, new_taps_pu, self.nodes))

    def switch_capacitor(self, cap: CapacitorModel, closed: bool) -> None:
        """Close (``closed=True``) or open a capacitor in place (cheaper than a new network); the
        caller switches only a capacitor whose state changes."""
        blocks = capacitor_admittance(cap, self.nodes)
        if not closed:
            blocks = {i: {j: -y for j, y in row.items()} for i, row in blocks.items()}
        self.change_admittance(blocks)

    def change_admittance(self, blocks: dict[int, dict[int, complex]]) -> None:
        """Add ``blocks`` (row node -> column node -> S) to the nodal admittance in place; the
        network is then another one (:attr:`version`), and what was solved or factorized at an
        operating point is dropped."""
        if not blocks:
            return
        self._change_admittance(blocks)
        self._lin = self._solved = None
        self.version += 1

    # ------------------------------------------------------------------ what a formulation provides
    @abstractmethod
    def _change_admittance(self, blocks: dict[int, dict[int, complex]]) -> None:
        """Add ``blocks`` (row node -> column node -> S, not empty) to the nodal admittance in place."""

    @abstractmethod
    def _update(self, u: np.ndarray, i_comp: np.ndarray) -> np.ndarray:
        """The update ``g`` (V) of the unknowns ``u`` whose ports draw ``i_comp`` (A): the iteration
        has converged when ``P g`` is small, and then returns ``u - g``."""

    @abstractmethod
    def _step(self, g: np.ndarray) -> np.ndarray:
        """The step (V) the iteration takes for the update ``g`` (:meth:`_update`) when it has not
        converged, with the factors in force."""

    @abstractmethod
    def _refresh(self, err: float, err_prev: float, n_cols: int, tol_pu: float) -> bool:
        """True when the Jacobian should be refactorized at the current point: the largest update
        went from ``err_prev`` to ``err`` (pu) with ``n_cols`` columns iterating toward ``tol_pu``."""

    @abstractmethod
    def _port_voltages(self, u: np.ndarray) -> np.ndarray:
        """Port voltages (V) of the unknowns ``u``."""

    @abstractmethod
    def _network(
        self, u: np.ndarray, i_comp: np.ndarray, i_actual: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Node voltages (V), source power per phase (VA) and losses (W) of the unknowns ``u``
        with the ports' compensation currents ``i_comp`` (A) and load currents ``i_actual`` (A)."""

    @abstractmethod
    def _factorize(self, dx: np.ndarray, dy: np.ndarray) -> FactorsT:
        """LU factors of the Jacobian whose ports have the compensation-current derivatives ``dx``,
        ``dy`` (S, ``(n_ports,)``, see :meth:`PortCurrents.i_comp_derivatives`)."""

    @abstractmethod
    def _low_branch(self, u: np.ndarray, ctx: KernelContext, s_conj: np.ndarray, col: int) -> bool:
        """True if column ``col`` of ``u`` is past the nose: the Jacobian's determinant there does
        not have its no-load sign."""

    @abstractmethod
    def _derivatives(self, lin: Linearization[FactorsT], nodes: np.ndarray, c: np.ndarray) -> np.ndarray:
        """dV/dP (V/W) of every node at ``lin`` for current ``c`` (A/W) drawn at each of ``nodes``
        (one column each), with ``lin``'s factors in force."""

    # ------------------------------------------------------------------ shared
    def _newton(
        self, u: np.ndarray, ctx: KernelContext, s_conj: np.ndarray, tol_pu: float, max_iter: int
    ) -> NewtonResult:
        """Chord Newton from ``u`` (the formulation's :meth:`_update` and :meth:`_step`,
        through :meth:`_relative_update` and :meth:`_advance`).

        A column converges when the largest update of a port voltage, ``|P g|``, is below
        ``tol_pu`` of the port's base voltage; its result is ``u - g`` with the currents of ``u``.
        Where :attr:`_retire_converged`, a converged column leaves the iteration; otherwise every
        column iterates until all have converged. When :meth:`_refresh` says so, the Jacobian is
        refactorized at the current point, first column still iterating (a Newton step from
        there). It gives up when an update exceeds :data:`DIVERGED_PU` or after ``max_iter``
        iterations.
        """
        if self._factors is None:
            self._factors = self._factorize(*self._derivatives_at(u, ctx, s_conj, 0))
        err_prev = np.inf
        it = 0
        i_comp = i_actual = u
        # once columns retire: every column's result, and the columns still iterating
        retired: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        left = np.arange(u.shape[1])
        for it in range(1, max_iter + 1):
            i_comp, i_actual = self.currents.i_comp(self._port_voltages(u), ctx, s_conj)
            g = self._update(u, i_comp)
            rel_err = self._relative_update(g)
            col_err = None
            if isinstance(rel_err, np.ndarray):  # per column: where columns retire
                col_err, err = rel_err, rel_err.max(initial=0.0)
            else:
                err = rel_err
            if not err < DIVERGED_PU:  # also catches NaN
                break
            if err < tol_pu:
                if retired is None:
                    return NewtonResult(u - g, True, it, i_comp, i_actual)
                _put_columns(retired, left, u - g, i_comp, i_actual)
                return NewtonResult(retired[0], True, it, retired[1], retired[2])
            if col_err is not None and (col_err < tol_pu).any():
                if retired is None:
                    currents = (i_comp.shape[0], u.shape[1])
                    retired = (u.copy(), np.empty(currents, dtype=complex), np.empty(currents, dtype=complex))
                done = col_err < tol_pu
                _put_columns(retired, left[done], (u - g)[:, done], i_comp[:, done], i_actual[:, done])
                keep = ~done
                left, u, g, s_conj, ctx = left[keep], u[:, keep], g[:, keep], s_conj[:, keep], columns(ctx, keep)
                err = col_err[keep].max()
            if self._refresh(err, err_prev, left.size, tol_pu):
                self._factors = self._factorize(*self._derivatives_at(u, ctx, s_conj, 0))
            err_prev = err
            u = self._advance(u, g)
        if retired is None:
            return NewtonResult(u, False, it, i_comp, i_actual)
        _put_columns(retired, left, u, i_comp, i_actual)
        return NewtonResult(retired[0], False, it, retired[1], retired[2])

    def _branch_check_v(self) -> np.ndarray:
        """Port voltage (V, ``(n_ports, 1)``) below which a converged column is a suspect
        (:data:`BRANCH_CHECK_PU` of the port's no-load voltage; 0 on a de-energized port).

        Measured against each port's no-load voltage, not its load's rated kV: a file may rate a
        wye load in line-to-line kV (IEEE 34 does), which would put it "below" at any load."""
        u0 = self._port_voltages(self.u0[:, None])[:, 0]
        return np.where(self.currents.dead_ports, 0.0, BRANCH_CHECK_PU * np.abs(u0))[:, None]

    def nominal_port_voltages(self) -> np.ndarray:
        """Port voltages (V, ``(n_ports,)``: load branches, then PQ ports) of :attr:`u0`, every load at
        its nominal admittance and no PQ port drawing: what the network alone (a fault in it
        included) leaves at each port."""
        return self._port_voltages(self.u0[:, None])[:, 0]

    def _relative_update(self, g: np.ndarray) -> np.ndarray | float:
        """``|P g|`` of the update ``g`` (:meth:`_update`, the last one made) relative to each
        port's base voltage: the largest per column (``(n_cols,)``) where :attr:`_retire_converged`,
        else the largest of all (NaN if any is NaN)."""
        rel_err = np.abs(self._port_voltages(g)) / self.currents.v_ref
        return rel_err.max(axis=0, initial=0.0) if self._retire_converged else rel_err.max(initial=0.0)

    def _advance(self, u: np.ndarray, g: np.ndarray) -> np.ndarray:
        """The next iterate (V) from ``u`` and its update ``g`` (:meth:`_update`, the last one
        made) when it has not converged: ``u`` minus :meth:`_step`."""
        return u - self._step(g)

    def _derivatives_at(
        self, u: np.ndarray, ctx: KernelContext, s_conj: np.ndarray, col: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ports' compensation-current derivatives (S, ``(n_ports,)`` each) at column ``col``."""
        dx, dy = self.currents.i_comp_derivatives(
            self._port_voltages(u[:, col : col + 1]), column(ctx, col), s_conj[:, col : col + 1]
        )
        return dx[:, 0], dy[:, 0]

    def _voltages(
        self, u: np.ndarray, ctx: KernelContext, s_conj: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Node voltages (V), source power per phase (VA) and losses (W) of the unknowns ``u``."""
        return self._network(u, *self.currents.i_comp(self._port_voltages(u), ctx, s_conj))

    def _principal(self, ctx: KernelContext, s_conj: np.ndarray, tol_pu: float) -> tuple[np.ndarray, float]:
        """Follow a single column's operating point up from no load (see the module docstring).

        :return: the unknowns at the last solved load fraction, and that fraction (1.0 when the
            whole load is carried).
        """
        u = self.u0[:, None].copy()
        lam, step = 0.0, _PATH_FIRST_STEP
        self._factors = None
        while lam < 1.0 and step >= _PATH_MIN_STEP:
            nxt = min(1.0, lam + step)
            c, sn = column(ctx, 0, nxt), s_conj * nxt
            step_result = self._newton(u.copy(), c, sn, tol_pu, _PATH_MAX_ITER)
            un, ok = step_result.u, step_result.converged
            if ok and not self._low_branch(un, c, sn, 0):
                u, lam, step = un, nxt, 2.0 * step
            else:
                step /= 2.0
                self._factors = None
        return u, lam

    def solve(
        self,
        scale: np.ndarray,
        s_pq_va: np.ndarray,
        tol_pu: float = 1e-8,
        max_iter: int = 100,
        u_init: np.ndarray | None = None,
    ) -> Solution:
        """Solve one column per operating point.

        Chord Newton (the formulation's, see its class): the LU factors of the (analytic)
        Jacobian are kept from one solve to the next and refreshed at the current point whenever
        an iteration contracts slowly (a full Newton step then); :meth:`voltage_sensitivity` also
        leaves fresh factors at its operating point. It gives up when the residual exceeds
        :data:`DIVERGED_PU` or ``max_iter`` is reached, and converges when the largest update of
        a voltage is below ``tol_pu`` of its base. Converged columns with a port below
        :data:`BRANCH_CHECK_PU`, and a single column that did not converge, are solved again by
        continuation from no load (module docstring).

        :param scale: load multiplier per load branch, ``(n_branch, 1)`` or ``(n_branch, n_cols)``.
        :param s_pq_va: complex power drawn at each PQ node (VA, > 0 = consumption),
            ``(n_pq, n_cols)``.
        :param tol_pu: convergence tolerance on the voltage update (pu).
        :param max_iter: iteration limit.
        :param u_init: starting unknowns, ``(n, 1)`` or ``(n, n_cols)`` with ``n = len(u0)``;
            default the last accepted column (warm start).
        """
        n_cols = s_pq_va.shape[1]
        if u_init is None:
            u_init = self.u_last
        u = np.empty((self.u0.shape[0], n_cols), dtype=complex)
        u[:] = u_init
        ctx = self.currents.prepared(scale, n_cols)
        s_conj = np.conj(s_pq_va * self.currents.live_pq)
        self._lin = self._solved = None
        result = self._newton(u, ctx, s_conj, tol_pu, max_iter)
        u, converged, it = result.u, result.converged, result.iterations
        lam, collapsed, ok, low = self._continue_suspects(u, ctx, s_conj, converged, tol_pu)
        if converged and not low.any():
            v, s_sub, losses = self._network(u, result.i_comp, result.i_actual)
        else:
            v, s_sub, losses = self._voltages(u, ctx, s_conj)
        if ok:
            self.u_last = u[:, -1:].copy()
            self._solved = (
                scale[:, -1:].copy(),
                s_pq_va[:, -1:].copy(),
                v[:, -1].copy(),
            )
        else:
            for j in np.flatnonzero(collapsed).tolist():
                v[:, j : j + 1], s_sub[:, j : j + 1], losses[j : j + 1] = self._voltages(
                    u[:, j : j + 1], column(ctx, j, lam[j]), s_conj[:, j : j + 1] * lam[j]
                )
            if converged and (lam == 1.0).any():  # never warm-start from a rejected column
                last = np.flatnonzero(lam == 1.0)[-1]
                self.u_last = u[:, last : last + 1].copy()
            self._factors = None  # taken at a bad point: rebuild from the warm start next time
        return Solution(
            v=v,
            s_sub_va=s_sub,
            losses_w=losses,
            iterations=it,
            converged=ok,
            collapsed=collapsed,
            load_fraction=lam,
        )

    def _continue_suspects(
        self,
        u: np.ndarray,
        ctx: KernelContext,
        s_conj: np.ndarray,
        converged: bool,
        tol_pu: float,
    ) -> tuple[np.ndarray, np.ndarray, bool, np.ndarray]:
        """Re-solve by continuation from no load (in place in ``u``) every suspect column: a
        converged one with a port below :data:`BRANCH_CHECK_PU` of its no-load voltage, or a single
        column that did not converge.

        :return: ``(load fraction reached per column, collapsed per column, all accepted, suspect
            per column)``.
        """
        n_cols = u.shape[1]
        lam = np.ones(n_cols)
        collapsed = np.zeros(n_cols, dtype=bool)
        ok = converged
        if converged:
            low = (np.abs(self._port_voltages(u)) < self._v_check).any(axis=0)
        else:
            low = np.full(n_cols, n_cols == 1)
        if low.any():
            check = np.flatnonzero(low)
            for j in check.tolist():
                u[:, j : j + 1], lam[j] = self._principal(column(ctx, j), s_conj[:, j : j + 1], tol_pu)
            collapsed = (lam > 0.0) & (lam < 1.0)
            ok = bool((lam[check] == 1.0).all())
        return lam, collapsed, ok, low

    def voltage_sensitivity(
        self,
        scale: np.ndarray,
        s_pq_va: np.ndarray,
        nodes: np.ndarray,
        s_dir: complex | np.ndarray,
        rows: np.ndarray | None = None,
    ) -> np.ndarray:
        """d|V|/dP (V/W) of every node (or of ``rows``) with respect to active power drawn at each
        of ``nodes``, from :meth:`voltage_derivatives` (arguments and errors as there).

        :param rows: node numbers to report, default every node.
        :return: ``(len(rows), len(nodes))``.
        """
        v, dv = self.voltage_derivatives(scale, s_pq_va, nodes, s_dir)
        if rows is not None:
            dv, v = dv[rows], v[rows]
        return magnitude_slopes(v, dv)

    def voltage_derivatives(
        self,
        scale: np.ndarray,
        s_pq_va: np.ndarray,
        nodes: np.ndarray,
        s_dir: complex | np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Complex node voltages ``V`` (V) and their derivatives dV/dP (V/W) with respect to
        active power drawn at each of ``nodes`` (a wye constant-power load, its complex power
        ``P * s_dir``), at the operating point of one column ``(scale, s_pq_va)`` (see :meth:`solve`).

        Implicit function theorem on the power-flow equations with the added load's current
        ``i_m = conj(P s_dir) / conj(V_m)`` (its derivative ``c = conj(s_dir) / conj(V_m)`` per W
        at ``P = 0``), through the Jacobian of every load model as the solver models it (the
        formulation's :meth:`_derivatives`). The point is solved unless it is the last column the
        last :meth:`solve` accepted; one LU factorization per point, shared by calls at the same
        point and left for the next solve's chord iterations; every entry of ``nodes`` is one
        right-hand side of one triangular solve. Nodes that are de-energized (or a de-energized
        ``nodes`` entry) give 0. ``P`` is real, so ``dV`` is an ordinary derivative although ``V``
        is not holomorphic in the power.

        :param scale: load multiplier per load branch, ``(n_branch, 1)``.
        :param s_pq_va: complex power drawn at each PQ node (VA), ``(n_pq, 1)``.
        :param nodes: node numbers at which power is drawn, one column of the result each.
        :param s_dir: complex power per watt drawn (``1 + j tan(phi)`` for power factor
            ``cos(phi)``), one value or one per entry of ``nodes``.
        :return: ``V`` of shape ``(n_nodes,)`` and ``dV/dP`` of shape ``(n_nodes, len(nodes))``.
        :raises PowerFlowError: the operating point does not converge (or is past collapse).
        """
        lin = self._lin
        if lin is None or not _same_point(lin.scale, lin.s_pq_va, scale, s_pq_va):
            if self._solved is None or not _same_point(*self._solved[:2], scale, s_pq_va):
                sol = self.solve(scale, s_pq_va)
                if not sol.converged:
                    raise PowerFlowError(
                        "voltage sensitivity: the operating point it is taken at does not converge "
                        f"(load fraction carried {sol.load_fraction[0]:.3f})"
                    )
            assert self._solved is not None
            v = self._solved[2]
            u = self.u_last
            ctx = self.currents.prepared(scale, 1)
            s_conj = np.conj(s_pq_va * self.currents.live_pq)
            dx, dy = self.currents.i_comp_derivatives(self._port_voltages(u), ctx, s_conj)
            lin = Linearization(scale.copy(), s_pq_va.copy(), v, dx, dy, self._factorize(dx[:, 0], dy[:, 0]))
            self._lin = lin
        self._factors = lin.factors
        nodes = np.asarray(nodes, dtype=int)
        v_m = lin.v[nodes]
        with np.errstate(divide="ignore", invalid="ignore"):
            c = np.where(v_m != 0, np.conj(s_dir) / np.conj(v_m), 0.0)  # A drawn per W
        return lin.v, self._derivatives(lin, nodes, c)
