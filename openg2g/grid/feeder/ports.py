"""The nonlinear part of the phase-frame power flow: the load ports and the currents they draw.

A port is a two-terminal branch whose current depends on its own voltage ``u`` (V): one per phase
branch of the feeder's own loads (OpenDSS load models 1, 2, 4, 5 with their low/high voltage
fallbacks, :class:`LoadKernel`) and one per node and voltage dependence carrying wye injections
(datacenters, PV, storage, extra loads: constant power at any voltage, or OpenDSS load model 1
with its band). The network's admittance already holds each load's nominal admittance
``y_nom``; what the ports add to it is the compensation current ``i_c(u) = i(u) - y_nom u`` (the
OpenDSS "compensation current"; ``y_nom = 0`` on a PQ port). :class:`PortCurrents` evaluates
``i_c`` and its derivatives for the dense and the sparse power flow alike.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from openg2g.grid.feeder.model import FeederModel
from openg2g.grid.feeder.network import LoadPorts, NodeIndex, Switching, energized

__all__ = [
    "OPENDSS_VLOWPU",
    "KernelContext",
    "LoadKernel",
    "PortCurrents",
    "band_power_va",
    "column",
    "columns",
]

OPENDSS_VLOWPU = 0.5
"""OpenDSS's default ``Vlowpu``: below it a model-1 load is its nominal admittance (pu)."""

