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
pandapower's own (``tolerance_mva`` 1e-8 MVA), so both agree to far better than 1e-6 pu. A
disturbed case (:meth:`PandapowerCase.disturbed`) is held to 1e-10 pu of current, ``|dS| / |V|``,
at every bus instead: near a fault a bus's power mismatch vanishes with its voltage whatever its
currents, and a power test would accept a bus at 0 V that draws a current no branch brings it.

:meth:`PandapowerCase.voltage_sensitivity` gives dVm/dP at a solution by the implicit function
theorem on the same equations: ``dx/dp = -J^-1 dF/dp``.

**Disturbances.** :meth:`PandapowerCase.disturbed` gives the same case with shunt admittances added
to ``Ybus`` (three-phase faults) and the external grids' voltage magnitudes replaced (a source sag),
and every solve and sensitivity takes an optional
:class:`~openg2g.grid.nets.lowvoltage.VoltageDependence`: injections that leave their constant-power
band, whose correction enters the mismatch and whose slope enters the Jacobian. Without one (or
while every injection stays inside its band) the equations, and so the bits, are the constant-power
ones.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.sparse.linalg import splu

from openg2g.core.errors import FeederError
from openg2g.grid.feeder.powerflow import magnitude_slopes
from openg2g.grid.nets.lowvoltage import DISTURBANCE_VMINPU, VoltageDependence
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


