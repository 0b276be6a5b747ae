"""The sparse phase-frame power flow: the dense path's equations in node space, for large feeders.

The unknowns are the node voltages ``V`` (V). With the ports' incidence ``P`` (port voltages
``u = P V``) and their compensation currents ``i_c`` (:mod:`~openg2g.grid.feeder.ports`), the
solution satisfies

    F(V) = Y V + P^T i_c(P V) - I_source = 0,

where ``Y`` is the nodal admittance the dense path inverts (source Thevenin admittance, lines,
transformers, capacitors, the loads' nominal admittances), kept sparse: nothing of size
``n_nodes^2`` or ``n_ports^2`` is ever formed. Chord Newton on ``F`` with the real Jacobian

    J dV = Y dV + P^T (dx Re(P dV) + dy Im(P dV)) = Y dV + P^T D P dV,

(``dx``, ``dy`` the derivatives of each port's compensation current with respect to the real
and imaginary parts of its voltage, at the point the factors were taken) written as the next
iterate itself,

    V' = V - J^-1 F(V) = J^-1 (I_source - P^T (i_c(P V) - D P V)),

so that ``Y V`` is never formed: that sum cancels currents of 1e6 S times kV on a near-zero-
impedance link (the 1e-6 ohm switches of IEEE 123) and would leave a floor near 1e-8 pu under the
update. The unknowns and residuals of ``J`` are interleaved per node (``Re V_k``, ``Im V_k``), so
``J`` has the sparsity of ``Y`` in 2 x 2 blocks; it is assembled from a pattern made once per
network (:class:`_Pattern`), factorized by KLU (SuiteSparse's LU for circuit matrices, through
PyKLU), kept across solves, shared by every column of a batch, and refactorized when the chord
contracts slowly and the iterations saved pay for it. A column has converged when the largest
update of a port voltage ``|P (V - V')|`` is below the tolerance of the port's base voltage, the
dense path's test on the same ports; the sparse path returns ``V'``.

Voltage collapse: the fold test of the continuation (:mod:`~openg2g.grid.feeder.powerflow`)
compares the sign of ``det J`` with its sign at no load, both from a SuperLU factorization
(diagonal of ``U`` and the parities of the row and column permutations). In node space the
no-load Jacobian is the real form of the network without its loads, ``det J = |det Y_0|^2``.

Sensitivities: the implicit function theorem on ``Y V + P^T i_c(P V) + e_m i_m = I_source`` with
an added load ``i_m`` at node ``m``: ``dV/dP = -J^-1 e_m c``, one right-hand side per node asked
for, one factorization per point.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from PyKLU import Klu
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import SuperLU, splu

from openg2g.core.errors import FeederError
from openg2g.grid.feeder.model import FeederModel
from openg2g.grid.feeder.network import (
    LoadPorts,
    NodeIndex,
    Stamps,
    Switching,
    admittance_sparse,
    per_phase,
    source_admittance,
    source_current,
    source_nodes,
    source_rows,
    stamp_capacitor,
)
from openg2g.grid.feeder.ports import KernelContext, columns
from openg2g.grid.feeder.powerflow import CHORD_RATE, Linearization, NewtonResult, PowerFlowNetwork, Solution

__all__ = ["SparseNetwork"]

_REFRESH_AFTER_COLUMNS = 90
"""A slow chord refactorizes the Jacobian only once its factors have served this many
column-iterations, about three factorizations' worth on the IEEE 8500-node feeder
(docs/performance.md, "Large feeders"): factorizations then take at most about a quarter of the
time, while a Jacobian taken at a poor point (the first solve's start) is soon replaced. With the
load moving at random step to step, a fresh Jacobian contracts little better than one a few steps
old, so refactorizing at every slow iteration would not pay one column at a time."""

_NEWTON_COLUMNS = 16
"""Columns iterated together: a large feeder's arrays then stay in cache (a column-iteration in
groups of 16 costs about 0.6 of one in groups of 100 on the IEEE 8500-node feeder)."""

_FACTOR_CHECK_RTOL = 1e-3
"""A KLU factorization must solve ``J x = J 1`` to this relative accuracy, or it is singular
(PyKLU reports a failed factorization only by leaving the right-hand side as it was)."""


def _klu(matrix: sp.csc_matrix) -> Klu:
    """KLU factors of ``matrix`` (PyKLU reads 32-bit indices only)."""
    return Klu(
        sp.csc_matrix(
            (matrix.data, matrix.indices.astype(np.int32), matrix.indptr.astype(np.int32)), shape=matrix.shape
        )
    )


def _parity(perm: np.ndarray) -> int:
    """+1 for an even permutation, -1 for an odd one: ``(-1)^(n - cycles)``."""
    n = perm.size
    graph = sp.csr_matrix((np.ones(n), (np.arange(n), perm)), shape=(n, n))
    cycles, _ = connected_components(graph, directed=True, connection="weak")
    return -1 if (n - cycles) % 2 else 1


def _det_sign(lu: SuperLU) -> int:
    """Sign of the determinant (+1, -1, or 0 when singular) of the matrix SuperLU factorized as
    ``Pr^T L U Pc^T`` with a unit-diagonal ``L``."""
    diag = lu.U.diagonal()
    if not np.all(diag):
        return 0
    negative = int(np.count_nonzero(diag < 0))
    return _parity(lu.perm_r) * _parity(lu.perm_c) * (-1 if negative % 2 else 1)


def _complex_view(x: np.ndarray) -> np.ndarray:
    """The complex ``(n, cols)`` array whose columns interleave as the real ``(2n, cols)`` Fortran
    array ``x`` (no copy)."""
    return x.T.view(np.complex128).T


def _real_view(z: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_complex_view`: a Fortran complex ``(n, cols)`` array as interleaved real
    parts and imaginary parts, ``(2n, cols)`` (no copy)."""
    return z.T.view(np.float64).T