KernelContext = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""The per-solve constants of :meth:`LoadKernel.prepare`."""


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
        # the same constants one-dimensional: the fallback gathers them by branch at every iteration
        self._vlow_1d, self._v95_1d = self.vlow[:, 0].copy(), self.v95[:, 0].copy()
        self._yeq_1d, self._i_low_1d = yeq, i_low
        self._slope_1d, self._y_high_1d = self.slope[:, 0].copy(), self.y_high[:, 0].copy()

    def branch_constants(self) -> tuple[np.ndarray, ...]:
        """The constants :func:`~openg2g.grid.feeder.kernels.port_currents` takes per branch, one
        dimensional: the row of each branch among the voltage-dependent ones (-1 for none), their
        exponents and base voltages (V), then ``vlow``, ``v95``, ``vmax`` (V), ``yeq`` (S),
        ``i_low`` (A), ``slope`` (S) and ``y_high`` (S) per branch."""
        pow_row = np.full(self.s0c.shape[0], -1)
        pow_row[self.pow_idx] = np.arange(self.pow_idx.size)
        per_pow = (self.ap[:, 0].copy(), self.aq[:, 0].copy(), self.vb_pow[:, 0].copy())
        fallback = (self._vlow_1d, self._v95_1d, self.vmax[:, 0].copy(), self._yeq_1d, self._i_low_1d)
        return (pow_row, *per_pow, *fallback, self._slope_1d, self._y_high_1d)

    def prepare(self, scale: np.ndarray, n_cols: int) -> KernelContext:
        """Per-solve constants at load ``scale`` (``(n, 1)`` or ``(n, n_cols)``): numerator of the
        normal-range current, P and Q of the voltage-dependent branches, and the scale itself."""
        sc = np.broadcast_to(scale, (self.s0c.shape[0], n_cols))
        num = self.s0c * sc
        return num, self.p0[self.pow_idx] * sc[self.pow_idx], self.q0[self.pow_idx] * sc[self.pow_idx], sc

    def currents(self, u: np.ndarray, ctx: KernelContext, out: np.ndarray | None = None) -> np.ndarray:
        """Branch currents (A) for branch voltages ``u`` (V, ``(n, cols)``); ``ctx`` from
        :meth:`prepare`; written into ``out`` (C-ordered, shape of ``u``) when given."""
        num, p_pow, q_pow, sc = ctx
        vm = np.abs(u)
        if self.pow_idx.size:
            num = num.copy()
            r = vm[self.pow_idx] / self.vb_pow
            num[self.pow_idx] = p_pow * r**self.ap - 1j * q_pow * r**self.aq
        i = np.divide(num, np.conj(u), out=out)
        fallen = (vm <= self.v95) | (vm > self.vmax)
        if fallen.any():  # evaluated where it applies only: usually a few branches of many
            # flat positions: a gather from one axis is cheaper than by (row, column) pairs
            at = np.flatnonzero(fallen)
            rows = at // u.shape[1]
            i.put(at, self._fallback(rows, vm.take(at), sc.take(at)) * u.take(at))
        return i

    def derivatives(self, u: np.ndarray, ctx: KernelContext) -> tuple[np.ndarray, np.ndarray]:
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
        # a branch of a de-energized section (a line open, a fault's far side) is at 0 V: its
        # quotients are inf or NaN here, and its derivatives those of its nominal admittance below
        with np.errstate(divide="ignore", invalid="ignore"):
            i = num / ubar
            b = a * u / ubar - i / ubar
        out = (vm <= self.v95) | (vm > self.vmax)
        if out.any():
            r, c = np.nonzero(out)
            vo, so, uo = vm[r, c], sc[r, c], u[r, c]
            mid = (vo > self.vlow[r, 0]) & (vo <= self.v95[r, 0])
            with np.errstate(divide="ignore", invalid="ignore"):  # vo = 0 outside `mid` only
                dy_dm = np.where(mid, so * (self.slope[r, 0] * self.vlow[r, 0] - self.i_low[r, 0]) / (vo * vo), 0.0)
                a[r, c] = self._fallback(r, vo, so) + 0.5 * dy_dm * vo
                b[r, c] = np.where(mid, 0.5 * dy_dm * uo * uo / vo, 0.0)
        return a, b

    def _fallback(self, rows: np.ndarray, vm: np.ndarray, sc: np.ndarray) -> np.ndarray:
        """Admittance (S) of branches ``rows`` outside their normal range at voltage magnitudes
        ``vm`` (V) and load scales ``sc`` (one entry per element of ``rows``)."""
        vlow = self._vlow_1d[rows]
        y_mid = (self._i_low_1d[rows] + self._slope_1d[rows] * (vm - vlow)) * sc / vm
        return np.where(
            vm <= vlow, self._yeq_1d[rows] * sc, np.where(vm <= self._v95_1d[rows], y_mid, self._y_high_1d[rows] * sc)
        )


def column(ctx: KernelContext, j: int, factor: float = 1.0) -> KernelContext:
    """Column ``j`` of :meth:`LoadKernel.prepare`'s constants with the load scaled by ``factor``
    (every one of them is linear in the load)."""
    a, b, c, d = (x[:, j : j + 1] * factor for x in ctx)
    return a, b, c, d


def columns(ctx: KernelContext, keep: np.ndarray | slice) -> KernelContext:
    """The columns ``keep`` (a boolean mask or a slice) of :meth:`LoadKernel.prepare`'s constants,
    as contiguous arrays (a slice's strided view slows every operation on a large feeder)."""
    a, b, c, d = (np.ascontiguousarray(x[:, keep]) for x in ctx)
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


class PortCurrents:
    """The ports of a feeder at one switching state: load branches first, then PQ ports.

    :param model: the feeder.
    :param nodes: its node numbering.
    :param ports: its load branches.
    :param pq_nodes: node of each PQ port (wye injections).
    :param state: taps, capacitor and line states (which nodes are energized).
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
        pq_band: np.ndarray | None,
    ) -> None:
        n_q = len(pq_nodes)
        self.n_load = len(ports.from_node)
        self.kernel = LoadKernel(ports)
        self._pq_dep, self._pq_kernel = _pq_model1(nodes, pq_nodes, pq_band)
        # the ports as node pairs (-1 = ground): u = V[port_from] - V[port_to]
        self.port_from = np.concatenate([ports.from_node, pq_nodes])
        self.port_to = np.concatenate([ports.to_node, np.full(n_q, -1)])
        live = energized(model, nodes, state)
        live_ext = np.append(live, True)  # index -1 = ground
        self.live_branch = (live_ext[ports.from_node] & live_ext[ports.to_node])[:, None].astype(float)
        self.live_pq = live[pq_nodes][:, None].astype(float)
        self.dead_nodes = ~live
        self.any_dead_node = bool(self.dead_nodes.any())
        self.dead_ports = np.concatenate([self.live_branch[:, 0], self.live_pq[:, 0]]) == 0
        self.dead_branch = self.live_branch[:, 0] == 0
        self.dead_pq = self.live_pq[:, 0] == 0
        self.n_dead = int(self.dead_branch.sum() + self.dead_pq.sum())
        self.y_nominal = ports.y_nominal_s
        v_ref = np.concatenate([ports.v_base_v, nodes.v_base_v[pq_nodes]])
        self.v_ref = v_ref[:, None]
        from openg2g.grid.feeder.kernels import port_currents  # numba loads when a feeder is first built

        self._port_currents: Callable[..., None] = port_currents
        self._kernel_constants = (
            *self.kernel.branch_constants(),
            np.ascontiguousarray(self.y_nominal, dtype=complex),
            self.dead_ports,
        )
        # column count -> (branch scales, the load kernel's constants at them) of the last solve
        self._ctx: dict[int, tuple[tuple[tuple[int, ...], bytes], KernelContext]] = {}

    def prepared(self, scale: np.ndarray, n_cols: int) -> KernelContext:
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

    def i_comp(self, u: np.ndarray, ctx: KernelContext, s_pq_conj: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Compensation currents (load current minus what ``Y`` already holds) and actual currents
        (A) at port voltages ``u`` (V, ``(n_ports, cols)``), for load constants ``ctx`` (from
        :meth:`prepared`) and the PQ ports' ``conj(S)`` (VA).

        One compiled pass (:func:`~openg2g.grid.feeder.kernels.port_currents`, the same floats as
        :meth:`LoadKernel.currents`); PQ ports with an OpenDSS model-1 band are then evaluated by
        their own kernel."""
        i_actual = np.empty(u.shape, dtype=complex)  # load branches' rows, then the PQ ports'
        i_comp = np.empty(u.shape, dtype=complex)
        self._port_currents(u, *ctx, s_pq_conj, *self._kernel_constants, i_actual, i_comp)
        if self._pq_kernel is not None:
            d = self._pq_dep
            uq = self._live_voltages(u)[1][d]
            iq = self._pq_kernel.currents(uq, self._pq_kernel.prepare(s_pq_conj[d], uq.shape[1]))
            iq[self.dead_pq[d]] = 0.0
            i_actual[self.n_load + d] = i_comp[self.n_load + d] = iq
        return i_comp, i_actual

    def _live_voltages(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Load-branch and PQ-port voltages to evaluate the load models at: ``u``, with 1 V on
        de-energized ports (they tend to exactly 0 V, where a load model is 0/0; their currents
        are zero anyway)."""
        if self.n_dead:
            u = np.where(self.dead_ports[:, None], 1.0, u)
        return u[: self.n_load], u[self.n_load :]

    def i_comp_derivatives(
        self, u: np.ndarray, ctx: KernelContext, s_pq_conj: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Derivatives of the compensation currents of :meth:`i_comp` with respect to the real and
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
