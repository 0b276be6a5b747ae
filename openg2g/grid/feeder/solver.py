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
from typing import NamedTuple

import numpy as np
from scipy.linalg.lapack import dgetrf, dgetrs

from openg2g.core.errors import PowerFlowError
from openg2g.grid.feeder.model import CapacitorModel, FeederModel, TransformerModel
from openg2g.grid.feeder.network import (
    LoadPorts,
    NodeIndex,
    Stamps,
    Switching,
    admittance,
    energized,
    source_admittance,
    source_current,
    stamp_capacitor,
    transformer_phase_block,
)

__all__ = [
    "BRANCH_CHECK_PU",
    "OPENDSS_VLOWPU",
    "CompiledNetwork",
    "LoadKernel",
    "Solution",
    "band_power_va",
    "magnitude_slopes",
]

OPENDSS_VLOWPU = 0.5
"""OpenDSS's default ``Vlowpu``: below it a model-1 load is its nominal admittance (pu)."""

_DIVERGED_PU = 10.0
"""A port-voltage residual above this (pu) means the iteration is diverging."""

BRANCH_CHECK_PU = 0.75
"""A converged column with a port voltage below this fraction of its no-load voltage is re-solved
by continuation. On the bundled feeders the nose of the P-V curve lies near 0.6 pu (IEEE 123 with
a pf 0.95 datacenter at bus 300: 0.62 pu at 4.8 MW), so low-branch solutions fall below it, while
operating points inside any voltage limit skip the continuation."""

