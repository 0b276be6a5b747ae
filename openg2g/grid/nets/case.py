"""pandapower's internal case of a net, and a batched Newton-Raphson power flow on it.

:class:`PandapowerCase` runs ``pandapower.runpp`` once (pandapower's defaults, without numba) to
build its internal case: the bus admittance matrix ``Ybus``, the branch matrices ``Yf``/``Yt``,
the bus types (the slack buses of external grids and slack generators, the PV buses of
generators, PQ buses) and the specified injections ``Sbus`` of every load, static generator,
generator, ward and shunt as pandapower folds them in. A time series then changes only the
injections, and :meth:`PandapowerCase.solve` solves many operating points (columns) per call
itself:

- **chord Newton** steps for every column with one factorized Jacobian, while the mismatch
  shrinks: the last one factorized (for the previous batch or a sensitivity; steps differ only by
  the datacenter load, so it stays close), then, for columns it does not bring home, a fresh one at
  the warm start. Convergence is linear at a small rate, and one LU serves every column;
- a **full Newton** per column that the chord steps leave unconverged (Jacobian refactorized at
  every iterate), from the warm start, then from the net's own solution.

Everything is per unit of pandapower's ``baseMVA`` and the buses' ``vn_kv``. The converged
solution meets the power-flow equations to :data:`TOLERANCE_PU`, 1e-10 pu of power, well below
pandapower's own (``tolerance_mva`` 1e-8 MVA), so both agree to far better than 1e-6 pu.

:meth:`PandapowerCase.voltage_sensitivity` gives dVm/dP at a solution by the implicit function
theorem on the same equations: ``dx/dp = -J^-1 dF/dp``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.sparse.linalg import splu

from openg2g.core.errors import FeederError
from openg2g.grid.feeder.powerflow import magnitude_slopes
from openg2g.grid.nets.source import quiet_pandapower

if TYPE_CHECKING:
    from pandapower.auxiliary import pandapowerNet

__all__ = ["TOLERANCE_PU", "CaseSolution", "PandapowerCase", "run_pandapower"]

TOLERANCE_PU = 1e-10
"""Largest power mismatch (pu of baseMVA) of a converged bus."""

_CHORD_ITERATIONS = 30
"""Chord steps (the warm start's Jacobian) before a column falls back to full Newton."""

_NEWTON_ITERATIONS = 30
"""Full Newton steps per start."""

_DENSE_LU_MAX = 2500
"""Largest Jacobian (rows) factorized dense: LAPACK solves many right-hand sides far faster than
SuperLU's sparse triangular solves; beyond it (50 MB) the sparse LU is used."""

_SQRT3 = math.sqrt(3.0)

Solver = Callable[[np.ndarray], np.ndarray]
"""``rhs -> J^-1 rhs`` for one factorized Jacobian, ``rhs`` of shape ``(m,)`` or ``(m, K)``."""


def _factorize(j: sp.csc_matrix) -> Solver:
    """A solver for the Jacobian ``j`` (dense LU up to :data:`_DENSE_LU_MAX` rows, else sparse).

    :raises RuntimeError: ``j`` is singular.
    """
    if j.shape[0] <= _DENSE_LU_MAX:
        with warnings.catch_warnings():
            warnings.simplefilter("error", sla.LinAlgWarning)  # an exactly singular pivot
            try:
                lu = sla.lu_factor(j.toarray(), check_finite=False)
            except sla.LinAlgWarning as exc:
                raise RuntimeError(str(exc)) from None
        return lambda rhs: sla.lu_solve(lu, rhs, check_finite=False)
    sparse_lu = splu(j)
    return lambda rhs: sparse_lu.solve(np.asfortranarray(rhs))


def run_pandapower(net: pandapowerNet) -> None:
    """``pandapower.runpp`` with the options every result of this package is checked against:
    pandapower's defaults, numba off (its JIT would add seconds to the first solve of every process;
    the results agree to pandapower's tolerance either way).

    :raises pandapower.powerflow.LoadflowNotConverged: the power flow did not converge.
    """
    import pandapower as pp

    with quiet_pandapower():
        pp.runpp(net, numba=False)


@dataclass(frozen=True)
class CaseSolution:
    """Solved operating points.

    :param v: complex bus voltages (pu), ``(n_bus, K)``, internal bus order.
    :param converged: per column, True where the mismatch met :data:`TOLERANCE_PU`.
    """

    v: np.ndarray
    converged: np.ndarray


def _ds_dv(ybus: sp.csr_matrix, v: np.ndarray) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """``dS/dVm`` and ``dS/dVa`` of the bus injections ``S = V conj(Ybus V)`` at ``v`` (MATPOWER's
    dSbus_dV, polar form)."""
    i_bus = ybus @ v
    diag_v = sp.diags(v)
    diag_i = sp.diags(i_bus)
    diag_vnorm = sp.diags(v / np.abs(v))
    ds_dvm = diag_v @ (ybus @ diag_vnorm).conj() + diag_i.conj() @ diag_vnorm
    ds_dva = 1j * diag_v @ (diag_i - ybus @ diag_v).conj()
    return sp.csr_matrix(ds_dvm), sp.csr_matrix(ds_dva)


class PandapowerCase:
    """pandapower's internal case of ``net`` and the solver on it (see the module docstring).

    Runs ``runpp`` on ``net`` (filling its ``res_*`` tables at the net's own loads).

    :param net: the net, as loaded (:func:`openg2g.grid.nets.source.load_net`).
    :param label: the net's name in messages.
    :raises FeederError: the net's own power flow does not converge.
    """

    def __init__(self, net: pandapowerNet, label: str) -> None:
        from pandapower.powerflow import LoadflowNotConverged
        from pandapower.pypower.idx_bus import BASE_KV
        from pandapower.pypower.idx_gen import PG
        from pandapower.pypower.makeSbus import makeSbus

        try:
            run_pandapower(net)
        except LoadflowNotConverged:
            raise FeederError(
                f"grid.pandapower: the power flow of net {label!r} at its own loads does not converge (pandapower runpp)"
            ) from None
        internal = net._ppc["internal"]
        self.base_mva = float(internal["baseMVA"])
        self.ybus = sp.csr_matrix(internal["Ybus"])
        self.yf = sp.csr_matrix(internal["Yf"])
        self.yt = sp.csr_matrix(internal["Yt"])
        self.ref = np.asarray(internal["ref"], dtype=np.int64)
        self.pv = np.asarray(internal["pv"], dtype=np.int64)
        self.pq = np.asarray(internal["pq"], dtype=np.int64)
        self.pvpq = np.concatenate([self.pv, self.pq])
        self.n_bus = self.ybus.shape[0]
        bus = internal["bus"]
        self.base_kv = np.asarray(bus[:, BASE_KV].real, dtype=float)
        self.v_net = np.asarray(internal["V"], dtype=complex)
        """The net's own solution: its slack and PV voltages are the setpoints."""
        gen = np.array(internal["gen"], copy=True)
        gen[np.asarray(internal["ref_gens"], dtype=np.int64), PG] = 0.0  # the slack's output is solved for
        self.s_spec = np.asarray(makeSbus(self.base_mva, bus, gen), dtype=complex)
        """Specified injections (pu) at the net's own loads: generation minus load, slack output excluded."""
        lookup = np.asarray(net._pd2ppc_lookups["bus"], dtype=np.int64)
        self.pp_bus = {int(b): int(lookup[b]) for b in net.bus.index if 0 <= lookup[b] < self.n_bus}
        """pandapower bus index -> internal bus, for every energized bus (fused buses share one)."""
        # ppc branch row -> internal (in-service) branch row, -1 when out of service
        branch_is = np.asarray(internal["branch_is"], dtype=bool)
        self._branch_row = np.where(branch_is, np.cumsum(branch_is) - 1, -1)
        self._branch_ranges = dict(net._pd2ppc_lookups.get("branch", {}))
        br = internal["branch"]
        self._from_bus = br[:, 0].real.astype(np.int64)
        self._to_bus = br[:, 1].real.astype(np.int64)
        self._kv_from = self.base_kv[self._from_bus]
        self._kv_to = self.base_kv[self._to_bus]
        self._lu_key: bytes | None = None
        self._lu: Solver | None = None

    def forget(self) -> None:
        """Drop the factorized Jacobian kept between calls, so that what follows depends on its
        own inputs only (a run after a reset gives the same bits as the first)."""
        self._lu_key = None
        self._lu = None

    # --------------------------------------------------------------------------- structure
    def branch_rows(self, element: str, count: int) -> np.ndarray:
        """Internal branch row of each of the ``count`` elements of table ``element`` (``"line"``,
        ``"trafo"``), -1 where the element is out of service."""
        if element not in self._branch_ranges:
            return np.full(count, -1, dtype=np.int64)
        f, t = self._branch_ranges[element]
        return np.asarray(self._branch_row[f:t], dtype=np.int64)

    def branch_buses(self) -> tuple[np.ndarray, np.ndarray]:
        """Internal from (HV) and to (LV) bus of every internal branch."""
        return self._from_bus, self._to_bus

    def load_injection(self, net: pandapowerNet) -> np.ndarray:
        """The net's own loads as internal bus injections (pu, negative = drawn), in service ones
        at their ``scaling``, for the load scale."""
        s = np.zeros(self.n_bus, dtype=complex)
        for _, row in net.load.iterrows():
            k = self.pp_bus.get(int(row["bus"]))
            if bool(row["in_service"]) and k is not None:
                s[k] -= (row["p_mw"] + 1j * row["q_mvar"]) * row["scaling"] / self.base_mva
        return s

    # --------------------------------------------------------------------------- equations
    def _mismatch(self, v: np.ndarray, s_spec: np.ndarray) -> np.ndarray:
        """Mismatch ``F`` (pu): real part at PV and PQ buses, imaginary part at PQ buses, per column."""
        mis = v * np.conj(self.ybus @ v) - s_spec
        return np.concatenate([mis[self.pvpq].real, mis[self.pq].imag])

    def _jacobian(self, v: np.ndarray) -> sp.csc_matrix:
        ds_dvm, ds_dva = _ds_dv(self.ybus, v)
        pvpq, pq = self.pvpq, self.pq
        j11 = ds_dva[pvpq][:, pvpq].real
        j12 = ds_dvm[pvpq][:, pq].real
        j21 = ds_dva[pq][:, pvpq].imag
        j22 = ds_dvm[pq][:, pq].imag
        return sp.csc_matrix(sp.bmat([[j11, j12], [j21, j22]]))

    def _factor(self, v: np.ndarray) -> Solver:
        """The solver of the Jacobian at ``v`` (the last one is kept: warm starts repeat).

        :raises RuntimeError: singular Jacobian (the operating point is at the nose of the P-V curve).
        """
        key = v.tobytes()
        if key != self._lu_key or self._lu is None:
            self._lu = _factorize(self._jacobian(v))
            self._lu_key = key
        return self._lu

    def _step(self, v: np.ndarray, dx: np.ndarray) -> np.ndarray:
        """``v`` moved by the Newton update ``dx`` (angles at PV/PQ buses, then magnitudes at PQ buses)."""
        va, vm = np.angle(v), np.abs(v)
        npvpq = self.pvpq.size
        va[self.pvpq] -= dx[:npvpq]
        vm[self.pq] -= dx[npvpq:]
        return vm * np.exp(1j * va)

    def _newton(self, v: np.ndarray, s_spec: np.ndarray) -> np.ndarray | None:
        """Full Newton on one column from ``v``; the solution, or None if it does not converge."""
        for _ in range(_NEWTON_ITERATIONS):
            f = self._mismatch(v, s_spec)
            if not np.all(np.isfinite(f)):
                return None
            if np.max(np.abs(f), initial=0.0) < TOLERANCE_PU:
                return v
            try:
                dx = _factorize(self._jacobian(v))(f)
            except RuntimeError:  # singular Jacobian: past the nose of the P-V curve
                return None
            v = self._step(v, dx)
        f = self._mismatch(v, s_spec)
        return v if np.max(np.abs(f), initial=0.0) < TOLERANCE_PU else None

    # --------------------------------------------------------------------------- solving
    def _chord(self, v: np.ndarray, s_spec: np.ndarray, lu: Solver, cols: np.ndarray) -> np.ndarray:
        """Chord steps with the fixed Jacobian solver ``lu`` on columns ``cols`` of ``v`` (in place)
        while every open column's mismatch shrinks; whether each of ``cols`` converged."""
        last = np.full(cols.size, np.inf)
        done = np.zeros(cols.size, dtype=bool)
        for _ in range(_CHORD_ITERATIONS):
            f = self._mismatch(v[:, cols], s_spec[:, cols])
            err = np.max(np.abs(f), axis=0, initial=0.0)
            done = err < TOLERANCE_PU
            if done.all() or not np.all(err[~done] < last[~done]):  # converged, or a column stalls
                break
            last = err
            open_cols = np.flatnonzero(~done)
            v[:, cols[open_cols]] = self._step(v[:, cols[open_cols]], lu(f[:, open_cols]))
        return done

    def solve(self, s_spec: np.ndarray, v_start: np.ndarray | None = None) -> CaseSolution:
        """Solve every column of ``s_spec`` (pu injections, ``(n_bus, K)``).

        :param v_start: warm start (pu, ``(n_bus,)``), e.g. the last solution; None = the net's
            own solution. Its slack and PV magnitudes are replaced by the setpoints.
        """
        v0 = self.v_net.copy() if v_start is None else np.asarray(v_start, dtype=complex).copy()
        fixed = np.concatenate([self.ref, self.pv])
        v0[fixed] = np.abs(self.v_net[fixed]) * np.exp(1j * np.angle(v0[fixed]))
        v0[self.ref] = self.v_net[self.ref]
        k = s_spec.shape[1]
        v = np.repeat(v0[:, None], k, axis=1)
        done = np.zeros(k, dtype=bool)
        if self._lu is not None:  # the last Jacobian factorized, wherever it was: usually close enough
            done = self._chord(v, s_spec, self._lu, np.arange(k))
        if not done.all():  # refactorize at the warm start and restart the open columns from it
            open_cols = np.flatnonzero(~done)
            v[:, open_cols] = v0[:, None]
            try:
                done[open_cols] = self._chord(v, s_spec, self._factor(v0), open_cols)
            except RuntimeError:  # singular at the warm start: full Newton below
                pass
        for j in np.flatnonzero(~done):
            sol = self._newton(v0.copy(), s_spec[:, j])
            if sol is None and v_start is not None:
                sol = self._newton(self.v_net.copy(), s_spec[:, j])
            if sol is not None:
                v[:, j] = sol
                done[j] = True
        return CaseSolution(v=v, converged=done)

    def voltage_sensitivity(self, v: np.ndarray, buses: np.ndarray, q_per_p: float) -> np.ndarray:
        """dVm/dP (pu per pu of baseMVA) of every bus at the solution ``v`` w.r.t. a load drawn at
        each of ``buses`` (internal indices), its reactive power moving by ``q_per_p`` per unit of P.

        :return: ``(n_bus, len(buses))``; zero at slack and PV buses (their magnitude is held).
        """
        dx = self._state_derivatives(v, buses, q_per_p)
        out = np.zeros((self.n_bus, len(buses)))
        out[self.pq] = dx[self.pvpq.size :]
        return out

    def voltage_derivatives(self, v: np.ndarray, buses: np.ndarray, q_per_p: float) -> np.ndarray:
        """Complex dV/dP (pu per pu of baseMVA) of every bus at the solution ``v``, load drawn as
        for :meth:`voltage_sensitivity`: ``dV = V (dVm / Vm + j dVa)`` from the same derivatives
        of the magnitudes and angles.

        :return: ``(n_bus, len(buses))``.
        """
        dx = self._state_derivatives(v, buses, q_per_p)
        d_angle = np.zeros((self.n_bus, len(buses)))
        d_log_vm = np.zeros((self.n_bus, len(buses)))
        d_angle[self.pvpq] = dx[: self.pvpq.size]
        d_log_vm[self.pq] = dx[self.pvpq.size :] / np.abs(v[self.pq])[:, None]
        return v[:, None] * (d_log_vm + 1j * d_angle)

    def _state_derivatives(self, v: np.ndarray, buses: np.ndarray, q_per_p: float) -> np.ndarray:
        """Implicit function theorem at the solution ``v``: the derivatives of the unknowns (angles
        at PV and PQ buses, then magnitudes at PQ buses) w.r.t. a load drawn at each of ``buses``,
        ``dx/dP = -J^-1 dF/dP``, ``(n_unknowns, len(buses))``."""
        pos_p = {int(b): i for i, b in enumerate(self.pvpq)}
        pos_q = {int(b): self.pvpq.size + i for i, b in enumerate(self.pq)}
        rhs = np.zeros((self.pvpq.size + self.pq.size, len(buses)))
        for c, b in enumerate(buses):
            # drawing P lowers the specified injection: dF/dP = +1 (real row), +q_per_p (imag row)
            if int(b) in pos_p:
                rhs[pos_p[int(b)], c] = 1.0
            if int(b) in pos_q:
                rhs[pos_q[int(b)], c] = q_per_p
        return -self._factor(v)(rhs)

    # --------------------------------------------------------------------------- results
    def branch_currents_ka(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Current magnitude (kA) at the from and to ends of every internal branch, ``(n_branch, K)``
        each, for solutions ``v`` (pandapower's ``i_from_ka``/``i_to_ka``, ``i_hv_ka``/``i_lv_ka``)."""
        to_ka = self.base_mva / _SQRT3
        i_from = np.abs(self.yf @ v) * (to_ka / self._kv_from)[:, None]
        i_to = np.abs(self.yt @ v) * (to_ka / self._kv_to)[:, None]
        return i_from, i_to

    def branch_current_slopes_ka(
        self, v: np.ndarray, dv: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """At one solution ``v`` (pu, ``(n_bus,)``) and along bus-voltage derivatives ``dv`` (pu per
        unit of ``x``, ``(n_bus, k)``): the current magnitudes (kA) at the from and to ends of every
        internal branch (as :meth:`branch_currents_ka`) and their derivatives (kA per unit of ``x``,
        ``(n_branch, k)``)."""
        to_ka = self.base_mva / _SQRT3
        ends = []
        for y, kv in ((self.yf, self._kv_from), (self.yt, self._kv_to)):
            current, per_pu = y @ v, to_ka / kv
            ends.append((np.abs(current) * per_pu, magnitude_slopes(current, y @ dv) * per_pu[:, None]))
        (i_from, di_from), (i_to, di_to) = ends
        return i_from, i_to, di_from, di_to

    def injections(self, v: np.ndarray) -> np.ndarray:
        """Bus injections ``V conj(Ybus V)`` (pu) of solutions ``v``."""
        return v * np.conj(self.ybus @ v)
