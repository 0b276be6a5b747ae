"""The dense phase-frame power flow: current injection on the load ports, solved by chord Newton
on the port voltages (the small feeders' path; :mod:`~openg2g.grid.feeder.sparse` for large ones).

The network (source, lines, transformers, capacitors, nominal load admittances) is linear; its
impedance matrix ``Z = Y^-1`` is computed once per switching state. The nonlinear part lives on
the ports (:mod:`~openg2g.grid.feeder.ports`). With port voltages ``u = P V`` and compensation
currents ``i_c``, the solution satisfies

    u = u0 - K i_c(u),    K = P Z P^T,  u0 = P Z I_source,

and node voltages follow as ``V = Z (I_source - P^T i_c)``. Many operating points (columns) solve
at once, which is the batch mode. The answer is exact for the model: these are the equations
OpenDSS solves. The real Jacobian of ``F(u) = u - u0 + K i_c(u)`` is the identity at no load, so
its no-load determinant is positive (continuation and collapse: :mod:`~openg2g.grid.feeder.powerflow`).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.lapack import dgetrf, dgetrs

from openg2g.grid.feeder.model import FeederModel
from openg2g.grid.feeder.network import (
    LoadPorts,
    NodeIndex,
    Switching,
    admittance,
    per_phase,
    source_admittance,
    source_current,
    source_nodes,
    source_rows,
)
from openg2g.grid.feeder.ports import KernelContext
from openg2g.grid.feeder.powerflow import CHORD_RATE, Linearization, PowerFlowNetwork

__all__ = ["CompiledNetwork"]

_LapackLU = tuple[np.ndarray, np.ndarray]
"""LAPACK LU factors and pivots (``dgetrf``)."""


class CompiledNetwork(PowerFlowNetwork[_LapackLU]):
    """A feeder at one switching state, reduced to its ports with dense matrices, ready to solve.

    Arguments as :class:`~openg2g.grid.feeder.powerflow.PowerFlowNetwork`; the unknowns ``u0``,
    ``u_last`` are port voltages (V). Every column of a batch iterates until all have converged
    (the iterations, and so the bundled runs' tables, are those of this path before the sparse
    one existed).
    """

    _retire_converged = False

    def __init__(
        self,
        model: FeederModel,
        nodes: NodeIndex,
        ports: LoadPorts,
        pq_nodes: np.ndarray,
        state: Switching,
        pq_band: np.ndarray | None = None,
    ) -> None:
        super().__init__(model, nodes, ports, pq_nodes, state, pq_band)
        n = len(nodes)
        y = admittance(model, nodes, state, ports)
        self.z = z = np.linalg.inv(y)
        self.src_nodes = source_nodes(model, nodes)
        self._src_rows = source_rows(model)
        self.y_src = source_admittance(model)
        # A stiff source (a pandapower slack, whose positive-sequence impedance is near zero) loses
        # its current to cancellation in y_src (E - V); the network side of its bus gives it whole:
        # y_src (E - V_src) = Y_net[src, :] V + the ports' compensation currents at src.
        self._y_net_src: np.ndarray | None = None
        if model.source.z2_ohm is not None:
            self._y_net_src = y[self.src_nodes].copy()
            self._y_net_src[:, self.src_nodes] -= self.y_src
        i_src = source_current(model, nodes, state.source_pu)
        self.e_src = np.linalg.solve(self.y_src, i_src[self.src_nodes])
        self.v0 = z @ i_src
        n_l, n_q = len(ports.from_node), len(self.pq_nodes)
        inc = np.zeros((n_l + n_q, n))
        rows = np.arange(n_l)
        inc[rows, ports.from_node] = 1.0
        grounded = ports.to_node < 0
        inc[rows[~grounded], ports.to_node[~grounded]] = -1.0
        inc[n_l + np.arange(n_q), self.pq_nodes] = 1.0
        self.inc = inc
        self._inc_src = inc[:, self.src_nodes].T.copy()
        self.w = z @ inc.T
        self.k = inc @ self.w
        self.u0 = inc @ self.v0
        self._v_ref = np.ascontiguousarray(self.currents.v_ref[:, 0])
        from openg2g.grid.feeder.kernels import chord_step, chord_update  # numba loads with the first feeder

        self._chord_update, self._chord_step = chord_update, chord_step
        self._start()

    def _change_admittance(self, blocks: dict[int, dict[int, complex]]) -> None:
        """Add ``blocks`` (a tap change, a capacitor switched) to the admittance in place by a
        low-rank (Woodbury) update of ``Z`` and everything derived from it, instead of a new inversion.

        ``Y`` is complex symmetric, so with ``dY = U D U^T`` on the touched nodes ``S``:
        ``Z' = Z - Z[:, S] M Z[S, :]`` with ``M = (I + D Z[S, S])^-1 D``.
        """
        if self._y_net_src is not None:
            for r, i in enumerate(self.src_nodes):
                for j, dy in blocks.get(int(i), {}).items():
                    self._y_net_src[r, j] += dy
        sel = sorted(blocks)
        d = np.array([[blocks[i].get(j, 0j) for j in sel] for i in sel])
        z_s = self.z[:, sel]
        w_s = self.w[sel, :]
        v0_s = self.v0[sel]
        m = np.linalg.solve(np.eye(len(sel)) + d @ z_s[sel, :], d)
        self.z -= z_s @ (m @ z_s.T)
        self.w -= z_s @ (m @ w_s)
        self.k -= w_s.T @ (m @ w_s)
        self.v0 -= z_s @ (m @ v0_s)
        self.u0 = self.inc @ self.v0
        self._v_check = self._branch_check_v()

    def _port_voltages(self, u: np.ndarray) -> np.ndarray:
        """The unknowns are the port voltages: ``u`` itself."""
        return u

    def _jacobian(self, u: np.ndarray, ctx: KernelContext, s_conj: np.ndarray, col: int) -> np.ndarray:
        """Real Jacobian of ``F(u) = u - u0 + K i_c(u)`` at column ``col`` of ``u`` (see
        :meth:`_jacobian_of`)."""
        return self._jacobian_of(*self._derivatives_at(u, ctx, s_conj, col))

    def _jacobian_of(self, dx: np.ndarray, dy: np.ndarray) -> np.ndarray:
        """Real Jacobian ``(2n, 2n)`` of ``F(u) = u - u0 + K i_c(u)``, unknowns and residuals
        ordered real parts then imaginary parts, from the derivatives ``dx``, ``dy`` (S) of each
        port's compensation current with respect to the real and imaginary parts of its own
        voltage (:meth:`PortCurrents.i_comp_derivatives`): ``dF = du + K dx Re(du) + K dy Im(du)``."""
        n = dx.shape[0]
        kx, ky = self.k * dx, self.k * dy
        jac = np.empty((2 * n, 2 * n), order="F")  # LAPACK's layout: dgetrf factors it in place
        jac[:n, :n], jac[n:, :n] = kx.real, kx.imag
        jac[:n, n:], jac[n:, n:] = ky.real, ky.imag
        jac.flat[:: 2 * n + 1] += 1.0
        return jac

    def _low_branch(self, u: np.ndarray, ctx: KernelContext, s_conj: np.ndarray, col: int) -> bool:
        """True if column ``col`` is past the nose: the Jacobian's determinant is not positive."""
        sign, _ = np.linalg.slogdet(self._jacobian(u, ctx, s_conj, col))
        return bool(sign <= 0)

    def _factorize(self, dx: np.ndarray, dy: np.ndarray) -> _LapackLU:
        """LU factors of :meth:`_jacobian_of` (a singular one gives non-finite steps, which the
        iteration reports as divergence). A feeder without ports has nothing to factorize (LAPACK
        would refuse the empty matrix with a message on stderr)."""
        if dx.shape[0] == 0:
            return np.empty((0, 0), order="F"), np.empty(0, dtype=np.int32)
        lu, piv, _ = dgetrf(self._jacobian_of(dx, dy), overwrite_a=True)
        return lu, piv

    def _chord_solve(self, rhs: np.ndarray) -> np.ndarray:
        """``J^-1 rhs`` for the factorized Jacobian, ``rhs`` complex ``(n, cols)`` in the real
        ordering of :meth:`_jacobian` (the real-linear map applied to each column)."""
        assert self._factors is not None
        n = rhs.shape[0]
        b = np.empty((2 * n, rhs.shape[1]), order="F")  # LAPACK's layout: solved in place, not copied
        b[:n], b[n:] = rhs.real, rhs.imag
        x, _ = dgetrs(*self._factors, b, overwrite_b=True)
        return x[:n] + 1j * x[n:]

    def _update(self, u: np.ndarray, i_comp: np.ndarray) -> np.ndarray:
        """The fixed-point residual ``u - (u0 - K i_comp)`` (V): the port voltages of the network
        driven by ``i_comp`` (A) are ``u`` minus it. One compiled pass
        (:func:`~openg2g.grid.feeder.kernels.chord_update`) also lays it out as LAPACK's right-hand
        side for :meth:`_advance` and finds its largest relative size for :meth:`_relative_update`."""
        g = np.empty(u.shape, dtype=complex)
        rhs = np.empty((2 * u.shape[0], u.shape[1]), order="F")  # LAPACK's layout: solved in place
        self._last_update = (g, rhs, self._chord_update(u, self.u0, self.k @ i_comp, self._v_ref, g, rhs))
        return g

    def _relative_update(self, g: np.ndarray) -> float:
        """The largest ``|g| / v_ref`` of the last update, found when it was made."""
        return self._last_update[2]

    def _advance(self, u: np.ndarray, g: np.ndarray) -> np.ndarray:
        """``u - J^-1 g`` with the Jacobian of ``F(u) = u - u0 + K i_c(u)``, solved on the
        right-hand side the last :meth:`_update` laid out (one compiled pass to the next iterate):
        ``g`` must be that update, whole (this formulation does not retire columns)."""
        assert self._factors is not None and g is self._last_update[0]
        x, _ = dgetrs(*self._factors, self._last_update[1], overwrite_b=True)
        out = np.empty(u.shape, dtype=complex)
        self._chord_step(u, x, out)
        return out

    def _step(self, g: np.ndarray) -> np.ndarray:
        """``J^-1 g`` with the Jacobian of ``F(u) = u - u0 + K i_c(u)``."""
        return self._chord_solve(g)

    def _refresh(self, err: float, err_prev: float, n_cols: int, tol_pu: float) -> bool:
        """Refactorize when an iteration reduced the residual by less than :data:`CHORD_RATE`."""
        return bool(err > CHORD_RATE * err_prev)

    def _network(
        self, u: np.ndarray, i_comp: np.ndarray, i_actual: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Node voltages (V), source power per phase (VA) and losses (W) of the network driven by
        the ports' compensation currents ``i_comp`` (A), whose port voltages are ``u`` (V) and
        whose loads draw ``i_actual`` (A)."""
        v = self.v0[:, None] - self.w @ i_comp
        if self.currents.any_dead_node:
            v[self.currents.dead_nodes] = 0.0
        v_src = v[self.src_nodes]
        if self._y_net_src is None:
            i_src = self.y_src @ (self.e_src[:, None] - v_src)
        else:
            i_src = self._y_net_src @ v + self._inc_src @ i_comp
        s_sub = v_src * np.conj(i_src)
        if self._src_rows is not None:  # a single-phase source: its phase's row, the others 0
            s_sub = per_phase(s_sub, self._src_rows)
        p_ports = (u * np.conj(i_actual)).real.sum(axis=0)
        return v, s_sub, s_sub.real.sum(axis=0) - p_ports

    def _derivatives(self, lin: Linearization[_LapackLU], nodes: np.ndarray, c: np.ndarray) -> np.ndarray:
        """``dV = -W di_c - Z_m c`` with ``di_c = dx Re(du) + dy Im(du)`` and
        ``du = -J^-1 K_m c``, ``K_m`` the port voltages the added load moves per ampere."""
        z_m = np.concatenate([self.z[:, nodes], np.zeros((1, nodes.size))])  # last row: ground
        du = self._chord_solve((z_m[self.currents.port_to] - z_m[self.currents.port_from]) * c)
        return -(self.w @ (lin.dx * du.real + lin.dy * du.imag) + z_m[:-1] * c)