class _Factors:
    """LU factors of a real Jacobian for the chord iterations and sensitivities (KLU).

    :param lu: the factorization.
    :param dx: the ports' derivatives (S, ``(n_ports, 1)``) the Jacobian was made with; ``dy``
        likewise (:meth:`PortCurrents.i_comp_derivatives`).
    :param valid: False when the matrix was singular: every solve then gives NaN (the iteration
        reports divergence, as the dense path's LAPACK solve of a singular matrix does).
    """

    def __init__(self, lu: Klu, dx: np.ndarray, dy: np.ndarray, valid: bool) -> None:
        self.lu = lu
        self.dx = dx
        self.dy = dy
        self.valid = valid
        self.uses = 0
        """Columns solved with these factors so far."""
        self.y_change: sp.csr_matrix | None = None
        """What tap changes added to ``Y`` since the factorization (S), None when nothing."""

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """``J^-1 rhs`` for complex ``rhs`` ``(n, cols)`` in Fortran order (overwritten), in the
        interleaved real ordering of the Jacobian."""
        self.uses += rhs.shape[1]
        if not self.valid:
            return np.full(rhs.shape, np.nan, dtype=complex, order="F")
        return _complex_view(self.lu.solve(_real_view(rhs), copy=False))


def _real_block(y: np.ndarray) -> np.ndarray:
    """The real 2 x 2 block ``[[Re y, -Im y], [Im y, Re y]]`` of each complex ``y``, row by row, ``(n, 4)``."""
    return np.stack([y.real, -y.imag, y.imag, y.real], axis=1)


