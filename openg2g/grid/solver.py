"""The phase-frame power-flow solver: current injection on the load ports, solved by chord Newton.

The network (source, lines, transformers, capacitors, nominal load admittances) is linear; its
impedance matrix ``Z = Y^-1`` is computed once per switching state. The nonlinear part lives on
"ports": one per load phase branch (OpenDSS load models 1, 2, 4, 5 with their low/high voltage
fallbacks) and one per node and voltage dependence carrying wye injections (datacenters, PV,
storage, extra loads: constant power at any voltage, or OpenDSS load model 1 with its band). With port voltages ``u = P V`` and currents drawn ``i``, the solution satisfies

    u = u0 - K i_c(u),    K = P Z P^T,  u0 = P Z I_source,

where ``i_c`` is the load current minus the nominal admittance current already inside ``Y``
(the OpenDSS "compensation current"). Node voltages follow as ``V = Z (I_source - P^T i_c)``.
Many operating points (columns) solve at once, which is the batch mode. The answer is exact for
the model: these are the equations OpenDSS solves.

Voltage collapse: past the nose of the P-V curve the equations keep solutions on the
low-voltage branch (true solutions but not operating points), and a warm start can find one, or
follow that branch back down after the load falls. The operating point is the solution reached
continuously from no load. The real Jacobian of ``F`` is the identity at no load and its
determinant changes sign at a fold (the nose). So a column whose lowest port voltage is below
:data:`BRANCH_CHECK_PU`, or that did not converge, is solved again by continuation: the whole
load scaled up from 0 in adaptive steps, each Newton solve warm-started from the previous one
and accepted only with a positive determinant. If the path ends before full load the column is
collapsed and the fraction of its load the feeder can carry is reported. Steps whose voltages are
all above the threshold skip this (one comparison per port). A rejected column is never used as
a warm start.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from openg2g.grid.model import FeederModel, TransformerModel
from openg2g.grid.network import (
    LoadPorts,
    NodeIndex,
    Switching,
    admittance,
    energized,
    source_admittance,
    source_current,
    transformer_phase_block,
)

__all__ = ["BRANCH_CHECK_PU", "OPENDSS_VLOWPU", "CompiledNetwork", "LoadKernel", "Solution"]

OPENDSS_VLOWPU = 0.5
"""OpenDSS's default ``Vlowpu``: below it a model-1 load is its nominal admittance (pu)."""

_DIVERGED_PU = 10.0
"""A port-voltage residual above this (pu) means the iteration is diverging."""

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


