"""Voltage sensitivity of the monitored bus-phases to power drawn at one bus, by finite differences.

Central differences of +/- :data:`SENS_DP_W` per phase around an operating point, all six
perturbed points solved in one batch call of the phase-frame solver, to a tight tolerance so the
difference is not lost in the solver's own error. The perturbation goes on a constant-power PQ
port at the bus (one is added when the bus has none), so the power step is exact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from openg2g.grid.injections import tan_phi
from openg2g.grid.solver import CompiledNetwork

__all__ = ["SENS_DP_W", "finite_difference_sensitivity"]

SENS_DP_W = 1000.0
"""Per-phase active power step of the finite-difference sensitivity (W)."""


def finite_difference_sensitivity(
    net: CompiledNetwork | None,
    build: Callable[[np.ndarray, np.ndarray], CompiledNetwork],
    pq_nodes: np.ndarray,
    pq_band: np.ndarray,
    scale: np.ndarray,
    s_pq: np.ndarray,
    bus_nodes: Sequence[int],
    power_factor: float,
    mon_idx: np.ndarray,
    v_base_v: np.ndarray,
) -> np.ndarray:
    """dV/dP (pu/W) of the monitored nodes w.r.t. per-phase active power drawn at ``bus_nodes``,
    Q following at ``power_factor``, around the operating point ``(scale, s_pq)``.

    :param net: the compiled network in force (None when it is not a phase-frame network: the
        pandapower mode); solved at the operating point already.
    :param build: compiles a network with the given PQ-port nodes and bands at the switching in force.
    :param pq_nodes: node of each PQ port of ``net``.
    :param pq_band: voltage band per PQ port, NaN rows for constant power.
    :param scale: load-branch scale of the operating point, shape ``(n_branches, 1)``.
    :param s_pq: power drawn at each PQ port at the operating point (VA), shape ``(n_ports, 1)``.
    :param bus_nodes: the bus's nodes, phases a, b, c.
    :param power_factor: power factor of the perturbation.
    :param mon_idx: monitored nodes.
    :param v_base_v: base voltage of every node (V).
    :return: array of shape ``(len(mon_idx), 3)``, columns phases a, b, c.
    """
    constant = np.isnan(pq_band[:, 0])  # perturb a constant-power port: dP is then exact
    extra = [n for n in bus_nodes if n not in set(pq_nodes[constant].tolist())]
    if extra or net is None:
        pq_nodes = np.concatenate([pq_nodes, np.array(extra, dtype=int)])
        constant = np.concatenate([constant, np.ones(len(extra), dtype=bool)])
        band = np.concatenate([pq_band, np.full((len(extra), 2), np.nan)])
        net = build(pq_nodes, band)
        s_pq = np.concatenate([s_pq, np.zeros((len(extra), 1), dtype=complex)])
        net.solve(scale, s_pq)
    pos = [int(np.flatnonzero((pq_nodes == n) & constant)[0]) for n in bus_nodes]
    ds = SENS_DP_W * (1.0 + 1j * tan_phi(power_factor))
    cols = np.repeat(s_pq, 6, axis=1)
    for k, p in enumerate(pos):
        cols[p, 2 * k] += ds
        cols[p, 2 * k + 1] -= ds
    sol = net.solve(scale, cols, tol_pu=1e-12, max_iter=200, u_init=net.u_last[:, :1])
    vm = np.abs(sol.v[mon_idx]) / v_base_v[mon_idx][:, None]
    return (vm[:, 0::2] - vm[:, 1::2]) / (2 * SENS_DP_W)