class _Pattern:
    """The sparsity pattern of the real Jacobian (CSC, interleaved unknowns) and where each entry of
    ``Y`` and of each port's derivative block goes, so that ``J`` is assembled by scatters.

    Entry ``y`` of ``Y`` at ``(i, j)`` becomes the block ``[[Re y, -Im y], [Im y, Re y]]`` at rows
    ``2i, 2i+1`` and columns ``2j, 2j+1``; port ``k`` between nodes ``f`` and ``t`` adds
    ``+-[[Re dx_k, Re dy_k], [Im dx_k, Im dy_k]]`` at the node pairs ``(f, f)``, ``(t, t)`` (+) and
    ``(f, t)``, ``(t, f)`` (-), ground left out.

    :param y: the admittance (CSR, canonical: sorted, no duplicates).
    :param port_from: first node of each port.
    :param port_to: second node of each port, -1 for ground.
    """

    def __init__(self, y: sp.csr_matrix, port_from: np.ndarray, port_to: np.ndarray) -> None:
        n2 = 2 * y.shape[0]
        self.size = n2
        yc = y.tocoo()
        rows_y = 2 * np.repeat(yc.row[:, None], 4, axis=1) + [0, 0, 1, 1]
        cols_y = 2 * np.repeat(yc.col[:, None], 4, axis=1) + [0, 1, 0, 1]
        grounded = port_to < 0
        ports = np.arange(port_from.size)
        pair_r = np.concatenate([port_from, port_to[~grounded], port_from[~grounded], port_to[~grounded]])
        pair_c = np.concatenate([port_from, port_to[~grounded], port_to[~grounded], port_from[~grounded]])
        self.pair_port = np.concatenate([ports, ports[~grounded], ports[~grounded], ports[~grounded]])
        n_t = int((~grounded).sum())
        self.pair_sign = np.concatenate([np.ones(port_from.size + n_t), -np.ones(2 * n_t)])[:, None]
        rows_p = 2 * np.repeat(pair_r[:, None], 4, axis=1) + [0, 0, 1, 1]
        cols_p = 2 * np.repeat(pair_c[:, None], 4, axis=1) + [0, 1, 0, 1]
        keys = np.concatenate([(cols_y * n2 + rows_y).ravel(), (cols_p * n2 + rows_p).ravel()])
        unique, inverse = np.unique(keys, return_inverse=True)
        self.indices = (unique % n2).astype(np.int32)
        self.indptr = np.searchsorted(unique // n2, np.arange(n2 + 1)).astype(np.int32)
        self.nnz = unique.size
        self._pos_y = inverse[: rows_y.size].reshape(-1, 4)  # each entry of Y: its own 4 positions
        self._pos_p = inverse[rows_y.size :]
        self._y_data = np.zeros(self.nnz)
        self._y_data[self._pos_y] = _real_block(y.data)

    def add_y(self, entries: np.ndarray, change: np.ndarray) -> None:
        """Add ``change`` (S) to ``Y``'s entries number ``entries`` (in the order of the ``Y`` the
        pattern was made from)."""
        self._y_data[self._pos_y[entries]] += _real_block(change)

    def matrix(self, dx: np.ndarray, dy: np.ndarray) -> sp.csc_matrix:
        """The real Jacobian for the ports' derivatives ``dx``, ``dy`` (S, ``(n_ports,)``)."""
        k = self.pair_port
        parts = (self.pair_sign * np.stack([dx.real[k], dy.real[k], dx.imag[k], dy.imag[k]], axis=1)).ravel()
        data = self._y_data + np.bincount(self._pos_p, parts, minlength=self.nnz)
        return sp.csc_matrix((data, self.indices, self.indptr), shape=(self.size, self.size))


class SparseNetwork(PowerFlowNetwork[_Factors]):
    """A feeder at one switching state in node space with sparse matrices, ready to solve.

    Arguments as :class:`~openg2g.grid.feeder.powerflow.PowerFlowNetwork`; the unknowns ``u0``,
    ``u_last`` are node voltages (V).

    A converged column of a batch leaves the chord iteration (its triangular solves are most of
    the cost).

    :raises FeederError: the admittance is singular (a part of the feeder with no path to ground).
    """

    _retire_converged = True

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
        y = admittance_sparse(model, nodes, state, ports).tocsr()
        open_caps = Stamps()
        for cap in model.capacitors:
            if not state.capacitors[cap.name]:
                stamp_capacitor(open_caps, cap, nodes)
        rows, cols, _ = open_caps.entries()
        if rows.size:  # an open capacitor's entries as explicit zeros: closing it keeps Y's pattern
            y = y.tocoo()
            y = sp.csr_matrix(
                (
                    np.concatenate([y.data, np.zeros(rows.size)]),
                    (np.concatenate([y.row, rows]), np.concatenate([y.col, cols])),
                ),
                shape=y.shape,
            )
        y.sum_duplicates()
        self._y = y
        # row-major position of each entry (increasing: canonical CSR), to find an entry by (row, column)
        self._keys = np.repeat(np.arange(n), np.diff(y.indptr)) * n + y.indices
        self.src_nodes = source_nodes(model, nodes)
        self._src_rows = source_rows(model)
        self.y_src = source_admittance(model)
        # a stiff source: the network side of its bus gives its current whole (see the dense path)
        self._y_net_src: np.ndarray | None = None
        if model.source.z2_ohm is not None:
            self._y_net_src = y[self.src_nodes].toarray()
            self._y_net_src[:, self.src_nodes] -= self.y_src
        i_src = source_current(model, nodes, state.source_pu)
        self.e_src = np.linalg.solve(self.y_src, i_src[self.src_nodes])
        self._i_src = i_src[:, None]
        self._i_src_nodes = np.flatnonzero(i_src)
        cur = self.currents
        n_p = cur.port_from.size
        to_node = cur.port_to >= 0
        self._inc = sp.csr_matrix(
            (
                np.concatenate([np.ones(n_p), -np.ones(int(to_node.sum()))]),
                (
                    np.concatenate([np.arange(n_p), np.flatnonzero(to_node)]),
                    np.concatenate([cur.port_from, cur.port_to[to_node]]),
                ),
            ),
            shape=(n_p, n),
        )
        self._inc_t = self._inc.T.tocsr()
        self._inc_src = self._inc[:, self.src_nodes].T.toarray()
        self._pattern = _Pattern(y, cur.port_from, cur.port_to)
        self._no_load_sign: int | None = None
        self.u0 = self._nominal_voltages()
        self._retapped = False  # u0 and the suspect threshold are due again before the next solve
        self._start()

    def _nominal_voltages(self) -> np.ndarray:
        """The nominal voltages ``Y^-1 I_source`` (V), by a complex KLU factorization of ``Y``.

        :raises FeederError: ``Y`` is singular.
        """
        v = _klu(self._y.tocsc()).solve(self._i_src[:, 0])
        scale = np.abs(self._i_src).max()
        if not np.abs(self._y @ v - self._i_src[:, 0]).max() <= _FACTOR_CHECK_RTOL * scale:
            raise FeederError("sparse power flow: the nodal admittance is singular (a part of the feeder floats)")
        return v

    def _change_admittance(self, blocks: dict[int, dict[int, complex]]) -> None:
        """Add ``blocks`` (a tap change, a capacitor switched) to the entries of ``Y`` in place; the
        nominal voltages follow by a new factorization of ``Y`` before the next solve (once for the
        several transformers of a bank). The chord factors stay: a tap step moves the Jacobian a
        little, and the iteration takes the change of ``Y`` since the factors were made into its
        right-hand side (:meth:`_update`), so it converges to the new network's solution (and
        refactorizes if the old Jacobian slows it down)."""
        n = len(self.nodes)
        pairs = [(i, j, dy) for i, row in blocks.items() for j, dy in row.items()]
        keys = np.array([i * n + j for i, j, _ in pairs])
        pos = np.searchsorted(self._keys, keys)
        # transformers are always in Y, open capacitors as explicit zeros (see __init__)
        assert np.array_equal(self._keys[pos], keys), "a switchable element's entries are in the pattern of Y"
        change = np.array([dy for _, _, dy in pairs])
        self._y.data[pos] += change
        self._pattern.add_y(pos, change)
        if self._factors is not None:
            rows, cols, vals = zip(*pairs)
            change = sp.csr_matrix((vals, (rows, cols)), shape=self._y.shape)
            old = self._factors.y_change
            self._factors.y_change = change if old is None else old + change
        if self._y_net_src is not None:
            for r, i in enumerate(self.src_nodes):
                for j, dy in blocks.get(int(i), {}).items():
                    self._y_net_src[r, j] += dy
        self._retapped = True

    def solve(
        self,
        scale: np.ndarray,
        s_pq_va: np.ndarray,
        tol_pu: float = 1e-8,
        max_iter: int = 100,
        u_init: np.ndarray | None = None,
    ) -> Solution:
        """:meth:`PowerFlowNetwork.solve`, the nominal voltages first brought up to tap changes."""
        if self._retapped:
            self.u0 = self._nominal_voltages()
            self._v_check = self._branch_check_v()
            self._retapped = False
        return super().solve(scale, s_pq_va, tol_pu, max_iter, u_init)

    def _port_voltages(self, u: np.ndarray) -> np.ndarray:
        """Port voltages ``P V`` (V)."""
        return np.asarray(self._inc @ u)

    def _newton(
        self, u: np.ndarray, ctx: KernelContext, s_conj: np.ndarray, tol_pu: float, max_iter: int
    ) -> NewtonResult:
        """The shared chord Newton on groups of :data:`_NEWTON_COLUMNS` columns, one after the other
        (sharing the factors); not converged as soon as a group is not."""
        n_cols = u.shape[1]
        if n_cols <= _NEWTON_COLUMNS:
            return super()._newton(u, ctx, s_conj, tol_pu, max_iter)
        out = u.copy()
        i_comp = np.zeros((self.currents.v_ref.shape[0], n_cols), dtype=complex)
        i_actual = i_comp.copy()
        iterations = 0
        for start in range(0, n_cols, _NEWTON_COLUMNS):
            cols = slice(start, start + _NEWTON_COLUMNS)
            part = super()._newton(  # contiguous groups: strided views would slow every operation
                np.ascontiguousarray(u[:, cols]),
                columns(ctx, cols),
                np.ascontiguousarray(s_conj[:, cols]),
                tol_pu,
                max_iter,
            )
            out[:, cols], i_comp[:, cols], i_actual[:, cols] = part.u, part.i_comp, part.i_actual
            iterations = max(iterations, part.iterations)
            if not part.converged:
                return NewtonResult(out, False, iterations, i_comp, i_actual)
        return NewtonResult(out, True, iterations, i_comp, i_actual)

    def _update(self, u: np.ndarray, i_comp: np.ndarray) -> np.ndarray:
        """The chord Newton update ``u - J^-1 (I_source - P^T (i_comp - D P u) - dY u)`` (V) with the
        kept factors, ``D`` their ports' derivatives and ``dY`` what tap changes added to ``Y``
        since they were made: ``u`` minus it is the next iterate."""
        factors = self._factors
        assert factors is not None
        pu = self._port_voltages(u)
        rhs = np.empty(u.shape, dtype=complex, order="F")  # KLU's layout, written in one pass
        np.negative(self._inc_t @ (i_comp - (factors.dx * pu.real + factors.dy * pu.imag)), out=rhs)
        rhs[self._i_src_nodes] += self._i_src[self._i_src_nodes]  # source currents enter at few nodes
        if factors.y_change is not None:
            rhs -= factors.y_change @ u
        return u - factors.solve(rhs)

    def _step(self, g: np.ndarray) -> np.ndarray:
        """The update is the step."""
        return g

    def _refresh(self, err: float, err_prev: float, n_cols: int, tol_pu: float) -> bool:
        """Refactorize when an iteration reduced the update by less than :data:`CHORD_RATE` and the
        factors have served :data:`_REFRESH_AFTER_COLUMNS` column-iterations; at once when the
        iteration no longer contracts."""
        assert self._factors is not None
        rate = err / err_prev
        return bool(rate > CHORD_RATE and (rate >= 1.0 or self._factors.uses >= _REFRESH_AFTER_COLUMNS))

    def _jacobian(self, dx: np.ndarray, dy: np.ndarray) -> sp.csc_matrix:
        """The real Jacobian for port derivatives ``dx``, ``dy`` (S, ``(n_ports,)``)."""
        return self._pattern.matrix(dx, dy)

    def _factorize(self, dx: np.ndarray, dy: np.ndarray) -> _Factors:
        """KLU factors of the Jacobian, checked on ``J x = J 1`` (invalid when singular)."""
        jac = self._jacobian(dx, dy)
        lu = _klu(jac)
        x = lu.solve(jac @ np.ones(jac.shape[0]))
        return _Factors(lu, dx[:, None], dy[:, None], bool(np.abs(x - 1.0).max() <= _FACTOR_CHECK_RTOL))

    def _low_branch(self, u: np.ndarray, ctx: KernelContext, s_conj: np.ndarray, col: int) -> bool:
        """True if the Jacobian's determinant at column ``col`` does not have its no-load sign."""
        jac = self._jacobian(*self._derivatives_at(u, ctx, s_conj, col))
        return _det_sign(splu(jac, permc_spec="MMD_AT_PLUS_A")) != self._reference_sign()

    def _reference_sign(self) -> int:
        """Sign of the Jacobian's determinant at no load (every port's compensation current then
        cancels its nominal admittance: ``dx = -y_nom``, ``dy = -j y_nom``)."""
        if self._no_load_sign is None:
            y_nom = np.concatenate([self.currents.y_nominal, np.zeros(len(self.pq_nodes))])
            self._no_load_sign = _det_sign(splu(self._jacobian(-y_nom, -1j * y_nom), permc_spec="MMD_AT_PLUS_A"))
        return self._no_load_sign

    def _network(
        self, u: np.ndarray, i_comp: np.ndarray, i_actual: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Node voltages (V), source power per phase (VA) and losses (W) of node voltages ``u``
        whose ports draw the compensation currents ``i_comp`` and load currents ``i_actual`` (A)."""
        v = np.array(u)
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
        p_ports = (self._port_voltages(u) * np.conj(i_actual)).real.sum(axis=0)
        return v, s_sub, s_sub.real.sum(axis=0) - p_ports

    def _derivatives(self, lin: Linearization[_Factors], nodes: np.ndarray, c: np.ndarray) -> np.ndarray:
        """``dV = -J^-1 e_m c``: one right-hand side per entry of ``nodes``, with ``c`` (A/W) at its node."""
        rhs = np.zeros((len(self.nodes), nodes.size), dtype=complex, order="F")
        rhs[nodes, np.arange(nodes.size)] = c
        return -lin.factors.solve(rhs)