class LoadKernel:
    """Current drawn by the feeder's load branches (A), OpenDSS semantics, precomputed for speed.

    Normal range: ``I = (P0 r^ap - j Q0 r^aq) / conj(V)`` with ``r = |V| / Vbase`` and the model's
    exponents (1: 0/0, 2: 2/2, 4: CVR factors, 5: 1/1). Below ``vlowpu`` the nominal admittance;
    between ``vlowpu`` and ``vminpu`` the OpenDSS interpolated admittance; above ``vmaxpu`` the
    admittance that meets the nominal power (models 1, 4) or current (model 5) there. Model 2 is
    constant admittance everywhere.
    """

    def __init__(self, ports: LoadPorts) -> None:
        m = ports.model
        vb = ports.v_base_v
        ap = np.select([m == 2, m == 4, m == 5], [2.0, ports.cvrwatts, 1.0], 0.0)
        aq = np.select([m == 2, m == 4, m == 5], [2.0, ports.cvrvars, 1.0], 0.0)
        self.pow_idx = np.flatnonzero((ap != 0) | (aq != 0))
        self.ap = ap[self.pow_idx, None]
        self.aq = aq[self.pow_idx, None]
        self.vb_pow = vb[self.pow_idx, None]
        self.p0 = ports.p_w[:, None]
        self.q0 = ports.q_var[:, None]
        self.s0c = (ports.p_w - 1j * ports.q_var)[:, None]
        yeq = self.s0c[:, 0] / vb**2
        switching = m != 2
        self.vlow = np.where(switching, ports.vlowpu * vb, -1.0)[:, None]
        self.v95 = np.where(switching, ports.vminpu * vb, -1.0)[:, None]
        self.vmax = np.where(switching, ports.vmaxpu * vb, np.inf)[:, None]
        const_i = m == 5
        i_low = yeq * self.vlow[:, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            i95 = np.where(const_i, yeq * vb, yeq / ports.vminpu**2 * self.v95[:, 0])
            slope = (i95 - i_low) / (self.v95[:, 0] - self.vlow[:, 0])
        self.yeq = yeq[:, None]
        self.i_low = i_low[:, None]
        self.slope = np.nan_to_num(slope)[:, None]
        self.y_high = np.where(const_i, yeq / ports.vmaxpu, yeq / ports.vmaxpu**2)[:, None]

    def prepare(self, scale: np.ndarray, n_cols: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per-solve constants at load ``scale`` (``(n, 1)`` or ``(n, n_cols)``): numerator of the
        normal-range current, P and Q of the voltage-dependent branches, and the scale itself."""
        sc = np.broadcast_to(scale, (self.s0c.shape[0], n_cols))
        num = self.s0c * sc
        return num, self.p0[self.pow_idx] * sc[self.pow_idx], self.q0[self.pow_idx] * sc[self.pow_idx], sc

    def currents(self, u: np.ndarray, ctx: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
        """Branch currents (A) for branch voltages ``u`` (V, ``(n, cols)``); ``ctx`` from
        :meth:`prepare`."""
        num, p_pow, q_pow, sc = ctx
        vm = np.abs(u)
        if self.pow_idx.size:
            num = num.copy()
            r = vm[self.pow_idx] / self.vb_pow
            num[self.pow_idx] = p_pow * r**self.ap - 1j * q_pow * r**self.aq
        i = num / np.conj(u)
        out = (vm <= self.v95) | (vm > self.vmax)
        if out.any():
            rows, cols = np.nonzero(out)
            v, m = u[rows, cols], vm[rows, cols]
            k = sc[rows, cols]
            yeq = self.yeq[rows, 0] * k
            y_mid = (self.i_low[rows, 0] + self.slope[rows, 0] * (m - self.vlow[rows, 0])) * k / m
            y = np.where(
                m <= self.vlow[rows, 0], yeq, np.where(m <= self.v95[rows, 0], y_mid, self.y_high[rows, 0] * k)
            )
            i[rows, cols] = y * v
        return i


def _column(
    ctx: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], j: int, factor: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Column ``j`` of :meth:`LoadKernel.prepare`'s constants with the load scaled by ``factor``
    (every one of them is linear in the load)."""
    a, b, c, d = (x[:, j : j + 1] * factor for x in ctx)
    return a, b, c, d


def _pq_model1(
    nodes: NodeIndex, pq_nodes: np.ndarray, pq_band: np.ndarray | None
) -> tuple[np.ndarray, LoadKernel | None]:
    """The PQ ports with an OpenDSS model-1 band and a kernel for them.

    The kernel's nominal power is 1 W per port; :meth:`LoadKernel.prepare` is then given the
    port's ``conj(S)`` as its (complex) scale, so every current and fallback admittance comes out
    proportional to the power of the step.
    """
    if pq_band is None or np.isnan(pq_band[:, 0]).all():
        return np.zeros(0, dtype=int), None
    dep = np.flatnonzero(~np.isnan(pq_band[:, 0]))
    n = dep.size
    ports = LoadPorts(
        load=np.zeros(n, dtype=int),
        from_node=pq_nodes[dep],
        to_node=np.full(n, -1),
        v_base_v=nodes.v_base_v[pq_nodes[dep]],
        p_w=np.ones(n),
        q_var=np.zeros(n),
        model=np.ones(n, dtype=int),
        vminpu=pq_band[dep, 0],
        vmaxpu=pq_band[dep, 1],
        vlowpu=np.full(n, OPENDSS_VLOWPU),
        cvrwatts=np.ones(n),
        cvrvars=np.full(n, 2.0),
    )
    return dep, LoadKernel(ports)


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


class CompiledNetwork:
    """A feeder at one switching state, reduced to its ports, ready to solve.

    :param model: the feeder.
    :param nodes: its node numbering.
    :param ports: its load branches.
    :param pq_nodes: node of each PQ port (wye injections).
    :param state: taps, capacitor and line states.
    :param pq_band: per PQ port ``(vminpu, vmaxpu)`` of an OpenDSS model-1 element (constant
        power inside the band, constant impedance outside), NaNs for constant power at any
        voltage; None = every port constant power.
    """

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
        n = len(nodes)
        self.z = z = np.linalg.inv(admittance(model, nodes, state, ports))
        self.src_nodes = np.array([nodes.index[(model.source.bus, p)] for p in "abc"])
        self.y_src = source_admittance(model)
        i_src = source_current(model, nodes)
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
        self.w = z @ inc.T
        self.k = inc @ self.w
        self.u0 = inc @ self.v0
        self.n_load = n_l
        self.kernel = LoadKernel(ports)
        self._pq_dep, self._pq_kernel = _pq_model1(nodes, self.pq_nodes, pq_band)
        live = energized(model, nodes, state)
        live_ext = np.append(live, True)  # index -1 = ground
        self.live_branch = (live_ext[ports.from_node] & live_ext[ports.to_node])[:, None].astype(float)
        self.live_pq = live[self.pq_nodes][:, None].astype(float)
        self.dead_nodes = ~live
        self._dead_ports = np.concatenate([self.live_branch[:, 0], self.live_pq[:, 0]]) == 0
        self.dead_branch = self.live_branch[:, 0] == 0
        self.dead_pq = self.live_pq[:, 0] == 0
        self.n_dead = int(self.dead_branch.sum() + self.dead_pq.sum())
        self.y_nominal = ports.y_nominal_s
        v_ref = np.concatenate([ports.v_base_v, nodes.v_base_v[self.pq_nodes]])
        self.v_ref = v_ref[:, None]
        self.u_last: np.ndarray = self.u0[:, None].copy()
        self._jinv: np.ndarray | None = None

    def retap(self, t: TransformerModel, old_taps_pu: np.ndarray, new_taps_pu: np.ndarray) -> None:
        """Change a transformer's winding-2 taps in place by a low-rank (Woodbury) update of ``Z``
        and everything derived from it, instead of a new inversion.

        ``Y`` is complex symmetric, so with ``dY = U D U^T`` on the touched nodes ``S``:
        ``Z' = Z - Z[:, S] M Z[S, :]`` with ``M = (I + D Z[S, S])^-1 D``.
        """
        blocks: dict[int, dict[int, complex]] = {}
        for k in np.flatnonzero(np.asarray(old_taps_pu) != np.asarray(new_taps_pu)):
            idx, new = transformer_phase_block(t, int(k), float(new_taps_pu[k]), self.nodes)
            _, old = transformer_phase_block(t, int(k), float(old_taps_pu[k]), self.nodes)
            for a, i in enumerate(idx):
                for b, j in enumerate(idx):
                    blocks.setdefault(i, {}).setdefault(j, 0j)
                    blocks[i][j] += new[a, b] - old[a, b]
        if not blocks:
            return
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

    def _i_comp(
        self, u: np.ndarray, ctx: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], s_pq_conj: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Compensation currents (load current minus what ``Y`` already holds) and actual currents."""
        ul, uq = u[: self.n_load], u[self.n_load :]
        il = self.kernel.currents(ul, ctx)
        iq = s_pq_conj / np.conj(uq)
        if self._pq_kernel is not None:
            d = self._pq_dep
            iq[d] = self._pq_kernel.currents(uq[d], self._pq_kernel.prepare(s_pq_conj[d], uq.shape[1]))
        if self.n_dead:
            il[self.dead_branch] = 0.0
            iq[self.dead_pq] = 0.0
        i_actual = np.concatenate([il, iq])
        i_comp = i_actual.copy()
        i_comp[: self.n_load] -= self.y_nominal[:, None] * ul
        return i_comp, i_actual

    def _jacobian(
        self, u: np.ndarray, ctx: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], s_conj: np.ndarray, col: int
    ) -> np.ndarray:
        """Real Jacobian of ``F(u) = u - u0 + K i_c(u)`` at column ``col`` of ``u``, ``(2n, 2n)``.

        ``i_c`` of a port depends on that port's voltage only, so its derivative is one 2x2 real
        block per port, taken by forward differences in the real and imaginary directions.
        """
        c0 = _column(ctx, col)
        u1, s1 = u[:, col : col + 1], s_conj[:, col : col + 1]
        h = 1e-7 * self.v_ref
        i0, _ = self._i_comp(u1, c0, s1)
        dx = (self._i_comp(u1 + h, c0, s1)[0] - i0)[:, 0] / h[:, 0]
        dy = (self._i_comp(u1 + 1j * h, c0, s1)[0] - i0)[:, 0] / h[:, 0]
        kr, ki = self.k.real, self.k.imag
        n = u.shape[0]
        jac = np.eye(2 * n)
        jac[:n, :n] += kr * dx.real - ki * dx.imag
        jac[:n, n:] += kr * dy.real - ki * dy.imag
        jac[n:, :n] += ki * dx.real + kr * dx.imag
        jac[n:, n:] += ki * dy.real + kr * dy.imag
        return jac

    def _low_branch(
        self, u: np.ndarray, ctx: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], s_conj: np.ndarray, col: int
    ) -> bool:
        """True if column ``col`` is past the nose: the Jacobian's determinant is not positive."""
        sign, _ = np.linalg.slogdet(self._jacobian(u, ctx, s_conj, col))
        return bool(sign <= 0)

    def _newton(
        self,
        u: np.ndarray,
        ctx: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
        s_conj: np.ndarray,
        tol_pu: float,
        max_iter: int,
    ) -> tuple[np.ndarray, bool, int]:
        """Chord Newton from ``u`` (see :meth:`solve`): the port voltages, whether every column
        converged, and the iterations used."""
        n = u.shape[0]
        u0 = self.u0[:, None]
        if self._jinv is None:
            self._jinv = np.linalg.inv(self._jacobian(u, ctx, s_conj, 0))
        err_prev = np.inf
        it = 0
        for it in range(1, max_iter + 1):
            i_comp, _ = self._i_comp(u, ctx, s_conj)
            f = u - (u0 - self.k @ i_comp)
            err = np.max(np.abs(f) / self.v_ref) if u.size else 0.0
            if not err < _DIVERGED_PU:  # also catches NaN
                break
            if err < tol_pu:
                return u - f, True, it
            if err > 0.5 * err_prev:  # slow or diverging: Newton step from here
                self._jinv = np.linalg.inv(self._jacobian(u, ctx, s_conj, 0))
            err_prev = err
            step = self._jinv @ np.concatenate([f.real, f.imag])
            u = u - (step[:n] + 1j * step[n:])
        return u, False, it

    def _principal(
        self, ctx: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], s_conj: np.ndarray, tol_pu: float
    ) -> tuple[np.ndarray, float]:
        """Follow a single column's operating point up from no load (see the module docstring).

        :return: port voltages at the last solved load fraction, and that fraction (1.0 when
            the whole load is carried).
        """
        u = self.u0[:, None].copy()
        u[self._dead_ports] = 1.0
        lam, step = 0.0, _PATH_FIRST_STEP
        self._jinv = None
        while lam < 1.0 and step >= _PATH_MIN_STEP:
            nxt = min(1.0, lam + step)
            c, sn = _column(ctx, 0, nxt), s_conj * nxt
            un, ok, _ = self._newton(u.copy(), c, sn, tol_pu, _PATH_MAX_ITER)
            if ok and not self._low_branch(un, c, sn, 0):
                u, lam, step = un, nxt, 2.0 * step
            else:
                step /= 2.0
                self._jinv = None
        return u, lam

    def _voltages(
        self, u: np.ndarray, ctx: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], s_conj: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Node voltages (V), source power per phase (VA) and losses (W) of port voltages ``u``."""
        i_comp, i_actual = self._i_comp(u, ctx, s_conj)
        v = self.v0[:, None] - self.w @ i_comp
        v[self.dead_nodes] = 0.0
        v_src = v[self.src_nodes]
        i_src = self.y_src @ (self.e_src[:, None] - v_src)
        s_sub = v_src * np.conj(i_src)
        p_ports = np.real(u * np.conj(i_actual)).sum(axis=0)
        return v, s_sub, s_sub.real.sum(axis=0) - p_ports

    def solve(
        self,
        scale: np.ndarray,
        s_pq_va: np.ndarray,
        tol_pu: float = 1e-8,
        max_iter: int = 100,
        u_init: np.ndarray | None = None,
    ) -> Solution:
        """Solve one column per operating point.

        Chord Newton on ``F(u) = u - u0 + K i_c(u) = 0``: the Jacobian inverse is kept from one
        solve to the next and refreshed at the current point whenever an iteration reduces the
        residual by less than half (a full Newton step then). It gives up when the residual
        exceeds 10 pu or ``max_iter`` is reached. It converges when the largest fixed-point update of a port
        voltage, ``|u - (u0 - K i_c(u))|``, is below ``tol_pu``. Converged columns with a port
        below :data:`BRANCH_CHECK_PU`, and a single column that did not converge, are solved
        again by continuation from no load (module docstring).

        :param scale: load multiplier per load branch, ``(n_branch, 1)`` or ``(n_branch, n_cols)``.
        :param s_pq_va: complex power drawn at each PQ node (VA, > 0 = consumption),
            ``(n_pq, n_cols)``.
        :param tol_pu: convergence tolerance on the port voltage update (pu).
        :param max_iter: iteration limit.
        :param u_init: starting port voltages, ``(n_ports, 1)`` or ``(n_ports, n_cols)``; default
            the last accepted column (warm start).
        """
        n_cols = s_pq_va.shape[1]
        if u_init is None:
            u_init = self.u_last
        n = self.k.shape[0]
        u = np.broadcast_to(u_init, (n, n_cols)).copy()
        ctx = self.kernel.prepare(scale * self.live_branch, n_cols)
        s_conj = np.conj(s_pq_va * self.live_pq)
        u[self._dead_ports] = 1.0  # any nonzero value: their currents are zero
        u, converged, it = self._newton(u, ctx, s_conj, tol_pu, max_iter)
        lam = np.ones(n_cols)
        collapsed = np.zeros(n_cols, dtype=bool)
        ok = converged
        # measured against each port's no-load voltage, not its load's rated kV: a file may rate a
        # wye load in line-to-line kV (IEEE 34 does), which would put it "below" at any load
        v_check = np.where(self._dead_ports, 0.0, BRANCH_CHECK_PU * np.abs(self.u0))[:, None]
        low = (np.abs(u) < v_check).any(axis=0) if converged else np.full(n_cols, n_cols == 1)
        if low.any():  # a suspect column, or a single one that did not converge
            check = np.flatnonzero(low)
            for j in check.tolist():
                u[:, j : j + 1], lam[j] = self._principal(_column(ctx, j), s_conj[:, j : j + 1], tol_pu)
            collapsed = (lam > 0.0) & (lam < 1.0)
            ok = bool((lam[check] == 1.0).all())
        v, s_sub, losses = self._voltages(u, ctx, s_conj)
        if ok:
            self.u_last = u[:, -1:].copy()
        else:
            for j in np.flatnonzero(collapsed).tolist():
                v[:, j : j + 1], s_sub[:, j : j + 1], losses[j : j + 1] = self._voltages(
                    u[:, j : j + 1], _column(ctx, j, lam[j]), s_conj[:, j : j + 1] * lam[j]
                )
            if converged and (lam == 1.0).any():  # never warm-start from a rejected column
                last = np.flatnonzero(lam == 1.0)[-1]
                self.u_last = u[:, last : last + 1].copy()
            self._jinv = None  # taken at a bad point: rebuild from the warm start next time
        return Solution(
            v=v,
            s_sub_va=s_sub,
            losses_w=losses,
            iterations=it,
            converged=ok,
            collapsed=collapsed,
            load_fraction=lam,
        )