_CHORD_RATE = 0.1
"""A chord iteration that reduces the residual by less than this factor refactorizes the Jacobian
at the current point. Measured on the bundled feeders with 0.1 s load steps: a Jacobian from an
earlier operating point contracts by 0.15-0.2 per iteration (8-11 iterations to 1e-8 pu), a
fresh one by 1e-3 or better (2-4 iterations)."""

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
        self.slope = np.where(switching, np.nan_to_num(slope), 0.0)[:, None]  # model 2 never leaves its range
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
            i = np.where(out, self._fallback(vm, sc) * u, i)
        return i

    def derivatives(
        self, u: np.ndarray, ctx: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Wirtinger derivatives ``di/du`` and ``di/dconj(u)`` (S) of :meth:`currents`, per branch
        (each current depends on its own branch voltage only): ``di = a du + b conj(du)``.

        In the normal range ``i = num(|u|) / conj(u)`` with ``d|u| = (conj(u) du + u conj(du)) / (2|u|)``;
        outside it ``i = y(|u|) u``, where ``y`` varies with ``|u|`` only between ``vlowpu`` and
        ``vminpu``. At a region boundary the derivative is that of the region the voltage lies in.
        """
        num, p_pow, q_pow, sc = ctx
        vm = np.abs(u)
        ubar = np.conj(u)
        a = np.zeros_like(u)
        if self.pow_idx.size:
            num = num.copy()
            vp = vm[self.pow_idx]
            r = vp / self.vb_pow
            rp, rq = r**self.ap, r**self.aq
            num[self.pow_idx] = p_pow * rp - 1j * q_pow * rq
            a[self.pow_idx] = (self.ap * p_pow * rp - 1j * self.aq * q_pow * rq) / (2.0 * vp * vp)
        i = num / ubar
        b = a * u / ubar - i / ubar
        out = (vm <= self.v95) | (vm > self.vmax)
        if out.any():
            mid = (vm > self.vlow) & (vm <= self.v95)
            dy_dm = np.where(mid, sc * (self.slope * self.vlow - self.i_low) / (vm * vm), 0.0)
            a = np.where(out, self._fallback(vm, sc) + 0.5 * dy_dm * vm, a)
            b = np.where(out, 0.5 * dy_dm * u * u / vm, b)
        return a, b

    def _fallback(self, vm: np.ndarray, sc: np.ndarray) -> np.ndarray:
        """Admittance (S) of every branch outside its normal range at voltage magnitude ``vm`` (V)
        and load scale ``sc`` (meaningful where the voltage is outside that range)."""
        y_mid = (self.i_low + self.slope * (vm - self.vlow)) * sc / vm
        return np.where(vm <= self.vlow, self.yeq * sc, np.where(vm <= self.v95, y_mid, self.y_high * sc))


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


def band_power_va(u_v: np.ndarray, s_va: np.ndarray, v_base_v: float, vminpu: float, vmaxpu: float) -> np.ndarray:
    """Power (VA) that wye elements scheduled at ``s_va`` (VA) with an OpenDSS model-1 band
    ``[vminpu, vmaxpu]`` draw at their voltages ``u_v`` (V, complex): what a PQ port draws."""
    n = len(u_v)
    nodes = NodeIndex(tuple(map(str, range(n))), {}, np.full(n, v_base_v))
    _, kernel = _pq_model1(nodes, np.arange(n), np.tile([vminpu, vmaxpu], (n, 1)))
    assert kernel is not None
    u = np.asarray(u_v, dtype=complex)[:, None]
    return (u * np.conj(kernel.currents(u, kernel.prepare(np.conj(np.asarray(s_va))[:, None], 1))))[:, 0]


def magnitude_slopes(z: np.ndarray, dz: np.ndarray) -> np.ndarray:
    """Derivatives ``d|z| = Re(conj(z) dz) / |z|`` of the magnitudes of complex ``z`` (``(n,)``)
    along derivatives ``dz`` (``(n, k)``), in the units of ``dz``; 0 where ``z`` is 0 (a
    de-energized node, a branch carrying nothing)."""
    zc = z[:, None]
    magnitude = np.abs(zc)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(magnitude > 0, np.real(np.conj(zc) * dz) / magnitude, 0.0)


def _same_point(scale_a: np.ndarray, s_pq_a: np.ndarray, scale_b: np.ndarray, s_pq_b: np.ndarray) -> bool:
    """True if two single-column operating points have the same loads, bit for bit."""
    return np.array_equal(scale_a, scale_b) and np.array_equal(s_pq_a, s_pq_b)


class _NewtonResult(NamedTuple):
    """What :meth:`CompiledNetwork._newton` ends with.

    :param u: port voltages (V): when converged, the fixed-point update ``u0 - K i_comp`` of the
        last iterate.
    :param converged: every column met the tolerance.
    :param iterations: iterations used.
    :param i_comp: compensation currents (A) of the last iterate (when converged, the network
        driven by them has port voltages ``u``).
    :param i_actual: load currents (A) of the last iterate.
    """

    u: np.ndarray
    converged: bool
    iterations: int
    i_comp: np.ndarray
    i_actual: np.ndarray


@dataclass(frozen=True)
class _Linearization:
    """A solved operating point and its Jacobian, for voltage sensitivities.

    :param scale: the load multipliers it was solved at.
    :param s_pq_va: the PQ powers it was solved at (VA).
    :param v: node voltages (V).
    :param dx: derivative of each port's compensation current with respect to the real part of
        its voltage (S), ``(n_ports, 1)``; ``dy`` likewise for the imaginary part.
    :param lu: LAPACK LU factors and pivots of the Jacobian.
    """

    scale: np.ndarray
    s_pq_va: np.ndarray
    v: np.ndarray
    dx: np.ndarray
    dy: np.ndarray
    lu: tuple[np.ndarray, np.ndarray]


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
        y = admittance(model, nodes, state, ports)
        self.z = z = np.linalg.inv(y)
        self.src_nodes = np.array([nodes.index[(model.source.bus, p)] for p in "abc"])
        self.y_src = source_admittance(model)
        # A stiff source (a pandapower slack, whose positive-sequence impedance is near zero) loses
        # its current to cancellation in y_src (E - V); the network side of its bus gives it whole:
        # y_src (E - V_src) = Y_net[src, :] V + the ports' compensation currents at src.
        self._y_net_src: np.ndarray | None = None
        if model.source.z2_ohm is not None:
            self._y_net_src = y[self.src_nodes].copy()
            self._y_net_src[:, self.src_nodes] -= self.y_src
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
        self._inc_src = inc[:, self.src_nodes].T.copy()
        # the same incidence as node pairs (-1 = ground), to take port differences by indexing
        self._port_from = np.concatenate([ports.from_node, self.pq_nodes])
        self._port_to = np.concatenate([ports.to_node, np.full(n_q, -1)])
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
        self._any_dead_node = bool(self.dead_nodes.any())
        v_ref = np.concatenate([ports.v_base_v, nodes.v_base_v[self.pq_nodes]])
        self.v_ref = v_ref[:, None]
        self._v_check = self._branch_check_v()
        # column count -> (branch scales, the load kernel's constants at them) of the last solve
        self._ctx: dict[
            int, tuple[tuple[tuple[int, ...], bytes], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
        ] = {}
        self.u_last: np.ndarray = self.u0[:, None].copy()
        self._jlu: tuple[np.ndarray, np.ndarray] | None = None
        self._lin: _Linearization | None = None
        self._solved: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # last accepted (scale, s_pq, v)

    def retap(self, t: TransformerModel, old_taps_pu: np.ndarray, new_taps_pu: np.ndarray) -> None:
        """Change a transformer's winding-2 taps in place (:meth:`_update`) instead of a new inversion."""
        blocks: dict[int, dict[int, complex]] = {}
        for k in np.flatnonzero(np.asarray(old_taps_pu) != np.asarray(new_taps_pu)):
            idx, new = transformer_phase_block(t, int(k), float(new_taps_pu[k]), self.nodes)
            _, old = transformer_phase_block(t, int(k), float(old_taps_pu[k]), self.nodes)
            for a, i in enumerate(idx):
                for b, j in enumerate(idx):
                    blocks.setdefault(i, {}).setdefault(j, 0j)
                    blocks[i][j] += new[a, b] - old[a, b]
        self._update(blocks)

    def switch_capacitor(self, cap: CapacitorModel, closed: bool) -> None:
        """Close (``closed=True``) or open a capacitor in place (:meth:`_update`); the caller
        switches only a capacitor whose state changes."""
        stamps = Stamps()
        stamp_capacitor(stamps, cap, self.nodes)
        blocks: dict[int, dict[int, complex]] = {}
        for i, j, y in zip(*stamps.entries()):
            blocks.setdefault(int(i), {}).setdefault(int(j), 0j)
            blocks[int(i)][int(j)] += y if closed else -y
        self._update(blocks)

    def _update(self, blocks: dict[int, dict[int, complex]]) -> None:
        """Add ``dY`` (node -> node -> S) to the admittance by a low-rank (Woodbury) update of ``Z``
        and everything derived from it, instead of a new inversion.

        ``Y`` is complex symmetric, so with ``dY = U D U^T`` on the touched nodes ``S``:
        ``Z' = Z - Z[:, S] M Z[S, :]`` with ``M = (I + D Z[S, S])^-1 D``.
        """
        if not blocks:
            return
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
        self._lin = self._solved = None

    def _branch_check_v(self) -> np.ndarray:
        """Port voltage (V, ``(n_ports, 1)``) below which a converged column is a suspect
        (:data:`BRANCH_CHECK_PU` of the port's no-load voltage; 0 on a de-energized port).

        Measured against each port's no-load voltage, not its load's rated kV: a file may rate a
        wye load in line-to-line kV (IEEE 34 does), which would put it "below" at any load."""
        return np.where(self._dead_ports, 0.0, BRANCH_CHECK_PU * np.abs(self.u0))[:, None]

    def _prepared(self, scale: np.ndarray, n_cols: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`LoadKernel.prepare` of the live branches at load ``scale`` for ``n_cols`` columns,
        kept per column count while the scales repeat (every batch, and every sensitivity, of a run
        at a constant load scale); read-only."""
        live_scale = scale * self.live_branch
        key = (live_scale.shape, live_scale.tobytes())
        kept = self._ctx.get(n_cols)
        if kept is not None and kept[0] == key:
            return kept[1]
        ctx = self.kernel.prepare(live_scale, n_cols)
        for a in ctx:
            a.flags.writeable = False
        self._ctx[n_cols] = (key, ctx)
        return ctx

    def _i_comp(
        self, u: np.ndarray, ctx: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], s_pq_conj: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Compensation currents (load current minus what ``Y`` already holds) and actual currents."""
        ul, uq = self._live_voltages(u)
        il = self.kernel.currents(ul, ctx)
        iq = s_pq_conj / np.conj(uq)
        if self._pq_kernel is not None:
            d = self._pq_dep
            iq[d] = self._pq_kernel.currents(uq[d], self._pq_kernel.prepare(s_pq_conj[d], uq.shape[1]))
        if self.n_dead:
            il[self.dead_branch] = 0.0
            iq[self.dead_pq] = 0.0
        i_comp = np.concatenate([il - self.y_nominal[:, None] * u[: self.n_load], iq])
        return i_comp, np.concatenate([il, iq])

    def _live_voltages(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Load-branch and PQ-port voltages to evaluate the load models at: ``u``, with 1 V on
        de-energized ports (they tend to exactly 0 V, where a load model is 0/0; their currents
        are zero anyway)."""
        if self.n_dead:
            u = np.where(self._dead_ports[:, None], 1.0, u)
        return u[: self.n_load], u[self.n_load :]

    def _i_comp_derivatives(
        self, u: np.ndarray, ctx: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], s_pq_conj: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Derivatives of the compensation currents of :meth:`_i_comp` with respect to the real and
        imaginary parts of each port's own voltage (S), ``(n_ports, cols)`` each."""
        ul, uq = self._live_voltages(u)
        al, bl = self.kernel.derivatives(ul, ctx)
        uq_bar = np.conj(uq)
        aq = np.zeros_like(uq)
        bq = -s_pq_conj / (uq_bar * uq_bar)  # constant power: i = conj(S) / conj(u)
        if self._pq_kernel is not None:
            d = self._pq_dep
            aq[d], bq[d] = self._pq_kernel.derivatives(uq[d], self._pq_kernel.prepare(s_pq_conj[d], uq.shape[1]))
        if self.n_dead:
            al[self.dead_branch] = bl[self.dead_branch] = 0.0
            aq[self.dead_pq] = bq[self.dead_pq] = 0.0
        a = np.concatenate([al - self.y_nominal[:, None], aq])
        b = np.concatenate([bl, bq])
        return a + b, 1j * (a - b)

    def _jacobian(
        self, u: np.ndarray, ctx: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], s_conj: np.ndarray, col: int
    ) -> np.ndarray:
        """Real Jacobian of ``F(u) = u - u0 + K i_c(u)`` at column ``col`` of ``u`` (see
        :meth:`_jacobian_of`)."""
        dx, dy = self._i_comp_derivatives(u[:, col : col + 1], _column(ctx, col), s_conj[:, col : col + 1])
        return self._jacobian_of(dx[:, 0], dy[:, 0])

    def _jacobian_of(self, dx: np.ndarray, dy: np.ndarray) -> np.ndarray:
        """Real Jacobian ``(2n, 2n)`` of ``F(u) = u - u0 + K i_c(u)``, unknowns and residuals
        ordered real parts then imaginary parts, from the derivatives ``dx``, ``dy`` (S) of each
        port's compensation current with respect to the real and imaginary parts of its own
        voltage (:meth:`_i_comp_derivatives`): ``dF = du + K dx Re(du) + K dy Im(du)``."""
        n = dx.shape[0]
        kx, ky = self.k * dx, self.k * dy
        jac = np.empty((2 * n, 2 * n), order="F")  # LAPACK's layout: dgetrf factors it in place
        jac[:n, :n], jac[n:, :n] = kx.real, kx.imag
        jac[:n, n:], jac[n:, n:] = ky.real, ky.imag
        jac.flat[:: 2 * n + 1] += 1.0
        return jac

    def _low_branch(
        self, u: np.ndarray, ctx: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], s_conj: np.ndarray, col: int
    ) -> bool:
        """True if column ``col`` is past the nose: the Jacobian's determinant is not positive."""
        sign, _ = np.linalg.slogdet(self._jacobian(u, ctx, s_conj, col))
        return bool(sign <= 0)

    def _factor(
        self, u: np.ndarray, ctx: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], s_conj: np.ndarray
    ) -> None:
        """LU-factorize the Jacobian at column 0 of ``u`` for the chord iterations (a singular one
        gives non-finite steps, which the iteration reports as divergence)."""
        lu, piv, _ = dgetrf(self._jacobian(u, ctx, s_conj, 0), overwrite_a=True)
        self._jlu = (lu, piv)

    def _chord_solve(self, rhs: np.ndarray) -> np.ndarray:
        """``J^-1 rhs`` for the factorized Jacobian, ``rhs`` complex ``(n, cols)`` in the real
        ordering of :meth:`_jacobian` (the real-linear map applied to each column)."""
        assert self._jlu is not None
        n = rhs.shape[0]
        x, _ = dgetrs(*self._jlu, np.concatenate([rhs.real, rhs.imag]))
        return x[:n] + 1j * x[n:]

    def _newton(
        self,
        u: np.ndarray,
        ctx: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
        s_conj: np.ndarray,
        tol_pu: float,
        max_iter: int,
    ) -> _NewtonResult:
        """Chord Newton from ``u`` (see :meth:`solve`)."""
        u0 = self.u0[:, None]
        if self._jlu is None:
            self._factor(u, ctx, s_conj)
        err_prev = np.inf
        it = 0
        i_comp = i_actual = u
        for it in range(1, max_iter + 1):
            i_comp, i_actual = self._i_comp(u, ctx, s_conj)
            f = u - (u0 - self.k @ i_comp)
            err = (np.abs(f) / self.v_ref).max() if u.size else 0.0
            if not err < _DIVERGED_PU:  # also catches NaN
                break
            if err < tol_pu:
                return _NewtonResult(u - f, True, it, i_comp, i_actual)
            if err > _CHORD_RATE * err_prev:  # slow or diverging: Newton step from here
                self._factor(u, ctx, s_conj)
            err_prev = err
            u = u - self._chord_solve(f)
        return _NewtonResult(u, False, it, i_comp, i_actual)

    def _principal(
        self, ctx: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], s_conj: np.ndarray, tol_pu: float
    ) -> tuple[np.ndarray, float]:
        """Follow a single column's operating point up from no load (see the module docstring).

        :return: port voltages at the last solved load fraction, and that fraction (1.0 when
            the whole load is carried).
        """
        u = self.u0[:, None].copy()
        lam, step = 0.0, _PATH_FIRST_STEP
        self._jlu = None
        while lam < 1.0 and step >= _PATH_MIN_STEP:
            nxt = min(1.0, lam + step)
            c, sn = _column(ctx, 0, nxt), s_conj * nxt
            step_result = self._newton(u.copy(), c, sn, tol_pu, _PATH_MAX_ITER)
            un, ok = step_result.u, step_result.converged
            if ok and not self._low_branch(un, c, sn, 0):
                u, lam, step = un, nxt, 2.0 * step
            else:
                step /= 2.0
                self._jlu = None
        return u, lam

    def _voltages(
        self, u: np.ndarray, ctx: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], s_conj: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Node voltages (V), source power per phase (VA) and losses (W) of port voltages ``u``."""
        return self._network(u, *self._i_comp(u, ctx, s_conj))

    def _network(
        self, u: np.ndarray, i_comp: np.ndarray, i_actual: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Node voltages (V), source power per phase (VA) and losses (W) of the network driven by
        the ports' compensation currents ``i_comp`` (A), whose port voltages are ``u`` (V) and
        whose loads draw ``i_actual`` (A)."""
        v = self.v0[:, None] - self.w @ i_comp
        if self._any_dead_node:
            v[self.dead_nodes] = 0.0
        v_src = v[self.src_nodes]
        if self._y_net_src is None:
            i_src = self.y_src @ (self.e_src[:, None] - v_src)
        else:
            i_src = self._y_net_src @ v + self._inc_src @ i_comp
        s_sub = v_src * np.conj(i_src)
        p_ports = (u * np.conj(i_actual)).real.sum(axis=0)
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

        Chord Newton on ``F(u) = u - u0 + K i_c(u) = 0``: the LU factors of the (analytic)
        Jacobian are kept from one solve to the next and refreshed at the current point whenever
        an iteration reduces the residual by less than the factor :data:`_CHORD_RATE` (a full
        Newton step then); :meth:`voltage_sensitivity` also leaves fresh factors at its operating
        point. It gives up when the residual exceeds 10 pu or ``max_iter`` is reached. It
        converges when the largest fixed-point update of a port voltage,
        ``|u - (u0 - K i_c(u))|``, is below ``tol_pu``; the node voltages are then those of the
        network driven by the last currents ``i_c(u)`` (whose port voltages are that update). Converged columns with a port
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
        u = np.empty((self.k.shape[0], n_cols), dtype=complex)
        u[:] = u_init
        ctx = self._prepared(scale, n_cols)
        s_conj = np.conj(s_pq_va * self.live_pq)
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
                    u[:, j : j + 1], _column(ctx, j, lam[j]), s_conj[:, j : j + 1] * lam[j]
                )
            if converged and (lam == 1.0).any():  # never warm-start from a rejected column
                last = np.flatnonzero(lam == 1.0)[-1]
                self.u_last = u[:, last : last + 1].copy()
            self._jlu = None  # taken at a bad point: rebuild from the warm start next time
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
        ctx: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
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
        low = (np.abs(u) < self._v_check).any(axis=0) if converged else np.full(n_cols, n_cols == 1)
        if low.any():
            check = np.flatnonzero(low)
            for j in check.tolist():
                u[:, j : j + 1], lam[j] = self._principal(_column(ctx, j), s_conj[:, j : j + 1], tol_pu)
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

        Implicit function theorem on ``F(u, P) = u - u0 + K i_c(u) + K_m i_m(P) = 0``, where
        ``i_m = conj(P s_dir) / conj(V_m)`` is the added load's current and ``K_m`` the port
        voltages it moves per ampere: ``du/dP = -J^-1 K_m conj(s_dir) / conj(V_m)`` with the
        Jacobian ``J`` of :meth:`_jacobian` (every load model as the solver models it), then
        ``dV = -W di_c - Z_m di_m``. The point is solved unless it is the last column the last
        :meth:`solve` accepted; one LU factorization per point, shared by calls at the same
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
            ctx = self._prepared(scale, 1)
            s_conj = np.conj(s_pq_va * self.live_pq)
            dx, dy = self._i_comp_derivatives(u, ctx, s_conj)
            lu, piv, _ = dgetrf(self._jacobian_of(dx[:, 0], dy[:, 0]), overwrite_a=True)
            lin = _Linearization(scale.copy(), s_pq_va.copy(), v, dx, dy, (lu, piv))
            self._lin = lin
        self._jlu = lin.lu
        nodes = np.asarray(nodes, dtype=int)
        v_m = lin.v[nodes]
        with np.errstate(divide="ignore", invalid="ignore"):
            c = np.where(v_m != 0, np.conj(s_dir) / np.conj(v_m), 0.0)  # A drawn per W
        z_m = np.concatenate([self.z[:, nodes], np.zeros((1, nodes.size))])  # last row: ground
        du = self._chord_solve((z_m[self._port_to] - z_m[self._port_from]) * c)
        return lin.v, -(self.w @ (lin.dx * du.real + lin.dy * du.imag) + z_m[:-1] * c)
