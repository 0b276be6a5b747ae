"""Reference solver mode ``solver: pandapower``: pandapower ``runpp_3ph`` on the feeder's
sequence-frame network.

This is approximate by construction: every line is a balanced three-phase line with the
positive/zero-sequence values of its phase matrix (untransposed coupling and missing phases are
lost), a regulator bank is one transformer with the mean of its per-phase taps, all loads are
constant PQ (OpenDSS models 2, 4, 5 are treated as model 1), delta single-phase loads are
placed on one phase, a delta-delta transformer is solved as grounded wye-wye and switch
impedances are raised to 1e-4 ohm/km. On IEEE 13 it is up to about 0.04 pu off the exact
solver (0.014 pu on IEEE 123) and about 100 ms per solve without numba. It exists to compare
with pandapower, not to run studies.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pandapower as pp
from pandapower.powerflow import LoadflowNotConverged

from openg2g.grid.feeder.library import Feeder
from openg2g.grid.feeder.network import NodeIndex, Switching
from openg2g.grid.feeder.powerflow import Solution

__all__ = ["PandapowerNetwork"]


class PandapowerNetwork:
    """A feeder's pandapower net at one switching state, solved with ``runpp_3ph``.

    Same ``solve`` signature as :class:`~openg2g.grid.feeder.solver.CompiledNetwork`; columns are
    solved one after the other.
    """

    def __init__(
        self, feeder: Feeder, nodes: NodeIndex, load_of_branch: np.ndarray, pq_nodes: np.ndarray, state: Switching
    ) -> None:
        net = copy.deepcopy(feeder.net)
        # runpp_3ph needs a zero-sequence path and nonzero impedances: a delta-delta transformer
        # becomes grounded wye-wye and near-zero switch impedances are raised to 1e-4 ohm/km
        net.trafo.loc[net.trafo.vector_group == "Dd", "vector_group"] = "YNyn"
        for col in ("r_ohm_per_km", "x_ohm_per_km", "r0_ohm_per_km", "x0_ohm_per_km"):
            net.line[col] = net.line[col].clip(lower=1e-4)
        self.net = net
        self.nodes = nodes
        self.load_of_branch = load_of_branch
        self.pq_nodes = pq_nodes
        bus_idx = {name: i for i, name in zip(net.bus.index, net.bus.name)}
        self.bus_idx = bus_idx
        for i, row in net.trafo.iterrows():
            if row.get("bank"):
                units = [(t.name, t) for t in feeder.model.transformers if t.bank == row["bank"]]
                steps = [(tap - 1.0) / t.step_pu for name, t in units for tap in state.taps_pu[name]]
                net.trafo.at[i, "tap_pos"] = round(float(np.mean(steps)))
        net.shunt["in_service"] = [state.capacitors[n] for n in net.shunt.name]
        net.line["in_service"] = [state.lines[n] for n in net.line.name]
        self.base_p = net.asymmetric_load[["p_a_mw", "p_b_mw", "p_c_mw"]].to_numpy().copy()
        self.base_q = net.asymmetric_load[["q_a_mvar", "q_b_mvar", "q_c_mvar"]].to_numpy().copy()
        self.n_file_loads = len(net.asymmetric_load)
        # one injection load per bus carrying PQ ports
        self.pq_rows: list[tuple[int, int, str]] = []  # (pq port, asymmetric_load row, phase)
        rows: dict[str, int] = {}
        for port, node in enumerate(pq_nodes):
            bus, ph = nodes.names[node].rsplit(".", 1)
            if bus not in rows:
                rows[bus] = pp.create_asymmetric_load(net, bus_idx[bus], name=f"openg2g_pq_{bus}")
            self.pq_rows.append((port, rows[bus], ph))
        self.u_last = np.zeros((0, 1), dtype=complex)

    def solve(
        self,
        scale: np.ndarray,
        s_pq_va: np.ndarray,
        tol_pu: float = 1e-8,
        max_iter: int = 100,
        u_init: np.ndarray | None = None,
    ) -> Solution:
        """Solve each column with ``runpp_3ph`` (``tol_pu``/``u_init`` are not used)."""
        net = self.net
        n_cols = s_pq_va.shape[1]
        v = np.zeros((len(self.nodes), n_cols), dtype=complex)
        s_sub = np.zeros((3, n_cols), dtype=complex)
        losses = np.zeros(n_cols)
        per_load = np.ones(self.n_file_loads)
        sc = np.broadcast_to(scale, (len(self.load_of_branch), n_cols))
        ok = True
        for j in range(n_cols):
            per_load[self.load_of_branch] = sc[:, j]
            al = net.asymmetric_load
            al.loc[al.index[: self.n_file_loads], ["p_a_mw", "p_b_mw", "p_c_mw"]] = self.base_p * per_load[:, None]
            al.loc[al.index[: self.n_file_loads], ["q_a_mvar", "q_b_mvar", "q_c_mvar"]] = (
                self.base_q * per_load[:, None]
            )
            for port, row, ph in self.pq_rows:
                al.at[row, f"p_{ph}_mw"] = s_pq_va[port, j].real / 1e6
                al.at[row, f"q_{ph}_mvar"] = s_pq_va[port, j].imag / 1e6
            try:
                # a diverging iteration divides by zero voltages: the results are checked below
                with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                    pp.runpp_3ph(net, max_iteration=max_iter, numba=False)
            except (LoadflowNotConverged, FloatingPointError, np.linalg.LinAlgError):
                ok = False
                continue
            res = net.res_bus_3ph
            eg = net.res_ext_grid_3ph.iloc[0]
            finite = np.isfinite(res[["vm_a_pu", "vm_b_pu", "vm_c_pu"]].to_numpy(dtype=float)).all()
            if not (finite and np.isfinite(eg.to_numpy(dtype=float)).all()):
                ok = False  # pandapower can flag convergence yet return NaN results
                continue
            for k, name in enumerate(self.nodes.names):
                bus, ph = name.rsplit(".", 1)
                i = self.bus_idx[bus]
                mag = res.at[i, f"vm_{ph}_pu"] * self.nodes.v_base_v[k]
                v[k, j] = mag * np.exp(1j * math.radians(res.at[i, f"va_{ph}_degree"]))
            s_sub[:, j] = [complex(eg[f"p_{p}_mw"], eg[f"q_{p}_mvar"]) * 1e6 for p in "abc"]
            p_loads = al[["p_a_mw", "p_b_mw", "p_c_mw"]].to_numpy().sum() * 1e6
            losses[j] = s_sub[:, j].real.sum() - p_loads
        return Solution(
            v=v,
            s_sub_va=s_sub,
            losses_w=losses,
            iterations=1,
            converged=ok,
            collapsed=np.zeros(n_cols, dtype=bool),
            load_fraction=np.ones(n_cols),
        )