def _slack_only_case(net: pandapowerNet, internal: Mapping[str, object]) -> dict[str, object]:
    """The internal case of a net energized at its slack buses only (every other bus cut off), which
    ``runpp`` solves without building it: pandapower's own conversion (``_pd2ppc``) and ``Ybus``,
    the voltages its setpoints."""
    from pandapower.pd2ppc import _pd2ppc
    from pandapower.pypower.bustypes import bustypes
    from pandapower.pypower.idx_bus import VA, VM
    from pandapower.pypower.makeYbus import makeYbus

    _, ppci = _pd2ppc(net)
    bus, gen, branch = ppci["bus"], ppci["gen"], ppci["branch"]
    ybus, yf, yt = makeYbus(ppci["baseMVA"], bus, branch)
    ref, pv, pq = bustypes(bus, gen)
    v = bus[:, VM].real * np.exp(1j * np.radians(bus[:, VA].real))
    return {
        **internal,
        "baseMVA": ppci["baseMVA"],
        "bus": bus,
        "gen": gen,
        "branch": branch,
        "Ybus": ybus,
        "Yf": yf,
        "Yt": yt,
        "ref": ref,
        "pv": pv,
        "pq": pq,
        "V": v,
    }


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
    :param require_solution: when False, a net whose own power flow does not converge is taken
        anyway (its internal case is built before runpp iterates): :attr:`v_net` is then a flat
        start at the setpoints (:attr:`own_solution` False), so that a line outage the net's own
        loads cannot ride through fails at the steps it affects, not when it is commanded.
    :raises FeederError: the net's own power flow does not converge (and ``require_solution``).
    """

    def __init__(self, net: pandapowerNet, label: str, require_solution: bool = True) -> None:
        from pandapower.powerflow import LoadflowNotConverged
        from pandapower.pypower.idx_bus import BASE_KV, PD, QD
        from pandapower.pypower.idx_gen import PG
        from pandapower.pypower.makeSbus import makeSbus

        self.own_solution = True
        """Whether :attr:`v_net` is the net's own converged solution (else a flat start)."""
        try:
            run_pandapower(net)
        except LoadflowNotConverged:
            if require_solution:
                raise FeederError(
                    f"grid.pandapower: the power flow of net {label!r} at its own loads does not converge "
                    "(pandapower runpp)"
                ) from None
            self.own_solution = False
        internal = net._ppc["internal"]
        if "bus" not in internal:  # no bus but the slack's: runpp skipped its Newton and kept no case
            internal = _slack_only_case(net, internal)
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
        if not self.own_solution:  # runpp's last iterate: only the setpoints it holds are kept
            angle = np.exp(1j * np.angle(self.v_net[self.ref[0]]))
            self.v_net = self.v_net.copy()
            self.v_net[self.pv] = np.abs(self.v_net[self.pv]) * angle
            self.v_net[self.pq] = angle
        gen = np.array(internal["gen"], copy=True)
        gen[np.asarray(internal["ref_gens"], dtype=np.int64), PG] = 0.0  # the slack's output is solved for
        self.s_spec = np.asarray(makeSbus(self.base_mva, bus, gen), dtype=complex)
        """Specified injections (pu) at the net's own loads: generation minus load, slack output excluded."""
        self.s_demand = -np.asarray(bus[:, PD].real + 1j * bus[:, QD].real, dtype=complex) / self.base_mva
        """The part of :attr:`s_spec` that is not generators' (pu): loads, static generators,
        storage, wards' constant power, as pandapower folds them into the buses' ``PD``/``QD``."""
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
        self._current_check = False
        """Whether convergence is judged on the current mismatch (a disturbed case) or the power's."""

    def disturbed(self, shunt_pu: Mapping[int, complex], source_pu: Mapping[int, float]) -> PandapowerCase:
        """This case with shunt admittances added and source voltages replaced (a new object; this
        one is unchanged).

        :param shunt_pu: internal bus -> admittance to ground added to ``Ybus`` there (pu of
            baseMVA): a three-phase fault's positive-sequence admittance.
        :param source_pu: internal (slack) bus -> its voltage magnitude (pu), the angle kept.
        """
        out = copy.copy(self)
        if shunt_pu:
            buses = np.fromiter(shunt_pu, dtype=np.int64)
            added = sp.csr_matrix(
                (np.array([shunt_pu[int(b)] for b in buses], dtype=complex), (buses, buses)), shape=self.ybus.shape
            )
            out.ybus = sp.csr_matrix(self.ybus + added)
        if source_pu:
            out.v_net = self.v_net.copy()
            for k, vm in source_pu.items():
                out.v_net[k] = vm * np.exp(1j * np.angle(self.v_net[k]))
        out._current_check = True
        out.forget()
        return out

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
    def _mismatch(self, v: np.ndarray, s_spec: np.ndarray, dep: VoltageDependence | None = None) -> np.ndarray:
        """Mismatch ``F`` (pu): real part at PV and PQ buses, imaginary part at PQ buses, per column;
        the injections of ``dep`` as drawn at ``v``."""
        mis = v * np.conj(self.ybus @ v) - s_spec
        if dep is not None:
            correction = dep.correction(np.abs(v))
            if correction is not None:
                mis -= correction
        return np.concatenate([mis[self.pvpq].real, mis[self.pq].imag])

    def drawn(self, v: np.ndarray, s_spec: np.ndarray, dep: VoltageDependence | None) -> np.ndarray:
        """The injections (pu) specified by ``s_spec`` and ``dep`` as drawn at the voltages ``v``."""
        correction = None if dep is None else dep.correction(np.abs(v))
        return s_spec if correction is None else s_spec + correction

    def _jacobian(self, v: np.ndarray, slope: np.ndarray | None = None) -> sp.csc_matrix:
        """The Jacobian at ``v``; ``slope`` (pu per pu, ``(n_bus,)``) the derivative of the
        specified injections w.r.t. their bus voltage magnitude, None for constant power."""
        ds_dvm, ds_dva = _ds_dv(self.ybus, v)
        if slope is not None:
            ds_dvm = sp.csr_matrix(ds_dvm - sp.diags(slope))
        pvpq, pq = self.pvpq, self.pq
        j11 = ds_dva[pvpq][:, pvpq].real
        j12 = ds_dvm[pvpq][:, pq].real
        j21 = ds_dva[pq][:, pvpq].imag
        j22 = ds_dvm[pq][:, pq].imag
        return sp.csc_matrix(sp.bmat([[j11, j12], [j21, j22]]))

    def _factor(self, v: np.ndarray, dep: VoltageDependence | None = None) -> Solver:
        """The solver of the Jacobian at ``v`` (the last one is kept: warm starts repeat), with the
        slope of one operating point's voltage-dependent injections ``dep``.

        :raises RuntimeError: singular Jacobian (the operating point is at the nose of the P-V curve).
        """
        slope = None if dep is None else dep.slope(np.abs(v))
        key = v.tobytes() if slope is None else v.tobytes() + slope.tobytes()
        if key != self._lu_key or self._lu is None:
            self._lu = _factorize(self._jacobian(v, slope))
            self._lu_key = key
        return self._lu

    def _step(self, v: np.ndarray, dx: np.ndarray) -> np.ndarray:
        """``v`` moved by the Newton update ``dx`` (angles at PV/PQ buses, then magnitudes at PQ buses)."""
        va, vm = np.angle(v), np.abs(v)
        npvpq = self.pvpq.size
        va[self.pvpq] -= dx[:npvpq]
        vm[self.pq] -= dx[npvpq:]
        return vm * np.exp(1j * va)

    def _newton(self, v: np.ndarray, s_spec: np.ndarray, dep: VoltageDependence | None = None) -> np.ndarray | None:
        """Full Newton on one column from ``v``; the solution, or None if it does not converge."""
        for _ in range(_NEWTON_ITERATIONS):
            f = self._mismatch(v, s_spec, dep)
            if not np.all(np.isfinite(f)):
                return None
            if self._error(v, f) < TOLERANCE_PU:
                return v
            slope = None if dep is None else dep.slope(np.abs(v))
            try:
                dx = _factorize(self._jacobian(v, slope))(f)
            except RuntimeError:  # singular Jacobian: past the nose of the P-V curve
                return None
            v = self._step(v, dx)
        f = self._mismatch(v, s_spec, dep)
        return v if self._error(v, f) < TOLERANCE_PU else None

    def _error(self, v: np.ndarray, f: np.ndarray) -> np.ndarray:
        """The largest mismatch (pu) per column of the mismatches ``f`` at ``v``: of power, or in a
        disturbed case of current, ``|dS| / |V|``: at a bus near 0 V (a fault) any current gives
        almost no power, so a small power mismatch there says nothing of the currents."""
        if not self._current_check:
            return np.max(np.abs(f), axis=0, initial=0.0)
        rows = np.concatenate([self.pvpq, self.pq])
        vm = np.abs(v[rows])
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.max(np.where(vm > 0, np.abs(f) / vm, np.inf), axis=0, initial=0.0)

    # --------------------------------------------------------------------------- solving
    def _chord(
        self, v: np.ndarray, s_spec: np.ndarray, lu: Solver, cols: np.ndarray, dep: VoltageDependence | None = None
    ) -> np.ndarray:
        """Chord steps with the fixed Jacobian solver ``lu`` on columns ``cols`` of ``v`` (in place)
        while every open column's mismatch shrinks; whether each of ``cols`` converged."""
        last = np.full(cols.size, np.inf)
        done = np.zeros(cols.size, dtype=bool)
        dep_cols = None if dep is None else dep.columns(cols)
        for _ in range(_CHORD_ITERATIONS):
            f = self._mismatch(v[:, cols], s_spec[:, cols], dep_cols)
            err = self._error(v[:, cols], f)
            done = err < TOLERANCE_PU
            if done.all() or not np.all(err[~done] < last[~done]):  # converged, or a column stalls
                break
            last = err
            open_cols = np.flatnonzero(~done)
            v[:, cols[open_cols]] = self._step(v[:, cols[open_cols]], lu(f[:, open_cols]))
        return done

    def solve(
        self, s_spec: np.ndarray, v_start: np.ndarray | None = None, dependence: VoltageDependence | None = None
    ) -> CaseSolution:
        """Solve every column of ``s_spec`` (pu injections, ``(n_bus, K)``).

        :param v_start: warm start (pu, ``(n_bus,)``), e.g. the last solution; None = the net's
            own solution. Its slack and PV magnitudes are replaced by the setpoints.
        :param dependence: the part of ``s_spec`` that follows its bus voltage outside a band
            (parts ``(n_bus, K)``); None = constant power at every voltage.
        """
        v0 = self.v_net.copy() if v_start is None else np.asarray(v_start, dtype=complex).copy()
        fixed = np.concatenate([self.ref, self.pv])
        v0[fixed] = np.abs(self.v_net[fixed]) * np.exp(1j * np.angle(v0[fixed]))
        v0[self.ref] = self.v_net[self.ref]
        k = s_spec.shape[1]
        v = np.repeat(v0[:, None], k, axis=1)
        done = np.zeros(k, dtype=bool)
        if self._lu is not None:  # the last Jacobian factorized, wherever it was: usually close enough
            done = self._chord(v, s_spec, self._lu, np.arange(k), dependence)
        if not done.all():  # refactorize at the warm start and restart the open columns from it
            open_cols = np.flatnonzero(~done)
            v[:, open_cols] = v0[:, None]
            first = None if dependence is None else dependence.column(int(open_cols[0]))
            try:
                done[open_cols] = self._chord(v, s_spec, self._factor(v0, first), open_cols, dependence)
            except RuntimeError:  # singular at the warm start: full Newton below
                pass
        z0 = None
        if self._current_check and not done.all():  # a disturbance: restart from the linear network's solution
            open_cols = np.flatnonzero(~done)
            z0 = self._impedance_start(v0, s_spec[:, open_cols[0]])
            if z0 is not None:
                v[:, open_cols] = z0[:, None]
                first = None if dependence is None else dependence.column(int(open_cols[0]))
                try:
                    done[open_cols] = self._chord(v, s_spec, self._factor(z0, first), open_cols, dependence)
                except RuntimeError:  # singular there too: full Newton below
                    pass
        for j in np.flatnonzero(~done):
            dep_j = None if dependence is None else dependence.column(int(j))
            sol = None if z0 is None else self._newton(z0.copy(), s_spec[:, j], dep_j)
            if sol is None:
                sol = self._newton(v0.copy(), s_spec[:, j], dep_j)
            if sol is None and v_start is not None:
                sol = self._newton(self.v_net.copy(), s_spec[:, j], dep_j)
            if sol is not None:
                v[:, j] = sol
                done[j] = True
        return CaseSolution(v=v, converged=done)

    def _impedance_start(self, v: np.ndarray, s_spec: np.ndarray) -> np.ndarray | None:
        """A start for the Newton of a disturbed case: the linear network's solution, the slack and
        PV buses held at ``v`` (pu, ``(n_bus,)``) and every PQ bus's injection ``s_spec`` (pu,
        ``(n_bus,)``) the admittance drawing it at the bus's voltage in ``v``, or at
        :data:`~openg2g.grid.nets.lowvoltage.DISTURBANCE_VMINPU` where ``v`` is lower. Near a
        fault the loads are such admittances, and polar Newton started from the undisturbed
        voltages is drawn to the spurious 0 V solution of the power equations at the faulted bus
        (:meth:`_error`); started here it is not. None when that network is singular."""
        pq, fixed = self.pq, np.concatenate([self.ref, self.pv])
        vm = np.maximum(np.abs(v[pq]), DISTURBANCE_VMINPU)
        y = self.ybus[pq][:, pq] + sp.diags(-np.conj(s_spec[pq]) / vm**2)
        rhs = -(self.ybus[pq][:, fixed] @ v[fixed])
        with warnings.catch_warnings():
            warnings.simplefilter("error", sp.linalg.MatrixRankWarning)
            try:
                v_pq = splu(sp.csc_matrix(y)).solve(rhs)
            except (RuntimeError, sp.linalg.MatrixRankWarning):
                return None
        out = v.copy()
        out[pq] = v_pq
        return out

    def voltage_sensitivity(
        self,
        v: np.ndarray,
        buses: np.ndarray,
        q_per_p: float,
        dependence: VoltageDependence | None = None,
        gain: float = 1.0,
    ) -> np.ndarray:
        """dVm/dP (pu per pu of baseMVA) of every bus at the solution ``v`` w.r.t. a load drawn at
        each of ``buses`` (internal indices), its reactive power moving by ``q_per_p`` per unit of P.

        :param dependence: the voltage-dependent injections of the operating point ``v`` solves
            (one-dimensional parts), None for constant power.
        :param gain: the power the added load draws per unit of its scheduled power at ``v``
            (1 for a constant-power one; its band's gain for a voltage-dependent one).
        :return: ``(n_bus, len(buses))``; zero at slack and PV buses (their magnitude is held).
        """
        dx = self._state_derivatives(v, buses, q_per_p, dependence, gain)
        out = np.zeros((self.n_bus, len(buses)))
        out[self.pq] = dx[self.pvpq.size :]
        return out

    def voltage_derivatives(
        self,
        v: np.ndarray,
        buses: np.ndarray,
        q_per_p: float,
        dependence: VoltageDependence | None = None,
        gain: float = 1.0,
    ) -> np.ndarray:
        """Complex dV/dP (pu per pu of baseMVA) of every bus at the solution ``v``, load drawn as
        for :meth:`voltage_sensitivity`: ``dV = V (dVm / Vm + j dVa)`` from the same derivatives
        of the magnitudes and angles.

        :return: ``(n_bus, len(buses))``.
        """
        dx = self._state_derivatives(v, buses, q_per_p, dependence, gain)
        d_angle = np.zeros((self.n_bus, len(buses)))
        d_log_vm = np.zeros((self.n_bus, len(buses)))
        d_angle[self.pvpq] = dx[: self.pvpq.size]
        d_log_vm[self.pq] = dx[self.pvpq.size :] / np.abs(v[self.pq])[:, None]
        return v[:, None] * (d_log_vm + 1j * d_angle)

    def _state_derivatives(
        self,
        v: np.ndarray,
        buses: np.ndarray,
        q_per_p: float,
        dependence: VoltageDependence | None = None,
        gain: float = 1.0,
    ) -> np.ndarray:
        """Implicit function theorem at the solution ``v``: the derivatives of the unknowns (angles
        at PV and PQ buses, then magnitudes at PQ buses) w.r.t. a load drawn at each of ``buses``,
        ``dx/dP = -J^-1 dF/dP``, ``(n_unknowns, len(buses))``; the Jacobian carries the slope of
        ``dependence``, and the load draws ``gain`` per unit."""
        pos_p = {int(b): i for i, b in enumerate(self.pvpq)}
        pos_q = {int(b): self.pvpq.size + i for i, b in enumerate(self.pq)}
        rhs = np.zeros((self.pvpq.size + self.pq.size, len(buses)))
        for c, b in enumerate(buses):
            # drawing P lowers the specified injection: dF/dP = +1 (real row), +q_per_p (imag row)
            if int(b) in pos_p:
                rhs[pos_p[int(b)], c] = 1.0
            if int(b) in pos_q:
                rhs[pos_q[int(b)], c] = q_per_p
        if gain != 1.0:
            rhs *= gain
        return -self._factor(v, dependence)(rhs)

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
